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
constexpr int meet = (memory + steps) / 2;     // where the forward and the backward pass meet
constexpr int chunk = 32;                      // steps whose branch terms are computed at once
static_assert(seqs == 16 && memory == 3 && half_span == 6,
              "a half-warp per pass: its 16 lanes are the state sequences; a sample's taps are u + 4 q");

__constant__ signed char c_known_pm[n_known];  ///< the known bits, +-1

/// Per half-warp (one pass of one axis): the sequence-independent terms of the branch metrics
/// (dsp/trellis_math.hpp: cc, z_q) of a chunk of steps.
struct pass_shared {
    double cc[chunk];
    double z[chunk][memory + 1];
};
/// Per axis (one warp): the pulse fit's normal equations, the fitted taps, the two passes'.
struct axis_shared {
    double g[taps * taps];
    double rhs[taps];
    double taps_[taps];
    pass_shared pass[2];
};
/// Per stream (one block of two warps): the two axes, the symbol-by-symbol data bits, sums.
struct stream_shared {
    axis_shared axis[2];
    unsigned char sxs[data_bytes];
    double sums[2][2];
};

__device__ inline double dmin(double a, double b) { return a < b ? a : b; }

__device__ inline double warp_sum(double v, unsigned mask)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(mask, v, o);
    return v;
}

