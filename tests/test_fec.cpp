// Coded data fields (dsp/fec.hpp, receiver.fec): the names and the framing, the transmitter's
// encoding, the symbol-by-symbol detector's LLR scale, the tally of a coded link (a missed
// packet skips its information bits, never misaligns), and the CPU chain decoding every stream
// of simulated coded links (other rates, a CFO, a clock offset, multipath) to error-free
// information bits while the channel bits carry errors.
#include "daemon/records.hpp"
#include "dsp/batcher.hpp"
#include "dsp/cpu_backend.hpp"
#include "dsp/fec.hpp"
#include "dsp/input_stage.hpp"
#include "dsp/ldpc.hpp"
#include "dsp/receiver_config.hpp"
#include "dsp/run_tally.hpp"
#include "sim/simulator.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

using namespace paq;
using namespace paq::dsp;

namespace {

std::vector<std::uint8_t> unpack(const std::uint8_t* packed, std::size_t nbits)
{
    std::vector<std::uint8_t> b(nbits);
    for (std::size_t i = 0; i < nbits; ++i) b[i] = static_cast<std::uint8_t>((packed[i / 8] >> (7 - i % 8)) & 1u);
    return b;
}

std::vector<sample_batch> windows_of(const std::vector<cf32>& x, const receiver_config& rc)
{
    const auto g = make_input_geometry(rc);
    batcher bt(rc.batch_samples, g.guard_before, g.guard_after);
    bt.push(x);
    bt.finish();
    std::vector<sample_batch> out;
    while (auto b = bt.pop()) out.push_back(std::move(*b));
    return out;
}

}  // namespace

TEST(fec, names_are_none_and_the_six_codes_and_three_of_them_are_framed)
{
    ASSERT_EQ(fec_names.size(), 7u);
    EXPECT_EQ(to_string(fec_code::none), "none");
    EXPECT_EQ(parse_fec("ar4ja-4096-2/3"), fec_code::k4096_r2_3);
    EXPECT_EQ(ldpc_code_of(fec_code::k1024_r1_2), ldpc::code::k1024_r1_2);
    EXPECT_FALSE(ldpc_code_of(fec_code::none));
    EXPECT_THROW((void)parse_fec("ldpc"), std::invalid_argument);
    for (const auto c : ldpc::all_codes) {
        EXPECT_EQ(to_string(static_cast<fec_code>(static_cast<int>(c) + 1)), ldpc::to_string(c));
    }

    const auto a = framing_for(ldpc::code::k1024_r1_2);
    ASSERT_TRUE(a);
    EXPECT_EQ(a->codewords, 3);
    EXPECT_EQ(a->info_bits(), 3072);
    const auto b = framing_for(ldpc::code::k1024_r2_3);
    ASSERT_TRUE(b);
    EXPECT_EQ(b->codewords, 4);
    EXPECT_EQ(b->info_bits(), 4096);
    const auto c = framing_for(ldpc::code::k4096_r2_3);
    ASSERT_TRUE(c);
    EXPECT_EQ(c->codewords, 1);
    EXPECT_EQ(c->info_bytes(), 512);
    for (const auto code : {ldpc::code::k1024_r4_5, ldpc::code::k4096_r1_2, ldpc::code::k4096_r4_5}) {
        EXPECT_FALSE(framing_for(code)) << ldpc::to_string(code);
    }

    // The configuration refuses the codes without a framing, by name.
    receiver_config rc;
    rc.fec = fec_code::k4096_r1_2;
    const auto errors = rc.validate();
    ASSERT_EQ(errors.size(), 1u);
    EXPECT_NE(errors[0].find("ar4ja-4096-1/2"), std::string::npos) << errors[0];
    EXPECT_NE(errors[0].find("ar4ja-1024-2/3"), std::string::npos) << errors[0];
    rc.fec = fec_code::k1024_r2_3;
    EXPECT_TRUE(rc.validate().empty());
    rc.fec_iterations = 0;
    EXPECT_EQ(rc.validate().size(), 1u);
}

