// A ZeroMQ sample source, as GNU Radio's gr-zeromq sinks send.
//
//   zmq_source   connect ENDPOINT (SUB subscribed to everything, or PULL)
//                -> one message = [GNU Radio tag header] + whole raw samples
//
// libzmq reconnects by itself; run() polls with a short timeout so that stop() is prompt,
// and a sender that goes quiet simply delivers no samples: the batcher's stall detection
// (source.stall_timeout_s) reports it as it does for every source.
//
// GNU Radio's ZMQ PUB Sink / PUSH Sink with "Pass Tags" on put a header before the items
// (gr-zeromq/lib/tag_headers.cc), in the sender's byte order (read here as little-endian):
//
//   | magic u16 0x5FF0 | version u8 0x01 | offset u64 | ntags u64 | ntags x (offset u64 + 3 PMTs) | items ...
//
// `offset` is the sink's item count before the message's first item, so with the header a
// skipped offset is an exact loss (gap(lost samples, lost_packets)), up to zmq_max_offset_jump
// items; an offset before the expected one (the sender restarted) or further ahead than that
// (a corrupt or hostile header) is a resync: gap(0, discontinuity), counted in
// zmq_counters::resyncs, and the offsets are checked from that message on. paqd does not decode PMTs:
// a message that carries tags (ntags > 0) cannot be split into tags and samples and is
// counted malformed, with a warning naming the setting. Without the header (Pass Tags off)
// ZeroMQ PUB/SUB drops messages silently at the high-water mark and nothing in the stream
// says so: that loss cannot be counted (PUSH/PULL blocks the sender instead of dropping).
//
// A sink with a key (GNU Radio's "Key" field) sends each message as two frames: the key, then
// the items. With source.zmq.key set, a SUB socket subscribes to that key and only messages
// whose key frame is exactly it are taken (others are counted in zmq_key_mismatches, as are
// messages without a key frame); without, a key frame is taken as a key and not as items, and
// every keyed message is taken. A message of more than two frames is malformed.
#pragma once

#include "dsp/names.hpp"
#include "io/sample_format.hpp"
#include "io/sample_source.hpp"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace paq::io {

enum class zmq_pattern : std::uint8_t {
    sub,   ///< a SUB socket, subscribed to every message (GNU Radio "ZMQ PUB Sink")
    pull,  ///< a PULL socket (GNU Radio "ZMQ PUSH Sink")
};

enum class zmq_tags : std::uint8_t {
    none,      ///< messages are items only (GNU Radio: Pass Tags off)
    gnuradio,  ///< each message starts with GNU Radio's tag header (Pass Tags on)
};

inline constexpr name_table<zmq_pattern, 2> zmq_pattern_names{{{"sub", zmq_pattern::sub}, {"pull", zmq_pattern::pull}}};
inline constexpr name_table<zmq_tags, 2> zmq_tags_names{{{"none", zmq_tags::none}, {"gnuradio", zmq_tags::gnuradio}}};
[[nodiscard]] constexpr std::string_view to_string(zmq_pattern p) noexcept { return name_of(zmq_pattern_names, p); }
[[nodiscard]] constexpr std::string_view to_string(zmq_tags t) noexcept { return name_of(zmq_tags_names, t); }

