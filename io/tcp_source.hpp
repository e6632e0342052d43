// Raw IQ over TCP (Boost.Asio inside tcp_source.cpp; this header pulls in no Boost).
//
//   connect: resolve -> connect --fail--> wait (backoff) -> resolve ...
//                          \--ok--> read ... peer gone or idle --> wait (backoff) -> reconnect
//   listen:  bind -> accept one client -> read ... client gone, idle or replaced --> next client
//
// A reconnect is reported as gap(0, gap_reason::reconnect) before the new connection's first
// samples. TCP carries no sample rate (the configured one) and no time (the host's clock at
// arrival anchors the samples).
#pragma once

#include "dsp/names.hpp"
#include "io/sample_format.hpp"
#include "io/sample_source.hpp"
#include "io/sender_allow_list.hpp"

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
inline constexpr name_table<tcp_mode, 2> tcp_mode_names{{{"connect", tcp_mode::connect}, {"listen", tcp_mode::listen}}};

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
    /// Receive channels interleaved in the stream, a sample of each per sample time: 1 or 2
    /// (then delivered as cf32x2, receiver.channels 2).
    int channels = 1;
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
    [[nodiscard]] int channels() const override;
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
    /// The counters of a TCP source (tcp_counters) beyond source_counters, as kind_counters() reports them (the
    /// service's registry and its docs table list them from here).
    [[nodiscard]] static std::span<const source_counter> counter_list() noexcept;
    [[nodiscard]] std::vector<source_counter_value> kind_counters() const override;

private:
    struct impl;
    std::unique_ptr<impl> impl_;
};

}  // namespace paq::io
