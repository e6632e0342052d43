// Tests of io/bitstream (datagram codec, DQM) and io/bert_monitor (paq-bert's counting),
// without sockets: every count is checked exactly against what was injected.
#include <gtest/gtest.h>

#include "bitstream_fixture.hpp"
#include "dsp/pn.hpp"
#include "dsp/waveform.hpp"
#include "io/bert_monitor.hpp"
#include "io/bitstream.hpp"

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace {

using namespace paq;
using io::bitstream_format;

constexpr std::uint64_t data_bits = waveform::data_bits;

// ---------------------------------------------------------------------------------------
// Round trip

class bitstream_round_trip : public ::testing::TestWithParam<bitstream_format> {};

TEST_P(bitstream_round_trip, every_field_and_bit_survives)
{
    const bitstream_format format = GetParam();
    std::mt19937_64 rng(42);
    for (int trial = 0; trial < 20; ++trial) {
        io::datagram_header h;
        h.stream_id = static_cast<std::uint8_t>(rng() % 6);
        h.sequence = rng();
        h.packet_index = rng();
        h.batch_index = rng();
        h.start_sample = rng();
        h.flags = static_cast<std::uint32_t>(rng());
        h.bep_estimate = std::uniform_real_distribution<float>(0.0f, 0.5f)(rng);
        h.cfo_rad_per_sample = std::uniform_real_distribution<float>(-0.1f, 0.1f)(rng);
        h.ebn0_db = std::uniform_real_distribution<float>(-5.0f, 40.0f)(rng);
        std::vector<std::uint8_t> bits(io::bitstream_payload_bytes);
        for (auto& b : bits) b = static_cast<std::uint8_t>(rng());
        const auto dqe_id = static_cast<std::uint16_t>(rng());

        std::vector<std::uint8_t> buf(io::bitstream_max_datagram_bytes + 10);
        const std::size_t n = io::encode_datagram(format, h, dqe_id, bits, buf);
        ASSERT_EQ(n, io::datagram_bytes(format));
        const auto r = io::decode_datagram({buf.data(), n});
        ASSERT_TRUE(r.ok()) << r.error;
        EXPECT_EQ(r.datagram.format, format);
        EXPECT_EQ(std::vector<std::uint8_t>(r.datagram.bits.begin(), r.datagram.bits.end()), bits);
        if (format == bitstream_format::dqe_raw) {
            EXPECT_EQ(r.datagram.header, io::datagram_header{});  // no paq header on the wire
        } else {
            EXPECT_EQ(r.datagram.header, h);
        }
        if (format == bitstream_format::paq) {
            EXPECT_FALSE(r.datagram.dqe.has_value());
        } else {
            ASSERT_TRUE(r.datagram.dqe.has_value());
            EXPECT_EQ(r.datagram.dqe->id, dqe_id);
            EXPECT_EQ(r.datagram.dqe->dqm, io::dqm_from_bep(h.bep_estimate));
        }
    }
}

INSTANTIATE_TEST_SUITE_P(formats, bitstream_round_trip,
                         ::testing::Values(bitstream_format::paq, bitstream_format::dqe, bitstream_format::dqe_raw),
                         [](const auto& param_info) {
                             std::string s(io::to_string(param_info.param));
                             for (auto& c : s) c = c == '-' ? '_' : c;
                             return s;
                         });

TEST(bitstream, layout_is_big_endian_at_the_documented_offsets)
{
    io::datagram_header h;
    h.stream_id = 4;
    h.sequence = 0x0102030405060708ull;
    h.packet_index = 0x1112131415161718ull;
    h.batch_index = 0x2122232425262728ull;
    h.start_sample = 0x3132333435363738ull;
    h.flags = 0x41424344u;
    h.bep_estimate = 1.0f;  // 0x3F800000
    h.cfo_rad_per_sample = -2.0f;  // 0xC0000000
    h.ebn0_db = 0.5f;  // 0x3F000000
    h.utc_ns = 1'795'603'660'123'456'789;  // 0x18EB4403EF0CC515
    std::vector<std::uint8_t> bits(768);
    bits[0] = 0xAB;
    bits[767] = 0xCD;
    std::vector<std::uint8_t> d(io::datagram_bytes(bitstream_format::dqe));
    io::encode_datagram(bitstream_format::dqe, h, 0x1234, bits, d);
    const std::vector<std::uint8_t> head = {
        'P', 'A', 'Q', 'B', 2, 1, 0, 72, 4, 0, 0, 0, 0x41, 0x42, 0x43, 0x44,
        1, 2, 3, 4, 5, 6, 7, 8, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18,
        0x21, 0x22, 0x23, 0x24, 0x25, 0x26, 0x27, 0x28, 0x31, 0x32, 0x33, 0x34, 0x35, 0x36, 0x37, 0x38,
        0x3F, 0x80, 0, 0, 0xC0, 0, 0, 0, 0x3F, 0, 0, 0, 0, 0, 0x18, 0x00,  // payload bits 6144 = 0x1800
        0x18, 0xEB, 0x44, 0x03, 0xEF, 0x0C, 0xC5, 0x15,  // version 2: UTC 1795603660123456789 ns
        0xFA, 0xC4, 0x12, 0x34, 0, 0,  // DQE: sync, ID, DQM (BEP 1 clamps to 0.5: DQM 0)
        0xAB};
    ASSERT_EQ(d.size(), 846u);
    EXPECT_EQ(std::vector<std::uint8_t>(d.begin(), d.begin() + static_cast<long>(head.size())), head);
    EXPECT_EQ(d.back(), 0xCD);
}

// ---------------------------------------------------------------------------------------
// DQM

TEST(dqm, values_computed_by_hand)
{
    // DQM = min(round(-log10(LR) / 12 * 65536), 65535), LR = BEP / (1 - BEP).
    EXPECT_EQ(io::dqm_from_bep(0.5), 0);                  // LR = 1
    EXPECT_EQ(io::dqm_from_bep(1e-3 / (1 + 1e-3)), 16384);  // LR = 1e-3: 3/12 * 65536
    EXPECT_EQ(io::dqm_from_bep(1e-6 / (1 + 1e-6)), 32768);  // LR = 1e-6: 6/12 * 65536
    EXPECT_EQ(io::dqm_from_bep(1e-9 / (1 + 1e-9)), 49152);  // LR = 1e-9: 9/12 * 65536
    EXPECT_EQ(io::dqm_from_bep(0.1), 5211);    // LR = 1/9: log10(9) = 0.954243 -> 5211.44
    EXPECT_EQ(io::dqm_from_bep(0.01), 10899);  // LR = 1/99: log10(99) = 1.995635 -> 10898.83
    EXPECT_EQ(io::dqm_from_bep(1e-4), 21845);  // docs/BITSTREAM.md's worked example
    EXPECT_EQ(io::dqm_from_bep(1e-5), 27307);  // LR = 1.00001e-5: 4.9999957 -> 27306.64
    EXPECT_EQ(io::dqm_from_bep(2e-12), 63892); // LR = 2e-12: 11.69897 -> 63891.97
    EXPECT_EQ(io::dqm_from_bep(1e-12 / (1 + 1e-12)), 65535);  // 65536 saturates
}

TEST(dqm, clamps_bep_so_the_formula_is_defined)
{
    EXPECT_EQ(io::dqm_from_bep(0.0), 65535);
    EXPECT_EQ(io::dqm_from_bep(-1.0), 65535);
    EXPECT_EQ(io::dqm_from_bep(1e-300), 65535);
    EXPECT_EQ(io::dqm_from_bep(0.7), 0);
    EXPECT_EQ(io::dqm_from_bep(1.0), 0);
    EXPECT_EQ(io::dqm_from_bep(std::numeric_limits<double>::infinity()), 0);
    EXPECT_EQ(io::dqm_from_bep(std::numeric_limits<double>::quiet_NaN()), 0);
    EXPECT_EQ(io::clamp_bep(std::numeric_limits<double>::quiet_NaN()), 0.5);
    EXPECT_EQ(io::clamp_bep(0.0), io::dqm_bep_min);
    EXPECT_EQ(io::clamp_bep(0.25), 0.25);
}

TEST(dqm, is_monotonic_and_inverts)
{
    std::uint16_t prev = 65535;
    for (double e = -12.0; e <= std::log10(0.5); e += 0.01) {
        const std::uint16_t q = io::dqm_from_bep(std::pow(10.0, e));
        EXPECT_LE(q, prev) << "BEP 1e" << e;
        prev = q;
    }
    for (const std::uint16_t q : {std::uint16_t{0}, std::uint16_t{1000}, std::uint16_t{16384}, std::uint16_t{40000},
                                  std::uint16_t{65000}}) {
        EXPECT_EQ(io::dqm_from_bep(io::bep_from_dqm(q)), q);
    }
}

// ---------------------------------------------------------------------------------------
// Malformed datagrams: each rejected, the message naming the problem.

struct malformed_case {
    const char* name;
    bitstream_format format;
    void (*mutate)(std::vector<std::uint8_t>&);
    const char* expected;  // substring of the error
};

std::vector<std::uint8_t> valid_datagram(bitstream_format f)
{
    io::datagram_header h;
    h.stream_id = 2;
    h.sequence = 9;
    std::vector<std::uint8_t> bits(768, 0x5A);
    std::vector<std::uint8_t> d(io::datagram_bytes(f));
    io::encode_datagram(f, h, 0, bits, d);
    return d;
}

class bitstream_malformed : public ::testing::TestWithParam<malformed_case> {};

TEST_P(bitstream_malformed, is_rejected_with_the_field_named)
{
    const malformed_case& c = GetParam();
    auto d = valid_datagram(c.format);
    ASSERT_TRUE(io::decode_datagram(d).ok());
    c.mutate(d);
    const auto r = io::decode_datagram(d);
    EXPECT_FALSE(r.ok());
    EXPECT_NE(r.error.find(c.expected), std::string::npos) << "error: " << r.error;
}

const malformed_case malformed_cases[] = {
    {"empty", bitstream_format::paq, [](auto& d) { d.clear(); }, "shorter than the 64-byte paq header"},
    {"short_header", bitstream_format::paq, [](auto& d) { d.resize(40); }, "40 bytes is shorter"},
    {"magic", bitstream_format::paq, [](auto& d) { d[0] = 'X'; }, "magic is 0x58415142"},
    {"version", bitstream_format::paq, [](auto& d) { d[4] = 3; }, "version is 3, this decoder reads versions 1 .. 2"},
    {"version_0", bitstream_format::paq, [](auto& d) { d[4] = 0; }, "version is 0"},
    {"v2_header_of_v1_length", bitstream_format::paq, [](auto& d) { d[7] = 64; }, "header length is 64, allowed for version 2: 72"},
    {"header_length_small", bitstream_format::paq, [](auto& d) { d[7] = 60; }, "header length is 60"},
    {"header_length_beyond", bitstream_format::paq, [](auto& d) { d[6] = 4; }, "header length is 1096"},
    {"stream_id", bitstream_format::paq, [](auto& d) { d[8] = 13; }, "stream id is 13, allowed 0 .. 11 and 12 (the best-path stream)"},
    {"reserved", bitstream_format::paq, [](auto& d) { d[10] = 1; }, "reserved bytes"},
    {"best_chosen", bitstream_format::paq, [](auto& d) { d[8] = 12; d[10] = 12; }, "chosen stream (byte 10) is 12, allowed 0 .. 11"},
    {"best_reserved", bitstream_format::dqe, [](auto& d) { d[8] = 12; d[11] = 1; }, "reserved bytes 9 and 11 are 0x00 0x01"},
    {"decoded_stream_12", bitstream_format::paq, [](auto& d) { d[8] = 12; d[5] = 3; }, "stream id is 12, allowed 0 .. 11 for payload type 3"},
    {"payload_type", bitstream_format::paq, [](auto& d) { d[5] = 2; }, "payload type is 2"},
    {"payload_bits", bitstream_format::paq, [](auto& d) { d[63] = 0x01; }, "payload bit count is 6145"},
    {"truncated", bitstream_format::paq, [](auto& d) { d.pop_back(); }, "datagram length is 839"},
    {"extra_byte", bitstream_format::paq, [](auto& d) { d.push_back(0); }, "datagram length is 841"},
    {"dqe_sync", bitstream_format::dqe, [](auto& d) { d[73] = 0xC5; }, "DQE payload: DQE sync is 0xFAC5"},
    {"dqe_truncated", bitstream_format::dqe, [](auto& d) { d.pop_back(); }, "DQE payload is 773 bytes"},
    {"dqe_without_frame", bitstream_format::dqe, [](auto& d) { d.resize(72 + 768); }, "DQE payload is 768 bytes"},
    {"raw_truncated", bitstream_format::dqe_raw, [](auto& d) { d.resize(100); }, "bare DQE frame (dqe-raw) is 100 bytes"},
    {"raw_sync_only", bitstream_format::dqe_raw, [](auto& d) { d.resize(2); }, "is 2 bytes, expected 774"},
};

INSTANTIATE_TEST_SUITE_P(cases, bitstream_malformed, ::testing::ValuesIn(malformed_cases),
                         [](const auto& param_info) { return std::string(param_info.param.name); });

TEST(bitstream, encoder_rejects_caller_bugs)
{
    io::datagram_header h;
    std::vector<std::uint8_t> bits(768), out(846);
    EXPECT_THROW(io::encode_datagram(bitstream_format::paq, h, 0, {bits.data(), 767}, out), std::invalid_argument);
    EXPECT_THROW(io::encode_datagram(bitstream_format::dqe, h, 0, bits, {out.data(), 837}), std::invalid_argument);
    h.stream_id = 13;
    EXPECT_THROW(io::encode_datagram(bitstream_format::paq, h, 0, bits, out), std::invalid_argument);
    h.stream_id = 2;
    h.chosen_stream = 3;  // only the best-path stream names a chosen stream
    EXPECT_THROW(io::encode_datagram(bitstream_format::paq, h, 0, bits, out), std::invalid_argument);
    h.stream_id = io::best_stream_id;
    h.chosen_stream = 12;
    EXPECT_THROW(io::encode_datagram(bitstream_format::paq, h, 0, bits, out), std::invalid_argument);
    std::vector<std::int8_t> llrs(6144);
    std::vector<std::uint8_t> llr_out(io::llr_datagram_bytes);
    h.chosen_stream = 0;
    EXPECT_THROW(io::encode_llr_datagram(h, llrs, llr_out), std::invalid_argument);  // soft streams are 0 .. 11
}

// The best-path stream's datagram: stream id 12, the chosen stream in byte 10, read back.
TEST(bitstream, the_best_path_streams_datagram_names_its_chosen_stream)
{
    for (const auto f : {bitstream_format::paq, bitstream_format::dqe}) {
        io::datagram_header h;
        h.stream_id = io::best_stream_id;
        h.chosen_stream = 8;
        h.sequence = 41;
        h.bep_estimate = 2.5e-4f;
        std::vector<std::uint8_t> bits(768, 0xA5), d(io::datagram_bytes(f));
        ASSERT_EQ(io::encode_datagram(f, h, 12, bits, d), d.size());
        EXPECT_EQ(d[8], 12);
        EXPECT_EQ(d[10], 8);
        EXPECT_EQ(d[11], 0);
        const auto r = io::decode_datagram(d);
        ASSERT_TRUE(r.ok()) << r.error;
        EXPECT_EQ(r.datagram.header, h);
        EXPECT_TRUE(std::equal(bits.begin(), bits.end(), r.datagram.bits.begin()));
    }
}

TEST(bitstream, llr_datagrams_round_trip_and_are_told_from_the_bitstreams)
{
    // The soft streams' datagram (publisher.llr_destinations): the paq header with payload
    // type 2, then the 6144 LLRs as signed bytes. Every header field and byte survives; the
    // bitstream decoder (paq-bert's) names it instead of reading it as bits, and the LLR
    // decoder refuses a bitstream datagram and a wrong length.
    io::datagram_header h;
    h.stream_id = 8;  // mmse_trellis (detector both)
    h.sequence = 41;
    h.packet_index = 5;
    h.batch_index = 3;
    h.start_sample = 123456789012ULL;
    h.flags = 0x21;
    h.bep_estimate = 2.5e-4f;
    h.cfo_rad_per_sample = -0.0125f;
    h.ebn0_db = 12.5f;
    h.utc_ns = 1'700'000'000'123'456'789LL;
    std::vector<std::int8_t> llrs(io::llr_payload_bytes);
    for (std::size_t i = 0; i < llrs.size(); ++i) llrs[i] = static_cast<std::int8_t>(static_cast<int>((i * 37) % 255) - 127);
    std::vector<std::uint8_t> d(io::llr_datagram_bytes);
    ASSERT_EQ(io::encode_llr_datagram(h, llrs, d), 6216u);
    EXPECT_EQ(d[5], 2);                  // payload type
    EXPECT_EQ(d[60] << 24 | d[61] << 16 | d[62] << 8 | d[63], 6144);  // payload bits, big-endian
    EXPECT_EQ(static_cast<std::int8_t>(d[72]), llrs[0]);
    const auto r = io::decode_llr_datagram(d);
    ASSERT_TRUE(r.ok()) << r.error;
    EXPECT_EQ(r.datagram.header, h);
    EXPECT_EQ(r.datagram.version, 2);
    EXPECT_EQ(r.datagram.header_length, 72u);
    ASSERT_EQ(r.datagram.llrs.size(), llrs.size());
    EXPECT_TRUE(std::equal(llrs.begin(), llrs.end(), r.datagram.llrs.begin()));

    const auto as_bits = io::decode_datagram(d);
    EXPECT_FALSE(as_bits.ok());
    EXPECT_NE(as_bits.error.find("payload type is 2: the trellis's LLRs"), std::string::npos) << as_bits.error;
    const auto bits_datagram = valid_datagram(bitstream_format::paq);
    const auto as_llrs = io::decode_llr_datagram(bits_datagram);
    EXPECT_FALSE(as_llrs.ok());
    EXPECT_NE(as_llrs.error.find("payload type is 0, expected 2 (LLRs)"), std::string::npos) << as_llrs.error;
    auto shorter = d;
    shorter.pop_back();
    const auto truncated = io::decode_llr_datagram(shorter);
    EXPECT_FALSE(truncated.ok());
    EXPECT_NE(truncated.error.find("datagram length is 6215 bytes"), std::string::npos) << truncated.error;
    auto bad_magic = d;
    bad_magic[0] = 'X';
    EXPECT_NE(io::decode_llr_datagram(bad_magic).error.find("magic is 0x58415142"), std::string::npos);
    const auto raw = io::decode_llr_datagram(valid_datagram(bitstream_format::dqe_raw));
    EXPECT_NE(raw.error.find("a bare DQE frame (dqe-raw, sync 0xFAC4): a bitstream, not an LLR datagram"), std::string::npos)
        << raw.error;
    // A bitstream datagram whose type byte was corrupted to 2 is not called an LLR datagram.
    auto corrupted = valid_datagram(bitstream_format::paq);
    corrupted[5] = 2;
    EXPECT_NE(io::decode_datagram(corrupted).error.find("payload type is 2, allowed 0 (bits), 1 (dqe) or 3 (decoded)"),
              std::string::npos);

    EXPECT_THROW(io::encode_llr_datagram(h, {llrs.data(), 6143}, d), std::invalid_argument);
    EXPECT_THROW(io::encode_llr_datagram(h, llrs, {d.data(), 6215}), std::invalid_argument);
    h.stream_id = 12;
    EXPECT_THROW(io::encode_llr_datagram(h, llrs, d), std::invalid_argument);
}

// ---------------------------------------------------------------------------------------
// Decoded streams (payload type 3): a coded link's information bits and codeword results.

namespace {

/// A decoded stream's datagram of `code` for one packet: `info` packed information bytes and
/// the codewords' results, header fields as encode_packet's.
std::vector<std::uint8_t> decoded_datagram(dsp::fec_code code, int stream, std::uint64_t sequence, std::uint64_t start_sample,
                                           const std::vector<std::uint8_t>& info, const std::vector<dsp::codeword_result>& results)
{
    io::datagram_header h;
    h.stream_id = static_cast<std::uint8_t>(stream);
    h.sequence = sequence;
    h.packet_index = sequence;
    h.start_sample = start_sample;
    h.bep_estimate = 1e-3f;
    std::vector<std::uint8_t> out(io::decoded_max_datagram_bytes);
    out.resize(io::encode_decoded_datagram(h, code, info, results, out));
    return out;
}

/// `bits` bits of `gen`, packed MSB first.
std::vector<std::uint8_t> pn_bytes(dsp::pn_generator& gen, std::size_t bits)
{
    std::vector<std::uint8_t> v(bits / 8, 0);
    for (std::size_t i = 0; i < bits; ++i) v[i / 8] = static_cast<std::uint8_t>(v[i / 8] | (gen.next() << (7 - i % 8)));
    return v;
}

}  // namespace

TEST(bitstream, the_continuous_streams_decoded_datagrams_round_trip_with_their_frames_and_are_checked)
{
    // The three continuous codes: the payload begins with the first frame's number, then the
    // frames' information bits and records; 0 .. a packet's most frames; every size within
    // decoded_max_datagram_bytes.
    for (const dsp::fec_code code : {dsp::fec_code::k1024_r4_5, dsp::fec_code::k4096_r1_2, dsp::fec_code::k4096_r4_5}) {
        SCOPED_TRACE(std::string(dsp::to_string(code)));
        const dsp::fec_framing f = *dsp::framing_for(code);
        ASSERT_TRUE(f.continuous());
        for (int frames = 0; frames <= f.codewords; ++frames) {
            std::vector<std::uint8_t> info(static_cast<std::size_t>(frames * f.k / 8));
            for (std::size_t i = 0; i < info.size(); ++i) info[i] = static_cast<std::uint8_t>(i * 13 + 5);
            std::vector<dsp::codeword_result> results;
            for (int c = 0; c < frames; ++c) results.push_back({static_cast<std::uint8_t>(7 + c), static_cast<std::uint8_t>(c != 1), 30});
            io::datagram_header h;
            h.stream_id = 4;
            h.sequence = 5;
            std::vector<std::uint8_t> d(io::decoded_max_datagram_bytes);
            d.resize(io::encode_stream_decoded_datagram(h, code, 1'000'000'007LL, info, results, d));
            ASSERT_EQ(d.size(), 72u + 8u + info.size() + 4u * results.size());
            EXPECT_EQ(d.size(), io::decoded_datagram_bytes(f, frames));
            EXPECT_LE(d.size(), io::decoded_max_datagram_bytes);
            EXPECT_EQ(d[9], static_cast<std::uint8_t>(code));
            EXPECT_EQ(d[60] << 24 | d[61] << 16 | d[62] << 8 | d[63], frames * f.k);
            const auto r = io::decode_datagram(d);
            ASSERT_TRUE(r.ok()) << r.error;
            ASSERT_TRUE(r.datagram.fec.has_value());
            EXPECT_EQ(r.datagram.fec->first_frame, 1'000'000'007LL);
            ASSERT_EQ(r.datagram.fec->codewords, frames);
            ASSERT_EQ(r.datagram.bits.size(), info.size());
            EXPECT_TRUE(std::equal(info.begin(), info.end(), r.datagram.bits.begin()));
            for (int c = 0; c < frames; ++c) {
                EXPECT_EQ(r.datagram.fec->results[static_cast<std::size_t>(c)].iterations, 7 + c);
                EXPECT_EQ(r.datagram.fec->results[static_cast<std::size_t>(c)].channel_errors, c != 1 ? 30 : 0);
            }
            if (frames != 1) continue;
            auto bad = d;
            bad[60 + 3] = static_cast<std::uint8_t>(bad[63] + 1);  // not whole frames
            EXPECT_NE(io::decode_datagram(bad).error.find("carries frames of"), std::string::npos);
            bad = d;
            bad[72] = 0x80;  // a negative frame number
            EXPECT_NE(io::decode_datagram(bad).error.find("first frame number is"), std::string::npos) << io::decode_datagram(bad).error;
            bad = d;
            bad.pop_back();
            EXPECT_NE(io::decode_datagram(bad).error.find("(a frame number + "), std::string::npos) << io::decode_datagram(bad).error;
        }
        // More frames than a packet holds, a negative number, a codeword-aligned code: the caller's bugs.
        std::vector<std::uint8_t> out(io::decoded_max_datagram_bytes);
        const std::vector<dsp::codeword_result> too_many(static_cast<std::size_t>(f.codewords + 1));
        const std::vector<std::uint8_t> info(too_many.size() * static_cast<std::size_t>(f.k / 8));
        EXPECT_THROW(io::encode_stream_decoded_datagram({}, code, 0, info, too_many, out), std::invalid_argument);
        EXPECT_THROW(io::encode_stream_decoded_datagram({}, code, -1, {}, {}, out), std::invalid_argument);
    }
    std::vector<std::uint8_t> out(io::decoded_max_datagram_bytes);
    EXPECT_THROW(io::encode_stream_decoded_datagram({}, dsp::fec_code::k4096_r2_3, 0, {}, {}, out), std::invalid_argument);
    // Every code's largest datagram fits decoded_max_datagram_bytes and a 1500-byte MTU.
    for (const auto& e : dsp::fec_names) {
        if (const auto f = dsp::framing_for(e.value)) {
            EXPECT_LE(io::decoded_datagram_bytes(*f), io::decoded_max_datagram_bytes) << e.name;
            EXPECT_LE(io::decoded_datagram_bytes(*f), 1472u) << e.name;
        }
    }
}

TEST(bitstream, decoded_datagrams_round_trip_with_their_codewords_and_are_checked)
{
    // Each framed code: the header (payload type 3, the code in byte 9, the information bits as
    // the payload bit count), the information bytes and one record per codeword survive; a
    // failed codeword's channel errors are sent as 0.
    for (const dsp::fec_code code : {dsp::fec_code::k1024_r1_2, dsp::fec_code::k1024_r2_3, dsp::fec_code::k4096_r2_3}) {
        SCOPED_TRACE(std::string(dsp::to_string(code)));
        const dsp::fec_framing f = *dsp::framing_for(code);
        std::vector<std::uint8_t> info(static_cast<std::size_t>(f.info_bytes()));
        for (std::size_t i = 0; i < info.size(); ++i) info[i] = static_cast<std::uint8_t>(i * 29 + 3);
        std::vector<dsp::codeword_result> results;
        for (int c = 0; c < f.codewords; ++c) {
            results.push_back({static_cast<std::uint8_t>(3 + c), static_cast<std::uint8_t>(c != 1), static_cast<std::uint16_t>(40 + c)});
        }
        const auto d = decoded_datagram(code, 9, 77, 123456, info, results);
        ASSERT_EQ(d.size(), 72 + info.size() + 4 * results.size());
        EXPECT_EQ(d.size(), io::decoded_datagram_bytes(f));
        EXPECT_LE(d.size(), io::decoded_max_datagram_bytes);
        EXPECT_EQ(d[5], 3);                                   // payload type
        EXPECT_EQ(d[9], static_cast<std::uint8_t>(code));     // the code
        EXPECT_EQ(d[60] << 24 | d[61] << 16 | d[62] << 8 | d[63], f.info_bits());
        const auto r = io::decode_datagram(d);
        ASSERT_TRUE(r.ok()) << r.error;
        ASSERT_TRUE(r.datagram.fec.has_value());
        EXPECT_EQ(r.datagram.fec->code, code);
        EXPECT_EQ(r.datagram.header.stream_id, 9);
        EXPECT_EQ(r.datagram.header.sequence, 77u);
        EXPECT_EQ(r.datagram.header.start_sample, 123456u);
        ASSERT_EQ(r.datagram.bits.size(), info.size());
        EXPECT_TRUE(std::equal(info.begin(), info.end(), r.datagram.bits.begin()));
        ASSERT_EQ(r.datagram.fec->codewords, f.codewords);
        for (int c = 0; c < f.codewords; ++c) {
            const dsp::codeword_result& got = r.datagram.fec->results[static_cast<std::size_t>(c)];
            EXPECT_EQ(got.iterations, 3 + c);
            EXPECT_EQ(got.converged, c != 1 ? 1 : 0);
            EXPECT_EQ(got.channel_errors, c != 1 ? 40 + c : 0);
        }
        // A bitstream datagram is not a decoded one.
        EXPECT_FALSE(io::decode_datagram(valid_datagram(bitstream_format::paq)).datagram.fec.has_value());
    }

    dsp::pn_generator gen(dsp::pn_pattern::pn15);
    const auto info = pn_bytes(gen, 4096);
    const std::vector<dsp::codeword_result> one{{5, 1, 12}};
    const auto good = decoded_datagram(dsp::fec_code::k4096_r2_3, 2, 0, 0, info, one);
    const auto refused = [&](auto change, const char* message) {
        auto d = good;
        change(d);
        const auto r = io::decode_datagram(d);
        EXPECT_FALSE(r.ok()) << message;
        EXPECT_NE(r.error.find(message), std::string::npos) << r.error;
    };
    refused([](auto& d) { d[9] = 7; }, "decoded stream: code (byte 9) is 7, allowed 1 (ar4ja-1024-1/2), 2 (ar4ja-1024-2/3), 3 (ar4ja-1024-4/5), 4 "
                                       "(ar4ja-4096-1/2), 5 (ar4ja-4096-2/3) or 6 (ar4ja-4096-4/5)");
    refused([](auto& d) { d[9] = 3; }, "datagram length is 588 bytes, header length 72 + payload 536 = 608 expected (a frame number + 512 "
                                       "information bytes + 4 codeword records)");
    refused([](auto& d) { d[9] = 0; }, "decoded stream: code (byte 9) is 0");
    refused([](auto& d) { d[9] = 200; }, "decoded stream: code (byte 9) is 200");
    refused([](auto& d) { d[9] = 1; }, "decoded stream: payload bit count is 4096, ar4ja-1024-1/2 carries 3072");
    refused([](auto& d) { d[11] = 1; }, "reserved bytes 10..11 are 0x0001, must be zero");
    refused([](auto& d) { d.pop_back(); }, "datagram length is 587 bytes, header length 72 + payload 516 = 588 expected");
    refused([](auto& d) { d.push_back(0); }, "datagram length is 589 bytes");
    refused([](auto& d) { d[72 + 512] = 2; }, "decoded stream: codeword 0's status is 2, allowed 0 (failed) or 1 (converged)");
    // The LLR decoder names it a bitstream-side datagram.
    EXPECT_NE(io::decode_llr_datagram(good).error.find("payload type is 3, expected 2 (LLRs)"), std::string::npos);

    std::vector<std::uint8_t> out(io::decoded_max_datagram_bytes);
    io::datagram_header h;
    EXPECT_THROW(io::encode_decoded_datagram(h, dsp::fec_code::none, info, one, out), std::invalid_argument);
    EXPECT_THROW(io::encode_decoded_datagram(h, dsp::fec_code::k4096_r1_2, info, one, out), std::invalid_argument);
    EXPECT_THROW(io::encode_decoded_datagram(h, dsp::fec_code::k4096_r2_3, {info.data(), 511}, one, out), std::invalid_argument);
    EXPECT_THROW(io::encode_decoded_datagram(h, dsp::fec_code::k1024_r2_3, info, one, out), std::invalid_argument);
    EXPECT_THROW(io::encode_decoded_datagram(h, dsp::fec_code::k4096_r2_3, info, one, {out.data(), 587}), std::invalid_argument);
    h.stream_id = 12;
    EXPECT_THROW(io::encode_decoded_datagram(h, dsp::fec_code::k4096_r2_3, info, one, out), std::invalid_argument);
}

TEST(bert_monitor, decoded_streams_are_checked_on_their_own_with_their_codewords)
{
    // ar4ja-1024-1/2: 3072 information bits and 3 codewords per packet. The decoded stream of
    // mmse (stream 2) and mmse's bitstream arrive on one port: they are counted apart. Packet
    // 6 is lost (the checker skips its 3072 bits by start sample), packet 9 comes twice, and
    // packet 12 has 5 bit errors in a failed codeword.
    constexpr int packets = 20;
    const auto code = dsp::fec_code::k1024_r1_2;
    dsp::pn_generator gen(dsp::pn_pattern::pn15);
    auto batches = test::make_pn_batches(1, packets);
    io::bert_monitor mon({dsp::pn_pattern::pn15, std::nullopt});
    dsp::fec_summary expected;
    std::uint64_t seq = 0;
    for (std::uint64_t k = 0; k < packets; ++k) {
        auto info = pn_bytes(gen, 3072);
        std::vector<dsp::codeword_result> results{{2, 1, 7}, {4, 1, 0}, {3, 1, 11}};
        if (k == 12) {
            results[1] = {50, 0, 0};
            for (int b = 0; b < 5; ++b) info[200 + static_cast<std::size_t>(b) * 3] ^= 0x10;
        }
        const std::uint64_t start = 1000 + k * waveform::L_pkt;
        mon.ingest(test::encode_packet(bitstream_format::paq, batches[0], k, 2, k, k));
        if (k == 6) {
            ++seq;
            continue;
        }
        const auto d = decoded_datagram(code, 2, seq++, start, info, results);
        mon.ingest(d);
        if (k == 9) mon.ingest(d);
        expected.add(results.data(), 3, 2048);
    }
    const auto s = mon.stats(io::bert_monitor::decoded_id(2));
    EXPECT_EQ(s.code, code);
    EXPECT_EQ(s.datagrams, packets - 1 + 1u);
    EXPECT_EQ(s.lost, 1u);
    EXPECT_EQ(s.duplicated, 1u);
    EXPECT_EQ(s.packets_checked, packets - 1u);
    EXPECT_EQ(s.packets_skipped, 1u);
    EXPECT_EQ(s.pn.bits_checked + s.pn.bits_before_lock, (packets - 1u) * 3072u);
    EXPECT_EQ(s.pn.bit_errors, 5u);
    EXPECT_TRUE(s.pn.locked);
    EXPECT_EQ(s.fec.codewords, 3u * (packets - 1));
    EXPECT_EQ(s.fec.codewords_failed, 1u);
    EXPECT_EQ(s.fec.iterations, expected.iterations);
    EXPECT_EQ(s.fec.channel_bits, expected.channel_bits);
    EXPECT_EQ(s.fec.channel_bit_errors, expected.channel_bit_errors);
    // mmse's bitstream on its own: every packet, 6144 bits each, no errors.
    const auto b = mon.stats(2);
    EXPECT_EQ(b.code, dsp::fec_code::none);
    EXPECT_EQ(b.datagrams, static_cast<std::uint64_t>(packets));
    EXPECT_EQ(b.pn.bits_checked + b.pn.bits_before_lock, packets * data_bits);
    EXPECT_EQ(b.pn.bit_errors, 0u);
    EXPECT_EQ(b.fec.codewords, 0u);
    EXPECT_EQ(mon.active_streams(), 2);
    EXPECT_THROW((void)mon.stats(io::bert_monitor::tracked_streams), std::out_of_range);
}

TEST(bitstream, format_names_parse)
{
    EXPECT_EQ(io::parse_bitstream_format("paq"), bitstream_format::paq);
    EXPECT_EQ(io::parse_bitstream_format("dqe"), bitstream_format::dqe);
    EXPECT_EQ(io::parse_bitstream_format("dqe-raw"), bitstream_format::dqe_raw);
    EXPECT_EQ(io::parse_bitstream_format("dqe_raw"), bitstream_format::dqe_raw);
    try {
        (void)io::parse_bitstream_format("irig");
        FAIL() << "no exception";
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("'irig'"), std::string::npos);
    }
}

// ---------------------------------------------------------------------------------------
// bert_monitor: losses, duplicates, reordering and bit errors, exactly.

TEST(bert_monitor, counts_exactly_what_was_injected)
{
    constexpr int packets = 30;
    auto batches = test::make_pn_batches(1, packets);
    auto& batch = batches[0];
    // Errors: 3 in packet 3 of zf, 1 in packet 20 of zf, 2 in packet 12 of fde2 (after the
    // checker locked in packet 0, in packets that arrive once and in order).
    test::flip_bit(batch, 3, 1, 0);
    test::flip_bit(batch, 3, 1, 100);
    test::flip_bit(batch, 3, 1, 6143);
    test::flip_bit(batch, 20, 1, 4000);
    test::flip_bit(batch, 12, 5, 17);
    test::flip_bit(batch, 12, 5, 18);

    io::bert_monitor mon({dsp::pn_pattern::pn15, std::nullopt});
    for (int stream : {1, 5}) {
        // seq 5 and 6 dropped, 7 duplicated, 10 and 11 swapped, 25 duplicated 3 times later.
        for (std::uint64_t k = 0; k < packets; ++k) {
            const auto send = [&](std::uint64_t i) {
                mon.ingest(test::encode_packet(bitstream_format::paq, batch, i, stream, i, i));
            };
            if (k == 5 || k == 6) continue;
            if (k == 10) {
                send(11);
                send(10);
                continue;
            }
            if (k == 11) continue;
            send(k);
            if (k == 7) send(7);
            if (k == 27) {
                send(25);
                send(25);
                send(25);
            }
        }
    }
    mon.ingest(std::vector<std::uint8_t>(10, 0));  // malformed, shared port: unattributed
    mon.ingest(std::vector<std::uint8_t>(10, 0), 5);  // malformed on fde2's own port

    EXPECT_EQ(mon.active_streams(), 2);
    EXPECT_EQ(mon.malformed_total(), 2u);
    EXPECT_EQ(mon.malformed_unattributed(), 1u);
    EXPECT_NE(mon.last_error().find("shorter than the 64-byte paq header"), std::string::npos);
    for (int stream : {1, 5}) {
        SCOPED_TRACE(stream);
        const auto s = mon.stats(stream);
        EXPECT_EQ(s.datagrams, packets - 2 + 1 + 3u);
        EXPECT_EQ(s.lost, 2u);
        EXPECT_EQ(s.duplicated, 4u);
        EXPECT_EQ(s.reordered, 1u);  // 10 after 11
        EXPECT_EQ(s.malformed, stream == 5 ? 1u : 0u);
        // Checked: all but the two lost and the late one; skipped by start sample: 5, 6, 10.
        EXPECT_EQ(s.packets_checked, packets - 3u);
        EXPECT_EQ(s.packets_skipped, 3u);
        EXPECT_EQ(s.pn.bits_checked + s.pn.bits_before_lock, (packets - 3u) * data_bits);
        EXPECT_EQ(s.pn.bits_before_lock, 15u + 62u);  // degree + 2 * degree + 32
        EXPECT_EQ(s.pn.bit_errors, stream == 1 ? 4u : 2u);
        EXPECT_TRUE(s.pn.locked);
        EXPECT_EQ(s.pn.resyncs, 0u);
        EXPECT_FALSE(s.last_dqm.has_value());
    }
    EXPECT_EQ(mon.min_bits_checked(), (packets - 3u) * data_bits - 77u);
    for (int stream : {0, 2, 3, 4}) EXPECT_FALSE(mon.stats(stream).active());
}

TEST(bert_monitor, a_late_datagram_takes_its_loss_back)
{
    auto batches = test::make_pn_batches(1, 8);
    io::bert_monitor mon({dsp::pn_pattern::pn15, std::nullopt});
    for (std::uint64_t k : {0u, 1u, 4u, 5u}) mon.ingest(test::encode_packet(bitstream_format::dqe, batches[0], k, 3, k, k));
    EXPECT_EQ(mon.stats(3).lost, 2u);
    mon.ingest(test::encode_packet(bitstream_format::dqe, batches[0], 2, 3, 2, 2));
    EXPECT_EQ(mon.stats(3).lost, 1u);
    EXPECT_EQ(mon.stats(3).reordered, 1u);
    mon.ingest(test::encode_packet(bitstream_format::dqe, batches[0], 2, 3, 2, 2));
    EXPECT_EQ(mon.stats(3).duplicated, 1u);
    for (std::uint64_t k : {6u, 7u}) mon.ingest(test::encode_packet(bitstream_format::dqe, batches[0], k, 3, k, k));
    const auto s = mon.stats(3);
    EXPECT_EQ(s.lost, 1u);
    EXPECT_EQ(s.pn.bit_errors, 0u);
    EXPECT_EQ(s.packets_checked, 6u);
    ASSERT_TRUE(s.last_dqm.has_value());
    EXPECT_EQ(*s.last_dqm, io::dqm_from_bep(batches[0].packets[7].paths[3].bep_estimate));
}

TEST(bert_monitor, bare_dqe_frames_by_port_or_dqe_id)
{
    auto batches = test::make_pn_batches(1, 6);
    test::flip_bit(batches[0], 4, 2, 1234);
    io::bert_monitor mon({dsp::pn_pattern::pn15, std::nullopt});
    for (std::uint64_t k = 0; k < 6; ++k) {
        // mmse on its own port (DQE ID 0, as IRIG 106-17 has it); cma on the shared port with
        // the stream id in the DQE ID word.
        mon.ingest(test::encode_packet(bitstream_format::dqe_raw, batches[0], k, 2, 0, 0, 0), 2);
        mon.ingest(test::encode_packet(bitstream_format::dqe_raw, batches[0], k, 3, 0, 0, 3));
    }
    mon.ingest(test::encode_packet(bitstream_format::dqe_raw, batches[0], 0, 3, 0, 0, 0x0100));
    EXPECT_EQ(mon.malformed_unattributed(), 1u);
    EXPECT_NE(mon.last_error().find("DQE ID 0x0100"), std::string::npos) << mon.last_error();
    for (int stream : {2, 3}) {
        const auto s = mon.stats(stream);
        EXPECT_EQ(s.datagrams, 6u);
        EXPECT_EQ(s.packets_checked, 6u);
        EXPECT_EQ(s.pn.bits_checked + s.pn.bits_before_lock, 6 * data_bits);
        EXPECT_EQ(s.pn.bit_errors, stream == 2 ? 1u : 0u);
        EXPECT_EQ(s.lost + s.duplicated + s.reordered, 0u);
    }
}

TEST(bert_monitor, rejects_an_unexpected_format)
{
    auto batches = test::make_pn_batches(1, 2);
    io::bert_monitor mon({dsp::pn_pattern::pn15, bitstream_format::paq});
    mon.ingest(test::encode_packet(bitstream_format::dqe, batches[0], 0, 1, 0, 0));
    mon.ingest(test::encode_packet(bitstream_format::paq, batches[0], 1, 1, 1, 1));
    const auto s = mon.stats(1);
    EXPECT_EQ(s.malformed, 1u);
    EXPECT_EQ(s.datagrams, 1u);
    EXPECT_NE(mon.last_error().find("format is dqe, expected paq"), std::string::npos) << mon.last_error();
}

// A restarted sender: after a paqd restart the sequence numbers start again at 0 with
// start samples of the new run. paq-bert took them for duplicates and checked nothing more.
TEST(bert_monitor, a_restarted_sender_is_recognised_and_checked_again)
{
    constexpr std::size_t old_run = 20, new_run = 12;
    // One continuous PN sequence (the transmitter did not restart, paqd did); the new run's
    // start samples count from its own start again.
    auto batches = test::make_pn_batches(1, static_cast<int>(old_run + new_run));
    auto& b = batches[0];
    for (std::size_t k = old_run; k < old_run + new_run; ++k) b.packets[k].start_sample = 700 + (k - old_run) * waveform::L_pkt;
    test::flip_bit(b, 10, 1, 33);            // one error in the old run
    test::flip_bit(b, old_run + 8, 1, 4000);  // one in the new run, after it locked again

    io::bert_monitor mon({dsp::pn_pattern::pn15, std::nullopt});
    for (std::uint64_t k = 0; k < old_run; ++k) mon.ingest(test::encode_packet(bitstream_format::paq, b, k, 1, k, k));
    for (std::uint64_t n = 0; n < new_run; ++n) {
        if (n == 6) continue;  // lost in the network: counted, skipped by start sample
        const auto d = test::encode_packet(bitstream_format::paq, b, old_run + n, 1, n, n);
        mon.ingest(d);
        if (n == 3) mon.ingest(d);  // a real duplicate in the new run
    }
    const auto s = mon.stats(1);
    EXPECT_EQ(s.sender_restarts, 1u);
    EXPECT_EQ(s.duplicated, 1u);
    EXPECT_EQ(s.reordered, 0u);
    EXPECT_EQ(s.lost, 1u);
    EXPECT_EQ(s.packets_checked, old_run + new_run - 1);
    EXPECT_EQ(s.packets_skipped, 1u);
    // Both runs locked after 77 bits (degree 15 + sync 62): the checker started over.
    EXPECT_EQ(s.pn.bits_before_lock, 2 * 77u);
    EXPECT_EQ(s.pn.bits_checked + s.pn.bits_before_lock, (old_run + new_run - 1) * data_bits);
    EXPECT_EQ(s.pn.bit_errors, 2u);
    EXPECT_EQ(s.pn.resyncs, 0u);
    EXPECT_TRUE(s.pn.locked);
}

TEST(bert_monitor, restarts_are_told_from_duplicates_and_reordering_by_sequence_and_start_sample)
{
    auto batches = test::make_pn_batches(1, 12);
    const auto& b = batches[0];
    const auto datagram = [&](std::size_t packet, std::uint64_t seq, std::uint64_t start) {
        auto d = test::encode_packet(bitstream_format::paq, b, packet, 0, seq, seq);
        io::datagram_header h = io::decode_datagram(d).datagram.header;
        h.start_sample = start;
        std::vector<std::uint8_t> out(d.size());
        io::encode_datagram(bitstream_format::paq, h, 0, {b.packet_bits(packet, 0), dsp::packed_data_bytes}, out);
        return out;
    };
    const std::uint64_t L = waveform::L_pkt;
    {
        // The tester joined late (sequence 100000): sequence 0 from a window or more below is a
        // new run, whatever its start sample.
        io::bert_monitor mon({dsp::pn_pattern::pn15, std::nullopt});
        for (std::uint64_t k = 0; k < 4; ++k) mon.ingest(datagram(k, 100000 + k, 1'000'000 + k * L));
        mon.ingest(datagram(4, 0, 5'000'000));
        mon.ingest(datagram(5, 1, 5'000'000 + L));
        const auto s = mon.stats(0);
        EXPECT_EQ(s.sender_restarts, 1u);
        EXPECT_EQ(s.reordered + s.duplicated + s.lost, 0u);
        EXPECT_EQ(s.packets_checked, 6u);
    }
    {
        // The new run's first datagrams were lost: the next one's number is above the highest
        // but its start sample is not, which one run cannot do.
        io::bert_monitor mon({dsp::pn_pattern::pn15, std::nullopt});
        for (std::uint64_t k = 0; k < 5; ++k) mon.ingest(datagram(k, k, 50'000 + k * L));
        mon.ingest(datagram(5, 8, 900));
        const auto s = mon.stats(0);
        EXPECT_EQ(s.sender_restarts, 1u);
        EXPECT_EQ(s.lost, 0u);  // numbers 5 .. 7 belong to no run seen: not counted
        EXPECT_EQ(s.packets_skipped, 0u);  // no skip computed across the runs' start samples
    }
    {
        // One run: a late datagram (lower number, lower start) and a duplicate (same number,
        // same start) are no restart.
        io::bert_monitor mon({dsp::pn_pattern::pn15, std::nullopt});
        for (std::uint64_t k : {0u, 1u, 3u, 4u}) mon.ingest(datagram(k, k, 1000 + k * L));
        mon.ingest(datagram(2, 2, 1000 + 2 * L));
        mon.ingest(datagram(4, 4, 1000 + 4 * L));
        const auto s = mon.stats(0);
        EXPECT_EQ(s.sender_restarts, 0u);
        EXPECT_EQ(s.reordered, 1u);
        EXPECT_EQ(s.duplicated, 1u);
        // Same number, another start sample: another packet under a used number, a new run.
        mon.ingest(datagram(5, 4, 1000 + 9 * L));
        EXPECT_EQ(mon.stats(0).sender_restarts, 1u);
        // Lower number, higher start sample than the highest: a new run too.
        mon.ingest(datagram(6, 9, 1000 + 20 * L));
        mon.ingest(datagram(7, 5, 1000 + 30 * L));
        EXPECT_EQ(mon.stats(0).sender_restarts, 2u);
    }
}

TEST(bert_monitor, other_patterns_lock_and_count)
{
    for (const auto pattern : {dsp::pn_pattern::pn9, dsp::pn_pattern::pn23, dsp::pn_pattern::pn31}) {
        SCOPED_TRACE(std::string(dsp::to_string(pattern)));
        auto batches = test::make_pn_batches(1, 4, pattern);
        test::flip_bit(batches[0], 2, 0, 99);
        io::bert_monitor mon({pattern, std::nullopt});
        for (std::uint64_t k = 0; k < 4; ++k) mon.ingest(test::encode_packet(bitstream_format::paq, batches[0], k, 0, k, k));
        const auto s = mon.stats(0);
        EXPECT_TRUE(s.pn.locked);
        EXPECT_EQ(s.pn.bit_errors, 1u);
    }
}

}  // namespace

// ---------------------------------------------------------------------------------------
// Header versions (docs/BITSTREAM.md): version 2 carries the UTC of the packet's first sample;
// version 1 datagrams (64-byte header, no time) are still read, by the decoder and paq-bert.

namespace {

/// A version 2 datagram rewritten as version 1 would have sent it: no time, a 64-byte header
/// (or a longer one, which a version 1 receiver skips).
std::vector<std::uint8_t> as_version_1(const std::vector<std::uint8_t>& v2, std::size_t header = 64)
{
    std::vector<std::uint8_t> v1(header + (v2.size() - 72), 0);
    for (std::size_t i = 0; i < 64; ++i) v1[i] = v2[i];
    for (std::size_t i = 72; i < v2.size(); ++i) v1[header + i - 72] = v2[i];
    v1[4] = 1;
    v1[6] = static_cast<std::uint8_t>(header >> 8);
    v1[7] = static_cast<std::uint8_t>(header);
    return v1;
}

}  // namespace

TEST(bitstream, version_2_carries_the_utc_and_version_1_is_still_read)
{
    for (const auto format : {bitstream_format::paq, bitstream_format::dqe}) {
        for (const std::int64_t utc : {std::int64_t{1'795'603'660'123'456'789}, io::bitstream_unknown_utc_ns, std::int64_t{-5}}) {
            io::datagram_header h;
            h.stream_id = 3;
            h.sequence = 9;
            h.start_sample = 123'456;
            h.utc_ns = utc;
            std::vector<std::uint8_t> bits(768, 0x5A), d(io::datagram_bytes(format));
            ASSERT_EQ(io::encode_datagram(format, h, 0, bits, d), d.size());
            auto r = io::decode_datagram(d);
            ASSERT_TRUE(r.ok()) << r.error;
            EXPECT_EQ(r.datagram.version, 2);
            EXPECT_EQ(r.datagram.header_length, 72u);
            EXPECT_EQ(r.datagram.header, h);
            for (const std::size_t header : {std::size_t{64}, std::size_t{68}}) {
                const auto v1 = as_version_1(d, header);
                r = io::decode_datagram(v1);
                ASSERT_TRUE(r.ok()) << r.error;
                EXPECT_EQ(r.datagram.version, 1);
                EXPECT_EQ(r.datagram.header.utc_ns, io::bitstream_unknown_utc_ns);
                EXPECT_EQ(r.datagram.header.start_sample, 123'456u);
                EXPECT_EQ(std::vector<std::uint8_t>(r.datagram.bits.begin(), r.datagram.bits.end()), bits);
            }
        }
    }
    EXPECT_EQ(io::datagram_bytes(bitstream_format::paq), 840u);
    EXPECT_EQ(io::datagram_bytes(bitstream_format::dqe), 846u);
}

TEST(bitstream, paq_bert_counts_version_1_and_version_2_datagrams_alike)
{
    // One stream: datagrams 0..3 as version 2, 4..7 as version 1 (a receiver upgraded
    // mid-run would not do this, but a tester must take either): all checked, no error.
    io::bert_monitor monitor({});
    dsp::pn_generator gen(dsp::pn_pattern::pn15);
    for (std::uint64_t k = 0; k < 8; ++k) {
        std::vector<std::uint8_t> bits(768, 0);
        for (std::size_t i = 0; i < 6144; ++i) bits[i / 8] |= static_cast<std::uint8_t>(gen.next() << (7 - i % 8));
        io::datagram_header h;
        h.stream_id = 1;
        h.sequence = k;
        h.start_sample = 1000 + k * 12672;
        h.utc_ns = 1'795'603'660'000'000'000 + static_cast<std::int64_t>(k) * 614'400;
        std::vector<std::uint8_t> d(io::datagram_bytes(bitstream_format::paq));
        io::encode_datagram(bitstream_format::paq, h, 0, bits, d);
        monitor.ingest(k < 4 ? d : as_version_1(d), 1);
    }
    const auto st = monitor.stats(1);
    EXPECT_EQ(monitor.malformed_total(), 0u);
    EXPECT_EQ(st.datagrams, 8u);
    EXPECT_EQ(st.lost, 0u);
    EXPECT_EQ(st.packets_checked, 8u);
    EXPECT_EQ(st.pn.bit_errors, 0u);
    EXPECT_GT(st.pn.bits_checked, 6144u * 4);
}
