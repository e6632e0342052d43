// Input rates and clocks: any input sample rate, any bit rate, drifting clocks, on the
// CPU reference chain. Each case against the 2-samples-per-bit, 0 ppm run at the same Eb/N0
// and seed (AWGN 8 dB: ~1e-3, so a few hundred packets give thousands of errors and the
// ratio bounds are not counting noise). The target operating points (AWGN 11 dB, edwards3
// 15 dB) are measured with paqd replay in docs/SIGNAL-CHAIN.md.
#include "chain_fixture.hpp"
#include "runtime/receiver_run.hpp"
#include "dsp/input_stage.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>

using namespace paq;
using namespace paq::dsp;
using namespace paq::sim;

namespace {

struct field_run {
    std::vector<cf32> samples;
    sim_truth truth;
    double rate_hz = 0.0;
};

field_run simulate_at(sim_config sc, double seconds)
{
    simulator sim(sc);
    field_run r;
    r.rate_hz = sc.sample_rate_hz;
    sim.generate(static_cast<std::size_t>(seconds * sc.sample_rate_hz), r.samples);
    r.truth = sim.truth();
    return r;
}

run_summary receive(const field_run& r, double bit_rate_hz, std::size_t batch = 1'000'000,
                    const std::function<void(const batch_output&)>& on_batch = {})
{
    receiver_config rc;
    rc.batch_samples = batch;
    rc.bit_rate_hz = bit_rate_hz;
    rc.input_sample_rate_hz = r.rate_hz;
    cpu_backend be(rc);
    return runtime::run_receiver(be, rc, pn_pattern::pn15, r.rate_hz, r.samples, on_batch);
}

sim_config awgn8(std::uint64_t seed)
{
    sim_config sc;
    sc.preset = "awgn";
    sc.ebn0_db = 8.0;
    sc.cfo_hz = 20e3;
    sc.seed = seed;
    return sc;
}

/// Every path within `bound` of the reference's BER, with enough errors to mean something.
/// The unequalized path gets 1.3x: it has no equalizer to absorb the fractional timing, and a
/// resampled or re-timed input puts its decision instants at another fraction of a sample than
/// the 2-samples-per-bit reference's (measured 1.24x at 61.44 MS/s, seed 1101).
void expect_within(const run_summary& got, const run_summary& ref, double equalized_bound, const std::string& what)
{
    for (int p = 0; p < chain::num_paths; ++p) {
        const double bound = p == 0 ? std::max(equalized_bound, 1.3) : equalized_bound;
        const auto& g = got.paths[static_cast<std::size_t>(p)];
        const auto& r = ref.paths[static_cast<std::size_t>(p)];
        ASSERT_GT(r.bit_errors, 500u) << what << " " << r.name << ": too few errors for a ratio";
        EXPECT_TRUE(g.locked) << what << " " << g.name;
        EXPECT_LE(g.ber, bound * r.ber) << what << " " << g.name << ": " << g.ber << " against " << r.ber;
        EXPECT_GE(g.bits_checked, r.bits_checked * 9 / 10) << what << " " << g.name;
    }
}

}  // namespace

TEST(field_rates, every_input_rate_within_1_2x_of_two_samples_per_bit)
{
    // 10.3125 Mbit/s at the rates a range's digitizers run at, against 20.625 MS/s.
    const double seconds = 0.2;
    const auto ref = receive(simulate_at(awgn8(1101), seconds), 10.3125e6);
    for (const double rate : {25e6, 30.72e6, 41.25e6, 61.44e6}) {
        auto sc = awgn8(1101);
        sc.sample_rate_hz = rate;
        const auto got = receive(simulate_at(sc, seconds), 10.3125e6);
        expect_within(got, ref, 1.2, "at " + std::to_string(rate / 1e6) + " MS/s");
        EXPECT_EQ(got.packets_skipped, 0u) << rate;
        EXPECT_NEAR(static_cast<double>(got.packets_found), static_cast<double>(ref.packets_found), 2.0) << rate;
    }
}

TEST(field_rates, bit_rates_from_1_to_30_mbit)
{
    for (const double bit_rate : {1e6, 30e6}) {
        auto sc = awgn8(1102);
        sc.bit_rate_hz = bit_rate;
        sc.sample_rate_hz = 2.0 * bit_rate;
        const auto ref = receive(simulate_at(sc, 50 * 12672 / (2.0 * bit_rate) * 1.0), bit_rate);
        sc.sample_rate_hz = 3.3 * bit_rate;  // an odd 3.3 samples per bit
        const auto got = receive(simulate_at(sc, 50 * 12672 / (2.0 * bit_rate) * 1.0), bit_rate);
        EXPECT_GE(got.packets_found, 45u) << bit_rate;
        for (int p = 0; p < chain::num_paths; ++p) {
            const auto& g = got.paths[static_cast<std::size_t>(p)];
            const auto& r = ref.paths[static_cast<std::size_t>(p)];
            // As expect_within: both runs locked and checked bits, the odd rate nearly as many
            // as the reference (so a BER below the bound is not one of few bits).
            EXPECT_TRUE(r.locked) << bit_rate << " reference " << r.name;
            EXPECT_TRUE(g.locked) << bit_rate << " " << g.name;
            EXPECT_GT(r.bits_checked, 0u) << bit_rate << " reference " << r.name;
            EXPECT_GE(g.bits_checked, r.bits_checked * 9 / 10) << bit_rate << " " << g.name;
            EXPECT_LE(g.ber, 1.5 * r.ber + 1e-4) << bit_rate << " " << g.name;
        }
    }
}

