#include "gpu/estimators.hpp"
#include "gpu/iq_correction.hpp"

#include "dsp/batch.hpp"
#include "dsp/estimators.hpp"
#include "dsp/preamble_detector.hpp"
#include "dsp/soqpsk.hpp"
#include "dsp/waveform.hpp"
#include "gpu/channel_terms.cuh"
#include "gpu/estimators.cuh"
#include "gpu/product.hpp"
#include "gpu/resampler.cuh"
#include "gpu/resampler.hpp"
#include "gpu/resources.cuh"

#include <cuComplex.h>
#include <math_constants.h>

#include <algorithm>
#include <stdexcept>

namespace paq::gpu {

namespace {

constexpr int lq = static_cast<int>(waveform::L_q);
constexpr int pre = static_cast<int>(dsp::packet_margin);
constexpr int seg_len = static_cast<int>(waveform::L_pkt) + 2 * pre;  ///< samples a packet's stages read
/// Segments are stored fft-size apart, zero-padded, so the filter stage transforms them in place.
constexpr int seg_stride = static_cast<int>(estimators::segment_stride);
static_assert(seg_stride >= seg_len);
constexpr int l_ch = dsp::chain::L_ch;

__constant__ cuFloatComplex c_template[32];

__device__ inline cuFloatComplex finite_or_zero(cuFloatComplex s)
{
    return (isfinite(s.x) && isfinite(s.y)) ? s : make_cuFloatComplex(0.0f, 0.0f);
}

/// M(u) for u = u0 .. u0 + metric_block - 1 per block. The correlation of one period,
/// c(v) = sum_l r(v + l) p*(l), and its energy e(v) are computed once per v and shared by
/// the eight u that use them (u = v - 32 m): 8x less arithmetic than one thread per u doing
/// all 256 terms. Per period the terms are summed in the CPU's order (per period, then over
/// periods), in float and fused: this metric only finds the candidates; the values around each
/// peak, which the clock estimate and the records use, are recomputed in double
/// (peak_metrics_kernel) as the CPU's.
/// Each thread makes metric_per_thread consecutive c(v), e(v) from registers: it reads each of
/// its 39 samples from shared memory once (not 32 times a v), and the template's values are
/// compile-time indices into the constant bank. The samples are stored with one spare slot
/// every 8 (`metric_slot`), so that the threads, 8 samples apart, read different banks.
constexpr int metric_span = static_cast<int>(dsp::detector_span);                // 256
constexpr int metric_threads = 256;
constexpr int metric_per_thread = 8;
constexpr int metric_v = metric_threads * metric_per_thread;                   // c(v) per block
constexpr int metric_block = metric_v - (metric_span - 32);                    // M(u) per block: 1824
constexpr int metric_samples = metric_block + metric_span - 1;                 // r per block
__device__ constexpr int metric_slot(int i)
{
    return i + i / 8;
}

/// A ci16 chunk as cf32: each component divided by the scale, correctly rounded (paq::to_cf32).
__global__ void ci16_to_cf32_kernel(const short2* __restrict__ in, std::size_t n, float scale, cuFloatComplex* __restrict__ out)
{
    for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
        const short2 v = in[i];
        out[i] = make_cuFloatComplex(__fdiv_rn(static_cast<float>(v.x), scale), __fdiv_rn(static_cast<float>(v.y), scale));
    }
}

__global__ void __launch_bounds__(metric_threads) metric_kernel(const cuFloatComplex* __restrict__ r, std::size_t n_metric,
                                                                float* __restrict__ out)
{
    __shared__ cuFloatComplex rs[metric_slot(metric_samples - 1) + 1];
    __shared__ float a2[metric_v], en[metric_v];
    const std::size_t u0 = blockIdx.x * static_cast<std::size_t>(metric_block);
    const std::size_t len = n_metric + metric_span - 1;  // samples r[0 .. len)
    for (int i = threadIdx.x; i < metric_samples; i += metric_threads) {
        rs[metric_slot(i)] = u0 + i < len ? finite_or_zero(r[u0 + i]) : make_cuFloatComplex(0.0f, 0.0f);
    }
    __syncthreads();
    {
        const int v0 = threadIdx.x * metric_per_thread;
        float cr[metric_per_thread], ci[metric_per_thread], e[metric_per_thread];
#pragma unroll
        for (int k = 0; k < metric_per_thread; ++k) cr[k] = ci[k] = e[k] = 0.0f;
        // Sample v0 + j is term l = j - k of c(v0 + k): each c(v)'s terms in order of l.
#pragma unroll
        for (int j = 0; j < 32 + metric_per_thread - 1; ++j) {
            const cuFloatComplex sv = rs[metric_slot(v0 + j)];
            const float p = fmaf(sv.x, sv.x, sv.y * sv.y);
#pragma unroll
            for (int k = 0; k < metric_per_thread; ++k) {
                const int l = j - k;
                if (l < 0 || l >= 32) continue;
                const cuFloatComplex t = c_template[l];
                cr[k] = fmaf(sv.x, t.x, fmaf(sv.y, t.y, cr[k]));  // s * conj(t)
                ci[k] = fmaf(sv.y, t.x, fmaf(-sv.x, t.y, ci[k]));
                e[k] += p;
            }
        }
#pragma unroll
        for (int k = 0; k < metric_per_thread; ++k) {
            a2[v0 + k] = cr[k] * cr[k] + ci[k] * ci[k];
            en[v0 + k] = e[k];
        }
    }
    __syncthreads();
    for (int o = threadIdx.x; o < metric_block; o += metric_threads) {
        const std::size_t u = u0 + o;
        if (u >= n_metric) return;
        float l_sum = 0.0f, e_sum = 0.0f;
#pragma unroll
        for (int m = 0; m < 8; ++m) {
            l_sum += a2[o + 32 * m];
            e_sum += en[o + 32 * m];
        }
        out[u] = e_sum > 0.0f ? l_sum / (32.0f * e_sum) : 0.0f;
    }
}

/// Packet segments [start - pre, start - pre + seg_len), zeros outside the window and for
/// non-finite samples (counted per packet).
/// With `count` (device), slots p >= *count are zero-filled: the later stages then run on all
/// slots without knowing the packet count on the host.
/// With `steps` (device, 32.32 per slot), a slot whose step is not 2^32 is re-timed for the
/// transmitter's clock as dsp::clock_correct_packet does (margin pre, seg_len samples, the
/// ratio-1 table `coef` of `taps` taps): sample i at position start + (i - pre) step in signed
/// 32.32, non-finite and absent samples read as zero, and the non-finite samples in the span
/// the filter reads (first position - N/2 + 1 .. last position + N/2) counted once each. A
/// step of exactly 2^32 is the plain copy above, bit for bit.
__global__ void gather_kernel(const cuFloatComplex* __restrict__ window, long long window_len,
                              const long long* __restrict__ starts, const int* __restrict__ count,
                              const dsp::fixed_pos* __restrict__ steps, const float2* __restrict__ coef, int taps,
                              cuFloatComplex* __restrict__ seg, unsigned* __restrict__ nonfinite)
{
    constexpr dsp::fixed_pos unit_step = dsp::fixed_pos{1} << dsp::fixed_frac_bits;
    const int p = blockIdx.y;
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= seg_stride) return;
    const bool live = count == nullptr || p < *count;
    const dsp::fixed_pos step = live && steps != nullptr ? steps[p] : unit_step;
    cuFloatComplex v = make_cuFloatComplex(0.0f, 0.0f);
    if (step == unit_step) {
        const long long idx = live ? starts[p] - pre + i : -1;
        if (live && i < seg_len && idx >= 0 && idx < window_len) {
            v = window[idx];
            if (!(isfinite(v.x) && isfinite(v.y))) {
                atomicAdd(&nonfinite[p], 1u);
                v = make_cuFloatComplex(0.0f, 0.0f);
            }
        }
    } else {
        const auto step_s = static_cast<std::int64_t>(step);
        const std::int64_t first =
            static_cast<std::int64_t>(static_cast<std::uint64_t>(starts[p]) << dsp::fixed_frac_bits) - static_cast<std::int64_t>(pre) * step_s;
        if (i < seg_len) {
            const std::int64_t pos = first + static_cast<std::int64_t>(i) * step_s;
            v = resample_at_device(finite_reader{window, window_len}, pos >> dsp::fixed_frac_bits,
                                   static_cast<std::uint32_t>(static_cast<std::uint64_t>(pos)), coef, taps);
        }
        // The samples the filter reads, each counted by one thread.
        const std::int64_t last = first + static_cast<std::int64_t>(seg_len - 1) * step_s;
        const long long in_lo = (first >> dsp::fixed_frac_bits) - taps / 2 + 1;
        const long long in_hi = (last >> dsp::fixed_frac_bits) + taps / 2 + 1;
        for (long long j = in_lo + i; j < in_hi; j += seg_stride) {
            if (j < 0 || j >= window_len) continue;
            const cuFloatComplex x = window[j];
            if (!(isfinite(x.x) && isfinite(x.y))) atomicAdd(&nonfinite[p], 1u);
        }
    }
    seg[static_cast<std::size_t>(p) * seg_stride + i] = v;
}

