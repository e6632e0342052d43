// Test-side signal makers for the resampler and clock tests: a LONG band-limited interpolator
// (independent of dsp/resampler: Kaiser-windowed sinc, 2 x 64 taps, beta 12, cutoff at the
// 2-samples-per-bit Nyquist) that evaluates a 2-samples-per-bit signal at any positions.
#pragma once

#include "dsp/types.hpp"

#include <cmath>
#include <complex>
#include <numbers>
#include <random>
#include <vector>

namespace paq::test {

class long_interpolator {
public:
    static constexpr int half = 64;

    long_interpolator()
    {
        // Window on a fine grid over [0, 1] (linear interpolation: error < 1e-9).
        win_.resize(grid + 2);
        for (int i = 0; i <= grid + 1; ++i) {
            const double r = std::min(1.0, static_cast<double>(i) / grid);
            win_[static_cast<std::size_t>(i)] =
                std::cyl_bessel_i(0.0, beta * std::sqrt(1.0 - r * r)) / std::cyl_bessel_i(0.0, beta);
        }
    }

    /// y(n) = x_c(t0 + n dt), n = 0 .. count-1, x_c the band-limited signal through x (zero
    /// outside x).
    [[nodiscard]] std::vector<cf32> evaluate(const std::vector<cf32>& x, double t0, double dt, std::size_t count) const
    {
        std::vector<cf32> y(count);
        const auto len = static_cast<long long>(x.size());
#pragma omp parallel for schedule(static)
        for (std::size_t n = 0; n < count; ++n) {
            const double t = t0 + static_cast<double>(n) * dt;
            const double fl = std::floor(t);
            const double f = t - fl;
            const auto i = static_cast<long long>(fl);
            const double s = std::sin(std::numbers::pi * f);  // sin(pi (t - k)) = (-1)^(i-k) s
            std::complex<double> acc = 0.0;
            for (long long k = i - half + 1; k <= i + half; ++k) {
                if (k < 0 || k >= len) continue;
                const double u = t - static_cast<double>(k);
                double sinc;
                if (std::abs(u) < 1e-12) {
                    sinc = 1.0;
                } else {
                    sinc = (((i - k) & 1) ? -s : s) / (std::numbers::pi * u);
                }
                const double w = window(std::abs(u) / half);
                const auto& xv = x[static_cast<std::size_t>(k)];
                acc += sinc * w * std::complex<double>(xv.real(), xv.imag());
            }
            y[n] = cf32(static_cast<float>(acc.real()), static_cast<float>(acc.imag()));
        }
        return y;
    }

private:
    static constexpr int grid = 1 << 16;
    static constexpr double beta = 12.0;
    std::vector<double> win_;

    [[nodiscard]] double window(double r) const
    {
        if (r >= 1.0) return 0.0;
        const double g = r * grid;
        const auto i = static_cast<std::size_t>(g);
        const double a = g - static_cast<double>(i);
        return win_[i] + a * (win_[i + 1] - win_[i]);
    }
};

/// Adds complex white Gaussian noise of variance var (per complex sample).
inline void add_noise(std::vector<cf32>& x, double var, std::uint64_t seed)
{
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> nd(0.0, std::sqrt(var / 2.0));
    for (auto& v : x) v += cf32(static_cast<float>(nd(rng)), static_cast<float>(nd(rng)));
}

}  // namespace paq::test
