#include "gpu/cma.hpp"

#include "dsp/receiver_tables.hpp"
#include "dsp/waveform.hpp"
#include "gpu/resources.cuh"

#include <stdexcept>

namespace paq::gpu {

namespace {

constexpr int n = static_cast<int>(cma_fft_size);
constexpr int log_n = 14;
static_assert(n == 1 << log_n);
constexpr int threads = 512;
constexpr int l_eq = dsp::chain::L_eq;
constexpr int l1 = dsp::chain::L1;
/// One padding slot every 16 entries: the strided accesses of the later stages (and of the
/// bit-reversed passes) then hit distinct banks within each half-warp.
constexpr int padded = n + n / 16;
constexpr std::size_t smem_bytes = (static_cast<std::size_t>(padded) + l_eq) * sizeof(float2);
static_assert(smem_bytes <= 227 * 1024);

__device__ __forceinline__ int pad(int i) { return i + (i >> 4); }
__device__ __forceinline__ int bitrev(int i) { return static_cast<int>(__brev(static_cast<unsigned>(i)) >> (32 - log_n)); }
__device__ __forceinline__ float2 cmul(float2 a, float2 b) { return make_float2(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x); }
__device__ __forceinline__ float2 cmul_conj(float2 a, float2 b) { return make_float2(a.x * b.x + a.y * b.y, a.y * b.x - a.x * b.y); }
/// exp(-+ j 2 pi m / G) for m < G / 2, G = 16 or 4: constants once the loops are unrolled.
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

/// The stage twiddles of a group: stage s0 + t of the element at i = base + j hmin has
/// W^((i mod h) 2^s) = w^(2^t) x W_G^((j mod hj) 2^t), with w = W^((base mod hmin) 2^s0), so a
/// group needs one sincospif; the rest are squarings and constants.
template <int NS, bool inverse>
__device__ __forceinline__ void group_twiddles(int b0, int s0, float2 (&base)[NS])
{
    float sn, cs;
    sincospif(2.0f * static_cast<float>(b0 << s0) / static_cast<float>(n), &sn, &cs);  // exact phase
    base[0] = make_float2(cs, inverse ? sn : -sn);
#pragma unroll
    for (int t = 1; t < NS; ++t) base[t] = cmul(base[t - 1], base[t - 1]);
}

struct keep {
    __device__ float2 operator()(int, float2 v) const { return v; }
};

/// Decimation-in-frequency radix-2 stages s0 .. s0 + NS - 1 (stage s: pairs (i, i + h), h =
/// N >> (s + 1), (u, v) -> (u + v, (u - v) W^((i mod h) 2^s))), in place, the NS stages of a
/// group of 2^NS elements in registers. `store(i, v)` maps each value on its way out.
template <int NS, bool inverse, class Store>
__device__ __forceinline__ void dif_stages(float2* a, int s0, Store store)
{
    constexpr int G = 1 << NS;
    const int hmin = n >> (s0 + NS);
    for (int g = threadIdx.x; g < n / G; g += blockDim.x) {
        const int base = (g / hmin) * (hmin * G) + (g % hmin);
        float2 x[G], tw[NS];
#pragma unroll
        for (int j = 0; j < G; ++j) x[j] = a[pad(base + j * hmin)];
        group_twiddles<NS, inverse>(g % hmin, s0, tw);
#pragma unroll
        for (int t = 0; t < NS; ++t) {
            const int hj = G >> (t + 1);
#pragma unroll
            for (int j = 0; j < G; ++j) {
                if (j & hj) continue;
                const float2 u = x[j], v = x[j + hj];
                const float2 d = make_float2(u.x - v.x, u.y - v.y);
                x[j] = make_float2(u.x + v.x, u.y + v.y);
                x[j + hj] = cmul(d, (j % hj) == 0 ? tw[t] : cmul(tw[t], root<inverse, G>((j % hj) << t)));
            }
        }
#pragma unroll
        for (int j = 0; j < G; ++j) {
            const int i = base + j * hmin;
            a[pad(i)] = store(i, x[j]);
        }
    }
}

/// Decimation-in-time radix-2 stages s0 + NS - 1 down to s0 ((u, v) -> (u + W v, u - W v),
/// the same W as above): the transpose of dif_stages.
template <int NS, bool inverse, class Store>
__device__ __forceinline__ void dit_stages(float2* a, int s0, Store store)
{
    constexpr int G = 1 << NS;
    const int hmin = n >> (s0 + NS);
    for (int g = threadIdx.x; g < n / G; g += blockDim.x) {
        const int base = (g / hmin) * (hmin * G) + (g % hmin);
        float2 x[G], tw[NS];
#pragma unroll
        for (int j = 0; j < G; ++j) x[j] = a[pad(base + j * hmin)];
        group_twiddles<NS, inverse>(g % hmin, s0, tw);
#pragma unroll
        for (int t = NS - 1; t >= 0; --t) {
            const int hj = G >> (t + 1);
#pragma unroll
            for (int j = 0; j < G; ++j) {
                if (j & hj) continue;
                const float2 u = x[j], v = cmul(x[j + hj], (j % hj) == 0 ? tw[t] : cmul(tw[t], root<inverse, G>((j % hj) << t)));
                x[j] = make_float2(u.x + v.x, u.y + v.y);
                x[j + hj] = make_float2(u.x - v.x, u.y - v.y);
            }
        }
#pragma unroll
        for (int j = 0; j < G; ++j) {
            const int i = base + j * hmin;
            a[pad(i)] = store(i, x[j]);
        }
    }
}

/// Natural order in, bit-reversed order out (position q holds bin bitrev(q)); `store(q, v)`
/// on the last stages' way out.
template <bool inverse, class Store>
__device__ __forceinline__ void dif(float2* a, Store store)
{
    dif_stages<4, inverse>(a, 0, keep{});
    __syncthreads();
    dif_stages<4, inverse>(a, 4, keep{});
    __syncthreads();
    dif_stages<4, inverse>(a, 8, keep{});
    __syncthreads();
    dif_stages<2, inverse>(a, 12, store);
    __syncthreads();
}

/// Bit-reversed order in, natural order out; `store(k, v)` on the last stages' way out.
template <bool inverse, class Store>
__device__ __forceinline__ void dit(float2* a, Store store)
{
    dit_stages<2, inverse>(a, 12, keep{});
    __syncthreads();
    dit_stages<4, inverse>(a, 8, keep{});
    __syncthreads();
    dit_stages<4, inverse>(a, 4, keep{});
    __syncthreads();
    dit_stages<4, inverse>(a, 0, store);
    __syncthreads();
}

/// One block per packet; the steps of dsp::cma_refine:
///   C = FFT(taps) (taps placed bit-reversed, DIT) -> x R -> IFFT (DIF, bit-reversed out) ->
///   z = 2 (|y|^2 - 1) y on the packet, 0 elsewhere -> FFT (DIT) -> x conj(R) -> IFFT (DIF)
///   -> c(l) -= scale b(l mod N).
__global__ void __launch_bounds__(threads, 1) cma_kernel(const float2* __restrict__ r_spec, float2* __restrict__ taps, int iterations,
                                                         float scale, int pre, int l_pkt)
{
    extern __shared__ float2 sm[];
    float2* a = sm;
    float2* c = sm + padded;
    const int p = blockIdx.x;
    const float2* r = r_spec + static_cast<std::size_t>(p) * n;
    for (int i = threadIdx.x; i < l_eq; i += blockDim.x) c[i] = taps[static_cast<std::size_t>(p) * l_eq + i];
    const float inv_n = 1.0f / static_cast<float>(n);
    for (int it = 0; it < iterations; ++it) {
        for (int i = threadIdx.x; i < n; i += blockDim.x) a[pad(i)] = make_float2(0.0f, 0.0f);
        __syncthreads();
        for (int i = threadIdx.x; i < l_eq; i += blockDim.x) a[pad(bitrev((i - l1 + n) % n))] = c[i];
        __syncthreads();
        dit<false>(a, [r](int k, float2 v) { return cmul(v, r[k]); });
        dif<true>(a, [=](int q, float2 v) {
            const int t = bitrev(q);
            if (t < pre || t >= pre + l_pkt) return make_float2(0.0f, 0.0f);
            const float2 y = make_float2(v.x * inv_n, v.y * inv_n);
            const float g = 2.0f * (y.x * y.x + y.y * y.y - 1.0f);
            return make_float2(g * y.x, g * y.y);
        });
        dit<false>(a, [r](int k, float2 v) { return cmul_conj(v, r[k]); });
        dif<true>(a, keep{});
        for (int i = threadIdx.x; i < l_eq; i += blockDim.x) {
            const float2 b = a[pad(bitrev((i - l1 + n) % n))];
            c[i] = make_float2(c[i].x - scale * b.x, c[i].y - scale * b.y);
        }
        __syncthreads();
    }
    for (int i = threadIdx.x; i < l_eq; i += blockDim.x) taps[static_cast<std::size_t>(p) * l_eq + i] = c[i];
}

}  // namespace

void cma_refine_device(const cf32* r_spec, cf32* taps, std::size_t packets, std::size_t pre, double mu, int iterations,
                       cuda_stream_t stream)
{
    if (iterations < 0) throw std::invalid_argument("gpu cma: iterations must be >= 0");
    if (packets == 0 || iterations == 0) return;
    static_assert(sizeof(cf32) == sizeof(float2));
    // Per device, once: the kernel needs more than the default 48 KB of shared memory.
    PAQ_CUDA_CHECK(cudaFuncSetAttribute(cma_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem_bytes)));
    const float scale = static_cast<float>(mu / (static_cast<double>(n) * static_cast<double>(waveform::L_pkt)));
    cma_kernel<<<static_cast<unsigned>(packets), threads, smem_bytes, stream>>>(reinterpret_cast<const float2*>(r_spec),
                                                                              reinterpret_cast<float2*>(taps), iterations, scale,
                                                                              static_cast<int>(pre), static_cast<int>(waveform::L_pkt));
    PAQ_CUDA_CHECK_LAUNCH();
}

