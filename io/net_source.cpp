#include "io/net_source.hpp"

#include "io/log_limiter.hpp"
#include "io/vita49.hpp"

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

namespace paq::io {
namespace {

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

void check_rate(error_list& e, double sample_rate_hz)
{
    if (!(sample_rate_hz > 0.0) || !std::isfinite(sample_rate_hz))
        e.add("sample_rate_hz", sample_rate_hz, "> 0, the sender's rate; the network carries none");
}

void check_scale(error_list& e, float ci16_scale)
{
    if (!(ci16_scale > 0.0f) || !std::isfinite(ci16_scale)) e.add("ci16_scale", ci16_scale, "> 0");
}

void check_rcvbuf(error_list& e, int rcvbuf_bytes)
{
    if (rcvbuf_bytes < 0 || rcvbuf_bytes > max_rcvbuf_bytes)
        e.add("rcvbuf_bytes", rcvbuf_bytes, "0 (kernel default) .. 1073741824");
}

void check_port(error_list& e, int port, bool zero_ok)
{
    if (port < (zero_ok ? 0 : 1) || port > 65535)
        e.add("port", port, zero_ok ? "0 (ephemeral) .. 65535" : "1 .. 65535");
}

void check_bind_address(error_list& e, const std::string& field, const std::string& address)
{
    if (!is_numeric_address(address)) e.errors.push_back(field + " = '" + address + "' is not a numeric IPv4 or IPv6 address");
}

[[nodiscard]] std::string invalid_config_message(const std::string& what, const std::vector<std::string>& errors)
{
    std::string msg = "invalid " + what + " configuration:";
    for (const auto& s : errors) msg += "\n  " + s;
    return msg;
}

[[nodiscard]] std::string format_rate(double hz)
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

[[nodiscard]] std::string endpoint_text(const std::string& host, int port)
{
    return host.find(':') != std::string::npos ? "[" + host + "]:" + std::to_string(port)
                                               : host + ":" + std::to_string(port);
}

/// 16 bytes, IPv4 as IPv4-mapped IPv6: the one form every comparison uses.
[[nodiscard]] std::array<std::uint8_t, 16> v6_bytes(const asio::ip::address& a) noexcept
{
    if (a.is_v4()) return asio::ip::make_address_v6(asio::ip::v4_mapped, a.to_v4()).to_bytes();
    return a.to_v6().to_bytes();
}

[[nodiscard]] std::string sender_text(const asio::ip::address& a, std::uint16_t port)
{
    return endpoint_text(a.to_string(), port);
}

template <class Socket>
void apply_rcvbuf(Socket& socket, int requested, const std::string& name)
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

[[nodiscard]] std::size_t count_nonfinite(const cf32* s, std::size_t n) noexcept
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
    /// the backend), cf32 decoded and scanned for NaN/Inf. raw_capacity(n) first
    /// sizes the buffers, so that no delivery allocates.
    void deliver_raw(sample_format format, float ci16_scale, const std::byte* bytes, std::size_t n)
    {
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
    void raw_capacity(sample_format format, std::size_t n)
    {
        if (format == sample_format::ci16_le) {
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
    log_limiter limiter;
    sender_allow_list allow;  ///< empty: every sender
    std::string allow_text;   ///< its entries, for the log
    // Its own limiter, longer than the others: a refused sender usually keeps sending (another
    // stream on the network), and one line per 10 s says so without filling the journal.
    log_limiter refused_log{std::chrono::seconds(10)};
};

void run_context(net_core& core, sample_sink& sink)
{
    core.sink = &sink;
    core.ioc.run();
    core.sink = nullptr;
}

[[nodiscard]] udp::socket open_udp(net_core& core, const std::string& address, int port, int rcvbuf_bytes)
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

}  // namespace

// ---- sender allow-lists --------------------------------------------------------------------

namespace {

constexpr const char* allowed_prefix_forms =
    "an IPv4 or IPv6 address such as 10.0.0.5 or ::1, or a CIDR prefix such as 192.168.10.0/24 "
    "(/0 .. /32) or fd00::/8 (/0 .. /128)";

[[nodiscard]] bool prefix_matches(const address_prefix& p, const std::array<std::uint8_t, 16>& a) noexcept
{
    const unsigned whole = p.prefix_bits / 8;
    const unsigned rest = p.prefix_bits % 8;
    if (std::memcmp(p.address.data(), a.data(), whole) != 0) return false;
    if (rest == 0) return true;
    const auto mask = static_cast<std::uint8_t>(0xffu << (8 - rest));
    return (p.address[whole] & mask) == (a[whole] & mask);
}

}  // namespace

std::string parse_address_prefix(std::string_view text, address_prefix& out)
{
    const std::size_t slash = text.find('/');
    const std::string addr_text(text.substr(0, slash));
    if (addr_text.find('%') != std::string::npos) return "has a zone index (%...), which an allow-list cannot use";
    error_code ec;
    const asio::ip::address addr = asio::ip::make_address(addr_text, ec);
    if (ec || addr_text.empty()) return "is not an IPv4 or IPv6 address or CIDR prefix";
    const unsigned max_bits = addr.is_v4() ? 32u : 128u;
    unsigned bits = max_bits;
    if (slash != std::string_view::npos) {
        const std::string_view len = text.substr(slash + 1);
        if (len.empty() || len.size() > 3 || !std::all_of(len.begin(), len.end(), [](char c) { return c >= '0' && c <= '9'; }))
            return "has no prefix length after '/' (a number, /0 .. /" + std::to_string(max_bits) + ")";
        bits = 0;
        for (const char c : len) bits = bits * 10 + static_cast<unsigned>(c - '0');
        if (bits > max_bits)
            return "has prefix length /" + std::to_string(bits) + ", more than an " + (addr.is_v4() ? "IPv4" : "IPv6") +
                   " address has (/0 .. /" + std::to_string(max_bits) + ")";
    }
    address_prefix p;
    p.address = v6_bytes(addr);
    p.prefix_bits = bits + (addr.is_v4() ? 96u : 0u);
    // Bits after the prefix: "192.168.10.5/24" is most likely a typo for /32 or .0/24.
    address_prefix host = p;
    host.prefix_bits = 128;
    address_prefix net = p;
    for (unsigned b = p.prefix_bits; b < 128; ++b) net.address[b / 8] &= static_cast<std::uint8_t>(~(0x80u >> (b % 8)));
    if (!prefix_matches(host, net.address)) {
        const auto v6 = asio::ip::make_address_v6(net.address);
        const std::string network = addr.is_v4() ? asio::ip::make_address_v4(asio::ip::v4_mapped, v6).to_string() : v6.to_string();
        return "has bits set after the /" + std::to_string(bits) + " prefix (the network is " + network + "/" +
               std::to_string(bits) + "; one host is " + addr_text + "/" + std::to_string(max_bits) + ")";
    }
    out = p;
    return {};
}

bool is_numeric_address(const std::string& text) noexcept
{
    error_code ec;
    (void)asio::ip::make_address(text, ec);
    return !ec;
}

std::string allow_entry_error(std::string_view text)
{
    address_prefix p;
    const std::string why = parse_address_prefix(text, p);
    if (why.empty()) return {};
    return "'" + std::string(text) + "' " + why + " (allowed: " + allowed_prefix_forms + ")";
}

std::vector<std::string> check_allow_list(const std::vector<std::string>& entries, std::string_view field)
{
    std::vector<std::string> errors;
    for (std::size_t i = 0; i < entries.size(); ++i) {
        if (auto e = allow_entry_error(entries[i]); !e.empty())
            errors.push_back(std::string(field) + "[" + std::to_string(i) + "] = " + e);
    }
    return errors;
}

sender_allow_list::sender_allow_list(const std::vector<std::string>& entries, std::string_view field)
{
    const auto errors = check_allow_list(entries, field);
    if (!errors.empty()) throw std::invalid_argument(invalid_config_message(std::string(field), errors));
    prefixes_.resize(entries.size());
    for (std::size_t i = 0; i < entries.size(); ++i) (void)parse_address_prefix(entries[i], prefixes_[i]);
}

bool sender_allow_list::allows(const std::array<std::uint8_t, 16>& address) const noexcept
{
    if (prefixes_.empty()) return true;
    return std::any_of(prefixes_.begin(), prefixes_.end(),
                       [&](const address_prefix& p) { return prefix_matches(p, address); });
}

bool sender_allow_list::allows(std::string_view numeric_address) const
{
    if (prefixes_.empty()) return true;
    error_code ec;
    const auto a = asio::ip::make_address(std::string(numeric_address), ec);
    return !ec && allows(v6_bytes(a));
}

std::string_view to_string(udp_header h) noexcept
{
    switch (h) {
    case udp_header::none: return "none";
    case udp_header::gnuradio_seq: return "gnuradio-seq";
    case udp_header::gnuradio_seq_size: return "gnuradio-seq-size";
    }
    return "?";
}

std::size_t header_bytes(udp_header h) noexcept
{
    switch (h) {
    case udp_header::none: return 0;
    case udp_header::gnuradio_seq: return 8;
    case udp_header::gnuradio_seq_size: return 16;  // u64 + i16, padded to the u64's alignment
    }
    return 0;
}

udp_seq_result check_udp_sequence(std::optional<std::uint64_t> last, std::uint64_t seq) noexcept
{
    if (!last) return {};
    // A sink restarted mid-stream numbers from 1 again; a stale 1 right after 1 is a duplicate.
    if (seq == 1 && *last != 0 && *last != 1) return {udp_seq_verdict::restart, 0};
    if (seq <= *last) {
        // Without the window, one datagram far ahead (corrupt, hostile, or the last of a
        // sender that then restarted without its datagram 1 reaching us) would make every
        // later one stale for good.
        return {*last - seq <= udp_reorder_window ? udp_seq_verdict::stale : udp_seq_verdict::resync, 0};
    }
    const std::uint64_t missing = seq - *last - 1;
    if (missing == 0) return {};
    if (missing > udp_max_seq_jump) return {udp_seq_verdict::resync, 0};
    return {udp_seq_verdict::lost, missing};
}

std::string_view to_string(stream_change_policy p) noexcept
{
    switch (p) {
    case stream_change_policy::follow: return "follow";
    case stream_change_policy::stay: return "stay";
    }
    return "?";
}

// ---- validate() ----------------------------------------------------------------------------

std::vector<std::string> tcp_source_config::validate() const
{
    error_list e;
    if (mode == tcp_mode::listen)
        check_bind_address(e, "host", host);
    else if (host.empty())
        e.errors.emplace_back("host is empty (connect mode needs the sender's host name or address)");
    check_port(e, port, mode == tcp_mode::listen);
    check_scale(e, ci16_scale);
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

std::vector<std::string> udp_source_config::validate() const
{
    error_list e;
    check_bind_address(e, "bind_address", bind_address);
    check_port(e, port, true);
    check_scale(e, ci16_scale);
    check_rate(e, sample_rate_hz);
    check_rcvbuf(e, rcvbuf_bytes);
    for (auto& m : check_allow_list(allow)) e.errors.push_back(std::move(m));
    return e.errors;
}

std::vector<std::string> vita49_source_config::validate() const
{
    error_list e;
    check_bind_address(e, "bind_address", bind_address);
    check_port(e, port, true);
    check_scale(e, ci16_scale);
    if (sample_rate_hz != 0.0) {
        check_rate(e, sample_rate_hz);
    } else if (!stream_id || allow.empty()) {
        // The rate from a context packet: only one from the named sender and stream, else any
        // host that reaches the port could choose the rate paqd receives at.
        e.errors.push_back("sample_rate_hz = 0 takes the rate from the sender's IF Context packets, and needs both the "
                           "sender (allow) and the stream (stream_id) named, so that nobody else can set it; or set "
                           "sample_rate_hz");
    }
    if (!(context_timeout_s >= 0.1 && context_timeout_s <= 3600.0)) e.add("context_timeout_s", context_timeout_s, "0.1 .. 3600 s");
    check_rcvbuf(e, rcvbuf_bytes);
    if (stream_timeout_ms < 1 || stream_timeout_ms > 3'600'000)
        e.add("stream_timeout_ms", stream_timeout_ms, "1 .. 3600000 ms");
    for (auto& m : check_allow_list(allow)) e.errors.push_back(std::move(m));
    return e.errors;
}

// ---- tcp_source ----------------------------------------------------------------------------

struct tcp_source::impl final : net_core {
    impl(source_counters& c, tcp_source_config config)
        : net_core(c, describe_config(config)), cfg(std::move(config)),
          sample_bytes(bytes_per_sample(cfg.format)), buf(cfg.read_bytes + sample_bytes),
          backoff_s(cfg.retry_initial_s), idle_timeout(seconds(cfg.idle_timeout_s)),
          takeover_silence(cfg.idle_timeout_s > 0.0 ? std::min(idle_timeout, seconds(tcp_listen_takeover_silence_s))
                                                    : seconds(tcp_listen_takeover_silence_s)),
          min_window_bytes(std::max<std::uint64_t>(sample_bytes, static_cast<std::uint64_t>(tcp_listen_min_rate_fraction *
                                                                                            cfg.sample_rate_hz *
                                                                                            static_cast<double>(sample_bytes))))
    {
        set_allow_list(cfg.allow);
        raw_capacity(cfg.format, cfg.read_bytes / sample_bytes + 1);
    }

    static std::string describe_config(const tcp_source_config& c)
    {
        return std::string("tcp ") + (c.mode == tcp_mode::connect ? "connect " : "listen ") +
               endpoint_text(c.host, c.port) + " (" + std::string(to_sigmf_datatype(c.format)) + ", " +
               format_rate(c.sample_rate_hz) + (c.allow.empty() ? "" : ", allow-list") + ")";
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
        deliver_raw(cfg.format, cfg.ci16_scale, buf.data(), whole);
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

namespace {
template <class Config>
Config checked(Config cfg, const char* what)
{
    const auto errors = cfg.validate();
    if (!errors.empty()) throw std::invalid_argument(invalid_config_message(what, errors));
    return cfg;
}
}  // namespace

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
    return ci16_scale_of(impl_->cfg.format, impl_->cfg.ci16_scale);
}
double tcp_source::sample_rate_hz() const { return impl_->cfg.sample_rate_hz; }
std::uint16_t tcp_source::local_port() const noexcept { return impl_->local_port.load(); }
bool tcp_source::connected() const noexcept { return impl_->peer_connected.load(); }
double tcp_source::last_retry_delay_s() const noexcept { return impl_->last_retry_delay_s.load(); }
const tcp_counters& tcp_source::tcp_counts() const noexcept { return impl_->tcounters; }
const tcp_source_config& tcp_source::config() const noexcept { return impl_->cfg; }
void tcp_source::stop() { impl_->request_stop(); }

void tcp_source::run(sample_sink& sink)
{
    if (impl_->stop_requested.load()) return;
    impl_->run();
    run_context(*impl_, sink);
}

// ---- udp_source ----------------------------------------------------------------------------

struct udp_source::impl final : net_core {
    impl(source_counters& c, udp_source_config config)
        : net_core(c, "udp " + endpoint_text(config.bind_address, config.port) + " (raw " +
                          std::string(to_sigmf_datatype(config.format)) + ", " +
                          format_rate(config.sample_rate_hz) +
                          (config.header == udp_header::none
                               ? std::string(", loss undetectable")
                               : ", header " + std::string(to_string(config.header))) +
                          (config.allow.empty() ? "" : ", allow-list") + ")"),
          cfg(std::move(config)), sample_bytes(bytes_per_sample(cfg.format)), head_bytes(header_bytes(cfg.header))
    {
        set_allow_list(cfg.allow);
        raw_capacity(cfg.format, max_datagram_bytes / sample_bytes + 1);
    }

    void close_all() noexcept override
    {
        error_code ec;
        socket.close(ec);
    }

    [[nodiscard]] static std::uint64_t read_u64_le(const std::byte* p) noexcept
    {
        std::uint64_t v = 0;
        for (int i = 7; i >= 0; --i) v = (v << 8) | std::to_integer<std::uint64_t>(p[i]);
        return v;
    }

    // header none: GNU Radio's sequence number is 1, 2, 3, ... in the first 8 bytes. Random IQ
    // (or noise) does not count up by exactly one over several datagrams, so a run of
    // suspect_run consecutive +1 steps among the first suspect_window datagrams is taken as
    // the mistake and said once; the samples are still delivered (as configured).
    static constexpr int suspect_run = 4;
    static constexpr int suspect_window = 64;
    void watch_for_header(std::span<const std::byte> d)
    {
        if (suspect_done || d.size() < 8) return;
        const std::uint64_t first = read_u64_le(d.data());
        if (suspect_last && first == *suspect_last + 1 && first < (std::uint64_t{1} << 48)) ++suspect_steps;
        else suspect_steps = 0;
        suspect_last = first;
        if (suspect_steps >= suspect_run) {
            suspect_done = true;
            udp_counts.header_suspected.store(1);
            spdlog::warn("{}: the first 8 bytes of each datagram count up by one ({} at the last): this looks like "
                         "GNU Radio's UDP Sink with Header \"Sequence Number\" or \"Seq + Size\", read here as "
                         "samples. Set source.udp.header to gnuradio-seq or gnuradio-seq-size (DAEMON.md §3)",
                         name, first);
        }
        if (++suspect_seen >= suspect_window) suspect_done = true;
    }

    void on_datagram(std::span<const std::byte> d)
    {
        counters.bytes += d.size();
        if (d.empty()) return;  // GNU Radio's end-of-stream marker (or an empty probe)
        if (cfg.header == udp_header::none) watch_for_header(d);
        if (d.size() < head_bytes) {
            counters.malformed += 1;
            limiter.warn("{}: datagram of {} bytes is shorter than its {}-byte {} header; dropped", name, d.size(),
                         head_bytes, to_string(cfg.header));
            sink->gap(0, gap_reason::source_error);
            return;
        }
        const auto body = d.subspan(head_bytes);
        if (body.size() % sample_bytes != 0) {
            counters.malformed += 1;
            limiter.warn("{}: datagram of {} bytes ({}-byte header) is not a whole number of {}-byte {} samples; dropped",
                         name, d.size(), head_bytes, sample_bytes, to_sigmf_datatype(cfg.format));
            sink->gap(0, gap_reason::source_error);
            return;
        }
        const std::size_t n = body.size() / sample_bytes;
        if (head_bytes != 0) {
            const std::uint64_t seq = read_u64_le(d.data());
            const auto r = check_udp_sequence(last_seq, seq);
            switch (r.verdict) {
            case udp_seq_verdict::in_order: break;
            case udp_seq_verdict::lost:
            {
                // r.lost <= udp_max_seq_jump (2^24) and n < 2^14 (one datagram): no overflow.
                const std::uint64_t lost_samples = r.lost * n;
                add_saturating(counters.packets_lost, r.lost);
                add_saturating(counters.samples_lost, lost_samples);
                limiter.warn("{}: {} datagram(s) missing before sequence number {}", name, r.lost, seq);
                sink->gap(lost_samples, gap_reason::lost_packets);
            }
                break;
            case udp_seq_verdict::restart:
                udp_counts.restarts += 1;
                // A sender can restart as often as it likes: rate-limited like the rest.
                order_log.warn("{}: sequence number back to 1 after {}: the sender restarted", name, *last_seq);
                sink->gap(0, gap_reason::discontinuity);
                break;
            case udp_seq_verdict::stale:
                udp_counts.stale += 1;
                limiter.warn("{}: sequence number {} not after {} (duplicate or reordered); dropped", name, seq,
                             *last_seq);
                return;
            case udp_seq_verdict::resync:
                udp_counts.resyncs += 1;
                order_log.warn("{}: sequence number jumped from {} to {}, {} (beyond {} back or {} ahead): a "
                               "discontinuity, tracking restarted there ({} in all)",
                               name, *last_seq, seq, seq < *last_seq ? "back" : "ahead", udp_reorder_window,
                               udp_max_seq_jump, udp_counts.resyncs.load());
                sink->gap(0, gap_reason::discontinuity);
                break;
            }
            last_seq = seq;
        }
        deliver_raw(cfg.format, cfg.ci16_scale, body.data(), n);
    }

    udp_source_config cfg;
    std::size_t sample_bytes;
    std::size_t head_bytes;
    udp::socket socket{ioc};
    udp_counters udp_counts;
    std::optional<std::uint64_t> last_seq;
    // Restarts and resyncs have their own limiter, so that a flood of stale datagrams (the
    // net_core limiter's) hides none of them.
    log_limiter order_log;
    std::optional<std::uint64_t> suspect_last;
    int suspect_steps = 0;
    int suspect_seen = 0;
    bool suspect_done = false;
};

udp_source::udp_source(udp_source_config cfg)
    : impl_(std::make_unique<impl>(counters_, checked(std::move(cfg), "udp source")))
{
    impl_->host_clock = &time_anchor_;
    impl_->host_clock_rate_hz = impl_->cfg.sample_rate_hz;
}

udp_source::~udp_source() = default;

std::string udp_source::describe() const { return impl_->name; }
std::optional<float> udp_source::ci16_scale() const
{
    return ci16_scale_of(impl_->cfg.format, impl_->cfg.ci16_scale);
}
double udp_source::sample_rate_hz() const { return impl_->cfg.sample_rate_hz; }
std::uint16_t udp_source::local_port() const noexcept { return impl_->local_port.load(); }
const udp_source_config& udp_source::config() const noexcept { return impl_->cfg; }
const udp_counters& udp_source::udp_counts() const noexcept { return impl_->udp_counts; }
void udp_source::stop() { impl_->request_stop(); }

void udp_source::run(sample_sink& sink)
{
    if (impl_->stop_requested.load()) return;
    auto& m = *impl_;
    m.socket = open_udp(m, m.cfg.bind_address, m.cfg.port, m.cfg.rcvbuf_bytes);
    auto on_datagram = [&m](std::span<const std::byte> d) { m.on_datagram(d); };
    datagram_pump<decltype(on_datagram)> pump(m, m.socket, on_datagram);
    pump.start();
    run_context(m, sink);
}

// ---- vita49_source -------------------------------------------------------------------------

struct vita49_source::impl final : net_core {
    impl(source_counters& c, time_anchor_slot& anchor_slot, vita49_source_config config)
        : net_core(c, describe_config(config)), anchor(anchor_slot), cfg(std::move(config)),
          tracker(cfg.sample_rate_hz), samples(max_datagram_bytes / vita49::bytes_per_sample + 1)
    {
        locked_stream = cfg.stream_id;
        set_allow_list(cfg.allow);
    }

    static std::string describe_config(const vita49_source_config& c)
    {
        char id[32];
        if (c.stream_id) std::snprintf(id, sizeof id, "stream id 0x%08x", static_cast<unsigned>(*c.stream_id));
        std::string stream = c.stream_id ? std::string(id) : std::string("first stream id seen");
        if (!c.stream_id && c.stream_change == stream_change_policy::follow)
            stream += ", follows a new one after " + std::to_string(c.stream_timeout_ms) + " ms of silence";
        return "vita49 udp " + endpoint_text(c.bind_address, c.port) + " (" + stream + ", ci16, " +
               (c.sample_rate_hz > 0.0 ? format_rate(c.sample_rate_hz) : std::string("rate from the sender's context")) +
               (c.allow.empty() ? "" : ", allow-list") + ")";
    }

    /// sample_rate_hz 0: binds the socket and reads datagrams until an IF Context packet
    /// (of stream_id, when set) carries a sample rate; then the tracker and the rate are set.
    void learn_rate_from_context()
    {
        socket = open_udp(*this, cfg.bind_address, cfg.port, cfg.rcvbuf_bytes);
        spdlog::info("{}: waiting up to {} s for the sender's IF Context packet with the sample rate", name,
                     cfg.context_timeout_s);
        std::vector<std::byte> buf(max_datagram_bytes + 1);
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(cfg.context_timeout_s);
        while (!stop_requested.load()) {
            const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
            if (left.count() <= 0) break;
            pollfd pfd{socket.native_handle(), POLLIN, 0};
            if (::poll(&pfd, 1, static_cast<int>(std::min<long long>(left.count(), 200))) <= 0) continue;
            for (int k = 0; k < 256; ++k) {
                udp::endpoint sender;
                error_code ec;
                const std::size_t n = socket.receive_from(asio::buffer(buf), sender, receive_flags, ec);
                if (ec == asio::error::would_block || ec == asio::error::try_again) break;
                if (ec == asio::error::connection_refused) continue;
                if (ec) throw std::runtime_error(name + ": receive failed: " + ec.message());
                if (!admit(sender.address(), sender.port(), "datagram")) continue;
                counters.packets += 1;
                if (n > max_datagram_bytes) {  // no gap before the rate is known
                    count_oversize(n);
                    continue;
                }
                vita49::packet p;
                if (const std::string error = vita49::parse_packet(std::span<const std::byte>(buf.data(), n), p); !error.empty()) {
                    counters.malformed += 1;
                    malformed_log.warn("{}: malformed datagram dropped: {}", name, error);
                    continue;
                }
                if (!p.is_context()) {
                    vcounters.packets_before_rate += 1;
                    vcounters.samples_before_rate += p.num_samples();
                    continue;
                }
                vcounters.context_packets += 1;
                if (p.context_sample_rate_hz == 0.0 || (cfg.stream_id && p.fields.stream_id != *cfg.stream_id)) continue;
                const double r = p.context_sample_rate_hz;
                vcounters.context_sample_rate_hz = r;
                if (!(r >= 1e3 && r <= 1e9)) {
                    // Not believed, and no reason to stop: the next context packet may be right.
                    vcounters.context_rates_refused += 1;
                    malformed_log.warn("{}: IF Context packet of stream id 0x{:08x} says the sample rate is {} Hz, outside "
                                       "1 kHz .. 1 GHz: ignored, still waiting ({} ignored in all)",
                                       name, p.fields.stream_id, r, vcounters.context_rates_refused.load());
                    continue;
                }
                cfg.sample_rate_hz = r;
                tracker = vita49::sequence_tracker(r);
                spdlog::info("{}: sample rate {:.9g} MS/s from stream id 0x{:08x}'s IF Context packet ({} IF Data packets, {} "
                             "samples before it not delivered)",
                             name, r / 1e6, p.fields.stream_id, vcounters.packets_before_rate.load(),
                             vcounters.samples_before_rate.load());
                return;
            }
        }
        if (stop_requested.load()) throw std::runtime_error(name + ": stopped while waiting for the sender's sample rate");
        throw std::runtime_error(name + ": no IF Context packet with a sample rate arrived within " +
                                 std::to_string(cfg.context_timeout_s) +
                                 " s (source.vita49.sample_rate_hz is 0: the rate is taken from the sender's context "
                                 "packets); check that the sender sends them, or set sample_rate_hz");
    }

    void close_all() noexcept override
    {
        error_code ec;
        socket.close(ec);
    }

    // As an unparseable datagram: its gap comes before the next accepted packet, where the
    // timestamps may tell what it held.
    void oversize_datagram(std::size_t bytes) override
    {
        count_oversize(bytes);
        pending_malformed = true;
    }

    void on_datagram(std::span<const std::byte> d)
    {
        const std::string error = vita49::parse_packet(d, pkt);
        if (!error.empty()) {
            counters.malformed += 1;
            malformed_log.warn("{}: malformed datagram dropped: {}", name, error);
            pending_malformed = true;
            return;
        }
        if (pkt.is_context()) {
            vcounters.context_packets += 1;
            // Only the context of the stream received (or, before the first data packet, of
            // any stream when none is configured) speaks for its rate.
            const bool ours = locked_stream ? pkt.fields.stream_id == *locked_stream : true;
            if (const double r = pkt.context_sample_rate_hz; r != 0.0 && ours) {
                vcounters.context_sample_rate_hz = r;
                if (!(std::abs(r - cfg.sample_rate_hz) <= 1e-6 * cfg.sample_rate_hz)) {
                    vcounters.context_rate_mismatches += 1;
                    rate_log.error("{}: stream id 0x{:08x}'s context says the sample rate is {:.9g} MS/s, but the "
                                   "receiver runs at sample_rate_hz {:.9g} MS/s: set source.vita49.sample_rate_hz to "
                                   "the sender's rate (the packets are decoded at the configured rate)",
                                   name, pkt.fields.stream_id, r / 1e6, cfg.sample_rate_hz / 1e6);
                }
            }
            return;
        }
        const std::uint32_t id = pkt.fields.stream_id;
        const auto now = std::chrono::steady_clock::now();
        if (!locked_stream) {
            locked_stream = id;
            spdlog::info("{}: receiving stream id 0x{:08x}", name, id);
        } else if (id != *locked_stream) {
            if (!follows() || now - locked_seen < stream_timeout) {
                vcounters.other_stream += 1;
                other_log.warn("{}: packet of stream id 0x{:08x} dropped (receiving 0x{:08x})", name, id, *locked_stream);
                return;
            }
            change_stream(id, now);
        }
        locked_seen = now;
        const std::size_t n = pkt.num_samples();
        const vita49::sequence_result r = tracker.update(pkt.fields, n);
        if (r.duplicate) {
            vcounters.duplicates += 1;
            order_log.warn("{}: duplicate packet dropped (packet count {}, timestamp {})", name, pkt.fields.packet_count,
                         pkt.fields.fractional_timestamp);
            return;
        }
        if (r.late) {
            vcounters.late += 1;
            order_log.warn("{}: late (reordered) packet dropped (packet count {}, timestamp {})", name,
                         pkt.fields.packet_count, pkt.fields.fractional_timestamp);
            return;
        }
        if (r.resync) {
            vcounters.resyncs += 1;
            if (r.jumped_forward) {
                order_log.warn("{}: timestamp jumped forward to {}, beyond any plausible loss: a discontinuity, "
                               "tracking restarted", name, pkt.fields.fractional_timestamp);
            } else {
                order_log.warn("{}: timestamp jumped back to {}: sender restarted? tracking restarted", name,
                               pkt.fields.fractional_timestamp);
            }
            sink->gap(0, gap_reason::lost_packets);
        } else if (r.packets_lost > 0 || r.samples_lost > 0) {
            add_saturating(counters.packets_lost, r.packets_lost);
            add_saturating(counters.samples_lost, r.samples_lost);
            limiter.warn("{}: {} packet(s) lost ({} {} samples)", name, r.packets_lost,
                         r.samples_exact ? "exactly" : "about", r.samples_lost);
            sink->gap(r.samples_lost, gap_reason::lost_packets);
        } else if (pending_malformed && !r.samples_exact && !r.first) {
            // Neither timestamp nor packet count shows a loss, but a datagram was unreadable:
            // it may have carried samples of this stream (packet count mod 16).
            sink->gap(0, gap_reason::source_error);
        }
        if (r.count_mismatch) {
            vcounters.count_mismatches += 1;
            order_log.warn("{}: packet count {} disagrees with the timestamps ({} packet(s) missing by timestamp): "
                           "the timestamps are used",
                           name, pkt.fields.packet_count, r.packets_lost);
        }
        pending_malformed = false;
        // The sender's time of this packet's first sample, the index it gets here.
        if (const auto utc_ns = vita49::first_sample_utc_ns(pkt.fields, cfg.sample_rate_hz); utc_ns && n > 0) {
            const time_anchor a{counters.samples.load(), *utc_ns};
            anchor.set(a);
            sink->timestamp(a);
        }
        counters.bytes += pkt.payload.size();
        // VITA-49 IF data is ci16: delivered as received (byte order fixed), not converted.
        vita49::decode_payload(pkt, samples.data());
        deliver(samples.data(), n, cfg.ci16_scale);
    }

    /// Whether another stream id may replace the current one (never with a configured id).
    [[nodiscard]] bool follows() const noexcept
    {
        return !cfg.stream_id && cfg.stream_change == stream_change_policy::follow;
    }

    /// The current stream has been silent for stream_timeout_ms and `id` arrived: take it.
    /// Its samples do not continue the old stream's, so the batcher gets a discontinuity
    /// (no packet spans the change) and the sequence tracking starts over from this packet.
    void change_stream(std::uint32_t id, std::chrono::steady_clock::time_point now)
    {
        const auto silent_ms = std::chrono::duration_cast<std::chrono::milliseconds>(now - locked_seen).count();
        spdlog::warn("{}: stream id 0x{:08x} silent for {} ms and stream id 0x{:08x} arriving: following it "
                     "(stream_change: follow); sequence tracking restarts",
                     name, *locked_stream, silent_ms, id);
        vcounters.stream_changes += 1;
        locked_stream = id;
        tracker.reset();
        // The discontinuity gap ends the segment; an unreadable datagram of the old stream no
        // longer needs a gap of its own.
        pending_malformed = false;
        sink->gap(0, gap_reason::discontinuity);
    }

    time_anchor_slot& anchor;
    vita49_source_config cfg;
    vita49_counters vcounters;
    vita49::sequence_tracker tracker;
    vita49::packet pkt;
    std::optional<std::uint32_t> locked_stream;
    std::chrono::steady_clock::duration stream_timeout =
        std::chrono::milliseconds(cfg.stream_timeout_ms);
    std::chrono::steady_clock::time_point locked_seen{};  ///< last packet of locked_stream
    bool pending_malformed = false;
    std::vector<ci16> samples;  ///< a packet's payload as received (ci16, host byte order)
    // One limiter per kind of message, so that a flood of one kind hides none of the others
    // (net_core::limiter is the one for losses).
    log_limiter malformed_log, other_log, order_log;
    log_limiter rate_log{std::chrono::seconds(10)};
    udp::socket socket{ioc};
};

vita49_source::vita49_source(vita49_source_config cfg)
    : impl_(std::make_unique<impl>(counters_, time_anchor_, checked(std::move(cfg), "vita49 source")))
{
}

vita49_source::~vita49_source() = default;

std::string vita49_source::describe() const { return impl_->name; }
std::optional<float> vita49_source::ci16_scale() const { return impl_->cfg.ci16_scale; }
double vita49_source::sample_rate_hz() const
{
    if (impl_->cfg.sample_rate_hz == 0.0) impl_->learn_rate_from_context();
    return impl_->cfg.sample_rate_hz;
}
std::uint16_t vita49_source::local_port() const noexcept { return impl_->local_port.load(); }
const vita49_source_config& vita49_source::config() const noexcept { return impl_->cfg; }
const vita49_counters& vita49_source::vita_counters() const noexcept { return impl_->vcounters; }
void vita49_source::stop() { impl_->request_stop(); }

void vita49_source::run(sample_sink& sink)
{
    if (impl_->stop_requested.load()) return;
    auto& m = *impl_;
    if (m.cfg.sample_rate_hz == 0.0) m.learn_rate_from_context();  // nobody asked for the rate first
    if (!m.socket.is_open()) m.socket = open_udp(m, m.cfg.bind_address, m.cfg.port, m.cfg.rcvbuf_bytes);
    auto on_datagram = [&m](std::span<const std::byte> d) { m.on_datagram(d); };
    datagram_pump<decltype(on_datagram)> pump(m, m.socket, on_datagram);
    pump.start();
    run_context(m, sink);
}

}  // namespace paq::io
