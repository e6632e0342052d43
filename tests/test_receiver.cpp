// Estimators, packet detection, batching and bad input.
#include "chain_fixture.hpp"
#include "runtime/backend_factory.hpp"
#include "runtime/receiver_run.hpp"

#include "daemon/replay.hpp"
#include "dsp/batcher.hpp"
#include "dsp/preamble_detector.hpp"
#include "dsp/soqpsk.hpp"
#include "io/sample_file.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <numbers>
#include <random>
#include <set>
#include <thread>

using namespace paq;
using namespace paq::dsp;
using namespace paq::sim;

namespace {

/// Packets found by batcher + detector alone (no equalization), absolute packet starts; with
/// `check`, each start checked with the known sequence (dsp::check_packet_starts), and
/// `moved` counts the starts that moved.
std::vector<std::uint64_t> detect_all(std::span<const cf32> x, std::size_t batch, double threshold = receiver_config{}.detection_threshold,
                                      bool check = false, std::size_t* moved = nullptr)
{
    const auto& t = get_receiver_tables(16384);
    batcher bt(batch);
    bt.push(x);
    bt.finish();
    std::vector<std::uint64_t> starts;
    while (auto b = bt.pop()) {
        if (b->samples.size() < detector_span) continue;
        std::vector<double> m(b->samples.size() - detector_span + 1);
        preamble_metric(b->samples, m, t.preamble_template);
        auto found = locate_packets(*b, m, threshold, t.template_offset);
        if (check) {
            check_packet_starts(b->samples, found, t);
            for (const int k : found.moved_periods) {
                if (moved != nullptr && k != 0) ++*moved;
            }
        }
        for (const long long s : found.starts) starts.push_back(b->first_sample + static_cast<std::uint64_t>(s));
    }
    return starts;
}

/// Found starts one or two preamble periods (give or take the 3 samples a multipath peak may
/// stand off the true start) from a true start.
std::size_t side_lobe_starts(const std::vector<std::uint64_t>& found, const std::vector<std::uint64_t>& truth)
{
    std::size_t n = 0;
    for (const auto f : found) {
        for (const auto s : truth) {
            const long long d = std::llabs(static_cast<long long>(f) - static_cast<long long>(s));
            if ((d >= 29 && d <= 35) || (d >= 61 && d <= 67)) {
                ++n;
                break;
            }
        }
    }
    return n;
}

std::filesystem::path temp_dir(const std::string& name)
{
    auto d = std::filesystem::temp_directory_path() / ("paq_test_" + name + "_" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    return d;
}

}  // namespace

TEST(estimators, cfo_channel_and_noise_against_truth)
{
    // Bounds above the measured values (CFO 5.7e-6 / 3.7e-6 / 3.2e-6 rad/sample with the
    // carrier from the decisions, 3.9e-4 / 1.8e-4 / 7.3e-5 from the known bits alone; channel
    // error 0.031 / 0.013 / 0.0045, sigma2 bias +1.5% / 0.1% / +12.5% at 5 / 10 / 20 dB):
    // channel error is the received-signal power of (h_est - h_true) over that of h_true.
    // The sigma2 bias grows at high Eb/N0: the directions of h the preamble does not observe
    // leave a little signal in the residual.
    const auto& t = get_receiver_tables(16384);
    receiver_config rc;
    cpu_backend be(rc);
    for (const double ebn0 : {5.0, 10.0, 20.0}) {
        sim_config sc;
        sc.preset = "edwards3";
        sc.ebn0_db = ebn0;
        sc.cfo_hz = 120'000.0;
        sc.seed = 400 + static_cast<std::uint64_t>(ebn0);
        sc.start_offset_samples = 0;
        simulator sim(sc);
        std::vector<cf32> x;
        sim.generate(41 * waveform::L_pkt, x);
        const auto taps = sim.channel_taps();
        const double w_true = 2 * std::numbers::pi * sc.cfo_hz / sc.sample_rate_hz;
        const double sigma2_true = sim.noise_variance() / 2.0;
        double cfo_se = 0.0, h_err = 0.0, sigma2_sum = 0.0;
        int n = 0;
        std::vector<std::uint8_t> bits(6 * packed_data_bytes);
        for (std::size_t p = 1; p + 1 < sim.truth().packet_starts.size(); ++p) {
            const auto s = sim.truth().packet_starts[p];
            packet_record rec;
            be.process_packet(x.data(), x.size(), static_cast<long long>(s), rec, bits.data());
            cfo_se += std::pow(rec.cfo_rad_per_sample - w_true, 2);
            // True channel in receiver coordinates: the line of sight at tap 16 of the
            // simulator's filter, rotated by the carrier phase at the packet start.
            std::array<cf64, 38> diff{}, truth{};
            const cf64 rot = std::polar(1.0, std::fmod(w_true * static_cast<double>(s), 2 * std::numbers::pi));
            for (int m = -12; m <= 25; ++m) {
                const int idx = simulator::channel_delay_samples() + m;
                const cf64 ht = (idx >= 0 && idx < static_cast<int>(taps.size())) ? taps[static_cast<std::size_t>(idx)] * rot : cf64(0.0);
                truth[static_cast<std::size_t>(m + 12)] = ht;
                diff[static_cast<std::size_t>(m + 12)] = rec.h[static_cast<std::size_t>(m + 12)] - ht;
            }
            h_err += received_power(diff.data(), 38) / received_power(truth.data(), 38);
            sigma2_sum += rec.sigma2;
            ++n;
        }
        const double cfo_rms = std::sqrt(cfo_se / n);
        h_err /= n;
        const double sigma2_bias = sigma2_sum / n / sigma2_true - 1.0;
        RecordProperty("ebn0_" + std::to_string(static_cast<int>(ebn0)),
                       "cfo_rms=" + std::to_string(cfo_rms) + " h_err=" + std::to_string(h_err) +
                           " sigma2_bias=" + std::to_string(sigma2_bias));
        std::printf("Eb/N0 %4.1f dB: RMS CFO error %.2e rad/sample, channel error %.4f, sigma2 bias %+.3f (rank %zu)\n",
                    ebn0, cfo_rms, h_err, sigma2_bias, t.channel_rank);
        EXPECT_LT(cfo_rms, 2e-5);
        EXPECT_LT(h_err, ebn0 < 10 ? 0.08 : (ebn0 < 20 ? 0.03 : 0.01));
        EXPECT_LT(std::abs(sigma2_bias), ebn0 < 10 ? 0.04 : (ebn0 < 20 ? 0.03 : 0.2));
    }
}

TEST(estimators, channel_support_follows_the_channel)
{
    // The support selection (docs/SIGNAL-CHAIN.md, "Channel support selection") must pick a
    // short support for a line of sight, reach out to a 1 us echo, and reach back when a
    // stronger echo 500 ns late moves the detector's packet start behind the line of sight.
    // Bounds below the measured choices (30 packets each at 12 dB: 30, 30 and 30 of 30; noise
    // alone can make a wider support look better, so a line of sight is not certain).
    const auto& t = get_receiver_tables(16384);
    receiver_config rc;
    cpu_backend be(rc);
    struct scenario {
        const char* name;
        std::vector<channel_ray> rays;
        double min_fraction;
        bool (*ok)(const receiver_tables::channel_support&);
    };
    const std::vector<scenario> cases = {
        {"awgn", {}, 0.75, [](const receiver_tables::channel_support& s) { return s.last_tap <= 6; }},
        {"echo 0.5 at 1000 ns", {{0.5, 1000.0, 1.0}}, 0.95, [](const receiver_tables::channel_support& s) { return s.last_tap >= 21; }},
        {"echo 1.2 at 500 ns", {{1.2, 500.0, 1.0}}, 0.95,
         // The line of sight 500 ns (10.3 samples) before the echo the detector starts on.
         [](const receiver_tables::channel_support& s) { return s.first_tap <= -11; }},
    };
    for (const auto& c : cases) {
        sim_config sc;
        sc.ebn0_db = 12.0;
        sc.timing_offset_samples = 0.37;
        sc.extra_rays = c.rays;
        sc.seed = 450;
        sc.start_offset_samples = 0;
        simulator sim(sc);
        std::vector<cf32> x;
        sim.generate(32 * waveform::L_pkt, x);
        std::vector<std::uint8_t> bits(6 * packed_data_bytes);
        int good = 0, n = 0;
        std::map<std::pair<int, int>, int> histogram;
        for (const auto start : detect_all(x, 4 * waveform::L_pkt)) {
            if (start < 1024 || start + waveform::L_pkt + 1024 > x.size()) continue;
            packet_record rec;
            be.process_packet(x.data(), x.size(), static_cast<long long>(start), rec, bits.data());
            ASSERT_GE(rec.channel_support, 0);
            ASSERT_LT(static_cast<std::size_t>(rec.channel_support), t.supports.size());
            const auto& s = t.supports[static_cast<std::size_t>(rec.channel_support)];
            ++histogram[{s.first_tap, s.last_tap}];
            good += c.ok(s) ? 1 : 0;
            ++n;
        }
        std::string h;
        for (const auto& [k, v] : histogram) h += " [" + std::to_string(k.first) + "," + std::to_string(k.second) + "]x" + std::to_string(v);
        std::printf("%s: %d of %d packets as expected;%s\n", c.name, good, n, h.c_str());
        ASSERT_GT(n, 20) << c.name;
        EXPECT_GE(good, c.min_fraction * n) << c.name << ":" << h;
    }
}

TEST(estimators, channel_support_stays_short_for_a_line_of_sight_at_low_snr)
{
    // At a channel Eb/N0 of 1.2 dB (an AR4JA rate-2/3 link at 3 dB per information bit) the
    // least of 27 noisy risks favours long supports: Mallows' Cp chose a last tap of 11 or more
    // for 160 of 4882 packets of a line of sight (3.3 %), the Bayesian information criterion's
    // weight for 1 (docs/SIGNAL-CHAIN.md, "Channel support selection"). 200 packets, another
    // seed and timing offset than those measurements: at most 1 % may reach tap 11 (1.0 here:
    // 0 of 203; Cp's weight: 10 of 203).
    const auto& t = get_receiver_tables(16384);
    receiver_config rc;
    cpu_backend be(rc);
    sim_config sc;
    sc.preset = "awgn";
    sc.ebn0_db = 1.2;
    sc.cfo_hz = -35'000.0;
    sc.timing_offset_samples = 0.71;
    sc.seed = 4711;
    sc.start_offset_samples = 0;
    simulator sim(sc);
    std::vector<cf32> x;
    sim.generate(205 * waveform::L_pkt, x);
    std::vector<std::uint8_t> bits(6 * packed_data_bytes);
    int long_support = 0, n = 0;
    for (const auto start : sim.truth().packet_starts) {
        if (start < 1024 || start + waveform::L_pkt + 1024 > x.size()) continue;
        packet_record rec;
        be.process_packet(x.data(), x.size(), static_cast<long long>(start), rec, bits.data());
        ASSERT_GE(rec.channel_support, 0);
        ASSERT_LT(static_cast<std::size_t>(rec.channel_support), t.supports.size());
        long_support += t.supports[static_cast<std::size_t>(rec.channel_support)].last_tap >= 11 ? 1 : 0;
        ++n;
    }
    std::printf("awgn 1.2 dB: %d of %d packets with a last tap of 11 or more\n", long_support, n);
    ASSERT_GE(n, 190);
    EXPECT_LE(long_support, n / 100);
}

TEST(detection, finds_packets_at_4db_with_2pct_cfo)
{
    // >= 99.9% of packets at Eb/N0 = 4 dB with a CFO of 2% of the bit rate, every found start
    // within 2 samples of the truth, no extra detections.
    for (const double cfo : {206'250.0, -206'250.0}) {
        sim_config sc;
        sc.ebn0_db = 4.0;
        sc.cfo_hz = cfo;
        sc.preset = "awgn";
        sc.seed = cfo > 0 ? 501 : 502;
        const auto sim = test::simulate(sc, 1000);
        const auto found = detect_all(sim.samples, 4'000'000);
        std::size_t hits = 0;
        for (auto s : sim.truth.packet_starts) {
            if (s + waveform::L_pkt > sim.samples.size()) continue;
            for (auto f : found) if (f + 2 >= s && f <= s + 2) { ++hits; break; }
        }
        EXPECT_GE(static_cast<double>(hits), 0.999 * static_cast<double>(sim.complete_packets)) << cfo;
        EXPECT_LE(found.size(), sim.complete_packets + 1) << cfo;  // + the one cut by the end
    }
}

// The preamble is one period sent eight times, so L(u) one period off a start sees seven of
// them, and with noise and multipath a side lobe wins now and then (two-ray at 3 dB: 113 of
// 6510 packets on the GPU, 2026-11-25); the whole packet is then lost on every path. The
// known-sequence check (dsp/start_check.hpp) moves such starts to the true one: here two-ray at
// 3 dB, +20 kHz, 800 packets (seed 3711), the side-lobe starts the detector alone finds (18,
// measured 2026-11-25; bound 5) all move to the true start, and no other start moves; on AWGN
// at 12 dB nothing moves; every start shifted by one or two periods by hand comes back.
TEST(detection, preamble_side_lobes_move_to_the_true_start)
{
    sim_config sc;
    sc.preset = "two-ray";
    sc.ebn0_db = 3.0;
    sc.cfo_hz = 20e3;
    sc.seed = 3711;
    const auto sim = test::simulate(sc, 800);
    const auto plain = detect_all(sim.samples, 4'000'000);
    std::size_t moved = 0;
    const auto checked = detect_all(sim.samples, 4'000'000, receiver_config{}.detection_threshold, true, &moved);
    const std::size_t lobes = side_lobe_starts(plain, sim.truth.packet_starts);
    std::printf("two-ray 3 dB: %zu starts, %zu on a side lobe without the check, %zu with it; %zu moved\n", plain.size(), lobes,
                side_lobe_starts(checked, sim.truth.packet_starts), moved);
    ASSERT_EQ(plain.size(), checked.size());
    EXPECT_GE(lobes, 5u);
    EXPECT_EQ(side_lobe_starts(checked, sim.truth.packet_starts), 0u);
    EXPECT_EQ(moved, lobes);

    sc.preset = "awgn";
    sc.ebn0_db = 12.0;
    sc.seed = 3712;
    const auto clean = test::simulate(sc, 200);
    std::size_t moved_clean = 0;
    const auto found = detect_all(clean.samples, 4'000'000, receiver_config{}.detection_threshold, true, &moved_clean);
    EXPECT_EQ(moved_clean, 0u);
    EXPECT_GE(found.size(), 190u);

    // Starts moved by hand by -2 .. 2 periods come back (the window's edges allowing).
    const auto& t = get_receiver_tables(16384);
    batcher bt(4'000'000);
    bt.push(clean.samples);
    bt.finish();
    auto b = bt.pop();
    ASSERT_TRUE(b.has_value());
    std::vector<double> m(b->samples.size() - detector_span + 1);
    preamble_metric(b->samples, m, t.preamble_template);
    const auto located = locate_packets(*b, m, receiver_config{}.detection_threshold, t.template_offset);
    ASSERT_GE(located.starts.size(), 100u);
    for (const int k : {-2, -1, 1, 2}) {
        auto shifted = located;
        for (auto& s : shifted.starts) s += 32LL * k;
        check_packet_starts(b->samples, shifted, t);
        std::size_t back = 0, inside = 0;
        for (std::size_t i = 0; i < shifted.starts.size(); ++i) {
            const long long orig = located.starts[i];
            if (orig - 64 < 0 || orig + 64 + static_cast<long long>(waveform::L_pkt) > static_cast<long long>(b->samples.size())) continue;
            ++inside;
            if (shifted.starts[i] == orig) ++back;
            EXPECT_EQ(shifted.moved_periods[i], -k) << i;
        }
        EXPECT_EQ(back, inside) << "shifted by " << k << " periods";
    }
}

TEST(detection, nothing_found_in_noise)
{
    std::mt19937_64 rng(503);
    std::normal_distribution<float> n(0.0f, 1.0f);
    std::vector<cf32> x(8'000'000);
    for (auto& v : x) v = cf32(n(rng), n(rng));
    EXPECT_TRUE(detect_all(x, 2'000'000).empty());
}

TEST(batching, every_cut_position_yields_each_packet_once)
{
    // Two batches whose boundary is placed at every sample position of one packet period
    // (and around it): the union of what they own must be exactly the packets of the
    // recording, each once.
    sim_config sc;
    sc.ebn0_db = 10.0;
    sc.seed = 601;
    sc.start_offset_samples = 5000;
    const auto sim = test::simulate(sc, 3);
    const auto reference = detect_all(sim.samples, sim.samples.size());
    std::size_t complete_found = 0;
    for (auto s : sim.truth.packet_starts) {
        if (s + waveform::L_pkt > sim.samples.size()) continue;
        for (auto f : reference) if (f + 2 >= s && f <= s + 2) { ++complete_found; break; }
    }
    ASSERT_EQ(complete_found, sim.complete_packets);
    // Each metric value reads only its own detector_span samples, so a window's metric is the
    // recording's metric from the window's first sample on, bit for bit: it is computed once
    // here, and each cut runs the batcher and the ownership decision (locate_packets) on it.
    const auto& t = get_receiver_tables(16384);
    std::vector<double> whole(sim.samples.size() - detector_span + 1);
    preamble_metric(sim.samples, whole, t.preamble_template);
    auto detect_cut = [&](std::size_t batch) {
        batcher bt(batch);
        bt.push(sim.samples);
        bt.finish();
        std::vector<std::uint64_t> starts;
        while (auto b = bt.pop()) {
            if (b->samples.size() < detector_span) continue;
            const std::size_t n = b->samples.size() - detector_span + 1;
            EXPECT_LE(b->first_sample + b->samples.size(), sim.samples.size());
            EXPECT_TRUE(std::equal(b->samples.begin(), b->samples.end(), sim.samples.begin() + static_cast<std::ptrdiff_t>(b->first_sample)))
                << "the window holds the recording's samples from its first_sample on";
            const std::span<const double> m(whole.data() + b->first_sample, n);
            const auto found = locate_packets(*b, m, receiver_config{}.detection_threshold, t.template_offset);
            for (const long long s : found.starts) starts.push_back(b->first_sample + static_cast<std::uint64_t>(s));
        }
        return starts;
    };
    ASSERT_EQ(detect_cut(sim.samples.size()), reference) << "the shared metric gives the whole recording's packets";
    // Every position within +-700 samples of packet 1's preamble (where the ownership
    // decision is made), every 13th elsewhere.
    const std::size_t dense_from = sim.truth.packet_starts[1] - 700;
    const std::size_t dense_to = sim.truth.packet_starts[1] + 700;
    std::size_t checked = 0;
    for (std::size_t cut = 1; cut + batch_guard_after < sim.samples.size();
         cut += (cut >= dense_from && cut < dense_to) ? 1 : 13) {
        ASSERT_EQ(detect_cut(cut), reference) << "cut at " << cut;
        ++checked;
    }
    EXPECT_GT(checked, 3000u);
}

TEST(batching, same_bits_whatever_the_batch_size)
{
    sim_config sc;
    sc.preset = "edwards3";
    sc.ebn0_db = 9.0;
    sc.seed = 602;
    const auto sim = test::simulate(sc, 12);
    std::map<std::uint64_t, std::vector<std::uint8_t>> first;
    for (const std::size_t batch : {std::size_t{1'000'000}, std::size_t{20'011}, std::size_t{12'672}, std::size_t{7'001}}) {
        receiver_config rc;
        rc.batch_samples = batch;
        // The clock is estimated over the packets a batch holds (dsp/clock_recovery.hpp), so a
        // re-timed packet's bits may depend on the batch size; this test is about the batcher.
        rc.clock_tracking = 0;
        cpu_backend be(rc);
        std::map<std::uint64_t, std::vector<std::uint8_t>> got;
        (void)runtime::run_receiver(be, rc, pn_pattern::pn15, 20.625e6, sim.samples,
                           [&](const batch_output& o) {
                               for (std::size_t i = 0; i < o.packets.size(); ++i) {
                                   ASSERT_EQ(got.count(o.packets[i].start_sample), 0u) << "packet twice";
                                   got[o.packets[i].start_sample].assign(o.packet_bits(i, 0), o.packet_bits(i, 0) + 6 * packed_data_bytes);
                               }
                           });
        if (first.empty()) first = got;
        EXPECT_EQ(got, first) << "batch " << batch;
        EXPECT_GE(got.size(), sim.complete_packets);
        EXPECT_LE(got.size(), sim.possible_packets);
    }
}

TEST(batching, gap_loses_only_the_packets_it_cuts)
{
    sim_config sc;
    sc.ebn0_db = 12.0;
    sc.seed = 603;
    sc.start_offset_samples = 1000;
    const auto sim = test::simulate(sc, 10);
    // Drop 3000 samples from the middle of packet 4.
    const std::size_t cut = sim.truth.packet_starts[4] + 4000, lost = 3000;
    receiver_config rc;
    rc.batch_samples = 50'000;
    cpu_backend be(rc);
    auto bt = test::batched(sim.samples, rc.batch_samples, cut, lost);
    std::vector<std::uint64_t> starts;
    std::uint64_t truncated = 0;
    while (auto b = bt.pop()) {
        const auto o = be.process(*b);
        truncated += o.truncated_packets;
        for (const auto& p : o.packets) starts.push_back(p.start_sample);
    }
    EXPECT_EQ(bt.samples_lost(), lost);
    std::uint64_t cut_by_end = 0;  // the recording also ends inside a packet
    for (auto s : sim.truth.packet_starts) {
        if (s + waveform::L_pkt > sim.samples.size() && s + detector_span + 8 < sim.samples.size()) ++cut_by_end;
    }
    EXPECT_EQ(truncated, 1u + cut_by_end);  // packet 4: its preamble is before the gap
    std::vector<std::uint64_t> expect;
    for (std::size_t p = 0; p < sim.truth.packet_starts.size(); ++p) {
        const auto s = sim.truth.packet_starts[p];
        if (p != 4 && s + waveform::L_pkt <= sim.samples.size()) expect.push_back(s);
    }
    EXPECT_EQ(starts, expect);  // absolute indices keep counting through the gap
}

// A hostile gap at the batcher: a gap of ~2^64 samples (a hostile VITA-49
// timestamp) wrapped the owned range and emit() copied ~2 M samples out of a 1000-sample
// buffer. Indices now advance by a bounded amount; every window lies inside its input.
TEST(batching, a_gap_near_2_64_never_makes_a_window_outside_the_input)
{
    std::vector<cf32> x(40'000, cf32(0.5f, -0.5f));
    for (const std::uint64_t lost : {~std::uint64_t{0} - 1'000'000 - 1000, ~std::uint64_t{0}, std::uint64_t{1} << 63,
                                     batcher::max_index_advance + 1}) {
        batcher bt(4096);
        bt.push(std::span<const cf32>(x).first(1000));
        bt.gap(lost);
        bt.push(x);
        bt.gap(lost);
        bt.push(x);
        bt.finish();
        const std::uint64_t twice = lost > ~std::uint64_t{0} - lost ? ~std::uint64_t{0} : lost + lost;
        EXPECT_EQ(bt.samples_lost(), twice) << "counted whole, saturating";
        std::uint64_t owned = 0, prev_first = 0;
        while (auto b = bt.pop()) {
            ASSERT_LE(b->owned_begin, b->owned_end);
            ASSERT_LE(b->owned_end, b->samples.size());
            ASSERT_LE(b->samples.size(), 4096u + batch_guard_before + batch_guard_after);
            ASSERT_LE(b->first_sample, batcher::max_absolute_index);
            ASSERT_GE(b->first_sample, prev_first);
            prev_first = b->first_sample;
            owned += b->owned_end - b->owned_begin;
        }
        EXPECT_EQ(owned + bt.samples_in_short_segments(), 1000u + 2 * x.size());
        EXPECT_EQ(bt.short_segments(), 1u);  // the first 1000 samples: shorter than a packet
    }
}

// One-sample segments between gaps made one batch each (1.76 M batches, 131 s of
// latency). A segment shorter than a packet holds no packet: it makes no batch, and its
// samples are counted.
TEST(batching, segments_shorter_than_a_packet_make_no_batch_and_are_counted)
{
    std::vector<cf32> x(3 * waveform::L_pkt, cf32(1.0f, 0.0f));
    const cf32 one[1] = {cf32(0.0f, 1.0f)};
    batcher bt(1'000'000);
    bt.push(x);
    for (int k = 0; k < 100'000; ++k) {
        bt.gap(1);
        bt.push(one);
    }
    bt.push(x);
    bt.finish();
    std::size_t batches = 0;
    while (auto b = bt.pop()) ++batches;
    EXPECT_EQ(batches, 2u);
    EXPECT_EQ(bt.short_segments(), 99'999u);
    EXPECT_EQ(bt.samples_in_short_segments(), 99'999u);
    EXPECT_EQ(bt.samples_lost(), 100'000u);
}

TEST(batching, parts_give_what_the_whole_batch_gives)
{
    // The GPU backend splits each batch into parts (dsp::split_batch) so that it can work on
    // one while the next uploads. Each part is a window the batcher could have cut, so the
    // parts, processed one by one, must give exactly the whole batch's packets, records and
    // bits: checked here on the CPU backend, with a gap, the stream's start and its end.
    sim_config sc;
    sc.preset = "edwards3";
    sc.ebn0_db = 11.0;
    sc.seed = 604;
    sc.start_offset_samples = 300;  // a packet cut by the start
    const auto sim = test::simulate(sc, 10);
    const std::size_t cut = sim.truth.packet_starts[5] + 2000, lost = 1500;
    receiver_config rc;
    rc.batch_samples = 45'000;
    rc.clock_tracking = 0;  // per-part clock estimates differ from the whole batch's (see above)
    cpu_backend be(rc);
    auto bt = test::batched(sim.samples, rc.batch_samples, cut, lost);
    std::size_t batches = 0, packets = 0, truncated = 0, flagged_ends = 0;
    while (auto b = bt.pop()) {
        ++batches;
        const auto whole = be.process(*b);
        packets += whole.packets.size();
        truncated += whole.truncated_packets;
        for (const std::size_t n : {std::size_t{1}, std::size_t{2}, std::size_t{3}, std::size_t{4}, std::size_t{7}}) {
            const auto parts = split_batch(*b, n);
            ASSERT_EQ(parts.size(), n);
            batch_output joined;
            std::size_t owned_next = b->owned_begin;
            for (const auto& part : parts) {
                // The parts tile the owned range, each inside the window with its guards.
                EXPECT_EQ(part.offset + part.owned_begin, owned_next);
                owned_next = part.offset + part.owned_end;
                EXPECT_LE(part.offset + part.length, b->samples.size());
                EXPECT_LE(part.length, max_part_window(rc.batch_samples, n));
                flagged_ends += part.segment_start + part.segment_end;
                const auto o = be.process(part_batch(*b, part));
                joined.packets.insert(joined.packets.end(), o.packets.begin(), o.packets.end());
                joined.bits.insert(joined.bits.end(), o.bits.begin(), o.bits.end());
                joined.truncated_packets += o.truncated_packets;
                joined.nonfinite_samples += o.nonfinite_samples;
            }
            EXPECT_EQ(owned_next, b->owned_end);
            ASSERT_EQ(joined.packets.size(), whole.packets.size()) << "batch " << b->index << ", " << n << " parts";
            for (std::size_t p = 0; p < whole.packets.size(); ++p) {
                const auto& x = whole.packets[p];
                const auto& y = joined.packets[p];
                EXPECT_EQ(x.start_sample, y.start_sample);
                EXPECT_EQ(x.metric, y.metric);
                EXPECT_EQ(x.cfo_rad_per_sample, y.cfo_rad_per_sample);
                EXPECT_EQ(x.sigma2, y.sigma2);
                EXPECT_EQ(x.h, y.h);
                EXPECT_EQ(x.flags, y.flags);
                EXPECT_EQ(x.channel_support, y.channel_support);
                for (int path = 0; path < chain::num_paths; ++path) {
                    EXPECT_EQ(x.paths[static_cast<std::size_t>(path)].known_bit_errors, y.paths[static_cast<std::size_t>(path)].known_bit_errors);
                }
            }
            EXPECT_EQ(joined.bits, whole.bits) << "batch " << b->index << ", " << n << " parts";
            EXPECT_EQ(joined.truncated_packets, whole.truncated_packets);
            EXPECT_EQ(joined.nonfinite_samples, whole.nonfinite_samples);
        }
    }
    EXPECT_GE(batches, 4u);
    EXPECT_GE(packets, sim.complete_packets - 1);  // one packet is cut by the gap
    EXPECT_GE(truncated, 2u);                      // the one cut by the start, the one cut by the gap
    EXPECT_GT(flagged_ends, 0u);

    // A split needs at least one part and an owned range inside the window.
    sample_batch bad;
    bad.samples.resize(100);
    bad.owned_begin = 10;
    bad.owned_end = 200;
    EXPECT_THROW((void)split_batch(bad, 2), std::invalid_argument);
    bad.owned_end = 50;
    EXPECT_THROW((void)split_batch(bad, 0), std::invalid_argument);
    EXPECT_EQ(split_batch(bad, 1000).size(), 40u);  // no more parts than owned samples
    bad.owned_end = 10;
    EXPECT_TRUE(split_batch(bad, 4).empty());
}

TEST(batching, windows_are_filled_in_place_in_storage_that_never_grows)
{
    // Pushes of every size (smaller than a window, several windows at once), windows handed
    // back after use: each window holds exactly its slice of the stream, in storage reserved
    // for the largest window that never grew, and after the first few only recycled storage
    // is used (no allocation per batch).
    std::mt19937_64 rng(8081);
    std::vector<cf32> stream(400'000);
    for (std::size_t i = 0; i < stream.size(); ++i) stream[i] = cf32(static_cast<float>(i), -static_cast<float>(i % 977));
    batcher bt(20'000);
    const std::size_t max_window = bt.max_window_samples();
    ASSERT_EQ(max_window, 20'000 + batch_guard_before + batch_guard_after);
    std::set<const cf32*> storage;
    std::size_t windows = 0, pos = 0;
    std::uniform_int_distribution<std::size_t> chunk(1, 70'000);
    auto drain = [&] {
        while (auto b = bt.pop()) {
            ASSERT_LE(b->samples.size(), max_window);
            ASSERT_EQ(b->samples.capacity(), max_window) << "window " << b->index;
            for (std::size_t i = 0; i < b->samples.size(); i += 997) {
                ASSERT_EQ(b->samples[i], stream[b->first_sample + i]) << "window " << b->index << " sample " << i;
            }
            ASSERT_EQ(b->samples.back(), stream[b->first_sample + b->samples.size() - 1]);
            storage.insert(b->samples.data());
            ++windows;
            bt.recycle(std::move(b->samples));
        }
    };
    while (pos < stream.size()) {
        const std::size_t n = std::min(chunk(rng), stream.size() - pos);
        bt.push(std::span<const cf32>(stream).subspan(pos, n));
        pos += n;
        drain();
    }
    bt.finish();
    drain();
    EXPECT_EQ(windows, (stream.size() + 19'999) / 20'000);
    // The batcher's own buffer, a window out and one coming back: a handful, not one per window.
    EXPECT_LE(storage.size(), 6u) << windows << " windows";
}


TEST(bad_input, nan_samples_are_counted_and_flagged)
{
    sim_config sc;
    sc.ebn0_db = 14.0;
    sc.seed = 701;
    sc.start_offset_samples = 1000;
    auto sim = test::simulate(sc, 8);
    const auto s3 = sim.truth.packet_starts[3];
    for (std::size_t i = 0; i < 5; ++i) sim.samples[s3 + 3000 + 97 * i] = cf32(std::nanf(""), 0.0f);
    sim.samples[s3 + 9000] = cf32(INFINITY, 1.0f);
    const auto s = test::run_chain(sim.samples, test::small_batches());
    EXPECT_EQ(s.nonfinite_samples, 6u);
    EXPECT_GE(s.packets_flagged, 1u);
    EXPECT_GE(s.packets_found, sim.complete_packets);
    EXPECT_LE(s.packets_found, sim.possible_packets);
    for (const auto& p : s.paths) {
        if (p.name == "none") continue;
        EXPECT_LT(p.ber, 1e-3) << p.name;  // six zeroed samples cost a few bits at most
    }
}

TEST(bad_input, truncated_and_mistyped_recordings)
{
    const auto dir = temp_dir("bad_input");
    sim_config sc;
    sc.ebn0_db = 14.0;
    sc.seed = 702;
    const auto sim = test::simulate(sc, 4);
    io::sigmf_meta meta;
    meta.sample_rate_hz = 20.625e6;
    {
        auto w = io::sample_file_writer::create_sigmf(dir / "rec", meta);
        w.write(sim.samples);
        w.close();
    }
    {  // a recording cut in the middle of a sample
        std::ofstream f(dir / "rec.sigmf-data", std::ios::app | std::ios::binary);
        f.write("abc", 3);
    }
    daemon::replay_options opt;
    opt.backend = config::backend_kind::cpu;
    opt.file = dir / "rec.sigmf-meta";
    const auto r = daemon::run_replay(opt);
    EXPECT_EQ(r.trailing_bytes, 3u);
    ASSERT_FALSE(r.warnings.empty());
    EXPECT_NE(r.warnings[0].find("truncated"), std::string::npos);
    EXPECT_EQ(r.engine.tally.packets_found, sim.complete_packets);

    // A datatype the receiver cannot read: a clear error naming it.
    {
        std::ofstream f(dir / "bad.sigmf-meta");
        f << R"({"global": {"core:datatype": "ri8", "core:sample_rate": 20625000, "core:version": "1.2.0"}, "captures": [], "annotations": []})";
        std::ofstream d(dir / "bad.sigmf-data");
        d << "xxxxxxxx";
    }
    opt.file = dir / "bad.sigmf-meta";
    try {
        (void)daemon::run_replay(opt);
        ADD_FAILURE() << "ri8 accepted";
    } catch (const std::exception& e) {
        EXPECT_NE(std::string(e.what()).find("ri8"), std::string::npos) << e.what();
    }
    std::filesystem::remove_all(dir);
}

TEST(bad_input, unknown_or_unavailable_backend)
{
    receiver_config rc;
    try {
        (void)runtime::parse_backend("moon");
        ADD_FAILURE() << "backend 'moon' accepted";
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("auto, cpu, cuda"), std::string::npos) << e.what();
    }
    try {
        (void)runtime::parse_solver("gauss");
        ADD_FAILURE() << "solver 'gauss' accepted";
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("levinson, cusolver-dn-chol, cusolver-sp-qr"), std::string::npos) << e.what();
    }
    EXPECT_EQ(runtime::make_backend({runtime::backend_kind::cpu}, rc)->name(), "cpu");
    EXPECT_THROW((void)runtime::make_backend({runtime::backend_kind::automatic}, rc), std::invalid_argument);
    EXPECT_NE(runtime::resolve_backend(runtime::backend_kind::automatic), runtime::backend_kind::automatic);
    // Without the NVIDIA driver no CUDA device can run: `auto` is cpu there, decided without
    // loading the CUDA module and its libraries. paqd replay's default.
    EXPECT_EQ(daemon::replay_options{}.backend, runtime::backend_kind::automatic);
    if (!runtime::cuda_driver_present()) {
        auto module_mapped = [] {
            std::ifstream maps("/proc/self/maps");
            const std::string m((std::istreambuf_iterator<char>(maps)), std::istreambuf_iterator<char>());
            return m.find("libpaqd-cuda") != std::string::npos;
        };
        const bool before = module_mapped();
        EXPECT_EQ(runtime::resolve_backend(runtime::backend_kind::automatic), runtime::backend_kind::cpu);
        if (!before) {
            EXPECT_FALSE(module_mapped()) << "auto loaded the CUDA module where no driver is";
        }
    }
    // No GPU here (or no CUDA in this build): a clear error, not a crash. With a GPU, device
    // 99 does not exist either.
    try {
        (void)runtime::make_backend({runtime::backend_kind::cuda, 99}, rc);
        ADD_FAILURE() << "cuda device 99 accepted";
    } catch (const std::runtime_error& e) {
        // Names the setting whichever way it was given, and the way out.
        EXPECT_NE(std::string(e.what()).find("the cuda backend (--backend cuda, pipeline.backend: cuda)"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("use the cpu backend"), std::string::npos) << e.what();
    }
}

TEST(bad_input, paq_sim_rejects_bad_arguments)
{
    const std::string sim = std::string(PAQ_BINARY_DIR) + "/tools/paq-sim";
    const auto dir = temp_dir("paq_sim_args");
    const std::string out = (dir / "x").string();
    auto run = [&](const std::string& args) {
        const std::string cmd = sim + " " + args + " --output " + out + " > " + (dir / "log").string() + " 2>&1";
        const int rc = std::system(cmd.c_str());
        std::ifstream f(dir / "log");
        std::string log((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
        return std::make_pair(rc, log);
    };
    auto [rc1, log1] = run("--preset moon --seconds 0.01");
    EXPECT_NE(rc1, 0);
    EXPECT_NE(log1.find("moon"), std::string::npos) << log1;
    auto [rc2, log2] = run("--ebn0-db abc --seconds 0.01");
    EXPECT_NE(rc2, 0);
    EXPECT_NE(log2.find("abc"), std::string::npos) << log2;
    auto [rc3, log3] = run("--timing-offset 1.5 --seconds 0.01");
    EXPECT_NE(rc3, 0);
    EXPECT_NE(log3.find("timing_offset"), std::string::npos) << log3;
    auto [rc4, log4] = run("--seconds -1");
    EXPECT_NE(rc4, 0);
    auto [rc5, log5] = run("--datatype ri8 --seconds 0.01");
    EXPECT_NE(rc5, 0);
    EXPECT_NE(log5.find("ri8"), std::string::npos) << log5;
    auto [rc6, log6] = run("--seconds 0.01 --preset awgn --ebn0-db 10");
    EXPECT_EQ(rc6, 0) << log6;
    // Extra rays: malformed, out of range, and one that works (its parameters in the metadata).
    auto [rc7, log7] = run("--seconds 0.01 --ray 0.5,abc,1");
    EXPECT_NE(rc7, 0);
    EXPECT_NE(log7.find("'abc' is not a number"), std::string::npos) << log7;
    auto [rc8, log8] = run("--seconds 0.01 --ray 0.5,1000");
    EXPECT_NE(rc8, 0);
    EXPECT_NE(log8.find("three comma-separated numbers"), std::string::npos) << log8;
    auto [rc9, log9] = run("--seconds 0.01 --ray 0.5,5000,1");
    EXPECT_NE(rc9, 0);
    EXPECT_NE(log9.find("extra_rays[0].delay_ns"), std::string::npos) << log9;
    auto [rc10, log10] = run("--seconds 0.01 --ray 0.5,1000,1 --ray 0.1,300,2");
    EXPECT_EQ(rc10, 0) << log10;
    std::ifstream meta(out + ".sigmf-meta");
    std::string m((std::istreambuf_iterator<char>(meta)), std::istreambuf_iterator<char>());
    EXPECT_NE(m.find("paq:extra_rays"), std::string::npos) << m;
    EXPECT_NE(m.find("1000"), std::string::npos) << m;
    std::filesystem::remove_all(dir);
}

TEST(detection, peak_search_matches_its_definition)
{
    // find_preamble_peaks (block maxima, parallel) against the definition written out
    // directly: metric[u] >= threshold, > everything in [u - W, u - 1], >= everything in
    // [u + 1, u + W], and the segment-start extension. Random metrics with ties and plateaus.
    std::mt19937_64 rng(1301);
    for (int trial = 0; trial < 12; ++trial) {
        const std::size_t n = 20'000 + rng() % 20'000, w = 50 + rng() % 600;
        std::vector<double> m(n);
        for (auto& v : m) v = static_cast<double>(rng() % 64) / 64.0;  // coarse: many ties
        const std::size_t first = rng() % 1000, last = n - rng() % 1000;
        const bool seg = trial % 2 == 0;
        const double thr = 0.6;
        std::vector<std::size_t> expect;
        for (std::size_t u = first; u < last; ++u) {
            if (m[u] < thr) continue;
            bool ok = true;
            for (std::size_t v = u > w ? u - w : 0; v < u && ok; ++v) ok = m[v] < m[u];
            for (std::size_t v = u + 1; v <= std::min(n - 1, u + w) && ok; ++v) ok = m[v] <= m[u];
            if (ok && seg && u < w) {
                const std::size_t ext_end = std::min(n, u + w + (w - u) - 8 + 1);
                for (std::size_t v = u + w + 1; v < ext_end && ok; ++v) ok = m[v] <= m[u];
            }
            if (ok) expect.push_back(u);
        }
        std::vector<std::size_t> got;
        for (const auto& p : find_preamble_peaks(m, first, last, thr, w, seg)) got.push_back(p.u);
        ASSERT_EQ(got, expect) << "trial " << trial << " n " << n << " w " << w;
    }
}

// Replay takes the link's bit rate from the recording (paq:bit_rate_hz, which paq-sim
// and paqd write), --bit-rate overrides it, and a bit rate the input rate cannot serve is an
// error naming both rates and where the bit rate came from.
TEST(replay_rates, the_bit_rate_comes_from_the_recording_or_the_option)
{
    const auto dir = temp_dir("replay_rates");
    sim_config sc;
    sc.ebn0_db = 14.0;
    sc.seed = 703;
    sc.bit_rate_hz = 5e6;
    sc.sample_rate_hz = 12.5e6;  // 2.5 samples per bit of a 5 Mbit/s link
    const auto sim = test::simulate(sc, 8);
    io::sigmf_meta meta;
    meta.sample_rate_hz = sc.sample_rate_hz;
    meta.extra_global = nlohmann::json{{"paq:bit_rate_hz", 5e6}};
    {
        auto w = io::sample_file_writer::create_sigmf(dir / "rec", meta);
        w.write(sim.samples);
        w.close();
    }
    daemon::replay_options opt;
    opt.backend = config::backend_kind::cpu;
    opt.file = dir / "rec.sigmf-meta";
    const auto r = daemon::run_replay(opt);
    EXPECT_EQ(r.bit_rate_from, "paq:bit_rate_hz");
    EXPECT_EQ(r.bit_rate_hz, 5e6);
    EXPECT_TRUE(r.resampled);
    EXPECT_GE(r.engine.tally.packets_found, 4u);
    for (const auto& p : r.engine.tally.paths) EXPECT_LT(p.ber, 1e-2) << p.name;
    // The option wins; 12.5 MS/s is 1.2 samples per bit at 10.3125 Mbit/s: refused, naming both.
    opt.bit_rate_hz = 10.3125e6;
    try {
        (void)daemon::run_replay(opt);
        ADD_FAILURE() << "1.2 samples per bit accepted";
    } catch (const std::exception& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find("12.5 MS/s"), std::string::npos) << what;
        EXPECT_NE(what.find("10.3125 Mbit/s"), std::string::npos) << what;
        EXPECT_NE(what.find("--bit-rate"), std::string::npos) << what;
    }
    std::filesystem::remove_all(dir);
}

namespace {

// A backend that owns every packet-free batch: it returns the batch index, can fail on a
// chosen batch, and records what it was asked to page-lock.
class scripted_backend final : public batch_processor {
public:
    std::uint64_t fail_at = ~std::uint64_t{0};
    std::vector<std::uint64_t> seen;
    std::vector<std::weak_ptr<void>> pins;
    std::set<const void*> pinned;
    std::size_t unpinned_batches = 0;
    std::mutex mu;  ///< pins and pinned: the windows are locked on other threads than process()'s

    using batch_processor::process;
    void process(const sample_batch& b, batch_output& out) override
    {
        if (b.index == fail_at) throw std::runtime_error("scripted failure at batch " + std::to_string(b.index));
        seen.push_back(b.index);
        const void* window = b.is_ci16() ? static_cast<const void*>(b.samples_ci16.data()) : static_cast<const void*>(b.samples.data());
        {
            std::lock_guard lk(mu);
            if (pinned.count(window) == 0) ++unpinned_batches;
        }
        out.reset(b.index, dsp::chain::num_paths);
    }
    std::string name() const override { return "scripted"; }
    std::shared_ptr<void> pin_host_memory(const void* data, std::size_t bytes) override
    {
        EXPECT_GE(bytes, 1u);
        std::lock_guard lk(mu);
        pinned.insert(data);
        auto handle = std::make_shared<int>(0);
        pins.push_back(handle);
        return handle;
    }
};

}  // namespace

TEST(run_receiver, pipelines_in_order_and_locks_each_window_once)
{
    receiver_config rc;
    rc.batch_samples = 50'000;
    scripted_backend be;
    std::vector<cf32> samples(1'234'567, cf32(0.1f, -0.1f));
    std::vector<std::uint64_t> order;
    const auto s = runtime::run_receiver(be, rc, pn_pattern::pn15, 20.625e6, samples,
                                [&](const batch_output& o) { order.push_back(o.batch_index); });
    ASSERT_EQ(order.size(), (samples.size() + 49'999) / 50'000);
    for (std::size_t i = 0; i < order.size(); ++i) EXPECT_EQ(order[i], i);
    EXPECT_EQ(be.seen, order);
    EXPECT_EQ(s.samples, samples.size());
    EXPECT_EQ(s.batches, order.size());
    // A few windows circulate; each was locked once, and every lock was undone by the end.
    EXPECT_GE(be.pins.size(), 2u);
    EXPECT_LE(be.pins.size(), 6u);
    EXPECT_EQ(be.unpinned_batches, 0u);
    for (const auto& p : be.pins) EXPECT_TRUE(p.expired());
    EXPECT_GT(s.timing.elapsed_s, 0.0);
    EXPECT_GE(s.timing.elapsed_s, s.timing.process_s);
}

TEST(run_receiver, an_error_in_any_stage_ends_the_run_and_is_rethrown)
{
    receiver_config rc;
    rc.batch_samples = 50'000;
    std::vector<cf32> samples(2'000'000, cf32(0.1f, -0.1f));
    {
        scripted_backend be;
        be.fail_at = 7;
        EXPECT_THROW(
            {
                try {
                    (void)runtime::run_receiver(be, rc, pn_pattern::pn15, 20.625e6, samples);
                } catch (const std::runtime_error& e) {
                    EXPECT_STREQ(e.what(), "scripted failure at batch 7");
                    throw;
                }
            },
            std::runtime_error);
        // Batch 7 ends the run; at most the two batches already in flight behind it (the
        // pool's queue and its worker) were processed too.
        EXPECT_GE(be.seen.size(), 7u);
        EXPECT_LE(be.seen.size(), 9u);
        for (const auto& p : be.pins) EXPECT_TRUE(p.expired());
    }
    {
        scripted_backend be;
        std::size_t calls = 0;
        EXPECT_THROW((void)runtime::run_receiver(be, rc, pn_pattern::pn15, 20.625e6, samples,
                                        [&](const batch_output&) {
                                            if (++calls == 3) throw std::logic_error("records failed");
                                        }),
                     std::logic_error);
        EXPECT_LT(be.seen.size(), 40u);  // stopped early, not after the whole input
        for (const auto& p : be.pins) EXPECT_TRUE(p.expired());
    }
    {
        scripted_backend be;
        std::size_t reads = 0;
        EXPECT_THROW((void)runtime::run_receiver(
                         be, rc, pn_pattern::pn15, 20.625e6,
                         [&](std::span<cf32> out) -> std::size_t {
                             if (++reads == 2) throw std::invalid_argument("corrupt file");
                             std::fill(out.begin(), out.end(), cf32(0.1f, 0.0f));
                             return out.size();
                         }),
                     std::invalid_argument);
        for (const auto& p : be.pins) EXPECT_TRUE(p.expired());
    }
}

// A pool still being made (replay makes its backends on a thread of their own): the reader
// reads ahead, at most three complete windows wait, and the run is the same as on a pool made
// before; an error making the pool ends the run with that error.
TEST(run_receiver, reads_ahead_while_the_pool_is_made)
{
    using namespace std::chrono_literals;
    receiver_config rc;
    rc.batch_samples = 50'000;
    std::vector<cf32> samples(1'234'567, cf32(0.1f, -0.1f));
    for (const bool ci16_input : {false, true}) {
        scripted_backend be;
        std::vector<std::unique_ptr<batch_processor>> one;
        struct lent final : batch_processor {
            explicit lent(batch_processor& b) : b_(b) {}
            using batch_processor::process;
            void process(const sample_batch& batch, batch_output& out) override { b_.process(batch, out); }
            std::string name() const override { return b_.name(); }
            std::shared_ptr<void> pin_host_memory(const void* d, std::size_t n) override { return b_.pin_host_memory(d, n); }
            batch_processor& b_;
        };
        one.push_back(std::make_unique<lent>(be));
        runtime::worker_pool pool(std::move(one), {}, 2);
        std::promise<runtime::worker_pool*> made;
        std::atomic<std::size_t> read_before_made{0};
        std::atomic<std::size_t> pos{0};
        std::thread maker([&] {
            std::this_thread::sleep_for(300ms);
            read_before_made = pos.load();  // the reader is parked by now (read-ahead bound)
            made.set_value(&pool);
        });
        std::vector<std::uint64_t> order;
        const auto on_batch = [&](const batch_output& o) { order.push_back(o.batch_index); };
        run_summary s;
        if (ci16_input) {
            s = runtime::run_receiver_ci16(made.get_future().share(), rc, pn_pattern::pn15, 20.625e6, 8192.0f,
                                           [&](std::span<ci16> out) {
                                               const std::size_t n = std::min(out.size(), samples.size() - pos.load());
                                               std::fill_n(out.begin(), n, ci16{819, -819});
                                               pos += n;
                                               return n;
                                           },
                                           on_batch)
                    .tally;
        } else {
            s = runtime::run_receiver(made.get_future().share(), rc, pn_pattern::pn15, 20.625e6,
                                      [&](std::span<cf32> out) {
                                          const std::size_t n = std::min(out.size(), samples.size() - pos.load());
                                          std::copy_n(samples.begin() + static_cast<std::ptrdiff_t>(pos.load()), n, out.begin());
                                          pos += n;
                                          return n;
                                      },
                                      on_batch)
                    .tally;
        }
        maker.join();
        ASSERT_EQ(order.size(), (samples.size() + 49'999) / 50'000);
        for (std::size_t i = 0; i < order.size(); ++i) EXPECT_EQ(order[i], i);
        EXPECT_EQ(s.samples, samples.size());
        // Three windows and the one being filled, at most, were read before the pool existed.
        EXPECT_GE(read_before_made.load(), 3 * rc.batch_samples);
        EXPECT_LE(read_before_made.load(), 4 * rc.batch_samples + 100'000);
        std::printf("run_receiver: %zu samples read before the pool was made\n", read_before_made.load());
        EXPECT_GT(s.timing.pool_wait_s, 0.1);
        EXPECT_EQ(be.unpinned_batches, 0u);
        for (const auto& p : be.pins) EXPECT_TRUE(p.expired());
    }
    {
        std::promise<runtime::worker_pool*> made;
        std::thread maker([&] {
            std::this_thread::sleep_for(100ms);
            made.set_exception(std::make_exception_ptr(std::runtime_error("no CUDA device 3")));
        });
        std::size_t pos = 0;
        EXPECT_THROW(
            {
                try {
                    (void)runtime::run_receiver(made.get_future().share(), rc, pn_pattern::pn15, 20.625e6, [&](std::span<cf32> out) {
                        const std::size_t n = std::min(out.size(), samples.size() - pos);
                        std::copy_n(samples.begin() + static_cast<std::ptrdiff_t>(pos), n, out.begin());
                        pos += n;
                        return n;
                    });
                } catch (const std::runtime_error& e) {
                    EXPECT_STREQ(e.what(), "no CUDA device 3");
                    throw;
                }
            },
            std::runtime_error);
        maker.join();
    }
}
