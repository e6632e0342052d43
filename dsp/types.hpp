// Plain types shared by every layer. No CUDA, no third-party headers.
#pragma once

#include <complex>
#include <cstddef>
#include <cstdint>

namespace paq {

using cf32 = std::complex<float>;   ///< one IQ sample as stored and streamed
using cf64 = std::complex<double>;  ///< the CPU reference computes in double

/// a + b, or 2^64 - 1 where that overflows: sample counts and indices from outside (a hostile
/// timestamp, a flood of gaps) must never wrap to a small number.
[[nodiscard]] constexpr std::uint64_t saturating_add(std::uint64_t a, std::uint64_t b) noexcept
{
    return b > ~std::uint64_t{0} - a ? ~std::uint64_t{0} : a + b;
}

}  // namespace paq
