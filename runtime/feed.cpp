#include "runtime/feed.hpp"

#include <algorithm>
#include <stdexcept>
#include <type_traits>

namespace paq::runtime {

feed::result ring_feed::read(std::span<cf32> out, std::chrono::milliseconds timeout)
{
    return ring_.read(out.first(std::min(out.size(), max_read_samples)), timeout);
}

feed::result ring_feed::read(std::span<ci16> out, std::chrono::milliseconds timeout)
{
    return ring_.read(out.first(std::min(out.size(), max_read_samples)), timeout);
}

template <class T>
feed::result reader_feed<T>::read_own(std::span<T> out)
{
    result r;
    if (ended_) {
        r.what = result::kind::end;
        return r;
    }
    // The anchors at the next sample: a discontinuity is a gap first, then the time.
    std::optional<std::int64_t> utc;
    while (next_anchor_ < anchors_.size() && anchors_[next_anchor_].sample <= samples_read_) {
        const auto& a = anchors_[next_anchor_];
        if (a.sample < samples_read_) {  // out of order: already past it
            ++next_anchor_;
            continue;
        }
        if (a.discontinuity && samples_read_ > 0 && !gap_given_) {
            gap_given_ = true;
            r.what = result::kind::gap;
            r.reason = io::gap_reason::discontinuity;
            return r;
        }
        gap_given_ = false;
        utc = a.utc_ns;
        ++next_anchor_;
    }
    std::size_t want = std::min(out.size(), max_read_samples);
    if (next_anchor_ < anchors_.size()) {
        want = static_cast<std::size_t>(std::min<std::uint64_t>(want, anchors_[next_anchor_].sample - samples_read_));
    }
    const std::size_t n = read_(out.first(want));
    if (n == 0) {
        ended_ = true;
        r.what = result::kind::end;
        return r;
    }
    if (n > want) throw std::logic_error("reader_feed: the read function returned more samples than it was given room for");
    samples_read_ += n;
    r.what = result::kind::samples;
    r.count = n;
    r.written = std::chrono::steady_clock::now();
    if (utc) r.time = result::anchor{0, *utc};
    return r;
}

template <class T>
feed::result reader_feed<T>::read(std::span<cf32> out, std::chrono::milliseconds)
{
    if constexpr (std::is_same_v<T, cf32>) {
        return read_own(out);
    } else {
        throw std::logic_error("reader_feed: a cf32 read from a ci16 recording");
    }
}

template <class T>
feed::result reader_feed<T>::read(std::span<ci16> out, std::chrono::milliseconds)
{
    if constexpr (std::is_same_v<T, ci16>) {
        return read_own(out);
    } else {
        throw std::logic_error("reader_feed: a ci16 read from a cf32 recording");
    }
}

template class reader_feed<cf32>;
template class reader_feed<ci16>;

}  // namespace paq::runtime
