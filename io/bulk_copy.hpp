// Copying many samples into memory that the copying thread will not read again soon: the ring
// into a batch window (read next by the GPU's DMA, or by the CPU backend a batch later), the
// largest copy of the live service's host path.
#pragma once

#include <cstddef>

namespace paq::io {

/// From this many bytes on, bulk_copy bypasses the cache.
inline constexpr std::size_t bulk_copy_streaming_bytes = std::size_t{256} << 10;
/// From twice this many bytes on, bulk_copy splits the copy over several threads, pieces of at
/// least this size, at most bulk_copy_max_threads of them.
inline constexpr std::size_t bulk_copy_piece_bytes = std::size_t{1} << 20;
inline constexpr int bulk_copy_max_threads = 4;

/// memcpy(dst, src, bytes) for non-overlapping ranges. From bulk_copy_streaming_bytes on (on
/// x86-64), with non-temporal stores: the destination's lines are written without being read
/// into the cache first, and without evicting what the cache holds; from two pieces on, by
/// several threads (OpenMP), since one core copies at a fraction of what the memory can.
void bulk_copy(void* dst, const void* src, std::size_t bytes) noexcept;

}  // namespace paq::io
