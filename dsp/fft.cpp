#include "dsp/fft.hpp"

#include <fftw3.h>

#include <mutex>
#include <new>
#include <stdexcept>
#include <string>

namespace paq::dsp {

namespace {
std::mutex& planner_mutex()
{
    static std::mutex m;
    return m;
}
}  // namespace

fft_plan::fft_plan(std::size_t n, direction dir) : n_(n)
{
    fft_buffer a(n), b(n);
    std::lock_guard lock(planner_mutex());
    plan_ = fftw_plan_dft_1d(static_cast<int>(n), reinterpret_cast<fftw_complex*>(a.data()),
                             reinterpret_cast<fftw_complex*>(b.data()),
                             dir == direction::forward ? FFTW_FORWARD : FFTW_BACKWARD, FFTW_ESTIMATE);
    plan_inplace_ = fftw_plan_dft_1d(static_cast<int>(n), reinterpret_cast<fftw_complex*>(a.data()),
                                     reinterpret_cast<fftw_complex*>(a.data()),
                                     dir == direction::forward ? FFTW_FORWARD : FFTW_BACKWARD, FFTW_ESTIMATE);
    if (!plan_ || !plan_inplace_) {
        throw std::runtime_error("FFTW could not plan a transform of size " + std::to_string(n));
    }
}

fft_plan::~fft_plan()
{
    if (plan_) {
        std::lock_guard lock(planner_mutex());
        fftw_destroy_plan(static_cast<fftw_plan>(plan_));
        fftw_destroy_plan(static_cast<fftw_plan>(plan_inplace_));
    }
}

fft_plan::fft_plan(fft_plan&& o) noexcept : n_(o.n_), plan_(o.plan_), plan_inplace_(o.plan_inplace_)
{
    o.plan_ = nullptr;
    o.plan_inplace_ = nullptr;
}

fft_plan& fft_plan::operator=(fft_plan&& o) noexcept
{
    std::swap(n_, o.n_);
    std::swap(plan_, o.plan_);
    std::swap(plan_inplace_, o.plan_inplace_);
    return *this;
}

void fft_plan::execute(const cf64* in, cf64* out) const noexcept
{
    // FFTW's new-array execute: same size and alignment as planned; does not modify `in`
    // for out-of-place complex transforms.
    fftw_execute_dft(static_cast<fftw_plan>(in == out ? plan_inplace_ : plan_), reinterpret_cast<fftw_complex*>(const_cast<cf64*>(in)),
                     reinterpret_cast<fftw_complex*>(out));
}

fft_buffer::fft_buffer(std::size_t n) : n_(n)
{
    if (n == 0) return;  // an empty buffer (a second receive channel's, unused with one)
    p_ = static_cast<cf64*>(fftw_malloc(sizeof(cf64) * n));
    if (!p_) {
        throw std::bad_alloc();
    }
    for (std::size_t i = 0; i < n; ++i) {
        p_[i] = 0.0;
    }
}

fft_buffer::~fft_buffer()
{
    if (p_) {
        fftw_free(p_);
    }
}

}  // namespace paq::dsp
