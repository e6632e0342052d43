#include "io/bitstream.hpp"

#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace paq::io {

namespace {

// Offsets of the paq header fields (docs/BITSTREAM.md).
constexpr std::size_t off_magic = 0;
constexpr std::size_t off_version = 4;
constexpr std::size_t off_payload_type = 5;
constexpr std::size_t off_header_length = 6;
constexpr std::size_t off_stream_id = 8;
constexpr std::size_t off_reserved8 = 9;
constexpr std::size_t off_reserved16 = 10;
constexpr std::size_t off_flags = 12;
constexpr std::size_t off_sequence = 16;
constexpr std::size_t off_packet_index = 24;
constexpr std::size_t off_batch_index = 32;
constexpr std::size_t off_start_sample = 40;
constexpr std::size_t off_bep = 48;
constexpr std::size_t off_cfo = 52;
constexpr std::size_t off_ebn0 = 56;
constexpr std::size_t off_payload_bits = 60;
static_assert(off_payload_bits + 4 == bitstream_header_bytes_v1);
constexpr std::size_t off_utc = 64;  // version 2
static_assert(off_utc + 8 == bitstream_header_bytes);

void put16(std::uint8_t* p, std::uint16_t v) noexcept
{
    p[0] = static_cast<std::uint8_t>(v >> 8);
    p[1] = static_cast<std::uint8_t>(v);
}

void put32(std::uint8_t* p, std::uint32_t v) noexcept
{
    for (int i = 0; i < 4; ++i) p[i] = static_cast<std::uint8_t>(v >> (24 - 8 * i));
}

void put64(std::uint8_t* p, std::uint64_t v) noexcept
{
    for (int i = 0; i < 8; ++i) p[i] = static_cast<std::uint8_t>(v >> (56 - 8 * i));
}

[[nodiscard]] std::uint16_t get16(const std::uint8_t* p) noexcept
{
    return static_cast<std::uint16_t>((p[0] << 8) | p[1]);
}

[[nodiscard]] std::uint32_t get32(const std::uint8_t* p) noexcept
{
    std::uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v = (v << 8) | p[i];
    return v;
}

[[nodiscard]] std::uint64_t get64(const std::uint8_t* p) noexcept
{
    std::uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v = (v << 8) | p[i];
    return v;
}

[[nodiscard]] std::string hex(std::uint64_t v, int digits)
{
    char buf[24];
    std::snprintf(buf, sizeof buf, "0x%0*llX", digits, static_cast<unsigned long long>(v));
    return buf;
}

void put_dqe(std::uint8_t* p, std::uint16_t id, float bep) noexcept
{
    put16(p, dqe_sync);
    put16(p + 2, id);
    put16(p + 4, dqm_from_bep(bep));
}

// Checks a DQE frame of exactly dqe_header_bytes + 768 bytes at p; `where` prefixes messages.
[[nodiscard]] std::string check_dqe(const std::uint8_t* p, std::size_t size, const char* where)
{
    if (size != dqe_header_bytes + bitstream_payload_bytes) {
        return std::string(where) + " is " + std::to_string(size) + " bytes, expected " +
               std::to_string(dqe_header_bytes + bitstream_payload_bytes) + " (6-byte DQE header + " +
               std::to_string(bitstream_payload_bytes) + " data bytes)";
    }
    if (get16(p) != dqe_sync) {
        return std::string(where) + ": DQE sync is " + hex(get16(p), 4) + ", expected 0xFAC4";
    }
    return {};
}

}  // namespace

bitstream_format parse_bitstream_format(std::string_view text)
{
    return parse_named(bitstream_format_names, text, "bitstream format");
}

double clamp_bep(double bep) noexcept
{
    if (std::isnan(bep) || bep >= dqm_bep_max) return dqm_bep_max;
    if (bep <= dqm_bep_min) return dqm_bep_min;
    return bep;
}

std::uint16_t dqm_from_bep(double bep) noexcept
{
    const double p = clamp_bep(bep);
    // log10(p) - log10(1 - p) rather than log10(p / (1 - p)): no cancellation for tiny p,
    // and log1p keeps 1 - p exact where it matters.
    const double minus_log10_lr = -(std::log10(p) - std::log1p(-p) / std::log(10.0));
    const double dqm = std::round(minus_log10_lr / 12.0 * 65536.0);
    if (!(dqm > 0.0)) return 0;  // p = 0.5 gives -0.0 at worst
    return dqm >= 65535.0 ? std::uint16_t{65535} : static_cast<std::uint16_t>(dqm);
}

