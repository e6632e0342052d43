// paq-bert: a software bit-error-rate tester for paqd's UDP bitstreams (docs/BITSTREAM.md).
//
//   paq-bert --base-port 5000 --pattern pn15 --seconds 60 --json bert.json
//
// Listens on one port (all streams share it; the paq header names the stream) or on one port
// per stream (--base-port P: P..P+5 for none, zf, mmse, cma, fde1, fde2, and with --streams 12
// P+6..P+11 for the same paths decided by paqd's trellis (receiver.detector both); --ports
// a,b,...: in that order; --best-port: the best-path stream, id 12). The counting is io::bert_monitor; this file holds the sockets, the gates
// (--seconds, --bits, --idle-timeout, signals), the table and the JSON summary.
//
// Exit codes: 0 clean run; 1 runtime failure (socket receive error, JSON not writable);
// 2 configuration error (bad option value, port not bindable); 3 no datagram arrived;
// 4 fewer streams than --expect-streams; 5 --bits not reached before the run ended. Unknown
// or malformed options are usage errors: 2 (config/cli.hpp).
#include "config/cli.hpp"
#include "dsp/pn.hpp"
#include "dsp/receiver_tables.hpp"
#include "io/bert_monitor.hpp"
#include "io/bitstream.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/udp.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <array>
#include <charconv>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

