#include "daemon/records.hpp"

#include "dsp/best_stream.hpp"

#include "io/utc_time.hpp"

#include <spdlog/spdlog.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <numbers>
#include <stdexcept>
#include <system_error>
#include <utility>

#include <fcntl.h>
#include <unistd.h>

namespace paq::daemon {

static_assert(io::unknown_utc_ns == dsp::unknown_utc_ns, "one sentinel for an unknown UTC");

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

int open_csv(const std::filesystem::path& p)
{
    if (p.has_parent_path()) {
        std::error_code ec;
        std::filesystem::create_directories(p.parent_path(), ec);
        if (ec) {
            throw std::runtime_error("records (records.path, replay's --records): cannot create the directory " +
                                     p.parent_path().string() + ": " + ec.message());
        }
    }
    int fd = -1;
    do {
        fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    } while (fd < 0 && errno == EINTR);
    if (fd < 0) {
        throw std::runtime_error("records: cannot create " + p.string() + ": " +
                                 std::generic_category().message(errno));
    }
    return fd;
}

/// Writes all of data; 0 on success, else the errno of the failed write(2).
int write_all(int fd, std::string_view data)
{
    while (!data.empty()) {
        const ssize_t put = ::write(fd, data.data(), data.size());
        if (put < 0 && errno == EINTR) continue;
        if (put < 0) return errno;
        if (put == 0) return EIO;  // not expected of a file; report rather than spin
        data.remove_prefix(static_cast<std::size_t>(put));
    }
    return 0;
}

}  // namespace