/// One block per stream: warp p detects axis p (0: the even bits, on the real part; 1: the
/// odd, on the imaginary part). The max-log BCJR runs its two passes at once: the warp's first
/// half-warp forward from the start, the second backward from the end, each storing its state
/// metrics (`metrics`: per axis a row of 8 per symbol) until they meet in the middle; then each
/// goes on into the other's half and gives the LLRs there from its own metrics and the other's
/// stored ones. Each half-warp's 16 lanes are the 16 state sequences of a step.
__global__ void __launch_bounds__(64) trellis_kernel(float2* __restrict__ x, const float* __restrict__ theta, int streams,
                                                     unsigned char* __restrict__ bits, dsp::path_stats* __restrict__ stats,
                                                     double* __restrict__ metrics, float* __restrict__ llr_out)
{
    __shared__ stream_shared sh;
    const int s = static_cast<int>(blockIdx.x);
    if (s >= streams) return;
    const int tid = static_cast<int>(threadIdx.x), lane = tid % 32;
    const std::size_t S = static_cast<std::size_t>(streams);
    float2* xs = x + static_cast<std::size_t>(s) * n_samples;
    unsigned char* bs = bits + static_cast<std::size_t>(s) * data_bytes;
    float* llr = llr_out + static_cast<std::size_t>(s) * n_bits;
    for (int i = tid; i < data_bytes; i += 64) sh.sxs[i] = bs[i];
    __syncthreads();
    // a_k: the known bits, then the symbol-by-symbol detector's decisions.
    auto bit = [&](int k) -> double {
        if (k < n_known) return static_cast<double>(c_known_pm[k]);
        const int i = k - n_known;
        return ((sh.sxs[i >> 3] >> (7 - (i & 7))) & 1) != 0 ? 1.0 : -1.0;
    };

    // 1. The packet derotated by the detector's phase, in place (pair j = bits 2j, 2j + 1 =
    // samples 4j .. 4j + 3), and the signal's phase against the detector's: the bits'
    // correlation at their instants.
    double cr = 0.0, ci = 0.0;
    for (int j = tid; j < n_bits / 2; j += 64) {
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
    cr = warp_sum(cr, 0xffffffffu);
    ci = warp_sum(ci, 0xffffffffu);
    if (lane == 0) {
        sh.sums[tid / 32][0] = cr;
        sh.sums[tid / 32][1] = ci;
    }
    __syncthreads();
    cr = sh.sums[0][0] + sh.sums[1][0];
    ci = sh.sums[0][1] + sh.sums[1][1];
    const double mag = sqrt(cr * cr + ci * ci);
    const double rotx = mag > 0.0 ? cr / mag : 1.0, roty = mag > 0.0 ? -ci / mag : 0.0;
    // 2. Turned by the common phase (each thread the samples it wrote).
    for (int j = tid; j < n_bits / 2; j += 64) {
#pragma unroll
        for (int u = 0; u < 4; ++u) {
            const float2 z = xs[4 * j + u];
            const double rx = z.x, ry = z.y;
            xs[4 * j + u] = make_float2(static_cast<float>(rx * rotx - ry * roty), static_cast<float>(rx * roty + ry * rotx));
        }
    }
    __syncthreads();

    const int p = tid / 32;
    axis_shared& as = sh.axis[p];
    auto comp = [&](long m) -> double {
        const float2 z = xs[m];
        return p == 0 ? z.x : z.y;
    };

    // 3. The pulse by least squares: sample m sees the axis's bits through the taps of one
    // class t = c + 4 q (c = m + 2 + 2p mod 4), so the normal equations are built class by class.
    double* G = as.g;
    double* rhs = as.rhs;
    for (int i = lane; i < taps * taps; i += 32) G[i] = 0.0;
    if (lane < taps) rhs[lane] = 0.0;
    __syncwarp();
#pragma unroll
    for (int c = 0; c < 4; ++c) {
        const int nq = c == 0 ? 4 : 3;  // taps c + 4q <= 12
        double g[4][4] = {}, rr[4] = {};
        for (int m = ((c + 2 + 2 * p) & 3) + 4 * lane; m < n_samples; m += 128) {
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
            rr[q] = warp_sum(rr[q], 0xffffffffu);
#pragma unroll
            for (int v = 0; v < 4; ++v) g[q][v] = warp_sum(g[q][v], 0xffffffffu);
        }
        if (lane == 0) {
#pragma unroll
            for (int q = 0; q < nq; ++q) {
                rhs[c + 4 * q] = rr[q];
#pragma unroll
                for (int v = 0; v < nq; ++v) G[(c + 4 * q) * taps + c + 4 * v] = g[q][v];
            }
        }
    }
    __syncwarp();
    double* tp = as.taps_;
    if (lane == 0) {
        for (int t = 0; t < taps; ++t) {
            if (G[t * taps + t] == 0.0) G[t * taps + t] = 1.0;
        }
        const bool ok = dsp::trellis_math::solve_spd(G, rhs, taps);
        for (int t = 0; t < taps; ++t) tp[t] = ok ? rhs[t] : 0.0;
    }
    __syncwarp();
    // The residual variance per sample.
    double se = 0.0;
    for (int m = 2 * half_span + lane; m + 2 * half_span < n_samples; m += 32) {
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
    se = warp_sum(se, 0xffffffffu);
    const double sigma2 = se / static_cast<double>(n_samples - 4 * half_span);

    if (!(sigma2 > 0.0) || !(tp[half_span] > 0.0)) {
        // No usable model: this axis keeps the symbol-by-symbol bits.
        for (int k = p + 2 * lane; k < n_bits; k += 2 * 32) llr[k] = bit(k) > 0.0 ? 1.0f : -1.0f;
    } else {
        // 4. Max-log BCJR (dsp/trellis.cpp, detect_axis). Lane l of a half-warp is the state
        // sequence l: bit q = symbol i - q, from state l >> 1 to state l & 7. The branch
        // metrics in Ungerboeck's form (dsp/trellis_math.hpp): the half-warp computes a chunk
        // of steps' cc and z_q in parallel into shared memory; a step then costs a lane its
        // sign pattern's sum and the add-compare-select.
        const int h = lane >> 4, l = lane & 15;  // h 0: the forward pass, 1: the backward
        const unsigned half = h == 0 ? 0x0000ffffu : 0xffff0000u;
        pass_shared& ps = as.pass[h];
        const double scale = 0.5 / (2.0 * sigma2);
        const double inf = CUDART_INF;
        const double interior = dsp::trellis_math::pattern_energy(memory, p, l, tp);
        double* M = metrics + (static_cast<std::size_t>(s) * 2 + static_cast<std::size_t>(p)) * steps * states;  // row i: after symbol i
        auto fill = [&](int i0) {  // steps i0 .. i0 + chunk - 1
            __syncwarp(half);
            for (int j = l; j < chunk; j += 16) {
                const int i = i0 + j;
                if (i < steps) dsp::trellis_math::step_terms(comp, i, p, tp, ps.cc[j], ps.z[j]);
            }
            __syncwarp(half);
        };
        auto branch = [&](int i, int j) {  // step i, chunk entry j
            const double pattern = i < n_symbols ? interior : dsp::trellis_math::pattern_energy(i, p, l, tp);
            return scale * dsp::trellis_math::branch_metric(ps.cc[j], ps.z[j], pattern, l);
        };
        auto allowed = [&](int i) {
            const int k = 2 * i + p;
            return k >= n_known || ((bit(k) > 0.0 ? 1 : 0) == (l & 1));
        };
        // A forward step: lanes 0..7 hold the metrics of the states after symbol i - 1 in,
        // after symbol i out.
        auto forward = [&](double bm, bool ok, double a_prev) {
            const double am = __shfl_sync(half, a_prev, l >> 1, 16);
            const double cand = (am == inf || !ok) ? inf : am + bm;
            const double other = __shfl_sync(half, cand, (l + 8) & 15, 16);
            return dmin(cand, other);
        };
        // A backward step's metrics through each sequence, and the states' after symbol i - 1.
        auto through = [&](double bm, bool ok, double bn) { return ok ? bm + bn : inf; };
        auto backward = [&](double t) {
            const double t0 = __shfl_sync(half, t, (2 * l) & 15, 16);
            const double t1 = __shfl_sync(half, t, (2 * l + 1) & 15, 16);
            return dmin(t0, t1);
        };
        // The LLR of symbol i from the metric into each sequence's start state (am) and through it.
        auto decide = [&](int i, double am, double t, bool ok) {
            double v = (ok && am != inf) ? am + t : inf;
            v = dmin(v, __shfl_xor_sync(half, v, 2, 16));
            v = dmin(v, __shfl_xor_sync(half, v, 4, 16));
            v = dmin(v, __shfl_xor_sync(half, v, 8, 16));
            const double best1 = __shfl_sync(half, v, 1, 16);  // lane 0: the best -1 path; lane 1: the best +1
            const int k = 2 * i + p;
            if (l == 0 && k < n_bits) {
                const double d = v - best1;
                llr[k] = static_cast<float>(isfinite(d) ? d : (best1 < v ? 1e30 : -1e30));
            }
        };
        double mv;  // forward: alpha of state l (lanes 0..7); backward: beta of state l
        if (h == 0) {
            int start = 0;
            for (int i = 0; i < memory; ++i) start |= (bit(2 * i + p) > 0.0 ? 1 : 0) << (memory - 1 - i);
            mv = l == start ? 0.0 : inf;
            // Up to the meeting point, the metrics stored for the backward pass.
            for (int i0 = memory; i0 < meet; i0 += chunk) {
                fill(i0);
                const int i1 = min(i0 + chunk, meet);
#pragma unroll 4
                for (int i = i0; i < i1; ++i) {
                    if (l < states) M[(i - 1) * states + l] = mv;
                    mv = forward(branch(i, i - i0), allowed(i), mv);
                }
            }
        } else {
            mv = 0.0;
            for (int hi = steps - 1; hi >= meet; hi -= chunk) {
                const int lo = max(meet, hi - chunk + 1);
                fill(lo);
#pragma unroll 4
                for (int i = hi; i >= lo; --i) {
                    if (l < states) M[i * states + l] = mv;
                    const double bn = __shfl_sync(half, mv, l & 7, 16);
                    mv = backward(through(branch(i, i - lo), allowed(i), bn));
                }
            }
        }
        __syncwarp();  // the stored metrics are visible to the other half
        if (h == 0) {
            // On through the backward pass's half: alpha live, beta stored.
            for (int i0 = meet; i0 < steps; i0 += chunk) {
                fill(i0);
                const int i1 = min(i0 + chunk, steps);
#pragma unroll 4
                for (int i = i0; i < i1; ++i) {
                    const double bm = branch(i, i - i0);
                    const bool ok = allowed(i);
                    const double am = __shfl_sync(half, mv, l >> 1, 16);
                    decide(i, am, through(bm, ok, M[i * states + (l & 7)]), ok);
                    mv = forward(bm, ok, mv);
                }
            }
        } else {
            // Back through the forward pass's half: beta live, alpha stored.
            for (int hi = meet - 1; hi >= memory; hi -= chunk) {
                const int lo = max(memory, hi - chunk + 1);
                fill(lo);
#pragma unroll 4
                for (int i = hi; i >= lo; --i) {
                    const bool ok = allowed(i);
                    const double bn = __shfl_sync(half, mv, l & 7, 16);
                    const double t = through(branch(i, i - lo), ok, bn);
                    decide(i, M[(i - 1) * states + (l >> 1)], t, ok);
                    mv = backward(t);
                }
            }
        }
        if (lane < memory) {
            const int k = 2 * lane + p;
            llr[k] = bit(k) > 0.0 ? 1e30f : -1e30f;
        }
    }
    __syncthreads();

    // 5. Hard bits and the BEP estimate from the LLRs of the data bits.
    double bep = 0.0;
    for (int byte = tid; byte < data_bytes; byte += 64) {
        unsigned v = 0;
#pragma unroll
        for (int b = 0; b < 8; ++b) {
            const float lv = llr[n_known + 8 * byte + b];
            if (lv > 0.0f) v |= 0x80u >> b;
            bep += 1.0 / (1.0 + exp(fmin(fabs(static_cast<double>(lv)), 700.0)));
        }
        bs[byte] = static_cast<unsigned char>(v);
    }
    bep = warp_sum(bep, 0xffffffffu);
    if (lane == 0) sh.sums[tid / 32][0] = bep;
    __syncthreads();
    if (tid == 0) stats[s].bep_estimate = static_cast<float>((sh.sums[0][0] + sh.sums[1][0]) / static_cast<double>(waveform::data_bits));
}

}  // namespace

stream_trellis::stream_trellis(std::size_t max_streams)
    : max_streams_(max_streams),
      x_(max_streams * n_samples),
      alpha_(max_streams * 2 * steps * states),
      llr_(max_streams * n_bits)
{
    const auto known = waveform::known_packet_bits();
    signed char pm[n_known];
    for (int k = 0; k < n_known; ++k) pm[k] = known[static_cast<std::size_t>(k)] != 0 ? 1 : -1;
    PAQ_CUDA_CHECK(cudaMemcpyToSymbol(c_known_pm, pm, sizeof pm));
}

void stream_trellis::detect_device(std::size_t streams, const float* theta, std::uint8_t* bits, dsp::path_stats* stats, cudaStream_t s)
{
    if (streams > max_streams_) {
        throw std::invalid_argument("stream_trellis: " + std::to_string(streams) + " streams, made for " + std::to_string(max_streams_));
    }
    if (streams == 0) return;
    if (theta == nullptr) throw std::invalid_argument("stream_trellis: no phase from the detector (stream_detector keep_phase)");
    trellis_kernel<<<static_cast<unsigned>(streams), 64, 0, s>>>(
        x_.data(), theta, static_cast<int>(streams), bits, stats, alpha_.data(), llr_.data());
    PAQ_CUDA_CHECK_LAUNCH();
}

}  // namespace paq::gpu
