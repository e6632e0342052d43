#include "daemon/replay.hpp"

#include "config/receiver_yaml.hpp"
#include "daemon/llr_writer.hpp"
#include "io/sample_file.hpp"
#include "io/utc_time.hpp"
#include "runtime/counters.hpp"
#include "runtime/receiver_run.hpp"
#include "runtime/worker_pool.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <future>
#include <iomanip>
#include <memory>
#include <sstream>
#include <thread>

#include <spdlog/spdlog.h>

#include <unistd.h>

namespace paq::daemon {

namespace {

/// Seconds since this process started: its start time in /proc/self/stat (clock ticks since
/// boot, field 22) against the boot-time clock; 0 where either cannot be read.
double seconds_since_process_start()
{
    std::ifstream in("/proc/self/stat");
    std::string stat;
    if (!std::getline(in, stat)) return 0.0;
    // The command name (field 2) is in parentheses and may hold spaces: the fields after it
    // start at the last ')'.
    const auto close = stat.rfind(')');
    if (close == std::string::npos) return 0.0;
    std::istringstream fields(stat.substr(close + 1));
    std::string field;
    for (int i = 3; i <= 22; ++i) {
        if (!(fields >> field)) return 0.0;
    }
    const long ticks = sysconf(_SC_CLK_TCK);
    timespec now{};
    if (ticks <= 0 || clock_gettime(CLOCK_BOOTTIME, &now) != 0) return 0.0;
    try {
        const double start = static_cast<double>(std::stoull(field)) / static_cast<double>(ticks);
        const double since = static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9 - start;
        return since > 0.0 ? since : 0.0;
    } catch (const std::exception&) {
        return 0.0;
    }
}

}  // namespace

replay_result run_replay(const replay_options& opt)
{
    // The CUDA module and the CUDA libraries load before the replay starts reading or timing
    // (as the dynamic loader loaded them before main when paqd linked them): loaded while the
    // first windows are read, they compete with the reads for the disk and memory. What the
    // load costs shows in the summary's time since paqd started (program_s).
    // `auto` with GPUs named (--gpus) is cuda: they are insisted on.
    const auto requested = opt.backend == config::backend_kind::automatic && !opt.gpus.empty() ? config::backend_kind::cuda : opt.backend;
    // Only where the NVIDIA driver is there to use them (else make_backend says what is missing).
    if (requested != config::backend_kind::cpu && runtime::cuda_driver_present()) (void)runtime::cuda_backend_available();
    const auto t_start = std::chrono::steady_clock::now();
    auto since_start = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count(); };
    // The options that do not fit the recording (its channel, a raw file's rate or channels) are
    // a usage error, as a bad option is; a bad file is not.
    auto reader = [&] {
        try {
            return io::sample_file_reader::open(opt.file, opt.raw_format, opt.raw_sample_rate_hz, io::default_ci16_scale,
                                                opt.channel, opt.raw_channels);
        } catch (const std::invalid_argument& e) {
            throw config::config_error({e.what()});
        }
    }();
    const auto& info = reader.info();
    replay_result res;
    res.file = opt.file.string();
    res.sample_rate_hz = info.sample_rate_hz;
    res.channel = info.channel;
    res.channels = info.num_channels;
    if (opt.second_channel && (*opt.second_channel < 1 || *opt.second_channel > info.num_channels)) {
        throw config::config_error({opt.file.string() + ": --channel " + std::to_string(*opt.second_channel) + ": the recording has " +
                                    std::to_string(info.num_channels) + " channel(s)"});
    }
    if (opt.each_channel && !opt.second_channel) {
        throw config::config_error({"--each-channel: name two channels to combine (--channel N --channel M)"});
    }
    if (opt.second_channel && opt.backend == config::backend_kind::cuda && opt.receiver.combining == dsp::combining_kind::select) {
        throw config::config_error({"--backend cuda: two receive channels received by selection (--combining select) run on the cpu "
                                    "backend only (--backend cpu, or auto; --combining joint runs on both)"});
    }
    if (opt.second_channel && *opt.second_channel == info.channel) {
        throw config::config_error({"--channel " + std::to_string(info.channel) + " twice: name two channels to combine"});
    }
    res.second_channel = opt.second_channel.value_or(0);
    res.trailing_bytes = info.trailing_bytes;
    if (info.trailing_bytes) {
        res.warnings.push_back("truncated file: " + std::to_string(info.trailing_bytes) +
                               " trailing bytes after the last whole sample ignored");
    }
    // The rates: the input's from the recording, the bit rate from --bit-rate, else the
    // recording's paq:bit_rate_hz, else the config. A rate the chain cannot serve is an error
    // here, naming both rates (dsp::receiver_config::validate), never a silent "no packets".
    dsp::receiver_config rc = opt.receiver;
    res.bit_rate_from = "receiver.bit_rate_hz";
    if (opt.bit_rate_hz) {
        rc.bit_rate_hz = *opt.bit_rate_hz;
        res.bit_rate_from = "--bit-rate";
    } else if (const auto& g = info.meta.extra_global; g.is_object() && g.contains("paq:bit_rate_hz") &&
                                                        g["paq:bit_rate_hz"].is_number()) {
        rc.bit_rate_hz = g["paq:bit_rate_hz"].get<double>();
        res.bit_rate_from = "paq:bit_rate_hz";
    }
    // The code: --fec, else the recording's paq:fec, else the config.
    res.fec_from = "receiver.fec";
    if (opt.fec) {
        rc.fec = *opt.fec;
        res.fec_from = "--fec";
    } else if (const auto& g = info.meta.extra_global; g.is_object() && g.contains("paq:fec") && g["paq:fec"].is_string()) {
        const auto name = g["paq:fec"].get<std::string>();
        const auto code = value_named(dsp::fec_names, name);
        if (!code) {
            throw config::config_error({opt.file.string() + ": its paq:fec '" + name + "' is not a code paqd decodes (" +
                                        names_text(dsp::fec_names) + "); give --fec"});
        }
        rc.fec = *code;
        res.fec_from = "paq:fec";
    }
    rc.input_sample_rate_hz = info.sample_rate_hz;
    // Two --channel options combine two channels (receiver_config::channels 2); a receiver
    // set for two needs them named.
    if (opt.second_channel) {
        rc.channels = 2;
    } else if (rc.channels != 1) {
        throw config::config_error({"the receiver is set for " + std::to_string(rc.channels) +
                                    " receive channels: name the two channels of the recording to combine (--channel N --channel M)"});
    }
    if (const auto errors = rc.validate(); !errors.empty()) {
        std::string msg = opt.file.string() + ": cannot receive it:";
        for (const auto& e : errors) msg += "\n  " + e;
        msg += "\n  (bit rate from " + res.bit_rate_from + ")";
        throw config::config_error({msg});
    }
    // The PN pattern: --pattern, else the recording's paq:pattern, else pn15. A recording that
    // names a pattern paqd does not count is said so, not counted against pn15 in silence.
    dsp::pn_pattern pattern = dsp::pn_pattern::pn15;
    res.pattern_from = "default";
    if (opt.pattern) {
        pattern = *opt.pattern;
        res.pattern_from = "--pattern";
    } else if (const auto& g = info.meta.extra_global; g.is_object() && g.contains("paq:pattern") && g["paq:pattern"].is_string()) {
        const auto name = g["paq:pattern"].get<std::string>();
        try {
            pattern = dsp::parse_pn_pattern(name);
            res.pattern_from = "paq:pattern";
        } catch (const std::invalid_argument&) {
            res.warnings.push_back("the recording's paq:pattern '" + name +
                                   "' is not a pattern paqd counts (pn9, pn11, pn15, pn20, pn23, pn31): counted against pn15; "
                                   "give --pattern");
        }
    }
    res.pattern = std::string(dsp::to_string(pattern));
    res.bit_rate_hz = rc.bit_rate_hz;
    res.resampled = rc.input_ratio() != 1.0;
    std::unique_ptr<records_writer> records;
    if (!opt.records.base.empty()) records = std::make_unique<records_writer>(opt.records, pattern, info.sample_rate_hz, 2.0 * rc.bit_rate_hz, rc.streams(),
                                                                            dsp::framing_for(rc.fec), rc.channels,
                                                                            std::array{info.channel, opt.second_channel.value_or(0)});
    std::unique_ptr<llr_writer> llrs;
    if (!opt.llr_base.empty()) llrs = std::make_unique<llr_writer>(opt.llr_base, rc.detector);
    // The backends are made on a thread of their own (a CUDA context, plans and buffers take
    // most of a second) while the run reads the first windows. One worker per GPU; the CPU
    // backend is one worker using receiver.cpu_threads threads. `auto` is resolved there too
    // (listing the devices starts the driver), and where it chose a GPU whose backend cannot
    // be made (its memory taken, say) and no --gpus was given, the replay runs on the CPU,
    // saying why. The maker is joined before the pool is destroyed (declared after it).
    std::unique_ptr<runtime::worker_pool> pool;
    std::promise<runtime::worker_pool*> made;
    const runtime::pool_future pool_ready = made.get_future().share();
    std::jthread maker([&] {
        try {
            const double t_backend = since_start();
            const auto kind = runtime::resolve_backend(requested, rc);
            std::vector<std::unique_ptr<dsp::batch_processor>> backends;
            try {
                backends = runtime::make_backends(kind, opt.gpus, 1, opt.solver, rc);
            } catch (const std::runtime_error& e) {
                if (requested != config::backend_kind::automatic || kind != config::backend_kind::cuda) throw;
                spdlog::warn("the cuda backend could not be made ({}); using the cpu backend (--backend cuda to insist)", e.what());
                backends = runtime::make_backends(config::backend_kind::cpu, {}, 1, opt.solver, rc);
            }
            if (llrs) {
                for (auto& b : backends) b->set_soft_output(true);
            }
            if (opt.stage_timing) {
                for (auto& b : backends) b->set_stage_timing(true);
            }
            pool = std::make_unique<runtime::worker_pool>(std::move(backends), runtime::worker_pool::backend_factory{}, 2);
            res.backend_s = since_start() - t_backend;
            res.setup_s = since_start();
            made.set_value(pool.get());
        } catch (...) {
            made.set_exception(std::current_exception());
        }
    });
    auto on_batch = [&](const dsp::batch_output& out) {
        if (records) records->add(out);
        if (llrs) llrs->add(out);
    };
    // The recording's gaps (paq:gaps, capture boundaries) and absolute time (each capture's
    // core:datetime); raw files have neither.
    const auto marks = io::recording_marks(info.meta, res.warnings);
    res.has_time = std::any_of(marks.begin(), marks.end(), [](const io::recording_mark& m) { return m.what == io::recording_mark::kind::time; });
    // A ci16 recording stays ci16 up to the backend (half the bytes through the windows and
    // the upload; the backend converts); a cf32 one is read as it is.
    res.input_width = info.format == io::sample_format::ci16_le ? "ci16" : "cf32";
    res.detector = std::string(dsp::to_string(rc.detector));
    res.combining = std::string(dsp::to_string(rc.combining));
    res.fec = rc.fec;
    if (opt.second_channel) {
        res.input_width = "cf32 x 2";
        res.engine = runtime::run_receiver_x2(pool_ready, rc, pattern, info.sample_rate_hz,
                                              [&](std::span<cf32x2> out) { return reader.read(out, *opt.second_channel); }, on_batch,
                                              marks);
    } else if (info.format == io::sample_format::ci16_le) {
        res.engine = runtime::run_receiver_ci16(pool_ready, rc, pattern, info.sample_rate_hz, info.meta.ci16_scale,
                                                 [&](std::span<ci16> out) { return reader.read(out); }, on_batch, marks);
    } else {
        res.engine = runtime::run_receiver(pool_ready, rc, pattern, info.sample_rate_hz,
                                            [&](std::span<cf32> out) { return reader.read(out); }, on_batch, marks);
    }
    maker.join();
    res.first_packet_utc_ns = res.engine.first_packet_utc_ns;  // the engine's: the first packet with a known time
    res.backend = pool->names().front();
    res.workers = pool->workers();
    if (opt.stage_timing) {
        res.stages = pool->stats().stages;
        res.stages_first = pool->stats().stages_first;
    }
    if (records) {
        records->close();
        res.records_on = true;
        res.record_rows = records->rows();
        res.record_rows_lost = records->rows_lost();
    }
    if (llrs) {
        llrs->close();
        for (const auto& f : llrs->paths()) res.llr_files.push_back(f.string());
        res.llr_packets = llrs->packets();
    }
    res.elapsed_s = since_start();
    res.program_s = seconds_since_process_start();
    const double duration_s = static_cast<double>(res.engine.tally.samples) / info.sample_rate_hz;
    res.realtime_factor = res.elapsed_s > 0.0 ? duration_s / res.elapsed_s : 0.0;
    // --each-channel: each channel alone, over the same recording and settings, for the table's
    // side-by-side comparison (runs of their own after this one's timing; with --records BASE
    // their records go to BASE-chN, which paq-report sets beside the combined run's; no LLRs).
    if (opt.each_channel) {
        for (const int ch : {info.channel, *opt.second_channel}) {
            replay_options alone = opt;
            alone.channel = ch;
            alone.second_channel.reset();
            alone.each_channel = false;
            if (!alone.records.base.empty()) alone.records.base += "-ch" + std::to_string(ch);
            alone.llr_base.clear();
            res.each_channel.push_back({ch, run_replay(alone).engine.tally});
        }
    }
    const auto& s = res.engine.tally;
    if (s.nonfinite_samples) {
        res.warnings.push_back(std::to_string(s.nonfinite_samples) +
                               " non-finite (NaN/Inf) samples replaced by zeros; their packets are flagged");
    }
    if (s.packets_truncated) {
        res.warnings.push_back(std::to_string(s.packets_truncated) +
                               " packet(s) cut by the start or end of the recording were not processed");
    }
    if (s.packets_found == 0) res.warnings.push_back("no packets found");
    // Packets found but no path locked to the pattern: no bit was counted, so there is no BER
    // (the table prints none, the JSON null), whatever the paths' error counts read.
    if (s.packets_found > 0 && std::none_of(s.paths.begin(), s.paths.end(), [](const dsp::path_summary& p) { return p.locked; })) {
        res.warnings.push_back("no path locked to the " + res.pattern + " pattern (from " + res.pattern_from +
                               "): no bit was checked; is the data another pattern (--pattern pn9 .. pn31)?");
    }
    // The run's counters beside its records, for paq-report (an error here loses no record).
    if (records) {
        try {
            records->write_counters(to_json(res));
        } catch (const std::exception& e) {
            res.warnings.push_back(std::string("records: ") + e.what());
        }
    }
    return res;
}

