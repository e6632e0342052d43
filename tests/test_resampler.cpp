// The polyphase resampler to 2 samples per bit (dsp/resampler.hpp): its design measured on
// the table, its error on SOQPSK-TG against a long interpolator, its noise bandwidth, and the
// fixed-point positions that let CPU, GPU and any batch split agree bit for bit.
#include "resampler_fixture.hpp"

#include "dsp/resampler.hpp"
#include "sim/simulator.hpp"
#include "dsp/waveform.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numbers>
#include <random>
#include <stdexcept>

using namespace paq;
using namespace paq::dsp;
using namespace paq::sim;

namespace {

constexpr double two_pow_32 = 4294967296.0;

struct rate_case {
    const char* name;
    double ratio;  ///< input samples per output sample
};

// 10.3125 Mbit/s at 25, 30.72, 41.25 and 61.44 MS/s, and the clock-correction ratios near 1.
const rate_case rate_cases[] = {
    {"25MSps", 25e6 / 20.625e6},   {"30p72MSps", 30.72e6 / 20.625e6}, {"41p25MSps", 2.0},
    {"61p44MSps", 61.44e6 / 20.625e6}, {"clock_minus", 1.0 - 2e-4}, {"clock_plus", 1.0 + 2e-4},
    {"max", 3.2},
};

class resampler_rates : public ::testing::TestWithParam<rate_case> {};

/// Frequency response of the filter the table implements: the taps are the knots of a
/// piecewise-linear impulse response (spacing 1/P input samples), whose transform is the knots'
/// sum times sinc^2. f in units of the bit rate Rb (output terms).
double table_response_db(const resampler_design& d, double f_rb)
{
    const double f_in = f_rb / (2.0 * d.ratio);  // cycles per input sample
    const int n = d.taps, p_count = d.phases;
    const double delta = 1.0 / p_count;
    std::complex<double> acc = 0.0;
    for (int p = 0; p < p_count; ++p) {
        for (int k = 0; k < n; ++k) {
            const double tau = p * delta - (k - n / 2 + 1);
            const double h = d.coef[static_cast<std::size_t>((p * n + k) * 2)];
            acc += h * std::polar(1.0, -2.0 * std::numbers::pi * f_in * tau);
        }
    }
    const double x = std::numbers::pi * f_in * delta;
    const double tri = x == 0.0 ? 1.0 : std::pow(std::sin(x) / x, 2.0);
    return 20.0 * std::log10(std::abs(acc) * delta * tri);
}

/// A noiseless SOQPSK-TG stream at 2 samples per bit.
std::vector<cf32> soqpsk_2sps(std::size_t n, std::uint64_t seed)
{
    sim_config sc;
    sc.seed = seed;
    sc.phase_rad = 0.7;
    sc.timing_offset_samples = 0.3;
    simulator sim(sc);
    std::vector<cf32> x;
    sim.generate(n, x);
    return x;
}

double power_db(double num, double den) { return 10.0 * std::log10(num / den); }

}  // namespace

TEST(resampler_design, rejects_ratios_out_of_range_naming_them)
{
    for (const double bad : {0.5, 0.98, 3.3, 10.0, -1.0, std::nan("")}) {
        try {
            (void)design_resampler(bad);
            ADD_FAILURE() << "ratio " << bad << " accepted";
        } catch (const std::invalid_argument& e) {
            const std::string msg = e.what();
            EXPECT_NE(msg.find("0.99 .. 3.2"), std::string::npos) << msg;
            EXPECT_NE(msg.find("ratio"), std::string::npos) << msg;
        }
    }
    // From the rates: both rates and the allowed input range at that bit rate.
    try {
        (void)design_resampler_for_rates(70e6, 10.3125e6);
        ADD_FAILURE() << "70 MS/s at 10.3125 Mbit/s accepted";
    } catch (const std::invalid_argument& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find("70000000"), std::string::npos) << msg;
        EXPECT_NE(msg.find("10312500"), std::string::npos) << msg;
        EXPECT_NE(msg.find("1.98 .. 6.4 samples per bit"), std::string::npos) << msg;
        std::printf("error: %s\n", e.what());
    }
    EXPECT_THROW((void)design_resampler_for_rates(15e6, 10.3125e6), std::invalid_argument);  // 1.45 samples per bit
    EXPECT_NO_THROW((void)design_resampler_for_rates(61.44e6, 10.3125e6));
    EXPECT_THROW((void)to_fixed_step(0.0), std::invalid_argument);
    resampler_spec bad_spec;
    bad_spec.stopband_edge_rb = 0.5;
    EXPECT_THROW((void)design_resampler(2.0, bad_spec), std::invalid_argument);
}

