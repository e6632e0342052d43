// The flight-test tools end to end: per-packet records and the comparison report from a `flight`
// recording (the report's numbers equal the replay table's), the Prometheus endpoint (it
// answers, its counters move), and the SigMF recording made while receiving.
#include "chain_fixture.hpp"
#include "runtime/counters.hpp"
#include "daemon/metrics_http.hpp"
#include "daemon/recorder.hpp"
#include "daemon/records.hpp"
#include "daemon/replay.hpp"
#include "io/sample_file.hpp"
#include "io/utc_time.hpp"
#include "tools/report/aggregate.hpp"
#include "tools/report/html.hpp"

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <mutex>

#include <unistd.h>

using namespace paq;

namespace {

struct temp_dir {
    std::filesystem::path path;
    temp_dir()
        : path(std::filesystem::temp_directory_path() /
               ("paq-flight-" + std::to_string(::getpid()) + "-" + std::to_string(counter()++)))
    {
        std::filesystem::create_directories(path);
    }
    ~temp_dir() { std::filesystem::remove_all(path); }
    static std::atomic<int>& counter()
    {
        static std::atomic<int> c{0};
        return c;
    }
};

std::filesystem::path write_flight_recording(const std::filesystem::path& dir, std::size_t packets,
                                             const std::string& datetime = {})
{
    sim::sim_config sc;
    sc.preset = "flight";
    sc.ebn0_db = 14.0;
    sc.cfo_hz = 25e3;
    sc.flight_start_s = 3.0;  // mid-manoeuvre: the specular ray is moving
    sc.seed = 5150;
    const auto sim = test::simulate(sc, packets);
    io::sigmf_meta meta;
    meta.sample_rate_hz = 20.625e6;
    meta.datetime_iso8601 = datetime;  // empty: no core:datetime
    auto w = io::sample_file_writer::create_sigmf(dir / "flight", meta);
    w.write(sim.samples);
    w.close();
    return dir / "flight.sigmf-meta";
}

std::string http_get(std::uint16_t port, const std::string& target)
{
    namespace asio = boost::asio;
    asio::io_context io;
    asio::ip::tcp::socket sock(io);
    sock.connect({asio::ip::make_address("127.0.0.1"), port});
    const std::string req = "GET " + target + " HTTP/1.1\r\nHost: localhost\r\n\r\n";
    asio::write(sock, asio::buffer(req));
    std::string reply;
    boost::system::error_code ec;
    std::array<char, 4096> buf{};
    for (;;) {
        const std::size_t n = sock.read_some(asio::buffer(buf), ec);
        reply.append(buf.data(), n);
        if (ec) break;
    }
    return reply;
}

double metric_value(const std::string& text, const std::string& name)
{
    const auto at = text.find("\n" + name + " ");
    if (at == std::string::npos) return -1.0;
    return std::stod(text.substr(at + name.size() + 2));
}

}  // namespace

