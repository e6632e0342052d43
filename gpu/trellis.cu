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
constexpr int n_samples = n_bits;  // one a bit, at its instant
constexpr int data_bytes = static_cast<int>(dsp::packed_data_bytes);
constexpr int group = states;                  // the lanes of one stream: lane g is state g
constexpr int steps = n_bits + after;          // trellis steps memory .. steps - 1 (bit j, the sample of bit j - after)
constexpr int rows = steps - memory + 1;       // forward metrics: row r = after step r + memory - 1
constexpr int block_rows = 32;                 // forward metrics kept every block_rows rows
constexpr int checkpoints = (rows + block_rows - 1) / block_rows;
constexpr int words = (n_bits + 31) / 32 + 2;  // the packet's bits, 32 a word, MSB first; two words of padding
constexpr int known_words = n_known / 32;
constexpr int warps = 4;
constexpr int streams_per_block = warps * 32 / group;
// A row of path[][]: the sixteen states' metrics padded to 20, so that the eight lanes of a
// quarter-warp reading rows e .. e + 7 with 16-byte loads touch 32 different banks.
constexpr int path_row = 20;
static_assert(group == 16 && patterns == 16 && window == 5, "sixteen lanes per stream: lane g is state g and table entry g");
static_assert(n_known % 32 == 0 && data_bytes % 4 == 0, "the known bits fill whole words, the data bytes whole words after them");
// Block b's first entry is step b * block_rows + memory - 1: k = j - after has the parity of e + 1.
static_assert(((memory - 1 - after) & 1) == 1 && block_rows % 2 == 0);
// The table's bits k = before .. n_bits - after - 1, in pairs from an even k.
static_assert(before % 2 == 0 && (n_bits - before - after) % 2 == 0);

__constant__ unsigned c_known_words[known_words];  ///< the known bits, 32 a word, MSB first

/// Per stream (16 lanes): the packet's bits (the known bits, then the symbol-by-symbol
/// detector's); the table, then (its memory) alpha + beta of one block of rows; the samples of
/// two blocks of steps (the one in use and the next, being copied).
struct stream_shared {
    unsigned bits[words];
    union alignas(16) {
        double table[2][patterns][2];  // [k % 2][entry][re, im]
        metric path[block_rows][path_row];  ///< alpha + beta of each state after each step of one block
    } u;
    float2 sample[2][block_rows];  ///< the sample of each step of two blocks (or windows of two chunks)
};

/// Copies n samples of a stream to shared memory asynchronously: dst[i] = sample src(i) of xs
/// (bit src(i)'s), none where src(i) < 0; lane g copies i = g, g + 16, ..., and commits them
/// as one batch. The table's fit and both BCJR passes stage their samples this way a chunk or
/// block ahead of their use: read from device memory where they were used, one at a time, their
/// latency was the kernel's largest stall (Nsight Compute: long scoreboard, 3.7 of 9 cycles an
/// issue).
template <int n, class Src>
__device__ __forceinline__ void stage(float2* dst, int g, const float2* xs, Src src)
{
    static_assert(n % group == 0);
#pragma unroll
    for (int q = 0; q < n / group; ++q) {
        const int i = g + q * group, j = src(i);
        if (j >= 0) __pipeline_memcpy_async(&dst[i], xs + j, sizeof(float2));
    }
    __pipeline_commit();
}

