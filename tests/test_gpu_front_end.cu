// GPU front-end stages against the CPU reference on the same input (label gpu; skipped
// without a device).
#include "chain_fixture.hpp"

#include "dsp/preamble_detector.hpp"
#include "gpu/device.hpp"
#include "gpu/front_end.hpp"
#include "gpu/resources.cuh"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>

using namespace paq;
using namespace paq::dsp;

namespace {

class gpu_front_end : public ::testing::Test {
protected:
    void SetUp() override
    {
        if (gpu::list_gpu_devices().empty()) GTEST_SKIP() << "no CUDA device: GPU tests skipped";
    }
};

test::sim_run test_signal(std::uint64_t seed)
{
    sim_config sc;
    sc.preset = "edwards3";
    sc.ebn0_db = 12.0;
    sc.cfo_hz = 150'000.0;
    sc.timing_offset_samples = 0.3;
    sc.seed = seed;
    auto sim = test::simulate(sc, 24);
    // A few non-finite samples, as from a bad front end.
    sim.samples[sim.samples.size() / 3] = cf32(std::nanf(""), 0.0f);
    sim.samples[sim.samples.size() / 2] = cf32(0.0f, INFINITY);
    return sim;
}

}  // namespace

TEST_F(gpu_front_end, metric_and_packet_locations_match_the_cpu)
{
    const auto sim = test_signal(901);
    const auto& t = get_receiver_tables(16384);
    const std::size_t n_metric = sim.samples.size() - detector_span + 1;
    std::vector<double> cpu(n_metric);
    preamble_metric(sim.samples, cpu, t.preamble_template);
    gpu::front_end fe(0, sim.samples.size(), 64);
    std::vector<float> gpu_m(n_metric);
    fe.preamble_metric(sim.samples, gpu_m);
    double worst = 0.0;
    for (std::size_t u = 0; u < n_metric; ++u) worst = std::max(worst, std::abs(gpu_m[u] - cpu[u]));
    std::printf("metric: max |gpu - cpu| = %.3e over %zu values\n", worst, n_metric);
    EXPECT_LT(worst, 1e-5);  // the metric lies in [0, 1]; float sums of 256 terms

    sample_batch b;
    b.samples = sim.samples;
    b.owned_begin = 0;
    b.owned_end = sim.samples.size();
    b.segment_start = b.segment_end = true;
    const std::vector<double> gpu_d(gpu_m.begin(), gpu_m.end());
    const auto a = locate_packets(b, cpu, 0.25, t.template_offset);
    const auto g = locate_packets(b, gpu_d, 0.25, t.template_offset);
    EXPECT_EQ(a.starts, g.starts);
    EXPECT_EQ(a.truncated, g.truncated);
}

