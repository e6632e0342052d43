#include "io/vita49_source.hpp"

#include "io/channel_pairing.hpp"
#include "io/net_core.hpp"
#include "io/vita49.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

namespace paq::io {

using namespace detail;

std::vector<std::string> vita49_source_config::validate() const
{
    error_list e;
    check_bind_address(e, "bind_address", bind_address);
    check_port(e, port, true);
    check_scale(e, ci16_scale);
    if (sample_rate_hz != 0.0) {
        check_rate(e, sample_rate_hz);
    } else if (!stream_id || allow.empty()) {
        // The rate from a context packet: only one from the named sender and stream, else any
        // host that reaches the port could choose the rate paqd receives at.
        e.errors.push_back("sample_rate_hz = 0 takes the rate from the sender's IF Context packets, and needs both the "
                           "sender (allow) and the stream (stream_id) named, so that nobody else can set it; or set "
                           "sample_rate_hz");
    }
    if (!(context_timeout_s >= 0.1 && context_timeout_s <= 3600.0)) e.add("context_timeout_s", context_timeout_s, "0.1 .. 3600 s");
    check_rcvbuf(e, rcvbuf_bytes);
    if (stream_timeout_ms < 1 || stream_timeout_ms > 3'600'000)
        e.add("stream_timeout_ms", stream_timeout_ms, "1 .. 3600000 ms");
    if (second_stream_id) {
        if (!stream_id) {
            e.errors.push_back("second_stream_id needs stream_id: the two channels' streams are both named");
        } else if (*second_stream_id == *stream_id) {
            e.errors.push_back("second_stream_id " + std::to_string(*second_stream_id) +
                               " is stream_id: the second channel is another stream");
        }
    }
    for (auto& m : check_allow_list(allow)) e.errors.push_back(std::move(m));
    return e.errors;
}

// ---- vita49_source -------------------------------------------------------------------------

struct vita49_source::impl final : net_core {
    impl(source_counters& c, time_anchor_slot& anchor_slot, vita49_source_config config)
        : net_core(c, describe_config(config)), anchor(anchor_slot), cfg(std::move(config)),
          tracker(cfg.sample_rate_hz), samples(max_datagram_bytes / vita49::bytes_per_sample + 1)
    {
        locked_stream = cfg.stream_id;
        set_allow_list(cfg.allow);
    }

    static std::string describe_config(const vita49_source_config& c)
    {
        char id[32];
        if (c.stream_id) std::snprintf(id, sizeof id, "stream id 0x%08x", static_cast<unsigned>(*c.stream_id));
        std::string stream = c.stream_id ? std::string(id) : std::string("first stream id seen");
        if (c.stream_id && c.second_stream_id) {
            std::snprintf(id, sizeof id, "0x%08x", static_cast<unsigned>(*c.second_stream_id));
            stream += " and " + std::string(id) + ": 2 channels paired by timestamp";
        }
        if (!c.stream_id && c.stream_change == stream_change_policy::follow)
            stream += ", follows a new one after " + std::to_string(c.stream_timeout_ms) + " ms of silence";
        return "vita49 udp " + endpoint_text(c.bind_address, c.port) + " (" + stream + ", ci16, " +
               (c.sample_rate_hz > 0.0 ? format_rate(c.sample_rate_hz) : std::string("rate from the sender's context")) +
               (c.allow.empty() ? "" : ", allow-list") + ")";
    }

