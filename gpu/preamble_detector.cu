#include "gpu/preamble_detector.hpp"

#include "dsp/batch.hpp"
#include "dsp/batcher.hpp"
#include "dsp/start_check.hpp"
#include "dsp/waveform.hpp"
#include "gpu/resources.cuh"

#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include <limits>
#include <stdexcept>

namespace paq::gpu {

namespace {

constexpr int block = 256;           ///< positions per block maximum (as on the CPU)
constexpr long long slot_len = 4096; ///< < W: at most one peak per slot
constexpr long long half_w = static_cast<long long>(dsp::detector_half_window);
constexpr long long spacing_margin = 8;  ///< dsp::find_preamble_peaks' margin
constexpr int finalize_threads = 1024;
static_assert(slot_len < half_w);

__global__ void block_max_kernel(const float* __restrict__ metric, long long n, float* __restrict__ bmax)
{
    const long long i = blockIdx.x * static_cast<long long>(block) + threadIdx.x;
    float v = i < n ? metric[i] : -INFINITY;
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    __shared__ float warp_max[block / 32];
    if (threadIdx.x % 32 == 0) warp_max[threadIdx.x / 32] = v;
    __syncthreads();
    if (threadIdx.x == 0) {
        float m = warp_max[0];
        for (int k = 1; k < block / 32; ++k) m = fmaxf(m, warp_max[k]);
        bmax[blockIdx.x] = m;
    }
}

/// max of metric[lo .. hi], -inf for an empty range: dsp::find_preamble_peaks' range_max.
__device__ float range_max(const float* __restrict__ metric, const float* __restrict__ bmax, long long lo, long long hi)
{
    float m = -INFINITY;
    if (lo > hi) return m;
    long long i = lo;
    for (; i <= hi && i % block != 0; ++i) m = fmaxf(m, metric[i]);
    for (; i + block - 1 <= hi; i += block) m = fmaxf(m, bmax[i / block]);
    for (; i <= hi; ++i) m = fmaxf(m, metric[i]);
    return m;
}

/// One thread per position of [first, last): the peak rule of dsp::find_preamble_peaks.
__global__ void peak_kernel(const float* __restrict__ metric, const float* __restrict__ bmax, long long n, long long first,
                            long long last, double threshold, bool segment_start, int* __restrict__ slots)
{
    const long long u = first + blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
    if (u >= last) return;
    const float v = metric[u];
    if (!(static_cast<double>(v) >= threshold)) return;
    const long long w = half_w;
    if (u > 0 && !(v > range_max(metric, bmax, u > w ? u - w : 0, u - 1))) return;
    if (v < range_max(metric, bmax, u + 1, min(n - 1, u + w))) return;
    if (segment_start && u < w) {
        const long long ext_end = min(n, u + w + (w - u) - spacing_margin + 1);
        if (ext_end > u + w + 1 && range_max(metric, bmax, u + w + 1, ext_end - 1) > v) return;
    }
    slots[(u - first) / slot_len] = static_cast<int>(u);
}

/// One block: the slots in order, dsp::locate_packets' complete / truncated rule, compaction.
__global__ void __launch_bounds__(finalize_threads)
    finalize_kernel(const int* __restrict__ slots, int n_slots, const float* __restrict__ metric, long long n,
                    locate_params prm, int max_packets, long long* __restrict__ starts, float* __restrict__ metrics,
                    int* __restrict__ count, unsigned long long* __restrict__ truncated)
{
    using scan_t = cub::BlockScan<int, finalize_threads>;
    using reduce_t = cub::BlockReduce<int, finalize_threads>;
    __shared__ union {
        typename scan_t::TempStorage scan;
        typename reduce_t::TempStorage reduce;
    } tmp;
    const int per = (n_slots + finalize_threads - 1) / finalize_threads;
    const int s0 = threadIdx.x * per, s1 = min(n_slots, s0 + per);
    const long long l_pkt = static_cast<long long>(waveform::L_pkt);
    auto complete = [&](long long u) {
        const long long s = u - prm.template_offset;
        const bool cut_at_start = prm.segment_start && u < static_cast<long long>(dsp::detector_span);
        const bool cut_at_end = prm.segment_end && u + half_w >= n;
        return !(cut_at_start || cut_at_end || s < 0 || s + l_pkt > prm.window_len);
    };
    int mine = 0, cut = 0;
    for (int i = s0; i < s1; ++i) {
        const int u = slots[i];
        if (u < 0) continue;
        if (complete(u)) ++mine;
        else ++cut;
    }
    int offset = 0, total = 0;
    scan_t(tmp.scan).ExclusiveSum(mine, offset, total);
    __syncthreads();
    const int cut_total = reduce_t(tmp.reduce).Sum(cut);
    for (int i = s0; i < s1; ++i) {
        const int u = slots[i];
        if (u < 0 || !complete(u)) continue;
        if (offset < max_packets) {
            starts[offset] = u - prm.template_offset;
            metrics[offset] = metric[u];
        }
        ++offset;
    }
    if (threadIdx.x == 0) {
        *count = total;
        *truncated = static_cast<unsigned long long>(cut_total);
    }
}

/// dsp::check_packet_starts: one block per located packet, one warp per candidate start
/// s + 32 k (k = -reach .. reach), a lane per sample of a 32-sample block, the block sums
/// reduced over the warp (so the sums' order differs from the CPU's: decisions differ only
/// where two candidates' K are within rounding). Candidate order and the strict comparison
/// are dsp::start_check::checked_start's.
constexpr int check_warps = 2 * dsp::start_check::reach + 1;
static_assert(dsp::start_check::period == 32, "a lane per sample of a period");

/// With window2 (a second receive channel's window, or null), each channel's K over its energy
/// on the known samples, summed over both channels.
__global__ void __launch_bounds__(32 * check_warps) check_starts_kernel(const float2* __restrict__ window, const float2* __restrict__ window2,
                                                                       long long window_len,
                                                                       const int* __restrict__ count, int max_packets,
                                                                       const double2* __restrict__ x, int n_known, int known_first, long long* __restrict__ starts,
                                                                       int* __restrict__ moved)
{
    const int p = static_cast<int>(blockIdx.x);
    if (p >= min(*count, max_packets)) return;
    const int w = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
    const int k = w - dsp::start_check::reach;
    const long long s = starts[p];
    const long long v = s + static_cast<long long>(dsp::start_check::period) * k;
    const bool valid = v >= 0 && v + static_cast<long long>(waveform::L_pkt) <= window_len;
    double metric = 0.0;
    const bool two = window2 != nullptr;
    for (int ch = 0; valid && ch < (two ? 2 : 1); ++ch) {
        const float2* __restrict__ win = ch == 0 ? window : window2;
        double kc = 0.0, energy = 0.0;
        for (int b0 = 0; b0 < n_known; b0 += 32) {
            const int i = b0 + lane;
            double re = 0.0, im = 0.0;
            if (i < n_known) {
                const float2 z = win[v + known_first + i];
                const bool ok = isfinite(z.x) && isfinite(z.y);
                const double sr = ok ? static_cast<double>(z.x) : 0.0, si = ok ? static_cast<double>(z.y) : 0.0;
                re = sr * x[i].x + si * x[i].y;  // s conj(x), as dsp::start_check::known_metric
                im = si * x[i].x - sr * x[i].y;
                if (two) energy += sr * sr + si * si;
            }
            for (int o = 16; o > 0; o >>= 1) {
                re += __shfl_xor_sync(0xffffffffu, re, o);
                im += __shfl_xor_sync(0xffffffffu, im, o);
            }
            kc += re * re + im * im;
        }
        if (!two) {
            metric = kc;
            break;
        }
        // Several channels: each channel's K over its energy on the known samples, summed
        // (dsp::check_packet_starts over several channels).
        for (int o = 16; o > 0; o >>= 1) energy += __shfl_xor_sync(0xffffffffu, energy, o);
        metric += energy > 0.0 ? kc / (static_cast<double>(dsp::start_check::period) * energy) : 0.0;
    }
    __shared__ double k_of[check_warps];
    __shared__ bool valid_of[check_warps];
    if (lane == 0) {
        k_of[w] = metric;
        valid_of[w] = valid;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        int best = dsp::start_check::reach;  // k = 0
        for (int c = 0; c < check_warps; ++c) {
            if (c == dsp::start_check::reach || !valid_of[c]) continue;
            if (k_of[c] > k_of[best]) best = c;
        }
        moved[p] = best - dsp::start_check::reach;
        starts[p] = s + static_cast<long long>(dsp::start_check::period) * (best - dsp::start_check::reach);
    }
}

}  // namespace

locate_params make_locate_params(const dsp::batch_part& part, double threshold, int template_offset)
{
    return {static_cast<long long>(part.length), static_cast<long long>(part.owned_begin), static_cast<long long>(part.owned_end),
            part.segment_start, part.segment_end, threshold, template_offset};
}

locate_params make_locate_params(const dsp::sample_batch& batch, double threshold, int template_offset)
{
    return make_locate_params(dsp::batch_part{0, batch.size(), batch.owned_begin, batch.owned_end, batch.segment_start,
                                              batch.segment_end},
                              threshold, template_offset);
}

struct preamble_detector::impl {
    int device;
    std::size_t max_metric, max_packets;
    device_buffer<float> bmax;
    device_buffer<int> slots;
    device_buffer<long long> starts;
    device_buffer<float> metrics;
    device_buffer<int> count;
    device_buffer<unsigned long long> truncated;
    device_buffer<int> moved;
    device_buffer<double2> x;  ///< the known samples (receiver_tables::x_known)
    int known_first;

