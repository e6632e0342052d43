// The live view's data (daemon/live_view.hpp): the per-second BER and DQM history from the
// run's counters, a packet taken from a processed window and decided again as the service
// decided it, the spectrum and level of its samples, and the HTTP routes that serve the page
// and the data. The page itself is opened in Chromium by tests/e2e/live_view.sh.
#include "daemon/live_view.hpp"
#include "daemon/metrics_http.hpp"

#include "chain_fixture.hpp"
#include "dsp/batcher.hpp"
#include "dsp/input_stage.hpp"
#include "io/bitstream.hpp"

#include <gtest/gtest.h>

#include <random>
#include <nlohmann/json.hpp>

#include <array>
#include <cmath>
#include <string>
#include <vector>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

using namespace paq;
using nlohmann::json;

namespace {

/// A snapshot whose tally the test sets: six paths, a PN pattern.
struct fake_counters {
    runtime::service_snapshot snap;
    fake_counters()
    {
        snap.have_pattern = true;
        snap.engine.tally.paths.resize(dsp::chain::num_paths);
        for (int p = 0; p < dsp::chain::num_paths; ++p) snap.engine.tally.paths[static_cast<std::size_t>(p)].name = dsp::stream_name(p);
    }
    /// `packets` more packets, each path p with `bits` more bits checked, (p + 1) x `errors`
    /// more errors and a BEP estimate of bep x (p + 1) per packet.
    void add(std::uint64_t packets, std::uint64_t bits, std::uint64_t errors, double bep)
    {
        auto& t = snap.engine.tally;
        t.packets_found += packets;
        for (std::size_t p = 0; p < t.paths.size(); ++p) {
            t.paths[p].bits_checked += bits;
            t.paths[p].bit_errors += (p + 1) * errors;
            t.paths[p].bep_estimate_sum += static_cast<double>(packets) * bep * static_cast<double>(p + 1);
            t.paths[p].locked = bits > 0;
        }
    }
};

daemon::live_view_options view_options(double rate = 20.625e6)
{
    daemon::live_view_options o;
    o.receiver.input_sample_rate_hz = rate;
    o.sample_rate_hz = rate;
    return o;
}

/// A simulated stream cut into the batcher's windows for `rc` (its geometry's guards).
std::vector<dsp::sample_batch> windows_of(const std::vector<cf32>& x, const dsp::receiver_config& rc)
{
    const auto g = dsp::make_input_geometry(rc);
    dsp::batcher bt(rc.batch_samples, g.guard_before, g.guard_after);
    bt.push(x);
    bt.finish();
    std::vector<dsp::sample_batch> out;
    while (auto b = bt.pop()) out.push_back(std::move(*b));
    return out;
}

std::vector<cf32> simulate_at(double rate, double ebn0_db, std::uint64_t seed, std::size_t samples)
{
    sim::sim_config sc;
    sc.preset = "two-ray";
    sc.ebn0_db = ebn0_db;
    sc.sample_rate_hz = rate;
    sc.cfo_hz = -42e3;
    sc.seed = seed;
    sim::simulator s(sc);
    std::vector<cf32> x;
    s.generate(samples, x);
    return x;
}

}  // namespace

TEST(live_view, history_holds_a_coded_links_codewords_and_failures_per_second)
{
    // receiver.fec: each second's codewords and failed ones per stream, from the tally's
    // counters (the page's FER column sums the last 10 s); all 0 on an uncoded link.
    fake_counters c;
    daemon::live_view view(view_options(), [&] { return c.snap; });
    view.tick();
    c.add(10, 61440, 0, 1e-4);
    view.tick();
    for (std::size_t p = 0; p < c.snap.engine.tally.paths.size(); ++p) {
        auto& f = c.snap.engine.tally.paths[p].fec;
        f.codewords += 30;
        f.codewords_failed += p;
    }
    c.add(10, 61440, 0, 1e-4);
    view.tick();
    const auto d = json::parse(view.data_json());
    ASSERT_EQ(d["history"]["t_s"].size(), 2u);
    for (int p = 0; p < dsp::chain::num_paths; ++p) {
        EXPECT_EQ(d["history"]["codewords"][p][0], 0) << p;
        EXPECT_EQ(d["history"]["codewords_failed"][p][0], 0) << p;
        EXPECT_EQ(d["history"]["codewords"][p][1], 30) << p;
        EXPECT_EQ(d["history"]["codewords_failed"][p][1], p) << p;
    }
}

