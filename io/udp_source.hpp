// Raw IQ datagrams over UDP, optionally after GNU Radio's sequence header (Boost.Asio inside
// udp_source.cpp; this header pulls in no Boost). One datagram = [header] + whole samples;
// loss is counted only with the header (udp_header). No sample rate and no time on the wire:
// the configured rate, the host's clock at arrival.
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
#include <string_view>
#include <vector>

namespace paq::io {

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
inline constexpr name_table<udp_header, 3> udp_header_names{{{"none", udp_header::none},
                                                             {"gnuradio-seq", udp_header::gnuradio_seq},
                                                             {"gnuradio-seq-size", udp_header::gnuradio_seq_size}}};

[[nodiscard]] constexpr std::string_view to_string(udp_header h) noexcept { return name_of(udp_header_names, h); }
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
    /// Receive channels interleaved in each datagram, a sample of each per sample time: 1 or
    /// 2 (then delivered as cf32x2, receiver.channels 2); a datagram carries whole sample times.
    int channels = 1;

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
    [[nodiscard]] int channels() const override;
    /// The configured rate (raw UDP carries none).
    [[nodiscard]] double sample_rate_hz() const override;
    /// Throws std::runtime_error naming the source if it cannot bind or the socket fails.
    void run(sample_sink& sink) override;
    void stop() override;

    /// The bound local port once run() has bound the socket; 0 before.
    [[nodiscard]] std::uint16_t local_port() const noexcept;
    [[nodiscard]] const udp_source_config& config() const noexcept;
    [[nodiscard]] const udp_counters& udp_counts() const noexcept;
    /// The counters of a raw UDP source (udp_counters) beyond source_counters, as kind_counters() reports them (the
    /// service's registry and its docs table list them from here).
    [[nodiscard]] static std::span<const source_counter> counter_list() noexcept;
    [[nodiscard]] std::vector<source_counter_value> kind_counters() const override;

private:
    struct impl;
    std::unique_ptr<impl> impl_;
};

}  // namespace paq::io
