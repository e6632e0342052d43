// The six filter paths on the GPU (gpu/paths.cuh): the CUDA side of the CPU backend's
// per-path filter (dsp/cpu_backend.cpp: R x C x H_NO, inverse transform, decision samples).
#include "gpu/paths.cuh"

#include "dsp/detector.hpp"
#include "dsp/receiver_tables.hpp"
#include "dsp/trellis.hpp"
#include "dsp/waveform.hpp"
#include "gpu/cuda_check.hpp"
#include "gpu/device.hpp"
#include "gpu/estimators.hpp"
#include "gpu/smem_fft.cuh"

#include <cstddef>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace paq::gpu {

namespace {

using namespace dsp::chain;
constexpr int n_fft = static_cast<int>(estimators::segment_stride);
constexpr int n_bits = static_cast<int>(waveform::packet_bits);

__device__ inline double freq_of_bin(int k) { return (k < n_fft / 2 ? k : k - n_fft) / static_cast<double>(n_fft); }

/// The detector needs y(n) only at n = 2m + parity (one sample per bit). With N = 16384,
/// y(2m + d) = (1/N) sum_{k < N/2} Y'(k) exp(+j 2 pi k m / (N/2)) where
/// Y'(k) = (Y(k) + (-1)^d Y(k + N/2)) exp(+j 2 pi k d / N): an N/2-point inverse FFT of the
/// folded spectrum gives every decision sample, at half the cost of the full one.
__device__ inline float2 fold_bins(float2 lo, float2 hi, int k, int parity)
{
    if (parity == 0) return make_float2(lo.x + hi.x, lo.y + hi.y);
    float sn, cs;
    sincospif(2.0f * static_cast<float>(k) / static_cast<float>(n_fft), &sn, &cs);
    return smem_fft::cmul(make_float2(lo.x - hi.x, lo.y - hi.y), make_float2(cs, sn));
}

/// The equalizer of one path at bin k (i = p N + k): the taps' spectrum (ZF, MMSE, CMA), the
/// single path's inverse exp(j 2 pi f tau) / g (none), or the FDE formula on H (FDE1, FDE2).
template <int path>
__device__ inline float2 path_coefficient(std::size_t i, int k, const float2* __restrict__ spec,
                                          const float2* __restrict__ hspec, const float* __restrict__ psi, float noise, double tau,
                                          cuDoubleComplex inv_gain)
{
    if constexpr (path == 0) {
        double sn, cs;
        sincos(2.0 * 3.14159265358979323846 * freq_of_bin(k) * tau, &sn, &cs);
        const cuDoubleComplex v = cuCmul(inv_gain, make_cuDoubleComplex(cs, sn));
        return make_float2(static_cast<float>(v.x), static_cast<float>(v.y));
    } else if constexpr (path == 4 || path == 5) {
        const float2 hk = hspec[i];
        const float den = hk.x * hk.x + hk.y * hk.y + (path == 5 ? noise / psi[k] : noise);
        return den > 0.0f ? make_float2(hk.x / den, -hk.y / den) : make_float2(0.0f, 0.0f);
    } else {
        // Each tap spectrum is read once: streamed (evict first), as the output is written.
        return __ldcs(spec + i);
    }
}

/// What the paths of one packet read: its R, the filter (H_NO, or the trellis's LP), the tap
/// spectra, H, Psi; and the packet's own terms (noise, the single path's delay and 1 / gain).
struct path_inputs {
    const float2* __restrict__ r;
    const float2* __restrict__ filter;
    const float2* __restrict__ spec_zf;
    const float2* __restrict__ spec_mmse;
    const float2* __restrict__ spec_cma;
    const float2* __restrict__ hspec;
    const float* __restrict__ psi;
};
struct packet_terms {
    std::size_t row;  ///< the packet's first bin in r, the tap spectra and H
    float noise;
    double tau;
    cuDoubleComplex inv_gain;
};

__device__ inline packet_terms packet_terms_of(int p, const double* __restrict__ sigma2, const double* __restrict__ tau,
                                               const cuDoubleComplex* __restrict__ gain)
{
    const cuDoubleComplex g = gain[p];
    const double gg = g.x * g.x + g.y * g.y;
    return {static_cast<std::size_t>(p) * n_fft, static_cast<float>(2.0 * sigma2[p]), tau[p],
            gg > 0.0 ? make_cuDoubleComplex(g.x / gg, -g.y / gg) : make_cuDoubleComplex(0.0, 0.0)};
}

/// R x C x filter of path `path` at bin k of the packet (spec: the path's tap spectrum, for
/// ZF, MMSE and CMA).
template <int path>
__device__ __forceinline__ float2 path_product(const path_inputs& in, const packet_terms& t, const float2* __restrict__ spec, int k)
{
    return smem_fft::cmul(smem_fft::cmul(in.r[t.row + k], in.filter[k]),
                          path_coefficient<path>(t.row + k, k, spec, in.hspec, in.psi, t.noise, t.tau, t.inv_gain));
}

/// Two receive channels (dsp/combining.hpp): each path's equalizer on each channel, the
/// outputs added. What the second channel adds to path_inputs, and each packet's combining
/// terms: the channels' weights w_c (dsp::combining_weights), 2 sigma2 of the quieter channel
/// (the FDE combiners' noise), each channel's single path delay and maximal-ratio coefficient
/// (dsp::mrc_single_path_response: w_c f_c g_c* / sum_d w_d f_d |g_d|^2).
struct second_inputs {
    const float2* __restrict__ r;
    const float2* __restrict__ spec_mmse;
    const float2* __restrict__ spec_cma;
    const float2* __restrict__ hspec;
    const double* __restrict__ weight;  ///< 2 per packet
    const double* __restrict__ noise;   ///< per packet
    const double* __restrict__ tau;     ///< per packet: channel 2's single path delay
    const cuDoubleComplex* __restrict__ mrc;  ///< 2 per packet
};
struct pair_terms {
    float w0, w1, noise;
    double tau1;
    cuDoubleComplex mrc0, mrc1;
};

__device__ inline pair_terms pair_terms_of(int p, const second_inputs& two)
{
    return {static_cast<float>(two.weight[2 * p]), static_cast<float>(two.weight[2 * p + 1]), static_cast<float>(two.noise[p]), two.tau[p],
            two.mrc[2 * p], two.mrc[2 * p + 1]};
}

/// mrc exp(j 2 pi f tau) at bin k, in double (the unequalized path's combiner on one channel).
__device__ inline float2 single_path_at(int k, double tau, cuDoubleComplex mrc)
{
    double sn, cs;
    sincos(2.0 * 3.14159265358979323846 * freq_of_bin(k) * tau, &sn, &cs);
    const cuDoubleComplex v = cuCmul(mrc, make_cuDoubleComplex(cs, sn));
    return make_float2(static_cast<float>(v.x), static_cast<float>(v.y));
}

/// path_product over two channels: sum_c R_c x C_c x filter (dsp::cpu_backend's combined
/// responses): none, the channels' single paths by maximal-ratio combining; ZF, w_c H_c* times
/// the combined channel's ZF spectrum (spec); MMSE and CMA, each channel's taps' spectrum;
/// FDE1 and FDE2, w_c H_c* / (sum_d w_d |H_d|^2 + 2 sigma2_min / Psi).
template <int path>
__device__ __forceinline__ float2 path_product2(const path_inputs& in, const packet_terms& t, const second_inputs& two, const pair_terms& q,
                                                const float2* __restrict__ spec, int k)
{
    const std::size_t i = t.row + k;
    float2 c0, c1;
    if constexpr (path == 0) {
        c0 = single_path_at(k, t.tau, q.mrc0);
        c1 = single_path_at(k, q.tau1, q.mrc1);
    } else if constexpr (path == 1) {
        const float2 z = __ldcs(spec + i), h0 = in.hspec[i], h1 = two.hspec[i];
        c0 = smem_fft::cmul(make_float2(q.w0 * h0.x, -q.w0 * h0.y), z);
        c1 = smem_fft::cmul(make_float2(q.w1 * h1.x, -q.w1 * h1.y), z);
    } else if constexpr (path == 2) {
        c0 = __ldcs(spec + i);
        c1 = __ldcs(two.spec_mmse + i);
    } else if constexpr (path == 3) {
        c0 = __ldcs(spec + i);
        c1 = __ldcs(two.spec_cma + i);
    } else {
        const float2 h0 = in.hspec[i], h1 = two.hspec[i];
        const float den = q.w0 * (h0.x * h0.x + h0.y * h0.y) + q.w1 * (h1.x * h1.x + h1.y * h1.y) + (path == 5 ? q.noise / in.psi[k] : q.noise);
        const float inv = den > 0.0f ? 1.0f / den : 0.0f;
        c0 = make_float2(q.w0 * h0.x * inv, -q.w0 * h0.y * inv);
        c1 = make_float2(q.w1 * h1.x * inv, -q.w1 * h1.y * inv);
    }
    const float2 y0 = smem_fft::cmul(in.r[i], c0), y1 = smem_fft::cmul(two.r[i], c1);
    return smem_fft::cmul(make_float2(y0.x + y1.x, y0.y + y1.y), in.filter[k]);
}

/// body(path as a compile-time constant, the path's tap spectrum or null) for a runtime path.
/// A switch, not six inlined copies: six copies made the paths kernel 2.4x larger and the stage
/// 3.80 ms instead of 3.30 on the H100 (a350130).
template <class Body>
__device__ __forceinline__ void with_path(int path, const path_inputs& in, Body&& body)
{
    switch (path) {
    case 0: body(std::integral_constant<int, 0>{}, nullptr); break;
    case 1: body(std::integral_constant<int, 1>{}, in.spec_zf); break;
    case 2: body(std::integral_constant<int, 2>{}, in.spec_mmse); break;
    case 3: body(std::integral_constant<int, 3>{}, in.spec_cma); break;
    case 4: body(std::integral_constant<int, 4>{}, nullptr); break;
    default: body(std::integral_constant<int, 5>{}, nullptr); break;
    }
}

/// f(k), k < N/2: the folded R x C x filter of path `path` for sample parity `parity`,
/// unrolled, so that each thread has the global loads of several bins in flight. in_band: the
/// filter is zero from a quarter of the rate on (the trellis's LP, dsp::trellis::lowpass_stop),
/// so of the bins k and k + N/2 a fold adds only the one in band is read and formed (k for
/// k < N/4, k + N/2 for k >= N/4), the other term being an exact zero (R x 0 x C): the same
/// values at half the reads.
/// channels 2: path_product2 with the second channel's inputs `two` and the packet's `q`.
template <bool in_band = false, int channels = 1>
__device__ __forceinline__ void fold(int path, const path_inputs& in, const packet_terms& t, float2* f, int parity,
                                     const second_inputs& two = {}, const pair_terms& q = {})
{
    with_path(path, in, [&](auto path_c, const float2* spec) {
        constexpr int p = decltype(path_c)::value;
        const float2 zero = make_float2(0.0f, 0.0f);
        auto product = [&](int k) {
            if constexpr (channels == 1) {
                return path_product<p>(in, t, spec, k);
            } else {
                return path_product2<p>(in, t, two, q, spec, k);
            }
        };
#pragma unroll 4
        for (int k = threadIdx.x; k < n_fft / 2; k += blockDim.x) {
            float2 lo, hi;
            if constexpr (in_band) {
                lo = k < n_fft / 4 ? product(k) : zero;
                hi = k < n_fft / 4 ? zero : product(k + n_fft / 2);
            } else {
                lo = product(k);
                hi = product(k + n_fft / 2);
            }
            f[smem_fft::pad<true>(k)] = fold_bins(lo, hi, k, parity);
        }
    });
}

/// The filter paths on chip, one block per (packet, path), block 6 p + path: the folded
/// spectrum of R x C x H_NO (N/2 points) is built in shared memory, inverse transformed there
/// (gpu/smem_fft: natural order in, bit-reversed out), and its decision samples (m = m0 + k
/// for bit k, scaled by 1/N) go to the detector's input, stream p * 6 + path, contiguous.
/// Three blocks per SM, so that one block's loads overlap another's transform. A packet's six
/// blocks run side by side, so its R (128 KB, read by each) comes from DRAM once and from L2
/// after: with a block per packet looping over the paths, the 396 packets in flight held
/// 50 MB of R, more than L2 keeps, and R was read from DRAM once per path (the kernel moved
/// 1.7 MB a packet, 0.64 ms a part of 779 packets on the H100).
constexpr int paths_log_n = 13;
static_assert(1 << paths_log_n == n_fft / 2);
constexpr int paths_threads = 256;
constexpr std::size_t paths_smem_bytes = static_cast<std::size_t>(smem_fft::padded_size(n_fft / 2, true)) * sizeof(float2);
static_assert(paths_smem_bytes <= backend_shared_memory_bytes);

template <int channels>
__global__ void __launch_bounds__(paths_threads, 3)
    paths_kernel(const float2* __restrict__ r, const float2* __restrict__ hno, const float2* __restrict__ spec_zf,
                 const float2* __restrict__ spec_mmse, const float2* __restrict__ spec_cma, const float2* __restrict__ hspec,
                 const float* __restrict__ psi, const double* __restrict__ sigma2, const double* __restrict__ tau,
                 const cuDoubleComplex* __restrict__ gain, int parity, int m0, float2* __restrict__ v,
                 const std::uint8_t* __restrict__ derotation, second_inputs two, int only_path)
{
    extern __shared__ float2 f[];  // the path's folded spectrum, N/2 points (smem_fft layout)
    // only_path >= 0: that path alone, block p for packet p, its samples stream p.
    const bool one = only_path >= 0;
    const int p = one ? static_cast<int>(blockIdx.x) : static_cast<int>(blockIdx.x) / num_paths;
    const int path = one ? only_path : static_cast<int>(blockIdx.x) % num_paths;
    // Made again (derotation not null): only the paths dsp::smoother::pre_derotated gives for
    // the packet's source (the whole block returns).
    if (derotation != nullptr && (derotation[p] == dsp::smoother::no_derotation || !dsp::smoother::pre_derotated(path, derotation[p]))) return;
    const path_inputs in{r, hno, spec_zf, spec_mmse, spec_cma, hspec, psi};
    const packet_terms t = packet_terms_of(p, sigma2, tau, gain);
    const float inv_n = 1.0f / static_cast<float>(n_fft);
    if constexpr (channels == 1) {
        fold(path, in, t, f, parity);
    } else {
        fold<false, 2>(path, in, t, f, parity, two, pair_terms_of(p, two));
    }
    __syncthreads();
    // The transform's last stage (a pass of its own) is done where its output is read.
    smem_fft::dif_but_last<paths_log_n, true, true>(f);
    float2* out = v + (one ? static_cast<std::size_t>(p) : static_cast<std::size_t>(p) * num_paths + path) * n_bits;
    for (int k = threadIdx.x; k < n_bits; k += blockDim.x) {
        const float2 y = smem_fft::dif_last_stage_at<true>(f, smem_fft::bitrev<paths_log_n>(m0 + k));
        __stcs(out + k, make_float2(y.x * inv_n, y.y * inv_n));  // for the detector, streamed past L2
    }
}

/// x exp(-j theta), in double as dsp::trellis derotates (the sample is float, cs and sn the
/// double cosine and sine of -theta).
__device__ inline float2 derotated(float2 v, double cs, double sn)
{
    const double re = v.x, im = v.y;
    return make_float2(static_cast<float>(re * cs - im * sn), static_cast<float>(re * sn + im * cs));
}

/// The trellis detector's input (dsp/paths: R x C x LP, inverse transform, the sample at each
/// bit's instant): paths_kernel with the trellis's low-pass LP in place of H_NO, each sample
/// derotated on its way out by the symbol-by-symbol detector's phase: the PLL's of its bit
/// pair (theta), or where the smoother decided, its bit's own (theta_bit: a sincos a bit).
/// LP is zero from a quarter of the rate on, so each fold adds an exact zero to the in-band
/// term, which alone is read (fold<true>): the same values as the CPU's full transform read
/// at the bit instants. One sample a bit
/// (dsp/trellis.hpp): one N/2-point transform a path where the pair of samples took two.
/// With the PLL's phase, threads 2m and 2m + 1 hold the two bits of one pair (k and k + 1, k
/// even) in every turn: each computes the pair's rotation for one of two turns, the even
/// thread for turn i and the odd one for turn i + 1, and they trade them (half the double
/// sincos). Out: x, packets x 6 streams of 6336 samples.
static_assert(paths_threads % 2 == 0 && n_bits % 2 == 0, "threads 2m, 2m + 1 hold the two bits of a pair");
template <int channels>
__global__ void __launch_bounds__(paths_threads, 3)
    paths_trellis_kernel(const float2* __restrict__ r, const float2* __restrict__ lp, const float2* __restrict__ spec_zf,
                         const float2* __restrict__ spec_mmse, const float2* __restrict__ spec_cma, const float2* __restrict__ hspec,
                         const float* __restrict__ psi, const double* __restrict__ sigma2, const double* __restrict__ tau,
                         const cuDoubleComplex* __restrict__ gain, int parity, int m0, const float* __restrict__ theta,
                         const float* __restrict__ theta_bit, const std::uint8_t* __restrict__ smoothed, float2* __restrict__ x,
                         second_inputs two)
{
    extern __shared__ float2 f[];
    const int p = static_cast<int>(blockIdx.x) / num_paths, path = static_cast<int>(blockIdx.x) % num_paths;
    const path_inputs in{r, lp, spec_zf, spec_mmse, spec_cma, hspec, psi};
    const packet_terms t = packet_terms_of(p, sigma2, tau, gain);
    const float inv_n = 1.0f / static_cast<float>(n_fft);
    // LP: dsp::trellis::lowpass_stop <= 0.25 (asserted there)
    if constexpr (channels == 1) {
        fold<true>(path, in, t, f, parity);
    } else {
        fold<true, 2>(path, in, t, f, parity, two, pair_terms_of(p, two));
    }
    __syncthreads();
    smem_fft::dif_but_last<paths_log_n, true, true>(f);
    const std::size_t stream = static_cast<std::size_t>(p) * num_paths + path;
    float2* out = x + stream * n_bits;
    constexpr int turns = (n_bits + paths_threads - 1) / paths_threads;
    const int tid = static_cast<int>(threadIdx.x);
    if (theta_bit != nullptr && (smoothed == nullptr || smoothed[p] != 0)) {  // the smoother's: each bit its own phase
        const float* thb = theta_bit + stream * n_bits;
        for (int turn = 0; turn < turns; ++turn) {
            const int k = tid + turn * paths_threads;
            if (k < n_bits) {
                double sn, cs;
                sincos(-static_cast<double>(thb[k]), &sn, &cs);
                const float2 v = smem_fft::dif_last_stage_at<true>(f, smem_fft::bitrev<paths_log_n>(m0 + k));
                __stcs(out + k, derotated(make_float2(v.x * inv_n, v.y * inv_n), cs, sn));
            }
        }
        return;
    }
    const float* th = theta + stream * (n_bits / 2);  // the PLL's: a phase a pair
#pragma unroll 2
    for (int i = 0; i < turns; i += 2) {
        const int mine = i + (tid & 1);  // the turn whose rotation this thread computes
        const int km = tid + mine * paths_threads;
        double sn = 0.0, cs = 1.0;
        if (mine < turns && km < n_bits) sincos(-static_cast<double>(th[km >> 1]), &sn, &cs);
        const double other_cs = __shfl_xor_sync(0xffffffffu, cs, 1), other_sn = __shfl_xor_sync(0xffffffffu, sn, 1);
#pragma unroll
        for (int u = 0; u < 2; ++u) {
            const int turn = i + u, k = tid + turn * paths_threads;
            if (turn < turns && k < n_bits) {
                const bool own = turn == mine;
                const float2 v = smem_fft::dif_last_stage_at<true>(f, smem_fft::bitrev<paths_log_n>(m0 + k));
                __stcs(out + k, derotated(make_float2(v.x * inv_n, v.y * inv_n), own ? cs : other_cs, own ? sn : other_sn));
            }
        }
    }
}

/// The spectra of per-packet taps (gpu/paths.cuh, taps_spectra_device): one block per packet,
/// each job's taps transformed in shared memory (smem_fft::dit_of_taps: decimation in time,
/// natural order out, the stages that would work on zeros not run), each bin written out as
/// the last stages leave it. This replaces a zero-padded buffer of N x packets per job
/// and a batched cuFFT transform of it: the zeros are neither written nor read (128 KB a
/// packet and job).
constexpr int spectra_threads = 512;
constexpr int spectra_log_n = 14;
static_assert(1 << spectra_log_n == n_fft);
constexpr std::size_t spectra_smem_bytes = static_cast<std::size_t>(smem_fft::padded_size(n_fft, false)) * sizeof(float2);
static_assert(spectra_smem_bytes <= backend_shared_memory_bytes);

__global__ void __launch_bounds__(spectra_threads, 1) taps_spectra_kernel(taps_spectrum_jobs jobs)
{
    extern __shared__ float2 a[];
    __shared__ float2 taps[smem_fft::near_zero_span];  // a job's taps: each is read by the 64 threads of its block
    const int p = blockIdx.x;
    for (int j = 0; j < jobs.count; ++j) {
        const taps_spectrum_job job = jobs.job[j];
        float2* out = reinterpret_cast<float2*>(job.spectrum) + static_cast<std::size_t>(p) * n_fft;
        float lo = INFINITY, hi = 0.0f;  // min and max |S|^2 of this thread's bins
        const float2* from = reinterpret_cast<const float2*>(job.taps) + static_cast<std::size_t>(p) * job.taps_per_packet;
        for (int i = threadIdx.x; i < job.taps_per_packet; i += blockDim.x) taps[i] = from[i];
        __syncthreads();
        smem_fft::dit_of_taps<spectra_log_n, false, false>(a, taps, job.taps_per_packet, job.first, [out, &lo, &hi](int k, float2 v) {
            out[k] = v;
            const float m = v.x * v.x + v.y * v.y;
            lo = fminf(lo, m);
            hi = fmaxf(hi, m);
            return v;
        });
        if (job.condition) {  // min and max are exact in any order
            constexpr int warps = spectra_threads / 32;
            __shared__ float red_lo[warps], red_hi[warps];
            for (int o = 16; o > 0; o >>= 1) {
                lo = fminf(lo, __shfl_xor_sync(0xffffffffu, lo, o));
                hi = fmaxf(hi, __shfl_xor_sync(0xffffffffu, hi, o));
            }
            if (threadIdx.x % 32 == 0) {
                red_lo[threadIdx.x / 32] = lo;
                red_hi[threadIdx.x / 32] = hi;
            }
            __syncthreads();
            if (threadIdx.x == 0) {
                for (int w = 1; w < warps; ++w) {
                    lo = fminf(lo, red_lo[w]);
                    hi = fmaxf(hi, red_hi[w]);
                }
                job.condition[p] = lo > 0.0f ? static_cast<double>(hi) / lo : INFINITY;
            }
        }
    }
}

/// pre_derotate_device: a thread per sample, blockIdx.y the packet.
__global__ void pre_derotate_kernel(cuFloatComplex* __restrict__ seg, const std::uint8_t* __restrict__ derotation,
                                    const float* __restrict__ theta_bit, int pre, int decision_delay, int seg_len)
{
    const int p = static_cast<int>(blockIdx.y);
    const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
    if (i >= seg_len) return;
    if (derotation[p] == dsp::smoother::no_derotation) return;
    const float* th = theta_bit + static_cast<std::size_t>(p * dsp::chain::num_paths + derotation[p]) * n_bits;
    const double u = static_cast<double>(i - pre - decision_delay) / 2.0;
    double sn, cs;
    sincos(dsp::smoother::pre_derotation(th, n_bits, u), &sn, &cs);
    cuFloatComplex& x = seg[static_cast<std::size_t>(p) * n_fft + i];
    const double re = static_cast<double>(x.x), im = static_cast<double>(x.y);
    x = make_cuFloatComplex(static_cast<float>(re * cs + im * sn), static_cast<float>(im * cs - re * sn));
}

}  // namespace

