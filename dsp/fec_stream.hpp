// The continuous coded stream of IRIG 106 chapter 2, Appendix 2-D, for the AR4JA codes whose
// codeword does not divide the 6144-bit data field (ar4ja-1024-4/5, n = 1280; ar4ja-4096-1/2,
// n = 8192; ar4ja-4096-4/5, n = 5120): codeword after codeword, each behind its attached sync
// marker and each randomized, the stream cut into the packets' data fields one after another.
//
//   frame f:  [ marker (64 or 256 bits) | codeword f XOR the randomizer (n bits) ]
//   stream:   frame 0, frame 1, ...  (no gaps)
//   packets:  data field j = stream bits [6144 j + offset, 6144 (j + 1) + offset)
//
// - The marker (Appendix 2-D): with A = 0xFCB88938D8D76A4F and its complement
//   Abar = 0x034776C7272895B0, k = 1024 codes send A (64 bits), k = 4096 codes A A Abar A (256
//   bits), first bit the most significant.
// - The randomizer (CCSDS 131.0-B, "pseudo-randomizer"): the sequence of h(x) = x^8 + x^7 +
//   x^5 + x^3 + 1 from the all-ones state, period 255 (its first bytes FF 48 0E C0 9A 0D 70 BC),
//   added modulo 2 to the codeword's n bits and restarted at every marker; the marker itself
//   is sent as it is.
// - The codeword is the transmitted one of dsp/ldpc.hpp (information bits first, the last M
//   parity bits punctured), as in the codeword-aligned framing (dsp/fec.hpp).
// - offset: where the transmitter's stream stood when the first data field began (a link that
//   comes up mid-frame); a receiver finds the frames by their markers.
//
// The information bits of consecutive codewords form one continuous stream (the PN pattern of
// a test link), as in the codeword-aligned framing.
#pragma once

