// Decoders of the AR4JA LDPC codes (dsp/ldpc.hpp), the CPU reference:
//
//   min_sum      layered normalized min-sum: the checks one after another, each updating the
//                bits' beliefs at once (about half the iterations of flooding); each check's
//                messages the smallest two magnitudes of the others times `normalization`
//   sum_product  flooding belief propagation with the exact check rule (tanh), in double:
//                the yardstick the min-sum decoder is measured against
//
// min_sum computes in one of two number formats (decoder_config::format): binary16, the
// receivers' (both backends: the GPU's kernel computes in half precision, two codewords a
// thread block in the halves of binary16 pairs, and the CPU's rounds every sum and product
// to binary16 as the GPU does, so that both take the same iterations and decisions on every
// codeword); or binary64, the precision yardstick binary16 is measured against
// (docs/BER-RESULTS.md, "LDPC decoders").
//
// Both stop as soon as the hard decisions satisfy every check (`converged`), or after
// `max_iterations`. Input: one LLR per transmitted bit, log P(bit 1) / P(bit 0) in nats as
// the detectors give them (dsp/batch.hpp: positive means 1); 0 is an erasure (a bit that was
// not received), and the punctured bits start as erasures. A bit whose belief is still 0 is
// undecided, and a check that holds one fails: erasures the decoder could not resolve never
// make a codeword. A word of erasures only (every LLR 0 or NaN) is not iterated: it fails
// every check after 0 iterations and decodes to zeros.
#pragma once

#include "dsp/ldpc.hpp"

#include <cstdint>
#include <span>
#include <vector>

namespace paq::dsp::ldpc {

enum class decoder_kind : std::uint8_t { min_sum, sum_product };
enum class number_format : std::uint8_t { binary16, binary64 };
inline constexpr name_table<number_format, 2> number_format_names{{{"binary16", number_format::binary16}, {"binary64", number_format::binary64}}};

/// x rounded to the nearest IEEE 754 binary16 value (ties to even), as a float; |x| < 65504.
/// A sum or product of two binary16 values computed in float and rounded so is the one binary16
/// arithmetic gives (float's 24 bits are at least twice binary16's 11 plus 2: rounding twice
/// is rounding once).
[[nodiscard]] float round_to_binary16(float x) noexcept;

struct decoder_config {
    decoder_kind kind = decoder_kind::min_sum;
    int max_iterations = 50;
    /// min_sum: the check messages' scale (normalized min-sum; 1 is plain min-sum). 0.7: the
    /// lowest Eb/N0 at FER 1e-3 of 0.6 .. 0.85 on k = 4096 rate 2/3 and k = 1024 rate 1/2, on
    /// both decoders (docs/BER-RESULTS.md, "LDPC decoders").
    float normalization = 0.7f;
    /// min_sum: the beliefs' and messages' number format (the header's comment).
    number_format format = number_format::binary16;
};

struct decode_result {
    bool converged = false;   ///< every check holds for the decisions
    int iterations = 0;       ///< iterations run (the one that converged included)
    std::size_t failed_checks = 0;  ///< checks that fail for the final decisions (0 if converged)
};

/// One decoder per thread (it keeps its messages between calls, sized once).
class decoder {
public:
    decoder(code c, decoder_config cfg = {});

    [[nodiscard]] const code_params& params() const noexcept { return h_.p; }
    [[nodiscard]] const decoder_config& config() const noexcept { return cfg_; }

    /// Decodes the n transmitted bits' LLRs into the k information bits (one per byte, 0 or
    /// 1) and, if `word` is not empty, every bit of the codeword (n_full, punctured included).
    /// std::invalid_argument for sizes other than n, k and n_full (or 0).
    decode_result decode(std::span<const float> llr, std::span<std::uint8_t> info, std::span<std::uint8_t> word = {});
    /// The n transmitted bits' posterior LLRs after the last decode, in the detectors' sign
    /// (positive means 1): the beliefs the decisions were made from (min_sum: after its last
    /// check; sum_product: as its last decisions read them), 0 for every bit after a word of
    /// erasures only. std::invalid_argument for a size other than n.
    void posterior(std::span<float> llr) const;
    /// The same less each bit's input as the decoder took it (limited to +-30 and, in binary16,
    /// rounded; NaN as 0): what the code alone says of each bit, which iterative detection
    /// takes back as the bit's belief. std::invalid_argument for a size other than n.
    void extrinsic(std::span<float> llr) const;

private:
    template <number_format F>
    decode_result min_sum(std::span<std::uint8_t> hard);
    decode_result sum_product(std::span<std::uint8_t> hard);
    /// The checks whose bits' signs do not satisfy them or that hold an undecided bit (belief 0).
    [[nodiscard]] std::size_t failed(std::span<const double> belief) const;
    /// The decisions from the beliefs after `iteration`, and whether they satisfy every check.
    bool decided(std::span<const double> belief, std::span<std::uint8_t> hard, int iteration, decode_result& res) const;
    /// posterior() (less_input false) and extrinsic() (true); `what` names the caller in errors.
    void beliefs_out(std::span<float> llr, bool less_input, const char* what) const;

    const parity_check& h_;
    decoder_config cfg_;
    std::vector<std::uint32_t> row_start_;  ///< edges of row r: [row_start_[r], row_start_[r + 1])
    std::vector<std::uint32_t> edge_col_;   ///< each edge's column
    std::vector<double> channel_;           ///< each bit's channel LLR, log P(0) / P(1)
    std::vector<double> belief_;            ///< each bit's posterior, log P(0) / P(1)
    std::vector<double> msg_;               ///< check-to-bit messages, per edge
    std::vector<double> scratch_;           ///< one row's bit-to-check messages
    std::vector<double> edge_scratch_;      ///< sum_product: every edge's bit-to-check message
    std::vector<std::uint8_t> hard_;        ///< the decisions, n_full bits
};

}  // namespace paq::dsp::ldpc
