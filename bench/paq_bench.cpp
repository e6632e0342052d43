// paq-bench: one default batch (edwards3, Eb/N0 12 dB, 39,321,600 new samples + guards)
// through the CUDA backend, end to end from host samples to host bits (process() returns
// when the bits are on the host): 3 warm-ups, median of 20. The CPU backend on a subset of
// the same batch (stated), scaled to the batch, for the GPU/CPU ratio. GPU memory in use.
//
//   paq-bench [--json FILE]
#include "dsp/batcher.hpp"
#include "dsp/cpu_backend.hpp"
#include "dsp/simulator.hpp"
#include "gpu/cuda_backend.hpp"
#include "bench/bench_common.hpp"
#include "gpu/device.hpp"

#include <cuda_runtime_api.h>
#include <omp.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

using namespace paq;
using namespace paq::dsp;

int main(int argc, char** argv)
{
    const auto json_opt = bench::parse_json_option(argc, argv, "paq-bench");
    if (!json_opt) return 2;
    const std::string json_path = *json_opt;
    const auto devices = bench::require_devices("paq-bench");
    if (devices.empty()) return 1;
    receiver_config rc;  // defaults: one batch = 1.9065 s
    sim_config sc;
    sc.preset = "edwards3";
    sc.ebn0_db = 12.0;
    sc.cfo_hz = 50'000.0;
    sc.timing_offset_samples = 0.3;
    sc.seed = 2027;
    simulator sim(sc);
    std::vector<cf32> x;
    sim.generate(rc.batch_samples + batch_guard_after + 1000, x);
    batcher bt(rc.batch_samples);
    bt.push(x);
    auto batch = bt.pop();
    if (!batch) {
        std::fprintf(stderr, "paq-bench: no batch\n");
        return 1;
    }

    std::size_t free0 = 0, total = 0;
    cudaMemGetInfo(&free0, &total);
    gpu::cuda_backend gpu_be(rc, 0);
    std::size_t free1 = 0;
    cudaMemGetInfo(&free1, &total);

    using clock = std::chrono::steady_clock;
    std::vector<double> ms, ph_metric, ph_locate, ph_device, ph_copy;
    std::size_t packets = 0;
    for (int it = 0; it < 23; ++it) {
        const auto t0 = clock::now();
        const auto out = gpu_be.process(*batch);
        const auto t1 = clock::now();
        packets = out.packets.size();
        if (it >= 3) {
            ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
            const auto tm = gpu_be.last_timing();
            ph_metric.push_back(tm.metric_ms);
            ph_locate.push_back(tm.locate_ms);
            ph_device.push_back(tm.device_ms);
            ph_copy.push_back(tm.copy_back_ms);
        }
    }
    const auto median = [](std::vector<double> v) {
        std::sort(v.begin(), v.end());
        return v[v.size() / 2];
    };
    std::sort(ms.begin(), ms.end());
    const double gpu_ms = ms[ms.size() / 2];

    // CPU backend on the first 200 packets' worth of the same window, scaled by packets.
    sample_batch sub = *batch;
    const std::size_t sub_len = 200 * waveform::L_pkt + batch_guard_after;
    sub.samples.resize(sub_len);
    sub.owned_end = sub_len - batch_guard_after;
    cpu_backend cpu(rc);
    const auto c0 = clock::now();
    const auto cpu_out = cpu.process(sub);
    const double cpu_sub_ms = std::chrono::duration<double, std::milli>(clock::now() - c0).count();
    const double cpu_ms = cpu_sub_ms * static_cast<double>(packets) / static_cast<double>(cpu_out.packets.size());

    const double batch_ms = 1000.0 * static_cast<double>(rc.batch_samples) / waveform::default_sample_rate_hz;
    nlohmann::json j{{"gpu", gpu::describe(devices[0])},
                     {"input", "edwards3, Eb/N0 12 dB, CFO 50 kHz, timing 0.3, seed 2027; one default batch"},
                     {"packets", packets},
                     {"gpu_end_to_end_ms_median", gpu_ms},
                     {"gpu_end_to_end_ms_min", ms.front()},
                     {"gpu_end_to_end_ms_max", ms.back()},
                     {"real_time_factor", batch_ms / gpu_ms},
                     {"gpu_memory_bytes", free0 - free1},
                     {"cpu_threads", omp_get_max_threads()},
                     {"cpu_subset_packets", cpu_out.packets.size()},
                     {"cpu_subset_ms", cpu_sub_ms},
                     {"cpu_scaled_ms", cpu_ms},
                     {"gpu_vs_cpu", cpu_ms / gpu_ms},
                     {"phases_ms_median", {{"metric_upload_and_back", median(ph_metric)}, {"locate_on_host", median(ph_locate)},
                                           {"device_chain", median(ph_device)}, {"copy_back_and_records", median(ph_copy)}}}};
    if (!json_path.empty()) std::ofstream(json_path) << j.dump(2) << "\n";
    std::printf("| what | value |\n|---|---|\n");
    std::printf("| packets in the batch | %zu |\n", packets);
    std::printf("| GPU end to end, median of 20 (min / max) | %.2f ms (%.2f / %.2f) |\n", gpu_ms, ms.front(), ms.back());
    std::printf("| real-time factor (1906.5 ms / time) | %.1fx |\n", batch_ms / gpu_ms);
    std::printf("| GPU memory held by the backend | %.2f GiB |\n", static_cast<double>(free0 - free1) / (1 << 30));
    std::printf("| CPU backend, %zu packets, %d threads | %.0f ms (scaled to the batch: %.0f ms) |\n", cpu_out.packets.size(),
                omp_get_max_threads(), cpu_sub_ms, cpu_ms);
    std::printf("| GPU / CPU speed ratio | %.0fx |\n", cpu_ms / gpu_ms);
    std::printf("| phase: window upload + metric + metric back (host clock) | %.2f ms |\n", median(ph_metric));
    std::printf("| phase: packet location on the host | %.2f ms |\n", median(ph_locate));
    std::printf("| phase: device chain, estimates .. detector (CUDA events) | %.2f ms |\n", median(ph_device));
    std::printf("| phase: bits and estimates back, records | %.2f ms |\n", median(ph_copy));
    return 0;
}
