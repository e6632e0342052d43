// Field signals II (issue 12), item 3: carrier phase noise. The PLL alone (BnT 0.01, set for
// the thermal noise) against the forward-backward smoother (receiver.phase_smoother, at the
// BnT 0.02 it is meant for) on Wiener phase noise, AWGN 10 dB, 0.3 s. The targets
// (1 kHz within 2x of no phase noise) are not met yet: docs/SIGNAL-CHAIN.md, "Known
// deviations"; this test holds what the smoother gains and what it costs without phase noise.
#include "chain_fixture.hpp"

#include <gtest/gtest.h>

#include <cstdio>

using namespace paq;
using namespace paq::dsp;

namespace {

run_summary receive(double linewidth_hz, bool smoother)
{
    sim_config sc;
    sc.preset = "awgn";
    sc.ebn0_db = 10.0;
    sc.cfo_hz = 15e3;
    sc.seed = 1271;
    sc.phase_noise_linewidth_hz = linewidth_hz;
    simulator sim(sc);
    std::vector<cf32> x;
    sim.generate(static_cast<std::size_t>(0.3 * sc.sample_rate_hz), x);
    receiver_config rc;
    rc.batch_samples = 1'000'000;
    if (smoother) {
        rc.phase_smoother = 1;
        rc.pll_bn_t = 0.02;
    }
    cpu_backend be(rc);
    return run_receiver(be, rc, pn_pattern::pn15, sc.sample_rate_hz, x);
}

}  // namespace

TEST(phase_noise, the_smoother_tracks_a_1_khz_wiener_phase_and_costs_little_without_one)
{
    const auto pll0 = receive(0.0, false), sm0 = receive(0.0, true);
    const auto pll1k = receive(1000.0, false), sm1k = receive(1000.0, true);
    for (int p = 0; p < chain::num_paths; ++p) {
        const auto i = static_cast<std::size_t>(p);
        std::printf("%s: no phase noise PLL %.3e smoother %.3e; 1 kHz PLL %.3e (%llu bits) smoother %.3e (%llu bits)\n",
                    pll0.paths[i].name.c_str(), pll0.paths[i].ber, sm0.paths[i].ber, pll1k.paths[i].ber,
                    static_cast<unsigned long long>(pll1k.paths[i].bits_checked), sm1k.paths[i].ber,
                    static_cast<unsigned long long>(sm1k.paths[i].bits_checked));
        ASSERT_GT(pll0.paths[i].bit_errors, 100u) << pll0.paths[i].name;
        EXPECT_LE(sm0.paths[i].ber, 1.15 * pll0.paths[i].ber) << sm0.paths[i].name;
        EXPECT_TRUE(sm1k.paths[i].locked) << sm1k.paths[i].name;
        EXPECT_LE(sm1k.paths[i].ber, 0.25 * pll1k.paths[i].ber) << sm1k.paths[i].name;
        // The PLL alone loses whole packets to cycle slips (bits not checked); the smoother keeps them.
        EXPECT_GE(sm1k.paths[i].bits_checked, pll1k.paths[i].bits_checked) << sm1k.paths[i].name;
    }
}
