#include "dsp/run_tally.hpp"

#include "dsp/input_stage.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numbers>
#include <stdexcept>
#include <string>

namespace paq::dsp {

std::vector<path_summary> stream_summaries(int streams)
{
    std::vector<path_summary> v(static_cast<std::size_t>(std::max(streams, 0)));
    for (std::size_t p = 0; p < v.size(); ++p) v[p].name = stream_name(static_cast<int>(p));
    return v;
}

run_tally::run_tally(pn_pattern pattern, double chain_rate_hz, double packet_spacing_samples, int streams,
                     std::optional<fec_framing> fec)
    : sample_rate_hz_(chain_rate_hz), fec_(fec)
{
    if (!chain::valid_streams(streams)) {
        throw std::invalid_argument("run_tally: " + std::to_string(streams) + " streams (6 or 12)");
    }
    const auto bits = fec_ ? static_cast<std::size_t>(fec_->info_bits()) : waveform::data_bits;
    for (int p = 0; p < streams; ++p) counters_.emplace_back(pattern, packet_spacing_samples, bits);
    bep_sum_.assign(static_cast<std::size_t>(streams), 0.0);
    fec_sums_.assign(static_cast<std::size_t>(streams), fec_summary{});
}

void run_tally::add(const batch_output& out)
{
    if (static_cast<std::size_t>(out.streams) != counters_.size()) {
        throw std::invalid_argument("run_tally: a batch with " + std::to_string(out.streams) + " streams, the tally counts " +
                                    std::to_string(counters_.size()));
    }
    if (fec_ && (!out.decoded_with(*fec_) || (fec_->continuous() && out.frames.size() != out.packets.size()))) {
        throw std::invalid_argument("run_tally: a batch without the coded link's decoding (" + std::to_string(out.fec_codewords) +
                                    " codewords a stream; expected " + std::to_string(fec_->codewords) + ")");
    }
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
        if (rec.flags & flag_phase_smoothed) ++s_.packets_phase_smoothed;
        if (rec.flags & flag_unequalized_phase) ++s_.packets_unequalized_phase;
        if (rec.front_end_corrected) ++s_.packets_front_end_corrected;
        front_end_.add(rec);
        ebn0_lin_sum_ += std::pow(10.0, rec.ebn0_db / 10.0);
        if (rec.receive_channels == 2) {
            ++s_.packets_two_channel;
            ++s_.packets_best_channel[rec.best_channel < 2 ? rec.best_channel : 0];
            for (std::size_t c = 0; c < 2; ++c) {
                s_.channel_ebn0_linear_sum[c] += std::pow(10.0, static_cast<double>(rec.channel_ebn0_db[c]) / 10.0);
                if (rec.channel_ebn0_db[c] <= silent_channel_ebn0_db) ++s_.packets_channel_silent[c];
                s_.channel_level_linear_sum[c] += std::pow(10.0, static_cast<double>(rec.channel_level_db[c]) / 10.0);
            }
        }
        s_.max_zf_condition = std::max(s_.max_zf_condition, rec.zf_condition);
    }
    // The streams' PN counters are independent: one thread each, every packet in order (as
    // many threads as streams: more would only wait; threads that sleep between batches,
    // dsp::thread_team).
    const auto count_stream = [&](int p) {
        auto& counter = counters_[static_cast<std::size_t>(p)];
        double bep = 0.0;
        auto& f = fec_sums_[static_cast<std::size_t>(p)];
        for (std::size_t i = 0; i < out.packets.size(); ++i) {
            if (fec_ && fec_->continuous()) {
                const auto& pf = out.frames[i];
                counter.add_frames(out.packets[i].start_sample, pf.first, pf.count, out.packet_decoded(i, p), static_cast<std::size_t>(fec_->k));
                f.add(out.packet_codewords(i, p), pf.count, fec_->n);
            } else {
                counter.add_packet(out.packets[i].start_sample, fec_ ? out.packet_decoded(i, p) : out.packet_bits(i, p));
                if (fec_) f.add(out.packet_codewords(i, p), fec_->codewords, fec_->n);
            }
            bep += out.packets[i].paths[static_cast<std::size_t>(p)].bep_estimate;
        }
        bep_sum_[static_cast<std::size_t>(p)] += bep;
    };
    const int pieces = out.packets.size() >= 64 ? thread_team::pieces_for(static_cast<std::size_t>(out.streams), out.streams) : 1;
    if (!team_) team_ = std::make_unique<thread_team>();  // no thread until a job of two pieces
    team_->run(pieces, [&](int k) {
        for (int p = k; p < out.streams; p += pieces) count_stream(p);
    });
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
    if (s.packets_two_channel) {
        for (std::size_t c = 0; c < 2; ++c) {
            const double mean = s.channel_ebn0_linear_sum[c] / static_cast<double>(s.packets_two_channel);
            s.channel_mean_ebn0_db[c] = mean > 0.0 ? 10.0 * std::log10(mean) : -300.0;
            const double level = s.channel_level_linear_sum[c] / static_cast<double>(s.packets_two_channel);
            s.channel_mean_level_db[c] = level > 1e-30 ? 10.0 * std::log10(level) : -300.0;
        }
    }
    s.packets_front_end_estimated = front_end_.packets();
    if (front_end_.packets()) {
        s.mean_iq_gain_db = front_end_.iq_gain_db();
        s.mean_iq_phase_deg = front_end_.iq_phase_deg();
        s.mean_dc_dbc = front_end_.dc_dbc();
    }
    s.paths = stream_summaries(static_cast<int>(counters_.size()));
    for (std::size_t p = 0; p < counters_.size(); ++p) {
        const auto& c = counters_[p];
        const auto k = c.counts();
        auto& ps = s.paths[p];  // named by stream_summaries
        ps.packets = c.packets();
        ps.bits_checked = k.bits_checked;
        ps.bit_errors = k.bit_errors;
        ps.bits_before_lock = k.bits_before_lock;
        ps.resyncs = k.resyncs;
        ps.locked = k.locked;
        ps.ber = c.ber();
        ps.bep_estimate_sum = bep_sum_[p];
        ps.mean_bep_estimate = s.packets_found ? bep_sum_[p] / static_cast<double>(s.packets_found) : 0.0;
        ps.fec = fec_sums_[p];
    }
    s.packets_skipped = counters_[0].packets_skipped();
    return s;
}

}  // namespace paq::dsp
