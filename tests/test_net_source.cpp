// Tests of io/net_source: TCP, UDP and VITA-49 sources over loopback, on ephemeral ports.
// Each test sends known samples with plain Asio sockets and compares what the sink got.
#include <gtest/gtest.h>

// Before Boost: Boost 1.74's Asio needs <utility> under C++20 (see io/net_source.cpp).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <future>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <ostream>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <boost/asio.hpp>
#include <unistd.h>

#include "dsp/types.hpp"
#include "io/net_source.hpp"
#include "io/sample_file.hpp"
#include "io/sample_format.hpp"
#include "io/vita49.hpp"

namespace {

namespace asio = boost::asio;
using asio::ip::tcp;
using asio::ip::udp;
using paq::cf32;
using namespace paq::io;
using namespace std::chrono_literals;

constexpr float scale = default_ci16_scale;
constexpr double rate_hz = 1e6;
const auto loopback = asio::ip::make_address("127.0.0.1");

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

[[nodiscard]] std::vector<cf32> cf32_samples(std::size_t n, std::uint64_t seed)
{
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
    std::vector<cf32> v(n);
    for (auto& s : v) {
        const float i = dist(rng);
        const float q = dist(rng);
        s = cf32(i, q);
    }
    return v;
}

[[nodiscard]] std::vector<std::byte> encode_le(sample_format f, std::span<const cf32> s)
{
    std::vector<std::byte> b(s.size() * bytes_per_sample(f));
    (void)encode(f, s.data(), s.size(), b.data(), scale);
    return b;
}

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

/// Records everything; stops the source once it has `stop_at` samples (0: never).
class recording_sink final : public sample_sink {
public:
    void write(std::span<const cf32> s) override
    {
        std::lock_guard lock(m_);
        samples_.insert(samples_.end(), s.begin(), s.end());
        if (stop_at_ > 0 && samples_.size() >= stop_at_ && source_ != nullptr) source_->stop();
        cv_.notify_all();
    }
    /// ci16 samples arrive at their width: counted, then converted (to_cf32) into
    /// samples() by the base sink.
    void write_ci16(std::span<const paq::ci16> s, float counts_per_unit) override
    {
        {
            std::lock_guard lock(m_);
            narrow_ += s.size();
            last_scale_ = counts_per_unit;
        }
        sample_sink::write_ci16(s, counts_per_unit);
    }
    /// Two channels' sample times: kept interleaved (channel 1, channel 2, ...) in samples(),
    /// as they were sent, and counted.
    void write_x2(std::span<const paq::cf32x2> s) override
    {
        std::lock_guard lock(m_);
        for (const auto& v : s) {
            samples_.push_back(v.a);
            samples_.push_back(v.b);
        }
        pairs_ += s.size();
        if (stop_at_ > 0 && samples_.size() >= stop_at_ && source_ != nullptr) source_->stop();
        cv_.notify_all();
    }
    std::size_t pairs()
    {
        std::lock_guard lock(m_);
        return pairs_;
    }
    void gap(std::uint64_t lost, gap_reason reason) override
    {
        std::lock_guard lock(m_);
        gaps_.push_back({samples_.size(), lost, reason});
    }
    /// Samples that came through write_ci16, and the scale of the last of them.
    std::size_t narrow_samples()
    {
        std::lock_guard lock(m_);
        return narrow_;
    }
    float last_scale()
    {
        std::lock_guard lock(m_);
        return last_scale_;
    }
    void stop_source_at(sample_source& src, std::size_t n)
    {
        source_ = &src;
        stop_at_ = n;
    }
    /// Waits until at least n samples arrived; false on timeout.
    bool wait_for(std::size_t n, std::chrono::milliseconds timeout = 5000ms)
    {
        std::unique_lock lock(m_);
        return cv_.wait_for(lock, timeout, [&] { return samples_.size() >= n; });
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

private:
    std::mutex m_;
    std::size_t pairs_ = 0;
    std::condition_variable cv_;
    std::vector<cf32> samples_;
    std::vector<gap_event> gaps_;
    sample_source* source_ = nullptr;
    std::size_t stop_at_ = 0;
    std::size_t narrow_ = 0;
    float last_scale_ = 0.0f;
};

/// Runs source.run(sink) on its own thread.
class background_run {
public:
    background_run(sample_source& source, sample_sink& sink)
        : source_(source), done_(std::async(std::launch::async, [&source, &sink] { source.run(sink); }))
    {
    }
    ~background_run()
    {
        if (done_.valid()) {
            source_.stop();
            done_.wait();
        }
    }
    /// True if run() returned within the timeout; rethrows what run() threw.
    bool finished_within(std::chrono::milliseconds timeout)
    {
        if (done_.wait_for(timeout) != std::future_status::ready) return false;
        done_.get();
        return true;
    }

private:
    sample_source& source_;
    std::future<void> done_;
};

template <class Source>
[[nodiscard]] std::uint16_t wait_local_port(const Source& s)
{
    for (int k = 0; k < 500 && s.local_port() == 0; ++k) std::this_thread::sleep_for(2ms);
    return s.local_port();
}

template <class Pred>
[[nodiscard]] bool wait_until(Pred pred, std::chrono::milliseconds timeout = 5000ms)
{
    const auto end = std::chrono::steady_clock::now() + timeout;
    while (!pred()) {
        if (std::chrono::steady_clock::now() > end) return false;
        std::this_thread::sleep_for(1ms);
    }
    return true;
}

/// Accepts one connection on `acceptor` (driven by `ioc`), giving up after `timeout`, so that a
/// source that never dials again fails the test instead of hanging it.
[[nodiscard]] bool accept_within(asio::io_context& ioc, tcp::acceptor& acceptor, tcp::socket& peer,
                                 std::chrono::milliseconds timeout = 5000ms)
{
    bool done = false;
    boost::system::error_code ec;
    acceptor.async_accept(peer, [&](const boost::system::error_code& e) {
        ec = e;
        done = true;
    });
    ioc.restart();
    ioc.run_for(timeout);
    if (!done) {
        acceptor.cancel();
        ioc.restart();
        ioc.run();
    }
    return done && !ec;
}

/// Whether the source closed `peer` (a read ends with EOF or a reset, not data).
[[nodiscard]] bool closed_by_source(tcp::socket& peer)
{
    std::byte b{};
    boost::system::error_code ec;
    (void)peer.read_some(asio::buffer(&b, 1), ec);
    return ec == asio::error::eof || ec == asio::error::connection_reset;
}

/// Writes `bytes` in pieces of irregular size (1, 2, 3, ... bytes, cycling up to 97).
void write_irregular(tcp::socket& s, std::span<const std::byte> bytes)
{
    std::size_t off = 0;
    for (std::size_t piece = 1; off < bytes.size(); piece = piece % 97 + 1) {
        const std::size_t n = std::min(piece, bytes.size() - off);
        asio::write(s, asio::buffer(bytes.data() + off, n));
        off += n;
    }
}

[[nodiscard]] bool contains(const std::vector<std::string>& errors, const std::string& text)
{
    for (const auto& e : errors)
        if (e.find(text) != std::string::npos) return true;
    return false;
}

// ---- configuration -------------------------------------------------------------------------

TEST(net_config, defaults_need_only_a_sample_rate)
{
    tcp_source_config t;
    EXPECT_TRUE(contains(t.validate(), "sample_rate_hz = 0 is out of range"));
    t.sample_rate_hz = rate_hz;
    EXPECT_TRUE(t.validate().empty());
    udp_source_config u;
    u.sample_rate_hz = rate_hz;
    EXPECT_TRUE(u.validate().empty());
    vita49_source_config v;
    v.sample_rate_hz = rate_hz;
    EXPECT_TRUE(v.validate().empty());
}

TEST(net_config, bad_fields_are_named_with_value_and_range)
{
    tcp_source_config t;
    t.sample_rate_hz = rate_hz;
    t.port = 0;  // connect mode needs a real port
    t.ci16_scale = -1.0f;
    t.rcvbuf_bytes = -5;
    t.retry_initial_s = 2.0;
    t.retry_max_s = 1.0;
    t.read_bytes = 10;
    t.idle_timeout_s = 0.001;
    auto e = t.validate();
    EXPECT_EQ(e.size(), 6u);
    EXPECT_TRUE(contains(e, "idle_timeout_s = 0.001 is out of range (allowed: 0 (off) or 0.01 .. 3600 s)"));
    EXPECT_TRUE(contains(e, "port = 0 is out of range (allowed: 1 .. 65535)"));
    EXPECT_TRUE(contains(e, "ci16_scale = -1"));
    EXPECT_TRUE(contains(e, "rcvbuf_bytes = -5"));
    EXPECT_TRUE(contains(e, "retry_max_s = 1 is out of range (allowed: retry_initial_s .. 600 s)"));
    EXPECT_TRUE(contains(e, "read_bytes = 10"));
    EXPECT_THROW(tcp_source{t}, std::invalid_argument);

    t = {};
    t.sample_rate_hz = rate_hz;
    t.mode = tcp_mode::listen;
    t.port = 0;  // ephemeral: fine for listening
    EXPECT_TRUE(t.validate().empty());
    t.host = "receiver.local";
    EXPECT_TRUE(contains(t.validate(), "host = 'receiver.local' is not a numeric IPv4 or IPv6 address"));
    t.mode = tcp_mode::connect;
    t.port = 5000;
    EXPECT_TRUE(t.validate().empty());  // connect mode resolves names
    t.host.clear();
    EXPECT_TRUE(contains(t.validate(), "host is empty"));
    t.host = "10.0.0.5";
    for (const double idle : {-1.0, 3601.0, std::numeric_limits<double>::quiet_NaN()}) {
        t.idle_timeout_s = idle;
        EXPECT_TRUE(contains(t.validate(), "idle_timeout_s = ")) << idle;
    }
    t.idle_timeout_s = 0.0;  // off
    EXPECT_TRUE(t.validate().empty());

    udp_source_config u;
    u.sample_rate_hz = std::numeric_limits<double>::quiet_NaN();
    u.port = 70000;
    u.bind_address = "1.2.3";
    e = u.validate();
    EXPECT_EQ(e.size(), 3u);
    EXPECT_TRUE(contains(e, "sample_rate_hz = nan"));
    EXPECT_TRUE(contains(e, "port = 70000 is out of range (allowed: 0 (ephemeral) .. 65535)"));
    EXPECT_TRUE(contains(e, "bind_address = '1.2.3'"));
    EXPECT_THROW(udp_source{u}, std::invalid_argument);

    vita49_source_config v;
    v.sample_rate_hz = rate_hz;
    v.rcvbuf_bytes = (1 << 30) + 1;
    EXPECT_TRUE(contains(v.validate(), "rcvbuf_bytes = 1073741825"));
    EXPECT_THROW(vita49_source{v}, std::invalid_argument);
}

TEST(net_config, describe_names_the_source)
{
    tcp_source_config t;
    t.host = "10.0.0.5";
    t.sample_rate_hz = 6.6e6;
    EXPECT_EQ(tcp_source(t).describe(), "tcp connect 10.0.0.5:5000 (ci16_le, 6.6 MHz)");
    vita49_source_config v;
    v.sample_rate_hz = 6.6e6;
    v.stream_id = 1;
    const vita49_source vs(v);
    EXPECT_EQ(vs.describe(), "vita49 udp 0.0.0.0:4991 (stream id 0x00000001, ci16, 6.6 MHz)");
    EXPECT_EQ(vs.sample_rate_hz(), 6.6e6);
    udp_source_config u;
    u.sample_rate_hz = 6.6e6;
    EXPECT_NE(udp_source(u).describe().find("loss undetectable"), std::string::npos);
}

// ---- TCP -------------------------------------------------------------------------------------

TEST(tcp_source, connect_delivers_exactly_the_samples_sent_with_samples_split_across_reads)
{
    for (const sample_format format : {sample_format::ci16_le, sample_format::cf32_le}) {
        SCOPED_TRACE(std::string(to_sigmf_datatype(format)));
        const auto sent = format == sample_format::ci16_le ? ci16_samples(5000, 1) : cf32_samples(5000, 2);
        const auto bytes = encode_le(format, sent);
        asio::io_context ioc;
        tcp::acceptor acceptor(ioc, tcp::endpoint(loopback, 0));

        tcp_source_config cfg;
        cfg.port = acceptor.local_endpoint().port();
        cfg.format = format;
        cfg.sample_rate_hz = rate_hz;
        cfg.end_on_close = true;
        cfg.read_bytes = 70;  // not a multiple of either sample size: samples straddle reads
        tcp_source source(cfg);
        recording_sink sink;
        background_run run(source, sink);

        tcp::socket peer(ioc);
        acceptor.accept(peer);
        peer.set_option(tcp::no_delay(true));
        write_irregular(peer, bytes);
        peer.close();

        ASSERT_TRUE(run.finished_within(5000ms));
        EXPECT_EQ(sink.samples(), sent);
        // ci16 goes to the sink at its width (write_ci16, the configured scale), cf32 as cf32.
        EXPECT_EQ(sink.narrow_samples(), format == sample_format::ci16_le ? sent.size() : 0u);
        EXPECT_EQ(source.ci16_scale().has_value(), format == sample_format::ci16_le);
        if (format == sample_format::ci16_le) {
            EXPECT_EQ(sink.last_scale(), cfg.ci16_scale);
        }
        EXPECT_TRUE(sink.gaps().empty());
        EXPECT_EQ(source.counters().samples.load(), sent.size());
        EXPECT_EQ(source.counters().bytes.load(), bytes.size());
        EXPECT_EQ(source.counters().reconnects.load(), 0u);
    }
}

TEST(tcp_source, listen_delivers_exactly_the_samples_sent_and_counts_nonfinite)
{
    auto sent = cf32_samples(3000, 3);
    sent[1234] = cf32(std::numeric_limits<float>::quiet_NaN(), 0.0f);
    const auto bytes = encode_le(sample_format::cf32_le, sent);

    tcp_source_config cfg;
    cfg.mode = tcp_mode::listen;
    cfg.port = 0;
    cfg.format = sample_format::cf32_le;
    cfg.sample_rate_hz = rate_hz;
    cfg.end_on_close = true;
    tcp_source source(cfg);
    recording_sink sink;
    background_run run(source, sink);
    const std::uint16_t port = wait_local_port(source);
    ASSERT_NE(port, 0);

    asio::io_context ioc;
    tcp::socket peer(ioc);
    peer.connect(tcp::endpoint(loopback, port));
    write_irregular(peer, bytes);
    peer.close();

    ASSERT_TRUE(run.finished_within(5000ms));
    const auto got = sink.samples();
    ASSERT_EQ(got.size(), sent.size());
    for (std::size_t k = 0; k < sent.size(); ++k) {
        if (k == 1234) {
            EXPECT_TRUE(std::isnan(got[k].real()));
            continue;
        }
        ASSERT_EQ(got[k], sent[k]) << k;
    }
    EXPECT_EQ(source.counters().nonfinite.load(), 1u);
}

TEST(tcp_source, connect_retries_until_the_peer_listens)
{
    asio::io_context ioc;
    std::uint16_t port = 0;
    {
        tcp::acceptor probe(ioc, tcp::endpoint(loopback, 0));
        port = probe.local_endpoint().port();
    }  // closed again: connecting now is refused

    tcp_source_config cfg;
    cfg.port = port;
    cfg.sample_rate_hz = rate_hz;
    cfg.end_on_close = true;
    cfg.retry_initial_s = 0.01;
    cfg.retry_max_s = 0.05;
    tcp_source source(cfg);
    recording_sink sink;
    background_run run(source, sink);
    std::this_thread::sleep_for(150ms);  // several refused attempts

    tcp::acceptor acceptor(ioc, tcp::endpoint(loopback, port));
    tcp::socket peer(ioc);
    acceptor.accept(peer);
    const auto sent = ci16_samples(1000, 4);
    asio::write(peer, asio::buffer(encode_le(sample_format::ci16_le, sent)));
    peer.close();

    ASSERT_TRUE(run.finished_within(5000ms));
    EXPECT_EQ(sink.samples(), sent);
    EXPECT_TRUE(sink.gaps().empty());  // the first connection is no reconnect
}

TEST(tcp_source, connect_mode_reconnect_gives_one_reconnect_gap)
{
    const auto sent = ci16_samples(4000, 5);
    const auto bytes = encode_le(sample_format::ci16_le, sent);
    const std::size_t half_bytes = 2000 * 4 + 2;  // the first connection ends mid-sample
    asio::io_context ioc;
    tcp::acceptor acceptor(ioc, tcp::endpoint(loopback, 0));

    tcp_source_config cfg;
    cfg.port = acceptor.local_endpoint().port();
    cfg.sample_rate_hz = rate_hz;
    cfg.retry_initial_s = 0.01;
    tcp_source source(cfg);
    recording_sink sink;
    sink.stop_source_at(source, sent.size());
    background_run run(source, sink);

    {
        tcp::socket first(ioc);
        acceptor.accept(first);
        asio::write(first, asio::buffer(bytes.data(), half_bytes));
    }  // closed: the source reconnects
    tcp::socket second(ioc);
    acceptor.accept(second);
    asio::write(second, asio::buffer(bytes.data() + 2000 * 4, bytes.size() - 2000 * 4));

    ASSERT_TRUE(run.finished_within(5000ms));
    EXPECT_EQ(sink.samples(), sent);
    EXPECT_EQ(sink.gaps(), (std::vector<gap_event>{{2000, 0, gap_reason::reconnect}}));
    EXPECT_EQ(source.counters().reconnects.load(), 1u);
}

TEST(tcp_source, listen_mode_serves_one_client_at_a_time_and_reports_the_next_as_reconnect)
{
    tcp_source_config cfg;
    cfg.mode = tcp_mode::listen;
    cfg.host = "127.0.0.1";
    cfg.port = 0;
    cfg.sample_rate_hz = rate_hz;
    tcp_source source(cfg);
    recording_sink sink;
    const auto sent = ci16_samples(2000, 6);
    const auto bytes = encode_le(sample_format::ci16_le, sent);
    sink.stop_source_at(source, sent.size());
    background_run run(source, sink);
    const std::uint16_t port = wait_local_port(source);
    ASSERT_NE(port, 0);

    asio::io_context ioc;
    tcp::socket first(ioc);
    first.connect(tcp::endpoint(loopback, port));
    asio::write(first, asio::buffer(bytes.data(), bytes.size() / 2));
    ASSERT_TRUE(sink.wait_for(sent.size() / 2));

    // A second client while the first is connected is closed at once.
    tcp::socket intruder(ioc);
    intruder.connect(tcp::endpoint(loopback, port));
    std::byte b{};
    boost::system::error_code ec;
    (void)intruder.read_some(asio::buffer(&b, 1), ec);
    EXPECT_TRUE(ec == asio::error::eof || ec == asio::error::connection_reset) << ec.message();
    EXPECT_EQ(source.tcp_counts().busy_refused.load(), 1u);

    first.close();
    ASSERT_TRUE(wait_until([&] { return !source.connected(); }));
    tcp::socket next(ioc);
    next.connect(tcp::endpoint(loopback, port));
    asio::write(next, asio::buffer(bytes.data() + bytes.size() / 2, bytes.size() / 2));

    ASSERT_TRUE(run.finished_within(5000ms));
    EXPECT_EQ(sink.samples(), sent);
    EXPECT_EQ(sink.gaps(), (std::vector<gap_event>{{1000, 0, gap_reason::reconnect}}));
    EXPECT_EQ(source.counters().reconnects.load(), 1u);
    EXPECT_EQ(source.tcp_counts().takeovers.load(), 0u);
}

// A peer that stops sending but keeps the connection open blocked the TCP
// source for good (no read deadline, no keepalive, no reconnect). Now idle_timeout_s drops it
// and the source dials again. The timeout (0.5 s) only has to be longer than the moment
// between the test's accept and its first write; the test itself waits up to 5 s.
TEST(tcp_source, connect_mode_drops_a_stalled_peer_after_the_idle_timeout_and_reconnects)
{
    const auto sent = ci16_samples(2000, 21);
    const auto bytes = encode_le(sample_format::ci16_le, sent);
    asio::io_context ioc;
    tcp::acceptor acceptor(ioc, tcp::endpoint(loopback, 0));

    tcp_source_config cfg;
    cfg.port = acceptor.local_endpoint().port();
    cfg.sample_rate_hz = rate_hz;
    cfg.retry_initial_s = 0.01;
    cfg.idle_timeout_s = 0.5;
    tcp_source source(cfg);
    recording_sink sink;
    sink.stop_source_at(source, sent.size());
    background_run run(source, sink);

    tcp::socket stalled(ioc);
    ASSERT_TRUE(accept_within(ioc, acceptor, stalled));
    asio::write(stalled, asio::buffer(bytes.data(), 1000 * 4));
    // ... and nothing more, the connection left open: the source has to give up on it itself.
    tcp::socket second(ioc);
    ASSERT_TRUE(accept_within(ioc, acceptor, second));
    EXPECT_TRUE(closed_by_source(stalled));
    asio::write(second, asio::buffer(bytes.data() + 1000 * 4, 1000 * 4));

    ASSERT_TRUE(run.finished_within(5000ms));
    EXPECT_EQ(sink.samples(), sent);
    EXPECT_EQ(sink.gaps(), (std::vector<gap_event>{{1000, 0, gap_reason::reconnect}}));
    EXPECT_EQ(source.tcp_counts().idle_timeouts.load(), 1u);
    EXPECT_EQ(source.counters().reconnects.load(), 1u);
}

TEST(tcp_source, listen_mode_drops_a_stalled_client_after_the_idle_timeout_and_serves_the_next)
{
    const auto sent = ci16_samples(2000, 22);
    const auto bytes = encode_le(sample_format::ci16_le, sent);
    tcp_source_config cfg;
    cfg.mode = tcp_mode::listen;
    cfg.port = 0;
    cfg.sample_rate_hz = rate_hz;
    cfg.idle_timeout_s = 0.5;
    tcp_source source(cfg);
    recording_sink sink;
    sink.stop_source_at(source, sent.size());
    background_run run(source, sink);
    const std::uint16_t port = wait_local_port(source);
    ASSERT_NE(port, 0);

    asio::io_context ioc;
    tcp::socket stalled(ioc);
    stalled.connect(tcp::endpoint(loopback, port));
    asio::write(stalled, asio::buffer(bytes.data(), 1000 * 4));
    ASSERT_TRUE(sink.wait_for(1000));
    // Silent from here, still connected: dropped after 0.5 s.
    ASSERT_TRUE(wait_until([&] { return !source.connected(); }));
    EXPECT_TRUE(closed_by_source(stalled));
    EXPECT_EQ(source.tcp_counts().idle_timeouts.load(), 1u);

    tcp::socket next(ioc);
    next.connect(tcp::endpoint(loopback, port));
    asio::write(next, asio::buffer(bytes.data() + 1000 * 4, 1000 * 4));
    ASSERT_TRUE(run.finished_within(5000ms));
    EXPECT_EQ(sink.samples(), sent);
    EXPECT_EQ(sink.gaps(), (std::vector<gap_event>{{1000, 0, gap_reason::reconnect}}));
    EXPECT_EQ(source.tcp_counts().busy_refused.load(), 0u);
}

// Backpressure is not idleness: a sink that blocks for longer than the idle timeout (a full
// ring under overflow: block) must not get a sending peer dropped. The peer's bytes wait in
// the kernel meanwhile; silence is measured from the moment the source reads again.
TEST(tcp_source, a_slow_sink_longer_than_the_idle_timeout_does_not_drop_the_connection)
{
    class slow_sink final : public sample_sink {
    public:
        explicit slow_sink(recording_sink& inner) : inner_(inner) {}
        void write(std::span<const cf32> s) override
        {
            if (first_) std::this_thread::sleep_for(600ms);  // 3x the idle timeout
            first_ = false;
            inner_.write(s);
        }
        void gap(std::uint64_t lost, gap_reason reason) override { inner_.gap(lost, reason); }

    private:
        recording_sink& inner_;
        bool first_ = true;
    };
    const auto sent = ci16_samples(4000, 26);
    const auto bytes = encode_le(sample_format::ci16_le, sent);
    asio::io_context ioc;
    tcp::acceptor acceptor(ioc, tcp::endpoint(loopback, 0));
    tcp_source_config cfg;
    cfg.port = acceptor.local_endpoint().port();
    cfg.sample_rate_hz = rate_hz;
    cfg.idle_timeout_s = 0.2;
    cfg.read_bytes = 4096;  // several reads: the first one's delivery blocks
    cfg.end_on_close = true;
    tcp_source source(cfg);
    recording_sink sink;
    slow_sink slow(sink);
    background_run run(source, slow);

    tcp::socket peer(ioc);
    ASSERT_TRUE(accept_within(ioc, acceptor, peer));
    asio::write(peer, asio::buffer(bytes));
    peer.close();

    ASSERT_TRUE(run.finished_within(5000ms));
    EXPECT_EQ(sink.samples(), sent);
    EXPECT_TRUE(sink.gaps().empty());
    EXPECT_EQ(source.tcp_counts().idle_timeouts.load(), 0u);
}

// A client that has gone quiet (its sender restarted without closing) is replaced by a new
// one at once, idle timeout or not (here off): silence of tcp_listen_takeover_silence_s (1 s)
// is enough. The test's sleep is a lower bound on that silence, never an upper one.
TEST(tcp_source, listen_mode_new_client_takes_over_from_one_that_went_silent)
{
    const auto sent = ci16_samples(2000, 23);
    const auto bytes = encode_le(sample_format::ci16_le, sent);
    tcp_source_config cfg;
    cfg.mode = tcp_mode::listen;
    cfg.port = 0;
    cfg.sample_rate_hz = rate_hz;
    cfg.idle_timeout_s = 0.0;  // off: the takeover alone must let the new client in
    tcp_source source(cfg);
    recording_sink sink;
    sink.stop_source_at(source, sent.size());
    background_run run(source, sink);
    const std::uint16_t port = wait_local_port(source);
    ASSERT_NE(port, 0);

    asio::io_context ioc;
    tcp::socket silent(ioc);
    silent.connect(tcp::endpoint(loopback, port));
    asio::write(silent, asio::buffer(bytes.data(), 1000 * 4));
    ASSERT_TRUE(sink.wait_for(1000));
    std::this_thread::sleep_for(std::chrono::duration<double>(tcp_listen_takeover_silence_s) + 200ms);

    tcp::socket next(ioc);
    next.connect(tcp::endpoint(loopback, port));
    asio::write(next, asio::buffer(bytes.data() + 1000 * 4, 1000 * 4));
    ASSERT_TRUE(run.finished_within(5000ms));
    EXPECT_EQ(sink.samples(), sent);
    EXPECT_EQ(sink.gaps(), (std::vector<gap_event>{{1000, 0, gap_reason::reconnect}}));
    EXPECT_TRUE(closed_by_source(silent));
    EXPECT_EQ(source.tcp_counts().takeovers.load(), 1u);
    EXPECT_EQ(source.tcp_counts().busy_refused.load(), 0u);
    EXPECT_EQ(source.tcp_counts().idle_timeouts.load(), 0u);
}

// The reconnect backoff was reset on every connect and every disconnect, so
// a peer that accepts and closes at once was dialled every retry_initial_s for ever. Now it
// doubles per connection that brings no data, up to retry_max_s, and only data resets it.
// last_retry_delay_s() says which wait preceded each dial (no clock is read by the test).
TEST(tcp_source, connect_mode_backoff_grows_while_connections_bring_no_data_and_data_resets_it)
{
    asio::io_context ioc;
    tcp::acceptor acceptor(ioc, tcp::endpoint(loopback, 0));
    tcp_source_config cfg;
    cfg.port = acceptor.local_endpoint().port();
    cfg.sample_rate_hz = rate_hz;
    cfg.retry_initial_s = 0.01;
    cfg.retry_max_s = 0.04;
    tcp_source source(cfg);
    recording_sink sink;
    background_run run(source, sink);

    // The first dial waits for nothing; then 0.01, 0.02, 0.04, 0.04 after each empty connection.
    for (const double expected : {0.0, 0.01, 0.02, 0.04, 0.04}) {
        tcp::socket peer(ioc);
        ASSERT_TRUE(accept_within(ioc, acceptor, peer));
        EXPECT_DOUBLE_EQ(source.last_retry_delay_s(), expected);
        peer.close();  // accepted, then closed without a byte
    }
    {
        tcp::socket peer(ioc);
        ASSERT_TRUE(accept_within(ioc, acceptor, peer));
        EXPECT_DOUBLE_EQ(source.last_retry_delay_s(), 0.04);
        const auto s = ci16_samples(100, 24);
        asio::write(peer, asio::buffer(encode_le(sample_format::ci16_le, s)));
        ASSERT_TRUE(sink.wait_for(100));
    }  // closed after delivering data
    tcp::socket peer(ioc);
    ASSERT_TRUE(accept_within(ioc, acceptor, peer));
    EXPECT_DOUBLE_EQ(source.last_retry_delay_s(), 0.01);
    // Counted when the source sees its connect complete, which may be after the accept here.
    EXPECT_TRUE(wait_until([&] { return source.counters().reconnects.load() == 6u; }));
}

// Listen mode throttles accepts the same way: after a client that brought no data the next
// accept waits (the next client waits in the kernel's backlog), doubling up to retry_max_s.
namespace {
/// Listen mode on 127.0.0.1, an ephemeral port, the test rate; `allow`: the allow-list.
[[nodiscard]] tcp_source_config listen_config(std::vector<std::string> allow = {})
{
    tcp_source_config cfg;
    cfg.mode = tcp_mode::listen;
    cfg.host = "127.0.0.1";
    cfg.port = 0;
    cfg.sample_rate_hz = rate_hz;
    cfg.allow = std::move(allow);
    return cfg;
}
}  // namespace

TEST(tcp_source, listen_mode_accepts_the_next_client_at_once_after_one_without_data)
{
    // A client that connects and leaves without a byte is no failure of the source's: the
    // next client is accepted at once (the backoff is connect mode's).
    auto cfg = listen_config();
    cfg.retry_initial_s = 0.5;
    cfg.retry_max_s = 5.0;
    tcp_source source(cfg);
    recording_sink sink;
    background_run run(source, sink);
    const std::uint16_t port = wait_local_port(source);
    ASSERT_NE(port, 0);

    asio::io_context ioc;
    const auto start = std::chrono::steady_clock::now();
    for (int k = 0; k < 6; ++k) {
        tcp::socket c(ioc);
        c.connect(tcp::endpoint(loopback, port));
        ASSERT_TRUE(wait_until([&] { return source.connected(); }, 2000ms)) << "client " << k;
        c.close();
        ASSERT_TRUE(wait_until([&] { return !source.connected(); }, 2000ms));
    }
    // Six clients with the connect mode's backoff would take 0.5 + 1 + 2 + 4 + 5 s.
    EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
    EXPECT_DOUBLE_EQ(source.last_retry_delay_s(), 0.0);
}

TEST(tcp_source, listen_mode_serves_the_allowed_sender_within_a_second_whatever_other_clients_do)
{
    // The allow-list names 127.0.0.1. Twenty clients from 127.0.0.2 (refused) and twenty
    // allowed clients that connect and send nothing stay connected; an allowed client trickles
    // a byte every 0.2 s. The sender that then connects is served within a second.
    tcp_source source(listen_config({"127.0.0.1/32"}));
    recording_sink sink;
    const auto sent = ci16_samples(4000, 27);
    const auto bytes = encode_le(sample_format::ci16_le, sent);
    background_run run(source, sink);
    const std::uint16_t port = wait_local_port(source);
    ASSERT_NE(port, 0);

    asio::io_context ioc;
    std::vector<std::unique_ptr<tcp::socket>> others;
    for (int k = 0; k < 20; ++k) {
        others.push_back(std::make_unique<tcp::socket>(ioc, tcp::endpoint(asio::ip::make_address("127.0.0.2"), 0)));
        others.back()->connect(tcp::endpoint(loopback, port));
    }
    for (int k = 0; k < 20; ++k) {
        others.push_back(std::make_unique<tcp::socket>(ioc));
        others.back()->connect(tcp::endpoint(loopback, port));
    }
    EXPECT_TRUE(wait_until([&] { return source.counters().refused.load() == 20; }));
    std::atomic<bool> trickling{true};
    tcp::socket trickler(ioc);
    trickler.connect(tcp::endpoint(loopback, port));
    std::thread trickle([&] {
        const std::byte b{0x01};
        boost::system::error_code ec;
        while (trickling.load() && !ec) {
            asio::write(trickler, asio::buffer(&b, 1), ec);
            std::this_thread::sleep_for(200ms);
        }
    });
    struct joined {
        std::atomic<bool>& flag;
        std::thread& t;
        ~joined()
        {
            flag.store(false);
            if (t.joinable()) t.join();
        }
    } join_trickle{trickling, trickle};
    std::this_thread::sleep_for(1500ms);  // the trickler is older than a second of waiting

    // What the trickler's bytes made so far; it may add a sample until it is replaced.
    const std::size_t before = sink.samples().size();
    const auto t0 = std::chrono::steady_clock::now();
    tcp::socket sender(ioc);
    sender.connect(tcp::endpoint(loopback, port));
    asio::write(sender, asio::buffer(bytes));
    ASSERT_TRUE(sink.wait_for(before + sent.size(), 3000ms))
        << sink.samples().size() - before << " of " << sent.size() << " samples; takeovers "
        << source.tcp_counts().takeovers.load() << ", busy refused " << source.tcp_counts().busy_refused.load();
    const auto served_in = std::chrono::steady_clock::now() - t0;
    EXPECT_LT(served_in, 1s) << std::chrono::duration_cast<std::chrono::milliseconds>(served_in).count() << " ms";
    const auto got = sink.samples();
    ASSERT_GE(got.size(), sent.size());
    EXPECT_TRUE(std::equal(sent.begin(), sent.end(), got.end() - static_cast<std::ptrdiff_t>(sent.size())))
        << "the sender's samples, whole and last";
    EXPECT_EQ(source.counters().refused.load(), 20u);
    EXPECT_GE(source.tcp_counts().takeovers.load(), 20u) << "each silent client, then the trickler, replaced";
    EXPECT_EQ(source.tcp_counts().busy_refused.load(), 0u);
}

TEST(tcp_source, listen_on_a_taken_port_throws_naming_the_source)
{
    asio::io_context ioc;
    tcp::acceptor taken(ioc, tcp::endpoint(loopback, 0));
    tcp_source_config cfg;
    cfg.mode = tcp_mode::listen;
    cfg.port = taken.local_endpoint().port();
    cfg.sample_rate_hz = rate_hz;
    tcp_source source(cfg);
    recording_sink sink;
    try {
        source.run(sink);
        FAIL() << "run() returned";
    } catch (const std::runtime_error& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find("tcp listen 127.0.0.1:" + std::to_string(cfg.port)), std::string::npos) << what;
        EXPECT_NE(what.find("cannot bind"), std::string::npos) << what;
    }
}

// ---- UDP -------------------------------------------------------------------------------------

TEST(udp_source, delivers_exactly_the_samples_sent_and_rejects_partial_samples)
{
    udp_source_config cfg;
    cfg.bind_address = "127.0.0.1";
    cfg.port = 0;
    cfg.sample_rate_hz = rate_hz;
    cfg.rcvbuf_bytes = 0;
    udp_source source(cfg);
    recording_sink sink;
    const auto sent = ci16_samples(20 * 256, 7);
    const auto bytes = encode_le(sample_format::ci16_le, sent);
    sink.stop_source_at(source, sent.size());
    background_run run(source, sink);
    const std::uint16_t port = wait_local_port(source);
    ASSERT_NE(port, 0);

    asio::io_context ioc;
    udp::socket tx(ioc, udp::endpoint(loopback, 0));
    const udp::endpoint dst(loopback, port);
    for (std::size_t k = 0; k < 20; ++k) {
        tx.send_to(asio::buffer(bytes.data() + k * 1024, 1024), dst);
        if (k == 9) tx.send_to(asio::buffer(bytes.data(), 3), dst);  // 3 bytes: not a whole sample
        std::this_thread::sleep_for(1ms);  // gentle on the loopback queue
    }

    ASSERT_TRUE(run.finished_within(5000ms));
    EXPECT_EQ(sink.samples(), sent);
    EXPECT_EQ(sink.narrow_samples(), sent.size());  // ci16 at its width
    EXPECT_EQ(source.ci16_scale(), std::optional<float>(cfg.ci16_scale));
    EXPECT_EQ(sink.gaps(), (std::vector<gap_event>{{10 * 256, 0, gap_reason::source_error}}));
    EXPECT_EQ(source.counters().packets.load(), 21u);
    EXPECT_EQ(source.counters().malformed.load(), 1u);
}

// Two receive channels interleaved (channels 2): whole sample times go out as cf32x2 pairs,
// decoded to cf32 from any format; a datagram of one channel's sample is malformed. TCP: the
// same with sample times split across reads.
TEST(udp_source, two_interleaved_channels_arrive_as_sample_times)
{
    udp_source_config cfg;
    cfg.bind_address = "127.0.0.1";
    cfg.port = 0;
    cfg.sample_rate_hz = rate_hz;
    cfg.rcvbuf_bytes = 0;
    cfg.channels = 2;
    udp_source source(cfg);
    EXPECT_EQ(source.channels(), 2);
    EXPECT_FALSE(source.ci16_scale().has_value());
    EXPECT_NE(source.describe().find("2 channels interleaved"), std::string::npos) << source.describe();
    recording_sink sink;
    const auto sent = ci16_samples(20 * 256, 9);  // 20 datagrams of 128 sample times
    const auto bytes = encode_le(sample_format::ci16_le, sent);
    sink.stop_source_at(source, sent.size());
    background_run run(source, sink);
    const std::uint16_t port = wait_local_port(source);
    ASSERT_NE(port, 0);
    asio::io_context ioc;
    udp::socket tx(ioc, udp::endpoint(loopback, 0));
    const udp::endpoint dst(loopback, port);
    for (std::size_t k = 0; k < 20; ++k) {
        tx.send_to(asio::buffer(bytes.data() + k * 1024, 1024), dst);
        if (k == 9) tx.send_to(asio::buffer(bytes.data(), 4), dst);  // one channel's sample only
        std::this_thread::sleep_for(1ms);
    }
    ASSERT_TRUE(run.finished_within(5000ms));
    EXPECT_EQ(sink.samples(), sent);
    EXPECT_EQ(sink.pairs(), sent.size() / 2);
    EXPECT_EQ(sink.narrow_samples(), 0u);
    EXPECT_EQ(source.counters().samples.load(), sent.size() / 2);  // sample times
    EXPECT_EQ(source.counters().malformed.load(), 1u);
    EXPECT_EQ(sink.gaps(), (std::vector<gap_event>{{10 * 256, 0, gap_reason::source_error}}));
}

TEST(tcp_source, two_interleaved_channels_arrive_as_sample_times_across_reads)
{
    const auto sent = cf32_samples(5000, 4);  // 2500 sample times
    const auto bytes = encode_le(sample_format::cf32_le, sent);
    asio::io_context ioc;
    tcp::acceptor acceptor(ioc, tcp::endpoint(loopback, 0));
    tcp_source_config cfg;
    cfg.port = acceptor.local_endpoint().port();
    cfg.format = sample_format::cf32_le;
    cfg.sample_rate_hz = rate_hz;
    cfg.end_on_close = true;
    cfg.read_bytes = 70;  // not a multiple of a sample time (16 bytes)
    cfg.channels = 2;
    tcp_source source(cfg);
    EXPECT_EQ(source.channels(), 2);
    recording_sink sink;
    background_run run(source, sink);
    tcp::socket peer(ioc);
    acceptor.accept(peer);
    write_irregular(peer, bytes);
    peer.close();
    ASSERT_TRUE(run.finished_within(5000ms));
    EXPECT_EQ(sink.samples(), sent);
    EXPECT_EQ(sink.pairs(), 2500u);
    EXPECT_EQ(source.counters().samples.load(), 2500u);
    EXPECT_TRUE(sink.gaps().empty());
    cfg.channels = 3;
    EXPECT_FALSE(cfg.validate().empty());
}

// GNU Radio's UDP Sink headers (gr-network packet_headers.h): seqnum u64 in the sender's
// byte order (little-endian here), then for "Seq + Size" an i16 length and padding to 16.
[[nodiscard]] std::vector<std::byte> gnuradio_datagram(udp_header h, std::uint64_t seq, std::span<const std::byte> body)
{
    std::vector<std::byte> d(header_bytes(h));
    for (std::size_t i = 0; i < 8 && i < d.size(); ++i) d[i] = static_cast<std::byte>(seq >> (8 * i));
    if (h == udp_header::gnuradio_seq_size) {
        const auto len = static_cast<std::uint16_t>(d.size() + body.size());
        d[8] = static_cast<std::byte>(len & 0xff);
        d[9] = static_cast<std::byte>(len >> 8);
    }
    d.insert(d.end(), body.begin(), body.end());
    return d;
}

TEST(udp_sequence, verdicts)
{
    EXPECT_EQ(check_udp_sequence(std::nullopt, 7).verdict, udp_seq_verdict::in_order);
    EXPECT_EQ(check_udp_sequence(7, 8).verdict, udp_seq_verdict::in_order);
    const auto lost = check_udp_sequence(7, 10);
    EXPECT_EQ(lost.verdict, udp_seq_verdict::lost);
    EXPECT_EQ(lost.lost, 2u);
    EXPECT_EQ(check_udp_sequence(7, 7).verdict, udp_seq_verdict::stale);
    EXPECT_EQ(check_udp_sequence(7, 3).verdict, udp_seq_verdict::stale);
    EXPECT_EQ(check_udp_sequence(7, 1).verdict, udp_seq_verdict::restart);
    EXPECT_EQ(check_udp_sequence(1, 1).verdict, udp_seq_verdict::stale);
    // Behind by at most the reorder window: a duplicate or reordered datagram; further back:
    // the numbering restarted somewhere other than 1 (its datagram 1 lost), a resync.
    EXPECT_EQ(check_udp_sequence(100, 100 - udp_reorder_window).verdict, udp_seq_verdict::stale);
    EXPECT_EQ(check_udp_sequence(100, 100 - udp_reorder_window - 1).verdict, udp_seq_verdict::resync);
    EXPECT_EQ(check_udp_sequence(1000, 2).verdict, udp_seq_verdict::resync);
    // Forward: up to udp_max_seq_jump missing datagrams are a loss, more a resync, never a
    // loss near 2^64.
    const auto at_bound = check_udp_sequence(7, 7 + udp_max_seq_jump + 1);
    EXPECT_EQ(at_bound.verdict, udp_seq_verdict::lost);
    EXPECT_EQ(at_bound.lost, udp_max_seq_jump);
    EXPECT_EQ(check_udp_sequence(7, 7 + udp_max_seq_jump + 2).verdict, udp_seq_verdict::resync);
    const auto wrap = check_udp_sequence(0, UINT64_MAX);
    EXPECT_EQ(wrap.verdict, udp_seq_verdict::resync);
    EXPECT_EQ(wrap.lost, 0u);
    EXPECT_EQ(check_udp_sequence(UINT64_MAX, 2).verdict, udp_seq_verdict::resync);
    EXPECT_EQ(header_bytes(udp_header::none), 0u);
    EXPECT_EQ(header_bytes(udp_header::gnuradio_seq), 8u);
    EXPECT_EQ(header_bytes(udp_header::gnuradio_seq_size), 16u);
}

class udp_gnuradio_header : public ::testing::TestWithParam<udp_header> {};

TEST_P(udp_gnuradio_header, counts_lost_datagrams_from_sequence_numbers_and_drops_stale_ones)
{
    const udp_header h = GetParam();
    udp_source_config cfg;
    cfg.bind_address = "127.0.0.1";
    cfg.port = 0;
    cfg.sample_rate_hz = rate_hz;
    cfg.rcvbuf_bytes = 0;
    cfg.header = h;
    udp_source source(cfg);
    EXPECT_NE(source.describe().find("header " + std::string(to_string(h))), std::string::npos);
    recording_sink sink;
    const auto all = ci16_samples(20 * 256, 11);
    const auto bytes = encode_le(sample_format::ci16_le, all);
    // Datagrams 1 .. 20 (256 samples each); 6 and 7 are "lost", 9 arrives twice.
    std::vector<cf32> expected;
    for (std::size_t k = 0; k < 20; ++k)
        if (k != 5 && k != 6) expected.insert(expected.end(), all.begin() + k * 256, all.begin() + (k + 1) * 256);
    sink.stop_source_at(source, expected.size());
    background_run run(source, sink);
    const std::uint16_t port = wait_local_port(source);
    ASSERT_NE(port, 0);

    asio::io_context ioc;
    udp::socket tx(ioc, udp::endpoint(loopback, 0));
    const udp::endpoint dst(loopback, port);
    for (std::size_t k = 0; k < 20; ++k) {
        if (k == 5 || k == 6) continue;
        const auto d = gnuradio_datagram(h, k + 1, std::span(bytes).subspan(k * 1024, 1024));
        tx.send_to(asio::buffer(d), dst);
        if (k == 8) tx.send_to(asio::buffer(d), dst);  // a duplicate
        if (k == 10) tx.send_to(asio::buffer(d.data(), 5), dst);  // shorter than any header
        std::this_thread::sleep_for(1ms);
    }

    ASSERT_TRUE(run.finished_within(5000ms));
    EXPECT_EQ(sink.samples(), expected);
    EXPECT_EQ(sink.gaps(), (std::vector<gap_event>{{5 * 256, 2 * 256, gap_reason::lost_packets},
                                                   {9 * 256, 0, gap_reason::source_error}}));
    EXPECT_EQ(source.counters().packets_lost.load(), 2u);
    EXPECT_EQ(source.counters().samples_lost.load(), 512u);
    EXPECT_EQ(source.counters().malformed.load(), 1u);
    EXPECT_EQ(source.udp_counts().stale.load(), 1u);
    EXPECT_EQ(source.udp_counts().header_suspected.load(), 0u);
}

INSTANTIATE_TEST_SUITE_P(gnuradio, udp_gnuradio_header,
                         ::testing::Values(udp_header::gnuradio_seq, udp_header::gnuradio_seq_size));

// One datagram with a far-ahead sequence number (here near 2^64) made every
// later datagram stale, for good, and would have counted ~2^64 lost datagrams. Now it is a
// resync (no loss counted), and so is the return to the real numbering right after it; a
// sender that restarts without its datagram 1 reaching paqd is followed the same way.
TEST(udp_source, far_jumps_in_the_sequence_resync_instead_of_locking_out_or_counting_2_to_the_64)
{
    udp_source_config cfg;
    cfg.bind_address = "127.0.0.1";
    cfg.port = 0;
    cfg.sample_rate_hz = rate_hz;
    cfg.rcvbuf_bytes = 0;
    cfg.header = udp_header::gnuradio_seq;
    udp_source source(cfg);
    recording_sink sink;
    const auto all = ci16_samples(12 * 64, 12);
    const auto bytes = encode_le(sample_format::ci16_le, all);
    auto body = [&](std::size_t k) { return std::span(bytes).subspan(k * 256, 256); };
    // Datagram k (64 samples each) carries seqs[k]: 101 .. 104 (a sender already running), a
    // hostile 2^64 - 2, 105 .. 108 (back by far more than the reorder window), then the sender
    // restarts and its datagrams 1 and 2 are lost: 3 .. 5.
    const std::vector<std::uint64_t> seqs{101, 102, 103, 104, UINT64_MAX - 1, 105, 106, 107, 108, 3, 4, 5};
    sink.stop_source_at(source, all.size());
    background_run run(source, sink);
    const std::uint16_t port = wait_local_port(source);
    ASSERT_NE(port, 0);

    asio::io_context ioc;
    udp::socket tx(ioc, udp::endpoint(loopback, 0));
    const udp::endpoint dst(loopback, port);
    for (std::size_t k = 0; k < seqs.size(); ++k) {
        tx.send_to(asio::buffer(gnuradio_datagram(udp_header::gnuradio_seq, seqs[k], body(k))), dst);
        std::this_thread::sleep_for(1ms);
    }

    ASSERT_TRUE(run.finished_within(5000ms));
    EXPECT_EQ(sink.samples(), all);  // every datagram delivered: none is stale
    EXPECT_EQ(sink.gaps(), (std::vector<gap_event>{{4 * 64, 0, gap_reason::discontinuity},
                                                   {5 * 64, 0, gap_reason::discontinuity},
                                                   {9 * 64, 0, gap_reason::discontinuity}}));
    EXPECT_EQ(source.udp_counts().resyncs.load(), 3u);
    EXPECT_EQ(source.udp_counts().stale.load(), 0u);
    EXPECT_EQ(source.udp_counts().restarts.load(), 0u);
    EXPECT_EQ(source.counters().packets_lost.load(), 0u);
    EXPECT_EQ(source.counters().samples_lost.load(), 0u);
}

TEST(udp_source, header_none_with_gnuradio_sequence_numbers_is_flagged_not_silent)
{
    udp_source_config cfg;
    cfg.bind_address = "127.0.0.1";
    cfg.port = 0;
    cfg.sample_rate_hz = rate_hz;
    cfg.rcvbuf_bytes = 0;
    udp_source source(cfg);
    recording_sink sink;
    const auto all = ci16_samples(10 * 256, 12);
    const auto bytes = encode_le(sample_format::ci16_le, all);
    sink.stop_source_at(source, 10 * 258);  // the 8-byte header reads as 2 more ci16 samples each
    background_run run(source, sink);
    const std::uint16_t port = wait_local_port(source);
    ASSERT_NE(port, 0);
    asio::io_context ioc;
    udp::socket tx(ioc, udp::endpoint(loopback, 0));
    const udp::endpoint dst(loopback, port);
    for (std::size_t k = 0; k < 10; ++k) {
        const auto d = gnuradio_datagram(udp_header::gnuradio_seq, k + 1, std::span(bytes).subspan(k * 1024, 1024));
        tx.send_to(asio::buffer(d), dst);
        std::this_thread::sleep_for(1ms);
    }
    ASSERT_TRUE(run.finished_within(5000ms));
    EXPECT_EQ(source.udp_counts().header_suspected.load(), 1u);
}

TEST(udp_source, header_none_with_plain_samples_is_not_flagged)
{
    udp_source_config cfg;
    cfg.bind_address = "127.0.0.1";
    cfg.port = 0;
    cfg.sample_rate_hz = rate_hz;
    cfg.rcvbuf_bytes = 0;
    udp_source source(cfg);
    recording_sink sink;
    const auto all = ci16_samples(20 * 256, 13);
    const auto bytes = encode_le(sample_format::ci16_le, all);
    sink.stop_source_at(source, all.size());
    background_run run(source, sink);
    const std::uint16_t port = wait_local_port(source);
    ASSERT_NE(port, 0);
    asio::io_context ioc;
    udp::socket tx(ioc, udp::endpoint(loopback, 0));
    const udp::endpoint dst(loopback, port);
    for (std::size_t k = 0; k < 20; ++k) {
        tx.send_to(asio::buffer(bytes.data() + k * 1024, 1024), dst);
        std::this_thread::sleep_for(1ms);
    }
    ASSERT_TRUE(run.finished_within(5000ms));
    EXPECT_EQ(sink.samples(), all);
    EXPECT_EQ(source.udp_counts().header_suspected.load(), 0u);
}

// The receive buffer held IPv4's largest payload (65507 bytes), so on an IPv6
// socket a longer datagram (up to 65527 bytes) was cut short silently: a whole-sample one lost
// its last samples unseen, a malformed one could pass as whole samples. Now the largest IPv6
// datagram is read whole (and anything longer would be counted malformed).
TEST(udp_source, ipv6_datagrams_up_to_65527_bytes_are_read_whole)
{
    udp_source_config cfg;
    cfg.bind_address = "::1";
    cfg.port = 0;
    cfg.sample_rate_hz = rate_hz;
    cfg.rcvbuf_bytes = 0;
    udp_source source(cfg);
    recording_sink sink;
    constexpr std::size_t big = 65524 / 4;  // the most whole ci16 samples an IPv6 datagram holds
    const auto sent = ci16_samples(big + 256, 13);
    const auto bytes = encode_le(sample_format::ci16_le, sent);
    background_run run(source, sink);
    const std::uint16_t port = wait_local_port(source);
    ASSERT_NE(port, 0);

    asio::io_context ioc;
    const auto v6_loopback = asio::ip::make_address("::1");
    udp::socket tx(ioc, udp::endpoint(v6_loopback, 0));
    const udp::endpoint dst(v6_loopback, port);
    // One at a time, each received before the next: 64 KiB datagrams against the kernel's
    // default receive buffer.
    tx.send_to(asio::buffer(bytes.data(), big * 4), dst);
    ASSERT_TRUE(sink.wait_for(big));
    std::vector<std::byte> odd(65527, std::byte{0x5a});  // the largest IPv6 payload: not whole samples
    tx.send_to(asio::buffer(odd), dst);
    ASSERT_TRUE(wait_until([&] { return source.counters().malformed.load() == 1; }));
    tx.send_to(asio::buffer(bytes.data() + big * 4, 256 * 4), dst);
    ASSERT_TRUE(sink.wait_for(sent.size()));

    EXPECT_EQ(sink.samples(), sent);
    EXPECT_EQ(sink.gaps(), (std::vector<gap_event>{{big, 0, gap_reason::source_error}}));
    EXPECT_EQ(source.counters().packets.load(), 3u);
    EXPECT_EQ(source.counters().bytes.load(), big * 4 + 65527 + 256 * 4);
    EXPECT_EQ(source.counters().malformed.load(), 1u);
}

TEST(udp_source, bind_failure_throws_naming_the_source)
{
    asio::io_context ioc;
    udp::socket taken(ioc, udp::endpoint(loopback, 0));
    udp_source_config cfg;
    cfg.bind_address = "127.0.0.1";
    cfg.port = taken.local_endpoint().port();
    cfg.sample_rate_hz = rate_hz;
    udp_source source(cfg);
    recording_sink sink;
    try {
        source.run(sink);
        FAIL() << "run() returned";
    } catch (const std::runtime_error& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find("udp 127.0.0.1:" + std::to_string(cfg.port)), std::string::npos) << what;
        EXPECT_NE(what.find("cannot bind"), std::string::npos) << what;
    }
}

