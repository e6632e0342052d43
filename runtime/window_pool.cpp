#include "runtime/window_pool.hpp"

#include <algorithm>
#include <chrono>
#include <stdexcept>

namespace paq::runtime {

template <class T>
window_pool<T>::window_pool(std::size_t window_samples) : window_samples_(window_samples)
{
    if (window_samples == 0) throw std::invalid_argument("window_pool: a window must hold at least one sample");
}

template <class T>
window_pool<T>::~window_pool()
{
    // The locks before the storage they lock.
    made_.clear();
    free_.clear();
}

template <class T>
auto window_pool<T>::acquire() -> storage
{
    std::unique_lock lk(mu_);
    if (!free_.empty()) {
        storage w = std::move(free_.back());
        free_.pop_back();
        return w;
    }
    lk.unlock();
    // A new window at its full capacity (cf32 storage zero-fills when the batcher sizes it;
    // ci16 storage faults its pages in where it is first written).
    storage w;
    w.reserve(window_samples_);
    lk.lock();
    const lock_fn lock = lock_;
    lk.unlock();
    // Locked outside the mutex (a lock takes milliseconds; the workers' release() goes on).
    std::shared_ptr<void> handle = lock ? lock(w.data(), window_samples_ * sizeof(T)) : nullptr;
    lk.lock();
    made_.push_back({w.data(), std::move(handle), static_cast<bool>(lock)});
    if (!lock && lock_) {  // lock_with() came meanwhile
        made_.back().lock = lock_(w.data(), window_samples_ * sizeof(T));
        made_.back().tried = true;
    }
    return w;
}

template <class T>
void window_pool<T>::release(storage&& window)
{
    std::lock_guard lk(mu_);
    const void* data = window.data();
    if (window.capacity() < window_samples_ ||
        std::none_of(made_.begin(), made_.end(), [&](const made& m) { return m.data == data; })) {
        return;  // not one of ours: freed with `window`
    }
    free_.push_back(std::move(window));
}

template <class T>
void window_pool<T>::lock_with(lock_fn lock)
{
    std::lock_guard lk(mu_);
    if (lock_) throw std::logic_error("window_pool::lock_with called twice");
    if (!lock) throw std::invalid_argument("window_pool::lock_with: no lock function");
    lock_ = std::move(lock);
}

template <class T>
void window_pool<T>::lock_one(std::unique_lock<std::mutex>& lk, std::size_t i)
{
    if (made_[i].tried || made_[i].locking) return;
    made_[i].locking = true;
    const void* data = made_[i].data;
    const lock_fn fn = lock_;
    lk.unlock();
    // Outside the mutex (a lock takes milliseconds; acquire() and release() go on). made_ may
    // grow meanwhile, so the entry is found again by its address.
    std::shared_ptr<void> handle = fn(data, window_samples_ * sizeof(T));
    lk.lock();
    for (auto& m : made_) {
        if (m.data == data) {
            m.lock = std::move(handle);
            m.tried = true;
            m.locking = false;
            break;
        }
    }
}

template <class T>
double window_pool<T>::lock_rest()
{
    const auto t0 = std::chrono::steady_clock::now();
    std::unique_lock lk(mu_);
    if (!lock_) throw std::logic_error("window_pool::lock_rest before lock_with");
    // Index by index: lock_one() lets go of the mutex, and windows made meanwhile are locked
    // by acquire() itself.
    for (std::size_t i = 0; i < made_.size(); ++i) lock_one(lk, i);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

template <class T>
std::uint64_t window_pool<T>::windows() const
{
    std::lock_guard lk(mu_);
    return made_.size();
}

template <class T>
std::uint64_t window_pool<T>::locked() const
{
    std::lock_guard lk(mu_);
    return static_cast<std::uint64_t>(std::count_if(made_.begin(), made_.end(), [](const made& m) { return m.lock != nullptr; }));
}

template class window_pool<cf32>;
template class window_pool<ci16>;
template class window_pool<cf32x2>;

}  // namespace paq::runtime
