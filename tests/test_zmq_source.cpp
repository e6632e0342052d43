// Tests of io/zmq_source against senders built on libzmq here, as GNU Radio's gr-zeromq sinks
// send: PUSH -> PULL and PUB -> SUB, with and without GNU Radio's tag header
// (gr-zeromq/lib/tag_headers.cc: magic u16 0x5FF0, version u8 1, offset u64, ntags u64, tags).
#include <gtest/gtest.h>

#include "io/sample_format.hpp"
#include "io/zmq_source.hpp"

#include <zmq.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

using namespace paq::io;
using paq::cf32;
using namespace std::chrono_literals;

namespace {

struct gap_event {
    std::size_t at;
    std::uint64_t lost;
    gap_reason reason;
    friend bool operator==(const gap_event&, const gap_event&) = default;
};

std::ostream& operator<<(std::ostream& os, const gap_event& g)
{
    return os << "{at " << g.at << ", lost " << g.lost << ", " << to_string(g.reason) << "}";
}

class recording_sink final : public sample_sink {
public:
    void write(std::span<const cf32> s) override
    {
        std::lock_guard lock(m_);
        samples_.insert(samples_.end(), s.begin(), s.end());
        if (source_ && samples_.size() >= stop_at_) source_->stop();
        cv_.notify_all();
    }
    void gap(std::uint64_t lost, gap_reason r) override
    {
        std::lock_guard lock(m_);
        gaps_.push_back({samples_.size(), lost, r});
    }
    void timestamp(const time_anchor& a) override
    {
        std::lock_guard lock(m_);
        anchors_.push_back({a, samples_.size()});
    }
    void stop_source_at(sample_source& s, std::size_t n) { source_ = &s, stop_at_ = n; }
    std::vector<cf32> samples() { std::lock_guard lock(m_); return samples_; }
    std::vector<gap_event> gaps() { std::lock_guard lock(m_); return gaps_; }
    /// Each time anchor with the number of samples written before it.
    std::vector<std::pair<time_anchor, std::size_t>> anchors() { std::lock_guard lock(m_); return anchors_; }

private:
    std::mutex m_;
    std::condition_variable cv_;
    std::vector<cf32> samples_;
    std::vector<gap_event> gaps_;
    std::vector<std::pair<time_anchor, std::size_t>> anchors_;
    sample_source* source_ = nullptr;
    std::size_t stop_at_ = 0;
};

[[nodiscard]] std::vector<cf32> random_samples(std::size_t n, unsigned seed)
{
    std::mt19937 rng(seed);
    std::normal_distribution<float> d(0.0f, 0.5f);
    std::vector<cf32> s(n);
    for (auto& x : s) x = {d(rng), d(rng)};
    return s;
}

[[nodiscard]] std::vector<std::byte> cf32_bytes(std::span<const cf32> s)
{
    std::vector<std::byte> b(s.size() * 8);
    (void)encode(sample_format::cf32_le, s.data(), s.size(), b.data(), default_ci16_scale);
    return b;
}

/// GNU Radio's tag header with `ntags` tags (their bodies: junk bytes, paqd does not read them).
[[nodiscard]] std::vector<std::byte> tag_header(std::uint64_t offset, std::uint64_t ntags = 0)
{
    std::vector<std::byte> h{std::byte{0xf0}, std::byte{0x5f}, std::byte{0x01}};
    for (int i = 0; i < 8; ++i) h.push_back(static_cast<std::byte>(offset >> (8 * i)));
    for (int i = 0; i < 8; ++i) h.push_back(static_cast<std::byte>(ntags >> (8 * i)));
    for (std::uint64_t t = 0; t < ntags; ++t) h.insert(h.end(), 21, std::byte{0x02});
    return h;
}

/// A GNU Radio-like sink: PUSH, or XPUB (a PUB that also sees the subscription, so the test
/// sends only once the SUB is listening: PUB/SUB drops what is sent before).
class sender {
public:
    explicit sender(zmq_pattern p) : pub_(p == zmq_pattern::sub)
    {
        ctx_ = zmq_ctx_new();
        sock_ = zmq_socket(ctx_, pub_ ? ZMQ_XPUB : ZMQ_PUSH);
        const int linger = 1000;
        zmq_setsockopt(sock_, ZMQ_LINGER, &linger, sizeof linger);
        // A PUSH with no peer blocks: a source that never connects fails the send, not the run.
        const int send_timeout = 5000;
        zmq_setsockopt(sock_, ZMQ_SNDTIMEO, &send_timeout, sizeof send_timeout);
        EXPECT_EQ(zmq_bind(sock_, "tcp://127.0.0.1:*"), 0);
        char ep[256];
        std::size_t len = sizeof ep;
        zmq_getsockopt(sock_, ZMQ_LAST_ENDPOINT, ep, &len);
        endpoint = ep;
    }
    ~sender()
    {
        zmq_close(sock_);
        zmq_ctx_term(ctx_);
    }
    /// PUB: waits for the subscription (up to 5 s).
    bool wait_subscriber()
    {
        if (!pub_) return true;
        const int timeout = 5000;
        zmq_setsockopt(sock_, ZMQ_RCVTIMEO, &timeout, sizeof timeout);
        char buf[16];
        return zmq_recv(sock_, buf, sizeof buf, 0) >= 1 && buf[0] == 1;
    }
    void send(const std::vector<std::byte>& m) { ASSERT_EQ(zmq_send(sock_, m.data(), m.size(), 0), static_cast<int>(m.size())); }
    /// As a GNU Radio sink with a key sends: the key frame, then the items (more frames after
    /// them when `extra` is not empty: not what a sink sends).
    void send_keyed(const std::string& key, const std::vector<std::byte>& m, const std::vector<std::byte>& extra = {})
    {
        ASSERT_EQ(zmq_send(sock_, key.data(), key.size(), ZMQ_SNDMORE), static_cast<int>(key.size()));
        ASSERT_EQ(zmq_send(sock_, m.data(), m.size(), extra.empty() ? 0 : ZMQ_SNDMORE), static_cast<int>(m.size()));
        if (!extra.empty()) {
            ASSERT_EQ(zmq_send(sock_, extra.data(), extra.size(), 0), static_cast<int>(extra.size()));
        }
    }

