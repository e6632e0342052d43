// paq-bench-solvers: the three batched ZF/MMSE solvers side by side on the equalizer systems
// of one real batch (edwards3, Eb/N0 12 dB, 3104 packets, channels estimated on the GPU);
// then the four solvers of the two-channel joint MMSE equations (gpu/combining.hpp) on the
// same batch received on a second antenna as well (two-ray, 40 ns later, its own noise).
// Time: CUDA events from h on the device to c on the device, 3 warm-ups, median of 20.
// Accuracy: relative error of the taps against the CPU's double-precision solve.
//
//   paq-bench-solvers [--json FILE]
#include "dsp/batch.hpp"
#include "dsp/combining.hpp"
#include "dsp/equalizers.hpp"
#include "dsp/preamble_detector.hpp"
#include "sim/simulator.hpp"
#include "dsp/waveform.hpp"
#include "bench/bench_common.hpp"
#include "config/cli.hpp"
#include "gpu/device.hpp"
#include "gpu/combining.hpp"
#include "gpu/estimators.hpp"
#include "gpu/equalizers.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

using namespace paq;
using namespace paq::dsp;
using namespace paq::sim;

int main(int argc, char** argv)
{
    std::string json_path;
    CLI::App app{"paq-bench-solvers: the batched ZF/MMSE solvers side by side on one batch's systems"};
    cli::conventions(app, "paq-bench-solvers", "0 measured; 1 runtime failure (no CUDA device, solver error); 2 usage error");
    app.add_option("--json", json_path, "Write the measurements as JSON to FILE");
    if (const int rc = cli::parse(app, argc, argv); rc >= 0) return rc;
    const auto devices = bench::require_devices("paq-bench-solvers");
    if (devices.empty()) return 1;
    constexpr std::size_t packets = 3104;
    const auto t_start = std::chrono::steady_clock::now();

    // One batch of edwards3 at 12 dB.
    sim_config sc;
    sc.preset = "edwards3";
    sc.ebn0_db = 12.0;
    sc.cfo_hz = 50'000.0;
    sc.timing_offset_samples = 0.3;
    sc.seed = 2026;
    simulator sim(sc);
    std::vector<cf32> x;
    sim.generate((packets + 2) * waveform::L_pkt, x);
    const auto& t = get_receiver_tables(16384);
    std::vector<double> metric(x.size() - detector_span + 1);
    preamble_metric(x, metric, t.preamble_template);
    sample_batch b;
    b.samples = x;
    b.owned_end = x.size();
    b.segment_start = b.segment_end = true;
    auto found = locate_packets(b, metric, 0.25, t.template_offset);
    if (found.starts.size() < packets) {
        std::fprintf(stderr, "paq-bench-solvers: only %zu packets found\n", found.starts.size());
        return 1;
    }
    found.starts.resize(packets);
    gpu::estimators fe(0, x.size(), packets);
    const auto est = fe.estimate(x, found.starts);
    std::vector<gpu::channel32> h(packets);
    std::vector<std::array<cf64, chain::L_ch>> h64(packets);
    std::vector<double> zero(packets, 0.0), mmse_load(packets);
    for (std::size_t p = 0; p < packets; ++p) {
        h[p] = est[p].h;
        for (int a = 0; a < chain::L_ch; ++a) h64[p][static_cast<std::size_t>(a)] = cf64(h[p][static_cast<std::size_t>(a)].real(), h[p][static_cast<std::size_t>(a)].imag());
        mmse_load[p] = 2.0 * est[p].sigma2;
    }

    // References in double, and the condition numbers.
    std::vector<eq_taps> ref_zf(packets), ref_mmse(packets);
    std::vector<double> cond_zf(packets), cond_mmse(packets);
#pragma omp parallel for
    for (std::size_t p = 0; p < packets; ++p) {
        std::vector<cf64> work;
        const auto rh = channel_autocorrelation(h64[p]);
        (void)solve_equalizer(h64[p], rh, 0.0, ref_zf[p], work);
        (void)solve_equalizer(h64[p], rh, mmse_load[p], ref_mmse[p], work);
        cond_zf[p] = spectral_condition(h64[p], 0.0);
        cond_mmse[p] = spectral_condition(h64[p], mmse_load[p]);
    }

    nlohmann::json out;
    out["gpu"] = gpu::describe(devices[0]);
    out["packets"] = packets;
    out["input"] = "edwards3, Eb/N0 12 dB, CFO 50 kHz, timing 0.3, seed 2026; channels from gpu::estimators";
    auto median_of = [](std::vector<float> v) {
        std::sort(v.begin(), v.end());
        return static_cast<double>(v[v.size() / 2]);
    };
    auto cond_stats = [](std::vector<double> c) {
        std::sort(c.begin(), c.end());
        return std::array<double, 3>{c[c.size() / 2], c[c.size() * 99 / 100], c.back()};
    };
    const auto czf = cond_stats(cond_zf), cmm = cond_stats(cond_mmse);
    out["condition_zf"] = {{"median", czf[0]}, {"p99", czf[1]}, {"max", czf[2]}};
    out["condition_mmse"] = {{"median", cmm[0]}, {"p99", cmm[1]}, {"max", cmm[2]}};

    struct row {
        std::string name;
        double zf_ms, mmse_ms, zf_err_med, zf_err_max, mmse_err_med, mmse_err_max;
        std::size_t failed;
    };
    std::vector<row> rows;
    for (const char* name : {"cusolver-sp-qr", "cusolver-dn-chol", "levinson"}) {
        auto solver = gpu::make_batched_solver(name, 0, packets);
        std::vector<gpu::eq_taps32> c(packets);
        std::vector<std::uint8_t> ok(packets);
        row r{name, 0, 0, 0, 0, 0, 0, 0};
        for (int which = 0; which < 2; ++which) {
            const auto& load = which == 0 ? zero : mmse_load;
            std::vector<float> times;
            for (int it = 0; it < 23; ++it) {
                solver->solve(h, load, c, ok);
                if (it >= 3) times.push_back(solver->last_kernel_ms());
            }
            const auto& ref = which == 0 ? ref_zf : ref_mmse;
            const auto& cond = which == 0 ? cond_zf : cond_mmse;
            std::vector<double> err;
            for (std::size_t p = 0; p < packets; ++p) {
                if (!ok[p]) {
                    ++r.failed;
                    continue;
                }
                if (cond[p] > 1e6) continue;  // accuracy is promised up to 1e6
                double d = 0.0, n = 0.0;
                for (int i = 0; i < chain::L_eq; ++i) {
                    const cf64 g(c[p][static_cast<std::size_t>(i)].real(), c[p][static_cast<std::size_t>(i)].imag());
                    d += std::norm(g - ref[p][static_cast<std::size_t>(i)]);
                    n += std::norm(ref[p][static_cast<std::size_t>(i)]);
                }
                err.push_back(std::isfinite(d) ? std::sqrt(d / n) : INFINITY);
            }
            std::sort(err.begin(), err.end());
            const double med = err.empty() ? NAN : err[err.size() / 2], mx = err.empty() ? NAN : err.back();
            (which == 0 ? r.zf_ms : r.mmse_ms) = median_of(times);
            (which == 0 ? r.zf_err_med : r.mmse_err_med) = med;
            (which == 0 ? r.zf_err_max : r.mmse_err_max) = mx;
        }
        rows.push_back(r);
    }
    const double base = rows[0].zf_ms + rows[0].mmse_ms;
    for (const auto& r : rows) {
        out["solvers"].push_back({{"name", r.name},
                                  {"zf_ms", r.zf_ms},
                                  {"mmse_ms", r.mmse_ms},
                                  {"speedup_vs_sp_qr", base / (r.zf_ms + r.mmse_ms)},
                                  {"zf_rel_err_median", r.zf_err_med},
                                  {"zf_rel_err_max", r.zf_err_max},
                                  {"mmse_rel_err_median", r.mmse_err_med},
                                  {"mmse_rel_err_max", r.mmse_err_max},
                                  {"systems_failed", r.failed}});
    }
    // Two channels: the same transmission on a second antenna (simulator channel 1: its own
    // noise, a two-ray channel, 40 ns later), estimated at the same starts.
    sim_config sc2 = sc;
    sc2.channel = 1;
    sc2.preset = "two-ray";
    sc2.delay_ns = 40.0;
    simulator sim2(sc2);
    std::vector<cf32> x2;
    sim2.generate((packets + 2) * waveform::L_pkt, x2);
    const auto est2 = fe.estimate(x2, found.starts);
    std::vector<gpu::channel_pair32> h2(packets);
    std::vector<gpu::load_pair> loads2(packets);
    std::vector<std::array<eq_taps, 2>> ref2(packets);
    std::vector<double> cond2(packets);
    std::size_t regularized = 0;
#pragma omp parallel for reduction(+ : regularized)
    for (std::size_t p = 0; p < packets; ++p) {
        std::array<channel_taps, 2> hp{};
        for (std::size_t c = 0; c < 2; ++c) {
            h2[p][c] = c == 0 ? est[p].h : est2[p].h;
            for (std::size_t a = 0; a < static_cast<std::size_t>(chain::L_ch); ++a) hp[c][a] = cf64(h2[p][c][a].real(), h2[p][c][a].imag());
        }
        loads2[p] = {2.0 * est[p].sigma2, 2.0 * est2[p].sigma2};
        std::vector<cf64> work;
        if (solve_joint_equalizer(hp, loads2[p], ref2[p], work).regularized) ++regularized;
        cond2[p] = joint_spectral_condition(hp, loads2[p]);
    }
    const auto cj = cond_stats(cond2);
    out["two_channels"]["input"] = "channel 1 as above; channel 2: two-ray, 40 ns later, Eb/N0 12 dB, its own noise; both estimated by gpu::estimators at channel 1's starts";
    out["two_channels"]["condition_mmse"] = {{"median", cj[0]}, {"p99", cj[1]}, {"max", cj[2]}};
    struct joint_row {
        std::string name;
        double ms, err_med, err_max;
        int steps_med, steps_max;
        std::size_t failed;
    };
    std::vector<joint_row> joint_rows;
    for (const auto name : gpu::joint_solver_names) {
        auto solver = gpu::make_joint_solver(name, 0, packets);
        std::vector<gpu::taps_pair32> c(packets);
        std::vector<std::uint8_t> ok(packets);
        std::vector<float> times;
        for (int it = 0; it < 23; ++it) {
            solver->solve(h2, loads2, c, ok);
            if (it >= 3) times.push_back(solver->last_kernel_ms());
        }
        joint_row r{std::string(name), median_of(times), 0, 0, -1, -1, 0};
        std::vector<double> err;
        for (std::size_t p = 0; p < packets; ++p) {
            if (!ok[p]) {
                ++r.failed;
                continue;
            }
            if (cond2[p] > 1e6) continue;
            double d = 0.0, n = 0.0;
            for (std::size_t ch = 0; ch < 2; ++ch) {
                for (std::size_t i = 0; i < static_cast<std::size_t>(chain::L_eq); ++i) {
                    d += std::norm(cf64(c[p][ch][i].real(), c[p][ch][i].imag()) - ref2[p][ch][i]);
                    n += std::norm(ref2[p][ch][i]);
                }
            }
            err.push_back(std::isfinite(d) ? std::sqrt(d / n) : INFINITY);
        }
        std::sort(err.begin(), err.end());
        r.err_med = err.empty() ? NAN : err[err.size() / 2];
        r.err_max = err.empty() ? NAN : err.back();
        if (auto steps = solver->last_iterations(); !steps.empty()) {
            std::sort(steps.begin(), steps.end());
            r.steps_med = steps[steps.size() / 2];
            r.steps_max = steps.back();
        }
        joint_rows.push_back(r);
    }
    const double joint_base = joint_rows.back().ms;  // cusolver-dn-chol, the last name
    for (const auto& r : joint_rows) {
        nlohmann::json j{{"name", r.name},
                         {"mmse_ms", r.ms},
                         {"speedup_vs_cusolver_dn_chol", joint_base / r.ms},
                         {"mmse_rel_err_median", r.err_med},
                         {"mmse_rel_err_max", r.err_max},
                         {"systems_failed", r.failed}};
        if (r.steps_med >= 0) j["steps"] = {{"median", r.steps_med}, {"max", r.steps_max}};
        out["two_channels"]["solvers"].push_back(j);
    }
    out["two_channels"]["reference_regularized"] = regularized;
    out["seconds_total"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
    if (!json_path.empty()) std::ofstream(json_path) << out.dump(2) << "\n";

    std::printf("ZF condition: median %.2e, p99 %.2e, max %.2e; MMSE: median %.2e, p99 %.2e, max %.2e (%zu packets)\n",
                czf[0], czf[1], czf[2], cmm[0], cmm[1], cmm[2], packets);
    std::printf("| solver | ZF ms | MMSE ms | ZF+MMSE vs sp-qr | rel. err ZF (median / max, cond <= 1e6) | rel. err MMSE (median / max) | failed |\n");
    std::printf("|---|---|---|---|---|---|---|\n");
    for (const auto& r : rows) {
        std::printf("| %s | %.3f | %.3f | %.1fx | %.1e / %.1e | %.1e / %.1e | %zu |\n", r.name.c_str(), r.zf_ms, r.mmse_ms,
                    base / (r.zf_ms + r.mmse_ms), r.zf_err_med, r.zf_err_max, r.mmse_err_med, r.mmse_err_max, r.failed);
    }
    std::printf("\nTwo channels, joint MMSE (372 unknowns a packet): condition median %.2e, p99 %.2e, max %.2e\n", cj[0], cj[1],
                cj[2]);
    std::printf("| solver | MMSE ms | vs cusolver-dn-chol | rel. err (median / max, cond <= 1e6) | steps (median / max) | failed |\n");
    std::printf("|---|---|---|---|---|---|\n");
    for (const auto& r : joint_rows) {
        char steps[48] = "-";
        if (r.steps_med >= 0) std::snprintf(steps, sizeof steps, "%d / %d", r.steps_med, r.steps_max);
        std::printf("| %s | %.3f | %.1fx | %.1e / %.1e | %s | %zu |\n", r.name.c_str(), r.ms, joint_base / r.ms, r.err_med, r.err_max,
                    steps, r.failed);
    }
    return 0;
}
