// Bit-error counting per output stream: the data fields of consecutive
// packets form one continuous PN sequence; a PN checker synchronises to it and counts errors.
// Packets the receiver did not find are skipped by their known length, so the count stays
// exact across a missed packet.
#pragma once

#include "dsp/batch.hpp"
#include "dsp/pn.hpp"
#include "dsp/waveform.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>

namespace paq::dsp {

/// How many packet places the packet starting at `to` is after the one starting at `from`
/// (start samples, `spacing` samples between packet starts): their distance in spacings,
/// rounded (sample clocks drift a little), at least 1. One more than the packets missed
/// between them.
[[nodiscard]] inline std::int64_t packets_apart(std::uint64_t from, std::uint64_t to, double spacing) noexcept
{
    return std::max<std::int64_t>(1, std::llround((static_cast<double>(to) - static_cast<double>(from)) / spacing));
}

class stream_ber_counter {
public:
    /// \param packet_spacing_samples input samples between packet starts (L_pkt at 2 samples
    /// per bit, L_pkt x the input ratio otherwise); 0: learned from the stream, as the
    /// smallest start-to-start distance within L_pkt x [0.99, 3.21] seen so far (a tester that
    /// does not know the receiver's input rate).
    /// bits_per_packet: the bits each packet adds (6144, or a coded link's information bits
    /// per packet), skipped as many per missed packet.
    explicit stream_ber_counter(pn_pattern pattern, double packet_spacing_samples = static_cast<double>(waveform::L_pkt),
                                std::size_t bits_per_packet = waveform::data_bits);

    /// Adds one packet's bits_per_packet data bits (packed, MSB first), in stream order. start_sample
    /// places the packet: a jump of more than one packet spacing means packets were missed.
    /// The bits are checked 64 at a time (pn_checker::push_packed).
    void add_packet(std::uint64_t start_sample, const std::uint8_t* packed_bits);
    /// A packet of a continuous stream (dsp/fec_stream.hpp), in stream order: its decoded
    /// frames, `count` of k information bits (packed MSB first, k / 8 bytes each) from frame
    /// number `first`. A jump in the frames' numbers skips the missing frames' bits; the
    /// packet counts as add_packet's do.
    void add_frames(std::uint64_t start_sample, std::int64_t first, int count, const std::uint8_t* packed_bits, std::size_t k);

    [[nodiscard]] pn_checker::counts counts() const noexcept { return checker_.get(); }
    [[nodiscard]] std::uint64_t packets() const noexcept { return packets_; }
    [[nodiscard]] std::uint64_t packets_skipped() const noexcept { return skipped_; }
    [[nodiscard]] double ber() const noexcept;

private:
    /// Counts a packet at `start_sample`; returns the packets missed before it.
    std::uint64_t note_packet(std::uint64_t start_sample);

    pn_checker checker_;
    std::optional<std::uint64_t> last_start_;
    double spacing_;   ///< samples between packet starts; 0 until learned
    std::size_t bits_per_packet_;
    bool learn_;
    std::uint64_t packets_ = 0;
    std::uint64_t skipped_ = 0;
    std::optional<std::int64_t> next_frame_;
};

/// Q(sqrt(2 Eb/N0)): the OQPSK bit error probability in AWGN.
[[nodiscard]] double oqpsk_theory_ber(double ebn0_db) noexcept;

}  // namespace paq::dsp
