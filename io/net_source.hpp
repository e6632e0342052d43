// Network sample sources (Boost.Asio): raw IQ over TCP or UDP, and VITA-49 over UDP.
//
// Each source owns an io_context that run() drives on the calling (acquisition) thread, so
// the sink is only ever called from there; stop() posts to that io_context and is safe from
// any thread. Asio stays inside net_source.cpp: this header pulls in no Boost.
//
//   tcp_source     connect: resolve -> connect --fail--> wait (backoff) -> resolve ...
//                                        \--ok--> read ... peer gone --> reconnect
//                  listen:  bind -> accept one client -> read ... client gone --> accept next
//   udp_source     bind -> one datagram = whole raw samples (loss cannot be detected)
//   vita49_source  bind -> one datagram = one VITA-49 packet; sequence tracking finds losses
//
// A reconnect is reported as gap(0, gap_reason::reconnect) before the new connection's first
// samples; VITA-49 losses as gap(lost_samples, gap_reason::lost_packets). The network carries
// no sample rate: sample_rate_hz() is the configured one.
#pragma once

#include "io/sample_format.hpp"
#include "io/sample_source.hpp"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace paq::io {

/// Whether a TCP source dials out or waits for the sender to dial in.
enum class tcp_mode : std::uint8_t {
    connect,  ///< connect to host:port; retry with backoff while unreachable; reconnect when dropped
    listen,   ///< bind host:port, serve one client at a time; wait for the next when it leaves
};

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
    double retry_initial_s = 0.1;  ///< first reconnect delay, 0.001 .. 60 s; doubles per failure
    double retry_max_s = 5.0;      ///< longest reconnect delay, retry_initial_s .. 600 s
    /// End run() normally at the first disconnect instead of reconnecting (tests, replays).
    bool end_on_close = false;
    std::size_t read_bytes = 256 * 1024;  ///< bytes per read, 64 .. 16 MiB

    /// One message per bad field, naming the field, its value and the allowed range.
    [[nodiscard]] std::vector<std::string> validate() const;
};

/// Raw interleaved IQ datagrams over UDP: each datagram holds whole samples.
struct udp_source_config {
    std::string bind_address = "0.0.0.0";  ///< numeric IPv4 or IPv6 address
    int port = 5000;                        ///< 0 .. 65535 (0: ephemeral, see udp_source::local_port)
    sample_format format = sample_format::ci16_le;
    float ci16_scale = default_ci16_scale;  ///< > 0
    double sample_rate_hz = 0;              ///< > 0 (required)
    /// SO_RCVBUF in bytes, 0 .. 1 GiB (0: kernel default). 8 MiB holds ~0.3 s at 6.6 MS/s
    /// ci16; the kernel caps it at net.core.rmem_max (a warning says so).
    int rcvbuf_bytes = 8 * 1024 * 1024;

    [[nodiscard]] std::vector<std::string> validate() const;
};

/// VITA-49 IF Data packets (see io/vita49.hpp) over UDP, one packet per datagram.
struct vita49_source_config {
    std::string bind_address = "0.0.0.0";  ///< numeric IPv4 or IPv6 address
    int port = 4991;                        ///< 0 .. 65535 (0: ephemeral)
    /// Accept only this stream id. Unset: lock onto the first IF Data stream id seen. Packets
    /// of any other stream id are counted (vita49_counters::other_stream) and dropped.
    std::optional<std::uint32_t> stream_id;
    float ci16_scale = default_ci16_scale;  ///< > 0
    double sample_rate_hz = 0;              ///< > 0 (required)
    int rcvbuf_bytes = 8 * 1024 * 1024;     ///< as udp_source_config::rcvbuf_bytes

    [[nodiscard]] std::vector<std::string> validate() const;
};

/// VITA-49 events beyond source_counters (read from other threads while the source runs).
struct vita49_counters {
    std::atomic<std::uint64_t> context_packets{0};  ///< context packets (types 4, 5) skipped
    std::atomic<std::uint64_t> other_stream{0};     ///< data packets of another stream id dropped
    std::atomic<std::uint64_t> duplicates{0};       ///< repeated packets dropped
    std::atomic<std::uint64_t> late{0};             ///< reordered packets dropped (their place was a gap)
    std::atomic<std::uint64_t> resyncs{0};          ///< timestamp jumped backwards: tracking restarted
};

