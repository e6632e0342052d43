// Shared helpers for the chain tests: simulate, run, summarise. Each test states its seed.
#pragma once

#include "dsp/batcher.hpp"
#include "dsp/cpu_backend.hpp"
#include "dsp/run_tally.hpp"
#include "runtime/receiver_run.hpp"
#include "sim/simulator.hpp"
#include "dsp/waveform.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

namespace paq::test {

struct sim_run {
    std::vector<cf32> samples;
    sim::sim_truth truth;
    std::size_t complete_packets = 0;  ///< packets entirely inside the recording
    /// Also counting a packet that ends within 2 samples after the recording: the receiver's
    /// start estimate may differ from the truth by a sample, so it may call that one complete.
    std::size_t possible_packets = 0;
};

inline sim_run simulate(const sim::sim_config& cfg, std::size_t packets)
{
    sim_run r;
    sim::simulator sim(cfg);
    sim.generate((packets + 1) * waveform::L_pkt, r.samples);
    r.truth = sim.truth();
    for (auto s : r.truth.packet_starts) {
        // A packet in the first 256 samples of a recording cannot be told from one cut by
        // the start (dsp/cpu_backend.cpp): the receiver counts it as truncated.
        if (s >= 258 && s + waveform::L_pkt <= r.samples.size()) ++r.complete_packets;
        if (s + waveform::L_pkt <= r.samples.size() + 2) ++r.possible_packets;
    }
    return r;
}

inline dsp::run_summary run_chain(std::span<const cf32> samples, const dsp::receiver_config& rc = {},
                                  dsp::pn_pattern pattern = dsp::pn_pattern::pn15)
{
    dsp::cpu_backend be(rc);
    return runtime::run_receiver(be, rc, pattern, 20.625e6, samples);
}

/// A finished batcher over x, with `lost` samples dropped after the first `cut` (a gap; none
/// when lost is 0).
inline dsp::batcher batched(std::span<const cf32> x, std::size_t batch_samples, std::size_t cut = 0, std::size_t lost = 0)
{
    dsp::batcher bt(batch_samples);
    if (lost) {
        bt.push(x.first(cut));
        bt.gap(lost);
        bt.push(x.subspan(cut + lost));
    } else {
        bt.push(x);
    }
    bt.finish();
    return bt;
}

/// Every path of `got` locked and its BER within `bound` times `ref`'s (which must have more
/// than 300 errors on every path, so that a ratio means something); prints each ratio.
inline void expect_every_path_within(const dsp::run_summary& got, const dsp::run_summary& ref, double bound, const std::string& what)
{
    for (int p = 0; p < dsp::chain::num_paths; ++p) {
        const auto& g = got.paths[static_cast<std::size_t>(p)];
        const auto& r = ref.paths[static_cast<std::size_t>(p)];
        ASSERT_GT(r.bit_errors, 300u) << what << " " << r.name << ": too few errors for a ratio";
        EXPECT_TRUE(g.locked) << what << " " << g.name;
        EXPECT_LE(g.ber, bound * r.ber) << what << " " << g.name << ": " << g.ber << " against " << r.ber;
        std::printf("%s %s: %.3e against %.3e (%.3fx)\n", what.c_str(), g.name.c_str(), g.ber, r.ber, g.ber / r.ber);
    }
}

inline dsp::receiver_config small_batches()
{
    dsp::receiver_config rc;
    rc.batch_samples = 150'000;  // several batches per test recording: boundaries get exercised
    return rc;
}

}  // namespace paq::test
