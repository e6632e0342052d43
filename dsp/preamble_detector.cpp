#include "dsp/preamble_detector.hpp"

#include "dsp/batch.hpp"
#include "dsp/waveform.hpp"

#include <algorithm>
#include <cmath>
#include <deque>

namespace paq::dsp {

void preamble_metric(std::span<const cf32> r, std::span<double> out, const std::array<cf64, 32>& tmpl)
{
    if (r.size() < detector_span) {
        return;
    }
    const std::size_t n_metric = r.size() - detector_span + 1;
    const std::size_t n_corr = r.size() - 32 + 1;  // c(v), e(v) for v = 0 .. n_corr-1
    constexpr std::size_t chunk = 1 << 16;
    const std::size_t n_chunks = (n_metric + chunk - 1) / chunk;

#pragma omp parallel
    {
        std::vector<double> c_abs2(chunk + 224);
        std::vector<double> e32(chunk + 224);
#pragma omp for schedule(dynamic)
        for (std::size_t ci = 0; ci < n_chunks; ++ci) {
            const std::size_t u0 = ci * chunk;
            const std::size_t u1 = std::min(n_metric, u0 + chunk);
            const std::size_t v1 = std::min(n_corr, u1 + 224);
            for (std::size_t v = u0; v < v1; ++v) {
                cf64 c = 0.0;
                double e = 0.0;
                for (std::size_t l = 0; l < 32; ++l) {
                    // Non-finite samples count as zero here, as they do in the packet chain.
                    const cf32 raw = r[v + l];
                    const cf64 s = std::isfinite(raw.real()) && std::isfinite(raw.imag()) ? cf64(raw.real(), raw.imag()) : cf64(0.0);
                    c += s * std::conj(tmpl[l]);
                    e += std::norm(s);
                }
                c_abs2[v - u0] = std::norm(c);
                e32[v - u0] = e;
            }
            for (std::size_t u = u0; u < u1; ++u) {
                double l_sum = 0.0, e_sum = 0.0;
                for (std::size_t m = 0; m < 8; ++m) {
                    l_sum += c_abs2[u - u0 + 32 * m];
                    e_sum += e32[u - u0 + 32 * m];
                }
                out[u] = e_sum > 0.0 ? l_sum / (32.0 * e_sum) : 0.0;
            }
        }
    }
}

std::vector<preamble_peak> find_preamble_peaks(std::span<const double> metric, std::size_t first, std::size_t last,
                                               double threshold, std::size_t half_window, bool segment_start)
{
    std::vector<preamble_peak> peaks;
    const std::size_t n = metric.size();
    last = std::min(last, n);
    if (first >= last) {
        return peaks;
    }
    const std::size_t w = half_window;
    // Left pass: M(u) strictly greater than every value in [u - W, u - 1].
    std::vector<std::size_t> cand;
    {
        std::deque<std::size_t> dq;  // indices with decreasing metric
        const std::size_t start = first > w ? first - w : 0;
        for (std::size_t u = start; u < last; ++u) {
            if (u >= first && metric[u] >= threshold) {
                while (!dq.empty() && dq.front() + w < u) {
                    dq.pop_front();
                }
                if (dq.empty() || metric[dq.front()] < metric[u]) {
                    cand.push_back(u);
                }
            }
            while (!dq.empty() && metric[dq.back()] <= metric[u]) {
                dq.pop_back();
            }
            dq.push_back(u);
        }
    }
    // Right pass: M(u) >= every value in [u + 1, u + W].
    {
        std::deque<std::size_t> dq;
        const std::size_t stop = std::min(n, last + w);
        std::size_t next = stop;  // next index to push (descending)
        for (std::size_t i = cand.size(); i-- > 0;) {
            const std::size_t u = cand[i];
            while (next > u + 1) {
                --next;
                while (!dq.empty() && metric[dq.back()] <= metric[next]) {
                    dq.pop_back();
                }
                dq.push_back(next);
            }
            while (!dq.empty() && dq.front() > u + w) {
                dq.pop_front();
            }
            if (!dq.empty() && metric[dq.front()] > metric[u]) continue;
            if (segment_start && u < w) {
                // Left side clipped by w - u: look that much further right, less a few
                // samples so that the next packet (L_pkt = 2W later) stays out of reach.
                constexpr std::size_t spacing_margin = 8;
                const std::size_t ext_end = std::min(n, u + w + (w - u) - spacing_margin + 1);
                bool beaten = false;
                for (std::size_t v = u + w + 1; v < ext_end && !beaten; ++v) beaten = metric[v] > metric[u];
                if (beaten) continue;
            }
            peaks.push_back({u, metric[u]});
        }
    }
    std::reverse(peaks.begin(), peaks.end());
    return peaks;
}

packet_candidates locate_packets(const sample_batch& batch, std::span<const double> metric, double threshold,
                                 int template_offset)
{
    packet_candidates c;
    const auto len = static_cast<long long>(batch.samples.size());
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

}  // namespace paq::dsp
