#include "io/iio_source.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <system_error>
#include <utility>

namespace paq::io {

namespace {

template <typename T>
std::string bad(const char* field, const T& value, const char* range)
{
    std::ostringstream os;
    os << field << " = " << value << " is out of range (allowed: " << range << ")";
    return os.str();
}

std::string errno_text(int negative_errno)
{
    const int err = negative_errno < 0 ? -negative_errno : negative_errno;
    return std::error_code(err, std::generic_category()).message() + " (errno " + std::to_string(err) + ")";
}

/// Shortest decimal form that reads back to the same double ("30", "30.5", "2250000000").
std::string format_number(double value)
{
    char buf[32];
    const auto res = std::to_chars(buf, buf + sizeof(buf), value);
    return std::string(buf, res.ptr);
}

/// An integer attribute (Hz): the driver parses these with kstrtoull and rejects "2.5e9".
std::string format_hz(double hz)
{
    return std::to_string(std::llround(hz));
}

}  // namespace

iio_gain_mode parse_iio_gain_mode(std::string_view name)
{
    return parse_named(iio_gain_mode_names, name, "gain mode");
}

std::vector<std::string> iio_config::validate() const
{
    std::vector<std::string> e;
    const bool known_scheme = uri.starts_with("ip:") || uri.starts_with("usb:") || uri.starts_with("local:") ||
                              uri.starts_with("serial:");
    if (!known_scheme) {
        e.push_back("uri = '" + uri + "' is not a libiio context URI (allowed: ip:HOST[:PORT], usb:[BUS.DEV.INTF], "
                    "local:, serial:PORT,BAUD)");
    }
    if (phy_device.empty()) {
        e.push_back("phy_device is empty (allowed: the phy's IIO device name, e.g. ad9361-phy)");
    }
    if (rx_device.empty()) {
        e.push_back("rx_device is empty (allowed: the capture IIO device name, e.g. cf-ad9361-lpc)");
    }
    if (!(sample_rate_hz >= 2'083'333.0 && sample_rate_hz <= 61'440'000.0)) {
        e.push_back(bad("sample_rate_hz", sample_rate_hz,
                        "2083333 .. 61440000 Hz; lower rates need the AD9361 FIR decimation, not loaded here"));
    }
    if (!(lo_hz >= 70e6 && lo_hz <= 6e9)) {
        e.push_back(bad("lo_hz", lo_hz, "70000000 .. 6000000000 Hz"));
    }
    if (!(rf_bandwidth_hz >= 200e3 && rf_bandwidth_hz <= 56e6)) {
        e.push_back(bad("rf_bandwidth_hz", rf_bandwidth_hz, "200000 .. 56000000 Hz"));
    }
    if (!(gain_db >= -3.0 && gain_db <= 71.0)) {
        e.push_back(bad("gain_db", gain_db, "-3 .. 71 dB"));
    }
    if (channels < 1 || channels > 2) {
        e.push_back(bad("channels", channels, "1 (RX1) or 2 (RX1 and RX2)"));
    }
    if (buffer_samples < 4096 || buffer_samples > (std::size_t{1} << 24)) {
        e.push_back(bad("buffer_samples", buffer_samples, "4096 .. 16777216"));
    }
    if (!(reconnect_interval_s >= 0.1 && reconnect_interval_s <= 60.0)) {
        e.push_back(bad("reconnect_interval_s", reconnect_interval_s, "0.1 .. 60 s"));
    }
    if (!(reconnect_max_interval_s >= reconnect_interval_s && reconnect_max_interval_s <= 600.0)) {
        e.push_back(bad("reconnect_max_interval_s", reconnect_max_interval_s, "reconnect_interval_s .. 600 s"));
    }
    if (timeout_ms < 100 || timeout_ms > 60'000) {
        e.push_back(bad("timeout_ms", timeout_ms, "100 .. 60000 ms"));
    } else if (sample_rate_hz > 0.0 &&
               static_cast<double>(timeout_ms) * 1e-3 <= static_cast<double>(buffer_samples) / sample_rate_hz) {
        e.push_back(bad("timeout_ms", timeout_ms,
                        "longer than one buffer takes to fill: buffer_samples / sample_rate_hz"));
    }
    if (!(scale > 0.0f && std::isfinite(scale))) {
        e.push_back(bad("scale", scale, "finite, > 0"));
    }
    return e;
}

void convert_iq(std::span<const std::int16_t> iq, unsigned bits, float scale, std::span<cf32> out) noexcept
{
    const std::size_t n = std::min(iq.size() / 2, out.size());
    const float inv = 1.0f / scale;
    // Moving the top significant bit to bit 15 and shifting back (arithmetic) sign-extends;
    // a no-op for 16-bit data and for words the HDL already sign-extended.
    const int up = 16 - static_cast<int>(std::clamp(bits, 1u, 16u));
    const auto extend = [up](std::int16_t w) {
        const auto shifted = static_cast<std::int16_t>(static_cast<std::uint16_t>(w) << up);
        return static_cast<float>(shifted >> up);
    };
    for (std::size_t k = 0; k < n; ++k) {
        out[k] = cf32(extend(iq[2 * k]) * inv, extend(iq[2 * k + 1]) * inv);
    }
}

void extend_iq(std::span<const std::int16_t> iq, unsigned bits, std::span<ci16> out) noexcept
{
    const std::size_t n = std::min(iq.size() / 2, out.size());
    const int up = 16 - static_cast<int>(std::clamp(bits, 1u, 16u));
    const auto extend = [up](std::int16_t w) {
        return static_cast<std::int16_t>(static_cast<std::int16_t>(static_cast<std::uint16_t>(w) << up) >> up);
    };
    for (std::size_t k = 0; k < n; ++k) out[k] = ci16{extend(iq[2 * k]), extend(iq[2 * k + 1])};
}

iio_source::iio_source(iio_config config, std::unique_ptr<iio_device_api> device)
    : config_(std::move(config)), device_(device ? std::move(device) : make_libiio_device())
{
    const auto errors = config_.validate();
    if (!errors.empty()) {
        std::string text = "invalid iio source configuration:";
        for (const auto& m : errors) text += "\n  " + m;
        throw std::invalid_argument(text);
    }
}

iio_source::~iio_source()
{
    device_->close();
}

std::string iio_source::describe() const
{
    std::ostringstream os;
    os << "iio " << config_.uri << " (" << config_.phy_device << " / " << config_.rx_device << ", "
       << config_.sample_rate_hz / 1e6 << " MS/s, LO " << config_.lo_hz / 1e6 << " MHz, RF bandwidth "
       << config_.rf_bandwidth_hz / 1e6 << " MHz, gain " << to_string(config_.gain_mode);
    if (config_.gain_mode == iio_gain_mode::manual) os << " " << config_.gain_db << " dB";
    if (config_.channels == 2) os << ", RX1 and RX2";
    os << ")";
    return os.str();
}

void iio_source::configure()
{
    struct step {
        const char* channel;
        bool output;
        const char* attr;
        std::string value;
        const char* field;
    };
    // The order matters to the AD9361 driver: the rate first (it re-derives the clock chain
    // and the analog filter calibration), then the bandwidth for that rate, then the LO;
    // the gain mode before the gain, because the phy refuses hardwaregain unless manual.
    std::vector<step> steps = {
        {"voltage0", false, "sampling_frequency", format_hz(config_.sample_rate_hz), "sample_rate_hz"},
        {"voltage0", false, "rf_bandwidth", format_hz(config_.rf_bandwidth_hz), "rf_bandwidth_hz"},
        {"altvoltage0", true, "frequency", format_hz(config_.lo_hz), "lo_hz"},
        {"voltage0", false, "gain_control_mode", std::string(to_string(config_.gain_mode)), "gain_mode"},
    };
    if (config_.gain_mode == iio_gain_mode::manual) {
        steps.push_back({"voltage0", false, "hardwaregain", format_number(config_.gain_db), "gain_db"});
    }
    // RX2's gain control is its own (the phy's input voltage1); the rate, bandwidth and LO
    // are shared.
    if (config_.channels == 2) {
        steps.push_back({"voltage1", false, "gain_control_mode", std::string(to_string(config_.gain_mode)), "gain_mode"});
        if (config_.gain_mode == iio_gain_mode::manual) {
            steps.push_back({"voltage1", false, "hardwaregain", format_number(config_.gain_db), "gain_db"});
        }
    }
    for (const auto& s : steps) {
        const int rc = device_->write_phy_attr(s.channel, s.output, s.attr, s.value);
        if (rc != 0) {
            throw std::runtime_error("iio source " + config_.uri + ": " + config_.phy_device + " refused " +
                                     (s.output ? "output" : "input") + " channel " + s.channel + " attribute '" +
                                     s.attr + "' = '" + s.value + "' (config field " + s.field +
                                     "): " + errno_text(rc));
        }
    }
    // The phy rounds what it cannot do exactly; the receiver assumes the configured rate.
    std::string actual;
    if (device_->read_phy_attr("voltage0", false, "sampling_frequency", actual) == 0) {
        double hz = 0.0;
        const auto res = std::from_chars(actual.data(), actual.data() + actual.size(), hz);
        if (res.ec == std::errc() && std::abs(hz - config_.sample_rate_hz) > 1e-6 * config_.sample_rate_hz) {
            spdlog::warn("iio source {}: {} runs at {} Hz, not the configured sample_rate_hz {}", config_.uri,
                         config_.phy_device, actual, format_hz(config_.sample_rate_hz));
        }
    }
}

void iio_source::open_and_configure()
{
    try {
        device_->open(config_);
        configure();
        device_->start_rx(config_.buffer_samples, config_.channels);
    } catch (...) {
        device_->close();
        throw;
    }
}

bool iio_source::wait(double seconds)
{
    std::unique_lock lock(wait_mutex_);
    return !wait_cv_.wait_for(lock, std::chrono::duration<double>(seconds), [this] { return stop_.load(); });
}

bool iio_source::reconnect()
{
    device_->close();
    double delay = config_.reconnect_interval_s;
    for (int attempt = 1;; ++attempt) {
        if (!wait(delay)) {
            return false;
        }
        try {
            open_and_configure();
            spdlog::info("iio source {}: reconnected (attempt {})", config_.uri, attempt);
            return true;
        } catch (const std::exception& e) {
            delay = std::min(delay * 2.0, config_.reconnect_max_interval_s);
            spdlog::warn("iio source {}: reconnect attempt {} failed: {}; next in {} s", config_.uri, attempt,
                         e.what(), delay);
        }
    }
}

void iio_source::run(sample_sink& sink)
{
    if (stop_.load()) {
        return;
    }
    open_and_configure();
    // The radio's words, sign-extended, go out as ci16 (4 bytes a sample, converted by the
    // backend), at the configured scale.
    std::vector<ci16> samples(config_.channels == 2 ? 0 : config_.buffer_samples);
    // Two RX channels: each sample time's four words, converted, then paired.
    std::vector<cf32> wide(config_.channels == 2 ? 2 * config_.buffer_samples : 0);
    std::vector<cf32x2> pairs(config_.channels == 2 ? config_.buffer_samples : 0);
    const std::size_t words_per_time = 2 * static_cast<std::size_t>(config_.channels);
    while (!stop_.load()) {
        const iio_refill_result block = device_->refill();
        if (stop_.load()) {
            break;
        }
        if (block.error != 0 || block.iq.size() < words_per_time) {
            spdlog::warn("iio source {}: capture failed: {}; reconnecting", config_.uri,
                         block.error != 0 ? errno_text(block.error) : std::string("empty buffer"));
            sink.gap(0, gap_reason::reconnect);
            counters_.reconnects.fetch_add(1, std::memory_order_relaxed);
            if (!reconnect()) {
                break;
            }
            continue;
        }
        const std::size_t n = block.iq.size() / words_per_time;
        // The radio's samples carry no time here: the host's clock when the buffer came back,
        // less its duration (io/sample_source.hpp; docs/DAEMON.md, "Time").
        const time_anchor a = host_clock_anchor(counters_.samples.load(std::memory_order_relaxed), n, config_.sample_rate_hz);
        time_anchor_.set(a);
        sink.timestamp(a);
        if (config_.channels == 2) {
            if (2 * n > wide.size()) wide.resize(2 * n);
            if (n > pairs.size()) pairs.resize(n);
            convert_iq(block.iq.first(n * words_per_time), device_->sample_bits(), config_.scale, std::span<cf32>(wide.data(), 2 * n));
            pair_channels(std::span<const cf32>(wide.data(), 2 * n), std::span<cf32x2>(pairs.data(), n));
            sink.write_x2(std::span<const cf32x2>(pairs.data(), n));
        } else {
            if (n > samples.size()) {
                samples.resize(n);
            }
            const std::span<ci16> out(samples.data(), n);
            extend_iq(block.iq.first(2 * n), device_->sample_bits(), out);
            sink.write_ci16(out, config_.scale);
        }
        counters_.samples.fetch_add(n, std::memory_order_relaxed);
        counters_.bytes.fetch_add(block.iq.size_bytes(), std::memory_order_relaxed);
        counters_.packets.fetch_add(1, std::memory_order_relaxed);
    }
    device_->close();
}

void iio_source::stop()
{
    stop_.store(true);
    {
        // Taking the mutex orders this store before a waiter's predicate check: no lost wake-up.
        std::lock_guard lock(wait_mutex_);
    }
    wait_cv_.notify_all();
    device_->cancel();
}

}  // namespace paq::io
