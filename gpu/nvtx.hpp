// NVTX ranges around the CUDA backend's stages, so that an Nsight Systems
// trace (nsys profile --trace=cuda,nvtx paqd ...) names each stage's launches. NVTX 3 is
// header-only and costs a branch per range when no tool is attached.
#pragma once

#include <nvtx3/nvToolsExt.h>

namespace paq::gpu {

/// One range for the lifetime of the object.
class nvtx_range {
public:
    explicit nvtx_range(const char* name) noexcept { nvtxRangePushA(name); }
    ~nvtx_range() { nvtxRangePop(); }
    nvtx_range(const nvtx_range&) = delete;
    nvtx_range& operator=(const nvtx_range&) = delete;
};

/// Consecutive ranges, one per stage: next() ends the current one and starts the next; the
/// last ends with the object.
class nvtx_stages {
public:
    explicit nvtx_stages(const char* first) noexcept { nvtxRangePushA(first); }
    void next(const char* name) noexcept
    {
        nvtxRangePop();
        nvtxRangePushA(name);
    }
    ~nvtx_stages() { nvtxRangePop(); }
    nvtx_stages(const nvtx_stages&) = delete;
    nvtx_stages& operator=(const nvtx_stages&) = delete;
};

}  // namespace paq::gpu
