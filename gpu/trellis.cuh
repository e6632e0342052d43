// Trellis detection on the GPU: dsp::detect_packet_trellis (dsp/trellis.hpp, the
// CPU reference) for every (packet, path) stream of a batch at once. Same model (a table of the
// signal's sample at each bit's instant over a window of five bits, fitted per packet on the symbol-by-symbol
// bits, then again on the first pass's: a launch a pass), same max-log BCJR over 16 states, same soft outputs; the input is the low-passed
// equalized signal in float, derotated by the symbol-by-symbol detector's phase as it is made
// (gpu/paths.cuh: paths_trellis_device); the table is fitted in double as on the CPU, the
// BCJR's metrics are float and unscaled (the LLRs are scaled by 1 / (2 sigma2) as they are
// written).
//
// Sixteen lanes per stream, two streams per warp: lane g is trellis state g (and table entry
// g) throughout. The forward metrics are kept every 32 steps in device memory, shifted by their
// minimum; the backward pass computes each block's again from its checkpoint into registers
// (the same arithmetic, the same values) and writes each step's alpha + beta per state to
// shared memory, where a block's LLRs are taken from. The input is read three times, each time
// copied to shared memory asynchronously a chunk or block ahead of its use: the table's fit,
// the forward pass (which also sums the residual), the backward pass. CUDA code only (.cu).
#pragma once

#include "dsp/batch.hpp"
#include "gpu/resources.cuh"

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace paq::gpu {

class stream_trellis {
public:
    /// Buffers for max_streams streams on the current device.
    explicit stream_trellis(std::size_t max_streams);

    /// The input paths_trellis_device writes: streams x 6336 samples, stream by stream (sample
    /// k at bit k's instant), derotated by the symbol-by-symbol detector's phase.
    [[nodiscard]] float2* device_input() noexcept { return x_.data(); }
    /// Per stream and packet bit: log P(a = +1) / P(a = -1), max-log times the path's
    /// calibration (dsp::trellis_math::llr_calibration's law; streams x 6336, [packet][path]).
    [[nodiscard]] const float* device_llr() const noexcept { return llr_.data(); }

    /// The trellis's data bits (streams x 768, MSB first) and stats (its BEP estimate, the
    /// symbol-by-symbol detector's known_bit_errors) of the last detect_device().
    [[nodiscard]] const std::uint8_t* device_bits() const noexcept { return bits_.data(); }
    [[nodiscard]] const dsp::path_stats* device_stats() const noexcept { return stats_.data(); }

    /// Detects `streams` streams on `s`. sxs_bits, sxs_stats: the symbol-by-symbol
    /// detector's data bits (streams x 768, MSB first; the first pass's table is fitted on them) and its
    /// stats (known_bit_errors), left as they are.
    void detect_device(std::size_t streams, const std::uint8_t* sxs_bits, const dsp::path_stats* sxs_stats, cudaStream_t s);

    /// Soft output: the last detect_device()'s data-bit LLRs, quantized as dsp::quantize_llr
    /// does, to out (device memory, streams x 6144 bytes, stream by stream), on `s`.
    void quantize_llrs(std::size_t streams, std::int8_t* out, cudaStream_t s) const;

private:
    std::size_t max_streams_;
    device_buffer<float2> x_;
    device_buffer<float> alpha_;  ///< the forward metrics' checkpoints
    device_buffer<float> llr_;
    device_buffer<std::uint8_t> bits_;
    device_buffer<std::uint8_t> first_bits_;  ///< the first pass's bits, which the second is fitted on
    device_buffer<dsp::path_stats> stats_;
};

}  // namespace paq::gpu
