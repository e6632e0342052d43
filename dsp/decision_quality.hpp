// The bit error probability of a path's symbol-by-symbol decisions, estimated from the
// statistics they were decided on (path_stats::bep_estimate, the DQM of the DQE frames). The
// decoder's LLRs come from another model of the same statistics (dsp/sxs_soft.hpp).
//
// A single Gaussian fitted to the packet's |statistic| (Q(mean / std)) overstates the BEP the
// cleaner the link is: SOQPSK-TG's own intersymbol interference spreads the statistic into
// clusters whose spread is not noise (1.4-1.7x the measured BER at 10 dB Eb/N0 on AWGN), and it
// folds the errors' statistics into the distribution (0.86x at 5 dB). The estimate here:
//   - each data bit falls in one of four contexts: whether the bit before and the bit after it
//     were decided alike (the neighbours on the other rail, whose pulses overlap its own the most;
//     a neighbour outside the data counts as alike);
//   - per context the statistic's magnitude is modelled as a folded Gaussian N(mu_c, sigma_c^2):
//     its mean |x| and mean x^2 give mu_c / sigma_c exactly (folded_normal_snr), errors included;
//   - the spread sigma_c^2 is split into a two-point part +-a_c and Gaussian noise s_c^2 by the
//     mean deviations E| |x| - mu_c |, pooled over the contexts (models_of): what an equalizer
//     leaves of multipath interference is bounded, its tails lighter than noise's, and one
//     Gaussian over it overstates the BEP (MMSE, CMA and FDE1 1.6-2.5x over edwards3);
//   - the BEP is the bits' mean of (Q((mu_c - a_c) / s_c) + Q((mu_c + a_c) / s_c)) / 2.
// docs/SIGNAL-CHAIN.md ("Decision quality") gives the measured ratios to the BER.
// Header-only and usable in device code, so both backends run the same arithmetic.
#pragma once

#include "dsp/iq_correction.hpp"  // PAQ_HOST_DEVICE

#include <cmath>
#include <cstddef>

namespace paq::dsp::decision_quality {

inline constexpr int contexts = 4;

/// Bit i's context from its own statistic and its neighbours' (has_prev / has_next false at
/// the data's edges: a missing neighbour counts as decided alike). T: float or double.
template <class T>
PAQ_HOST_DEVICE int context_of(T x, bool has_prev, T prev, bool has_next, T next) noexcept
{
    const bool own = x >= T(0);
    const bool prev_alike = !has_prev || (prev >= T(0)) == own;
    const bool next_alike = !has_next || (next >= T(0)) == own;
    return (prev_alike ? 1 : 0) | (next_alike ? 2 : 0);
}

/// Per context: the bits, the sum of |x| and the sum of x^2 (the first pass over the
/// statistics), and the sum of | |x| - mu_c | about the context's centre (the second pass,
/// add_deviation, once context_centre is known; fit_of makes both).
struct moments {
    double count[contexts] = {};
    double abs_sum[contexts] = {};
    double sq_sum[contexts] = {};
    double dev_sum[contexts] = {};