__constant__ cuDoubleComplex c_template_d[32];

/// One block of 32 threads per slot: M(peak - 1), M(peak), M(peak + 1) in double, as
/// dsp::preamble_metric computes them (gpu/estimators.cuh), peak = start + template_offset;
/// positions outside [0, n_metric) and dead slots give 0. Thread t < 24 sums period t % 8 of
/// position peak - 1 + t / 8; three threads then add the periods in order.
__global__ void peak_metrics_kernel(const cuFloatComplex* __restrict__ window, long long n_metric, const long long* __restrict__ starts,
                                    const int* __restrict__ count, int template_offset, double* __restrict__ out)
{
    const int p = blockIdx.x;
    const int t = threadIdx.x;
    __shared__ double c_abs2[24], e[24];
    const bool live = count == nullptr || p < *count;
    const long long peak = live ? starts[p] + template_offset : -2;
    if (t < 24) {
        const long long u = peak - 1 + t / 8;
        c_abs2[t] = e[t] = 0.0;
        if (live && u >= 0 && u < n_metric) exact::period_terms(window + u + 32 * (t % 8), c_template_d, c_abs2[t], e[t]);
    }
    __syncthreads();
    if (t < 3) {
        const long long u = peak - 1 + t;
        out[3 * static_cast<std::size_t>(p) + t] = live && u >= 0 && u < n_metric ? exact::metric_from_terms(c_abs2 + 8 * t, e + 8 * t) : 0.0;
    }
}

/// Resampled outputs [0, ready) whose filter reads only inputs [0, arrived): positions
/// first_pos + m step with (pos >> 32) + N/2 <= arrived - 1, i.e. pos < (arrived - N/2) 2^32.
std::size_t resampled_ready(std::size_t arrived, dsp::fixed_pos first_pos, dsp::fixed_pos step, int taps, std::size_t n_out)
{
    const auto half = static_cast<std::size_t>(taps / 2);
    if (arrived <= half) return 0;
    const dsp::fixed_pos limit = static_cast<dsp::fixed_pos>(arrived - half) << dsp::fixed_frac_bits;
    if (limit <= first_pos) return 0;
    return static_cast<std::size_t>(std::min<dsp::fixed_pos>(n_out, (limit - first_pos + step - 1) / step));
}

/// One block per packet: w0 = arg(sum_{n=64}^{223} r(n) r*(n-32)) / 32, reduced in double.
/// Two receive channels (channel c's segments and estimates `slots` slots after channel 0's,
/// `slots` = max_packets): the lag products summed, each weighted by 1 / its channel's noise
/// as dsp::cfo_channel_weights measures it (the weights to `weight`, for the refinement), and
/// the one offset written to both channels' slots.
template <int channels>
__global__ void cfo_kernel(const cuFloatComplex* __restrict__ seg, double* __restrict__ w0, std::size_t slots, double* __restrict__ weight)
{
    const int p = blockIdx.x;
    __shared__ double sr[256], si[256], se[256];
    double acc_r = 0.0, acc_i = 0.0;
    for (int c = 0; c < channels; ++c) {
        const cuFloatComplex* r = seg + (static_cast<std::size_t>(p) + c * slots) * seg_stride + pre;
        double ar = 0.0, ai = 0.0, e = 0.0;
        for (int n = 2 * lq + threadIdx.x; n <= 7 * lq - 1; n += blockDim.x) {
            const cuFloatComplex a = r[n], b = r[n - lq];
            ar += static_cast<double>(a.x) * b.x + static_cast<double>(a.y) * b.y;
            ai += static_cast<double>(a.y) * b.x - static_cast<double>(a.x) * b.y;
            if constexpr (channels > 1) {
                e += 0.5 * (static_cast<double>(a.x) * a.x + static_cast<double>(a.y) * a.y + static_cast<double>(b.x) * b.x +
                            static_cast<double>(b.y) * b.y);
            }
        }
        sr[threadIdx.x] = ar;
        si[threadIdx.x] = ai;
        se[threadIdx.x] = e;
        __syncthreads();
        for (int s = blockDim.x / 2; s > 0; s >>= 1) {
            if (threadIdx.x < s) {
                sr[threadIdx.x] += sr[threadIdx.x + s];
                si[threadIdx.x] += si[threadIdx.x + s];
                if constexpr (channels > 1) se[threadIdx.x] += se[threadIdx.x + s];
            }
            __syncthreads();
        }
        if constexpr (channels == 1) {
            acc_r = sr[0];
            acc_i = si[0];
        } else {
            const double energy = se[0];
            const double noise = fmax(energy - hypot(sr[0], si[0]), 1e-3 * energy) / (5.0 * lq);
            const double wc = noise > 0.0 && isfinite(noise) ? 1.0 / noise : 0.0;
            acc_r += wc * sr[0];
            acc_i += wc * si[0];
            if (threadIdx.x == 0) weight[static_cast<std::size_t>(p) + c * slots] = wc;
        }
        __syncthreads();  // the sums are read before the next channel's overwrite them
    }
    if (threadIdx.x == 0) {
        const double w = atan2(acc_i, acc_r) / lq;
        for (int c = 0; c < channels; ++c) w0[static_cast<std::size_t>(p) + c * slots] = w;
    }
}

/// r(n) <- r(n) exp(-j w0 (n - centre)), n relative to the packet start (dsp::derotate, and
/// with a centre dsp::derotate_about); the phase in double (it grows to ~1e3 rad over a packet
/// at the largest offsets).
__global__ void derotate_kernel(cuFloatComplex* __restrict__ seg, const double* __restrict__ w0, double centre = 0.0)
{
    const int p = blockIdx.y;
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= seg_len) return;
    double s, c;
    sincos(-w0[p] * (static_cast<double>(i - pre) - centre), &s, &c);
    cuFloatComplex& v = seg[static_cast<std::size_t>(p) * seg_stride + i];
    const float cs = static_cast<float>(c), sn = static_cast<float>(s);
    v = make_cuFloatComplex(v.x * cs - v.y * sn, v.x * sn + v.y * cs);
}

