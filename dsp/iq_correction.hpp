// Front-end correction: DC offset and IQ imbalance of the receiver's mixer,
// estimated blindly from each packet's own segment and removed before anything else reads it.
//
// Model (the simulator's, an AD9361-class quadrature mixer): y = mu x + nu x* + d with I kept
// and Q' = g (Q cos phi - I sin phi). For a circular signal x (SOQPSK-TG with its carrier
// offset and the noise are), E[I^2] = E[Q^2] and E[IQ] = 0, so the second-order statistics of
// y after its mean is removed give the mixer exactly:
//
//   d = mean(y),  P_I = var(I), P_Q = var(Q), C = cov(I, Q)
//   g sin phi = -C / P_I,   g^2 = P_Q / P_I,   g cos phi = sqrt(P_Q / P_I - (C / P_I)^2)
//   corrected: I - d_I,  ((Q - d_Q) - (C / P_I)(I - d_I)) / (g cos phi)
//
// (Gram-Schmidt: the Q branch made orthogonal to I and given I's power). Over one segment of
// 13,184 samples the statistics are good to about 1/sqrt(13184): a residual image near -40 dB
// and a residual DC near -40 dB below the signal, whatever the impairment was (measured in
// docs/SIGNAL-CHAIN.md). Per packet rather than per batch: a packet's bits then depend on
// its own samples only (not on the batch split or the GPU's parts), and the estimate follows
// a front end whose state changes (gain steps, retuning).
//
// The GPU does the same per packet (gpu/iq_correction.cu), with the sums in double.
#pragma once

#include "dsp/batch.hpp"
#include "dsp/types.hpp"

#include <cmath>
#include <cstddef>

namespace paq::dsp {

#if defined(__CUDACC__)
#define PAQ_HOST_DEVICE __host__ __device__
#else
#define PAQ_HOST_DEVICE
#endif

/// The correction from the moments of n samples (sums of I, Q, I^2, Q^2, IQ): the one
/// definition the CPU and the GPU kernel both use.
struct iq_dc_coefficients {
    double dc_i = 0.0, dc_q = 0.0;  ///< mean of I and Q
    double cross = 0.0;             ///< C / P_I: the part of I in Q
    double q_scale = 1.0;           ///< 1 / (g cos phi)
    double p_i = 0.0, p_q = 0.0;    ///< variances of I and Q
    bool valid = false;             ///< false: a degenerate segment (no power, or I and Q dependent)
    bool apply_dc = false;          ///< the DC is above iq_dc_gate: removed
    bool apply_iq = false;          ///< the image is above iq_dc_gate: corrected
};

/// The correction is applied only where the estimate stands out of what a clean signal shows
/// by itself: DC power, and image power |nu|^2 / |mu|^2, above -30 dB of the signal. A clean
/// segment's own mean and improperness, over 13,184 samples of SOQPSK-TG, read about -36 dBc
/// and -44 dB; removing them is not free (its error acts as interference: measured 1.09x on
/// MMSE at AWGN 11 dB when always applied), while an impairment left at the gate costs at most
/// about 1.15x (docs/SIGNAL-CHAIN.md, "Front-end correction").
inline constexpr double iq_dc_gate = 1e-3;

PAQ_HOST_DEVICE inline iq_dc_coefficients iq_dc_coefficients_from_sums(double n, double si, double sq, double sii, double sqq,
                                                                        double siq) noexcept
{
    iq_dc_coefficients k;
    if (!(n > 0.0)) return k;
    k.dc_i = si / n;
    k.dc_q = sq / n;
    k.p_i = sii / n - k.dc_i * k.dc_i;
    k.p_q = sqq / n - k.dc_q * k.dc_q;
    const double c = siq / n - k.dc_i * k.dc_q;
    // Finite and positive (NaN fails every comparison); 1e-6: I and Q within 0.06 degrees of
    // dependent, no quadrature signal to restore.
    if (!(k.p_i > 0.0 && k.p_i < 1e300) || !(k.p_q > 0.0 && k.p_q < 1e300) || !(c > -1e300 && c < 1e300)) return k;
    k.cross = c / k.p_i;
    const double g2 = k.p_q / k.p_i;
    const double gcos2 = g2 - k.cross * k.cross;
    if (!(gcos2 > 1e-6 * g2)) return k;
    k.q_scale = 1.0 / sqrt(gcos2);
    k.valid = true;
    const double p = k.p_i + k.p_q;
    k.apply_dc = k.dc_i * k.dc_i + k.dc_q * k.dc_q > iq_dc_gate * p;
    // mu = (1 + g e^-j phi) / 2, nu = (1 - g e^j phi) / 2: |nu|^2 / |mu|^2 from g^2 and g cos phi.
    const double gcos = sqrt(gcos2);
    k.apply_iq = 1.0 - 2.0 * gcos + g2 > iq_dc_gate * (1.0 + 2.0 * gcos + g2);
    if (!k.apply_dc) k.dc_i = k.dc_q = 0.0;
    if (!k.apply_iq) {
        k.cross = 0.0;
        k.q_scale = 1.0;
    }
    return k;
}

/// What estimate_iq_dc found, and the correction it implies.
struct iq_dc_estimate {
    double dc_i = 0.0, dc_q = 0.0;  ///< mean of I and Q
    double cross = 0.0;             ///< C / P_I: the part of I in Q
    double q_scale = 1.0;           ///< 1 / (g cos phi)
    double gain_db = 0.0;           ///< 20 log10 g: Q's amplitude against I's
    double phase_deg = 0.0;         ///< phi
    double dc_dbc = -300.0;         ///< |d|^2 against the segment's power after the DC, dB
    bool valid = false;             ///< false: a degenerate segment (no power, or I and Q dependent); nothing corrected
    bool corrected = false;         ///< DC or IQ above iq_dc_gate: dc_i/dc_q and cross/q_scale hold what is applied
};

/// Moments of n samples (the sums in double, in index order): the estimate.
[[nodiscard]] iq_dc_estimate iq_dc_from_sums(double n, double si, double sq, double sii, double sqq, double siq) noexcept;

/// Estimates over seg[0, n).
[[nodiscard]] iq_dc_estimate estimate_iq_dc(const cf64* seg, std::size_t n) noexcept;

/// The estimate into a packet's record (front_end_estimated, front_end_corrected and the values).
void record_front_end(const iq_dc_estimate& e, packet_record& rec) noexcept;

/// Applies e to seg[0, n) in place: what stands above the gate (nothing when !e.corrected).
void correct_iq_dc(cf64* seg, std::size_t n, const iq_dc_estimate& e) noexcept;

}  // namespace paq::dsp
