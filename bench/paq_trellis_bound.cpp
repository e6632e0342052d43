// paq-trellis-bound: what the trellis detector's model leaves of SOQPSK-TG, and what sequence
// detection can reach with perfect synchronization (docs/SIGNAL-CHAIN.md, "Trellis
// detection"). A measurement, not a receiver: random bits through the project's modulator, the
// carrier phase and bit timing known, noise at a given Eb/N0, optionally the detector's
// low-pass (dsp::trellis::lowpass_gain). It reports
//   - per model, the power it leaves unexplained relative to the signal: the principal-pulse
//     linear model of earlier versions (13 taps per axis, least squares), and tables over a
//     window of W bits for each W asked (the mean sample pair per pattern);
//   - per table window and Eb/N0, the BER of a hard-decision Viterbi over 2^(W-1) states with
//     that table as its model (fitted on the noiseless signal): with a window long enough to
//     hold the whole signal (W = 7 leaves -43 dB without the low-pass) this is the maximum-
//     likelihood sequence detector of SOQPSK-TG sampled at 2 samples per bit, the bound the
//     receiver's trellis (5 bits, synchronized from the signal) is measured against.
// The BER of OQPSK, Q(sqrt(2 Eb/N0)), is printed beside it. With --preset, the signal first
// goes through one of paq-sim's fixed channels (bench/channel_signal.hpp) and the tables are
// fitted on what is received: a table over W bits then also holds the channel's echoes within
// its window, and the Viterbi detector over it is the maximum-likelihood sequence detector of
// the channel and the modulation together once W spans both (docs/BER-RESULTS.md, "What an
// equalizer can reach on edwards3").
#include "bench/channel_signal.hpp"
#include "dsp/linalg.hpp"
#include "dsp/soqpsk.hpp"
#include "dsp/trellis.hpp"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <numbers>
#include <random>
#include <stdexcept>
#include <vector>