records_writer::records_writer(const records_config& cfg, std::optional<dsp::pn_pattern> pattern,
                               double sample_rate_hz, double chain_rate_hz, int streams, std::optional<dsp::fec_framing> fec,
                               int receive_channels, std::array<int, 2> channel_numbers)
    : cfg_(cfg), pattern_(pattern), fec_(fec), fs_(sample_rate_hz), chain_fs_(chain_rate_hz > 0.0 ? chain_rate_hz : sample_rate_hz),
      streams_(streams), receive_channels_(receive_channels), channel_numbers_(channel_numbers)
{
    if (receive_channels < 1 || receive_channels > dsp::chain::max_receive_channels) {
        throw std::invalid_argument("records: " + std::to_string(receive_channels) + " receive channels (1 or 2)");
    }
    if (!dsp::chain::valid_streams(streams)) {
        throw std::invalid_argument("records: " + std::to_string(streams) + " streams (6 or 12)");
    }
    if (cfg.decimation < 1 || cfg.channel_decimation < 1) {
        throw std::invalid_argument("records: decimation and channel_decimation must be >= 1");
    }
    if (!(fs_ > 0.0)) throw std::invalid_argument("records: the sample rate must be positive");
    packets_file_.path = packets_path();
    channel_file_.path = channel_path();
    packets_file_.fd = open_csv(packets_file_.path);
    try {
        channel_file_.fd = open_csv(channel_file_.path);
    } catch (...) {
        ::close(packets_file_.fd);
        throw;
    }
    if (pattern_) {
        // Packets are L_pkt chain samples apart: L_pkt x fs / chain_fs input samples.
        for (int p = 0; p < streams_; ++p) {
            counters_.emplace_back(*pattern_, static_cast<double>(waveform::L_pkt) * fs_ / chain_fs_,
                                   fec_ ? static_cast<std::size_t>(fec_->info_bits()) : waveform::data_bits);
        }
    }
    std::string& ph = packets_file_.header;
    ph = "packet,packets,time_s,batch,start_sample,metric,cfo_hz,sigma2,ebn0_db,channel_energy,"
         "delay_spread_ns,zf_condition,channel_first_tap,channel_last_tap,flags,clock_ppm,iq_gain_db,iq_phase_deg,dc_dbc";
    if (receive_channels_ == 2) {
        if (channel_numbers_[0] < 1 || channel_numbers_[1] < 1 || channel_numbers_[0] == channel_numbers_[1]) {
            throw std::invalid_argument("records: the two channels' numbers must differ and be 1 or more");
        }
        ph += ",best_channel,ebn0_ch" + std::to_string(channel_numbers_[0]) + "_db,ebn0_ch" + std::to_string(channel_numbers_[1]) + "_db";
        ph += ",level_ch" + std::to_string(channel_numbers_[0]) + "_db,level_ch" + std::to_string(channel_numbers_[1]) + "_db";
    }
    for (int p = 0; p < streams_; ++p) {
        const std::string n = dsp::stream_name(p);
        ph += ',' + n + "_bits," + n + "_errors," + n + "_bep," + n + "_known_errors";
        if (fec_) ph += ',' + n + "_codewords_failed," + n + "_iterations," + n + "_channel_errors";
    }
    // The best-path choice of the row's packet (dsp::best_stream: what the best-path stream sends),
    // then its start in UTC when the source gives time (docs/RECORDS.md; empty otherwise).
    ph += ",best_stream,time_utc\n";
    std::string& ch = channel_file_.header;
    ch = "packet,time_s,tap_offset";
    for (int k = 0; k < dsp::chain::L_ch; ++k) ch += ",h" + std::to_string(k) + "_re,h" + std::to_string(k) + "_im";
    ch += '\n';
    // Headers now, so that a run without packets still leaves valid (empty) CSVs.
    flush(packets_file_);
    flush(channel_file_);
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
std::filesystem::path records_writer::counters_path() const { return with_suffix(cfg_.base, "-counters.json"); }

void records_writer::write_counters(nlohmann::json counters) const
{
    counters["records"] = {{"sample_rate_hz", fs_},
                           {"chain_rate_hz", chain_fs_},
                           {"packet_spacing_s", static_cast<double>(waveform::L_pkt) / chain_fs_}};
    if (fec_) {
        // The code of the rows' codeword columns, for paq-report's table of decoded and channel bits.
        counters["records"]["fec"] = {{"code", std::string(dsp::ldpc::to_string(fec_->code))},
                                      {"n", fec_->n},
                                      {"k", fec_->k},
                                      {"codewords_per_packet", fec_->codewords}};
        // The continuous stream: up to codewords_per_packet frames a packet, as many as end in it.
        if (fec_->continuous()) counters["records"]["fec"]["continuous"] = true;
    }
    const std::string text = counters.dump(2) + "\n";
    const auto path = counters_path();
    const auto tmp = std::filesystem::path(path.string() + ".tmp");
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) throw std::runtime_error(tmp.string() + ": cannot create: " + std::generic_category().message(errno));
    std::size_t done = 0;
    while (done < text.size()) {
        const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            const int err = errno;
            ::close(fd);
            ::unlink(tmp.c_str());
            throw std::runtime_error(tmp.string() + ": write failed: " + std::generic_category().message(err));
        }
        done += static_cast<std::size_t>(n);
    }
    if (::close(fd) != 0 || ::rename(tmp.c_str(), path.c_str()) != 0) {
        const int err = errno;
        ::unlink(tmp.c_str());
        throw std::runtime_error(path.string() + ": cannot write: " + std::generic_category().message(err));
    }
}

void records_writer::flush(csv_file& f)
{
    if (f.pending_rows == 0 && f.header_written) return;
    std::string data;
    if (!f.header_written) data = f.header;
    data += f.pending;
    const std::uint64_t rows = std::exchange(f.pending_rows, 0);
    f.pending.clear();

    const int err = write_all(f.fd, data);
    if (err == 0) {
        f.committed_bytes += data.size();
        f.header_written = true;
        f.rows_written += rows;
        if (f.failing_errno != 0) {
            spdlog::info("records: writing {} again ({} rows lost meanwhile)", f.path.string(), f.rows_lost.load());
            f.failing_errno = 0;
        }
        return;
    }
    f.rows_lost += rows;
    if (f.first_errno == 0) f.first_errno = err;
    if (f.failing_errno == 0) {
        spdlog::error("records: cannot write {}: {}; rows are counted as lost (paqd_record_rows_lost_total) "
                      "until writing works again",
                      f.path.string(), std::generic_category().message(err));
        f.failing_errno = err;
    }
    // A partial write left part of a row: cut the file back to its last whole row so that
    // a later write continues a valid CSV. Best effort: a pipe or device cannot be cut.
    if (::ftruncate(f.fd, static_cast<off_t>(f.committed_bytes)) == 0) {
        (void)::lseek(f.fd, static_cast<off_t>(f.committed_bytes), SEEK_SET);
    }
}

