#include "runtime/backend_factory.hpp"

#include "dsp/cpu_backend.hpp"
#ifdef PAQ_HAVE_CUDA
#include "gpu/cuda_backend.hpp"
#include "gpu/device.hpp"

#include <cuda_runtime_api.h>
#endif

#include <spdlog/spdlog.h>

#include <stdexcept>

namespace paq::runtime {

solver_kind parse_solver(std::string_view text) { return parse_named(config::solver_names, text, "solver"); }

backend_kind parse_backend(std::string_view text) { return parse_named(config::backend_names, text, "backend"); }

bool built_with_cuda() noexcept
{
#ifdef PAQ_HAVE_CUDA
    return true;
#else
    return false;
#endif
}

std::unique_ptr<dsp::batch_processor> make_backend(const backend_spec& spec, const dsp::receiver_config& cfg)
{
    switch (spec.kind) {
    case backend_kind::cpu: return std::make_unique<dsp::cpu_backend>(cfg);
    case backend_kind::cuda: {
#ifdef PAQ_HAVE_CUDA
        const auto devices = gpu::list_gpu_devices();
        if (spec.gpu < 0 || static_cast<std::size_t>(spec.gpu) >= devices.size()) {
            throw std::runtime_error("the cuda backend (--backend cuda, pipeline.backend: cuda): no CUDA device " +
                                     std::to_string(spec.gpu) + " (" + std::to_string(devices.size()) +
                                     " found); use the cpu backend");
        }
        return std::make_unique<gpu::cuda_backend>(cfg, spec.gpu, std::string(to_string(spec.solver)));
#else
        throw std::runtime_error("the cuda backend (--backend cuda, pipeline.backend: cuda): this build has no CUDA (built "
                                 "without it); use the cpu backend");
#endif
    }
    case backend_kind::automatic: break;
    }
    throw std::invalid_argument("make_backend: the backend 'auto' must be resolved first (runtime::resolve_backend)");
}

std::vector<std::unique_ptr<dsp::batch_processor>> make_backends(backend_kind kind, const std::vector<int>& gpus, int cpu_workers,
                                                                 solver_kind solver, const dsp::receiver_config& cfg)
{
    std::vector<std::unique_ptr<dsp::batch_processor>> out;
    if (kind == backend_kind::cuda) {
        if (gpus.empty()) out.push_back(make_backend({backend_kind::cuda, 0, solver}, cfg));
        for (const int g : gpus) out.push_back(make_backend({backend_kind::cuda, g, solver}, cfg));
    } else {
        for (int i = 0; i < cpu_workers; ++i) out.push_back(make_backend({kind, 0, solver}, cfg));
    }
    return out;
}

backend_kind resolve_backend(backend_kind requested)
{
    if (requested != backend_kind::automatic) return requested;
#ifdef PAQ_HAVE_CUDA
    try {
        const auto devices = gpu::list_gpu_devices();
        for (const auto& d : devices) {
            if (gpu::backend_unsupported_reason(d).empty()) return backend_kind::cuda;
        }
        for (const auto& d : devices) spdlog::warn("{}; using the CPU backend", gpu::backend_unsupported_reason(d));
    } catch (const std::exception& e) {
        spdlog::warn("CUDA devices could not be listed ({}); using the CPU backend", e.what());
    }
#endif
    return backend_kind::cpu;
}

std::vector<std::string> describe_gpus()
{
    std::vector<std::string> out;
#ifdef PAQ_HAVE_CUDA
    for (const auto& d : gpu::list_gpu_devices()) out.push_back(gpu::describe(d));
#endif
    return out;
}

io::ring_allocator make_ring_allocator(bool lock_memory, backend_kind backend)
{
#ifdef PAQ_HAVE_CUDA
    if (lock_memory && backend == backend_kind::cuda) {
        io::ring_allocator a;
        a.allocate = [](std::size_t bytes) -> void* {
            void* p = nullptr;
            const cudaError_t e = cudaHostAlloc(&p, bytes, cudaHostAllocPortable);
            if (e != cudaSuccess) {
                throw std::runtime_error("ring buffer: cudaHostAlloc of " + std::to_string(bytes >> 20) +
                                         " MiB failed: " + cudaGetErrorString(e));
            }
            return p;
        };
        a.release = [](void* p, std::size_t) { cudaFreeHost(p); };
        a.kind = "pinned (cudaHostAlloc)";
        return a;
    }
#else
    static_cast<void>(backend);
#endif
    return io::host_ring_allocator(lock_memory);
}

}  // namespace paq::runtime
