#include "dsp/iq_correction.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace paq::dsp {

iq_dc_estimate iq_dc_from_sums(double n, double si, double sq, double sii, double sqq, double siq) noexcept
{
    const auto k = iq_dc_coefficients_from_sums(n, si, sq, sii, sqq, siq);
    iq_dc_estimate e;
    if (!k.valid) return e;
    // What is applied (zeros and 1 below the gate) ...
    e.dc_i = k.dc_i;
    e.dc_q = k.dc_q;
    e.cross = k.cross;
    e.q_scale = k.q_scale;
    e.corrected = k.apply_dc || k.apply_iq;
    // ... and what was estimated, reported whether applied or not.
    const double mi = si / n, mq = sq / n, cross = (siq / n - mi * mq) / k.p_i;
    const double g2 = k.p_q / k.p_i;
    e.gain_db = 10.0 * std::log10(g2);
    e.phase_deg = std::asin(std::clamp(-cross / std::sqrt(g2), -1.0, 1.0)) * 180.0 / std::numbers::pi;
    const double dc2 = mi * mi + mq * mq;
    e.dc_dbc = dc2 > 0.0 ? 10.0 * std::log10(dc2 / (k.p_i + k.p_q)) : -300.0;
    e.valid = true;
    return e;
}

iq_dc_estimate estimate_iq_dc(const cf64* seg, std::size_t n) noexcept
{
    double si = 0.0, sq = 0.0, sii = 0.0, sqq = 0.0, siq = 0.0;
    for (std::size_t k = 0; k < n; ++k) {
        const double i = seg[k].real(), q = seg[k].imag();
        si += i;
        sq += q;
        sii += i * i;
        sqq += q * q;
        siq += i * q;
    }
    return iq_dc_from_sums(static_cast<double>(n), si, sq, sii, sqq, siq);
}

void record_front_end(const iq_dc_estimate& e, packet_record& rec) noexcept
{
    rec.front_end_estimated = e.valid;
    rec.front_end_corrected = e.corrected;
    rec.iq_gain_db = static_cast<float>(e.gain_db);
    rec.iq_phase_deg = static_cast<float>(e.phase_deg);
    rec.dc_dbc = static_cast<float>(e.dc_dbc);
}

void correct_iq_dc(cf64* seg, std::size_t n, const iq_dc_estimate& e) noexcept
{
    if (!e.corrected) return;
    for (std::size_t k = 0; k < n; ++k) {
        const double i = seg[k].real() - e.dc_i;
        const double q = seg[k].imag() - e.dc_q;
        seg[k] = cf64(i, (q - e.cross * i) * e.q_scale);
    }
}

}  // namespace paq::dsp