void print_table(const replay_result& r, std::ostream& os)
{
    const auto& s = r.engine.tally;
    os << "paqd replay: " << r.file << " (" << r.backend << " backend";
    if (r.workers > 1) os << ", " << r.workers << " workers";
    if (!r.input_width.empty()) os << ", " << r.input_width << " input";
    if (r.detector != "sxs") os << ", " << r.detector << " detector";
    if (r.second_channel > 0) {
        os << ", channels " << r.channel << " and " << r.second_channel << " of " << r.channels
           << (r.combining == "select" ? ", the better per packet (select)" : " combined");
    } else if (r.channels > 1) {
        os << ", channel " << r.channel << " of " << r.channels;
    }
    os << ")\n";
    os << "  samples " << s.samples << " (" << std::fixed << std::setprecision(3)
       << static_cast<double>(s.samples) / r.sample_rate_hz << " s), batches " << s.batches << ", packets found "
       << s.packets_found << ", flagged " << s.packets_flagged << ", truncated " << s.packets_truncated
       << ", missed in sequence " << s.packets_skipped << "\n";
    os << "  pattern " << r.pattern << " (from " << r.pattern_from << ")\n";
    os << "  rates: input " << std::setprecision(6) << r.sample_rate_hz / 1e6 << " MS/s, bit rate " << r.bit_rate_hz / 1e6
       << " Mbit/s (from " << r.bit_rate_from << "), " << std::setprecision(4) << r.sample_rate_hz / r.bit_rate_hz
       << " samples per bit" << (r.resampled ? ", resampled to 2" : "") << "\n";
    if (r.first_packet_utc_ns != dsp::unknown_utc_ns) os << "  first packet at " << io::format_utc_ns(r.first_packet_utc_ns) << " UTC\n";
    os << "  mean CFO " << std::setprecision(1) << s.mean_cfo_hz << " Hz, estimated Eb/N0 " << std::setprecision(2)
       << s.mean_ebn0_db << " dB, clock " << std::setprecision(1) << s.mean_clock_ppm << " ppm (" << s.packets_clock_corrected
       << " packets re-timed)\n";
    if (s.packets_phase_smoothed) {
        os << "  phase noise: " << s.packets_phase_smoothed << " packets detected by the phase smoother (their PLL phase wandered)\n";
    }
    if (s.packets_unequalized_phase) {
        os << "  phase noise: " << s.packets_unequalized_phase
           << " packets derotated by the unequalized path's phase before the equalizers (every equalized path made again)\n";
    }
    if (s.packets_front_end_estimated) {
        os << "  front end (estimated on " << s.packets_front_end_estimated << " packets, corrected on "
           << s.packets_front_end_corrected << "): IQ " << std::setprecision(2)
           << s.mean_iq_gain_db << " dB / " << s.mean_iq_phase_deg << " deg, DC " << std::setprecision(1) << s.mean_dc_dbc
           << " dBc\n";
    }
    const auto fec = dsp::framing_for(r.fec);
    if (fec) {
        if (fec->continuous()) {
            os << "  fec " << dsp::to_string(r.fec) << " (from " << r.fec_from << "): the continuous stream, codewords of " << fec->n
               << " bits behind " << fec->marker_bits << "-bit sync markers, " << fec->k
               << " information bits each; bits and errors count the decoded information bits\n";
        } else {
            os << "  fec " << dsp::to_string(r.fec) << " (from " << r.fec_from << "): " << fec->codewords << " codeword"
               << (fec->codewords > 1 ? "s" : "") << " of " << fec->n << " bits per packet, " << fec->info_bits()
               << " information bits; bits and errors count the decoded information bits\n";
        }
    }
    os << "\n";
    // The name column as wide as the longest stream name (mmse_trellis with detector both).
    int name_w = 5;
    for (const auto& p : s.paths) name_w = std::max(name_w, static_cast<int>(p.name.size()));
    char head[160];
    std::snprintf(head, sizeof head, "  %-*s %8s %11s %9s %11s   sync\n", name_w, "path", "packets", "bits", "errors", "BER");
    if (fec) {
        std::snprintf(head, sizeof head, "  %-*s %8s %11s %9s %11s %9s %7s %10s %6s %11s   sync\n", name_w, "path", "packets", "bits",
                      "errors", "BER", "codewords", "failed", "FER", "iter", "channel BER");
    }
    os << head;
    for (const auto& p : s.paths) {
        char line[256], ber[32];
        if (p.bits_checked > 0) {
            std::snprintf(ber, sizeof ber, "%11.3e", p.ber);
        } else {
            std::snprintf(ber, sizeof ber, "%11s", "-");  // no bit checked: no rate
        }
        const char* sync = p.locked ? (p.resyncs ? "locked (resynced)" : "locked") : "NO LOCK";
        if (fec) {
            char fer[32], channel[32];
            const auto& f = p.fec;
            if (f.codewords > 0) {
                std::snprintf(fer, sizeof fer, "%10.3e", f.fer());
            } else {
                std::snprintf(fer, sizeof fer, "%10s", "-");
            }
            if (f.channel_bits > 0) {
                std::snprintf(channel, sizeof channel, "%11.3e", f.channel_ber());
            } else {
                std::snprintf(channel, sizeof channel, "%11s", "-");
            }
            std::snprintf(line, sizeof line, "  %-*s %8llu %11llu %9llu %s %9llu %7llu %s %6.2f %s   %s\n", name_w, p.name.c_str(),
                          static_cast<unsigned long long>(p.packets), static_cast<unsigned long long>(p.bits_checked),
                          static_cast<unsigned long long>(p.bit_errors), ber, static_cast<unsigned long long>(f.codewords),
                          static_cast<unsigned long long>(f.codewords_failed), fer, f.mean_iterations(), channel, sync);
        } else {
            std::snprintf(line, sizeof line, "  %-*s %8llu %11llu %9llu %s   %s\n", name_w, p.name.c_str(),
                          static_cast<unsigned long long>(p.packets), static_cast<unsigned long long>(p.bits_checked),
                          static_cast<unsigned long long>(p.bit_errors), ber, sync);
        }
        os << line;
    }
    if (!r.llr_files.empty()) {
        os << "\n  LLRs of " << r.llr_packets << " packets (" << llr_record_bytes << " bytes each) in " << r.llr_files.front()
           << " .. " << r.llr_files.back() << "\n";
    }
    const auto& t = s.timing;
    // Slower than real time (the CPU backend), two decimals: 0.03x, not 0.0x.
    os << "\n  took " << std::setprecision(2) << r.elapsed_s << " s = " << std::setprecision(r.realtime_factor < 1.0 ? 2 : 1)
       << r.realtime_factor
       << "x real time (";
    if (r.program_s > 0.0) os << std::setprecision(2) << r.program_s << " s since paqd started; ";
    os << "setup " << std::setprecision(2) << r.setup_s << " s, of it the backend " << r.backend_s
       << " s, read meanwhile: the reader waited " << t.pool_wait_s << " s; busy: read " << t.read_s << " s, batch "
       << t.batch_s << " s, " << r.backend << " " << t.process_s << " s, tally " << t.tally_s << " s)\n";
    if (r.stages && r.stages_first && r.stages_first->batches > 0) {
        // Means per batch: the device's stages (summed over each window's parts, which
        // overlap), its span, and the host's side of the same calls; the batches after each
        // worker's first (comparable with a benchmark's warmed-up batch), then the first.
        const auto line = [&](const dsp::stage_times& st) {
            const double n = static_cast<double>(st.batches);
            os << "device span " << std::setprecision(3) << st.device_span_ms / n << "; process() " << st.host_total_ms / n
               << ", of it queueing " << st.host_queued_ms / n << " and the last part's collection " << st.host_last_collect_ms / n;
        };
        const auto stages = [&](const dsp::stage_times& st) {
            os << "\n   ";
            for (const auto& [name, ms] : st.stage_ms) {
                if (ms > 0.0) os << " " << name << " " << ms / static_cast<double>(st.batches);
            }
            os << "\n";
        };
        const auto& st = *r.stages;
        if (st.batches > 0) {
            os << "  stages (" << r.backend << " backend, mean of the " << st.batches << " batches after the first, ms): ";
            line(st);
            os << "; the longest: device span " << st.device_span_max_ms << ", process() " << st.host_total_max_ms;
            stages(st);
        }
        const auto& first = *r.stages_first;
        os << "  the first batch" << (first.batches > 1 ? " of each worker (mean)" : "") << ", ms: ";
        line(first);
        stages(first);
    }
    if (r.each_channel.size() == 2) {
        // BER side by side: the combined paths, each channel alone, and the combined gain over
        // the better channel (its BER over the combined).
        os << "\n  each channel alone (--each-channel):\n";
        char head2[160];
        std::snprintf(head2, sizeof head2, "  %-*s %11s %11s %11s %10s\n", name_w, "path", "combined", ("channel " + std::to_string(r.each_channel[0].channel)).c_str(),
                      ("channel " + std::to_string(r.each_channel[1].channel)).c_str(), "gain");
        os << head2;
        auto ber_text = [](const dsp::path_summary& p) {
            char b[32];
            if (p.bits_checked > 0) {
                std::snprintf(b, sizeof b, "%11.3e", p.ber);
            } else {
                std::snprintf(b, sizeof b, "%11s", "-");
            }
            return std::string(b);
        };
        for (std::size_t i = 0; i < s.paths.size(); ++i) {
            const auto& c = s.paths[i];
            const auto& a = r.each_channel[0].tally.paths[i];
            const auto& b = r.each_channel[1].tally.paths[i];
            char gain[32];
            const double better = std::min(a.bits_checked ? a.ber : INFINITY, b.bits_checked ? b.ber : INFINITY);
            if (c.bits_checked > 0 && c.ber > 0.0 && std::isfinite(better)) {
                std::snprintf(gain, sizeof gain, "%9.2fx", better / c.ber);
            } else {
                std::snprintf(gain, sizeof gain, "%10s", "-");
            }
            char line[200];
            std::snprintf(line, sizeof line, "  %-*s %s %s %s %s\n", name_w, c.name.c_str(), ber_text(c).c_str(), ber_text(a).c_str(),
                          ber_text(b).c_str(), gain);
            os << line;
        }
    }
    for (const auto& w : r.warnings) os << "  warning: " << w << "\n";
}