    /// sample_rate_hz 0: binds the socket and reads datagrams until an IF Context packet
    /// (of stream_id, when set) carries a sample rate; then the tracker and the rate are set.
    void learn_rate_from_context()
    {
        socket = open_udp(*this, cfg.bind_address, cfg.port, cfg.rcvbuf_bytes);
        spdlog::info("{}: waiting up to {} s for the sender's IF Context packet with the sample rate", name,
                     cfg.context_timeout_s);
        std::vector<std::byte> buf(max_datagram_bytes + 1);
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(cfg.context_timeout_s);
        while (!stop_requested.load()) {
            const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
            if (left.count() <= 0) break;
            pollfd pfd{socket.native_handle(), POLLIN, 0};
            if (::poll(&pfd, 1, static_cast<int>(std::min<long long>(left.count(), 200))) <= 0) continue;
            for (int k = 0; k < 256; ++k) {
                udp::endpoint sender;
                error_code ec;
                const std::size_t n = socket.receive_from(asio::buffer(buf), sender, receive_flags, ec);
                if (ec == asio::error::would_block || ec == asio::error::try_again) break;
                if (ec == asio::error::connection_refused) continue;
                if (ec) throw std::runtime_error(name + ": receive failed: " + ec.message());
                if (!admit(sender.address(), sender.port(), "datagram")) continue;
                counters.packets += 1;
                if (n > max_datagram_bytes) {  // no gap before the rate is known
                    count_oversize(n);
                    continue;
                }
                vita49::packet p;
                if (const std::string error = vita49::parse_packet(std::span<const std::byte>(buf.data(), n), p); !error.empty()) {
                    counters.malformed += 1;
                    malformed_log.warn("{}: malformed datagram dropped: {}", name, error);
                    continue;
                }
                if (!p.is_context()) {
                    vcounters.packets_before_rate += 1;
                    vcounters.samples_before_rate += p.num_samples();
                    continue;
                }
                vcounters.context_packets += 1;
                if (p.context_sample_rate_hz == 0.0 || (cfg.stream_id && p.fields.stream_id != *cfg.stream_id)) continue;
                const double r = p.context_sample_rate_hz;
                vcounters.context_sample_rate_hz = r;
                if (!(r >= 1e3 && r <= 1e9)) {
                    // Not believed, and no reason to stop: the next context packet may be right.
                    vcounters.context_rates_refused += 1;
                    malformed_log.warn("{}: IF Context packet of stream id 0x{:08x} says the sample rate is {} Hz, outside "
                                       "1 kHz .. 1 GHz: ignored, still waiting ({} ignored in all)",
                                       name, p.fields.stream_id, r, vcounters.context_rates_refused.load());
                    continue;
                }
                cfg.sample_rate_hz = r;
                tracker = vita49::sequence_tracker(r);
                pairer = channel_pairer(lag_bound(r));
                spdlog::info("{}: sample rate {:.9g} MS/s from stream id 0x{:08x}'s IF Context packet ({} IF Data packets, {} "
                             "samples before it not delivered)",
                             name, r / 1e6, p.fields.stream_id, vcounters.packets_before_rate.load(),
                             vcounters.samples_before_rate.load());
                return;
            }
        }
        if (stop_requested.load()) throw std::runtime_error(name + ": stopped while waiting for the sender's sample rate");
        throw std::runtime_error(name + ": no IF Context packet with a sample rate arrived within " +
                                 std::to_string(cfg.context_timeout_s) +
                                 " s (source.vita49.sample_rate_hz is 0: the rate is taken from the sender's context "
                                 "packets); check that the sender sends them, or set sample_rate_hz");
    }

    void close_all() noexcept override
    {
        error_code ec;
        socket.close(ec);
    }

    // As an unparseable datagram: its gap comes before the next accepted packet, where the
    // timestamps may tell what it held.
    void oversize_datagram(std::size_t bytes) override
    {
        count_oversize(bytes);
        pending_malformed = true;
    }

