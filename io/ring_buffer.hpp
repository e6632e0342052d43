// The sample ring between the acquisition thread (one producer: the source) and the batcher
// thread (one consumer). Samples and gap markers travel in order: a gap written between two
// writes is read between the same samples.
//
//   producer: write(samples) / gap(n, reason) / close()
//   consumer: read(out, timeout) -> samples up to the next gap | a gap | timeout | end
//
// When the ring is full the overflow policy decides:
//   drop  (live sources) the samples that do not fit are dropped, counted, and turned into
//         one gap marker (reason overflow, exact count) placed before the next samples that
//         fit; the source never waits.
//   block (files, TCP) the producer waits for space; nothing is dropped.
//
// Gap markers are bounded too (max_markers): a flood of gaps (e.g. one-sample datagrams whose
// sequence skips) must not grow memory without end. When max_markers are queued, drop
// coalesces: the new gap and every sample written until the consumer has drained the
// markers to half are merged into one gap (the samples counted as dropped, the sources'
// lost counts kept exact, reason by reason); block waits for the consumer, as for space.
//
// Time anchors travel in order too: timestamp(utc_ns, k) before a write says "sample k of the
// next write (or of a later one, counting on) was taken at utc_ns"; the read that returns that
// sample returns the anchor with it (the latest one, when several fall in one read: the
// earlier ones are counted, anchors_superseded; reads are not cut short for them). An
// anchor whose sample is dropped (overflow) is dropped with it, and one beyond max_markers
// queued anchors is dropped: both counted (anchors_dropped); the consumer keeps the time of
// the anchors it has, across the overflow's gap of known size. A flood that merged a gap of
// unknown size (0) with known ones places the known sum and then a gap of 0 of that reason,
// so that the consumer does not carry time across a span it cannot count.
//
// The samples are of one width, fixed when the ring is made: cf32 (8 bytes), or ci16 with the
// scale that converts them (4 bytes; to_cf32(s, ci16_scale())), made so for a source
// that delivers ci16 (sample_source::ci16_scale()): nothing is converted on the way in or out,
// and both copies (source -> ring, ring -> batch window) move half the bytes; or, for a source
// of two receive channels (sample_source::channels() 2), cf32x2 (16 bytes: a sample of each
// channel per sample time, so that an overflow or a gap never separates the channels). write()
// and read() of another width are refused (std::logic_error): a ring never holds two. Gaps,
// overflow, markers, anchors and counters are the same whatever the width (they count
// samples, that is sample times, not bytes).
//
// The storage comes from an allocator hook, so that the daemon can put it in pinned (page-
// locked) memory: cudaHostAlloc when the CUDA backend is built, mlock otherwise.
#pragma once

#include "dsp/names.hpp"
#include "dsp/types.hpp"
#include "io/sample_source.hpp"

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

namespace paq::io {

enum class overflow_policy : std::uint8_t { drop, block };
inline constexpr name_table<overflow_policy, 2> overflow_policy_names{
    {{"drop", overflow_policy::drop}, {"block", overflow_policy::block}}};

/// A name of overflow_policy_names; throws std::invalid_argument naming the value and the
/// allowed ones.
[[nodiscard]] overflow_policy parse_overflow_policy(std::string_view name);
[[nodiscard]] constexpr std::string_view to_string(overflow_policy p) noexcept { return name_of(overflow_policy_names, p); }

/// Storage for the ring: allocate(bytes) returns memory or throws; release(ptr, bytes) frees it.
struct ring_allocator {
    std::function<void*(std::size_t)> allocate;
    std::function<void(void*, std::size_t)> release;
    std::string kind;  ///< for logs: "pinned (cudaHostAlloc)", "locked (mlock)", "pageable"
    /// Optional: the kind as known after allocate() (e.g. whether mlock succeeded).
    std::function<std::string()> describe;
};

/// Page-aligned memory, locked with mlock when possible (falls back to pageable memory and
/// says so in `kind` when RLIMIT_MEMLOCK is too small).
[[nodiscard]] ring_allocator host_ring_allocator(bool try_lock);

struct ring_counters {
    std::uint64_t samples_written = 0;   ///< accepted into the ring
    std::uint64_t samples_read = 0;
    std::uint64_t samples_dropped = 0;   ///< overflow (drop policy)
    /// Offered after close() or abort() (the run was ending), so never read: the samples a
    /// source still delivered while paqd stopped.
    std::uint64_t samples_refused = 0;
    std::uint64_t overflows = 0;         ///< overflow episodes (one per gap marker they made)
    std::uint64_t gaps = 0;              ///< gap markers read, any reason
    std::uint64_t producer_waits = 0;    ///< times the producer waited for space (block policy)
    std::uint64_t gaps_coalesced = 0;    ///< gaps merged into others because max_markers were queued
    std::uint64_t anchors = 0;           ///< time anchors read: one a read at most (the latest of those its samples hold)
    std::uint64_t anchors_superseded = 0; ///< in a read's samples before its latest anchor, so not returned
    std::uint64_t anchors_dropped = 0;   ///< with their sample (overflow), or beyond max_markers queued
    std::size_t fill = 0;                ///< samples in the ring now
    std::size_t high_water = 0;          ///< largest fill seen
    std::size_t capacity = 0;
};

class sample_ring {
public:
    /// Gap markers queued at most (see the header comment).
    static constexpr std::size_t default_max_markers = 65536;

