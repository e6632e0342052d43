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
//            bound of the linear model: what iterative detection and decoding from the
//            received samples approaches once the decoder's beliefs are right).
// Every structure is linear in what it uses: SOQPSK-TG's nonlinear remainder and the bits
// beyond --span count as noise (on AWGN at 15 dB, mfb reads 15.4 dB where 2 Eb/N0 is 18 dB).
// Each is solved from the second moments measured over the bits (the noise's, exact, added to
// the samples' diagonal), and reported as the unbiased signal-to-noise ratio 1 / mse - 1. The same is computed for the
// awgn preset, so that the modulation's own partial response (SOQPSK-TG is not a linear
// modulation) counts on both sides: the "cost" column is the channel's cost in dB for each
// structure.
//
// With --code, also a coded link through the preset with perfect synchronization: codewords of
// random information bits, each between random known bits, modulated, through the channel, with
// drawn noise, received by the linear model the moments give (the samples' correlation with each
// bit within --span; what those bits leave unexplained counted as noise) in iterations of
// detection and decoding (soft interference cancellation, Tuechler, Koetter and Singer 2002):
// per iteration and parity one minimum-mean-square-error filter for the mean variance of the
// bits' beliefs, the interference their means predict taken out of the samples, the detector's
// extrinsic LLRs to the project's decoder (layered min-sum, binary16, 50 iterations), the
// decoder's extrinsic LLRs (posterior less input) back as the bits' beliefs. The first
// iteration, without beliefs, is the linear equalizer (le); each line gives the frame and
// information-bit error rates after that many iterations.
#include "bench/channel_signal.hpp"
#include "config/cli.hpp"
#include "dsp/ldpc.hpp"
#include "dsp/ldpc_decoder.hpp"
#include "dsp/linalg.hpp"
#include "dsp/names.hpp"
#include "dsp/soqpsk.hpp"
#include "sim/simulator.hpp"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using cd = std::complex<double>;

/// Bit k's OQPSK-like instant is modulated sample 2k + instant_delay (bench/paq_trellis_bound.cpp).
constexpr long instant_delay = 10;
using paq::bench::interp_half;
using paq::bench::through_preset;  ///< bit k's instant is then sample 2k + instant_delay + interp_half

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

/// A parity's linear model, from the moments: h[span + d] (d = -span .. span) the samples'
/// correlation with a_{k+d}, which is their least-squares weight (the bits are independent,
/// +-1), and `rest` the covariance of what those bits leave unexplained (SOQPSK-TG's nonlinear
/// part, the bits farther away), without the noise.
struct linear_model {
    int ns = 0, span = 0;
    std::vector<std::vector<double>> h;
    std::vector<double> rest;
};

linear_model model_of(const moments& m, int q)
{
    linear_model lm;
    lm.ns = 2 * m.samples;
    lm.span = m.span;
    const int ns = lm.ns, n = m.size();
    lm.h.assign(static_cast<std::size_t>(2 * m.span + 1), std::vector<double>(static_cast<std::size_t>(ns)));
    for (int u = 0; u < ns; ++u) {
        lm.h[static_cast<std::size_t>(m.span)][static_cast<std::size_t>(u)] = m.ra[q][static_cast<std::size_t>(u)];
        for (int d = 1; d <= m.span; ++d) {
            lm.h[static_cast<std::size_t>(m.span - d)][static_cast<std::size_t>(u)] = m.rr[q][static_cast<std::size_t>(u * n + ns + d - 1)];
            lm.h[static_cast<std::size_t>(m.span + d)][static_cast<std::size_t>(u)] = m.rr[q][static_cast<std::size_t>(u * n + ns + m.span + d - 1)];
        }
    }
    lm.rest.assign(static_cast<std::size_t>(ns * ns), 0.0);
    for (int u = 0; u < ns; ++u) {
        for (int v = 0; v < ns; ++v) {
            double e = m.rr[q][static_cast<std::size_t>(u * n + v)];
            for (const auto& hd : lm.h) e -= hd[static_cast<std::size_t>(u)] * hd[static_cast<std::size_t>(v)];
            lm.rest[static_cast<std::size_t>(u * ns + v)] = e;
        }
    }
    return lm;
}

