// Data-aided estimators on one packet, the equations of chapter 3 of J. T. Ravert, "GPU
// Implementation of Data-Aided Equalizers" (M.S. thesis, BYU, 2017): frequency offset
// (eq. 3.7), de-rotation (eq. 3.8, with the sample index in the exponent that the thesis
// drops), channel (eqs. 3.9-3.10) and noise variance (3.11-3.12).
// `r` points at the packet start (sample 0 = centre of the first preamble bit); negative
// indices are valid down to -packet_margin.
#pragma once

#include "dsp/receiver_tables.hpp"
#include "dsp/types.hpp"

#include <array>
#include <span>

namespace paq::dsp {

/// w0 = (1/32) arg sum_{n=64}^{223} r(n) r*(n - 32), radians per sample. |w0| < pi/32.
[[nodiscard]] double estimate_cfo(const cf64* r) noexcept;
/// The same over several receive channels of one packet (one transmitter, one carrier): the
/// channels' lag products summed before the angle, each weighted by cfo_channel_weights (a
/// channel of strong noise would otherwise outweigh a clean one). One channel: estimate_cfo(r[0]).
[[nodiscard]] double estimate_cfo(std::span<const cf64* const> r) noexcept;

/// Each channel's weight in the CFO estimates over several channels: 1 / its noise power, the
/// noise measured as the part of the preamble's energy that does not repeat one period later,
/// (E - |sum r(n) r*(n - 32)|) / 160 over n = 64 .. 223 (at least 1e-3 of E / 160).
[[nodiscard]] std::array<double, chain::max_receive_channels> cfo_channel_weights(std::span<const cf64* const> r) noexcept;

/// r(n) <- r(n) exp(-j w0 n) for n in [first, last).
void derotate(cf64* r, int first, int last, double w0) noexcept;
/// r(n) <- r(n) exp(-j dw (n - centre)) for n in [first, last): a frequency correction that
/// leaves the phase at sample `centre` as it is.
void derotate_about(cf64* r, int first, int last, double dw, double centre) noexcept;
/// The centre of the channel estimator's observation range (samples from the packet start):
/// the carrier correction from the decisions turns the packet about it, so that the channel
/// estimate made there keeps its phase.
[[nodiscard]] inline double carrier_centre(const receiver_tables& t) noexcept
{
    return static_cast<double>(t.obs_first) + 0.5 * static_cast<double>(t.M - 1);
}

struct channel_estimate {
    std::array<cf64, chain::L_ch> h{};  ///< h(-N1) .. h(N2)
    double sigma2 = 0.0;                ///< noise variance per real dimension
    double energy = 0.0;                ///< sum |h|^2
    int support = 0;                    ///< index into receiver_tables::supports
};

/// Three steps over the observation range (docs/SIGNAL-CHAIN.md, "channel estimator"):
/// sigma2 = |r - X h_p|^2 / (2 rho) with the pilot h_p = X_lpi r (eqs. 3.9-3.12); the
/// support of the channel chosen by select_channel_support from the full-width estimate;
/// h = G r with that support's estimator.
[[nodiscard]] channel_estimate estimate_channel(const cf64* r, const receiver_tables& t) noexcept;

/// The support with the least estimated error, every error measured as the received-signal
/// power it causes (sum_ab e_a e_b* R_x(b - a), as received_power): the noise the support's
/// estimator lets in, 2 sigma2 noise_gain, weighted by support_noise_penalty (the Bayesian
/// information criterion's weight over Mallows' Cp's), plus the channel left out,
/// estimated from the full-width estimate h_wide as the power of its taps outside the support
/// less the noise they carry on average (2 sigma2 outside_noise_gain). Ties go to the lower
/// index; non-finite input gives the full width.
[[nodiscard]] int select_channel_support(const std::array<cf64, chain::L_ch>& h_wide, double sigma2,
                                         const receiver_tables& t) noexcept;

/// Blocks of the observation range that estimate_cfo_residual measures a phase over.
inline constexpr std::size_t cfo_refine_block = 32;
/// At most this many blocks (the observation ranges of receiver_tables are shorter).
inline constexpr std::size_t cfo_refine_max_blocks = 32;

/// The carrier offset left after estimate_cfo, in radians per sample,
/// from `obs`, the channel estimator's observation range (M samples, r(obs_first) ..
/// r(obs_last)): the pilot channel estimate X_lpi obs predicts the known samples; the phase of
/// each block of 32 observed samples against that prediction, arg sum obs(n) (X h_p)*(n),
/// unwrapped block to block, and the slope of a line fitted to those phases (weighted by the
/// block lengths) is the residual offset. estimate_cfo sees the preamble through a lag of 32
/// samples, so a random phase (oscillator phase noise) or thermal noise leaves an error in it
/// that ramps the phase across the channel estimator's window; this measures that ramp over
/// the whole window.
[[nodiscard]] double estimate_cfo_residual(const cf64* obs, const receiver_tables& t) noexcept;

/// Passes of refine_cfo: the pilot fit follows about a third of a ramp, so each pass measures
/// about two thirds of what is left (measured 0.68 on AWGN); three leave about 3%.
inline constexpr int cfo_refine_passes = 3;

/// The correction to estimate_cfo's offset w0: the observation range of r derotated by w0
/// (a copy; r is not changed), then cfo_refine_passes times estimate_cfo_residual on it and
/// the copy derotated by the result. Returns the sum; the caller derotates the packet once,
/// by w0 plus it.
[[nodiscard]] double refine_cfo(const cf64* r, double w0, const receiver_tables& t);
/// The same over several receive channels of one packet: each pass measures the block phases
/// of every channel against its own pilot prediction and sums them block by block, each
/// channel weighted by cfo_channel_weights, before the slope. One channel: refine_cfo(r[0]).
[[nodiscard]] double refine_cfo(std::span<const cf64* const> r, double w0, const receiver_tables& t);

/// The slope of the block phases (as estimate_cfo_residual): the phases of block_sums[b] at
/// centres[b] with weights[b], unwrapped in order (gpu/estimators.cu's cfo_residual_kernel
/// does the same on the device).
[[nodiscard]] double block_phase_slope(const cf64* block_sums, const double* centres, const double* weights,
                                       std::size_t blocks) noexcept;

}  // namespace paq::dsp
