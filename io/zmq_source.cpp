#include "io/zmq_source.hpp"

#include "io/log_limiter.hpp"

#include <spdlog/spdlog.h>
#include <zmq.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>
#include <stdexcept>

namespace paq::io {

namespace {

[[nodiscard]] std::uint64_t le64(const std::byte* p) noexcept
{
    std::uint64_t v = 0;
    for (int i = 7; i >= 0; --i) v = (v << 8) | std::to_integer<std::uint64_t>(p[i]);
    return v;
}

[[nodiscard]] bool endpoint_ok(const std::string& e)
{
    for (const char* scheme : {"tcp://", "ipc://", "inproc://"}) {
        const std::string s(scheme);
        if (e.rfind(s, 0) == 0 && e.size() > s.size()) {
            if (s != "tcp://") return true;
            // tcp://HOST:PORT with a port 1 .. 65535. paqd connects, and libzmq refuses to
            // connect to a wildcard host ("*", which only a bind takes).
            const auto colon = e.rfind(':');
            if (colon == std::string::npos || colon < s.size() + 1) return false;
            if (e.compare(s.size(), colon - s.size(), "*") == 0) return false;
            const std::string port = e.substr(colon + 1);
            if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos) return false;
            const int p = std::stoi(port);
            return p >= 1 && p <= 65535;
        }
    }
    return false;
}

[[nodiscard]] std::string format_rate(double hz)
{
    std::ostringstream os;
    os << hz / 1e6 << " MHz";
    return os.str();
}

}  // namespace

std::optional<gnuradio_tag_header> parse_gnuradio_tag_header(std::span<const std::byte> msg) noexcept
{
    if (msg.size() < gnuradio_tag_header_bytes) return std::nullopt;
    // magic 0x5FF0 as a little-endian u16: f0 5f; version 1
    if (msg[0] != std::byte{0xf0} || msg[1] != std::byte{0x5f} || msg[2] != std::byte{0x01}) return std::nullopt;
    return gnuradio_tag_header{le64(msg.data() + 3), le64(msg.data() + 11)};
}

std::vector<std::string> zmq_source_config::validate() const
{
    std::vector<std::string> e;
    auto out_of_range = [&](const std::string& field, const auto& value, const std::string& allowed) {
        std::ostringstream os;
        os << field << " = " << value << " is out of range (allowed: " << allowed << ")";
        e.push_back(os.str());
    };
    if (!endpoint_ok(endpoint))
        e.push_back("endpoint = '" + endpoint +
                    "' is not an endpoint paqd can connect to (allowed: tcp://HOST:PORT with a host, not *, and PORT 1 .. 65535, "
                    "ipc://PATH, inproc://NAME)");
    if (!(ci16_scale > 0.0f) || !std::isfinite(ci16_scale)) out_of_range("ci16_scale", ci16_scale, "> 0");
    if (!(sample_rate_hz > 0.0) || !std::isfinite(sample_rate_hz) || sample_rate_hz > 1e9)
        out_of_range("sample_rate_hz", sample_rate_hz, "0 < x <= 1e9, the sender's rate; ZeroMQ carries none");
    if (high_water_mark < 1 || high_water_mark > 1'000'000) out_of_range("high_water_mark", high_water_mark, "1 .. 1000000");
    if (max_message_bytes < 1024 || max_message_bytes > (256 << 20))
        out_of_range("max_message_bytes", max_message_bytes, "1024 .. 268435456");
    if (max_queue_mib < 1 || max_queue_mib > 16384) out_of_range("max_queue_mib", max_queue_mib, "1 .. 16384");
    if (key.size() > max_key_bytes) out_of_range("key (bytes)", key.size(), "at most 255 bytes");
    return e;
}

int zmq_source_config::effective_high_water_mark() const noexcept
{
    const std::int64_t by_bytes = max_message_bytes > 0 ? (std::int64_t{max_queue_mib} << 20) / max_message_bytes : 1;
    return static_cast<int>(std::clamp<std::int64_t>(by_bytes, 1, std::max(1, high_water_mark)));
}

