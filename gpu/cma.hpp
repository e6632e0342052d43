// CMA on the GPU with each packet's iterations on chip (issue 3): dsp::cma_refine for a batch
// of packets, one thread block per packet. The four 16384-point transforms of a step run in
// shared memory (in-place radix-2 stages, four at a time in registers: natural order to
// bit-reversed and back, so no reordering pass), the products with R and the CMA error are
// applied as the transforms store, and the taps stay in shared memory between steps. Global
// memory is read twice per step (R) instead of about fourteen passes over packets x 16384.
//
// Plain C++ header: no CUDA types leak out.
#pragma once

#include "dsp/types.hpp"
#include "gpu/stream_ref.hpp"

#include <cstddef>
#include <span>
#include <vector>

namespace paq::gpu {

/// Points of the transforms: the filter stage's FFT size.
inline constexpr std::size_t cma_fft_size = 16384;

/// Once per device (the current one), before cma_refine_device: lets the kernel have the
/// shared memory it needs (more than the default 48 KB).
void cma_setup_device();

/// Asynchronous on `stream`: for each of `packets` packets, `iterations` CMA steps of size mu
/// over the segment's mean power (dsp::segment_mean_power, level invariant) on taps (packets x 186, c(l) for l = -60 .. 125, in/out) from the segment spectra r_spec
/// (packets x 16384; the packet at [pre, pre + L_pkt) of its segment), as dsp::cma_refine.
/// Allocates nothing and configures nothing (cma_setup_device first). Throws
/// std::invalid_argument for iterations < 0.
void cma_refine_device(const cf32* r_spec, cf32* taps, std::size_t packets, std::size_t pre, double mu, int iterations,
                       cuda_stream_t stream);

/// Host convenience for tests: copies up, runs cma_refine_device on `device`, copies back.
[[nodiscard]] std::vector<cf32> cma_refine(std::span<const cf32> r_spec, std::span<const cf32> taps, std::size_t packets,
                                           std::size_t pre, double mu, int iterations, int device);

}  // namespace paq::gpu
