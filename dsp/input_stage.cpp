#include "dsp/input_stage.hpp"

#include <cmath>
#include <stdexcept>
#include <string>

namespace paq::dsp {

namespace {
// 128-bit positions (GCC and Clang; nvcc has it too): m x step passes 2^64 after minutes.
__extension__ typedef unsigned __int128 u128;
}  // namespace

input_geometry make_input_geometry(const receiver_config& rc)
{
    const auto errors = rc.validate();
    if (!errors.empty()) {
        std::string msg = "invalid receiver configuration:";
        for (const auto& e : errors) msg += "\n  " + e;
        throw std::invalid_argument(msg);
    }
    input_geometry g;
    g.bit_rate_hz = rc.bit_rate_hz;
    g.input_rate_hz = rc.input_sample_rate_hz > 0.0 ? rc.input_sample_rate_hz : 2.0 * rc.bit_rate_hz;
    g.ratio = rc.input_ratio();
    g.resampling = g.ratio != 1.0;
    if (!g.resampling) return g;
    g.design = std::make_shared<const resampler_design>(design_resampler_for_rates(g.input_rate_hz, g.bit_rate_hz));
    g.step = to_fixed_step(g.ratio);
    // Input guards that leave at least the chain's guards of fully supported outputs on each
    // side of the owned outputs: (guard + 2) outputs span (guard + 2) R input samples, plus
    // the filter's reach.
    const auto half = static_cast<std::size_t>(g.design->filter_half_span());
    g.guard_before = static_cast<std::size_t>(std::ceil((static_cast<double>(batch_guard_before) + 2.0) * g.ratio)) + half;
    g.guard_after = static_cast<std::size_t>(std::ceil((static_cast<double>(batch_guard_after) + 2.0) * g.ratio)) + half + 1;
    return g;
}

namespace {

/// The segment-relative output index of the first output positioned at or after the window's
/// first sample, and that output's position relative to it (in [0, step)). 128-bit: a live
/// segment runs for hours, and m x step passes 2^64 after ~3.5 minutes at 20 MS/s.
void first_output(const window_span& in, const input_geometry& g, std::uint64_t& m_first, fixed_pos& first_pos)
{
    const u128 origin = static_cast<u128>(in.first_sample - in.segment_first_sample) << fixed_frac_bits;
    const u128 step = g.step;
    const u128 m = (origin + step - 1) / step;
    m_first = static_cast<std::uint64_t>(m);
    first_pos = static_cast<fixed_pos>(m * step - origin);
}

}  // namespace

resampled_window map_window(const sample_batch& in, const input_geometry& g)
{
    return map_window(window_span{in.first_sample, in.size(), in.owned_begin, in.owned_end, in.segment_start,
                                  in.segment_end, in.segment_first_sample},
                      g);
}

resampled_window map_window(const window_span& in, const input_geometry& g)
{
    if (!g.resampling || !g.design) throw std::logic_error("input stage: map_window without resampling");
    if (in.first_sample < in.segment_first_sample) throw std::invalid_argument("input stage: window before its segment's start");
    std::uint64_t m_first = 0;
    fixed_pos first_pos = 0;
    first_output(in, g, m_first, first_pos);
    const std::size_t len = in.length;
    const auto all = output_range(first_pos, g.step, 0, len, *g.design);
    const auto owned = output_range(first_pos, g.step, in.owned_begin, in.owned_end, *g.design).positioned;
    // At a segment's start the outputs before full support are the segment's first (the
    // filter reads zeros before it, as every window of the segment would); likewise at its end.
    const std::uint64_t k_begin = in.segment_start ? 0 : all.supported.begin;
    const std::uint64_t k_end = in.segment_end ? all.positioned.end : all.supported.end;
    resampled_window w;
    w.m_begin = m_first + k_begin;
    w.first_pos = first_pos + k_begin * g.step;
    if (k_end <= k_begin || owned.size() == 0) return w;  // nothing to own: an empty window
    if (owned.begin < k_begin || owned.end > k_end) {
        throw std::logic_error("input stage: owned outputs [" + std::to_string(owned.begin) + ", " + std::to_string(owned.end) +
                               ") outside the supported window [" + std::to_string(k_begin) + ", " + std::to_string(k_end) +
                               "): the batcher's guards are too small for ratio " + std::to_string(g.ratio));
    }
    w.n_out = static_cast<std::size_t>(k_end - k_begin);
    w.owned_begin = static_cast<std::size_t>(owned.begin - k_begin);
    w.owned_end = static_cast<std::size_t>(owned.end - k_begin);
    return w;
}

std::uint64_t input_index(const sample_batch& in, std::uint64_t m, const input_geometry& g) noexcept
{
    const u128 pos = static_cast<u128>(m) * g.step;
    return in.segment_first_sample + static_cast<std::uint64_t>(pos >> fixed_frac_bits);
}

sample_batch resample_batch(const sample_batch& in, const input_geometry& g)
{
    const auto w = map_window(in, g);
    sample_batch out;
    out.index = in.index;
    out.first_sample = w.m_begin;
    out.samples.resize(w.n_out);
    if (w.n_out) resample(in.samples.data(), in.samples.size(), w.first_pos, g.step, out.samples.data(), w.n_out, *g.design);
    out.owned_begin = w.owned_begin;
    out.owned_end = w.owned_end;
    out.segment_start = in.segment_start;
    out.segment_end = in.segment_end;
    out.lost_samples_before = in.lost_samples_before;
    out.segment_first_sample = 0;
    return out;
}

}  // namespace paq::dsp
