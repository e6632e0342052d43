#include "dsp/preamble_detector.hpp"

#include "dsp/batch.hpp"
#include "dsp/start_check.hpp"
#include "dsp/waveform.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace paq::dsp {

void preamble_metric(std::span<const std::span<const cf32>> r, std::span<double> out, const std::array<cf64, 32>& tmpl)
{
    const std::size_t channels = r.size();
    if (channels == 0 || r[0].size() < detector_span) {
        return;
    }
    const std::size_t len = r[0].size();
    for (const auto& x : r) {
        if (x.size() != len) throw std::invalid_argument("preamble_metric: the channels' windows differ in length");
    }
    const std::size_t n_metric = len - detector_span + 1;
    const std::size_t n_corr = len - 32 + 1;  // c(v), e(v) for v = 0 .. n_corr-1
    constexpr std::size_t chunk = 1 << 16;
    const std::size_t n_chunks = (n_metric + chunk - 1) / chunk;

#pragma omp parallel
    {
        std::vector<std::vector<double>> c_abs2(channels, std::vector<double>(chunk + 224));
        std::vector<std::vector<double>> e32(channels, std::vector<double>(chunk + 224));
#pragma omp for schedule(dynamic)
        for (std::size_t ci = 0; ci < n_chunks; ++ci) {
            const std::size_t u0 = ci * chunk;
            const std::size_t u1 = std::min(n_metric, u0 + chunk);
            const std::size_t v1 = std::min(n_corr, u1 + 224);
            for (std::size_t ch = 0; ch < channels; ++ch) {
                for (std::size_t v = u0; v < v1; ++v) {
                    cf64 c = 0.0;
                    double e = 0.0;
                    for (std::size_t l = 0; l < 32; ++l) {
                        // Non-finite samples count as zero here, as they do in the packet chain.
                        const cf32 raw = r[ch][v + l];
                        const cf64 s = std::isfinite(raw.real()) && std::isfinite(raw.imag()) ? cf64(raw.real(), raw.imag()) : cf64(0.0);
                        c += s * std::conj(tmpl[l]);
                        e += std::norm(s);
                    }
                    c_abs2[ch][v - u0] = std::norm(c);
                    e32[ch][v - u0] = e;
                }
            }
            for (std::size_t u = u0; u < u1; ++u) {
                double best = 0.0;
                for (std::size_t ch = 0; ch < channels; ++ch) {
                    double l_sum = 0.0, e_sum = 0.0;
                    for (std::size_t m = 0; m < 8; ++m) {
                        l_sum += c_abs2[ch][u - u0 + 32 * m];
                        e_sum += e32[ch][u - u0 + 32 * m];
                    }
                    best = std::max(best, e_sum > 0.0 ? l_sum / (32.0 * e_sum) : 0.0);
                }
                out[u] = best;
            }
        }
    }
}

void preamble_metric(std::span<const cf32> r, std::span<double> out, const std::array<cf64, 32>& tmpl)
{
    preamble_metric(std::span<const std::span<const cf32>>(&r, 1), out, tmpl);
}

std::vector<preamble_peak> find_preamble_peaks(std::span<const double> metric, std::size_t first, std::size_t last,
                                               double threshold, std::size_t half_window, bool segment_start)
{
    const std::size_t n = metric.size();
    last = std::min(last, n);
    std::vector<preamble_peak> peaks;
    if (first >= last) return peaks;
    const std::size_t w = half_window;

    // Block maxima make any range maximum a few hundred reads; candidates (values at or
    // above the threshold, about 1% of the positions) are then checked independently.
    constexpr std::size_t block = 256;
    const std::size_t nb = (n + block - 1) / block;
    std::vector<double> bmax(nb);
#pragma omp parallel for schedule(static)
    for (std::size_t b = 0; b < nb; ++b) {
        double m = -INFINITY;
        for (std::size_t i = b * block; i < std::min(n, (b + 1) * block); ++i) m = std::max(m, metric[i]);
        bmax[b] = m;
    }
    // max of metric[lo .. hi], -inf for an empty range.
    auto range_max = [&](std::size_t lo, std::size_t hi) {
        double m = -INFINITY;
        if (lo > hi) return m;
        std::size_t i = lo;
        for (; i <= hi && i % block != 0; ++i) m = std::max(m, metric[i]);
        for (; i + block - 1 <= hi; i += block) m = std::max(m, bmax[i / block]);
        for (; i <= hi; ++i) m = std::max(m, metric[i]);
        return m;
    };

    // u is a peak if metric[u] >= threshold, metric[u] > every value in [u - W, u - 1] (the
    // leftmost of equals wins), metric[u] >= every value in [u + 1, u + W], ranges clipped to
    // the array; at a segment start also the extension documented in the header.
    constexpr std::size_t spacing_margin = 8;
    const auto is_peak = [&](std::size_t u) {
        const double v = metric[u];
        if (u > 0 && !(v > range_max(u > w ? u - w : 0, u - 1))) return false;
        if (v < range_max(u + 1, std::min(n - 1, u + w))) return false;
        if (segment_start && u < w) {
            // Left side clipped by w - u: look that much further right, less a few samples so
            // that the next packet (L_pkt = 2W later) stays out of reach.
            const std::size_t ext_end = std::min(n, u + w + (w - u) - spacing_margin + 1);
            if (ext_end > u + w + 1 && range_max(u + w + 1, ext_end - 1) > v) return false;
        }
        return true;
    };

    constexpr std::size_t chunk = 1 << 16;
    const std::size_t n_chunks = (last - first + chunk - 1) / chunk;
    std::vector<std::vector<preamble_peak>> found(n_chunks);
#pragma omp parallel for schedule(dynamic)
    for (std::size_t c = 0; c < n_chunks; ++c) {
        const std::size_t u0 = first + c * chunk, u1 = std::min(last, u0 + chunk);
        for (std::size_t u = u0; u < u1; ++u) {
            if (metric[u] >= threshold && is_peak(u)) found[c].push_back({u, metric[u]});
        }
    }
    for (auto& f : found) peaks.insert(peaks.end(), f.begin(), f.end());
    return peaks;
}

