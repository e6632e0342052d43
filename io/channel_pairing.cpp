#include "io/channel_pairing.hpp"

#include <algorithm>
#include <stdexcept>

namespace paq::io {

channel_pairer::channel_pairer(std::uint64_t max_lag_samples) : max_lag_(std::max<std::uint64_t>(max_lag_samples, 1)) {}

std::uint64_t channel_pairer::buffered(int channel) const noexcept
{
    return channel == 0 || channel == 1 ? held_[static_cast<std::size_t>(channel)] : 0;
}

void channel_pairer::push(int channel, std::int64_t start, std::span<const cf32> samples, paired_output& out)
{
    if (channel != 0 && channel != 1) throw std::invalid_argument("channel_pairer: channel 0 or 1");
    if (samples.empty()) return;
    const auto c = static_cast<std::size_t>(channel);
    auto& q = queue_[c];
    if (!q.empty()) {
        const auto& last = q.back();
        const std::int64_t end = last.start + static_cast<std::int64_t>(last.samples.size());
        if (start < end) {
            // Overlapping its own last block: the overlap is not new.
            const auto skip = static_cast<std::size_t>(std::min<std::int64_t>(end - start, static_cast<std::int64_t>(samples.size())));
            counts_.unpaired_samples[c] += skip;
            samples = samples.subspan(skip);
            start = end;
            if (samples.empty()) return;
        }
    }
    if (started_ && start < next_) {
        // Placed before what is delivered already (a channel that lagged beyond the bound).
        const auto skip = static_cast<std::size_t>(std::min<std::int64_t>(next_ - start, static_cast<std::int64_t>(samples.size())));
        counts_.unpaired_samples[c] += skip;
        samples = samples.subspan(skip);
        start = next_;
        if (samples.empty()) return;
    }
    q.push_back(block{start, std::vector<cf32>(samples.begin(), samples.end()), 0});
    held_[c] += samples.size();
    drain(out);
    give_up_lag(out);
}

void channel_pairer::drop_before(int channel, std::int64_t index)
{
    const auto c = static_cast<std::size_t>(channel);
    auto& q = queue_[c];
    while (!q.empty() && q.front().first() < index) {
        auto& b = q.front();
        const auto n = static_cast<std::size_t>(std::min<std::int64_t>(index - b.first(), static_cast<std::int64_t>(b.left())));
        b.used += n;
        held_[c] -= n;
        counts_.unpaired_samples[c] += n;
        if (b.left() == 0) q.pop_front();
    }
}

void channel_pairer::drain(paired_output& out)
{
    for (;;) {
        if (queue_[0].empty() || queue_[1].empty()) return;
        if (!started_) {
            // The timeline starts where both channels have begun.
            next_ = std::max(queue_[0].front().first(), queue_[1].front().first());
            started_ = true;
        }
        drop_before(0, next_);
        drop_before(1, next_);
        if (queue_[0].empty() || queue_[1].empty()) return;
        const std::int64_t first = std::max(queue_[0].front().first(), queue_[1].front().first());
        if (first > next_) {
            // A channel has nothing at next_ .. first: the other's samples there go (counted by
            // drop_before on the next turn), the sample times become a gap.
            out.gap(static_cast<std::uint64_t>(first - next_), false);
            next_ = first;
            continue;
        }
        auto& a = queue_[0].front();
        auto& b = queue_[1].front();
        const std::size_t n = std::min(a.left(), b.left());
        out_.resize(n);
        for (std::size_t i = 0; i < n; ++i) out_[i] = cf32x2{a.samples[a.used + i], b.samples[b.used + i]};
        a.used += n;
        b.used += n;
        held_[0] -= n;
        held_[1] -= n;
        next_ += static_cast<std::int64_t>(n);
        if (a.left() == 0) queue_[0].pop_front();
        if (b.left() == 0) queue_[1].pop_front();
        lagging_ = {false, false};
        out.pairs(out_);
    }
}

void channel_pairer::give_up_lag(paired_output& out)
{
    for (std::size_t c = 0; c < 2; ++c) {
        if (held_[c] <= max_lag_) continue;
        // Channel c holds more than the bound and the other has nothing at its time: the
        // other lags or is silent. Channel c's oldest samples go, down to half the bound, and
        // the sample times they held become a gap (once started).
        const std::size_t other = 1 - c;
        if (!lagging_[other]) counts_.lag_events[other] += 1;
        lagging_[other] = true;
        const auto& last = queue_[c].back();
        const std::int64_t keep_from =
            last.start + static_cast<std::int64_t>(last.samples.size()) - static_cast<std::int64_t>(max_lag_ / 2);
        drop_before(static_cast<int>(c), keep_from);
        drop_before(static_cast<int>(other), keep_from);
        if (started_ && keep_from > next_) {
            out.gap(static_cast<std::uint64_t>(keep_from - next_), true);
            next_ = keep_from;
        }
    }
}

void channel_pairer::reset()
{
    for (std::size_t c = 0; c < 2; ++c) {
        counts_.unpaired_samples[c] += held_[c];
        held_[c] = 0;
        queue_[c].clear();
    }
    started_ = false;
    next_ = 0;
    lagging_ = {false, false};
}

}  // namespace paq::io
