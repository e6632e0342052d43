// VITA-49 against a sender written here from the standard (ANSI/VITA 49.2), not with
// io/vita49's encoder: loss counting from sample-count and picosecond timestamps (a burst
// of 20 lost packets is 20), the 4-bit packet count's wrap without
// timestamps, time anchors (UTC and GPS), and the sample rate of IF Context packets.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <future>
#include <mutex>
#include <ostream>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "dsp/types.hpp"
#include "io/net_source.hpp"
#include "io/sample_format.hpp"
#include "io/vita49.hpp"

namespace paq::io {
// For gtest's messages (found by argument-dependent lookup, so in time_anchor's namespace).
std::ostream& operator<<(std::ostream& os, const time_anchor& a);
std::ostream& operator<<(std::ostream& os, const time_anchor& a)
{
    return os << "{sample " << a.sample_index << ", utc " << a.utc_ns << " ns}";
}
}  // namespace paq::io

namespace {

using paq::cf32;
using namespace paq::io;
using namespace std::chrono_literals;
__extension__ typedef unsigned __int128 u128;

constexpr float scale = default_ci16_scale;
constexpr std::uint64_t ps_per_s = 1'000'000'000'000;

// ---- a sender from the standard --------------------------------------------------------------

/// The fields of one IF Data packet as VITA 49.2 5.1 lays them out.
struct std_data_packet {
    std::uint32_t stream_id = 1;
    unsigned count = 0;             ///< packet count, 4 bits
    unsigned tsi = 0;               ///< 0 none, 1 UTC, 2 GPS, 3 other
    unsigned tsf = 0;               ///< 0 none, 1 sample count, 2 real time (ps), 3 free running
    std::uint32_t integer_ts = 0;
    std::uint64_t fractional_ts = 0;
    bool class_id = false;
    bool trailer = false;
    std::vector<std::pair<std::int16_t, std::int16_t>> iq;  ///< I, Q counts
};

void put_word(std::vector<std::byte>& b, std::uint32_t v)
{
    // Network byte order: the most significant byte first.
    b.push_back(static_cast<std::byte>(v >> 24));
    b.push_back(static_cast<std::byte>((v >> 16) & 0xFFu));
    b.push_back(static_cast<std::byte>((v >> 8) & 0xFFu));
    b.push_back(static_cast<std::byte>(v & 0xFFu));
}

/// Header word (5.1.1): packet type 31..28, C 27, T 26 (data), 25 and 24 zero (V49.0-compatible,
/// time data), TSI 23..22, TSF 21..20, packet count 19..16, packet size in words 15..0.
[[nodiscard]] std::uint32_t header_word(unsigned type, bool c, bool t, unsigned tsi, unsigned tsf, unsigned count,
                                        std::size_t words)
{
    return (type << 28) | (c ? 1u << 27 : 0u) | (t ? 1u << 26 : 0u) | ((tsi & 3u) << 22) | ((tsf & 3u) << 20) |
           ((count & 15u) << 16) | static_cast<std::uint32_t>(words);
}

[[nodiscard]] std::vector<std::byte> build(const std_data_packet& p)
{
    const std::size_t words = 2 + (p.class_id ? 2 : 0) + (p.tsi ? 1 : 0) + (p.tsf ? 2 : 0) + p.iq.size() + (p.trailer ? 1 : 0);
    std::vector<std::byte> b;
    put_word(b, header_word(1, p.class_id, p.trailer, p.tsi, p.tsf, p.count, words));
    put_word(b, p.stream_id);
    if (p.class_id) {
        put_word(b, 0x00FF5A5Au);  // pad bits 0, OUI
        put_word(b, 0x00010002u);  // information class, packet class
    }
    if (p.tsi) put_word(b, p.integer_ts);
    if (p.tsf) {
        put_word(b, static_cast<std::uint32_t>(p.fractional_ts >> 32));
        put_word(b, static_cast<std::uint32_t>(p.fractional_ts));
    }
    for (const auto& [i, q] : p.iq)
        put_word(b, (static_cast<std::uint32_t>(static_cast<std::uint16_t>(i)) << 16) | static_cast<std::uint16_t>(q));
    if (p.trailer) put_word(b, 0u);
    return b;
}

/// An IF Context packet (type 4): prologue, CIF0, then the fields CIF0 announces in the order
/// of its bits, 31 down (9.1). Fields other than the sample rate are filled with a pattern.
struct std_context_packet {
    std::uint32_t stream_id = 1;
    unsigned tsi = 0, tsf = 0;
    std::uint32_t integer_ts = 0;
    std::uint64_t fractional_ts = 0;
    std::uint32_t cif0 = 1u << 21;          ///< bit 21: sample rate
    std::int64_t sample_rate_q20 = 0;       ///< Hz x 2^20, two's complement
    std::size_t drop_words = 0;             ///< cut this many words off the end (malformed)
};

[[nodiscard]] std::int64_t q20(double hz) { return std::llround(hz * 1048576.0); }

[[nodiscard]] std::vector<std::byte> build(const std_context_packet& p)
{
    std::vector<std::byte> body;
    put_word(body, p.stream_id);
    if (p.tsi) put_word(body, p.integer_ts);
    if (p.tsf) {
        put_word(body, static_cast<std::uint32_t>(p.fractional_ts >> 32));
        put_word(body, static_cast<std::uint32_t>(p.fractional_ts));
    }
    put_word(body, p.cif0);
    for (unsigned b = 1; b <= 3; ++b)  // CIF1, CIF2, CIF3 words (their fields: none set)
        if (p.cif0 & (1u << b)) put_word(body, 0u);
    // Field sizes in words, bits 30 .. 22: reference point 1, bandwidth, IF reference, RF
    // reference, RF offset, IF band offset 2 each, reference level, gain, over-range 1 each.
    const unsigned size_of[9] = {1, 2, 2, 2, 2, 2, 1, 1, 1};
    for (unsigned b = 30; b >= 22; --b)
        if (p.cif0 & (1u << b))
            for (unsigned w = 0; w < size_of[30 - b]; ++w) put_word(body, 0x5A5A0000u | b);
    if (p.cif0 & (1u << 21)) {
        put_word(body, static_cast<std::uint32_t>(static_cast<std::uint64_t>(p.sample_rate_q20) >> 32));
        put_word(body, static_cast<std::uint32_t>(static_cast<std::uint64_t>(p.sample_rate_q20)));
    }
    body.resize(body.size() - 4 * p.drop_words);
    std::vector<std::byte> b;
    put_word(b, header_word(4, false, false, p.tsi, p.tsf, 0, 1 + body.size() / 4));
    b.insert(b.end(), body.begin(), body.end());
    return b;
}

/// A UDP sender on plain POSIX sockets.
class udp_tx {
public:
    explicit udp_tx(std::uint16_t port) : fd_(::socket(AF_INET, SOCK_DGRAM, 0))
    {
        dst_.sin_family = AF_INET;
        dst_.sin_port = htons(port);
        dst_.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    }
    ~udp_tx() { ::close(fd_); }
    udp_tx(const udp_tx&) = delete;
    udp_tx& operator=(const udp_tx&) = delete;
    void send(const std::vector<std::byte>& d)
    {
        ASSERT_EQ(::sendto(fd_, d.data(), d.size(), 0, reinterpret_cast<const sockaddr*>(&dst_), sizeof dst_),
                  static_cast<ssize_t>(d.size()));
        std::this_thread::sleep_for(300us);  // the receive buffer is never the one losing packets
    }

private:
    int fd_;
    sockaddr_in dst_{};
};

/// The stream a sender samples: sample n of the stream is taken at t0 + n / rate, with the
/// rate a fraction num / den Hz (so that 10^7 / 3 Hz is exact).
struct stream_clock {
    std::uint64_t rate_num = 1;
    std::uint64_t rate_den = 1;
    std::uint32_t t0_s = 0;       ///< integer second of sample 0
    std::uint64_t t0_ps = 0;      ///< and its picoseconds within it