    impl(int dev, std::size_t mm, std::size_t mp, const dsp::receiver_tables& t)
        : device(select_device(dev)),
          max_metric(mm),
          max_packets(mp),
          bmax((mm + block - 1) / block),
          slots(mm / slot_len + 1),
          starts(mp),
          metrics(mp),
          count(1),
          truncated(1),
          moved(mp),
          x(t.x_known.size()),
          known_first(t.known_first)
    {
        if (mm >= static_cast<std::size_t>(std::numeric_limits<int>::max())) {
            throw std::invalid_argument("preamble_detector: metric longer than 2^31 positions");
        }
        static_assert(sizeof(double2) == sizeof(cf64), "std::complex<double> is two doubles, as double2");
        PAQ_CUDA_CHECK(cudaMemcpy(x.data(), t.x_known.data(), t.x_known.size() * sizeof(cf64), cudaMemcpyHostToDevice));
        PAQ_CUDA_CHECK(cudaMemset(moved.data(), 0, mp * sizeof(int)));
    }
};

preamble_detector::preamble_detector(int device_id, std::size_t max_metric, std::size_t max_packets, const dsp::receiver_tables& tables)
    : impl_(std::make_unique<impl>(device_id, max_metric, max_packets, tables))
{
}

preamble_detector::~preamble_detector() = default;

located_packets preamble_detector::device() noexcept
{
    auto& m = *impl_;
    return {m.starts.data(), m.metrics.data(), m.count.data(), m.truncated.data(), m.moved.data()};
}

std::size_t preamble_detector::max_packets() const noexcept { return impl_->max_packets; }

void preamble_detector::locate_device(const float* metric, std::size_t n_metric, const locate_params& prm, cuda_stream_t s)
{
    auto& m = *impl_;
    if (n_metric > m.max_metric) throw std::invalid_argument("preamble_detector: metric longer than at Create");
    const long long n = static_cast<long long>(n_metric);
    const long long first = std::max(0LL, prm.owned_begin);
    const long long last = std::min(prm.owned_end, n);
    const int n_slots = first < last ? static_cast<int>((last - first + slot_len - 1) / slot_len) : 0;
    if (n_slots > 0) {
        PAQ_CUDA_CHECK(cudaMemsetAsync(m.slots.data(), 0xff, static_cast<std::size_t>(n_slots) * sizeof(int), s));
        const unsigned nb = static_cast<unsigned>((n + block - 1) / block);
        block_max_kernel<<<nb, block, 0, s>>>(metric, n, m.bmax.data());
        PAQ_CUDA_CHECK_LAUNCH();
        const unsigned pb = static_cast<unsigned>((last - first + 255) / 256);
        peak_kernel<<<pb, 256, 0, s>>>(metric, m.bmax.data(), n, first, last, prm.threshold, prm.segment_start, m.slots.data());
        PAQ_CUDA_CHECK_LAUNCH();
    }
    finalize_kernel<<<1, finalize_threads, 0, s>>>(m.slots.data(), n_slots, metric, n, prm, static_cast<int>(m.max_packets),
                                                   m.starts.data(), m.metrics.data(), m.count.data(), m.truncated.data());
    PAQ_CUDA_CHECK_LAUNCH();
}

void preamble_detector::check_starts_device(const cf32* window, long long window_len, cuda_stream_t s, const cf32* window2)
{
    auto& m = *impl_;
    const int mp = static_cast<int>(m.max_packets);
    check_starts_kernel<<<static_cast<unsigned>(mp), 32 * check_warps, 0, s>>>(
        reinterpret_cast<const float2*>(window), reinterpret_cast<const float2*>(window2), window_len, m.count.data(), mp, m.x.data(), static_cast<int>(m.x.size()),
        m.known_first, m.starts.data(), m.moved.data());
    PAQ_CUDA_CHECK_LAUNCH();
}

dsp::packet_candidates preamble_detector::locate(std::span<const float> metric, const locate_params& prm)
{
    auto& m = *impl_;
    PAQ_CUDA_CHECK(cudaSetDevice(m.device));
    stream st;
    device_buffer<float> d_metric(metric.size());
    PAQ_CUDA_CHECK(cudaMemcpyAsync(d_metric.data(), metric.data(), metric.size_bytes(), cudaMemcpyHostToDevice, st.get()));
    locate_device(d_metric.data(), metric.size(), prm, st.get());
    int count = 0;
    unsigned long long truncated = 0;
    PAQ_CUDA_CHECK(cudaMemcpyAsync(&count, m.count.data(), sizeof count, cudaMemcpyDeviceToHost, st.get()));
    PAQ_CUDA_CHECK(cudaMemcpyAsync(&truncated, m.truncated.data(), sizeof truncated, cudaMemcpyDeviceToHost, st.get()));
    st.synchronize();
    if (count > static_cast<int>(m.max_packets)) throw std::runtime_error("preamble_detector: more packets than max_packets");
    dsp::packet_candidates c;
    c.starts.resize(static_cast<std::size_t>(count));
    std::vector<float> mf(static_cast<std::size_t>(count));
    PAQ_CUDA_CHECK(cudaMemcpy(c.starts.data(), m.starts.data(), c.starts.size() * sizeof(long long), cudaMemcpyDeviceToHost));
    PAQ_CUDA_CHECK(cudaMemcpy(mf.data(), m.metrics.data(), mf.size() * sizeof(float), cudaMemcpyDeviceToHost));
    c.metrics.assign(mf.begin(), mf.end());
    c.truncated = truncated;
    return c;
}

}  // namespace paq::gpu
