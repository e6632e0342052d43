#include "gpu/ldpc_decoder.hpp"

#include "gpu/resources.cuh"

#include <cuda_runtime.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

namespace paq::gpu {

namespace {

constexpr int threads_per_frame = 512;
constexpr float llr_limit = 30.0f;  // as the CPU decoder's
/// A column's edge as the kernel reads it: its check (row) and its place in that row's list.
constexpr int pos_bits = 5;  // rows have at most 18 edges (ar4ja-*-4/5); the signs fit a u32
__host__ __device__ constexpr std::uint32_t col_entry(std::uint32_t row, std::uint32_t pos) { return row << pos_bits | pos; }

/// The shared memory a frame takes: its bits' beliefs and each check's compressed messages
/// (the two smallest scaled magnitudes, the place of the smallest, a sign bit per edge).
__host__ __device__ constexpr std::size_t frame_smem_bytes(int n_full, int rows)
{
    return static_cast<std::size_t>(n_full) * sizeof(float) + static_cast<std::size_t>(rows) * (2 * sizeof(float) + sizeof(std::uint32_t)) +
           static_cast<std::size_t>(rows + 3) / 4 * 4;
}

/// One frame per block, everything it updates in shared memory. L: the bits' beliefs, log P(0)
/// / P(1). The check-to-bit messages are min-sum's, so a check's messages are its two smallest
/// incoming magnitudes (scaled and limited) and a sign per edge: kept so, each message is made
/// again where it is read, the same float the full message array held.
__global__ void __launch_bounds__(threads_per_frame) min_sum_flooding(
    const float* __restrict__ llr, int n, int n_full, int k, int rows, const std::uint32_t* __restrict__ row_start,
    const std::uint32_t* __restrict__ edge_col, const std::uint32_t* __restrict__ col_start, const std::uint32_t* __restrict__ col_entries,
    int max_iterations, float alpha, std::uint8_t* __restrict__ info, int* __restrict__ iterations, int* __restrict__ failed_checks,
    const int* __restrict__ active_packets, int frames_per_packet, std::uint8_t* __restrict__ info_packed,
    dsp::codeword_result* __restrict__ results)
{
    extern __shared__ float L[];
    float* const m1 = L + n_full;  // per check: the smallest scaled magnitude
    float* const m2 = m1 + rows;   // the second smallest
    std::uint32_t* const signs = reinterpret_cast<std::uint32_t*>(m2 + rows);  // bit j: edge j's message negative
    std::uint8_t* const at_min = reinterpret_cast<std::uint8_t*>(signs + rows);  // the smallest's place
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
    // Check r's message on its edge j.
    auto message = [&](int r, unsigned j) {
        const float m = j == at_min[r] ? m2[r] : m1[r];
        return (signs[r] >> j & 1u) ? -m : m;
    };
    for (int v = threadIdx.x; v < n_full; v += blockDim.x) L[v] = channel(v);
    for (int r = threadIdx.x; r < rows; r += blockDim.x) {
        m1[r] = m2[r] = 0.0f;
        signs[r] = 0u;
        at_min[r] = 0;
    }
    __syncthreads();
    // Iteration i: every check (its messages from the beliefs of iteration i - 1), then every
    // bit. The checks' pass also tests the beliefs it reads: once they satisfy every check
    // (tested from iteration 1 on), the frame stops with them, as a test after the bits' pass
    // would have stopped it; so a frame takes two passes an iteration, not three.
    int it = 0;
    while (true) {
        int bad = 0;
        for (int r = threadIdx.x; r < rows; r += blockDim.x) {
            const std::uint32_t e0 = row_start[r], e1 = row_start[r + 1];
            float min1 = INFINITY, min2 = INFINITY;
            unsigned place = 0, neg = 0u, parity = 0u;
            bool negative = false;
            for (std::uint32_t e = e0; e < e1; ++e) {
                const unsigned j = e - e0;
                const float belief = L[edge_col[e]];
                parity ^= belief < 0.0f ? 1u : 0u;
                const float q = belief - message(r, j);
                const float a = fabsf(q);
                negative ^= q < 0.0f;
                neg |= (q < 0.0f ? 1u : 0u) << j;
                if (a < min1) {
                    min2 = min1;
                    min1 = a;
                    place = j;
                } else if (a < min2) {
                    min2 = a;
                }
            }
            bad |= static_cast<int>(parity);
            // Edge j's message is negative when the others' signs multiply to -1: all the
            // signs' product times its own.
            signs[r] = negative ? ~neg & ((1u << (e1 - e0)) - 1u) : neg;
            m1[r] = fminf(alpha * min1, llr_limit);
            m2[r] = fminf(alpha * min2, llr_limit);
            at_min[r] = static_cast<std::uint8_t>(place);
        }
        const bool satisfied = __syncthreads_or(bad) == 0;  // also the checks' pass's barrier
        if ((it >= 1 && satisfied) || it == max_iterations) break;
        ++it;
        // Every bit: its channel belief and all its checks' messages.
        for (int v = threadIdx.x; v < n_full; v += blockDim.x) {
            float s = channel(v);
            for (std::uint32_t c = col_start[v]; c < col_start[v + 1]; ++c) {
                const std::uint32_t x = col_entries[c];
                s += message(static_cast<int>(x >> pos_bits), x & ((1u << pos_bits) - 1u));
            }
            L[v] = s;
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) failed = channel_errors = 0;
    __syncthreads();
    int mine = 0;
    for (int r = threadIdx.x; r < rows; r += blockDim.x) {
        unsigned parity = 0;
        for (std::uint32_t e = row_start[r]; e < row_start[r + 1]; ++e) parity ^= L[edge_col[e]] < 0.0f ? 1u : 0u;
        mine += static_cast<int>(parity);
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
    device_buffer<std::uint32_t> row_start, edge_col, col_start, col_entries;
    device_buffer<float> llr;
    device_buffer<std::uint8_t> info;
    device_buffer<int> iterations, failed;
    std::size_t capacity = 0;  ///< frames the host API's buffers hold
    stream st;

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
    // The rows' edges (CSR) and each column's edges as (row, place in the row's list).
    std::vector<std::uint32_t> rs{0}, ec, cs(static_cast<std::size_t>(h.p.n_full) + 1, 0), ce;
    for (const auto& row : h.rows) {
        if (row.size() > 32) throw std::invalid_argument("GPU LDPC decoder: a check of more than 32 bits");
        ec.insert(ec.end(), row.begin(), row.end());
        rs.push_back(static_cast<std::uint32_t>(ec.size()));
    }
    for (auto col : ec) ++cs[col + 1];
    for (std::size_t v = 0; v + 1 < cs.size(); ++v) cs[v + 1] += cs[v];
    ce.resize(ec.size());
    std::vector<std::uint32_t> fill(cs.begin(), cs.end() - 1);
    for (std::uint32_t r = 0; r + 1 < rs.size(); ++r) {
        for (std::uint32_t e = rs[r]; e < rs[r + 1]; ++e) ce[fill[ec[e]]++] = col_entry(r, e - rs[r]);
    }
    auto upload = [&](device_buffer<std::uint32_t>& d, const std::vector<std::uint32_t>& v) {
        d = device_buffer<std::uint32_t>(v.size());
        PAQ_CUDA_CHECK(cudaMemcpy(d.data(), v.data(), v.size() * sizeof(std::uint32_t), cudaMemcpyHostToDevice));
    };
    upload(impl_->row_start, rs);
    upload(impl_->edge_col, ec);
    upload(impl_->col_start, cs);
    upload(impl_->col_entries, ce);
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
        m.llr.data(), m.p.n, m.p.n_full, m.p.k, m.p.checks, m.row_start.data(), m.edge_col.data(), m.col_start.data(),
        m.col_entries.data(), m.cfg.max_iterations, m.cfg.normalization, m.info.data(), m.iterations.data(), m.failed.data(), nullptr, 1,
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
        llrs, m.p.n, m.p.n_full, m.p.k, m.p.checks, m.row_start.data(), m.edge_col.data(), m.col_start.data(), m.col_entries.data(),
        m.cfg.max_iterations, m.cfg.normalization, nullptr, nullptr, nullptr, active_packets, frames_per_packet, info_packed, results);
    PAQ_CUDA_CHECK(cudaGetLastError());
}

}  // namespace paq::gpu
