// paq-sim: writes a simulated SOQPSK-TG / iNET recording (SigMF or raw), with the field
// impairments of a real link and front end (output rate, bit rate, transmitter clock offset
// and drift, gain and AGC steps, IQ imbalance, DC offset, phase noise); sim/simulator.hpp has
// the models and their order. Every setting is recorded under paq: keys in the SigMF
// metadata.
//
//   paq-sim --preset edwards3 --ebn0-db 12 --cfo-hz 50e3 --seconds 3 --seed 7 --output demo
//   paq-sim --sample-rate 25e6 --clock-ppm 100 --iq-imbalance 2,10 --dc-offset -15
//           --phase-noise irig106 --ebn0-db 11 --seconds 1 --output field   (one line)
//   paq-sim --ebn0-db 12 --channel preset=edwards3 --channel preset=two-ray,delay-ns=40,shadow-db=10
//           --seconds 3 --output two   (two channels, interleaved; one line)
#include "config/cli.hpp"
#include "tools/sim_options.hpp"
#include "sim/simulator.hpp"
#include "dsp/waveform.hpp"
#include "io/sample_file.hpp"
#include "io/sigmf.hpp"
#include "io/utc_time.hpp"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <numbers>
#include <iostream>
#include <tuple>
#include <string>
#include <vector>

