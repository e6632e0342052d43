#include "io/vita49.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>

namespace paq::io::vita49 {
namespace {

__extension__ typedef unsigned __int128 u128;
__extension__ typedef __int128 i128;

constexpr std::uint32_t bit_c = 1u << 27;
constexpr std::uint32_t bit_t = 1u << 26;
constexpr std::uint32_t bit_s = 1u << 24;

[[nodiscard]] std::uint32_t load_be_u32(const std::byte* p) noexcept
{
    return (std::to_integer<std::uint32_t>(p[0]) << 24) | (std::to_integer<std::uint32_t>(p[1]) << 16) |
           (std::to_integer<std::uint32_t>(p[2]) << 8) | std::to_integer<std::uint32_t>(p[3]);
}

void store_be_u32(std::byte* p, std::uint32_t v) noexcept
{
    p[0] = static_cast<std::byte>(v >> 24);
    p[1] = static_cast<std::byte>((v >> 16) & 0xFFu);
    p[2] = static_cast<std::byte>((v >> 8) & 0xFFu);
    p[3] = static_cast<std::byte>(v & 0xFFu);
}

[[nodiscard]] std::int16_t quantize(float value, float scale, std::size_t& clipped) noexcept
{
    // Same rule as io::encode for ci16: round to nearest, saturate symmetrically, NaN -> 0.
    constexpr float max = 32767.0f;
    const float scaled = value * scale;
    const bool in_range = scaled > -(max + 0.5f) && scaled < max + 0.5f;
    clipped += in_range ? 0u : 1u;
    const float saturated = in_range ? scaled : (scaled > 0.0f ? max : (scaled < 0.0f ? -max : 0.0f));
    return static_cast<std::int16_t>(std::rint(saturated));
}

[[nodiscard]] std::string hex32(std::uint32_t v)
{
    char text[9];
    std::snprintf(text, sizeof text, "%08x", static_cast<unsigned>(v));
    return text;
}

[[nodiscard]] const char* type_name(unsigned type) noexcept
{
    switch (type) {
    case 0: return "IF Data without stream id";
    case 1: return "IF Data with stream id";
    case 2: return "Extension Data without stream id";
    case 3: return "Extension Data with stream id";
    case 4: return "IF Context";
    case 5: return "Extension Context";
    case 6: return "Command";
    case 7: return "Extension Command";
    default: return "reserved";
    }
}

/// hz in units of 2^-20 Hz (the context packet's own resolution), 0 when not in (0, 10 GHz].
/// The bound keeps every product below in 128 bits: 2^32 s x 10^12 ps x 10^10 x 2^20 < 2^127.
[[nodiscard]] std::uint64_t rate_q20_of(double hz) noexcept
{
    if (!(hz > 0.0 && hz <= 1e10)) return 0;
    return static_cast<std::uint64_t>(std::llround(hz * 1048576.0));
}

/// Rounds num / den (den > 0) to the nearest integer, halves away from zero.
[[nodiscard]] i128 div_round(i128 num, i128 den) noexcept
{
    return num >= 0 ? (num + den / 2) / den : -((-num + den / 2) / den);
}

[[nodiscard]] std::size_t prefix_words_of(bool class_id, tsi_type tsi, tsf_type tsf) noexcept
{
    return 2 + (class_id ? 2u : 0u) + (tsi != tsi_type::none ? 1u : 0u) + (tsf != tsf_type::none ? 2u : 0u);
}

}  // namespace

std::size_t prefix_words(const packet_fields& fields) noexcept
{
    return prefix_words_of(fields.class_id_field.has_value(), fields.tsi, fields.tsf);
}

std::size_t packet_bytes(const packet_fields& fields, std::size_t num_samples) noexcept
{
    return 4 * (prefix_words(fields) + num_samples + (fields.trailer ? 1u : 0u));
}

std::size_t max_samples(const packet_fields& fields) noexcept
{
    return max_packet_words - prefix_words(fields) - (fields.trailer ? 1u : 0u);
}

std::size_t encode_packet(const packet_fields& fields, std::span<const cf32> samples, float ci16_scale,
                          std::span<std::byte> out, std::size_t* clipped_components)
{
    if (fields.packet_count > 15)
        throw std::invalid_argument("vita49: packet_count = " + std::to_string(fields.packet_count) +
                                    " does not fit the 4-bit field (allowed: 0 .. 15)");
    if (fields.class_id_field && fields.class_id_field->oui > 0xFFFFFFu)
        throw std::invalid_argument("vita49: class id OUI = " + std::to_string(fields.class_id_field->oui) +
                                    " does not fit 24 bits");
    if (fields.tsf == tsf_type::real_time_ps && fields.fractional_timestamp >= picoseconds_per_second)
        throw std::invalid_argument("vita49: real-time fractional timestamp = " +
                                    std::to_string(fields.fractional_timestamp) +
                                    " ps is not below 10^12 ps (one second)");
    if (!(ci16_scale > 0.0f))
        throw std::invalid_argument("vita49: ci16_scale = " + std::to_string(ci16_scale) + " must be positive");
    if (samples.size() > max_samples(fields))
        throw std::invalid_argument("vita49: " + std::to_string(samples.size()) + " samples exceed the " +
                                    std::to_string(max_samples(fields)) +
                                    " that the 16-bit packet size field allows with these fields");
    const std::size_t bytes = packet_bytes(fields, samples.size());
    if (out.size() < bytes)
        throw std::invalid_argument("vita49: output buffer of " + std::to_string(out.size()) +
                                    " bytes is smaller than the " + std::to_string(bytes) + "-byte packet");

    const auto words = static_cast<std::uint32_t>(bytes / 4);
    std::uint32_t header = (static_cast<std::uint32_t>(packet_type::if_data) << 28) |
                           (static_cast<std::uint32_t>(fields.tsi) << 22) |
                           (static_cast<std::uint32_t>(fields.tsf) << 20) |
                           (static_cast<std::uint32_t>(fields.packet_count) << 16) | words;
    if (fields.class_id_field) header |= bit_c;
    if (fields.trailer) header |= bit_t;

    std::byte* p = out.data();
    auto put = [&p](std::uint32_t v) {
        store_be_u32(p, v);
        p += 4;
    };
    put(header);
    put(fields.stream_id);
    if (fields.class_id_field) {
        put(fields.class_id_field->oui);  // pad bit count 0: ci16 pairs fill whole words
        put((static_cast<std::uint32_t>(fields.class_id_field->information_class) << 16) |
            fields.class_id_field->packet_class);
    }
    if (fields.tsi != tsi_type::none) put(fields.integer_timestamp);
    if (fields.tsf != tsf_type::none) {
        put(static_cast<std::uint32_t>(fields.fractional_timestamp >> 32));
        put(static_cast<std::uint32_t>(fields.fractional_timestamp & 0xFFFFFFFFu));
    }
    std::size_t clipped = 0;
    for (const cf32& s : samples) {
        const auto i = static_cast<std::uint16_t>(quantize(s.real(), ci16_scale, clipped));
        const auto q = static_cast<std::uint16_t>(quantize(s.imag(), ci16_scale, clipped));
        put((static_cast<std::uint32_t>(i) << 16) | q);
    }
    if (fields.trailer) put(*fields.trailer);
    if (clipped_components != nullptr) *clipped_components = clipped;
    return bytes;
}

std::vector<std::byte> encode_packet(const packet_fields& fields, std::span<const cf32> samples, float ci16_scale)
{
    std::vector<std::byte> out(fields.packet_count <= 15 && samples.size() <= max_samples(fields)
                                   ? packet_bytes(fields, samples.size())
                                   : 0);
    const std::size_t n = encode_packet(fields, samples, ci16_scale, out);
    out.resize(n);
    return out;
}

std::string parse_packet(std::span<const std::byte> datagram, packet& out)
{
    const std::size_t size = datagram.size();
    if (size < 4)
        return "vita49: datagram of " + std::to_string(size) + " bytes is shorter than the 4-byte header word";
    const std::byte* p = datagram.data();
    const std::uint32_t header = load_be_u32(p);
    const unsigned type = header >> 28;
    if (type != 1 && type != 4 && type != 5)
        return "vita49: packet type " + std::to_string(type) + " (" + type_name(type) +
               ") is not supported (accepted: 1 = IF Data with stream id; 4, 5 = context, skipped)";
    const bool is_data = type == 1;
    const bool has_class_id = (header & bit_c) != 0;
    const bool has_trailer = is_data && (header & bit_t) != 0;  // bit 26 is reserved in context packets
    const auto tsi = static_cast<tsi_type>((header >> 22) & 3u);
    const auto tsf = static_cast<tsf_type>((header >> 20) & 3u);
    const std::size_t prefix = prefix_words_of(has_class_id, tsi, tsf);
    const std::size_t fixed_words = prefix + (has_trailer ? 1u : 0u);
    if (size % 4 != 0) {
        if (is_data && size > 4 * fixed_words)
            return "vita49: payload of " + std::to_string(size - 4 * fixed_words) +
                   " bytes is not a multiple of 4 bytes (one ci16 I/Q pair)";
        return "vita49: datagram length " + std::to_string(size) + " bytes is not a whole number of 32-bit words";
    }
    const std::size_t size_words = header & 0xFFFFu;
    if (size_words * 4 != size)
        return "vita49: packet size field " + std::to_string(size_words) + " words (" +
               std::to_string(size_words * 4) + " bytes) does not match the datagram length " +
               std::to_string(size) + " bytes";
    if (size_words < fixed_words)
        return "vita49: packet size field " + std::to_string(size_words) + " words is less than the " +
               std::to_string(fixed_words) + " words of header fields that the header word announces (stream id" +
               (has_class_id ? ", class id" : "") + (tsi != tsi_type::none ? ", integer timestamp" : "") +
               (tsf != tsf_type::none ? ", fractional timestamp" : "") + (has_trailer ? ", trailer" : "") + ")";
    if (is_data && (header & bit_s) != 0)
        return "vita49: header bit S (spectrum data) is set: only time-domain I/Q samples are supported";

    packet_fields f;
    f.packet_count = static_cast<std::uint8_t>((header >> 16) & 0xFu);
    f.stream_id = load_be_u32(p + 4);
    std::size_t w = 2;
    if (has_class_id) {
        const std::uint32_t w0 = load_be_u32(p + 4 * w);
        const std::uint32_t w1 = load_be_u32(p + 4 * w + 4);
        const unsigned pad_bits = w0 >> 27;
        if (is_data && pad_bits != 0)
            return "vita49: class id pad bit count " + std::to_string(pad_bits) +
                   " is not supported (ci16 I/Q pairs fill whole 32-bit words)";
        f.class_id_field = class_id{w0 & 0xFFFFFFu, static_cast<std::uint16_t>(w1 >> 16),
                                    static_cast<std::uint16_t>(w1 & 0xFFFFu)};
        w += 2;
    }
    f.tsi = tsi;
    if (tsi != tsi_type::none) f.integer_timestamp = load_be_u32(p + 4 * w++);
    f.tsf = tsf;
    if (tsf != tsf_type::none) {
        f.fractional_timestamp = (static_cast<std::uint64_t>(load_be_u32(p + 4 * w)) << 32) | load_be_u32(p + 4 * w + 4);
        w += 2;
        if (tsf == tsf_type::real_time_ps && f.fractional_timestamp >= picoseconds_per_second)
            return "vita49: real-time fractional timestamp (TSF 2) " + std::to_string(f.fractional_timestamp) +
                   " ps is not below 10^12 ps (one second)";
    }
    if (has_trailer) f.trailer = load_be_u32(p + size - 4);

    out.type = static_cast<packet_type>(type);
    out.fields = f;
    out.context_sample_rate_hz = 0.0;
    if (type == 4 && size_words > w) {
        // IF Context: CIF0, the CIF1, CIF2, CIF3 (and CIF7) words its enable bits announce,
        // then the CIF0 fields in the order of their bits, 31 down (VITA 49.2 9.1): for the
        // sample rate (bit 21) the fields of bits 30 .. 22 come first.
        const std::uint32_t cif0 = load_be_u32(p + 4 * w);
        if ((cif0 & (1u << 21)) != 0) {
            if ((cif0 & 0x70u) != 0)
                return "vita49: IF Context CIF0 reserved bits 4 .. 6 are set (CIF0 = 0x" + hex32(cif0) +
                       "): the position of the sample rate field is unknown";
            if ((cif0 & 0x80u) != 0)
                return "vita49: IF Context CIF0 bit 7 (CIF7, field attributes) is set with the sample rate field: "
                       "not supported (the attributes change the size of every field)";
            static constexpr unsigned words_of_bit[32] = {
                // bits 0 .. 31; only 22 .. 30 are needed here
                0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                1 /*22 over-range count*/, 1 /*23 gain*/, 1 /*24 reference level*/, 2 /*25 IF band offset*/,
                2 /*26 RF offset*/, 2 /*27 RF frequency*/, 2 /*28 IF frequency*/, 2 /*29 bandwidth*/,
                1 /*30 reference point*/, 0 /*31 change indicator*/};
            // CIF0, then one word per further CIF enabled by bits 1 (CIF1), 2 (CIF2), 3 (CIF3).
            std::size_t at = w + 1 + ((cif0 >> 1) & 1u) + ((cif0 >> 2) & 1u) + ((cif0 >> 3) & 1u);
            for (unsigned b = 30; b >= 22; --b) {
                if ((cif0 & (1u << b)) != 0) at += words_of_bit[b];
            }
            if (at + 2 > size_words)
                return "vita49: IF Context packet of " + std::to_string(size_words) +
                       " words is too short for the sample rate field its CIF0 announces (needs " + std::to_string(at + 2) + ")";
            const auto raw = static_cast<std::int64_t>((static_cast<std::uint64_t>(load_be_u32(p + 4 * at)) << 32) |
                                                       load_be_u32(p + 4 * at + 4));
            if (raw <= 0)
                return "vita49: IF Context sample rate field " + std::to_string(static_cast<double>(raw) / 1048576.0) +
                       " Hz (raw " + std::to_string(raw) + ") is not positive";
            out.context_sample_rate_hz = static_cast<double>(raw) / 1048576.0;  // 2^20
        }
    }
    // The payload is size_words - fixed_words whole words, hence always a multiple of the
    // 4-byte sample; a datagram with a partial word fails the size check above.
    out.payload = is_data ? datagram.subspan(4 * prefix, 4 * (size_words - fixed_words)) : std::span<const std::byte>{};
    return {};
}

packet parse_packet(std::span<const std::byte> datagram)
{
    packet p;
    std::string error = parse_packet(datagram, p);
    if (!error.empty()) throw decode_error(error);
    return p;
}

void decode_payload(const packet& p, cf32* dst, float ci16_scale) noexcept
{
    const float inv = 1.0f / ci16_scale;
    const std::byte* src = p.payload.data();
    const std::size_t n = p.num_samples();
    for (std::size_t k = 0; k < n; ++k, src += 4) {
        const std::uint32_t v = load_be_u32(src);
        const auto i = static_cast<std::int16_t>(static_cast<std::uint16_t>(v >> 16));
        const auto q = static_cast<std::int16_t>(static_cast<std::uint16_t>(v & 0xFFFFu));
        dst[k] = cf32(static_cast<float>(i) * inv, static_cast<float>(q) * inv);
    }
}

void decode_payload(const packet& p, ci16* dst) noexcept
{
    const std::byte* src = p.payload.data();
    const std::size_t n = p.num_samples();
    for (std::size_t k = 0; k < n; ++k, src += 4) {
        const std::uint32_t v = load_be_u32(src);
        dst[k] = ci16{static_cast<std::int16_t>(static_cast<std::uint16_t>(v >> 16)),
                      static_cast<std::int16_t>(static_cast<std::uint16_t>(v & 0xFFFFu))};
    }
}

std::optional<std::int64_t> first_sample_utc_ns(const packet_fields& f, double sample_rate_hz) noexcept
{
    std::int64_t seconds = 0;
    switch (f.tsi) {
    case tsi_type::utc: seconds = f.integer_timestamp; break;
    case tsi_type::gps: seconds = std::int64_t{f.integer_timestamp} + gps_epoch_unix_s - gps_minus_utc_s; break;
    default: return std::nullopt;
    }
    u128 below_second_ns = 0;  // may exceed a second with a sample count past the rate
    if (f.tsf == tsf_type::real_time_ps) {
        if (f.fractional_timestamp >= picoseconds_per_second) return std::nullopt;
        below_second_ns = (f.fractional_timestamp + 500) / 1000;
    } else if (f.tsf == tsf_type::sample_count) {
        const std::uint64_t q20 = rate_q20_of(sample_rate_hz);
        if (q20 == 0) return std::nullopt;
        // count x 10^9 x 2^20 < 2^114: no overflow.
        below_second_ns = (u128{f.fractional_timestamp} * 1'000'000'000u * 1048576u + q20 / 2) / q20;
    } else {
        return std::nullopt;
    }
    if (below_second_ns > static_cast<u128>(std::int64_t{1} << 62)) return std::nullopt;
    std::int64_t ns = 0;
    if (__builtin_mul_overflow(seconds, std::int64_t{1'000'000'000}, &ns) ||
        __builtin_add_overflow(ns, static_cast<std::int64_t>(below_second_ns), &ns))
        return std::nullopt;
    return ns;
}

sequence_tracker::sequence_tracker(double sample_rate_hz, std::uint64_t max_jump_samples) noexcept
    : rate_q20_(rate_q20_of(sample_rate_hz)),
      samples_per_second_(rate_q20_ != 0 && rate_q20_ % 1048576u == 0 ? rate_q20_ / 1048576u : 0),
      max_jump_samples_(std::max<std::uint64_t>(max_jump_samples, 1))
{
}

std::optional<std::uint64_t> sequence_tracker::position(const packet_fields& f, const stream_state* prev) const noexcept
{
    if (f.tsf == tsf_type::real_time_ps) {
        if (f.tsi == tsi_type::none || rate_q20_ == 0 || f.fractional_timestamp >= picoseconds_per_second)
            return std::nullopt;
        // Time in ps with the integer second carried: < 2^32 x 10^12 < 2^72; x rate_q20_
        // (< 2^54) stays below 2^127, so the signed products cannot overflow.
        const auto t_ps = [](std::uint32_t s, std::uint64_t ps) {
            return static_cast<i128>(u128{s} * picoseconds_per_second + ps);
        };
        const i128 den = static_cast<i128>(u128{picoseconds_per_second} << 20);
        const i128 now = t_ps(f.integer_timestamp, f.fractional_timestamp);
        i128 pos = 0;
        if (prev != nullptr && prev->has_ps_time && prev->has_position) {
            // From the last accepted packet: the rounding error is the time since then x the
            // rate's error, not the time since 1970 x it.
            const i128 dt = now - t_ps(prev->last_second, prev->last_ps);
            pos = static_cast<i128>(prev->last_position) + div_round(dt * static_cast<i128>(rate_q20_), den);
        } else {
            pos = div_round(now * static_cast<i128>(rate_q20_), den);
        }
        if (pos < 0) return 0;  // just behind a start near zero: behind, never wrapped
        if (pos > static_cast<i128>(~std::uint64_t{0})) return std::nullopt;
        return static_cast<std::uint64_t>(pos);
    }
    if (f.tsf != tsf_type::sample_count) return std::nullopt;
    if (f.tsi == tsi_type::none) return f.fractional_timestamp;
    if (samples_per_second_ > 0) {
        // Checked: a hostile integer second times a high rate plus a 64-bit count can pass
        // 2^64; such a packet has no usable position (the packet count still applies).
        std::uint64_t pos = 0;
        if (__builtin_mul_overflow(std::uint64_t{f.integer_timestamp}, samples_per_second_, &pos) ||
            __builtin_add_overflow(pos, f.fractional_timestamp, &pos))
            return std::nullopt;
        return pos;
    }
    // The count restarts each second and the rate is unknown: positions compare only within
    // one second.
    if (prev == nullptr || (prev->has_tsi_second && prev->last_second == f.integer_timestamp))
        return f.fractional_timestamp;
    return std::nullopt;
}

std::uint64_t sequence_tracker::max_jump_for(double sample_rate_hz, double seconds) noexcept
{
    constexpr double lo = static_cast<double>(std::uint64_t{1} << 20), hi = static_cast<double>(std::uint64_t{1} << 40);
    const double n = sample_rate_hz * seconds;
    if (!std::isfinite(n) || !(n > 0.0)) return default_max_jump_samples;
    return static_cast<std::uint64_t>(std::clamp(n, lo, hi));
}

sequence_result sequence_tracker::update(const packet_fields& f, std::size_t num_samples)
{
    sequence_result r;
    auto restart = [&](stream_state& st) {
        const auto pos = position(f, nullptr);
        st.last_count = f.packet_count;
        st.last_samples = num_samples;
        st.has_position = pos.has_value();
        st.last_position = pos.value_or(0);
        st.next_position = saturating_add(st.last_position, num_samples);
        st.has_tsi_second = f.tsi != tsi_type::none;
        st.last_second = f.integer_timestamp;
        st.has_ps_time = f.tsi != tsi_type::none && f.tsf == tsf_type::real_time_ps;
        st.last_ps = f.fractional_timestamp;
        st.uniform_size = true;
    };
    auto it = streams_.find(f.stream_id);
    if (it == streams_.end()) {
        restart(streams_[f.stream_id]);
        r.first = true;
        return r;
    }
    stream_state& st = it->second;
    const std::uint64_t count_gap = static_cast<std::uint64_t>((f.packet_count - st.last_count - 1) & 0xF);
    const auto pos = st.has_position ? position(f, &st) : std::nullopt;
    if (pos) {
        if (*pos == st.last_position) {
            r.duplicate = true;
            return r;
        }
        if (*pos < st.next_position) {
            const std::uint64_t behind = st.next_position - *pos;
            if (behind <= reorder_window_packets * std::max<std::uint64_t>(st.last_samples, 1)) {
                r.late = true;
                return r;
            }
            restart(st);
            r.resync = true;
            return r;
        }
        const std::uint64_t lost = *pos - st.next_position;
        if (lost > max_jump_samples_) {
            // Too far ahead to be a loss on a live link: a discontinuity. Nothing is computed
            // from the jump (a timestamp near 2^64 would otherwise be 2^64 samples lost).
            restart(st);
            r.resync = true;
            r.jumped_forward = true;
            return r;
        }
        r.samples_exact = true;
        r.samples_lost = lost;
        if (st.uniform_size && st.last_samples > 0 && lost % st.last_samples == 0) {
            // Every packet so far had this size: the timestamps say how many are missing; the
            // 4-bit count only checks it.
            r.packets_lost = lost / st.last_samples;
            r.count_mismatch = (r.packets_lost & 0xFu) != count_gap;
        } else if (lost > 0) {
            // The packet count says how many packets modulo 16; the sample count says roughly
            // how many (packets may differ in size): take the agreeing count nearest to it.
            const std::uint64_t estimate = st.last_samples > 0 ? (lost + st.last_samples / 2) / st.last_samples : 0;
            std::uint64_t n = count_gap;
            if (estimate > count_gap) n += 16 * ((estimate - count_gap + 8) / 16);
            r.packets_lost = n == 0 ? 16 : n;
        }
    } else {
        r.packets_lost = count_gap;
        r.samples_lost = count_gap * st.last_samples;
    }
    st.uniform_size = st.uniform_size && num_samples == st.last_samples;
    st.last_count = f.packet_count;
    st.last_samples = num_samples;
    const auto own = position(f, nullptr);
    st.has_position = pos.has_value() || own.has_value();
    st.last_position = pos.value_or(own.value_or(0));
    st.next_position = saturating_add(st.last_position, num_samples);
    st.has_tsi_second = f.tsi != tsi_type::none;
    st.last_second = f.integer_timestamp;
    st.has_ps_time = f.tsi != tsi_type::none && f.tsf == tsf_type::real_time_ps;
    st.last_ps = f.fractional_timestamp;
    return r;
}

}  // namespace paq::io::vita49
