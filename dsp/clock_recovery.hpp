// The transmitter's bit clock against the sample clock (a telemetry transmitter's clock may be
// off by up to about +-200 ppm, and drift).
//
//   preamble metric M(u) -> refine_peak: fractional packet starts s_i (2-samples-per-bit units)
//   -> estimate_clock: packet numbers n_i on the grid, s_i = a + T n_i fitted over the batch
//      (mean) and over the +-K packets around each one (local), ppm = (L_pkt / T - 1) 1e6
//   -> clock_correct_packet: the packet re-timed by the resampler's table at ratio 1
//
// SIGN: ppm > 0 means the transmitter's clock is fast: its packets are shorter than L_pkt
// samples (T = L_pkt / (1 + ppm 1e-6)), and transmitter sample n is at receiver position
// n / (1 + ppm 1e-6).
//
// Measured (docs/SIGNAL-CHAIN.md, "Clock offset"; test_clock_recovery prints them): the
// refined starts scatter by 0.065 / 0.035 / 0.013 samples (std) at Eb/N0 5 / 11 / 20 dB, with a
// bias of -0.034 .. +0.039 samples that depends on the fractional timing (the parabola's); from
// 40 packets at 11 dB the mean ppm is within 0.06 ppm and every local ppm (K = 16) within
// 0.3 ppm, -200 .. +200 ppm. Re-timed at its local estimate, a packet at +-200 ppm goes through
// the chain with 1.0 .. 1.2x the 0 ppm BER (11 dB AWGN); uncorrected it is 0.21.
#pragma once

#include "dsp/resampler.hpp"
#include "dsp/types.hpp"

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace paq::dsp {

/// The clock is estimated per part of a batch (dsp::split_batch into this many parts, over
/// the packets each part owns), on both backends: the GPU backend processes a batch in parts
/// and estimates each part's clock as soon as its packets are located.
inline constexpr std::size_t clock_scope_parts = 4;

/// Fractional position of the peak of `metric` at index `peak` (a local maximum): the vertex
/// of the parabola through metric[peak-1 .. peak+1], clamped to +-0.5 around peak. At the
/// array's ends, or when the three points are not concave, the peak itself.
[[nodiscard]] double refine_peak(const double* metric, std::size_t len, std::size_t peak) noexcept;
/// The same from the three values M(peak - 1), M(peak), M(peak + 1) of a metric array of `len`
/// values (the GPU backend copies only those back).
[[nodiscard]] double refine_peak(double ym, double y0, double yp, std::size_t len, std::size_t peak) noexcept;

struct clock_params {
    /// Local fit over packets whose number differs by at most K, 1 .. 1000.
    int local_half_width = 16;
    /// A start is on the grid when it lies within this of a multiple of the period from its
    /// neighbours, 0.5 .. 1000 samples.
    double grid_tolerance_samples = 4.0;
    /// Largest clock offset looked for, 1 .. 5000 ppm (spacings outside L_pkt (1 +- this) do
    /// not count for the period's first guess).
    double max_abs_ppm = 1000.0;

    /// Empty when valid; one message per bad field (field, value, allowed range).
    [[nodiscard]] std::vector<std::string> validate() const;
};

struct clock_estimate {
    bool valid = false;            ///< at least two on-grid starts; otherwise ppm = 0
    double ppm = 0.0;              ///< batch mean, from the least-squares period
    double period_samples = 0.0;   ///< fitted packet period T (L_pkt when not valid)
    std::size_t on_grid = 0;       ///< starts used
    std::size_t off_grid = 0;      ///< starts rejected as off the packet grid (false detections)
    /// Per start, in the order given: the local ppm (the batch mean for off-grid starts and
    /// where the local fit has fewer than 2 packets), and the packet number counted from the
    /// first on-grid start (-1 off the grid).
    std::vector<double> packet_ppm;
    std::vector<long long> packet_number;
};

/// The clock from one batch's fractional packet starts (ascending, 2-samples-per-bit units).
/// 1. First guess of the period: the median of the spacings within L_pkt (1 +- max_abs_ppm).
/// 2. On the grid: a start whose spacing to a strict majority of its up-to-8 nearest starts is
///    a non-zero multiple of the period within the tolerance. False detections are rarely on
///    the grid of their neighbours; missed packets only make multiples of 2 or more.
/// 3. Numbers: n_i = n_prev + round((s_i - s_prev) / period) over the on-grid starts.
/// 4. s = a + T n by least squares: over all (mean), and per start over the on-grid starts
///    with |n_j - n_i| <= K (local; one-sided at the batch's ends).
/// Throws std::invalid_argument if params do not validate.
[[nodiscard]] clock_estimate estimate_clock(std::span<const double> starts, const clock_params& params = {});

/// The re-timing step for an offset: 1 / (1 + ppm 1e-6) input samples per output sample, in
/// 32.32 fixed point (to_fixed_step).
[[nodiscard]] fixed_pos clock_step(double ppm);

struct sample_batch;
struct packet_candidates;
struct receiver_config;

/// The re-timing step of each located packet of a 2-samples-per-bit batch (2^32 where the
/// packet is not re-timed: tracking off, no valid estimate, or |ppm| < clock_min_ppm), and
/// its local ppm in `ppm_out` (0 without a valid estimate). Fractional starts from the
/// batch's metric (refine_peak), the clock per part (clock_scope_parts). Both backends.
[[nodiscard]] std::vector<fixed_pos> clock_steps(const sample_batch& batch, std::span<const double> metric,
                                                 const packet_candidates& found, int template_offset,
                                                 const receiver_config& cfg, std::vector<double>& ppm_out);

/// A packet's segment re-timed for the clock, a drop-in for the copy in cpu_backend's
/// packet(): out[i] for i = 0 .. seg_len-1 is the input at window position
///   start + (i - margin) step          (32.32 fixed point: i step - margin step + start 2^32,
///                                       in signed 64-bit arithmetic, so negative positions
///                                       near the window's start are valid)
/// evaluated by resample_at() with `d` (design_resampler(1.0)); out[seg_len .. out_len) = 0.
/// Anchored at the integer packet start (position `start` is output `margin`): at 0 ppm this
/// is the plain copy bit for bit (phase 0 of the ratio-1 table is a unit impulse), and the
/// fractional timing stays with the channel estimator as before. Samples outside the window
/// and non-finite samples read as zero; the return value counts the non-finite samples the
/// filter reads (the window's samples in [first - N/2 + 1, last + N/2] around the first and
/// last positions). `scratch` is reused between calls. Output as cf32 or cf64.
std::uint32_t clock_correct_packet(const cf32* window, std::size_t window_len, long long start, fixed_pos step,
                                   std::size_t margin, std::size_t seg_len, cf64* out, std::size_t out_len,
                                   const resampler_design& d, std::vector<cf32>& scratch);
std::uint32_t clock_correct_packet(const cf32* window, std::size_t window_len, long long start, fixed_pos step,
                                   std::size_t margin, std::size_t seg_len, cf32* out, std::size_t out_len,
                                   const resampler_design& d, std::vector<cf32>& scratch);

}  // namespace paq::dsp
