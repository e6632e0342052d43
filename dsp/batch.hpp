// Batch windows and per-packet results: the data that flows source -> batcher -> backend ->
// publisher. Plain structs, no behaviour.
//
//   absolute samples ...|<- guard_before ->|<------ owned: B new ------>|<- guard_after ->|...
//                        window.first_sample                                window end
//   A packet belongs to the batch whose owned range holds its preamble peak. guard_before
//   (W = L_pkt/2) lets the peak decision see its whole neighbourhood; guard_after
//   (L_pkt + 256) holds the packet itself plus the filter margin. So each packet is decided
//   and processed from the same samples whichever batch it falls in, and exactly once.
#pragma once

#include "dsp/fec.hpp"
#include "dsp/receiver_tables.hpp"
#include "dsp/types.hpp"
#include "dsp/waveform.hpp"
#include "dsp/window_allocator.hpp"

#include <array>
#include <cmath>
#include <cstdint>
#include <numbers>
#include <optional>
#include <vector>

namespace paq::dsp {

inline constexpr std::size_t batch_guard_before = waveform::L_pkt / 2;
inline constexpr std::size_t packet_margin = 256;  ///< samples each side of a packet the filters read
inline constexpr std::size_t batch_guard_after = waveform::L_pkt + packet_margin;
inline constexpr std::size_t packed_data_bytes = waveform::data_bits / 8;  // 768

/// A UTC time not known (packet_record::utc_ns; the same sentinel as io::unknown_utc_ns).
inline constexpr std::int64_t unknown_utc_ns = INT64_MIN;

/// The absolute time of a stream's samples, from the source's time anchors
/// (io/sample_source.hpp): the sample with absolute index `sample` (gaps included, as
/// sample_batch::first_sample counts) was taken at utc_ns (ns since 1970-01-01T00:00:00Z, UTC),
/// and the samples are sample_rate_hz apart (the input's rate, before any resampling).
/// dsp::utc_ns_at (dsp/batcher.hpp) extrapolates it to any sample of the same segment.
struct sample_time {
    std::uint64_t sample = 0;
    std::int64_t utc_ns = 0;
    double sample_rate_hz = 0.0;
    friend bool operator==(const sample_time&, const sample_time&) = default;
};

struct sample_batch {
    std::uint64_t index = 0;          ///< batch sequence number
    std::uint64_t first_sample = 0;   ///< absolute index of samples[0] (gaps included)
    /// The window's samples, unless the input is ci16 (then empty: see samples_ci16).
    std::vector<cf32> samples;
    /// A ci16 input's window as the source delivered it (4 bytes a sample, half of cf32): the
    /// backend converts, each sample to_cf32(s, ci16_scale). Exactly one of samples and
    /// samples_ci16 holds the window; size() is its length either way.
    window_vector<ci16> samples_ci16;
    float ci16_scale = 0.0f;
    /// With two receive channels (receiver_config::channels 2): the window of both channels, a
    /// cf32x2 per sample time (then samples and samples_ci16 are empty).
    std::vector<cf32x2> samples_x2;
    std::size_t owned_begin = 0;      ///< preamble peaks in [owned_begin, owned_end) belong here
    std::size_t owned_end = 0;
    bool segment_start = false;       ///< samples[0] follows a gap or the stream start
    bool segment_end = false;         ///< the window ends at a gap or the end of the stream
    std::uint64_t lost_samples_before = 0;  ///< gap before this segment (its first batch only)
    /// Absolute index of the first sample of the segment this window belongs to: the origin
    /// of the resampler's output grid (dsp/input_stage.hpp), so that every batch of a segment
    /// resamples at the same positions.
    std::uint64_t segment_first_sample = 0;
    /// The window's absolute time: the latest time anchor of its segment when it was cut (it
    /// may name a sample before or after the window: a segment's samples are contiguous, so
    /// one anchor times all of them). Empty when the source has no time base, or none since
    /// the last gap of unknown size.
    std::optional<sample_time> time;

