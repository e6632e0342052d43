// Input levels: every path's bits independent of the input level. The
// simulator's gain (after the noise, as a front end's AGC applies it) leaves the signal-to-
// noise ratio alone, so each run is the nominal run scaled: every path must keep its nominal
// BER (bound 1.2x, the target) and its lock from -40 dB to +20 dB and across AGC steps of
// +-20 dB. Before the CMA step was normalized, CMA did nothing at -20 dB (its errors equal to
// MMSE's) and lost lock at +17 dB.
#include "chain_fixture.hpp"
#include "runtime/receiver_run.hpp"

#include <gtest/gtest.h>

#include <string>

using namespace paq;
using namespace paq::dsp;
using namespace paq::sim;

namespace {

run_summary receive(const sim_config& sc, double seconds)
{
    simulator sim(sc);
    std::vector<cf32> x;
    sim.generate(static_cast<std::size_t>(seconds * sc.sample_rate_hz), x);
    receiver_config rc;
    rc.batch_samples = 1'000'000;
    cpu_backend be(rc);
    return runtime::run_receiver(be, rc, pn_pattern::pn15, sc.sample_rate_hz, x);
}

sim_config channel(const char* preset, double ebn0_db, std::uint64_t seed)
{
    sim_config sc;
    sc.preset = preset;
    sc.ebn0_db = ebn0_db;
    sc.cfo_hz = -35e3;
    sc.seed = seed;
    return sc;
}

void expect_within(const run_summary& got, const run_summary& ref, double bound, const std::string& what)
{
    EXPECT_EQ(got.packets_found, ref.packets_found) << what;
    test::expect_every_path_within(got, ref, bound, what);
    // Nothing lost to a resync: a broken packet shows as bits not checked, not as errors.
    for (int p = 0; p < chain::num_paths; ++p) {
        EXPECT_GE(got.paths[static_cast<std::size_t>(p)].bits_checked, ref.paths[static_cast<std::size_t>(p)].bits_checked)
            << what << " " << got.paths[static_cast<std::size_t>(p)].name;
    }
    // CMA does its own work at every level: not MMSE's errors exactly.
    EXPECT_NE(got.paths[static_cast<std::size_t>(eq_path::cma)].bit_errors,
              got.paths[static_cast<std::size_t>(eq_path::mmse)].bit_errors)
        << what;
}

}  // namespace

TEST(field_levels, every_path_keeps_its_ber_from_minus_40_to_plus_20_db)
{
    const double seconds = 0.2;
    const auto sc = channel("awgn", 8.0, 1201);
    const auto ref = receive(sc, seconds);
    for (const double gain_db : {-40.0, -20.0, 14.0, 20.0}) {
        auto s = sc;
        s.gain_db = gain_db;
        expect_within(receive(s, seconds), ref, 1.2, std::to_string(gain_db) + " dB");
    }
}

TEST(field_levels, multipath_at_minus_30_and_plus_17_db)
{
    const double seconds = 0.2;
    const auto sc = channel("edwards3", 12.0, 1202);
    const auto ref = receive(sc, seconds);
    for (const double gain_db : {-30.0, 17.0}) {
        auto s = sc;
        s.gain_db = gain_db;
        expect_within(receive(s, seconds), ref, 1.2, "edwards3 " + std::to_string(gain_db) + " dB");
    }
}

TEST(field_levels, agc_steps_of_20_db_mid_recording)
{
    // +20 dB at 0.13 s, back down 20 dB and another -20 dB at 0.29 and 0.41 s: the steps fall
    // inside packets; the packets after each step must decode as at the nominal level.
    const double seconds = 0.5;
    const auto sc = channel("awgn", 8.0, 1203);
    const auto ref = receive(sc, seconds);
    auto s = sc;
    s.agc_steps = {{0.13, 20.0}, {0.29, -20.0}, {0.41, -20.0}};
    expect_within(receive(s, seconds), ref, 1.2, "AGC steps");
}
