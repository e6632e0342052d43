#include "io/file_source.hpp"

#include "io/sample_file.hpp"

#include <spdlog/spdlog.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <functional>
#include <sstream>
#include <type_traits>

namespace paq::io {

std::vector<std::string> file_source_config::validate() const
{
    std::vector<std::string> e;
    if (path.empty()) e.push_back("source.file.path: must be set (a SigMF or raw recording)");
    if (!(rate_factor > 0.0 && rate_factor <= 1000.0)) {
        e.push_back("source.file.rate_factor = " + std::to_string(rate_factor) + ": must be in (0, 1000]");
    }
    if (chunk_samples < 1 || chunk_samples > (1u << 24)) {
        e.push_back("source.file.chunk_samples = " + std::to_string(chunk_samples) + ": must be in [1, 16777216]");
    }
    if (raw_sample_rate_hz && !(*raw_sample_rate_hz > 0.0)) {
        e.push_back("source.file.sample_rate_hz = " + std::to_string(*raw_sample_rate_hz) + ": must be > 0");
    }
    if (!(raw_ci16_scale > 0.0f)) {
        e.push_back("source.file.ci16_scale = " + std::to_string(raw_ci16_scale) + ": must be > 0");
    }
    if (channel && (*channel < 1 || *channel > max_channels)) {
        e.push_back("source.file.channel = " + std::to_string(*channel) + ": must be in [1, " + std::to_string(max_channels) + "]");
    }
    if (raw_channels < 1 || raw_channels > max_channels) {
        e.push_back("source.file.channels = " + std::to_string(raw_channels) + ": must be in [1, " + std::to_string(max_channels) + "]");
    }
    if (second_channel) {
        if (*second_channel < 1 || *second_channel > max_channels) {
            e.push_back("source.file.second_channel = " + std::to_string(*second_channel) + ": must be in [1, " +
                        std::to_string(max_channels) + "]");
        } else if (!channel) {
            e.push_back("source.file.second_channel = " + std::to_string(*second_channel) +
                        ": needs source.file.channel, the first of the two channels received");
        } else if (*channel == *second_channel) {
            e.push_back("source.file.second_channel = " + std::to_string(*second_channel) +
                        ": must differ from source.file.channel (two different channels are combined)");
        }
    }
    return e;
}

struct file_source::impl {
    file_source_config cfg;
    sample_file_reader reader;
    boost::asio::io_context io;
    std::atomic<bool> stopping{false};

