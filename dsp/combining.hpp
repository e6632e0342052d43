// The chain's paths over two receive channels of one link (receiver_config::channels 2: two
// polarizations, or two antennas): each path an equalizer per channel whose outputs add.
//
//   y(n) = sum_c sum_l c_c(l) r_c(n - l)        (the time-domain paths: ZF, MMSE, CMA)
//   Y(k) = sum_c C_c(k) R_c(k)                  (every path on the FFT grid, dsp/paths.hpp)
//
// Each channel has its own channel estimate h_c and noise sigma2_c (per real dimension); the
// channels share the transmitter, its carrier and its clock. The designs are the one-channel
// designs of dsp/equalizers.hpp written for a receiver with two inputs (single input, multiple
// output: the minimum mean square error over both channels):
//   MMSE       the normal equations over both channels' taps at once, a Hermitian
//              block-Toeplitz system of 2 x 186 unknowns: R_cd(a, b) = sum_n h_d(n) h_c*(n - a + b),
//              right side h_c*(-a), each channel's diagonal loaded by its noise 2 sigma2_c.
//              Interleaving the channels' taps makes it banded (75 sub-diagonals): band
//              Cholesky in double.
//   ZF         maximal-ratio combining, then the ZF of the combined channel (solve_combined_zf).
//   FDE1/FDE2  C_c = (H_c* / sigma2_c) / (sum_d |H_d|^2 / sigma2_d + 2 / Psi), Psi = 1 for FDE1
//              (the Wiener combiner; one channel: dsp::fde_response).
//   none       maximal-ratio combining of the channels' single-path fits (dsp::fit_single_path),
//              each gain shrunk by its estimate's signal fraction f_c (signal_fraction):
//              C_c = (f_c g_c* / sigma2_c) exp(j 2 pi f tau_c) / sum_d f_d |g_d|^2 / sigma2_d.
//   CMA        from the joint MMSE taps, dsp::cma_refine over both channels.
#pragma once

#include "dsp/equalizers.hpp"
#include "dsp/fft.hpp"
#include "dsp/receiver_tables.hpp"

#include <array>
#include <span>
#include <vector>

namespace paq::dsp {

using channel_taps = std::array<cf64, chain::L_ch>;

/// Solves the joint normal equations above for h.size() channels (1 or 2): loads[c] is added
/// to channel c's diagonal (2 sigma2_c for MMSE, 0 for ZF), c[c] receives channel c's taps.
/// `work` holds (2 x 186)^2 entries. A system that is not positive definite in double is
/// loaded by 1e-10 of its largest diagonal entry and flagged (solve_result::regularized); one
/// that still is not gives zero taps. One channel: the equations of dsp::solve_equalizer (the
/// same taps to round-off; its fallback load is 1e-10 of r_h(0) without the load).
solve_result solve_joint_equalizer(std::span<const channel_taps> h, std::span<const double> loads, std::span<eq_taps> c,
                                   std::vector<cf64>& work);

/// Condition number of the joint system above from the channels' spectra: its eigenvalues
/// lie between the least and the greatest eigenvalue over frequency of the 2 x 2 matrix
/// S(f) = v(f) v(f)^H + diag(loads), v_c = conj(H_c(f)) (one channel: spectral_condition).
/// `grid` frequencies. std::invalid_argument for other than 1 or 2 channels, or counts that
/// differ.
[[nodiscard]] double joint_spectral_condition(std::span<const channel_taps> h, std::span<const double> loads, int grid = 2048);

/// ZF over two channels: the channels combined by their matched filters and noise weights
/// first (maximal-ratio combining: sum_c w_c H_c*, w = combining_weights), which leaves one
/// channel G(f) = sum_c w_c |H_c(f)|^2, g(k) = sum_c w_c r_cc(k) for |k| <= 37, and then the
/// 186-tap least-squares ZF of g, as dsp::solve_equalizer makes it for one channel:
/// R_g(a, b) = sum_n g(n) g*(n - a + b) (74 sub-diagonals), right side g*(-a). Channel c's
/// equalizer is then C_c(f) = w_c H_c*(f) C(f), C the taps' spectrum. Why not the joint
/// normal equations without noise: over two channels they are singular (at every frequency
/// the two responses span one direction), and their least-squares solutions with a vanishing
/// load force the response with taps of growing norm (two channels without common zeros can
/// be inverted exactly by finite filters), which amplifies the noise: measured worse than one
/// channel at 12 dB. A system not positive definite in double is loaded by 1e-10 of r_g(0)
/// and flagged, as one channel's. `work` holds 186^2 entries.
solve_result solve_combined_zf(std::span<const channel_taps> h, std::span<const double> sigma2, eq_taps& c,
                               std::vector<cf64>& work);

/// Each channel's weight in the combiners: sigma2_min / sigma2_c (1 for the quietest channel),
/// sigma2_min the least finite noise variance. A noise variance that is not finite (or
/// negative) weighs 0; with a noiseless channel (sigma2 0) only the noiseless ones weigh.
/// std::invalid_argument for other than 1 or 2 variances.
[[nodiscard]] std::array<double, chain::max_receive_channels> combining_weights(std::span<const double> sigma2);

/// FDE1 (psi = nullptr) or FDE2 over the channels: out[c] = w_c H_c* / (sum_d w_d |H_d|^2 +
/// 2 sigma2_min / Psi), w = combining_weights(sigma2).
/// std::invalid_argument for counts or lengths that differ.
void fde_combining_response(std::span<const fft_buffer* const> h_spec, std::span<const double> sigma2, const double* psi,
                            std::span<fft_buffer* const> out);

/// The mean square error the MMSE taps c (dsp::solve_equalizer with the load 2 sigma2) leave
/// on channel h, per unit signal power: 1 - Re(sum_l c(l) h(-l)) = 1 - p^H (R + 2 sigma2 I)^-1
/// p, in [0, 1] (non-finite: 1). It weighs the multipath and the noise together: of two
/// channels, the one of the smaller error is the one an MMSE equalizer receives better, which
/// Eb/N0 alone does not tell (a strong channel of deep spectral nulls loses to a weaker flat one).
[[nodiscard]] double mmse_error(const channel_taps& h, const eq_taps& c) noexcept;

/// The part of a channel estimate's received-signal power that is signal, not estimation
/// noise: 1 - 2 sigma2 noise_gain / p, clamped to [0, 1] (0 for a power that is not positive
/// or not finite). p the estimate's received_power, noise_gain its support's
/// (receiver_tables::channel_support::noise_gain). It is the Wiener shrinkage P / (P + N) of
/// the estimate: an estimate of a channel far below the other is mostly noise, its phase and
/// gain random, and combining it by its face value adds noise and a signal of random phase.
[[nodiscard]] double signal_fraction(double received_power, double sigma2, double noise_gain) noexcept;

/// The unequalized path over the channels: each channel's single path undone in delay and
/// phase and weighted by maximal-ratio combining with its gain shrunk by its estimate's
/// signal_fraction f_c, out[c] = w_c f_c g_c* exp(j 2 pi f tau_c) / sum_d w_d f_d |g_d|^2 (unit
/// gain on the combined signal). Where every f_c |g_c| is zero, the plain combiner (every f_c
/// 1); zero where every gain is zero. std::invalid_argument for counts or lengths that differ.
void mrc_single_path_response(std::span<const single_path> paths, std::span<const double> sigma2,
                              std::span<const double> fraction, std::span<fft_buffer* const> out);

}  // namespace paq::dsp
