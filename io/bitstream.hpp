// The UDP datagram format of the output bitstreams: one datagram carries the
// 6144 data bits of one packet of one equalizer path. docs/BITSTREAM.md has the layout byte
// by byte; every multi-byte field is big-endian (network order).
//
//   format paq                format dqe                  format dqe-raw
//   +--------------------+    +--------------------+      +--------------------+
//   | paq header   72 B  |    | paq header   72 B  |      | DQE sync/ID/DQM 6 B|
//   +--------------------+    +--------------------+      +--------------------+
//   | data bits   768 B  |    | DQE sync/ID/DQM 6 B|      | data bits   768 B  |
//   +--------------------+    | data bits   768 B  |      +--------------------+
//        840 B                +--------------------+           774 B
//                                  846 B
//
// The paq header carries what a tester needs to count exactly: a per-stream sequence number
// (losses, duplicates, reordering) and the packet's absolute start sample (a PN checker skips
// packets the receiver missed, as dsp::stream_ber_counter does) and, since version 2, the UTC
// of the packet's first sample (version 1, 64 bytes, without it, is still decoded). dqe-raw is the bare IRIG 106
// DQE frame for consumers that frame-sync on 0xFAC4 and know nothing of paq (see
// docs/BITSTREAM.md for why it exists and what it loses). A soft stream's datagram is the paq
// header with payload type 2 and the packet's 6144 LLRs (encode_llr_datagram).
#pragma once

#include "dsp/names.hpp"
#include "dsp/batch.hpp"
#include "dsp/receiver_tables.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace paq::io {

inline constexpr std::uint32_t bitstream_magic = 0x50415142;  ///< "PAQB"
/// The version the encoder writes; the decoder reads it and every earlier one (1).
inline constexpr std::uint8_t bitstream_version = 2;
inline constexpr std::size_t bitstream_header_bytes = 72;     ///< version 2: + UTC at 64
inline constexpr std::size_t bitstream_header_bytes_v1 = 64;  ///< version 1
/// The UTC field's "not known" (a source without a time base): INT64_MIN, 0x8000000000000000.
inline constexpr std::int64_t bitstream_unknown_utc_ns = dsp::unknown_utc_ns;
inline constexpr std::size_t bitstream_payload_bytes = dsp::packed_data_bytes;  // 768
inline constexpr std::uint32_t bitstream_payload_bits = 8 * bitstream_payload_bytes;  // 6144
/// Stream ids 0 .. 11 (dsp::stream_name): the path index, + 6 for the paths decided by the
/// trellis when paqd runs receiver.detector both.
inline constexpr int bitstream_streams = dsp::chain::max_streams;
/// The best-path stream's id (publisher.best_destination): per packet the bits of the stream
/// with the lowest BEP estimate (dsp::best_stream), that stream's id in header byte 10.
inline constexpr std::uint8_t best_stream_id = 12;
/// A bitstream's name by stream id: dsp::stream_name, and "best" for the best-path stream.
[[nodiscard]] inline const char* bitstream_name(int stream) noexcept
{
    return stream == best_stream_id ? "best" : dsp::stream_name(stream);
}

/// IRIG 106 chapter 2 appendix G data-quality encapsulation: sync, ID word, DQM, then data.
inline constexpr std::uint16_t dqe_sync = 0xFAC4;
inline constexpr std::size_t dqe_header_bytes = 6;

/// What a datagram holds after the paq header (the header's payload-type byte).
enum class payload_type : std::uint8_t {
    bits = 0,  ///< the 768 data bytes
    dqe = 1,   ///< a DQE frame: 6-byte DQE header, then the 768 data bytes
    llrs = 2,  ///< the trellis's 6144 LLRs, a signed byte each (dsp::quantize_llr): a soft stream
    decoded = 3,  ///< a coded link's decoded information bits and its codewords' results: a decoded stream
};

/// A soft stream's datagram (publisher.llr_destinations): the paq header with payload type 2,
/// then the packet's 6144 data-bit LLRs (dsp::quantize_llr: 4 steps per nat, +-127), one
/// signed byte each in the order of the bits. 6216 bytes: above a 1500-byte MTU, so IP
/// fragments it off the host (docs/BITSTREAM.md, "Soft streams").
inline constexpr std::size_t llr_payload_bytes = waveform::data_bits;  // 6144
inline constexpr std::size_t llr_datagram_bytes = bitstream_header_bytes + llr_payload_bytes;

