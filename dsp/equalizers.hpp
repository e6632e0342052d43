// Equalizer design on one packet, after J. T. Ravert, "GPU Implementation of Data-Aided
// Equalizers" (M.S. thesis, BYU, 2017): ZF (eq. 6.7), MMSE (6.17), CMA (6.19-6.31, the
// gradient as an FFT correlation, Listing 6.1), FDE1 and FDE2 in their Wiener forms, noise
// terms 2 sigma2 and 2 sigma2 / Psi (the thesis' eqs. 6.32-6.33 and 7.8-7.9 print 1/sigma2 and
// Psi/sigma2, an erratum).
// Time-domain equalizers are 186 taps c(l), l = -60 .. 125, y(n) = sum_l c(l) r(n - l).
#pragma once

#include "dsp/estimators.hpp"
#include "dsp/fft.hpp"
#include "dsp/receiver_tables.hpp"

#include <array>
#include <span>
#include <vector>

namespace paq::dsp {

using eq_taps = std::array<cf64, chain::L_eq>;

/// r_h(k) = sum_n h(n) h*(n - k), k = 0 .. 37.
[[nodiscard]] std::array<cf64, chain::L_ch> channel_autocorrelation(const std::array<cf64, chain::L_ch>& h) noexcept;

struct solve_result {
    bool regularized = false;  ///< R + diag_load was not PD in double; a tiny load was added
};

/// Solves (R + diag_load I) c = h_n0 with R the 186 x 186 banded Hermitian Toeplitz matrix of
/// rh = channel_autocorrelation(h), h_n0(l) = conj(h(-l)). Band Cholesky in double; `work`
/// holds 186*186 entries. ZF and MMSE share rh and differ only in diag_load.
solve_result solve_equalizer(const std::array<cf64, chain::L_ch>& h, const std::array<cf64, chain::L_ch>& rh,
                             double diag_load, eq_taps& c, std::vector<cf64>& work);

/// Solves (R + diag_load I) c = b for the 186 taps, R the banded Hermitian Toeplitz matrix of
/// r (R[i][j] = r(i - j), r.size() - 1 sub-diagonals), b given in c and replaced by the
/// solution. Band Cholesky in double; not positive definite: loaded by 1e-10 of r(0) more and
/// flagged, and zero taps where that fails too. What solve_equalizer and the two-channel ZF
/// (dsp::solve_combined_zf) solve.
solve_result solve_toeplitz_taps(std::span<const cf64> r, double diag_load, eq_taps& c, std::vector<cf64>& work);

/// Places taps c(l) at FFT index l mod n and transforms: C(k).
void taps_to_spectrum(const cf64* taps, int first_index, int count, const fft_plan& fwd, fft_buffer& out);

/// Mean power of the segment (L_pkt + 2 pre samples, the packet at [pre, pre + L_pkt)) from
/// its n-point spectrum by Parseval: sum |R(k)|^2 / (n (L_pkt + 2 pre)).
[[nodiscard]] double segment_mean_power(const fft_buffer& r_spec, std::size_t pre) noexcept;

/// CMA from c (in/out): `iterations` steepest-descent steps of size mu / P on the packet whose
/// spectrum is R_seg (segment with the packet at [pre, pre + L_pkt)), P its
/// segment_mean_power: the step is relative to the input level, so the taps and the bits do
/// not depend on it. A segment of zero power leaves c as it is.
void cma_refine(eq_taps& c, const fft_buffer& r_spec, std::size_t pre, double mu, int iterations,
                const fft_plan& fwd, const fft_plan& inv, fft_buffer& t1, fft_buffer& t2);
/// The same for an equalizer over several receive channels (at most max_receive_channels):
/// y = sum_c r_c * c_c, the CMA cost on y, each channel's taps stepped along its own gradient,
/// P the channels' segment powers summed. t3: a third buffer (only for more than one channel).
/// One channel: the call above, bit for bit. Throws std::invalid_argument for counts that do
/// not match.
void cma_refine(std::span<eq_taps> c, std::span<const fft_buffer* const> r_spec, std::size_t pre, double mu, int iterations,
                const fft_plan& fwd, const fft_plan& inv, fft_buffer& t1, fft_buffer& t2, fft_buffer* t3);

/// Condition number of R + load I from the channel's spectrum: R is the Toeplitz matrix of
/// |H(f)|^2, whose eigenvalues fill [min |H|^2, max |H|^2] (a Cholesky pivot ratio is no
/// estimate of it). `grid` frequencies.
[[nodiscard]] double spectral_condition(const std::array<cf64, chain::L_ch>& h, double load, int grid = 2048) noexcept;

/// The unequalized path's single-path model of the channel: a delay tau (samples, on a
/// 1/16-sample grid over the channel's span) and complex gain g of the band-limited impulse
/// g sinc(m - tau). What a receiver without an equalizer still recovers: timing, carrier phase
/// and gain, but no intersymbol interference.
///  - tau: the single path whose received signal is closest to h's, the least-squares fit
///    weighted by SOQPSK-TG's autocorrelation R_x (|<s, h>_R|^2 / <s, s>_R largest, with
///    <u, v>_R = sum_ab u_a* v_b R_x(a - b)). The weighting leaves out what the estimate holds
///    where the signal has no power, its noise outside the band: fitted unweighted, the delays
///    of AWGN packets at a channel Eb/N0 of 3.4 dB spread over +-1 sample (1 % beyond
///    +-0.63 of a sample; the path then decided 2-3 times as many bits wrong), weighted over
///    +-0.25;
///  - g: h's projection on that delay's single path, <s, h> / <s, s> unweighted. The weighted
///    fit's gain also holds the echoes' correlation with the main path; with it the trellis on
///    this path lost 21 of 1626 packets over edwards3 at 12 dB (55-221 errors each).
struct single_path {
    double delay_samples = 0.0;
    cf64 gain = 0.0;
};
[[nodiscard]] single_path fit_single_path(const std::array<cf64, chain::L_ch>& h) noexcept;

/// fit_single_path's candidates: tau = c / single_path_steps - N1, c = 0 .. single_path_candidates - 1.
inline constexpr int single_path_steps = 16;
inline constexpr int single_path_candidates = (chain::N1 + chain::N2) * single_path_steps + 1;
/// <s, s>_R of each candidate's unit single path s(m) = sinc(m - tau) (fit_single_path), made
/// once; the CUDA backend takes the same values.
[[nodiscard]] const std::vector<double>& single_path_powers();

/// C(k) = exp(j 2 pi f_k tau) / g on the FFT grid (f_k in cycles per sample, |f_k| <= 1/2):
/// undoes the delay, phase and gain of `p`.
void single_path_response(const single_path& p, fft_buffer& out) noexcept;

/// FDE1 (psi = nullptr) or FDE2: C(k) = H*(k) / (|H(k)|^2 + 2 sigma2 / Psi(k)), H the
/// channel's spectrum on the same grid (given in h_spec).
void fde_response(const fft_buffer& h_spec, double sigma2, const double* psi, fft_buffer& out) noexcept;

}  // namespace paq::dsp