namespace {
second_inputs second_of(const second_channel* two)
{
    if (two == nullptr) return {};
    if (!two->r || !two->spec_mmse || !two->spec_cma || !two->hspec || !two->weight || !two->noise || !two->tau || !two->mrc) {
        throw std::invalid_argument("paths: a second receive channel without all of its inputs");
    }
    return {reinterpret_cast<const float2*>(two->r), reinterpret_cast<const float2*>(two->spec_mmse), reinterpret_cast<const float2*>(two->spec_cma),
            reinterpret_cast<const float2*>(two->hspec), two->weight, two->noise, two->tau, two->mrc};
}
}  // namespace

void paths_setup_device()
{
    for (auto* k : {paths_kernel<1>, paths_kernel<2>}) {
        PAQ_CUDA_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(paths_smem_bytes)));
    }
    for (auto* k : {paths_trellis_kernel<1>, paths_trellis_kernel<2>}) {
        PAQ_CUDA_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(paths_smem_bytes)));
    }
    PAQ_CUDA_CHECK(cudaFuncSetAttribute(taps_spectra_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(spectra_smem_bytes)));
}

void taps_spectra_device(const taps_spectrum_jobs& jobs, int packets, cudaStream_t s)
{
    if (packets <= 0 || jobs.count <= 0) return;
    if (jobs.count > taps_spectrum_jobs::max_jobs) throw std::invalid_argument("taps_spectra_device: too many jobs");
    for (int j = 0; j < jobs.count; ++j) {
        const auto& job = jobs.job[j];
        if (!job.taps || !job.spectrum || job.taps_per_packet <= 0 || job.taps_per_packet > n_fft) {
            throw std::invalid_argument("taps_spectra_device: a job without taps, spectrum or a tap count in 1 .. N");
        }
        if (job.first < -smem_fft::near_zero_span || job.first + job.taps_per_packet > smem_fft::near_zero_span ||
            job.taps_per_packet > smem_fft::near_zero_span) {
            throw std::invalid_argument("taps_spectra_device: taps at times " + std::to_string(job.first) + " .. " +
                                        std::to_string(job.first + job.taps_per_packet - 1) + ", not within 256 of 0");
        }
    }
    taps_spectra_kernel<<<static_cast<unsigned>(packets), spectra_threads, spectra_smem_bytes, s>>>(jobs);
    PAQ_CUDA_CHECK_LAUNCH();
}

