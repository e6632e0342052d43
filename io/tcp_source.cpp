#include "io/tcp_source.hpp"

#include "io/net_core.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>

namespace paq::io {

using namespace detail;

std::vector<std::string> tcp_source_config::validate() const
{
    error_list e;
    if (mode == tcp_mode::listen)
        check_bind_address(e, "host", host);
    else if (host.empty())
        e.errors.emplace_back("host is empty (connect mode needs the sender's host name or address)");
    check_port(e, port, mode == tcp_mode::listen);
    check_scale(e, ci16_scale);
    check_channels(e, channels);
    check_rate(e, sample_rate_hz);
    check_rcvbuf(e, rcvbuf_bytes);
    if (!(retry_initial_s >= 0.001 && retry_initial_s <= 60.0)) e.add("retry_initial_s", retry_initial_s, "0.001 .. 60 s");
    if (!(retry_max_s >= retry_initial_s && retry_max_s <= 600.0))
        e.add("retry_max_s", retry_max_s, "retry_initial_s .. 600 s");
    if (read_bytes < 64 || read_bytes > (std::size_t{16} << 20)) e.add("read_bytes", read_bytes, "64 .. 16777216");
    if (!(idle_timeout_s == 0.0 || (idle_timeout_s >= 0.01 && idle_timeout_s <= 3600.0)))
        e.add("idle_timeout_s", idle_timeout_s, "0 (off) or 0.01 .. 3600 s");
    if (mode == tcp_mode::connect && !allow.empty())
        e.errors.emplace_back("allow applies to listen mode only (connect mode dials host itself); remove it or use mode listen");
    for (auto& m : check_allow_list(allow)) e.errors.push_back(std::move(m));
    return e.errors;
}

// ---- tcp_source ----------------------------------------------------------------------------

struct tcp_source::impl final : net_core {
    impl(source_counters& c, tcp_source_config config)
        : net_core(c, describe_config(config)), cfg(std::move(config)),
          sample_bytes(bytes_per_sample(cfg.format) * static_cast<std::size_t>(cfg.channels)), buf(cfg.read_bytes + sample_bytes),
          backoff_s(cfg.retry_initial_s), idle_timeout(seconds(cfg.idle_timeout_s)),
          takeover_silence(cfg.idle_timeout_s > 0.0 ? std::min(idle_timeout, seconds(tcp_listen_takeover_silence_s))
                                                    : seconds(tcp_listen_takeover_silence_s)),
          min_window_bytes(std::max<std::uint64_t>(sample_bytes, static_cast<std::uint64_t>(tcp_listen_min_rate_fraction *
                                                                                            cfg.sample_rate_hz *
                                                                                            static_cast<double>(sample_bytes))))
    {
        set_allow_list(cfg.allow);
        raw_capacity(cfg.format, cfg.read_bytes / sample_bytes + 1, cfg.channels);
    }

    static std::string describe_config(const tcp_source_config& c)
    {
        return std::string("tcp ") + (c.mode == tcp_mode::connect ? "connect " : "listen ") +
               endpoint_text(c.host, c.port) + " (" + std::string(to_sigmf_datatype(c.format)) + ", " +
               format_rate(c.sample_rate_hz) + channels_text(c.channels) + (c.allow.empty() ? "" : ", allow-list") + ")";
    }

    void close_all() noexcept override
    {
        error_code ec;
        peer_connected.store(false);
        resolver.cancel();
        retry_timer.cancel();
        idle_timer.cancel();
        socket.close(ec);
        acceptor.close(ec);
    }

    void run()
    {
        if (cfg.idle_timeout_s > 0.0) {
            spdlog::info("{}: a connection that sends nothing for {} s is dropped (idle_timeout_s){}", name,
                         cfg.idle_timeout_s, cfg.mode == tcp_mode::connect ? " and dialled again" : "");
        }
        if (cfg.mode == tcp_mode::listen) {
            start_listening();
            arm_accept();
        } else {
            start_connect();
        }
    }

    [[nodiscard]] static std::chrono::steady_clock::duration seconds(double s)
    {
        return std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(s));
    }

    /// The wait before the next attempt after one that brought no data: the current backoff,
    /// which then doubles up to retry_max_s. Only data resets it (on_bytes), so a peer that
    /// accepts and closes, or is refused, at once is retried ever more slowly, not every
    /// retry_initial_s.
    [[nodiscard]] double next_backoff_s()
    {
        const double wait = backoff_s;
        backoff_s = std::min(backoff_s * 2.0, cfg.retry_max_s);
        last_retry_delay_s.store(wait);
        return wait;
    }

