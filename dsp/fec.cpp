#include "dsp/fec.hpp"

#include "dsp/decision_quality.hpp"
#include "dsp/fec_stream.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

namespace paq::dsp {

fec_code parse_fec(std::string_view text) { return parse_named(fec_names, text, "fec"); }

std::optional<fec_framing> framing_for(ldpc::code c) noexcept
{
    const auto p = ldpc::params(c);
    if (p.n <= 0) return std::nullopt;
    if (waveform::data_bits % static_cast<std::size_t>(p.n) == 0) {
        return fec_framing{c, p.n, p.k, static_cast<int>(waveform::data_bits / static_cast<std::size_t>(p.n)), 0};
    }
    const auto l = stream_layout_for(c);
    if (!l) return std::nullopt;
    // Frames of L bits end in a 6144-bit field at most ceil(6144 / L) times.
    const int most = static_cast<int>((waveform::data_bits + static_cast<std::size_t>(l->frame_bits()) - 1) / static_cast<std::size_t>(l->frame_bits()));
    return fec_framing{c, p.n, p.k, most, l->marker_bits};
}

std::optional<fec_framing> framing_for(fec_code f) noexcept
{
    const auto c = ldpc_code_of(f);
    return c ? framing_for(*c) : std::nullopt;
}

std::optional<fec_framing> aligned_framing_for(fec_code f) noexcept
{
    const auto fr = framing_for(f);
    if (!fr || fr->continuous()) return std::nullopt;
    return fr;
}

void encode_data_field(const fec_framing& framing, pn_generator& pn, std::span<std::uint8_t> data_bits)
{
    if (data_bits.size() != waveform::data_bits) {
        throw std::invalid_argument("encode_data_field: " + std::to_string(data_bits.size()) + " bits (expected 6144)");
    }
    const auto& enc = ldpc::encoder::get(framing.code);
    std::vector<std::uint8_t> info(static_cast<std::size_t>(framing.k));
    for (int w = 0; w < framing.codewords; ++w) {
        pn.fill(info);
        enc.encode(info, data_bits.subspan(static_cast<std::size_t>(w) * static_cast<std::size_t>(framing.n),
                                           static_cast<std::size_t>(framing.n)));
    }
}

void sxs_llrs(std::span<const double> stat, std::span<float> llr) noexcept
{
    sxs_llrs(stat, decision_quality::fit_of(stat.data(), std::min(stat.size(), llr.size())), llr);
}

void sxs_llrs(std::span<const double> stat, const decision_quality::fit& f, std::span<float> llr) noexcept
{
    namespace dq = decision_quality;
    const std::size_t n = std::min(stat.size(), llr.size());
    for (std::size_t i = 0; i < n; ++i) llr[i] = static_cast<float>(dq::llr(f.model[dq::context_at(stat.data(), n, i)], stat[i]));
}

stream_decoder::stream_decoder(const fec_framing& framing, int max_iterations)
    : framing_(framing),
      decoder_(framing.code, ldpc::decoder_config{ldpc::decoder_kind::min_sum, max_iterations}),
      info_(static_cast<std::size_t>(framing.k)),
      word_(static_cast<std::size_t>(decoder_.params().n_full))
{
    if (max_iterations < 1 || max_iterations > max_fec_iterations) {
        throw std::invalid_argument("fec iterations " + std::to_string(max_iterations) + " (allowed: 1 .. " +
                                    std::to_string(max_fec_iterations) + ")");
    }
}

void stream_decoder::decode(std::span<const float> llr, std::uint8_t* info_packed, codeword_result* results)
{
    if (llr.size() != waveform::data_bits) {
        throw std::invalid_argument("stream_decoder: " + std::to_string(llr.size()) + " LLRs (expected 6144)");
    }
    const auto n = static_cast<std::size_t>(framing_.n);
    const auto k_bytes = static_cast<std::size_t>(framing_.k / 8);
    for (int w = 0; w < framing_.codewords; ++w) {
        decode_one(llr.subspan(static_cast<std::size_t>(w) * n, n), info_packed + static_cast<std::size_t>(w) * k_bytes, results[w]);
    }
}

void stream_decoder::decode_one(std::span<const float> llr, std::uint8_t* info_packed, codeword_result& result)
{
    const auto n = static_cast<std::size_t>(framing_.n);
    if (llr.size() != n) throw std::invalid_argument("stream_decoder: " + std::to_string(llr.size()) + " LLRs (expected " + std::to_string(n) + ")");
    const auto r = decoder_.decode(llr, info_, word_);
    unsigned errors = 0;
    for (std::size_t i = 0; i < n; ++i) errors += static_cast<unsigned>((llr[i] > 0.0f) != (word_[i] != 0));
    result = {static_cast<std::uint8_t>(std::min(r.iterations, 255)), static_cast<std::uint8_t>(r.converged ? 1 : 0),
              static_cast<std::uint16_t>(std::min(errors, 65535u))};
    const auto k = static_cast<std::size_t>(framing_.k);
    std::memset(info_packed, 0, k / 8);
    for (std::size_t i = 0; i < k; ++i) {
        if (info_[i]) info_packed[i / 8] = static_cast<std::uint8_t>(info_packed[i / 8] | (0x80u >> (i % 8)));
    }
}

}  // namespace paq::dsp
