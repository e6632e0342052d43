#include "dsp/receiver_run.hpp"

#include "dsp/batcher.hpp"
#include "dsp/input_stage.hpp"

#include <algorithm>
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
        for (int p = 0; p < chain::num_paths; ++p) {
            counters_[static_cast<std::size_t>(p)].add_packet(rec.start_sample, out.packet_bits(i, p));
            bep_sum_[static_cast<std::size_t>(p)] += rec.paths[static_cast<std::size_t>(p)].bep_estimate;
        }
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
        ps.mean_bep_estimate =
            s.packets_found ? bep_sum_[static_cast<std::size_t>(p)] / static_cast<double>(s.packets_found) : 0.0;
    }
    s.packets_skipped = counters_[0].packets_skipped();
    return s;
}

run_summary run_receiver(batch_processor& backend, const receiver_config& cfg, pn_pattern pattern,
                         double sample_rate_hz, const std::function<std::size_t(std::span<cf32>)>& read,
                         const std::function<void(const batch_output&)>& on_batch)
{
    // The backend was made from cfg: the recording's rate must be the one it resamples from.
    const input_geometry g = make_input_geometry(cfg);
    if (std::abs(sample_rate_hz - g.input_rate_hz) > 1e-6 * g.input_rate_hz) {
        throw std::invalid_argument("run_receiver: the samples are at " + std::to_string(sample_rate_hz) +
                                    " Hz but the receiver is configured for an input at " + std::to_string(g.input_rate_hz) +
                                    " Hz (set receiver_config::input_sample_rate_hz)");
    }
    run_tally tally(pattern, g.chain_rate_hz(), g.packet_spacing_samples());
    batcher bt(cfg.batch_samples, g.guard_before, g.guard_after);
    auto consume = [&](const sample_batch& b) {
        const auto out = backend.process(b);
        tally.add(out);
        if (on_batch) on_batch(out);
    };

    std::vector<cf32> buf(1 << 20);
    for (;;) {
        const std::size_t n = read(buf);
        if (n == 0) break;
        tally.add_samples(n);
        bt.push(std::span<const cf32>(buf.data(), n));
        while (auto b = bt.pop()) consume(*b);
    }
    bt.finish();
    while (auto b = bt.pop()) consume(*b);
    return tally.summary();
}

run_summary run_receiver(batch_processor& backend, const receiver_config& cfg, pn_pattern pattern,
                         double sample_rate_hz, std::span<const cf32> samples,
                         const std::function<void(const batch_output&)>& on_batch)
{
    std::size_t pos = 0;
    return run_receiver(
        backend, cfg, pattern, sample_rate_hz,
        [&](std::span<cf32> out) {
            const std::size_t n = std::min(out.size(), samples.size() - pos);
            std::copy_n(samples.begin() + static_cast<std::ptrdiff_t>(pos), n, out.begin());
            pos += n;
            return n;
        },
        on_batch);
}

}  // namespace paq::dsp