struct zmq_source::impl {
    explicit impl(source_counters& c, zmq_source_config config)
        : counters(c), cfg(std::move(config)), sample_bytes(bytes_per_sample(cfg.format)),
          name("zmq " + std::string(to_string(cfg.pattern)) + " " + cfg.endpoint + " (" +
               std::string(to_sigmf_datatype(cfg.format)) + ", " + format_rate(cfg.sample_rate_hz) +
               (cfg.tags == zmq_tags::gnuradio ? ", GNU Radio tag header" : ", tags none: loss undetectable") +
               (cfg.key.empty() ? std::string() : ", key '" + cfg.key + "'") + ")")
    {
    }

    void malformed(sample_sink& sink)
    {
        counters.malformed += 1;
        sink.gap(0, gap_reason::source_error);
    }

    void on_message(std::span<const std::byte> msg, sample_sink& sink)
    {
        counters.packets += 1;
        counters.bytes += msg.size();
        std::span<const std::byte> body = msg;
        std::optional<std::uint64_t> offset;
        if (cfg.tags == zmq_tags::gnuradio) {
            const auto h = parse_gnuradio_tag_header(msg);
            if (!h) {
                malformed_log.warn("{}: message of {} bytes does not start with GNU Radio's tag header (magic 0x5FF0, "
                             "version 1) though source.zmq.tags is gnuradio (Pass Tags off at the sender?); dropped",
                             name, msg.size());
                malformed(sink);
                return;
            }
            if (h->ntags != 0) {
                counts.messages_with_tags += 1;
                malformed_log.warn("{}: message carries {} stream tag(s); paqd does not decode GNU Radio's PMT tags, so it "
                             "cannot find the samples after them: dropped. Remove the tags upstream (e.g. a Tag Gate) "
                             "or turn the sink's Pass Tags off and set source.zmq.tags: none",
                             name, h->ntags);
                malformed(sink);
                return;
            }
            offset = h->offset;
            body = msg.subspan(gnuradio_tag_header_bytes);
        } else if (counts.tag_header_suspected.load() == 0 && parse_gnuradio_tag_header(msg)) {
            counts.tag_header_suspected.store(1);
            spdlog::warn("{}: messages start with GNU Radio's tag header (0x5FF0, version 1): the sink's Pass Tags "
                         "looks on, and its header is read here as samples. Set source.zmq.tags: gnuradio (DAEMON.md §3)",
                         name);
        }
        if (body.size() % sample_bytes != 0) {
            malformed_log.warn("{}: message of {} bytes ({} after the header) is not a whole number of {}-byte {} samples; "
                         "dropped",
                         name, msg.size(), body.size(), sample_bytes, to_sigmf_datatype(cfg.format));
            malformed(sink);
            return;
        }
        const std::size_t n = body.size() / sample_bytes;
        if (offset) {
            if (next_offset && *offset > *next_offset && *offset - *next_offset <= zmq_max_offset_jump) {
                const std::uint64_t lost = *offset - *next_offset;
                add_saturating(counters.samples_lost, lost);
                add_saturating(counters.packets_lost, 1);  // at least one message; their number is not known
                loss_log.warn("{}: {} samples missing before item offset {}", name, lost, *offset);
                sink.gap(lost, gap_reason::lost_packets);
            } else if (next_offset && *offset != *next_offset) {
                // Back: the sender restarted (its offset starts at 0 again) or the stream went
                // back. Ahead beyond the bound: a corrupt or hostile offset, which must not
                // count as a loss of up to 2^64 samples. Either way nothing about the jump can
                // be believed: a discontinuity, and the offsets are checked from here on.
                counts.resyncs += 1;
                order_log.warn("{}: item offset {} where {} was expected ({}): a discontinuity, tracking restarted "
                               "({} in all)",
                               name, *offset, *next_offset,
                               *offset < *next_offset ? "back: the sender restarted?"
                                                      : "more than 2^32 items ahead: not believed as a loss",
                               counts.resyncs.load());
                sink.gap(0, gap_reason::discontinuity);
            }
            // Saturated, not wrapped: a hostile offset near 2^64 must not make the next offset
            // small (a later message would then look in order, or its loss be miscounted);
            // the sender's next real offset is then before it, a resync.
            next_offset = n <= UINT64_MAX - *offset ? *offset + n : UINT64_MAX;
        }
        if (n == 0) return;
        // ci16 stays ci16 (converted by the backend; never NaN: not scanned); cf32
        // is decoded and scanned for NaN/Inf.
        const bool narrow = cfg.format == sample_format::ci16_le;
        if (narrow) {
            if (samples16.size() < n) samples16.resize(n);
            decode_ci16(body.data(), n, samples16.data());
        } else {
            if (samples.size() < n) samples.resize(n);
            decode(cfg.format, body.data(), n, samples.data(), cfg.ci16_scale);
            for (std::size_t i = 0; i < n; ++i)
                if (!std::isfinite(samples[i].real()) || !std::isfinite(samples[i].imag())) counters.nonfinite += 1;
        }
        // Raw IQ carries no time: the host's clock at arrival (io/sample_source.hpp).
        const time_anchor a = host_clock_anchor(counters.samples.load(), n, cfg.sample_rate_hz);
        anchor->set(a);
        sink.timestamp(a);
        counters.samples += n;
        if (narrow) {
            sink.write_ci16(std::span<const ci16>(samples16.data(), n), cfg.ci16_scale);
        } else {
            sink.write(std::span<const cf32>(samples.data(), n));
        }
    }