    void on_datagram(std::span<const std::byte> d)
    {
        const std::string error = vita49::parse_packet(d, pkt);
        if (!error.empty()) {
            counters.malformed += 1;
            malformed_log.warn("{}: malformed datagram dropped: {}", name, error);
            pending_malformed = true;
            return;
        }
        if (pkt.is_context()) {
            vcounters.context_packets += 1;
            // Only the context of the stream received (or, before the first data packet, of
            // any stream when none is configured) speaks for its rate.
            const bool ours = locked_stream ? pkt.fields.stream_id == *locked_stream : true;
            if (const double r = pkt.context_sample_rate_hz; r != 0.0 && ours) {
                vcounters.context_sample_rate_hz = r;
                if (!(std::abs(r - cfg.sample_rate_hz) <= 1e-6 * cfg.sample_rate_hz)) {
                    vcounters.context_rate_mismatches += 1;
                    rate_log.error("{}: stream id 0x{:08x}'s context says the sample rate is {:.9g} MS/s, but the "
                                   "receiver runs at sample_rate_hz {:.9g} MS/s: set source.vita49.sample_rate_hz to "
                                   "the sender's rate (the packets are decoded at the configured rate)",
                                   name, pkt.fields.stream_id, r / 1e6, cfg.sample_rate_hz / 1e6);
                }
            }
            return;
        }
        const std::uint32_t id = pkt.fields.stream_id;
        if (cfg.second_stream_id) {
            on_channel_packet(id);
            return;
        }
        const auto now = std::chrono::steady_clock::now();
        if (!locked_stream) {
            locked_stream = id;
            spdlog::info("{}: receiving stream id 0x{:08x}", name, id);
        } else if (id != *locked_stream) {
            if (!follows() || now - locked_seen < stream_timeout) {
                vcounters.other_stream += 1;
                other_log.warn("{}: packet of stream id 0x{:08x} dropped (receiving 0x{:08x})", name, id, *locked_stream);
                return;
            }
            change_stream(id, now);
        }
        locked_seen = now;
        const std::size_t n = pkt.num_samples();
        const auto tracked = track(n, "");
        if (!tracked) return;
        const vita49::sequence_result& r = *tracked;
        if (r.resync) {
            sink->gap(0, gap_reason::lost_packets);
        } else if (r.packets_lost > 0 || r.samples_lost > 0) {
            sink->gap(r.samples_lost, gap_reason::lost_packets);
        } else if (pending_malformed && !r.samples_exact && !r.first) {
            // Neither timestamp nor packet count shows a loss, but a datagram was unreadable:
            // it may have carried samples of this stream (packet count mod 16).
            sink->gap(0, gap_reason::source_error);
        }
        pending_malformed = false;
        // The sender's time of this packet's first sample, the index it gets here. A stream
        // whose packets carry no UTC or GPS time is timed on the host's clock at arrival, as
        // raw network IQ is (never mixed with the sender's time once that was seen).
        if (const auto utc_ns = vita49::first_sample_utc_ns(pkt.fields, cfg.sample_rate_hz); utc_ns && n > 0) {
            set_anchor({counters.samples.load(), *utc_ns});
            sender_time_seen = true;
        } else if (!sender_time_seen && n > 0 && cfg.sample_rate_hz > 0.0) {
            set_anchor(host_clock_anchor(counters.samples.load(), n, cfg.sample_rate_hz));
        }
        counters.bytes += pkt.payload.size();
        // VITA-49 IF data is ci16: delivered as received (byte order fixed), not converted.
        vita49::decode_payload(pkt, samples.data());
        deliver(samples.data(), n, cfg.ci16_scale);
    }

