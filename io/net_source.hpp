// Network sample sources (Boost.Asio): raw IQ over TCP or UDP, and VITA-49 over UDP.
//
// Each source owns an io_context that run() drives on the calling (acquisition) thread, so
// the sink is only ever called from there; stop() posts to that io_context and is safe from
// any thread. Asio stays inside net_source.cpp: this header pulls in no Boost.
//
//   tcp_source     connect: resolve -> connect --fail--> wait (backoff) -> resolve ...
//                                        \--ok--> read ... peer gone or idle --> wait (backoff) -> reconnect
//                  listen:  bind -> accept one client -> read ... client gone or idle --> accept next
//                           (the backoff grows while connections bring no data; data resets it)
//   udp_source     bind -> one datagram = [GNU Radio sequence header] + whole raw samples
//                  (loss counted only with the header; see udp_header)
//   vita49_source  bind -> one datagram = one VITA-49 packet; sequence tracking finds losses
//
// A reconnect is reported as gap(0, gap_reason::reconnect) before the new connection's first
// samples; VITA-49 losses as gap(lost_samples, gap_reason::lost_packets). Raw IQ carries no
// sample rate: sample_rate_hz() is the configured one (VITA-49: or its context packets').
// Only VITA-49 carries time: its source gives time anchors (io/sample_source.hpp).
//
// Each source takes an optional allow-list of sender addresses (CIDR prefixes, IPv4 and
// IPv6): a datagram from any other address is dropped, a TCP client from any other address
// is closed at once; both are counted in source_counters::refused and logged (rate-limited,
// naming the sender).
#pragma once

