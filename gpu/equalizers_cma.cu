#include "gpu/equalizers.hpp"

#include "dsp/receiver_tables.hpp"
#include "dsp/waveform.hpp"
#include "gpu/device.hpp"
#include "gpu/resources.cuh"
#include "gpu/smem_fft.cuh"

#include <stdexcept>
#include <string>

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
// One transform's array and one channel's taps: both kernels' (cma2_kernel keeps the taps of
// its two channels in registers and puts one channel's here at a time).
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

/// A CMA step's error on the filtered segment y (the shared array, as the forward transform
/// left it, spectrum in natural order): the inverse transform (DIF, bit-reversed out) with
/// z = 2 (|y|^2 - 1) y on the packet [pre, pre + l_pkt) and 0 elsewhere left in its place.
/// Returns the cost sum (|y|^2 - 1)^2 and the block's power_part summed, in every thread.
__device__ __forceinline__ float2 cma_error(float2* a, int pre, int l_pkt, float power_part, float2* red)
{
    const float inv_n = 1.0f / static_cast<float>(n);
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
    return block_sum(make_float2(cost_part, power_part), red);
}

/// The step over the segment's mean power, sum |R|^2 / (n seg_len) (dsp::segment_mean_power):
/// scale divided by it; false for a power that is not positive and finite.
__device__ __forceinline__ bool step_over_power(float power_sum, int seg_len, float& scale)
{
    const float power = power_sum / (static_cast<float>(n) * static_cast<float>(seg_len));
    if (!(power > 0.0f) || !isfinite(power)) return false;
    scale /= power;
    return true;
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
        const float2 sums = cma_error(a, pre, l_pkt, power_part, red);  // the same in every thread
        if (it == 0 && !step_over_power(sums.y, seg_len, scale)) break;  // an empty segment: the MMSE taps stand
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

/// Two receive channels, one block per packet; the steps of dsp::cma_refine over both:
///   C_c = FFT(taps_c) (dit_of_taps, one channel after the other) -> Y = C_0 R_0 + C_1 R_1 ->
///   IFFT (DIF) -> z as cma_kernel -> FFT (DIT) -> Z conj(R_0) -> IFFT (DIF to the blocks) ->
///   c_0(l) -= scale b_0(l mod N); then Z conj(R_1) -> IFFT (DIF to the blocks) -> c_1(l) -=
///   scale b_1(l mod N).
/// The shared array holds one transform, so what one transform leaves for a later one goes
/// through `scratch` (packets x 16384 in global memory, natural order, bin k at k): C_0 R_0,
/// stored as the first forward transform leaves it and added as the second leaves C_1 R_1;
/// Z, stored as the DIT of z leaves it and read back, times conj(R_1), into the shared array
/// for the second gradient. The shared memory is cma_kernel's: its tap array holds the taps
/// of the channel being transformed (or the gradient's 186 bins), while both channels' taps,
/// and those before the last step, stay in the registers of threads 0 .. 185 (thread l:
/// the tap at time l - L1 of each).
__global__ void __launch_bounds__(threads, 1)
    cma2_kernel(const float2* __restrict__ r0_spec, const float2* __restrict__ r1_spec, float2* __restrict__ taps0,
                float2* __restrict__ taps1, float2* scratch, int iterations, float scale, int pre, int l_pkt, int seg_len,
                float2* __restrict__ start0_spectrum, float2* __restrict__ start1_spectrum)
{
    extern __shared__ float2 sm[];
    float2* a = sm;
    float2* c = sm + padded;
    const int p = blockIdx.x;
    const std::size_t at = static_cast<std::size_t>(p) * n;
    const float2* r0 = r0_spec + at;
    const float2* r1 = r1_spec + at;
    float2* s = scratch + at;
    static_assert(threads >= l_eq);
    const int l = static_cast<int>(threadIdx.x);
    const bool holds = l < l_eq;
    const std::size_t tap_at = static_cast<std::size_t>(p) * l_eq + static_cast<std::size_t>(holds ? l : 0);
    float2 tap0 = holds ? taps0[tap_at] : make_float2(0.0f, 0.0f);
    float2 tap1 = holds ? taps1[tap_at] : make_float2(0.0f, 0.0f);
    __shared__ float2 red[threads / 32];
    // A step stands only if the next finds the CMA cost no higher: for both channels, the
    // taps before it are kept.
    float2 previous0 = tap0, previous1 = tap1;
    float previous_cost = INFINITY;
    // The 186 bins of the gradient in the shared array that dif_to_blocks left, into the tap
    // array (a warp a bin, as cma_kernel), for thread l to step its tap.
    auto gradient_bins = [a, c]() {
        smem_fft::dif_to_blocks<log_n, true, bitrev_reads>(a);
        for (int i = static_cast<int>(threadIdx.x) / 32; i < l_eq; i += threads / 32) {
            const float2 b = smem_fft::dif_bin_near_zero<log_n, true, bitrev_reads>(a, i - l1);
            if (threadIdx.x % 32 == 0) c[i] = b;
        }
        __syncthreads();
    };
    for (int it = 0; it < iterations; ++it) {
        // The step over the channels' summed mean power (as cma_kernel), summed as the first
        // step's two forward transforms read R_0 and R_1.
        float power_part = 0.0f;
        if (holds) c[l] = tap0;
        __syncthreads();  // the transform reads every tap
        if (it == 0) {
            float2* start = start0_spectrum ? start0_spectrum + at : nullptr;
            smem_fft::dit_of_taps<log_n, false, bitrev_reads>(a, c, l_eq, -l1, [r0, s, start, &power_part](int k, float2 v) {
                if (start) start[k] = v;
                const float2 rk = r0[k];
                power_part += rk.x * rk.x + rk.y * rk.y;
                s[k] = cmul(v, rk);
                return v;
            });
        } else {
            smem_fft::dit_of_taps<log_n, false, bitrev_reads>(a, c, l_eq, -l1, [r0, s](int k, float2 v) {
                s[k] = cmul(v, r0[k]);
                return v;
            });
        }
        // The transform has read the taps (and ended with __syncthreads): channel 1's in their place.
        if (holds) c[l] = tap1;
        __syncthreads();
        if (it == 0) {
            float2* start = start1_spectrum ? start1_spectrum + at : nullptr;
            smem_fft::dit_of_taps<log_n, false, bitrev_reads>(a, c, l_eq, -l1, [r1, s, start, &power_part](int k, float2 v) {
                if (start) start[k] = v;
                const float2 rk = r1[k];
                power_part += rk.x * rk.x + rk.y * rk.y;
                const float2 y1 = cmul(v, rk), y0 = s[k];
                return make_float2(y0.x + y1.x, y0.y + y1.y);
            });
        } else {
            smem_fft::dit_of_taps<log_n, false, bitrev_reads>(a, c, l_eq, -l1, [r1, s](int k, float2 v) {
                const float2 y1 = cmul(v, r1[k]), y0 = s[k];
                return make_float2(y0.x + y1.x, y0.y + y1.y);
            });
        }
        const float2 sums = cma_error(a, pre, l_pkt, power_part, red);  // the same in every thread
        if (it == 0 && !step_over_power(sums.y, seg_len, scale)) break;  // an empty segment: the MMSE taps stand
        const float cost = sums.x;
        if (!(cost <= previous_cost)) {
            tap0 = previous0;
            tap1 = previous1;
            break;
        }
        previous_cost = cost;
        previous0 = tap0;
        previous1 = tap1;
        // Z to scratch on its way out of the transform: the second gradient's product needs it.
        smem_fft::dit<log_n, false, bitrev_reads>(a, [r0, s](int k, float2 v) {
            s[k] = v;
            return cmul_conj(v, r0[k]);
        });
        gradient_bins();
        if (holds) tap0 = make_float2(tap0.x - scale * c[l].x, tap0.y - scale * c[l].y);
        // Z conj(R_1) where the DIT leaves bin k, a[pad(k)] (natural order), as input to the same
        // transform. gradient_bins ended with __syncthreads: nobody reads the array any more.
        for (int k = static_cast<int>(threadIdx.x); k < n; k += threads) a[smem_fft::pad<bitrev_reads>(k)] = cmul_conj(s[k], r1[k]);
        __syncthreads();
        gradient_bins();
        if (holds) tap1 = make_float2(tap1.x - scale * c[l].x, tap1.y - scale * c[l].y);
        // Thread l alone reads c[l] for its tap; the next step's first write there is its own.
    }
    if (holds) {
        taps0[tap_at] = tap0;
        taps1[tap_at] = tap1;
    }
}

/// The step of dsp::cma_refine before the segment's power divides it: mu / (N L_pkt).
float step_scale(double mu) { return static_cast<float>(mu / (static_cast<double>(n) * static_cast<double>(waveform::L_pkt))); }

}  // namespace

