// The GPU LDPC decoder (gpu/ldpc_decoder.hpp) against the CPU's (dsp/ldpc_decoder.hpp) on the
// same frames (label gpu; skipped without a device): BPSK over AWGN at a point where some
// frames fail and at one where none should, on a k = 1024 and the k = 4096 rate-2/3 code.
// Frame 0 of the hard point has a tenth of its bits erased, frame 1 all of them (no iteration,
// every check failed, on both). Where both converge, their
// information bits must be equal (counted and printed); each
// side's failures are reported as failures, never as codewords. Both run the same layered
// schedule in the same binary16 arithmetic (dsp/ldpc_decoder.hpp): every frame takes the same
// iterations and ends with the same decisions and failed checks on both. The frame counts are
// odd, so that a block's second codeword is missing at the end of a launch.
#include "dsp/ldpc.hpp"
#include "dsp/ldpc_decoder.hpp"
#include "gpu/device.hpp"
#include "gpu/ldpc_decoder.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

using namespace paq;
namespace ldpc = paq::dsp::ldpc;

namespace {

struct frames_of {
    std::vector<std::uint8_t> info;  ///< frames x k
    std::vector<float> llr;          ///< frames x n
};

frames_of make_frames(ldpc::code c, std::size_t frames, double ebn0_db, std::uint32_t seed, bool erase)
{
    const auto& enc = ldpc::encoder::get(c);
    const auto p = enc.params();
    const double rate = static_cast<double>(p.rate_num) / p.rate_den;
    const double sigma2 = 1.0 / (2.0 * rate * std::pow(10.0, ebn0_db / 10.0));
    std::mt19937 rng(seed);
    std::normal_distribution<double> noise(0.0, std::sqrt(sigma2));
    frames_of out;
    out.info.resize(frames * static_cast<std::size_t>(p.k));
    out.llr.resize(frames * static_cast<std::size_t>(p.n));
    std::vector<std::uint8_t> tx(static_cast<std::size_t>(p.n));
    for (std::size_t f = 0; f < frames; ++f) {
        std::span<std::uint8_t> u(out.info.data() + f * p.k, static_cast<std::size_t>(p.k));
        for (auto& b : u) b = static_cast<std::uint8_t>(rng() & 1u);
        enc.encode(u, tx);
        for (std::size_t i = 0; i < tx.size(); ++i) {
            out.llr[f * p.n + i] = static_cast<float>(-2.0 * ((tx[i] ? -1.0 : 1.0) + noise(rng)) / sigma2);
        }
    }
    // With `erase`: frame 0 with a tenth of its bits erased and a NaN among them; frame 1 all
    // erasures, a NaN among them.
    if (erase) {
        for (std::size_t i = 0; i < static_cast<std::size_t>(p.n) / 10; ++i) out.llr[i * 7 % p.n] = 0.0f;
        out.llr[5] = std::nanf("");
        std::fill_n(out.llr.begin() + p.n, static_cast<std::size_t>(p.n), 0.0f);
        out.llr[static_cast<std::size_t>(p.n) + 9] = std::nanf("");
    }
    return out;
}

struct outcome {
    int cpu_errors = 0, gpu_errors = 0, both_converged = 0, cpu_wrong_converged = 0, gpu_wrong_converged = 0;
    int same_iterations = 0;  ///< frames that took as many iterations on both
    int same_failed_checks = 0;  ///< frames that ended with as many failed checks on both
    std::size_t differing_bits = 0, compared_bits = 0;
};

outcome compare(ldpc::code c, std::size_t frames, double ebn0_db, std::uint32_t seed, int iterations, bool erase)
{
    const auto fr = make_frames(c, frames, ebn0_db, seed, erase);
    const auto p = ldpc::params(c);
    const ldpc::decoder_config cfg{ldpc::decoder_kind::min_sum, iterations, 0.7f};
    gpu::ldpc_decoder g(c, cfg);
    std::vector<std::uint8_t> gi(fr.info.size());
    std::vector<ldpc::decode_result> gr(frames);
    g.decode(fr.llr, frames, gi, gr);
    ldpc::decoder cpu(c, cfg);
    std::vector<std::uint8_t> ci(static_cast<std::size_t>(p.k));
    outcome o;
    for (std::size_t f = 0; f < frames; ++f) {
        const auto r = cpu.decode(std::span<const float>(fr.llr.data() + f * p.n, static_cast<std::size_t>(p.n)), ci);
        const auto* truth = fr.info.data() + f * p.k;
        const auto* gf = gi.data() + f * p.k;
        const bool cpu_right = std::equal(ci.begin(), ci.end(), truth);
        const bool gpu_right = std::equal(gf, gf + p.k, truth);
        o.cpu_errors += cpu_right ? 0 : 1;
        o.gpu_errors += gpu_right ? 0 : 1;
        o.cpu_wrong_converged += r.converged && !cpu_right ? 1 : 0;
        o.gpu_wrong_converged += gr[f].converged && !gpu_right ? 1 : 0;
        EXPECT_EQ(gr[f].converged, gr[f].failed_checks == 0);
        o.same_iterations += gr[f].iterations == r.iterations ? 1 : 0;
        o.same_failed_checks += gr[f].failed_checks == r.failed_checks ? 1 : 0;
        EXPECT_LE(gr[f].iterations, iterations);
        if (erase && f == 1) {  // erasures only
            EXPECT_FALSE(gr[f].converged);
            EXPECT_EQ(gr[f].iterations, 0);
            EXPECT_EQ(gr[f].failed_checks, static_cast<std::size_t>(p.checks));
            EXPECT_EQ(r.failed_checks, static_cast<std::size_t>(p.checks));
            EXPECT_TRUE(std::all_of(gf, gf + p.k, [](std::uint8_t b) { return b == 0; }));
        } else {
            EXPECT_GE(gr[f].iterations, 1);
        }
        if (r.converged && gr[f].converged) {
            ++o.both_converged;
            for (int i = 0; i < p.k; ++i) o.differing_bits += ci[static_cast<std::size_t>(i)] != gf[i] ? 1u : 0u;
            o.compared_bits += static_cast<std::size_t>(p.k);
        }
    }
    std::printf("%s at %.2f dB, %zu frames, %d iterations at most: frame errors CPU %d, GPU %d; the same iterations on %d, "
                "the same failed checks on %d; both converged on %d, %zu of %zu bits differ\n",
                std::string(ldpc::to_string(c)).c_str(), ebn0_db, frames, iterations, o.cpu_errors, o.gpu_errors, o.same_iterations,
                o.same_failed_checks, o.both_converged, o.differing_bits, o.compared_bits);
    return o;
}

class gpu_ldpc : public ::testing::Test {
protected:
    void SetUp() override
    {
        if (gpu::list_gpu_devices().empty()) GTEST_SKIP() << "no CUDA device: GPU tests skipped";
    }
};

}  // namespace

