#include "dsp/receiver_config.hpp"

#include <cmath>
#include <sstream>

namespace paq::dsp {

namespace {
template <typename T>
std::string bad(const char* field, T value, const char* range)
{
    std::ostringstream os;
    os << field << " = " << value << " is out of range (allowed: " << range << ")";
    return os.str();
}
}  // namespace

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
    return e;
}

}  // namespace paq::dsp
