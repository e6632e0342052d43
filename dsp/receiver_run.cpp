#include "dsp/receiver_run.hpp"

#include "dsp/input_stage.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numbers>
#include <stdexcept>
#include <string>

namespace paq::dsp {

run_tally::run_tally(pn_pattern pattern, double chain_rate_hz, double packet_spacing_samples) : sample_rate_hz_(chain_rate_hz)
{
    for (int p = 0; p < chain::num_paths; ++p) counters_.emplace_back(pattern, packet_spacing_samples);
}

void run_tally::add(const batch_output& out)
{
    ++s_.batches;
    s_.packets_truncated += out.truncated_packets;
    s_.nonfinite_samples += out.nonfinite_samples;
    for (std::size_t i = 0; i < out.packets.size(); ++i) {
        const auto& rec = out.packets[i];
        ++s_.packets_found;
        if (rec.flags) ++s_.packets_flagged;
        if (rec.flags & flag_ill_conditioned) ++s_.packets_ill_conditioned;
        cfo_sum_ += rec.cfo_rad_per_sample;
        clock_ppm_sum_ += rec.clock_ppm;
        if (rec.clock_corrected) ++s_.packets_clock_corrected;
        if (rec.front_end_corrected) ++s_.packets_front_end_corrected;
        front_end_.add(rec);
        ebn0_lin_sum_ += std::pow(10.0, rec.ebn0_db / 10.0);
        s_.max_zf_condition = std::max(s_.max_zf_condition, rec.zf_condition);
    }
    // The paths' PN counters are independent: one thread each, every packet in order.
#pragma omp parallel for schedule(static, 1) if (out.packets.size() >= 64)
    for (int p = 0; p < chain::num_paths; ++p) {
        auto& counter = counters_[static_cast<std::size_t>(p)];
        double bep = 0.0;
        for (std::size_t i = 0; i < out.packets.size(); ++i) {
            counter.add_packet(out.packets[i].start_sample, out.packet_bits(i, p));
            bep += out.packets[i].paths[static_cast<std::size_t>(p)].bep_estimate;
        }
        bep_sum_[static_cast<std::size_t>(p)] += bep;
    }
}

void front_end_means::add(const packet_record& rec) noexcept
{
    if (!rec.front_end_estimated) return;
    ++n_;
    gain_ += rec.iq_gain_db;
    phase_ += rec.iq_phase_deg;
    dc_lin_ += std::pow(10.0, rec.dc_dbc / 10.0);
}

double front_end_means::iq_gain_db() const noexcept
{
    return n_ ? gain_ / static_cast<double>(n_) : std::numeric_limits<double>::quiet_NaN();
}

double front_end_means::iq_phase_deg() const noexcept
{
    return n_ ? phase_ / static_cast<double>(n_) : std::numeric_limits<double>::quiet_NaN();
}

double front_end_means::dc_dbc() const noexcept
{
    if (!n_) return std::numeric_limits<double>::quiet_NaN();
    return dc_lin_ > 0.0 ? 10.0 * std::log10(dc_lin_ / static_cast<double>(n_)) : -300.0;
}

run_summary run_tally::summary() const
{
    run_summary s = s_;
    s.samples = samples_;
    s.cfo_hz_sum = cfo_sum_ * sample_rate_hz_ / (2.0 * std::numbers::pi);
    s.ebn0_linear_sum = ebn0_lin_sum_;
    if (s.packets_found) {
        const double np = static_cast<double>(s.packets_found);
        s.mean_cfo_rad_per_sample = cfo_sum_ / np;
        s.mean_clock_ppm = clock_ppm_sum_ / np;
        s.mean_cfo_hz = s.mean_cfo_rad_per_sample * sample_rate_hz_ / (2.0 * std::numbers::pi);
        s.mean_ebn0_db = 10.0 * std::log10(ebn0_lin_sum_ / np);
    }
    s.packets_front_end_estimated = front_end_.packets();
    if (front_end_.packets()) {
        s.mean_iq_gain_db = front_end_.iq_gain_db();
        s.mean_iq_phase_deg = front_end_.iq_phase_deg();
        s.mean_dc_dbc = front_end_.dc_dbc();
    }
    for (int p = 0; p < chain::num_paths; ++p) {
        const auto& c = counters_[static_cast<std::size_t>(p)];
        const auto k = c.counts();
        auto& ps = s.paths[static_cast<std::size_t>(p)];
        ps.name = path_name(p);
        ps.packets = c.packets();
        ps.bits_checked = k.bits_checked;
        ps.bit_errors = k.bit_errors;
        ps.bits_before_lock = k.bits_before_lock;
        ps.resyncs = k.resyncs;
        ps.locked = k.locked;
        ps.ber = c.ber();
        ps.bep_estimate_sum = bep_sum_[static_cast<std::size_t>(p)];
        ps.mean_bep_estimate =
            s.packets_found ? bep_sum_[static_cast<std::size_t>(p)] / static_cast<double>(s.packets_found) : 0.0;
    }
    s.packets_skipped = counters_[0].packets_skipped();
    return s;
}

}  // namespace paq::dsp
