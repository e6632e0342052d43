// Forward error correction of the packets' data fields (receiver.fec): which LDPC code the
// link carries, how its codewords sit in the data fields, and the decoding of one output
// stream's data field from its soft decisions; the codes themselves are dsp/ldpc.hpp, the decoder dsp/ldpc_decoder.hpp.
//
// Framing (docs/BITSTREAM.md, "Coded data fields"): codeword-aligned where the codeword
// divides the data field, else the continuous stream (dsp/fec_stream.hpp). A data field of 6144 bits
// holds 6144 / n whole codewords, one after another, each the transmitted codeword of the
// CCSDS 131.0-B AR4JA code (its information bits first, then the parity, the last M parity bits
// punctured), with no sync marker and no randomizer: the packet's own preamble and ASM mark
// where each codeword starts, so a lost, truncated or skipped packet takes its codewords with
// it and never shifts the next packet's. The information bits of consecutive codewords form
// one continuous stream (the PN pattern of a test link). Three codes divide 6144:
//   ar4ja-1024-1/2  n = 2048  3 codewords, 3072 information bits per packet
//   ar4ja-1024-2/3  n = 1536  4 codewords, 4096 information bits per packet
//   ar4ja-4096-2/3  n = 6144  1 codeword,  4096 information bits per packet
// The other three (n = 1280, 8192, 5120) are sent as the standard's continuous stream, each
// codeword behind its attached sync marker and randomized, across the data fields: both
// backends find and decode its frames (dsp::stream_deframer; on the GPU gpu/fec_stream.cu
// gathers them), the stream engine joins each batch's frames to the batch before's
// (dsp::stream_stitcher).
#pragma once

