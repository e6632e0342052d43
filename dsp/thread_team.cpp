#include "dsp/thread_team.hpp"

#include <omp.h>

#include <algorithm>
#include <utility>

namespace paq::dsp {

thread_team::~thread_team()
{
    {
        const std::lock_guard lock(m_);
        stop_ = true;
    }
    start_.notify_all();
    for (auto& t : threads_) t.join();
}

void thread_team::run(int pieces, const std::function<void(int)>& fn)
{
    if (pieces <= 0) return;
    if (pieces == 1) {
        fn(0);
        return;
    }
    {
        const std::lock_guard lock(m_);
        // A thread made now waits for the job after the one it was made in, so it knows the
        // generation before this job's.
        while (threads_.size() < static_cast<std::size_t>(pieces - 1)) {
            const int index = static_cast<int>(threads_.size()) + 1;
            threads_.emplace_back([this, index, seen = generation_] { serve(index, seen); });
        }
        job_ = &fn;
        pieces_ = pieces;
        pending_ = pieces - 1;
        error_ = nullptr;
        ++generation_;
    }
    start_.notify_all();
    std::exception_ptr own;
    try {
        fn(0);
    } catch (...) {
        own = std::current_exception();
    }
    std::unique_lock lock(m_);
    done_.wait(lock, [&] { return pending_ == 0; });
    job_ = nullptr;
    if (own) std::rethrow_exception(own);
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

void thread_team::run_ranges(std::size_t items, int pieces, const std::function<void(std::size_t, std::size_t, int)>& fn)
{
    if (items == 0 || pieces <= 0) return;
    const auto n = static_cast<std::size_t>(pieces);
    run(pieces, [&](int k) {
        const auto piece = static_cast<std::size_t>(k);
        fn(items * piece / n, items * (piece + 1) / n, k);
    });
}

void thread_team::serve(int index, std::uint64_t seen)
{
    std::unique_lock lock(m_);
    for (;;) {
        start_.wait(lock, [&] { return stop_ || generation_ != seen; });
        if (stop_) return;
        seen = generation_;
        if (index >= pieces_) continue;  // a smaller job: not this thread's
        const auto* job = job_;
        lock.unlock();
        std::exception_ptr error;
        try {
            (*job)(index);
        } catch (...) {
            error = std::current_exception();
        }
        lock.lock();
        if (error && !error_) error_ = error;
        if (--pending_ == 0) done_.notify_one();
    }
}

std::size_t thread_team::threads() const
{
    const std::lock_guard lock(m_);
    return threads_.size();
}

int thread_team::pieces_for(std::size_t items, int most)
{
    const std::size_t cap = static_cast<std::size_t>(std::max(1, std::min(most, omp_get_max_threads())));
    return static_cast<int>(std::max<std::size_t>(1, std::min(items, cap)));
}

}  // namespace paq::dsp