namespace {

namespace asio = boost::asio;
using udp = asio::ip::udp;
using clock_type = std::chrono::steady_clock;
using namespace paq;

enum exit_code : int {
    exit_ok = 0,
    exit_runtime = 1,
    exit_config = 2,
    exit_no_data = 3,
    exit_missing_streams = 4,
    exit_bits_not_reached = 5,
};

struct options {
    std::optional<int> port;
    std::optional<int> base_port;
    std::string ports;
    std::optional<int> best_port;  ///< the best-path stream's own port (with --base-port or --ports)
    std::string bind = "127.0.0.1";
    std::string pattern = "pn15";
    std::string format = "auto";
    double interval_s = 1.0;
    double seconds = 0.0;
    std::uint64_t bits = 0;
    double idle_timeout_s = 5.0;
    int expect_streams = 0;
    int streams = 6;  ///< ports --base-port binds
    std::string json;
    std::size_t rcvbuf_bytes = std::size_t{8} << 20;
};

struct listen_slot {
    std::uint16_t port = 0;  // as asked (0: ephemeral)
    int stream = -1;         // dedicated stream, or -1 for a shared port
};

[[nodiscard]] std::uint16_t parse_port(const std::string& text, const char* option)
{
    unsigned v = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (text.empty() || ec != std::errc{} || end != text.data() + text.size() || v > 65535) {
        throw std::invalid_argument(std::string(option) + ": '" + text + "' is not a port (allowed: 0 .. 65535)");
    }
    return static_cast<std::uint16_t>(v);
}

[[nodiscard]] std::vector<listen_slot> listen_slots(const options& o)
{
    const int given = (o.port ? 1 : 0) + (o.base_port ? 1 : 0) + (o.ports.empty() ? 0 : 1);
    if (given != 1) throw std::invalid_argument("give exactly one of --port, --base-port, --ports");
    std::vector<listen_slot> slots;
    if (o.port) {
        if (*o.port < 0 || *o.port > 65535) {
            throw std::invalid_argument("--port = " + std::to_string(*o.port) + " is out of range (allowed: 0 .. 65535)");
        }
        slots.push_back({static_cast<std::uint16_t>(*o.port), -1});
    } else if (o.base_port) {
        if (!dsp::chain::valid_streams(o.streams)) {
            throw std::invalid_argument("--streams = " + std::to_string(o.streams) + " is out of range (allowed: 6 or 12)");
        }
        if (*o.base_port < 1 || *o.base_port > 65536 - o.streams) {
            throw std::invalid_argument("--base-port = " + std::to_string(*o.base_port) + " is out of range (allowed: 1 .. " +
                                        std::to_string(65536 - o.streams) + " for " + std::to_string(o.streams) + " streams)");
        }
        for (int s = 0; s < o.streams; ++s) {
            slots.push_back({static_cast<std::uint16_t>(*o.base_port + s), s});
        }
    } else {
        std::size_t begin = 0;
        while (begin <= o.ports.size()) {
            const std::size_t comma = std::min(o.ports.find(',', begin), o.ports.size());
            if (static_cast<int>(slots.size()) == io::bitstream_streams + 1) {
                throw std::invalid_argument("--ports: '" + o.ports + "' lists more than 13 ports");
            }
            slots.push_back({parse_port(o.ports.substr(begin, comma - begin), "--ports"), static_cast<int>(slots.size())});
            begin = comma + 1;
        }
    }
    if (o.best_port) {
        if (o.port) throw std::invalid_argument("--best-port: with --port every stream shares that port, the best-path stream too");
        if (static_cast<int>(slots.size()) > io::best_stream_id) {
            throw std::invalid_argument("--best-port: --ports already names the best-path stream's port (its 13th)");
        }
        if (*o.best_port < 0 || *o.best_port > 65535) {
            throw std::invalid_argument("--best-port = " + std::to_string(*o.best_port) + " is out of range (allowed: 0 .. 65535)");
        }
        slots.push_back({static_cast<std::uint16_t>(*o.best_port), io::best_stream_id});
    }
    return slots;
}

class bert_tester {
public:
    bert_tester(const options& o, const std::vector<listen_slot>& slots, const io::bert_monitor_config& mc)
        : opt_(o), monitor_(mc), signals_(io_, SIGINT, SIGTERM), tick_(io_)
    {
        boost::system::error_code ec;
        const auto address = asio::ip::make_address(o.bind, ec);
        if (ec) throw std::invalid_argument("--bind: '" + o.bind + "' is not an IP address");
        for (const listen_slot& slot : slots) {
            auto& l = listeners_.emplace_back(std::make_unique<listener>(io_, slot.stream));
            l->socket.open(address.is_v6() ? udp::v6() : udp::v4(), ec);
            if (!ec) l->socket.set_option(asio::socket_base::receive_buffer_size(static_cast<int>(o.rcvbuf_bytes)), ec);
            if (!ec) l->socket.bind(udp::endpoint(address, slot.port), ec);
            if (ec) {
                throw std::invalid_argument("cannot listen on " + o.bind + ":" + std::to_string(slot.port) + ": " +
                                            ec.message());
            }
            asio::socket_base::receive_buffer_size granted;
            l->socket.get_option(granted, ec);
            const auto bound = l->socket.local_endpoint().port();
            // What the request got: Linux doubles it (capped at 2 * rmem_max) and Asio's
            // get_option halves the reported value back.
            const auto got = static_cast<std::size_t>(granted.value());
            if (!ec && got < o.rcvbuf_bytes) {
                std::fprintf(stderr,
                             "paq-bert: warning: SO_RCVBUF %zu bytes requested on port %u, the kernel granted %zu "
                             "(raise net.core.rmem_max)\n",
                             o.rcvbuf_bytes, static_cast<unsigned>(bound), got);
            }
            std::printf("paq-bert: listening on %s:%u (%s)\n", o.bind.c_str(), static_cast<unsigned>(bound),
                        slot.stream < 0 ? "all streams" : io::bitstream_name(slot.stream));
            ports_.push_back(bound);
        }
        std::fflush(stdout);
    }

    /// Runs until a gate or a signal ends it; returns the exit code.
    int run()
    {
        start_ = clock_type::now();
        next_print_ = start_ + interval();
        for (auto& l : listeners_) receive(*l);
        signals_.async_wait([this](const boost::system::error_code& ec, int sig) {
            if (ec) return;
            // What arrived before the signal counts: a sender that has ended (paqd after
            // SIGTERM) has put its last datagrams in the sockets, not yet read.
            drain();
            stop(sig == SIGINT ? "sigint" : "sigterm");
        });
        arm_tick();
        io_.run();
        return finish();
    }

private:
    struct listener {
        listener(asio::io_context& io, int s) : socket(io), stream(s) {}
        udp::socket socket;
        int stream;
        udp::endpoint sender;
        std::array<std::uint8_t, 65536> buffer{};
    };