    PAQ_HOST_DEVICE void add(int c, double x) noexcept
    {
        count[c] += 1.0;
        abs_sum[c] += fabs(x);
        sq_sum[c] += x * x;
    }
    PAQ_HOST_DEVICE void add_deviation(int c, double x, double centre) noexcept { dev_sum[c] += fabs(fabs(x) - centre); }
};

/// E|x| / sqrt(E x^2) of a Gaussian of mean r and unit variance, folded at zero.
PAQ_HOST_DEVICE inline double folded_ratio(double r) noexcept
{
    constexpr double sqrt_2_over_pi = 0.79788456080286535588;
    const double mean_abs = sqrt_2_over_pi * exp(-0.5 * r * r) + r * erf(r * 0.70710678118654752440);
    return mean_abs / sqrt(1.0 + r * r);
}

/// mu / sigma of the Gaussian whose folded magnitude has mean `mean_abs` and mean square
/// `mean_sq`. 0 where the ratio is at or below a zero-mean Gaussian's (sqrt(2/pi)), or not finite.
PAQ_HOST_DEVICE inline double folded_normal_snr(double mean_abs, double mean_sq) noexcept
{
    constexpr double largest = 1.7976931348623157e308;  // not finite: above it, or NaN
    if (!(mean_sq > 0.0 && mean_sq <= largest) || !(mean_abs > 0.0 && mean_abs <= largest)) return 0.0;
    const double f = fmin(mean_abs / sqrt(mean_sq), 1.0);
    if (!(f > folded_ratio(0.0))) return 0.0;
    // Past r = 8 the folded tail is below 1e-14 and the ratio is r / sqrt(1 + r^2).
    constexpr double r_high = 8.0;
    if (f >= folded_ratio(r_high)) {
        const double rest = 1.0 - f * f;
        return rest > 0.0 ? f / sqrt(rest) : 1e30;
    }
    // Newton's steps on folded_ratio(r) = f, kept inside the bracket [lo, hi] that every
    // evaluation narrows (a step leaving it halves it instead): folded_ratio rises with r and its
    // derivative is erf(r / sqrt 2) / sqrt(1 + r^2) - r folded_ratio(r) / (1 + r^2). From r = 1
    // up the start is above the root (mean |x| >= mu, so folded_ratio(r) >= r / sqrt(1 + r^2)):
    // up to 9 steps for r >= 1, where bisection to the same precision took 56. Below, where
    // folded_ratio is flat (sqrt(2/pi) (1 + r^4 / 12 + ...)), the start is that series' root,
    // without which the steps from above took up to 45 (the two-point fits of noise-like
    // statistics, mostly near 0, are here).
    constexpr double sqrt_2_over_pi = 0.79788456080286535588, inv_sqrt2 = 0.70710678118654752440;
    constexpr double ratio_at_1 = 0.82493264964715010;  // folded_ratio(1)
    double lo = 0.0, hi = r_high;
    double r = f < ratio_at_1 ? sqrt(sqrt(12.0 * (f / sqrt_2_over_pi - 1.0))) : fmin(f / sqrt(1.0 - f * f), r_high);
    for (int i = 0; i < 64; ++i) {
        const double q = 1.0 + r * r, root_q = sqrt(q);
        const double e = erf(r * inv_sqrt2);
        const double g = (sqrt_2_over_pi * exp(-0.5 * r * r) + r * e) / root_q;
        const double h = g - f;
        if (h == 0.0) return r;
        if (h < 0.0) lo = r; else hi = r;
        const double slope = e / root_q - r * g / q;
        double next = slope > 0.0 ? r - h / slope : 0.5 * (lo + hi);
        if (!(next > lo && next < hi)) next = 0.5 * (lo + hi);
        if (fabs(next - r) <= 1e-15 * fmax(r, 1.0) || hi - lo <= 1e-15 * fmax(hi, 1.0)) return next;
        r = next;
    }
    return r;
}

/// mu_c / sigma_c of context c's folded Gaussian (folded_normal_snr); 0 without bits.
PAQ_HOST_DEVICE inline double context_snr(const moments& m, int c) noexcept
{
    const double n = m.count[c];
    return n > 0.0 ? folded_normal_snr(m.abs_sum[c] / n, m.sq_sum[c] / n) : 0.0;
}

/// Every context's context_snr.
PAQ_HOST_DEVICE inline void context_snrs(const moments& m, double (&snr)[contexts]) noexcept
{
    for (int c = 0; c < contexts; ++c) snr[c] = context_snr(m, c);
}

/// The most mu / sigma the model is made from: past it an error is as good as impossible
/// (Q(40) ~ 1e-350), and statistics without spread give a model.
inline constexpr double max_model_snr = 40.0;

/// Context c's sigma_c from its first-pass moments and its context_snr (mu / sigma capped at
/// max_model_snr): sqrt(E x^2 / (1 + r^2)); 0 without bits or without information.
PAQ_HOST_DEVICE inline double context_sigma(const moments& m, int c, double snr) noexcept
{
    const double n = m.count[c];
    const double r = fmin(snr, max_model_snr);
    if (n <= 0.0 || !(r > 0.0)) return 0.0;
    return sqrt(m.sq_sum[c] / n / (1.0 + r * r));
}

/// Context c's centre mu_c = r sigma_c (context_sigma); 0 without bits. The second pass's
/// deviations are taken about it.
PAQ_HOST_DEVICE inline double context_centre(const moments& m, int c, double snr) noexcept
{
    return fmin(snr, max_model_snr) * context_sigma(m, c, snr);
}

/// One context's model of its bits' statistics: a bit decided right has the statistic
/// mu + a u + s z (u = +-1 equally likely, z standard normal), one decided wrong its negation.
/// s = 0: no information (the bits are erasures, their BEP one half).
struct context_model {
    double mu = 0.0;  ///< the centre
    double a = 0.0;   ///< the two-point part of the spread (0: all of it noise)
    double s = 0.0;   ///< the noise's standard deviation
};

/// Below this mu / sigma (a BEP above 2.3%) a context takes no two-point part: the deviations
/// of its bits decided wrong, folded in, would count as spread.
inline constexpr double min_split_snr = 2.0;
/// The largest a / s the fit gives (a^2 = 0.9 sigma^2).
inline constexpr double max_split = 3.0;

/// The two-point part's a / s, the same in every context, from the moments (both passes) and
/// the context_snrs. mu_c and sigma_c^2 are each context's folded Gaussian's. The two-point part
/// is the interference's, the same shape in every context: the contexts' deviations pooled,
/// sum_c E_c| |x| - mu_c | n_c over sum_c sigma_c n_c (the contexts above min_split_snr), is the
/// ratio E|a u + s z| / sigma of a two-point part +-a in Gaussian noise s, which is
/// folded_ratio(a / s) (|a u + s z| is a folded Gaussian of mean a and deviation s). Noise alone
/// gives 0 but for the ratio's sampling spread (standard deviation 0.21 / sqrt(bits)), which can
/// read as a small part. 0 where no context is above min_split_snr.
PAQ_HOST_DEVICE inline double two_point_split(const moments& m, const double (&snr)[contexts]) noexcept
{
    double dev = 0.0, spread = 0.0;
    for (int c = 0; c < contexts; ++c) {
        if (!(fmin(snr[c], max_model_snr) > min_split_snr)) continue;
        dev += m.dev_sum[c];
        spread += m.count[c] * context_sigma(m, c, snr[c]);
    }
    if (!(spread > 0.0)) return 0.0;
    return fmin(folded_normal_snr(dev / spread, 1.0), max_split);
}

/// Context c's model from its moments, its context_snr and the two-point part's a / s
/// (two_point_split): mu_c and sigma_c^2 the folded Gaussian's, sigma_c^2 split as
/// s_c^2 = sigma_c^2 / (1 + (a / s)^2) where the context is above min_split_snr.
PAQ_HOST_DEVICE inline context_model model_of(const moments& m, int c, double snr, double split) noexcept
{
    context_model md;
    const double sigma = context_sigma(m, c, snr), r = fmin(snr, max_model_snr);
    if (!(sigma > 0.0)) return md;
    md.mu = r * sigma;
    md.s = sigma;
    if (r > min_split_snr && split > 0.0) {
        md.s = sigma / sqrt(1.0 + split * split);
        md.a = split * md.s;
    }
    return md;
}

/// The contexts' models from their moments (both passes) and context_snrs.
PAQ_HOST_DEVICE inline void models_of(const moments& m, const double (&snr)[contexts], context_model (&md)[contexts]) noexcept
{
    const double split = two_point_split(m, snr);
    for (int c = 0; c < contexts; ++c) md[c] = model_of(m, c, snr[c], split);
}

/// A bit's error probability under its context's model.
PAQ_HOST_DEVICE inline double error_probability(const context_model& md) noexcept
{
    if (!(md.s > 0.0)) return 0.5;
    constexpr double inv_sqrt2 = 0.70710678118654752440;
    return 0.25 * (erfc((md.mu - md.a) / md.s * inv_sqrt2) + erfc((md.mu + md.a) / md.s * inv_sqrt2));
}

/// The bits' mean of their contexts' error probabilities p[c]. 0.5 without bits.
PAQ_HOST_DEVICE inline double mean_error_probability(const moments& m, const double (&p)[contexts]) noexcept
{
    double total = 0.0, errors = 0.0;
    for (int c = 0; c < contexts; ++c) {
        const double n = m.count[c];
        if (n <= 0.0) continue;
        errors += n * p[c];
        total += n;
    }
    return total > 0.0 ? errors / total : 0.5;
}

/// The estimated BEP: the bits' mean of their contexts' error_probability. 0.5 without bits.
PAQ_HOST_DEVICE inline double bep(const moments& m, const context_model (&md)[contexts]) noexcept
{
    double p[contexts];
    for (int c = 0; c < contexts; ++c) p[c] = error_probability(md[c]);
    return mean_error_probability(m, p);
}

/// Bit i's context within `n` statistics in the order of their bits (T: float or double).
template <class T>
PAQ_HOST_DEVICE int context_at(const T* stat, std::size_t n, std::size_t i) noexcept
{
    return context_of(stat[i], i > 0, i > 0 ? stat[i - 1] : T(0), i + 1 < n, i + 1 < n ? stat[i + 1] : T(0));
}

/// A stream's statistics fitted: both passes' moments and each context's model.
struct fit {
    moments m;
    context_model model[contexts];

