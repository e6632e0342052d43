// Aggregation of per-packet records into what paq-report shows: per-path totals and the
// ranking, time bins for the plots, 1-second windows, per-packet error classes, and the
// channel rows nearest to chosen moments.
//
// Everything is summed exactly from the rows: bit and error counts are integer sums, means are
// sums divided by counts, so a row that stands for `packets` > 1 packets (decimation) weighs
// exactly as much as its packets. Nothing holds the rows themselves: report_builder::add()
// folds each row into fixed-size state as the file streams past.
//
// Time bins for the plots (time_binner) start at 2^-10 s and double when the run grows:
//
//   key = floor(time_s * 1024) >> shift          bin width = 2^(shift - 10) s
//   span of keys > max_bins  ->  ++shift, bins 2j and 2j+1 merge into bin j
//
// so a bin is always the exact sum of the rows whose time falls in it, the plots never have
// more than max_bins points per line, and widths are powers of two of a second (..., 0.25 s,
// 0.5 s, 1 s, 2 s): a 20-minute flight at max_bins = 1000 gets 600 bins of 2 s.
#pragma once

#include "tools/report/records.hpp"

#include <array>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <span>
#include <vector>

namespace paq::report {

/// Per-packet error classes of the distribution figure: 0, 1, 2-3, 4-7, ..., 512-1023, >= 1024.
inline constexpr std::size_t n_error_classes = 12;

/// Class of a per-packet (per-row) error count: 0 -> 0, 1 -> 1, 2..3 -> 2, 4..7 -> 3, ...
[[nodiscard]] std::size_t error_class(std::uint64_t errors) noexcept;

/// Label of an error class: "0", "1", "2-3", ..., ">=1024".
[[nodiscard]] std::string error_class_label(std::size_t cls);

/// Exact sums of one path over a set of rows.
struct path_sums {
    std::uint64_t packets = 0;          ///< packets of the rows
    std::uint64_t checked_packets = 0;  ///< packets of the rows with bits > 0 (PN checker locked)
    std::uint64_t bits = 0;
    std::uint64_t errors = 0;
    std::uint64_t known_errors = 0;
    double bep_sum = 0;             ///< sum of bep * packets over rows whose bep is finite
    std::uint64_t bep_packets = 0;  ///< packets of those rows
    /// A coded link's rows (path_record): failed codewords, decoder iterations, channel errors.
    std::uint64_t codewords_failed = 0;
    std::uint64_t iterations = 0;
    std::uint64_t channel_errors = 0;

    void add(const path_record& r, std::uint64_t row_packets) noexcept;
    void merge(const path_sums& o) noexcept;
    /// errors / bits; NaN when bits == 0.
    [[nodiscard]] double ber() const noexcept;
    /// bep_sum / bep_packets; NaN when bep_packets == 0.
    [[nodiscard]] double mean_bep() const noexcept;
    /// known_errors / (192 * packets); NaN when packets == 0.
    [[nodiscard]] double known_ber() const noexcept;
};

/// Mean, minimum and maximum of an estimate over rows; non-finite values are left out.
struct estimate_stats {
    double sum = 0;
    double min = std::numeric_limits<double>::infinity();
    double max = -std::numeric_limits<double>::infinity();
    std::uint64_t n = 0;  ///< rows with a finite value

    void add(double x) noexcept;
    void merge(const estimate_stats& o) noexcept;
    /// sum / n; NaN when n == 0.
    [[nodiscard]] double mean() const noexcept;
};

/// Everything the plots need about the rows of one time span.
struct time_bin {
    std::uint64_t rows = 0;
    std::uint64_t packets = 0;
    std::array<path_sums, max_streams> paths{};  ///< per stream; beyond report_data::streams all zero
    estimate_stats cfo_hz;
    estimate_stats ebn0_db;
    estimate_stats delay_spread_ns;

    void add(const packet_record& r) noexcept;
    void merge(const time_bin& o) noexcept;
};

/// Time bins whose width doubles as needed to keep at most max_bins of them (see the top of
/// this file). The bins are dense: empty bins inside the span are kept (rows == 0).
class time_binner {
public:
    /// \param max_bins most bins over the whole span, >= 2
    explicit time_binner(std::size_t max_bins);

    void add(const packet_record& r);

    [[nodiscard]] double width_s() const noexcept;
    /// Start time of bins()[0]; 0 while empty.
    [[nodiscard]] double start_s() const noexcept;
    [[nodiscard]] const std::vector<time_bin>& bins() const noexcept { return bins_; }