    [[nodiscard]] clock_type::duration interval() const
    {
        return std::chrono::duration_cast<clock_type::duration>(std::chrono::duration<double>(opt_.interval_s));
    }

    [[nodiscard]] double elapsed_s() const
    {
        return std::chrono::duration<double>(clock_type::now() - start_).count();
    }

    void receive(listener& l)
    {
        l.socket.async_receive_from(asio::buffer(l.buffer), l.sender,
                                    [this, &l](const boost::system::error_code& ec, std::size_t n) {
                                        if (ec == asio::error::operation_aborted || stopped_) return;
                                        if (ec) {
                                            ++receive_errors_;
                                            if (ec != asio::error::connection_refused && ec != asio::error::message_size) {
                                                runtime_error_ = "receive on port " +
                                                                 std::to_string(l.socket.local_endpoint().port()) +
                                                                 " failed: " + ec.message();
                                                stop("receive-error");
                                                return;
                                            }
                                        } else {
                                            on_datagram(l.stream, {l.buffer.data(), n});
                                        }
                                        receive(l);
                                    });
    }

    /// One datagram received on `stream`'s port: counted, checked, and the gates looked at.
    void on_datagram(int stream, std::span<const std::uint8_t> d)
    {
        last_arrival_ = clock_type::now();
        monitor_.ingest(d, stream);
        report_restarts();
        check_bits_gate();
    }

    /// Reads every datagram already waiting in the sockets, without waiting for more.
    void drain()
    {
        std::array<std::uint8_t, 65536> buf;
        for (auto& l : listeners_) {
            boost::system::error_code ec;
            l->socket.non_blocking(true, ec);
            while (!ec) {
                udp::endpoint from;
                const std::size_t n = l->socket.receive_from(asio::buffer(buf), from, 0, ec);
                if (ec == asio::error::connection_refused || ec == asio::error::message_size) {
                    ++receive_errors_;
                    ec = {};
                    continue;
                }
                if (ec) break;  // would_block: drained (or the socket failed: nothing more to read)
                on_datagram(l->stream, {buf.data(), n});
            }
        }
    }

    /// One line per sender restart recognised (rare: a paqd restart), so the log says when.
    void report_restarts()
    {
        if (monitor_.sender_restarts_total() == restarts_reported_) return;
        restarts_reported_ = monitor_.sender_restarts_total();
        std::printf("paq-bert: at %.1f s a sender restarted (sequence numbers and start samples of a new run): "
                    "sequence tracking and the PN checker start over, counts go on (%llu restarts in all)\n",
                    elapsed_s(), static_cast<unsigned long long>(restarts_reported_));
        std::fflush(stdout);
    }

    void check_bits_gate()
    {
        if (opt_.bits == 0) return;
        const int active = monitor_.active_streams();
        if (active >= std::max(1, opt_.expect_streams) && monitor_.min_bits_checked() >= opt_.bits) {
            bits_reached_ = true;
            stop("bits");
        }
    }

    void arm_tick()
    {
        tick_.expires_after(std::chrono::milliseconds(100));
        tick_.async_wait([this](const boost::system::error_code& ec) {
            if (ec || stopped_) return;
            const auto now = clock_type::now();
            if (opt_.seconds > 0.0 && elapsed_s() >= opt_.seconds) {
                stop("seconds");
                return;
            }
            if (opt_.idle_timeout_s > 0.0 && last_arrival_ &&
                std::chrono::duration<double>(now - *last_arrival_).count() >= opt_.idle_timeout_s) {
                stop("idle-timeout");
                return;
            }
            if (opt_.interval_s > 0.0 && now >= next_print_) {
                print_table(false);
                next_print_ += interval();
                if (next_print_ < now) next_print_ = now + interval();
            }
            arm_tick();
        });
    }

