// Device arithmetic on channel estimates that several kernels share, each the CPU's in its
// order: dsp::received_power (the support choice in gpu/estimators.cu, the two-channel MRC in
// gpu/cuda_backend.cu) and dsp::combining_weights (the two-channel terms in
// gpu/cuda_backend.cu, the combined ZF in gpu/equalizers.cu). CUDA code only (.cu).
//
// The tables they read (R_x, the supports' noise gains) are __constant__ arrays of the file
// that launches the kernel: without relocatable device code each .cu holds its own copy, and
// each uploads it where it is set up.
#pragma once

#include <cmath>

namespace paq::gpu {

/// The most channel supports the kernels' constant tables hold (dsp::receiver_tables::supports;
/// the set-up refuses more).
inline constexpr int max_channel_supports = 32;

/// dsp::combining_weights of two noise variances: w_c = sigma2_min / sigma2_c; a variance that
/// is not finite or is negative weighs 0; with a noiseless channel only the noiseless ones weigh
/// (1). Returns sigma2_min over the finite, non-negative ones (0 when there is none).
__device__ inline double combining_weights(double s1, double s2, double& w1, double& w2)
{
    double least = INFINITY;
    if (s1 >= 0.0 && isfinite(s1)) least = fmin(least, s1);
    if (s2 >= 0.0 && isfinite(s2)) least = fmin(least, s2);
    if (!isfinite(least)) least = 0.0;
    w1 = (s1 >= 0.0 && isfinite(s1)) ? (s1 > 0.0 ? least / s1 : 1.0) : 0.0;
    w2 = (s2 >= 0.0 && isfinite(s2)) ? (s2 > 0.0 ? least / s2 : 1.0) : 0.0;
    return least;
}

/// dsp::received_power of `taps` channel taps, tap(a) giving the a-th (its real and imaginary
/// parts as re, im), leaving out taps lo .. hi (lo > hi: none): sum_a |h_a|^2 R_x(0) +
/// 2 sum_{a < b} Re(h_a h_b* R_x(b - a)) in the CPU's order, R_x's lags in rx_re / rx_im.
template <int taps, class Tap>
__device__ inline double received_power(Tap tap, int lo, int hi, const double* rx_re, const double* rx_im)
{
    double p = 0.0;
    for (int a = 0; a < taps; ++a) {
        if (a >= lo && a <= hi) continue;
        double ar, ai;
        tap(a, ar, ai);
        p += (ar * ar + ai * ai) * rx_re[0];
        for (int b = a + 1; b < taps; ++b) {
            if (b >= lo && b <= hi) continue;
            double br, bi;
            tap(b, br, bi);
            const double ur = ar * br + ai * bi, ui = ai * br - ar * bi;
            p += 2.0 * (ur * rx_re[b - a] - ui * rx_im[b - a]);
        }
    }
    return p;
}

}  // namespace paq::gpu