// ---- VITA-49 ---------------------------------------------------------------------------------

class vita49_sender {
public:
    explicit vita49_sender(std::uint16_t port) : tx_(ioc_, udp::endpoint(loopback, 0)), dst_(loopback, port) {}
    void send(std::span<const std::byte> d)
    {
        tx_.send_to(asio::buffer(d.data(), d.size()), dst_);
        std::this_thread::sleep_for(500us);
    }
    void send_packet(std::uint32_t stream_id, std::uint64_t index, std::span<const cf32> s, bool timestamp)
    {
        vita49::packet_fields f;
        f.stream_id = stream_id;
        f.packet_count = static_cast<std::uint8_t>(index % 16);
        if (timestamp) {
            f.tsf = vita49::tsf_type::sample_count;
            f.fractional_timestamp = index * s.size();
        }
        send(vita49::encode_packet(f, s, scale));
    }

private:
    asio::io_context ioc_;
    udp::socket tx_;
    udp::endpoint dst_;
};

[[nodiscard]] vita49_source_config vita_config(std::optional<std::uint32_t> stream_id)
{
    vita49_source_config cfg;
    cfg.bind_address = "127.0.0.1";
    cfg.port = 0;
    cfg.sample_rate_hz = rate_hz;
    cfg.stream_id = stream_id;
    cfg.rcvbuf_bytes = 1 << 20;
    return cfg;
}

