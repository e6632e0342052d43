// Storage for batch windows (hundreds of MB each, filled in place and reused): an allocator
// that does not value-initialize. A std::vector<T> grown to a window zero-fills it on one core
// before anything is written; here nothing is written, and the pages fault in where the reader
// first writes them (sample_file_reader reads large blocks on several threads). Memory comes
// back uninitialized: only for storage that is written before it is read (the batcher's
// windows). Transparent huge pages (MADV_HUGEPAGE) were tried and left out: with the backend
// made while the reader faults windows in, the setup got slower on the H100 host
// (measured: docs/PERFORMANCE.md).
#pragma once

#include <cstddef>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

namespace paq::dsp {

template <class T>
struct window_allocator {
    using value_type = T;

    window_allocator() noexcept = default;
    template <class U>
    window_allocator(const window_allocator<U>&) noexcept  // NOLINT(google-explicit-constructor)
    {
    }

    [[nodiscard]] T* allocate(std::size_t n) { return std::allocator<T>{}.allocate(n); }
    void deallocate(T* p, std::size_t n) noexcept { std::allocator<T>{}.deallocate(p, n); }
    /// Default-initialization: for trivial T, nothing is written.
    template <class U>
    void construct(U* p) noexcept(std::is_nothrow_default_constructible_v<U>)
    {
        ::new (static_cast<void*>(p)) U;
    }
    template <class U, class... Args>
    void construct(U* p, Args&&... args)
    {
        ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
    }
    template <class U>
    friend bool operator==(const window_allocator&, const window_allocator<U>&) noexcept
    {
        return true;
    }
};

/// A batch window's storage: a vector whose growth writes nothing.
template <class T>
using window_vector = std::vector<T, window_allocator<T>>;

}  // namespace paq::dsp
