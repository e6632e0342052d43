#include "sim/simulator.hpp"

#include "dsp/fec_stream.hpp"
#include "dsp/soqpsk.hpp"
#include "dsp/waveform.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <iomanip>
#include <numbers>
#include <optional>
#include <random>
#include <span>
#include <sstream>
#include <stdexcept>
#include <utility>

namespace paq::sim {

using namespace paq::dsp;

namespace {
constexpr double pi = std::numbers::pi;
constexpr int interp_half = simulator::channel_delay_samples();
constexpr double kaiser_beta = 8.0;
constexpr std::size_t flight_update_samples = 256;  ///< channel re-computed this often

double kaiser(double x, double half)
{
    const double r = x / half;
    if (std::abs(r) > 1.0) return 0.0;
    return std::cyl_bessel_i(0.0, kaiser_beta * std::sqrt(1.0 - r * r)) / std::cyl_bessel_i(0.0, kaiser_beta);
}

/// An independent random stream per impairment, so that switching one on leaves the others'
/// draws (and the AWGN's, from the main generator) as they were: impaired and clean runs of
/// one seed differ only by the impairment.
std::mt19937_64 sub_rng(std::uint64_t seed, std::uint32_t tag)
{
    std::seed_seq seq{static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32), tag};
    return std::mt19937_64(seq);
}
constexpr std::uint32_t rng_tag_wiener = 0x57494e52u;  // "WINR"
constexpr std::uint32_t rng_tag_mask = 0x4d41534bu;    // "MASK"
constexpr std::uint32_t rng_tag_dc = 0x44434f46u;      // "DCOF"
constexpr std::uint32_t rng_tag_noise = 0x4e4f4953u;   // "NOIS": a second channel's noise on
constexpr std::uint32_t rng_tag_shadow = 0x53484144u;  // "SHAD": each channel's fades
constexpr std::uint32_t rng_tag_stream = 0x5354524du;  // "STRM": where a coded stream stands at the first packet

// ---- Resampler -------------------------------------------------------------------------
//
// Band-limited interpolation of the channel output (2 samples per transmitter bit) at any
// time tau: y(tau) = sum_k c[k] h(tau - k), h(x) = a sinc(a x) w(x / (H / a)) with w a Kaiser
// window of beta resampler_beta over |x| < H / a, a = min(1, output rate / channel rate) (an
// anti-alias cutoff below 2 samples per bit, else the channel's Nyquist). The kernel is
// tabulated at resampler_phases fractional positions per sample and linearly interpolated
// between them (error ~ pi^2 / (8 P^2) per tap, far below the window's own).
// Measured (noiseless edwards3 at 25 MS/s for 10.3125 Mbit/s, 200,000 samples) against the
// same kind of kernel 800 taps long: half length 16 / 32 / 64 -> -64 / -68 / -72 dB; beta 6 / 8
// / 12 changes that by under 1.5 dB (what is left is the signal's own energy near the channel's
// Nyquist frequency, which a longer kernel cuts more sharply). 32 (64 taps) is 40 dB below
// the noise at Eb/N0 30 dB; test_simulator checks it.
constexpr double resampler_beta = 8.0;
constexpr int resampler_phases = 4096;

double kaiser_beta_window(double x, double half, double beta)
{
    const double r = x / half;
    if (std::abs(r) >= 1.0) return 0.0;
    return std::cyl_bessel_i(0.0, beta * std::sqrt(1.0 - r * r)) / std::cyl_bessel_i(0.0, beta);
}

class sinc_resampler {
public:
    sinc_resampler(int half, double cutoff)
        : taps_(2 * static_cast<int>(std::ceil(half / cutoff - 1e-9))),
          table_(static_cast<std::size_t>(resampler_phases + 1) * static_cast<std::size_t>(taps_))
    {
        const double support = half / cutoff;
        const int hc = taps_ / 2;
        for (int p = 0; p <= resampler_phases; ++p) {
            const double f = static_cast<double>(p) / resampler_phases;
            for (int j = 0; j < taps_; ++j) {
                const double x = f + hc - 1 - j;  // distance of tap j from the wanted time
                const double ax = cutoff * x;
                const double sinc = std::abs(ax) < 1e-12 ? 1.0 : std::sin(pi * ax) / (pi * ax);
                table_[static_cast<std::size_t>(p) * static_cast<std::size_t>(taps_) + static_cast<std::size_t>(j)] =
                    cutoff * sinc * kaiser_beta_window(x, support, resampler_beta);
            }
        }
    }
    /// Number of input samples per output: src[0 .. taps()-1] = c[k0 - taps()/2 + 1 ..
    /// k0 + taps()/2] for tau = k0 + f.
    [[nodiscard]] int taps() const noexcept { return taps_; }
    [[nodiscard]] cf64 interpolate(const cf64* src, double f) const noexcept
    {
        const double pos = f * resampler_phases;
        const auto p = std::min(static_cast<int>(pos), resampler_phases - 1);
        const double a = pos - p;
        const double* t0 = &table_[static_cast<std::size_t>(p) * static_cast<std::size_t>(taps_)];
        const double* t1 = t0 + taps_;
        double re = 0.0, im = 0.0;
        for (int j = 0; j < taps_; ++j) {
            const double h = t0[j] + a * (t1[j] - t0[j]);
            re += h * src[j].real();
            im += h * src[j].imag();
        }
        return {re, im};
    }

private:
    int taps_;
    std::vector<double> table_;
};

// ---- Phase noise shaped to a mask ----------------------------------------------------------
//
// White Gaussian noise through a cascade of first-order sections (poles and zeros on the
// real axis, bilinear transform with each corner prewarped) whose log-magnitude follows the
// mask's log-log slopes: from half a decade below the mask's lowest breakpoint to half a
// decade above its highest offset, in intervals of a quarter decade; in an interval
// [f_a, f_b] of ratio q where the target falls at s dB/decade, alpha = -s / 20 (0 .. 2)
// poles' worth of slope is placed: alpha <= 1: a pole at f_a and a zero at f_a q^alpha;
// 1 < alpha <= 2: two poles at f_a and zeros at f_a q^(alpha-1) and f_b. The mean slope over
// each interval is then the target's. The target is the mask at the edges, pre-distorted
// once by the response's error there. Below the lowest edge the PSD is flat; one last pole
// makes it fall at 20 dB/decade beyond the highest. One gain sets the level (mean dB error
// over the edges in the standard's band 0). Measured (test_simulator): within 1 dB of the
// mask away from its corners; the corners are rounded (+2.7 dB at 100 Hz, -2.5 dB just
// below a quarter of the bit rate), as first-order sections make them.
/// The integral of g from a to b > a > 0 by trapezoids on a log grid of per_decade points a
/// decade (at least one interval; the last point exactly b).
template <class G>
double log_trapezoid(double a, double b, double per_decade, const G& g)
{
    const int n = std::max(1, static_cast<int>(std::ceil(per_decade * std::log10(b / a))));
    const double r = std::pow(b / a, 1.0 / n);
    double sum = 0.0;
    for (int i = 0; i < n; ++i) {
        const double fl = a * std::pow(r, i), fh = i + 1 == n ? b : fl * r;
        sum += 0.5 * (g(fl) + g(fh)) * (fh - fl);
    }
    return sum;
}

struct first_order {
    double b0, b1, a1;  // y[n] = b0 x[n] + b1 x[n-1] - a1 y[n-1]
};

class mask_phase_noise {
public:
    /// level_db(f): L(f) in dBc/Hz, defined from f_lo to f_hi (the curve's first and last
    /// offsets; beyond f_hi falling at 20 dB/decade).
    template <class Level>
    mask_phase_noise(double fs_hz, double f_lo, double f_hi, Level level_db, std::uint64_t seed)
        : fs_hz_(fs_hz), rng_(sub_rng(seed, rng_tag_mask))
    {
        // Edges a quarter decade apart from half a decade below the mask's lowest breakpoint to
        // half a decade above its highest offset (at most 0.4 fs), so that its corners there
        // are inside the fitted band; the curve's breakpoints are on this grid.
        const double e_lo = f_lo / std::sqrt(10.0), e_hi = std::min(f_hi * std::sqrt(10.0), 0.4 * fs_hz);
        std::vector<double> edges;
        for (int k = 0; e_lo * std::pow(10.0, k / 4.0) < e_hi * (1 - 1e-9); ++k) edges.push_back(e_lo * std::pow(10.0, k / 4.0));
        edges.push_back(e_hi);
        std::vector<double> mask_db(edges.size()), target_db(edges.size());
        for (std::size_t i = 0; i < edges.size(); ++i) mask_db[i] = target_db[i] = level_db(edges[i]);
        // The sections' response rounds the corners of the straight-line asymptotes (a first-
        // order corner is 3 dB off its asymptote): pre-distort the target once by the error at
        // the edges and design again (worst error at the edges 4.1 -> 1.8 dB; more passes do
        // not converge: sharpening a corner needs slopes the sections cannot make).
        for (int pass = 0; pass < 2; ++pass) {
            design(fs_hz, edges, target_db);
            double sum_db = 0.0;
            int in_band = 0;
            std::vector<double> resp_db(edges.size());
            for (std::size_t i = 0; i < edges.size(); ++i) {
                resp_db[i] = 10.0 * std::log10(response_power(edges[i], fs_hz) / fs_hz);
                if (edges[i] >= f_lo * (1 - 1e-9) && edges[i] <= f_hi * (1 + 1e-9)) {
                    sum_db += mask_db[i] - resp_db[i];
                    ++in_band;
                }
            }
            const double gain_db = sum_db / in_band;
            gain_ = std::pow(10.0, gain_db / 20.0);
            for (std::size_t i = 0; i < edges.size(); ++i) target_db[i] -= (resp_db[i] + gain_db - mask_db[i]);
        }
        lowest_corner_hz_ = edges.front();
        x1_.assign(sec_.size(), 0.0);
        y1_.assign(sec_.size(), 0.0);
    }

