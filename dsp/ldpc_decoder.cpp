#include "dsp/ldpc_decoder.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace paq::dsp::ldpc {

namespace {

/// A message's magnitude is kept below this: a bit the channel is sure of stays sure, and the
/// tanh rule stays finite.
constexpr double llr_limit = 30.0;

}  // namespace

float round_to_binary16(float x) noexcept
{
    if (std::fabs(x) < 0x1p-14f) {
        // binary16's subnormals: the multiples of 2^-24 (the scaling by 2^24 is exact).
        return std::nearbyint(x * 0x1p24f) * 0x1p-24f;
    }
    // A normal binary16 keeps 10 of float's 23 fraction bits: the 13 below rounded off, to
    // nearest, ties to the even kept bit (a carry out of the fraction steps the exponent up).
    auto u = std::bit_cast<std::uint32_t>(x);
    u += 0x0fffu + ((u >> 13) & 1u);
    return std::bit_cast<float>(u & ~0x1fffu);
}

decoder::decoder(code c, decoder_config cfg) : h_(parity_check_matrix(c)), cfg_(cfg)
{
    if (cfg_.max_iterations < 1 || cfg_.max_iterations > 1000) {
        throw std::invalid_argument("ldpc decoder: max_iterations " + std::to_string(cfg_.max_iterations) + " (1 .. 1000)");
    }
    if (!(cfg_.normalization > 0.0f && cfg_.normalization <= 1.0f)) {
        throw std::invalid_argument("ldpc decoder: normalization " + std::to_string(cfg_.normalization) + " (0 < x <= 1)");
    }
    row_start_.reserve(h_.rows.size() + 1);
    row_start_.push_back(0);
    for (const auto& row : h_.rows) {
        edge_col_.insert(edge_col_.end(), row.begin(), row.end());
        row_start_.push_back(static_cast<std::uint32_t>(edge_col_.size()));
    }
    channel_.resize(static_cast<std::size_t>(h_.p.n_full));
    belief_.resize(channel_.size());
    msg_.resize(edge_col_.size());
    edge_scratch_.resize(edge_col_.size());
    hard_.resize(channel_.size());
    std::size_t widest = 0;
    for (const auto& row : h_.rows) widest = std::max(widest, row.size());
    scratch_.resize(widest);
}

decode_result decoder::decode(std::span<const float> llr, std::span<std::uint8_t> info, std::span<std::uint8_t> word)
{
    const auto& p = h_.p;
    if (llr.size() != static_cast<std::size_t>(p.n) || info.size() != static_cast<std::size_t>(p.k) ||
        (!word.empty() && word.size() != static_cast<std::size_t>(p.n_full))) {
        throw std::invalid_argument("ldpc decode: " +
                                    std::to_string(llr.size()) + " LLRs, " + std::to_string(info.size()) + " information and " +
                                    std::to_string(word.size()) + " codeword bits; expected " + std::to_string(p.n) + ", " +
                                    std::to_string(p.k) + " and " + std::to_string(p.n_full) + " (or none)");
    }
    // The detectors' sign (positive: 1) turned into the decoders' (positive: 0); a NaN is an
    // erasure; the punctured bits are erasures. binary16: the limited LLR in float rounded
    // (as the GPU's). A zero is +0 (the GPU reads a belief's sign from its sign bit).
    const bool half = cfg_.kind == decoder_kind::min_sum && cfg_.format == number_format::binary16;
    for (std::size_t i = 0; i < llr.size(); ++i) {
        double l = 0.0;
        if (half) {
            const float f = std::isnan(llr[i]) ? 0.0f : std::clamp(-llr[i], -static_cast<float>(llr_limit), static_cast<float>(llr_limit));
            l = round_to_binary16(f);
        } else {
            l = std::clamp(std::isnan(llr[i]) ? 0.0 : -static_cast<double>(llr[i]), -llr_limit, llr_limit);
        }
        channel_[i] = l == 0.0 ? 0.0 : l;
    }
    std::fill(channel_.begin() + p.n, channel_.end(), 0.0);
    decode_result r;
    if (std::all_of(channel_.begin(), channel_.begin() + p.n, [](double l) { return l == 0.0; })) {
        // Nothing received: no iteration can decide a bit. Every check fails, the word is zeros.
        std::fill(hard_.begin(), hard_.end(), std::uint8_t{0});
        std::fill(belief_.begin(), belief_.end(), 0.0);
        r.failed_checks = static_cast<std::size_t>(p.checks);
    } else {
        if (cfg_.kind == decoder_kind::sum_product) {
            r = sum_product(hard_);
        } else {
            r = half ? min_sum<number_format::binary16>(hard_) : min_sum<number_format::binary64>(hard_);
        }
    }
    std::copy_n(hard_.begin(), p.k, info.begin());
    if (!word.empty()) std::copy(hard_.begin(), hard_.end(), word.begin());
    return r;
}

void decoder::posterior(std::span<float> llr) const { beliefs_out(llr, false, "ldpc posterior"); }

void decoder::extrinsic(std::span<float> llr) const { beliefs_out(llr, true, "ldpc extrinsic"); }

void decoder::beliefs_out(std::span<float> llr, bool less_input, const char* what) const
{
    const auto n = static_cast<std::size_t>(h_.p.n);
    if (llr.size() != n) throw std::invalid_argument(std::string(what) + ": " + std::to_string(llr.size()) + " LLRs; expected " + std::to_string(n));
    for (std::size_t i = 0; i < n; ++i) {
        const double b = less_input ? belief_[i] - channel_[i] : belief_[i];
        llr[i] = b == 0.0 ? 0.0f : static_cast<float>(-b);  // the detectors' sign; an exact 0 stays +0
    }
}

