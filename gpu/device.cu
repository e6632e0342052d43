#include "gpu/cuda_check.hpp"
#include "gpu/device.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace paq::gpu {

namespace {

// ---------------------------------------------------------------------------------------
// RAII for the self test. A failing check throws out of gpu_self_test; these make sure the
// allocation, the stream and the caller's current device are still cleaned up then.

struct device_memory_free {
    void operator()(void* p) const noexcept { PAQ_CUDA_CHECK_NOTHROW(cudaFree(p)); }
};

template <typename T>
using device_ptr = std::unique_ptr<T, device_memory_free>;

template <typename T>
device_ptr<T> device_alloc(std::size_t count)
{
    void* p = nullptr;
    PAQ_CUDA_CHECK(cudaMalloc(&p, count * sizeof(T)));
    return device_ptr<T>(static_cast<T*>(p));
}

struct stream_destroy {
    void operator()(cudaStream_t s) const noexcept { PAQ_CUDA_CHECK_NOTHROW(cudaStreamDestroy(s)); }
};

using stream_ptr = std::unique_ptr<std::remove_pointer_t<cudaStream_t>, stream_destroy>;

stream_ptr make_stream()
{
    cudaStream_t s = nullptr;
    // Non-blocking: the self test must neither wait for nor hold up work that other threads
    // of the daemon have queued on the legacy default stream.
    PAQ_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    return stream_ptr(s);
}

// Makes device_id current for the scope and restores the caller's device afterwards, since
// the current device is per-thread state the caller may rely on.
class current_device_guard {
public:
    explicit current_device_guard(int device_id)
    {
        PAQ_CUDA_CHECK(cudaGetDevice(&previous_));
        PAQ_CUDA_CHECK(cudaSetDevice(device_id));
    }
    ~current_device_guard() { PAQ_CUDA_CHECK_NOTHROW(cudaSetDevice(previous_)); }
    current_device_guard(const current_device_guard&) = delete;
    current_device_guard& operator=(const current_device_guard&) = delete;

private:
    int previous_ = 0;
};

// ---------------------------------------------------------------------------------------
// The self-test pattern: Knuth's multiplicative hash of the index. The multiplier is odd,
// so i -> i * multiplier is a bijection on 32-bit words: every element gets a different
// value, and a write landing at the wrong index, a dropped write or a stuck bit all show.

constexpr std::uint32_t pattern_multiplier = 2654435761u;

// Not a multiple of the block size, so the kernel's bounds check is exercised; more than
// grid * block, so its grid-stride loop is too.
constexpr std::uint32_t self_test_elements = (1u << 20) + 123u;
// Elements past the end that the kernel must leave untouched.
constexpr std::uint32_t self_test_guard_elements = 256;
constexpr unsigned self_test_block_threads = 256;
constexpr unsigned self_test_max_blocks = 1024;

// The buffer is filled with this before the launch. Were the fill a valid pattern value at
// its index, a kernel that never ran could pass there (cudaMalloc happily returns the
// memory of a previous self test, still holding the pattern); the assertion below rules
// that out.
constexpr unsigned char self_test_fill_byte = 0xA5;
constexpr std::uint32_t self_test_fill_word = 0x01010101u * self_test_fill_byte;

// Inverse of an odd number modulo 2^32 by Newton's iteration; each step doubles the number
// of correct low bits, starting from 3 (a * a == 1 mod 8 for odd a).
constexpr std::uint32_t inverse_mod_2_32(std::uint32_t a) noexcept
{
    std::uint32_t x = a;
    for (int step = 0; step < 5; ++step) {
        x *= 2u - a * x;
    }
    return x;
}
static_assert(pattern_multiplier * inverse_mod_2_32(pattern_multiplier) == 1u);
// The one index whose pattern equals the fill lies outside the tested range.
static_assert(self_test_fill_word * inverse_mod_2_32(pattern_multiplier) >= self_test_elements,
              "the fill word must not be a pattern value inside the tested range");

__global__ void write_pattern_kernel(std::uint32_t* out, std::uint32_t count)
{
    const std::uint32_t stride = blockDim.x * gridDim.x;
    for (std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += stride) {
        out[i] = i * pattern_multiplier;
    }
}

// Exact tenths of a GiB without floating point, so the text does not depend on the
// process's locale.
std::string format_gib(std::size_t bytes)
{
    constexpr unsigned gib_shift = 30;
    constexpr std::uint64_t gib = std::uint64_t{1} << gib_shift;
    const auto b = static_cast<std::uint64_t>(bytes);
    std::uint64_t whole = b >> gib_shift;
    std::uint64_t tenths = ((b & (gib - 1)) * 10 + gib / 2) >> gib_shift;  // rounded
    if (tenths == 10) {
        ++whole;
        tenths = 0;
    }
    return std::to_string(whole) + "." + std::to_string(tenths) + " GiB";
}

}  // namespace

