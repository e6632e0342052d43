// paq-report: one self-contained HTML page that compares the six equalizer paths of a paqd
// run, from its per-packet records (docs/RECORDS.md).
//
//   paq-report flight7                      reads flight7-packets.csv (+ flight7-channel.csv if
//                                           present), writes flight7-report.html
//   paq-report flight7-packets.csv --channel ch.csv --title "Flight 7" --meta tail=N123 -o f7.html
//
// A two-channel run's records with each channel's alone beside them (paqd replay --each-channel
// --records flight7: flight7-ch1-packets.csv, flight7-ch2-packets.csv) add a table of the
// combined paths against each channel alone.
//
// Exit status: 0 written, 1 unreadable or malformed input (the message names file:line:column)
// or output not writable, 2 bad arguments.
#include "config/cli.hpp"
#include "tools/report/aggregate.hpp"
#include "tools/report/html.hpp"
#include "tools/report/records.hpp"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

namespace {

namespace fs = std::filesystem;
using namespace paq::report;

constexpr std::string_view packets_suffix = "-packets.csv";

/// Thrown for arguments that are well-formed for CLI11 but unusable (exit status 2).
class usage_error : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

/// "<base>", "<base>-packets.csv" or "<base>.csv" -> <base>.
[[nodiscard]] std::string base_of(const std::string& input)
{
    if (input.size() > packets_suffix.size() && input.ends_with(packets_suffix)) {
        return input.substr(0, input.size() - packets_suffix.size());
    }
    if (input.size() > 4 && input.ends_with(".csv")) return input.substr(0, input.size() - 4);
    return input;
}

/// The records of each receive channel alone beside a two-channel run's (paqd replay
/// --each-channel --records BASE): <base>-chN-packets.csv, in channel order.
[[nodiscard]] std::vector<std::pair<int, fs::path>> channel_files(const std::string& base)
{
    const fs::path b(base);
    const fs::path dir = b.has_parent_path() ? b.parent_path() : fs::path(".");
    const std::string prefix = b.filename().string() + "-ch";
    std::vector<std::pair<int, fs::path>> out;
    std::error_code ec;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
        const std::string name = it->path().filename().string();
        if (name.size() <= prefix.size() + packets_suffix.size() || !name.starts_with(prefix) || !name.ends_with(packets_suffix)) continue;
        const std::string digits = name.substr(prefix.size(), name.size() - prefix.size() - packets_suffix.size());
        if (digits.size() > 2 || !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) continue;
        out.emplace_back(std::stoi(digits), it->path());
    }
    std::sort(out.begin(), out.end());
    return out;
}

[[nodiscard]] std::string utc_now()
{
    const auto now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
    std::tm tm{};
    gmtime_r(&now, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M UTC", &tm);
    return buf;
}

/// Writes text to path through "<path>.tmp" and a rename, so that a failed run never leaves a
/// half-written page where the previous one was.
void write_file(const fs::path& path, const std::string& text)
{
    const fs::path tmp = path.string() + ".tmp";
    {
        std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
        if (!out) throw std::runtime_error(tmp.string() + ": cannot create: " + std::generic_category().message(errno));
        out.write(text.data(), static_cast<std::streamsize>(text.size()));
        out.close();
        if (!out) throw std::runtime_error(tmp.string() + ": write failed");
    }
    std::error_code ec;
    fs::rename(tmp, path, ec);
    if (ec) {
        fs::remove(tmp, ec);
        throw std::runtime_error(path.string() + ": cannot rename " + tmp.string() + " into place");
    }
}

}  // namespace

