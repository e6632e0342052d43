// One output of dsp::resample_at on the device, bit for bit (dsp/resampler.hpp: FIXED-POINT
// RULE, ARITHMETIC ORDER). CUDA code only (.cu).
#pragma once

#include "dsp/resampler.hpp"

#include <cuComplex.h>

#include <cstdint>

namespace paq::gpu {

/// Input sample `idx` of `in` as the filter reads it; see resample_at_device.
struct plain_reader {
    const cuFloatComplex* in;
    long long len;
    __device__ __forceinline__ cuFloatComplex operator()(long long idx) const
    {
        return idx < 0 || idx >= len ? make_cuFloatComplex(0.0f, 0.0f) : in[idx];
    }
};

/// As plain_reader, non-finite samples read as zero too (dsp::clock_correct_packet's rule).
struct finite_reader {
    const cuFloatComplex* in;
    long long len;
    __device__ __forceinline__ cuFloatComplex operator()(long long idx) const
    {
        if (idx < 0 || idx >= len) return make_cuFloatComplex(0.0f, 0.0f);
        const cuFloatComplex v = in[idx];
        return isfinite(v.x) && isfinite(v.y) ? v : make_cuFloatComplex(0.0f, 0.0f);
    }
};

/// dsp::resample_at: the output at input position i + frac / 2^32 with the table `coef`
/// ({tap, slope} pairs, `taps` per phase), reading samples through `read`. Every product and
/// sum is rounded on its own (no FMA), in the CPU's order; an absent sample read as zero
/// adds c * 0 = +-0, as on the CPU's edge path.
template <class Reader>
__device__ __forceinline__ cuFloatComplex resample_at_device(const Reader& read, long long i, std::uint32_t frac,
                                                             const float2* __restrict__ coef, int taps)
{
    constexpr int frac_shift = dsp::fixed_frac_bits - dsp::resampler_phase_bits;
    const unsigned p = frac >> frac_shift;
    const float mu = __fmul_rn(__uint2float_rn(frac & 0xFFFFFFu), 1.0f / 16777216.0f);
    const float2* row = coef + static_cast<std::size_t>(p) * static_cast<std::size_t>(taps);
    const long long first = i - taps / 2 + 1;
    float acc_re = 0.0f, acc_im = 0.0f;
    for (int k = 0; k < taps; ++k) {
        const float2 ts = __ldg(row + k);
        const float c = __fadd_rn(ts.x, __fmul_rn(mu, ts.y));
        const cuFloatComplex x = read(first + k);
        acc_re = __fadd_rn(acc_re, __fmul_rn(c, x.x));
        acc_im = __fadd_rn(acc_im, __fmul_rn(c, x.y));
    }
    return make_cuFloatComplex(acc_re, acc_im);
}

}  // namespace paq::gpu
