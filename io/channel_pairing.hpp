// Two receive channels that arrive as separate streams (two VITA-49 stream ids of one radio)
// joined into sample times of both, by their place on a common timeline: each channel's
// blocks arrive in order, each placed at the timeline index of its first sample (from the
// sender's timestamps), and a sample time is delivered only where both channels have a
// sample. Whatever one channel has where the other has none (the other lost it, or lags too
// far behind, or has fallen silent) is dropped, counted per channel, and the sample times
// missing become a gap, so the channels never slide against each other.
#pragma once

#include "dsp/types.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <span>
#include <vector>

namespace paq::io {

/// Where paired sample times and the gaps between them go.
struct paired_output {
    virtual ~paired_output() = default;
    /// The next sample times of both channels, in order.
    virtual void pairs(std::span<const cf32x2> samples) = 0;
    /// `sample_times` sample times are missing before the next pairs(): a channel lost them
    /// (lagging false), or one lagged beyond the bound or fell silent (lagging true).
    virtual void gap(std::uint64_t sample_times, bool lagging) = 0;
};

/// What a channel_pairer dropped, per channel (index 0: channel 1).
struct pairing_counts {
    /// Samples of the channel with no sample of the other channel at their time (the other
    /// lost it, lagged by more than the bound, or was silent), or placed before the samples
    /// already delivered (a channel that came back late): dropped.
    std::array<std::uint64_t, 2> unpaired_samples{};
    /// Times this channel began to lag or fell silent: the other channel held more than the
    /// bound with nothing of this one at its time, and its oldest samples were given up
    /// (down to half the bound, again each time the bound is reached, until this channel's
    /// samples pair again).
    std::array<std::uint64_t, 2> lag_events{};
};

class channel_pairer {
public:
    /// max_lag_samples: the most one channel may hold waiting for the other (>= 1); beyond
    /// it the other channel counts as lagging or silent (a lag event) and the oldest samples
    /// are given up. It bounds the memory: max_lag_samples + one block per channel at most.
    explicit channel_pairer(std::uint64_t max_lag_samples);

    /// Channel `channel`'s (0 or 1) next block, its first sample at timeline index `start`.
    /// Blocks of a channel follow each other: `start` at or after the end of its last block
    /// (a later start: that channel lost the samples between). Samples before what is already
    /// delivered are dropped and counted. Delivers whatever becomes paired, in order.
    void push(int channel, std::int64_t start, std::span<const cf32> samples, paired_output& out);

    /// Forgets what is buffered (counted as unpaired) and the timeline: after a discontinuity
    /// the next blocks start it again.
    void reset();

    /// The timeline index of the next sample time to deliver; meaningful once started().
    [[nodiscard]] std::int64_t next_index() const noexcept { return next_; }
    [[nodiscard]] bool started() const noexcept { return started_; }
    [[nodiscard]] const pairing_counts& counts() const noexcept { return counts_; }
    /// Samples buffered for a channel, waiting for the other.
    [[nodiscard]] std::uint64_t buffered(int channel) const noexcept;

private:
    struct block {
        std::int64_t start = 0;
        std::vector<cf32> samples;
        std::size_t used = 0;  ///< samples already delivered or dropped from the front
        [[nodiscard]] std::int64_t first() const noexcept { return start + static_cast<std::int64_t>(used); }
        [[nodiscard]] std::size_t left() const noexcept { return samples.size() - used; }
    };
    void drain(paired_output& out);
    void drop_before(int channel, std::int64_t index);
    void give_up_lag(paired_output& out);

    std::uint64_t max_lag_;
    std::array<std::deque<block>, 2> queue_;
    std::array<std::uint64_t, 2> held_{};
    std::array<bool, 2> lagging_{};  ///< the channel is lagging or silent (a lag event counted)
    std::int64_t next_ = 0;
    bool started_ = false;
    pairing_counts counts_;
    std::vector<cf32x2> out_;
};

}  // namespace paq::io
