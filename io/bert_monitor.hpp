// The counting side of paq-bert (tools/paq_bert.cpp): datagrams of the bitstreams in,
// per-stream PN bit errors and datagram losses, duplicates and reordering out. No sockets
// here, so the counts can be tested datagram by datagram.
//
//   datagram --decode--> stream id (paq header; for a bare DQE frame the port's stream or
//                        the DQE ID word)
//            --sequence number, start sample-->
//                 from a new run of the sender: sender_restarts += 1, tracking and PN start over
//                 new highest: lost += gap, checked by PN
//                 below highest, not seen: reordered (lost -= 1), not checked
//                 seen before, same start sample: duplicated, not checked
//
// A restarted sender (paqd restarted) numbers its datagrams from 0 again, with start samples
// of its new run. The paq header has no run or session field, so a new run is recognised by
// what one run can never produce (sequence and start sample rise together within a run):
//   - a sequence number already received, with another start sample (a duplicate is the
//     same datagram, so the same start sample);
//   - a sequence number above the highest with a start sample not above its start sample,
//     or below the highest with a start sample not below it;
//   - a sequence number a whole window (65536) or more below the highest: no network holds
//     a datagram back that long (~40 s of one stream at full rate), a restart does.
//
// Only datagrams that advance the sequence reach the PN checker (dsp::stream_ber_counter),
// which skips the packets that never arrived by their start sample, so a lost datagram costs
// no bit errors and a late one is not compared against the wrong part of the sequence.
#pragma once

#include "dsp/ber.hpp"
#include "dsp/pn.hpp"
#include "dsp/run_tally.hpp"
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
    std::uint64_t duplicated = 0;       ///< sequence number already received, same start sample
    std::uint64_t reordered = 0;        ///< arrived after a higher sequence number
    std::uint64_t malformed = 0;        ///< rejected by the decoder, attributed to this stream
    std::uint64_t packets_checked = 0;  ///< datagrams given to the PN checker
    std::uint64_t packets_skipped = 0;  ///< missing packets the checker skipped by start sample
    /// New runs of the sender recognised (see above). Each starts the sequence tracking and
    /// the PN checker over (it must lock again); the counts of earlier runs stay counted.
    std::uint64_t sender_restarts = 0;
    dsp::pn_checker::counts pn{};       ///< bits checked, bit errors, lock, resyncs
    std::optional<std::uint16_t> last_dqm;  ///< from the latest DQE frame
    float last_bep_estimate = 0.5f;     ///< from the latest paq header
    /// A decoded stream's (payload type 3): its code (none for a bitstream) and its checked
    /// datagrams' codewords (converged, failed, iterations, channel errors).
    dsp::fec_code code = dsp::fec_code::none;
    dsp::fec_summary fec{};

    [[nodiscard]] bool active() const noexcept { return datagrams > 0; }
    [[nodiscard]] double ber() const noexcept
    {
        return pn.bits_checked ? static_cast<double>(pn.bit_errors) / static_cast<double>(pn.bits_checked) : 0.0;
    }
};

class bert_monitor {
public:
    /// Sequence numbers whose start samples are remembered (duplicates and reordering are
    /// told apart within it). A datagram this many or more numbers behind the highest one seen
    /// is taken as a restart of the sender.
    static constexpr std::uint64_t sequence_window = 65536;
    /// Ids the monitor counts in: 0 .. 11 the bitstreams (the paq header's stream id), 12 the
    /// best-path stream (best_stream_id), 13 .. 24 the decoded streams of streams 0 .. 11
    /// (payload type 3; decoded_id).
    static constexpr int tracked_streams = 2 * bitstream_streams + 1;
    [[nodiscard]] static constexpr int decoded_id(int stream) noexcept { return bitstream_streams + 1 + stream; }

    explicit bert_monitor(const bert_monitor_config& config);

    /// One received datagram. port_stream: the stream the receiving port is dedicated to
    /// (one port per stream, 0 .. 12), or -1 for a port all streams share. It names the stream
    /// of a bare DQE frame (on a shared port: the DQE ID word when it is 0 .. 12) and of a
    /// malformed datagram (on a shared port those count as unattributed).
    void ingest(std::span<const std::uint8_t> datagram, int port_stream = -1);

    /// id: 0 .. 11 a bitstream, 12 the best-path stream, 13 .. 24 a decoded stream (decoded_id).
    [[nodiscard]] bert_stream_stats stats(int id) const;
    /// Streams (bitstreams and decoded streams) that received at least one valid datagram.
    [[nodiscard]] int active_streams() const noexcept;
    /// Smallest bits_checked over the active streams (0 when none is active).
    [[nodiscard]] std::uint64_t min_bits_checked() const noexcept;
    [[nodiscard]] std::uint64_t datagrams_total() const noexcept { return datagrams_total_; }
    [[nodiscard]] std::uint64_t malformed_total() const noexcept { return malformed_total_; }
    /// Sender restarts recognised, over all streams.
    [[nodiscard]] std::uint64_t sender_restarts_total() const noexcept { return sender_restarts_total_; }
    /// Malformed datagrams on a shared port, or bare DQE frames whose stream is unknown.
    [[nodiscard]] std::uint64_t malformed_unattributed() const noexcept { return malformed_unattributed_; }
    /// The decoder's message for the latest malformed datagram ("" when none).
    [[nodiscard]] const std::string& last_error() const noexcept { return last_error_; }
    [[nodiscard]] dsp::pn_pattern pattern() const noexcept { return config_.pattern; }

private:
    /// slot_start value of a sequence number not received (no packet starts at 2^64 - 1).
    static constexpr std::uint64_t unseen = ~std::uint64_t{0};

    struct stream_state {
        explicit stream_state(dsp::pn_pattern p) : ber(p, 0.0), slot_start(sequence_window, unseen) {}
        dsp::stream_ber_counter ber;  // this run's
        bert_stream_stats s;
        bool started = false;
        std::uint64_t first_seq = 0;
        std::uint64_t highest_seq = 0;
        std::uint64_t highest_start = 0;      // start sample of highest_seq
        std::uint64_t unique = 0;             // distinct sequence numbers received (this run)
        // [seq % window]: start sample of seq, for the last window of numbers; unseen if none.
        std::vector<std::uint64_t> slot_start;
        std::uint64_t raw_start = 0;          // synthetic start sample for bare DQE frames
        // Totals of the sender's earlier runs (before the latest restart).
        std::uint64_t lost_before = 0;
        std::uint64_t skipped_before = 0;
        dsp::pn_checker::counts pn_before{};
    };

    void malformed(int port_stream, std::string error);
    void track_sequence(stream_state& st, const decoded_datagram& d);
    [[nodiscard]] static bool new_run(const stream_state& st, std::uint64_t seq, std::uint64_t start) noexcept;
    void start_new_run(stream_state& st);
    /// A checker for `code`'s information bits per packet (6144 for none), spacing learned.
    [[nodiscard]] dsp::stream_ber_counter checker_for(dsp::fec_code code) const;

    bert_monitor_config config_;
    std::vector<stream_state> streams_;
    std::uint64_t datagrams_total_ = 0;
    std::uint64_t malformed_total_ = 0;
    std::uint64_t malformed_unattributed_ = 0;
    std::uint64_t sender_restarts_total_ = 0;
    std::string last_error_;
};

}  // namespace paq::io
