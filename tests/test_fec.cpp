// Coded data fields (dsp/fec.hpp, receiver.fec): the names and the framing, the transmitter's
// encoding (whole codewords in a data field, or the continuous stream of sync-marked,
// randomized codewords of dsp/fec_stream.hpp), the symbol-by-symbol detector's LLR scale, the tally of a coded link (a missed
// packet skips its information bits, never misaligns), and the CPU chain decoding every stream
// of simulated coded links (other rates, a CFO, a clock offset, multipath) to error-free
// information bits while the channel bits carry errors.
#include "daemon/records.hpp"
#include "daemon/replay.hpp"
#include "dsp/batcher.hpp"
#include "dsp/cpu_backend.hpp"
#include "dsp/decision_quality.hpp"
#include "dsp/fec.hpp"
#include "dsp/fec_stream.hpp"
#include "dsp/input_stage.hpp"
#include "dsp/ldpc.hpp"
#include "dsp/receiver_config.hpp"
#include "dsp/run_tally.hpp"
#include "dsp/sxs_soft.hpp"
#include "io/sample_file.hpp"
#include "sim/simulator.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
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

TEST(fec, names_are_none_and_the_six_codes_three_aligned_three_a_continuous_stream)
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
    for (const auto& f : {a, b, c}) EXPECT_FALSE(f->continuous());
    // The other three are the continuous stream: at most 5, 1 and 2 frames end in a data field.
    const struct {
        ldpc::code c;
        int slots;
    } continuous[] = {{ldpc::code::k1024_r4_5, 5}, {ldpc::code::k4096_r1_2, 1}, {ldpc::code::k4096_r4_5, 2}};
    for (const auto& e : continuous) {
        const auto f = framing_for(e.c);
        ASSERT_TRUE(f) << ldpc::to_string(e.c);
        EXPECT_TRUE(f->continuous());
        EXPECT_EQ(f->codewords, e.slots);
        EXPECT_EQ(f->marker_bits, stream_layout_for(e.c)->marker_bits);
        EXPECT_FALSE(aligned_framing_for(static_cast<fec_code>(static_cast<int>(e.c) + 1)));
    }

    receiver_config rc;
    rc.fec = fec_code::k4096_r1_2;
    EXPECT_TRUE(rc.validate().empty());
    EXPECT_TRUE(rc.fec_continuous());
    rc.fec = fec_code::k1024_r2_3;
    EXPECT_TRUE(rc.validate().empty());
    EXPECT_FALSE(rc.fec_continuous());
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

namespace {

/// Bits (one per byte, a multiple of 4) as hexadecimal digits, the first bit the most significant.
std::string hex_of(std::span<const std::uint8_t> bits)
{
    std::string s;
    for (std::size_t i = 0; i + 4 <= bits.size(); i += 4) {
        const int v = bits[i] << 3 | bits[i + 1] << 2 | bits[i + 2] << 1 | bits[i + 3];
        s += "0123456789ABCDEF"[v];
    }
    return s;
}

/// Checks that `stream` (bits, one per byte) is code `c`'s continuous stream begun at `offset`
/// of its first frame, the codewords' information bits `pn`'s consecutive bits (frame 0's
/// included, sent or not): every frame wholly inside has the marker, and its randomizer taken
/// off, the codeword of the next information bits, which satisfies the code's checks. Returns
/// the frames checked.
int check_stream(ldpc::code c, int offset, const std::vector<std::uint8_t>& stream, pn_generator& pn)
{
    const auto l = *stream_layout_for(c);
    const auto marker = sync_marker_bits(c);
    const auto rnd = randomizer_bits();
    const auto& h = ldpc::parity_check_matrix(c);
    std::vector<std::uint8_t> info(static_cast<std::size_t>(l.k)), full(static_cast<std::size_t>(h.p.n_full));
    int checked = 0;
    for (long long f = 0;; ++f) {
        const long long start = f * l.frame_bits() - offset;
        if (start + l.frame_bits() > static_cast<long long>(stream.size())) break;
        pn.fill(info);
        if (start < 0) continue;  // frame 0, begun before the first data field
        const auto at = static_cast<std::size_t>(start);
        for (std::size_t i = 0; i < marker.size(); ++i) {
            EXPECT_EQ(stream[at + i], marker[i]) << ldpc::to_string(c) << " frame " << f << " marker bit " << i;
        }
        ldpc::encoder::get(c).encode_full(info, full);
        EXPECT_TRUE(h.holds(full));
        for (int i = 0; i < l.n; ++i) {
            const auto b = static_cast<std::size_t>(i);
            const auto sent = static_cast<std::uint8_t>(stream[at + marker.size() + b] ^ rnd[b % rnd.size()]);
            if (sent != full[b]) {
                ADD_FAILURE() << ldpc::to_string(c) << " offset " << offset << " frame " << f << " codeword bit " << i;
                return checked;
            }
        }
        ++checked;
    }
    return checked;
}

}  // namespace