#include "io/sample_format.hpp"
#include "io/sample_source.hpp"

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace paq::io {

/// One allow-list entry: an address and the number of leading bits that must match, both
/// in IPv6 form. An IPv4 entry a.b.c.d/n is stored as ::ffff:a.b.c.d/(96 + n), so that it
/// matches an IPv4 sender whether the socket sees it as IPv4 or, on a dual-stack socket bound
/// to "::", as the IPv4-mapped IPv6 address ::ffff:a.b.c.d.
struct address_prefix {
    std::array<std::uint8_t, 16> address{};
    unsigned prefix_bits = 128;  ///< 0 .. 128
};

/// Parses "192.168.10.0/24", "10.0.0.5" (one host: /32), "fd00::/8", "::1" (/128). Returns ""
/// and sets `out`, or a message saying what is wrong with `text` and what is allowed. Bits
/// set after the prefix ("192.168.10.5/24") are an error: they usually mean a typo (/32?).
[[nodiscard]] std::string parse_address_prefix(std::string_view text, address_prefix& out);

/// "" for a good entry, else "'<text>' <what is wrong> (allowed: <the forms>)".
[[nodiscard]] std::string allow_entry_error(std::string_view text);

/// Messages, one per bad entry, "<field>[i] = " + allow_entry_error(entry).
[[nodiscard]] std::vector<std::string> check_allow_list(const std::vector<std::string>& entries,
                                                        std::string_view field = "allow");

/// Whether `text` is a numeric IPv4 or IPv6 address (what every bind address must be: a name
/// would be resolved at start, or fail there).
[[nodiscard]] bool is_numeric_address(const std::string& text) noexcept;

/// The senders a network source accepts: any address matching one of the prefixes. An empty
/// list accepts every sender.
class sender_allow_list {
public:
    sender_allow_list() = default;
    /// Throws std::invalid_argument listing check_allow_list's messages.
    explicit sender_allow_list(const std::vector<std::string>& entries, std::string_view field = "allow");

    [[nodiscard]] bool empty() const noexcept { return prefixes_.empty(); }
    /// `address`: the sender's 16-byte IPv6 address (an IPv4 sender as IPv4-mapped).
    [[nodiscard]] bool allows(const std::array<std::uint8_t, 16>& address) const noexcept;
    /// A numeric IPv4 or IPv6 address; false when it is not one (and the list is not empty).
    [[nodiscard]] bool allows(std::string_view numeric_address) const;

private:
    std::vector<address_prefix> prefixes_;
};

/// Whether a TCP source dials out or waits for the sender to dial in.
enum class tcp_mode : std::uint8_t {
    connect,  ///< connect to host:port; retry with backoff while unreachable; reconnect when dropped
    listen,   ///< bind host:port, serve one client at a time; wait for the next when it leaves
};

/// Listen mode: how long the client served must have sent nothing before a newly arriving
/// client replaces it (or idle_timeout_s, when that is shorter). A sender streams samples far
/// more often than this, so a live client is never replaced (two live senders cannot make the
/// source flip); a sender that restarted without closing its old connection (power, crash,
/// cable) gets in as soon as it reconnects, without waiting for the idle timeout.
inline constexpr double tcp_listen_takeover_silence_s = 1.0;

/// Listen mode: the least data rate, as a fraction of the configured stream's (sample_rate_hz
/// samples a second), at which the client served counts as sending. Judged over each second
/// the source waited for its bytes (time the sink held a block does not count: backpressure
/// is not a slow peer); a client below it (a trickle of bytes) is replaced by the next client
/// as a silent one is. A connection younger than that second is judged by silence alone.
inline constexpr double tcp_listen_min_rate_fraction = 0.01;

/// Raw interleaved IQ (little-endian cf32 or ci16, as in recordings) over TCP.
struct tcp_source_config {
    tcp_mode mode = tcp_mode::connect;
    /// connect: the peer's host name or address; listen: the local address to bind (numeric,
    /// "0.0.0.0" or "::" for all interfaces).
    std::string host = "127.0.0.1";
    /// connect: 1 .. 65535; listen: 0 .. 65535 (0: an ephemeral port, see tcp_source::local_port).
    int port = 5000;
    sample_format format = sample_format::ci16_le;
    float ci16_scale = default_ci16_scale;  ///< ci16 counts per unit amplitude, > 0
    double sample_rate_hz = 0;              ///< the sender's rate, > 0 (required: TCP carries none)
    /// SO_RCVBUF in bytes, 0 .. 1 GiB; 0 keeps the kernel's default (and TCP autotuning).
    int rcvbuf_bytes = 0;
    /// Connect mode: the first wait before dialling again after a connection that brought no
    /// data, 0.001 .. 60 s; it doubles with each such connection (or failed attempt) up to
    /// retry_max_s. Only a connection that delivers data resets it, so a peer that accepts and
    /// closes at once is not dialled at full speed. Listen mode accepts the next client at
    /// once (a refused or silent client must not delay the sender).
    double retry_initial_s = 0.1;
    double retry_max_s = 5.0;  ///< the longest such wait, retry_initial_s .. 600 s
    /// A connection that delivers no bytes for this long is dropped (counted in
    /// tcp_counters::idle_timeouts): connect mode dials again, listen mode serves the next
    /// client. 0 (off) or 0.01 .. 3600 s. Besides, SO_KEEPALIVE (probes after 10 s of silence)
    /// notices a peer host that vanished, idle timeout or not.
    double idle_timeout_s = 5.0;
    /// End run() normally at the first disconnect instead of reconnecting (tests, replays).
    bool end_on_close = false;
    std::size_t read_bytes = 256 * 1024;  ///< bytes per read, 64 .. 16 MiB
    /// Listen mode: clients accepted only from these addresses or CIDR prefixes (empty: any).
    /// Connect mode dials `host` itself, so an allow-list there is an error.
    std::vector<std::string> allow;

    /// One message per bad field, naming the field, its value and the allowed range.
    [[nodiscard]] std::vector<std::string> validate() const;
};

/// What precedes the samples in each raw UDP datagram. The GNU Radio forms are those of
/// gr-network's UDP Sink block ("Header" parameter; gr-network/lib/udp_sink_impl.cc and
/// include/gnuradio/network/packet_headers.h), written in the sender's byte order, which paqd
/// reads as little-endian (x86, ARM):
///
///   gnuradio_seq       | seqnum u64 | samples ...             8-byte header
///   gnuradio_seq_size  | seqnum u64 | length i16 | pad 6 | samples ...   16-byte header
///                        (sizeof of GNU Radio's struct; `length` is the sink's configured
///                        payload size, not checked)
///
/// The sink numbers its datagrams 1, 2, 3, ... from the start of the flowgraph.
enum class udp_header : std::uint8_t {
    none,               ///< samples only (GNU Radio: Header "None"); loss cannot be detected
    gnuradio_seq,       ///< GNU Radio "Sequence Number"
    gnuradio_seq_size,  ///< GNU Radio "Seq + Size"
};

[[nodiscard]] std::string_view to_string(udp_header h) noexcept;
/// The header's size in bytes (0, 8, 16).
[[nodiscard]] std::size_t header_bytes(udp_header h) noexcept;

/// What a GNU Radio sequence number says about one datagram, given the last one accepted.
enum class udp_seq_verdict : std::uint8_t {
    in_order,  ///< the next one (or the first)
    lost,      ///< later than the next one: `lost` datagrams are missing before it
    restart,   ///< back to 1: the sender's flowgraph restarted
    stale,     ///< the last one or at most udp_reorder_window before it (duplicate or reordered): dropped
    /// Further back than udp_reorder_window (the sender restarted and its datagram 1 was lost,
    /// or the last number accepted was bogus), or further ahead than udp_max_seq_jump (a
    /// corrupt or hostile number): a discontinuity. Tracking restarts at this number; nothing
    /// is counted as lost, since nothing about the jump can be believed.
    resync,
};

/// How far behind the last accepted number a datagram may be and still be taken as a
/// duplicate or reordered one (dropped) rather than as a restart of the numbering (resync).
/// As VITA-49's sequence_tracker::reorder_window_packets: a network reorders a few datagrams,
/// not thousands; a bound here also means that one far-ahead number cannot make every later
/// datagram stale.
inline constexpr std::uint64_t udp_reorder_window = 16;
/// The most datagrams a forward jump may skip and still count as lost: 2^24, minutes of a
/// GNU Radio stream at any rate paqd takes (16.7 M datagrams of 183 cf32 samples are about 149 s at
/// 20.625 MS/s). A longer jump is a resync: a loss of 2^64 datagrams is never counted.
inline constexpr std::uint64_t udp_max_seq_jump = std::uint64_t{1} << 24;

struct udp_seq_result {
    udp_seq_verdict verdict = udp_seq_verdict::in_order;
    std::uint64_t lost = 0;  ///< verdict lost: datagrams missing, 1 .. udp_max_seq_jump
};

/// The sequence check (pure, for the source, the tests and the fuzz target). `last`: the last
/// accepted sequence number, nullopt before the first. Every verdict but stale makes `seq`
/// the last accepted number.
[[nodiscard]] udp_seq_result check_udp_sequence(std::optional<std::uint64_t> last, std::uint64_t seq) noexcept;

/// Raw interleaved IQ datagrams over UDP: each datagram holds whole samples, after the
/// configured header.
struct udp_source_config {
    std::string bind_address = "0.0.0.0";  ///< numeric IPv4 or IPv6 address
    int port = 5000;                        ///< 0 .. 65535 (0: ephemeral, see udp_source::local_port)
    sample_format format = sample_format::ci16_le;
    float ci16_scale = default_ci16_scale;  ///< > 0
    double sample_rate_hz = 0;              ///< > 0 (required)
    /// SO_RCVBUF in bytes, 0 .. 1 GiB (0: kernel default). 8 MiB holds ~0.3 s at 6.6 MS/s
    /// ci16; the kernel caps it at net.core.rmem_max (a warning says so).
    int rcvbuf_bytes = 8 * 1024 * 1024;
    /// Datagrams accepted only from these addresses or CIDR prefixes (empty: any sender).
    std::vector<std::string> allow;
    /// The header before the samples (GNU Radio's UDP Sink "Header" setting). With none, the
    /// source watches the first datagrams: if their first 8 bytes count up by one like GNU
    /// Radio's sequence number it warns once, naming this setting (udp_counters::header_suspected).
    udp_header header = udp_header::none;

    [[nodiscard]] std::vector<std::string> validate() const;
};

/// Raw UDP events beyond source_counters (read from other threads while the source runs).
struct udp_counters {
    std::atomic<std::uint64_t> stale{0};     ///< header: duplicate or reordered datagrams dropped
    std::atomic<std::uint64_t> restarts{0};  ///< header: sequence back to 1 (sender restarted)
    /// header: sequence jumped back beyond udp_reorder_window or ahead beyond udp_max_seq_jump:
    /// tracking restarted there (each also a gap(0, discontinuity)).
    std::atomic<std::uint64_t> resyncs{0};
    /// header none: 1 once the datagrams looked like they carry GNU Radio's sequence number.
    std::atomic<std::uint64_t> header_suspected{0};
};

/// What a VITA-49 source does when data packets of another stream id arrive.
enum class stream_change_policy : std::uint8_t {
    /// Switch to the new stream id once the current one has been silent for
    /// stream_timeout_ms (a sender restarted with a new id; a stray packet locked first).
    /// The switch is counted, logged, and a gap(0, discontinuity) so no packet spans it.
    follow,
    /// Keep the first stream id seen until restart; other ids are counted and dropped.
    stay,
};

[[nodiscard]] std::string_view to_string(stream_change_policy p) noexcept;

/// VITA-49 IF Data packets (see io/vita49.hpp) over UDP, one packet per datagram.
struct vita49_source_config {
    std::string bind_address = "0.0.0.0";  ///< numeric IPv4 or IPv6 address
    int port = 4991;                        ///< 0 .. 65535 (0: ephemeral)
    /// Accept only this stream id, always (stream_change does not apply). Unset: lock onto the
    /// first IF Data stream id seen, and change it as stream_change says. Packets of any other
    /// stream id are counted (vita49_counters::other_stream) and dropped.
    std::optional<std::uint32_t> stream_id;
    /// Without stream_id: follow a new stream id once the current one is silent, or stay.
    stream_change_policy stream_change = stream_change_policy::follow;
    /// follow: how long the current stream must have sent nothing before another id is
    /// taken, 1 .. 3600000 ms. Two live senders on one port therefore cannot make the source
    /// flip between them: the one it has stays while it keeps sending.
    int stream_timeout_ms = 1000;
    float ci16_scale = default_ci16_scale;  ///< > 0
    /// The sender's sample rate, 1e3 .. 1e9; 0: taken from the sender's IF Context packets
    /// (CIF0 sample rate field): sample_rate_hz() then waits for the first one (of stream_id,
    /// when set) for up to context_timeout_s.
    double sample_rate_hz = 0;
    double context_timeout_s = 10.0;        ///< 0.1 .. 3600
    int rcvbuf_bytes = 8 * 1024 * 1024;     ///< as udp_source_config::rcvbuf_bytes
    /// Datagrams accepted only from these addresses or CIDR prefixes (empty: any sender).
    std::vector<std::string> allow;

    [[nodiscard]] std::vector<std::string> validate() const;
};

/// VITA-49 events beyond source_counters (read from other threads while the source runs).
struct vita49_counters {
    std::atomic<std::uint64_t> context_packets{0};  ///< context packets (types 4, 5) skipped
    std::atomic<std::uint64_t> other_stream{0};     ///< data packets of another stream id dropped
    std::atomic<std::uint64_t> duplicates{0};       ///< repeated packets dropped
    std::atomic<std::uint64_t> late{0};             ///< reordered packets dropped (their place was a gap)
    std::atomic<std::uint64_t> resyncs{0};          ///< timestamp jumped backwards: tracking restarted
    std::atomic<std::uint64_t> stream_changes{0};   ///< stream ids followed (stream_change: follow)
    /// IF Context packets whose sample rate field differs from sample_rate_hz (by more than
    /// 1e-6 of it): the receiver would decode at the wrong rate; each is counted and logged.
    std::atomic<std::uint64_t> context_rate_mismatches{0};
    /// Packets whose 4-bit packet count disagrees with what their timestamps say is missing
    /// (vita49::sequence_result::count_mismatch): the timestamps were used; each is logged.
    std::atomic<std::uint64_t> count_mismatches{0};
    std::atomic<double> context_sample_rate_hz{0.0};  ///< the last sample rate a context packet carried (0: none)
    /// sample_rate_hz 0: IF Data packets received while waiting for the first context packet
    /// with a rate, and their samples (not delivered: the rate they are at is not known yet).
    std::atomic<std::uint64_t> packets_before_rate{0};
    std::atomic<std::uint64_t> samples_before_rate{0};
    /// sample_rate_hz 0: context packets whose rate was outside 1 kHz .. 1 GHz, ignored.
    std::atomic<std::uint64_t> context_rates_refused{0};
};

/// TCP events beyond source_counters (read from other threads while the source runs).
struct tcp_counters {
    std::atomic<std::uint64_t> idle_timeouts{0};  ///< connections dropped after idle_timeout_s without data
    /// listen: clients refused (reset) because another was being served and sending.
    std::atomic<std::uint64_t> busy_refused{0};
    /// listen: clients served in place of one that had sent nothing yet, had sent nothing for
    /// tcp_listen_takeover_silence_s (or idle_timeout_s, when shorter), or sent below
    /// tcp_listen_min_rate_fraction of the stream's rate.
    std::atomic<std::uint64_t> takeovers{0};
};

/// Raw IQ over TCP. Samples split across reads are reassembled; a partial sample left when
/// the connection drops is discarded (the reconnect gap covers it). One client at a time in
/// listen mode: a client arriving while the one served is sending is refused (reset,
/// tcp_counters::busy_refused); one arriving while it has sent nothing yet, has been silent
/// for tcp_listen_takeover_silence_s or sends below tcp_listen_min_rate_fraction of the
/// stream's rate replaces it (tcp_counters::takeovers). Refused and replaced clients cost
/// the accept loop no wait: only a failing accept (out of descriptors) pauses it, so no
/// client, allowed or not, can delay the sender. Connection events are logged at most once
/// per 10 s for each kind (a peer can cause them at will).
class tcp_source final : public sample_source {
public:
    /// Throws std::invalid_argument listing cfg.validate()'s messages.
    explicit tcp_source(tcp_source_config cfg);
    ~tcp_source() override;
    tcp_source(const tcp_source&) = delete;
    tcp_source& operator=(const tcp_source&) = delete;

    /// "tcp connect 10.0.0.5:5000 (ci16_le, 6.6 MHz)" or "tcp listen 0.0.0.0:5000 (...)".
    [[nodiscard]] std::string describe() const override;
    /// The configured ci16 scale when the samples are ci16 (delivered at their width, write_ci16).
    [[nodiscard]] std::optional<float> ci16_scale() const override;
    [[nodiscard]] double sample_rate_hz() const override;
    /// Throws std::runtime_error (naming the source) if listen mode cannot bind or listen.
    /// Connection failures in connect mode are retried, never thrown.
    void run(sample_sink& sink) override;
    void stop() override;

    /// The local port: in listen mode once bound, in connect mode while connected; else 0.
    [[nodiscard]] std::uint16_t local_port() const noexcept;
    /// Whether a peer is connected now (for status lines). Thread-safe.
    [[nodiscard]] bool connected() const noexcept;
    /// The latest wait taken before dialling again (connect) or before accepting the next
    /// client (listen) after a connection without data; 0 before any. Thread-safe.
    [[nodiscard]] double last_retry_delay_s() const noexcept;
    [[nodiscard]] const tcp_source_config& config() const noexcept;
    [[nodiscard]] const tcp_counters& tcp_counts() const noexcept;

private:
    struct impl;
    std::unique_ptr<impl> impl_;
};

/// Raw IQ datagrams over UDP. Without a header raw UDP carries no sequence number, so lost
/// datagrams cannot be detected: they vanish without a gap (use VITA-49 or a GNU Radio header
/// where loss matters). With a GNU Radio header (udp_header): missing sequence numbers ->
/// gap(missing x this datagram's samples, lost_packets), counted in packets_lost and
/// samples_lost (GNU Radio sends equal datagrams, so the count is exact for it); a stale
/// sequence number is dropped (udp_counters::stale); a restart at 1 -> gap(0, discontinuity);
/// a jump back beyond udp_reorder_window or ahead beyond udp_max_seq_jump -> resync
/// (udp_counters::resyncs) and gap(0, discontinuity).
/// A datagram shorter than the header or whose samples are not whole, or longer than the
/// largest UDP payload (IPv6's, 65527 bytes: an IPv6 jumbogram), is counted as malformed,
/// dropped, and reported as gap(0, gap_reason::source_error). Empty datagrams (GNU Radio's
/// end-of-stream marker) are ignored.
class udp_source final : public sample_source {
public:
    /// Throws std::invalid_argument listing cfg.validate()'s messages.
    explicit udp_source(udp_source_config cfg);
    ~udp_source() override;
    udp_source(const udp_source&) = delete;
    udp_source& operator=(const udp_source&) = delete;

    /// "udp 0.0.0.0:5000 (raw ci16_le, 6.6 MHz, loss undetectable)".
    [[nodiscard]] std::string describe() const override;
    /// The configured ci16 scale when the samples are ci16 (delivered at their width, write_ci16).
    [[nodiscard]] std::optional<float> ci16_scale() const override;
    /// The configured rate; with sample_rate_hz 0 the first call binds the socket and waits for
    /// the sender's first IF Context packet with a sample rate (allow-list and stream_id
    /// applied; IF Data before it counted in packets_before_rate), and throws
    /// std::runtime_error naming the source and the setting when none comes within
    /// context_timeout_s or the rate is outside 1 kHz .. 1 GHz.
    [[nodiscard]] double sample_rate_hz() const override;
    /// Throws std::runtime_error naming the source if it cannot bind or the socket fails.
    void run(sample_sink& sink) override;
    void stop() override;

    /// The bound local port once run() has bound the socket; 0 before.
    [[nodiscard]] std::uint16_t local_port() const noexcept;
    [[nodiscard]] const udp_source_config& config() const noexcept;
    [[nodiscard]] const udp_counters& udp_counts() const noexcept;

private:
    struct impl;
    std::unique_ptr<impl> impl_;
};

/// VITA-49 over UDP. Per packet of the accepted stream:
///  - lost packets (timestamps when TSF = sample count or picoseconds, else the packet count; see
///    vita49::sequence_tracker) -> gap(lost samples, lost_packets), counted in
///    source_counters::packets_lost and samples_lost (an estimate without timestamps);
///  - duplicate and late (reordered) packets are dropped and counted in vita49_counters;
///  - a malformed datagram is counted (source_counters::malformed), logged (rate-limited)
///    and reported as a gap before the next accepted packet: the exact loss when that
///    packet's timestamp tells it (none if it shows nothing missing), else the packet-count
///    estimate, else gap(0, source_error);
///  - a packet whose timestamps give its UTC time (vita49::first_sample_utc_ns: TSI UTC or
///    GPS with a real-time or sample-count TSF) gives a time anchor, sink.timestamp() before
///    its samples' write() and latest_time_anchor();
///  - context packets are counted and skipped; the sample rate of the received stream's
///    IF Context packets is checked against sample_rate_hz (context_rate_mismatches; the
///    configured rate is kept);
///  - a packet of another stream id is counted (other_stream) and dropped, unless the
///    policy is follow, no stream_id is configured and the current stream has been silent
///    for stream_timeout_ms: then the source takes the new id (stream_changes), restarts
///    the sequence tracking and reports gap(0, gap_reason::discontinuity) before its samples.
class vita49_source final : public sample_source {
public:
    /// Throws std::invalid_argument listing cfg.validate()'s messages.
    explicit vita49_source(vita49_source_config cfg);
    ~vita49_source() override;
    vita49_source(const vita49_source&) = delete;
    vita49_source& operator=(const vita49_source&) = delete;

    /// "vita49 udp 0.0.0.0:4991 (stream id 0x00000001, ci16, 6.6 MHz)".
    [[nodiscard]] std::string describe() const override;
    /// The configured ci16 scale when the samples are ci16 (delivered at their width, write_ci16).
    [[nodiscard]] std::optional<float> ci16_scale() const override;
    [[nodiscard]] double sample_rate_hz() const override;
    /// Throws std::runtime_error naming the source if it cannot bind or the socket fails.
    void run(sample_sink& sink) override;
    void stop() override;

    [[nodiscard]] std::uint16_t local_port() const noexcept;
    [[nodiscard]] const vita49_source_config& config() const noexcept;
    [[nodiscard]] const vita49_counters& vita_counters() const noexcept;

private:
    struct impl;
    std::unique_ptr<impl> impl_;
};

}  // namespace paq::io
