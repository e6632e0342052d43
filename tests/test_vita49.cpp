// Tests of io/vita49: the IF Data codec, its validation, and the sequence tracker; and of
// io/channel_pairing, which joins two VITA-49 streams' channels by their timestamps.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "dsp/types.hpp"
#include "io/channel_pairing.hpp"
#include "io/vita49.hpp"

namespace {

using paq::cf32;
using namespace paq::io::vita49;
constexpr float scale = paq::io::default_ci16_scale;

/// Samples whose components are whole ci16 counts / scale, so that encoding is exact.
[[nodiscard]] std::vector<cf32> ci16_samples(std::size_t n, std::uint64_t seed)
{
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<int> dist(-32767, 32767);
    std::vector<cf32> v(n);
    for (auto& s : v) {
        const int i = dist(rng);
        const int q = dist(rng);
        s = cf32(static_cast<float>(i) / scale, static_cast<float>(q) / scale);
    }
    return v;
}

[[nodiscard]] std::uint32_t word_at(const std::vector<std::byte>& b, std::size_t w)
{
    return (std::to_integer<std::uint32_t>(b[4 * w]) << 24) | (std::to_integer<std::uint32_t>(b[4 * w + 1]) << 16) |
           (std::to_integer<std::uint32_t>(b[4 * w + 2]) << 8) | std::to_integer<std::uint32_t>(b[4 * w + 3]);
}

void set_word(std::vector<std::byte>& b, std::size_t w, std::uint32_t v)
{
    for (int k = 0; k < 4; ++k) b[4 * w + static_cast<std::size_t>(k)] = static_cast<std::byte>((v >> (24 - 8 * k)) & 0xFFu);
}

[[nodiscard]] std::string parse_error(const std::vector<std::byte>& d)
{
    packet p;
    return parse_packet(d, p);
}

TEST(vita49, round_trip_every_combination_of_optional_fields)
{
    std::uint64_t seed = 1;
    for (int with_class = 0; with_class < 2; ++with_class) {
        for (int with_trailer = 0; with_trailer < 2; ++with_trailer) {
            for (int tsi = 0; tsi < 4; ++tsi) {
                for (int tsf = 0; tsf < 4; ++tsf) {
                    SCOPED_TRACE("class " + std::to_string(with_class) + " trailer " + std::to_string(with_trailer) +
                                 " tsi " + std::to_string(tsi) + " tsf " + std::to_string(tsf));
                    packet_fields f;
                    f.stream_id = 0xDEADBEEFu;
                    f.packet_count = static_cast<std::uint8_t>(seed % 16);
                    if (with_class) f.class_id_field = class_id{0x00123456u, 0xABCD, 0x0102};
                    f.tsi = static_cast<tsi_type>(tsi);
                    if (tsi != 0) f.integer_timestamp = 1700000000u + static_cast<std::uint32_t>(seed);
                    f.tsf = static_cast<tsf_type>(tsf);
                    if (tsf != 0) f.fractional_timestamp = 0x0123456789ABCDEFull + seed;
                    // Real-time picoseconds stay below one second (10^12).
                    if (tsf == 2) f.fractional_timestamp %= picoseconds_per_second;
                    if (with_trailer) f.trailer = 0x40000000u | static_cast<std::uint32_t>(seed);
                    const auto samples = ci16_samples(37 + seed, seed);
                    const auto bytes = encode_packet(f, samples, scale);
                    ASSERT_EQ(bytes.size(), packet_bytes(f, samples.size()));

                    const packet p = parse_packet(bytes);
                    EXPECT_EQ(p.type, packet_type::if_data);
                    EXPECT_FALSE(p.is_context());
                    EXPECT_EQ(p.fields, f);
                    ASSERT_EQ(p.num_samples(), samples.size());
                    std::vector<cf32> out(p.num_samples());
                    decode_payload(p, out.data(), scale);
                    EXPECT_EQ(out, samples);
                    ++seed;
                }
            }
        }
    }
}

TEST(vita49, header_layout_is_big_endian_with_i_first)
{
    packet_fields f;
    f.stream_id = 0x01020304u;
    f.packet_count = 9;
    f.tsi = tsi_type::utc;
    f.tsf = tsf_type::sample_count;
    f.integer_timestamp = 0x0A0B0C0Du;
    f.fractional_timestamp = 0x1112131415161718ull;
    f.trailer = 0xCAFEF00Du;
    const std::vector<cf32> one{cf32(1.0f / scale, -2.0f / scale)};
    const auto b = encode_packet(f, one, scale);
    ASSERT_EQ(b.size(), 4u * 7u);
    // type 1, C 0, T 1, TSI 01, TSF 01, count 9, size 7 words
    EXPECT_EQ(word_at(b, 0), (1u << 28) | (1u << 26) | (1u << 22) | (1u << 20) | (9u << 16) | 7u);
    EXPECT_EQ(std::to_integer<unsigned>(b[0]), 0x14u);  // most significant byte first
    EXPECT_EQ(word_at(b, 1), 0x01020304u);
    EXPECT_EQ(word_at(b, 2), 0x0A0B0C0Du);
    EXPECT_EQ(word_at(b, 3), 0x11121314u);
    EXPECT_EQ(word_at(b, 4), 0x15161718u);
    EXPECT_EQ(word_at(b, 5), 0x0001FFFEu);  // I = 1 in the upper half, Q = -2 in the lower
    EXPECT_EQ(word_at(b, 6), 0xCAFEF00Du);
}

TEST(vita49, encode_saturates_and_counts_clipped_components)
{
    packet_fields f;
    const std::vector<cf32> s{cf32(10.0f, -10.0f), cf32(0.5f, 0.25f)};
    std::vector<std::byte> out(packet_bytes(f, s.size()));
    std::size_t clipped = 0;
    ASSERT_EQ(encode_packet(f, s, scale, out, &clipped), out.size());
    EXPECT_EQ(clipped, 2u);
    const packet p = parse_packet(out);
    std::vector<cf32> back(2);
    decode_payload(p, back.data(), scale);
    EXPECT_EQ(back[0], cf32(32767.0f / scale, -32767.0f / scale));
    EXPECT_EQ(back[1], s[1]);
}

TEST(vita49, encode_rejects_bad_arguments)
{
    packet_fields f;
    const auto s = ci16_samples(4, 3);
    f.packet_count = 16;
    EXPECT_THROW((void)encode_packet(f, s), std::invalid_argument);
    f.packet_count = 0;
    f.class_id_field = class_id{0x1000000u, 0, 0};
    EXPECT_THROW((void)encode_packet(f, s), std::invalid_argument);
    f.class_id_field.reset();
    EXPECT_THROW((void)encode_packet(f, s, 0.0f), std::invalid_argument);
    std::vector<std::byte> small(packet_bytes(f, s.size()) - 1);
    EXPECT_THROW((void)encode_packet(f, s, scale, small), std::invalid_argument);
    const std::vector<cf32> too_many(max_samples(f) + 1);
    EXPECT_THROW((void)encode_packet(f, too_many), std::invalid_argument);
    const std::vector<cf32> most(max_samples(f));
    EXPECT_EQ(encode_packet(f, most).size(), 4 * max_packet_words);
}

TEST(vita49, malformed_datagrams_are_rejected_naming_the_problem)
{
    packet_fields f;
    f.tsf = tsf_type::sample_count;
    const auto good = encode_packet(f, ci16_samples(8, 5));  // 4 prefix words + 8 samples = 12 words
    ASSERT_TRUE(parse_error(good).empty());

    const std::vector<std::byte> tiny(good.begin(), good.begin() + 3);
    EXPECT_NE(parse_error(tiny).find("datagram of 3 bytes is shorter than the 4-byte header"), std::string::npos)
        << parse_error(tiny);

    auto truncated = good;
    truncated.resize(good.size() - 4);
    EXPECT_NE(parse_error(truncated).find("packet size field 12 words (48 bytes) does not match the datagram length 44"),
              std::string::npos)
        << parse_error(truncated);

    auto odd = good;
    odd.push_back(std::byte{0});
    odd.push_back(std::byte{0});
    EXPECT_NE(parse_error(odd).find("payload of 34 bytes is not a multiple of 4"), std::string::npos) << parse_error(odd);

    // A header that announces a fractional timestamp in a packet too short to hold it.
    std::vector<std::byte> short_fields(12);
    set_word(short_fields, 0, (1u << 28) | (1u << 20) | 3u);
    EXPECT_NE(parse_error(short_fields).find("packet size field 3 words is less than the 4 words of header fields"),
              std::string::npos)
        << parse_error(short_fields);
    EXPECT_NE(parse_error(short_fields).find("fractional timestamp"), std::string::npos);

    for (unsigned type : {0u, 2u, 3u, 6u, 7u, 8u, 15u}) {
        auto other = good;
        set_word(other, 0, (word_at(good, 0) & 0x0FFFFFFFu) | (type << 28));
        const std::string e = parse_error(other);
        EXPECT_NE(e.find("packet type " + std::to_string(type) + " ("), std::string::npos) << e;
        EXPECT_NE(e.find("is not supported"), std::string::npos) << e;
    }

    auto spectrum = good;
    set_word(spectrum, 0, word_at(good, 0) | (1u << 24));
    EXPECT_NE(parse_error(spectrum).find("bit S (spectrum data)"), std::string::npos) << parse_error(spectrum);

    packet_fields with_class;
    with_class.class_id_field = class_id{};
    auto padded = encode_packet(with_class, ci16_samples(2, 6));
    set_word(padded, 2, 5u << 27);
    EXPECT_NE(parse_error(padded).find("pad bit count 5"), std::string::npos) << parse_error(padded);

    EXPECT_THROW((void)parse_packet(std::span<const std::byte>(tiny)), decode_error);
}

TEST(vita49, context_packets_are_recognised)
{
    for (unsigned type : {4u, 5u}) {
        std::vector<std::byte> ctx(4 * 6);
        // C = 0, TSI = GPS, TSF = real time; one word of context fields after the timestamps.
        set_word(ctx, 0, (type << 28) | (2u << 22) | (2u << 20) | (3u << 16) | 6u);
        set_word(ctx, 1, 0x42u);
        set_word(ctx, 5, 0x80000000u);
        packet p;
        ASSERT_EQ(parse_packet(ctx, p), "");
        EXPECT_TRUE(p.is_context());
        EXPECT_EQ(static_cast<unsigned>(p.type), type);
        EXPECT_EQ(p.fields.stream_id, 0x42u);
        EXPECT_EQ(p.fields.packet_count, 3u);
        EXPECT_EQ(p.num_samples(), 0u);
    }
}

TEST(vita49, the_sample_rate_of_an_if_context_packet_is_read)
{
    // CIF0 with the reference point (1 word), the gain (1 word) and the sample rate
    // (bit 21: 64 bits, 20 fractional) after a GPS integer timestamp.
    std::vector<std::byte> ctx(4 * 8);
    set_word(ctx, 0, (4u << 28) | (1u << 22) | 8u);
    set_word(ctx, 1, 0x42u);
    set_word(ctx, 2, 1700000000u);
    set_word(ctx, 3, (1u << 30) | (1u << 23) | (1u << 21));
    set_word(ctx, 4, 0xdeadbeefu);  // reference point id
    set_word(ctx, 5, 0x00010002u);  // gain
    const auto raw = static_cast<std::uint64_t>(30.72e6 * 1048576.0);
    set_word(ctx, 6, static_cast<std::uint32_t>(raw >> 32));
    set_word(ctx, 7, static_cast<std::uint32_t>(raw));
    packet p;
    ASSERT_EQ(parse_packet(ctx, p), "");
    EXPECT_EQ(p.context_sample_rate_hz, 30.72e6);
    // The same CIF0 in a packet one word too short: an error naming the field.
    std::vector<std::byte> short_ctx(ctx.begin(), ctx.end() - 4);
    set_word(short_ctx, 0, (4u << 28) | (1u << 22) | 7u);
    EXPECT_NE(parse_error(short_ctx).find("sample rate field"), std::string::npos) << parse_error(short_ctx);
    // Extension context (type 5) layouts are the sender's own: no rate is read.
    set_word(ctx, 0, (5u << 28) | (1u << 22) | 8u);
    ASSERT_EQ(parse_packet(ctx, p), "");
    EXPECT_EQ(p.context_sample_rate_hz, 0.0);
}

// ---- sequence tracker ------------------------------------------------------------------------

[[nodiscard]] packet_fields seq(std::uint32_t stream, unsigned count, std::optional<std::uint64_t> sample_count = {})
{
    packet_fields f;
    f.stream_id = stream;
    f.packet_count = static_cast<std::uint8_t>(count % 16);
    if (sample_count) {
        f.tsf = tsf_type::sample_count;
        f.fractional_timestamp = *sample_count;
    }
    return f;
}

TEST(vita49_sequence, packet_count_wraps_at_16_without_loss)
{
    sequence_tracker t;
    EXPECT_TRUE(t.update(seq(1, 0), 100).first);
    for (unsigned k = 1; k < 40; ++k) {
        const auto r = t.update(seq(1, k), 100);
        EXPECT_EQ(r.packets_lost, 0u) << k;
        EXPECT_EQ(r.samples_lost, 0u) << k;
        EXPECT_TRUE(r.accept());
    }
}

TEST(vita49_sequence, loss_across_the_wrap_without_timestamps)
{
    sequence_tracker t;
    (void)t.update(seq(1, 14), 100);
    (void)t.update(seq(1, 15), 100);
    const auto r = t.update(seq(1, 18), 64);  // count 2: packets 16 and 17 (counts 0, 1) lost
    EXPECT_EQ(r.packets_lost, 2u);
    EXPECT_EQ(r.samples_lost, 200u);  // x the size of the last packet
    EXPECT_FALSE(r.samples_exact);
    const auto r2 = t.update(seq(1, 20), 100);  // one lost, estimated from the last (64-sample) packet
    EXPECT_EQ(r2.packets_lost, 1u);
    EXPECT_EQ(r2.samples_lost, 64u);
    // The modulo-16 ambiguity: 16 lost packets are invisible without timestamps.
    EXPECT_EQ(t.update(seq(1, 20 + 17), 100).packets_lost, 0u);
}

TEST(vita49_sequence, sample_count_timestamps_give_exact_losses)
{
    sequence_tracker t;
    (void)t.update(seq(7, 0, 1000), 100);
    auto r = t.update(seq(7, 1, 1100), 100);
    EXPECT_EQ(r.packets_lost, 0u);
    EXPECT_TRUE(r.samples_exact);
    // Packets of different sizes: 3 lost (counts 2, 3, 4) holding 100 + 37 + 100 samples.
    r = t.update(seq(7, 5, 1200 + 237), 50);
    EXPECT_TRUE(r.samples_exact);
    EXPECT_EQ(r.samples_lost, 237u);
    EXPECT_EQ(r.packets_lost, 3u);
    // 20 packets of 50 lost: the packet count alone would say 4.
    r = t.update(seq(7, 5 + 21, 1487 + 20 * 50), 50);
    EXPECT_EQ(r.samples_lost, 1000u);
    EXPECT_EQ(r.packets_lost, 20u);
    // 16 lost: same packet count as expected, but the timestamp tells.
    r = t.update(seq(7, 26 + 17, 2537 + 16 * 50), 50);
    EXPECT_EQ(r.samples_lost, 800u);
    EXPECT_EQ(r.packets_lost, 16u);
}

TEST(vita49_sequence, duplicates_and_reordered_packets_are_detected)
{
    sequence_tracker t;
    (void)t.update(seq(1, 0, 0), 10);
    (void)t.update(seq(1, 1, 10), 10);
    auto r = t.update(seq(1, 1, 10), 10);
    EXPECT_TRUE(r.duplicate);
    EXPECT_FALSE(r.accept());
    // 3 arrives before 2: 2 looks lost, then arrives late.
    r = t.update(seq(1, 3, 30), 10);
    EXPECT_EQ(r.samples_lost, 10u);
    EXPECT_EQ(r.packets_lost, 1u);
    r = t.update(seq(1, 2, 20), 10);
    EXPECT_TRUE(r.late);
    EXPECT_FALSE(r.accept());
    r = t.update(seq(1, 4, 40), 10);
    EXPECT_TRUE(r.accept());
    EXPECT_EQ(r.samples_lost, 0u);
    r = t.update(seq(1, 6, 100000), 10);  // a long outage: 99950 samples
    EXPECT_EQ(r.samples_lost, 99950u);
    // Far backwards (beyond the reorder window): the sender restarted its clock.
    r = t.update(seq(1, 0, 0), 10);
    EXPECT_TRUE(r.resync);
    EXPECT_TRUE(r.accept());
    EXPECT_EQ(t.update(seq(1, 1, 10), 10).samples_lost, 0u);
}

TEST(vita49_sequence, streams_are_tracked_separately)
{
    sequence_tracker t;
    (void)t.update(seq(1, 0, 0), 10);
    EXPECT_TRUE(t.update(seq(2, 9, 500), 10).first);
    EXPECT_EQ(t.update(seq(1, 1, 10), 10).samples_lost, 0u);
    EXPECT_EQ(t.update(seq(2, 11, 520), 10).samples_lost, 10u);
    EXPECT_EQ(t.num_streams(), 2u);
    t.reset();
    EXPECT_EQ(t.num_streams(), 0u);
}

TEST(vita49_sequence, integer_seconds_with_a_known_rate)
{
    // TSI set: the sample count restarts every second.
    auto at = [](unsigned count, std::uint32_t second, std::uint64_t in_second) {
        packet_fields f = seq(3, count, in_second);
        f.tsi = tsi_type::utc;
        f.integer_timestamp = second;
        return f;
    };
    sequence_tracker known(1000);
    (void)known.update(at(0, 10, 900), 50);
    EXPECT_EQ(known.update(at(1, 10, 950), 50).samples_lost, 0u);
    auto r = known.update(at(3, 11, 50), 50);  // 1000..1049 of second 10 -> 0..49 of 11 lost
    EXPECT_TRUE(r.samples_exact);
    EXPECT_EQ(r.samples_lost, 50u);
    EXPECT_EQ(r.packets_lost, 1u);

    sequence_tracker unknown;  // rate unknown: exact within a second, packet count across one
    (void)unknown.update(at(0, 10, 900), 50);
    r = unknown.update(at(2, 10, 1000), 50);
    EXPECT_TRUE(r.samples_exact);
    EXPECT_EQ(r.samples_lost, 50u);
    r = unknown.update(at(4, 11, 50), 50);
    EXPECT_FALSE(r.samples_exact);
    EXPECT_EQ(r.packets_lost, 1u);
    EXPECT_EQ(r.samples_lost, 50u);
    EXPECT_TRUE(unknown.update(at(5, 11, 100), 50).samples_exact);
}

// A hostile pair: two packets with sample-count timestamps 0 and 2^64 - 1,000,000
// made the tracker report a gap of ~2^64 samples (and the batcher read out of bounds).
TEST(vita49_sequence, a_timestamp_jump_near_2_64_is_a_discontinuity_not_a_loss)
{
    sequence_tracker t;
    (void)t.update(seq(1, 0, 0), 1000);
    auto r = t.update(seq(1, 1, ~std::uint64_t{0} - 1000000 + 1), 1000);
    EXPECT_TRUE(r.resync);
    EXPECT_TRUE(r.jumped_forward);
    EXPECT_TRUE(r.accept());
    EXPECT_EQ(r.samples_lost, 0u);
    EXPECT_EQ(r.packets_lost, 0u);
    // The tracker follows the new position: the next packets are exact again.
    r = t.update(seq(1, 2, ~std::uint64_t{0} - 1000000 + 1 + 1000), 1000);
    EXPECT_FALSE(r.resync);
    EXPECT_TRUE(r.samples_exact);
    EXPECT_EQ(r.samples_lost, 0u);
}

TEST(vita49_sequence, a_jump_to_just_below_2_64_and_packets_across_it_stay_bounded)
{
    // The second reproducer: a jump to 2^64 - 5000, then packets whose positions pass 2^64.
    sequence_tracker t;
    (void)t.update(seq(1, 0, 0), 1000);
    const std::uint64_t near_end = ~std::uint64_t{0} - 5000 + 1;
    EXPECT_TRUE(t.update(seq(1, 1, near_end), 1000).resync);
    std::uint64_t lost = 0;
    for (unsigned k = 2; k < 200; ++k) {
        const auto r = t.update(seq(1, k, near_end + (k - 1) * 1000ull), 1000);  // wraps past 2^64
        EXPECT_TRUE(r.accept());
        lost += r.samples_lost;
    }
    // Nothing near 2^64 is ever reported lost: at most a discontinuity where the count wrapped.
    EXPECT_LT(lost, 1000000u);
}

TEST(vita49_sequence, forward_jumps_are_bounded_by_max_jump_samples)
{
    sequence_tracker t(0, 100000);
    (void)t.update(seq(1, 0, 0), 100);
    auto r = t.update(seq(1, 2, 100 + 99900), 100);  // within the bound: a loss
    EXPECT_FALSE(r.resync);
    EXPECT_EQ(r.samples_lost, 99900u);
    r = t.update(seq(1, 3, 100000 + 100 + 100001), 100);  // beyond it: a discontinuity
    EXPECT_TRUE(r.resync);
    EXPECT_TRUE(r.jumped_forward);
    EXPECT_EQ(r.samples_lost, 0u);
    EXPECT_EQ(sequence_tracker::max_jump_for(20.625e6, 600.0), static_cast<std::uint64_t>(20.625e6 * 600.0));
    EXPECT_EQ(sequence_tracker::max_jump_for(1e300, 600.0), std::uint64_t{1} << 40);
    EXPECT_EQ(sequence_tracker::max_jump_for(std::nan(""), 600.0), sequence_tracker::default_max_jump_samples);
}

TEST(vita49_sequence, integer_seconds_times_the_rate_past_2_64_have_no_position)
{
    // TSI second 2^32 - 1 at 61.44 MS/s plus a count near 2^64: position overflows. The
    // packet falls back to the packet count (at most 15 packets lost), never a wrapped loss.
    auto at = [](unsigned count, std::uint32_t second, std::uint64_t in_second) {
        packet_fields f = seq(3, count, in_second);
        f.tsi = tsi_type::utc;
        f.integer_timestamp = second;
        return f;
    };
    sequence_tracker t(61440000);
    (void)t.update(at(0, 10, 0), 100);
    const auto r = t.update(at(1, 0xFFFFFFFFu, ~std::uint64_t{0} - 10), 100);
    EXPECT_FALSE(r.samples_exact);
    EXPECT_LE(r.samples_lost, 15u * 100u);
}

// ---- channel_pairer ---------------------------------------------------------------------------

/// What a pairer delivered: the sample times, and the gaps with the index they came before.
struct pair_log final : paq::io::paired_output {
    std::vector<paq::cf32x2> got;
    struct gap_at {
        std::size_t before = 0;
        std::uint64_t times = 0;
        bool lagging = false;
        friend bool operator==(const gap_at&, const gap_at&) = default;
    };
    std::vector<gap_at> gaps;
    void pairs(std::span<const paq::cf32x2> s) override { got.insert(got.end(), s.begin(), s.end()); }
    void gap(std::uint64_t times, bool lagging) override { gaps.push_back({got.size(), times, lagging}); }
};

/// Channel c's sample at timeline index i: distinct for every channel and index.
cf32 mark(int c, std::int64_t i) { return cf32(static_cast<float>(i), static_cast<float>(c + 1)); }
std::vector<cf32> block_of(int c, std::int64_t start, std::size_t n)
{
    std::vector<cf32> v(n);
    for (std::size_t k = 0; k < n; ++k) v[k] = mark(c, start + static_cast<std::int64_t>(k));
    return v;
}
/// Every delivered sample time holds both channels' samples of one timeline index.
void expect_aligned(const pair_log& log)
{
    for (const auto& p : log.got) {
        ASSERT_EQ(p.a.imag(), 1.0f);
        ASSERT_EQ(p.b.imag(), 2.0f);
        ASSERT_EQ(p.a.real(), p.b.real());
    }
}

TEST(channel_pairer, pairs_by_timeline_whatever_the_order_and_the_block_sizes)
{
    paq::io::channel_pairer p(100000);
    pair_log log;
    // Channel 2 starts 30 samples later and sends blocks of 70 against channel 1's 100, and
    // arrives in bursts behind channel 1.
    std::int64_t a = 1000, b = 1030;
    for (int round = 0; round < 20; ++round) {
        p.push(0, a, block_of(0, a, 100), log);
        a += 100;
        if (round % 3 == 2) {
            while (b < a - 50) {
                p.push(1, b, block_of(1, b, 70), log);
                b += 70;
            }
        }
    }
    expect_aligned(log);
    ASSERT_FALSE(log.got.empty());
    EXPECT_EQ(log.got.front().a.real(), 1030.0f);  // the timeline starts where both have begun
    EXPECT_TRUE(log.gaps.empty());
    EXPECT_EQ(p.counts().unpaired_samples[0], 30u);  // channel 1's before channel 2 began
    EXPECT_EQ(p.counts().unpaired_samples[1], 0u);
    EXPECT_EQ(static_cast<std::int64_t>(log.got.size()), std::min(a, b) - 1030);
    EXPECT_EQ(p.next_index(), std::min(a, b));
}

TEST(channel_pairer, a_loss_on_one_channel_drops_the_others_samples_there_as_a_gap)
{
    paq::io::channel_pairer p(100000);
    pair_log log;
    for (std::int64_t k = 0; k < 10; ++k) {
        if (k != 4 && k != 5) p.push(0, 100 * k, block_of(0, 100 * k, 100), log);  // channel 1 lost two
        if (k != 7) p.push(1, 100 * k, block_of(1, 100 * k, 100), log);            // channel 2 one
    }
    expect_aligned(log);
    EXPECT_EQ(log.got.size(), 700u);
    EXPECT_EQ(log.gaps, (std::vector<pair_log::gap_at>{{400, 200, false}, {500, 100, false}}));
    EXPECT_EQ(p.counts().unpaired_samples[0], 100u);  // channel 1's block 7
    EXPECT_EQ(p.counts().unpaired_samples[1], 200u);  // channel 2's blocks 4 and 5
    EXPECT_EQ(p.counts().lag_events, (std::array<std::uint64_t, 2>{0, 0}));
}

TEST(channel_pairer, a_silent_channel_is_named_counted_and_bounds_what_is_held)
{
    paq::io::channel_pairer p(1000);
    pair_log log;
    p.push(0, 0, block_of(0, 0, 100), log);
    p.push(1, 0, block_of(1, 0, 100), log);
    // Channel 2 falls silent for 5000 samples: channel 1's are given up beyond the bound, in
    // steps of half of it, one lag event for the whole silence.
    for (std::int64_t i = 100; i < 5100; i += 100) {
        p.push(0, i, block_of(0, i, 100), log);
        EXPECT_LE(p.buffered(0), 1000u);
    }
    EXPECT_EQ(p.counts().lag_events, (std::array<std::uint64_t, 2>{0, 1}));
    // It comes back: pairing resumes where its samples are; what it sends for times already
    // given up is dropped and counted.
    p.push(1, 4000, block_of(1, 4000, 1200), log);
    for (std::int64_t i = 5100; i < 5500; i += 100) {
        p.push(0, i, block_of(0, i, 100), log);
        p.push(1, i + 100, block_of(1, i + 100, 100), log);
    }
    expect_aligned(log);
    std::uint64_t lost = 0;
    for (const auto& g : log.gaps) {
        EXPECT_TRUE(g.lagging);
        lost += g.times;
    }
    EXPECT_EQ(100 + lost + (log.got.size() - 100), static_cast<std::uint64_t>(p.next_index()));
    EXPECT_EQ(p.next_index(), 5500);
    EXPECT_GT(p.counts().unpaired_samples[1], 0u);  // channel 2's samples of times given up
    EXPECT_EQ(p.counts().unpaired_samples[0], lost);
    EXPECT_EQ(p.counts().lag_events, (std::array<std::uint64_t, 2>{0, 1}));
    // reset: what is held is counted, the timeline starts over.
    p.push(1, 5600, block_of(1, 5600, 50), log);
    const auto before = p.counts().unpaired_samples[1];
    EXPECT_EQ(p.buffered(1), 150u);  // 5500 .. 5650: channel 1 ends at 5500
    p.reset();
    EXPECT_EQ(p.counts().unpaired_samples[1], before + 150);
    EXPECT_EQ(p.buffered(1), 0u);
    EXPECT_FALSE(p.started());
    EXPECT_THROW(p.push(2, 0, block_of(0, 0, 1), log), std::invalid_argument);
}

}  // namespace
