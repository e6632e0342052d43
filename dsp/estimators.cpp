#include "dsp/estimators.hpp"

#include "dsp/soqpsk.hpp"
#include "dsp/waveform.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <vector>

namespace paq::dsp {

namespace {

constexpr int lq = static_cast<int>(waveform::L_q);

/// sum_{n=64}^{223} r(n) r*(n - 32): the first two periods carry channel and pulse memory of
/// the data before the packet.
cf64 lag_product(const cf64* r) noexcept
{
    cf64 acc = 0.0;
    for (int n = 2 * lq; n <= 7 * lq - 1; ++n) acc += r[n] * std::conj(r[n - lq]);
    return acc;
}

}  // namespace

std::array<double, chain::max_receive_channels> cfo_channel_weights(std::span<const cf64* const> r) noexcept
{
    std::array<double, chain::max_receive_channels> w{};
    constexpr double terms = 5.0 * lq;
    for (std::size_t c = 0; c < r.size() && c < w.size(); ++c) {
        double e = 0.0;
        for (int n = 2 * lq; n <= 7 * lq - 1; ++n) e += 0.5 * (std::norm(r[c][n]) + std::norm(r[c][n - lq]));
        const double noise = std::max(e - std::abs(lag_product(r[c])), 1e-3 * e) / terms;
        w[c] = noise > 0.0 && std::isfinite(noise) ? 1.0 / noise : 0.0;
    }
    return w;
}

double estimate_cfo(std::span<const cf64* const> r) noexcept
{
    if (r.size() == 1) return std::arg(lag_product(r[0])) / lq;
    const auto w = cfo_channel_weights(r);
    cf64 acc = 0.0;
    for (std::size_t c = 0; c < r.size(); ++c) acc += w[c] * lag_product(r[c]);
    return std::arg(acc) / lq;
}

double estimate_cfo(const cf64* r) noexcept
{
    return estimate_cfo(std::span<const cf64* const>(&r, 1));
}

void derotate(cf64* r, int first, int last, double w0) noexcept
{
    for (int n = first; n < last; ++n) r[n] *= std::polar(1.0, -w0 * n);
}

void derotate_about(cf64* r, int first, int last, double dw, double centre) noexcept
{
    for (int n = first; n < last; ++n) r[n] *= std::polar(1.0, -dw * (static_cast<double>(n) - centre));
}

namespace {

/// out = G obs, G 38 x M row-major.
void apply_estimator(const cf64* G, const cf64* obs, std::size_t M, std::array<cf64, chain::L_ch>& out) noexcept
{
    for (int a = 0; a < chain::L_ch; ++a) {
        cf64 s = 0.0;
        const cf64* row = G + static_cast<std::size_t>(a) * M;
        for (std::size_t i = 0; i < M; ++i) s += row[i] * obs[i];
        out[static_cast<std::size_t>(a)] = s;
    }
}

}  // namespace

int select_channel_support(const std::array<cf64, chain::L_ch>& h_wide, double sigma2, const receiver_tables& t) noexcept
{
    const double nv = 2.0 * sigma2;
    double best = 0.0;
    int best_index = -1;
    std::array<cf64, chain::L_ch> outside{};
    for (std::size_t c = 0; c < t.supports.size(); ++c) {
        const auto& s = t.supports[c];
        for (int a = 0; a < chain::L_ch; ++a) {
            const int m = a - chain::N1;
            outside[static_cast<std::size_t>(a)] = (m >= s.first_tap && m <= s.last_tap) ? cf64(0.0) : h_wide[static_cast<std::size_t>(a)];
        }
        const double risk = t.support_noise_penalty * nv * s.noise_gain + received_power(outside.data(), chain::L_ch) - nv * s.outside_noise_gain;
        if (best_index < 0 || risk < best) {
            best = risk;
            best_index = static_cast<int>(c);
        }
    }
    // NaN samples make every risk NaN: fall back to the full width.
    return best_index >= 0 && std::isfinite(best) ? best_index : static_cast<int>(t.supports.size()) - 1;
}

channel_estimate estimate_channel(const cf64* r, const receiver_tables& t) noexcept
{
    channel_estimate ce;
    const std::size_t M = t.M;
    const cf64* obs = r + t.obs_first;
    // Pilot estimate and noise variance (thesis eqs. 3.9-3.12, with the truncated pseudo-inverse).
    std::array<cf64, chain::L_ch> pilot{};
    apply_estimator(t.X_lpi.data(), obs, M, pilot);
    double res = 0.0;
    for (std::size_t i = 0; i < M; ++i) {
        cf64 s = 0.0;
        const cf64* row = t.X.data() + i * chain::L_ch;
        for (int a = 0; a < chain::L_ch; ++a) s += row[a] * pilot[static_cast<std::size_t>(a)];
        res += std::norm(obs[i] - s);
    }
    ce.sigma2 = res / (2.0 * t.rho);
    // Support, then the estimate on it.
    std::array<cf64, chain::L_ch> wide{};
    apply_estimator(t.supports.back().G.data(), obs, M, wide);
    ce.support = select_channel_support(wide, ce.sigma2, t);
    if (static_cast<std::size_t>(ce.support) + 1 == t.supports.size()) {
        ce.h = wide;  // the full width won: its estimate is the one above
    } else {
        apply_estimator(t.supports[static_cast<std::size_t>(ce.support)].G.data(), obs, M, ce.h);
    }
    for (const auto& v : ce.h) ce.energy += std::norm(v);
    return ce;
}

double block_phase_slope(const cf64* block_sums, const double* centres, const double* weights, std::size_t blocks) noexcept
{
    double sw = 0.0, sx = 0.0, sy = 0.0, sxx = 0.0, sxy = 0.0, prev = 0.0;
    for (std::size_t b = 0; b < blocks; ++b) {
        double ph = std::arg(block_sums[b]);
        if (b > 0) ph = prev + std::remainder(ph - prev, 2.0 * std::numbers::pi);
        prev = ph;
        const double w = weights[b], x = centres[b];
        sw += w;
        sx += w * x;
        sy += w * ph;
        sxx += w * x * x;
        sxy += w * x * ph;
    }
    const double den = sw * sxx - sx * sx;
    const double slope = den > 0.0 ? (sw * sxy - sx * sy) / den : 0.0;
    return std::isfinite(slope) ? slope : 0.0;
}

namespace {

/// estimate_cfo_residual's block sums of one channel's observation range times `scale`, added
/// to `sums` (with the blocks' centres and weights).
std::size_t add_block_sums(const cf64* obs, double scale, const receiver_tables& t, cf64* sums, double* centres,
                           double* weights) noexcept
{
    const std::size_t M = t.M;
    std::array<cf64, chain::L_ch> pilot{};
    apply_estimator(t.X_lpi.data(), obs, M, pilot);
    constexpr std::size_t B = cfo_refine_block;
    const std::size_t blocks = std::min(cfo_refine_max_blocks, (M + B - 1) / B);
    for (std::size_t b = 0; b < blocks; ++b) {
        const std::size_t i0 = b * B, i1 = std::min(M, i0 + B);
        for (std::size_t i = i0; i < i1; ++i) {
            cf64 s = 0.0;
            const cf64* row = t.X.data() + i * chain::L_ch;
            for (int a = 0; a < chain::L_ch; ++a) s += row[a] * pilot[static_cast<std::size_t>(a)];
            sums[b] += scale * (obs[i] * std::conj(s));
        }
        centres[b] = static_cast<double>(t.obs_first) + 0.5 * static_cast<double>(i0 + i1 - 1);
        weights[b] = static_cast<double>(i1 - i0);
    }
    return blocks;
}

/// The residual over every channel's observation range (obs[c]: M samples each), channel c's
/// block sums weighted by scale[c].
double cfo_residual(std::span<const cf64* const> obs, const double* scale, const receiver_tables& t) noexcept
{
    std::array<cf64, cfo_refine_max_blocks> sums{};
    std::array<double, cfo_refine_max_blocks> centres{}, weights{};
    std::size_t blocks = 0;
    for (std::size_t c = 0; c < obs.size(); ++c) blocks = add_block_sums(obs[c], scale[c], t, sums.data(), centres.data(), weights.data());
    return block_phase_slope(sums.data(), centres.data(), weights.data(), blocks);
}

}  // namespace

double estimate_cfo_residual(const cf64* obs, const receiver_tables& t) noexcept
{
    const double one = 1.0;
    return cfo_residual(std::span<const cf64* const>(&obs, 1), &one, t);
}

double refine_cfo(std::span<const cf64* const> r, double w0, const receiver_tables& t)
{
    // Each channel's observation range, obs[c][i] = r[c](obs_first + i), derotated as
    // derotate() does r(n), phase w n.
    std::vector<std::vector<cf64>> obs;
    std::vector<const cf64*> views;
    for (const cf64* x : r) obs.emplace_back(x + t.obs_first, x + t.obs_first + t.M);
    for (const auto& o : obs) views.push_back(o.data());
    auto rotate = [&](double w) {
        for (auto& o : obs) {
            for (std::size_t i = 0; i < o.size(); ++i) o[i] *= std::polar(1.0, -w * static_cast<double>(t.obs_first + static_cast<int>(i)));
        }
    };
    // One channel as it is; several each by its weight (cfo_channel_weights).
    auto scale = cfo_channel_weights(r);
    if (r.size() == 1) scale[0] = 1.0;
    rotate(w0);
    double total = 0.0;
    for (int pass = 0; pass < cfo_refine_passes; ++pass) {
        const double dw = cfo_residual(views, scale.data(), t);
        if (pass + 1 < cfo_refine_passes) rotate(dw);
        total += dw;
    }
    return total;
}

double refine_cfo(const cf64* r, double w0, const receiver_tables& t)
{
    return refine_cfo(std::span<const cf64* const>(&r, 1), w0, t);
}

}  // namespace paq::dsp