/// One block per packet: dsp::estimate_cfo_residual on the packet's copy of its observation
/// range (obs, m_obs samples per packet). The phase of each 32-sample block against the pilot
/// fit X h_p (one warp per block, summed in double), then the weighted line through the
/// unwrapped block phases as dsp::block_phase_slope: its slope goes to dw and is added to w0.
constexpr int cfo_block = static_cast<int>(dsp::cfo_refine_block);
constexpr int max_cfo_blocks = 32;
static_assert(cfo_block == 32, "one warp per block");

/// Two receive channels (channel c's observation copies, fits and offsets `slots` slots after
/// channel 0's): the block sums of both, each channel's weighted by `weight` (cfo_kernel's),
/// as dsp::refine_cfo over several channels; the one slope written to both channels' slots.
template <int channels>
__global__ void cfo_residual_kernel(const cuFloatComplex* __restrict__ obs, int obs_first, int m_obs,
                                    const cuFloatComplex* __restrict__ fit, double* __restrict__ dw, double* __restrict__ w0,
                                    std::size_t slots, const double* __restrict__ weight)
{
    const int p = blockIdx.x;
    const int blocks = (m_obs + cfo_block - 1) / cfo_block;
    __shared__ double sr[max_cfo_blocks], si[max_cfo_blocks];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
    for (int b = warp; b < blocks; b += warps) {
        const int i = b * cfo_block + lane;
        double br = 0.0, bi = 0.0;
        for (int c = 0; c < channels; ++c) {
            const std::size_t slot = static_cast<std::size_t>(p) + c * slots;
            const cuFloatComplex* r = obs + slot * m_obs;
            const cuFloatComplex* f = fit + slot * m_obs;
            double ar = 0.0, ai = 0.0;
            if (i < m_obs) {
                // r f*
                ar = static_cast<double>(r[i].x) * f[i].x + static_cast<double>(r[i].y) * f[i].y;
                ai = static_cast<double>(r[i].y) * f[i].x - static_cast<double>(r[i].x) * f[i].y;
            }
            for (int o = 16; o > 0; o >>= 1) {
                ar += __shfl_down_sync(0xffffffffu, ar, o);
                ai += __shfl_down_sync(0xffffffffu, ai, o);
            }
            const double wc = channels > 1 ? weight[slot] : 1.0;
            br += wc * ar;
            bi += wc * ai;
        }
        if (lane == 0) {
            sr[b] = br;
            si[b] = bi;
        }
    }
    __syncthreads();
    if (threadIdx.x != 0) return;
    constexpr double two_pi = 2.0 * 3.14159265358979323846;
    double sw = 0.0, sx = 0.0, sy = 0.0, sxx = 0.0, sxy = 0.0, prev = 0.0;
    for (int b = 0; b < blocks; ++b) {
        double ph = atan2(si[b], sr[b]);
        if (b > 0) ph = prev + remainder(ph - prev, two_pi);
        prev = ph;
        const int i0 = b * cfo_block, i1 = min(m_obs, i0 + cfo_block);
        const double w = static_cast<double>(i1 - i0), x = static_cast<double>(obs_first) + 0.5 * static_cast<double>(i0 + i1 - 1);
        sw += w;
        sx += w * x;
        sy += w * ph;
        sxx += w * x * x;
        sxy += w * x * ph;
    }
    const double den = sw * sxx - sx * sx;
    double slope = den > 0.0 ? (sw * sxy - sx * sy) / den : 0.0;
    if (!isfinite(slope)) slope = 0.0;
    for (int c = 0; c < channels; ++c) {
        const std::size_t slot = static_cast<std::size_t>(p) + c * slots;
        dw[slot] = slope;
        w0[slot] += slope;
    }
}

/// obs (m_obs per packet) <- the packet's observation range, r(obs_first + i), derotated by
/// w[p] (phase w n as derotate_kernel); from the segment (from_seg) or in place.
__global__ void obs_rotate_kernel(const cuFloatComplex* __restrict__ seg, bool from_seg, int obs_first, int m_obs,
                                  const double* __restrict__ w, cuFloatComplex* __restrict__ obs)
{
    const int p = blockIdx.y;
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= m_obs) return;
    cuFloatComplex& o = obs[static_cast<std::size_t>(p) * m_obs + i];
    const cuFloatComplex v = from_seg ? seg[static_cast<std::size_t>(p) * seg_stride + pre + obs_first + i] : o;
    double sn, cs;
    sincos(-w[p] * static_cast<double>(obs_first + i), &sn, &cs);
    o = make_cuFloatComplex(static_cast<float>(v.x * cs - v.y * sn), static_cast<float>(v.x * sn + v.y * cs));
}

/// One block per packet: sigma2 = sum |r - X h|^2 / (2 rho) over the observation range.
__global__ void noise_kernel(const cuFloatComplex* __restrict__ seg, int obs_first, int m_obs,
                             const cuFloatComplex* __restrict__ fit, double rho, double* __restrict__ sigma2)
{
    const int p = blockIdx.x;
    const cuFloatComplex* r = seg + static_cast<std::size_t>(p) * seg_stride + pre + obs_first;
    const cuFloatComplex* f = fit + static_cast<std::size_t>(p) * m_obs;
    double acc = 0.0;
    for (int i = threadIdx.x; i < m_obs; i += blockDim.x) {
        const double dr = static_cast<double>(r[i].x) - f[i].x, di = static_cast<double>(r[i].y) - f[i].y;
        acc += dr * dr + di * di;
    }
    __shared__ double sh[256];
    sh[threadIdx.x] = acc;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) sh[threadIdx.x] += sh[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) sigma2[p] = sh[0] / (2.0 * rho);
}

/// The candidate supports, for support_kernel (dsp::select_channel_support).
constexpr int max_supports = max_channel_supports;
__constant__ int c_support_first[max_supports];
__constant__ int c_support_last[max_supports];
__constant__ double c_support_noise_gain[max_supports];
__constant__ double c_support_noise_penalty;  ///< receiver_tables::support_noise_penalty
__constant__ double c_support_outside_gain[max_supports];
__constant__ double c_rx_re[l_ch], c_rx_im[l_ch];  ///< SOQPSK-TG autocorrelation, lags 0 .. 37

