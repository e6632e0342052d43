// The metrics endpoint: GET /metrics answers in the Prometheus text exposition format
// (version 0.0.4), from a Boost.Asio thread of its own. Bound to 127.0.0.1 by default.
#pragma once

#include "config/daemon_config.hpp"
#include "daemon/pipeline.hpp"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace paq::daemon {

using config::metrics_config;

/// Serves text produced by `render` on each request for /metrics (404 elsewhere).
class metrics_server {
public:
    /// Binds and starts listening now: an address in use or not local throws
    /// std::runtime_error naming it.
    metrics_server(const metrics_config& cfg, std::function<std::string()> render);
    ~metrics_server();
    metrics_server(const metrics_server&) = delete;
    metrics_server& operator=(const metrics_server&) = delete;
    [[nodiscard]] std::uint16_t port() const noexcept;
    [[nodiscard]] std::uint64_t requests() const noexcept;

private:
    struct impl;
    std::unique_ptr<impl> impl_;
};

/// Extra counters that live outside the pipeline (source, publisher).
struct extra_metrics {
    std::uint64_t source_packets = 0, source_packets_lost = 0, source_malformed = 0, source_reconnects = 0;
    /// VITA-49 only (absent for other sources).
    bool vita49 = false;
    std::uint64_t vita49_context = 0, vita49_other_stream = 0, vita49_duplicates = 0, vita49_late = 0, vita49_resyncs = 0;
    std::uint64_t datagrams_sent = 0, send_errors = 0;
    std::uint64_t record_rows = 0;
    std::uint64_t recorded_samples = 0, recording_dropped_samples = 0;
};

/// The pipeline's counters and gauges in the Prometheus text format.
[[nodiscard]] std::string render_prometheus(const pipeline_stats& s, const extra_metrics& x, bool have_pattern);

}  // namespace paq::daemon
