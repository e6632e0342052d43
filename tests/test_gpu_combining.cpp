// The two-channel joint MMSE solvers on the GPU (gpu/combining.hpp) against the CPU's
// double-precision solve of the same equations, dsp::solve_joint_equalizer, and the
// two-channel ZF (gpu::combined_zf) against dsp::solve_combined_zf (label gpu).
#include "dsp/combining.hpp"
#include "dsp/equalizers.hpp"
#include "gpu/combining.hpp"
#include "gpu/device.hpp"
#include "gpu/equalizers.hpp"
#include "sim/simulator.hpp"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numbers>
#include <random>
#include <span>
#include <string>

using namespace paq;
using namespace paq::dsp;
using paq::sim::add_fractional_delay;

namespace {

class gpu_combining : public ::testing::Test {
protected:
    void SetUp() override
    {
        if (gpu::list_gpu_devices().empty()) GTEST_SKIP() << "no CUDA device: GPU tests skipped";
    }
};

/// Two antennas' views of one transmission: each a line of sight at its own fractional delay
/// and a ground bounce of its own strength, delay and phase, plus estimation noise; the
/// second antenna `level_db` below the first.
std::array<channel_taps, 2> antenna_pair(std::mt19937_64& rng, double level_db)
{
    std::uniform_real_distribution<double> u(0.0, 1.0);
    std::normal_distribution<double> nd;
    std::array<channel_taps, 2> h{};
    for (int c = 0; c < 2; ++c) {
        const double gain = c == 0 ? 1.0 : std::pow(10.0, -level_db / 20.0);
        std::vector<cf64> taps(chain::L_ch, 0.0);
        const double t0 = 2.0 * u(rng);
        add_fractional_delay(taps, chain::N1, t0, std::polar(gain, 2 * std::numbers::pi * u(rng)));
        add_fractional_delay(taps, chain::N1, t0 + 0.3 + 4.0 * u(rng), std::polar(gain * 0.95 * u(rng), 2 * std::numbers::pi * u(rng)));
        for (int i = 0; i < chain::L_ch; ++i) {
            h[static_cast<std::size_t>(c)][static_cast<std::size_t>(i)] = taps[static_cast<std::size_t>(i)] + 0.005 * cf64(nd(rng), nd(rng));
        }
    }
    return h;
}

struct systems {
    std::vector<gpu::channel_pair32> h32;
    std::vector<gpu::load_pair> loads;
    std::vector<std::array<eq_taps, 2>> ref;
    std::vector<double> cond;
};

/// n systems: the second channel 0 .. 20 dB down, noise loads for 4 .. 24 dB; the channels
/// rounded to float as the GPU gets them, the reference solved from the rounded ones.
systems make_systems(std::size_t n, std::uint64_t seed)
{
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> u(0.0, 1.0);
    systems s;
    s.h32.resize(n);
    s.loads.resize(n);
    s.ref.resize(n);
    s.cond.resize(n);
    std::vector<cf64> work;
    for (std::size_t p = 0; p < n; ++p) {
        auto h = antenna_pair(rng, 20.0 * u(rng));
        std::array<double, 2> load{};
        for (int c = 0; c < 2; ++c) {
            for (int i = 0; i < chain::L_ch; ++i) {
                const cf64 v = h[static_cast<std::size_t>(c)][static_cast<std::size_t>(i)];
                const cf32 f(static_cast<float>(v.real()), static_cast<float>(v.imag()));
                s.h32[p][static_cast<std::size_t>(c)][static_cast<std::size_t>(i)] = f;
                h[static_cast<std::size_t>(c)][static_cast<std::size_t>(i)] = cf64(f.real(), f.imag());
            }
            load[static_cast<std::size_t>(c)] = 2.0 * std::pow(10.0, -(4.0 + 20.0 * u(rng)) / 10.0);
        }
        s.loads[p] = load;
        const auto r = solve_joint_equalizer(h, load, s.ref[p], work);
        EXPECT_FALSE(r.regularized) << p;
        s.cond[p] = joint_spectral_condition(h, load);
    }
    return s;
}

double relative_error(const gpu::taps_pair32& c, const std::array<eq_taps, 2>& ref)
{
    double d = 0.0, n = 0.0;
    for (std::size_t ch = 0; ch < 2; ++ch) {
        for (std::size_t i = 0; i < static_cast<std::size_t>(chain::L_eq); ++i) {
            d += std::norm(cf64(c[ch][i].real(), c[ch][i].imag()) - ref[ch][i]);
            n += std::norm(ref[ch][i]);
        }
    }
    return std::sqrt(d / n);
}

/// h rounded to float as the GPU gets it; h left holding the rounded values, so that the
/// reference is solved from what the GPU solves.
gpu::channel32 round_to_float(channel_taps& h)
{
    gpu::channel32 f{};
    for (std::size_t i = 0; i < h.size(); ++i) {
        f[i] = cf32(static_cast<float>(h[i].real()), static_cast<float>(h[i].imag()));
        h[i] = cf64(f[i].real(), f[i].imag());
    }
    return f;
}

/// What bounds the condition of the combined ZF's system: r_g's spectrum is G(f)^2, G(f) =
/// sum_c w_c |H_c(f)|^2 the combined channel, so (max G / min G)^2 over `grid` frequencies.
double combined_condition(const std::array<channel_taps, 2>& h, std::span<const double> sigma2, int grid = 2048)
{
    const auto w = combining_weights(sigma2);
    double lo = INFINITY, hi = 0.0;
    for (int k = 0; k < grid; ++k) {
        double g = 0.0;
        for (std::size_t c = 0; c < 2; ++c) {
            cf64 s = 0.0;
            for (int m = 0; m < chain::L_ch; ++m) {
                s += h[c][static_cast<std::size_t>(m)] * std::polar(1.0, -2.0 * std::numbers::pi * k * m / static_cast<double>(grid));
            }
            g += w[c] * std::norm(s);
        }
        lo = std::min(lo, g);
        hi = std::max(hi, g);
    }
    return (hi / lo) * (hi / lo);
}

/// |c - ref| / |ref| over the 186 taps.
double relative_error(const gpu::eq_taps32& c, const eq_taps& ref)
{
    double d = 0.0, n = 0.0;
    for (std::size_t i = 0; i < static_cast<std::size_t>(chain::L_eq); ++i) {
        d += std::norm(cf64(c[i].real(), c[i].imag()) - ref[i]);
        n += std::norm(ref[i]);
    }
    return std::sqrt(d / n);
}

}  // namespace

