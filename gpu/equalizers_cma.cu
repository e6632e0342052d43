#include "gpu/equalizers.hpp"

#include "dsp/receiver_tables.hpp"
#include "dsp/waveform.hpp"
#include "gpu/device.hpp"
#include "gpu/resources.cuh"
#include "gpu/smem_fft.cuh"

#include <stdexcept>

namespace paq::gpu {

namespace {

constexpr int n = static_cast<int>(cma_fft_size);
constexpr int log_n = 14;
static_assert(n == 1 << log_n);
constexpr int threads = 512;
constexpr int l_eq = dsp::chain::L_eq;
constexpr int l1 = dsp::chain::L1;
constexpr bool bitrev_reads = false;  // only the 186 taps' bins are read from the bit-reversed output
static_assert(l1 <= smem_fft::near_zero_span && l_eq - l1 <= smem_fft::near_zero_span && threads % 64 == 0,
              "the taps within 256 of time 0 (smem_fft::dit_of_taps, dif_bin_near_zero)");
constexpr int padded = smem_fft::padded_size(n, bitrev_reads);
constexpr std::size_t smem_bytes = (static_cast<std::size_t>(padded) + l_eq) * sizeof(float2);
static_assert(smem_bytes <= backend_shared_memory_bytes);

using smem_fft::bitrev;
using smem_fft::cmul;
using smem_fft::cmul_conj;
using smem_fft::keep;

/// The sums of v.x and v.y over the block, in every thread (the same order, so the same value).
/// red: threads / 32 values of shared memory.
__device__ float2 block_sum(float2 v, float2* red)
{
    for (int off = 16; off > 0; off >>= 1) {
        v.x += __shfl_down_sync(0xffffffffu, v.x, off);
        v.y += __shfl_down_sync(0xffffffffu, v.y, off);
    }
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
    __syncthreads();
    float2 sum = make_float2(0.0f, 0.0f);
    for (int w = 0; w < threads / 32; ++w) sum = make_float2(sum.x + red[w].x, sum.y + red[w].y);
    __syncthreads();
    return sum;
}

/// One block per packet; the steps of dsp::cma_refine:
///   C = FFT(taps) (DIT of the taps, smem_fft::dit_of_taps) -> x R -> IFFT (DIF, bit-reversed
///   out) -> z = 2 (|y|^2 - 1) y on the packet, 0 elsewhere -> FFT (DIT) -> x conj(R) -> IFFT
///   (DIF to the blocks of 64, then only the taps' bins) -> c(l) -= scale b(l mod N).
/// Of the 56 stages of a step's four transforms, the 12 that would work on the taps' zeros
/// or on bins nobody reads are not run.
__global__ void __launch_bounds__(threads, 1) cma_kernel(const float2* __restrict__ r_spec, float2* __restrict__ taps, int iterations,
                                                         float scale, int pre, int l_pkt, int seg_len, float2* __restrict__ start_spectrum)
{
    extern __shared__ float2 sm[];
    float2* a = sm;
    float2* c = sm + padded;
    const int p = blockIdx.x;
    const float2* r = r_spec + static_cast<std::size_t>(p) * n;
    for (int i = threadIdx.x; i < l_eq; i += blockDim.x) c[i] = taps[static_cast<std::size_t>(p) * l_eq + i];
    __syncthreads();  // the first transform reads every tap
    // The step over the segment's mean power, sum |R|^2 / (n seg_len) (dsp::segment_mean_power),
    // so the same taps and bits at any input level; summed as the first product with R reads R.
    __shared__ float2 red[threads / 32];
    const float inv_n = 1.0f / static_cast<float>(n);
    // A step stands only if the next finds the CMA cost no higher (dsp::cma_refine says why).
    static_assert(threads >= l_eq);
    float2 previous = threadIdx.x < l_eq ? c[threadIdx.x] : make_float2(0.0f, 0.0f);
    float previous_cost = INFINITY;
    for (int it = 0; it < iterations; ++it) {
        float power_part = 0.0f;
        if (it == 0) {
            float2* start = start_spectrum ? start_spectrum + static_cast<std::size_t>(p) * n : nullptr;
            smem_fft::dit_of_taps<log_n, false, bitrev_reads>(a, c, l_eq, -l1, [r, start, &power_part](int k, float2 v) {
                if (start) start[k] = v;  // the start taps' spectrum C
                const float2 rk = r[k];
                power_part += rk.x * rk.x + rk.y * rk.y;
                return cmul(v, rk);
            });
        } else {
            smem_fft::dit_of_taps<log_n, false, bitrev_reads>(a, c, l_eq, -l1, [r](int k, float2 v) { return cmul(v, r[k]); });
        }
        float cost_part = 0.0f;
        smem_fft::dif<log_n, true, bitrev_reads>(a, [=, &cost_part](int q, float2 v) {
            const int t = bitrev<log_n>(q);
            if (t < pre || t >= pre + l_pkt) return make_float2(0.0f, 0.0f);
            const float2 y = make_float2(v.x * inv_n, v.y * inv_n);
            const float e = y.x * y.x + y.y * y.y - 1.0f;
            cost_part += e * e;
            const float g = 2.0f * e;
            return make_float2(g * y.x, g * y.y);
        });
        const float2 sums = block_sum(make_float2(cost_part, power_part), red);  // the same in every thread
        if (it == 0) {
            const float power = sums.y / (static_cast<float>(n) * static_cast<float>(seg_len));
            if (!(power > 0.0f) || !isfinite(power)) break;  // an empty segment: the MMSE taps stand
            scale /= power;
        }
        const float cost = sums.x;
        if (!(cost <= previous_cost)) {
            if (threadIdx.x < l_eq) c[threadIdx.x] = previous;
            __syncthreads();
            break;
        }
        previous_cost = cost;
        if (threadIdx.x < l_eq) previous = c[threadIdx.x];
        smem_fft::dit<log_n, false, bitrev_reads>(a, [r](int k, float2 v) { return cmul_conj(v, r[k]); });
        // Only the taps' 186 bins of the gradient are read: a warp a bin from the blocks of 64.
        smem_fft::dif_to_blocks<log_n, true, bitrev_reads>(a);
        for (int i = static_cast<int>(threadIdx.x) / 32; i < l_eq; i += threads / 32) {
            const float2 b = smem_fft::dif_bin_near_zero<log_n, true, bitrev_reads>(a, i - l1);
            if (threadIdx.x % 32 == 0) c[i] = make_float2(c[i].x - scale * b.x, c[i].y - scale * b.y);
        }
        __syncthreads();
    }
    for (int i = threadIdx.x; i < l_eq; i += blockDim.x) taps[static_cast<std::size_t>(p) * l_eq + i] = c[i];
}

}  // namespace

void cma_setup_device()
{
    PAQ_CUDA_CHECK(cudaFuncSetAttribute(cma_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem_bytes)));
}

