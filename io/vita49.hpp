// VITA-49.2 signal data packets: encoding and decoding of IF Data packets with a stream id,
// recognition of context packets, and per-stream sequence tracking (loss, duplicates, order).
//
// Packet layout (32-bit words, every word big-endian on the wire):
//
//   word 0        header: type(31..28) C(27) T(26) N(25) S(24) TSI(23..22) TSF(21..20)
//                         packet count(19..16) packet size in words(15..0)
//   word 1        stream id
//   [2 words]     class id (C = 1): pad bit count(31..27) OUI(23..0); info class, packet class
//   [1 word]      integer timestamp (TSI != none)
//   [2 words]     fractional timestamp (TSF != none), most significant word first
//   payload       complex signed 16-bit samples: one word per sample, I in the upper
//                 (first) 16 bits, Q in the lower 16 bits, each big-endian two's complement
//   [1 word]      trailer (T = 1), carried but not interpreted
//
// Timestamps (VITA 49.2 5.1.4) give the time of the first payload sample:
//   TSI 1 (UTC)   integer seconds since 1970-01-01T00:00:00Z, POSIX style (no leap seconds)
//   TSI 2 (GPS)   integer seconds since the GPS epoch 1980-01-06T00:00:00Z (GPS time: no leap
//                 seconds either, so it runs gps_minus_utc_s ahead of UTC)
//   TSI 3 (other) seconds of an epoch the sender defines: used for ordering, never as UTC
//   TSF 1         sample count: samples since the integer second (or, without TSI, since
//                 an arbitrary start)
//   TSF 2         real time: picoseconds within the integer second, 0 .. 10^12 - 1
//   TSF 3         free-running count: carried, not interpreted
//
// IF Context packets (type 4) are read as far as the sample rate field (CIF0 bit 21): CIF0,
// then the CIF1, CIF2 and CIF3 words its bits 1 .. 3 announce, then the CIF0 fields in the order
// of their bits, 31 down; the rate is 64-bit two's complement Hz with 20 fractional bits.
//
// Only that payload format is accepted: packet type 1 (IF Data with stream id) carrying
// time-domain (S = 0) ci16 I/Q pairs with no pad bits. Other data formats (real samples,
// other widths, spectrum data, IF Data without stream id, extension data) are rejected
// with an error naming the field; context packets (types 4 and 5) are recognised so that a
// receiver can count and skip them.
#pragma once

#include "dsp/types.hpp"
#include "io/sample_format.hpp"

#include <cstddef>
#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

