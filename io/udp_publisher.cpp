#include "io/udp_publisher.hpp"

#include "dsp/best_stream.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/udp.hpp>
#include <spdlog/spdlog.h>

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstring>
#include <optional>
#include <span>
#include <sstream>
#include <stdexcept>
#include <system_error>
#include <thread>

namespace paq::io {

namespace {

namespace asio = boost::asio;
using udp = asio::ip::udp;
using clock_type = std::chrono::steady_clock;

constexpr std::size_t min_send_buffer = 4096;
constexpr std::size_t max_send_buffer = std::size_t{1} << 30;
constexpr double max_rate = 1e8;
/// Unpaced, a stream's datagrams go to the kernel this many at a time (one sendmmsg call).
constexpr std::size_t send_group = 64;
/// A datagram's room in a group: the largest bitstream or decoded datagram.
constexpr std::size_t group_slot_bytes = std::max(bitstream_max_datagram_bytes, decoded_max_datagram_bytes);

/// The header fields a packet's datagrams share (stream, sequence and BEP are each stream's).
datagram_header packet_header(const dsp::batch_output& batch, std::size_t k, std::uint64_t packet_index)
{
    const dsp::packet_record& rec = batch.packets[k];
    datagram_header h;
    h.packet_index = packet_index;
    h.batch_index = batch.batch_index;
    h.start_sample = rec.start_sample;
    h.flags = rec.flags;
    h.cfo_rad_per_sample = static_cast<float>(rec.cfo_rad_per_sample);
    h.ebn0_db = static_cast<float>(rec.ebn0_db);
    h.utc_ns = rec.utc_ns;
    return h;
}

template <typename T>
std::string bad(const std::string& field, const T& value, const char* range)
{
    std::ostringstream os;
    os << field << " = " << value << " is out of range (allowed: " << range << ")";
    return os.str();
}

}  // namespace

host_port parse_host_port(std::string_view text)
{
    const auto fail = [&](const char* why) {
        return std::invalid_argument("destination '" + std::string(text) + "' " + why +
                                     " (expected host:port or [ipv6]:port, port 1 .. 65535)");
    };
    std::string_view host;
    std::string_view port;
    if (!text.empty() && text.front() == '[') {
        const auto close = text.find(']');
        if (close == std::string_view::npos) throw fail("has no ']' after the IPv6 address");
        host = text.substr(1, close - 1);
        if (close + 1 >= text.size() || text[close + 1] != ':') throw fail("has no ':port' after ']'");
        port = text.substr(close + 2);
    } else {
        const auto colon = text.rfind(':');
        if (colon == std::string_view::npos) throw fail("has no ':port'");
        host = text.substr(0, colon);
        if (host.find(':') != std::string_view::npos) throw fail("is an IPv6 address without brackets");
        port = text.substr(colon + 1);
    }
    if (host.empty()) throw fail("has an empty host");
    unsigned value = 0;
    const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
    if (port.empty() || ec != std::errc{} || end != port.data() + port.size() || value < 1 || value > 65535) {
        throw fail("has an invalid port");
    }
    return host_port{std::string(host), static_cast<std::uint16_t>(value)};
}

std::vector<std::string> udp_publisher_config::validate() const
{
    std::vector<std::string> e;
    // Each listed host:port of a list (`name`), by stream id; true when any is set.
    const auto check = [&e](const char* name, std::span<const std::string> list) {
        bool set = false;
        for (std::size_t i = 0; i < list.size(); ++i) {
            if (list[i].empty()) continue;
            set = true;
            try {
                (void)parse_host_port(list[i]);
            } catch (const std::invalid_argument& ex) {
                e.push_back(std::string(name) + "[" + std::to_string(i) + "] (" + dsp::stream_name(static_cast<int>(i)) +
                            "): " + ex.what());
            }
        }
        return set;
    };
    if (!check("destinations", destinations)) e.emplace_back("destinations: all are empty (allowed: at least one host:port)");
    (void)check("llr_destinations", llr_destinations);
    (void)check("decoded_destinations", decoded_destinations);
    if (!best_destination.empty()) {
        try {
            (void)parse_host_port(best_destination);
        } catch (const std::invalid_argument& ex) {
            e.push_back(std::string("best_destination: ") + ex.what());
        }
    }
    if (send_buffer_bytes < min_send_buffer || send_buffer_bytes > max_send_buffer) {
        e.push_back(bad("send_buffer_bytes", send_buffer_bytes, "4096 .. 1073741824"));
    }
    if (!(max_datagrams_per_second == 0.0 || (max_datagrams_per_second >= 1.0 && max_datagrams_per_second <= max_rate))) {
        e.push_back(bad("max_datagrams_per_second", max_datagrams_per_second, "0 (unpaced) or 1 .. 1e8"));
    }
    if (format != bitstream_format::paq && format != bitstream_format::dqe && format != bitstream_format::dqe_raw) {
        e.push_back(bad("format", static_cast<int>(format), "paq, dqe, dqe-raw"));
    }
    return e;
}

struct udp_publisher::impl {
    struct stream {
        std::optional<udp::socket> socket;
        std::string destination;
        std::size_t send_buffer_granted = 0;
        std::uint64_t sequence = 0;
        // Rate-limited error log: one line a second at most, with the count it held back.
        clock_type::time_point last_log{};
        std::uint64_t unlogged_errors = 0;
        /// Unpaced: up to send_group of its datagrams, encoded, and their message headers.
        std::vector<std::uint8_t> group;
        std::array<iovec, send_group> group_iov{};
        std::array<mmsghdr, send_group> group_msg{};
    };

