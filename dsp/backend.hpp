// The one interface every signal-chain backend implements (CPU here, CUDA in gpu/).
//
//   Create (constructor: tables, plans, buffers)  ->  process(batch) ... process(batch)
//
// process() takes one batch window and writes every packet it owns, with the bits of all
// six paths, into an output the caller may reuse. It is called from one thread at a time per
// instance.
#pragma once

#include "dsp/batch.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace paq::dsp {

/// Where process() calls' time went, for a backend that times its stages (the CUDA
/// backend: CUDA events between its stages, the host clock around them): one call's, or the
/// sum of several (add).
struct stage_times {
    std::uint64_t batches = 0;
    /// Per stage, in the backend's order: device milliseconds summed over the window's parts
    /// (which overlap one another, so the stages add up to more than the span), and the
    /// host's filling of the output ("records").
    std::vector<std::pair<std::string, double>> stage_ms;
    double device_span_ms = 0.0;       ///< the first part's first event to the last part's last
    double host_queued_ms = 0.0;       ///< process() began until every part was queued
    double host_last_collect_ms = 0.0; ///< the last part's collection (waiting for it, then its records)
    double host_total_ms = 0.0;        ///< the whole process() call
    /// The longest single call's span and process() (a sum keeps the largest it added): a few
    /// slow batches show here beside the means.
    double device_span_max_ms = 0.0, host_total_max_ms = 0.0;

    /// Adds another call's (or sum's) times; the stages are matched by name.
    void add(const stage_times& o)
    {
        batches += o.batches;
        for (const auto& [name, ms] : o.stage_ms) {
            auto it = stage_ms.begin();
            while (it != stage_ms.end() && it->first != name) ++it;
            if (it == stage_ms.end()) {
                stage_ms.emplace_back(name, ms);
            } else {
                it->second += ms;
            }
        }
        device_span_ms += o.device_span_ms;
        host_queued_ms += o.host_queued_ms;
        host_last_collect_ms += o.host_last_collect_ms;
        host_total_ms += o.host_total_ms;
        device_span_max_ms = std::max({device_span_max_ms, o.device_span_max_ms, o.batches == 1 ? o.device_span_ms : 0.0});
        host_total_max_ms = std::max({host_total_max_ms, o.host_total_max_ms, o.batches == 1 ? o.host_total_ms : 0.0});
    }
};

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

    /// Stage timing: with it on, each process() also times its stages, for last_stage_times().
    /// A backend that cannot throws std::runtime_error when asked to turn it on.
    virtual void set_stage_timing(bool on)
    {
        if (on) throw std::runtime_error(name() + " backend: no stage timing (the cuda backend times its stages)");
    }
    /// The last process() call's stage times (batches 1); false when it was not timed.
    [[nodiscard]] virtual bool last_stage_times(stage_times& out) const
    {
        static_cast<void>(out);
        return false;
    }

    /// Host memory the caller will hand to process() again and again (the windows of a pool
    /// that the batcher fills in place): a backend that uploads from the host may page-lock
    /// it, once, so that uploads from it run at full speed. The range must stay allocated,
    /// and not move, while the returned handle lives; destroying the handle undoes it.
    /// nullptr when the backend does nothing with it (the CPU backend) or could not. Called
    /// from another thread than process()'s, while process() may run there.
    [[nodiscard]] virtual std::shared_ptr<void> pin_host_memory(const void* data, std::size_t bytes)
    {
        static_cast<void>(data);
        static_cast<void>(bytes);
        return nullptr;
    }
};

}  // namespace paq::dsp