/// The soft-interference-cancellation filter of a parity for beliefs of mean variance vbar:
/// w = (vbar sum_(d != 0) h_d h_d^T + h_0 h_0^T + rest + n0 / 2 I)^-1 h_0, and mu = w . h_0
/// (the filter's output is mu a_k plus noise of variance mu - mu^2).
struct sic_filter {
    std::vector<double> w;
    double mu = 0.0;
};

sic_filter filter_of(const linear_model& lm, double vbar, double n0)
{
    const int ns = lm.ns;
    std::vector<double> g(lm.rest);
    for (std::size_t d = 0; d < lm.h.size(); ++d) {
        const double v = static_cast<int>(d) == lm.span ? 1.0 : vbar;
        const auto& hd = lm.h[d];
        for (int u = 0; u < ns; ++u) {
            for (int x = 0; x < ns; ++x) g[static_cast<std::size_t>(u * ns + x)] += v * hd[static_cast<std::size_t>(u)] * hd[static_cast<std::size_t>(x)];
        }
    }
    for (int u = 0; u < ns; ++u) g[static_cast<std::size_t>(u * ns + u)] += n0 / 2.0;
    sic_filter f;
    f.w = solve(std::move(g), lm.h[static_cast<std::size_t>(lm.span)]);
    f.mu = dot(f.w, lm.h[static_cast<std::size_t>(lm.span)]);
    return f;
}

/// A coded point's counts after each iteration.
struct coded_counts {
    long frames = 0, failed = 0, info_errors = 0;
};

