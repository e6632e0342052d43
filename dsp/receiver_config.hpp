// Parameters of the receiver chain that neither IRIG 106 nor the thesis fixes. Plain struct
// with defaults; the measurements behind each default are in docs/SIGNAL-CHAIN.md. config/
// binds it to YAML.
#pragma once

#include "dsp/fec.hpp"
#include "dsp/names.hpp"
#include "dsp/receiver_tables.hpp"
#include "dsp/waveform.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace paq::dsp {

/// The most input samples per 2-samples-per-bit sample the chain takes: 6.4 samples per bit
/// (dsp::resampler_max_ratio).
inline constexpr double max_input_ratio = 3.2;

/// A setting's allowed values: lo .. hi, either end excluded where open, a power of two where
/// power_of_two.
struct setting_range {
    double lo = 0.0, hi = 0.0;
    bool lo_open = false, hi_open = false;
    bool power_of_two = false;
    [[nodiscard]] constexpr bool contains(double x) const noexcept
    {
        if (!(lo_open ? x > lo : x >= lo) || !(hi_open ? x < hi : x <= hi)) return false;  // NaN: false
        if (!power_of_two) return true;
        const auto n = static_cast<std::uint64_t>(x);
        return static_cast<double>(n) == x && n != 0 && (n & (n - 1)) == 0;
    }
    /// As the messages write it: "1 .. 1000000000", "0 < x <= 0.1", "a power of two, 16384 .. 1048576".
    [[nodiscard]] std::string text() const;
};

/// The ranges of receiver_config's numeric settings, once: validate() checks them, and the
/// configuration's schema (config/receiver_yaml.cpp) and paqd replay's options take theirs
/// from here.
namespace receiver_ranges {
inline constexpr setting_range batch_samples{1, 1e9};
inline constexpr setting_range detection_threshold{0, 1, true, true};
inline constexpr setting_range fft_size{16384, 1 << 20, false, false, true};
inline constexpr setting_range cma_mu{0, 0.1, true};
inline constexpr setting_range cma_iterations{0, 200};
inline constexpr setting_range pll_bn_t{0, 0.1, true};
inline constexpr setting_range pll_acquisition_bn_t{0, 0.25, true};
inline constexpr setting_range pll_damping{0.3, 2};
inline constexpr setting_range cpu_threads{0, 1024};
inline constexpr setting_range bit_rate_hz{1e6, 30e6};
inline constexpr setting_range clock_min_ppm{0, 100};
inline constexpr setting_range fec_iterations{1, max_fec_iterations};
inline constexpr setting_range channels{1, chain::max_receive_channels};
}  // namespace receiver_ranges

/// receiver_config::detector.
enum class detector_kind : std::uint8_t { sxs, trellis, both };
inline constexpr name_table<detector_kind, 3> detector_names{
    {{"sxs", detector_kind::sxs}, {"trellis", detector_kind::trellis}, {"both", detector_kind::both}}};
[[nodiscard]] constexpr std::string_view to_string(detector_kind d) noexcept { return name_of(detector_names, d); }
/// "sxs", "trellis", "both"; anything else throws std::invalid_argument naming the allowed ones.
[[nodiscard]] detector_kind parse_detector(std::string_view text);

/// What two receive channels make of each packet (receiver_config::combining): joint, every
/// path combining both channels (dsp/combining.hpp); or select, selection diversity: every
/// path on the packet's better channel alone (the smaller MMSE error, dsp::mmse_error), as the
/// one-channel chain makes it on that channel.
enum class combining_kind : std::uint8_t { joint, select };
inline constexpr name_table<combining_kind, 2> combining_names{
    {{"joint", combining_kind::joint}, {"select", combining_kind::select}}};
[[nodiscard]] constexpr std::string_view to_string(combining_kind c) noexcept { return name_of(combining_names, c); }
/// std::invalid_argument naming the choices.
[[nodiscard]] combining_kind parse_combining(std::string_view text);

/// Output streams per packet (batch_output::streams): the six paths, each decided once by the
/// detector; with `both`, twelve: streams 0 .. 5 decided symbol by symbol, 6 .. 11 the same
/// paths by the trellis (dsp::stream_name).
[[nodiscard]] constexpr int output_streams(detector_kind d) noexcept
{
    return d == detector_kind::both ? chain::max_streams : chain::num_paths;
}

