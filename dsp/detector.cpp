#include "dsp/detector.hpp"

#include "dsp/waveform.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <cstring>

namespace paq::dsp {

pll_gains make_pll_gains(double bn_t, double zeta) noexcept
{
    // Standard discrete PI loop (Rice, Digital Communications, app. C), Kp = 2, K0 = 1.
    const double theta_n = bn_t / (zeta + 1.0 / (4.0 * zeta));
    const double den = 1.0 + 2.0 * zeta * theta_n + theta_n * theta_n;
    constexpr double kp = 2.0;
    return {4.0 * zeta * theta_n / den / kp, 4.0 * theta_n * theta_n / den / kp};
}

namespace {

/// The loop gains assume unit amplitude at the decision instants. Equalizers deliver
/// different amplitudes (MMSE and the FDEs shrink by SNR, the unequalized path by the
/// channel), so the phase error is normalized by the mean magnitude over the known bits:
/// the loop bandwidth is then the configured one on every path.
double error_scale(const cf64* v) noexcept
{
    double amp = 0.0;
    for (std::size_t k = 0; k < waveform::known_bits; ++k) amp += std::abs(v[k]);
    amp /= static_cast<double>(waveform::known_bits);
    return amp > 0.0 ? 1.0 / amp : 0.0;
}

/// The packet's statistics from the data decisions' |statistic| sums: BEP = Q(mean / std).
path_stats decision_stats(double sum, double sum2, unsigned known_errors) noexcept
{
    const double n = static_cast<double>(waveform::data_bits);
    const double mean = sum / n;
    const double var = std::max(sum2 / n - mean * mean, 1e-300);
    path_stats st;
    st.known_bit_errors = static_cast<std::uint16_t>(known_errors);
    st.bep_estimate = static_cast<float>(0.5 * std::erfc(mean / std::sqrt(2.0 * var)));
    return st;
}

}  // namespace

path_stats detect_packet(const cf64* v, const pll_gains& acq, const pll_gains& track, std::uint8_t* bits_out) noexcept
{
    static const auto known = waveform::known_packet_bits();
    constexpr std::size_t nk = waveform::known_bits;
    std::memset(bits_out, 0, waveform::data_bits / 8);
    double theta = 0.0, nu = 0.0;
    cf64 rot(1.0, 0.0);
    cf64 y_prev = 0.0;
    double a_prev = 0.0;
    double sum = 0.0, sum2 = 0.0;
    unsigned known_errors = 0;
    const double e_scale = error_scale(v);
    for (std::size_t k = 0; k < waveform::packet_bits; ++k) {
        const cf64 y = v[k] * rot;
        const bool even = k % 2 == 0;
        const double comp = even ? y.real() : y.imag();
        const double dec = comp >= 0.0 ? 1.0 : -1.0;
        double a;
        if (k < nk) {
            a = known[k] ? 1.0 : -1.0;
            if (dec != a) ++known_errors;
        } else {
            a = dec;
            const std::size_t i = k - nk;
            if (dec > 0) bits_out[i / 8] = static_cast<std::uint8_t>(bits_out[i / 8] | (0x80u >> (i % 8)));
            const double m = std::abs(comp);
            sum += m;
            sum2 += m * m;
        }
        if (!even) {
            const double e = (a_prev * y_prev.imag() - a * y.real()) * e_scale;
            const pll_gains& g = k < nk ? acq : track;
            nu += g.k2 * e;
            theta += g.k1 * e + nu;
            theta = std::remainder(theta, 2.0 * std::numbers::pi);
            rot = std::polar(1.0, -theta);
        }
        y_prev = y;
        a_prev = a;
    }
    return decision_stats(sum, sum2, known_errors);
}

path_stats detect_packet_smoothed(const cf64* v, const pll_gains& acq, const pll_gains& track, std::uint8_t* bits_out,
                                  float* scratch) noexcept
{
    static const auto known = waveform::known_packet_bits();
    constexpr std::size_t nk = waveform::known_bits;
    constexpr std::size_t np2 = phase_pairs;
    constexpr double two_pi = 2.0 * std::numbers::pi;
    std::memset(bits_out, 0, waveform::data_bits / 8);
    const double e_scale = error_scale(v);
    // One loop step over pair j at phase theta: the pair's error and the decisions it used.
    auto pair_error = [&](std::size_t j, double theta, unsigned* known_errors) {
        const cf64 rot = std::polar(1.0, -theta);
        const cf64 y0 = v[2 * j] * rot, y1 = v[2 * j + 1] * rot;
        const double d0 = y0.real() >= 0.0 ? 1.0 : -1.0, d1 = y1.imag() >= 0.0 ? 1.0 : -1.0;
        double a0 = d0, a1 = d1;
        if (2 * j + 1 < nk) {
            a0 = known[2 * j] ? 1.0 : -1.0;
            a1 = known[2 * j + 1] ? 1.0 : -1.0;
            if (known_errors) *known_errors += (d0 != a0) + (d1 != a1);
        }
        return (a0 * y0.imag() - a1 * y1.real()) * e_scale;
    };
    double theta = 0.0, nu = 0.0;
    unsigned known_errors = 0;
    for (std::size_t j = 0; j < np2; ++j) {
        scratch[j] = static_cast<float>(theta);
        const double e = pair_error(j, theta, &known_errors);
        const pll_gains& g = 2 * j + 1 < nk ? acq : track;
        nu += g.k2 * e;
        theta += g.k1 * e + nu;
        theta = std::remainder(theta, two_pi);
    }
    double tb = theta, nb = -nu, sum = 0.0, sum2 = 0.0;
    for (std::size_t j = np2; j-- > 0;) {
        if (2 * j >= nk) {
            // The decisions of pair j on the mean of the two phases.
            const double tf = scratch[j];
            const double ts = tf + 0.5 * std::remainder(tb - tf, two_pi);
            const cf64 rot = std::polar(1.0, -ts);
            const double c0 = (v[2 * j] * rot).real(), c1 = (v[2 * j + 1] * rot).imag();
            const std::size_t i = 2 * j - nk;
            if (c0 >= 0.0) bits_out[i / 8] = static_cast<std::uint8_t>(bits_out[i / 8] | (0x80u >> (i % 8)));
            if (c1 >= 0.0) bits_out[(i + 1) / 8] = static_cast<std::uint8_t>(bits_out[(i + 1) / 8] | (0x80u >> ((i + 1) % 8)));
            sum += std::abs(c0) + std::abs(c1);
            sum2 += c0 * c0 + c1 * c1;
        }
        const double e = pair_error(j, tb, nullptr);
        const pll_gains& g = 2 * j + 1 < nk ? acq : track;
        nb += g.k2 * e;
        tb += g.k1 * e + nb;
        tb = std::remainder(tb, two_pi);
    }
    return decision_stats(sum, sum2, known_errors);
}

}  // namespace paq::dsp
