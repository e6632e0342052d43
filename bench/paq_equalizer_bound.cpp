// paq-equalizer-bound: what a channel preset costs a linear equalizer, and what it costs
// receivers that also use other bits' values (docs/BER-RESULTS.md, "What an equalizer can
// reach on edwards3"). A measurement, not a receiver: random bits through the project's
// modulator (2 samples a bit), the preset's rays as the simulator applies them
// (paq::sim::add_fractional_delay, received power 1), and white noise at a given Eb/N0 counted
// in the statistics, not drawn. Per bit k and per parity of k (SOQPSK-TG with the IRIG precoder
// puts even bits on one axis and odd bits on the other), the minimum-mean-square-error
// estimate of a_k = +-1 from
//   - le:    the received samples within --span bits of bit k, real and imaginary parts apart
//            (a widely linear estimate: the best any linear equalizer followed by a detector
//            that takes one axis can do, whatever its taps);
//   - le+ic: le's output and every other bit within --span bits known (le's filter kept, the
//            interference its output holds taken out exactly: what iterating between the
//            detector and the decoder gains behind a fixed linear equalizer);
//   - dfe:   the samples and the --span bits before k known (a decision-feedback equalizer
//            with correct decisions);
//   - mfb:   the samples and every other bit within --span bits known (the matched-filter
//            bound: what iterative detection and decoding from the received samples approaches
//            once the decoder's beliefs are right).
// Each is solved from the exact second moments (the noise's added to the samples' diagonal),
// and reported as the unbiased signal-to-noise ratio 1 / mse - 1. The same is computed for the
// awgn preset, so that the modulation's own partial response (SOQPSK-TG is not a linear
// modulation) counts on both sides: the "cost" column is the channel's cost in dB for each
// structure.
#include "config/cli.hpp"
#include "dsp/linalg.hpp"
#include "dsp/soqpsk.hpp"
#include "sim/simulator.hpp"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdint>
#include <cstdio>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using cd = std::complex<double>;

/// Bit k's OQPSK-like instant is modulated sample 2k + instant_delay (bench/paq_trellis_bound.cpp).
constexpr long instant_delay = 10;
/// The channel's interpolator: taps 0 .. 2 interp_half, zero delay at interp_half.
constexpr int interp_half = 16;

/// The received signal of `preset` at 2 samples a bit, power 1, aligned so that bit k's instant
/// (through the channel's zero-delay ray) is sample 2k + instant_delay + interp_half.
std::vector<cd> received(const std::vector<cd>& x, const std::string& preset, double bit_rate_hz)
{
    const auto ch = paq::sim::channel_preset_by_name(preset);
    if (ch.flight) throw std::invalid_argument("the flight preset's rays change over time; choose a fixed one");
    double longest = 0.0;
    for (const auto& r : ch.rays) longest = std::max(longest, r.delay_ns * 1e-9 * 2.0 * bit_rate_hz);
    std::vector<cd> taps(static_cast<std::size_t>(2 * interp_half + 2 + static_cast<int>(std::ceil(longest))), cd{});
    for (const auto& r : ch.rays) paq::sim::add_fractional_delay(taps, interp_half, r.delay_ns * 1e-9 * 2.0 * bit_rate_hz, std::polar(r.amplitude, r.phase_rad));
    std::vector<cd> y(x.size(), cd{});
    for (std::size_t m = 0; m < x.size(); ++m) {
        cd acc{};
        for (std::size_t t = 0; t < taps.size() && t <= m; ++t) acc += taps[t] * x[m - t];
        y[m] = acc;
    }
    double p = 0.0;
    for (const auto& v : y) p += std::norm(v);
    const double s = 1.0 / std::sqrt(p / static_cast<double>(y.size()));
    for (auto& v : y) v *= s;
    return y;
}

/// Second moments per parity of the regressors [samples (real and imaginary parts), the bits
/// 1 .. span before k, the bits 1 .. span after k] with each other and with a_k, over the bits
/// counted, without the noise. Every structure's regressors are a leading block of these (le:
/// the samples; dfe: and the bits before) or made from them (le+ic).
struct moments {
    int samples = 0, span = 0;
    std::vector<double> rr[2], ra[2];
    [[nodiscard]] int size() const { return 2 * samples + 2 * span; }
    /// Entry (u, v) of parity q's second moments, with the noise of variance n0 / 2 per real
    /// component on the samples.
    [[nodiscard]] double at(int q, int u, int v, double n0) const
    {
        return rr[q][static_cast<std::size_t>(u * size() + v)] + (u == v && u < 2 * samples ? n0 / 2.0 : 0.0);
    }
};

