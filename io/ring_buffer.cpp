#include "io/ring_buffer.hpp"

#include "io/bulk_copy.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <stdexcept>

namespace paq::io {

overflow_policy parse_overflow_policy(std::string_view name)
{
    return parse_named(overflow_policy_names, name, "overflow policy");
}

ring_allocator host_ring_allocator(bool try_lock)
{
    ring_allocator a;
    auto kind = std::make_shared<std::string>("pageable");
    a.allocate = [try_lock, kind](std::size_t bytes) -> void* {
        void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) {
            throw std::runtime_error("ring buffer: cannot allocate " + std::to_string(bytes >> 20) +
                                     " MiB: " + std::strerror(errno));
        }
        if (try_lock) {
            if (::mlock(p, bytes) == 0) {
                *kind = "locked (mlock)";
            } else {
                *kind = std::string("pageable (mlock failed: ") + std::strerror(errno) +
                        "; raise LimitMEMLOCK / ulimit -l to lock it)";
            }
        }
        return p;
    };
    a.release = [](void* p, std::size_t bytes) { ::munmap(p, bytes); };
    a.kind = "mmap";
    // The kind is only known after allocate(); sample_ring reads it back through this hook.
    a.describe = [kind] { return *kind; };
    return a;
}

sample_ring::sample_ring(std::size_t capacity_samples, overflow_policy policy, ring_allocator alloc,
                         std::size_t max_markers, std::optional<float> ci16_scale, int channels)
    : capacity_(capacity_samples),
      max_markers_(max_markers),
      policy_(policy),
      ci16_scale_(ci16_scale),
      channels_(channels),
      sample_bytes_(channels == 2 ? sizeof(cf32x2) : ci16_scale ? sizeof(ci16) : sizeof(cf32)),
      alloc_(std::move(alloc))
{
    if (channels_ < 1 || channels_ > 2) {
        throw std::invalid_argument("ring buffer: 1 or 2 receive channels, not " + std::to_string(channels_));
    }
    if (channels_ == 2 && ci16_scale_) throw std::invalid_argument("ring buffer: a ring of two channels holds cf32 samples, not ci16");
    if (capacity_ == 0) throw std::invalid_argument("ring buffer: capacity must be at least 1 sample");
    if (max_markers_ < 2) throw std::invalid_argument("ring buffer: max_markers must be at least 2");
    if (ci16_scale_ && (!(*ci16_scale_ > 0.0f) || !std::isfinite(*ci16_scale_))) {
        throw std::invalid_argument("ring buffer: the ci16 scale must be positive and finite, not " + std::to_string(*ci16_scale_));
    }
    data_ = static_cast<std::byte*>(alloc_.allocate(capacity_ * sample_bytes_));
    if (alloc_.describe) alloc_.kind = alloc_.describe();
    stats_.capacity = capacity_;
}

sample_ring::~sample_ring()
{
    if (data_) alloc_.release(data_, capacity_ * sample_bytes_);
}

namespace {

const char* width_name(std::size_t bytes) noexcept
{
    return bytes == sizeof(ci16) ? "ci16" : bytes == sizeof(cf32) ? "cf32" : "two-channel cf32";
}

}  // namespace

void sample_ring::check_width(std::size_t bytes, const char* what) const
{
    if (bytes == sample_bytes_) return;
    throw std::logic_error(std::string("ring buffer: ") + what + " of " + width_name(bytes) + " samples on a ring of " +
                           width_name(sample_bytes_) + " samples");
}

void sample_ring::push_marker_locked(std::uint64_t lost, gap_reason reason, bool dropped_by_ring)
{
    markers_.push_back({head_, lost, reason, dropped_by_ring});
    data_cv_.notify_one();
}

