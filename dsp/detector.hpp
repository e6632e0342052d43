// OQPSK symbol-by-symbol detector with a second-order PLL (J. T. Ravert, "GPU Implementation
// of Data-Aided Equalizers", M.S. thesis, BYU, 2017: section 3.6, fig. 3.4).
// One decision sample per bit; even bits on the real axis, odd bits on the imaginary axis.
// Phase error, once per bit pair (k odd):
//   e(k) = a(k-1) Im{y(k-1)} - a(k) Re{y(k)}      (~ 2 sin(phase error) at unit amplitude)
// a = known bits over preamble + ASM (data-aided), decisions over the data.
#pragma once

#include "dsp/batch.hpp"
#include "dsp/phase_gate.hpp"
#include "dsp/receiver_tables.hpp"  // eq_path
#include "dsp/types.hpp"
#include "dsp/waveform.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numbers>
#include <vector>

namespace paq::dsp {

struct pll_gains {
    double k1 = 0.0;  ///< proportional
    double k2 = 0.0;  ///< integral
};

/// Loop gains for noise bandwidth * update period bn_t and damping zeta, phase-detector gain 2.
[[nodiscard]] pll_gains make_pll_gains(double bn_t, double zeta) noexcept;

/// Detects one packet: v[k] is the detection-filter output at bit k's decision instant,
/// k = 0 .. 6335. `acq` drives the loop over the known bits, `track` over the data.
/// Writes the 6144 data bits, MSB first, to bits_out (768 bytes).
path_stats detect_packet(const cf64* v, const pll_gains& acq, const pll_gains& track, std::uint8_t* bits_out) noexcept;

/// What detect_packet leaves for a second detector (dsp/trellis.hpp): the carrier phase it
/// derotated each bit by, its bits as +-1 (the known ones over preamble and ASM, its decisions
/// over the data), and its errors on the known bits.
struct sxs_trace {
    std::vector<double> theta = std::vector<double>(waveform::packet_bits);
    std::vector<std::int8_t> bits = std::vector<std::int8_t>(waveform::packet_bits);
    unsigned known_errors = 0;
};

/// The same, leaving its trace.
path_stats detect_packet(const cf64* v, const pll_gains& acq, const pll_gains& track, std::uint8_t* bits_out,
                         sxs_trace& trace) noexcept;

/// The same, leaving the phase gate's measure of the path (receiver.phase_smoother auto,
/// dsp/phase_gate.hpp) and, when `trace` is not null, the trace.
path_stats detect_packet(const cf64* v, const pll_gains& acq, const pll_gains& track, std::uint8_t* bits_out, sxs_trace* trace,
                         phase_gate::measure& gate) noexcept;

/// Phase pairs of a packet: one phase per bit pair (an even and an odd bit).
inline constexpr std::size_t phase_pairs = waveform::packet_bits / 2;

/// The carrier offset a PLL followed over a packet, in radians per sample: fed, pair by pair,
/// the phase theta_j it derotated bit pair j by (sxs_trace::theta of the pair's even bit, in
/// float as the GPU's detector keeps it), it unwraps them pair to pair and gives the slope of
/// the least-squares line through all phase_pairs of them, over the four samples of a pair.
/// The receiver's carrier estimate from the decisions (docs/SIGNAL-CHAIN.md, "Carrier from the
/// decisions"); the CPU backend feeds it the trace's phases, the GPU's PLL its phase as it goes.
///
/// With u_j the unwrapped phases and d_i = u_i - u_(i-1), the line's numerator
/// sum_j (j - (n-1)/2) u_j is sum_(i>=1) d_i i (n - i) / 2 (the sum over j >= i of j - (n-1)/2),
/// so each pair adds one product, in order, and nothing needs the phases kept. The product and
/// the sum are rounded apart on both backends (no fused multiply-add), so that they agree.
class phase_slope {
public:
    PAQ_HOST_DEVICE void add(float theta) noexcept
    {
        constexpr double pi = 3.14159265358979323846;
        constexpr double n = static_cast<double>(phase_pairs);
        const double th = static_cast<double>(theta);
        if (pairs_ > 0) {
            double d = th - prev_;  // exact: two floats
            if (d > pi) {
                d -= 2.0 * pi;
            } else if (d < -pi) {
                d += 2.0 * pi;
            }
            const double i = static_cast<double>(pairs_);
            const double w = 0.5 * (i * (n - i));  // exact: an integer or a half below 2^22
#ifdef __CUDA_ARCH__
            sum_ = __dadd_rn(sum_, __dmul_rn(d, w));
#else
            sum_ += d * w;
#endif
        }
        prev_ = th;
        ++pairs_;
    }
    /// The slope in radians per sample (meaningful once phase_pairs phases are in).
    [[nodiscard]] PAQ_HOST_DEVICE double offset() const noexcept
    {
        constexpr double n = static_cast<double>(phase_pairs);
        constexpr double sxx = n * (n * n - 1.0) / 12.0;
        return sum_ / sxx / 4.0;
    }

private:
    double prev_ = 0.0, sum_ = 0.0;
    int pairs_ = 0;
};

/// phase_slope over theta[0 .. phase_pairs).
PAQ_HOST_DEVICE inline double carrier_offset_of_phases(const float* theta) noexcept
{
    phase_slope line;
    for (std::size_t j = 0; j < phase_pairs; ++j) line.add(theta[j]);
    return line.offset();
}

/// The largest correction carrier_offset_of_phases may make (radians per sample, an eighth of
/// estimate_cfo's range: 40 kHz at 10.3125 Mbit/s): beyond it, or not finite, the PLL followed
/// no carrier (a packet without signal) and the estimate from the known bits stays.
inline constexpr double carrier_correction_limit = std::numbers::pi / 256.0;

/// A carrier offset from the decisions where it is a correction to keep (finite, within
/// carrier_correction_limit), else 0.
PAQ_HOST_DEVICE inline double carrier_correction_of(double dw) noexcept
{
    return fabs(dw) <= carrier_correction_limit ? dw : 0.0;  // false for NaN
}

/// carrier_correction_of(carrier_offset_of_phases(theta)).
PAQ_HOST_DEVICE inline double carrier_correction(const float* theta) noexcept
{
    return carrier_correction_of(carrier_offset_of_phases(theta));
}

/// The phase smoother's design (receiver_config::phase_smoother; oscillator phase noise).
namespace smoother {
/// Loop bandwidth of the forward PLL that starts the smoother off (wide: at a 1 kHz Wiener
/// linewidth a narrower one slips; its noise is what the smoother then removes).
inline constexpr double bootstrap_bn_t = 0.03;
/// Decide, model, smooth: the times it is done. Three (docs/SIGNAL-CHAIN.md, "Three
/// iterations"): 2-3% fewer errors than two on every path at a
/// 1 kHz Wiener linewidth (AWGN 11 dB, five seeds), the same at 300 Hz; a fourth gained
/// under 1% on every path but ZF (2.7% on one of two seeds).
inline constexpr int iterations = 3;
/// The candidate ratios lambda = q / r of phase-increment variance per pair to observation
/// noise variance; the one whose steady-state filter predicts the observations best is used.
inline constexpr double lambdas[] = {1e-5, 2e-5, 5e-5, 1e-4, 2e-4, 5e-4, 1e-3, 2e-3, 5e-3, 1e-2, 2e-2, 5e-2, 0.1, 0.2};
inline constexpr int num_lambdas = static_cast<int>(sizeof lambdas / sizeof lambdas[0]);
/// The phase that decides pair j leaves out the observations of pairs j - 1 .. j + 1: their
/// noise is that of the samples being decided, and a phase fitted to it pulls the decision
/// with the noise. Measured (AWGN 10 dB, Wiener 300 Hz over the data only, BER against no
/// phase noise): pair j alone left out 1.42-1.49x, three 1.24-1.31x, five 1.32-1.44x.
inline constexpr int exclusion = 1;
/// A bit's own phase (step g) leaves out the observations of the samples k - 2 .. k + 2, not
/// the six of pairs j - 1 .. j + 1: the noise of bits k +- 1 at their instants is correlated
/// with bit k's (0.54 on the same component at the detection filter's output), and their
/// model holds bit k's decision, so they stay out; k +- 3 need not. Measured on a 2 s
/// recording (AWGN 11 dB, CFO 15 kHz, 1 kHz Wiener, seed 301; MMSE): 769 errors, against 819
/// with the pair's phase; leaving out k - 1 .. k + 1 instead about 13% more than k - 2 ..
/// k + 2, k - 3 .. k + 3 about 16% more. Over five seeds: docs/SIGNAL-CHAIN.md, "Phase noise".
/// Step g's arithmetic is written for these two values.
inline constexpr int bit_exclusion = 2;
/// The sums over a packet (the signal model's, the line's, the final decisions' statistics)
/// are taken in 32 chunks, chunk c the pairs j = c, c + 32, c + 64, ... in that order, and the
/// chunks' sums then added pairwise: chunk i + chunk i + 16 for i < 16, then i + 8, i + 4,
/// i + 2, i + 1. That is the order a GPU warp adds them in, lane c on chunk c (a warp reads 32
/// adjacent pairs at a time), so the two backends take the same sums bit for bit.
inline constexpr std::size_t chunks = 32;
static_assert(phase_pairs % chunks == 0, "every chunk has as many pairs");

/// The Kalman filters' gains for candidate lambdas[l]: they depend on lambda and the number
/// of steps from the filter's start alone (a random walk, observation noise 1, start variance
/// 1): k[i] the gain of step i (k[0] = 1: the first observation), p[i] the variance after it,
/// rounded to float as the filters keep it. Computed once, in double, shared by both backends.
struct filter_gains {
    double k[phase_pairs];
    float p[phase_pairs];
};
[[nodiscard]] const filter_gains& gains(int l) noexcept;

/// One side's estimate for step g of detect_packet_smoothed: a filter's value x and variance p
/// (units of the pair observation's noise) at the pair two away, if that pair exists (on), and
/// the observation z of the sample next to the excluded ones on that side with its variance r
/// (0: none; only the side the pair's gap leaves a sample of uses it).
struct bit_phase_side {
    bool on;
    double x, p;
    float z, r;
};

/// The two bits' phases of pair j (step g; both backends call this): each side's estimate
/// carried to the bit's time (a quarter pair before or after the pair's, pair j +- 2 being 2
/// pairs away), the forward side updated first by sample 2j - 2 for the odd bit, the backward
/// side by sample 2j + 3 for the even bit (a Kalman update at that sample's time, j -+ 1.25),
/// the two combined by their variances; plus the line icpt + slope t. lam: the random walk's
/// variance per pair.
struct bit_pair_phase {
    float even, odd;
};
PAQ_HOST_DEVICE inline bit_pair_phase bit_phases(int j, const bit_phase_side& fwd, const bit_phase_side& bwd, double lam,
                                                 double icpt, double slope) noexcept
{
    static_assert(exclusion == 1 && bit_exclusion == 2, "step g's geometry");
    float out[2];
    for (int h = 0; h < 2; ++h) {
        const double t = static_cast<double>(j) + (h == 0 ? -0.25 : 0.25);  // the bit's time in pairs
        double xw = 0.0, wsum = 0.0;
        for (int side = 0; side < 2; ++side) {
            const bool forward = side == 0;
            const bit_phase_side& sd = forward ? fwd : bwd;
            if (!sd.on) continue;
            double xs = sd.x, p = sd.p;
            if (forward == (h == 1)) {  // the side with the sample: 2j - 2 (odd bit) or 2j + 3 (even)
                p += 0.75 * lam;
                const double r = static_cast<double>(sd.r);
                if (r > 0.0) {  // a Kalman update by the sample: gain p / (p + r)
                    const double ts = static_cast<double>(j) + (forward ? -1.25 : 1.25);
                    const double zs = static_cast<double>(sd.z) - (icpt + slope * ts);
                    const double inv = 1.0 / (p + r);
                    xs += p * inv * (zs - xs);
                    p = p * r * inv;
                }
                p += 1.5 * lam;
            } else {
                p += 1.75 * lam;
            }
            const double w = 1.0 / p;
            xw += w * xs;
            wsum += w;
        }
        out[h] = static_cast<float>(xw / wsum + icpt + slope * t);
    }
    return {out[0], out[1]};
}

/// Derotation before the equalizers (docs/SIGNAL-CHAIN.md, "Derotating before the
/// equalizers"): where the smoother decided a packet, the packet's segment is turned by the
/// bit phases of one path, the source, and paths are made from it again and decided by the
/// smoother again. The phase noise is added after the channel, so an equalizer smears it over
/// its response; turned back first, it is not. The segment's sample u bits after bit 0's
/// decision sample is turned by -pre_derotation(theta_bit, n, u): the mean of the source's
/// phases (linear between its bits, held beyond the first and last) pre_derotation_bits before
/// and after u. Chosen by measurement: with the phase at u itself, or a mean over the bits
/// between, the second pass made more errors than the first (the same document).
///
/// The source is the unequalized path where it decided at least as well as the MMSE path
/// (its smoothed BEP estimate no larger: a flat channel, where its observations carry the
/// least noise), and then every equalized path is made again; else the MMSE path, and only
/// ZF and FDE2, whose long responses gain from any source (MMSE, CMA and FDE1 made from the
/// MMSE path's own phases lose on AWGN: the same document).
PAQ_HOST_DEVICE constexpr int pre_derotation_source_for(float bep_none, float bep_mmse) noexcept
{
    return static_cast<int>(bep_none <= bep_mmse ? eq_path::none : eq_path::mmse);
}
/// Where a packet's segment is not derotated (the GPU's per-packet source byte).
inline constexpr std::uint8_t no_derotation = 0xFF;
/// The paths whose bit phases may be a source.
PAQ_HOST_DEVICE constexpr bool phase_source(int path) noexcept
{
    return path == static_cast<int>(eq_path::none) || path == static_cast<int>(eq_path::mmse);
}
/// The paths made again for a source: every equalized path from the unequalized path's phases,
/// ZF and FDE2 from the MMSE path's. A source is never made again (its phases are read).
PAQ_HOST_DEVICE constexpr bool pre_derotated(int path, int source) noexcept
{
    if (source == static_cast<int>(eq_path::none)) return path != source;
    return path == static_cast<int>(eq_path::zf) || path == static_cast<int>(eq_path::fde2);
}
/// How many paths are made again for a source, and the most for any (the GPU's list bound).
PAQ_HOST_DEVICE constexpr int paths_made_again(int source) noexcept
{
    int n = 0;
    for (int p = 0; p < chain::num_paths; ++p) n += pre_derotated(p, source) ? 1 : 0;
    return n;
}
inline constexpr int pre_derotation_paths_max =
    std::max(paths_made_again(static_cast<int>(eq_path::none)), paths_made_again(static_cast<int>(eq_path::mmse)));
static_assert(!pre_derotated(static_cast<int>(eq_path::none), static_cast<int>(eq_path::none)) &&
                  !pre_derotated(static_cast<int>(eq_path::mmse), static_cast<int>(eq_path::mmse)),
              "a source's phases are read while the paths are made again");
inline constexpr double pre_derotation_bits = 4.0;

/// The phases' value at x bits (T: float on the GPU, double holding the same floats on the CPU).
template <class T>
PAQ_HOST_DEVICE inline double bit_phase_at(const T* theta_bit, int n, double x) noexcept
{
    if (x <= 0.0) return static_cast<double>(theta_bit[0]);
    if (x >= static_cast<double>(n - 1)) return static_cast<double>(theta_bit[n - 1]);
    const int k0 = static_cast<int>(x);
    const double f = x - static_cast<double>(k0);
    return (1.0 - f) * static_cast<double>(theta_bit[k0]) + f * static_cast<double>(theta_bit[k0 + 1]);
}

template <class T>
PAQ_HOST_DEVICE inline double pre_derotation(const T* theta_bit, int n, double u) noexcept
{
    return 0.5 * (bit_phase_at(theta_bit, n, u - pre_derotation_bits) + bit_phase_at(theta_bit, n, u + pre_derotation_bits));
}
}  // namespace smoother

/// Working memory of detect_packet_smoothed, allocated once per worker.
struct smoother_scratch {
    smoother_scratch();
    std::vector<float> theta, z, f, b;  ///< per pair
    std::vector<float> theta_bit, z_bit, r_bit;  ///< per bit: phase, observation, its variance
    std::vector<std::int8_t> a;                 ///< per bit: +-1
    std::vector<cf64> y_bit;                    ///< per bit: its sample at its phase, one iteration's
};

/// Detects one packet with a smoothed carrier phase (receiver_config::phase_smoother;
/// oscillator phase noise; docs/SIGNAL-CHAIN.md, "phase smoother"):
///  1. the PLL above, forward over the packet at smoother::bootstrap_bn_t (acq over the known
///     bits), its unwrapped phase theta_j before each pair j kept;
///  2. smoother::iterations times:
///     a. decisions a_k at bit k's phase theta_k (the PLL's pair phase in the first
///        iteration, step g's after it; the known bits over preamble and ASM);
///     b. the packet's own signal model from them (the samples at the bits' phases, as the
///        decisions): at bit k's instant the detection-filter
///        output is g0 a_k on the bit's axis and c1 (a_{k-1} + a_{k+1}) on the other (the
///        neighbours' pulse tails: SOQPSK-TG's quadrature component is far from zero half a
///        bit from its own instants), g0 and c1 fitted by least squares over the packet;
///     c. one phase observation per pair, z_j = theta_j + arg(sum_k v_k s_k* e^{-j theta_j})
///        over the pair's two bits, s_k the model's sample; and one per sample,
///        theta_j + arg(v_k s_k* e^{-j theta_j}), its variance (|s_2j|^2 + |s_2j+1|^2) / |s_k|^2
///        in units of the pair's;
///     d. a line fitted to z (the carrier offset left) and removed;
///     e. lambda = q / r chosen from smoother::lambdas by the least sum of squared one-step
///        prediction errors of the steady-state filter (maximum likelihood for a random-walk
///        phase in white noise);
///     f. a Kalman filter forward and one backward (random walk, ratio lambda), and
///        theta_j = the two filters' predictions from pairs <= j - 2 and >= j + 2
///        (smoother::exclusion), combined by their variances, plus the line (the pair's
///        phase: the observations' reference);
///     g. theta_k, bit k's phase: the same two predictions, the one on the side where pair
///        j +- 1 holds a sample outside k - 2 .. k + 2 (smoother::bit_exclusion) updated by that
///        sample's observation (forward: sample 2j - 2 for the odd bit; backward: 2j + 3 for
///        the even bit), each prediction carried to the bit's time (a quarter pair before or
///        after the pair's), combined by their variances, plus the line;
///  3. the data decisions at theta_k.
/// known_bit_errors are the forward PLL's, the BEP estimate from the final decisions.
/// With `trace`, its final phase per bit (theta_k, each bit's own) and its bits are left there
/// for the trellis (dsp/trellis.hpp), as detect_packet leaves its own.
path_stats detect_packet_smoothed(const cf64* v, const pll_gains& acq, const pll_gains& boot, std::uint8_t* bits_out,
                                  smoother_scratch& scratch, sxs_trace* trace = nullptr) noexcept;


}  // namespace paq::dsp
