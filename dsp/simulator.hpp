// Signal simulator: iNET packets of SOQPSK-TG through a multipath channel with AWGN, carrier
// frequency and phase offset and a sample-timing offset (SPEC 5, issue 2 item 3).
//
//   bits (preamble | ASM | PN data) -> soqpsk_modulator -> multipath FIR (band-limited
//   fractional delays) -> x exp(j(2 pi f n / fs + phase)) -> + AWGN -> cf32 samples
#pragma once

#include "dsp/pn.hpp"
#include "dsp/types.hpp"

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace paq::dsp {

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

struct sim_config {
    std::string preset = "awgn";
    double ebn0_db = std::numeric_limits<double>::infinity();  ///< +inf: no noise
    double cfo_hz = 0.0;
    double phase_rad = 0.0;
    double timing_offset_samples = 0.0;  ///< fractional sample delay, 0 <= x < 1
    double sample_rate_hz = 20.625e6;
    std::uint64_t seed = 1;
    /// Flight preset: time of the first sample on the flight's clock (the channel's drift
    /// cycles are 7 s and 11 s), so a short recording can start mid-manoeuvre. >= 0.
    double flight_start_s = 0.0;
    pn_pattern pattern = pn_pattern::pn15;
    /// Rays added to the preset's (for channels outside the presets, e.g. a long echo).
    /// At most 8; amplitude 0 .. 10 of the line of sight, delay 0 .. 2000 ns.
    std::vector<channel_ray> extra_rays;
    /// Samples dropped from the start, so the recording begins inside a packet.
    /// -1: chosen from the seed.
    long long start_offset_samples = -1;

    /// Empty when valid; one message per bad field (field, value, allowed range).
    [[nodiscard]] std::vector<std::string> validate() const;
};

/// Ground truth of what was sent.
struct sim_truth {
    /// Sample index (in the output) of each packet start: the centre of the first preamble
    /// bit's pulse on the line of sight, rounded down (the fraction is timing_offset).
    std::vector<std::uint64_t> packet_starts;
    std::uint64_t first_packet_number = 0;  ///< packet number of packet_starts[0]
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
    /// The channel's impulse response (taps at the sample rate, the line of sight at index
    /// channel_delay_samples()), at the current time for the flight preset.
    [[nodiscard]] std::vector<cf64> channel_taps() const;
    /// Integer latency of the channel filter: the line of sight arrives this many samples late.
    [[nodiscard]] static constexpr int channel_delay_samples() noexcept { return 16; }
    /// Complex noise variance per sample (2 sigma^2), 0 when noiseless.
    [[nodiscard]] double noise_variance() const noexcept;

private:
    struct impl;
    std::unique_ptr<impl> impl_;
};

/// Band-limited (Kaiser-windowed sinc) interpolator taps for a delay of d samples, placed on
/// taps 0 .. 2*half with the zero-delay centre at tap `half`.
void add_fractional_delay(std::vector<cf64>& taps, int half, double d, cf64 gain);

}  // namespace paq::dsp