// The records carry each packet's clock offset and front-end estimate.
TEST(flight_records, rows_carry_the_clock_and_the_front_end)
{
    temp_dir dir;
    sim::sim_config sc;
    sc.preset = "awgn";
    sc.ebn0_db = 14.0;
    sc.seed = 5151;
    sc.clock_ppm = -90.0;
    sc.iq_gain_db = 1.5;
    sc.iq_phase_deg = -8.0;
    sc.dc_offset_dbc = -20.0;
    const auto sim = test::simulate(sc, 40);
    io::sigmf_meta meta;
    meta.sample_rate_hz = 20.625e6;
    {
        auto w = io::sample_file_writer::create_sigmf(dir.path / "rec", meta);
        w.write(sim.samples);
        w.close();
    }
    daemon::replay_options opt;
    opt.backend = config::backend_kind::cpu;
    opt.file = dir.path / "rec.sigmf-meta";
    opt.receiver.front_end_correction = 1;
    opt.records.base = dir.path / "r";
    const auto res = daemon::run_replay(opt);
    ASSERT_GT(res.record_rows, 30u);
    std::ifstream f(dir.path / "r-packets.csv");
    std::string header, row;
    std::getline(f, header);
    std::getline(f, row);
    std::getline(f, row);  // a packet in the middle, not the first
    auto column = [](const std::string& line, std::size_t k) {
        std::size_t at = 0;
        for (std::size_t i = 0; i < k; ++i) at = line.find(',', at) + 1;
        return line.substr(at, line.find(',', at) - at);
    };
    auto index_of = [&](const std::string& name) {
        std::size_t k = 0, at = 0;
        while (true) {
            const auto end = header.find(',', at);
            if (header.substr(at, end - at) == name) return k;
            if (end == std::string::npos) return std::string::npos;
            at = end + 1;
            ++k;
        }
    };
    for (const char* name : {"clock_ppm", "iq_gain_db", "iq_phase_deg", "dc_dbc"}) ASSERT_NE(index_of(name), std::string::npos) << name;
    EXPECT_NEAR(std::stod(column(row, index_of("clock_ppm"))), -90.0, 2.0) << row;
    EXPECT_NEAR(std::stod(column(row, index_of("iq_gain_db"))), 1.5, 0.3) << row;
    EXPECT_NEAR(std::stod(column(row, index_of("iq_phase_deg"))), -8.0, 2.0) << row;
    EXPECT_NEAR(std::stod(column(row, index_of("dc_dbc"))), -20.0, 1.5) << row;
    EXPECT_EQ(res.engine.tally.packets_front_end_corrected, res.engine.tally.packets_found);
}

TEST(flight_records, report_numbers_equal_the_replay_table)
{
    temp_dir dir;
    const auto rec = write_flight_recording(dir.path, 120);
    daemon::replay_options opt;
    opt.backend = config::backend_kind::cpu;
    opt.file = rec;
    opt.receiver = test::small_batches();
    opt.records.base = dir.path / "records" / "flight";
    opt.records.decimation = 4;  // sums must stay exact when decimated
    opt.records.channel_decimation = 10;
    const auto res = daemon::run_replay(opt);
    ASSERT_GT(res.engine.tally.packets_found, 100u);
    EXPECT_EQ(res.record_rows, (res.engine.tally.packets_found + 3) / 4);

    const auto data = report::read_packets_file(dir.path / "records" / "flight-packets.csv");
    EXPECT_TRUE(data.ber_mode);
    EXPECT_EQ(data.packets, res.engine.tally.packets_found);
    EXPECT_EQ(data.rows, res.record_rows);
    EXPECT_EQ(data.max_row_packets, 4u);
    for (int p = 0; p < dsp::chain::num_paths; ++p) {
        const auto& table = res.engine.tally.paths[static_cast<std::size_t>(p)];
        const auto& page = data.paths[static_cast<std::size_t>(p)].sums;
        EXPECT_EQ(page.bits, table.bits_checked) << dsp::path_name(p);
        EXPECT_EQ(page.errors, table.bit_errors) << dsp::path_name(p);
        EXPECT_EQ(page.packets, table.packets) << dsp::path_name(p);
        EXPECT_NEAR(page.mean_bep(), table.mean_bep_estimate, 1e-3 * table.mean_bep_estimate + 1e-6) << dsp::path_name(p);
    }
    // On the flight channel the equalized paths rank above the unequalized one.
    EXPECT_NE(data.ranking.front(), 0u);
    EXPECT_EQ(data.ranking.back() == 0u || data.ranking.back() == 1u, true) << "none or zf ranks last";

    // The page itself: self-contained, every path named, the figures there.
    const auto times = report::snapshot_times(data);
    ASSERT_EQ(times.size(), 2u) << "best and worst moments";
    const auto snaps = report::read_channel_snapshots(dir.path / "records" / "flight-channel.csv", times);
    ASSERT_EQ(snaps.nearest.size(), 2u);
    ASSERT_TRUE(snaps.nearest[0] && snaps.nearest[1]);
    report::page_inputs in;
    in.title = "flight test";
    in.packets_path = dir.path / "records" / "flight-packets.csv";
    report::channel_view view;
    view.path = dir.path / "records" / "flight-channel.csv";
    view.rows = snaps.rows;
    view.taps = snaps.taps;
    view.best = snaps.nearest[0];
    view.worst = snaps.nearest[1];
    in.channel = view;
    const auto html = report::render_html(data, in);
    for (int p = 0; p < dsp::chain::num_paths; ++p) EXPECT_NE(html.find(dsp::path_name(p)), std::string::npos);
    EXPECT_EQ(html.find("http://"), std::string::npos);
    EXPECT_EQ(html.find("<script"), std::string::npos);
    std::size_t svgs = 0;
    for (auto at = html.find("<svg"); at != std::string::npos; at = html.find("<svg", at + 1)) ++svgs;
    EXPECT_GE(svgs, 4u);
}

