// A CUDA stream handle for plain C++ headers: the same type as cudaStream_t, without
// including CUDA. Device-level APIs take one so stages can be chained on one stream.
#pragma once

struct CUstream_st;

namespace paq::gpu {
using cuda_stream_t = CUstream_st*;
}  // namespace paq::gpu
