// iio_source's logic against a fake radio (configuration order, conversion, refill loop,
// reconnection with backoff, stop(), fatal start-up errors), its configuration's validation,
// and the libiio implementation's failure on an unreachable context.
#include "io/iio_source.hpp"

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <random>
#include <sstream>
#include <thread>
#include <variant>

namespace {

using namespace paq;
using namespace paq::io;
using clock_type = std::chrono::steady_clock;

// --- test doubles ---

/// A scripted radio. refill() plays `script` (blocks of I/Q words or negative errnos); once
/// it is empty, refill() calls on_exhausted (if set) and then blocks until cancel().
class fake_radio final : public iio_device_api {
public:
    using step = std::variant<std::vector<std::int16_t>, int>;

    // Set up by the test before run().
    std::deque<step> script;
    std::function<void()> on_exhausted;
    int open_failures = 0;          ///< the next N open() calls throw
    bool open_always_fails = false;
    std::map<std::string, int> refuse;  ///< "channel/attr" -> negative errno
    std::string readback_rate;          ///< when set, what sampling_frequency reads back as
    unsigned bits = 12;

    // Observed.
    std::vector<std::string> calls;
    std::vector<clock_type::time_point> open_times;
    std::atomic<int> cancels{0};

    void open(const iio_config& config) override
    {
        log("open " + config.uri);
        open_times.push_back(clock_type::now());
        if (open_always_fails || open_failures > 0) {
            --open_failures;
            throw std::runtime_error("fake: cannot reach " + config.uri);
        }
        open_ = true;
    }
    int write_phy_attr(std::string_view channel, bool output, std::string_view attr, std::string_view value) override
    {
        const std::string key = std::string(channel) + (output ? "(out)" : "") + "/" + std::string(attr);
        log("write " + key + "=" + std::string(value));
        if (!open_) return -EBADF;
        if (const auto it = refuse.find(std::string(channel) + "/" + std::string(attr)); it != refuse.end()) {
            return it->second;
        }
        attrs_[key] = std::string(value);
        return 0;
    }
    int read_phy_attr(std::string_view channel, bool output, std::string_view attr, std::string& value) override
    {
        const std::string key = std::string(channel) + (output ? "(out)" : "") + "/" + std::string(attr);
        if (!open_) return -EBADF;
        if (key == "voltage0/sampling_frequency" && !readback_rate.empty()) {
            value = readback_rate;
            return 0;
        }
        const auto it = attrs_.find(key);
        if (it == attrs_.end()) return -ENOENT;
        value = it->second;
        return 0;
    }
    void start_rx(std::size_t buffer_samples, int channels) override
    {
        log("start_rx " + std::to_string(buffer_samples) + (channels == 2 ? " x2" : ""));
        if (!open_) throw std::runtime_error("fake: start_rx before open");
    }
    unsigned sample_bits() const override { return bits; }
    iio_refill_result refill() override
    {
        if (!script.empty()) {
            step s = std::move(script.front());
            script.pop_front();
            if (const int* err = std::get_if<int>(&s)) {
                return {{}, *err};
            }
            current_ = std::get<std::vector<std::int16_t>>(std::move(s));
            return {current_, 0};
        }
        if (on_exhausted) on_exhausted();
        std::unique_lock lock(mutex_);
        cv_.wait(lock, [this] { return cancelled_; });
        return {{}, -ECANCELED};
    }
    void close() noexcept override
    {
        if (open_) log("close");
        open_ = false;
    }
    void cancel() noexcept override
    {
        ++cancels;
        std::lock_guard lock(mutex_);
        cancelled_ = true;
        cv_.notify_all();
    }

private:
    void log(std::string s) { calls.push_back(std::move(s)); }

    bool open_ = false;
    std::map<std::string, std::string> attrs_;
    std::vector<std::int16_t> current_;
    std::mutex mutex_;
    std::condition_variable cv_;
    bool cancelled_ = false;
};

struct recording_sink final : sample_sink {
    struct gap_event {
        std::uint64_t lost;
        gap_reason reason;
    };
    std::vector<std::variant<std::vector<cf32>, gap_event>> events;

