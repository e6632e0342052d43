// The one worker pool: one thread per backend (a GPU or a CPU worker),
// batches in, results out in the order they went in, a CPU fallback for a backend that
// throws, and a heartbeat per worker for the watchdog. The live pipeline, replay and
// paq-bench --gpus all run their batches through it.
//
//   submit(b0) --\                  /--> next() = b0's result
//   submit(b1) ---> queue -> worker 0..N-1 -> reorder ---> next() = b1's result (waits for it
//   submit(b2) --/      (bounded)                               even if b2 is done first)
//
// Nothing is lost silently: a batch whose backend and fallback both fail, or that is
// submitted after abort(), comes out of next() with no output and is counted
// (counters::batches_lost, samples_in_lost_batches: its owned samples).
#pragma once

#include "dsp/backend.hpp"
#include "dsp/batch.hpp"
#include "dsp/batcher.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

namespace paq::runtime {

class worker_pool {
public:
    using clock = std::chrono::steady_clock;
    using backend_factory = std::function<std::unique_ptr<dsp::batch_processor>()>;

    struct result {
        std::optional<dsp::batch_output> out;  ///< empty: the batch was lost (counted)
        /// The batch as submitted, less its samples when a `recycle` function took them.
        dsp::sample_batch batch;
        clock::time_point ready;               ///< as given to submit()
        bool on_fallback = false;              ///< processed by the CPU fallback
        /// Lost to an error: what the worker's backend threw (the fallback's, when that failed
        /// too), for a caller that ends on the first error (replay). Empty otherwise.
        std::exception_ptr error;
    };

    struct counters {
        std::uint64_t batches_submitted = 0;
        std::uint64_t batches_done = 0;          ///< with an output (fallback included)
        std::uint64_t backend_errors = 0;        ///< process() threw (each worker failure once)
        std::uint64_t batches_on_fallback = 0;
        std::uint64_t batches_lost = 0;          ///< no output: backend and fallback failed, or aborted
        std::uint64_t samples_in_lost_batches = 0;  ///< their owned samples
        double process_s = 0.0;                  ///< in process(), summed over the workers
        /// The workers' stage times (batch_processor::set_stage_timing on; empty otherwise):
        /// summed over each worker's batches after its first timed one, and that first one
        /// apart (it pays what a backend does once, such as loading its kernels), so that the
        /// means compare with a benchmark's warmed-up batch.
        dsp::stage_times stages;
        dsp::stage_times stages_first;
    };

    /// Sees each batch once its backend is done with it, with its output (null when the batch
    /// was lost); may take its window's storage (samples or samples_ci16) for the batcher to
    /// fill again.
    using recycle_fn = std::function<void(dsp::sample_batch&, const dsp::batch_output*)>;

    /// workers: one backend per worker thread (at least one). fallback: makes the backend
    /// used when a worker's backend throws (empty: no fallback, the batch is lost).
    /// queue_depth: batches waiting for a worker; submit() blocks while that many wait, or
    /// while queue_depth + workers batches are not yet returned by next() (a slow consumer
    /// holds the producer back instead of results piling up). recycle (optional): sees each
    /// batch as soon as its backend is done with it (from a worker thread).
    worker_pool(std::vector<std::unique_ptr<dsp::batch_processor>> workers, backend_factory fallback, std::size_t queue_depth,
                recycle_fn recycle = {});
    ~worker_pool();
    worker_pool(const worker_pool&) = delete;
    worker_pool& operator=(const worker_pool&) = delete;

    /// Queues a batch. Blocks while queue_depth batches wait, calling `waiting` about every
    /// 200 ms (a caller's heartbeat: back-pressure is not a hang). After abort() the batch
    /// is not processed: it comes out of next() lost, and is counted.
    void submit(dsp::sample_batch&& batch, clock::time_point ready = clock::now(), const std::function<void()>& waiting = {});
    /// Sets the recycle function (see the constructor) of a pool made without one; before the
    /// first submit().
    void set_recycle(recycle_fn recycle);
    /// An output the caller is done with (a result's `out`): the next batch is written into
    /// it, so that no batch allocates its output afresh. Optional.
    void give_back(dsp::batch_output&& out);
    /// No more batches: the workers end once the queue is empty.
    void close();
    /// submit() stops waiting and processes nothing new; batches already queued finish.
    void abort();
    /// The oldest result not yet returned (blocks). nullopt once close() was called and every
    /// result has been returned.
    [[nodiscard]] std::optional<result> next();

    [[nodiscard]] counters stats() const;
    [[nodiscard]] std::size_t workers() const noexcept { return workers_.size(); }
    /// The workers' backend names, in worker order (e.g. "cuda", "cuda", or "cpu").
    [[nodiscard]] std::vector<std::string> names() const;
    /// Page-locks a host range for the workers' uploads (the first worker's
    /// batch_processor::pin_host_memory; CUDA's registration is portable to every device).
    [[nodiscard]] std::shared_ptr<void> pin_host_memory(const void* data, std::size_t bytes);
    /// False when a worker has been on one batch for longer than `limit` (the watchdog).
    [[nodiscard]] bool healthy(std::chrono::nanoseconds limit) const;

private:
    struct job {
        std::uint64_t seq;
        dsp::sample_batch batch;
        clock::time_point ready;
    };

    void worker_loop(std::size_t w);
    void finish(std::uint64_t seq, result&& r);

    std::vector<std::unique_ptr<dsp::batch_processor>> workers_;
    backend_factory fallback_factory_;
    std::unique_ptr<dsp::batch_processor> fallback_;
    std::mutex fallback_mu_;
    std::size_t queue_depth_;
    recycle_fn recycle_;

    std::atomic<bool> aborted_{false};
    std::mutex q_mu_;
    std::condition_variable q_cv_;     ///< workers wait for jobs
    std::condition_variable q_space_;  ///< submit waits for room
    std::deque<job> queue_;
    bool closed_ = false;
    std::uint64_t next_seq_ = 0;       ///< given to the next submit (under q_mu_)
    std::uint64_t returned_ = 0;       ///< results next() has returned (under q_mu_)

    mutable std::mutex r_mu_;
    std::condition_variable r_cv_;
    std::map<std::uint64_t, result> done_;
    std::uint64_t next_out_ = 0;
    std::uint64_t submitted_ = 0;      ///< mirror of next_seq_ for next() (under r_mu_)
    bool closed_out_ = false;          ///< close() seen (under r_mu_)
    counters counters_;                ///< under r_mu_

    std::mutex out_mu_;
    std::vector<dsp::batch_output> spare_outputs_;  ///< given back, to be written again

    std::vector<std::atomic<std::int64_t>> busy_since_ns_;  ///< 0: idle
    std::vector<char> timed_once_;  ///< per worker: a timed batch was added (counters::stages_first)
    std::vector<std::thread> threads_;
};

/// Each packet's UTC (packet_record::utc_ns) from its window's time (sample_batch::time) and
/// its start sample; unknown_utc_ns without one. The pool does it for every output, whichever
/// backend made it: the one place packets get their time.
void stamp_utc(const dsp::sample_batch& batch, dsp::batch_output& out) noexcept;

}  // namespace paq::runtime
