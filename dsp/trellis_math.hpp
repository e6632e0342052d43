// The arithmetic the trellis detector's CPU reference (dsp/trellis.cpp) and its GPU stage
// (gpu/trellis.cu) share: the least-squares solve of the pulse fit, and the branch metric of a
// trellis step. Host and device.
#pragma once

#include "dsp/iq_correction.hpp"  // PAQ_HOST_DEVICE
#include "dsp/trellis.hpp"
#include "dsp/waveform.hpp"

namespace paq::dsp::trellis_math {

/// Solves the symmetric positive definite system a x = b (n x n, row-major) in place by
/// Cholesky (a's lower triangle is overwritten, x replaces b); false when a is not positive
/// definite (too few distinct regressors).
PAQ_HOST_DEVICE inline bool solve_spd(double* a, double* b, int n) noexcept
{
    for (int j = 0; j < n; ++j) {
        double d = a[j * n + j];
        for (int k = 0; k < j; ++k) d -= a[j * n + k] * a[j * n + k];
        if (!(d > 0.0)) return false;
        d = sqrt(d);
        a[j * n + j] = d;
        for (int i = j + 1; i < n; ++i) {
            double s = a[i * n + j];
            for (int k = 0; k < j; ++k) s -= a[i * n + k] * a[j * n + k];
            a[i * n + j] = s / d;
        }
    }
    for (int i = 0; i < n; ++i) {
        double s = b[i];
        for (int k = 0; k < i; ++k) s -= a[i * n + k] * b[k];
        b[i] = s / a[i * n + i];
    }
    for (int i = n - 1; i >= 0; --i) {
        double s = b[i];
        for (int k = i + 1; k < n; ++k) s -= a[k * n + i] * b[k];
        b[i] = s / a[i * n + i];
    }
    return true;
}

// The branch metric of axis p at trellis step i for the state sequence `seq` (bit q: symbol
// i - q, the axis's bit k_q = 2 (i - q) + p; 1 = +1) is the squared distance of the step's four
// samples c_m, m = 4i + 2p - half_span + u (u < 4), from the model's prediction
// pred_m = sum_q (+-1) f_{m - 2 k_q}, over the samples inside the packet and the bits inside it:
//
//     sum_m (c_m - pred_m)^2 = cc - 2 sum_q (+-1) z_q + P(seq)
//     cc = sum_m c_m^2,   z_q = sum_m c_m f_{m - 2 k_q},   P(seq) = sum_m pred_m^2
//
// (Ungerboeck's form): cc and z_q, a matched filter's outputs, are the same for every sequence,
// and P(seq) is the same at every step whose samples and bits are all inside the packet (all
// steps before n_symbols = 3168; only the two steps past the packet's last symbol differ).

/// The samples of axis p's trellis step i: m from first_sample(i, p), four of them.
PAQ_HOST_DEVICE constexpr long first_sample(long i, int p) noexcept { return 4 * i + 2 * p - trellis::half_span; }

/// Whether pulse tap u + 4q links sample first_sample(i, p) + u to sequence bit q, both inside
/// the packet (m = 2 k_q + u - half_span + 4q: the tap index is u + 4q).
PAQ_HOST_DEVICE constexpr bool linked(long i, int p, int u, int q) noexcept
{
    constexpr long n_bits = static_cast<long>(waveform::packet_bits);
    const long m = first_sample(i, p) + u;
    const long k = 2 * (i - q) + p;
    return m >= 0 && m < 2 * n_bits && k >= 0 && k < n_bits && u + 4 * q <= 2 * trellis::half_span;
}

/// cc and z_q (q = 0 .. memory) of axis p's step i; c(m): the axis's component of sample m.
template <class Component>
PAQ_HOST_DEVICE inline void step_terms(const Component& c, long i, int p, const double* taps, double& cc, double* z) noexcept
{
    constexpr long n_samples = 2 * static_cast<long>(waveform::packet_bits);
    cc = 0.0;
    for (int q = 0; q <= trellis::memory; ++q) z[q] = 0.0;
    const long m0 = first_sample(i, p);
    for (int u = 0; u < 4; ++u) {
        const long m = m0 + u;
        if (m < 0 || m >= n_samples) continue;
        const double cm = c(m);
        cc += cm * cm;
        for (int q = 0; q <= trellis::memory; ++q) {
            if (linked(i, p, u, q)) z[q] += cm * taps[u + 4 * q];
        }
    }
}

/// P(seq) of axis p's step i: the energy of the model's prediction over the step's samples.
PAQ_HOST_DEVICE inline double pattern_energy(long i, int p, int seq, const double* taps) noexcept
{
    constexpr long n_samples = 2 * static_cast<long>(waveform::packet_bits);
    double e = 0.0;
    const long m0 = first_sample(i, p);
    for (int u = 0; u < 4; ++u) {
        const long m = m0 + u;
        if (m < 0 || m >= n_samples) continue;
        double pred = 0.0;
        for (int q = 0; q <= trellis::memory; ++q) {
            if (linked(i, p, u, q)) pred += (((seq >> q) & 1) != 0 ? 1.0 : -1.0) * taps[u + 4 * q];
        }
        e += pred * pred;
    }
    return e;
}

/// The branch metric (unscaled) from the step's terms and the sequence's P.
PAQ_HOST_DEVICE inline double branch_metric(double cc, const double* z, double pattern, int seq) noexcept
{
    double corr = 0.0;
    for (int q = 0; q <= trellis::memory; ++q) corr += ((seq >> q) & 1) != 0 ? z[q] : -z[q];
    return cc - 2.0 * corr + pattern;
}

}  // namespace paq::dsp::trellis_math