    void write(std::span<const cf32> samples) override { events.emplace_back(std::vector<cf32>(samples.begin(), samples.end())); }
    void gap(std::uint64_t lost, gap_reason reason) override { events.emplace_back(gap_event{lost, reason}); }
};

/// Seeded I/Q words in the AD9361's 12-bit range, sign-extended as the HDL delivers them.
std::vector<std::int16_t> random_iq(std::size_t samples, std::uint32_t seed)
{
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int> d(-2048, 2047);
    std::vector<std::int16_t> iq(2 * samples);
    for (auto& w : iq) w = static_cast<std::int16_t>(d(rng));
    return iq;
}

std::vector<cf32> reference(const std::vector<std::int16_t>& iq, double scale)
{
    std::vector<cf32> out(iq.size() / 2);
    for (std::size_t k = 0; k < out.size(); ++k) {
        out[k] = cf32(static_cast<float>(iq[2 * k] / scale), static_cast<float>(iq[2 * k + 1] / scale));
    }
    return out;
}

iio_config test_config()
{
    iio_config c;
    c.uri = "ip:10.0.0.2";
    c.buffer_samples = 4096;
    c.reconnect_interval_s = 0.1;
    c.reconnect_max_interval_s = 0.4;
    return c;
}

/// A source with a fake radio; `radio` stays valid while `source` lives.
struct fixture {
    fake_radio* radio;
    std::unique_ptr<iio_source> source;

