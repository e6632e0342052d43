// Trellis detection on the GPU (gpu/trellis.cuh): dsp/trellis.cpp's detector, sixteen lanes
// (one per trellis state) per stream, two streams per warp. The table is fitted as the CPU fits
// it (double sums in the order of k, the same index code: dsp/trellis_math.hpp); the BCJR's
// metrics are float, where the CPU's are double, and the forward metrics are shifted by their
// minimum every block of steps (a shift common to every state changes no decision and no LLR),
// so bits may differ from the CPU's where two paths' metrics are within float rounding of each
// other.
#include "gpu/trellis.cuh"

#include "dsp/trellis.hpp"
#include "dsp/trellis_math.hpp"
#include "dsp/waveform.hpp"

#include <cuda_pipeline.h>
#include <math_constants.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace paq::gpu {

namespace {

using dsp::trellis::after;
using dsp::trellis::before;
using dsp::trellis::memory;
using dsp::trellis::patterns;
using dsp::trellis::states;
using dsp::trellis::window;
using metric = float;

constexpr int n_bits = static_cast<int>(waveform::packet_bits);
constexpr int n_known = static_cast<int>(waveform::known_bits);
constexpr int n_samples = 2 * n_bits;
constexpr int data_bytes = static_cast<int>(dsp::packed_data_bytes);
constexpr int group = 8;                       // the lanes of one stream: lane g holds states s and s + 8
constexpr int streams_per_warp = 32 / group;
constexpr int steps = n_bits + after;          // trellis steps memory .. steps - 1 (bit j, the pair of bit j - after)
constexpr int rows = steps - memory + 1;       // forward metrics: row r = after step r + memory - 1
constexpr int block_rows = 24;                 // forward metrics kept every block_rows rows
constexpr int checkpoints = (rows + block_rows - 1) / block_rows;
constexpr int chunk = 32;                      // windows of the table's fit staged at a time
constexpr int pair_slots = chunk > block_rows ? chunk : block_rows;
constexpr int words = (n_bits + 31) / 32 + 2;  // the packet's bits, 32 a word, MSB first; two words of padding
constexpr int known_words = n_known / 32;
constexpr int warps = 1;
constexpr int streams_per_block = warps * streams_per_warp;
// A row of path[][]: the eight state pairs' best alpha + beta padded to 12, so that the eight
// lanes of a stream reading rows e, e + 8, ... with 16-byte loads touch 32 different banks.
constexpr int path_row = 12;
static_assert(states == 2 * group && patterns == 16 && window == 5, "eight lanes per stream, two states a lane");
static_assert(n_known % 32 == 0 && data_bytes % 4 == 0, "the known bits fill whole words, the data bytes whole words after them");
// Block b's first entry is step b * block_rows + memory - 1: k = j - after has the parity of e + 1;
// row r's state pairs rotate with r % 3 (below), so a block starts at the same parity and rotation.
static_assert(((memory - 1 - after) & 1) == 1 && block_rows % 6 == 0);
// The table's bits k = before .. n_bits - after - 1, in pairs from an even k.
static_assert(before % 2 == 0 && (n_bits - before - after) % 2 == 0);

__constant__ unsigned c_known_words[known_words];  ///< the known bits, 32 a word, MSB first

/// Per stream (8 lanes): the packet's bits (the known bits, then the symbol-by-symbol
/// detector's); the table, then (its memory) one block of rows' forward metrics and the best
/// alpha + beta of each state pair; the sample pairs of two blocks of steps (the one in use and
/// the next, being copied) or two chunks of windows.
struct stream_shared {
    unsigned bits[words];
    union alignas(16) {
        double table[2][2][patterns][2];  // [k % 2][d][entry][re, im]
        struct {
            metric path[block_rows][path_row];  ///< per row, min over the pair of alpha + beta, at the pair's s
            float2 alpha[block_rows][group];    ///< the forward metrics of lane g's pair after each step
        } bw;
    } u;
    float4 pair[2][pair_slots];  ///< x0.re, x0.im, x1.re, x1.im of each step of two blocks (or windows of two chunks)
};

/// Copies n sample pairs of a stream to shared memory asynchronously: dst[i] = pair src(i) of
/// xs (its samples 2 src(i), 2 src(i) + 1), none where src(i) < 0; lane g copies i = g,
/// g + 8, ..., and commits them as one batch. The table's fit and both BCJR passes stage their
/// pairs this way a chunk or block ahead of their use: read from device memory where they were
/// used, one at a time, the pairs' latency was the kernel's largest stall (Nsight Compute: long
/// scoreboard, 3.7 of 9 cycles an issue).
template <int n, class Src>
__device__ __forceinline__ void stage(float4* dst, int g, const float2* xs, Src src)
{
    static_assert(n % group == 0);
#pragma unroll
    for (int q = 0; q < n / group; ++q) {
        const int i = g + q * group, j = src(i);
        if (j >= 0) __pipeline_memcpy_async(&dst[i], xs + 2 * j, sizeof(float4));
    }
    __pipeline_commit();
}

/// Waits until the batch staged before the last one (ahead: another was staged since) or the
/// last one is in place, for every lane of `mask`.
__device__ __forceinline__ void staged(bool ahead, unsigned mask)
{
    if (ahead) {
        __pipeline_wait_prior(1);
    } else {
        __pipeline_wait_prior(0);
    }
    __syncwarp(mask);
}

/// A float the compiler must compute here and keep: without it, it recomputes the branch
/// terms from the double table inside the BCJR's loops, a double multiply and a conversion per
/// term and step.
__device__ inline float keep(float v)
{
    float r;
    asm volatile("mov.b32 %0, %1;" : "=f"(r) : "f"(v));
    return r;
}

/// Bits a_k .. a_{k+4} (k >= 0) as a state sequence (the oldest in the most significant bit).
__device__ inline int window_at(const unsigned* bits, int k)
{
    const int w = k >> 5, off = k & 31;
    const unsigned long long v = (static_cast<unsigned long long>(bits[w]) << 32) | bits[w + 1];
    return static_cast<int>((v >> (64 - off - window)) & ((1u << window) - 1));
}
__device__ inline int bit_at(const unsigned* bits, int k) { return static_cast<int>((bits[k >> 5] >> (31 - (k & 31))) & 1u); }

/// One sequence's branch metric for both parities of k, unscaled (kernel, step 3):
/// gamma = e + Re(x0 conj u0 + x1 conj u1) with u = -2 sign t and e = |t|^2, which is
/// dsp/trellis_math.hpp's branch_metric with the sign folded into the entry. Each lane keeps
/// the terms of the sequences it needs in registers and computes their correlations itself
/// (the shuffles and shared-memory loads, not the arithmetic, bound this kernel).
struct branch_terms {
    float u[2][4];  // [parity][x0.re, x0.im, x1.re, x1.im]
    metric e[2];
    __device__ void set(const double (&table)[2][2][patterns][2], int seq)
    {
        const int idx = dsp::trellis_math::pattern_index(seq);
        const double sg = dsp::trellis_math::pattern_sign(seq);
#pragma unroll
        for (int par = 0; par < 2; ++par) {
            double energy = 0.0;
#pragma unroll
            for (int d = 0; d < 2; ++d) {
                const double re = table[par][d][idx][0], im = table[par][d][idx][1];
                energy += re * re + im * im;
                u[par][2 * d] = keep(static_cast<float>(-2.0 * sg * re));
                u[par][2 * d + 1] = keep(static_cast<float>(-2.0 * sg * im));
            }
            e[par] = keep(static_cast<metric>(energy));
        }
    }
    template <int par>
    __device__ metric gamma(float4 z) const
    {
        return e[par] + (z.x * u[par][0] + z.y * u[par][1] + z.z * u[par][2] + z.w * u[par][3]);
    }
};

/// f(std::integral_constant<int, i>{}) for i = 0 .. n - 1 in turn, each i a constant.
template <int i, int n, typename F>
__device__ __forceinline__ void static_for(F&& f)
{
    if constexpr (i < n) {
        f(std::integral_constant<int, i>{});
        static_for<i + 1, n>(f);
    }
}

/// The state pairs. Lane g holds the metrics of two states that differ only in their oldest
/// bit, s and s + 8 (s < 8, "lo" and "hi"): both are the predecessors of the states 2s and
/// 2s + 1, so each add-compare-select of a forward step (and each of a backward step, from 2s
/// and 2s + 1) is the lane's own. After a forward step the lane with s < 4 keeps 2s and the lane
/// with s + 4 keeps 2s + 9, and they trade the other two (one shuffle): the pairs are again
/// (s', s' + 8), with s' = rot(s), the 3-bit left rotation. So at row r lane g holds
/// s = rot^(r % 3)(g), and its partner for the step out of row r is lane g ^ (4 >> (r % 3))
/// (rot^(r % 3) of it is 4). A backward step makes the same trade in reverse. Row r's rotation
/// is a compile-time constant inside a block (block_rows is a multiple of 3), and the lane keeps
/// the branch terms of its four sequences (2s, 2s + 1, 2s + 16, 2s + 17) for each of the three.
/// Where sixteen lanes held a state each, a step took two shuffles and a shared-memory load
/// per state; here it takes one shuffle and one load per pair of states.
__device__ constexpr int rot3(int s) { return ((s << 1) | (s >> 2)) & 7; }
__device__ constexpr int rot3_pow(int s, int n) { return n == 0 ? s : rot3_pow(rot3(s), n - 1); }
template <int phase>
constexpr int partner_xor = 4 >> phase;

struct pair_metric {
    metric lo, hi;  ///< of states s and s + 8
};

// A warp a block (4 streams), nine blocks an SM, so that a part's streams (about 4700, 1169
// warps) stay one wave on an H100's 132 SMs. Nine warps put three on one of the SM's four
// schedulers, whose quarter of the register file allows 168 registers a thread (ptxas, CUDA
// 13, sm_90: 163, no spills; the branch terms of three rotations are 120 of them).
__global__ void __launch_bounds__(32 * warps, 9) trellis_kernel(const float2* __restrict__ x, int streams,
                                                          const unsigned char* __restrict__ sxs_bits,
                                                          const dsp::path_stats* __restrict__ sxs_stats,
                                                          unsigned char* __restrict__ bits, dsp::path_stats* __restrict__ stats,
                                                          metric* __restrict__ checkpoint, float* __restrict__ llr_out)
{
    __shared__ stream_shared shm[streams_per_block];
    const int lane = static_cast<int>(threadIdx.x) % 32, quarter = lane / group, g = lane % group;
    const int s = static_cast<int>(threadIdx.x) / group + static_cast<int>(blockIdx.x) * streams_per_block;
    // A warp's quarters past the last stream leave at once; every shuffle, vote and sync of
    // the others names the quarters left (mask), and stays in its quarter (width 8).
    const unsigned mask = __ballot_sync(0xffffffffu, s < streams);
    if (s >= streams) return;
    const unsigned own = 0xffu << (group * quarter);
    stream_shared& sh = shm[threadIdx.x / group];
    const float2* xs = x + static_cast<std::size_t>(s) * n_samples;
    unsigned char* bs = bits + static_cast<std::size_t>(s) * data_bytes;
    float* llr = llr_out + static_cast<std::size_t>(s) * n_bits;
    const unsigned char* sxs = sxs_bits + static_cast<std::size_t>(s) * data_bytes;

    // 1. a_k: the known bits, then the symbol-by-symbol detector's decisions (1 = +1).
    for (int i = g; i < words; i += group) {
        unsigned w = 0;
        if (i < known_words) {
            w = c_known_words[i];
        } else if (i - known_words < data_bytes / 4) {
            const unsigned char* b = sxs + 4 * (i - known_words);
            w = (static_cast<unsigned>(b[0]) << 24) | (static_cast<unsigned>(b[1]) << 16) | (static_cast<unsigned>(b[2]) << 8) | b[3];
        }
        sh.bits[i] = w;
    }
    __syncwarp(mask);

    // 2. The table (dsp/trellis.cpp, fit): lane g computes entries g and g + 8 of both
    // parities, adding each entry's samples in the order of k as the CPU does. Entry t is the
    // window `pos` (centre bit +1) or its negation (centre bit -1, the sign -1). A word of the
    // bits at a time (window i = bits i .. i + 4, bit k = i + before), the lane finds the
    // windows of its entries with bit operations (a mask of 32 windows: bit 31 - q for window
    // 32 c + q) and reads and adds only their pairs, in order: each pair is read by the one
    // lane whose entry it is. The same sums bit for bit as the CPU's: x + 0 = x, and +-1 times
    // x is exact.
    bool complete = false;
    {
        double sum[2][2][2][2] = {};  // [entry g, g + 8][k % 2][d][re, im]
        int count[2][2] = {};
        int pos[2];
#pragma unroll
        for (int t = 0; t < 2; ++t) {
            const int entry = g + t * group;
            pos[t] = ((entry >> after) << (after + 1)) | (1 << after) | (entry & ((1 << after) - 1));
        }
        constexpr int windows = n_bits - before - after;
        constexpr int chunks = (windows + chunk - 1) / chunk;
        static_assert(chunk == 32, "a chunk is the windows of one word of bits");
        // The pairs of a chunk of 32 windows (lane g: windows g, g + 8, ...), staged a chunk ahead.
        auto load_chunk = [&](int c) {
            stage<chunk>(sh.pair[c & 1], g, xs, [c](int i) {
                const int w = chunk * c + i;
                return w < windows ? w + before : -1;
            });
        };
        load_chunk(0);
#pragma unroll 1
        for (int c = 0; c < chunks; ++c) {
            __syncwarp(mask);  // chunk c - 1's buffer is free
            if (c + 1 < chunks) load_chunk(c + 1);
            staged(c + 1 < chunks, mask);
            const unsigned long long v = (static_cast<unsigned long long>(sh.bits[c]) << 32) | sh.bits[c + 1];
            const int left = windows - c * 32;
            const unsigned valid = left >= 32 ? ~0u : ~(~0u >> left);  // the windows inside the packet
#pragma unroll
            for (int t = 0; t < 2; ++t) {
                // Bit 31 - q of shifted(j) is bit j of window 32 c + q (bit 0 the oldest).
                unsigned m_pos = ~0u, m_neg = ~0u;
#pragma unroll
                for (int j = 0; j < window; ++j) {
                    const unsigned w = static_cast<unsigned>(v >> (32 - j));
                    const bool one = ((pos[t] >> (window - 1 - j)) & 1) != 0;
                    m_pos &= one ? w : ~w;
                    m_neg &= one ? ~w : w;
                }
                m_pos &= valid;
                m_neg &= valid;
                for (unsigned m = m_pos | m_neg; m != 0;) {
                    const int q = __clz(m);
                    const unsigned bit = 0x80000000u >> q;
                    m &= ~bit;
                    const int par = (c * 32 + q) & 1;  // window i = 32 c + q is bit k = i + before; before is even: k's parity is i's
                    const float4 z = sh.pair[c & 1][q];  // the pair of bit k = 32 c + q + before
                    const double sg = (m_pos & bit) != 0 ? 1.0 : -1.0;
                    // The parity picked by a branch, so that each sum stays in a register.
                    auto add = [&](double (&to)[2][2], int& n) {
                        to[0][0] = fma(sg, static_cast<double>(z.x), to[0][0]);
                        to[0][1] = fma(sg, static_cast<double>(z.y), to[0][1]);
                        to[1][0] = fma(sg, static_cast<double>(z.z), to[1][0]);
                        to[1][1] = fma(sg, static_cast<double>(z.w), to[1][1]);
                        ++n;
                    };
                    if (par == 0) {
                        add(sum[t][0], count[t][0]);
                    } else {
                        add(sum[t][1], count[t][1]);
                    }
                }
            }
        }
        complete = (__ballot_sync(mask, count[0][0] > 0 && count[0][1] > 0 && count[1][0] > 0 && count[1][1] > 0) & own) == own;
#pragma unroll
        for (int t = 0; t < 2; ++t) {
#pragma unroll
            for (int par = 0; par < 2; ++par) {
                const double n = count[t][par] > 0 ? static_cast<double>(count[t][par]) : 1.0;
#pragma unroll
                for (int d = 0; d < 2; ++d) {
                    sh.u.table[par][d][g + t * group][0] = sum[t][par][d][0] / n;
                    sh.u.table[par][d][g + t * group][1] = sum[t][par][d][1] / n;
                }
            }
        }
    }
    __syncwarp(mask);
    // 3. Max-log BCJR (dsp/trellis.cpp, detect), on the state pairs above. Forward, out of the
    // lane's pair (s, s + 8) into states 2s (new bit -1) and 2s + 1 (+1): the sequences 2s and
    // 2s + 16 into 2s, 2s + 1 and 2s + 17 into 2s + 1. Backward, into the pair: from 2s and
    // 2s + 1 by the same four sequences. The LLR of step j: the best alpha_j + beta_j of the
    // states whose newest bit is +1 (odd s: a pair shares its newest bit) against the best of
    // those whose newest bit is -1. The metrics are the CPU's without its scale 1 / (4 sigma2),
    // a positive factor that changes no decision: the LLRs are scaled as they are written, once
    // the residual (over the first pass's reads of the samples) gives sigma2. A packet without
    // a usable model (a degenerate one) keeps the symbol-by-symbol bits. The quarters run the
    // BCJR together while any has a complete table (shuffles and syncs stay uniform); one
    // without writes nothing from it.
    double se = 0.0;  // the residual's sum of squares, this lane's share
    bool usable = false;
    if (__ballot_sync(mask, complete) != 0) {
        const metric inf = CUDART_INF_F;
        // Lane g's sequences at each rotation: q = 0 .. 3 is 2s + (q & 1) + 16 (q >> 1).
        branch_terms terms[3][4];
        static_for<0, 3>([&](auto ph_c) {
            constexpr int ph = decltype(ph_c)::value;
            const int sp = rot3_pow(g, ph);
#pragma unroll
            for (int q = 0; q < 4; ++q) terms[ph][q].set(sh.u.table, 2 * sp + (q & 1) + 16 * (q >> 1));
        });
        // Whether the lane's s >= 4 at each rotation (it keeps 2s + 1 and trades 2s).
        const bool upper[3] = {g >= 4, rot3_pow(g, 1) >= 4, rot3_pow(g, 2) >= 4};
        auto block_first = [](int b) { return b * block_rows + memory - 1; };  // the step of block b's entry 0
        // The sample pairs of a block (lane g: entries g, g + 8, g + 16), staged one block ahead
        // of their use, into the buffer of the block's parity.
        const float4* pairs = sh.pair[0];  // the current block's
        auto load = [&](int b) {
            stage<block_rows>(sh.pair[b & 1], g, xs, [first = block_first(b)](int i) {
                const int j = first + i;
                return j < steps ? j - after : -1;
            });
        };
        // Block b's pairs in place (the copies committed after it may still run), for every lane.
        auto fill = [&](int b, bool ahead) {
            staged(ahead, mask);
            pairs = sh.pair[b & 1];
        };
        // The steps come in versions for the parity of k (which table entries), the rotation
        // of the row they leave, and whether the step's bit may be a known one (blocks 0 .. 3;
        // the others need no check), chosen at compile time: block entry e has the parity
        // (e + 1) & 1 and leaves a row of rotation (e + 2) % 3.
        // One forward step (step j, block entry e): alpha_j of the pair after it.
        auto forward = [&](auto e_c, auto known_c, int j, pair_metric a) {
            constexpr int e = decltype(e_c)::value, par = (e + 1) & 1, ph = (e + 2) % 3;
            const float4 z = pairs[e];
            const branch_terms(&t)[4] = terms[ph];
            metric n0 = fminf(a.lo + t[0].gamma<par>(z), a.hi + t[2].gamma<par>(z));
            metric n1 = fminf(a.lo + t[1].gamma<par>(z), a.hi + t[3].gamma<par>(z));
            if constexpr (decltype(known_c)::value) {
                if (j < n_known) {
                    const int f = bit_at(sh.bits, j);
                    n0 = f == 1 ? inf : n0;
                    n1 = f == 0 ? inf : n1;
                }
            }
            const bool up = upper[ph];
            const metric kept = up ? n1 : n0;
            const metric got = __shfl_xor_sync(mask, up ? n0 : n1, partner_xor<ph>, group);
            return up ? pair_metric{got, kept} : pair_metric{kept, got};
        };
        // One backward step: beta_{j-1} of the pair before step j from beta_j of the pair after it.
        auto backward = [&](auto e_c, auto known_c, int j, pair_metric beta) {
            constexpr int e = decltype(e_c)::value, par = (e + 1) & 1, ph = (e + 2) % 3;
            const float4 z = pairs[e];
            const branch_terms(&t)[4] = terms[ph];
            const bool up = upper[ph];
            const metric got = __shfl_xor_sync(mask, up ? beta.lo : beta.hi, partner_xor<ph>, group);
            const metric b0 = up ? got : beta.lo, b1 = up ? beta.hi : got;  // beta of 2s and 2s + 1
            metric t0 = t[0].gamma<par>(z) + b0, t1 = t[1].gamma<par>(z) + b1;
            metric t2 = t[2].gamma<par>(z) + b0, t3 = t[3].gamma<par>(z) + b1;
            if constexpr (decltype(known_c)::value) {
                if (j < n_known) {
                    const int f = bit_at(sh.bits, j);
                    t0 = f == 1 ? inf : t0;
                    t2 = f == 1 ? inf : t2;
                    t1 = f == 0 ? inf : t1;
                    t3 = f == 0 ? inf : t3;
                }
            }
            return pair_metric{fminf(t0, t1), fminf(t2, t3)};
        };
        auto group_min = [&](pair_metric v) {
            metric m = fminf(v.lo, v.hi);
            for (int o = group / 2; o > 0; o >>= 1) m = fminf(m, __shfl_xor_sync(mask, m, o, group));
            return pair_metric{v.lo - m, v.hi - m};
        };
        auto known_block = [&](int b, auto&& body) {
            if (block_first(b) < n_known) {
                body(std::true_type{});
            } else {
                body(std::false_type{});
            }
        };
        auto last_entry = [&](int b) { return min(block_rows - 1, steps - 1 - block_first(b)); };
        // Checkpoint b: the sixteen states' metrics at entry 0 (rotation 0: lane g holds g, g + 8).
        metric* ck = checkpoint + static_cast<std::size_t>(s) * checkpoints * states;
        const int start = window_at(sh.bits, 0) >> 1;  // a_0 .. a_3
        pair_metric a{g == start ? 0.0f : inf, g + group == start ? 0.0f : inf};
        ck[g] = a.lo;
        ck[g + group] = a.hi;
        load(0);
        for (int b = 0; b < checkpoints; ++b) {
            __syncwarp(mask);  // block b - 1's buffer is free
            if (b + 1 < checkpoints) load(b + 1);
            fill(b, b + 1 < checkpoints);
            // The residual over the bits the table is fitted on, from the pairs just read: lane
            // g takes block entries g, g + 8 and g + 16.
#pragma unroll
            for (int e = g; e < block_rows; e += group) {
                const int k = block_first(b) + e - after;
                if (k < before || k + after >= n_bits) continue;
                const int seq = window_at(sh.bits, k - before);
                const int idx = dsp::trellis_math::pattern_index(seq), par = k & 1;
                const double sg = dsp::trellis_math::pattern_sign(seq);
                const float4 z = pairs[e];
                const float zr[2][2] = {{z.x, z.y}, {z.z, z.w}};
#pragma unroll
                for (int d = 0; d < 2; ++d) {
                    const double ex = static_cast<double>(zr[d][0]) - sg * sh.u.table[par][d][idx][0];
                    const double ey = static_cast<double>(zr[d][1]) - sg * sh.u.table[par][d][idx][1];
                    se += ex * ex + ey * ey;
                }
            }
            known_block(b, [&](auto known_c) {
                const int last = last_entry(b);
                if (b > 0) {  // entry 0, row b * block_rows: shifted by its minimum, then kept
                    a = group_min(forward(std::integral_constant<int, 0>{}, known_c, block_first(b), a));
                    ck[b * states + g] = a.lo;
                    ck[b * states + g + group] = a.hi;
                }
                // Unrolled, as the backward pass's steps are: each step's loads and correlations
                // depend on no metric, so they can be issued ahead of the steps before.
                static_for<1, block_rows>([&](auto e_c) {
                    if (decltype(e_c)::value <= last) a = forward(e_c, known_c, block_first(b) + decltype(e_c)::value, a);
                });
            });
        }
        for (int o = group / 2; o > 0; o >>= 1) se += __shfl_xor_sync(mask, se, o, group);
        const double sigma2 = se / (2.0 * 2.0 * static_cast<double>(n_bits - before - after));
        usable = complete && sigma2 > 0.0;
        const float llr_scale = usable ? static_cast<float>(0.5 / (2.0 * sigma2)) : 0.0f;
        // The pair's s at each rotation: where its best alpha + beta goes in a row.
        const int at[3] = {g, rot3_pow(g, 1), rot3_pow(g, 2)};
        __syncwarp(mask);  // the table's memory becomes the path metrics'
        // Backward, a block of rows at a time from the last: the block's forward metrics again
        // from its checkpoint (the same steps, so the same values), kept in shared memory (lane
        // g's own column; in registers they would cost warps an SM: see the launch bounds);
        // then its backward steps, each writing the best alpha_j + beta_j of the lane's pair to
        // its row (at the pair's s: even s are the states whose newest bit is -1); then the
        // block's LLRs, lane g taking the rows g, g + 8 and g + 16: the best of the odd entries
        // against the best of the even ones.
        pair_metric beta{0.0f, 0.0f};  // of the pair after step j
        load(checkpoints - 1);
        pair_metric a_next{ck[(checkpoints - 1) * states + g], ck[(checkpoints - 1) * states + g + group]};  // a block ahead
        for (int b = checkpoints - 1; b >= 0; --b) {
            const int last = last_entry(b), first = b == 0 ? 1 : 0;
            const pair_metric a_blk = a_next;
            __syncwarp(mask);  // block b + 1's buffer is free
            if (b > 0) {
                load(b - 1);
                a_next = pair_metric{ck[(b - 1) * states + g], ck[(b - 1) * states + g + group]};
            }
            fill(b, b > 0);
            known_block(b, [&](auto known_c) {
                pair_metric al = a_blk;
                float2* alpha = sh.u.bw.alpha[0] + g;  // lane g's column, read back by lane g only
                alpha[0] = make_float2(al.lo, al.hi);
                static_for<1, block_rows>([&](auto e_c) {
                    constexpr int e = decltype(e_c)::value;
                    if (e <= last) {
                        al = forward(e_c, known_c, block_first(b) + e, al);
                        alpha[e * group] = make_float2(al.lo, al.hi);
                    }
                });
                beta = group_min(beta);
                static_for<0, block_rows>([&](auto r_c) {
                    constexpr int e = block_rows - 1 - decltype(r_c)::value;
                    if (e <= last && e >= first) {
                        const float2 ae = alpha[e * group];
                        sh.u.bw.path[e][at[e % 3]] = fminf(ae.x + beta.lo, ae.y + beta.hi);
                        beta = backward(std::integral_constant<int, e>{}, known_c, block_first(b) + e, beta);
                    }
                });
            });
            __syncwarp(mask);
            if (usable) {
#pragma unroll
                for (int e = g; e < block_rows; e += group) {
                    const int j = block_first(b) + e;
                    if (e >= first && e <= last && j < n_bits) {
                        const float4* row = reinterpret_cast<const float4*>(sh.u.bw.path[e]);
                        const float4 q0 = row[0], q1 = row[1];
                        // the best -1 (even s) and +1 (odd s) paths
                        const metric lo = fminf(fminf(q0.x, q0.z), fminf(q1.x, q1.z));
                        const metric hi = fminf(fminf(q0.y, q0.w), fminf(q1.y, q1.w));
                        const metric d = lo - hi;
                        // A known bit's +-1e30 as it is; elsewhere every state is reachable.
                        llr[j] = isfinite(d) ? llr_scale * d : (hi < lo ? 1e30f : -1e30f);
                    }
                }
            }
            __syncwarp(mask);
        }
        if (usable && g < memory) llr[g] = bit_at(sh.bits, g) != 0 ? 1e30f : -1e30f;
    }
    if (!usable) {
        for (int k = g; k < n_bits; k += group) llr[k] = bit_at(sh.bits, k) != 0 ? 1.0f : -1.0f;
    }
    __syncwarp(mask);

    // 4. Hard bits and the BEP estimate from the LLRs of the data bits (a byte's eight LLRs
    // as two 16-byte loads, four bytes' loads in flight together).
    double bep = 0.0;
    static_assert(n_bits % 4 == 0 && n_known % 4 == 0 && (data_bytes / group) % 4 == 0);
#pragma unroll 4
    for (int byte = g; byte < data_bytes; byte += group) {
        const float4* l4 = reinterpret_cast<const float4*>(llr + n_known + 8 * byte);
        const float4 lo = l4[0], hi = l4[1];
        const float lvs[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
        unsigned v = 0;
#pragma unroll
        for (int b = 0; b < 8; ++b) {
            const float lv = lvs[b];
            if (lv > 0.0f) v |= 0x80u >> b;
            bep += 1.0 / (1.0 + exp(fmin(fabs(static_cast<double>(lv)), 700.0)));
        }
        bs[byte] = static_cast<unsigned char>(v);
    }
    for (int o = group / 2; o > 0; o >>= 1) bep += __shfl_xor_sync(mask, bep, o, group);
    if (g == 0) {
        stats[s].known_bit_errors = sxs_stats[s].known_bit_errors;
        stats[s].bep_estimate = static_cast<float>(bep / static_cast<double>(waveform::data_bits));
    }
}

/// Soft output: stream s's data-bit LLRs as dsp::quantize_llr gives them (the same float
/// arithmetic: a multiply by a power of two, roundf, the clamps), out[s * 6144 + i].
__global__ void quantize_llrs_kernel(const float* __restrict__ llr, std::size_t total, std::int8_t* __restrict__ out)
{
    constexpr std::size_t nd = waveform::data_bits;
    for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < total;
         i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
        const std::size_t s = i / nd, b = i % nd;
        const float q = roundf(llr[s * n_bits + n_known + b] * dsp::llr_steps_per_nat);
        out[i] = isnan(q) ? std::int8_t{0} : static_cast<std::int8_t>(q > 127.0f ? 127.0f : q < -127.0f ? -127.0f : q);
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
    unsigned w[known_words] = {};
    for (int k = 0; k < n_known; ++k) {
        if (known[static_cast<std::size_t>(k)] != 0) w[k / 32] |= 1u << (31 - k % 32);
    }
    PAQ_CUDA_CHECK(cudaMemcpyToSymbol(c_known_words, w, sizeof w));
}

void stream_trellis::detect_device(std::size_t streams, const std::uint8_t* sxs_bits,
                                   const dsp::path_stats* sxs_stats, cudaStream_t s)
{
    if (streams > max_streams_) {
        throw std::invalid_argument("stream_trellis: " + std::to_string(streams) + " streams, made for " + std::to_string(max_streams_));
    }
    if (streams == 0) return;
    // Four streams a warp: the last warp's quarters past the last stream leave at once.
    trellis_kernel<<<static_cast<unsigned>((streams + streams_per_block - 1) / streams_per_block), 32 * warps, 0, s>>>(
        x_.data(), static_cast<int>(streams), sxs_bits, sxs_stats, bits_.data(), stats_.data(), alpha_.data(), llr_.data());
    PAQ_CUDA_CHECK_LAUNCH();
}

void stream_trellis::quantize_llrs(std::size_t streams, std::int8_t* out, cudaStream_t s) const
{
    if (streams > max_streams_) {
        throw std::invalid_argument("stream_trellis: " + std::to_string(streams) + " streams, made for " + std::to_string(max_streams_));
    }
    if (streams == 0) return;
    const std::size_t total = streams * waveform::data_bits;
    const auto blocks = static_cast<unsigned>(std::min<std::size_t>((total + 255) / 256, 4096));
    quantize_llrs_kernel<<<blocks, 256, 0, s>>>(llr_.data(), total, out);
    PAQ_CUDA_CHECK_LAUNCH();
}

}  // namespace paq::gpu
