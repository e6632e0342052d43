#include "gpu/resampler.hpp"

#include "gpu/resampler.cuh"
#include "gpu/resources.cuh"

#include <stdexcept>
#include <string>

namespace paq::gpu {

namespace {

constexpr int resample_block = 256;

/// One thread per output. Neighbouring outputs read overlapping inputs and nearby table rows:
/// L1 serves the repeats.
__global__ void __launch_bounds__(resample_block) resample_kernel(const cuFloatComplex* __restrict__ in, long long in_len,
                                                                  dsp::fixed_pos first_pos, dsp::fixed_pos step,
                                                                  cuFloatComplex* __restrict__ out, std::size_t n_out,
                                                                  const float2* __restrict__ coef, int taps)
{
    const std::size_t m = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
    if (m >= n_out) return;
    const dsp::fixed_pos pos = first_pos + static_cast<dsp::fixed_pos>(m) * step;  // wrapping, as on the CPU
    out[m] = resample_at_device(plain_reader{in, in_len}, static_cast<long long>(pos >> dsp::fixed_frac_bits),
                                static_cast<std::uint32_t>(pos), coef, taps);
}

}  // namespace

struct device_resampler::impl {
    device_buffer<float2> coef;
    explicit impl(std::size_t pairs) : coef(pairs) {}
};

device_resampler::device_resampler(const dsp::resampler_design& d)
{
    const std::size_t pairs = static_cast<std::size_t>(d.phases) * static_cast<std::size_t>(d.taps);
    if (d.taps <= 0 || d.phases != dsp::resampler_phases || d.coef.size() != 2 * pairs) {
        throw std::invalid_argument("gpu resampler: design with " + std::to_string(d.taps) + " taps, " + std::to_string(d.phases) +
                                    " phases and " + std::to_string(d.coef.size()) + " table entries (expected taps > 0, " +
                                    std::to_string(dsp::resampler_phases) + " phases, 2 x phases x taps entries)");
    }
    impl_ = std::make_unique<impl>(pairs);
    taps_ = d.taps;
    ratio_ = d.ratio;
    PAQ_CUDA_CHECK(cudaMemcpy(impl_->coef.data(), d.coef.data(), d.coef.size() * sizeof(float), cudaMemcpyHostToDevice));
}

device_resampler::~device_resampler() = default;

const float* device_resampler::table() const noexcept { return reinterpret_cast<const float*>(impl_->coef.data()); }

void device_resampler::resample_device(const cf32* in, std::size_t in_len, dsp::fixed_pos first_pos, dsp::fixed_pos step, cf32* out,
                                       std::size_t n_out, cuda_stream_t stream) const
{
    if (n_out == 0) return;
    const auto blocks = static_cast<unsigned>((n_out + resample_block - 1) / resample_block);
    resample_kernel<<<blocks, resample_block, 0, stream>>>(reinterpret_cast<const cuFloatComplex*>(in), static_cast<long long>(in_len),
                                                           first_pos, step, reinterpret_cast<cuFloatComplex*>(out), n_out,
                                                           impl_->coef.data(), taps_);
    PAQ_CUDA_CHECK_LAUNCH();
}

}  // namespace paq::gpu
