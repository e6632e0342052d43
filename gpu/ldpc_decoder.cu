#include "gpu/ldpc_decoder.hpp"

#include "gpu/resources.cuh"

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <bit>
#include <limits>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace paq::gpu {

namespace {

/// A block's threads: one per check of a layer (dsp/ldpc.hpp, layer_checks: M / 4, 32 .. 512).
constexpr int max_threads_per_block = 512;
constexpr float llr_limit = 30.0f;  // as the CPU decoder's
/// The most edges a check has (ar4ja-*-4/5).
constexpr int max_row_degree = 18;
/// The edges of every check of the AR4JA codes' first four layers (H's first block row,
/// dsp/ldpc.cpp); the other layers' checks all have the code's largest number.
constexpr unsigned low_degree = 3;

/// Two codewords a block, one in each half of every binary16 pair (lane 0 the low half, lane 1
/// the high half): a check's state is its two smallest scaled magnitudes (two pairs) and a word
/// or two of signs and the place of the smallest. Word 0 holds, in each lane's 16 bits, the
/// signs of edges 0 .. 9 in bits 0 .. 9 and the place in bits 10 .. 14 (a binary16's exponent
/// field, so that a place compared by XOR is a binary16 zero exactly where it matches); word 1
/// the signs of edges 10 .. 17 in bits 0 .. 7.
constexpr unsigned signs_in_word0 = 10;
constexpr unsigned place_shift = 10;
constexpr std::uint32_t place_bits = 0x7c007c00u;
__host__ __device__ constexpr int state_words(int d) { return d <= static_cast<int>(signs_in_word0) ? 1 : 2; }

/// The layers whose checks keep their state in their thread's registers: the first four, whose
/// checks have low_degree edges (one word each). A block's threads are a layer's checks, so a
/// thread holds one check of each: 12 registers in place of 12 bytes of shared memory a check,
/// which takes a third of the checks' state out of shared memory (ar4ja-4096-2/3: 65,536 ->
/// 53,248 bytes a block, four blocks an SM in place of three).
constexpr int register_layers = 4;

/// The shared memory a block takes: the two codewords' bits' beliefs as binary16 pairs (first,
/// so that a bit's place in bytes is its address), then the magnitudes (two pairs) and words of
/// each check past the register layers.
__host__ __device__ constexpr std::size_t block_smem_bytes(int n_full, int rows, int layer, int d)
{
    const auto shared_rows = static_cast<std::size_t>(rows - register_layers * layer);
    return static_cast<std::size_t>(n_full) * 4u + shared_rows * 8u + shared_rows * 4u * static_cast<std::size_t>(state_words(d));
}

/// Layers a code splits into (dsp/ldpc.hpp, layer_checks: every AR4JA code has 12).
constexpr int max_layers = 12;

/// The code's checks as the kernel reads them. Every AR4JA block is a sum of permutations
/// that map a quarter of the block's rows onto a quarter of its columns by a cyclic shift, so
/// within a layer (Q = M / 4 consecutive checks, Q a power of two) edge j of check first + t
/// is bit base_j + ((shift_j + t) mod Q), base_j a multiple of Q: a table of a word an edge
/// of a layer's first check (kernel parameters, read through the constant cache) in place of
/// every edge's column read from device memory. The constructor derives it from the matrix
/// and checks every check against it. The order of a check's edges does not change a message:
/// a tie for the smallest magnitude makes both magnitudes equal, and each edge updates a bit
/// of its own.
/// The register layers' checks have low_degree edges, the others the code's largest number
/// (the constructor checks it).
struct layer_graph {
    std::uint32_t edge[max_layers][max_row_degree];  ///< 4 (base_j + shift_j): the bit's byte in the beliefs for t = 0
    std::uint32_t q_mask;                            ///< 4 (Q - 1)
};

/// The byte of edge j's bit in the beliefs for check t of layer l (tb = 4 t): the row's offset
/// wraps within its Q-bit block, whose first bit's byte is above the mask's bits.
__device__ __forceinline__ unsigned edge_byte(const layer_graph& g, int l, unsigned j, unsigned tb)
{
    const std::uint32_t e = g.edge[l][j];
    return ((e + tb) & g.q_mask) | (e & ~g.q_mask);
}

__device__ __forceinline__ __half2 as_h2(std::uint32_t u)
{
    __half2 h;
    memcpy(&h, &u, sizeof h);
    return h;
}
__device__ __forceinline__ std::uint32_t as_u32(__half2 h)
{
    std::uint32_t u;
    memcpy(&u, &h, sizeof u);
    return u;
}

/// Per lane (bit 0: lane 0, bit 1: lane 1), the checks' syndromes over the bits' beliefs: a
/// check fails where its bits' signs do not satisfy it or one is undecided (belief 0), as the
/// CPU's. No belief is -0 (a channel zero is +0, and no difference or sum of the decoder's
/// makes one), so a sign bit is a belief below 0.
struct pair_syndrome {
    std::uint32_t parity = 0, undecided = 0;
    __device__ __forceinline__ void add(std::uint32_t b)
    {
        parity ^= b;
        undecided |= __heq2_mask(as_h2(b), __float2half2_rn(0.0f));
    }
    [[nodiscard]] __device__ __forceinline__ unsigned fails() const
    {
        return ((parity >> 15) & 1u) | ((undecided) & 1u) | ((parity >> 30) & 2u) | ((undecided >> 15) & 2u);
    }
};

template <unsigned E>
using edges_t = std::integral_constant<unsigned, E>;

/// The decoder's inputs and outputs, a launch's.
struct decode_args {
    const float* llr;            ///< frames x n, the detectors' sign
    std::uint8_t* info;          ///< or null: frames x k bits, one a byte
    int* iterations;             ///< or null: a frame's
    int* failed_checks;          ///< or null: a frame's
    const int* active_packets;   ///< or null: every frame decoded
    int frames_per_packet;
    std::uint8_t* info_packed;   ///< or null: frames x k / 8 bytes, MSB first
    dsp::codeword_result* results;  ///< or null
    int* next_frame;             ///< the frames handed out so far: 0 at the launch
    int frames;
    int n, n_full, k, rows, layer, max_iterations;
    float alpha;
};

/// Layered normalized min-sum, the CPU's binary16 arithmetic (dsp::ldpc::decoder, number_format
/// binary16) on two codewords at once, one in each half of the binary16 pairs. Each block takes
/// codewords from a counter as its lanes finish theirs (a lane's codeword stops when its
/// decisions satisfy every check or after max_iterations), so a codeword that takes 50
/// iterations holds one lane, not a block or the launch's end. A block's checks are updated
/// a layer at a time in the CPU's order (the checks of a layer share no bit); a block's threads
/// are a layer's checks (thread t: check t of each layer). D: the most edges a check of the code
/// has; a layer's checks take the loops of their own number (low_degree or D), unrolled, so
/// that a check's bits and messages stay in registers between reading the beliefs and writing
/// them. At most 64 registers a thread, so that the register layers' state does not cost
/// blocks an SM.
template <int D>
__global__ void __launch_bounds__(max_threads_per_block, 2) min_sum_pairs(const decode_args a, const __grid_constant__ layer_graph g)
{
    constexpr int W = state_words(D);
    extern __shared__ __half2 Lh[];
    char* const Lb = reinterpret_cast<char*>(Lh);
    const int shared_rows = a.rows - register_layers * a.layer;
    uint2* const mm = reinterpret_cast<uint2*>(Lh + a.n_full);                      // per check past the register layers: min1 pair, min2 pair
    std::uint32_t* const ws = reinterpret_cast<std::uint32_t*>(mm + shared_rows);   // and its W words
    uint2 rm[register_layers];             // the register layers' checks of this thread: magnitudes
    std::uint32_t rw[register_layers];     // and word
#pragma unroll
    for (int l = 0; l < register_layers; ++l) {
        rm[l] = make_uint2(0u, 0u);
        rw[l] = 0u;
    }
    __shared__ int frame[2];                // per lane: its frame (-1: none left)
    __shared__ int counted[2];              // finish's sums: failed checks, channel errors
    const int t = static_cast<int>(threadIdx.x), threads = static_cast<int>(blockDim.x);
    const int layers = a.rows / a.layer;
    int iteration[2] = {0, 0};  // per lane: its frame's iterations so far (the same in every thread)
    const long long active = a.active_packets != nullptr ? static_cast<long long>(*a.active_packets) * a.frames_per_packet : a.frames;
    const int total = active < a.frames ? static_cast<int>(active) : a.frames;
    // The frames of packets past the count (a batch's unused slots): nothing decoded, results 0.
    if (a.results != nullptr) {
        for (int f = total + static_cast<int>(blockIdx.x) * threads + t; f < a.frames; f += static_cast<int>(gridDim.x) * threads) {
            a.results[f] = dsp::codeword_result{};
        }
    }
    const auto belief = [&](unsigned byte) -> std::uint32_t& { return *reinterpret_cast<std::uint32_t*>(Lb + byte); };
    const __half2 alpha = __float2half2_rn(a.alpha), limit = __float2half2_rn(llr_limit), belief_limit = __float2half2_rn(4.0f * llr_limit);
    // Edge j's message of a check with magnitudes m and words w0, w1: min2 where j is the
    // place, else min1, its sign bit set where the edge's is; both lanes at once.
    const auto message = [](uint2 m, std::uint32_t w0, std::uint32_t w1, unsigned j) {
        const std::uint32_t jj = (j << place_shift) * 0x00010001u;
        const std::uint32_t at = __heq2_mask(as_h2((w0 ^ jj) & place_bits), __float2half2_rn(0.0f));
        const std::uint32_t mag = (m.y & at) | (m.x & ~at);
        const std::uint32_t sign = j < signs_in_word0 ? w0 << (15u - j) : w1 << (15u - (j - signs_in_word0));
        return mag ^ (sign & 0x80008000u);
    };
    // Calls fn(r, l, 4 t, edges_t<E>) for each of this thread's checks r = first + t of layer l.
    const auto each_check = [&](int l, auto&& fn) {
        const int first = l * a.layer;
        for (int r = first + t; r < first + a.layer; r += threads) {
            const unsigned tb = 4u * static_cast<unsigned>(r - first);
            if (l < register_layers) {
                fn(r, l, tb, edges_t<low_degree>{});
            } else {
                fn(r, l, tb, edges_t<D>{});
            }
        }
    };
    // The lanes' syndromes of check r (layer l, 4 t) over the beliefs.
    const auto fails = [&](int, int l, unsigned tb, auto edges) {
        pair_syndrome s;
#pragma unroll
        for (unsigned j = 0; j < decltype(edges)::value; ++j) s.add(belief(edge_byte(g, l, j, tb)));
        return s.fails();
    };
    // A check (edges E, 4 t within layer l, state m, w0, w1) updated on both lanes; with `Last`
    // (the last layer: no later check of the iteration writes its bits) also the lanes'
    // syndromes of the beliefs it leaves, which are then the iteration's.
    const auto update = [&](int l, unsigned tb, auto edges, auto last, uint2& m, std::uint32_t& w0, std::uint32_t& w1) {
        constexpr unsigned E = decltype(edges)::value;
        // The bits' messages to this check (their beliefs without its last message): the two
        // smallest magnitudes and the place of the first of the smallest (a below min1 pushes
        // min1 down to second place, otherwise a competes for second place; ties as the
        // CPU's), and their signs.
        __half2 min1 = as_h2(0x7c007c00u), min2 = min1;  // +inf
        std::uint32_t place = 0, neg0 = 0, neg1 = 0;
        std::uint32_t q[E], v[E];
#pragma unroll
        for (unsigned j = 0; j < E; ++j) {
            v[j] = edge_byte(g, l, j, tb);
            q[j] = as_u32(__hsub2_rn(as_h2(belief(v[j])), as_h2(message(m, w0, w1, j))));
            if (j < signs_in_word0) {
                neg0 |= (q[j] >> (15u - j)) & (0x00010001u << j);
            } else {
                neg1 |= (q[j] >> (15u - (j - signs_in_word0))) & (0x00010001u << (j - signs_in_word0));
            }
            const __half2 mag = as_h2(q[j] & 0x7fff7fffu);
            const std::uint32_t below = __hlt2_mask(mag, min1);
            place = (((j << place_shift) * 0x00010001u) & below) | (place & ~below);
            min2 = __hmin2(min2, __hmax2(mag, min1));
            min1 = __hmin2(min1, mag);
        }
        // Edge j's message is negative when the others' signs multiply to -1: all the signs'
        // product times its own. Each bit's belief takes it at once (the same q: no other check
        // of the layer holds the bit).
        constexpr std::uint32_t used0 = ((1u << (E < signs_in_word0 ? E : signs_in_word0)) - 1u) * 0x00010001u;
        constexpr std::uint32_t used1 = E > signs_in_word0 ? ((1u << (E - signs_in_word0)) - 1u) * 0x00010001u : 0u;
        const unsigned odd0 = (__popc(neg0 & 0xffffu) + __popc(neg1 & 0xffffu)) & 1u;
        const unsigned odd1 = (__popc(neg0 >> 16) + __popc(neg1 >> 16)) & 1u;
        const std::uint32_t flip = (odd0 ? 0x0000ffffu : 0u) | (odd1 ? 0xffff0000u : 0u);
        const std::uint32_t n0 = (neg0 ^ (flip & used0)) | place, n1 = neg1 ^ (flip & used1);
        uint2 now;
        now.x = as_u32(__hmin2(__hmul2_rn(alpha, min1), limit));
        now.y = as_u32(__hmin2(__hmul2_rn(alpha, min2), limit));
        pair_syndrome s;
#pragma unroll
        for (unsigned j = 0; j < E; ++j) {
            const __half2 b = __hmax2(__hmin2(__hadd2_rn(as_h2(q[j]), as_h2(message(now, n0, n1, j))), belief_limit), __hneg2(belief_limit));
            belief(v[j]) = as_u32(b);
            if constexpr (decltype(last)::value) s.add(as_u32(b));
        }
        m = now;
        w0 = n0;
        w1 = n1;
        return s.fails();
    };
    // Thread t's check of layer l (past the register layers, D edges) updated, its state in
    // shared memory.
    const auto update_shared = [&](int l, auto last) {
        const int r = l * a.layer + t - register_layers * a.layer;
        uint2 m = mm[r];
        std::uint32_t w0 = ws[r * W], w1 = W > 1 ? ws[r * W + W - 1] : 0u;
        const unsigned fail = update(l, 4u * static_cast<unsigned>(t), edges_t<D>{}, last, m, w0, w1);
        mm[r] = m;
        ws[r * W] = w0;
        if constexpr (W > 1) ws[r * W + W - 1] = w1;
        return fail;
    };
    // Lane `lane`'s codeword done: its results, from the beliefs, after iteration[lane]
    // (converged: every check satisfied; otherwise its failed checks counted).
    const auto finish = [&](int lane, bool converged) {
        const int f = frame[lane];
        if (t == 0) counted[0] = counted[1] = 0;
        __syncthreads();
        int mine = 0;
        for (int l = 0; !converged && l < layers; ++l) {
            each_check(l, [&](auto... x) { mine += static_cast<int>(fails(x...) >> lane) & 1; });
        }
        const float* ch = a.llr + static_cast<std::size_t>(f) * static_cast<std::size_t>(a.n);
        const unsigned sign = lane == 0 ? 0x8000u : 0x80000000u;
        int diff = 0;
        if (a.results != nullptr) {
            // The received hard decisions (an LLR above 0: 1, as the CPU's) against the decoded word.
            for (int v = t; v < a.n; v += threads) diff += (ch[v] > 0.0f) != ((as_u32(Lh[v]) & sign) != 0u) ? 1 : 0;
        }
        if (mine) atomicAdd(&counted[0], mine);
        if (diff) atomicAdd(&counted[1], diff);
        if (a.info != nullptr) {
            for (int i = t; i < a.k; i += threads) a.info[static_cast<std::size_t>(f) * a.k + i] = (as_u32(Lh[i]) & sign) != 0u ? 1 : 0;
        }
        if (a.info_packed != nullptr) {  // k is a multiple of 8: MSB first, k / 8 bytes a frame
            for (int b = t; b < a.k / 8; b += threads) {
                unsigned byte = 0;
                for (int j = 0; j < 8; ++j) byte |= ((as_u32(Lh[8 * b + j]) & sign) != 0u ? 0x80u : 0u) >> j;
                a.info_packed[static_cast<std::size_t>(f) * (a.k / 8) + static_cast<std::size_t>(b)] = static_cast<std::uint8_t>(byte);
            }
        }
        __syncthreads();
        if (t == 0) {
            const int it = iteration[lane], failed = counted[0];
            if (a.iterations != nullptr) a.iterations[f] = it;
            if (a.failed_checks != nullptr) a.failed_checks[f] = failed;
            if (a.results != nullptr) {
                dsp::codeword_result r;
                r.iterations = static_cast<std::uint8_t>(min(it, 255));
                r.converged = failed == 0 ? 1 : 0;
                r.channel_errors = static_cast<std::uint16_t>(min(counted[1], 65535));
                a.results[f] = r;
            }
        }
        __syncthreads();
    };
    // Lane `lane` given the next codeword (frame -1 where none is left): its channel beliefs
    // (the detectors' sign turned, positive: 0; limited; a NaN, a zero or a punctured bit +0)
    // and its checks' state 0. A codeword of erasures only is not iterated (as the CPU's): it
    // fails every check after 0 iterations; the lane takes the next.
    const auto refill = [&](int lane) {
        for (;;) {
            if (t == 0) {
                const int f = atomicAdd(a.next_frame, 1);
                frame[lane] = f < total ? f : -1;
            }
            __syncthreads();
            iteration[lane] = 0;
            const int f = frame[lane];
            if (f < 0) return;
            const float* ch = a.llr + static_cast<std::size_t>(f) * static_cast<std::size_t>(a.n);
            __half* const lh = reinterpret_cast<__half*>(Lh) + lane;
            int any = 0;
            for (int v = t; v < a.n_full; v += threads) {
                float l = v < a.n ? ch[v] : 0.0f;
                l = isnan(l) ? 0.0f : fminf(fmaxf(-l, -llr_limit), llr_limit);
                const __half h = __float2half_rn(l);
                const bool zero = (__half_as_ushort(h) & 0x7fffu) == 0u;
                lh[2 * v] = zero ? __ushort_as_half(0) : h;
                any |= zero ? 0 : 1;
            }
            const std::uint32_t keep = lane == 0 ? 0xffff0000u : 0x0000ffffu;
#pragma unroll
            for (int l = 0; l < register_layers; ++l) {
                rm[l].x &= keep;
                rm[l].y &= keep;
                rw[l] &= keep;
            }
            for (int r = t; r < shared_rows; r += threads) {
                mm[r].x &= keep;
                mm[r].y &= keep;
                for (int w = 0; w < W; ++w) ws[r * W + w] &= keep;
            }
            if (__syncthreads_or(any) != 0) return;
            finish(lane, false);
        }
    };
    refill(0);
    refill(1);
    while (frame[0] >= 0 || frame[1] >= 0) {
        ++iteration[0];
        ++iteration[1];
#pragma unroll
        for (int l = 0; l < register_layers; ++l) {
            std::uint32_t unused = 0;
            update(l, 4u * static_cast<unsigned>(t), edges_t<low_degree>{}, std::false_type{}, rm[l], rw[l], unused);
            __syncthreads();
        }
        for (int l = register_layers; l + 1 < layers; ++l) {
            update_shared(l, std::false_type{});
            __syncthreads();
        }
        // The last layer, whose checks' syndromes are known as they are updated: a lane where
        // one fails has not converged, and the pass over the other checks is made only where a
        // lane's last layer holds (the same decision as the CPU's syndrome over every check).
        const unsigned bad = update_shared(layers - 1, std::true_type{});
        unsigned fail = (__syncthreads_or(static_cast<int>(bad & 1u)) != 0 ? 1u : 0u) | (__syncthreads_or(static_cast<int>(bad & 2u)) != 0 ? 2u : 0u);
        // A lane without a codeword (none left) needs no syndrome.
        fail |= (frame[0] < 0 ? 1u : 0u) | (frame[1] < 0 ? 2u : 0u);
        // The pass takes the register layers first: their checks (three edges, two of them
        // punctured bits) are where decisions that satisfy the last layer nearly always still
        // fail, and once every lane has failed the other layers need not be read.
        const auto any_fails = [&](int from, int to) {
            unsigned more = 0;
            for (int l = from; l < to; ++l) {
                each_check(l, [&](auto... x) { more |= fails(x...); });
            }
            return (__syncthreads_or(static_cast<int>(more & 1u)) != 0 ? 1u : 0u) | (__syncthreads_or(static_cast<int>(more & 2u)) != 0 ? 2u : 0u);
        };
        if (fail != 3u) fail |= any_fails(0, register_layers);
        if (fail != 3u) fail |= any_fails(register_layers, layers - 1);
        for (int lane = 0; lane < 2; ++lane) {
            if (frame[lane] < 0) continue;
            const bool converged = ((fail >> lane) & 1u) == 0u;
            if (!converged && iteration[lane] < a.max_iterations) continue;
            finish(lane, converged);
            refill(lane);
        }
    }
}

/// The code's layer_graph, each layer's table taken from its first check and every check of the
/// layer compared with it (as sets: the matrix's order of a check's edges is not kept); d: the
/// kernel's largest check, which every layer's checks have past the register layers, whose
/// checks have low_degree.
layer_graph layered_graph(const dsp::ldpc::parity_check& h, int q, unsigned d)
{
    const auto rows = static_cast<int>(h.rows.size());
    layer_graph g{};
    if (q < 1 || (q & (q - 1)) != 0 || rows / q > max_layers || rows / q <= register_layers) {
        throw std::logic_error("GPU LDPC decoder: " + std::to_string(rows / q) + " layers of " + std::to_string(q) + " checks (" +
                               std::to_string(register_layers + 1) + " .. " + std::to_string(max_layers) + ", a power of two)");
    }
    const auto uq = static_cast<unsigned>(q);
    g.q_mask = 4u * (uq - 1u);
    std::vector<unsigned> have, want;
    for (int l = 0; l < rows / q; ++l) {
        const auto& first = h.rows[static_cast<std::size_t>(l * q)];
        const unsigned want_edges = l < register_layers ? low_degree : d;
        if (first.size() != want_edges) {
            throw std::logic_error("GPU LDPC decoder: layer " + std::to_string(l) + "'s checks have " + std::to_string(first.size()) +
                                   " edges (the kernel's take " + std::to_string(want_edges) + ")");
        }
        for (std::size_t j = 0; j < first.size(); ++j) g.edge[l][j] = 4u * first[j];
        for (unsigned t = 0; t < uq; ++t) {
            const auto& row = h.rows[static_cast<std::size_t>(l * q) + t];
            have.assign(row.begin(), row.end());
            want.clear();
            for (std::size_t j = 0; j < first.size(); ++j) {
                const unsigned e = g.edge[l][j], byte = ((e + 4u * t) & g.q_mask) | (e & ~g.q_mask);
                want.push_back(byte / 4u);
            }
            std::sort(have.begin(), have.end());
            std::sort(want.begin(), want.end());
            if (have != want) {
                throw std::logic_error("GPU LDPC decoder: check " + std::to_string(l * q + static_cast<int>(t)) +
                                       " is not its layer's first shifted cyclically");
            }
        }
    }
    return g;
}

using decode_kernel = decltype(&min_sum_pairs<6>);

/// The kernel for a code whose largest checks have `edges` edges: the AR4JA codes' have 6
/// (rate 1/2), 10 (2/3) and 18 (4/5).
decode_kernel kernel_for(std::size_t edges)
{
    switch (edges) {
    case 6: return &min_sum_pairs<6>;
    case 10: return &min_sum_pairs<10>;
    case 18: return &min_sum_pairs<18>;
    default: throw std::invalid_argument("GPU LDPC decoder: no kernel for checks of " + std::to_string(edges) + " edges (6, 10 or 18)");
    }
}

}  // namespace

