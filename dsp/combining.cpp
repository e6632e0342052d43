#include "dsp/combining.hpp"

#include "dsp/equalizers.hpp"
#include "dsp/linalg.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <stdexcept>
#include <string>

namespace paq::dsp {

using namespace chain;

solve_result solve_joint_equalizer(std::span<const channel_taps> h, std::span<const double> loads, std::span<eq_taps> c,
                                   std::vector<cf64>& work)
{
    const std::size_t channels = h.size();
    if (channels == 0 || channels > static_cast<std::size_t>(max_receive_channels) || loads.size() != channels ||
        c.size() != channels) {
        throw std::invalid_argument("solve_joint_equalizer: one channel estimate, load and set of taps per channel (1 or 2)");
    }
    const std::size_t taps = L_eq;
    const std::size_t n = channels * taps;
    // Unknown x = channels * a + c (tap a of channel c): entries of taps a and b are zero for
    // |a - b| > L_ch - 1, so the matrix has channels * (L_ch - 1) + channels - 1 sub-diagonals.
    const std::size_t band = channels * (L_ch - 1) + channels - 1;
    // r[c][d][k + L_ch - 1] = sum_n h_d(n) h_c*(n - k), k = -(L_ch - 1) .. L_ch - 1.
    constexpr int span = 2 * L_ch - 1;
    std::array<std::array<std::array<cf64, span>, max_receive_channels>, max_receive_channels> r{};
    for (std::size_t cc = 0; cc < channels; ++cc) {
        for (std::size_t d = 0; d < channels; ++d) {
            for (int k = -(L_ch - 1); k <= L_ch - 1; ++k) {
                cf64 s = 0.0;
                for (int m = std::max(0, k); m < std::min(L_ch, L_ch + k); ++m) {
                    s += h[d][static_cast<std::size_t>(m)] * std::conj(h[cc][static_cast<std::size_t>(m - k)]);
                }
                r[cc][d][static_cast<std::size_t>(k + L_ch - 1)] = s;
            }
        }
    }
    work.assign(n * n, 0.0);
    double max_diag = 0.0;
    auto fill = [&](double extra) {
        for (std::size_t x = 0; x < n; ++x) {
            const std::size_t a = x / channels, cc = x % channels;
            const std::size_t y0 = x > band ? x - band : 0;
            for (std::size_t y = y0; y <= x; ++y) {
                const std::size_t b = y / channels, d = y % channels;
                const long long k = static_cast<long long>(a) - static_cast<long long>(b);
                work[x * n + y] = k <= L_ch - 1 ? r[cc][d][static_cast<std::size_t>(k + L_ch - 1)] : cf64(0.0);
            }
            work[x * n + x] += loads[cc] + extra;
            max_diag = std::max(max_diag, work[x * n + x].real());
        }
    };
    solve_result res;
    fill(0.0);
    auto st = cholesky_banded(work, n, band);
    if (!st.ok) {
        res.regularized = true;
        fill(std::max(max_diag, 1e-30) * 1e-10);
        st = cholesky_banded(work, n, band);
    }
    // Right side: channel c's tap l is h_c*(-l), l = -L1 .. L2 (h_c(m) for m = -N1 .. N2).
    std::vector<cf64> rhs(n, 0.0);
    for (std::size_t cc = 0; cc < channels; ++cc) {
        for (int l = -L1; l <= L2; ++l) {
            const int m = -l;
            if (m >= -N1 && m <= N2) {
                rhs[static_cast<std::size_t>(l + L1) * channels + cc] = std::conj(h[cc][static_cast<std::size_t>(m + N1)]);
            }
        }
    }
    if (st.ok) {
        cholesky_solve_banded(work, n, band, rhs);
    } else {
        std::fill(rhs.begin(), rhs.end(), cf64(0.0));
    }
    for (std::size_t cc = 0; cc < channels; ++cc) {
        for (std::size_t a = 0; a < taps; ++a) c[cc][a] = rhs[a * channels + cc];
    }
    return res;
}

double joint_spectral_condition(std::span<const channel_taps> h, std::span<const double> loads, int grid)
{
    const std::size_t channels = h.size();
    if (channels == 0 || channels > static_cast<std::size_t>(max_receive_channels) || loads.size() != channels) {
        throw std::invalid_argument("joint_spectral_condition: one channel estimate and load per channel (1 or 2)");
    }
    double lo = INFINITY, hi = 0.0;
    for (int k = 0; k < grid; ++k) {
        std::array<cf64, max_receive_channels> v{};
        for (std::size_t c = 0; c < channels; ++c) {
            for (int m = 0; m < L_ch; ++m) {
                v[c] += h[c][static_cast<std::size_t>(m)] * std::polar(1.0, -2.0 * std::numbers::pi * k * m / static_cast<double>(grid));
            }
        }
        // The eigenvalues of [[a, b], [b*, d]], a = |v_0|^2 + l_0, d = |v_1|^2 + l_1, |b|^2 =
        // |v_0|^2 |v_1|^2: the greater (a + d) / 2 + sqrt(((a - d) / 2)^2 + |b|^2), the lesser
        // the determinant l_0 l_1 + l_0 |v_1|^2 + l_1 |v_0|^2 over it (no cancellation).
        const double n0 = std::norm(v[0]);
        if (channels == 1) {
            lo = std::min(lo, n0 + loads[0]);
            hi = std::max(hi, n0 + loads[0]);
            continue;
        }
        const double n1 = std::norm(v[1]);
        const double a = n0 + loads[0], d = n1 + loads[1];
        const double great = 0.5 * (a + d) + std::sqrt(0.25 * (a - d) * (a - d) + n0 * n1);
        const double det = loads[0] * loads[1] + loads[0] * n1 + loads[1] * n0;
        lo = std::min(lo, det / great);
        hi = std::max(hi, great);
    }
    return hi / lo;
}

solve_result solve_combined_zf(std::span<const channel_taps> h, std::span<const double> sigma2, eq_taps& c, std::vector<cf64>& work)
{
    if (h.empty() || h.size() > static_cast<std::size_t>(max_receive_channels) || sigma2.size() != h.size()) {
        throw std::invalid_argument("solve_combined_zf: one channel estimate and noise variance per channel (1 or 2)");
    }
    const auto w = combining_weights(sigma2);
    // g(k), k = -(L_ch - 1) .. L_ch - 1, at g[k + L_ch - 1]: sum_c w_c r_cc(k), r(-k) = r(k)*.
    constexpr int half = L_ch - 1;
    constexpr int len = 2 * half + 1;
    std::array<cf64, len> g{};
    for (std::size_t ch = 0; ch < h.size(); ++ch) {
        const auto r = channel_autocorrelation(h[ch]);
        for (int k = 0; k <= half; ++k) {
            g[static_cast<std::size_t>(half + k)] += w[ch] * r[static_cast<std::size_t>(k)];
            if (k > 0) g[static_cast<std::size_t>(half - k)] += w[ch] * std::conj(r[static_cast<std::size_t>(k)]);
        }
    }
    // r_g(k) = sum_n g(n) g*(n - k), k = 0 .. len - 1.
    std::array<cf64, len> rg{};
    for (int k = 0; k < len; ++k) {
        cf64 sum = 0.0;
        for (int n = k; n < len; ++n) sum += g[static_cast<std::size_t>(n)] * std::conj(g[static_cast<std::size_t>(n - k)]);
        rg[static_cast<std::size_t>(k)] = sum;
    }
    // Right side g*(-l) = g(l) (g is Hermitian), l = -L1 .. L2, g(l) for |l| <= half.
    for (int l = -L1; l <= L2; ++l) {
        c[static_cast<std::size_t>(l + L1)] = (l >= -half && l <= half) ? std::conj(g[static_cast<std::size_t>(half - l)]) : cf64(0.0);
    }
    return solve_toeplitz_taps(rg, 0.0, c, work);
}

namespace {

/// The quietest channel's noise variance (finite, >= 0); 0 when there is none.
double least_noise(std::span<const double> sigma2) noexcept
{
    double least = INFINITY;
    for (const double s : sigma2) {
        if (s >= 0.0 && std::isfinite(s)) least = std::min(least, s);
    }
    return std::isfinite(least) ? least : 0.0;
}

void check_counts(const char* what, std::size_t in, std::size_t sigma2, std::size_t out)
{
    if (in == 0 || in > static_cast<std::size_t>(max_receive_channels) || sigma2 != in || out != in) {
        throw std::invalid_argument(std::string(what) + ": one input, noise variance and output per channel (1 or 2), not " +
                                    std::to_string(in) + ", " + std::to_string(sigma2) + " and " + std::to_string(out));
    }
}

}  // namespace

std::array<double, max_receive_channels> combining_weights(std::span<const double> sigma2)
{
    if (sigma2.empty() || sigma2.size() > static_cast<std::size_t>(max_receive_channels)) {
        throw std::invalid_argument("combining_weights: 1 or 2 noise variances, not " + std::to_string(sigma2.size()));
    }
    const double least = least_noise(sigma2);
    std::array<double, max_receive_channels> w{};
    for (std::size_t c = 0; c < sigma2.size(); ++c) {
        const double s = sigma2[c];
        if (!(s >= 0.0) || !std::isfinite(s)) continue;  // a noise not known: no weight
        w[c] = s > 0.0 ? least / s : 1.0;                // least = 0: only noiseless channels weigh
    }
    return w;
}

void fde_combining_response(std::span<const fft_buffer* const> h_spec, std::span<const double> sigma2, const double* psi,
                            std::span<fft_buffer* const> out)
{
    check_counts("fde_combining_response", h_spec.size(), sigma2.size(), out.size());
    const auto w = combining_weights(sigma2);
    const double noise = 2.0 * least_noise(sigma2);
    const std::size_t n = h_spec[0]->size();
    for (std::size_t c = 0; c < h_spec.size(); ++c) {
        if (h_spec[c]->size() != n || out[c]->size() != n) throw std::invalid_argument("fde_combining_response: spectra of different lengths");
    }
    for (std::size_t k = 0; k < n; ++k) {
        double den = psi ? noise / psi[k] : noise;
        for (std::size_t c = 0; c < h_spec.size(); ++c) den += w[c] * std::norm((*h_spec[c])[k]);
        for (std::size_t c = 0; c < h_spec.size(); ++c) {
            (*out[c])[k] = den > 0.0 ? w[c] * std::conj((*h_spec[c])[k]) / den : cf64(0.0);
        }
    }
}

double mmse_error(const channel_taps& h, const eq_taps& c) noexcept
{
    // Tap l = -L1 .. L2 at c[l + L1]; h(m), m = -N1 .. N2, at h[m + N1].
    double q = 0.0;
    for (int l = -L1; l <= L2; ++l) {
        const int m = -l;
        if (m >= -N1 && m <= N2) q += (c[static_cast<std::size_t>(l + L1)] * h[static_cast<std::size_t>(m + N1)]).real();
    }
    const double e = 1.0 - q;
    return std::isfinite(e) ? std::clamp(e, 0.0, 1.0) : 1.0;
}

double signal_fraction(double received_power, double sigma2, double noise_gain) noexcept
{
    if (!(received_power > 0.0) || !std::isfinite(received_power)) return 0.0;
    const double f = 1.0 - 2.0 * sigma2 * noise_gain / received_power;
    return std::isfinite(f) ? std::clamp(f, 0.0, 1.0) : 0.0;
}

void mrc_single_path_response(std::span<const single_path> paths, std::span<const double> sigma2, std::span<const double> fraction,
                              std::span<fft_buffer* const> out)
{
    check_counts("mrc_single_path_response", paths.size(), sigma2.size(), out.size());
    if (fraction.size() != paths.size()) throw std::invalid_argument("mrc_single_path_response: one signal fraction per channel");
    const auto w = combining_weights(sigma2);
    std::array<double, max_receive_channels> f{};
    double total = 0.0;
    for (std::size_t c = 0; c < paths.size(); ++c) {
        f[c] = std::clamp(std::isfinite(fraction[c]) ? fraction[c] : 0.0, 0.0, 1.0);
        total += w[c] * f[c] * std::norm(paths[c].gain);
    }
    if (!(total > 0.0)) {
        // No channel's estimate shows signal above its noise: the plain combiner.
        total = 0.0;
        for (std::size_t c = 0; c < paths.size(); ++c) {
            f[c] = 1.0;
            total += w[c] * std::norm(paths[c].gain);
        }
    }
    const std::size_t n = out[0]->size();
    for (std::size_t c = 0; c < paths.size(); ++c) {
        if (out[c]->size() != n) throw std::invalid_argument("mrc_single_path_response: outputs of different lengths");
        const cf64 g = total > 0.0 ? w[c] * f[c] * std::conj(paths[c].gain) / total : cf64(0.0);
        for (std::size_t k = 0; k < n; ++k) {
            const double fr = (k < n / 2 ? static_cast<double>(k) : static_cast<double>(k) - static_cast<double>(n)) / static_cast<double>(n);
            (*out[c])[k] = g * std::polar(1.0, 2.0 * std::numbers::pi * fr * paths[c].delay_samples);
        }
    }
}

}  // namespace paq::dsp
