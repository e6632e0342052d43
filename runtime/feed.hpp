// Where the stream engine (runtime/stream_engine.hpp) reads its samples from: one interface,
// two feeds.
//
//   ring_feed      a live source's ring (io::sample_ring): samples, the gaps the source or the
//                  ring reported, time anchors, and nothing while the source is quiet (the
//                  engine's stall timeout)
//   reader_feed    a recording read in order (a read function): samples, and the recording's
//                  marks (io::recording_marks: its gaps and time); it never waits
//
// Each read returns samples, a gap, the end, or (after the timeout) nothing; the samples are
// of the feed's width, ci16 (at its scale, converted by the backend) or cf32.
#pragma once

#include "dsp/batch.hpp"
#include "dsp/types.hpp"
#include "io/ring_buffer.hpp"
#include "io/sample_file.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <type_traits>
#include <vector>

namespace paq::runtime {

class feed {
public:
    /// What a read gives: samples (count, when the last was written, a time anchor among
    /// them), a gap (lost samples, reason), the end, or nothing within the timeout.
    using result = io::sample_ring::read_result;

    virtual ~feed() = default;
    /// The samples' width: ci16 at this scale, or cf32 (nullopt). Fixed for the feed's life.
    [[nodiscard]] virtual std::optional<float> ci16_scale() const = 0;
    /// At most out.size() samples (a feed may give fewer per read), waiting at most `timeout`
    /// for something to happen. Reading at the other width throws std::logic_error.
    virtual result read(std::span<cf32> out, std::chrono::milliseconds timeout) = 0;
    virtual result read(std::span<ci16> out, std::chrono::milliseconds timeout) = 0;
    /// Receive channels per sample time: 1, or 2 (then read as cf32x2, receiver_config::channels 2).
    [[nodiscard]] virtual int channels() const { return 1; }
    /// Two channels' samples (a feed of channels() 2); std::logic_error from any other feed.
    virtual result read(std::span<cf32x2> out, std::chrono::milliseconds timeout);
};

/// A live source's ring. Reads take at most 2^20 samples (51 ms at 20.625 MS/s), so that the
/// engine looks at its stall timer and heartbeat often whatever the ring holds, and a read is
/// large enough for io::bulk_copy to copy it on several threads.
class ring_feed final : public feed {
public:
    explicit ring_feed(io::sample_ring& ring) : ring_(ring) {}
    [[nodiscard]] std::optional<float> ci16_scale() const override { return ring_.ci16_scale(); }
    result read(std::span<cf32> out, std::chrono::milliseconds timeout) override;
    result read(std::span<ci16> out, std::chrono::milliseconds timeout) override;
    result read(std::span<cf32x2> out, std::chrono::milliseconds timeout) override;
    [[nodiscard]] int channels() const override { return ring_.channels(); }

    static constexpr std::size_t max_read_samples = std::size_t{1} << 20;

private:
    io::sample_ring& ring_;
};

/// A recording read in order (T: cf32, ci16 at its width, or cf32x2 for two channels). `read` writes up to out.size() samples and returns how many (0:
/// the end). `marks` (io::recording_marks; optional) are its gaps and time: a gap (with its
/// samples lost and reason) where it lies, a time for the samples from its sample on. A read
/// stops at the next mark, so that a time names the next read's first sample; reads take at
/// most 2^22 samples.
template <class T>
class reader_feed final : public feed {
public:
    using read_fn = std::function<std::size_t(std::span<T>)>;

    reader_feed(read_fn read, std::span<const io::recording_mark> marks, std::optional<float> ci16_scale)
        : read_(std::move(read)), marks_(marks), scale_(ci16_scale)
    {
    }
    [[nodiscard]] std::optional<float> ci16_scale() const override { return scale_; }
    result read(std::span<cf32> out, std::chrono::milliseconds timeout) override;
    result read(std::span<ci16> out, std::chrono::milliseconds timeout) override;
    result read(std::span<cf32x2> out, std::chrono::milliseconds timeout) override;
    [[nodiscard]] int channels() const override { return std::is_same_v<T, cf32x2> ? 2 : 1; }

    /// Samples read so far.
    [[nodiscard]] std::uint64_t samples_read() const noexcept { return samples_read_; }

    static constexpr std::size_t max_read_samples = std::size_t{1} << 22;

private:
    result read_own(std::span<T> out);

    read_fn read_;
    io::mark_cursor marks_;
    std::optional<float> scale_;
    std::uint64_t samples_read_ = 0;
    bool ended_ = false;
};

extern template class reader_feed<cf32>;
extern template class reader_feed<ci16>;
extern template class reader_feed<cf32x2>;

}  // namespace paq::runtime
