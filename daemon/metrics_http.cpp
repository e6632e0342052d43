#include "daemon/metrics_http.hpp"

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/streambuf.hpp>
#include <boost/asio/write.hpp>
#include <spdlog/spdlog.h>

#include <atomic>
#include <cstdio>
#include <istream>
#include <thread>

namespace paq::daemon {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

struct metrics_server::impl {
    asio::io_context io;
    tcp::acceptor acceptor{io};
    std::function<std::string()> render;
    std::thread thread;
    std::atomic<std::uint64_t> requests{0};

    void accept()
    {
        acceptor.async_accept([this](const boost::system::error_code& ec, tcp::socket sock) {
            if (ec) {
                if (ec != asio::error::operation_aborted) accept();
                return;
            }
            serve(std::make_shared<tcp::socket>(std::move(sock)));
            accept();
        });
    }

    void serve(std::shared_ptr<tcp::socket> sock)
    {
        auto buf = std::make_shared<asio::streambuf>(16384);
        asio::async_read_until(*sock, *buf, "\r\n\r\n", [this, sock, buf](const boost::system::error_code& ec, std::size_t) {
            if (ec) return;  // client went away or sent more than 16 KiB of headers
            std::istream in(buf.get());
            std::string method, target;
            in >> method >> target;
            ++requests;
            auto reply = std::make_shared<std::string>();
            if (method != "GET" && method != "HEAD") {
                *reply = "HTTP/1.1 405 Method Not Allowed\r\nAllow: GET, HEAD\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
            } else if (target != "/metrics" && target.rfind("/metrics?", 0) != 0) {
                const std::string body = "paqd: metrics are at /metrics\n";
                *reply = "HTTP/1.1 404 Not Found\r\nContent-Type: text/plain\r\nContent-Length: " +
                         std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
            } else {
                std::string body;
                try {
                    body = render();
                } catch (const std::exception& e) {
                    body = "# render failed: " + std::string(e.what()) + "\n";
                }
                *reply = "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\nContent-Length: " +
                         std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + (method == "HEAD" ? "" : body);
            }
            asio::async_write(*sock, asio::buffer(*reply), [sock, reply](const boost::system::error_code&, std::size_t) {
                boost::system::error_code ignored;
                sock->shutdown(tcp::socket::shutdown_both, ignored);
            });
        });
    }
};

metrics_server::metrics_server(const metrics_config& cfg, std::function<std::string()> render)
    : impl_(std::make_unique<impl>())
{
    impl_->render = std::move(render);
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

namespace {

void sample(std::string& out, const char* name, const std::string& labels, double value)
{
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.17g", value);
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
    if (x.vita49) {
        metric(o, "paqd_vita49_context_packets_total", "counter", "VITA-49 context packets skipped.", d(x.vita49_context));
        metric(o, "paqd_vita49_other_stream_total", "counter", "VITA-49 data packets of another stream id dropped.",
               d(x.vita49_other_stream));
        metric(o, "paqd_vita49_duplicates_total", "counter", "Repeated VITA-49 packets dropped.", d(x.vita49_duplicates));
        metric(o, "paqd_vita49_late_total", "counter", "Reordered VITA-49 packets dropped (their place was a gap).",
               d(x.vita49_late));
        metric(o, "paqd_vita49_resyncs_total", "counter", "VITA-49 timestamp jumped backwards: tracking restarted.",
               d(x.vita49_resyncs));
    }
    metric(o, "paqd_batches_published_total", "counter", "Batches processed and published.", d(s.batches_published));
    metric(o, "paqd_batches_lost_total", "counter", "Batches lost to backend failures.", d(s.batches_lost));
    metric(o, "paqd_backend_errors_total", "counter", "Backend (e.g. GPU) errors.", d(s.backend_errors));
    metric(o, "paqd_batches_on_fallback_total", "counter", "Batches processed on the CPU fallback.", d(s.batches_on_fallback));
    metric(o, "paqd_packets_total", "counter", "Packets found and decoded.", d(s.tally.packets_found));
    metric(o, "paqd_packets_last_batch", "gauge", "Packets in the last published batch.", d(s.packets_last_batch));
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
    metric(o, "paqd_record_rows_total", "counter", "Per-packet record rows written.", d(x.record_rows));
    metric(o, "paqd_recorded_samples_total", "counter", "Samples written to the SigMF recording.", d(x.recorded_samples));
    metric(o, "paqd_recording_dropped_samples_total", "counter", "Samples not recorded (disk too slow or failed).",
           d(x.recording_dropped_samples));
    metric(o, "paqd_up", "gauge", "1 while paqd runs.", s.finished ? 0.0 : 1.0);
    return o;
}

}  // namespace paq::daemon