    explicit impl(const udp_publisher_config& c) : config(c) {}

    udp_publisher_config config;
    asio::io_context io;
    std::array<stream, dsp::chain::max_streams> streams;
    std::array<stream, dsp::chain::num_paths> llr_streams;  ///< the soft streams, by path
    std::array<stream, dsp::chain::max_streams> decoded_streams;  ///< the decoded streams, by stream
    stream best;  ///< the best-path stream
    std::array<std::uint8_t, bitstream_max_datagram_bytes> buffer{};
    std::vector<std::uint8_t> llr_buffer = std::vector<std::uint8_t>(llr_datagram_bytes);
    std::array<std::uint8_t, decoded_max_datagram_bytes> decoded_buffer{};
    /// Every enabled bitstream has a destination of its own (the unpaced streams may then be
    /// sent at once).
    bool own_destinations = false;
    // Pacing: the earliest time the next datagram may go out.
    clock_type::duration interval{};
    clock_type::duration max_burst{};
    clock_type::time_point next_send{};

    void pace()
    {
        const auto now = clock_type::now();
        if (next_send + max_burst < now) next_send = now - max_burst;  // idle: no unbounded burst
        if (next_send > now) std::this_thread::sleep_until(next_send);
        next_send += interval;
    }

    /// kind and id name the stream ("bitstream " / "LLRs of " and the stream's name); the log
    /// line is made at most once a second per stream. errors: the failed sends this stands for.
    void log_error(const char* kind, int id, stream& st, const std::string& what, std::uint64_t errors = 1)
    {
        st.unlogged_errors += errors;
        const auto now = clock_type::now();
        if (st.last_log != clock_type::time_point{} && now - st.last_log < std::chrono::seconds(1)) return;
        spdlog::warn("{}{} -> {}: send failed: {} ({} error(s) since the last report)", kind, bitstream_name(id), st.destination,
                     what, st.unlogged_errors);
        st.last_log = now;
        st.unlogged_errors = 0;
    }

