#include "gpu/ldpc_decoder.hpp"

#include "gpu/resources.cuh"

#include <cuda_runtime.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace paq::gpu {

namespace {

constexpr int threads_per_frame = 512;
constexpr float llr_limit = 30.0f;  // as the CPU decoder's
/// A column's edge as the kernel reads it: its check (row) and its place in that row's list.
constexpr int pos_bits = 5;
__host__ __device__ constexpr std::uint32_t col_entry(std::uint32_t row, std::uint32_t pos) { return row << pos_bits | pos; }
/// A check's signs and the place of its smallest magnitude share a word: the signs in bits
/// 0 .. 23 (rows have at most 18 edges, ar4ja-*-4/5), the place above.
constexpr int max_row_degree = 24;
constexpr int place_shift = 24;

/// The shared memory a frame takes: each check's two smallest scaled magnitudes (a float2),
/// its bits' beliefs, and each check's signs and place of the smallest (a word).
__host__ __device__ constexpr std::size_t frame_smem_bytes(int n_full, int rows)
{
    return static_cast<std::size_t>(rows) * sizeof(float2) + static_cast<std::size_t>(n_full) * sizeof(float) +
           static_cast<std::size_t>(rows) * sizeof(std::uint32_t);
}

/// The code's graph as the kernel reads it, each list transposed (ELL) so that the threads of
/// a warp, on consecutive checks or bits, read consecutive words: the checks' edges
/// row_cols[j * rows + r] (edge j of check r: its bit), the bits' edges
/// col_edges[c * n_full + v] (edge c of bit v: col_entry(check, place)), each list in the
/// order of the matrix (the sums and minima are taken in the CPU's order), with the degrees.
struct graph_view {
    const std::uint16_t* __restrict__ row_cols;
    const std::uint8_t* __restrict__ row_degree;
    const std::uint32_t* __restrict__ col_edges;
    const std::uint8_t* __restrict__ col_degree;
};

/// One frame per block, everything it updates in shared memory. L: the bits' beliefs, log P(0)
/// / P(1). The check-to-bit messages are min-sum's, so a check's messages are its two smallest
/// incoming magnitudes (scaled and limited) and a sign per edge: kept so, each message is made
/// again where it is read, the same float the full message array held.
__global__ void __launch_bounds__(threads_per_frame) min_sum_flooding(
    const float* __restrict__ llr, int n, int n_full, int k, int rows, graph_view g, int max_iterations, float alpha,
    std::uint8_t* __restrict__ info, int* __restrict__ iterations, int* __restrict__ failed_checks,
    const int* __restrict__ active_packets, int frames_per_packet, std::uint8_t* __restrict__ info_packed,
    dsp::codeword_result* __restrict__ results)
{
    extern __shared__ float2 mm[];  // per check: the smallest and the second smallest scaled magnitude
    float* const L = reinterpret_cast<float*>(mm + rows);
    std::uint32_t* const sp = reinterpret_cast<std::uint32_t*>(L + n_full);  // per check: signs | place << 24
    __shared__ int failed, channel_errors;
    const std::size_t f = blockIdx.x;
    // Frames of packets past the count (a batch's unused slots): nothing to decode.
    if (active_packets != nullptr && static_cast<long long>(f / static_cast<std::size_t>(frames_per_packet)) >= *active_packets) {
        if (results != nullptr && threadIdx.x == 0) results[f] = dsp::codeword_result{};
        return;
    }
    const float* ch = llr + f * static_cast<std::size_t>(n);
    // The channel's belief of bit v: the detectors' sign turned (positive: 0), a NaN or a
    // punctured bit an erasure.
    auto channel = [&](int v) {
        if (v >= n) return 0.0f;
        const float l = ch[v];
        return isnan(l) ? 0.0f : fminf(fmaxf(-l, -llr_limit), llr_limit);
    };
    // A check's message on its edge j, from its two magnitudes m and its word w.
    auto message = [](float2 m, std::uint32_t w, unsigned j) {
        const float v = j == (w >> place_shift) ? m.y : m.x;
        return (w >> j & 1u) ? -v : v;
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
    // A frame of erasures only is not iterated (as the CPU's): it fails every check.
    const bool anything = __syncthreads_or(received) != 0;
    // Iteration i: every check (its messages from the beliefs of iteration i - 1), then every
    // bit. The checks' pass also tests the beliefs it reads: once they satisfy every check
    // (tested from iteration 1 on), the frame stops with them, as a test after the bits' pass
    // would have stopped it; so a frame takes two passes an iteration, not three.
    // A bit whose belief is 0 is undecided: a check that holds one fails, as the CPU's.
    int it = 0;
    while (anything) {
        int bad = 0;
        for (int r = threadIdx.x; r < rows; r += blockDim.x) {
            const unsigned degree = g.row_degree[r];
            const float2 m = mm[r];
            const std::uint32_t w = sp[r];
            const unsigned at = w >> place_shift;
            // The kernel is bound by its integer and logic instructions: the edge's column walks
            // by pointer, its old message's sign and the new one's by shifting words.
            const std::uint16_t* col = g.row_cols + r;
            std::uint32_t old_signs = w, bit = 1u;
            float min1 = INFINITY, min2 = INFINITY;
            unsigned place = 0, neg = 0u, parity = 0u, undecided = 0u;
            for (unsigned j = 0; j < degree; ++j, col += rows, old_signs >>= 1, bit <<= 1) {
                const float belief = L[*col];
                parity ^= belief < 0.0f ? 1u : 0u;
                undecided |= belief == 0.0f ? 1u : 0u;
                const float old = j == at ? m.y : m.x;
                const float q = belief - ((old_signs & 1u) ? -old : old);
                const float a = fabsf(q);
                if (q < 0.0f) neg |= bit;
                // The two smallest, without branches: a below min1 pushes min1 down to
                // second place; otherwise a competes for second place (ties as the CPU's).
                min2 = fminf(min2, fmaxf(a, min1));
                if (a < min1) place = j;
                min1 = fminf(min1, a);
            }
            const bool negative = __popc(neg) & 1u;
            bad |= static_cast<int>(parity | undecided);
            // Edge j's message is negative when the others' signs multiply to -1: all the
            // signs' product times its own.
            const std::uint32_t signs = negative ? ~neg & ((1u << degree) - 1u) : neg;
            mm[r] = make_float2(fminf(alpha * min1, llr_limit), fminf(alpha * min2, llr_limit));
            sp[r] = signs | place << place_shift;
        }
        const bool satisfied = __syncthreads_or(bad) == 0;  // also the checks' pass's barrier
        if ((it >= 1 && satisfied) || it == max_iterations) break;
        ++it;
        // Every bit: its channel belief and all its checks' messages.
        for (int v = threadIdx.x; v < n_full; v += blockDim.x) {
            float s = channel(v);
            const unsigned degree = g.col_degree[v];
            const std::uint32_t* edge = g.col_edges + v;
            for (unsigned c = 0; c < degree; ++c, edge += n_full) {
                const std::uint32_t x = *edge;
                const std::uint32_t r = x >> pos_bits;
                s += message(mm[r], sp[r], x & ((1u << pos_bits) - 1u));
            }
            L[v] = s;
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) failed = channel_errors = 0;
    __syncthreads();
    int mine = 0;
    for (int r = threadIdx.x; r < rows; r += blockDim.x) {
        unsigned parity = 0, undecided = 0;
        const unsigned degree = g.row_degree[r];
        const std::uint16_t* col = g.row_cols + r;
        for (unsigned j = 0; j < degree; ++j, col += rows) {
            parity ^= L[*col] < 0.0f ? 1u : 0u;
            undecided |= L[*col] == 0.0f ? 1u : 0u;
        }
        mine += static_cast<int>(parity | undecided);
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

}  // namespace

struct ldpc_decoder::impl {
    explicit impl(int dev) : device(select_device(dev)) {}
    int device;  ///< made current first: every member after it is allocated there
    dsp::ldpc::code_params p;
    dsp::ldpc::decoder_config cfg;
    std::size_t smem = 0;  ///< dynamic shared memory a frame's block takes
    device_buffer<std::uint16_t> row_cols;
    device_buffer<std::uint32_t> col_edges;
    device_buffer<std::uint8_t> row_degree, col_degree;
    device_buffer<float> llr;
    device_buffer<std::uint8_t> info;
    device_buffer<int> iterations, failed;
    std::size_t capacity = 0;  ///< frames the host API's buffers hold
    stream st;

    [[nodiscard]] graph_view graph() const noexcept
    {
        return graph_view{row_cols.data(), row_degree.data(), col_edges.data(), col_degree.data()};
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
    // The rows' edges and each column's edges as (row, place in the row's list), transposed
    // (graph_view), in the matrix's order.
    const std::size_t rows = h.rows.size(), n_full = static_cast<std::size_t>(h.p.n_full);
    if (n_full > 65535) throw std::invalid_argument("GPU LDPC decoder: more than 65535 bits in a codeword");
    std::size_t max_row = 0;
    for (const auto& row : h.rows) max_row = std::max(max_row, row.size());
    if (max_row > static_cast<std::size_t>(max_row_degree)) {
        throw std::invalid_argument("GPU LDPC decoder: a check of more than " + std::to_string(max_row_degree) + " bits");
    }
    std::vector<std::vector<std::uint32_t>> cols(n_full);
    for (std::size_t r = 0; r < rows; ++r) {
        for (std::size_t j = 0; j < h.rows[r].size(); ++j) cols[h.rows[r][j]].push_back(col_entry(static_cast<std::uint32_t>(r), static_cast<std::uint32_t>(j)));
    }
    std::size_t max_col = 0;
    for (const auto& c : cols) max_col = std::max(max_col, c.size());
    if (max_col > 255) throw std::invalid_argument("GPU LDPC decoder: a bit in more than 255 checks");
    std::vector<std::uint16_t> rc(max_row * rows, 0);
    std::vector<std::uint8_t> rd(rows), cd(n_full);
    std::vector<std::uint32_t> ce(max_col * n_full, 0);
    for (std::size_t r = 0; r < rows; ++r) {
        rd[r] = static_cast<std::uint8_t>(h.rows[r].size());
        for (std::size_t j = 0; j < h.rows[r].size(); ++j) rc[j * rows + r] = static_cast<std::uint16_t>(h.rows[r][j]);
    }
    for (std::size_t v = 0; v < n_full; ++v) {
        cd[v] = static_cast<std::uint8_t>(cols[v].size());
        for (std::size_t c = 0; c < cols[v].size(); ++c) ce[c * n_full + v] = cols[v][c];
    }
    auto upload = [](auto& d, const auto& v) {
        using T = typename std::decay_t<decltype(v)>::value_type;
        d = device_buffer<T>(v.size());
        PAQ_CUDA_CHECK(cudaMemcpy(d.data(), v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
    };
    upload(impl_->row_cols, rc);
    upload(impl_->row_degree, rd);
    upload(impl_->col_edges, ce);
    upload(impl_->col_degree, cd);
    impl_->smem = frame_smem_bytes(h.p.n_full, h.p.checks);
    PAQ_CUDA_CHECK(cudaFuncSetAttribute(min_sum_flooding, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(impl_->smem)));
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
    min_sum_flooding<<<static_cast<unsigned>(frames), threads_per_frame, m.smem, m.st.get()>>>(
        m.llr.data(), m.p.n, m.p.n_full, m.p.k, m.p.checks, m.graph(), m.cfg.max_iterations, m.cfg.normalization, m.info.data(), m.iterations.data(), m.failed.data(), nullptr, 1,
        nullptr, nullptr);
    PAQ_CUDA_CHECK(cudaGetLastError());
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
    min_sum_flooding<<<static_cast<unsigned>(frames), threads_per_frame, m.smem, s>>>(
        llrs, m.p.n, m.p.n_full, m.p.k, m.p.checks, m.graph(), m.cfg.max_iterations, m.cfg.normalization, nullptr, nullptr, nullptr, active_packets, frames_per_packet, info_packed, results);
    PAQ_CUDA_CHECK(cudaGetLastError());
}

}  // namespace paq::gpu
