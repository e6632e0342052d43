#include "daemon/live_view.hpp"

#include "dsp/fft.hpp"
#include "dsp/input_stage.hpp"
#include "io/bitstream.hpp"
#include "io/thread_name.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <stdexcept>

namespace paq::daemon {

// The page (daemon/live_view.html), made into a string by the build.
extern const char live_view_page_html[];

namespace {

constexpr double nan = std::numeric_limits<double>::quiet_NaN();

dsp::receiver_config inspector_config(dsp::receiver_config rc)
{
    rc.cpu_threads = 1;
    // The view shows the symbol-by-symbol decisions (the trellis decides from the same
    // samples and phases); the records and the bitstreams carry whatever the service runs.
    rc.detector = dsp::detector_kind::sxs;
    return rc;
}

/// JSON has no NaN: null for a value not known.
nlohmann::json number_or_null(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }

/// A value rounded to a multiple of `step` (the page draws pixels: short JSON).
double round_to(double x, double step) { return std::isfinite(x) ? std::round(x / step) * step : 0.0; }

nlohmann::json rounded(const std::vector<float>& v, double step)
{
    auto a = nlohmann::json::array();
    for (float x : v) a.push_back(round_to(x, step));
    return a;
}

/// Welch's estimate of the excerpt's spectrum: `bins`-point Hann segments overlapping by half,
/// |X|^2 averaged, in dB re. unit power per bin, bin 0 at -fs/2.
std::vector<float> welch_db(const std::vector<cf32>& x, const dsp::fft_plan& plan, std::size_t bins)
{
    std::vector<float> out(bins, -200.0f);
    if (x.size() < bins) return out;
    dsp::fft_buffer in(bins), spec(bins);
    std::vector<double> w(bins), acc(bins, 0.0);
    double wsum2 = 0.0;
    for (std::size_t i = 0; i < bins; ++i) {
        w[i] = 0.5 - 0.5 * std::cos(2.0 * std::numbers::pi * static_cast<double>(i) / static_cast<double>(bins));
        wsum2 += w[i] * w[i];
    }
    std::size_t segments = 0;
    for (std::size_t s = 0; s + bins <= x.size(); s += bins / 2, ++segments) {
        for (std::size_t i = 0; i < bins; ++i) in[i] = cf64(x[s + i].real(), x[s + i].imag()) * w[i];
        plan.execute(in.data(), spec.data());
        for (std::size_t k = 0; k < bins; ++k) acc[k] += std::norm(spec[k]);
    }
    for (std::size_t k = 0; k < bins; ++k) {
        const double p = acc[(k + bins / 2) % bins] / (static_cast<double>(segments) * wsum2);
        out[k] = static_cast<float>(10.0 * std::log10(std::max(p, 1e-20)));
    }
    return out;
}

}  // namespace

live_view::live_view(live_view_options opt, snapshot_fn snapshot)
    : opt_(std::move(opt)),
      snapshot_(std::move(snapshot)),
      inspector_(inspector_config(opt_.receiver)),
      geometry_(dsp::make_input_geometry(opt_.receiver)),
      spectrum_plan_(opt_.spectrum_bins, dsp::fft_plan::direction::forward)
{
    if (!(opt_.sample_rate_hz > 0.0)) throw std::invalid_argument("live view: the sample rate must be positive");
    if (opt_.history_points == 0) throw std::invalid_argument("live view: history_points must be at least 1");
    for (int s = 0; s < opt_.receiver.streams(); ++s) stream_names_.emplace_back(dsp::stream_name(s));
    locked_.assign(stream_names_.size(), false);
}

live_view::~live_view()
{
    {
        std::lock_guard lk(run_mu_);
        stopping_ = true;
    }
    run_cv_.notify_all();
    if (thread_.joinable()) thread_.join();
}

void live_view::start()
{
    thread_ = std::thread([this] {
        io::name_this_thread("paqd-view");
        loop();
    });
}

void live_view::loop()
{
    auto next = std::chrono::steady_clock::now();
    std::unique_lock lk(run_mu_);
    while (!stopping_) {
        next += opt_.period;
        if (run_cv_.wait_until(lk, next, [this] { return stopping_; })) break;
        lk.unlock();
        try {
            tick();
        } catch (const std::exception& e) {
            // The view is a window on the receiver, never a reason to stop it.
            spdlog::warn("live view: {}", e.what());
        }
        lk.lock();
        const auto now = std::chrono::steady_clock::now();
        if (next < now - opt_.period) next = now;  // fell behind (a slow packet): no burst of ticks
    }
}

double live_view::now_s() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count(); }