    /// The sequence tracking of a data packet of n samples (each stream id tracked on its own),
    /// `who` prefixing the log lines ("" or "channel N: "): a duplicate or late packet is
    /// counted, logged and refused (nullopt); a resync, lost packets and a packet count that
    /// disagrees with the timestamps are counted and logged. The caller marks the gaps.
    [[nodiscard]] std::optional<vita49::sequence_result> track(std::size_t n, std::string_view who)
    {
        const vita49::sequence_result r = tracker.update(pkt.fields, n);
        if (r.duplicate || r.late) {
            (r.duplicate ? vcounters.duplicates : vcounters.late) += 1;
            order_log.warn("{}: {}{} packet dropped (packet count {}, timestamp {})", name, who,
                           r.duplicate ? "duplicate" : "late (reordered)", pkt.fields.packet_count,
                           pkt.fields.fractional_timestamp);
            return std::nullopt;
        }
        if (r.resync) {
            vcounters.resyncs += 1;
            if (r.jumped_forward) {
                order_log.warn("{}: {}timestamp jumped forward to {}, beyond any plausible loss: a discontinuity, "
                               "tracking restarted", name, who, pkt.fields.fractional_timestamp);
            } else {
                order_log.warn("{}: {}timestamp jumped back to {}: sender restarted? tracking restarted", name, who,
                               pkt.fields.fractional_timestamp);
            }
        } else if (r.packets_lost > 0 || r.samples_lost > 0) {
            add_saturating(counters.packets_lost, r.packets_lost);
            add_saturating(counters.samples_lost, r.samples_lost);
            limiter.warn("{}: {}{} packet(s) lost ({} {} samples)", name, who, r.packets_lost,
                         r.samples_exact ? "exactly" : "about", r.samples_lost);
        }
        if (r.count_mismatch) {
            vcounters.count_mismatches += 1;
            order_log.warn("{}: {}packet count {} disagrees with the timestamps ({} packet(s) missing by timestamp): "
                           "the timestamps are used",
                           name, who, pkt.fields.packet_count, r.packets_lost);
        }
        return r;
    }

    /// A time anchor for the sink and latest_time_anchor().
    void set_anchor(const time_anchor& a)
    {
        anchor.set(a);
        sink->timestamp(a);
    }

    // ---- two channels (second_stream_id) -------------------------------------------------

    /// The pairer's output: sample times to the sink (on the host's clock while the sender
    /// gives no UTC), gaps named by what caused them.
    struct pair_sink final : paired_output {
        explicit pair_sink(impl& m) : self(m) {}
        void pairs(std::span<const cf32x2> s) override
        {
            if (s.empty()) return;
            if (!self.sender_time_seen && self.cfg.sample_rate_hz > 0.0) {
                self.set_anchor(host_clock_anchor(self.counters.samples.load(), s.size(), self.cfg.sample_rate_hz));
            }
            self.deliver(s);
        }
        void gap(std::uint64_t sample_times, bool lagging) override
        {
            self.sink->gap(sample_times, lagging ? gap_reason::stall : gap_reason::lost_packets);
        }
        impl& self;
    };

    /// The timeline index of a packet's first sample from its timestamps: the sample count
    /// (with TSI, seconds x the integer rate added), or TSI + picoseconds times the rate.
    [[nodiscard]] std::optional<std::int64_t> timeline_index(const vita49::packet_fields& f) const noexcept
    {
        const double rate = cfg.sample_rate_hz;
        if (f.tsf == vita49::tsf_type::sample_count) {
            if (f.fractional_timestamp >= (std::uint64_t{1} << 62)) return -1;  // out of range: refused by the caller
            if (f.tsi == vita49::tsi_type::none) return static_cast<std::int64_t>(f.fractional_timestamp);
            const double whole = std::round(rate);
            if (std::abs(rate - whole) > 1e-6 || whole <= 0.0) return std::nullopt;
            return static_cast<std::int64_t>(f.integer_timestamp) * static_cast<std::int64_t>(whole) +
                   static_cast<std::int64_t>(f.fractional_timestamp);
        }
        if (f.tsf == vita49::tsf_type::real_time_ps && f.tsi != vita49::tsi_type::none && rate > 0.0) {
            const long double t = static_cast<long double>(f.integer_timestamp) +
                                  static_cast<long double>(f.fractional_timestamp) * 1e-12L;
            return static_cast<std::int64_t>(std::llround(t * static_cast<long double>(rate)));
        }
        return std::nullopt;
    }

