// What the network sources (tcp_source.cpp, udp_source.cpp, vita49_source.cpp) share, inside
// io/ only: the configuration checks, the io_context with its stop and the delivery of
// decoded samples to the sink (net_core), the allow-list admission, and the datagram loop of
// the two UDP sources (datagram_pump). This header is where Boost.Asio enters; the sources'
// public headers pull in none of it.
#pragma once

#include "io/log_limiter.hpp"
#include "io/sample_format.hpp"
#include "io/sample_source.hpp"
#include "io/sender_allow_list.hpp"

// Standard headers first: Boost 1.74's asio/awaitable.hpp uses std::exchange without
// including <utility>, which breaks under C++20 unless it is already included.
#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <utility>

#include <boost/asio.hpp>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <spdlog/spdlog.h>

#include <array>
#include <atomic>
#include <string>
#include <vector>

namespace paq::io::detail {

namespace asio = boost::asio;
using boost::system::error_code;
using asio::ip::tcp;
using asio::ip::udp;

// The largest UDP payload: IPv6's, 65535 - 8 (its length field covers the UDP header, not the
// IP header, so it is 20 bytes more than IPv4's 65535 - 20 - 8). The receive buffers hold one
// byte more, and each receive asks for the datagram's real length (MSG_TRUNC), so anything
// longer (an IPv6 jumbogram) is seen, counted as malformed and dropped, never cut short.
constexpr std::size_t max_datagram_bytes = 65527;
constexpr int receive_flags = MSG_TRUNC;
constexpr int max_rcvbuf_bytes = 1 << 30;

// ---- configuration checks ------------------------------------------------------------------

struct error_list {
    std::vector<std::string> errors;
    template <class T>
    void add(const std::string& field, const T& value, const std::string& allowed)
    {
        std::ostringstream os;
        os << field << " = " << value << " is out of range (allowed: " << allowed << ")";
        errors.push_back(os.str());
    }
};

inline void check_rate(error_list& e, double sample_rate_hz)
{
    if (!(sample_rate_hz > 0.0) || !std::isfinite(sample_rate_hz))
        e.add("sample_rate_hz", sample_rate_hz, "> 0, the sender's rate; the network carries none");
}

inline void check_scale(error_list& e, float ci16_scale)
{
    if (!(ci16_scale > 0.0f) || !std::isfinite(ci16_scale)) e.add("ci16_scale", ci16_scale, "> 0");
}

inline void check_channels(error_list& e, int channels)
{
    if (channels < 1 || channels > 2) e.add("channels", channels, "1 or 2 (two receive channels interleaved, a sample of each per sample time)");
}

/// "" for one channel, ", 2 channels interleaved" for two (describe()).
inline std::string channels_text(int channels) { return channels == 2 ? ", 2 channels interleaved" : ""; }

inline void check_rcvbuf(error_list& e, int rcvbuf_bytes)
{
    if (rcvbuf_bytes < 0 || rcvbuf_bytes > max_rcvbuf_bytes)
        e.add("rcvbuf_bytes", rcvbuf_bytes, "0 (kernel default) .. 1073741824");
}

inline void check_port(error_list& e, int port, bool zero_ok)
{
    if (port < (zero_ok ? 0 : 1) || port > 65535)
        e.add("port", port, zero_ok ? "0 (ephemeral) .. 65535" : "1 .. 65535");
}

inline void check_bind_address(error_list& e, const std::string& field, const std::string& address)
{
    if (!is_numeric_address(address)) e.errors.push_back(field + " = '" + address + "' is not a numeric IPv4 or IPv6 address");
}

[[nodiscard]] inline std::string invalid_config_message(const std::string& what, const std::vector<std::string>& errors)
{
    std::string msg = "invalid " + what + " configuration:";
    for (const auto& s : errors) msg += "\n  " + s;
    return msg;
}

[[nodiscard]] inline std::string format_rate(double hz)
{
    char buf[64];
    if (hz >= 1e6)
        std::snprintf(buf, sizeof buf, "%g MHz", hz / 1e6);
    else if (hz >= 1e3)
        std::snprintf(buf, sizeof buf, "%g kHz", hz / 1e3);
    else
        std::snprintf(buf, sizeof buf, "%g Hz", hz);
    return buf;
}

[[nodiscard]] inline std::string endpoint_text(const std::string& host, int port)
{
    return host.find(':') != std::string::npos ? "[" + host + "]:" + std::to_string(port)
                                               : host + ":" + std::to_string(port);
}

/// 16 bytes, IPv4 as IPv4-mapped IPv6: the one form every comparison uses.
[[nodiscard]] inline std::array<std::uint8_t, 16> v6_bytes(const asio::ip::address& a) noexcept
{
    if (a.is_v4()) return asio::ip::make_address_v6(asio::ip::v4_mapped, a.to_v4()).to_bytes();
    return a.to_v6().to_bytes();
}

[[nodiscard]] inline std::string sender_text(const asio::ip::address& a, std::uint16_t port)
{
    return endpoint_text(a.to_string(), port);
}

template <class Socket>
inline void apply_rcvbuf(Socket& socket, int requested, const std::string& name)
{
    if (requested <= 0) return;
    error_code ec;
    socket.set_option(asio::socket_base::receive_buffer_size(requested), ec);
    if (ec) {
        spdlog::warn("{}: cannot set SO_RCVBUF to {} bytes: {}", name, requested, ec.message());
        return;
    }
    asio::socket_base::receive_buffer_size granted;
    socket.get_option(granted, ec);
    // Linux reports twice the usable size it granted, capped by net.core.rmem_max; a value
    // below the request means the cap cut it.
    if (!ec && granted.value() < requested)
        spdlog::warn("{}: SO_RCVBUF: requested {} bytes, the kernel reports {} (capped by net.core.rmem_max; raise it)", name,
                     requested, granted.value());
}

[[nodiscard]] inline std::size_t count_nonfinite(const cf32* s, std::size_t n) noexcept
{
    std::size_t bad = 0;
    for (std::size_t k = 0; k < n; ++k) bad += (std::isfinite(s[k].real()) && std::isfinite(s[k].imag())) ? 0u : 1u;
    return bad;
}

// ---- what every network source shares ------------------------------------------------------

/// The io_context, the stop flag and the delivery of decoded samples to the sink.
struct net_core {
    net_core(source_counters& c, std::string source_name) : counters(c), name(std::move(source_name)) {}
    virtual ~net_core() = default;