/// One block of 32 threads per packet. h_all holds per packet 38 (S + 1) taps: the pilot,
/// then the estimate of every support (the full width last). Thread c computes the risk of
/// support c as dsp::select_channel_support does (received power of the full-width taps
/// outside the support, as dsp::received_power); the least risk (ties: the lower index)
/// wins, and its 38 taps go to h.
__global__ void support_kernel(const cuFloatComplex* __restrict__ h_all, int n_supports, const double* __restrict__ sigma2,
                               cuFloatComplex* __restrict__ h, int* __restrict__ support)
{
    const int p = blockIdx.x;
    const int rows = l_ch * (n_supports + 1);
    const cuFloatComplex* hp = h_all + static_cast<std::size_t>(p) * rows;
    const cuFloatComplex* wide = hp + l_ch * n_supports;  // block n_supports: support n_supports - 1
    __shared__ double wr[l_ch], wi[l_ch];
    for (int a = threadIdx.x; a < l_ch; a += blockDim.x) {
        wr[a] = wide[a].x;
        wi[a] = wide[a].y;
    }
    __syncthreads();
    const double nv = 2.0 * sigma2[p];
    const int c = threadIdx.x;
    double risk = CUDART_INF;
    if (c < n_supports) {
        const int lo = c_support_first[c] + dsp::chain::N1, hi = c_support_last[c] + dsp::chain::N1;
        const double pw = received_power<l_ch>(
            [&](int a, double& re, double& im) {
                re = wr[a];
                im = wi[a];
            },
            lo, hi, c_rx_re, c_rx_im);
        risk = c_support_noise_penalty * nv * c_support_noise_gain[c] + pw - nv * c_support_outside_gain[c];
        if (!isfinite(risk)) risk = CUDART_INF;
    }
    int best = c;
    for (int off = 16; off > 0; off >>= 1) {
        const double r2 = __shfl_down_sync(0xffffffffu, risk, off);
        const int b2 = __shfl_down_sync(0xffffffffu, best, off);
        if (r2 < risk || (r2 == risk && b2 < best)) {
            risk = r2;
            best = b2;
        }
    }
    best = __shfl_sync(0xffffffffu, best, 0);
    risk = __shfl_sync(0xffffffffu, risk, 0);
    if (!(risk < CUDART_INF)) best = n_supports - 1;  // non-finite input: the full width, as on the CPU
    const cuFloatComplex* chosen = hp + l_ch * (best + 1);
    for (int a = threadIdx.x; a < l_ch; a += blockDim.x) h[static_cast<std::size_t>(p) * l_ch + a] = chosen[a];
    if (threadIdx.x == 0) support[p] = best;
}

/// Two receive channels' samples as they arrive, interleaved (channel 0, channel 1, one
/// sample time each), split into two planar windows: channel 1's `stride` samples after
/// channel 0's.
__global__ void deinterleave_kernel(const float4* __restrict__ pairs, std::size_t n, cuFloatComplex* __restrict__ out, std::size_t stride)
{
    for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n; i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
        const float4 v = pairs[i];
        out[i] = make_cuFloatComplex(v.x, v.y);
        out[stride + i] = make_cuFloatComplex(v.z, v.w);
    }
}

/// a[i] = max(a[i], b[i]): the receive channels' preamble metrics combined as
/// dsp::preamble_metric combines them, the larger at each position.
template <class T>
__global__ void max_kernel(T* __restrict__ a, const T* __restrict__ b, std::size_t n)
{
    for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n; i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
        a[i] = a[i] < b[i] ? b[i] : a[i];
    }
}

template <class T>
void launch_max(T* a, const T* b, std::size_t n, cudaStream_t s)
{
    if (n == 0) return;
    const auto blocks = static_cast<unsigned>(std::min<std::size_t>((n + 255) / 256, 4096));
    max_kernel<T><<<blocks, 256, 0, s>>>(a, b, n);
    PAQ_CUDA_CHECK_LAUNCH();
}

}  // namespace

struct estimators::impl {
    int device;
    std::size_t max_window, max_packets;
    /// Receive channels (1 or 2). With two, every per-window and per-slot buffer holds channel
    /// 1's after channel 0's (windows max_window apart, slots max_packets apart) and `metric`
    /// is the channels' combined metric.
    int channels;
    const dsp::receiver_tables& t;
    stream st;
    device_buffer<cuFloatComplex> window, seg, x_lpi_cm, x_cm, h, h_all, fit;
    int n_supports = 0;
    device_buffer<int> support;
    pinned_buffer<int> support_host;
    device_buffer<float> metric;
    device_buffer<long long> starts;
    device_buffer<double> w0, sigma2;
    device_buffer<double> cfo_weight;  ///< two channels: each slot's weight in the common offset
    device_buffer<float> metric2;      ///< two channels: channel 1's metric before it is combined
    device_buffer<float4> pairs;       ///< two channels: the interleaved samples as uploaded
    device_buffer<double> dw;  ///< the residual offset of estimate_cfo_residual
    device_buffer<cuFloatComplex> obs;  ///< refine_cfo's copies of the observation ranges (M per packet)
    device_buffer<double> peak_metrics;  ///< 3 per slot: M around each peak, in double
    device_buffer<unsigned> nonfinite;
    pinned_buffer<cf32> h_host;
    pinned_buffer<double> w0_host, sigma2_host;
    pinned_buffer<unsigned> nonfinite_host;
    pinned_buffer<long long> starts_host;
    std::size_t window_len = 0;
    /// dsp::clock_correct_packet's table (design_resampler(1.0)), for the clock-corrected gather.
    device_resampler clock_table;
    /// With an input design: the part's input samples (input width), resampled on the device
    /// into `window`.
    std::unique_ptr<device_resampler> input_rs;
    std::size_t max_input = 0;
    device_buffer<cuFloatComplex> input;
    /// A ci16 window as uploaded (input width), converted into `window` or `input` chunk by
    /// chunk.
    device_buffer<short2> raw16;
    /// Upload in chunks on its own stream, so the metric of chunk k runs while k+1 copies.
    static constexpr int upload_chunks = 8;
    stream copy_st;
    event chunk_done[upload_chunks];
    /// Around each chunk's resample kernel when timed: the resampler's own device time.
    bool resample_timed = false;
    int resample_pairs = 0;
    event resample_ev[2 * upload_chunks];

    void estimate_stages(std::size_t np);