    void stop(const char* reason)
    {
        if (stopped_) return;
        stopped_ = true;
        end_reason_ = reason;
        io_.stop();
    }

    /// Bitstream s (0 .. 11, 12 the best-path stream) has a row: it was received, had malformed
    /// datagrams or has a port.
    [[nodiscard]] bool shown(int s) const
    {
        if (monitor_.stats(s).active() || monitor_.stats(s).malformed > 0) return true;
        for (const auto& l : listeners_) {
            if (l->stream == s) return true;
        }
        return false;
    }

    /// The decoded streams (paqd's publisher.decoded_destinations) received: their stream ids.
    [[nodiscard]] std::vector<int> decoded_streams() const
    {
        std::vector<int> v;
        for (int s = 0; s < io::bitstream_streams; ++s) {
            if (monitor_.stats(io::bert_monitor::decoded_id(s)).active()) v.push_back(s);
        }
        return v;
    }

    void print_table(bool final) const
    {
        std::printf("\npaq-bert %s %.1f s, %s, %llu datagrams, %llu malformed (%llu unattributed)\n",
                    final ? "summary after" : "at", elapsed_s(), std::string(dsp::to_string(monitor_.pattern())).c_str(),
                    static_cast<unsigned long long>(monitor_.datagrams_total()),
                    static_cast<unsigned long long>(monitor_.malformed_total()),
                    static_cast<unsigned long long>(monitor_.malformed_unattributed()));
        std::printf("%-4s %-12s %10s %13s %10s %10s %8s %6s %6s %6s %5s %6s %7s\n", "id", "path", "packets", "bits",
                    "errors", "BER", "lost", "dup", "reord", "malf", "lock", "resync", "restart");
        for (int s = 0; s <= io::best_stream_id; ++s) {
            if (!shown(s)) continue;
            const io::bert_stream_stats st = monitor_.stats(s);
            std::printf("%-4d %-12s %10llu %13llu %10llu %10.3e %8llu %6llu %6llu %6llu %5s %6llu %7llu\n", s,
                        io::bitstream_name(s), static_cast<unsigned long long>(st.datagrams),
                        static_cast<unsigned long long>(st.pn.bits_checked),
                        static_cast<unsigned long long>(st.pn.bit_errors), st.ber(),
                        static_cast<unsigned long long>(st.lost), static_cast<unsigned long long>(st.duplicated),
                        static_cast<unsigned long long>(st.reordered), static_cast<unsigned long long>(st.malformed),
                        st.pn.locked ? "yes" : "no", static_cast<unsigned long long>(st.pn.resyncs),
                        static_cast<unsigned long long>(st.sender_restarts));
        }
        // A coded link's decoded streams: their information bits checked, their codewords counted,
        // and the channel's BER before decoding (the converged codewords' received bits that
        // the decoder corrected). The same stream's bitstream carries the coded bits, which no
        // PN checker can follow.
        const std::vector<int> decoded = decoded_streams();
        if (!decoded.empty()) {
            std::printf("decoded streams (receiver.fec):\n%-4s %-12s %-15s %10s %13s %10s %10s %9s %7s %9s %6s %10s %8s %6s %5s %6s\n",
                        "id", "path", "code", "packets", "bits", "errors", "BER", "codewords", "failed", "FER", "iter",
                        "chan BER", "lost", "dup", "lock", "resync");
        }
        for (int s : decoded) {
            const io::bert_stream_stats st = monitor_.stats(io::bert_monitor::decoded_id(s));
            std::printf("%-4d %-12s %-15s %10llu %13llu %10llu %10.3e %9llu %7llu %9.3e %6.2f %10.3e %8llu %6llu %5s %6llu\n", s,
                        dsp::stream_name(s), std::string(dsp::to_string(st.code)).c_str(),
                        static_cast<unsigned long long>(st.datagrams), static_cast<unsigned long long>(st.pn.bits_checked),
                        static_cast<unsigned long long>(st.pn.bit_errors), st.ber(),
                        static_cast<unsigned long long>(st.fec.codewords), static_cast<unsigned long long>(st.fec.codewords_failed),
                        st.fec.fer(), st.fec.mean_iterations(),
                        st.fec.channel_ber(),
                        static_cast<unsigned long long>(st.lost), static_cast<unsigned long long>(st.duplicated),
                        st.pn.locked ? "yes" : "no", static_cast<unsigned long long>(st.pn.resyncs));
        }
        // paqd's receiver.detector both: each path's two detectors side by side, on the same
        // packets (the ratio is the trellis's BER over the symbol-by-symbol detector's).
        bool header = false;
        for (const auto& [p, sxs, trellis] : detector_pairs()) {
            if (!header) {
                std::printf("detectors side by side:\n%-6s %12s %12s %10s\n", "path", "BER sxs", "BER trellis", "ratio");
                header = true;
            }
            std::printf("%-6s %12.3e %12.3e %10.3g\n", dsp::path_name(p), sxs, trellis, sxs > 0.0 ? trellis / sxs : 0.0);
        }
        if (!monitor_.last_error().empty()) std::printf("last malformed: %s\n", monitor_.last_error().c_str());
        std::fflush(stdout);
    }

