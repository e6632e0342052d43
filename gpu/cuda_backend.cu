#include "gpu/cuda_backend.hpp"

#include "dsp/batch.hpp"
#include "dsp/batcher.hpp"
#include "dsp/clock_recovery.hpp"
#include "dsp/decision_quality.hpp"
#include "dsp/fec_stream.hpp"
#include "dsp/sxs_soft.hpp"
#include "dsp/detector.hpp"
#include "dsp/equalizers.hpp"
#include "dsp/fft.hpp"
#include "dsp/input_stage.hpp"
#include "dsp/iq_correction.hpp"
#include "dsp/preamble_detector.hpp"
#include "dsp/trellis.hpp"
#include "dsp/receiver_tables.hpp"
#include "dsp/soqpsk.hpp"
#include "gpu/channel_terms.cuh"
#include "gpu/combining.hpp"
#include "gpu/equalizers.hpp"
#include "gpu/fec_stream.cuh"
#include "gpu/iq_correction.hpp"
#include "gpu/ldpc_decoder.hpp"
#include "gpu/detector.hpp"
#include "gpu/device.hpp"
#include "gpu/estimators.hpp"
#include "gpu/nvtx.hpp"
#include "gpu/preamble_detector.hpp"
#include "gpu/paths.cuh"
#include "gpu/trellis.cuh"
#include "gpu/resources.cuh"
#include "gpu/smem_fft.cuh"
#include "gpu/equalizers.hpp"

#include <cuComplex.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <cmath>
#include <functional>
#include <future>
#include <limits>
#include <numbers>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

