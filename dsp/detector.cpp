#include "dsp/detector.hpp"

#include "dsp/waveform.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <numbers>
#include <cstring>

namespace paq::dsp {

pll_gains make_pll_gains(double bn_t, double zeta) noexcept
{
    // Standard discrete PI loop (Rice, Digital Communications, app. C), Kp = 2, K0 = 1.
    const double theta_n = bn_t / (zeta + 1.0 / (4.0 * zeta));
    const double den = 1.0 + 2.0 * zeta * theta_n + theta_n * theta_n;
    constexpr double kp = 2.0;
    return {4.0 * zeta * theta_n / den / kp, 4.0 * theta_n * theta_n / den / kp};
}

namespace {

/// The loop gains assume unit amplitude at the decision instants. Equalizers deliver
/// different amplitudes (MMSE and the FDEs shrink by SNR, the unequalized path by the
/// channel), so the phase error is normalized by the mean magnitude over the known bits:
/// the loop bandwidth is then the configured one on every path.
double error_scale(const cf64* v) noexcept
{
    double amp = 0.0;
    for (std::size_t k = 0; k < waveform::known_bits; ++k) amp += std::abs(v[k]);
    amp /= static_cast<double>(waveform::known_bits);
    return amp > 0.0 ? 1.0 / amp : 0.0;
}

/// The packet's statistics from the data decisions' |statistic| sums: BEP = Q(mean / std).
path_stats decision_stats(double sum, double sum2, unsigned known_errors) noexcept
{
    const double n = static_cast<double>(waveform::data_bits);
    const double mean = sum / n;
    const double var = std::max(sum2 / n - mean * mean, 1e-300);
    path_stats st;
    st.known_bit_errors = static_cast<std::uint16_t>(known_errors);
    st.bep_estimate = static_cast<float>(0.5 * std::erfc(mean / std::sqrt(2.0 * var)));
    return st;
}

/// The chunks' sums added pairwise, in smoother::chunks' order (a warp's shuffle-down tree).
double fold_chunks(std::array<double, smoother::chunks>& part) noexcept
{
    for (std::size_t off = smoother::chunks / 2; off > 0; off /= 2) {
        for (std::size_t i = 0; i < off; ++i) part[i] += part[i + off];
    }
    return part[0];
}

}  // namespace

namespace {
path_stats detect_packet_impl(const cf64* v, const pll_gains& acq, const pll_gains& track, std::uint8_t* bits_out,
                              sxs_trace* trace, phase_gate::measure* gate) noexcept;
}  // namespace

path_stats detect_packet(const cf64* v, const pll_gains& acq, const pll_gains& track, std::uint8_t* bits_out) noexcept
{
    return detect_packet_impl(v, acq, track, bits_out, nullptr, nullptr);
}

path_stats detect_packet(const cf64* v, const pll_gains& acq, const pll_gains& track, std::uint8_t* bits_out,
                         sxs_trace& trace) noexcept
{
    return detect_packet_impl(v, acq, track, bits_out, &trace, nullptr);
}

path_stats detect_packet(const cf64* v, const pll_gains& acq, const pll_gains& track, std::uint8_t* bits_out, sxs_trace* trace,
                         phase_gate::measure& gate) noexcept
{
    return detect_packet_impl(v, acq, track, bits_out, trace, &gate);
}

namespace {

path_stats detect_packet_impl(const cf64* v, const pll_gains& acq, const pll_gains& track, std::uint8_t* bits_out,
                              sxs_trace* trace, phase_gate::measure* gate) noexcept
{
    static const auto known = waveform::known_packet_bits();
    constexpr std::size_t nk = waveform::known_bits;
    std::memset(bits_out, 0, waveform::data_bits / 8);
    double theta = 0.0, nu = 0.0;
    cf64 rot(1.0, 0.0);
    cf64 y_prev = 0.0;
    double a_prev = 0.0;
    double sum = 0.0, sum2 = 0.0;
    unsigned known_errors = 0;
    const double e_scale = error_scale(v);
    phase_gate::wander_meter wander;
    double unwrapped = 0.0;  // theta + unwrapped: the loop's phase without its wraps
    for (std::size_t k = 0; k < waveform::packet_bits; ++k) {
        if (trace) trace->theta[k] = theta;  // the phase rot derotates by
        if (gate && k % 2 == 0 && k >= 2 * static_cast<std::size_t>(phase_gate::first_pair)) wander.add(theta + unwrapped);
        const cf64 y = v[k] * rot;
        const bool even = k % 2 == 0;
        const double comp = even ? y.real() : y.imag();
        const double dec = comp >= 0.0 ? 1.0 : -1.0;
        double a;
        if (k < nk) {
            a = known[k] ? 1.0 : -1.0;
            if (dec != a) ++known_errors;
        } else {
            a = dec;
            const std::size_t i = k - nk;
            if (dec > 0) bits_out[i / 8] = static_cast<std::uint8_t>(bits_out[i / 8] | (0x80u >> (i % 8)));
            const double m = std::abs(comp);
            sum += m;
            sum2 += m * m;
        }
        if (!even) {
            const double e = (a_prev * y_prev.imag() - a * y.real()) * e_scale;
            const pll_gains& g = k < nk ? acq : track;
            nu += g.k2 * e;
            theta += g.k1 * e + nu;
            const double before_wrap = theta;
            theta = std::remainder(theta, 2.0 * std::numbers::pi);
            unwrapped += before_wrap - theta;
            rot = std::polar(1.0, -theta);
        }
        if (trace) trace->bits[k] = a > 0.0 ? 1 : -1;
        y_prev = y;
        a_prev = a;
    }
    if (trace) trace->known_errors = known_errors;
    if (gate) *gate = {wander.value(), phase_gate::decision_rho(sum, sum2, static_cast<double>(waveform::data_bits))};
    return decision_stats(sum, sum2, known_errors);
}

}  // namespace

namespace smoother {

const filter_gains& gains(int l) noexcept
{
    static const auto table = [] {
        std::array<filter_gains, num_lambdas> t{};
        for (int i = 0; i < num_lambdas; ++i) {
            const double lam = lambdas[i];
            filter_gains& g = t[static_cast<std::size_t>(i)];
            double p = 1.0;
            g.k[0] = 1.0;
            g.p[0] = 1.0f;
            for (std::size_t j = 1; j < phase_pairs; ++j) {
                const double pp = p + lam, k = pp / (pp + 1.0);
                p = (1.0 - k) * pp;
                g.k[j] = k;
                g.p[j] = static_cast<float>(p);
            }
        }
        return t;
    }();
    return table[static_cast<std::size_t>(l)];
}

}  // namespace smoother

smoother_scratch::smoother_scratch()
    : theta(phase_pairs), z(phase_pairs), f(phase_pairs), b(phase_pairs), theta_bit(waveform::packet_bits),
      z_bit(waveform::packet_bits), r_bit(waveform::packet_bits), a(waveform::packet_bits), y_bit(waveform::packet_bits)
{
}

path_stats detect_packet_smoothed(const cf64* v, const pll_gains& acq, const pll_gains& boot, std::uint8_t* bits_out,
                                  smoother_scratch& sc, sxs_trace* trace) noexcept
{
    static const auto known = waveform::known_packet_bits();
    constexpr std::size_t nk = waveform::known_bits;
    constexpr std::size_t n = waveform::packet_bits;
    constexpr std::size_t np2 = phase_pairs;
    float* const th = sc.theta.data();
    float* const z = sc.z.data();
    float* const thk = sc.theta_bit.data();
    float* const zk = sc.z_bit.data();
    float* const rk = sc.r_bit.data();
    std::int8_t* const a = sc.a.data();
    cf64* const yk = sc.y_bit.data();
    std::memset(bits_out, 0, waveform::data_bits / 8);
    // A sample derotated by its bit's phase (the decisions). The sines and cosines are most of
    // this function's time: each bit's is taken once per iteration (steps a and b share it),
    // and the pair's once for its two samples (step c).
    auto rotated_bit = [&](std::size_t k) { return v[k] * std::polar(1.0, -static_cast<double>(thk[k])); };

    // 1. The forward PLL, its phase unwrapped.
    const double e_scale = error_scale(v);
    unsigned known_errors = 0;
    {
        double theta = 0.0, nu = 0.0;
        for (std::size_t j = 0; j < np2; ++j) {
            th[j] = static_cast<float>(theta);
            const cf64 rot = std::polar(1.0, -theta);
            const cf64 y0 = v[2 * j] * rot, y1 = v[2 * j + 1] * rot;
            const double d0 = y0.real() >= 0.0 ? 1.0 : -1.0, d1 = y1.imag() >= 0.0 ? 1.0 : -1.0;
            double a0 = d0, a1 = d1;
            if (2 * j + 1 < nk) {
                a0 = known[2 * j] ? 1.0 : -1.0;
                a1 = known[2 * j + 1] ? 1.0 : -1.0;
                known_errors += (d0 != a0) + (d1 != a1);
            }
            const double e = (a0 * y0.imag() - a1 * y1.real()) * e_scale;
            const pll_gains& g = 2 * j + 1 < nk ? acq : boot;
            nu += g.k2 * e;
            theta += g.k1 * e + nu;
        }
        for (std::size_t k = 0; k < n; ++k) thk[k] = th[k / 2];
    }

    for (int it = 0; it < smoother::iterations; ++it) {
        // a. Decisions.
        for (std::size_t k = 0; k < n; ++k) yk[k] = rotated_bit(k);
        for (std::size_t k = 0; k < n; ++k) {
            if (k < nk) {
                a[k] = known[k] ? 1 : -1;
            } else {
                const cf64 y = yk[k];
                a[k] = (k % 2 == 0 ? y.real() : y.imag()) >= 0.0 ? 1 : -1;
            }
        }
        // b. The signal model: own axis g0 a_k, other axis c1 (a_{k-1} + a_{k+1}); bits 1 .. n - 2.
        std::array<double, smoother::chunks> own{}, s11{}, s1y{};
        for (std::size_t c = 0; c < smoother::chunks; ++c) {
            for (std::size_t j = c; j < np2; j += smoother::chunks) {
                for (std::size_t k = 2 * j; k <= 2 * j + 1; ++k) {
                    if (k < 1 || k > n - 2) continue;
                    const cf64 y = yk[k];
                    const double m1 = a[k - 1] + a[k + 1];
                    own[c] += (k % 2 == 0 ? y.real() : y.imag()) * a[k];
                    s1y[c] += (k % 2 == 0 ? y.imag() : y.real()) * m1;
                    s11[c] += m1 * m1;
                }
            }
        }
        const double own_sum = fold_chunks(own), s11_sum = fold_chunks(s11), s1y_sum = fold_chunks(s1y);
        const double g0 = own_sum / static_cast<double>(n - 2), c1 = s11_sum > 0.0 ? s1y_sum / s11_sum : 0.0;
        // c. One phase observation per pair, and one per sample of it with its variance in
        // units of the pair's.
        for (std::size_t j = 0; j < np2; ++j) {
            cf64 prod[2];
            double energy[2];
            // The pair's samples at the pair's phase (the observations' reference).
            const cf64 rot = std::polar(1.0, -static_cast<double>(th[j]));
            for (std::size_t h = 0; h < 2; ++h) {
                const std::size_t k = 2 * j + h;
                const double m1 = (k > 0 ? a[k - 1] : 0) + (k + 1 < n ? a[k + 1] : 0);
                const cf64 model = k % 2 == 0 ? cf64(g0 * a[k], c1 * m1) : cf64(c1 * m1, g0 * a[k]);
                prod[h] = (v[k] * rot) * std::conj(model);
                energy[h] = std::norm(model);
            }
            const double tj = static_cast<double>(th[j]);
            z[j] = static_cast<float>(tj + std::arg(prod[0] + prod[1]));
            for (std::size_t h = 0; h < 2; ++h) {
                zk[2 * j + h] = static_cast<float>(tj + std::arg(prod[h]));
                // 0: no information (a zero model, g0 = c1 = 0)
                rk[2 * j + h] = energy[h] > 0.0 ? static_cast<float>((energy[0] + energy[1]) / energy[h]) : 0.0f;
            }
        }
        // d. The line through them.
        std::array<double, smoother::chunks> pj{}, pz{}, pjj{}, pjz{};
        for (std::size_t c = 0; c < smoother::chunks; ++c) {
            for (std::size_t j = c; j < np2; j += smoother::chunks) {
                const double x = static_cast<double>(j), y = z[j];
                pj[c] += x;
                pz[c] += y;
                pjj[c] += x * x;
                pjz[c] += x * y;
            }
        }
        const double sj = fold_chunks(pj), sz = fold_chunks(pz), sjj = fold_chunks(pjj), sjz = fold_chunks(pjz);
        const double cnt = static_cast<double>(np2);
        const double slope = (cnt * sjz - sj * sz) / (cnt * sjj - sj * sj);
        const double icpt = (sz - slope * sj) / cnt;
        auto zd = [&](std::size_t j) { return static_cast<double>(z[j]) - (icpt + slope * static_cast<double>(j)); };
        // e. lambda: the least squared one-step prediction errors, all candidates in one pass.
        double gain[smoother::num_lambdas], x[smoother::num_lambdas], pe[smoother::num_lambdas];
        for (int l = 0; l < smoother::num_lambdas; ++l) {
            const double lam = smoother::lambdas[l];
            const double p = 0.5 * (lam + std::sqrt(lam * lam + 4.0 * lam));
            gain[l] = p / (p + 1.0);
            x[l] = zd(0);
            pe[l] = 0.0;
        }
        for (std::size_t j = 1; j < np2; ++j) {
            const double y = zd(j);
            for (int l = 0; l < smoother::num_lambdas; ++l) {
                const double inn = y - x[l];
                pe[l] += inn * inn;
                x[l] += gain[l] * inn;
            }
        }
        int best = 0;
        for (int l = 1; l < smoother::num_lambdas; ++l) {
            if (pe[l] < pe[best]) best = l;
        }
        const double lam = smoother::lambdas[best];
        // f. Kalman filters forward and backward (variances in units of the observation noise;
        // gains and variances depend on lambda and the step alone: smoother::filter_gains, step i
        // of the forward filter at pair i, of the backward one at pair np2 - 1 - i).
        const smoother::filter_gains& fg = smoother::gains(best);
        double xf = zd(0);
        sc.f[0] = static_cast<float>(xf);
        for (std::size_t j = 1; j < np2; ++j) {
            xf += fg.k[j] * (zd(j) - xf);
            sc.f[j] = static_cast<float>(xf);
        }
        double xb = zd(np2 - 1);
        sc.b[np2 - 1] = static_cast<float>(xb);
        for (std::size_t j = np2 - 1; j-- > 0;) {
            xb += fg.k[np2 - 1 - j] * (zd(j) - xb);
            sc.b[j] = static_cast<float>(xb);
        }
        constexpr std::size_t gap = smoother::exclusion + 1;
        const double drift = gap * lam;
        // The pair's phase (f), and its bits' phases (g).
        for (std::size_t j = 0; j < np2; ++j) {
            const bool fwd = j >= gap, bwd = j + gap < np2;
            const smoother::bit_phase_side fs{fwd, fwd ? static_cast<double>(sc.f[j - gap]) : 0.0,
                                              fwd ? static_cast<double>(fg.p[j - gap]) : 0.0, fwd ? zk[2 * j - 2] : 0.0f,
                                              fwd ? rk[2 * j - 2] : 0.0f};
            const smoother::bit_phase_side bs{bwd, bwd ? static_cast<double>(sc.b[j + gap]) : 0.0,
                                              bwd ? static_cast<double>(fg.p[np2 - 1 - (j + gap)]) : 0.0,
                                              bwd ? zk[2 * j + 3] : 0.0f, bwd ? rk[2 * j + 3] : 0.0f};
            double num = 0.0, den = 0.0;
            if (fwd) {
                const double w = 1.0 / (fs.p + drift);
                num += w * fs.x;
                den += w;
            }
            if (bwd) {
                const double w = 1.0 / (bs.p + drift);
                num += w * bs.x;
                den += w;
            }
            th[j] = static_cast<float>(num / den + icpt + slope * static_cast<double>(j));
            const auto bp = smoother::bit_phases(static_cast<int>(j), fs, bs, lam, icpt, slope);
            thk[2 * j] = bp.even;
            thk[2 * j + 1] = bp.odd;
        }
    }

    // 3. The data decisions.
    std::array<double, smoother::chunks> psum{}, psum2{};
    for (std::size_t ch = 0; ch < smoother::chunks; ++ch) {
        for (std::size_t j = ch; j < np2; j += smoother::chunks) {
            for (std::size_t k = 2 * j; k <= 2 * j + 1; ++k) {
                if (k < nk) continue;
                const cf64 y = rotated_bit(k);
                const double c = k % 2 == 0 ? y.real() : y.imag();
                const std::size_t i = k - nk;
                if (c >= 0.0) bits_out[i / 8] = static_cast<std::uint8_t>(bits_out[i / 8] | (0x80u >> (i % 8)));
                if (trace) trace->bits[k] = c >= 0.0 ? 1 : -1;
                psum[ch] += std::abs(c);
                psum2[ch] += c * c;
            }
        }
    }
    const double sum = fold_chunks(psum), sum2 = fold_chunks(psum2);
    if (trace) {
        for (std::size_t k = 0; k < n; ++k) trace->theta[k] = static_cast<double>(thk[k]);  // the bits' phases
        for (std::size_t k = 0; k < nk; ++k) trace->bits[k] = known[k] ? 1 : -1;
        trace->known_errors = known_errors;
    }
    return decision_stats(sum, sum2, known_errors);
}

}  // namespace paq::dsp