    /// The paths whose symbol-by-symbol stream (0 .. 5) and trellis stream (6 .. 11) both
    /// checked bits: (path, BER of the first, BER of the second).
    [[nodiscard]] std::vector<std::tuple<int, double, double>> detector_pairs() const
    {
        std::vector<std::tuple<int, double, double>> v;
        for (int p = 0; p < dsp::chain::num_paths; ++p) {
            const io::bert_stream_stats a = monitor_.stats(p);
            const io::bert_stream_stats b = monitor_.stats(p + dsp::chain::num_paths);
            if (a.pn.bits_checked > 0 && b.pn.bits_checked > 0) v.emplace_back(p, a.ber(), b.ber());
        }
        return v;
    }

    [[nodiscard]] nlohmann::json summary(int code) const
    {
        // The keys a bitstream and a decoded stream share.
        const auto counts = [](int s, const io::bert_stream_stats& st) {
            return nlohmann::json{{"stream", s},
                                  {"path", io::bitstream_name(s)},
                                  {"datagrams", st.datagrams},
                                  {"bytes", st.bytes},
                                  {"bits_checked", st.pn.bits_checked},
                                  {"bit_errors", st.pn.bit_errors},
                                  {"ber", st.ber()},
                                  {"bits_before_lock", st.pn.bits_before_lock},
                                  {"locked", st.pn.locked},
                                  {"resyncs", st.pn.resyncs},
                                  {"sender_restarts", st.sender_restarts},
                                  {"lost", st.lost},
                                  {"duplicated", st.duplicated},
                                  {"reordered", st.reordered},
                                  {"packets_checked", st.packets_checked},
                                  {"packets_skipped", st.packets_skipped}};
        };
        nlohmann::json streams = nlohmann::json::array();
        for (int s = 0; s <= io::best_stream_id; ++s) {
            if (!shown(s)) continue;
            const io::bert_stream_stats st = monitor_.stats(s);
            nlohmann::json j = counts(s, st);
            j["malformed"] = st.malformed;
            j["last_bep_estimate"] = st.last_bep_estimate;
            j["last_dqm"] = st.last_dqm ? nlohmann::json(*st.last_dqm) : nlohmann::json(nullptr);
            streams.push_back(std::move(j));
        }
        nlohmann::json decoded = nlohmann::json::array();
        for (int s : decoded_streams()) {
            const io::bert_stream_stats st = monitor_.stats(io::bert_monitor::decoded_id(s));
            nlohmann::json j = counts(s, st);
            j["code"] = std::string(dsp::to_string(st.code));
            j["codewords"] = st.fec.codewords;
            j["codewords_failed"] = st.fec.codewords_failed;
            j["fer"] = st.fec.fer();
            j["iterations"] = st.fec.iterations;
            j["mean_iterations"] = st.fec.mean_iterations();
            j["channel_bits"] = st.fec.channel_bits;
            j["channel_bit_errors"] = st.fec.channel_bit_errors;
            j["channel_ber"] = st.fec.channel_ber();
            decoded.push_back(std::move(j));
        }
        nlohmann::json detectors = nlohmann::json::array();
        for (const auto& [p, sxs, trellis] : detector_pairs()) {
            detectors.push_back({{"path", dsp::path_name(p)},
                                 {"ber_sxs", sxs},
                                 {"ber_trellis", trellis},
                                 {"ratio", sxs > 0.0 ? nlohmann::json(trellis / sxs) : nlohmann::json(nullptr)}});
        }
        return {{"tool", "paq-bert"},
                {"pattern", std::string(dsp::to_string(monitor_.pattern()))},
                {"bind", opt_.bind},
                {"ports", ports_},
                {"elapsed_s", elapsed_s()},
                {"end_reason", end_reason_},
                {"exit_code", code},
                {"datagrams", monitor_.datagrams_total()},
                {"malformed", monitor_.malformed_total()},
                {"malformed_unattributed", monitor_.malformed_unattributed()},
                {"last_malformed_error", monitor_.last_error()},
                {"receive_errors", receive_errors_},
                {"active_streams", monitor_.active_streams()},
                {"streams", streams},
                {"decoded_streams", decoded},
                {"detectors", detectors}};
    }

