// `paqd --config FILE`: the receiver as a service. Builds the source, the ring, the workers
// and the publisher from the configuration, runs the pipeline, prints one status line per
// status interval, answers SIGTERM/SIGINT with a clean stop (a second signal aborts), and
// writes the final counters.
#pragma once

#include "config/daemon_config.hpp"
#include "daemon/pipeline.hpp"

#include <filesystem>
#include <memory>
#include <optional>
#include <string>

namespace paq::daemon {

struct live_options {
    config::daemon_config config;
    std::filesystem::path json_out;  ///< final summary as JSON (optional)
    /// Stop after this many seconds (0: run until the source ends or a signal).
    double duration_s = 0.0;
};

/// Runs until the source ends, a signal, or duration_s. Returns the process exit code:
/// 0 clean end, 1 the source failed for good (or nothing could be started).
[[nodiscard]] int run_live(const live_options& opt);



}  // namespace paq::daemon
