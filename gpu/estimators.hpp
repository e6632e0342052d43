// The estimators on the GPU, the CUDA side of dsp/estimators.hpp and of dsp/preamble_detector's
// metric: the first stages of the chain, batched over all packets of a window:
// preamble metric (on the input resampled to 2 samples per bit on the device); packet
// segments (re-timed for the transmitter's clock where asked); CFO estimate
// and de-rotation; channel estimates as one product (gpu/product.hpp) [X_lpi; G_1; ...; G_S] (38 (S + 1) x M) * observations (M x packets); noise
// variance from the pilot X_lpi; the channel support chosen per packet (dsp::estimate_channel).
//
//   Create (constructor: tables to the device, buffers for the largest window)
//     -> metric(window) / estimate(window, starts)  ... (allocate nothing)
//
// Plain C++ header: no CUDA types leak out. Single precision on the device; the CPU backend
// (double) is the reference it is tested against.
#pragma once

#include "dsp/receiver_tables.hpp"
#include "dsp/resampler.hpp"
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

/// An input window as the host holds it: cf32 samples, or ci16 samples (4 bytes a
/// sample over the link, half of cf32) that the device converts after the upload, each component divided
/// by ci16_scale as paq::to_cf32 does, bit for bit; or two receive channels' cf32 samples
/// interleaved (cf32x2, one sample time each), which the device splits after the upload.
struct host_window {
    const void* data = nullptr;
    std::size_t size = 0;     ///< sample times
    float ci16_scale = 0.0f;  ///< > 0: the samples are ci16
    int channels = 1;         ///< 2: cf32x2

    host_window(std::span<const cf32> w) noexcept : data(w.data()), size(w.size()) {}  // NOLINT(google-explicit-constructor)
    host_window(const std::vector<cf32>& w) noexcept : host_window(std::span<const cf32>(w)) {}  // NOLINT(google-explicit-constructor)
    host_window(std::span<const ci16> w, float scale) noexcept : data(w.data()), size(w.size()), ci16_scale(scale) {}
    host_window(std::span<const cf32x2> w) noexcept : data(w.data()), size(w.size()), channels(2) {}  // NOLINT(google-explicit-constructor)
    [[nodiscard]] bool is_ci16() const noexcept { return ci16_scale > 0.0f; }
};

class estimators {
public:
    /// Distance between packet segments in the device buffer: the filter stage's FFT size.
    static constexpr std::size_t segment_stride = 16384;