    /// Runs the filter into its steady state: 6 time constants of the lowest corner (the
    /// state's variance then within e^-12 of stationary).
    void warm_up()
    {
        const auto warm = static_cast<std::size_t>(std::ceil(6.0 * fs_hz_ / (2 * pi * lowest_corner_hz_)));
        for (std::size_t i = 0; i < warm; ++i) (void)next();
    }

    /// Variance of the output over the offsets above_hz .. fs / 2 (both sidebands):
    /// gain^2 (2 / fs) * integral of |H|^2, on a log grid of 64 points a decade from the
    /// lowest corner / 100 (below that the response is flat: a rectangle at its midpoint,
    /// which a weight rising there, the high-pass's, makes a negligible underestimate).
    [[nodiscard]] double variance_above(double above_hz) const
    {
        return variance_above(above_hz, [](double) { return 1.0; });
    }

    /// The same with the PSD weighted by weight(f) (a filter's power response after this one).
    template <class Weight>
    [[nodiscard]] double variance_above(double above_hz, Weight weight) const
    {
        above_hz = std::max(above_hz, 0.0);  // offsets, not frequencies: nothing below 0
        const double nyq = fs_hz_ / 2;
        const double f0 = lowest_corner_hz_ / 100.0;
        double sum = 0.0;
        const auto power = [&](double f) { return response_power(f, fs_hz_) * weight(f); };
        if (above_hz < f0) sum += power(0.5 * (above_hz + f0)) * (f0 - above_hz);
        const double a = std::max(above_hz, f0);
        if (a < nyq) sum += log_trapezoid(a, nyq, 64.0, power);
        return gain_ * gain_ * 2.0 / fs_hz_ * sum;
    }

    /// Two-sided PSD of the output at the offset f_hz, rad^2/Hz.
    [[nodiscard]] double psd(double f_hz) const { return gain_ * gain_ * response_power(f_hz, fs_hz_) / fs_hz_; }

    double next()
    {
        double v = normal_(rng_);
        for (std::size_t i = 0; i < sec_.size(); ++i) {
            const auto& s = sec_[i];
            const double y = s.b0 * v + s.b1 * x1_[i] - s.a1 * y1_[i];
            x1_[i] = v;
            y1_[i] = y;
            v = y;
        }
        return gain_ * v;
    }

    /// |H(e^{j 2 pi f / fs})|^2 of the cascade (without the gain).
    [[nodiscard]] double response_power(double f_hz, double fs_hz) const
    {
        const cf64 z1 = std::polar(1.0, -2 * pi * f_hz / fs_hz);
        cf64 h = 1.0;
        for (const auto& s : sec_) h *= (s.b0 + s.b1 * z1) / (1.0 + s.a1 * z1);
        return std::norm(h);
    }

private:
    /// The cascade for straight-line slopes between the edges' target levels, and the final
    /// pole at the last edge.
    void design(double fs_hz, const std::vector<double>& edges, const std::vector<double>& target_db)
    {
        sec_.clear();
        for (std::size_t i = 0; i + 1 < edges.size(); ++i) {
            const double fa = edges[i], fb = edges[i + 1];
            const double q = fb / fa;
            const double slope_db_dec = (target_db[i + 1] - target_db[i]) / std::log10(q);
            const double alpha = std::clamp(-slope_db_dec / 20.0, 0.0, 2.0);
            if (alpha < 1e-6) continue;  // flat: a pole and a zero at one place cancel
            if (alpha <= 1.0) {
                add(fs_hz, fa, fa * std::pow(q, alpha));
            } else {
                add(fs_hz, fa, fa * std::pow(q, alpha - 1.0));
                add(fs_hz, fa, fb);
            }
        }
        // Beyond the standard's highest offset: one pole, -20 dB/decade. Not bilinear (that
        // would put a zero at fs/2): y = (1 - a) x + a y[n-1], a = exp(-2 pi f / fs).
        const double a = std::exp(-2 * pi * edges.back() / fs_hz);
        sec_.push_back({1.0 - a, 0.0, -a});
    }

    /// A pole at pole_hz and a zero at zero_hz, unit gain at DC (bilinear, prewarped).
    void add(double fs_hz, double pole_hz, double zero_hz)
    {
        const double k = 2.0 * fs_hz;
        auto warp = [&](double f) { return k * std::tan(pi * std::min(f, 0.49 * fs_hz) / fs_hz); };
        const double kp = k / warp(pole_hz);
        const double a0 = 1.0 + kp;
        const double kz = k / warp(zero_hz);
        sec_.push_back({(1.0 + kz) / a0, (1.0 - kz) / a0, (1.0 - kp) / a0});
    }

    std::vector<first_order> sec_;
    double fs_hz_;
    double lowest_corner_hz_ = 0.0;
    std::vector<double> x1_, y1_;
    double gain_ = 1.0;
    std::mt19937_64 rng_;
    std::normal_distribution<double> normal_{0.0, 1.0};
};
}  // namespace