TEST(live_view, history_holds_each_seconds_ber_and_dqm_from_the_counters)
{
    fake_counters c;
    auto o = view_options();
    o.history_points = 3;
    daemon::live_view view(o, [&] { return c.snap; });
    view.tick();  // the baseline: no point yet
    EXPECT_TRUE(json::parse(view.data_json())["history"]["t_s"].empty());

    c.add(10, 61440, 3, 1e-4);
    view.tick();
    auto d = json::parse(view.data_json());
    ASSERT_EQ(d["history"]["t_s"].size(), 1u);
    EXPECT_EQ(d["history"]["packets"][0], 10);
    for (int p = 0; p < dsp::chain::num_paths; ++p) {
        EXPECT_DOUBLE_EQ(d["history"]["ber"][p][0].get<double>(), 3.0 * (p + 1) / 61440.0) << p;
        EXPECT_EQ(d["history"]["dqm"][p][0].get<int>(), io::dqm_from_bep(1e-4 * (p + 1))) << p;
        EXPECT_TRUE(d["pn_locked"][p].get<bool>());
    }
    EXPECT_EQ(d["streams"][2], "mmse");
    EXPECT_EQ(d["counters"]["packets_found"], 10);  // the registry's names

    // A second without packets: no BER, no DQM (null), not zero.
    view.tick();
    d = json::parse(view.data_json());
    ASSERT_EQ(d["history"]["t_s"].size(), 2u);
    EXPECT_EQ(d["history"]["packets"][1], 0);
    EXPECT_TRUE(d["history"]["ber"][0][1].is_null());
    EXPECT_TRUE(d["history"]["dqm"][0][1].is_null());

    // Without a PN pattern the BER is not known; the DQM still is. The history keeps its last
    // history_points seconds, oldest first, at times before now.
    c.snap.have_pattern = false;
    c.add(5, 30720, 1, 1e-3);
    view.tick();
    c.add(5, 30720, 1, 1e-3);
    view.tick();
    d = json::parse(view.data_json());
    ASSERT_EQ(d["history"]["t_s"].size(), 3u);
    EXPECT_TRUE(d["history"]["ber"][0][2].is_null());
    EXPECT_EQ(d["history"]["dqm"][0][2].get<int>(), io::dqm_from_bep(1e-3));
    EXPECT_LE(d["history"]["t_s"][0].get<double>(), d["history"]["t_s"][2].get<double>());
    EXPECT_LE(d["history"]["t_s"][2].get<double>(), 0.0);
    EXPECT_TRUE(d["packet"].is_null());  // no window was offered
}

