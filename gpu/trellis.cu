// Trellis detection on the GPU (gpu/trellis.cuh): dsp/trellis.cpp's detector, one warp per
// stream. The arithmetic follows the CPU's step for step (the same loops in the same order, the
// same Cholesky solve: dsp/trellis_math.hpp); what differs is the input (float here, double
// there) and the order of a few sums (over lanes instead of in sequence), so bits may differ
// where two paths' metrics are within rounding of each other.
#include "gpu/trellis.cuh"

#include "dsp/trellis.hpp"
#include "dsp/trellis_math.hpp"
#include "dsp/waveform.hpp"

#include <math_constants.h>

#include <stdexcept>
#include <string>

namespace paq::gpu {

namespace {

using dsp::trellis::half_span;
using dsp::trellis::memory;
using dsp::trellis::states;
using dsp::trellis::taps;

constexpr int n_bits = static_cast<int>(waveform::packet_bits);
constexpr int n_known = static_cast<int>(waveform::known_bits);
constexpr int n_symbols = n_bits / 2;  // per axis
constexpr int n_samples = 2 * n_bits;
constexpr int data_bytes = static_cast<int>(dsp::packed_data_bytes);
constexpr int seqs = 2 * states;               // the lanes of a half-warp
constexpr int tail = (half_span + 3) / 4;      // symbols past the packet the last samples see
constexpr int steps = n_symbols + tail;        // trellis steps memory .. steps - 1
constexpr int rows = steps - memory + 1;       // forward metrics: row r = after symbol r + memory - 1
constexpr int block_rows = 32;                 // forward metrics kept every block_rows rows
constexpr int checkpoints = (rows + block_rows - 1) / block_rows;
constexpr int warps = 4;                       // streams per block
static_assert(seqs == 16 && memory == 3 && half_span == 6,
              "one half-warp per axis: its 16 lanes are the state sequences; a sample's taps are u + 4 q");

__constant__ signed char c_known_pm[n_known];  ///< the known bits, +-1

/// Per half-warp (one axis): the pulse fit's normal equations, then (the same memory) the
/// forward metrics of one block of rows; the fitted taps; the sequence-independent terms of
/// the branch metrics (dsp/trellis_math.hpp: cc, z_q) of a chunk of steps. Per warp: the two
/// halves and the symbol-by-symbol data bits.
struct half_shared {
    union {
        struct {
            double g[taps * taps];
            double rhs[taps];
        } fit;
        double alpha[block_rows][states];
    } u;
    double taps_[taps];
    double cc[block_rows];
    double z[block_rows][memory + 1];
};
struct warp_shared {
    half_shared axis[2];
    unsigned char sxs[data_bytes];
};

__device__ inline double dmin(double a, double b) { return a < b ? a : b; }

__global__ void __launch_bounds__(32 * warps, 7) trellis_kernel(float2* __restrict__ x, const float* __restrict__ theta, int streams,
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
    for (int i = lane; i < data_bytes; i += 32) sh.sxs[i] = sxs[i];
    __syncwarp();
    // a_k: the known bits, then the symbol-by-symbol detector's decisions.
    auto bit = [&](int k) -> double {
        if (k < n_known) return static_cast<double>(c_known_pm[k]);
        const int i = k - n_known;
        return ((sh.sxs[i >> 3] >> (7 - (i & 7))) & 1) != 0 ? 1.0 : -1.0;
    };

    // 1. The packet derotated by the detector's phase, in place (pair j = bits 2j, 2j + 1 =
    // samples 4j .. 4j + 3; the phases are read once, they lie a stream apart), and the
    // signal's phase against the detector's: the bits' correlation at their instants.
    double cr = 0.0, ci = 0.0;
    for (int j = lane; j < n_bits / 2; j += 32) {
        double sn, cs;
        sincos(-static_cast<double>(theta[static_cast<std::size_t>(j) * S + s]), &sn, &cs);
        double rx[4], ry[4];
#pragma unroll
        for (int u = 0; u < 4; ++u) {
            const float2 z = xs[4 * j + u];
            rx[u] = z.x * cs - z.y * sn;
            ry[u] = z.x * sn + z.y * cs;
            xs[4 * j + u] = make_float2(static_cast<float>(rx[u]), static_cast<float>(ry[u]));
        }
        const double a0 = bit(2 * j), a1 = bit(2 * j + 1);
        // r conj(b): b = a (even bits, sample 4j), j a (odd bits, sample 4j + 2).
        cr += rx[0] * a0 + ry[2] * a1;
        ci += ry[0] * a0 - rx[2] * a1;
    }
    for (int o = 16; o > 0; o >>= 1) {
        cr += __shfl_xor_sync(0xffffffffu, cr, o);
        ci += __shfl_xor_sync(0xffffffffu, ci, o);
    }
    const double mag = sqrt(cr * cr + ci * ci);
    const double rotx = mag > 0.0 ? cr / mag : 1.0, roty = mag > 0.0 ? -ci / mag : 0.0;
    // 2. Turned by the common phase (each lane the samples it wrote).
    for (int j = lane; j < n_bits / 2; j += 32) {
#pragma unroll
        for (int u = 0; u < 4; ++u) {
            const float2 z = xs[4 * j + u];
            const double rx = z.x, ry = z.y;
            xs[4 * j + u] = make_float2(static_cast<float>(rx * rotx - ry * roty), static_cast<float>(rx * roty + ry * rotx));
        }
    }
    __syncwarp();

    // From here each half-warp detects one axis: p = 0 the even bits (real), 1 the odd (imaginary).
    const int p = lane >> 4, l = lane & 15;
    const unsigned half = p == 0 ? 0x0000ffffu : 0xffff0000u;
    auto sum16 = [&](double v) {
        for (int o = 8; o > 0; o >>= 1) v += __shfl_xor_sync(half, v, o, 16);
        return v;
    };
    auto comp = [&](long m) -> double {
        const float2 z = xs[m];
        return p == 0 ? z.x : z.y;
    };

    // 3. The pulse by least squares: sample m sees the axis's bits through the taps of one
    // class t = c + 4 q (c = m + 2 + 2p mod 4), so the normal equations are built class by class.
    double* G = sh.axis[p].u.fit.g;
    double* rhs = sh.axis[p].u.fit.rhs;
    for (int i = l; i < taps * taps; i += 16) G[i] = 0.0;
    if (l < taps) rhs[l] = 0.0;
    __syncwarp(half);
#pragma unroll
    for (int c = 0; c < 4; ++c) {
        const int nq = c == 0 ? 4 : 3;  // taps c + 4q <= 12
        double g[4][4] = {}, rr[4] = {};
        for (int m = ((c + 2 + 2 * p) & 3) + 4 * l; m < n_samples; m += 64) {
            double a[4] = {};
            bool inside = true;
#pragma unroll
            for (int q = 0; q < 4; ++q) {
                if (q >= nq) continue;
                const int k = (m - c - 4 * q + half_span) / 2;
                if (k < 0 || k >= n_bits) {
                    inside = false;
                } else {
                    a[q] = bit(k);
                }
            }
            if (!inside) continue;
            const double y = comp(m);
#pragma unroll
            for (int q = 0; q < 4; ++q) {
                rr[q] += a[q] * y;
#pragma unroll
                for (int v = 0; v < 4; ++v) g[q][v] += a[q] * a[v];
            }
        }
#pragma unroll
        for (int q = 0; q < 4; ++q) {
            rr[q] = sum16(rr[q]);
#pragma unroll
            for (int v = 0; v < 4; ++v) g[q][v] = sum16(g[q][v]);
        }
        if (l == 0) {
#pragma unroll
            for (int q = 0; q < nq; ++q) {
                rhs[c + 4 * q] = rr[q];
#pragma unroll
                for (int v = 0; v < nq; ++v) G[(c + 4 * q) * taps + c + 4 * v] = g[q][v];
            }
        }
    }
    __syncwarp(half);
    double* tp = sh.axis[p].taps_;
    if (l == 0) {
        for (int t = 0; t < taps; ++t) {
            if (G[t * taps + t] == 0.0) G[t * taps + t] = 1.0;
        }
        const bool ok = dsp::trellis_math::solve_spd(G, rhs, taps);
        for (int t = 0; t < taps; ++t) tp[t] = ok ? rhs[t] : 0.0;
    }
    __syncwarp(half);
    // The residual variance per sample.
    double se = 0.0;
    for (int m = 2 * half_span + l; m + 2 * half_span < n_samples; m += 16) {
        // The taps of the sample's class in ascending order (the CPU's loop over every tap
        // adds the same terms in the same order).
        const int c = (m + 2 + 2 * p) & 3;
        double pred = 0.0;
#pragma unroll
        for (int q = 0; q < 4; ++q) {
            const int t = c + 4 * q;
            if (t >= taps) break;
            pred += bit((m - t + half_span) / 2) * tp[t];
        }
        const double e = comp(m) - pred;
        se += e * e;
    }
    se = sum16(se);
    const double sigma2 = se / static_cast<double>(n_samples - 4 * half_span);
    if (!(sigma2 > 0.0) || !(tp[half_span] > 0.0)) {
        // No usable model: this axis keeps the symbol-by-symbol bits.
        for (int k = p + 2 * l; k < n_bits; k += 2 * 16) llr[k] = bit(k) > 0.0 ? 1.0f : -1.0f;
    } else {
        // 4. Max-log BCJR (dsp/trellis.cpp, detect_axis). Lane l is the state sequence l:
        // bit q = symbol i - q, state s = l >> 1 before, l & 7 after. The branch metrics in
        // Ungerboeck's form (dsp/trellis_math.hpp): the half-warp computes a chunk of steps'
        // cc and z_q in parallel into shared memory; each step then costs a lane its sign
        // pattern's sum and the add-compare-select.
        const double scale = 0.5 / (2.0 * sigma2);
        const double inf = CUDART_INF;
        const double interior = dsp::trellis_math::pattern_energy(memory, p, l, tp);
        half_shared& hs = sh.axis[p];
        auto fill = [&](int i0) {  // steps i0 .. i0 + block_rows - 1
            __syncwarp(half);
            for (int j = l; j < block_rows; j += 16) {
                const int i = i0 + j;
                if (i < steps) dsp::trellis_math::step_terms(comp, i, p, tp, hs.cc[j], hs.z[j]);
            }
            __syncwarp(half);
        };
        auto branch = [&](int i, int j) {  // step i, chunk entry j
            const double pattern = i < n_symbols ? interior : dsp::trellis_math::pattern_energy(i, p, l, tp);
            return scale * dsp::trellis_math::branch_metric(hs.cc[j], hs.z[j], pattern, l);
        };
        auto forced = [&](int i) -> int {
            const int k = 2 * i + p;
            return k < n_known ? (bit(k) > 0.0 ? 1 : 0) : -1;
        };
        int start = 0;
        for (int i = 0; i < memory; ++i) start |= (bit(2 * i + p) > 0.0 ? 1 : 0) << (memory - 1 - i);
        // One forward step: lanes 0..7 hold the metrics of the states after symbol i - 1 in,
        // after symbol i out.
        auto forward = [&](int i, int j, double a_prev) {
            const double bm = branch(i, j);
            const int f = forced(i);
            const double am = __shfl_sync(half, a_prev, l >> 1, 16);
            const double cand = (am == inf || (f >= 0 && (l & 1) != f)) ? inf : am + bm;
            const double other = __shfl_sync(half, cand, (l + 8) & 15, 16);
            return dmin(cand, other);
        };
        double* ck = checkpoint + (static_cast<std::size_t>(s) * 2 + static_cast<std::size_t>(p)) * checkpoints * states;
        double a = l == start ? 0.0 : inf;
        if (l < states) ck[l] = a;
        for (int i0 = memory; i0 < steps; i0 += block_rows) {
            fill(i0);
            const int i1 = min(i0 + block_rows, steps);
#pragma unroll 4
            for (int i = i0; i < i1; ++i) {
                a = forward(i, i - i0, a);
                const int r = i - memory + 1;
                if (r % block_rows == 0 && l < states) ck[(r / block_rows) * states + l] = a;
            }
        }
        // Backward, a block of rows at a time: the block's forward metrics again from its
        // checkpoint (the same steps, so the same values), then the backward steps that read
        // them. Step i reads row i - memory; the block's steps are i0 = r0 + memory onwards.
        double (*A)[states] = hs.u.alpha;
        double b_next = 0.0;  // lanes 0..7: the metrics of the states after symbol i
        for (int blk = (rows - 2) / block_rows; blk >= 0; --blk) {
            const int r0 = blk * block_rows;
            const int r1 = min(r0 + block_rows - 1, rows - 2);  // the last row this block's steps read
            const int i0 = r0 + memory;
            fill(i0);
            double a_blk = l < states ? ck[blk * states + l] : 0.0;
            if (l < states) A[0][l] = a_blk;
#pragma unroll 4
            for (int r = r0 + 1; r <= r1; ++r) {
                const int i = r + memory - 1;
                a_blk = forward(i, i - i0, a_blk);
                if (l < states) A[r - r0][l] = a_blk;
            }
            __syncwarp(half);
#pragma unroll 4
            for (int i = r1 + memory; i >= i0; --i) {
                const double bm = branch(i, i - i0);
                const int f = forced(i);
                const bool allowed = !(f >= 0 && (l & 1) != f);
                const double bn = __shfl_sync(half, b_next, l & 7, 16);
                const double through = allowed ? bm + bn : inf;
                const double t0 = __shfl_sync(half, through, (2 * l) & 15, 16);
                const double t1 = __shfl_sync(half, through, (2 * l + 1) & 15, 16);
                const double am = A[i - memory - r0][l >> 1];
                double v = (allowed && am != inf) ? am + through : inf;
                v = dmin(v, __shfl_xor_sync(half, v, 2, 16));
                v = dmin(v, __shfl_xor_sync(half, v, 4, 16));
                v = dmin(v, __shfl_xor_sync(half, v, 8, 16));
                const double best1 = __shfl_sync(half, v, 1, 16);  // lane 0: the best -1 path; lane 1: the best +1
                const int k = 2 * i + p;
                if (l == 0 && k < n_bits) {
                    const double d = v - best1;
                    llr[k] = static_cast<float>(isfinite(d) ? d : (best1 < v ? 1e30 : -1e30));
                }
                b_next = dmin(t0, t1);
            }
        }
        if (l < memory) {
            const int k = 2 * l + p;
            llr[k] = bit(k) > 0.0 ? 1e30f : -1e30f;
        }
    }
    __syncwarp();

    // 5. Hard bits and the BEP estimate from the LLRs of the data bits.
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
    for (int o = 16; o > 0; o >>= 1) bep += __shfl_xor_sync(0xffffffffu, bep, o);
    if (lane == 0) {
        stats[s].known_bit_errors = sxs_stats[s].known_bit_errors;
        stats[s].bep_estimate = static_cast<float>(bep / static_cast<double>(waveform::data_bits));
    }
}

}  // namespace

stream_trellis::stream_trellis(std::size_t max_streams)
    : max_streams_(max_streams),
      x_(max_streams * n_samples),
      alpha_(max_streams * 2 * checkpoints * states),
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