    std::string endpoint;

private:
    bool pub_;
    void* ctx_ = nullptr;
    void* sock_ = nullptr;
};

struct run_in_background {
    run_in_background(sample_source& s, sample_sink& k) : t([&] { s.run(k); }) {}
    ~run_in_background() { if (t.joinable()) t.join(); }
    std::thread t;
};

[[nodiscard]] zmq_source_config config_for(const std::string& endpoint, zmq_pattern p, zmq_tags tags)
{
    zmq_source_config c;
    c.endpoint = endpoint;
    c.pattern = p;
    c.tags = tags;
    c.sample_rate_hz = 1e6;
    return c;
}

}  // namespace

TEST(zmq_tag_header, parses_gnuradio_header_and_rejects_others)
{
    const auto h = tag_header(0x0102030405060708ull, 3);
    const auto p = parse_gnuradio_tag_header(h);
    ASSERT_TRUE(p);
    EXPECT_EQ(p->offset, 0x0102030405060708ull);
    EXPECT_EQ(p->ntags, 3u);
    EXPECT_FALSE(parse_gnuradio_tag_header(std::span(h).first(18)));
    auto bad = h;
    bad[2] = std::byte{0x02};  // version 2
    EXPECT_FALSE(parse_gnuradio_tag_header(bad));
    bad = h;
    bad[0] = std::byte{0x5f};  // big-endian magic
    EXPECT_FALSE(parse_gnuradio_tag_header(bad));
}

