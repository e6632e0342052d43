// The one stream engine: live (paqd) and replay (paqd replay, paq-ber-curve, the tests) run it.
//
//   feed (ring or recording) -> batcher thread: dsp::basic_batcher cuts windows -> worker_pool
//   (one or more backends, results in batch order) -> the calling thread, in batch order:
//   the sinks (publisher, records, LLR writer ...) and the latency -> the tally's thread, in
//   batch order: the tally (PN counters, estimates), batch k while the sinks take batch k + 1
//
// The windows are the engine's window_pool's: filled in place by the batcher, handed back by
// the worker pool as soon as a backend is done with one, and filled again. The window pool
// page-locks them for the uploads once the backends exist (those read meanwhile at once, later
// ones as they are made) and unlocks them when the engine goes.
//
// Every sample is accounted for: read from the feed, or lost before it (gaps, counted by
// reason), or in a segment too short for a packet (counted), or in a batch that failed on its
// backend and on the CPU fallback (counted by the pool). With a stall timeout, a feed that
// gives nothing for that long ends the segment, so that the packets received so far go out
// (counted).
//
// Errors: with end_on_error (replay) the first error (the feed's read, a lost batch, a sink)
// ends the run and run() rethrows it; without (live) a lost batch is counted and a sink's
// error logged, and the run goes on.
#pragma once

#include "dsp/backend.hpp"
#include "dsp/batch.hpp"
#include "dsp/batcher.hpp"
#include "dsp/fec_stream.hpp"
#include "dsp/input_stage.hpp"
#include "dsp/receiver_config.hpp"
#include "dsp/run_tally.hpp"
#include "io/sample_source.hpp"
#include "runtime/feed.hpp"
#include "runtime/window_pool.hpp"
#include "runtime/worker_pool.hpp"

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <future>
#include <limits>
#include <mutex>
#include <optional>
#include <span>
#include <vector>

namespace paq::runtime {

inline constexpr std::size_t num_gap_reasons = io::num_gap_reasons;

/// Upper bounds (seconds) of the batch latency histogram's buckets (Prometheus `le`), +Inf
/// implied. A batch's latency is its window's fill time (batch_samples / rate: tens to
/// hundreds of ms) plus processing, so the buckets run from 1 ms with the 1-2.5-5 steps
/// Prometheus's own defaults use, up to 250 s: the CPU backend takes tens of seconds a
/// default batch (25-72 s measured), and its latency must not all fall into +Inf.
inline constexpr std::array<double, 17> latency_bucket_bounds_s = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,  0.1,   0.25, 0.5,
                                                                   1.0,   2.5,    5.0,   10.0, 25.0,  50.0,  100.0, 250.0};

/// A worker pool still being made (its backends' setup: a CUDA context, plans and buffers
/// take most of a second), or the error that made it fail.
using pool_future = std::shared_future<worker_pool*>;
/// A pool already made, as a pool_future.
[[nodiscard]] pool_future ready_pool(worker_pool& pool);

/// Sees every batch output in batch order, on the engine's calling thread.
using batch_sink = std::function<void(const dsp::batch_output&)>;

struct stream_options {
    dsp::receiver_config receiver;
    /// The PN pattern the tally counts errors against (live BER); nullopt: none (BEP only).
    std::optional<dsp::pn_pattern> pattern = dsp::pn_pattern::pn15;
    double sample_rate_hz = 0.0;  ///< the feed's rate (the receiver's input rate)
    /// A live feed's: no samples for this long ends the segment (a stall, counted). nullopt:
    /// the feed never waits (a recording).
    std::optional<std::chrono::milliseconds> stall_timeout;
    /// The first error ends the run and run() rethrows it (replay); false: a lost batch is
    /// counted and a sink's error logged, and the run goes on (live).
    bool end_on_error = true;
    /// Taps on the batcher thread (e.g. the SigMF recorder): every sample read and every gap,
    /// in stream order; they must not block for long. A ci16 feed's samples reach on_samples
    /// converted to cf32 (at the feed's scale), on the batcher thread, only when tapped.
    std::function<void(std::span<const cf32>)> on_samples;
    std::function<void(std::uint64_t lost, io::gap_reason reason)> on_gap;
    /// A time anchor, before the on_samples call whose samples[offset] it times (UTC ns).
    std::function<void(std::int64_t utc_ns, std::size_t offset)> on_time;
    /// Each processed window with its output, on the worker's thread as soon as its backend
    /// is done with it and before the window is filled again (e.g. the live view taking one
    /// packet's samples now and then). In completion order, not batch order; it must return
    /// at once.
    std::function<void(const dsp::sample_batch&, const dsp::batch_output&)> on_processed;
};