TEST_F(gpu_front_end, estimates_match_the_cpu)
{
    const auto sim = test_signal(902);
    const auto& t = get_receiver_tables(16384);
    std::vector<double> metric(sim.samples.size() - detector_span + 1);
    preamble_metric(sim.samples, metric, t.preamble_template);
    sample_batch b;
    b.samples = sim.samples;
    b.owned_end = sim.samples.size();
    b.segment_start = b.segment_end = true;
    const auto found = locate_packets(b, metric, 0.25, t.template_offset);
    ASSERT_GE(found.starts.size(), 20u);

    gpu::front_end fe(0, sim.samples.size(), 64);
    const auto est = fe.estimate(sim.samples, found.starts);
    cpu_backend cpu(receiver_config{});
    std::vector<std::uint8_t> bits(chain::num_paths * packed_data_bytes);
    double worst_cfo = 0.0, worst_h = 0.0, worst_s2 = 0.0;
    std::uint64_t nonfinite_gpu = 0, nonfinite_cpu = 0;
    std::size_t support_differs = 0;
    for (std::size_t p = 0; p < found.starts.size(); ++p) {
        packet_record rec;
        cpu.process_packet(sim.samples.data(), sim.samples.size(), found.starts[p], rec, bits.data());
        worst_cfo = std::max(worst_cfo, std::abs(est[p].cfo_rad_per_sample - rec.cfo_rad_per_sample));
        worst_s2 = std::max(worst_s2, std::abs(est[p].sigma2 / rec.sigma2 - 1.0));
        nonfinite_gpu += est[p].nonfinite_samples;
        nonfinite_cpu += rec.nonfinite_samples;
        // The support is a discrete choice from float (GPU) or double (CPU) risks: a near tie
        // may go either way, and then the taps differ by the two supports' estimates.
        if (est[p].support != rec.channel_support) {
            ++support_differs;
            continue;
        }
        double d = 0.0, ref = 0.0;
        for (int a = 0; a < chain::L_ch; ++a) {
            const cf64 hg(est[p].h[static_cast<std::size_t>(a)].real(), est[p].h[static_cast<std::size_t>(a)].imag());
            d += std::norm(hg - rec.h[static_cast<std::size_t>(a)]);
            ref += std::norm(rec.h[static_cast<std::size_t>(a)]);
        }
        worst_h = std::max(worst_h, std::sqrt(d / ref));
    }
    std::printf("estimates over %zu packets: max |dw0| %.2e rad/sample, max rel. h error %.2e, max rel. sigma2 error %.2e, "
                "support differs on %zu\n",
                found.starts.size(), worst_cfo, worst_h, worst_s2, support_differs);
    EXPECT_LE(support_differs, found.starts.size() / 20);
    EXPECT_LT(worst_cfo, 1e-6);
    EXPECT_LT(worst_h, 1e-4);
    EXPECT_LT(worst_s2, 1e-3);
    EXPECT_EQ(nonfinite_gpu, nonfinite_cpu);
}

TEST_F(gpu_front_end, rejects_inputs_larger_than_created_for)
{
    gpu::front_end fe(0, 100'000, 4);
    std::vector<cf32> big(200'000);
    std::vector<float> m(big.size());
    EXPECT_THROW(fe.preamble_metric(big, m), std::invalid_argument);
    std::vector<long long> starts(5, 300);
    std::vector<cf32> small(50'000);
    EXPECT_THROW((void)fe.estimate(small, starts), std::invalid_argument);
}

TEST_F(gpu_front_end, cufft_plan_round_trip)
{
    constexpr int n = 16384, batch = 8;
    gpu::stream st;
    gpu::cufft_plan plan(n, batch, st.get());
    std::mt19937_64 rng(903);
    std::normal_distribution<float> nd;
    std::vector<cufftComplex> x(static_cast<std::size_t>(n) * batch), y(x.size());
    for (auto& v : x) v = make_cuFloatComplex(nd(rng), nd(rng));
    gpu::device_buffer<cufftComplex> d(x.size());
    PAQ_CUDA_CHECK(cudaMemcpy(d.data(), x.data(), x.size() * sizeof(cufftComplex), cudaMemcpyHostToDevice));
    plan.forward(d.data(), d.data());
    plan.inverse(d.data(), d.data());
    // The stream is non-blocking: it does not order itself after or before the legacy
    // default stream that cudaMemcpy uses.
    st.synchronize();
    PAQ_CUDA_CHECK(cudaMemcpy(y.data(), d.data(), y.size() * sizeof(cufftComplex), cudaMemcpyDeviceToHost));
    double err = 0.0, ref = 0.0;
    for (std::size_t i = 0; i < x.size(); ++i) {
        const double er = y[i].x / n - x[i].x, ei = y[i].y / n - x[i].y;
        err += er * er + ei * ei;
        ref += static_cast<double>(x[i].x) * x[i].x + static_cast<double>(x[i].y) * x[i].y;
    }
    EXPECT_LT(std::sqrt(err / ref), 1e-5);  // srsRAN-style normalized error
}
