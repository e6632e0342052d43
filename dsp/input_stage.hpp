// The input stage: from the input's sample rate (2 .. 6.4 samples per bit) to the chain's 2
// samples per bit. The batcher cuts windows of INPUT samples (so the ring and the GPU upload stay at
// the input's width); each backend maps a window to its 2-samples-per-bit window here:
//
//   segment (input samples)   s0 ........................................................
//   output m of the segment   at input position s0 + m x step   (32.32 fixed point, step = R)
//   batch window (input)      [w0 ... |owned [ob, oe)| ... w1)    guards scaled by R
//   its 2-sps window          outputs m with full filter support in [w0, w1) (at a segment
//                             start / end: every output positioned in the window), owning the
//                             outputs POSITIONED in [ob, oe)
//
// Every output m has one position whatever window computes it (positions are a function of
// m and the segment alone), and the owned input ranges tile the segment, so the owned
// outputs tile it too: every packet is still processed exactly once, across batches, parts
// and gaps. Packet starts come back as input sample indices (input_index). At exactly 2
// samples per bit (R = 1) nothing is resampled and nothing changes.
#pragma once

#include "dsp/batch.hpp"
#include "dsp/receiver_config.hpp"
#include "dsp/resampler.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>

namespace paq::dsp {

/// The rates of a run and what they imply. Made once per run (make_input_geometry).
struct input_geometry {
    double input_rate_hz = waveform::default_sample_rate_hz;  ///< samples/s the source delivers
    double bit_rate_hz = waveform::default_bit_rate_hz;
    double ratio = 1.0;         ///< input samples per 2-samples-per-bit sample
    bool resampling = false;    ///< ratio != 1
    fixed_pos step = fixed_pos{1} << fixed_frac_bits;  ///< ratio in 32.32
    std::size_t guard_before = batch_guard_before;     ///< input-domain guards for the batcher
    std::size_t guard_after = batch_guard_after;
    std::shared_ptr<const resampler_design> design;    ///< null when not resampling

    /// The chain's rate: 2 x bit_rate_hz (what CFOs in rad/sample refer to).
    [[nodiscard]] double chain_rate_hz() const noexcept { return 2.0 * bit_rate_hz; }
    /// Input samples per packet (L_pkt at 2 samples per bit).
    [[nodiscard]] double packet_spacing_samples() const noexcept { return static_cast<double>(waveform::L_pkt) * ratio; }
};

/// From receiver_config::bit_rate_hz and input_sample_rate_hz (0: 2 samples per bit). Throws
/// std::invalid_argument naming both rates and what is allowed when the config is invalid.
[[nodiscard]] input_geometry make_input_geometry(const receiver_config& rc);

/// An input window's 2-samples-per-bit window.
struct resampled_window {
    std::uint64_t m_begin = 0;     ///< segment-relative output index of out[0]
    std::size_t n_out = 0;         ///< outputs
    fixed_pos first_pos = 0;       ///< out[0]'s position relative to the input window's first sample
    std::size_t owned_begin = 0;   ///< owned outputs, relative to out[0]
    std::size_t owned_end = 0;
};

/// An input window without its samples: what map_window needs.
struct window_span {
    std::uint64_t first_sample = 0;          ///< absolute index of the window's first sample
    std::size_t length = 0;                  ///< input samples in the window
    std::size_t owned_begin = 0, owned_end = 0;
    bool segment_start = false, segment_end = false;
    std::uint64_t segment_first_sample = 0;
};

/// Where a window's 2-samples-per-bit window lies (geometry only; n_out = 0 when it owns
/// nothing). g.resampling must be true. The GPU backend maps its parts with it.
[[nodiscard]] resampled_window map_window(const window_span& in, const input_geometry& g);
[[nodiscard]] resampled_window map_window(const sample_batch& in, const input_geometry& g);

/// Absolute input sample index at or before segment-relative output m of `in`'s segment.
[[nodiscard]] std::uint64_t input_index(const sample_batch& in, std::uint64_t m, const input_geometry& g) noexcept;

/// The CPU's input stage: `in` resampled to a 2-samples-per-bit batch (first_sample = m_begin,
/// segment-relative output indices; owned range, segment flags, index and loss carried over).
/// Map its packets' starts back with input_index. g.resampling must be true.
[[nodiscard]] sample_batch resample_batch(const sample_batch& in, const input_geometry& g);

}  // namespace paq::dsp