TEST_F(gpu_combining, every_solver_matches_the_cpu_joint_solve)
{
    // The solvers in double (block Levinson, band Cholesky) are bounded by the float taps
    // they return; the conjugate residual method by its tolerance (1e-9 of the right side)
    // times the condition; the cuSOLVER baseline works in float.
    constexpr std::size_t np = 1000;
    const auto s = make_systems(np, 7349);
    const double max_cond = *std::max_element(s.cond.begin(), s.cond.end());
    std::printf("%zu systems, condition up to %.2e\n", np, max_cond);
    EXPECT_GT(max_cond, 100.0);  // not only easy systems
    for (const auto name : gpu::joint_solver_names) {
        SCOPED_TRACE(std::string(name));
        auto solver = gpu::make_joint_solver(name, 0, np);
        EXPECT_EQ(std::string(solver->name()), std::string(name));
        std::vector<gpu::taps_pair32> c(np);
        std::vector<std::uint8_t> ok(np, 7);
        solver->solve(s.h32, s.loads, c, ok);
        // The same taps on every run (a race between a system's threads shows up as a change).
        std::vector<gpu::taps_pair32> again(np);
        for (int run = 0; run < 3; ++run) {
            solver->solve(s.h32, s.loads, again, ok);
            for (std::size_t p = 0; p < np; ++p) ASSERT_EQ(again[p], c[p]) << "run " << run << ", system " << p;
        }
        const bool float_solver = name == "cusolver-dn-chol";
        const bool iterative = name == "conjugate-residual";
        std::vector<double> err;
        for (std::size_t p = 0; p < np; ++p) {
            ASSERT_EQ(ok[p], 1) << p;
            err.push_back(relative_error(c[p], s.ref[p]));
        }
        std::sort(err.begin(), err.end());
        const auto steps = solver->last_iterations();
        std::printf("%s: relative error median %.2e, max %.2e; %.3f ms", std::string(name).c_str(), err[np / 2], err.back(),
                    static_cast<double>(solver->last_kernel_ms()));
        if (!steps.empty()) {
            std::printf("; steps up to %d", *std::max_element(steps.begin(), steps.end()));
        }
        std::printf("\n");
        EXPECT_EQ(steps.size(), iterative ? np : std::size_t{0});
        EXPECT_GT(solver->last_kernel_ms(), 0.0f);
        EXPECT_LT(err.back(), float_solver ? 1e-2 : iterative ? 1e-4 : 1e-5);
        EXPECT_LT(err[np / 2], float_solver ? 1e-3 : 1e-6);
    }
}

