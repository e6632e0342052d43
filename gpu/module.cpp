// libpaqd-cuda.so: the CUDA backend behind runtime/cuda_module.hpp's table, loaded by the
// backend factory at run time.
#include "runtime/cuda_module.hpp"

#include "gpu/cuda_backend.hpp"
#include "gpu/device.hpp"

#include <cuda_runtime_api.h>

#include <stdexcept>
#include <string>

namespace {

std::vector<paq::runtime::cuda_device_line> devices()
{
    std::vector<paq::runtime::cuda_device_line> out;
    for (const auto& d : paq::gpu::list_gpu_devices()) {
        out.push_back({d.id, paq::gpu::describe(d), paq::gpu::backend_unsupported_reason(d)});
    }
    return out;
}

std::unique_ptr<paq::dsp::batch_processor> make_backend(const paq::dsp::receiver_config& cfg, int device, const std::string& solver)
{
    const auto all = paq::gpu::list_gpu_devices();
    if (device < 0 || static_cast<std::size_t>(device) >= all.size()) {
        throw std::runtime_error("the cuda backend (--backend cuda, pipeline.backend: cuda): no CUDA device " +
                                 std::to_string(device) + " (" + std::to_string(all.size()) + " found); use the cpu backend");
    }
    return std::make_unique<paq::gpu::cuda_backend>(cfg, device, solver);
}

void* host_alloc(std::size_t bytes)
{
    void* p = nullptr;
    const cudaError_t e = cudaHostAlloc(&p, bytes, cudaHostAllocPortable);
    if (e != cudaSuccess) {
        throw std::runtime_error("cudaHostAlloc of " + std::to_string(bytes >> 20) + " MiB failed: " + cudaGetErrorString(e));
    }
    return p;
}

void host_free(void* p) { cudaFreeHost(p); }

const paq::runtime::cuda_module_api table{paq::runtime::cuda_module_abi, PAQ_BUILD_ID, &devices, &make_backend, &host_alloc,
                                          &host_free};

}  // namespace

extern "C" __attribute__((visibility("default"))) const paq::runtime::cuda_module_api* paqd_cuda_module() { return &table; }
