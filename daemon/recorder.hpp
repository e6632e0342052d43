// Recording while receiving: every sample the receiver reads goes to a SigMF recording too,
// with the receiver's settings and every gap in the metadata, so any flight can be replayed
// (`paqd replay` or `source.type: file`) as it was received: each gap (its samples lost and
// reason in paq:gaps) starts a new capture with its own sample index and core:datetime, and
// replay ends a segment there as the live receiver did. Disk writes run on a thread of their own behind a
// bounded queue: a slow or failed disk costs recorded samples (counted, and marked in the
// metadata), never received ones.
#pragma once

#include "config/daemon_config.hpp"
#include "io/sample_format.hpp"
#include "io/sample_source.hpp"

#include <nlohmann/json.hpp>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

namespace paq::io {
class sample_file_writer;
}

namespace paq::daemon {

using config::recording_config;

/// The SigMF annotations for a paq:gaps list (see recorder): one per entry, at the recording
/// sample where the gap falls. core:sample_count is 0, because the lost samples are not in the
/// recording (a coalesced entry spans the recording from its first gap to its last);
/// core:label "gap (<reason>)", core:comment saying how many samples are missing,
/// core:generator "paqd", and paq:gap_reason, paq:lost_samples (0: unknown) for programs.
[[nodiscard]] nlohmann::json gap_annotations(const nlohmann::json& gaps);

class recorder {
public:
    /// Creates the data file now (throws naming it when it cannot). `settings` goes into the
    /// metadata as paq:receiver (e.g. the effective configuration), the link's bit rate as
    /// paq:bit_rate_hz (what paqd replay of the recording then takes). core:frequency is
    /// cfg.center_frequency_hz, else `center_frequency_hz` (the source's), else not written.
    recorder(const recording_config& cfg, double sample_rate_hz, double bit_rate_hz, nlohmann::json settings,
             std::optional<double> center_frequency_hz = std::nullopt);
    ~recorder();
    recorder(const recorder&) = delete;
    recorder& operator=(const recorder&) = delete;

    /// Queues samples (a copy); when the queue is full they are dropped from the recording,
    /// counted, and marked as a gap in the metadata.
    void write(std::span<const cf32> samples);
    /// A time anchor: samples[offset] of the next write() was taken at utc_ns (UTC ns). The
    /// first one in a capture gives its core:datetime (the UTC of its first sample).
    void timestamp(std::int64_t utc_ns, std::size_t offset);
    /// A gap in the received stream: in paq:gaps at the current position, and a new capture
    /// from there.
    void gap(std::uint64_t lost_samples, io::gap_reason reason);
    /// Drains the queue, closes the data file and writes the metadata. Throws on an I/O error.
    void close();

    [[nodiscard]] std::uint64_t samples_recorded() const noexcept { return recorded_; }
    [[nodiscard]] std::uint64_t samples_dropped() const noexcept { return dropped_; }
    [[nodiscard]] bool failed() const noexcept { return failed_; }
    [[nodiscard]] std::filesystem::path meta_path() const;

    /// The metadata's gap list holds at most this many entries, and the recording this many
    /// captures; a flood of gaps beyond it is merged into the last entry (reason "coalesced",
    /// with the number of gaps merged and the position of the last) and starts no capture, so
    /// a hostile stream cannot grow the metadata without end (a replay takes the flood as one
    /// gap of unknown size).
    static constexpr std::size_t max_gap_entries = 10000;
    /// Small writes are appended to the last queued chunk up to this many samples, so a flood
    /// of one-sample datagrams costs queue memory by samples, not by allocations.
    static constexpr std::size_t chunk_samples = 1u << 16;

private:
    void writer_loop();
    /// A capture from the current position (after a gap), under mu_.
    void new_capture();

    std::unique_ptr<io::sample_file_writer> writer_;
    std::size_t max_queued_;
    std::mutex mu_;
    std::condition_variable cv_;
    std::deque<std::vector<cf32>> queue_;
    std::size_t queued_ = 0;
    bool closing_ = false;
    std::uint64_t accepted_ = 0;  ///< samples queued so far: the position in the recording
    nlohmann::json gaps_ = nlohmann::json::array();
    double sample_rate_hz_;
    struct capture {
        std::uint64_t sample_start = 0;
        std::int64_t utc_ns = INT64_MIN;  ///< its first sample's UTC (dsp::unknown_utc_ns: none)
    };
    std::vector<capture> captures_{capture{}};
    std::atomic<std::uint64_t> recorded_{0}, dropped_{0};
    std::atomic<bool> failed_{false};
    std::string error_;
    std::thread thread_;
    bool closed_ = false;
};

}  // namespace paq::daemon