    /// Thread-safe: the close happens on the io_context's thread (run()'s).
    void request_stop()
    {
        stop_requested.store(true);
        asio::post(ioc, [this] {
            stopping = true;
            close_all();
            ioc.stop();
        });
    }

    /// Closes every socket and timer so that pending operations complete with operation_aborted.
    virtual void close_all() noexcept = 0;

    /// A datagram longer than max_datagram_bytes arrived (only the buffer's worth was read):
    /// counted as malformed, logged (rate-limited) and dropped. By default a gap of unknown
    /// size marks its place (gap(0, source_error)), as for any unreadable datagram.
    virtual void oversize_datagram(std::size_t bytes)
    {
        count_oversize(bytes);
        sink->gap(0, gap_reason::source_error);
    }
    /// Counts it as malformed and logs it (rate-limited).
    void count_oversize(std::size_t bytes)
    {
        counters.malformed += 1;
        limiter.warn("{}: datagram of {} bytes is longer than the largest UDP payload read ({} bytes); dropped as "
                     "malformed",
                     name, bytes, max_datagram_bytes);
    }

    /// After validate(): the entries are known to parse.
    void set_allow_list(const std::vector<std::string>& entries)
    {
        allow = sender_allow_list(entries);
        allow_text.clear();
        for (const auto& e : entries) allow_text += (allow_text.empty() ? "" : ", ") + e;
    }

    void log_allow_list(const char* what) const
    {
        if (!allow.empty()) spdlog::info("{}: {} only from {}; others are refused and counted", name, what, allow_text);
    }

