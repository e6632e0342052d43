// Per-packet records as CSV (docs/RECORDS.md): what paqd writes, live and in replay, for
// paq-report and spreadsheets. One writer per run; add() is called in batch order.
#pragma once

#include "config/daemon_config.hpp"
#include "dsp/batch.hpp"
#include "dsp/run_tally.hpp"
#include "dsp/ber.hpp"
#include "dsp/pn.hpp"

#include <nlohmann/json.hpp>

#include <array>
#include <atomic>
#include <cstdint>
#include <filesystem>
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
    /// naming the file when it cannot be created. A header that cannot be written (disk
    /// full) is not an error here: it is retried with the first rows, as below.
    /// \param sample_rate_hz the input's rate (start samples are input indices)
    /// \param chain_rate_hz the chain's rate, 2 x the bit rate (CFO and channel taps refer to
    /// it); 0: the same as sample_rate_hz
    /// \param streams output streams per packet (receiver_config::streams(): 6, or 12 with
    /// detector both), one group of columns each
    /// \param fec a coded link's framing (receiver.fec): the PN columns then count the decoded
    /// information bits, and each stream has three columns more (its codewords' decoding)
    /// \param receive_channels receiver_config::channels: with 2, three columns more after dc_dbc
    /// (best_channel, ebn0_chN_db, ebn0_chM_db: dsp::packet_record's per-channel fields)
    /// \param channel_numbers with 2: the recording's numbers of the first and second channel
    /// (N, M): best_channel is one of them, the Eb/N0 columns are named by them
    records_writer(const records_config& cfg, std::optional<dsp::pn_pattern> pattern, double sample_rate_hz,
                   double chain_rate_hz = 0.0, int streams = dsp::chain::num_paths,
                   std::optional<dsp::fec_framing> fec = std::nullopt, int receive_channels = 1,
                   std::array<int, 2> channel_numbers = {1, 2});
    ~records_writer();
    records_writer(const records_writer&) = delete;
    records_writer& operator=(const records_writer&) = delete;

    /// The packets of one batch, in batch order, with the writer's number of streams
    /// (std::invalid_argument otherwise). The batch's rows reach the files before
    /// add() returns (one write per file per batch), so rows() counts only rows that are in
    /// the file. A failed write (disk full) does not throw: the batch's rows are counted in
    /// rows_lost(), the file is cut back to its last whole row, the failure is logged once
    /// with the errno text, and later batches try again (logged once more when writing works
    /// again). The packet column keeps counting, so the lost rows show as a jump in it.
    void add(const dsp::batch_output& out);
    /// Writes the pending partial row and closes the files. Throws std::runtime_error naming
    /// the file and the error when rows were lost (now or earlier) or a file does not close.
    void close();

    /// Per-packet rows that reached the packets file.
    [[nodiscard]] std::uint64_t rows() const noexcept { return packets_file_.rows_written; }
    /// Per-packet rows that could not be written.
    [[nodiscard]] std::uint64_t rows_lost() const noexcept { return packets_file_.rows_lost; }
    /// Channel rows that reached, or could not be written to, the channel file.
    [[nodiscard]] std::uint64_t channel_rows() const noexcept { return channel_file_.rows_written; }
    [[nodiscard]] std::uint64_t channel_rows_lost() const noexcept { return channel_file_.rows_lost; }
    [[nodiscard]] std::uint64_t packets() const noexcept { return packets_; }
    [[nodiscard]] std::filesystem::path packets_path() const;
    [[nodiscard]] std::filesystem::path channel_path() const;
    /// <base>-counters.json: the run's counters (the JSON summary: gaps by reason, samples and
    /// datagrams lost, packets missed in sequence ...) beside the records, so that paq-report
    /// tells the losses as paqd counted them.
    [[nodiscard]] std::filesystem::path counters_path() const;
    /// Writes `counters` (runtime::to_json of the run's snapshot, or paqd replay's JSON) to
    /// counters_path(), with an object "records": the input's and the chain's rates and the
    /// packets' spacing (packet_spacing_s, one packet's length at the chain's rate). Written
    /// whole or not at all (a temporary file renamed into place); std::runtime_error naming
    /// the file when it cannot be written.
    void write_counters(nlohmann::json counters) const;

private:
    struct group {
        std::uint32_t packets = 0;
        std::uint32_t flags = 0;
        std::array<std::uint64_t, dsp::chain::max_streams> bits{}, errors{}, known_errors{};
        std::array<dsp::fec_summary, dsp::chain::max_streams> fec{};  ///< with receiver.fec
        std::array<double, dsp::chain::max_streams> bep_sum{};
    };
    /// One CSV file written with plain write(2): no hidden buffer between a counted row and
    /// the file. Counters are atomic: the metrics thread reads them while add() runs.
    struct csv_file {
        std::filesystem::path path;
        int fd = -1;
        std::string header;           ///< written before the first row; kept until it is
        bool header_written = false;
        std::string pending;          ///< rows of the current batch
        std::uint64_t pending_rows = 0;
        std::uint64_t committed_bytes = 0;  ///< file size after the last whole write
        int failing_errno = 0;              ///< nonzero while writes fail (logged once)
        int first_errno = 0;                ///< the first failure's errno, for close()
        std::atomic<std::uint64_t> rows_written{0}, rows_lost{0};
    };
    void write_row(const dsp::packet_record& rec, std::uint64_t batch);
    void flush(csv_file& f);

    records_config cfg_;
    std::optional<dsp::pn_pattern> pattern_;
    std::optional<dsp::fec_framing> fec_;
    double fs_;
    double chain_fs_;
    int streams_;
    int receive_channels_ = 1;
    std::array<int, 2> channel_numbers_{1, 2};
    csv_file packets_file_, channel_file_;
    std::vector<dsp::stream_ber_counter> counters_;
    group g_;
    std::optional<dsp::packet_record> last_rec_;
    std::uint64_t last_batch_ = 0;
    std::atomic<std::uint64_t> packets_{0};
    bool closed_ = false;
};

}  // namespace paq::daemon
