// Tests of paq-report (tools/report/): reading per-packet records, exact aggregation, the
// ranking, the planted best / worst windows, error messages for malformed files, the HTML page
// (self-contained, one <svg> per figure), a flight-sized file, and the CLI's exit status.
//
// Every CSV is written by the seeded generators below, in the format of docs/RECORDS.md; the
// expected sums are accumulated while writing, independently of the code under test.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <optional>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

#include "tools/report/aggregate.hpp"
#include "tools/report/html.hpp"
#include "tools/report/records.hpp"

#include <nlohmann/json.hpp>

namespace {

namespace fs = std::filesystem;
using namespace paq::report;

constexpr double packets_per_s = 1628.0;  // 20.625 MS/s, as in docs/RECORDS.md
constexpr std::uint64_t bits_per_packet = 6144;

// ---------------------------------------------------------------------------------------------
// generators

/// Buffered CSV text writer; numbers through to_chars (shortest round-trip form for doubles).
class csv_writer {
public:
    explicit csv_writer(const fs::path& path)
        : out_(path, std::ios::binary | std::ios::trunc)
    {
        if (!out_) throw std::runtime_error("cannot create " + path.string());
        buf_.reserve(1 << 21);
    }
    ~csv_writer() { flush(); }
    csv_writer(const csv_writer&) = delete;
    csv_writer& operator=(const csv_writer&) = delete;