    [[nodiscard]] double bep() const noexcept { return decision_quality::bep(m, model); }
};

/// The fit of `n` statistics in the order of their bits: the moments, each context's mu / sigma
/// (inverted once), the deviations about each context's centre, the models.
template <class T>
fit fit_of(const T* stat, std::size_t n) noexcept
{
    fit f;
    for (std::size_t i = 0; i < n; ++i) f.m.add(context_at(stat, n, i), static_cast<double>(stat[i]));
    double snr[contexts], centre[contexts];
    context_snrs(f.m, snr);
    for (int c = 0; c < contexts; ++c) centre[c] = context_centre(f.m, c, snr[c]);
    for (std::size_t i = 0; i < n; ++i) {
        const int c = context_at(stat, n, i);
        f.m.add_deviation(c, static_cast<double>(stat[i]), centre[c]);
    }
    models_of(f.m, snr, f.model);
    return f;
}

/// The estimated BEP from the moments of both passes.
inline double bep(const moments& m) noexcept
{
    double snr[contexts];
    context_snrs(m, snr);
    context_model md[contexts];
    models_of(m, snr, md);
    return bep(m, md);
}

/// The estimate over `n` statistics in the order of their bits.
template <class T>
double bep_of(const T* stat, std::size_t n) noexcept
{
    return fit_of(stat, n).bep();
}

}  // namespace paq::dsp::decision_quality
