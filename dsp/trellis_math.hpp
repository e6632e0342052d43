// The arithmetic the trellis detector's CPU reference (dsp/trellis.cpp) and its GPU stage
// (gpu/trellis.cu) share: how a window of bits indexes the model's table, and the branch metric
// of a trellis step. Host and device.
//
// A state sequence `seq` of step j holds the bits a_{j-memory} .. a_j, the oldest in the most
// significant bit (bit set: a = +1). Step j explains the sample of bit k = j - after, whose
// window is exactly those bits: a_k is bit `after` of seq.
#pragma once

#include "dsp/iq_correction.hpp"  // PAQ_HOST_DEVICE
#include "dsp/receiver_tables.hpp"
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

/// The factor on the LLRs of a path's trellis (its metrics' scale 1 / (2 sigma2) times it), so
/// that they are calibrated: the mean of 1 / (1 + e^|LLR|) over the data bits estimates their
/// error rate. Max-log BCJR over samples whose noise it counts as independent (the low-passed
/// noise correlates 0.29 a bit apart and -0.17 two apart on AWGN; 0.45-0.5 and -0.1 after FDE2,
/// whose noise is the most coloured) overstates |LLR| by a factor the Eb/N0 hardly changes: the
/// estimate read 0.58-0.66x the measured BER (FDE2 0.44-0.53x) on AWGN at 5-10 dB Eb/N0 and on
/// edwards3 at 12-16 dB; with these factors 0.97-1.11x (FDE2 0.90-1.08x). Measured, with the
/// factors' effect on each stream: docs/SIGNAL-CHAIN.md, "Trellis detection". A path index
/// outside 0 .. 5 gets the common factor.
PAQ_HOST_DEVICE constexpr double llr_calibration(int path) noexcept
{
    return path == static_cast<int>(eq_path::fde2) ? 0.6 : 0.7;
}

}  // namespace paq::dsp::trellis_math