TEST(field_rates, clock_offsets_to_200_ppm_within_1_3x_of_0_ppm)
{
    const double seconds = 0.2;
    const auto ref = receive(simulate_at(awgn8(1103), seconds), 10.3125e6);
    for (const double ppm : {-200.0, -50.0, 100.0, 200.0}) {
        auto sc = awgn8(1103);
        sc.clock_ppm = ppm;
        const auto got = receive(simulate_at(sc, seconds), 10.3125e6);
        expect_within(got, ref, 1.3, std::to_string(ppm) + " ppm");
        EXPECT_NEAR(got.mean_clock_ppm, ppm, 2.0);
        EXPECT_EQ(got.packets_clock_corrected, got.packets_found);
    }
    // Resampled and clock-offset at once: 30.72 MS/s and -150 ppm.
    auto sc = awgn8(1103);
    sc.sample_rate_hz = 30.72e6;
    sc.clock_ppm = -150.0;
    const auto got = receive(simulate_at(sc, seconds), 10.3125e6);
    expect_within(got, ref, 1.3, "30.72 MS/s at -150 ppm");
    EXPECT_NEAR(got.mean_clock_ppm, -150.0, 2.0);
}

TEST(field_rates, a_drifting_clock_is_tracked)
{
    // 0 -> 100 ppm over 0.5 s: 20x faster than the 0 -> 100 ppm over 10 s the receiver must follow.
    const double seconds = 0.5;
    auto sc = awgn8(1104);
    const auto ref = receive(simulate_at(sc, seconds), 10.3125e6);
    sc.clock_drift_ppm_per_s = 200.0;
    std::vector<double> ppm_seen;
    const auto got = receive(simulate_at(sc, seconds), 10.3125e6, 1'000'000, [&](const batch_output& o) {
        for (const auto& rec : o.packets) ppm_seen.push_back(rec.clock_ppm);
    });
    expect_within(got, ref, 1.3, "drift 200 ppm/s");
    ASSERT_GT(ppm_seen.size(), 100u);
    EXPECT_LT(ppm_seen.front(), 10.0);
    EXPECT_GT(ppm_seen.back(), 85.0);
}

TEST(field_rates, rates_that_cannot_be_served_are_a_clear_error)
{
    receiver_config rc;
    rc.input_sample_rate_hz = 15e6;  // 1.45 samples per bit at 10.3125 Mbit/s
    auto errors = rc.validate();
    ASSERT_EQ(errors.size(), 1u);
    EXPECT_NE(errors[0].find("15 MS/s"), std::string::npos) << errors[0];
    EXPECT_NE(errors[0].find("10.3125 Mbit/s"), std::string::npos) << errors[0];
    EXPECT_NE(errors[0].find("allowed 2 .. 6.4 samples per bit"), std::string::npos) << errors[0];
    EXPECT_THROW(cpu_backend{rc}, std::invalid_argument);
    rc.input_sample_rate_hz = 70e6;  // 6.8 samples per bit
    EXPECT_EQ(rc.validate().size(), 1u);
    rc.input_sample_rate_hz = 25e6;
    rc.bit_rate_hz = 40e6;
    EXPECT_FALSE(rc.validate().empty());
    // Samples at a rate the receiver was not made for: refused, never decoded as if right.
    receiver_config two;
    cpu_backend be(two);
    std::vector<cf32> x(100'000);
    EXPECT_THROW((void)runtime::run_receiver(be, two, pn_pattern::pn15, 25e6, x), std::invalid_argument);
}

TEST(field_rates, every_packet_once_with_its_input_start_across_batches_and_a_gap)
{
    // 41.25 MS/s (4 samples per bit) at +80 ppm, small batches (many boundaries) and a gap:
    // each packet once, its start within 2 input samples of the truth, none missed in sequence
    // but the ones the gap cut.
    auto sc = awgn8(1105);
    sc.ebn0_db = 12.0;
    sc.sample_rate_hz = 41.25e6;
    sc.clock_ppm = 80.0;
    const auto run = simulate_at(sc, 0.08);
    receiver_config rc;
    rc.batch_samples = 90'001;
    rc.input_sample_rate_hz = sc.sample_rate_hz;
    const auto g = make_input_geometry(rc);
    cpu_backend be(rc);
    const std::size_t cut = static_cast<std::size_t>(run.truth.packet_start_positions[6]) + 9000, lost = 5000;
    auto bt = batcher(rc.batch_samples, g.guard_before, g.guard_after);
    bt.push(std::span<const cf32>(run.samples).first(cut));
    bt.gap(lost);
    bt.push(std::span<const cf32>(run.samples).subspan(cut + lost));
    bt.finish();
    std::map<std::uint64_t, int> seen;
    while (auto b = bt.pop()) {
        for (const auto& rec : be.process(*b).packets) ++seen[rec.start_sample];
    }
    std::size_t matched = 0;
    for (std::size_t k = 0; k < run.truth.packet_start_positions.size(); ++k) {
        const double t = run.truth.packet_start_positions[k];
        if (t < 600 || t + 12672 * g.ratio + 200 > static_cast<double>(run.samples.size())) continue;
        const bool cut_by_gap = t < static_cast<double>(cut + lost) && t + 12672 * g.ratio > static_cast<double>(cut);
        const auto it = std::find_if(seen.begin(), seen.end(), [&](const auto& kv) {
            return std::abs(static_cast<double>(kv.first) - t) <= 2.0 * g.ratio + 1.0;
        });
        if (cut_by_gap) {
            EXPECT_EQ(it, seen.end()) << "packet " << k << " spans the gap";
            continue;
        }
        ASSERT_NE(it, seen.end()) << "packet " << k << " at " << t << " not found";
        EXPECT_EQ(it->second, 1) << "packet " << k << " processed " << it->second << " times";
        ++matched;
    }
    EXPECT_GE(matched, 15u);
    for (const auto& [start, n] : seen) EXPECT_EQ(n, 1) << start;
}
