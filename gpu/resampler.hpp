// The polyphase resampler of dsp/resampler.hpp on the device.
//
//   Create: design's {tap, slope} table to the device (once)
//   resample_device(in, in_len, first_pos, step, out, n_out, stream): y(m) at 32.32 positions
//   first_pos + m step, asynchronous, allocates nothing
//
// The outputs are dsp::resample's bit for bit: the same fixed-point rule (i = pos >> 32, phase =
// the top 8 fraction bits, mu = the low 24 bits times 2^-24), the same float operations in the
// same order, each product and sum rounded separately (__fmul_rn / __fadd_rn, so nvcc cannot
// fuse them into FMAs), inputs outside [0, in_len) read as zero. gpu/resampler.cuh has the
// per-output device function, which the clock-corrected gather (gpu/estimators.cu) shares.
//
// Plain C++ header: no CUDA types leak out.
#pragma once

#include "dsp/resampler.hpp"
#include "dsp/types.hpp"
#include "gpu/stream_ref.hpp"

#include <cstddef>
#include <memory>

namespace paq::gpu {

class device_resampler {
public:
    /// The table of `d` on the current device. Throws std::invalid_argument for a design
    /// without taps or whose table does not have 2 P N entries.
    explicit device_resampler(const dsp::resampler_design& d);
    ~device_resampler();
    device_resampler(const device_resampler&) = delete;
    device_resampler& operator=(const device_resampler&) = delete;

    /// out[m] = dsp::resample's y(m), m = 0 .. n_out-1 (in, out: device memory). Asynchronous
    /// on `stream`; nothing for n_out == 0.
    void resample_device(const cf32* in, std::size_t in_len, dsp::fixed_pos first_pos, dsp::fixed_pos step, cf32* out,
                         std::size_t n_out, cuda_stream_t stream) const;

    [[nodiscard]] int taps() const noexcept { return taps_; }
    [[nodiscard]] double ratio() const noexcept { return ratio_; }
    /// The {tap, slope} table on the device, dsp::resampler_design::coef's layout.
    [[nodiscard]] const float* table() const noexcept;

private:
    struct impl;
    std::unique_ptr<impl> impl_;
    int taps_ = 0;
    double ratio_ = 1.0;
};

}  // namespace paq::gpu