/// Codewords of `c` at info_ebn0_db through the preset, detected and decoded in up to
/// `iterations` iterations; the counts after each.
std::vector<coded_counts> run_coded(const linear_model (&lm)[2], const std::string& preset, double bit_rate, paq::dsp::ldpc::code c,
                                    double info_ebn0_db, int codewords, int iterations, int decoder_iterations, double scale,
                                    std::uint64_t seed)
{
    namespace ldpc = paq::dsp::ldpc;
    const auto& enc = ldpc::encoder::get(c);
    const auto p = enc.params();
    const auto n = static_cast<std::size_t>(p.n), k_info = static_cast<std::size_t>(p.k);
    const double rate = static_cast<double>(p.rate_num) / p.rate_den;
    const double n0 = 2.0 / (rate * std::pow(10.0, info_ebn0_db / 10.0));  // Eb = 2 samples of power 1 per transmitted bit
    const int span = lm[0].span, half = 2 * span;
    const long guard = 4L * span + 40;  // known bits either side, as measure()'s
    std::vector<std::vector<coded_counts>> per_word(static_cast<std::size_t>(codewords));
    std::exception_ptr error;  // the first codeword's that threw, rethrown after the threads
#pragma omp parallel
    {
        ldpc::decoder_config dc;
        dc.max_iterations = decoder_iterations;
        ldpc::decoder dec(c, dc);
        std::vector<std::uint8_t> info(k_info), u(k_info), tx(n);
        std::vector<float> l_det(n), l_ext(n);
        std::vector<double> r(static_cast<std::size_t>(lm[0].ns));
#pragma omp for schedule(dynamic)
        for (int f = 0; f < codewords; ++f) {
            try {
                std::mt19937_64 rng(seed * 1000003ull + static_cast<std::uint64_t>(f));
                for (auto& b : u) b = static_cast<std::uint8_t>(rng() & 1u);
                enc.encode(u, tx);
                const long total = static_cast<long>(n) + 2 * guard;
                std::vector<std::uint8_t> bits(static_cast<std::size_t>(total));
                for (long i = 0; i < total; ++i) {
                    const bool code_bit = i >= guard && i < guard + static_cast<long>(n);
                    bits[static_cast<std::size_t>(i)] = code_bit ? tx[static_cast<std::size_t>(i - guard)] : static_cast<std::uint8_t>(rng() & 1u);
                }
                auto y = through_preset(paq::dsp::modulate_bits(bits, 0.0), preset, bit_rate);
                std::normal_distribution<double> noise(0.0, std::sqrt(n0 / 2.0));
                for (auto& v : y) v += cd(noise(rng), noise(rng));
                // The bits' beliefs: the known ones certain, the codeword's none yet.
                std::vector<double> mean(static_cast<std::size_t>(total));
                for (long i = 0; i < total; ++i) {
                    const bool code_bit = i >= guard && i < guard + static_cast<long>(n);
                    mean[static_cast<std::size_t>(i)] = code_bit ? 0.0 : (bits[static_cast<std::size_t>(i)] != 0 ? 1.0 : -1.0);
                }
                auto& counts = per_word[static_cast<std::size_t>(f)];
                counts.assign(static_cast<std::size_t>(iterations), coded_counts{});
                for (int it = 0; it < iterations; ++it) {
                    double vbar = 0.0;
                    for (std::size_t i = 0; i < n; ++i) vbar += 1.0 - mean[static_cast<std::size_t>(guard) + i] * mean[static_cast<std::size_t>(guard) + i];
                    vbar /= static_cast<double>(n);
                    const sic_filter flt[2] = {filter_of(lm[0], vbar, n0), filter_of(lm[1], vbar, n0)};
                    for (std::size_t i = 0; i < n; ++i) {
                        const long kb = guard + static_cast<long>(i);
                        const int q = static_cast<int>(kb & 1);
                        const linear_model& mq = lm[q];
                        const long centre = 2 * kb + instant_delay + interp_half;
                        for (int j = -half; j <= half; ++j) {
                            const cd v = y[static_cast<std::size_t>(centre + j)];
                            r[static_cast<std::size_t>(2 * (j + half))] = v.real();
                            r[static_cast<std::size_t>(2 * (j + half) + 1)] = v.imag();
                        }
                        for (int d = -span; d <= span; ++d) {
                            const double md = mean[static_cast<std::size_t>(kb + d)];
                            if (d == 0 || md == 0.0) continue;
                            const auto& hd = mq.h[static_cast<std::size_t>(span + d)];
                            for (std::size_t x = 0; x < r.size(); ++x) r[x] -= md * hd[x];
                        }
                        const double z = dot(flt[q].w, r), mu = flt[q].mu;
                        l_det[i] = static_cast<float>(2.0 * z / (1.0 - mu));  // 2 mu z / (mu - mu^2)
                    }
                    const auto res = dec.decode(l_det, info);
                    long errors = 0;
                    for (std::size_t i = 0; i < k_info; ++i) errors += info[i] != u[i] ? 1 : 0;
                    const bool ok = res.converged && errors == 0;
                    for (int later = it; later < iterations; ++later) {
                        counts[static_cast<std::size_t>(later)] = {1, ok ? 0 : 1, errors};
                    }
                    if (res.converged) break;
                    // The decoder's extrinsic LLRs (its posterior less its input as it took it) as the
                    // next beliefs.
                    dec.extrinsic(l_ext);
                    for (std::size_t i = 0; i < n; ++i) mean[static_cast<std::size_t>(guard) + i] = std::tanh(0.5 * scale * static_cast<double>(l_ext[i]));
                }
            } catch (...) {
#pragma omp critical
                if (!error) error = std::current_exception();
            }
        }
    }
    if (error) std::rethrow_exception(error);
    std::vector<coded_counts> out(static_cast<std::size_t>(iterations));
    for (const auto& w : per_word) {
        for (std::size_t it = 0; it < out.size(); ++it) {
            out[it].frames += w[it].frames;
            out[it].failed += w[it].failed;
            out[it].info_errors += w[it].info_errors;
        }
    }
    return out;
}

double db(double v) { return 10.0 * std::log10(v); }

}  // namespace

