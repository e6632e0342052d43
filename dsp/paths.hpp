// The six filter paths of one packet (none, ZF, MMSE, CMA, FDE1, FDE2), the CPU side of
// gpu/paths.cuh: each path's equalizer on the FFT grid, C(k), and the packet's spectrum R(k)
// through it and a filter (the detection filter H_NO, or the trellis's low-pass), inverse
// transformed.
#pragma once

#include "dsp/equalizers.hpp"
#include "dsp/fft.hpp"
#include "dsp/receiver_tables.hpp"

#include <span>
#include <vector>

namespace paq::dsp {

/// What one packet's six paths are made of: the ZF, MMSE and CMA taps, the single-path fit of
/// the channel (the unequalized path's timing, phase and gain), the channel's spectrum and
/// noise (FDE1, FDE2) and the tables' Psi (FDE2).
struct packet_equalizers {
    const eq_taps& zf;
    const eq_taps& mmse;
    const eq_taps& cma;
    const single_path& unequalized;
    const fft_buffer& h_spec;
    double sigma2;
    const double* psi;
};

/// C(k) of path p: the taps' spectrum (ZF, MMSE, CMA), the single path's inverse (none), or
/// the FDE response on H (FDE1, FDE2).
void path_response(eq_path p, const packet_equalizers& eq, const fft_plan& fwd, fft_buffer& c_spec);

/// y = IFFT(R x C x filter), unnormalized (the inverse transform's 1/N is the caller's, or in
/// the filter): the detection filter's spectrum (complex) or the trellis's low-pass (real).
void filter_path(const fft_buffer& r_spec, const fft_buffer& c_spec, const fft_buffer& filter, const fft_plan& inv, fft_buffer& y);
void filter_path(const fft_buffer& r_spec, const fft_buffer& c_spec, const std::vector<double>& filter, const fft_plan& inv,
                 fft_buffer& y);

/// The same over several receive channels: y = IFFT(sum_c R_c x C_c x filter). One channel:
/// filter_path, bit for bit.
void filter_paths(std::span<const fft_buffer* const> r_spec, std::span<const fft_buffer* const> c_spec, const fft_buffer& filter,
                  const fft_plan& inv, fft_buffer& y);
void filter_paths(std::span<const fft_buffer* const> r_spec, std::span<const fft_buffer* const> c_spec,
                  const std::vector<double>& filter, const fft_plan& inv, fft_buffer& y);

}  // namespace paq::dsp
