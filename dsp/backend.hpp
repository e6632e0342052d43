// The one interface every signal-chain backend implements (CPU here, CUDA in gpu/).
//
//   Create (constructor: tables, plans, buffers)  ->  process(batch) ... process(batch)
//
// process() takes one batch window and writes every packet it owns, with the bits of all
// six paths, into an output the caller may reuse. It is called from one thread at a time per
// instance.
#pragma once

#include "dsp/batch.hpp"

#include <cstddef>
#include <memory>
#include <stdexcept>
#include <string>

namespace paq::dsp {

class batch_processor {
public:
    virtual ~batch_processor() = default;
    /// Processes one batch into `out`, replacing everything it held. Its vectors keep their
    /// capacity, so an output object handed back batch after batch (runtime::worker_pool does)
    /// allocates nothing once it has grown to a full batch.
    virtual void process(const sample_batch& batch, batch_output& out) = 0;
    /// The same into a fresh output.
    [[nodiscard]] batch_output process(const sample_batch& batch)
    {
        batch_output out;
        process(batch, out);
        return out;
    }
    [[nodiscard]] virtual std::string name() const = 0;

    /// Soft output: with it on, process() also leaves the trellis's LLR of every
    /// data bit in batch_output::llrs, when the trellis runs (receiver.detector trellis or
    /// both); off (the default), llrs stays empty and nothing is spent on it. A backend
    /// without it throws std::runtime_error when asked to turn it on.
    virtual void set_soft_output(bool on)
    {
        if (on) throw std::runtime_error(name() + " backend: no soft output (LLRs)");
    }

    /// Host memory the caller will hand to process() again and again (the windows of a pool
    /// that the batcher fills in place): a backend that uploads from the host may page-lock
    /// it, once, so that uploads from it run at full speed. The range must stay allocated,
    /// and not move, while the returned handle lives; destroying the handle undoes it.
    /// nullptr when the backend does nothing with it (the CPU backend) or could not.
    [[nodiscard]] virtual std::shared_ptr<void> pin_host_memory(const void* data, std::size_t bytes)
    {
        static_cast<void>(data);
        static_cast<void>(bytes);
        return nullptr;
    }
};

}  // namespace paq::dsp
