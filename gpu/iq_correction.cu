#include "gpu/iq_correction.hpp"

#include "dsp/iq_correction.hpp"
#include "gpu/cuda_check.hpp"

#include <cuda_runtime.h>

namespace paq::gpu {

namespace {

constexpr int threads = 256;

__global__ void __launch_bounds__(threads) iq_dc_kernel(float2* __restrict__ segments, long long stride, int seg_len,
                                                         const int* __restrict__ count, double* __restrict__ sums)
{
    const int p = blockIdx.x;
    double* out = sums + static_cast<std::size_t>(p) * iq_dc_sums_per_slot;
    if (count != nullptr && p >= *count) {
        if (threadIdx.x < iq_dc_sums_per_slot) out[threadIdx.x] = 0.0;
        return;
    }
    float2* seg = segments + static_cast<std::size_t>(p) * static_cast<std::size_t>(stride);
    double a[5] = {0.0, 0.0, 0.0, 0.0, 0.0};
    for (int k = threadIdx.x; k < seg_len; k += threads) {
        const double i = seg[k].x, q = seg[k].y;
        a[0] += i;
        a[1] += q;
        a[2] += i * i;
        a[3] += q * q;
        a[4] += i * q;
    }
    __shared__ double red[5][threads];
    for (int j = 0; j < 5; ++j) red[j][threadIdx.x] = a[j];
    __syncthreads();
    for (int s = threads / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) {
            for (int j = 0; j < 5; ++j) red[j][threadIdx.x] += red[j][threadIdx.x + s];
        }
        __syncthreads();
    }
    const double n = static_cast<double>(seg_len);
    const dsp::iq_dc_coefficients c = dsp::iq_dc_coefficients_from_sums(n, red[0][0], red[1][0], red[2][0], red[3][0], red[4][0]);
    if (threadIdx.x == 0) {
        out[0] = n;
        for (int j = 0; j < 5; ++j) out[j + 1] = red[j][0];
    }
    if (!c.apply_dc && !c.apply_iq) return;
    for (int k = threadIdx.x; k < seg_len; k += threads) {
        const double i = seg[k].x - c.dc_i;
        const double q = seg[k].y - c.dc_q;
        seg[k] = make_float2(static_cast<float>(i), static_cast<float>((q - c.cross * i) * c.q_scale));
    }
}

}  // namespace

void iq_dc_correct_device(cf32* segments, std::size_t stride, std::size_t seg_len, const int* count, std::size_t slots,
                          double* sums, cuda_stream_t stream)
{
    if (slots == 0) return;
    iq_dc_kernel<<<static_cast<unsigned>(slots), threads, 0, stream>>>(reinterpret_cast<float2*>(segments), static_cast<long long>(stride),
                                                                      static_cast<int>(seg_len), count, sums);
    PAQ_CUDA_CHECK_LAUNCH();
}

}  // namespace paq::gpu
