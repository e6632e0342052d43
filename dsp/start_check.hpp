// The known-sequence check of a located packet start, shared by both backends (host and
// device code).
//
// The preamble is one 32-sample period sent eight times, so the detector's L(u) one period off
// a packet's start still sees seven of the eight periods: a side lobe only 8/7 below the true
// peak. With noise and multipath a side lobe wins now and then (measured on the H100,
// 2026-11-25, 6509 packets a point, the CUDA backend: two-ray 7 packets 32 samples off at
// 9 dB, 1 at 12 and 15 dB, 33 at 6 dB; edwards3 2 at 6 dB; AWGN 3 at 3 dB), and such a packet
// is lost on every path: its channel estimate and CFO refinement read the ASM where the
// preamble is expected. So each located start s is checked against its neighbours s + 32 k,
// 0 < |k| <= start_check::reach, with the whole known sequence (preamble and ASM,
// receiver_tables::x_known):
//
//     K(v) = sum over the 32-sample blocks b of the known samples |sum_{n in b} r(v + n) x*(n)|^2
//
// non-coherent per block like L(u), so a carrier offset costs both alike. At the true start
// all twelve blocks match; one period off at most seven do. The start moves to the candidate
// with the largest K when that is strictly larger than K(s) and its packet lies in the window.
#pragma once

#include "dsp/iq_correction.hpp"  // PAQ_HOST_DEVICE

namespace paq::dsp::start_check {

inline constexpr int period = 32;  ///< samples per preamble period
inline constexpr int reach = 2;    ///< periods checked either side

/// K(v): r(m, re, im) reads window sample m (non-finite samples as zero); the known samples
/// x(n) = x[2i] + j x[2i + 1], n = known_first + i, i < n_known (receiver_tables::x_known as
/// interleaved doubles: std::complex<double>'s layout, and double2's on the device).
template <class Reader>
PAQ_HOST_DEVICE double known_metric(const Reader& r, long long v, const double* x, int n_known, int known_first) noexcept
{
    double k = 0.0;
    for (int b0 = 0; b0 < n_known; b0 += period) {
        const int b1 = b0 + period < n_known ? b0 + period : n_known;
        double re = 0.0, im = 0.0;
        for (int i = b0; i < b1; ++i) {
            double sr = 0.0, si = 0.0;
            r(v + known_first + i, sr, si);
            re += sr * x[2 * i] + si * x[2 * i + 1];  // s conj(x)
            im += si * x[2 * i] - sr * x[2 * i + 1];
        }
        k += re * re + im * im;
    }
    return k;
}

/// The checked start of the packet located at s in a window of len samples (packets of
/// packet_len samples), by the metric k(v) (known_metric, or its sum over receive channels):
/// s, or the candidate s + 32 k (k = -reach .. reach, in that order) with the largest k(v) if
/// that is strictly larger than k(s).
template <class Metric>
PAQ_HOST_DEVICE long long checked_start_by(const Metric& metric, long long len, long long packet_len, long long s) noexcept
{
    long long best = s;
    double k_best = metric(s);
    for (int k = -reach; k <= reach; ++k) {
        if (k == 0) continue;
        const long long v = s + static_cast<long long>(period) * k;
        if (v < 0 || v + packet_len > len) continue;
        const double kv = metric(v);
        if (kv > k_best) {
            best = v;
            k_best = kv;
        }
    }
    return best;
}

/// checked_start_by with K(v) of one window.
template <class Reader>
PAQ_HOST_DEVICE long long checked_start(const Reader& r, long long len, long long packet_len, long long s, const double* x, int n_known,
                                        int known_first) noexcept
{
    return checked_start_by([&](long long v) { return known_metric(r, v, x, n_known, known_first); }, len, packet_len, s);
}

}  // namespace paq::dsp::start_check