/// A decoded stream's datagram (publisher.decoded_destinations, receiver.fec): the paq header
/// with payload type 3, the code in byte 9 (dsp::fec_code: 1 ar4ja-1024-1/2, 2 ar4ja-1024-2/3,
/// 5 ar4ja-4096-2/3) and the information bits per packet as its payload bit count (3072 or
/// 4096); then the packet's decoded information bits, packed MSB first (384 or 512 bytes), and
/// one 4-byte record per codeword of the data field, in order: status (1 converged, 0 failed),
/// iterations, and the channel bit errors (big-endian u16; 0 for a failed codeword).
/// The continuous stream (3 ar4ja-1024-4/5, 4 ar4ja-4096-1/2, 6 ar4ja-4096-4/5): the frames
/// whose last bit the packet holds (0 .. 5, 0 .. 1, 0 .. 2 of them), the payload bit count
/// their information bits (frames x k); the payload begins with the first frame's number in the
/// run (big-endian int64, >= 0: a jump is frames lost), then their information bits and their
/// records.
inline constexpr std::size_t codeword_record_bytes = 4;
inline constexpr std::size_t frame_number_bytes = 8;
/// The most codewords a decoded datagram holds (ar4ja-1024-4/5's frames: 5).
inline constexpr int max_field_codewords = 5;
/// A decoded datagram of `codewords` codewords: a codeword-aligned code's are its data field's
/// (framing.codewords), the continuous stream's the frames that end in the packet.
[[nodiscard]] constexpr std::size_t decoded_datagram_bytes(const dsp::fec_framing& f, int codewords) noexcept
{
    return bitstream_header_bytes + (f.continuous() ? frame_number_bytes : 0) +
           static_cast<std::size_t>(codewords) * (static_cast<std::size_t>(f.k / 8) + codeword_record_bytes);
}
[[nodiscard]] constexpr std::size_t decoded_datagram_bytes(const dsp::fec_framing& f) noexcept { return decoded_datagram_bytes(f, f.codewords); }
/// The largest decoded datagram: two frames of ar4ja-4096-4/5, 72 + 8 + 1024 + 8 = 1112 bytes.
inline constexpr std::size_t decoded_max_datagram_bytes = bitstream_header_bytes + frame_number_bytes + 2 * (512 + codeword_record_bytes);

/// The on-wire formats a publisher can send.
enum class bitstream_format : std::uint8_t {
    paq,      ///< paq header + data bits
    dqe,      ///< paq header + DQE frame
    dqe_raw,  ///< the bare DQE frame, no paq header
};
inline constexpr name_table<bitstream_format, 4> bitstream_format_names{{{"paq", bitstream_format::paq},
                                                                         {"dqe", bitstream_format::dqe},
                                                                         {"dqe-raw", bitstream_format::dqe_raw},
                                                                         {"dqe_raw", bitstream_format::dqe_raw}}};

/// Accepts "paq", "dqe", "dqe-raw" (also "dqe_raw"). Throws std::invalid_argument naming the
/// bad value and listing the accepted ones.
[[nodiscard]] bitstream_format parse_bitstream_format(std::string_view text);
[[nodiscard]] constexpr std::string_view to_string(bitstream_format f) noexcept { return name_of(bitstream_format_names, f); }

/// Datagram size in bytes as the encoder writes it: 840 (paq), 846 (dqe), 774 (dqe-raw).
[[nodiscard]] constexpr std::size_t datagram_bytes(bitstream_format f) noexcept
{
    switch (f) {
    case bitstream_format::paq: return bitstream_header_bytes + bitstream_payload_bytes;
    case bitstream_format::dqe: return bitstream_header_bytes + dqe_header_bytes + bitstream_payload_bytes;
    case bitstream_format::dqe_raw: return dqe_header_bytes + bitstream_payload_bytes;
    }
    return 0;
}
inline constexpr std::size_t bitstream_max_datagram_bytes = datagram_bytes(bitstream_format::dqe);

// ---------------------------------------------------------------------------------------
// DQM (IRIG 106 chapter 2 appendix 2-G): DQM = min(round(-log10(LR) / 12 * 2^16), 2^16 - 1),
// LR = BEP / (1 - BEP).
//
// The formula is undefined at BEP = 0 (LR = 0) and negative above BEP = 0.5 (LR > 1), and a
// NaN BEP would make it NaN, so the BEP is clamped first:
//   NaN                -> 0.5    (unknown quality is reported as worst, DQM 0)
//   BEP >= 0.5         -> 0.5    (a BEP above one half carries no more information: DQM 0)
//   BEP <= dqm_bep_min -> dqm_bep_min = 1e-12 (LR ~ 1e-12, -log10(LR)/12 ~ 1: DQM 65535)
// DQM 65535 is reached from LR <= 10^(-12 * 65534.5 / 65536) ~ 1.0004e-12 down, so the clamp
// changes no DQM value; it only keeps log10 finite.

