#include "dsp/trellis.hpp"

#include "dsp/trellis_math.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numbers>

namespace paq::dsp {

using trellis::after;
using trellis::before;
using trellis::memory;
using trellis::patterns;
using trellis::states;

namespace {

constexpr long n_bits = static_cast<long>(waveform::packet_bits);
constexpr long n_known = static_cast<long>(waveform::known_bits);
constexpr double inf = std::numeric_limits<double>::infinity();
constexpr int seqs = 2 * states;
/// Steps j = memory .. steps - 1 add bit j and explain the sample of bit j - after; the last
/// `after` bits lie past the packet (free: the packet's last samples still see them).
constexpr long steps = n_bits + after;

/// Fits the table: every entry the mean of its pattern's samples (sign-corrected) over the
/// bits whose window lies inside the packet; then the residual variance.
trellis_model fit(const std::vector<cf64>& r, const std::int8_t* a) noexcept
{
    trellis_model model;
    long count[2][patterns] = {};
    for (long k = before; k + after < n_bits; ++k) {
        const int seq = trellis_math::window_of(a, k);
        const int par = static_cast<int>(k % 2), idx = trellis_math::pattern_index(seq);
        const double sg = trellis_math::pattern_sign(seq);
        model.table[par][idx] += sg * r[static_cast<std::size_t>(k)];
        ++count[par][idx];
    }
    model.complete = true;
    for (int par = 0; par < 2; ++par) {
        for (int idx = 0; idx < patterns; ++idx) {
            if (count[par][idx] == 0) {
                model.complete = false;
                continue;
            }
            model.table[par][idx] /= static_cast<double>(count[par][idx]);
        }
    }
    double se = 0.0, s1 = 0.0;
    long n = 0;
    cf64 last{};  // the residual of bit k - 1
    for (long k = before; k + after < n_bits; ++k) {
        const int seq = trellis_math::window_of(a, k);
        const int par = static_cast<int>(k % 2), idx = trellis_math::pattern_index(seq);
        const double sg = trellis_math::pattern_sign(seq);
        const cf64 e = r[static_cast<std::size_t>(k)] - sg * model.table[par][idx];
        se += std::norm(e);
        if (k > before) s1 += (last * std::conj(e)).real();
        last = e;
        ++n;
    }
    model.sigma2 = n > 0 ? se / (2.0 * static_cast<double>(n)) : 0.0;
    model.rho1 = se > 0.0 ? s1 / se : 0.0;
    return model;
}

/// Max-log BCJR over the packet's bits: the LLR of every bit into llr, the known bits fixed.
void detect(const std::vector<cf64>& r, const trellis_model& model, double calibration, const std::int8_t* labels,
            std::vector<double>& alpha, std::vector<double>& beta, std::vector<double>& branch, std::vector<float>& llr) noexcept
{
    // Metric in units of log-likelihood: squared distance / (2 sigma2), each sample counted as
    // independent; times the calibration (trellis_math::llr_law's factor). At one sample a bit
    // the low-passed noise (zero from trellis::lowpass_stop) correlates 0.29 a bit apart and
    // -0.17 two bits apart, and max-log keeps only the best path of each sign, so the metrics'
    // LLRs alone are overconfident (their BEP estimate 0.58-0.66x the measured BER on AWGN; the
    // pair of samples a bit, correlated 0.78 and counted half, gave 0.5-0.6x).
    const double scale = calibration / (2.0 * model.sigma2);
    auto forced = [&](long j) -> int {  // -1 free, else the known bit (0 / 1)
        if (j < n_known) return labels[j] > 0 ? 1 : 0;
        return -1;
    };
    int start = 0;
    for (long j = 0; j < memory; ++j) start = (start << 1) | (labels[j] > 0 ? 1 : 0);
    // alpha[j][s]: the least metric of a path into state s after bit j (bit 0 of s: bit j).
    alpha.assign(static_cast<std::size_t>(steps * states), inf);
    auto A = [&](long j, int s) -> double& { return alpha[static_cast<std::size_t>(j * states + s)]; };
    // Branch metrics, once per step and sequence (the backward pass reads them again): per
    // table entry its correlation with the step's samples, then per sequence.
    branch.resize(static_cast<std::size_t>(steps * seqs));
    auto BM = [&](long j, int seq) -> double& { return branch[static_cast<std::size_t>(j * seqs + seq)]; };
    double energy[2][patterns];
    for (int par = 0; par < 2; ++par) {
        for (int idx = 0; idx < patterns; ++idx) energy[par][idx] = std::norm(model.table[par][idx]);
    }
    for (long j = memory; j < steps; ++j) {
        const long k = j - after;
        const int par = static_cast<int>(k % 2);
        const cf64 x0 = r[static_cast<std::size_t>(k)];
        double corr[patterns];
        for (int idx = 0; idx < patterns; ++idx) corr[idx] = (x0 * std::conj(model.table[par][idx])).real();
        for (int seq = 0; seq < seqs; ++seq) {
            const int idx = trellis_math::pattern_index(seq);
            BM(j, seq) = scale * trellis_math::branch_metric(corr[idx], energy[par][idx], seq);
        }
    }
    A(memory - 1, start) = 0.0;
    for (long j = memory; j < steps; ++j) {
        const int f = forced(j);
        for (int s = 0; s < states; ++s) {
            const double am = A(j - 1, s);
            if (am == inf) continue;
            for (int b = 0; b < 2; ++b) {
                if (f >= 0 && b != f) continue;
                const int seq = (s << 1) | b;
                const int ns = seq & (states - 1);
                const double m = am + BM(j, seq);
                if (m < A(j, ns)) A(j, ns) = m;
            }
        }
    }
    // Backward: beta over the states after bit j, one step at a time; the LLR of bit j from
    // alpha(j - 1) + branch + beta(j).
    beta.assign(2 * states, 0.0);
    double* b_next = beta.data();           // after bit j
    double* b_cur = beta.data() + states;   // after bit j - 1
    for (long j = steps - 1; j >= memory; --j) {
        const int f = forced(j);
        double best[2] = {inf, inf};
        std::fill(b_cur, b_cur + states, inf);
        for (int s = 0; s < states; ++s) {
            for (int b = 0; b < 2; ++b) {
                if (f >= 0 && b != f) continue;
                const int seq = (s << 1) | b;
                const int ns = seq & (states - 1);
                const double through = BM(j, seq) + b_next[ns];
                if (through < b_cur[s]) b_cur[s] = through;
                const double am = A(j - 1, s);
                if (am != inf) best[b] = std::min(best[b], am + through);
            }
        }
        if (j < n_bits) {
            // LLR = log P(+1) / P(-1) ~ (metric of the best -1 path) - (metric of the best +1 path).
            const double l = best[0] - best[1];
            llr[static_cast<std::size_t>(j)] = static_cast<float>(std::isfinite(l) ? l : (best[1] < best[0] ? 1e30 : -1e30));
        }
        std::swap(b_next, b_cur);
    }
    for (long j = 0; j < memory; ++j) llr[static_cast<std::size_t>(j)] = labels[j] > 0 ? 1e30f : -1e30f;
}

}  // namespace

double trellis::lowpass_gain(double f) noexcept
{
    f = std::abs(f);
    if (f <= lowpass_pass) return 1.0;
    if (f >= lowpass_stop) return 0.0;
    return 0.5 * (1.0 + std::cos(std::numbers::pi * (f - lowpass_pass) / (lowpass_stop - lowpass_pass)));
}

trellis_scratch::trellis_scratch() : r(waveform::packet_bits), llr(waveform::packet_bits), labels(waveform::packet_bits) {}

void cancel_far_interference(std::vector<cf64>& r, const std::int8_t* a, const trellis_model& model) noexcept
{
    using trellis::far_terms;
    using trellis_math::far_offset;
    auto decision = [&](long j) { return j < 0 || j >= n_bits ? 0.0 : (a[j] > 0 ? 1.0 : -1.0); };
    for (long par = 0; par < 2; ++par) {
        // The normal equations over the bits the table is fitted on (a real system, the
        // residual's real and imaginary parts on the right), then their solution.
        double g[far_terms][far_terms + 2] = {};
        double w[far_terms][2];
        double f[far_terms];
        for (long k = before + ((before + par) & 1); k + after < n_bits; k += 2) {
            const int seq = trellis_math::window_of(a, k);
            const cf64 e = r[static_cast<std::size_t>(k)] -
                           static_cast<double>(trellis_math::pattern_sign(seq)) * model.table[par][trellis_math::pattern_index(seq)];
            for (int t = 0; t < far_terms; ++t) f[t] = decision(k + far_offset(t));
            for (int t = 0; t < far_terms; ++t) {
                g[t][far_terms] += f[t] * e.real();
                g[t][far_terms + 1] += f[t] * e.imag();
                for (int u = 0; u < far_terms; ++u) g[t][u] += f[t] * f[u];
            }
        }
        if (!trellis_math::solve_far_system(g, w)) continue;  // the parity is left as it is
        for (long k = par; k < n_bits; k += 2) {
            cf64 v{};
            for (int t = 0; t < far_terms; ++t) v += decision(k + far_offset(t)) * cf64{w[t][0], w[t][1]};
            r[static_cast<std::size_t>(k)] -= v;
        }
    }
}

path_stats detect_packet_trellis(const cf64* x, const sxs_trace& trace, unsigned known_errors, trellis_math::llr_law llr_law,
                                 bool cancel_far, std::uint8_t* bits_out, trellis_scratch& sc, trellis_model* model_out) noexcept
{
    // Bit k's sample, x[2k], derotated by the PLL's phase at bit k.
    for (long k = 0; k < n_bits; ++k) {
        sc.r[static_cast<std::size_t>(k)] = x[2 * k] * std::polar(1.0, -trace.theta[static_cast<std::size_t>(k)]);
    }
    // The table absorbs any constant phase and gain the signal has against the PLL's reference
    // (the detection filter the PLL sees turns the signal by a constant).
    std::memset(bits_out, 0, waveform::data_bits / 8);
    double bep = 0.0;
    // Pass 1 fits the table on the symbol-by-symbol bits, pass 2 again on pass 1's (each pass's
    // known bits are the known ones: their LLRs are +-1e30).
    const std::int8_t* labels = trace.bits.data();
    for (int pass = 0; pass < trellis::passes; ++pass) {
        if (pass > 0) {
            for (long k = 0; k < n_bits; ++k) sc.labels[static_cast<std::size_t>(k)] = sc.llr[static_cast<std::size_t>(k)] > 0.0f ? 1 : -1;
            labels = sc.labels.data();
        }
        if (cancel_far && pass > 0 && pass + 1 == trellis::passes) {
            const trellis_model before_far = fit(sc.r, labels);
            if (before_far.complete) cancel_far_interference(sc.r, labels, before_far);
        }
        const trellis_model model = fit(sc.r, labels);
        if (model_out) *model_out = model;
        if (model.complete && model.sigma2 > 0.0) {
            detect(sc.r, model, llr_law.factor(model.rho1), labels, sc.alpha, sc.beta, sc.branch, sc.llr);
        } else {
            // No usable model (a degenerate packet): the bits it was fitted on stand.
            for (long k = 0; k < n_bits; ++k) sc.llr[static_cast<std::size_t>(k)] = labels[k] > 0 ? 1.0f : -1.0f;
        }
    }
    for (long k = n_known; k < n_bits; ++k) {
        const float l = sc.llr[static_cast<std::size_t>(k)];
        const std::size_t i = static_cast<std::size_t>(k - n_known);
        if (l > 0.0f) bits_out[i / 8] = static_cast<std::uint8_t>(bits_out[i / 8] | (0x80u >> (i % 8)));
        bep += 1.0 / (1.0 + std::exp(std::min(std::abs(static_cast<double>(l)), 700.0)));
    }
    path_stats st;
    st.known_bit_errors = static_cast<std::uint16_t>(known_errors);
    st.bep_estimate = static_cast<float>(bep / static_cast<double>(waveform::data_bits));
    return st;
}

}  // namespace paq::dsp