void cma_setup_device()
{
    PAQ_CUDA_CHECK(cudaFuncSetAttribute(cma_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem_bytes)));
    PAQ_CUDA_CHECK(cudaFuncSetAttribute(cma2_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem_bytes)));
}

void cma_refine_device(const cf32* r_spec, cf32* taps, std::size_t packets, std::size_t pre, double mu, int iterations,
                       cuda_stream_t stream, cf32* start_spectrum)
{
    if (iterations < 0) throw std::invalid_argument("gpu cma: iterations must be >= 0");
    if (packets == 0 || iterations == 0) return;
    static_assert(sizeof(cf32) == sizeof(float2));
    const float scale = step_scale(mu);
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

void cma_refine_device(std::array<const cf32*, 2> r_spec, std::array<cf32*, 2> taps, cf32* scratch, std::size_t packets,
                       std::size_t pre, double mu, int iterations, cuda_stream_t stream, std::array<cf32*, 2> start_spectrum)
{
    if (iterations < 0) throw std::invalid_argument("gpu cma: iterations must be >= 0");
    if (packets == 0 || iterations == 0) return;
    static_assert(sizeof(cf32) == sizeof(float2));
    cma2_kernel<<<static_cast<unsigned>(packets), threads, smem_bytes, stream>>>(
        reinterpret_cast<const float2*>(r_spec[0]), reinterpret_cast<const float2*>(r_spec[1]), reinterpret_cast<float2*>(taps[0]),
        reinterpret_cast<float2*>(taps[1]), reinterpret_cast<float2*>(scratch), iterations, step_scale(mu), static_cast<int>(pre),
        static_cast<int>(waveform::L_pkt), static_cast<int>(waveform::L_pkt + 2 * pre), reinterpret_cast<float2*>(start_spectrum[0]),
        reinterpret_cast<float2*>(start_spectrum[1]));
    PAQ_CUDA_CHECK_LAUNCH();
}

std::vector<cf32> cma_refine(std::array<std::span<const cf32>, 2> r_spec, std::array<std::span<const cf32>, 2> taps,
                             std::size_t packets, std::size_t pre, double mu, int iterations, int device)
{
    const std::size_t spectrum_values = packets * cma_fft_size, tap_values = packets * static_cast<std::size_t>(l_eq);
    for (std::size_t ch = 0; ch < 2; ++ch) {
        const std::string channel = "gpu cma: channel " + std::to_string(ch + 1) + "'s ";
        if (r_spec[ch].size() != spectrum_values) {
            throw std::invalid_argument(channel + "r_spec must hold packets x 16384 = " + std::to_string(spectrum_values) +
                                        " values, not " + std::to_string(r_spec[ch].size()));
        }
        if (taps[ch].size() != tap_values) {
            throw std::invalid_argument(channel + "taps must hold packets x 186 = " + std::to_string(tap_values) + " values, not " +
                                        std::to_string(taps[ch].size()));
        }
    }
    PAQ_CUDA_CHECK(cudaSetDevice(select_device(device)));
    cma_setup_device();
    device_buffer<cf32> r0(spectrum_values), r1(spectrum_values), c0(tap_values), c1(tap_values), scratch(spectrum_values);
    stream st;
    PAQ_CUDA_CHECK(cudaMemcpyAsync(r0.data(), r_spec[0].data(), r_spec[0].size_bytes(), cudaMemcpyHostToDevice, st.get()));
    PAQ_CUDA_CHECK(cudaMemcpyAsync(r1.data(), r_spec[1].data(), r_spec[1].size_bytes(), cudaMemcpyHostToDevice, st.get()));
    PAQ_CUDA_CHECK(cudaMemcpyAsync(c0.data(), taps[0].data(), taps[0].size_bytes(), cudaMemcpyHostToDevice, st.get()));
    PAQ_CUDA_CHECK(cudaMemcpyAsync(c1.data(), taps[1].data(), taps[1].size_bytes(), cudaMemcpyHostToDevice, st.get()));
    cma_refine_device({r0.data(), r1.data()}, {c0.data(), c1.data()}, scratch.data(), packets, pre, mu, iterations, st.get());
    std::vector<cf32> out(2 * tap_values);
    PAQ_CUDA_CHECK(cudaMemcpyAsync(out.data(), c0.data(), taps[0].size_bytes(), cudaMemcpyDeviceToHost, st.get()));
    PAQ_CUDA_CHECK(cudaMemcpyAsync(out.data() + tap_values, c1.data(), taps[1].size_bytes(), cudaMemcpyDeviceToHost, st.get()));
    st.synchronize();
    return out;
}

}  // namespace paq::gpu