/// Waits until the batch staged before the last one (ahead: another was staged since) or the
/// last one is in place, for every lane of the warp.
__device__ __forceinline__ void staged(bool ahead)
{
    if (ahead) {
        __pipeline_wait_prior(1);
    } else {
        __pipeline_wait_prior(0);
    }
    __syncwarp(0xffffffffu);
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
/// gamma = e + Re(x conj u) with u = -2 sign t and e = |t|^2, which is dsp/trellis_math.hpp's
/// branch_metric with the sign folded into the entry. A sequence and its negation share the
/// entry: the same e, u negated (exactly), so the correlation part (dot) of one is exactly
/// minus the other's. Each lane computes the dots of both its sequences per direction from its
/// own registers: two multiply-adds instead of a shuffle (the shuffles and shared-memory loads,
/// not the arithmetic, bound this kernel).
struct branch_terms {
    float u[2][2];  // [parity][re, im]
    metric e[2];
    __device__ void set(const double (&table)[2][patterns][2], int seq)
    {
        const int idx = dsp::trellis_math::pattern_index(seq);
        const double sg = dsp::trellis_math::pattern_sign(seq);
#pragma unroll
        for (int par = 0; par < 2; ++par) {
            const double re = table[par][idx][0], im = table[par][idx][1];
            u[par][0] = keep(static_cast<float>(-2.0 * sg * re));
            u[par][1] = keep(static_cast<float>(-2.0 * sg * im));
            e[par] = keep(static_cast<metric>(re * re + im * im));
        }
    }
    template <int par>
    __device__ metric dot(float2 z) const
    {
        return z.x * u[par][0] + z.y * u[par][1];
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

// At most 96 registers a thread, so that five blocks fit an SM: a part's streams (about 4700,
// 585 blocks) stay one wave on an H100's 132 SMs. (ptxas, CUDA 13, sm_90: 91 registers, no
// spills, with one sample a bit; 96 and 8 bytes spilled with the pair of samples.)
__global__ void __launch_bounds__(32 * warps, 5) trellis_kernel(const float2* __restrict__ x, int streams,
                                                          const unsigned char* __restrict__ fit_bits,
                                                          const dsp::path_stats* __restrict__ sxs_stats,
                                                          unsigned char* __restrict__ bits, dsp::path_stats* __restrict__ stats,
                                                          metric* __restrict__ checkpoint, float* __restrict__ llr_out)
{
    __shared__ stream_shared shm[streams_per_block];
    const int lane = static_cast<int>(threadIdx.x) % 32, half = lane / group, g = lane % group;
    const int warp_first = (static_cast<int>(threadIdx.x) / 32) * 2 + static_cast<int>(blockIdx.x) * streams_per_block;
    if (warp_first >= streams) return;  // the whole warp
    // Both half-warps always run: with an odd stream count the last one runs a stand-in
    // (slot `streams` of every buffer: whatever the input holds there, zeros at first, with
    // the last stream's bits; nothing of it is read back), so every shuffle and vote
    // names the whole warp.
    // Shuffles stay in the half-warp (width 16).
    const int s = warp_first + half;
    const int sr = min(s, streams - 1);  // the stream whose bits are read
    constexpr unsigned mask = 0xffffffffu;
    const unsigned own = 0xffffu << (group * half);
    stream_shared& sh = shm[threadIdx.x / group];
    const float2* xs = x + static_cast<std::size_t>(s) * n_samples;
    unsigned char* bs = bits + static_cast<std::size_t>(s) * data_bytes;
    float* llr = llr_out + static_cast<std::size_t>(s) * n_bits;
    const unsigned char* fit = fit_bits + static_cast<std::size_t>(sr) * data_bytes;

    // 1. a_k: the known bits, then the data bits the table is fitted on (1 = +1): the
    // symbol-by-symbol detector's in the first pass, the first pass's in the second.
    for (int i = g; i < words; i += group) {
        unsigned w = 0;
        if (i < known_words) {
            w = c_known_words[i];
        } else if (i - known_words < data_bytes / 4) {
            const unsigned char* b = fit + 4 * (i - known_words);
            w = (static_cast<unsigned>(b[0]) << 24) | (static_cast<unsigned>(b[1]) << 16) | (static_cast<unsigned>(b[2]) << 8) | b[3];
        }
        sh.bits[i] = w;
    }
    __syncwarp(mask);

    // 2. The table (dsp/trellis.cpp, fit): lane g computes entry g of both parities, adding its
    // samples in the order of k as the CPU does. Entry g is the window `pos` (centre bit +1)
    // or its negation `neg` (centre bit -1, the sign -1). A word of the bits at a time (window
    // i = bits i .. i + 4, bit k = i + before's), the lane finds the windows of its entry with
    // bit operations (a mask of 32 windows: bit 31 - q for window 32 c + q) and reads and adds
    // only their samples, in order: each sample is read by the one lane whose entry it is, where
    // every lane used to read every sample and add it with weight +-1 or 0. The same sums bit
    // for bit: x + 0 = x, and +-1 times x is exact.
    bool complete = false;
    {
        double sum[2][2] = {};  // [parity][re, im]
        int count[2] = {0, 0};
        const int pos = ((g >> after) << (after + 1)) | (1 << after) | (g & ((1 << after) - 1));
        constexpr int windows = n_bits - before - after;
        constexpr int chunks = (windows + 31) / 32;
        static_assert(block_rows == 32, "a chunk of 32 windows fills a block's buffer");
        // The samples of a chunk of 32 windows (lane g: windows g and g + 16), staged a chunk ahead.
        auto load_chunk = [&](int c) {
            stage<32>(sh.sample[c & 1], g, xs, [c](int i) {
                const int w = 32 * c + i;
                return w < windows ? w + before : -1;
            });
        };
        load_chunk(0);
#pragma unroll 1
        for (int c = 0; c < chunks; ++c) {
            __syncwarp(mask);  // chunk c - 1's buffer is free
            if (c + 1 < chunks) load_chunk(c + 1);
            staged(c + 1 < chunks);
            const unsigned long long v = (static_cast<unsigned long long>(sh.bits[c]) << 32) | sh.bits[c + 1];
            // Bit 31 - q of shifted(j) is bit j of window 32 c + q (bit 0 the oldest).
            unsigned m_pos = ~0u, m_neg = ~0u;
#pragma unroll
            for (int j = 0; j < window; ++j) {
                const unsigned w = static_cast<unsigned>(v >> (32 - j));
                const bool one = ((pos >> (window - 1 - j)) & 1) != 0;
                m_pos &= one ? w : ~w;
                m_neg &= one ? ~w : w;
            }
            const int left = windows - c * 32;
            const unsigned valid = left >= 32 ? ~0u : ~(~0u >> left);  // the windows inside the packet
            m_pos &= valid;
            m_neg &= valid;
            for (unsigned m = m_pos | m_neg; m != 0;) {
                const int q = __clz(m);
                const unsigned bit = 0x80000000u >> q;
                m &= ~bit;
                const int par = (c * 32 + q) & 1;  // window i = 32 c + q is bit k = i + before; before is even: k's parity is i's
                const float2 z = sh.sample[c & 1][q];  // the sample of bit k = 32 c + q + before
                const double sg = (m_pos & bit) != 0 ? 1.0 : -1.0;
                // The parity picked by a branch, so that each sum stays in a register.
                auto add = [&](double (&to)[2], int& n) {
                    to[0] = fma(sg, static_cast<double>(z.x), to[0]);
                    to[1] = fma(sg, static_cast<double>(z.y), to[1]);
                    ++n;
                };
                if (par == 0) {
                    add(sum[0], count[0]);
                } else {
                    add(sum[1], count[1]);
                }
            }
        }
        complete = (__ballot_sync(mask, count[0] > 0 && count[1] > 0) & own) == own;
#pragma unroll
        for (int par = 0; par < 2; ++par) {
            const double n = count[par] > 0 ? static_cast<double>(count[par]) : 1.0;
            sh.u.table[par][g][0] = sum[par][0] / n;
            sh.u.table[par][g][1] = sum[par][1] / n;
        }
    }
    __syncwarp(mask);
    // 3. Max-log BCJR (dsp/trellis.cpp, detect). Lane g is state g. Forward, into state g (new
    // bit g & 1): from states g >> 1 and (g >> 1) | 8, the sequences g and g | 16. Backward, out
    // of state g: the sequences 2g and 2g + 1 into states 2g & 15 and (2g + 1) & 15. The LLR of
    // step j: the best alpha_j + beta_j of the states whose newest bit is +1 against the best
    // of those whose newest bit is -1. The metrics are the CPU's without its scale
    // 1 / (2 sigma2), a positive factor that changes no decision: the LLRs are scaled as they
    // are written, once the residual (over the first pass's reads of the samples) gives sigma2.
    // A packet without a usable model (a degenerate one) keeps the bits it was fitted on. The
    // half-warps run the BCJR together while either has a complete table (shuffles and syncs
    // stay uniform); one without writes nothing from it.
    double se = 0.0;  // the residual's sum of squares, this lane's share
    // ... and its products a bit apart (trellis_model::rho1), in float: lane g pairs its
    // entries g and g + 16 with entries g + 1 and g + 17, read from lane (g + 1) mod 16; lane
    // 15's entry 31 pairs with the next block's entry 0 (its residual kept in r1_last). A
    // residual outside the bits the table is fitted on is 0, so the pairs are the CPU's.
    float s1 = 0.0f;
    float2 r1_last = make_float2(0.0f, 0.0f);
    bool usable = false;
    if (__ballot_sync(mask, complete) != 0) {
        const metric inf = CUDART_INF_F;
        // Lane g's sequences: into state g, g and g | 16; out of it, 2g and 2g + 1 (mod 32).
        branch_terms in0, in1, out0, out1;
        in0.set(sh.u.table, g);
        in1.set(sh.u.table, g | 16);
        out0.set(sh.u.table, (2 * g) & 31);
        out1.set(sh.u.table, (2 * g + 1) & 31);

        const int p0 = g >> 1, p1 = (g >> 1) | 8, n0 = (2 * g) & 15, n1 = (2 * g + 1) & 15;
        const int own_bit = g & 1;
        auto block_first = [](int b) { return b * block_rows + memory - 1; };  // the step of block b's entry 0
        // The samples of a block (lane g: entries g and g + 16), staged one block ahead of their
        // use, into the buffer of the block's parity.
        const float2* samples = sh.sample[0];  // the current block's
        auto load = [&](int b) {
            stage<block_rows>(sh.sample[b & 1], g, xs, [first = block_first(b)](int i) {
                const int j = first + i;
                return j < steps ? j - after : -1;
            });
        };
        // Block b's samples in place (the copies committed after it may still run), for every lane.
        auto fill = [&](int b, bool ahead) {
            staged(ahead);
            samples = sh.sample[b & 1];
        };
        // The steps come in versions for the parity of k (which table entries) and for whether
        // the step's bit may be a known one (blocks 0 .. 5; the others need no check), chosen at
        // compile time: entry e of a block has the parity (e + 1) & 1.
        using even = std::integral_constant<int, 0>;
        using odd = std::integral_constant<int, 1>;
        // One forward step (step j, block entry e): alpha_j of state g.
        auto forward = [&](auto par_c, auto known_c, int j, int e, metric a_prev) {
            constexpr int par = decltype(par_c)::value;
            const float2 z = samples[e];
            const metric a0 = __shfl_sync(mask, a_prev, p0, group), a1 = __shfl_sync(mask, a_prev, p1, group);
            const metric d0 = in0.dot<par>(z), d1 = in1.dot<par>(z);
            const metric v = fminf(a0 + (in0.e[par] + d0), a1 + (in1.e[par] + d1));
            if constexpr (decltype(known_c)::value) {
                if (j < n_known && own_bit != bit_at(sh.bits, j)) return inf;
            }
            return v;
        };
        // One backward step: beta_{j-1} of state g from beta_j.
        auto backward = [&](auto par_c, auto known_c, int j, int e, metric beta) {
            constexpr int par = decltype(par_c)::value;
            const float2 z = samples[e];
            const metric b0 = __shfl_sync(mask, beta, n0, group), b1 = __shfl_sync(mask, beta, n1, group);
            const metric d0 = out0.dot<par>(z), d1 = out1.dot<par>(z);
            metric t0 = (out0.e[par] + d0) + b0, t1 = (out1.e[par] + d1) + b1;
            if constexpr (decltype(known_c)::value) {
                if (j < n_known) {
                    const int f = bit_at(sh.bits, j);
                    t0 = f == 1 ? inf : t0;
                    t1 = f == 0 ? inf : t1;
                }
            }
            return fminf(t0, t1);
        };
        auto group_min = [&](metric v) {
            for (int o = group / 2; o > 0; o >>= 1) v = fminf(v, __shfl_xor_sync(mask, v, o, group));
            return v;
        };
        auto known_block = [&](int b, auto&& body) {
            if (block_first(b) < n_known) {
                body(std::true_type{});
            } else {
                body(std::false_type{});
            }
        };
        auto last_entry = [&](int b) { return min(block_rows - 1, steps - 1 - block_first(b)); };
        metric* ck = checkpoint + static_cast<std::size_t>(s) * checkpoints * states;
        const int start = window_at(sh.bits, 0) >> 1;  // a_0 .. a_3
        metric a = g == start ? 0.0f : inf;
        ck[g] = a;
        load(0);
        for (int b = 0; b < checkpoints; ++b) {
            __syncwarp(mask);  // block b - 1's buffer is free
            if (b + 1 < checkpoints) load(b + 1);
            fill(b, b + 1 < checkpoints);
            // The residual over the bits the table is fitted on, from the samples just read: lane
            // g takes block entries g and g + 16.
            float2 res[2];
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int e = g + h * group;
                const int k = block_first(b) + e - after;
                res[h] = make_float2(0.0f, 0.0f);
                if (k < before || k + after >= n_bits) continue;
                const int seq = window_at(sh.bits, k - before);
                const int idx = dsp::trellis_math::pattern_index(seq), par = k & 1;
                const double sg = dsp::trellis_math::pattern_sign(seq);
                const float2 z = samples[e];
                const double ex = static_cast<double>(z.x) - sg * sh.u.table[par][idx][0];
                const double ey = static_cast<double>(z.y) - sg * sh.u.table[par][idx][1];
                se += ex * ex + ey * ey;
                res[h] = make_float2(static_cast<float>(ex), static_cast<float>(ey));
            }
            {
                const int from = (g + 1) & (group - 1);
                const float2 n0 = make_float2(__shfl_sync(mask, res[0].x, from, group), __shfl_sync(mask, res[0].y, from, group));
                const float2 n1 = make_float2(__shfl_sync(mask, res[1].x, from, group), __shfl_sync(mask, res[1].y, from, group));
                auto dot = [](float2 u, float2 v) { return u.x * v.x + u.y * v.y; };  // Re(u conj v)
                if (g + 1 < group) {
                    s1 += dot(res[0], n0) + dot(res[1], n1);
                } else {  // entry 15 with 16 (lane 0's second), the last block's 31 with this one's 0
                    s1 += dot(res[0], n1) + dot(r1_last, n0);
                    r1_last = res[1];
                }
            }
            known_block(b, [&](auto known_c) {
                const int last = last_entry(b);
                if (b > 0) {  // entry 0, row b * block_rows: shifted by its minimum, then kept
                    a = forward(odd{}, known_c, block_first(b), 0, a);
                    a -= group_min(a);
                    ck[b * states + g] = a;
                }
                // Unrolled, as the backward pass's steps are: each step's loads and correlations
                // depend on no metric, so they can be issued ahead of the steps before.
                static_for<1, block_rows>([&](auto e_c) {
                    constexpr int e = decltype(e_c)::value;
                    if (e <= last) a = forward(std::integral_constant<int, (e + 1) & 1>{}, known_c, block_first(b) + e, e, a);
                });
            });
        }
        double s1d = static_cast<double>(s1);
        for (int o = group / 2; o > 0; o >>= 1) {
            se += __shfl_xor_sync(mask, se, o, group);
            s1d += __shfl_xor_sync(mask, s1d, o, group);
        }
        const double sigma2 = se / (2.0 * static_cast<double>(n_bits - before - after));
        usable = complete && sigma2 > 0.0;
        // The path's calibration (trellis_math::llr_calibration, its law at the residual's
        // correlation a bit apart): streams are [packet][path].
        const double calibration = dsp::trellis_math::llr_calibration(sr % dsp::chain::num_paths).factor(se > 0.0 ? s1d / se : 0.0);
        const float llr_scale = usable ? static_cast<float>(calibration / (2.0 * sigma2)) : 0.0f;
        __syncwarp(mask);  // the table's memory becomes the path metrics'
        // Backward, a block of rows at a time from the last: the block's forward metrics again
        // from its checkpoint (the same steps, so the same values), kept in registers (the
        // entries are compile-time constants, every loop unrolled); then its backward steps,
        // each writing alpha_j + beta_j of state g to its row; then the block's LLRs, lane g
        // taking the rows g and g + 16: the best of the states whose newest bit is +1 (odd g)
        // against the best of those whose newest bit is -1. Per step and lane that is one
        // store and a quarter of a row's loads where a reduction over the sixteen lanes took
        // four shuffles.
        metric beta = 0.0f;  // of state g after step j
        load(checkpoints - 1);
        metric a_next = ck[(checkpoints - 1) * states + g];  // the checkpoint, also a block ahead
        for (int b = checkpoints - 1; b >= 0; --b) {
            const int last = last_entry(b), first = b == 0 ? 1 : 0;
            const metric a_blk = a_next;
            __syncwarp(mask);  // block b + 1's buffer is free
            if (b > 0) {
                load(b - 1);
                a_next = ck[(b - 1) * states + g];
            }
            fill(b, b > 0);
            known_block(b, [&](auto known_c) {
                metric al[block_rows];
                al[0] = a_blk;
                static_for<1, block_rows>([&](auto e_c) {
                    constexpr int e = decltype(e_c)::value;
                    if (e <= last) al[e] = forward(std::integral_constant<int, (e + 1) & 1>{}, known_c, block_first(b) + e, e, al[e - 1]);
                });
                beta -= group_min(beta);
                static_for<0, block_rows>([&](auto r_c) {
                    constexpr int e = block_rows - 1 - decltype(r_c)::value;
                    if (e <= last && e >= first) {
                        sh.u.path[e][g] = al[e] + beta;
                        beta = backward(std::integral_constant<int, (e + 1) & 1>{}, known_c, block_first(b) + e, e, beta);
                    }
                });
            });
            __syncwarp(mask);
            if (usable) {
#pragma unroll
                for (int e = g; e < block_rows; e += group) {
                    const int j = block_first(b) + e;
                    if (e >= first && e <= last && j < n_bits) {
                        const float4* row = reinterpret_cast<const float4*>(sh.u.path[e]);
                        metric lo = inf, hi = inf;  // the best -1 (even states) and +1 (odd states) paths
#pragma unroll
                        for (int c = 0; c < states / 4; ++c) {
                            const float4 q = row[c];
                            lo = fminf(lo, fminf(q.x, q.z));
                            hi = fminf(hi, fminf(q.y, q.w));
                        }
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
        stats[s].known_bit_errors = sxs_stats[sr].known_bit_errors;
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

/// dsp::cancel_far_interference between the two passes, for the streams of the paths that take
/// it (dsp::trellis_math::cancels_far_interference; streams are [packet][path]): a block per
/// stream. The first pass's bits (the known ones, then fit_bits) as +-1 in shared memory, and
/// each fitted bit's table entry and sign; the table fitted on them in double (sums by
/// shared-memory atomics, then means); per parity the normal equations of the far terms from
/// the decisions' autocorrelations (exact integers, dsp::trellis_math::far_gram_entry) and their
/// complex right-hand sides from the samples' residuals against the table, solved as the CPU
/// solves them (dsp::trellis_math::solve_far_system); then the fitted interference subtracted
/// from the samples in place, for the second pass to read. Every walk over the bits is the
/// whole block's, thread t taking bits t, t + far_threads, ... (all of its parity, so a thread
/// keeps its parity's sums in registers and the samples are read coalesced); the sums are then
/// added over a warp's lanes of one parity by shuffles and over the warps in a fixed order.
constexpr int far_threads = 256;
constexpr int far_warps = far_threads / 32;
constexpr int far_terms = dsp::trellis::far_terms;
constexpr int far_lags = dsp::trellis_math::far_lags;
static_assert(far_threads % 2 == 0 && before % 2 == 0, "a thread's bits k = before + t + j far_threads share a parity: t's");

/// Sums v over the lanes of each parity of a warp: lane 0 gets the even lanes', lane 1 the odd.
template <class T>
__device__ __forceinline__ T warp_sum_by_parity(T v)
{
    for (int off = 16; off >= 2; off /= 2) v += __shfl_down_sync(0xffffffffu, v, off);
    return v;
}

__global__ void __launch_bounds__(far_threads, 4) far_interference_kernel(float2* __restrict__ x, int streams,
                                                                       const unsigned char* __restrict__ fit_bits)
{
    const int s = static_cast<int>(blockIdx.x);
    if (s >= streams || !dsp::trellis_math::cancels_far_interference(s % static_cast<int>(dsp::chain::num_paths))) return;
    const int t = static_cast<int>(threadIdx.x), lane = t % 32, warp = t / 32;
    const int par = t & 1;  // the parity of every bit this thread takes
    __shared__ signed char a[n_bits];
    __shared__ signed char entry[n_bits];  // bit k's table entry, negated where its sign is -1
    __shared__ double sums[2][patterns][2];
    __shared__ int counts[2][patterns];
    __shared__ int autocorrelation_part[far_warps][2][far_lags];
    __shared__ int autocorrelation[2][far_lags];
    __shared__ double rhs_part[far_warps][2][far_terms][2];
    __shared__ double gram[2][far_terms][far_terms + 2];  // the system, then the two right-hand sides
    __shared__ double weight[2][far_terms][2];
    __shared__ int solved[2];
    float2* xs = x + static_cast<std::size_t>(s) * n_samples;
    const unsigned char* fit = fit_bits + static_cast<std::size_t>(s) * data_bytes;
    for (int k = t; k < n_bits; k += far_threads) {
        const int bit = k < n_known ? static_cast<int>((c_known_words[k >> 5] >> (31 - (k & 31))) & 1u)
                                    : (fit[(k - n_known) >> 3] >> (7 - ((k - n_known) & 7))) & 1;
        a[k] = static_cast<signed char>(bit != 0 ? 1 : -1);
    }
    for (int i = t; i < 2 * patterns; i += far_threads) {
        sums[i / patterns][i % patterns][0] = sums[i / patterns][i % patterns][1] = 0.0;
        counts[i / patterns][i % patterns] = 0;
    }
    __syncthreads();
    for (int k = before + t; k + after < n_bits; k += far_threads) {
        const int seq = dsp::trellis_math::window_of(a, k);
        const int idx = dsp::trellis_math::pattern_index(seq);
        const int sg = dsp::trellis_math::pattern_sign(seq);
        entry[k] = static_cast<signed char>(sg > 0 ? idx : ~idx);
        const float2 z = xs[k];
        atomicAdd(&sums[par][idx][0], sg * static_cast<double>(z.x));
        atomicAdd(&sums[par][idx][1], sg * static_cast<double>(z.y));
        atomicAdd(&counts[par][idx], 1);
    }
    // The decisions' autocorrelations per parity: m = t, t + far_threads, ... with m + lag < n_bits.
    {
        int own[far_lags] = {};
        for (int m = t; m < n_bits; m += far_threads) {
            const int am = a[m];
#pragma unroll
            for (int lag = 0; lag < far_lags; ++lag) own[lag] += m + lag < n_bits ? am * a[m + lag] : 0;
        }
#pragma unroll
        for (int lag = 0; lag < far_lags; ++lag) {
            const int v = warp_sum_by_parity(own[lag]);
            if (lane < 2) autocorrelation_part[warp][lane][lag] = v;
        }
    }
    __syncthreads();
    // A pattern never seen: no table (the CPU's model is not complete), the samples stay.
    if (__syncthreads_or(t < 2 * patterns && counts[t / patterns][t % patterns] == 0)) return;
    // The table: each entry its samples' mean; the autocorrelations: the warps' parts.
    if (t < 2 * patterns) {
        const int q = t / patterns, idx = t % patterns;
        sums[q][idx][0] /= counts[q][idx];
        sums[q][idx][1] /= counts[q][idx];
    } else if (t < 2 * patterns + 2 * far_lags) {
        const int q = (t - 2 * patterns) / far_lags, lag = (t - 2 * patterns) % far_lags;
        int v = 0;
        for (int w = 0; w < far_warps; ++w) v += autocorrelation_part[w][q][lag];
        autocorrelation[q][lag] = v;
    }
    __syncthreads();
    auto decision = [&](int j) { return j < 0 || j >= n_bits ? 0 : static_cast<int>(a[j]); };
    // The right-hand sides: sum over k of a[k + offset r] times the residual at bit k's instant
    // against the table.
    {
        double re[far_terms] = {}, im[far_terms] = {};
        for (int k = before + t; k + after < n_bits; k += far_threads) {
            const int e = entry[k];
            const double sg = e < 0 ? -1.0 : 1.0;
            const int idx = e < 0 ? ~e : e;
            const float2 z = xs[k];
            const double er = static_cast<double>(z.x) - sg * sums[par][idx][0];
            const double ei = static_cast<double>(z.y) - sg * sums[par][idx][1];
#pragma unroll
            for (int r = 0; r < far_terms; ++r) {
                const double f = static_cast<double>(decision(k + dsp::trellis_math::far_offset(r)));
                re[r] += f * er;
                im[r] += f * ei;
            }
        }
#pragma unroll
        for (int r = 0; r < far_terms; ++r) {
            const double vr = warp_sum_by_parity(re[r]), vi = warp_sum_by_parity(im[r]);
            if (lane < 2) {
                rhs_part[warp][lane][r][0] = vr;
                rhs_part[warp][lane][r][1] = vi;
            }
        }
    }
    __syncthreads();
    // The systems (an entry a thread) and the right-hand sides (the warps' parts in order).
    for (int w = t; w < 2 * far_terms * (far_terms + 1); w += far_threads) {
        const int q = w / (far_terms * (far_terms + 1)), i = w % (far_terms * (far_terms + 1));
        const int r = i / (far_terms + 1), c = i % (far_terms + 1);
        if (c < far_terms) {
            gram[q][r][c] = static_cast<double>(dsp::trellis_math::far_gram_entry(q, r, c, a, n_bits, &autocorrelation[0][0], far_lags));
        } else {
            double vr = 0.0, vi = 0.0;
            for (int wp = 0; wp < far_warps; ++wp) {
                vr += rhs_part[wp][q][r][0];
                vi += rhs_part[wp][q][r][1];
            }
            gram[q][r][far_terms] = vr;
            gram[q][r][far_terms + 1] = vi;
        }
    }
    __syncthreads();
    if (t < 2) solved[t] = dsp::trellis_math::solve_far_system(gram[t], weight[t]) ? 1 : 0;
    __syncthreads();
    if (!solved[par]) return;
    double wr[far_terms], wi[far_terms];
#pragma unroll
    for (int r = 0; r < far_terms; ++r) {
        wr[r] = weight[par][r][0];
        wi[r] = weight[par][r][1];
    }
    for (int k = t; k < n_bits; k += far_threads) {
        double re = 0.0, im = 0.0;
#pragma unroll
        for (int r = 0; r < far_terms; ++r) {
            const int f = decision(k + dsp::trellis_math::far_offset(r));
            re += f * wr[r];
            im += f * wi[r];
        }
        const float2 z = xs[k];
        xs[k] = make_float2(static_cast<float>(static_cast<double>(z.x) - re), static_cast<float>(static_cast<double>(z.y) - im));
    }
}

}  // namespace

stream_trellis::stream_trellis(std::size_t max_streams)
    : max_streams_(max_streams),
      x_((max_streams + 1) * n_samples),
      alpha_((max_streams + 1) * checkpoints * states),
      llr_((max_streams + 1) * n_bits),
      bits_((max_streams + 1) * data_bytes),
      first_bits_((max_streams + 1) * data_bytes),
      stats_(max_streams + 1)
{
    // The last slot is only ever a stand-in's (an odd stream count, trellis_kernel): defined.
    PAQ_CUDA_CHECK(cudaMemset(x_.data() + max_streams * n_samples, 0, n_samples * sizeof(float2)));
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
    // Two streams a warp: with an odd count the last warp's second half runs the stand-in.
    // dsp::trellis::passes passes, each fitted on the bits of the one before (the first on the
    // symbol-by-symbol detector's), the last one's bits into bits_.
    static_assert(dsp::trellis::passes >= 1 && dsp::trellis::passes <= 2, "two bit buffers: the first pass's and the last's");
    const unsigned blocks = static_cast<unsigned>((streams + streams_per_block - 1) / streams_per_block);
    const std::uint8_t* fit_on = sxs_bits;
    for (int pass = 0; pass < dsp::trellis::passes; ++pass) {
        std::uint8_t* out = pass + 1 < dsp::trellis::passes ? first_bits_.data() : bits_.data();
        if (pass > 0 && pass + 1 == dsp::trellis::passes) {
            // Before the last pass: the far interference out of the samples of the paths that take it.
            far_interference_kernel<<<static_cast<unsigned>(streams), far_threads, 0, s>>>(x_.data(), static_cast<int>(streams), fit_on);
            PAQ_CUDA_CHECK_LAUNCH();
        }
        trellis_kernel<<<blocks, 32 * warps, 0, s>>>(x_.data(), static_cast<int>(streams), fit_on, sxs_stats, out, stats_.data(),
                                                    alpha_.data(), llr_.data());
        PAQ_CUDA_CHECK_LAUNCH();
        fit_on = out;
    }
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
