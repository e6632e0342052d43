// The first stages of the chain on the GPU, batched over all packets of a window (issue 3):
// preamble metric; packet segments; CFO estimate and de-rotation; channel estimate as one
// cuBLAS product X_lpi (38 x M) * observations (M x packets); noise variance.
//
//   Create (constructor: tables to the device, buffers for the largest window, cuBLAS)
//     -> metric(window) / estimate(window, starts)  ... (allocate nothing)
//
// Plain C++ header: no CUDA types leak out. Single precision on the device; the CPU backend
// (double) is the reference it is tested against.
#pragma once

#include "dsp/receiver_tables.hpp"
#include "dsp/types.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace paq::gpu {

struct packet_estimate {
    double cfo_rad_per_sample = 0.0;
    std::array<cf32, dsp::chain::L_ch> h{};  ///< h(-N1) .. h(N2)
    double sigma2 = 0.0;
    std::uint32_t nonfinite_samples = 0;
};

class front_end {
public:
    /// \param device_id CUDA device
    /// \param max_window_samples largest window that will be passed
    /// \param max_packets largest number of packets per call
    front_end(int device_id, std::size_t max_window_samples, std::size_t max_packets);
    ~front_end();
    front_end(const front_end&) = delete;
    front_end& operator=(const front_end&) = delete;

    /// M(u) for u = 0 .. window.size() - 256, as dsp::preamble_metric (non-finite samples
    /// count as zero). metric_out must have that many entries.
    void preamble_metric(std::span<const cf32> window, std::span<float> metric_out);

    /// Estimates for the packets starting at `starts` (window-relative, as from
    /// dsp::locate_packets). Copies the window to the device.
    [[nodiscard]] std::vector<packet_estimate> estimate(std::span<const cf32> window, std::span<const long long> starts);

private:
    struct impl;
    std::unique_ptr<impl> impl_;
};

}  // namespace paq::gpu
