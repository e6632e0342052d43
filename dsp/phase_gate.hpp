// When the phase smoother is needed (receiver.phase_smoother -1, auto): the PLL
// detects every packet first, and measures on the way how far its phase wanders over the
// data; a packet whose phase wanders more than thermal noise explains is detected again by
// the phase smoother (dsp::detect_packet_smoothed). Host and device: both backends do the
// same arithmetic in the same order (gpu/detector.cu's detect_kernel and gate_kernel).
//
// Why it works (docs/SIGNAL-CHAIN.md, "Phase noise"): a random-walk (Wiener) phase of q rad^2
// per bit pair moves the means of consecutive blocks of B pairs apart by about q B 2 / 3, which
// the loop follows (its bandwidth is far above the blocks' rate); a constant frequency offset
// moves them all by the same step and adds nothing to their spread; thermal noise moves the
// loop's phase too, in proportion to the noise on the decisions, so the wander is taken
// against that noise: rho = var / mean^2 of the data decision statistics (what the BEP
// estimate is made from). Measured on the CPU (0.25 s recordings, 406 packets each, the
// path with the least rho of each packet): without phase noise wander / rho <= 0.026 from
// 3 to 20 dB on AWGN, two-ray and edwards3 (median 0.002-0.012), at the IRIG 106 mask <= 0.023;
// with a Wiener phase at 11 dB, 50 Hz median 0.046, 100 Hz 0.088 (all above 0.045), 300 Hz
// 0.23, 1 kHz 0.58; 300 Hz at 3 dB 0.062.
#pragma once

#include "dsp/iq_correction.hpp"  // PAQ_HOST_DEVICE
#include "dsp/waveform.hpp"

#include <cstddef>

namespace paq::dsp::phase_gate {

/// Bit pairs per block of the wander measure.
inline constexpr int block_pairs = 64;
/// The first pair measured: the data's first (the known bits run the acquisition loop).
inline constexpr int first_pair = static_cast<int>(waveform::known_bits / 2);
static_assert((waveform::packet_bits / 2 - waveform::known_bits / 2) % block_pairs == 0, "the data pairs fill whole blocks");
/// A packet is smoothed when wander > ratio x rho on its path of least rho.
inline constexpr double ratio = 0.04;

/// How far the PLL's phase wanders over a packet's data: the phases of the data pairs
/// (unwrapped), in blocks of block_pairs, and the variance of the differences of consecutive
/// block means, rad^2. Each phase is added in order, in double.
class wander_meter {
public:
    PAQ_HOST_DEVICE void add(double phase) noexcept
    {
        add_to_block(phase);
        end_block_if_full();
    }
    /// add() in two halves, for a caller that knows where the blocks end (the GPU's PLL adds
    /// eight pairs at a time and ends a block after every eighth chunk, outside its unrolled
    /// steps): the same sums in the same order.
    PAQ_HOST_DEVICE void add_to_block(double phase) noexcept
    {
        block_sum_ += phase;
        ++in_block_;
    }
    PAQ_HOST_DEVICE void end_block_if_full() noexcept
    {
        if (in_block_ < block_pairs) return;
        const double mean = block_sum_ / static_cast<double>(block_pairs);
        if (blocks_ > 0) {
            const double d = mean - last_mean_;
            sum_d_ += d;
            sum_d2_ += d * d;
        }
        last_mean_ = mean;
        ++blocks_;
        block_sum_ = 0.0;
        in_block_ = 0;
    }
    [[nodiscard]] PAQ_HOST_DEVICE double value() const noexcept
    {
        if (blocks_ < 2) return 0.0;
        const double n = static_cast<double>(blocks_ - 1), m = sum_d_ / n;
        const double v = sum_d2_ / n - m * m;
        return v > 0.0 ? v : 0.0;
    }

private:
    double block_sum_ = 0.0, last_mean_ = 0.0, sum_d_ = 0.0, sum_d2_ = 0.0;
    int in_block_ = 0, blocks_ = 0;
};

/// rho of a path: var / mean^2 of its data decision statistics (|sum|, sum of squares over n
/// decisions), the variance floored as the BEP estimate floors it; 1e308 with a zero mean.
[[nodiscard]] PAQ_HOST_DEVICE inline double decision_rho(double sum, double sum2, double n) noexcept
{
    const double mean = sum / n;
    double var = sum2 / n - mean * mean;
    var = var > 1e-300 ? var : 1e-300;
    return mean > 0.0 ? var / (mean * mean) : 1e308;
}

/// What the PLL measures of one path for the gate: its phase's wander over the data
/// (wander_meter) and its decisions' rho (decision_rho).
struct measure {
    double wander = 0.0, rho = 0.0;
};

/// Whether a packet's paths (path[i], i < n) call for the smoother: the path of least rho (the
/// first of equals; paths whose rho is not finite and positive are passed over) wanders more
/// than `ratio` x its rho.
[[nodiscard]] PAQ_HOST_DEVICE inline bool smoother_needed(const measure* path, int n) noexcept
{
    int best = -1;
    for (int i = 0; i < n; ++i) {
        const double r = path[i].rho;
        if (!(r > 0.0) || !(r < 1e300)) continue;
        if (best < 0 || r < path[best].rho) best = i;
    }
    return best >= 0 && path[best].wander > ratio * path[best].rho;
}

}  // namespace paq::dsp::phase_gate
