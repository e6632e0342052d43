// The symbol-by-symbol detector's soft decisions (receiver.fec's input from its streams): the LLR
// of each data bit from the statistic it was decided on, with the interference of its
// neighbours' decisions taken out.
//
// What an equalizer leaves of multipath, and the multipath itself on the unequalized path, is
// largely linear in the neighbouring bits: a packet's statistics regressed on the decisions
// explain it. The model, per packet and per parity of the bit (the I and Q rails see the channel
// differently):
//     x_i = g d_i + sum_k w_k d_(i+k) + s n_i,   k = -8 .. -1, 1 .. 8,
// d the decisions (sign x; a neighbour outside the data is 0), n_i standard normal. g and w are
// fitted by least squares over the packet's bits of that parity, s^2 is the residuals' mean
// square (then both made good for the decisions' errors: fold_errors), and bit i's LLR is that
// of x_i between N(+g + c_i, s^2) and N(-g + c_i, s^2),
// c_i = sum_k w_k d_(i+k) the interference its neighbours' decisions predict:
//     LLR_i = 2 g (x_i - c_i) / s^2.
// Its sign can differ from the bit's decision (the interference moved the statistic across
// zero): the decoder starts from fewer errors (ar4ja-4096-2/3 over edwards3 at 7 dB per
// information bit: the MMSE stream's decoder input errs 4.4e-2 where the statistic alone erred
// 6.7e-2, and 20 codewords of 4882 fail where 348 did). docs/SIGNAL-CHAIN.md ("Soft decisions
// for the decoder") gives the figures and their commands.
// Header-only and usable in device code, so both backends run the same arithmetic: the CPU
// (dsp::sxs_llrs) serially, the GPU (gpu/cuda_backend.cu) with a thread per term or row.
#pragma once

#include "dsp/decision_quality.hpp"
#include "dsp/iq_correction.hpp"  // PAQ_HOST_DEVICE
#include "dsp/parity_products.hpp"

#include <cmath>
#include <cstddef>

// A loop of constant bounds unrolled in device code (its arithmetic unchanged: the order of
// every sum stays the loop's), left as it is on the host.
#if defined(__CUDA_ARCH__)
#define PAQ_DEVICE_UNROLL _Pragma("unroll")
#else
#define PAQ_DEVICE_UNROLL
#endif

