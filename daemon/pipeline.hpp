// The live receiver: four kinds of thread, data flowing one way.
//
//   acquisition   source.run(ring_sink)          -> ring (samples + gap markers)
//   batcher       ring.read -> dsp::batcher       -> dispatch queue (bounded)
//   workers x N   backend.process(batch)          (runtime::worker_pool: results in batch order)
//   publisher     in batch order: publish(out), run tally, latency
//
// The ring and the batch windows hold the source's samples at its width: ci16 for a
// source that delivers ci16 (sample_source::ci16_scale(); the ring must be made so), cf32
// otherwise. A ci16 stream is never converted on the host on its way to the backend, whatever
// the rates: the backends convert each window (to_cf32) before their input stage resamples it
// (dsp/input_stage.hpp), as in replay. Only the on_samples tap (the recorder) takes cf32: the
// batcher converts what it hands the tap, on its own thread.
//
// Every sample is accounted for: read from the ring, dropped by the ring (overflow, counted),
// lost before it (gaps reported by the source, counted), or in a batch that failed on its
// backend and on the CPU fallback (counted). A stall (no samples for stall_timeout) ends the
// segment so that the packets already received are published, and is counted.
//
// Stop: request_stop() stops the source; the ring is drained, the last partial batch is
// processed and published, then every thread ends. abort() (a second signal) drops what is
// left in the ring (counted) and finishes only the batches already dispatched.
#pragma once

#include "dsp/backend.hpp"
#include "dsp/batcher.hpp"
#include "dsp/receiver_config.hpp"
#include "dsp/input_stage.hpp"
#include "dsp/receiver_run.hpp"
#include "io/ring_buffer.hpp"
#include "io/sample_source.hpp"
#include "runtime/worker_pool.hpp"

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <limits>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>
#include <thread>
#include <vector>

namespace paq::daemon {

inline constexpr std::size_t num_gap_reasons = io::num_gap_reasons;

/// Upper bounds (seconds) of the batch latency histogram's buckets (Prometheus `le`), +Inf
/// implied. A batch's latency is its window's fill time (batch_samples / rate: tens to
/// hundreds of ms) plus processing, so the buckets run from 1 ms to 10 s with the 1-2.5-5
/// steps Prometheus's own defaults use; a latency above 10 s lands in +Inf only.
inline constexpr std::array<double, 13> latency_bucket_bounds_s = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                                                   0.25,  0.5,    1.0,   2.5,  5.0,   10.0};

struct pipeline_options {
    dsp::receiver_config receiver;
    std::optional<dsp::pn_pattern> pattern = dsp::pn_pattern::pn15;  ///< live BER; none: BEP only
    double sample_rate_hz = 0.0;
    std::chrono::milliseconds stall_timeout{2000};
    int queue_depth = 2;
    /// Taps on the batcher thread (e.g. the SigMF recorder): every sample read from the ring
    /// and every gap, in stream order. They must not block for long. A ci16 ring's samples
    /// reach on_samples converted (to_cf32 with the ring's scale), on the batcher thread.
    std::function<void(std::span<const cf32>)> on_samples;
    std::function<void(std::uint64_t lost, io::gap_reason reason)> on_gap;
    /// A time anchor, before the on_samples call whose samples[offset] it times (UTC ns).
    std::function<void(std::int64_t utc_ns, std::size_t offset)> on_time;
};

struct pipeline_stats {
    // acquisition and ring
    /// The input's width through the ring and the upload: ci16 (4 bytes a sample, converted
    /// by the backend) when the source delivers ci16, else cf32 (8 bytes).
    bool input_ci16 = false;
    std::uint64_t samples_in = 0;           ///< samples the batcher received
    io::ring_counters ring;                 ///< incl. samples dropped by overflow
    std::uint64_t gaps = 0;                 ///< gaps of any reason, stalls included
    std::array<std::uint64_t, num_gap_reasons> gaps_by_reason{};
    /// Samples the sources said were lost (the ring's own drops are in ring.samples_dropped).
    std::uint64_t samples_lost_in_gaps = 0;
    /// Samples of segments shorter than one packet (between close gaps): no packet fits, so
    /// they make no batch (dsp::batcher::samples_in_short_segments).
    std::uint64_t samples_in_short_segments = 0;
    std::uint64_t short_segments = 0;
    std::uint64_t stalls = 0;
    bool stalled = false;
    // batches
    std::uint64_t batches_dispatched = 0;
    std::uint64_t batches_published = 0;
    std::uint64_t batches_lost = 0;         ///< failed on the backend and the fallback
    std::uint64_t samples_in_lost_batches = 0;
    std::uint64_t backend_errors = 0;
    std::uint64_t batches_on_fallback = 0;
    std::uint64_t packets_last_batch = 0;
    /// Distinct batch-window storages dispatched, and of them those the backend page-locked
    /// (0 with the CPU backend): a few, constant once the windows circulate.
    std::uint64_t windows = 0;
    std::uint64_t windows_locked = 0;
    /// Mean estimated transmitter clock offset over the last published batch's packets, ppm.
    double clock_ppm_last_batch = 0.0;
    /// Front-end correction: means over the last published batch's corrected packets (IQ
    /// amplitude dB, phase deg, DC dBc); NaN when none was corrected.
    double iq_gain_db_last_batch = std::numeric_limits<double>::quiet_NaN();
    double iq_phase_deg_last_batch = std::numeric_limits<double>::quiet_NaN();
    double dc_dbc_last_batch = std::numeric_limits<double>::quiet_NaN();
    // latency, last sample of a batch in -> its last bit published
    double latency_last_ms = 0.0;
    double latency_max_ms = 0.0;
    double latency_mean_ms = 0.0;
    /// Batches whose latency was <= latency_bucket_bounds_s[i], per bucket (not cumulative:
    /// the exposition sums them); the rest (above the last bound) are batches_published
    /// minus their total. The sum of all latencies, seconds.
    std::array<std::uint64_t, latency_bucket_bounds_s.size()> latency_buckets{};
    double latency_sum_s = 0.0;
    // the receiver's tally (packets, per-path BER / BEP, estimates)
    dsp::run_summary tally;
    /// UTC of the first published packet whose time is known (packet_record::utc_ns);
    /// unknown_utc_ns until then, or for a source without time.
    std::int64_t first_packet_utc_ns = dsp::unknown_utc_ns;
    std::optional<std::string> source_error;
    bool finished = false;
};