packet_candidates locate_packets(const sample_batch& batch, std::span<const double> metric, double threshold,
                                 int template_offset)
{
    packet_candidates c;
    const auto len = static_cast<long long>(batch.size());
    for (const auto& pk : find_preamble_peaks(metric, batch.owned_begin, batch.owned_end, threshold,
                                              detector_half_window, batch.segment_start)) {
        const long long s = static_cast<long long>(pk.u) - template_offset;
        // Right after a segment start the true peak of a preamble cut by the start is not in
        // the window, and a side lobe 32k samples later could stand in for it; before a
        // segment end a preamble cut by the end shows its side lobes 32k samples early. Such
        // packets are incomplete anyway: they are counted as truncated, not misaligned.
        // A complete packet peaks far from either edge.
        const bool cut_at_start = batch.segment_start && pk.u < detector_span;
        const bool cut_at_end = batch.segment_end && pk.u + detector_half_window >= metric.size();
        if (cut_at_start || cut_at_end || s < 0 || s + static_cast<long long>(waveform::L_pkt) > len) {
            ++c.truncated;
            continue;
        }
        c.starts.push_back(s);
        c.metrics.push_back(pk.metric);
    }
    return c;
}

void check_packet_starts(std::span<const std::span<const cf32>> windows, packet_candidates& c, const receiver_tables& t)
{
    const int n = static_cast<int>(t.x_known.size());
    const auto* x = reinterpret_cast<const double*>(t.x_known.data());  // std::complex: re, im
    const auto len = static_cast<long long>(windows.empty() ? 0 : windows[0].size());
    // One channel: K(v). Several: each channel's K(v) over its energy on the known samples
    // (so in [0, 1] whatever its level; a channel of noise only adds a nearly constant term
    // instead of its noise power's fluctuations), summed.
    const auto metric = [&](long long v) {
        double k = 0.0;
        for (const auto& window : windows) {
            const auto reader = [&](long long m, double& sr, double& si) {
                const cf32 s = window[static_cast<std::size_t>(m)];
                const bool ok = std::isfinite(s.real()) && std::isfinite(s.imag());
                sr = ok ? static_cast<double>(s.real()) : 0.0;
                si = ok ? static_cast<double>(s.imag()) : 0.0;
            };
            const double kc = start_check::known_metric(reader, v, x, n, t.known_first);
            if (windows.size() == 1) return kc;
            double e = 0.0;
            for (int i = 0; i < n; ++i) {
                double sr = 0.0, si = 0.0;
                reader(v + t.known_first + i, sr, si);
                e += sr * sr + si * si;
            }
            k += e > 0.0 ? kc / (static_cast<double>(start_check::period) * e) : 0.0;
        }
        return k;
    };
    c.moved_periods.assign(c.starts.size(), 0);
    for (std::size_t i = 0; i < c.starts.size(); ++i) {
        const long long s = c.starts[i];
        const long long v = start_check::checked_start_by(metric, len, static_cast<long long>(waveform::L_pkt), s);
        c.moved_periods[i] = static_cast<int>((v - s) / start_check::period);
        c.starts[i] = v;
    }
}

void check_packet_starts(std::span<const cf32> window, packet_candidates& c, const receiver_tables& t)
{
    check_packet_starts(std::span<const std::span<const cf32>>(&window, 1), c, t);
}

}  // namespace paq::dsp