TEST(fec, a_data_field_holds_whole_codewords_of_consecutive_pattern_bits)
{
    for (const auto code : {ldpc::code::k1024_r1_2, ldpc::code::k1024_r2_3, ldpc::code::k4096_r2_3}) {
        const auto f = *framing_for(code);
        const auto& h = ldpc::parity_check_matrix(code);
        pn_generator tx(pn_pattern::pn23), ref(pn_pattern::pn23);
        std::vector<std::uint8_t> field(waveform::data_bits), info(static_cast<std::size_t>(f.k)), full(static_cast<std::size_t>(h.p.n_full));
        for (int packet = 0; packet < 2; ++packet) {
            encode_data_field(f, tx, field);
            for (int w = 0; w < f.codewords; ++w) {
                ref.fill(info);
                ldpc::encoder::get(code).encode_full(info, full);
                // The transmitted codeword is the full one without its punctured end, and it
                // starts with its information bits (the encoder is systematic).
                for (int i = 0; i < f.n; ++i) {
                    ASSERT_EQ(field[static_cast<std::size_t>(w * f.n + i)], full[static_cast<std::size_t>(i)])
                        << ldpc::to_string(code) << " codeword " << w << " bit " << i;
                }
                EXPECT_TRUE(h.holds(full));
            }
        }
    }
    std::vector<std::uint8_t> short_field(100);
    pn_generator g(pn_pattern::pn15);
    EXPECT_THROW(encode_data_field(*framing_for(ldpc::code::k1024_r1_2), g, short_field), std::invalid_argument);
}

