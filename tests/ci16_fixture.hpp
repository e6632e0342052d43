// The two widths of the same samples, for the ci16 tests: cf32 written as ci16
// (io::encode: rounded, saturated) and ci16 read back as cf32 (io::decode, what a cf32 path
// makes of them).
#pragma once

#include "dsp/types.hpp"
#include "io/sample_format.hpp"

#include <cstddef>
#include <cstring>
#include <vector>

namespace paq::test {

/// x as ci16 little-endian bytes (io::encode) and read back as ci16.
inline std::vector<ci16> quantize(const std::vector<cf32>& x, float scale)
{
    std::vector<std::byte> bytes(x.size() * sizeof(ci16));
    (void)io::encode(io::sample_format::ci16_le, x.data(), x.size(), bytes.data(), scale);
    std::vector<ci16> q(x.size());
    std::memcpy(q.data(), bytes.data(), bytes.size());
    return q;
}

/// What reading the ci16 samples as cf32 gives (io::decode).
inline std::vector<cf32> decoded(const std::vector<ci16>& q, float scale)
{
    std::vector<cf32> x(q.size());
    io::decode(io::sample_format::ci16_le, reinterpret_cast<const std::byte*>(q.data()), q.size(), x.data(), scale);
    return x;
}

}  // namespace paq::test