// Time and the report's UTC axes end to end: a recording with core:datetime, replayed with records
// (decimated), gives rows with time_utc, and paq-report's page UTC axes that start at the
// run's first packet, the span in the header in UTC; the same recording without core:datetime
// gives axes in seconds since the start.
TEST(flight_records, a_recording_with_core_datetime_gives_the_report_utc_axes_from_the_first_packet)
{
    temp_dir dir;
    const std::string datetime = "2026-11-25T10:47:40.123456789Z";
    const auto rec = write_flight_recording(dir.path, 40, datetime);
    daemon::replay_options opt;
    opt.backend = config::backend_kind::cpu;
    opt.file = rec;
    opt.receiver = test::small_batches();
    opt.records.base = dir.path / "timed";
    opt.records.decimation = 4;
    const auto res = daemon::run_replay(opt);
    ASSERT_GT(res.engine.tally.packets_found, 30u);
    ASSERT_NE(res.first_packet_utc_ns, dsp::unknown_utc_ns);
    const std::int64_t t0 = *io::parse_utc_ns(datetime);
    // The first packet's time is the recording's plus its start sample at 20.625 MS/s.
    EXPECT_GT(res.first_packet_utc_ns, t0);
    EXPECT_LT(res.first_packet_utc_ns, t0 + 1'000'000'000);

    const auto data = report::read_packets_file(dir.path / "timed-packets.csv");
    ASSERT_TRUE(data.utc_origin_ns);
    // time_s = 0 is the recording's first sample: its core:datetime (time_s is printed to
    // about 1 ns at these times; the origin within 1 us).
    EXPECT_LE(std::llabs(*data.utc_origin_ns - t0), 1000);
    const auto html = report::render_html(data, report::page_inputs{});
    const std::string start = report::format_utc_datetime(*data.utc_origin_ns + std::llround(data.min_time_s * 1e9));
    EXPECT_EQ(start.substr(0, 20), "2026-11-25 10:47:40.");
    // Each time axis says UTC and when the run started; the header gives the span in UTC.
    std::size_t axes = 0;
    const std::string axis = ">UTC (the run started " + start + ")</text>";
    for (auto at = html.find(axis); at != std::string::npos; at = html.find(axis, at + 1)) ++axes;
    EXPECT_GE(axes, 2u) << "figures 1 and 3";
    EXPECT_EQ(html.find("time since the start of the run"), std::string::npos);
    const std::string span = "; " + start.substr(0, start.size() - 4) + " to 10:47:40.";
    EXPECT_NE(html.find(span), std::string::npos) << span;
    // Ticks are UTC times of day (HH:MM:SS.fff within this 25 ms run).
    EXPECT_NE(html.find(">10:47:40."), std::string::npos);

    // The same samples without core:datetime: no time_utc, axes from the start.
    temp_dir plain_dir;
    opt.file = write_flight_recording(plain_dir.path, 40);
    opt.records.base = plain_dir.path / "plain";
    const auto plain = daemon::run_replay(opt);
    EXPECT_EQ(plain.first_packet_utc_ns, dsp::unknown_utc_ns);
    const auto plain_data = report::read_packets_file(plain_dir.path / "plain-packets.csv");
    EXPECT_FALSE(plain_data.utc_origin_ns);
    const auto plain_html = report::render_html(plain_data, report::page_inputs{});
    EXPECT_NE(plain_html.find("time since the start of the run"), std::string::npos);
    EXPECT_EQ(plain_html.find("the run started"), std::string::npos);
}

TEST(flight_records, channel_rows_and_delay_spread)
{
    // One tap: no spread. Two equal taps 4 samples apart: RMS spread 2 samples.
    std::array<cf64, dsp::chain::L_ch> h{};
    h[12] = 1.0;
    EXPECT_DOUBLE_EQ(daemon::rms_delay_spread_samples(h), 0.0);
    h[16] = cf64(0.0, 1.0);
    EXPECT_NEAR(daemon::rms_delay_spread_samples(h), 2.0, 1e-12);
}

TEST(metrics_endpoint, answers_in_the_prometheus_format_and_its_counters_move)
{
    runtime::service_snapshot snap;
    snap.ring.emplace();  // a live service's
    auto& stats = snap.engine;
    stats.tally.paths[2].name = "mmse";
    std::mutex mu;
    daemon::metrics_config cfg;
    cfg.port = 0;  // any free port
    daemon::metrics_server server(cfg, [&] {
        std::lock_guard lk(mu);
        return runtime::render_prometheus(snap);
    });
    const auto first = http_get(server.port(), "/metrics");
    EXPECT_EQ(first.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << first.substr(0, 200);
    EXPECT_NE(first.find("Content-Type: text/plain; version=0.0.4"), std::string::npos);
    EXPECT_NE(first.find("# TYPE paqd_samples_in_total counter"), std::string::npos);
    EXPECT_EQ(metric_value(first, "paqd_samples_in_total"), 0.0);
    {
        std::lock_guard lk(mu);
        stats.samples_in = 41'250'000;
        stats.tally.packets_found = 3104;
        stats.tally.paths[2].bit_errors = 17;
        snap.ring->samples_dropped = 5;
        // The clock and front-end gauges and counters.
        stats.clock_ppm_last_batch = -120.5;
        stats.tally.packets_clock_corrected = 3000;
        stats.tally.packets_front_end_corrected = 3104;
        stats.iq_gain_db_last_batch = 2.0;
        stats.iq_phase_deg_last_batch = 10.0;
        stats.dc_dbc_last_batch = -15.0;
    }
    EXPECT_NE(first.find("paqd_iq_gain_db_last_batch NaN\n"), std::string::npos);  // none corrected yet
    const auto second = http_get(server.port(), "/metrics");
    EXPECT_EQ(metric_value(second, "paqd_clock_ppm_last_batch"), -120.5);
    EXPECT_EQ(metric_value(second, "paqd_packets_clock_corrected_total"), 3000.0);
    EXPECT_EQ(metric_value(second, "paqd_packets_front_end_corrected_total"), 3104.0);
    EXPECT_EQ(metric_value(second, "paqd_iq_gain_db_last_batch"), 2.0);
    EXPECT_EQ(metric_value(second, "paqd_iq_phase_deg_last_batch"), 10.0);
    EXPECT_EQ(metric_value(second, "paqd_dc_dbc_last_batch"), -15.0);
    EXPECT_EQ(metric_value(second, "paqd_samples_in_total"), 41'250'000.0);
    EXPECT_EQ(metric_value(second, "paqd_packets_found_total"), 3104.0);
    EXPECT_EQ(metric_value(second, "paqd_ring_samples_dropped_total"), 5.0);
    EXPECT_NE(second.find("paqd_path_bit_errors_total{path=\"mmse\"} 17"), std::string::npos);
    EXPECT_NE(second.find("paqd_gaps_by_reason_total{reason=\"lost-packets\"} 0"), std::string::npos);
    const auto missing = http_get(server.port(), "/other");
    EXPECT_EQ(missing.rfind("HTTP/1.1 404", 0), 0u);
    EXPECT_GE(server.requests(), 3u);
}

TEST(metrics_endpoint, a_taken_port_is_a_clear_error)
{
    daemon::metrics_config cfg;
    cfg.port = 0;
    daemon::metrics_server first(cfg, [] { return std::string(); });
    cfg.port = first.port();
    try {
        daemon::metrics_server second(cfg, [] { return std::string(); });
        FAIL() << "bound the same port twice";
    } catch (const std::runtime_error& e) {
        EXPECT_NE(std::string(e.what()).find("127.0.0.1:" + std::to_string(cfg.port)), std::string::npos) << e.what();
    }
    cfg.bind = "not-an-address";
    EXPECT_THROW(daemon::metrics_server(cfg, [] { return std::string(); }), std::runtime_error);
}

TEST(recording, what_was_received_is_recorded_with_its_gaps_and_settings)
{
    temp_dir dir;
    daemon::recording_config cfg;
    cfg.base = dir.path / "rec";
    cfg.format = io::sample_format::cf32_le;
    std::vector<cf32> a(10'000), b(5'000);
    for (std::size_t i = 0; i < a.size(); ++i) a[i] = cf32(static_cast<float>(i), 1.0f);
    for (std::size_t i = 0; i < b.size(); ++i) b[i] = cf32(-static_cast<float>(i), 2.0f);
    {
        daemon::recorder r(cfg, 25e6, 10.3125e6, nlohmann::json("receiver: {}"));
        r.write(a);
        r.gap(2048, io::gap_reason::lost_packets);
        r.write(b);
        r.close();
        EXPECT_EQ(r.samples_recorded(), 15'000u);
        EXPECT_EQ(r.samples_dropped(), 0u);
    }
    auto reader = io::sample_file_reader::open(dir.path / "rec.sigmf-meta");
    EXPECT_EQ(reader.info().num_samples, 15'000u);
    std::vector<cf32> back(15'000);
    ASSERT_EQ(reader.read(back), 15'000u);
    EXPECT_EQ(back[9'999], a[9'999]);
    EXPECT_EQ(back[10'000], b[0]);
    const auto& extra = reader.info().meta.extra_global;
    ASSERT_TRUE(extra.contains("paq:gaps"));
    ASSERT_EQ(extra["paq:gaps"].size(), 1u);
    EXPECT_EQ(extra["paq:gaps"][0]["recording_sample"], 10'000);
    EXPECT_EQ(extra["paq:gaps"][0]["lost"], 2048);
    EXPECT_EQ(extra["paq:gaps"][0]["reason"], "lost-packets");
    // The same gap as a SigMF annotation, for tools that know nothing of paq:gaps:
    // a point (no recorded sample is missing) with the count lost before it.
    const auto& annotations = reader.info().meta.annotations;
    ASSERT_EQ(annotations.size(), 1u);
    EXPECT_EQ(annotations[0]["core:sample_start"], 10'000);
    EXPECT_EQ(annotations[0]["core:sample_count"], 0);
    EXPECT_EQ(annotations[0]["core:label"], "gap (lost-packets)");
    EXPECT_EQ(annotations[0]["core:comment"], "2048 samples of the received stream missing before this sample (lost-packets)");
    EXPECT_EQ(annotations[0]["paq:lost_samples"], 2048);
    EXPECT_EQ(annotations[0]["paq:gap_reason"], "lost-packets");
    std::ifstream meta_file(dir.path / "rec.sigmf-meta");
    const auto doc = nlohmann::json::parse(meta_file);
    EXPECT_EQ(doc["global"]["core:extensions"],
              nlohmann::json::parse(R"([{"name": "paq", "version": "1.0.0", "optional": true}])"));
    EXPECT_EQ(extra["paq:receiver"], "receiver: {}");
    // The link's bit rate, which paqd replay takes from the recording.
    EXPECT_EQ(extra["paq:bit_rate_hz"], 10.3125e6);
    EXPECT_EQ(reader.info().meta.sample_rate_hz, 25e6);
}

// A flood of one-sample datagrams with skipping counts wrote 1.76 M gap entries
// (a 185 MB .sigmf-meta). The list is bounded; the flood is merged into one counted entry.
TEST(recording, a_gap_flood_is_merged_into_a_bounded_gap_list)
{
    temp_dir dir;
    daemon::recording_config cfg;
    cfg.base = dir.path / "flood";
    cfg.format = io::sample_format::cf32_le;
    const std::size_t n = daemon::recorder::max_gap_entries + 5000;
    {
        daemon::recorder r(cfg, 20.625e6, 10.3125e6, nlohmann::json::object());
        const cf32 one[1] = {cf32(1.0f, 0.0f)};
        for (std::size_t k = 0; k < n; ++k) {
            r.gap(2, io::gap_reason::lost_packets);
            r.write(one);
        }
        r.close();
        EXPECT_EQ(r.samples_recorded(), n);
    }
    auto reader = io::sample_file_reader::open(dir.path / "flood.sigmf-meta");
    EXPECT_EQ(reader.info().num_samples, n);
    const auto& gaps = reader.info().meta.extra_global["paq:gaps"];
    ASSERT_EQ(gaps.size(), daemon::recorder::max_gap_entries);
    std::uint64_t lost = 0;
    for (const auto& g : gaps) lost += g["lost"].get<std::uint64_t>();
    EXPECT_EQ(lost, 2u * n);
    const auto& last = gaps.back();
    EXPECT_EQ(last["reason"], "coalesced");
    EXPECT_EQ(last["first_reason"], "lost-packets");
    EXPECT_EQ(last["gaps"], 5001u);
    EXPECT_EQ(last["until_recording_sample"], n - 1);
    // One annotation per entry; the coalesced one spans the recording its gaps fell in.
    const auto& annotations = reader.info().meta.annotations;
    ASSERT_EQ(annotations.size(), daemon::recorder::max_gap_entries);
    EXPECT_EQ(annotations.back()["core:label"], "gaps (coalesced)");
    EXPECT_EQ(annotations.back()["core:sample_start"], last["recording_sample"]);
    EXPECT_EQ(annotations.back()["core:sample_count"],
              n - 1 - last["recording_sample"].get<std::uint64_t>());
    EXPECT_EQ(annotations.back()["paq:lost_samples"], last["lost"]);
    // Bounded: each entry is in paq:gaps and again as an annotation (about 4.2 MB for the
    // 10,000), far under the 16 MiB the reader takes (io::sigmf_max_meta_bytes).
    EXPECT_LT(std::filesystem::file_size(dir.path / "flood.sigmf-meta"), io::sigmf_max_meta_bytes / 3);
}

TEST(recording, a_disk_that_does_not_keep_up_costs_recorded_samples_counted_and_marked)
{
    temp_dir dir;
    daemon::recording_config cfg;
    cfg.base = dir.path / "slow";
    cfg.queue_mib = 16;  // 2 M samples of queue
    daemon::recorder r(cfg, 20.625e6, 10.3125e6, nlohmann::json::object());
    // 40 M samples offered at once, far more than 16 MiB of queue: some must be dropped,
    // and everything offered is either recorded or counted as dropped.
    std::vector<cf32> chunk(1'000'000, cf32(0.5f, -0.5f));
    for (int i = 0; i < 40; ++i) r.write(chunk);
    r.close();
    EXPECT_EQ(r.samples_recorded() + r.samples_dropped(), 40'000'000u);
    auto reader = io::sample_file_reader::open(dir.path / "slow.sigmf-meta");
    EXPECT_EQ(reader.info().num_samples, r.samples_recorded());
    const auto& extra = reader.info().meta.extra_global;
    EXPECT_EQ(extra["paq:recording_dropped_samples"], r.samples_dropped());
    if (r.samples_dropped()) {
        ASSERT_FALSE(extra["paq:gaps"].empty());
        EXPECT_EQ(extra["paq:gaps"][0]["reason"], "recording-dropped");
    }
}

// A recording's core:datetime is the UTC of its first sample, from the first
// time anchor the source gave (extrapolated back at the recording's rate, exact to the ns),
// and core:frequency the configured centre frequency, else the source's, else none.
TEST(recording, core_datetime_is_the_first_sample_utc_and_core_frequency_the_configured_or_source_one)
{
    temp_dir dir;
    const auto meta_of = [&](const std::string& name) {
        std::ifstream f(dir.path / (name + ".sigmf-meta"));
        return nlohmann::json::parse(f);
    };
    std::vector<cf32> x(10'000, cf32(0.25f, -0.25f));
    const std::int64_t t = *io::parse_utc_ns("2026-11-25T10:47:40.123456789Z");
    daemon::recording_config cfg;
    cfg.format = io::sample_format::cf32_le;
    {
        // The first anchor names sample 300 of the second write (recording sample 10'300): at
        // 25 MS/s (40 ns a sample) sample 0 was taken 412'000 ns earlier. Later anchors (a
        // time jump here) do not move it.
        cfg.base = dir.path / "timed";
        daemon::recorder r(cfg, 25e6, 10.3125e6, nlohmann::json::object(), 2.2505e9);
        r.write(x);
        r.timestamp(t, 300);
        r.write(x);
        r.timestamp(t + 60'000'000'000, 0);
        r.write(x);
        r.close();
    }
    const auto timed = meta_of("timed");
    ASSERT_EQ(timed["captures"].size(), 1u);
    EXPECT_EQ(timed["captures"][0]["core:datetime"], "2026-11-25T10:47:40.123044789Z");
    EXPECT_EQ(io::parse_utc_ns(timed["captures"][0]["core:datetime"].get<std::string>()), t - 10'300 * 40);
    EXPECT_EQ(timed["captures"][0]["core:frequency"], 2.2505e9);  // the source's: none configured
    // The reader takes the recording's time back: one anchor at sample 0.
    std::vector<std::string> warnings;
    const auto marks = io::recording_marks(io::read_sigmf_meta(dir.path / "timed.sigmf-meta"), warnings);
    EXPECT_TRUE(warnings.empty());
    ASSERT_EQ(marks.size(), 1u);
    EXPECT_EQ(marks[0], (io::recording_mark{0, io::recording_mark::kind::time, 0, io::gap_reason::discontinuity, t - 10'300 * 40}));
    {
        // A rate that is not a whole number of ns a sample (20.625 MS/s), anchor at sample 0;
        // the configured frequency wins over the source's.
        cfg.base = dir.path / "configured";
        cfg.center_frequency_hz = 1.4855e9;
        daemon::recorder r(cfg, 20.625e6, 10.3125e6, nlohmann::json::object(), 2.2505e9);
        r.timestamp(t, 0);
        r.write(x);
        r.close();
    }
    const auto configured = meta_of("configured");
    EXPECT_EQ(configured["captures"][0]["core:datetime"], "2026-11-25T10:47:40.123456789Z");
    EXPECT_EQ(configured["captures"][0]["core:frequency"], 1.4855e9);
    {
        // No time from the source, no frequency anywhere: neither key.
        cfg.base = dir.path / "untimed";
        cfg.center_frequency_hz.reset();
        daemon::recorder r(cfg, 20.625e6, 10.3125e6, nlohmann::json::object());
        r.write(x);
        r.close();
    }
    const auto untimed = meta_of("untimed");
    ASSERT_EQ(untimed["captures"].size(), 1u);
    EXPECT_FALSE(untimed["captures"][0].contains("core:datetime")) << untimed.dump();
    EXPECT_FALSE(untimed["captures"][0].contains("core:frequency")) << untimed.dump();
    EXPECT_FALSE(untimed["global"].contains("core:datetime"));
    {
        // A gap before the first anchor: the recording's index no longer counts the stream's
        // samples, so no anchor after it can time sample 0 (none is better than a wrong one).
        cfg.base = dir.path / "gap_first";
        daemon::recorder r(cfg, 25e6, 10.3125e6, nlohmann::json::object());
        r.write(x);
        r.gap(0, io::gap_reason::discontinuity);
        r.timestamp(t, 0);
        r.write(x);
        r.close();
    }
    EXPECT_FALSE(meta_of("gap_first")["captures"][0].contains("core:datetime"));
}

