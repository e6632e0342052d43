#include "dsp/fec_stream.hpp"

#include "dsp/ber.hpp"
#include "dsp/waveform.hpp"

#include <algorithm>
#include <array>
#include <cmath>
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

std::vector<std::int64_t> data_field_places(std::span<const std::uint64_t> starts, double spacing)
{
    if (!(spacing > 0.0)) throw std::invalid_argument("data_field_places: the packet spacing must be positive");
    std::vector<std::int64_t> places(starts.size());
    for (std::size_t j = 1; j < starts.size(); ++j) {
        if (starts[j] < starts[j - 1]) throw std::invalid_argument("data_field_places: packet starts out of order");
        places[j] = places[j - 1] + packets_apart(starts[j - 1], starts[j], spacing);
    }
    return places;
}

namespace {

constexpr auto field_bits = static_cast<std::int64_t>(waveform::data_bits);

/// floor(a / b) for b > 0.
constexpr std::int64_t floor_div(std::int64_t a, std::int64_t b) noexcept { return a >= 0 ? a / b : -((-a + b - 1) / b); }

/// Stream s's LLRs of stream bits [first, first + out.size()), 0 where no packet holds them.
void stream_llrs(const stream_fields& fields, int s, std::int64_t first, std::span<float> out)
{
    const std::int64_t last = first + static_cast<std::int64_t>(out.size());  // one past
    for (std::int64_t place = floor_div(first, field_bits); place * field_bits < last; ++place) {
        const std::int64_t b0 = std::max(first, place * field_bits), b1 = std::min(last, (place + 1) * field_bits);
        float* dst = out.data() + (b0 - first);
        const auto it = std::lower_bound(fields.places.begin(), fields.places.end(), place);
        if (it == fields.places.end() || *it != place) {
            std::fill(dst, dst + (b1 - b0), 0.0f);
            continue;
        }
        const auto j = static_cast<std::size_t>(it - fields.places.begin());
        const float* src = fields.llr.data() + (j * static_cast<std::size_t>(fields.streams) + static_cast<std::size_t>(s)) * waveform::data_bits +
                           static_cast<std::size_t>(b0 - place * field_bits);
        std::copy(src, src + (b1 - b0), dst);
    }
}

}  // namespace

stream_deframer::stream_deframer(ldpc::code c)
{
    const auto l = stream_layout_for(c);
    if (!l) throw std::invalid_argument("stream_deframer: " + std::string(ldpc::to_string(c)) + " is codeword-aligned, not a continuous stream");
    layout_ = *l;
}

std::optional<int> stream_deframer::find_offset(const stream_fields& fields, int search_fields) const
{
    if (fields.places.empty() || fields.streams < 1) return std::nullopt;
    const std::int64_t fields_seen = std::min<std::int64_t>(std::max(search_fields, 1), fields.places.back() + 1);
    const auto bits = static_cast<std::size_t>(fields_seen * field_bits);
    // The streams' LLRs summed: every stream carries the same bits.
    std::vector<float> one(bits), sum(bits, 0.0f);
    for (int s = 0; s < fields.streams; ++s) {
        stream_llrs(fields, s, 0, one);
        for (std::size_t i = 0; i < bits; ++i) sum[i] += one[i];
    }
    const auto marker = sync_marker_bits(layout_.code);
    const std::size_t m = marker.size(), frame = static_cast<std::size_t>(layout_.frame_bits());
    if (bits < m) return std::nullopt;
    // corr[x]: the marker against the bits from x; mag[x]: their LLRs' magnitude (from the
    // running sum of |LLR|). 8 fields of k = 4096's 256-bit marker are 12.6 M products: in
    // parallel, the marker as +-1, eight partial sums a position (independent lanes a
    // compiler vectorizes; the markers are 64 and 256 bits).
    constexpr std::size_t lanes = 8;
    std::vector<float> sign(m);
    for (std::size_t i = 0; i < m; ++i) sign[i] = marker[i] ? 1.0f : -1.0f;
    std::vector<double> run(bits + 1, 0.0);
    for (std::size_t i = 0; i < bits; ++i) run[i + 1] = run[i] + std::fabs(static_cast<double>(sum[i]));
    std::vector<double> corr(bits - m + 1), mag(bits - m + 1);
    const auto positions = static_cast<std::ptrdiff_t>(corr.size());
#pragma omp parallel for schedule(static)
    for (std::ptrdiff_t xi = 0; xi < positions; ++xi) {
        const auto x = static_cast<std::size_t>(xi);
        const float* v = sum.data() + x;
        std::array<float, lanes> part{};
        std::size_t i = 0;
        for (; i + lanes <= m; i += lanes) {
            for (std::size_t l = 0; l < lanes; ++l) part[l] += sign[i + l] * v[i + l];
        }
        float c = 0.0f;
        for (; i < m; ++i) c += sign[i] * v[i];
        for (const float p : part) c += p;
        corr[x] = static_cast<double>(c);
        mag[x] = run[x + m] - run[x];
    }
    int best = -1;
    double best_score = 0.0, best_mag = 0.0;
    for (std::size_t o = 0; o < frame && o < corr.size(); ++o) {
        double score = 0.0, magnitude = 0.0;
        for (std::size_t x = o; x < corr.size(); x += frame) {
            score += corr[x];
            magnitude += mag[x];
        }
        if (best < 0 || score > best_score) {
            best = static_cast<int>(o);
            best_score = score;
            best_mag = magnitude;
        }
    }
    if (best < 0 || !(best_mag > 0.0) || best_score < 0.25 * best_mag) return std::nullopt;
    return best;
}