    int finish()
    {
        int code = exit_ok;
        std::string why;
        if (!runtime_error_.empty()) {
            code = exit_runtime;
            why = runtime_error_;
        } else if (monitor_.datagrams_total() == 0) {
            code = exit_no_data;
            why = "no valid datagram arrived";
        } else if (monitor_.active_streams() < opt_.expect_streams) {
            code = exit_missing_streams;
            why = std::to_string(monitor_.active_streams()) + " stream(s) active, --expect-streams " +
                  std::to_string(opt_.expect_streams);
        } else if (opt_.bits > 0 && !bits_reached_) {
            code = exit_bits_not_reached;
            why = "--bits " + std::to_string(opt_.bits) + " not reached (fewest checked: " +
                  std::to_string(monitor_.min_bits_checked()) + ")";
        }
        print_table(true);
        std::printf("paq-bert: ended by %s, exit code %d%s%s\n", end_reason_.c_str(), code, why.empty() ? "" : ": ",
                    why.c_str());
        std::fflush(stdout);
        if (!opt_.json.empty()) {
            std::ofstream f(opt_.json);
            f << summary(code).dump(2) << "\n";
            f.close();
            if (!f) {
                std::fprintf(stderr, "paq-bert: error: cannot write --json '%s'\n", opt_.json.c_str());
                return exit_runtime;
            }
        }
        return code;
    }

    const options& opt_;
    asio::io_context io_;
    io::bert_monitor monitor_;
    std::vector<std::unique_ptr<listener>> listeners_;
    std::vector<unsigned> ports_;
    asio::signal_set signals_;
    asio::steady_timer tick_;
    clock_type::time_point start_{};
    clock_type::time_point next_print_{};
    std::optional<clock_type::time_point> last_arrival_;
    bool stopped_ = false;
    bool bits_reached_ = false;
    std::string end_reason_ = "?";
    std::string runtime_error_;
    std::uint64_t receive_errors_ = 0;
    std::uint64_t restarts_reported_ = 0;  ///< sender restarts already printed
};

}  // namespace

