// iio_device_api over libiio 0.24.
#include "io/iio_source.hpp"

#include <iio.h>

#include <bit>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>

namespace paq::io {

namespace {

// The conversion reads the buffer's little-endian words as host int16.
static_assert(std::endian::native == std::endian::little, "iio_source assumes a little-endian host");

std::string iio_error_text(int err)
{
    if (err < 0) err = -err;
    char buf[256];
    iio_strerror(err, buf, sizeof(buf));
    return buf;
}

std::string device_names(const iio_context* ctx)
{
    std::string names;
    const unsigned n = iio_context_get_devices_count(ctx);
    for (unsigned i = 0; i < n; ++i) {
        const iio_device* dev = iio_context_get_device(ctx, i);
        const char* name = iio_device_get_name(dev);
        if (!names.empty()) names += ", ";
        names += name ? name : iio_device_get_id(dev);
    }
    return names.empty() ? "none" : names;
}

class libiio_device final : public iio_device_api {
public:
    ~libiio_device() override { close(); }

    void open(const iio_config& config) override
    {
        close();
        uri_ = config.uri;
        try {
            // libiio 0.24 writes into the URI it is given (it cuts ":PORT" off): pass a copy.
            std::string uri = config.uri;
            errno = 0;
            ctx_ = iio_create_context_from_uri(uri.c_str());
            if (ctx_ == nullptr) {
                const int err = errno != 0 ? errno : EIO;
                throw std::runtime_error("libiio: cannot open context '" + uri_ + "': " + iio_error_text(err));
            }
            if (const int rc = iio_context_set_timeout(ctx_, config.timeout_ms); rc < 0) {
                throw std::runtime_error("libiio: cannot set the timeout of '" + uri_ + "' to " +
                                         std::to_string(config.timeout_ms) + " ms: " + iio_error_text(rc));
            }
            phy_ = find_device(config.phy_device, "phy_device");
            rx_ = find_device(config.rx_device, "rx_device");
            i_ = find_rx_channel("voltage0");
            q_ = find_rx_channel("voltage1");
            // RX2 (a 2R2T card): voltage2 and voltage3.
            i2_ = config.channels == 2 ? find_rx_channel("voltage2") : nullptr;
            q2_ = config.channels == 2 ? find_rx_channel("voltage3") : nullptr;
            for (iio_channel* ch : {i_, q_, i2_, q2_}) {
                if (ch == nullptr) continue;
                const iio_data_format* f = iio_channel_get_data_format(ch);
                if (f->length != 16 || !f->is_signed || f->is_be || f->shift != 0 || f->bits == 0 || f->bits > 16 ||
                    f->repeat > 1) {
                    throw std::runtime_error("libiio: '" + uri_ + "' " + config.rx_device + " channel " +
                                             iio_channel_get_id(ch) + " has sample format " +
                                             (f->is_be ? "be:" : "le:") + (f->is_signed ? "S" : "U") +
                                             std::to_string(f->bits) + "/" + std::to_string(f->length) + ">>" +
                                             std::to_string(f->shift) + "; only le:S<=16/16>>0 is supported");
                }
                bits_ = f->bits;
            }
        } catch (...) {
            close();
            throw;
        }
    }

    int write_phy_attr(std::string_view channel, bool output, std::string_view attr, std::string_view value) override
    {
        const iio_channel* ch = phy_channel(channel, output);
        if (ch == nullptr) return -ENOENT;
        const ssize_t rc = iio_channel_attr_write(ch, std::string(attr).c_str(), std::string(value).c_str());
        return rc < 0 ? static_cast<int>(rc) : 0;
    }

    int read_phy_attr(std::string_view channel, bool output, std::string_view attr, std::string& value) override
    {
        const iio_channel* ch = phy_channel(channel, output);
        if (ch == nullptr) return -ENOENT;
        char buf[1024];
        const ssize_t rc = iio_channel_attr_read(ch, std::string(attr).c_str(), buf, sizeof(buf));
        if (rc < 0) return static_cast<int>(rc);
        value.assign(buf, strnlen(buf, sizeof(buf)));
        return 0;
    }

