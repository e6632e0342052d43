#include "dsp/fec.hpp"

#include "dsp/fec_stream.hpp"
#include "dsp/sxs_soft.hpp"

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

namespace {

/// sxs_llrs's model with the neighbours' decisions read from `dec` (their signs; dec == x: the
/// statistics' own), the statistics from x.
template <class D>
void fitted_llrs(const double* x, const D* dec, std::size_t n, float* llr) noexcept
{
    namespace ss = sxs_soft;
    ss::parity_model md[ss::parities];
    const bool finite = std::all_of(x, x + n, [](double v) { return std::isfinite(v); });
    // The decisions, and per parity of j their products d_j d_(j+lag) summed over the data,
    // lag = 0 .. 2 reach: every entry of the normal equations is one of those sums less the few
    // products the parity's edges leave out (integers, so the system is the one the products
    // bit by bit would give, as the GPU's block_sxs_llrs makes it too).
    constexpr int lags = 2 * ss::reach + 1;
    std::vector<signed char> d(finite ? n : 0);
    long long autocorrelation[ss::parities][lags] = {};
    for (std::size_t j = 0; j < d.size(); ++j) d[j] = static_cast<signed char>(ss::decision(dec[j]));
    for (std::size_t j = 0; j < d.size(); ++j) {
        for (int lag = 0; lag < lags && j + static_cast<std::size_t>(lag) < n; ++lag) {
            autocorrelation[j % ss::parities][lag] += d[j] * d[j + static_cast<std::size_t>(lag)];
        }
    }
    for (std::size_t q = 0; finite && q < ss::parities && q < n; ++q) {
        // The normal equations over the parity's bits, the weights, the residuals' mean square.
        ss::system a{};
        double bits = 0.0;
        int f[ss::terms];
        for (std::size_t i = q; i < n; i += ss::parities) {
            for (int t = 0; t < ss::terms; ++t) f[t] = ss::term_at(d.data(), n, i, t);
            for (int r = 0; r < ss::terms; ++r) a[r][ss::terms] += x[i] * f[r];
            bits += 1.0;
        }
        for (int r = 0; r < ss::terms; ++r) {
            for (int c = r; c < ss::terms; ++c) {  // symmetric: the lower half mirrors it
                a[r][c] = a[c][r] = static_cast<double>(ss::normal_entry(static_cast<int>(q), r, c, d.data(), static_cast<int>(n), &autocorrelation[0][0], lags));
            }
        }
        const double tiny = ss::min_pivot * bits;
        for (int k = 0; k < ss::terms; ++k)
            for (int r = k + 1; r < ss::terms; ++r) ss::eliminate(a, k, r, tiny);
        double w[ss::terms];
        ss::back_substitute(a, tiny, w);
        double square = 0.0;
        for (std::size_t i = q; i < n; i += ss::parities) {
            double fitted = 0.0;
            for (int t = 0; t < ss::terms; ++t) fitted += w[t] * ss::term_at(d.data(), n, i, t);
            square += (x[i] - fitted) * (x[i] - fitted);
        }
        md[q] = ss::model_from(w, square / bits);
        // The interference-free statistics' moments, for the decisions' errors.
        double abs_sum = 0.0, square_sum = 0.0;
        for (std::size_t i = q; md[q].s2 > 0.0 && i < n; i += ss::parities) {
            const double u = x[i] - ss::interference(md[q], d.data(), n, i);
            abs_sum += std::abs(u);
            square_sum += u * u;
        }
        ss::fold_errors(md[q], abs_sum / bits, square_sum / bits);
    }
    for (std::size_t i = 0; i < n; ++i) llr[i] = static_cast<float>(ss::llr_at(md, x, dec, n, i));
}

}  // namespace

void sxs_llrs(std::span<const double> stat, std::span<float> llr) noexcept
{
    fitted_llrs(stat.data(), stat.data(), std::min(stat.size(), llr.size()), llr.data());
}

void sxs_llrs(std::span<const double> stat, std::span<const float> decisions, std::span<float> llr) noexcept
{
    fitted_llrs(stat.data(), decisions.data(), std::min({stat.size(), decisions.size(), llr.size()}), llr.data());
}

double sxs_posterior_bep(std::span<const double> stat) noexcept
{
    const std::size_t n = stat.size();
    if (n == 0) return 0.0;
    std::vector<float> llr(n), next(n);
    sxs_llrs(stat, llr);
    for (int pass = 1; pass < sxs_soft::posterior_passes; ++pass) {
        sxs_llrs(stat, llr, next);
        llr.swap(next);
    }
    double sum = 0.0;
    for (std::size_t i = 0; i < n; ++i) sum += sxs_soft::decision_error_probability(stat[i], llr[i]);
    return sum / static_cast<double>(n);
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