void records_writer::write_row(const dsp::packet_record& rec, std::uint64_t batch)
{
    char buf[512];
    const double cfo_hz = rec.cfo_rad_per_sample * chain_fs_ / (2.0 * std::numbers::pi);
    const double spread_ns = rms_delay_spread_samples(rec.h) / chain_fs_ * 1e9;
    // The front end's estimates: empty fields when the correction is off for this packet.
    char fe[3][24] = {"", "", ""};
    if (rec.front_end_estimated) {
        std::snprintf(fe[0], sizeof fe[0], "%.3f", static_cast<double>(rec.iq_gain_db));
        std::snprintf(fe[1], sizeof fe[1], "%.3f", static_cast<double>(rec.iq_phase_deg));
        std::snprintf(fe[2], sizeof fe[2], "%.1f", static_cast<double>(rec.dc_dbc));
    }
    std::snprintf(buf, sizeof buf, "%llu,%u,%.9f,%llu,%llu,%.4f,%.2f,%.6g,%.3f,%.6g,%.2f,%.6g,%d,%d,%u,%.2f,%s,%s,%s",
                  static_cast<unsigned long long>(packets_.load() - 1), g_.packets,
                  static_cast<double>(rec.start_sample) / fs_, static_cast<unsigned long long>(batch),
                  static_cast<unsigned long long>(rec.start_sample), rec.metric, cfo_hz, rec.sigma2, rec.ebn0_db,
                  rec.channel_energy, spread_ns, rec.zf_condition, rec.channel_first_tap, rec.channel_last_tap, g_.flags,
                  rec.clock_ppm, fe[0], fe[1], fe[2]);
    std::string& out = packets_file_.pending;
    out += buf;
    if (receive_channels_ == 2) {
        std::snprintf(buf, sizeof buf, ",%d,%.3f,%.3f,%.3f,%.3f", channel_numbers_[rec.best_channel != 0 ? 1 : 0],
                      static_cast<double>(rec.channel_ebn0_db[0]), static_cast<double>(rec.channel_ebn0_db[1]),
                      static_cast<double>(rec.channel_level_db[0]), static_cast<double>(rec.channel_level_db[1]));
        out += buf;
    }
    for (std::size_t p = 0; p < static_cast<std::size_t>(streams_); ++p) {
        if (pattern_) {
            std::snprintf(buf, sizeof buf, ",%llu,%llu,%.4g,%llu", static_cast<unsigned long long>(g_.bits[p]),
                          static_cast<unsigned long long>(g_.errors[p]), g_.bep_sum[p] / g_.packets,
                          static_cast<unsigned long long>(g_.known_errors[p]));
        } else {
            std::snprintf(buf, sizeof buf, ",,,%.4g,%llu", g_.bep_sum[p] / g_.packets,
                          static_cast<unsigned long long>(g_.known_errors[p]));
        }
        out += buf;
        if (fec_) {
            const auto& f = g_.fec[p];
            std::snprintf(buf, sizeof buf, ",%llu,%llu,%llu", static_cast<unsigned long long>(f.codewords_failed),
                          static_cast<unsigned long long>(f.iterations), static_cast<unsigned long long>(f.channel_bit_errors));
            out += buf;
        }
    }
    out += ',';
    out += dsp::stream_name(dsp::best_stream(rec, streams_));
    out += ',';
    out += io::format_utc_ns(rec.utc_ns);  // empty when unknown
    out += '\n';
    ++packets_file_.pending_rows;
    g_ = group{};
}