namespace paq::gpu {

namespace {

using namespace dsp::chain;
constexpr int n_fft = static_cast<int>(estimators::segment_stride);
constexpr int pre = static_cast<int>(dsp::packet_margin);
/// Waits until `query` (cudaEventQuery or cudaStreamQuery of what the host waits on) stops
/// answering cudaErrorNotReady, calling `pump` between queries while it reports work left to
/// queue; once it reports none, returns at once (the caller then blocks in the synchronize
/// call that also reports the device's errors).
template <class Query>
void wait_pumping(Query&& query, const std::function<bool()>& pump)
{
    while (pump()) {
        const cudaError_t e = query();
        if (e != cudaErrorNotReady) return;  // done, or an error the caller's synchronize reports
        std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
}

/// The most threads of the host's loops over a part's packets (its records, the copy of its
/// bits out of the pinned buffers; OMP_NUM_THREADS, when lower, is kept). A team of every core
/// (OpenMP's default) waits at its barrier for any of its threads that shares a core with other
/// work: on a 16-core H100 host a default batch took 71.4 ms in place of 14.3 ms beside one
/// process reading a file; beside a busy loop, with four threads (OMP_NUM_THREADS=4), 14.2 ms
/// (docs/PERFORMANCE.md, "Other work on the host").
constexpr int host_loop_threads = 4;
int host_loop_team() { return std::min(host_loop_threads, omp_get_max_threads()); }

/// Events between the device stages: one before the first, one after each.
constexpr int stage_count_events = cuda_backend::stage_count;

namespace dq = dsp::decision_quality;

/// Threads of the kernels that read a stream's statistics as a block.
constexpr int stream_block_threads = 256;

/// v summed over the warp, the total given to every lane (a butterfly: every lane adds in the
/// same order, so all hold the same sum; lane 0's is the sum a shuffle-down tree gives it).
__device__ inline double warp_total(double v)
{
#pragma unroll
    for (int off = 16; off > 0; off /= 2) v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}

/// Sums each of `values` per-thread partial sums over the whole block into total (shared):
/// a warp's by shuffles, then the warps' in shared memory.
template <int values>
__device__ void block_sum(const float (&own)[values], double* total)
{
    constexpr int warps = stream_block_threads / 32;
    __shared__ double part[values][warps];
    const int lane = static_cast<int>(threadIdx.x) % 32, warp = static_cast<int>(threadIdx.x) / 32;
#pragma unroll
    for (int j = 0; j < values; ++j) {
        const double v = warp_total(static_cast<double>(own[j]));
        if (lane == 0) part[j][warp] = v;
    }
    __syncthreads();
    if (threadIdx.x < values) {
        double v = 0.0;
        for (int w = 0; w < warps; ++w) v += part[threadIdx.x][w];
        total[threadIdx.x] = v;
    }
    __syncthreads();
}

/// Streams (a warp each) a block of decision_quality_kernel.
constexpr int quality_warps = 8;

/// The decision quality of one stream's 6144 statistics by one warp, in dq::fit_of's two passes
/// (the moments, then the deviations about each context's centre), returned to every lane.
/// A lane's bits (stride 32) are summed in single precision 24 at a time (relative error about
/// 1e-6), those runs and the lanes' totals in double. Each context's inversion (Newton's steps
/// on erf and exp in double, the costly part) is made by lanes of its own (lane % 4) and handed
/// to the others; the pooled two-point part and the BEP by every lane alike. A warp a stream,
/// many warps an SM: one stream's chain of dependent double operations overlaps the others'
/// (with a block a stream, seven warps waited at a barrier while one inverted; 218 us a part
/// of 779 packets on an H100).
__device__ double warp_quality(const float* __restrict__ x)
{
    constexpr int nd = static_cast<int>(waveform::data_bits), nc = dq::contexts, per_lane = nd / 32, run = 24;
    static_assert(nd % 32 == 0 && per_lane % run == 0);
    const int lane = static_cast<int>(threadIdx.x) % 32;
    const auto at = [&](int r) { return static_cast<std::size_t>(r * 32 + lane); };  // the lane's r-th bit
    // Each context's sums in registers (a context index into an array would put it in local
    // memory): every bit adds to the one it falls in.
    dq::moments m;
    {
        double sums[3 * nc] = {};
        for (int r0 = 0; r0 < per_lane; r0 += run) {
            float part[3 * nc] = {};
#pragma unroll 4
            for (int r = r0; r < r0 + run; ++r) {
                const std::size_t i = at(r);
                const int c = dq::context_at(x, nd, i);
                const float xi = x[i], a = fabsf(xi), sq = xi * xi;
#pragma unroll
                for (int k = 0; k < nc; ++k) {
                    const bool on = c == k;
                    part[k] += on ? 1.0f : 0.0f;
                    part[nc + k] += on ? a : 0.0f;
                    part[2 * nc + k] += on ? sq : 0.0f;
                }
            }
#pragma unroll
            for (int k = 0; k < 3 * nc; ++k) sums[k] += static_cast<double>(part[k]);
        }
#pragma unroll
        for (int k = 0; k < nc; ++k) {
            m.count[k] = warp_total(sums[k]);
            m.abs_sum[k] = warp_total(sums[nc + k]);
            m.sq_sum[k] = warp_total(sums[2 * nc + k]);
        }
    }
    const int own = lane % nc;  // the context this lane inverts
    const double own_snr = dq::context_snr(m, own);
    const float own_centre = static_cast<float>(dq::context_centre(m, own, own_snr));
    double snr[nc];
    float centre[nc];
#pragma unroll
    for (int k = 0; k < nc; ++k) {
        snr[k] = __shfl_sync(0xffffffffu, own_snr, k);
        centre[k] = __shfl_sync(0xffffffffu, own_centre, k);
    }
    {
        double dev[nc] = {};
        for (int r0 = 0; r0 < per_lane; r0 += run) {
            float part[nc] = {};
#pragma unroll 4
            for (int r = r0; r < r0 + run; ++r) {
                const std::size_t i = at(r);
                const int c = dq::context_at(x, nd, i);
                const float a = fabsf(x[i]);
#pragma unroll
                for (int k = 0; k < nc; ++k) part[k] += c == k ? fabsf(a - centre[k]) : 0.0f;
            }
#pragma unroll
            for (int k = 0; k < nc; ++k) dev[k] += static_cast<double>(part[k]);
        }
#pragma unroll
        for (int k = 0; k < nc; ++k) m.dev_sum[k] = warp_total(dev[k]);
    }
    const double split = dq::two_point_split(m, snr);
    const double own_p = dq::error_probability(dq::model_of(m, own, own_snr, split));
    double p[nc];
#pragma unroll
    for (int k = 0; k < nc; ++k) p[k] = __shfl_sync(0xffffffffu, own_p, k);
    return dq::mean_error_probability(m, p);  // dq::bep's mean
}

/// Each located packet's symbol-by-symbol streams' BEP estimates (dsp/decision_quality.hpp,
/// as dsp::cpu_backend makes them) from the statistics their bits were decided on: a warp per
/// (packet, path) stream, stream s's statistics at sxs_stat[s * 6144], its estimate into
/// stats[s]; `streams` of them (the part's slots), those of packets past *located left alone.
__global__ void __launch_bounds__(32 * quality_warps) decision_quality_kernel(const float* __restrict__ sxs_stat,
                                                                             const int* __restrict__ located, int streams,
                                                                             dsp::path_stats* __restrict__ stats)
{
    const int s = static_cast<int>(blockIdx.x) * quality_warps + static_cast<int>(threadIdx.x) / 32;
    if (s >= streams || s / num_paths >= *located) return;  // the whole warp
    const double bep = warp_quality(sxs_stat + static_cast<std::size_t>(s) * waveform::data_bits);
    if (threadIdx.x % 32 == 0) stats[s].bep_estimate = static_cast<float>(bep);
}

namespace ss = dsp::sxs_soft;

/// Sums each of `values` per-thread values over the block per parity of the thread (a thread's
/// bits, stride stream_block_threads, are all of its own parity), in a fixed order: a warp's
/// lanes of one parity by shuffles, then the warps'. total[q * values + j] (shared).
template <int values>
__device__ void block_sum_by_parity(const float (&own)[values], double* total)
{
    constexpr int warps = stream_block_threads / 32, nq = ss::parities;
    static_assert(32 % nq == 0 && stream_block_threads % nq == 0);
    __shared__ double part[values][warps][nq];
    const int lane = static_cast<int>(threadIdx.x) % 32, warp = static_cast<int>(threadIdx.x) / 32;
#pragma unroll
    for (int j = 0; j < values; ++j) {
        double v = static_cast<double>(own[j]);
        for (int off = 16; off >= nq; off /= 2) v += __shfl_down_sync(0xffffffffu, v, off);
        if (lane < nq) part[j][warp][lane] = v;
    }
    __syncthreads();
    for (int k = static_cast<int>(threadIdx.x); k < nq * values; k += stream_block_threads) {
        const int q = k / values, j = k % values;
        double v = 0.0;
        for (int w = 0; w < warps; ++w) v += part[j][w][q];
        total[k] = v;
    }
    __syncthreads();
}

/// One stream's symbol-by-symbol LLRs as dsp::sxs_llrs makes them (dsp/sxs_soft.hpp), by the
/// whole block: the decisions into shared memory, as bytes (for the normal equations' edge
/// products) and as words of sign bits; per parity the decisions' autocorrelations at lags
/// 0 .. 2 x reach, the sums of x_i times each term and of x_i^2 (a thread's partial sums, then
/// block_sum_by_parity); each normal equation's entry by a thread of its own from the
/// autocorrelations, less the few products the parity's edges leave out (exact integers, so the
/// system is the CPU's); the system eliminated by a warp per parity (a lane per row); the
/// residuals' sum of squares from the solution, sum x^2 - w.b (the CPU sums them); the
/// interference-free statistics u_i, the neighbours' interference from the sign bits, written
/// out with their moments summed per parity; g and s^2 made good for the decisions' errors
/// (dsp::sxs_soft::fold_errors) and the u_i scaled into LLRs in place. A statistic that is not
/// finite makes every LLR 0.
///
/// A bit's neighbours are read as one word of sign bits (bit b: the decision at i - reach + b),
/// so that the two passes over the bits take no byte loads and no conversions: the
/// autocorrelations are counts of disagreeing pairs, four lags to a register (a byte each), and
/// a term's product with x_i is x_i with its sign bit turned; every sum is the one a product at
/// a time would make, in the same order. A bit whose window lies wholly among the statistics
/// (all but the first and last few) skips the masks of the edges.
__device__ void block_sxs_llrs(const float* __restrict__ x, const float* __restrict__ dec, float* __restrict__ dst)
{
    constexpr int nd = static_cast<int>(waveform::data_bits), nq = ss::parities, nt = ss::terms, lags = 2 * ss::reach + 1;
    constexpr int per = lags + nt + 1;  // per parity: the autocorrelations, the terms' sums with x, sum x^2
    constexpr int reach = ss::reach, span = 3 * ss::reach + 1;  // a window's bits: i - reach .. i + 2 reach
    constexpr int words = nd / 32 + 3;  // the sign words, a zero word before and two after
    constexpr int counters = 8;         // the disagreement counters: lag r + 8 f in byte f of counter r
    static_assert(nd % stream_block_threads == 0 && stream_block_threads % 32 == 0 && stream_block_threads % nq == 0);
    static_assert(span <= 32 && lags <= 4 * counters && nd / stream_block_threads < 256);
    const int t = static_cast<int>(threadIdx.x), lane = t % 32;
    __shared__ signed char d[nd];
    __shared__ std::uint32_t neg[words];  // bit i % 32 of word i / 32 + 1: decision i is -1
    __shared__ double sums[nq * per];
    __shared__ double sys[nq][nt][nt + 1];
    __shared__ float fw[nq][nt];      // the weights in single precision (w[0] unused)
    __shared__ float usable[nq];      // 1: the parity's model informs, 0: its LLRs are 0
    __shared__ double gain[nq], noise[nq];  // the least-squares model's g and s^2
    __shared__ double folded[nq * 2];       // per parity: sum |u|, sum u^2 (u = x - c)
    __shared__ float scale[nq];             // 2 g / s^2 after ss::fold_errors
    bool finite = true;
    for (int i = t; i < nd; i += stream_block_threads) {
        const float v = x[i];
        finite = finite && isfinite(v);
        const int di = ss::decision(dec[i]);
        d[i] = static_cast<signed char>(di);
        const std::uint32_t w = __ballot_sync(0xffffffffu, di < 0);
        if (lane == 0) neg[i / 32 + 1] = w;
    }
    if (t == 0) neg[0] = 0u;
    if (t == 1) neg[words - 2] = 0u;
    if (t == 2) neg[words - 1] = 0u;
    if (__syncthreads_or(!finite)) {
        for (int i = t; i < nd; i += stream_block_threads) dst[i] = 0.0f;
        return;
    }
    // Bit i's window of sign bits and the mask of its bits that lie among the statistics.
    const auto window = [&](int i, std::uint32_t& valid) {
        const int lo = i - reach + 32;  // the window's first bit, counted from the zero word's
        valid = 0xffffffffu;
        if (i < reach) valid <<= reach - i;
        if (i - reach + 32 > nd) valid &= (1u << (nd - (i - reach))) - 1u;
        return __funnelshift_r(neg[lo / 32], neg[lo / 32 + 1], static_cast<unsigned>(lo % 32));
    };
    // A term's value: x (its bits xb) signed by window bit b, +0 where the bit is outside
    // (`whole`: every bit of the window is inside).
    const auto signed_by = [](std::uint32_t xb, std::uint32_t win, std::uint32_t valid, int b, auto whole) {
        std::uint32_t v = xb ^ ((win << (31 - b)) & 0x80000000u);
        if constexpr (!decltype(whole)::value) v &= 0u - ((valid >> b) & 1u);
        return __uint_as_float(v);
    };
    {
        float own[per] = {};
        std::uint32_t apart[counters] = {};  // pairs (i, i + l) decided apart, four lags a word
        const auto add = [&](float xj, std::uint32_t win, std::uint32_t valid, auto whole) {
            const std::uint32_t xb = __float_as_uint(xj);
            // Bit reach + l of y: the decisions at j and j + l differ (both among the statistics).
            std::uint32_t y = win ^ (0u - ((win >> reach) & 1u));
            if constexpr (!decltype(whole)::value) y &= valid;
#pragma unroll
            for (int r = 0; r < counters; ++r) apart[r] += (y >> (reach + r)) & 0x01010101u;
#pragma unroll
            for (int k = 0; k < nt; ++k) own[lags + k] += signed_by(xb, win, valid, reach + ss::offset_of(k), whole);
            own[per - 1] += xj * xj;
        };
        for (int j = t; j < nd; j += stream_block_threads) {
            std::uint32_t valid;
            const std::uint32_t win = window(j, valid);
            if (valid == 0xffffffffu) {
                add(x[j], win, valid, std::true_type{});
            } else {
                add(x[j], win, valid, std::false_type{});
            }
        }
        // Lag l's autocorrelation over this thread's bits: the pairs within the statistics (every
        // bit's but the last few bits'), less twice those decided apart.
#pragma unroll
        for (int l = 0; l < lags; ++l) {
            const int pairs = t < nd - l ? (nd - l - t + stream_block_threads - 1) / stream_block_threads : 0;
            const int differ = static_cast<int>((apart[l % counters] >> (8 * (l / counters))) & 0xffu);
            own[l] = static_cast<float>(pairs - 2 * differ);
        }
        block_sum_by_parity(own, sums);
    }
    for (int e = t; e < nq * nt * nt; e += stream_block_threads) {
        const int q = e / (nt * nt), r = e % (nt * nt) / nt, c = e % nt;
        sys[q][r][c] = ss::normal_entry(q, r, c, d, nd, sums, per);
        if (c == 0) sys[q][r][nt] = sums[q * per + lags + r];
    }
    __syncthreads();
    if (t / 32 < nq) {
        const int q = t / 32, lane = t % 32;
        const double tiny = ss::min_pivot * (nd / nq);
        // ss::eliminate's steps with lane r's row in registers and row k's entries broadcast
        // from lane k (the same arithmetic, entry by entry, as on the shared system); the
        // eliminated rows then back for the substitution.
        double row[nt + 1];
#pragma unroll
        for (int c = 0; c <= nt; ++c) row[c] = lane < nt ? sys[q][lane][c] : 0.0;
#pragma unroll
        for (int k = 0; k < nt; ++k) {
            const double pivot = __shfl_sync(0xffffffffu, row[k], k);
            const bool step = pivot > tiny && lane > k && lane < nt;
            const double f = row[k] / pivot;
#pragma unroll
            for (int c = k; c <= nt; ++c) {
                const double pc = __shfl_sync(0xffffffffu, row[c], k);
                if (step) row[c] -= f * pc;
            }
        }
        if (lane < nt) {
#pragma unroll
            for (int c = 0; c <= nt; ++c) sys[q][lane][c] = row[c];
        }
        __syncwarp();
        if (lane == 0) {
            double w[nt];
            ss::back_substitute(sys[q], tiny, w);
            double wb = 0.0;
            for (int k = 0; k < nt; ++k) wb += w[k] * sums[q * per + lags + k];
            const ss::parity_model md = ss::model_from(w, fmax(sums[q * per + per - 1] - wb, 0.0) / (nd / nq));
            usable[q] = md.s2 > 0.0 ? 1.0f : 0.0f;
            gain[q] = md.w[0];
            noise[q] = md.s2;
            for (int k = 1; k < nt; ++k) fw[q][k] = static_cast<float>(md.w[k]);
        }
    }
    __syncthreads();
    // u_i = x_i - c_i into dst, and their moments per parity (ss::fold_errors); then the LLRs
    // 2 g u_i / s^2 in place, each thread scaling the bits it wrote.
    {
        float own[2] = {};
        float wk[nt] = {};  // this thread's parity's weights (every bit of a thread has its parity)
#pragma unroll
        for (int k = 1; k < nt; ++k) wk[k] = fw[t % nq][k];
        for (int i = t; i < nd; i += stream_block_threads) {
            std::uint32_t valid;
            const std::uint32_t win = window(i, valid);
            const auto interference = [&](auto whole) {
                float c = 0.0f;
#pragma unroll
                for (int k = 1; k < nt; ++k) c += signed_by(__float_as_uint(wk[k]), win, valid, reach + ss::offset_of(k), whole);
                return c;
            };
            const float u = x[i] - (valid == 0xffffffffu ? interference(std::true_type{}) : interference(std::false_type{}));
            dst[i] = u;
            own[0] += fabsf(u);
            own[1] += u * u;
        }
        block_sum_by_parity(own, folded);
    }
    if (t < nq) {
        ss::parity_model md;
        md.w[0] = gain[t];
        md.s2 = noise[t];
        ss::fold_errors(md, folded[t * 2] / (nd / nq), folded[t * 2 + 1] / (nd / nq));
        scale[t] = usable[t] > 0.0f && md.s2 > 0.0 ? static_cast<float>(2.0 * md.w[0] / md.s2) : 0.0f;
    }
    __syncthreads();
    for (int i = t; i < nd; i += stream_block_threads) dst[i] *= scale[i % nq];
}

/// receiver.fec: the decoder's input, [packet][output stream][6144] LLRs, a block per (packet,
/// output stream) of the packets located (*count). Streams below sxs_streams are the
/// symbol-by-symbol detector's statistics (detector stream p * 6 + path, 6144 a stream) made
/// LLRs as dsp::sxs_llrs makes them (block_sxs_llrs); the others the trellis's LLRs of the data
/// bits (6336 a stream, the known bits first). Four blocks an SM (at most 64 registers a thread):
/// the warps that wait while two of them solve the systems are hidden by the other blocks
/// (0.55 ms for 779 packets x 6 streams on an H200, against 0.72 ms at two blocks an SM).
/// The symbol-by-symbol unequalized stream's row is posterior_bep_kernel's (its first pass),
/// which runs before this one wherever that detector does.
__global__ void __launch_bounds__(stream_block_threads, 4) fec_llr_kernel(const float* __restrict__ sxs_stat,
                                                                         const float* __restrict__ trellis_llr,
                                                                         const int* __restrict__ count, int streams,
                                                                         int sxs_streams, float* __restrict__ out)
{
    constexpr int nd = static_cast<int>(waveform::data_bits);
    const int p = static_cast<int>(blockIdx.x) / streams, st = static_cast<int>(blockIdx.x) % streams;
    if (p >= *count) return;
    if (st < sxs_streams && st == static_cast<int>(dsp::eq_path::none)) return;
    const std::size_t src_stream = static_cast<std::size_t>(p) * num_paths + static_cast<std::size_t>(st % num_paths);
    float* dst = out + static_cast<std::size_t>(blockIdx.x) * nd;
    if (st >= sxs_streams) {
        const float* src = trellis_llr + src_stream * waveform::packet_bits + waveform::known_bits;
        for (int i = static_cast<int>(threadIdx.x); i < nd; i += stream_block_threads) dst[i] = src[i];
        return;
    }
    block_sxs_llrs(sxs_stat + src_stream * nd, sxs_stat + src_stream * nd, dst);
}

/// The unequalized path's published BEP estimate, as dsp::cpu_backend makes it
/// (sxs_soft::unequalized_bep): from the decision-quality model's (stats[s],
/// decision_quality_kernel's) and dsp::sxs_posterior_bep's (the soft decisions' model fitted sxs_soft::posterior_passes
/// times, each pass's neighbours decided by the last one's LLRs; the bits' mean probability
/// against their decisions). A block per located packet; two rows of 6144 floats of scratch
/// a packet for the passes' LLRs.
/// fec_out (receiver.fec, else null): fec_llr_kernel's output, `streams` a packet. The first
/// pass's LLRs are this stream's decoder input (dsp::sxs_llrs), so they are made there, for
/// every packet, and fec_llr_kernel leaves that row to this kernel.
__global__ void __launch_bounds__(stream_block_threads, 4) posterior_bep_kernel(const float* __restrict__ sxs_stat,
                                                                               const int* __restrict__ located, float* __restrict__ scratch,
                                                                               dsp::path_stats* __restrict__ stats,
                                                                               float* __restrict__ fec_out, int streams)
{
    constexpr int nd = static_cast<int>(waveform::data_bits);
    const int p = static_cast<int>(blockIdx.x);
    if (p >= *located) return;
    const std::size_t s = static_cast<std::size_t>(p) * num_paths + static_cast<std::size_t>(dsp::eq_path::none);
    // The whole block takes these branches: below the floor the estimate is the contexts' as it is.
    const bool needed = ss::needs_posterior(static_cast<double>(stats[s].bep_estimate));
    if (!needed && fec_out == nullptr) return;
    const float* x = sxs_stat + s * nd;
    float* const rows = scratch + static_cast<std::size_t>(p) * 2 * nd;
    float* const first = fec_out != nullptr ? fec_out + (static_cast<std::size_t>(p) * streams + static_cast<std::size_t>(dsp::eq_path::none)) * nd
                                            : rows;
    block_sxs_llrs(x, x, first);
    if (!needed) return;
    const float* last = first;
    int row = first == rows ? 1 : 0;  // the scratch row the next pass writes
    for (int pass = 1; pass < ss::posterior_passes; ++pass) {
        __syncthreads();  // every bit of the last pass written before this one reads them
        float* const next = rows + static_cast<std::size_t>(row) * nd;
        block_sxs_llrs(x, last, next);
        last = next;
        row ^= 1;
    }
    __syncthreads();
    float own[1] = {};
    for (int i = static_cast<int>(threadIdx.x); i < nd; i += stream_block_threads) {
        own[0] += static_cast<float>(ss::decision_error_probability(x[i], last[i]));
    }
    __shared__ double total[1];
    block_sum(own, total);
    if (threadIdx.x == 0) {
        stats[s].bep_estimate = static_cast<float>(ss::unequalized_bep(static_cast<double>(stats[s].bep_estimate), total[0] / nd));
    }
}

__global__ void mmse_load_kernel(const double* __restrict__ sigma2, double* __restrict__ load, int np)
{
    const int p = blockIdx.x * blockDim.x + threadIdx.x;
    if (p < np) load[p] = 2.0 * sigma2[p];
}

/// The candidates of dsp::fit_single_path: tau = c / steps - N1, c = 0 .. n_cand - 1. Every
/// m - tau (m = -N1 .. N2) is then j / steps for an integer |j| <= max_j, so the sincs the
/// fit needs are sinc_table[j + max_j] = sin(x) / x, x = pi j / steps: the same double x as the
/// CPU's pi (m - tau) and the same quotient, made once per block (1185 sines instead of
/// 593 x 38; the kernel took 88 us a part of 779 packets on the H100 in those sines).
constexpr int single_path_steps = dsp::single_path_steps;
constexpr int single_path_candidates = dsp::single_path_candidates;
constexpr int single_path_max_j = (N1 + N2) * single_path_steps;

__constant__ double c_rx_re[L_ch], c_rx_im[L_ch];                 ///< dsp::soqpsk_autocorrelation, lags 0 .. 37
__constant__ double c_single_path_power[single_path_candidates];  ///< dsp::single_path_powers

/// sum_m sinc(m - tau) v_m over the channel's taps for candidate c, and sum_m sinc(m - tau)^2.
__device__ inline void sinc_projection(const cuDoubleComplex* v, const double* sinc_table, int c, double& dr, double& di, double& ss)
{
    dr = di = ss = 0.0;
    for (int m = -N1; m <= N2; ++m) {
        const double s = sinc_table[(m + N1) * single_path_steps - c + single_path_max_j];
        dr += s * v[m + N1].x;
        di += s * v[m + N1].y;
        ss += s * s;
    }
}

/// dsp::fit_single_path, one block per packet: the delay whose single path's received signal is
/// closest to h's (its projection on u = R h over its power <s, s>_R), the gain h's own
/// projection on that delay's single path.
__global__ void single_path_kernel(const cuFloatComplex* __restrict__ h_all, double* __restrict__ tau_out,
                                   cuDoubleComplex* __restrict__ gain_out)
{
    constexpr int steps = single_path_steps, n_cand = single_path_candidates;
    const int p = blockIdx.x;
    __shared__ double best_score[256];
    __shared__ int best_i[256];
    __shared__ cuDoubleComplex h[L_ch], u[L_ch];
    __shared__ double sinc_table[2 * single_path_max_j + 1];
    for (int m = threadIdx.x; m < L_ch; m += blockDim.x) {
        const cuFloatComplex v = h_all[static_cast<std::size_t>(p) * L_ch + m];
        h[m] = make_cuDoubleComplex(v.x, v.y);
    }
    for (int j = threadIdx.x; j <= 2 * single_path_max_j; j += blockDim.x) {
        const double x = 3.14159265358979323846 * (static_cast<double>(j - single_path_max_j) / steps);
        sinc_table[j] = fabs(x) < 1e-12 ? 1.0 : sin(x) / x;
    }
    __syncthreads();
    // u_a = sum_b R_x(a - b) h_b, in the CPU's order (R_x(-k) = R_x(k)*).
    for (int a = threadIdx.x; a < L_ch; a += blockDim.x) {
        double re = 0.0, im = 0.0;
        for (int b = 0; b < L_ch; ++b) {
            const int k = a - b;
            const double rr = c_rx_re[k >= 0 ? k : -k], ri = k >= 0 ? c_rx_im[k] : -c_rx_im[-k];
            re += rr * h[b].x - ri * h[b].y;
            im += rr * h[b].y + ri * h[b].x;
        }
        u[a] = make_cuDoubleComplex(re, im);
    }
    __syncthreads();
    double bs = -1.0;
    int bi = 0;
    for (int c = threadIdx.x; c < n_cand; c += blockDim.x) {
        double dr, di, ss;
        sinc_projection(u, sinc_table, c, dr, di, ss);
        const double score = (dr * dr + di * di) / c_single_path_power[c];
        if (score > bs) {  // strictly greater: the first maximum wins, as on the CPU
            bs = score;
            bi = c;
        }
    }
    best_score[threadIdx.x] = bs;
    best_i[threadIdx.x] = bi;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) {
            const double o = best_score[threadIdx.x + s];
            const int oi = best_i[threadIdx.x + s];
            if (o > best_score[threadIdx.x] || (o == best_score[threadIdx.x] && oi < best_i[threadIdx.x])) {
                best_score[threadIdx.x] = o;
                best_i[threadIdx.x] = oi;
            }
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        const double tau = static_cast<double>(best_i[0]) / steps - N1;
        double dr, di, ss;
        sinc_projection(h, sinc_table, best_i[0], dr, di, ss);
        tau_out[p] = tau;
        gain_out[p] = make_cuDoubleComplex(dr / ss, di / ss);
    }
}

// Two receive channels (dsp/combining.hpp). Channel c's per-slot estimates lie max_packets
// slots after channel 0's (gpu::estimators with two channels).
__constant__ double c_noise_gain[max_channel_supports];           ///< each channel support's noise_gain

/// Per packet: the channels' taps side by side for the joint solver (h_pair: [packet][channel][38]),
/// its diagonal loads 2 sigma2_c, the combining weights (dsp::combining_weights: sigma2_min /
/// sigma2_c, a noise not finite or negative weighs 0, a noiseless channel 1 and only those)
/// and 2 sigma2_min, the FDE combiners' noise. One block of 64 threads a packet.
__global__ void combining_terms_kernel(const cuFloatComplex* __restrict__ h, const double* __restrict__ sigma2, std::size_t slots,
                                       cuFloatComplex* __restrict__ h_pair, double* __restrict__ loads, double* __restrict__ weight,
                                       double* __restrict__ noise)
{
    const int p = blockIdx.x;
    for (int i = threadIdx.x; i < 2 * L_ch; i += blockDim.x) {
        const int c = i / L_ch, a = i % L_ch;
        h_pair[static_cast<std::size_t>(p) * 2 * L_ch + i] = h[(c * slots + static_cast<std::size_t>(p)) * L_ch + a];
    }
    if (threadIdx.x != 0) return;
    const double s1 = sigma2[p], s2 = sigma2[slots + static_cast<std::size_t>(p)];
    const double least = combining_weights(s1, s2, weight[2 * p], weight[2 * p + 1]);
    loads[2 * p] = 2.0 * s1;
    loads[2 * p + 1] = 2.0 * s2;
    noise[p] = 2.0 * least;
}

/// The joint solver's taps ([packet][channel][186]) to each channel's (channel c's slots after
/// channel 0's).
__global__ void unpack_taps_kernel(const cuFloatComplex* __restrict__ c_pair, std::size_t slots, cuFloatComplex* __restrict__ c)
{
    const int p = blockIdx.x;
    for (int i = threadIdx.x; i < 2 * L_eq; i += blockDim.x) {
        const int ch = i / L_eq, l = i % L_eq;
        c[(ch * slots + static_cast<std::size_t>(p)) * L_eq + l] = c_pair[static_cast<std::size_t>(p) * 2 * L_eq + i];
    }
}

/// The unequalized path over two channels (dsp::mrc_single_path_response): each channel's
/// single-path gain shrunk by its estimate's signal fraction (dsp::signal_fraction), then
/// mrc_c = w_c f_c g_c* / sum_d w_d f_d |g_d|^2 (the plain combiner where no channel shows
/// signal; zero where every gain is). A thread a packet.
__global__ void mrc_kernel(const cuFloatComplex* __restrict__ h, const double* __restrict__ sigma2, const int* __restrict__ support,
                           const double* __restrict__ weight, const cuDoubleComplex* __restrict__ gain, std::size_t slots, int packets,
                           cuDoubleComplex* __restrict__ mrc)
{
    const int p = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
    if (p >= packets) return;
    double f[2], g2[2], total = 0.0;
    cuDoubleComplex g[2];
    for (int c = 0; c < 2; ++c) {
        const std::size_t slot = c * slots + static_cast<std::size_t>(p);
        const cuFloatComplex* hs = h + slot * L_ch;
        const double power = received_power<L_ch>(
            [&](int a, double& re, double& im) {
                re = hs[a].x;
                im = hs[a].y;
            },
            1, 0, c_rx_re, c_rx_im);
        const int sup = min(max(support[slot], 0), max_channel_supports - 1);
        double fr = 0.0;
        if (power > 0.0 && isfinite(power)) {
            fr = 1.0 - 2.0 * sigma2[slot] * c_noise_gain[sup] / power;
            fr = isfinite(fr) ? fmin(fmax(fr, 0.0), 1.0) : 0.0;
        }
        f[c] = fr;
        g[c] = gain[slot];
        g2[c] = g[c].x * g[c].x + g[c].y * g[c].y;
        total += weight[2 * p + c] * f[c] * g2[c];
    }
    if (!(total > 0.0)) {
        total = 0.0;
        for (int c = 0; c < 2; ++c) {
            f[c] = 1.0;
            total += weight[2 * p + c] * g2[c];
        }
    }
    for (int c = 0; c < 2; ++c) {
        const double k = total > 0.0 ? weight[2 * p + c] * f[c] / total : 0.0;
        mrc[2 * p + c] = make_cuDoubleComplex(k * g[c].x, -k * g[c].y);
    }
}

/// The combined channel's ZF condition number, max / min over frequency of sum_c w_c |H_c|^2
/// (the CPU's record of it): a block per packet.
__global__ void combined_condition_kernel(const float2* __restrict__ hspec, std::size_t spectrum_slots, const double* __restrict__ weight,
                                          double* __restrict__ cond)
{
    const int p = blockIdx.x;
    const float w0 = static_cast<float>(weight[2 * p]), w1 = static_cast<float>(weight[2 * p + 1]);
    const float2* h0 = hspec + static_cast<std::size_t>(p) * n_fft;
    const float2* h1 = h0 + spectrum_slots * n_fft;
    float lo = INFINITY, hi = 0.0f;
    for (int k = threadIdx.x; k < n_fft; k += blockDim.x) {
        const float2 a = h0[k], b = h1[k];
        const float v = w0 * (a.x * a.x + a.y * a.y) + w1 * (b.x * b.x + b.y * b.y);
        lo = fminf(lo, v);
        hi = fmaxf(hi, v);
    }
    for (int o = 16; o > 0; o >>= 1) {
        lo = fminf(lo, __shfl_xor_sync(0xffffffffu, lo, o));
        hi = fmaxf(hi, __shfl_xor_sync(0xffffffffu, hi, o));
    }
    __shared__ float red_lo[32], red_hi[32];
    if (threadIdx.x % 32 == 0) {
        red_lo[threadIdx.x / 32] = lo;
        red_hi[threadIdx.x / 32] = hi;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int w = 1; w < static_cast<int>(blockDim.x) / 32; ++w) {
            lo = fminf(lo, red_lo[w]);
            hi = fmaxf(hi, red_hi[w]);
        }
        cond[p] = lo > 0.0f ? static_cast<double>(hi) / lo : INFINITY;
    }
}

/// With a float cuSOLVER solver: packets whose ZF system has a condition number above 1e6
/// (flagged ill-conditioned), or that the solver could not factor, take the double-precision
/// Levinson taps instead. One block per packet.
__global__ void zf_fallback_kernel(const double* __restrict__ cond, const cuFloatComplex* __restrict__ c_lev,
                                   const std::uint8_t* __restrict__ ok_lev, cuFloatComplex* __restrict__ c,
                                   std::uint8_t* __restrict__ ok)
{
    const int p = blockIdx.x;
    if (cond[p] <= dsp::ill_conditioned_zf_condition && ok[p]) return;
    for (int i = threadIdx.x; i < L_eq; i += blockDim.x) {
        c[static_cast<std::size_t>(p) * L_eq + i] = c_lev[static_cast<std::size_t>(p) * L_eq + i];
    }
    if (threadIdx.x == 0) ok[p] = ok_lev[p];
}

}  // namespace

