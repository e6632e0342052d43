// The metrics endpoint: GET /metrics answers in the Prometheus text exposition format
// (version 0.0.4), from a Boost.Asio thread of its own. Bound to 127.0.0.1 by default.
#pragma once

#include "config/daemon_config.hpp"
#include "daemon/pipeline.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace paq::daemon {

using config::metrics_config;

/// How the endpoint protects itself from clients that connect and do nothing, or from many
/// of them. The defaults suit a Prometheus scraper on the same host (one request every few
/// seconds, answered in microseconds); tests shorten the times.
struct metrics_limits {
    /// A connection must deliver its request within this time, and then take the reply
    /// within this time again; otherwise it is closed. 5 s: a scraper sends its request
    /// at once, and Prometheus's default scrape timeout is 10 s.
    std::chrono::milliseconds request_timeout{5000};
    /// Connections served at once. At the cap, a new connection makes room by closing the
    /// oldest one that has not sent its request yet (an idle one); when none is idle it is
    /// closed at once. 64 leaves the process's descriptors (LimitNOFILE) for its real work.
    std::size_t max_connections = 64;
    /// Pause before accepting again after accept() failed (EMFILE, ENFILE: out of
    /// descriptors; any error but a client's reset): retrying at once would spin on the same
    /// error while the pending connection stays in the backlog. Out of descriptors, the
    /// oldest idle connection is also closed, freeing one. 100 ms: ten tries a second cost
    /// nothing, and a freed descriptor is used within 0.1 s.
    std::chrono::milliseconds accept_backoff{100};
    /// At most one log line per this interval about failing accept() calls (with the count).
    std::chrono::milliseconds accept_log_interval{10000};
};

/// Serves text produced by `render` on each request for /metrics (404 elsewhere), over
/// HTTP/1.1 with one request per connection. HEAD is answered as GET without the body
/// (RFC 9110 §9.3.2: same status and Content-Length, no content), for every status.
class metrics_server {
public:
    /// Binds and starts listening now: an address in use or not local throws
    /// std::runtime_error naming it.
    metrics_server(const metrics_config& cfg, std::function<std::string()> render, metrics_limits limits = {});
    ~metrics_server();
    metrics_server(const metrics_server&) = delete;
    metrics_server& operator=(const metrics_server&) = delete;
    [[nodiscard]] std::uint16_t port() const noexcept;
    [[nodiscard]] std::uint64_t requests() const noexcept;
    /// Connections closed because they sent no complete request (or took no reply) in time.
    [[nodiscard]] std::uint64_t timeouts() const noexcept;
    /// Connections closed at the cap (an idle one evicted, or the new one refused).
    [[nodiscard]] std::uint64_t connections_refused() const noexcept;
    /// accept() calls that failed (EMFILE and the like), each followed by the back-off.
    [[nodiscard]] std::uint64_t accept_failures() const noexcept;
    /// Connections open now.
    [[nodiscard]] std::size_t open_connections() const noexcept;

private:
    struct impl;
    std::unique_ptr<impl> impl_;
};

/// Extra counters that live outside the pipeline (source, publisher).
struct extra_metrics {
    std::uint64_t source_packets = 0, source_packets_lost = 0, source_malformed = 0, source_reconnects = 0;
    std::uint64_t source_refused = 0;  ///< datagrams / connections from senders outside the allow-list
    /// VITA-49 only (absent for other sources).
    bool vita49 = false;
    std::uint64_t vita49_context = 0, vita49_other_stream = 0, vita49_duplicates = 0, vita49_late = 0, vita49_resyncs = 0;
    std::uint64_t vita49_context_rate_mismatches = 0;  ///< context packets whose sample rate is not the configured one
    std::uint64_t vita49_count_mismatches = 0;  ///< packets whose 4-bit count disagrees with their timestamps
    std::uint64_t vita49_stream_changes = 0;
    std::uint64_t datagrams_sent = 0, send_errors = 0;
    std::uint64_t record_rows = 0, record_rows_lost = 0;
    std::uint64_t recorded_samples = 0, recording_dropped_samples = 0;
};

/// The pipeline's counters and gauges in the Prometheus text format.
[[nodiscard]] std::string render_prometheus(const pipeline_stats& s, const extra_metrics& x, bool have_pattern);

}  // namespace paq::daemon