TEST(zmq_source_config, bad_values_are_named)
{
    zmq_source_config c;
    c.sample_rate_hz = 1e6;
    EXPECT_TRUE(c.validate().empty());
    for (const char* e : {"", "tcp://host", "tcp://host:0", "tcp://host:70000", "udp://host:5", "tcp://:5555x"}) {
        c.endpoint = e;
        const auto errors = c.validate();
        ASSERT_EQ(errors.size(), 1u) << e;
        EXPECT_NE(errors[0].find("endpoint"), std::string::npos) << errors[0];
    }
    c.endpoint = "ipc:///tmp/x";
    c.high_water_mark = 0;
    c.max_message_bytes = 10;
    c.sample_rate_hz = 0;
    EXPECT_EQ(c.validate().size(), 3u);
    EXPECT_THROW(zmq_source{c}, std::invalid_argument);
}

class zmq_patterns : public ::testing::TestWithParam<zmq_pattern> {};

TEST_P(zmq_patterns, delivers_exactly_the_samples_sent_without_tags)
{
    sender tx(GetParam());
    zmq_source source(config_for(tx.endpoint, GetParam(), zmq_tags::none));
    EXPECT_NE(source.describe().find("loss undetectable"), std::string::npos);
    recording_sink sink;
    const auto sent = random_samples(10 * 183, 1);
    const auto bytes = cf32_bytes(sent);
    sink.stop_source_at(source, sent.size());
    run_in_background run(source, sink);
    ASSERT_TRUE(tx.wait_subscriber());
    for (std::size_t k = 0; k < 10; ++k)
        tx.send(std::vector<std::byte>(bytes.begin() + k * 1464, bytes.begin() + (k + 1) * 1464));
    run.t.join();
    EXPECT_EQ(sink.samples(), sent);
    EXPECT_TRUE(sink.gaps().empty());
    EXPECT_EQ(source.counters().packets.load(), 10u);
}

// A GNU Radio sink with a key sends [key][items]. With source.zmq.key set only that key's
// messages are taken: another key (a SUB's subscription is a prefix, so "paqx" reaches it),
// or none (PULL), is counted and dropped without a gap; a third frame is malformed (a gap).
// Without a key set, the key frame is not taken for items.
TEST_P(zmq_patterns, a_key_selects_the_messages_and_its_frame_is_never_samples)
{
    const bool sub = GetParam() == zmq_pattern::sub;
    const auto sent = random_samples(4 * 100, 7);
    const auto bytes = cf32_bytes(sent);
    auto part = [&](std::size_t k) { return std::vector<std::byte>(bytes.begin() + k * 800, bytes.begin() + (k + 1) * 800); };
    {
        sender tx(GetParam());
        auto cfg = config_for(tx.endpoint, GetParam(), zmq_tags::none);
        cfg.key = "paq";
        zmq_source source(cfg);
        EXPECT_NE(source.describe().find("key 'paq'"), std::string::npos) << source.describe();
        recording_sink sink;
        sink.stop_source_at(source, 200);
        run_in_background run(source, sink);
        ASSERT_TRUE(tx.wait_subscriber());
        tx.send_keyed("paq", part(0));
        tx.send_keyed("paqx", part(1));              // another key
        if (!sub) tx.send(part(2));                  // no key (a SUB never gets it: not subscribed)
        tx.send_keyed("paq", part(2), {std::byte{1}}); // three frames
        tx.send_keyed("paq", part(3));
        run.t.join();
        std::vector<cf32> expected(sent.begin(), sent.begin() + 100);
        expected.insert(expected.end(), sent.begin() + 300, sent.end());
        EXPECT_EQ(sink.samples(), expected);
        EXPECT_EQ(source.zmq_counts().key_mismatches.load(), sub ? 1u : 2u);
        EXPECT_EQ(source.counters().malformed.load(), 1u);
        EXPECT_EQ(sink.gaps(), (std::vector<gap_event>{{100, 0, gap_reason::source_error}}));
    }
    {
        sender tx(GetParam());
        zmq_source source(config_for(tx.endpoint, GetParam(), zmq_tags::none));
        recording_sink sink;
        sink.stop_source_at(source, 200);
        run_in_background run(source, sink);
        ASSERT_TRUE(tx.wait_subscriber());
        tx.send_keyed("any-key", part(0));
        tx.send(part(1));
        run.t.join();
        EXPECT_EQ(sink.samples(), std::vector<cf32>(sent.begin(), sent.begin() + 200));
        EXPECT_EQ(source.zmq_counts().key_mismatches.load(), 0u);
        EXPECT_EQ(source.counters().malformed.load(), 0u);
    }
}