void live_view::on_processed(const dsp::sample_batch& batch, const dsp::batch_output& out)
{
    if (!want_.load(std::memory_order_relaxed) || out.packets.empty()) return;
    std::unique_lock lk(take_mu_, std::try_to_lock);
    if (!lk.owns_lock() || !want_.load()) return;
    // The excerpt: a window of its own around the packet, owning the peak's neighbourhood
    // (a quarter packet each side of the start) with the batcher's guards around that, so
    // that the view decides the packet from the samples the backend did.
    const double r = opt_.receiver.input_ratio();
    const auto quarter = static_cast<std::uint64_t>(std::ceil(static_cast<double>(waveform::L_pkt / 4) * r));
    const std::uint64_t before = quarter + geometry_.guard_before + 64, after = quarter + geometry_.guard_after + 64;
    const std::uint64_t len = batch.size();
    for (const auto& rec : out.packets) {
        if (rec.start_sample < batch.first_sample + before || rec.start_sample + after > batch.first_sample + len) continue;
        const std::uint64_t begin = rec.start_sample - before - batch.first_sample, end = rec.start_sample + after - batch.first_sample;
        dsp::sample_batch x;
        x.index = batch.index;
        x.first_sample = batch.first_sample + begin;
        x.segment_first_sample = batch.segment_first_sample;
        if (batch.is_ci16()) {
            x.samples_ci16.assign(batch.samples_ci16.begin() + static_cast<std::ptrdiff_t>(begin),
                                  batch.samples_ci16.begin() + static_cast<std::ptrdiff_t>(end));
            x.ci16_scale = batch.ci16_scale;
        } else if (batch.is_two_channel()) {
            x.samples_x2.assign(batch.samples_x2.begin() + static_cast<std::ptrdiff_t>(begin),
                                batch.samples_x2.begin() + static_cast<std::ptrdiff_t>(end));
        } else {
            x.samples.assign(batch.samples.begin() + static_cast<std::ptrdiff_t>(begin), batch.samples.begin() + static_cast<std::ptrdiff_t>(end));
        }
        x.owned_begin = static_cast<std::size_t>(before - quarter);
        x.owned_end = static_cast<std::size_t>(before + quarter);
        x.segment_start = batch.segment_start && begin == 0;
        x.segment_end = batch.segment_end && end == len;
        taken_ = std::move(x);
        want_ = false;
        return;
    }
}

void live_view::tick()
{
    const auto snap = snapshot_();
    update_history(snap);
    std::optional<dsp::sample_batch> excerpt;
    {
        std::lock_guard lk(take_mu_);
        excerpt.swap(taken_);
    }
    if (excerpt) show_packet(std::move(*excerpt));
    want_ = true;
}

