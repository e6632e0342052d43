// Double-precision complex arithmetic for the solver kernels (device code only): a plain
// struct, so that shared arrays of it need no constructors, and a warp's sum by shuffles.
#pragma once

namespace paq::gpu {

struct z64 {
    double re, im;
};
__device__ inline z64 operator+(z64 a, z64 b) { return {a.re + b.re, a.im + b.im}; }
__device__ inline z64 operator-(z64 a, z64 b) { return {a.re - b.re, a.im - b.im}; }
__device__ inline z64 operator*(z64 a, z64 b) { return {a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re}; }
__device__ inline z64 operator*(double s, z64 a) { return {s * a.re, s * a.im}; }
__device__ inline z64 conj(z64 a) { return {a.re, -a.im}; }
__device__ inline double norm(z64 a) { return a.re * a.re + a.im * a.im; }
/// Every lane of a full warp gets the sum of the warp's values.
__device__ inline z64 warp_sum(z64 v)
{
    for (int o = 16; o > 0; o >>= 1) {
        v.re += __shfl_xor_sync(0xffffffffu, v.re, o);
        v.im += __shfl_xor_sync(0xffffffffu, v.im, o);
    }
    return v;
}

}  // namespace paq::gpu
