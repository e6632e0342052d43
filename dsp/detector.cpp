#include "dsp/detector.hpp"

#include "dsp/waveform.hpp"

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

path_stats detect_packet(const cf64* v, const pll_gains& acq, const pll_gains& track, std::uint8_t* bits_out) noexcept
{
    static const auto known = waveform::known_packet_bits();
    constexpr std::size_t nk = waveform::known_bits;
    std::memset(bits_out, 0, waveform::data_bits / 8);
    path_stats st;
    double theta = 0.0, nu = 0.0;
    cf64 rot(1.0, 0.0);
    cf64 y_prev = 0.0;
    double a_prev = 0.0;
    double sum = 0.0, sum2 = 0.0;
    unsigned known_errors = 0;
    // The loop gains assume unit amplitude at the decision instants. Equalizers deliver
    // different amplitudes (MMSE and the FDEs shrink by SNR, the unequalized path by the
    // channel), so the phase error is normalized by the mean magnitude over the known bits:
    // the loop bandwidth is then the configured one on every path.
    double amp = 0.0;
    for (std::size_t k = 0; k < nk; ++k) amp += std::abs(v[k]);
    amp /= static_cast<double>(nk);
    const double e_scale = amp > 0.0 ? 1.0 / amp : 0.0;
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
    const double n = static_cast<double>(waveform::data_bits);
    const double mean = sum / n;
    const double var = std::max(sum2 / n - mean * mean, 1e-300);
    st.known_bit_errors = static_cast<std::uint16_t>(known_errors);
    st.bep_estimate = static_cast<float>(0.5 * std::erfc(mean / std::sqrt(2.0 * var)));
    return st;
}

}  // namespace paq::dsp