namespace paq::io::vita49 {

/// Packet types (header bits 31..28) that the decoder knows by name.
enum class packet_type : std::uint8_t {
    if_data_no_stream_id = 0,
    if_data = 1,  ///< IF Data with stream id: the only data type decoded
    ext_data_no_stream_id = 2,
    ext_data = 3,
    if_context = 4,   ///< recognised and skipped
    ext_context = 5,  ///< recognised and skipped
    command = 6,
    ext_command = 7,
};

/// Integer timestamp type (TSI, header bits 23..22).
enum class tsi_type : std::uint8_t { none = 0, utc = 1, gps = 2, other = 3 };
/// Fractional timestamp type (TSF, header bits 21..20).
enum class tsf_type : std::uint8_t { none = 0, sample_count = 1, real_time_ps = 2, free_running = 3 };

/// The class id field (two words).
struct class_id {
    std::uint32_t oui = 0;                ///< 24-bit organizationally unique identifier
    std::uint16_t information_class = 0;  ///< information class code
    std::uint16_t packet_class = 0;       ///< packet class code
    friend bool operator==(const class_id&, const class_id&) = default;
};

/// Everything in an IF Data packet except the samples.
struct packet_fields {
    std::uint32_t stream_id = 0;
    std::uint8_t packet_count = 0;  ///< 0..15, increments per packet of the stream
    std::optional<class_id> class_id_field;
    tsi_type tsi = tsi_type::none;
    std::uint32_t integer_timestamp = 0;  ///< meaningful when tsi != none
    tsf_type tsf = tsf_type::none;
    std::uint64_t fractional_timestamp = 0;  ///< meaningful when tsf != none
    std::optional<std::uint32_t> trailer;
    friend bool operator==(const packet_fields&, const packet_fields&) = default;
};

/// Real-time fractional timestamps (TSF 2) count picoseconds below this, then the second turns.
inline constexpr std::uint64_t picoseconds_per_second = 1'000'000'000'000;
/// The GPS epoch, 1980-01-06T00:00:00Z, in Unix seconds.
inline constexpr std::int64_t gps_epoch_unix_s = 315'964'800;
/// GPS time minus UTC in seconds: 18 since the leap second inserted at the end of 2016-12-31
/// (in force from 2017-01-01T00:00:00Z; IERS Bulletin C had announced no later one when this
/// was written). A future leap second makes GPS-stamped times 1 s off until this is updated;
/// times before 2017 (GPS - UTC was 17 or less) are converted with it too.
inline constexpr std::int64_t gps_minus_utc_s = 18;

/// Bytes per payload sample (one ci16 I/Q pair).
inline constexpr std::size_t bytes_per_sample = 4;
/// The largest packet the 16-bit packet size field can describe, in 32-bit words.
inline constexpr std::size_t max_packet_words = 65535;

/// Words before the payload (header, stream id, class id and timestamps) for these fields.
[[nodiscard]] std::size_t prefix_words(const packet_fields& fields) noexcept;
/// The encoded size in bytes of a packet of num_samples samples with these fields.
[[nodiscard]] std::size_t packet_bytes(const packet_fields& fields, std::size_t num_samples) noexcept;
/// The most samples a packet with these fields can carry (packet size field limit).
[[nodiscard]] std::size_t max_samples(const packet_fields& fields) noexcept;

/// Encodes an IF Data packet (type 1) carrying `samples`, each component multiplied by
/// ci16_scale, rounded and saturated as io::encode does for ci16. Writes
/// packet_bytes(fields, samples.size()) bytes to `out` and returns that count. Returns through
/// `clipped_components` (if not null) how many I or Q components saturated.
/// Throws std::invalid_argument if packet_count > 15, class id OUI > 24 bits, a real-time
/// fractional timestamp is not below 10^12 ps, ci16_scale is not positive,
/// samples.size() > max_samples(fields) or `out` is too small.
std::size_t encode_packet(const packet_fields& fields, std::span<const cf32> samples, float ci16_scale,
                          std::span<std::byte> out, std::size_t* clipped_components = nullptr);

/// Convenience: encode_packet into a new vector.
[[nodiscard]] std::vector<std::byte> encode_packet(const packet_fields& fields, std::span<const cf32> samples,
                                                   float ci16_scale = default_ci16_scale);

/// A parsed packet: a view into the datagram it was parsed from.
struct packet {
    packet_type type = packet_type::if_data;  ///< if_data, if_context or ext_context
    packet_fields fields;                     ///< context packets: the prefix fields, never a trailer
    std::span<const std::byte> payload;       ///< IF Data: ci16 pairs, big-endian; empty for context
    /// IF Context (type 4) whose CIF0 announces the sample rate field (bit 21): its value in Hz
    /// (64-bit two's complement, 20 fractional bits; always > 0, parse_packet rejects others);
    /// 0 otherwise.
    double context_sample_rate_hz = 0.0;
    [[nodiscard]] bool is_context() const noexcept { return type != packet_type::if_data; }
    [[nodiscard]] std::size_t num_samples() const noexcept { return payload.size() / bytes_per_sample; }
};

/// Parses one datagram holding one packet, validating: the datagram holds at least a header
/// word; the packet type is 1 (IF Data with stream id), 4 or 5 (context); the packet size
/// field equals the datagram length; the datagram holds the header fields that the header
/// word announces (and the trailer); the payload is a whole number of 4-byte I/Q pairs;
/// spectrum data (S bit) and pad bits (class id) are rejected; a real-time fractional
/// timestamp (TSF 2) is below 10^12 ps. In an IF Context packet whose CIF0 announces the
/// sample rate: CIF0's reserved bits 4 .. 6 and bit 7 (CIF7, field attributes, which change
/// the size of every field) are clear, the packet holds the field, and the rate is positive.
/// Returns an empty string and
/// fills `out` on success, else a message naming the field and its value (`out` is then
/// unspecified). Allocates only on error; safe for the receive path.
[[nodiscard]] std::string parse_packet(std::span<const std::byte> datagram, packet& out);

/// A datagram is not a packet that parse_packet accepts; the message names the field and value.
class decode_error : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

/// parse_packet that throws decode_error with the message instead.
[[nodiscard]] packet parse_packet(std::span<const std::byte> datagram);

/// Converts the payload of an IF Data packet to cf32, dividing each component by ci16_scale
/// (> 0). dst must hold p.num_samples() samples.
void decode_payload(const packet& p, cf32* dst, float ci16_scale = default_ci16_scale) noexcept;
/// The payload's samples as ci16, unconverted (big-endian I/Q pairs to host order): what the
/// VITA-49 source delivers (each stands for to_cf32(s, ci16_scale)).
void decode_payload(const packet& p, ci16* dst) noexcept;

/// The UTC time of the first sample of a packet with these fields, in ns since the Unix epoch
/// (1970-01-01T00:00:00Z, leap seconds not counted, as POSIX time), or nullopt when its
/// timestamps give none: TSI must be UTC or GPS (GPS seconds are converted with
/// gps_epoch_unix_s and gps_minus_utc_s) and TSF real time (picoseconds, rounded to the
/// nearest ns) or sample count (count / sample_rate_hz, rounded to the nearest ns; needs
/// sample_rate_hz > 0). TSI alone (whole seconds), TSF 3 and TSI 3 give nullopt, as do
/// values whose time would not fit an int64 of ns. The time is the sender's: its accuracy is
/// that of the sender's clock, not of the network.
[[nodiscard]] std::optional<std::int64_t> first_sample_utc_ns(const packet_fields& fields, double sample_rate_hz) noexcept;

/// What sequence_tracker::update concluded about one packet.
struct sequence_result {
    bool first = false;      ///< the first packet seen of this stream (nothing to compare with)
    bool duplicate = false;  ///< same timestamp as the previous packet: drop it
    bool late = false;       ///< timestamp before the expected one (reordered): drop it
    bool resync = false;     ///< timestamp jumped backwards too far to be reordering, or
                             ///< forwards beyond max_jump_samples (or past 2^64): a
                             ///< discontinuity. The tracker restarted from this packet; the
                             ///< loss is unknown and nothing is computed from the jump
    bool jumped_forward = false;  ///< resync by a forward jump (for the log)
    std::uint64_t packets_lost = 0;  ///< packets missing before this one
    std::uint64_t samples_lost = 0;  ///< samples missing before this one (see samples_exact)
    bool samples_exact = false;      ///< samples_lost comes from the timestamps
    /// samples_exact, the packets so far all had the same size, and the 4-bit packet count
    /// difference is not the number of packets the timestamps say are missing (mod 16): the
    /// sender's count or its timestamps are wrong. The timestamps are believed.
    bool count_mismatch = false;
    [[nodiscard]] bool accept() const noexcept { return !duplicate && !late; }
};

/// Tracks the packet count and timestamps of each stream id and reports what is missing.
///
/// Timestamps, when the packets carry usable ones, give the position of each packet's first
/// sample in the stream, so lost samples are exact, and a packet whose position is behind the
/// expected one is a duplicate (same position as the last packet) or late (reordered; the
/// receiver drops it since its place in the stream is already filled). Usable timestamps:
///  - TSF sample count without TSI: the count is the position (a free-running sample count);
///  - TSF sample count with TSI: the count restarts each integer second, so the position is
///    integer_timestamp x samples per second + count, which needs an integer sample rate
///    (construct with it); without one, exactness holds only within one integer second and a
///    packet across a second boundary falls back to the packet count;
///  - TSF real time (picoseconds) with TSI: the time since the last accepted packet, in ps
///    with the integer seconds carried (t = integer_timestamp x 10^12 + ps), times the sample
///    rate, rounded to the nearest sample. Any rate works (30.72 MS/s is 32552.08 ps a
///    sample); measuring from the last packet rather than from the epoch keeps a rate that
///    is not exactly the sender's (a configured 10e6/3) from drifting the rounding. Needs the
///    rate; without TSI the picoseconds wrap each second unseen, so they are not used.
/// packets_lost is then the lost samples / the last packet's size when every packet so far
/// had that size (the 4-bit packet count is only checked against it: count_mismatch), else
/// the count n matching the packet count difference (mod 16) that is closest to
/// samples_lost / the last packet's size. A burst of 20 lost packets is 20.
///
/// Without usable timestamps only the 4-bit packet count is known: packets_lost is the
/// count difference modulo 16, so a burst of 16k + n lost packets looks like n (16 like none,
/// 20 like 4), and a duplicate looks like 15 lost packets. samples_lost is then
/// packets_lost x the sample count of the last packet, an estimate (samples_exact = false).
class sequence_tracker {
public:
    /// sample_rate_hz: the stream's rate, 0 when unknown (then only sample-count timestamps
    /// without TSI, or within one second, are exact); used for TSI + sample-count timestamps
    /// (integer rates only) and picosecond timestamps (any rate up to 10 GHz; a rate that is
    /// not finite or not positive is unknown). It is held to 2^-20 Hz, as a context packet
    /// carries it. max_jump_samples: the largest forward timestamp jump still taken as lost
    /// samples; a larger one (a sender's clock reset, a corrupt or hostile timestamp) is a
    /// counted discontinuity (resync), never a loss of 2^64 samples. >= 1.
    explicit sequence_tracker(double sample_rate_hz = 0.0,
                              std::uint64_t max_jump_samples = default_max_jump_samples) noexcept;

