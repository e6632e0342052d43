// Where samples come from (file, TCP, UDP, VITA-49, ZeroMQ, libiio) and where they go (the ring
// buffer's producer side). A source runs on the acquisition thread: run() blocks until the
// stream ends, stop() is called, or the source fails for good.
//
//   source.run(sink)  --write()/gap()-->  ring buffer  -->  batcher thread
//
// Nothing is lost silently: a source that knows samples are missing (a lost datagram, a
// device overrun, a reconnect) says so with gap(), with the number of samples when it knows
// it (0 when it cannot know, e.g. raw IQ over UDP); the batcher then ends the segment there
// so that no packet spans the gap.
//
// A source whose samples carry absolute time (VITA-49 integer + fractional timestamps) says
// so with time anchors: "the sample with this index was taken at this UTC time". The index
// counts the samples the source has delivered with write() (source_counters::samples before
// it), gaps not included, so an anchor names one sample exactly even across gaps of unknown
// size. Anchors travel in band, through sample_sink::timestamp() just before the write() that
// holds the sample (ordered with write() and gap()), and the latest one can be read from any
// thread with sample_source::latest_time_anchor(). Sources without a time base never anchor.
//
//   source.run(sink)  --timestamp({i, utc_ns})--write(samples i ..)--gap(n)--timestamp(..)--> ..
//
// Between anchors a consumer extrapolates at sample_rate_hz() (utc_ns + (j - i) x 1e9 / rate);
// after a gap of unknown size it waits for the next anchor; across a gap of known size it
// carries on (the receiver's absolute sample index counts the lost samples).
//
// Time bases (docs/DAEMON.md, "Time"):
//   vita49            the sender's integer + fractional timestamps, one anchor per packet
//   file (SigMF)      each capture's core:datetime, at the capture's first sample
//   tcp, udp, zmq,    the host's clock at the arrival of each block, less the block's duration
//   iio               at the nominal rate (host_clock_anchor): arrival jitter and buffering
//                     latency included, ~ms, not sample-exact
//   file (raw)        none
#pragma once

#include "dsp/names.hpp"
#include "dsp/types.hpp"

#include <atomic>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <mutex>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace paq::io {

/// Why a gap is in the stream (counted per reason in the status line and metrics).
enum class gap_reason : std::uint8_t {
    overflow,      ///< the ring buffer was full and samples were dropped (drop policy)
    lost_packets,  ///< datagrams missing by sequence number or timestamp
    stall,         ///< no samples for longer than the stall timeout
    reconnect,     ///< the connection or the device went away and came back
    source_error,  ///< the source reported an overrun or a corrupt block
    discontinuity, ///< the stream jumps (a looped file starts again, a recording's capture boundary)
    /// samples received but not written by the recorder (its disk fell behind): a gap only
    /// when such a recording is replayed
    recording_dropped,
};
/// The names (metrics labels, logs, recordings' paq:gaps), in the enumeration's order.
inline constexpr name_table<gap_reason, 7> gap_reason_names{{{"overflow", gap_reason::overflow},
                                                             {"lost-packets", gap_reason::lost_packets},
                                                             {"stall", gap_reason::stall},
                                                             {"reconnect", gap_reason::reconnect},
                                                             {"source-error", gap_reason::source_error},
                                                             {"discontinuity", gap_reason::discontinuity},
                                                             {"recording-dropped", gap_reason::recording_dropped}}};
/// The number of gap_reason values (for arrays indexed by reason).
inline constexpr std::size_t num_gap_reasons = gap_reason_names.size();

[[nodiscard]] constexpr std::string_view to_string(gap_reason r) noexcept { return name_of(gap_reason_names, r); }

/// The absolute time of one sample of a source's stream.
struct time_anchor {
    /// The sample: the number of samples the source delivered with write() before it
    /// (source_counters::samples at that point; gaps not counted).
    std::uint64_t sample_index = 0;
    /// When it was taken: UTC in ns since 1970-01-01T00:00:00Z, leap seconds not counted (POSIX
    /// time; int64 reaches 2262). GPS-based times are converted by the source.
    std::int64_t utc_ns = 0;
    friend bool operator==(const time_anchor&, const time_anchor&) = default;
};

/// The host's clock (CLOCK_REALTIME), ns since 1970 (UTC as far as the host is synchronised).
[[nodiscard]] std::int64_t host_utc_ns() noexcept;

