// The runtime layer's backend factory: the only code above gpu/ that
// knows the CUDA backend exists. paqd (live and replay) and paq-bench make their backends
// here, by enum. The CUDA backend is a module loaded at run time (runtime/cuda_module.hpp:
// libpaqd-cuda.so, package paqd-cuda), so the programs run the CPU backend where it or the
// CUDA libraries are missing; asking for it there is an error that names the way out.
//
// Plain C++ header: nothing of CUDA leaks to the callers.
#pragma once

#include "config/daemon_config.hpp"
#include "dsp/backend.hpp"
#include "dsp/receiver_config.hpp"
#include "io/ring_buffer.hpp"

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace paq::runtime {

using config::backend_kind;

using config::solver_kind;

/// A name of config::solver_names; anything else throws std::invalid_argument naming the
/// value and the allowed ones.
[[nodiscard]] solver_kind parse_solver(std::string_view text);
/// A name of config::backend_names; anything else throws std::invalid_argument naming the
/// allowed ones.
[[nodiscard]] backend_kind parse_backend(std::string_view text);

/// What to make: the kind (cpu or cuda; `automatic` is resolved by resolve_backend first),
/// the CUDA device and the solver (cuda only).
struct backend_spec {
    backend_kind kind = backend_kind::cpu;
    int gpu = 0;
    solver_kind solver = solver_kind::levinson;
};

/// True when the NVIDIA driver's library (libcuda.so.1) loads: without it no CUDA device can
/// be used, and `automatic` resolves to cpu without loading the CUDA module. False in a build
/// without CUDA.
[[nodiscard]] bool cuda_driver_present() noexcept;
/// True when the CUDA backend is there: its module loads (the first call loads it: found
/// through PAQD_CUDA_MODULE, beside the installed programs, or in this build's tree).
[[nodiscard]] bool cuda_backend_available() noexcept;
/// Why the CUDA backend is not there (every place looked at, the loader's message: a CUDA
/// library not found ...); empty when it is.
[[nodiscard]] std::string cuda_backend_unavailable_reason();

/// One backend. Throws std::invalid_argument for an invalid receiver configuration or
/// `automatic`, std::runtime_error for a CUDA device that is not there or cannot run the
/// backend, or a build without CUDA (each message says to use the CPU backend instead).
[[nodiscard]] std::unique_ptr<dsp::batch_processor> make_backend(const backend_spec& spec, const dsp::receiver_config& cfg);

/// The backends of a worker pool: one per CUDA device in `gpus` (empty: device 0), or
/// `cpu_workers` CPU backends.
[[nodiscard]] std::vector<std::unique_ptr<dsp::batch_processor>> make_backends(backend_kind kind, const std::vector<int>& gpus,
                                                                               int cpu_workers, solver_kind solver,
                                                                               const dsp::receiver_config& cfg);

/// `automatic`: cuda when a device can run the CUDA backend, else cpu (the reason logged: no
/// driver or no module as information, a device that cannot run it as a warning); cpu for a
/// receiver that selects a channel per packet (receiver_config::selects_channel: only the CPU
/// backend selects). cpu and cuda are returned as they are.
[[nodiscard]] backend_kind resolve_backend(backend_kind requested, const dsp::receiver_config& rc = {});

/// One line per CUDA device this process sees ("GPU 0: NVIDIA H100 ..."); empty without
/// CUDA or without a device.
[[nodiscard]] std::vector<std::string> describe_gpus();

/// The ring buffer's memory: page-locked by the CUDA driver (cudaHostAlloc, portable) with
/// the CUDA backend and lock_memory on, so that windows upload at full bandwidth; otherwise
/// io::host_ring_allocator (mlock when lock_memory, else pageable).
[[nodiscard]] io::ring_allocator make_ring_allocator(bool lock_memory, backend_kind backend);

}  // namespace paq::runtime
