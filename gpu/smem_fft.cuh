// Power-of-two complex FFTs of one array in shared memory, for kernels that keep a packet on
// chip (gpu/equalizers_cma.cu and gpu/paths.cu's tap spectra: 16384 points; gpu/paths.cu's
// paths: 8192). CUDA code only (.cu).
//
// In-place radix-2 Cooley-Tukey, the stages taken four at a time in registers (a thread loads
// 16 elements, applies four stages, stores them back): decimation in frequency turns natural
// order into bit-reversed order, decimation in time turns bit-reversed order into natural
// order, so a kernel that goes there and back never reorders. Both directions unnormalized,
// as cuFFT and FFTW. Each transform ends with __syncthreads(); `store(i, v)` maps each value
// of the last stages on its way out (i: its position in the array), so that a product or a
// nonlinearity costs no extra pass. The array is laid out with pad(): see there.
//
// Transforms of taps near time 0 (16384 points: CMA's steps, the tap spectra) skip the
// stages that would work on zeros (dit_of_taps) or make bins nobody reads (dif_to_blocks,
// dif_bin_near_zero): six of fourteen each.
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

/// Taps near time 0, for the transforms of taps (CMA's, the tap spectra's): the N = 16384
/// point transforms in which dit's first and dif's last six stages are the ones inside each
/// block of 64 positions of the bit-reversed array. Block b holds the times 256 m + r, r =
/// bitrev8(b), m = bitrev6(offset); its 64-point transform over m (those six stages, W64 =
/// W^256) needs, for taps within 256 of time 0, at most two terms: time r (m = 0) and time
/// r - 256, that is N - 256 + r (m = 63).
constexpr int near_zero_span = 256;

/// W64^(63 o) = W^(-4 o): e^(+j pi o / 32) forward, e^(-j pi o / 32) inverse.
template <bool inverse>
__device__ __forceinline__ float2 w64_last(int o)
{
    float sn, cs;
    sincospif(static_cast<float>(o) / 32.0f, &sn, &cs);
    return make_float2(cs, inverse ? -sn : sn);
}

/// dit of `count` taps, tap i at time first + i circularly, all within near_zero_span of 0
/// (-256 <= first, first + count <= 256; the caller checks), natural order out with
/// `store(k, v)`: the same transform as placing them bit-reversed in a zeroed array and
/// running dit. The first six stages are not run: what they leave, u_b + v_b W64^(63 o) at
/// offset o of block b (u_b the tap at time r, v_b the one at r - 256), is written in the one
/// pass that would have zeroed the array; then dit's last two groups. Where v_b is 0 (every
/// block but those of the taps before time 0) the value is exactly what the stages give.
/// blockDim.x a multiple of 64; `taps` best in shared memory (each is read by a whole block of
/// 64 threads).
template <int LogN, bool inverse, bool bitrev_reads, class Store>
__device__ __forceinline__ void dit_of_taps(float2* a, const float2* __restrict__ taps, int count, int first, Store store)
{
    static_assert(LogN == 14 && last_group_start<LogN> == 12, "dit's first two groups are the stages inside the blocks of 64");
    constexpr int n = 1 << LogN;
    const float2 w = w64_last<inverse>(static_cast<int>(threadIdx.x) & 63);  // the same offset at every i of this thread
    const float2 zero = make_float2(0.0f, 0.0f);
#pragma unroll 4
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        const int r = bitrev<8>(i >> 6);  // the block's time
        const int iu = r - first, iv = r - near_zero_span - first;
        const float2 u = iu >= 0 && iu < count ? taps[iu] : zero;
        const float2 v = iv >= 0 && iv < count ? cmul(taps[iv], w) : zero;
        a[pad<bitrev_reads>(i)] = make_float2(u.x + v.x, u.y + v.y);
    }
    __syncthreads();
    dit_down<LogN, 4, inverse, bitrev_reads>(a, store);
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

/// dif for a kernel that reads only bins within near_zero_span of 0 (N = 16384): its stages
/// before the blocks of 64 (the first two groups), then dif_bin_near_zero for each bin read.
template <int LogN, bool inverse, bool bitrev_reads>
__device__ __forceinline__ void dif_to_blocks(float2* a)
{
    static_assert(LogN == 14, "dif's last six stages are the ones inside the blocks of 64");
    dif_until<LogN, 0, LogN - 6, inverse, bitrev_reads>(a);
}

/// Bin k of dif's output (bin N + k for negative k; -256 <= k < 256) from the array
/// dif_to_blocks left, returned to every lane of the calling warp (all 32 call it with the
/// same k). The bin is its block's 64-point transform at one offset: offset 0 (k >= 0), the
/// sum of the block's 64 entries; offset 63 (k < 0), their sum weighted by W64^(63 j).
template <int LogN, bool inverse, bool bitrev_reads>
__device__ __forceinline__ float2 dif_bin_near_zero(const float2* a, int k)
{
    static_assert(LogN == 14);
    const int base = bitrev<8>(k & (near_zero_span - 1)) << 6;  // the block of time k mod 256
    const int lane = static_cast<int>(threadIdx.x) & 31;
    float2 s = make_float2(0.0f, 0.0f);
#pragma unroll
    for (int j = lane; j < 64; j += 32) {
        float2 e = a[pad<bitrev_reads>(base + j)];
        if (k < 0) e = cmul(e, w64_last<inverse>(j));
        s = make_float2(s.x + e.x, s.y + e.y);
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        s.x += __shfl_xor_sync(0xffffffffu, s.x, o);
        s.y += __shfl_xor_sync(0xffffffffu, s.y, o);
    }
    return s;
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