    /// \param device_id CUDA device
    /// \param max_window_samples largest window that will be passed (2 samples per bit)
    /// \param max_packets largest number of packets per call
    /// \param input_design with it, upload_resample_and_metric_device() takes input windows
    ///        of up to max_input_samples and resamples them on the device with this design
    /// \param channels receive channels (1 or 2; std::invalid_argument otherwise). With two,
    ///        the device-level API below takes cf32x2 windows; each channel is resampled on its
    ///        own, the metric is the channels' larger at each position (dsp::preamble_metric
    ///        over several channels), each slot's segment, channel estimate and noise are each
    ///        channel's own (device(1) for the second), and the carrier offset is one for
    ///        both, from the channels' lag products and block phases weighted by their noise
    ///        (dsp::estimate_cfo, dsp::refine_cfo over several channels).
    estimators(int device_id, std::size_t max_window_samples, std::size_t max_packets,
              const dsp::resampler_design* input_design = nullptr, std::size_t max_input_samples = 0, int channels = 1);
    ~estimators();
    estimators(const estimators&) = delete;
    estimators& operator=(const estimators&) = delete;

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
    /// A ci16 window goes up at its own width and is converted on the device as each chunk
    /// arrives.
    void upload_and_metric_device(host_window window, cuda_event_t upload_after = nullptr);
    /// As upload_and_metric_device for an input not at 2 samples per bit: the INPUT window
    /// goes up in chunks (the link carries input samples), and as they arrive the resampler
    /// (the input design of Create) writes the 2-samples-per-bit window, outputs m = 0 ..
    /// n_out-1 at positions first_pos + m step relative to input[0] (dsp::resample's values
    /// bit for bit), then M(u) over it. Throws std::logic_error without an input design,
    /// std::invalid_argument for windows larger than at Create or n_out below the metric span.
    void upload_resample_and_metric_device(host_window input, dsp::fixed_pos first_pos, dsp::fixed_pos step,
                                           std::size_t n_out, cuda_event_t upload_after = nullptr);
    /// For the clock estimator: M(peak - 1), M(peak), M(peak + 1), peak = starts[p] +
    /// template_offset, for slots p < *count (count may be null: all slots), into
    /// device_peak_metrics() (3 per slot), in double and equal to dsp::preamble_metric's values
    /// bit for bit; positions outside the metric's range give 0. Asynchronous, on the stream.
    void peak_metrics_device(const long long* starts, const int* count, std::size_t slots, int template_offset);
    [[nodiscard]] const double* device_peak_metrics() const noexcept;
    /// With it on, upload_resample_and_metric_device() records events around its resample
    /// kernels; resample_ms() is their device time summed (after the stream has completed).
    void enable_resample_timing(bool on) noexcept;
    [[nodiscard]] double resample_ms() const;
    /// The device window (as uploaded, or as resampled) copied back, synchronously: for tests.
    [[nodiscard]] std::vector<cf32> window_to_host();
    /// Recorded on the copy stream after the last chunk of the last upload_and_metric_device().
    [[nodiscard]] cuda_event_t upload_done() const noexcept;
    /// M(u), u = 0 .. window - 256, of the last upload_and_metric_device().
    [[nodiscard]] const float* device_metric() const noexcept;
    /// The window at 2 samples per bit on the device, of the last upload (as uploaded, or as
    /// resampled): window_len samples. `channel`: the receive channel (0 or 1).
    [[nodiscard]] const cf32* device_window(int channel = 0) const noexcept;
    /// Receive channels (the constructor's).
    [[nodiscard]] int channels() const noexcept;
    /// As estimate_device, with the starts already on the device: `slots` segments are
    /// filled, those at p >= *count with zeros. Allocates nothing, no host synchronization.
    void estimate_device(const long long* starts, const int* count, std::size_t slots);
    /// The same with the transmitter's clock corrected: `steps` (device, one 32.32 step per
    /// slot, dsp::clock_step) re-times each packet as dsp::clock_correct_packet does (margin
    /// dsp::packet_margin, the ratio-1 table) where its step is not 2^32; a step of exactly
    /// 2^32 is today's plain copy, bit for bit. Null steps: no correction.
    void estimate_device(const long long* starts, const int* count, std::size_t slots, const dsp::fixed_pos* steps);
    /// The same with each segment's DC and IQ imbalance removed after the gather (gpu/iq_correction;
    /// the moments per slot into iq_sums, device, gpu::iq_dc_sums_per_slot each; with two
    /// channels channel 1's max_packets slots after channel 0's). Null: no correction.
    void estimate_device(const long long* starts, const int* count, std::size_t slots, const dsp::fixed_pos* steps, double* iq_sums);
    /// After estimate_device: each packet's carrier estimate corrected by dw (device, one per
    /// packet, dsp::carrier_correction): w0 += dw and the segments derotated by dw about
    /// dsp::carrier_centre (dsp::derotate_about), the channel estimates kept, as
    /// dsp::cpu_backend does. Asynchronous on device().stream.
    void correct_carrier_device(const double* dw, std::size_t np);
    /// Only the first stage of estimate_device: the packet segments (device().segments, not
    /// yet de-rotated) and the non-finite counts. For tests.
    void gather_device(const long long* starts, const int* count, std::size_t slots, const dsp::fixed_pos* steps);
    struct device_results {
        cf32* segments;        ///< packets x segment_stride, de-rotated, packet at [256, 256 + L_pkt)
        cf32* channels;        ///< packets x 38
        double* cfo;           ///< packets
        double* sigma2;        ///< packets
        unsigned* nonfinite;   ///< packets
        int* support;          ///< packets: index into dsp::receiver_tables::supports
        cuda_stream_t stream;  ///< everything above is ordered on this stream
    };
    /// Receive channel `channel`'s (0 or 1; the stream is the same).
    [[nodiscard]] device_results device(int channel = 0) noexcept;

private:
    struct impl;
    std::unique_ptr<impl> impl_;
};

}  // namespace paq::gpu