TEST_F(gpu_combining, the_device_path_gives_the_same_taps)
{
    constexpr std::size_t np = 64;
    const auto s = make_systems(np, 7351);
    for (const auto name : gpu::joint_solver_names) {
        SCOPED_TRACE(std::string(name));
        auto solver = gpu::make_joint_solver(name, 0, np);
        std::vector<gpu::taps_pair32> c(np), c_dev(np);
        std::vector<std::uint8_t> ok(np), ok_dev(np);
        solver->solve(s.h32, s.loads, c, ok);
        void *h = nullptr, *l = nullptr, *t = nullptr, *o = nullptr;
        ASSERT_EQ(cudaMalloc(&h, np * sizeof(gpu::channel_pair32)), cudaSuccess);
        ASSERT_EQ(cudaMalloc(&l, np * sizeof(gpu::load_pair)), cudaSuccess);
        ASSERT_EQ(cudaMalloc(&t, np * sizeof(gpu::taps_pair32)), cudaSuccess);
        ASSERT_EQ(cudaMalloc(&o, np), cudaSuccess);
        ASSERT_EQ(cudaMemcpy(h, s.h32.data(), np * sizeof(gpu::channel_pair32), cudaMemcpyHostToDevice), cudaSuccess);
        ASSERT_EQ(cudaMemcpy(l, s.loads.data(), np * sizeof(gpu::load_pair), cudaMemcpyHostToDevice), cudaSuccess);
        solver->solve_on_device(static_cast<const cf32*>(h), static_cast<const double*>(l), static_cast<cf32*>(t),
                                static_cast<std::uint8_t*>(o), np, nullptr);
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        ASSERT_EQ(cudaMemcpy(c_dev.data(), t, np * sizeof(gpu::taps_pair32), cudaMemcpyDeviceToHost), cudaSuccess);
        ASSERT_EQ(cudaMemcpy(ok_dev.data(), o, np, cudaMemcpyDeviceToHost), cudaSuccess);
        for (void* b : {h, l, t, o}) cudaFree(b);
        EXPECT_EQ(ok_dev, ok);
        for (std::size_t p = 0; p < np; ++p) {
            for (std::size_t ch = 0; ch < 2; ++ch) EXPECT_EQ(c_dev[p][ch], c[p][ch]) << p;
        }
    }
}

TEST_F(gpu_combining, a_system_that_is_not_positive_definite_is_flagged)
{
    // A negative load larger than the channels' energy: the direct solvers find a negative
    // pivot; their taps are zero.
    auto s = make_systems(4, 7353);
    for (auto& l : s.loads) l = {-100.0, -100.0};
    for (const auto name : {"block-levinson", "band-cholesky", "cusolver-dn-chol"}) {
        SCOPED_TRACE(name);
        auto solver = gpu::make_joint_solver(name, 0, 4);
        std::vector<gpu::taps_pair32> c(4);
        std::vector<std::uint8_t> ok(4, 1);
        solver->solve(s.h32, s.loads, c, ok);
        for (std::size_t p = 0; p < 4; ++p) EXPECT_EQ(ok[p], 0) << p;
        if (std::string(name) != "cusolver-dn-chol") {
            for (std::size_t p = 0; p < 4; ++p) EXPECT_EQ(c[p][0][0], cf32(0.0f)) << p;
        }
    }
}

TEST_F(gpu_combining, refuses_more_systems_than_made_for)
{
    auto solver = gpu::make_joint_solver("block-levinson", 0, 2);
    std::vector<gpu::channel_pair32> h(3);
    std::vector<gpu::load_pair> loads(3);
    std::vector<gpu::taps_pair32> c(3);
    std::vector<std::uint8_t> ok(3);
    EXPECT_THROW(solver->solve(h, loads, c, ok), std::invalid_argument);
}

