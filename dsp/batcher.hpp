// Cuts a sample stream into overlapping batch windows (layout in dsp/batch.hpp).
// Every packet whose preamble peak lies in the stream is owned by exactly one batch, across
// batch boundaries and across gaps; a gap ends a segment, and no packet spans a gap.
#pragma once

#include "dsp/batch.hpp"

#include <deque>
#include <optional>
#include <type_traits>
#include <span>
#include <vector>

namespace paq::dsp {

/// A sub-window of a batch window that owns one share of the batch's owned range, with the
/// same guards the batcher gives a batch (dsp/batch.hpp). Positions are relative to the
/// batch window. Processing the parts one by one gives exactly the packets, in the same
/// order, that the whole window gives: each part is a window the batcher itself could have
/// cut (test batching.parts_give_what_the_whole_batch_gives). The GPU backend uses it to
/// work on one part while the next is still uploading.
struct batch_part {
    std::size_t offset = 0;       ///< first sample of the part's window in the batch window
    std::size_t length = 0;       ///< samples in the part's window
    std::size_t owned_begin = 0;  ///< owned range, relative to the part's window
    std::size_t owned_end = 0;
    bool segment_start = false;   ///< the part's window starts where the batch's segment does
    bool segment_end = false;     ///< the part's window ends where the batch's segment does
};

/// Splits the batch's owned range into `parts` shares as equal as possible (fewer where the
/// range is shorter than `parts` samples; none for an empty range). Throws
/// std::invalid_argument for parts == 0 or an owned range outside the window.
[[nodiscard]] std::vector<batch_part> split_batch(const sample_batch& batch, std::size_t parts);
/// The same with the given guards (input-domain windows of a resampled input).
[[nodiscard]] std::vector<batch_part> split_batch(const sample_batch& batch, std::size_t parts, std::size_t guard_before,
                                                  std::size_t guard_after);

/// The part as a batch of its own (a copy of its samples): what a backend without the split
/// would be given. For tests and the CPU reference.
[[nodiscard]] sample_batch part_batch(const sample_batch& batch, const batch_part& part);

/// A ci16 batch as cf32, into `out` (its storage reused): the samples converted with
/// to_cf32, everything else copied. What a backend that computes on cf32 (the CPU reference)
/// does first with a ci16 window. Throws std::invalid_argument for a batch that is not ci16.
void widen_batch(const sample_batch& in, sample_batch& out);

/// One channel (0 or 1) of a two-channel batch as a cf32 batch, into `out` (its storage
/// reused), everything else copied: how a backend reads a two-channel window. Throws
/// std::invalid_argument for a batch that is not two-channel or another channel.
void channel_batch(const sample_batch& in, int channel, sample_batch& out);

/// Largest part window when windows of at most batch_samples + both guards are split into
/// `parts` (for one part: that whole window).
[[nodiscard]] std::size_t max_part_window(std::size_t batch_samples, std::size_t parts);
[[nodiscard]] std::size_t max_part_window(std::size_t batch_samples, std::size_t parts, std::size_t guard_before,
                                          std::size_t guard_after);

/// Where a batcher of T keeps its windows: cf32 in std::vector (sample_batch::samples), ci16
/// in storage that is not written when it grows (sample_batch::samples_ci16).
template <class T>
using window_storage_t = std::conditional_t<std::is_same_v<T, ci16>, window_vector<ci16>, std::vector<T>>;

/// The window of width T a batch holds: samples_ci16 for ci16, samples for cf32.
template <class T>
[[nodiscard]] window_storage_t<T>& window_of(sample_batch& b) noexcept
{
    if constexpr (std::is_same_v<T, ci16>) {
        return b.samples_ci16;
    } else if constexpr (std::is_same_v<T, cf32x2>) {
        return b.samples_x2;
    } else {
        return b.samples;
    }
}

/// Where a batcher's window storage comes from and goes back to. A window is made once at a
/// full window's capacity and never grows past it, so its address is fixed for its life (a
/// backend may page-lock it). The stream engine's runtime::window_pool owns its windows and
/// their page locks; a batcher given none keeps a free list of its own.
template <class T>
class window_provider {
public:
    using storage = window_storage_t<T>;
    virtual ~window_provider() = default;
    /// A window's storage: capacity >= the window size the provider was made for; its size
    /// and contents are whatever the last user left (a new one is empty).
    [[nodiscard]] virtual storage acquire() = 0;
    /// Storage back from a batch done with it (from any thread, for a shared provider).
    virtual void release(storage&& window) = 0;
};

/// The batcher for samples of type T: cf32, or ci16 kept at the source's width (its windows
/// go out in sample_batch::samples_ci16 with the scale given here; the backend converts them).
template <class T>
class basic_batcher {
public:
    using storage = window_storage_t<T>;

