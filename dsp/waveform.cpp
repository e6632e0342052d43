#include "dsp/waveform.hpp"

namespace paq::waveform {

std::array<std::uint8_t, known_bits> known_packet_bits()
{
    std::array<std::uint8_t, known_bits> bits{};
    std::size_t i = 0;
    for (std::size_t rep = 0; rep < 8; ++rep) {
        for (int b = 15; b >= 0; --b) {
            bits[i++] = static_cast<std::uint8_t>((preamble_word >> b) & 1u);
        }
    }
    for (int b = 63; b >= 0; --b) {
        bits[i++] = static_cast<std::uint8_t>((asm_word >> b) & 1u);
    }
    return bits;
}

}  // namespace paq::waveform