TEST(fec_stream, markers_randomizer_and_layouts_are_the_standards)
{
    // IRIG 106 chapter 2, Appendix 2-D: A = FCB88938D8D76A4F, its complement 034776C7272895B0;
    // k = 1024 codes send A, k = 4096 codes A A Abar A.
    EXPECT_EQ(hex_of(sync_marker_bits(ldpc::code::k1024_r4_5)), "FCB88938D8D76A4F");
    EXPECT_EQ(hex_of(sync_marker_bits(ldpc::code::k4096_r1_2)),
              "FCB88938D8D76A4FFCB88938D8D76A4F034776C7272895B0FCB88938D8D76A4F");
    EXPECT_EQ(hex_of(sync_marker_bits(ldpc::code::k4096_r4_5)), hex_of(sync_marker_bits(ldpc::code::k4096_r1_2)));
    // CCSDS 131.0-B's pseudo-randomizer: its first bytes as the standard prints them, a period of
    // 255 with 128 ones (a maximal-length sequence of degree 8).
    const auto r = randomizer_bits();
    ASSERT_EQ(r.size(), 255u);
    EXPECT_EQ(hex_of(r.first(64)), "FF480EC09A0D70BC");
    EXPECT_EQ(std::count(r.begin(), r.end(), std::uint8_t{1}), 128);

    const struct {
        ldpc::code c;
        int marker, n, k;
    } expect[] = {{ldpc::code::k1024_r4_5, 64, 1280, 1024}, {ldpc::code::k4096_r1_2, 256, 8192, 4096}, {ldpc::code::k4096_r4_5, 256, 5120, 4096}};
    for (const auto& e : expect) {
        const auto l = stream_layout_for(e.c);
        ASSERT_TRUE(l) << ldpc::to_string(e.c);
        EXPECT_EQ(l->marker_bits, e.marker);
        EXPECT_EQ(l->n, e.n);
        EXPECT_EQ(l->k, e.k);
        EXPECT_EQ(l->frame_bits(), e.marker + e.n);
        EXPECT_TRUE(framing_for(e.c)->continuous());
    }
    for (const auto c : {ldpc::code::k1024_r1_2, ldpc::code::k1024_r2_3, ldpc::code::k4096_r2_3}) {
        EXPECT_FALSE(stream_layout_for(c)) << ldpc::to_string(c);
        EXPECT_THROW(stream_encoder(c, 0), std::invalid_argument);
    }
}

TEST(fec_stream, data_fields_carry_marked_randomized_codewords_of_consecutive_pattern_bits)
{
    for (const auto c : {ldpc::code::k1024_r4_5, ldpc::code::k4096_r1_2, ldpc::code::k4096_r4_5}) {
        const int frame = stream_layout_for(c)->frame_bits();
        for (const int offset : {0, 1, 777 % frame, frame - 1}) {
            stream_encoder enc(c, offset);
            pn_generator tx(pn_pattern::pn23), ref(pn_pattern::pn23);
            std::vector<std::uint8_t> field(waveform::data_bits), stream;
            for (int j = 0; j < 6; ++j) {
                enc.next_data_field(tx, field);
                stream.insert(stream.end(), field.begin(), field.end());
            }
            // Six data fields hold 4-27 whole frames; every one of them is checked.
            const int whole = static_cast<int>((stream.size() + static_cast<std::size_t>(offset)) / static_cast<std::size_t>(frame)) -
                              (offset > 0 ? 1 : 0);
            EXPECT_EQ(check_stream(c, offset, stream, ref), whole) << ldpc::to_string(c) << " offset " << offset;
        }
        EXPECT_THROW(stream_encoder(c, -1), std::invalid_argument);
        EXPECT_THROW(stream_encoder(c, frame), std::invalid_argument);
        stream_encoder enc(c, 0);
        pn_generator g(pn_pattern::pn15);
        std::vector<std::uint8_t> short_field(100);
        EXPECT_THROW(enc.next_data_field(g, short_field), std::invalid_argument);
    }
}