    // -- connect mode
    void start_connect()
    {
        resolver.async_resolve(cfg.host, std::to_string(cfg.port),
                               [this](const error_code& ec, const tcp::resolver::results_type& results) {
                                   if (stopping || ec == asio::error::operation_aborted) return;
                                   if (ec) {
                                       limiter.warn("{}: cannot resolve '{}': {}; retrying in {} s", name, cfg.host,
                                                    ec.message(), backoff_s);
                                       schedule_retry();
                                       return;
                                   }
                                   endpoints.assign(results.begin(), results.end());
                                   try_endpoint(0);
                               });
    }

    void try_endpoint(std::size_t index)
    {
        if (index >= endpoints.size()) {
            limiter.warn("{}: cannot connect: {}; retrying in {} s", name, last_error, backoff_s);
            schedule_retry();
            return;
        }
        const tcp::endpoint ep = endpoints[index].endpoint();
        error_code ec;
        socket.close(ec);
        socket.open(ep.protocol(), ec);
        if (ec) {
            last_error = "cannot open a socket: " + ec.message();
            try_endpoint(index + 1);
            return;
        }
        // Before connect(), so that the TCP window scale is chosen for this buffer.
        apply_rcvbuf(socket, cfg.rcvbuf_bytes, name);
        socket.async_connect(ep, [this, index](const error_code& cec) {
            if (stopping || cec == asio::error::operation_aborted) return;
            if (cec) {
                last_error = cec.message();
                try_endpoint(index + 1);
                return;
            }
            // The backoff is not reset here: a peer that accepts and closes at once would
            // otherwise be dialled every retry_initial_s for ever (on_bytes resets it).
            on_connected();
        });
    }

    void schedule_retry()
    {
        retry_timer.expires_after(seconds(next_backoff_s()));
        retry_timer.async_wait([this](const error_code& ec) {
            if (stopping || ec) return;
            start_connect();
        });
    }

    // -- listen mode
    void start_listening()
    {
        const tcp::endpoint ep(asio::ip::make_address(cfg.host), static_cast<std::uint16_t>(cfg.port));
        error_code ec;
        acceptor.open(ep.protocol(), ec);
        if (ec) throw std::runtime_error(name + ": cannot open a TCP socket: " + ec.message());
        // Rebinding a port whose last connection is in TIME_WAIT is fine; a second listener
        // still gets EADDRINUSE.
        acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
        apply_rcvbuf(acceptor, cfg.rcvbuf_bytes, name);  // inherited by accepted sockets
        acceptor.bind(ep, ec);
        if (ec) throw std::runtime_error(name + ": cannot bind: " + ec.message());
        acceptor.listen(asio::socket_base::max_listen_connections, ec);
        if (ec) throw std::runtime_error(name + ": cannot listen: " + ec.message());
        local_port.store(acceptor.local_endpoint().port());
        spdlog::info("{}: listening on port {}", name, local_port.load());
        log_allow_list("clients");
    }

    // The accept loop: one async_accept at a time (accepting), kept running while a client is
    // served so that another can be refused or take over. A client refused or gone costs no
    // wait; only a failing accept (out of descriptors) pauses the loop (accept_not_before).
    void arm_accept()
    {
        if (accepting || stopping) return;
        accepting = true;
        acceptor.async_accept([this](const error_code& ec, tcp::socket peer) {
            accepting = false;
            if (stopping) return;
            if (ec) {
                // E.g. out of file descriptors: try again shortly rather than spin.
                limiter.warn("{}: accept failed: {}", name, ec.message());
                accept_not_before = std::max(accept_not_before, std::chrono::steady_clock::now() + std::chrono::milliseconds(100));
            } else {
                on_accept(std::move(peer));
            }
            resume_accept();
        });
    }

    void resume_accept()
    {
        if (accepting || accept_waiting || stopping) return;
        if (std::chrono::steady_clock::now() >= accept_not_before) {
            arm_accept();
            return;
        }
        accept_waiting = true;
        retry_timer.expires_at(accept_not_before);
        retry_timer.async_wait([this](const error_code& ec) {
            accept_waiting = false;
            if (stopping || ec) return;
            resume_accept();  // accept_not_before may have moved on meanwhile
        });
    }

