// A fork-join team of threads that sleep between jobs, for the host's large parallel jobs
// beside the CUDA backend's worker thread: reading a window out of a recording, counting a
// batch's streams.
//
// OpenMP's teams (libgomp) spin for a while after each parallel region before they sleep.
// A replay ran three of them at once (the reader's, the tally's and the backend's host
// loops'), and their spinning threads held the cores that the worker thread needed to turn a
// part around (docs/PERFORMANCE.md, "The host's teams"). The reader's and the tally's threads
// here block on a condition variable instead, whatever OpenMP is told. The backend's own loops
// stay on OpenMP: they run several times a batch, and a team that sleeps is slow to wake where
// other teams spin on every core (the live service's publisher and batcher).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace paq::dsp {

class thread_team {
public:
    thread_team() = default;
    ~thread_team();
    thread_team(const thread_team&) = delete;
    thread_team& operator=(const thread_team&) = delete;

    /// Calls fn(k) for k = 0 .. pieces - 1: piece 0 on the calling thread, the others on the
    /// team's threads (made when a job first needs them, kept for the next); returns once every
    /// piece has ended. The first exception a piece threw (the caller's piece first) is
    /// rethrown then. One job at a time: run() is not to be called from two threads at once.
    void run(int pieces, const std::function<void(int)>& fn);
    /// run() over the range [0, items) in `pieces` contiguous ranges, as OpenMP's
    /// schedule(static) splits a loop: fn(begin, end, piece).
    void run_ranges(std::size_t items, int pieces, const std::function<void(std::size_t, std::size_t, int)>& fn);
    /// The team's threads made so far (the caller's not counted).
    [[nodiscard]] std::size_t threads() const;
    /// How many pieces a job of `items` should take: at most `most`, at most OpenMP's thread
    /// limit (OMP_NUM_THREADS: a unit that caps a process's threads caps these too), at least 1.
    [[nodiscard]] static int pieces_for(std::size_t items, int most);

private:
    void serve(int index, std::uint64_t seen);

    mutable std::mutex m_;
    std::condition_variable start_;  ///< a new job (generation_ moved on) or stop_
    std::condition_variable done_;   ///< pending_ reached 0
    const std::function<void(int)>* job_ = nullptr;
    int pieces_ = 0;
    int pending_ = 0;                ///< the team's pieces of the job not yet ended
    std::uint64_t generation_ = 0;   ///< jobs started
    std::exception_ptr error_;       ///< the first a team's piece threw in this job
    bool stop_ = false;
    std::vector<std::thread> threads_;  ///< thread i runs piece i + 1
};

}  // namespace paq::dsp
