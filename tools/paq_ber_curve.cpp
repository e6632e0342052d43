// paq-ber-curve: bit error rate against Eb/N0 for every output stream of the chain (the six
// paths; twelve with --detector both), on the CPU backend or, with --backend cuda, the GPU's.
//
//   for each Eb/N0 point i:  simulator(preset, Eb/N0, CFO, timing offset, field impairments,
//                                      seed = S + i)
//       -> N packets (+1 for the partial packet the random start offset cuts)
//       -> run_receiver(backend) -> per-stream bits / errors
//       [--min-errors E: further chunks of 100 packets from the same simulator stream,
//        each through a fresh run_receiver, until every path has >= E errors or the
//        point holds --max-packets packets]
//
// Output: a compact table on stdout (one line per point), a CSV (one row per point and
// path) and optionally JSON with the same numbers plus the run settings.
#include "config/cli.hpp"
#include "runtime/backend_factory.hpp"
#include "runtime/receiver_run.hpp"
#include "dsp/ber.hpp"
#include "dsp/cpu_backend.hpp"
#include "dsp/receiver_config.hpp"
#include "dsp/run_tally.hpp"
#include "dsp/receiver_tables.hpp"
#include "sim/simulator.hpp"
#include "dsp/waveform.hpp"
#include "tools/sim_options.hpp"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <fstream>
#include <iostream>
#include <limits>
#include <span>
#include <string>
#include <tuple>
#include <vector>

