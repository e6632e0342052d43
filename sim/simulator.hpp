// Signal simulator (its own library, paq_sim: the tools and tests link it, the receiver does
// not): iNET packets of SOQPSK-TG through a multipath channel, then the field
// impairments of a real link and front end.
//
//   bits (preamble | ASM | PN data)
//     -> soqpsk_modulator, 2 samples per TRANSMITTER bit (the channel rate 2 x bit_rate_hz)
//     -> multipath FIR (band-limited fractional delays), received power normalized to 1
//     -> resampler: output sample n is the channel output at transmitter time tau(n), by a
//        Kaiser-windowed sinc (the same kind as the channel's fractional delays). tau(n) holds
//        the output rate and the transmitter's bit clock against the sample clock (clock_ppm,
//        clock_drift_ppm_per_s). Skipped (the samples pass unchanged) at exactly 2 samples per
//        bit with no clock offset: the path of the generator before the impairments existed.
//     -> x exp(j(2 pi cfo t + phase + theta(t)))   carrier offset and phase noise theta
//        (the transmitter's oscillator and the receiver's LO; theta: Wiener and/or IRIG 106)
//     -> + AWGN                                      thermal noise of the antenna / LNA
//     -> y = mu x + nu conj(x)                       IQ imbalance of the quadrature mixer
//     -> + DC                                        LO leakage (dc_offset_dbc of the signal)
//     -> x 10^(gain(t)/20)                           gain_db and the AGC steps
//     -> cf32 samples at sample_rate_hz
//
// The order is the physical one: the phase noise of both oscillators multiplies the signal
// before the front end (the receiver LO's would multiply the noise too, but a rotation leaves
// circular white noise white, so applying it before the noise is the same in distribution);
// the noise enters at the antenna, before the mixer's imbalance and DC; the AGC scales
// everything it receives, so the DC stays dc_offset_dbc below the signal across a step.
// Every impairment that is off is skipped, not applied as a unit factor: with no new field
// set, the output is bit-identical to the generator's before they were added (test_simulator).
// docs/SIGNAL-CHAIN.md, "Simulated field impairments", has the models and their ranges.
#pragma once