/// An IF Context packet (no timestamps) whose CIF0 announces the bandwidth and the sample rate.
[[nodiscard]] std::vector<std::byte> context_with_rate(std::uint32_t stream, double sender_rate_hz)
{
    std::vector<std::byte> ctx(4 * 7);
    auto word = [&](std::size_t i, std::uint32_t v) {
        for (int b = 0; b < 4; ++b) ctx[4 * i + static_cast<std::size_t>(b)] = std::byte{static_cast<unsigned char>(v >> (24 - 8 * b))};
    };
    word(0, (4u << 28) | 7u);
    word(1, stream);
    word(2, (1u << 29) | (1u << 21));  // bandwidth (2 words), then the sample rate (2 words)
    word(3, 0);
    word(4, 0x12345u);
    const auto raw = static_cast<std::uint64_t>(std::llround(sender_rate_hz * 1048576.0));
    word(5, static_cast<std::uint32_t>(raw >> 32));
    word(6, static_cast<std::uint32_t>(raw));
    return ctx;
}

// sample_rate_hz 0 takes the rate from the sender's IF Context packets. Data before
// the first one is counted, not delivered; a context packet of another stream id does not
// count when stream_id is set; the samples after it are delivered at the learned rate.
TEST(vita49_source, the_sample_rate_comes_from_the_senders_context_packet)
{
    constexpr std::size_t spp = 100;
    const auto all = ci16_samples(spp * 6, 12);
    auto cfg = vita_config(7);
    cfg.sample_rate_hz = 0.0;
    cfg.allow = {"127.0.0.1/32"};
    vita49_source source(cfg);
    EXPECT_NE(source.describe().find("rate from the sender's context"), std::string::npos) << source.describe();
    auto rate = std::async(std::launch::async, [&source] { return source.sample_rate_hz(); });
    const std::uint16_t port = wait_local_port(source);
    ASSERT_NE(port, 0);
    vita49_sender tx(port);
    tx.send_packet(7, 0, std::span<const cf32>(all.data(), spp), true);  // before the rate: counted
    tx.send(context_with_rate(9, 5e6));                                  // another stream: ignored
    tx.send(context_with_rate(7, 500.0));                                // a rate nobody receives: ignored, not fatal
    tx.send(context_with_rate(7, 30.72e6));
    ASSERT_EQ(rate.wait_for(5000ms), std::future_status::ready);
    EXPECT_EQ(rate.get(), 30.72e6);
    EXPECT_EQ(source.sample_rate_hz(), 30.72e6);
    const auto& v = source.vita_counters();
    EXPECT_EQ(v.packets_before_rate.load(), 1u);
    EXPECT_EQ(v.samples_before_rate.load(), spp);
    EXPECT_EQ(v.context_packets.load(), 3u);
    EXPECT_EQ(v.context_rates_refused.load(), 1u);

    recording_sink sink;
    sink.stop_source_at(source, 5 * spp);
    background_run run(source, sink);
    for (std::size_t k = 1; k < 6; ++k) tx.send_packet(7, k, std::span<const cf32>(all.data() + k * spp, spp), true);
    ASSERT_TRUE(run.finished_within(5000ms));
    EXPECT_EQ(sink.samples(), std::vector<cf32>(all.begin() + spp, all.end()));
    EXPECT_EQ(v.context_rate_mismatches.load(), 0u);
}

