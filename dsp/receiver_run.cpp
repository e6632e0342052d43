#include "dsp/receiver_run.hpp"

#include "dsp/batcher.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace paq::dsp {

run_summary run_receiver(batch_processor& backend, const receiver_config& cfg, pn_pattern pattern,
                         double sample_rate_hz, const std::function<std::size_t(std::span<cf32>)>& read,
                         const std::function<void(const batch_output&)>& on_batch)
{
    run_summary s;
    std::vector<stream_ber_counter> counters;
    for (int p = 0; p < chain::num_paths; ++p) counters.emplace_back(pattern);
    std::array<double, chain::num_paths> bep_sum{};
    double cfo_sum = 0.0, ebn0_lin_sum = 0.0;

    batcher bt(cfg.batch_samples);
    auto consume = [&](const sample_batch& b) {
        const auto out = backend.process(b);
        ++s.batches;
        s.packets_truncated += out.truncated_packets;
        s.nonfinite_samples += out.nonfinite_samples;
        for (std::size_t i = 0; i < out.packets.size(); ++i) {
            const auto& rec = out.packets[i];
            ++s.packets_found;
            if (rec.flags) ++s.packets_flagged;
            if (rec.flags & flag_ill_conditioned) ++s.packets_ill_conditioned;
            cfo_sum += rec.cfo_rad_per_sample;
            ebn0_lin_sum += std::pow(10.0, rec.ebn0_db / 10.0);
            s.max_zf_condition = std::max(s.max_zf_condition, rec.zf_condition);
            for (int p = 0; p < chain::num_paths; ++p) {
                counters[static_cast<std::size_t>(p)].add_packet(rec.start_sample, out.packet_bits(i, p));
                bep_sum[static_cast<std::size_t>(p)] += rec.paths[static_cast<std::size_t>(p)].bep_estimate;
            }
        }
        if (on_batch) on_batch(out);
    };

    std::vector<cf32> buf(1 << 20);
    for (;;) {
        const std::size_t n = read(buf);
        if (n == 0) break;
        s.samples += n;
        bt.push(std::span<const cf32>(buf.data(), n));
        while (auto b = bt.pop()) consume(*b);
    }
    bt.finish();
    while (auto b = bt.pop()) consume(*b);

    if (s.packets_found) {
        const double np = static_cast<double>(s.packets_found);
        s.mean_cfo_rad_per_sample = cfo_sum / np;
        s.mean_cfo_hz = s.mean_cfo_rad_per_sample * sample_rate_hz / (2.0 * std::numbers::pi);
        s.mean_ebn0_db = 10.0 * std::log10(ebn0_lin_sum / np);
    }
    for (int p = 0; p < chain::num_paths; ++p) {
        const auto& c = counters[static_cast<std::size_t>(p)];
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
        ps.mean_bep_estimate = s.packets_found ? bep_sum[static_cast<std::size_t>(p)] / static_cast<double>(s.packets_found) : 0.0;
    }
    s.packets_skipped = counters[0].packets_skipped();
    return s;
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
