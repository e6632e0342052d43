// SOQPSK-TG modulator (IRIG 106 chapter 2): precoder, frequency pulse, continuous-phase
// modulation at 2 samples per bit. The modulator is the single source of every ideal waveform
// in the project: the simulator transmits with it and the receiver builds its references with
// it.
#pragma once

#include "dsp/types.hpp"

#include <array>
#include <cstdint>
#include <span>
#include <vector>

namespace paq::dsp {

/// SOQPSK-TG frequency pulse g(t), t in bit periods, not normalized (A = 1).
[[nodiscard]] double tg_frequency_pulse_unnormalized(double t_bits) noexcept;

/// Phase pulse q(t) = integral of g, normalized so q(+inf) = 1/2, at the 17 half-bit points
/// t = -4, -3.5, ..., 4 (index (t + 4) * 2). Computed once by numerical integration.
[[nodiscard]] const std::array<double, 17>& tg_phase_pulse_half_bits() noexcept;

/// Streaming SOQPSK-TG modulator.
///
/// Timing convention: each pushed bit k yields two samples, m = 2k and m = 2k + 1, at times
/// t = k - 4 and k - 3.5 bit periods. So output sample m = 2k + modulator_delay_samples is the
/// centre of bit k's frequency pulse. Phase is continuous across calls.
class soqpsk_modulator {
public:
    static constexpr std::size_t delay_samples = 8;  ///< half the 8-bit pulse, in samples

    /// \param initial_phase_rad carrier phase at the first sample, any value
    explicit soqpsk_modulator(double initial_phase_rad = 0.0) noexcept;

    /// Modulates bits (0/1) and appends 2 samples per bit to out.
    void modulate(std::span<const std::uint8_t> bits, std::vector<cf64>& out);

    /// Number of bits pushed so far (the global bit index of the next bit).
    [[nodiscard]] std::uint64_t bit_index() const noexcept { return k_; }

private:
    double phase0_;
    std::uint64_t k_ = 0;
    std::uint8_t b1_ = 0, b2_ = 0;   ///< b_{k-1}, b_{k-2}
    int full_quarter_turns_ = 0;     ///< sum of alpha of the completed pulses, mod 4
    std::array<int, 9> alpha_{};     ///< alpha_{k-8} .. alpha_k (ring, index k mod 9)
};

/// Convenience: modulate a whole bit vector from a fresh modulator.
[[nodiscard]] std::vector<cf64> modulate_bits(std::span<const std::uint8_t> bits, double initial_phase_rad = 0.0);

/// R_x(k) = E[x(n + k) x*(n)] of SOQPSK-TG at 2 samples/bit, k = 0 .. 63 (measured once
/// on 2^17 random bits, fixed seed).
[[nodiscard]] const std::vector<cf64>& soqpsk_autocorrelation();

/// R_x(k) at a lag of either sign (R_x(-k) = R_x(k)*); 0 beyond the lags measured.
[[nodiscard]] cf64 soqpsk_autocorrelation_at(int k);

/// Power of SOQPSK-TG after the channel h: sum_ab h_a h_b* R_x(b - a).
[[nodiscard]] double received_power(const cf64* h, std::size_t n);

}  // namespace paq::dsp
