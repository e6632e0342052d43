#include "dsp/soqpsk.hpp"

#include "dsp/waveform.hpp"

#include <cmath>
#include <numbers>
#include <random>

namespace paq::dsp {

namespace {
constexpr double pi = std::numbers::pi;
}

double tg_frequency_pulse_unnormalized(double t) noexcept
{
    using namespace waveform;
    const double at = std::abs(t);
    const double half = at / 2.0;
    if (half > tg_T1 + tg_T2) {
        return 0.0;
    }
    double w = 1.0;
    if (half >= tg_T1) {
        w = 0.5 * (1.0 + std::cos(pi * (half - tg_T1) / tg_T2));
    }
    const double x = tg_rho * tg_B * t / 2.0;
    const double den = 1.0 - 4.0 * x * x;
    // cos(pi x) / (1 - 4x^2) -> pi/4 at x = +-1/2 (L'Hopital).
    const double raised = std::abs(den) < 1e-9 ? pi / 4.0 : std::cos(pi * x) / den;
    const double arg = pi * tg_B * t / 2.0;
    const double sinc = std::abs(arg) < 1e-12 ? 1.0 : std::sin(arg) / arg;
    return raised * sinc * w;
}

const std::array<double, 17>& tg_phase_pulse_half_bits() noexcept
{
    static const std::array<double, 17> table = [] {
        // Simpson's rule on a fine grid over [-4, 4]; 4096 intervals per half bit is far
        // below any rounding that matters (checked in test_modulator).
        constexpr int per_half = 4096;
        constexpr int n = 16 * per_half;
        const double h = 8.0 / n;
        std::array<double, 17> q{};
        double acc = 0.0;
        for (int seg = 0; seg < 16; ++seg) {
            double s = 0.0;
            const int i0 = seg * per_half;
            for (int i = 0; i <= per_half; ++i) {
                const double t = -4.0 + (i0 + i) * h;
                const double wgt = (i == 0 || i == per_half) ? 1.0 : (i % 2 ? 4.0 : 2.0);
                s += wgt * tg_frequency_pulse_unnormalized(t);
            }
            acc += s * h / 3.0;
            q[static_cast<std::size_t>(seg + 1)] = acc;
        }
        const double total = q[16];
        for (auto& v : q) {
            v = 0.5 * v / total;  // A normalizes the area of g to 1/2
        }
        return q;
    }();
    return table;
}

soqpsk_modulator::soqpsk_modulator(double initial_phase_rad) noexcept : phase0_(initial_phase_rad) {}

void soqpsk_modulator::modulate(std::span<const std::uint8_t> bits, std::vector<cf64>& out)
{
    const auto& q = tg_phase_pulse_half_bits();
    out.reserve(out.size() + 2 * bits.size());
    for (const std::uint8_t bit : bits) {
        const int b = bit ? 1 : 0;
        // alpha_k = (-1)^(k+1) (2 b_{k-1} - 1)(b_k - b_{k-2})
        const int sign = (k_ % 2 == 0) ? -1 : 1;
        const int alpha = sign * (2 * b1_ - 1) * (b - b2_);
        alpha_[k_ % 9] = alpha;

        // Bits j <= k - 8 have completed pulses (q = 1/2 each, i.e. alpha * pi/2).
        if (k_ >= 8) {
            full_quarter_turns_ = ((full_quarter_turns_ + alpha_[(k_ - 8) % 9]) % 4 + 4) % 4;
        }
        // Sample at t = k - 4 + half/2 (half = 0, 1): partial pulses of bits j in
        // [k - 7, k] with tau = t - j in (-4, 4).
        for (int half = 0; half < 2; ++half) {
            double partial = 0.0;
            for (int d = 0; d <= 7; ++d) {  // j = k - d
                if (static_cast<std::uint64_t>(d) > k_) {
                    break;
                }
                // tau = (k - 4 + half/2) - (k - d) = d - 4 + half/2 -> index 2*tau + 8
                const int idx = 2 * d - 8 + half + 8;
                partial += alpha_[(k_ - static_cast<std::uint64_t>(d)) % 9] * q[static_cast<std::size_t>(idx)];
            }
            const double phi = phase0_ + pi / 2.0 * full_quarter_turns_ + pi * partial;
            out.emplace_back(std::cos(phi), std::sin(phi));
        }
        b2_ = b1_;
        b1_ = static_cast<std::uint8_t>(b);
        ++k_;
    }
}

std::vector<cf64> modulate_bits(std::span<const std::uint8_t> bits, double initial_phase_rad)
{
    soqpsk_modulator mod(initial_phase_rad);
    std::vector<cf64> out;
    mod.modulate(bits, out);
    return out;
}

const std::vector<cf64>& soqpsk_autocorrelation()
{
    static const std::vector<cf64> r = [] {
        std::mt19937_64 rng(0x72785f61636621ull);
        std::vector<std::uint8_t> bits(1 << 17);
        for (auto& b : bits) b = static_cast<std::uint8_t>(rng() & 1);
        const auto x = modulate_bits(bits);
        std::vector<cf64> acc(64, 0.0);
        const std::size_t n = x.size() - 64;
        for (std::size_t i = 64; i < n; ++i) {
            for (std::size_t k = 0; k < 64; ++k) acc[k] += x[i + k] * std::conj(x[i]);
        }
        for (auto& v : acc) v /= static_cast<double>(n - 64);
        return acc;
    }();
    return r;
}

cf64 soqpsk_autocorrelation_at(int k)
{
    const auto& rx = soqpsk_autocorrelation();
    const auto ak = static_cast<std::size_t>(std::abs(k));
    if (ak >= rx.size()) return 0.0;
    return k >= 0 ? rx[ak] : std::conj(rx[ak]);
}

double received_power(const cf64* h, std::size_t n)
{
    // sum_a sum_b Re(h_a conj(h_b) r(b - a)), with r(-k) = conj(r(k)): the diagonal once plus
    // twice the upper triangle. Written out in real arithmetic: std::complex multiplication
    // goes through the C99 Annex G inf/nan path (__muldc3), which made this the hot spot of
    // filling 3104 packet records.
    const auto& rx = soqpsk_autocorrelation();
    const std::size_t kmax = rx.size() - 1;
    double p = 0.0;
    for (std::size_t a = 0; a < n; ++a) {
        p += (h[a].real() * h[a].real() + h[a].imag() * h[a].imag()) * rx[0].real();
        for (std::size_t b = a + 1; b < n && b - a <= kmax; ++b) {
            // h_a conj(h_b)
            const double ur = h[a].real() * h[b].real() + h[a].imag() * h[b].imag();
            const double ui = h[a].imag() * h[b].real() - h[a].real() * h[b].imag();
            const cf64 r = rx[b - a];
            p += 2.0 * (ur * r.real() - ui * r.imag());
        }
    }
    return p;
}

}  // namespace paq::dsp