int main(int argc, char** argv)
{
    CLI::App app{"paq-bert: software BER tester for paqd's UDP bitstreams (paq, dqe or bare DQE datagrams)"};
    cli::conventions(app, "paq-bert",
                     "0 clean run; 1 runtime failure (socket receive error, JSON not writable); 2 usage or configuration "
                     "error (bad option value, port not bindable); 3 no datagram arrived; 4 fewer streams than "
                     "--expect-streams; 5 --bits not reached before the run ended");
    options o;
    app.add_option("--port", o.port, "One port all streams share (0: any free port, printed at start)");
    app.add_option("--base-port", o.base_port,
                   "Ports P..P+5 for none, zf, mmse, cma, fde1, fde2 (with --streams 12 also P+6..P+11 for "
                   "none_trellis .. fde2_trellis)");
    app.add_option("--streams", o.streams,
                   "Ports --base-port binds: 6, or 12 for paqd's receiver.detector both")
        ->capture_default_str();
    app.add_option("--ports", o.ports,
                   "Comma-separated ports, one per stream in stream-id order (up to 13: the 13th the best-path stream, id 12)");
    app.add_option("--best-port", o.best_port,
                   "The best-path stream's port (paqd's publisher.best_destination), beside --base-port or --ports");
    app.add_option("--bind", o.bind, "Local address to listen on")->capture_default_str();
    app.add_option("--pattern", o.pattern, "PN pattern: pn9, pn11, pn15, pn20, pn23, pn31")->capture_default_str();
    app.add_option("--format", o.format, "Accepted datagrams: auto, paq, dqe, dqe-raw (others count as malformed)")
        ->capture_default_str();
    app.add_option("--interval", o.interval_s, "Seconds between tables, 0 = only the summary")->capture_default_str();
    app.add_option("--seconds", o.seconds, "Stop after this many seconds, 0 = no limit")->capture_default_str();
    app.add_option("--bits", o.bits, "Stop when every active stream has checked this many bits, 0 = off")
        ->capture_default_str();
    app.add_option("--idle-timeout", o.idle_timeout_s,
                   "Stop when nothing arrived for this many seconds after the first datagram, 0 = off")
        ->capture_default_str();
    app.add_option("--expect-streams", o.expect_streams, "Streams that must be active for a clean run, 0 .. 25 (bitstreams, the best-path stream and decoded streams)")
        ->capture_default_str();
    app.add_option("--json", o.json, "Write the summary as JSON to this file");
    app.add_option("--rcvbuf", o.rcvbuf_bytes, "SO_RCVBUF bytes per socket")->capture_default_str();
    if (const int rc = cli::parse(app, argc, argv); rc >= 0) return rc;

    try {
        io::bert_monitor_config mc;
        mc.pattern = dsp::parse_pn_pattern(o.pattern);
        if (o.format != "auto") mc.expected_format = io::parse_bitstream_format(o.format);
        if (!(o.interval_s >= 0.0)) throw std::invalid_argument("--interval = " + std::to_string(o.interval_s) + " is out of range (allowed: >= 0)");
        if (!(o.seconds >= 0.0)) throw std::invalid_argument("--seconds = " + std::to_string(o.seconds) + " is out of range (allowed: >= 0)");
        if (!(o.idle_timeout_s >= 0.0)) {
            throw std::invalid_argument("--idle-timeout = " + std::to_string(o.idle_timeout_s) + " is out of range (allowed: >= 0)");
        }
        if (o.expect_streams < 0 || o.expect_streams > io::bert_monitor::tracked_streams) {
            throw std::invalid_argument("--expect-streams = " + std::to_string(o.expect_streams) +
                                        " is out of range (allowed: 0 .. 25)");
        }
        if (o.rcvbuf_bytes < 4096 || o.rcvbuf_bytes > (std::size_t{1} << 30)) {
            throw std::invalid_argument("--rcvbuf = " + std::to_string(o.rcvbuf_bytes) +
                                        " is out of range (allowed: 4096 .. 1073741824)");
        }
        const auto slots = listen_slots(o);
        bert_tester tester(o, slots, mc);
        try {
            return tester.run();
        } catch (const std::exception& e) {
            std::cerr << "paq-bert: error: " << e.what() << "\n";
            return exit_runtime;
        }
    } catch (const std::exception& e) {
        std::cerr << "paq-bert: error: " << e.what() << "\n";
        return exit_config;
    }
}
