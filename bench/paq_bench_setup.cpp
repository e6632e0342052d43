// paq-bench-setup: what a fresh process pays before its first batch on the GPU (the
// replay of a short recording is bounded by it). Each step once, in order, host clock:
//   1. the CUDA context (the first runtime call, cudaFree(0));
//   2. the CUDA backend of the default configuration (device buffers, plans, tables, handles);
//   3. one default batch's ci16 window page-locked (gpu::host_pin, cudaHostRegister, as the
//      replay pins its windows), then unlocked.
// The context can only be made once a process: scripts/device-check.sh setup runs this
// program several times.
//
//   paq-bench-setup [--json FILE]
#include "bench/bench_common.hpp"
#include "config/cli.hpp"
#include "dsp/receiver_config.hpp"
#include "dsp/types.hpp"
#include "gpu/cuda_backend.hpp"
#include "gpu/cuda_check.hpp"

#include <cuda_runtime.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

using namespace paq;

using bench::clock_type;
using bench::ms_since;

int main(int argc, char** argv)
try {
    CLI::App app{"The fixed cost of a fresh process on the GPU: the CUDA context, the CUDA backend, one pinned window"};
    cli::conventions(app, "paq-bench-setup", "0 measured; 1 a CUDA error or no device; 2 usage error");
    std::string json_path;
    app.add_option("--json", json_path, "Also write the figures as JSON to this file");
    if (const int rc = cli::parse(app, argc, argv); rc >= 0) return rc;

    const auto t_context = clock_type::now();
    PAQ_CUDA_CHECK(cudaFree(nullptr));
    const double context_ms = ms_since(t_context);
    if (bench::require_devices("paq-bench-setup").empty()) return 1;

    const dsp::receiver_config cfg{};
    const auto t_backend = clock_type::now();
    double backend_ms = 0.0;
    {
        gpu::cuda_backend backend(cfg, 0);
        backend_ms = ms_since(t_backend);
    }

    const std::size_t window_bytes = cfg.batch_samples * sizeof(ci16);
    std::vector<ci16> window(cfg.batch_samples);
    double pin_ms = 0.0;
    {
        const auto t_pin = clock_type::now();
        const gpu::host_pin pin(window.data(), window_bytes);
        pin_ms = ms_since(t_pin);
    }

    std::printf("| step (fresh process, host clock) | ms |\n|---|---|\n");
    std::printf("| CUDA context (cudaFree(0)) | %.1f |\n", context_ms);
    std::printf("| CUDA backend, default configuration (%zu samples a batch) | %.1f |\n", cfg.batch_samples, backend_ms);
    std::printf("| one ci16 window page-locked (%.0f MiB, cudaHostRegister) | %.1f |\n", static_cast<double>(window_bytes) / (1 << 20), pin_ms);
    if (!json_path.empty()) {
        const nlohmann::json j{{"context_ms", context_ms}, {"backend_ms", backend_ms}, {"window_bytes", window_bytes}, {"pin_window_ms", pin_ms}};
        std::ofstream(json_path) << j.dump(2) << "\n";
    }
    return 0;
} catch (const std::exception& e) {
    std::fprintf(stderr, "paq-bench-setup: %s\n", e.what());
    return 1;
}
