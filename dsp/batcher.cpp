#include "dsp/batcher.hpp"

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <stdexcept>
#include <string>

namespace paq::dsp {

std::int64_t utc_ns_at(const sample_time& t, std::uint64_t sample) noexcept
{
    const double rate = t.sample_rate_hz;
    if (!(rate > 0.0) || !std::isfinite(rate)) return unknown_utc_ns;
    const bool after = sample >= t.sample;
    const std::uint64_t offset = after ? sample - t.sample : t.sample - sample;
    constexpr std::uint64_t ns_per_s = 1'000'000'000u;
    long double d = 0.0L;  // |offset| x 1e9 / rate, ns
    if (rate == std::floor(rate) && rate <= 1.8e10) {
        // Whole seconds and the remainder apart, in integers: exact, and no product leaves 64
        // bits (the remainder is below the rate, and rate x 1e9 < 2^64).
        const auto r = static_cast<std::uint64_t>(rate);
        const std::uint64_t secs = offset / r;
        const std::uint64_t frac = ((offset % r) * ns_per_s + r / 2) / r;
        if (secs >= static_cast<std::uint64_t>(INT64_MAX) / ns_per_s) return unknown_utc_ns;
        d = static_cast<long double>(secs * ns_per_s + frac);
    } else {
        d = std::roundl(static_cast<long double>(offset) * 1.0e9L / static_cast<long double>(rate));
    }
    const long double r = static_cast<long double>(t.utc_ns) + (after ? d : -d);
    // int64's range as long double (64-bit mantissa: both bounds exact).
    if (!(r > -9223372036854775808.0L && r < 9223372036854775807.0L)) return unknown_utc_ns;
    return static_cast<std::int64_t>(r);
}

template <class T>
basic_batcher<T>::basic_batcher(std::size_t batch_samples, std::size_t guard_before, std::size_t guard_after, float ci16_scale,
                                window_provider<T>* windows)
    : batch_samples_(batch_samples),
      guard_before_(guard_before),
      guard_after_(guard_after),
      ci16_scale_(ci16_scale),
      own_(batch_samples + guard_before + guard_after),
      windows_(windows)
{
    if (batch_samples == 0) throw std::invalid_argument("batcher: batch_samples must be >= 1");
    if (!(ci16_scale > 0.0f) || !std::isfinite(ci16_scale)) {
        throw std::invalid_argument("batcher: the ci16 scale must be positive and finite, not " + std::to_string(ci16_scale));
    }
}

template <class T>
void basic_batcher<T>::push(std::span<const T> samples)
{
    while (!samples.empty()) {
        const auto space = write_space();
        const std::size_t n = std::min(space.size(), samples.size());
        std::copy_n(samples.begin(), n, space.begin());
        commit(n);
        samples = samples.subspan(n);
    }
}

template <class T>
std::span<T> basic_batcher<T>::write_space()
{
    // Up to where the next window ends: the buffer never holds more than one window, so
    // storage reserved for a window (and page-locked by a backend) never grows.
    if (buf_.capacity() == 0) buf_ = fresh_storage();
    const std::uint64_t window_end = owned_next_ + batch_samples_ + guard_after_;
    const std::uint64_t held_end = buf_start_ + held_;
    const auto room = static_cast<std::size_t>(std::min<std::uint64_t>(window_end - held_end, max_window_samples() - held_));
    // The storage stays at a window's full size; held_ says how much of it holds samples.
    // (Growing a std::vector value-initializes: sizing each window as it filled zeroed ~300 MB
    // per default batch, a second of a 32 s replay.)
    if (buf_.size() < held_ + room) buf_.resize(max_window_samples());
    given_ = room;
    return std::span<T>(buf_).subspan(held_, room);
}

template <class T>
void basic_batcher<T>::commit(std::size_t n)
{
    if (n > given_) {
        throw std::invalid_argument("batcher::commit: " + std::to_string(n) + " samples but only " + std::to_string(given_) +
                                    " were given by write_space()");
    }
    given_ = 0;
    held_ += n;
    samples_in_ += n;
    emit_ready();
}

template <class T>
auto basic_batcher<T>::fresh_storage() -> storage
{
    storage v = windows().acquire();
    // Made at a window's full capacity: growing it here would move it (and a page lock with it).
    if (v.capacity() < max_window_samples()) {
        throw std::logic_error("batcher: a window from the provider holds " + std::to_string(v.capacity()) + " samples, not " +
                               std::to_string(max_window_samples()));
    }
    // At a window's full size: a new cf32 storage is zero-filled once in its life, a spare
    // only where it was shorter than a full window; ci16 storage is not written when it grows
    // (dsp/window_allocator.hpp): its pages fault in where the reader first writes them.
    if (v.size() < max_window_samples()) v.resize(max_window_samples());
    return v;
}

template <class T>
auto basic_batcher<T>::own_windows::acquire() -> storage
{
    storage v;
    if (!spares_.empty()) {
        v = std::move(spares_.back());
        spares_.pop_back();
    }
    if (v.capacity() < window_samples_) v.reserve(window_samples_);
    return v;
}

template <class T>
void basic_batcher<T>::own_windows::release(storage&& window)
{
    if (spares_.size() < max_spares && window.capacity() >= window_samples_) spares_.push_back(std::move(window));
}

template <class T>
auto basic_batcher<T>::take_window(std::uint64_t window_end, std::uint64_t keep_from) -> storage
{
    // The buffer becomes the window (no copy of the window's samples); what the next window
    // needs from keep_from on (its guard and samples already written) goes to new storage.
    storage next = fresh_storage();
    const auto keep = static_cast<std::size_t>(keep_from - buf_start_);
    std::copy(buf_.begin() + static_cast<std::ptrdiff_t>(keep), buf_.begin() + static_cast<std::ptrdiff_t>(held_), next.begin());
    storage window = std::move(buf_);
    window.resize(static_cast<std::size_t>(window_end - buf_start_));
    buf_ = std::move(next);
    held_ -= keep;
    buf_start_ = keep_from;
    return window;
}

template <class T>
std::uint64_t basic_batcher<T>::window_start() const noexcept
{
    return std::max(seg_start_, owned_next_ > guard_before_ ? owned_next_ - guard_before_ : 0);
}

template <class T>
void basic_batcher<T>::emit(std::uint64_t window_end, std::uint64_t owned_end, bool segment_end, std::uint64_t keep_from)
{
    const std::uint64_t w0 = window_start();
    // The window must lie inside the samples held and own a range inside itself. The
    // arithmetic above keeps this true for any input (indices are bounded in gap()); a
    // violation is a bug, and it must never become a read outside buf_.
    const std::uint64_t buf_end = buf_start_ + held_;
    // The held samples start where the window does (trimmed to keep_from after each window).
    if (w0 != buf_start_ || window_end > buf_end || w0 > owned_next_ || owned_next_ > owned_end || owned_end > window_end) {
        throw std::logic_error("batcher: window [" + std::to_string(w0) + ", " + std::to_string(window_end) +
                               ") owning [" + std::to_string(owned_next_) + ", " + std::to_string(owned_end) +
                               ") is outside the samples held [" + std::to_string(buf_start_) + ", " +
                               std::to_string(buf_end) + ")");
    }
    if (keep_from < w0 || keep_from > buf_end) {
        throw std::logic_error("batcher: keeping from " + std::to_string(keep_from) + " outside [" + std::to_string(w0) +
                               ", " + std::to_string(buf_end) + ")");
    }
    sample_batch b;
    b.index = next_index_++;
    b.first_sample = w0;
    if constexpr (std::is_same_v<T, ci16>) {
        b.samples_ci16 = take_window(window_end, keep_from);
        b.ci16_scale = ci16_scale_;
    } else {
        window_of<T>(b) = take_window(window_end, keep_from);
    }
    b.owned_begin = owned_next_ - w0;
    b.owned_end = owned_end - w0;
    // The window, not just the owned range, starts at the segment start: with B < W the
    // second batch's guard is clipped too, and the detector must know.
    b.segment_start = w0 == seg_start_;
    b.segment_end = segment_end;
    b.lost_samples_before = owned_next_ == seg_start_ ? lost_before_segment_ : 0;
    b.segment_first_sample = seg_start_;
    b.time = time_;
    ready_.push_back(std::move(b));
}

template <class T>
void basic_batcher<T>::emit_ready()
{
    for (;;) {
        const std::uint64_t owned_end = owned_next_ + batch_samples_;
        const std::uint64_t window_end = owned_end + guard_after_;
        if (buf_start_ + held_ < window_end) return;
        // Keep only what the next window needs before its owned range.
        const std::uint64_t keep_from = std::max(seg_start_, owned_end > guard_before_ ? owned_end - guard_before_ : 0);
        emit(window_end, owned_end, false, keep_from);
        owned_next_ = owned_end;
    }
}

template <class T>
void basic_batcher<T>::flush_segment(std::uint64_t lost_after)
{
    const std::uint64_t buf_end = buf_start_ + held_;
    const bool empty_segment = buf_end == seg_start_;
    if (buf_end > owned_next_) {
        if (buf_end - seg_start_ < waveform::L_pkt) {
            // The whole segment is shorter than a packet: nothing in it can be decoded.
            samples_short_ += buf_end - owned_next_;
            ++short_segments_;
        } else {
            emit(buf_end, buf_end, true, buf_end);
        }
    }
    // Bounded advance (see gap()): absolute indices stay far below 2^64 whatever the input.
    std::uint64_t advance = std::min(lost_after, max_index_advance);
    if (buf_end >= max_absolute_index) {
        advance = 0;
    } else {
        advance = std::min(advance, max_absolute_index - buf_end);
    }
    seg_start_ = buf_end + advance;
    // Time carries on across a gap whose samples the index counts; otherwise it is unknown
    // until the next anchor.
    if (lost_after == 0 || advance != lost_after) time_.reset();
    owned_next_ = seg_start_;
    held_ = 0;
    buf_start_ = seg_start_;
    // Back-to-back gaps (an empty segment between them): the next segment follows all of them.
    lost_before_segment_ = empty_segment ? saturating_add(lost_before_segment_, lost_after) : lost_after;
}

template <class T>
void basic_batcher<T>::gap(std::uint64_t lost_samples)
{
    // Saturating: the count is what the source said (bounded by the sources), but a sum of
    // hostile counts must not wrap to a small number.
    samples_lost_ = saturating_add(samples_lost_, lost_samples);
    flush_segment(lost_samples);
}

template <class T>
void basic_batcher<T>::timestamp(std::int64_t utc_ns, double sample_rate_hz, std::size_t offset)
{
    if (!(sample_rate_hz > 0.0) || !std::isfinite(sample_rate_hz)) {
        throw std::invalid_argument("batcher::timestamp: the sample rate must be positive and finite, not " +
                                    std::to_string(sample_rate_hz));
    }
    time_ = sample_time{buf_start_ + held_ + offset, utc_ns, sample_rate_hz};
}

template <class T>
void basic_batcher<T>::finish() { flush_segment(0); }

template <class T>
std::optional<sample_batch> basic_batcher<T>::pop()
{
    if (ready_.empty()) return std::nullopt;
    auto b = std::move(ready_.front());
    ready_.pop_front();
    return b;
}

template <class T>
void basic_batcher<T>::recycle(storage&& window)
{
    if (window.capacity() != 0) windows().release(std::move(window));
}

template <class T>
void basic_batcher<T>::release_storage()
{
    if (buf_.capacity() != 0) windows().release(std::move(buf_));
    buf_ = storage{};
    held_ = 0;
    given_ = 0;
}

template <class T>
std::size_t basic_batcher<T>::max_window_samples() const noexcept { return batch_samples_ + guard_before_ + guard_after_; }

template class basic_batcher<cf32>;
template class basic_batcher<ci16>;
template class basic_batcher<cf32x2>;

std::vector<batch_part> split_batch(const sample_batch& batch, std::size_t parts)
{
    return split_batch(batch, parts, batch_guard_before, batch_guard_after);
}

std::vector<batch_part> split_batch(const sample_batch& batch, std::size_t parts, std::size_t guard_before,
                                    std::size_t guard_after)
{
    if (parts == 0) throw std::invalid_argument("split_batch: parts must be >= 1");
    const std::size_t len = batch.size();
    if (batch.owned_begin > batch.owned_end || batch.owned_end > len) {
        throw std::invalid_argument("split_batch: owned range [" + std::to_string(batch.owned_begin) + ", " +
                                    std::to_string(batch.owned_end) + ") outside the window of " + std::to_string(len) + " samples");
    }
    const std::size_t owned = batch.owned_end - batch.owned_begin;
    const std::size_t n = std::min(parts, owned);
    std::vector<batch_part> out;
    out.reserve(n);
    for (std::size_t k = 0; k < n; ++k) {
        // The share [a, b) of the owned range, and around it the guards a batch gets.
        const std::size_t a = batch.owned_begin + owned * k / n, b = batch.owned_begin + owned * (k + 1) / n;
        const std::size_t w0 = a > guard_before ? a - guard_before : 0;
        const std::size_t w1 = std::min(len, b + guard_after);
        batch_part p;
        p.offset = w0;
        p.length = w1 - w0;
        p.owned_begin = a - w0;
        p.owned_end = b - w0;
        p.segment_start = batch.segment_start && w0 == 0;
        p.segment_end = batch.segment_end && w1 == len;
        out.push_back(p);
    }
    return out;
}

sample_batch part_batch(const sample_batch& batch, const batch_part& part)
{
    if (part.offset + part.length > batch.size()) throw std::invalid_argument("part_batch: part outside the batch window");
    sample_batch b;
    b.index = batch.index;
    b.first_sample = batch.first_sample + part.offset;
    const auto from = static_cast<std::ptrdiff_t>(part.offset), to = static_cast<std::ptrdiff_t>(part.offset + part.length);
    if (batch.is_ci16()) {
        b.samples_ci16.assign(batch.samples_ci16.begin() + from, batch.samples_ci16.begin() + to);
        b.ci16_scale = batch.ci16_scale;
    } else if (batch.is_two_channel()) {
        b.samples_x2.assign(batch.samples_x2.begin() + from, batch.samples_x2.begin() + to);
    } else {
        b.samples.assign(batch.samples.begin() + from, batch.samples.begin() + to);
    }
    b.owned_begin = part.owned_begin;
    b.owned_end = part.owned_end;
    b.segment_start = part.segment_start;
    b.segment_end = part.segment_end;
    b.lost_samples_before = part.offset == 0 ? batch.lost_samples_before : 0;
    b.segment_first_sample = batch.segment_first_sample;
    return b;
}

std::size_t max_part_window(std::size_t batch_samples, std::size_t parts)
{
    return max_part_window(batch_samples, parts, batch_guard_before, batch_guard_after);
}

std::size_t max_part_window(std::size_t batch_samples, std::size_t parts, std::size_t guard_before, std::size_t guard_after)
{
    if (parts == 0) throw std::invalid_argument("max_part_window: parts must be >= 1");
    // A window holds at most batch_samples + both guards and owns at most all of it; a part
    // is its share plus the guards, and never more than the whole window.
    const std::size_t max_window = batch_samples + guard_before + guard_after;
    return std::min(max_window, (max_window + parts - 1) / parts + guard_before + guard_after);
}

namespace {

/// Everything of a batch but its samples, from `in` into `out` (its storage left empty).
void copy_batch_frame(const sample_batch& in, sample_batch& out)
{
    out.index = in.index;
    out.first_sample = in.first_sample;
    out.samples_ci16.clear();
    out.samples_x2.clear();
    out.ci16_scale = 0.0f;
    out.owned_begin = in.owned_begin;
    out.owned_end = in.owned_end;
    out.segment_start = in.segment_start;
    out.segment_end = in.segment_end;
    out.lost_samples_before = in.lost_samples_before;
    out.segment_first_sample = in.segment_first_sample;
    out.time = in.time;
}

}  // namespace

void widen_batch(const sample_batch& in, sample_batch& out)
{
    if (!in.is_ci16()) throw std::invalid_argument("widen_batch: the batch is not ci16");
    copy_batch_frame(in, out);
    const std::size_t n = in.samples_ci16.size();
    out.samples.resize(n);
    const ci16* src = in.samples_ci16.data();
    cf32* dst = out.samples.data();
    const float scale = in.ci16_scale;
    const auto n_signed = static_cast<std::ptrdiff_t>(n);
#pragma omp parallel for schedule(static) if (n >= (std::size_t{1} << 20))
    for (std::ptrdiff_t k = 0; k < n_signed; ++k) dst[k] = to_cf32(src[k], scale);
}

void channel_batch(const sample_batch& in, int channel, sample_batch& out)
{
    if (!in.is_two_channel()) throw std::invalid_argument("channel_batch: the batch does not hold two channels");
    if (channel != 0 && channel != 1) throw std::invalid_argument("channel_batch: channel " + std::to_string(channel) + " of 0 .. 1");
    copy_batch_frame(in, out);
    const std::size_t n = in.samples_x2.size();
    out.samples.resize(n);
    const cf32x2* src = in.samples_x2.data();
    cf32* dst = out.samples.data();
    const auto n_signed = static_cast<std::ptrdiff_t>(n);
    if (channel == 0) {
#pragma omp parallel for schedule(static) if (n >= (std::size_t{1} << 20))
        for (std::ptrdiff_t k = 0; k < n_signed; ++k) dst[k] = src[k].a;
    } else {
#pragma omp parallel for schedule(static) if (n >= (std::size_t{1} << 20))
        for (std::ptrdiff_t k = 0; k < n_signed; ++k) dst[k] = src[k].b;
    }
}

}  // namespace paq::dsp
