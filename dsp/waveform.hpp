// The iNET / SOQPSK-TG waveform constants: the modulation of IRIG 106 chapter 2, and the packet
// of J. T. Ravert, "GPU Implementation of Data-Aided Equalizers" (M.S. thesis, BYU, 2017). Its
// ASM is 64 bits, though the thesis prints 17 hex digits and L_ASM = 136, against its own
// packet length of 12672 samples. Normative: do not make these configurable.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace paq::waveform {

inline constexpr int samples_per_bit = 2;

inline constexpr std::size_t preamble_bits = 128;  ///< 0xCD98 sent 8 times
inline constexpr std::size_t asm_bits = 64;        ///< 0x034776C7272895B0
inline constexpr std::size_t data_bits = 6144;
inline constexpr std::size_t packet_bits = preamble_bits + asm_bits + data_bits;  // 6336
inline constexpr std::size_t known_bits = preamble_bits + asm_bits;                // 192

inline constexpr std::size_t L_q = 32;                                   ///< one preamble period, samples
inline constexpr std::size_t L_p = preamble_bits * samples_per_bit;      ///< 256
inline constexpr std::size_t L_asm = asm_bits * samples_per_bit;         ///< 128
inline constexpr std::size_t L_d = data_bits * samples_per_bit;          ///< 12288
inline constexpr std::size_t L_pkt = packet_bits * samples_per_bit;      ///< 12672
static_assert(L_pkt == 12672);

inline constexpr std::uint16_t preamble_word = 0xCD98;
inline constexpr std::uint64_t asm_word = 0x034776C7272895B0ull;

inline constexpr double default_bit_rate_hz = 10.3125e6;
inline constexpr double default_sample_rate_hz = default_bit_rate_hz * samples_per_bit;  // 20.625 MS/s
inline constexpr std::size_t default_batch_samples = 39'321'600;  ///< 1.9065 s at 20.625 MS/s

/// SOQPSK-TG frequency pulse parameters (IRIG 106 chapter 2).
inline constexpr double tg_rho = 0.7;
inline constexpr double tg_B = 1.25;
inline constexpr double tg_T1 = 1.5;
inline constexpr double tg_T2 = 0.5;
inline constexpr int tg_pulse_bits = 8;  ///< 2*(T1+T2)

/// The 192 known bits (preamble then ASM), MSB first, 0/1.
std::array<std::uint8_t, known_bits> known_packet_bits();

}  // namespace paq::waveform