void live_view::update_history(const runtime::service_snapshot& s)
{
    const double t = now_s();
    const auto& tally = s.engine.tally;
    const std::size_t n = stream_names_.size();
    history_point pt;
    pt.t_s = t;
    pt.ber.assign(n, nan);
    pt.dqm.assign(n, nan);
    pt.codewords.assign(n, 0);
    pt.codewords_failed.assign(n, 0);
    std::vector<bool> locked(n, false);
    const std::uint64_t packets_before = prev_ ? prev_->engine.tally.packets_found : 0;
    pt.packets = tally.packets_found - std::min(tally.packets_found, packets_before);
    for (std::size_t p = 0; p < n && p < tally.paths.size(); ++p) {
        const auto& now = tally.paths[p];
        locked[p] = now.locked;
        const dsp::path_summary none{};
        const auto& was = prev_ && p < prev_->engine.tally.paths.size() ? prev_->engine.tally.paths[p] : none;
        const auto bits = now.bits_checked - std::min(now.bits_checked, was.bits_checked);
        const auto errors = now.bit_errors - std::min(now.bit_errors, was.bit_errors);
        if (s.have_pattern && bits > 0) pt.ber[p] = static_cast<double>(errors) / static_cast<double>(bits);
        pt.codewords[p] = now.fec.codewords - std::min(now.fec.codewords, was.fec.codewords);
        pt.codewords_failed[p] = now.fec.codewords_failed - std::min(now.fec.codewords_failed, was.fec.codewords_failed);
        if (pt.packets > 0) {
            const double mean_bep = (now.bep_estimate_sum - was.bep_estimate_sum) / static_cast<double>(pt.packets);
            pt.dqm[p] = io::dqm_from_bep(mean_bep);
        }
    }
    auto counters = runtime::to_json(s);
    std::lock_guard lk(mu_);
    if (prev_) history_.push_back(std::move(pt));  // the first snapshot is the baseline
    while (history_.size() > opt_.history_points) history_.pop_front();
    prev_ = s;
    counters_ = std::move(counters);
    locked_ = std::move(locked);
}

void live_view::show_packet(dsp::sample_batch&& excerpt)
{
    packet_display d;
    if (!inspector_.inspect(excerpt, inspect_out_, d.view)) return;
    std::vector<cf32> x;
    if (excerpt.is_ci16()) {
        x.reserve(excerpt.samples_ci16.size());
        for (const auto s : excerpt.samples_ci16) x.push_back(to_cf32(s, excerpt.ci16_scale));
    } else if (excerpt.is_two_channel()) {
        // Level and spectrum of channel 1 (the first channel received); each channel's level.
        x.reserve(excerpt.samples_x2.size());
        double p1 = 0.0, p2 = 0.0;
        for (const auto& s : excerpt.samples_x2) {
            x.push_back(s.a);
            p1 += static_cast<double>(std::norm(s.a));
            p2 += static_cast<double>(std::norm(s.b));
        }
        const double n = static_cast<double>(std::max<std::size_t>(excerpt.samples_x2.size(), 1));
        d.channel_level_db = {10.0 * std::log10(std::max(p1 / n, 1e-30)), 10.0 * std::log10(std::max(p2 / n, 1e-30))};
    } else {
        x = std::move(excerpt.samples);
    }
    double power = 0.0;
    for (const auto& s : x) power += static_cast<double>(std::norm(s));
    d.level_db = 10.0 * std::log10(std::max(power / static_cast<double>(std::max<std::size_t>(x.size(), 1)), 1e-30));
    d.spectrum_db = welch_db(x, spectrum_plan_, opt_.spectrum_bins);
    d.age_origin_s = now_s();
    std::lock_guard lk(mu_);
    shown_ = std::move(d);
    ++packets_viewed_;
}

