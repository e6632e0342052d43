// Trellis (sequence) detection of SOQPSK-TG: the CPU reference (issue 14; docs/SIGNAL-CHAIN.md,
// "Trellis detection").
//
// The model is the principal pulse of the PAM representation of SOQPSK (Perrins and Rice; the
// pulse that carries most of the signal's energy, the one the reduced-state detectors of
// Perrins and Kumaraswamy keep): the equalized signal at 2 samples per bit is, to that
// approximation, a linear modulation of the data bits a_k = +-1, even bits on the real axis and
// odd bits on the imaginary axis (SOQPSK-TG with the IRIG precoder is OQPSK-like at its bit
// instants, which is why the symbol-by-symbol detector works on a_k directly):
//
//     x[2k + d] ~ sum_k b_k f_d,   b_k = a_k (k even), j a_k (k odd),   |d| <= trellis::half_span
//
// The pulse f is fitted per packet and per axis by least squares on the symbol-by-symbol
// detector's bits (the known preamble and ASM, and its decisions over the data), so one
// detector serves every path whatever its equalizer left of the channel. The two axes are
// then two independent binary sequences with intersymbol interference over
// trellis::memory + 1 symbols; each is detected by max-log BCJR over 2^memory states (the same
// hard decisions as the Viterbi algorithm, plus a log-likelihood ratio per bit), started in the
// state the known bits set.
//
// The carrier phase is the symbol-by-symbol detector's, bit by bit (its sxs_trace): the PLL's
// (dsp::detect_packet), or the phase smoother's (dsp::detect_packet_smoothed) with
// receiver.phase_smoother 1.
#pragma once

#include "dsp/batch.hpp"
#include "dsp/detector.hpp"
#include "dsp/types.hpp"
#include "dsp/waveform.hpp"

#include <cstdint>
#include <vector>

namespace paq::dsp {

namespace trellis {
/// Pulse taps d = -half_span .. half_span samples (2 samples per bit) around a bit's instant.
inline constexpr int half_span = 6;
inline constexpr int taps = 2 * half_span + 1;
/// The symbols of one axis (4 samples apart) a sample sees besides the newest: the state.
inline constexpr int memory = (2 * half_span) / 4;
inline constexpr int states = 1 << memory;
/// The band the detector looks at: the equalized signal is low-passed first, flat to
/// lowpass_pass, raised-cosine to zero at lowpass_stop (cycles per sample at 2 samples per bit;
/// SOQPSK-TG's 99% bandwidth is 0.195). Without it an equalizer's noise outside the signal's
/// band (ZF's above all: 4% BER) enters the metric; measured on AWGN 10 dB (1 s, seed 77):
/// 0.30/0.40 ZF 6170 errors, 0.20/0.30 837, 0.15/0.25 759, h_NO instead 928 (SxS 1677), and
/// 0.66-0.51x of SxS's errors on the other paths with 0.15/0.25. The fitted pulse includes it.
inline constexpr double lowpass_pass = 0.15;
inline constexpr double lowpass_stop = 0.25;
/// The low-pass's gain at frequency f (cycles per sample, any sign).
[[nodiscard]] double lowpass_gain(double f) noexcept;
/// Samples of x the detector reads: x[0 .. input_samples) with bit k's instant at x[2k].
inline constexpr std::size_t input_samples = 2 * waveform::packet_bits + half_span;
}  // namespace trellis

/// Working memory of detect_packet_trellis, allocated once per worker.
struct trellis_scratch {
    trellis_scratch();
    std::vector<cf64> r;        ///< the packet derotated, 2 samples per bit
    std::vector<double> alpha;  ///< forward metrics, per symbol and state
    std::vector<double> beta;   ///< backward metrics of the current symbol
    std::vector<double> branch; ///< branch metrics, per symbol and state sequence
    std::vector<float> llr;     ///< per packet bit: log P(a = +1) / P(a = -1), max-log
};

/// The fitted model of one axis (exposed for tests and docs).
struct trellis_axis_model {
    double taps[trellis::taps] = {};  ///< f_d, d = -half_span .. half_span
    double sigma2 = 0.0;              ///< residual variance per sample (noise + model error)
};

/// Detects one packet: x[2k] is bit k's decision instant in the equalized signal at 2 samples
/// per bit low-passed by trellis::lowpass_gain, x valid over [0, trellis::input_samples); trace from dsp::detect_packet on the same
/// path. Writes the 6144 data bits, MSB first, to bits_out (768 bytes) and every packet bit's
/// LLR to scratch.llr. known_bit_errors are the symbol-by-symbol detector's (given in
/// known_errors); the BEP estimate is the mean of 1 / (1 + e^|LLR|) over the data bits.
path_stats detect_packet_trellis(const cf64* x, const sxs_trace& trace, unsigned known_errors, std::uint8_t* bits_out,
                                 trellis_scratch& scratch, trellis_axis_model* models_out = nullptr) noexcept;

}  // namespace paq::dsp