    /// The default bound on a forward jump: 2^32 samples (208 s at 20.625 MS/s, 70 s at
    /// 61.44 MS/s). Longer outages of a live link are reported as discontinuities.
    static constexpr std::uint64_t default_max_jump_samples = std::uint64_t{1} << 32;
    /// A bound of `seconds` at `sample_rate_hz`, clamped to [2^20, 2^40] samples (safe for any
    /// rate a source accepts; non-finite or non-positive rates give the default).
    [[nodiscard]] static std::uint64_t max_jump_for(double sample_rate_hz, double seconds) noexcept;

    /// Feeds the next packet of a stream (IF Data only) and returns what is missing before it.
    /// An accepted packet becomes the reference for the next one; a dropped one does not.
    [[nodiscard]] sequence_result update(const packet_fields& fields, std::size_t num_samples);

    /// Forgets every stream (e.g. after a reconnect).
    void reset() noexcept { streams_.clear(); }
    [[nodiscard]] std::size_t num_streams() const noexcept { return streams_.size(); }

    /// How far backwards (in packets of the last size) a timestamp may be and still count as
    /// late rather than as a restart of the sender's clock.
    static constexpr std::uint64_t reorder_window_packets = 16;

private:
    struct stream_state {
        std::uint8_t last_count = 0;
        std::size_t last_samples = 0;
        bool has_position = false;
        std::uint64_t last_position = 0;  ///< first sample of the last accepted packet
        std::uint64_t next_position = 0;  ///< expected first sample of the next packet
        bool has_tsi_second = false;
        std::uint32_t last_second = 0;    ///< integer timestamp of the last packet (TSI set)
        bool has_ps_time = false;         ///< the last packet had TSI and a real-time TSF
        std::uint64_t last_ps = 0;        ///< its fractional timestamp
        bool uniform_size = true;         ///< every accepted packet had last_samples samples
    };
    [[nodiscard]] std::optional<std::uint64_t> position(const packet_fields& f, const stream_state* prev) const noexcept;

    std::uint64_t rate_q20_;           ///< the sample rate in units of 2^-20 Hz; 0: unknown
    std::uint64_t samples_per_second_; ///< the rate when it is a whole number of Hz, else 0
    std::uint64_t max_jump_samples_;
    std::unordered_map<std::uint32_t, stream_state> streams_;
};

}  // namespace paq::io::vita49
