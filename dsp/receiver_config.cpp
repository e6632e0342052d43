#include "dsp/receiver_config.hpp"

#include <cmath>
#include <iomanip>
#include <sstream>
#include <stdexcept>
#include <string>

namespace paq::dsp {

namespace {
template <typename T>
std::string bad(const char* field, T value, const char* range)
{
    std::ostringstream os;
    os << field << " = " << value << " is out of range (allowed: " << range << ")";
    return os.str();
}
bool bit_rate_in_range(double hz) noexcept { return receiver_ranges::bit_rate_hz.contains(hz); }
/// The message when v is outside r, else nothing.
template <typename T>
void check(std::vector<std::string>& e, const char* field, T value, const setting_range& r)
{
    if (!r.contains(static_cast<double>(value))) e.push_back(bad(field, value, r.text().c_str()));
}
/// 0: unset (2 samples per bit).
bool input_rate_in_range(double hz) noexcept { return hz == 0.0 || (hz >= 1e3 && hz <= 1e9); }
}  // namespace

std::string receiver_config::samples_per_bit_error() const
{
    if (!bit_rate_in_range(bit_rate_hz) || !input_rate_in_range(input_sample_rate_hz) || input_sample_rate_hz == 0.0) return {};
    const double sps = input_sample_rate_hz / bit_rate_hz;
    if (sps >= 2.0 && sps <= 2.0 * max_input_ratio) return {};
    std::ostringstream os;
    os << "input sample rate " << input_sample_rate_hz / 1e6 << " MS/s at bit rate " << bit_rate_hz / 1e6 << " Mbit/s is " << sps
       << " samples per bit: allowed 2 .. " << 2.0 * max_input_ratio << " samples per bit, i.e. " << 2.0 * bit_rate_hz / 1e6
       << " .. " << 2.0 * max_input_ratio * bit_rate_hz / 1e6
       << " MS/s at this bit rate (or set the link's bit rate: receiver.bit_rate_hz, or paqd replay's --bit-rate)";
    return os.str();
}

std::string receiver_config::input_rate_error() const
{
    if (!input_rate_in_range(input_sample_rate_hz)) {
        return bad("input sample rate (Hz)", input_sample_rate_hz, "1e3 .. 1e9, or 0 for 2 samples per bit");
    }
    return samples_per_bit_error();
}

bool receiver_config::fec_continuous() const noexcept
{
    const auto f = framing_for(fec);
    return f && f->continuous();
}

std::vector<std::string> receiver_config::validate() const
{
    std::vector<std::string> e;
    namespace r = receiver_ranges;
    check(e, "batch_samples", batch_samples, r::batch_samples);
    check(e, "detection_threshold", detection_threshold, r::detection_threshold);
    check(e, "fft_size", fft_size, r::fft_size);
    check(e, "cma_mu", cma_mu, r::cma_mu);
    check(e, "cma_iterations", cma_iterations, r::cma_iterations);
    check(e, "pll_bn_t", pll_bn_t, r::pll_bn_t);
    check(e, "pll_acquisition_bn_t", pll_acquisition_bn_t, r::pll_acquisition_bn_t);
    check(e, "pll_damping", pll_damping, r::pll_damping);
    check(e, "cpu_threads", cpu_threads, r::cpu_threads);
    check(e, "bit_rate_hz", bit_rate_hz, r::bit_rate_hz);
    if (auto rate = input_rate_error(); !rate.empty()) e.push_back(std::move(rate));
    if (clock_tracking != 0 && clock_tracking != 1) e.push_back(bad("clock_tracking", clock_tracking, "0 (off) or 1 (on)"));
    check(e, "clock_min_ppm", clock_min_ppm, r::clock_min_ppm);
    if (phase_smoother < -1 || phase_smoother > 1) {
        e.push_back(bad("phase_smoother", phase_smoother, "-1 (auto: the smoother where the PLL's phase wanders), 0 (the PLL alone) or 1 (the phase smoother on every packet)"));
    }
    if (detector != detector_kind::sxs && detector != detector_kind::trellis && detector != detector_kind::both) {
        e.push_back("detector: not sxs, trellis or both");
    }
    if (to_string(fec) == "?") e.push_back("fec: not none or an AR4JA code (" + names_text(fec_names) + ")");
    check(e, "fec_iterations", fec_iterations, r::fec_iterations);
    check(e, "channels", channels, r::channels);
    if (to_string(combining) == "?") e.push_back("combining: not " + names_text(combining_names));
    if (front_end_correction < -1 || front_end_correction > 1) {
        e.push_back(bad("front_end_correction", front_end_correction, "1 (on), 0 (off) or -1 (auto: the same as on)"));
    }
    return e;
}

std::string setting_range::text() const
{
    std::ostringstream os;
    os << std::setprecision(12);
    if (power_of_two) os << "a power of two, ";
    if (lo_open || hi_open) {
        os << lo << (lo_open ? " < x " : " <= x ") << (hi_open ? "< " : "<= ") << hi;
    } else {
        os << lo << " .. " << hi;
    }
    return os.str();
}

detector_kind parse_detector(std::string_view text)
{
    return parse_named(detector_names, text, "detector");
}

combining_kind parse_combining(std::string_view text)
{
    return parse_named(combining_names, text, "combining");
}

}  // namespace paq::dsp