TEST(vita49_source, no_context_packet_with_a_rate_is_a_clear_error)
{
    auto cfg = vita_config(std::nullopt);
    cfg.sample_rate_hz = 0.0;
    EXPECT_THROW(vita49_source{cfg}, std::invalid_argument) << "the rate from anyone's context packet";
    cfg.stream_id = 7;
    cfg.allow = {"127.0.0.1/32"};
    cfg.context_timeout_s = 0.3;
    vita49_source source(cfg);
    try {
        (void)source.sample_rate_hz();
        ADD_FAILURE() << "no rate, no error";
    } catch (const std::runtime_error& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find("no IF Context packet with a sample rate"), std::string::npos) << what;
        EXPECT_NE(what.find("sample_rate_hz"), std::string::npos) << what;
    }
    cfg.context_timeout_s = 0.0;
    EXPECT_THROW(vita49_source{cfg}, std::invalid_argument);
}

TEST(vita49_source, dropped_datagrams_give_exact_gaps_and_counters)
{
    constexpr std::size_t spp = 100, num_packets = 40;
    const auto all = ci16_samples(spp * num_packets, 8);
    vita49_source source(vita_config(7));
    recording_sink sink;
    std::vector<cf32> expected;
    const std::vector<std::size_t> dropped{3, 4, 10, 20};
    for (std::size_t k = 0; k < num_packets; ++k)
        if (std::find(dropped.begin(), dropped.end(), k) == dropped.end())
            expected.insert(expected.end(), all.begin() + k * spp, all.begin() + (k + 1) * spp);
    sink.stop_source_at(source, expected.size());
    background_run run(source, sink);
    const std::uint16_t port = wait_local_port(source);
    ASSERT_NE(port, 0);

    vita49_sender tx(port);
    for (std::size_t k = 0; k < num_packets; ++k) {
        const std::span<const cf32> s(all.data() + k * spp, spp);
        if (k == 6) tx.send_packet(7, 5, std::span<const cf32>(all.data() + 5 * spp, spp), true);  // duplicate of 5
        if (k == 12) {
            std::vector<std::byte> ctx(8);  // a context packet: header + stream id
            ctx[0] = std::byte{0x40};
            ctx[3] = std::byte{2};
            tx.send(ctx);
            tx.send(context_with_rate(7, rate_hz));   // the configured rate: fine
            tx.send(context_with_rate(7, 30.72e6));   // another rate: counted and logged
            tx.send_packet(9, 0, s, true);                          // another stream
            const std::vector<std::byte> junk{std::byte{1}, std::byte{2}, std::byte{3}, std::byte{4}, std::byte{5}};
            tx.send(junk);  // malformed; the next timestamp shows nothing lost: no gap
        }
        if (std::find(dropped.begin(), dropped.end(), k) != dropped.end()) continue;
        tx.send_packet(7, k, s, true);
    }

    ASSERT_TRUE(run.finished_within(5000ms));
    EXPECT_EQ(sink.samples(), expected);
    EXPECT_EQ(sink.narrow_samples(), expected.size());  // VITA-49's ci16 at its width
    EXPECT_EQ(sink.gaps(), (std::vector<gap_event>{{3 * spp, 2 * spp, gap_reason::lost_packets},
                                                   {8 * spp, spp, gap_reason::lost_packets},
                                                   {17 * spp, spp, gap_reason::lost_packets}}));
    const auto& c = source.counters();
    EXPECT_EQ(c.packets_lost.load(), 4u);
    EXPECT_EQ(c.samples_lost.load(), 4 * spp);
    EXPECT_EQ(c.samples.load(), expected.size());
    EXPECT_EQ(c.bytes.load(), expected.size() * 4);
    EXPECT_EQ(c.malformed.load(), 1u);
    EXPECT_EQ(c.packets.load(), num_packets - dropped.size() + 6);  // + duplicate, 3 context, other, junk
    const auto& v = source.vita_counters();
    EXPECT_EQ(v.duplicates.load(), 1u);
    EXPECT_EQ(v.context_packets.load(), 3u);
    EXPECT_EQ(v.context_rate_mismatches.load(), 1u);
    EXPECT_EQ(v.context_sample_rate_hz.load(), 30.72e6);
    EXPECT_EQ(v.other_stream.load(), 1u);
}