int main(int argc, char** argv)
{
    CLI::App app{"paq-report: side-by-side equalizer comparison (one self-contained HTML page) from paqd's "
                 "per-packet records"};
    paq::cli::conventions(app, "paq-report", "0 page written; 1 runtime failure (records unreadable, page not writable); 2 usage error");
    std::string input, channel, counters, output, title;
    std::vector<std::string> meta_args;
    bool no_channel = false, no_counters = false;
    report_options options;
    double sample_rate_hz = 20.625e6;
    app.add_option("input", input, "Records: the base name <base> or the file <base>-packets.csv")->required();
    app.add_option("--channel", channel, "Channel file (default: <base>-channel.csv when it exists)");
    app.add_flag("--no-channel", no_channel, "Do not read a channel file");
    app.add_option("--counters", counters,
                   "paqd's counters of the run (default: <base>-counters.json when it exists): the losses as paqd "
                   "counted them, and the packet spacing");
    app.add_flag("--no-counters", no_counters, "Do not read a counters file (the losses then come from the records alone)");
    app.add_option("--output,-o", output, "HTML file to write (default: <base>-report.html)");
    app.add_option("--title", title, "Title of the page, e.g. the flight's name");
    app.add_option("--meta", meta_args, "Run setting shown in the header, KEY=VALUE (repeatable)");
    app.add_option("--max-points", options.max_points, "Most points per line in the time plots, 2..100000")
        ->capture_default_str()
        ->check(CLI::Range(2, 100000));
    app.add_option("--window-s", options.window_s, "Window for the worst / best moments, in s, 0.001..3600")
        ->capture_default_str()
        ->check(CLI::Range(0.001, 3600.0));
    app.add_option("--sample-rate", sample_rate_hz, "Sample rate in Hz (the channel taps are one sample apart)")
        ->capture_default_str()
        ->check(CLI::PositiveNumber);
    app.get_option("--no-channel")->excludes("--channel");
    app.get_option("--no-counters")->excludes("--counters");
    if (const int rc = paq::cli::parse(app, argc, argv); rc >= 0) return rc;

    page_inputs page;
    try {
        for (const auto& m : meta_args) {
            const auto eq = m.find('=');
            if (eq == std::string::npos || eq == 0) throw usage_error("--meta: '" + m + "' is not KEY=VALUE");
            page.meta.emplace_back(m.substr(0, eq), m.substr(eq + 1));
        }
    } catch (const usage_error& e) {
        std::cerr << "paq-report: " << e.what() << "\n";
        return 2;
    }

    try {
        const std::string base = base_of(input);
        page.packets_path = input.ends_with(".csv") ? fs::path(input) : fs::path(base + std::string(packets_suffix));
        if (output.empty()) output = base + "-report.html";
        page.title = title;
        page.sample_rate_hz = sample_rate_hz;
        page.generated = utc_now();

        fs::path counters_path;
        if (no_counters) {
            page.no_counters_reason = "not read (--no-counters)";
        } else if (!counters.empty()) {
            counters_path = counters;  // named explicitly: a missing file is an error
        } else if (const fs::path guess = base + "-counters.json"; fs::exists(guess)) {
            counters_path = guess;
        } else {
            page.no_counters_reason = "no " + guess.string() + " next to the packets file";
        }
        if (!counters_path.empty()) {
            page.counters = read_run_counters(counters_path);
            options.packet_spacing_s = page.counters->packet_spacing_s;
            options.fec = page.counters->fec;
        }

        const auto t0 = std::chrono::steady_clock::now();
        const report_data data = read_packets_file(page.packets_path, options);
        std::error_code ec;
        page.packets_bytes = fs::file_size(page.packets_path, ec);

        fs::path channel_path;
        if (no_channel) {
            page.no_channel_reason = "not read (--no-channel)";
        } else if (!channel.empty()) {
            channel_path = channel;  // named explicitly: a missing file is an error
        } else if (const fs::path guess = base + "-channel.csv"; fs::exists(guess)) {
            channel_path = guess;
        } else {
            page.no_channel_reason = "no " + guess.string() + " next to the packets file";
        }
        if (!channel_path.empty()) {
            const auto times = snapshot_times(data);
            auto snaps = read_channel_snapshots(channel_path, times);
            channel_view view;
            view.path = channel_path;
            view.bytes = fs::file_size(channel_path, ec);
            view.rows = snaps.rows;
            view.taps = snaps.taps;
            std::size_t k = 0;
            if (data.best_window) view.best = std::move(snaps.nearest[k++]);
            if (data.worst_window) view.worst = std::move(snaps.nearest[k++]);
            page.channel = std::move(view);
        }

        for (const auto& [ch, path] : channel_files(base)) page.each_channel.push_back({ch, path, read_packets_file_if_any(path, options)});

        const std::string html = render_html(data, page);
        write_file(output, html);
        const double elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

        const auto& best = data.paths[data.ranking[0]];
        const auto& worst = data.paths[data.ranking[data.streams - 1]];
        const char* measure = data.ber_mode ? "BER" : "BEP";
        const auto rate = [](double x) { return std::isnan(x) ? std::string("n/a") : format_rate(x); };
        std::printf("paq-report: %llu packets in %llu rows, %.1f s, %s mode; best %s (%s %s), worst %s (%s %s); "
                    "wrote %s (%.0f kB) in %.2f s\n",
                    static_cast<unsigned long long>(data.packets), static_cast<unsigned long long>(data.rows),
                    data.max_time_s - data.min_time_s, measure, std::string(path_names[best.index]).c_str(), measure,
                    rate(data.value(best.sums)).c_str(), std::string(path_names[worst.index]).c_str(), measure,
                    rate(data.value(worst.sums)).c_str(), output.c_str(), static_cast<double>(html.size()) / 1e3,
                    elapsed_s);
    } catch (const input_error& e) {
        std::cerr << "paq-report: " << e.what() << "\n";
        return 1;
    } catch (const std::exception& e) {
        std::cerr << "paq-report: error: " << e.what() << "\n";
        return 1;
    }
    return 0;
}