std::vector<stream_frame> stream_deframer::frames(std::span<const std::int64_t> places, int offset) const
{
    std::vector<stream_frame> out;
    if (places.empty()) return out;
    const std::int64_t frame = layout_.frame_bits();
    if (offset < 0 || offset >= frame) throw std::invalid_argument("stream_deframer: offset " + std::to_string(offset) + " outside the frame");
    const std::int64_t last_bit = (places.back() + 1) * field_bits - 1;
    for (std::int64_t start = offset > 0 ? offset - frame : offset; start + frame - 1 <= last_bit; start += frame) {
        const std::int64_t end = start + frame - 1;
        const auto it = std::lower_bound(places.begin(), places.end(), floor_div(end, field_bits));
        const bool held = it != places.end() && *it == floor_div(end, field_bits);
        out.push_back({start, held ? static_cast<int>(it - places.begin()) : -1});
    }
    return out;
}

std::vector<std::size_t> stream_edge_packets(std::size_t packets)
{
    std::vector<std::size_t> out;
    for (std::size_t i = 0; i < packets; ++i) {
        if (i < max_stream_edge_packets / 2 || i + max_stream_edge_packets / 2 >= packets) out.push_back(i);
    }
    return out;
}

std::vector<stream_job> stream_deframer::assign(std::span<const stream_frame> frames, int offset, int slots, batch_output& out) const
{
    const std::int64_t frame_bits = layout_.frame_bits();
    out.fec_offset = offset;
    out.frames.assign(out.packets.size(), batch_output::packet_frames{});
    std::vector<stream_job> jobs;
    for (std::size_t q = 0; q < frames.size(); ++q) {
        const auto& f = frames[q];
        if (f.owner < 0) continue;  // its last bit was in a missed packet: lost with it
        if (static_cast<std::size_t>(f.owner) >= out.frames.size()) throw std::logic_error("stream_deframer: a frame's owner past the packets");
        auto& pf = out.frames[static_cast<std::size_t>(f.owner)];
        if (pf.count == 0) pf.first = f.start < 0 ? -1 : (f.start - offset) / frame_bits;
        if (pf.count >= slots) throw std::logic_error("stream_deframer: more frames end in a packet than its slots");
        const int slot = pf.count++;
        if (f.start < 0) {
            ++pf.pending;  // begun in the batch before: the engine decodes it
            continue;
        }
        jobs.push_back({q, static_cast<std::size_t>(f.owner), slot});
    }
    return jobs;
}

void stream_deframer::codeword_llrs(const stream_fields& fields, int s, const stream_frame& f, std::span<float> out) const
{
    if (out.size() != static_cast<std::size_t>(layout_.n)) {
        throw std::invalid_argument("stream_deframer: " + std::to_string(out.size()) + " LLRs (expected " + std::to_string(layout_.n) + ")");
    }
    stream_llrs(fields, s, f.start + layout_.marker_bits, out);
    for (std::size_t i = 0; i < out.size(); ++i) {
        if (randomizer[i % randomizer.size()]) out[i] = -out[i];
    }
}

