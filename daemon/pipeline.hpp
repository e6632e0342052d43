// The live receiver: the source's thread fills the ring, the stream engine
// (runtime/stream_engine.hpp) does the rest.
//
//   acquisition   source.run(ring_sink)          -> ring (samples + gap markers)
//   batcher       ring.read -> dsp::batcher       -> worker pool (bounded)     } the stream
//   workers x N   backend.process(batch)          (results in batch order)     } engine over
//   publisher     in batch order: publish(out), run tally, latency             } a ring_feed
//
// The ring and the batch windows hold the source's samples at its width: ci16 for a
// source that delivers ci16 (sample_source::ci16_scale(); the ring must be made so), cf32
// otherwise. A ci16 stream is never converted on the host on its way to the backend, whatever
// the rates: the backends convert each window (to_cf32) before their input stage resamples it
// (dsp/input_stage.hpp), as in replay. Only the on_samples tap (the recorder) takes cf32.
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
#include "dsp/run_tally.hpp"
#include "io/ring_buffer.hpp"
#include "io/sample_source.hpp"
#include "runtime/feed.hpp"
#include "runtime/stream_engine.hpp"
#include "runtime/worker_pool.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace paq::daemon {

inline constexpr std::size_t num_gap_reasons = runtime::num_gap_reasons;
using runtime::latency_bucket_bounds_s;

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
    /// Each processed window with its output, on a worker's thread before the window is
    /// filled again (runtime::stream_options::on_processed); it must return at once.
    std::function<void(const dsp::sample_batch&, const dsp::batch_output&)> on_processed;
};

/// The stream engine's counters (runtime::stream_stats: samples, gaps, batches, latency, the
/// tally), the ring's and the source's error.
struct pipeline_stats : runtime::stream_stats {
    io::ring_counters ring;  ///< incl. samples dropped by overflow
    /// The error that ended the run: the source's, or (prefixed "receiver: ") the engine's own.
    std::optional<std::string> source_error;
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

    pipeline_options opt_;
    io::sample_source& source_;
    io::sample_ring& ring_;
    /// The backends and the CPU fallback: batches in, results out in batch order; the
    /// backend errors, fallbacks and lost batches are counted there. Declared before the
    /// engine, which holds the windows it hands back.
    runtime::worker_pool pool_;
    runtime::ring_feed feed_;
    runtime::stream_engine engine_;

    std::vector<std::thread> threads_;
    mutable std::mutex s_mu_;
    std::optional<std::string> source_error_;

    mutable std::mutex end_mu_;
    std::condition_variable end_cv_;
    bool finished_ = false;
};

}  // namespace paq::daemon
