// Several GPUs (issue 3): one worker thread and one cuda_backend per GPU, each with its own
// context (device, stream, plans, buffers); batches dispatched round-robin, results handed
// back in submission order.
//
//   submit(b0) -> worker 0    next() -> result of b0
//   submit(b1) -> worker 1    next() -> result of b1   (waits for it even if b2 is done)
//   submit(b2) -> worker 0    ...
//
// Plain C++ header. submit() blocks while the chosen worker already holds `queue_depth`
// batches; an exception in a worker comes out of the next() of that batch.
#pragma once

#include "dsp/batch.hpp"
#include "dsp/receiver_config.hpp"

#include <cstddef>
#include <memory>
#include <vector>

namespace paq::gpu {

class multi_gpu_runner {
public:
    /// \param devices CUDA device ids, one worker each (must not be empty)
    /// \param queue_depth batches waiting per worker, >= 1
    multi_gpu_runner(const dsp::receiver_config& cfg, const std::vector<int>& devices, std::size_t queue_depth = 2);
    ~multi_gpu_runner();
    multi_gpu_runner(const multi_gpu_runner&) = delete;
    multi_gpu_runner& operator=(const multi_gpu_runner&) = delete;

    /// Queues a batch for the next worker in turn; the batch must stay alive and unchanged
    /// until its result is taken with next().
    void submit(std::shared_ptr<const dsp::sample_batch> batch);
    /// The result of the oldest batch not yet returned (blocks). Throws std::logic_error when
    /// nothing is pending, or what the worker threw.
    [[nodiscard]] dsp::batch_output next();
    [[nodiscard]] std::size_t workers() const noexcept;

private:
    struct impl;
    std::unique_ptr<impl> impl_;
};

}  // namespace paq::gpu