namespace {
/// Where the detector uses the phase smoother (receiver_config::phase_smoother).
smoother_use smoother_use_of(const dsp::receiver_config& c) noexcept
{
    if (c.phase_smoother_always()) return smoother_use::always;
    return c.phase_smoother_auto() ? smoother_use::gated : smoother_use::never;
}

/// The host's clock for cuda_backend::timing's host side: milliseconds from `a` to `b`.
using host_clock = std::chrono::steady_clock;
double host_ms(host_clock::time_point a, host_clock::time_point b = host_clock::now())
{
    return std::chrono::duration<double, std::milli>(b - a).count();
}
}  // namespace

/// The whole chain for one part of a batch window (dsp::split_batch), on a stream of its own:
/// every buffer, plan and pinned host buffer it needs, sized for the largest part. The
/// backend holds one per part, so the parts of a batch run concurrently.
struct chain_part {
    const dsp::receiver_config& cfg;
    const dsp::receiver_tables& t;
    int device;
    std::size_t max_window, max_packets;
    /// Receive channels (receiver_config::channels). With two, every per-slot buffer below that
    /// the channels do not share holds channel 2's max_packets slots after channel 1's (as the
    /// front end's); the ZF taps (c_zf, spec_zf) are the combined channel's.
    int channels;
    estimators fe;
    preamble_detector loc;
    stream_detector det;
    cufft_plan plan;
    device_buffer<cuFloatComplex> spec_zf, spec_mmse, spec_cma, hspec, c_zf, c_mmse, c_cma;
    const cuFloatComplex* hno;  ///< H_NO on the FFT grid, and Psi: the backend's, shared by its parts
    const float* psi;
    const float2* lp;                        ///< the trellis's low-pass on the FFT grid (the backend's; null with sxs)
    std::unique_ptr<stream_trellis> trellis;  ///< receiver.detector trellis
    device_buffer<double> zero_load, load, tau, cond;
    device_buffer<double> carrier_dw;  ///< per slot, the carrier correction from the decisions
    device_buffer<cuDoubleComplex> gain;
    device_buffer<std::uint8_t> ok_zf, ok_mmse;
    /// A cuSOLVER solver chosen by name (null: Levinson, called directly), and the Levinson
    /// ZF taps it falls back to for ill-conditioned packets.
    std::unique_ptr<batched_solver> solver;
    device_buffer<cuFloatComplex> c_zf_lev;
    device_buffer<std::uint8_t> ok_zf_lev;
    dsp::pll_gains acq, track, boot;  ///< over the known bits; the PLL's over the data; the phase smoother's forward PLL's
    pinned_buffer<std::uint8_t> bits_host;
    pinned_buffer<dsp::path_stats> stats_host;
    pinned_buffer<cf32> h_host;
    pinned_buffer<double> cfo_host, sigma2_host, cond_host;
    pinned_buffer<unsigned> nonfinite_host;
    pinned_buffer<int> support_host;
    pinned_buffer<std::uint8_t> ok_zf_host, ok_mmse_host;
    pinned_buffer<long long> starts_host;
    pinned_buffer<float> metrics_host;
    pinned_buffer<int> moved_host;  ///< per packet: the periods the start check moved its start by
    pinned_buffer<std::uint8_t> smoothed_host;  ///< per packet: 1 where the gated phase smoother decided it
    /// Per packet: the derotation's source path (stream_detector::device_derotation), valid
    /// where derotation_valid says this batch's second pass ran.
    pinned_buffer<std::uint8_t> derotation_host;
    bool derotation_valid = false;
    /// With the smoother: the segments' spectra, out of place, so that the segments stay in the
    /// time domain for paths made again from them derotated (dsp::smoother::pre_derotation);
    /// gated, how many streams it decided.
    device_buffer<cuFloatComplex> spectra;
    pinned_buffer<int> smoothed_streams_host;
    pinned_buffer<int> count_host;
    pinned_buffer<unsigned long long> truncated_host;
    /// Clock tracking: M around each peak and the steps (pinned), the steps on the device, and
    /// per slot the refined start (batch window's 2-samples-per-bit coordinates) and local ppm.
    pinned_buffer<double> peak3_host;
    pinned_buffer<dsp::fixed_pos> steps_host;
    device_buffer<dsp::fixed_pos> steps_dev;
    std::vector<double> refined, ppm;
    /// Front-end correction (receiver_config::front_end_correction): each slot's moments.
    device_buffer<double> iq_sums;
    pinned_buffer<double> iq_sums_host;
    /// Soft output (set_soft_output, with the trellis): every slot's six LLR blocks of 6144
    /// bytes, on the device and back (empty while off).
    device_buffer<std::int8_t> llr_q;
    pinned_buffer<std::int8_t> llr_host;
    [[nodiscard]] bool soft() const noexcept { return trellis && llr_q.size() > 0; }
    void set_soft_output(bool on)
    {
        const std::size_t n = on && trellis ? max_packets * num_paths * waveform::data_bits : 0;
        if (n == llr_q.size()) return;
        llr_q = device_buffer<std::int8_t>(n);
        llr_host = pinned_buffer<std::int8_t>(n);
    }
    /// receiver.fec: the framing, every slot's streams' LLRs, and for a codeword-aligned code
    /// the decoder and the decoded information bits and codeword results ([packet][stream][...])
    /// on the device and back (the continuous stream is decoded once every part is collected:
    /// cuda_backend::impl::decode_stream).
    /// The unequalized path's BEP estimate's scratch (posterior_bep_kernel): two rows of 6144
    /// LLRs a packet, with the symbol-by-symbol detector.
    device_buffer<float> posterior_llr;
    std::optional<dsp::fec_framing> fec;
    std::unique_ptr<ldpc_decoder> fec_decoder;
    device_buffer<float> fec_llr;
    device_buffer<std::uint8_t> fec_info;
    device_buffer<dsp::codeword_result> fec_results;
    pinned_buffer<std::uint8_t> fec_info_host;
    pinned_buffer<dsp::codeword_result> fec_results_host;
    /// The part's packets in the batch's output, after the earlier parts' (collect).
    std::size_t batch_count = 0;
    event located;  ///< after the starts and M around the peaks are back (clock tracking)
    /// The per-packet estimates go back on a stream of their own once the paths are made, so
    /// that the host fills the records while the detector runs (collect): fields_ready.
    stream fields_st;
    event paths_done, fields_ready;
    event smoothed_counted;  ///< the gated smoother's stream count is on the host (smoothed_streams_host)
    /// Two channels: the joint MMSE solver (block Levinson) with its inputs and outputs
    /// ([packet][channel][...]), the combining weights (2 a packet), 2 sigma2_min, each
    /// channel's maximal-ratio coefficient (2 a packet), the two-input CMA's scratch.
    std::unique_ptr<joint_solver> joint;
    device_buffer<cuFloatComplex> h_pair, c_pair, cma_scratch;
    device_buffer<double> loads_pair, weight, noise_min;
    device_buffer<cuDoubleComplex> mrc;
    std::array<event, stage_count_events> ev;
    std::array<cuda_backend::stage, stage_count_events> ev_stage{};  ///< the stage that ends at each event
    int events_recorded = 0;  ///< by the last enqueue() (0: timing was off)

    /// What one part of one batch is: its input samples and its 2-samples-per-bit window.
    struct window_plan {
        host_window input{std::span<const cf32>{}};  ///< the part's samples as uploaded (input width; cf32 or ci16)
        bool resampling = false;
        dsp::fixed_pos first_pos = 0;       ///< resampling: window[0]'s position relative to input[0]
        std::size_t n_out = 0;              ///< the 2-samples-per-bit window (input.size() without resampling)
        locate_params params;               ///< over that window
        dsp::fixed_pos step = 0;            ///< resampling: input samples per output, 32.32
        std::uint64_t m_begin = 0;          ///< resampling: segment-relative output index of window[0]; else absolute input index
        long long batch_offset = 0;         ///< window[0] in the batch's 2-samples-per-bit window
    };
    window_plan plan_now;  ///< of the batch being processed