    explicit fixture(iio_config config = test_config())
    {
        auto r = std::make_unique<fake_radio>();
        radio = r.get();
        source = std::make_unique<iio_source>(std::move(config), std::move(r));
        // Once the script is played, end the run the way the daemon does: stop().
        radio->on_exhausted = [this] { source->stop(); };
    }
};

/// Routes spdlog's default logger into a string for the test's lifetime.
class captured_default_log {
public:
    captured_default_log() : old_(spdlog::default_logger())
    {
        spdlog::set_default_logger(
            std::make_shared<spdlog::logger>("test", std::make_shared<spdlog::sinks::ostream_sink_mt>(text_)));
    }
    ~captured_default_log() { spdlog::set_default_logger(old_); }
    captured_default_log(const captured_default_log&) = delete;
    captured_default_log& operator=(const captured_default_log&) = delete;
    [[nodiscard]] std::string text() const { return text_.str(); }

private:
    std::ostringstream text_;
    std::shared_ptr<spdlog::logger> old_;
};

// --- configuration ---

TEST(iio_config, defaults_are_valid)
{
    const iio_config c;
    EXPECT_TRUE(c.validate().empty()) << c.validate().front();
    EXPECT_EQ(c.uri, "ip:192.168.2.1");
    EXPECT_EQ(c.phy_device, "ad9361-phy");
    EXPECT_EQ(c.rx_device, "cf-ad9361-lpc");
    EXPECT_EQ(c.gain_mode, iio_gain_mode::slow_attack);
}

struct bad_field_case {
    const char* name;
    std::function<void(iio_config&)> mutate;
    const char* expect_field;
    const char* expect_value;
    const char* expect_range;
};

class iio_config_bad : public ::testing::TestWithParam<bad_field_case> {};

TEST_P(iio_config_bad, message_names_field_value_and_range)
{
    iio_config c;
    GetParam().mutate(c);
    const auto errors = c.validate();
    ASSERT_EQ(errors.size(), 1u) << (errors.empty() ? "no error" : errors[0] + " / ...");
    EXPECT_EQ(errors[0].rfind(GetParam().expect_field, 0), 0u) << errors[0];
    EXPECT_NE(errors[0].find(GetParam().expect_value), std::string::npos) << errors[0];
    EXPECT_NE(errors[0].find(GetParam().expect_range), std::string::npos) << errors[0];
}

INSTANTIATE_TEST_SUITE_P(
    fields, iio_config_bad,
    ::testing::Values(
        bad_field_case{"uri", [](iio_config& c) { c.uri = "192.168.2.1"; }, "uri", "'192.168.2.1'", "ip:HOST[:PORT]"},
        bad_field_case{"phy", [](iio_config& c) { c.phy_device.clear(); }, "phy_device", "empty", "ad9361-phy"},
        bad_field_case{"rx", [](iio_config& c) { c.rx_device.clear(); }, "rx_device", "empty", "cf-ad9361-lpc"},
        bad_field_case{"rate_low", [](iio_config& c) { c.sample_rate_hz = 1e6; }, "sample_rate_hz", "1e+06",
                       "2083333 .. 61440000"},
        bad_field_case{"rate_high", [](iio_config& c) { c.sample_rate_hz = 61.44e6 + 1; }, "sample_rate_hz",
                       "6.144e+07", "2083333 .. 61440000"},
        bad_field_case{"rate_nan", [](iio_config& c) { c.sample_rate_hz = std::nan(""); }, "sample_rate_hz", "nan",
                       "2083333 .. 61440000"},
        bad_field_case{"lo_low", [](iio_config& c) { c.lo_hz = 69e6; }, "lo_hz", "6.9e+07", "70000000 .. 6000000000"},
        bad_field_case{"lo_high", [](iio_config& c) { c.lo_hz = 6.1e9; }, "lo_hz", "6.1e+09", "70000000 .. 6000000000"},
        bad_field_case{"bw_low", [](iio_config& c) { c.rf_bandwidth_hz = 100e3; }, "rf_bandwidth_hz", "100000",
                       "200000 .. 56000000"},
        bad_field_case{"bw_high", [](iio_config& c) { c.rf_bandwidth_hz = 60e6; }, "rf_bandwidth_hz", "6e+07",
                       "200000 .. 56000000"},
        bad_field_case{"gain_low", [](iio_config& c) { c.gain_db = -4; }, "gain_db", "-4", "-3 .. 71"},
        bad_field_case{"gain_high", [](iio_config& c) { c.gain_db = 72; }, "gain_db", "72", "-3 .. 71"},
        bad_field_case{"buffer_small", [](iio_config& c) { c.buffer_samples = 100; }, "buffer_samples", "100",
                       "4096 .. 16777216"},
        bad_field_case{"buffer_big", [](iio_config& c) { c.buffer_samples = (1u << 24) + 1; }, "buffer_samples",
                       "16777217", "4096 .. 16777216"},
        bad_field_case{"reconnect_short", [](iio_config& c) { c.reconnect_interval_s = 0.01; }, "reconnect_interval_s",
                       "0.01", "0.1 .. 60"},
        bad_field_case{"reconnect_max_below_interval",
                       [](iio_config& c) {
                           c.reconnect_interval_s = 10;
                           c.reconnect_max_interval_s = 5;
                       },
                       "reconnect_max_interval_s", "5", "reconnect_interval_s .. 600"},
        bad_field_case{"timeout_small", [](iio_config& c) { c.timeout_ms = 10; }, "timeout_ms", "10", "100 .. 60000"},
        bad_field_case{"timeout_shorter_than_buffer",
                       [](iio_config& c) {
                           c.buffer_samples = 1u << 24;  // 0.81 s at 20.625 MS/s
                           c.timeout_ms = 500;
                       },
                       "timeout_ms", "500", "buffer_samples / sample_rate_hz"},
        bad_field_case{"scale_zero", [](iio_config& c) { c.scale = 0.0f; }, "scale", "0", "> 0"},
        bad_field_case{"scale_inf", [](iio_config& c) { c.scale = std::numeric_limits<float>::infinity(); }, "scale",
                       "inf", "> 0"}),
    [](const auto& p) { return std::string(p.param.name); });

TEST(iio_config, every_bad_field_is_reported)
{
    iio_config c;
    c.lo_hz = 1.0;
    c.gain_db = 100;
    c.scale = -1;
    EXPECT_EQ(c.validate().size(), 3u);
}

TEST(iio_config, gain_modes_parse_and_print)
{
    for (const auto mode :
         {iio_gain_mode::manual, iio_gain_mode::slow_attack, iio_gain_mode::fast_attack, iio_gain_mode::hybrid}) {
        EXPECT_EQ(parse_iio_gain_mode(to_string(mode)), mode);
    }
    try {
        (void)parse_iio_gain_mode("agc");
        FAIL() << "no exception";
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("'agc'"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("manual, slow_attack, fast_attack, hybrid"), std::string::npos);
    }
}

TEST(iio_source, invalid_config_is_rejected_at_construction)
{
    iio_config c = test_config();
    c.lo_hz = 10e9;
    c.scale = 0;
    try {
        iio_source s(c, std::make_unique<fake_radio>());
        FAIL() << "no exception";
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("lo_hz = 1e+10"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("scale = 0"), std::string::npos) << e.what();
    }
}

// --- conversion ---

TEST(iio_convert, scales_seeded_words_like_a_double_reference)
{
    for (const float scale : {1.0f, 512.0f, 2048.0f}) {
        const auto iq = random_iq(10'000, 7);
        std::vector<cf32> out(iq.size() / 2);
        convert_iq(iq, 12, scale, out);
        const auto ref = reference(iq, scale);
        for (std::size_t k = 0; k < out.size(); ++k) {
            // Integers up to 2^11 over a power of two are exact in float.
            ASSERT_EQ(out[k], ref[k]) << "sample " << k << " scale " << scale;
        }
    }
}

TEST(iio_convert, sign_extends_from_the_significant_bits)
{
    // The same 12-bit values with the top four bits cleared (what a device that does not
    // sign-extend would deliver) must convert identically.
    const auto iq = random_iq(4096, 11);
    std::vector<std::int16_t> raw(iq.size());
    for (std::size_t k = 0; k < iq.size(); ++k) raw[k] = static_cast<std::int16_t>(iq[k] & 0x0FFF);
    std::vector<cf32> a(iq.size() / 2), b(iq.size() / 2);
    convert_iq(iq, 12, 512.0f, a);
    convert_iq(raw, 12, 512.0f, b);
    EXPECT_EQ(a, b);
    EXPECT_EQ(a, reference(iq, 512.0));
    // 16-bit data are taken as they are.
    const std::vector<std::int16_t> full = {-32768, 32767};
    std::vector<cf32> c(1);
    convert_iq(full, 16, 1.0f, c);
    EXPECT_EQ(c[0], cf32(-32768.0f, 32767.0f));
}

// --- the source against the fake radio ---

TEST(iio_source, configures_phy_in_order_then_starts)
{
    iio_config c = test_config();
    c.gain_mode = iio_gain_mode::manual;
    c.gain_db = 42.5;
    c.sample_rate_hz = 10e6;
    c.lo_hz = 2.2505e9;
    c.rf_bandwidth_hz = 8e6;
    fixture f(c);
    recording_sink sink;
    f.source->run(sink);
    const std::vector<std::string> expected = {
        "open ip:10.0.0.2",
        "write voltage0/sampling_frequency=10000000",
        "write voltage0/rf_bandwidth=8000000",
        "write altvoltage0(out)/frequency=2250500000",
        "write voltage0/gain_control_mode=manual",
        "write voltage0/hardwaregain=42.5",
        "start_rx 4096",
        "close",
    };
    EXPECT_EQ(f.radio->calls, expected);
}

TEST(iio_source, agc_modes_do_not_write_a_gain)
{
    for (const auto mode : {iio_gain_mode::slow_attack, iio_gain_mode::fast_attack, iio_gain_mode::hybrid}) {
        iio_config c = test_config();
        c.gain_mode = mode;
        fixture f(c);
        recording_sink sink;
        f.source->run(sink);
        const auto& calls = f.radio->calls;
        EXPECT_NE(std::find(calls.begin(), calls.end(),
                            "write voltage0/gain_control_mode=" + std::string(to_string(mode))),
                  calls.end());
        for (const auto& call : calls) EXPECT_EQ(call.find("hardwaregain"), std::string::npos) << call;
    }
}

TEST(iio_source, streams_converted_blocks_and_counts_them)
{
    fixture f;
    const auto a = random_iq(4096, 1);
    const auto b = random_iq(4096, 2);
    f.radio->script = {a, b};
    recording_sink sink;
    f.source->run(sink);
    ASSERT_EQ(sink.events.size(), 2u);
    EXPECT_EQ(std::get<std::vector<cf32>>(sink.events[0]), reference(a, 512.0));
    EXPECT_EQ(std::get<std::vector<cf32>>(sink.events[1]), reference(b, 512.0));
    const auto& n = f.source->counters();
    EXPECT_EQ(n.samples.load(), 8192u);
    EXPECT_EQ(n.packets.load(), 2u);
    EXPECT_EQ(n.bytes.load(), 8192u * 4);
    EXPECT_EQ(n.reconnects.load(), 0u);
}

// Two RX channels (RX1 and RX2 of a 2R2T card): both channels' gain control written, four
// words a sample time captured, delivered as cf32 pairs (RX1, RX2) converted as convert_iq
// converts each channel, counted in sample times.
TEST(iio_source, two_rx_channels_arrive_as_sample_times_of_rx1_and_rx2)
{
    struct pair_sink final : sample_sink {
        std::vector<cf32x2> pairs;
        void write(std::span<const cf32>) override { ADD_FAILURE() << "one-channel write"; }
        void write_x2(std::span<const cf32x2> s) override { pairs.insert(pairs.end(), s.begin(), s.end()); }
        void gap(std::uint64_t, gap_reason) override {}
    };
    iio_config c = test_config();
    c.channels = 2;
    c.gain_mode = iio_gain_mode::manual;
    c.gain_db = 20.0;
    fixture f(c);
    EXPECT_EQ(f.source->channels(), 2);
    EXPECT_FALSE(f.source->ci16_scale().has_value());
    EXPECT_NE(f.source->describe().find("RX1 and RX2"), std::string::npos) << f.source->describe();
    const auto words = random_iq(2 * 4096, 3);  // 4096 sample times of I1 Q1 I2 Q2
    f.radio->script = {words};
    pair_sink sink;
    f.source->run(sink);
    const auto& calls = f.radio->calls;
    for (const char* call : {"write voltage1/gain_control_mode=manual", "write voltage1/hardwaregain=20", "start_rx 4096 x2"}) {
        EXPECT_NE(std::find(calls.begin(), calls.end(), call), calls.end()) << call;
    }
    ASSERT_EQ(sink.pairs.size(), 4096u);
    const auto wide = reference(words, 512.0);  // consecutive (I, Q) pairs: RX1, RX2, RX1, ...
    for (std::size_t k = 0; k < 4096; ++k) {
        ASSERT_EQ(sink.pairs[k].a, wide[2 * k]) << k;
        ASSERT_EQ(sink.pairs[k].b, wide[2 * k + 1]) << k;
    }
    EXPECT_EQ(f.source->counters().samples.load(), 4096u);
    c.channels = 3;
    EXPECT_FALSE(c.validate().empty());
}

// The radio's words go out as ci16 at their width (sign-extended, not scaled:
// write_ci16 with the configured scale), for the live ring to keep them 4 bytes wide; a sink
// that converts gets what convert_iq gives.
TEST(iio_source, delivers_sign_extended_ci16_at_the_configured_scale)
{
    struct width_sink final : sample_sink {
        std::vector<ci16> narrow;
        std::vector<float> scales;
        std::size_t wide_writes = 0;
        void write(std::span<const cf32>) override { ++wide_writes; }
        void write_ci16(std::span<const ci16> s, float scale) override
        {
            narrow.insert(narrow.end(), s.begin(), s.end());
            scales.push_back(scale);
        }
        void gap(std::uint64_t, gap_reason) override {}
    };
    auto config = test_config();
    config.scale = 300.0f;
    fixture f(config);
    ASSERT_TRUE(f.source->ci16_scale().has_value());
    EXPECT_EQ(*f.source->ci16_scale(), 300.0f);
    // 12-bit words as the HDL gives them unextended (0x800 .. 0xFFF are negative).
    std::vector<std::int16_t> raw(2 * 4096);
    std::mt19937 rng(1541);
    std::uniform_int_distribution<int> v(0, 4095);
    for (auto& w : raw) w = static_cast<std::int16_t>(v(rng));
    f.radio->script = {raw};
    width_sink sink;
    f.source->run(sink);
    EXPECT_EQ(sink.wide_writes, 0u);
    ASSERT_EQ(sink.narrow.size(), 4096u);
    ASSERT_EQ(sink.scales, std::vector<float>{300.0f});
    std::vector<cf32> ref(4096);
    convert_iq(raw, 12, 1.0f, ref);  // scale 1: the sign-extended counts themselves
    for (std::size_t k = 0; k < 4096; ++k) {
        ASSERT_EQ(static_cast<float>(sink.narrow[k].re), ref[k].real()) << k;
        ASSERT_EQ(static_cast<float>(sink.narrow[k].im), ref[k].imag()) << k;
        ASSERT_GE(sink.narrow[k].re, -2048);
        ASSERT_LE(sink.narrow[k].re, 2047);
    }
}

TEST(iio_source, refill_error_reports_gap_reconnects_and_resumes)
{
    fixture f;
    const auto a = random_iq(4096, 3);
    const auto b = random_iq(4096, 4);
    f.radio->script = {a, -ETIMEDOUT, b};
    captured_default_log log;
    recording_sink sink;
    f.source->run(sink);

    ASSERT_EQ(sink.events.size(), 3u);
    EXPECT_EQ(std::get<std::vector<cf32>>(sink.events[0]), reference(a, 512.0));
    const auto& gap = std::get<recording_sink::gap_event>(sink.events[1]);
    EXPECT_EQ(gap.lost, 0u);
    EXPECT_EQ(gap.reason, gap_reason::reconnect);
    EXPECT_EQ(std::get<std::vector<cf32>>(sink.events[2]), reference(b, 512.0));
    EXPECT_EQ(f.source->counters().reconnects.load(), 1u);
    EXPECT_EQ(f.source->counters().samples.load(), 8192u);

    // Closed, reopened and fully reconfigured before streaming again.
    const auto& calls = f.radio->calls;
    const auto first_close = std::find(calls.begin(), calls.end(), "close");
    ASSERT_NE(first_close, calls.end());
    const std::vector<std::string> after(first_close + 1, calls.end());
    ASSERT_GE(after.size(), 7u);
    EXPECT_EQ(after[0], "open ip:10.0.0.2");
    EXPECT_EQ(after[1], "write voltage0/sampling_frequency=20625000");
    EXPECT_EQ(after[5], "start_rx 4096");
    EXPECT_NE(log.text().find("Connection timed out"), std::string::npos) << log.text();
}

TEST(iio_source, reconnect_backs_off_exponentially_up_to_the_maximum)
{
    fixture f;  // 0.1 s doubling, at most 0.4 s
    f.radio->script = {random_iq(4096, 5), -EPIPE, random_iq(4096, 6)};
    // Once streaming (the first write), fail the next three opens: the reconnection waits
    // 0.1, 0.2, 0.4 s, then 0.4 s again (capped) before the attempt that succeeds.
    struct arm_on_first_write final : sample_sink {
        recording_sink inner;
        fake_radio* radio = nullptr;
        bool armed = false;
        void write(std::span<const cf32> s) override
        {
            if (!armed) {
                radio->open_failures = 3;
                armed = true;
            }
            inner.write(s);
        }
        void gap(std::uint64_t lost, gap_reason reason) override { inner.gap(lost, reason); }
    } wrapper;
    wrapper.radio = f.radio;
    auto* radio = f.radio;
    const recording_sink& sink = wrapper.inner;
    const auto start = clock_type::now();
    f.source->run(wrapper);
    const double elapsed = std::chrono::duration<double>(clock_type::now() - start).count();

    ASSERT_EQ(radio->open_times.size(), 5u);  // start + 3 failures + success
    const auto gap_s = [&](std::size_t k) {
        return std::chrono::duration<double>(radio->open_times[k] - radio->open_times[k - 1]).count();
    };
    EXPECT_GE(gap_s(2), 0.2 * 0.95);
    EXPECT_GE(gap_s(3), 0.4 * 0.95);
    EXPECT_GE(gap_s(4), 0.4 * 0.95);  // capped at reconnect_max_interval_s
    EXPECT_LT(gap_s(4), 0.8);         // and not doubled again
    EXPECT_GE(elapsed, 1.1 * 0.95);
    // One outage: one gap, one reconnect, however many attempts it took.
    std::size_t gaps = 0;
    for (const auto& e : sink.events) gaps += std::holds_alternative<recording_sink::gap_event>(e);
    EXPECT_EQ(gaps, 1u);
    EXPECT_EQ(f.source->counters().reconnects.load(), 1u);
    EXPECT_EQ(f.source->counters().packets.load(), 2u);
}

TEST(iio_source, stop_during_backoff_returns_promptly)
{
    iio_config c = test_config();
    c.reconnect_interval_s = 60;
    c.reconnect_max_interval_s = 60;
    fixture f(c);
    f.radio->script = {random_iq(4096, 8), -ENODEV};
    f.radio->on_exhausted = nullptr;
    recording_sink sink;
    auto done = std::async(std::launch::async, [&] { f.source->run(sink); });
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const auto t0 = clock_type::now();
    f.source->stop();
    ASSERT_EQ(done.wait_for(std::chrono::seconds(5)), std::future_status::ready) << "run() ignored stop()";
    done.get();
    EXPECT_LT(std::chrono::duration<double>(clock_type::now() - t0).count(), 1.0);
    EXPECT_EQ(f.source->counters().reconnects.load(), 1u);
    EXPECT_EQ(f.radio->open_times.size(), 1u);  // no attempt was due yet
}

TEST(iio_source, stop_from_another_thread_cancels_a_blocked_refill_without_a_gap)
{
    fixture f;
    f.radio->script = {random_iq(4096, 9)};
    f.radio->on_exhausted = nullptr;  // refill() blocks until cancel()
    recording_sink sink;
    auto done = std::async(std::launch::async, [&] { f.source->run(sink); });
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    f.source->stop();
    ASSERT_EQ(done.wait_for(std::chrono::seconds(5)), std::future_status::ready) << "run() ignored stop()";
    done.get();
    EXPECT_GE(f.radio->cancels.load(), 1);
    ASSERT_EQ(sink.events.size(), 1u);  // the one block, no gap for a requested stop
    EXPECT_TRUE(std::holds_alternative<std::vector<cf32>>(sink.events[0]));
    EXPECT_EQ(f.source->counters().reconnects.load(), 0u);
    EXPECT_EQ(f.radio->calls.back(), "close");
}

TEST(iio_source, stop_before_run_never_opens)
{
    fixture f;
    f.source->stop();
    recording_sink sink;
    f.source->run(sink);
    EXPECT_TRUE(f.radio->calls.empty());
    EXPECT_TRUE(sink.events.empty());
}

TEST(iio_source, refused_attribute_at_start_is_fatal_and_named)
{
    iio_config c = test_config();
    c.gain_mode = iio_gain_mode::manual;
    c.gain_db = 70;
    fixture f(c);
    f.radio->refuse["voltage0/hardwaregain"] = -EINVAL;
    recording_sink sink;
    try {
        f.source->run(sink);
        FAIL() << "no exception";
    } catch (const std::runtime_error& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find("ip:10.0.0.2"), std::string::npos) << what;
        EXPECT_NE(what.find("'hardwaregain' = '70'"), std::string::npos) << what;
        EXPECT_NE(what.find("gain_db"), std::string::npos) << what;
        EXPECT_NE(what.find("Invalid argument"), std::string::npos) << what;
    }
    EXPECT_TRUE(sink.events.empty());
    EXPECT_EQ(f.radio->calls.back(), "close");
    EXPECT_EQ(f.radio->open_times.size(), 1u);  // no retry
}

TEST(iio_source, refused_lo_names_the_output_channel)
{
    fixture f;
    f.radio->refuse["altvoltage0/frequency"] = -ERANGE;
    recording_sink sink;
    try {
        f.source->run(sink);
        FAIL() << "no exception";
    } catch (const std::runtime_error& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find("output channel altvoltage0 attribute 'frequency' = '2250000000' (config field lo_hz)"),
                  std::string::npos)
            << what;
    }
}

