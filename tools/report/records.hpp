// Readers for the per-packet record files that paqd writes (docs/RECORDS.md):
// <base>-packets.csv and <base>-channel.csv.
//
// Both readers stream: they hold one line of text at a time (plus a 1 MiB read buffer), so a
// 20-minute flight (2 million rows, ~400 MB) is read in constant memory. Columns are found by
// their header names, so extra columns and a different order are accepted; a missing column,
// a row with the wrong number of fields or a field that is not a number is an input_error
// whose message names the file, the line and the column:
//
//   run-packets.csv:17:9: column 'ebn0_db': 'abc' is not a number
//   ^file           ^line ^column (1-based field number, as a spreadsheet counts columns)
#pragma once

#include "io/utc_time.hpp"

#include <array>
#include <complex>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace paq::report {

/// Number of equalizer paths in a record, in file order.
inline constexpr std::size_t n_paths = 6;
/// Streams a record can have: the six paths, and with paqd's receiver.detector both the same
/// six decided by the trellis (`none_trellis` .. `fde2_trellis`).
inline constexpr std::size_t max_streams = 2 * n_paths;

/// The streams' names as they appear in the column names (`<stream>_bits`, ...), in file order.
inline constexpr std::array<std::string_view, max_streams> path_names{
    "none", "zf", "mmse", "cma", "fde1", "fde2", "none_trellis", "zf_trellis", "mmse_trellis", "cma_trellis", "fde1_trellis", "fde2_trellis"};

/// Known (preamble + ASM) bits per packet that `<path>_known_errors` counts errors among.
inline constexpr std::uint64_t known_bits_per_packet = 192;

/// A record file is missing, unreadable or malformed. The message starts with
/// "<file>:<line>:" (and "<column>:" where one field is at fault) and can be shown as is.
class input_error : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

/// One path's columns of a packets row.
struct path_record {
    std::uint64_t bits = 0;          ///< data bits checked against the PN pattern (0 without a pattern)
    std::uint64_t errors = 0;        ///< bit errors among them, <= bits (0 without a pattern)
    double bep = 0;                  ///< estimated bit error probability, mean over the row's packets; may be NaN
    std::uint64_t known_errors = 0;  ///< errors among the row's packets' known bits
    /// A coded link's (paqd's receiver.fec; the `_codewords_failed`, `_iterations` and
    /// `_channel_errors` columns): the row's codewords that did not converge, the decoder's
    /// iterations over all of them, and the received bits of the converged ones that the
    /// decoder corrected. bits / errors then count the decoded information bits.
    std::uint64_t codewords_failed = 0;
    std::uint64_t iterations = 0;
    std::uint64_t channel_errors = 0;
};

/// One row of <base>-packets.csv.
struct packet_record {
    std::uint64_t packet = 0;
    std::uint64_t packets = 1;  ///< packets this row stands for, >= 1
    double time_s = 0;          ///< finite, |time_s| <= 1e12
    std::uint64_t batch = 0;
    std::uint64_t start_sample = 0;
    double metric = 0;
    double cfo_hz = 0;  ///< the estimates may be NaN or infinite (paqd writes what it estimated)
    double sigma2 = 0;
    double ebn0_db = 0;
    double channel_energy = 0;
    double delay_spread_ns = 0;
    double zf_condition = 0;
    std::uint64_t flags = 0;
    /// The packet's absolute time, ns since 1970-01-01 00:00:00 UTC, from the optional
    /// `time_utc` column (docs/RECORDS.md); absent when the file has no such column or the
    /// field is empty (the source gave no absolute time).
    std::optional<std::int64_t> time_utc_ns;
    /// False when the row's `_bits` / `_errors` fields are empty (no PN pattern configured).
    bool has_pattern = true;
    /// Streams of the file: 6, or 12 when it has the `_trellis` columns (paths[0 .. streams)).
    std::size_t streams = n_paths;
    /// The file has a coded link's columns (`none_codewords_failed` ...): path_record's codeword fields are read.
    bool coded = false;
    std::array<path_record, max_streams> paths{};
};

/// One row of <base>-channel.csv.
struct channel_record {
    std::uint64_t packet = 0;
    double time_s = 0;
    std::int64_t tap_offset = 0;  ///< index of the first tap relative to the main path
    std::vector<std::complex<double>> taps;
};

/// Streaming RFC 4180 CSV reader: one line, split into fields, per call. Fields may be quoted
/// ("" inside quotes is a quote); a quoted field cannot span lines. Line ends are "\n" or
/// "\r\n"; empty lines are skipped, and so is a UTF-8 byte-order mark at the start.
class csv_reader {
public:
    /// Opens path. Throws input_error when it cannot be opened.
    explicit csv_reader(std::filesystem::path path);

    /// Reads the next non-empty line into fields(). Returns false at the end of the file.
    /// Throws input_error on a read error or an unterminated quote.
    [[nodiscard]] bool next();

    /// The fields of the current line; valid until the next call of next().
    [[nodiscard]] const std::vector<std::string_view>& fields() const noexcept { return fields_; }
    /// 1-based number of the current line in the file.
    [[nodiscard]] std::uint64_t line() const noexcept { return line_; }
    [[nodiscard]] const std::filesystem::path& path() const noexcept { return path_; }

    /// Throws input_error "<file>:<line>: what".
    [[noreturn]] void fail(const std::string& what) const;
    /// Throws input_error "<file>:<line>:<column + 1>: column '<name>': what".
    [[noreturn]] void fail(std::size_t column, std::string_view name, const std::string& what) const;

private:
    struct file_closer {
        void operator()(std::FILE* f) const noexcept { std::fclose(f); }
    };