/// The host-clock anchor of a block of n samples that has just arrived, whose first sample is
/// the source's sample `first_sample_index`: taken n / sample_rate_hz before now, as if the
/// block had been sampled at the nominal rate and handed over the moment its last sample was.
/// The time of the first sample is thus late by the latency from the antenna to this call and
/// jitters with it (docs/DAEMON.md, "Time").
[[nodiscard]] time_anchor host_clock_anchor(std::uint64_t first_sample_index, std::size_t n, double sample_rate_hz) noexcept;

/// The consumer of a source's samples. Called from the acquisition thread only.
class sample_sink {
public:
    virtual ~sample_sink() = default;
    /// Contiguous samples, in stream order.
    virtual void write(std::span<const cf32> samples) = 0;
    /// The same for a source whose samples are ci16 (sample_source::ci16_scale()): each stands
    /// for to_cf32(s, scale). A sink that keeps them at their width (io::ring_sink into a ci16
    /// ring) overrides it; by default they are converted here and given to one write().
    virtual void write_ci16(std::span<const ci16> samples, float scale)
    {
        std::vector<cf32> wide(samples.size());
        for (std::size_t k = 0; k < samples.size(); ++k) wide[k] = to_cf32(samples[k], scale);
        write(std::span<const cf32>(wide));
    }
    /// Reads up to span.size() samples into the span it is given; returns how many (0: none).
    template <class T>
    using fill_fn = std::function<std::size_t(std::span<T>)>;
    /// For a source that reads its samples straight into memory (a file): `fill` is called
    /// once, on memory the sink gives (io::ring_sink: the ring's own, no copy) or on `scratch`,
    /// whose samples then go to write(); returns what `fill` returned. A source's samples
    /// arrive the same either way.
    virtual std::size_t write_from(std::span<cf32> scratch, const fill_fn<cf32>& fill)
    {
        const std::size_t n = fill(scratch);
        if (n) write(std::span<const cf32>(scratch.first(n)));
        return n;
    }
    /// The same for ci16 samples at `scale` (write_ci16).
    virtual std::size_t write_ci16_from(std::span<ci16> scratch, float scale, const fill_fn<ci16>& fill)
    {
        const std::size_t n = fill(scratch);
        if (n) write_ci16(std::span<const ci16>(scratch.first(n)), scale);
        return n;
    }
    /// Two receive channels' samples, a sample of each per sample time (a source of
    /// sample_source::channels() 2). A sink of one channel refuses them (std::logic_error).
    virtual void write_x2(std::span<const cf32x2> samples)
    {
        (void)samples;
        throw std::logic_error("the source delivered two receive channels to a consumer of one");
    }
    /// write_from for two channels' samples (write_x2).
    virtual std::size_t write_x2_from(std::span<cf32x2> scratch, const fill_fn<cf32x2>& fill)
    {
        const std::size_t n = fill(scratch);
        if (n) write_x2(std::span<const cf32x2>(scratch.first(n)));
        return n;
    }
    /// `lost_samples` samples are missing before the next write() (0: unknown count).
    virtual void gap(std::uint64_t lost_samples, gap_reason reason) = 0;
    /// The sample anchor.sample_index, which the next write() holds, was taken at
    /// anchor.utc_ns. Only sources with a time base call it; ignored unless overridden.
    virtual void timestamp(const time_anchor& anchor) { (void)anchor; }
};

/// The latest time anchor of a source: set on the acquisition thread, read from any thread.
class time_anchor_slot {
public:
    void set(const time_anchor& a)
    {
        const std::lock_guard lock(mutex_);
        value_ = a;
    }
    void clear()
    {
        const std::lock_guard lock(mutex_);
        value_.reset();
    }
    [[nodiscard]] std::optional<time_anchor> get() const
    {
        const std::lock_guard lock(mutex_);
        return value_;
    }

private:
    mutable std::mutex mutex_;  // uncontended: one set per packet, reads once a second
    std::optional<time_anchor> value_;
};

/// Counters every source keeps (read from other threads while it runs).
struct source_counters {
    std::atomic<std::uint64_t> samples{0};         ///< samples delivered to the sink
    std::atomic<std::uint64_t> bytes{0};           ///< payload bytes received
    std::atomic<std::uint64_t> packets{0};         ///< datagrams / blocks received
    std::atomic<std::uint64_t> packets_lost{0};    ///< datagrams known to be missing
    std::atomic<std::uint64_t> samples_lost{0};    ///< samples known to be missing
    std::atomic<std::uint64_t> malformed{0};       ///< datagrams rejected as malformed
    /// Datagrams dropped and connections closed because the sender is not in the source's
    /// allow-list (network sources; not in packets or bytes).
    std::atomic<std::uint64_t> refused{0};
    std::atomic<std::uint64_t> reconnects{0};
    std::atomic<std::uint64_t> nonfinite{0};       ///< NaN/Inf samples seen (passed on; the chain flags them)
};