    source_counters& counters;
    time_anchor_slot* anchor = nullptr;  ///< the source's latest (host-clock) anchor
    zmq_source_config cfg;
    std::size_t sample_bytes;
    std::string name;
    zmq_counters counts;
    std::atomic<bool> stop_requested{false};
    std::optional<std::uint64_t> next_offset;
    std::vector<cf32> samples;    ///< a cf32_le message, decoded
    std::vector<ci16> samples16;  ///< a ci16_le message as received
    // One limiter per kind of message (io/log_limiter.hpp): a flood of one kind hides none of
    // the others.
    log_limiter malformed_log, loss_log, order_log;
};

zmq_source::zmq_source(zmq_source_config cfg)
{
    const auto errors = cfg.validate();
    if (!errors.empty()) {
        std::string m = "zmq source: ";
        for (std::size_t i = 0; i < errors.size(); ++i) m += (i ? "; " : "") + errors[i];
        throw std::invalid_argument(m);
    }
    impl_ = std::make_unique<impl>(counters_, std::move(cfg));
    impl_->anchor = &time_anchor_;
}

zmq_source::~zmq_source() = default;

std::string zmq_source::describe() const { return impl_->name; }
double zmq_source::sample_rate_hz() const { return impl_->cfg.sample_rate_hz; }
std::optional<float> zmq_source::ci16_scale() const
{
    return ci16_scale_of(impl_->cfg.format, impl_->cfg.ci16_scale);
}
void zmq_source::stop() { impl_->stop_requested.store(true); }
const zmq_source_config& zmq_source::config() const noexcept { return impl_->cfg; }
const zmq_counters& zmq_source::zmq_counts() const noexcept { return impl_->counts; }

namespace {

const source_counter zmq_counter_list[] = {
    {"zmq_messages_with_tags", false, true, "ZeroMQ messages carrying GNU Radio stream tags (not decoded) dropped."},
    {"zmq_resyncs", false, true,
     "ZeroMQ tag header offsets that went back (the sender restarted) or jumped ahead beyond 2^32 items: a discontinuity, "
     "tracking restarted."},
    {"zmq_tag_header_suspected", true, true,
     "1: tags none, but the messages start with GNU Radio's tag header (set source.zmq.tags)."},
    {"zmq_key_mismatches", false, true,
     "ZeroMQ messages dropped because their key was not source.zmq.key, or they had none."},
};

}  // namespace

std::span<const source_counter> zmq_source::counter_list() noexcept { return zmq_counter_list; }