double bep_from_dqm(std::uint16_t dqm) noexcept
{
    const double lr = std::pow(10.0, -12.0 * static_cast<double>(dqm) / 65536.0);
    return lr / (1.0 + lr);
}

namespace {

/// The paq header (version 2) of a datagram with payload `type`. A decoded stream's datagram
/// puts its code in byte 9 and its information bits in the payload bit count.
void put_header(std::uint8_t* p, const datagram_header& header, payload_type type, std::uint8_t code = 0,
                std::uint32_t payload_bits = bitstream_payload_bits) noexcept
{
    put32(p + off_magic, bitstream_magic);
    p[off_version] = bitstream_version;
    p[off_payload_type] = static_cast<std::uint8_t>(type);
    put16(p + off_header_length, static_cast<std::uint16_t>(bitstream_header_bytes));
    p[off_stream_id] = header.stream_id;
    p[off_reserved8] = code;
    p[off_reserved16] = header.chosen_stream;
    p[off_reserved16 + 1] = 0;
    put32(p + off_flags, header.flags);
    put64(p + off_sequence, header.sequence);
    put64(p + off_packet_index, header.packet_index);
    put64(p + off_batch_index, header.batch_index);
    put64(p + off_start_sample, header.start_sample);
    put32(p + off_bep, std::bit_cast<std::uint32_t>(header.bep_estimate));
    put32(p + off_cfo, std::bit_cast<std::uint32_t>(header.cfo_rad_per_sample));
    put32(p + off_ebn0, std::bit_cast<std::uint32_t>(header.ebn0_db));
    put32(p + off_payload_bits, payload_bits);
    put64(p + off_utc, static_cast<std::uint64_t>(header.utc_ns));
}

/// The stream id of a datagram: 0 .. 11, or with `best` also the best-path stream (12), whose
/// chosen stream is 0 .. 11 (every other's 0).
void check_stream_id(const char* who, const datagram_header& header, bool best = false)
{
    const int last = best ? best_stream_id : bitstream_streams - 1;
    if (header.stream_id > last) {
        throw std::invalid_argument(std::string(who) + ": stream id " + std::to_string(header.stream_id) +
                                    " is out of range (allowed: 0 .. " + std::to_string(last) + ")");
    }
    const bool is_best = header.stream_id == best_stream_id;
    if (is_best ? header.chosen_stream >= bitstream_streams : header.chosen_stream != 0) {
        throw std::invalid_argument(std::string(who) + ": chosen stream " + std::to_string(header.chosen_stream) + " in stream " +
                                    std::to_string(header.stream_id) + " (allowed: " + (is_best ? "0 .. 11" : "0") + ")");
    }
}

/// The codes a decoded stream may carry, as byte 9 holds them: "1 (ar4ja-1024-1/2), 2
/// (ar4ja-1024-2/3), ... or 6 (ar4ja-4096-4/5)".
[[nodiscard]] std::string framed_codes()
{
    std::vector<std::string> v;
    for (const auto& [name, code] : dsp::fec_names) {
        if (dsp::framing_for(code)) v.push_back(std::to_string(static_cast<int>(code)) + " (" + std::string(name) + ")");
    }
    std::string out;
    for (std::size_t i = 0; i < v.size(); ++i) out += (i == 0 ? "" : i + 1 == v.size() ? " or " : ", ") + v[i];
    return out;
}

/// A paq header as read: its fields, version, length and payload type.
struct read_header {
    datagram_header header{};
    std::uint8_t version = 0;
    std::size_t length = 0;
    std::uint8_t type = 0;
    std::uint8_t code = 0;  ///< byte 9: a decoded stream's code (0 otherwise)
};

/// Reads and checks the paq header of a datagram that starts with the paq magic or not:
/// an empty string, or what is wrong with it (the field named). The payload type is read,
/// not checked.
[[nodiscard]] std::string read_paq_header(const std::uint8_t* p, std::size_t n, read_header& out)
{
    if (n < bitstream_header_bytes_v1) {
        return "datagram of " + std::to_string(n) + " bytes is shorter than the " + std::to_string(bitstream_header_bytes_v1) +
               "-byte paq header (version 1) and is no DQE frame";
    }
    if (get32(p + off_magic) != bitstream_magic) {
        return "magic is " + hex(get32(p + off_magic), 8) + ", expected 0x50415142 ('PAQB'), and the first word is no DQE sync 0xFAC4";
    }
    const std::uint8_t version = p[off_version];
    if (version < 1 || version > bitstream_version) {
        return "version is " + std::to_string(version) + ", this decoder reads versions 1 .. " + std::to_string(bitstream_version);
    }
    const std::size_t header_length = get16(p + off_header_length);
    const std::size_t min_header = version == 1 ? bitstream_header_bytes_v1 : bitstream_header_bytes;
    if (header_length < min_header || header_length > n) {
        return "header length is " + std::to_string(header_length) + ", allowed for version " + std::to_string(version) + ": " +
               std::to_string(min_header) + " .. datagram length " + std::to_string(n);
    }
    const std::uint8_t type = p[off_payload_type];
    const bool bits_payload = type == static_cast<std::uint8_t>(payload_type::bits) || type == static_cast<std::uint8_t>(payload_type::dqe);
    if (p[off_stream_id] > (bits_payload ? best_stream_id : bitstream_streams - 1)) {
        return "stream id is " + std::to_string(p[off_stream_id]) + ", allowed 0 .. 11" +
               (bits_payload ? " and 12 (the best-path stream)" : " for payload type " + std::to_string(type));
    }
    const std::uint32_t payload_bits = get32(p + off_payload_bits);
    if (p[off_stream_id] == best_stream_id) {
        // Byte 10 is the chosen stream.
        if (p[off_reserved8] != 0 || p[off_reserved16 + 1] != 0) {
            return "reserved bytes 9 and 11 are " + hex(p[off_reserved8], 2) + " " + hex(p[off_reserved16 + 1], 2) + ", must be zero";
        }
        if (p[off_reserved16] >= bitstream_streams) {
            return "best-path stream: chosen stream (byte 10) is " + std::to_string(p[off_reserved16]) + ", allowed 0 .. 11";
        }
        if (payload_bits != bitstream_payload_bits) {
            return "payload bit count is " + std::to_string(payload_bits) + ", expected " + std::to_string(bitstream_payload_bits);
        }
    } else if (type == static_cast<std::uint8_t>(payload_type::decoded)) {
        // Byte 9 is the code; the payload bits are its information bits per packet.
        if (get16(p + off_reserved16) != 0) {
            return "reserved bytes 10..11 are " + hex(get16(p + off_reserved16), 4) + ", must be zero";
        }
        const std::uint8_t code = p[off_reserved8];
        const auto framing = code < dsp::fec_names.size() ? dsp::framing_for(static_cast<dsp::fec_code>(code)) : std::nullopt;
        if (!framing) return "decoded stream: code (byte 9) is " + std::to_string(code) + ", allowed " + framed_codes();
        if (framing->continuous()) {
            const auto k = static_cast<std::uint32_t>(framing->k);
            if (payload_bits % k != 0 || payload_bits / k > static_cast<std::uint32_t>(framing->codewords)) {
                return "decoded stream: payload bit count is " + std::to_string(payload_bits) + ", " +
                       std::string(dsp::to_string(static_cast<dsp::fec_code>(code))) + " carries frames of " + std::to_string(k) +
                       " information bits, at most " + std::to_string(framing->codewords) + " a packet";
            }
        } else if (payload_bits != static_cast<std::uint32_t>(framing->info_bits())) {
            return "decoded stream: payload bit count is " + std::to_string(payload_bits) + ", " +
                   std::string(dsp::to_string(static_cast<dsp::fec_code>(code))) + " carries " +
                   std::to_string(framing->info_bits()) + " information bits per packet";
        }
    } else {
        if (p[off_reserved8] != 0 || get16(p + off_reserved16) != 0) {
            return "reserved bytes 9..11 are " + hex(p[off_reserved8], 2) + " " + hex(get16(p + off_reserved16), 4) + ", must be zero";
        }
        if (payload_bits != bitstream_payload_bits) {
            return "payload bit count is " + std::to_string(payload_bits) + ", expected " + std::to_string(bitstream_payload_bits);
        }
    }
    datagram_header& h = out.header;
    h.stream_id = p[off_stream_id];
    h.chosen_stream = h.stream_id == best_stream_id ? p[off_reserved16] : std::uint8_t{0};
    h.flags = get32(p + off_flags);
    h.sequence = get64(p + off_sequence);
    h.packet_index = get64(p + off_packet_index);
    h.batch_index = get64(p + off_batch_index);
    h.start_sample = get64(p + off_start_sample);
    h.bep_estimate = std::bit_cast<float>(get32(p + off_bep));
    h.cfo_rad_per_sample = std::bit_cast<float>(get32(p + off_cfo));
    h.ebn0_db = std::bit_cast<float>(get32(p + off_ebn0));
    h.utc_ns = version >= 2 ? static_cast<std::int64_t>(get64(p + off_utc)) : bitstream_unknown_utc_ns;
    out.version = version;
    out.length = header_length;
    out.type = type;
    out.code = p[off_reserved8];
    return {};
}

/// "datagram length is N bytes, header length H + payload P = H + P expected".
[[nodiscard]] std::string length_error(std::size_t n, std::size_t header_length, std::size_t payload)
{
    return "datagram length is " + std::to_string(n) + " bytes, header length " + std::to_string(header_length) + " + payload " +
           std::to_string(payload) + " = " + std::to_string(header_length + payload) + " expected";
}

}  // namespace