    /// Listen: why the client served does not count as sending now (for the takeover and
    /// the log), or empty when it does (tcp_listen_min_rate_fraction).
    [[nodiscard]] std::string not_sending_why(std::chrono::steady_clock::time_point now) const
    {
        if (!got_data) return "sent nothing since it connected";
        const auto silent = now - last_data;
        if (silent >= takeover_silence) {
            return "silent for " + std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(silent).count()) +
                   " ms";
        }
        // The second of waiting now under way, if it is complete; else the last complete one.
        std::uint64_t bytes = 0;
        if (waited + silent >= rate_window) {
            bytes = window_bytes;
        } else if (full_window_seen) {
            bytes = previous_window_bytes;
        } else {
            return {};  // younger than one second of waiting: not judged by its rate
        }
        if (bytes >= min_window_bytes) return {};
        return "sent " + std::to_string(bytes) + " bytes in a second of waiting, below the least rate of " +
               std::to_string(min_window_bytes) + " bytes a second";
    }

    /// Closes `peer` with a reset (RST rather than FIN: the client learns at once, and no
    /// TIME_WAIT is left).
    static void reset(tcp::socket& peer)
    {
        error_code ec;
        peer.set_option(asio::socket_base::linger(true, 0), ec);
        peer.close(ec);
    }

    void on_accept(tcp::socket peer)
    {
        error_code pec;
        const auto who = peer.remote_endpoint(pec);
        const std::string who_text = pec ? std::string("?") : sender_text(who.address(), who.port());
        if (!allow.empty()) {
            // An unknown peer (it already left) is refused too: nothing proves it allowed.
            if (pec || !admit(who.address(), who.port(), "connection")) {
                if (pec) counters.refused += 1;
                reset(peer);  // at once, and the next client is accepted at once
                return;
            }
        }
        if (socket.is_open()) {
            const auto now = std::chrono::steady_clock::now();
            const std::string why = not_sending_why(now);
            if (why.empty()) {
                tcounters.busy_refused += 1;
                busy_log.warn("{}: client {} refused: already serving one that is sending (one client at a time; "
                              "{} refused in all)",
                              name, who_text, tcounters.busy_refused.load());
                reset(peer);
                return;
            }
            // The client served is not sending (it never did, its sender restarted without
            // closing, the link went down, or it trickles): the new one is more likely the
            // live sender. A client that is sending keeps its place, so two live senders
            // cannot make the source flip.
            tcounters.takeovers += 1;
            disconnect(why + " while client " + who_text + " arrived: serving the new client instead");
            if (stopping) {  // end_on_close
                reset(peer);
                return;
            }
        }
        socket = std::move(peer);
        on_connected();
    }

    // -- both modes
    /// SO_KEEPALIVE, with probes after 10 s of silence, every 5 s, 3 unanswered: a peer host
    /// that vanished (power, cable) is noticed within ~25 s even with idle_timeout_s 0, where
    /// the kernel's defaults would take over two hours.
    void enable_keepalive()
    {
        error_code ec;
        socket.set_option(asio::socket_base::keep_alive(true), ec);
        bool ok = !ec;
        const int fd = socket.native_handle();
        for (const auto& [option, value] : {std::pair{TCP_KEEPIDLE, 10}, std::pair{TCP_KEEPINTVL, 5}, std::pair{TCP_KEEPCNT, 3}})
            ok = ok && ::setsockopt(fd, IPPROTO_TCP, option, &value, sizeof value) == 0;
        if (!ok) limiter.warn("{}: cannot enable TCP keepalive: {}", name, ec ? ec.message() : std::strerror(errno));
    }

    void on_connected()
    {
        ++generation;
        error_code ec;
        const auto remote = socket.remote_endpoint(ec);
        if (cfg.mode == tcp_mode::connect) local_port.store(socket.local_endpoint(ec).port());
        enable_keepalive();
        connect_log.info("{}: connected to {}", name, sender_text(remote.address(), remote.port()));
        if (connected_once) {
            counters.reconnects += 1;
            sink->gap(0, gap_reason::reconnect);
        }
        connected_once = true;
        peer_connected.store(true);
        carry = 0;
        got_data = false;
        waited = {};
        window_bytes = previous_window_bytes = 0;
        full_window_seen = false;
        start_read(generation);
        arm_idle_timer(generation);
    }

    /// Fires idle_timeout after the last read began; drops the connection if it is still
    /// waiting (start_read only moves last_data, so a busy stream costs no timer operations
    /// per read).
    void arm_idle_timer(std::uint64_t gen)
    {
        if (cfg.idle_timeout_s <= 0.0) return;
        idle_timer.expires_at(last_data + idle_timeout);
        idle_timer.async_wait([this, gen](const error_code& ec) {
            if (stopping || ec || gen != generation) return;
            if (std::chrono::steady_clock::now() - last_data < idle_timeout) {
                arm_idle_timer(gen);
                return;
            }
            tcounters.idle_timeouts += 1;
            disconnect(std::string(got_data ? "sent nothing" : "sent nothing since it connected") + " for " +
                       std::to_string(cfg.idle_timeout_s) + " s (idle_timeout_s)");
        });
    }

    void start_read(std::uint64_t gen)
    {
        // The peer's silence is measured from here, after the sink took the last block: a
        // sink that blocks (a full ring under overflow: block) is our own backpressure, not
        // an idle peer, and must not get the connection dropped.
        last_data = std::chrono::steady_clock::now();
        socket.async_read_some(asio::buffer(buf.data() + carry, cfg.read_bytes),
                               [this, gen](const error_code& ec, std::size_t n) {
                                   // A read of a connection already dropped (idle, taken over)
                                   // may complete later: its bytes belong to no stream now.
                                   if (stopping || gen != generation || ec == asio::error::operation_aborted) return;
                                   if (n > 0) on_bytes(n);
                                   if (stopping) return;  // the sink called stop()
                                   if (ec) {
                                       disconnect(ec == asio::error::eof ? std::string("peer closed the connection")
                                                                         : ec.message());
                                       return;
                                   }
                                   start_read(gen);
                               });
    }

    void on_bytes(std::size_t n)
    {
        // The rate over each second spent waiting for the peer (last_data: when this read
        // began); the sink's time between reads does not count.
        waited += std::chrono::steady_clock::now() - last_data;
        window_bytes += n;
        if (waited >= rate_window) {
            previous_window_bytes = window_bytes;
            full_window_seen = true;
            window_bytes = 0;
            waited = {};
        }
        if (!got_data) {
            got_data = true;
            backoff_s = cfg.retry_initial_s;  // a connection that delivers resets the backoff
        }
        counters.packets += 1;
        counters.bytes += n;
        const std::size_t total = carry + n;
        const std::size_t whole = total / sample_bytes;
        deliver_raw(cfg.format, cfg.ci16_scale, buf.data(), whole, cfg.channels);
        carry = total - whole * sample_bytes;
        // A sample split across reads: keep its first bytes for the next read.
        if (carry > 0) std::memmove(buf.data(), buf.data() + whole * sample_bytes, carry);
    }

    /// Ends the current connection (`why`: for the log) and reconnects, waits for the next
    /// client or, with end_on_close, ends the run.
    void disconnect(const std::string& why)
    {
        ++generation;  // its pending read and idle timer now do nothing
        error_code cec;
        idle_timer.cancel();
        socket.close(cec);
        if (cfg.mode == tcp_mode::connect) local_port.store(0);
        const std::string partial =
            carry > 0 ? " mid-sample (" + std::to_string(carry) + " bytes of a partial sample discarded)" : std::string();
        carry = 0;
        if (cfg.end_on_close) {
            peer_connected.store(false);
            spdlog::info("{}: {}{}; end of stream", name, why, partial);
            stopping = true;
            close_all();
            return;
        }
        if (cfg.mode == tcp_mode::connect) {
            disconnect_log.warn("{}: {}{}; reconnecting in {} s", name, why, partial, backoff_s);
            schedule_retry();
        } else {
            disconnect_log.warn("{}: {}{}; waiting for the next client", name, why, partial);
        }
        // Last: once a test or status reader sees the connection gone, the wait is set.
        peer_connected.store(false);
    }

    tcp_source_config cfg;
    std::size_t sample_bytes;
    std::vector<std::byte> buf;  ///< [carry bytes of a partial sample | up to read_bytes new]
    std::size_t carry = 0;
    double backoff_s;  ///< the next wait after a connection (or refused client) without data
    std::atomic<double> last_retry_delay_s{0.0};
    std::chrono::steady_clock::duration idle_timeout;      ///< cfg.idle_timeout_s (0: off)
    std::chrono::steady_clock::duration takeover_silence;  ///< listen: when a new client may replace the one served
    bool connected_once = false;
    bool got_data = false;  ///< the current connection has delivered bytes
    /// Listen: the current connection's rate, over each rate_window spent waiting for its bytes.
    static constexpr std::chrono::steady_clock::duration rate_window = std::chrono::seconds(1);
    std::chrono::steady_clock::duration waited{};
    std::uint64_t window_bytes = 0, previous_window_bytes = 0;
    bool full_window_seen = false;
    /// tcp_listen_min_rate_fraction of the stream's bytes a second, at least one sample.
    const std::uint64_t min_window_bytes;
    /// When the current read began: the peer has been silent since (the connection's start,
    /// or the end of the last delivery).
    std::chrono::steady_clock::time_point last_data{};
    /// Counts connections: handlers of an earlier one (a read completing after it was
    /// dropped, its idle timer) compare it and do nothing.
    std::uint64_t generation = 0;
    bool accepting = false;       ///< listen: an async_accept is pending
    bool accept_waiting = false;  ///< listen: the retry timer waits to resume accepting
    std::chrono::steady_clock::time_point accept_not_before{};
    std::atomic<bool> peer_connected{false};
    std::string last_error;
    std::vector<tcp::resolver::results_type::value_type> endpoints;
    tcp_counters tcounters;
    // Connection churn a peer can cause at will: each kind on its own limiter, 10 s apart.
    log_limiter connect_log{std::chrono::seconds(10)}, disconnect_log{std::chrono::seconds(10)},
        busy_log{std::chrono::seconds(10)};
    tcp::resolver resolver{ioc};
    tcp::socket socket{ioc};
    tcp::acceptor acceptor{ioc};
    asio::steady_timer retry_timer{ioc};  ///< connect: the reconnect wait; listen: the accept throttle
    asio::steady_timer idle_timer{ioc};
};


