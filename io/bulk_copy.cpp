#include "io/bulk_copy.hpp"

#include <cstdint>
#include <cstring>

#if defined(__x86_64__) || defined(_M_X64)
#include <emmintrin.h>
#define PAQ_BULK_COPY_SSE2 1
#endif

namespace paq::io {

void bulk_copy(void* dst, const void* src, std::size_t bytes) noexcept
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

}  // namespace paq::io