TEST(fec_stream, the_simulator_sends_the_continuous_stream_in_its_packets)
{
    // A noiseless ar4ja-4096-1/2 link through the CPU chain, uncoded on the receiver's side: the
    // data fields of consecutive packets, joined, are the code's stream, begun where the seed
    // put it, every frame found there.
    sim::sim_config sc;
    sc.preset = "awgn";
    sc.ebn0_db = std::numeric_limits<double>::infinity();
    sc.cfo_hz = -12e3;
    sc.pattern = pn_pattern::pn15;
    sc.seed = 7331;
    sc.fec = fec_code::k4096_r1_2;
    std::vector<cf32> x;
    sim::simulator(sc).generate(20 * waveform::L_pkt, x);
    receiver_config rc;
    cpu_backend backend(rc);
    std::vector<std::uint8_t> stream;
    std::uint64_t last = 0;
    for (const auto& w : windows_of(x, rc)) {
        batch_output out;
        backend.process(w, out);
        for (std::size_t i = 0; i < out.packets.size(); ++i) {
            if (!stream.empty()) {
                ASSERT_NEAR(static_cast<double>(out.packets[i].start_sample - last), static_cast<double>(waveform::L_pkt), 2.0);
            }
            last = out.packets[i].start_sample;
            const auto bits = unpack(out.packet_bits(i, 0), waveform::data_bits);
            stream.insert(stream.end(), bits.begin(), bits.end());
        }
    }
    ASSERT_GE(stream.size(), 17u * waveform::data_bits);
    // The offset is found as a receiver would: the one place the marker starts every frame.
    const auto l = *stream_layout_for(ldpc::code::k4096_r1_2);
    const auto marker = sync_marker_bits(l.code);
    int found = -1;
    for (int at = 0; at < l.frame_bits(); ++at) {
        if (std::equal(marker.begin(), marker.end(), stream.begin() + at)) {
            ASSERT_EQ(found, -1) << "two marker places";
            found = at;
        }
    }
    ASSERT_GE(found, 0);
    // From there every whole frame has the marker and, its randomizer taken off, a codeword
    // (the code's checks hold on it, its parity completed by the encoder from its systematic
    // bits); their information bits, frame after frame, are the pattern without an error.
    const auto& h = ldpc::parity_check_matrix(l.code);
    const auto rnd = randomizer_bits();
    std::vector<std::uint8_t> word(static_cast<std::size_t>(l.n)), full(static_cast<std::size_t>(h.p.n_full));
    pn_checker checker(pn_pattern::pn15);
    int frames = 0;
    for (std::size_t at = static_cast<std::size_t>(found); at + static_cast<std::size_t>(l.frame_bits()) <= stream.size();
         at += static_cast<std::size_t>(l.frame_bits()), ++frames) {
        ASSERT_TRUE(std::equal(marker.begin(), marker.end(), stream.begin() + static_cast<std::ptrdiff_t>(at))) << "frame " << frames;
        for (std::size_t i = 0; i < word.size(); ++i) word[i] = static_cast<std::uint8_t>(stream[at + marker.size() + i] ^ rnd[i % rnd.size()]);
        ldpc::encoder::get(l.code).encode_full(std::span(word).first(static_cast<std::size_t>(l.k)), full);
        ASSERT_TRUE(std::equal(word.begin(), word.end(), full.begin())) << "frame " << frames << ": not the codeword of its bits";
        ASSERT_TRUE(h.holds(full));
        checker.push(std::span(word).first(static_cast<std::size_t>(l.k)));
    }
    EXPECT_GE(frames, 10);
    const auto counts = checker.get();
    EXPECT_TRUE(counts.locked);
    EXPECT_EQ(counts.bit_errors, 0u);
    EXPECT_GE(counts.bits_checked, static_cast<std::uint64_t>(frames - 1) * static_cast<std::uint64_t>(l.k));
}

namespace {

/// A run of data fields of code `c`'s stream (begun at `offset`) as a receiver has them: two
/// streams' LLRs (+-amplitude, Gaussian noise of unit variance on each), the packets at the
/// places given (the others missed). Returns the LLRs [packet][stream][6144] and, through
/// `info`, every frame's information bits from the encoder's frame 0 on.
std::vector<float> received_fields(ldpc::code c, int offset, std::span<const std::int64_t> places, double amplitude,
                                   std::uint64_t seed, std::vector<std::vector<std::uint8_t>>& info)
{
    const auto l = *stream_layout_for(c);
    stream_encoder enc(c, offset);
    pn_generator tx(pn_pattern::pn23), ref(pn_pattern::pn23);
    std::vector<std::uint8_t> field(waveform::data_bits);
    std::vector<float> llr;
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> noise(0.0, 1.0);
    std::int64_t place = 0;
    for (const auto p : places) {
        for (; place <= p; ++place) {
            enc.next_data_field(tx, field);
            if (place != p) continue;
            for (int s = 0; s < 2; ++s) {
                for (const auto b : field) llr.push_back(static_cast<float>((b ? amplitude : -amplitude) + noise(rng)));
            }
        }
    }
    const std::int64_t frames = (place * static_cast<std::int64_t>(waveform::data_bits) + offset) / l.frame_bits() + 1;
    info.assign(static_cast<std::size_t>(frames), std::vector<std::uint8_t>(static_cast<std::size_t>(l.k)));
    for (auto& f : info) ref.fill(f);
    return llr;
}

}  // namespace

