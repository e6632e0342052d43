// CUDA devices as the rest of paqd sees them.
//
// Plain C++ on purpose: the daemon includes this to list and describe GPUs without pulling
// in CUDA headers. Available when paq_gpu is built (PAQ_HAVE_CUDA); failures of the CUDA
// runtime arrive as paq::gpu::cuda_error (gpu/cuda_check.hpp), a std::runtime_error.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace paq::gpu {

struct gpu_device_info {
    int id = -1;  ///< CUDA device ordinal (as in cudaSetDevice, CUDA_VISIBLE_DEVICES order)
    std::string name;
    int cc_major = 0;  ///< compute capability, e.g. 9.0 for H100
    int cc_minor = 0;
    std::size_t total_memory_bytes = 0;
    int multiprocessors = 0;
    std::size_t shared_memory_per_block_bytes = 0;  ///< the most a kernel may opt in to
};

/// Shared memory per thread block the CUDA backend's kernels need (gpu/cma: a packet's
/// 16384-point transforms on chip): 138 KiB. Hopper (H100, H200: 227 KiB) and A100 (163 KiB)
/// have it; Ada (L4, L40: 99 KiB) does not and is served by the CPU backend.
inline constexpr std::size_t backend_shared_memory_bytes = 140'752;

/// Empty if the CUDA backend can run on the device, else why not (for a log line or an error).
[[nodiscard]] std::string backend_unsupported_reason(const gpu_device_info& device);

/// The CUDA devices this process can use, in ordinal order. Empty when there is no device
/// or no (sufficiently new) driver: a host without GPU is a normal deployment, served by the
/// CPU backend. Any other runtime failure throws std::runtime_error (cuda_error).
[[nodiscard]] std::vector<gpu_device_info> list_gpu_devices();

/// One line for logs, e.g. "GPU 0: NVIDIA H100 80GB HBM3, compute capability 9.0,
/// 79.1 GiB, 132 multiprocessors".
[[nodiscard]] std::string describe(const gpu_device_info& device);

/// Runs a kernel on `device_id` that writes a known pattern into device memory, copies it
/// back and checks every element. True when all match, false when any differs (the GPU
/// computes or transfers wrongly). A CUDA failure (no such device, out of memory, no kernel
/// image for its architecture, a fault) throws std::runtime_error (cuda_error). The calling
/// thread's current device is the same afterwards.
[[nodiscard]] bool gpu_self_test(int device_id);

}  // namespace paq::gpu