// Two stream ids of one radio, paired by their sample-count timestamps into sample times of
// both channels: channel 2 begins two packets late and loses one; a third stream and a packet
// without a timestamp, or with one beyond 2^62 samples, are counted and dropped.
TEST(vita49_source, two_stream_ids_are_paired_by_timestamp_into_two_channels)
{
    constexpr std::size_t spp = 100, num_packets = 30;
    const auto first = ci16_samples(spp * num_packets, 21);
    const auto second = ci16_samples(spp * num_packets, 22);
    auto cfg = vita_config(7);
    cfg.second_stream_id = 8;
    vita49_source source(cfg);
    EXPECT_EQ(source.channels(), 2);
    EXPECT_FALSE(source.ci16_scale().has_value());
    EXPECT_NE(source.describe().find("0x00000007 and 0x00000008: 2 channels paired by timestamp"), std::string::npos)
        << source.describe();
    std::vector<cf32> expected;  // interleaved: channel 1, channel 2 per sample time
    for (std::size_t k = 2; k < num_packets; ++k) {
        if (k == 10) continue;
        for (std::size_t i = k * spp; i < (k + 1) * spp; ++i) {
            expected.push_back(first[i]);
            expected.push_back(second[i]);
        }
    }
    recording_sink sink;
    sink.stop_source_at(source, expected.size());
    background_run run(source, sink);
    const std::uint16_t port = wait_local_port(source);
    ASSERT_NE(port, 0);
    vita49_sender tx(port);
    for (std::size_t k = 0; k < num_packets; ++k) {
        tx.send_packet(7, k, std::span<const cf32>(first.data() + k * spp, spp), true);
        if (k == 5) {
            tx.send_packet(9, k, std::span<const cf32>(first.data(), spp), true);    // another stream
            tx.send_packet(8, k, std::span<const cf32>(second.data(), spp), false);  // no timestamp
            vita49::packet_fields far;  // a sample count beyond 2^62: not placed
            far.stream_id = 7;
            far.tsf = vita49::tsf_type::sample_count;
            far.fractional_timestamp = ~std::uint64_t{0} - 5;
            tx.send(vita49::encode_packet(far, std::span<const cf32>(first.data(), spp), scale));
        }
        if (k >= 2 && k != 10) tx.send_packet(8, k, std::span<const cf32>(second.data() + k * spp, spp), true);
    }
    ASSERT_TRUE(run.finished_within(5000ms));
    EXPECT_EQ(sink.samples(), expected);
    EXPECT_EQ(sink.pairs(), expected.size() / 2);
    EXPECT_EQ(sink.narrow_samples(), 0u);
    // Channel 2's lost packet: channel 1's samples at those times dropped, a gap of them.
    EXPECT_EQ(sink.gaps(), (std::vector<gap_event>{{2 * 8 * spp, spp, gap_reason::lost_packets}}));
    const auto& c = source.counters();
    EXPECT_EQ(c.samples.load(), expected.size() / 2);  // sample times
    EXPECT_EQ(c.packets_lost.load(), 1u);
    EXPECT_EQ(c.samples_lost.load(), spp);
    const auto& v = source.vita_counters();
    EXPECT_EQ(v.other_stream.load(), 1u);
    EXPECT_EQ(v.untimed_packets.load(), 2u);
    EXPECT_EQ(v.unpaired_samples[0].load(), 4 * spp);  // before channel 2 began, at its loss, and the far one
    EXPECT_EQ(v.unpaired_samples[1].load(), spp);      // the packet without a timestamp
    EXPECT_EQ(v.lag_events[0].load() + v.lag_events[1].load(), 0u);
    // The counters reach the registry by name.
    bool named = false;
    for (const auto& kc : source.kind_counters()) {
        if (std::string(kc.counter->name) == "vita49_channel1_unpaired_samples") {
            named = true;
            EXPECT_EQ(kc.value, 4.0 * spp);
        }
    }
    EXPECT_TRUE(named);
}