    /// \param max_markers gap markers queued at most, >= 2
    /// \param ci16_scale set: the ring holds ci16 samples standing for to_cf32(s, *ci16_scale)
    /// (> 0 and finite, else std::invalid_argument); unset: cf32 samples
    /// \param channels 1, or 2: the ring holds cf32x2 samples (ci16_scale unset); else
    /// std::invalid_argument
    sample_ring(std::size_t capacity_samples, overflow_policy policy, ring_allocator alloc,
                std::size_t max_markers = default_max_markers, std::optional<float> ci16_scale = std::nullopt,
                int channels = 1);
    ~sample_ring();
    sample_ring(const sample_ring&) = delete;
    sample_ring& operator=(const sample_ring&) = delete;

    // ---- producer (one thread)
    /// Copies samples in (blocking or dropping when full, by policy). Returns the number
    /// accepted. After close() or abort() nothing is accepted.
    std::size_t write(std::span<const cf32> samples);
    /// The same for a ci16 ring, and for a ring of two channels. Each write throws
    /// std::logic_error on a ring of another width.
    std::size_t write(std::span<const ci16> samples);
    std::size_t write(std::span<const cf32x2> samples);
    /// The zero-copy write, for a source that can read its samples straight into the ring
    /// (a file): room for up to `max` samples of the ring's width (check_width), contiguous in
    /// the ring's storage (fewer where the storage wraps), which the producer fills and then
    /// hands over with commit(). Under the block policy it waits for room, as write() does, and
    /// for `at_least` samples of it (at most a quarter of the capacity), so that the producer
    /// fills large pieces while the consumer drains a full ring in small reads.
    /// Empty when nothing may be written in place: closed or aborted, or (drop policy) full or
    /// merging a gap flood; the producer then calls write(), which counts what it drops.
    template <class T>
    [[nodiscard]] std::span<T> reserve(std::size_t max, std::size_t at_least = 1);
    /// The first n samples of the last reserve() (n <= its size, else std::logic_error) are
    /// in the stream, as if given to write(): time anchors, arrival time and counters alike.
    /// Dropped, as write() drops, when the ring was closed or aborted meanwhile.
    void commit(std::size_t n);
    /// A gap in the stream before the next samples.
    void gap(std::uint64_t lost_samples, gap_reason reason);
    /// A time anchor: sample `offset` of the next write() (0: its first; beyond its end: of
    /// the writes after it, counting on) was taken at utc_ns (UTC, ns since 1970).
    void timestamp(std::int64_t utc_ns, std::uint64_t offset = 0);
    /// End of stream: the consumer reads what is left, then `end`.
    void close();

    // ---- consumer (one thread)
    struct read_result {
        enum class kind : std::uint8_t { samples, gap, timeout, end } what = kind::timeout;
        std::size_t count = 0;              ///< samples copied to out (kind::samples)
        std::uint64_t lost_samples = 0;     ///< kind::gap
        gap_reason reason = gap_reason::overflow;
        /// kind::gap: the ring's own overflow, whose samples ring_counters::samples_dropped
        /// counts; false for every gap a source reported (gap()), an overflow before the ring
        /// (a recorded one, say) included.
        bool dropped_by_ring = false;
        /// kind::samples: when the last of them was written into the ring (for latency
        /// from the moment a sample arrived, time in the ring included).
        std::chrono::steady_clock::time_point written{};
        /// kind::samples: the latest time anchor among them: out[anchor_offset] was taken at
        /// anchor_utc_ns (UTC, ns since 1970).
        struct anchor {
            std::size_t offset = 0;
            std::int64_t utc_ns = 0;
        };
        std::optional<anchor> time;
    };
    /// Copies up to out.size() contiguous samples (never across a gap), or returns the next
    /// gap, waiting at most `timeout` for either.
    read_result read(std::span<cf32> out, std::chrono::milliseconds timeout);
    /// The same for a ci16 ring, and for a ring of two channels. Each read throws
    /// std::logic_error on a ring of another width.
    read_result read(std::span<ci16> out, std::chrono::milliseconds timeout);
    read_result read(std::span<cf32x2> out, std::chrono::milliseconds timeout);