namespace {
/// Two first-order high-pass sections at fc (bilinear, prewarped): H = (s / (s + wc))^2.
class phase_highpass {
public:
    phase_highpass(double fs_hz, double fc_hz) : fs_hz_(fs_hz)
    {
        const double k = 2.0 * fs_hz, wc = k * std::tan(pi * fc_hz / fs_hz);
        b0_ = k / (k + wc);
        a1_ = (wc - k) / (k + wc);
    }

    double next(double x)
    {
        if (!started_) {  // from the first input's level: no step at the start
            x1_[0] = x;
            started_ = true;
        }
        for (int i = 0; i < 2; ++i) {  // y = b0 (x - x[n-1]) - a1 y[n-1], twice
            const double y = b0_ * (x - x1_[i]) - a1_ * y1_[i];
            x1_[i] = x;
            y1_[i] = y;
            x = y;
        }
        return x;
    }

    /// |H(e^{j 2 pi f / fs})|^2.
    [[nodiscard]] double power(double f_hz) const
    {
        const cf64 z1 = std::polar(1.0, -2 * pi * f_hz / fs_hz_);
        const cf64 h = b0_ * (1.0 - z1) / (1.0 + a1_ * z1);
        return std::norm(h * h);
    }

private:
    double fs_hz_, b0_ = 1.0, a1_ = 0.0;
    bool started_ = false;
    std::array<double, 2> x1_{}, y1_{};  ///< each section's last input and output
};

// Breakpoints of the IRIG 106 chapter 2 transmitter phase-noise curve (continuous SSB
// phase-noise PSD); docs/SIGNAL-CHAIN.md says where they come from.
constexpr std::array<phase_noise_point, 3> irig106_breakpoints{{{10.0, -30.0}, {100.0, -60.0}, {1e6, -100.0}}};

/// Log-log interpolation between the points; the first's level below it, the last's beyond.
double log_log(std::span<const phase_noise_point> pts, double f_hz)
{
    if (f_hz <= pts.front().f_hz) return pts.front().dbc_hz;
    for (std::size_t i = 0; i + 1 < pts.size(); ++i) {
        if (f_hz <= pts[i + 1].f_hz) {
            const double u = std::log10(f_hz / pts[i].f_hz) / std::log10(pts[i + 1].f_hz / pts[i].f_hz);
            return pts[i].dbc_hz + u * (pts[i + 1].dbc_hz - pts[i].dbc_hz);
        }
    }
    return pts.back().dbc_hz;
}
}  // namespace

std::vector<phase_noise_point> irig106_phase_noise_curve(double bit_rate_hz)
{
    const double top = bit_rate_hz / 4.0;  // the standard's highest offset
    std::vector<phase_noise_point> curve;
    for (const auto& p : irig106_breakpoints)
        if (p.f_hz < top) curve.push_back(p);
    curve.push_back({top, log_log(irig106_breakpoints, top)});
    return curve;
}

double phase_noise_dbc_hz(const std::vector<phase_noise_point>& curve, double f_hz)
{
    if (curve.empty()) throw std::invalid_argument("phase_noise_dbc_hz: an empty curve");
    if (f_hz > curve.back().f_hz) return curve.back().dbc_hz - 20.0 * std::log10(f_hz / curve.back().f_hz);
    return log_log(curve, f_hz);
}

double irig106_phase_noise_dbc_hz(double f_hz, double bit_rate_hz)
{
    // The breakpoints' own segments to a quarter of the bit rate (not the curve's last
    // segment ending there: that would round differently below 4 Mbit/s and change the
    // synthesis of recordings made before the curve existed).
    const double top = bit_rate_hz / 4.0;
    if (f_hz <= top) return log_log(irig106_breakpoints, f_hz);
    return log_log(irig106_breakpoints, top) - 20.0 * std::log10(f_hz / top);
}

void add_fractional_delay(std::vector<cf64>& taps, int half, double d, cf64 gain)
{
    for (std::size_t t = 0; t < taps.size(); ++t) {
        const double x = static_cast<double>(t) - half - d;  // distance from the delayed centre
        if (std::abs(x) > half) continue;
        const double sinc = std::abs(x) < 1e-12 ? 1.0 : std::sin(pi * x) / (pi * x);
        taps[t] += gain * sinc * kaiser(x, half);
    }
}

std::vector<std::string> channel_preset_names() { return {"awgn", "two-ray", "edwards3", "flight"}; }

channel_preset channel_preset_by_name(std::string_view name)
{
    // Ground-bounce model: a specular ray at 70-96% of the line of sight, 10-80 ns
    // late, and a weak diffuse ray around 155 ns. Phases put the specular notch inside the
    // signal band (a notch at f_n needs phase = pi + 2 pi f_n tau).
    if (name == "awgn") return {"awgn", {{1.0, 0.0, 0.0}}, false};
    if (name == "two-ray") return {"two-ray", {{1.0, 0.0, 0.0}, {0.9, 60.0, pi + 2 * pi * 2.0e6 * 60e-9}}, false};
    if (name == "edwards3")
        return {"edwards3", {{1.0, 0.0, 0.0}, {0.85, 40.0, pi - 2 * pi * 1.5e6 * 40e-9}, {0.05, 155.0, 1.0}}, false};
    if (name == "flight") return {"flight", {{1.0, 0.0, 0.0}, {0.83, 45.0, 0.0}, {0.05, 155.0, 1.0}}, true};
    std::string allowed;
    for (const auto& n : channel_preset_names()) allowed += (allowed.empty() ? "" : ", ") + n;
    throw std::invalid_argument("unknown channel preset '" + std::string(name) + "' (allowed: " + allowed + ")");
}

namespace {
/// The whole of s as a double; nullopt when s is empty, is not a number, has text after the
/// number, or is beyond a double's range.
std::optional<double> whole_number(const std::string& s)
{
    std::size_t used = 0;
    double v = 0.0;
    try {
        v = std::stod(s, &used);
    } catch (const std::exception&) {
        return std::nullopt;
    }
    if (s.empty() || used != s.size()) return std::nullopt;
    return v;
}

/// text split at every comma (an empty text: one empty part).
std::vector<std::string_view> split_commas(std::string_view text)
{
    std::vector<std::string_view> parts;
    for (std::size_t pos = 0;;) {
        const std::size_t end = text.find(',', pos);
        parts.push_back(text.substr(pos, end == std::string_view::npos ? std::string_view::npos : end - pos));
        if (end == std::string_view::npos) break;
        pos = end + 1;
    }
    return parts;
}
}  // namespace

channel_ray parse_channel_ray(std::string_view text)
{
    const std::string s(text);
    const auto parts = split_commas(text);
    if (parts.size() != 3)
        throw std::invalid_argument("ray '" + s + "': expected AMPLITUDE,DELAY_NS,PHASE_RAD (three comma-separated numbers)");
    std::array<double, 3> v{};
    for (std::size_t i = 0; i < 3; ++i) {
        const std::string part(parts[i]);
        const auto x = whole_number(part);
        if (!x) throw std::invalid_argument("ray '" + s + "': '" + part + "' is not a number (expected AMPLITUDE,DELAY_NS,PHASE_RAD)");
        v[i] = *x;
    }
    return {v[0], v[1], v[2]};
}