    void start_rx(std::size_t buffer_samples, int channels) override
    {
        if (rx_ == nullptr) throw std::logic_error("libiio: start_rx() before open()");
        if (channels == 2 && (i2_ == nullptr || q2_ == nullptr)) throw std::logic_error("libiio: RX2 not found at open()");
        // RX1 I and Q, and with two channels RX2's (interleaved I1 Q1 I2 Q2); nothing else,
        // which would interleave into the buffer too.
        const unsigned n = iio_device_get_channels_count(rx_);
        for (unsigned k = 0; k < n; ++k) {
            iio_channel* ch = iio_device_get_channel(rx_, k);
            if (ch == i_ || ch == q_ || (channels == 2 && (ch == i2_ || ch == q2_))) {
                iio_channel_enable(ch);
            } else {
                iio_channel_disable(ch);
            }
        }
        errno = 0;
        iio_buffer* buf = iio_device_create_buffer(rx_, buffer_samples, false);
        if (buf == nullptr) {
            const int err = errno != 0 ? errno : EIO;
            throw std::runtime_error("libiio: '" + uri_ + "': cannot create a capture buffer of " +
                                     std::to_string(buffer_samples) + " samples: " + iio_error_text(err));
        }
        const auto* first_i = static_cast<const char*>(iio_buffer_first(buf, i_));
        const auto* first_q = static_cast<const char*>(iio_buffer_first(buf, q_));
        bool laid_out = iio_buffer_step(buf) == 4 * channels && first_q - first_i == 2;
        if (channels == 2) {
            laid_out = laid_out && static_cast<const char*>(iio_buffer_first(buf, i2_)) - first_i == 4 &&
                       static_cast<const char*>(iio_buffer_first(buf, q2_)) - first_i == 6;
        }
        if (!laid_out) {
            iio_buffer_destroy(buf);
            throw std::runtime_error("libiio: '" + uri_ + "': the capture buffer is not interleaved 16-bit I, Q" +
                                     (channels == 2 ? " of RX1 then RX2" : ""));
        }
        std::lock_guard lock(buffer_mutex_);
        buffer_ = buf;
        if (cancelled_) {
            iio_buffer_cancel(buffer_);  // stop() came while opening: refill() returns at once
        }
    }

    unsigned sample_bits() const override { return bits_; }

    iio_refill_result refill() override
    {
        if (buffer_ == nullptr) return {{}, -EBADF};
        const ssize_t rc = iio_buffer_refill(buffer_);
        if (rc < 0) return {{}, static_cast<int>(rc)};
        const auto* start = static_cast<const std::int16_t*>(iio_buffer_first(buffer_, i_));
        const auto* end = static_cast<const std::int16_t*>(iio_buffer_end(buffer_));
        return {{start, static_cast<std::size_t>(end - start) & ~std::size_t{1}}, 0};
    }

    void close() noexcept override
    {
        {
            std::lock_guard lock(buffer_mutex_);
            if (buffer_ != nullptr) {
                iio_buffer_destroy(buffer_);
                buffer_ = nullptr;
            }
        }
        if (ctx_ != nullptr) {
            iio_context_destroy(ctx_);
        }
        ctx_ = nullptr;
        phy_ = rx_ = nullptr;
        i_ = q_ = i2_ = q2_ = nullptr;
    }

    void cancel() noexcept override
    {
        std::lock_guard lock(buffer_mutex_);
        cancelled_ = true;
        if (buffer_ != nullptr) {
            iio_buffer_cancel(buffer_);
        }
    }

private:
    iio_device* find_device(const std::string& name, const char* field)
    {
        iio_device* dev = iio_context_find_device(ctx_, name.c_str());
        if (dev == nullptr) {
            throw std::runtime_error("libiio: '" + uri_ + "' has no device '" + name + "' (config field " + field +
                                     "; devices: " + device_names(ctx_) + ")");
        }
        return dev;
    }

    iio_channel* find_rx_channel(const char* id)
    {
        iio_channel* ch = iio_device_find_channel(rx_, id, false);
        if (ch == nullptr || !iio_channel_is_scan_element(ch)) {
            throw std::runtime_error("libiio: '" + uri_ + "' device " + iio_device_get_name(rx_) +
                                     " has no capture channel " + id);
        }
        return ch;
    }

    const iio_channel* phy_channel(std::string_view channel, bool output) const
    {
        if (phy_ == nullptr) return nullptr;
        return iio_device_find_channel(phy_, std::string(channel).c_str(), output);
    }

    std::string uri_;
    iio_context* ctx_ = nullptr;
    iio_device* phy_ = nullptr;
    iio_device* rx_ = nullptr;
    iio_channel* i_ = nullptr;
    iio_channel* q_ = nullptr;
    iio_channel* i2_ = nullptr;  ///< RX2 I and Q (two channels only)
    iio_channel* q2_ = nullptr;
    unsigned bits_ = 16;
    std::mutex buffer_mutex_;  // buffer_ between close()/start_rx() and cancel()
    iio_buffer* buffer_ = nullptr;
    bool cancelled_ = false;
};

}  // namespace

std::unique_ptr<iio_device_api> make_libiio_device()
{
    return std::make_unique<libiio_device>();
}

}  // namespace paq::io