    // ---- either thread
    /// Wakes a producer blocked on a full ring (shutdown); later writes are refused.
    void abort();
    [[nodiscard]] ring_counters counters() const;
    [[nodiscard]] overflow_policy policy() const noexcept { return policy_; }
    [[nodiscard]] const std::string& memory_kind() const noexcept { return alloc_.kind; }
    /// The samples' width: ci16 (with this scale), or cf32 (nullopt).
    [[nodiscard]] std::optional<float> ci16_scale() const noexcept { return ci16_scale_; }
    [[nodiscard]] bool is_ci16() const noexcept { return ci16_scale_.has_value(); }
    /// Receive channels per sample time: 1, or 2 (cf32x2 samples).
    [[nodiscard]] int channels() const noexcept { return channels_; }
    /// Bytes a sample takes in the ring: 4 (ci16), 8 (cf32) or 16 (cf32x2).
    [[nodiscard]] std::size_t sample_bytes() const noexcept { return sample_bytes_; }

    /// The arrival times kept for the batch latency: one entry per write, but writes within
    /// arrival_resolution of the previous entry share it, and never more than
    /// max_arrival_entries (16 bytes each: 1 MiB at most), whatever the write sizes.
    static constexpr std::chrono::milliseconds arrival_resolution{1};
    static constexpr std::size_t max_arrival_entries = 65536;
    /// Entries held now (at most max_arrival_entries).
    [[nodiscard]] std::size_t arrival_entries() const;

private:
    template <class T>
    std::size_t write_samples(std::span<const T> samples);
    template <class T>
    read_result read_samples(std::span<T> out, std::chrono::milliseconds timeout);
    /// Throws std::logic_error unless the ring holds samples of width `bytes` (`what` names the call).
    void check_width(std::size_t bytes, const char* what) const;

    struct marker {
        std::uint64_t position;  ///< in samples written before it
        std::uint64_t lost;
        gap_reason reason;
        bool dropped_by_ring;  ///< the ring's own overflow (read_result::dropped_by_ring)
    };
    void push_marker_locked(std::uint64_t lost, gap_reason reason, bool dropped_by_ring = false);
    /// Samples [pos, pos + m), already in the storage, join the stream: the pending anchor
    /// when its sample is among them (`offset`: their index in the producer's write), head,
    /// arrival time, counters; the consumer is woken.
    void publish_locked(std::uint64_t pos, std::size_t m, std::size_t offset);
    /// The pending anchor's offset counted past a write of n samples that did not hold it.
    void pass_pending_anchor_locked(std::size_t n);
    /// Room for the producer without waiting, or 0 (block policy waits for it in the callers).
    [[nodiscard]] std::size_t space_locked() const noexcept { return capacity_ - static_cast<std::size_t>(head_ - tail_); }
    /// Places the overflow marker and, once the markers have drained to half (or `force`,
    /// at close), the coalesced gaps.
    void flush_pending_drop_locked(bool force = false);
    /// The pending anchor's sample is among samples [dropped_from, n) of this write, dropped.
    void drop_pending_anchor_locked(std::size_t dropped_from, std::size_t n);

    const std::size_t capacity_;
    const std::size_t max_markers_;
    const overflow_policy policy_;
    const std::optional<float> ci16_scale_;
    const int channels_;
    const std::size_t sample_bytes_;
    ring_allocator alloc_;
    std::byte* data_ = nullptr;  ///< capacity_ samples of sample_bytes_ each

