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

void batcher::emit_ready()
{
    for (;;) {
        const std::uint64_t buf_end = buf_start_ + buf_.size();
        const std::uint64_t need_end = owned_next_ + batch_samples_ + batch_guard_after;
        if (buf_end < need_end) return;
        const std::uint64_t w0 = std::max(seg_start_, owned_next_ > batch_guard_before ? owned_next_ - batch_guard_before : 0);
        sample_batch b;
        b.index = next_index_++;
        b.first_sample = w0;
        b.samples.assign(buf_.begin() + static_cast<std::ptrdiff_t>(w0 - buf_start_),
                         buf_.begin() + static_cast<std::ptrdiff_t>(need_end - buf_start_));
        b.owned_begin = owned_next_ - w0;
        b.owned_end = b.owned_begin + batch_samples_;
        b.segment_start = owned_next_ == seg_start_;
        b.lost_samples_before = b.segment_start ? lost_before_segment_ : 0;
        ready_.push_back(std::move(b));
        owned_next_ += batch_samples_;
        // Keep what the next window needs before its owned range.
        const std::uint64_t keep_from = std::max(seg_start_, owned_next_ > batch_guard_before ? owned_next_ - batch_guard_before : 0);
        buf_.erase(buf_.begin(), buf_.begin() + static_cast<std::ptrdiff_t>(keep_from - buf_start_));
        buf_start_ = keep_from;
    }
}

void batcher::flush_segment(std::uint64_t lost_after)
{
    const std::uint64_t buf_end = buf_start_ + buf_.size();
    if (buf_end > owned_next_) {
        const std::uint64_t w0 = std::max(seg_start_, owned_next_ > batch_guard_before ? owned_next_ - batch_guard_before : 0);
        sample_batch b;
        b.index = next_index_++;
        b.first_sample = w0;
        b.samples.assign(buf_.begin() + static_cast<std::ptrdiff_t>(w0 - buf_start_), buf_.end());
        b.owned_begin = owned_next_ - w0;
        b.owned_end = buf_end - w0;
        b.segment_start = owned_next_ == seg_start_;
        b.segment_end = true;
        b.lost_samples_before = b.segment_start ? lost_before_segment_ : 0;
        ready_.push_back(std::move(b));
    }
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