struct receiver_config {
    /// New samples per batch window. 1 <= batch_samples; default 1.9065 s.
    std::size_t batch_samples = waveform::default_batch_samples;
    /// Normalized preamble metric L(u) / (32 * window energy) above which a peak counts as a
    /// packet. 0 < detection_threshold < 1. Noise alone averages 1/32; PN15 data reaches 0.19
    /// where no preamble is near (segment starts); a packet at 4 dB with 2% CFO gives ~0.4.
    double detection_threshold = 0.25;
    /// FFT length used to filter one packet with equalizer and detection filter.
    /// Power of two, >= 16384 (L_pkt + filter spans).
    std::size_t fft_size = 16384;
    /// CMA step size relative to the packet segment's mean power (signal plus noise; so CMA
    /// does the same at any input level), 0 < cma_mu <= 0.1. At Eb/N0 11 dB the
    /// segment's power is about 1.16 times the signal's. From the MMSE start the CMA works in its linear
    /// range: the BER depends on cma_mu x cma_iterations only (0.002 x 12 = 0.012 x 2 =
    /// 0.024 x 1 measured equal, docs/SIGNAL-CHAIN.md), so two steps of 0.012 do the work.
    double cma_mu = 0.012;
    /// CMA steepest-descent iterations from the MMSE start, 0 <= cma_iterations <= 200.
    int cma_iterations = 2;
    /// PLL noise bandwidth times the loop update period (one update per bit pair),
    /// 0 < pll_bn_t <= 0.1.
    double pll_bn_t = 0.01;
    /// PLL bandwidth over the 192 known bits (data-aided acquisition: pulls in the residual
    /// CFO of the preamble estimate before the data), 0 < x <= 0.25.
    double pll_acquisition_bn_t = 0.01;
    /// PLL damping factor, 0.3 <= pll_damping <= 2.
    double pll_damping = 0.7071;
    /// CPU worker threads, 0 = all cores.
    int cpu_threads = 0;
    /// The transmitter's bit rate in bit/s, 1e6 .. 30e6. The chain works at 2
    /// samples per bit; any other input rate is resampled to 2 x bit_rate_hz (input_stage).
    double bit_rate_hz = waveform::default_bit_rate_hz;
    /// The input's sample rate in Hz, from the source (SigMF core:sample_rate, the source
    /// config, VITA-49 context), not a config key: the programs set it. 0: exactly 2 samples
    /// per bit. Otherwise 2 .. 6.4 samples per bit (2 x .. 6.4 x bit_rate_hz).
    double input_sample_rate_hz = 0.0;
    /// Clock-offset tracking (dsp/clock_recovery): 1 estimates the transmitter's bit clock
    /// against the sample clock from the packet starts and re-times each packet, 0 is off.
    int clock_tracking = 1;
    /// A packet whose estimated |clock offset| is below this many ppm is not re-timed (its
    /// drift over a packet is then below 0.013 samples at the default 1 ppm), 0 .. 100.
    double clock_min_ppm = 1.0;
    /// Front-end correction (dsp/iq_correction): each packet's DC offset and IQ
    /// imbalance estimated from its segment and removed before the chain reads it, where they
    /// are above its gate (a clean packet is left as it is). 1 on (the default, for every
    /// source and for replay, so that a recording replays as it was received), 0 off; -1
    /// (auto, the former default) is the same as on.
    int front_end_correction = 1;
    /// Carrier phase: 0 the PLL alone (dsp::detect_packet), 1 the phase smoother on every
    /// packet (dsp::detect_packet_smoothed: a data-aided Kalman smoother over each packet,
    /// started by a forward PLL of its own bandwidth, dsp::smoother::bootstrap_bn_t; pll_bn_t is
    /// then not used), -1 auto: the PLL on every packet, and the smoother again on the packets
    /// whose PLL phase wanders more than thermal noise explains (dsp/phase_gate.hpp; the
    /// packet is flagged flag_phase_smoothed). For links with oscillator phase noise
    /// (docs/SIGNAL-CHAIN.md, "Phase noise"). The smoother makes about 10% fewer errors without
    /// phase noise; on every packet it costs many times the PLL's detector time
    /// (docs/PERFORMANCE.md), which auto spends only where the phase wanders.
    int phase_smoother = -1;