namespace {
/// Splits "A,B" into two numbers; `what` names the expected form in the messages.
std::pair<double, double> parse_pair(std::string_view text, const char* what)
{
    const std::string s(text);
    const auto parts = split_commas(text);
    if (parts.size() != 2) throw std::invalid_argument("'" + s + "': expected " + what + " (two comma-separated numbers)");
    std::array<double, 2> v{};
    for (std::size_t i = 0; i < 2; ++i) {
        const std::string part(parts[i]);
        const auto x = whole_number(part);
        if (!x || !std::isfinite(*x))
            throw std::invalid_argument("'" + s + "': '" + part + "' is not a finite number (expected " + what + ")");
        v[i] = *x;
    }
    return {v[0], v[1]};
}
}  // namespace

agc_step parse_agc_step(std::string_view text)
{
    const auto [t, db] = parse_pair(text, "TIME_S,DB");
    return {t, db};
}

std::pair<double, double> parse_iq_imbalance(std::string_view text) { return parse_pair(text, "DB,DEG"); }

void apply_channel_setting(sim_config& cfg, std::string_view text)
{
    const std::string s(text);
    constexpr const char* keys = "preset, ebn0-db, gain-db, delay-ns, phase-rad, shadow-db, shadow-s, shadow-every-s";
    for (const auto part : split_commas(text)) {
        const auto eq = part.find('=');
        if (eq == std::string_view::npos || eq == 0)
            throw std::invalid_argument("'" + s + "': '" + std::string(part) + "' is not KEY=VALUE (keys: " + keys + ")");
        const std::string key(part.substr(0, eq)), value(part.substr(eq + 1));
        if (key == "preset") {
            (void)channel_preset_by_name(value);  // an unknown name is refused here, naming the presets
            cfg.preset = value;
            continue;
        }
        double* field = key == "ebn0-db"          ? &cfg.ebn0_db
                        : key == "gain-db"        ? &cfg.gain_db
                        : key == "delay-ns"       ? &cfg.delay_ns
                        : key == "phase-rad"      ? &cfg.phase_rad
                        : key == "shadow-db"      ? &cfg.shadow_depth_db
                        : key == "shadow-s"       ? &cfg.shadow_duration_s
                        : key == "shadow-every-s" ? &cfg.shadow_interval_s
                                                  : nullptr;
        if (field == nullptr) throw std::invalid_argument("'" + s + "': unknown key '" + key + "' (keys: " + keys + ")");
        if (key == "ebn0-db" && (value == "inf" || value == "+inf")) {
            *field = std::numeric_limits<double>::infinity();
            continue;
        }
        const auto x = whole_number(value);
        if (!x || !std::isfinite(*x))
            throw std::invalid_argument("'" + s + "': " + key + " '" + value + "' is not a finite number" +
                                        (key == "ebn0-db" ? " or inf" : ""));
        *field = *x;
    }
}

phase_noise_setting parse_phase_noise(std::string_view text)
{
    if (text.find(':') == std::string_view::npos) {
        const auto m = value_named(phase_noise_mask_names, text);
        if (!m || *m == phase_noise_mask::curve)
            throw std::invalid_argument("unknown phase noise '" + std::string(text) + "' (allowed: " +
                                        std::string(to_string(phase_noise_mask::none)) + ", " +
                                        std::string(to_string(phase_noise_mask::irig106)) +
                                        ", or a curve F:DBC,F:DBC,... of offsets in Hz and dBc/Hz)");
        return {*m, {}};
    }
    phase_noise_setting out{phase_noise_mask::curve, {}};
    auto trim = [](std::string_view t) {
        while (!t.empty() && (t.front() == ' ' || t.front() == '\t')) t.remove_prefix(1);
        while (!t.empty() && (t.back() == ' ' || t.back() == '\t')) t.remove_suffix(1);
        return t;
    };
    for (const auto raw : split_commas(text)) {
        const auto part = trim(raw);
        if (part.empty())
            throw std::invalid_argument("an empty curve point (a stray comma?) in '" + std::string(text) + "'");
        const auto colon = part.find(':');
        if (colon == std::string_view::npos)
            throw std::invalid_argument("curve point '" + std::string(part) + "' is not F:DBC (an offset in Hz and L(f) in dBc/Hz, e.g. 1e6:-100)");
        auto number = [&](std::string_view t) {
            const std::string str(trim(t));
            const auto x = whole_number(str);
            if (!x)
                throw std::invalid_argument("curve point '" + std::string(part) + "': '" + str +
                                            "' is not a number within a double's range (expected F:DBC, e.g. 1e6:-100)");
            return *x;
        };
        out.curve.push_back({number(part.substr(0, colon)), number(part.substr(colon + 1))});
    }
    return out;
}

void sim_config::set_phase_noise(std::string_view text)
{
    auto pn = parse_phase_noise(text);
    phase_noise = pn.mask;
    phase_noise_curve = std::move(pn.curve);
}

std::vector<phase_noise_point> sim_config::phase_noise_points() const
{
    switch (phase_noise) {
    case phase_noise_mask::irig106: return irig106_phase_noise_curve(bit_rate_hz);
    case phase_noise_mask::curve: return phase_noise_curve;
    case phase_noise_mask::none: break;
    }
    return {};
}

bool sim_config::resampled() const noexcept
{
    return !(sample_rate_hz == 2.0 * bit_rate_hz && clock_ppm == 0.0 && clock_drift_ppm_per_s == 0.0);
}