TEST_P(resampler_rates, table_meets_the_design)
{
    const auto c = GetParam();
    const auto d = design_resampler(c.ratio);
    ASSERT_EQ(d.taps % 2, 0);
    ASSERT_EQ(d.coef.size(), static_cast<std::size_t>(2 * d.phases * d.taps));
    // Passband ripple over |f| <= 0.75 Rb and attenuation over |f| >= 1.25 Rb up to 8 Rb
    // (images included), on the filter the table implements.
    double pass_max = -1e9, pass_min = 1e9, stop_max = -1e9;
    for (double f = 0.0; f <= 0.75 + 1e-9; f += 0.01) {
        const double g = table_response_db(d, f);
        pass_max = std::max(pass_max, g);
        pass_min = std::min(pass_min, g);
    }
    for (double f = 1.25; f <= 8.0; f += 0.005) stop_max = std::max(stop_max, table_response_db(d, f));
    const double at_rb = table_response_db(d, 1.0);
    std::printf("ratio %.6f: N = %d taps, beta %.3f, passband ripple %+.4f / %+.4f dB, -%.1f dB at Rb, "
                "stopband attenuation %.1f dB\n",
                c.ratio, d.taps, d.kaiser_beta, pass_min, pass_max, -at_rb, -stop_max);
    EXPECT_LT(pass_max, 0.005);
    EXPECT_GT(pass_min, -0.005);
    EXPECT_LT(stop_max, -65.0);
    EXPECT_NEAR(at_rb, -6.02, 0.1);  // the transition is symmetric about Rb
}