    [[nodiscard]] double rate_hz() const { return static_cast<double>(rate_num) / static_cast<double>(rate_den); }
    /// Sample n's time in ps since the epoch of the integer seconds, rounded as a sender does.
    [[nodiscard]] u128 t_ps(std::uint64_t n) const
    {
        return u128{t0_s} * ps_per_s + t0_ps + (u128{n} * ps_per_s * rate_den + rate_num / 2) / rate_num;
    }
    /// TSI + real-time TSF of sample n.
    void stamp_ps(std_data_packet& p, unsigned tsi, std::uint64_t n) const
    {
        const u128 t = t_ps(n);
        p.tsi = tsi;
        p.tsf = 2;
        p.integer_ts = static_cast<std::uint32_t>(t / ps_per_s);
        p.fractional_ts = static_cast<std::uint64_t>(t % ps_per_s);
    }
    /// TSI + sample-count TSF of sample n (integer rates; t0_ps must be 0): the count restarts
    /// at each integer second. `first` is the count of sample 0 within second t0_s.
    void stamp_count(std_data_packet& p, unsigned tsi, std::uint64_t n, std::uint64_t first) const
    {
        const std::uint64_t rate = rate_num / rate_den;
        p.tsi = tsi;
        p.tsf = 1;
        p.integer_ts = static_cast<std::uint32_t>(t0_s + (first + n) / rate);
        p.fractional_ts = (first + n) % rate;
    }
    /// Sample n's UTC time in ns (t0 is UTC): its stamp in ps rounded to the nearest ns.
    [[nodiscard]] std::int64_t utc_ns(std::uint64_t n) const { return static_cast<std::int64_t>((t_ps(n) + 500) / 1000); }
};

[[nodiscard]] std::vector<std::pair<std::int16_t, std::int16_t>> random_iq(std::size_t n, std::mt19937_64& rng)
{
    std::uniform_int_distribution<int> dist(-32767, 32767);
    std::vector<std::pair<std::int16_t, std::int16_t>> v(n);
    for (auto& [i, q] : v) {
        i = static_cast<std::int16_t>(dist(rng));
        q = static_cast<std::int16_t>(dist(rng));
    }
    return v;
}

// ---- the receiving side ----------------------------------------------------------------------

struct gap_event {
    std::size_t at;  ///< samples received before the gap
    std::uint64_t lost;
    gap_reason reason;
    friend bool operator==(const gap_event&, const gap_event&) = default;
};

std::ostream& operator<<(std::ostream& os, const gap_event& g)
{
    return os << "{at " << g.at << ", lost " << g.lost << ", " << to_string(g.reason) << "}";
}

/// Records samples, gaps and time anchors; stops the source once it has `stop_at` samples.
class recording_sink final : public sample_sink {
public:
    recording_sink(sample_source& source, std::size_t stop_at) : source_(source), stop_at_(stop_at) {}
    void write(std::span<const cf32> s) override
    {
        std::lock_guard lock(m_);
        samples_.insert(samples_.end(), s.begin(), s.end());
        if (samples_.size() >= stop_at_) source_.stop();
    }
    void gap(std::uint64_t lost, gap_reason reason) override
    {
        std::lock_guard lock(m_);
        gaps_.push_back({samples_.size(), lost, reason});
    }
    void timestamp(const time_anchor& a) override
    {
        std::lock_guard lock(m_);
        // In band: the anchor names the first sample of the next write().
        EXPECT_EQ(a.sample_index, samples_.size());
        anchors_.push_back(a);
    }
    std::vector<cf32> samples()
    {
        std::lock_guard lock(m_);
        return samples_;
    }
    std::vector<gap_event> gaps()
    {
        std::lock_guard lock(m_);
        return gaps_;
    }
    std::vector<time_anchor> anchors()
    {
        std::lock_guard lock(m_);
        return anchors_;
    }

private:
    std::mutex m_;
    sample_source& source_;
    std::size_t stop_at_;
    std::vector<cf32> samples_;
    std::vector<gap_event> gaps_;
    std::vector<time_anchor> anchors_;
};

[[nodiscard]] vita49_source_config config(double rate_hz, std::uint32_t stream_id)
{
    vita49_source_config cfg;
    cfg.bind_address = "127.0.0.1";
    cfg.port = 0;
    cfg.sample_rate_hz = rate_hz;
    cfg.stream_id = stream_id;
    cfg.rcvbuf_bytes = 4 << 20;
    return cfg;
}

[[nodiscard]] std::uint16_t wait_port(const vita49_source& s)
{
    for (int k = 0; k < 1000 && s.local_port() == 0; ++k) std::this_thread::sleep_for(2ms);
    return s.local_port();
}

[[nodiscard]] std::vector<cf32> to_cf32(const std::vector<std::pair<std::int16_t, std::int16_t>>& iq)
{
    std::vector<cf32> v;
    v.reserve(iq.size());
    for (const auto& [i, q] : iq) v.emplace_back(static_cast<float>(i) / scale, static_cast<float>(q) / scale);
    return v;
}

/// What a run of the source saw.
struct run_result {
    std::vector<cf32> samples, expected;
    std::vector<gap_event> gaps;
    std::vector<time_anchor> anchors;
    std::uint64_t packets_lost = 0, samples_lost = 0, malformed = 0, count_mismatches = 0;
    std::optional<time_anchor> latest;
};

/// Sends packets 0 .. num_packets - 1 of `spp` samples, stamped by `stamp(packet, k)`, all but
/// those for which `lost(k)` holds, to a VITA-49 source at `rate_hz`, and records what it got.
template <class Stamp, class Lost>
[[nodiscard]] run_result run_stream(double rate_hz, std::size_t spp, std::size_t num_packets, std::uint64_t seed,
                                    Stamp stamp, Lost lost, const std::vector<std::vector<std::byte>>& extra = {})
{
    run_result out;
    std::mt19937_64 rng(seed);
    std::vector<std::vector<std::byte>> datagrams;
    for (std::size_t k = 0; k < num_packets; ++k) {
        std_data_packet p;
        p.stream_id = 0x49;
        p.count = static_cast<unsigned>(k % 16);
        p.class_id = (seed & 1) != 0;
        p.trailer = (seed & 2) != 0;
        p.iq = random_iq(spp, rng);
        stamp(p, k);
        if (lost(k)) continue;
        const auto s = to_cf32(p.iq);
        out.expected.insert(out.expected.end(), s.begin(), s.end());
        datagrams.push_back(build(p));
        if (k == 1)
            for (const auto& e : extra) datagrams.push_back(e);
    }
    vita49_source source(config(rate_hz, 0x49));
    recording_sink sink(source, out.expected.size());
    auto done = std::async(std::launch::async, [&] { source.run(sink); });
    const std::uint16_t port = wait_port(source);
    EXPECT_NE(port, 0);
    {
        udp_tx tx(port);
        for (const auto& d : datagrams) tx.send(d);
    }
    if (done.wait_for(5s) != std::future_status::ready) {
        ADD_FAILURE() << "the source did not deliver every sample sent";
        source.stop();
    }
    done.get();
    out.samples = sink.samples();
    out.gaps = sink.gaps();
    out.anchors = sink.anchors();
    out.packets_lost = source.counters().packets_lost.load();
    out.samples_lost = source.counters().samples_lost.load();
    out.malformed = source.counters().malformed.load();
    out.count_mismatches = source.vita_counters().count_mismatches.load();
    out.latest = source.latest_time_anchor();
    return out;
}

/// A stream without the sender's UTC is timed on the host's clock at arrival, as raw network
/// IQ is: one anchor a packet received, at its first sample, close to now and never going back
/// by more than a packet's jitter.
void expect_host_clock_anchors(const run_result& r, std::size_t packets, std::size_t spp)
{
    const auto now = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
    ASSERT_EQ(r.anchors.size(), packets);
    for (std::size_t j = 0; j < packets; ++j) {
        EXPECT_EQ(r.anchors[j].sample_index, j * spp);
        EXPECT_LT(std::abs(r.anchors[j].utc_ns - now), std::int64_t{60'000'000'000}) << "host clock, packet " << j;
    }
    ASSERT_TRUE(r.latest.has_value());
    EXPECT_EQ(*r.latest, r.anchors.back());
}

// ---- loss counting ---------------------------------------------------------------------------

// A burst of 20 lost packets with TSI + sample-count timestamps, straddling an integer second
// (the count restarts there): 20 packets, 20 x spp samples. Seeds and sizes beyond the defaults.
TEST(vita49_standard, a_20_packet_burst_with_sample_count_timestamps_is_20)
{
    struct param {
        std::uint64_t seed;
        std::size_t spp;
        std::uint64_t rate;
    };
    for (const param& c : {param{11, 250, 2'500'000}, param{2024, 1000, 20'625'000}, param{7, 64, 1'000'000}}) {
        SCOPED_TRACE("seed " + std::to_string(c.seed) + ", " + std::to_string(c.spp) + " samples a packet, " +
                     std::to_string(c.rate) + " Hz");
        const stream_clock clk{c.rate, 1, 1'700'000'123, 0};
        const std::uint64_t first = c.rate - 30 * c.spp - 17;  // the second turns inside the burst
        auto stamp = [&](std_data_packet& p, std::size_t k) { clk.stamp_count(p, 1, k * c.spp, first); };
        auto lost = [](std::size_t k) { return k >= 20 && k < 40; };
        const auto r = run_stream(static_cast<double>(c.rate), c.spp, 60, c.seed, stamp, lost);
        EXPECT_EQ(r.samples, r.expected);
        EXPECT_EQ(r.gaps, (std::vector<gap_event>{{20 * c.spp, 20 * c.spp, gap_reason::lost_packets}}));
        EXPECT_EQ(r.packets_lost, 20u);
        EXPECT_EQ(r.samples_lost, 20 * c.spp);
        EXPECT_EQ(r.count_mismatches, 0u);
    }
}

// The same with picosecond timestamps, at rates whose sample period is not a whole number of
// ps (30.72 MS/s: 32552.083 ps) or not a whole number of Hz (10^7 / 3: 300 ns exactly), with
// the burst across an integer second (the picoseconds restart there, the second carries).
TEST(vita49_standard, a_20_packet_burst_with_picosecond_timestamps_is_20_across_a_second)
{
    struct param {
        std::uint64_t seed;
        std::size_t spp;
        std::uint64_t num, den;
        unsigned tsi;
    };
    for (const param& c : {param{3, 256, 30'720'000, 1, 1}, param{17, 100, 10'000'000, 3, 2},
                           param{99, 333, 20'625'000, 1, 3}}) {
        const double rate = static_cast<double>(c.num) / static_cast<double>(c.den);
        SCOPED_TRACE("seed " + std::to_string(c.seed) + ", " + std::to_string(c.spp) + " samples a packet, " +
                     std::to_string(rate) + " Hz, TSI " + std::to_string(c.tsi));
        // Packet 25 (in the burst) holds the turn of the second.
        const std::uint64_t turn_ps = static_cast<std::uint64_t>(25.5 * static_cast<double>(c.spp) / rate * 1e12);
        const stream_clock clk{c.num, c.den, 1'400'000'000, ps_per_s - turn_ps};
        auto stamp = [&](std_data_packet& p, std::size_t k) { clk.stamp_ps(p, c.tsi, k * c.spp); };
        auto lost = [](std::size_t k) { return k >= 20 && k < 40; };
        std_data_packet probe;
        clk.stamp_ps(probe, c.tsi, 19 * c.spp);
        const std::uint32_t before = probe.integer_ts;
        clk.stamp_ps(probe, c.tsi, 40 * c.spp);
        ASSERT_EQ(probe.integer_ts, before + 1) << "the burst does not cross a second";

        const auto r = run_stream(rate, c.spp, 60, c.seed, stamp, lost);
        EXPECT_EQ(r.samples, r.expected);
        EXPECT_EQ(r.gaps, (std::vector<gap_event>{{20 * c.spp, 20 * c.spp, gap_reason::lost_packets}}));
        EXPECT_EQ(r.packets_lost, 20u);
        EXPECT_EQ(r.samples_lost, 20 * c.spp);
        EXPECT_EQ(r.count_mismatches, 0u);
        if (c.tsi == 3) {
            // TSI 'other' is not UTC: the host's clock at arrival, one anchor a packet.
            expect_host_clock_anchors(r, 40, c.spp);
            continue;
        }
        // One anchor a packet received, each at the sender's time of its first sample (GPS
        // seconds: 315964800 - 18 s later in Unix time).
        const std::int64_t to_unix_ns = c.tsi == 2 ? (315'964'800 - 18) * std::int64_t{1'000'000'000} : 0;
        ASSERT_EQ(r.anchors.size(), 40u);
        for (std::size_t j = 0; j < r.anchors.size(); ++j) {
            const std::size_t k = j < 20 ? j : j + 20;  // packet number
            EXPECT_EQ(r.anchors[j], (time_anchor{j * c.spp, clk.utc_ns(k * c.spp) + to_unix_ns})) << "packet " << k;
        }
        ASSERT_TRUE(r.latest.has_value());
        EXPECT_EQ(*r.latest, r.anchors.back());
    }
}

// Many random bursts at the tracker level, picosecond and sample-count timestamps alike:
// every burst's packets and samples exactly, whatever its length mod 16.
TEST(vita49_standard, random_bursts_are_counted_exactly_from_timestamps)
{
    for (std::uint64_t seed : {5ull, 41ull, 2718ull}) {
        std::mt19937_64 rng(seed);
        const std::size_t spp = 50 + rng() % 400;
        const stream_clock clk{30'720'000, 1, 1'600'000'000, rng() % ps_per_s};
        for (int kind = 0; kind < 2; ++kind) {
            SCOPED_TRACE("seed " + std::to_string(seed) + (kind == 0 ? " picoseconds" : " sample count"));
            vita49::sequence_tracker t(clk.rate_hz());
            std::vector<std::uint64_t> bursts(200);
            for (auto& b : bursts) b = rng() % 70;  // 0 .. 69 lost: every residue mod 16
            std::uint64_t k = 0;
            for (std::size_t i = 0; i < bursts.size(); ++i) {
                std_data_packet p;
                p.count = static_cast<unsigned>(k % 16);
                if (kind == 0) clk.stamp_ps(p, 2, k * spp);
                else clk.stamp_count(p, 1, k * spp, 30'720'000 - 1000);
                const auto r = t.update(vita49::parse_packet(build(p)).fields, spp);
                ASSERT_TRUE(r.accept());
                if (i > 0) {
                    ASSERT_TRUE(r.samples_exact) << "packet " << k;
                    EXPECT_FALSE(r.count_mismatch) << "packet " << k;
                    EXPECT_EQ(r.packets_lost, bursts[i - 1]) << "packet " << k;
                    EXPECT_EQ(r.samples_lost, bursts[i - 1] * spp) << "packet " << k;
                }
                k += 1 + bursts[i];
            }
        }
    }
}

// Without timestamps the 4-bit packet count is all there is: a burst of 16k + n lost packets
// looks like n (DAEMON.md says so). 20 lost -> 4 counted; 16 lost -> nothing seen.
TEST(vita49_standard, without_timestamps_the_count_wraps_as_documented)
{
    for (std::uint64_t seed : {23ull, 64ull}) {
        SCOPED_TRACE("seed " + std::to_string(seed));
        constexpr std::size_t spp = 128;
        auto none = [](std_data_packet&, std::size_t) {};
        auto lost20 = [](std::size_t k) { return k >= 10 && k < 30; };
        const auto r = run_stream(1e6, spp, 50, seed, none, lost20);
        EXPECT_EQ(r.samples, r.expected);
        EXPECT_EQ(r.gaps, (std::vector<gap_event>{{10 * spp, 4 * spp, gap_reason::lost_packets}}));
        EXPECT_EQ(r.packets_lost, 4u);
        expect_host_clock_anchors(r, 30, spp);  // no time of the sender's: the host's clock

        auto lost16 = [](std::size_t k) { return k >= 10 && k < 26; };
        const auto r16 = run_stream(1e6, spp, 40, seed + 1, none, lost16);
        EXPECT_EQ(r16.samples, r16.expected);
        EXPECT_TRUE(r16.gaps.empty());
        EXPECT_EQ(r16.packets_lost, 0u);
    }
    // Tracker level: 16k + n for several k and n.
    for (unsigned k16 = 0; k16 < 4; ++k16) {
        for (unsigned n = 0; n < 16; ++n) {
            vita49::sequence_tracker t;
            std_data_packet a, b;
            a.count = 5;
            b.count = (5 + 1 + 16 * k16 + n) % 16;
            (void)t.update(vita49::parse_packet(build(a)).fields, 10);
            const auto r = t.update(vita49::parse_packet(build(b)).fields, 10);
            EXPECT_EQ(r.packets_lost, n) << 16 * k16 + n << " lost";
            EXPECT_FALSE(r.samples_exact);
        }
    }
}

// The 4-bit count checks the timestamps: a sender whose count skips while its timestamps run
// on is counted (count_mismatches), and the timestamps are believed (no loss).
TEST(vita49_standard, a_packet_count_that_disagrees_with_the_timestamps_is_counted)
{
    constexpr std::size_t spp = 200;
    const stream_clock clk{5'000'000, 1, 1'700'000'000, 123'456'789'000};
    auto stamp = [&](std_data_packet& p, std::size_t k) {
        clk.stamp_ps(p, 1, k * spp);
        if (k >= 12) p.count = static_cast<unsigned>((k + 3) % 16);  // the count jumps by 3
    };
    const auto r = run_stream(5e6, spp, 30, 8, stamp, [](std::size_t) { return false; });
    EXPECT_EQ(r.samples, r.expected);
    EXPECT_TRUE(r.gaps.empty());
    EXPECT_EQ(r.packets_lost, 0u);
    EXPECT_EQ(r.count_mismatches, 1u);
}

// ---- time anchors ----------------------------------------------------------------------------

// The same instant stamped as UTC and as GPS seconds gives the same UTC anchor: GPS seconds
// count from 1980-01-06 and run 18 s ahead of UTC (since 2017-01-01).
TEST(vita49_standard, gps_and_utc_timestamps_give_the_same_utc_anchor)
{
    // 2024-01-01T00:00:00Z is Unix 1704067200, GPS 1388102418 (1704067200 - 315964800 + 18).
    EXPECT_EQ(1704067200 - vita49::gps_epoch_unix_s + vita49::gps_minus_utc_s, 1388102418);
    for (std::uint64_t seed : {1ull, 77ull, 31337ull}) {
        std::mt19937_64 rng(seed);
        const std::uint32_t utc_s = 1'704'067'200u + static_cast<std::uint32_t>(rng() % 100'000'000);
        const std::uint64_t ps = rng() % ps_per_s;
        const std::uint64_t count = rng() % 20'625'000;
        std_data_packet utc, gps;
        utc.tsi = 1;
        gps.tsi = 2;
        utc.integer_ts = utc_s;
        gps.integer_ts = static_cast<std::uint32_t>(utc_s - 315'964'800 + 18);
        for (unsigned tsf : {2u, 1u}) {
            SCOPED_TRACE("seed " + std::to_string(seed) + " TSF " + std::to_string(tsf));
            utc.tsf = gps.tsf = tsf;
            utc.fractional_ts = gps.fractional_ts = tsf == 2 ? ps : count;
            const auto a = vita49::first_sample_utc_ns(vita49::parse_packet(build(utc)).fields, 20.625e6);
            const auto b = vita49::first_sample_utc_ns(vita49::parse_packet(build(gps)).fields, 20.625e6);
            ASSERT_TRUE(a.has_value());
            ASSERT_TRUE(b.has_value());
            EXPECT_EQ(*a, *b);
            // picoseconds: rounded to the nearest ns; sample count: count / rate, to the ns.
            const std::int64_t below = tsf == 2 ? static_cast<std::int64_t>((ps + 500) / 1000)
                                                : static_cast<std::int64_t>((u128{count} * 1'000'000'000u * 2 + 20'625'000) /
                                                                            (2 * 20'625'000u));
            EXPECT_EQ(*a, std::int64_t{utc_s} * 1'000'000'000 + below);
        }
    }
    // No anchor: TSI alone (whole seconds only), TSI other, TSF free running, sample count
    // without a rate.
    std_data_packet p;
    p.tsi = 1;
    p.integer_ts = 1'704'067'200u;
    EXPECT_FALSE(vita49::first_sample_utc_ns(vita49::parse_packet(build(p)).fields, 1e6).has_value());
    p.tsf = 3;
    EXPECT_FALSE(vita49::first_sample_utc_ns(vita49::parse_packet(build(p)).fields, 1e6).has_value());
    p.tsf = 1;
    EXPECT_FALSE(vita49::first_sample_utc_ns(vita49::parse_packet(build(p)).fields, 0.0).has_value());
    p.tsi = 3;
    p.tsf = 2;
    EXPECT_FALSE(vita49::first_sample_utc_ns(vita49::parse_packet(build(p)).fields, 1e6).has_value());
}

// Through the source: a GPS-stamped stream anchors in UTC, after a gap too.
TEST(vita49_standard, the_source_anchors_gps_streams_in_utc)
{
    constexpr std::size_t spp = 300;
    // GPS 1388102418.99999 s: UTC 2024-01-01T00:00:00.99999Z; the second turns in packet 0.
    const stream_clock gps_clk{20'625'000, 1, 1'388'102'418, 999'990'000'000};
    auto stamp = [&](std_data_packet& p, std::size_t k) { gps_clk.stamp_ps(p, 2, k * spp); };
    const auto r = run_stream(20.625e6, spp, 12, 4, stamp, [](std::size_t k) { return k == 5 || k == 6; });
    EXPECT_EQ(r.samples, r.expected);
    EXPECT_EQ(r.gaps, (std::vector<gap_event>{{5 * spp, 2 * spp, gap_reason::lost_packets}}));
    ASSERT_EQ(r.anchors.size(), 10u);
    // 1388102418 GPS s is 2024-01-01T00:00:00Z = Unix 1704067200.
    EXPECT_EQ(r.anchors.front(), (time_anchor{0, 1'704'067'200'999'990'000}));
    const stream_clock utc_clk{20'625'000, 1, 1'704'067'200, 999'990'000'000};
    EXPECT_EQ(r.anchors[5], (time_anchor{5 * spp, utc_clk.utc_ns(7 * spp)}));  // the first after the gap
    EXPECT_EQ(r.latest, r.anchors.back());
}

// ---- context packets -------------------------------------------------------------------------

// An IF Context packet from the standard, with CIF1 and CIF2 words and the fields before the
// sample rate: the rate is read (exactly, with its 20 fractional bits), also a rate that is not
// a whole number of Hz.
TEST(vita49_standard, the_context_packets_sample_rate_is_read)
{
    for (double rate : {30.72e6, 20.625e6, 1e7 / 3.0, 1234.5}) {
        std_context_packet c;
        c.stream_id = 0x49;
        c.tsi = 2;
        c.tsf = 2;
        c.integer_ts = 1'388'102'418;
        c.fractional_ts = 5;
        c.cif0 = (1u << 30) | (1u << 29) | (1u << 27) | (1u << 23) | (1u << 21) | (1u << 15) | (1u << 2) | (1u << 1);
        c.sample_rate_q20 = q20(rate);
        const auto p = vita49::parse_packet(build(c));
        EXPECT_TRUE(p.is_context());
        EXPECT_EQ(p.context_sample_rate_hz, static_cast<double>(q20(rate)) / 1048576.0) << rate;
        EXPECT_NEAR(p.context_sample_rate_hz, rate, 1e-6) << rate;
    }
}

// Malformed context packets are refused with the field named (and counted by the source).
TEST(vita49_standard, malformed_context_packets_are_rejected_naming_the_field)
{
    auto error_of = [](const std_context_packet& c) {
        vita49::packet p;
        return vita49::parse_packet(build(c), p);
    };
    std_context_packet c;
    c.sample_rate_q20 = q20(1e6);
    ASSERT_EQ(error_of(c), "");

    auto negative = c;
    negative.sample_rate_q20 = -q20(1e6);
    EXPECT_NE(error_of(negative).find("sample rate field -1000000"), std::string::npos) << error_of(negative);
    EXPECT_NE(error_of(negative).find("is not positive"), std::string::npos);
    auto zero = c;
    zero.sample_rate_q20 = 0;
    EXPECT_NE(error_of(zero).find("sample rate field 0"), std::string::npos) << error_of(zero);

    auto cut = c;
    cut.cif0 |= (1u << 29) | (1u << 1);  // bandwidth and a CIF1 word before the rate
    cut.drop_words = 1;
    EXPECT_NE(error_of(cut).find("too short for the sample rate field"), std::string::npos) << error_of(cut);

    auto cif7 = c;
    cif7.cif0 |= 1u << 7;
    EXPECT_NE(error_of(cif7).find("CIF0 bit 7 (CIF7"), std::string::npos) << error_of(cif7);
    auto reserved = c;
    reserved.cif0 |= 1u << 5;
    EXPECT_NE(error_of(reserved).find("CIF0 reserved bits 4 .. 6"), std::string::npos) << error_of(reserved);

    auto bad_ps = c;
    bad_ps.tsi = 1;
    bad_ps.tsf = 2;
    bad_ps.fractional_ts = ps_per_s;
    EXPECT_NE(error_of(bad_ps).find("real-time fractional timestamp (TSF 2) 1000000000000 ps"), std::string::npos)
        << error_of(bad_ps);

    // Data packets too: picoseconds past the second.
    std_data_packet d;
    d.tsi = 1;
    d.tsf = 2;
    d.fractional_ts = ps_per_s + 7;
    d.iq = {{1, 2}};
    vita49::packet p;
    EXPECT_NE(vita49::parse_packet(build(d), p).find("1000000000007 ps is not below 10^12"), std::string::npos);

    // At the source: each counted as malformed, the stream goes on untouched.
    constexpr std::size_t spp = 64;
    const stream_clock clk{1'000'000, 1, 1'700'000'000, 0};
    auto stamp = [&](std_data_packet& q, std::size_t k) { clk.stamp_ps(q, 1, k * spp); };
    negative.stream_id = zero.stream_id = cut.stream_id = cif7.stream_id = reserved.stream_id = 0x49;
    const auto r = run_stream(1e6, spp, 10, 12, stamp, [](std::size_t) { return false; },
                              {build(negative), build(zero), build(cut), build(cif7), build(reserved), build(d)});
    EXPECT_EQ(r.samples, r.expected);
    EXPECT_TRUE(r.gaps.empty());  // the timestamps show nothing missing
    EXPECT_EQ(r.malformed, 6u);
}

// The configured rate and the stream's context: equal is fine; different is counted and
// logged with both values (the configured rate is kept); unset, the context's rate is taken.
TEST(vita49_standard, the_context_rate_is_taken_or_checked)
{
    std_context_packet ours, other;
    ours.stream_id = 0x49;
    ours.cif0 = (1u << 29) | (1u << 21) | (1u << 3);  // bandwidth, sample rate; a CIF3 word
    ours.sample_rate_q20 = q20(30.72e6);
    other = ours;
    other.stream_id = 0x50;
    other.sample_rate_q20 = q20(5e6);

    {  // sample_rate_hz 0: from the context (another stream's is not taken)
        auto cfg = config(0.0, 0x49);
        cfg.allow = {"127.0.0.1"};  // a rate from context packets needs the sender named
        cfg.context_timeout_s = 5.0;
        vita49_source source(cfg);
        auto rate = std::async(std::launch::async, [&source] { return source.sample_rate_hz(); });
        const std::uint16_t port = wait_port(source);
        ASSERT_NE(port, 0);
        udp_tx tx(port);
        tx.send(build(other));
        tx.send(build(ours));
        ASSERT_EQ(rate.wait_for(5s), std::future_status::ready);
        EXPECT_EQ(rate.get(), 30.72e6);
        EXPECT_EQ(source.vita_counters().context_packets.load(), 2u);
    }
    for (double configured : {30.72e6, 20e6}) {
        SCOPED_TRACE("configured " + std::to_string(configured));
        vita49_source source(config(configured, 0x49));
        recording_sink sink(source, 2 * 32);
        auto done = std::async(std::launch::async, [&] { source.run(sink); });
        const std::uint16_t port = wait_port(source);
        ASSERT_NE(port, 0);
        udp_tx tx(port);
        std::mt19937_64 rng(static_cast<std::uint64_t>(configured));
        std_data_packet d;
        d.stream_id = 0x49;
        d.iq = random_iq(32, rng);
        tx.send(build(d));      // locks the stream
        tx.send(build(other));  // another stream's context: not checked
        tx.send(build(ours));
        d.count = 1;
        tx.send(build(d));
        ASSERT_EQ(done.wait_for(5s), std::future_status::ready);
        done.get();
        const auto& v = source.vita_counters();
        EXPECT_EQ(v.context_packets.load(), 2u);
        EXPECT_EQ(v.context_rate_mismatches.load(), configured == 30.72e6 ? 0u : 1u);
        EXPECT_EQ(v.context_sample_rate_hz.load(), 30.72e6);
        EXPECT_EQ(source.sample_rate_hz(), configured);  // kept
    }
}

}  // namespace
