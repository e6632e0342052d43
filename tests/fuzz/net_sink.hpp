// The sink of the network-source targets: records what a source delivers (on its own
// thread) for the harness to compare.
#pragma once

#include "io/sample_source.hpp"

#include <cstdint>
#include <mutex>
#include <vector>

namespace paq::fuzz {

class recording_sink final : public io::sample_sink {
public:
    struct gap_event {
        std::uint64_t lost = 0;
        io::gap_reason reason{};
        std::size_t at_sample = 0;  ///< samples delivered before the gap
    };
    void write(std::span<const cf32> s) override
    {
        std::lock_guard lock(mu_);
        samples_.insert(samples_.end(), s.begin(), s.end());
    }
    /// Two channels' sample times, kept interleaved as they were sent (channel 1, channel 2).
    void write_x2(std::span<const cf32x2> s) override
    {
        std::lock_guard lock(mu_);
        for (const auto& v : s) {
            samples_.push_back(v.a);
            samples_.push_back(v.b);
        }
    }
    void gap(std::uint64_t lost, io::gap_reason reason) override
    {
        std::lock_guard lock(mu_);
        gaps_.push_back({lost, reason, samples_.size()});
    }
    /// At least `samples` samples and `gaps` gaps have arrived.
    [[nodiscard]] bool has(std::size_t samples, std::size_t gaps)
    {
        std::lock_guard lock(mu_);
        return samples_.size() >= samples && gaps_.size() >= gaps;
    }
    /// Calls f on each gap that arrived so far (under the sink's lock).
    template <class F>
    void peek_gaps(F&& f)
    {
        std::lock_guard lock(mu_);
        for (const auto& g : gaps_) f(g);
    }
    /// Takes what arrived so far and starts afresh.
    void take(std::vector<cf32>& samples, std::vector<gap_event>& gaps)
    {
        std::lock_guard lock(mu_);
        samples.swap(samples_);
        gaps.swap(gaps_);
        samples_.clear();
        gaps_.clear();
    }

private:
    std::mutex mu_;
    std::vector<cf32> samples_;
    std::vector<gap_event> gaps_;
};

}  // namespace paq::fuzz
