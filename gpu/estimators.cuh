// dsp::preamble_metric's M(u) at single positions, in double, bit for bit (the
// clock estimator refines each packet start from M at its peak and the two neighbours; with
// the CPU's values the refined starts, the clock estimate and the re-timing steps are the
// CPU's exactly). CUDA code only (.cu); host and device.
//
// The CPU computes, in double without fused multiply-adds (the x86-64 baseline has none):
//   s = finite(r) ? r : 0 (float widened);  c = 0;  c += s * conj(t_l), l = 0 .. 31
//   (std::complex: re = sr tr - si (-ti), im = sr (-ti) + si tr);  e += sr sr + si si
//   L = sum_m |c(u + 32 m)|^2 (re re + im im), E = sum_m e(u + 32 m), m = 0 .. 7 in order
//   M = E > 0 ? L / (32 E) : 0
// Here every product, sum and quotient is rounded on its own (__dmul_rn etc. on the device;
// the host's plain operators, which host tests compare with dsp::preamble_metric).
#pragma once

#include <cuComplex.h>

#include <cstddef>

namespace paq::gpu::exact {

__host__ __device__ inline double mul(double a, double b)
{
#ifdef __CUDA_ARCH__
    return __dmul_rn(a, b);
#else
    return a * b;
#endif
}
__host__ __device__ inline double add(double a, double b)
{
#ifdef __CUDA_ARCH__
    return __dadd_rn(a, b);
#else
    return a + b;
#endif
}
__host__ __device__ inline double sub(double a, double b)
{
#ifdef __CUDA_ARCH__
    return __dsub_rn(a, b);
#else
    return a - b;
#endif
}
__host__ __device__ inline double div(double a, double b)
{
#ifdef __CUDA_ARCH__
    return __ddiv_rn(a, b);
#else
    return a / b;
#endif
}

/// c(v) and e(v) of one preamble period (r: 32 samples from v on).
__host__ __device__ inline void period_terms(const cuFloatComplex* r, const cuDoubleComplex* tmpl, double& c_abs2, double& e)
{
    double cr = 0.0, ci = 0.0;
    e = 0.0;
    for (int l = 0; l < 32; ++l) {
        const cuFloatComplex raw = r[l];
        const bool fin = isfinite(raw.x) && isfinite(raw.y);
        const double sr = fin ? static_cast<double>(raw.x) : 0.0, si = fin ? static_cast<double>(raw.y) : 0.0;
        const double tr = tmpl[l].x, nti = -tmpl[l].y;
        cr = add(cr, sub(mul(sr, tr), mul(si, nti)));
        ci = add(ci, add(mul(sr, nti), mul(si, tr)));
        e = add(e, add(mul(sr, sr), mul(si, si)));
    }
    c_abs2 = add(mul(cr, cr), mul(ci, ci));
}

/// M(u) from the eight periods' terms, summed in order.
__host__ __device__ inline double metric_from_terms(const double* c_abs2, const double* e)
{
    double l_sum = 0.0, e_sum = 0.0;
    for (int m = 0; m < 8; ++m) {
        l_sum = add(l_sum, c_abs2[m]);
        e_sum = add(e_sum, e[m]);
    }
    return e_sum > 0.0 ? div(l_sum, mul(32.0, e_sum)) : 0.0;
}

/// M(u) for the 256 samples r[0 .. 255] (r = window + u).
__host__ __device__ inline double preamble_metric_at(const cuFloatComplex* r, const cuDoubleComplex* tmpl)
{
    double c_abs2[8], e[8];
    for (int m = 0; m < 8; ++m) period_terms(r + 32 * m, tmpl, c_abs2[m], e[m]);
    return metric_from_terms(c_abs2, e);
}

}  // namespace paq::gpu::exact