TEST(fec_stream, places_follow_the_packet_starts_and_count_the_missed_ones)
{
    // 20.625 MS/s, +80 ppm: 2 x 6336 samples a packet, 1.01 samples more each; packets 3, 4
    // and 9 missed.
    const double spacing = 2.0 * 6336.0;
    std::vector<std::uint64_t> starts;
    const std::int64_t sent[] = {0, 1, 2, 5, 6, 7, 8, 10, 11};
    for (const auto p : sent) starts.push_back(static_cast<std::uint64_t>(std::llround(1234.0 + static_cast<double>(p) * spacing * (1.0 + 80e-6))));
    const auto places = data_field_places(starts, spacing);
    ASSERT_EQ(places.size(), std::size(sent));
    for (std::size_t j = 0; j < places.size(); ++j) EXPECT_EQ(places[j], sent[j]) << j;
    EXPECT_THROW((void)data_field_places(starts, 0.0), std::invalid_argument);
    std::swap(starts[1], starts[2]);
    EXPECT_THROW((void)data_field_places(starts, spacing), std::invalid_argument);
    EXPECT_TRUE(data_field_places({}, spacing).empty());
}

TEST(fec_stream, the_receiver_finds_the_frames_and_decodes_each_codeword_it_holds)
{
    // Every code at several offsets, 16 data fields with fields 5 and 6 missed: the markers
    // give the offset, each frame its owner (none where its last bit was in a missed field),
    // and every frame wholly received decodes to its information bits; amplitude 2 with unit
    // noise is a channel BER of 2.3 %.
    for (const auto c : {ldpc::code::k1024_r4_5, ldpc::code::k4096_r1_2, ldpc::code::k4096_r4_5}) {
        const auto l = *stream_layout_for(c);
        const stream_deframer d(c);
        ldpc::decoder dec(c);
        for (const int offset : {0, 5, l.frame_bits() - 100}) {
            SCOPED_TRACE(std::string(ldpc::to_string(c)) + " offset " + std::to_string(offset));
            std::vector<std::int64_t> places;
            for (std::int64_t p = 0; p < 16; ++p) {
                if (p != 5 && p != 6) places.push_back(p);
            }
            std::vector<std::vector<std::uint8_t>> info;
            const auto llr = received_fields(c, offset, places, 2.0, 17u + static_cast<std::uint64_t>(offset), info);
            const stream_fields fields{places, llr, 2};
            const auto found = d.find_offset(fields);
            ASSERT_TRUE(found);
            EXPECT_EQ(*found, (l.frame_bits() - offset) % l.frame_bits());
            const auto frames = d.frames(places, *found);
            ASSERT_FALSE(frames.empty());
            std::vector<float> word(static_cast<std::size_t>(l.n));
            std::vector<std::uint8_t> bits(static_cast<std::size_t>(l.k));
            int decoded = 0, lost = 0;
            for (const auto& f : frames) {
                const std::int64_t end = f.start + l.frame_bits() - 1, place = end / 6144;
                EXPECT_EQ(f.owner < 0, place == 5 || place == 6) << "frame at " << f.start;
                if (f.owner >= 0) {
                    EXPECT_EQ(places[static_cast<std::size_t>(f.owner)], place);
                }
                lost += f.owner < 0;
                // Wholly received: no bit in a missed field, none before the first.
                if (f.start < 0 || (f.start < 7 * 6144 && end >= 5 * 6144)) continue;
                const auto index = static_cast<std::size_t>((f.start + offset) / l.frame_bits());
                for (int s = 0; s < 2; ++s) {
                    d.codeword_llrs(fields, s, f, word);
                    const auto r = dec.decode(word, bits);
                    ASSERT_TRUE(r.converged) << "frame " << index << " stream " << s;
                    ASSERT_EQ(bits, info[index]) << "frame " << index << " stream " << s;
                }
                ++decoded;
            }
            EXPECT_GE(decoded, 14 * 6144 / l.frame_bits() - 3);  // the 14 fields received, less the frames cut
            EXPECT_GE(lost, 1);
        }
    }
}

