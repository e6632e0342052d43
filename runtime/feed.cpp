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

feed::result ring_feed::read(std::span<cf32x2> out, std::chrono::milliseconds timeout)
{
    return ring_.read(out.first(std::min(out.size(), max_read_samples)), timeout);
}

feed::result feed::read(std::span<cf32x2>, std::chrono::milliseconds)
{
    throw std::logic_error("feed: a two-channel read from a feed of one channel");
}

template <class T>
feed::result reader_feed<T>::read_own(std::span<T> out)
{
    result r;
    if (ended_) {
        r.what = result::kind::end;
        return r;
    }
    // The marks before the next sample: each gap, then the time.
    std::optional<std::int64_t> utc;
    while (const io::recording_mark* m = marks_.next(samples_read_)) {
        if (m->what == io::recording_mark::kind::gap) {
            r.what = result::kind::gap;
            r.lost_samples = m->lost_samples;
            r.reason = m->reason;
            return r;
        }
        utc = m->utc_ns;
    }
    const std::size_t want = marks_.limit(samples_read_, std::min(out.size(), max_read_samples));
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
        throw std::logic_error("reader_feed: a cf32 read from a ci16 or two-channel recording");
    }
}

template <class T>
feed::result reader_feed<T>::read(std::span<ci16> out, std::chrono::milliseconds)
{
    if constexpr (std::is_same_v<T, ci16>) {
        return read_own(out);
    } else {
        throw std::logic_error("reader_feed: a ci16 read from a cf32 or two-channel recording");
    }
}

template <class T>
feed::result reader_feed<T>::read(std::span<cf32x2> out, std::chrono::milliseconds)
{
    if constexpr (std::is_same_v<T, cf32x2>) {
        return read_own(out);
    } else {
        throw std::logic_error("reader_feed: a two-channel read from a recording read as one channel");
    }
}

template class reader_feed<cf32>;
template class reader_feed<ci16>;
template class reader_feed<cf32x2>;

}  // namespace paq::runtime
