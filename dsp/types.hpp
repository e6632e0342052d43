// Plain types shared by every layer. No CUDA, no third-party headers.
#pragma once

#include <complex>
#include <span>
#include <cstddef>
#include <cstdint>

namespace paq {

using cf32 = std::complex<float>;   ///< one IQ sample as stored and streamed
using cf64 = std::complex<double>;  ///< the CPU reference computes in double

/// One IQ sample as 16-bit integers (SigMF ci16_le on a little-endian host): what ci16
/// sources deliver, kept at its own width through the ring and the batcher up to the backend:
/// 4 bytes a sample instead of cf32's 8.
/// Trivial (no default member initializers): window storage of ci16 is allocated without
/// being written (dsp/window_allocator.hpp); ci16{} is zero.
struct ci16 {
    std::int16_t re;
    std::int16_t im;
};
static_assert(sizeof(ci16) == 4, "ci16 must be two packed 16-bit integers");

/// The sample a ci16 stands for: each component divided by `scale` (counts per unit of
/// amplitude), one correctly rounded float division, so that every place that converts
/// (io::decode, the CPU backend, the GPU's conversion kernel) gives the same bits.
[[nodiscard]] inline cf32 to_cf32(ci16 s, float scale) noexcept
{
    return {static_cast<float>(s.re) / scale, static_cast<float>(s.im) / scale};
}

/// One sample time of a two-channel stream: channel 1's sample, then channel 2's (the
/// interleaved layout of a two-channel recording, SigMF core:num_channels 2). The chain with
/// two receive channels (receiver_config::channels 2) takes its windows of these.
struct cf32x2 {
    cf32 a;
    cf32 b;
};
static_assert(sizeof(cf32x2) == 16, "cf32x2 must be two packed cf32");

/// Interleaved values of two channels (channel 1, channel 2, ... per sample time, as a
/// two-channel stream carries them) as sample times: out[k] = {in[2k], in[2k + 1]} for every
/// k < out.size() (in holds at least twice as many).
inline void pair_channels(std::span<const cf32> interleaved, std::span<cf32x2> out) noexcept
{
    for (std::size_t k = 0; k < out.size(); ++k) out[k] = {interleaved[2 * k], interleaved[2 * k + 1]};
}
/// The reverse: sample times as interleaved values, out[2k] = in[k].a, out[2k + 1] = in[k].b.
inline void interleave_channels(std::span<const cf32x2> in, std::span<cf32> out) noexcept
{
    for (std::size_t k = 0; k < in.size(); ++k) {
        out[2 * k] = in[k].a;
        out[2 * k + 1] = in[k].b;
    }
}

/// a + b, or 2^64 - 1 where that overflows: sample counts and indices from outside (a hostile
/// timestamp, a flood of gaps) must never wrap to a small number.
[[nodiscard]] constexpr std::uint64_t saturating_add(std::uint64_t a, std::uint64_t b) noexcept
{
    return b > ~std::uint64_t{0} - a ? ~std::uint64_t{0} : a + b;
}

}  // namespace paq