    chain_part(const dsp::receiver_config& c, int dev, std::size_t window, const std::string& solver_name, const cuFloatComplex* hno_dev,
               const float* psi_dev, const float2* lp_dev, const dsp::resampler_design* input_design, std::size_t max_input)
        : cfg(c),
          t(dsp::get_receiver_tables(c.fft_size)),
          device(select_device(dev)),
          max_window(window),
          max_packets(max_window / waveform::L_pkt + 2),
          channels(c.channels),
          fe(dev, max_window, max_packets, input_design, max_input, c.channels),
          loc(dev, max_window, max_packets, t),
          det(dev, max_packets * num_paths, smoother_use_of(c), c.trellis_on(), c.detector != dsp::detector_kind::trellis),
          plan(n_fft, static_cast<int>(max_packets), fe.device().stream),
          spec_zf(max_packets * n_fft),
          spec_mmse(per_slot(c) * n_fft),
          spec_cma(per_slot(c) * n_fft),
          hspec(per_slot(c) * n_fft),
          c_zf(max_packets * L_eq),
          c_mmse(per_slot(c) * L_eq),
          c_cma(per_slot(c) * L_eq),
          hno(hno_dev),
          psi(psi_dev),
          lp(lp_dev),
          trellis(c.trellis_on() ? std::make_unique<stream_trellis>(max_packets * num_paths) : nullptr),
          zero_load(max_packets),
          load(max_packets),
          tau(per_slot(c)),
          cond(max_packets),
          carrier_dw(max_packets),
          gain(per_slot(c)),
          ok_zf(max_packets),
          ok_mmse(max_packets),
          solver(solver_name == "levinson" ? nullptr : make_batched_solver(solver_name, dev, max_packets)),
          c_zf_lev(solver ? max_packets * L_eq : 0),
          ok_zf_lev(solver ? max_packets : 0),
          acq(dsp::make_pll_gains(c.pll_acquisition_bn_t, c.pll_damping)),
          track(dsp::make_pll_gains(c.pll_bn_t, c.pll_damping)),
          boot(dsp::make_pll_gains(dsp::smoother::bootstrap_bn_t, c.pll_damping)),
          bits_host(max_packets * static_cast<std::size_t>(c.streams()) * dsp::packed_data_bytes),
          stats_host(max_packets * static_cast<std::size_t>(c.streams())),
          h_host(per_slot(c) * L_ch),
          cfo_host(max_packets),
          sigma2_host(per_slot(c)),
          cond_host(max_packets),
          nonfinite_host(per_slot(c)),
          support_host(per_slot(c)),
          ok_zf_host(max_packets),
          ok_mmse_host(max_packets),
          starts_host(max_packets),
          metrics_host(max_packets),
          moved_host(max_packets),
          smoothed_host(c.phase_smoother_auto() ? max_packets : 0),
          derotation_host(smoother_use_of(c) != smoother_use::never ? max_packets : 0),
          spectra(smoother_use_of(c) != smoother_use::never ? per_slot(c) * n_fft : 0),
          smoothed_streams_host(1),
          count_host(1),
          truncated_host(1),
          peak3_host(3 * max_packets),
          steps_host(max_packets),
          steps_dev(max_packets),
          refined(max_packets),
          ppm(max_packets),
          iq_sums(per_slot(c) * iq_dc_sums_per_slot),
          iq_sums_host(per_slot(c) * iq_dc_sums_per_slot)
    {
        if (channels == 2) {
            joint = make_joint_solver("block-levinson", dev, max_packets);
            PAQ_CUDA_CHECK(cudaSetDevice(dev));
            h_pair = device_buffer<cuFloatComplex>(max_packets * 2 * L_ch);
            c_pair = device_buffer<cuFloatComplex>(max_packets * 2 * L_eq);
            cma_scratch = device_buffer<cuFloatComplex>(max_packets * n_fft);
            loads_pair = device_buffer<double>(max_packets * 2);
            weight = device_buffer<double>(max_packets * 2);
            noise_min = device_buffer<double>(max_packets);
            mrc = device_buffer<cuDoubleComplex>(max_packets * 2);
        }
        if (c.detector != dsp::detector_kind::trellis) {
            PAQ_CUDA_CHECK(cudaSetDevice(dev));
            posterior_llr = device_buffer<float>(max_packets * 2 * waveform::data_bits);
        }
        if (const auto code = dsp::ldpc_code_of(c.fec)) {
            fec = dsp::framing_for(*code);
            PAQ_CUDA_CHECK(cudaSetDevice(dev));
            fec_llr = device_buffer<float>(max_packets * static_cast<std::size_t>(c.streams()) * waveform::data_bits);
        }
        if (fec && !fec->continuous()) {
            const std::size_t frames = max_packets * static_cast<std::size_t>(c.streams() * fec->codewords);
            fec_decoder = std::make_unique<ldpc_decoder>(fec->code, dsp::ldpc::decoder_config{dsp::ldpc::decoder_kind::min_sum, c.fec_iterations}, dev);
            PAQ_CUDA_CHECK(cudaSetDevice(dev));
            fec_info = device_buffer<std::uint8_t>(frames * static_cast<std::size_t>(fec->k / 8));
            fec_results = device_buffer<dsp::codeword_result>(frames);
            fec_info_host = pinned_buffer<std::uint8_t>(fec_info.size());
            fec_results_host = pinned_buffer<dsp::codeword_result>(frames);
        }
        PAQ_CUDA_CHECK(cudaMemset(zero_load.data(), 0, max_packets * sizeof(double)));
        // Unused batch slots of the FFT buffers stay finite.
        PAQ_CUDA_CHECK(cudaMemset(hspec.data(), 0, hspec.size() * sizeof(cuFloatComplex)));
    }

    /// Queues upload (+ resampling) + metric + location for plan_now on this part's stream (no
    /// host wait); with `clock`, also M around each peak and the count and starts back, then
    /// records `located`. The upload starts once `upload_after` (if any) has completed. With
    /// `timed`, records the stage events.
    void enqueue_front(cudaEvent_t upload_after, bool timed, bool clock);
    /// Queues the chain up to the symbol-by-symbol detector; with `clock`, steps_host goes up
    /// first and the gather re-times the packets.
    void enqueue_back(bool timed, bool clock);
    /// The unequalized path's single-path fit from the channel estimates (tau, gain; two
    /// channels: each channel's, and their maximal-ratio coefficients from `weight`).
    void single_paths(int P);
    /// The carrier estimate from the decisions (dsp::carrier_correction), P slots: w0
    /// corrected and the segments derotated by it (gpu::estimators::correct_carrier_device).
    void carrier_from_decisions(int P);
    /// Queues the rest: paths made again where the smoother decided (gated: waits on the host
    /// for the detector's count, so every part's enqueue_back comes first), the trellis, the
    /// outputs back.
    void enqueue_tail(bool timed);
    /// Stage `st` done on stream s: its event (timing on), and the NVTX range of the next.
    void stage_done(cuda_backend::stage st, bool timed, cudaStream_t s, nvtx_stages& nvtx)
    {
        if (timed) mark(s, st, next_ev);
        if (st == cuda_backend::stage::copy_back) return;
        static thread_local char name[40];
        auto next = static_cast<cuda_backend::stage>(static_cast<int>(st) + 1);
        if (next == cuda_backend::stage::trellis && !trellis) next = cuda_backend::stage::fec;
        if (next == cuda_backend::stage::fec && !fec) next = cuda_backend::stage::copy_back;
        std::snprintf(name, sizeof name, "paq %s", cuda_backend::stage_name(next));
        nvtx.next(name);
    }
    /// Whether paths are made again where the smoother decides (it can run), and whether
    /// that waits for the gated smoother's count.
    [[nodiscard]] bool rederives() const noexcept { return spectra.size() > 0; }
    [[nodiscard]] bool waits_for_count() const noexcept { return rederives() && det.device_smoothed_streams() != nullptr; }
    /// The segments' spectra: `spectra`, or the segments themselves transformed in place.
    [[nodiscard]] cuFloatComplex* spectra_of(cuFloatComplex* seg) noexcept { return rederives() ? spectra.data() : seg; }
    /// Receive channel ch's: its segments (the front end's), their spectra (as spectra_of).
    [[nodiscard]] cuFloatComplex* segments_of(int ch) noexcept { return reinterpret_cast<cuFloatComplex*>(fe.device(ch).segments); }
    [[nodiscard]] cuFloatComplex* spectrum_of(int ch) noexcept
    {
        return rederives() ? spectra.data() + static_cast<std::size_t>(ch) * max_packets * n_fft : segments_of(ch);
    }
    /// Per-slot buffers of every channel: channel ch's first slot.
    [[nodiscard]] std::size_t slot0(int ch) const noexcept { return static_cast<std::size_t>(ch) * max_packets; }
    /// Slots of a per-channel buffer for config c: max_packets a channel (max_packets is
    /// set before the buffers).
    [[nodiscard]] std::size_t per_slot(const dsp::receiver_config& c) const noexcept { return static_cast<std::size_t>(c.channels) * max_packets; }
    /// The second channel's inputs to the paths, its spectra at r2.
    [[nodiscard]] second_channel second_for(const cuFloatComplex* r2) noexcept
    {
        const std::size_t b = slot0(1) * n_fft;
        return {r2, spec_mmse.data() + b, spec_cma.data() + b, hspec.data() + b, weight.data(), noise_min.data(), tau.data() + slot0(1), mrc.data()};
    }
    /// Bit k of a packet is decided at sample 2 (m0 + k) + parity of its segment.
    [[nodiscard]] int decision_parity() const noexcept { return (pre + t.decision_delay) & 1; }
    [[nodiscard]] int decision_m0() const noexcept { return (pre + t.decision_delay) / 2; }
    /// Whether enqueue_tail would not wait (its detector's count is back, or it needs none).
    [[nodiscard]] bool tail_ready() const
    {
        if (!waits_for_count()) return true;
        const cudaError_t e = cudaEventQuery(smoothed_counted.get());
        if (e == cudaErrorNotReady) return false;
        PAQ_CUDA_CHECK(e);
        return true;
    }
    /// Waits for this part's stream and writes its packets, records and bits into `out` from
    /// packet `filled` on (out is already large enough), advancing `filled`; packet starts
    /// made absolute input indices (`batch`, `geom`: through dsp::input_index when
    /// resampling). Returns the host time spent filling, in ms. While it waits, `pump` queues
    /// the later parts' tails as they become ready (see wait_pumping).
    double collect(const dsp::sample_batch& batch, const dsp::input_geometry& geom, bool clock, dsp::batch_output& out,
                   std::size_t& filled, const std::function<bool()>& pump);
    void mark(cudaStream_t s, cuda_backend::stage st, int& next_ev)
    {
        ev_stage[static_cast<std::size_t>(next_ev)] = st;
        ev[static_cast<std::size_t>(next_ev++)].record(s);
    }
    int next_ev = 0;
    [[nodiscard]] cudaEvent_t upload_done() const noexcept { return fe.upload_done(); }
};

struct cuda_backend::impl {
    dsp::receiver_config cfg;
    const dsp::receiver_tables& t;
    int device;
    std::size_t max_window = 0;  ///< input samples
    std::size_t n_parts;
    device_buffer<cuFloatComplex> hno;  ///< H_NO on the FFT grid, for every part
    device_buffer<float> psi;           ///< Psi on the FFT grid, for every part
    device_buffer<float2> lp;           ///< the trellis's low-pass on the FFT grid (receiver.detector trellis), for every part
    std::vector<std::unique_ptr<chain_part>> parts;
    bool timing_on = false;
    cuda_backend::timing last;
    dsp::input_geometry geom;  ///< the input's rate against 2 samples per bit
    bool clock = false;        ///< clock tracking on
    /// Per batch (capacity reserved at Create): the clock scopes' ends, which are estimated,
    /// which parts are located, the starts of one scope.
    std::vector<long long> scope_end;
    std::vector<char> scope_done, part_located;
    std::vector<double> scope_starts;
    /// Per batch: the parts whose back (enqueue_back) and whose tail (enqueue_tail) are
    /// queued, a prefix of parts each, and whether the batch's stages are timed.
    std::size_t backs_queued = 0, tails_queued = 0;
    bool batch_timed = false;
    /// Queues, in order, the tail of each part whose back is queued and whose detector's
    /// count is back (chain_part::tail_ready); whether any of the first n_active parts' tails is
    /// left to queue. The host calls it while it waits on the device (wait_pumping), so that a
    /// part's tail goes on as soon as it can, not after the host is done with earlier parts.
    bool queue_ready_tails(std::size_t n_active)
    {
        while (tails_queued < backs_queued && parts[tails_queued]->tail_ready()) parts[tails_queued++]->enqueue_tail(batch_timed);
        return tails_queued < n_active;
    }
    /// receiver.fec sent as the continuous stream (dsp/fec_stream.hpp): the frames are found on
    /// the host from the first packets' LLRs (their markers), then every frame's codeword is
    /// gathered from the parts' LLRs on every stream and all of them decoded in one launch.
    struct stream_fec {
        dsp::fec_framing framing;
        dsp::stream_deframer deframer;
        std::unique_ptr<ldpc_decoder> decoder;
        std::size_t max_words;                   ///< frames a batch can decode (its packets' slots)
        pinned_buffer<stream_word> words_host;   ///< where each frame's codeword lies
        device_buffer<stream_word> words;
        device_buffer<float> word_llr;           ///< [frame][stream][n]
        device_buffer<std::uint8_t> info;        ///< [frame][stream][k / 8]
        device_buffer<dsp::codeword_result> results;
        pinned_buffer<std::uint8_t> info_host;
        pinned_buffer<dsp::codeword_result> results_host;
        pinned_buffer<float> llr_host;  ///< the packets the host reads: the marker search's, then the edges

        stream_fec(const dsp::fec_framing& f, const dsp::receiver_config& c, int dev, std::size_t capacity)
            : framing(f),
              deframer(f.code),
              decoder(std::make_unique<ldpc_decoder>(f.code, dsp::ldpc::decoder_config{dsp::ldpc::decoder_kind::min_sum, c.fec_iterations}, dev)),
              max_words(capacity * static_cast<std::size_t>(f.codewords)),
              words_host((select_device(dev), max_words)),
              words(max_words),
              word_llr(max_words * static_cast<std::size_t>(c.streams() * f.n)),
              info(max_words * static_cast<std::size_t>(c.streams() * (f.k / 8))),
              results(max_words * static_cast<std::size_t>(c.streams())),
              info_host(info.size()),
              results_host(results.size()),
              llr_host((static_cast<std::size_t>(dsp::marker_search_fields) + 1 + dsp::max_stream_edge_packets) *
                       static_cast<std::size_t>(c.streams()) * waveform::data_bits)
        {
            fec_stream_setup_device();
        }
    };
    std::unique_ptr<stream_fec> stream;

