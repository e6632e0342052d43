// What the benchmark programs share: the device check, the host clock.
#pragma once

#include "gpu/device.hpp"

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

namespace paq::bench {

using clock_type = std::chrono::steady_clock;

/// Host-clock milliseconds since `t`.
inline double ms_since(clock_type::time_point t)
{
    return std::chrono::duration<double, std::milli>(clock_type::now() - t).count();
}

/// The CUDA devices, or an empty list after printing why the benchmark cannot run.
inline std::vector<gpu::gpu_device_info> require_devices(const char* program)
{
    auto devices = gpu::list_gpu_devices();
    if (devices.empty()) std::fprintf(stderr, "%s: no CUDA device\n", program);
    return devices;
}

}  // namespace paq::bench