/// What a run adds up to, live or replayed: one type, read while the run goes on (stats()) and
/// at its end (run()).
struct stream_stats {
    /// The input's width through the windows and the upload: ci16 (4 bytes a sample,
    /// converted by the backend), else cf32 (8 bytes).
    bool input_ci16 = false;
    /// The data fields are decoded (receiver.fec): the tally's per-path fec counts apply.
    bool fec = false;
    /// Receive channels combined (receiver.channels): with 2 the tally's per-channel counts apply.
    int receive_channels = 1;
    std::uint64_t samples_in = 0;  ///< samples read from the feed
    std::uint64_t gaps = 0;        ///< gaps of any reason, stalls included
    std::array<std::uint64_t, num_gap_reasons> gaps_by_reason{};
    /// Samples the gaps said were lost before the feed, but for a ring's own overflows (the
    /// ring counts those: io::ring_counters::samples_dropped); a recording's overflows are
    /// counted here, whether read by replay or passed through a live file source's ring.
    std::uint64_t samples_lost_in_gaps = 0;
    /// Samples of segments shorter than one packet (between close gaps): no packet fits, so
    /// they make no batch (dsp::batcher::samples_in_short_segments).
    std::uint64_t samples_in_short_segments = 0;
    std::uint64_t short_segments = 0;
    std::uint64_t stalls = 0;
    bool stalled = false;
    // batches (the pool's counters)
    std::uint64_t batches_dispatched = 0;
    std::uint64_t batches_published = 0;  ///< batches whose output went through the sinks
    std::uint64_t batches_lost = 0;       ///< failed on the backend and the fallback
    std::uint64_t samples_in_lost_batches = 0;
    std::uint64_t backend_errors = 0;
    std::uint64_t batches_on_fallback = 0;
    std::uint64_t packets_last_batch = 0;
    /// Batch windows made, and of them those page-locked for the backend's uploads (0 with the
    /// CPU backend): a few, constant once the windows circulate.
    std::uint64_t windows = 0;
    std::uint64_t windows_locked = 0;
    /// Mean estimated transmitter clock offset over the last published batch's packets, ppm.
    double clock_ppm_last_batch = 0.0;
    /// Front-end correction: means over the last published batch's corrected packets (IQ
    /// amplitude dB, phase deg, DC dBc); NaN when none was corrected.
    double iq_gain_db_last_batch = std::numeric_limits<double>::quiet_NaN();
    double iq_phase_deg_last_batch = std::numeric_limits<double>::quiet_NaN();
    double dc_dbc_last_batch = std::numeric_limits<double>::quiet_NaN();
    // latency, the last sample of a batch read into the feed -> its output through the sinks
    double latency_last_ms = 0.0;
    double latency_max_ms = 0.0;
    double latency_mean_ms = 0.0;
    /// Batches whose latency was <= latency_bucket_bounds_s[i], per bucket (not cumulative:
    /// the exposition sums them); the rest (above the last bound) are batches_published
    /// minus their total. The sum of all latencies, seconds.
    std::array<std::uint64_t, latency_bucket_bounds_s.size()> latency_buckets{};
    double latency_sum_s = 0.0;
    /// The receiver's tally (packets, per-path BER / BEP, estimates) and where the time went
    /// (tally.timing).
    dsp::run_summary tally;
    /// UTC of the first published packet whose time is known (packet_record::utc_ns);
    /// unknown_utc_ns until then, or for a feed without time.
    std::int64_t first_packet_utc_ns = dsp::unknown_utc_ns;
    bool finished = false;  ///< run() has returned

    /// A batch through the sinks: batches_published, packets_last_batch, the last batch's
    /// means (clock, front end) and the first packet's time. The tally and the latency are
    /// counted apart (the engine's tally thread and its clock).
    void count_published(const dsp::batch_output& out) noexcept;
};

class stream_engine {
public:
    /// The feed's width decides the windows' (ci16 at its scale, or cf32). The pool (a
    /// future: reading overlaps the backends' setup, up to three windows ahead) must outlive
    /// the run; the engine sets its recycle function, closes it at the end (one run per pool)
    /// and aborts it on abort(). std::invalid_argument for a rate that is not positive.
    stream_engine(stream_options opt, feed& source, pool_future pool, std::vector<batch_sink> sinks);
    ~stream_engine();
    stream_engine(const stream_engine&) = delete;
    stream_engine& operator=(const stream_engine&) = delete;

    /// Reads the feed to its end on a thread of its own, runs the sinks on the calling thread
    /// and the tally on a thread of its own; returns when every batch is through and counted.
    /// Once per engine.
    stream_stats run();
    /// From any thread: the pool processes nothing new (what is queued, and what the batcher
    /// still cuts, comes out lost and is counted). The feed's owner ends the feed (the ring's
    /// abort()), and the run ends there.
    void abort();
    /// A snapshot, from any thread.
    [[nodiscard]] stream_stats stats() const;
    /// False when the batcher has made no progress for 10 s, or a worker has been on one
    /// batch for longer than `worker_limit` (the watchdog stops pinging).
    [[nodiscard]] bool healthy(std::chrono::nanoseconds worker_limit) const;

private:
    template <class T>
    void batcher_loop();
    void consume();
    /// The pool once made (the batcher thread's first window or the end waits for it).
    worker_pool* acquire_pool();

    stream_options opt_;
    feed& feed_;
    pool_future pool_future_;
    std::vector<batch_sink> sinks_;
    dsp::input_geometry geometry_;

    std::atomic<worker_pool*> pool_{nullptr};
    std::atomic<bool> stop_{false};     ///< the run's first error: the batcher stops at its next read
    std::atomic<bool> aborted_{false};  ///< abort(): the pool processes nothing new
    std::exception_ptr batcher_error_;  ///< read after the batcher thread is joined
    std::exception_ptr first_error_;    ///< the calling thread's
    /// The windows, of the feed's width (the other is empty).
    window_pool<cf32> windows_;
    window_pool<ci16> windows_ci16_;
    window_pool<cf32x2> windows_x2_;  ///< two receive channels' windows

    mutable std::mutex s_mu_;  ///< stats_, timing_, latency_sum_ms_
    stream_stats stats_;
    mutable std::mutex tally_mu_;  ///< tally_ (its own: a batch's tally takes milliseconds)
    dsp::run_tally tally_;
    /// receiver.fec sent as the continuous stream: joins each batch's frames to the batch
    /// before's, on the ordered path before the sinks and the tally see the batch.
    std::optional<dsp::stream_stitcher> stitcher_;
    dsp::run_timing timing_;
    double latency_sum_ms_ = 0.0;
    std::atomic<std::int64_t> batcher_heartbeat_ns_{0};
    std::atomic<bool> batcher_done_{false};
    bool ran_ = false;
};

}  // namespace paq::runtime
