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
    made_.push_back({w.data(), std::move(handle)});
    if (!lock && lock_) made_.back().lock = lock_(w.data(), window_samples_ * sizeof(T));  // lock_with() came meanwhile
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
double window_pool<T>::lock_with(lock_fn lock)
{
    const auto t0 = std::chrono::steady_clock::now();
    std::lock_guard lk(mu_);
    if (lock_) throw std::logic_error("window_pool::lock_with called twice");
    lock_ = std::move(lock);
    for (auto& m : made_) m.lock = lock_(m.data, window_samples_ * sizeof(T));
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
