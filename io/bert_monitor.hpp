// The counting side of paq-bert (tools/paq_bert.cpp): datagrams of the six bitstreams in,
// per-stream PN bit errors and datagram losses, duplicates and reordering out. No sockets
// here, so the counts can be tested datagram by datagram.
//
//   datagram --decode--> stream id (paq header; for a bare DQE frame the port's stream or
//                        the DQE ID word)
//            --sequence number--> new highest: lost += gap, checked by PN
//                                 below highest, not seen: reordered (lost -= 1), not checked
//                                 seen before: duplicated, not checked
//
// Only datagrams that advance the sequence reach the PN checker (dsp::stream_ber_counter),
// which skips the packets that never arrived by their start sample, so a lost datagram costs
// no bit errors and a late one is not compared against the wrong part of the sequence.
#pragma once

#include "dsp/ber.hpp"
#include "dsp/pn.hpp"
#include "io/bitstream.hpp"

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace paq::io {

struct bert_monitor_config {
    dsp::pn_pattern pattern = dsp::pn_pattern::pn15;
    /// When set, datagrams of another format are counted as malformed.
    std::optional<bitstream_format> expected_format;
};

struct bert_stream_stats {
    std::uint64_t datagrams = 0;        ///< valid datagrams received (duplicates included)
    std::uint64_t bytes = 0;            ///< their UDP payload bytes
    /// Sequence numbers between the first and the highest seen that have not arrived (a late
    /// arrival takes its number back out). Not counted for bare DQE frames (no sequence).
    std::uint64_t lost = 0;
    std::uint64_t duplicated = 0;       ///< sequence number already received
    std::uint64_t reordered = 0;        ///< arrived after a higher sequence number
    std::uint64_t malformed = 0;        ///< rejected by the decoder, attributed to this stream
    std::uint64_t packets_checked = 0;  ///< datagrams given to the PN checker
    std::uint64_t packets_skipped = 0;  ///< missing packets the checker skipped by start sample
    dsp::pn_checker::counts pn{};       ///< bits checked, bit errors, lock, resyncs
    std::optional<std::uint16_t> last_dqm;  ///< from the latest DQE frame
    float last_bep_estimate = 0.5f;     ///< from the latest paq header

    [[nodiscard]] bool active() const noexcept { return datagrams > 0; }
    [[nodiscard]] double ber() const noexcept
    {
        return pn.bits_checked ? static_cast<double>(pn.bit_errors) / static_cast<double>(pn.bits_checked) : 0.0;
    }
};

class bert_monitor {
public:
    /// A datagram more than this many sequence numbers behind the highest one seen cannot be
    /// told from a duplicate: it is counted as reordered and lost stays as it was.
    static constexpr std::uint64_t sequence_window = 65536;

    explicit bert_monitor(const bert_monitor_config& config);

    /// One received datagram. port_stream: the stream the receiving port is dedicated to
    /// (one port per stream, 0 .. 5), or -1 for a port all streams share. It names the stream
    /// of a bare DQE frame (on a shared port: the DQE ID word when it is 0 .. 5) and of a
    /// malformed datagram (on a shared port those count as unattributed).
    void ingest(std::span<const std::uint8_t> datagram, int port_stream = -1);

    /// stream: 0 .. 5.
    [[nodiscard]] bert_stream_stats stats(int stream) const;
    /// Streams that received at least one valid datagram.
    [[nodiscard]] int active_streams() const noexcept;
    /// Smallest bits_checked over the active streams (0 when none is active).
    [[nodiscard]] std::uint64_t min_bits_checked() const noexcept;
    [[nodiscard]] std::uint64_t datagrams_total() const noexcept { return datagrams_total_; }
    [[nodiscard]] std::uint64_t malformed_total() const noexcept { return malformed_total_; }
    /// Malformed datagrams on a shared port, or bare DQE frames whose stream is unknown.
    [[nodiscard]] std::uint64_t malformed_unattributed() const noexcept { return malformed_unattributed_; }
    /// The decoder's message for the latest malformed datagram ("" when none).
    [[nodiscard]] const std::string& last_error() const noexcept { return last_error_; }
    [[nodiscard]] dsp::pn_pattern pattern() const noexcept { return config_.pattern; }

private:
    struct stream_state {
        explicit stream_state(dsp::pn_pattern p) : ber(p), seen(sequence_window / 64, 0) {}
        dsp::stream_ber_counter ber;
        bert_stream_stats s;
        bool started = false;
        std::uint64_t first_seq = 0;
        std::uint64_t highest_seq = 0;
        std::uint64_t unique = 0;            // distinct sequence numbers received
        std::vector<std::uint64_t> seen;     // bit (seq % window): received, for the last window
        std::uint64_t raw_start = 0;         // synthetic start sample for bare DQE frames
    };

    void malformed(int port_stream, std::string error);
    void track_sequence(stream_state& st, const decoded_datagram& d);

    bert_monitor_config config_;
    std::vector<stream_state> streams_;
    std::uint64_t datagrams_total_ = 0;
    std::uint64_t malformed_total_ = 0;
    std::uint64_t malformed_unattributed_ = 0;
    std::string last_error_;
};

}  // namespace paq::io