void cma_refine_device(const cf32* r_spec, cf32* taps, std::size_t packets, std::size_t pre, double mu, int iterations,
                       cuda_stream_t stream, cf32* start_spectrum)
{
    if (iterations < 0) throw std::invalid_argument("gpu cma: iterations must be >= 0");
    if (packets == 0 || iterations == 0) return;
    static_assert(sizeof(cf32) == sizeof(float2));
    const float scale = static_cast<float>(mu / (static_cast<double>(n) * static_cast<double>(waveform::L_pkt)));
    cma_kernel<<<static_cast<unsigned>(packets), threads, smem_bytes, stream>>>(reinterpret_cast<const float2*>(r_spec),
                                                                              reinterpret_cast<float2*>(taps), iterations, scale,
                                                                              static_cast<int>(pre), static_cast<int>(waveform::L_pkt),
                                                                              static_cast<int>(waveform::L_pkt + 2 * pre),
                                                                              reinterpret_cast<float2*>(start_spectrum));
    PAQ_CUDA_CHECK_LAUNCH();
}

std::vector<cf32> cma_refine(std::span<const cf32> r_spec, std::span<const cf32> taps, std::size_t packets, std::size_t pre, double mu,
                             int iterations, int device)
{
    if (r_spec.size() != packets * cma_fft_size || taps.size() != packets * static_cast<std::size_t>(l_eq)) {
        throw std::invalid_argument("gpu cma: r_spec must hold packets x 16384 and taps packets x 186 values");
    }
    PAQ_CUDA_CHECK(cudaSetDevice(select_device(device)));
    cma_setup_device();
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