    impl(int dev, std::size_t mw, std::size_t mp, const dsp::resampler_design* input_design, std::size_t mi, int ch)
        : device(select_device(dev)),
          max_window(mw),
          max_packets(mp),
          channels(ch),
          t(dsp::get_receiver_tables(16384)),
          window(mw * static_cast<std::size_t>(ch)),
          seg(static_cast<std::size_t>(ch) * mp * seg_stride),
          x_lpi_cm(t.M * l_ch * (t.supports.size() + 1)),
          x_cm(t.M * l_ch),
          h(static_cast<std::size_t>(ch) * mp * l_ch),
          h_all(mp * l_ch * (t.supports.size() + 1)),
          fit(static_cast<std::size_t>(ch) * mp * t.M),
          n_supports(static_cast<int>(t.supports.size())),
          support(static_cast<std::size_t>(ch) * mp),
          support_host(mp),
          metric(mw),
          starts(mp),
          w0(static_cast<std::size_t>(ch) * mp),
          sigma2(static_cast<std::size_t>(ch) * mp),
          cfo_weight(ch > 1 ? static_cast<std::size_t>(ch) * mp : 0),
          metric2(ch > 1 ? mw : 0),
          pairs(ch > 1 ? std::max(mw, mi) : 0),
          dw(static_cast<std::size_t>(ch) * mp),
          obs(static_cast<std::size_t>(ch) * mp * t.M),
          peak_metrics(static_cast<std::size_t>(ch) * 3 * mp),
          nonfinite(static_cast<std::size_t>(ch) * mp),
          h_host(mp * l_ch),
          w0_host(mp),
          sigma2_host(mp),
          nonfinite_host(mp),
          starts_host(mp),
          clock_table(dsp::design_resampler(1.0)),
          input_rs(input_design ? std::make_unique<device_resampler>(*input_design) : nullptr),
          max_input(input_design ? mi : 0),
          input(input_design ? mi * static_cast<std::size_t>(ch) : 0),
          raw16(input_design ? std::max(mw, mi) : mw)
    {
        std::array<cuFloatComplex, 32> tmpl{};
        for (int l = 0; l < 32; ++l) {
            tmpl[l] = make_cuFloatComplex(static_cast<float>(t.preamble_template[l].real()),
                                          static_cast<float>(t.preamble_template[l].imag()));
        }
        PAQ_CUDA_CHECK(cudaMemcpyToSymbol(c_template, tmpl.data(), sizeof tmpl));
        std::array<cuDoubleComplex, 32> tmpl_d{};
        for (int l = 0; l < 32; ++l) tmpl_d[l] = make_cuDoubleComplex(t.preamble_template[l].real(), t.preamble_template[l].imag());
        PAQ_CUDA_CHECK(cudaMemcpyToSymbol(c_template_d, tmpl_d.data(), sizeof tmpl_d));
        // X_lpi is 38 x M row-major: as a column-major M x 38 matrix it is X_lpi^T, which the
        // product uses transposed. X is M x 38 row-major: column-major 38 x M, i.e. X^T.
        // The support estimators follow, each 38 x M row-major like X_lpi: stacked, they are
        // one column-major M x 38 (S + 1) matrix.
        if (n_supports < 1 || n_supports > max_supports) throw std::logic_error("gpu estimators: unexpected number of channel supports");
        if ((t.M + cfo_block - 1) / cfo_block > static_cast<std::size_t>(max_cfo_blocks)) {
            throw std::logic_error("gpu estimators: observation range longer than the residual-offset kernel's blocks");
        }
        const std::size_t one = t.M * l_ch;
        std::vector<cuFloatComplex> a(one * (t.supports.size() + 1)), b(one);
        auto to_f = [](cf64 v) { return make_cuFloatComplex(static_cast<float>(v.real()), static_cast<float>(v.imag())); };
        for (std::size_t i = 0; i < one; ++i) {
            a[i] = to_f(t.X_lpi[i]);
            b[i] = to_f(t.X[i]);
        }
        std::array<int, max_supports> first{}, last{};
        std::array<double, max_supports> gain{}, outside{};
        for (std::size_t s = 0; s < t.supports.size(); ++s) {
            for (std::size_t i = 0; i < one; ++i) a[(s + 1) * one + i] = to_f(t.supports[s].G[i]);
            first[s] = t.supports[s].first_tap;
            last[s] = t.supports[s].last_tap;
            gain[s] = t.supports[s].noise_gain;
            outside[s] = t.supports[s].outside_noise_gain;
        }
        const auto& rx = dsp::soqpsk_autocorrelation();
        if (rx.size() < static_cast<std::size_t>(l_ch)) throw std::logic_error("gpu estimators: autocorrelation shorter than the channel");
        std::array<double, l_ch> rx_re{}, rx_im{};
        for (int k = 0; k < l_ch; ++k) {
            rx_re[static_cast<std::size_t>(k)] = rx[static_cast<std::size_t>(k)].real();
            rx_im[static_cast<std::size_t>(k)] = rx[static_cast<std::size_t>(k)].imag();
        }
        PAQ_CUDA_CHECK(cudaMemcpyToSymbol(c_support_first, first.data(), sizeof first));
        PAQ_CUDA_CHECK(cudaMemcpyToSymbol(c_support_last, last.data(), sizeof last));
        PAQ_CUDA_CHECK(cudaMemcpyToSymbol(c_support_noise_gain, gain.data(), sizeof gain));
        PAQ_CUDA_CHECK(cudaMemcpyToSymbol(c_support_noise_penalty, &t.support_noise_penalty, sizeof t.support_noise_penalty));
        PAQ_CUDA_CHECK(cudaMemcpyToSymbol(c_support_outside_gain, outside.data(), sizeof outside));
        PAQ_CUDA_CHECK(cudaMemcpyToSymbol(c_rx_re, rx_re.data(), sizeof rx_re));
        PAQ_CUDA_CHECK(cudaMemcpyToSymbol(c_rx_im, rx_im.data(), sizeof rx_im));
        PAQ_CUDA_CHECK(cudaMemcpy(x_lpi_cm.data(), a.data(), a.size() * sizeof(cuFloatComplex), cudaMemcpyHostToDevice));
        PAQ_CUDA_CHECK(cudaMemcpy(x_cm.data(), b.data(), b.size() * sizeof(cuFloatComplex), cudaMemcpyHostToDevice));
    }

    void upload(std::span<const cf32> w)
    {
        if (w.size() > max_window) throw std::invalid_argument("gpu estimators: window larger than at Create");
        PAQ_CUDA_CHECK(cudaSetDevice(device));
        PAQ_CUDA_CHECK(cudaMemcpyAsync(window.data(), w.data(), w.size() * sizeof(cf32), cudaMemcpyHostToDevice, st.get()));
        window_len = w.size();
    }

    /// Chunk [b, e) of the host window up on the copy stream: into dst, or for ci16 into
    /// raw16 (converted by convert_chunk once the copy is in).
    void copy_chunk(const host_window& w, cuFloatComplex* dst, std::size_t b, std::size_t e)
    {
        if (e <= b) return;
        if (w.channels > 1) {
            PAQ_CUDA_CHECK(cudaMemcpyAsync(pairs.data() + b, static_cast<const cf32x2*>(w.data) + b, (e - b) * sizeof(cf32x2),
                                           cudaMemcpyHostToDevice, copy_st.get()));
        } else if (w.is_ci16()) {
            PAQ_CUDA_CHECK(cudaMemcpyAsync(raw16.data() + b, static_cast<const ci16*>(w.data) + b, (e - b) * sizeof(ci16),
                                           cudaMemcpyHostToDevice, copy_st.get()));
        } else {
            PAQ_CUDA_CHECK(cudaMemcpyAsync(dst + b, static_cast<const cf32*>(w.data) + b, (e - b) * sizeof(cf32), cudaMemcpyHostToDevice,
                                           copy_st.get()));
        }
    }
    /// For ci16: chunk [b, e) converted into dst, on the compute stream (after its copy). For
    /// two channels: split into dst (channel 0) and dst + stride (channel 1).
    void convert_chunk(const host_window& w, cuFloatComplex* dst, std::size_t b, std::size_t e, std::size_t stride)
    {
        if (e > b && w.channels > 1) {
            const std::size_t n = e - b;
            const auto blocks = static_cast<unsigned>(std::min<std::size_t>((n + 255) / 256, 65535));
            deinterleave_kernel<<<blocks, 256, 0, st.get()>>>(pairs.data() + b, n, dst + b, stride);
            PAQ_CUDA_CHECK_LAUNCH();
            return;
        }
        if (e <= b || !w.is_ci16()) return;
        const std::size_t n = e - b;
        const auto blocks = static_cast<unsigned>(std::min<std::size_t>((n + 255) / 256, 65535));
        ci16_to_cf32_kernel<<<blocks, 256, 0, st.get()>>>(raw16.data() + b, n, w.ci16_scale, dst + b);
        PAQ_CUDA_CHECK_LAUNCH();
    }
    /// M(u) for u in [b, b + cnt) into `metric`: of the one channel, or the channels' larger.
    void metric_range(std::size_t b, std::size_t cnt)
    {
        const auto blocks = static_cast<unsigned>((cnt + metric_block - 1) / metric_block);
        metric_kernel<<<blocks, metric_threads, 0, st.get()>>>(window.data() + b, cnt, metric.data() + b);
        PAQ_CUDA_CHECK_LAUNCH();
        if (channels > 1) {
            metric_kernel<<<blocks, metric_threads, 0, st.get()>>>(window.data() + max_window + b, cnt, metric2.data() + b);
            PAQ_CUDA_CHECK_LAUNCH();
            launch_max(metric.data() + b, metric2.data() + b, cnt, st.get());
        }
    }
    /// Checks a window for this front end's channel count.
    void check_channels(const host_window& w) const
    {
        if (w.channels != channels) {
            throw std::invalid_argument("gpu estimators: a window of " + std::to_string(w.channels) + " receive channel(s) for a front end of " +
                                        std::to_string(channels));
        }
    }
};