inline constexpr double dqm_bep_min = 1e-12;
inline constexpr double dqm_bep_max = 0.5;

/// The BEP the DQM is computed from: clamped to [dqm_bep_min, dqm_bep_max], NaN -> 0.5.
[[nodiscard]] double clamp_bep(double bep) noexcept;
/// DQM of a bit error probability, per the formula above (after clamp_bep).
[[nodiscard]] std::uint16_t dqm_from_bep(double bep) noexcept;
/// The BEP a DQM stands for (the formula's inverse, to within its rounding):
/// LR = 10^(-12 * dqm / 2^16), BEP = LR / (1 + LR).
[[nodiscard]] double bep_from_dqm(std::uint16_t dqm) noexcept;

/// What goes into the DQE ID word, a 16-bit "ID" after the sync. IRIG 106-17 appendix 2-G (as
/// transcribed in receiver manuals) splits it into 12 reserved bits and a 4-bit version, all
/// zero. So the default is 0, which a conformant consumer expects; use_stream_id puts the
/// stream id (0..11, 12 the best-path stream) there instead, which lets a tester tell bare DQE
/// frames of several streams apart on one port but is not conformant.
struct dqe_id_config {
    bool use_stream_id = false;
    std::uint16_t fixed_id = 0;  ///< used when !use_stream_id; 0 .. 65535

    [[nodiscard]] std::uint16_t id_for(int stream) const noexcept
    {
        return use_stream_id ? static_cast<std::uint16_t>(stream) : fixed_id;
    }
};

// ---------------------------------------------------------------------------------------

/// The paq header's per-datagram fields (the constant ones, magic/version/lengths, are
/// written and checked by the codec).
struct datagram_header {
    std::uint8_t stream_id = 0;       ///< 0 none, 1 zf, 2 mmse, 3 cma, 4 fde1, 5 fde2; 6 .. 11 the same by the trellis (detector both)
    std::uint64_t sequence = 0;       ///< per stream, consecutive from 0
    std::uint64_t packet_index = 0;   ///< packets published since start; same in all streams
    std::uint64_t batch_index = 0;    ///< dsp::batch_output::batch_index
    std::uint64_t start_sample = 0;   ///< absolute sample index of the packet start
    std::uint32_t flags = 0;          ///< dsp::packet_flag bits
    float bep_estimate = 0.5f;        ///< this stream's BEP estimate (unclamped); the best-path stream's: its chosen stream's
    /// The best-path stream (stream id best_stream_id): the stream 0 .. 11 whose bits and BEP
    /// it carries in this datagram (header byte 10). 0 in every other stream's datagram.
    std::uint8_t chosen_stream = 0;
    float cfo_rad_per_sample = 0.0f;  ///< the packet's CFO estimate
    float ebn0_db = 0.0f;             ///< the packet's Eb/N0 estimate
    /// UTC of the packet's first sample, ns since 1970 (packet_record::utc_ns); version 2
    /// only; bitstream_unknown_utc_ns when unknown (and always in a version 1 datagram).
    std::int64_t utc_ns = bitstream_unknown_utc_ns;

    friend bool operator==(const datagram_header&, const datagram_header&) = default;
};

/// The DQE frame's header words.
struct dqe_words {
    std::uint16_t id = 0;
    std::uint16_t dqm = 0;

    friend bool operator==(const dqe_words&, const dqe_words&) = default;
};

/// Writes one datagram into `out` and returns its size, datagram_bytes(format). For the dqe
/// formats the DQM is dqm_from_bep(header.bep_estimate) and the ID word is `dqe_id`; dqe-raw
/// writes no paq header, so `header` only supplies the BEP. bits: the 768 data bytes, MSB
/// first. Throws std::invalid_argument when bits is not 768 bytes, out is too small, the
/// stream id is above 12, or the chosen stream is above 11 for the best-path stream (12) or not
/// 0 for another (caller bugs; a well-formed call never throws).
std::size_t encode_datagram(bitstream_format format, const datagram_header& header, std::uint16_t dqe_id,
                            std::span<const std::uint8_t> bits, std::span<std::uint8_t> out);

/// Writes one LLR datagram (payload type 2) into `out` and returns its size,
/// llr_datagram_bytes. Throws std::invalid_argument when llrs is not 6144 bytes, out is too
/// small or the stream id is above 11 (caller bugs).
std::size_t encode_llr_datagram(const datagram_header& header, std::span<const std::int8_t> llrs, std::span<std::uint8_t> out);

