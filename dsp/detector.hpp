// OQPSK symbol-by-symbol detector with a second-order PLL (SPEC 3, thesis 3.6, fig. 3.4).
// One decision sample per bit; even bits on the real axis, odd bits on the imaginary axis.
// Phase error, once per bit pair (k odd):
//   e(k) = a(k-1) Im{y(k-1)} - a(k) Re{y(k)}      (~ 2 sin(phase error) at unit amplitude)
// a = known bits over preamble + ASM (data-aided), decisions over the data.
#pragma once

#include "dsp/batch.hpp"
#include "dsp/types.hpp"
#include "dsp/waveform.hpp"

#include <cstdint>

namespace paq::dsp {

struct pll_gains {
    double k1 = 0.0;  ///< proportional
    double k2 = 0.0;  ///< integral
};

/// Loop gains for noise bandwidth * update period bn_t and damping zeta, phase-detector gain 2.
[[nodiscard]] pll_gains make_pll_gains(double bn_t, double zeta) noexcept;

/// Detects one packet: v[k] is the detection-filter output at bit k's decision instant,
/// k = 0 .. 6335. `acq` drives the loop over the known bits, `track` over the data.
/// Writes the 6144 data bits, MSB first, to bits_out (768 bytes).
path_stats detect_packet(const cf64* v, const pll_gains& acq, const pll_gains& track, std::uint8_t* bits_out) noexcept;

/// The same with a smoothed phase (receiver_config::phase_smoother; issue 12, phase noise):
///   forward: the loop above over the pairs, its phase before each pair kept (as float);
///   backward: the same loop from the last pair to the first, started on the forward loop's
///     final phase and negated frequency, decision-directed over the data and data-aided
///     over the known bits;
///   the decisions on the mean of the two phases at each pair (the backward one taken within
///     +-pi of the forward one).
/// The forward phase lags a moving phase by the loop's delay and the backward one leads it;
/// their mean cancels most of that lag and halves the noise. known_bit_errors are the forward
/// pass's, the BEP estimate is over the final decisions. `scratch` holds 3168 floats.
path_stats detect_packet_smoothed(const cf64* v, const pll_gains& acq, const pll_gains& track, std::uint8_t* bits_out,
                                  float* scratch) noexcept;

/// Phase pairs of a packet: the length detect_packet_smoothed's scratch needs.
inline constexpr std::size_t phase_pairs = waveform::packet_bits / 2;

}  // namespace paq::dsp
