// paq-bench: one default batch (edwards3 unless --preset, Eb/N0 12 dB unless --ebn0-db, 39,321,600 new samples + guards)
// through the CUDA backend.
//
//   end to end     process() from pinned host samples to bits on the host (it returns when
//                  they are there): host clock, 3 warm-ups, median of 20; also by CUDA events
//                  (first event before the upload to the last after the copies back)
//   per stage      the backend's stage timing (CUDA events between stages), median of 20
//   timeline       the default (multi-part) backend with stage timing on, pinned cf32 and
//                  ci16 input: when each part's stages ended, in the run with the median
//                  device time of 10 (where the parts overlap, what the last one leaves)
//   pageable       the same window from ordinary (pageable) memory, median of 5
//   CPU            the CPU backend on a subset of the batch (stated), scaled, for the ratio
//   --gpus N       N workers (runtime::worker_pool, the pool paqd runs: one backend per GPU,
//                  results in batch order): aggregate throughput over 10 N batches, against
//                  the same pool with one GPU
//
//   --input-rate HZ   the batch simulated at this input sample rate (default 2 x the bit
//                     rate: no resampling) and the receiver told so: the resampler's cost is
//                     the stage `resample`, and the whole chain's against the default run
//   --clock-ppm PPM   the transmitter's bit clock this far off (the simulator's clock_ppm):
//                     the clock tracking's cost is the stage `clock` (and the re-timed
//                     gather inside `estimates`)
//
//   --front-end-correction   the batch carries IQ 2 dB / 10 deg and DC -15 dBc, so that the
//                     front-end correction (on by default: each packet's DC and IQ imbalance
//                     estimated, and removed above its gate) applies to every packet: its
//                     cost is inside the stage `estimates`
//
//   --phase-smoother  the phase smoother on every packet (receiver.phase_smoother 1; the batch
//                     then carries a 1 kHz Wiener phase): its cost is in `detector`
//   --phase-noise HZ  the batch carries a Wiener phase of this linewidth; with the default
//                     receiver.phase_smoother (-1, auto) the packets whose PLL phase wanders
//                     are detected again by the smoother (all of them from about 100 Hz)
//   --pll-only        receiver.phase_smoother 0: the PLL alone (the gate's cost is the
//                     default run's `detector` against this one's)
//   --preset NAME     the batch's channel (paq-sim's presets). With awgn and a phase, the
//                     smoother derotates most packets by the unequalized path's phase and
//                     makes every equalized path again (over edwards3: ZF and FDE2)
//
//   --fec CODE        the batch's data fields carry this LDPC code (receiver.fec) and every
//                     stream decodes them: the decoder's cost is the stage `fec`
//   --ebn0-db DB      the batch's Eb/N0 per channel bit (default 12)
//   --channels 2      two receive channels (receiver.channels 2, joint combining): the same
//                     transmission on a second channel (the preset again, its own noise and a
//                     two-ray echo of 40 ns), its batch time against one channel's on the same
//                     batch's first channel, each pinned, median of 20 after 3 warm-ups; only
//                     that table (and its JSON)
//
//   paq-bench [--json FILE] [--gpus N] [--preset NAME] [--input-rate HZ] [--clock-ppm PPM] [--front-end-correction]
//             [--phase-smoother | --phase-noise HZ | --pll-only] [--trellis | --both-detectors] [--fec CODE] [--ebn0-db DB]
//             [--channels 2]
#include "dsp/batcher.hpp"
#include "dsp/cpu_backend.hpp"
#include "dsp/input_stage.hpp"
#include "dsp/run_tally.hpp"
#include "sim/simulator.hpp"
#include "gpu/cuda_backend.hpp"
#include "bench/bench_common.hpp"
#include "config/cli.hpp"
#include "gpu/device.hpp"
#include "runtime/backend_factory.hpp"
#include "runtime/counters.hpp"
#include "runtime/stream_engine.hpp"
#include "runtime/worker_pool.hpp"

#include <cuda_runtime_api.h>
#include <omp.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <stdexcept>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

using namespace paq;
using namespace paq::dsp;
using namespace paq::sim;
using bench::clock_type;
using bench::ms_since;

namespace {

double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
}

/// Host-clock milliseconds of `runs` calls of be.process(batch, out), after `warmups` untimed
/// ones, into one output reused as paqd reuses them (runtime::worker_pool).
std::vector<double> time_process(gpu::cuda_backend& be, const sample_batch& batch, int warmups, int runs)
{
    std::vector<double> t;
    batch_output out;
    for (int it = 0; it < warmups + runs; ++it) {
        const auto t0 = clock_type::now();
        be.process(batch, out);
        if (it >= warmups) t.push_back(ms_since(t0));
    }
    return t;
}

/// Wall time of `batches` batches through a runner on devices 0 .. n-1, results in order.
struct throughput {
    double wall_ms = 0.0;
    std::size_t batches = 0;
    bool in_order = true;
    std::size_t packets_per_batch = 0;
};

