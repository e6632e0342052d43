// The whole CPU chain against SPEC 5: round trip, AWGN against theory, multipath ordering.
#include "chain_fixture.hpp"

#include "dsp/ber.hpp"

#include <gtest/gtest.h>

using namespace paq;
using namespace paq::dsp;

namespace {

struct round_trip_case {
    const char* preset;
    double cfo_hz;
    double timing;
    std::uint64_t seed;
};

class round_trip : public ::testing::TestWithParam<round_trip_case> {};

}  // namespace

TEST_P(round_trip, noiseless_zero_errors_on_every_path)
{
    const auto c = GetParam();
    sim_config sc;
    sc.preset = c.preset;
    sc.cfo_hz = c.cfo_hz;
    sc.timing_offset_samples = c.timing;
    sc.phase_rad = 1.234;
    sc.seed = c.seed;
    const auto sim = test::simulate(sc, 30);
    const auto s = test::run_chain(sim.samples, test::small_batches());
    EXPECT_GE(s.packets_found, sim.complete_packets);
    EXPECT_LE(s.packets_found, sim.possible_packets);
    EXPECT_EQ(s.packets_skipped, 0u);
    for (const auto& p : s.paths) {
        if (std::string(c.preset) != "awgn" && p.name == "none") continue;  // multipath needs an equalizer
        EXPECT_TRUE(p.locked) << p.name;
        EXPECT_EQ(p.bit_errors, 0u) << p.name;
        EXPECT_GT(p.bits_checked, (sim.complete_packets - 1) * waveform::data_bits) << p.name;
    }
    EXPECT_NEAR(s.mean_cfo_hz, c.cfo_hz, 50.0);
}

INSTANTIATE_TEST_SUITE_P(cases, round_trip,
                         ::testing::Values(round_trip_case{"awgn", 0.0, 0.0, 101},
                                           round_trip_case{"awgn", 206'250.0, 0.5, 102},   // 2% of the bit rate
                                           round_trip_case{"awgn", -300'000.0, 0.25, 103}, // 2.9%
                                           round_trip_case{"two-ray", 0.0, 0.7, 104},
                                           round_trip_case{"edwards3", 100'000.0, 0.3, 105}),
                         [](const auto& tp) {
                             std::string n = std::string(tp.param.preset) + "_" + std::to_string(tp.index);
                             for (auto& ch : n) if (ch == '-') ch = '_';
                             return n;
                         });

TEST(awgn, ber_within_two_db_of_oqpsk_theory)
{
    // BER(Eb/N0) must not exceed the theory at Eb/N0 - 2 dB (2 dB implementation loss; the
    // measured loss is in docs/BER-RESULTS.md), with a 1.4x allowance for counting noise;
    // ZF inverts the channel estimate's band edges and gets 3 dB. And no path may beat theory.
    for (const double ebn0 : {5.0, 8.0}) {
        sim_config sc;
        sc.ebn0_db = ebn0;
        sc.cfo_hz = 30'000.0;
        sc.timing_offset_samples = 0.4;
        sc.seed = 200 + static_cast<std::uint64_t>(ebn0);
        const auto sim = test::simulate(sc, 120);
        const auto s = test::run_chain(sim.samples, test::small_batches());
        EXPECT_GE(s.packets_found, sim.complete_packets);
    EXPECT_LE(s.packets_found, sim.possible_packets);
        EXPECT_NEAR(s.mean_ebn0_db, ebn0, 0.5);
        for (const auto& p : s.paths) {
            const double loss_db = p.name == "zf" ? 3.0 : 2.0;
            EXPECT_LE(p.ber, 1.4 * oqpsk_theory_ber(ebn0 - loss_db)) << p.name << " at " << ebn0 << " dB";
            EXPECT_GE(p.ber, 0.5 * oqpsk_theory_ber(ebn0)) << p.name << " at " << ebn0 << " dB";
            EXPECT_GT(p.bits_checked, 100u * waveform::data_bits) << p.name;
        }
    }
}

TEST(multipath, flight_preset_is_tracked)
{
    // The flight channel drifts (specular delay and amplitude, 37 Hz differential Doppler):
    // every packet found, the data-aided paths lock and stay far below the unequalized one.
    sim_config sc;
    sc.preset = "flight";
    sc.ebn0_db = 16.0;
    sc.cfo_hz = -80'000.0;
    sc.seed = 302;
    sc.flight_start_s = 5.5;  // specular ray near 80 ns and 0.80 of the line of sight
    const auto sim = test::simulate(sc, 100);
    const auto s = test::run_chain(sim.samples, test::small_batches());
    EXPECT_GE(s.packets_found, sim.complete_packets);
    EXPECT_LE(s.packets_found, sim.possible_packets);
    EXPECT_NEAR(s.mean_cfo_hz, sc.cfo_hz, 500.0);
    double none = 0.0;
    for (const auto& p : s.paths) if (p.name == "none") none = p.ber;
    for (const auto& p : s.paths) {
        if (p.name == "none" || p.name == "zf") continue;
        EXPECT_TRUE(p.locked) << p.name;
        EXPECT_LT(p.ber, 0.2 * none) << p.name;
        EXPECT_LT(p.ber, 1e-2) << p.name;
    }
}

TEST(multipath, two_ray_equalizers_rank_as_published)
{
    sim_config sc;
    sc.preset = "two-ray";
    sc.ebn0_db = 15.0;
    sc.timing_offset_samples = 0.3;
    sc.seed = 301;
    const auto sim = test::simulate(sc, 100);
    const auto s = test::run_chain(sim.samples, test::small_batches());
    auto ber = [&](const char* name) {
        for (const auto& p : s.paths) if (p.name == name) return p.ber;
        return -1.0;
    };
    EXPECT_GE(s.packets_found, sim.complete_packets);
    EXPECT_LE(s.packets_found, sim.possible_packets);
    EXPECT_LT(ber("mmse"), 0.5 * ber("zf"));
    EXPECT_LT(ber("cma"), 0.5 * ber("zf"));
    EXPECT_LT(ber("mmse"), 1.25 * ber("fde1"));  // MMSE and FDE1 agree
    EXPECT_LT(ber("fde1"), 1.25 * ber("mmse"));
    // SPEC 4 asks FDE2 to be no worse than FDE1. It is not met yet: FDE2 measures 1.2-1.6x
    // FDE1 (docs/SIGNAL-CHAIN.md, open in issue 2's note). This bound only guards against it
    // getting worse while that is worked on.
    EXPECT_LT(ber("fde2"), 1.8 * ber("fde1"));
    for (const char* eq : {"mmse", "cma", "fde1", "fde2"}) EXPECT_LT(ber(eq), 0.2 * ber("none")) << eq;
    EXPECT_GT(ber("none"), 0.01);  // the channel really is hard without an equalizer
}