TEST_P(zmq_patterns, tag_header_offsets_count_lost_samples_exactly)
{
    sender tx(GetParam());
    zmq_source source(config_for(tx.endpoint, GetParam(), zmq_tags::gnuradio));
    recording_sink sink;
    const auto all = random_samples(10 * 100, 2);
    const auto bytes = cf32_bytes(all);
    std::vector<cf32> expected;
    for (std::size_t k = 0; k < 10; ++k)
        if (k != 3 && k != 4) expected.insert(expected.end(), all.begin() + k * 100, all.begin() + (k + 1) * 100);
    sink.stop_source_at(source, expected.size());
    run_in_background run(source, sink);
    ASSERT_TRUE(tx.wait_subscriber());
    for (std::size_t k = 0; k < 10; ++k) {
        if (k == 3 || k == 4) continue;  // lost at the high-water mark
        auto m = tag_header(k * 100);
        m.insert(m.end(), bytes.begin() + k * 800, bytes.begin() + (k + 1) * 800);
        tx.send(m);
    }
    run.t.join();
    EXPECT_EQ(sink.samples(), expected);
    EXPECT_EQ(sink.gaps(), (std::vector<gap_event>{{300, 200, gap_reason::lost_packets}}));
    EXPECT_EQ(source.counters().samples_lost.load(), 200u);
}

INSTANTIATE_TEST_SUITE_P(gnuradio, zmq_patterns, ::testing::Values(zmq_pattern::sub, zmq_pattern::pull));

TEST(zmq_source, hostile_messages_are_counted_and_dropped)
{
    sender tx(zmq_pattern::pull);
    zmq_source source(config_for(tx.endpoint, zmq_pattern::pull, zmq_tags::gnuradio));
    recording_sink sink;
    const auto s = random_samples(300, 3);
    const auto bytes = cf32_bytes(s);
    sink.stop_source_at(source, 200);
    run_in_background run(source, sink);
    auto good = [&](std::uint64_t offset, std::size_t k) {
        auto m = tag_header(offset);
        m.insert(m.end(), bytes.begin() + k * 800, bytes.begin() + (k + 1) * 800);
        return m;
    };
    tx.send(good(0, 0));
    tx.send(std::vector<std::byte>(5, std::byte{0xf0}));           // shorter than the header
    auto wrong_magic = good(100, 1);
    wrong_magic[0] = std::byte{0};
    tx.send(wrong_magic);                                          // not GNU Radio's header
    auto with_tags = tag_header(100, 2);
    with_tags.insert(with_tags.end(), bytes.begin(), bytes.begin() + 800);
    tx.send(with_tags);                                            // tags paqd cannot skip
    auto partial = good(100, 1);
    partial.pop_back();
    tx.send(partial);                                              // not whole samples
    tx.send(good(100, 1));
    run.t.join();
    EXPECT_EQ(sink.samples(), std::vector<cf32>(s.begin(), s.begin() + 200));
    EXPECT_EQ(source.counters().malformed.load(), 4u);
    EXPECT_EQ(source.zmq_counts().messages_with_tags.load(), 1u);
    EXPECT_EQ(sink.gaps().size(), 4u);
    for (const auto& g : sink.gaps()) EXPECT_EQ(g, (gap_event{100, 0, gap_reason::source_error}));
}

