// Soft output of `paqd replay --llr-out BASE`: the trellis's LLR of every data bit,
// a file per path. docs/RECORDS.md, "LLR files", is the format's reference.
#pragma once

#include "dsp/batch.hpp"
#include "dsp/receiver_config.hpp"

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <vector>

namespace paq::daemon {

/// BASE-<stream>.llr for each of the six paths the trellis decides (the stream names of the
/// bitstreams: none .. fde2 with receiver.detector trellis, none_trellis .. fde2_trellis with
/// both). Each packet is one record of llr_record_bytes: its start (the absolute input sample
/// index, as the packet records' start_sample) as 8 bytes little-endian, then its 6144 data
/// bits' LLRs as signed bytes (dsp::quantize_llr: llr_steps_per_nat steps per nat, positive:
/// bit 1), in the order of the bits in the bitstream. Packets in the order of the run.
inline constexpr std::size_t llr_record_bytes = 8 + waveform::data_bits;

/// What `--llr-out` without the trellis is told (paqd exits 2 with it; llr_writer throws it).
inline constexpr const char* llr_needs_trellis = "--llr-out: the LLRs are the trellis's; use --detector trellis or both (receiver.detector)";

class llr_writer {
public:
    /// Creates (truncates) the six files. Throws std::invalid_argument when the detector is
    /// sxs (no LLRs), std::runtime_error naming the file when one cannot be created.
    llr_writer(const std::filesystem::path& base, dsp::detector_kind detector);
    ~llr_writer();
    llr_writer(const llr_writer&) = delete;
    llr_writer& operator=(const llr_writer&) = delete;

    /// The batch's packets. Throws std::runtime_error naming the file on a write error, and
    /// std::logic_error when the batch has packets but no LLRs (soft output not on).
    void add(const dsp::batch_output& out);
    /// Flushes and closes; throws std::runtime_error naming the file on an error.
    void close();

    [[nodiscard]] const std::vector<std::filesystem::path>& paths() const noexcept { return paths_; }
    [[nodiscard]] std::uint64_t packets() const noexcept { return packets_; }

private:
    struct file_closer {
        void operator()(std::FILE* f) const noexcept;
    };
    std::vector<std::filesystem::path> paths_;
    std::vector<std::unique_ptr<std::FILE, file_closer>> files_;
    std::vector<unsigned char> record_;
    std::uint64_t packets_ = 0;
};

}  // namespace paq::daemon