TEST(iio_source, unreachable_radio_at_start_is_fatal)
{
    fixture f;
    f.radio->open_always_fails = true;
    recording_sink sink;
    try {
        f.source->run(sink);
        FAIL() << "no exception";
    } catch (const std::runtime_error& e) {
        EXPECT_NE(std::string(e.what()).find("cannot reach ip:10.0.0.2"), std::string::npos) << e.what();
    }
    EXPECT_EQ(f.radio->open_times.size(), 1u);
}

TEST(iio_source, warns_when_the_phy_rounds_the_rate)
{
    fixture f;
    f.radio->readback_rate = "20600000";  // 0.12% off; 1 ppm is the tolerance
    captured_default_log log;
    recording_sink sink;
    f.source->run(sink);
    EXPECT_NE(log.text().find("runs at 20600000 Hz, not the configured sample_rate_hz 20625000"), std::string::npos)
        << log.text();
}

TEST(iio_source, a_sub_ppm_rate_difference_is_not_worth_a_warning)
{
    fixture f;
    f.radio->readback_rate = "20624999";  // 0.05 ppm
    captured_default_log log;
    recording_sink sink;
    f.source->run(sink);
    EXPECT_EQ(log.text().find("runs at"), std::string::npos) << log.text();
}

TEST(iio_source, describe_names_uri_devices_and_tuning)
{
    iio_config c = test_config();
    c.gain_mode = iio_gain_mode::manual;
    const iio_source s(c, std::make_unique<fake_radio>());
    EXPECT_EQ(s.describe(),
              "iio ip:10.0.0.2 (ad9361-phy / cf-ad9361-lpc, 20.625 MS/s, LO 2250 MHz, RF bandwidth 16 MHz, gain "
              "manual 30 dB)");
    EXPECT_EQ(s.sample_rate_hz(), 20.625e6);
}

