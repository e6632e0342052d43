#include "daemon/live.hpp"

#include "config/receiver_yaml.hpp"
#include "daemon/live_view.hpp"
#include "daemon/metrics_http.hpp"
#include "daemon/notify.hpp"
#include "io/udp_publisher.hpp"
#include "io/utc_time.hpp"
#include "daemon/records.hpp"
#include "daemon/recorder.hpp"
#include "daemon/replay.hpp"
#include "daemon/sources.hpp"
#include "runtime/backend_factory.hpp"
#include "runtime/counters.hpp"

#include <spdlog/spdlog.h>

#include <csignal>
#include <cstdio>
#include <ctime>
#include <fstream>

namespace paq::daemon {

using runtime::service_snapshot;

namespace {

/// The receiver for the source's rate: the chain runs at 2 samples per bit of
/// receiver.bit_rate_hz and resamples any other input rate; a rate it cannot serve is an error
/// naming both.
dsp::receiver_config receiver_for(const config::daemon_config& cfg, double rate)
{
    dsp::receiver_config rc = cfg.receiver;
    rc.input_sample_rate_hz = rate;
    spdlog::info("front-end correction (DC, IQ imbalance): {}", rc.front_end_correction_on() ? "on" : "off");
    if (const auto errors = rc.validate(); !errors.empty()) {
        std::string msg = "the source's sample rate cannot be received:";
        for (const auto& e : errors) msg += "\n  " + e;
        throw std::invalid_argument(msg);
    }
    spdlog::info("rates: input {:.6g} MS/s, bit rate {:.6g} Mbit/s: {:.4g} samples per bit{}", rate / 1e6,
                 rc.bit_rate_hz / 1e6, rate / rc.bit_rate_hz, rc.input_ratio() != 1.0 ? ", resampled to 2" : "");
    return rc;
}

/// The ring, in the source's width: a ci16 source's samples stay ci16 (4 bytes a sample)
/// through the ring and the upload and are converted by the backend.
std::unique_ptr<io::sample_ring> make_ring(const config::daemon_config& cfg, const io::sample_source& source,
                                           config::backend_kind backend)
{
    const double rate = source.sample_rate_hz();
    const auto capacity = static_cast<std::size_t>(cfg.ring.capacity_s * rate);
    const io::overflow_policy policy = overflow_for(cfg);
    const std::optional<float> ci16_scale = source.ci16_scale();
    auto ring = std::make_unique<io::sample_ring>(capacity, policy, runtime::make_ring_allocator(cfg.ring.lock_memory, backend),
                                                  io::sample_ring::default_max_markers, ci16_scale, source.channels());
    spdlog::info("source: {}", source.describe());
    spdlog::info("ring: {} {} samples ({:.2f} s, {} MiB), overflow policy {}, memory {}", capacity,
                 ring->channels() == 2 ? "two-channel cf32" : ring->is_ci16() ? "ci16" : "cf32", static_cast<double>(capacity) / rate,
                 capacity * ring->sample_bytes() >> 20, io::to_string(policy), ring->memory_kind());
    spdlog::info("input width: {}", ring->is_ci16() ? fmt::format("ci16 (scale {}), converted on the backend", *ci16_scale)
                                                    : std::string("cf32"));
    return ring;
}

/// The publisher (null when publisher.enabled is false, said in the log); a warning when the
/// pacing cannot keep up with the link.
std::unique_ptr<io::udp_publisher> make_publisher(const config::daemon_config& cfg, const dsp::receiver_config& rc)
{
    if (!cfg.publisher.enabled) {
        spdlog::warn("publisher disabled: no bitstreams go out (publisher.enabled: false)");
        return nullptr;
    }
    if (cfg.publisher.any_llr() && !rc.trellis_on()) {
        throw std::invalid_argument("publisher.llr_destinations: the soft streams carry the trellis's LLRs, but "
                                    "receiver.detector is sxs");
    }
    auto udp = std::make_unique<io::udp_publisher>(cfg.publisher.for_streams(rc.streams(), rc.fec));
    spdlog::info("publisher: {}", udp->describe());
    // Datagrams a second at the nominal packet rate against the pacing.
    int sent_streams = 0;
    for (int s = 0; s < rc.streams(); ++s) sent_streams += udp->enabled(s) ? 1 : 0;
    for (int p = 0; p < dsp::chain::num_paths; ++p) sent_streams += udp->llr_enabled(p) ? 1 : 0;
    for (int s = 0; s < rc.streams(); ++s) sent_streams += udp->decoded_enabled(s) ? 1 : 0;
    sent_streams += udp->best_enabled() ? 1 : 0;
    const double packets_per_s = rc.bit_rate_hz / static_cast<double>(waveform::packet_bits);
    const double needed = sent_streams * packets_per_s, cap = cfg.publisher.udp.max_datagrams_per_second;
    if (cap > 0.0 && needed > cap) {
        spdlog::warn("publisher: {} streams at {:.0f} packets/s need {:.0f} datagrams/s, above "
                     "publisher.max_datagrams_per_second {:.0f}: the publisher will fall behind the link (raise it, or "
                     "0: unpaced)",
                     sent_streams, packets_per_s, needed, cap);
    }
    return udp;
}

/// The live service's parts, each made from the configuration in the order they need each
/// other, and their counters gathered for the registry.
struct live_service {
    explicit live_service(const config::daemon_config& c) : cfg(c) {}

