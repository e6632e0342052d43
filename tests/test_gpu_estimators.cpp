// GPU front-end stages against the CPU reference on the same input (label gpu; skipped
// without a device).
#include "chain_fixture.hpp"

#include "dsp/clock_recovery.hpp"
#include "dsp/estimators.hpp"
#include "dsp/preamble_detector.hpp"
#include "dsp/resampler.hpp"
#include "gpu/device.hpp"
#include "gpu/estimators.cuh"
#include "gpu/estimators.hpp"
#include "gpu/product.hpp"
#include "gpu/resources.cuh"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <cstdio>
#include <random>

using namespace paq;
using namespace paq::dsp;
using namespace paq::sim;

namespace {

class gpu_estimators : public ::testing::Test {
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

TEST_F(gpu_estimators, metric_and_packet_locations_match_the_cpu)
{
    const auto sim = test_signal(901);
    const auto& t = get_receiver_tables(16384);
    const std::size_t n_metric = sim.samples.size() - detector_span + 1;
    std::vector<double> cpu(n_metric);
    preamble_metric(sim.samples, cpu, t.preamble_template);
    gpu::estimators fe(0, sim.samples.size(), 64);
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

TEST_F(gpu_estimators, the_product_matches_the_cpu_and_does_not_depend_on_the_columns_beside)
{
    // gpu::product_tn against the product in double, on the estimators' products (the stacked
    // estimators times a part's observation ranges, the fit; the ranges' leading dimension past
    // their length, as in the segments), on the same at parts of 1000 and 3000 packets (the
    // larger and the narrower tiles), and on shapes that are not whole tiles; then columns of
    // a wide product against the same columns made alone (the smallest tile): equal to the bit.
    struct shape {
        int m, n, k, lda, ldb, ldc;
    };
    const auto& t = get_receiver_tables(16384);
    const int M = static_cast<int>(t.M), rows = static_cast<int>(chain::L_ch * (t.supports.size() + 1));
    const std::vector<shape> shapes = {{rows, 779, M, M, 4096, rows},
                                       {M, 779, static_cast<int>(chain::L_ch), static_cast<int>(chain::L_ch), rows, M},
                                       {rows, 1000, M, M, 512, rows},
                                       {static_cast<int>(chain::L_ch), 3000, M, M, M, rows},
                                       {1, 1, 1, 1, 1, 1},
                                       {65, 130, 17, 20, 19, 70},
                                       {3, 200, 333, 333, 400, 3},
                                       {70, 3, 0, 0, 0, 70}};
    std::mt19937 rng(4242);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    gpu::stream st;
    for (const auto& sh : shapes) {
        std::vector<cf32> a(static_cast<std::size_t>(std::max(sh.lda * sh.m, 1))), b(static_cast<std::size_t>(std::max(sh.ldb * sh.n, 1)));
        for (auto& x : a) x = cf32(nd(rng), nd(rng));
        for (auto& x : b) x = cf32(nd(rng), nd(rng));
        gpu::device_buffer<cf32> da(a.size()), db(b.size()), dc(static_cast<std::size_t>(sh.ldc) * sh.n);
        // Everything on the product's stream (a non-blocking one, as the estimators' are).
        PAQ_CUDA_CHECK(cudaMemcpyAsync(da.data(), a.data(), a.size() * sizeof(cf32), cudaMemcpyHostToDevice, st.get()));
        PAQ_CUDA_CHECK(cudaMemcpyAsync(db.data(), b.data(), b.size() * sizeof(cf32), cudaMemcpyHostToDevice, st.get()));
        PAQ_CUDA_CHECK(cudaMemsetAsync(dc.data(), 0x7f, dc.size() * sizeof(cf32), st.get()));  // what the product must overwrite
        gpu::product_tn(sh.m, sh.n, sh.k, da.data(), sh.lda, db.data(), sh.ldb, dc.data(), sh.ldc, st.get());
        std::vector<cf32> c(dc.size());
        PAQ_CUDA_CHECK(cudaMemcpyAsync(c.data(), dc.data(), c.size() * sizeof(cf32), cudaMemcpyDeviceToHost, st.get()));
        PAQ_CUDA_CHECK(cudaStreamSynchronize(st.get()));
        double worst = 0.0;
        // The wide products against the CPU on every fifth column (every tile, every row).
        const int col_step = static_cast<long long>(sh.m) * sh.n * sh.k > 50'000'000 ? 5 : 1;
        for (int j = 0; j < sh.n; j += col_step) {
            for (int i = 0; i < sh.m; ++i) {
                cf64 want{};
                double scale = 0.0;  // sum |a| |b|: what float rounding is relative to
                for (int l = 0; l < sh.k; ++l) {
                    const cf64 x(a[static_cast<std::size_t>(i) * sh.lda + l]), y(b[static_cast<std::size_t>(j) * sh.ldb + l]);
                    want += x * y;
                    scale += std::abs(x) * std::abs(y);
                }
                const cf64 got(c[static_cast<std::size_t>(j) * sh.ldc + i]);
                const double err = std::abs(got - want) / std::max(scale, 1e-30);
                worst = std::max(worst, sh.k == 0 ? std::abs(got) : err);
            }
        }
        std::printf("product %d x %d, depth %d: max |gpu - cpu| / sum |a||b| = %.2e\n", sh.m, sh.n, sh.k, worst);
        // Each component a chain of 2k float roundings, each at most 2^-24 of its running sum
        // (bounded by sum |a||b|).
        EXPECT_LE(worst, sh.k == 0 ? 0.0 : 3.0 * sh.k * 6e-8) << sh.m << " x " << sh.n << " x " << sh.k;
        if (sh.n < 2) continue;
        // Column j alone: the same values to the bit.
        for (const int j : {0, sh.n / 2, sh.n - 1}) {
            gpu::device_buffer<cf32> one(static_cast<std::size_t>(sh.ldc));
            gpu::product_tn(sh.m, 1, sh.k, da.data(), sh.lda, db.data() + static_cast<std::size_t>(j) * sh.ldb, sh.ldb, one.data(), sh.ldc, st.get());
            std::vector<cf32> alone(one.size());
            PAQ_CUDA_CHECK(cudaMemcpyAsync(alone.data(), one.data(), alone.size() * sizeof(cf32), cudaMemcpyDeviceToHost, st.get()));
            PAQ_CUDA_CHECK(cudaStreamSynchronize(st.get()));
            EXPECT_EQ(0, std::memcmp(alone.data(), c.data() + static_cast<std::size_t>(j) * sh.ldc, static_cast<std::size_t>(sh.m) * sizeof(cf32)))
                << "column " << j << " of " << sh.m << " x " << sh.n;
        }
    }
    EXPECT_THROW(gpu::product_tn(4, 4, 8, nullptr, 7, nullptr, 8, nullptr, 4, st.get()), std::invalid_argument);  // lda < k
    EXPECT_THROW(gpu::product_tn(65535 * 16 + 1, 1, 1, nullptr, 1, nullptr, 1, nullptr, 65535 * 16 + 1, st.get()),
                 std::invalid_argument);  // more rows than the grid holds
}

TEST_F(gpu_estimators, estimates_match_the_cpu)
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

    gpu::estimators fe(0, sim.samples.size(), 64);
    const auto est = fe.estimate(sim.samples, found.starts);
    double worst_cfo = 0.0, worst_h = 0.0, worst_s2 = 0.0;
    std::uint64_t nonfinite_gpu = 0, nonfinite_cpu = 0;
    std::size_t support_differs = 0;
    for (std::size_t p = 0; p < found.starts.size(); ++p) {
        // The CPU's estimators on the same segment (packet_margin samples each side, zeros
        // beyond the window): the estimate from the known bits, the derotation, the channel
        // (the CPU backend then corrects the carrier from the decisions, which
        // gpu::estimators leaves to the backend).
        const long long pre = static_cast<long long>(packet_margin);
        std::vector<cf64> seg(waveform::L_pkt + 2 * packet_margin);
        for (long long i = 0; i < static_cast<long long>(seg.size()); ++i) {
            const long long at = found.starts[p] - pre + i;
            if (at < 0 || at >= static_cast<long long>(sim.samples.size())) continue;
            const cf32 x = sim.samples[static_cast<std::size_t>(at)];
            if (!std::isfinite(x.real()) || !std::isfinite(x.imag())) {
                ++nonfinite_cpu;
                continue;
            }
            seg[static_cast<std::size_t>(i)] = cf64(x.real(), x.imag());
        }
        cf64* const r = seg.data() + pre;
        double w0 = estimate_cfo(r);
        w0 += refine_cfo(r, w0, t);
        derotate(r, static_cast<int>(-pre), static_cast<int>(static_cast<long long>(seg.size()) - pre), w0);
        const auto ce = estimate_channel(r, t);
        worst_cfo = std::max(worst_cfo, std::abs(est[p].cfo_rad_per_sample - w0));
        worst_s2 = std::max(worst_s2, std::abs(est[p].sigma2 / ce.sigma2 - 1.0));
        nonfinite_gpu += est[p].nonfinite_samples;
        // The support is a discrete choice from float (GPU) or double (CPU) risks: a near tie
        // may go either way, and then the taps differ by the two supports' estimates.
        if (est[p].support != ce.support) {
            ++support_differs;
            continue;
        }
        double d = 0.0, ref = 0.0;
        for (int a = 0; a < chain::L_ch; ++a) {
            const cf64 hg(est[p].h[static_cast<std::size_t>(a)].real(), est[p].h[static_cast<std::size_t>(a)].imag());
            d += std::norm(hg - ce.h[static_cast<std::size_t>(a)]);
            ref += std::norm(ce.h[static_cast<std::size_t>(a)]);
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

namespace {

/// The gathered segments (not yet de-rotated) and non-finite counts of `slots` packets.
struct gathered {
    std::vector<cf32> seg;
    std::vector<unsigned> nonfinite;
};

gathered gather_on_device(gpu::estimators& fe, const std::vector<cf32>& window, const std::vector<long long>& starts,
                          const std::vector<fixed_pos>* steps)
{
    const std::size_t np = starts.size();
    fe.upload_window(window);
    gpu::device_buffer<long long> d_starts(np);
    gpu::device_buffer<fixed_pos> d_steps(np);
    PAQ_CUDA_CHECK(cudaMemcpy(d_starts.data(), starts.data(), np * sizeof(long long), cudaMemcpyHostToDevice));
    if (steps) PAQ_CUDA_CHECK(cudaMemcpy(d_steps.data(), steps->data(), np * sizeof(fixed_pos), cudaMemcpyHostToDevice));
    // cudaMemcpy is on the legacy stream, which the front end's non-blocking stream does not
    // wait for (and from pageable memory it may return before the DMA is done): wait here.
    PAQ_CUDA_CHECK(cudaDeviceSynchronize());
    fe.gather_device(d_starts.data(), nullptr, np, steps ? d_steps.data() : nullptr);
    const auto d = fe.device();
    gathered g;
    g.seg.resize(np * gpu::estimators::segment_stride);
    g.nonfinite.resize(np);
    PAQ_CUDA_CHECK(cudaMemcpyAsync(g.seg.data(), d.segments, g.seg.size() * sizeof(cf32), cudaMemcpyDeviceToHost, d.stream));
    PAQ_CUDA_CHECK(cudaMemcpyAsync(g.nonfinite.data(), d.nonfinite, np * sizeof(unsigned), cudaMemcpyDeviceToHost, d.stream));
    PAQ_CUDA_CHECK(cudaStreamSynchronize(d.stream));
    return g;
}

bool same_bits(cf32 a, cf32 b) { return std::memcmp(&a, &b, sizeof a) == 0; }

}  // namespace

TEST_F(gpu_estimators, clock_corrected_segments_equal_the_cpu_bit_for_bit)
{
    // Packet starts anywhere, near both ends of the window too (positions before the window's
    // start, filter reads past its end), non-finite samples inside some packets' spans, and
    // steps for -200 .. +200 ppm, one of them exactly 2^32 (the plain copy).
    auto window = test_signal(904).samples;
    const auto n = static_cast<long long>(window.size());
    window[300] = cf32(std::nanf(""), 1.0f);
    window[static_cast<std::size_t>(n / 2)] = cf32(INFINITY, 0.0f);
    window[static_cast<std::size_t>(n - 100)] = cf32(0.0f, -INFINITY);
    const std::vector<long long> starts{0, 5, 260, 1000, n / 2 - 7000, n / 2 + 3, n - 13'000, n - 12'900, n - 500, 77'777};
    const std::vector<double> ppm{200.0, -200.0, 37.5, -1.25, 0.0, 150.0, -150.0, 200.0, -80.0, 3.0};
    std::vector<fixed_pos> steps;
    for (const double v : ppm) steps.push_back(clock_step(v));
    ASSERT_EQ(steps[4], fixed_pos{1} << 32);

    const auto d1 = design_resampler(1.0);
    gpu::estimators fe(0, window.size(), starts.size());
    const auto g = gather_on_device(fe, window, starts, &steps);
    std::vector<cf32> scratch, ref(gpu::estimators::segment_stride);
    const std::size_t seg_len = waveform::L_pkt + 2 * packet_margin;
    for (std::size_t p = 0; p < starts.size(); ++p) {
        const auto nf = clock_correct_packet(window.data(), window.size(), starts[p], steps[p], packet_margin, seg_len, ref.data(),
                                             ref.size(), d1, scratch);
        std::size_t differ = 0;
        for (std::size_t i = 0; i < ref.size(); ++i) differ += same_bits(ref[i], g.seg[p * ref.size() + i]) ? 0 : 1;
        EXPECT_EQ(differ, 0u) << "packet " << p << " start " << starts[p] << " ppm " << ppm[p];
        EXPECT_EQ(g.nonfinite[p], nf) << "packet " << p << " start " << starts[p] << " ppm " << ppm[p];
    }
}

TEST_F(gpu_estimators, unit_steps_change_nothing)
{
    // Every step 2^32: the segments, counts and estimates are those without steps, bit for bit.
    const auto sim = test_signal(905);
    const auto& t = get_receiver_tables(16384);
    std::vector<double> metric(sim.samples.size() - detector_span + 1);
    preamble_metric(sim.samples, metric, t.preamble_template);
    sample_batch b;
    b.samples = sim.samples;
    b.owned_end = sim.samples.size();
    b.segment_start = b.segment_end = true;
    auto starts = locate_packets(b, metric, 0.25, t.template_offset).starts;
    ASSERT_GE(starts.size(), 20u);
    starts.push_back(3);  // a segment that starts before the window
    const std::vector<fixed_pos> unit(starts.size(), fixed_pos{1} << 32);
    gpu::estimators fe(0, sim.samples.size(), starts.size());
    const auto plain = gather_on_device(fe, sim.samples, starts, nullptr);
    const auto stepped = gather_on_device(fe, sim.samples, starts, &unit);
    ASSERT_EQ(plain.seg.size(), stepped.seg.size());
    EXPECT_EQ(std::memcmp(plain.seg.data(), stepped.seg.data(), plain.seg.size() * sizeof(cf32)), 0);
    EXPECT_EQ(plain.nonfinite, stepped.nonfinite);
    // And the plain copy is what clock_correct_packet gives at step 2^32 (the CPU's identity).
    const auto d1 = design_resampler(1.0);
    std::vector<cf32> scratch, ref(gpu::estimators::segment_stride);
    const std::size_t seg_len = waveform::L_pkt + 2 * packet_margin;
    std::size_t differ = 0;
    for (std::size_t p = 0; p < starts.size(); ++p) {
        (void)clock_correct_packet(sim.samples.data(), sim.samples.size(), starts[p], fixed_pos{1} << 32, packet_margin, seg_len,
                                   ref.data(), ref.size(), d1, scratch);
        for (std::size_t i = 0; i < ref.size(); ++i) {
            const cf32 a = ref[i], c = plain.seg[p * ref.size() + i];
            // NaN/Inf samples read as zero in both; +0 and -0 may differ in sign only.
            if (!(a == c)) ++differ;
        }
    }
    EXPECT_EQ(differ, 0u);
}

TEST_F(gpu_estimators, resampled_window_equals_the_cpu_resampler)
{
    // The chunked upload + resample: every output equals dsp::resample's, bit for bit, for
    // ratios near 1, 1.2121 and 2.9789 and a window that starts at a fraction.
    const auto sim = test_signal(906);
    for (const double ratio : {1.0 + 2e-4, 1.2121, 2.9789}) {
        const auto d = design_resampler(ratio);
        const fixed_pos step = to_fixed_step(ratio);
        const fixed_pos first_pos = (fixed_pos{37} << 32) + 0x6A09E667ull;
        const std::size_t n_out = static_cast<std::size_t>(static_cast<double>(sim.samples.size()) / ratio) - 10;
        std::vector<cf32> ref(n_out);
        resample(sim.samples.data(), sim.samples.size(), first_pos, step, ref.data(), n_out, d);
        gpu::estimators fe(0, n_out, 4, &d, sim.samples.size());
        fe.upload_resample_and_metric_device(sim.samples, first_pos, step, n_out);
        const auto w = fe.window_to_host();
        ASSERT_EQ(w.size(), n_out);
        // The test signal's NaN and Inf make NaN outputs on both; their payload is not specified.
        const auto same = [](float u, float v) { return (std::isnan(u) && std::isnan(v)) || std::memcmp(&u, &v, sizeof u) == 0; };
        std::size_t differ = 0;
        for (std::size_t i = 0; i < n_out; ++i) differ += same(ref[i].real(), w[i].real()) && same(ref[i].imag(), w[i].imag()) ? 0 : 1;
        EXPECT_EQ(differ, 0u) << "ratio " << ratio;
    }
}

TEST(gpu_estimators_host, exact_metric_formula_equals_the_cpu_metric_bit_for_bit)
{
    // Host side of gpu/estimators.cuh (no device needed): the operation order the kernel uses
    // gives dsp::preamble_metric's doubles exactly, non-finite samples included.
    const auto sim = test_signal(907);
    const auto& t = get_receiver_tables(16384);
    std::vector<double> cpu(sim.samples.size() - detector_span + 1);
    preamble_metric(sim.samples, cpu, t.preamble_template);
    std::array<cuDoubleComplex, 32> tmpl{};
    for (int l = 0; l < 32; ++l) tmpl[l] = make_cuDoubleComplex(t.preamble_template[l].real(), t.preamble_template[l].imag());
    const auto* r = reinterpret_cast<const cuFloatComplex*>(sim.samples.data());
    std::size_t differ = 0;
    for (std::size_t u = 0; u < cpu.size(); u += 7) {
        const double g = gpu::exact::preamble_metric_at(r + u, tmpl.data());
        differ += std::memcmp(&g, &cpu[u], sizeof g) == 0 ? 0 : 1;
    }
    EXPECT_EQ(differ, 0u);
}

TEST_F(gpu_estimators, peak_metrics_equal_the_cpu_metric_bit_for_bit)
{
    const auto sim = test_signal(908);
    const auto& t = get_receiver_tables(16384);
    std::vector<double> metric(sim.samples.size() - detector_span + 1);
    preamble_metric(sim.samples, metric, t.preamble_template);
    sample_batch b;
    b.samples = sim.samples;
    b.owned_end = sim.samples.size();
    b.segment_start = b.segment_end = true;
    auto starts = locate_packets(b, metric, 0.25, t.template_offset).starts;
    ASSERT_GE(starts.size(), 20u);
    starts.push_back(-t.template_offset);  // peak at 0: M(-1) is outside, 0
    const auto np = starts.size();
    gpu::estimators fe(0, sim.samples.size(), np);
    fe.upload_window(sim.samples);
    gpu::device_buffer<long long> d_starts(np);
    PAQ_CUDA_CHECK(cudaMemcpy(d_starts.data(), starts.data(), np * sizeof(long long), cudaMemcpyHostToDevice));
    PAQ_CUDA_CHECK(cudaDeviceSynchronize());
    fe.peak_metrics_device(d_starts.data(), nullptr, np, t.template_offset);
    std::vector<double> got(3 * np);
    PAQ_CUDA_CHECK(cudaMemcpyAsync(got.data(), fe.device_peak_metrics(), got.size() * sizeof(double), cudaMemcpyDeviceToHost, fe.device().stream));
    PAQ_CUDA_CHECK(cudaStreamSynchronize(fe.device().stream));
    std::size_t differ = 0;
    for (std::size_t p = 0; p < np; ++p) {
        for (int j = 0; j < 3; ++j) {
            const long long u = starts[p] + t.template_offset - 1 + j;
            const double want = u >= 0 && u < static_cast<long long>(metric.size()) ? metric[static_cast<std::size_t>(u)] : 0.0;
            differ += std::memcmp(&want, &got[3 * p + static_cast<std::size_t>(j)], sizeof want) == 0 ? 0 : 1;
        }
    }
    EXPECT_EQ(differ, 0u);
}

TEST_F(gpu_estimators, rejects_inputs_larger_than_created_for)
{
    gpu::estimators fe(0, 100'000, 4);
    std::vector<cf32> big(200'000);
    std::vector<float> m(big.size());
    EXPECT_THROW(fe.preamble_metric(big, m), std::invalid_argument);
    std::vector<long long> starts(5, 300);
    std::vector<cf32> small(50'000);
    EXPECT_THROW((void)fe.estimate(small, starts), std::invalid_argument);
}

TEST_F(gpu_estimators, cufft_plan_round_trip)
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
    PAQ_CUDA_CHECK(cudaDeviceSynchronize());  // the pageable copy's DMA, before a non-blocking stream reads it
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