TEST(fec_stream, the_markers_are_found_at_a_channel_ber_of_ten_percent_and_not_in_uncoded_data)
{
    for (const auto c : {ldpc::code::k1024_r4_5, ldpc::code::k4096_r1_2}) {
        const auto l = *stream_layout_for(c);
        const stream_deframer d(c);
        const std::int64_t places[] = {0, 1, 2, 3, 4, 5, 6, 7};
        std::vector<std::vector<std::uint8_t>> info;
        // Amplitude 1.28 with unit noise: each bit wrong with probability 10 %.
        const auto llr = received_fields(c, 4321 % l.frame_bits(), places, 1.28, 99, info);
        const auto found = d.find_offset({places, llr, 2});
        ASSERT_TRUE(found) << ldpc::to_string(c);
        EXPECT_EQ(*found, (l.frame_bits() - 4321 % l.frame_bits()) % l.frame_bits());
        // The uncoded pattern carries no marker.
        pn_generator pn(pn_pattern::pn15);
        std::vector<std::uint8_t> b(8 * 2 * waveform::data_bits);
        pn.fill(b);
        std::vector<float> plain(b.size());
        for (std::size_t i = 0; i < b.size(); ++i) plain[i] = b[i] ? 3.0f : -3.0f;
        EXPECT_FALSE(d.find_offset({places, plain, 2})) << ldpc::to_string(c);
    }
    EXPECT_THROW((void)stream_deframer{ldpc::code::k4096_r2_3}, std::invalid_argument);
}

namespace {

/// `paqd replay --fec ar4ja-4096-1/2` (CPU backend, batches of 0.1 s) of a simulated link at
/// 24 MS/s (resampled) with a CFO and a 30 ppm clock; `hole`: 1.5 ms of samples (two or three
/// packets) zeroed in the middle of the second batch.
daemon::replay_result replay_stream(double ebn0_db, std::uint64_t seed, bool hole)
{
    sim::sim_config sc;
    sc.preset = "awgn";
    sc.ebn0_db = ebn0_db;
    sc.sample_rate_hz = 24e6;
    sc.cfo_hz = 15e3;
    sc.clock_ppm = 30.0;
    sc.pattern = pn_pattern::pn15;
    sc.seed = seed;
    sc.fec = fec_code::k4096_r1_2;
    std::vector<cf32> x;
    sim::simulator(sc).generate(static_cast<std::size_t>(0.3 * sc.sample_rate_hz), x);
    if (hole) {
        const auto at = static_cast<std::ptrdiff_t>(0.15 * sc.sample_rate_hz);
        std::fill(x.begin() + at, x.begin() + at + 36000, cf32{});
    }
    const auto dir = std::filesystem::temp_directory_path() / ("paq_fec_stream_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    {
        auto w = io::sample_file_writer::create_raw(dir / "rec.raw", io::sample_format::cf32_le);
        w.write(x);
        w.close();
    }
    daemon::replay_options opt;
    opt.backend = config::backend_kind::cpu;
    opt.file = dir / "rec.raw";
    opt.raw_format = io::sample_format::cf32_le;
    opt.raw_sample_rate_hz = sc.sample_rate_hz;
    opt.fec = fec_code::k4096_r1_2;
    opt.pattern = pn_pattern::pn15;
    opt.receiver.batch_samples = 2'400'000;
    auto r = daemon::run_replay(opt);
    std::filesystem::remove_all(dir);
    return r;
}

}  // namespace

TEST(fec_stream, replay_decodes_the_continuous_stream_across_batches)
{
    // 5.5 dB per channel bit (8.5 dB per information bit): frames cross every batch edge, and
    // every equalized stream decodes every frame with no bit error; the frames counted are the
    // stream's over the packets found, less the one begun before the recording. The
    // unequalized path, whose soft values are worth less to the decoder on AWGN (BER-RESULTS.md,
    // "Coded links"), may lose one codeword: seed 8117 lost one of ~330 there at 4, 4.5 and
    // 5.5 dB (on no other path), and seed 8119 one at 4.5 dB built
    // with clang.
    const auto r = replay_stream(5.5, 8119, false);
    const auto& s = r.engine.tally;
    ASSERT_GE(s.batches, 3u);
    ASSERT_GT(s.packets_found, 440u);
    EXPECT_EQ(s.packets_skipped, 0u);
    const double frames = static_cast<double>(s.packets_found) * 6144.0 / 8448.0;
    for (const auto& p : s.paths) {
        SCOPED_TRACE(p.name);
        const std::uint64_t may_fail = p.name == "none" ? 1u : 0u;
        EXPECT_TRUE(p.locked);
        EXPECT_LE(p.resyncs, may_fail);
        EXPECT_LE(p.fec.codewords_failed, may_fail);
        EXPECT_LE(p.bit_errors, p.fec.codewords_failed * 4096u);
        EXPECT_GT(static_cast<double>(p.fec.codewords), frames - 2.0);
        EXPECT_LE(static_cast<double>(p.fec.codewords), frames + 1.0);
        EXPECT_GE(p.bits_checked, (p.fec.codewords - 1 - 2 * may_fail) * 4096u);
        EXPECT_GT(p.fec.channel_ber(), 1e-3);  // the channel bits had errors, corrected
    }
}