    [[nodiscard]] bool fill();
    void split(std::string_view line);

    std::filesystem::path path_;
    std::unique_ptr<std::FILE, file_closer> file_;
    std::string buffer_;      ///< bytes read and not yet consumed start at begin_
    std::size_t begin_ = 0;
    bool eof_ = false;
    std::uint64_t line_ = 0;
    std::string unquoted_;    ///< storage for quoted fields of the current line
    std::vector<std::string_view> fields_;
};

/// Parses an ISO 8601 UTC time as `time_utc` holds it (io/utc_time.hpp: the parser paqd itself
/// uses for SigMF core:datetime, and the inverse of the formatter that writes the column).
using io::parse_utc_ns;

/// Reads <base>-packets.csv row by row. The constructor reads and checks the header (every
/// column of docs/RECORDS.md must be present; the twelve streams' when `none_trellis_bits` is); next() parses and checks one row:
/// integers are non-negative decimal integers, `packets` >= 1, `time_s` finite (|t| <= 1e12 s),
/// `known_errors` <= 192 * `packets`, `errors` <=
/// `bits`, and the `_bits` / `_errors` fields are all empty or all filled, the same way in
/// every row (a pattern is configured for the whole run or not at all).
class packet_reader {
public:
    explicit packet_reader(std::filesystem::path path);

    /// Parses the next row into record. Returns false at the end of the file. Throws input_error.
    [[nodiscard]] bool next(packet_record& record);

    [[nodiscard]] const csv_reader& csv() const noexcept { return csv_; }

private:
    csv_reader csv_;
    std::size_t n_columns_ = 0;
    std::vector<std::string> names_;  ///< header names by column index
    // Column index of each field, looked up once from the header.
    std::size_t packet_ = 0, packets_ = 0, time_ = 0, batch_ = 0, start_ = 0, metric_ = 0, cfo_ = 0, sigma2_ = 0,
                ebn0_ = 0, energy_ = 0, spread_ = 0, zf_cond_ = 0, flags_ = 0;
    std::optional<std::size_t> time_utc_;  ///< the optional `time_utc` column
    std::size_t streams_ = n_paths;  ///< 12 when the header has the `_trellis` columns
    std::array<std::array<std::size_t, 4>, max_streams> path_cols_{};  ///< bits, errors, bep, known_errors
    bool coded_ = false;  ///< the header has `none_codewords_failed`: a coded link's columns
    std::array<std::array<std::size_t, 3>, max_streams> fec_cols_{};  ///< codewords_failed, iterations, channel_errors
    int pattern_state_ = -1;  ///< -1: not known yet (no row read), 0: no pattern, 1: pattern
};

/// The code of a coded link, as paqd's counters file names it (records.fec).
struct coded_link {
    std::string code;            ///< e.g. "ar4ja-4096-2/3"
    std::uint64_t n = 0;         ///< transmitted bits per codeword
    std::uint64_t k = 0;         ///< information bits per codeword
    std::uint64_t codewords_per_packet = 0;
    /// The continuous stream (records.fec.continuous): a packet holds up to
    /// codewords_per_packet codewords, as many as end in it, so the rows' packets do not
    /// give the codewords' count.
    bool continuous = false;
};

/// What paqd counted in the run, from <base>-counters.json (its JSON summary, written beside
/// the records): the losses as the receiver saw them, and the packets' spacing.
struct run_counters {
    std::filesystem::path path;
    std::uint64_t packets_found = 0;
    std::uint64_t gaps = 0;
    std::vector<std::pair<std::string, std::uint64_t>> gaps_by_reason;  ///< the file's order
    std::uint64_t samples_lost_in_gaps = 0;
    std::optional<std::uint64_t> samples_dropped;       ///< the ring's overflows (live runs)
    std::optional<std::uint64_t> source_packets_lost;   ///< datagrams missing (live network sources)
    std::optional<std::uint64_t> source_samples_lost;
    std::uint64_t packets_missed_in_sequence = 0;
    std::uint64_t batches_lost = 0;
    std::uint64_t samples_in_lost_batches = 0;
    std::uint64_t samples_in_short_segments = 0;
    /// One packet's length at the chain's rate (records.packet_spacing_s); 0 when absent.
    double packet_spacing_s = 0;
    /// A coded link's code (records.fec: paqd's receiver.fec), when the run decoded one.
    std::optional<coded_link> fec;
};

/// Files larger than this are refused (paqd's are a few KiB).
inline constexpr std::uintmax_t max_counters_bytes = std::uintmax_t{16} << 20;

/// Reads a counters file. Throws input_error naming the file when it is missing, too large,
/// not JSON, or a counter it needs is missing or not a non-negative number.
[[nodiscard]] run_counters read_run_counters(const std::filesystem::path& path);

/// Reads <base>-channel.csv row by row. The taps are the columns h<k>_re / h<k>_im for
/// k = 0, 1, ... as far as the header names them consecutively (at least h0).
class channel_reader {
public:
    explicit channel_reader(std::filesystem::path path);

    /// Parses the next row into record. Returns false at the end of the file. Throws input_error.
    [[nodiscard]] bool next(channel_record& record);

    [[nodiscard]] std::size_t taps() const noexcept { return tap_cols_.size(); }
    [[nodiscard]] const csv_reader& csv() const noexcept { return csv_; }

private:
    csv_reader csv_;
    std::size_t n_columns_ = 0;
    std::vector<std::string> names_;
    std::size_t packet_ = 0, time_ = 0, tap_offset_ = 0;
    std::vector<std::array<std::size_t, 2>> tap_cols_;  ///< re, im column of each tap
};

}  // namespace paq::report