TEST(fec, symbol_by_symbol_llrs_are_a_gaussian_statistics_llr)
{
    // Statistics +-mu + N(0, sigma^2): the LLR of each is 2 mu x / sigma^2, whatever context
    // of its neighbours it falls in (dsp/decision_quality.hpp; the contexts' own tests there).
    std::mt19937_64 rng(77);
    std::normal_distribution<double> noise(0.0, 0.3);
    const double mu = 1.7;
    std::vector<double> stat(200'000);
    for (auto& x : stat) x = ((rng() & 1u) ? mu : -mu) + noise(rng) * mu;
    std::vector<float> llr(stat.size());
    sxs_llrs(stat, llr);
    const double want = 2.0 * mu / (0.3 * mu * 0.3 * mu);
    for (std::size_t i = 0; i < 100; ++i) EXPECT_NEAR(llr[i] / stat[i], want, 0.02 * want);
    // No spread: finite LLRs, as of mu / sigma = 40 (decision_quality::max_llr_snr).
    std::vector<double> flat(64, 0.5);
    std::vector<float> out(64);
    sxs_llrs(flat, out);
    EXPECT_FLOAT_EQ(out[3], static_cast<float>(2.0 * 40.0 * std::sqrt(1.0 + 40.0 * 40.0)));
}

namespace {

/// What a decoder that corrected everything gives: 12 packets one packet spacing apart, their
/// decoded information bits the pattern's next 3072 each, packet 5 missing; every codeword
/// converged in 3 iterations with w channel errors (w its place), but codeword 1 of the MMSE
/// stream of the first packet, which failed.
batch_output decoded_batch(const fec_framing& f)
{
    pn_generator pn(pn_pattern::pn15);
    batch_output out;
    out.reset(0, chain::num_paths);
    std::vector<std::uint8_t> info(static_cast<std::size_t>(f.info_bits()));
    std::vector<std::uint8_t> packed(static_cast<std::size_t>(f.info_bytes()));
    std::vector<std::vector<std::uint8_t>> fields;
    for (int i = 0; i < 12; ++i) {
        pn.fill(info);
        if (i == 5) continue;
        std::fill(packed.begin(), packed.end(), 0);
        for (std::size_t b = 0; b < info.size(); ++b) packed[b / 8] = static_cast<std::uint8_t>(packed[b / 8] | (info[b] << (7 - b % 8)));
        fields.push_back(packed);
        packet_record rec;
        rec.start_sample = static_cast<std::uint64_t>(i) * waveform::L_pkt;
        out.packets.push_back(rec);
    }
    out.bits.assign(out.packets.size() * out.packet_bytes(), 0);
    out.size_fec(out.packets.size(), f);
    for (std::size_t i = 0; i < out.packets.size(); ++i) {
        for (int s = 0; s < out.streams; ++s) {
            std::copy(fields[i].begin(), fields[i].end(), out.packet_decoded(i, s));
            for (int w = 0; w < f.codewords; ++w) out.packet_codewords(i, s)[w] = {3, 1, static_cast<std::uint16_t>(w)};
        }
    }
    out.packet_codewords(0, 2)[1].converged = 0;
    return out;
}

}  // namespace

TEST(fec, a_coded_links_tally_counts_information_bits_and_skips_a_missed_packets)
{
    // The PN counter of information bits skips the missing packet's 3072 bits and stays locked
    // without an error.
    const auto f = *framing_for(ldpc::code::k1024_r1_2);
    run_tally tally(pn_pattern::pn15, 20.625e6, static_cast<double>(waveform::L_pkt), chain::num_paths, f);
    tally.add(decoded_batch(f));
    const auto s = tally.summary();
    EXPECT_EQ(s.packets_skipped, 1u);
    for (const auto& p : s.paths) {
        EXPECT_TRUE(p.locked) << p.name;
        EXPECT_EQ(p.bit_errors, 0u) << p.name;
        EXPECT_EQ(p.fec.codewords, 33u) << p.name;
        EXPECT_EQ(p.fec.iterations, 99u) << p.name;
    }
    EXPECT_EQ(s.paths[2].fec.codewords_failed, 1u);
    EXPECT_EQ(s.paths[2].fec.channel_bits, 32u * 2048u);
    EXPECT_EQ(s.paths[2].fec.channel_bit_errors, 11u * 3u - 1u);
    EXPECT_EQ(s.paths[0].fec.channel_bit_errors, 11u * 3u);
    EXPECT_DOUBLE_EQ(s.paths[2].fec.fer(), 1.0 / 33.0);

    // A batch without decoding is refused, not counted as undecoded bits.
    batch_output plain;
    plain.reset(1, chain::num_paths);
    plain.packets.resize(1);
    plain.bits.assign(plain.packet_bytes(), 0);
    EXPECT_THROW(tally.add(plain), std::invalid_argument);
}

TEST(fec, the_records_count_the_decoded_bits_and_each_streams_codewords)
{
    const auto f = *framing_for(ldpc::code::k1024_r1_2);
    const auto dir = std::filesystem::temp_directory_path() / ("paq-fec-records-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    {
        config::records_config rc;
        rc.base = dir / "run";
        daemon::records_writer w(rc, pn_pattern::pn15, 20.625e6, 20.625e6, chain::num_paths, f);
        w.add(decoded_batch(f));
        w.close();
        EXPECT_EQ(w.rows(), 11u);
    }
    std::ifstream in(dir / "run-packets.csv");
    std::string header;
    std::getline(in, header);
    std::vector<std::string> names;
    for (std::size_t a = 0, b; a <= header.size(); a = b + 1) {
        b = header.find(',', a);
        if (b == std::string::npos) b = header.size();
        names.push_back(header.substr(a, b - a));
    }
    auto col = [&](const std::string& n) {
        const auto it = std::find(names.begin(), names.end(), n);
        EXPECT_NE(it, names.end()) << n;
        return static_cast<std::size_t>(it - names.begin());
    };
    const auto bits = col("mmse_bits"), errors = col("mmse_errors"), failed = col("mmse_codewords_failed"),
               iterations = col("mmse_iterations"), channel = col("none_channel_errors");
    EXPECT_EQ(names.size(), 19u + 6u * 7u + 1u);
    std::uint64_t sum_bits = 0, sum_errors = 0, sum_failed = 0, sum_iterations = 0, sum_channel = 0;
    for (std::string line; std::getline(in, line);) {
        std::vector<std::string> v;
        for (std::size_t a = 0, b; a <= line.size(); a = b + 1) {
            b = line.find(',', a);
            if (b == std::string::npos) b = line.size();
            v.push_back(line.substr(a, b - a));
        }
        ASSERT_EQ(v.size(), names.size()) << line;
        sum_bits += std::stoull(v[bits]);
        sum_errors += std::stoull(v[errors]);
        sum_failed += std::stoull(v[failed]);
        sum_iterations += std::stoull(v[iterations]);
        sum_channel += std::stoull(v[channel]);
    }
    EXPECT_GT(sum_bits, 8u * 3072u);  // the decoded bits, checked once locked
    EXPECT_EQ(sum_errors, 0u);
    EXPECT_EQ(sum_failed, 1u);
    EXPECT_EQ(sum_iterations, 99u);
    EXPECT_EQ(sum_channel, 33u);
    std::filesystem::remove_all(dir);
}

namespace {

struct coded_run {
    run_summary summary;
    std::size_t codewords_checked = 0;
};

/// A coded link simulated and received by the CPU backend, detector both: every stream
/// decoded. For every converged codeword, the channel errors it reports are checked against the
/// detector's own hard bits and the codeword re-encoded from the decoded information bits.
coded_run run_coded(const sim::sim_config& sc, std::size_t samples, const receiver_config& base)
{
    sim::simulator s(sc);
    std::vector<cf32> x;
    s.generate(samples, x);
    receiver_config rc = base;
    rc.fec = sc.fec;
    rc.detector = detector_kind::both;
    rc.input_sample_rate_hz = sc.sample_rate_hz;
    rc.batch_samples = samples / 2;
    const auto f = *framing_for(sc.fec);
    const auto g = make_input_geometry(rc);
    cpu_backend backend(rc);
    run_tally tally(sc.pattern, g.chain_rate_hz(), g.packet_spacing_samples(), rc.streams(), f);
    const auto& enc = ldpc::encoder::get(f.code);
    std::vector<std::uint8_t> word(static_cast<std::size_t>(f.n));
    coded_run r;
    for (const auto& w : windows_of(x, rc)) {
        batch_output out;
        backend.process(w, out);
        EXPECT_TRUE(out.has_fec());
        for (std::size_t i = 0; i < out.packets.size(); ++i) {
            for (int st = 0; st < out.streams; ++st) {
                const auto info = unpack(out.packet_decoded(i, st), static_cast<std::size_t>(f.info_bits()));
                const auto hard = unpack(out.packet_bits(i, st), waveform::data_bits);
                for (int c = 0; c < f.codewords; ++c) {
                    const auto& cw = out.packet_codewords(i, st)[c];
                    if (!cw.converged) continue;
                    enc.encode(std::span(info).subspan(static_cast<std::size_t>(c * f.k), static_cast<std::size_t>(f.k)), word);
                    unsigned diff = 0;
                    for (int b = 0; b < f.n; ++b) diff += word[static_cast<std::size_t>(b)] != hard[static_cast<std::size_t>(c * f.n + b)];
                    EXPECT_EQ(diff, cw.channel_errors) << "stream " << st << " packet " << i << " codeword " << c;
                    ++r.codewords_checked;
                }
            }
        }
        tally.add(out);
    }
    r.summary = tally.summary();
    return r;
}

}  // namespace

TEST(fec, the_cpu_chain_decodes_every_stream_of_a_resampled_coded_link_with_offsets)
{
    // 25 MS/s (resampled), CFO, a 40 ppm clock, IQ imbalance and DC, AWGN at 4.5 dB per
    // channel bit (7.5 dB per information bit at rate 1/2): the channel bits carry errors, the
    // decoded bits none.
    sim::sim_config sc;
    sc.preset = "awgn";
    sc.ebn0_db = 4.5;
    sc.sample_rate_hz = 25e6;
    sc.cfo_hz = 31e3;
    sc.clock_ppm = 40.0;
    sc.iq_gain_db = 1.0;
    sc.iq_phase_deg = 5.0;
    sc.dc_offset_dbc = -20.0;
    sc.pattern = pn_pattern::pn23;
    sc.seed = 6007;
    sc.fec = fec_code::k1024_r1_2;
    const auto r = run_coded(sc, 1'400'000, receiver_config{});
    const auto& s = r.summary;
    ASSERT_GT(s.packets_found, 80u);
    EXPECT_GT(r.codewords_checked, 12u * 3u * s.packets_found / 2u);
    for (const auto& p : s.paths) {
        SCOPED_TRACE(p.name);
        EXPECT_TRUE(p.locked);
        EXPECT_EQ(p.bit_errors, 0u);
        EXPECT_GE(p.bits_checked, (s.packets_found - 2) * 3072u);
        EXPECT_EQ(p.fec.codewords, 3u * p.packets);
        EXPECT_EQ(p.fec.codewords_failed, 0u);
        EXPECT_GT(p.fec.channel_ber(), 1e-3);  // errors there were, and were corrected
        EXPECT_LT(p.fec.channel_ber(), 0.1);
    }
}

TEST(fec, the_cpu_chain_decodes_a_rate_two_thirds_code_over_multipath)
{
    // Two-ray multipath at 8 dB per channel bit, 2 samples per bit, one k = 4096 rate-2/3
    // codeword per data field. The MMSE, CMA and FDE1 paths decode every codeword on both
    // detectors; FDE2 nearly every one; the channel's spectral null leaves the unequalized path
    // and ZF beyond the code (channel BER above 0.1), as it leaves them beyond a PN lock.
    sim::sim_config sc;
    sc.preset = "two-ray";
    sc.ebn0_db = 8.0;
    sc.cfo_hz = -12e3;
    sc.seed = 6011;
    sc.fec = fec_code::k4096_r2_3;
    const auto r = run_coded(sc, 1'200'000, receiver_config{});
    const auto& s = r.summary;
    ASSERT_GT(s.packets_found, 80u);
    for (const auto& p : s.paths) {
        SCOPED_TRACE(p.name);
        EXPECT_EQ(p.fec.codewords, p.packets);
        if (p.name.starts_with("none") || p.name.starts_with("zf")) continue;
        EXPECT_TRUE(p.locked);
        EXPECT_LE(p.fec.codewords_failed, p.name.starts_with("fde2") ? 2u : 0u);
        EXPECT_LE(p.bit_errors, p.fec.codewords_failed * 4096u);
        EXPECT_GT(p.fec.channel_bit_errors, 0u);
    }
    // The trellis's soft decisions come from fewer channel errors than the symbol-by-symbol
    // detector's on the same path.
    const auto mmse = static_cast<std::size_t>(eq_path::mmse);
    EXPECT_LT(s.paths[mmse + chain::num_paths].fec.channel_ber(), 0.5 * s.paths[mmse].fec.channel_ber());
}
