// The continuous coded stream of IRIG 106 chapter 2, Appendix 2-D, for the AR4JA codes whose
// codeword does not divide the 6144-bit data field (ar4ja-1024-4/5, n = 1280; ar4ja-4096-1/2,
// n = 8192; ar4ja-4096-4/5, n = 5120): codeword after codeword, each behind its attached sync
// marker and each randomized, the stream cut into the packets' data fields one after another.
//
//   frame f:  [ marker (64 or 256 bits) | codeword f XOR the randomizer (n bits) ]
//   stream:   frame 0, frame 1, ...  (no gaps)
//   packets:  data field j = stream bits [6144 j + offset, 6144 (j + 1) + offset)
//
// - The marker (Appendix 2-D): with A = 0xFCB88938D8D76A4F and its complement
//   Abar = 0x034776C7272895B0, k = 1024 codes send A (64 bits), k = 4096 codes A A Abar A (256
//   bits), first bit the most significant.
// - The randomizer (CCSDS 131.0-B, "pseudo-randomizer"): the sequence of h(x) = x^8 + x^7 +
//   x^5 + x^3 + 1 from the all-ones state, period 255 (its first bytes FF 48 0E C0 9A 0D 70 BC),
//   added modulo 2 to the codeword's n bits and restarted at every marker; the marker itself
//   is sent as it is.
// - The codeword is the transmitted one of dsp/ldpc.hpp (information bits first, the last M
//   parity bits punctured), as in the codeword-aligned framing (dsp/fec.hpp).
// - offset: where the transmitter's stream stood when the first data field began (a link that
//   comes up mid-frame); a receiver finds the frames by their markers.
//
// The information bits of consecutive codewords form one continuous stream (the PN pattern of
// a test link), as in the codeword-aligned framing.
#pragma once

#include "dsp/ldpc.hpp"
#include "dsp/pn.hpp"

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace paq::dsp {

/// How the continuous stream of a code is laid out.
struct stream_layout {
    ldpc::code code{};
    int marker_bits = 0;  ///< 64 (k = 1024) or 256 (k = 4096)
    int n = 0;            ///< transmitted codeword bits
    int k = 0;            ///< information bits per codeword
    [[nodiscard]] constexpr int frame_bits() const noexcept { return marker_bits + n; }
};

/// The layout of code `c`'s continuous stream: the codes whose n does not divide the data
/// field (the others are codeword-aligned, dsp::framing_for); nullopt for those.
[[nodiscard]] std::optional<stream_layout> stream_layout_for(ldpc::code c) noexcept;

/// The attached sync marker of code `c`'s stream, one bit per byte (0 or 1), first sent first:
/// 64 bits for k = 1024, 256 for k = 4096.
[[nodiscard]] std::span<const std::uint8_t> sync_marker_bits(ldpc::code c) noexcept;

/// The randomizer's period: its 255 bits, one per byte (0 or 1), first applied first.
[[nodiscard]] std::span<const std::uint8_t> randomizer_bits() noexcept;

/// The transmitter's side (paq-sim --ldpc): fills data fields with the continuous stream,
/// drawing each codeword's information bits from `pn` as its frame begins.
class stream_encoder {
public:
    /// std::invalid_argument for a code without a continuous layout, or an offset outside
    /// [0, frame_bits).
    stream_encoder(ldpc::code c, int offset);
    [[nodiscard]] const stream_layout& layout() const noexcept { return layout_; }
    /// The next data field: 6144 bits (one per byte), std::invalid_argument for another size.
    void next_data_field(pn_generator& pn, std::span<std::uint8_t> data_bits);

private:
    void next_frame(pn_generator& pn);

    stream_layout layout_;
    std::vector<std::uint8_t> info_, frame_;
    std::size_t pos_ = 0;  ///< the next bit of frame_ to send
    bool started_ = false;
};

}  // namespace paq::dsp