class pipeline {
public:
    using publish_fn = std::function<void(const dsp::batch_output&)>;
    using backend_factory = runtime::worker_pool::backend_factory;

    /// workers: one backend per worker thread (at least one). fallback: makes the CPU
    /// backend used when a worker's backend throws (empty: no fallback, the batch is lost).
    /// The ring must be of the source's width: ci16 at the source's scale when
    /// source.ci16_scale() is set, else cf32 or ci16 (a ci16 source into a cf32 ring is
    /// converted on the source thread by io::ring_sink); std::invalid_argument otherwise.
    pipeline(pipeline_options opt, io::sample_source& source, io::sample_ring& ring,
             std::vector<std::unique_ptr<dsp::batch_processor>> workers, backend_factory fallback, publish_fn publish);
    ~pipeline();
    pipeline(const pipeline&) = delete;
    pipeline& operator=(const pipeline&) = delete;

    void start();
    /// Stops the source; everything received is still processed and published.
    void request_stop();
    /// Also drops what is still in the ring (counted) and stops dispatching new batches.
    void abort();
    /// All threads have ended (after the source ended or stopped and the queue drained).
    [[nodiscard]] bool finished() const;
    /// Waits for the end.
    void join();
    /// Waits at most `timeout` for the end; true when finished.
    bool wait_for(std::chrono::milliseconds timeout);
    [[nodiscard]] pipeline_stats stats() const;
    /// False when a thread has not made progress for too long (the watchdog stops pinging):
    /// the batcher loop for 10 s, or a worker on one batch for longer than `worker_limit`.
    [[nodiscard]] bool healthy(std::chrono::seconds worker_limit) const;

private:
    void acquisition_loop();
    /// The batcher for the ring's width: T = cf32 or ci16 (windows in samples / samples_ci16).
    template <class T>
    void batcher_loop();
    void publisher_loop();
    template <class T>
    void dispatch(dsp::sample_batch&& b, std::chrono::steady_clock::time_point ready);
    /// The spare windows of width T (call with spare_mu_ held).
    template <class T>
    std::vector<dsp::window_storage_t<T>>& spare_windows()
    {
        if constexpr (std::is_same_v<T, ci16>) {
            return spare_windows_ci16_;
        } else {
            return spare_windows_;
        }
    }

    pipeline_options opt_;
    io::sample_source& source_;
    io::sample_ring& ring_;
    // windows back from the workers, for the batcher to fill again (before pool_: its
    // workers hand windows back until it is destroyed)
    std::mutex spare_mu_;
    std::vector<std::vector<cf32>> spare_windows_;
    std::vector<dsp::window_vector<ci16>> spare_windows_ci16_;  ///< the same for a ci16 ring
    /// Windows page-locked by the backend (pin_host_memory), once each when first dispatched:
    /// uploads from them run at full speed (pageable: ~53 ms a default batch against 14 ms).
    /// Undone after pool_ is destroyed (declared after it: nothing in flight) and before the
    /// windows are freed (spare_windows_, declared before): by then every window is back
    /// there (the publisher drains the pool, the batcher hands its storage back).
    runtime::window_pins pins_;
    /// The backends and the CPU fallback: batches in, results out in batch order; the
    /// backend errors, fallbacks and lost batches are counted there.
    runtime::worker_pool pool_;
    publish_fn publish_;

    std::vector<std::thread> threads_;
    std::atomic<bool> aborted_{false};

    // stats
    mutable std::mutex s_mu_;
    pipeline_stats stats_;
    dsp::input_geometry geometry_;  ///< the input's rate against the chain's (batch guards, tally)
    dsp::run_tally tally_;
    double latency_sum_ms_ = 0.0;
    std::atomic<std::int64_t> batcher_heartbeat_ns_{0};
    std::atomic<bool> batcher_done_{false};

    mutable std::mutex end_mu_;
    std::condition_variable end_cv_;
    bool finished_ = false;
};

}  // namespace paq::daemon