#include "dsp/names.hpp"
#include "dsp/fec.hpp"
#include "dsp/pn.hpp"
#include "dsp/types.hpp"

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace paq::sim {

/// One ray of a multipath channel.
struct channel_ray {
    double amplitude;  ///< relative to the line of sight
    double delay_ns;   ///< >= 0
    double phase_rad;
};

/// A named channel: static rays, or (flight) a specular ray that drifts.
struct channel_preset {
    std::string name;
    std::vector<channel_ray> rays;
    bool flight = false;  ///< specular delay 10..80 ns and amplitude 0.70..0.96 drift over time
};

/// awgn, two-ray, edwards3, flight. Throws std::invalid_argument naming the allowed values.
[[nodiscard]] channel_preset channel_preset_by_name(std::string_view name);
[[nodiscard]] std::vector<std::string> channel_preset_names();
/// "AMPLITUDE,DELAY_NS,PHASE_RAD" (e.g. "0.5,1000,1.2"). Throws std::invalid_argument naming
/// the bad part.
[[nodiscard]] channel_ray parse_channel_ray(std::string_view text);

/// A step of the receiver's gain (an AGC reacting to a level change) at a time.
struct agc_step {
    double time_s;  ///< on the output's clock, from its first sample; 0 .. 1e6
    double db;      ///< -60 .. +60
};

struct sim_config;
/// One receive channel's settings over a base configuration: "KEY=VALUE,KEY=VALUE,..." with the
/// keys preset, ebn0-db (a number or inf), gain-db, delay-ns, phase-rad, shadow-db, shadow-s
/// and shadow-every-s (e.g. "preset=two-ray,ebn0-db=9,delay-ns=40,shadow-db=10"); the
/// channel number is set by the caller. Throws std::invalid_argument naming the bad part;
/// the values are checked by sim_config::validate().
void apply_channel_setting(sim_config& cfg, std::string_view text);

/// "TIME_S,DB" (e.g. "2.5,20"). Throws std::invalid_argument naming the bad part.
[[nodiscard]] agc_step parse_agc_step(std::string_view text);
/// "DB,DEG" (e.g. "1,5"): IQ amplitude and phase imbalance. Throws std::invalid_argument.
[[nodiscard]] std::pair<double, double> parse_iq_imbalance(std::string_view text);

/// Phase noise shaped to a curve of the continuous single-sideband phase-noise PSD L(f):
/// none, the IRIG 106 transmitter limit, or a curve given point by point (a transmitter's
/// data sheet, or the standard's figure where it differs from irig106_phase_noise_curve).
enum class phase_noise_mask { none, irig106, curve };
/// The names (--phase-noise's keywords, the recordings' paq:phase_noise_mask); a curve is
/// given by its points, not by its name.
inline constexpr name_table<phase_noise_mask, 3> phase_noise_mask_names{
    {{"none", phase_noise_mask::none}, {"irig106", phase_noise_mask::irig106}, {"curve", phase_noise_mask::curve}}};
[[nodiscard]] constexpr std::string_view to_string(phase_noise_mask m) noexcept { return name_of(phase_noise_mask_names, m); }

/// A point of a phase-noise curve: L(f) in dBc/Hz at the offset f_hz from the carrier.
struct phase_noise_point {
    double f_hz;
    double dbc_hz;
};

/// What --phase-noise takes: "none", "irig106", or a curve "F:DBC,F:DBC,..." (offsets in Hz,
/// L(f) in dBc/Hz; e.g. "10:-30,100:-60,1e6:-100,2.5e6:-100"). Throws std::invalid_argument
/// naming the bad part; the curve's values are checked by sim_config::validate().
struct phase_noise_setting {
    phase_noise_mask mask = phase_noise_mask::none;
    std::vector<phase_noise_point> curve;  ///< only with phase_noise_mask::curve
};
[[nodiscard]] phase_noise_setting parse_phase_noise(std::string_view text);

/// The IRIG 106 chapter 2 transmitter phase-noise limit as the simulator uses it, as a curve:
/// -30 dBc/Hz at 10 Hz, -60 at 100 Hz, -100 at 1 MHz, held at -100 to the standard's highest
/// offset, a quarter of the bit rate (the last point; at bit rates below 4 Mbit/s the curve
/// stops there, between the breakpoints). docs/SIGNAL-CHAIN.md says where the breakpoints
/// come from.
[[nodiscard]] std::vector<phase_noise_point> irig106_phase_noise_curve(double bit_rate_hz);

/// L(f) of a curve at offset f_hz > 0: log-log interpolation between the points, held flat
/// below the first, falling at 20 dB/decade beyond the last. The two-sided PSD of the
/// synthesized phase, in rad^2/Hz, is 10^(L/10).
[[nodiscard]] double phase_noise_dbc_hz(const std::vector<phase_noise_point>& curve, double f_hz);

/// L(f) of the IRIG 106 limit, what the simulator synthesizes for phase_noise irig106: the
/// breakpoints log-log interpolated, held at -100 from 1 MHz, falling at 20 dB/decade beyond
/// a quarter of the bit rate. phase_noise_dbc_hz(irig106_phase_noise_curve(bit_rate_hz), f)
/// is the same to rounding (exactly the same where the quarter is 1 MHz or more).
[[nodiscard]] double irig106_phase_noise_dbc_hz(double f_hz, double bit_rate_hz);

struct sim_config {
    std::string preset = "awgn";
    /// Eb/N0 at the receiver input: Eb = signal power x output samples per bit, N0 = the
    /// complex noise variance per output sample. +inf: no noise.
    double ebn0_db = std::numeric_limits<double>::infinity();
    double cfo_hz = 0.0;
    double phase_rad = 0.0;
    /// Fractional delay of the channel, in channel samples (half bits), 0 <= x < 1.
    double timing_offset_samples = 0.0;
    /// Nominal transmitter bit rate, 1e6 .. 30e6. The channel runs at 2 x bit_rate_hz.
    double bit_rate_hz = 10.3125e6;
    /// OUTPUT sample rate, 1.9 .. 8 x bit_rate_hz (set it with bit_rate_hz: the default is
    /// 2 x the default bit rate). Other than exactly 2 x bit_rate_hz, the output is resampled.
    double sample_rate_hz = 20.625e6;
    /// The transmitter's bit clock is (1 + 1e-6 (clock_ppm + clock_drift_ppm_per_s t)) x
    /// bit_rate_hz against the sample clock, t the output time. |clock_ppm| <= 1000,
    /// |clock_drift_ppm_per_s| <= 1000; generate() throws std::range_error when the offset
    /// leaves +-1000 ppm.
    double clock_ppm = 0.0;
    double clock_drift_ppm_per_s = 0.0;
    /// Half length of the resampler's Kaiser-windowed sinc, in channel samples (the filter
    /// has 2 x this many taps per output sample at 2 samples per bit or more), 8 .. 512.
    int resampler_half_taps = 32;
    /// Receiver gain for the whole recording, dB, -60 .. +40.
    double gain_db = 0.0;
    /// Further gain steps (an AGC), at most 8; the gain at t is gain_db plus every step at or
    /// before t.
    std::vector<agc_step> agc_steps;
    /// IQ imbalance: amplitude g = 10^(iq_gain_db/20) (-6 .. 6 dB) and phase phi
    /// (iq_phase_deg, -45 .. 45) of the Q branch against the I branch:
    /// y = mu x + nu conj(x), mu = (1 + g e^{-j phi}) / 2, nu = (1 - g e^{j phi}) / 2.
    double iq_gain_db = 0.0;
    double iq_phase_deg = 0.0;
    /// Complex DC at this level relative to the unit signal power (dBc), its phase from the
    /// seed; -inf: none, else -100 .. 0.
    double dc_offset_dbc = -std::numeric_limits<double>::infinity();
    /// Wiener (random-walk) phase noise: increments of variance 2 pi linewidth / fs per
    /// output sample. 0 .. 1e5 Hz; 0: none.
    double phase_noise_linewidth_hz = 0.0;
    /// Phase noise shaped to a curve (the IRIG 106 transmitter limit, or phase_noise_curve),
    /// on top of the Wiener.
    phase_noise_mask phase_noise = phase_noise_mask::none;
    /// With phase_noise curve: its points, 1 .. 16, offsets 10 Hz .. sample_rate / 4 and
    /// increasing, levels -200 .. 0 dBc/Hz, each segment flat or falling by at most 40 dB a
    /// decade (what the synthesis makes). Empty otherwise.
    std::vector<phase_noise_point> phase_noise_curve;
    /// Analysis: keep only the phase noise (the Wiener's and the curve's) beyond this offset from
    /// the carrier, through two first-order high-pass sections at it (bilinear, prewarped; -6 dB
    /// there, 40 dB/decade below): what a receiver that followed every slower phase perfectly
    /// would still face. 0: all of it; else 10 Hz .. sample_rate / 4, with phase noise. The
    /// filter starts at the first sample's phase, so its output lacks the phase near fc for
    /// the first few 1 / (2 pi fc) s (5 ms at 100 Hz).
    double phase_noise_above_hz = 0.0;
    std::uint64_t seed = 1;
    /// Flight preset: time of the first sample on the flight's clock (the channel's drift
    /// cycles are 7 s and 11 s), so a short recording can start mid-manoeuvre. >= 0.
    double flight_start_s = 0.0;
    dsp::pn_pattern pattern = dsp::pn_pattern::pn15;
    /// The data fields' LDPC code (dsp/fec.hpp): none, the PN pattern itself; else the codewords
    /// of the pattern's next information bits: each data field whole codewords (a code whose n
    /// divides 6144), or the continuous stream of sync-marked, randomized codewords across the
    /// data fields (dsp/fec_stream.hpp), begun mid-frame where the seed decides.
    dsp::fec_code fec = dsp::fec_code::none;
    /// Rays added to the preset's (for channels outside the presets, e.g. a long echo).
    /// At most 8; amplitude 0 .. 10 of the line of sight, delay 0 .. 2000 ns.
    std::vector<channel_ray> extra_rays;
    /// Samples dropped from the start, so the recording begins inside a packet.
    /// -1: chosen from the seed.
    long long start_offset_samples = -1;

    /// Receive channels (two polarizations, or two antennas) of one transmission: simulators
    /// of one configuration but for these fields make the same data, start, transmitter clock,
    /// carrier offset and phase noise (a shared local oscillator); each channel has its own
    /// noise, DC phase and shadowing fades (from `channel` and the seed), and its own preset,
    /// extra rays, delay, carrier phase, Eb/N0 and gain where they are set apart. 0 .. 15;
    /// channel 0 is the single-channel simulator, sample for sample.
    int channel = 0;
    /// Every ray of the channel arrives this much later (the path to this antenna), 0 .. 2000 ns;
    /// the truth's packet starts include it.
    double delay_ns = 0.0;
    /// Airframe shadowing: fades of the signal (not of the receiver's noise) to this depth, dB,
    /// a raised cosine in dB over shadow_duration_s each, starting at random times
    /// shadow_interval_s apart on average (from one fade's start to the next's). 0: none, else
    /// 0 .. 60 dB; duration 1e-3 .. 60 s; interval above the duration, at most 3600 s.
    double shadow_depth_db = 0.0;
    double shadow_duration_s = 1.0;
    double shadow_interval_s = 5.0;

    /// Empty when valid; one message per bad field (field, value, allowed range).
    [[nodiscard]] std::vector<std::string> validate() const;
    /// phase_noise and phase_noise_curve from --phase-noise's text (parse_phase_noise; throws
    /// std::invalid_argument as it does).
    void set_phase_noise(std::string_view text);
    /// The phase-noise curve in effect: irig106_phase_noise_curve(bit_rate_hz), the given
    /// phase_noise_curve, or empty (none).
    [[nodiscard]] std::vector<phase_noise_point> phase_noise_points() const;
    /// False when the output is the channel output itself (exactly 2 samples per bit, no clock
    /// offset or drift); true when it is resampled.
    [[nodiscard]] bool resampled() const noexcept;
};

/// Ground truth of what was sent.
struct sim_truth {
    /// Output sample index of each packet start: the centre of the first preamble bit's pulse
    /// on the line of sight (the channel's timing_offset included), rounded DOWN from its exact
    /// position in output samples (packet_start_positions). At 2 samples per bit with no clock
    /// offset the fraction is timing_offset_samples, as it always was.
    std::vector<std::uint64_t> packet_starts;
    /// The same starts as exact (fractional) positions in output samples, following the
    /// output rate and the transmitter clock's offset and drift.
    std::vector<double> packet_start_positions;
    std::uint64_t first_packet_number = 0;  ///< packet number of packet_starts[0]
};

/// The least phase error with which any receiver can follow a phase noise, even one that knows
/// the data: the error of the Wiener smoother of the phase, linearized, observed through a
/// unit-power constant-envelope signal in white noise. The observation's phase noise has the
/// two-sided PSD N = N0 / (2 P) = 1 / (2 Rb Eb/N0) rad^2/Hz; the smoother's error is the
/// integral over both sidebands of S N / (S + N), S the phase's two-sided PSD. Where S < N
/// (beyond crossover_hz for a falling S) less than half of the phase is removed, the error
/// there between S / 2 and S; far beyond, almost none is.
struct phase_tracking_floor {
    double observation_psd = 0.0;       ///< N, rad^2/Hz (two-sided)
    double crossover_hz = 0.0;          ///< the highest offset where S >= N (0: nowhere; fs / 2: S >= N there)
    double least_error_rad2 = 0.0;      ///< the smoother's mean-square error
    double above_crossover_rad2 = 0.0;  ///< the phase's variance beyond crossover_hz, both sides
};

class simulator {
public:
    explicit simulator(const sim_config& cfg);
    ~simulator();
    simulator(simulator&&) noexcept;
    simulator& operator=(simulator&&) noexcept;

    /// Appends exactly n samples to out.
    void generate(std::size_t n, std::vector<cf32>& out);

    [[nodiscard]] const sim_truth& truth() const noexcept;
    [[nodiscard]] const sim_config& config() const noexcept;
    /// The channel's impulse response (taps at the channel rate, 2 x bit_rate_hz, which is the
    /// output rate only when the output is not resampled; the line of sight at index
    /// channel_delay_samples()), at the current time for the flight preset.
    [[nodiscard]] std::vector<cf64> channel_taps() const;
    /// Integer latency of the channel filter: the line of sight arrives this many samples late.
    [[nodiscard]] static constexpr int channel_delay_samples() noexcept { return 16; }
    /// Complex noise variance per output sample (2 sigma^2), 0 when noiseless.
    [[nodiscard]] double noise_variance() const noexcept;
    /// RMS of the phase shaped to the curve (not the Wiener's), in rad, over the offsets from
    /// above_hz to half the sample rate (0: all), from the synthesis filter's response (and the
    /// high-pass of phase_noise_above_hz); 0 without a curve.
    [[nodiscard]] double phase_noise_rms_rad(double above_hz = 0.0) const;
    /// How closely any receiver can follow the simulated phase noise (the curve and the Wiener
    /// together, through the high-pass of phase_noise_above_hz) at the configured Eb/N0; all
    /// zeros without phase noise or without noise.
    [[nodiscard]] phase_tracking_floor tracking_floor() const;

private:
    struct impl;
    std::unique_ptr<impl> impl_;
};

/// Band-limited (Kaiser-windowed sinc) interpolator taps for a delay of d samples, placed on
/// taps 0 .. 2*half with the zero-delay centre at tap `half`.
void add_fractional_delay(std::vector<cf64>& taps, int half, double d, cf64 gain);

}  // namespace paq::sim
