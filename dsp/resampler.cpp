#include "dsp/resampler.hpp"

#include <cmath>
#include <numbers>
#include <sstream>
#include <stdexcept>
#include <string>

namespace paq::dsp {

namespace {

constexpr double two_pow_32 = 4294967296.0;
constexpr float two_pow_minus_24 = 1.0f / 16777216.0f;

/// sinc(x) with exact zeros at the non-zero integers, so that at R = 1 phase 0 is a unit impulse.
double sinc(double x)
{
    if (x == 0.0) return 1.0;
    if (x == std::round(x)) return 0.0;
    const double px = std::numbers::pi * x;
    return std::sin(px) / px;
}

double kaiser(double r, double beta)
{
    if (std::abs(r) >= 1.0) return 0.0;
    return std::cyl_bessel_i(0.0, beta * std::sqrt(1.0 - r * r)) / std::cyl_bessel_i(0.0, beta);
}

/// Prototype taps at fraction f in [0, 1], k = 0 .. N-1, normalized to sum 1.
void prototype_row(double f, double ratio, double cutoff_rb, int n, double beta, double* out)
{
    const double half = 0.5 * n;
    double sum = 0.0;
    for (int k = 0; k < n; ++k) {
        const double tau = f - (k - half + 1.0);  // distance from the position to input tap k
        out[k] = sinc(cutoff_rb * tau / ratio) * kaiser(tau / half, beta);
        sum += out[k];
    }
    for (int k = 0; k < n; ++k) out[k] /= sum;
}

std::string fmt(double v)
{
    std::ostringstream os;
    os.precision(10);
    os << v;
    return os.str();
}

}  // namespace

void resampler_design::exact_taps(double f, double* out) const
{
    const double cutoff_rb = 0.5 * (spec.passband_edge_rb + spec.stopband_edge_rb);
    prototype_row(f, ratio, cutoff_rb, taps, kaiser_beta, out);
}

resampler_design design_resampler(double ratio, const resampler_spec& spec)
{
    if (!(ratio >= resampler_min_ratio && ratio <= resampler_max_ratio)) {
        throw std::invalid_argument("resampler ratio " + fmt(ratio) +
                                    " (input samples per output sample = input rate / (2 x bit rate)) is out of "
                                    "range: allowed " + fmt(resampler_min_ratio) + " .. " + fmt(resampler_max_ratio));
    }
    if (!(spec.passband_edge_rb > 0.0 && spec.stopband_edge_rb > spec.passband_edge_rb && spec.stopband_edge_rb <= 4.0))
        throw std::invalid_argument("resampler spec: passband edge " + fmt(spec.passband_edge_rb) + " Rb and stopband edge " +
                                    fmt(spec.stopband_edge_rb) + " Rb: allowed 0 < passband < stopband <= 4");
    if (!(spec.stopband_atten_db >= 20.0 && spec.stopband_atten_db <= 120.0))
        throw std::invalid_argument("resampler spec: stopband_atten_db = " + fmt(spec.stopband_atten_db) +
                                    " is out of range (allowed: 20 .. 120 dB)");
    resampler_design d;
    d.ratio = ratio;
    d.spec = spec;
    const double a = spec.stopband_atten_db;
    d.kaiser_beta = a > 50.0 ? 0.1102 * (a - 8.7) : 0.5842 * std::pow(a - 21.0, 0.4) + 0.07886 * (a - 21.0);
    // Kaiser's length estimate for transition dF (cycles per input sample), rounded up to even.
    const double df = (spec.stopband_edge_rb - spec.passband_edge_rb) / (2.0 * ratio);
    const double n_est = 1.0 + (a - 7.95) / (14.36 * df);
    d.taps = 2 * static_cast<int>(std::ceil(n_est / 2.0));
    d.phases = resampler_phases;

    const auto n = static_cast<std::size_t>(d.taps);
    const auto p_count = static_cast<std::size_t>(d.phases);
    std::vector<double> rows((p_count + 1) * n);
    for (std::size_t p = 0; p <= p_count; ++p)
        d.exact_taps(static_cast<double>(p) / static_cast<double>(p_count), rows.data() + p * n);
    d.coef.resize(2 * p_count * n);
    for (std::size_t p = 0; p < p_count; ++p) {
        for (std::size_t k = 0; k < n; ++k) {
            const double h0 = rows[p * n + k], h1 = rows[(p + 1) * n + k];
            d.coef[(p * n + k) * 2] = static_cast<float>(h0);
            d.coef[(p * n + k) * 2 + 1] = static_cast<float>(h1 - h0);
        }
    }
    return d;
}

resampler_design design_resampler_for_rates(double input_rate_hz, double bit_rate_hz, const resampler_spec& spec)
{
    if (!(bit_rate_hz > 0.0) || !std::isfinite(bit_rate_hz))
        throw std::invalid_argument("bit rate " + fmt(bit_rate_hz) + " bit/s: must be > 0");
    const double ratio = input_rate_hz / (2.0 * bit_rate_hz);
    if (!(ratio >= resampler_min_ratio && ratio <= resampler_max_ratio)) {
        throw std::invalid_argument(
            "input sample rate " + fmt(input_rate_hz) + " Hz at bit rate " + fmt(bit_rate_hz) + " bit/s is " +
            fmt(input_rate_hz / bit_rate_hz) + " samples per bit: allowed " + fmt(2.0 * resampler_min_ratio) + " .. " +
            fmt(2.0 * resampler_max_ratio) + " samples per bit (" + fmt(2.0 * resampler_min_ratio * bit_rate_hz) +
            " .. " + fmt(2.0 * resampler_max_ratio * bit_rate_hz) + " Hz at this bit rate)");
    }
    return design_resampler(ratio, spec);
}

fixed_pos to_fixed_step(double ratio)
{
    if (!(ratio > 0.0 && ratio < 2147483648.0))
        throw std::invalid_argument("resampler step ratio " + fmt(ratio) + " is out of range (allowed: 0 < ratio < 2^31)");
    return static_cast<fixed_pos>(std::llround(ratio * two_pow_32));
}

cf32 resample_at(const cf32* in, std::size_t in_len, long long i, std::uint32_t frac, const resampler_design& d) noexcept
{
    const int n = d.taps;
    const std::size_t p = frac >> (fixed_frac_bits - resampler_phase_bits);
    const float mu = static_cast<float>(frac & 0xFFFFFFu) * two_pow_minus_24;
    const float* row = d.coef.data() + p * static_cast<std::size_t>(n) * 2;
    const long long first = i - n / 2 + 1;
    const auto len = static_cast<long long>(in_len);
    float acc_re = 0.0f, acc_im = 0.0f;
    if (first >= 0 && first + n <= len) {
        const cf32* x = in + first;
        for (int k = 0; k < n; ++k) {
            const float c = row[2 * k] + mu * row[2 * k + 1];
            acc_re = acc_re + c * x[k].real();
            acc_im = acc_im + c * x[k].imag();
        }
    } else {
        // Near the edges: the same sum in the same order, absent samples as zero (what a
        // kernel that pads its input with zeros computes).
        for (int k = 0; k < n; ++k) {
            const long long idx = first + k;
            const cf32 x = idx < 0 || idx >= len ? cf32(0.0f) : in[idx];
            const float c = row[2 * k] + mu * row[2 * k + 1];
            acc_re = acc_re + c * x.real();
            acc_im = acc_im + c * x.imag();
        }
    }
    return {acc_re, acc_im};
}

void resample(const cf32* in, std::size_t in_len, fixed_pos first_pos, fixed_pos step, cf32* out, std::size_t n_out,
              const resampler_design& d)
{
    for (std::size_t m = 0; m < n_out; ++m) {
        const fixed_pos pos = first_pos + static_cast<fixed_pos>(m) * step;
        out[m] = resample_at(in, in_len, static_cast<long long>(pos >> fixed_frac_bits), static_cast<std::uint32_t>(pos),
                             d);
    }
}

void resample_reference(const cf32* in, std::size_t in_len, fixed_pos first_pos, fixed_pos step, cf64* out,
                        std::size_t n_out, const resampler_design& d)
{
    const int n = d.taps;
    std::vector<double> h(static_cast<std::size_t>(n));
    const auto len = static_cast<long long>(in_len);
    for (std::size_t m = 0; m < n_out; ++m) {
        const fixed_pos pos = first_pos + static_cast<fixed_pos>(m) * step;
        const auto i = static_cast<long long>(pos >> fixed_frac_bits);
        const double f = static_cast<double>(static_cast<std::uint32_t>(pos)) / two_pow_32;
        d.exact_taps(f, h.data());
        cf64 acc = 0.0;
        for (int k = 0; k < n; ++k) {
            const long long idx = i - n / 2 + 1 + k;
            if (idx < 0 || idx >= len) continue;
            acc += h[static_cast<std::size_t>(k)] * cf64(in[idx].real(), in[idx].imag());
        }
        out[m] = acc;
    }
}

output_ranges output_range(fixed_pos first_pos, fixed_pos step, std::uint64_t in_begin, std::uint64_t in_end,
                           const resampler_design& d)
{
    // Smallest m >= 0 with first_pos + m step >= x (x a fixed-point position).
    const auto first_at_or_after = [&](fixed_pos x) -> std::uint64_t {
        if (x <= first_pos) return 0;
        return (x - first_pos + step - 1) / step;
    };
    const auto range_of = [&](std::uint64_t lo, std::uint64_t hi) {  // positions in [lo, hi) samples
        index_range r;
        if (hi <= lo) return r;
        r.begin = first_at_or_after(lo << fixed_frac_bits);
        r.end = first_at_or_after(hi << fixed_frac_bits);
        if (r.end < r.begin) r.end = r.begin;
        return r;
    };
    output_ranges o;
    o.positioned = range_of(in_begin, in_end);
    // Output at floor position i reads i - N/2 + 1 .. i + N/2: all inside [in_begin, in_end)
    // iff in_begin + N/2 - 1 <= i <= in_end - N/2 - 1.
    const auto half = static_cast<std::uint64_t>(d.filter_half_span());
    if (in_end >= half) o.supported = range_of(in_begin + half - 1, in_end - half);
    return o;
}

}  // namespace paq::dsp