namespace {

using cd = std::complex<double>;

/// Bit k's OQPSK-like instant is modulated sample 2k + instant_delay (the frequency pulse's
/// centre is 2k + 8, the instant half a bit later), on the axes after turning by -135 degrees
/// (the modulator's initial phase 0; found by correlation, the receiver finds it from the
/// preamble).
constexpr long instant_delay = 10;
constexpr double axes_turn_rad = -0.75 * std::numbers::pi;

/// y = x low-passed by dsp::trellis::lowpass_gain (a 97-tap FIR from the gain).
std::vector<cd> low_pass(const std::vector<cd>& x)
{
    constexpr int half = 48;
    constexpr int grid = 4096;
    std::vector<double> h(2 * half + 1);
    for (int n = -half; n <= half; ++n) {
        double s = 0.0;
        for (int i = 0; i < grid; ++i) {
            const double f = (i - grid / 2) / static_cast<double>(grid);
            s += paq::dsp::trellis::lowpass_gain(f) * std::cos(2.0 * std::numbers::pi * f * n);
        }
        h[static_cast<std::size_t>(n + half)] = s / grid;
    }
    std::vector<cd> y(x.size());
    const long len = static_cast<long>(x.size());
    for (long m = 0; m < len; ++m) {
        cd acc = 0.0;
        for (int n = -half; n <= half; ++n) {
            const long q = m - n;
            if (q >= 0 && q < len) acc += h[static_cast<std::size_t>(n + half)] * x[static_cast<std::size_t>(q)];
        }
        y[static_cast<std::size_t>(m)] = acc;
    }
    return y;
}

struct signal {
    std::vector<int> a;   ///< the bits, +-1
    std::vector<cd> clean;  ///< y[m] = received sample m + instant_delay (+ the channel interpolator's delay), turned onto the axes (low-passed if asked)
};

/// The table over bits a_{k-before} .. a_{k+after} for each parity of k and sample of the pair.
struct table_model {
    int before = 0, after = 0;
    std::vector<cd> t;  ///< [(parity * 2 + d) * 2^W + pattern]
    [[nodiscard]] int window() const { return before + 1 + after; }
    [[nodiscard]] int pattern(const std::vector<int>& a, long k) const
    {
        int s = 0;
        for (long i = k - before; i <= k + after; ++i) s = (s << 1) | (a[static_cast<std::size_t>(i)] > 0 ? 1 : 0);
        return s;
    }
    [[nodiscard]] cd at(long k, int d, int pattern) const
    {
        return t[static_cast<std::size_t>(((k & 1) * 2 + d) * (1 << window()) + pattern)];
    }
};

constexpr long guard = 40;  ///< bits left out at either end (the modulator's start and the filter's edges)

table_model fit_table(const signal& s, int before, int after, double& residual_db)
{
    table_model m{before, after, {}};
    const int patterns = 1 << m.window();
    m.t.assign(static_cast<std::size_t>(4 * patterns), cd{});
    std::vector<long> count(static_cast<std::size_t>(2 * patterns), 0);
    const long n = static_cast<long>(s.a.size());
    for (long k = guard; k < n - guard; ++k) {
        const int p = m.pattern(s.a, k);
        for (int d = 0; d < 2; ++d) m.t[static_cast<std::size_t>(((k & 1) * 2 + d) * patterns + p)] += s.clean[static_cast<std::size_t>(2 * k + d)];
        ++count[static_cast<std::size_t>((k & 1) * patterns + p)];
    }
    for (int par = 0; par < 2; ++par) {
        for (int p = 0; p < patterns; ++p) {
            const long c = count[static_cast<std::size_t>(par * patterns + p)];
            for (int d = 0; d < 2; ++d) {
                if (c > 0) m.t[static_cast<std::size_t>((par * 2 + d) * patterns + p)] /= static_cast<double>(c);
            }
        }
    }
    double se = 0.0, sp = 0.0;
    for (long k = guard; k < n - guard; ++k) {
        for (int d = 0; d < 2; ++d) {
            const cd y = s.clean[static_cast<std::size_t>(2 * k + d)];
            se += std::norm(y - m.at(k, d, m.pattern(s.a, k)));
            sp += std::norm(y);
        }
    }
    residual_db = 10.0 * std::log10(se / sp);
    return m;
}

/// The linear model of earlier versions: per axis, 13 taps over the axis's bits.
double linear_residual_db(const signal& s)
{
    constexpr int half = 6, taps = 2 * half + 1;
    const long n = static_cast<long>(s.a.size());
    double se = 0.0, sp = 0.0;
    for (int axis = 0; axis < 2; ++axis) {
        auto comp = [&](long m) { return axis == 0 ? s.clean[static_cast<std::size_t>(m)].real() : s.clean[static_cast<std::size_t>(m)].imag(); };
        auto regressors = [&](long m, double* r) {
            for (int t = 0; t < taps; ++t) {
                r[t] = 0.0;
                const long md = m - (t - half);
                if (md % 2 != 0) continue;
                const long k = md / 2;
                if (k % 2 != axis) continue;
                r[t] = s.a[static_cast<std::size_t>(k)];
            }
        };
        std::vector<paq::cf64> g(taps * taps, 0.0), rhs(taps, 0.0);  // real, solved by the project's Cholesky
        double r[taps];
        for (long m = 2 * guard; m < 2 * (n - guard); ++m) {
            regressors(m, r);
            const double y = comp(m);
            for (int t = 0; t < taps; ++t) {
                rhs[static_cast<std::size_t>(t)] += r[t] * y;
                for (int u = 0; u < taps; ++u) g[static_cast<std::size_t>(t * taps + u)] += r[t] * r[u];
            }
        }
        for (int t = 0; t < taps; ++t) {
            if (g[static_cast<std::size_t>(t * taps + t)] == 0.0) g[static_cast<std::size_t>(t * taps + t)] = 1.0;
        }
        if (!paq::dsp::cholesky_banded(g, taps, taps - 1).ok) throw std::runtime_error("the linear model's normal equations are singular");
        paq::dsp::cholesky_solve_banded(g, taps, taps - 1, rhs);
        for (long m = 2 * guard; m < 2 * (n - guard); ++m) {
            regressors(m, r);
            double pred = 0.0;
            for (int t = 0; t < taps; ++t) pred += r[t] * rhs[static_cast<std::size_t>(t)].real();
            se += (comp(m) - pred) * (comp(m) - pred);
            sp += comp(m) * comp(m);
        }
    }
    return 10.0 * std::log10(se / sp);
}

/// Hard-decision Viterbi with the table as the model; returns {errors, bits counted}.
std::pair<long, long> viterbi(const table_model& m, const std::vector<cd>& y, const std::vector<int>& a)
{
    const int memory = m.window() - 1, states = 1 << memory;
    const long n = static_cast<long>(a.size());
    const long k0 = guard, j_begin = k0 + m.after, j_end = n - guard;
    constexpr double inf = std::numeric_limits<double>::infinity();
    std::vector<double> metric(static_cast<std::size_t>(states), inf), next(static_cast<std::size_t>(states));
    std::vector<std::uint8_t> survivor(static_cast<std::size_t>((j_end - j_begin) * states));
    int start = 0;
    for (long i = k0 - m.before; i < k0 + m.after; ++i) start = (start << 1) | (a[static_cast<std::size_t>(i)] > 0 ? 1 : 0);
    metric[static_cast<std::size_t>(start)] = 0.0;  // the bits before k0 + after are known
    for (long j = j_begin; j < j_end; ++j) {
        const long k = j - m.after;
        const cd x0 = y[static_cast<std::size_t>(2 * k)], x1 = y[static_cast<std::size_t>(2 * k + 1)];
        std::fill(next.begin(), next.end(), inf);
        for (int s = 0; s < states; ++s) {
            if (metric[static_cast<std::size_t>(s)] == inf) continue;
            for (int b = 0; b < 2; ++b) {
                const int seq = (s << 1) | b, ns = seq & (states - 1);
                const double bm = std::norm(x0 - m.at(k, 0, seq)) + std::norm(x1 - m.at(k, 1, seq));
                const double c = metric[static_cast<std::size_t>(s)] + bm;
                if (c < next[static_cast<std::size_t>(ns)]) {
                    next[static_cast<std::size_t>(ns)] = c;
                    survivor[static_cast<std::size_t>((j - j_begin) * states + ns)] = static_cast<std::uint8_t>(s);
                }
            }
        }
        metric.swap(next);
    }
    int s = static_cast<int>(std::min_element(metric.begin(), metric.end()) - metric.begin());
    long errors = 0, counted = 0;
    for (long j = j_end - 1; j >= j_begin; --j) {
        if (j < j_end - 4 * m.window()) {  // the last decisions lack their later samples
            ++counted;
            if (((s & 1) != 0 ? 1 : -1) != a[static_cast<std::size_t>(j)]) ++errors;
        }
        s = survivor[static_cast<std::size_t>((j - j_begin) * states + s)];
    }
    return {errors, counted};
}

}  // namespace

