// What the CPU measurements of bench/ share: a signal through one of paq-sim's fixed channel
// presets, as the simulator applies its rays.
#pragma once

#include "dsp/types.hpp"
#include "sim/simulator.hpp"

#include <algorithm>
#include <cmath>
#include <complex>
#include <stdexcept>
#include <string>
#include <vector>

namespace paq::bench {

/// The channel's interpolator (paq::sim::add_fractional_delay): taps 0 .. 2 interp_half, zero
/// delay at interp_half.
inline constexpr int interp_half = 16;

/// The presets whose rays stay put (all but flight): those through_preset takes, for a command
/// line's check.
inline std::vector<std::string> fixed_preset_names()
{
    std::vector<std::string> fixed;
    for (const auto& name : sim::channel_preset_names()) {
        if (!sim::channel_preset_by_name(name).flight) fixed.push_back(name);
    }
    return fixed;
}

/// x (2 samples a bit at bit_rate_hz) through the rays of `preset`, each a windowed-sinc
/// fractional delay (paq::sim::add_fractional_delay, the simulator's interpolator, here
/// interp_half taps either side), scaled to mean power 1 over x (paq-sim scales its received
/// signal to power 1 from the modulation's autocorrelation: the same in expectation): a sample
/// of x at m is, through the zero-delay ray, sample m + interp_half of the result.
/// std::invalid_argument for an unknown preset or one whose rays change over time (flight).
inline std::vector<cf64> through_preset(const std::vector<cf64>& x, const std::string& preset, double bit_rate_hz)
{
    const auto ch = sim::channel_preset_by_name(preset);
    if (ch.flight) throw std::invalid_argument("the " + preset + " preset's rays change over time; choose a fixed one");
    double longest = 0.0;
    for (const auto& r : ch.rays) longest = std::max(longest, r.delay_ns * 1e-9 * 2.0 * bit_rate_hz);
    std::vector<cf64> taps(static_cast<std::size_t>(2 * interp_half + 2 + static_cast<int>(std::ceil(longest))), cf64{});
    for (const auto& r : ch.rays) sim::add_fractional_delay(taps, interp_half, r.delay_ns * 1e-9 * 2.0 * bit_rate_hz, std::polar(r.amplitude, r.phase_rad));
    std::vector<cf64> y(x.size(), cf64{});
    for (std::size_t m = 0; m < x.size(); ++m) {
        cf64 acc{};
        for (std::size_t t = 0; t < taps.size() && t <= m; ++t) acc += taps[t] * x[m - t];
        y[m] = acc;
    }
    double p = 0.0;
    for (const auto& v : y) p += std::norm(v);
    const double s = 1.0 / std::sqrt(p / static_cast<double>(y.size()));
    for (auto& v : y) v *= s;
    return y;
}

}  // namespace paq::bench
