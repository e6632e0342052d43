#include "daemon/metrics_http.hpp"
#include "io/thread_name.hpp"

#include <cmath>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/streambuf.hpp>
#include <boost/asio/write.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <istream>
#include <list>
#include <memory>
#include <thread>

namespace paq::daemon {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

namespace {

/// The request line's method and target. Anything unparsable gets an empty method (405).
struct request_line {
    std::string method, target;
};

/// The whole reply to one request. HEAD gets GET's status line and headers, Content-Length
/// included, and no body (RFC 9110 §9.3.2), whatever the status.
std::string make_reply(const request_line& rq, const std::vector<http_route>& routes)
{
    const bool head = rq.method == "HEAD";
    std::string status, headers, body;
    // The path without a query: /metrics?x and /metrics are the same page.
    const std::string_view path = std::string_view(rq.target).substr(0, rq.target.find('?'));
    const auto route = std::find_if(routes.begin(), routes.end(), [&](const http_route& r) { return r.path == path; });
    if (rq.method != "GET" && !head) {
        status = "405 Method Not Allowed";
        headers = "Allow: GET, HEAD\r\n";
    } else if (route == routes.end()) {
        status = "404 Not Found";
        headers = "Content-Type: text/plain\r\n";
        body = "paqd serves";
        for (const auto& r : routes) body += " " + r.path;
        body += "\n";
    } else {
        status = "200 OK";
        headers = "Content-Type: " + route->content_type + "\r\n" + route->headers;
        try {
            body = route->render();
        } catch (const std::exception& e) {
            status = "500 Internal Server Error";
            headers = "Content-Type: text/plain\r\n";
            body = "paqd: " + std::string(e.what()) + "\n";
        }
    }
    std::string reply = "HTTP/1.1 " + status + "\r\n" + headers + "Content-Length: " + std::to_string(body.size()) +
                        "\r\nConnection: close\r\n\r\n";
    if (!head) reply += body;
    return reply;
}

}  // namespace

struct metrics_server::impl {
    /// One client connection. Lives in `connections` (io thread only) until closed.
    struct connection {
        explicit connection(asio::io_context& io, tcp::socket s) : sock(std::move(s)), timer(io) {}
        tcp::socket sock;
        asio::steady_timer timer;
        asio::streambuf buf{16384};  // a request line and headers; more is refused
        std::string reply;
        bool request_received = false;
        bool closed = false;
    };
    using connection_ptr = std::shared_ptr<connection>;

    asio::io_context io;
    tcp::acceptor acceptor{io};
    asio::steady_timer backoff{io};
    std::vector<http_route> routes;
    metrics_limits limits;
    std::thread thread;
    std::list<connection_ptr> connections;  // oldest first; touched on the io thread only
    std::atomic<std::uint64_t> requests{0}, timeouts{0}, refused{0}, accept_failures{0};
    std::atomic<std::size_t> open{0};
    std::uint64_t failures_since_log = 0;
    std::chrono::steady_clock::time_point last_failure_log{};

    void accept()
    {
        acceptor.async_accept([this](const boost::system::error_code& ec, tcp::socket sock) {
            if (ec == asio::error::operation_aborted) return;
            if (ec) {
                accept_failed(ec);
                return;
            }
            admit(std::move(sock));
            accept();
        });
    }

    void accept_failed(const boost::system::error_code& ec)
    {
        // A client that reset before accept() is nothing to wait for.
        if (ec == asio::error::connection_aborted) {
            accept();
            return;
        }
        ++accept_failures;
        ++failures_since_log;
        const auto now = std::chrono::steady_clock::now();
        if (last_failure_log == std::chrono::steady_clock::time_point{} ||
            now - last_failure_log >= limits.accept_log_interval) {
            spdlog::warn("metrics endpoint: accept failed {} time(s): {}; retrying every {} ms ({} connections open)",
                         failures_since_log, ec.message(), limits.accept_backoff.count(), connections.size());
            failures_since_log = 0;
            last_failure_log = now;
        }
        // Out of descriptors (EMFILE, ENFILE) the pending connection stays in the backlog and
        // an immediate retry fails the same way (23,404 failed calls in 8 s before this
        // pause). Free a descriptor of our own if a client holds one for nothing (the oldest
        // idle connection), then wait before trying again. Other errors are not expected;
        // the same pause keeps them from spinning too.
        if (ec == asio::error::no_descriptors || ec.value() == ENFILE) {
            if (const auto idle = oldest_idle()) {
                ++refused;
                close(idle);
            }
        }
        backoff.expires_after(limits.accept_backoff);
        backoff.async_wait([this](const boost::system::error_code& wait_ec) {
            if (!wait_ec) accept();
        });
    }