struct ldpc_decoder::impl {
    explicit impl(int dev) : device(select_device(dev)) {}
    int device;  ///< made current first: every member after it is allocated there
    dsp::ldpc::code_params p;
    dsp::ldpc::decoder_config cfg;
    std::size_t smem = 0;  ///< dynamic shared memory a block takes
    int layer = 0;         ///< checks a layer (dsp::ldpc::layer_checks)
    int threads = 0;       ///< a block's
    int resident = 0;      ///< blocks the device holds at once
    layer_graph graph{};
    decode_kernel kernel = nullptr;  ///< min_sum_pairs for the code's largest check
    device_buffer<int> next_frame{1};
    device_buffer<float> llr;
    device_buffer<std::uint8_t> info;
    device_buffer<int> iterations, failed;
    std::size_t capacity = 0;  ///< frames the host API's buffers hold
    stream st;

    /// Every frame of `frames` decoded in one launch on `s` (the kernel's outputs, each
    /// optional): as many blocks as the device holds at once (two frames each to begin with),
    /// each taking frames from the counter until none is left.
    void launch(const float* llrs, std::size_t frames, std::uint8_t* info_bits, int* its, int* failed_checks,
                const int* active_packets, int frames_per_packet, std::uint8_t* info_packed, dsp::codeword_result* results,
                cudaStream_t s)
    {
        if (frames > static_cast<std::size_t>(std::numeric_limits<int>::max() / 2)) {
            throw std::invalid_argument("GPU LDPC decode: " + std::to_string(frames) + " frames in one call");
        }
        decode_args a{};
        a.llr = llrs;
        a.info = info_bits;
        a.iterations = its;
        a.failed_checks = failed_checks;
        a.active_packets = active_packets;
        a.frames_per_packet = frames_per_packet;
        a.info_packed = info_packed;
        a.results = results;
        a.next_frame = next_frame.data();
        a.frames = static_cast<int>(frames);
        a.n = p.n;
        a.n_full = p.n_full;
        a.k = p.k;
        a.rows = p.checks;
        a.layer = layer;
        a.max_iterations = cfg.max_iterations;
        a.alpha = cfg.normalization;
        const std::size_t blocks = std::min((frames + 1) / 2, static_cast<std::size_t>(resident));
        PAQ_CUDA_CHECK(cudaMemsetAsync(next_frame.data(), 0, sizeof(int), s));
        kernel<<<static_cast<unsigned>(blocks), static_cast<unsigned>(threads), smem, s>>>(a, graph);
        PAQ_CUDA_CHECK(cudaGetLastError());
    }