void paths_device(const cuFloatComplex* r, const float2* hno, const cuFloatComplex* spec_zf, const cuFloatComplex* spec_mmse,
                  const cuFloatComplex* spec_cma, const cuFloatComplex* hspec, const float* psi, const double* sigma2, const double* tau,
                  const cuDoubleComplex* gain, int parity, int m0, float2* v, int packets, cudaStream_t s,
                  const std::uint8_t* derotation, const second_channel* second)
{
    if (packets <= 0) return;
    const second_inputs two = second_of(second);
    auto* kernel = second ? paths_kernel<2> : paths_kernel<1>;
    kernel<<<static_cast<unsigned>(packets) * num_paths, paths_threads, paths_smem_bytes, s>>>(
        reinterpret_cast<const float2*>(r), hno, reinterpret_cast<const float2*>(spec_zf), reinterpret_cast<const float2*>(spec_mmse),
        reinterpret_cast<const float2*>(spec_cma), reinterpret_cast<const float2*>(hspec), psi, sigma2, tau, gain, parity, m0, v,
        derotation, two, -1);
    PAQ_CUDA_CHECK_LAUNCH();
}

void unequalized_path_device(const cuFloatComplex* r, const float2* hno, const double* sigma2, const double* tau, const cuDoubleComplex* gain,
                             int parity, int m0, float2* v, int packets, cudaStream_t s, const second_channel* second)
{
    if (packets <= 0) return;
    const second_inputs two = second_of(second);
    auto* kernel = second ? paths_kernel<2> : paths_kernel<1>;
    kernel<<<static_cast<unsigned>(packets), paths_threads, paths_smem_bytes, s>>>(
        reinterpret_cast<const float2*>(r), hno, nullptr, nullptr, nullptr, nullptr, nullptr, sigma2, tau, gain, parity, m0, v, nullptr, two,
        static_cast<int>(dsp::eq_path::none));
    PAQ_CUDA_CHECK_LAUNCH();
}