    /// Whether packets are detected by the smoother after the PLL when its phase wanders.
    [[nodiscard]] bool phase_smoother_auto() const noexcept { return phase_smoother == -1; }
    /// Whether every packet is detected by the smoother alone.
    [[nodiscard]] bool phase_smoother_always() const noexcept { return phase_smoother == 1; }
    /// How the bits are decided (docs/SIGNAL-CHAIN.md, "Trellis detection"): sxs, the
    /// symbol-by-symbol OQPSK detector (dsp::detect_packet), or trellis, sequence detection on
    /// the equalized signal (dsp::detect_packet_trellis, carrier phase from the PLL, or from
    /// the phase smoother where it decided the packet), or both: every path decided both ways,
    /// twelve output streams (output_streams). Both backends (gpu/trellis.cu on the GPU).
    detector_kind detector = detector_kind::sxs;
    /// The LDPC code the link's data fields carry (dsp/fec.hpp): none (the default: the data
    /// fields are the bits), or a codeword-aligned AR4JA code, whose codewords every output
    /// stream then decodes (its soft decisions: the trellis's LLRs, or the symbol-by-symbol
    /// detector's statistics made LLRs by dsp::sxs_llrs).
    fec_code fec = fec_code::none;
    /// The decoder's most iterations per codeword (layered normalized min-sum, stopping as soon
    /// as every check holds), 1 .. 255.
    int fec_iterations = 50;
    /// Receive channels of the link, 1 or 2 (two polarizations or two antennas, coherent: one
    /// sample clock and one local oscillator). With 2 every path combines both channels
    /// (dsp/combining.hpp): the preamble found on either or both, one carrier offset, a channel
    /// and noise estimate per channel, ZF and MMSE solved jointly, two-input CMA, FDE1 and FDE2
    /// as frequency-domain combining, the unequalized path as maximal-ratio combining; each
    /// packet records its channels' Eb/N0 and the better one (packet_record::best_channel). The
    /// windows then hold both channels (sample_batch::samples_x2). Both backends (combining
    /// select: the CPU backend only).
    /// `receiver.channels` in the service's configuration (its source must deliver as many);
    /// `paqd replay --channel N --channel M` sets it.
    int channels = 1;
    /// With two channels: joint (every path combines both) or select (every path on the
    /// packet's better channel alone: selection diversity, what a best-channel selector
    /// delivers; the packet's record names the channel). Ignored with one channel.
    combining_kind combining = combining_kind::joint;

    /// Whether the data fields are decoded.
    [[nodiscard]] bool fec_on() const noexcept { return fec != fec_code::none; }

    /// Output streams per packet: output_streams(detector).
    [[nodiscard]] int streams() const noexcept { return output_streams(detector); }
    /// Whether the trellis runs (detector trellis or both).
    [[nodiscard]] bool trellis_on() const noexcept { return detector != detector_kind::sxs; }

    /// Whether the backends correct the front end: front_end_correction on (1) or auto (-1).
    [[nodiscard]] bool front_end_correction_on() const noexcept { return front_end_correction != 0; }
    /// Whether two channels are received by selection (combining select), which only the CPU
    /// backend does.
    [[nodiscard]] bool selects_channel() const noexcept { return channels == 2 && combining == combining_kind::select; }
    /// Whether receiver.fec is sent as the continuous stream (dsp/fec_stream.hpp), which only the
    /// CPU backend decodes.
    [[nodiscard]] bool fec_continuous() const noexcept;

    /// Input samples per 2-samples-per-bit sample: input_sample_rate_hz / (2 bit_rate_hz), 1
    /// when the input rate is 0 (unset).
    [[nodiscard]] double input_ratio() const noexcept
    {
        return input_sample_rate_hz > 0.0 ? input_sample_rate_hz / (2.0 * bit_rate_hz) : 1.0;
    }

    /// Empty when valid; otherwise one message per bad field, naming the field, the value and
    /// the allowed range.
    [[nodiscard]] std::vector<std::string> validate() const;

    /// validate()'s check of the input rate against the bit rate alone: a message naming both
    /// rates when input_sample_rate_hz is outside 2 .. 2 max_input_ratio samples per bit; empty
    /// when it is inside, unset (0), or either rate is out of its own range (validate() says so).
    [[nodiscard]] std::string samples_per_bit_error() const;

    /// validate()'s checks of input_sample_rate_hz, in the order it makes them: its own range
    /// (1 kHz .. 1 GHz, or 0), then samples_per_bit_error(). Empty when both pass. The config
    /// check (a source's configured rate) and the service's start (the rate the source
    /// reports) both call it, so `--check-config` refuses exactly the rates the service would.
    [[nodiscard]] std::string input_rate_error() const;
};

}  // namespace paq::dsp