nlohmann::json to_json(const replay_result& r)
{
    // The counters under the live service's names (the registry: samples_in, batches_published,
    // packets_found, paths[] ...), then what only a replay has.
    runtime::service_snapshot snap;
    snap.engine = r.engine;
    if (r.records_on) snap.records = runtime::service_snapshot::records_values{r.record_rows, r.record_rows_lost};
    nlohmann::json j = runtime::to_json(snap);
    const auto& s = r.engine.tally;
    const nlohmann::json own = {{"file", r.file},
                                {"backend", r.backend},
                                {"workers", r.workers},
                                {"detector", r.detector},
                                {"fec", dsp::to_string(r.fec)},
                                {"fec_from", r.fec_from},
                                {"sample_rate_hz", r.sample_rate_hz},
                                {"channel", r.channel},
                                {"channels", r.channels},
                                {"combined_channel", r.second_channel > 0 ? nlohmann::json(r.second_channel) : nlohmann::json(nullptr)},
                                {"combining", r.second_channel > 0 ? nlohmann::json(r.combining) : nlohmann::json(nullptr)},
                                {"bit_rate_hz", r.bit_rate_hz},
                                {"bit_rate_from", r.bit_rate_from},
                                {"pattern", r.pattern},
                                {"pattern_from", r.pattern_from},
                                {"samples_per_bit", r.sample_rate_hz / r.bit_rate_hz},
                                {"resampled", r.resampled},
                                {"mean_iq_gain_db", s.mean_iq_gain_db},
                                {"mean_iq_phase_deg", s.mean_iq_phase_deg},
                                {"mean_dc_dbc", s.mean_dc_dbc},
                                {"nonfinite_samples", s.nonfinite_samples},
                                {"trailing_bytes", r.trailing_bytes},
                                {"time_source", r.has_time ? "sigmf-datetime" : "none"},
                                {"mean_cfo_rad_per_sample", s.mean_cfo_rad_per_sample},
                                {"max_zf_condition", s.max_zf_condition},
                                {"llr_files", r.llr_files},
                                {"llr_packets", r.llr_packets},
                                {"llr_steps_per_nat", dsp::llr_steps_per_nat},
                                {"elapsed_s", r.elapsed_s},
                                {"realtime_factor", r.realtime_factor},
                                {"timing",
                                 {{"setup_s", r.setup_s},
                                  {"program_s", r.program_s},
                                  {"backend_s", r.backend_s},
                                  {"windows", s.timing.windows},
                                  {"windows_locked", s.timing.windows_locked},
                                  {"run_s", s.timing.elapsed_s},
                                  {"read_s", s.timing.read_s},
                                  {"batch_s", s.timing.batch_s},
                                  {"process_s", s.timing.process_s},
                                  {"tally_s", s.timing.tally_s},
                                  {"lock_s", s.timing.lock_s},
                                  {"submit_wait_s", s.timing.submit_wait_s},
                                  {"pool_wait_s", s.timing.pool_wait_s}}},
                                {"warnings", r.warnings}};
    if (r.stages && r.stages_first) {
        // Means per batch, milliseconds: the batches after each worker's first, and the first
        // apart ("first").
        const auto means = [](const dsp::stage_times& st) {
            const double n = st.batches ? static_cast<double>(st.batches) : 1.0;
            nlohmann::json stage_ms = nlohmann::json::object();
            for (const auto& [name, ms] : st.stage_ms) stage_ms[name] = ms / n;
            return nlohmann::json{{"batches", st.batches},
                                  {"device_span_ms", st.device_span_ms / n},
                                  {"host_process_ms", st.host_total_ms / n},
                                  {"host_queued_ms", st.host_queued_ms / n},
                                  {"host_last_collect_ms", st.host_last_collect_ms / n},
                                  {"device_span_max_ms", st.device_span_max_ms},
                                  {"host_process_max_ms", st.host_total_max_ms},
                                  {"stage_ms", stage_ms}};
        };
        j["stages"] = means(*r.stages);
        j["stages"]["first"] = means(*r.stages_first);
    }
    j.update(own);
    // --each-channel: each channel alone, its paths as the combined run's are listed.
    nlohmann::json each = nlohmann::json::array();
    for (const auto& a : r.each_channel) {
        nlohmann::json paths = nlohmann::json::array();
        for (const auto& p : a.tally.paths) {
            paths.push_back({{"name", p.name},
                             {"bits", p.bits_checked},
                             {"errors", p.bit_errors},
                             {"ber", p.bits_checked > 0 ? nlohmann::json(p.ber) : nlohmann::json(nullptr)},
                             {"mean_bep_estimate", p.mean_bep_estimate}});
        }
        each.push_back({{"channel", a.channel}, {"packets_found", a.tally.packets_found}, {"mean_ebn0_db", a.tally.mean_ebn0_db}, {"paths", paths}});
    }
    j["each_channel"] = each;
    return j;
}

}  // namespace paq::daemon
