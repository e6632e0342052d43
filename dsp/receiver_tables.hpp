// Everything the receiver precomputes once from the modulator: the preamble-detector template
// and its alignment, the known reference samples and the channel estimator X_lpi, the
// detection filter h_NO, and the SOQPSK-TG spectrum Psi for FDE2. Deriving these from the
// one modulator (instead of typing numbers in) ties the receiver to the transmitter.
#pragma once

#include "dsp/types.hpp"

#include <array>
#include <cstddef>
#include <vector>

namespace paq::dsp {

namespace chain {
inline constexpr int N1 = 12;                 ///< channel taps before the main path
inline constexpr int N2 = 25;                 ///< channel taps after
inline constexpr int L_ch = N1 + N2 + 1;      ///< 38
inline constexpr int L1 = 60;                 ///< equalizer taps before the centre
inline constexpr int L2 = 125;                ///< equalizer taps after
inline constexpr int L_eq = L1 + L2 + 1;      ///< 186
inline constexpr int hno_half = 10;           ///< h_NO taps -10 .. 10
inline constexpr int L_hno = 2 * hno_half + 1;
inline constexpr int num_paths = 6;
/// Output streams a packet can have: the six paths detected twice (receiver.detector: both).
inline constexpr int max_streams = 2 * num_paths;
/// Whether n is a number of output streams a receiver makes: 6, or 12 with detector both.
[[nodiscard]] constexpr bool valid_streams(int n) noexcept { return n == num_paths || n == max_streams; }
/// Receive channels the chain combines (receiver_config::channels: 1, or 2 for two polarizations or
/// antennas of one link).
inline constexpr int max_receive_channels = 2;
}  // namespace chain

/// The six output paths, in output order.
enum class eq_path : int { none = 0, zf = 1, mmse = 2, cma = 3, fde1 = 4, fde2 = 5 };
[[nodiscard]] const char* path_name(eq_path p) noexcept;
[[nodiscard]] inline const char* path_name(int p) noexcept { return path_name(static_cast<eq_path>(p)); }

/// An output stream's name (bitstream ids, records columns, metrics labels, summaries):
/// streams 0 .. 5 are the paths by their names, whichever detector decided them; with
/// receiver.detector both, streams 6 .. 11 are the same paths decided by the trellis:
/// `none_trellis` .. `fde2_trellis`. "?" outside 0 .. 11.
[[nodiscard]] const char* stream_name(int stream) noexcept;

struct receiver_tables {
    // --- preamble detection (thesis eqs. 3.2-3.5)
    std::array<cf64, 32> preamble_template{};  ///< p(l), quantized per the L1..L8 index sets
    int template_offset = 0;  ///< L(u) peaks at u = packet_start + template_offset

    // --- channel and noise estimation (eqs. 3.9-3.12)
    int known_first = 0;        ///< first sample (rel. to packet start) fixed by known bits
    int known_last = 0;         ///< last such sample (inclusive)
    std::vector<cf64> x_known;  ///< x(known_first .. known_last)
    int obs_first = 0;          ///< observation range of r for the channel estimate
    int obs_last = 0;           ///< (inclusive), every contributing x known
    std::size_t M = 0;          ///< obs_last - obs_first + 1
    std::vector<cf64> X;        ///< M x 38, row-major: X[n][m] = x(obs_first + n - (m - N1))
    std::vector<cf64> X_lpi;    ///< 38 x M, row-major: (X^H X)^-1 X^H
    double rho = 0.0;           ///< trace of I - X X_lpi (M - rank)
    std::size_t channel_rank = 0;  ///< directions of h the known samples observe (of 38)

    // --- channel support selection (docs/SIGNAL-CHAIN.md, "channel estimator")
    /// One candidate support [first_tap, last_tap] of the channel with its fixed estimator
    /// G = (X^H X + lambda C^-1)^-1 X^H, C = diag(prior tap variance): 1 inside the support,
    /// falling by e per support_prior_decay_taps outside it.
    struct channel_support {
        int first_tap = 0;            ///< -N1 .. 0
        int last_tap = 0;             ///< 0 .. N2
        std::vector<cf64> G;          ///< 38 x M, row-major, like X_lpi
        /// Received-signal power of the estimate's noise G w per unit complex noise variance:
        /// sum_ab (G G^H)_ab R_x(b - a) (the error that matters to the equalizers).
        double noise_gain = 0.0;
        /// The same for the full-width estimate's noise on the taps outside this support:
        /// what the taps left out contain on average when the channel has nothing there.
        double outside_noise_gain = 0.0;
    };
    std::vector<channel_support> supports;  ///< the widest ([-N1, N2]) is last
    /// The weight of a candidate's noise term in the choice (select_channel_support): ln(M) / 2,
    /// the Bayesian information criterion's penalty (ln n a parameter) over Mallows' Cp's (2 a
    /// parameter), 2.90. Cp's risk (a weight of 1) is unbiased for one support, but the least
    /// of 27 noisy risks favours long supports at low SNR (docs/SIGNAL-CHAIN.md, "Channel
    /// support selection").
    double support_noise_penalty = 0.0;

    // --- detection filter and detector
    std::array<cf64, chain::L_hno> h_no{};  ///< taps j = -10 .. 10
    int decision_delay = 0;  ///< bit k of the packet is decided at sample 2k + decision_delay
    double hno_design_residual = 0.0;  ///< RMS error of the LS design at the decision instants

    // --- FDE2
    std::size_t fft_size = 0;
    std::vector<double> psi;  ///< SOQPSK-TG PSD on the fft_size grid, mean 1, FFT bin order
};

/// Eigenvalue threshold of the channel estimator's pseudo-inverse, relative to the largest
/// eigenvalue of X^H X (docs/SIGNAL-CHAIN.md: 1e-3 against 3e-3, 1e-2 and 3e-2).
inline constexpr double channel_pinv_threshold = 1e-3;

/// Candidate channel supports: first taps x last taps (all combinations).
inline constexpr std::array<int, 3> support_first_taps = {-2, -6, -12};
inline constexpr std::array<int, 9> support_last_taps = {1, 2, 3, 4, 6, 8, 11, 16, 25};
/// lambda of the support estimators, relative to the largest diagonal element of X^H X.
inline constexpr double support_prior_weight = 1e-2;
/// Outside the support the prior tap variance falls by e per this many taps.
inline constexpr double support_prior_decay_taps = 1.5;

/// Builds (and caches per fft_size) the tables. Thread-safe.
[[nodiscard]] const receiver_tables& get_receiver_tables(std::size_t fft_size);

/// The quantized preamble template from the thesis' index sets L1..L8 (eq. 3.5).
[[nodiscard]] std::array<cf64, 32> quantized_preamble_template();

}  // namespace paq::dsp
