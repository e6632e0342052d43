#include "daemon/live.hpp"

#include "config/receiver_yaml.hpp"
#include "daemon/metrics_http.hpp"
#include "daemon/notify.hpp"
#include "io/file_source.hpp"
#include "io/net_source.hpp"
#include "io/udp_publisher.hpp"
#include "daemon/records.hpp"
#include "daemon/recorder.hpp"
#include "daemon/replay.hpp"
#include "daemon/sources.hpp"
#include "runtime/backend_factory.hpp"

#include <spdlog/spdlog.h>

#include <csignal>
#include <cstdio>
#include <ctime>
#include <fstream>

namespace paq::daemon {

namespace {

std::string si(double v)
{
    char buf[32];
    if (v >= 1e9) {
        std::snprintf(buf, sizeof buf, "%.2fG", v / 1e9);
    } else if (v >= 1e6) {
        std::snprintf(buf, sizeof buf, "%.2fM", v / 1e6);
    } else if (v >= 1e3) {
        std::snprintf(buf, sizeof buf, "%.1fk", v / 1e3);
    } else {
        std::snprintf(buf, sizeof buf, "%.0f", v);
    }
    return buf;
}

struct send_totals {
    std::uint64_t sent = 0, errors = 0;
};

/// Datagrams sent and refused over the six streams.
send_totals publisher_totals(const io::udp_publisher& udp)
{
    send_totals t;
    for (int k = 0; k < dsp::chain::num_paths; ++k) {
        t.sent += udp.counters(k).datagrams_sent;
        t.errors += udp.counters(k).send_errors;
    }
    return t;
}

}  // namespace

std::string status_line(const pipeline_stats& s, const pipeline_stats* prev, double interval_s, bool have_pattern)
{
    std::string line;
    const double rate = prev && interval_s > 0
                            ? static_cast<double>(s.samples_in - prev->samples_in) / interval_s
                            : 0.0;
    line += "in " + si(static_cast<double>(s.samples_in)) + " (" + si(rate) + "/s)";
    line += " drop " + std::to_string(s.ring.samples_dropped);
    line += " gaps " + std::to_string(s.gaps);
    if (s.stalled) line += " STALLED";
    line += " | batches " + std::to_string(s.batches_published);
    if (s.batches_lost) line += " (" + std::to_string(s.batches_lost) + " lost)";
    line += " pkts " + std::to_string(s.packets_last_batch) + "/batch " + std::to_string(s.tally.packets_found);
    line += " |";
    for (const auto& p : s.tally.paths) {
        char buf[48];
        if (have_pattern) {
            if (p.locked) {
                std::snprintf(buf, sizeof buf, " %s %.1e", p.name.c_str(), p.ber);
            } else {
                std::snprintf(buf, sizeof buf, " %s nolock", p.name.c_str());
            }
        } else {
            std::snprintf(buf, sizeof buf, " %s ~%.1e", p.name.c_str(), p.mean_bep_estimate);
        }
        line += buf;
    }
    char lat[64];
    std::snprintf(lat, sizeof lat, " | latency %.0f ms (max %.0f)", s.latency_last_ms, s.latency_max_ms);
    line += lat;
    return line;
}

nlohmann::json to_json(const pipeline_stats& s, bool have_pattern)
{
    nlohmann::json gaps = nlohmann::json::object();
    for (std::size_t r = 0; r < num_gap_reasons; ++r) {
        gaps[std::string(io::to_string(static_cast<io::gap_reason>(r)))] = s.gaps_by_reason[r];
    }
    nlohmann::json paths = nlohmann::json::array();
    for (const auto& p : s.tally.paths) {
        nlohmann::json j = {{"path", p.name}, {"packets", p.packets}, {"mean_bep_estimate", p.mean_bep_estimate}};
        if (have_pattern) {
            j["bits"] = p.bits_checked;
            j["bit_errors"] = p.bit_errors;
            j["ber"] = p.ber;
            j["locked"] = p.locked;
            j["resyncs"] = p.resyncs;
        }
        paths.push_back(j);
    }
    return {{"samples_in", s.samples_in},
            {"ring",
             {{"capacity", s.ring.capacity},
              {"high_water", s.ring.high_water},
              {"samples_dropped", s.ring.samples_dropped},
              {"overflows", s.ring.overflows},
              {"producer_waits", s.ring.producer_waits},
              {"gaps_coalesced", s.ring.gaps_coalesced}}},
            {"gaps", s.gaps},
            {"gaps_by_reason", gaps},
            {"samples_lost_in_gaps", s.samples_lost_in_gaps},
            {"short_segments", s.short_segments},
            {"samples_in_short_segments", s.samples_in_short_segments},
            {"stalls", s.stalls},
            {"batches_dispatched", s.batches_dispatched},
            {"batches_published", s.batches_published},
            {"batches_lost", s.batches_lost},
            {"samples_in_lost_batches", s.samples_in_lost_batches},
            {"backend_errors", s.backend_errors},
            {"batches_on_fallback", s.batches_on_fallback},
            {"packets_found", s.tally.packets_found},
            {"packets_truncated", s.tally.packets_truncated},
            {"packets_flagged", s.tally.packets_flagged},
            {"packets_missed_in_sequence", s.tally.packets_skipped},
            {"mean_cfo_hz", s.tally.mean_cfo_hz},
            {"mean_ebn0_db", s.tally.mean_ebn0_db},
            {"mean_clock_ppm", s.tally.mean_clock_ppm},
            {"packets_clock_corrected", s.tally.packets_clock_corrected},
            {"latency_ms", {{"last", s.latency_last_ms}, {"mean", s.latency_mean_ms}, {"max", s.latency_max_ms}}},
            {"paths", paths},
            {"source_error", s.source_error ? nlohmann::json(*s.source_error) : nlohmann::json(nullptr)}};
}

int run_live(const live_options& opt)
{
    const auto& cfg = opt.config;
    const bool have_pattern = cfg.monitor.pattern.has_value();

    // Signals are taken synchronously by the main thread (sigtimedwait below). Block them
    // before any thread exists (metrics server, recorder, sources, OpenMP workers of the
    // backends), so that every thread inherits the mask: a process-directed SIGTERM must
    // not be delivered to a thread that would take the default action and kill paqd.
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGINT);
    sigaddset(&signals, SIGTERM);
    sigaddset(&signals, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);