TEST(fec_stream, replay_skips_the_frames_lost_with_missed_packets_and_stays_aligned)
{
    // Two or three packets missed: the frames that ended in them are not counted, those that
    // lost part of their bits may fail (erasures: a failed codeword's bits are as good as
    // random, which may drop the PN check's lock once), and the PN check of the decoded bits
    // skips the lost frames' bits: locked on the frames after them, no other error.
    const auto r = replay_stream(4.5, 8118, true);
    const auto& s = r.engine.tally;
    ASSERT_GE(s.packets_skipped, 2u);
    const double frames = static_cast<double>(s.packets_found) * 6144.0 / 8448.0;
    for (const auto& p : s.paths) {
        SCOPED_TRACE(p.name);
        EXPECT_TRUE(p.locked);
        EXPECT_LE(p.resyncs, p.fec.codewords_failed);
        EXPECT_LE(p.fec.codewords_failed, 4u);
        EXPECT_LE(p.bit_errors, p.fec.codewords_failed * 4096u);
        EXPECT_GT(static_cast<double>(p.fec.codewords), frames - 4.0);
        EXPECT_LE(static_cast<double>(p.fec.codewords), frames + 1.0);
    }
}

TEST(fec, the_normal_equations_from_the_autocorrelations_are_the_products_bit_by_bit)
{
    // dsp::sxs_soft::normal_entry, both backends' way to the symbol-by-symbol model's system:
    // every entry equal to the sum over the parity's bits of term_r term_c, on streams shorter
    // than the model's reach too.
    namespace ss = dsp::sxs_soft;
    constexpr int lags = 2 * ss::reach + 1;
    std::mt19937 rng(2607);
    std::size_t wrong = 0;
    for (const int n : {1, 2, 3, 8, 9, 16, 17, 18, 33, 100, 6144}) {
        std::vector<signed char> d(static_cast<std::size_t>(n));
        for (auto& v : d) v = (rng() & 1u) != 0 ? 1 : -1;
        const std::vector<double> x(d.begin(), d.end());
        long long autocorrelation[ss::parities][lags] = {};
        for (int j = 0; j < n; ++j) {
            for (int lag = 0; lag < lags && j + lag < n; ++lag) autocorrelation[j % ss::parities][lag] += d[static_cast<std::size_t>(j)] * d[static_cast<std::size_t>(j + lag)];
        }
        for (int q = 0; q < ss::parities && q < n; ++q) {
            for (int r = 0; r < ss::terms; ++r) {
                for (int c = 0; c < ss::terms; ++c) {
                    long long products = 0;
                    for (int i = q; i < n; i += ss::parities) {
                        const auto at = static_cast<std::size_t>(i), size = static_cast<std::size_t>(n);
                        products += ss::term_at(x.data(), size, at, r) * ss::term_at(x.data(), size, at, c);
                    }
                    wrong += ss::normal_entry(q, r, c, d.data(), n, &autocorrelation[0][0], lags) != products ? 1u : 0u;
                }
            }
        }
    }
    EXPECT_EQ(wrong, 0u);
}

