// Error checking for CUDA runtime calls.
//
// Every runtime call in gpu/ goes through one of these macros; none of them depends on
// NDEBUG, because a failed allocation or launch on a receiving station must be reported in
// the release build, which is the one that runs.
//
// This header includes the CUDA runtime API: include it from .cu files and from code that
// links CUDA::cudart, never from headers the CPU-only build sees (gpu/device.hpp is the
// CUDA-free interface).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdio>
#include <stdexcept>
#include <string>

namespace paq::gpu {

/// A CUDA runtime call failed. what(): "<call> failed: <cudaErrorName> (<description>) at
/// <file>:<line>".
class cuda_error : public std::runtime_error {
public:
    cuda_error(cudaError_t code, const char* call, const char* file, int line)
        : std::runtime_error(std::string(call) + " failed: " + cudaGetErrorName(code) + " (" +
                             cudaGetErrorString(code) + ") at " + file + ":" + std::to_string(line)),
          code_(code)
    {
    }

    [[nodiscard]] cudaError_t code() const noexcept { return code_; }

private:
    cudaError_t code_;
};

namespace detail {

// A function rather than macro text, so that each call site holds only the compare and a
// call; building the message is off the success path.
// Both handlers also take the error out of the runtime's per-thread last-error slot (which
// every failing runtime call fills): it has been reported, and left there a later
// PAQ_CUDA_CHECK_LAUNCH would blame it on an innocent kernel. Sticky errors (a faulted
// context) are not cleared by this and keep failing every call, as they should.
[[noreturn]] inline void throw_cuda_error(cudaError_t code, const char* call, const char* file, int line)
{
    static_cast<void>(cudaGetLastError());
    throw cuda_error(code, call, file, line);
}

// For destructors and other cleanup paths, where throwing would terminate: stdio only, so
// nothing here allocates or throws.
inline void report_cuda_error(cudaError_t code, const char* call, const char* file, int line) noexcept
{
    static_cast<void>(cudaGetLastError());
    std::fprintf(stderr, "paq: %s failed: %s (%s) at %s:%d\n", call, cudaGetErrorName(code),
                 cudaGetErrorString(code), file, line);
}

}  // namespace detail
}  // namespace paq::gpu

/// Evaluates `call` (a CUDA runtime call returning cudaError_t) once and throws
/// paq::gpu::cuda_error naming the call, the error and the source position unless it
/// returned cudaSuccess.
#define PAQ_CUDA_CHECK(call)                                                                    \
    do {                                                                                        \
        const cudaError_t paq_cuda_check_status_ = (call);                                      \
        if (paq_cuda_check_status_ != cudaSuccess) {                                            \
            ::paq::gpu::detail::throw_cuda_error(paq_cuda_check_status_, #call, __FILE__, __LINE__); \
        }                                                                                       \
    } while (false)

/// As PAQ_CUDA_CHECK, but reports the failure on stderr and carries on: for destructors and
/// cleanup, where an exception would end the process.
#define PAQ_CUDA_CHECK_NOTHROW(call)                                                             \
    do {                                                                                         \
        const cudaError_t paq_cuda_check_status_ = (call);                                       \
        if (paq_cuda_check_status_ != cudaSuccess) {                                             \
            ::paq::gpu::detail::report_cuda_error(paq_cuda_check_status_, #call, __FILE__, __LINE__); \
        }                                                                                        \
    } while (false)

/// Put directly after a kernel launch. A launch returns nothing; a bad configuration (too
/// many threads, too much shared memory, no kernel image for this GPU) only shows in
/// cudaGetLastError. Faults while the kernel runs surface at the next synchronising call,
/// which its own PAQ_CUDA_CHECK reports. cudaGetLastError also returns (and clears) an
/// earlier unchecked error, which is then blamed on this launch: one more reason to check
/// every call.
#define PAQ_CUDA_CHECK_LAUNCH()                                                                      \
    do {                                                                                             \
        const cudaError_t paq_cuda_check_status_ = cudaGetLastError();                               \
        if (paq_cuda_check_status_ != cudaSuccess) {                                                 \
            ::paq::gpu::detail::throw_cuda_error(paq_cuda_check_status_, "kernel launch", __FILE__, __LINE__); \
        }                                                                                            \
    } while (false)
