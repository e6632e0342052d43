// A CPU backend that records the page locks the engine asks of it, for the tests of the
// windows' locks (runtime/window_pool.hpp): each lock in order, and each batch's window.
#pragma once

#include "dsp/cpu_backend.hpp"

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace paq::test {

/// The CPU chain, recording each page lock it is asked for (its window, its bytes, the batches
/// begun when it was done, a handle whose end is the unlock) and each batch's window: whether
/// it had been locked, and whether it came as a ci16 window. A lock takes `lock_delay` (0, or
/// as long as a large window's registration can on a loaded machine).
class pinning_backend final : public dsp::batch_processor {
public:
    struct pin {
        const void* data;
        std::size_t bytes;
        std::size_t batches_begun;
        std::weak_ptr<void> handle;
    };

    explicit pinning_backend(const dsp::receiver_config& rc, std::chrono::milliseconds lock_delay = {})
        : cpu_(rc), lock_delay_(lock_delay)
    {
    }
    using dsp::batch_processor::process;
    void process(const dsp::sample_batch& b, dsp::batch_output& out) override
    {
        const void* window = b.is_ci16() ? static_cast<const void*>(b.samples_ci16.data()) : static_cast<const void*>(b.samples.data());
        {
            std::lock_guard lk(mu);
            if (std::none_of(pins.begin(), pins.end(), [&](const pin& p) { return p.data == window; })) ++unpinned;
            if (!b.is_ci16() || !b.samples.empty()) ++not_ci16;
            window_of_batch.emplace_back(b.index, window);
            ++batches;
        }
        cpu_.process(b, out);
    }
    std::string name() const override { return "pinning"; }
    std::shared_ptr<void> pin_host_memory(const void* data, std::size_t bytes) override
    {
        if (lock_delay_.count() > 0) std::this_thread::sleep_for(lock_delay_);
        std::lock_guard lk(mu);
        auto handle = std::make_shared<int>(0);
        pins.push_back({data, bytes, batches, handle});
        return handle;
    }
    /// The locks' handles, in order (under mu).
    [[nodiscard]] std::vector<std::weak_ptr<void>> handles() const
    {
        std::vector<std::weak_ptr<void>> h;
        for (const auto& p : pins) h.push_back(p.handle);
        return h;
    }
    /// The window batch `index` came in (under mu; null if no such batch).
    [[nodiscard]] const void* window_of(std::uint64_t index) const
    {
        for (const auto& [i, w] : window_of_batch) {
            if (i == index) return w;
        }
        return nullptr;
    }

    mutable std::mutex mu;
    std::vector<pin> pins;  ///< in the order they were locked
    std::vector<std::pair<std::uint64_t, const void*>> window_of_batch;
    std::size_t unpinned = 0;  ///< batches in a window not locked before them
    std::size_t not_ci16 = 0;  ///< batches that did not come as a ci16 window only
    std::size_t batches = 0;

private:
    dsp::cpu_backend cpu_;
    std::chrono::milliseconds lock_delay_;
};

}  // namespace paq::test