TEST(vita49_source, without_timestamps_losses_are_estimated_and_malformed_data_is_a_gap)
{
    constexpr std::size_t spp = 64;
    const auto all = ci16_samples(spp * 10, 9);
    vita49_source source(vita_config(std::nullopt));  // locks onto the first stream id
    recording_sink sink;
    std::vector<cf32> expected(all.begin(), all.begin() + 4 * spp);  // packet 4 is lost
    expected.insert(expected.end(), all.begin() + 5 * spp, all.end());
    sink.stop_source_at(source, expected.size());
    background_run run(source, sink);
    const std::uint16_t port = wait_local_port(source);
    ASSERT_NE(port, 0);

    vita49_sender tx(port);
    for (std::size_t k = 0; k < 10; ++k) {
        if (k == 4) continue;  // lost
        if (k == 7) tx.send(std::vector<std::byte>(6, std::byte{0x10}));  // malformed, nothing lost
        tx.send_packet(0x55, k, std::span<const cf32>(all.data() + k * spp, spp), false);
    }
    ASSERT_TRUE(run.finished_within(5000ms));
    EXPECT_EQ(sink.samples(), expected);
    EXPECT_EQ(sink.gaps(), (std::vector<gap_event>{{4 * spp, spp, gap_reason::lost_packets},
                                                   {6 * spp, 0, gap_reason::source_error}}));
    EXPECT_EQ(source.counters().packets_lost.load(), 1u);
    EXPECT_EQ(source.counters().malformed.load(), 1u);
}

// ---- sender allow-lists ----------------------------------------------------------------------

TEST(sender_allow_list, parses_cidr_and_names_bad_entries_with_the_allowed_forms)
{
    address_prefix p;
    EXPECT_EQ(parse_address_prefix("192.168.10.0/24", p), "");
    EXPECT_EQ(p.prefix_bits, 96u + 24u);  // stored as IPv4-mapped IPv6
    EXPECT_EQ(p.address[10], 0xff);
    EXPECT_EQ(p.address[12], 192);
    EXPECT_EQ(parse_address_prefix("10.0.0.5", p), "");
    EXPECT_EQ(p.prefix_bits, 128u);
    EXPECT_EQ(parse_address_prefix("::1/128", p), "");
    EXPECT_EQ(parse_address_prefix("fd00::/8", p), "");
    EXPECT_EQ(p.prefix_bits, 8u);
    EXPECT_EQ(parse_address_prefix("0.0.0.0/0", p), "");

    EXPECT_NE(parse_address_prefix("10.0.0.300", p).find("is not an IPv4 or IPv6 address"), std::string::npos);
    EXPECT_NE(parse_address_prefix("receiver.local", p).find("is not an IPv4 or IPv6 address"), std::string::npos);
    EXPECT_NE(parse_address_prefix("10.0.0.0/33", p).find("prefix length /33, more than an IPv4 address has (/0 .. /32)"),
              std::string::npos);
    EXPECT_NE(parse_address_prefix("fd00::/129", p).find("(/0 .. /128)"), std::string::npos);
    EXPECT_NE(parse_address_prefix("10.0.0.0/", p).find("no prefix length"), std::string::npos);
    EXPECT_NE(parse_address_prefix("10.0.0.0/2x", p).find("no prefix length"), std::string::npos);
    EXPECT_NE(parse_address_prefix("fe80::1%eth0", p).find("zone index"), std::string::npos);
    EXPECT_EQ(parse_address_prefix("192.168.10.5/24", p),
              "has bits set after the /24 prefix (the network is 192.168.10.0/24; one host is 192.168.10.5/32)");

    const auto e = check_allow_list({"192.168.10.0/24", "10.0.0.300", "::1/128", "fd00::1/8"});
    ASSERT_EQ(e.size(), 2u);
    EXPECT_TRUE(e[0].starts_with("allow[1] = '10.0.0.300' is not an IPv4 or IPv6 address or CIDR prefix (allowed: "))
        << e[0];
    EXPECT_NE(e[0].find("192.168.10.0/24 (/0 .. /32) or fd00::/8 (/0 .. /128)"), std::string::npos) << e[0];
    EXPECT_TRUE(e[1].starts_with("allow[3] = 'fd00::1/8' has bits set after the /8 prefix (the network is fd00::/8"))
        << e[1];
    EXPECT_THROW(sender_allow_list({"10.0.0.0/8", "nonsense"}), std::invalid_argument);
}