    /// A data packet of channel 1's or channel 2's stream (else counted and dropped): tracked
    /// as one stream's, placed on the timeline (its first packet, or the first after a jump,
    /// by its timestamp; each next one after its channel's last, lost samples between) and
    /// given to the pairer.
    void on_channel_packet(std::uint32_t id)
    {
        const int ch = id == *cfg.stream_id ? 0 : id == *cfg.second_stream_id ? 1 : -1;
        if (ch < 0) {
            vcounters.other_stream += 1;
            other_log.warn("{}: packet of stream id 0x{:08x} dropped (receiving 0x{:08x} and 0x{:08x})", name, id,
                           *cfg.stream_id, *cfg.second_stream_id);
            return;
        }
        pending_malformed = false;  // the timestamps tell what an unreadable datagram held
        const auto c = static_cast<std::size_t>(ch);
        const std::size_t n = pkt.num_samples();
        // Timeline indices stay below 2^62 (146 years of samples at 1 GS/s; far beyond any real
        // sender's count), so that no sum of them and of samples lost can overflow.
        constexpr std::int64_t timeline_limit = std::int64_t{1} << 62;
        auto placed = timeline_index(pkt.fields);
        if (placed && (*placed < 0 || *placed >= timeline_limit)) placed.reset();
        if (placed && channel_next[c] && *channel_next[c] >= timeline_limit) restart_pairing();
        if (!placed) {
            vcounters.untimed_packets += 1;
            untimed_samples[c] += n;
            publish_pairing_counts();
            other_log.error("{}: channel {} (stream id 0x{:08x}): packet without a timestamp that places it (TSF sample "
                            "count, or TSI with a real-time TSF, at an integer rate for TSI with a sample count; below "
                            "2^62 samples): two channels are paired by their timestamps; dropped",
                            name, ch + 1, id);
            return;
        }
        constexpr std::string_view channel_prefix[2] = {"channel 1: ", "channel 2: "};
        const auto tracked = track(n, channel_prefix[c]);
        if (!tracked) return;
        const vita49::sequence_result& r = *tracked;
        if (r.resync) restart_pairing();  // both channels placed again by their timestamps
        std::int64_t start = *placed;
        if (channel_next[c]) {
            start = *channel_next[c] + static_cast<std::int64_t>(std::min<std::uint64_t>(r.samples_lost, 1ULL << 40));
        }
        channel_next[c] = start + static_cast<std::int64_t>(n);
        // The sender's UTC for the next sample time delivered, when this packet begins there.
        if (const auto utc_ns = vita49::first_sample_utc_ns(pkt.fields, cfg.sample_rate_hz);
            utc_ns && n > 0 && pairer.started() && start == pairer.next_index()) {
            set_anchor({counters.samples.load(), *utc_ns});
            sender_time_seen = true;
        }
        counters.bytes += pkt.payload.size();
        if (converted.size() < n) converted.resize(n);
        vita49::decode_payload(pkt, converted.data(), cfg.ci16_scale);
        pairer.push(ch, start, std::span<const cf32>(converted.data(), n), pairs_out);
        publish_pairing_counts();
    }

    /// Both channels placed again by their next timestamps; what was buffered is counted as
    /// unpaired and the stream gets a discontinuity.
    void restart_pairing()
    {
        pairer.reset();
        publish_pairing_counts();
        channel_next = {};
        sink->gap(0, gap_reason::discontinuity);
    }

    /// The pairer's counts into the shared counters (the samples of packets not placed added to
    /// the unpaired), and a log line for each channel that began to lag.
    void publish_pairing_counts()
    {
        const auto& pc = pairer.counts();
        for (std::size_t k = 0; k < 2; ++k) {
            vcounters.unpaired_samples[k] = pc.unpaired_samples[k] + untimed_samples[k];
            if (pc.lag_events[k] == vcounters.lag_events[k].load()) continue;
            vcounters.lag_events[k] = pc.lag_events[k];
            lag_log.warn("{}: channel {} (stream id 0x{:08x}) is more than {} ms behind channel {} or silent: "
                         "channel {}'s samples given up until it pairs again ({} times in all)",
                         name, k + 1, k == 0 ? *cfg.stream_id : *cfg.second_stream_id, vita49_source::max_channel_lag_s * 1e3,
                         2 - k, 2 - k, pc.lag_events[k]);
        }
    }

