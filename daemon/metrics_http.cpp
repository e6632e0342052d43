#include "daemon/metrics_http.hpp"

#include <cmath>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/streambuf.hpp>
#include <boost/asio/write.hpp>
#include <spdlog/spdlog.h>

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
std::string make_reply(const request_line& rq, const std::function<std::string()>& render)
{
    const bool head = rq.method == "HEAD";
    std::string status, headers, body;
    if (rq.method != "GET" && !head) {
        status = "405 Method Not Allowed";
        headers = "Allow: GET, HEAD\r\n";
    } else if (rq.target != "/metrics" && !rq.target.starts_with("/metrics?")) {
        status = "404 Not Found";
        headers = "Content-Type: text/plain\r\n";
        body = "paqd: metrics are at /metrics\n";
    } else {
        status = "200 OK";
        headers = "Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n";
        try {
            body = render();
        } catch (const std::exception& e) {
            body = "# render failed: " + std::string(e.what()) + "\n";
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
    std::function<std::string()> render;
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
            c->reply = make_reply(rq, render);
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

metrics_server::metrics_server(const metrics_config& cfg, std::function<std::string()> render, metrics_limits limits)
    : impl_(std::make_unique<impl>())
{
    if (limits.max_connections < 1) throw std::invalid_argument("metrics endpoint: max_connections must be >= 1");
    impl_->render = std::move(render);
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
    impl_->thread = std::thread([this] { impl_->io.run(); });
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

namespace {

void sample(std::string& out, const char* name, const std::string& labels, double value)
{
    char buf[64];
    // The exposition format's spellings of the special values.
    if (std::isnan(value)) std::snprintf(buf, sizeof buf, "NaN");
    else if (std::isinf(value)) std::snprintf(buf, sizeof buf, value > 0 ? "+Inf" : "-Inf");
    else std::snprintf(buf, sizeof buf, "%.17g", value);
    out += name;
    out += labels;
    out += ' ';
    out += buf;
    out += '\n';
}

void header(std::string& out, const char* name, const char* type, const char* help)
{
    out += "# HELP ";
    out += name;
    out += ' ';
    out += help;
    out += "\n# TYPE ";
    out += name;
    out += ' ';
    out += type;
    out += '\n';
}

/// One unlabelled metric: its HELP and TYPE lines and its sample.
void metric(std::string& out, const char* name, const char* type, const char* help, double value)
{
    header(out, name, type, help);
    sample(out, name, {}, value);
}

double d(std::uint64_t v) { return static_cast<double>(v); }

}  // namespace

std::string render_prometheus(const pipeline_stats& s, const extra_metrics& x, bool have_pattern)
{
    std::string o;
    o.reserve(8192);
    metric(o, "paqd_samples_in_total", "counter", "Samples received by the batcher.", d(s.samples_in));
    metric(o, "paqd_ring_samples_dropped_total", "counter", "Samples dropped because the ring was full.",
           d(s.ring.samples_dropped));
    metric(o, "paqd_ring_overflows_total", "counter", "Ring overflow episodes.", d(s.ring.overflows));
    metric(o, "paqd_ring_fill_samples", "gauge", "Samples waiting in the ring.", d(s.ring.fill));
    metric(o, "paqd_ring_capacity_samples", "gauge", "Ring capacity.", d(s.ring.capacity));
    metric(o, "paqd_ring_gaps_coalesced_total", "counter",
           "Gaps merged into one because the ring's gap markers were at their bound (a gap flood).",
           d(s.ring.gaps_coalesced));
    metric(o, "paqd_samples_in_short_segments_total", "counter",
           "Samples of segments shorter than one packet (between close gaps): no batch is made of them.",
           d(s.samples_in_short_segments));
    header(o, "paqd_gaps_total", "counter", "Gaps in the sample stream, by reason.");
    for (std::size_t r = 0; r < num_gap_reasons; ++r) {
        sample(o, "paqd_gaps_total", "{reason=\"" + std::string(io::to_string(static_cast<io::gap_reason>(r))) + "\"}",
               d(s.gaps_by_reason[r]));
    }
    metric(o, "paqd_samples_lost_in_gaps_total", "counter", "Samples the sources reported lost.", d(s.samples_lost_in_gaps));
    metric(o, "paqd_stalls_total", "counter", "Times the source stalled longer than the stall timeout.", d(s.stalls));
    metric(o, "paqd_source_stalled", "gauge", "1 while the source is stalled.", s.stalled ? 1.0 : 0.0);
    metric(o, "paqd_source_packets_total", "counter", "Datagrams or blocks received by the source.", d(x.source_packets));
    metric(o, "paqd_source_packets_lost_total", "counter", "Datagrams the source found missing.", d(x.source_packets_lost));
    metric(o, "paqd_source_malformed_total", "counter", "Malformed datagrams rejected by the source.", d(x.source_malformed));
    metric(o, "paqd_source_reconnects_total", "counter", "Source reconnections.", d(x.source_reconnects));
    metric(o, "paqd_source_refused_total", "counter",
           "Datagrams or connections from senders outside the source's allow-list, dropped.", d(x.source_refused));
    if (x.vita49) {
        metric(o, "paqd_vita49_context_packets_total", "counter", "VITA-49 context packets skipped.", d(x.vita49_context));
        metric(o, "paqd_vita49_context_rate_mismatches_total", "counter",
               "VITA-49 context packets whose sample rate differs from source.vita49.sample_rate_hz.",
               d(x.vita49_context_rate_mismatches));
        metric(o, "paqd_vita49_count_mismatches_total", "counter",
               "VITA-49 data packets whose 4-bit packet count disagrees with their timestamps (the timestamps are used).",
               d(x.vita49_count_mismatches));
        metric(o, "paqd_vita49_other_stream_total", "counter", "VITA-49 data packets of another stream id dropped.",
               d(x.vita49_other_stream));
        metric(o, "paqd_vita49_duplicates_total", "counter", "Repeated VITA-49 packets dropped.", d(x.vita49_duplicates));
        metric(o, "paqd_vita49_late_total", "counter", "Reordered VITA-49 packets dropped (their place was a gap).",
               d(x.vita49_late));
        metric(o, "paqd_vita49_resyncs_total", "counter",
               "VITA-49 timestamp jumped backwards, or forwards beyond any plausible loss: tracking restarted.",
               d(x.vita49_resyncs));
        metric(o, "paqd_vita49_stream_changes_total", "counter",
               "VITA-49 stream ids followed after the previous one fell silent (stream_change: follow).",
               d(x.vita49_stream_changes));
    }
    metric(o, "paqd_batches_published_total", "counter", "Batches processed and published.", d(s.batches_published));
    metric(o, "paqd_batches_lost_total", "counter", "Batches lost to backend failures.", d(s.batches_lost));
    metric(o, "paqd_backend_errors_total", "counter", "Backend (e.g. GPU) errors.", d(s.backend_errors));
    metric(o, "paqd_batches_on_fallback_total", "counter", "Batches processed on the CPU fallback.", d(s.batches_on_fallback));
    metric(o, "paqd_packets_total", "counter", "Packets found and decoded.", d(s.tally.packets_found));
    metric(o, "paqd_packets_last_batch", "gauge", "Packets in the last published batch.", d(s.packets_last_batch));
    metric(o, "paqd_clock_offset_ppm", "gauge",
           "Transmitter bit clock against the sample clock (> 0: fast), mean over the last batch's packets.",
           s.clock_ppm_last_batch);
    metric(o, "paqd_packets_clock_corrected_total", "counter", "Packets re-timed for the transmitter's clock offset.",
           d(s.tally.packets_clock_corrected));
    metric(o, "paqd_packets_front_end_corrected_total", "counter", "Packets whose DC offset or IQ imbalance stood above the gate (-30 dB) and was removed.",
           d(s.tally.packets_front_end_corrected));
    metric(o, "paqd_front_end_iq_gain_db", "gauge",
           "Front end: Q's amplitude against I's, dB, mean over the last batch's estimated packets (NaN: none).",
           s.iq_gain_db_last_batch);
    metric(o, "paqd_front_end_iq_phase_deg", "gauge",
           "Front end: Q's phase error against I, degrees, mean over the last batch's estimated packets (NaN: none).",
           s.iq_phase_deg_last_batch);
    metric(o, "paqd_front_end_dc_dbc", "gauge",
           "Front end: DC offset against the signal, dBc, over the last batch's estimated packets (NaN: none).",
           s.dc_dbc_last_batch);
    metric(o, "paqd_packets_truncated_total", "counter", "Packets cut by a gap or the stream end.", d(s.tally.packets_truncated));
    metric(o, "paqd_packets_flagged_total", "counter", "Packets with any flag set.", d(s.tally.packets_flagged));
    metric(o, "paqd_packets_missed_total", "counter", "Packets missing from the sequence.", d(s.tally.packets_skipped));
    metric(o, "paqd_cfo_hz_mean", "gauge", "Mean frequency offset estimate.", s.tally.mean_cfo_hz);
    metric(o, "paqd_ebn0_db_mean", "gauge", "Mean estimated Eb/N0.", s.tally.mean_ebn0_db);
    header(o, "paqd_batch_latency_seconds", "gauge", "Last sample of a batch in to its last bit published.");
    sample(o, "paqd_batch_latency_seconds", "{stat=\"last\"}", s.latency_last_ms / 1000.0);
    sample(o, "paqd_batch_latency_seconds", "{stat=\"mean\"}", s.latency_mean_ms / 1000.0);
    sample(o, "paqd_batch_latency_seconds", "{stat=\"max\"}", s.latency_max_ms / 1000.0);
    header(o, "paqd_path_bep_mean", "gauge", "Mean estimated bit error probability per path.");
    for (const auto& p : s.tally.paths) sample(o, "paqd_path_bep_mean", "{path=\"" + p.name + "\"}", p.mean_bep_estimate);
    header(o, "paqd_path_packets_total", "counter", "Packets decoded per path.");
    for (const auto& p : s.tally.paths) sample(o, "paqd_path_packets_total", "{path=\"" + p.name + "\"}", d(p.packets));
    if (have_pattern) {
        header(o, "paqd_path_bits_total", "counter", "Data bits checked against the PN pattern per path.");
        for (const auto& p : s.tally.paths) sample(o, "paqd_path_bits_total", "{path=\"" + p.name + "\"}", d(p.bits_checked));
        header(o, "paqd_path_bit_errors_total", "counter", "Bit errors against the PN pattern per path.");
        for (const auto& p : s.tally.paths) sample(o, "paqd_path_bit_errors_total", "{path=\"" + p.name + "\"}", d(p.bit_errors));
        header(o, "paqd_path_locked", "gauge", "1 when the path's PN checker is locked.");
        for (const auto& p : s.tally.paths) sample(o, "paqd_path_locked", "{path=\"" + p.name + "\"}", p.locked ? 1.0 : 0.0);
    }
    metric(o, "paqd_datagrams_sent_total", "counter", "UDP datagrams sent to the testers.", d(x.datagrams_sent));
    metric(o, "paqd_send_errors_total", "counter", "UDP sends refused by the kernel (e.g. ECONNREFUSED after an ICMP port unreachable; a send that follows the ICMP is counted, so about every other datagram to a closed port).", d(x.send_errors));
    metric(o, "paqd_record_rows_total", "counter", "Per-packet record rows written to the file.", d(x.record_rows));
    metric(o, "paqd_record_rows_lost_total", "counter", "Per-packet record rows that could not be written (disk full).",
           d(x.record_rows_lost));
    metric(o, "paqd_recorded_samples_total", "counter", "Samples written to the SigMF recording.", d(x.recorded_samples));
    metric(o, "paqd_recording_dropped_samples_total", "counter", "Samples not recorded (disk too slow or failed).",
           d(x.recording_dropped_samples));
    metric(o, "paqd_up", "gauge", "1 while paqd runs.", s.finished ? 0.0 : 1.0);
    return o;
}

}  // namespace paq::daemon