TEST(sender_allow_list, matches_ipv4_ipv6_and_ipv4_mapped_senders)
{
    const sender_allow_list any;
    EXPECT_TRUE(any.empty());
    EXPECT_TRUE(any.allows("203.0.113.9"));

    const sender_allow_list list({"192.168.10.0/24", "10.0.0.5", "::1/128", "fd00::/8", "172.16.1.128/25"});
    EXPECT_FALSE(list.empty());
    EXPECT_TRUE(list.allows("192.168.10.0"));
    EXPECT_TRUE(list.allows("192.168.10.255"));
    EXPECT_FALSE(list.allows("192.168.11.1"));
    EXPECT_TRUE(list.allows("10.0.0.5"));
    EXPECT_FALSE(list.allows("10.0.0.6"));
    EXPECT_TRUE(list.allows("172.16.1.200"));   // a prefix length not a multiple of 8
    EXPECT_FALSE(list.allows("172.16.1.100"));
    // An IPv4 sender seen on a dual-stack socket (bound to "::") as IPv4-mapped IPv6.
    EXPECT_TRUE(list.allows("::ffff:192.168.10.3"));
    EXPECT_TRUE(list.allows("::ffff:10.0.0.5"));
    EXPECT_FALSE(list.allows("::ffff:10.0.0.6"));
    EXPECT_TRUE(list.allows("::1"));
    EXPECT_FALSE(list.allows("::2"));
    EXPECT_TRUE(list.allows("fd12:3456::1"));
    EXPECT_FALSE(list.allows("fe80::1"));
    EXPECT_FALSE(list.allows("not an address"));

    // 0.0.0.0/0 is every IPv4 sender (mapped ones too), and no IPv6 one.
    const sender_allow_list ipv4_only({"0.0.0.0/0"});
    EXPECT_TRUE(ipv4_only.allows("198.51.100.1"));
    EXPECT_TRUE(ipv4_only.allows("::ffff:198.51.100.1"));
    EXPECT_FALSE(ipv4_only.allows("2001:db8::1"));
}

TEST(net_config, allow_lists_are_validated_and_tcp_connect_refuses_one)
{
    udp_source_config u;
    u.sample_rate_hz = rate_hz;
    u.allow = {"192.168.10.0/24", "10.0.0.0/33"};
    auto e = u.validate();
    ASSERT_EQ(e.size(), 1u);
    EXPECT_TRUE(e[0].starts_with("allow[1] = '10.0.0.0/33' has prefix length /33")) << e[0];
    EXPECT_THROW(udp_source{u}, std::invalid_argument);

    vita49_source_config v;
    v.sample_rate_hz = rate_hz;
    v.allow = {"::1/128", "127.0.0.1"};
    EXPECT_TRUE(v.validate().empty());
    v.stream_timeout_ms = 0;
    EXPECT_TRUE(contains(v.validate(), "stream_timeout_ms = 0 is out of range (allowed: 1 .. 3600000 ms)"));

    tcp_source_config t;
    t.sample_rate_hz = rate_hz;
    t.allow = {"10.0.0.5"};
    EXPECT_TRUE(contains(t.validate(), "allow applies to listen mode only"));
    t.mode = tcp_mode::listen;
    t.host = "0.0.0.0";
    EXPECT_TRUE(t.validate().empty());
    EXPECT_EQ(tcp_source(t).describe(), "tcp listen 0.0.0.0:5000 (ci16_le, 1 MHz, allow-list)");
}

/// A UDP socket sending from a chosen local address (127.0.0.2 is as much loopback as .1).
class udp_sender_from {
public:
    udp_sender_from(const std::string& from, const std::string& to, std::uint16_t port)
        : tx_(ioc_, udp::endpoint(asio::ip::make_address(from), 0)), dst_(asio::ip::make_address(to), port) {}
    void send(std::span<const std::byte> d)
    {
        tx_.send_to(asio::buffer(d.data(), d.size()), dst_);
        std::this_thread::sleep_for(500us);
    }

private:
    asio::io_context ioc_;
    udp::socket tx_;
    udp::endpoint dst_;
};

TEST(udp_source, datagrams_from_senders_outside_the_allow_list_are_dropped_and_counted)
{
    udp_source_config cfg;
    cfg.bind_address = "127.0.0.1";
    cfg.port = 0;
    cfg.sample_rate_hz = rate_hz;
    cfg.rcvbuf_bytes = 0;
    cfg.allow = {"127.0.0.2/32"};
    udp_source source(cfg);
    recording_sink sink;
    const auto sent = ci16_samples(10 * 256, 21);
    const auto bytes = encode_le(sample_format::ci16_le, sent);
    const auto intruder_bytes = encode_le(sample_format::ci16_le, ci16_samples(256, 22));
    sink.stop_source_at(source, sent.size());
    background_run run(source, sink);
    const std::uint16_t port = wait_local_port(source);
    ASSERT_NE(port, 0);

    udp_sender_from allowed("127.0.0.2", "127.0.0.1", port);
    udp_sender_from intruder("127.0.0.1", "127.0.0.1", port);
    for (std::size_t k = 0; k < 10; ++k) {
        intruder.send(intruder_bytes);                                    // refused: not listed
        if (k == 4) intruder.send(std::vector<std::byte>(3, std::byte{1}));  // refused before any parsing
        allowed.send(std::span<const std::byte>(bytes.data() + k * 1024, 1024));
    }

    ASSERT_TRUE(run.finished_within(5000ms));
    EXPECT_EQ(sink.samples(), sent);
    EXPECT_TRUE(sink.gaps().empty());
    const auto& c = source.counters();
    EXPECT_EQ(c.refused.load(), 11u);
    EXPECT_EQ(c.packets.load(), 10u);  // refused datagrams are not in packets, bytes or malformed
    EXPECT_EQ(c.bytes.load(), bytes.size());
    EXPECT_EQ(c.malformed.load(), 0u);
}

TEST(vita49_source, allow_list_matches_ipv4_senders_on_a_dual_stack_socket)
{
    constexpr std::size_t spp = 100, num_packets = 8;
    vita49_source_config cfg = vita_config(5);
    cfg.bind_address = "::";  // dual stack: IPv4 senders arrive as ::ffff:a.b.c.d
    cfg.allow = {"127.0.0.2"};
    vita49_source source(cfg);
    recording_sink sink;
    const auto all = ci16_samples(spp * num_packets, 23);
    sink.stop_source_at(source, all.size());
    background_run run(source, sink);
    const std::uint16_t port = wait_local_port(source);
    if (port == 0) GTEST_SKIP() << "no IPv6: cannot bind '::'";

    udp_sender_from allowed("127.0.0.2", "127.0.0.1", port);
    udp_sender_from intruder("127.0.0.1", "127.0.0.1", port);
    std::optional<udp_sender_from> intruder_v6;
    try {
        intruder_v6.emplace("::1", "::1", port);
    } catch (const boost::system::system_error&) {
        // no IPv6 loopback address here: the IPv4 intruder still tests the mapping
    }
    for (std::size_t k = 0; k < num_packets; ++k) {
        vita49::packet_fields f;
        f.stream_id = 5;
        f.packet_count = static_cast<std::uint8_t>(k % 16);
        f.tsf = vita49::tsf_type::sample_count;
        f.fractional_timestamp = k * spp;
        const auto d = vita49::encode_packet(f, std::span<const cf32>(all.data() + k * spp, spp), scale);
        // The same packet from a refused sender first: were it accepted, the allowed one
        // would be a duplicate and dropped.
        intruder.send(d);
        if (intruder_v6) intruder_v6->send(d);
        allowed.send(d);
    }
    ASSERT_TRUE(run.finished_within(5000ms));
    EXPECT_EQ(sink.samples(), all);
    EXPECT_TRUE(sink.gaps().empty());
    EXPECT_EQ(source.counters().refused.load(), num_packets * (intruder_v6 ? 2u : 1u));
    EXPECT_EQ(source.vita_counters().duplicates.load(), 0u);
    EXPECT_EQ(source.counters().packets.load(), num_packets);
}

TEST(tcp_source, listen_mode_resets_clients_outside_the_allow_list)
{
    tcp_source source(listen_config({"127.0.0.2/32"}));
    recording_sink sink;
    const auto sent = ci16_samples(1000, 24);
    const auto bytes = encode_le(sample_format::ci16_le, sent);
    sink.stop_source_at(source, sent.size());
    background_run run(source, sink);
    const std::uint16_t port = wait_local_port(source);
    ASSERT_NE(port, 0);

    asio::io_context ioc;
    for (int k = 0; k < 2; ++k) {
        tcp::socket intruder(ioc, tcp::endpoint(loopback, 0));  // from 127.0.0.1: not listed
        intruder.connect(tcp::endpoint(loopback, port));
        boost::system::error_code ec;
        asio::write(intruder, asio::buffer(bytes.data(), 64), ec);
        std::byte b{};
        (void)intruder.read_some(asio::buffer(&b, 1), ec);
        EXPECT_TRUE(ec == asio::error::connection_reset || ec == asio::error::eof) << ec.message();
    }
    EXPECT_TRUE(wait_until([&] { return source.counters().refused.load() == 2; }));
    EXPECT_FALSE(source.connected());

    tcp::socket client(ioc, tcp::endpoint(asio::ip::make_address("127.0.0.2"), 0));
    client.connect(tcp::endpoint(loopback, port));
    asio::write(client, asio::buffer(bytes));
    ASSERT_TRUE(run.finished_within(5000ms));
    EXPECT_EQ(sink.samples(), sent);  // nothing of the refused clients' bytes
    EXPECT_TRUE(sink.gaps().empty());  // a refused client is no connection: no reconnect gap
    EXPECT_EQ(source.counters().refused.load(), 2u);
    EXPECT_EQ(source.counters().reconnects.load(), 0u);
}

// ---- VITA-49 stream id changes ---------------------------------------------------------------

[[nodiscard]] std::vector<std::byte> vita_packet(std::uint32_t stream_id, std::uint64_t index, std::span<const cf32> s,
                                                 std::uint64_t first_sample = 0)
{
    vita49::packet_fields f;
    f.stream_id = stream_id;
    f.packet_count = static_cast<std::uint8_t>(index % 16);
    f.tsf = vita49::tsf_type::sample_count;
    f.fractional_timestamp = first_sample + index * s.size();
    return vita49::encode_packet(f, s, scale);
}