tcp_source::tcp_source(tcp_source_config cfg)
    : impl_(std::make_unique<impl>(counters_, checked(std::move(cfg), "tcp source")))
{
    impl_->host_clock = &time_anchor_;
    impl_->host_clock_rate_hz = impl_->cfg.sample_rate_hz;
}

tcp_source::~tcp_source() = default;

std::string tcp_source::describe() const { return impl_->name; }
std::optional<float> tcp_source::ci16_scale() const
{
    if (impl_->cfg.channels == 2) return std::nullopt;  // decoded to cf32x2
    return ci16_scale_of(impl_->cfg.format, impl_->cfg.ci16_scale);
}
int tcp_source::channels() const { return impl_->cfg.channels; }
double tcp_source::sample_rate_hz() const { return impl_->cfg.sample_rate_hz; }
std::uint16_t tcp_source::local_port() const noexcept { return impl_->local_port.load(); }
bool tcp_source::connected() const noexcept { return impl_->peer_connected.load(); }
double tcp_source::last_retry_delay_s() const noexcept { return impl_->last_retry_delay_s.load(); }
const tcp_counters& tcp_source::tcp_counts() const noexcept { return impl_->tcounters; }

namespace {

const source_counter tcp_counter_list[] = {
    {"tcp_idle_timeouts", false, true, "TCP connections dropped after delivering nothing for source.tcp.idle_timeout_s."},
    {"tcp_busy_refused", false, true, "TCP clients refused (listen mode) because another client was being served and sending."},
    {"tcp_takeovers", false, true,
     "TCP clients served (listen mode) in place of one that had sent nothing for 1 s (or source.tcp.idle_timeout_s, when shorter)."},
};

}  // namespace

std::span<const source_counter> tcp_source::counter_list() noexcept { return tcp_counter_list; }

std::vector<source_counter_value> tcp_source::kind_counters() const
{
    const auto& c = impl_->tcounters;
    return counter_values(tcp_counter_list, {static_cast<double>(c.idle_timeouts.load()), static_cast<double>(c.busy_refused.load()),
                                             static_cast<double>(c.takeovers.load())});
}
const tcp_source_config& tcp_source::config() const noexcept { return impl_->cfg; }
void tcp_source::stop() { impl_->request_stop(); }

void tcp_source::run(sample_sink& sink)
{
    if (impl_->stop_requested.load()) return;
    impl_->run();
    run_context(*impl_, sink);
}

}  // namespace paq::io
