// The arithmetic the trellis detector's CPU reference (dsp/trellis.cpp) and its GPU stage
// (gpu/trellis.cu) share: how a window of bits indexes the model's table, and the branch metric
// of a trellis step. Host and device.
//
// A state sequence `seq` of step j holds the bits a_{j-memory} .. a_j, the oldest in the most
// significant bit (bit set: a = +1). Step j explains the sample of bit k = j - after, whose
// window is exactly those bits: a_k is bit `after` of seq.
#pragma once

#include "dsp/iq_correction.hpp"  // PAQ_HOST_DEVICE
#include "dsp/trellis.hpp"

namespace paq::dsp::trellis_math {

/// +1 or -1: the sign of bit k (the window's centre) in seq.
PAQ_HOST_DEVICE constexpr int pattern_sign(int seq) noexcept { return ((seq >> trellis::after) & 1) != 0 ? 1 : -1; }

/// The table entry of seq: seq with its centre bit made +1 (every bit negated when it is -1),
/// the centre bit then dropped.
PAQ_HOST_DEVICE constexpr int pattern_index(int seq) noexcept
{
    constexpr int all = (1 << trellis::window) - 1;
    constexpr int low = (1 << trellis::after) - 1;
    const int s = pattern_sign(seq) > 0 ? seq : seq ^ all;
    return ((s >> (trellis::after + 1)) << trellis::after) | (s & low);
}

/// The branch metric, unscaled and less the sample's own energy |x|^2 (the same for every
/// branch of a step): |x - sign t|^2 - |x|^2 = energy - 2 sign corr, with corr = Re(x conj t)
/// and energy = |t|^2 of the sequence's entry t.
PAQ_HOST_DEVICE constexpr double branch_metric(double corr, double energy, int seq) noexcept
{
    return energy - 2.0 * static_cast<double>(pattern_sign(seq)) * corr;
}

}  // namespace paq::dsp::trellis_math