TEST(vita49_source, follow_takes_a_new_stream_id_once_the_old_one_is_silent)
{
    constexpr std::size_t spp = 100;
    vita49_source_config cfg = vita_config(std::nullopt);
    cfg.stream_timeout_ms = 150;
    ASSERT_EQ(cfg.stream_change, stream_change_policy::follow);  // the default
    vita49_source source(cfg);
    EXPECT_NE(source.describe().find("follows a new one after 150 ms of silence"), std::string::npos)
        << source.describe();
    recording_sink sink;
    const auto a = ci16_samples(spp * 10, 25);
    const auto b = ci16_samples(spp * 12, 26);
    std::vector<cf32> expected(a);
    expected.insert(expected.end(), b.begin() + spp, b.begin() + 11 * spp);  // b's packets 1 .. 10
    sink.stop_source_at(source, expected.size());
    background_run run(source, sink);
    const std::uint16_t port = wait_local_port(source);
    ASSERT_NE(port, 0);

    vita49_sender tx(port);
    const auto a_packet = [&](std::uint64_t k) { return std::span<const cf32>(a.data() + k * spp, spp); };
    const auto b_packet = [&](std::uint64_t k) { return std::span<const cf32>(b.data() + k * spp, spp); };
    for (std::uint64_t k = 0; k < 10; ++k) tx.send(vita_packet(0xA, k, a_packet(k)));
    // Stream 0xB while 0xA is alive: dropped and counted, no change (two live senders on one
    // port must not make the source flip between them).
    tx.send(vita_packet(0xB, 0, b_packet(0), 777'000));
    std::this_thread::sleep_for(300ms);  // 0xA falls silent (the sender restarted with a new id)
    for (std::uint64_t k = 1; k <= 10; ++k) {
        // A new sender counts from anywhere: its first packet is taken as the start, no loss.
        tx.send(vita_packet(0xB, k, b_packet(k), 777'000));
        if (k == 5) tx.send(vita_packet(0xA, 10, a_packet(0)));  // 0xA back while 0xB lives: dropped
    }

    ASSERT_TRUE(run.finished_within(5000ms));
    EXPECT_EQ(sink.samples(), expected);
    EXPECT_EQ(sink.gaps(), (std::vector<gap_event>{{10 * spp, 0, gap_reason::discontinuity}}));
    const auto& v = source.vita_counters();
    EXPECT_EQ(v.stream_changes.load(), 1u);
    EXPECT_EQ(v.other_stream.load(), 2u);
    EXPECT_EQ(v.resyncs.load(), 0u);
    EXPECT_EQ(source.counters().packets_lost.load(), 0u);
    EXPECT_EQ(source.counters().samples_lost.load(), 0u);
}

TEST(vita49_source, stay_and_a_configured_stream_id_never_change_the_stream)
{
    constexpr std::size_t spp = 100;
    for (const bool configured_id : {false, true}) {
        SCOPED_TRACE(configured_id ? "stream_id: 0xA (follow is the default, and does not apply)" : "stream_change: stay");
        vita49_source_config cfg = vita_config(configured_id ? std::optional<std::uint32_t>(0xA) : std::nullopt);
        cfg.stream_timeout_ms = 50;
        if (!configured_id) cfg.stream_change = stream_change_policy::stay;
        vita49_source source(cfg);
        recording_sink sink;
        const auto a = ci16_samples(spp * 10, 27);
        sink.stop_source_at(source, a.size());
        background_run run(source, sink);
        const std::uint16_t port = wait_local_port(source);
        ASSERT_NE(port, 0);

        vita49_sender tx(port);
        const auto a_packet = [&](std::uint64_t k) { return std::span<const cf32>(a.data() + k * spp, spp); };
        for (std::uint64_t k = 0; k < 5; ++k) tx.send(vita_packet(0xA, k, a_packet(k)));
        std::this_thread::sleep_for(200ms);  // silent far beyond stream_timeout_ms
        for (std::uint64_t k = 0; k < 8; ++k) tx.send(vita_packet(0xB, k, a_packet(0), 5'000'000));
        for (std::uint64_t k = 5; k < 10; ++k) tx.send(vita_packet(0xA, k, a_packet(k)));

        ASSERT_TRUE(run.finished_within(5000ms));
        EXPECT_EQ(sink.samples(), a);
        EXPECT_TRUE(sink.gaps().empty());
        EXPECT_EQ(source.vita_counters().other_stream.load(), 8u);
        EXPECT_EQ(source.vita_counters().stream_changes.load(), 0u);
    }
}

// ---- paq-stream end to end ------------------------------------------------------------------

/// A ci16 SigMF recording at rate_hz in a per-test directory, and paq-stream run against it.
class paq_stream_test : public ::testing::Test {
protected:
    void SetUp() override
    {
        const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
        dir_ = std::filesystem::temp_directory_path() /
               ("paq_test_net_" + std::string(info->name()) + "_" + std::to_string(::getpid()));
        std::filesystem::remove_all(dir_);
        ASSERT_TRUE(std::filesystem::create_directories(dir_));
        sent_ = ci16_samples(20000, 10);
        sigmf_meta meta;
        meta.format = sample_format::ci16_le;
        meta.sample_rate_hz = rate_hz;
        auto w = sample_file_writer::create_sigmf(dir_ / "rec", meta);
        w.write(sent_);
        w.close();
    }
    void TearDown() override
    {
        std::error_code ec;
        std::filesystem::remove_all(dir_, ec);
    }
    /// Runs paq-stream with these arguments after the recording; returns its exit status and
    /// fills `output` with what it printed.
    int stream(const std::string& args, std::string& output, const std::string& input = "rec")
    {
        const auto log = dir_ / "paq-stream.log";
        const std::string cmd = std::string(PAQ_BINARY_DIR) + "/tools/paq-stream " + (dir_ / input).string() + " " +
                                args + " > " + log.string() + " 2>&1";
        const int status = std::system(cmd.c_str());
        std::ifstream in(log);
        std::ostringstream os;
        os << in.rdbuf();
        output = os.str();
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    }

    std::filesystem::path dir_;
    std::vector<cf32> sent_;
};

TEST_F(paq_stream_test, vita49_with_dropped_datagrams)
{
    vita49_source source(vita_config(3));
    recording_sink sink;
    // 20 datagrams of 1000; every 5th (indices 4, 9, 14, 19) is skipped.
    std::vector<cf32> expected;
    for (std::size_t k = 0; k < 20; ++k)
        if (k % 5 != 4) expected.insert(expected.end(), sent_.begin() + k * 1000, sent_.begin() + (k + 1) * 1000);
    sink.stop_source_at(source, expected.size());
    background_run run(source, sink);
    const std::uint16_t port = wait_local_port(source);
    ASSERT_NE(port, 0);

    std::string out;
    ASSERT_EQ(stream("--mode vita49 --port " + std::to_string(port) +
                         " --stream-id 3 --samples-per-packet 1000 --drop-every 5",
                     out),
              0)
        << out;
    EXPECT_NE(out.find("sent 16000 samples in 16 datagrams"), std::string::npos) << out;
    EXPECT_NE(out.find("dropped 4 datagrams (4000 samples)"), std::string::npos) << out;

    ASSERT_TRUE(run.finished_within(5000ms));
    EXPECT_EQ(sink.samples(), expected);
    EXPECT_EQ(sink.gaps(), (std::vector<gap_event>{{4000, 1000, gap_reason::lost_packets},
                                                   {8000, 1000, gap_reason::lost_packets},
                                                   {12000, 1000, gap_reason::lost_packets}}));
    EXPECT_EQ(source.counters().packets_lost.load(), 3u);  // the last drop is not seen: nothing follows it
}

TEST_F(paq_stream_test, tcp_connect_into_a_listening_source)
{
    tcp_source_config cfg;
    cfg.mode = tcp_mode::listen;
    cfg.port = 0;
    cfg.sample_rate_hz = rate_hz;
    cfg.end_on_close = true;
    tcp_source source(cfg);
    recording_sink sink;
    background_run run(source, sink);
    const std::uint16_t port = wait_local_port(source);
    ASSERT_NE(port, 0);

    std::string out;
    ASSERT_EQ(stream("--mode tcp-connect --port " + std::to_string(port) + " --fast", out), 0) << out;
    ASSERT_TRUE(run.finished_within(5000ms));
    EXPECT_EQ(sink.samples(), sent_);
}

// --channel twice: both channels of a two-channel recording, interleaved a sample of each per
// sample time, into a TCP source of two channels: the recording's pairs exactly.
TEST_F(paq_stream_test, two_channels_interleaved_into_a_source_of_two)
{
    sigmf_meta meta;
    meta.format = sample_format::ci16_le;
    meta.sample_rate_hz = rate_hz;
    meta.num_channels = 2;
    {
        auto w = sample_file_writer::create_sigmf(dir_ / "two", meta);
        w.write(sent_);  // 10000 sample times
        w.close();
    }
    tcp_source_config cfg;
    cfg.mode = tcp_mode::listen;
    cfg.port = 0;
    cfg.sample_rate_hz = rate_hz;
    cfg.end_on_close = true;
    cfg.channels = 2;
    tcp_source source(cfg);
    recording_sink sink;
    background_run run(source, sink);
    const std::uint16_t port = wait_local_port(source);
    ASSERT_NE(port, 0);
    std::string out;
    ASSERT_EQ(stream("--mode tcp-connect --port " + std::to_string(port) + " --fast --channel 1 --channel 2", out, "two"), 0) << out;
    ASSERT_TRUE(run.finished_within(5000ms));
    EXPECT_EQ(sink.samples(), sent_);
    EXPECT_EQ(sink.pairs(), sent_.size() / 2);
    EXPECT_NE(out.find("sent 10000 sample times of 2 channels"), std::string::npos) << out;
    EXPECT_EQ(stream("--mode zmq-push --port 5000 --channel 1 --channel 2", out, "two"), 2);
    EXPECT_NE(out.find("two channels (--channel twice) go over --mode udp, tcp-connect and tcp-listen"), std::string::npos) << out;
    EXPECT_EQ(stream("--mode udp --port 5000 --channel 2 --channel 2", out, "two"), 2);

    // VITA-49: a stream id each (1 and 2), the same timestamps; a VITA-49 source of two
    // channels pairs them back into the recording's sample times.
    auto vcfg = vita_config(1);
    vcfg.second_stream_id = 2;
    vita49_source vsource(vcfg);
    recording_sink vsink;
    vsink.stop_source_at(vsource, sent_.size());
    background_run vrun(vsource, vsink);
    const std::uint16_t vport = wait_local_port(vsource);
    ASSERT_NE(vport, 0);
    ASSERT_EQ(stream("--mode vita49 --port " + std::to_string(vport) + " --samples-per-packet 500 --channel 1 --channel 2", out,
                     "two"),
              0)
        << out;
    ASSERT_TRUE(vrun.finished_within(5000ms));
    EXPECT_EQ(vsink.samples(), sent_);
    EXPECT_TRUE(vsink.gaps().empty());
    EXPECT_NE(out.find("sent 10000 sample times of 2 channels in 40 datagrams"), std::string::npos) << out;
    EXPECT_EQ(stream("--mode vita49 --port 5000 --channel 1 --channel 2 --no-timestamps", out, "two"), 2);
    EXPECT_NE(out.find("pairs the two streams by their timestamps"), std::string::npos) << out;
    EXPECT_EQ(stream("--mode vita49 --port 5000 --channel 1 --channel 2 --second-stream-id 1", out, "two"), 2);
    EXPECT_EQ(stream("--mode vita49 --port 5000 --second-stream-id 3", out, "two"), 2);
}

TEST_F(paq_stream_test, bad_arguments_exit_2_and_io_errors_exit_1)
{
    std::string out;
    EXPECT_EQ(stream("--mode tcp-connect --port 5000 --drop-every 3", out), 2);
    EXPECT_NE(out.find("--drop-every applies to --mode udp and vita49 only"), std::string::npos) << out;
    EXPECT_EQ(stream("--mode carrier-pigeon --port 5000", out), 2);
    EXPECT_EQ(stream("--mode udp --port 5000 --samples-per-packet 20000", out), 2);
    EXPECT_NE(out.find("more than UDP's 65507"), std::string::npos) << out;

    asio::io_context ioc;
    std::uint16_t closed_port = 0;
    {
        tcp::acceptor probe(ioc, tcp::endpoint(loopback, 0));
        closed_port = probe.local_endpoint().port();
    }
    EXPECT_EQ(stream("--mode tcp-connect --port " + std::to_string(closed_port), out), 1);
    EXPECT_NE(out.find("cannot connect to 127.0.0.1:" + std::to_string(closed_port)), std::string::npos) << out;
}

// ---- stop() ----------------------------------------------------------------------------------

TEST(net_sources, stop_from_another_thread_ends_run_promptly)
{
    asio::io_context ioc;
    std::uint16_t closed_port = 0;
    {
        tcp::acceptor probe(ioc, tcp::endpoint(loopback, 0));
        closed_port = probe.local_endpoint().port();
    }
    tcp_source_config connecting;  // keeps retrying a refused connection
    connecting.port = closed_port;
    connecting.sample_rate_hz = rate_hz;
    tcp_source_config listening;
    listening.mode = tcp_mode::listen;
    listening.port = 0;
    listening.sample_rate_hz = rate_hz;
    udp_source_config u;
    u.bind_address = "127.0.0.1";
    u.port = 0;
    u.sample_rate_hz = rate_hz;
    u.rcvbuf_bytes = 0;

    std::vector<std::unique_ptr<sample_source>> sources;
    sources.push_back(std::make_unique<tcp_source>(connecting));
    sources.push_back(std::make_unique<tcp_source>(listening));
    sources.push_back(std::make_unique<udp_source>(u));
    sources.push_back(std::make_unique<vita49_source>(vita_config(1)));
    for (auto& s : sources) {
        SCOPED_TRACE(s->describe());
        recording_sink sink;
        background_run run(*s, sink);
        std::this_thread::sleep_for(50ms);
        const auto t0 = std::chrono::steady_clock::now();
        std::thread stopper([&] { s->stop(); });
        stopper.join();
        EXPECT_TRUE(run.finished_within(1000ms));
        EXPECT_LT(std::chrono::steady_clock::now() - t0, 500ms);
    }
}

TEST(net_sources, stop_before_run_makes_run_return_at_once)
{
    udp_source_config u;
    u.bind_address = "127.0.0.1";
    u.port = 0;
    u.sample_rate_hz = rate_hz;
    udp_source source(u);
    source.stop();
    source.stop();  // more than once is fine
    recording_sink sink;
    background_run run(source, sink);
    EXPECT_TRUE(run.finished_within(1000ms));
}

}  // namespace