    /// \param batch_samples new samples per batch (B), >= 1
    /// \param guard_before, guard_after the guards around the owned range (dsp/batch.hpp);
    /// larger than batch_guard_before/after when the input is resampled (input_geometry)
    /// \param ci16_scale (ci16 only) counts per unit of amplitude, stamped on every window;
    /// must be positive and finite
    /// \param windows where the windows come from (max_window_samples() each) and go back to;
    /// it must outlive the batcher. nullptr: a free list of the batcher's own.
    explicit basic_batcher(std::size_t batch_samples, std::size_t guard_before = batch_guard_before,
                           std::size_t guard_after = batch_guard_after, float ci16_scale = 1.0f,
                           window_provider<T>* windows = nullptr);

    /// Appends contiguous samples (a copy into the window being filled).
    void push(std::span<const T> samples);
    /// The same without the copy: where the next samples go, in the window being filled (at
    /// least one sample, at most up to that window's end). Write k of them, then commit(k).
    [[nodiscard]] std::span<T> write_space();
    /// The first n samples of the last write_space() are the stream's next samples. Throws
    /// std::invalid_argument if n is more than write_space() gave.
    void commit(std::size_t n);
    /// The stream lost `lost_samples` samples here: the current segment is flushed and a new
    /// one starts after the gap (absolute indices keep counting through the gap, by at most
    /// max_index_advance per gap and never past max_absolute_index: `lost_samples` is counted
    /// whole, but a hostile or corrupt count near 2^64 cannot wrap the indices).
    void gap(std::uint64_t lost_samples);
    /// Time anchor (io/sample_source.hpp): the sample `offset` samples after the last one
    /// pushed or committed (0: the next one) was taken at utc_ns (UTC, ns since 1970), and the
    /// stream's samples are sample_rate_hz apart (> 0). Every window cut from now on in this
    /// segment carries the latest such time (sample_batch::time). A gap of unknown size
    /// (gap(0)), or one whose size the index cannot follow (beyond max_index_advance), makes
    /// the time unknown until the next anchor; across a gap of known size it carries on.
    /// Throws std::invalid_argument for a rate that is not positive and finite.
    void timestamp(std::int64_t utc_ns, double sample_rate_hz, std::size_t offset = 0);
    /// End of stream: flushes what is left.
    void finish();
    /// Next ready batch, in order.
    [[nodiscard]] std::optional<sample_batch> pop();

    /// Hands back a batch's sample storage once the batch is done with (to the window
    /// provider): the next windows are filled in it instead of in fresh allocations (a default
    /// window is ~315 MB, whose first touch costs page faults every batch). The batcher's own
    /// free list keeps at most max_spares (more than a pipeline ever has in flight).
    void recycle(storage&& window);
    static constexpr std::size_t max_spares = 16;
    /// Gives the window being filled (its samples dropped) back to the provider. For a
    /// batcher that is done (after finish() and the last pop()): nothing is cut from it
    /// afterwards.
    void release_storage();

    /// The largest window: batch_samples + both guards. The batcher fills windows in place,
    /// in storage reserved for this many samples that never grows past it (a backend may
    /// page-lock such storage once and see it again and again).
    [[nodiscard]] std::size_t max_window_samples() const noexcept;