/// Adds n to a counter, stopping at 2^64 - 1 instead of wrapping. Loss counts come from
/// numbers a remote sender chooses (sequence numbers, item offsets); the sources bound the
/// jumps they believe, and this keeps any sum of them from wrapping round to a small count.
inline void add_saturating(std::atomic<std::uint64_t>& counter, std::uint64_t n) noexcept
{
    std::uint64_t cur = counter.load(std::memory_order_relaxed);
    std::uint64_t next = 0;
    do {
        next = n > UINT64_MAX - cur ? UINT64_MAX : cur + n;
    } while (!counter.compare_exchange_weak(cur, next, std::memory_order_relaxed));
}

/// A counter that one kind of source keeps beyond source_counters (VITA-49's, TCP's, raw
/// UDP's, ZeroMQ's), described by the source class that keeps it. The service's registry
/// (daemon/counters.hpp) reports each one a running source lists, under this name, in the
/// Prometheus page, the JSON summary and the final log; nothing outside the source names it.
struct source_counter {
    const char* name;  ///< the kind's prefix, then what it counts: "vita49_duplicates"
    bool gauge;        ///< false: a counter (it never decreases)
    bool integral;     ///< an integer count (printed so)
    const char* help;
};

/// A kind counter's value at one moment.
struct source_counter_value {
    const source_counter* counter;
    double value;
};

/// A kind's counters with their values, given in the list's order (what kind_counters()
/// returns). Throws std::logic_error when the counts differ.
[[nodiscard]] std::vector<source_counter_value> counter_values(std::span<const source_counter> list,
                                                               std::initializer_list<double> values);

class sample_source {
public:
    virtual ~sample_source() = default;
    /// For logs: "file /data/x.sigmf-data (cf32_le, 6.6 MHz, paced)".
    [[nodiscard]] virtual std::string describe() const = 0;
    /// The sample rate the source delivers, in Hz (known before run()).
    [[nodiscard]] virtual double sample_rate_hz() const = 0;
    /// Delivers samples into `sink` until the end of the stream (returns normally), stop()
    /// (returns normally) or an unrecoverable error (throws std::runtime_error naming the
    /// source and the cause). Called once, on the acquisition thread.
    virtual void run(sample_sink& sink) = 0;
    /// Asks run() to return soon. Thread-safe; may be called before run() or more than once.
    virtual void stop() = 0;
    /// The width run() delivers its samples at, fixed for the source's life (known before
    /// run()): a scale (counts per unit of amplitude, > 0) when they are ci16 and go to the
    /// sink with write_ci16(samples, that scale) only; nullopt when they are cf32 and go with
    /// write() only. A source never mixes the two: the live pipeline makes its ring in this
    /// width (ci16 stays 4 bytes a sample up to the backend), and the ring's sink
    /// refuses the other one (io::ring_sink).
    [[nodiscard]] virtual std::optional<float> ci16_scale() const { return std::nullopt; }
    /// Receive channels per sample time, fixed for the source's life: 1, or 2 (two
    /// polarizations or antennas of one link: run() then delivers cf32x2 samples with
    /// write_x2 only, ci16_scale() is nullopt, and the counts and anchors are of sample times).
    [[nodiscard]] virtual int channels() const { return 1; }
    [[nodiscard]] const source_counters& counters() const noexcept { return counters_; }
    /// The counters of this kind of source beyond counters(), with their values now (each
    /// source_counter lives as long as the program). Thread-safe. None by default.
    [[nodiscard]] virtual std::vector<source_counter_value> kind_counters() const { return {}; }
    /// The latest time anchor the source gave its sink; nullopt when it has no time base or
    /// none yet. Thread-safe.
    [[nodiscard]] std::optional<time_anchor> latest_time_anchor() const { return time_anchor_.get(); }
    /// The centre (RF) frequency the samples were taken at, Hz, when the source knows it (a
    /// radio's LO, a SigMF recording's core:frequency); nullopt otherwise.
    [[nodiscard]] virtual std::optional<double> center_frequency_hz() const { return std::nullopt; }

protected:
    source_counters counters_;
    time_anchor_slot time_anchor_;
};

}  // namespace paq::io