std::size_t decoder::failed(std::span<const double> belief) const
{
    std::size_t f = 0;
    for (std::size_t r = 0; r + 1 < row_start_.size(); ++r) {
        unsigned s = 0;
        bool undecided = false;
        for (std::uint32_t e = row_start_[r]; e < row_start_[r + 1]; ++e) {
            const double b = belief[edge_col_[e]];
            s ^= b < 0.0 ? 1u : 0u;
            undecided |= b == 0.0;
        }
        f += undecided ? 1u : s;
    }
    return f;
}

bool decoder::decided(std::span<const double> belief, std::span<std::uint8_t> hard, int iteration, decode_result& res) const
{
    for (std::size_t i = 0; i < hard.size(); ++i) hard[i] = belief[i] < 0.0 ? 1 : 0;
    res.iterations = iteration;
    res.failed_checks = failed(belief);
    res.converged = res.failed_checks == 0;
    return res.converged;
}

template <number_format F>
decode_result decoder::min_sum(std::span<std::uint8_t> hard)
{
    // binary16: every value is a binary16 number, held in a double; a difference, sum or
    // product of two is exact in double and rounded to float then to binary16 (the float op's
    // result rounded: round_to_binary16); binary64: as computed.
    constexpr bool half = F == number_format::binary16;
    const auto fit = [](double exact) {
        if constexpr (half) return static_cast<double>(round_to_binary16(static_cast<float>(exact)));
        return exact;
    };
    const double alpha = fit(cfg_.normalization);
    std::copy(channel_.begin(), channel_.end(), belief_.begin());
    std::fill(msg_.begin(), msg_.end(), 0.0);
    decode_result res;
    for (int it = 1; it <= cfg_.max_iterations; ++it) {
        for (std::size_t r = 0; r + 1 < row_start_.size(); ++r) {
            const std::uint32_t e0 = row_start_[r], e1 = row_start_[r + 1];
            // The bits' messages to this check: their beliefs without its last message.
            double min1 = INFINITY, min2 = INFINITY;
            std::uint32_t at_min = e0;
            bool negative = false;
            for (std::uint32_t e = e0; e < e1; ++e) {
                const double q = fit(belief_[edge_col_[e]] - msg_[e]);
                scratch_[e - e0] = q;
                const double a = std::abs(q);
                negative ^= q < 0.0;
                if (a < min1) {
                    min2 = min1;
                    min1 = a;
                    at_min = e;
                } else if (a < min2) {
                    min2 = a;
                }
            }
            // Each bit gets the sign of the others' product and the smallest of the others'
            // magnitudes, scaled; its belief takes the new message at once.
            for (std::uint32_t e = e0; e < e1; ++e) {
                const double q = scratch_[e - e0];
                const bool others_negative = negative ^ (q < 0.0);
                const double m = std::min(fit(alpha * (e == at_min ? min2 : min1)), llr_limit);
                msg_[e] = others_negative ? -m : m;
                belief_[edge_col_[e]] = std::clamp(fit(q + msg_[e]), -4.0 * llr_limit, 4.0 * llr_limit);
            }
        }
        if (decided(belief_, hard, it, res)) break;
    }
    return res;
}

decode_result decoder::sum_product(std::span<std::uint8_t> hard)
{
    // Flooding: every bit's message to each of its checks from the last round's check
    // messages, then every check's messages by the tanh rule from those.
    std::vector<double>& q = edge_scratch_;
    std::vector<double>& total = belief_;
    std::fill(msg_.begin(), msg_.end(), 0.0);
    decode_result res;
    for (int it = 1; it <= cfg_.max_iterations; ++it) {
        std::copy(channel_.begin(), channel_.end(), total.begin());
        for (std::size_t e = 0; e < msg_.size(); ++e) total[edge_col_[e]] += msg_[e];
        for (std::size_t e = 0; e < msg_.size(); ++e) q[e] = std::clamp(total[edge_col_[e]] - msg_[e], -llr_limit, llr_limit);
        for (std::size_t r = 0; r + 1 < row_start_.size(); ++r) {
            const std::uint32_t e0 = row_start_[r], e1 = row_start_[r + 1];
            // The product of the others' tanh(q / 2), by prefix and suffix products (no division
            // by a tanh that is 0).
            double prefix = 1.0;
            for (std::uint32_t e = e0; e < e1; ++e) {
                scratch_[e - e0] = prefix;
                prefix *= std::tanh(q[e] / 2.0);
            }
            double suffix = 1.0;
            for (std::uint32_t e = e1; e-- > e0;) {
                const double t = std::clamp(scratch_[e - e0] * suffix, -1.0 + 1e-15, 1.0 - 1e-15);
                msg_[e] = std::clamp(2.0 * std::atanh(t), -llr_limit, llr_limit);
                suffix *= std::tanh(q[e] / 2.0);
            }
        }
        std::copy(channel_.begin(), channel_.end(), total.begin());
        for (std::size_t e = 0; e < msg_.size(); ++e) total[edge_col_[e]] += msg_[e];
        if (decided(total, hard, it, res)) break;
    }
    return res;
}

}  // namespace paq::dsp::ldpc
