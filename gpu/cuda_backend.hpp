// The GPU backend: the whole chain of dsp::cpu_backend on one CUDA device, behind the same
// dsp::batch_processor interface (issue 3).
//
//   Create: tables to the device, every buffer for the largest window, cuFFT plans, cuBLAS
//   process(batch): metric -> packet location -> estimates -> ZF/MMSE (Levinson) -> FFT of
//     each segment -> CMA iterations -> per path: filter spectrum x R x H_NO -> IFFT ->
//     decision samples -> PLL/OQPSK detector for all (packet, path) streams -> bits
//
// Single precision, except the Levinson solves and the PLL state (double). Known gap: packet
// location runs on the host over the metric copied back (dsp::locate_packets).
#pragma once

#include "dsp/backend.hpp"
#include "dsp/receiver_config.hpp"

#include <memory>

namespace paq::gpu {

class cuda_backend final : public dsp::batch_processor {
public:
    /// Throws std::invalid_argument if cfg does not validate or fft_size is not 16384.
    cuda_backend(const dsp::receiver_config& cfg, int device_id);
    ~cuda_backend() override;

    [[nodiscard]] dsp::batch_output process(const dsp::sample_batch& batch) override;
    [[nodiscard]] std::string name() const override { return "cuda"; }

    /// Where the last process() spent its time, milliseconds (host clocks around the host
    /// phases, CUDA events around the device chain).
    struct timing {
        double metric_ms = 0.0;    ///< window upload, metric kernel, metric back to the host
        double locate_ms = 0.0;    ///< packet location on the host
        double device_ms = 0.0;    ///< estimates .. detector, CUDA events
        double copy_back_ms = 0.0; ///< bits and estimates to the host, records filled
    };
    [[nodiscard]] timing last_timing() const noexcept;

private:
    struct impl;
    std::unique_ptr<impl> impl_;
};

}  // namespace paq::gpu