namespace {
int checked_channels(int channels)
{
    if (channels < 1 || channels > 2) throw std::invalid_argument("gpu estimators: 1 or 2 receive channels, not " + std::to_string(channels));
    return channels;
}
}  // namespace

estimators::estimators(int device_id, std::size_t max_window_samples, std::size_t max_packets, const dsp::resampler_design* input_design,
                     std::size_t max_input_samples, int channels)
    : impl_(std::make_unique<impl>(device_id, max_window_samples, max_packets, input_design, max_input_samples, checked_channels(channels)))
{
}

estimators::~estimators() = default;

void estimators::preamble_metric(std::span<const cf32> window, std::span<float> metric_out)
{
    auto& m = *impl_;
    if (window.size() < dsp::detector_span) return;
    const std::size_t n_metric = window.size() - dsp::detector_span + 1;
    if (metric_out.size() < n_metric) throw std::invalid_argument("gpu estimators: metric_out too small");
    if (m.channels != 1) throw std::logic_error("gpu estimators: preamble_metric takes one receive channel");
    m.upload(window);
    const unsigned blocks = static_cast<unsigned>((n_metric + metric_block - 1) / metric_block);
    metric_kernel<<<blocks, metric_threads, 0, m.st.get()>>>(m.window.data(), n_metric, m.metric.data());
    PAQ_CUDA_CHECK_LAUNCH();
    PAQ_CUDA_CHECK(cudaMemcpyAsync(metric_out.data(), m.metric.data(), n_metric * sizeof(float), cudaMemcpyDeviceToHost, m.st.get()));
    m.st.synchronize();
}

void estimators::upload_window(std::span<const cf32> window)
{
    if (impl_->channels != 1) throw std::logic_error("gpu estimators: upload_window takes one receive channel; two go up by upload_and_metric_device");
    impl_->upload(window);
}

void estimators::upload_and_metric_device(host_window window, cuda_event_t upload_after)
{
    auto& m = *impl_;
    if (window.size > m.max_window) throw std::invalid_argument("gpu estimators: window larger than at Create");
    if (window.size < dsp::detector_span) throw std::invalid_argument("gpu estimators: window shorter than the metric span");
    m.check_channels(window);
    PAQ_CUDA_CHECK(cudaSetDevice(m.device));
    const std::size_t len = window.size;
    const std::size_t n_metric = len - dsp::detector_span + 1;
    m.window_len = len;
    // The copy stream waits for the compute stream: the window buffer is free again.
    PAQ_CUDA_CHECK(cudaEventRecord(m.chunk_done[0].get(), m.st.get()));
    PAQ_CUDA_CHECK(cudaStreamWaitEvent(m.copy_st.get(), m.chunk_done[0].get(), 0));
    if (upload_after) PAQ_CUDA_CHECK(cudaStreamWaitEvent(m.copy_st.get(), upload_after, 0));
    std::size_t metric_done = 0;
    for (int c = 0; c < impl::upload_chunks; ++c) {
        const std::size_t b = len * c / impl::upload_chunks, e = len * (c + 1) / impl::upload_chunks;
        m.copy_chunk(window, m.window.data(), b, e);
        PAQ_CUDA_CHECK(cudaEventRecord(m.chunk_done[c].get(), m.copy_st.get()));
        PAQ_CUDA_CHECK(cudaStreamWaitEvent(m.st.get(), m.chunk_done[c].get(), 0));
        m.convert_chunk(window, m.window.data(), b, e, m.max_window);
        // Metric values whose 256 samples have all arrived.
        const std::size_t ready = c + 1 == impl::upload_chunks ? n_metric : (e >= dsp::detector_span ? std::min(n_metric, e - dsp::detector_span + 1) : 0);
        if (ready > metric_done) {
            m.metric_range(metric_done, ready - metric_done);
            metric_done = ready;
        }
    }
}

void estimators::upload_resample_and_metric_device(host_window input, dsp::fixed_pos first_pos, dsp::fixed_pos step,
                                                 std::size_t n_out, cuda_event_t upload_after)
{
    auto& m = *impl_;
    if (!m.input_rs) throw std::logic_error("gpu estimators: resampling upload without an input design at Create");
    if (input.size > m.max_input) throw std::invalid_argument("gpu estimators: input window larger than at Create");
    if (n_out > m.max_window) throw std::invalid_argument("gpu estimators: resampled window larger than at Create");
    if (n_out < dsp::detector_span) throw std::invalid_argument("gpu estimators: resampled window shorter than the metric span");
    m.check_channels(input);
    PAQ_CUDA_CHECK(cudaSetDevice(m.device));
    const std::size_t len = input.size;
    const std::size_t n_metric = n_out - dsp::detector_span + 1;
    const int taps = m.input_rs->taps();
    m.window_len = n_out;
    auto* out = reinterpret_cast<cf32*>(m.window.data());
    const auto* in = reinterpret_cast<const cf32*>(m.input.data());
    PAQ_CUDA_CHECK(cudaEventRecord(m.chunk_done[0].get(), m.st.get()));
    PAQ_CUDA_CHECK(cudaStreamWaitEvent(m.copy_st.get(), m.chunk_done[0].get(), 0));
    if (upload_after) PAQ_CUDA_CHECK(cudaStreamWaitEvent(m.copy_st.get(), upload_after, 0));
    std::size_t resampled = 0, metric_done = 0;
    m.resample_pairs = 0;
    for (int c = 0; c < impl::upload_chunks; ++c) {
        const std::size_t b = len * c / impl::upload_chunks, e = len * (c + 1) / impl::upload_chunks;
        m.copy_chunk(input, m.input.data(), b, e);
        PAQ_CUDA_CHECK(cudaEventRecord(m.chunk_done[c].get(), m.copy_st.get()));
        PAQ_CUDA_CHECK(cudaStreamWaitEvent(m.st.get(), m.chunk_done[c].get(), 0));
        m.convert_chunk(input, m.input.data(), b, e, m.max_input);
        // Outputs whose filter has all its inputs (the last chunk: all, edges reading zeros),
        // then the metric values whose 256 outputs are there.
        const bool last = c + 1 == impl::upload_chunks;
        const std::size_t ready = last ? n_out : resampled_ready(e, first_pos, step, taps, n_out);
        if (ready > resampled) {
            if (m.resample_timed) PAQ_CUDA_CHECK(cudaEventRecord(m.resample_ev[2 * m.resample_pairs].get(), m.st.get()));
            for (int ch = 0; ch < m.channels; ++ch) {
                m.input_rs->resample_device(in + ch * m.max_input, len, first_pos + static_cast<dsp::fixed_pos>(resampled) * step, step,
                                            out + ch * m.max_window + resampled, ready - resampled, m.st.get());
            }
            if (m.resample_timed) PAQ_CUDA_CHECK(cudaEventRecord(m.resample_ev[2 * m.resample_pairs++ + 1].get(), m.st.get()));
            resampled = ready;
        }
        const std::size_t ready_metric = last ? n_metric : (resampled >= dsp::detector_span ? std::min(n_metric, resampled - dsp::detector_span + 1) : 0);
        if (ready_metric > metric_done) {
            m.metric_range(metric_done, ready_metric - metric_done);
            metric_done = ready_metric;
        }
    }
}