moments measure(const std::vector<cd>& y, const std::vector<int>& a, int span)
{
    moments m;
    const int half = 2 * span;  // samples either side of the instant
    m.samples = 2 * half + 1;
    m.span = span;
    const int n = m.size();
    long count[2] = {0, 0};
    for (int q = 0; q < 2; ++q) {
        m.rr[q].assign(static_cast<std::size_t>(n * n), 0.0);
        m.ra[q].assign(static_cast<std::size_t>(n), 0.0);
    }
    std::vector<double> r(static_cast<std::size_t>(n));
    const long bits = static_cast<long>(a.size());
    const long guard = 4L * span + 40;
    for (long k = guard; k < bits - guard; ++k) {
        const long c = 2 * k + instant_delay + interp_half;
        for (int j = -half; j <= half; ++j) {
            const cd v = y[static_cast<std::size_t>(c + j)];
            r[static_cast<std::size_t>(2 * (j + half))] = v.real();
            r[static_cast<std::size_t>(2 * (j + half) + 1)] = v.imag();
        }
        for (int d = 1; d <= span; ++d) {
            r[static_cast<std::size_t>(2 * m.samples + d - 1)] = a[static_cast<std::size_t>(k - d)];
            r[static_cast<std::size_t>(2 * m.samples + span + d - 1)] = a[static_cast<std::size_t>(k + d)];
        }
        const int q = static_cast<int>(k & 1);
        auto& rr = m.rr[q];
        for (int u = 0; u < n; ++u) {
            const double ru = r[static_cast<std::size_t>(u)];
            m.ra[q][static_cast<std::size_t>(u)] += ru * a[static_cast<std::size_t>(k)];
            for (int v = 0; v <= u; ++v) rr[static_cast<std::size_t>(u * n + v)] += ru * r[static_cast<std::size_t>(v)];
        }
        ++count[q];
    }
    for (int q = 0; q < 2; ++q) {
        const double inv = 1.0 / static_cast<double>(count[q]);
        for (int u = 0; u < n; ++u) {
            m.ra[q][static_cast<std::size_t>(u)] *= inv;
            for (int v = 0; v <= u; ++v) {
                m.rr[q][static_cast<std::size_t>(u * n + v)] *= inv;
                m.rr[q][static_cast<std::size_t>(v * n + u)] = m.rr[q][static_cast<std::size_t>(u * n + v)];
            }
        }
    }
    return m;
}

/// x solving g x = rhs (g symmetric positive definite, n x n, row-major), by the project's
/// Cholesky factorization.
std::vector<double> solve(std::vector<double> g, std::vector<double> rhs)
{
    const std::size_t n = rhs.size();
    std::vector<paq::cf64> gc(g.begin(), g.end()), x(rhs.begin(), rhs.end());
    if (!paq::dsp::cholesky_banded(gc, n, n - 1).ok) throw std::runtime_error("the normal equations are singular");
    paq::dsp::cholesky_solve_banded(gc, n, n - 1, x);
    std::vector<double> out(n);
    for (std::size_t i = 0; i < n; ++i) out[i] = x[i].real();
    return out;
}

double dot(const std::vector<double>& a, const std::vector<double>& b)
{
    double s = 0.0;
    for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
    return s;
}

enum class structure { le, le_ic, dfe, mfb };
constexpr const char* structure_names[] = {"le", "le+ic", "dfe", "mfb"};

/// The MMSE estimate's mean squared error from regressors whose second moments are g (with
/// the noise) and whose correlations with a_k are p.
double mmse(const std::vector<double>& g, const std::vector<double>& p) { return 1.0 - dot(p, solve(g, p)); }

/// The unbiased SNR (linear) of structure s's estimate of a_k, the parities' mean squared
/// errors averaged.
double unbiased_snr(const moments& m, structure s, double n0)
{
    const int ns = 2 * m.samples;
    double mse = 0.0;
    for (int q = 0; q < 2; ++q) {
        // The leading block of n regressors.
        auto block = [&](int n, std::vector<double>& g, std::vector<double>& p) {
            g.assign(static_cast<std::size_t>(n * n), 0.0);
            p.assign(m.ra[q].begin(), m.ra[q].begin() + n);
            for (int u = 0; u < n; ++u) {
                for (int v = 0; v < n; ++v) g[static_cast<std::size_t>(u * n + v)] = m.at(q, u, v, n0);
            }
        };
        std::vector<double> g, p;
        switch (s) {
        case structure::le: block(ns, g, p); break;
        case structure::dfe: block(ns + m.span, g, p); break;
        case structure::mfb: block(m.size(), g, p); break;
        case structure::le_ic: {
            // z = w . samples with le's w; then the regressors [z, every bit].
            block(ns, g, p);
            const auto w = solve(g, p);
            const int nb = 2 * m.span, n = 1 + nb;
            std::vector<double> gz(static_cast<std::size_t>(n * n), 0.0), pz(static_cast<std::size_t>(n), 0.0);
            double zz = 0.0;
            for (int u = 0; u < ns; ++u) {
                for (int v = 0; v < ns; ++v) zz += w[static_cast<std::size_t>(u)] * w[static_cast<std::size_t>(v)] * m.at(q, u, v, n0);
            }
            gz[0] = zz;
            pz[0] = dot(w, p);
            for (int j = 0; j < nb; ++j) {
                double zb = 0.0;
                for (int u = 0; u < ns; ++u) zb += w[static_cast<std::size_t>(u)] * m.at(q, u, ns + j, n0);
                gz[static_cast<std::size_t>(1 + j)] = gz[static_cast<std::size_t>((1 + j) * n)] = zb;
                for (int l = 0; l < nb; ++l) gz[static_cast<std::size_t>((1 + j) * n + 1 + l)] = m.at(q, ns + j, ns + l, n0);
                pz[static_cast<std::size_t>(1 + j)] = m.ra[q][static_cast<std::size_t>(ns + j)];
            }
            g = std::move(gz);
            p = std::move(pz);
            break;
        }
        }
        mse += 0.5 * mmse(g, p);
    }
    return 1.0 / mse - 1.0;
}

