#include "dsp/fec.hpp"

#include "dsp/decision_quality.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

namespace paq::dsp {

fec_code parse_fec(std::string_view text) { return parse_named(fec_names, text, "fec"); }

std::optional<fec_framing> framing_for(ldpc::code c) noexcept
{
    const auto p = ldpc::params(c);
    if (p.n <= 0 || waveform::data_bits % static_cast<std::size_t>(p.n) != 0) return std::nullopt;
    return fec_framing{c, p.n, p.k, static_cast<int>(waveform::data_bits / static_cast<std::size_t>(p.n))};
}

std::optional<fec_framing> framing_for(fec_code f) noexcept
{
    const auto c = ldpc_code_of(f);
    return c ? framing_for(*c) : std::nullopt;
}

std::string framing_error(fec_code f)
{
    const auto c = ldpc_code_of(f);
    if (!c || framing_for(*c)) return {};
    std::string framed;
    for (const auto code : ldpc::all_codes) {
        if (framing_for(code)) framed += (framed.empty() ? "" : ", ") + std::string(ldpc::to_string(code));
    }
    return "fec = " + std::string(to_string(f)) + ": its codeword (" + std::to_string(ldpc::params(*c).n) +
           " bits) does not divide the 6144-bit data field, so it is sent as the continuous stream of sync-marked, "
           "randomized codewords across the data fields, which the receiver does not decode yet (codeword-aligned "
           "codes: " + framed + ", or none)";
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
    sxs_llrs(stat, decision_quality::moments_of(stat.data(), std::min(stat.size(), llr.size())), llr);
}

void sxs_llrs(std::span<const double> stat, const decision_quality::moments& m, std::span<float> llr) noexcept
{
    namespace dq = decision_quality;
    const std::size_t n = std::min(stat.size(), llr.size());
    double scale[dq::contexts];
    dq::llr_scales(m, scale);
    for (std::size_t i = 0; i < n; ++i) {
        llr[i] = static_cast<float>(stat[i] * scale[dq::context_at(stat.data(), n, i)]);
    }
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
    const auto k = static_cast<std::size_t>(framing_.k);
    std::memset(info_packed, 0, static_cast<std::size_t>(framing_.info_bytes()));
    for (int w = 0; w < framing_.codewords; ++w) {
        const auto in = llr.subspan(static_cast<std::size_t>(w) * n, n);
        const auto r = decoder_.decode(in, info_, word_);
        unsigned errors = 0;
        for (std::size_t i = 0; i < n; ++i) errors += static_cast<unsigned>((in[i] > 0.0f) != (word_[i] != 0));
        results[w] = {static_cast<std::uint8_t>(std::min(r.iterations, 255)), static_cast<std::uint8_t>(r.converged ? 1 : 0),
                      static_cast<std::uint16_t>(std::min(errors, 65535u))};
        const std::size_t first = static_cast<std::size_t>(w) * k;
        for (std::size_t i = 0; i < k; ++i) {
            if (info_[i]) info_packed[(first + i) / 8] = static_cast<std::uint8_t>(info_packed[(first + i) / 8] | (0x80u >> ((first + i) % 8)));
        }
    }
}

}  // namespace paq::dsp