    /// Whether `sender` may deliver to this source (the allow-list); a refusal is counted
    /// (source_counters::refused) and logged, at most once per 10 s, naming the sender.
    [[nodiscard]] bool admit(const asio::ip::address& sender, std::uint16_t port, const char* what)
    {
        if (allow.allows(v6_bytes(sender))) return true;
        counters.refused += 1;
        refused_log.warn("{}: {} from {} refused: not in the allow-list ({} refused in all)", name, what,
                         sender_text(sender, port), counters.refused.load());
        return false;
    }

    /// n whole raw IQ samples of `format` at `bytes`: ci16 delivered as received (converted by
    /// the backend), cf32 decoded and scanned for NaN/Inf. With two channels a sample is a
    /// sample time, the channels' values interleaved: decoded to cf32 and delivered as cf32x2.
    /// raw_capacity(n, channels) first sizes the buffers, so that no delivery allocates.
    void deliver_raw(sample_format format, float ci16_scale, const std::byte* bytes, std::size_t n, int channels = 1)
    {
        if (channels == 2) {
            if (raw.size() < 2 * n) raw.resize(2 * n);
            if (raw2.size() < n) raw2.resize(n);
            decode(format, bytes, 2 * n, raw.data(), ci16_scale);
            if (n == 0) return;
            counters.nonfinite += count_nonfinite(raw.data(), 2 * n);
            pair_channels(std::span<const cf32>(raw.data(), 2 * n), std::span<cf32x2>(raw2.data(), n));
            deliver(std::span<const cf32x2>(raw2.data(), n));
            return;
        }
        if (format == sample_format::ci16_le) {
            if (raw16.size() < n) raw16.resize(n);
            decode_ci16(bytes, n, raw16.data());
            deliver(raw16.data(), n, ci16_scale);
        } else {
            if (raw.size() < n) raw.resize(n);
            decode(format, bytes, n, raw.data(), ci16_scale);
            deliver(raw.data(), n);
        }
    }
    void raw_capacity(sample_format format, std::size_t n, int channels = 1)
    {
        if (channels == 2) {
            raw.resize(2 * n);
            raw2.resize(n);
        } else if (format == sample_format::ci16_le) {
            raw16.resize(n);
        } else {
            raw.resize(n);
        }
    }

    /// cf32 samples, counted and scanned for NaN/Inf (source_nonfinite).
    void deliver(const cf32* samples, std::size_t n)
    {
        if (n == 0) return;
        counters.nonfinite += count_nonfinite(samples, n);
        anchor_on_host_clock(n);
        counters.samples += n;
        sink->write(std::span<const cf32>(samples, n));
    }

    /// ci16 samples as received (no conversion here, and nothing to scan: every ci16 sample
    /// is finite); the sink keeps them at their width (a ci16 ring) or converts them.
    void deliver(const ci16* samples, std::size_t n, float scale)
    {
        if (n == 0) return;
        anchor_on_host_clock(n);
        counters.samples += n;
        sink->write_ci16(std::span<const ci16>(samples, n), scale);
    }

    /// Two channels' sample times (decoded, scanned by the caller where they can be non-finite).
    void deliver(std::span<const cf32x2> times)
    {
        if (times.empty()) return;
        anchor_on_host_clock(times.size());
        counters.samples += times.size();
        sink->write_x2(times);
    }

    /// Raw IQ carries no time: the host's clock at arrival (io/sample_source.hpp).
    void anchor_on_host_clock(std::size_t n)
    {
        if (!host_clock) return;
        const time_anchor a = host_clock_anchor(counters.samples.load(), n, host_clock_rate_hz);
        host_clock->set(a);
        sink->timestamp(a);
    }