    [[nodiscard]] std::uint64_t samples_in() const noexcept { return samples_in_; }
    [[nodiscard]] std::uint64_t samples_lost() const noexcept { return samples_lost_; }
    /// Samples of segments shorter than one packet (between two gaps, or a gap and the end):
    /// no packet fits in them, so they make no batch (a flood of gaps would otherwise make a
    /// batch per datagram). Counted here; they are in samples_in() too.
    [[nodiscard]] std::uint64_t samples_in_short_segments() const noexcept { return samples_short_; }
    [[nodiscard]] std::uint64_t short_segments() const noexcept { return short_segments_; }

    /// The most the absolute index advances for one gap (2^40 samples: 14.8 hours at
    /// 20.625 MS/s). Larger gaps are counted whole but advance the index by this much.
    static constexpr std::uint64_t max_index_advance = std::uint64_t{1} << 40;
    /// The absolute index never passes this (2^62); gaps beyond it do not advance it.
    static constexpr std::uint64_t max_absolute_index = std::uint64_t{1} << 62;

private:
    void emit_ready();
    void flush_segment(std::uint64_t lost_after);
    /// First sample of the next window: guard_before ahead of owned_next_, not before the segment.
    [[nodiscard]] std::uint64_t window_start() const noexcept;
    /// Queues the window [window_start(), window_end) owning [owned_next_, owned_end); the
    /// samples from keep_from on stay for the next window.
    void emit(std::uint64_t window_end, std::uint64_t owned_end, bool segment_end, std::uint64_t keep_from);
    /// Storage for the samples from buf_start_: a spare, or a new one with a window reserved.
    [[nodiscard]] storage fresh_storage();
    /// The held samples [buf_start_, window_end) as a window's storage (the buffer itself);
    /// buf_ then holds [keep_from, end) in new storage.
    [[nodiscard]] storage take_window(std::uint64_t window_end, std::uint64_t keep_from);

    std::size_t batch_samples_;
    std::size_t guard_before_;
    std::size_t guard_after_;
    storage buf_;                   ///< a full window's size; its first held_ are samples from buf_start_
    std::size_t held_ = 0;
    std::size_t given_ = 0;         ///< room handed out by the last write_space(), for commit()
    std::uint64_t buf_start_ = 0;
    std::uint64_t seg_start_ = 0;   ///< absolute index where the current segment began
    std::uint64_t owned_next_ = 0;  ///< first absolute position not yet owned by a batch
    std::uint64_t lost_before_segment_ = 0;
    std::uint64_t next_index_ = 0;
    std::uint64_t samples_in_ = 0;
    std::uint64_t samples_lost_ = 0;
    std::uint64_t samples_short_ = 0;
    std::uint64_t short_segments_ = 0;
    std::deque<sample_batch> ready_;
    std::optional<sample_time> time_;  ///< the latest anchor of the current segment
    float ci16_scale_ = 1.0f;
    /// The free list of a batcher made without a provider.
    class own_windows final : public window_provider<T> {
    public:
        explicit own_windows(std::size_t window_samples) : window_samples_(window_samples) {}
        storage acquire() override;
        void release(storage&& window) override;

    private:
        std::size_t window_samples_;
        std::vector<storage> spares_;
    };
    own_windows own_;
    window_provider<T>* windows_;  ///< nullptr: own_ (so that a moved batcher keeps its own)
    [[nodiscard]] window_provider<T>& windows() noexcept { return windows_ != nullptr ? *windows_ : own_; }
};

/// The UTC of absolute sample `sample` by time `t` (t.utc_ns plus the samples between, before or
/// after t.sample, at t.sample_rate_hz), rounded to the nearest ns. Exact in integers for an
/// integer rate (25 MS/s, 20.625 MS/s: any offset, no overflow); long double otherwise.
/// unknown_utc_ns when the result lies outside int64 or t's rate is not positive.
[[nodiscard]] std::int64_t utc_ns_at(const sample_time& t, std::uint64_t sample) noexcept;

using batcher = basic_batcher<cf32>;
using batcher_ci16 = basic_batcher<ci16>;
using batcher_x2 = basic_batcher<cf32x2>;  ///< two receive channels (sample_batch::samples_x2)
extern template class basic_batcher<cf32>;
extern template class basic_batcher<ci16>;
extern template class basic_batcher<cf32x2>;

}  // namespace paq::dsp
