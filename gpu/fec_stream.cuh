// The continuous coded stream's codewords gathered on the GPU (dsp/fec_stream.hpp is the CPU's:
// stream_deframer::codeword_llrs): each frame's n codeword LLRs on every output stream, read
// from the data fields' LLRs that the batch's packets left on the device, the randomizer taken
// off, as the decoder takes them. The host finds the frames (dsp::stream_deframer); the CUDA
// backend then decodes every gathered codeword in one launch. CUDA code only (.cu).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace paq::gpu {

/// The most data fields a codeword crosses: n <= 8192 bits begun anywhere in a 6144-bit field.
inline constexpr int stream_word_fields = 3;

/// Where one frame's codeword lies: its bit 0 is bit `first` (0 .. 6143) of the first data
/// field it crosses; field[q] is the packet holding the q-th of the consecutive fields it
/// crosses, its LLRs [stream][6144] on the device; null where that packet was missed (its
/// bits erasures, LLR 0).
struct stream_word {
    const float* field[stream_word_fields];
    int first;
};

/// Copies the randomizer's period (dsp::randomizer_bits) to the device (once per process and
/// device: the backend's constructor).
void fec_stream_setup_device();

/// words[w] (device) for w < count, on every stream s < streams: codeword w's n LLRs on
/// stream s into out[(w streams + s) n ..], the randomizer taken off (the LLR's sign turned
/// where its bit is 1, restarted at each codeword as dsp::stream_deframer does), on stream st.
void gather_stream_words(const stream_word* words, std::size_t count, int streams, int n, float* out, cudaStream_t st);

}  // namespace paq::gpu