    impl(const dsp::receiver_config& c, int dev, const std::string& solver_name, int np)
        : cfg(c),
          t(dsp::get_receiver_tables(c.fft_size)),
          device(select_device(dev)),
          n_parts(static_cast<std::size_t>(np)),
          hno(n_fft),
          psi(n_fft),
          lp(c.trellis_on() ? n_fft : 0),
          geom(dsp::make_input_geometry(c)),
          clock(c.clock_tracking != 0)
    {
        max_window = c.batch_samples + geom.guard_before + geom.guard_after;
        // Once per backend: the kernels' shared memory, H_NO (in double on the host) and Psi.
        cma_setup_device();
        paths_setup_device();
        {
            // R_x (the single-path fit's and the two-channel kernels') and the single-path
            // candidates' powers.
            const auto& rx = dsp::soqpsk_autocorrelation();
            std::array<double, L_ch> rx_re{}, rx_im{};
            for (std::size_t k = 0; k < static_cast<std::size_t>(L_ch) && k < rx.size(); ++k) {
                rx_re[k] = rx[k].real();
                rx_im[k] = rx[k].imag();
            }
            PAQ_CUDA_CHECK(cudaMemcpyToSymbol(c_rx_re, rx_re.data(), sizeof rx_re));
            PAQ_CUDA_CHECK(cudaMemcpyToSymbol(c_rx_im, rx_im.data(), sizeof rx_im));
            const auto& powers = dsp::single_path_powers();
            PAQ_CUDA_CHECK(cudaMemcpyToSymbol(c_single_path_power, powers.data(), sizeof(double) * powers.size()));
        }
        if (c.channels == 2) {
            // The two-channel kernels' constants: each channel support's noise gain.
            std::array<double, max_channel_supports> gain{};
            if (t.supports.size() > gain.size()) throw std::logic_error("cuda backend: more channel supports than the kernels hold");
            for (std::size_t i = 0; i < t.supports.size(); ++i) gain[i] = t.supports[i].noise_gain;
            PAQ_CUDA_CHECK(cudaMemcpyToSymbol(c_noise_gain, gain.data(), sizeof gain));
        }
        dsp::fft_plan fwd(n_fft, dsp::fft_plan::direction::forward);
        dsp::fft_buffer hno_d(n_fft);
        dsp::taps_to_spectrum(t.h_no.data(), -hno_half, L_hno, fwd, hno_d);
        std::vector<cuFloatComplex> hno_f(n_fft);
        std::vector<float> psi_f(n_fft);
        for (std::size_t k = 0; k < static_cast<std::size_t>(n_fft); ++k) {
            hno_f[k] = make_cuFloatComplex(static_cast<float>(hno_d[k].real()), static_cast<float>(hno_d[k].imag()));
            psi_f[k] = static_cast<float>(t.psi[k]);
        }
        PAQ_CUDA_CHECK(cudaMemcpy(hno.data(), hno_f.data(), n_fft * sizeof(cuFloatComplex), cudaMemcpyHostToDevice));
        PAQ_CUDA_CHECK(cudaMemcpy(psi.data(), psi_f.data(), n_fft * sizeof(float), cudaMemcpyHostToDevice));
        if (lp.size() > 0) {
            // dsp::trellis::lowpass_gain per bin, as the CPU backend's (which folds in 1/N;
            // the kernel scales its outputs by 1/N instead).
            std::vector<float2> lp_f(n_fft);
            for (int k = 0; k < n_fft; ++k) {
                const double f = static_cast<double>(k < n_fft / 2 ? k : k - n_fft) / n_fft;
                lp_f[static_cast<std::size_t>(k)] = make_float2(static_cast<float>(dsp::trellis::lowpass_gain(f)), 0.0f);
            }
            PAQ_CUDA_CHECK(cudaMemcpy(lp.data(), lp_f.data(), n_fft * sizeof(float2), cudaMemcpyHostToDevice));
        }
        // Part windows: input samples, and (resampling) the 2-samples-per-bit window they give,
        // at most ceil(input / R) + 1 outputs.
        const std::size_t part_input = dsp::max_part_window(c.batch_samples, n_parts, geom.guard_before, geom.guard_after);
        const std::size_t part_window =
            geom.resampling ? static_cast<std::size_t>(std::ceil(static_cast<double>(part_input) / geom.ratio)) + 2 : part_input;
        for (std::size_t k = 0; k < n_parts; ++k) {
            parts.push_back(std::make_unique<chain_part>(cfg, dev, part_window, solver_name, hno.data(), psi.data(),
                                                         lp.size() > 0 ? lp.data() : nullptr, geom.resampling ? geom.design.get() : nullptr, part_input));
        }
        std::size_t capacity = 0;
        for (const auto& p : parts) capacity += p->max_packets;
        if (const auto f = dsp::framing_for(c.fec); f && f->continuous()) stream = std::make_unique<stream_fec>(*f, c, dev, capacity);
        scope_end.reserve(dsp::clock_scope_parts);
        scope_done.reserve(dsp::clock_scope_parts);
        part_located.reserve(n_parts);
        scope_starts.reserve(capacity);
    }

    /// The part's plan (chain_part::window_plan) for this batch; false when the part has no
    /// 2-samples-per-bit window to process (too short for the metric).
    bool plan_part(const dsp::sample_batch& batch, const dsp::batch_part& part, std::uint64_t batch_m_begin, chain_part::window_plan& w) const;
    /// Clock tracking for part k: waits until every part with packets in the clock scopes of
    /// part k's packets is located, estimates those scopes (once each), fills part k's steps.
    void clock_for_part(std::size_t k, std::size_t n_active, long long batch_metric_len);
    /// The continuous stream over the batch's packets, once the first n_active parts are
    /// collected into `out`: the packets' places, the frames' offset from their markers, each
    /// frame whose last bit a packet holds decoded into that packet's next slot on every stream
    /// (but the one begun before the batch: pending, for the engine), and the edge packets'
    /// LLRs; as dsp::cpu_backend's.
    void decode_stream(dsp::batch_output& out, std::size_t n_active);

    /// Throws std::runtime_error if the device lacks the shared memory the kernels need.
    static void check_device(int dev)
    {
        for (const auto& info : list_gpu_devices()) {
            if (info.id != dev) continue;
            if (const auto why = backend_unsupported_reason(info); !why.empty()) throw std::runtime_error("cuda backend: " + why);
        }
    }
};

cuda_backend::cuda_backend(const dsp::receiver_config& cfg, int device_id, const std::string& solver, int parts)
{
    if (parts < 1 || parts > max_parts) {
        throw std::invalid_argument("cuda backend: parts must be 1 .. " + std::to_string(max_parts) + ", not " + std::to_string(parts));
    }
    if (solver != "levinson" && solver != "cusolver-dn-chol" && solver != "cusolver-sp-qr") {
        throw std::invalid_argument("unknown solver '" + solver + "' (allowed: levinson, cusolver-dn-chol, cusolver-sp-qr)");
    }
    const auto errors = cfg.validate();
    if (!errors.empty()) {
        std::string msg = "invalid receiver configuration:";
        for (const auto& e : errors) msg += "\n  " + e;
        throw std::invalid_argument(msg);
    }
    if (cfg.fft_size != estimators::segment_stride) throw std::invalid_argument("cuda backend: fft_size must be 16384");
    if (cfg.channels == 2 && cfg.combining == dsp::combining_kind::select) {
        throw std::invalid_argument("cuda backend: receiver.combining select (each packet on one channel) is received by the cpu backend "
                                    "only (--backend cpu, or auto); joint combining runs on both");
    }
    if (cfg.channels == 2 && solver != "levinson") {
        throw std::invalid_argument("cuda backend: two receive channels are solved by block Levinson; the solver '" + solver +
                                    "' serves one channel (use levinson)");
    }
    // The receiver tables (CPU, double, a few hundred ms the first time) while the device's
    // context is made (another few hundred).
    auto tables = std::async(std::launch::async, [&cfg] { return &dsp::get_receiver_tables(cfg.fft_size); });
    impl::check_device(device_id);  // before anything is allocated there
    PAQ_CUDA_CHECK(cudaSetDevice(device_id));
    PAQ_CUDA_CHECK(cudaFree(nullptr));  // creates the context
    (void)tables.get();
    impl_ = std::make_unique<impl>(cfg, device_id, solver, parts);
}

cuda_backend::~cuda_backend() = default;

cuda_backend::timing cuda_backend::last_timing() const noexcept { return impl_->last; }

void cuda_backend::enable_stage_timing(bool on) noexcept { impl_->timing_on = on; }

bool cuda_backend::last_stage_times(dsp::stage_times& out) const
{
    const auto& t = impl_->last;
    if (!t.valid) return false;
    out = {};
    out.batches = 1;
    for (int st = 0; st < stage_count; ++st) out.stage_ms.emplace_back(stage_name(static_cast<stage>(st)), t.ms[static_cast<std::size_t>(st)]);
    out.device_span_ms = t.device_ms;
    out.host_queued_ms = t.host_queued_ms;
    out.host_last_collect_ms = t.host_last_collect_ms;
    out.host_total_ms = t.host_total_ms;
    return true;
}

const char* cuda_backend::stage_name(stage st) noexcept
{
    switch (st) {
    case stage::upload_metric: return "upload_metric";
    case stage::resample: return "resample";
    case stage::locate: return "locate";
    case stage::clock: return "clock";
    case stage::estimates: return "estimates";
    case stage::solvers: return "solvers";
    case stage::spectra: return "spectra";
    case stage::cma: return "cma";
    case stage::paths: return "paths";
    case stage::detector: return "detector";
    case stage::trellis: return "trellis";
    case stage::fec: return "fec";
    case stage::copy_back: return "copy_back";
    case stage::records: return "records";
    case stage::count: break;
    }
    return "?";
}

host_pin::host_pin(const void* data, std::size_t bytes, int device) : device_(device)
{
    if (device_ >= 0) PAQ_CUDA_CHECK(cudaSetDevice(device_));
    PAQ_CUDA_CHECK(cudaHostRegister(const_cast<void*>(data), bytes, cudaHostRegisterPortable));
    p_ = const_cast<void*>(data);
}

host_pin::~host_pin()
{
    if (!p_) return;
    if (device_ >= 0) PAQ_CUDA_CHECK_NOTHROW(cudaSetDevice(device_));
    PAQ_CUDA_CHECK_NOTHROW(cudaHostUnregister(p_));
}

void cuda_backend::set_soft_output(bool on)
{
    PAQ_CUDA_CHECK(cudaSetDevice(impl_->device));
    for (auto& part : impl_->parts) part->set_soft_output(on);
}

std::shared_ptr<void> cuda_backend::pin_host_memory(const void* data, std::size_t bytes)
{
    if (data == nullptr || bytes == 0) return nullptr;
    try {
        return std::make_shared<host_pin>(data, bytes, impl_->device);
    } catch (const std::exception&) {
        cudaGetLastError();  // clear the failed registration's error; the range stays pageable
        return nullptr;
    }
}

bool cuda_backend::impl::plan_part(const dsp::sample_batch& batch, const dsp::batch_part& part, std::uint64_t batch_m_begin,
                                   chain_part::window_plan& w) const
{
    w.input = batch.is_ci16()         ? host_window(std::span<const ci16>(batch.samples_ci16).subspan(part.offset, part.length), batch.ci16_scale)
              : batch.is_two_channel() ? host_window(std::span<const cf32x2>(batch.samples_x2).subspan(part.offset, part.length))
                                       : host_window(std::span<const cf32>(batch.samples).subspan(part.offset, part.length));
    w.resampling = geom.resampling;
    if (!geom.resampling) {
        w.n_out = part.length;
        w.params = make_locate_params(part, cfg.detection_threshold, t.template_offset);
        w.m_begin = batch.first_sample + part.offset;
        w.batch_offset = static_cast<long long>(part.offset);
        return w.n_out >= dsp::detector_span;
    }
    // The part as a batch of its own (dsp::part_batch), mapped without copying its samples.
    const auto r = dsp::map_window(dsp::window_span{batch.first_sample + part.offset, part.length, part.owned_begin,
                                                    part.owned_end, part.segment_start, part.segment_end,
                                                    batch.segment_first_sample},
                                   geom);
    if (r.n_out == 0) return false;
    w.step = geom.step;
    w.m_begin = r.m_begin;
    w.first_pos = r.first_pos;
    w.n_out = r.n_out;
    w.params = locate_params{static_cast<long long>(w.n_out), static_cast<long long>(r.owned_begin),
                             static_cast<long long>(r.owned_end), part.segment_start, part.segment_end, cfg.detection_threshold,
                             t.template_offset};
    w.batch_offset = static_cast<long long>(w.m_begin - batch_m_begin);
    return w.n_out >= dsp::detector_span;
}


void cuda_backend::impl::clock_for_part(std::size_t k, std::size_t n_active, long long batch_metric_len)
{
    constexpr dsp::fixed_pos unit = dsp::fixed_pos{1} << dsp::fixed_frac_bits;
    const int toff = t.template_offset;
    auto scope_of = [&](long long peak) {
        std::size_t j = 0;
        while (j + 1 < scope_end.size() && peak >= scope_end[j]) ++j;
        return j;
    };
    auto owned_peaks = [&](std::size_t q) {  // part q's owned peaks, batch coordinates
        const auto& w = parts[q]->plan_now;
        return std::pair<long long, long long>{w.batch_offset + w.params.owned_begin, w.batch_offset + w.params.owned_end};
    };
    auto located_count = [&](std::size_t q) {
        return std::min<std::size_t>(static_cast<std::size_t>(std::max(parts[q]->count_host[0], 0)), parts[q]->max_packets);
    };
    // The steps and ppm of every part were reset once for the batch (process()): a scope
    // estimated while an earlier part was handled also filled this part's packets in it.
    const auto [lo, hi] = owned_peaks(k);
    if (hi <= lo || scope_end.empty()) return;
    const std::size_t j_lo = scope_of(lo), j_hi = scope_of(hi - 1);
    const long long span_lo = j_lo == 0 ? std::numeric_limits<long long>::min() : scope_end[j_lo - 1];
    const long long span_hi = scope_end[j_hi];
    // Every part with packets in those scopes, located and its starts refined.
    auto locate_part = [&](std::size_t q) {
        if (part_located[q]) return;
        auto& pq = *parts[q];
        const auto wait_start = host_clock::now();
        wait_pumping([&] { return cudaEventQuery(pq.located.get()); }, [&] { return queue_ready_tails(n_active); });
        PAQ_CUDA_CHECK(cudaEventSynchronize(pq.located.get()));
        if (q == 0) last.host_first_locate_wait_ms = host_ms(wait_start);
        const std::size_t n = located_count(q);
        for (std::size_t p = 0; p < n; ++p) {
            const long long start_b = pq.plan_now.batch_offset + pq.starts_host[p];
            const long long peak_b = start_b + toff;
            const double* m3 = pq.peak3_host.data() + 3 * p;
            pq.refined[p] = static_cast<double>(start_b) +
                            (dsp::refine_peak(m3[0], m3[1], m3[2], static_cast<std::size_t>(batch_metric_len),
                                              static_cast<std::size_t>(peak_b)) -
                             static_cast<double>(peak_b));
        }
        part_located[q] = 1;
    };
    for (std::size_t q = 0; q < n_active; ++q) {
        const auto [qlo, qhi] = owned_peaks(q);
        if (qhi <= span_lo || qlo >= span_hi) continue;
        locate_part(q);
    }
    // Each scope once: dsp::estimate_clock over its packets' fractional starts, in order.
    for (std::size_t j = j_lo; j <= j_hi; ++j) {
        if (scope_done[j]) continue;
        scope_done[j] = 1;
        const long long s_lo = j == 0 ? std::numeric_limits<long long>::min() : scope_end[j - 1], s_hi = scope_end[j];
        scope_starts.clear();
        for (std::size_t q = 0; q < n_active; ++q) {
            if (!part_located[q]) continue;
            auto& pq = *parts[q];
            for (std::size_t p = 0; p < located_count(q); ++p) {
                const long long peak_b = pq.plan_now.batch_offset + pq.starts_host[p] + toff;
                if (peak_b >= s_lo && peak_b < s_hi) scope_starts.push_back(pq.refined[p]);
            }
        }
        if (scope_starts.empty()) continue;
        auto est = dsp::estimate_clock(scope_starts);
        // Too few packets in the scope (a batch's short end): the whole batch's estimate, as
        // the CPU (dsp::clock_steps). Its packets are numbered over all parts, in order.
        bool whole = false;
        if (!est.valid) {
            for (std::size_t q = 0; q < n_active; ++q) locate_part(q);
            scope_starts.clear();
            for (std::size_t q = 0; q < n_active; ++q) {
                for (std::size_t p = 0; p < located_count(q); ++p) scope_starts.push_back(parts[q]->refined[p]);
            }
            est = dsp::estimate_clock(scope_starts);
            whole = true;
        }
        std::size_t i = 0;
        for (std::size_t q = 0; q < n_active; ++q) {
            if (!part_located[q]) continue;
            auto& pq = *parts[q];
            for (std::size_t p = 0; p < located_count(q); ++p) {
                const long long peak_b = pq.plan_now.batch_offset + pq.starts_host[p] + toff;
                const bool in_scope = peak_b >= s_lo && peak_b < s_hi;
                if (!in_scope && !whole) continue;
                if (in_scope) {
                    const double v = est.valid ? est.packet_ppm[i] : 0.0;
                    pq.ppm[p] = v;
                    pq.steps_host[p] = est.valid && std::abs(v) >= cfg.clock_min_ppm ? dsp::clock_step(v) : unit;
                }
                ++i;
            }
        }
    }
}

