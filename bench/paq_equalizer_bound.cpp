// paq-equalizer-bound: what a channel preset costs a linear equalizer, and what it costs
// receivers that also use other bits' values (docs/BER-RESULTS.md, "Coded links"). A
// measurement, not a receiver: random bits through the project's modulator (2 samples a bit),
// the preset's rays as the simulator applies them (paq::sim::add_fractional_delay, received
// power 1), and white noise at a given Eb/N0 counted in the statistics, not drawn. Per bit k
// and per parity of k (SOQPSK-TG with the IRIG precoder puts even bits on one axis and odd bits
// on the other), the minimum-mean-square-error estimate of a_k = +-1 from
//   - le:  the received samples within --span bits of bit k, real and imaginary parts apart (a
//          widely linear estimate: the best any linear equalizer followed by a detector that
//          takes one axis can do, whatever its taps);
//   - dfe: the same samples and the --span bits before k known (a decision-feedback equalizer
//          with correct decisions: the limit of a receiver that cancels what earlier decisions
//          predict);
//   - mfb: the same samples and every other bit within --span bits known (the matched-filter
//          bound: what iterative detection and decoding approaches once the decoder's beliefs
//          are right).
// Each is solved from the exact second moments (the noise's added to the samples' diagonal),
// and reported as the unbiased signal-to-noise ratio 1 / mse - 1. The same is computed for the
// awgn preset, so that the modulation's own partial response (SOQPSK-TG is not a linear
// modulation) counts on both sides: the "loss" columns are the channel's cost in dB for each
// structure.
#include "config/cli.hpp"
#include "dsp/linalg.hpp"
#include "dsp/soqpsk.hpp"
#include "sim/simulator.hpp"

#include <CLI/CLI.hpp>

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

enum class structure { le, dfe, mfb };
constexpr const char* structure_names[] = {"le", "dfe", "mfb"};

/// Second moments per parity for one structure: regressors r (samples first, then known bits),
/// E[r r^T] and E[r a_k] over the bits counted, without the noise.
struct moments {
    int samples = 0, known = 0;
    std::vector<double> rr[2], ra[2];
    long count[2] = {0, 0};
    [[nodiscard]] int size() const { return 2 * samples + known; }
};

moments measure(const std::vector<cd>& y, const std::vector<int>& a, structure s, int span)
{
    moments m;
    const int half = 2 * span;  // samples either side of the instant
    m.samples = 2 * half + 1;
    m.known = s == structure::le ? 0 : s == structure::dfe ? span : 2 * span;
    const int n = m.size();
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
        int i = 2 * m.samples;
        for (int d = 1; d <= span && m.known > 0; ++d) r[static_cast<std::size_t>(i++)] = a[static_cast<std::size_t>(k - d)];
        for (int d = 1; d <= span && s == structure::mfb; ++d) r[static_cast<std::size_t>(i++)] = a[static_cast<std::size_t>(k + d)];
        const int q = static_cast<int>(k & 1);
        auto& rr = m.rr[q];
        for (int u = 0; u < n; ++u) {
            const double ru = r[static_cast<std::size_t>(u)];
            m.ra[q][static_cast<std::size_t>(u)] += ru * a[static_cast<std::size_t>(k)];
            for (int v = 0; v <= u; ++v) rr[static_cast<std::size_t>(u * n + v)] += ru * r[static_cast<std::size_t>(v)];
        }
        ++m.count[q];
    }
    for (int q = 0; q < 2; ++q) {
        const double inv = 1.0 / static_cast<double>(m.count[q]);
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

/// The unbiased SNR (linear) of the MMSE estimate of a_k, averaged over the parities as their
/// mean squared errors: noise of variance n0 / 2 per real component on the samples.
double unbiased_snr(const moments& m, double n0)
{
    const int n = m.size();
    double mse = 0.0;
    for (int q = 0; q < 2; ++q) {
        std::vector<paq::cf64> g(static_cast<std::size_t>(n * n)), w(static_cast<std::size_t>(n));
        for (int u = 0; u < n; ++u) {
            for (int v = 0; v < n; ++v) g[static_cast<std::size_t>(u * n + v)] = m.rr[q][static_cast<std::size_t>(u * n + v)];
            if (u < 2 * m.samples) g[static_cast<std::size_t>(u * n + u)] += n0 / 2.0;
            w[static_cast<std::size_t>(u)] = m.ra[q][static_cast<std::size_t>(u)];
        }
        const auto nu = static_cast<std::size_t>(n);
        if (!paq::dsp::cholesky_banded(g, nu, nu - 1).ok) throw std::runtime_error("the normal equations are singular (no noise?)");
        paq::dsp::cholesky_solve_banded(g, nu, nu - 1, w);
        double pw = 0.0;
        for (int u = 0; u < n; ++u) pw += m.ra[q][static_cast<std::size_t>(u)] * w[static_cast<std::size_t>(u)].real();
        mse += 0.5 * (1.0 - pw);
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
    const CLI::Validator finite_db(
        [](std::string& v) {
            double x = 0.0;
            return CLI::detail::lexical_cast(v, x) && std::isfinite(x) && x >= -10.0 && x <= 40.0 ? std::string()
                                                                                                  : "must be a number in -10 .. 40, got '" + v + "'";
        },
        "DB in -10 .. 40");
    app.add_option("--ebn0-db", ebn0, "Eb/N0 per transmitted bit at the receiver, dB, comma-separated")->delimiter(',')->check(finite_db);
    app.add_option("--bits", bits, "Random bits the moments are measured over")->check(CLI::Range(20'000L, 10'000'000L));
    app.add_option("--span", span, "Bits either side of bit k the estimates use")->check(CLI::Range(2, 24));
    app.add_option("--bit-rate", bit_rate, "Bit rate in Hz (the rays' delays are in ns)")->check(CLI::Range(1e6, 30e6));
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
        const std::vector<cd> xs(x.begin(), x.end());
        const auto y_awgn = received(xs, "awgn", bit_rate), y_ch = received(xs, preset, bit_rate);
        std::printf("SOQPSK-TG, %ld bits, seed %llu, %.4g bit/s, estimates over +-%d bits; unbiased SNR of a_k's estimate "
                    "(dB) on awgn and %s, and %s's cost (dB)\n",
                    bits, static_cast<unsigned long long>(seed), bit_rate, span, preset.c_str(), preset.c_str());
        std::printf("%-8s %-5s %10s %10s %8s\n", "Eb/N0", "", "awgn", preset.c_str(), "cost");
        for (const auto s : {structure::le, structure::dfe, structure::mfb}) {
            const auto ma = measure(y_awgn, a, s, span), mc = measure(y_ch, a, s, span);
            for (const double e : ebn0) {
                const double n0 = 2.0 / std::pow(10.0, e / 10.0);  // Eb = 2 samples of power 1
                const double sa = unbiased_snr(ma, n0), sc = unbiased_snr(mc, n0);
                std::printf("%5.2f dB %-5s %10.2f %10.2f %8.2f\n", e, structure_names[static_cast<int>(s)], db(sa), db(sc), db(sa / sc));
            }
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "paq-equalizer-bound: %s\n", e.what());
        return 1;
    }
    return 0;
}
