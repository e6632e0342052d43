// A sample_source for an AD9361-class transceiver (ADALM-Pluto, FMCOMMS2/3/4/5, ...) through
// libiio: configures the phy, streams RX1's I/Q and survives the radio going away.
//
//   run():  open(uri) -> configure phy -> start_rx -> refill -> convert -> sink.write -> refill ...
//                ^                                       |
//                |   (refill error / context lost)       v
//                +-- wait (backoff) <-- close <-- sink.gap(0, reconnect), ++reconnects
//
// At start every failure is fatal: an unreachable uri, a missing device, or an attribute
// the phy refuses (the message names the attribute, the value and the config field), so a
// wrong configuration stops the daemon instead of retrying forever. Once streaming, a lost
// radio is retried with exponential backoff (reconnect_interval_s doubling up to
// reconnect_max_interval_s) until it comes back or stop() is called.
//
// Every libiio call sits behind iio_device_api, so the source's logic is tested with a fake;
// make_libiio_device() is the real one. libiio's headers stay out of this header.
#pragma once

#include "dsp/names.hpp"
#include "io/sample_source.hpp"

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace paq::io {

/// The AD9361's gain control modes (the phy's in_voltage0_gain_control_mode values).
enum class iio_gain_mode : std::uint8_t { manual, slow_attack, fast_attack, hybrid };
inline constexpr name_table<iio_gain_mode, 4> iio_gain_mode_names{{{"manual", iio_gain_mode::manual},
                                                                   {"slow_attack", iio_gain_mode::slow_attack},
                                                                   {"fast_attack", iio_gain_mode::fast_attack},
                                                                   {"hybrid", iio_gain_mode::hybrid}}};

/// Accepts "manual", "slow_attack", "fast_attack", "hybrid". Throws std::invalid_argument
/// naming the bad value and the accepted ones.
[[nodiscard]] iio_gain_mode parse_iio_gain_mode(std::string_view name);
/// The attribute value: "manual", "slow_attack", "fast_attack", "hybrid".
[[nodiscard]] constexpr std::string_view to_string(iio_gain_mode mode) noexcept { return name_of(iio_gain_mode_names, mode); }

struct iio_config {
    /// libiio context: "ip:HOST[:PORT]" (iiod over the network), "usb:[BUS.DEV.INTF]",
    /// "local:" (paqd on the radio's own Linux). Default: a Pluto on its USB-Ethernet link.
    std::string uri = "ip:192.168.2.1";
    /// The AD9361 control device (RF attributes).
    std::string phy_device = "ad9361-phy";
    /// The capture device whose voltage0/voltage1 channels are RX1 I and Q.
    std::string rx_device = "cf-ad9361-lpc";
    /// Baseband sample rate, 2083333 .. 61440000 Hz. Lower rates (down to 520833 Hz) need the
    /// AD9361's FIR decimation loaded (a filter file, libad9361's ad9361_set_bb_rate), which
    /// this source does not do. Default: the iNET waveform's 20.625 MS/s.
    double sample_rate_hz = 20.625e6;
    /// RX local oscillator (RX_LO, altvoltage0), 70 MHz .. 6 GHz (AD9361; an AD9363 accepts
    /// 325 MHz .. 3.8 GHz and refuses the rest when the attribute is written). Default: the
    /// middle of the S-band telemetry allocation.
    double lo_hz = 2.25e9;
    /// RX analog filter bandwidth, 200 kHz .. 56 MHz. Default: SOQPSK-TG at 10.3125 Mb/s
    /// has its 99% power within ~8 MHz; 16 MHz leaves room for Doppler and oscillator offsets.
    double rf_bandwidth_hz = 16e6;
    iio_gain_mode gain_mode = iio_gain_mode::slow_attack;
    /// Manual RX gain in dB, -3 .. 71 (the phy narrows this with the LO: up to 62 dB above
    /// 1.3 GHz); written only when gain_mode is manual.
    double gain_db = 30.0;
    /// Samples per libiio buffer (one refill), 4096 .. 16777216. Default: 262144, 12.7 ms at
    /// 20.625 MS/s: few enough refills over the network, short enough for the ring buffer.
    std::size_t buffer_samples = 262'144;
    /// First wait before reconnecting to a lost radio, 0.1 .. 60 s; doubles per failure.
    double reconnect_interval_s = 1.0;
    /// Longest wait between reconnection attempts, reconnect_interval_s .. 600 s.
    double reconnect_max_interval_s = 30.0;
    /// libiio I/O timeout (iio_context_set_timeout) for attribute access and refills,
    /// 100 .. 60000 ms, and longer than one buffer takes to fill.
    unsigned timeout_ms = 5000;
    /// Counts per unit amplitude: samples are (I + jQ) / scale, > 0. The AD9361's 12-bit
    /// full scale is 2048; 512 gives the project's ci16 headroom (full scale = 4x a unit
    /// signal, see default_ci16_scale), which is where the AGC's ~-12 dBFS target lands.
    float scale = 512.0f;
    /// RX channels captured: 1 (RX1: voltage0/voltage1 of rx_device), or 2 (RX1 and RX2 of a
    /// 2R2T card such as the AD9361: voltage0..3, one sample of each per sample time, delivered
    /// as cf32x2 for receiver.channels 2). With 2 the gain mode and manual gain are written to
    /// both RX channels of the phy (voltage0 and voltage1).
    int channels = 1;

    /// Empty when valid; otherwise one message per bad field, naming the field, the value and
    /// the allowed range.
    [[nodiscard]] std::vector<std::string> validate() const;
};

/// A block of samples from one refill: interleaved I, Q as 16-bit words (I1 Q1 I2 Q2 with two
/// RX channels), valid until the next refill() or close().
struct iio_refill_result {
    std::span<const std::int16_t> iq;
    /// 0, or a negative errno (the buffer or the context failed).
    int error = 0;
};

/// The libiio operations iio_source needs. Called from the acquisition thread, except
/// cancel(), which may be called from any thread at any time.
class iio_device_api {
public:
    virtual ~iio_device_api() = default;
    /// Creates the context for config.uri with config.timeout_ms, finds config.phy_device and
    /// config.rx_device and RX channels voltage0/voltage1. Throws std::runtime_error naming
    /// what is missing and why.
    virtual void open(const iio_config& config) = 0;
    /// Writes attribute `attr` of the phy's channel `channel` (an output channel when
    /// `output`). Returns 0 or a negative errno.
    [[nodiscard]] virtual int write_phy_attr(std::string_view channel, bool output, std::string_view attr,
                                             std::string_view value) = 0;
    /// Reads the attribute back into `value`. Returns 0 or a negative errno.
    [[nodiscard]] virtual int read_phy_attr(std::string_view channel, bool output, std::string_view attr,
                                            std::string& value) = 0;
    /// Enables I and Q of `channels` RX channels (1: RX1; 2: RX1 and RX2, their words
    /// interleaved I1 Q1 I2 Q2 per sample time) and creates the capture buffer. Throws
    /// std::runtime_error on failure.
    virtual void start_rx(std::size_t buffer_samples, int channels) = 0;
    /// Significant bits per I/Q word (12 for the AD9361): the rest is sign extension.
    [[nodiscard]] virtual unsigned sample_bits() const = 0;
    /// Blocks until the next buffer is full (or timeout_ms, or cancel()).
    [[nodiscard]] virtual iio_refill_result refill() = 0;
    /// Destroys buffer and context; harmless when nothing is open.
    virtual void close() noexcept = 0;
    /// Makes a blocked refill() return soon (iio_buffer_cancel). Thread-safe.
    virtual void cancel() noexcept = 0;
};

/// The libiio implementation.
[[nodiscard]] std::unique_ptr<iio_device_api> make_libiio_device();

/// (I + jQ) / scale for each interleaved pair in `iq`, after sign-extending each word from
/// its low `bits` bits (1 .. 16). `out` must hold iq.size() / 2 samples.
void convert_iq(std::span<const std::int16_t> iq, unsigned bits, float scale, std::span<cf32> out) noexcept;
/// The same pairs as ci16, sign-extended from their low `bits` bits and not scaled: what the
/// source delivers (each stands for to_cf32(s, scale)). `out` must hold iq.size() / 2.
void extend_iq(std::span<const std::int16_t> iq, unsigned bits, std::span<ci16> out) noexcept;

class iio_source final : public sample_source {
public:
    /// Throws std::invalid_argument with every message of config.validate() when invalid.
    /// `device` nullptr: make_libiio_device().
    explicit iio_source(iio_config config, std::unique_ptr<iio_device_api> device = nullptr);
    ~iio_source() override;
    iio_source(const iio_source&) = delete;
    iio_source& operator=(const iio_source&) = delete;

    /// "iio ip:192.168.2.1 (ad9361-phy / cf-ad9361-lpc, 20.625 MS/s, LO 2250 MHz, slow_attack)"
    [[nodiscard]] std::string describe() const override;
    [[nodiscard]] double sample_rate_hz() const override { return config_.sample_rate_hz; }
    /// The radio's samples are ci16 (sign-extended, delivered at their width): config.scale;
    /// with two RX channels converted to cf32 pairs (nullopt).
    [[nodiscard]] std::optional<float> ci16_scale() const override
    {
        return config_.channels == 2 ? std::nullopt : std::optional<float>(config_.scale);
    }
    [[nodiscard]] int channels() const override { return config_.channels; }
    /// The LO the radio is tuned to (iio_source_config::lo_hz).
    [[nodiscard]] std::optional<double> center_frequency_hz() const override { return config_.lo_hz; }
    /// See the diagram above. Throws std::runtime_error for a failure before the first
    /// buffer; afterwards only stop() ends it.
    void run(sample_sink& sink) override;
    void stop() override;

    [[nodiscard]] const iio_config& config() const noexcept { return config_; }

private:
    void open_and_configure();
    void configure();
    /// Waits for `seconds` or stop(); false when stopped.
    bool wait(double seconds);
    /// Backoff loop; false when stop() was called first.
    bool reconnect();

    iio_config config_;
    std::unique_ptr<iio_device_api> device_;
    std::atomic<bool> stop_{false};
    std::mutex wait_mutex_;
    std::condition_variable wait_cv_;
};

}  // namespace paq::io