    void admit(tcp::socket sock)
    {
        if (connections.size() >= limits.max_connections) {
            // Make room by closing the oldest connection that has not sent its request (an
            // idle client holds a slot for nothing); a scraper sends its request at once, so
            // it is not the one evicted.
            const connection_ptr idle = oldest_idle();
            ++refused;
            if (!idle) {
                boost::system::error_code ignored;
                sock.close(ignored);
                return;
            }
            close(idle);
        }
        auto c = std::make_shared<connection>(io, std::move(sock));
        connections.push_back(c);
        open = connections.size();
        arm_timer(c);
        asio::async_read_until(c->sock, c->buf, "\r\n\r\n", [this, c](const boost::system::error_code& ec, std::size_t) {
            if (c->closed) return;
            if (ec) {
                close(c);  // client went away or sent more than 16 KiB of headers
                return;
            }
            c->request_received = true;
            std::istream in(&c->buf);
            request_line rq;
            in >> rq.method >> rq.target;
            ++requests;
            c->reply = make_reply(rq, routes);
            arm_timer(c);  // a fresh deadline for taking the reply
            asio::async_write(c->sock, asio::buffer(c->reply), [this, c](const boost::system::error_code&, std::size_t) {
                if (c->closed) return;
                boost::system::error_code ignored;
                c->sock.shutdown(tcp::socket::shutdown_both, ignored);
                close(c);
            });
        });
    }

    /// The oldest connection that has not sent its request, or null.
    [[nodiscard]] connection_ptr oldest_idle() const
    {
        for (const auto& c : connections) {
            if (!c->request_received) return c;
        }
        return nullptr;
    }

    void arm_timer(const connection_ptr& c)
    {
        c->timer.expires_after(limits.request_timeout);
        c->timer.async_wait([this, c](const boost::system::error_code& ec) {
            if (ec || c->closed) return;  // cancelled: the connection finished in time
            ++timeouts;
            close(c);
        });
    }

    void close(const connection_ptr& c)
    {
        if (c->closed) return;
        c->closed = true;
        boost::system::error_code ignored;
        c->timer.cancel();
        c->sock.close(ignored);  // completes its pending read or write with operation_aborted
        connections.remove(c);
        open = connections.size();
    }
};

http_route metrics_route(std::function<std::string()> render)
{
    return {"/metrics", "text/plain; version=0.0.4; charset=utf-8", "", std::move(render)};
}

metrics_server::metrics_server(const metrics_config& cfg, std::function<std::string()> render, metrics_limits limits)
    : metrics_server(cfg, std::vector<http_route>{metrics_route(std::move(render))}, limits)
{
}

metrics_server::metrics_server(const metrics_config& cfg, std::vector<http_route> routes, metrics_limits limits)
    : impl_(std::make_unique<impl>())
{
    if (limits.max_connections < 1) throw std::invalid_argument("metrics endpoint: max_connections must be >= 1");
    impl_->routes = std::move(routes);
    impl_->limits = limits;
    boost::system::error_code ec;
    const auto addr = asio::ip::make_address(cfg.bind, ec);
    if (ec) throw std::runtime_error("metrics.bind: '" + cfg.bind + "' is not an IP address");
    const tcp::endpoint ep(addr, cfg.port);
    impl_->acceptor.open(ep.protocol(), ec);
    if (!ec) impl_->acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
    if (!ec) impl_->acceptor.bind(ep, ec);
    if (!ec) impl_->acceptor.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) {
        throw std::runtime_error("metrics endpoint: cannot listen on " + cfg.bind + ":" + std::to_string(cfg.port) +
                                 ": " + ec.message() + " (set metrics.port, or metrics.enabled: false)");
    }
    impl_->accept();
    impl_->thread = std::thread([this] {
        io::name_this_thread("paq-metrics");
        impl_->io.run();
    });
}

metrics_server::~metrics_server()
{
    impl_->io.stop();
    if (impl_->thread.joinable()) impl_->thread.join();
}

std::uint16_t metrics_server::port() const noexcept { return impl_->acceptor.local_endpoint().port(); }
std::uint64_t metrics_server::requests() const noexcept { return impl_->requests; }
std::uint64_t metrics_server::timeouts() const noexcept { return impl_->timeouts; }
std::uint64_t metrics_server::connections_refused() const noexcept { return impl_->refused; }
std::uint64_t metrics_server::accept_failures() const noexcept { return impl_->accept_failures; }
std::size_t metrics_server::open_connections() const noexcept { return impl_->open; }

}  // namespace paq::daemon
