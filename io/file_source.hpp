// File replay as a live source: a SigMF or raw recording delivered at its recorded sample
// rate (or as fast as the consumer takes it), optionally looped. Pacing runs on a
// Boost.Asio steady_timer on the acquisition thread.
#pragma once

#include "io/sample_format.hpp"
#include "io/sample_source.hpp"

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace paq::io {

/// Unpaced, the file source reads up to this many samples at once straight into the ring's
/// room (16 MiB of ci16): a read that large goes on several threads.
inline constexpr std::size_t unpaced_read_samples = std::size_t{1} << 22;

struct file_source_config {
    std::filesystem::path path;                ///< SigMF (.sigmf-meta/-data/base) or raw
    std::optional<sample_format> raw_format;   ///< raw files only
    std::optional<double> raw_sample_rate_hz;  ///< raw files only
    float raw_ci16_scale = default_ci16_scale;
    /// The channel received of a recording that interleaves several (1 .. its channels; a
    /// recording of several needs it: sample_file_reader::open); raw_channels: a raw file's.
    std::optional<int> channel;
    int raw_channels = 1;
    /// Two receive channels of the recording (receiver.channels 2): this one with `channel`
    /// (required then), delivered together as cf32x2 (1 .. its channels, not `channel`).
    std::optional<int> second_channel;
    /// true: samples leave at the recorded rate times rate_factor (a live link);
    /// false: as fast as the ring takes them.
    bool paced = true;
    double rate_factor = 1.0;  ///< 0 < rate_factor <= 1000
    bool loop = false;         ///< start again at the end (a discontinuity gap at each seam)
    /// Samples per delivery when paced; at 20.6 MS/s the default is one every ~3.2 ms.
    /// Unpaced, deliveries take up to unpaced_read_samples, or this many if it is larger.
    std::size_t chunk_samples = 65536;

    /// Empty when valid; otherwise messages naming field, value and allowed range.
    [[nodiscard]] std::vector<std::string> validate() const;
};

class file_source final : public sample_source {
public:
    /// Opens the recording now: a missing or bad file throws here (io::format_error or
    /// std::runtime_error naming the file), before any thread starts.
    explicit file_source(file_source_config cfg);
    ~file_source() override;

    [[nodiscard]] std::string describe() const override;
    [[nodiscard]] double sample_rate_hz() const override;
    /// The recording's core:frequency (its first capture's), when it has one.
    [[nodiscard]] std::optional<double> center_frequency_hz() const override;
    /// Runs the recording; a SigMF recording's gaps and times (io::recording_marks: its
    /// paq:gaps, capture boundaries and core:datetime) go to the sink where they lie, again
    /// after each loop seam.
    /// A ci16_le recording is delivered at its width (write_ci16, its metadata's scale).
    void run(sample_sink& sink) override;
    void stop() override;
    /// The recording's scale when it is ci16_le (its samples go out as ci16); nullopt for cf32,
    /// and for two channels (decoded to cf32x2).
    [[nodiscard]] std::optional<float> ci16_scale() const override;
    /// 2 with a second_channel, else 1.
    [[nodiscard]] int channels() const override;

private:
    struct impl;
    std::unique_ptr<impl> impl_;
};

}  // namespace paq::io