    /// Resolves dest, opens and connects st's socket to it for `label` ("bitstream zf", "LLRs
    /// of mmse"); std::runtime_error naming both when it cannot. Warns when the kernel grants
    /// less send buffer than asked.
    void open(udp::resolver& resolver, const std::string& label, const std::string& dest, stream& st)
    {
        st.destination = dest;
        const host_port hp = parse_host_port(dest);
        boost::system::error_code ec;
        const auto results = resolver.resolve(hp.host, std::to_string(hp.port), udp::resolver::numeric_service, ec);
        if (ec || results.empty()) {
            throw std::runtime_error(label + ": destination '" + dest +
                                     "' does not resolve: " + (ec ? ec.message() : std::string("no address")));
        }
        const udp::endpoint endpoint = results.begin()->endpoint();
        st.socket.emplace(io);
        st.socket->open(endpoint.protocol(), ec);
        if (!ec) st.socket->set_option(asio::socket_base::send_buffer_size(static_cast<int>(config.send_buffer_bytes)), ec);
        if (!ec) st.socket->connect(endpoint, ec);
        if (ec) throw std::runtime_error(label + ": cannot open a UDP socket to '" + dest + "': " + ec.message());
        asio::socket_base::send_buffer_size granted;
        st.socket->get_option(granted, ec);
        st.send_buffer_granted = ec ? 0 : static_cast<std::size_t>(granted.value());
        // Linux doubles the request for its bookkeeping (capped at 2 * net.core.wmem_max);
        // Asio's get_option halves it back, so this compares like with like.
        if (st.send_buffer_granted < config.send_buffer_bytes) {
            spdlog::warn("{} -> {}: SO_SNDBUF {} bytes requested, the kernel granted {} (raise net.core.wmem_max)", label, dest,
                         config.send_buffer_bytes, st.send_buffer_granted);
        }
    }

    /// Sends the first n datagrams of st.group (group_iov's lengths) on st's socket with as
    /// few sendmmsg calls as the kernel takes, counting each in c as send() does: a datagram
    /// the kernel refuses is a send error (logged), and the rest still go. Touches st and c
    /// only: streams may send at once from several threads.
    void send_group_now(const char* kind, int id, stream& st, stream_send_counters& c, std::size_t n)
    {
        auto& group_msg = st.group_msg;
        auto& group_iov = st.group_iov;
        for (std::size_t k = 0; k < n; ++k) {
            group_msg[k] = mmsghdr{};
            group_msg[k].msg_hdr.msg_iov = &group_iov[k];
            group_msg[k].msg_hdr.msg_iovlen = 1;
        }
        const int fd = st.socket->native_handle();
        std::size_t done = 0;
        while (done < n) {
            const int r = ::sendmmsg(fd, group_msg.data() + done, static_cast<unsigned>(n - done), 0);
            if (r < 0) {
                if (errno == EINTR) continue;
                if (errno == EAGAIN || errno == EWOULDBLOCK) {
                    pollfd p{fd, POLLOUT, 0};
                    (void)::poll(&p, 1, 100);
                    continue;
                }
                // The first datagram left failed (e.g. ECONNREFUSED from an earlier one's ICMP):
                // counted, and the others go.
                const int err = errno;
                c.packets_published.fetch_add(1, std::memory_order_relaxed);
                c.send_errors.fetch_add(1, std::memory_order_relaxed);
                log_error(kind, id, st, std::system_category().message(err));
                ++done;
                continue;
            }
            for (int i = 0; i < r; ++i) {
                const auto& m = group_msg[done + static_cast<std::size_t>(i)];
                const std::size_t size = group_iov[done + static_cast<std::size_t>(i)].iov_len;
                c.packets_published.fetch_add(1, std::memory_order_relaxed);
                if (m.msg_len == size) {
                    c.datagrams_sent.fetch_add(1, std::memory_order_relaxed);
                    c.bytes_sent.fetch_add(size, std::memory_order_relaxed);
                } else {
                    c.send_errors.fetch_add(1, std::memory_order_relaxed);
                    log_error(kind, id, st, boost::system::error_code(asio::error::message_size).message());
                }
            }
            done += static_cast<std::size_t>(r);
        }
    }