TEST_F(gpu_combining, the_combined_zf_matches_the_cpu_solve)
{
    // Different channels per packet (the second antenna 0 .. 20 dB down), the first channel's
    // noise for 4 .. 24 dB and the second's apart from it: equal, 30 dB more, 30 dB less, or
    // anywhere between (one channel much noisier: it weighs 1e-3, and the combined channel is
    // nearly the other's, its notches unfilled: conditions up to about 1e11). The GPU's
    // recursion in double returns float taps; the CPU solves the same system by band Cholesky
    // in double. The two differ by about the taps' rounding to float (a few 1e-8 of their
    // norm in double arithmetic on this set, whatever the condition); bounded at 1e-4, the
    // one-channel solver's bound.
    constexpr std::size_t np = 1000;
    std::mt19937_64 rng(7357);
    std::uniform_real_distribution<double> u(0.0, 1.0);
    std::vector<gpu::channel32> h1(np), h2(np);
    std::vector<double> s1(np), s2(np), cond(np);
    std::vector<eq_taps> ref(np);
    std::vector<cf64> work;
    for (std::size_t p = 0; p < np; ++p) {
        auto h = antenna_pair(rng, 20.0 * u(rng));
        h1[p] = round_to_float(h[0]);
        h2[p] = round_to_float(h[1]);
        s1[p] = std::pow(10.0, -(4.0 + 20.0 * u(rng)) / 10.0);
        const double apart_db = p % 4 == 0 ? 0.0 : p % 4 == 1 ? 30.0 : p % 4 == 2 ? -30.0 : 60.0 * u(rng) - 30.0;
        s2[p] = s1[p] * std::pow(10.0, apart_db / 10.0);
        const std::array<double, 2> sigma2{s1[p], s2[p]};
        EXPECT_FALSE(solve_combined_zf(h, sigma2, ref[p], work).regularized) << p;
        cond[p] = combined_condition(h, sigma2);
    }
    std::vector<std::uint8_t> ok(np, 7);
    const auto c = gpu::combined_zf(h1, h2, s1, s2, ok, 0);
    ASSERT_EQ(c.size(), np);
    // The same taps on every run (a race between a warp's lanes shows up as a change).
    std::vector<std::uint8_t> ok_again(np, 7);
    const auto again = gpu::combined_zf(h1, h2, s1, s2, ok_again, 0);
    for (std::size_t p = 0; p < np; ++p) ASSERT_EQ(again[p], c[p]) << p;
    EXPECT_EQ(ok_again, ok);
    std::vector<double> err;
    for (std::size_t p = 0; p < np; ++p) {
        ASSERT_EQ(ok[p], 1) << p;
        err.push_back(relative_error(c[p], ref[p]));
        EXPECT_LT(err.back(), 1e-4) << "packet " << p << ", condition " << cond[p];
    }
    std::sort(err.begin(), err.end());
    const double max_cond = *std::max_element(cond.begin(), cond.end());
    std::printf("combined ZF: %zu systems, condition up to %.2e; relative error median %.2e, max %.2e\n", np, max_cond,
                err[np / 2], err.back());
    EXPECT_GT(max_cond, 1e5);      // not only easy systems
    EXPECT_LT(err[np / 2], 1e-6);  // the float taps' rounding
}

TEST_F(gpu_combining, a_channel_of_zeros_leaves_the_zf_of_the_other)
{
    // One channel all zeros (an antenna that receives nothing), its noise no lower than the
    // other's, so that the other keeps the weight 1: the taps are the ZF of the other channel
    // alone (solve_combined_zf over that one channel), whichever of the two is the zero one.
    constexpr std::size_t np = 16;
    std::mt19937_64 rng(7359);
    std::uniform_real_distribution<double> u(0.0, 1.0);
    std::vector<gpu::channel32> h1(np), h2(np);
    std::vector<double> s1(np), s2(np);
    std::vector<eq_taps> ref_one(np), ref_two(np);
    std::vector<cf64> work;
    for (std::size_t p = 0; p < np; ++p) {
        auto h = antenna_pair(rng, 20.0 * u(rng));
        const std::size_t zero = p % 2, other = 1 - zero;
        h[zero].fill(0.0);
        h1[p] = round_to_float(h[0]);
        h2[p] = round_to_float(h[1]);
        const double s_other = std::pow(10.0, -(4.0 + 20.0 * u(rng)) / 10.0);
        const double s_zero = p % 4 < 2 ? s_other : s_other * (1.0 + 1000.0 * u(rng));
        s1[p] = zero == 0 ? s_zero : s_other;
        s2[p] = zero == 0 ? s_other : s_zero;
        EXPECT_FALSE(solve_combined_zf(std::span<const channel_taps>(&h[other], 1), std::span<const double>(&s_other, 1), ref_one[p], work)
                         .regularized)
            << p;
        EXPECT_FALSE(solve_combined_zf(h, std::array{s1[p], s2[p]}, ref_two[p], work).regularized) << p;
    }
    std::vector<std::uint8_t> ok(np, 7);
    const auto c = gpu::combined_zf(h1, h2, s1, s2, ok, 0);
    for (std::size_t p = 0; p < np; ++p) {
        EXPECT_EQ(ok[p], 1) << p;
        EXPECT_LT(relative_error(c[p], ref_one[p]), 1e-4) << p;
        EXPECT_LT(relative_error(c[p], ref_two[p]), 1e-4) << p;
    }
}