    impl(file_source_config c)
        : cfg(std::move(c)),
          reader(sample_file_reader::open(cfg.path, cfg.raw_format, cfg.raw_sample_rate_hz, cfg.raw_ci16_scale, cfg.channel,
                                            cfg.raw_channels))
    {
        std::vector<std::string> warnings;
        marks = recording_marks(reader.info().meta, warnings);
        for (const auto& w : warnings) spdlog::warn("{}: {}", cfg.path.string(), w);
        if (cfg.second_channel && *cfg.second_channel > reader.info().num_channels) {
            throw std::invalid_argument(cfg.path.string() + ": source.file.second_channel = " + std::to_string(*cfg.second_channel) +
                                        ": the recording has " + std::to_string(reader.info().num_channels) + " channel(s)");
        }
        if (const auto t = reader.info().trailing_bytes) {
            spdlog::warn("{}: truncated recording: {} trailing bytes after the last whole sample are ignored", cfg.path.string(), t);
        }
    }
    /// The recording's gaps and time (none for raw files).
    std::vector<recording_mark> marks;
};

file_source::file_source(file_source_config cfg)
{
    if (const auto errors = cfg.validate(); !errors.empty()) {
        std::string msg = "file source: invalid configuration:";
        for (const auto& e : errors) msg += "\n  " + e;
        throw std::invalid_argument(msg);
    }
    impl_ = std::make_unique<impl>(std::move(cfg));
}

file_source::~file_source() = default;

std::string file_source::describe() const
{
    const auto& info = impl_->reader.info();
    std::ostringstream os;
    os << "file " << info.data_path.string() << " (" << to_sigmf_datatype(info.format) << ", "
       << info.sample_rate_hz / 1e6 << " MS/s, " << info.num_samples << " samples, ";
    if (impl_->cfg.second_channel) {
        os << "channels " << info.channel << " and " << *impl_->cfg.second_channel << " of " << info.num_channels << ", ";
    } else if (info.num_channels > 1) {
        os << "channel " << info.channel << " of " << info.num_channels << ", ";
    }
    if (impl_->cfg.paced) {
        os << "paced";
        if (impl_->cfg.rate_factor != 1.0) os << " x" << impl_->cfg.rate_factor;
    } else {
        os << "as fast as possible";
    }
    if (impl_->cfg.loop) os << ", looped";
    os << ")";
    return os.str();
}

double file_source::sample_rate_hz() const { return impl_->reader.info().sample_rate_hz; }

std::optional<double> file_source::center_frequency_hz() const
{
    const double f = impl_->reader.info().meta.center_frequency_hz;
    return f != 0.0 ? std::optional<double>(f) : std::nullopt;
}

void file_source::stop()
{
    impl_->stopping = true;
    boost::asio::post(impl_->io, [this] { impl_->io.stop(); });
}

int file_source::channels() const { return impl_->cfg.second_channel ? 2 : 1; }

std::optional<float> file_source::ci16_scale() const
{
    if (impl_->cfg.second_channel) return std::nullopt;
    const auto& info = impl_->reader.info();
    return ci16_scale_of(info.format, info.meta.ci16_scale);
}

void file_source::run(sample_sink& sink)
{
    auto& m = *impl_;
    // A ci16 recording is delivered as stored (write_ci16: no conversion on this thread, half
    // the bytes into the ring); a cf32 one as cf32.
    const std::optional<float> scale16 = ci16_scale();
    // Unpaced, a read fills up to unpaced_read_samples (or chunk_samples, if larger) of the
    // ring's room at once: a read that large goes on several threads (sample_file_reader).
    const std::size_t chunk_size = m.cfg.paced ? m.cfg.chunk_samples : std::max(m.cfg.chunk_samples, unpaced_read_samples);
    // Two channels go as cf32x2 (decoded from any format).
    const std::optional<int> second = m.cfg.second_channel;
    std::vector<cf32> chunk(scale16 || second ? 0 : chunk_size);
    std::vector<ci16> chunk16(scale16 ? chunk_size : 0);
    std::vector<cf32x2> chunk2(second ? chunk_size : 0);
    using clock = std::chrono::steady_clock;
    const double rate = m.reader.info().sample_rate_hz * m.cfg.rate_factor;
    const auto t0 = clock::now();
    std::uint64_t delivered = 0;
    boost::asio::steady_timer timer(m.io);

    // One chunk per timer tick: a chunk leaves when the wall clock reaches the time its last
    // sample would have arrived on a live link. Unpaced, the chunks follow each other at once,
    // each read straight into the sink's memory (sample_sink::write_from: into the ring's
    // room, the file's copy the only one on this thread).
    std::size_t n = 0;
    mark_cursor marks(m.marks);
    // Before a read at the reader's position: the recording's gaps and times that lie there go
    // to the sink; returns how many samples the read may take, up to the next mark (a time
    // names the first sample of a write).
    auto next_read = [&] {
        const std::uint64_t pos = m.reader.position();
        while (const recording_mark* k = marks.next(pos)) {
            if (k->what == recording_mark::kind::gap) {
                sink.gap(k->lost_samples, k->reason);
                continue;
            }
            const time_anchor t{counters_.samples.load(), k->utc_ns};
            time_anchor_.set(t);
            sink.timestamp(t);
        }
        return marks.limit(pos, chunk_size);
    };
    // Only cf32 can hold NaN or Inf: ci16 is never scanned (every sample is finite).
    std::uint64_t nonfinite = 0;
    auto finite = [](cf32 v) { return std::isfinite(v.real()) && std::isfinite(v.imag()); };
    auto read_into = [&]<class T>(std::span<T> room, std::size_t want) {
        const auto part = room.first(std::min(want, room.size()));
        std::size_t got = 0;
        if constexpr (std::is_same_v<T, cf32x2>) {
            got = m.reader.read(part, *second);
            for (std::size_t i = 0; i < got; ++i) nonfinite += (finite(room[i].a) ? 0 : 1) + (finite(room[i].b) ? 0 : 1);
        } else {
            got = m.reader.read(part);
        }
        if constexpr (std::is_same_v<T, cf32>) {
            for (std::size_t i = 0; i < got; ++i) nonfinite += finite(room[i]) ? 0 : 1;
        }
        return got;
    };
    // Reads and delivers one chunk (0: the end of the recording).
    auto deliver_chunk = [&] {
        const std::size_t want = next_read();
        nonfinite = 0;
        if (second) return sink.write_x2_from(chunk2, [&](std::span<cf32x2> room) { return read_into(room, want); });
        return scale16 ? sink.write_ci16_from(chunk16, *scale16, [&](std::span<ci16> room) { return read_into(room, want); })
                       : sink.write_from(chunk, [&](std::span<cf32> room) { return read_into(room, want); });
    };
    auto read_chunk = [&] {
        const std::size_t want = next_read();
        nonfinite = 0;
        if (second) return read_into(std::span<cf32x2>(chunk2), want);
        return scale16 ? read_into(std::span<ci16>(chunk16), want) : read_into(std::span<cf32>(chunk), want);
    };
    auto count = [&](std::size_t k) {
        delivered += k;
        counters_.samples += k;
        counters_.packets += 1;
        counters_.bytes += k * bytes_per_sample(m.reader.info().format) * (second ? 2 : 1);
        counters_.nonfinite += nonfinite;
    };
    // At the end of the recording: false to stop, else the file starts again after a gap.
    auto at_end = [&] {
        if (!m.cfg.loop || m.reader.info().num_samples == 0) return false;
        m.reader.rewind();
        marks.rewind();
        sink.gap(0, gap_reason::discontinuity);
        return true;
    };
    std::function<void()> tick = [&] {
        if (m.stopping) return;
        if (!m.cfg.paced) {
            n = deliver_chunk();
            if (n > 0) count(n);
            else if (!at_end()) return;
            boost::asio::post(m.io, tick);  // stop() is looked at between chunks
            return;
        }
        n = read_chunk();
        if (n == 0) {
            if (!at_end()) return;
            n = read_chunk();
        }
        timer.expires_at(t0 + std::chrono::duration_cast<clock::duration>(
                                  std::chrono::duration<double>(static_cast<double>(delivered + n) / rate)));
        timer.async_wait([&](const boost::system::error_code& ec) {
            if (ec || m.stopping) return;
            if (second) {
                sink.write_x2(std::span<const cf32x2>(chunk2.data(), n));
            } else if (scale16) {
                sink.write_ci16(std::span<const ci16>(chunk16.data(), n), *scale16);
            } else {
                sink.write(std::span<const cf32>(chunk.data(), n));
            }
            count(n);
            tick();
        });
    };
    boost::asio::post(m.io, tick);
    m.io.run();
}

}  // namespace paq::io
