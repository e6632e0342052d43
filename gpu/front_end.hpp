// The first stages of the chain on the GPU, batched over all packets of a window (issue 3):
// preamble metric; packet segments; CFO estimate and de-rotation; channel estimates as one
// cuBLAS product [X_lpi; G_1; ...; G_S] (38 (S + 1) x M) * observations (M x packets); noise
// variance from the pilot X_lpi; the channel support chosen per packet (dsp::estimate_channel).
//
//   Create (constructor: tables to the device, buffers for the largest window, cuBLAS)
//     -> metric(window) / estimate(window, starts)  ... (allocate nothing)
//
// Plain C++ header: no CUDA types leak out. Single precision on the device; the CPU backend
// (double) is the reference it is tested against.
#pragma once

#include "dsp/receiver_tables.hpp"
#include "dsp/types.hpp"
#include "gpu/stream_ref.hpp"

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
    int support = 0;  ///< index into dsp::receiver_tables::supports
};

class front_end {
public:
    /// Distance between packet segments in the device buffer: the filter stage's FFT size.
    static constexpr std::size_t segment_stride = 16384;

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

    // --- device-level API for the GPU backend: results stay on the device.
    /// Copies the window to the device (preamble_metric does too).
    void upload_window(std::span<const cf32> window);
    /// The estimation stages for the uploaded window, asynchronous on the front end's stream.
    void estimate_device(std::span<const long long> starts);
    /// Copies the window up in chunks (from pinned memory: asynchronously, on a copy stream)
    /// and computes M(u) into device_metric() as the chunks arrive; ordered on device().stream.
    /// With `upload_after` (an event already recorded), the copies start only once it has
    /// completed: several front ends then take the PCIe link in turn instead of sharing it.
    void upload_and_metric_device(std::span<const cf32> window, cuda_event_t upload_after = nullptr);
    /// Recorded on the copy stream after the last chunk of the last upload_and_metric_device().
    [[nodiscard]] cuda_event_t upload_done() const noexcept;
    /// M(u), u = 0 .. window - 256, of the last upload_and_metric_device().
    [[nodiscard]] const float* device_metric() const noexcept;
    /// As estimate_device, with the starts already on the device: `slots` segments are
    /// filled, those at p >= *count with zeros. Allocates nothing, no host synchronization.
    void estimate_device(const long long* starts, const int* count, std::size_t slots);
    struct device_results {
        cf32* segments;        ///< packets x segment_stride, de-rotated, packet at [256, 256 + L_pkt)
        cf32* channels;        ///< packets x 38
        double* cfo;           ///< packets
        double* sigma2;        ///< packets
        unsigned* nonfinite;   ///< packets
        int* support;          ///< packets: index into dsp::receiver_tables::supports
        cuda_stream_t stream;  ///< everything above is ordered on this stream
    };
    [[nodiscard]] device_results device() noexcept;

private:
    struct impl;
    std::unique_ptr<impl> impl_;
};

}  // namespace paq::gpu
