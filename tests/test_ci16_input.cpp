// ci16 input at its own width: a ci16 recording stays ci16 through the
// batcher and the worker pool up to the backend, which converts (the CPU here; the GPU on the
// device, tests/test_gpu_backend.cpp). Everything must come out as if the samples had been
// converted on reading: the same windows, the same packets, the same bits, the same counters.
#include "chain_fixture.hpp"
#include "ci16_fixture.hpp"

#include "daemon/replay.hpp"
#include "dsp/batcher.hpp"
#include "dsp/cpu_backend.hpp"
#include "sim/simulator.hpp"
#include "io/sample_file.hpp"
#include "io/sample_format.hpp"
#include "runtime/receiver_run.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <random>
#include <vector>

using namespace paq;
using namespace paq::dsp;
using namespace paq::sim;

namespace {

/// A run over the ci16 samples kept at their width, read in uneven pieces.
run_summary run_ci16(batch_processor& be, const receiver_config& rc, double rate_hz, const std::vector<ci16>& q, float scale,
                     std::vector<batch_output>* outs)
{
    std::size_t pos = 0, piece = 0;
    return runtime::run_receiver_ci16(
        be, rc, pn_pattern::pn15, rate_hz, scale,
        [&](std::span<ci16> out) {
            const std::size_t want = std::min<std::size_t>({out.size(), q.size() - pos, 70'001 + 13'337 * (piece++ % 7)});
            std::copy_n(q.begin() + static_cast<std::ptrdiff_t>(pos), want, out.begin());
            pos += want;
            return want;
        },
        [&](const batch_output& o) {
            if (outs) outs->push_back(o);
        });
}

run_summary run_cf32(batch_processor& be, const receiver_config& rc, double rate_hz, const std::vector<cf32>& x,
                     std::vector<batch_output>* outs)
{
    return runtime::run_receiver(be, rc, pn_pattern::pn15, rate_hz, x, [&](const batch_output& o) {
        if (outs) outs->push_back(o);
    });
}

void expect_same_outputs(const std::vector<batch_output>& a, const std::vector<batch_output>& b)
{
    ASSERT_EQ(a.size(), b.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
        ASSERT_EQ(a[i].packets.size(), b[i].packets.size()) << "batch " << i;
        EXPECT_EQ(a[i].truncated_packets, b[i].truncated_packets);
        EXPECT_EQ(a[i].nonfinite_samples, b[i].nonfinite_samples);
        for (std::size_t p = 0; p < a[i].packets.size(); ++p) {
            const auto &x = a[i].packets[p], &y = b[i].packets[p];
            EXPECT_EQ(x.start_sample, y.start_sample);
            EXPECT_EQ(x.metric, y.metric);
            EXPECT_EQ(x.cfo_rad_per_sample, y.cfo_rad_per_sample);
            EXPECT_EQ(x.sigma2, y.sigma2);
            EXPECT_EQ(x.ebn0_db, y.ebn0_db);
            EXPECT_EQ(x.flags, y.flags);
            EXPECT_EQ(x.clock_ppm, y.clock_ppm);
        }
        EXPECT_TRUE(a[i].bits == b[i].bits) << "batch " << i << ": the bits differ";
    }
}

void expect_same_summaries(const run_summary& a, const run_summary& b)
{
    EXPECT_EQ(a.samples, b.samples);
    EXPECT_EQ(a.batches, b.batches);
    EXPECT_EQ(a.packets_found, b.packets_found);
    EXPECT_EQ(a.packets_truncated, b.packets_truncated);
    EXPECT_EQ(a.packets_skipped, b.packets_skipped);
    EXPECT_EQ(a.mean_ebn0_db, b.mean_ebn0_db);
    for (int p = 0; p < chain::num_paths; ++p) {
        const auto &x = a.paths[static_cast<std::size_t>(p)], &y = b.paths[static_cast<std::size_t>(p)];
        EXPECT_EQ(x.bits_checked, y.bits_checked) << x.name;
        EXPECT_EQ(x.bit_errors, y.bit_errors) << x.name;
        EXPECT_EQ(x.resyncs, y.resyncs) << x.name;
        EXPECT_EQ(x.locked, y.locked) << x.name;
    }
}

}  // namespace

TEST(ci16_input, to_cf32_is_what_decode_gives_for_every_value_and_odd_scales)
{
    std::vector<ci16> all;
    for (int v = -32768; v <= 32767; v += 1) all.push_back(ci16{static_cast<std::int16_t>(v), static_cast<std::int16_t>(-1 - v)});
    for (const float scale : {8192.0f, 1.0f, 3.0f, 1234.567f, 32767.0f, 1e-3f}) {
        const auto x = test::decoded(all, scale);
        for (std::size_t k = 0; k < all.size(); ++k) {
            const cf32 y = to_cf32(all[k], scale);
            ASSERT_EQ(std::memcmp(&x[k], &y, sizeof y), 0) << "sample " << all[k].re << " scale " << scale;
        }
    }
}