    [[nodiscard]] bool is_ci16() const noexcept { return !samples_ci16.empty(); }
    [[nodiscard]] bool is_two_channel() const noexcept { return !samples_x2.empty(); }
    /// Sample times in the window, whichever storage holds them.
    [[nodiscard]] std::size_t size() const noexcept
    {
        return is_ci16() ? samples_ci16.size() : is_two_channel() ? samples_x2.size() : samples.size();
    }
};

/// Packet flags.
enum packet_flag : std::uint32_t {
    flag_nonfinite_input = 1u << 0,   ///< NaN/Inf samples were replaced by zeros
    flag_zf_regularized = 1u << 1,    ///< R was not numerically positive definite: loaded
    flag_ill_conditioned = 1u << 2,   ///< ZF condition number above 1e6
    flag_cfo_near_limit = 1u << 3,    ///< |w0| above 90% of the estimator's range
    flag_low_snr = 1u << 4,           ///< estimated Eb/N0 below 3 dB
    flag_start_realigned = 1u << 5,   ///< the detector's peak was a side lobe: the start moved by whole preamble periods (dsp/start_check.hpp)
    flag_phase_smoothed = 1u << 6,    ///< the PLL's phase wandered (phase noise): the phase smoother decided the packet (receiver.phase_smoother auto, dsp/phase_gate.hpp)
    flag_unequalized_phase = 1u << 7,  ///< the smoother decided the packet and its segment was derotated by the unequalized path's phases: every equalized path made again from it (dsp::smoother::pre_derotation_source_for)
};

/// The flags' thresholds, in one place for both backends.
inline constexpr double cfo_near_limit_rad_per_sample = 0.9 * std::numbers::pi / 32.0;  ///< 90% of the CFO estimator's range (lag 32 samples)
inline constexpr double low_snr_ebn0_db = 3.0;
inline constexpr double ill_conditioned_zf_condition = 1e6;

/// A packet's flags from its estimates (both backends): the CFO is the packet's (coarse and
/// residual), zf_condition the ZF equalizer's condition number, regularized whether the ZF or
/// MMSE system had to be loaded, start_realigned whether the start check moved its start.
[[nodiscard]] inline std::uint32_t packet_flags(std::uint32_t nonfinite_samples, double cfo_rad_per_sample, double ebn0_db,
                                                double zf_condition, bool regularized, bool start_realigned) noexcept
{
    std::uint32_t f = nonfinite_samples ? flag_nonfinite_input : 0u;
    if (start_realigned) f |= flag_start_realigned;
    if (std::abs(cfo_rad_per_sample) > cfo_near_limit_rad_per_sample) f |= flag_cfo_near_limit;
    if (ebn0_db < low_snr_ebn0_db) f |= flag_low_snr;
    if (!(zf_condition <= ill_conditioned_zf_condition)) f |= flag_ill_conditioned;
    if (regularized) f |= flag_zf_regularized;
    return f;
}

struct path_stats {
    std::uint16_t known_bit_errors = 0;  ///< preamble+ASM bits the detector got wrong (of 192)
    float bep_estimate = 0.5f;           ///< of the data decisions (dsp/decision_quality.hpp; the trellis: its LLRs')
};

struct packet_record {
    std::uint64_t start_sample = 0;  ///< absolute index of the packet start
    /// UTC of the packet's first sample, ns since 1970 (sample_batch::time at start_sample);
    /// unknown_utc_ns when the window had no time. Set by the worker pool, not the backends.
    std::int64_t utc_ns = unknown_utc_ns;
    double metric = 0.0;             ///< preamble detector M(u) at the peak
    double cfo_rad_per_sample = 0.0;
    double sigma2 = 0.0;             ///< noise variance per real dimension
    double channel_energy = 0.0;     ///< sum |h|^2
    double ebn0_db = 0.0;            ///< 10 log10(received signal power / sigma2)
    /// Condition number of the ZF matrix R, from the channel estimate's spectrum:
    /// max |H(f)|^2 / min |H(f)|^2 on the FFT grid (R is the Toeplitz matrix of |H|^2).
    double zf_condition = 0.0;
    std::uint32_t flags = 0;
    std::uint32_t nonfinite_samples = 0;
    std::int32_t channel_support = 0;  ///< receiver_tables::supports index the estimate used
    std::int32_t channel_first_tap = 0;  ///< that support's first tap (-12 .. 0, relative to the main path)
    std::int32_t channel_last_tap = 0;   ///< and its last tap (0 .. 25)
    std::array<cf64, chain::L_ch> h{};  ///< channel estimate, taps -N1 .. N2
    /// Per output stream (batch_output::streams of them are set: the six paths, or twelve with
    /// receiver.detector both, dsp::stream_name).
    std::array<path_stats, chain::max_streams> paths{};
    /// The transmitter's bit clock against the sample clock at this packet (ppm, > 0: the
    /// transmitter is fast), from the spacing of the packet starts (dsp/clock_recovery.hpp);
    /// 0 when not estimated.
    double clock_ppm = 0.0;
    bool clock_corrected = false;  ///< the packet was re-timed for clock_ppm
    /// The front end this packet's segment showed (dsp/iq_correction.hpp), when the correction
    /// is on (front_end_estimated): Q's amplitude and phase against I, and the DC offset's power
    /// against the segment's (dBc; -300 when none). front_end_corrected: the DC or the IQ
    /// imbalance stood above the gate (dsp::iq_dc_gate) and was removed.
    bool front_end_estimated = false;
    bool front_end_corrected = false;
    float iq_gain_db = 0.0f;
    float iq_phase_deg = 0.0f;
    float dc_dbc = -300.0f;
    /// Receive channels the packet was combined from (receiver_config::channels). With two: each
    /// channel's estimated Eb/N0 (dB, as ebn0_db for one), and best_channel the one with the
    /// higher (0 or 1: the per-packet best-channel choice); h, the support, sigma2 and
    /// channel_energy are that channel's, ebn0_db is the combined paths' (the channels' signal
    /// to noise ratios summed, what maximal-ratio combining gives), and the front-end fields
    /// channel 1's. With receiver_config::combining select, best_channel is the channel the
    /// paths were received on (the smaller MMSE error), and every other field is that channel's
    /// as the one-channel chain makes it (ebn0_db its own).
    std::uint8_t receive_channels = 1;
    std::uint8_t best_channel = 0;
    std::array<float, chain::max_receive_channels> channel_ebn0_db{};
    /// With two receive channels: each channel's received level at the packet, the estimated
    /// signal power plus noise, mean power per sample in dB re. 1 of the samples as the chain
    /// takes them (cf32; ci16 counts over ci16_scale); -300 for a channel of zeros.
    std::array<float, chain::max_receive_channels> channel_level_db{};
};

/// Soft output: a trellis LLR, log P(bit 1) / P(bit 0) in nats (positive: the bit
/// the bitstream carries is 1), as a signed byte of llr_steps_per_nat steps per nat, rounded
/// half away from zero and saturated at +-127 (+-31.75 nats); 0 carries no information (and a
/// NaN is 0). The CUDA backend quantizes with the same float arithmetic.
inline constexpr float llr_steps_per_nat = 4.0f;
[[nodiscard]] inline std::int8_t quantize_llr(float llr) noexcept
{
    const float q = std::round(llr * llr_steps_per_nat);
    if (std::isnan(q)) return 0;
    return static_cast<std::int8_t>(q > 127.0f ? 127.0f : q < -127.0f ? -127.0f : q);
}

struct batch_output {
    std::uint64_t batch_index = 0;
    /// Output streams per packet: 6 (the paths), or 12 with receiver.detector both (streams
    /// 6 .. 11 the paths decided by the trellis; dsp::output_streams, dsp::stream_name).
    int streams = chain::num_paths;
    std::vector<packet_record> packets;         ///< in start order
    std::vector<std::uint8_t> bits;             ///< [packet][stream][768 bytes], MSB first
    std::uint64_t truncated_packets = 0;        ///< preambles whose packet a gap or the end cut
    std::uint64_t nonfinite_samples = 0;        ///< in the owned range's packets
    /// With soft output on (batch_processor::set_soft_output) and the trellis running: the
    /// trellis's LLR of every data bit, [packet][path][6144] (quantize_llr; the bits' order,
    /// path the six paths none .. fde2). Empty otherwise.
    std::vector<std::int8_t> llrs;
    /// With receiver.fec (dsp/fec.hpp): every stream's data field decoded.
    /// decoded: the information bits, [packet][stream][fec_info_bytes], packed MSB first;
    /// codewords: [packet][stream][fec_codewords], each codeword's decoding. Empty (and both
    /// sizes 0) without FEC.
    std::vector<std::uint8_t> decoded;
    std::vector<codeword_result> codewords;
    int fec_info_bytes = 0;
    int fec_codewords = 0;
    /// A code sent as the continuous stream (dsp/fec_stream.hpp): per packet the frames whose
    /// last bit it holds, decoded into its first `count` codeword slots on every stream. The
    /// first one's number counts the stream's frames: within the batch from the backend (frame
    /// 0 the first begun in the batch, -1 the one begun before it), the run's once the engine
    /// has joined the batch to the one before (dsp::stream_stitcher). `pending`: of them, the
    /// first ones begun in the batch before, decoded when joined (none after). Empty otherwise.
    struct packet_frames {
        std::int64_t first = 0;
        std::uint8_t count = 0;
        std::uint8_t pending = 0;
    };
    std::vector<packet_frames> frames;
    /// The continuous stream: where the frames begin, in bits from the batch's first data field
    /// (-1: no sync marker found, no frame decoded), and the soft decisions of the batch's first
    /// and last packets (at most two each) that the frames across the batch's edges need:
    /// their places (data fields from the first packet's, ascending) and LLRs [packet][stream][6144].
    int fec_offset = -1;
    std::vector<std::int64_t> fec_edge_places;
    std::vector<float> fec_edge_llr;