    void reserve(std::size_t frames)
    {
        if (frames <= capacity) return;
        llr = device_buffer<float>(frames * static_cast<std::size_t>(p.n));
        info = device_buffer<std::uint8_t>(frames * static_cast<std::size_t>(p.k));
        iterations = device_buffer<int>(frames);
        failed = device_buffer<int>(frames);
        capacity = frames;
    }
};

ldpc_decoder::ldpc_decoder(dsp::ldpc::code c, dsp::ldpc::decoder_config cfg, int device)
{
    if (cfg.kind != dsp::ldpc::decoder_kind::min_sum) {
        throw std::invalid_argument("GPU LDPC decoder: only min-sum (sum-product is the CPU's reference)");
    }
    if (cfg.format != dsp::ldpc::number_format::binary16) {
        throw std::invalid_argument("GPU LDPC decoder: binary16 only (binary64 is the CPU's precision yardstick)");
    }
    if (cfg.max_iterations < 1 || cfg.max_iterations > 1000 || !(cfg.normalization > 0.0f && cfg.normalization <= 1.0f)) {
        throw std::invalid_argument("GPU LDPC decoder: max_iterations 1 .. 1000 and 0 < normalization <= 1");
    }
    impl_ = std::make_unique<impl>(device);
    const auto& h = dsp::ldpc::parity_check_matrix(c);
    impl_->p = h.p;
    impl_->cfg = cfg;
    // The kernel holds bit indices in 16 bits (layer_graph).
    const std::size_t rows = h.rows.size(), n_full = static_cast<std::size_t>(h.p.n_full);
    if (n_full > 65535) throw std::invalid_argument("GPU LDPC decoder: more than 65535 bits in a codeword");
    std::size_t max_row = 0;
    for (const auto& row : h.rows) max_row = std::max(max_row, row.size());
    if (max_row > static_cast<std::size_t>(max_row_degree)) {
        throw std::invalid_argument("GPU LDPC decoder: a check of more than " + std::to_string(max_row_degree) + " bits");
    }
    // The layers (dsp/ldpc.hpp): the kernel updates a layer's checks at once, which is the CPU's
    // schedule only where they share no bit.
    const int layer = dsp::ldpc::layer_checks(h.p);
    if (layer < 1 || rows % static_cast<std::size_t>(layer) != 0) throw std::logic_error("GPU LDPC decoder: the checks do not split into layers");
    if (h.bits_shared_within(layer) != 0) throw std::logic_error("GPU LDPC decoder: two checks of a layer share a bit");
    impl_->layer = layer;
    if (layer > max_threads_per_block) throw std::logic_error("GPU LDPC decoder: layers of more than 512 checks");
    impl_->threads = layer;
    impl_->graph = layered_graph(h, layer, static_cast<unsigned>(max_row));
    impl_->kernel = kernel_for(max_row);
    impl_->smem = block_smem_bytes(h.p.n_full, h.p.checks, layer, static_cast<int>(max_row));
    PAQ_CUDA_CHECK(cudaFuncSetAttribute(impl_->kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(impl_->smem)));
    int per_sm = 0, sms = 0;
    PAQ_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, impl_->kernel, impl_->threads, impl_->smem));
    PAQ_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, impl_->device));
    if (per_sm < 1) throw std::runtime_error("GPU LDPC decoder: a block of " + std::to_string(impl_->smem) + " bytes of shared memory does not fit");
    impl_->resident = per_sm * sms;
}