// --- the libiio implementation ---

TEST(libiio_device, unreachable_uri_fails_with_a_clear_error)
{
    // Port 1 on the loopback refuses at once; run in a thread anyway, so that a libiio that
    // waits for its connect timeout instead skips the test rather than hanging it.
    iio_config c;
    c.uri = "ip:127.0.0.1:1";
    c.timeout_ms = 1000;
    auto result = std::make_shared<std::promise<std::string>>();
    auto future = result->get_future();
    std::thread([c, result] {
        try {
            iio_source s(c);
            recording_sink sink;
            s.run(sink);
            result->set_value("no exception");
        } catch (const std::runtime_error& e) {
            result->set_value(std::string("runtime_error: ") + e.what());
        } catch (const std::exception& e) {
            result->set_value(std::string("other exception: ") + e.what());
        }
    }).detach();
    if (future.wait_for(std::chrono::seconds(20)) != std::future_status::ready) {
        GTEST_SKIP() << "libiio did not give up on ip:127.0.0.1:1 within 20 s";
    }
    const std::string what = future.get();
    EXPECT_EQ(what.rfind("runtime_error: ", 0), 0u) << what;
    EXPECT_NE(what.find("cannot open context 'ip:127.0.0.1:1'"), std::string::npos) << what;
    EXPECT_NE(what.find("Connection refused"), std::string::npos) << what;
}

TEST(libiio_device, local_context_without_ad9361_fails_with_a_clear_error)
{
    auto dev = make_libiio_device();
    iio_config c;
    c.uri = "local:";  // no IIO devices on a build machine: the local backend finds nothing
    try {
        dev->open(c);
        // A machine with IIO devices but no AD9361 must still fail, on the missing phy.
        FAIL() << "opened a local context with an ad9361-phy on a build machine";
    } catch (const std::runtime_error& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find("'local:'"), std::string::npos) << what;
    }
    EXPECT_EQ(dev->refill().error, -EBADF);  // closed after the failure
}

}  // namespace