TEST_P(resampler_rates, tones_pass_and_stop_as_designed)
{
    // Complex tones at the input rate, through resample(): amplitude and residual (images of
    // the phase table, float rounding) at the output.
    const auto c = GetParam();
    const auto d = design_resampler(c.ratio);
    const fixed_pos step = to_fixed_step(c.ratio);
    const double r_q = static_cast<double>(step) / two_pow_32;
    constexpr std::size_t n_out = 2000;
    const auto n_in = static_cast<std::size_t>(static_cast<double>(n_out) * r_q) + 200;
    const fixed_pos first = fixed_pos{100} << 32;
    double pass_dev = 0.0, resid_max = -1e9, impl_max = -1e9, stop_max = -1e9;
    const double f_nyq_rb = c.ratio;  // the input's Nyquist in units of Rb
    for (double f_rb = -f_nyq_rb; f_rb < f_nyq_rb; f_rb += 0.01) {
        const double f_in = f_rb / (2.0 * c.ratio);
        std::vector<cf32> x(n_in);
        for (std::size_t i = 0; i < n_in; ++i)
            x[i] = std::polar(1.0f, static_cast<float>(std::fmod(2.0 * std::numbers::pi * f_in * static_cast<double>(i), 2.0 * std::numbers::pi)));
        std::vector<cf32> y(n_out);
        resample(x.data(), n_in, first, step, y.data(), n_out, d);
        std::complex<double> proj = 0.0;
        std::vector<std::complex<double>> e(n_out);
        for (std::size_t m = 0; m < n_out; ++m) {
            const double t = 100.0 + static_cast<double>(m) * r_q;
            e[m] = std::polar(1.0, 2.0 * std::numbers::pi * f_in * t);
            proj += std::complex<double>(y[m].real(), y[m].imag()) * std::conj(e[m]);
        }
        proj /= static_cast<double>(n_out);
        double resid = 0.0;
        for (std::size_t m = 0; m < n_out; ++m) resid += std::norm(std::complex<double>(y[m].real(), y[m].imag()) - proj * e[m]);
        resid /= static_cast<double>(n_out);
        const double g_db = 20.0 * std::log10(std::abs(proj));
        if (std::abs(f_rb) <= 0.75) {
            pass_dev = std::max(pass_dev, std::abs(g_db));
            resid_max = std::max(resid_max, 10.0 * std::log10(resid + 1e-30));
            // The implementation's share: against the exact taps, on every 10th output.
            double impl = 0.0;
            for (std::size_t m = 0; m < n_out; m += 10) {
                cf64 ref;
                resample_reference(x.data(), n_in, first + m * step, step, &ref, 1, d);
                impl += std::norm(std::complex<double>(y[m].real(), y[m].imag()) - ref);
            }
            impl_max = std::max(impl_max, 10.0 * std::log10(impl / (n_out / 10) + 1e-30));
        }
        if (std::abs(f_rb) >= 1.25) stop_max = std::max(stop_max, 10.0 * std::log10(std::norm(proj) + resid));
    }
    // The residual of a passband tone is what varies with the output's fraction: the images
    // of the tone at f +- 1 cycle per input sample that the stopband leaves (design), and the
    // phase table's interpolation and float rounding (implementation, measured separately).
    std::printf("ratio %.6f: tones: passband deviation %.4f dB, residual %.1f dBc (of which table + float %.1f dBc), "
                "stopband output %.1f dB%s\n",
                c.ratio, pass_dev, resid_max, impl_max, stop_max, f_nyq_rb > 1.25 ? "" : " (no stopband below the input's Nyquist)");
    EXPECT_LT(pass_dev, 0.005);
    EXPECT_LT(resid_max, -68.0);
    EXPECT_LT(impl_max, -85.0);  // worst at R = 3.2: 5 fractions near mid-phase, -90 dBc
    if (f_nyq_rb > 1.25) {
        EXPECT_LT(stop_max, -65.0);
    }
}

TEST_P(resampler_rates, soqpsk_tg_comes_back_within_the_bound)
{
    // A noiseless 2-samples-per-bit SOQPSK-TG signal, brought to the input rate by the long
    // interpolator, resampled back: its error against the original. Noise at Eb/N0 = 11 dB is
    // -8.0 dB per sample (2 / 10^1.1); the bound, -45 dB, is 37 dB below it.
    const auto c = GetParam();
    const auto d = design_resampler(c.ratio);
    const fixed_pos step = to_fixed_step(c.ratio);
    const double r_q = static_cast<double>(step) / two_pow_32;
    const auto x = soqpsk_2sps(6 * waveform::L_pkt, 11);
    test::long_interpolator li;
    const auto n_in = static_cast<std::size_t>(static_cast<double>(x.size()) * r_q);
    const auto x_in = li.evaluate(x, 0.0, 1.0 / r_q, n_in);  // input sample n at 2-sps time n / r_q
    std::vector<cf32> y(x.size());
    resample(x_in.data(), n_in, 0, step, y.data(), y.size(), d);
    double sig = 0.0, err = 0.0, sig_sub = 0.0, err_ref = 0.0, impl = 0.0;
    for (std::size_t m = 200; m + 200 < x.size(); ++m) {  // away from the ends (zeros beyond)
        const cf64 xv(x[m].real(), x[m].imag()), yv(y[m].real(), y[m].imag());
        sig += std::norm(xv);
        err += std::norm(yv - xv);
        if (m % 16 == 0) {  // the double reference (exact taps) on every 16th output
            cf64 ref;
            resample_reference(x_in.data(), n_in, m * step, step, &ref, 1, d);
            sig_sub += std::norm(xv);
            err_ref += std::norm(ref - xv);
            impl += std::norm(yv - ref);
        }
    }
    std::printf("ratio %.6f: SOQPSK-TG error %.1f dB (design %.1f dB, implementation: table + float %.1f dB)\n", c.ratio,
                power_db(err, sig), power_db(err_ref, sig_sub), power_db(impl, sig_sub));
    EXPECT_LT(power_db(err, sig), -65.0);
    EXPECT_LT(power_db(impl, sig_sub), -90.0);
}