int main(int argc, char** argv)
{
    CLI::App app{"paq-equalizer-bound: a channel preset's cost in dB to a linear equalizer (also with its output's interference "
                 "cancelled), a decision-feedback equalizer with correct decisions and the matched-filter bound, against the same "
                 "structures on AWGN; with --code, a coded link detected and decoded iteratively (docs/BER-RESULTS.md, \"What an "
                 "equalizer can reach on edwards3\")"};
    std::string preset = "edwards3";
    std::vector<double> ebn0{3.24, 4.24, 5.24};
    long bits = 200'000;
    int span = 12;
    double bit_rate = 10.3125e6;
    std::uint64_t seed = 91;
    app.add_option("--preset", preset, "Channel preset (one whose rays stay put)")->check(CLI::IsMember(paq::bench::fixed_preset_names()));
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
    app.add_option("--seed", seed, "Seed of the bits, and with --code of the codewords and the noise");
    std::string code_name;
    std::vector<double> info_ebn0;
    int codewords = 200, iterations = 6, decoder_iterations = 50;
    double scale = 1.0;
    app.add_option("--code", code_name, "Also a coded link with this LDPC code, detected and decoded iteratively (on awgn, and the preset if another)")
        ->check(CLI::IsMember(paq::names_in(paq::dsp::ldpc::code_names)));
    app.add_option("--info-ebn0-db", info_ebn0, "With --code: Eb/N0 per information bit, dB, comma-separated")
        ->delimiter(',')
        ->check(finite_in(-10.0, 40.0));
    app.add_option("--codewords", codewords, "With --code: codewords a point")->check(CLI::Range(1, 1'000'000));
    app.add_option("--iterations", iterations, "With --code: iterations of detection and decoding (1: the linear equalizer alone)")
        ->check(CLI::Range(1, 50));
    app.add_option("--decoder-iterations", decoder_iterations, "With --code: the decoder's iterations at most, each time")->check(CLI::Range(1, 200));
    app.add_option("--extrinsic-scale", scale, "With --code: the decoder's extrinsic LLRs times this before they are beliefs")
        ->check(finite_in(0.0, 1.0));
    paq::cli::conventions(app, "paq-equalizer-bound", "0 measured; 1 a measurement that could not be made; 2 usage error");
    if (const int rc = paq::cli::parse(app, argc, argv); rc >= 0) return rc;
    if (code_name.empty() != info_ebn0.empty()) {
        std::fprintf(stderr, "--code and --info-ebn0-db go together\nRun with --help for more information.\n");
        return paq::cli::usage_error;
    }

    try {
        std::mt19937_64 rng(seed);
        std::vector<std::uint8_t> b(static_cast<std::size_t>(bits));
        std::vector<int> a(b.size());
        for (std::size_t k = 0; k < b.size(); ++k) {
            b[k] = static_cast<std::uint8_t>(rng() & 1u);
            a[k] = b[k] != 0 ? 1 : -1;
        }
        const auto x = paq::dsp::modulate_bits(b, 0.0);
        const auto y_awgn = through_preset(x, "awgn", bit_rate), y_ch = through_preset(x, preset, bit_rate);
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
        if (!code_name.empty()) {
            const auto c = paq::parse_named(paq::dsp::ldpc::code_names, code_name, "code");
            std::printf("\n%s, %d codewords a point between known bits, perfect synchronization, detected and decoded in up to %d "
                        "iterations (seed %llu)\n",
                        code_name.c_str(), codewords, iterations, static_cast<unsigned long long>(seed));
            std::printf("%-9s %-14s %-9s %-16s %-10s %s\n", "channel", "info Eb/N0", "iteration", "failed", "FER", "BER");
            std::vector<std::pair<std::string, const moments*>> channels{{"awgn", &ma}};
            if (preset != "awgn") channels.emplace_back(preset, &mc);
            for (const auto& [name, mo] : channels) {
                const linear_model lm[2] = {model_of(*mo, 0), model_of(*mo, 1)};
                for (const double e : info_ebn0) {
                    const auto counts = run_coded(lm, name, bit_rate, c, e, codewords, iterations, decoder_iterations, scale, seed);
                    const double info_bits = static_cast<double>(paq::dsp::ldpc::params(c).k);
                    for (std::size_t it = 0; it < counts.size(); ++it) {
                        const auto& k = counts[it];
                        std::printf("%-9s %5.2f dB       %-9zu %6ld / %-7ld %-10.3e %.3e\n", name.c_str(), e, it + 1, k.failed, k.frames,
                                    static_cast<double>(k.failed) / static_cast<double>(k.frames),
                                    static_cast<double>(k.info_errors) / (info_bits * static_cast<double>(k.frames)));
                    }
                }
            }
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "paq-equalizer-bound: %s\n", e.what());
        return 1;
    }
    return 0;
}