void cuda_backend::process(const dsp::sample_batch& batch, dsp::batch_output& out)
{
    auto& m = *impl_;
    const nvtx_range nvtx_batch("paq cuda_backend::process");
    m.last = {};  // not valid until this call's stages are timed
    // The packet records start value-initialized; the bits keep their contents (every
    // packet's streams are written below), so a reused output costs no memset.
    out.batch_index = batch.index;
    out.streams = m.cfg.streams();
    out.packets.clear();
    out.truncated_packets = 0;
    out.nonfinite_samples = 0;
    // The continuous stream's frames and edges come from decode_stream; a window too short to
    // search has none (a reused output must not keep the batch before's).
    out.frames.clear();
    out.fec_offset = -1;
    out.fec_edge_places.clear();
    out.fec_edge_llr.clear();
    const auto* fec = m.parts.empty() || !m.parts.front()->fec ? nullptr : &*m.parts.front()->fec;
    out.fec_info_bytes = fec ? fec->info_bytes() : 0;
    out.fec_codewords = fec ? fec->codewords : 0;
    const auto size_fec = [&](std::size_t packets) {
        out.decoded.resize(fec ? packets * static_cast<std::size_t>(out.streams * out.fec_info_bytes) : 0);
        out.codewords.resize(fec ? packets * static_cast<std::size_t>(out.streams * out.fec_codewords) : 0);
    };
    const std::size_t len = batch.size();
    if (len < dsp::detector_span) {
        out.bits.clear();
        out.llrs.clear();
        size_fec(0);
        return;
    }
    if (len > m.max_window) throw std::invalid_argument("cuda backend: batch window larger than configured");
    if (batch.is_two_channel() != (m.cfg.channels == 2)) {
        throw std::invalid_argument(batch.is_two_channel() ? "cuda backend: a two-channel window, but the backend was made for one receive channel"
                                                           : "cuda backend: made for two receive channels, but the window holds one");
    }
    PAQ_CUDA_CHECK(cudaSetDevice(m.device));
    const bool timed = m.timing_on;
    m.batch_timed = timed;
    m.backs_queued = m.tails_queued = 0;
    const auto host_start = host_clock::now();
    if (timed) {
        cudaPointerAttributes attr{};
        PAQ_CUDA_CHECK(cudaPointerGetAttributes(&attr, batch.is_ci16()           ? static_cast<const void*>(batch.samples_ci16.data())
                                                       : batch.is_two_channel() ? static_cast<const void*>(batch.samples_x2.data())
                                                                                : static_cast<const void*>(batch.samples.data())));
        m.last.pinned_input = attr.type == cudaMemoryTypeHost;
    }

    // The batch's 2-samples-per-bit window (the CPU's chain batch): its start, length and
    // owned range place the parts' packets in the clock scopes as the CPU's.
    std::uint64_t batch_m_begin = 0;
    std::size_t batch_n_out = len, batch_owned_begin = batch.owned_begin, batch_owned_end = batch.owned_end;
    if (m.geom.resampling) {
        const auto bw = dsp::map_window(batch, m.geom);
        batch_m_begin = bw.m_begin;
        batch_n_out = bw.n_out;
        batch_owned_begin = bw.owned_begin;
        batch_owned_end = bw.owned_end;
    }

    // Each part's front (upload, metric, location) is queued on its own stream, its upload
    // after the previous part's (the link in turn, the first part's packets start early);
    // then the rest of each part's chain (after its clock, when tracked); then the parts are
    // collected in order: the host fills one part's records while the device still works on
    // the later ones.
    const std::vector<dsp::batch_part> split = m.geom.resampling ? dsp::split_batch(batch, m.n_parts, m.geom.guard_before, m.geom.guard_after)
                                                                 : dsp::split_batch(batch, m.n_parts);
    std::size_t capacity = 0;
    std::size_t n_active = 0;  // parts with a window to process, in order (a prefix of m.parts)
    cudaEvent_t prev_upload = nullptr;
    for (std::size_t k = 0; k < split.size(); ++k) {
        auto& cp = *m.parts[n_active];
        if (!m.plan_part(batch, split[k], batch_m_begin, cp.plan_now)) continue;
        capacity += cp.max_packets;
        cp.enqueue_front(prev_upload, timed, m.clock);
        prev_upload = cp.upload_done();
        ++n_active;
    }
    if (m.clock) {
        // The CPU's clock scopes: dsp::split_batch(chain batch, clock_scope_parts)'s owned shares.
        const std::size_t owned = batch_owned_end - batch_owned_begin;
        const std::size_t n_sc = std::min(dsp::clock_scope_parts, owned);
        m.scope_end.clear();
        for (std::size_t j = 0; j < n_sc; ++j) m.scope_end.push_back(static_cast<long long>(batch_owned_begin + owned * (j + 1) / n_sc));
        m.scope_done.assign(n_sc, 0);
        m.part_located.assign(n_active, 0);
        for (std::size_t k = 0; k < n_active; ++k) {
            auto& cp = *m.parts[k];
            std::fill(cp.steps_host.data(), cp.steps_host.data() + cp.max_packets, dsp::fixed_pos{1} << dsp::fixed_frac_bits);
            std::fill(cp.ppm.begin(), cp.ppm.begin() + static_cast<std::ptrdiff_t>(cp.max_packets), 0.0);
        }
        const auto metric_len = batch_n_out >= dsp::detector_span ? static_cast<long long>(batch_n_out - dsp::detector_span + 1) : 0LL;
        for (std::size_t k = 0; k < n_active; ++k) {
            const auto t0 = host_clock::now();
            m.clock_for_part(k, n_active, metric_len);
            const auto t1 = host_clock::now();
            m.parts[k]->enqueue_back(timed, true);
            m.backs_queued = k + 1;
            if (k == 0) {
                m.last.host_first_clock_ms = host_ms(t0, t1);
                m.last.host_first_queue_back_ms = host_ms(t1);
            }
        }
    } else {
        for (std::size_t k = 0; k < n_active; ++k) m.parts[k]->enqueue_back(timed, false);
        m.backs_queued = n_active;
    }
    // While the device works on the first part: the output at its largest size, so that its
    // pages are touched now and not while the last part's records are filled (a full batch
    // is about 17 MB of fresh memory; faulting it in took 3 ms at the end before).
    out.packets.resize(capacity);
    out.bits.resize(capacity * out.packet_bytes());
    const bool soft = !m.parts.empty() && m.parts.front()->soft();
    out.llrs.resize(soft ? capacity * num_paths * waveform::data_bits : 0);
    size_fec(capacity);
    double records_ms = 0.0, last_records_ms = 0.0;
    std::size_t filled = 0;
    const auto host_queued = host_clock::now();
    auto host_last_collect = host_queued;
    {
        const nvtx_range nvtx_records("paq records (host)");
        // Each part's tail is queued before it is collected (waiting, gated, for its detector),
        // the later parts' as soon as their detectors are done, also while the host waits on
        // an earlier part (the pump): the host fills a part's records while the device works
        // on the later ones, and the device is not left with the collected part's tail alone
        // (its decoder, with receiver.fec) while the later parts' wait to be queued.
        const std::function<bool()> pump = [&] { return m.queue_ready_tails(n_active); };
        for (std::size_t k = 0; k < n_active; ++k) {
            while (m.tails_queued <= k) m.parts[m.tails_queued++]->enqueue_tail(timed);
            if (k + 1 == n_active) host_last_collect = host_clock::now();
            last_records_ms = m.parts[k]->collect(batch, m.geom, m.clock, out, filled, pump);
            records_ms += last_records_ms;
        }
    }
    const auto host_collected = host_clock::now();
    out.packets.resize(filled);
    out.bits.resize(filled * out.packet_bytes());
    if (soft) out.llrs.resize(filled * num_paths * waveform::data_bits);
    size_fec(filled);
    if (m.stream) {
        const nvtx_range nvtx_stream("paq fec stream");
        const auto t0 = host_clock::now();
        m.decode_stream(out, n_active);
        m.last.host_stream_fec_ms = host_ms(t0);
    }

    if (timed && n_active > 0) {
        m.last.parts = static_cast<int>(n_active);
        for (std::size_t k = 0; k < n_active; ++k) {
            const auto& cp = *m.parts[k];
            for (int i = 1; i < cp.events_recorded; ++i) {
                const auto at = static_cast<std::size_t>(i);
                m.last.ms[static_cast<std::size_t>(cp.ev_stage[at])] += cp.ev[at].elapsed_ms_since(cp.ev[at - 1]);
                m.last.timeline.push_back({static_cast<int>(k), cp.ev_stage[at], cp.ev[at].elapsed_ms_since(m.parts[0]->ev[0])});
            }
            if (cp.plan_now.resampling) m.last.ms[static_cast<std::size_t>(stage::resample)] += cp.fe.resample_ms();
        }
        const auto& last_part = *m.parts[n_active - 1];
        m.last.device_ms = last_part.ev[static_cast<std::size_t>(last_part.events_recorded - 1)].elapsed_ms_since(m.parts[0]->ev[0]);
        m.last.ms[static_cast<std::size_t>(stage::records)] = records_ms;
        m.last.host_queued_ms = host_ms(host_start, host_queued);
        m.last.host_last_collect_ms = host_ms(host_last_collect, host_collected);
        m.last.host_last_records_ms = last_records_ms;
        m.last.host_total_ms = host_ms(host_start);
        m.last.valid = true;
    }
}

void chain_part::enqueue_front(cudaEvent_t upload_after, bool timed, bool clock)
{
    auto& m = *this;
    const auto& w = m.plan_now;
    const auto d = m.fe.device();
    const cudaStream_t s = d.stream;
    m.next_ev = 0;
    m.events_recorded = 0;
    if (timed) m.mark(s, cuda_backend::stage::count, m.next_ev);  // the start
    nvtx_stages nvtx("paq upload_metric");

    // Window up (resampled on the way when the input is not at 2 samples per bit) and metric,
    // then packet location, all on the device.
    m.fe.enable_resample_timing(timed && w.resampling);
    if (w.resampling) {
        m.fe.upload_resample_and_metric_device(w.input, w.first_pos, w.step, w.n_out, upload_after);
    } else {
        m.fe.upload_and_metric_device(w.input, upload_after);
    }
    if (timed) m.mark(s, cuda_backend::stage::upload_metric, m.next_ev);
    nvtx.next("paq locate");
    const std::size_t n_metric = w.n_out - dsp::detector_span + 1;
    m.loc.locate_device(m.fe.device_metric(), n_metric, w.params, s);
    // Each start checked against its neighbours a preamble period or two away with the whole
    // known sequence (dsp/start_check.hpp), as the CPU's dsp::check_packet_starts.
    m.loc.check_starts_device(m.fe.device_window(), static_cast<long long>(w.n_out), s, m.channels == 2 ? m.fe.device_window(1) : nullptr);
    if (timed) m.mark(s, cuda_backend::stage::locate, m.next_ev);
    if (clock) {
        nvtx.next("paq clock (peaks)");
        // What the host's clock estimate needs: the count, the starts and M around each peak.
        const auto found = m.loc.device();
        const std::size_t np = m.max_packets;
        m.fe.peak_metrics_device(found.starts, found.count, np, m.t.template_offset);
        PAQ_CUDA_CHECK(cudaMemcpyAsync(m.count_host.data(), found.count, sizeof(int), cudaMemcpyDeviceToHost, s));
        PAQ_CUDA_CHECK(cudaMemcpyAsync(m.starts_host.data(), found.starts, np * sizeof(long long), cudaMemcpyDeviceToHost, s));
        PAQ_CUDA_CHECK(cudaMemcpyAsync(m.peak3_host.data(), m.fe.device_peak_metrics(), 3 * np * sizeof(double), cudaMemcpyDeviceToHost, s));
        m.located.record(s);
    }
    if (timed) m.events_recorded = m.next_ev;
}

void chain_part::single_paths(int P)
{
    auto& m = *this;
    const auto d = m.fe.device();
    const cudaStream_t s = d.stream;
    auto* h = reinterpret_cast<cuFloatComplex*>(d.channels);
    if (m.channels == 2) {
        for (int ch = 0; ch < 2; ++ch) {
            single_path_kernel<<<P, 128, 0, s>>>(reinterpret_cast<cuFloatComplex*>(m.fe.device(ch).channels), m.tau.data() + m.slot0(ch),
                                                 m.gain.data() + m.slot0(ch));
            PAQ_CUDA_CHECK_LAUNCH();
        }
        mrc_kernel<<<(P + 127) / 128, 128, 0, s>>>(h, d.sigma2, d.support, m.weight.data(), m.gain.data(), m.max_packets, P, m.mrc.data());
        PAQ_CUDA_CHECK_LAUNCH();
    } else {
        single_path_kernel<<<P, 128, 0, s>>>(h, m.tau.data(), m.gain.data());
        PAQ_CUDA_CHECK_LAUNCH();
    }
}

void chain_part::carrier_from_decisions(int P)
{
    auto& m = *this;
    const auto d = m.fe.device();
    const cudaStream_t s = d.stream;
    const bool two = m.channels == 2;
    // dsp::cpu_backend's decided_carrier_offset: the unequalized path from the segments as
    // derotated by the estimate from the known bits, the PLL on it, the slope of its phases.
    // Its single paths and (two channels) combining terms serve the solvers stage too.
    // The segments' spectra go to the MMSE taps' spectrum buffer (both channels' slots), which
    // nothing reads before the MMSE and CMA stages write it.
    if (two) {
        combining_terms_kernel<<<P, 64, 0, s>>>(reinterpret_cast<cuFloatComplex*>(d.channels), d.sigma2, m.max_packets, m.h_pair.data(),
                                                m.loads_pair.data(), m.weight.data(), m.noise_min.data());
        PAQ_CUDA_CHECK_LAUNCH();
    }
    m.single_paths(P);
    auto* seg = reinterpret_cast<cuFloatComplex*>(d.segments);
    cuFloatComplex* const r = m.spec_mmse.data();
    m.plan.forward(seg, r);
    if (two) m.plan.forward(m.segments_of(1), r + m.slot0(1) * n_fft);
    const second_channel second = two ? m.second_for(r + m.slot0(1) * n_fft) : second_channel{};
    unequalized_path_device(r, m.hno, d.sigma2, m.tau.data(), m.gain.data(), m.decision_parity(), m.decision_m0(),
                            reinterpret_cast<float2*>(m.det.device_input()), P, s, two ? &second : nullptr);
    m.det.carrier_offsets_device(static_cast<std::size_t>(P), m.acq, m.track, m.carrier_dw.data(), s);
    m.fe.correct_carrier_device(m.carrier_dw.data(), static_cast<std::size_t>(P));
}

