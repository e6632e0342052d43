#include "io/udp_source.hpp"

#include "io/net_core.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>

namespace paq::io {

using namespace detail;

std::size_t header_bytes(udp_header h) noexcept
{
    switch (h) {
    case udp_header::none: return 0;
    case udp_header::gnuradio_seq: return 8;
    case udp_header::gnuradio_seq_size: return 16;  // u64 + i16, padded to the u64's alignment
    }
    return 0;
}

udp_seq_result check_udp_sequence(std::optional<std::uint64_t> last, std::uint64_t seq) noexcept
{
    if (!last) return {};
    // A sink restarted mid-stream numbers from 1 again; a stale 1 right after 1 is a duplicate.
    if (seq == 1 && *last != 0 && *last != 1) return {udp_seq_verdict::restart, 0};
    if (seq <= *last) {
        // Without the window, one datagram far ahead (corrupt, hostile, or the last of a
        // sender that then restarted without its datagram 1 reaching us) would make every
        // later one stale for good.
        return {*last - seq <= udp_reorder_window ? udp_seq_verdict::stale : udp_seq_verdict::resync, 0};
    }
    const std::uint64_t missing = seq - *last - 1;
    if (missing == 0) return {};
    if (missing > udp_max_seq_jump) return {udp_seq_verdict::resync, 0};
    return {udp_seq_verdict::lost, missing};
}

std::vector<std::string> udp_source_config::validate() const
{
    error_list e;
    check_bind_address(e, "bind_address", bind_address);
    check_port(e, port, true);
    check_scale(e, ci16_scale);
    check_rate(e, sample_rate_hz);
    check_rcvbuf(e, rcvbuf_bytes);
    check_channels(e, channels);
    for (auto& m : check_allow_list(allow)) e.errors.push_back(std::move(m));
    return e.errors;
}

// ---- udp_source ----------------------------------------------------------------------------

struct udp_source::impl final : net_core {
    impl(source_counters& c, udp_source_config config)
        : net_core(c, "udp " + endpoint_text(config.bind_address, config.port) + " (raw " +
                          std::string(to_sigmf_datatype(config.format)) + ", " +
                          format_rate(config.sample_rate_hz) +
                          (config.header == udp_header::none
                               ? std::string(", loss undetectable")
                               : ", header " + std::string(to_string(config.header))) +
                          channels_text(config.channels) + (config.allow.empty() ? "" : ", allow-list") + ")"),
          cfg(std::move(config)), sample_bytes(bytes_per_sample(cfg.format) * static_cast<std::size_t>(cfg.channels)),
          head_bytes(header_bytes(cfg.header))
    {
        set_allow_list(cfg.allow);
        raw_capacity(cfg.format, max_datagram_bytes / sample_bytes + 1, cfg.channels);
    }

    void close_all() noexcept override
    {
        error_code ec;
        socket.close(ec);
    }

    [[nodiscard]] static std::uint64_t read_u64_le(const std::byte* p) noexcept
    {
        std::uint64_t v = 0;
        for (int i = 7; i >= 0; --i) v = (v << 8) | std::to_integer<std::uint64_t>(p[i]);
        return v;
    }

    // header none: GNU Radio's sequence number is 1, 2, 3, ... in the first 8 bytes. Random IQ
    // (or noise) does not count up by exactly one over several datagrams, so a run of
    // suspect_run consecutive +1 steps among the first suspect_window datagrams is taken as
    // the mistake and said once; the samples are still delivered (as configured).
    static constexpr int suspect_run = 4;
    static constexpr int suspect_window = 64;
    void watch_for_header(std::span<const std::byte> d)
    {
        if (suspect_done || d.size() < 8) return;
        const std::uint64_t first = read_u64_le(d.data());
        if (suspect_last && first == *suspect_last + 1 && first < (std::uint64_t{1} << 48)) ++suspect_steps;
        else suspect_steps = 0;
        suspect_last = first;
        if (suspect_steps >= suspect_run) {
            suspect_done = true;
            udp_counts.header_suspected.store(1);
            spdlog::warn("{}: the first 8 bytes of each datagram count up by one ({} at the last): this looks like "
                         "GNU Radio's UDP Sink with Header \"Sequence Number\" or \"Seq + Size\", read here as "
                         "samples. Set source.udp.header to gnuradio-seq or gnuradio-seq-size (DAEMON.md §3)",
                         name, first);
        }
        if (++suspect_seen >= suspect_window) suspect_done = true;
    }