std::vector<std::string> sim_config::validate() const
{
    std::vector<std::string> e;
    auto add = [&](const std::string& field, double v, const std::string& range) {
        std::ostringstream os;
        os << field << " = " << v << " is out of range (allowed: " << range << ")";
        e.push_back(os.str());
    };
    try {
        (void)channel_preset_by_name(preset);
    } catch (const std::invalid_argument& ex) {
        e.emplace_back(std::string("preset: ") + ex.what());
    }
    if (std::isnan(ebn0_db) || ebn0_db < -10.0 || (std::isfinite(ebn0_db) && ebn0_db > 100.0))
        add("ebn0_db", ebn0_db, "-10 .. 100 dB, or inf for no noise");
    if (!(bit_rate_hz >= 1e6 && bit_rate_hz <= 30e6)) add("bit_rate_hz", bit_rate_hz, "1e6 .. 30e6 Hz");
    if (!(sample_rate_hz > 0.0) || !std::isfinite(sample_rate_hz)) {
        add("sample_rate_hz", sample_rate_hz, "> 0");
    } else if (bit_rate_hz >= 1e6 && bit_rate_hz <= 30e6 &&
               !(sample_rate_hz >= 1.9 * bit_rate_hz && sample_rate_hz <= 8.0 * bit_rate_hz)) {
        std::ostringstream os;
        os << 1.9 * bit_rate_hz << " .. " << 8.0 * bit_rate_hz << " Hz (1.9 .. 8 x bit_rate_hz " << bit_rate_hz << ")";
        add("sample_rate_hz", sample_rate_hz, os.str());
    }
    if (!(std::abs(clock_ppm) <= 1000.0)) add("clock_ppm", clock_ppm, "-1000 .. 1000 ppm");
    if (!(std::abs(clock_drift_ppm_per_s) <= 1000.0))
        add("clock_drift_ppm_per_s", clock_drift_ppm_per_s, "-1000 .. 1000 ppm/s");
    if (resampler_half_taps < 8 || resampler_half_taps > 512)
        add("resampler_half_taps", resampler_half_taps, "8 .. 512");
    if (!(gain_db >= -60.0 && gain_db <= 40.0)) add("gain_db", gain_db, "-60 .. 40 dB");
    if (agc_steps.size() > 8) add("agc_steps (count)", static_cast<double>(agc_steps.size()), "0 .. 8");
    for (std::size_t i = 0; i < agc_steps.size(); ++i) {
        const std::string f = "agc_steps[" + std::to_string(i) + "]";
        if (!(agc_steps[i].time_s >= 0.0 && agc_steps[i].time_s <= 1e6)) add(f + ".time_s", agc_steps[i].time_s, "0 .. 1e6 s");
        if (!(agc_steps[i].db >= -60.0 && agc_steps[i].db <= 60.0)) add(f + ".db", agc_steps[i].db, "-60 .. 60 dB");
    }
    if (!(std::abs(iq_gain_db) <= 6.0)) add("iq_gain_db", iq_gain_db, "-6 .. 6 dB");
    if (!(std::abs(iq_phase_deg) <= 45.0)) add("iq_phase_deg", iq_phase_deg, "-45 .. 45 degrees");
    if (!(dc_offset_dbc == -std::numeric_limits<double>::infinity() || (dc_offset_dbc >= -100.0 && dc_offset_dbc <= 0.0)))
        add("dc_offset_dbc", dc_offset_dbc, "-100 .. 0 dBc, or -inf for none");
    if (!(phase_noise_linewidth_hz >= 0.0 && phase_noise_linewidth_hz <= 1e5))
        add("phase_noise_linewidth_hz", phase_noise_linewidth_hz, "0 .. 1e5 Hz");
    if (!(phase_noise_above_hz == 0.0 || (phase_noise_above_hz >= 10.0 && phase_noise_above_hz <= sample_rate_hz / 4))) {
        std::ostringstream os;
        os << "0 (all of the phase noise), or 10 Hz .. a quarter of the sample rate (" << sample_rate_hz / 4 << " Hz)";
        add("phase_noise_above_hz", phase_noise_above_hz, os.str());
    } else if (phase_noise_above_hz > 0.0 && phase_noise_linewidth_hz == 0.0 && phase_noise == phase_noise_mask::none) {
        std::ostringstream os;
        os << "phase_noise_above_hz = " << phase_noise_above_hz
           << " given without phase noise (allowed: only with phase noise: a Wiener linewidth, or irig106 or a curve)";
        e.push_back(os.str());
    }
    if (phase_noise != phase_noise_mask::curve && !phase_noise_curve.empty()) {
        e.emplace_back("phase_noise_curve: " + std::to_string(phase_noise_curve.size()) +
                       " point(s) given with phase_noise " + std::string(to_string(phase_noise)) + " (allowed: only with curve)");
    } else if (phase_noise == phase_noise_mask::curve) {
        const auto& c = phase_noise_curve;
        if (c.empty() || c.size() > 16) add("phase_noise_curve (points)", static_cast<double>(c.size()), "1 .. 16");
        const double top = sample_rate_hz / 4;
        // Points are numbered from 0, as typed (the first F:DBC is [0]); offsets printed in
        // full (2.578125e6 is not 2.57812e6).
        auto point = [&](std::size_t i) {
            std::ostringstream os;
            os << std::setprecision(10) << "phase_noise_curve[" << i << "] (" << c[i].f_hz << ":" << c[i].dbc_hz << ")";
            return os.str();
        };
        for (std::size_t i = 0; i < c.size(); ++i) {
            const std::string f = point(i);
            if (!(c[i].f_hz >= 10.0 && c[i].f_hz <= top)) {
                std::ostringstream os;
                os << std::setprecision(10) << f << ": the offset is out of range (allowed: 10 .. " << top
                   << " Hz, a quarter of the sample rate)";
                e.push_back(os.str());
            }
            if (!(c[i].dbc_hz >= -200.0 && c[i].dbc_hz <= 0.0))
                e.push_back(f + ": the level is out of range (allowed: -200 .. 0 dBc/Hz)");
            if (i == 0 || !(std::isfinite(c[i].f_hz) && std::isfinite(c[i - 1].f_hz) && c[i].f_hz > 0.0 && c[i - 1].f_hz > 0.0))
                continue;
            if (!(c[i].f_hz > c[i - 1].f_hz)) {
                e.push_back(f + ": the offset is not above the one before it (allowed: increasing offsets)");
                continue;
            }
            if (!std::isfinite(c[i].dbc_hz) || !std::isfinite(c[i - 1].dbc_hz)) continue;
            const double slope = (c[i].dbc_hz - c[i - 1].dbc_hz) / std::log10(c[i].f_hz / c[i - 1].f_hz);
            if (!(slope <= 1e-9 && slope >= -40.0 - 1e-9)) {
                std::ostringstream os;
                os << std::setprecision(4) << f << ": the segment from the point before changes by " << slope
                   << " dB/decade (allowed: 0 .. -40 dB/decade, flat or falling as the synthesis makes it)";
                e.push_back(os.str());
            }
        }
    }
    if (!std::isfinite(cfo_hz) || std::abs(cfo_hz) >= sample_rate_hz / 2) add("cfo_hz", cfo_hz, "|x| < sample_rate / 2");
    if (!std::isfinite(phase_rad)) add("phase_rad", phase_rad, "finite");
    if (!(timing_offset_samples >= 0.0 && timing_offset_samples < 1.0))
        add("timing_offset_samples", timing_offset_samples, "0 <= x < 1");
    if (!(flight_start_s >= 0.0 && flight_start_s < 1e6)) add("flight_start_s", flight_start_s, "0 .. 1e6 s");
    if (extra_rays.size() > 8) add("extra_rays (count)", static_cast<double>(extra_rays.size()), "0 .. 8");
    for (std::size_t i = 0; i < extra_rays.size(); ++i) {
        const auto& r = extra_rays[i];
        const std::string f = "extra_rays[" + std::to_string(i) + "]";
        if (!(r.amplitude >= 0.0 && r.amplitude <= 10.0)) add(f + ".amplitude", r.amplitude, "0 .. 10 (of the line of sight)");
        if (!(r.delay_ns >= 0.0 && r.delay_ns <= 2000.0)) add(f + ".delay_ns", r.delay_ns, "0 .. 2000 ns");
        if (!std::isfinite(r.phase_rad)) add(f + ".phase_rad", r.phase_rad, "finite");
    }
    if (channel < 0 || channel > 15) add("channel", channel, "0 .. 15");
    if (!(delay_ns >= 0.0 && delay_ns <= 2000.0)) add("delay_ns", delay_ns, "0 .. 2000 ns");
    if (!(shadow_depth_db >= 0.0 && shadow_depth_db <= 60.0)) add("shadow_depth_db", shadow_depth_db, "0 (none) .. 60 dB");
    if (shadow_depth_db > 0.0) {
        if (!(shadow_duration_s >= 1e-3 && shadow_duration_s <= 60.0)) add("shadow_duration_s", shadow_duration_s, "1e-3 .. 60 s");
        if (!(shadow_interval_s > shadow_duration_s && shadow_interval_s <= 3600.0)) {
            std::ostringstream os;
            os << "above shadow_duration_s (" << shadow_duration_s << " s) .. 3600 s";
            add("shadow_interval_s", shadow_interval_s, os.str());
        }
    }
    if (start_offset_samples < -1 || start_offset_samples >= static_cast<long long>(waveform::L_pkt))
        add("start_offset_samples", static_cast<double>(start_offset_samples), "-1 (from seed) or 0 .. 12671");
    return e;
}