std::size_t encode_datagram(bitstream_format format, const datagram_header& header, std::uint16_t dqe_id,
                            std::span<const std::uint8_t> bits, std::span<std::uint8_t> out)
{
    const std::size_t size = datagram_bytes(format);
    if (bits.size() != bitstream_payload_bytes) {
        throw std::invalid_argument("encode_datagram: bits is " + std::to_string(bits.size()) + " bytes, expected " +
                                    std::to_string(bitstream_payload_bytes));
    }
    if (out.size() < size) {
        throw std::invalid_argument("encode_datagram: output buffer is " + std::to_string(out.size()) +
                                    " bytes, a " + std::string(to_string(format)) + " datagram needs " +
                                    std::to_string(size));
    }
    check_stream_id("encode_datagram", header, true);
    std::uint8_t* p = out.data();
    if (format == bitstream_format::dqe_raw) {
        put_dqe(p, dqe_id, header.bep_estimate);
        std::memcpy(p + dqe_header_bytes, bits.data(), bitstream_payload_bytes);
        return size;
    }
    put_header(p, header, format == bitstream_format::dqe ? payload_type::dqe : payload_type::bits);
    std::uint8_t* payload = p + bitstream_header_bytes;
    if (format == bitstream_format::dqe) {
        put_dqe(payload, dqe_id, header.bep_estimate);
        payload += dqe_header_bytes;
    }
    std::memcpy(payload, bits.data(), bitstream_payload_bytes);
    return size;
}

