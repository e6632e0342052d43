#include "dsp/trellis.hpp"

#include "dsp/trellis_math.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <numbers>

namespace paq::dsp {

using trellis::half_span;
using trellis::memory;
using trellis::states;
using trellis::taps;

namespace {

constexpr long n_bits = static_cast<long>(waveform::packet_bits);
constexpr long n_known = static_cast<long>(waveform::known_bits);
constexpr long n_symbols = n_bits / 2;  // per axis
constexpr double inf = std::numeric_limits<double>::infinity();

/// Axis p's component of sample m (real for the even bits, imaginary for the odd).
double component(const cf64& z, int p) noexcept { return p == 0 ? z.real() : z.imag(); }

/// Fits axis p's pulse by least squares: component(r[m]) = sum over the axis's bits k of
/// a_k f_{m - 2k}, over every sample whose bits are all inside the packet.
trellis_axis_model fit_axis(const std::vector<cf64>& r, const std::int8_t* a, int p) noexcept
{
    trellis_axis_model model;
    double g[taps * taps] = {};
    double rhs[taps] = {};
    const long m_end = 2 * n_bits;
    for (long m = 0; m < m_end; ++m) {
        double reg[taps] = {};
        bool inside = true;
        for (int t = 0; t < taps; ++t) {
            const long md = m - (t - half_span);  // 2k
            if (md % 2 != 0) continue;
            const long k = md / 2;
            if (((k % 2) + 2) % 2 != p) continue;  // k may be negative
            if (k < 0 || k >= n_bits) {
                inside = false;
                break;
            }
            reg[t] = a[k];
        }
        if (!inside) continue;
        const double y = component(r[static_cast<std::size_t>(m)], p);
        for (int t = 0; t < taps; ++t) {
            if (reg[t] == 0.0) continue;
            rhs[t] += reg[t] * y;
            for (int u = 0; u < taps; ++u) g[t * taps + u] += reg[t] * reg[u];
        }
    }
    // Taps whose offset never meets a bit of this axis stay zero: give them a unit diagonal.
    for (int t = 0; t < taps; ++t) {
        if (g[t * taps + t] == 0.0) g[t * taps + t] = 1.0;
    }
    if (!trellis_math::solve_spd(g, rhs, taps)) return model;
    std::copy(rhs, rhs + taps, model.taps);
    // Residual variance per sample.
    double se = 0.0;
    long count = 0;
    for (long m = 2 * half_span; m + 2 * half_span < m_end; ++m) {
        double pred = 0.0;
        for (int t = 0; t < taps; ++t) {
            const long md = m - (t - half_span);
            if (md % 2 != 0) continue;
            const long k = md / 2;
            if (k % 2 != p) continue;
            pred += a[k] * model.taps[t];
        }
        const double e = component(r[static_cast<std::size_t>(m)], p) - pred;
        se += e * e;
        ++count;
    }
    model.sigma2 = count > 0 ? se / static_cast<double>(count) : 0.0;
    return model;
}

/// Max-log BCJR over axis p: LLRs of its data bits into llr (by packet bit), known bits fixed.
void detect_axis(const std::vector<cf64>& r, const trellis_axis_model& model, const std::int8_t* known_and_sxs, int p,
                 std::vector<double>& alpha, std::vector<double>& beta, std::vector<double>& branch, std::vector<float>& llr) noexcept
{
    // Symbols 0 .. memory - 1 are known bits: the start state. The trellis then runs over
    // symbols memory .. n_symbols - 1 and `tail` more, whose bits lie past the packet (free:
    // the samples at the packet's end still see them).
    constexpr long tail = (half_span + 3) / 4;
    constexpr long steps = n_symbols + tail;
    // Metric in units of log-likelihood: squared distance / (2 sigma2), halved because the
    // low-passed noise (bandwidth 0.5 of the sample rate, trellis::lowpass_stop) has about one
    // independent value per two samples; counting every sample as independent made the LLRs
    // overconfident (BEP estimate 0.28x the measured BER on AWGN 9.5 dB; halved: 0.60-0.70x).
    const double scale = model.sigma2 > 0.0 ? 0.5 / (2.0 * model.sigma2) : 0.0;
    auto forced = [&](long i) -> int {  // -1 free, else the known bit (0 / 1)
        const long k = 2 * i + p;
        if (k < n_known) return known_and_sxs[k] > 0 ? 1 : 0;
        return -1;
    };
    int start = 0;
    for (long i = 0; i < memory; ++i) start |= (known_and_sxs[2 * i + p] > 0 ? 1 : 0) << (memory - 1 - i);
    // alpha[i][s]: the least metric of a path into state s after symbol i (bit 0 of s: symbol i).
    alpha.assign(static_cast<std::size_t>((steps + 1) * states), inf);
    auto A = [&](long i, int s) -> double& { return alpha[static_cast<std::size_t>(i * states + s)]; };
    // Branch metrics, once per symbol and sequence (the backward pass reads them again).
    constexpr int seqs = 2 * states;
    branch.resize(static_cast<std::size_t>(steps * seqs));
    auto BM = [&](long i, int seq) -> double& { return branch[static_cast<std::size_t>(i * seqs + seq)]; };
    // Ungerboeck's form (dsp/trellis_math.hpp): per step the matched filter's outputs, per
    // sequence the prediction's energy (the same at every step inside the packet).
    double interior[seqs];
    for (int seq = 0; seq < seqs; ++seq) interior[seq] = trellis_math::pattern_energy(memory, p, seq, model.taps);
    const auto c = [&](long m) { return component(r[static_cast<std::size_t>(m)], p); };
    for (long i = memory; i < steps; ++i) {
        double cc = 0.0, z[memory + 1];
        trellis_math::step_terms(c, i, p, model.taps, cc, z);
        for (int seq = 0; seq < seqs; ++seq) {
            const double pattern = i < n_symbols ? interior[seq] : trellis_math::pattern_energy(i, p, seq, model.taps);
            BM(i, seq) = scale * trellis_math::branch_metric(cc, z, pattern, seq);
        }
    }
    A(memory - 1, start) = 0.0;
    for (long i = memory; i < steps; ++i) {
        const int f = forced(i);
        for (int s = 0; s < states; ++s) {
            const double am = A(i - 1, s);
            if (am == inf) continue;
            for (int b = 0; b < 2; ++b) {
                if (f >= 0 && b != f) continue;
                const int seq = (s << 1) | b;
                const int ns = seq & (states - 1);
                const double m = am + BM(i, seq);
                if (m < A(i, ns)) A(i, ns) = m;
            }
        }
    }
    // Backward: beta over the states after symbol i, one symbol at a time; the LLR of symbol i
    // from alpha(i - 1) + branch + beta(i).
    beta.assign(2 * states, 0.0);
    double* b_next = beta.data();           // after symbol i
    double* b_cur = beta.data() + states;   // after symbol i - 1
    for (long i = steps - 1; i >= memory; --i) {
        const int f = forced(i);
        double best[2] = {inf, inf};
        std::fill(b_cur, b_cur + states, inf);
        for (int s = 0; s < states; ++s) {
            for (int b = 0; b < 2; ++b) {
                if (f >= 0 && b != f) continue;
                const int seq = (s << 1) | b;
                const int ns = seq & (states - 1);
                const double bm = BM(i, seq);
                const double through = bm + b_next[ns];
                if (through < b_cur[s]) b_cur[s] = through;
                const double am = A(i - 1, s);
                if (am != inf) best[b] = std::min(best[b], am + through);
            }
        }
        const long k = 2 * i + p;
        if (k < n_bits) {
            // LLR = log P(+1) / P(-1) ~ (metric of the best -1 path) - (metric of the best +1 path).
            const double l = best[0] - best[1];
            llr[static_cast<std::size_t>(k)] = static_cast<float>(std::isfinite(l) ? l : (best[1] < best[0] ? 1e30 : -1e30));
        }
        std::swap(b_next, b_cur);
    }
    for (long i = 0; i < memory; ++i) {
        const long k = 2 * i + p;
        llr[static_cast<std::size_t>(k)] = known_and_sxs[k] > 0 ? 1e30f : -1e30f;
    }
}

}  // namespace

double trellis::lowpass_gain(double f) noexcept
{
    f = std::abs(f);
    if (f <= lowpass_pass) return 1.0;
    if (f >= lowpass_stop) return 0.0;
    return 0.5 * (1.0 + std::cos(std::numbers::pi * (f - lowpass_pass) / (lowpass_stop - lowpass_pass)));
}

trellis_scratch::trellis_scratch() : r(2 * waveform::packet_bits), llr(waveform::packet_bits) {}

path_stats detect_packet_trellis(const cf64* x, const sxs_trace& trace, unsigned known_errors, std::uint8_t* bits_out,
                                 trellis_scratch& sc, trellis_axis_model* models_out) noexcept
{
    // The packet derotated by the PLL's phase at each bit (both samples of bit k by theta_k).
    for (long m = 0; m < 2 * n_bits; ++m) {
        sc.r[static_cast<std::size_t>(m)] = x[m] * std::polar(1.0, -trace.theta[static_cast<std::size_t>(m / 2)]);
    }
    // The signal's phase against the PLL's reference (the detection filter the PLL sees may turn
    // the signal by a constant): the known bits' correlation at their instants.
    {
        cf64 c = 0.0;
        for (long k = 0; k < n_bits; ++k) {
            const cf64 b = k % 2 == 0 ? cf64(trace.bits[static_cast<std::size_t>(k)], 0.0) : cf64(0.0, trace.bits[static_cast<std::size_t>(k)]);
            c += sc.r[static_cast<std::size_t>(2 * k)] * std::conj(b);
        }
        const cf64 rot = std::abs(c) > 0.0 ? std::conj(c) / std::abs(c) : cf64(1.0, 0.0);
        for (auto& z : sc.r) z *= rot;
    }
    std::memset(bits_out, 0, waveform::data_bits / 8);
    double bep = 0.0;
    for (int p = 0; p < 2; ++p) {
        const trellis_axis_model model = fit_axis(sc.r, trace.bits.data(), p);
        if (models_out) models_out[p] = model;
        if (!(model.sigma2 > 0.0) || !(model.taps[half_span] > 0.0)) {
            // No usable model (a degenerate packet): this axis keeps the symbol-by-symbol bits.
            for (long k = p; k < n_bits; k += 2) sc.llr[static_cast<std::size_t>(k)] = trace.bits[static_cast<std::size_t>(k)] > 0 ? 1.0f : -1.0f;
            continue;
        }
        detect_axis(sc.r, model, trace.bits.data(), p, sc.alpha, sc.beta, sc.branch, sc.llr);
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