void estimators::peak_metrics_device(const long long* starts, const int* count, std::size_t slots, int template_offset)
{
    auto& m = *impl_;
    if (slots > m.max_packets) throw std::invalid_argument("gpu estimators: more slots than at Create");
    if (slots == 0) return;
    PAQ_CUDA_CHECK(cudaSetDevice(m.device));
    const auto n_metric = m.window_len >= dsp::detector_span ? static_cast<long long>(m.window_len - dsp::detector_span + 1) : 0LL;
    for (int ch = 0; ch < m.channels; ++ch) {
        peak_metrics_kernel<<<static_cast<unsigned>(slots), 32, 0, m.st.get()>>>(m.window.data() + ch * m.max_window, n_metric, starts, count,
                                                                                template_offset, m.peak_metrics.data() + ch * 3 * m.max_packets);
        PAQ_CUDA_CHECK_LAUNCH();
    }
    // Two channels: the larger of the channels' values, as the combined metric is.
    if (m.channels > 1) launch_max(m.peak_metrics.data(), m.peak_metrics.data() + 3 * m.max_packets, 3 * slots, m.st.get());
}

void estimators::enable_resample_timing(bool on) noexcept { impl_->resample_timed = on; }

double estimators::resample_ms() const
{
    auto& m = *impl_;
    double ms = 0.0;
    for (int i = 0; i < m.resample_pairs; ++i) ms += m.resample_ev[2 * i + 1].elapsed_ms_since(m.resample_ev[2 * i]);
    return ms;
}

const double* estimators::device_peak_metrics() const noexcept { return impl_->peak_metrics.data(); }

std::vector<cf32> estimators::window_to_host()
{
    auto& m = *impl_;
    std::vector<cf32> w(m.window_len);
    PAQ_CUDA_CHECK(cudaSetDevice(m.device));
    PAQ_CUDA_CHECK(cudaMemcpyAsync(w.data(), m.window.data(), w.size() * sizeof(cf32), cudaMemcpyDeviceToHost, m.st.get()));
    m.st.synchronize();
    return w;
}

const float* estimators::device_metric() const noexcept { return impl_->metric.data(); }
const cf32* estimators::device_window(int channel) const noexcept
{
    return reinterpret_cast<const cf32*>(impl_->window.data() + static_cast<std::size_t>(channel) * impl_->max_window);
}

int estimators::channels() const noexcept { return impl_->channels; }

cuda_event_t estimators::upload_done() const noexcept { return impl_->chunk_done[impl::upload_chunks - 1].get(); }

void estimators::estimate_device(std::span<const long long> starts)
{
    auto& m = *impl_;
    const std::size_t np = starts.size();
    if (np == 0) return;
    if (np > m.max_packets) throw std::invalid_argument("gpu estimators: more packets than at Create");
    PAQ_CUDA_CHECK(cudaSetDevice(m.device));
    std::copy(starts.begin(), starts.end(), m.starts_host.data());
    PAQ_CUDA_CHECK(cudaMemcpyAsync(m.starts.data(), m.starts_host.data(), np * sizeof(long long), cudaMemcpyHostToDevice, m.st.get()));

    gather_device(m.starts.data(), nullptr, np, nullptr);
    m.estimate_stages(np);
}

void estimators::estimate_device(const long long* starts, const int* count, std::size_t slots)
{
    estimate_device(starts, count, slots, nullptr);
}

void estimators::gather_device(const long long* starts, const int* count, std::size_t slots, const dsp::fixed_pos* steps)
{
    auto& m = *impl_;
    if (slots > m.max_packets) throw std::invalid_argument("gpu estimators: more slots than at Create");
    if (slots == 0) return;
    PAQ_CUDA_CHECK(cudaSetDevice(m.device));
    const dim3 gather_grid((seg_stride + 255) / 256, static_cast<unsigned>(slots));
    for (int ch = 0; ch < m.channels; ++ch) {
        const std::size_t slot0 = static_cast<std::size_t>(ch) * m.max_packets;
        PAQ_CUDA_CHECK(cudaMemsetAsync(m.nonfinite.data() + slot0, 0, slots * sizeof(unsigned), m.st.get()));
        gather_kernel<<<gather_grid, 256, 0, m.st.get()>>>(m.window.data() + ch * m.max_window, static_cast<long long>(m.window_len), starts,
                                                           count, steps, reinterpret_cast<const float2*>(m.clock_table.table()),
                                                           m.clock_table.taps(), m.seg.data() + slot0 * seg_stride, m.nonfinite.data() + slot0);
        PAQ_CUDA_CHECK_LAUNCH();
    }
}

void estimators::estimate_device(const long long* starts, const int* count, std::size_t slots, const dsp::fixed_pos* steps)
{
    estimate_device(starts, count, slots, steps, nullptr);
}

void estimators::estimate_device(const long long* starts, const int* count, std::size_t slots, const dsp::fixed_pos* steps,
                                double* iq_sums)
{
    if (slots == 0) return;
    gather_device(starts, count, slots, steps);
    auto& m = *impl_;
    if (iq_sums != nullptr) {
        for (int ch = 0; ch < m.channels; ++ch) {
            const std::size_t slot0 = static_cast<std::size_t>(ch) * m.max_packets;
            iq_dc_correct_device(reinterpret_cast<cf32*>(m.seg.data() + slot0 * seg_stride), seg_stride, seg_len, count, slots,
                                 iq_sums + slot0 * iq_dc_sums_per_slot, m.st.get());
        }
    }
    m.estimate_stages(slots);
}

namespace {

/// w0 += dw per packet, on every channel's slot (the channels' slots `slots` apart).
__global__ void add_offset_kernel(double* __restrict__ w0, const double* __restrict__ dw, int packets, int channels, std::size_t slots)
{
    const int p = blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= packets) return;
    for (int c = 0; c < channels; ++c) w0[static_cast<std::size_t>(p) + c * slots] += dw[p];
}

}  // namespace

void estimators::correct_carrier_device(const double* dw, std::size_t np)
{
    auto& m = *impl_;
    if (np == 0) return;
    if (np > m.max_packets) throw std::invalid_argument("gpu estimators: more packets than at Create");
    add_offset_kernel<<<static_cast<unsigned>((np + 127) / 128), 128, 0, m.st.get()>>>(m.w0.data(), dw, static_cast<int>(np), m.channels,
                                                                                       m.max_packets);
    PAQ_CUDA_CHECK_LAUNCH();
    for (int ch = 0; ch < m.channels; ++ch) {
        cuFloatComplex* seg = m.seg.data() + static_cast<std::size_t>(ch) * m.max_packets * seg_stride;
        const dim3 grid((seg_len + 255) / 256, static_cast<unsigned>(np));
        derotate_kernel<<<grid, 256, 0, m.st.get()>>>(seg, dw, dsp::carrier_centre(m.t));
        PAQ_CUDA_CHECK_LAUNCH();
    }
}

