// The preamble detector on the GPU, the CUDA side of dsp/preamble_detector.hpp:
// dsp::locate_packets() (peak search over the preamble metric, then the complete / truncated
// rule) on a metric that stays on the device (gpu/estimators.hpp computes it), then
// dsp::check_packet_starts.
//
//   metric (device, float)  --block maxima (256)-->  bmax
//                           --one thread per u in the owned range: is u a peak?-->  slot[u / 4096]
//                           --one block: slots in order, the locate rule, compaction-->
//   starts[], metrics[], count, truncated      (all on the device)
//
// Two peaks are always more than W = L_pkt / 2 apart (each must beat the other), so a slot
// of 4096 < W positions holds at most one and the slots keep the peaks in order without a
// sort. The decisions are those of dsp::find_preamble_peaks / locate_packets applied to the
// same values (float metric widened to double): same comparisons, same clipping, same
// segment-start extension (tests/test_gpu_preamble_detector.cpp checks it on fresh inputs).
//
// Plain C++ header.
#pragma once

#include "dsp/preamble_detector.hpp"
#include "gpu/stream_ref.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

namespace paq::dsp {
struct sample_batch;
struct batch_part;
}

namespace paq::gpu {

/// What locate_packets reads from a batch, besides the metric.
struct locate_params {
    long long window_len = 0;     ///< batch.samples.size()
    long long owned_begin = 0;    ///< metric positions [owned_begin, owned_end) are decided here
    long long owned_end = 0;
    bool segment_start = false;
    bool segment_end = false;
    double threshold = 0.25;
    int template_offset = 0;
};
[[nodiscard]] locate_params make_locate_params(const dsp::sample_batch& batch, double threshold, int template_offset);
/// The same for one part of a batch window (dsp::split_batch).
[[nodiscard]] locate_params make_locate_params(const dsp::batch_part& part, double threshold, int template_offset);

/// Results on the device; `count` may exceed the slots (then only the first max_packets are
/// written, and the caller reports the overflow).
struct located_packets {
    long long* starts;             ///< max_packets, window-relative packet starts
    float* metrics;                ///< max_packets, M(u) at each peak
    int* count;                    ///< 1: complete packets found
    unsigned long long* truncated; ///< 1: peaks whose packet an edge cut
    int* moved_periods;            ///< max_packets: what check_starts_device moved each start by (periods)
};

class preamble_detector {
public:
    /// tables: the known sequence check_starts_device checks the starts with.
    preamble_detector(int device_id, std::size_t max_metric, std::size_t max_packets, const dsp::receiver_tables& tables);
    ~preamble_detector();
    preamble_detector(const preamble_detector&) = delete;
    preamble_detector& operator=(const preamble_detector&) = delete;

    /// Asynchronous on `stream`; metric has n_metric = window_len - 255 values. Allocates nothing.
    void locate_device(const float* metric, std::size_t n_metric, const locate_params& params, cuda_stream_t stream);
    /// After locate_device: dsp::check_packet_starts on the device (dsp/start_check.hpp) over
    /// the window the metric was computed on (window_len samples at 2 samples per bit); moves
    /// the starts in place and writes moved_periods. Allocates nothing. With window2 (a second
    /// receive channel's window of the same samples) each channel's known-sequence metric over
    /// its energy on the known samples, summed, as dsp::check_packet_starts over several channels.
    void check_starts_device(const cf32* window, long long window_len, cuda_stream_t stream, const cf32* window2 = nullptr);
    [[nodiscard]] located_packets device() noexcept;
    [[nodiscard]] std::size_t max_packets() const noexcept;

    /// Host convenience for tests: the metric copied up, located, results copied back.
    [[nodiscard]] dsp::packet_candidates locate(std::span<const float> metric, const locate_params& params);

private:
    struct impl;
    std::unique_ptr<impl> impl_;
};

}  // namespace paq::gpu