#include "dsp/batch.hpp"
#include "dsp/ldpc.hpp"
#include "dsp/pn.hpp"

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace paq::dsp {

/// How the continuous stream of a code is laid out.
struct stream_layout {
    ldpc::code code{};
    int marker_bits = 0;  ///< 64 (k = 1024) or 256 (k = 4096)
    int n = 0;            ///< transmitted codeword bits
    int k = 0;            ///< information bits per codeword
    [[nodiscard]] constexpr int frame_bits() const noexcept { return marker_bits + n; }
};

/// The layout of code `c`'s continuous stream: the codes whose n does not divide the data
/// field (the others are codeword-aligned, dsp::framing_for); nullopt for those.
[[nodiscard]] std::optional<stream_layout> stream_layout_for(ldpc::code c) noexcept;

/// The attached sync marker of code `c`'s stream, one bit per byte (0 or 1), first sent first:
/// 64 bits for k = 1024, 256 for k = 4096.
[[nodiscard]] std::span<const std::uint8_t> sync_marker_bits(ldpc::code c) noexcept;

/// The randomizer's period: its 255 bits, one per byte (0 or 1), first applied first.
[[nodiscard]] std::span<const std::uint8_t> randomizer_bits() noexcept;

/// The transmitter's side (paq-sim --ldpc): fills data fields with the continuous stream,
/// drawing each codeword's information bits from `pn` as its frame begins.
class stream_encoder {
public:
    /// std::invalid_argument for a code without a continuous layout, or an offset outside
    /// [0, frame_bits).
    stream_encoder(ldpc::code c, int offset);
    [[nodiscard]] const stream_layout& layout() const noexcept { return layout_; }
    /// The next data field: 6144 bits (one per byte), std::invalid_argument for another size.
    void next_data_field(pn_generator& pn, std::span<std::uint8_t> data_bits);

private:
    void next_frame(pn_generator& pn);

    stream_layout layout_;
    std::vector<std::uint8_t> info_, frame_;
    std::size_t pos_ = 0;  ///< the next bit of frame_ to send
    bool started_ = false;
};

/// The receiver's side, over one run of packets (a batch): where each packet's data field lies
/// in the stream, where the frames lie, and each frame's codeword LLRs.
///
/// Each packet's place: in data fields from the first packet's. Consecutive packets are one
/// packet spacing apart (start samples); a jump of several spacings means packets were missed,
/// whose places stay empty (their bits erasures). From the first packet's starts, the
/// increments are rounded one by one, so a clock offset does not accumulate.
[[nodiscard]] std::vector<std::int64_t> data_field_places(std::span<const std::uint64_t> starts, double spacing);

/// The soft decisions of a run of data fields: llr[(j * streams + s) * 6144 + i] is packet j's
/// stream s's data bit i (nats, positive: 1; 0: an erasure), places[j] its place (ascending).
/// Stream bit b (from place 0's first bit) is packet j's bit b - 6144 places[j].
struct stream_fields {
    std::span<const std::int64_t> places;
    std::span<const float> llr;
    int streams = 1;
};

/// A frame of a run: its first bit (the marker's) in stream bits from place 0's first bit,
/// negative for the frame begun before it, and the packet holding its last bit (-1: that
/// place is empty, the frame is lost with its packet).
struct stream_frame {
    std::int64_t start = 0;
    int owner = -1;
};

/// The data fields at a batch's start in which a receiver looks for the markers
/// (stream_deframer::find_offset).
inline constexpr int marker_search_fields = 8;

/// A frame a batch decodes: frame `frame` of the batch's frames (stream_deframer::frames), into
/// codeword slot `slot` of packet `owner`, the packet holding its last bit.
struct stream_job {
    std::size_t frame = 0;
    std::size_t owner = 0;
    int slot = 0;
};

/// The packets of a run of `packets` whose LLRs a batch keeps for the frames across its edges
/// (batch_output::fec_edge_places): the first two and the last two, all of them up to
/// max_stream_edge_packets; ascending.
inline constexpr std::size_t max_stream_edge_packets = 4;
[[nodiscard]] std::vector<std::size_t> stream_edge_packets(std::size_t packets);

class stream_deframer {
public:
    /// std::invalid_argument for a code without a continuous layout.
    explicit stream_deframer(ldpc::code c);
    [[nodiscard]] const stream_layout& layout() const noexcept { return layout_; }

    /// Where the frames are: the first frame start at or after place 0's first bit, in
    /// [0, frame_bits), from the markers in the first `search_fields` places (their LLRs
    /// summed over the streams, correlated with the marker at every bit, summed over the
    /// frames). nullopt when no marker lies there or none stands out: the best place's
    /// correlation is below a quarter of the LLRs' magnitude on its markers (random data
    /// gives about 0.03 over 16 markers of 64 bits; a marker at a channel BER of 10 %, 0.8).
    [[nodiscard]] std::optional<int> find_offset(const stream_fields& fields, int search_fields = marker_search_fields) const;

    /// The frames that end in the run (their last bit at or before the last packet's last
    /// bit), in order, from the first that ends in it: the one begun before place 0 included.
    [[nodiscard]] std::vector<stream_frame> frames(std::span<const std::int64_t> places, int offset) const;

    /// The batch's frames (frames(places, offset)) into their owners' codeword slots: sets
    /// out.fec_offset and out.frames (one per packet: the number within the batch of its first
    /// frame, their count, and as pending the one begun before the batch, which the engine
    /// decodes) and returns the frames to decode now, in order; a frame whose last bit lay in
    /// a missed packet is lost with it. std::logic_error where more frames end in a packet than
    /// `slots` (fec_framing::codewords).
    [[nodiscard]] std::vector<stream_job> assign(std::span<const stream_frame> frames, int offset, int slots, batch_output& out) const;

    /// Frame `f`'s n codeword LLRs on stream `s`, its randomizer taken off (a LLR's sign turned
    /// where the randomizer's bit is 1), 0 where no packet holds the bit.
    void codeword_llrs(const stream_fields& fields, int s, const stream_frame& f, std::span<float> out) const;

private:
    stream_layout layout_;
};

/// Joins each batch's continuous stream to the batch before it, batch after batch in order,
/// before anything counts the batch (the stream engine): the frames' numbers become the run's,
/// and the frame begun in the batch before is decoded from the two batches' edge LLRs into
/// its slot. The batches join where the packets between them (their start samples, one
/// spacing apart) put the second batch's frames on the first one's frame grid. Where they do
/// not (the run's first batch, a batch without sync, frames off the grid: a resync), the frame
/// begun before is dropped from its packet and the numbers go on past the ones used.
class stream_stitcher {
public:
    /// packet_spacing_samples: input samples between packet starts (the batches' start samples).
    stream_stitcher(const fec_framing& framing, int max_iterations, double packet_spacing_samples);
    void join(batch_output& out);

private:
    /// Drops packet i's first frame (its slot 0): the others move up a slot.
    void drop_first(batch_output& out, std::size_t i) const;

    fec_framing framing_;
    stream_deframer deframer_;
    stream_decoder decoder_;
    double spacing_;
    bool have_prev_ = false;
    std::uint64_t prev_last_start_ = 0;
    std::int64_t prev_last_place_ = 0;
    int prev_offset_ = 0;
    std::int64_t prev_base_ = 0;    ///< the run's number of the batch before's frame 0
    std::int64_t next_number_ = 0;  ///< one past the highest frame number given
    std::vector<std::int64_t> prev_places_;
    std::vector<float> prev_llr_;
    std::vector<float> word_;
};

}  // namespace paq::dsp
