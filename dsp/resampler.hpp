// Arbitrary-ratio polyphase resampler to 2 samples per bit, from 2 .. 6.4 samples per bit.
//
// The chain works at exactly 2 samples per bit. An input at fs_in is brought there by one
// windowed-sinc low-pass evaluated at fractional input positions:
//
//   ratio R = fs_in / (2 x bit_rate)       input samples per output sample, 0.99 .. 3.2
//   y(m)    = sum_{k=0}^{N-1} c_k(f) x(i - N/2 + 1 + k),   position t(m) = i + f, 0 <= f < 1
//
// DESIGN, in the output's terms (bit rate Rb, output rate 2 Rb; docs/SIGNAL-CHAIN.md,
// "Resampling to 2 samples per bit", has the measurements; test_resampler prints them):
//   passband  |f| <= 0.75 Rb   ripple measured -0.004 .. +0.003 dB
//   stopband  |f| >= 1.25 Rb   designed A = 70 dB (Kaiser beta = 0.1102 (A - 8.7) = 6.755),
//                              measured 69.3 .. 71.9 dB (images at f + k fs_in included)
//   cutoff    1.0 Rb (-6.0 dB; the transition is symmetric about the output's Nyquist)
//   prototype h(tau) = sinc(tau / R) w(tau / (N/2)), tau in input samples, w = Kaiser(beta)
//   taps      N = 2 ceil((1 + (A - 7.95) / (14.36 dF)) / 2), dF = 0.5 Rb / fs_in = 0.25 / R:
//             N = 20 at R = 1, 22 at 1.2121, 28 at 1.4895, 36 at 2.0, 54 at 2.9789, 58 at 3.2
//   phases    P = 256, linear interpolation between adjacent phases
//   error     SOQPSK-TG through it: -72 .. -75 dB of the signal power (noise at Eb/N0 11 dB is
//             -8 dB); white noise: -0.2 dB against a brick wall at +-Rb
// TABLE LAYOUT (host-computed once, float):
//   coef[(p * N + k) * 2 + 0] = tap(p, k)          p = 0 .. P-1 (phase), k = 0 .. N-1 (tap)
//   coef[(p * N + k) * 2 + 1] = slope(p, k)        = (float)(h(p+1, k) - h(p, k)), in double
//   h(p, k) = h_n(p / P - (k - N/2 + 1)), each row p = 0 .. P normalized to sum 1 (in double;
//   row P is row 0 shifted by one tap), tap(p, k) = (float)h(p, k).
//
// FIXED-POINT RULE (identical on CPU and GPU): positions are 32.32 unsigned input samples,
// pos(m) = first_pos + m * step (uint64, wrapping: only differences matter, see position_of),
//   i  = pos >> 32                         input sample at or left of the position
//   p  = (pos >> 24) & 0xFF                phase (top 8 fraction bits)
//   mu = (float)(pos & 0xFFFFFF) * 2^-24   fraction between phases p and p+1 (exact in float)
//
// ARITHMETIC ORDER (float, round to nearest, no fused multiply-add: this file is compiled with
// -ffp-contract=off; a CUDA kernel uses __fmul_rn/__fadd_rn to get the same bits):
//   row   = coef + p * N * 2
//   c_k   = tap(p, k) + mu * slope(p, k)                 (product rounded, then the sum)
//   acc_re = 0; acc_im = 0; for k = 0 .. N-1 ascending:
//     acc_re = acc_re + c_k * re(x(i - N/2 + 1 + k));  acc_im likewise with im
// Input samples outside [0, in_len) read as zero. A non-finite input sample makes every output
// that reads it non-finite (the packet chain counts those; clock_correct_packet counts inputs).
// Against resample_reference (the prototype at the exact position, in double) the table's
// linear interpolation and float rounding together cost -98 dB of the signal on SOQPSK-TG
// (worst ratio measured) and -90 dBc on a 0.75 Rb tone at R = 3.2, where only 5 fractions
// occur, all near mid-phase; at R = 2 (fraction 0) what is left is float rounding, -142 dB.
#pragma once

#include "dsp/types.hpp"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace paq::dsp {

using fixed_pos = std::uint64_t;  ///< 32.32 input samples
inline constexpr int fixed_frac_bits = 32;