#include "dsp/ldpc.hpp"
#include "dsp/ldpc_decoder.hpp"
#include "dsp/names.hpp"
#include "dsp/pn.hpp"
#include "dsp/waveform.hpp"

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace paq::dsp {

/// receiver.fec: none, or one of the six AR4JA codes (the names are ldpc::code_names').
enum class fec_code : std::uint8_t { none, k1024_r1_2, k1024_r2_3, k1024_r4_5, k4096_r1_2, k4096_r2_3, k4096_r4_5 };
inline constexpr name_table<fec_code, 7> fec_names = [] {
    name_table<fec_code, 7> t{};
    t[0] = {"none", fec_code::none};
    for (std::size_t i = 0; i < ldpc::code_names.size(); ++i) {
        t[i + 1] = {ldpc::code_names[i].name, static_cast<fec_code>(static_cast<int>(ldpc::code_names[i].value) + 1)};
    }
    return t;
}();
[[nodiscard]] constexpr std::string_view to_string(fec_code f) noexcept { return name_of(fec_names, f); }
/// "none" or a code name; anything else throws std::invalid_argument naming the allowed ones.
[[nodiscard]] fec_code parse_fec(std::string_view text);
/// The code of `f`; nullopt for none.
[[nodiscard]] constexpr std::optional<ldpc::code> ldpc_code_of(fec_code f) noexcept
{
    if (f == fec_code::none) return std::nullopt;
    return static_cast<ldpc::code>(static_cast<int>(f) - 1);
}

/// How a code's codewords fill the data fields.
struct fec_framing {
    ldpc::code code{};
    int n = 0;              ///< transmitted bits per codeword
    int k = 0;              ///< information bits per codeword
    /// Codeword-aligned: the codewords of each data field. The continuous stream: the most
    /// whose last bit a data field can hold (a packet's decoded frames, batch_output::frames).
    int codewords = 0;
    /// The continuous stream's sync marker (dsp/fec_stream.hpp): 64 or 256 bits; 0 when the
    /// codewords are aligned to the data fields.
    int marker_bits = 0;
    [[nodiscard]] constexpr bool continuous() const noexcept { return marker_bits > 0; }
    [[nodiscard]] constexpr int info_bits() const noexcept { return codewords * k; }  ///< per packet (at most)
    [[nodiscard]] constexpr int info_bytes() const noexcept { return info_bits() / 8; }  ///< packed
};

/// The framing of `c`: codeword-aligned where n divides the data field, else the continuous
/// stream (dsp/fec_stream.hpp).
[[nodiscard]] std::optional<fec_framing> framing_for(ldpc::code c) noexcept;
/// receiver.fec's framing: nullopt for none.
[[nodiscard]] std::optional<fec_framing> framing_for(fec_code f) noexcept;
/// The codeword-aligned framing of `f` (what the decoded streams' datagrams carry); nullopt
/// for none and for a continuous stream.
[[nodiscard]] std::optional<fec_framing> aligned_framing_for(fec_code f) noexcept;


/// The most iterations receiver.fec_iterations allows (codeword_result keeps them in a byte).
inline constexpr int max_fec_iterations = 255;

/// One codeword's decoding.
struct codeword_result {
    std::uint8_t iterations = 0;  ///< run (the converging one included)
    std::uint8_t converged = 0;   ///< 1: every parity check holds for the decisions
    /// Received bits (the n transmitted) whose input LLR's sign differs from the decoded
    /// codeword's bit: the channel's errors where the codeword converged.
    std::uint16_t channel_errors = 0;
};

/// A data field's information bits from its codewords (the transmitter's side: paq-sim):
/// takes framing.info_bits() bits from `pn` and writes the 6144 coded bits (one per byte, 0 or 1).
void encode_data_field(const fec_framing& framing, pn_generator& pn, std::span<std::uint8_t> data_bits);

/// The symbol-by-symbol detector's soft decisions as LLRs in nats (positive: 1), from its
/// decision statistics `stat` over the data bits (the rail it decided each bit on, after its
/// carrier phase): each the LLR of the statistic with the interference its neighbours'
/// decisions predict taken out, under a model fitted to the stream per parity
/// (dsp/sxs_soft.hpp; 2 g x / s^2 where there is none). A statistic that is not finite makes
/// every LLR of the stream 0.
void sxs_llrs(std::span<const double> stat, std::span<float> llr) noexcept;

/// The same with the neighbours' interference predicted from the signs of `decisions` (an
/// earlier pass's LLRs, which err less than the statistics' own signs) instead of the
/// statistics' signs.
void sxs_llrs(std::span<const double> stat, std::span<const float> decisions, std::span<float> llr) noexcept;

/// The error rate of the decisions sign(stat) under the soft decisions' model: the model fitted
/// sxs_soft::posterior_passes times, each pass's neighbours decided by the pass before's LLRs,
/// and the bits' mean probability that the last LLRs give against each decision
/// (sxs_soft::decision_error_probability). The unequalized path's published BEP estimate is made
/// from it and the decision-quality model's (sxs_soft::unequalized_bep; docs/SIGNAL-CHAIN.md,
/// "Decision quality").
[[nodiscard]] double sxs_posterior_bep(std::span<const double> stat) noexcept;

/// Decodes the codewords of one stream's data field. One per thread (it keeps its decoder).
class stream_decoder {
public:
    stream_decoder(const fec_framing& framing, int max_iterations);
    [[nodiscard]] const fec_framing& framing() const noexcept { return framing_; }
    /// `llr`: the 6144 data bits' LLRs (nats, positive 1; 0 an erasure) of a codeword-aligned
    /// framing. Writes the packed information bits (MSB first, framing.info_bytes()) and one
    /// result per codeword.
    void decode(std::span<const float> llr, std::uint8_t* info_packed, codeword_result* results);
    /// One codeword: its n LLRs; writes its k information bits packed (k / 8 bytes) and its result.
    void decode_one(std::span<const float> llr, std::uint8_t* info_packed, codeword_result& result);

private:
    fec_framing framing_;
    ldpc::decoder decoder_;
    std::vector<std::uint8_t> info_, word_;
};

}  // namespace paq::dsp