/// `batches` batches through runtime::worker_pool (the pool paqd runs) on CUDA devices
/// 0 .. n_gpus - 1, after a warm-up of two per worker. The input batches circulate: each
/// result's batch is submitted again, so as many are in flight as the pool holds.
throughput run_workers(const receiver_config& rc, int n_gpus, std::vector<sample_batch>& inputs, std::size_t batches)
{
    std::vector<int> devs;
    for (int i = 0; i < n_gpus; ++i) devs.push_back(i);
    constexpr std::size_t queue_depth = 2;
    runtime::worker_pool pool(runtime::make_backends(runtime::backend_kind::cuda, devs, 0, runtime::solver_kind::levinson, rc), {},
                              queue_depth);
    const std::size_t in_flight = std::min(inputs.size(), queue_depth + devs.size());
    std::vector<sample_batch> stash = std::move(inputs);
    std::deque<std::uint64_t> expected;
    throughput t;
    auto run = [&](std::size_t count) {
        std::size_t submitted = 0;
        for (std::size_t done = 0; done < count; ++done) {
            while (submitted < count && submitted - done < in_flight && !stash.empty()) {
                expected.push_back(stash.back().index);
                pool.submit(std::move(stash.back()));
                stash.pop_back();
                ++submitted;
            }
            auto r = pool.next();
            if (!r || !r->out) throw std::runtime_error("run_workers: a batch was lost");
            if (r->out->batch_index != expected.front()) t.in_order = false;
            expected.pop_front();
            t.packets_per_batch = r->out->packets.size();
            pool.give_back(std::move(*r->out));
            stash.push_back(std::move(r->batch));
        }
    };
    run(2 * devs.size());
    t.batches = batches;
    const auto t0 = clock_type::now();
    run(batches);
    t.wall_ms = ms_since(t0);
    pool.close();
    inputs = std::move(stash);
    return t;
}

/// One batch's counters as the registry walks them (runtime::to_json: the names of the live
/// service's and paqd replay's JSON), counted as a run of that one batch would count it: the
/// tally over its packets (PN15 on every stream; with receiver.fec the decoded information
/// bits and the codewords), the batch's own gauges, the window's samples (cf32).
nlohmann::json batch_counters(const receiver_config& rc, const batch_output& out, std::uint64_t samples)
{
    const auto geom = make_input_geometry(rc);
    run_tally tally(pn_pattern::pn15, geom.chain_rate_hz(), geom.packet_spacing_samples(), rc.streams(), framing_for(rc.fec));
    tally.add(out);
    tally.add_samples(samples);
    runtime::service_snapshot snap;
    snap.engine.fec = rc.fec_on();
    snap.engine.receive_channels = rc.channels;
    snap.engine.samples_in = samples;
    snap.engine.batches_dispatched = 1;
    snap.engine.count_published(out);
    snap.engine.tally = tally.summary();
    snap.engine.finished = true;
    return runtime::to_json(snap);
}

