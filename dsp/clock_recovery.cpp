#include "dsp/clock_recovery.hpp"

#include "dsp/batcher.hpp"
#include "dsp/preamble_detector.hpp"
#include "dsp/receiver_config.hpp"

#include "dsp/waveform.hpp"

#include <algorithm>
#include <optional>
#include <cmath>
#include <sstream>
#include <stdexcept>
#include <string>

namespace paq::dsp {

namespace {

constexpr double l_pkt = static_cast<double>(waveform::L_pkt);

struct line_fit {
    bool ok = false;
    double slope = 0.0;
};

/// Least-squares slope of s against n over idx (centred sums: well conditioned for any n).
line_fit fit_slope(std::span<const double> s, std::span<const long long> n, std::span<const std::size_t> idx)
{
    line_fit f;
    if (idx.size() < 2) return f;
    double n_mean = 0.0, s_mean = 0.0;
    for (const auto i : idx) {
        n_mean += static_cast<double>(n[i]);
        s_mean += s[i];
    }
    n_mean /= static_cast<double>(idx.size());
    s_mean /= static_cast<double>(idx.size());
    double snn = 0.0, sns = 0.0;
    for (const auto i : idx) {
        const double dn = static_cast<double>(n[i]) - n_mean;
        snn += dn * dn;
        sns += dn * (s[i] - s_mean);
    }
    if (!(snn > 0.0)) return f;
    f.ok = true;
    f.slope = sns / snn;
    return f;
}

double ppm_of_period(double period) { return (l_pkt / period - 1.0) * 1e6; }

}  // namespace

double refine_peak(const double* metric, std::size_t len, std::size_t peak) noexcept
{
    if (peak == 0 || peak + 1 >= len) return static_cast<double>(peak);
    return refine_peak(metric[peak - 1], metric[peak], metric[peak + 1], len, peak);
}

double refine_peak(double ym, double y0, double yp, std::size_t len, std::size_t peak) noexcept
{
    const auto centre = static_cast<double>(peak);
    if (peak == 0 || peak + 1 >= len) return centre;
    const double curv = ym - 2.0 * y0 + yp;
    if (!(curv < 0.0)) return centre;
    const double delta = 0.5 * (ym - yp) / curv;
    return centre + std::clamp(delta, -0.5, 0.5);
}

std::vector<std::string> clock_params::validate() const
{
    std::vector<std::string> e;
    auto add = [&](const std::string& field, double v, const std::string& range) {
        std::ostringstream os;
        os << field << " = " << v << " is out of range (allowed: " << range << ")";
        e.push_back(os.str());
    };
    if (local_half_width < 1 || local_half_width > 1000) add("local_half_width", local_half_width, "1 .. 1000 packets");
    if (!(grid_tolerance_samples >= 0.5 && grid_tolerance_samples <= 1000.0))
        add("grid_tolerance_samples", grid_tolerance_samples, "0.5 .. 1000 samples");
    if (!(max_abs_ppm >= 1.0 && max_abs_ppm <= 5000.0)) add("max_abs_ppm", max_abs_ppm, "1 .. 5000 ppm");
    return e;
}

clock_estimate estimate_clock(std::span<const double> starts, const clock_params& params)
{
    const auto errors = params.validate();
    if (!errors.empty()) {
        std::string msg = "invalid clock estimator parameters:";
        for (const auto& s : errors) msg += "\n  " + s;
        throw std::invalid_argument(msg);
    }
    const std::size_t n = starts.size();
    clock_estimate est;
    est.period_samples = l_pkt;
    est.packet_ppm.assign(n, 0.0);
    est.packet_number.assign(n, -1);
    if (n < 2) {
        est.off_grid = n;
        return est;
    }

    // 1. First guess: the median single-packet spacing.
    std::vector<double> spacings;
    const double max_dev = l_pkt * params.max_abs_ppm * 1e-6;
    for (std::size_t i = 1; i < n; ++i) {
        const double d = starts[i] - starts[i - 1];
        if (std::abs(d - l_pkt) <= max_dev + params.grid_tolerance_samples) spacings.push_back(d);
    }
    double period = l_pkt;
    if (!spacings.empty()) {
        const auto mid = spacings.begin() + static_cast<std::ptrdiff_t>(spacings.size() / 2);
        std::nth_element(spacings.begin(), mid, spacings.end());
        period = *mid;
    }

    // 2. On the grid of the majority of the nearest starts.
    constexpr std::size_t reach = 4;
    std::vector<char> on_grid(n, 0);
    for (std::size_t i = 0; i < n; ++i) {
        std::size_t neighbours = 0, consistent = 0;
        const std::size_t lo = i >= reach ? i - reach : 0, hi = std::min(n - 1, i + reach);
        for (std::size_t j = lo; j <= hi; ++j) {
            if (j == i) continue;
            ++neighbours;
            const double d = starts[j] - starts[i];
            const double k = std::round(d / period);
            if (k != 0.0 && std::abs(d - k * period) <= params.grid_tolerance_samples) ++consistent;
        }
        on_grid[i] = 2 * consistent > neighbours;
    }

    // 3. Packet numbers along the on-grid starts.
    std::vector<std::size_t> used;
    long long number = 0;
    for (std::size_t i = 0; i < n; ++i) {
        if (!on_grid[i]) continue;
        if (!used.empty()) number += std::max(1LL, std::llround((starts[i] - starts[used.back()]) / period));
        est.packet_number[i] = number;
        used.push_back(i);
    }
    est.on_grid = used.size();
    est.off_grid = n - used.size();

    // 4. Least squares over the batch, then around each packet. A slope beyond the offsets
    // looked for is not a clock: a jump in the packet grid (recordings joined end to end, a
    // source that skipped without saying so) lies across the fit. The batch then has no
    // estimate (nothing re-timed), a packet whose local fit spans the jump the batch mean.
    const auto plausible = [&](double slope) { return std::abs(ppm_of_period(slope)) <= params.max_abs_ppm; };
    const auto whole = fit_slope(starts, est.packet_number, used);
    if (!whole.ok || !plausible(whole.slope)) {
        for (auto& v : est.packet_number) v = -1;
        est.on_grid = 0;
        est.off_grid = n;
        return est;
    }
    est.valid = true;
    est.period_samples = whole.slope;
    est.ppm = ppm_of_period(whole.slope);
    std::fill(est.packet_ppm.begin(), est.packet_ppm.end(), est.ppm);
    const long long k_half = params.local_half_width;
    std::size_t lo = 0, hi = 0;  // window [lo, hi) into `used`, slid along
    std::vector<std::size_t> local;
    for (std::size_t u = 0; u < used.size(); ++u) {
        const long long nu = est.packet_number[used[u]];
        while (est.packet_number[used[lo]] < nu - k_half) ++lo;
        while (hi < used.size() && est.packet_number[used[hi]] <= nu + k_half) ++hi;
        local.assign(used.begin() + static_cast<std::ptrdiff_t>(lo), used.begin() + static_cast<std::ptrdiff_t>(hi));
        const auto f = fit_slope(starts, est.packet_number, local);
        if (f.ok && plausible(f.slope)) est.packet_ppm[used[u]] = ppm_of_period(f.slope);
    }
    return est;
}

fixed_pos clock_step(double ppm)
{
    if (!(std::abs(ppm) <= 1e4))
        throw std::invalid_argument("clock offset " + std::to_string(ppm) + " ppm is out of range (allowed: -10000 .. 10000)");
    return to_fixed_step(1.0 / (1.0 + ppm * 1e-6));
}

namespace {

template <class Out>
std::uint32_t correct(const cf32* window, std::size_t window_len, long long start, fixed_pos step, std::size_t margin,
                      std::size_t seg_len, Out* out, std::size_t out_len, const resampler_design& d,
                      std::vector<cf32>& scratch)
{
    if (seg_len > out_len)
        throw std::invalid_argument("clock_correct_packet: seg_len " + std::to_string(seg_len) + " exceeds out_len " +
                                    std::to_string(out_len));
    std::fill(out + seg_len, out + out_len, Out(0.0));
    if (seg_len == 0) return 0;
    // Positions in signed 32.32: the first output may sit before the window's start.
    const auto step_s = static_cast<std::int64_t>(step);
    const std::int64_t first = static_cast<std::int64_t>(static_cast<std::uint64_t>(start) << fixed_frac_bits) -
                               static_cast<std::int64_t>(margin) * step_s;
    const std::int64_t last = first + static_cast<std::int64_t>(seg_len - 1) * step_s;
    const long long half = d.filter_half_span();
    // The input samples the filter reads, sanitized once: absent or non-finite -> 0, counted.
    const long long in_lo = (first >> fixed_frac_bits) - half + 1;
    const long long in_hi = (last >> fixed_frac_bits) + half + 1;  // exclusive
    scratch.resize(static_cast<std::size_t>(in_hi - in_lo));
    std::uint32_t nonfinite = 0;
    const auto len = static_cast<long long>(window_len);
    for (long long j = in_lo; j < in_hi; ++j) {
        cf32 v(0.0f);
        if (j >= 0 && j < len) {
            v = window[j];
            if (!std::isfinite(v.real()) || !std::isfinite(v.imag())) {
                ++nonfinite;
                v = cf32(0.0f);
            }
        }
        scratch[static_cast<std::size_t>(j - in_lo)] = v;
    }
    // Relative to the scratch buffer, positions are non-negative: plain resample_at.
    for (std::size_t i = 0; i < seg_len; ++i) {
        const std::int64_t pos = first + static_cast<std::int64_t>(i) * step_s;
        const long long ip = (pos >> fixed_frac_bits) - in_lo;
        const auto frac = static_cast<std::uint32_t>(static_cast<std::uint64_t>(pos));
        const cf32 y = resample_at(scratch.data(), scratch.size(), ip, frac, d);
        out[i] = Out(y.real(), y.imag());
    }
    return nonfinite;
}

}  // namespace

std::uint32_t clock_correct_packet(const cf32* window, std::size_t window_len, long long start, fixed_pos step,
                                   std::size_t margin, std::size_t seg_len, cf64* out, std::size_t out_len,
                                   const resampler_design& d, std::vector<cf32>& scratch)
{
    return correct(window, window_len, start, step, margin, seg_len, out, out_len, d, scratch);
}

std::uint32_t clock_correct_packet(const cf32* window, std::size_t window_len, long long start, fixed_pos step,
                                   std::size_t margin, std::size_t seg_len, cf32* out, std::size_t out_len,
                                   const resampler_design& d, std::vector<cf32>& scratch)
{
    return correct(window, window_len, start, step, margin, seg_len, out, out_len, d, scratch);
}

std::vector<fixed_pos> clock_steps(const sample_batch& batch, std::span<const double> metric,
                                   const packet_candidates& found, int template_offset, const receiver_config& cfg,
                                   std::vector<double>& ppm_out)
{
    const std::size_t np = found.starts.size();
    std::vector<fixed_pos> steps(np, fixed_pos{1} << fixed_frac_bits);
    ppm_out.assign(np, 0.0);
    if (!cfg.clock_tracking || np == 0) return steps;
    // Estimated per part of the batch (clock_scope_parts), over the packets each part owns:
    // the GPU backend, which processes the parts one by one, estimates over the same sets.
    // Every packet's fractional start, once (each part's estimate and the fallback use them).
    std::vector<double> frac(np);
    for (std::size_t k = 0; k < np; ++k) {
        const auto peak = static_cast<std::size_t>(found.starts[k] + template_offset);
        frac[k] = static_cast<double>(found.starts[k]) + (refine_peak(metric.data(), metric.size(), peak) - static_cast<double>(peak));
    }
    // A part with too few packets for an estimate (a batch's short end) takes the whole
    // batch's, made at most once.
    std::optional<clock_estimate> whole;
    std::size_t i = 0;
    for (const auto& part : split_batch(batch, clock_scope_parts)) {
        const std::size_t end_peak = part.offset + part.owned_end;
        const std::size_t first = i;
        while (i < np && static_cast<std::size_t>(found.starts[i] + template_offset) < end_peak) ++i;
        if (i == first) continue;
        const auto part_est = estimate_clock(std::span<const double>(frac).subspan(first, i - first));
        const bool use_whole = !part_est.valid;
        if (use_whole && !whole) whole = estimate_clock(frac);
        const clock_estimate& est = use_whole ? *whole : part_est;
        for (std::size_t k = first; k < i; ++k) {
            const double ppm = est.valid ? est.packet_ppm[use_whole ? k : k - first] : 0.0;
            ppm_out[k] = ppm;
            if (est.valid && std::abs(ppm) >= cfg.clock_min_ppm) steps[k] = clock_step(ppm);
        }
    }
    return steps;
}

}  // namespace paq::dsp