void estimators::impl::estimate_stages(std::size_t np)
{
    auto& m = *this;
    const std::size_t mp = m.max_packets;
    if (m.channels == 1) {
        cfo_kernel<1><<<static_cast<unsigned>(np), 256, 0, m.st.get()>>>(m.seg.data(), m.w0.data(), mp, nullptr);
    } else {
        cfo_kernel<2><<<static_cast<unsigned>(np), 256, 0, m.st.get()>>>(m.seg.data(), m.w0.data(), mp, m.cfo_weight.data());
    }
    PAQ_CUDA_CHECK_LAUNCH();

    const int M = static_cast<int>(m.t.M), P = static_cast<int>(np);
    const int rows = l_ch * (m.n_supports + 1);
    // C = A^T B on this part's stream (gpu/product.hpp).
    auto product = [&](int rows_c, int cols_c, int depth, const cuFloatComplex* a, int lda, const cuFloatComplex* b, int ldb, cuFloatComplex* c,
                       int ldc) {
        product_tn(rows_c, cols_c, depth, reinterpret_cast<const cf32*>(a), lda, reinterpret_cast<const cf32*>(b), ldb, reinterpret_cast<cf32*>(c),
                   ldc, m.st.get());
    };
    // Each channel's slots start mp slots after the previous channel's.
    auto seg_of = [&](int ch) { return m.seg.data() + static_cast<std::size_t>(ch) * mp * seg_stride; };
    auto obs_of = [&](int ch) { return m.obs.data() + static_cast<std::size_t>(ch) * mp * m.t.M; };
    auto fit_of = [&](int ch) { return m.fit.data() + static_cast<std::size_t>(ch) * mp * m.t.M; };
    auto slot_of = [&](auto* base, int ch) { return base + static_cast<std::size_t>(ch) * mp; };
    // dsp::refine_cfo: the observation ranges copied out derotated by w0; per pass the pilot
    // estimate alone (the first 38 rows of H_all), its fit, the block phases against it
    // (dsp::estimate_cfo_residual: w0 += dw), the copies derotated by dw.
    const dim3 ogrid(static_cast<unsigned>((M + 255) / 256), static_cast<unsigned>(np));
    for (int ch = 0; ch < m.channels; ++ch) {
        obs_rotate_kernel<<<ogrid, 256, 0, m.st.get()>>>(seg_of(ch), true, m.t.obs_first, M, slot_of(m.w0.data(), ch), obs_of(ch));
        PAQ_CUDA_CHECK_LAUNCH();
    }
    for (int pass = 0; pass < dsp::cfo_refine_passes; ++pass) {
        for (int ch = 0; ch < m.channels; ++ch) {
            product(l_ch, P, M, m.x_lpi_cm.data(), M, obs_of(ch), M, m.h_all.data(), rows);
            product(M, P, l_ch, m.x_cm.data(), l_ch, m.h_all.data(), rows, fit_of(ch), M);
        }
        if (m.channels == 1) {
            cfo_residual_kernel<1><<<static_cast<unsigned>(np), 256, 0, m.st.get()>>>(m.obs.data(), m.t.obs_first, M, m.fit.data(), m.dw.data(),
                                                                                     m.w0.data(), mp, nullptr);
        } else {
            cfo_residual_kernel<2><<<static_cast<unsigned>(np), 256, 0, m.st.get()>>>(m.obs.data(), m.t.obs_first, M, m.fit.data(), m.dw.data(),
                                                                                     m.w0.data(), mp, m.cfo_weight.data());
        }
        PAQ_CUDA_CHECK_LAUNCH();
        if (pass + 1 < dsp::cfo_refine_passes) {
            for (int ch = 0; ch < m.channels; ++ch) {
                obs_rotate_kernel<<<ogrid, 256, 0, m.st.get()>>>(seg_of(ch), false, m.t.obs_first, M, slot_of(m.dw.data(), ch), obs_of(ch));
                PAQ_CUDA_CHECK_LAUNCH();
            }
        }
    }
    for (int ch = 0; ch < m.channels; ++ch) {
        // The packet derotated once, by w0 plus the correction.
        const dim3 grid((seg_len + 255) / 256, static_cast<unsigned>(np));
        derotate_kernel<<<grid, 256, 0, m.st.get()>>>(seg_of(ch), slot_of(m.w0.data(), ch));
        PAQ_CUDA_CHECK_LAUNCH();

        // H_all (38 (S + 1) x P) = [X_lpi; G_1 .. G_S] (38 (S + 1) x M) * OBS (M x P); OBS
        // column p is the packet's observation range inside its segment (leading dimension
        // seg_stride).
        const cuFloatComplex* obs = seg_of(ch) + pre + m.t.obs_first;
        product(rows, P, M, m.x_lpi_cm.data(), M, obs, seg_stride, m.h_all.data(), rows);
        // Fit (M x P) = X (M x 38) * pilot (38 x P), then the residual energy per packet.
        product(M, P, l_ch, m.x_cm.data(), l_ch, m.h_all.data(), rows, fit_of(ch), M);
        noise_kernel<<<static_cast<unsigned>(np), 256, 0, m.st.get()>>>(seg_of(ch), m.t.obs_first, M, fit_of(ch), m.t.rho,
                                                                       slot_of(m.sigma2.data(), ch));
        PAQ_CUDA_CHECK_LAUNCH();
        support_kernel<<<static_cast<unsigned>(np), 32, 0, m.st.get()>>>(m.h_all.data(), m.n_supports, slot_of(m.sigma2.data(), ch),
                                                                        m.h.data() + static_cast<std::size_t>(ch) * mp * l_ch,
                                                                        slot_of(m.support.data(), ch));
        PAQ_CUDA_CHECK_LAUNCH();
    }
}

estimators::device_results estimators::device(int channel) noexcept
{
    auto& m = *impl_;
    const std::size_t slot0 = static_cast<std::size_t>(channel) * m.max_packets;
    return {reinterpret_cast<cf32*>(m.seg.data() + slot0 * seg_stride), reinterpret_cast<cf32*>(m.h.data() + slot0 * l_ch), m.w0.data() + slot0,
            m.sigma2.data() + slot0, m.nonfinite.data() + slot0, m.support.data() + slot0, m.st.get()};
}

std::vector<packet_estimate> estimators::estimate(std::span<const cf32> window, std::span<const long long> starts)
{
    auto& m = *impl_;
    const std::size_t np = starts.size();
    std::vector<packet_estimate> out(np);
    if (np == 0) return out;
    if (np > m.max_packets) throw std::invalid_argument("gpu estimators: more packets than at Create");
    upload_window(window);
    estimate_device(starts);
    PAQ_CUDA_CHECK(cudaMemcpyAsync(m.h_host.data(), m.h.data(), np * l_ch * sizeof(cf32), cudaMemcpyDeviceToHost, m.st.get()));
    PAQ_CUDA_CHECK(cudaMemcpyAsync(m.w0_host.data(), m.w0.data(), np * sizeof(double), cudaMemcpyDeviceToHost, m.st.get()));
    PAQ_CUDA_CHECK(cudaMemcpyAsync(m.sigma2_host.data(), m.sigma2.data(), np * sizeof(double), cudaMemcpyDeviceToHost, m.st.get()));
    PAQ_CUDA_CHECK(cudaMemcpyAsync(m.nonfinite_host.data(), m.nonfinite.data(), np * sizeof(unsigned), cudaMemcpyDeviceToHost, m.st.get()));
    PAQ_CUDA_CHECK(cudaMemcpyAsync(m.support_host.data(), m.support.data(), np * sizeof(int), cudaMemcpyDeviceToHost, m.st.get()));
    m.st.synchronize();
    for (std::size_t p = 0; p < np; ++p) {
        out[p].cfo_rad_per_sample = m.w0_host[p];
        out[p].sigma2 = m.sigma2_host[p];
        out[p].nonfinite_samples = m.nonfinite_host[p];
        out[p].support = m.support_host[p];
        for (int a = 0; a < l_ch; ++a) out[p].h[static_cast<std::size_t>(a)] = m.h_host[p * l_ch + static_cast<std::size_t>(a)];
    }
    return out;
}

}  // namespace paq::gpu