/// --channels 2: a batch of two receive channels through the two-channel backend against its
/// first channel through the one-channel backend (both pinned, the default parts). Prints the
/// table; writes json_path when given. Returns the exit code.
int bench_two_channels(receiver_config rc, const sim_config& sc, const std::string& json_path, const gpu::gpu_device_info& device)
{
    const auto geom = make_input_geometry(rc);
    sim_config second = sc;
    second.channel = 1;
    second.preset = "two-ray";
    second.delay_ns = 40.0;
    second.phase_rad = 1.0;
    std::vector<cf32> x, y;
    simulator(sc).generate(rc.batch_samples + geom.guard_after + 1000, x);
    simulator(second).generate(x.size(), y);
    std::vector<cf32x2> both(std::min(x.size(), y.size()));
    for (std::size_t i = 0; i < both.size(); ++i) both[i] = {x[i], y[i]};
    batcher bt1(rc.batch_samples, geom.guard_before, geom.guard_after);
    bt1.push(x);
    batcher_x2 bt2(rc.batch_samples, geom.guard_before, geom.guard_after);
    bt2.push(both);
    auto one = bt1.pop();
    auto two = bt2.pop();
    if (!one || !two) {
        std::fprintf(stderr, "paq-bench: no batch\n");
        return 1;
    }
    // Device memory each backend holds: free memory before and after it is made.
    std::size_t free0 = 0, free1 = 0, free2 = 0, total = 0;
    cudaSetDevice(0);
    cudaMemGetInfo(&free0, &total);
    gpu::cuda_backend be1(rc, 0);
    cudaMemGetInfo(&free1, &total);
    receiver_config rc2 = rc;
    rc2.channels = 2;
    gpu::cuda_backend be2(rc2, 0);
    cudaMemGetInfo(&free2, &total);
    const double gib1 = static_cast<double>(free0 - free1) / (1u << 30), gib2 = static_cast<double>(free1 - free2) / (1u << 30);
    gpu::host_pin pin1(one->samples.data(), one->samples.size() * sizeof(cf32));
    gpu::host_pin pin2(two->samples_x2.data(), two->samples_x2.size() * sizeof(cf32x2));
    const double t1 = median(time_process(be1, *one, 3, 20));
    const double t2 = median(time_process(be2, *two, 3, 20));
    const auto out1 = be1.process(*one), out2 = be2.process(*two);
    const std::size_t p1 = out1.packets.size(), p2 = out2.packets.size();
    // Where the second channel's time goes: the stages of one run each, one part.
    be1.enable_stage_timing(true);
    be2.enable_stage_timing(true);
    (void)be1.process(*one);
    (void)be2.process(*two);
    const auto s1 = be1.last_timing(), s2 = be2.last_timing();
    const double batch_s = static_cast<double>(rc.batch_samples) / (rc.input_sample_rate_hz > 0.0 ? rc.input_sample_rate_hz : 2.0 * rc.bit_rate_hz);
    std::printf("paq-bench: two receive channels on %s, batch %.4f s (%zu sample times), pinned, median of 20\n", device.name.c_str(), batch_s,
                static_cast<std::size_t>(rc.batch_samples));
    std::printf("  %-22s %10s %8s %12s %12s\n", "", "ms", "packets", "x real time", "device GiB");
    std::printf("  %-22s %10.2f %8zu %12.1f %12.2f\n", "one channel", t1, p1, batch_s * 1e3 / t1, gib1);
    std::printf("  %-22s %10.2f %8zu %12.1f %12.2f\n", "two channels (joint)", t2, p2, batch_s * 1e3 / t2, gib2);
    std::printf("  two channels / one: %.2fx\n", t2 / t1);
    nlohmann::json stages1 = nlohmann::json::object(), stages2 = nlohmann::json::object();
    for (int st = 0; st < static_cast<int>(gpu::cuda_backend::stage::count); ++st) {
        const auto k = static_cast<gpu::cuda_backend::stage>(st);
        stages1[gpu::cuda_backend::stage_name(k)] = s1.ms[static_cast<std::size_t>(st)];
        stages2[gpu::cuda_backend::stage_name(k)] = s2.ms[static_cast<std::size_t>(st)];
        std::printf("    %-14s %8.3f %8.3f ms\n", gpu::cuda_backend::stage_name(k), s1.ms[static_cast<std::size_t>(st)],
                    s2.ms[static_cast<std::size_t>(st)]);
    }
    if (!json_path.empty()) {
        const nlohmann::json j{{"gpu", gpu::describe(device)},
                               {"batch_s", batch_s},
                               {"preset", sc.preset},
                               {"ebn0_db", sc.ebn0_db},
                               {"one_channel", {{"host_end_to_end_ms", t1}, {"device_gib", gib1}, {"stages_ms", stages1},
                                                {"counters", batch_counters(rc, out1, one->owned_end - one->owned_begin)}}},
                               {"two_channels", {{"host_end_to_end_ms", t2}, {"device_gib", gib2}, {"stages_ms", stages2},
                                                 {"counters", batch_counters(rc2, out2, two->owned_end - two->owned_begin)}}},
                               {"ratio", t2 / t1}};
        std::ofstream(json_path) << j.dump(2) << "\n";
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv)
{
    std::string json_path;
    int n_gpus = 0;
    double input_rate_hz = 0.0, clock_ppm = 0.0;
    bool estimators = false, smoother = false, trellis = false, both = false, pll_only = false;
    double phase_noise_hz = 0.0;
    std::string preset = "edwards3", fec = "none";
    double ebn0_db = 12.0;
    CLI::App app{"paq-bench: one default batch of edwards3 on the GPU, stage by stage, against the CPU"};
    cli::conventions(app, "paq-bench",
                     "0 measured; 1 runtime failure (no CUDA device, no batch); 2 usage error (including --gpus above the "
                     "device count)");
    app.add_option("--json", json_path, "Write the measurements as JSON to FILE");
    app.add_option("--gpus", n_gpus, "Also time the multi-GPU pool over N devices (0: only one)")->check(CLI::Range(0, 64));
    app.add_option("--input-rate", input_rate_hz, "Input sample rate in Hz (0: 2 samples per bit)")->check(CLI::Range(0.0, 1e9));
    app.add_option("--clock-ppm", clock_ppm, "Transmitter clock offset in ppm");
    app.add_option("--preset", preset, "The batch's channel (paq-sim's presets; awgn: the phase smoother derotates most packets by the "
                                       "unequalized path's phase and makes every equalized path again)")
        ->capture_default_str()
        ->check(CLI::IsMember(channel_preset_names()));
    app.add_flag("--front-end-correction", estimators,
                 "Input with IQ 2 dB / 10 deg and DC -15 dBc, so that the front-end correction (on by default) applies to every packet");
    auto* smoother_flag = app.add_flag("--phase-smoother", smoother, "The phase smoother on every packet (input with a 1 kHz Wiener linewidth)");
    app.add_option("--phase-noise", phase_noise_hz, "Input with a Wiener phase of this linewidth, Hz (the default receiver smooths the packets whose phase wanders)")
        ->check(CLI::Range(0.0, 1e5))
        ->excludes(smoother_flag);
    app.add_flag("--pll-only", pll_only, "The PLL alone (receiver.phase_smoother 0)")->excludes(smoother_flag);
    app.add_flag("--trellis", trellis, "Detect with the trellis (receiver.detector trellis) instead of symbol by symbol");
    app.add_flag("--both-detectors", both, "Detect both ways (receiver.detector both: twelve streams)")->excludes("--trellis");
    app.add_option("--fec", fec, "The data fields' LDPC code, decoded on every stream (receiver.fec): " + names_text(fec_names))
        ->check(CLI::IsMember(names_in(fec_names)).description(""))
        ->capture_default_str();
    app.add_option("--ebn0-db", ebn0_db, "The batch's Eb/N0 per channel bit, dB")->capture_default_str()->check(CLI::Range(-10.0, 60.0));
    int channels = 1;
    app.add_option("--channels", channels, "2: a two-channel batch against one channel's (only that table)")->check(CLI::Range(1, 2));
    if (const int rc = cli::parse(app, argc, argv); rc >= 0) return rc;
    const auto devices = bench::require_devices("paq-bench");
    if (devices.empty()) return 1;
    if (n_gpus > static_cast<int>(devices.size())) {
        std::fprintf(stderr, "paq-bench: --gpus %d but %zu devices\n", n_gpus, devices.size());
        return 2;
    }
    receiver_config rc;  // defaults: one batch = 1.9065 s
    sim_config sc;
    sc.preset = preset;
    sc.ebn0_db = ebn0_db;
    sc.cfo_hz = 50'000.0;
    sc.timing_offset_samples = 0.3;
    sc.seed = 2027;
    if (input_rate_hz > 0.0) {
        rc.input_sample_rate_hz = input_rate_hz;
        sc.sample_rate_hz = input_rate_hz;
    }
    sc.clock_ppm = clock_ppm;
    if (estimators) {
        rc.front_end_correction = 1;
        sc.iq_gain_db = 2.0;
        sc.iq_phase_deg = 10.0;
        sc.dc_offset_dbc = -15.0;
    }
    if (smoother) {
        rc.phase_smoother = 1;
        sc.phase_noise_linewidth_hz = 1000.0;
    }
    if (phase_noise_hz > 0.0) sc.phase_noise_linewidth_hz = phase_noise_hz;
    if (pll_only) rc.phase_smoother = 0;
    if (trellis) rc.detector = detector_kind::trellis;
    if (both) rc.detector = detector_kind::both;
    rc.fec = sc.fec = parse_fec(fec);
    char ebn0_buf[32];
    std::snprintf(ebn0_buf, sizeof ebn0_buf, "%g", ebn0_db);
    const std::string ebn0_text = ebn0_buf;
    input_geometry geom;
    try {
        geom = make_input_geometry(rc);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "paq-bench: %s\n", e.what());
        return 2;
    }
    if (channels == 2) return bench_two_channels(rc, sc, json_path, devices[0]);
    simulator sim(sc);
    std::vector<cf32> x;
    sim.generate(rc.batch_samples + geom.guard_after + 1000, x);
    batcher bt(rc.batch_samples, geom.guard_before, geom.guard_after);
    bt.push(x);
    auto batch_opt = bt.pop();
    if (!batch_opt) {
        std::fprintf(stderr, "paq-bench: no batch\n");
        return 1;
    }
    const auto batch = std::make_shared<sample_batch>(std::move(*batch_opt));
    // The same window as ci16 (up at 4 bytes a sample, converted on the device),
    // quantized at the default scale as a ci16 source or recording holds it.
    sample_batch batch16;
    {
        constexpr float scale = 8192.0f;
        std::vector<ci16> q(x.size());
        auto quant = [](float v) { return static_cast<std::int16_t>(std::clamp(std::nearbyint(v * scale), -32767.0f, 32767.0f)); };
        for (std::size_t k = 0; k < q.size(); ++k) q[k] = ci16{quant(x[k].real()), quant(x[k].imag())};
        batcher_ci16 bt16(rc.batch_samples, geom.guard_before, geom.guard_after, scale);
        bt16.push(q);
        batch16 = std::move(*bt16.pop());
    }
    x = {};

    std::size_t free0 = 0, total = 0;
    cudaSetDevice(0);
    cudaMemGetInfo(&free0, &total);
    gpu::cuda_backend gpu_be(rc, 0);
    std::size_t free1 = 0;
    cudaMemGetInfo(&free1, &total);

    // Pageable input first (5 runs after 2 warm-ups), then the same memory page-locked.
    std::vector<double> pageable;
    batch_output measured;
    for (int it = 0; it < 7; ++it) {
        const auto t0 = clock_type::now();
        measured = gpu_be.process(*batch);
        if (it >= 2) pageable.push_back(ms_since(t0));
    }
    // The batch's counters (the registry's names), and with --fec its codewords over all
    // streams, those that failed, and the mean iterations (the decoder stops at convergence:
    // its time depends on the Eb/N0).
    const nlohmann::json counters = batch_counters(rc, measured, batch->owned_end - batch->owned_begin);
    const std::size_t packets = measured.packets.size();
    dsp::fec_summary decoding;
    if (const auto framing = dsp::framing_for(rc.fec); framing && framing->continuous()) {
        // The frames that end in each packet, but the one begun before the batch (the engine
        // decodes it when it joins two batches).
        for (std::size_t i = 0; i < measured.frames.size(); ++i) {
            const auto& pf = measured.frames[i];
            for (int s = 0; s < measured.streams; ++s) decoding.add(measured.packet_codewords(i, s) + pf.pending, pf.count - pf.pending, framing->n);
        }
    } else if (framing) {
        decoding.add(measured.codewords.data(), static_cast<int>(measured.codewords.size()), framing->n);
    }
    const std::size_t codewords = decoding.codewords, codewords_failed = decoding.codewords_failed;
    const double mean_iterations = decoding.mean_iterations();
    const auto t_pin = clock_type::now();
    gpu::host_pin pin(batch->samples.data(), batch->samples.size() * sizeof(cf32));
    const double pin_ms = ms_since(t_pin);

    std::vector<double> e2e = time_process(gpu_be, *batch, 3, 20);
    std::vector<double> e2e_ci16;
    std::size_t packets_ci16 = 0;
    {
        gpu::host_pin pin16(batch16.samples_ci16.data(), batch16.samples_ci16.size() * sizeof(ci16));
        e2e_ci16 = time_process(gpu_be, batch16, 3, 20);
        packets_ci16 = gpu_be.process(batch16).packets.size();
    }
    // The default backend splits the batch into parts that overlap (upload, device, host
    // records): its end to end is the headline. Where the time goes is timed on a one-part
    // backend running the same kernels on the whole window, stage after stage.
    gpu_be.enable_stage_timing(true);
    std::vector<double> parts_events, parts_timed;
    bool pinned_seen = true;
    int parts_used = 0;
    // The timeline of the run whose device time is the median one: when each part's stages
    // ended (where the parts overlap, and what the last part leaves at the end).
    std::vector<std::pair<double, gpu::cuda_backend::timing>> timed_runs;
    for (int it = 0; it < 11; ++it) {
        const auto t0 = clock_type::now();
        const auto out = gpu_be.process(*batch);
        const double host_ms = ms_since(t0);
        if (it == 0) continue;
        const auto tm = gpu_be.last_timing();
        pinned_seen = pinned_seen && tm.pinned_input;
        parts_used = tm.parts;
        parts_events.push_back(tm.device_ms);
        parts_timed.push_back(host_ms);
        timed_runs.emplace_back(host_ms, tm);
    }
    auto median_run = [](std::vector<std::pair<double, gpu::cuda_backend::timing>>& runs) {
        std::sort(runs.begin(), runs.end(), [](const auto& a, const auto& b) { return a.second.device_ms < b.second.device_ms; });
        return runs[runs.size() / 2];
    };
    const auto timeline_pinned = median_run(timed_runs);
    timed_runs.clear();
    {
        gpu::host_pin pin16(batch16.samples_ci16.data(), batch16.samples_ci16.size() * sizeof(ci16));
        for (int it = 0; it < 11; ++it) {
            const auto t0 = clock_type::now();
            const auto out = gpu_be.process(batch16);
            const double host_ms = ms_since(t0);
            if (it > 0) timed_runs.emplace_back(host_ms, gpu_be.last_timing());
        }
    }
    const auto timeline_ci16 = median_run(timed_runs);
    gpu_be.enable_stage_timing(false);
    const double gpu_ms = median(e2e);

    std::vector<std::vector<double>> stage(gpu::cuda_backend::stage_count);
    std::vector<double> e2e_events, e2e_timed, one_part_e2e;
    {
        gpu::cuda_backend one(rc, 0, "levinson", 1);
        one_part_e2e = time_process(one, *batch, 3, 20);
        one.enable_stage_timing(true);
        for (int it = 0; it < 21; ++it) {
            const auto t0 = clock_type::now();
            const auto out = one.process(*batch);
            const double host_ms = ms_since(t0);
            if (it == 0) continue;
            const auto tm = one.last_timing();
            for (int s = 0; s < gpu::cuda_backend::stage_count; ++s) stage[static_cast<std::size_t>(s)].push_back(tm.ms[static_cast<std::size_t>(s)]);
            e2e_events.push_back(tm.device_ms);
            e2e_timed.push_back(host_ms);
        }
    }

    // End to end against the number of parts (the default is gpu::cuda_backend::default_parts).
    std::vector<std::pair<int, double>> parts_sweep;
    for (const int parts : {2, 3, 6, 8}) {
        gpu::cuda_backend pb(rc, 0, "levinson", parts);
        parts_sweep.emplace_back(parts, median(time_process(pb, *batch, 3, 15)));
    }

    std::sort(e2e.begin(), e2e.end());

    // The whole chain with each ZF/MMSE solver selectable by name (pipeline.solver): same
    // pinned input, 2 warm-ups, median of 5, stage timing on for the solver stage.
    struct solver_run {
        std::string name;
        double e2e_ms = 0.0, solvers_ms = 0.0;
    };
    std::vector<solver_run> solver_runs;
    for (const char* name : {"cusolver-dn-chol", "cusolver-sp-qr"}) {
        gpu::cuda_backend sb(rc, 0, name, 1);
        sb.enable_stage_timing(true);
        std::vector<double> t, st;
        for (int it = 0; it < 7; ++it) {
            const auto t0 = clock_type::now();
            const auto out = sb.process(*batch);
            const double ms = ms_since(t0);
            if (it < 2) continue;
            t.push_back(ms);
            st.push_back(sb.last_timing().ms[static_cast<std::size_t>(gpu::cuda_backend::stage::solvers)]);
        }
        solver_runs.push_back({name, median(t), median(st)});
    }

    // CPU backend on the first 200 packets' worth of the same window, scaled by packets.
    sample_batch sub = *batch;
    const std::size_t sub_len = static_cast<std::size_t>(200.0 * waveform::L_pkt * geom.ratio) + geom.guard_after;
    sub.samples.resize(sub_len);
    sub.owned_end = sub_len - geom.guard_after;
    cpu_backend cpu(rc);
    const auto c0 = clock_type::now();
    const auto cpu_out = cpu.process(sub);
    const double cpu_sub_ms = ms_since(c0);
    const double cpu_ms = cpu_sub_ms * static_cast<double>(packets) / static_cast<double>(cpu_out.packets.size());

    const double batch_ms = 1000.0 * static_cast<double>(rc.batch_samples) / geom.input_rate_hz;
    const double window_bytes = static_cast<double>(batch->samples.size() * sizeof(cf32));
    nlohmann::json stages = nlohmann::json::object();
    for (int s = 0; s < gpu::cuda_backend::stage_count; ++s) {
        stages[gpu::cuda_backend::stage_name(static_cast<gpu::cuda_backend::stage>(s))] = median(stage[static_cast<std::size_t>(s)]);
    }
    nlohmann::json j{{"gpu", gpu::describe(devices[0])},
                     {"input", preset + ", Eb/N0 " + ebn0_text + " dB, CFO 50 kHz, timing 0.3, seed 2027; one default batch"},
                     {"input_rate_hz", geom.input_rate_hz},
                     {"bit_rate_hz", geom.bit_rate_hz},
                     {"input_ratio", geom.ratio},
                     {"clock_ppm", clock_ppm},
                     {"clock_tracking", rc.clock_tracking},
                     {"front_end_correction", rc.front_end_correction},
                     {"phase_smoother", rc.phase_smoother},
                     {"phase_noise_linewidth_hz", sc.phase_noise_linewidth_hz},
                     {"detector", std::string(to_string(rc.detector))},
                     {"fec", std::string(to_string(rc.fec))},
                     {"ebn0_db", sc.ebn0_db},
                     {"counters", counters},
                     {"window_bytes", window_bytes},
                     {"gpu_end_to_end_ms_median", gpu_ms},
                     {"gpu_end_to_end_ms_min", e2e.front()},
                     {"gpu_end_to_end_ms_max", e2e.back()},
                     {"parts", parts_used},
                     {"gpu_end_to_end_cuda_events_ms_median", median(parts_events)},
                     {"gpu_end_to_end_with_stage_timing_ms_median", median(parts_timed)},
                     {"one_part_end_to_end_ms_median", median(one_part_e2e)},
                     {"one_part_end_to_end_cuda_events_ms_median", median(e2e_events)},
                     {"one_part_end_to_end_with_stage_timing_ms_median", median(e2e_timed)},
                     {"input_pinned", pinned_seen},
                     {"gpu_end_to_end_ci16_ms_median", median(e2e_ci16)},
                     {"packets_ci16", packets_ci16},
                     {"pin_window_ms", pin_ms},
                     {"gpu_end_to_end_pageable_ms_median", median(pageable)},
                     {"real_time_factor", batch_ms / gpu_ms},
                     {"gpu_memory_bytes", free0 - free1},
                     {"cpu_threads", omp_get_max_threads()},
                     {"cpu_subset_packets", cpu_out.packets.size()},
                     {"cpu_subset_ms", cpu_sub_ms},
                     {"cpu_scaled_ms", cpu_ms},
                     {"gpu_vs_cpu", cpu_ms / gpu_ms},
                     {"one_part_stages_ms_median", stages}};
    for (const auto& r : solver_runs) {
        j["solver_" + r.name] = {{"end_to_end_ms_median", r.e2e_ms}, {"solvers_stage_ms_median", r.solvers_ms}};
    }
    nlohmann::json sweep = nlohmann::json::object();
    sweep["1"] = median(one_part_e2e);
    sweep[std::to_string(parts_used)] = gpu_ms;
    for (const auto& [parts, ms] : parts_sweep) sweep[std::to_string(parts)] = ms;
    j["end_to_end_ms_median_by_parts"] = sweep;
    // Per part, when each of its stages ended (ms from the first part's start), in the median
    // timed run; and the host's end to end of that run (records filled, process() returned).
    auto timeline_json = [](const std::pair<double, gpu::cuda_backend::timing>& run) {
        nlohmann::json t{{"host_end_to_end_ms", run.first},
                         {"device_ms", run.second.device_ms},
                         {"host_queued_ms", run.second.host_queued_ms},
                         {"host_last_collect_ms", run.second.host_last_collect_ms},
                         {"host_last_records_ms", run.second.host_last_records_ms},
                         {"host_total_ms", run.second.host_total_ms},
                         {"host_first_clock_ms", run.second.host_first_clock_ms},
                         {"host_first_locate_wait_ms", run.second.host_first_locate_wait_ms},
                         {"host_first_queue_back_ms", run.second.host_first_queue_back_ms},
                         {"host_stream_fec_ms", run.second.host_stream_fec_ms},
                         {"host_stream_find_ms", run.second.host_stream_find_ms}};
        for (const auto& e : run.second.timeline) t["part " + std::to_string(e.part)][gpu::cuda_backend::stage_name(e.st)] = e.ms;
        return t;
    };
    j["timeline_pinned"] = timeline_json(timeline_pinned);
    j["timeline_ci16"] = timeline_json(timeline_ci16);

    std::printf("| what | value |\n|---|---|\n");
    const char* smoother_text = rc.phase_smoother == 1 ? "on every packet" : rc.phase_smoother == 0 ? "off (the PLL alone)" : "auto";
    std::printf("| input | %.6g S/s, %.6g bit/s (%.4f input samples per 2-sps sample), clock %+.1f ppm, tracking %s, front-end correction %s, Wiener phase %.0f Hz, phase smoother %s, detector %s |\n",
                geom.input_rate_hz, geom.bit_rate_hz, geom.ratio, clock_ppm, rc.clock_tracking ? "on" : "off",
                rc.front_end_correction_on() ? (estimators ? "on (input: IQ 2 dB / 10 deg, DC -15 dBc)" : "on (input: clean)") : "off",
                sc.phase_noise_linewidth_hz, smoother_text, std::string(to_string(rc.detector)).c_str());
    std::printf("| packets in the batch | %zu |\n", packets);
    if (rc.fec_on()) {
        std::printf("| fec | %s at Eb/N0 %.2f dB a channel bit: %zu codewords, %zu failed, %.2f iterations on average |\n",
                    std::string(to_string(rc.fec)).c_str(), sc.ebn0_db, codewords, codewords_failed, mean_iterations);
    }
    std::printf("| GPU end to end, pinned input, median of 20 (min / max) | %.2f ms (%.2f / %.2f) |\n", gpu_ms, e2e.front(), e2e.back());
    std::printf("| real-time factor (%.1f ms / time) | %.1fx |\n", batch_ms, batch_ms / gpu_ms);
    std::printf("| GPU end to end, ci16 input (converted on the device), pinned, median of 20 | %.2f ms (%.1fx real time; %zu packets) |\n",
                median(e2e_ci16), batch_ms / median(e2e_ci16), packets_ci16);
    std::printf("| parts per batch (concurrent) | %d |\n", parts_used);
    std::printf("| end to end by CUDA events (stage timing on) | %.2f ms |\n", median(parts_events));
    std::printf("| one part (no overlap), pinned input, median of 20 | %.2f ms (%.1fx real time) |\n", median(one_part_e2e),
                batch_ms / median(one_part_e2e));
    std::printf("| end to end, pageable input, median of 5 | %.2f ms |\n", median(pageable));
    std::printf("| end to end by parts (median of 15; 1 and %d: of 20) |", parts_used);
    for (const auto& [parts, ms] : sweep.items()) std::printf(" %s: %.2f ms;", parts.c_str(), ms.get<double>());
    std::printf(" |\n");
    std::printf("| GPU memory held by the backend | %.2f GiB |\n", static_cast<double>(free0 - free1) / (1 << 30));
    std::printf("| CPU backend, %zu packets, %d threads | %.0f ms (scaled to the batch: %.0f ms) |\n", cpu_out.packets.size(),
                omp_get_max_threads(), cpu_sub_ms, cpu_ms);
    std::printf("| GPU / CPU speed ratio | %.0fx |\n", cpu_ms / gpu_ms);
    // The timeline: one row per stage, one column per part, the ms at which it ended.
    for (const auto* run : {&timeline_pinned, &timeline_ci16}) {
        const auto& tm = run->second;
        std::printf("| timeline, %s input (stage timing on; ms from the first part's start, when each part's stage ended; the median run: device %.2f ms, host %.2f ms) |",
                    run == &timeline_ci16 ? "ci16" : "pinned cf32", tm.device_ms, run->first);
        for (int k = 0; k < tm.parts; ++k) std::printf(" part %d |", k);
        std::printf("\n|---|");
        for (int k = 0; k < tm.parts; ++k) std::printf("---|");
        std::printf("\n");
        for (int st = 0; st < gpu::cuda_backend::stage_count; ++st) {
            std::vector<double> ends(static_cast<std::size_t>(tm.parts), -1.0);
            for (const auto& e : tm.timeline) {
                if (static_cast<int>(e.st) == st) ends[static_cast<std::size_t>(e.part)] = e.ms;
            }
            if (std::all_of(ends.begin(), ends.end(), [](double v) { return v < 0.0; })) continue;
            std::printf("| %s |", gpu::cuda_backend::stage_name(static_cast<gpu::cuda_backend::stage>(st)));
            for (const double v : ends) v < 0.0 ? std::printf(" |") : std::printf(" %.3f |", v);
            std::printf("\n");
        }
        std::printf("| host: all parts queued %.3f ms after process() began; the last part's collection %.3f ms (its records and bits %.3f ms); process() %.3f ms; the first part's clock %.3f ms (waiting for its location %.3f ms), then queueing the rest of its chain %.3f ms |\n",
                    tm.host_queued_ms, tm.host_last_collect_ms, tm.host_last_records_ms, tm.host_total_ms, tm.host_first_clock_ms,
                    tm.host_first_locate_wait_ms, tm.host_first_queue_back_ms);
        if (tm.host_stream_fec_ms > 0.0) {
            std::printf("| host: the continuous stream after the parts %.3f ms (its frames found %.3f ms; gathered, decoded and back %.3f ms) |\n",
                        tm.host_stream_fec_ms, tm.host_stream_find_ms, tm.host_stream_fec_ms - tm.host_stream_find_ms);
        }
    }
    std::printf("| stage (CUDA events, median of 20; one part) | ms |\n");
    for (int s = 0; s < gpu::cuda_backend::stage_count; ++s) {
        std::printf("| stage %s | %.3f |\n", gpu::cuda_backend::stage_name(static_cast<gpu::cuda_backend::stage>(s)),
                    median(stage[static_cast<std::size_t>(s)]));
    }
    std::printf("| end to end with stage timing on, host clock | %.2f |\n", median(e2e_timed));
    std::printf("| upload bandwidth (window / upload_metric stage) | %.1f GB/s |\n",
                window_bytes / 1e6 / median(stage[0]));
    std::printf("| solver levinson (default): end to end / solver stage | %.2f ms / %.3f ms |\n", median(e2e_timed),
                median(stage[static_cast<std::size_t>(gpu::cuda_backend::stage::solvers)]));
    for (const auto& r : solver_runs) {
        std::printf("| solver %s (+ Levinson ZF fallback): end to end / solver stage | %.2f ms / %.3f ms |\n", r.name.c_str(),
                    r.e2e_ms, r.solvers_ms);
    }

    if (n_gpus >= 1) {
        // As many batch objects as the pool holds in flight (its queue of 2 and one per
        // worker), page-locked, with distinct indices so that the order of the results is checked.
        std::vector<sample_batch> inputs;
        std::vector<std::unique_ptr<gpu::host_pin>> pins;
        for (std::uint64_t k = 0; k < 2 + static_cast<std::uint64_t>(n_gpus); ++k) {
            inputs.push_back(*batch);
            inputs.back().index = batch->index + k;
            pins.push_back(std::make_unique<gpu::host_pin>(inputs.back().samples.data(), inputs.back().samples.size() * sizeof(cf32)));
        }
        const std::size_t n_batches = 10 * static_cast<std::size_t>(n_gpus);
        const auto one = run_workers(rc, 1, inputs, n_batches);
        const auto many = run_workers(rc, n_gpus, inputs, n_batches);
        const double one_ms = one.wall_ms / static_cast<double>(one.batches);
        const double many_ms = many.wall_ms / static_cast<double>(many.batches);
        j["multi_gpu"] = {{"gpus", n_gpus},
                          {"batches", n_batches},
                          {"one_gpu_ms_per_batch", one_ms},
                          {"n_gpu_ms_per_batch", many_ms},
                          {"aggregate_real_time_factor", batch_ms / many_ms},
                          {"speedup", one_ms / many_ms},
                          {"results_in_order", one.in_order && many.in_order},
                          {"packets_per_batch", many.packets_per_batch}};
        std::printf("| 1 worker: %zu batches, ms per batch (throughput) | %.2f ms (%.1fx real time) |\n", n_batches, one_ms,
                    batch_ms / one_ms);
        std::printf("| %d workers: ms per batch, aggregate | %.2f ms (%.1fx real time), speedup %.2fx, in order: %s |\n", n_gpus,
                    many_ms, batch_ms / many_ms, one_ms / many_ms, (one.in_order && many.in_order) ? "yes" : "NO");
    }
    if (!json_path.empty()) std::ofstream(json_path) << j.dump(2) << "\n";
    return 0;
}
