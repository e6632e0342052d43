// The CUDA backend as a module loaded at run time (libpaqd-cuda.so, package paqd-cuda): the
// programs link no CUDA library, so that they start, and run the CPU backend, on a machine
// without CUDA; the backend factory (runtime/backend_factory.cpp) loads the module the first
// time a CUDA backend, device list or pinned buffer is asked for.
//
// The module and the programs come from one build: the module's build id must equal the
// program's (the version and commit), and the types crossing (receiver_config,
// batch_processor) are the same C++ types on both sides.
#pragma once

#include "dsp/backend.hpp"
#include "dsp/receiver_config.hpp"

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace paq::runtime {

/// Raised when the table's layout changes.
inline constexpr int cuda_module_abi = 1;

/// A CUDA device as the module sees it.
struct cuda_device_line {
    int id = -1;
    std::string description;         ///< "GPU 0: NVIDIA H100 ..., compute capability 9.0, ..."
    std::string unsupported_reason;  ///< empty: the device can run the backend
};

/// What the module gives: its functions, behind one table.
struct cuda_module_api {
    int abi = cuda_module_abi;
    const char* build_id = "";  ///< the module's build (version+commit); must equal the program's
    /// The devices this process sees (none without a driver or a device). Throws on a CUDA error.
    std::vector<cuda_device_line> (*devices)() = nullptr;
    /// A backend on `device` with `solver` (a config::solver_names name). Throws
    /// std::runtime_error for a device that is not there or cannot run the backend.
    std::unique_ptr<dsp::batch_processor> (*make_backend)(const dsp::receiver_config& cfg, int device,
                                                          const std::string& solver) = nullptr;
    /// Page-locked host memory (cudaHostAlloc, portable to every device); throws
    /// std::runtime_error with CUDA's message. host_free releases it.
    void* (*host_alloc)(std::size_t bytes) = nullptr;
    void (*host_free)(void* p) = nullptr;
};

}  // namespace paq::runtime

/// The module's one exported symbol.
extern "C" const paq::runtime::cuda_module_api* paqd_cuda_module();