    asio::io_context ioc{1};
    std::atomic<bool> stop_requested{false};
    bool stopping = false;  ///< set on the io_context's thread; handlers return when set
    source_counters& counters;
    std::string name;  ///< describe(), the prefix of every log line and exception
    sample_sink* sink = nullptr;
    /// Set for sources without a time base of their own (raw TCP and UDP): deliver() anchors
    /// each block on the host's clock at this rate and keeps the latest anchor here.
    time_anchor_slot* host_clock = nullptr;
    double host_clock_rate_hz = 0.0;
    std::atomic<std::uint16_t> local_port{0};
    std::vector<cf32> raw;    ///< deliver_raw(): a cf32_le block, decoded
    std::vector<ci16> raw16;  ///< deliver_raw(): a ci16_le block as received
    std::vector<cf32x2> raw2; ///< deliver_raw(): two channels' block, paired
    log_limiter limiter;
    sender_allow_list allow;  ///< empty: every sender
    std::string allow_text;   ///< its entries, for the log
    // Its own limiter, longer than the others: a refused sender usually keeps sending (another
    // stream on the network), and one line per 10 s says so without filling the journal.
    log_limiter refused_log{std::chrono::seconds(10)};
};

inline void run_context(net_core& core, sample_sink& sink)
{
    core.sink = &sink;
    core.ioc.run();
    core.sink = nullptr;
}

[[nodiscard]] inline udp::socket open_udp(net_core& core, const std::string& address, int port, int rcvbuf_bytes)
{
    const udp::endpoint ep(asio::ip::make_address(address), static_cast<std::uint16_t>(port));
    udp::socket socket(core.ioc);
    error_code ec;
    socket.open(ep.protocol(), ec);
    if (ec) throw std::runtime_error(core.name + ": cannot open a UDP socket: " + ec.message());
    apply_rcvbuf(socket, rcvbuf_bytes, core.name);
    socket.bind(ep, ec);
    if (ec) throw std::runtime_error(core.name + ": cannot bind " + endpoint_text(address, port) + ": " + ec.message());
    socket.non_blocking(true, ec);
    if (ec) throw std::runtime_error(core.name + ": cannot make the socket non-blocking: " + ec.message());
    core.local_port.store(socket.local_endpoint().port());
    spdlog::info("{}: receiving on port {}", core.name, core.local_port.load());
    core.log_allow_list("datagrams");
    return socket;
}

/// The datagram loop shared by the UDP sources: wait until readable, then drain what the
/// kernel holds (one wakeup per burst instead of one async operation per datagram), at most
/// a bounded number per wakeup so that a posted stop() runs promptly under load.
template <class Handler>
class datagram_pump {
public:
    datagram_pump(net_core& core, udp::socket& socket, Handler handler)
        : core_(core), socket_(socket), handler_(std::move(handler)), buf_(max_datagram_bytes + 1) {}

    void start()
    {
        socket_.async_wait(udp::socket::wait_read, [this](const error_code& ec) {
            if (core_.stopping || ec == asio::error::operation_aborted) return;
            if (ec) throw std::runtime_error(core_.name + ": waiting for datagrams failed: " + ec.message());
            for (int k = 0; k < 256; ++k) {
                error_code rec;
                // MSG_TRUNC: n is the datagram's length even when the buffer held less.
                const std::size_t n = socket_.receive_from(asio::buffer(buf_), sender_, receive_flags, rec);
                if (rec == asio::error::would_block || rec == asio::error::try_again) break;
                if (rec == asio::error::connection_refused) continue;  // ICMP from an earlier send; harmless
                if (rec) throw std::runtime_error(core_.name + ": receive failed: " + rec.message());
                if (!core_.admit(sender_.address(), sender_.port(), "datagram")) continue;
                core_.counters.packets += 1;
                if (n > max_datagram_bytes) {
                    core_.oversize_datagram(n);
                } else {
                    handler_(std::span<const std::byte>(buf_.data(), n));
                }
                if (core_.stopping) return;  // the sink may have called stop() (it runs inline)
            }
            start();
        });
    }

private:
    net_core& core_;
    udp::socket& socket_;
    Handler handler_;
    std::vector<std::byte> buf_;
    udp::endpoint sender_;
};


/// cfg, or std::invalid_argument listing what its validate() finds wrong.
template <class Config>
Config checked(Config cfg, const char* what)
{
    const auto errors = cfg.validate();
    if (!errors.empty()) throw std::invalid_argument(invalid_config_message(what, errors));
    return cfg;
}

}  // namespace paq::io::detail