int main(int argc, char** argv)
{
    using namespace paq;
    CLI::App app{"paq-sim: simulated SOQPSK-TG iNET recordings with multipath, noise and offsets"};
    cli::conventions(app, "paq-sim", "0 recording written; 1 runtime failure (output not writable); 2 usage error or a setting out of range");
    sim::sim_config cfg;
    double seconds = 1.0;
    std::string output, format = "sigmf", datatype = "cf32_le", pattern = "pn15", ebn0 = "inf", ldpc = "none";
    std::vector<std::string> rays, agc_steps, channels;
    std::string iq_imbalance, phase_noise = "none";
    double dc_offset_dbc = -INFINITY;
    std::string datetime;             // SigMF core:datetime of the first sample (UTC, ISO 8601)
    double center_frequency_hz = 0.0;  // SigMF core:frequency (0: not written)
    app.add_option("--preset", cfg.preset, "Channel: awgn, two-ray, edwards3, flight")->capture_default_str();
    app.add_option("--ebn0-db", ebn0, "Eb/N0 at the receiver in dB, or 'inf' for no noise")->capture_default_str();
    app.add_option("--cfo-hz", cfg.cfo_hz, "Carrier frequency offset in Hz")->capture_default_str();
    app.add_option("--phase-rad", cfg.phase_rad, "Carrier phase offset in radians")->capture_default_str();
    app.add_option("--timing-offset", cfg.timing_offset_samples, "Fractional sample-timing offset, 0 <= x < 1")
        ->capture_default_str();
    app.add_option("--seconds", seconds, "Length of the recording in seconds")->capture_default_str()->check(cli::finite_positive());
    app.add_option("--flight-start", cfg.flight_start_s, "flight preset: start time on the flight's clock, s")
        ->capture_default_str();
    app.add_option("--ray", rays, "Extra ray AMPLITUDE,DELAY_NS,PHASE_RAD added to the preset (repeatable), e.g. 0.5,1000,1.2");
    app.add_option("--seed", cfg.seed, "Random seed (data start, noise, start offset)")->capture_default_str();
    app.add_option("--bit-rate", cfg.bit_rate_hz, "Transmitter bit rate in Hz, 1e6 .. 30e6")->capture_default_str();
    auto* rate_opt = app.add_option("--sample-rate", cfg.sample_rate_hz,
                                    "Output sample rate in Hz, 1.9 .. 8 x the bit rate (default: 2 x the bit rate); "
                                    "other than 2 x, made by band-limited interpolation");
    app.add_option("--clock-ppm", cfg.clock_ppm,
                   "Transmitter bit clock offset against the sample clock, ppm (|x| <= 1000)")
        ->capture_default_str();
    app.add_option("--clock-drift-ppm-per-s", cfg.clock_drift_ppm_per_s,
                   "Clock offset change per second (the offset must stay within +-1000 ppm)")
        ->capture_default_str();
    app.add_option("--gain-db", cfg.gain_db, "Receiver gain for the whole recording, dB (-60 .. 40)")->capture_default_str();
    app.add_option("--agc-step", agc_steps, "Gain step TIME_S,DB at that time (repeatable, at most 8), e.g. 2.5,20");
    app.add_option("--iq-imbalance", iq_imbalance, "IQ amplitude and phase imbalance DB,DEG, e.g. 2,10");
    app.add_option("--dc-offset", dc_offset_dbc, "Complex DC offset relative to the signal power, dBc (-100 .. 0)");
    app.add_option("--phase-noise-linewidth", cfg.phase_noise_linewidth_hz,
                   "Wiener phase noise of this linewidth in Hz (0 .. 1e5; 0: none)")
        ->capture_default_str();
    app.add_option("--phase-noise", phase_noise,
                   "Phase noise shaped to a curve of L(f): none, irig106 (the IRIG 106 chapter 2 transmitter limit), "
                   "or F:DBC,F:DBC,... (offsets in Hz, 10 .. sample rate / 4, increasing; dBc/Hz, flat or falling by "
                   "at most 40 dB a decade; flat below the first, -20 dB/decade beyond the last), e.g. "
                   "10:-30,100:-60,1e6:-100,2.5e6:-100")
        ->capture_default_str();
    app.add_option("--phase-noise-above", cfg.phase_noise_above_hz,
                   "Analysis: keep only the phase noise (Wiener and curve) beyond this offset from the carrier, Hz (two "
                   "first-order high-pass sections there; 10 .. sample rate / 4): what a receiver that followed every "
                   "slower phase perfectly would still face. 0: all of it")
        ->capture_default_str();
    app.add_option("--pattern", pattern, "Data pattern: pn9, pn11, pn15, pn20, pn23, pn31")->capture_default_str();
    app.add_option("--ldpc", ldpc,
                   "LDPC code of the data fields: the codewords of the pattern's next information bits, whole "
                   "codewords in each data field where n divides 6144, else the standard's continuous stream of "
                   "sync-marked, randomized codewords across the data fields (" + names_text(dsp::fec_names) +
                       "; the SigMF metadata's paq:fec names it for paqd replay; docs/BITSTREAM.md, \"Coded data fields\")")
        ->check(CLI::IsMember(names_in(dsp::fec_names)).description(""))
        ->capture_default_str();
    app.add_option("--channel", channels,
                   "A receive channel of the same transmission (repeatable: one per channel, interleaved in the output, "
                   "SigMF core:num_channels): KEY=VALUE,... over the other options, keys preset, ebn0-db, gain-db, "
                   "delay-ns (0 .. 2000), phase-rad, shadow-db (airframe shadowing: fades of this depth, 0 .. 60), "
                   "shadow-s (a fade's length, default 1) and shadow-every-s (mean time from one fade's start to the "
                   "next's, default 5); each channel has its own noise and fades, the same data, clock, carrier offset "
                   "and phase noise; e.g. --channel preset=edwards3 --channel preset=two-ray,delay-ns=40,shadow-db=10");
    app.add_option("--format", format, "File format: sigmf or raw")->check(CLI::IsMember({"sigmf", "raw"}))->capture_default_str();
    app.add_option("--datatype", datatype, "Sample type: cf32_le or ci16_le")->capture_default_str();
    app.add_option("--datetime", datetime,
                   "SigMF core:datetime: the UTC of the first sample, YYYY-MM-DDTHH:MM:SS[.fffffffff]Z (packets then carry "
                   "their time in replay)");
    app.add_option("--center-frequency", center_frequency_hz, "SigMF core:frequency: the carrier's frequency in Hz")
        ->check(cli::finite_positive());
    app.add_option("--output,-o", output, "Output: base name for SigMF (writes .sigmf-data/.sigmf-meta), file for raw")
        ->required();
    if (const int rc = cli::parse(app, argc, argv); rc >= 0) return rc;

    bool settings_read = false;  // a mistake before this is a usage error (2), after it a runtime failure (1)
    try {
        cfg.pattern = dsp::parse_pn_pattern(pattern);
        cfg.fec = dsp::parse_fec(ldpc);
        for (const auto& r : rays) cfg.extra_rays.push_back(sim::parse_channel_ray(r));
        if (ebn0 == "inf" || ebn0 == "+inf") {
            cfg.ebn0_db = INFINITY;
        } else {
            std::size_t pos = 0;
            try {
                cfg.ebn0_db = std::stod(ebn0, &pos);
            } catch (const std::exception&) {
                pos = 0;
            }
            if (pos == 0 || pos != ebn0.size()) throw std::invalid_argument("--ebn0-db: '" + ebn0 + "' is not a number or 'inf'");
        }
        for (const auto& a : agc_steps) {
            try {
                cfg.agc_steps.push_back(sim::parse_agc_step(a));
            } catch (const std::invalid_argument& e) {
                throw std::invalid_argument(std::string("--agc-step: ") + e.what());
            }
        }
        if (!iq_imbalance.empty()) {
            try {
                std::tie(cfg.iq_gain_db, cfg.iq_phase_deg) = sim::parse_iq_imbalance(iq_imbalance);
            } catch (const std::invalid_argument& e) {
                throw std::invalid_argument(std::string("--iq-imbalance: ") + e.what());
            }
        }
        cfg.dc_offset_dbc = dc_offset_dbc;
        try {
            cfg.set_phase_noise(phase_noise);
        } catch (const std::invalid_argument& e) {
            throw std::invalid_argument(std::string("--phase-noise: ") + e.what());
        }
        if (rate_opt->count() == 0) cfg.sample_rate_hz = 2.0 * cfg.bit_rate_hz;
        const auto fmt = io::parse_sample_format(datatype);
        if (!datetime.empty() && !io::parse_utc_ns(datetime)) {
            throw std::invalid_argument("--datetime: '" + datetime + "' is not a UTC time YYYY-MM-DDTHH:MM:SS[.fffffffff]Z");
        }
        if ((!datetime.empty() || center_frequency_hz > 0.0) && format != "sigmf") {
            throw std::invalid_argument("--datetime and --center-frequency are SigMF metadata: a raw file cannot carry them");
        }
        if (channels.size() > static_cast<std::size_t>(io::max_channels)) {
            throw std::invalid_argument("--channel: " + std::to_string(channels.size()) + " channels (allowed: at most " +
                                        std::to_string(io::max_channels) + ")");
        }
        // One configuration per receive channel: the options, then each --channel's settings.
        std::vector<sim::sim_config> cfgs;
        for (std::size_t c = 0; c < std::max<std::size_t>(1, channels.size()); ++c) {
            sim::sim_config ch = cfg;
            ch.channel = static_cast<int>(c);
            if (!channels.empty()) {
                try {
                    sim::apply_channel_setting(ch, channels[c]);
                } catch (const std::invalid_argument& e) {
                    throw std::invalid_argument("--channel " + std::to_string(c + 1) + ": " + e.what());
                }
            }
            const auto errors = ch.validate();
            if (!errors.empty()) {
                for (const auto& e : errors) {
                    std::cerr << "paq-sim: " << (channels.empty() ? "" : "--channel " + std::to_string(c + 1) + ": ")
                              << tools::sim_option_of(e) << e << "\n";
                }
                return 2;
            }
            cfgs.push_back(ch);
        }
        cfg = cfgs.front();  // the global paq: keys describe the first channel
        if (const double end_ppm = cfg.clock_ppm + cfg.clock_drift_ppm_per_s * seconds; std::abs(end_ppm) > 1000.0) {
            std::cerr << "paq-sim: --clock-ppm " << cfg.clock_ppm << " + --clock-drift-ppm-per-s "
                      << cfg.clock_drift_ppm_per_s << " x --seconds " << seconds << " reaches " << end_ppm
                      << " ppm (allowed: the offset within -1000 .. 1000 ppm over the whole recording)\n";
            return 2;
        }
        if (seconds * cfg.sample_rate_hz > 4e9) throw std::invalid_argument("--seconds: recording would exceed 4e9 samples");
        const auto total = static_cast<std::uint64_t>(std::llround(seconds * cfg.sample_rate_hz));
        settings_read = true;

        std::vector<sim::simulator> sims;
        for (const auto& c : cfgs) sims.emplace_back(c);
        sim::simulator& sim = sims.front();
        io::sigmf_meta meta;
        meta.num_channels = static_cast<int>(cfgs.size());
        meta.format = fmt;
        meta.sample_rate_hz = cfg.sample_rate_hz;
        meta.description = "paq-sim: SOQPSK-TG iNET packets, preset " + cfg.preset;
        meta.recorder = "paq-sim";
        meta.datetime_iso8601 = datetime.empty() ? std::string() : io::format_utc_ns(*io::parse_utc_ns(datetime));
        meta.center_frequency_hz = center_frequency_hz;
        // An Eb/N0 as the metadata writes it: a number, or "inf" without noise.
        const auto ebn0_json = [](double db) { return std::isfinite(db) ? nlohmann::json(db) : nlohmann::json("inf"); };
        meta.extra_global = nlohmann::json{{"paq:preset", cfg.preset},
                                           {"paq:ebn0_db", ebn0_json(cfg.ebn0_db)},
                                           {"paq:cfo_hz", cfg.cfo_hz},
                                           {"paq:phase_rad", cfg.phase_rad},
                                           {"paq:timing_offset_samples", cfg.timing_offset_samples},
                                           {"paq:seed", cfg.seed},
                                           {"paq:flight_start_s", cfg.flight_start_s},
                                           {"paq:pattern", std::string(dsp::to_string(cfg.pattern))},
                                           {"paq:fec", std::string(dsp::to_string(cfg.fec))},
                                           {"paq:bit_rate_hz", cfg.bit_rate_hz},
                                           {"paq:samples_per_bit", cfg.sample_rate_hz / cfg.bit_rate_hz},
                                           {"paq:packet_samples", waveform::L_pkt},  // at 2 samples per bit
                                           {"paq:clock_ppm", cfg.clock_ppm},
                                           {"paq:clock_drift_ppm_per_s", cfg.clock_drift_ppm_per_s},
                                           {"paq:gain_db", cfg.gain_db},
                                           {"paq:iq_imbalance", {{"gain_db", cfg.iq_gain_db}, {"phase_deg", cfg.iq_phase_deg}}},
                                           {"paq:dc_offset_dbc", std::isfinite(cfg.dc_offset_dbc) ? nlohmann::json(cfg.dc_offset_dbc) : nlohmann::json("none")},
                                           {"paq:phase_noise_linewidth_hz", cfg.phase_noise_linewidth_hz},
                                           {"paq:phase_noise_mask", std::string(sim::to_string(cfg.phase_noise))},
                                           {"paq:phase_noise_above_hz", cfg.phase_noise_above_hz}};
        if (cfg.resampled()) {
            meta.extra_global["paq:resampler"] = {{"kind", "Kaiser-windowed sinc (beta 8) on the 2-samples-per-bit channel output"},
                                                  {"half_taps", cfg.resampler_half_taps}};
        }
        // The rms phase the curve makes (the filter's response, through the high-pass of
        // --phase-noise-above when set), in all and beyond 30 and 300 kHz: in the metadata and
        // printed at the end.
        const auto deg = [](double rad) { return rad * 180 / std::numbers::pi; };
        const auto rms_deg_of_rad2 = [&](double rad2) { return deg(std::sqrt(rad2)); };
        const auto rms_deg = [&](double above_hz) { return deg(sim.phase_noise_rms_rad(above_hz)); };
        const std::array<double, 3> pn_rms_deg{rms_deg(0.0), rms_deg(30e3), rms_deg(300e3)};
        if (cfg.phase_noise != sim::phase_noise_mask::none) {
            auto& j = meta.extra_global["paq:phase_noise_curve"];
            for (const auto& p : cfg.phase_noise_points()) j.push_back({{"f_hz", p.f_hz}, {"dbc_hz", p.dbc_hz}});
            meta.extra_global["paq:phase_noise_rms_deg"] = {
                {"all", pn_rms_deg[0]}, {"above_30khz", pn_rms_deg[1]}, {"above_300khz", pn_rms_deg[2]}};
        }
        // What no receiver can track of it at this Eb/N0 (sim::phase_tracking_floor).
        const auto floor = sim.tracking_floor();
        if (floor.observation_psd > 0.0) {
            meta.extra_global["paq:phase_tracking_floor"] = {{"ebn0_db", cfg.ebn0_db},
                                                             {"observation_psd_rad2_hz", floor.observation_psd},
                                                             {"crossover_hz", floor.crossover_hz},
                                                             {"least_rms_error_deg", rms_deg_of_rad2(floor.least_error_rad2)},
                                                             {"rms_above_crossover_deg", rms_deg_of_rad2(floor.above_crossover_rad2)}};
        }
        if (!cfg.agc_steps.empty()) {
            auto& j = meta.extra_global["paq:agc_steps"];
            for (const auto& st : cfg.agc_steps) j.push_back({{"time_s", st.time_s}, {"db", st.db}});
        }
        if (cfgs.size() > 1 || cfg.shadow_depth_db > 0.0 || cfg.delay_ns > 0.0) {
            auto& j = meta.extra_global["paq:channels"];
            for (const auto& c : cfgs) {
                j.push_back({{"preset", c.preset},
                             {"ebn0_db", ebn0_json(c.ebn0_db)},
                             {"gain_db", c.gain_db},
                             {"delay_ns", c.delay_ns},
                             {"phase_rad", c.phase_rad},
                             {"shadow_depth_db", c.shadow_depth_db},
                             {"shadow_duration_s", c.shadow_duration_s},
                             {"shadow_interval_s", c.shadow_interval_s}});
            }
        }
        if (!cfg.extra_rays.empty()) {
            auto& j = meta.extra_global["paq:extra_rays"];
            for (const auto& r : cfg.extra_rays) j.push_back({{"amplitude", r.amplitude}, {"delay_ns", r.delay_ns}, {"phase_rad", r.phase_rad}});
        }
        auto writer = format == "sigmf" ? io::sample_file_writer::create_sigmf(output, meta)
                                        : io::sample_file_writer::create_raw(output, fmt);
        std::vector<cf32> buf, one;
        constexpr std::uint64_t chunk = 1 << 20;
        for (std::uint64_t done = 0; done < total;) {
            const auto n = static_cast<std::size_t>(std::min(chunk, total - done));
            buf.clear();
            if (sims.size() == 1) {
                sim.generate(n, buf);
            } else {
                // A sample of each channel per sample time.
                buf.resize(n * sims.size());
                for (std::size_t c = 0; c < sims.size(); ++c) {
                    one.clear();
                    sims[c].generate(n, one);
                    for (std::size_t i = 0; i < n; ++i) buf[i * sims.size() + c] = one[i];
                }
            }
            writer.write(buf);
            done += n;
        }
        writer.close();
        if (writer.clipped_components() > 0) {
            std::cerr << "paq-sim: warning: " << writer.clipped_components()
                      << " ci16 components clipped (noise peaks beyond full scale)\n";
        }
        std::cout << "paq-sim: wrote " << total << " samples" << (sims.size() > 1 ? " of each of " + std::to_string(sims.size()) + " channels" : "")
                  << " (" << seconds << " s, "
                  << sim.truth().packet_starts.size() << " packet starts) to " << writer.data_path().string() << "\n";
        if (sims.size() > 1 && format == "raw") {
            std::cout << "paq-sim: the raw file interleaves " << sims.size() << " channels: read it with --channels "
                      << sims.size() << " and --channel N\n";
        }
        if (cfg.phase_noise != sim::phase_noise_mask::none) {
            char only[48] = "";
            if (cfg.phase_noise_above_hz > 0.0) std::snprintf(only, sizeof only, " (only beyond %g Hz)", cfg.phase_noise_above_hz);
            std::printf("paq-sim: phase noise %s%s: %.2f deg rms in all, %.2f deg above 30 kHz, %.2f deg above 300 kHz\n",
                        std::string(sim::to_string(cfg.phase_noise)).c_str(), only, pn_rms_deg[0], pn_rms_deg[1], pn_rms_deg[2]);
        }
        if (floor.observation_psd > 0.0) {
            char where[112];
            if (floor.crossover_hz >= cfg.sample_rate_hz / 2)
                std::snprintf(where, sizeof where, "is above the observation noise's (%.3g rad^2/Hz) at half the sample rate",
                              floor.observation_psd);
            else if (floor.crossover_hz > 0.0)
                std::snprintf(where, sizeof where, "falls below the observation noise's (%.3g rad^2/Hz) beyond %.3g kHz",
                              floor.observation_psd, floor.crossover_hz / 1e3);
            else
                std::snprintf(where, sizeof where, "is below the observation noise's (%.3g rad^2/Hz) at every offset",
                              floor.observation_psd);
            std::printf("paq-sim: at Eb/N0 %.1f dB the phase's PSD %s", cfg.ebn0_db, where);
            if (floor.crossover_hz < cfg.sample_rate_hz / 2)
                std::printf(", where no receiver, even one knowing the data, removes as much as half of it: %.2f deg rms "
                            "lies there", rms_deg_of_rad2(floor.above_crossover_rad2));
            std::printf("; the least rms phase error (the Wiener smoother's) is %.2f deg\n", rms_deg_of_rad2(floor.least_error_rad2));
        }
    } catch (const std::exception& e) {
        std::cerr << "paq-sim: error: " << e.what() << "\n";
        return settings_read ? 1 : cli::usage_error;
    }
    return 0;
}