TEST_P(zmq_patterns, a_message_over_the_limit_costs_a_reconnection_not_the_source)
{
    // libzmq drops the connection on a message over ZMQ_MAXMSGSIZE (a protocol error) and does
    // not reconnect by itself: the source must connect again, count it, mark the gap, and go on.
    const auto p = GetParam();
    sender tx(p);
    auto cfg = config_for(tx.endpoint, p, zmq_tags::none);
    cfg.max_message_bytes = 1024;
    zmq_source source(cfg);
    recording_sink sink;
    const auto s = random_samples(64, 11);
    const auto good = cf32_bytes(s);  // 512 bytes
    sink.stop_source_at(source, 3 * s.size());
    run_in_background run(source, sink);
    ASSERT_TRUE(tx.wait_subscriber());
    tx.send(good);
    for (int i = 0; i < 500 && sink.samples().size() < s.size(); ++i) std::this_thread::sleep_for(10ms);
    ASSERT_EQ(sink.samples().size(), s.size());
    tx.send(std::vector<std::byte>(4096, std::byte{0}));  // over max_message_bytes
    // Within 1 s of the refused message the source is connected again: good messages are
    // sent until two more have arrived (PUB drops what it sends before the new subscription).
    const auto refused_at = std::chrono::steady_clock::now();
    for (int i = 0; i < 500 && sink.samples().size() < 3 * s.size(); ++i) {
        if (i % 5 == 0) tx.send(good);
        std::this_thread::sleep_for(10ms);
    }
    run.t.join();
    EXPECT_LE(std::chrono::steady_clock::now() - refused_at, 5s);
    ASSERT_EQ(sink.samples().size(), 3 * s.size());
    EXPECT_GE(source.counters().reconnects.load(), 1u);
    ASSERT_FALSE(sink.gaps().empty());
    EXPECT_EQ(sink.gaps().front(), (gap_event{s.size(), 0, gap_reason::reconnect}));
}

TEST(zmq_source_config, the_queue_is_bounded_in_bytes)
{
    // The high-water mark applied never lets the queue hold more than max_queue_mib.
    zmq_source_config c;
    c.sample_rate_hz = 1e6;
    EXPECT_EQ(c.high_water_mark, 1000);
    EXPECT_EQ(c.max_message_bytes, 16 << 20);
    EXPECT_EQ(c.max_queue_mib, 256);
    EXPECT_EQ(c.effective_high_water_mark(), 16) << "256 MiB of 16 MiB messages";
    c.max_message_bytes = 1024;
    EXPECT_EQ(c.effective_high_water_mark(), 1000) << "the configured mark, below the byte bound";
    c.max_message_bytes = 256 << 20;
    c.max_queue_mib = 1;
    EXPECT_EQ(c.effective_high_water_mark(), 1) << "at least one message";
    c.max_queue_mib = 0;
    ASSERT_EQ(c.validate().size(), 1u);
    EXPECT_NE(c.validate()[0].find("max_queue_mib"), std::string::npos);
}

TEST(zmq_source, tag_header_while_tags_none_is_flagged)
{
    sender tx(zmq_pattern::pull);
    zmq_source source(config_for(tx.endpoint, zmq_pattern::pull, zmq_tags::none));
    recording_sink sink;
    const auto s = random_samples(100, 4);
    const auto bytes = cf32_bytes(s);
    sink.stop_source_at(source, 100);
    run_in_background run(source, sink);
    auto m = tag_header(0);
    m.insert(m.end(), bytes.begin(), bytes.end());
    tx.send(m);  // 19 + 800 bytes: not whole samples either
    tx.send(bytes);
    run.t.join();
    EXPECT_EQ(source.zmq_counts().tag_header_suspected.load(), 1u);
    EXPECT_EQ(source.counters().malformed.load(), 1u);
    EXPECT_EQ(sink.samples(), s);
}