ldpc_decoder::~ldpc_decoder() = default;

const dsp::ldpc::code_params& ldpc_decoder::params() const noexcept { return impl_->p; }

void ldpc_decoder::decode(std::span<const float> llrs, std::size_t frames, std::span<std::uint8_t> info,
                          std::span<dsp::ldpc::decode_result> results)
{
    auto& m = *impl_;
    const auto n = static_cast<std::size_t>(m.p.n), k = static_cast<std::size_t>(m.p.k);
    if (llrs.size() != frames * n || info.size() != frames * k || results.size() != frames) {
        throw std::invalid_argument("GPU LDPC decode: " + std::to_string(llrs.size()) + " LLRs, " + std::to_string(info.size()) +
                                    " information bits and " + std::to_string(results.size()) + " results for " +
                                    std::to_string(frames) + " frames of n " + std::to_string(n) + ", k " + std::to_string(k));
    }
    if (frames == 0) return;
    PAQ_CUDA_CHECK(cudaSetDevice(m.device));
    m.reserve(frames);
    PAQ_CUDA_CHECK(cudaMemcpyAsync(m.llr.data(), llrs.data(), llrs.size_bytes(), cudaMemcpyHostToDevice, m.st.get()));
    m.launch(m.llr.data(), frames, m.info.data(), m.iterations.data(), m.failed.data(), nullptr, 1, nullptr, nullptr, m.st.get());
    std::vector<int> its(frames), failed(frames);
    PAQ_CUDA_CHECK(cudaMemcpyAsync(info.data(), m.info.data(), info.size_bytes(), cudaMemcpyDeviceToHost, m.st.get()));
    PAQ_CUDA_CHECK(cudaMemcpyAsync(its.data(), m.iterations.data(), frames * sizeof(int), cudaMemcpyDeviceToHost, m.st.get()));
    PAQ_CUDA_CHECK(cudaMemcpyAsync(failed.data(), m.failed.data(), frames * sizeof(int), cudaMemcpyDeviceToHost, m.st.get()));
    PAQ_CUDA_CHECK(cudaStreamSynchronize(m.st.get()));
    for (std::size_t f = 0; f < frames; ++f) {
        results[f].iterations = its[f];
        results[f].failed_checks = static_cast<std::size_t>(failed[f]);
        results[f].converged = failed[f] == 0;
    }
}

void ldpc_decoder::decode_device(const float* llrs, std::size_t frames, const int* active_packets, int frames_per_packet,
                                 std::uint8_t* info_packed, dsp::codeword_result* results, cuda_stream_t s)
{
    auto& m = *impl_;
    if (m.p.k % 8 != 0 || frames_per_packet < 1) throw std::invalid_argument("GPU LDPC decode: k a multiple of 8, frames per packet >= 1");
    if (frames == 0) return;
    m.launch(llrs, frames, nullptr, nullptr, nullptr, active_packets, frames_per_packet, info_packed, results, s);
}

}  // namespace paq::gpu