    /// Unpaced: encodes the datagrams of packets 0 .. count - 1 into st.group with
    /// encode(k, slot) (returns the datagram's size) and sends them send_group at a time.
    template <typename Encode>
    void send_grouped(const char* kind, int id, stream& st, stream_send_counters& c, std::size_t count, Encode&& encode)
    {
        if (st.group.empty()) st.group.resize(send_group * group_slot_bytes);
        std::size_t n = 0;
        for (std::size_t k = 0; k < count; ++k) {
            const std::span<std::uint8_t> slot(st.group.data() + n * group_slot_bytes, group_slot_bytes);
            st.group_iov[n] = iovec{slot.data(), encode(k, slot)};
            if (++n == send_group) {
                send_group_now(kind, id, st, c, n);
                n = 0;
            }
        }
        if (n > 0) send_group_now(kind, id, st, c, n);
    }

    /// Sends size bytes of data on st's socket (paced), counting it in c. kind and id name the
    /// stream in a log line (log_error).
    void send(const char* kind, int id, stream& st, stream_send_counters& c, const std::uint8_t* data, std::size_t size)
    {
        if (config.max_datagrams_per_second > 0.0) pace();
        c.packets_published.fetch_add(1, std::memory_order_relaxed);
        boost::system::error_code ec;
        const std::size_t sent = st.socket->send(asio::buffer(data, size), 0, ec);
        if (ec || sent != size) {
            c.send_errors.fetch_add(1, std::memory_order_relaxed);
            log_error(kind, id, st, (ec ? ec : boost::system::error_code(asio::error::message_size)).message());
        } else {
            c.datagrams_sent.fetch_add(1, std::memory_order_relaxed);
            c.bytes_sent.fetch_add(size, std::memory_order_relaxed);
        }
    }
};

udp_publisher::udp_publisher(const udp_publisher_config& config) : impl_(std::make_unique<impl>(config))
{
    const auto errors = config.validate();
    if (!errors.empty()) {
        std::string msg = "udp_publisher config:";
        for (const auto& e : errors) msg += "\n  " + e;
        throw std::invalid_argument(msg);
    }
    if (config.any_decoded() && !dsp::framing_for(config.fec)) {
        throw std::invalid_argument("udp_publisher config: decoded_destinations: the decoded streams need a code, but fec is " +
                                    std::string(dsp::to_string(config.fec)) + " (set receiver.fec)");
    }
    udp::resolver resolver(impl_->io);
    for (int s = 0; s < dsp::chain::max_streams; ++s) {
        const std::string& dest = config.destinations[static_cast<std::size_t>(s)];
        if (!dest.empty()) impl_->open(resolver, "bitstream " + std::string(dsp::stream_name(s)), dest, impl_->streams[static_cast<std::size_t>(s)]);
    }
    for (int p = 0; p < dsp::chain::num_paths; ++p) {
        const std::string& dest = config.llr_destinations[static_cast<std::size_t>(p)];
        if (!dest.empty()) impl_->open(resolver, "LLRs of " + std::string(dsp::stream_name(p)), dest, impl_->llr_streams[static_cast<std::size_t>(p)]);
    }
    for (int s = 0; s < dsp::chain::max_streams; ++s) {
        const std::string& dest = config.decoded_destinations[static_cast<std::size_t>(s)];
        if (!dest.empty()) {
            impl_->open(resolver, "decoded " + std::string(dsp::stream_name(s)), dest, impl_->decoded_streams[static_cast<std::size_t>(s)]);
        }
    }
    if (config.best()) impl_->open(resolver, "best-path stream", config.best_destination, impl_->best);
    // Streams sent at once keep each stream's order, not the order across streams: only when
    // no two threads share a destination does no receiver see a difference. A stream's
    // decoded stream goes out on its thread.
    std::vector<std::pair<udp::endpoint, int>> seen;
    impl_->own_destinations = true;
    const auto claim = [&](const impl::stream& st, int thread) {
        if (!st.socket) return;
        boost::system::error_code ec;
        const auto ep = st.socket->remote_endpoint(ec);
        const auto it = std::find_if(seen.begin(), seen.end(), [&](const auto& e) { return e.first == ep; });
        if (ec || (it != seen.end() && it->second != thread)) impl_->own_destinations = false;
        seen.emplace_back(ep, thread);
    };
    for (int s = 0; s < dsp::chain::max_streams; ++s) {
        claim(impl_->streams[static_cast<std::size_t>(s)], s);
        claim(impl_->decoded_streams[static_cast<std::size_t>(s)], s);
    }
    claim(impl_->best, best_stream_id);

    if (config.max_datagrams_per_second > 0.0) {
        impl_->interval = std::chrono::duration_cast<clock_type::duration>(
            std::chrono::duration<double>(1.0 / config.max_datagrams_per_second));
        impl_->max_burst = std::chrono::milliseconds(1);
    }
}

udp_publisher::~udp_publisher() = default;

void udp_publisher::publish(const dsp::batch_output& batch)
{
    if (!dsp::chain::valid_streams(batch.streams)) {
        throw std::invalid_argument("udp_publisher::publish: batch " + std::to_string(batch.batch_index) + " has " +
                                    std::to_string(batch.streams) + " streams (6 or 12)");
    }
    const std::size_t needed = batch.packets.size() * batch.packet_bytes();
    if (batch.bits.size() < needed) {
        throw std::invalid_argument("udp_publisher::publish: batch " + std::to_string(batch.batch_index) + " has " +
                                    std::to_string(batch.bits.size()) + " bit bytes for " +
                                    std::to_string(batch.packets.size()) + " packets, which need " +
                                    std::to_string(needed));
    }
    impl& m = *impl_;
    const bool soft = any_llr_enabled();
    // A batch without its LLRs (its backend was not asked for them: a caller's bug) still has
    // its bitstreams sent; each soft datagram it cannot make is counted as a failed send.
    const bool have_llrs = batch.llrs.size() == batch.packets.size() * dsp::chain::num_paths * llr_payload_bytes;
    const std::string no_llrs = soft && !have_llrs ? "batch " + std::to_string(batch.batch_index) + " carries no LLRs (" +
                                                         std::to_string(batch.llrs.size()) + " bytes for " +
                                                         std::to_string(batch.packets.size()) + " packets)"
                                                   : std::string();
    // The trellis's streams: the paths themselves with detector trellis, 6 .. 11 with both.
    const int trellis_first = batch.streams == dsp::chain::max_streams ? dsp::chain::num_paths : 0;
    // Likewise a batch not decoded with the publisher's code: its decoded datagrams fail.
    const auto framing = dsp::framing_for(m.config.fec);
    const bool decoded = any_decoded_enabled();
    const bool have_decoded = framing && batch.has_fec() && batch.decoded_with(*framing) &&
                              (!framing->continuous() || batch.frames.size() == batch.packets.size());
    const std::string not_decoded =
        decoded && !have_decoded ? "batch " + std::to_string(batch.batch_index) + " is not decoded with " +
                                       std::string(dsp::to_string(m.config.fec)) + " (" +
                                       std::to_string(batch.fec_codewords) + " codewords per stream)"
                                 : std::string();
    const std::size_t info_bytes = framing ? static_cast<std::size_t>(framing->info_bytes()) : 0;
    const std::size_t field_codewords = framing ? static_cast<std::size_t>(framing->codewords) : 0;
    // Packet k's decoded datagram of stream s into out; its size. The continuous stream: the
    // frames that end in the packet, but one begun before its batch that the stream engine
    // did not join (pending: not decoded).
    const auto encode_decoded = [&](const datagram_header& h, std::size_t k, int s, std::span<std::uint8_t> out) {
        if (framing->continuous()) {
            const auto& pf = batch.frames[k];
            const std::size_t skip = pf.pending, frames = pf.count - std::min<std::size_t>(pf.pending, pf.count);
            const auto k_bytes = static_cast<std::size_t>(framing->k / 8);
            return encode_stream_decoded_datagram(h, m.config.fec, std::max<std::int64_t>(pf.first + static_cast<std::int64_t>(skip), 0),
                                                  {batch.packet_decoded(k, s) + skip * k_bytes, frames * k_bytes},
                                                  {batch.packet_codewords(k, s) + skip, frames}, out);
        }
        return encode_decoded_datagram(h, m.config.fec, {batch.packet_decoded(k, s), info_bytes},
                                       {batch.packet_codewords(k, s), field_codewords}, out);
    };
    // Without decoded bits: `count` of stream s's decoded datagrams counted as failed sends,
    // their sequence numbers left as a gap.
    const auto fail_decoded = [&](int s, std::size_t count) {
        auto& st = m.decoded_streams[static_cast<std::size_t>(s)];
        auto& c = decoded_counters_[static_cast<std::size_t>(s)];
        st.sequence += count;
        c.packets_published.fetch_add(count, std::memory_order_relaxed);
        c.send_errors.fetch_add(count, std::memory_order_relaxed);
        m.log_error("decoded ", s, st, not_decoded, count);
    };
    // Packet k's datagram on the best-path stream (packet index `index`) into out; its size.
    const auto encode_best = [&](std::size_t k, std::uint64_t index, std::span<std::uint8_t> out) {
        const dsp::packet_record& rec = batch.packets[k];
        const int chosen = dsp::best_stream(rec, batch.streams);
        datagram_header h = packet_header(batch, k, index);
        h.stream_id = best_stream_id;
        h.chosen_stream = static_cast<std::uint8_t>(chosen);
        h.sequence = m.best.sequence++;
        h.bep_estimate = rec.paths[static_cast<std::size_t>(chosen)].bep_estimate;
        return encode_datagram(m.config.format, h, m.config.dqe_id.id_for(best_stream_id),
                               {batch.packet_bits(k, chosen), dsp::packed_data_bytes}, out);
    };
    if (m.config.max_datagrams_per_second == 0.0 && !soft && m.own_destinations) {
        // Unpaced: the streams at once (one thread each, a stream's decoded stream on its
        // thread after it), send_group datagrams per system call; each stream's datagrams in
        // packet order, as when sent one by one, and each stream to a receiver of its own.
        const std::uint64_t first_index = packets_published_.load(std::memory_order_relaxed);
        const int threads = batch.streams + (m.best.socket ? 1 : 0);
#pragma omp parallel for schedule(static, 1) num_threads(threads) if (batch.packets.size() >= 16)
        for (int s = 0; s < threads; ++s) {
            if (s == batch.streams) {  // the best-path stream
                m.send_grouped("bitstream ", best_stream_id, m.best, best_counters_, batch.packets.size(),
                               [&](std::size_t k, std::span<std::uint8_t> slot) { return encode_best(k, first_index + k, slot); });
                continue;
            }
            const auto header = [&](std::size_t k, impl::stream& st) {
                datagram_header h = packet_header(batch, k, first_index + k);
                h.stream_id = static_cast<std::uint8_t>(s);
                h.sequence = st.sequence++;
                h.bep_estimate = batch.packets[k].paths[static_cast<std::size_t>(s)].bep_estimate;
                return h;
            };
            auto& st = m.streams[static_cast<std::size_t>(s)];
            if (st.socket) {
                m.send_grouped("bitstream ", s, st, counters_[static_cast<std::size_t>(s)], batch.packets.size(),
                               [&](std::size_t k, std::span<std::uint8_t> slot) {
                                   return encode_datagram(m.config.format, header(k, st), m.config.dqe_id.id_for(s),
                                                          {batch.packet_bits(k, s), dsp::packed_data_bytes}, slot);
                               });
            }
            auto& dst = m.decoded_streams[static_cast<std::size_t>(s)];
            if (!dst.socket) continue;
            if (!have_decoded) {
                fail_decoded(s, batch.packets.size());
                continue;
            }
            m.send_grouped("decoded ", s, dst, decoded_counters_[static_cast<std::size_t>(s)], batch.packets.size(),
                           [&](std::size_t k, std::span<std::uint8_t> slot) { return encode_decoded(header(k, dst), k, s, slot); });
        }
        packets_published_.fetch_add(batch.packets.size(), std::memory_order_relaxed);
        return;
    }
    for (std::size_t k = 0; k < batch.packets.size(); ++k) {
        const dsp::packet_record& rec = batch.packets[k];
        datagram_header h = packet_header(batch, k, packets_published_.load(std::memory_order_relaxed));
        for (int s = 0; s < batch.streams; ++s) {
            auto& st = m.streams[static_cast<std::size_t>(s)];
            if (!st.socket) continue;
            h.stream_id = static_cast<std::uint8_t>(s);
            h.sequence = st.sequence++;
            h.bep_estimate = rec.paths[static_cast<std::size_t>(s)].bep_estimate;
            const std::size_t size = encode_datagram(m.config.format, h, m.config.dqe_id.id_for(s),
                                                     {batch.packet_bits(k, s), dsp::packed_data_bytes}, m.buffer);
            m.send("bitstream ", s, st, counters_[static_cast<std::size_t>(s)], m.buffer.data(), size);
        }
        for (int p = 0; soft && p < dsp::chain::num_paths; ++p) {
            auto& st = m.llr_streams[static_cast<std::size_t>(p)];
            if (!st.socket) continue;
            const int s = trellis_first + p;
            h.stream_id = static_cast<std::uint8_t>(s);
            h.sequence = st.sequence++;
            if (!have_llrs) {
                auto& c = llr_counters_[static_cast<std::size_t>(p)];
                c.packets_published.fetch_add(1, std::memory_order_relaxed);
                c.send_errors.fetch_add(1, std::memory_order_relaxed);
                m.log_error("LLRs of ", p, st, no_llrs);
                continue;
            }
            h.bep_estimate = rec.paths[static_cast<std::size_t>(s)].bep_estimate;
            const std::size_t size = encode_llr_datagram(h, {batch.packet_llrs(k, p), llr_payload_bytes}, m.llr_buffer);
            m.send("LLRs of ", p, st, llr_counters_[static_cast<std::size_t>(p)], m.llr_buffer.data(), size);
        }
        for (int s = 0; decoded && s < batch.streams; ++s) {
            auto& st = m.decoded_streams[static_cast<std::size_t>(s)];
            if (!st.socket) continue;
            if (!have_decoded) {
                fail_decoded(s, 1);
                continue;
            }
            h.stream_id = static_cast<std::uint8_t>(s);
            h.sequence = st.sequence++;
            h.bep_estimate = rec.paths[static_cast<std::size_t>(s)].bep_estimate;
            const std::size_t size = encode_decoded(h, k, s, m.decoded_buffer);
            m.send("decoded ", s, st, decoded_counters_[static_cast<std::size_t>(s)], m.decoded_buffer.data(), size);
        }
        if (m.best.socket) {
            const std::size_t size = encode_best(k, h.packet_index, m.buffer);
            m.send("bitstream ", best_stream_id, m.best, best_counters_, m.buffer.data(), size);
        }
        packets_published_.fetch_add(1, std::memory_order_relaxed);
    }
}

const stream_send_counters& udp_publisher::counters(int stream) const
{
    if (stream < 0 || stream >= dsp::chain::max_streams) {
        throw std::out_of_range("udp_publisher::counters: stream " + std::to_string(stream) + " (allowed: 0 .. 11)");
    }
    return counters_[static_cast<std::size_t>(stream)];
}

bool udp_publisher::enabled(int stream) const noexcept
{
    return stream >= 0 && stream < dsp::chain::max_streams && impl_->streams[static_cast<std::size_t>(stream)].socket;
}

const stream_send_counters& udp_publisher::llr_counters(int path) const
{
    if (path < 0 || path >= dsp::chain::num_paths) {
        throw std::out_of_range("udp_publisher::llr_counters: path " + std::to_string(path) + " (allowed: 0 .. 5)");
    }
    return llr_counters_[static_cast<std::size_t>(path)];
}

bool udp_publisher::llr_enabled(int path) const noexcept
{
    return path >= 0 && path < dsp::chain::num_paths && impl_->llr_streams[static_cast<std::size_t>(path)].socket;
}

const stream_send_counters& udp_publisher::decoded_counters(int stream) const
{
    if (stream < 0 || stream >= dsp::chain::max_streams) {
        throw std::out_of_range("udp_publisher::decoded_counters: stream " + std::to_string(stream) + " (allowed: 0 .. 11)");
    }
    return decoded_counters_[static_cast<std::size_t>(stream)];
}

bool udp_publisher::decoded_enabled(int stream) const noexcept
{
    return stream >= 0 && stream < dsp::chain::max_streams && impl_->decoded_streams[static_cast<std::size_t>(stream)].socket;
}

bool udp_publisher::any_decoded_enabled() const noexcept
{
    for (int s = 0; s < dsp::chain::max_streams; ++s) {
        if (decoded_enabled(s)) return true;
    }
    return false;
}

bool udp_publisher::best_enabled() const noexcept { return impl_->best.socket.has_value(); }

bool udp_publisher::any_llr_enabled() const noexcept
{
    for (int p = 0; p < dsp::chain::num_paths; ++p) {
        if (llr_enabled(p)) return true;
    }
    return false;
}

std::size_t udp_publisher::send_buffer_granted(int stream) const noexcept
{
    return enabled(stream) ? impl_->streams[static_cast<std::size_t>(stream)].send_buffer_granted : 0;
}

std::string udp_publisher::describe() const
{
    std::ostringstream os;
    os << to_string(impl_->config.format) << " to";
    for (int s = 0; s < dsp::chain::max_streams; ++s) {
        if (enabled(s)) os << ' ' << dsp::stream_name(s) << '=' << impl_->streams[static_cast<std::size_t>(s)].destination;
    }
    if (any_llr_enabled()) {
        os << "; LLRs of";
        for (int p = 0; p < dsp::chain::num_paths; ++p) {
            if (llr_enabled(p)) os << ' ' << dsp::stream_name(p) << '=' << impl_->llr_streams[static_cast<std::size_t>(p)].destination;
        }
    }
    if (any_decoded_enabled()) {
        os << "; decoded (" << dsp::to_string(impl_->config.fec) << ") of";
        for (int s = 0; s < dsp::chain::max_streams; ++s) {
            if (decoded_enabled(s)) os << ' ' << dsp::stream_name(s) << '=' << impl_->decoded_streams[static_cast<std::size_t>(s)].destination;
        }
    }
    if (best_enabled()) os << "; best path to " << impl_->best.destination;
    os << ", SO_SNDBUF " << impl_->config.send_buffer_bytes << " bytes, ";
    if (impl_->config.max_datagrams_per_second > 0.0) {
        os << "paced to " << impl_->config.max_datagrams_per_second << " datagrams/s";
    } else {
        os << "unpaced";
    }
    if (impl_->config.format != bitstream_format::paq) {
        os << ", DQE ID "
           << (impl_->config.dqe_id.use_stream_id ? std::string("= stream id") : std::to_string(impl_->config.dqe_id.fixed_id));
    }
    return os.str();
}

}  // namespace paq::io