/// Writes one decoded stream's datagram (payload type 3) into `out` and returns its size,
/// decoded_datagram_bytes(framing). info: framing.info_bytes() bytes; results: framing.codewords
/// of them. Throws std::invalid_argument on sizes that do not match, a code without a framing,
/// an output too small or a stream id above 11 (caller bugs).
std::size_t encode_decoded_datagram(const datagram_header& header, dsp::fec_code code, std::span<const std::uint8_t> info,
                                    std::span<const dsp::codeword_result> results, std::span<std::uint8_t> out);
/// The continuous stream's (a code without a codeword-aligned framing): one packet's decoded
/// frames, results.size() of them (0 .. framing.codewords), `info` their information bits
/// (k / 8 bytes each), `first_frame` the first one's number in the run (>= 0). Its size,
/// decoded_datagram_bytes(framing, frames). Throws std::invalid_argument as
/// encode_decoded_datagram does, and for a codeword-aligned code or a negative frame number.
std::size_t encode_stream_decoded_datagram(const datagram_header& header, dsp::fec_code code, std::int64_t first_frame,
                                           std::span<const std::uint8_t> info, std::span<const dsp::codeword_result> results,
                                           std::span<std::uint8_t> out);

/// A decoded stream's payload beyond its information bits.
struct decoded_fec {
    dsp::fec_code code = dsp::fec_code::none;
    int codewords = 0;  ///< records in `results`
    std::array<dsp::codeword_result, max_field_codewords> results{};
    /// The continuous stream: the number of the first frame in the run; -1 for a
    /// codeword-aligned code.
    std::int64_t first_frame = -1;
};

/// A datagram as the decoder found it. `bits` points into the decoded buffer.
struct decoded_datagram {
    bitstream_format format = bitstream_format::paq;
    datagram_header header{};        ///< defaults for dqe-raw (no paq header)
    std::uint8_t version = 0;        ///< the paq header's version (1 or 2); 0 for dqe-raw
    std::size_t header_length = 0;   ///< the paq header's length field; 0 for dqe-raw
    std::optional<dqe_words> dqe;    ///< present for dqe and dqe-raw
    std::span<const std::uint8_t> bits;  ///< the 768 data bytes, MSB first; a decoded stream's information bytes
    /// Present for a decoded stream's datagram (payload type 3): the code and the codewords'
    /// results; `bits` then holds the decoded information bits (fec_framing::info_bytes()).
    std::optional<decoded_fec> fec;
};

struct decode_result {
    decoded_datagram datagram;  ///< meaningful when ok()
    std::string error;          ///< empty when valid; otherwise names the field and the value

    [[nodiscard]] bool ok() const noexcept { return error.empty(); }
};

/// Decodes and validates one datagram of any format: a paq header is recognised by its magic,
/// a bare DQE frame by its sync word. Rejected, with the field named: too short, unknown
/// magic/sync, version (1 and 2 are read), header length (at least 64 for version 1, 72 for
/// version 2; more is skipped), stream id (0 .. 12; 12, the best-path stream, carries bits
/// only, its chosen stream 0 .. 11 in byte 10), reserved bytes not zero, payload bit count,
/// payload type, datagram length not matching the payload, DQE sync inside a dqe payload; for a
/// decoded stream's datagram (payload type 3) a code other than the six, a payload bit count
/// other than its information bits (the continuous stream: not whole frames, or more than a
/// packet holds), a negative frame number, a codeword status other than 0 or 1.
/// An LLR datagram (payload type 2, 6144 payload bytes) is rejected with a message that says
/// what it is.
/// Never throws except std::bad_alloc for the message.
[[nodiscard]] decode_result decode_datagram(std::span<const std::uint8_t> datagram);

/// An LLR datagram as the decoder found it. `llrs` points into the decoded buffer.
struct decoded_llr_datagram {
    datagram_header header{};
    std::uint8_t version = 0;          ///< 1 or 2
    std::size_t header_length = 0;
    std::span<const std::int8_t> llrs;  ///< the 6144 LLRs, in the order of the bits
};

struct llr_decode_result {
    decoded_llr_datagram datagram;  ///< meaningful when ok()
    std::string error;              ///< empty when valid; otherwise names the field and the value

    [[nodiscard]] bool ok() const noexcept { return error.empty(); }
};

/// Decodes and validates one LLR datagram: the paq header's checks (decode_datagram's; a bare
/// DQE frame is named as one), then payload type 2 and a payload of exactly 6144 bytes. Never
/// throws except std::bad_alloc.
[[nodiscard]] llr_decode_result decode_llr_datagram(std::span<const std::uint8_t> datagram);

}  // namespace paq::io
