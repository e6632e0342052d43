// The LDPC decoder on the GPU (dsp/ldpc_decoder.hpp is the CPU reference): layered normalized
// min-sum on the CPU's schedule, in the CPU's binary16 arithmetic (number_format binary16),
// every frame of a call decoded in one launch. A thread block decodes two frames at once, one
// in each half of binary16 pairs (a thread per check of a layer, all it updates in shared
// memory: the bits' beliefs and each check's messages compressed as min-sum allows, its two
// smallest magnitudes and a sign per edge), and takes the next frame for a half as soon as its
// frame's decisions satisfy every check or its iterations are spent. The checks of a layer
// share no bit (dsp/ldpc.hpp, layer_checks), so updating them at once is updating them one
// after another: the GPU and the CPU take the same iterations and give the same decisions on
// every frame (test_gpu_ldpc). CUDA-free interface: the CPU-only build sees this header and
// not the .cu.
#pragma once

#include "dsp/fec.hpp"
#include "dsp/ldpc.hpp"
#include "dsp/ldpc_decoder.hpp"
#include "gpu/stream_ref.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

namespace paq::gpu {

class ldpc_decoder {
public:
    /// On device `device`; std::invalid_argument for a decoder kind other than min_sum or a
    /// number format other than binary16 (the sum-product decoder and binary64 are the CPU's
    /// yardsticks) or settings out of range.
    ldpc_decoder(dsp::ldpc::code c, dsp::ldpc::decoder_config cfg, int device = 0);
    ~ldpc_decoder();
    ldpc_decoder(const ldpc_decoder&) = delete;
    ldpc_decoder& operator=(const ldpc_decoder&) = delete;

    [[nodiscard]] const dsp::ldpc::code_params& params() const noexcept;

    /// `frames` frames of n LLRs each (the detectors' sign, as dsp::ldpc::decoder::decode takes
    /// them) into frames x k information bits (one per byte) and a result per frame. Blocks
    /// until done; std::invalid_argument for sizes that do not match.
    void decode(std::span<const float> llrs, std::size_t frames, std::span<std::uint8_t> info,
                std::span<dsp::ldpc::decode_result> results);

    // --- device-level API (the CUDA backend's): nothing is copied and nothing waits.
    /// `frames` frames of n LLRs each at `llrs` (device) decoded on stream `s`
    /// into info_packed (device, k / 8 bytes a frame, MSB first) and results (device, one a
    /// frame: iterations, converged, the received hard decisions' differences from the decoded
    /// codeword). active_packets (device, or null: all): frames f with f / frames_per_packet at
    /// or past *active_packets are skipped, their results zero.
    void decode_device(const float* llrs, std::size_t frames, const int* active_packets, int frames_per_packet,
                       std::uint8_t* info_packed, dsp::codeword_result* results, cuda_stream_t s);

private:
    struct impl;
    std::unique_ptr<impl> impl_;
};

}  // namespace paq::gpu
