// Power-of-two complex FFTs of one array in shared memory, for kernels that keep a packet on
// chip (gpu/equalizers_cma.cu: 16384 points; gpu/cuda_backend.cu's paths: 8192). CUDA code only (.cu).
//
// In-place radix-2 Cooley-Tukey, the stages taken four at a time in registers (a thread loads
// 16 elements, applies four stages, stores them back): decimation in frequency turns natural
// order into bit-reversed order, decimation in time turns bit-reversed order into natural
// order, so a kernel that goes there and back never reorders. Both directions unnormalized,
// as cuFFT and FFTW. Each transform ends with __syncthreads(); `store(i, v)` maps each value
// of the last stages on its way out (i: its position in the array), so that a product or a
// nonlinearity costs no extra pass. The array is laid out with pad(): see there.
//
// Twiddles: a group of stages needs W^((i mod h) 2^s) for its elements; these are w^(2^t) x
// (a root of unity of order <= 16, a constant after unrolling), w from one sincospif per
// group on an exactly reduced phase and the rest by squaring (error ~1e-6 relative,
// measured by the GPU tests against the CPU's double transforms).
#pragma once

#include <cuda_runtime.h>

namespace paq::gpu::smem_fft {

/// Position of element i in the shared array: one padding slot every 16 entries, so that the
/// strided accesses of the later stages fall on distinct banks within each half-warp of
/// 8-byte accesses; with `bitrev_reads` one more every 512, so that reading the bit-reversed
/// output in natural order (consecutive indices differ in their high bits) does too.
/// Every function below takes the same `bitrev_reads` as the kernel's array.
template <bool bitrev_reads>
__device__ __forceinline__ int pad(int i)
{
    if constexpr (bitrev_reads) return i + (i >> 4) + (i >> 9);
    return i + (i >> 4);
}
/// Entries of the padded array for n points.
constexpr int padded_size(int n, bool bitrev_reads) { return n + n / 16 + (bitrev_reads ? n / 512 : 0); }

template <int LogN>
__device__ __forceinline__ int bitrev(int i)
{
    return static_cast<int>(__brev(static_cast<unsigned>(i)) >> (32 - LogN));
}

__device__ __forceinline__ float2 cmul(float2 a, float2 b) { return make_float2(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x); }
/// a x conj(b)
__device__ __forceinline__ float2 cmul_conj(float2 a, float2 b) { return make_float2(a.x * b.x + a.y * b.y, a.y * b.x - a.x * b.y); }

/// exp(-+ j 2 pi m / G) for m < G / 2, G <= 16 a power of two.
template <bool inverse, int G>
__device__ __forceinline__ float2 root(int m)
{
    constexpr float c16[8] = {1.0f, 0.92387953251128674f, 0.70710678118654752f, 0.38268343236508977f,
                              0.0f, -0.38268343236508977f, -0.70710678118654752f, -0.92387953251128674f};
    const int k = m * (16 / G);  // the same root on the 16-point circle
    // sin(pi k / 8) = cos(pi (4 - k) / 8) = c16[|4 - k|] for k < 8
    const float c = c16[k], sn = c16[k <= 4 ? 4 - k : k - 4];
    return make_float2(c, inverse ? sn : -sn);
}

/// w^(2^t), t < NS, with w = W^(b0 2^s0), W = exp(-+ j 2 pi / N).
template <int LogN, int NS, bool inverse>
__device__ __forceinline__ void group_twiddles(int b0, int s0, float2 (&base)[NS])
{
    float sn, cs;
    sincospif(2.0f * static_cast<float>(b0 << s0) / static_cast<float>(1 << LogN), &sn, &cs);  // exact phase
    base[0] = make_float2(cs, inverse ? sn : -sn);
#pragma unroll
    for (int t = 1; t < NS; ++t) base[t] = cmul(base[t - 1], base[t - 1]);
}

struct keep {
    __device__ float2 operator()(int, float2 v) const { return v; }
};

/// Stages s0 .. s0 + NS - 1 of the transform, in place (stage s pairs i and i + h, h = N >> (s + 1),
/// with W^((i mod h) 2^s)): decimation in frequency takes them upwards, (u, v) -> (u + v,
/// (u - v) W); decimation in time, its transpose, downwards, (u, v) -> (u + W v, u - W v).
template <int LogN, int NS, bool inverse, bool bitrev_reads, bool in_time, class Store>
__device__ __forceinline__ void stages(float2* a, int s0, Store store)
{
    constexpr int n = 1 << LogN, G = 1 << NS;
    const int hmin = n >> (s0 + NS);
    for (int g = threadIdx.x; g < n / G; g += blockDim.x) {
        const int base = (g / hmin) * (hmin * G) + (g % hmin);
        float2 x[G], tw[NS];
#pragma unroll
        for (int j = 0; j < G; ++j) x[j] = a[pad<bitrev_reads>(base + j * hmin)];
        group_twiddles<LogN, NS, inverse>(g % hmin, s0, tw);
#pragma unroll
        for (int step = 0; step < NS; ++step) {
            const int t = in_time ? NS - 1 - step : step;
            const int hj = G >> (t + 1);
#pragma unroll
            for (int j = 0; j < G; ++j) {
                if (j & hj) continue;
                const float2 w = (j % hj) == 0 ? tw[t] : cmul(tw[t], root<inverse, G>((j % hj) << t));
                const float2 u = x[j], v = in_time ? cmul(x[j + hj], w) : x[j + hj];
                x[j] = make_float2(u.x + v.x, u.y + v.y);
                const float2 d = make_float2(u.x - v.x, u.y - v.y);
                x[j + hj] = in_time ? d : cmul(d, w);
            }
        }
#pragma unroll
        for (int j = 0; j < G; ++j) {
            const int i = base + j * hmin;
            a[pad<bitrev_reads>(i)] = store(i, x[j]);
        }
    }
}

/// Where dif's last group of stages starts: groups of four from stage 0, the last one of the
/// LogN - last_group_start<LogN> stages left (1 .. 4).
template <int LogN>
inline constexpr int last_group_start = ((LogN - 1) / 4) * 4;

/// The groups of dif in reverse, from the one starting at S0 down to stage 0 (with `store`).
template <int LogN, int S0, bool inverse, bool bitrev_reads, class Store>
__device__ __forceinline__ void dit_down(float2* a, Store store)
{
    constexpr int NS = S0 == last_group_start<LogN> ? LogN - S0 : 4;
    if constexpr (S0 == 0) {
        stages<LogN, NS, inverse, bitrev_reads, true>(a, 0, store);
        __syncthreads();
    } else {
        stages<LogN, NS, inverse, bitrev_reads, true>(a, S0, keep{});
        __syncthreads();
        dit_down<LogN, S0 - 4, inverse, bitrev_reads>(a, store);
    }
}

/// The array zeroed and `count` taps placed for dit (bit-reversed order in): tap i at time
/// first + i, circularly on the N-point grid. Ends with __syncthreads().
template <int LogN, bool bitrev_reads>
__device__ __forceinline__ void place_taps(float2* a, const float2* __restrict__ taps, int count, int first)
{
    constexpr int n = 1 << LogN;
    for (int i = threadIdx.x; i < n; i += blockDim.x) a[pad<bitrev_reads>(i)] = make_float2(0.0f, 0.0f);
    __syncthreads();
    for (int i = threadIdx.x; i < count; i += blockDim.x) a[pad<bitrev_reads>(bitrev<LogN>(((first + i) % n + n) % n))] = taps[i];
    __syncthreads();
}

/// Stages S0 .. End - 1 of dif, four at a time (End - S0 a multiple of four).
template <int LogN, int S0, int End, bool inverse, bool bitrev_reads>
__device__ __forceinline__ void dif_until(float2* a)
{
    static_assert((End - S0) % 4 == 0 && End <= LogN);
    if constexpr (S0 < End) {
        stages<LogN, 4, inverse, bitrev_reads, false>(a, S0, keep{});
        __syncthreads();
        dif_until<LogN, S0 + 4, End, inverse, bitrev_reads>(a);
    }
}

/// Natural order in, bit-reversed order out (position q holds bin bitrev(q)); `store(q, v)`.
template <int LogN, bool inverse, bool bitrev_reads, class Store>
__device__ __forceinline__ void dif(float2* a, Store store)
{
    static_assert(LogN >= 5 && LogN <= 16);
    constexpr int last = last_group_start<LogN>;
    dif_until<LogN, 0, last, inverse, bitrev_reads>(a);
    stages<LogN, LogN - last, inverse, bitrev_reads, false>(a, last, store);
    __syncthreads();
}

/// dif without its last stage, for LogN = 4 m + 1, where that stage is a group and a pass of
/// its own over the whole array: read the output with dif_last_stage_at. For a kernel that
/// reads only some of the output, this saves the pass.
template <int LogN, bool inverse, bool bitrev_reads>
__device__ __forceinline__ void dif_but_last(float2* a)
{
    static_assert(LogN % 4 == 1 && LogN >= 5 && last_group_start<LogN> == LogN - 1);
    dif_until<LogN, 0, LogN - 1, inverse, bitrev_reads>(a);
}

/// Position q of dif's output (bin bitrev(q)) from the array dif_but_last left: dif's last
/// stage pairs q and q ^ 1 with the twiddle 1, (u, v) -> (u + v, u - v), exactly as the stage.
template <bool bitrev_reads>
__device__ __forceinline__ float2 dif_last_stage_at(const float2* a, int q)
{
    const float2 u = a[pad<bitrev_reads>(q & ~1)], v = a[pad<bitrev_reads>(q | 1)];
    return (q & 1) == 0 ? make_float2(u.x + v.x, u.y + v.y) : make_float2(u.x - v.x, u.y - v.y);
}

/// Bit-reversed order in (position q holds element bitrev(q)), natural order out; `store(k, v)`.
template <int LogN, bool inverse, bool bitrev_reads, class Store>
__device__ __forceinline__ void dit(float2* a, Store store)
{
    static_assert(LogN >= 5 && LogN <= 16);
    dit_down<LogN, last_group_start<LogN>, inverse, bitrev_reads>(a, store);
}

}  // namespace paq::gpu::smem_fft
