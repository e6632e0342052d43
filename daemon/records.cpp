#include "daemon/records.hpp"

#include <cmath>
#include <cstdio>
#include <numbers>
#include <stdexcept>

namespace paq::daemon {

double rms_delay_spread_samples(const std::array<cf64, dsp::chain::L_ch>& h) noexcept
{
    double e = 0.0, m1 = 0.0, m2 = 0.0;
    for (std::size_t k = 0; k < h.size(); ++k) {
        const double p = std::norm(h[k]);
        const double t = static_cast<double>(k);
        e += p;
        m1 += p * t;
        m2 += p * t * t;
    }
    if (!(e > 0.0)) return 0.0;
    const double mean = m1 / e;
    return std::sqrt(std::max(0.0, m2 / e - mean * mean));
}

namespace {

std::filesystem::path with_suffix(const std::filesystem::path& base, const char* suffix)
{
    return base.string() + suffix;
}

std::ofstream open_csv(const std::filesystem::path& p)
{
    if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path());
    std::ofstream f(p, std::ios::trunc);
    if (!f) throw std::runtime_error("records: cannot create " + p.string());
    return f;
}

}  // namespace

records_writer::records_writer(const records_config& cfg, std::optional<dsp::pn_pattern> pattern,
                               double sample_rate_hz)
    : cfg_(cfg), pattern_(pattern), fs_(sample_rate_hz)
{
    if (cfg.decimation < 1 || cfg.channel_decimation < 1) {
        throw std::invalid_argument("records: decimation and channel_decimation must be >= 1");
    }
    if (!(fs_ > 0.0)) throw std::invalid_argument("records: the sample rate must be positive");
    packets_f_ = open_csv(packets_path());
    channel_f_ = open_csv(channel_path());
    if (pattern_) {
        for (int p = 0; p < dsp::chain::num_paths; ++p) counters_.emplace_back(*pattern_);
    }
    packets_f_ << "packet,packets,time_s,batch,start_sample,metric,cfo_hz,sigma2,ebn0_db,channel_energy,"
                  "delay_spread_ns,zf_condition,channel_first_tap,channel_last_tap,flags";
    for (int p = 0; p < dsp::chain::num_paths; ++p) {
        const std::string n = dsp::path_name(p);
        packets_f_ << ',' << n << "_bits," << n << "_errors," << n << "_bep," << n << "_known_errors";
    }
    packets_f_ << '\n';
    channel_f_ << "packet,time_s,tap_offset";
    for (int k = 0; k < dsp::chain::L_ch; ++k) channel_f_ << ",h" << k << "_re,h" << k << "_im";
    channel_f_ << '\n';
    check(packets_f_, packets_path());
    check(channel_f_, channel_path());
}

records_writer::~records_writer()
{
    try {
        close();
    } catch (...) {
        // close() is the place to see errors; a destructor must not throw.
    }
}

std::filesystem::path records_writer::packets_path() const { return with_suffix(cfg_.base, "-packets.csv"); }
std::filesystem::path records_writer::channel_path() const { return with_suffix(cfg_.base, "-channel.csv"); }

void records_writer::check(std::ofstream& f, const std::filesystem::path& p)
{
    if (!f) {
        failed_ = true;
        throw std::runtime_error("records: write error on " + p.string() + " (disk full?); records stop here");
    }
}

void records_writer::write_row(const dsp::packet_record& rec, std::uint64_t batch)
{
    char buf[512];
    const double cfo_hz = rec.cfo_rad_per_sample * fs_ / (2.0 * std::numbers::pi);
    const double spread_ns = rms_delay_spread_samples(rec.h) / fs_ * 1e9;
    std::snprintf(buf, sizeof buf, "%llu,%u,%.9f,%llu,%llu,%.4f,%.2f,%.6g,%.3f,%.6g,%.2f,%.6g,%d,%d,%u",
                  static_cast<unsigned long long>(packets_ - 1), g_.packets,
                  static_cast<double>(rec.start_sample) / fs_, static_cast<unsigned long long>(batch),
                  static_cast<unsigned long long>(rec.start_sample), rec.metric, cfo_hz, rec.sigma2, rec.ebn0_db,
                  rec.channel_energy, spread_ns, rec.zf_condition, rec.channel_first_tap, rec.channel_last_tap, g_.flags);
    packets_f_ << buf;
    for (std::size_t p = 0; p < dsp::chain::num_paths; ++p) {
        if (pattern_) {
            std::snprintf(buf, sizeof buf, ",%llu,%llu,%.4g,%llu", static_cast<unsigned long long>(g_.bits[p]),
                          static_cast<unsigned long long>(g_.errors[p]), g_.bep_sum[p] / g_.packets,
                          static_cast<unsigned long long>(g_.known_errors[p]));
        } else {
            std::snprintf(buf, sizeof buf, ",,,%.4g,%llu", g_.bep_sum[p] / g_.packets,
                          static_cast<unsigned long long>(g_.known_errors[p]));
        }
        packets_f_ << buf;
    }
    packets_f_ << '\n';
    ++rows_;
    g_ = group{};
}

void records_writer::add(const dsp::batch_output& out)
{
    if (failed_ || closed_) return;
    for (std::size_t i = 0; i < out.packets.size(); ++i) {
        const auto& rec = out.packets[i];
        ++packets_;
        ++g_.packets;
        g_.flags |= rec.flags;
        for (std::size_t p = 0; p < dsp::chain::num_paths; ++p) {
            if (pattern_) {
                auto& c = counters_[p];
                const auto before = c.counts();
                c.add_packet(rec.start_sample, out.packet_bits(i, static_cast<int>(p)));
                const auto after = c.counts();
                g_.bits[p] += after.bits_checked - before.bits_checked;
                g_.errors[p] += after.bit_errors - before.bit_errors;
            }
            g_.bep_sum[p] += rec.paths[p].bep_estimate;
            g_.known_errors[p] += rec.paths[p].known_bit_errors;
        }
        if ((packets_ - 1) % cfg_.channel_decimation == 0) {
            char buf[64];
            std::snprintf(buf, sizeof buf, "%llu,%.9f,%d", static_cast<unsigned long long>(packets_ - 1),
                          static_cast<double>(rec.start_sample) / fs_, -dsp::chain::N1);
            channel_f_ << buf;
            for (const auto& t : rec.h) {
                std::snprintf(buf, sizeof buf, ",%.6g,%.6g", t.real(), t.imag());
                channel_f_ << buf;
            }
            channel_f_ << '\n';
        }
        last_rec_ = rec;
        last_batch_ = out.batch_index;
        if (g_.packets == cfg_.decimation) write_row(rec, out.batch_index);
    }
    check(packets_f_, packets_path());
    check(channel_f_, channel_path());
}

void records_writer::close()
{
    if (closed_) return;
    closed_ = true;
    if (failed_) return;
    if (g_.packets && last_rec_) write_row(*last_rec_, last_batch_);
    packets_f_.flush();
    channel_f_.flush();
    check(packets_f_, packets_path());
    check(channel_f_, channel_path());
    packets_f_.close();
    channel_f_.close();
}

}  // namespace paq::daemon