    const config::daemon_config& cfg;
    // Declared in the order each needs the ones before it (destroyed the other way): the
    // pipeline's threads use the source, the ring, the records, the recorder and the
    // publisher; the live view reads the pipeline (its hook is called by the pipeline's
    // workers, joined before the view goes); the HTTP server reads both.
    std::unique_ptr<io::sample_source> source;
    std::unique_ptr<io::sample_ring> ring;
    std::unique_ptr<records_writer> records;
    std::unique_ptr<recorder> rec;
    std::unique_ptr<io::udp_publisher> udp;
    std::unique_ptr<pipeline> pipe;
    std::unique_ptr<live_view> view;
    std::unique_ptr<metrics_server> metrics;

    /// Makes every part (throws naming what cannot start); the pipeline is not started.
    void build();
    /// Every counter, gathered at one moment for the registry (runtime/counters.hpp) from its
    /// owners: the status line, the metrics endpoint, the final log and --json-out all read it.
    [[nodiscard]] service_snapshot snapshot() const;
    /// The records and the recording closed (their counts final), then the final counters in
    /// the log and --json-out. Returns the exit code.
    int finish(const std::filesystem::path& json_out);
};

void live_service::build()
{
    const auto backend = runtime::resolve_backend(cfg.pipeline.backend, cfg.receiver);
    source = make_source(cfg.source);
    if (source->channels() != cfg.receiver.channels) {
        throw std::invalid_argument("receiver.channels is " + std::to_string(cfg.receiver.channels) + " but the source delivers " +
                                    std::to_string(source->channels()) + " channel(s): " + source->describe());
    }
    const double rate = source->sample_rate_hz();
    const dsp::receiver_config rc = receiver_for(cfg, rate);
    // The backends before the ring: with the cuda backend the ring is pinned by CUDA, and a
    // missing device is said as such, not as a failed cudaHostAlloc.
    auto workers =
        runtime::make_backends(backend, cfg.pipeline.gpus, cfg.pipeline.cpu_workers, runtime::parse_solver(cfg.pipeline.solver), rc);
    if (!cfg.records.base.empty()) {
        records = std::make_unique<records_writer>(cfg.records, cfg.monitor.pattern, rate, 2.0 * rc.bit_rate_hz, rc.streams(),
                                                   dsp::framing_for(rc.fec));
        spdlog::info("records: {} (one row per {} packet(s)), channel every {} packet(s)", records->packets_path().string(),
                     cfg.records.decimation, cfg.records.channel_decimation);
    }
    if (!cfg.recording.base.empty()) {
        rec = std::make_unique<recorder>(cfg.recording, rate, rc.bit_rate_hz, nlohmann::json(config::to_yaml(cfg)),
                                         source->center_frequency_hz());
        spdlog::info("recording the received samples to {} ({})", rec->meta_path().string(),
                     io::to_sigmf_datatype(cfg.recording.format));
    }
    ring = make_ring(cfg, *source, backend);
    spdlog::info("workers: {} x {} backend", workers.size(), workers.front()->name());
    // Soft streams: the backends keep the trellis's LLRs for the publisher.
    const bool soft = cfg.publisher.enabled && cfg.publisher.any_llr();
    for (auto& w : workers) w->set_soft_output(soft);
    pipeline::backend_factory fallback;
    if (cfg.pipeline.cpu_fallback && backend == config::backend_kind::cuda) {
        fallback = [rc, soft] {
            auto b = runtime::make_backend({config::backend_kind::cpu}, rc);
            b->set_soft_output(soft);
            return b;
        };
    }
    pipeline_options po;
    po.receiver = rc;
    po.pattern = cfg.monitor.pattern;
    po.sample_rate_hz = rate;
    po.stall_timeout = std::chrono::milliseconds(static_cast<long>(cfg.source.stall_timeout_s * 1000.0));
    po.queue_depth = cfg.pipeline.queue_depth;
    if (rec) {
        po.on_samples = [r = rec.get()](std::span<const cf32> x) { r->write(x); };
        po.on_gap = [r = rec.get()](std::uint64_t lost, io::gap_reason why) { r->gap(lost, why); };
        po.on_time = [r = rec.get()](std::int64_t utc_ns, std::size_t offset) { r->timestamp(utc_ns, offset); };
    }
    if (cfg.metrics.enabled && cfg.metrics.live_view) {
        view = std::make_unique<live_view>(live_view_options{.receiver = rc, .sample_rate_hz = rate}, [this] { return snapshot(); });
        po.on_processed = [v = view.get()](const dsp::sample_batch& b, const dsp::batch_output& o) { v->on_processed(b, o); };
    }
    udp = make_publisher(cfg, rc);
    auto publish = [this](const dsp::batch_output& out) {
        if (udp) {
            try {
                udp->publish(out);
            } catch (const std::exception& e) {
                spdlog::error("batch {}: publishing failed: {}", out.batch_index, e.what());
            }
        }
        if (records) {
            try {
                records->add(out);
            } catch (const std::exception& e) {
                spdlog::error("{}", e.what());
            }
        }
    };
    pipe = std::make_unique<pipeline>(po, *source, *ring, std::move(workers), std::move(fallback), publish);
    if (cfg.metrics.enabled) {
        std::vector<http_route> routes{metrics_route([this] { return render_prometheus(snapshot()); })};
        if (view) {
            // The page loads nothing from elsewhere, and the policy says so to the browser.
            const std::string page_headers =
                "Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\n"
                "Content-Security-Policy: default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
                "connect-src 'self'\r\n";
            auto page = [] { return std::string(live_view::page()); };
            routes.push_back({"/view", "text/html; charset=utf-8", page_headers, page});
            routes.push_back({"/", "text/html; charset=utf-8", page_headers, page});
            routes.push_back({"/view/data.json", "application/json", "Cache-Control: no-store\r\n",
                              [v = view.get()] { return v->data_json(); }});
        }
        metrics = std::make_unique<metrics_server>(cfg.metrics, std::move(routes));
        const std::string base = fmt::format("http://{}:{}", cfg.metrics.bind.find(':') != std::string::npos ? "[" + cfg.metrics.bind + "]" : cfg.metrics.bind, metrics->port());
        spdlog::info("metrics: {}/metrics", base);
        if (view) spdlog::info("live view: {}/view", base);
    }
}

service_snapshot live_service::snapshot() const
{
    service_snapshot snap;
    auto ps = pipe->stats();
    snap.ring = ps.ring;
    snap.source_error = std::move(ps.source_error);
    snap.engine = std::move(ps);
    snap.have_pattern = cfg.monitor.pattern.has_value();
    const auto& sc = source->counters();
    snap.source = service_snapshot::source_values{source->describe(), sc.samples.load(), sc.packets.load(), sc.packets_lost.load(),
                                                  sc.samples_lost.load(), sc.malformed.load(), sc.refused.load(),
                                                  sc.reconnects.load(), sc.nonfinite.load()};
    snap.source_kind = source->kind_counters();
    if (udp) {
        service_snapshot::publisher_values pv;
        for (int k = 0; k < dsp::chain::max_streams; ++k) {
            pv.datagrams_sent[static_cast<std::size_t>(k)] = udp->counters(k).datagrams_sent.load();
            pv.send_errors[static_cast<std::size_t>(k)] = udp->counters(k).send_errors.load();
        }
        pv.packets_published = udp->packets_published();
        pv.soft = udp->any_llr_enabled();
        for (int p = 0; p < dsp::chain::num_paths; ++p) {
            const auto& c = udp->llr_counters(p);
            pv.llr_datagrams_sent += c.datagrams_sent.load();
            pv.llr_send_errors += c.send_errors.load();
            pv.llr_bytes_sent += c.bytes_sent.load();
        }
        pv.decoded = udp->any_decoded_enabled();
        for (int k = 0; k < dsp::chain::max_streams; ++k) {
            const auto& c = udp->decoded_counters(k);
            pv.decoded_datagrams_sent += c.datagrams_sent.load();
            pv.decoded_send_errors += c.send_errors.load();
            pv.decoded_bytes_sent += c.bytes_sent.load();
        }
        pv.best = udp->best_enabled();
        pv.best_datagrams_sent = udp->best_counters().datagrams_sent.load();
        pv.best_send_errors = udp->best_counters().send_errors.load();
        snap.publisher = pv;
    }
    if (records) snap.records = service_snapshot::records_values{records->rows(), records->rows_lost()};
    if (rec) snap.recording = service_snapshot::recording_values{rec->samples_recorded(), rec->samples_dropped()};
    return snap;
}

int live_service::finish(const std::filesystem::path& json_out)
{
    metrics.reset();
    view.reset();
    if (records) {
        try {
            records->close();
            spdlog::info("records: {} rows for {} packets in {}", records->rows(), records->packets(),
                         records->packets_path().string());
        } catch (const std::exception& e) {
            spdlog::error("{}", e.what());
        }
    }
    if (rec) {
        try {
            rec->close();
            spdlog::info("recording: {} samples in {} ({} dropped from the recording)", rec->samples_recorded(),
                         rec->meta_path().string(), rec->samples_dropped());
        } catch (const std::exception& e) {
            spdlog::error("{}", e.what());
        }
    }
    const auto s = snapshot();
    spdlog::info("final: {}", status_line(s, nullptr, 0.0));
    if (s.engine.first_packet_utc_ns != dsp::unknown_utc_ns) {
        spdlog::info("first packet at {} UTC", io::format_utc_ns(s.engine.first_packet_utc_ns));
    }
    for (const auto& line : final_log_lines(s)) spdlog::info("{}", line);
    if (records) {
        try {
            records->write_counters(to_json(s));
        } catch (const std::exception& e) {
            spdlog::error("records: {}", e.what());
        }
    }
    if (!json_out.empty()) {
        const auto j = to_json(s);
        std::ofstream f(json_out);
        f << j.dump(2) << "\n";
        if (!f) spdlog::error("cannot write {}", json_out.string());
    }
    return s.source_error ? 1 : 0;
}

/// Starts the pipeline and runs until it has finished: a status line per status interval,
/// the watchdog while every thread makes progress, SIGTERM/SIGINT as a clean stop (a second
/// one aborts), opt.duration_s.
void supervise(live_service& svc, const live_options& opt, service_notifier& notifier, const sigset_t& signals)
{
    svc.pipe->start();
    if (svc.view) svc.view->start();
    notifier.ready();
    const auto ping = notifier.watchdog_ping_interval();
    if (ping) spdlog::info("systemd watchdog: pinging every {:.1f} s", std::chrono::duration<double>(*ping).count());
    auto next_ping = std::chrono::steady_clock::now();
    // A worker stuck on one batch this long is hung (a full batch takes ~0.2 s on a GPU and
    // a few seconds on many CPU cores; allow 30 batch durations, at least 2 minutes).
    const auto worker_limit = std::chrono::seconds(static_cast<long>(
        std::max(120.0, 30.0 * static_cast<double>(svc.cfg.receiver.batch_samples) / svc.source->sample_rate_hz())));
    const auto t_start = std::chrono::steady_clock::now();
    const double interval = svc.cfg.monitor.status_interval_s;
    service_snapshot prev = svc.snapshot();
    int stop_requests = 0;
    auto next_status = t_start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                     std::chrono::duration<double>(interval));
    while (!svc.pipe->finished()) {
        const auto now = std::chrono::steady_clock::now();
        const auto wait = std::max(std::chrono::steady_clock::duration::zero(),
                                   std::min(next_status - now, std::chrono::steady_clock::duration(std::chrono::milliseconds(100))));
        const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(wait).count();
        timespec ts{static_cast<std::time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
        const int sig = sigtimedwait(&signals, nullptr, &ts);
        if (sig == SIGHUP) {
            spdlog::warn("SIGHUP: the configuration is not reloaded while running; restart the service to apply changes");
        }
        if (sig == SIGINT || sig == SIGTERM) {
            ++stop_requests;
            if (stop_requests == 1) {
                notifier.stopping();
                spdlog::info("{}: stopping; finishing and publishing what was received (again to abort)",
                             sig == SIGINT ? "SIGINT" : "SIGTERM");
                svc.pipe->request_stop();
            } else {
                spdlog::warn("second stop request: aborting; samples still in the ring are dropped and counted");
                svc.pipe->abort();
            }
        }
        if (opt.duration_s > 0 && stop_requests == 0 &&
            std::chrono::steady_clock::now() - t_start > std::chrono::duration<double>(opt.duration_s)) {
            spdlog::info("duration {:.1f} s reached: stopping", opt.duration_s);
            notifier.stopping();
            ++stop_requests;
            svc.pipe->request_stop();
        }
        if (ping && std::chrono::steady_clock::now() >= next_ping) {
            // No ping while a thread is stuck: systemd then restarts the service.
            if (svc.pipe->healthy(worker_limit)) {
                notifier.watchdog();
            } else {
                spdlog::error("a pipeline thread has made no progress: withholding the watchdog ping");
            }
            next_ping = std::chrono::steady_clock::now() + *ping;
        }
        if (std::chrono::steady_clock::now() >= next_status) {
            auto s = svc.snapshot();
            const auto line = runtime::status_line(s, &prev, interval);
            spdlog::info("{}", line);
            notifier.status(line);
            prev = std::move(s);
            next_status += std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                std::chrono::duration<double>(interval));
        }
    }
    // The source ended by itself (end of file, peer closed): tell the service manager too.
    if (stop_requests == 0) notifier.stopping();
    svc.pipe->join();
}

}  // namespace

int run_live(const live_options& opt)
{
    // Signals are taken synchronously by the main thread (sigtimedwait in supervise). Block
    // them before any thread exists (metrics server, recorder, sources, OpenMP workers of the
    // backends), so that every thread inherits the mask: a process-directed SIGTERM must not be
    // delivered to a thread that would take the default action and kill paqd.
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGINT);
    sigaddset(&signals, SIGTERM);
    sigaddset(&signals, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);

    service_notifier notifier;
    notifier.status("starting");
    live_service svc(opt.config);
    try {
        svc.build();
    } catch (const std::exception& e) {
        spdlog::error("cannot start: {}", e.what());
        notifier.status(std::string("cannot start: ") + e.what());
        return 1;
    }
    supervise(svc, opt, notifier, signals);
    return svc.finish(opt.json_out);
}

}  // namespace paq::daemon
