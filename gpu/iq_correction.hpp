// Front-end correction on the GPU: dsp/iq_correction for every packet
// segment of a batch part, one thread block per segment. Plain C++ header.
#pragma once

#include "dsp/types.hpp"
#include "gpu/stream_ref.hpp"

#include <cstddef>

namespace paq::gpu {

/// Sums each slot's moments stores per slot (n, I, Q, I^2, Q^2, IQ): what
/// dsp::iq_dc_from_sums takes.
inline constexpr std::size_t iq_dc_sums_per_slot = 6;

/// Asynchronous on `stream`: for slots p < *count (count may be null: all slots) the moments
/// of segments[p stride, p stride + seg_len) in double (into sums, iq_dc_sums_per_slot per
/// slot; dead slots get zeros), then the segment corrected in place with
/// dsp::iq_dc_coefficients_from_sums (nothing when it is not valid), as dsp::correct_iq_dc.
void iq_dc_correct_device(cf32* segments, std::size_t stride, std::size_t seg_len, const int* count, std::size_t slots,
                          double* sums, cuda_stream_t stream);

}  // namespace paq::gpu
