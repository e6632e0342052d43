#include "runtime/backend_factory.hpp"

#include "dsp/cpu_backend.hpp"
#include "runtime/cuda_module.hpp"

#include <spdlog/spdlog.h>

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <stdexcept>

namespace paq::runtime {

namespace {

/// The CUDA module, loaded once (the first time it is asked for), or why it is not there.
struct loaded_module {
    const cuda_module_api* api = nullptr;
    std::string error;  ///< why not, naming every place looked at
    void note(const std::string& why) { error += (error.empty() ? "" : "; ") + why; }
};

[[maybe_unused]] std::string load_error(const std::string& path)
{
    const char* e = dlerror();
    return e != nullptr ? std::string(e) : path + ": cannot be loaded";
}

const loaded_module& cuda_module()
{
    static const loaded_module m = [] {
        loaded_module r;
#ifdef PAQ_CUDA_MODULE
        // PAQD_CUDA_MODULE names it; else a program of this build's tree takes the tree's, and
        // an installed one the one beside it (the package's libdir/paqd).
        std::vector<std::string> places;
        if (const char* e = std::getenv("PAQD_CUDA_MODULE"); e != nullptr && *e != '\0') {
            places.emplace_back(e);
        } else {
            std::error_code ec;
            const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
            const std::string build_dir = PAQ_BUILD_DIR "/";
            if (!ec && exe.string().starts_with(build_dir)) {
                places.emplace_back(PAQ_CUDA_MODULE_BUILD_PATH);
            } else if (!ec) {
                places.push_back((exe.parent_path() / PAQ_CUDA_MODULE_RELATIVE).lexically_normal().string());
            }
        }
        for (const auto& path : places) {
            std::error_code ec;
            if (!std::filesystem::exists(path, ec)) {
                r.note(path + ": not there");
                continue;
            }
            void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
            if (h == nullptr) {
                // Typically a CUDA library the module needs is not found by the loader.
                r.note(load_error(path));
                continue;
            }
            using entry_fn = const cuda_module_api* (*)();
            auto* entry = reinterpret_cast<entry_fn>(dlsym(h, "paqd_cuda_module"));
            const cuda_module_api* api = entry != nullptr ? entry() : nullptr;
            if (api == nullptr) {
                r.note(path + ": not paqd's CUDA module");
                dlclose(h);
                continue;
            }
            if (api->abi != cuda_module_abi || std::string(api->build_id) != PAQ_BUILD_ID) {
                r.note(path + ": built for paqd " + std::string(api->build_id) + ", this is " + PAQ_BUILD_ID);
                dlclose(h);
                continue;
            }
            r.api = api;
            r.error.clear();
            break;  // loaded for the process's life
        }
#else
        r.error = "this build has no CUDA (built without it)";
#endif
        return r;
    }();
    return m;
}

}  // namespace

solver_kind parse_solver(std::string_view text) { return parse_named(config::solver_names, text, "solver"); }

backend_kind parse_backend(std::string_view text) { return parse_named(config::backend_names, text, "backend"); }

bool cuda_driver_present() noexcept
{
#ifdef PAQ_CUDA_MODULE
    // The driver's library, loaded once and kept (the CUDA runtime loads it anyway): where it
    // is missing no CUDA device can be used, and loading the module and the CUDA libraries would
    // be wasted.
    static const bool present = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL) != nullptr;
    return present;
#else
    return false;
#endif
}

bool cuda_backend_available() noexcept { return cuda_module().api != nullptr; }

std::string cuda_backend_unavailable_reason() { return cuda_module().api != nullptr ? std::string() : cuda_module().error; }

std::unique_ptr<dsp::batch_processor> make_backend(const backend_spec& spec, const dsp::receiver_config& cfg)
{
    switch (spec.kind) {
    case backend_kind::cpu: return std::make_unique<dsp::cpu_backend>(cfg);
    case backend_kind::cuda: {
        const auto& m = cuda_module();
        if (m.api == nullptr) {
            throw std::runtime_error("the cuda backend (--backend cuda, pipeline.backend: cuda) is not available: " + m.error +
                                     " (install the paqd-cuda package and the CUDA libraries it names); use the cpu backend");
        }
        return m.api->make_backend(cfg, spec.gpu, std::string(to_string(spec.solver)));
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

backend_kind resolve_backend(backend_kind requested, const dsp::receiver_config& rc)
{
    if (requested != backend_kind::automatic) return requested;
    if (rc.selects_channel()) {
        spdlog::info("two receive channels received by selection (combining: select) run on the CPU backend; using it");
        return backend_kind::cpu;
    }
#ifdef PAQ_CUDA_MODULE
    if (!cuda_driver_present()) {
        spdlog::info("no NVIDIA driver (libcuda.so.1 not found); using the CPU backend");
        return backend_kind::cpu;
    }
#endif
    const auto& m = cuda_module();
    if (m.api == nullptr) {
#ifdef PAQ_CUDA_MODULE
        spdlog::info("the CUDA backend is not available ({}); using the CPU backend", m.error);
#endif
        return backend_kind::cpu;
    }
    try {
        const auto devices = m.api->devices();
        for (const auto& d : devices) {
            if (d.unsupported_reason.empty()) return backend_kind::cuda;
        }
        for (const auto& d : devices) spdlog::warn("{}; using the CPU backend", d.unsupported_reason);
    } catch (const std::exception& e) {
        spdlog::warn("CUDA devices could not be listed ({}); using the CPU backend", e.what());
    }
    return backend_kind::cpu;
}

std::vector<std::string> describe_gpus()
{
    std::vector<std::string> out;
    if (const auto& m = cuda_module(); m.api != nullptr) {
        for (const auto& d : m.api->devices()) out.push_back(d.description);
    }
    return out;
}

io::ring_allocator make_ring_allocator(bool lock_memory, backend_kind backend)
{
    const auto& m = cuda_module();
    if (lock_memory && backend == backend_kind::cuda && m.api != nullptr) {
        io::ring_allocator a;
        a.allocate = [api = m.api](std::size_t bytes) -> void* {
            try {
                return api->host_alloc(bytes);
            } catch (const std::exception& e) {
                throw std::runtime_error(std::string("ring buffer: ") + e.what());
            }
        };
        a.release = [api = m.api](void* p, std::size_t) { api->host_free(p); };
        a.kind = "pinned (cudaHostAlloc)";
        return a;
    }
    return io::host_ring_allocator(lock_memory);
}

}  // namespace paq::runtime