struct simulator::impl {
    sim_config cfg;
    channel_preset preset;
    sim_truth truth;
    pn_generator pn;
    std::optional<fec_framing> framing;  ///< cfg.fec's, a codeword-aligned code
    std::optional<stream_encoder> stream;  ///< cfg.fec's, a code sent as the continuous stream
    soqpsk_modulator mod;
    std::mt19937_64 rng;
    std::normal_distribution<double> normal{0.0, 1.0};
    double noise_std = 0.0;  ///< per real component
    double channel_rate_hz = 0.0;  ///< 2 x bit rate: the modulator's and the channel's rate
    std::vector<cf64> taps;
    std::vector<cf64> history;  ///< last taps.size()-1 modulated samples
    std::vector<cf64> pending;  ///< modulated samples not yet through the channel
    std::size_t pending_next = 0;  ///< next sample of pending to put through the channel
    std::uint64_t g = 0;        ///< global index of the next channel output sample
    std::uint64_t drop = 0;     ///< channel samples dropped at the start
    std::uint64_t packets = 0;  ///< packets modulated
    std::vector<std::uint8_t> bits;

    // Resampling (cfg.resampled()): output sample n is the channel output at tau(n).
    bool resample = false;
    std::unique_ptr<sinc_resampler> resampler;
    std::vector<cf64> cbuf;         ///< channel output from channel index cbuf_first on
    long long cbuf_first = 0;
    long double out_per_channel = 1.0L;  ///< r = sample_rate / channel rate (nominal clocks)
    std::uint64_t n_out = 0;        ///< output samples produced

    // Field impairments at the output.
    bool wiener = false;
    double wiener_std = 0.0;
    double wiener_phase = 0.0;
    std::mt19937_64 wiener_rng;
    std::normal_distribution<double> wiener_normal{0.0, 1.0};  ///< its own: a distribution caches draws
    std::unique_ptr<mask_phase_noise> mask_pn;
    std::optional<phase_highpass> highpass;  ///< cfg.phase_noise_above_hz
    double wiener_unwrapped = 0.0;           ///< the random walk, not wrapped (for the high-pass)
    bool iq = false;
    cf64 iq_mu = 1.0, iq_nu = 0.0;
    bool dc_on = false;
    cf64 dc = 0.0;
    bool gain_on = false;
    double gain = 1.0;                                      ///< linear, at the current sample
    // Shadowing fades (cfg.shadow_depth_db): the current or next fade's span, output seconds.
    bool shadow = false;
    std::mt19937_64 shadow_rng;
    double fade_start_s = 0.0, fade_end_s = 0.0;
    std::vector<std::pair<std::uint64_t, double>> steps;    ///< (first output sample, linear factor)
    std::size_t next_step = 0;