stream_stitcher::stream_stitcher(const fec_framing& framing, int max_iterations, double packet_spacing_samples)
    : framing_(framing), deframer_(framing.code), decoder_(framing, max_iterations), spacing_(packet_spacing_samples),
      word_(static_cast<std::size_t>(framing.n))
{
    if (!framing.continuous()) throw std::invalid_argument("stream_stitcher: a codeword-aligned framing");
    if (!(packet_spacing_samples > 0.0)) throw std::invalid_argument("stream_stitcher: the packet spacing must be positive");
}

void stream_stitcher::drop_first(batch_output& out, std::size_t i) const
{
    auto& pf = out.frames[i];
    const auto k_bytes = static_cast<std::size_t>(framing_.k / 8);
    for (int s = 0; s < out.streams; ++s) {
        std::uint8_t* info = out.packet_decoded(i, s);
        codeword_result* cw = out.packet_codewords(i, s);
        for (int slot = 1; slot < pf.count; ++slot) {
            std::copy_n(info + static_cast<std::size_t>(slot) * k_bytes, k_bytes, info + static_cast<std::size_t>(slot - 1) * k_bytes);
            cw[slot - 1] = cw[slot];
        }
        std::fill_n(info + static_cast<std::size_t>(pf.count - 1) * k_bytes, k_bytes, std::uint8_t{0});
        cw[pf.count - 1] = codeword_result{};
    }
    --pf.count;
    --pf.pending;
    ++pf.first;
}

void stream_stitcher::join(batch_output& out)
{
    if (out.packets.empty()) return;  // nothing between: the next batch joins the one before
    if (out.frames.size() != out.packets.size()) throw std::invalid_argument("stream_stitcher: a batch without the stream's frames");
    const std::int64_t frame = deframer_.layout().frame_bits();
    if (out.fec_offset < 0) {
        have_prev_ = false;  // no sync: nothing decoded, nothing to join to
        return;
    }
    // Where the batch's frame 0 falls on the batch before's frame grid.
    bool joined = false;
    std::int64_t base = next_number_, place0 = 0;
    if (have_prev_ && out.packets.front().start_sample > prev_last_start_) {
        place0 = prev_last_place_ + packets_apart(prev_last_start_, out.packets.front().start_sample, spacing_);
        const std::int64_t shift = place0 * field_bits + out.fec_offset - prev_offset_;
        if (shift % frame == 0) {
            base = prev_base_ + shift / frame;
            joined = true;
        }
    }
    // The frame begun in the batch before (one at most: the frame across the batch's first
    // bit), in its packet's first slot: decoded from both batches' edges where they join,
    // else dropped.
    for (std::size_t i = 0; i < out.packets.size() && i < 2; ++i) {
        auto& pf = out.frames[i];
        if (pf.pending == 0) continue;
        if (pf.pending > 1) throw std::logic_error("stream_stitcher: more than one frame begun before the batch");
        if (!joined) {
            drop_first(out, i);
            continue;
        }
        std::vector<std::int64_t> places;
        for (const auto p : prev_places_) places.push_back(p - place0);
        places.insert(places.end(), out.fec_edge_places.begin(), out.fec_edge_places.end());
        std::vector<float> llr = prev_llr_;
        llr.insert(llr.end(), out.fec_edge_llr.begin(), out.fec_edge_llr.end());
        const stream_fields fields{places, llr, out.streams};
        const stream_frame f{out.fec_offset - frame, static_cast<int>(i)};
        for (int s = 0; s < out.streams; ++s) {
            deframer_.codeword_llrs(fields, s, f, word_);
            decoder_.decode_one(word_, out.packet_decoded(i, s), out.packet_codewords(i, s)[0]);
        }
        pf.pending = 0;
    }
    // The run's numbers.
    std::int64_t highest = base - 1;
    for (auto& pf : out.frames) {
        if (pf.count == 0) continue;
        pf.first += base;
        highest = std::max(highest, pf.first + pf.count - 1);
    }
    next_number_ = std::max(next_number_, highest + 1);
    have_prev_ = true;
    prev_last_start_ = out.packets.back().start_sample;
    prev_last_place_ = out.fec_edge_places.empty() ? 0 : out.fec_edge_places.back();
    prev_offset_ = out.fec_offset;
    prev_base_ = base;
    prev_places_ = out.fec_edge_places;
    prev_llr_ = out.fec_edge_llr;
}

}  // namespace paq::dsp
