// Tests of the CUDA foundations (gpu/device.hpp, gpu/cuda_check.hpp).
//
// Tests on real devices skip when list_gpu_devices() finds none, so this binary passes on
// build hosts without GPU; the error-check macros and describe() are tested everywhere.
#include "gpu/cuda_backend.hpp"
#include "gpu/cuda_check.hpp"
#include "gpu/device.hpp"

#include <cuda.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <vector>

namespace {

using paq::gpu::cuda_error;
using paq::gpu::describe;
using paq::gpu::gpu_device_info;
using paq::gpu::gpu_self_test;
using paq::gpu::list_gpu_devices;

bool contains(std::string_view haystack, std::string_view needle) {
    return haystack.find(needle) != std::string_view::npos;
}

// ---------------------------------------------------------------------------------------
// Without a device

static_assert(std::is_base_of_v<std::runtime_error, cuda_error>);

int calls = 0;

cudaError_t failing_call() {
    ++calls;
    return cudaErrorInvalidValue;
}

cudaError_t succeeding_call() {
    ++calls;
    return cudaSuccess;
}

TEST(CudaCheck, SuccessDoesNotThrowAndEvaluatesOnce) {
    calls = 0;
    EXPECT_NO_THROW(PAQ_CUDA_CHECK(succeeding_call()));
    EXPECT_EQ(calls, 1);
}

TEST(CudaCheck, FailureThrowsWithCallErrorAndPosition) {
    calls = 0;
    const int line = __LINE__ + 2;
    try {
        PAQ_CUDA_CHECK(failing_call());
        FAIL() << "no exception";
    } catch (const cuda_error& e) {
        const std::string message = e.what();
        EXPECT_EQ(e.code(), cudaErrorInvalidValue);
        EXPECT_TRUE(contains(message, "failing_call()")) << message;
        EXPECT_TRUE(contains(message, "cudaErrorInvalidValue")) << message;
        EXPECT_TRUE(contains(message, cudaGetErrorString(cudaErrorInvalidValue))) << message;
        EXPECT_TRUE(contains(message, "test_gpu_device.cpp:" + std::to_string(line))) << message;
    }
    EXPECT_EQ(calls, 1);
}

TEST(CudaCheck, NothrowReportsOnStderr) {
    calls = 0;
    testing::internal::CaptureStderr();
    EXPECT_NO_THROW(PAQ_CUDA_CHECK_NOTHROW(failing_call()));
    const std::string err = testing::internal::GetCapturedStderr();
    EXPECT_EQ(calls, 1);
    EXPECT_TRUE(contains(err, "failing_call()")) << err;
    EXPECT_TRUE(contains(err, "cudaErrorInvalidValue")) << err;
    EXPECT_TRUE(contains(err, "test_gpu_device.cpp:")) << err;

    testing::internal::CaptureStderr();
    PAQ_CUDA_CHECK_NOTHROW(succeeding_call());
    EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
}

TEST(GpuDescribe, FormatsAllFields) {
    gpu_device_info info;
    info.id = 1;
    info.name = "Example GPU";
    info.cc_major = 9;
    info.cc_minor = 0;
    info.total_memory_bytes = 85'024'112'640;  // an H100 80GB HBM3: 79.18 GiB
    info.multiprocessors = 132;
    EXPECT_EQ(describe(info), "GPU 1: Example GPU, compute capability 9.0, 79.2 GiB, 132 multiprocessors");

    info.total_memory_bytes = (std::size_t{2} << 30) - 1;  // rounds up into the next GiB
    EXPECT_TRUE(contains(describe(info), ", 2.0 GiB,")) << describe(info);
}

TEST(GpuDescribe, BackendNeedsItsSharedMemory) {
    // The CUDA backend keeps a packet's transforms on chip: a GPU with less shared memory per
    // block is named, with what it has and what is needed (paqd's backend auto then takes the
    // CPU; backend cuda fails at start with this text).
    gpu_device_info info;
    info.id = 0;
    info.name = "NVIDIA L4";
    info.shared_memory_per_block_bytes = 101'376;  // Ada: 99 KiB
    const auto why = backend_unsupported_reason(info);
    EXPECT_TRUE(contains(why, "GPU 0 (NVIDIA L4) offers 99 KiB")) << why;
    EXPECT_TRUE(contains(why, "needs 138 KiB")) << why;
    info.shared_memory_per_block_bytes = 166'912;  // A100: 163 KiB
    EXPECT_EQ(backend_unsupported_reason(info), "");
    info.shared_memory_per_block_bytes = 232'448;  // H100: 227 KiB
    EXPECT_EQ(backend_unsupported_reason(info), "");
}

TEST(GpuDevices, ListingNeverFailsForLackOfDevice) {
    // On a host without driver or GPU this is the empty list, not an exception; elsewhere it
    // lists every device the runtime counts.
    std::vector<gpu_device_info> devices;
    EXPECT_NO_THROW(devices = list_gpu_devices());
    int count = 0;
    const cudaError_t status = cudaGetDeviceCount(&count);
    if (status == cudaErrorNoDevice || status == cudaErrorInsufficientDriver) {
        EXPECT_TRUE(devices.empty());
    } else {
        ASSERT_EQ(status, cudaSuccess) << cudaGetErrorName(status);
        EXPECT_EQ(devices.size(), static_cast<std::size_t>(count));
    }
}

// ---------------------------------------------------------------------------------------
// With a device

class GpuDevice : public testing::Test {
protected:
    void SetUp() override {
        devices_ = list_gpu_devices();
        if (devices_.empty()) {
            GTEST_SKIP() << "no CUDA device (or no driver) on this host; GPU tests skipped";
        }
    }

