// Non-coherent preamble detector (J. T. Ravert, "GPU Implementation of Data-Aided Equalizers",
// M.S. thesis, BYU, 2017: eqs. 3.2-3.5, after Rice & McMurdie).
//
//   c(u) = sum_{l=0}^{31} r(u + l) p*(l)           one preamble period against the template
//   L(u) = sum_{m=0}^{7} |c(u + 32 m)|^2           eight periods, non-coherently
//   M(u) = L(u) / (32 * sum_{i=0}^{255} |r(u+i)|^2)   in [0, 1]; noise alone averages 1/32
//
// A packet is declared at u when M(u) >= threshold and M(u) is the largest value in
// [u - W, u + W] (ties go to the leftmost), W = half_window. With W = L_pkt / 2 a peak only
// has to beat its own side lobes and the data around it, and the decision at u depends on
// samples u - W .. u + W + 255 only: the batcher's guard makes every batch decide the same.
#pragma once

#include "dsp/receiver_tables.hpp"
#include "dsp/types.hpp"

#include <cstddef>
#include <span>
#include <vector>

namespace paq::dsp {

inline constexpr std::size_t detector_half_window = 6336;  ///< W = L_pkt / 2
inline constexpr std::size_t detector_span = 256;          ///< samples one metric value reads

/// M(u) for u = 0 .. r.size() - 256 (out must have that many entries). Multithreaded.
/// Each value depends only on r(u .. u+255), in a fixed order of summation, so it is the
/// same whatever window the samples arrive in.
void preamble_metric(std::span<const cf32> r, std::span<double> out, const std::array<cf64, 32>& tmpl);
/// The metric over several receive channels' windows of the same samples (equal lengths;
/// std::invalid_argument otherwise): at each u the largest of the channels' M(u), so that a
/// channel that fades or carries noise only never hides the other (selection: the channels'
/// combined (sum of L) / (32 sum of energies) always lies between theirs, and a channel of
/// strong noise pulls it down). Noise alone then passes a threshold up to twice as often.
/// One channel: the call above.
void preamble_metric(std::span<const std::span<const cf32>> r, std::span<double> out, const std::array<cf64, 32>& tmpl);

struct preamble_peak {
    std::size_t u;   ///< position of the metric peak in the window
    double metric;   ///< M(u)
};

/// Peaks with u in [first, last) (positions of the metric array), deciding with the
/// neighbourhood clipped to the metric array. When the array starts at a segment start
/// (`segment_start`), a candidate whose left side is clipped by c samples is compared over
/// c more samples on its right: data right after a start could otherwise pass for a
/// preamble when the previous preamble was cut off and the next is more than W away.
[[nodiscard]] std::vector<preamble_peak> find_preamble_peaks(std::span<const double> metric, std::size_t first,
                                                             std::size_t last, double threshold,
                                                             std::size_t half_window = detector_half_window,
                                                             bool segment_start = false);

struct sample_batch;

/// Packets a batch owns, from its metric: window-relative packet starts (peak minus the
/// template offset) of the complete ones, and a count of those a segment edge cut.
struct packet_candidates {
    std::vector<long long> starts;
    std::vector<double> metrics;
    std::uint64_t truncated = 0;
    /// Per start, the periods check_packet_starts moved it by (0: the peak was the start).
    std::vector<int> moved_periods;
};

/// Applies find_preamble_peaks to the batch's owned range and sorts the peaks into complete
/// and truncated packets. Every backend locates packets with this one rule.
[[nodiscard]] packet_candidates locate_packets(const sample_batch& batch, std::span<const double> metric,
                                               double threshold, int template_offset);

/// Checks every start against its neighbours one and two preamble periods away with the whole
/// known sequence (dsp/start_check.hpp; a side lobe of L(u) moves to the true start) and
/// fills moved_periods. window: the samples the metric was computed on.
void check_packet_starts(std::span<const cf32> window, packet_candidates& c, const receiver_tables& t);
/// The same over several receive channels' windows of the same samples: each channel's K
/// normalized by 32 times its energy on the known samples (in [0, 1] at any level), summed.
void check_packet_starts(std::span<const std::span<const cf32>> windows, packet_candidates& c, const receiver_tables& t);

}  // namespace paq::dsp
