// The paq-report page: one self-contained HTML file (inline CSS and SVG, no script, no
// external resource) that compares the six equalizer paths of a run.
//
//   header           input files, packets, time span, mode (BER or estimated BEP), settings
//   summary table    paths ranked by BER (or mean estimated BEP), with exact counts; with
//                    each channel's records alone beside a two-channel run's, the combined
//                    paths against each channel alone
//   figure 1 (svg)   BER or BEP per path over time, log scale, one line per path
//   figure 2 (svg)   distribution of errors per packet, grouped bars per error class
//   figure 3 (svg)   CFO, estimated Eb/N0 and delay spread over time (mean, min-max band)
//   figure 4 (svg)   |h| per tap at the best and the worst window (only with a channel file)
//
// Each figure carries a "how to read this" paragraph.
#pragma once

#include "tools/report/aggregate.hpp"
#include "tools/report/records.hpp"

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace paq::report {

/// The channel file as the page shows it.
struct channel_view {
    std::filesystem::path path;
    std::uintmax_t bytes = 0;
    std::uint64_t rows = 0;
    std::size_t taps = 0;
    /// The rows nearest in time to the centres of report_data::best_window / worst_window.
    std::optional<channel_record> best;
    std::optional<channel_record> worst;
};

/// A run's receive channel received alone (paqd replay --each-channel with --records BASE:
/// BASE-chN-packets.csv beside the combined run's BASE-packets.csv).
struct channel_alone {
    int channel = 0;  ///< the recording's channel number N
    std::filesystem::path path;
    std::optional<report_data> data;  ///< nullopt: the channel found no packet alone
};

/// Everything on the page that does not come from the packet rows.
struct page_inputs {
    std::string title;                                        ///< empty: "Equalizer comparison"
    std::vector<std::pair<std::string, std::string>> meta;    ///< --meta key=value, in order
    std::filesystem::path packets_path;
    std::uintmax_t packets_bytes = 0;
    std::optional<channel_view> channel;  ///< nullopt: no channel file
    std::string no_channel_reason;        ///< shown when channel is nullopt
    double sample_rate_hz = 20.625e6;     ///< tap spacing of the channel estimate is 1 / sample_rate_hz
    std::string generated;                ///< e.g. "2024-05-01 12:00 UTC"; empty: not shown
    /// paqd's counters of the run (<base>-counters.json): the losses as paqd counted them.
    std::optional<run_counters> counters;
    std::string no_counters_reason;       ///< shown when counters is nullopt
    /// Two receive channels: each channel received alone, in channel order (empty: none found).
    std::vector<channel_alone> each_channel;
};

/// The whole HTML page.
[[nodiscard]] std::string render_html(const report_data& data, const page_inputs& inputs);

/// Times (s) whose nearest channel rows the page shows: the centre of best_window, then of
/// worst_window, for those that exist (0, 1 or 2 values).
[[nodiscard]] std::vector<double> snapshot_times(const report_data& data);

/// An integer with narrow no-break spaces between groups of three digits, as the page prints
/// counts: 1234567 -> "1&#8239;234&#8239;567" (a thin space, U+2009, let a number wrap).
[[nodiscard]] std::string format_count(std::uint64_t n);

/// A rate (BER, BEP) as the page prints it: "0", "1.23e-5", "0.0123"; "n/a" for NaN.
[[nodiscard]] std::string format_rate(double x);

/// A UTC time as the axes label it: "HH:MM:SS", with `decimals` digits of the second.
[[nodiscard]] std::string format_utc_time(std::int64_t ns_since_epoch, int decimals = 0);
/// "YYYY-MM-DD HH:MM:SS.mmm UTC".
[[nodiscard]] std::string format_utc_datetime(std::int64_t ns_since_epoch);

/// Text with &, <, >, " and ' escaped for HTML.
[[nodiscard]] std::string html_escape(std::string_view text);

}  // namespace paq::report