    std::unique_ptr<io::sample_source> source;
    std::unique_ptr<io::sample_ring> ring;
    std::unique_ptr<pipeline> pipe;
    std::unique_ptr<records_writer> records;
    std::unique_ptr<recorder> rec;
    std::unique_ptr<metrics_server> metrics;
    std::unique_ptr<io::udp_publisher> udp;
    service_notifier notifier;
    notifier.status("starting");
    const auto backend = runtime::resolve_backend(cfg.pipeline.backend);
    try {
        source = make_source(cfg.source);
        const double rate = source->sample_rate_hz();
        // The chain runs at 2 samples per bit of receiver.bit_rate_hz; any other input rate
        // the source delivers is resampled. A rate it cannot serve stops here, naming both.
        dsp::receiver_config rc = cfg.receiver;
        rc.input_sample_rate_hz = rate;
        // Front-end correction, auto: on for what comes from a radio's mixer, off for a file.
        if (rc.front_end_correction < 0) rc.front_end_correction = cfg.source.type == config::source_type::file ? 0 : 1;
        spdlog::info("front-end correction (DC, IQ imbalance): {}", rc.front_end_correction_on() ? "on" : "off");
        if (const auto errors = rc.validate(); !errors.empty()) {
            std::string msg = "the source's sample rate cannot be received:";
            for (const auto& e : errors) msg += "\n  " + e;
            throw std::invalid_argument(msg);
        }
        spdlog::info("rates: input {:.6g} MS/s, bit rate {:.6g} Mbit/s: {:.4g} samples per bit{}", rate / 1e6,
                     rc.bit_rate_hz / 1e6, rate / rc.bit_rate_hz, rc.input_ratio() != 1.0 ? ", resampled to 2" : "");
        if (!cfg.records.base.empty()) {
            records = std::make_unique<records_writer>(cfg.records, cfg.monitor.pattern, rate, 2.0 * rc.bit_rate_hz);
            spdlog::info("records: {} (one row per {} packet(s)), channel every {} packet(s)",
                         records->packets_path().string(), cfg.records.decimation, cfg.records.channel_decimation);
        }
        if (!cfg.recording.base.empty()) {
            rec = std::make_unique<recorder>(cfg.recording, rate, rc.bit_rate_hz, nlohmann::json(config::to_yaml(cfg)));
            spdlog::info("recording the received samples to {} ({})", rec->meta_path().string(),
                         io::to_sigmf_datatype(cfg.recording.format));
        }
        const auto capacity = static_cast<std::size_t>(cfg.ring.capacity_s * rate);
        const io::overflow_policy policy = overflow_for(cfg);
        ring = std::make_unique<io::sample_ring>(capacity, policy, runtime::make_ring_allocator(cfg.ring.lock_memory, backend));
        spdlog::info("source: {}", source->describe());
        if (const auto* f = dynamic_cast<const io::file_source*>(source.get()); f && f->trailing_bytes()) {
            spdlog::warn("truncated recording: {} trailing bytes after the last whole sample are ignored",
                         f->trailing_bytes());
        }
        spdlog::info("ring: {} samples ({:.2f} s, {} MiB), overflow policy {}, memory {}", capacity,
                     static_cast<double>(capacity) / rate, capacity * sizeof(cf32) >> 20, io::to_string(policy),
                     ring->memory_kind());
        auto workers = runtime::make_backends(backend, cfg.pipeline.gpus, cfg.pipeline.cpu_workers,
                                              runtime::parse_solver(cfg.pipeline.solver), rc);
        spdlog::info("workers: {} x {} backend", workers.size(), workers.front()->name());
        pipeline::backend_factory fallback;
        if (cfg.pipeline.cpu_fallback && backend == config::backend_kind::cuda) {
            fallback = [rc] { return runtime::make_backend({config::backend_kind::cpu}, rc); };
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
        }
        if (cfg.publisher.enabled) {
            udp = std::make_unique<io::udp_publisher>(cfg.publisher.udp);
            spdlog::info("publisher: {}", udp->describe());
        } else {
            spdlog::warn("publisher disabled: no bitstreams go out (publisher.enabled: false)");
        }
        auto publish = [&records, &udp](const dsp::batch_output& out) {
            if (udp) udp->publish(out);
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
            metrics = std::make_unique<metrics_server>(cfg.metrics, [&] {
                extra_metrics x;
                const auto& sc = source->counters();
                x.source_packets = sc.packets;
                x.source_packets_lost = sc.packets_lost;
                x.source_malformed = sc.malformed;
                x.source_reconnects = sc.reconnects;
                x.source_refused = sc.refused;
                if (const auto* v = dynamic_cast<const io::vita49_source*>(source.get())) {
                    const auto& vc = v->vita_counters();
                    x.vita49 = true;
                    x.vita49_context = vc.context_packets;
                    x.vita49_other_stream = vc.other_stream;
                    x.vita49_duplicates = vc.duplicates;
                    x.vita49_late = vc.late;
                    x.vita49_resyncs = vc.resyncs;
                    x.vita49_stream_changes = vc.stream_changes;
                    x.vita49_context_rate_mismatches = vc.context_rate_mismatches;
                    x.vita49_count_mismatches = vc.count_mismatches;
                }
                if (records) {
                    x.record_rows = records->rows();
                    x.record_rows_lost = records->rows_lost();
                }
                if (udp) {
                    const auto t = publisher_totals(*udp);
                    x.datagrams_sent = t.sent;
                    x.send_errors = t.errors;
                }
                if (rec) {
                    x.recorded_samples = rec->samples_recorded();
                    x.recording_dropped_samples = rec->samples_dropped();
                }
                return render_prometheus(pipe->stats(), x, have_pattern);
            });
            spdlog::info("metrics: http://{}:{}/metrics", cfg.metrics.bind, metrics->port());
        }
    } catch (const std::exception& e) {
        spdlog::error("cannot start: {}", e.what());
        notifier.status(std::string("cannot start: ") + e.what());
        return 1;
    }


