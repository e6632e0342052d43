#include "dsp/receiver_tables.hpp"

#include "dsp/fft.hpp"
#include "dsp/linalg.hpp"
#include "dsp/preamble_detector.hpp"
#include "dsp/soqpsk.hpp"
#include "dsp/waveform.hpp"

#include <algorithm>
#include <cmath>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <numbers>
#include <random>
#include <stdexcept>

namespace paq::dsp {

using namespace chain;
namespace wf = waveform;

const char* path_name(eq_path p) noexcept
{
    switch (p) {
    case eq_path::none: return "none";
    case eq_path::zf: return "zf";
    case eq_path::mmse: return "mmse";
    case eq_path::cma: return "cma";
    case eq_path::fde1: return "fde1";
    case eq_path::fde2: return "fde2";
    }
    return "?";
}

const char* stream_name(int stream) noexcept
{
    static constexpr const char* trellis_names[chain::num_paths] = {"none_trellis", "zf_trellis",   "mmse_trellis",
                                                                     "cma_trellis",  "fde1_trellis", "fde2_trellis"};
    if (stream >= 0 && stream < chain::num_paths) return path_name(stream);
    if (stream >= chain::num_paths && stream < chain::max_streams) return trellis_names[stream - chain::num_paths];
    return "?";
}

std::array<cf64, 32> quantized_preamble_template()
{
    // Thesis eq. 3.5. L1: +1, L2: -1, L3: +j, L4: -j; L5/L6: real part +-0.7071;
    // L7/L8: imaginary part +-0.7071.
    const double a = 0.7071;
    std::array<cf64, 32> p{};
    for (int l : {0, 8, 16, 24}) p[l] += 1.0;
    for (int l : {4, 20}) p[l] += -1.0;
    for (int l : {2, 10, 14, 22}) p[l] += cf64(0, 1);
    for (int l : {6, 18, 26, 30}) p[l] += cf64(0, -1);
    for (int l : {1, 7, 9, 15, 17, 23, 25, 31}) p[l] += a;
    for (int l : {3, 5, 11, 12, 13, 19, 21, 27, 28, 29}) p[l] += -a;
    for (int l : {1, 3, 9, 11, 12, 13, 15, 21, 23}) p[l] += cf64(0, a);
    for (int l : {5, 7, 17, 19, 25, 27, 28, 29, 31}) p[l] += cf64(0, -a);
    return p;
}

namespace {

constexpr std::uint64_t tables_seed = 0x5041515f7462ull;  // fixed: the tables are deterministic

/// Bits of `before` random bits, one packet header (preamble + ASM), `after` random bits.
std::vector<std::uint8_t> header_with_random_context(std::mt19937_64& rng, std::size_t before, std::size_t after)
{
    std::vector<std::uint8_t> bits;
    for (std::size_t i = 0; i < before; ++i) bits.push_back(static_cast<std::uint8_t>(rng() & 1));
    const auto known = wf::known_packet_bits();
    bits.insert(bits.end(), known.begin(), known.end());
    for (std::size_t i = 0; i < after; ++i) bits.push_back(static_cast<std::uint8_t>(rng() & 1));
    return bits;
}

/// Finds the samples (relative to the packet start) that the known bits alone determine:
/// modulate the header inside many random contexts and keep what never changes.
void find_known_samples(receiver_tables& t)
{
    std::mt19937_64 rng(tables_seed);
    constexpr std::size_t before = 64;  // even: the preamble starts on an even bit index
    constexpr std::size_t after = 64;
    constexpr int rel_lo = -32, rel_hi = 2 * static_cast<int>(wf::known_bits) + 32;
    std::vector<std::vector<cf64>> runs;
    for (int trial = 0; trial < 64; ++trial) {
        auto bits = header_with_random_context(rng, before, after);
        auto x = modulate_bits(bits);
        std::vector<cf64> rel;
        const int start = static_cast<int>(2 * before + soqpsk_modulator::delay_samples);
        for (int n = rel_lo; n < rel_hi; ++n) rel.push_back(x[static_cast<std::size_t>(start + n)]);
        runs.push_back(std::move(rel));
    }
    std::vector<bool> fixed(static_cast<std::size_t>(rel_hi - rel_lo));
    for (std::size_t i = 0; i < fixed.size(); ++i) {
        double dev = 0.0;
        for (const auto& r : runs) dev = std::max(dev, std::abs(r[i] - runs[0][i]));
        fixed[i] = dev < 1e-9;
    }
    // The longest run of fixed samples.
    int best_lo = 0, best_len = 0;
    for (int i = 0; i < static_cast<int>(fixed.size());) {
        if (!fixed[static_cast<std::size_t>(i)]) { ++i; continue; }
        int j = i;
        while (j < static_cast<int>(fixed.size()) && fixed[static_cast<std::size_t>(j)]) ++j;
        if (j - i > best_len) { best_len = j - i; best_lo = i; }
        i = j;
    }
    t.known_first = best_lo + rel_lo;
    t.known_last = t.known_first + best_len - 1;
    t.x_known.assign(runs[0].begin() + best_lo, runs[0].begin() + best_lo + best_len);
}

/// A (38 x 38) times X^H (X: M x 38 row-major): a 38 x M estimator, row-major.
std::vector<cf64> times_x_herm(const std::vector<cf64>& a, const std::vector<cf64>& X, std::size_t M)
{
    std::vector<cf64> out(L_ch * M, 0.0);
    for (std::size_t i = 0; i < M; ++i) {
        for (int r = 0; r < L_ch; ++r) {
            cf64 v = 0.0;
            for (int b = 0; b < L_ch; ++b) v += a[static_cast<std::size_t>(r * L_ch + b)] * std::conj(X[i * L_ch + static_cast<std::size_t>(b)]);
            out[static_cast<std::size_t>(r) * M + i] = v;
        }
    }
    return out;
}

/// The fixed estimators of the candidate channel supports (docs/SIGNAL-CHAIN.md). Each is
/// the MAP estimate under a prior that puts the channel inside its support: where the known
/// samples leave a direction of h unobserved (the band edges, taps 32 apart that the periodic
/// preamble cannot tell apart) the prior decides, and taps outside the support cost noise
/// no more.
void build_support_estimators(receiver_tables& t, const std::vector<cf64>& g)
{
    const std::size_t M = t.M;
    t.support_noise_penalty = 0.5 * std::log(static_cast<double>(M));
    double diag_max = 0.0;
    for (int a = 0; a < L_ch; ++a) diag_max = std::max(diag_max, g[static_cast<std::size_t>(a * L_ch + a)].real());
    // The supports are independent: computed in parallel (each serially, so the tables are
    // the same bit for bit whatever the threads), in the order of the loops below.
    std::vector<std::pair<int, int>> spans;
    for (int first : support_first_taps) {
        for (int last : support_last_taps) spans.emplace_back(first, last);
    }
    t.supports.assign(spans.size(), {});
    const auto n_spans = static_cast<std::ptrdiff_t>(spans.size());
#pragma omp parallel for schedule(dynamic)
    for (std::ptrdiff_t k = 0; k < n_spans; ++k) {
        {
            const auto [first, last] = spans[static_cast<std::size_t>(k)];
            std::vector<cf64> gp = g;
            for (int a = 0; a < L_ch; ++a) {
                const int m = a - N1;
                const int outside = std::max(m - last, 0) + std::max(first - m, 0);
                const double prior = std::exp(-outside / support_prior_decay_taps);
                gp[static_cast<std::size_t>(a * L_ch + a)] += support_prior_weight * diag_max / prior;
            }
            std::vector<cf64> inv;
            (void)hermitian_pinv(gp, L_ch, 0.0, inv);  // positive definite: the full inverse
            receiver_tables::channel_support s;
            s.first_tap = first;
            s.last_tap = last;
            s.G = times_x_herm(inv, t.X, M);
            t.supports[static_cast<std::size_t>(k)] = std::move(s);
        }
    }
    // Widest last: first tap -N1, last tap N2.
    std::stable_sort(t.supports.begin(), t.supports.end(), [](const auto& x, const auto& y) {
        return (x.last_tap - x.first_tap) < (y.last_tap - y.first_tap);
    });
    const auto& wide = t.supports.back();
    if (wide.first_tap != -N1 || wide.last_tap != N2) throw std::logic_error("receiver tables: no full-width channel support");
    // Noise covariances G G^H weighted by R_x (received_power's weighting).
    auto rxw = [](int a, int b) { return soqpsk_autocorrelation_at(b - a); };  // R_x(b - a)
    auto gram = [&](const std::vector<cf64>& G) {
        std::vector<cf64> c(L_ch * L_ch, 0.0);
        for (int a = 0; a < L_ch; ++a)
            for (int b = 0; b < L_ch; ++b) {
                cf64 v = 0.0;
                for (std::size_t i = 0; i < M; ++i) v += G[static_cast<std::size_t>(a) * M + i] * std::conj(G[static_cast<std::size_t>(b) * M + i]);
                c[static_cast<std::size_t>(a * L_ch + b)] = v;
            }
        return c;
    };
    const auto cw = gram(wide.G);
    const auto n_supports = static_cast<std::ptrdiff_t>(t.supports.size());
#pragma omp parallel for schedule(dynamic)
    for (std::ptrdiff_t k = 0; k < n_supports; ++k) {
        auto& s = t.supports[static_cast<std::size_t>(k)];
        const auto c = gram(s.G);
        double all = 0.0, outside = 0.0;
        for (int a = 0; a < L_ch; ++a) {
            for (int b = 0; b < L_ch; ++b) {
                all += (c[static_cast<std::size_t>(a * L_ch + b)] * rxw(a, b)).real();
                const int ma = a - N1, mb = b - N1;
                const bool out_a = ma < s.first_tap || ma > s.last_tap, out_b = mb < s.first_tap || mb > s.last_tap;
                if (out_a && out_b) outside += (cw[static_cast<std::size_t>(a * L_ch + b)] * rxw(a, b)).real();
            }
        }
        s.noise_gain = all;
        s.outside_noise_gain = outside;
    }
}

void build_channel_estimator(receiver_tables& t)
{
    t.obs_first = t.known_first + N2;
    t.obs_last = t.known_last - N1;
    t.M = static_cast<std::size_t>(t.obs_last - t.obs_first + 1);
    const std::size_t M = t.M;
    t.X.assign(M * L_ch, 0.0);
    for (std::size_t i = 0; i < M; ++i) {
        const int n = t.obs_first + static_cast<int>(i);
        for (int m = -N1; m <= N2; ++m) {
            t.X[i * L_ch + static_cast<std::size_t>(m + N1)] = t.x_known[static_cast<std::size_t>(n - m - t.known_first)];
        }
    }
    // G = X^H X (38 x 38), then X_lpi = G^-1 X^H column by column.
    std::vector<cf64> g(L_ch * L_ch, 0.0);
    for (int a = 0; a < L_ch; ++a) {
        for (int b = 0; b < L_ch; ++b) {
            cf64 s = 0.0;
            for (std::size_t i = 0; i < M; ++i) s += std::conj(t.X[i * L_ch + a]) * t.X[i * L_ch + b];
            g[static_cast<std::size_t>(a * L_ch + b)] = s;
        }
    }
    // SOQPSK-TG has almost no energy near half the sample rate and the preamble is periodic,
    // so some directions of h are not observed by the known samples: plain least squares
    // amplifies noise there thousands of times, and a ridge biases the well-observed band
    // edges. A truncated pseudo-inverse keeps the observed directions exactly and drops the
    // rest (docs/SIGNAL-CHAIN.md has the measurements).
    std::vector<cf64> ginv;
    t.channel_rank = hermitian_pinv(g, L_ch, channel_pinv_threshold, ginv);
    t.X_lpi = times_x_herm(ginv, t.X, M);
    build_support_estimators(t, g);
    // rho = trace(I - X X_lpi) = M - rank of the pseudo-inverse.
    double tr = 0.0;
    for (std::size_t i = 0; i < M; ++i) {
        cf64 d = 0.0;
        for (int a = 0; a < L_ch; ++a) d += t.X[i * L_ch + static_cast<std::size_t>(a)] * t.X_lpi[static_cast<std::size_t>(a) * M + i];
        tr += d.real();
    }
    t.rho = static_cast<double>(M) - tr;
}

/// h_NO by regularized least squares on the ideal waveform: choose the 21 complex taps so
/// that, at the decision instants, Re{z} (even bits) and Im{z} (odd bits) best match +-1,
/// with the noise of a design Eb/N0 in the cost (an MMSE design; it keeps the noise gain of
/// the filter in check). The decision delay is the one with the smallest cost.
void design_detection_filter(receiver_tables& t)
{
    constexpr double design_ebn0_db = 8.0;
    const double sigma_c2 = 2.0 / std::pow(10.0, design_ebn0_db / 10.0);  // complex noise var
    std::mt19937_64 rng(tables_seed + 1);
    constexpr std::size_t nbits = 16384;
    std::vector<std::uint8_t> bits(nbits);
    for (auto& b : bits) b = static_cast<std::uint8_t>(rng() & 1);
    const auto x = modulate_bits(bits);
    const int off = static_cast<int>(soqpsk_modulator::delay_samples);
    constexpr int nu = 2 * L_hno;  // real unknowns: Re h_j, Im h_j

    // Each delay's design is independent: computed in parallel, then the best chosen in delay
    // order (the first of equal costs), so the result does not depend on the threads.
    constexpr int delay_lo = -2, delay_hi = 8;
    struct design {
        bool ok = false;
        double cost = 0.0;
        std::vector<cf64> sol;
    };
    std::vector<design> designs(delay_hi - delay_lo + 1);
#pragma omp parallel for schedule(dynamic)
    for (int delay = delay_lo; delay <= delay_hi; ++delay) {
        std::vector<double> ata(nu * nu, 0.0), atb(nu, 0.0);
        std::size_t rows = 0;
        double bb = 0.0;
        std::vector<double> row(nu);
        for (std::size_t k = 32; k + 32 < nbits; ++k) {
            const int n = 2 * static_cast<int>(k) + off + delay;
            const bool even = k % 2 == 0;
            // z(n) = sum_j h_j x(n - j). Re z = sum hr xr - hi xi; Im z = sum hr xi + hi xr.
            for (int j = -hno_half; j <= hno_half; ++j) {
                const cf64 s = x[static_cast<std::size_t>(n - j)];
                const auto jj = static_cast<std::size_t>(j + hno_half);
                if (even) { row[jj] = s.real(); row[L_hno + jj] = -s.imag(); }
                else      { row[jj] = s.imag(); row[L_hno + jj] = s.real(); }
            }
            const double target = bits[k] ? 1.0 : -1.0;
            for (int a = 0; a < nu; ++a) {
                atb[static_cast<std::size_t>(a)] += row[static_cast<std::size_t>(a)] * target;
                for (int b = 0; b < nu; ++b) ata[static_cast<std::size_t>(a * nu + b)] += row[static_cast<std::size_t>(a)] * row[static_cast<std::size_t>(b)];
            }
            bb += 1.0;
            ++rows;
        }
        // Noise: the real part of sum_j h_j w(n-j) has variance ||h||^2 sigma_c2 / 2.
        for (int a = 0; a < nu; ++a) ata[static_cast<std::size_t>(a * nu + a)] += static_cast<double>(rows) * sigma_c2 / 2.0;
        std::vector<cf64> ac(ata.begin(), ata.end());
        std::vector<cf64> sol(atb.begin(), atb.end());
        if (!cholesky_banded(ac, nu, nu - 1).ok) continue;
        cholesky_solve_banded(ac, nu, nu - 1, sol);
        // cost = (b'b - 2 h'A'b + h'(A'A + reg)h) / rows = (b'b - h' A'b) / rows at the optimum
        double hb = 0.0;
        for (int a = 0; a < nu; ++a) hb += sol[static_cast<std::size_t>(a)].real() * atb[static_cast<std::size_t>(a)];
        auto& d = designs[static_cast<std::size_t>(delay - delay_lo)];
        d.cost = (bb - hb) / static_cast<double>(rows);
        d.sol = std::move(sol);
        d.ok = true;
    }
    double best_cost = 1e300;
    for (int delay = delay_lo; delay <= delay_hi; ++delay) {
        const auto& d = designs[static_cast<std::size_t>(delay - delay_lo)];
        if (!d.ok || !(d.cost < best_cost)) continue;
        best_cost = d.cost;
        t.decision_delay = delay;
        for (int j = 0; j < L_hno; ++j) {
            t.h_no[static_cast<std::size_t>(j)] = cf64(d.sol[static_cast<std::size_t>(j)].real(), d.sol[static_cast<std::size_t>(L_hno + j)].real());
        }
    }
    // Noise-free RMS error of the chosen design, for the record.
    double err2 = 0.0;
    std::size_t cnt = 0;
    for (std::size_t k = 32; k + 32 < nbits; ++k) {
        const int n = 2 * static_cast<int>(k) + off + t.decision_delay;
        cf64 z = 0.0;
        for (int j = -hno_half; j <= hno_half; ++j) z += t.h_no[static_cast<std::size_t>(j + hno_half)] * x[static_cast<std::size_t>(n - j)];
        const double v = k % 2 == 0 ? z.real() : z.imag();
        const double d = v - (bits[k] ? 1.0 : -1.0);
        err2 += d * d;
        ++cnt;
    }
    t.hno_design_residual = std::sqrt(err2 / static_cast<double>(cnt));
}

/// Psi: averaged periodogram (Hann window, 50% overlap) of the modulated random bits on the
/// filter's FFT grid, normalized to mean 1.
void build_psd(receiver_tables& t)
{
    const std::size_t n = t.fft_size;
    constexpr std::size_t segments = 48;
    std::mt19937_64 rng(tables_seed + 2);
    std::vector<std::uint8_t> bits((segments + 1) * n / 4 + 64);
    for (auto& b : bits) b = static_cast<std::uint8_t>(rng() & 1);
    const auto x = modulate_bits(bits);
    fft_plan plan(n, fft_plan::direction::forward);
    fft_buffer buf(n);
    t.psi.assign(n, 0.0);
    for (std::size_t s = 0; s < segments; ++s) {
        const std::size_t off = 64 + s * n / 2;
        for (std::size_t i = 0; i < n; ++i) {
            const double w = 0.5 - 0.5 * std::cos(2.0 * std::numbers::pi * static_cast<double>(i) / static_cast<double>(n));
            buf[i] = x[off + i] * w;
        }
        plan.execute(buf.data(), buf.data());
        for (std::size_t i = 0; i < n; ++i) t.psi[i] += std::norm(buf[i]);
    }
    // Light smoothing (+-8 bins, circular) removes the periodogram's variance; the spectrum
    // itself varies on a scale of hundreds of bins at this FFT size.
    std::vector<double> sm(n, 0.0);
    constexpr int half = 8;
    for (std::size_t i = 0; i < n; ++i) {
        double s = 0.0;
        for (int d = -half; d <= half; ++d) s += t.psi[(i + n + static_cast<std::size_t>(d + static_cast<int>(n))) % n];
        sm[i] = s / (2 * half + 1);
    }
    double mean = 0.0;
    for (double v : sm) mean += v;
    mean /= static_cast<double>(n);
    for (std::size_t i = 0; i < n; ++i) t.psi[i] = std::max(sm[i] / mean, 1e-9);
}

/// Where the detector's metric peaks relative to the packet start (noise-free, three packets).
void find_template_offset(receiver_tables& t)
{
    std::mt19937_64 rng(tables_seed + 3);
    const auto known = wf::known_packet_bits();
    std::vector<std::uint8_t> bits;
    for (int p = 0; p < 3; ++p) {
        bits.insert(bits.end(), known.begin(), known.end());
        for (std::size_t i = 0; i < wf::data_bits; ++i) bits.push_back(static_cast<std::uint8_t>(rng() & 1));
    }
    const auto x = modulate_bits(bits);
    std::vector<cf32> r(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) r[i] = cf32(static_cast<float>(x[i].real()), static_cast<float>(x[i].imag()));
    std::vector<double> m(r.size() - detector_span + 1);
    preamble_metric(r, m, t.preamble_template);
    const std::size_t start = wf::L_pkt + soqpsk_modulator::delay_samples;  // second packet
    std::size_t best = start - 64;
    for (std::size_t u = start - 64; u < start + 64; ++u) {
        if (m[u] > m[best]) best = u;
    }
    t.template_offset = static_cast<int>(best) - static_cast<int>(start);
}

std::unique_ptr<receiver_tables> build(std::size_t fft_size)
{
    auto t = std::make_unique<receiver_tables>();
    t->fft_size = fft_size;
    t->preamble_template = quantized_preamble_template();
    // Three independent parts at once (each writes its own fields): the detection filter and
    // the spectrum beside the channel estimators (the longest), then the template offset.
    auto filter = std::async(std::launch::async, [&] { design_detection_filter(*t); });
    auto psd = std::async(std::launch::async, [&] { build_psd(*t); });
    find_known_samples(*t);
    build_channel_estimator(*t);
    find_template_offset(*t);
    filter.get();
    psd.get();
    return t;
}

}  // namespace

const receiver_tables& get_receiver_tables(std::size_t fft_size)
{
    static std::mutex mu;
    static std::map<std::size_t, std::unique_ptr<receiver_tables>> cache;
    std::lock_guard lock(mu);
    auto& slot = cache[fft_size];
    if (!slot) {
        slot = build(fft_size);
    }
    return *slot;
}

}  // namespace paq::dsp
