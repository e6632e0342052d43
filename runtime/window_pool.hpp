// The stream engine's batch windows: made here, each at a full window's capacity (its address
// fixed for its life), lent to the batcher (acquire), given back by the worker pool as soon as
// a backend is done with one (release), and page-locked for the backends' uploads.
//
// Page locks: a window needs a backend to be locked (CUDA's registration), and the first
// windows are read while the backends are still being made (reading overlaps their setup).
// Once the pool of backends exists, lock_with() gives the lock and lock_rest() locks the
// windows made so far, one after the other (the driver registers one range at a time: locks
// taken on several threads at once took as long, docs/PERFORMANCE.md "Tried and not kept");
// from then on each new window is locked when it is made. The stream engine locks them all
// before it hands on the first batch: a lock holds up the backend's own calls to the driver,
// so a backend given a batch while the next window is locked waits for that lock anyway. The
// locks and the storage are both this object's: its destructor undoes the locks before it
// frees the windows it holds, and a window still out when it goes is unlocked first and freed
// later by its holder.
#pragma once

#include "dsp/batcher.hpp"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

namespace paq::runtime {

template <class T>
class window_pool final : public dsp::window_provider<T> {
public:
    using storage = dsp::window_storage_t<T>;
    /// Page-locks [data, data + bytes); the handle undoes it when released (null: not locked,
    /// e.g. the CPU backend's). worker_pool::pin_host_memory.
    using lock_fn = std::function<std::shared_ptr<void>(const void* data, std::size_t bytes)>;

    /// Windows of `window_samples` samples (dsp::basic_batcher::max_window_samples()), >= 1.
    explicit window_pool(std::size_t window_samples);
    ~window_pool() override;
    window_pool(const window_pool&) = delete;
    window_pool& operator=(const window_pool&) = delete;

    /// A free window, or a new one (locked as it is made after lock_with()). From any thread.
    [[nodiscard]] storage acquire() override;
    /// A window back (from any thread). Storage this pool did not make is freed, not kept.
    void release(storage&& window) override;
    /// From now on each new window is locked as it is made; those made so far wait for
    /// lock_rest(). Once.
    void lock_with(lock_fn lock);
    /// Locks every window made so far that is not locked yet. Needs lock_with() first. Returns
    /// the seconds it took.
    double lock_rest();

    [[nodiscard]] std::uint64_t windows() const;  ///< windows made
    [[nodiscard]] std::uint64_t locked() const;   ///< of them, page-locked
    [[nodiscard]] std::size_t window_samples() const noexcept { return window_samples_; }

private:
    struct made {
        const void* data;
        std::shared_ptr<void> lock;  ///< null: not locked (not yet, or the lock function declined)
        bool tried = false;          ///< the lock function has been called for it
        bool locking = false;        ///< lock_rest() is calling the lock function for it (outside the mutex)
    };
    /// Locks made_[i] unless the lock function was called for it or is being called; `lk`
    /// holds mu_ and is released while the lock is taken.
    void lock_one(std::unique_lock<std::mutex>& lk, std::size_t i);
    const std::size_t window_samples_;
    mutable std::mutex mu_;
    std::vector<storage> free_;
    std::vector<made> made_;
    lock_fn lock_;
};

extern template class window_pool<cf32>;
extern template class window_pool<ci16>;
extern template class window_pool<cf32x2>;

}  // namespace paq::runtime
