// The device resampler against dsp::resample, bit for bit (label gpu; skipped without a
// device): the same fixed-point rule and the same float operations in the same order.
#include "dsp/resampler.hpp"
#include "gpu/device.hpp"
#include "gpu/resampler.hpp"
#include "gpu/resources.cuh"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

using namespace paq;
using namespace paq::dsp;

namespace {

class gpu_resampler : public ::testing::TestWithParam<double> {
protected:
    void SetUp() override
    {
        if (gpu::list_gpu_devices().empty()) GTEST_SKIP() << "no CUDA device: GPU tests skipped";
    }
};

/// Complex Gaussian noise plus a strong tone: values of every magnitude and sign.
std::vector<cf32> test_input(std::size_t n, std::uint64_t seed)
{
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> nd;
    std::vector<cf32> x(n);
    for (std::size_t i = 0; i < n; ++i) {
        const double ph = 0.37 * static_cast<double>(i);
        x[i] = cf32(nd(rng) + 3.0f * static_cast<float>(std::cos(ph)), nd(rng) + 3.0f * static_cast<float>(std::sin(ph)));
    }
    return x;
}

/// Counts outputs whose bits differ (NaN against NaN counts as equal: the payload is not specified).
std::size_t differing(const std::vector<cf32>& a, const std::vector<cf32>& b)
{
    const auto same = [](float u, float v) { return (std::isnan(u) && std::isnan(v)) || std::memcmp(&u, &v, sizeof u) == 0; };
    std::size_t n = 0;
    for (std::size_t i = 0; i < a.size(); ++i) {
        if (!same(a[i].real(), b[i].real()) || !same(a[i].imag(), b[i].imag())) ++n;
    }
    return n;
}

/// dsp::resample and the device's on the same call.
std::size_t compare(const gpu::device_resampler& dr, const resampler_design& d, const std::vector<cf32>& x, std::size_t in_begin,
                    std::size_t in_len, fixed_pos first_pos, fixed_pos step, std::size_t n_out)
{
    std::vector<cf32> cpu(n_out), gpu_out(n_out);
    resample(x.data() + in_begin, in_len, first_pos, step, cpu.data(), n_out, d);
    gpu::device_buffer<cf32> din(in_len), dout(n_out);
    gpu::stream st;
    // On the kernel's stream: a pageable cudaMemcpy may return before its DMA has landed, and
    // the stream does not wait for the legacy default stream (a flaky failure on the H100).
    PAQ_CUDA_CHECK(cudaMemcpyAsync(din.data(), x.data() + in_begin, in_len * sizeof(cf32), cudaMemcpyHostToDevice, st.get()));
    dr.resample_device(din.data(), in_len, first_pos, step, dout.data(), n_out, st.get());
    st.synchronize();
    PAQ_CUDA_CHECK(cudaMemcpy(gpu_out.data(), dout.data(), n_out * sizeof(cf32), cudaMemcpyDeviceToHost));
    return differing(cpu, gpu_out);
}

}  // namespace

TEST_P(gpu_resampler, bits_equal_the_cpu)
{
    const double ratio = GetParam();
    const auto d = design_resampler(ratio);
    const gpu::device_resampler dr(d);
    EXPECT_EQ(dr.taps(), d.taps);
    const fixed_pos step = to_fixed_step(ratio);
    auto x = test_input(300'000, 1101);

    // The whole input from position 0, running past its end (the edge path reads zeros).
    const auto n_all = static_cast<std::size_t>(static_cast<double>(x.size()) / ratio) + 64;
    EXPECT_EQ(compare(dr, d, x, 0, x.size(), 0, step, n_all), 0u) << "whole input, ratio " << ratio;

    // Windows rebased as a batch is: a sub-window starting at input `origin`, outputs from
    // m0 on (first_pos = position_of(m0, step, origin)), with and without a fraction added.
    for (const std::uint64_t origin : {1ull, 4097ull, 123'457ull}) {
        const std::uint64_t m0 = static_cast<std::uint64_t>(static_cast<double>(origin) / ratio) + 3;
        const std::size_t in_len = 150'001;
        for (const fixed_pos extra : {fixed_pos{0}, fixed_pos{0x9E3779B9ull}, fixed_pos{0x00FFFFFFull}}) {
            const fixed_pos first = position_of(m0, step, origin) + extra;
            EXPECT_EQ(compare(dr, d, x, origin, in_len, first, step, 100'000), 0u)
                << "ratio " << ratio << " origin " << origin << " extra " << extra;
        }
    }

    // A first position before the window's start (wrapping uint64: outputs read zeros until
    // the positions come back into the window), as dsp::resample treats it.
    const fixed_pos before = fixed_pos{0} - (fixed_pos{5} << 32) - 0x12345678ull;
    EXPECT_EQ(compare(dr, d, x, 0, 20'000, before, step, 20'000), 0u) << "negative first position, ratio " << ratio;

    // Non-finite inputs propagate to the outputs that read them, on both.
    x[1000] = cf32(std::nanf(""), 0.0f);
    x[2000] = cf32(0.0f, INFINITY);
    EXPECT_EQ(compare(dr, d, x, 0, 10'000, 0, step, 5'000), 0u) << "non-finite inputs, ratio " << ratio;
}

INSTANTIATE_TEST_SUITE_P(ratios, gpu_resampler, ::testing::Values(1.2121, 1.4895, 2.0, 2.9789, 1.0 + 2e-4, 1.0 - 2e-4, 1.0, 3.2),
                         [](const ::testing::TestParamInfo<double>& i) {
                             char buf[32];
                             std::snprintf(buf, sizeof buf, "r%.4f", i.param);
                             std::string s(buf);
                             for (auto& ch : s) {
                                 if (ch == '.') ch = '_';
                             }
                             return s + "_" + std::to_string(i.index);
                         });

TEST(gpu_resampler_design, rejects_a_design_without_a_table)
{
    if (gpu::list_gpu_devices().empty()) GTEST_SKIP() << "no CUDA device: GPU tests skipped";
    resampler_design d;  // no taps, no table
    EXPECT_THROW(gpu::device_resampler{d}, std::invalid_argument);
}
