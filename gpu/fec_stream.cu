// The continuous coded stream's codewords gathered on the GPU: gpu/fec_stream.cuh.
#include "gpu/fec_stream.cuh"

#include "dsp/fec_stream.hpp"
#include "dsp/waveform.hpp"
#include "gpu/cuda_check.hpp"

#include <array>
#include <cstdint>
#include <stdexcept>

namespace paq::gpu {

namespace {

constexpr int randomizer_period = 255;
constexpr int field_bits = static_cast<int>(waveform::data_bits);
constexpr int gather_threads = 256;

__constant__ std::uint8_t c_randomizer[randomizer_period];

/// A block per (codeword, stream): blockIdx.x the codeword, blockIdx.y the stream.
__global__ void __launch_bounds__(gather_threads)
    gather_kernel(const stream_word* __restrict__ words, int streams, int n, float* __restrict__ out)
{
    const stream_word w = words[blockIdx.x];
    const int s = static_cast<int>(blockIdx.y);
    float* dst = out + (static_cast<std::size_t>(blockIdx.x) * static_cast<std::size_t>(streams) + static_cast<std::size_t>(s)) *
                           static_cast<std::size_t>(n);
    for (int j = static_cast<int>(threadIdx.x); j < n; j += gather_threads) {
        const int pos = w.first + j;
        const int q = pos / field_bits;
        const float* f = w.field[q];
        const float v = f != nullptr ? f[static_cast<std::size_t>(s) * field_bits + static_cast<std::size_t>(pos - q * field_bits)] : 0.0f;
        dst[j] = c_randomizer[j % randomizer_period] != 0 ? -v : v;
    }
}

}  // namespace

void fec_stream_setup_device()
{
    const auto bits = dsp::randomizer_bits();
    if (bits.size() != static_cast<std::size_t>(randomizer_period)) throw std::logic_error("fec stream: the randomizer's period is not 255");
    std::array<std::uint8_t, randomizer_period> r{};
    for (std::size_t i = 0; i < r.size(); ++i) r[i] = bits[i];
    PAQ_CUDA_CHECK(cudaMemcpyToSymbol(c_randomizer, r.data(), r.size()));
}

void gather_stream_words(const stream_word* words, std::size_t count, int streams, int n, float* out, cudaStream_t st)
{
    if (count == 0) return;
    if (streams < 1 || n < 1 || n > field_bits * (stream_word_fields - 1) + 1) {
        throw std::invalid_argument("fec stream: streams >= 1 and a codeword of 1 .. 12289 bits");
    }
    gather_kernel<<<dim3(static_cast<unsigned>(count), static_cast<unsigned>(streams)), gather_threads, 0, st>>>(words, streams, n, out);
    PAQ_CUDA_CHECK(cudaGetLastError());
}

}  // namespace paq::gpu
