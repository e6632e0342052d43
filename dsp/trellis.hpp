// Trellis (sequence) detection of SOQPSK-TG: the CPU reference (docs/SIGNAL-CHAIN.md,
// "Trellis detection").
//
// The model is the signal itself, tabulated: the equalized, low-passed SOQPSK-TG signal's
// sample at bit k's instant, x[2k], is, to within -25 dB, a function of the five bits
// a_{k-2} .. a_{k+2} (a = +-1; the precoded CPM is OQPSK-like, bit k's instant on the real axis
// for even k and on the imaginary axis for odd k). One sample a bit is all the detector reads:
// the low-pass is zero from a quarter of the rate of 2 samples a bit, so the samples at the bit
// instants determine the low-passed signal (Nyquist). Its noise there is mildly correlated
// (0.29 a bit apart, -0.19 two bits apart; adjacent samples at 2 a bit: 0.78), which the metric
// ignores (docs/SIGNAL-CHAIN.md, "Trellis detection": the pair of samples a bit that earlier
// versions read gave 1-2% fewer errors at twice the work). The table (per parity of k, per pattern)
// is fitted per packet by averaging the samples over the
// symbol-by-symbol detector's bits (the known preamble and ASM, and its decisions over the
// data), so one detector serves every path whatever its equalizer left of the channel, gain and
// constant phase included; then fitted again on the trellis's own decisions, and the packet
// detected again with it (trellis::passes). Negating every bit negates the signal (the precoder's output is
// unchanged, the phase state turns by pi), so a pattern and its negation share an entry.
//
// This replaces the principal PAM pulse of earlier versions (Perrins and Rice; a linear model
// per axis): that pulse leaves the rest of the PAM representation, -17 dB of the signal after
// the low-pass, as noise, which cost about 0.8 dB at 1e-5; the table leaves -25 dB
// (docs/SIGNAL-CHAIN.md, "Trellis detection"). The trellis runs over the bit sequence itself
// (both axes at once): the state is the last trellis::memory bits, 16 states, each step adds
// one bit and explains one sample. Max-log BCJR gives the Viterbi algorithm's hard
// decisions plus a log-likelihood ratio per bit, started in the state the known bits set.
//
// The carrier phase is the symbol-by-symbol detector's, bit by bit (its sxs_trace): the PLL's
// (dsp::detect_packet), or the phase smoother's (dsp::detect_packet_smoothed) where it
// decided the packet (receiver.phase_smoother 1, or auto where the PLL's phase wandered).
#pragma once

#include "dsp/batch.hpp"
#include "dsp/detector.hpp"
#include "dsp/types.hpp"
#include "dsp/waveform.hpp"

#include <cstdint>
#include <vector>

