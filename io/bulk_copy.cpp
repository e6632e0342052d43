#include "io/bulk_copy.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__) || defined(_M_X64)
#include <emmintrin.h>
#define PAQ_BULK_COPY_SSE2 1
#endif

namespace paq::io {

namespace {

void copy_piece(void* dst, const void* src, std::size_t bytes) noexcept
{
#if PAQ_BULK_COPY_SSE2
    if (bytes >= bulk_copy_streaming_bytes) {
        auto* d = static_cast<unsigned char*>(dst);
        const auto* s = static_cast<const unsigned char*>(src);
        // Non-temporal stores need 16-byte aligned destinations: the head by memcpy.
        const std::size_t head = (16 - (reinterpret_cast<std::uintptr_t>(d) & 15)) & 15;
        std::memcpy(d, s, head);
        d += head;
        s += head;
        bytes -= head;
        const std::size_t blocks = bytes / 64;
        for (std::size_t i = 0; i < blocks; ++i, d += 64, s += 64) {
            const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s));
            const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 16));
            const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 32));
            const __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 48));
            _mm_stream_si128(reinterpret_cast<__m128i*>(d), a);
            _mm_stream_si128(reinterpret_cast<__m128i*>(d + 16), b);
            _mm_stream_si128(reinterpret_cast<__m128i*>(d + 32), c);
            _mm_stream_si128(reinterpret_cast<__m128i*>(d + 48), e);
        }
        // The streamed stores are weakly ordered: fenced before the copy counts as done
        // (another thread may read the destination once the caller publishes it).
        _mm_sfence();
        std::memcpy(d, s, bytes % 64);
        return;
    }
#endif
    std::memcpy(dst, src, bytes);
}

}  // namespace

void bulk_copy(void* dst, const void* src, std::size_t bytes) noexcept
{
    const int pieces = static_cast<int>(std::min<std::size_t>(bulk_copy_max_threads, bytes / bulk_copy_piece_bytes));
    if (pieces < 2) {
        copy_piece(dst, src, bytes);
        return;
    }
    auto* d = static_cast<unsigned char*>(dst);
    const auto* s = static_cast<const unsigned char*>(src);
#pragma omp parallel for schedule(static) num_threads(pieces)
    for (int k = 0; k < pieces; ++k) {
        const std::size_t b = bytes * static_cast<std::size_t>(k) / static_cast<std::size_t>(pieces);
        const std::size_t e = bytes * static_cast<std::size_t>(k + 1) / static_cast<std::size_t>(pieces);
        copy_piece(d + b, s + b, e - b);
    }
}

}  // namespace paq::io