TEST_F(gpu_ldpc, decodes_as_the_cpu_where_both_converge)
{
    for (const auto& [c, hard, easy] : {std::tuple{ldpc::code::k1024_r1_2, 1.5, 2.75}, std::tuple{ldpc::code::k4096_r2_3, 1.9, 2.6}}) {
        const auto h = compare(c, 401, hard, 71, 100, true);
        EXPECT_GT(h.cpu_errors, 0) << "the hard point is too easy";
        EXPECT_EQ(h.gpu_errors, h.cpu_errors);
        EXPECT_EQ(h.same_iterations, 401);
        EXPECT_EQ(h.same_failed_checks, 401);
        EXPECT_EQ(h.differing_bits, 0u);
        EXPECT_EQ(h.cpu_wrong_converged + h.gpu_wrong_converged, 0);
        const auto e = compare(c, 399, easy, 72, 100, false);
        EXPECT_EQ(e.gpu_errors, 0);
        EXPECT_EQ(e.cpu_errors, 0);
        EXPECT_EQ(e.differing_bits, 0u);
        EXPECT_EQ(e.both_converged, 399);
        EXPECT_EQ(e.same_iterations, 399);
    }
}

TEST_F(gpu_ldpc, every_code_decodes_as_the_cpu)
{
    // Each code's layers (32 to 512 checks: a block of as many threads) at a point where the
    // CPU takes 6 to 8 iterations a frame on the mean and up to 20: the same decisions,
    // iterations and failed checks as the CPU's on every frame.
    for (const auto c : ldpc::all_codes) {
        const auto p = ldpc::params(c);
        const double ebn0_db = p.rate_den == 2 ? 2.2 : p.rate_den == 3 ? 2.8 : 3.6;  // rates 1/2, 2/3, 4/5
        const auto o = compare(c, 61, ebn0_db, 73, 50, false);
        EXPECT_EQ(o.differing_bits, 0u) << ldpc::to_string(c);
        EXPECT_EQ(o.gpu_errors, o.cpu_errors) << ldpc::to_string(c);
        EXPECT_EQ(o.same_iterations, 61) << ldpc::to_string(c);
        EXPECT_EQ(o.same_failed_checks, 61) << ldpc::to_string(c);
        EXPECT_GE(o.both_converged, 50) << ldpc::to_string(c);
        EXPECT_EQ(o.cpu_wrong_converged + o.gpu_wrong_converged, 0) << ldpc::to_string(c);
    }
}

TEST_F(gpu_ldpc, refuses_sum_product_and_wrong_sizes)
{
    EXPECT_THROW(gpu::ldpc_decoder(ldpc::code::k1024_r1_2, {ldpc::decoder_kind::sum_product, 50, 1.0f}), std::invalid_argument);
    EXPECT_THROW(gpu::ldpc_decoder(ldpc::code::k1024_r1_2, {ldpc::decoder_kind::min_sum, 50, 0.7f, ldpc::number_format::binary64}),
                 std::invalid_argument);
    gpu::ldpc_decoder g(ldpc::code::k1024_r1_2, {});
    std::vector<float> l(100);
    std::vector<std::uint8_t> info(1024);
    std::vector<ldpc::decode_result> r(1);
    EXPECT_THROW(g.decode(l, 1, info, r), std::invalid_argument);
}
