// Cuts a sample stream into overlapping batch windows (SPEC 3, layout in dsp/batch.hpp).
// Every packet whose preamble peak lies in the stream is owned by exactly one batch, across
// batch boundaries and across gaps; a gap ends a segment, and no packet spans a gap.
#pragma once

#include "dsp/batch.hpp"

#include <deque>
#include <optional>
#include <span>

namespace paq::dsp {

class batcher {
public:
    /// \param batch_samples new samples per batch (B), >= 1
    explicit batcher(std::size_t batch_samples);

    /// Appends contiguous samples.
    void push(std::span<const cf32> samples);
    /// The stream lost `lost_samples` samples here: the current segment is flushed and a new
    /// one starts after the gap (absolute indices keep counting through the gap).
    void gap(std::uint64_t lost_samples);
    /// End of stream: flushes what is left.
    void finish();
    /// Next ready batch, in order.
    [[nodiscard]] std::optional<sample_batch> pop();

    [[nodiscard]] std::uint64_t samples_in() const noexcept { return samples_in_; }
    [[nodiscard]] std::uint64_t samples_lost() const noexcept { return samples_lost_; }

private:
    void emit_ready();
    void flush_segment(std::uint64_t lost_after);
    /// First sample of the next window: guard_before ahead of owned_next_, not before the segment.
    [[nodiscard]] std::uint64_t window_start() const noexcept;
    /// Queues the window [window_start(), window_end) owning [owned_next_, owned_end).
    void emit(std::uint64_t window_end, std::uint64_t owned_end, bool segment_end);

    std::size_t batch_samples_;
    std::vector<cf32> buf_;         ///< samples from absolute index buf_start_
    std::uint64_t buf_start_ = 0;
    std::uint64_t seg_start_ = 0;   ///< absolute index where the current segment began
    std::uint64_t owned_next_ = 0;  ///< first absolute position not yet owned by a batch
    std::uint64_t lost_before_segment_ = 0;
    std::uint64_t next_index_ = 0;
    std::uint64_t samples_in_ = 0;
    std::uint64_t samples_lost_ = 0;
    std::deque<sample_batch> ready_;
};

}  // namespace paq::dsp