void chain_part::enqueue_back(bool timed, bool clock)
{
    auto& m = *this;
    const auto d = m.fe.device();
    const cudaStream_t s = d.stream;
    const auto found = m.loc.device();
    nvtx_stages nvtx(clock ? "paq clock (steps)" : "paq estimates");
    if (clock) {
        PAQ_CUDA_CHECK(cudaMemcpyAsync(m.steps_dev.data(), m.steps_host.data(), m.max_packets * sizeof(dsp::fixed_pos), cudaMemcpyHostToDevice, s));
        if (timed) m.mark(s, cuda_backend::stage::clock, m.next_ev);
    }
    // Each stage's events (timing on) and NVTX range: the range of the stage after `st` starts.
    const auto stage_done = [&](cuda_backend::stage st) { m.stage_done(st, timed, s, nvtx); };
    if (clock) nvtx.next("paq estimates");

    // Every stage over all slots; slots past the count carry zeros.
    const std::size_t np = m.max_packets;
    const int P = static_cast<int>(np);
    m.fe.estimate_device(found.starts, found.count, np, clock ? m.steps_dev.data() : nullptr,
                         m.cfg.front_end_correction_on() ? m.iq_sums.data() : nullptr);
    auto* seg = reinterpret_cast<cuFloatComplex*>(d.segments);
    auto* h = reinterpret_cast<cuFloatComplex*>(d.channels);
    const bool two = m.channels == 2;
    m.carrier_from_decisions(P);
    stage_done(cuda_backend::stage::estimates);

    // ZF and MMSE (Levinson, double); the unequalized path's single-path fit and the two
    // channels' combining terms are carrier_from_decisions's (the correction leaves the
    // channel estimates as they are). Two channels (dsp/combining.hpp): the joint MMSE over
    // both (block Levinson), the combined channel's ZF.
    if (two) {
        const std::size_t mp = m.max_packets;
        m.joint->solve_on_device(reinterpret_cast<const cf32*>(m.h_pair.data()), m.loads_pair.data(), reinterpret_cast<cf32*>(m.c_pair.data()),
                                 m.ok_mmse.data(), np, s);
        unpack_taps_kernel<<<P, 128, 0, s>>>(m.c_pair.data(), mp, m.c_mmse.data());
        PAQ_CUDA_CHECK_LAUNCH();
        const auto d2 = m.fe.device(1);
        combined_zf_device(d.channels, d2.channels, d.sigma2, d2.sigma2, reinterpret_cast<cf32*>(m.c_zf.data()), m.ok_zf.data(), np, s);
    } else {
        mmse_load_kernel<<<(P + 127) / 128, 128, 0, s>>>(d.sigma2, m.load.data(), P);
        PAQ_CUDA_CHECK_LAUNCH();
        if (m.solver) {
            m.solver->solve_on_device(d.channels, m.zero_load.data(), reinterpret_cast<cf32*>(m.c_zf.data()), m.ok_zf.data(), np, s);
            m.solver->solve_on_device(d.channels, m.load.data(), reinterpret_cast<cf32*>(m.c_mmse.data()), m.ok_mmse.data(), np, s);
            levinson_solver::solve_device(d.channels, m.zero_load.data(), reinterpret_cast<cf32*>(m.c_zf_lev.data()),
                                          m.ok_zf_lev.data(), np, s);
        } else {
            levinson_solver::solve_device_pair(d.channels, m.zero_load.data(), reinterpret_cast<cf32*>(m.c_zf.data()), m.ok_zf.data(),
                                               m.load.data(), reinterpret_cast<cf32*>(m.c_mmse.data()), m.ok_mmse.data(), np, s);
        }
    }
    stage_done(cuda_backend::stage::solvers);

    // R = FFT of each segment (out of place where paths may be made again from the
    // segments, else in place), H = FFT of each channel estimate.
    cuFloatComplex* const spec = m.spectra_of(seg);
    m.plan.forward(seg, spec);
    if (two) {
        // Each channel's R and H; the condition number of the combined channel's sum_c w_c |H_c|^2.
        m.plan.forward(m.segments_of(1), m.spectrum_of(1));
        auto* h2 = reinterpret_cast<cuFloatComplex*>(m.fe.device(1).channels);
        taps_spectra_device({{{h, L_ch, -N1, m.hspec.data(), nullptr}, {h2, L_ch, -N1, m.hspec.data() + m.slot0(1) * n_fft, nullptr}}, 2}, P,
                            s);
        combined_condition_kernel<<<P, 256, 0, s>>>(reinterpret_cast<const float2*>(m.hspec.data()), m.max_packets, m.weight.data(),
                                                    m.cond.data());
    } else {
        // H, and with it max |H|^2 / min |H|^2 per packet (the ZF condition number).
        taps_spectra_device({{{h, L_ch, -N1, m.hspec.data(), m.cond.data()}}, 1}, P, s);
        if (m.solver) {
            zf_fallback_kernel<<<P, 64, 0, s>>>(m.cond.data(), m.c_zf_lev.data(), m.ok_zf_lev.data(), m.c_zf.data(), m.ok_zf.data());
        }
    }
    PAQ_CUDA_CHECK_LAUNCH();
    stage_done(cuda_backend::stage::spectra);

    // CMA from MMSE.
    PAQ_CUDA_CHECK(cudaMemcpyAsync(m.c_cma.data(), m.c_mmse.data(), m.c_cma.size() * sizeof(cuFloatComplex), cudaMemcpyDeviceToDevice, s));
    // Each packet's CMA steps on chip (gpu/cma: the transforms in shared memory).
    // Its first step transforms the MMSE taps: their spectrum for the MMSE path comes from there.
    const bool mmse_from_cma = m.cfg.cma_iterations > 0;
    const std::size_t second_spectra = m.slot0(1) * n_fft, second_taps = m.slot0(1) * L_eq;  // channel 2's offsets (two channels)
    if (two) {
        cma_refine_device({reinterpret_cast<const cf32*>(spec), reinterpret_cast<const cf32*>(m.spectrum_of(1))},
                          {reinterpret_cast<cf32*>(m.c_cma.data()), reinterpret_cast<cf32*>(m.c_cma.data() + second_taps)},
                          reinterpret_cast<cf32*>(m.cma_scratch.data()), np, pre, m.cfg.cma_mu, m.cfg.cma_iterations, s,
                          mmse_from_cma ? std::array<cf32*, 2>{reinterpret_cast<cf32*>(m.spec_mmse.data()),
                                                               reinterpret_cast<cf32*>(m.spec_mmse.data() + second_spectra)}
                                        : std::array<cf32*, 2>{nullptr, nullptr});
    } else {
        cma_refine_device(reinterpret_cast<const cf32*>(spec), reinterpret_cast<cf32*>(m.c_cma.data()), np, pre, m.cfg.cma_mu, m.cfg.cma_iterations, s,
                          mmse_from_cma ? reinterpret_cast<cf32*>(m.spec_mmse.data()) : nullptr);
    }
    stage_done(cuda_backend::stage::cma);

    // Six paths: the tap spectra, then per packet on chip: R x C x H_NO folded, the N/2-point
    // inverse transform, the decision samples into the detector's input.
    taps_spectrum_jobs spectra{{{m.c_zf.data(), L_eq, -L1, m.spec_zf.data(), nullptr},
                                {m.c_cma.data(), L_eq, -L1, m.spec_cma.data(), nullptr},
                                {m.c_mmse.data(), L_eq, -L1, m.spec_mmse.data(), nullptr}},
                               mmse_from_cma ? 2 : 3};
    taps_spectra_device(spectra, P, s);
    if (two) {
        // Channel 2's CMA and MMSE taps' spectra.
        taps_spectrum_jobs spectra2{{{m.c_cma.data() + second_taps, L_eq, -L1, m.spec_cma.data() + second_spectra, nullptr},
                                     {m.c_mmse.data() + second_taps, L_eq, -L1, m.spec_mmse.data() + second_spectra, nullptr}},
                                    mmse_from_cma ? 1 : 2};
        taps_spectra_device(spectra2, P, s);
    }
    const int parity = m.decision_parity(), m0 = m.decision_m0();
    const second_channel second = two ? m.second_for(m.spectrum_of(1)) : second_channel{};
    paths_device(spec, m.hno, m.spec_zf.data(), m.spec_mmse.data(), m.spec_cma.data(), m.hspec.data(), m.psi, d.sigma2, m.tau.data(),
                 m.gain.data(), parity, m0, reinterpret_cast<float2*>(m.det.device_input()), P, s, nullptr, two ? &second : nullptr);
    stage_done(cuda_backend::stage::paths);
    // The per-packet estimates are final now: back on the side stream while the detector runs.
    {
        PAQ_CUDA_CHECK(cudaEventRecord(m.paths_done.get(), s));
        const cudaStream_t fs = m.fields_st.get();
        PAQ_CUDA_CHECK(cudaStreamWaitEvent(fs, m.paths_done.get(), 0));
        const auto back_field = [&](void* dst, const void* src, std::size_t bytes) {
            PAQ_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, fs));
        };
        back_field(m.count_host.data(), found.count, sizeof(int));
        back_field(m.truncated_host.data(), found.truncated, sizeof(unsigned long long));
        back_field(m.starts_host.data(), found.starts, np * sizeof(long long));
        back_field(m.metrics_host.data(), found.metrics, np * sizeof(float));
        back_field(m.moved_host.data(), found.moved_periods, np * sizeof(int));
        // Every channel's (two: channel 2's max_packets slots after channel 1's, on both sides).
        const std::size_t nc = static_cast<std::size_t>(m.channels) * np;
        back_field(m.h_host.data(), d.channels, nc * L_ch * sizeof(cf32));
        back_field(m.cfo_host.data(), d.cfo, np * sizeof(double));
        back_field(m.sigma2_host.data(), d.sigma2, nc * sizeof(double));
        back_field(m.cond_host.data(), m.cond.data(), np * sizeof(double));
        back_field(m.nonfinite_host.data(), d.nonfinite, nc * sizeof(unsigned));
        back_field(m.support_host.data(), d.support, nc * sizeof(int));
        back_field(m.ok_zf_host.data(), m.ok_zf.data(), np);
        back_field(m.ok_mmse_host.data(), m.ok_mmse.data(), np);
        if (m.cfg.front_end_correction_on()) back_field(m.iq_sums_host.data(), m.iq_sums.data(), np * iq_dc_sums_per_slot * sizeof(double));  // channel 1's
        PAQ_CUDA_CHECK(cudaEventRecord(m.fields_ready.get(), fs));
    }
    m.det.detect_device(np * num_paths, m.acq, m.track, m.boot, s);
    if (m.waits_for_count()) {
        PAQ_CUDA_CHECK(cudaMemcpyAsync(m.smoothed_streams_host.data(), m.det.device_smoothed_streams(), sizeof(int),
                                       cudaMemcpyDeviceToHost, s));
        PAQ_CUDA_CHECK(cudaEventRecord(m.smoothed_counted.get(), s));
    }
}

void chain_part::enqueue_tail(bool timed)
{
    auto& m = *this;
    const auto d = m.fe.device();
    const cudaStream_t s = d.stream;
    nvtx_stages nvtx("paq detector");
    const auto stage_done = [&](cuda_backend::stage st) { m.stage_done(st, timed, s, nvtx); };
    const std::size_t np = m.max_packets;
    const int P = static_cast<int>(np);
    auto* seg = reinterpret_cast<cuFloatComplex*>(d.segments);
    cuFloatComplex* const spec = m.spectra_of(seg);  // as enqueue_back transformed them
    const int parity = m.decision_parity(), m0 = m.decision_m0();
    // Where the smoother decided: the paths dsp::smoother::pre_derotated names again from the
    // segments derotated by the unequalized or the MMSE path's phases
    // (dsp::smoother::pre_derotation_source_for), as dsp::cpu_backend does. Gated, only when
    // it decided any packet: the count came back after the detector (enqueue_back).
    m.derotation_valid = false;
    if (m.rederives()) {
        bool any = true;
        if (m.waits_for_count()) {
            PAQ_CUDA_CHECK(cudaEventSynchronize(m.smoothed_counted.get()));
            any = m.smoothed_streams_host[0] > 0;
        }
        if (any) {
            // Each packet's source and the streams made again; the segments (time domain)
            // derotated and transformed in place: only the paths read them.
            m.det.plan_rederivation_device(np * num_paths, s);
            for (int ch = 0; ch < m.channels; ++ch) {
                cuFloatComplex* sc = m.segments_of(ch);
                pre_derotate_device(sc, m.det.device_derotation(), m.det.device_theta_bit(), pre, m.t.decision_delay, P, s);
                m.plan.forward(sc, sc);
            }
            const second_channel second = m.channels == 2 ? m.second_for(m.segments_of(1)) : second_channel{};
            paths_device(seg, m.hno, m.spec_zf.data(), m.spec_mmse.data(), m.spec_cma.data(), m.hspec.data(), m.psi,
                         d.sigma2, m.tau.data(), m.gain.data(), parity, m0, reinterpret_cast<float2*>(m.det.device_input()), P, s,
                         m.det.device_derotation(), m.channels == 2 ? &second : nullptr);
            m.det.redecide_device(np * num_paths, m.acq, m.boot, s);
            PAQ_CUDA_CHECK(cudaMemcpyAsync(m.derotation_host.data(), m.det.device_derotation(), np, cudaMemcpyDeviceToHost, s));
            m.derotation_valid = true;
        }
    }
    if (m.cfg.detector != dsp::detector_kind::trellis) {
        // The published symbol-by-symbol estimates, from the final statistics (the detector's own
        // chose the derotation's source above).
        const auto streams = static_cast<int>(np * num_paths);
        decision_quality_kernel<<<static_cast<unsigned>((streams + quality_warps - 1) / quality_warps), 32 * quality_warps, 0, s>>>(
            m.det.device_soft(), m.loc.device().count, streams, m.det.device_stats());
        PAQ_CUDA_CHECK(cudaGetLastError());
        posterior_bep_kernel<<<static_cast<unsigned>(np), stream_block_threads, 0, s>>>(m.det.device_soft(), m.loc.device().count,
                                                                                      m.posterior_llr.data(), m.det.device_stats(),
                                                                                      m.fec ? m.fec_llr.data() : nullptr, m.cfg.streams());
        PAQ_CUDA_CHECK(cudaGetLastError());
    }
    stage_done(cuda_backend::stage::detector);
    if (m.trellis) {
        // The trellis's input: the same paths low-passed, one sample a bit (at its instant), derotated by
        // the symbol-by-symbol detector's phase (the PLL's or the smoother's) as they are made;
        // detected with the table fitted on that detector's bits.
        const second_channel second = m.channels == 2 ? m.second_for(m.spectrum_of(1)) : second_channel{};
        paths_trellis_device(spec, m.lp, m.spec_zf.data(), m.spec_mmse.data(), m.spec_cma.data(), m.hspec.data(), m.psi, d.sigma2,
                             m.tau.data(), m.gain.data(), parity, m0, m.det.device_theta(), m.det.device_theta_bit(),
                             m.det.device_smoothed(), m.trellis->device_input(), P, s, m.channels == 2 ? &second : nullptr);
        m.trellis->detect_device(np * num_paths, m.det.device_bits(), m.det.device_stats(), s);
        if (m.soft()) m.trellis->quantize_llrs(np * num_paths, m.llr_q.data(), s);
        stage_done(cuda_backend::stage::trellis);
    }
    if (m.fec) {
        // Every located packet's streams' LLRs; a codeword-aligned code's codewords decoded,
        // every codeword of them in one launch (the continuous stream's: decode_stream).
        const int streams = m.cfg.streams();
        const int sxs_streams = m.cfg.detector == dsp::detector_kind::trellis ? 0 : num_paths;
        const int* count = m.loc.device().count;
        fec_llr_kernel<<<static_cast<unsigned>(np * static_cast<std::size_t>(streams)), stream_block_threads, 0, s>>>(
            m.det.device_soft(), m.trellis ? m.trellis->device_llr() : nullptr, count, streams, sxs_streams, m.fec_llr.data());
        PAQ_CUDA_CHECK(cudaGetLastError());
        if (m.fec_decoder) {
            const int per_packet = streams * m.fec->codewords;
            m.fec_decoder->decode_device(m.fec_llr.data(), np * static_cast<std::size_t>(per_packet), count, per_packet, m.fec_info.data(),
                                         m.fec_results.data(), s);
        }
        stage_done(cuda_backend::stage::fec);
    }

    // The detectors' outputs come back after them (pinned, asynchronous).
    const auto back = [&](void* dst, const void* src, std::size_t bytes) {
        PAQ_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, s));
    };
    if (m.det.device_smoothed() != nullptr) back(m.smoothed_host.data(), m.det.device_smoothed(), np);
    // The bits and stats of each detector the config asks for (sxs, trellis, or sxs then
    // trellis): host layout [detector][packet][path].
    {
        const std::size_t n_bits = np * num_paths * dsp::packed_data_bytes, n_stats = np * num_paths;
        std::size_t d = 0;
        if (m.cfg.detector != dsp::detector_kind::trellis) {
            back(m.bits_host.data(), m.det.device_bits(), n_bits);
            back(m.stats_host.data(), m.det.device_stats(), n_stats * sizeof(dsp::path_stats));
            ++d;
        }
        if (m.trellis) {
            back(m.bits_host.data() + d * n_bits, m.trellis->device_bits(), n_bits);
            back(m.stats_host.data() + d * n_stats, m.trellis->device_stats(), n_stats * sizeof(dsp::path_stats));
        }
    }
    if (m.soft()) back(m.llr_host.data(), m.llr_q.data(), np * num_paths * waveform::data_bits);
    if (m.fec_decoder) {
        back(m.fec_info_host.data(), m.fec_info.data(), m.fec_info.size());
        back(m.fec_results_host.data(), m.fec_results.data(), m.fec_results.size() * sizeof(dsp::codeword_result));
    }
    stage_done(cuda_backend::stage::copy_back);
    if (timed) m.events_recorded = m.next_ev;
}

