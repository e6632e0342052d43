// Data-aided estimators on one packet (SPEC 3): frequency offset (eq. 3.7), de-rotation
// (eq. 3.8 with the sample index), channel (eqs. 3.9-3.10) and noise variance (3.11-3.12).
// `r` points at the packet start (sample 0 = centre of the first preamble bit); negative
// indices are valid down to -packet_margin.
#pragma once

#include "dsp/receiver_tables.hpp"
#include "dsp/types.hpp"

#include <array>

namespace paq::dsp {

/// w0 = (1/32) arg sum_{n=64}^{223} r(n) r*(n - 32), radians per sample. |w0| < pi/32.
[[nodiscard]] double estimate_cfo(const cf64* r) noexcept;

/// r(n) <- r(n) exp(-j w0 n) for n in [first, last).
void derotate(cf64* r, int first, int last, double w0) noexcept;

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

/// The support with the least estimated error (Mallows' Cp), every error measured as the
/// received-signal power it causes (sum_ab e_a e_b* R_x(b - a), as received_power): the
/// noise the support's estimator lets in, 2 sigma2 noise_gain, plus the channel left out,
/// estimated from the full-width estimate h_wide as the power of its taps outside the support
/// less the noise they carry on average (2 sigma2 outside_noise_gain). Ties go to the lower
/// index; non-finite input gives the full width.
[[nodiscard]] int select_channel_support(const std::array<cf64, chain::L_ch>& h_wide, double sigma2,
                                         const receiver_tables& t) noexcept;

}  // namespace paq::dsp
