// CUDA stream and event handles for plain C++ headers: the same types as cudaStream_t and
// cudaEvent_t, without including CUDA. Device-level APIs take them so stages can be chained
// on one stream, or ordered across streams.
#pragma once

struct CUstream_st;
struct CUevent_st;

namespace paq::gpu {
using cuda_stream_t = CUstream_st*;
using cuda_event_t = CUevent_st*;  ///< the same type as cudaEvent_t
}  // namespace paq::gpu