int main(int argc, char** argv)
{
    CLI::App app{"paq-trellis-bound: the trellis detector's model error, and the BER of sequence detection of SOQPSK-TG "
                 "with perfect synchronization (docs/SIGNAL-CHAIN.md, \"Trellis detection\")"};
    long bits = 1'000'000;
    std::vector<double> ebn0;
    std::vector<int> windows{5, 7};
    bool lowpass = true;
    std::uint64_t seed = 77;
    std::string preset = "awgn";
    app.add_option("--bits", bits, "Random bits per Eb/N0 point")->check(CLI::Range(10'000L, 100'000'000L));
    app.add_option("--ebn0-db", ebn0, "Eb/N0 points in dB, comma-separated (none: the model errors only)")->delimiter(',');
    app.add_option("--window", windows, "Table windows W in bits (odd, 3 .. 9; 2^(W-1) states), comma-separated")
        ->delimiter(',')
        ->check(CLI::IsMember({3, 5, 7, 9}));
    app.add_option("--lowpass", lowpass, "Low-pass the signal and noise as the receiver's trellis input (1) or not (0)");
    app.add_option("--seed", seed, "Seed of the bits and the noise");
    app.add_option("--preset", preset, "The channel before the noise (paq-sim's presets whose rays stay put, at 10.3125 Mbit/s)")
        ->check(CLI::IsMember(paq::bench::fixed_preset_names()));
    CLI11_PARSE(app, argc, argv);

    std::mt19937_64 rng(seed);
    signal s;
    s.a.resize(static_cast<std::size_t>(bits));
    std::vector<std::uint8_t> b(static_cast<std::size_t>(bits));
    for (std::size_t k = 0; k < b.size(); ++k) {
        b[k] = static_cast<std::uint8_t>(rng() & 1u);
        s.a[k] = b[k] != 0 ? 1 : -1;
    }
    // Through the preset's rays at the default bit rate (their delays are in ns); awgn: the
    // modulated samples as they are.
    const bool channel = preset != "awgn";
    const auto modulated = paq::dsp::modulate_bits(b, 0.0);
    const auto x = channel ? paq::bench::through_preset(modulated, preset, 10.3125e6) : modulated;
    const std::size_t delay = instant_delay + (channel ? paq::bench::interp_half : 0);
    const cd turn = std::polar(1.0, axes_turn_rad);
    std::vector<cd> on_axes(2 * b.size());
    for (std::size_t m = 0; m < on_axes.size(); ++m) {
        const std::size_t q = m + delay;
        on_axes[m] = q < x.size() ? x[q] * turn : cd{};
    }
    s.clean = lowpass ? low_pass(on_axes) : on_axes;

    std::printf("SOQPSK-TG, %ld bits, seed %llu, %s, %s\n", bits, static_cast<unsigned long long>(seed), preset.c_str(),
                lowpass ? "low-passed as the trellis's input" : "not low-passed");
    std::printf("model error (power left unexplained / signal power):\n");
    if (!channel) std::printf("  linear, principal pulse, 13 taps per axis: %6.2f dB\n", linear_residual_db(s));
    std::vector<table_model> tables;
    for (const int w : windows) {
        double res = 0.0;
        tables.push_back(fit_table(s, w / 2, w / 2, res));
        std::printf("  table over %d bits (%3d states):          %6.2f dB\n", w, 1 << (w - 1), res);
    }
    for (std::size_t i = 0; i < ebn0.size(); ++i) {
        // Eb = 2 samples of unit power; complex noise variance N0 per sample.
        const double n0 = 2.0 / std::pow(10.0, ebn0[i] / 10.0);
        std::normal_distribution<double> g(0.0, std::sqrt(n0 / 2.0));
        std::vector<cd> noisy(on_axes.size());
        for (std::size_t m = 0; m < noisy.size(); ++m) noisy[m] = on_axes[m] + cd(g(rng), g(rng));
        if (lowpass) noisy = low_pass(noisy);
        const double theory = 0.5 * std::erfc(std::sqrt(std::pow(10.0, ebn0[i] / 10.0)));
        for (const auto& t : tables) {
            const auto [errors, counted] = viterbi(t, noisy, s.a);
            std::printf("Eb/N0 %5.2f dB, table over %d bits: BER %.3e (%ld errors of %ld bits); OQPSK theory %.3e\n", ebn0[i],
                        t.window(), static_cast<double>(errors) / static_cast<double>(counted), errors, counted, theory);
        }
    }
    return 0;
}