    /// Whether another stream id may replace the current one (never with a configured id).
    [[nodiscard]] bool follows() const noexcept
    {
        return !cfg.stream_id && cfg.stream_change == stream_change_policy::follow;
    }

    /// The current stream has been silent for stream_timeout_ms and `id` arrived: take it.
    /// Its samples do not continue the old stream's, so the batcher gets a discontinuity
    /// (no packet spans the change) and the sequence tracking starts over from this packet.
    void change_stream(std::uint32_t id, std::chrono::steady_clock::time_point now)
    {
        const auto silent_ms = std::chrono::duration_cast<std::chrono::milliseconds>(now - locked_seen).count();
        spdlog::warn("{}: stream id 0x{:08x} silent for {} ms and stream id 0x{:08x} arriving: following it "
                     "(stream_change: follow); sequence tracking restarts",
                     name, *locked_stream, silent_ms, id);
        vcounters.stream_changes += 1;
        locked_stream = id;
        tracker.reset();
        // The discontinuity gap ends the segment; an unreadable datagram of the old stream no
        // longer needs a gap of its own.
        pending_malformed = false;
        sink->gap(0, gap_reason::discontinuity);
    }

    time_anchor_slot& anchor;
    bool sender_time_seen = false;  ///< a packet carried the sender's UTC: the host clock is not used
    vita49_source_config cfg;
    vita49_counters vcounters;
    vita49::sequence_tracker tracker;
    vita49::packet pkt;
    std::optional<std::uint32_t> locked_stream;
    std::chrono::steady_clock::duration stream_timeout =
        std::chrono::milliseconds(cfg.stream_timeout_ms);
    std::chrono::steady_clock::time_point locked_seen{};  ///< last packet of locked_stream
    bool pending_malformed = false;
    std::vector<ci16> samples;  ///< a packet's payload as received (ci16, host byte order)
    // Two channels: the pairer (holding at most max_channel_lag_s of samples a channel), its
    // output, each channel's next timeline index (unset until placed by a timestamp), and a
    // packet's samples decoded for it.
    [[nodiscard]] static std::uint64_t lag_bound(double rate_hz) noexcept
    {
        return std::clamp<std::uint64_t>(static_cast<std::uint64_t>(std::max(rate_hz, 0.0) * vita49_source::max_channel_lag_s),
                                         1024, std::uint64_t{1} << 22);
    }
    channel_pairer pairer{lag_bound(cfg.sample_rate_hz)};
    pair_sink pairs_out{*this};
    std::array<std::optional<std::int64_t>, 2> channel_next{};
    std::array<std::uint64_t, 2> untimed_samples{};  ///< samples of packets not placed, per channel
    std::vector<cf32> converted;
    // One limiter per kind of message, so that a flood of one kind hides none of the others
    // (net_core::limiter is the one for losses).
    log_limiter malformed_log, other_log, order_log, lag_log;
    log_limiter rate_log{std::chrono::seconds(10)};
    udp::socket socket{ioc};
};

vita49_source::vita49_source(vita49_source_config cfg)
    : impl_(std::make_unique<impl>(counters_, time_anchor_, checked(std::move(cfg), "vita49 source")))
{
}

vita49_source::~vita49_source() = default;

std::string vita49_source::describe() const { return impl_->name; }
std::optional<float> vita49_source::ci16_scale() const
{
    if (impl_->cfg.second_stream_id) return std::nullopt;  // paired as cf32x2
    return impl_->cfg.ci16_scale;
}
int vita49_source::channels() const { return impl_->cfg.second_stream_id ? 2 : 1; }
double vita49_source::sample_rate_hz() const
{
    if (impl_->cfg.sample_rate_hz == 0.0) impl_->learn_rate_from_context();
    return impl_->cfg.sample_rate_hz;
}
std::uint16_t vita49_source::local_port() const noexcept { return impl_->local_port.load(); }
const vita49_source_config& vita49_source::config() const noexcept { return impl_->cfg; }
const vita49_counters& vita49_source::vita_counters() const noexcept { return impl_->vcounters; }

namespace {

const source_counter vita49_counter_list[] = {
    {"vita49_context_packets", false, true, "VITA-49 context packets skipped."},
    {"vita49_other_stream", false, true, "VITA-49 data packets of another stream id dropped."},
    {"vita49_stream_changes", false, true, "VITA-49 stream ids followed (stream_change: follow)."},
    {"vita49_duplicates", false, true, "Repeated VITA-49 packets dropped."},
    {"vita49_late", false, true, "Reordered VITA-49 packets dropped (their place was a gap)."},
    {"vita49_resyncs", false, true, "VITA-49 timestamps that jumped backwards: tracking restarted."},
    {"vita49_context_rate_mismatches", false, true, "VITA-49 context packets whose sample rate is not the configured one."},
    {"vita49_count_mismatches", false, true, "VITA-49 packets whose 4-bit count disagrees with their timestamps."},
    {"vita49_packets_before_rate", false, true, "VITA-49 data packets received before a context packet gave the sample rate."},
    {"vita49_samples_before_rate", false, true, "Their samples (not delivered)."},
    {"vita49_context_rates_refused", false, true,
     "VITA-49 context packets whose sample rate was outside 1 kHz .. 1 GHz, ignored (sample_rate_hz 0)."},
    {"vita49_context_sample_rate_hz", true, false, "The last sample rate a VITA-49 context packet carried (0: none)."},
    {"vita49_channel1_unpaired_samples", false, true,
     "Two channels: channel 1's samples dropped for want of channel 2's at their time (lost, lagging or silent)."},
    {"vita49_channel2_unpaired_samples", false, true, "The same for channel 2's samples."},
    {"vita49_channel1_lag_events", false, true,
     "Two channels: times channel 1 fell more than 100 ms behind channel 2 or silent (channel 2's samples given up)."},
    {"vita49_channel2_lag_events", false, true, "The same for channel 2."},
    {"vita49_untimed_packets", false, true, "Two channels: data packets without a timestamp to pair them by, dropped."},
};

}  // namespace

std::span<const source_counter> vita49_source::counter_list() noexcept { return vita49_counter_list; }

std::vector<source_counter_value> vita49_source::kind_counters() const
{
    const auto& c = impl_->vcounters;
    auto d = [](const std::atomic<std::uint64_t>& v) { return static_cast<double>(v.load()); };
    return counter_values(vita49_counter_list,
                          {d(c.context_packets), d(c.other_stream), d(c.stream_changes), d(c.duplicates), d(c.late), d(c.resyncs),
                           d(c.context_rate_mismatches), d(c.count_mismatches), d(c.packets_before_rate), d(c.samples_before_rate),
                           d(c.context_rates_refused), c.context_sample_rate_hz.load(), d(c.unpaired_samples[0]),
                           d(c.unpaired_samples[1]), d(c.lag_events[0]), d(c.lag_events[1]), d(c.untimed_packets)});
}
void vita49_source::stop() { impl_->request_stop(); }

void vita49_source::run(sample_sink& sink)
{
    if (impl_->stop_requested.load()) return;
    auto& m = *impl_;
    if (m.cfg.sample_rate_hz == 0.0) m.learn_rate_from_context();  // nobody asked for the rate first
    if (!m.socket.is_open()) m.socket = open_udp(m, m.cfg.bind_address, m.cfg.port, m.cfg.rcvbuf_bytes);
    auto on_datagram = [&m](std::span<const std::byte> d) { m.on_datagram(d); };
    datagram_pump<decltype(on_datagram)> pump(m, m.socket, on_datagram);
    pump.start();
    run_context(m, sink);
}

}  // namespace paq::io
