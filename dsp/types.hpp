// Plain types shared by every layer. No CUDA, no third-party headers.
#pragma once

#include <complex>
#include <cstddef>
#include <cstdint>

namespace paq {

using cf32 = std::complex<float>;   ///< one IQ sample as stored and streamed
using cf64 = std::complex<double>;  ///< the CPU reference computes in double

}  // namespace paq