namespace paq::dsp::sxs_soft {

/// Neighbours each side whose interference is modelled.
inline constexpr int reach = 8;
/// The model's terms: the bit's own decision, then its neighbours' at -reach .. -1, 1 .. reach.
inline constexpr int terms = 1 + 2 * reach;
/// Even and odd bits are fitted apart.
inline constexpr int parities = 2;

/// The offset from its bit of term t's decision: 0, then -reach .. -1, 1 .. reach.
PAQ_HOST_DEVICE constexpr int offset_of(int t) noexcept { return t == 0 ? 0 : (t <= reach ? t - 1 - reach : t - reach); }

/// The decision (+1 / -1) of statistic x; a statistic that is not a number is decided -1, as
/// x >= 0 is false for it.
template <class T>
PAQ_HOST_DEVICE int decision(T x) noexcept
{
    return x >= T(0) ? 1 : -1;
}

/// Term t of bit i among n statistics: the decision at i + offset_of(t), 0 outside them.
template <class T>
PAQ_HOST_DEVICE int term_at(const T* x, std::size_t n, std::size_t i, int t) noexcept
{
    const long long j = static_cast<long long>(i) + offset_of(t);
    return j < 0 || j >= static_cast<long long>(n) ? 0 : decision(x[j]);
}

/// The least-squares system of one parity, augmented: row r holds sum_i term_r term_c over the
/// parity's bits for c < terms, and sum_i x_i term_r in column terms.
using system = double[terms][terms + 1];

/// Entry (r, c) of parity q's system among n decisions d (+1 / -1): the sum over the parity's
/// bits i of term_r term_c = d_(i+u) d_(i+u+lag), u the lower of the two terms' offsets and lag
/// their difference, a neighbour outside the data 0. j = i + u runs over the parity (q + u) mod 2
/// from u to n + u, so the entry is the sum of d_j d_(j+lag) over every j of that parity
/// (autocorrelation[parity * stride + lag], lag 0 .. 2 reach) less the products of the j below u
/// (u > 0) or from n + u on (u < 0): exact integers, whatever type T the autocorrelations are
/// summed in.
template <class T>
PAQ_HOST_DEVICE T normal_entry(int q, int r, int c, const signed char* d, int n, const T* autocorrelation, int stride) noexcept
{
    const int u = offset_of(r) < offset_of(c) ? offset_of(r) : offset_of(c);
    const int lag = offset_of(r) + offset_of(c) - 2 * u;
    return parity_products_within((q + u) & 1, lag, u, n + u, d, n, autocorrelation, stride);
}

/// A pivot at or below this fraction of the bits is a term the others already span: its weight
/// is 0 (a stream too short for a neighbour, or decisions that repeat with a period).
inline constexpr double min_pivot = 1e-9;

/// Gaussian elimination's step k on row r > k (the system is symmetric and positive
/// semidefinite: no pivoting), skipping a pivot at or below `tiny`.
PAQ_HOST_DEVICE inline void eliminate(system& a, int k, int r, double tiny) noexcept
{
    if (!(a[k][k] > tiny)) return;
    const double f = a[r][k] / a[k][k];
    for (int c = k; c <= terms; ++c) a[r][c] -= f * a[k][c];
}

/// The weights from the eliminated system by back substitution; 0 for a skipped pivot. In
/// device code unrolled, so that the system's entries are read ahead of the chain of
/// subtractions (one lane runs it while its block waits).
PAQ_HOST_DEVICE inline void back_substitute(const system& a, double tiny, double (&w)[terms]) noexcept
{
    PAQ_DEVICE_UNROLL
    for (int k = terms - 1; k >= 0; --k) {
        double v = a[k][terms];
        PAQ_DEVICE_UNROLL
        for (int c = k + 1; c < terms; ++c) v -= a[k][c] * w[c];
        w[k] = a[k][k] > tiny ? v / a[k][k] : 0.0;
    }
}

/// The largest g / s the LLRs are made with: statistics without spread give finite LLRs
/// (2 x 40^2 at the mean).
inline constexpr double max_snr = 40.0;

/// One parity's model: the weights (w[0] the gain g, w[1 ..] the neighbours') and the noise's
/// variance s^2 (floored at (g / max_snr)^2). s2 = 0: no information (g <= 0, or a fit
/// that is not finite), the bits' LLRs 0.
struct parity_model {
    double w[terms] = {};
    double s2 = 0.0;
};

/// A parity's model from its weights and its residuals' mean square.
PAQ_HOST_DEVICE inline parity_model model_from(const double (&w)[terms], double mean_square) noexcept
{
    constexpr double largest = 1.7976931348623157e308;
    parity_model md;
    for (int t = 0; t < terms; ++t) {
        if (!(fabs(w[t]) <= largest)) return md;
    }
    if (!(w[0] > 0.0) || !(mean_square >= 0.0 && mean_square <= largest)) return md;
    for (int t = 0; t < terms; ++t) md.w[t] = w[t];
    const double floor = w[0] / max_snr;
    md.s2 = fmax(mean_square, floor * floor);
    return md;
}

/// The model's gain and noise made good for the decisions' own errors. The least-squares fit
/// regresses each statistic on its decision, so a bit decided wrong counts as a right one whose
/// statistic fell short: g comes out too large and s^2 too small (over AWGN at a channel Eb/N0
/// of 1-2 dB, 5-6 % of the bits wrong, the LLRs stated 0.75-0.81 of the errors their signs
/// made). The interference-free statistics u_i = x_i - c_i are one Gaussian N(g d_i, s^2)
/// folded at zero: their mean |u| and mean u^2 give g / s exactly
/// (decision_quality::folded_normal_snr), then s^2 = mean u^2 / (1 + (g / s)^2). Where they show
/// no mean (folded_normal_snr 0) the least-squares model stays.
PAQ_HOST_DEVICE inline void fold_errors(parity_model& md, double mean_abs, double mean_square) noexcept
{
    if (!(md.s2 > 0.0)) return;
    const double r = decision_quality::folded_normal_snr(mean_abs, mean_square);
    if (!(r > 0.0)) return;
    const double s2 = mean_square / (1.0 + r * r);
    const double g = r * sqrt(s2);
    const double floor = g / max_snr;
    md.w[0] = g;
    md.s2 = fmax(s2, floor * floor);
}

/// The interference bit i's neighbours' decisions predict: sum over t >= 1 of w_t term_t.
template <class T>
PAQ_HOST_DEVICE double interference(const parity_model& md, const T* x, std::size_t n, std::size_t i) noexcept
{
    double c = 0.0;
    for (int t = 1; t < terms; ++t) c += md.w[t] * term_at(x, n, i, t);
    return c;
}

/// Bit i's LLR (nats, positive: 1) under its parity's model: 2 g (x_i - c_i) / s^2, the
/// neighbours' decisions the signs of dec; 0 without information.
template <class T, class D>
PAQ_HOST_DEVICE double llr_at(const parity_model (&md)[parities], const T* x, const D* dec, std::size_t n, std::size_t i) noexcept
{
    const parity_model& m = md[i % parities];
    if (!(m.s2 > 0.0)) return 0.0;
    return 2.0 * m.w[0] * (static_cast<double>(x[i]) - interference(m, dec, n, i)) / m.s2;
}

/// The same with the statistics' own decisions.
template <class T>
PAQ_HOST_DEVICE double llr_at(const parity_model (&md)[parities], const T* x, std::size_t n, std::size_t i) noexcept
{
    return llr_at(md, x, x, n, i);
}

/// Fits of the model for the decisions' error rate (dsp::sxs_posterior_bep): the first on the
/// statistics' own decisions, each next one with the neighbours decided by the last one's LLRs.
/// On the unequalized path over multipath the statistics' signs err 2-4 %, and interference
/// predicted from them is wrong around every wrong neighbour; the LLRs' signs err less, and
/// the third fit's probabilities state the decisions' error rate within 0.87-1.14x on AWGN,
/// edwards3 and two-ray (docs/SIGNAL-CHAIN.md, "Decision quality").
inline constexpr int posterior_passes = 3;

/// The unequalized path's published BEP estimate from the decision-quality model's
/// (`contexts`, dsp/decision_quality.hpp) and the soft decisions' model's (`posterior`,
/// dsp::sxs_posterior_bep): the lower of the two where the soft decisions' model states at
/// least posterior_floor, else the decision-quality model's. Over multipath the contexts'
/// model takes the interference for noise (2.7-7.4x the BER on edwards3) and the soft
/// decisions' model states it; on AWGN the contexts' model is the better one (the soft
/// decisions' model, linear in the neighbours, leaves SOQPSK-TG's own interference in its
/// noise: 1.27x at 10 dB). Below the floor a packet's estimate rests on a few bits, and the
/// lower of two such noisy estimates reads low (0.74x on AWGN at 10 dB, taken everywhere).
inline constexpr double posterior_floor = 1e-3;
PAQ_HOST_DEVICE inline double unequalized_bep(double contexts, double posterior) noexcept
{
    return posterior >= posterior_floor ? fmin(contexts, posterior) : contexts;
}

/// Whether unequalized_bep can differ from `contexts`: below posterior_floor it is `contexts`
/// whatever the soft decisions' model states (the lower of the two, or `contexts` alone), so
/// the three fits of dsp::sxs_posterior_bep are skipped there (a clean link's packets).
PAQ_HOST_DEVICE inline bool needs_posterior(double contexts) noexcept
{
    return !(contexts < posterior_floor);
}

/// The probability that decision sign(x) is wrong given the bit's LLR l (nats, positive: 1):
/// 1 / (1 + e^(d l)), d = +-1 the decision, above 0.5 where the LLR disagrees with it.
template <class T>
PAQ_HOST_DEVICE double decision_error_probability(T x, float l) noexcept
{
    const double dl = static_cast<double>(decision(x)) * static_cast<double>(l);
    if (!(dl == dl)) return 0.5;  // NaN
    return 1.0 / (1.0 + exp(fmin(fmax(dl, -700.0), 700.0)));
}

}  // namespace paq::dsp::sxs_soft