TEST_F(gpu_combining, the_combined_zf_weighs_the_channels_as_the_cpu)
{
    // dsp::combining_weights' cases: a noise variance that is not finite or negative weighs
    // nothing, a noiseless channel alone weighs, unequal ones weigh sigma2_min / sigma2_c.
    const std::array<std::array<double, 2>, 7> variances{{{0.01, NAN},
                                                          {INFINITY, 0.01},
                                                          {-1.0, 0.01},
                                                          {0.0, 0.01},
                                                          {0.01, 0.0},
                                                          {0.0, 0.0},
                                                          {0.001, 0.1}}};
    constexpr std::size_t np = variances.size();
    std::mt19937_64 rng(7361);
    std::vector<gpu::channel32> h1(np), h2(np);
    std::vector<double> s1(np), s2(np);
    std::vector<eq_taps> ref(np);
    std::vector<cf64> work;
    for (std::size_t p = 0; p < np; ++p) {
        auto h = antenna_pair(rng, 6.0);
        h1[p] = round_to_float(h[0]);
        h2[p] = round_to_float(h[1]);
        s1[p] = variances[p][0];
        s2[p] = variances[p][1];
        EXPECT_FALSE(solve_combined_zf(h, variances[p], ref[p], work).regularized) << p;
    }
    std::vector<std::uint8_t> ok(np, 7);
    const auto c = gpu::combined_zf(h1, h2, s1, s2, ok, 0);
    for (std::size_t p = 0; p < np; ++p) {
        EXPECT_EQ(ok[p], 1) << p;
        EXPECT_LT(relative_error(c[p], ref[p]), 1e-4) << "variances " << s1[p] << ", " << s2[p];
    }
}

TEST_F(gpu_combining, the_combined_zf_of_no_channel_is_flagged)
{
    // Both channels zero: g = 0, the recursion has no pivot; zero taps and ok 0.
    std::vector<gpu::channel32> h(2);
    const std::vector<double> sigma2(2, 0.01);
    std::vector<std::uint8_t> ok(2, 1);
    const auto c = gpu::combined_zf(h, h, sigma2, sigma2, ok, 0);
    for (std::size_t p = 0; p < 2; ++p) {
        EXPECT_EQ(ok[p], 0) << p;
        for (const cf32 v : c[p]) EXPECT_EQ(v, cf32(0.0f)) << p;
    }
}

TEST_F(gpu_combining, the_combined_zf_refuses_sizes_that_differ)
{
    std::vector<gpu::channel32> h(3), h_short(2);
    const std::vector<double> s(3, 0.01), s_short(2, 0.01);
    std::vector<std::uint8_t> ok(3), ok_short(2);
    EXPECT_THROW((void)gpu::combined_zf(h, h_short, s, s, ok, 0), std::invalid_argument);
    EXPECT_THROW((void)gpu::combined_zf(h, h, s_short, s, ok, 0), std::invalid_argument);
    EXPECT_THROW((void)gpu::combined_zf(h, h, s, s_short, ok, 0), std::invalid_argument);
    EXPECT_THROW((void)gpu::combined_zf(h, h, s, s, ok_short, 0), std::invalid_argument);
    try {
        (void)gpu::combined_zf(h, h, s, s_short, ok, 0);
        FAIL() << "no exception";
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("sigma2_2"), std::string::npos) << e.what();
    }
}

TEST(gpu_combining_names, an_unknown_solver_is_refused_with_the_allowed_names)
{
    try {
        (void)gpu::make_joint_solver("lu", 0, 1);
        FAIL() << "no exception";
    } catch (const std::invalid_argument& e) {
        const std::string what = e.what();
        for (const auto n : gpu::joint_solver_names) EXPECT_NE(what.find(std::string(n)), std::string::npos) << what;
    }
}
