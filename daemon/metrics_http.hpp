// paqd's HTTP server: GET /metrics answers in the Prometheus text exposition format (version
// 0.0.4), and the live view's page and data beside it (daemon/live_view.hpp), from a
// Boost.Asio thread of its own. Read-only; bound to 127.0.0.1 by default.
#pragma once

#include "config/daemon_config.hpp"
#include "daemon/pipeline.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

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

/// One page the server answers: the path (the request's target up to any '?'), its content
/// type, more header lines (each ending in CRLF), and what renders its body on each request.
/// A render that throws answers 500 with the error's text.
struct http_route {
    std::string path;
    std::string content_type;
    std::string headers;
    std::function<std::string()> render;
};

/// /metrics rendered by `render`.
[[nodiscard]] http_route metrics_route(std::function<std::string()> render);

/// Serves its routes (404 elsewhere, naming them), over HTTP/1.1 with one request per
/// connection. HEAD is answered as GET without the body (RFC 9110 §9.3.2: same status and
/// Content-Length, no content), for every status.
class metrics_server {
public:
    /// Binds and starts listening now: an address in use or not local throws
    /// std::runtime_error naming it.
    metrics_server(const metrics_config& cfg, std::vector<http_route> routes, metrics_limits limits = {});
    /// Only /metrics, rendered by `render`.
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

}  // namespace paq::daemon