// Two receive channels: the view decides the packet over both, as the service does, and shows
// each channel's level and Eb/N0 and which was the better.
TEST(live_view, two_receive_channels_show_each_channels_level_and_the_better_one)
{
    const double rate = 20.625e6;
    auto o = view_options(rate);
    o.receiver.batch_samples = 400'000;
    o.receiver.channels = 2;
    const auto x = simulate_at(rate, 14.0, 5503, 500'000);
    // Channel 2: the same samples 20 dB down and noise of its own: a weaker channel.
    std::vector<cf32x2> both(x.size());
    std::mt19937_64 rng(5507);
    std::normal_distribution<float> noise(0.0f, 0.05f);
    for (std::size_t i = 0; i < x.size(); ++i) both[i] = {x[i], 0.1f * x[i] + cf32(noise(rng), noise(rng))};
    fake_counters c;
    daemon::live_view view(o, [&] { return c.snap; });
    const auto g = dsp::make_input_geometry(o.receiver);
    dsp::batcher_x2 bt(o.receiver.batch_samples, g.guard_before, g.guard_after);
    bt.push(std::span<const cf32x2>(both));
    bt.finish();
    auto win = bt.pop();
    ASSERT_TRUE(win.has_value());
    ASSERT_TRUE(win->is_two_channel());
    dsp::cpu_backend backend(o.receiver);
    dsp::batch_output out;
    backend.process(*win, out);
    ASSERT_GT(out.packets.size(), 5u);
    view.on_processed(*win, out);
    view.tick();
    ASSERT_EQ(view.packets_viewed(), 1u);
    const auto d = json::parse(view.data_json());
    const auto& pk = d["packet"];
    ASSERT_TRUE(pk["receive_channels"].is_array()) << pk.dump();
    const auto& ch = pk["receive_channels"];
    ASSERT_EQ(ch.size(), 2u);
    double p1 = 0, p2 = 0;
    for (const auto& s : both) p1 += std::norm(s.a), p2 += std::norm(s.b);
    EXPECT_NEAR(ch[0]["level_db"].get<double>() - ch[1]["level_db"].get<double>(), 10.0 * std::log10(p1 / p2), 1.0);
    EXPECT_NEAR(pk["level_db"].get<double>(), ch[0]["level_db"].get<double>(), 1e-9);
    EXPECT_GT(ch[0]["ebn0_db"].get<double>(), ch[1]["ebn0_db"].get<double>() + 3.0);
    EXPECT_TRUE(ch[0]["best"].get<bool>());
    EXPECT_FALSE(ch[1]["best"].get<bool>());
    // One channel: no per-channel entry.
    auto o1 = view_options(rate);
    daemon::live_view one(o1, [&] { return c.snap; });
    EXPECT_TRUE(json::parse(one.data_json())["packet"].is_null());
}

TEST(live_view, a_packet_taken_from_a_window_is_decided_again_as_the_service_decided_it)
{
    // 25 MS/s for 10.3125 Mbit/s (resampled), two-ray, a CFO: samples the view must cut and
    // decide exactly as the backend did.
    const double rate = 25e6;
    auto o = view_options(rate);
    o.receiver.batch_samples = 400'000;
    const auto x = simulate_at(rate, 14.0, 5501, 900'000);
    fake_counters c;
    daemon::live_view view(o, [&] { return c.snap; });

    dsp::cpu_backend backend(o.receiver);
    const auto wins = windows_of(x, o.receiver);
    ASSERT_GE(wins.size(), 2u);
    dsp::batch_output out;
    backend.process(wins[0], out);
    ASSERT_GT(out.packets.size(), 10u);
    view.on_processed(wins[0], out);
    // Taken once until the view has shown it: a later window does not replace it.
    dsp::batch_output out1;
    backend.process(wins[1], out1);
    view.on_processed(wins[1], out1);
    view.tick();
    EXPECT_EQ(view.packets_viewed(), 1u);
    const auto d = json::parse(view.data_json());
    ASSERT_FALSE(d["packet"].is_null());
    const auto& pk = d["packet"];

    // The first packet whose neighbourhood lies inside the window, decided to the same bits'
    // statistics and the same channel estimate.
    const auto start = pk["start_sample"].get<std::uint64_t>();
    const dsp::packet_record* rec = nullptr;
    for (const auto& r : out.packets) {
        if (r.start_sample == start) rec = &r;
    }
    ASSERT_NE(rec, nullptr) << "the view's packet is not one the backend found";
    EXPECT_NEAR(pk["ebn0_db"].get<double>(), rec->ebn0_db, 1e-6);
    for (std::size_t k = 0; k < rec->h.size(); ++k) {
        EXPECT_NEAR(pk["channel_taps"][k][0].get<double>(), rec->h[k].real(), 1e-4) << k;
        EXPECT_NEAR(pk["channel_taps"][k][1].get<double>(), rec->h[k].imag(), 1e-4) << k;
    }
    EXPECT_NEAR(pk["cfo_hz"].get<double>(), -42e3, 2e3);
    for (int p = 0; p < dsp::chain::num_paths; ++p) {
        const auto& pj = pk["paths"][p];
        EXPECT_EQ(pj["known_bit_errors"].get<int>(), rec->paths[static_cast<std::size_t>(p)].known_bit_errors) << p;
        EXPECT_NEAR(pj["bep_estimate"].get<double>(), rec->paths[static_cast<std::size_t>(p)].bep_estimate,
                    1e-6 * rec->paths[static_cast<std::size_t>(p)].bep_estimate + 1e-30)
            << p;
    }

    // The MMSE path's constellation: four clusters at (+-1, +-1), unit amplitude; its eye open
    // at every 4th sample (an I decision).
    const auto& iq = pk["paths"][2]["constellation"];
    ASSERT_EQ(iq.size(), 2 * dsp::packet_view::max_points);
    double mi = 0, mq = 0;
    int near_axis = 0;  // points within 0.2 of a decision boundary
    for (std::size_t k = 0; k < iq.size(); k += 2) {
        mi += std::abs(iq[k].get<double>());
        mq += std::abs(iq[k + 1].get<double>());
        near_axis += std::abs(iq[k].get<double>()) < 0.2 || std::abs(iq[k + 1].get<double>()) < 0.2;
    }
    const double n = static_cast<double>(iq.size() / 2);
    EXPECT_NEAR(mi / n, 1.0, 0.1);
    EXPECT_NEAR(mq / n, 1.0, 0.1);
    // SOQPSK-TG seen by an offset QPSK detector leaves some decisions near zero by itself
    // (its ternary symbols' ISI): 3% here at 14 dB.
    EXPECT_LT(near_axis, n / 16) << "the clusters are not apart";
    std::array<int, 4> quadrant{};
    for (std::size_t k = 0; k < iq.size(); k += 2) ++quadrant[(iq[k].get<double>() > 0 ? 1u : 0u) + (iq[k + 1].get<double>() > 0 ? 2u : 0u)];
    for (int q : quadrant) EXPECT_GT(q, n / 6) << "a cluster is missing";
    const auto& eye = pk["paths"][2]["eye_i"];
    ASSERT_EQ(eye.size(), dsp::packet_view::max_points + 1);
    double open = 0;
    for (std::size_t k = 0; k < eye.size(); k += 4) open += std::abs(eye[k].get<double>());
    EXPECT_NEAR(open / static_cast<double>((eye.size() + 3) / 4), 1.0, 0.1);

    // The spectrum: the signal's band (+-3 MHz) stands well above the noise beyond +-10 MHz.
    const auto& sp = pk["spectrum"];
    ASSERT_EQ(sp["db"].size(), 512u);
    EXPECT_DOUBLE_EQ(sp["f_first_hz"].get<double>(), -rate / 2);
    double in_band = 0, out_band = 0;
    int n_in = 0, n_out = 0;
    for (std::size_t k = 0; k < 512; ++k) {
        const double f = sp["f_first_hz"].get<double>() + static_cast<double>(k) * sp["f_step_hz"].get<double>();
        const double v = sp["db"][k].get<double>();
        if (std::abs(f) < 3e6) in_band += v, ++n_in;
        if (std::abs(f) > 10e6) out_band += v, ++n_out;
    }
    EXPECT_GT(in_band / n_in - out_band / n_out, 10.0);
    // The level: the excerpt's mean power, as the window's within 1 dB (a stationary signal).
    double pw = 0;
    for (const auto& s : x) pw += std::norm(s);
    EXPECT_NEAR(pk["level_db"].get<double>(), 10.0 * std::log10(pw / static_cast<double>(x.size())), 1.0);

    // Asked again after the tick: the next window's packet is taken.
    view.on_processed(wins[1], out1);
    view.tick();
    EXPECT_EQ(view.packets_viewed(), 2u);
    const auto d2 = json::parse(view.data_json());
    EXPECT_GE(d2["packet"]["start_sample"].get<std::uint64_t>(), wins[1].first_sample);
}

TEST(live_view, a_ci16_window_is_shown_as_its_cf32_twin)
{
    auto o = view_options();
    o.receiver.batch_samples = 200'000;
    const auto x = simulate_at(20.625e6, 16.0, 7703, 300'000);
    // ci16 at 8192 counts per unit, and its cf32 twin converted the same way.
    const float scale = 8192.0f;
    std::vector<ci16> x16(x.size());
    std::vector<cf32> twin(x.size());
    for (std::size_t k = 0; k < x.size(); ++k) {
        x16[k] = {static_cast<std::int16_t>(std::lround(x[k].real() * scale)), static_cast<std::int16_t>(std::lround(x[k].imag() * scale))};
        twin[k] = to_cf32(x16[k], scale);
    }
    const auto g = dsp::make_input_geometry(o.receiver);
    dsp::basic_batcher<ci16> bt(o.receiver.batch_samples, g.guard_before, g.guard_after, scale);
    bt.push(x16);
    bt.finish();
    auto w16 = bt.pop();
    ASSERT_TRUE(w16);
    const auto w32 = windows_of(twin, o.receiver);
    fake_counters c;
    daemon::live_view v16(o, [&] { return c.snap; }), v32(o, [&] { return c.snap; });
    dsp::cpu_backend backend(o.receiver);
    dsp::batch_output out16, out32;
    backend.process(*w16, out16);
    backend.process(w32[0], out32);
    ASSERT_FALSE(out16.packets.empty());
    v16.on_processed(*w16, out16);
    v32.on_processed(w32[0], out32);
    v16.tick();
    v32.tick();
    const auto a = json::parse(v16.data_json())["packet"], b = json::parse(v32.data_json())["packet"];
    ASSERT_FALSE(a.is_null());
    EXPECT_EQ(a["start_sample"], b["start_sample"]);
    EXPECT_EQ(a["paths"], b["paths"]);
    EXPECT_EQ(a["spectrum"], b["spectrum"]);
    EXPECT_NEAR(a["level_db"].get<double>(), b["level_db"].get<double>(), 1e-9);
}

TEST(live_view, a_window_without_a_packet_that_fits_is_passed_over)
{
    auto o = view_options();
    fake_counters c;
    daemon::live_view view(o, [&] { return c.snap; });
    dsp::sample_batch b;
    b.samples.assign(50'000, cf32(0.0f, 0.0f));
    dsp::batch_output out;
    view.on_processed(b, out);  // no packets
    dsp::packet_record rec;
    rec.start_sample = 10;      // no room for the guards before it
    out.packets.push_back(rec);
    view.on_processed(b, out);
    view.tick();
    EXPECT_EQ(view.packets_viewed(), 0u);
    EXPECT_TRUE(json::parse(view.data_json())["packet"].is_null());
}

// ---------------------------------------------------------------------------------------------
// The HTTP routes

namespace {

std::string http_get(std::uint16_t port, const std::string& target)
{
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || ::connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0) {
        if (fd >= 0) ::close(fd);
        return "(connect failed)";
    }
    const std::string rq = "GET " + target + " HTTP/1.1\r\nHost: localhost\r\n\r\n";
    if (::write(fd, rq.data(), rq.size()) != static_cast<ssize_t>(rq.size())) {
        ::close(fd);
        return "(write failed)";
    }
    std::string out;
    char buf[8192];
    for (;;) {
        pollfd p{fd, POLLIN, 0};
        if (::poll(&p, 1, 5000) != 1) break;
        const ssize_t got = ::read(fd, buf, sizeof buf);
        if (got <= 0) break;
        out.append(buf, static_cast<std::size_t>(got));
    }
    ::close(fd);
    return out;
}

}  // namespace

TEST(live_view, the_server_answers_each_route_and_names_them_where_none_matches)
{
    fake_counters c;
    c.add(3, 18432, 1, 1e-5);
    daemon::live_view view(view_options(), [&] { return c.snap; });
    view.tick();
    daemon::metrics_config cfg;
    cfg.port = 0;
    std::vector<daemon::http_route> routes{daemon::metrics_route([] { return std::string("paqd_up 1\n"); })};
    routes.push_back({"/view", "text/html; charset=utf-8", "Content-Security-Policy: default-src 'none'\r\n",
                      [] { return std::string(daemon::live_view::page()); }});
    routes.push_back({"/view/data.json", "application/json", "", [&] { return view.data_json(); }});
    routes.push_back({"/broken", "text/plain", "", []() -> std::string { throw std::runtime_error("no data yet"); }});
    daemon::metrics_server server(cfg, routes);

    const auto page = http_get(server.port(), "/view");
    EXPECT_TRUE(page.starts_with("HTTP/1.1 200 OK\r\n")) << page.substr(0, 200);
    EXPECT_NE(page.find("Content-Type: text/html; charset=utf-8\r\n"), std::string::npos);
    EXPECT_NE(page.find("Content-Security-Policy: default-src 'none'\r\n"), std::string::npos);
    EXPECT_NE(page.find("<canvas id=\"ber-chart\""), std::string::npos);
    EXPECT_NE(page.find("<th>FER (coded link)</th>"), std::string::npos);
    // Self-contained: nothing loaded from elsewhere.
    EXPECT_EQ(page.find("src=\"http"), std::string::npos);
    EXPECT_EQ(page.find("href=\"http"), std::string::npos);

    const auto data = http_get(server.port(), "/view/data.json?t=1");
    ASSERT_TRUE(data.starts_with("HTTP/1.1 200 OK\r\n")) << data.substr(0, 200);
    const auto body = json::parse(data.substr(data.find("\r\n\r\n") + 4));
    EXPECT_EQ(body["counters"]["packets_found"], 3);

    EXPECT_TRUE(http_get(server.port(), "/metrics").starts_with("HTTP/1.1 200 OK\r\n"));
    const auto missing = http_get(server.port(), "/nothing");
    EXPECT_TRUE(missing.starts_with("HTTP/1.1 404 Not Found\r\n"));
    EXPECT_NE(missing.find("/metrics /view /view/data.json /broken"), std::string::npos) << missing;
    const auto broken = http_get(server.port(), "/broken");
    EXPECT_TRUE(broken.starts_with("HTTP/1.1 500 Internal Server Error\r\n")) << broken;
    EXPECT_NE(broken.find("no data yet"), std::string::npos);
}
