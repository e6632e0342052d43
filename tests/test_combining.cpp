// Two receive channels (receiver_config::channels 2, dsp/combining.hpp): the joint designs against
// their one-channel forms and against the mean square error they minimize, and the chain over
// two channels of one transmission against the targets: the gain on equal AWGN channels, a
// channel that carries noise only, and shadowed multipath channels.
#include "chain_fixture.hpp"

#include "dsp/combining.hpp"
#include "dsp/equalizers.hpp"
#include "dsp/preamble_detector.hpp"

#include <algorithm>
#include <array>
#include <limits>
#include <numbers>
#include <random>

namespace paq {
namespace {

using dsp::channel_taps;
using dsp::eq_taps;
namespace chain = dsp::chain;

channel_taps random_channel(std::mt19937& g, double main = 1.0)
{
    std::normal_distribution<double> n(0.0, 0.2);
    channel_taps h{};
    for (auto& v : h) v = {n(g), n(g)};
    h[chain::N1] += main;
    return h;
}

/// The mean square error E|y(n) - x(n)|^2 of taps c over channels h with noise 2 sigma2 per
/// channel, unit-power independent symbols: the combined response g = sum_c c_c * h_c written
/// out as a convolution, sum_k |g(k) - delta(k)|^2 + sum_c 2 sigma2_c |c_c|^2.
double mse(std::span<const channel_taps> h, std::span<const double> noise, std::span<const eq_taps> c)
{
    constexpr int k_lo = -chain::L1 - chain::N1, k_hi = chain::L2 + chain::N2;
    double e = 0.0;
    for (int k = k_lo; k <= k_hi; ++k) {
        cf64 g = 0.0;
        for (std::size_t ch = 0; ch < h.size(); ++ch) {
            for (int l = -chain::L1; l <= chain::L2; ++l) {
                const int m = k - l;
                if (m < -chain::N1 || m > chain::N2) continue;
                g += c[ch][static_cast<std::size_t>(l + chain::L1)] * h[ch][static_cast<std::size_t>(m + chain::N1)];
            }
        }
        e += std::norm(g - (k == 0 ? 1.0 : 0.0));
    }
    for (std::size_t ch = 0; ch < h.size(); ++ch) {
        for (const auto& v : c[ch]) e += noise[ch] * std::norm(v);
    }
    return e;
}

TEST(combining, one_channel_designs_are_the_one_channel_equalizers)
{
    std::mt19937 g(8807);
    const auto h = random_channel(g);
    const double sigma2 = 0.03;
    std::vector<cf64> work;
    for (const double load : {0.0, 2.0 * sigma2}) {
        eq_taps one{}, joint{};
        (void)dsp::solve_equalizer(h, dsp::channel_autocorrelation(h), load, one, work);
        (void)dsp::solve_joint_equalizer(std::span(&h, 1), std::array{load}, std::span(&joint, 1), work);
        double scale = 0.0, diff = 0.0;
        for (std::size_t i = 0; i < one.size(); ++i) {
            scale = std::max(scale, std::abs(one[i]));
            diff = std::max(diff, std::abs(one[i] - joint[i]));
        }
        EXPECT_LT(diff, 1e-9 * scale) << "load " << load;
    }
    // FDE and the single path: the combiners with one channel are the one-channel responses.
    const std::size_t n = 16384;
    dsp::fft_plan fwd(n, dsp::fft_plan::direction::forward);
    dsp::fft_buffer hs(n), a(n), b(n);
    dsp::taps_to_spectrum(h.data(), -chain::N1, chain::L_ch, fwd, hs);
    const dsp::fft_buffer* hp = &hs;
    dsp::fft_buffer* bp = &b;
    dsp::fde_response(hs, sigma2, nullptr, a);
    dsp::fde_combining_response(std::span(&hp, 1), std::array{sigma2}, nullptr, std::span(&bp, 1));
    for (std::size_t k = 0; k < n; k += 97) EXPECT_LT(std::abs(a[k] - b[k]), 1e-12 * (1.0 + std::abs(a[k]))) << k;
    const auto sp = dsp::fit_single_path(h);
    dsp::single_path_response(sp, a);
    dsp::mrc_single_path_response(std::span(&sp, 1), std::array{sigma2}, std::array{1.0}, std::span(&bp, 1));
    for (std::size_t k = 0; k < n; k += 97) EXPECT_LT(std::abs(a[k] - b[k]), 1e-12 * std::abs(a[k])) << k;
}

TEST(combining, the_joint_mmse_minimizes_the_mean_square_error_over_both_channels)
{
    std::mt19937 g(8819);
    const std::array<channel_taps, 2> h{random_channel(g), random_channel(g, 0.6)};
    const std::array<double, 2> noise{2.0 * 0.02, 2.0 * 0.05};
    std::vector<cf64> work;
    std::array<eq_taps, 2> c{};
    const auto res = dsp::solve_joint_equalizer(h, noise, c, work);
    EXPECT_FALSE(res.regularized);
    const double best = mse(h, noise, c);
    // Every small step away from the solution raises the error (the normal equations' terms
    // are those of the convolution above, cross terms included).
    std::normal_distribution<double> n(0.0, 1e-3);
    for (int trial = 0; trial < 20; ++trial) {
        auto d = c;
        for (auto& taps : d) {
            for (auto& v : taps) v += cf64(n(g), n(g));
        }
        EXPECT_GT(mse(h, noise, d), best) << trial;
    }
    // And it beats each channel's own MMSE equalizer (the other channel's taps zero).
    for (std::size_t ch = 0; ch < 2; ++ch) {
        std::array<eq_taps, 2> alone{};
        (void)dsp::solve_equalizer(h[ch], dsp::channel_autocorrelation(h[ch]), noise[ch], alone[ch], work);
        EXPECT_LT(best, 0.8 * mse(h, noise, alone)) << "channel " << ch + 1;
    }
    // ZF over two channels: maximal-ratio combining, then the combined channel's ZF: the
    // combined response (sum_c w_c |H_c|^2 through the taps) is forced to an impulse.
    eq_taps zf{};
    EXPECT_FALSE(dsp::solve_combined_zf(h, std::array{0.02, 0.05}, zf, work).regularized);
    {
        const std::size_t fft_n = 16384;
        const double scale = static_cast<double>(fft_n);
        dsp::fft_plan fwd(fft_n, dsp::fft_plan::direction::forward), inv(fft_n, dsp::fft_plan::direction::inverse);
        dsp::fft_buffer h0(fft_n), h1(fft_n), cz(fft_n), y(fft_n);
        dsp::taps_to_spectrum(h[0].data(), -chain::N1, chain::L_ch, fwd, h0);
        dsp::taps_to_spectrum(h[1].data(), -chain::N1, chain::L_ch, fwd, h1);
        dsp::taps_to_spectrum(zf.data(), -chain::L1, chain::L_eq, fwd, cz);
        const auto w = dsp::combining_weights(std::array{0.02, 0.05});
        for (std::size_t k = 0; k < fft_n; ++k) y[k] = (w[0] * std::norm(h0[k]) + w[1] * std::norm(h1[k])) * cz[k];
        inv.execute(y.data(), y.data());
        double isi = 0.0;
        for (std::size_t k = 1; k < fft_n; ++k) isi += std::norm(y[k] / scale);
        EXPECT_NEAR(y[0].real() / scale, 1.0, 0.01);
        // As closely as channel 1's own ZF forces channel 1 (186 taps either way).
        eq_taps zf1{};
        (void)dsp::solve_equalizer(h[0], dsp::channel_autocorrelation(h[0]), 0.0, zf1, work);
        dsp::taps_to_spectrum(zf1.data(), -chain::L1, chain::L_eq, fwd, cz);
        for (std::size_t k = 0; k < fft_n; ++k) y[k] = h0[k] * cz[k];
        inv.execute(y.data(), y.data());
        double isi1 = 0.0;
        for (std::size_t k = 1; k < fft_n; ++k) isi1 += std::norm(y[k] / scale);
        EXPECT_LT(isi, 0.01);
        EXPECT_LT(isi, 2.0 * isi1) << "channel 1's own ZF: " << isi1;
    }
}

TEST(combining, the_joint_condition_is_the_one_channel_condition_and_bounds_two)
{
    std::mt19937 g(7331);
    const auto h = random_channel(g);
    for (const double load : {0.0, 0.02, 1.0}) {
        const std::array<channel_taps, 1> one{h};
        const std::array<double, 1> l1{load};
        EXPECT_NEAR(dsp::joint_spectral_condition(one, l1), dsp::spectral_condition(h, load),
                    1e-9 * dsp::spectral_condition(h, load));
    }
    // The same channel twice, load l on each: S(f) has the eigenvalues 2 |H|^2 + l and l.
    const std::array<channel_taps, 2> two{h, h};
    const std::array<double, 2> loads{0.05, 0.05};
    double hi = 0.0;
    for (int k = 0; k < 2048; ++k) {
        cf64 s = 0.0;
        for (int m = 0; m < chain::L_ch; ++m) s += h[static_cast<std::size_t>(m)] * std::polar(1.0, -2.0 * std::numbers::pi * k * m / 2048.0);
        hi = std::max(hi, std::norm(s));
    }
    EXPECT_NEAR(dsp::joint_spectral_condition(two, loads), (2.0 * hi + 0.05) / 0.05, 1e-9 * (2.0 * hi + 0.05) / 0.05);
    const std::array<double, 1> short_loads{0.05};
    EXPECT_THROW((void)dsp::joint_spectral_condition(two, short_loads), std::invalid_argument);
}

TEST(combining, the_combiners_weigh_each_channel_by_its_noise)
{
    const auto w = dsp::combining_weights(std::array{0.01, 0.04});
    EXPECT_DOUBLE_EQ(w[0], 1.0);
    EXPECT_DOUBLE_EQ(w[1], 0.25);
    // Beside a noiseless channel the other weighs nothing; a noise not known weighs nothing.
    const auto z = dsp::combining_weights(std::array{0.0, 0.04});
    EXPECT_DOUBLE_EQ(z[0], 1.0);
    EXPECT_DOUBLE_EQ(z[1], 0.0);
    const auto unknown = dsp::combining_weights(std::array{std::numeric_limits<double>::infinity(), 0.04});
    EXPECT_DOUBLE_EQ(unknown[0], 0.0);
    EXPECT_DOUBLE_EQ(unknown[1], 1.0);
    EXPECT_THROW((void)dsp::combining_weights(std::array{0.01, 0.02, 0.03}), std::invalid_argument);
    // Equal single paths, channel 2 four times as noisy: maximal-ratio weights 1 and 1/4 of
    // total 1.25 at f = 0.
    const std::size_t n = 16384;
    dsp::fft_buffer a(n), b(n);
    std::array<dsp::fft_buffer*, 2> out{&a, &b};
    const dsp::single_path p{0.0, cf64(1.0, 0.0)};
    dsp::mrc_single_path_response(std::array{p, p}, std::array{0.01, 0.04}, std::array{1.0, 1.0}, out);
    EXPECT_NEAR(a[0].real(), 0.8, 1e-12);
    EXPECT_NEAR(b[0].real(), 0.2, 1e-12);
    // Channel 2's estimate mostly noise (a signal fraction of 0.1): its gain shrunk tenfold in
    // the combiner (weights 1 and 0.25 x 0.1 over their sum 1.025), the combined gain still 1.
    dsp::mrc_single_path_response(std::array{p, p}, std::array{0.01, 0.04}, std::array{1.0, 0.1}, out);
    EXPECT_NEAR(a[0].real(), 1.0 / 1.025, 1e-12);
    EXPECT_NEAR(b[0].real(), 0.025 / 1.025, 1e-12);
    EXPECT_NEAR(a[0].real() + b[0].real(), 1.0, 1e-12);
    // Neither estimate shows signal: the plain combiner, never a path of zeros.
    dsp::mrc_single_path_response(std::array{p, p}, std::array{0.01, 0.04}, std::array{0.0, 0.0}, out);
    EXPECT_NEAR(a[0].real(), 0.8, 1e-12);
    EXPECT_NEAR(b[0].real(), 0.2, 1e-12);
    EXPECT_THROW(dsp::mrc_single_path_response(std::array{p, p}, std::array{0.01, 0.04}, std::array{1.0}, out), std::invalid_argument);
    // The signal fraction: the estimate's power less its noise's, over it, in [0, 1].
    EXPECT_DOUBLE_EQ(dsp::signal_fraction(1.0, 0.01, 5.0), 0.9);
    EXPECT_DOUBLE_EQ(dsp::signal_fraction(0.05, 0.01, 5.0), 0.0);
    EXPECT_DOUBLE_EQ(dsp::signal_fraction(0.0, 0.01, 5.0), 0.0);
    EXPECT_DOUBLE_EQ(dsp::signal_fraction(std::numeric_limits<double>::quiet_NaN(), 0.01, 5.0), 0.0);
    EXPECT_DOUBLE_EQ(dsp::signal_fraction(1.0, 0.0, 5.0), 1.0);
    // The same samples on both channels: the metric over two is the one channel's.
    sim::sim_config sc;
    sc.ebn0_db = 8.0;
    sc.seed = 8821;
    const auto x = test::simulate(sc, 3).samples;
    const auto& t = dsp::get_receiver_tables(16384);
    std::vector<double> m1(x.size() - dsp::detector_span + 1), m2(m1.size());
    dsp::preamble_metric(x, m1, t.preamble_template);
    const std::array<std::span<const cf32>, 2> both{x, x};
    dsp::preamble_metric(both, m2, t.preamble_template);
    for (std::size_t u = 0; u < m1.size(); u += 101) EXPECT_NEAR(m1[u], m2[u], 1e-12) << u;
}

/// One transmission received on two channels: channel 1 by `a`, channel 2 by `b` (the same
/// data, clock and carrier; its own noise), both channels' samples per sample time.
struct two_channel_run {
    std::vector<cf32x2> both;
    std::vector<cf32> first, second;
};
two_channel_run simulate_two(sim::sim_config a, sim::sim_config b, std::size_t packets)
{
    a.channel = 0;
    b.channel = 1;
    two_channel_run r;
    r.first = test::simulate(a, packets).samples;
    r.second = test::simulate(b, packets).samples;
    r.both.resize(std::min(r.first.size(), r.second.size()));
    for (std::size_t i = 0; i < r.both.size(); ++i) r.both[i] = {r.first[i], r.second[i]};
    return r;
}

struct two_channel_result {
    dsp::run_summary combined, first, second;
    std::uint64_t chose_second = 0, packets = 0;
};
two_channel_result receive_two(const two_channel_run& r, double rate_hz,
                               dsp::combining_kind combining = dsp::combining_kind::joint)
{
    dsp::receiver_config rc = test::small_batches();
    rc.input_sample_rate_hz = rate_hz;
    two_channel_result out;
    {
        dsp::cpu_backend be(rc);
        out.first = runtime::run_receiver(be, rc, dsp::pn_pattern::pn15, rate_hz, r.first);
        out.second = runtime::run_receiver(be, rc, dsp::pn_pattern::pn15, rate_hz, r.second);
    }
    rc.channels = 2;
    rc.combining = combining;
    dsp::cpu_backend be(rc);
    out.combined = runtime::run_receiver_x2(be, rc, dsp::pn_pattern::pn15, rate_hz, r.both, [&](const dsp::batch_output& o) {
        for (const auto& rec : o.packets) {
            EXPECT_EQ(rec.receive_channels, 2);
            out.chose_second += rec.best_channel;
            ++out.packets;
        }
    });
    return out;
}

double ber(const dsp::run_summary& s, int path)
{
    const auto& p = s.paths[static_cast<std::size_t>(path)];
    return static_cast<double>(p.bit_errors) / static_cast<double>(std::max<std::uint64_t>(p.bits_checked, 1));
}

// Equal AWGN channels with independent noise: the combined paths are at least 2.5 dB better
// than one channel (3 dB is the limit). Checked at 5 dB a channel against one channel at
// 7.5 dB (a recording of its own, another seed), at 24 MS/s, +25 ppm, 9 kHz.
TEST(two_channels, equal_awgn_channels_gain_at_least_2_5_db)
{
    sim::sim_config a;
    a.ebn0_db = 5.0;
    a.seed = 7121;
    a.sample_rate_hz = 24e6;
    a.clock_ppm = 25.0;
    a.cfo_hz = 9e3;
    sim::sim_config b = a;
    b.phase_rad = 1.1;
    b.delay_ns = 25.0;
    const auto r = simulate_two(a, b, 120);
    const auto res = receive_two(r, a.sample_rate_hz);
    sim::sim_config ref = a;
    ref.ebn0_db = 7.5;
    ref.seed = 7129;
    dsp::receiver_config rc = test::small_batches();
    rc.input_sample_rate_hz = a.sample_rate_hz;
    dsp::cpu_backend be(rc);
    const auto alone = runtime::run_receiver(be, rc, dsp::pn_pattern::pn15, a.sample_rate_hz, test::simulate(ref, 120).samples);
    ASSERT_GE(res.combined.packets_found, 95u);
    EXPECT_EQ(res.combined.packets_found, res.first.packets_found);
    // The combined Eb/N0 estimate is the channels' summed: 3 dB above each.
    EXPECT_NEAR(res.combined.mean_ebn0_db - res.first.mean_ebn0_db, 3.0, 0.4);
    for (int p = 0; p < chain::num_paths; ++p) {
        SCOPED_TRACE(dsp::path_name(p));
        EXPECT_GT(ber(res.first, p), 2.0 * ber(res.combined, p));
        EXPECT_LE(ber(res.combined, p), ber(alone, p)) << "one channel at 7.5 dB: " << ber(alone, p);
    }
}

// Channel 2 all but noise only (Eb/N0 -10 dB, 23 dB under channel 1): the combined paths
// lose little against channel 1 alone, and every packet's best channel is channel 1.
TEST(two_channels, a_channel_of_noise_only_costs_little_and_is_never_chosen)
{
    sim::sim_config a;
    a.preset = "edwards3";
    a.ebn0_db = 13.0;
    a.seed = 7151;
    a.cfo_hz = -21e3;
    sim::sim_config b = a;
    b.preset = "two-ray";
    b.ebn0_db = -10.0;
    const auto r = simulate_two(a, b, 120);
    const auto res = receive_two(r, 2.0 * a.bit_rate_hz);
    ASSERT_GE(res.combined.packets_found, 110u);
    EXPECT_EQ(res.combined.packets_found, res.first.packets_found);
    EXPECT_EQ(res.chose_second, 0u);
    for (int p = 0; p < chain::num_paths; ++p) {
        SCOPED_TRACE(dsp::path_name(p));
        EXPECT_LE(ber(res.combined, p), 1.1 * ber(res.first, p) + 2e-5);
    }
}

// Edwards AFB on channel 1, two rays on channel 2, each with its own airframe shadowing (10 dB
// fades): the combined MMSE path's BER is at most a fifth of the better channel's MMSE.
TEST(two_channels, shadowed_multipath_channels_combine_to_a_fifth_of_the_better_ber)
{
    sim::sim_config a;
    a.preset = "edwards3";
    a.ebn0_db = 12.0;
    a.seed = 7177;
    a.cfo_hz = 14e3;
    a.clock_ppm = -30.0;
    a.shadow_depth_db = 10.0;
    a.shadow_duration_s = 0.01;
    a.shadow_interval_s = 0.02;
    sim::sim_config b = a;
    b.preset = "two-ray";
    b.delay_ns = 40.0;
    b.phase_rad = 2.0;
    const auto r = simulate_two(a, b, 120);
    const auto res = receive_two(r, 2.0 * a.bit_rate_hz);
    ASSERT_GE(res.combined.packets_found, 110u);
    const double better = std::min(ber(res.first, 2), ber(res.second, 2));
    EXPECT_GT(better, 1e-3);
    EXPECT_LE(ber(res.combined, 2), better / 5.0) << "channel 1 " << ber(res.first, 2) << ", channel 2 " << ber(res.second, 2);
    // The best channel follows the fades: each channel is the better one on some packets.
    EXPECT_GT(res.chose_second, res.packets / 10);
    EXPECT_LT(res.chose_second, res.packets - res.packets / 10);
}

// Selection diversity (receiver.combining select): every path on the packet's channel of the
// smaller MMSE error, as the one-channel chain receives that channel. Beside a channel of
// noise only it is channel 1 alone, bit for bit; with independent shadowing it beats the better
// channel alone, and the joint combiner beats it.
TEST(two_channels, selection_receives_each_packet_on_its_better_channel)
{
    sim::sim_config a;
    a.preset = "edwards3";
    a.ebn0_db = 13.0;
    a.seed = 7177;
    a.cfo_hz = 14e3;
    sim::sim_config b = a;
    b.preset = "awgn";
    b.ebn0_db = -10.0;
    const auto weak = simulate_two(a, b, 60);
    const auto sel = receive_two(weak, 2.0 * a.bit_rate_hz, dsp::combining_kind::select);
    ASSERT_GE(sel.combined.packets_found, 55u);
    EXPECT_EQ(sel.chose_second, 0u);
    EXPECT_EQ(sel.combined.packets_found, sel.first.packets_found);
    for (int p = 0; p < chain::num_paths; ++p) {
        SCOPED_TRACE(dsp::path_name(p));
        EXPECT_EQ(sel.combined.paths[static_cast<std::size_t>(p)].bit_errors, sel.first.paths[static_cast<std::size_t>(p)].bit_errors);
        EXPECT_EQ(sel.combined.paths[static_cast<std::size_t>(p)].bits_checked, sel.first.paths[static_cast<std::size_t>(p)].bits_checked);
    }
    a.ebn0_db = 11.0;
    a.seed = 7187;
    a.shadow_depth_db = 10.0;
    a.shadow_duration_s = 0.01;
    a.shadow_interval_s = 0.02;
    b = a;
    b.preset = "two-ray";
    b.delay_ns = 40.0;
    b.phase_rad = 2.0;
    const auto faded = simulate_two(a, b, 120);
    const auto s = receive_two(faded, 2.0 * a.bit_rate_hz, dsp::combining_kind::select);
    const auto j = receive_two(faded, 2.0 * a.bit_rate_hz);
    ASSERT_GE(s.combined.packets_found, 110u);
    const double better = std::min(ber(s.first, 2), ber(s.second, 2));
    EXPECT_GT(better, 1e-3);
    EXPECT_LT(ber(s.combined, 2), better) << "channel 1 " << ber(s.first, 2) << ", channel 2 " << ber(s.second, 2);
    EXPECT_LT(ber(j.combined, 2), ber(s.combined, 2));
    EXPECT_GT(s.chose_second, s.packets / 10);
    EXPECT_LT(s.chose_second, s.packets - s.packets / 10);
}

}  // namespace
}  // namespace paq
