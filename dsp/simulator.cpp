#include "dsp/simulator.hpp"

#include "dsp/soqpsk.hpp"
#include "dsp/waveform.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <numbers>
#include <random>
#include <sstream>
#include <stdexcept>

namespace paq::dsp {

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
}  // namespace

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
    // Ground-bounce model (SPEC 5): a specular ray at 70-96% of the line of sight, 10-80 ns
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

channel_ray parse_channel_ray(std::string_view text)
{
    const std::string s(text);
    std::vector<std::string> parts;
    for (std::size_t pos = 0;;) {
        const std::size_t end = s.find(',', pos);
        parts.push_back(s.substr(pos, end == std::string::npos ? std::string::npos : end - pos));
        if (end == std::string::npos) break;
        pos = end + 1;
    }
    if (parts.size() != 3)
        throw std::invalid_argument("ray '" + s + "': expected AMPLITUDE,DELAY_NS,PHASE_RAD (three comma-separated numbers)");
    std::array<double, 3> v{};
    for (std::size_t i = 0; i < 3; ++i) {
        std::size_t used = 0;
        try {
            v[i] = std::stod(parts[i], &used);
        } catch (const std::exception&) {
            used = 0;
        }
        if (parts[i].empty() || used != parts[i].size())
            throw std::invalid_argument("ray '" + s + "': '" + parts[i] + "' is not a number (expected AMPLITUDE,DELAY_NS,PHASE_RAD)");
    }
    return {v[0], v[1], v[2]};
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
    if (!(sample_rate_hz > 0.0) || !std::isfinite(sample_rate_hz)) add("sample_rate_hz", sample_rate_hz, "> 0");
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
    if (start_offset_samples < -1 || start_offset_samples >= static_cast<long long>(waveform::L_pkt))
        add("start_offset_samples", static_cast<double>(start_offset_samples), "-1 (from seed) or 0 .. 12671");
    return e;
}

struct simulator::impl {
    sim_config cfg;
    channel_preset preset;
    sim_truth truth;
    pn_generator pn;
    soqpsk_modulator mod;
    std::mt19937_64 rng;
    std::normal_distribution<double> normal{0.0, 1.0};
    double noise_std = 0.0;  ///< per real component
    std::vector<cf64> taps;
    std::vector<cf64> history;  ///< last taps.size()-1 modulated samples
    std::vector<cf64> pending;  ///< modulated samples not yet through the channel
    std::uint64_t g = 0;        ///< global index of the next channel output sample
    std::uint64_t drop = 0;     ///< samples dropped at the start
    std::uint64_t packets = 0;  ///< packets modulated
    std::vector<std::uint8_t> bits;

    explicit impl(const sim_config& c)
        : cfg(c), preset(channel_preset_by_name(c.preset)), pn(c.pattern), mod(0.0), rng(c.seed)
    {
        const auto errors = cfg.validate();
        if (!errors.empty()) {
            std::string msg = "invalid simulator configuration:";
            for (const auto& s : errors) msg += "\n  " + s;
            throw std::invalid_argument(msg);
        }
        preset.rays.insert(preset.rays.end(), cfg.extra_rays.begin(), cfg.extra_rays.end());
        drop = cfg.start_offset_samples >= 0 ? static_cast<std::uint64_t>(cfg.start_offset_samples)
                                             : rng() % waveform::L_pkt;
        if (std::isfinite(cfg.ebn0_db)) {
            // Eb = 2 samples of unit power; N0 = complex noise variance per sample.
            const double sigma_c2 = 2.0 / std::pow(10.0, cfg.ebn0_db / 10.0);
            noise_std = std::sqrt(sigma_c2 / 2.0);
        }
        double max_delay_ns = 80.0;
        for (const auto& r : preset.rays) max_delay_ns = std::max(max_delay_ns, r.delay_ns);
        const auto span = static_cast<std::size_t>(2 * interp_half + 2 + std::ceil(max_delay_ns * 1e-9 * cfg.sample_rate_hz));
        taps.assign(span, 0.0);
        history.assign(span - 1, 0.0);
        update_taps(cfg.flight_start_s);
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
            const double d = r.delay_ns * 1e-9 * cfg.sample_rate_hz + cfg.timing_offset_samples;
            add_fractional_delay(taps, interp_half, d, std::polar(r.amplitude, r.phase_rad));
        }
        // Normalize the received SOQPSK-TG power (not the tap energy) to 1, so Eb/N0 is the
        // ratio at the receiver input: sum_ab h_a h_b* R_x(b - a).
        const double p = received_power(taps.data(), taps.size());
        const double s = 1.0 / std::sqrt(p);
        for (auto& v : taps) v *= s;
    }

    void modulate_packet()
    {
        bits.clear();
        const auto known = waveform::known_packet_bits();
        bits.insert(bits.end(), known.begin(), known.end());
        const std::size_t k0 = bits.size();
        bits.resize(waveform::packet_bits);
        pn.fill(std::span(bits).subspan(k0));
        // Centre of the first preamble bit leaves the modulator at 2k + 8 and the channel's
        // line of sight adds interp_half samples.
        const std::uint64_t start = packets * waveform::L_pkt + soqpsk_modulator::delay_samples + interp_half;
        if (start >= drop) {
            if (truth.packet_starts.empty()) truth.first_packet_number = packets;
            truth.packet_starts.push_back(start - drop);
        }
        mod.modulate(bits, pending);
        ++packets;
    }

    void generate(std::size_t n, std::vector<cf32>& out)
    {
        out.reserve(out.size() + n);
        std::size_t produced = 0;
        std::size_t pi_idx = 0;
        const double w = 2 * pi * cfg.cfo_hz / cfg.sample_rate_hz;
        const std::size_t hl = history.size();
        while (produced < n) {
            if (pi_idx >= pending.size()) {
                pending.clear();
                pi_idx = 0;
                modulate_packet();
            }
            if (preset.flight && g % flight_update_samples == 0) {
                update_taps(cfg.flight_start_s + static_cast<double>(g) / cfg.sample_rate_hz);
            }
            const cf64 x = pending[pi_idx++];
            // y(g) = sum_t taps[t] x(g - t); history[0] is x(g-1).
            cf64 y = taps[0] * x;
            for (std::size_t t = 1; t < taps.size(); ++t) y += taps[t] * history[t - 1];
            std::copy_backward(history.begin(), history.begin() + static_cast<std::ptrdiff_t>(hl - 1), history.end());
            history[0] = x;
            if (g >= drop) {
                const double ph = std::fmod(w * static_cast<double>(g), 2 * pi) + cfg.phase_rad;
                y *= std::polar(1.0, ph);
                if (noise_std > 0.0) y += cf64(noise_std * normal(rng), noise_std * normal(rng));
                out.emplace_back(static_cast<float>(y.real()), static_cast<float>(y.imag()));
                ++produced;
            }
            ++g;
        }
        pending.erase(pending.begin(), pending.begin() + static_cast<std::ptrdiff_t>(pi_idx));
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

}  // namespace paq::dsp