void paths_trellis_device(const cuFloatComplex* r, const float2* lp, const cuFloatComplex* spec_zf, const cuFloatComplex* spec_mmse,
                          const cuFloatComplex* spec_cma, const cuFloatComplex* hspec, const float* psi, const double* sigma2,
                          const double* tau, const cuDoubleComplex* gain, int parity, int m0, const float* theta,
                          const float* theta_bit, const std::uint8_t* smoothed, float2* x, int packets, cudaStream_t s,
                          const second_channel* second)
{
    if (theta == nullptr) throw std::invalid_argument("paths_trellis_device: no phase from the detector (stream_detector keep_phase)");
    if (packets <= 0) return;
    // The last sample read, y(2 (m0 + 6335) + parity), must lie inside the N/2 transform's
    // index range (the CPU reads the same samples from its full transform).
    if (m0 < 0 || m0 + n_bits > n_fft / 2) throw std::invalid_argument("paths_trellis_device: packet outside the segment");
    const second_inputs two = second_of(second);
    auto* kernel = second ? paths_trellis_kernel<2> : paths_trellis_kernel<1>;
    kernel<<<static_cast<unsigned>(packets) * num_paths, paths_threads, paths_smem_bytes, s>>>(
        reinterpret_cast<const float2*>(r), lp, reinterpret_cast<const float2*>(spec_zf), reinterpret_cast<const float2*>(spec_mmse),
        reinterpret_cast<const float2*>(spec_cma), reinterpret_cast<const float2*>(hspec), psi, sigma2, tau, gain, parity, m0, theta,
        theta_bit, smoothed, x, two);
    PAQ_CUDA_CHECK_LAUNCH();
}

void pre_derotate_device(cuFloatComplex* seg, const std::uint8_t* derotation, const float* theta_bit, int pre, int decision_delay,
                         int packets, cudaStream_t s)
{
    if (packets <= 0) return;
    if (derotation == nullptr || theta_bit == nullptr) throw std::invalid_argument("pre_derotate_device: no derotation plan or phases");
    const int seg_len = static_cast<int>(waveform::L_pkt) + 2 * pre;
    if (seg_len > n_fft) throw std::invalid_argument("pre_derotate_device: segment longer than its stride");
    const dim3 grid(static_cast<unsigned>((seg_len + 255) / 256), static_cast<unsigned>(packets));
    pre_derotate_kernel<<<grid, 256, 0, s>>>(seg, derotation, theta_bit, pre, decision_delay, seg_len);
    PAQ_CUDA_CHECK_LAUNCH();
}

}  // namespace paq::gpu