/// Raw IQ over TCP. Samples split across reads are reassembled; a partial sample left when
/// the connection drops is discarded (the reconnect gap covers it).
class tcp_source final : public sample_source {
public:
    /// Throws std::invalid_argument listing cfg.validate()'s messages.
    explicit tcp_source(tcp_source_config cfg);
    ~tcp_source() override;
    tcp_source(const tcp_source&) = delete;
    tcp_source& operator=(const tcp_source&) = delete;

    /// "tcp connect 10.0.0.5:5000 (ci16_le, 6.6 MHz)" or "tcp listen 0.0.0.0:5000 (...)".
    [[nodiscard]] std::string describe() const override;
    [[nodiscard]] double sample_rate_hz() const override;
    /// Throws std::runtime_error (naming the source) if listen mode cannot bind or listen.
    /// Connection failures in connect mode are retried, never thrown.
    void run(sample_sink& sink) override;
    void stop() override;

    /// The local port: in listen mode once bound, in connect mode while connected; else 0.
    [[nodiscard]] std::uint16_t local_port() const noexcept;
    /// Whether a peer is connected now (for status lines). Thread-safe.
    [[nodiscard]] bool connected() const noexcept;
    [[nodiscard]] const tcp_source_config& config() const noexcept;

private:
    struct impl;
    std::unique_ptr<impl> impl_;
};

/// Raw IQ datagrams over UDP. Raw UDP carries no sequence number, so lost datagrams cannot be
/// detected: they vanish without a gap. Use VITA-49 where loss matters. A datagram that is
/// not a whole number of samples is counted as malformed, dropped, and reported as
/// gap(0, gap_reason::source_error).
class udp_source final : public sample_source {
public:
    /// Throws std::invalid_argument listing cfg.validate()'s messages.
    explicit udp_source(udp_source_config cfg);
    ~udp_source() override;
    udp_source(const udp_source&) = delete;
    udp_source& operator=(const udp_source&) = delete;

    /// "udp 0.0.0.0:5000 (raw ci16_le, 6.6 MHz, loss undetectable)".
    [[nodiscard]] std::string describe() const override;
    [[nodiscard]] double sample_rate_hz() const override;
    /// Throws std::runtime_error naming the source if it cannot bind or the socket fails.
    void run(sample_sink& sink) override;
    void stop() override;

    /// The bound local port once run() has bound the socket; 0 before.
    [[nodiscard]] std::uint16_t local_port() const noexcept;
    [[nodiscard]] const udp_source_config& config() const noexcept;

private:
    struct impl;
    std::unique_ptr<impl> impl_;
};

/// VITA-49 over UDP. Per packet of the accepted stream:
///  - lost packets (packet count, and timestamps when TSF = sample count; see
///    vita49::sequence_tracker) -> gap(lost samples, lost_packets), counted in
///    source_counters::packets_lost and samples_lost (an estimate without timestamps);
///  - duplicate and late (reordered) packets are dropped and counted in vita49_counters;
///  - a malformed datagram is counted (source_counters::malformed), logged (rate-limited)
///    and reported as a gap before the next accepted packet: the exact loss when that
///    packet's timestamp tells it (none if it shows nothing missing), else the packet-count
///    estimate, else gap(0, source_error);
///  - context packets are counted and skipped.
class vita49_source final : public sample_source {
public:
    /// Throws std::invalid_argument listing cfg.validate()'s messages.
    explicit vita49_source(vita49_source_config cfg);
    ~vita49_source() override;
    vita49_source(const vita49_source&) = delete;
    vita49_source& operator=(const vita49_source&) = delete;

    /// "vita49 udp 0.0.0.0:4991 (stream id 0x00000001, ci16, 6.6 MHz)".
    [[nodiscard]] std::string describe() const override;
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
