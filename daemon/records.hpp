// Per-packet records as CSV (docs/RECORDS.md): what paqd writes, live and in replay, for
// paq-report and spreadsheets. One writer per run; add() is called in batch order.
#pragma once

#include "config/daemon_config.hpp"
#include "dsp/batch.hpp"
#include "dsp/ber.hpp"
#include "dsp/pn.hpp"

#include <array>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

namespace paq::daemon {

using config::records_config;

/// RMS delay spread of a channel estimate, in samples (taps one sample apart).
[[nodiscard]] double rms_delay_spread_samples(const std::array<cf64, dsp::chain::L_ch>& h) noexcept;

class records_writer {
public:
    /// Creates (truncates) both files and writes the headers. Throws std::runtime_error
    /// naming the file when it cannot be created.
    records_writer(const records_config& cfg, std::optional<dsp::pn_pattern> pattern, double sample_rate_hz);
    ~records_writer();
    records_writer(const records_writer&) = delete;
    records_writer& operator=(const records_writer&) = delete;

    /// The packets of one batch, in batch order. A write error (disk full) throws
    /// std::runtime_error naming the file; the writer is then failed and ignores later calls.
    void add(const dsp::batch_output& out);
    /// Writes the pending partial row and flushes. Throws on a write error.
    void close();

    [[nodiscard]] std::uint64_t rows() const noexcept { return rows_; }
    [[nodiscard]] std::uint64_t packets() const noexcept { return packets_; }
    [[nodiscard]] bool failed() const noexcept { return failed_; }
    [[nodiscard]] std::filesystem::path packets_path() const;
    [[nodiscard]] std::filesystem::path channel_path() const;

private:
    struct group {
        std::uint32_t packets = 0;
        std::uint32_t flags = 0;
        std::array<std::uint64_t, dsp::chain::num_paths> bits{}, errors{}, known_errors{};
        std::array<double, dsp::chain::num_paths> bep_sum{};
    };
    void write_row(const dsp::packet_record& rec, std::uint64_t batch);
    void check(std::ofstream& f, const std::filesystem::path& p);

    records_config cfg_;
    std::optional<dsp::pn_pattern> pattern_;
    double fs_;
    std::ofstream packets_f_, channel_f_;
    std::vector<dsp::stream_ber_counter> counters_;
    group g_;
    std::optional<dsp::packet_record> last_rec_;
    std::uint64_t last_batch_ = 0;
    std::uint64_t packets_ = 0, rows_ = 0;
    bool failed_ = false;
    bool closed_ = false;
};

}  // namespace paq::daemon