    pipe->start();
    notifier.ready();
    const auto ping = notifier.watchdog_ping_interval();
    if (ping) spdlog::info("systemd watchdog: pinging every {:.1f} s", std::chrono::duration<double>(*ping).count());
    auto next_ping = std::chrono::steady_clock::now();
    // A worker stuck on one batch this long is hung (a full batch takes ~0.2 s on a GPU and
    // a few seconds on many CPU cores; allow 30 batch durations, at least 2 minutes).
    const auto worker_limit = std::chrono::seconds(static_cast<long>(
        std::max(120.0, 30.0 * static_cast<double>(cfg.receiver.batch_samples) / source->sample_rate_hz())));
    const auto t_start = std::chrono::steady_clock::now();
    const double interval = cfg.monitor.status_interval_s;
    pipeline_stats prev = pipe->stats();
    int stop_requests = 0;
    auto next_status = t_start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                     std::chrono::duration<double>(interval));
    while (!pipe->finished()) {
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
                pipe->request_stop();
            } else {
                spdlog::warn("second stop request: aborting; samples still in the ring are dropped and counted");
                pipe->abort();
            }
        }
        if (opt.duration_s > 0 && stop_requests == 0 &&
            std::chrono::steady_clock::now() - t_start > std::chrono::duration<double>(opt.duration_s)) {
            spdlog::info("duration {:.1f} s reached: stopping", opt.duration_s);
            notifier.stopping();
            ++stop_requests;
            pipe->request_stop();
        }
        if (ping && std::chrono::steady_clock::now() >= next_ping) {
            // No ping while a thread is stuck: systemd then restarts the service.
            if (pipe->healthy(worker_limit)) {
                notifier.watchdog();
            } else {
                spdlog::error("a pipeline thread has made no progress: withholding the watchdog ping");
            }
            next_ping = std::chrono::steady_clock::now() + *ping;
        }
        if (std::chrono::steady_clock::now() >= next_status) {
            const auto s = pipe->stats();
            const auto line = status_line(s, &prev, interval, have_pattern);
            spdlog::info("{}", line);
            notifier.status(line);
            prev = s;
            next_status += std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                std::chrono::duration<double>(interval));
        }
    }
    // The source ended by itself (end of file, peer closed): tell the service manager too.
    if (stop_requests == 0) notifier.stopping();
    pipe->join();
    const auto s = pipe->stats();
    if (udp) {
        const auto t = publisher_totals(*udp);
        spdlog::info("publisher: {} datagrams sent, {} send errors, {} packets published", t.sent, t.errors,
                     udp->packets_published());
    }
    spdlog::info("final: {}", status_line(s, nullptr, 0.0, have_pattern));
    for (std::size_t r = 0; r < num_gap_reasons; ++r) {
        if (s.gaps_by_reason[r]) spdlog::info("gaps ({}): {}", io::to_string(static_cast<io::gap_reason>(r)), s.gaps_by_reason[r]);
    }
    spdlog::info("samples in {}, dropped by the ring {}, lost in gaps {} (counted), in lost batches {}, in segments "
                 "shorter than a packet {}; "
                 "packets {} (truncated {}, missed in sequence {}); batches {} published, {} lost, {} on fallback",
                 s.samples_in, s.ring.samples_dropped, s.samples_lost_in_gaps, s.samples_in_lost_batches,
                 s.samples_in_short_segments,
                 s.tally.packets_found, s.tally.packets_truncated, s.tally.packets_skipped, s.batches_published,
                 s.batches_lost, s.batches_on_fallback);
    metrics.reset();
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
    const auto& sc = source->counters();
    spdlog::info("source: {} samples, {} datagrams/blocks, {} lost ({} samples), {} malformed, {} refused (allow-list), "
                 "{} reconnects, {} non-finite",
                 sc.samples.load(), sc.packets.load(), sc.packets_lost.load(), sc.samples_lost.load(),
                 sc.malformed.load(), sc.refused.load(), sc.reconnects.load(), sc.nonfinite.load());
    const auto* vita = dynamic_cast<const io::vita49_source*>(source.get());
    if (vita) {
        const auto& vc = vita->vita_counters();
        spdlog::info("vita49: {} context packets skipped, {} of another stream, {} stream changes followed, "
                     "{} duplicates, {} late, {} resyncs, {} context packets with another sample rate, {} packets ({} "
                     "samples) before the sample rate was known, {} packet counts that disagree with the timestamps",
                     vc.context_packets.load(), vc.other_stream.load(), vc.stream_changes.load(), vc.duplicates.load(),
                     vc.late.load(), vc.resyncs.load(), vc.context_rate_mismatches.load(), vc.packets_before_rate.load(),
                     vc.samples_before_rate.load(), vc.count_mismatches.load());
    }
    if (!opt.json_out.empty()) {
        auto j = to_json(s, have_pattern);
        j["source"] = {{"description", source->describe()},
                       {"samples", sc.samples.load()},
                       {"packets", sc.packets.load()},
                       {"packets_lost", sc.packets_lost.load()},
                       {"samples_lost", sc.samples_lost.load()},
                       {"malformed", sc.malformed.load()},
                       {"refused", sc.refused.load()},
                       {"reconnects", sc.reconnects.load()},
                       {"nonfinite", sc.nonfinite.load()}};
        if (vita) {
            const auto& vc = vita->vita_counters();
            j["source"]["vita49"] = {{"context_packets", vc.context_packets.load()},
                                     {"other_stream", vc.other_stream.load()},
                                     {"stream_changes", vc.stream_changes.load()},
                                     {"duplicates", vc.duplicates.load()},
                                     {"late", vc.late.load()},
                                     {"resyncs", vc.resyncs.load()},
                                     {"context_rate_mismatches", vc.context_rate_mismatches.load()},
                                     {"context_sample_rate_hz", vc.context_sample_rate_hz.load()},
                                     {"packets_before_rate", vc.packets_before_rate.load()},
                                     {"samples_before_rate", vc.samples_before_rate.load()},
                                     {"count_mismatches", vc.count_mismatches.load()}};
        }
        if (udp) {
            nlohmann::json streams = nlohmann::json::array();
            for (int k = 0; k < dsp::chain::num_paths; ++k) {
                streams.push_back({{"path", dsp::path_name(k)},
                                   {"datagrams_sent", udp->counters(k).datagrams_sent.load()},
                                   {"send_errors", udp->counters(k).send_errors.load()}});
            }
            j["publisher"] = streams;
        }
        if (records) {
            j["record_rows"] = records->rows();
            j["record_rows_lost"] = records->rows_lost();
        }
        if (rec) {
            j["recorded_samples"] = rec->samples_recorded();
            j["recording_dropped_samples"] = rec->samples_dropped();
        }
        std::ofstream f(opt.json_out);
        f << j.dump(2) << "\n";
        if (!f) spdlog::error("cannot write {}", opt.json_out.string());
    }
    return s.source_error ? 1 : 0;
}

}  // namespace paq::daemon