    mutable std::mutex mu_;
    std::condition_variable data_cv_;   ///< consumer waits for samples / markers / close
    std::condition_variable space_cv_;  ///< producer waits for space (block policy)
    std::uint64_t head_ = 0;            ///< total samples written (producer position)
    std::uint64_t tail_ = 0;            ///< total samples read (consumer position)
    std::deque<marker> markers_;
    struct anchor_marker {
        std::uint64_t position;  ///< the sample's index in samples written
        std::int64_t utc_ns;
    };
    std::deque<anchor_marker> anchors_;
    /// timestamp() given, its sample not yet written: its offset into the next write.
    std::optional<anchor_marker> pending_anchor_;
    /// (head after a write, when): the arrival time of every sample still in the ring.
    std::deque<std::pair<std::uint64_t, std::chrono::steady_clock::time_point>> writes_;
    std::uint64_t pending_drop_ = 0;    ///< dropped, marker not yet placed (drop policy)
    /// The last reserve(): where its room starts (head_ then) and how long it is.
    std::uint64_t reserved_at_ = 0;
    std::size_t reserved_ = 0;
    /// Coalescing a marker flood (drop policy): the sources' lost counts by reason, and
    /// whether any gap of that reason was merged (a gap of 0 = unknown samples counts too).
    std::array<std::uint64_t, num_gap_reasons> pending_lost_{};
    std::array<bool, num_gap_reasons> pending_gap_{};
    /// A gap of unknown size (0) was merged: the sum is then no exact count of the samples
    /// lost, and a second marker of 0 follows it (the consumer drops the time, see timestamp).
    std::array<bool, num_gap_reasons> pending_unknown_{};
    bool coalescing_ = false;
    bool closed_ = false;
    bool aborted_ = false;
    ring_counters stats_;
};

/// The source-facing side of a ring: a sample_sink that writes into it.
/// The source's time anchors (their sample_index counts the samples it wrote) become the
/// ring's (an offset into the next write); an anchor for a sample already written is ignored
/// (sources anchor the write that holds the sample: io/sample_source.hpp).
/// Widths: ci16 samples go into a ci16 ring as they are (their scale must be the ring's), and
/// into a cf32 ring converted (to_cf32, on the source's thread); cf32 samples into a ci16 ring
/// are refused (std::logic_error: the ring is made in the source's width, ci16_scale(), so
/// this is a source that broke its word, and ends the run as a source error).
class ring_sink final : public sample_sink {
public:
    explicit ring_sink(sample_ring& ring) : ring_(ring) {}
    void write(std::span<const cf32> samples) override
    {
        if (ring_.is_ci16()) throw std::logic_error("the source delivered cf32 samples into a ring made for its ci16 samples");
        ring_.write(samples);
        written_ += samples.size();
    }
    void write_ci16(std::span<const ci16> samples, float scale) override
    {
        if (!ring_.is_ci16()) {
            sample_sink::write_ci16(samples, scale);  // converted, through write()
            return;
        }
        if (scale != *ring_.ci16_scale()) {
            throw std::logic_error("the source delivered ci16 samples at scale " + std::to_string(scale) +
                                   " into a ring made for scale " + std::to_string(*ring_.ci16_scale()));
        }
        ring_.write(samples);
        written_ += samples.size();
    }
    /// A source that reads straight into memory fills the ring's room itself (sample_ring::
    /// reserve): no copy on the source's thread. Where the ring has no room to give (drop
    /// policy and full, closed, or the other width), `scratch` and write() as by default.
    /// Under the block policy the ring waits until it has room for a quarter of the scratch
    /// (sample_ring::reserve's at_least).
    std::size_t write_from(std::span<cf32> scratch, const fill_fn<cf32>& fill) override
    {
        if (ring_.is_ci16()) throw std::logic_error("the source delivered cf32 samples into a ring made for its ci16 samples");
        return fill_in_place<cf32>(scratch, fill, [&] { return sample_sink::write_from(scratch, fill); });
    }
    std::size_t write_ci16_from(std::span<ci16> scratch, float scale, const fill_fn<ci16>& fill) override
    {
        if (!ring_.is_ci16() || scale != *ring_.ci16_scale()) return sample_sink::write_ci16_from(scratch, scale, fill);
        return fill_in_place<ci16>(scratch, fill, [&] { return sample_sink::write_ci16_from(scratch, scale, fill); });
    }
    /// Two channels' samples into a ring of two channels (std::logic_error into another).
    void write_x2(std::span<const cf32x2> samples) override
    {
        ring_.write(samples);
        written_ += samples.size();
    }
    std::size_t write_x2_from(std::span<cf32x2> scratch, const fill_fn<cf32x2>& fill) override
    {
        if (ring_.channels() != 2) throw std::logic_error("the source delivered two channels into a ring made for one");
        return fill_in_place<cf32x2>(scratch, fill, [&] { return sample_sink::write_x2_from(scratch, fill); });
    }
    void gap(std::uint64_t lost_samples, gap_reason reason) override { ring_.gap(lost_samples, reason); }
    void timestamp(const time_anchor& anchor) override
    {
        if (anchor.sample_index >= written_) ring_.timestamp(anchor.utc_ns, anchor.sample_index - written_);
    }

private:
    template <class T, class Fallback>
    std::size_t fill_in_place(std::span<T> scratch, const fill_fn<T>& fill, Fallback&& fallback)
    {
        const std::span<T> room = ring_.reserve<T>(scratch.size(), std::max<std::size_t>(1, scratch.size() / 4));
        if (room.empty()) return fallback();  // write() counts it, written_ through write()
        const std::size_t n = fill(room);
        ring_.commit(n);
        written_ += n;
        return n;
    }

    sample_ring& ring_;
    std::uint64_t written_ = 0;  ///< samples the source wrote (accepted or dropped by the ring)
};

}  // namespace paq::io
