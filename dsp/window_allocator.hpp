// Storage for batch windows (hundreds of MB each, filled in place and reused): an allocator
// that does not value-initialize (a std::vector<T> grown to a window zero-fills it on one
// core before anything is written; here the first write faults the pages in, in whichever
// thread writes) and asks for transparent huge pages, so that a window faults in 2 MiB at a
// time rather than 4 KiB. Memory comes back uninitialized: only for storage that is written
// before it is read (the batcher's windows).
#pragma once

#include <cstddef>
#include <cstdlib>
#include <new>
#include <utility>
#include <vector>

#include <sys/mman.h>

namespace paq::dsp {

template <class T>
struct window_allocator {
    using value_type = T;
    /// Allocations from this size on are 2 MiB aligned and advised MADV_HUGEPAGE.
    static constexpr std::size_t huge_from_bytes = std::size_t{2} << 20;

    window_allocator() noexcept = default;
    template <class U>
    window_allocator(const window_allocator<U>&) noexcept  // NOLINT(google-explicit-constructor)
    {
    }

    [[nodiscard]] T* allocate(std::size_t n)
    {
        if (n > static_cast<std::size_t>(-1) / sizeof(T)) throw std::bad_array_new_length();
        const std::size_t bytes = n * sizeof(T);
        if (bytes < huge_from_bytes) return static_cast<T*>(::operator new(bytes, std::align_val_t{alignof(T)}));
        const std::size_t rounded = (bytes + huge_from_bytes - 1) / huge_from_bytes * huge_from_bytes;
        void* p = std::aligned_alloc(huge_from_bytes, rounded);
        if (p == nullptr) throw std::bad_alloc();
        // Advisory: without THP the window is simply made of small pages.
        (void)::madvise(p, rounded, MADV_HUGEPAGE);
        return static_cast<T*>(p);
    }
    void deallocate(T* p, std::size_t n) noexcept
    {
        if (n * sizeof(T) < huge_from_bytes) {
            ::operator delete(p, std::align_val_t{alignof(T)});
        } else {
            std::free(p);
        }
    }
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