std::string live_view::data_json() const
{
    nlohmann::json j;
    std::lock_guard lk(mu_);
    const double t = now_s();
    j["format"] = 1;
    j["streams"] = stream_names_;
    j["sample_rate_hz"] = opt_.sample_rate_hz;
    j["bit_rate_hz"] = opt_.receiver.bit_rate_hz;
    j["period_s"] = std::chrono::duration<double>(opt_.period).count();
    auto locked = nlohmann::json::array();
    for (bool l : locked_) locked.push_back(l);
    j["pn_locked"] = locked;
    // History: one entry per second, oldest first; t is seconds before now (<= 0).
    auto times = nlohmann::json::array(), packets = nlohmann::json::array();
    const std::size_t n = stream_names_.size();
    std::vector<nlohmann::json> ber(n, nlohmann::json::array()), dqm(n, nlohmann::json::array());
    std::vector<nlohmann::json> codewords(n, nlohmann::json::array()), failed(n, nlohmann::json::array());
    for (const auto& h : history_) {
        times.push_back(std::round((h.t_s - t) * 100.0) / 100.0);
        packets.push_back(h.packets);
        for (std::size_t p = 0; p < n; ++p) {
            ber[p].push_back(number_or_null(h.ber[p]));
            dqm[p].push_back(number_or_null(h.dqm[p]));
            codewords[p].push_back(h.codewords[p]);
            failed[p].push_back(h.codewords_failed[p]);
        }
    }
    nlohmann::json hist;
    hist["t_s"] = times;
    hist["packets"] = packets;
    hist["ber"] = ber;
    hist["dqm"] = dqm;
    // A coded link's (receiver.fec): codewords decoded and failed per second; all 0 otherwise.
    hist["codewords"] = codewords;
    hist["codewords_failed"] = failed;
    j["history"] = hist;
    if (shown_) {
        const auto& v = shown_->view;
        const auto& rec = v.record;
        nlohmann::json pk;
        pk["age_s"] = std::round((t - shown_->age_origin_s) * 10.0) / 10.0;
        pk["start_sample"] = rec.start_sample;
        pk["utc_ns"] = rec.utc_ns == dsp::unknown_utc_ns ? nlohmann::json(nullptr) : nlohmann::json(rec.utc_ns);
        pk["ebn0_db"] = number_or_null(rec.ebn0_db);
        pk["cfo_hz"] = number_or_null(rec.cfo_rad_per_sample / (2.0 * std::numbers::pi) * 2.0 * opt_.receiver.bit_rate_hz);
        pk["level_db"] = number_or_null(shown_->level_db);
        // Two receive channels: each channel's level (the excerpt's), its Eb/N0 at this packet
        // and whether the packet's better channel (null with one channel).
        if (shown_->channel_level_db.size() == 2 && rec.receive_channels == 2) {
            auto chans = nlohmann::json::array();
            for (std::size_t c = 0; c < 2; ++c) {
                chans.push_back({{"level_db", number_or_null(shown_->channel_level_db[c])},
                                 {"ebn0_db", number_or_null(rec.channel_ebn0_db[c])},
                                 {"best", rec.best_channel == c}});
            }
            pk["receive_channels"] = chans;
        } else {
            pk["receive_channels"] = nullptr;
        }
        pk["flags"] = rec.flags;
        auto h = nlohmann::json::array();
        for (const auto& tap : rec.h) h.push_back({round_to(tap.real(), 1e-4), round_to(tap.imag(), 1e-4)});
        pk["channel_taps"] = h;
        pk["channel_first_index"] = -dsp::chain::N1;
        pk["channel_support"] = {rec.channel_first_tap, rec.channel_last_tap};
        auto paths = nlohmann::json::array();
        for (std::size_t p = 0; p < dsp::chain::num_paths; ++p) {
            nlohmann::json pj;
            pj["name"] = dsp::stream_name(static_cast<int>(p));
            pj["bep_estimate"] = number_or_null(rec.paths[p].bep_estimate);
            pj["known_bit_errors"] = rec.paths[p].known_bit_errors;
            auto c = nlohmann::json::array();
            for (const auto& z : v.constellation[p]) {
                c.push_back(round_to(z.real(), 0.001));
                c.push_back(round_to(z.imag(), 0.001));
            }
            pj["constellation"] = c;  // I0, Q0, I1, Q1, ...
            pj["eye_i"] = rounded(v.eye_i[p], 0.001);
            paths.push_back(pj);
        }
        pk["paths"] = paths;
        const double fs = opt_.sample_rate_hz;
        pk["spectrum"] = {{"bins", shown_->spectrum_db.size()},
                          {"f_first_hz", -fs / 2.0},
                          {"f_step_hz", fs / static_cast<double>(std::max<std::size_t>(shown_->spectrum_db.size(), 1))},
                          {"db", rounded(shown_->spectrum_db, 0.01)}};
        j["packet"] = pk;
    } else {
        j["packet"] = nullptr;
    }
    j["counters"] = counters_.is_null() ? nlohmann::json::object() : counters_;
    return j.dump();
}

std::string_view live_view::page() { return live_view_page_html; }

}  // namespace paq::daemon