TEST(fec, symbol_by_symbol_llrs_are_a_gaussian_statistics_llr)
{
    // Statistics +-mu + N(0, sigma^2): the LLR of each is about 2 mu x / sigma^2
    // (dsp/sxs_soft.hpp: the neighbours' fitted weights are noise's sampling spread, a few
    // percent of the LLRs at most); what they state of the error rate is the truth's.
    std::mt19937_64 rng(77);
    std::normal_distribution<double> noise(0.0, 0.3);
    const double mu = 1.7;
    std::vector<double> stat(200'000);
    for (auto& x : stat) x = ((rng() & 1u) ? mu : -mu) + noise(rng) * mu;
    std::vector<float> llr(stat.size());
    sxs_llrs(stat, llr);
    const double want = 2.0 * mu / (0.3 * mu * 0.3 * mu);
    double stated = 0.0;
    for (std::size_t i = 0; i < stat.size(); ++i) {
        if (std::abs(stat[i]) > 0.5 * mu && std::abs(stat[i]) < 1.5 * mu) {  // the bulk
            EXPECT_NEAR(llr[i] / stat[i], want, 0.08 * want) << i;
        }
        stated += 1.0 / (1.0 + std::exp(std::min(std::abs(static_cast<double>(llr[i])), 700.0)));
    }
    const double truth = 0.5 * std::erfc(1.0 / 0.3 / std::sqrt(2.0));  // Q(mu / sigma)
    EXPECT_NEAR(stated / static_cast<double>(stat.size()) / truth, 1.0, 0.1);
    // No spread: finite LLRs, as of g / s = 40 (sxs_soft::max_snr): 2 (g / s)^2 at the mean.
    std::vector<double> flat(64, 0.5);
    std::vector<float> out(64);
    sxs_llrs(flat, out);
    EXPECT_FLOAT_EQ(out[3], static_cast<float>(2.0 * 40.0 * 40.0));
    // Nothing to tell: a stream of zeros, or one with a statistic that is not a number, gives
    // LLRs of 0 (erasures).
    std::vector<double> zeros(6144, 0.0), one_nan(stat.begin(), stat.begin() + 6144);
    one_nan[77] = std::numeric_limits<double>::quiet_NaN();
    for (const auto* x : {&zeros, &one_nan}) {
        std::vector<float> l(6144, 1.0f);
        sxs_llrs(*x, l);
        EXPECT_EQ(*std::max_element(l.begin(), l.end()), 0.0f);
        EXPECT_EQ(*std::min_element(l.begin(), l.end()), 0.0f);
    }
}

// Interference linear in the neighbours' bits up to 6 away, unlike on the two rails (as an
// equalizer leaves multipath), at a BER of the decisions of about 4e-3: with the interference
// the neighbours' decisions predict taken out, the LLRs' signs err less than the decisions, and
// the error rate the LLRs state is their signs'.
TEST(fec, symbol_by_symbol_llrs_state_the_error_rate_where_many_decisions_are_wrong)
{
    // Statistics +-1 + N(0, sigma^2) at Q(1 / sigma) of 1-10 % (where a coded link works): the
    // least-squares fit on the decisions alone would state 0.75-0.85 of the errors (a wrong
    // decision counts as a statistic that fell short); made good for that
    // (sxs_soft::fold_errors), the LLRs state the errors their signs make, within 5 %. A
    // packet's 6144 bits a stream, 40 packets a point, seed 78.
    std::mt19937_64 rng(78);
    for (const double sigma : {0.43, 0.55, 0.7, 0.78}) {
        std::normal_distribution<double> noise(0.0, sigma);
        double stated = 0.0, errors = 0.0, bits = 0.0;
        for (int packet = 0; packet < 40; ++packet) {
            std::vector<double> stat(waveform::data_bits);
            std::vector<int> sent(stat.size());
            for (std::size_t i = 0; i < stat.size(); ++i) {
                sent[i] = (rng() & 1u) ? 1 : -1;
                stat[i] = sent[i] + noise(rng);
            }
            std::vector<float> llr(stat.size());
            sxs_llrs(stat, llr);
            for (std::size_t i = 0; i < stat.size(); ++i) {
                stated += 1.0 / (1.0 + std::exp(std::min(std::abs(static_cast<double>(llr[i])), 700.0)));
                errors += (llr[i] > 0.0f ? 1 : -1) != sent[i] ? 1.0 : 0.0;
                bits += 1.0;
            }
        }
        std::printf("sigma %.2f: the LLRs' signs err %.3e, they state %.3e (%.3fx)\n", sigma, errors / bits, stated / bits,
                    stated / errors);
        EXPECT_NEAR(stated / errors, 1.0, 0.05) << sigma;
    }
}

TEST(fec, the_soft_decisions_model_states_the_error_rate_of_decisions_that_interference_makes_wrong)
{
    // What the unequalized path decides over multipath: each statistic the bit plus echoes of
    // its neighbours (linear, per parity, up to 5 away) plus noise, the decisions wrong 1-5 %
    // of the time, mostly where the echoes line up against the bit. sxs_posterior_bep states
    // that error rate within 0.8-1.25x; the decision-quality model of the same statistics
    // (four contexts, two-point part: dsp/decision_quality.hpp) overstates it, taking the
    // echoes for noise. 30 packets a point, seed 4417.
    std::mt19937_64 rng(4417);
    const int at[] = {-1, 1, -2, 2, -3, 4, -5};
    const double w_even[] = {0.30, -0.22, 0.18, 0.10, -0.12, 0.08, 0.06}, w_odd[] = {-0.26, 0.24, -0.10, 0.16, 0.09, -0.07, 0.05};
    const std::size_t n = waveform::data_bits;
    for (const double sigma : {0.12, 0.2, 0.3}) {
        std::normal_distribution<double> noise(0.0, sigma);
        double errors = 0.0, posterior = 0.0, model = 0.0, bits = 0.0;
        for (int packet = 0; packet < 30; ++packet) {
            std::vector<int> b(n);
            for (auto& v : b) v = (rng() & 1u) ? 1 : -1;
            std::vector<double> x(n);
            for (std::size_t i = 0; i < n; ++i) {
                const double* w = i % 2 == 0 ? w_even : w_odd;
                double isi = 0.0;
                for (std::size_t k = 0; k < std::size(at); ++k) {
                    const long long j = static_cast<long long>(i) + at[k];
                    if (j >= 0 && j < static_cast<long long>(n)) isi += w[k] * b[static_cast<std::size_t>(j)];
                }
                x[i] = b[i] + isi + noise(rng);
                errors += (x[i] >= 0.0 ? 1 : -1) != b[i] ? 1.0 : 0.0;
            }
            bits += static_cast<double>(n);
            posterior += sxs_posterior_bep(x) * static_cast<double>(n);
            model += decision_quality::fit_of(x.data(), n).bep() * static_cast<double>(n);
        }
        const double ber = errors / bits;
        std::printf("sigma %.2f: decisions err %.3e; stated: soft decisions' model %.3fx, decision quality %.3fx\n", sigma, ber,
                    posterior / bits / ber, model / bits / ber);
        EXPECT_GT(ber, 5e-3) << sigma;
        EXPECT_GT(posterior / bits / ber, 0.8) << sigma;
        EXPECT_LT(posterior / bits / ber, 1.25) << sigma;
    }
    // Statistics without information: the probability a half.
    EXPECT_NEAR(sxs_posterior_bep(std::vector<double>(n, std::numeric_limits<double>::quiet_NaN())), 0.5, 1e-12);
}

TEST(fec, symbol_by_symbol_llrs_take_out_the_neighbours_interference)
{
    std::mt19937_64 rng(78);
    std::normal_distribution<double> noise(0.0, 0.3);
    const double w_even[] = {0.12, -0.2, 0.1, 0.05}, w_odd[] = {-0.15, 0.18, 0.0, -0.07};  // at -1, +1, -3, +6
    const int at[] = {-1, 1, -3, 6};
    const std::size_t n = 6144;
    double decision_errors = 0.0, llr_errors = 0.0, stated = 0.0, bits = 0.0;
    for (int packet = 0; packet < 60; ++packet) {
        std::vector<int> b(n);
        for (auto& v : b) v = (rng() & 1u) ? 1 : -1;
        std::vector<double> x(n);
        for (std::size_t i = 0; i < n; ++i) {
            double isi = 0.0;
            for (int k = 0; k < 4; ++k) {
                const auto j = static_cast<long long>(i) + at[k];
                if (j >= 0 && j < static_cast<long long>(n)) isi += (i % 2 ? w_odd : w_even)[k] * b[static_cast<std::size_t>(j)];
            }
            x[i] = b[i] + isi + noise(rng);
        }
        std::vector<float> llr(n);
        sxs_llrs(x, llr);
        for (std::size_t i = 0; i < n; ++i) {
            decision_errors += (x[i] >= 0.0) != (b[i] > 0) ? 1.0 : 0.0;
            llr_errors += (llr[i] > 0.0f) != (b[i] > 0) ? 1.0 : 0.0;
            stated += 1.0 / (1.0 + std::exp(std::min(std::abs(static_cast<double>(llr[i])), 700.0)));
        }
        bits += static_cast<double>(n);
    }
    std::printf("interference: decisions err %.3e, the LLRs' signs %.3e, the LLRs state %.3e\n", decision_errors / bits,
                llr_errors / bits, stated / bits);
    EXPECT_GT(decision_errors, 1000.0);
    EXPECT_LT(llr_errors, 0.25 * decision_errors);
    EXPECT_GE(stated / llr_errors, 0.8);
    EXPECT_LE(stated / llr_errors, 1.25);
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
    EXPECT_EQ(names.size(), 19u + 6u * 7u + 2u);  // + best_stream, time_utc
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
/// decoded. The channel errors a converged codeword reports are its decoder input's (the LLRs'
/// signs) against the codeword re-encoded from the decoded information bits: on a trellis
/// stream those are its hard bits, checked codeword by codeword; on a symbol-by-symbol stream
/// the LLRs take the neighbours' interference out of the bits (dsp/sxs_soft.hpp), so over the
/// run they err no more than the hard bits (but for a count's noise).
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
    std::uint64_t sxs_reported = 0, sxs_hard = 0;
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
                    if (st >= static_cast<int>(chain::num_paths)) {
                        EXPECT_EQ(diff, cw.channel_errors) << "stream " << st << " packet " << i << " codeword " << c;
                    } else {
                        sxs_reported += cw.channel_errors;
                        sxs_hard += diff;
                    }
                    ++r.codewords_checked;
                }
            }
        }
        tally.add(out);
    }
    std::printf("symbol-by-symbol streams, converged codewords: decoder input errors %llu, hard bits' %llu\n",
                static_cast<unsigned long long>(sxs_reported), static_cast<unsigned long long>(sxs_hard));
    EXPECT_LE(static_cast<double>(sxs_reported), static_cast<double>(sxs_hard) + 3.0 * std::sqrt(static_cast<double>(sxs_hard)) + 3.0);
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