TEST_P(resampler_rates, white_noise_bandwidth_is_a_brick_wall_at_the_bit_rate)
{
    // Unit white noise at the input rate: a brick wall at +-Rb keeps min(1, 1/R) of it.
    const auto c = GetParam();
    const auto d = design_resampler(c.ratio);
    const fixed_pos step = to_fixed_step(c.ratio);
    constexpr std::size_t n_out = 200'000;
    const auto n_in = static_cast<std::size_t>(static_cast<double>(n_out) * c.ratio) + 200;
    std::vector<cf32> x(n_in, cf32(0.0f));
    test::add_noise(x, 1.0, 77);
    std::vector<cf32> y(n_out);
    resample(x.data(), n_in, fixed_pos{100} << 32, step, y.data(), n_out, d);
    double p = 0.0;
    for (const auto& v : y) p += std::norm(std::complex<double>(v.real(), v.imag()));
    p /= static_cast<double>(n_out);
    const double brick = std::min(1.0, 1.0 / c.ratio);
    const double rel_db = power_db(p, brick);
    std::printf("ratio %.6f: output noise %.4f, against a brick wall at +-Rb %+.3f dB\n", c.ratio, p, rel_db);
    // 200k samples: the estimate's own spread is 0.01 dB. At R > 1.25 the filter passes
    // (0.75, 1.25) Rb half on average: 0 dB; at R near 1 the input stops at Rb: -0.2 dB or so.
    EXPECT_LT(std::abs(rel_db), 0.3);
}

INSTANTIATE_TEST_SUITE_P(rates, resampler_rates, ::testing::ValuesIn(rate_cases),
                         [](const auto& tp) { return std::string(tp.param.name); });

TEST(resampler_positions, fixed_point_rule_is_exact)
{
    std::mt19937_64 rng(5);
    for (const auto& c : rate_cases) {
        const fixed_pos step = to_fixed_step(c.ratio);
        // The step is ratio rounded to 2^-32: within 2^-33 (1.2e-10, i.e. 1e-4 ppm).
        EXPECT_LE(std::abs(static_cast<double>(step) / two_pow_32 - c.ratio), std::ldexp(1.0, -33));
        const long double r_q = static_cast<long double>(step) / 4294967296.0L;
        for (int t = 0; t < 1000; ++t) {
            const std::uint64_t m = rng() % 1'300'000'000ull;  // positions up to 2^32 input samples
            const fixed_pos pos = position_of(m, step, 0);
            // floor(m x ratio x 2^32) with the ratio the step stands for (long double: exact here).
            const auto expect = static_cast<fixed_pos>(std::floor(static_cast<long double>(m) * r_q * 4294967296.0L));
            ASSERT_EQ(pos, expect) << c.name << " m = " << m;
            // Rebased on a later origin: the same fraction, the integer part less the origin.
            const std::uint64_t origin = (pos >> 32) / 2;
            EXPECT_EQ(position_of(m, step, origin), pos - (origin << 32));
        }
        // For dyadic ratios the nominal ratio is the step: floor(m ratio 2^32) directly.
        if (c.ratio == 2.0) {
            for (std::uint64_t m : {1ull, 7ull, 123456789ull}) EXPECT_EQ(position_of(m, step, 0), m * 2ull << 32);
        }
    }
}

TEST(resampler_positions, ratio_one_at_integer_positions_is_the_identity)
{
    // At R = 1 phase 0 is an exact unit impulse: the clock correction at 0 ppm returns its input.
    const auto d = design_resampler(1.0);
    const auto x = soqpsk_2sps(5000, 3);
    std::vector<cf32> y(x.size());
    resample(x.data(), x.size(), 0, to_fixed_step(1.0), y.data(), y.size(), d);
    EXPECT_EQ(std::memcmp(x.data(), y.data(), x.size() * sizeof(cf32)), 0);
}