namespace {

using paq::cf32;
namespace chain = paq::dsp::chain;
namespace waveform = paq::waveform;

constexpr std::size_t chunk_packets = 100;  ///< packets added per step with --min-errors

struct path_tally {
    std::string name;
    std::uint64_t bits = 0;
    std::uint64_t errors = 0;
    std::uint64_t packets = 0;  ///< packets whose BEP estimate is in bep_sum
    double bep_sum = 0.0;       ///< sum of the packets' BEP estimates
    [[nodiscard]] double mean_bep() const { return packets ? bep_sum / static_cast<double>(packets) : 0.0; }
    [[nodiscard]] double ber() const { return bits ? static_cast<double>(errors) / static_cast<double>(bits) : 0.0; }
};

struct point_result {
    double ebn0_db = 0.0;
    std::uint64_t seed = 0;
    std::uint64_t packets_simulated = 0;  ///< complete packets in the simulated stream
    std::uint64_t packets_found = 0;
    std::uint64_t packets_skipped = 0;
    std::uint64_t runs = 0;               ///< run_receiver calls (1 + extra chunks)
    double est_ebn0_db = std::numeric_limits<double>::quiet_NaN();
    double est_cfo_hz = std::numeric_limits<double>::quiet_NaN();
    double theory_ber = 0.0;
    double seconds = 0.0;
    std::vector<path_tally> paths;  ///< per output stream
};

struct options {
    std::string preset = "awgn";
    std::vector<double> ebn0_db;
    std::size_t packets = 300;
    std::uint64_t min_errors = 0;
    std::size_t max_packets = 3000;
    std::uint64_t seed = 1;
    double cfo_hz = 0.0;
    double timing_offset = 0.37;
    std::string pattern = "pn15";
    std::vector<std::string> rays;  ///< extra rays, AMPLITUDE,DELAY_NS,PHASE_RAD
    // Field impairments (sim/simulator.hpp). A sample rate other than 2 x the bit rate is
    // resampled by the receiver (2 .. 6.4 samples per bit; checked in main).
    double bit_rate_hz = paq::sim::sim_config{}.bit_rate_hz;
    double sample_rate_hz = 0.0;  ///< 0: 2 x bit_rate_hz
    double clock_ppm = 0.0;
    double clock_drift_ppm_per_s = 0.0;
    double gain_db = 0.0;
    std::vector<std::string> agc_steps;  ///< TIME_S,DB
    std::string iq_imbalance;            ///< DB,DEG
    double dc_offset_dbc = -std::numeric_limits<double>::infinity();
    double phase_noise_linewidth_hz = 0.0;
    std::string phase_noise = "none";
    double phase_noise_above_hz = 0.0;
    double cma_mu = paq::dsp::receiver_config{}.cma_mu;
    int cma_iterations = paq::dsp::receiver_config{}.cma_iterations;
    int threads = 0;
    std::string detector = "sxs";
    std::string backend = "cpu";
    std::string output;
    std::string json;
};

/// Runs `n_packets` packets' worth of samples (plus `extra_samples`) from `sim` through a
/// fresh run_receiver and adds the tallies to `res`. Returns the linear Eb/N0 estimate summed
/// over the packets found (to average over the runs of a point).
double run_chunk(paq::sim::simulator& sim, paq::dsp::batch_processor& backend, const paq::dsp::receiver_config& rcfg,
                 const paq::sim::sim_config& scfg, std::size_t n_samples, point_result& res, double& cfo_hz_sum)
{
    std::vector<cf32> samples;
    samples.reserve(n_samples);
    sim.generate(n_samples, samples);

    const auto s = paq::runtime::run_receiver(backend, rcfg, scfg.pattern, scfg.sample_rate_hz, samples);

    ++res.runs;
    res.packets_found += s.packets_found;
    res.packets_skipped += s.packets_skipped;
    for (std::size_t p = 0; p < res.paths.size(); ++p) {
        res.paths[p].name = s.paths[p].name;
        res.paths[p].bits += s.paths[p].bits_checked;
        res.paths[p].errors += s.paths[p].bit_errors;
        res.paths[p].packets += s.packets_found;
        res.paths[p].bep_sum += s.paths[p].bep_estimate_sum;
    }
    const double np = static_cast<double>(s.packets_found);
    cfo_hz_sum += s.mean_cfo_hz * np;
    return s.packets_found ? std::pow(10.0, s.mean_ebn0_db / 10.0) * np : 0.0;
}

/// The simulator's settings of one Eb/N0 point. Throws std::invalid_argument naming the bad
/// field and its range.
paq::sim::sim_config sim_config_for(const options& o, double ebn0_db, std::uint64_t seed)
{
    paq::sim::sim_config scfg;
    scfg.preset = o.preset;
    scfg.ebn0_db = ebn0_db;
    scfg.cfo_hz = o.cfo_hz;
    scfg.timing_offset_samples = o.timing_offset;
    scfg.seed = seed;
    scfg.pattern = paq::dsp::parse_pn_pattern(o.pattern);
    for (const auto& r : o.rays) scfg.extra_rays.push_back(paq::sim::parse_channel_ray(r));
    scfg.start_offset_samples = -1;  // from the seed: the recording starts inside a packet
    scfg.bit_rate_hz = o.bit_rate_hz;
    scfg.sample_rate_hz = o.sample_rate_hz;
    scfg.clock_ppm = o.clock_ppm;
    scfg.clock_drift_ppm_per_s = o.clock_drift_ppm_per_s;
    scfg.gain_db = o.gain_db;
    for (const auto& a : o.agc_steps) scfg.agc_steps.push_back(paq::sim::parse_agc_step(a));
    if (!o.iq_imbalance.empty()) std::tie(scfg.iq_gain_db, scfg.iq_phase_deg) = paq::sim::parse_iq_imbalance(o.iq_imbalance);
    scfg.dc_offset_dbc = o.dc_offset_dbc;
    scfg.phase_noise_linewidth_hz = o.phase_noise_linewidth_hz;
    scfg.phase_noise_above_hz = o.phase_noise_above_hz;
    try {
        scfg.set_phase_noise(o.phase_noise);
    } catch (const std::invalid_argument& e) {
        throw std::invalid_argument(std::string("--phase-noise: ") + e.what());
    }
    if (const auto errors = scfg.validate(); !errors.empty()) {
        std::string msg;
        for (const auto& e : errors) msg += (msg.empty() ? "" : "\npaq-ber-curve: ") + paq::tools::sim_option_of(e) + e;
        throw std::invalid_argument(msg);
    }

    return scfg;
}

/// The receiver's settings (not validated). Throws std::invalid_argument for an unknown
/// --detector.
paq::dsp::receiver_config receiver_config_for(const options& o)
{
    paq::dsp::receiver_config rcfg;
    rcfg.cpu_threads = o.threads;
    rcfg.detector = paq::dsp::parse_detector(o.detector);
    rcfg.cma_mu = o.cma_mu;
    rcfg.cma_iterations = o.cma_iterations;
    rcfg.bit_rate_hz = o.bit_rate_hz;
    rcfg.input_sample_rate_hz = o.sample_rate_hz;  // any other rate than 2 x the bit rate is resampled
    return rcfg;
}

point_result run_point(const options& o, std::size_t index, double ebn0_db)
{
    const auto t0 = std::chrono::steady_clock::now();
    point_result res;
    res.ebn0_db = ebn0_db;
    res.seed = o.seed + index;
    res.theory_ber = paq::dsp::oqpsk_theory_ber(ebn0_db);

    const auto scfg = sim_config_for(o, ebn0_db, res.seed);

    const auto rcfg = receiver_config_for(o);
    // Input samples per packet (L_pkt at 2 samples per bit).
    const double spacing = static_cast<double>(waveform::L_pkt) * rcfg.input_ratio();
    const auto input_samples = [spacing](std::size_t packets) { return static_cast<std::size_t>(std::ceil(static_cast<double>(packets) * spacing)); };
    if (const auto errors = rcfg.validate(); !errors.empty()) throw std::invalid_argument(errors.front());

    paq::sim::simulator sim(scfg);
    const auto made = paq::runtime::make_backend({paq::runtime::parse_backend(o.backend), 0, paq::runtime::solver_kind::levinson}, rcfg);
    paq::dsp::batch_processor& backend = *made;
    res.paths.resize(static_cast<std::size_t>(rcfg.streams()));

    double ebn0_lin_sum = 0.0, cfo_hz_sum = 0.0;
    // First run: N complete packets plus the one the random start offset cuts.
    ebn0_lin_sum += run_chunk(sim, backend, rcfg, scfg, input_samples(o.packets + 1), res, cfo_hz_sum);
    res.packets_simulated = o.packets;
    auto enough = [&] {
        if (o.min_errors == 0) return true;
        return std::all_of(res.paths.begin(), res.paths.end(),
                           [&](const path_tally& t) { return t.errors >= o.min_errors; });
    };
    // Further chunks continue the same stream (the packet cut at a chunk boundary is lost
    // to both runs, and each run's PN checker resynchronises before it counts).
    while (!enough() && res.packets_simulated < o.max_packets) {
        const std::size_t n = std::min(chunk_packets, o.max_packets - res.packets_simulated);
        ebn0_lin_sum += run_chunk(sim, backend, rcfg, scfg, input_samples(n), res, cfo_hz_sum);
        res.packets_simulated += n;
    }
    if (res.packets_found) {
        const double np = static_cast<double>(res.packets_found);
        res.est_ebn0_db = 10.0 * std::log10(ebn0_lin_sum / np);
        res.est_cfo_hz = cfo_hz_sum / np;
    }
    res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return res;
}

std::string fmt_ber(double ber, std::uint64_t errors)
{
    char buf[32];
    if (errors == 0) std::snprintf(buf, sizeof buf, "%10s", "0");
    else std::snprintf(buf, sizeof buf, "%10.3e", ber);
    return buf;
}

std::string fmt_double(double v, const char* f)
{
    char buf[64];
    std::snprintf(buf, sizeof buf, f, v);
    return buf;
}

}  // namespace