std::size_t encode_llr_datagram(const datagram_header& header, std::span<const std::int8_t> llrs, std::span<std::uint8_t> out)
{
    if (llrs.size() != llr_payload_bytes) {
        throw std::invalid_argument("encode_llr_datagram: llrs is " + std::to_string(llrs.size()) + " bytes, expected " +
                                    std::to_string(llr_payload_bytes));
    }
    if (out.size() < llr_datagram_bytes) {
        throw std::invalid_argument("encode_llr_datagram: output buffer is " + std::to_string(out.size()) + " bytes, an LLR datagram needs " +
                                    std::to_string(llr_datagram_bytes));
    }
    check_stream_id("encode_llr_datagram", header);
    put_header(out.data(), header, payload_type::llrs);
    std::memcpy(out.data() + bitstream_header_bytes, llrs.data(), llr_payload_bytes);
    return llr_datagram_bytes;
}

namespace {

/// A decoded datagram of `code` (its framing `framing`) with results.size() codewords: sizes
/// checked against the framing (`frames` allowed: exactly its codewords, or for the continuous
/// stream up to them), the header, the continuous stream's first frame number, the information
/// bytes and the records. `who` names the caller in errors.
std::size_t put_decoded(const char* who, const datagram_header& header, dsp::fec_code code, const std::optional<dsp::fec_framing>& framing,
                        std::int64_t first_frame, std::span<const std::uint8_t> info, std::span<const dsp::codeword_result> results,
                        std::span<std::uint8_t> out)
{
    const std::string name(dsp::to_string(code));
    if (!framing) throw std::invalid_argument(std::string(who) + ": code " + name + " has no framing of this kind");
    const auto words = static_cast<int>(results.size());
    const bool count_ok = framing->continuous() ? words <= framing->codewords : words == framing->codewords;
    if (!count_ok || info.size() != results.size() * static_cast<std::size_t>(framing->k / 8)) {
        throw std::invalid_argument(std::string(who) + ": " + std::to_string(info.size()) + " information bytes and " +
                                    std::to_string(results.size()) + " codewords, " + name + " has " + std::to_string(framing->k / 8) +
                                    " a codeword and " + (framing->continuous() ? "at most " : "") + std::to_string(framing->codewords));
    }
    if (framing->continuous() && first_frame < 0) {
        throw std::invalid_argument(std::string(who) + ": frame number " + std::to_string(first_frame) + " (must be >= 0)");
    }
    const std::size_t size = decoded_datagram_bytes(*framing, words);
    if (out.size() < size) {
        throw std::invalid_argument(std::string(who) + ": output buffer is " + std::to_string(out.size()) + " bytes, this datagram needs " +
                                    std::to_string(size));
    }
    check_stream_id(who, header);
    std::uint8_t* p = out.data();
    put_header(p, header, payload_type::decoded, static_cast<std::uint8_t>(code), static_cast<std::uint32_t>(words * framing->k));
    p += bitstream_header_bytes;
    if (framing->continuous()) {
        put64(p, static_cast<std::uint64_t>(first_frame));
        p += frame_number_bytes;
    }
    if (!info.empty()) std::memcpy(p, info.data(), info.size());
    p += info.size();
    for (const dsp::codeword_result& r : results) {
        p[0] = r.converged ? 1 : 0;
        p[1] = r.iterations;
        put16(p + 2, r.converged ? r.channel_errors : std::uint16_t{0});
        p += codeword_record_bytes;
    }
    return size;
}

}  // namespace

