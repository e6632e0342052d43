// Trellis detection on the GPU (gpu/trellis.cuh): dsp/trellis.cpp's detector, one warp per
// stream. The arithmetic follows the CPU's step for step (the same loops in the same order, the
// table's sums in the order of k, the same index and metric code: dsp/trellis_math.hpp); what
// differs is the input (float here, double there) and the order of the residual's sum (over
// lanes instead of in sequence), so bits may differ where two paths' metrics are within
// rounding of each other.
#include "gpu/trellis.cuh"

#include "dsp/trellis.hpp"
#include "dsp/trellis_math.hpp"
#include "dsp/waveform.hpp"

#include <math_constants.h>

#include <stdexcept>
#include <string>

namespace paq::gpu {

namespace {

using dsp::trellis::after;
using dsp::trellis::before;
using dsp::trellis::memory;
using dsp::trellis::patterns;
using dsp::trellis::states;

constexpr int n_bits = static_cast<int>(waveform::packet_bits);
constexpr int n_known = static_cast<int>(waveform::known_bits);
constexpr int n_samples = 2 * n_bits;
constexpr int data_bytes = static_cast<int>(dsp::packed_data_bytes);
constexpr int seqs = 2 * states;               // the lanes of a warp
constexpr int steps = n_bits + after;          // trellis steps memory .. steps - 1 (bit j, the pair of bit j - after)
constexpr int rows = steps - memory + 1;       // forward metrics: row r = after bit r + memory - 1
constexpr int block_rows = 32;                 // forward metrics kept every block_rows rows
constexpr int checkpoints = (rows + block_rows - 1) / block_rows;
constexpr int warps = 4;                       // streams per block
static_assert(seqs == 32 && patterns == 16, "one warp per stream: its 32 lanes are the state sequences of a step");

__constant__ signed char c_known_pm[n_known];  ///< the known bits, +-1

/// Per warp (one stream): each bit's window as a state sequence (dsp/trellis_math.hpp), the
/// symbol-by-symbol data bits, the table; then (the windows' memory) the forward metrics of
/// one block of rows.
struct warp_shared {
    union {
        unsigned char window[n_bits];
        double alpha[block_rows][states];
    } u;
    double table[2][2][patterns][2];  // [k % 2][d][entry][re, im]
    float2 pair[block_rows][2];       // the sample pairs of a chunk of steps
    unsigned char sxs[data_bytes];
};

__device__ inline double dmin(double a, double b) { return a < b ? a : b; }

__global__ void __launch_bounds__(32 * warps) trellis_kernel(float2* __restrict__ x, const float* __restrict__ theta, int streams,
                                                          const unsigned char* __restrict__ sxs_bits,
                                                          const dsp::path_stats* __restrict__ sxs_stats,
                                                          unsigned char* __restrict__ bits, dsp::path_stats* __restrict__ stats,
                                                          double* __restrict__ checkpoint, float* __restrict__ llr_out)
{
    __shared__ warp_shared shm[warps];
    const int w = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
    const int s = static_cast<int>(blockIdx.x) * warps + w;
    if (s >= streams) return;  // the whole warp
    warp_shared& sh = shm[w];
    const std::size_t S = static_cast<std::size_t>(streams);
    float2* xs = x + static_cast<std::size_t>(s) * n_samples;
    unsigned char* bs = bits + static_cast<std::size_t>(s) * data_bytes;
    float* llr = llr_out + static_cast<std::size_t>(s) * n_bits;
    const unsigned char* sxs = sxs_bits + static_cast<std::size_t>(s) * data_bytes;
    constexpr unsigned all = 0xffffffffu;
    for (int i = lane; i < data_bytes; i += 32) sh.sxs[i] = sxs[i];
    __syncwarp();
    // a_k: the known bits, then the symbol-by-symbol detector's decisions (1 = +1).
    auto bit = [&](int k) -> int {
        if (k < n_known) return c_known_pm[k] > 0 ? 1 : 0;
        const int i = k - n_known;
        return (sh.sxs[i >> 3] >> (7 - (i & 7))) & 1;
    };

    // 1. The packet derotated by the detector's phase, in place (pair j = bits 2j, 2j + 1 =
    // samples 4j .. 4j + 3; the phases lie a stream apart, read once); each bit's window.
    for (int j = lane; j < n_bits / 2; j += 32) {
        double sn, cs;
        sincos(-static_cast<double>(theta[static_cast<std::size_t>(j) * S + s]), &sn, &cs);
#pragma unroll
        for (int u = 0; u < 4; ++u) {
            const float2 z = xs[4 * j + u];
            xs[4 * j + u] = make_float2(static_cast<float>(z.x * cs - z.y * sn), static_cast<float>(z.x * sn + z.y * cs));
        }
    }
    for (int k = before + lane; k + after < n_bits; k += 32) {
        int seq = 0;
        for (int i = k - before; i <= k + after; ++i) seq = (seq << 1) | bit(i);
        sh.u.window[k] = static_cast<unsigned char>(seq);
    }
    __syncwarp();

    // 2. The table (dsp/trellis.cpp, fit): lane l computes entry l & 15 of parity l >> 4,
    // adding its samples in the order of k as the CPU does.
    bool complete = false;
    {
        const int par = lane >> 4, idx = lane & 15;
        double sum[2][2] = {};
        long count = 0;
        for (int k = before + ((before & 1) != par ? 1 : 0); k + after < n_bits; k += 2) {
            const int seq = sh.u.window[k];
            if (dsp::trellis_math::pattern_index(seq) != idx) continue;
            const double sg = dsp::trellis_math::pattern_sign(seq);
#pragma unroll
            for (int d = 0; d < 2; ++d) {
                const float2 z = xs[2 * k + d];
                sum[d][0] += sg * static_cast<double>(z.x);
                sum[d][1] += sg * static_cast<double>(z.y);
            }
            ++count;
        }
        complete = __all_sync(all, count > 0);
        const double n = count > 0 ? static_cast<double>(count) : 1.0;
#pragma unroll
        for (int d = 0; d < 2; ++d) {
            sh.table[par][d][idx][0] = sum[d][0] / n;
            sh.table[par][d][idx][1] = sum[d][1] / n;
        }
    }
    __syncwarp();
    // The residual variance per real component, over the bits the table is fitted on.
    double se = 0.0;
    for (int k = before + lane; k + after < n_bits; k += 32) {
        const int seq = sh.u.window[k];
        const int idx = dsp::trellis_math::pattern_index(seq), par = k & 1;
        const double sg = dsp::trellis_math::pattern_sign(seq);
#pragma unroll
        for (int d = 0; d < 2; ++d) {
            const float2 z = xs[2 * k + d];
            const double ex = static_cast<double>(z.x) - sg * sh.table[par][d][idx][0];
            const double ey = static_cast<double>(z.y) - sg * sh.table[par][d][idx][1];
            se += ex * ex + ey * ey;
        }
    }
    for (int o = 16; o > 0; o >>= 1) se += __shfl_xor_sync(all, se, o);
    __syncwarp();  // the windows' memory becomes the forward metrics'
    const double sigma2 = se / (2.0 * 2.0 * static_cast<double>(n_bits - before - after));
    if (!complete || !(sigma2 > 0.0)) {
        // No usable model (a degenerate packet): the symbol-by-symbol bits stand.
        for (int k = lane; k < n_bits; k += 32) llr[k] = bit(k) != 0 ? 1.0f : -1.0f;
    } else {
        // 3. Max-log BCJR (dsp/trellis.cpp, detect). Lane l is the state sequence l: state
        // s = l >> 1 before the step, l & 15 after, the new bit l & 1. Each lane holds its
        // sequence's table entry of both parities; a step costs it the entry's correlation with
        // the step's two samples and the add-compare-select.
        const double scale = 0.5 / (2.0 * sigma2);
        const double inf = CUDART_INF;
        const int idx = dsp::trellis_math::pattern_index(lane);
        double tb[2][2][2], energy[2];
#pragma unroll
        for (int par = 0; par < 2; ++par) {
            energy[par] = 0.0;
#pragma unroll
            for (int d = 0; d < 2; ++d) {
                tb[par][d][0] = sh.table[par][d][idx][0];
                tb[par][d][1] = sh.table[par][d][idx][1];
                energy[par] += tb[par][d][0] * tb[par][d][0] + tb[par][d][1] * tb[par][d][1];
            }
        }
        auto fill = [&](int j0) {  // the sample pairs of steps j0 .. j0 + block_rows - 1
            __syncwarp();
            const int j = j0 + lane;
            if (j < steps) {
                const int k = j - after;
                sh.pair[lane][0] = xs[2 * k];
                sh.pair[lane][1] = xs[2 * k + 1];
            }
            __syncwarp();
        };
        auto branch = [&](int j, int c) {  // step j, chunk entry c
            const int par = (j - after) & 1;
            const float2 z0 = sh.pair[c][0], z1 = sh.pair[c][1];
            const double corr = (static_cast<double>(z0.x) * tb[par][0][0] + static_cast<double>(z0.y) * tb[par][0][1]) +
                                (static_cast<double>(z1.x) * tb[par][1][0] + static_cast<double>(z1.y) * tb[par][1][1]);
            return scale * dsp::trellis_math::branch_metric(corr, energy[par], lane);
        };
        auto forced = [&](int j) -> int { return j < n_known ? bit(j) : -1; };
        int start = 0;
        for (int j = 0; j < memory; ++j) start = (start << 1) | bit(j);
        // One forward step: lanes l and l + 16 both hold the metric of state l & 15.
        auto forward = [&](int j, int c, double a_prev) {
            const double bm = branch(j, c);
            const int f = forced(j);
            const double am = __shfl_sync(all, a_prev, lane >> 1);
            const double cand = (am == inf || (f >= 0 && (lane & 1) != f)) ? inf : am + bm;
            return dmin(cand, __shfl_xor_sync(all, cand, 16));
        };
        double* ck = checkpoint + static_cast<std::size_t>(s) * checkpoints * states;
        double a = (lane & 15) == start ? 0.0 : inf;
        if (lane < states) ck[lane] = a;
        for (int j0 = memory; j0 < steps; j0 += block_rows) {
            fill(j0);
            const int j1 = min(j0 + block_rows, steps);
#pragma unroll 4
            for (int j = j0; j < j1; ++j) {
                a = forward(j, j - j0, a);
                const int r = j - memory + 1;
                if (r % block_rows == 0 && lane < states) ck[(r / block_rows) * states + lane] = a;
            }
        }
        // Backward, a block of rows at a time: the block's forward metrics again from its
        // checkpoint (the same steps, so the same values), then the backward steps that read
        // them. Step j reads row j - memory; the block's steps are j0 = r0 + memory onwards.
        double b_next = 0.0;  // lanes l, l + 16: the metric of state l & 15 after bit j
        for (int blk = (rows - 2) / block_rows; blk >= 0; --blk) {
            const int r0 = blk * block_rows;
            const int r1 = min(r0 + block_rows - 1, rows - 2);  // the last row this block's steps read
            const int j0 = r0 + memory;
            fill(j0);
            double a_blk = ck[blk * states + (lane & 15)];
            if (lane < states) sh.u.alpha[0][lane] = a_blk;
#pragma unroll 4
            for (int r = r0 + 1; r <= r1; ++r) {
                const int j = r + memory - 1;
                a_blk = forward(j, j - j0, a_blk);
                if (lane < states) sh.u.alpha[r - r0][lane] = a_blk;
            }
            __syncwarp();
#pragma unroll 4
            for (int j = r1 + memory; j >= j0; --j) {
                const double bm = branch(j, j - j0);
                const int f = forced(j);
                const bool allowed = !(f >= 0 && (lane & 1) != f);
                const double bn = __shfl_sync(all, b_next, lane & 15);
                const double through = allowed ? bm + bn : inf;
                const double t0 = __shfl_sync(all, through, (2 * lane) & 31);
                const double t1 = __shfl_sync(all, through, (2 * lane + 1) & 31);
                const double am = sh.u.alpha[j - memory - r0][lane >> 1];
                double v = (allowed && am != inf) ? am + through : inf;
                v = dmin(v, __shfl_xor_sync(all, v, 2));
                v = dmin(v, __shfl_xor_sync(all, v, 4));
                v = dmin(v, __shfl_xor_sync(all, v, 8));
                v = dmin(v, __shfl_xor_sync(all, v, 16));
                const double best1 = __shfl_sync(all, v, 1);  // lane 0: the best -1 path; lane 1: the best +1
                if (lane == 0 && j < n_bits) {
                    const double d = v - best1;
                    llr[j] = static_cast<float>(isfinite(d) ? d : (best1 < v ? 1e30 : -1e30));
                }
                b_next = dmin(t0, t1);
            }
            __syncwarp();
        }
        if (lane < memory) llr[lane] = bit(lane) != 0 ? 1e30f : -1e30f;
    }
    __syncwarp();

    // 4. Hard bits and the BEP estimate from the LLRs of the data bits.
    double bep = 0.0;
    for (int byte = lane; byte < data_bytes; byte += 32) {
        unsigned v = 0;
#pragma unroll
        for (int b = 0; b < 8; ++b) {
            const float lv = llr[n_known + 8 * byte + b];
            if (lv > 0.0f) v |= 0x80u >> b;
            bep += 1.0 / (1.0 + exp(fmin(fabs(static_cast<double>(lv)), 700.0)));
        }
        bs[byte] = static_cast<unsigned char>(v);
    }
    for (int o = 16; o > 0; o >>= 1) bep += __shfl_xor_sync(all, bep, o);
    if (lane == 0) {
        stats[s].known_bit_errors = sxs_stats[s].known_bit_errors;
        stats[s].bep_estimate = static_cast<float>(bep / static_cast<double>(waveform::data_bits));
    }
}

}  // namespace

stream_trellis::stream_trellis(std::size_t max_streams)
    : max_streams_(max_streams),
      x_(max_streams * n_samples),
      alpha_(max_streams * checkpoints * states),
      llr_(max_streams * n_bits),
      bits_(max_streams * data_bytes),
      stats_(max_streams)
{
    const auto known = waveform::known_packet_bits();
    signed char pm[n_known];
    for (int k = 0; k < n_known; ++k) pm[k] = known[static_cast<std::size_t>(k)] != 0 ? 1 : -1;
    PAQ_CUDA_CHECK(cudaMemcpyToSymbol(c_known_pm, pm, sizeof pm));
}

void stream_trellis::detect_device(std::size_t streams, const float* theta, const std::uint8_t* sxs_bits,
                                   const dsp::path_stats* sxs_stats, cudaStream_t s)
{
    if (streams > max_streams_) {
        throw std::invalid_argument("stream_trellis: " + std::to_string(streams) + " streams, made for " + std::to_string(max_streams_));
    }
    if (streams == 0) return;
    if (theta == nullptr) throw std::invalid_argument("stream_trellis: no phase from the detector (stream_detector keep_phase)");
    trellis_kernel<<<static_cast<unsigned>((streams + warps - 1) / warps), 32 * warps, 0, s>>>(
        x_.data(), theta, static_cast<int>(streams), sxs_bits, sxs_stats, bits_.data(), stats_.data(), alpha_.data(), llr_.data());
    PAQ_CUDA_CHECK_LAUNCH();
}

}  // namespace paq::gpu