// An offset far ahead added up to 2^64 to samples_lost (wrapping the counter)
// and sent a gap that size; an offset near 2^64 wrapped the next expected offset. Now a jump
// beyond zmq_max_offset_jump, like one back, is a counted resync (gap(0, discontinuity)); a
// jump of exactly the bound is still a loss; the expected offset saturates instead of wrapping.
TEST(zmq_source, offset_jumps_beyond_the_bound_resync_instead_of_counting_2_to_the_64)
{
    sender tx(zmq_pattern::pull);
    zmq_source source(config_for(tx.endpoint, zmq_pattern::pull, zmq_tags::gnuradio));
    recording_sink sink;
    const auto s = random_samples(8 * 100, 5);
    const auto bytes = cf32_bytes(s);
    sink.stop_source_at(source, s.size());
    run_in_background run(source, sink);
    const std::uint64_t bound = zmq_max_offset_jump;
    const std::vector<std::uint64_t> offsets{0,   100, std::uint64_t{1} << 63, 200, 300 + bound, UINT64_MAX - 50,
                                             0,   100};
    for (std::size_t k = 0; k < offsets.size(); ++k) {
        auto m = tag_header(offsets[k]);
        m.insert(m.end(), bytes.begin() + k * 800, bytes.begin() + (k + 1) * 800);
        tx.send(m);
    }
    run.t.join();
    EXPECT_EQ(sink.samples(), s);
    EXPECT_EQ(sink.gaps(), (std::vector<gap_event>{{200, 0, gap_reason::discontinuity},    // 2^63: far ahead
                                                   {300, 0, gap_reason::discontinuity},    // back to 200
                                                   {400, bound, gap_reason::lost_packets}, // exactly the bound
                                                   {500, 0, gap_reason::discontinuity},    // near 2^64
                                                   {600, 0, gap_reason::discontinuity}})); // back to 0
    EXPECT_EQ(source.zmq_counts().resyncs.load(), 4u);
    EXPECT_EQ(source.counters().samples_lost.load(), bound);
    EXPECT_EQ(source.counters().packets_lost.load(), 1u);
}

// ZeroMQ IQ carries no time (GNU Radio's tag header gives an offset, not a
// time), so each message is anchored on the host's clock at arrival, less its duration at the
// nominal rate: close to CLOCK_REALTIME at the test, one anchor per message naming its first
// sample, non-decreasing (the messages, 100 us of signal, come >= 1 ms apart).
TEST_P(zmq_patterns, messages_get_host_clock_time_close_to_now_and_monotonic)
{
    const auto wall_ns = [] {
        return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
    };
    sender tx(GetParam());
    zmq_source source(config_for(tx.endpoint, GetParam(), zmq_tags::none));  // 1 MS/s
    recording_sink sink;
    constexpr std::size_t per = 100, messages = 20;
    const auto sent = random_samples(messages * per, 3);
    const auto bytes = cf32_bytes(sent);
    sink.stop_source_at(source, sent.size());
    EXPECT_FALSE(source.latest_time_anchor());
    const std::int64_t before = wall_ns();
    run_in_background run(source, sink);
    ASSERT_TRUE(tx.wait_subscriber());
    for (std::size_t k = 0; k < messages; ++k) {
        tx.send(std::vector<std::byte>(bytes.begin() + k * per * 8, bytes.begin() + (k + 1) * per * 8));
        std::this_thread::sleep_for(1ms);
    }
    run.t.join();
    const std::int64_t after = wall_ns();
    ASSERT_EQ(sink.samples(), sent);
    const auto anchors = sink.anchors();
    ASSERT_EQ(anchors.size(), messages);
    for (std::size_t k = 0; k < anchors.size(); ++k) {
        const auto& [a, written_before] = anchors[k];
        EXPECT_EQ(a.sample_index, k * per) << "the anchor names the first sample of the message's write";
        EXPECT_EQ(written_before, k * per);
        // Arrival less the message's 100 us, within the test's run (2 s of slack before it).
        EXPECT_GT(a.utc_ns, before - 2'000'000'000) << k;
        EXPECT_LE(a.utc_ns, after - 100'000) << k;
        if (k > 0) {
            EXPECT_GE(a.utc_ns, anchors[k - 1].first.utc_ns) << k;
        }
    }
    ASSERT_TRUE(source.latest_time_anchor());
    EXPECT_EQ(*source.latest_time_anchor(), anchors.back().first);
}
