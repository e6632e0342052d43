#include "dsp/fec_stream.hpp"

#include "dsp/waveform.hpp"

#include <algorithm>
#include <array>
#include <stdexcept>
#include <string>

namespace paq::dsp {

namespace {

constexpr std::uint64_t marker_a = 0xFCB88938D8D76A4Full;

/// 64 bits of `word`, the most significant first.
constexpr void put_word(std::uint64_t word, std::uint8_t* out) noexcept
{
    for (int i = 0; i < 64; ++i) out[i] = static_cast<std::uint8_t>(word >> (63 - i) & 1u);
}

constexpr std::array<std::uint8_t, 64> marker_1024 = [] {
    std::array<std::uint8_t, 64> m{};
    put_word(marker_a, m.data());
    return m;
}();

constexpr std::array<std::uint8_t, 256> marker_4096 = [] {
    std::array<std::uint8_t, 256> m{};
    put_word(marker_a, m.data());
    put_word(marker_a, m.data() + 64);
    put_word(~marker_a, m.data() + 128);
    put_word(marker_a, m.data() + 192);
    return m;
}();

/// h(x) = x^8 + x^7 + x^5 + x^3 + 1 from all ones: a[i + 8] = a[i + 7] + a[i + 5] + a[i + 3] + a[i].
constexpr std::array<std::uint8_t, 255> randomizer = [] {
    std::array<std::uint8_t, 255 + 8> a{};
    for (int i = 0; i < 8; ++i) a[static_cast<std::size_t>(i)] = 1;
    for (std::size_t i = 0; i + 8 < a.size(); ++i) a[i + 8] = static_cast<std::uint8_t>(a[i + 7] ^ a[i + 5] ^ a[i + 3] ^ a[i]);
    std::array<std::uint8_t, 255> r{};
    for (std::size_t i = 0; i < r.size(); ++i) r[i] = a[i];
    return r;
}();

}  // namespace

std::optional<stream_layout> stream_layout_for(ldpc::code c) noexcept
{
    const auto p = ldpc::params(c);
    if (p.n <= 0 || waveform::data_bits % static_cast<std::size_t>(p.n) == 0) return std::nullopt;
    return stream_layout{c, p.k == 1024 ? 64 : 256, p.n, p.k};
}

std::span<const std::uint8_t> sync_marker_bits(ldpc::code c) noexcept
{
    if (ldpc::params(c).k == 1024) return marker_1024;
    return marker_4096;
}

std::span<const std::uint8_t> randomizer_bits() noexcept { return randomizer; }

stream_encoder::stream_encoder(ldpc::code c, int offset)
{
    const auto l = stream_layout_for(c);
    if (!l) throw std::invalid_argument("stream_encoder: " + std::string(ldpc::to_string(c)) + " is codeword-aligned, not a continuous stream");
    layout_ = *l;
    if (offset < 0 || offset >= layout_.frame_bits()) {
        throw std::invalid_argument("stream_encoder: offset " + std::to_string(offset) + " (allowed: 0 .. " +
                                    std::to_string(layout_.frame_bits() - 1) + ")");
    }
    info_.resize(static_cast<std::size_t>(layout_.k));
    frame_.resize(static_cast<std::size_t>(layout_.frame_bits()));
    pos_ = static_cast<std::size_t>(offset);
}

void stream_encoder::next_frame(pn_generator& pn)
{
    const auto marker = sync_marker_bits(layout_.code);
    std::copy(marker.begin(), marker.end(), frame_.begin());
    pn.fill(info_);
    const auto word = std::span(frame_).subspan(marker.size());
    ldpc::encoder::get(layout_.code).encode(info_, word);
    for (std::size_t i = 0; i < word.size(); ++i) word[i] = static_cast<std::uint8_t>(word[i] ^ randomizer[i % randomizer.size()]);
}

void stream_encoder::next_data_field(pn_generator& pn, std::span<std::uint8_t> data_bits)
{
    if (data_bits.size() != waveform::data_bits) {
        throw std::invalid_argument("stream_encoder: " + std::to_string(data_bits.size()) + " bits (expected 6144)");
    }
    if (!started_) {
        next_frame(pn);
        started_ = true;
    }
    std::size_t out = 0;
    while (out < data_bits.size()) {
        if (pos_ == frame_.size()) {
            next_frame(pn);
            pos_ = 0;
        }
        const std::size_t take = std::min(frame_.size() - pos_, data_bits.size() - out);
        std::copy_n(frame_.begin() + static_cast<std::ptrdiff_t>(pos_), take, data_bits.begin() + static_cast<std::ptrdiff_t>(out));
        pos_ += take;
        out += take;
    }
}

}  // namespace paq::dsp
