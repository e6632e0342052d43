// VITA-49 IF Data packets over UDP, one packet per datagram (io/vita49.hpp decodes them;
// Boost.Asio inside vita49_source.cpp). Sequence tracking finds losses and reports them as
// gap(lost_samples, gap_reason::lost_packets); timestamps give time anchors
// (io/sample_source.hpp); the rate is configured or taken from the named sender's IF Context
// packets.
#pragma once

#include "dsp/names.hpp"
#include "io/sample_format.hpp"
#include "io/sample_source.hpp"
#include "io/sender_allow_list.hpp"

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

/// What a VITA-49 source does when data packets of another stream id arrive.
enum class stream_change_policy : std::uint8_t {
    /// Switch to the new stream id once the current one has been silent for
    /// stream_timeout_ms (a sender restarted with a new id; a stray packet locked first).
    /// The switch is counted, logged, and a gap(0, discontinuity) so no packet spans it.
    follow,
    /// Keep the first stream id seen until restart; other ids are counted and dropped.
    stay,
};

inline constexpr name_table<stream_change_policy, 2> stream_change_policy_names{
    {{"follow", stream_change_policy::follow}, {"stay", stream_change_policy::stay}}};
[[nodiscard]] constexpr std::string_view to_string(stream_change_policy p) noexcept
{
    return name_of(stream_change_policy_names, p);
}

/// VITA-49 IF Data packets (see io/vita49.hpp) over UDP, one packet per datagram.
struct vita49_source_config {
    std::string bind_address = "0.0.0.0";  ///< numeric IPv4 or IPv6 address
    int port = 4991;                        ///< 0 .. 65535 (0: ephemeral)
    /// Accept only this stream id, always (stream_change does not apply). Unset: lock onto the
    /// first IF Data stream id seen, and change it as stream_change says. Packets of any other
    /// stream id are counted (vita49_counters::other_stream) and dropped.
    std::optional<std::uint32_t> stream_id;
    /// A second receive channel (receiver.channels 2): the stream id of the radio's other
    /// channel, beside stream_id (which must be set, and differ). The two streams' packets are
    /// paired by their timestamps (TSF sample count, or TSI with a real-time TSF) into sample
    /// times of both channels (io/channel_pairing.hpp); a packet without such a timestamp
    /// cannot be placed and is dropped, counted (vita49_untimed_packets).
    std::optional<std::uint32_t> second_stream_id;
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
    /// Two channels (second_stream_id): each channel's samples dropped for want of the other
    /// channel's at their time (the other lost them, lagged or fell silent), the times each
    /// channel began to lag or fell silent (more than max_channel_lag_s behind the other),
    /// and the packets without a timestamp to pair them by.
    std::array<std::atomic<std::uint64_t>, 2> unpaired_samples{};
    std::array<std::atomic<std::uint64_t>, 2> lag_events{};
    std::atomic<std::uint64_t> untimed_packets{0};
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
/// With second_stream_id, the packets of stream_id (channel 1) and second_stream_id (channel
/// 2) are tracked each as above and paired by their timestamps into sample times of both
/// (cf32x2, channels() 2): a channel's lost samples drop the other's at those times (a
/// lost_packets gap of the sample times); a channel more than max_channel_lag_s behind the
/// other, or silent, is logged by name, counted (lag_events), and the other's oldest samples
/// given up as a stall gap; a timestamp jump on either restarts the pairing (a discontinuity).
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
    /// The configured rate; with sample_rate_hz 0 the first call binds the socket and waits for
    /// the sender's first IF Context packet with a sample rate (allow-list and stream_id
    /// applied; IF Data before it counted in packets_before_rate), and throws
    /// std::runtime_error naming the source and the setting when none comes within
    /// context_timeout_s or the rate is outside 1 kHz .. 1 GHz.
    [[nodiscard]] double sample_rate_hz() const override;
    /// Throws std::runtime_error naming the source if it cannot bind or the socket fails.
    void run(sample_sink& sink) override;
    void stop() override;
    /// 2 with second_stream_id, else 1.
    [[nodiscard]] int channels() const override;
    /// How far one channel may run ahead of the other before the other counts as lagging or
    /// silent (seconds of samples held, at most 2^22 samples a channel).
    static constexpr double max_channel_lag_s = 0.1;

    [[nodiscard]] std::uint16_t local_port() const noexcept;
    [[nodiscard]] const vita49_source_config& config() const noexcept;
    [[nodiscard]] const vita49_counters& vita_counters() const noexcept;
    /// The counters of a VITA-49 source (vita49_counters) beyond source_counters, as kind_counters() reports them (the
    /// service's registry and its docs table list them from here).
    [[nodiscard]] static std::span<const source_counter> counter_list() noexcept;
    [[nodiscard]] std::vector<source_counter_value> kind_counters() const override;

private:
    struct impl;
    std::unique_ptr<impl> impl_;
};

}  // namespace paq::io
