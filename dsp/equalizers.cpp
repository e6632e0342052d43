#include "dsp/equalizers.hpp"

#include "dsp/linalg.hpp"
#include "dsp/soqpsk.hpp"
#include "dsp/waveform.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <stdexcept>

namespace paq::dsp {

using namespace chain;

std::array<cf64, L_ch> channel_autocorrelation(const std::array<cf64, L_ch>& h) noexcept
{
    std::array<cf64, L_ch> r{};
    for (int k = 0; k < L_ch; ++k) {
        cf64 s = 0.0;
        for (int n = k; n < L_ch; ++n) s += h[static_cast<std::size_t>(n)] * std::conj(h[static_cast<std::size_t>(n - k)]);
        r[static_cast<std::size_t>(k)] = s;
    }
    return r;
}

solve_result solve_toeplitz_taps(std::span<const cf64> r, double diag_load, eq_taps& c, std::vector<cf64>& work)
{
    constexpr std::size_t n = L_eq;
    const std::size_t band = r.size() - 1;
    work.assign(n * n, 0.0);
    auto fill = [&](double load) {
        for (std::size_t i = 0; i < n; ++i) {
            const std::size_t j0 = i > band ? i - band : 0;
            for (std::size_t j = j0; j <= i; ++j) work[i * n + j] = r[i - j];  // R[i][j] = r(i-j)
            work[i * n + i] += load;
        }
    };
    solve_result res;
    fill(diag_load);
    auto st = cholesky_banded(work, n, band);
    if (!st.ok) {
        // Numerically singular (e.g. a channel estimate of zeros): load the diagonal by a
        // tiny fraction of r(0) and flag it.
        res.regularized = true;
        fill(diag_load + std::max(r[0].real(), 1e-30) * 1e-10);
        st = cholesky_banded(work, n, band);
    }
    if (st.ok) {
        cholesky_solve_banded(work, n, band, c);
    } else {
        c.fill(0.0);
    }
    return res;
}

solve_result solve_equalizer(const std::array<cf64, L_ch>& h, const std::array<cf64, L_ch>& rh, double diag_load,
                             eq_taps& c, std::vector<cf64>& work)
{
    // h_n0(l) = conj(h(-l)), l = -L1 .. L2; h(m) exists for m = -N1 .. N2.
    for (int l = -L1; l <= L2; ++l) {
        const int m = -l;
        c[static_cast<std::size_t>(l + L1)] = (m >= -N1 && m <= N2) ? std::conj(h[static_cast<std::size_t>(m + N1)]) : cf64(0.0);
    }
    return solve_toeplitz_taps(rh, diag_load, c, work);
}

void taps_to_spectrum(const cf64* taps, int first_index, int count, const fft_plan& fwd, fft_buffer& out)
{
    const std::size_t n = out.size();
    std::fill(out.data(), out.data() + n, cf64(0.0));
    for (int i = 0; i < count; ++i) {
        const long long idx = first_index + i;
        out[static_cast<std::size_t>((idx % static_cast<long long>(n) + static_cast<long long>(n)) % static_cast<long long>(n))] += taps[i];
    }
    fwd.execute(out.data(), out.data());
}

double segment_mean_power(const fft_buffer& r_spec, std::size_t pre) noexcept
{
    double sum = 0.0;
    for (std::size_t k = 0; k < r_spec.size(); ++k) sum += std::norm(r_spec[k]);
    const double seg_len = static_cast<double>(waveform::L_pkt + 2 * pre);
    return sum / (static_cast<double>(r_spec.size()) * seg_len);
}

void cma_refine(std::span<eq_taps> c, std::span<const fft_buffer* const> r_spec, std::size_t pre, double mu, int iterations,
                const fft_plan& fwd, const fft_plan& inv, fft_buffer& t1, fft_buffer& t2, fft_buffer* t3)
{
    const std::size_t channels = c.size();
    if (channels == 0 || channels > static_cast<std::size_t>(max_receive_channels) || r_spec.size() != channels ||
        (channels > 1 && t3 == nullptr)) {
        throw std::invalid_argument("cma_refine: one set of taps and one spectrum per channel (and a third buffer for several)");
    }
    const std::size_t n = r_spec[0]->size();
    const double inv_n = 1.0 / static_cast<double>(n);
    constexpr std::size_t lpkt = waveform::L_pkt;
    // Level invariance: the step is mu over the segment's mean power (summed over the
    // channels). With the input scaled by g the MMSE start scales by 1/g, the gradient by g,
    // so a fixed step would act g^2 times as strongly (off at -20 dB, unstable at +17 dB).
    // Parseval: sum |R|^2 = n sum |r|^2.
    double power = 0.0;
    for (const fft_buffer* r : r_spec) power += segment_mean_power(*r, pre);
    if (!(power > 0.0) || !std::isfinite(power)) return;  // an empty segment: the MMSE taps stand
    const double step = mu / power;
    // A step is kept only if the next one finds the CMA cost sum (|y|^2 - 1)^2 no higher than
    // before it; otherwise the taps before it stand and the refinement stops. What this guards:
    // a packet whose level changes inside it (an AGC step): the MMSE start, scaled for the
    // level at the preamble, makes |y| ten times too large after a +20 dB step and the first
    // step throws the taps far away (measured: a whole packet lost). The last step is not
    // checked (that would cost one more filtering per packet); a blow-up starts at the first.
    std::array<eq_taps, max_receive_channels> previous{};
    std::copy(c.begin(), c.end(), previous.begin());
    double previous_cost = INFINITY;
    for (int it = 0; it < iterations; ++it) {
        // y = sum over the channels of r * c, over the segment
        taps_to_spectrum(c[0].data(), -L1, L_eq, fwd, t1);
        for (std::size_t k = 0; k < n; ++k) t1[k] *= (*r_spec[0])[k];
        for (std::size_t ch = 1; ch < channels; ++ch) {
            taps_to_spectrum(c[ch].data(), -L1, L_eq, fwd, *t3);
            for (std::size_t k = 0; k < n; ++k) t1[k] += (*t3)[k] * (*r_spec[ch])[k];
        }
        inv.execute(t1.data(), t1.data());
        // z(n) = 2 (|y|^2 - 1) y on the packet, 0 elsewhere
        std::fill(t2.data(), t2.data() + n, cf64(0.0));
        double cost = 0.0;
        for (std::size_t i = pre; i < pre + lpkt; ++i) {
            const cf64 y = t1[i] * inv_n;
            const double e = std::norm(y) - 1.0;
            cost += e * e;
            t2[i] = 2.0 * e * y;
        }
        if (!(cost <= previous_cost)) {
            std::copy(previous.begin(), previous.begin() + static_cast<std::ptrdiff_t>(channels), c.begin());
            return;
        }
        previous_cost = cost;
        std::copy(c.begin(), c.end(), previous.begin());
        // b_c(k) = sum_m z(m) r_c*(m - k) = IFFT(Z conj(R_c))(k), per channel
        fwd.execute(t2.data(), t2.data());
        const double scale = step * inv_n / static_cast<double>(lpkt);
        for (std::size_t ch = channels; ch-- > 0;) {
            fft_buffer& b = ch == 0 ? t2 : *t3;  // the last channel's from Z in t2 itself
            if (ch != 0) {
                for (std::size_t k = 0; k < n; ++k) b[k] = t2[k] * std::conj((*r_spec[ch])[k]);
            } else {
                for (std::size_t k = 0; k < n; ++k) b[k] *= std::conj((*r_spec[0])[k]);
            }
            inv.execute(b.data(), b.data());
            for (int l = -L1; l <= L2; ++l) {
                const std::size_t idx = static_cast<std::size_t>((l + static_cast<long long>(n)) % static_cast<long long>(n));
                c[ch][static_cast<std::size_t>(l + L1)] -= scale * b[idx];
            }
        }
    }
}

void cma_refine(eq_taps& c, const fft_buffer& r_spec, std::size_t pre, double mu, int iterations,
                const fft_plan& fwd, const fft_plan& inv, fft_buffer& t1, fft_buffer& t2)
{
    const fft_buffer* r = &r_spec;
    cma_refine(std::span<eq_taps>(&c, 1), std::span<const fft_buffer* const>(&r, 1), pre, mu, iterations, fwd, inv, t1, t2, nullptr);
}

void fde_response(const fft_buffer& h_spec, double sigma2, const double* psi, fft_buffer& out) noexcept
{
    const std::size_t n = h_spec.size();
    const double noise = 2.0 * sigma2;
    for (std::size_t k = 0; k < n; ++k) {
        const cf64 hk = h_spec[k];
        const double den = std::norm(hk) + (psi ? noise / psi[k] : noise);
        out[k] = den > 0.0 ? std::conj(hk) / den : cf64(0.0);
    }
}

namespace {

/// fit_single_path's candidates, made once: each one's sinc(m - tau) over the taps
/// (tau = c / single_path_steps - N1, m = -N1 .. N2) and its power <s, s>_R.
struct single_path_table {
    std::vector<std::array<double, L_ch>> sinc;
    std::vector<double> power;
};

const single_path_table& single_path_candidates_table()
{
    static const single_path_table table = [] {
        single_path_table t;
        t.sinc.resize(static_cast<std::size_t>(single_path_candidates));
        t.power.resize(static_cast<std::size_t>(single_path_candidates));
        for (int c = 0; c < single_path_candidates; ++c) {
            auto& s = t.sinc[static_cast<std::size_t>(c)];
            for (int m = -N1; m <= N2; ++m) {
                const double x = std::numbers::pi * (m - (static_cast<double>(c) / single_path_steps - N1));
                s[static_cast<std::size_t>(m + N1)] = std::abs(x) < 1e-12 ? 1.0 : std::sin(x) / x;
            }
            // The form is real for a real s: sum_ab s_a s_b Re R_x(a - b).
            double p = 0.0;
            for (int a = 0; a < L_ch; ++a) {
                for (int b = 0; b < L_ch; ++b) {
                    p += s[static_cast<std::size_t>(a)] * s[static_cast<std::size_t>(b)] * soqpsk_autocorrelation_at(a - b).real();
                }
            }
            t.power[static_cast<std::size_t>(c)] = p;
        }
        return t;
    }();
    return table;
}

}  // namespace

const std::vector<double>& single_path_powers() { return single_path_candidates_table().power; }

single_path fit_single_path(const std::array<cf64, L_ch>& h) noexcept
{
    // u = R h (u_a = sum_b R_x(a - b) h_b), so that <s, h>_R = sum_a s_a u_a for a real s;
    // written out in real arithmetic (std::complex products go through the Annex G path).
    const auto& table = single_path_candidates_table();
    std::array<cf64, L_ch> u{};
    for (int a = 0; a < L_ch; ++a) {
        double re = 0.0, im = 0.0;
        for (int b = 0; b < L_ch; ++b) {
            const cf64 r = soqpsk_autocorrelation_at(a - b);
            const cf64 v = h[static_cast<std::size_t>(b)];
            re += r.real() * v.real() - r.imag() * v.imag();
            im += r.real() * v.imag() + r.imag() * v.real();
        }
        u[static_cast<std::size_t>(a)] = cf64(re, im);
    }
    std::size_t best = 0;
    double best_score = -1.0;
    for (std::size_t c = 0; c < table.sinc.size(); ++c) {
        const auto& s = table.sinc[c];
        double dr = 0.0, di = 0.0;
        for (std::size_t m = 0; m < s.size(); ++m) {
            dr += s[m] * u[m].real();
            di += s[m] * u[m].imag();
        }
        const double score = (dr * dr + di * di) / table.power[c];
        if (score > best_score) {  // strictly greater: the first maximum wins
            best_score = score;
            best = c;
        }
    }
    // The gain: h's own projection on the chosen delay's single path, <s, h> / <s, s>.
    const auto& s = table.sinc[best];
    double dr = 0.0, di = 0.0, ss = 0.0;
    for (std::size_t m = 0; m < s.size(); ++m) {
        dr += s[m] * h[m].real();
        di += s[m] * h[m].imag();
        ss += s[m] * s[m];
    }
    return {static_cast<double>(best) / single_path_steps - N1, cf64(dr / ss, di / ss)};
}

void single_path_response(const single_path& p, fft_buffer& out) noexcept
{
    const std::size_t n = out.size();
    const cf64 inv_g = std::norm(p.gain) > 0.0 ? 1.0 / p.gain : cf64(0.0);
    for (std::size_t k = 0; k < n; ++k) {
        const double f = (k < n / 2 ? static_cast<double>(k) : static_cast<double>(k) - static_cast<double>(n)) / static_cast<double>(n);
        out[k] = inv_g * std::polar(1.0, 2.0 * std::numbers::pi * f * p.delay_samples);
    }
}

double spectral_condition(const std::array<cf64, L_ch>& h, double load, int grid) noexcept
{
    double lo = INFINITY, hi = 0.0;
    for (int k = 0; k < grid; ++k) {
        cf64 s = 0.0;
        for (int m = 0; m < L_ch; ++m) {
            s += h[static_cast<std::size_t>(m)] * std::polar(1.0, -2.0 * std::numbers::pi * k * m / static_cast<double>(grid));
        }
        lo = std::min(lo, std::norm(s));
        hi = std::max(hi, std::norm(s));
    }
    return (hi + load) / (lo + load);
}

}  // namespace paq::dsp