double db(double v) { return 10.0 * std::log10(v); }

}  // namespace

int main(int argc, char** argv)
{
    CLI::App app{"paq-equalizer-bound: a channel preset's cost in dB to a linear equalizer, a decision-feedback equalizer with correct "
                 "decisions and the matched-filter bound, against the same structures on AWGN (docs/BER-RESULTS.md, \"Coded links\")"};
    std::string preset = "edwards3";
    std::vector<double> ebn0{3.24, 4.24, 5.24};
    long bits = 200'000;
    int span = 12;
    double bit_rate = 10.3125e6;
    std::uint64_t seed = 91;
    std::vector<std::string> fixed;  // the presets whose rays stay put
    for (const auto& n : paq::sim::channel_preset_names()) {
        if (!paq::sim::channel_preset_by_name(n).flight) fixed.push_back(n);
    }
    app.add_option("--preset", preset, "Channel preset (one whose rays stay put)")->check(CLI::IsMember(fixed));
    // CLI11's Range lets NaN through (NaN compares false both ways).
    auto finite_in = [](double lo, double hi) {
        return CLI::Validator(
            [lo, hi](std::string& v) {
                double x = 0.0;
                return CLI::detail::lexical_cast(v, x) && std::isfinite(x) && x >= lo && x <= hi
                           ? std::string()
                           : "must be a number in " + CLI::detail::to_string(lo) + " .. " + CLI::detail::to_string(hi) + ", got '" + v + "'";
            },
            "NUMBER in " + CLI::detail::to_string(lo) + " .. " + CLI::detail::to_string(hi));
    };
    app.add_option("--ebn0-db", ebn0, "Eb/N0 per transmitted bit at the receiver, dB, comma-separated")->delimiter(',')->check(finite_in(-10.0, 40.0));
    app.add_option("--bits", bits, "Random bits the moments are measured over")->check(CLI::Range(20'000L, 10'000'000L));
    app.add_option("--span", span, "Bits either side of bit k the estimates use")->check(CLI::Range(2, 24));
    app.add_option("--bit-rate", bit_rate, "Bit rate in Hz (the rays' delays are in ns)")->check(finite_in(1e6, 30e6));
    app.add_option("--seed", seed, "Seed of the bits");
    paq::cli::conventions(app, "paq-equalizer-bound", "0 measured; 1 a measurement that could not be made; 2 usage error");
    if (const int rc = paq::cli::parse(app, argc, argv); rc >= 0) return rc;

    try {
        std::mt19937_64 rng(seed);
        std::vector<std::uint8_t> b(static_cast<std::size_t>(bits));
        std::vector<int> a(b.size());
        for (std::size_t k = 0; k < b.size(); ++k) {
            b[k] = static_cast<std::uint8_t>(rng() & 1u);
            a[k] = b[k] != 0 ? 1 : -1;
        }
        const auto x = paq::dsp::modulate_bits(b, 0.0);
        const auto y_awgn = received(x, "awgn", bit_rate), y_ch = received(x, preset, bit_rate);
        std::printf("SOQPSK-TG, %ld bits, seed %llu, %.4g bit/s, estimates over +-%d bits; unbiased SNR of a_k's estimate "
                    "(dB) on awgn and %s, and %s's cost (dB)\n",
                    bits, static_cast<unsigned long long>(seed), bit_rate, span, preset.c_str(), preset.c_str());
        std::printf("%-8s %-5s %10s %10s %8s\n", "Eb/N0", "", "awgn", preset.c_str(), "cost");
        const auto ma = measure(y_awgn, a, span), mc = measure(y_ch, a, span);
        for (const auto s : {structure::le, structure::le_ic, structure::dfe, structure::mfb}) {
            for (const double e : ebn0) {
                const double n0 = 2.0 / std::pow(10.0, e / 10.0);  // Eb = 2 samples of power 1
                const double sa = unbiased_snr(ma, s, n0), sc = unbiased_snr(mc, s, n0);
                std::printf("%5.2f dB %-5s %10.2f %10.2f %8.2f\n", e, structure_names[static_cast<int>(s)], db(sa), db(sc), db(sa / sc));
            }
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "paq-equalizer-bound: %s\n", e.what());
        return 1;
    }
    return 0;
}
