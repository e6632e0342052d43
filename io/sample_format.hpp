// On-disk IQ sample formats and the conversions between them and cf32.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

#include "dsp/names.hpp"
#include "dsp/types.hpp"

namespace paq::io {

/// The two sample formats paqd reads and writes. Both are interleaved I/Q, little-endian,
/// which is what SigMF calls "cf32_le" and "ci16_le".
enum class sample_format { cf32_le, ci16_le };
/// Each SigMF name, then its short form (what people type on a command line).
inline constexpr name_table<sample_format, 4> sample_format_names{{{"cf32_le", sample_format::cf32_le},
                                                                   {"cf32", sample_format::cf32_le},
                                                                   {"ci16_le", sample_format::ci16_le},
                                                                   {"ci16", sample_format::ci16_le}}};

/// ci16 counts per unit of signal amplitude. Full scale (32767) is then 4x the nominal unit
/// signal amplitude: enough headroom that noise at low Eb/N0 rarely clips, while a unit signal
/// still uses 13 bits.
inline constexpr float default_ci16_scale = 8192.0f;
/// The most channels a recording may interleave, a sample of each per sample time (SigMF
/// core:num_channels, a raw file's channel count).
inline constexpr int max_channels = 16;
/// The ci16 scales paqd takes (a recording's paq:ci16_scale, a source's ci16_scale): beyond
/// them a count would convert to zero, a denormal or an infinity.
inline constexpr double min_ci16_scale = 1e-6;
inline constexpr double max_ci16_scale = 1e9;

/// Accepts "cf32_le", "cf32", "ci16_le", "ci16" (the short forms are what people type on a
/// command line). Throws std::invalid_argument naming the bad value and the accepted ones.
[[nodiscard]] sample_format parse_sample_format(std::string_view name);

/// The SigMF core:datatype string: "cf32_le" or "ci16_le".
[[nodiscard]] std::string_view to_sigmf_datatype(sample_format format) noexcept;

/// Bytes per complex sample: 8 for cf32_le, 4 for ci16_le.
[[nodiscard]] std::size_t bytes_per_sample(sample_format format) noexcept;

/// Converts n little-endian samples at src (n * bytes_per_sample(format) bytes, any alignment)
/// to cf32. ci16 components are divided by ci16_scale (ignored for cf32; must be positive).
void decode(sample_format format, const std::byte* src, std::size_t n, cf32* dst,
            float ci16_scale) noexcept;

/// Reads n little-endian ci16 samples at src (4n bytes, any alignment) as they are, without
/// conversion (each stands for to_cf32(s, scale)): a copy on a little-endian host.
void decode_ci16(const std::byte* src, std::size_t n, ci16* dst) noexcept;

/// The width a source of this format delivers (sample_source::ci16_scale()): ci16 at
/// ci16_scale for ci16_le, cf32 (nullopt) otherwise.
[[nodiscard]] inline std::optional<float> ci16_scale_of(sample_format format, float ci16_scale) noexcept
{
    return format == sample_format::ci16_le ? std::optional<float>(ci16_scale) : std::nullopt;
}

/// Converts n cf32 samples to little-endian bytes at dst (n * bytes_per_sample(format) bytes,
/// any alignment). For ci16 each component is multiplied by ci16_scale, rounded to nearest
/// and saturated to [-32767, 32767] (symmetric, so that negating a sample never overflows);
/// NaN encodes as 0. Returns how many components (I and Q counted separately) were saturated
/// or NaN; always 0 for cf32.
[[nodiscard]] std::size_t encode(sample_format format, const cf32* src, std::size_t n,
                                 std::byte* dst, float ci16_scale) noexcept;

}  // namespace paq::io