TEST(resampler_positions, any_split_gives_the_same_bits)
{
    // A batcher cuts anywhere: outputs [0, M) in one call, in two calls split at every m1 of a
    // sample, and from a sub-window of the input rebased with position_of, are bit-identical.
    std::mt19937_64 rng(9);
    for (const auto& c : rate_cases) {
        const auto d = design_resampler(c.ratio);
        const fixed_pos step = to_fixed_step(c.ratio);
        const fixed_pos first = (fixed_pos{3} << 32) + 123456789u;
        constexpr std::size_t m_total = 6000;
        const auto n_in = static_cast<std::size_t>(static_cast<double>(m_total) * c.ratio) + 40;
        std::vector<cf32> x(n_in, cf32(0.0f));
        test::add_noise(x, 1.0, 21);
        std::vector<cf32> whole(m_total);
        resample(x.data(), n_in, first, step, whole.data(), m_total, d);
        for (int t = 0; t < 20; ++t) {
            const std::size_t m1 = rng() % m_total;
            std::vector<cf32> parts(m_total);
            resample(x.data(), n_in, first, step, parts.data(), m1, d);
            resample(x.data(), n_in, first + m1 * step, step, parts.data() + m1, m_total - m1, d);
            ASSERT_EQ(std::memcmp(whole.data(), parts.data(), m_total * sizeof(cf32)), 0) << c.name << " split at " << m1;

            // The second part from a window of the input that starts at `origin`: the outputs
            // that output_range says are supported inside it are the same bits.
            const std::uint64_t origin = rng() % (n_in / 2);
            const std::uint64_t end = origin + (n_in - origin) / 2 + 100;
            const auto r = output_range(first, step, origin, end, d);
            ASSERT_GT(r.supported.size(), 0u);
            const std::vector<cf32> window(x.begin() + static_cast<std::ptrdiff_t>(origin), x.begin() + static_cast<std::ptrdiff_t>(end));
            std::vector<cf32> from_window(r.supported.size());
            // position_of(m, step, origin) is m step - origin 2^32; first_pos adds the segment's.
            resample(window.data(), window.size(), first + position_of(r.supported.begin, step, origin), step,
                     from_window.data(), from_window.size(), d);
            ASSERT_EQ(std::memcmp(whole.data() + r.supported.begin, from_window.data(), from_window.size() * sizeof(cf32)), 0)
                << c.name << " window " << origin << " .. " << end;
        }
    }
}

TEST(resampler_positions, output_range_matches_brute_force)
{
    std::mt19937_64 rng(13);
    for (const auto& c : rate_cases) {
        const auto d = design_resampler(c.ratio);
        const fixed_pos step = to_fixed_step(c.ratio);
        const long long half = d.filter_half_span();
        for (int t = 0; t < 50; ++t) {
            const fixed_pos first = rng() % (fixed_pos{50} << 32);
            const std::uint64_t a = rng() % 300, b = a + rng() % 300;
            const auto r = output_range(first, step, a, b, d);
            std::uint64_t pos_count = 0, sup_count = 0;
            for (std::uint64_t m = 0; m < 1000; ++m) {
                const fixed_pos pos = first + m * step;
                const auto i = static_cast<long long>(pos >> 32);
                const bool positioned = pos >= (a << 32) && pos < (b << 32);
                const bool supported = i - half + 1 >= static_cast<long long>(a) && i + half < static_cast<long long>(b);
                ASSERT_EQ(positioned, m >= r.positioned.begin && m < r.positioned.end) << c.name << " m " << m;
                ASSERT_EQ(supported, m >= r.supported.begin && m < r.supported.end) << c.name << " m " << m;
                pos_count += positioned;
                sup_count += supported;
            }
            EXPECT_EQ(pos_count, r.positioned.size());
            EXPECT_EQ(sup_count, r.supported.size());
        }
    }
}
