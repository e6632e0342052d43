#include "dsp/ber.hpp"

#include "dsp/waveform.hpp"

#include <cmath>

namespace paq::dsp {

stream_ber_counter::stream_ber_counter(pn_pattern pattern, double packet_spacing_samples, std::size_t bits_per_packet)
    : checker_(pattern), spacing_(packet_spacing_samples), bits_per_packet_(bits_per_packet), learn_(packet_spacing_samples <= 0.0)
{
    if (learn_) spacing_ = 0.0;
}

std::uint64_t stream_ber_counter::note_packet(std::uint64_t start_sample)
{
    if (last_start_ && learn_) {
        const double d = static_cast<double>(start_sample - *last_start_);
        constexpr double l = static_cast<double>(waveform::L_pkt);
        if (d >= 0.99 * l && d <= 3.21 * l && (spacing_ == 0.0 || d < spacing_)) spacing_ = d;
    }
    std::uint64_t missed = 0;
    if (last_start_ && spacing_ > 0.0) missed = static_cast<std::uint64_t>(packets_apart(*last_start_, start_sample, spacing_) - 1);
    skipped_ += missed;
    last_start_ = start_sample;
    ++packets_;
    return missed;
}

void stream_ber_counter::add_packet(std::uint64_t start_sample, const std::uint8_t* packed_bits)
{
    if (const auto missed = note_packet(start_sample)) checker_.skip(missed * bits_per_packet_);
    checker_.push_packed(packed_bits, bits_per_packet_);
}

void stream_ber_counter::add_frames(std::uint64_t start_sample, std::int64_t first, int count, const std::uint8_t* packed_bits, std::size_t k)
{
    (void)note_packet(start_sample);
    if (count <= 0) return;
    if (next_frame_ && first > *next_frame_) checker_.skip(static_cast<std::uint64_t>(first - *next_frame_) * k);
    checker_.push_packed(packed_bits, static_cast<std::size_t>(count) * k);
    next_frame_ = first + count;
}

double stream_ber_counter::ber() const noexcept
{
    const auto c = checker_.get();
    return c.bits_checked ? static_cast<double>(c.bit_errors) / static_cast<double>(c.bits_checked) : 0.0;
}

double oqpsk_theory_ber(double ebn0_db) noexcept
{
    const double ebn0 = std::pow(10.0, ebn0_db / 10.0);
    return 0.5 * std::erfc(std::sqrt(ebn0));  // Q(sqrt(2x)) = erfc(sqrt(x)) / 2
}

}  // namespace paq::dsp