void records_writer::add(const dsp::batch_output& out)
{
    if (closed_) return;
    if (out.streams != streams_) {
        throw std::invalid_argument("records: a batch with " + std::to_string(out.streams) + " streams, the files have columns for " +
                                    std::to_string(streams_));
    }
    if (fec_ && (!out.decoded_with(*fec_) || (fec_->continuous() && out.frames.size() != out.packets.size()))) {
        throw std::invalid_argument("records: a batch without the coded link's decoding");
    }
    for (std::size_t i = 0; i < out.packets.size(); ++i) {
        const auto& rec = out.packets[i];
        ++packets_;
        ++g_.packets;
        g_.flags |= rec.flags;
        for (std::size_t p = 0; p < static_cast<std::size_t>(streams_); ++p) {
            if (pattern_) {
                auto& c = counters_[p];
                const auto before = c.counts();
                if (fec_ && fec_->continuous()) {
                    c.add_frames(rec.start_sample, out.frames[i].first, out.frames[i].count, out.packet_decoded(i, static_cast<int>(p)),
                                 static_cast<std::size_t>(fec_->k));
                } else {
                    c.add_packet(rec.start_sample, fec_ ? out.packet_decoded(i, static_cast<int>(p)) : out.packet_bits(i, static_cast<int>(p)));
                }
                const auto after = c.counts();
                g_.bits[p] += after.bits_checked - before.bits_checked;
                g_.errors[p] += after.bit_errors - before.bit_errors;
            }
            g_.bep_sum[p] += rec.paths[p].bep_estimate;
            g_.known_errors[p] += rec.paths[p].known_bit_errors;
            if (fec_) {
                g_.fec[p].add(out.packet_codewords(i, static_cast<int>(p)), fec_->continuous() ? out.frames[i].count : fec_->codewords, fec_->n);
            }
        }
        const std::uint64_t packet = packets_.load() - 1;
        if (packet % cfg_.channel_decimation == 0) {
            std::string& line = channel_file_.pending;
            char buf[64];
            std::snprintf(buf, sizeof buf, "%llu,%.9f,%d", static_cast<unsigned long long>(packet),
                          static_cast<double>(rec.start_sample) / fs_, -dsp::chain::N1);
            line += buf;
            for (const auto& t : rec.h) {
                std::snprintf(buf, sizeof buf, ",%.6g,%.6g", t.real(), t.imag());
                line += buf;
            }
            line += '\n';
            ++channel_file_.pending_rows;
        }
        last_rec_ = rec;
        last_batch_ = out.batch_index;
        if (g_.packets == cfg_.decimation) write_row(rec, out.batch_index);
    }
    flush(packets_file_);
    flush(channel_file_);
}

void records_writer::close()
{
    if (closed_) return;
    closed_ = true;
    if (g_.packets && last_rec_) write_row(*last_rec_, last_batch_);
    flush(packets_file_);
    flush(channel_file_);
    std::string problems;
    for (csv_file* f : {&packets_file_, &channel_file_}) {
        // Linux releases the descriptor even when close() fails: never retried.
        if (::close(std::exchange(f->fd, -1)) != 0 && errno != EINTR && f->first_errno == 0) {
            f->first_errno = errno;
        }
        if (f->rows_lost > 0 || !f->header_written || f->first_errno != 0) {
            if (!problems.empty()) problems += "; ";
            problems += f->path.string() + ": " + std::to_string(f->rows_lost.load()) + " of " +
                        std::to_string(f->rows_lost.load() + f->rows_written.load()) + " rows lost (" +
                        std::generic_category().message(f->first_errno != 0 ? f->first_errno : EIO) + ")";
        }
    }
    if (!problems.empty()) throw std::runtime_error("records: write errors: " + problems);
}

}  // namespace paq::daemon
