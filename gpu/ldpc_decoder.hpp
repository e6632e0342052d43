// The LDPC decoder on the GPU (dsp/ldpc_decoder.hpp is the CPU reference): layered normalized
// min-sum on the CPU's schedule, every frame of a call decoded in one launch (a thread block
// per frame, a thread per check of a layer, all it updates in shared memory: the bits'
// beliefs and each check's messages compressed as min-sum allows, its two smallest magnitudes
// and a sign per edge), each frame stopping as soon as its decisions satisfy every check.
// The checks of a layer share no bit (dsp/ldpc.hpp, layer_checks), so updating them at once
// is updating them one after another: the GPU (in float) and the CPU (in double) take the
// same iterations on nearly every frame and, where both converge, give the same codeword
// (test_gpu_ldpc counts any bit that differs). CUDA-free interface: the CPU-only build sees
// this header and not the .cu.
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
    /// On device `device`; std::invalid_argument for a decoder kind other than min_sum (the
    /// sum-product decoder is the CPU's yardstick) or settings out of range.
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
