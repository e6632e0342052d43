// FFTW (double) wrapper for the CPU reference: a plan made once, executed from many threads
// on different buffers (fftw_execute_dft is thread-safe; planning is not, so it is locked).
#pragma once

#include "dsp/types.hpp"

#include <cstddef>
#include <memory>
#include <span>

namespace paq::dsp {

class fft_plan {
public:
    enum class direction { forward, inverse };

    fft_plan(std::size_t n, direction dir);
    ~fft_plan();
    fft_plan(const fft_plan&) = delete;
    fft_plan& operator=(const fft_plan&) = delete;
    fft_plan(fft_plan&&) noexcept;
    fft_plan& operator=(fft_plan&&) noexcept;

    /// out = DFT(in), unnormalized in both directions. in and out must come from
    /// fft_buffer (FFTW alignment); they may be the same buffer.
    void execute(const cf64* in, cf64* out) const noexcept;
    [[nodiscard]] std::size_t size() const noexcept { return n_; }

private:
    std::size_t n_ = 0;
    void* plan_ = nullptr;          ///< out-of-place
    void* plan_inplace_ = nullptr;  ///< FFTW plans are either in-place or not
};

/// An FFTW-aligned buffer of complex doubles.
class fft_buffer {
public:
    explicit fft_buffer(std::size_t n);  ///< n zeros; n = 0: an empty buffer (data() null)
    ~fft_buffer();
    fft_buffer(const fft_buffer&) = delete;
    fft_buffer& operator=(const fft_buffer&) = delete;
    fft_buffer(fft_buffer&& o) noexcept : p_(o.p_), n_(o.n_) { o.p_ = nullptr; o.n_ = 0; }

    [[nodiscard]] cf64* data() noexcept { return p_; }
    [[nodiscard]] const cf64* data() const noexcept { return p_; }
    [[nodiscard]] std::size_t size() const noexcept { return n_; }
    [[nodiscard]] std::span<cf64> span() noexcept { return {p_, n_}; }
    cf64& operator[](std::size_t i) noexcept { return p_[i]; }
    const cf64& operator[](std::size_t i) const noexcept { return p_[i]; }

private:
    cf64* p_ = nullptr;
    std::size_t n_ = 0;
};

}  // namespace paq::dsp