std::vector<source_counter_value> zmq_source::kind_counters() const
{
    const auto& c = impl_->counts;
    return counter_values(zmq_counter_list, {static_cast<double>(c.messages_with_tags.load()), static_cast<double>(c.resyncs.load()),
                                             static_cast<double>(c.tag_header_suspected.load()),
                                             static_cast<double>(c.key_mismatches.load())});
}

void zmq_source::run(sample_sink& sink)
{
    auto& m = *impl_;
    if (m.stop_requested.load()) return;
    struct context {
        void* p = zmq_ctx_new();
        ~context() { if (p) zmq_ctx_term(p); }
    } ctx;
    struct socket {
        void* p = nullptr;
        ~socket() { if (p) zmq_close(p); }
    } sock, monitor;
    auto fail = [&](const char* what) {
        throw std::runtime_error(m.name + ": " + what + ": " + zmq_strerror(zmq_errno()));
    };
    if (!ctx.p) fail("cannot create a ZeroMQ context");
    sock.p = zmq_socket(ctx.p, m.cfg.pattern == zmq_pattern::sub ? ZMQ_SUB : ZMQ_PULL);
    if (!sock.p) fail("cannot create the socket");
    const int linger = 0;
    const int hwm = m.cfg.effective_high_water_mark();
    const std::int64_t max_bytes = m.cfg.max_message_bytes;
    const long poll_ms = 100;  // how soon stop() is seen
    if (zmq_setsockopt(sock.p, ZMQ_LINGER, &linger, sizeof linger) != 0 ||
        zmq_setsockopt(sock.p, ZMQ_RCVHWM, &hwm, sizeof hwm) != 0 ||
        zmq_setsockopt(sock.p, ZMQ_MAXMSGSIZE, &max_bytes, sizeof max_bytes) != 0)
        fail("cannot set socket options");
    // A key is a subscription's prefix: the exact key is checked on each message below.
    if (m.cfg.pattern == zmq_pattern::sub && zmq_setsockopt(sock.p, ZMQ_SUBSCRIBE, m.cfg.key.data(), m.cfg.key.size()) != 0)
        fail("cannot subscribe");
    // The socket's connection events: libzmq reconnects by itself after a connection error,
    // but not after a protocol error, and a message over ZMQ_MAXMSGSIZE is one: the connection
    // is dropped for good and the source would stay deaf. So every disconnection is answered here by
    // connecting again (counted in `reconnects`, a `reconnect` gap). One context per run, so
    // the monitor's inproc name is this run's alone.
    const char* monitor_endpoint = "inproc://paqd-zmq-monitor";
    if (zmq_socket_monitor(sock.p, monitor_endpoint, ZMQ_EVENT_DISCONNECTED) != 0) fail("cannot monitor the socket");
    monitor.p = zmq_socket(ctx.p, ZMQ_PAIR);
    if (!monitor.p || zmq_setsockopt(monitor.p, ZMQ_LINGER, &linger, sizeof linger) != 0 ||
        zmq_connect(monitor.p, monitor_endpoint) != 0)
        fail("cannot read the socket's events");
    if (zmq_connect(sock.p, m.cfg.endpoint.c_str()) != 0) fail("cannot connect");
    spdlog::info("{}: connected (high-water mark {} messages of at most {} bytes: a queue of at most {} MiB)", m.name, hwm,
                 max_bytes, (static_cast<std::int64_t>(hwm) * max_bytes) >> 20);

    // A monitor event is two frames: 6 bytes (u16 event, u32 value), then the endpoint.
    auto disconnected = [&] {
        bool any = false;
        zmq_msg_t frame;
        zmq_msg_init(&frame);
        while (zmq_msg_recv(&frame, monitor.p, ZMQ_DONTWAIT) >= 0) {
            std::uint16_t event = 0;
            if (zmq_msg_size(&frame) == 6) {
                std::memcpy(&event, zmq_msg_data(&frame), sizeof event);
                if (event == ZMQ_EVENT_DISCONNECTED) any = true;
            }
        }
        zmq_msg_close(&frame);
        return any;
    };

    zmq_msg_t msg;
    zmq_msg_init(&msg);
    // Where the current message is among its frames: 0 at its first; a key frame seen (1) or
    // a message being skipped (its key was not ours, or it has too many frames: 2).
    enum class frame_state { first, after_key, skipping } state = frame_state::first;
    bool key_logged = false;
    while (!m.stop_requested.load()) {
        zmq_pollitem_t items[2] = {{sock.p, 0, ZMQ_POLLIN, 0}, {monitor.p, 0, ZMQ_POLLIN, 0}};
        if (zmq_poll(items, 2, poll_ms) < 0) {
            if (zmq_errno() == EINTR) continue;
            zmq_msg_close(&msg);
            fail("poll failed");
        }
        // Samples first: what arrived before the connection dropped is delivered before the gap.
        while ((items[0].revents & ZMQ_POLLIN) != 0 && !m.stop_requested.load()) {
            if (zmq_msg_recv(&msg, sock.p, ZMQ_DONTWAIT) < 0) {
                const int err = zmq_errno();
                if (err == EAGAIN || err == EINTR) break;  // nothing more now: the stall detector watches
                zmq_msg_close(&msg);
                fail("receive failed");
            }
            const auto* data = static_cast<const std::byte*>(zmq_msg_data(&msg));
            const std::span<const std::byte> frame(data, zmq_msg_size(&msg));
            const bool more = zmq_msg_more(&msg) != 0;
            const frame_state at = state;
            state = more ? frame_state::skipping : frame_state::first;
            if (at == frame_state::skipping) continue;  // the rest of a message not taken
            if (more) {
                if (at == frame_state::after_key) {
                    // A third frame: not a message a GNU Radio sink sends.
                    m.malformed(sink);
                    m.malformed_log.warn("{}: a message of more than two frames (key, items) dropped", m.name);
                    continue;
                }
                // The key frame.
                const std::string_view key(reinterpret_cast<const char*>(data), frame.size());
                if (!m.cfg.key.empty() && key != m.cfg.key) {
                    m.counts.key_mismatches += 1;
                    m.malformed_log.warn("{}: a message with the key '{}' dropped (source.zmq.key is '{}')", m.name,
                                         std::string(key.substr(0, 64)), m.cfg.key);
                    continue;
                }
                if (m.cfg.key.empty() && !key_logged) {
                    spdlog::info("{}: the sender's messages carry the key '{}' (taken; source.zmq.key selects one key)", m.name,
                                 std::string(key.substr(0, 64)));
                    key_logged = true;
                }
                state = frame_state::after_key;
                continue;
            }
            if (at == frame_state::first && !m.cfg.key.empty()) {
                m.counts.key_mismatches += 1;
                m.malformed_log.warn("{}: a message without a key dropped (source.zmq.key is '{}')", m.name, m.cfg.key);
                continue;
            }
            m.on_message(frame, sink);
        }
        if ((items[1].revents & ZMQ_POLLIN) != 0 && disconnected()) {
            // Whatever libzmq would do, connect afresh: the old connection (ended, or waiting to
            // be made again) is dropped first, so that there is one connection again.
            (void)zmq_disconnect(sock.p, m.cfg.endpoint.c_str());
            if (zmq_connect(sock.p, m.cfg.endpoint.c_str()) != 0) {
                zmq_msg_close(&msg);
                fail("cannot connect again");
            }
            m.counters.reconnects += 1;
            m.loss_log.warn("{}: the connection was dropped (a message over max_message_bytes = {}, or the sender went "
                            "away); connected again ({} in all)",
                            m.name, max_bytes, m.counters.reconnects.load());
            // What was in flight is lost, how much is not known; the tag header's offsets
            // restart their check.
            m.next_offset.reset();
            sink.gap(0, gap_reason::reconnect);
        }
    }
    zmq_msg_close(&msg);
    // The monitor ends before its socket (no events: zmq_socket_monitor stops it).
    (void)zmq_socket_monitor(sock.p, nullptr, 0);
}

}  // namespace paq::io
