#include "gpu/ldpc_decoder.hpp"

#include "gpu/resources.cuh"

#include <cuda_runtime.h>

#include <algorithm>
#include <bit>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace paq::gpu {

namespace {

/// A frame's block: a thread per check of a layer (dsp/ldpc.hpp, layer_checks: M / 4, 32 ..
/// 512), at most this many.
constexpr int max_threads_per_frame = 512;
constexpr float llr_limit = 30.0f;  // as the CPU decoder's
/// A check's signs and the place of its smallest magnitude share a word: the signs in bits
/// 0 .. 17 (rows have at most 18 edges, ar4ja-*-4/5), the place from bit 24.
constexpr int max_row_degree = 18;
constexpr int place_shift = 24;
/// The edges of every check of the AR4JA codes' first four layers (the punctured bits' block
/// row, dsp/ldpc.cpp); the other layers' checks all have the code's largest number.
constexpr unsigned low_degree = 3;

/// The shared memory a frame takes: its bits' beliefs (first, so that a bit's place in bytes
/// is its address), each check's two smallest scaled magnitudes (a float2), and each check's
/// signs and place of the smallest (a word).
__host__ __device__ constexpr std::size_t frame_smem_bytes(int n_full, int rows)
{
    return static_cast<std::size_t>(n_full) * sizeof(float) + static_cast<std::size_t>(rows) * sizeof(float2) +
           static_cast<std::size_t>(rows) * sizeof(std::uint32_t);
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
struct layer_graph {
    std::uint32_t edge[max_layers][max_row_degree];  ///< 4 (base_j + shift_j): the bit's byte in the beliefs for t = 0
    std::uint8_t degree[max_layers];                 ///< low_degree or the code's largest
    std::uint32_t q_mask;                            ///< 4 (Q - 1)
};

/// The byte of edge j's bit in the beliefs for check t of layer l (tb = 4 t): the row's offset
/// wraps within its Q-bit block, whose first bit's byte is above the mask's bits.
__device__ __forceinline__ unsigned edge_byte(const layer_graph& g, int l, unsigned j, unsigned tb)
{
    const std::uint32_t e = g.edge[l][j];
    return ((e + tb) & g.q_mask) | (e & ~g.q_mask);
}

/// A check's syndrome over its bits' beliefs: it fails where their signs do not satisfy it or
/// one is undecided (belief 0), as the CPU's.
struct check_syndrome {
    unsigned parity = 0, undecided = 0;
    __device__ __forceinline__ void add(float b)
    {
        parity ^= b < 0.0f ? 1u : 0u;
        undecided |= b == 0.0f ? 1u : 0u;
    }
    [[nodiscard]] __device__ __forceinline__ int fails() const { return static_cast<int>(parity | undecided); }
};

template <unsigned E>
using edges_t = std::integral_constant<unsigned, E>;

/// One frame per block, everything it updates in shared memory. L: the bits' beliefs, log P(0)
/// / P(1). The check-to-bit messages are min-sum's, so a check's messages are its two smallest
/// incoming magnitudes (scaled and limited) and a sign per edge: kept so, each message is made
/// again where it is read, the same float the CPU's full message array holds (in double).
/// The schedule is the CPU's: the checks in order, each taking its bits' beliefs as the checks
/// before it left them; the checks of a layer share no bit, so a layer's are updated at once.
/// D: the most edges a check of the code has. A layer's checks take the loops of their own
/// number of edges (low_degree or D), unrolled, so that a check's bits and their messages to
/// it stay in registers between reading the beliefs and writing them.
template <int D>
__global__ void __launch_bounds__(max_threads_per_frame) min_sum_layered(
    const float* __restrict__ llr, int n, int n_full, int k, int rows, int layer, const __grid_constant__ layer_graph g, int max_iterations,
    float alpha, std::uint8_t* __restrict__ info, int* __restrict__ iterations, int* __restrict__ failed_checks,
    const int* __restrict__ active_packets, int frames_per_packet, std::uint8_t* __restrict__ info_packed,
    dsp::codeword_result* __restrict__ results)
{
    extern __shared__ float L[];
    char* const Lb = reinterpret_cast<char*>(L);
    float2* const mm = reinterpret_cast<float2*>(L + n_full);  // per check: the smallest and the second smallest scaled magnitude
    std::uint32_t* const sp = reinterpret_cast<std::uint32_t*>(mm + rows);  // per check: signs | place << 24
    __shared__ int failed, channel_errors;
    const std::size_t f = blockIdx.x;
    // Frames of packets past the count (a batch's unused slots): nothing to decode.
    if (active_packets != nullptr && static_cast<long long>(f / static_cast<std::size_t>(frames_per_packet)) >= *active_packets) {
        if (results != nullptr && threadIdx.x == 0) results[f] = dsp::codeword_result{};
        return;
    }
    const float* ch = llr + f * static_cast<std::size_t>(n);
    const auto belief = [&](unsigned byte) -> float& { return *reinterpret_cast<float*>(Lb + byte); };
    // The channel's belief of bit v: the detectors' sign turned (positive: 0), a NaN or a
    // punctured bit an erasure.
    auto channel = [&](int v) {
        if (v >= n) return 0.0f;
        const float l = ch[v];
        return isnan(l) ? 0.0f : fminf(fmaxf(-l, -llr_limit), llr_limit);
    };
    // A check's message on its edge j, from its two magnitudes m and its word w: the sign bit
    // set where the edge's sign is.
    auto message = [](float2 m, std::uint32_t w, unsigned j) {
        const float v = j == (w >> place_shift) ? m.y : m.x;
        return __uint_as_float(__float_as_uint(v) ^ ((w << (31u - j)) & 0x80000000u));
    };
    // Calls fn(r, l, 4 t, edges_t<E>) for each of this thread's checks r = first + t of layer
    // l (first = l * layer), E its checks' edges.
    auto each_check = [&](int l, auto&& fn) {
        const int first = l * layer;
        for (int r = first + static_cast<int>(threadIdx.x); r < first + layer; r += static_cast<int>(blockDim.x)) {
            const unsigned tb = 4u * static_cast<unsigned>(r - first);
            if (g.degree[l] == low_degree) {
                fn(r, l, tb, edges_t<low_degree>{});
            } else {
                fn(r, l, tb, edges_t<D>{});
            }
        }
    };
    // Whether check r (layer l, tb = 4 t) fails for the beliefs.
    auto fails = [&](int, int l, unsigned tb, auto edges) {
        check_syndrome s;
#pragma unroll
        for (unsigned j = 0; j < decltype(edges)::value; ++j) s.add(belief(edge_byte(g, l, j, tb)));
        return s.fails();
    };
    int received = 0;
    for (int v = threadIdx.x; v < n_full; v += blockDim.x) {
        L[v] = channel(v);
        received |= L[v] != 0.0f ? 1 : 0;
    }
    for (int r = threadIdx.x; r < rows; r += blockDim.x) {
        mm[r] = make_float2(0.0f, 0.0f);
        sp[r] = 0u;
    }
    const int layers = rows / layer;
    // A frame of erasures only is not iterated (as the CPU's): it fails every check.
    int it = 0;
    bool converged = false;  // the last syndrome pass found every check satisfied
    if (__syncthreads_or(received) != 0) {
        // Check r (edges E, 4 t within layer l) updated; with `Last` (the last layer: no later
        // check of the iteration writes its bits), also whether it fails for the beliefs it
        // leaves, which are then the iteration's.
        auto update = [&](int r, int l, unsigned tb, auto edges, auto last) {
            constexpr unsigned E = decltype(edges)::value;
            const float2 m = mm[r];
            const std::uint32_t w = sp[r];
            // The bits' messages to this check (their beliefs without its last message): the
            // two smallest magnitudes, without branches (a below min1 pushes min1 down to second
            // place, otherwise a competes for second place; ties as the CPU's), and their signs.
            float min1 = INFINITY, min2 = INFINITY;
            unsigned place = 0, neg = 0u;
            float q[E];
            unsigned v[E];
#pragma unroll
            for (unsigned j = 0; j < E; ++j) {
                v[j] = edge_byte(g, l, j, tb);
                q[j] = belief(v[j]) - message(m, w, j);
                const float a = fabsf(q[j]);
                if (q[j] < 0.0f) neg |= 1u << j;
                min2 = fminf(min2, fmaxf(a, min1));
                if (a < min1) place = j;
                min1 = fminf(min1, a);
            }
            // Edge j's message is negative when the others' signs multiply to -1: all the
            // signs' product times its own. Each bit's belief takes it at once (the same q: no
            // other check of the layer holds the bit).
            const bool negative = __popc(neg) & 1u;
            const std::uint32_t signs = negative ? ~neg & ((1u << E) - 1u) : neg;
            const float2 now = make_float2(fminf(alpha * min1, llr_limit), fminf(alpha * min2, llr_limit));
            const std::uint32_t word = signs | place << place_shift;
            check_syndrome s;
#pragma unroll
            for (unsigned j = 0; j < E; ++j) {
                const float b = fminf(fmaxf(q[j] + message(now, word, j), -4.0f * llr_limit), 4.0f * llr_limit);
                belief(v[j]) = b;
                if constexpr (decltype(last)::value) s.add(b);
            }
            mm[r] = now;
            sp[r] = word;
            return s.fails();
        };
        for (it = 1;; ++it) {
            for (int l = 0; l + 1 < layers; ++l) {
                each_check(l, [&](int r, int l, unsigned tb, auto edges) { update(r, l, tb, edges, std::false_type{}); });
                __syncthreads();
            }
            // The last layer, whose checks' syndrome is known as they are updated: where one
            // fails, the iteration's decisions do, and the pass over the others is skipped
            // (the same decision as the CPU's syndrome over every check, without its cost on
            // most iterations that do not converge).
            int last_bad = 0;
            each_check(layers - 1, [&](int r, int l, unsigned tb, auto edges) { last_bad |= update(r, l, tb, edges, std::true_type{}); });
            if (__syncthreads_or(last_bad) != 0) {
                converged = false;
            } else {
                // The decisions after this iteration: done once they satisfy every check.
                int bad = 0;
                for (int l = 0; l + 1 < layers; ++l) {
                    each_check(l, [&](auto... a) { bad |= fails(a...); });
                }
                converged = __syncthreads_or(bad) == 0;
            }
            if (converged || it == max_iterations) break;
        }
    }
    if (threadIdx.x == 0) failed = channel_errors = 0;
    __syncthreads();
    // The failed checks' count: 0 where the last syndrome pass found none, else counted.
    int mine = 0;
    for (int l = 0; !converged && l < layers; ++l) {
        each_check(l, [&](auto... a) { mine += fails(a...); });
    }
    if (mine) atomicAdd(&failed, mine);
    if (info != nullptr) {
        for (int i = threadIdx.x; i < k; i += blockDim.x) info[f * static_cast<std::size_t>(k) + i] = L[i] < 0.0f ? 1 : 0;
    }
    if (info_packed != nullptr) {  // k is a multiple of 8: MSB first, k / 8 bytes a frame
        for (int b = threadIdx.x; b < k / 8; b += blockDim.x) {
            unsigned byte = 0;
            for (int j = 0; j < 8; ++j) byte |= (L[8 * b + j] < 0.0f ? 0x80u : 0u) >> j;
            info_packed[f * static_cast<std::size_t>(k / 8) + static_cast<std::size_t>(b)] = static_cast<std::uint8_t>(byte);
        }
    }
    if (results != nullptr) {
        // The received hard decisions (an LLR above 0: 1, as the CPU's) against the decoded word.
        int diff = 0;
        for (int v = threadIdx.x; v < n; v += blockDim.x) diff += (ch[v] > 0.0f) != (L[v] < 0.0f) ? 1 : 0;
        if (diff) atomicAdd(&channel_errors, diff);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        if (iterations != nullptr) iterations[f] = it;
        if (failed_checks != nullptr) failed_checks[f] = failed;
        if (results != nullptr) {
            dsp::codeword_result r;
            r.iterations = static_cast<std::uint8_t>(min(it, 255));
            r.converged = failed == 0 ? 1 : 0;
            r.channel_errors = static_cast<std::uint16_t>(min(channel_errors, 65535));
            results[f] = r;
        }
    }
}

/// The code's layer_graph, each layer's table taken from its first check and every check of the
/// layer compared with it (as sets: the matrix's order of a check's edges is not kept); d: the
/// kernel's largest check, which every layer's checks have, or low_degree.
layer_graph layered_graph(const dsp::ldpc::parity_check& h, int q, unsigned d)
{
    const auto rows = static_cast<int>(h.rows.size());
    layer_graph g{};
    if (q < 1 || (q & (q - 1)) != 0 || rows / q > max_layers) {
        throw std::logic_error("GPU LDPC decoder: " + std::to_string(rows / q) + " layers of " + std::to_string(q) +
                               " checks (at most " + std::to_string(max_layers) + ", a power of two)");
    }
    const auto uq = static_cast<unsigned>(q);
    g.q_mask = 4u * (uq - 1u);
    std::vector<unsigned> have, want;
    for (int l = 0; l < rows / q; ++l) {
        const auto& first = h.rows[static_cast<std::size_t>(l * q)];
        if (first.size() != d && first.size() != low_degree) {
            throw std::logic_error("GPU LDPC decoder: layer " + std::to_string(l) + "'s checks have " + std::to_string(first.size()) +
                                   " edges (" + std::to_string(low_degree) + " or " + std::to_string(d) + ")");
        }
        g.degree[l] = static_cast<std::uint8_t>(first.size());
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

using decode_kernel = decltype(&min_sum_layered<6>);

/// The kernel for a code whose largest checks have `edges` edges: the AR4JA codes' have 6
/// (rate 1/2), 10 (2/3) and 18 (4/5).
decode_kernel kernel_for(std::size_t edges)
{
    switch (edges) {
    case 6: return &min_sum_layered<6>;
    case 10: return &min_sum_layered<10>;
    case 18: return &min_sum_layered<18>;
    default: throw std::invalid_argument("GPU LDPC decoder: no kernel for checks of " + std::to_string(edges) + " edges (6, 10 or 18)");
    }
}

}  // namespace

struct ldpc_decoder::impl {
    explicit impl(int dev) : device(select_device(dev)) {}
    int device;  ///< made current first: every member after it is allocated there
    dsp::ldpc::code_params p;
    dsp::ldpc::decoder_config cfg;
    std::size_t smem = 0;  ///< dynamic shared memory a frame's block takes
    int layer = 0;         ///< checks a layer (dsp::ldpc::layer_checks)
    int threads = 0;       ///< a frame's block
    layer_graph graph{};
    decode_kernel kernel = nullptr;  ///< min_sum_layered for the code's largest check
    device_buffer<float> llr;
    device_buffer<std::uint8_t> info;
    device_buffer<int> iterations, failed;
    std::size_t capacity = 0;  ///< frames the host API's buffers hold
    stream st;

    /// Every frame of `frames` decoded in one launch on `s` (the kernel's outputs, each optional).
    void launch(const float* llrs, std::size_t frames, std::uint8_t* info_bits, int* its, int* failed_checks,
                const int* active_packets, int frames_per_packet, std::uint8_t* info_packed, dsp::codeword_result* results,
                cudaStream_t s) const
    {
        kernel<<<static_cast<unsigned>(frames), static_cast<unsigned>(threads), smem, s>>>(
            llrs, p.n, p.n_full, p.k, p.checks, layer, graph, cfg.max_iterations,
            cfg.normalization, info_bits, its, failed_checks, active_packets, frames_per_packet, info_packed, results);
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
    impl_->threads = std::min(layer, max_threads_per_frame);
    impl_->graph = layered_graph(h, layer, static_cast<unsigned>(max_row));
    impl_->kernel = kernel_for(max_row);
    impl_->smem = frame_smem_bytes(h.p.n_full, h.p.checks);
    PAQ_CUDA_CHECK(cudaFuncSetAttribute(impl_->kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(impl_->smem)));
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