std::size_t encode_decoded_datagram(const datagram_header& header, dsp::fec_code code, std::span<const std::uint8_t> info,
                                    std::span<const dsp::codeword_result> results, std::span<std::uint8_t> out)
{
    return put_decoded("encode_decoded_datagram", header, code, dsp::aligned_framing_for(code), -1, info, results, out);
}

std::size_t encode_stream_decoded_datagram(const datagram_header& header, dsp::fec_code code, std::int64_t first_frame,
                                           std::span<const std::uint8_t> info, std::span<const dsp::codeword_result> results,
                                           std::span<std::uint8_t> out)
{
    auto framing = dsp::framing_for(code);
    if (framing && !framing->continuous()) framing.reset();
    return put_decoded("encode_stream_decoded_datagram", header, code, framing, first_frame, info, results, out);
}

decode_result decode_datagram(std::span<const std::uint8_t> datagram)
{
    decode_result r;
    const std::uint8_t* p = datagram.data();
    const std::size_t n = datagram.size();

    if (n >= 2 && get16(p) == dqe_sync) {
        r.error = check_dqe(p, n, "bare DQE frame (dqe-raw)");
        if (!r.ok()) return r;
        r.datagram.format = bitstream_format::dqe_raw;
        r.datagram.dqe = dqe_words{get16(p + 2), get16(p + 4)};
        r.datagram.bits = datagram.subspan(dqe_header_bytes);
        return r;
    }
    read_header h;
    r.error = read_paq_header(p, n, h);
    if (!r.ok()) return r;
    if (h.type == static_cast<std::uint8_t>(payload_type::llrs) && n - h.length == llr_payload_bytes) {
        r.error = "payload type is 2: the trellis's LLRs (a soft stream, publisher.llr_destinations), not a bitstream";
        return r;
    }
    if (h.type != static_cast<std::uint8_t>(payload_type::bits) && h.type != static_cast<std::uint8_t>(payload_type::dqe) &&
        h.type != static_cast<std::uint8_t>(payload_type::decoded)) {
        r.error = "payload type is " + std::to_string(h.type) + ", allowed 0 (bits), 1 (dqe) or 3 (decoded)";
        return r;
    }
    const std::size_t payload_size = n - h.length;
    const std::uint8_t* payload = p + h.length;
    if (h.type == static_cast<std::uint8_t>(payload_type::decoded)) {
        const auto code = static_cast<dsp::fec_code>(h.code);
        const dsp::fec_framing framing = *dsp::framing_for(code);  // read_paq_header checked it
        // The codewords: the data field's, or the continuous stream's frames (the payload bits
        // checked to be whole frames, at most a packet's).
        const int words = framing.continuous() ? static_cast<int>(get32(p + off_payload_bits) / static_cast<std::uint32_t>(framing.k)) : framing.codewords;
        const std::size_t lead = framing.continuous() ? frame_number_bytes : 0;
        const std::size_t info = static_cast<std::size_t>(words) * static_cast<std::size_t>(framing.k / 8);
        const std::size_t records = codeword_record_bytes * static_cast<std::size_t>(words);
        if (payload_size != lead + info + records) {
            r.error = length_error(n, h.length, lead + info + records) + " (" + (lead ? "a frame number + " : "") + std::to_string(info) +
                      " information bytes + " + std::to_string(words) + " codeword records)";
            return r;
        }
        decoded_fec f;
        f.code = code;
        f.codewords = words;
        if (framing.continuous()) {
            f.first_frame = static_cast<std::int64_t>(get64(payload));
            if (f.first_frame < 0) {
                r.error = "decoded stream: first frame number is " + std::to_string(f.first_frame) + ", must be >= 0";
                return r;
            }
        }
        for (int c = 0; c < words; ++c) {
            const std::uint8_t* rec = payload + lead + info + codeword_record_bytes * static_cast<std::size_t>(c);
            if (rec[0] > 1) {
                r.error = "decoded stream: codeword " + std::to_string(c) + "'s status is " + std::to_string(rec[0]) +
                          ", allowed 0 (failed) or 1 (converged)";
                return r;
            }
            f.results[static_cast<std::size_t>(c)] = dsp::codeword_result{rec[1], rec[0], get16(rec + 2)};
        }
        r.datagram.format = bitstream_format::paq;
        r.datagram.bits = datagram.subspan(h.length + lead, info);
        r.datagram.fec = f;
    } else if (h.type == static_cast<std::uint8_t>(payload_type::dqe)) {
        r.error = check_dqe(payload, payload_size, "DQE payload");
        if (!r.ok()) return r;
        r.datagram.format = bitstream_format::dqe;
        r.datagram.dqe = dqe_words{get16(payload + 2), get16(payload + 4)};
        r.datagram.bits = datagram.subspan(h.length + dqe_header_bytes);
    } else {
        if (payload_size != bitstream_payload_bytes) {
            r.error = length_error(n, h.length, bitstream_payload_bytes);
            return r;
        }
        r.datagram.format = bitstream_format::paq;
        r.datagram.bits = datagram.subspan(h.length);
    }
    r.datagram.header = h.header;
    r.datagram.version = h.version;
    r.datagram.header_length = h.length;
    return r;
}

llr_decode_result decode_llr_datagram(std::span<const std::uint8_t> datagram)
{
    llr_decode_result r;
    if (datagram.size() >= 2 && get16(datagram.data()) == dqe_sync) {
        r.error = "a bare DQE frame (dqe-raw, sync 0xFAC4): a bitstream, not an LLR datagram";
        return r;
    }
    read_header h;
    r.error = read_paq_header(datagram.data(), datagram.size(), h);
    if (!r.ok()) return r;
    if (h.type != static_cast<std::uint8_t>(payload_type::llrs)) {
        r.error = "payload type is " + std::to_string(h.type) + ", expected 2 (LLRs); 0, 1 and 3 are bitstreams";
        return r;
    }
    if (datagram.size() - h.length != llr_payload_bytes) {
        r.error = length_error(datagram.size(), h.length, llr_payload_bytes);
        return r;
    }
    r.datagram.header = h.header;
    r.datagram.version = h.version;
    r.datagram.header_length = h.length;
    const auto payload = datagram.subspan(h.length);
    r.datagram.llrs = {reinterpret_cast<const std::int8_t*>(payload.data()), payload.size()};
    return r;
}

}  // namespace paq::io