TEST(ci16_input, batcher_cuts_the_windows_the_cf32_batcher_cuts)
{
    std::mt19937 rng(1501);
    std::uniform_int_distribution<int> v(-32768, 32767);
    std::vector<ci16> q(3'456'789);
    for (auto& s : q) s = ci16{static_cast<std::int16_t>(v(rng)), static_cast<std::int16_t>(v(rng))};
    const float scale = 777.0f;
    const auto x = test::decoded(q, scale);
    // A gap and uneven pieces, the guards of a resampled input.
    batcher_ci16 b16(400'000, 9000, 20000, scale);
    batcher b32(400'000, 9000, 20000);
    std::size_t pos = 0, piece = 0;
    const std::size_t gap_at = 1'700'000, lost = 12'345;
    while (pos < q.size()) {
        if (pos == gap_at) {
            b16.gap(lost);
            b32.gap(lost);
        }
        const std::size_t end = std::min({q.size(), pos + 50'000 + 9'999 * (piece++ % 5), pos < gap_at ? gap_at : q.size()});
        while (pos < end) {
            auto space = b16.write_space();
            const std::size_t n = std::min(space.size(), end - pos);
            std::copy_n(q.begin() + static_cast<std::ptrdiff_t>(pos), n, space.begin());
            b16.commit(n);
            b32.push(std::span<const cf32>(x).subspan(pos, n));
            pos += n;
        }
    }
    b16.finish();
    b32.finish();
    std::size_t windows = 0;
    sample_batch wide;
    for (;;) {
        auto a = b16.pop();
        auto b = b32.pop();
        ASSERT_EQ(a.has_value(), b.has_value());
        if (!a) break;
        ++windows;
        EXPECT_TRUE(a->is_ci16());
        EXPECT_TRUE(a->samples.empty());
        EXPECT_EQ(a->ci16_scale, scale);
        EXPECT_EQ(a->size(), b->size());
        EXPECT_EQ(a->index, b->index);
        EXPECT_EQ(a->first_sample, b->first_sample);
        EXPECT_EQ(a->owned_begin, b->owned_begin);
        EXPECT_EQ(a->owned_end, b->owned_end);
        EXPECT_EQ(a->segment_start, b->segment_start);
        EXPECT_EQ(a->segment_end, b->segment_end);
        EXPECT_EQ(a->lost_samples_before, b->lost_samples_before);
        EXPECT_EQ(a->segment_first_sample, b->segment_first_sample);
        widen_batch(*a, wide);
        ASSERT_EQ(wide.samples.size(), b->samples.size());
        EXPECT_EQ(std::memcmp(wide.samples.data(), b->samples.data(), wide.samples.size() * sizeof(cf32)), 0) << "window " << a->index;
        EXPECT_EQ(wide.first_sample, b->first_sample);
        EXPECT_FALSE(wide.is_ci16());
        // A part of a ci16 window is a ci16 window of the part.
        const auto parts = split_batch(*a, 3, 9000, 20000);
        for (const auto& part : parts) {
            const auto pa = part_batch(*a, part), pb = part_batch(*b, part);
            ASSERT_TRUE(pa.is_ci16());
            EXPECT_EQ(pa.size(), pb.size());
            EXPECT_EQ(pa.owned_begin, pb.owned_begin);
            EXPECT_EQ(to_cf32(pa.samples_ci16.back(), pa.ci16_scale), pb.samples.back());
        }
        b16.recycle(std::move(a->samples_ci16));
    }
    EXPECT_GE(windows, 9u);
    EXPECT_THROW(batcher_ci16(1000, 10, 10, 0.0f), std::invalid_argument);
    EXPECT_THROW(batcher_ci16(1000, 10, 10, std::nanf("")), std::invalid_argument);
    EXPECT_THROW(widen_batch(sample_batch{}, wide), std::invalid_argument);
}

// The whole chain on the CPU: ci16 kept at its width gives the bits of the converted input,
// at 2 samples per bit and resampled (25 MS/s with a clock offset), at a low and a high level.
TEST(ci16_input, chain_gives_the_bits_of_the_converted_input)
{
    struct run_case {
        double rate_hz;
        double clock_ppm;
        float scale;
        std::uint64_t seed;
    };
    for (const run_case c : {run_case{20.625e6, 0.0, 30000.0f, 1502}, run_case{25e6, 80.0, 300.0f, 1503}}) {
        sim_config sc;
        sc.preset = "edwards3";
        sc.ebn0_db = 11.0;
        sc.cfo_hz = 45'000.0;
        sc.sample_rate_hz = c.rate_hz;
        sc.clock_ppm = c.clock_ppm;
        sc.seed = c.seed;
        simulator sim(sc);
        std::vector<cf32> x;
        sim.generate(static_cast<std::size_t>(0.03 * c.rate_hz), x);
        const auto q = test::quantize(x, c.scale);
        const auto xq = test::decoded(q, c.scale);
        receiver_config rc;
        rc.batch_samples = 200'000;
        rc.input_sample_rate_hz = c.rate_hz;
        cpu_backend be(rc);
        std::vector<batch_output> o16, o32;
        const auto s16 = run_ci16(be, rc, c.rate_hz, q, c.scale, &o16);
        const auto s32 = run_cf32(be, rc, c.rate_hz, xq, &o32);
        SCOPED_TRACE("rate " + std::to_string(c.rate_hz) + " scale " + std::to_string(c.scale));
        EXPECT_GE(s16.packets_found, 40u);
        expect_same_summaries(s16, s32);
        expect_same_outputs(o16, o32);
    }
}

TEST(ci16_input, reader_gives_the_stored_samples_and_refuses_cf32)
{
    const auto dir = std::filesystem::temp_directory_path() / ("paq_ci16_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    // Large enough that reads of a million samples are split over threads (2 MiB pieces).
    std::vector<cf32> x(2'500'003);
    std::mt19937 rng(1504);
    std::normal_distribution<float> n(0.0f, 1.0f);
    for (auto& s : x) s = cf32(n(rng), n(rng));
    for (const auto format : {io::sample_format::ci16_le, io::sample_format::cf32_le}) {
        io::sigmf_meta meta;
        meta.format = format;
        meta.sample_rate_hz = 25e6;
        meta.ci16_scale = 2345.0f;
        const auto base = dir / (format == io::sample_format::ci16_le ? "a" : "b");
        {
            auto w = io::sample_file_writer::create_sigmf(base, meta);
            w.write(x);
            w.close();
        }
        auto r = io::sample_file_reader::open(base.string() + ".sigmf-meta");
        auto r2 = io::sample_file_reader::open(base.string() + ".sigmf-meta");
        if (format == io::sample_format::cf32_le) {
            std::vector<ci16> q(10);
            EXPECT_THROW((void)r.read(std::span<ci16>(q)), std::logic_error);
            // cf32 as stored, read in pieces large enough to be split over threads.
            std::vector<cf32> y(x.size());
            std::size_t got = 0;
            while (const std::size_t k = r2.read(std::span<cf32>(y).subspan(got, std::min<std::size_t>(1'100'000, y.size() - got)))) got += k;
            ASSERT_EQ(got, x.size());
            EXPECT_EQ(std::memcmp(y.data(), x.data(), x.size() * sizeof(cf32)), 0);
            continue;
        }
        std::vector<ci16> q(x.size() + 10);
        std::vector<cf32> y(x.size() + 10);
        std::size_t got = 0, reads = 0;
        while (const std::size_t k = r.read(std::span<ci16>(q).subspan(got, std::min<std::size_t>(reads++ % 2 ? 7777 : 1'234'567, q.size() - got)))) {
            got += k;
        }
        ASSERT_EQ(got, x.size());
        ASSERT_EQ(r2.read(std::span<cf32>(y)), x.size());
        for (std::size_t k = 0; k < x.size(); ++k) ASSERT_EQ(to_cf32(q[k], r.info().meta.ci16_scale), y[k]) << k;
    }
    std::filesystem::remove_all(dir);
}

// paqd replay: a ci16 recording goes the ci16 way (said in the summary) and gives what the
// same samples recorded as cf32 give.
TEST(ci16_input, replay_of_a_ci16_recording_equals_its_cf32_twin)
{
    const auto dir = std::filesystem::temp_directory_path() / ("paq_ci16_replay_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    sim_config sc;
    sc.preset = "awgn";
    sc.ebn0_db = 9.0;
    sc.sample_rate_hz = 22e6;
    sc.seed = 1505;
    simulator sim(sc);
    std::vector<cf32> x;
    sim.generate(static_cast<std::size_t>(0.02 * sc.sample_rate_hz), x);
    const float scale = 2000.0f;
    const auto xq = test::decoded(test::quantize(x, scale), scale);
    daemon::replay_result res[2];
    for (int k = 0; k < 2; ++k) {
        io::sigmf_meta meta;
        meta.format = k == 0 ? io::sample_format::ci16_le : io::sample_format::cf32_le;
        meta.sample_rate_hz = sc.sample_rate_hz;
        meta.ci16_scale = scale;
        const auto base = dir / (k == 0 ? "ci16" : "cf32");
        {
            auto w = io::sample_file_writer::create_sigmf(base, meta);
            w.write(k == 0 ? x : xq);
            w.close();
        }
        daemon::replay_options opt;
        opt.backend = config::backend_kind::cpu;
        opt.file = base.string() + ".sigmf-meta";
        opt.receiver.batch_samples = 150'000;
        res[k] = daemon::run_replay(opt);
    }
    EXPECT_EQ(res[0].input_width, "ci16");
    EXPECT_EQ(res[1].input_width, "cf32");
    EXPECT_GE(res[0].engine.tally.packets_found, 25u);
    expect_same_summaries(res[0].engine.tally, res[1].engine.tally);
    EXPECT_EQ(daemon::to_json(res[0])["input_width"], "ci16");
    std::filesystem::remove_all(dir);
}