void sample_ring::flush_pending_drop_locked(bool force)
{
    if (coalescing_) {
        // Still flooded: keep merging until the consumer has drained half the markers.
        if (!force && markers_.size() > max_markers_ / 2) return;
        coalescing_ = false;
        // One marker per reason merged (the consumer counts sources' losses by reason and
        // ring overflows apart), all at this position: the batcher ends one segment.
        for (std::size_t r = 0; r < num_gap_reasons; ++r) {
            if (!pending_gap_[r]) continue;
            markers_.push_back({head_, pending_lost_[r], static_cast<gap_reason>(r), false});
            // The sum counts what the known gaps lost; an unknown one among them makes the
            // span uncountable, which a gap of 0 says (time is not carried across it).
            if (pending_unknown_[r] && pending_lost_[r] != 0) markers_.push_back({head_, 0, static_cast<gap_reason>(r), false});
            pending_gap_[r] = false;
            pending_unknown_[r] = false;
            pending_lost_[r] = 0;
        }
        data_cv_.notify_one();
    }
    if (pending_drop_ == 0) return;
    push_marker_locked(pending_drop_, gap_reason::overflow, true);
    pending_drop_ = 0;
}

void sample_ring::timestamp(std::int64_t utc_ns, std::uint64_t offset)
{
    std::lock_guard lk(mu_);
    if (closed_ || aborted_) return;
    // One pending at most: a later anchor supersedes one whose sample has not come yet.
    if (pending_anchor_) ++stats_.anchors_dropped;
    pending_anchor_ = anchor_marker{offset, utc_ns};
}

void sample_ring::drop_pending_anchor_locked(std::size_t dropped_from, std::size_t n)
{
    if (pending_anchor_ && pending_anchor_->position >= dropped_from && pending_anchor_->position < n) {
        ++stats_.anchors_dropped;
        pending_anchor_.reset();
    }
}

std::size_t sample_ring::write(std::span<const cf32> samples)
{
    check_width(sizeof(cf32), "write");
    return write_samples(samples);
}

std::size_t sample_ring::write(std::span<const ci16> samples)
{
    check_width(sizeof(ci16), "write");
    return write_samples(samples);
}

std::size_t sample_ring::write(std::span<const cf32x2> samples)
{
    check_width(sizeof(cf32x2), "write");
    return write_samples(samples);
}

template <class T>
std::size_t sample_ring::write_samples(std::span<const T> samples)
{
    T* const data = reinterpret_cast<T*>(data_);
    std::size_t accepted = 0;
    const std::size_t n = samples.size();
    while (accepted < n) {
        std::unique_lock lk(mu_);
        if (closed_ || aborted_) {
            stats_.samples_refused += n - accepted;
            break;
        }
        if (coalescing_) flush_pending_drop_locked();
        if (coalescing_) {
            // A gap flood is being merged: the samples between the merged gaps go too.
            const std::size_t dropped = n - accepted;
            if (pending_drop_ == 0) ++stats_.overflows;
            pending_drop_ += dropped;
            stats_.samples_dropped += dropped;
            drop_pending_anchor_locked(accepted, n);
            break;
        }
        const std::size_t space = space_locked();
        if (space == 0) {
            if (policy_ == overflow_policy::block) {
                ++stats_.producer_waits;
                space_cv_.wait(lk, [&] { return aborted_ || head_ - tail_ < capacity_; });
                continue;
            }
            const std::size_t dropped = n - accepted;
            if (pending_drop_ == 0) ++stats_.overflows;
            pending_drop_ += dropped;
            stats_.samples_dropped += dropped;
            drop_pending_anchor_locked(accepted, n);
            break;
        }
        flush_pending_drop_locked();
        const std::size_t m = std::min(space, n - accepted);
        const std::uint64_t pos = head_;
        lk.unlock();
        // Only this thread moves head_, and tail_ only grows: [pos, pos + m) stays free.
        const std::size_t at = static_cast<std::size_t>(pos % capacity_);
        const std::size_t first = std::min(m, capacity_ - at);
        std::memcpy(data + at, samples.data() + accepted, first * sizeof(T));
        if (first < m) std::memcpy(data, samples.data() + accepted + first, (m - first) * sizeof(T));
        lk.lock();
        publish_locked(pos, m, accepted);
        accepted += m;
    }
    std::lock_guard lk(mu_);
    pass_pending_anchor_locked(n);
    return accepted;
}

