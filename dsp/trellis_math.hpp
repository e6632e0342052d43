// The arithmetic the trellis detector's CPU reference (dsp/trellis.cpp) and its GPU stage
// (gpu/trellis.cu) share: how a window of bits indexes the model's table, and the branch metric
// of a trellis step. Host and device.
//
// A state sequence `seq` of step j holds the bits a_{j-memory} .. a_j, the oldest in the most
// significant bit (bit set: a = +1). Step j explains the sample of bit k = j - after, whose
// window is exactly those bits: a_k is bit `after` of seq.
#pragma once

#include "dsp/iq_correction.hpp"  // PAQ_HOST_DEVICE
#include "dsp/parity_products.hpp"
#include "dsp/receiver_tables.hpp"
#include "dsp/trellis.hpp"

namespace paq::dsp::trellis_math {

/// +1 or -1: the sign of bit k (the window's centre) in seq.
PAQ_HOST_DEVICE constexpr int pattern_sign(int seq) noexcept { return ((seq >> trellis::after) & 1) != 0 ? 1 : -1; }

/// The table entry of seq: seq with its centre bit made +1 (every bit negated when it is -1),
/// the centre bit then dropped.
PAQ_HOST_DEVICE constexpr int pattern_index(int seq) noexcept
{
    constexpr int all = (1 << trellis::window) - 1;
    constexpr int low = (1 << trellis::after) - 1;
    const int s = pattern_sign(seq) > 0 ? seq : seq ^ all;
    return ((s >> (trellis::after + 1)) << trellis::after) | (s & low);
}

/// The sequence of bit k's window a_(k-before) .. a_(k+after) of +-1 decisions (the oldest in
/// the most significant bit, bit set: +1), as the table is indexed.
PAQ_HOST_DEVICE inline int window_of(const signed char* a, long k) noexcept
{
    int seq = 0;
    for (long i = k - trellis::before; i <= k + trellis::after; ++i) seq = (seq << 1) | (a[i] > 0 ? 1 : 0);
    return seq;
}

/// The branch metric, unscaled and less the sample's own energy |x|^2 (the same for every
/// branch of a step): |x - sign t|^2 - |x|^2 = energy - 2 sign corr, with corr = Re(x conj t)
/// and energy = |t|^2 of the sequence's entry t.
PAQ_HOST_DEVICE constexpr double branch_metric(double corr, double energy, int seq) noexcept
{
    return energy - 2.0 * static_cast<double>(pattern_sign(seq)) * corr;
}

/// The factor on the LLRs of a path's trellis (its metrics' scale 1 / (2 sigma2) times it), so
/// that they are calibrated: the mean of 1 / (1 + e^|LLR|) over the data bits estimates their
/// error rate. Max-log BCJR counts the samples' noise as independent and keeps only the best
/// path of each sign, so the metrics' LLRs overstate the bits' reliability: their BEP estimate
/// read 0.58-0.66x the measured BER on AWGN (FDE2 0.44-0.53x), and ZF's 0.52-0.58x on
/// edwards3, whose noise, the channel's inverse applied to it, is the most coloured. How much
/// they overstate follows the fit's residual correlation a bit apart (rho1: 0.27-0.29 on AWGN,
/// 0.48-0.49 after ZF on edwards3, 0.14-0.22 on the unequalized path over multipath, where
/// echoes beyond the table count as noise), so the factor is 1 / (a + b rho1), clamped to
/// 0.3 .. 1, with a and b per path fitted to the measured error rates (CPU backend, AWGN 5-10
/// dB, edwards3 12-16 dB, two-ray 12-18 dB; docs/SIGNAL-CHAIN.md, "Trellis detection"). The
/// MMSE, CMA and FDE1 paths, whose noise the equalizer keeps from growing, take a constant.
/// It changes no decision.
struct llr_law {
    double a = 1.0;  ///< the factor is 1 / (a + b rho1)
    double b = 0.0;
    [[nodiscard]] PAQ_HOST_DEVICE constexpr double factor(double rho1) const noexcept
    {
        const double d = a + b * rho1;
        const double c = d > 0.0 ? 1.0 / d : 1.0;  // also a NaN rho1 (a residual of zero)
        return c < 0.3 ? 0.3 : c > 1.0 ? 1.0 : c;
    }
};

/// The path's llr_law; a path index outside 0 .. 5 gets the MMSE paths' constant.
PAQ_HOST_DEVICE constexpr llr_law llr_calibration(int path) noexcept
{
    if (path == static_cast<int>(eq_path::none)) return {0.50, 3.40};
    if (path == static_cast<int>(eq_path::zf)) return {0.54, 3.60};
    if (path == static_cast<int>(eq_path::fde2)) return {1.30, 1.20};
    return {1.0 / 0.7, 0.0};
}

/// Far term t's offset from bit k (trellis::far_terms): -far_reach .. -(before + 1), then
/// after + 1 .. far_reach.
PAQ_HOST_DEVICE constexpr int far_offset(int t) noexcept
{
    return t < trellis::far_reach - trellis::before ? t - trellis::far_reach : t - (trellis::far_reach - trellis::before) + trellis::after + 1;
}

/// The lags between two far terms' offsets: 0 .. 2 far_reach.
inline constexpr int far_lags = 2 * trellis::far_reach + 1;

/// Entry (r, c) of parity par's far normal equations: the sum over the bits k of that parity
/// the table is fitted on (before <= k < n - after) of d_(k + far_offset(r)) d_(k + far_offset(c)),
/// d being the +-1 decisions and 0 outside 0 .. n - 1. Made from the decisions'
/// autocorrelations per parity (autocorrelation[p * stride + lag]: the sum of d_m d_(m + lag)
/// over every m of parity p with m + lag < n, lag 0 .. far_lags - 1) less the products of the m
/// outside the fitted range: exact integers, as the products bit by bit give them, at about a
/// fifth of their cost (the GPU's far interference stage).
template <class T>
PAQ_HOST_DEVICE T far_gram_entry(int par, int r, int c, const signed char* d, int n, const T* autocorrelation, int stride) noexcept
{
    const int o_r = far_offset(r), o_c = far_offset(c);
    const int u = o_r < o_c ? o_r : o_c;
    const int lag = (o_r < o_c ? o_c : o_r) - u;
    // k over before .. n - after - 1 of parity par is m = k + u over before + u .. n - after - 1 + u.
    return parity_products_within((par + u) & 1, lag, trellis::before + u, n - trellis::after + u, d, n, autocorrelation, stride);
}

/// The far terms' normal equations (trellis::far_terms rows, each the system's row and then two
/// right-hand sides: the residual's real and imaginary parts), eliminated in place without
/// pivoting (the system is symmetric positive semidefinite, so its pivots are a Cholesky
/// factor's diagonal squared), and the weights by back substitution into w. false, w untouched,
/// where a pivot is not positive or not above 1e-6 of the largest: a term the others span (a
/// bit pattern that repeats), whose weight would be noise amplified.
PAQ_HOST_DEVICE inline bool solve_far_system(double (&g)[trellis::far_terms][trellis::far_terms + 2],
                                             double (&w)[trellis::far_terms][2]) noexcept
{
    constexpr int n = trellis::far_terms;
    constexpr double largest = 1.7976931348623157e308;
    double lo = largest, hi = 0.0;
    for (int k = 0; k < n; ++k) {
        const double p = g[k][k];
        if (!(p > 0.0 && p <= largest)) return false;
        lo = p < lo ? p : lo;
        hi = p > hi ? p : hi;
        for (int r = k + 1; r < n; ++r) {
            const double f = g[r][k] / p;
            for (int c = k; c < n + 2; ++c) g[r][c] -= f * g[k][c];
        }
    }
    if (!(lo > 1e-6 * hi)) return false;
    for (int k = n - 1; k >= 0; --k) {
        for (int q = 0; q < 2; ++q) {
            double v = g[k][n + q];
            for (int c = k + 1; c < n; ++c) v -= g[k][c] * w[c][q];
            w[k][q] = v / g[k][k];
        }
    }
    return true;
}

/// Whether a path's trellis takes the far interference out before its last pass
/// (trellis::far_reach): MMSE, CMA, FDE1 and FDE2. Not the unequalized path, whose echoes are
/// its table's and where, at a coded link's Eb/N0, the wrong bits the fit is made on cost more
/// than it takes out (ar4ja-4096-2/3 over edwards3 at 5.5 dB: 614 codewords failed where 578
/// did); not ZF, whose noise, the channel's inverse applied to it, is coloured enough that its
/// wrong bits correlate with the noise the fit explains (two-ray 8 dB: 77% more errors, though
/// 11-33% fewer at the other points of docs/SIGNAL-CHAIN.md's table).
PAQ_HOST_DEVICE constexpr bool cancels_far_interference(int path) noexcept
{
    return path != static_cast<int>(eq_path::none) && path != static_cast<int>(eq_path::zf);
}

}  // namespace paq::dsp::trellis_math