    static constexpr double base_width_s = 1.0 / 1024.0;

private:
    void coarsen();

    std::size_t max_bins_;
    int shift_ = 0;
    std::int64_t first_key_ = 0;
    std::vector<time_bin> bins_;
};

/// A fixed-width window of time (the "1-second windows").
struct window_stat {
    double start_s = 0;
    time_bin bin;
};

/// Where packets are missing, marked on the page's time axes. The rows say where packets were
/// found; between two rows the time holds round(dt / spacing) packet slots (spacing: the
/// median per-packet spacing of the run's first intervals), of which the row accounts for
/// `packets`; the rest are missing: a gap in the samples, a fade, or detections missed. A
/// jump of the `packet` index beyond `packets` is packets found whose rows were not written
/// (paqd's record_rows_lost).
struct time_mark {
    double start_s = 0;  ///< time of the row before
    double end_s = 0;    ///< time of the row after
    std::uint64_t missing_packets = 0;     ///< slots with no packet found
    std::uint64_t unrecorded_packets = 0;  ///< packets found without a row
    /// At least gap_min_missing packets missing in a row: a gap (drawn as a band); otherwise
    /// a few packets lost (drawn as a tick).
    bool gap = false;
};

/// Missing packets in one interval from which it counts as a gap rather than a loss.
inline constexpr std::uint64_t gap_min_missing = 3;
/// Intervals whose median per-packet spacing is the run's packet spacing.
inline constexpr std::size_t spacing_intervals = 63;
/// Marks kept for drawing (every missing packet is counted regardless).
inline constexpr std::size_t max_marks = 20000;

struct report_options {
    std::size_t max_points = 1000;  ///< most points per line in the time plots, 2..100000
    double window_s = 1.0;          ///< window for the worst / best moments, >= 0.001 s
    double bad_threshold = 1e-2;    ///< "bad packet": BER (or BEP) above this
    /// The packets' spacing in s when it is known (paqd's counters: one packet's length at
    /// the chain's rate); 0: estimated from the rows (the median interval between them, which
    /// a lossy run lengthens).
    double packet_spacing_s = 0;
    /// A coded link's code (paqd's counters, records.fec): codewords per packet and their size,
    /// for the frame error rate and the channel's BER before decoding.
    std::optional<coded_link> fec;
};

/// What the summary table shows for one path.
struct path_summary {
    std::size_t index = 0;  ///< into path_names (a stream)
    std::size_t rank = 0;   ///< 1 = best
    path_sums sums;
    /// BER mode: packets of rows with bits > 0 and no errors, out of sums.checked_packets.
    /// BEP mode: packets of rows with no known-bit errors, out of sums.packets.
    std::uint64_t zero_packets = 0;
    double zero_share = 0;  ///< NaN when the denominator is 0
    /// BER mode: packets of rows whose errors / bits > bad_threshold, out of sums.checked_packets.
    /// BEP mode: packets of rows whose bep > bad_threshold, out of sums.bep_packets.
    std::uint64_t bad_packets = 0;
    double bad_share = 0;
    /// The window with the highest BER (BEP mode: mean BEP) among the eligible windows.
    std::optional<std::size_t> worst_window;
    double worst_window_value = std::numeric_limits<double>::quiet_NaN();
    /// Rows per error class: data-bit errors of rows with bits > 0 (BER mode) or known-bit
    /// errors of every row (BEP mode). A row counts once, whatever its `packets`.
    std::array<std::uint64_t, n_error_classes> error_rows{};
    std::uint64_t classified_rows = 0;
};

struct report_data {
    report_options options;
    bool ber_mode = true;  ///< false: no PN pattern, the page ranks by estimated BEP
    std::uint64_t rows = 0;
    std::uint64_t packets = 0;
    std::uint64_t max_row_packets = 0;   ///< largest `packets` of a row (the decimation)
    std::uint64_t decimated_rows = 0;    ///< rows with packets > 1
    std::uint64_t first_packet = 0;      ///< `packet` of the first row
    std::uint64_t last_packet = 0;       ///< `packet` of the last row
    double min_time_s = 0;
    double max_time_s = 0;
    std::uint64_t out_of_order_rows = 0; ///< rows whose time is before the previous row's
    /// The packet spacing (s) gaps are measured in; NaN with fewer than two rows in time order.
    double packet_spacing_s = std::numeric_limits<double>::quiet_NaN();
    bool packet_spacing_known = false;  ///< from report_options (paqd's counters), not estimated
    std::vector<time_mark> marks;            ///< in time order, at most max_marks
    std::uint64_t gaps = 0;                  ///< marks with gap set (all, not only those kept)
    std::uint64_t missing_packets = 0;       ///< sum over all intervals
    std::uint64_t unrecorded_packets = 0;    ///< sum over all intervals
    std::uint64_t marks_dropped = 0;         ///< beyond max_marks
    /// time_s = 0 as ns since the Unix epoch (UTC), when the rows carry `time_utc`: the page's
    /// time axes are then in UTC.
    std::optional<std::int64_t> utc_origin_ns;
    std::array<std::uint64_t, 5> flag_rows{};  ///< rows with flag bit b (1 << b) set
    std::uint64_t other_flag_rows = 0;         ///< rows with a flag bit above 16

