// paqd: the PAQ receiver.
//   paqd --config FILE [--check-config]   the service: source -> ring -> batcher -> backend -> UDP
//   paqd replay FILE                      a recording through the chain, table per path
#include "config/cli.hpp"
#include "config/daemon_config.hpp"
#include "config/receiver_yaml.hpp"
#include "daemon/live.hpp"
#include "daemon/llr_writer.hpp"
#include "daemon/logging.hpp"
#include "daemon/replay.hpp"
#include "runtime/backend_factory.hpp"
#include "io/sample_format.hpp"

#include <CLI/CLI.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <fstream>
#include <sstream>
#include <iostream>

namespace {

using namespace paq;

/// `paqd --config FILE`: the service's options, and the service run with them.
struct service_command {
    std::string config;
    bool check_config = false;
    std::string json_out;
    double duration_s = 0.0;
    std::string backend, log_level;

    void add_options(CLI::App& app)
    {
        app.add_option("-c,--config", config, "Service configuration (YAML), e.g. /etc/paqd/paqd.yaml");
        app.add_flag("--check-config", check_config, "Validate the configuration, print the effective one, exit");
        app.add_option("--json-out", json_out, "Write the final counters and per-path summary as JSON");
        app.add_option("--duration", duration_s, "Stop after this many seconds (default: until the source ends or a signal)")
            ->check(cli::finite_non_negative());
        app.add_option("--backend", backend, "Override pipeline.backend: " + names_text(config::backend_names))
            ->check(CLI::IsMember(names_in(config::backend_names)));
        app.add_option("--log-level", log_level, "Override log.level: " + names_text(config::log_level_names))
            ->check(CLI::IsMember(names_in(config::log_level_names)));
    }
    /// The configuration with the command line's overrides; config_error naming what is wrong.
    [[nodiscard]] config::daemon_config load() const
    {
        config::daemon_config cfg = config::load_daemon_config(config);
        if (!backend.empty()) {
            try {
                cfg.pipeline.backend = runtime::parse_backend(backend);
            } catch (const std::invalid_argument& e) {
                throw config::config_error({std::string("--backend: ") + e.what()});
            }
        }
        if (!log_level.empty()) {
            try {
                cfg.log.level = parse_named(config::log_level_names, log_level, "log level");
            } catch (const std::invalid_argument& e) {
                throw config::config_error({std::string("--log-level: ") + e.what()});
            }
        }
        return cfg;
    }
    int run(const CLI::App& app) const
    {
        if (config.empty()) {
            std::cerr << app.help() << "\npaqd: give --config FILE to run the service, or a subcommand\n";
            return cli::usage_error;
        }
        config::daemon_config cfg;
        try {
            cfg = load();
        } catch (const config::config_error& e) {
            for (const auto& m : e.messages()) spdlog::error("{}", m);
            return cli::usage_error;
        }
        if (check_config) {
            std::cout << config::to_yaml(cfg);
            spdlog::info("{}: configuration is valid", config);
            return 0;
        }
        daemon::logger_options lo_log;
        lo_log.level = cfg.log.level;
        lo_log.destination = cfg.log.destination;
        spdlog::set_default_logger(daemon::make_logger(lo_log));
        spdlog::info("paqd {} starting with {}; effective configuration:", cli::version, config);
        std::istringstream lines(config::to_yaml(cfg));
        for (std::string line; std::getline(lines, line);) spdlog::info("  {}", line);
        daemon::live_options lo;
        lo.config = cfg;
        lo.json_out = json_out;
        lo.duration_s = duration_s;
        return daemon::run_live(lo);
    }
};

/// `paqd replay FILE`: the replay's options, and the replay run with them.
struct replay_command {
    CLI::App* cmd = nullptr;
    std::string file, format, pattern, config_file, json_out;
    double sample_rate = 0.0, bit_rate = 0.0;
    bool json = false;
    std::size_t batch_samples = 0;
    int threads = -1;
    std::string front_end, detector, fec, combining;
    int fec_iterations = 0;
    std::string backend = "auto";
    std::vector<int> gpus;
    std::string solver{name_of(config::solver_names, config::solver_kind::levinson)};
    std::string records_base;
    std::uint32_t records_decimation = 1, channel_decimation = 100;
    std::string llr_base;
    std::vector<int> channel;
    int channels = 1;
    bool each_channel = false;
    bool stage_timing = false;