    void raw(std::string_view s) { buf_ += s; }
    void field(std::string_view s) { sep(), buf_ += s; }
    template <typename T>
    void num(T v)
    {
        sep();
        char tmp[40];
        const auto res = std::to_chars(tmp, tmp + sizeof tmp, v);
        buf_.append(tmp, res.ptr);
    }
    void end_row()
    {
        buf_ += '\n';
        first_ = true;
        if (buf_.size() > (1 << 20)) flush();
    }
    void flush()
    {
        out_.write(buf_.data(), static_cast<std::streamsize>(buf_.size()));
        buf_.clear();
    }

private:
    void sep()
    {
        if (!first_) buf_ += ',';
        first_ = false;
    }
    std::ofstream out_;
    std::string buf_;
    bool first_ = true;
};

[[nodiscard]] std::string packets_header(std::size_t streams = n_paths)
{
    std::string h = "packet,packets,time_s,batch,start_sample,metric,cfo_hz,sigma2,ebn0_db,channel_energy,"
                    "delay_spread_ns,zf_condition,flags";
    for (std::size_t k = 0; k < streams; ++k) {
        const std::string n(path_names[k]);
        h += "," + n + "_bits," + n + "_errors," + n + "_bep," + n + "_known_errors";
    }
    return h;
}

/// Sums over the rows a generator wrote, computed here, not by the code under test.
struct expected_sums {
    std::uint64_t rows = 0;
    std::uint64_t packets = 0;
    std::array<std::uint64_t, max_streams> bits{}, errors{}, known_errors{}, checked_packets{};
    std::array<double, max_streams> bep_sum{};
};

using row_maker = std::function<void(std::uint64_t row, packet_record& r)>;

/// An ISO 8601 UTC time with 9 fraction digits, made with gmtime_r (not the code under test).
[[nodiscard]] std::string iso_utc(std::int64_t ns)
{
    const auto s = static_cast<std::time_t>(ns / 1'000'000'000);
    std::tm tm{};
    gmtime_r(&s, &tm);
    char buf[64];
    std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%09lldZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                  tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<long long>(ns % 1'000'000'000));
    return buf;
}

/// Writes n_rows rows made by make() to path; has_pattern false leaves _bits / _errors empty.
/// With utc_origin_ns a `time_utc` column is added: the origin plus the row's time_s. streams:
/// 6, or 12 (paqd's receiver.detector both: the `_trellis` columns too).
expected_sums write_packets(const fs::path& path, std::uint64_t n_rows, const row_maker& make, bool has_pattern = true,
                            std::optional<std::int64_t> utc_origin_ns = std::nullopt, std::size_t streams = n_paths)
{
    csv_writer w(path);
    w.raw(packets_header(streams));
    if (utc_origin_ns) w.raw(",time_utc");
    w.end_row();
    expected_sums e;
    packet_record r;
    for (std::uint64_t i = 0; i < n_rows; ++i) {
        r = packet_record{};
        make(i, r);
        w.num(r.packet);
        w.num(r.packets);
        w.num(r.time_s);
        w.num(r.batch);
        w.num(r.start_sample);
        w.num(r.metric);
        w.num(r.cfo_hz);
        w.num(r.sigma2);
        w.num(r.ebn0_db);
        w.num(r.channel_energy);
        w.num(r.delay_spread_ns);
        w.num(r.zf_condition);
        w.num(r.flags);
        ++e.rows;
        e.packets += r.packets;
        for (std::size_t p = 0; p < streams; ++p) {
            const auto& pr = r.paths[p];
            if (has_pattern) {
                w.num(pr.bits);
                w.num(pr.errors);
                e.bits[p] += pr.bits;
                e.errors[p] += pr.errors;
                if (pr.bits > 0) e.checked_packets[p] += r.packets;
            } else {
                w.field("");
                w.field("");
            }
            w.num(pr.bep);
            w.num(pr.known_errors);
            e.known_errors[p] += pr.known_errors;
            e.bep_sum[p] += pr.bep * static_cast<double>(r.packets);
        }
        if (utc_origin_ns) w.field(iso_utc(*utc_origin_ns + std::llround(r.time_s * 1e9)));
        w.end_row();
    }
    return e;
}

/// Plain estimates for a row at time t (values a receiver could report).
void fill_estimates(packet_record& r, std::uint64_t packet, double t)
{
    r.packet = packet;
    r.time_s = t;
    r.batch = packet / 3104;
    r.start_sample = static_cast<std::uint64_t>(t * 20.625e6);
    r.metric = 0.85;
    r.cfo_hz = 50e3 + 2e3 * std::sin(t / 7);
    r.sigma2 = 0.02;
    r.ebn0_db = 12 + std::cos(t / 5);
    r.channel_energy = 1.0;
    r.delay_spread_ns = 40 + 10 * std::sin(t / 3);
    r.zf_condition = 25;
}

/// A channel file: one row at each time, taps all 0.01 except a main tap 1.0 at index 4
/// (tap_offset -4) and an echo of height `echo[i]` at index 10.
void write_channel(const fs::path& path, const std::vector<double>& times, const std::vector<double>& echo)
{
    csv_writer w(path);
    std::string h = "packet,time_s,tap_offset";
    for (int k = 0; k < 38; ++k) h += ",h" + std::to_string(k) + "_re,h" + std::to_string(k) + "_im";
    w.raw(h);
    w.end_row();
    for (std::size_t i = 0; i < times.size(); ++i) {
        w.num(static_cast<std::uint64_t>(std::llround(times[i] * packets_per_s)));
        w.num(times[i]);
        w.num(-4);
        for (int k = 0; k < 38; ++k) {
            w.num(k == 4 ? 1.0 : k == 10 ? echo[i] : 0.01);
            w.num(0.0);
        }
        w.end_row();
    }
}

[[nodiscard]] std::string read_text(const fs::path& path)
{
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

[[nodiscard]] std::size_t count(const std::string& text, std::string_view what)
{
    std::size_t n = 0;
    for (auto pos = text.find(what); pos != std::string::npos; pos = text.find(what, pos + what.size())) ++n;
    return n;
}

/// splitmix64: a fast, seeded, reproducible hash for per-row pseudo-random numbers.
[[nodiscard]] std::uint64_t mix(std::uint64_t x) noexcept
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

// Every test gets its own directory: ctest runs tests as parallel processes of one binary.
class report_test : public ::testing::Test {
protected:
    void SetUp() override
    {
        const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
        dir_ = fs::temp_directory_path() /
               ("paq_test_report_" + std::string(info->name()) + "_" + std::to_string(::getpid()));
        fs::remove_all(dir_);
        ASSERT_TRUE(fs::create_directories(dir_));
    }
    void TearDown() override
    {
        std::error_code ec;
        fs::remove_all(dir_, ec);
    }
    [[nodiscard]] fs::path path(const std::string& name) const { return dir_ / name; }

    /// The input_error message of reading a packets file (empty when it reads without error).
    [[nodiscard]] static std::string packets_error(const fs::path& p)
    {
        try {
            (void)read_packets_file(p);
        } catch (const input_error& e) {
            return e.what();
        }
        return {};
    }

    fs::path dir_;
};

/// Random rows: error counts with per-path rates (0 when the path is "unlocked" in a stretch),
/// every 7th row decimated (packets = 10), seeded.
row_maker random_rows(std::uint64_t seed)
{
    // Rows are made in order, once each: next_packet carries the packet index along.
    return [seed, next_packet = std::uint64_t{0}](std::uint64_t i, packet_record& r) mutable {
        std::mt19937_64 rng(seed * 1000003 + i);
        const std::uint64_t packets = i % 7 == 3 ? 10 : 1;
        next_packet += packets;
        fill_estimates(r, next_packet - 1, static_cast<double>(next_packet - 1) / packets_per_s);
        r.packets = packets;
        r.flags = rng() % 5 == 0 ? 2 : 0;
        for (std::size_t p = 0; p < n_paths; ++p) {
            auto& pr = r.paths[p];
            const bool locked = !(p == 3 && (i / 500) % 4 == 1);  // cma drops lock now and then
            pr.bits = locked ? bits_per_packet * packets : 0;
            std::poisson_distribution<std::uint64_t> errs(static_cast<double>(pr.bits) * 1e-4 * static_cast<double>(p + 1));
            pr.errors = locked ? std::min(pr.bits, errs(rng)) : 0;
            pr.bep = 1e-4 * static_cast<double>(p + 1) * (0.5 + std::uniform_real_distribution<double>(0, 1)(rng));
            pr.known_errors = rng() % 3 == 0 ? rng() % (4 * packets) : 0;
        }
    };
}

// ---------------------------------------------------------------------------------------------
// exact sums, ranking, windows

TEST_F(report_test, summary_sums_equal_the_csv_sums_with_decimated_rows)
{
    const auto file = path("run-packets.csv");
    const auto e = write_packets(file, 20000, random_rows(1));
    // A small point budget forces the time bins to double many times.
    report_options opt;
    opt.max_points = 37;
    const auto d = read_packets_file(file, opt);

    EXPECT_TRUE(d.ber_mode);
    EXPECT_EQ(d.rows, e.rows);
    EXPECT_EQ(d.packets, e.packets);
    EXPECT_EQ(d.max_row_packets, 10u);
    EXPECT_GT(d.decimated_rows, 0u);
    for (std::size_t p = 0; p < n_paths; ++p) {
        SCOPED_TRACE(std::string(path_names[p]));
        const auto& s = d.paths[p].sums;
        EXPECT_EQ(s.packets, e.packets);
        EXPECT_EQ(s.bits, e.bits[p]);
        EXPECT_EQ(s.errors, e.errors[p]);
        EXPECT_EQ(s.known_errors, e.known_errors[p]);
        EXPECT_EQ(s.checked_packets, e.checked_packets[p]);
        EXPECT_DOUBLE_EQ(s.mean_bep(), e.bep_sum[p] / static_cast<double>(e.packets));
        EXPECT_DOUBLE_EQ(s.ber(), static_cast<double>(e.errors[p]) / static_cast<double>(e.bits[p]));
    }
    EXPECT_LT(e.checked_packets[3], e.packets);  // the generator did unlock cma

    // The time bins and the windows partition the rows: their sums are the totals again.
    EXPECT_LE(d.bins.size(), opt.max_points);
    EXPECT_GE(d.bins.size(), opt.max_points / 2);
    time_bin bins_total, windows_total;
    for (const auto& b : d.bins) bins_total.merge(b);
    for (const auto& w : d.windows) windows_total.merge(w.bin);
    for (const auto* t : {&bins_total, &windows_total}) {
        EXPECT_EQ(t->rows, e.rows);
        EXPECT_EQ(t->packets, e.packets);
        for (std::size_t p = 0; p < n_paths; ++p) {
            EXPECT_EQ(t->paths[p].bits, e.bits[p]);
            EXPECT_EQ(t->paths[p].errors, e.errors[p]);
        }
    }
    // Windows are 1 s: a 20000-row run of ~1.2 packets per row spans ~14.7 s.
    EXPECT_EQ(d.windows.size(), static_cast<std::size_t>(std::floor(d.max_time_s)) + 1);

    // The page prints the exact counts.
    page_inputs in;
    in.packets_path = file;
    in.no_channel_reason = "test";
    const auto html = render_html(d, in);
    for (std::size_t p = 0; p < n_paths; ++p) {
        EXPECT_NE(html.find("<td>" + format_count(e.bits[p]) + "</td><td>" + format_count(e.errors[p]) + "</td>"),
                  std::string::npos)
            << path_names[p];
    }
}

TEST_F(report_test, time_bins_double_and_sum_exactly)
{
    time_binner b(10);
    packet_record r;
    r.paths[0].bits = 100;
    // 0 .. 99.9 s in steps of 0.1 s: 1000 rows; the width must grow to 16 s (7 bins) from 2^-10 s.
    for (int i = 0; i < 1000; ++i) {
        r.time_s = i / 10.0;
        r.paths[0].errors = static_cast<std::uint64_t>(i % 3);
        b.add(r);
    }
    EXPECT_DOUBLE_EQ(b.width_s(), 16.0);
    EXPECT_DOUBLE_EQ(b.start_s(), 0.0);
    ASSERT_EQ(b.bins().size(), 7u);
    std::uint64_t rows = 0, errors = 0;
    for (const auto& bin : b.bins()) {
        rows += bin.rows;
        errors += bin.paths[0].errors;
    }
    EXPECT_EQ(rows, 1000u);
    EXPECT_EQ(errors, 999u);  // 333 rows with 1 and 333 with 2 errors (i % 3 over 0..999)
    // The first bin holds exactly the rows with time < 16 s: 0.0 .. 15.9 s.
    EXPECT_EQ(b.bins()[0].rows, 160u);

    // A row far in the past widens the span the other way without a huge fine vector.
    r.time_s = -1000;
    b.add(r);
    EXPECT_LE(b.bins().size(), 10u);
    EXPECT_LE(b.start_s(), -1000.0);
}

// paqd's receiver.detector both writes twelve column groups: the paths decided symbol by
// symbol, then by the trellis. The report reads all twelve, ranks them together, sums each
// exactly, and sets the two detectors side by side (the trellis here with a third of the
// symbol-by-symbol errors on every path but none). A file whose trellis columns are partial is
// refused, naming the missing column.
TEST_F(report_test, twelve_streams_of_detector_both_are_ranked_and_set_side_by_side)
{
    const std::array<std::uint64_t, n_paths> errors_per_packet{30, 12, 6, 9, 7, 8};
    const auto file = path("both-packets.csv");
    const auto e = write_packets(
        file, 2500,
        [&](std::uint64_t i, packet_record& r) {
            fill_estimates(r, i, static_cast<double>(i) / packets_per_s);
            r.streams = max_streams;
            for (std::size_t p = 0; p < max_streams; ++p) {
                const std::uint64_t sxs = errors_per_packet[p % n_paths];
                r.paths[p].bits = bits_per_packet;
                r.paths[p].errors = p < n_paths || p == n_paths ? sxs : sxs / 3;
                r.paths[p].bep = 1e-4 * static_cast<double>(p + 1);
                r.paths[p].known_errors = i % 7 == 0 ? 1 : 0;
            }
        },
        true, std::nullopt, max_streams);
    const auto d = read_packets_file(file);
    ASSERT_EQ(d.streams, max_streams);
    ASSERT_EQ(d.ranking.size(), max_streams);
    for (std::size_t p = 0; p < max_streams; ++p) {
        SCOPED_TRACE(std::string(path_names[p]));
        EXPECT_EQ(d.paths[p].sums.bits, e.bits[p]);
        EXPECT_EQ(d.paths[p].sums.errors, e.errors[p]);
        EXPECT_EQ(d.paths[p].sums.known_errors, e.known_errors[p]);
    }
    // mmse_trellis (2 errors a packet) first, none and none_trellis (30) last.
    EXPECT_EQ(d.ranking[0], 8u);
    EXPECT_EQ(d.paths[8].rank, 1u);
    EXPECT_GE(d.paths[0].rank, 11u);
    EXPECT_GE(d.paths[6].rank, 11u);
    page_inputs in;
    in.packets_path = file;
    in.no_channel_reason = "none";
    const auto html = render_html(d, in);
    for (const auto n : path_names) EXPECT_GE(count(html, ">" + std::string(n)), 2u) << n;
    EXPECT_NE(html.find("The two detectors side by side"), std::string::npos);
    // MMSE: 6 errors a packet against 2: the ratio 0.333.
    EXPECT_NE(html.find("<td>0.333</td>"), std::string::npos);

    // A file with only some trellis columns.
    {
        csv_writer w(path("partial-packets.csv"));
        std::string h = packets_header(n_paths) + ",none_trellis_bits,none_trellis_errors,none_trellis_bep,none_trellis_known_errors";
        w.raw(h);
        w.end_row();
    }
    try {
        (void)read_packets_file(path("partial-packets.csv"));
        ADD_FAILURE() << "a file with partial trellis columns was read";
    } catch (const input_error& x) {
        EXPECT_NE(std::string(x.what()).find("missing column 'zf_trellis_bits'"), std::string::npos) << x.what();
    }
}

TEST_F(report_test, ranking_follows_ber_and_puts_never_locked_paths_last)
{
    // Error rates per path: fde1 best, then mmse, fde2, zf, cma; none never locks (0 bits).
    const std::array<std::uint64_t, n_paths> errors_per_packet{0, 4, 2, 5, 1, 3};
    const auto file = path("rank-packets.csv");
    (void)write_packets(file, 3000, [&](std::uint64_t i, packet_record& r) {
        fill_estimates(r, i, static_cast<double>(i) / packets_per_s);
        for (std::size_t p = 0; p < n_paths; ++p) {
            r.paths[p].bits = p == 0 ? 0 : bits_per_packet;
            r.paths[p].errors = p == 0 ? 0 : errors_per_packet[p];
            // BEP in the opposite order, so that a ranking by BEP would differ.
            r.paths[p].bep = 1e-3 / static_cast<double>(errors_per_packet[p] + 1);
        }
    });
    const auto d = read_packets_file(file);
    const std::vector<std::size_t> expected{4, 2, 5, 1, 3, 0};
    EXPECT_EQ(d.ranking, expected);
    EXPECT_EQ(d.paths[4].rank, 1u);
    EXPECT_EQ(d.paths[0].rank, 6u);
    EXPECT_TRUE(std::isnan(d.paths[0].sums.ber()));
    EXPECT_EQ(d.paths[0].sums.checked_packets, 0u);
    // fde1 has 1 error in every packet: no error-free packet, none above 1e-2 either.
    EXPECT_DOUBLE_EQ(d.paths[4].zero_share, 0.0);
    EXPECT_DOUBLE_EQ(d.paths[4].bad_share, 0.0);
    EXPECT_EQ(d.paths[2].error_rows[error_class(2)], 3000u);
}

TEST_F(report_test, planted_best_and_worst_windows_and_their_channel_rows)
{
    // 60 s at 1628 packets/s. The best path (fde2) has 1 error per packet everywhere except
    // [12, 13) s with none and [37, 38) s with 40 per packet; zf's own worst window is [50, 51).
    const auto file = path("flight-packets.csv");
    const auto n = static_cast<std::uint64_t>(60 * packets_per_s);
    (void)write_packets(file, n, [](std::uint64_t i, packet_record& r) {
        const double t = static_cast<double>(i) / packets_per_s;
        fill_estimates(r, i, t);
        for (std::size_t p = 0; p < n_paths; ++p) {
            r.paths[p].bits = bits_per_packet;
            r.paths[p].errors = 2 + p;  // other paths worse than fde2 (1) everywhere
            r.paths[p].bep = 1e-4;
        }
        auto& best = r.paths[5];
        best.errors = t >= 12 && t < 13 ? 0 : t >= 37 && t < 38 ? 40 : 1;
        if (t >= 50 && t < 51) r.paths[1].errors = 300;
    });
    const auto d = read_packets_file(file);
    EXPECT_EQ(d.ranking[0], 5u);
    ASSERT_TRUE(d.best_window && d.worst_window);
    EXPECT_DOUBLE_EQ(d.windows[*d.best_window].start_s, 12.0);
    EXPECT_DOUBLE_EQ(d.windows[*d.worst_window].start_s, 37.0);
    ASSERT_TRUE(d.paths[1].worst_window);
    EXPECT_DOUBLE_EQ(d.windows[*d.paths[1].worst_window].start_s, 50.0);
    EXPECT_DOUBLE_EQ(d.paths[1].worst_window_value, 300.0 / bits_per_packet);
    EXPECT_DOUBLE_EQ(d.paths[5].worst_window_value, 40.0 / bits_per_packet);

    // Channel rows every 0.4 s; the echo grows with time, so each row is recognisable.
    std::vector<double> times, echo;
    for (int k = 0; k * 0.4 < 60; ++k) {
        times.push_back(k * 0.4);
        echo.push_back(0.001 * k);
    }
    const auto ch = path("flight-channel.csv");
    write_channel(ch, times, echo);
    const auto want = snapshot_times(d);
    ASSERT_EQ(want.size(), 2u);
    EXPECT_DOUBLE_EQ(want[0], 12.5);
    EXPECT_DOUBLE_EQ(want[1], 37.5);
    const auto snaps = read_channel_snapshots(ch, want);
    EXPECT_EQ(snaps.rows, times.size());
    EXPECT_EQ(snaps.taps, 38u);
    ASSERT_TRUE(snaps.nearest[0] && snaps.nearest[1]);
    EXPECT_NEAR(snaps.nearest[0]->time_s, 12.4, 1e-12);  // 12.4 and 12.8 bracket 12.5
    EXPECT_NEAR(snaps.nearest[1]->time_s, 37.6, 1e-12);  // 37.2 and 37.6 bracket 37.5
    EXPECT_EQ(snaps.nearest[0]->tap_offset, -4);
    EXPECT_NEAR(std::abs(snaps.nearest[1]->taps[10]), 0.001 * 94, 1e-12);

    // The page shows both moments with their channel rows.
    page_inputs in;
    in.packets_path = file;
    channel_view view;
    view.path = ch;
    view.rows = snaps.rows;
    view.taps = snaps.taps;
    view.best = snaps.nearest[0];
    view.worst = snaps.nearest[1];
    in.channel = view;
    const auto html = render_html(d, in);
    EXPECT_NE(html.find("Best moment</tspan>: 12.000 to 13.000 s"), std::string::npos);
    EXPECT_NE(html.find("Worst moment</tspan>: 37.000 to 38.000 s"), std::string::npos);
    EXPECT_NE(html.find("channel row at 12.400 s"), std::string::npos);
    EXPECT_NE(html.find("channel row at 37.600 s"), std::string::npos);
    EXPECT_EQ(count(html, "<svg"), 4u);
}

TEST_F(report_test, no_pattern_switches_to_bep_mode)
{
    // Empty _bits / _errors: the paths are ranked by mean estimated BEP (mmse best, none worst).
    const std::array<double, n_paths> bep{3e-2, 2e-4, 1e-5, 5e-4, 4e-5, 7e-5};
    const auto file = path("nopn-packets.csv");
    const auto e = write_packets(
        file, 4000,
        [&](std::uint64_t i, packet_record& r) {
            fill_estimates(r, 10 * i + 9, static_cast<double>(10 * i + 9) / packets_per_s);
            r.packets = 10;
            for (std::size_t p = 0; p < n_paths; ++p) {
                r.paths[p].bep = bep[p] * (i % 2 == 0 ? 0.5 : 1.5);
                r.paths[p].known_errors = p == 0 ? 60 : 0;
            }
        },
        false);
    const auto d = read_packets_file(file);
    EXPECT_FALSE(d.ber_mode);
    const std::vector<std::size_t> expected{2, 4, 5, 1, 3, 0};
    EXPECT_EQ(d.ranking, expected);
    for (std::size_t p = 0; p < n_paths; ++p) {
        EXPECT_EQ(d.paths[p].sums.bits, 0u);
        EXPECT_EQ(d.paths[p].sums.known_errors, e.known_errors[p]);
        EXPECT_DOUBLE_EQ(d.paths[p].sums.mean_bep(), e.bep_sum[p] / static_cast<double>(e.packets));
    }
    // "none" has a BEP of 0.5 * 3e-2 or 1.5 * 3e-2: all its packets are above 1e-2.
    EXPECT_DOUBLE_EQ(d.paths[0].bad_share, 1.0);
    EXPECT_DOUBLE_EQ(d.paths[1].bad_share, 0.0);
    EXPECT_DOUBLE_EQ(d.paths[0].zero_share, 0.0);  // known-bit errors in every row
    EXPECT_DOUBLE_EQ(d.paths[2].zero_share, 1.0);

    page_inputs in;
    in.packets_path = file;
    in.no_channel_reason = "no nopn-channel.csv next to the packets file";
    const auto html = render_html(d, in);
    EXPECT_NE(html.find("no PN pattern was configured"), std::string::npos);
    EXPECT_NE(html.find("Figure 1: estimated BEP per path over time"), std::string::npos);
    EXPECT_NE(html.find("No channel file: no nopn-channel.csv next to the packets file"), std::string::npos);
    EXPECT_EQ(count(html, "<svg"), 3u);  // no channel figure without a channel file
}

TEST_F(report_test, html_is_self_contained_and_names_every_path)
{
    const auto file = path("page-packets.csv");
    (void)write_packets(file, 5000, random_rows(3));
    const auto d = read_packets_file(file);
    page_inputs in;
    in.packets_path = file;
    in.title = "Flight <7> & \"co\"";
    in.meta = {{"preset", "edwards3"}};
    in.no_channel_reason = "none";
    const auto html = render_html(d, in);
    EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
    EXPECT_NE(html.find("</html>"), std::string::npos);
    for (const auto* bad : {"http://", "https://", "src=", "<script", "<link", "@import", "url("}) {
        EXPECT_EQ(html.find(bad), std::string::npos) << bad;
    }
    for (std::size_t k = 0; k < n_paths; ++k) EXPECT_GE(count(html, ">" + std::string(path_names[k])), 2u) << path_names[k];
    EXPECT_EQ(html.find("_trellis"), std::string::npos);
    EXPECT_EQ(count(html, "<svg"), 3u);
    EXPECT_EQ(count(html, "<svg"), count(html, "</svg>"));
    EXPECT_EQ(count(html, "How to read this."), 4u);  // the table and figures 1-3 (no channel figure)
    EXPECT_NE(html.find("Flight &lt;7&gt; &amp; &quot;co&quot;"), std::string::npos);
    EXPECT_NE(html.find("<th>preset</th><td>edwards3</td>"), std::string::npos);
}

// ---------------------------------------------------------------------------------------------
// the page's layout, checked structurally: numbers that do not wrap, short
// runs, gaps and losses on the time axes, UTC axes

/// The elements that start with `start` (e.g. "<rect class=\"gap\""), each up to its '>'.
[[nodiscard]] std::vector<std::string> elements(const std::string& html, const std::string& start)
{
    std::vector<std::string> out;
    for (auto pos = html.find(start); pos != std::string::npos; pos = html.find(start, pos + 1)) {
        out.push_back(html.substr(pos, html.find('>', pos) - pos + 1));
    }
    return out;
}

[[nodiscard]] std::string attr_text(const std::string& element, const std::string& name)
{
    const auto key = " " + name + "=\"";
    const auto pos = element.find(key);
    if (pos == std::string::npos) return {};
    const auto b = pos + key.size();
    return element.substr(b, element.find('"', b) - b);
}

[[nodiscard]] double attr(const std::string& element, const std::string& name)
{
    const auto v = attr_text(element, name);
    return v.empty() ? std::nan("") : std::stod(v);
}

/// The <text ...> element whose content starts at `content_pos`.
[[nodiscard]] std::string text_element_before(const std::string& html, std::size_t content_pos)
{
    const auto open = html.rfind("<text", content_pos);
    return html.substr(open, content_pos - open);
}

/// The x of time t (s) in a time figure's panel: the layout of html.cpp (left 70, width 870
/// of 960, from the first bin's start over all bins).
[[nodiscard]] double x_of(const report_data& d, double t)
{
    const double lo = d.bin_start_s, hi = d.bin_start_s + static_cast<double>(d.bins.size()) * d.bin_width_s;
    return 70 + (t - lo) / (hi - lo) * 870;
}

/// Rows one packet apart from t0 (s) for n packets, packet indices from `first`, a few errors.
void regular_rows(std::vector<packet_record>& rows, std::uint64_t first, double t0, std::uint64_t n)
{
    for (std::uint64_t k = 0; k < n; ++k) {
        packet_record r;
        fill_estimates(r, first + k, t0 + static_cast<double>(k) / packets_per_s);
        for (std::size_t p = 0; p < n_paths; ++p) {
            r.paths[p].bits = bits_per_packet;
            r.paths[p].errors = (first + k + p) % 7 == 0 ? 1 : 0;
            r.paths[p].bep = 1e-4;
        }
        rows.push_back(r);
    }
}

/// Writes rows as a packets file.
void write_rows(const fs::path& file, const std::vector<packet_record>& rows,
                std::optional<std::int64_t> utc_origin_ns = std::nullopt)
{
    (void)write_packets(file, rows.size(), [&](std::uint64_t i, packet_record& r) { r = rows[i]; }, true, utc_origin_ns);
}

namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_number_joiner(char c) { return c == '.' || c == 'e' || c == '-'; }

/// A tag at `at` ('<') that is not a cell or row boundary (<td>, <th>, <tr>, or their ends).
bool inline_tag_at(const std::string& s, std::size_t at)
{
    std::size_t k = at + 1;
    if (k < s.size() && s[k] == '/') ++k;
    const bool boundary = k + 2 < s.size() && s[k] == 't' && (s[k + 1] == 'd' || s[k + 1] == 'h' || s[k + 1] == 'r') &&
                          (s[k + 2] == ' ' || s[k + 2] == '>');
    return !boundary;
}

/// A number going on across an inline tag: a digit, up to two of ".e-", one or more inline
/// tags, up to two of ".e-", a digit (e.g. "3.64e-<span>3").
bool number_split_by_a_tag(const std::string& s)
{
    for (std::size_t i = 0; i < s.size(); ++i) {
        if (s[i] != '<' || !inline_tag_at(s, i)) continue;
        // Back from the tag: up to two joiners, then a digit.
        std::size_t b = i, joiners = 0;
        while (b > 0 && joiners < 2 && is_number_joiner(s[b - 1])) --b, ++joiners;
        if (b == 0 || !is_digit(s[b - 1])) continue;
        // Forward: inline tags, up to two joiners, a digit.
        std::size_t f = i;
        while (f < s.size() && s[f] == '<' && inline_tag_at(s, f)) {
            const auto close = s.find('>', f);
            if (close == std::string::npos) return false;
            f = close + 1;
        }
        joiners = 0;
        while (f < s.size() && joiners < 2 && is_number_joiner(s[f])) ++f, ++joiners;
        if (f < s.size() && is_digit(s[f])) return true;
    }
    return false;
}

bool digits_split_by_a_space(const std::string& s)
{
    for (std::size_t i = 1; i + 1 < s.size(); ++i) {
        if (s[i] == ' ' && is_digit(s[i - 1]) && is_digit(s[i + 1])) return true;
    }
    return false;
}

/// A cell holding a BER written whole: <td>D.DDe-D...</td>.
bool has_whole_ber_cell(const std::string& s)
{
    for (std::size_t at = s.find("<td>"); at != std::string::npos; at = s.find("<td>", at + 1)) {
        std::size_t k = at + 4;
        if (!(k + 6 < s.size() && is_digit(s[k]) && s[k + 1] == '.' && is_digit(s[k + 2]) && is_digit(s[k + 3]) &&
              s[k + 4] == 'e' && s[k + 5] == '-' && is_digit(s[k + 6])))
            continue;
        k += 6;
        while (k < s.size() && is_digit(s[k])) ++k;
        if (s.compare(k, 5, "</td>") == 0) return true;
    }
    return false;
}

}  // namespace

TEST_F(report_test, summary_numbers_do_not_wrap)
{
    // Users saw "3.64e-" / "3" and "1 799" / "658 345" split over two lines: counts were
    // grouped with thin spaces (U+2009, a break opportunity) and cells could wrap at '-'.
    const auto file = path("nowrap-packets.csv");
    (void)write_packets(file, 20000, random_rows(11));
    const auto html = render_html(read_packets_file(file), page_inputs{});
    EXPECT_NE(html.find("td{white-space:nowrap;font-variant-numeric:tabular-nums}"), std::string::npos);
    EXPECT_EQ(html.find("&#8201;"), std::string::npos) << "a breaking thin space is left";
    EXPECT_EQ(format_count(1234567), "1&#8239;234&#8239;567");
    const auto b = html.find("<table class=\"summary\">"), e = html.find("</table>", b);
    ASSERT_NE(b, std::string::npos);
    const std::string table = html.substr(b, e - b);
    // Each number lies whole in one text node: no number goes on after a tag inside its cell
    // ("3.64e-<span>3"), and no ordinary space sits between digits.
    // (Plain scans, not std::regex: GCC 12's <regex> trips -Wmaybe-uninitialized in the
    // sanitizer build.)
    EXPECT_FALSE(number_split_by_a_tag(table)) << table;
    EXPECT_FALSE(digits_split_by_a_space(table)) << table;
    EXPECT_EQ(count(table, "<tr"), 1 + n_paths);
    EXPECT_TRUE(has_whole_ber_cell(table)) << table;
    // A wide table scrolls instead of squeezing its cells.
    EXPECT_NE(html.find("<div class=\"scroll\"><table class=\"summary\">"), std::string::npos);
}

TEST_F(report_test, gaps_and_losses_are_marked_on_every_time_axis_where_they_are)
{
    // 2 s of packets with: 5 packets found at ~0.3 s whose rows were lost (the index jumps),
    // a gap from ~0.8 s to 1.0 s (no packet found: samples lost), one packet missed at ~1.5 s.
    std::vector<packet_record> rows;
    regular_rows(rows, 0, 0.0, 489);
    regular_rows(rows, 494, 494 / packets_per_s, 1302 - 494);
    const double gap_t0 = 1301 / packets_per_s, gap_t1 = 1.0;
    regular_rows(rows, 1302, gap_t1, 814);
    regular_rows(rows, 1302 + 814, gap_t1 + 815 / packets_per_s, 813);
    const auto file = path("gaps-packets.csv");
    write_rows(file, rows);
    const auto d = read_packets_file(file);

    EXPECT_NEAR(d.packet_spacing_s, 1 / packets_per_s, 1e-9);
    EXPECT_EQ(d.gaps, 1u);
    EXPECT_EQ(d.unrecorded_packets, 5u);
    const auto gap_slots = static_cast<std::uint64_t>(std::llround((gap_t1 - gap_t0) * packets_per_s));
    EXPECT_EQ(d.missing_packets, (gap_slots - 1) + 1);  // the gap's empty slots, and the one at 1.5 s
    ASSERT_EQ(d.marks.size(), 3u);
    EXPECT_FALSE(d.marks[0].gap);
    EXPECT_EQ(d.marks[0].unrecorded_packets, 5u);
    EXPECT_EQ(d.marks[0].missing_packets, 0u);
    EXPECT_TRUE(d.marks[1].gap);
    EXPECT_NEAR(d.marks[1].start_s, gap_t0, 1e-9);
    EXPECT_NEAR(d.marks[1].end_s, gap_t1, 1e-9);
    EXPECT_FALSE(d.marks[2].gap);
    EXPECT_EQ(d.marks[2].missing_packets, 1u);

    const auto html = render_html(d, page_inputs{});
    // Figure 1 and the three panels of figure 3: the gap's band in each, at its time.
    const auto gaps = elements(html, "<rect x=");
    std::size_t bands = 0;
    for (const auto& g : gaps) {
        if (g.find("class=\"gap\"") == std::string::npos) continue;
        ++bands;
        const double x0 = attr(g, "x"), w = attr(g, "width");
        EXPECT_NEAR(x0 + w / 2, (x_of(d, gap_t0) + x_of(d, gap_t1)) / 2, 0.2) << g;
        EXPECT_NEAR(w, std::max(2.0, x_of(d, gap_t1) - x_of(d, gap_t0)), 0.2) << g;
        EXPECT_NEAR(attr(g, "data-t0"), gap_t0, 1e-6);
        EXPECT_NEAR(attr(g, "data-t1"), gap_t1, 1e-6);
    }
    EXPECT_EQ(bands, 4u);
    // The two losses as ticks in each of the four panels, at their times.
    std::vector<double> tick_x;
    for (const auto& l : elements(html, "<line x1=")) {
        if (l.find("class=\"lost\"") == std::string::npos) continue;
        tick_x.push_back(attr(l, "x1"));
        EXPECT_NEAR(attr(l, "x1"), (x_of(d, attr(l, "data-t0")) + x_of(d, attr(l, "data-t1"))) / 2, 0.2) << l;
    }
    ASSERT_EQ(tick_x.size(), 8u);
    EXPECT_NEAR(tick_x[0], x_of(d, 0.3), 1.0);
    EXPECT_NEAR(tick_x[1], x_of(d, 1.5), 1.0);
    EXPECT_EQ(count(html, "class=\"legend-gap\""), 2u);
    EXPECT_EQ(count(html, "class=\"legend-lost\""), 2u);
    EXPECT_NE(html.find("<th>Gaps in the records</th>"), std::string::npos);
    EXPECT_NE(html.find("estimated from the rows"), std::string::npos);
    EXPECT_NE(html.find("Losses (paqd's counters)</th><td>not read"), std::string::npos) << "no counters: said so";

    // A run without any: no marks, no legend.
    std::vector<packet_record> clean;
    regular_rows(clean, 0, 0.0, 2000);
    const auto plain = path("plain-packets.csv");
    write_rows(plain, clean);
    const auto html2 = render_html(read_packets_file(plain), page_inputs{});
    EXPECT_EQ(html2.find("class=\"gap\""), std::string::npos);
    EXPECT_EQ(html2.find("class=\"lost\""), std::string::npos);
    EXPECT_EQ(html2.find("legend-gap"), std::string::npos);
}

// A lossy run (every other packet lost) read with paqd's counters: the spacing is one packet
// at the link's rate, not the rows' median (twice that), so every lost packet is counted; the
// header gives the losses as paqd counted them and names the file. A counters file that is
// not paqd's is refused naming it.
// paqd's receiver.fec adds three columns per stream (`_codewords_failed`, `_iterations`,
// `_channel_errors`); the counters file names the code (records.fec). The report sums them
// exactly and sets the decoded and channel bits side by side; without the counters the rates
// that need the code's size read n/a.
TEST_F(report_test, a_coded_links_codewords_are_summed_and_set_beside_the_decoded_ber)
{
    const auto file = path("coded-packets.csv");
    constexpr std::uint64_t rows = 400;
    {
        csv_writer w(file);
        std::string h = packets_header(n_paths);
        for (const auto n : path_names) {
            if (n.find("trellis") != std::string_view::npos) break;
            h += "," + std::string(n) + "_codewords_failed," + std::string(n) + "_iterations," + std::string(n) + "_channel_errors";
        }
        w.raw(h);
        w.end_row();
        for (std::uint64_t i = 0; i < rows; ++i) {
            packet_record r{};
            fill_estimates(r, i, static_cast<double>(i) / packets_per_s);
            w.num(i), w.num(1), w.num(r.time_s), w.num(r.batch), w.num(r.start_sample), w.num(r.metric), w.num(r.cfo_hz);
            w.num(r.sigma2), w.num(r.ebn0_db), w.num(r.channel_energy), w.num(r.delay_spread_ns), w.num(r.zf_condition), w.num(0);
            for (std::size_t p = 0; p < n_paths; ++p) {
                // 3072 decoded bits a packet; path p fails a codeword every (p + 2)th packet, with 100 errors.
                const bool fails = i % (p + 2) == 0;
                w.num(3072), w.num(fails ? 100 : 0), w.num(1e-3), w.num(0);
            }
            for (std::size_t p = 0; p < n_paths; ++p) {
                const bool fails = i % (p + 2) == 0;
                w.num(fails ? 1 : 0), w.num(fails ? 60 : 12), w.num(fails ? 20 : 30);
            }
            w.end_row();
        }
    }
    const auto counters = path("coded-counters.json");
    std::ofstream(counters) << nlohmann::json{{"packets_found", rows},
                                              {"gaps", 0},
                                              {"samples_lost_in_gaps", 0},
                                              {"packets_missed_in_sequence", 0},
                                              {"records",
                                               {{"packet_spacing_s", 1 / packets_per_s},
                                                {"fec", {{"code", "ar4ja-1024-1/2"}, {"n", 2048}, {"k", 1024}, {"codewords_per_packet", 3}}}}}}
                                   .dump();
    const auto c = read_run_counters(counters);
    ASSERT_TRUE(c.fec.has_value());
    EXPECT_EQ(c.fec->code, "ar4ja-1024-1/2");
    EXPECT_EQ(c.fec->n, 2048u);
    EXPECT_EQ(c.fec->codewords_per_packet, 3u);
    report_options o;
    o.fec = c.fec;
    const auto d = read_packets_file(file, o);
    ASSERT_TRUE(d.coded);
    for (std::size_t p = 0; p < n_paths; ++p) {
        SCOPED_TRACE(std::string(path_names[p]));
        std::uint64_t failed = 0;
        for (std::uint64_t i = 0; i < rows; ++i) failed += i % (p + 2) == 0 ? 1 : 0;
        EXPECT_EQ(d.paths[p].sums.codewords_failed, failed);
        EXPECT_EQ(d.paths[p].sums.iterations, failed * 60 + (rows - failed) * 12);
        EXPECT_EQ(d.paths[p].sums.channel_errors, failed * 20 + (rows - failed) * 30);
        EXPECT_EQ(d.paths[p].sums.errors, failed * 100);
    }
    page_inputs in;
    in.counters = c;
    in.packets_path = file;
    in.no_channel_reason = "none";
    const auto html = render_html(d, in);
    EXPECT_NE(html.find("Decoded and channel bits side by side"), std::string::npos);
    EXPECT_NE(html.find("<code>ar4ja-1024-1/2</code> (3 codewords of 2048 bits per packet)"), std::string::npos);
    // none: a failed codeword every 2nd packet, 200 of 1200 codewords: FER 0.1667; iterations
    // (200 x 60 + 200 x 12) / 1200 = 12; channel BER (200 x 20 + 200 x 30) / (1000 x 2048) = 4.883e-3.
    EXPECT_NE(html.find("<td>1&#8239;200</td><td>200</td><td>0.167</td><td>12.00</td><td>4.88e-3</td>"),
              std::string::npos)
        << html.substr(html.find("Decoded and channel bits"), 2000);

    // Without the code's size (no counters): the counts, and n/a for the rates.
    const auto bare = read_packets_file(file);
    page_inputs no_counters;
    no_counters.packets_path = file;
    no_counters.no_channel_reason = "none";
    const auto html2 = render_html(bare, no_counters);
    EXPECT_NE(html2.find("paqd's counters were not read, so its size is unknown"), std::string::npos);
    EXPECT_NE(html2.find("<td>n/a</td><td>200</td><td>n/a</td>"), std::string::npos);
    // A malformed records.fec is named.
    const auto bad = path("bad-fec-counters.json");
    std::ofstream(bad) << R"({"packets_found": 1, "gaps": 0, "samples_lost_in_gaps": 0, "packets_missed_in_sequence": 0,
                            "records": {"fec": {"code": "ar4ja-1024-1/2", "n": 0, "k": 1024, "codewords_per_packet": 3}}})";
    try {
        (void)read_run_counters(bad);
        ADD_FAILURE() << "a zero codeword size was read";
    } catch (const input_error& x) {
        EXPECT_NE(std::string(x.what()).find("records.fec.n is not a codeword size or count"), std::string::npos) << x.what();
    }
}

TEST_F(report_test, the_counters_file_gives_the_spacing_and_the_losses_as_paqd_counted_them)
{
    std::vector<packet_record> rows;
    // Packets found are numbered in order; every other one was never received.
    for (std::uint64_t k = 0; k < 600; ++k) regular_rows(rows, k, static_cast<double>(2 * k) / packets_per_s, 1);
    const auto file = path("lossy-packets.csv");
    write_rows(file, rows);
    const auto estimated = read_packets_file(file);
    EXPECT_NEAR(estimated.packet_spacing_s, 2 / packets_per_s, 1e-9) << "the rows alone: twice the spacing";
    EXPECT_EQ(estimated.missing_packets, 0u);
    EXPECT_FALSE(estimated.packet_spacing_known);

    const auto counters = path("lossy-counters.json");
    {
        nlohmann::json j = {{"packets_found", 600},
                            {"gaps", 1182},
                            {"gaps_by_reason", {{"overflow", 0}, {"lost-packets", 1182}, {"stall", 0}}},
                            {"samples_lost_in_gaps", 7'490'000},
                            {"source_packets_lost", 1200},
                            {"source_samples_lost", 7'490'000},
                            {"samples_dropped", 0},
                            {"packets_missed_in_sequence", 599},
                            {"batches_lost", 0},
                            {"records", {{"sample_rate_hz", 20.625e6}, {"chain_rate_hz", 20.625e6}, {"packet_spacing_s", 1 / packets_per_s}}}};
        std::ofstream(counters) << j.dump(2);
    }
    const auto c = read_run_counters(counters);
    EXPECT_EQ(c.gaps, 1182u);
    EXPECT_EQ(c.source_packets_lost, 1200u);
    EXPECT_EQ(c.packets_missed_in_sequence, 599u);
    report_options o;
    o.packet_spacing_s = c.packet_spacing_s;
    const auto known = read_packets_file(file, o);
    EXPECT_TRUE(known.packet_spacing_known);
    EXPECT_NEAR(known.packet_spacing_s, 1 / packets_per_s, 1e-12);
    EXPECT_EQ(known.missing_packets, 599u) << "one between every two rows";

    page_inputs in;
    in.counters = c;
    const auto html = render_html(known, in);
    EXPECT_NE(html.find("1&#8239;182 gaps (lost-packets 1&#8239;182)"), std::string::npos);
    EXPECT_NE(html.find("1&#8239;200 datagrams lost"), std::string::npos);
    EXPECT_NE(html.find("599 packets missing from the sequence"), std::string::npos);
    EXPECT_NE(html.find("lossy-counters.json"), std::string::npos);
    EXPECT_NE(html.find("one packet at the link's rate"), std::string::npos);

    const auto bad = path("bad-counters.json");
    std::ofstream(bad) << R"({"gaps": 3})";
    EXPECT_THROW((void)read_run_counters(bad), input_error);
    std::ofstream(bad) << "not json";
    try {
        (void)read_run_counters(bad);
        ADD_FAILURE() << "not JSON was read";
    } catch (const input_error& e) {
        EXPECT_NE(std::string(e.what()).find("bad-counters.json"), std::string::npos) << e.what();
    }
    o.packet_spacing_s = -1;
    EXPECT_THROW((void)read_packets_file(file, o), std::invalid_argument);
}

/// The bounding boxes of figure 1's window labels, from their x, anchor and text (11 px bold:
/// at most 6.6 px per character), checked to lie within the plot's width and not to overlap.
void expect_window_labels_apart(const std::string& html, std::size_t expected)
{
    std::vector<std::pair<double, double>> boxes;
    const std::string key = "class=\"window-label\"";
    for (auto pos = html.find(key); pos != std::string::npos; pos = html.find(key, pos + 1)) {
        const auto gt = html.find('>', pos);
        const std::string el = text_element_before(html, gt + 1);
        const std::string label = html.substr(gt + 1, html.find("</text>", gt) - gt - 1);
        const double x = attr(el, "x"), w = 6.6 * static_cast<double>(label.size());
        const std::string anchor = attr_text(el, "text-anchor");
        const double x0 = anchor == "start" ? x : anchor == "end" ? x - w : x - w / 2;
        boxes.emplace_back(x0, x0 + w);
        EXPECT_GE(x0, 70 - 0.5) << el << label;
        EXPECT_LE(x0 + w, 940 + 0.5) << el << label;
    }
    ASSERT_EQ(boxes.size(), expected);
    std::sort(boxes.begin(), boxes.end());
    for (std::size_t k = 1; k < boxes.size(); ++k) {
        EXPECT_LE(boxes[k - 1].second, boxes[k].first + 0.5) << "labels overlap";
    }
}

TEST_F(report_test, a_run_shorter_than_the_window_gets_one_clipped_column_and_one_label)
{
    // 0.2 s of packets, 1 s windows: one window, best and worst at once. It was drawn twice,
    // wider than the plot, with "best" and "worst" over each other.
    std::vector<packet_record> rows;
    regular_rows(rows, 0, 0.0, 326);
    const auto file = path("short-packets.csv");
    write_rows(file, rows);
    const auto d = read_packets_file(file);
    ASSERT_TRUE(d.best_window && d.worst_window);
    EXPECT_EQ(*d.best_window, *d.worst_window);
    const auto html = render_html(d, page_inputs{});
    expect_window_labels_apart(html, 1);
    EXPECT_NE(html.find(">best = worst (one window)</text>"), std::string::npos);
    // The column stays inside the plot (left 70, width 870).
    const auto col = html.find("fill=\"#999999\" fill-opacity=\"0.25\"");
    ASSERT_NE(col, std::string::npos);
    const std::string el = html.substr(html.rfind("<rect", col), col - html.rfind("<rect", col));
    EXPECT_GE(attr(el, "x"), 70 - 0.05);
    EXPECT_LE(attr(el, "x") + attr(el, "width"), 940 + 0.05);
}

TEST_F(report_test, best_and_worst_windows_side_by_side_get_labels_that_do_not_overlap)
{
    // 1.2 s in 10 ms windows (7 px each): the best (no errors) and the worst (many) are
    // neighbours; their labels were centred on each, over each other.
    std::vector<packet_record> rows;
    regular_rows(rows, 0, 0.0, 1954);
    for (auto& r : rows) {
        const auto w = static_cast<int>(std::floor(r.time_s / 0.01));
        for (auto& p : r.paths) p.errors = w == 60 ? 0 : w == 61 ? 200 : 1;
    }
    const auto file = path("adjacent-packets.csv");
    write_rows(file, rows);
    report_options o;
    o.window_s = 0.01;
    const auto d = read_packets_file(file, o);
    ASSERT_TRUE(d.best_window && d.worst_window);
    EXPECT_NEAR(d.windows[*d.best_window].start_s, 0.60, 1e-9);
    EXPECT_NEAR(d.windows[*d.worst_window].start_s, 0.61, 1e-9);
    expect_window_labels_apart(render_html(d, page_inputs{}), 2);
}

TEST_F(report_test, utc_axes_when_the_rows_carry_time_utc)
{
    EXPECT_EQ(parse_utc_ns("1970-01-01T00:00:01.5Z"), 1'500'000'000);
    EXPECT_EQ(parse_utc_ns("2000-03-01T00:00:00Z"), 951'868'800LL * 1'000'000'000);
    EXPECT_EQ(parse_utc_ns("2026-11-25T07:50:29.123456789Z"), 1'795'593'029'123'456'789LL);
    for (const auto* bad : {"2026-11-25 07:50:29Z", "2026-11-25T07:50:29", "2026-11-25T07:50:29+01:00",
                            "2026-13-25T07:50:29Z", "2026-11-25T07:50:29.Z", "2026-11-25T07:50:29.1234567890Z", ""}) {
        EXPECT_FALSE(parse_utc_ns(bad)) << bad;
    }
    const std::int64_t origin = *parse_utc_ns("2026-11-25T07:50:29.5Z");
    std::vector<packet_record> rows;
    regular_rows(rows, 0, 0.0, 30 * 1628);  // 30 s
    const auto file = path("utc-packets.csv");
    write_rows(file, rows, origin);
    const auto d = read_packets_file(file);
    ASSERT_TRUE(d.utc_origin_ns);
    EXPECT_LE(std::abs(*d.utc_origin_ns - origin), 2);  // the column rounds to 1 ns
    const auto html = render_html(d, page_inputs{});
    EXPECT_NE(html.find("UTC (the run started 2026-11-25 07:50:29.500 UTC)"), std::string::npos);
    EXPECT_EQ(html.find("time since the start of the run"), std::string::npos);
    // Ticks on whole UTC seconds, at the x of their time.
    for (const auto* label : {"07:50:30", "07:50:35", "07:50:55"}) {
        const auto pos = html.find(std::string(">") + label + "</text>");
        ASSERT_NE(pos, std::string::npos) << label;
        const std::string el = text_element_before(html, pos + 1);
        const double t = static_cast<double>(*parse_utc_ns(std::string("2026-11-25T") + label + "Z") - origin) / 1e9;
        EXPECT_NEAR(attr(el, "x"), x_of(d, t), 0.1) << label;
    }
    // Without the column: seconds since the start, and the header says why.
    const auto plain = path("no-utc-packets.csv");
    write_rows(plain, rows);
    const auto html2 = render_html(read_packets_file(plain), page_inputs{});
    EXPECT_NE(html2.find("time since the start of the run (s)"), std::string::npos);
    EXPECT_NE(html2.find("no <code>time_utc</code>"), std::string::npos);
    // A malformed time_utc names its place.
    const auto broken = path("broken-utc-packets.csv");
    std::string text = read_text(file);
    const auto at = text.find("T07:50:29.5");
    ASSERT_NE(at, std::string::npos);
    text.replace(at, 1, " ");
    std::ofstream(broken, std::ios::binary) << text;
    EXPECT_NE(packets_error(broken).find("column 'time_utc': '2026-11-25 07:50:29.500000000Z' is not a UTC time"),
              std::string::npos)
        << packets_error(broken);
}

// ---------------------------------------------------------------------------------------------
// reading: accepted variants and malformed files

TEST_F(report_test, reader_accepts_bom_quotes_crlf_reordered_columns_and_nan)
{
    // A byte-order mark, columns in reverse order, quoted header and fields, CRLF line ends,
    // a NaN estimate.
    auto names = packets_header();
    std::vector<std::string> cols;
    for (std::size_t pos = 0;;) {
        const auto comma = names.find(',', pos);
        cols.push_back(names.substr(pos, comma - pos));
        if (comma == std::string::npos) break;
        pos = comma + 1;
    }
    std::reverse(cols.begin(), cols.end());
    std::string text = "\xEF\xBB\xBF";
    for (std::size_t i = 0; i < cols.size(); ++i) text += (i ? ",\"" : "\"") + cols[i] + "\"";
    text += "\r\n";
    for (int row = 0; row < 2; ++row) {
        std::string line;
        for (std::size_t i = 0; i < cols.size(); ++i) {
            const auto& c = cols[i];
            std::string v = c.ends_with("_bits") ? "6144" : c.ends_with("_errors") ? "3" : c == "packets" ? "2" : "0.5";
            if (c == "packet" || c == "batch" || c == "start_sample" || c == "flags") v = std::to_string(row);
            if (c == "ebn0_db") v = row == 0 ? "-nan" : "\"12.5\"";
            line += (i ? "," : "") + v;
        }
        text += line + "\r\n";
    }
    text += "\r\n";  // a trailing empty line is skipped
    const auto file = path("quoted-packets.csv");
    std::ofstream(file, std::ios::binary) << text;
    const auto d = read_packets_file(file);
    EXPECT_EQ(d.rows, 2u);
    EXPECT_EQ(d.packets, 4u);
    EXPECT_EQ(d.paths[5].sums.bits, 2 * 6144u);
    EXPECT_EQ(d.paths[5].sums.errors, 6u);
    ASSERT_EQ(d.windows.size(), 1u);
    EXPECT_EQ(d.windows[0].bin.ebn0_db.n, 1u);  // the NaN estimate is left out of the mean
    EXPECT_DOUBLE_EQ(d.windows[0].bin.ebn0_db.mean(), 12.5);
}

TEST_F(report_test, reads_rows_in_the_paqd_writers_printf_format)
{
    // The format strings of daemon/records.cpp's records_writer::write_row, with and without a
    // pattern; printf writes a NaN BEP as "nan" or "-nan".
    for (const bool pattern : {true, false}) {
        SCOPED_TRACE(pattern ? "pattern" : "no pattern");
        const auto file = path(pattern ? "w-packets.csv" : "wn-packets.csv");
        std::string text = packets_header() + "\n";
        char buf[512];
        for (unsigned i = 0; i < 30; ++i) {
            const unsigned packets = i == 29 ? 3 : 10;
            const auto start = static_cast<unsigned long long>(i) * 126700ULL;
            std::snprintf(buf, sizeof buf, "%llu,%u,%.9f,%llu,%llu,%.4f,%.2f,%.6g,%.3f,%.6g,%.2f,%.6g,%u",
                          static_cast<unsigned long long>(10 * i + packets - 1), packets,
                          static_cast<double>(start) / 20.625e6, static_cast<unsigned long long>(i / 3), start, 0.8731,
                          51234.5678, 0.0123456789, 11.2345, 1.01, 42.123, 1234567.0, i % 4 == 0 ? 18u : 0u);
            text += buf;
            for (std::size_t p = 0; p < n_paths; ++p) {
                const double bep = p == 2 && i == 5 ? -std::nan("") : 1.2345678e-5 * static_cast<double>(p + 1);
                if (pattern) {
                    std::snprintf(buf, sizeof buf, ",%llu,%llu,%.4g,%llu", 6144ULL * packets,
                                  static_cast<unsigned long long>(p * i), bep, static_cast<unsigned long long>(p));
                } else {
                    std::snprintf(buf, sizeof buf, ",,,%.4g,%llu", bep, static_cast<unsigned long long>(p));
                }
                text += buf;
            }
            text += "\n";
        }
        std::ofstream(file, std::ios::binary) << text;
        const auto d = read_packets_file(file);
        EXPECT_EQ(d.ber_mode, pattern);
        EXPECT_EQ(d.rows, 30u);
        EXPECT_EQ(d.packets, 29u * 10 + 3);
        EXPECT_EQ(d.flag_rows[1], 8u);  // flags 18 = 2 | 16 in rows 0, 4, ..., 28
        EXPECT_EQ(d.flag_rows[4], 8u);
        EXPECT_EQ(d.paths[5].sums.known_errors, 5u * 30);
        EXPECT_EQ(d.paths[5].sums.bits, pattern ? 6144u * (29 * 10 + 3) : 0u);
        EXPECT_EQ(d.paths[5].sums.errors, pattern ? 5u * (29 * 30 / 2) : 0u);
        // The "-nan" BEP row (10 packets) is left out of mmse's mean.
        EXPECT_EQ(d.paths[2].sums.bep_packets, 29u * 10 + 3 - 10);
        EXPECT_NEAR(d.paths[2].sums.mean_bep(), 3.704e-5, 1e-12);
    }
}

TEST_F(report_test, malformed_packets_files_name_file_line_and_column)
{
    const auto good = path("good-packets.csv");
    (void)write_packets(good, 10, random_rows(5));
    const auto lines = [&] {
        std::vector<std::string> v;
        std::istringstream in(read_text(good));
        for (std::string l; std::getline(in, l);) v.push_back(l);
        return v;
    }();
    ASSERT_EQ(lines.size(), 11u);
    const auto write_with = [&](const std::string& name, const std::function<void(std::vector<std::string>&)>& edit) {
        auto v = lines;
        edit(v);
        const auto p = path(name);
        std::ofstream out(p, std::ios::binary);
        for (const auto& l : v) out << l << "\n";
        return p;
    };
    const auto replace_field = [](std::string& line, std::size_t col, const std::string& value) {
        std::size_t start = 0;
        for (std::size_t i = 0; i < col; ++i) start = line.find(',', start) + 1;
        const auto end = line.find(',', start);
        line.replace(start, end == std::string::npos ? std::string::npos : end - start, value);
    };

    // Missing column: zf_errors renamed in the header.
    auto p = write_with("missing-packets.csv", [](auto& v) {
        v[0].replace(v[0].find("zf_errors"), 9, "zf_errorz");
    });
    EXPECT_EQ(packets_error(p), p.string() + ":1: missing column 'zf_errors' in the header");

    // A bad number: ebn0_db (column 9) of the third data row (line 4).
    p = write_with("badnum-packets.csv", [&](auto& v) { replace_field(v[3], 8, "12.3dB"); });
    EXPECT_EQ(packets_error(p), p.string() + ":4:9: column 'ebn0_db': '12.3dB' is not a number");

    // A bad integer: a negative error count (mmse_errors is column 14 + 2 * 4 + 1 = 23).
    p = write_with("negative-packets.csv", [&](auto& v) { replace_field(v[2], 22, "-1"); });
    EXPECT_EQ(packets_error(p), p.string() + ":3:23: column 'mmse_errors': '-1' is not a non-negative integer");

    // Wrong column count: the last field of line 6 dropped.
    p = write_with("short-packets.csv", [](auto& v) { v[5].erase(v[5].rfind(',')); });
    EXPECT_EQ(packets_error(p), p.string() + ":6: row has 36 fields, the header has 37");

    // More errors than bits (fde2_bits is column 34, fde2_errors 35).
    p = write_with("toomany-packets.csv", [&](auto& v) {
        replace_field(v[1], 33, "10");
        replace_field(v[1], 34, "11");
    });
    EXPECT_EQ(packets_error(p), p.string() + ":2:35: column 'fde2_errors': 11 errors among 10 bits");

    // An empty _errors field in a file with a pattern.
    p = write_with("mixed-packets.csv", [&](auto& v) { replace_field(v[7], 17, ""); });
    EXPECT_EQ(packets_error(p), p.string() + ":8:18: column 'zf_bits': empty, but the first row has a PN pattern "
                                             "(its none_errors is filled)");

    // packets = 0, an infinite time, an unterminated quote, a header only, an empty file.
    p = write_with("zero-packets.csv", [&](auto& v) { replace_field(v[1], 1, "0"); });
    EXPECT_EQ(packets_error(p), p.string() + ":2:2: column 'packets': must be at least 1");
    p = write_with("inf-packets.csv", [&](auto& v) { replace_field(v[2], 2, "inf"); });
    EXPECT_EQ(packets_error(p), p.string() + ":3:3: column 'time_s': 'inf' is not a time (finite, |t| <= 1e12 s)");
    p = write_with("quote-packets.csv", [&](auto& v) { replace_field(v[1], 5, "\"0.5"); });
    EXPECT_EQ(packets_error(p), p.string() + ":2:6: unterminated quoted field (fields cannot span lines)");
    p = write_with("header-packets.csv", [](auto& v) { v.resize(1); });
    EXPECT_EQ(packets_error(p), p.string() + ": no data rows after the header");
    p = write_with("empty-packets.csv", [](auto& v) { v.clear(); });
    EXPECT_EQ(packets_error(p), p.string() + ":1: empty file, expected a header row");
    EXPECT_EQ(packets_error(path("absent-packets.csv")),
              path("absent-packets.csv").string() + ": cannot open: No such file or directory");
}

TEST_F(report_test, malformed_channel_files_name_file_line_and_column)
{
    const auto ch = path("c-channel.csv");
    write_channel(ch, {0.0, 1.0, 2.0}, {0.1, 0.2, 0.3});
    auto text = read_text(ch);
    const std::array<double, 1> t{1.0};

    // h3_im (column 3 + 2 * 3 + 2 = 11) of line 3 not a number.
    auto bad = text;
    std::size_t pos = 0;
    for (int i = 0; i < 2; ++i) pos = bad.find('\n', pos) + 1;  // start of line 3
    std::size_t field = pos;
    for (int i = 0; i < 10; ++i) field = bad.find(',', field) + 1;
    bad.replace(field, bad.find(',', field) - field, "x");
    std::ofstream(path("bad-channel.csv"), std::ios::binary) << bad;
    try {
        (void)read_channel_snapshots(path("bad-channel.csv"), t);
        FAIL() << "no error";
    } catch (const input_error& e) {
        EXPECT_EQ(std::string(e.what()), path("bad-channel.csv").string() + ":3:11: column 'h3_im': 'x' is not a number");
    }

    // A header without h5_im.
    auto no_im = text;
    no_im.replace(no_im.find(",h5_im"), 6, ",h5_xx");
    std::ofstream(path("noim-channel.csv"), std::ios::binary) << no_im;
    try {
        (void)read_channel_snapshots(path("noim-channel.csv"), t);
        FAIL() << "no error";
    } catch (const input_error& e) {
        EXPECT_EQ(std::string(e.what()), path("noim-channel.csv").string() + ":1: column 'h5_im' missing in the header");
    }
}

// ---------------------------------------------------------------------------------------------
// a flight-sized file

TEST_F(report_test, two_million_rows_stream_into_a_small_page)
{
    // 2 million rows, a 20-minute flight at decimation 1 (~1228 s at 1628 packets/s): every
    // row counted, the bins bounded, the page small. The times are printed, not asserted
    // (speed is the benchmark's to measure).
    constexpr std::uint64_t n = 2'000'000;
    const auto file = path("big-packets.csv");
    const auto t0 = std::chrono::steady_clock::now();
    const auto e = write_packets(file, n, [](std::uint64_t i, packet_record& r) {
        const double t = static_cast<double>(i) / packets_per_s;
        fill_estimates(r, i, t);
        const auto h = mix(i);
        for (std::size_t p = 0; p < n_paths; ++p) {
            r.paths[p].bits = bits_per_packet;
            r.paths[p].errors = (h >> (8 * p)) % (2 * p + 1);
            r.paths[p].bep = 1e-5 * static_cast<double>(p + 1);
            r.paths[p].known_errors = (h >> 60) == 0 ? 1 : 0;
        }
    });
    const auto t1 = std::chrono::steady_clock::now();
    const auto d = read_packets_file(file);
    page_inputs in;
    in.packets_path = file;
    in.no_channel_reason = "test";
    const auto html = render_html(d, in);
    const auto t2 = std::chrono::steady_clock::now();
    const double write_s = std::chrono::duration<double>(t1 - t0).count();
    const double report_s = std::chrono::duration<double>(t2 - t1).count();
    std::printf("2M rows: %.0f MB written in %.1f s, read + page in %.1f s, page %.0f kB, %zu bins of %.3g s\n",
                static_cast<double>(fs::file_size(file)) / 1e6, write_s, report_s,
                static_cast<double>(html.size()) / 1e3, d.bins.size(), d.bin_width_s);

    EXPECT_EQ(d.rows, n);
    for (std::size_t p = 0; p < n_paths; ++p) {
        EXPECT_EQ(d.paths[p].sums.bits, e.bits[p]);
        EXPECT_EQ(d.paths[p].sums.errors, e.errors[p]);
    }
    EXPECT_LE(d.bins.size(), 1000u);
    EXPECT_DOUBLE_EQ(d.bin_width_s, 2.0);  // 1228 s: 614 bins of 2 s
    EXPECT_LT(html.size(), 2'000'000u);
}

// ---------------------------------------------------------------------------------------------
// the command line tool

#ifdef PAQ_BINARY_DIR
[[nodiscard]] int run_tool(const std::string& args, const fs::path& out)
{
    const std::string cmd = std::string(PAQ_BINARY_DIR) + "/tools/paq-report " + args + " > '" + out.string() + "' 2>&1";
    const int status = std::system(cmd.c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST_F(report_test, cli_writes_the_page_and_reports_errors_with_exit_status)
{
    const auto base = path("cli").string();
    (void)write_packets(base + "-packets.csv", 3000, random_rows(9));
    write_channel(base + "-channel.csv", {0.0, 0.5, 1.0, 1.5, 2.0}, {0.1, 0.2, 0.3, 0.4, 0.5});
    const auto log = path("log.txt");

    ASSERT_EQ(run_tool("'" + base + "' --title 'Flight 7' --meta preset=edwards3 --meta seed=7", log), 0)
        << read_text(log);
    const auto out = read_text(log);
    EXPECT_EQ(count(out, "\n"), 1u) << out;  // one line
    EXPECT_EQ(out.rfind("paq-report: ", 0), 0u) << out;
    EXPECT_NE(out.find("BER mode; best "), std::string::npos) << out;
    const auto html = read_text(base + "-report.html");
    EXPECT_NE(html.find("<h1>Flight 7</h1>"), std::string::npos);
    EXPECT_NE(html.find("<th>seed</th><td>7</td>"), std::string::npos);
    EXPECT_EQ(count(html, "<svg"), 4u);  // the channel file was found next to the packets file

    ASSERT_EQ(run_tool("'" + base + "-packets.csv' --no-channel -o '" + path("x.html").string() + "'", log), 0);
    EXPECT_EQ(count(read_text(path("x.html")), "<svg"), 3u);

    // A two-channel run with each channel's records alone beside it (paqd replay --each-channel
    // --records two): the combined paths against each channel alone. Combined: 2 errors a
    // packet on every path; channel 1 alone 10, channel 2 alone 4: the better over the
    // combined 2.
    const auto two = path("two").string();
    const auto rows = [](std::uint64_t errors) {
        return [errors](std::uint64_t i, packet_record& r) {
            fill_estimates(r, i, static_cast<double>(i) / packets_per_s);
            for (std::size_t p = 0; p < n_paths; ++p) {
                r.paths[p].bits = bits_per_packet;
                r.paths[p].errors = errors;
                r.paths[p].bep = 1e-4;
            }
        };
    };
    (void)write_packets(two + "-packets.csv", 500, rows(2));
    (void)write_packets(two + "-ch1-packets.csv", 500, rows(10));
    (void)write_packets(two + "-ch2-packets.csv", 500, rows(4));
    ASSERT_EQ(run_tool("'" + two + "'", log), 0) << read_text(log);
    const auto both = read_text(two + "-report.html");
    EXPECT_NE(both.find("Combined and each channel alone"), std::string::npos);
    EXPECT_NE(both.find("<th>channel 1 alone</th><th>channel 2 alone</th>"), std::string::npos);
    // Each path's row ends in the ratio and the combined errors (2 x 500 packets).
    EXPECT_EQ(count(both, "<td>2</td><td>1&#8239;000</td></tr>"), n_paths) << both;
    EXPECT_NE(both.find("two-ch2-packets.csv"), std::string::npos);
    EXPECT_EQ(html.find("Combined and each channel alone"), std::string::npos);  // one channel: no table
    // A channel that found no packet alone (a header only): shown as such, the page still made.
    std::ofstream(two + "-ch2-packets.csv", std::ios::binary | std::ios::trunc) << packets_header() << "\n";
    ASSERT_EQ(run_tool("'" + two + "'", log), 0) << read_text(log);
    const auto none2 = read_text(two + "-report.html");
    EXPECT_NE(none2.find("no packet found alone"), std::string::npos);
    EXPECT_EQ(count(none2, "<td>5</td><td>1&#8239;000</td></tr>"), n_paths) << "channel 1 the better";

    // Bad arguments: 2. Bad input: 1, with the file:line:column message.
    EXPECT_EQ(run_tool("", log), 2);
    EXPECT_EQ(run_tool("'" + base + "' --meta novalue", log), 2);
    EXPECT_EQ(run_tool("'" + base + "' --max-points 1", log), 2);
    EXPECT_EQ(run_tool("'" + base + "' --bogus", log), 2);
    EXPECT_EQ(run_tool("'" + base + "' --channel '" + path("none.csv").string() + "'", log), 1);
    EXPECT_NE(read_text(log).find("none.csv: cannot open"), std::string::npos);
    std::ofstream(path("broken-packets.csv"), std::ios::binary) << packets_header() << "\n1,2,3\n";
    EXPECT_EQ(run_tool("'" + path("broken").string() + "'", log), 1);
    EXPECT_EQ(read_text(log), "paq-report: " + path("broken-packets.csv").string() +
                                  ":2: row has 3 fields, the header has 37\n");
}
#endif

}  // namespace