    /// Streams of the run: 6 paths, or 12 when paqd ran receiver.detector both (the six paths
    /// decided symbol by symbol, then by the trellis). paths[0 .. streams) are used.
    std::size_t streams = n_paths;
    /// The rows carry a coded link's columns (paqd's receiver.fec): the BER counts decoded bits.
    bool coded = false;
    std::array<path_summary, max_streams> paths{};
    std::vector<std::size_t> ranking;  ///< stream indices, best first (streams of them)

    double bin_start_s = 0;
    double bin_width_s = 0;
    std::vector<time_bin> bins;

    std::vector<window_stat> windows;  ///< non-empty windows in time order
    /// A path's window counts for worst / best only with at least this weight (bits in BER
    /// mode, packets with a BEP in BEP mode): half the median weight of the path's non-empty
    /// windows, so that a partial window at the edge of the run does not win on a handful of bits.
    std::array<std::uint64_t, max_streams> window_min_weight{};
    /// Windows with the lowest and highest value (BER, or BEP) of the best-ranked path.
    std::optional<std::size_t> best_window;
    std::optional<std::size_t> worst_window;

    /// The ranking value of a path over a set of rows: BER (BER mode) or mean BEP.
    [[nodiscard]] double value(const path_sums& s) const noexcept;
    /// The weight of a window for path p, compared with window_min_weight.
    [[nodiscard]] std::uint64_t weight(const path_sums& s) const noexcept;
};

/// Folds packet records into a report_data, one row at a time.
class report_builder {
public:
    /// Throws std::invalid_argument when options are out of range.
    explicit report_builder(const report_options& options = {});

    void add(const packet_record& r);

    /// The report over the rows added so far. Throws std::invalid_argument when no row was added.
    [[nodiscard]] report_data finish() const;

private:
    report_options options_;
    report_data data_;  ///< the streamed part (counts, tallies); finish() completes a copy
    time_binner binner_;
    std::map<std::int64_t, time_bin> windows_;
    std::map<std::int64_t, time_bin>::iterator last_window_;
    std::int64_t last_window_key_ = 0;
    double last_time_s_ = 0;
    // gap detection: the intervals between consecutive rows, held until the spacing is known
    struct interval {
        double t0, t1;
        std::uint64_t row_packets, index_jump;
    };
    std::vector<interval> pending_;
    double spacing_s_ = 0;  ///< 0 until spacing_intervals intervals were seen
    std::uint64_t last_packet_ = 0;
    static double median_spacing(const std::vector<interval>& iv);
    static void classify(const interval& iv, double spacing_s, report_data& d);
};

/// Reads a packets file through report_builder. Throws input_error.
[[nodiscard]] report_data read_packets_file(const std::filesystem::path& path, const report_options& options = {});
/// The same for a file that may hold no data rows (the header only: a run that found no
/// packet): nullopt then, where read_packets_file throws.
[[nodiscard]] std::optional<report_data> read_packets_file_if_any(const std::filesystem::path& path,
                                                                  const report_options& options = {});

/// The rows of a channel file nearest in time to each of the given times.
struct channel_snapshots {
    std::uint64_t rows = 0;
    std::size_t taps = 0;
    std::vector<std::optional<channel_record>> nearest;  ///< one per time; empty if the file has no rows
};

/// Streams a channel file and keeps, for each time, the row nearest to it (the earlier one on a
/// tie). Throws input_error.
[[nodiscard]] channel_snapshots read_channel_snapshots(const std::filesystem::path& path,
                                                       std::span<const double> times_s);

}  // namespace paq::report