/// Edges in the output's terms (bit rate Rb), and the stopband attenuation.
struct resampler_spec {
    double passband_edge_rb = 0.75;  ///< 0 < x < stopband_edge_rb
    double stopband_edge_rb = 1.25;  ///< x > passband_edge_rb, x + passband_edge_rb = 2 keeps the cutoff at Rb
    double stopband_atten_db = 70.0; ///< 20 .. 120
};

inline constexpr double resampler_min_ratio = 0.99;  ///< clock correction near 1 and up
inline constexpr double resampler_max_ratio = 3.2;   ///< 6.4 x the bit rate
inline constexpr int resampler_phase_bits = 8;
inline constexpr int resampler_phases = 1 << resampler_phase_bits;  ///< P = 256

struct resampler_design {
    double ratio = 1.0;       ///< input samples per output sample
    resampler_spec spec;
    double kaiser_beta = 0.0;
    int taps = 0;             ///< N, even
    int phases = resampler_phases;
    std::vector<float> coef;  ///< {tap, slope} pairs, layout in the header comment: 2 P N floats

    /// Taps reach this far each side of a position, in input samples: output at position t
    /// reads x(floor(t) - N/2 + 1) .. x(floor(t) + N/2).
    [[nodiscard]] int filter_half_span() const noexcept { return taps / 2; }
    /// The prototype's exact taps at fraction f (0 <= f < 1) in double, normalized to sum 1:
    /// what the table approximates (resample_reference uses it).
    void exact_taps(double f, double* out) const;
};

/// Designs the filter for `ratio` = input samples per output sample = fs_in / (2 bit_rate).
/// Throws std::invalid_argument naming the ratio and the allowed range 0.99 .. 3.2.
[[nodiscard]] resampler_design design_resampler(double ratio, const resampler_spec& spec = {});

/// The same from the rates; the error names both rates and the allowed input-rate range.
[[nodiscard]] resampler_design design_resampler_for_rates(double input_rate_hz, double bit_rate_hz,
                                                          const resampler_spec& spec = {});

/// round(ratio x 2^32). The effective ratio is step / 2^32 (within 2^-33 of ratio: 1e-4 ppm).
/// Throws std::invalid_argument unless 0 < ratio < 2^31.
[[nodiscard]] fixed_pos to_fixed_step(double ratio);

/// Position of output m relative to input sample `origin`: m step - origin 2^32 in wrapping
/// uint64 arithmetic, exact whenever the true value is in [0, 2^32) input samples. A batch
/// that starts at input sample `origin` resamples from first_pos = position_of(m0, step, origin).
[[nodiscard]] constexpr fixed_pos position_of(std::uint64_t m, fixed_pos step, std::uint64_t origin) noexcept
{
    return m * step - (origin << fixed_frac_bits);
}

/// y(m), m = 0 .. n_out-1, at positions first_pos + m step (float arithmetic of the header).
void resample(const cf32* in, std::size_t in_len, fixed_pos first_pos, fixed_pos step, cf32* out, std::size_t n_out,
              const resampler_design& d);

/// The same in double with the exact prototype taps (no phase table): the tests' reference.
void resample_reference(const cf32* in, std::size_t in_len, fixed_pos first_pos, fixed_pos step, cf64* out,
                        std::size_t n_out, const resampler_design& d);

/// One output at input position i + frac / 2^32 (i may be negative), float arithmetic of the
/// header, inputs outside [0, in_len) as zero. resample() and the clock correction use it.
[[nodiscard]] cf32 resample_at(const cf32* in, std::size_t in_len, long long i, std::uint32_t frac,
                               const resampler_design& d) noexcept;

/// Output indices [begin, end).
struct index_range {
    std::uint64_t begin = 0;
    std::uint64_t end = 0;
    [[nodiscard]] std::uint64_t size() const noexcept { return end > begin ? end - begin : 0; }
};

struct output_ranges {
    index_range supported;   ///< m whose filter reads only inputs in [in_begin, in_end)
    index_range positioned;  ///< m whose position lies in [in_begin, in_end)
};

/// Which outputs m >= 0 (positions first_pos + m step, same origin as in_begin/in_end) have
/// full filter support inside the input range [in_begin, in_end), and which are positioned
/// in it. Positions must stay below 2^32 input samples. Empty ranges have begin == end.
[[nodiscard]] output_ranges output_range(fixed_pos first_pos, fixed_pos step, std::uint64_t in_begin,
                                         std::uint64_t in_end, const resampler_design& d);

}  // namespace paq::dsp