    void on_datagram(std::span<const std::byte> d)
    {
        counters.bytes += d.size();
        if (d.empty()) return;  // GNU Radio's end-of-stream marker (or an empty probe)
        if (cfg.header == udp_header::none) watch_for_header(d);
        if (d.size() < head_bytes) {
            counters.malformed += 1;
            limiter.warn("{}: datagram of {} bytes is shorter than its {}-byte {} header; dropped", name, d.size(),
                         head_bytes, to_string(cfg.header));
            sink->gap(0, gap_reason::source_error);
            return;
        }
        const auto body = d.subspan(head_bytes);
        if (body.size() % sample_bytes != 0) {
            counters.malformed += 1;
            limiter.warn("{}: datagram of {} bytes ({}-byte header) is not a whole number of {}-byte {} samples{}; dropped",
                         name, d.size(), head_bytes, sample_bytes, to_sigmf_datatype(cfg.format),
                         cfg.channels == 2 ? " (sample times of 2 channels)" : "");
            sink->gap(0, gap_reason::source_error);
            return;
        }
        const std::size_t n = body.size() / sample_bytes;
        if (head_bytes != 0) {
            const std::uint64_t seq = read_u64_le(d.data());
            const auto r = check_udp_sequence(last_seq, seq);
            switch (r.verdict) {
            case udp_seq_verdict::in_order: break;
            case udp_seq_verdict::lost:
            {
                // r.lost <= udp_max_seq_jump (2^24) and n < 2^14 (one datagram): no overflow.
                const std::uint64_t lost_samples = r.lost * n;
                add_saturating(counters.packets_lost, r.lost);
                add_saturating(counters.samples_lost, lost_samples);
                limiter.warn("{}: {} datagram(s) missing before sequence number {}", name, r.lost, seq);
                sink->gap(lost_samples, gap_reason::lost_packets);
            }
                break;
            case udp_seq_verdict::restart:
                udp_counts.restarts += 1;
                // A sender can restart as often as it likes: rate-limited like the rest.
                order_log.warn("{}: sequence number back to 1 after {}: the sender restarted", name, *last_seq);
                sink->gap(0, gap_reason::discontinuity);
                break;
            case udp_seq_verdict::stale:
                udp_counts.stale += 1;
                limiter.warn("{}: sequence number {} not after {} (duplicate or reordered); dropped", name, seq,
                             *last_seq);
                return;
            case udp_seq_verdict::resync:
                udp_counts.resyncs += 1;
                order_log.warn("{}: sequence number jumped from {} to {}, {} (beyond {} back or {} ahead): a "
                               "discontinuity, tracking restarted there ({} in all)",
                               name, *last_seq, seq, seq < *last_seq ? "back" : "ahead", udp_reorder_window,
                               udp_max_seq_jump, udp_counts.resyncs.load());
                sink->gap(0, gap_reason::discontinuity);
                break;
            }
            last_seq = seq;
        }
        deliver_raw(cfg.format, cfg.ci16_scale, body.data(), n, cfg.channels);
    }

    udp_source_config cfg;
    std::size_t sample_bytes;
    std::size_t head_bytes;
    udp::socket socket{ioc};
    udp_counters udp_counts;
    std::optional<std::uint64_t> last_seq;
    // Restarts and resyncs have their own limiter, so that a flood of stale datagrams (the
    // net_core limiter's) hides none of them.
    log_limiter order_log;
    std::optional<std::uint64_t> suspect_last;
    int suspect_steps = 0;
    int suspect_seen = 0;
    bool suspect_done = false;
};

udp_source::udp_source(udp_source_config cfg)
    : impl_(std::make_unique<impl>(counters_, checked(std::move(cfg), "udp source")))
{
    impl_->host_clock = &time_anchor_;
    impl_->host_clock_rate_hz = impl_->cfg.sample_rate_hz;
}

udp_source::~udp_source() = default;

std::string udp_source::describe() const { return impl_->name; }
std::optional<float> udp_source::ci16_scale() const
{
    if (impl_->cfg.channels == 2) return std::nullopt;  // decoded to cf32x2
    return ci16_scale_of(impl_->cfg.format, impl_->cfg.ci16_scale);
}
int udp_source::channels() const { return impl_->cfg.channels; }
double udp_source::sample_rate_hz() const { return impl_->cfg.sample_rate_hz; }
std::uint16_t udp_source::local_port() const noexcept { return impl_->local_port.load(); }
const udp_source_config& udp_source::config() const noexcept { return impl_->cfg; }
const udp_counters& udp_source::udp_counts() const noexcept { return impl_->udp_counts; }

namespace {

const source_counter udp_counter_list[] = {
    {"udp_stale", false, true,
     "Raw UDP datagrams with a GNU Radio sequence number equal to the last or at most 16 before it (duplicate or reordered) dropped."},
    {"udp_restarts", false, true, "Raw UDP GNU Radio sequence numbers back to 1 (the sender restarted)."},
    {"udp_resyncs", false, true,
     "Raw UDP GNU Radio sequence numbers that jumped back beyond the reorder window (16) or ahead beyond 2^24 datagrams: a "
     "discontinuity, tracking restarted."},
    {"udp_header_suspected", true, true,
     "1: header none, but the datagrams carry what looks like GNU Radio's sequence number (set source.udp.header)."},
};

}  // namespace

std::span<const source_counter> udp_source::counter_list() noexcept { return udp_counter_list; }

std::vector<source_counter_value> udp_source::kind_counters() const
{
    const auto& c = impl_->udp_counts;
    return counter_values(udp_counter_list, {static_cast<double>(c.stale.load()), static_cast<double>(c.restarts.load()),
                                             static_cast<double>(c.resyncs.load()), static_cast<double>(c.header_suspected.load())});
}
void udp_source::stop() { impl_->request_stop(); }

void udp_source::run(sample_sink& sink)
{
    if (impl_->stop_requested.load()) return;
    auto& m = *impl_;
    m.socket = open_udp(m, m.cfg.bind_address, m.cfg.port, m.cfg.rcvbuf_bytes);
    auto on_datagram = [&m](std::span<const std::byte> d) { m.on_datagram(d); };
    datagram_pump<decltype(on_datagram)> pump(m, m.socket, on_datagram);
    pump.start();
    run_context(m, sink);
}

}  // namespace paq::io