struct zmq_source_config {
    /// Where the sender's sink is bound: tcp://HOST:PORT, ipc://PATH or inproc://NAME.
    std::string endpoint = "tcp://127.0.0.1:5555";
    zmq_pattern pattern = zmq_pattern::sub;
    sample_format format = sample_format::cf32_le;  ///< GNU Radio's gr_complex is cf32_le
    float ci16_scale = default_ci16_scale;          ///< > 0
    double sample_rate_hz = 0;                      ///< the sender's rate, > 0 (required)
    int high_water_mark = 1000;                     ///< ZMQ_RCVHWM in messages, 1 .. 1000000
    /// Messages larger than this are refused by libzmq (ZMQ_MAXMSGSIZE: it drops the
    /// connection; the source then connects again), 1024 .. 256 MiB.
    int max_message_bytes = 16 * 1024 * 1024;
    /// The receive queue's bound in MiB, 1 .. 16384: the high-water mark applied is the
    /// smaller of high_water_mark and max_queue_mib MiB / max_message_bytes (at least 1), so
    /// the queue holds at most max_queue_mib MiB (or one message of max_message_bytes, if
    /// larger), plus the message being received.
    int max_queue_mib = 256;
    /// The high-water mark applied (ZMQ_RCVHWM), from the three above.
    [[nodiscard]] int effective_high_water_mark() const noexcept;
    zmq_tags tags = zmq_tags::none;
    /// The sender's key (GNU Radio's "Key" field), at most max_key_bytes; empty: any message,
    /// keyed or not.
    std::string key;
    static constexpr std::size_t max_key_bytes = 255;

    [[nodiscard]] std::vector<std::string> validate() const;
};

/// The most items a forward jump of the tag header's offset may skip and still count as lost:
/// 2^32, as VITA-49's default bound (vita49::sequence_tracker::default_max_jump_samples; 208 s
/// at 20.625 MS/s). A longer jump is a resync, never a loss of up to 2^64 samples.
inline constexpr std::uint64_t zmq_max_offset_jump = std::uint64_t{1} << 32;

/// Events beyond source_counters.
struct zmq_counters {
    std::atomic<std::uint64_t> messages_with_tags{0};  ///< tag header with ntags > 0: dropped
    /// tags gnuradio: offsets that went back (the sender restarted) or jumped ahead beyond
    /// zmq_max_offset_jump; each a gap(0, discontinuity), tracking restarted there.
    std::atomic<std::uint64_t> resyncs{0};
    /// tags none: 1 once a message started with GNU Radio's tag header magic (Pass Tags on?).
    std::atomic<std::uint64_t> tag_header_suspected{0};
    /// key set: messages dropped because their key frame was another key, or missing.
    std::atomic<std::uint64_t> key_mismatches{0};
};

/// GNU Radio's tag header, as far as paqd reads it.
struct gnuradio_tag_header {
    std::uint64_t offset = 0;  ///< items the sink sent before this message
    std::uint64_t ntags = 0;
};
inline constexpr std::size_t gnuradio_tag_header_bytes = 19;  ///< without tags

/// nullopt when `msg` is shorter than 19 bytes or its magic / version are not GNU Radio's.
[[nodiscard]] std::optional<gnuradio_tag_header> parse_gnuradio_tag_header(std::span<const std::byte> msg) noexcept;

class zmq_source final : public sample_source {
public:
    /// Throws std::invalid_argument listing cfg.validate()'s messages.
    explicit zmq_source(zmq_source_config cfg);
    ~zmq_source() override;
    zmq_source(const zmq_source&) = delete;
    zmq_source& operator=(const zmq_source&) = delete;

    /// "zmq sub tcp://10.0.0.5:5555 (cf32_le, 6.6 MHz, tags none: loss undetectable)".
    [[nodiscard]] std::string describe() const override;
    [[nodiscard]] double sample_rate_hz() const override;
    /// The configured ci16 scale when the samples are ci16 (delivered at their width, write_ci16).
    [[nodiscard]] std::optional<float> ci16_scale() const override;
    /// Throws std::runtime_error naming the source if the socket cannot be made or connected.
    void run(sample_sink& sink) override;
    void stop() override;

    [[nodiscard]] const zmq_source_config& config() const noexcept;
    [[nodiscard]] const zmq_counters& zmq_counts() const noexcept;
    /// The counters of a ZeroMQ source (zmq_counters) beyond source_counters, as kind_counters() reports them (the
    /// service's registry and its docs table list them from here).
    [[nodiscard]] static std::span<const source_counter> counter_list() noexcept;
    [[nodiscard]] std::vector<source_counter_value> kind_counters() const override;

private:
    struct impl;
    std::unique_ptr<impl> impl_;
};

}  // namespace paq::io
