#include "dsp/receiver_config.hpp"

#include <cmath>
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
bool bit_rate_in_range(double hz) noexcept { return hz >= 1e6 && hz <= 30e6; }
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

std::vector<std::string> receiver_config::validate() const
{
    std::vector<std::string> e;
    if (batch_samples < 1 || batch_samples > 1'000'000'000) {
        e.push_back(bad("batch_samples", batch_samples, "1 .. 1000000000"));
    }
    if (!(detection_threshold > 0.0 && detection_threshold < 1.0)) {
        e.push_back(bad("detection_threshold", detection_threshold, "0 < x < 1"));
    }
    if (fft_size < 16384 || fft_size > (1u << 20) || (fft_size & (fft_size - 1)) != 0) {
        e.push_back(bad("fft_size", fft_size, "a power of two, 16384 .. 1048576"));
    }
    if (!(cma_mu > 0.0 && cma_mu <= 0.1)) {
        e.push_back(bad("cma_mu", cma_mu, "0 < x <= 0.1"));
    }
    if (cma_iterations < 0 || cma_iterations > 200) {
        e.push_back(bad("cma_iterations", cma_iterations, "0 .. 200"));
    }
    if (!(pll_bn_t > 0.0 && pll_bn_t <= 0.1)) {
        e.push_back(bad("pll_bn_t", pll_bn_t, "0 < x <= 0.1"));
    }
    if (!(pll_acquisition_bn_t > 0.0 && pll_acquisition_bn_t <= 0.25)) {
        e.push_back(bad("pll_acquisition_bn_t", pll_acquisition_bn_t, "0 < x <= 0.25"));
    }
    if (!(pll_damping >= 0.3 && pll_damping <= 2.0)) {
        e.push_back(bad("pll_damping", pll_damping, "0.3 .. 2"));
    }
    if (cpu_threads < 0 || cpu_threads > 1024) {
        e.push_back(bad("cpu_threads", cpu_threads, "0 (all cores) .. 1024"));
    }
    if (!bit_rate_in_range(bit_rate_hz)) e.push_back(bad("bit_rate_hz", bit_rate_hz, "1e6 .. 30e6 bit/s"));
    if (auto rate = input_rate_error(); !rate.empty()) e.push_back(std::move(rate));
    if (clock_tracking != 0 && clock_tracking != 1) e.push_back(bad("clock_tracking", clock_tracking, "0 (off) or 1 (on)"));
    if (!(clock_min_ppm >= 0.0 && clock_min_ppm <= 100.0)) e.push_back(bad("clock_min_ppm", clock_min_ppm, "0 .. 100"));
    if (phase_smoother < -1 || phase_smoother > 1) {
        e.push_back(bad("phase_smoother", phase_smoother, "-1 (auto: the smoother where the PLL's phase wanders), 0 (the PLL alone) or 1 (the phase smoother on every packet)"));
    }
    if (detector != detector_kind::sxs && detector != detector_kind::trellis && detector != detector_kind::both) {
        e.push_back("detector: not sxs, trellis or both");
    }
    if (front_end_correction < -1 || front_end_correction > 1) {
        e.push_back(bad("front_end_correction", front_end_correction, "-1 (auto: on for radio and network sources), 0 (off) or 1 (on)"));
    }
    return e;
}

detector_kind parse_detector(std::string_view text)
{
    return parse_named(detector_names, text, "detector");
}

}  // namespace paq::dsp
