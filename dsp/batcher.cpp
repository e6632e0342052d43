#include "dsp/batcher.hpp"

#include <algorithm>
#include <stdexcept>

namespace paq::dsp {

batcher::batcher(std::size_t batch_samples) : batch_samples_(batch_samples)
{
    if (batch_samples == 0) throw std::invalid_argument("batcher: batch_samples must be >= 1");
}

void batcher::push(std::span<const cf32> samples)
{
    buf_.insert(buf_.end(), samples.begin(), samples.end());
    samples_in_ += samples.size();
    emit_ready();
}

std::uint64_t batcher::window_start() const noexcept
{
    return std::max(seg_start_, owned_next_ > batch_guard_before ? owned_next_ - batch_guard_before : 0);
}

void batcher::emit(std::uint64_t window_end, std::uint64_t owned_end, bool segment_end)
{
    const std::uint64_t w0 = window_start();
    sample_batch b;
    b.index = next_index_++;
    b.first_sample = w0;
    b.samples.assign(buf_.begin() + static_cast<std::ptrdiff_t>(w0 - buf_start_),
                     buf_.begin() + static_cast<std::ptrdiff_t>(window_end - buf_start_));
    b.owned_begin = owned_next_ - w0;
    b.owned_end = owned_end - w0;
    // The window, not just the owned range, starts at the segment start: with B < W the
    // second batch's guard is clipped too, and the detector must know.
    b.segment_start = w0 == seg_start_;
    b.segment_end = segment_end;
    b.lost_samples_before = owned_next_ == seg_start_ ? lost_before_segment_ : 0;
    ready_.push_back(std::move(b));
}

void batcher::emit_ready()
{
    for (;;) {
        const std::uint64_t owned_end = owned_next_ + batch_samples_;
        const std::uint64_t window_end = owned_end + batch_guard_after;
        if (buf_start_ + buf_.size() < window_end) return;
        emit(window_end, owned_end, false);
        owned_next_ = owned_end;
        // Keep only what the next window needs before its owned range.
        const std::uint64_t keep_from = window_start();
        buf_.erase(buf_.begin(), buf_.begin() + static_cast<std::ptrdiff_t>(keep_from - buf_start_));
        buf_start_ = keep_from;
    }
}

void batcher::flush_segment(std::uint64_t lost_after)
{
    const std::uint64_t buf_end = buf_start_ + buf_.size();
    if (buf_end > owned_next_) emit(buf_end, buf_end, true);
    seg_start_ = buf_end + lost_after;
    owned_next_ = seg_start_;
    buf_.clear();
    buf_start_ = seg_start_;
    lost_before_segment_ = lost_after;
}

void batcher::gap(std::uint64_t lost_samples)
{
    samples_lost_ += lost_samples;
    flush_segment(lost_samples);
}

void batcher::finish() { flush_segment(0); }

std::optional<sample_batch> batcher::pop()
{
    if (ready_.empty()) return std::nullopt;
    auto b = std::move(ready_.front());
    ready_.pop_front();
    return b;
}

}  // namespace paq::dsp