    explicit impl(const sim_config& c)
        : cfg(c), preset(channel_preset_by_name(c.preset)), pn(c.pattern), mod(0.0), rng(c.seed)
    {
        const auto errors = cfg.validate();
        if (!errors.empty()) {
            std::string msg = "invalid simulator configuration:";
            for (const auto& s : errors) msg += "\n  " + s;
            throw std::invalid_argument(msg);
        }
        if (const auto code = ldpc_code_of(cfg.fec)) {
            framing = aligned_framing_for(cfg.fec);
            if (const auto layout = stream_layout_for(*code)) {
                // The link came up mid-frame, somewhere the seed decides (the same on every
                // channel of one transmission).
                auto r = sub_rng(cfg.seed, rng_tag_stream);
                stream.emplace(*code, static_cast<int>(r() % static_cast<std::uint64_t>(layout->frame_bits())));
            }
            (void)ldpc::encoder::get(*code);  // its elimination before the first sample, not inside
        }
        channel_rate_hz = 2.0 * cfg.bit_rate_hz;
        preset.rays.insert(preset.rays.end(), cfg.extra_rays.begin(), cfg.extra_rays.end());
        drop = cfg.start_offset_samples >= 0 ? static_cast<std::uint64_t>(cfg.start_offset_samples)
                                             : rng() % waveform::L_pkt;
        // Another channel of the same transmission: the same start, noise of its own.
        if (cfg.channel > 0) rng = sub_rng(cfg.seed, rng_tag_noise + static_cast<std::uint32_t>(cfg.channel));
        if (cfg.shadow_depth_db > 0.0) {
            shadow = true;
            shadow_rng = sub_rng(cfg.seed, rng_tag_shadow + static_cast<std::uint32_t>(cfg.channel));
        }
        if (std::isfinite(cfg.ebn0_db)) {
            // Eb = unit signal power x output samples per bit; N0 = complex noise variance per
            // output sample (the noise is white over the output band).
            const double samples_per_bit = cfg.sample_rate_hz / cfg.bit_rate_hz;
            const double sigma_c2 = samples_per_bit / std::pow(10.0, cfg.ebn0_db / 10.0);
            noise_std = std::sqrt(sigma_c2 / 2.0);
        }
        double max_delay_ns = 80.0;
        for (const auto& r : preset.rays) max_delay_ns = std::max(max_delay_ns, r.delay_ns + cfg.delay_ns);
        const auto span = static_cast<std::size_t>(2 * interp_half + 2 + std::ceil(max_delay_ns * 1e-9 * channel_rate_hz));
        taps.assign(span, 0.0);
        history.assign(span - 1, 0.0);
        update_taps(cfg.flight_start_s);

        resample = cfg.resampled();
        if (resample) {
            out_per_channel = static_cast<long double>(cfg.sample_rate_hz) / static_cast<long double>(channel_rate_hz);
            resampler = std::make_unique<sinc_resampler>(cfg.resampler_half_taps, std::min(1.0, cfg.sample_rate_hz / channel_rate_hz));
            // Channel indices before 0 are silence (the transmitter starts at channel sample 0).
            cbuf_first = -resampler->taps() / 2;
            cbuf.assign(static_cast<std::size_t>(resampler->taps() / 2), cf64(0.0));
        }
        if (cfg.phase_noise_linewidth_hz > 0.0) {
            wiener = true;
            wiener_std = std::sqrt(2 * pi * cfg.phase_noise_linewidth_hz / cfg.sample_rate_hz);
            wiener_rng = sub_rng(cfg.seed, rng_tag_wiener);
        }
        if (cfg.phase_noise != phase_noise_mask::none) {
            if (cfg.phase_noise == phase_noise_mask::irig106) {
                const double rb = cfg.bit_rate_hz;
                mask_pn = std::make_unique<mask_phase_noise>(cfg.sample_rate_hz, 10.0, rb / 4.0,
                                                             [rb](double f) { return irig106_phase_noise_dbc_hz(f, rb); }, cfg.seed);
            } else {
                const auto& curve = cfg.phase_noise_curve;
                mask_pn = std::make_unique<mask_phase_noise>(cfg.sample_rate_hz, curve.front().f_hz, curve.back().f_hz,
                                                             [&curve](double f) { return phase_noise_dbc_hz(curve, f); }, cfg.seed);
            }
            mask_pn->warm_up();
        }
        if (cfg.phase_noise_above_hz > 0.0) highpass.emplace(cfg.sample_rate_hz, cfg.phase_noise_above_hz);
        if (cfg.iq_gain_db != 0.0 || cfg.iq_phase_deg != 0.0) {
            iq = true;
            const double gi = std::pow(10.0, cfg.iq_gain_db / 20.0);
            const double phi = cfg.iq_phase_deg * pi / 180.0;
            iq_mu = (1.0 + gi * std::polar(1.0, -phi)) / 2.0;
            iq_nu = (1.0 - gi * std::polar(1.0, phi)) / 2.0;
        }
        if (std::isfinite(cfg.dc_offset_dbc)) {
            dc_on = true;
            auto r = sub_rng(cfg.seed, rng_tag_dc + static_cast<std::uint32_t>(cfg.channel));
            const double phase = std::uniform_real_distribution<double>(0.0, 2 * pi)(r);
            dc = std::polar(std::pow(10.0, cfg.dc_offset_dbc / 20.0), phase);
        }
        if (cfg.gain_db != 0.0 || !cfg.agc_steps.empty()) {
            gain_on = true;
            gain = std::pow(10.0, cfg.gain_db / 20.0);
            for (const auto& st : cfg.agc_steps)
                steps.emplace_back(static_cast<std::uint64_t>(std::ceil(st.time_s * cfg.sample_rate_hz)), std::pow(10.0, st.db / 20.0));
            std::stable_sort(steps.begin(), steps.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
        }
    }

    void update_taps(double t_s)
    {
        std::fill(taps.begin(), taps.end(), cf64(0.0));
        std::vector<channel_ray> rays = preset.rays;
        if (preset.flight && rays.size() >= 2) {
            // Specular ray of a manoeuvring aircraft: delay 10..80 ns and amplitude 0.70..0.96
            // drift on 11 s and 7 s cycles; its phase turns with a 37 Hz differential Doppler.
            rays[1].delay_ns = 45.0 - 35.0 * std::cos(2 * pi * t_s / 11.0);
            rays[1].amplitude = 0.83 - 0.13 * std::cos(2 * pi * t_s / 7.0);
            rays[1].phase_rad = 2 * pi * 37.0 * t_s;
        }
        for (const auto& r : rays) {
            const double d = (r.delay_ns + cfg.delay_ns) * 1e-9 * channel_rate_hz + cfg.timing_offset_samples;
            add_fractional_delay(taps, interp_half, d, std::polar(r.amplitude, r.phase_rad));
        }
        // Normalize the received SOQPSK-TG power (not the tap energy) to 1, so Eb/N0 is the
        // ratio at the receiver input: sum_ab h_a h_b* R_x(b - a).
        const double p = received_power(taps.data(), taps.size());
        const double s = 1.0 / std::sqrt(p);
        for (auto& v : taps) v *= s;
    }

    /// Exact output position (in output samples, from the first) of channel time x.
    [[nodiscard]] long double output_position(long double x) const
    {
        const long double v = x - static_cast<long double>(drop);
        if (!resample) return v;
        // Invert tau(n) = drop + (n / r) (b + a n): a n^2 + b n - r v = 0.
        const long double b = 1.0L + 1e-6L * cfg.clock_ppm;
        const long double a = 0.5e-6L * cfg.clock_drift_ppm_per_s / cfg.sample_rate_hz;
        const long double rv = out_per_channel * v;
        return 2.0L * rv / (b + std::sqrt(b * b + 4.0L * a * rv));
    }

    /// Transmitter time of output sample n, in channel samples: tau(n) = drop + 2 Rb integral
    /// of (1 + 1e-6 (ppm + drift t)) dt over t = 0 .. n / fs.
    [[nodiscard]] long double channel_time(std::uint64_t n) const
    {
        const long double t_s = static_cast<long double>(n) / cfg.sample_rate_hz;
        const long double ppm = cfg.clock_ppm + cfg.clock_drift_ppm_per_s * t_s;
        if (std::abs(ppm) > 1000.0L) {
            std::ostringstream os;
            os << "simulator: the transmitter clock offset reaches " << static_cast<double>(ppm) << " ppm at "
               << static_cast<double>(t_s) << " s (clock_ppm " << cfg.clock_ppm << " + clock_drift_ppm_per_s "
               << cfg.clock_drift_ppm_per_s << " x t; allowed: -1000 .. 1000 ppm)";
            throw std::range_error(os.str());
        }
        const long double integral = static_cast<long double>(n) *
                                     (1.0L + 1e-6L * (cfg.clock_ppm + 0.5L * cfg.clock_drift_ppm_per_s * t_s));
        return static_cast<long double>(drop) + integral / out_per_channel;
    }

    void modulate_packet()
    {
        bits.clear();
        const auto known = waveform::known_packet_bits();
        bits.insert(bits.end(), known.begin(), known.end());
        const std::size_t k0 = bits.size();
        bits.resize(waveform::packet_bits);
        if (framing) {
            encode_data_field(*framing, pn, std::span(bits).subspan(k0));
        } else if (stream) {
            stream->next_data_field(pn, std::span(bits).subspan(k0));
        } else {
            pn.fill(std::span(bits).subspan(k0));
        }
        // Centre of the first preamble bit leaves the modulator at 2k + 8 and the channel's
        // line of sight adds interp_half samples (and the timing offset's fraction).
        const std::uint64_t start = packets * waveform::L_pkt + soqpsk_modulator::delay_samples + interp_half;
        // The line of sight's fraction and the channel's delay, in channel samples: the packet
        // is in the recording when its first pulse's centre, start + offset, is not dropped.
        const double offset = cfg.timing_offset_samples + cfg.delay_ns * 1e-9 * channel_rate_hz;
        if (static_cast<long double>(start) + offset >= static_cast<long double>(drop)) {
            if (truth.packet_starts.empty()) truth.first_packet_number = packets;
            if (resample) {
                const long double pos = output_position(static_cast<long double>(start) + offset);
                truth.packet_starts.push_back(static_cast<std::uint64_t>(std::floor(pos)));
                truth.packet_start_positions.push_back(static_cast<double>(pos));
            } else {
                truth.packet_starts.push_back(start + static_cast<std::uint64_t>(std::floor(offset)) - drop);
                truth.packet_start_positions.push_back(static_cast<double>(static_cast<long double>(start) - static_cast<long double>(drop)) + offset);
            }
        }
        mod.modulate(bits, pending);
        ++packets;
    }

    /// The channel output at index g (then g + 1): the multipath FIR over the modulated stream.
    cf64 channel_next()
    {
        if (pending_next >= pending.size()) {
            pending.clear();
            pending_next = 0;
            modulate_packet();
        }
        if (preset.flight && g % flight_update_samples == 0) {
            update_taps(cfg.flight_start_s + static_cast<double>(g) / channel_rate_hz);
        }
        const cf64 x = pending[pending_next++];
        // y(g) = sum_t taps[t] x(g - t); history[0] is x(g-1).
        cf64 y = taps[0] * x;
        for (std::size_t t = 1; t < taps.size(); ++t) y += taps[t] * history[t - 1];
        std::copy_backward(history.begin(), history.begin() + static_cast<std::ptrdiff_t>(history.size() - 1), history.end());
        history[0] = x;
        ++g;
        return y;
    }

    /// The phase noise at the current output sample (then advanced by one sample).
    double phase_noise_next()
    {
        double theta = 0.0;
        if (wiener) {
            theta += highpass ? wiener_unwrapped : wiener_phase;
            const double step = wiener_std * wiener_normal(wiener_rng);
            wiener_phase = std::remainder(wiener_phase + step, 2 * pi);
            wiener_unwrapped += step;
        }
        if (mask_pn) theta += mask_pn->next();
        return highpass ? highpass->next(theta) : theta;
    }

    /// The shadowing's amplitude factor at output sample n: 1 between fades; in a fade, its
    /// depth in dB a raised cosine over the fade. The fades come one after another, each
    /// starting an exponential time (mean interval - duration) after the last one's end.
    double shadow_factor(std::uint64_t n)
    {
        const double t = static_cast<double>(n) / cfg.sample_rate_hz;
        while (t >= fade_end_s) {
            const double gap = std::exponential_distribution<double>(1.0 / (cfg.shadow_interval_s - cfg.shadow_duration_s))(shadow_rng);
            fade_start_s = fade_end_s + gap;
            fade_end_s = fade_start_s + cfg.shadow_duration_s;
        }
        if (t < fade_start_s) return 1.0;
        const double depth_db = cfg.shadow_depth_db * 0.5 * (1.0 - std::cos(2 * pi * (t - fade_start_s) / cfg.shadow_duration_s));
        return std::pow(10.0, -depth_db / 20.0);
    }

    /// Front end after the noise: IQ imbalance, DC, gain (each only when set).
    void front_end(cf64& y, std::uint64_t n)
    {
        if (iq) y = iq_mu * y + iq_nu * std::conj(y);
        if (dc_on) y += dc;
        if (gain_on) {
            while (next_step < steps.size() && steps[next_step].first <= n) gain *= steps[next_step++].second;
            y *= gain;
        }
    }

    /// The sample at channel rate, unchanged (2 samples per bit, no clock offset): the path
    /// of the generator before the field impairments, kept operation for operation.
    cf64 direct_next()
    {
        while (g < drop) (void)channel_next();
        const std::uint64_t gg = g;
        cf64 y = channel_next();
        const double w = 2 * pi * cfg.cfo_hz / cfg.sample_rate_hz;
        double ph = std::fmod(w * static_cast<double>(gg), 2 * pi) + cfg.phase_rad;
        if (wiener || mask_pn) ph += phase_noise_next();
        y *= std::polar(1.0, ph);
        if (shadow) y *= shadow_factor(n_out);
        if (noise_std > 0.0) y += cf64(noise_std * normal(rng), noise_std * normal(rng));
        return y;
    }

    cf64 resampled_next()
    {
        const long double tau = channel_time(n_out);
        const auto k0 = static_cast<long long>(std::floor(tau));
        const double f = static_cast<double>(tau - static_cast<long double>(k0));
        const long long half = resampler->taps() / 2;
        while (cbuf_first + static_cast<long long>(cbuf.size()) <= k0 + half) cbuf.push_back(channel_next());
        const long long lo = k0 - half + 1;
        if (lo - cbuf_first > 65536) {  // keep the window small
            cbuf.erase(cbuf.begin(), cbuf.begin() + (lo - cbuf_first));
            cbuf_first = lo;
        }
        cf64 y = resampler->interpolate(&cbuf[static_cast<std::size_t>(lo - cbuf_first)], f);
        // Carrier phase: time since channel sample 0 (as on the direct path).
        const double w_c = 2 * pi * cfg.cfo_hz / channel_rate_hz;
        const double w_o = 2 * pi * cfg.cfo_hz / cfg.sample_rate_hz;
        double ph = std::fmod(w_o * static_cast<double>(n_out) + w_c * static_cast<double>(drop), 2 * pi) + cfg.phase_rad;
        if (wiener || mask_pn) ph += phase_noise_next();
        y *= std::polar(1.0, ph);
        if (shadow) y *= shadow_factor(n_out);
        if (noise_std > 0.0) y += cf64(noise_std * normal(rng), noise_std * normal(rng));
        return y;
    }

    void generate(std::size_t n, std::vector<cf32>& out)
    {
        out.reserve(out.size() + n);
        for (std::size_t i = 0; i < n; ++i) {
            cf64 y = resample ? resampled_next() : direct_next();
            front_end(y, n_out);
            out.emplace_back(static_cast<float>(y.real()), static_cast<float>(y.imag()));
            ++n_out;
        }
    }
};

simulator::simulator(const sim_config& cfg) : impl_(std::make_unique<impl>(cfg)) {}
simulator::~simulator() = default;
simulator::simulator(simulator&&) noexcept = default;
simulator& simulator::operator=(simulator&&) noexcept = default;
void simulator::generate(std::size_t n, std::vector<cf32>& out) { impl_->generate(n, out); }
const sim_truth& simulator::truth() const noexcept { return impl_->truth; }
const sim_config& simulator::config() const noexcept { return impl_->cfg; }
std::vector<cf64> simulator::channel_taps() const { return impl_->taps; }
double simulator::noise_variance() const noexcept { return 2.0 * impl_->noise_std * impl_->noise_std; }

double simulator::phase_noise_rms_rad(double above_hz) const
{
    if (!impl_->mask_pn) return 0.0;
    const auto& hp = impl_->highpass;
    return std::sqrt(hp ? impl_->mask_pn->variance_above(above_hz, [&hp](double f) { return hp->power(f); })
                        : impl_->mask_pn->variance_above(above_hz));
}

phase_tracking_floor simulator::tracking_floor() const
{
    const auto& c = impl_->cfg;
    phase_tracking_floor out;
    if (impl_->noise_std == 0.0 || (!impl_->mask_pn && !impl_->wiener)) return out;
    const double fs = c.sample_rate_hz, nyq = fs / 2;
    // The generator's noise: complex variance 2 noise_std^2 a sample, half of it across a unit
    // signal, over fs: N = noise_std^2 / fs = 1 / (2 Rb Eb/N0).
    const double noise = impl_->noise_std * impl_->noise_std / fs;
    out.observation_psd = noise;
    // The Wiener's increments (variance 2 pi linewidth / fs a sample) summed: two-sided PSD
    // (2 pi linewidth / fs^2) / (4 sin^2(pi f / fs)), about linewidth / (2 pi f^2).
    const double q = 2 * pi * c.phase_noise_linewidth_hz;
    const auto phase_psd = [&](double f) {
        double v = impl_->mask_pn ? impl_->mask_pn->psd(f) : 0.0;
        if (impl_->wiener) {
            const double sn = std::sin(pi * f / fs);
            v += q / (fs * fs) / (4 * sn * sn);
        }
        return impl_->highpass ? v * impl_->highpass->power(f) : v;
    };
    const auto smoother = [&](double f) {
        const double v = phase_psd(f);
        return v * noise / (v + noise);
    };
    // Both sidebands of the integral of g from a to fs / 2: trapezoids on a log grid of 256
    // points a decade, and below f0 = 0.01 Hz (a = 0) a rectangle at g(f0) (the mask is flat
    // there; the Wiener's integrand for the smoother tends to N).
    const double f0 = 0.01;
    const auto both_sidebands = [&](double a, const auto& g) {
        if (a >= nyq) return 0.0;
        double sum = 0.0;
        if (a < f0) {
            sum += g(f0) * (f0 - a);
            a = f0;
        }
        return 2.0 * (sum + log_trapezoid(a, nyq, 256.0, g));
    };
    out.least_error_rad2 = both_sidebands(0.0, smoother);
    // The crossing: the highest point of the same grid where S >= N, then bisection to the
    // next point (S < N there).
    const int n = static_cast<int>(std::ceil(256.0 * std::log10(nyq / f0)));
    const double r = std::pow(nyq / f0, 1.0 / n);
    for (int i = n; i >= 0; --i) {
        const double f = i == n ? nyq : f0 * std::pow(r, i);
        if (phase_psd(f) < noise) continue;
        double lo = f, hi = i == n ? nyq : std::min(nyq, f * r);
        for (int k = 0; k < 60 && i < n; ++k) {
            const double m = std::sqrt(lo * hi);
            (phase_psd(m) >= noise ? lo : hi) = m;
        }
        out.crossover_hz = lo;
        break;
    }
    // S below N everywhere (crossover 0): all of the phase lies beyond.
    if (out.crossover_hz < nyq) out.above_crossover_rad2 = both_sidebands(out.crossover_hz, phase_psd);
    return out;
}

}  // namespace paq::sim