void cuda_backend::impl::decode_stream(dsp::batch_output& out, std::size_t n_active)
{
    auto& st = *stream;
    const auto t_find = host_clock::now();
    const std::size_t np = out.packets.size();
    const auto streams = static_cast<std::size_t>(out.streams);
    const std::size_t per_packet = streams * waveform::data_bits;
    // process() cleared the offset and the edges.
    out.frames.assign(np, dsp::batch_output::packet_frames{});
    std::fill(out.decoded.begin(), out.decoded.end(), std::uint8_t{0});
    std::fill(out.codewords.begin(), out.codewords.end(), dsp::codeword_result{});
    if (np == 0) return;
    // Each packet's start (2-samples-per-bit window) and its LLRs on the device, part by part.
    std::vector<std::uint64_t> starts;
    std::vector<const float*> rows;
    starts.reserve(np);
    rows.reserve(np);
    for (std::size_t k = 0; k < n_active; ++k) {
        auto& cp = *parts[k];
        for (std::size_t p = 0; p < cp.batch_count; ++p) {
            starts.push_back(cp.plan_now.m_begin + static_cast<std::uint64_t>(cp.starts_host.data()[p]));
            rows.push_back(cp.fec_llr.data() + p * per_packet);
        }
    }
    if (starts.size() != np) throw std::logic_error("cuda backend: the parts' packets are not the batch's");
    const auto places = dsp::data_field_places(starts, static_cast<double>(waveform::L_pkt));
    // What the host reads: the packets of the fields the markers are looked for in (and one
    // past them, as the whole batch's places would bound the search), then the edges'.
    const std::size_t head = std::min(np, static_cast<std::size_t>(dsp::marker_search_fields) + 1);
    const auto edges = dsp::stream_edge_packets(np);
    cudaStream_t s = parts.front()->fe.device().stream;
    const auto read = [&](std::size_t slot, std::size_t packet) {
        PAQ_CUDA_CHECK(cudaMemcpyAsync(st.llr_host.data() + slot * per_packet, rows[packet], per_packet * sizeof(float), cudaMemcpyDeviceToHost, s));
    };
    for (std::size_t i = 0; i < head; ++i) read(i, i);
    for (std::size_t e = 0; e < edges.size(); ++e) read(head + e, edges[e]);
    PAQ_CUDA_CHECK(cudaStreamSynchronize(s));
    for (std::size_t e = 0; e < edges.size(); ++e) {
        out.fec_edge_places.push_back(places[edges[e]]);
        const float* src = st.llr_host.data() + (head + e) * per_packet;
        out.fec_edge_llr.insert(out.fec_edge_llr.end(), src, src + per_packet);
    }
    const dsp::stream_fields fields{std::span(places).first(head), std::span<const float>(st.llr_host.data(), head * per_packet), out.streams};
    const auto offset = st.deframer.find_offset(fields);
    if (!offset) return;
    const auto frames = st.deframer.frames(places, *offset);
    const auto jobs = st.deframer.assign(frames, *offset, st.framing.codewords, out);
    if (jobs.empty()) return;
    if (jobs.size() > st.max_words) throw std::logic_error("cuda backend: more frames than the stream's buffers");
    // Each frame's codeword: the data fields it crosses.
    constexpr auto field_bits = static_cast<std::int64_t>(waveform::data_bits);
    for (std::size_t j = 0; j < jobs.size(); ++j) {
        const std::int64_t bit0 = frames[jobs[j].frame].start + st.framing.marker_bits;
        const std::int64_t place0 = bit0 / field_bits;
        stream_word w{};
        w.first = static_cast<int>(bit0 - place0 * field_bits);
        for (int q = 0; q < stream_word_fields; ++q) {
            const auto it = std::lower_bound(places.begin(), places.end(), place0 + q);
            w.field[q] = it != places.end() && *it == place0 + q ? rows[static_cast<std::size_t>(it - places.begin())] : nullptr;
        }
        st.words_host[j] = w;
    }
    const std::size_t words = jobs.size() * streams;
    const auto k_bytes = static_cast<std::size_t>(st.framing.k / 8);
    last.host_stream_find_ms = host_ms(t_find);
    PAQ_CUDA_CHECK(cudaMemcpyAsync(st.words.data(), st.words_host.data(), jobs.size() * sizeof(stream_word), cudaMemcpyHostToDevice, s));
    gather_stream_words(st.words.data(), jobs.size(), out.streams, st.framing.n, st.word_llr.data(), s);
    st.decoder->decode_device(st.word_llr.data(), words, nullptr, 1, st.info.data(), st.results.data(), s);
    PAQ_CUDA_CHECK(cudaMemcpyAsync(st.info_host.data(), st.info.data(), words * k_bytes, cudaMemcpyDeviceToHost, s));
    PAQ_CUDA_CHECK(cudaMemcpyAsync(st.results_host.data(), st.results.data(), words * sizeof(dsp::codeword_result), cudaMemcpyDeviceToHost, s));
    PAQ_CUDA_CHECK(cudaStreamSynchronize(s));
    // Into each frame's packet and slot, stream by stream.
    for (std::size_t j = 0; j < jobs.size(); ++j) {
        const auto& jb = jobs[j];
        for (std::size_t sv = 0; sv < streams; ++sv) {
            const int si = static_cast<int>(sv);
            std::memcpy(out.packet_decoded(jb.owner, si) + static_cast<std::size_t>(jb.slot) * k_bytes, st.info_host.data() + (j * streams + sv) * k_bytes,
                        k_bytes);
            out.packet_codewords(jb.owner, si)[jb.slot] = st.results_host[j * streams + sv];
        }
    }
}

double chain_part::collect(const dsp::sample_batch& batch, const dsp::input_geometry& geom, bool clock, dsp::batch_output& out,
                           std::size_t& filled, const std::function<bool()>& pump)
{
    auto& m = *this;
    // The estimates came back while the detector ran: the records first, all but what the
    // detectors give; then, once the part's stream is done, the bits and their statistics.
    wait_pumping([&] { return cudaEventQuery(m.fields_ready.get()); }, pump);
    PAQ_CUDA_CHECK(cudaEventSynchronize(m.fields_ready.get()));
    const auto t_records = host_clock::now();
    const int count = m.count_host[0];
    const std::size_t first_packet = filled;
    if (count < 0 || static_cast<std::size_t>(count) > m.max_packets || first_packet + static_cast<std::size_t>(count) > out.packets.size()) {
        PAQ_CUDA_CHECK(cudaStreamSynchronize(m.fe.device().stream));  // nothing of this batch left in flight
        throw std::runtime_error(count < 0 || static_cast<std::size_t>(count) > m.max_packets ? "cuda backend: more packets than buffers"
                                                                                              : "cuda backend: output smaller than the parts' packets");
    }
    const std::size_t found_np = static_cast<std::size_t>(count);
    out.truncated_packets += m.truncated_host[0];
    filled += found_np;
    m.batch_count = found_np;
    std::uint64_t nonfinite_total = 0;
    // Packets in parallel: the records (received power of each channel estimate) and the
    // copy of the bits out of the pinned buffer were 7 ms on one core for a full batch.
    const int team = host_loop_team();
#pragma omp parallel for schedule(static) num_threads(team) reduction(+ : nonfinite_total)
    for (std::ptrdiff_t pi = 0; pi < static_cast<std::ptrdiff_t>(found_np); ++pi) {
        const auto p = static_cast<std::size_t>(pi);
        auto& rec = out.packets[first_packet + p];
        // Resampling: the start as an input sample index (dsp::input_index, as the CPU's).
        rec.start_sample = m.plan_now.resampling ? dsp::input_index(batch, m.plan_now.m_begin + static_cast<std::uint64_t>(m.starts_host[p]), geom)
                                                 : m.plan_now.m_begin + static_cast<std::uint64_t>(m.starts_host[p]);
        rec.clock_ppm = clock ? m.ppm[p] : 0.0;
        rec.clock_corrected = clock && m.steps_host[p] != dsp::fixed_pos{1} << dsp::fixed_frac_bits;
        rec.metric = m.metrics_host[p];
        rec.front_end_estimated = rec.front_end_corrected = false;
        if (m.cfg.front_end_correction_on()) {
            const double* q = m.iq_sums_host.data() + p * iq_dc_sums_per_slot;
            dsp::record_front_end(dsp::iq_dc_from_sums(q[0], q[1], q[2], q[3], q[4], q[5]), rec);
        }
        rec.cfo_rad_per_sample = m.cfo_host[p];
        rec.zf_condition = m.cond_host[p];
        // Channel estimate `slot` (channel c's at c max_packets + p) into rec.h, its energy.
        const auto load_h = [&](std::size_t slot) {
            double energy = 0.0;
            for (int a = 0; a < L_ch; ++a) {
                const cf32 v32 = m.h_host[slot * L_ch + static_cast<std::size_t>(a)];
                rec.h[static_cast<std::size_t>(a)] = cf64(v32.real(), v32.imag());
                energy += std::norm(rec.h[static_cast<std::size_t>(a)]);
            }
            rec.channel_energy = energy;
        };
        std::size_t slot = p;  // the channel estimate the record keeps: the one, or the better of two
        if (m.channels == 1) {
            load_h(slot);
            rec.ebn0_db = 10.0 * std::log10(std::max(dsp::received_power(rec.h.data(), L_ch), 1e-300) / std::max(m.sigma2_host[p], 1e-300));
            rec.nonfinite_samples = m.nonfinite_host[p];
        } else {
            // As dsp::cpu_backend: each channel's Eb/N0 (its received power over sigma2; 0 for
            // a channel without signal or noise) and level, the combined Eb/N0 their sum, the
            // record's estimate the channel of the higher Eb/N0.
            rec.receive_channels = 2;
            rec.best_channel = 0;
            std::array<double, 2> snr{};
            double snr_sum = 0.0;
            rec.nonfinite_samples = 0;
            for (std::size_t ch = 0; ch < 2; ++ch) {
                const std::size_t sl = ch * m.max_packets + p;
                load_h(sl);
                const double pw = dsp::received_power(rec.h.data(), L_ch), s2 = m.sigma2_host[sl];
                snr[ch] = pw > 0.0 && s2 > 0.0 ? pw / s2 : 0.0;
                snr_sum += snr[ch];
                rec.channel_ebn0_db[ch] = static_cast<float>(10.0 * std::log10(std::max(snr[ch], 1e-30)));
                rec.channel_level_db[ch] = static_cast<float>(10.0 * std::log10(std::max(pw + 2.0 * s2, 1e-30)));
                if (snr[ch] > snr[rec.best_channel]) rec.best_channel = static_cast<std::uint8_t>(ch);
                rec.nonfinite_samples += m.nonfinite_host[sl];
            }
            slot = rec.best_channel * m.max_packets + p;
            load_h(slot);
            rec.ebn0_db = 10.0 * std::log10(std::max(snr_sum, 1e-30));
        }
        rec.sigma2 = m.sigma2_host[slot];
        rec.channel_support = m.support_host[slot];
        const auto& support = m.t.supports.at(static_cast<std::size_t>(rec.channel_support));
        rec.channel_first_tap = support.first_tap;
        rec.channel_last_tap = support.last_tap;
        rec.flags = dsp::packet_flags(rec.nonfinite_samples, rec.cfo_rad_per_sample, rec.ebn0_db, rec.zf_condition,
                                      !m.ok_zf_host[p] || !m.ok_mmse_host[p], m.moved_host[p] != 0);
        nonfinite_total += rec.nonfinite_samples;
    }
    out.nonfinite_samples += nonfinite_total;
    double ms = host_ms(t_records);

    wait_pumping([&] { return cudaStreamQuery(m.fe.device().stream); }, pump);
    PAQ_CUDA_CHECK(cudaStreamSynchronize(m.fe.device().stream));
    const auto t_bits = host_clock::now();
    // Per packet, each detector's six paths (host layout [detector][packet][path]) to the
    // output's [packet][stream].
    constexpr std::size_t path_block = num_paths * dsp::packed_data_bytes;
    const std::size_t detectors = static_cast<std::size_t>(out.streams / num_paths);
#pragma omp parallel for schedule(static) num_threads(team)
    for (std::ptrdiff_t pi = 0; pi < static_cast<std::ptrdiff_t>(found_np); ++pi) {
        const auto p = static_cast<std::size_t>(pi);
        for (std::size_t d = 0; d < detectors; ++d) {
            std::memcpy(out.bits.data() + ((first_packet + p) * detectors + d) * path_block, m.bits_host.data() + (d * m.max_packets + p) * path_block,
                        path_block);
        }
        if (m.soft()) {
            constexpr std::size_t llr_block = num_paths * waveform::data_bits;
            std::memcpy(out.llrs.data() + (first_packet + p) * llr_block, m.llr_host.data() + p * llr_block, llr_block);
        }
        auto& rec = out.packets[first_packet + p];
        if (m.smoothed_host.size() > 0 && m.smoothed_host[p] != 0) rec.flags |= dsp::flag_phase_smoothed;
        if (m.derotation_valid && m.derotation_host[p] == static_cast<std::uint8_t>(dsp::eq_path::none)) rec.flags |= dsp::flag_unequalized_phase;
        for (std::size_t d = 0; d < detectors; ++d) {
            for (std::size_t path = 0; path < static_cast<std::size_t>(num_paths); ++path) {
                rec.paths[d * num_paths + path] = m.stats_host[(d * m.max_packets + p) * num_paths + path];
            }
        }
    }
    if (m.fec_decoder) {
        // [packet][stream][...] on both sides: the part's packets follow the earlier parts'.
        const std::size_t info_per_packet = static_cast<std::size_t>(out.streams) * static_cast<std::size_t>(m.fec->info_bytes());
        const std::size_t words_per_packet = static_cast<std::size_t>(out.streams * m.fec->codewords);
        std::memcpy(out.decoded.data() + first_packet * info_per_packet, m.fec_info_host.data(), found_np * info_per_packet);
        std::memcpy(out.codewords.data() + first_packet * words_per_packet, m.fec_results_host.data(),
                    found_np * words_per_packet * sizeof(dsp::codeword_result));
    }
    return ms + host_ms(t_bits);
}

}  // namespace paq::gpu