std::vector<gpu_device_info> list_gpu_devices()
{
    int count = 0;
    const cudaError_t status = cudaGetDeviceCount(&count);
    if (status == cudaErrorNoDevice || status == cudaErrorInsufficientDriver) {
        // No GPU, or no driver able to run this runtime: the CPU backend serves.
        return {};
    }
    if (status != cudaSuccess) {
        throw cuda_error(status, "cudaGetDeviceCount(&count)", __FILE__, __LINE__);
    }

    std::vector<gpu_device_info> devices;
    devices.reserve(static_cast<std::size_t>(count));
    for (int id = 0; id < count; ++id) {
        cudaDeviceProp prop{};
        PAQ_CUDA_CHECK(cudaGetDeviceProperties(&prop, id));
        gpu_device_info info;
        info.id = id;
        info.name.assign(prop.name, strnlen(prop.name, sizeof prop.name));
        info.cc_major = prop.major;
        info.cc_minor = prop.minor;
        info.total_memory_bytes = prop.totalGlobalMem;
        info.multiprocessors = prop.multiProcessorCount;
        info.shared_memory_per_block_bytes = prop.sharedMemPerBlockOptin;
        devices.push_back(std::move(info));
    }
    return devices;
}

std::string describe(const gpu_device_info& device)
{
    return "GPU " + std::to_string(device.id) + ": " + device.name + ", compute capability " +
           std::to_string(device.cc_major) + "." + std::to_string(device.cc_minor) + ", " +
           format_gib(device.total_memory_bytes) + ", " + std::to_string(device.multiprocessors) +
           " multiprocessors";
}

std::string backend_unsupported_reason(const gpu_device_info& device)
{
    if (device.shared_memory_per_block_bytes >= backend_shared_memory_bytes) return {};
    return "GPU " + std::to_string(device.id) + " (" + device.name + ") offers " +
           std::to_string(device.shared_memory_per_block_bytes / 1024) + " KiB of shared memory per thread block; the CUDA backend needs " +
           std::to_string((backend_shared_memory_bytes + 1023) / 1024) + " KiB (H100, H200, A100)";
}

bool gpu_self_test(int device_id)
{
    // Declaration order is cleanup order in reverse: memory, then stream, then the device.
    const current_device_guard device(device_id);
    const stream_ptr stream = make_stream();

    constexpr std::size_t total = std::size_t{self_test_elements} + self_test_guard_elements;
    const device_ptr<std::uint32_t> buffer = device_alloc<std::uint32_t>(total);
    PAQ_CUDA_CHECK(cudaMemsetAsync(buffer.get(), self_test_fill_byte, total * sizeof(std::uint32_t), stream.get()));

    const unsigned blocks =
        std::min((self_test_elements + self_test_block_threads - 1) / self_test_block_threads, self_test_max_blocks);
    write_pattern_kernel<<<blocks, self_test_block_threads, 0, stream.get()>>>(buffer.get(), self_test_elements);
    PAQ_CUDA_CHECK_LAUNCH();

    std::vector<std::uint32_t> host(total);
    PAQ_CUDA_CHECK(cudaMemcpyAsync(host.data(), buffer.get(), total * sizeof(std::uint32_t), cudaMemcpyDeviceToHost,
                                   stream.get()));
    // Execution faults of the kernel and the copy surface here.
    PAQ_CUDA_CHECK(cudaStreamSynchronize(stream.get()));

    for (std::uint32_t i = 0; i < self_test_elements; ++i) {
        if (host[i] != i * pattern_multiplier) {
            return false;
        }
    }
    return std::all_of(host.begin() + self_test_elements, host.end(),
                       [](std::uint32_t word) { return word == self_test_fill_word; });
}

}  // namespace paq::gpu
