// The estimators' matrix products on the GPU: C = A^T B in single-precision complex (plain
// transpose, no conjugate), every matrix column-major. The products are the channel estimates
// (the stacked pilot and support estimators times every packet's observation range) and their
// fits: one fixed matrix against a batch of packets, a few hundred rows deep.
//
// Written here rather than taken from cuBLAS: cuBLAS brings cublasLt (541 MB), which every
// process that links it loads at start-up (docs/PERFORMANCE.md, "The CUDA libraries' load"),
// and its first product in a process costs 10-20 ms more than the later ones; its kernels also
// depend on the product's shape, so a packet's rounding changed with the batch it came in. Here
// every output is one thread's running sum over k in order, so a packet's estimate does not
// depend on the batch around it.
//
// Plain C++ header: no CUDA types leak out.
#pragma once

#include "dsp/types.hpp"
#include "gpu/stream_ref.hpp"

namespace paq::gpu {

/// C (m x n, leading dimension ldc) = A^T B on stream s: A is k x m (lda >= k), B k x n
/// (ldb >= k); element (i, j) = sum over l = 0 .. k-1 of A[l + i lda] B[l + j ldb], summed in
/// order of l in float. Device pointers; m, n or k of 0 writes C as zeros (k = 0) or nothing.
/// Asynchronous. A bad shape (a negative size, a leading dimension below its column's length,
/// m past 1,048,560 or a size past 2^30) throws std::invalid_argument; a launch error
/// std::runtime_error.
void product_tn(int m, int n, int k, const cf32* a, int lda, const cf32* b, int ldb, cf32* c, int ldc, cuda_stream_t s);

}  // namespace paq::gpu
