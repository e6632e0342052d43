// What the benchmark programs share: their command line and the device check.
#pragma once

#include "gpu/device.hpp"

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

namespace paq::bench {

/// Parses `[--json FILE]`; prints the usage and returns nullopt on anything else.
inline std::optional<std::string> parse_json_option(int argc, char** argv, const char* program)
{
    std::string json_path;
    for (int i = 1; i < argc; ++i) {
        if (std::string(argv[i]) == "--json" && i + 1 < argc) {
            json_path = argv[++i];
        } else {
            std::fprintf(stderr, "usage: %s [--json FILE]\n", program);
            return std::nullopt;
        }
    }
    return json_path;
}

/// The CUDA devices, or an empty list after printing why the benchmark cannot run.
inline std::vector<gpu::gpu_device_info> require_devices(const char* program)
{
    auto devices = gpu::list_gpu_devices();
    if (devices.empty()) std::fprintf(stderr, "%s: no CUDA device\n", program);
    return devices;
}

}  // namespace paq::bench
