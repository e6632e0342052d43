// The two-channel joint MMSE solvers on the GPU (gpu/combining.hpp) against the CPU's
// double-precision solve of the same equations, dsp::solve_joint_equalizer (label gpu).
#include "dsp/combining.hpp"
#include "dsp/equalizers.hpp"
#include "gpu/combining.hpp"
#include "gpu/device.hpp"
#include "sim/simulator.hpp"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numbers>
#include <random>
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
