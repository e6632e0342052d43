#include "io/sample_format.hpp"

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

namespace paq::io {
namespace {

// Byte-wise little-endian loads and stores: correct on any host, and GCC/Clang turn them into
// plain loads and stores on little-endian ones. The 32-bit pair is only called on big-endian
// hosts (little-endian ones memcpy cf32 whole), hence [[maybe_unused]].
[[nodiscard]] std::uint16_t load_le_u16(const std::byte* p) noexcept {
  return static_cast<std::uint16_t>(std::to_integer<unsigned>(p[0]) |
                                    (std::to_integer<unsigned>(p[1]) << 8));
}

[[nodiscard, maybe_unused]] std::uint32_t load_le_u32(const std::byte* p) noexcept {
  return std::to_integer<std::uint32_t>(p[0]) | (std::to_integer<std::uint32_t>(p[1]) << 8) |
         (std::to_integer<std::uint32_t>(p[2]) << 16) |
         (std::to_integer<std::uint32_t>(p[3]) << 24);
}

void store_le_u16(std::byte* p, std::uint16_t v) noexcept {
  p[0] = static_cast<std::byte>(v & 0xFFu);
  p[1] = static_cast<std::byte>(v >> 8);
}

[[maybe_unused]] void store_le_u32(std::byte* p, std::uint32_t v) noexcept {
  p[0] = static_cast<std::byte>(v & 0xFFu);
  p[1] = static_cast<std::byte>((v >> 8) & 0xFFu);
  p[2] = static_cast<std::byte>((v >> 16) & 0xFFu);
  p[3] = static_cast<std::byte>(v >> 24);
}

inline constexpr float ci16_max = 32767.0f;

// Rounds to nearest (ties to even) and saturates to [-32767, 32767]. The range test is on the
// unrounded value against +-32767.5, exclusive, which is exactly the set of values that round
// into range; NaN fails both comparisons and selects 0. Written as selects rather than early
// returns, and with std::rint rather than std::nearbyint (which saves and restores the FP
// environment), because this runs per component of every recorded sample: about 2x faster.
[[nodiscard]] std::int16_t quantize(float value, float scale, std::size_t& clipped) noexcept {
  const float scaled = value * scale;
  const bool in_range = scaled > -(ci16_max + 0.5f) && scaled < ci16_max + 0.5f;
  clipped += in_range ? 0u : 1u;
  const float saturated =
      in_range ? scaled : (scaled > 0.0f ? ci16_max : (scaled < 0.0f ? -ci16_max : 0.0f));
  return static_cast<std::int16_t>(std::rint(saturated));
}

}  // namespace

sample_format parse_sample_format(std::string_view name) {
  return parse_named(sample_format_names, name, "sample format");
}

std::string_view to_sigmf_datatype(sample_format format) noexcept {
  return name_of(sample_format_names, format);
}

std::size_t bytes_per_sample(sample_format format) noexcept {
  switch (format) {
    case sample_format::cf32_le: return 2 * sizeof(float);
    case sample_format::ci16_le: return 2 * sizeof(std::int16_t);
  }
  return 2 * sizeof(float);  // unreachable
}

namespace {
// Below this many samples a block is converted on the calling thread: a thread team's start
// and its idle spinning cost more than converting it. (At 2^16 the live file source, which
// converts 64 Ki-sample chunks, started a 16-thread team per chunk: 9 OpenMP threads at 11 s
// of CPU each over a 150 s soak, the source thread at 116 s; docs/PERFORMANCE.md.)
constexpr std::size_t parallel_decode_min_samples = std::size_t{1} << 20;
}  // namespace

void decode(sample_format format, const std::byte* src, std::size_t n, cf32* dst,
            float ci16_scale) noexcept {
  switch (format) {
    case sample_format::cf32_le:
      if constexpr (std::endian::native == std::endian::little) {
        // std::complex<float> is layout-compatible with float[2], so the file bytes are
        // already the in-memory representation.
        if (n != 0) std::memcpy(dst, src, n * sizeof(cf32));
      } else {
        for (std::size_t k = 0; k < n; ++k) {
          dst[k] = cf32(std::bit_cast<float>(load_le_u32(src + 8 * k)),
                        std::bit_cast<float>(load_le_u32(src + 8 * k + 4)));
        }
      }
      return;
    case sample_format::ci16_le: {
      // Division rather than multiplication by a reciprocal: the result is then the correctly
      // rounded value for any scale. Large blocks are spread over the cores (a replay reads
      // faster than one core converts); each sample is converted the same way either way.
      const auto n_signed = static_cast<std::ptrdiff_t>(n);
#pragma omp parallel for schedule(static) if (n >= parallel_decode_min_samples)
      for (std::ptrdiff_t k = 0; k < n_signed; ++k) {
        const auto i = static_cast<std::int16_t>(load_le_u16(src + 4 * k));
        const auto q = static_cast<std::int16_t>(load_le_u16(src + 4 * k + 2));
        dst[k] = to_cf32(ci16{i, q}, ci16_scale);
      }
      return;
    }
  }
}

void decode_ci16(const std::byte* src, std::size_t n, ci16* dst) noexcept {
  if constexpr (std::endian::native == std::endian::little) {
    if (n != 0) std::memcpy(dst, src, n * sizeof(ci16));
  } else {
    for (std::size_t k = 0; k < n; ++k) {
      dst[k] = ci16{static_cast<std::int16_t>(load_le_u16(src + 4 * k)),
                    static_cast<std::int16_t>(load_le_u16(src + 4 * k + 2))};
    }
  }
}

std::size_t encode(sample_format format, const cf32* src, std::size_t n, std::byte* dst,
                   float ci16_scale) noexcept {
  std::size_t clipped = 0;
  switch (format) {
    case sample_format::cf32_le:
      if constexpr (std::endian::native == std::endian::little) {
        if (n != 0) std::memcpy(dst, src, n * sizeof(cf32));
      } else {
        for (std::size_t k = 0; k < n; ++k) {
          store_le_u32(dst + 8 * k, std::bit_cast<std::uint32_t>(src[k].real()));
          store_le_u32(dst + 8 * k + 4, std::bit_cast<std::uint32_t>(src[k].imag()));
        }
      }
      break;
    case sample_format::ci16_le:
      for (std::size_t k = 0; k < n; ++k) {
        const std::int16_t i = quantize(src[k].real(), ci16_scale, clipped);
        const std::int16_t q = quantize(src[k].imag(), ci16_scale, clipped);
        store_le_u16(dst + 4 * k, static_cast<std::uint16_t>(i));
        store_le_u16(dst + 4 * k + 2, static_cast<std::uint16_t>(q));
      }
      break;
  }
  return clipped;
}

}  // namespace paq::io
