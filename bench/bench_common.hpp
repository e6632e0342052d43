// What the benchmark programs share: the device check.
#pragma once

#include "gpu/device.hpp"

#include <cstdio>
#include <string>
#include <vector>

namespace paq::bench {

/// The CUDA devices, or an empty list after printing why the benchmark cannot run.
inline std::vector<gpu::gpu_device_info> require_devices(const char* program)
{
    auto devices = gpu::list_gpu_devices();
    if (devices.empty()) std::fprintf(stderr, "%s: no CUDA device\n", program);
    return devices;
}

}  // namespace paq::bench