    std::vector<gpu_device_info> devices_;
};

TEST_F(GpuDevice, DevicesHaveSaneFields) {
    for (std::size_t i = 0; i < devices_.size(); ++i) {
        const auto& d = devices_[i];
        SCOPED_TRACE(describe(d));
        EXPECT_EQ(d.id, static_cast<int>(i));
        EXPECT_FALSE(d.name.empty());
        EXPECT_GE(d.cc_major, 5);
        EXPECT_GE(d.cc_minor, 0);
        EXPECT_GT(d.total_memory_bytes, 0u);
        EXPECT_GT(d.multiprocessors, 0);
        EXPECT_GE(d.shared_memory_per_block_bytes, 48u * 1024);
    }
}

TEST_F(GpuDevice, DescribeContainsName) {
    for (const auto& d : devices_) {
        const std::string text = describe(d);
        EXPECT_TRUE(contains(text, d.name)) << text;
        EXPECT_TRUE(contains(text, "GPU " + std::to_string(d.id) + ": ")) << text;
    }
}

TEST_F(GpuDevice, SelfTestPassesOnDevice0) {
    EXPECT_TRUE(gpu_self_test(0));
    // Twice: the second run likely gets the first run's memory back, still holding the
    // pattern; the fill before the launch keeps that from passing by itself.
    EXPECT_TRUE(gpu_self_test(0));
}

TEST_F(GpuDevice, SelfTestPassesOnEveryDevice) {
    for (const auto& d : devices_) {
        EXPECT_TRUE(gpu_self_test(d.id)) << describe(d);
    }
}

TEST_F(GpuDevice, SelfTestKeepsCallersCurrentDevice) {
    const int last = devices_.back().id;
    PAQ_CUDA_CHECK(cudaSetDevice(last));
    EXPECT_TRUE(gpu_self_test(0));
    int current = -1;
    PAQ_CUDA_CHECK(cudaGetDevice(&current));
    EXPECT_EQ(current, last);
}

TEST_F(GpuDevice, SelfTestOnMissingDeviceThrows) {
    EXPECT_THROW((void)gpu_self_test(static_cast<int>(devices_.size())), std::runtime_error);
    EXPECT_THROW((void)gpu_self_test(-1), std::runtime_error);
    // The failures were reported through exceptions, not left behind for the next check.
    EXPECT_NO_THROW(PAQ_CUDA_CHECK_LAUNCH());
}

TEST_F(GpuDevice, ReportedErrorIsNotBlamedOnTheNextLaunch) {
    // A failing runtime call also sets the runtime's last error; once PAQ_CUDA_CHECK has
    // reported it, the launch check after a later, correct kernel must not see it again.
    // (In the fixture because it needs a working runtime: without a driver every call,
    // cudaGetLastError included, keeps returning cudaErrorInsufficientDriver.)
    EXPECT_THROW(PAQ_CUDA_CHECK(cudaSetDevice(-1)), cuda_error);
    EXPECT_NO_THROW(PAQ_CUDA_CHECK_LAUNCH());
    testing::internal::CaptureStderr();
    PAQ_CUDA_CHECK_NOTHROW(cudaSetDevice(-1));
    EXPECT_FALSE(testing::internal::GetCapturedStderr().empty());
    EXPECT_NO_THROW(PAQ_CUDA_CHECK_LAUNCH());
}

// host_pin (the windows' page locks) from threads that make no other CUDA call: the reader's
// and the engine's.

TEST_F(GpuDevice, HostPinRegistersAndUnregistersFromThreadsWithoutADevice) {
    const int device = devices_.back().id;
    std::vector<float> buffer(1 << 20);
    std::unique_ptr<paq::gpu::host_pin> pin;
    int locker_device = -1;
    std::thread([&] {
        pin = std::make_unique<paq::gpu::host_pin>(buffer.data(), buffer.size() * sizeof(float), device);
        PAQ_CUDA_CHECK(cudaGetDevice(&locker_device));
    }).join();
    EXPECT_EQ(locker_device, device);
    unsigned flags = 0;
    ASSERT_EQ(cudaHostGetFlags(&flags, buffer.data()), cudaSuccess);
    EXPECT_NE(flags & cudaHostRegisterPortable, 0u) << "pinned for every device";
    std::thread([&] { pin.reset(); }).join();
    EXPECT_NE(cudaHostGetFlags(&flags, buffer.data()), cudaSuccess) << "unregistered";
    (void)cudaGetLastError();
}

// With several GPUs: a lock for the last device, taken on a fresh thread of a fresh process,
// leaves device 0 without a context (a thread's first CUDA call would otherwise make device
// 0's, hundreds of MB and 0.2 s on a GPU the run was not given). In a child process (gtest's
// threadsafe death-test style runs this test alone in a new process), so that nothing before
// it has touched device 0.
TEST_F(GpuDevice, HostPinForAnotherDeviceLeavesDevice0WithoutAContext) {
    if (devices_.size() < 2) GTEST_SKIP() << "needs two GPUs";
    const std::string style = GTEST_FLAG_GET(death_test_style);
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    const int device = devices_.back().id;
    EXPECT_EXIT(
        {
            using get_state_fn = CUresult (*)(CUdevice, unsigned*, int*);
            void* fn = nullptr;
            if (cudaGetDriverEntryPointByVersion("cuDevicePrimaryCtxGetState", &fn, 12000, cudaEnableDefault, nullptr) != cudaSuccess ||
                fn == nullptr) {
                std::exit(4);
            }
            const auto get_state = reinterpret_cast<get_state_fn>(fn);
            unsigned ctx_flags = 0;
            int before = 0;
            int after = 0;
            if (get_state(0, &ctx_flags, &before) != CUDA_SUCCESS) std::exit(5);
            std::vector<float> buffer(1 << 20);
            std::thread([&] { paq::gpu::host_pin pin(buffer.data(), buffer.size() * sizeof(float), device); }).join();
            if (get_state(0, &ctx_flags, &after) != CUDA_SUCCESS) std::exit(5);
            std::exit(before != 0 ? 3 : after != 0 ? 2 : 0);
        },
        testing::ExitedWithCode(0), "")
        << "exit 2: the lock made device 0's context; 3: device 0 had one before; 4, 5: no driver entry point";
    GTEST_FLAG_SET(death_test_style, style);  // this test's alone
}

}  // namespace