std::vector<cf32> cma_refine(std::span<const cf32> r_spec, std::span<const cf32> taps, std::size_t packets, std::size_t pre, double mu,
                             int iterations, int device)
{
    if (r_spec.size() != packets * cma_fft_size || taps.size() != packets * static_cast<std::size_t>(l_eq)) {
        throw std::invalid_argument("gpu cma: r_spec must hold packets x 16384 and taps packets x 186 values");
    }
    PAQ_CUDA_CHECK(cudaSetDevice(select_device(device)));
    device_buffer<cf32> r(r_spec.size()), c(taps.size());
    stream st;
    PAQ_CUDA_CHECK(cudaMemcpyAsync(r.data(), r_spec.data(), r_spec.size_bytes(), cudaMemcpyHostToDevice, st.get()));
    PAQ_CUDA_CHECK(cudaMemcpyAsync(c.data(), taps.data(), taps.size_bytes(), cudaMemcpyHostToDevice, st.get()));
    cma_refine_device(r.data(), c.data(), packets, pre, mu, iterations, st.get());
    std::vector<cf32> out(taps.size());
    PAQ_CUDA_CHECK(cudaMemcpyAsync(out.data(), c.data(), taps.size_bytes(), cudaMemcpyDeviceToHost, st.get()));
    st.synchronize();
    return out;
}

}  // namespace paq::gpu