int main(int argc, char** argv)
{
    options o;
    CLI::App app{"paq-ber-curve: BER against Eb/N0 of every output stream (CPU or CUDA backend, simulated channel)"};
    paq::cli::conventions(app, "paq-ber-curve",
                     "0 curve written; 1 runtime failure (output not writable, receiver error); 2 usage error or a setting "
                     "out of range");
    app.option_defaults()->always_capture_default();

    std::vector<std::string> presets = paq::sim::channel_preset_names();
    app.add_option("--preset", o.preset, "Channel preset")->check(CLI::IsMember(presets));
    app.add_option("--cma-mu", o.cma_mu, "CMA step size (receiver setting cma_mu)");
    app.add_option("--cma-iterations", o.cma_iterations, "CMA iterations from the MMSE start (receiver setting cma_iterations)");
    app.add_option("--ray", o.rays, "Extra ray AMPLITUDE,DELAY_NS,PHASE_RAD added to the preset (repeatable)");
    app.add_option("--ebn0-db", o.ebn0_db, "Eb/N0 points in dB, comma-separated (e.g. 4,6,8,10)")
        ->required()
        ->delimiter(',')
        ->check(CLI::Validator(
            [](std::string& s) -> std::string {
                // CLI11 converts the text afterwards; reject what is not a finite number here.
                std::size_t used = 0;
                double v = 0.0;
                try {
                    v = std::stod(s, &used);
                } catch (const std::exception&) {
                    return "Eb/N0 value '" + s + "' is not a number";
                }
                if (used != s.size()) return "Eb/N0 value '" + s + "' is not a number";
                if (!std::isfinite(v)) return "Eb/N0 value '" + s + "' is not finite";
                if (v < -20.0 || v > 60.0) return "Eb/N0 value '" + s + "' is outside -20 .. 60 dB";
                return {};
            },
            "FINITE", "finite"));
    app.add_option("--packets", o.packets, "Packets per Eb/N0 point (one more is simulated for the partial first)")
        ->check(CLI::Range(std::size_t{1}, std::size_t{100000}));
    app.add_option("--min-errors", o.min_errors,
                   "Add packets in chunks of 100 until every path has at least this many bit errors "
                   "(0: fixed --packets)");
    auto* maxp = app.add_option("--max-packets", o.max_packets, "Upper limit of packets per point with --min-errors")
                     ->check(CLI::Range(std::size_t{1}, std::size_t{1000000}));
    app.add_option("--seed", o.seed, "Base seed; Eb/N0 point i (0-based) uses seed S + i");
    app.add_option("--cfo-hz", o.cfo_hz, "Carrier frequency offset in Hz")->check(CLI::Range(-1e6, 1e6));
    app.add_option("--timing-offset", o.timing_offset, "Fractional sample timing offset, 0 <= x < 1")
        ->check(CLI::Range(0.0, 0.999999));
    app.add_option("--bit-rate", o.bit_rate_hz, "Transmitter bit rate in Hz (1e6 .. 30e6)");
    app.add_option("--sample-rate", o.sample_rate_hz,
                   "Input sample rate in Hz, 2 .. 6.4 x --bit-rate (resampled by the receiver; 0: 2 x --bit-rate)");
    app.add_option("--clock-ppm", o.clock_ppm, "Transmitter bit clock offset against the sample clock, ppm (|x| <= 1000)");
    app.add_option("--clock-drift-ppm-per-s", o.clock_drift_ppm_per_s, "Clock offset change per second, ppm/s");
    app.add_option("--gain-db", o.gain_db, "Receiver gain for the whole run, dB (-60 .. 40)");
    app.add_option("--agc-step", o.agc_steps, "Gain step TIME_S,DB (repeatable), time from the start of each point's stream");
    app.add_option("--iq-imbalance", o.iq_imbalance, "IQ amplitude and phase imbalance DB,DEG, e.g. 2,10");
    app.add_option("--dc-offset", o.dc_offset_dbc, "Complex DC offset relative to the signal power, dBc (-100 .. 0)");
    app.add_option("--phase-noise-linewidth", o.phase_noise_linewidth_hz, "Wiener phase noise linewidth, Hz (0 .. 1e5)");
    app.add_option("--phase-noise", o.phase_noise, "Phase noise shaped to a curve: none, irig106, or F:DBC,F:DBC,... (offsets in Hz, L(f) in dBc/Hz; as paq-sim)");
    app.add_option("--phase-noise-above", o.phase_noise_above_hz,
                   "Analysis: only the phase noise beyond this offset, Hz (as paq-sim; 0: all of it)");
    app.add_option("--pattern", o.pattern, "PN test pattern (pn9, pn11, pn15, pn20, pn23, pn31)")
        ->check(CLI::Validator(
            [](std::string& s) -> std::string {
                try {
                    (void)paq::dsp::parse_pn_pattern(s);
                } catch (const std::exception& e) {
                    return e.what();
                }
                return {};
            },
            "PATTERN", "pn pattern"));
    app.add_option("--threads", o.threads, "CPU worker threads (0: all cores)")->check(CLI::Range(0, 1024));
    app.add_option("--detector", o.detector,
                   "How the bits are decided: sxs, trellis, or both (twelve streams: none .. fde2, none_trellis .. fde2_trellis)")
        ->check(CLI::IsMember(paq::names_in(paq::dsp::detector_names)));
    app.add_option("--backend", o.backend, "Receiver backend: cpu, or cuda (GPU 0; a build with CUDA)")
        ->check(CLI::IsMember({"cpu", "cuda"}));
    app.add_option("--output", o.output, "CSV output file")->required();
    app.add_option("--json", o.json, "Optional JSON output file");

    try {
        app.parse(argc, argv);
        if (o.min_errors > 0 && maxp->count() > 0 && o.max_packets < o.packets)
            throw CLI::ValidationError("--max-packets", "must be >= --packets (" + std::to_string(o.packets) + ")");
    } catch (const CLI::Success& e) {
        return app.exit(e);
    } catch (const CLI::ParseError& e) {
        (void)app.exit(e);
        return paq::cli::usage_error;
    }
    if (o.max_packets < o.packets) o.max_packets = o.packets;
    if (o.sample_rate_hz == 0.0) o.sample_rate_hz = 2.0 * o.bit_rate_hz;
    {
        // A rate the receiver cannot serve (its error names both rates), or a receiver setting
        // out of range: an error before any output, as every point would make it.
        paq::dsp::receiver_config rc;
        try {
            rc = receiver_config_for(o);
        } catch (const std::invalid_argument& e) {
            std::cerr << "paq-ber-curve: --detector: " << e.what() << "\n";
            return 2;
        }
        if (const auto errors = rc.validate(); !errors.empty()) {
            for (const auto& e : errors) std::cerr << "paq-ber-curve: " << e << "\n";
            return 2;
        }
    }
    if (o.backend == "cuda" && !paq::runtime::cuda_backend_available()) {
        std::cerr << "paq-ber-curve: --backend cuda: the CUDA backend is not available ("
                  << paq::runtime::cuda_backend_unavailable_reason() << "); use --backend cpu\n";
        return 2;
    }
    try {
        (void)sim_config_for(o, o.ebn0_db.front(), o.seed);  // bad settings: an error before any output
    } catch (const std::invalid_argument& e) {
        std::cerr << "paq-ber-curve: " << e.what() << "\n";
        return 2;
    }

    std::ofstream csv(o.output);
    if (!csv) {
        std::cerr << "paq-ber-curve: cannot write " << o.output << ": " << std::strerror(errno) << "\n";
        return 1;
    }

    std::vector<point_result> results;
    try {
        // Header of the stdout table.
        for (const auto& r : o.rays) std::printf("# extra ray (amplitude, delay ns, phase rad): %s\n", r.c_str());
        std::printf("# bit rate %g Hz, sample rate %g Hz, clock %g ppm + %g ppm/s, gain %g dB, %zu AGC steps, "
                    "IQ imbalance '%s', DC %g dBc, Wiener %g Hz, phase-noise mask %s%s\n",
                    o.bit_rate_hz, o.sample_rate_hz, o.clock_ppm, o.clock_drift_ppm_per_s, o.gain_db, o.agc_steps.size(),
                    o.iq_imbalance.empty() ? "none" : o.iq_imbalance.c_str(), o.dc_offset_dbc, o.phase_noise_linewidth_hz,
                    o.phase_noise.c_str(),
                    o.phase_noise_above_hz > 0.0 ? ", only beyond the offset of --phase-noise-above" : "");
        std::printf("# cma_mu %g, cma_iterations %d\n", o.cma_mu, o.cma_iterations);
        std::printf("# preset %s, seed %llu + point index, packets %zu%s, cfo %.1f Hz, timing offset %.3f, %s\n",
                    o.preset.c_str(), static_cast<unsigned long long>(o.seed), o.packets,
                    o.min_errors ? (", min-errors " + std::to_string(o.min_errors) + " (max " +
                                    std::to_string(o.max_packets) + " packets)")
                                       .c_str()
                                 : "",
                    o.cfo_hz, o.timing_offset, o.pattern.c_str());
        const int streams = paq::dsp::output_streams(paq::dsp::parse_detector(o.detector));
        std::printf("# detector %s, backend %s\n", o.detector.c_str(), o.backend.c_str());
        std::printf("%7s %5s %6s %6s", "ebn0_dB", "seed", "pkts", "found");
        const int col = streams > chain::num_paths ? 12 : 10;  // mmse_trellis
        for (int p = 0; p < streams; ++p) std::printf(" %*s", col, paq::dsp::stream_name(p));
        std::printf(" %10s %7s %6s\n", "theory", "est_dB", "sec");
        std::fflush(stdout);

        for (std::size_t i = 0; i < o.ebn0_db.size(); ++i) {
            auto r = run_point(o, i, o.ebn0_db[i]);
            std::printf("%7.2f %5llu %6llu %6llu", r.ebn0_db, static_cast<unsigned long long>(r.seed),
                        static_cast<unsigned long long>(r.packets_simulated),
                        static_cast<unsigned long long>(r.packets_found));
            for (const auto& t : r.paths) std::printf(" %*s", col, fmt_ber(t.ber(), t.errors).c_str());
            std::printf(" %10.3e %7.2f %6.1f\n", r.theory_ber, r.est_ebn0_db, r.seconds);
            std::fflush(stdout);
            results.push_back(std::move(r));
        }
    } catch (const std::exception& e) {
        std::cerr << "paq-ber-curve: " << e.what() << "\n";
        return 1;
    }

    csv << "preset,ebn0_db,path,bits,errors,ber,theory_ber,est_ebn0_db,packets_found,seed,mean_bep\n";
    for (const auto& r : results) {
        for (const auto& t : r.paths) {
            csv << o.preset << ',' << fmt_double(r.ebn0_db, "%.2f") << ',' << t.name << ',' << t.bits << ','
                << t.errors << ',' << fmt_double(t.ber(), "%.6e") << ',' << fmt_double(r.theory_ber, "%.6e") << ','
                << fmt_double(r.est_ebn0_db, "%.3f") << ',' << r.packets_found << ',' << r.seed << ',' << fmt_double(t.mean_bep(), "%.6e") << '\n';
        }
    }
    csv.close();
    if (!csv) {
        std::cerr << "paq-ber-curve: error writing " << o.output << "\n";
        return 1;
    }

    if (!o.json.empty()) {
        nlohmann::json j;
        j["tool"] = "paq-ber-curve";
        j["settings"] = {{"preset", o.preset},
                         {"packets", o.packets},
                         {"min_errors", o.min_errors},
                         {"max_packets", o.max_packets},
                         {"seed_base", o.seed},
                         {"seed_rule", "point i (0-based) uses seed_base + i"},
                         {"cfo_hz", o.cfo_hz},
                         {"timing_offset_samples", o.timing_offset},
                         {"pattern", o.pattern},
                         {"extra_rays", o.rays},
                         {"cma_mu", o.cma_mu},
                         {"cma_iterations", o.cma_iterations},
                         {"bit_rate_hz", o.bit_rate_hz},
                         {"sample_rate_hz", o.sample_rate_hz},
                         {"clock_ppm", o.clock_ppm},
                         {"clock_drift_ppm_per_s", o.clock_drift_ppm_per_s},
                         {"gain_db", o.gain_db},
                         {"agc_steps", o.agc_steps},
                         {"iq_imbalance", o.iq_imbalance.empty() ? std::string("none") : o.iq_imbalance},
                         {"dc_offset_dbc", std::isfinite(o.dc_offset_dbc) ? nlohmann::json(o.dc_offset_dbc) : nlohmann::json("none")},
                         {"phase_noise_linewidth_hz", o.phase_noise_linewidth_hz},
                         {"phase_noise_mask", o.phase_noise},
                         {"phase_noise_above_hz", o.phase_noise_above_hz},
                         {"backend", o.backend},
                         {"detector", o.detector}};
        auto pts = nlohmann::json::array();
        for (const auto& r : results) {
            nlohmann::json pj;
            pj["ebn0_db"] = r.ebn0_db;
            pj["seed"] = r.seed;
            pj["packets_simulated"] = r.packets_simulated;
            pj["packets_found"] = r.packets_found;
            pj["packets_skipped"] = r.packets_skipped;
            pj["receiver_runs"] = r.runs;
            pj["theory_ber"] = r.theory_ber;
            pj["est_ebn0_db"] = std::isfinite(r.est_ebn0_db) ? nlohmann::json(r.est_ebn0_db) : nlohmann::json();
            pj["est_cfo_hz"] = std::isfinite(r.est_cfo_hz) ? nlohmann::json(r.est_cfo_hz) : nlohmann::json();
            pj["seconds"] = r.seconds;
            auto paths = nlohmann::json::array();
            for (const auto& t : r.paths)
                paths.push_back({{"path", t.name}, {"bits", t.bits}, {"errors", t.errors}, {"ber", t.ber()}, {"mean_bep_estimate", t.mean_bep()}});
            pj["paths"] = paths;
            pts.push_back(pj);
        }
        j["points"] = pts;
        std::ofstream jf(o.json);
        jf << j.dump(2) << '\n';
        if (!jf) {
            std::cerr << "paq-ber-curve: cannot write " << o.json << "\n";
            return 1;
        }
    }
    return 0;
}