    /// Empty again for batch `index` with `streams_per_packet` streams, the vectors' capacity
    /// kept (a backend's process() starts so).
    void reset(std::uint64_t index, int streams_per_packet) noexcept
    {
        batch_index = index;
        streams = streams_per_packet;
        packets.clear();
        bits.clear();
        llrs.clear();
        decoded.clear();
        codewords.clear();
        fec_info_bytes = 0;
        fec_codewords = 0;
        frames.clear();
        fec_offset = -1;
        fec_edge_places.clear();
        fec_edge_llr.clear();
        truncated_packets = 0;
        nonfinite_samples = 0;
    }

    /// Bytes of bits per packet: streams x 768.
    [[nodiscard]] std::size_t packet_bytes() const noexcept { return static_cast<std::size_t>(streams) * packed_data_bytes; }

    [[nodiscard]] const std::uint8_t* packet_bits(std::size_t packet, int stream) const noexcept
    {
        return bits.data() + (packet * static_cast<std::size_t>(streams) + static_cast<std::size_t>(stream)) * packed_data_bytes;
    }

    /// The trellis's LLRs of `packet`'s path `path` (0 .. 5): waveform::data_bits bytes; only
    /// when llrs is not empty.
    [[nodiscard]] const std::int8_t* packet_llrs(std::size_t packet, int path) const noexcept
    {
        return llrs.data() + (packet * chain::num_paths + static_cast<std::size_t>(path)) * waveform::data_bits;
    }