void sample_ring::publish_locked(std::uint64_t pos, std::size_t m, std::size_t offset)
{
    if (pending_anchor_ && pending_anchor_->position >= offset && pending_anchor_->position < offset + m) {
        if (anchors_.size() < max_markers_) {
            anchors_.push_back({pos + (pending_anchor_->position - offset), pending_anchor_->utc_ns});
        } else {
            ++stats_.anchors_dropped;
        }
        pending_anchor_.reset();
    }
    head_ += m;
    // The arrival list is bounded whatever the write sizes: a write within
    // arrival_resolution of the last entry's extends that entry (its samples then count as
    // arrived at the entry's earlier time: a batch's latency is overstated by at most that
    // much, never understated), and so does every write once max_arrival_entries are held.
    const auto now = std::chrono::steady_clock::now();
    if (!writes_.empty() && (now - writes_.back().second < arrival_resolution || writes_.size() >= max_arrival_entries)) {
        writes_.back().first = head_;
    } else {
        writes_.emplace_back(head_, now);
    }
    stats_.samples_written += m;
    stats_.high_water = std::max(stats_.high_water, static_cast<std::size_t>(head_ - tail_));
    data_cv_.notify_one();
}

void sample_ring::pass_pending_anchor_locked(std::size_t n)
{
    // An anchor for a sample of a later write: count this one's samples off.
    if (pending_anchor_ && pending_anchor_->position >= n) pending_anchor_->position -= n;
}

template <class T>
std::span<T> sample_ring::reserve(std::size_t max, std::size_t at_least)
{
    check_width(sizeof(T), "reserve");
    std::unique_lock lk(mu_);
    reserved_ = 0;
    const std::size_t wait_for = std::clamp<std::size_t>(std::min(at_least, max), 1, std::max<std::size_t>(1, capacity_ / 4));
    for (;;) {
        if (closed_ || aborted_ || max == 0) return {};
        if (coalescing_) flush_pending_drop_locked();
        if (coalescing_) return {};  // write() merges the samples into the flood's gap
        if (space_locked() >= wait_for) break;
        if (policy_ == overflow_policy::drop) {
            if (space_locked() > 0) break;
            return {};  // write() drops and counts them
        }
        ++stats_.producer_waits;
        space_cv_.wait(lk, [&] { return aborted_ || space_locked() >= wait_for; });
    }
    flush_pending_drop_locked();
    // Only this thread moves head_, and tail_ only grows: the room stays free until commit().
    const std::size_t at = static_cast<std::size_t>(head_ % capacity_);
    reserved_at_ = head_;
    reserved_ = std::min({max, space_locked(), capacity_ - at});
    return {reinterpret_cast<T*>(data_) + at, reserved_};
}

template std::span<cf32> sample_ring::reserve<cf32>(std::size_t, std::size_t);
template std::span<ci16> sample_ring::reserve<ci16>(std::size_t, std::size_t);
template std::span<cf32x2> sample_ring::reserve<cf32x2>(std::size_t, std::size_t);

void sample_ring::commit(std::size_t n)
{
    std::lock_guard lk(mu_);
    if (n > reserved_) {
        throw std::logic_error("ring buffer: commit of " + std::to_string(n) + " samples after a reserve of " + std::to_string(reserved_));
    }
    reserved_ = 0;
    if (closed_ || aborted_) {
        stats_.samples_refused += n;
        return;
    }
    if (n == 0) return;
    publish_locked(reserved_at_, n, 0);
    pass_pending_anchor_locked(n);
}

void sample_ring::gap(std::uint64_t lost_samples, gap_reason reason)
{
    std::unique_lock lk(mu_);
    if (closed_ || aborted_) return;
    flush_pending_drop_locked();
    if (markers_.size() >= max_markers_ && policy_ == overflow_policy::block) {
        ++stats_.producer_waits;
        space_cv_.wait(lk, [&] { return aborted_ || markers_.size() < max_markers_; });
        if (aborted_) return;
    }
    if (coalescing_ || markers_.size() >= max_markers_) {
        coalescing_ = true;
        ++stats_.gaps_coalesced;
        const auto r = static_cast<std::size_t>(reason);
        pending_gap_[r] = true;
        if (lost_samples == 0) pending_unknown_[r] = true;
        // Saturating: a source's count is bounded, but the sum of a long flood must not wrap.
        pending_lost_[r] = saturating_add(pending_lost_[r], lost_samples);
        return;
    }
    push_marker_locked(lost_samples, reason);
}

