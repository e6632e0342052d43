// Owning, move-only RAII handles for GPU resources (after CCCL's cuda::stream): device and
// pinned buffers, streams, events, cuFFT plans. Every call is checked;
// destructors report and never throw. CUDA code only (.cu).
#pragma once

#include "gpu/cuda_check.hpp"

#include <cusolver_common.h>
#include <cufft.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <string>
#include <utility>

#define PAQ_CUFFT_CHECK(call)                                                                    \
    do {                                                                                         \
        const cufftResult paq_cufft_status_ = (call);                                            \
        if (paq_cufft_status_ != CUFFT_SUCCESS) {                                                \
            throw std::runtime_error(std::string(#call) + " failed: cufftResult " +             \
                                     std::to_string(static_cast<int>(paq_cufft_status_)) + " at " + \
                                     __FILE__ + ":" + std::to_string(__LINE__));                 \
        }                                                                                        \
    } while (false)

#define PAQ_CUSOLVER_CHECK(call)                                                                 \
    do {                                                                                         \
        const cusolverStatus_t paq_cusolver_status_ = (call);                                    \
        if (paq_cusolver_status_ != CUSOLVER_STATUS_SUCCESS) {                                   \
            throw std::runtime_error(std::string(#call) + " failed: cusolverStatus " +          \
                                     std::to_string(static_cast<int>(paq_cusolver_status_)) + " at " + \
                                     __FILE__ + ":" + std::to_string(__LINE__));                 \
        }                                                                                        \
    } while (false)

namespace paq::gpu {

/// Makes `dev` current and returns it: for member initializer lists, so that every member
/// built after it allocates on that device.
inline int select_device(int dev)
{
    PAQ_CUDA_CHECK(cudaSetDevice(dev));
    return dev;
}

/// Device memory for n elements of T.
template <typename T>
class device_buffer {
public:
    device_buffer() = default;
    explicit device_buffer(std::size_t n) : n_(n)
    {
        if (n) PAQ_CUDA_CHECK(cudaMalloc(&p_, n * sizeof(T)));
    }
    ~device_buffer() { PAQ_CUDA_CHECK_NOTHROW(cudaFree(p_)); }
    device_buffer(device_buffer&& o) noexcept : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
    device_buffer& operator=(device_buffer&& o) noexcept
    {
        std::swap(p_, o.p_);
        std::swap(n_, o.n_);
        return *this;
    }
    device_buffer(const device_buffer&) = delete;
    device_buffer& operator=(const device_buffer&) = delete;

    [[nodiscard]] T* data() noexcept { return p_; }
    [[nodiscard]] const T* data() const noexcept { return p_; }
    [[nodiscard]] std::size_t size() const noexcept { return n_; }

private:
    T* p_ = nullptr;
    std::size_t n_ = 0;
};

/// Page-locked host memory for n elements of T (fast, asynchronous copies).
template <typename T>
class pinned_buffer {
public:
    pinned_buffer() = default;
    explicit pinned_buffer(std::size_t n) : n_(n)
    {
        if (n) PAQ_CUDA_CHECK(cudaMallocHost(&p_, n * sizeof(T)));
    }
    ~pinned_buffer() { PAQ_CUDA_CHECK_NOTHROW(cudaFreeHost(p_)); }
    pinned_buffer(pinned_buffer&& o) noexcept : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
    pinned_buffer& operator=(pinned_buffer&& o) noexcept
    {
        std::swap(p_, o.p_);
        std::swap(n_, o.n_);
        return *this;
    }
    pinned_buffer(const pinned_buffer&) = delete;
    pinned_buffer& operator=(const pinned_buffer&) = delete;

    [[nodiscard]] T* data() noexcept { return p_; }
    [[nodiscard]] std::size_t size() const noexcept { return n_; }
    T& operator[](std::size_t i) noexcept { return p_[i]; }

private:
    T* p_ = nullptr;
    std::size_t n_ = 0;
};

class stream {
public:
    stream() { PAQ_CUDA_CHECK(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking)); }
    ~stream()
    {
        if (s_) PAQ_CUDA_CHECK_NOTHROW(cudaStreamDestroy(s_));
    }
    stream(stream&& o) noexcept : s_(std::exchange(o.s_, nullptr)) {}
    stream& operator=(stream&& o) noexcept
    {
        std::swap(s_, o.s_);
        return *this;
    }
    stream(const stream&) = delete;
    stream& operator=(const stream&) = delete;

    [[nodiscard]] cudaStream_t get() const noexcept { return s_; }
    void synchronize() const { PAQ_CUDA_CHECK(cudaStreamSynchronize(s_)); }

private:
    cudaStream_t s_ = nullptr;
};

class event {
public:
    event() { PAQ_CUDA_CHECK(cudaEventCreate(&e_)); }
    ~event()
    {
        if (e_) PAQ_CUDA_CHECK_NOTHROW(cudaEventDestroy(e_));
    }
    event(event&& o) noexcept : e_(std::exchange(o.e_, nullptr)) {}
    event& operator=(event&& o) noexcept
    {
        std::swap(e_, o.e_);
        return *this;
    }
    event(const event&) = delete;
    event& operator=(const event&) = delete;

    void record(cudaStream_t s) { PAQ_CUDA_CHECK(cudaEventRecord(e_, s)); }
    [[nodiscard]] cudaEvent_t get() const noexcept { return e_; }
    /// Milliseconds from `start` to this event (both recorded and complete).
    [[nodiscard]] float elapsed_ms_since(const event& start) const
    {
        float ms = 0.0f;
        PAQ_CUDA_CHECK(cudaEventSynchronize(e_));
        PAQ_CUDA_CHECK(cudaEventElapsedTime(&ms, start.e_, e_));
        return ms;
    }

private:
    cudaEvent_t e_ = nullptr;
};

/// A batched 1-D complex-to-complex single-precision cuFFT plan.
class cufft_plan {
public:
    cufft_plan(int n, int batch, cudaStream_t s)
    {
        PAQ_CUFFT_CHECK(cufftPlan1d(&h_, n, CUFFT_C2C, batch));
        PAQ_CUFFT_CHECK(cufftSetStream(h_, s));
        valid_ = true;
    }
    ~cufft_plan()
    {
        if (valid_) static_cast<void>(cufftDestroy(h_));
    }
    cufft_plan(cufft_plan&& o) noexcept : h_(o.h_), valid_(std::exchange(o.valid_, false)) {}
    cufft_plan(const cufft_plan&) = delete;
    cufft_plan& operator=(const cufft_plan&) = delete;

    void forward(cufftComplex* in, cufftComplex* out) const { PAQ_CUFFT_CHECK(cufftExecC2C(h_, in, out, CUFFT_FORWARD)); }
    void inverse(cufftComplex* in, cufftComplex* out) const { PAQ_CUFFT_CHECK(cufftExecC2C(h_, in, out, CUFFT_INVERSE)); }

private:
    cufftHandle h_{};
    bool valid_ = false;
};

}  // namespace paq::gpu