    /// Sizes decoded and codewords for `count` packets of `framing` (the backends, before decoding).
    void size_fec(std::size_t count, const fec_framing& framing)
    {
        fec_info_bytes = framing.info_bytes();
        fec_codewords = framing.codewords;
        decoded.assign(count * static_cast<std::size_t>(streams) * static_cast<std::size_t>(fec_info_bytes), 0);
        codewords.assign(count * static_cast<std::size_t>(streams) * static_cast<std::size_t>(fec_codewords), codeword_result{});
        if (framing.continuous()) frames.assign(count, packet_frames{});
    }
    [[nodiscard]] bool has_fec() const noexcept { return fec_codewords > 0; }
    /// Whether the packets' streams were decoded with `framing` (an empty batch always is).
    [[nodiscard]] bool decoded_with(const fec_framing& framing) const noexcept
    {
        return packets.empty() || (fec_codewords == framing.codewords && fec_info_bytes == framing.info_bytes());
    }
    /// `packet`'s stream `stream` decoded: fec_info_bytes bytes; only with has_fec().
    [[nodiscard]] std::uint8_t* packet_decoded(std::size_t packet, int stream) noexcept
    {
        return decoded.data() + (packet * static_cast<std::size_t>(streams) + static_cast<std::size_t>(stream)) * static_cast<std::size_t>(fec_info_bytes);
    }
    [[nodiscard]] const std::uint8_t* packet_decoded(std::size_t packet, int stream) const noexcept
    {
        return const_cast<batch_output*>(this)->packet_decoded(packet, stream);
    }
    /// `packet`'s stream `stream`'s codewords: fec_codewords of them; only with has_fec().
    [[nodiscard]] codeword_result* packet_codewords(std::size_t packet, int stream) noexcept
    {
        return codewords.data() + (packet * static_cast<std::size_t>(streams) + static_cast<std::size_t>(stream)) * static_cast<std::size_t>(fec_codewords);
    }
    [[nodiscard]] const codeword_result* packet_codewords(std::size_t packet, int stream) const noexcept
    {
        return const_cast<batch_output*>(this)->packet_codewords(packet, stream);
    }
};

}  // namespace paq::dsp