void sample_ring::close()
{
    std::lock_guard lk(mu_);
    flush_pending_drop_locked(true);  // the end: whatever was merged goes in now
    closed_ = true;
    data_cv_.notify_all();
}

void sample_ring::abort()
{
    std::lock_guard lk(mu_);
    aborted_ = true;
    closed_ = true;
    space_cv_.notify_all();
    data_cv_.notify_all();
}

sample_ring::read_result sample_ring::read(std::span<cf32> out, std::chrono::milliseconds timeout)
{
    check_width(sizeof(cf32), "read");
    return read_samples(out, timeout);
}

sample_ring::read_result sample_ring::read(std::span<ci16> out, std::chrono::milliseconds timeout)
{
    check_width(sizeof(ci16), "read");
    return read_samples(out, timeout);
}

sample_ring::read_result sample_ring::read(std::span<cf32x2> out, std::chrono::milliseconds timeout)
{
    check_width(sizeof(cf32x2), "read");
    return read_samples(out, timeout);
}

template <class T>
sample_ring::read_result sample_ring::read_samples(std::span<T> out, std::chrono::milliseconds timeout)
{
    const T* const data = reinterpret_cast<const T*>(data_);
    std::unique_lock lk(mu_);
    const auto ready = [&] {
        return head_ > tail_ || (!markers_.empty() && markers_.front().position == tail_) || closed_;
    };
    if (!data_cv_.wait_for(lk, timeout, ready)) return {};
    read_result r;
    if (!markers_.empty() && markers_.front().position == tail_) {
        r.what = read_result::kind::gap;
        r.lost_samples = markers_.front().lost;
        r.reason = markers_.front().reason;
        r.dropped_by_ring = markers_.front().dropped_by_ring;
        markers_.pop_front();
        ++stats_.gaps;
        space_cv_.notify_one();  // a producer may wait for marker room (block policy)
        return r;
    }
    if (head_ > tail_ && !out.empty()) {
        std::uint64_t limit = head_;
        if (!markers_.empty()) limit = std::min(limit, markers_.front().position);
        const std::size_t m = static_cast<std::size_t>(std::min<std::uint64_t>(out.size(), limit - tail_));
        const std::uint64_t pos = tail_;
        lk.unlock();
        // Only this thread moves tail_, and head_ only grows: [pos, pos + m) stays filled.
        const std::size_t at = static_cast<std::size_t>(pos % capacity_);
        const std::size_t first = std::min(m, capacity_ - at);
        bulk_copy(out.data(), data + at, first * sizeof(T));
        if (first < m) bulk_copy(out.data() + first, data, (m - first) * sizeof(T));
        lk.lock();
        tail_ += m;
        stats_.samples_read += m;
        space_cv_.notify_one();
        // The write that held the last sample read: the first whose end is at or past tail_.
        while (!writes_.empty() && writes_.front().first < tail_) writes_.pop_front();
        r.written = writes_.empty() ? std::chrono::steady_clock::now() : writes_.front().second;
        if (!writes_.empty() && writes_.front().first == tail_) writes_.pop_front();
        // The latest anchor among the samples read goes with them (and is counted once); the
        // earlier ones it supersedes are counted apart.
        while (!anchors_.empty() && anchors_.front().position < tail_) {
            if (anchors_.front().position >= pos) {
                if (r.time) ++stats_.anchors_superseded;
                r.time = read_result::anchor{static_cast<std::size_t>(anchors_.front().position - pos), anchors_.front().utc_ns};
            }
            anchors_.pop_front();
        }
        if (r.time) ++stats_.anchors;
        r.what = read_result::kind::samples;
        r.count = m;
        return r;
    }
    if (closed_ && head_ == tail_ && markers_.empty()) r.what = read_result::kind::end;
    return r;
}

std::size_t sample_ring::arrival_entries() const
{
    std::lock_guard lk(mu_);
    return writes_.size();
}

ring_counters sample_ring::counters() const
{
    std::lock_guard lk(mu_);
    ring_counters c = stats_;
    c.fill = static_cast<std::size_t>(head_ - tail_);
    return c;
}

}  // namespace paq::io