namespace paq::dsp {

namespace trellis_math {
struct llr_law;  // dsp/trellis_math.hpp
}

namespace trellis {
/// The bits before and after bit k that the sample x[2k] depends on.
inline constexpr int before = 2;
inline constexpr int after = 2;
inline constexpr int window = before + 1 + after;
/// The trellis's state: the last `memory` bits.
inline constexpr int memory = window - 1;
inline constexpr int states = 1 << memory;
/// Table entries per parity of k: the patterns with bit k = +1.
inline constexpr int patterns = 1 << (window - 1);
/// The band the detector looks at: the equalized signal is low-passed first, flat to
/// lowpass_pass, raised-cosine to zero at lowpass_stop (cycles per sample at 2 samples per bit;
/// SOQPSK-TG's 99% bandwidth is 0.195). Without it an equalizer's noise outside the signal's
/// band (ZF's above all: 4% BER) enters the metric (measured with the earlier pulse model on
/// AWGN 10 dB: 0.30/0.40 ZF 6170 errors, 0.20/0.30 837, 0.15/0.25 759). The table includes it.
inline constexpr double lowpass_pass = 0.15;
inline constexpr double lowpass_stop = 0.25;
static_assert(lowpass_stop <= 0.25, "one sample a bit carries the low-passed signal only if it is zero from a quarter of the rate");
/// The low-pass's gain at frequency f (cycles per sample, any sign).
[[nodiscard]] double lowpass_gain(double f) noexcept;
/// Passes over each packet: the first fits the table on the symbol-by-symbol detector's bits,
/// each next one on the pass before's. Where an equalizer leaves interference (or on the
/// unequalized path) the symbol-by-symbol bits are wrong far more often than the trellis's,
/// and the wrong ones blur the table and count as noise: the second pass decides with the
/// sharper table (over multipath 3-85% fewer errors by path, ZF's -25% to +5%; a third pass
/// gains 1-2% more; docs/SIGNAL-CHAIN.md, "Two passes").
inline constexpr int passes = 2;
/// An equalizer leaves interference beyond the table's window too (its taps, estimated from the
/// preamble, undo the channel imperfectly): linear in the bits 3 .. far_reach away, it counts
/// as noise in the metric. Before the last pass, on an equalized path, it is fitted on the pass
/// before's bits and taken out of the samples (cancel_far_interference): over edwards3 at 12-14 dB
/// the MMSE path's trellis makes 4-7x fewer errors, on AWGN the equalized paths 6-31% fewer
/// (docs/SIGNAL-CHAIN.md, "Far interference").
/// Which paths: trellis_math::cancels_far_interference.
inline constexpr int far_reach = 8;
/// The far terms: bits -far_reach .. -(before + 1) and after + 1 .. far_reach from bit k
/// (trellis_math::far_offset).
inline constexpr int far_terms = (far_reach - before) + (far_reach - after);
/// The span of x the detector takes: x[0 .. input_samples) with bit k's instant at x[2k]
/// (it reads the even samples only).
inline constexpr std::size_t input_samples = 2 * waveform::packet_bits;
}  // namespace trellis

/// Working memory of detect_packet_trellis, allocated once per worker.
struct trellis_scratch {
    trellis_scratch();
    std::vector<cf64> r;        ///< the packet derotated, one sample per bit (its instant)
    std::vector<double> alpha;  ///< forward metrics, per step and state
    std::vector<double> beta;   ///< backward metrics of the current step
    std::vector<double> branch; ///< branch metrics, per step and state sequence
    std::vector<float> llr;     ///< per packet bit: log P(a = +1) / P(a = -1), max-log
    std::vector<std::int8_t> labels;  ///< a later pass's bits to fit on: the pass before's, +-1
};

/// The fitted model of one packet (exposed for tests and docs).
struct trellis_model {
    /// table[k % 2][pattern]: x[2k] when bits a_{k-before} .. a_{k+after} are the pattern
    /// (trellis_math::pattern_index) with a_k = +1; a_k = -1 negates it.
    cf64 table[2][trellis::patterns] = {};
    double sigma2 = 0.0;  ///< residual variance per real component (noise + model error)
    /// The residual's correlation a bit apart: sum Re(e_k conj e_(k+1)) / sum |e_k|^2 over the
    /// bits the table is fitted on (trellis_math::llr_law).
    double rho1 = 0.0;
    bool complete = false;  ///< every entry was seen at least once
};

/// Detects one packet: x[2k] is bit k's decision instant in the equalized signal at 2 samples
/// per bit low-passed by trellis::lowpass_gain, x valid over [0, trellis::input_samples); trace
/// from dsp::detect_packet on the same path. Writes the 6144 data bits, MSB first, to bits_out
/// (768 bytes) and every packet bit's LLR to scratch.llr, the max-log metrics' LLR times the
/// factor llr_law (trellis_math::llr_calibration of the path) gives at the last pass's model's
/// rho1 (it changes no decision), of the last of trellis::passes passes; model_out gets that
/// pass's model. cancel_far (an equalized path): the far interference is taken out before the last pass (trellis::far_reach).
/// known_bit_errors are the symbol-by-symbol detector's (given in known_errors); the BEP
/// estimate is the mean of 1 / (1 + e^|LLR|) over the data bits.
path_stats detect_packet_trellis(const cf64* x, const sxs_trace& trace, unsigned known_errors, trellis_math::llr_law llr_law,
                                 bool cancel_far, std::uint8_t* bits_out, trellis_scratch& scratch,
                                 trellis_model* model_out = nullptr) noexcept;

/// The far interference (trellis::far_reach) taken out of r, the samples at the bit instants:
/// per parity of k, the residual of `model` (fitted on the bits a) regressed by least squares on
/// the decisions a_(k + far_offset(t)), a bit outside the packet 0, and the fitted sum
/// subtracted from every sample of that parity. A parity whose system is singular or nearly so
/// (a pivot below 1e-6 of the largest) is left as it is.
void cancel_far_interference(std::vector<cf64>& r, const std::int8_t* a, const trellis_model& model) noexcept;

}  // namespace paq::dsp
