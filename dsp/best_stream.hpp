// The best-path choice: per packet, the output stream whose decisions are estimated the most
// reliable (the highest DQM, to within what the estimates can tell). The best-path stream (publisher.best_destination) sends its bits; the records name
// it (`best_stream`). Both take it from here.
#pragma once

#include "dsp/batch.hpp"

#include <cmath>
#include <cstddef>

namespace paq::dsp {

/// Estimates within this factor of the lowest are not told apart: each is calibrated to within
/// 0.8-1.25x of its stream's error rate (docs/SIGNAL-CHAIN.md, "Decision quality"), so a
/// smaller difference says nothing about which stream is better.
inline constexpr double best_stream_margin = 1.25;

/// The stream of `rec` among its first `streams` (6, or 12 with detector both) whose decisions
/// are estimated the most reliable: of those whose BEP estimate (path_stats::bep_estimate) is
/// within best_stream_margin of the lowest, the lowest stream id (the unequalized path before
/// the equalizers, symbol by symbol before the trellis). Choosing among estimates that cannot
/// be told apart by their noise would make the stream no better than the streams' average;
/// the fixed order keeps it on one of them. A NaN estimate counts as 0.5 (the DQM's worst).
[[nodiscard]] inline int best_stream(const packet_record& rec, int streams) noexcept
{
    const auto bep = [&](int s) {
        const double b = static_cast<double>(rec.paths[static_cast<std::size_t>(s)].bep_estimate);
        return std::isnan(b) ? 0.5 : b;
    };
    double lowest = 2.0;
    for (int s = 0; s < streams; ++s) lowest = std::fmin(lowest, bep(s));
    for (int s = 0; s < streams; ++s) {
        if (bep(s) <= best_stream_margin * lowest) return s;
    }
    return 0;
}

}  // namespace paq::dsp