    void add_to(CLI::App& app)
    {
        cmd = app.add_subcommand("replay", "Run the receiver over a recording and print BER per path");
        cmd->add_option("file", file, "Recording: SigMF (.sigmf-meta/.sigmf-data/base name, or a .sigmf archive) or raw")->required();
        cmd->add_option("--datatype", format, "Raw files: sample type, cf32_le or ci16_le (SigMF core:datatype)");
        cmd->add_option("--format", format)->group("");  // the old name, kept hidden
        cmd->add_option("--sample-rate", sample_rate, "Raw files: sample rate in Hz")->check(cli::finite_positive());
        cmd->add_option("--channel", channel,
                        "The channel received of a recording that interleaves several (SigMF core:num_channels, or "
                        "--channels of a raw file): 1 .. its channels; required for such a recording. Given twice: "
                        "both channels combined on every path")
            ->check(CLI::Range(1, io::max_channels))
            ->expected(1)
            ->take_all();
        cmd->add_option("--combining", combining,
                        "With two --channel: joint (every path combines both channels) or select (every path on the "
                        "packet's better channel alone; the cpu backend) (default: receiver.combining, joint)")
            ->check(CLI::IsMember(names_in(dsp::combining_names)));
        cmd->add_flag("--each-channel", each_channel,
                      "With two --channel: each channel also received alone, its BER per path beside the combined "
                      "paths' (three runs over the recording)");
        cmd->add_option("--channels", channels, "Raw files: channels interleaved, a sample of each per sample time")
            ->check(CLI::Range(1, io::max_channels))
            ->capture_default_str();
        cmd->add_option("--bit-rate", bit_rate,
                        "The link's bit rate in bit/s, 1e6 .. 30e6 (default: the recording's paq:bit_rate_hz, else "
                        "receiver.bit_rate_hz, 10.3125e6); any input rate of 2 .. 6.4 samples per bit is resampled")
            ->check(cli::finite_positive());
        cmd->add_option("--front-end-correction", front_end,
                        "Remove each packet's DC offset and IQ imbalance above the gate: on or off (default: "
                        "receiver.front_end_correction, on)")
            ->check(CLI::IsMember({"on", "off"}));
        cmd->add_option("--detector", detector,
                        "How the bits are decided: sxs (symbol by symbol), trellis (sequence detection), or both (twelve "
                        "streams, side by side) (default: receiver.detector, sxs)")
            ->check(CLI::IsMember(names_in(dsp::detector_names)));
        cmd->add_option("--fec", fec,
                        "The LDPC code the data fields carry: " + names_text(dsp::fec_names) +
                            " (default: the recording's paq:fec, else receiver.fec, none; docs/BITSTREAM.md, \"Coded data fields\")")
            ->check(CLI::IsMember(names_in(dsp::fec_names)).description(""));
        cmd->add_option("--fec-iterations", fec_iterations, "The LDPC decoder's most iterations per codeword (default: receiver.fec_iterations, 50)")
            ->check(CLI::Range(static_cast<int>(dsp::receiver_ranges::fec_iterations.lo), static_cast<int>(dsp::receiver_ranges::fec_iterations.hi)));
        cmd->add_option("--pattern", pattern,
                        "Data pattern for BER counting: " + names_text(dsp::pn_pattern_names) +
                            " (default: the recording's paq:pattern, else pn15)");
        cmd->add_option("--config", config_file, "YAML config (section 'receiver')");
        cmd->add_option("--batch-samples", batch_samples, "New samples per batch (overrides the config)");
        cmd->add_option("--threads", threads, "CPU threads, 0 = all cores (overrides the config)")
            ->check(CLI::Range(static_cast<int>(dsp::receiver_ranges::cpu_threads.lo), static_cast<int>(dsp::receiver_ranges::cpu_threads.hi)));
        cmd->add_option("--backend", backend,
                        "Signal-chain backend: " + names_text(config::backend_names) + " (auto: cuda when a GPU can run it, else cpu)")
            ->check(CLI::IsMember(names_in(config::backend_names)))
            ->capture_default_str();
        cmd->add_option("--gpu,--gpus", gpus, "CUDA device(s) of the cuda backend, one worker each, e.g. 0 or 0,1 (default 0; with --backend auto, they make it cuda)")
            ->delimiter(',')
            ->check(CLI::NonNegativeNumber);
        cmd->add_option("--solver", solver, "ZF/MMSE solver of the cuda backend: " + names_text(config::solver_names))
            ->check(CLI::IsMember(names_in(config::solver_names)))
            ->capture_default_str();
        cmd->add_flag("--json", json, "Print the summary as JSON instead of the table");
        cmd->add_option("--records", records_base, "Write per-packet records to BASE-packets.csv and BASE-channel.csv");
        cmd->add_option("--records-decimation", records_decimation, "One record row per N packets (sums exact)")
            ->check(CLI::Range(1u, 1000000u))->capture_default_str();
        cmd->add_option("--channel-decimation", channel_decimation, "The channel estimate of every Nth packet")
            ->check(CLI::Range(1u, 1000000u))->capture_default_str();
        cmd->add_option("--json-out", json_out, "Also write the JSON summary to this file");
        cmd->add_flag("--stage-timing", stage_timing,
                      "The cuda backend times its stages on every batch (CUDA events); the table and the JSON "
                      "(\"stages\") give each stage's mean per batch after the first, and the first apart");
        cmd->add_option("--llr-out", llr_base,
                        "Write the trellis's LLR of every data bit to BASE-<path>.llr, a file per path (needs --detector "
                        "trellis or both; docs/RECORDS.md, \"LLR files\")");
    }
    /// The service's options given before the word `replay` would be silently ignored by it:
    /// a replay's own --config and --json-out come after the word.
    [[nodiscard]] static bool refuse_service_options(const CLI::App& app)
    {
        std::string given;
        for (const CLI::Option* o : app.get_options()) {
            if (o->count() > 0) given += (given.empty() ? "" : ", ") + o->get_name();
        }
        if (given.empty()) return false;
        spdlog::error("{} given before 'replay': those are the service's options; a replay takes its own after the "
                      "word, e.g. paqd replay FILE --config F --json-out OUT (paqd replay --help)",
                      given);
        return true;
    }
    int run() const
    {
        daemon::replay_options opt;
        try {
            // The settings: a mistake here is a usage or configuration error (exit 2).
            opt.file = file;
            if (!pattern.empty()) opt.pattern = dsp::parse_pn_pattern(pattern);
            opt.backend = runtime::parse_backend(backend);
            opt.gpus = gpus;
            opt.solver = runtime::parse_solver(solver);
            opt.records.base = records_base;
            opt.records.decimation = records_decimation;
            opt.records.channel_decimation = channel_decimation;
            opt.llr_base = llr_base;
            opt.stage_timing = stage_timing;
            if (stage_timing && opt.backend == config::backend_kind::cpu) {
                throw config::config_error({"--stage-timing: the cpu backend does not time its stages (--backend cuda)"});
            }
            if (!config_file.empty()) opt.receiver = config::load_receiver_config(config_file);
            if (batch_samples) opt.receiver.batch_samples = batch_samples;
            if (threads >= 0) opt.receiver.cpu_threads = threads;
            if (!format.empty()) opt.raw_format = io::parse_sample_format(format);
            if (sample_rate > 0.0) opt.raw_sample_rate_hz = sample_rate;
            if (channel.size() > 2) throw config::config_error({"--channel: at most two channels are combined, not " + std::to_string(channel.size())});
            if (!channel.empty()) opt.channel = channel[0];
            if (channel.size() == 2) {
                if (channel[1] == channel[0]) throw config::config_error({"--channel: channel " + std::to_string(channel[0]) + " twice"});
                opt.second_channel = channel[1];
            }
            opt.each_channel = each_channel;
            if (!combining.empty()) {
                if (channel.size() != 2) throw config::config_error({"--combining: chooses how two channels combine; name two (--channel N --channel M)"});
                opt.receiver.combining = dsp::parse_combining(combining);
            }
            opt.raw_channels = channels;
            if (bit_rate > 0.0) opt.bit_rate_hz = bit_rate;
            if (!front_end.empty()) opt.receiver.front_end_correction = front_end == "on" ? 1 : 0;
            if (!detector.empty()) opt.receiver.detector = dsp::parse_detector(detector);
            if (!fec.empty()) opt.fec = dsp::parse_fec(fec);
            if (fec_iterations > 0) opt.receiver.fec_iterations = fec_iterations;
            const auto errors = opt.receiver.validate();
            if (!errors.empty()) {
                for (const auto& e : errors) spdlog::error("{}", e);
                return 2;
            }
            if (!opt.llr_base.empty() && !opt.receiver.trellis_on()) {
                spdlog::error("{}", daemon::llr_needs_trellis);
                return 2;
            }
        } catch (const config::config_error& e) {
            for (const auto& m : e.messages()) spdlog::error("{}", m);
            return cli::usage_error;
        } catch (const std::invalid_argument& e) {  // --pattern, --datatype, --detector, --backend, --solver
            spdlog::error("{}", e.what());
            return cli::usage_error;
        }
        try {
            const auto res = daemon::run_replay(opt);
            const auto j = daemon::to_json(res);
            if (json) {
                std::cout << j.dump(2) << "\n";
            } else {
                daemon::print_table(res, std::cout);
            }
            if (!json_out.empty()) {
                std::ofstream f(json_out);
                f << j.dump(2) << "\n";
                if (!f) {
                    spdlog::error("cannot write {}", json_out);
                    return 1;
                }
            }
            for (const auto& w : res.warnings) spdlog::warn("{}", w);
            return res.engine.tally.packets_found > 0 ? 0 : 3;
        } catch (const config::config_error& e) {  // the recording's rates and the settings do not fit
            for (const auto& m : e.messages()) spdlog::error("{}", m);
            return cli::usage_error;
        } catch (const std::exception& e) {
            spdlog::error("{}", e.what());
            return 1;
        }
    }
};

}  // namespace

int main(int argc, char** argv)
{
    CLI::App app{"paqd: PAQ aeronautical telemetry receiver (SOQPSK-TG, iNET, six equalizer paths)"};
    app.require_subcommand(0, 1);
    cli::conventions(app, "paqd",
                     "0 success; 1 runtime failure (input unreadable or corrupt, source, backend or output error); "
                     "2 usage or configuration error; 3 replay: no packet found");
    service_command service;
    service.add_options(app);
    replay_command replay;
    replay.add_to(app);
    if (const int rc = cli::parse(app, argc, argv); rc >= 0) return rc;
    // Logs go to stderr: stdout carries the table or the JSON document, nothing else.
    spdlog::set_default_logger(spdlog::stderr_color_mt("paqd"));
    spdlog::set_pattern("paqd: %l: %v");
    if (!replay.cmd->parsed()) return service.run(app);
    if (replay_command::refuse_service_options(app)) return cli::usage_error;
    return replay.run();
}
