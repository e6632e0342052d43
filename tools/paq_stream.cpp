// paq-stream: sends a recording (SigMF or raw) over the network, as paqd's network sources
// expect it: raw IQ over TCP (connecting or listening) or UDP, or VITA-49 over UDP. Paced at
// the recording's rate, with deliberate faults (dropped datagrams, a stall) for tests.
//
//   paq-stream demo.sigmf-meta --mode vita49 --host 127.0.0.1 --port 4991 --drop-every 100
//   paq-stream capture.ci16 --datatype ci16_le --sample-rate 6.6e6 --mode tcp-listen --port 5000 --loop
//   paq-stream demo.sigmf-meta --mode zmq-pub --host 127.0.0.1 --port 5555 --format cf32 --gnuradio-tags
#include "config/cli.hpp"
#include "io/sample_file.hpp"
#include "io/sample_format.hpp"
#include "io/vita49.hpp"

// Standard headers before Boost: Boost 1.74's Asio needs <utility> under C++20.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <iostream>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>
#include <signal.h>
#include <boost/asio.hpp>
#include <zmq.h>

namespace {

namespace asio = boost::asio;
using asio::ip::tcp;
using asio::ip::udp;
using clock_type = std::chrono::steady_clock;

/// Datagrams up to this size fit a 9000-byte (jumbo) MTU without IP fragmentation.
constexpr std::size_t default_max_datagram_bytes = 8972;
/// The largest UDP payload over IPv4.
constexpr std::size_t max_udp_payload_bytes = 65507;
/// VITA-49 words before the payload as sent: header, stream id, 2-word sample-count timestamp.
constexpr std::size_t vita49_prefix_bytes = 16;

volatile std::sig_atomic_t interrupted = 0;
extern "C" void on_signal(int) { interrupted = 1; }

struct options {
    std::string input;
    std::string mode;
    std::string host = "127.0.0.1";
    int port = 0;
    std::optional<std::string> raw_format;
    std::optional<double> raw_rate_hz;
    std::vector<int> channels;   ///< --channel: of a recording of several channels (twice: both, interleaved)
    int raw_channels = 1;        ///< --channels: a raw file's
    double rate_factor = 1.0;
    bool fast = false;
    std::size_t samples_per_packet = 0;  ///< 0: the most that fit default_max_datagram_bytes
    std::string format;  ///< empty: ci16 for tcp and udp, cf32 for zmq-* (each as paqd's source defaults)
    std::optional<float> ci16_scale;
    std::uint32_t stream_id = 1;
    std::optional<std::uint32_t> second_stream_id;  ///< vita49 with two channels: channel 2's (default stream_id + 1)
    bool two_channels = false;                      ///< --channel twice
    bool no_timestamps = false;
    std::uint64_t drop_every = 0;
    std::optional<double> stall_at_s;
    double stall_for_s = 0;
    bool loop = false;
    bool gnuradio_tags = false;       ///< zmq-*: GNU Radio's tag header (Pass Tags on) before each message
    std::string gnuradio_udp_header = "none";  ///< udp: none, seq or seq-size (GNU Radio UDP Sink)
};

struct totals {
    std::uint64_t samples_sent = 0;
    std::uint64_t bytes_sent = 0;
    std::uint64_t units_sent = 0;  ///< datagrams, or TCP writes
    std::uint64_t datagrams_dropped = 0;
    std::uint64_t samples_dropped = 0;
    std::uint64_t clipped = 0;
    std::uint64_t loops = 0;
};

/// Largest power of two n with n * bytes_per + overhead <= limit.
[[nodiscard]] std::size_t fitting_power_of_two(std::size_t bytes_per, std::size_t overhead, std::size_t limit)
{
    std::size_t n = 1;
    while ((2 * n) * bytes_per + overhead <= limit) n *= 2;
    return n;
}

/// Sends one unit of samples (a datagram or a TCP write); returns false if it was dropped.
class sender {
public:
    sender(const options& o, paq::io::sample_format wire_format, float scale)
        : o_(o), format_(wire_format), scale_(scale), sock_udp_(ioc_), sock_tcp_(ioc_)
    {
    }

    void open()
    {
        if (o_.mode == "zmq-pub" || o_.mode == "zmq-push") {
            // As GNU Radio's ZMQ PUB / PUSH Sinks: bind, the receiver connects. PUB is an XPUB
            // here so that sending starts once the receiver has subscribed (PUB/SUB drops what
            // is sent before, which would make runs differ).
            const bool pub = o_.mode == "zmq-pub";
            zctx_ = zmq_ctx_new();
            zsock_ = zmq_socket(zctx_, pub ? ZMQ_XPUB : ZMQ_PUSH);
            const int linger = 5000;
            zmq_setsockopt(zsock_, ZMQ_LINGER, &linger, sizeof linger);
            const std::string ep = "tcp://" + o_.host + ":" + std::to_string(o_.port);
            if (zmq_bind(zsock_, ep.c_str()) != 0)
                throw std::runtime_error("cannot bind " + ep + ": " + zmq_strerror(zmq_errno()));
            std::cout << "paq-stream: " << o_.mode << " bound to " << ep << (pub ? ", waiting for a subscriber" : "")
                      << std::endl;
            if (pub) {
                const int poll_ms = 200;
                zmq_setsockopt(zsock_, ZMQ_RCVTIMEO, &poll_ms, sizeof poll_ms);
                char b[8];
                while (zmq_recv(zsock_, b, sizeof b, 0) < 1 || b[0] != 1)
                    if (interrupted) throw std::runtime_error("interrupted while waiting for a subscriber");
            }
            return;
        }
        if (o_.mode == "udp" || o_.mode == "vita49") {
            udp::resolver r(ioc_);
            dst_ = *r.resolve(o_.host, std::to_string(o_.port)).begin();
            sock_udp_.open(dst_.protocol());
            // A big send buffer absorbs scheduling jitter when pacing at high rates.
            boost::system::error_code ec;
            sock_udp_.set_option(asio::socket_base::send_buffer_size(4 << 20), ec);
            std::cout << "paq-stream: sending " << o_.mode << " datagrams to " << dst_ << "\n";
        } else if (o_.mode == "tcp-connect") {
            tcp::resolver r(ioc_);
            boost::system::error_code ec;
            asio::connect(sock_tcp_, r.resolve(o_.host, std::to_string(o_.port)), ec);
            if (ec)
                throw std::runtime_error("cannot connect to " + o_.host + ":" + std::to_string(o_.port) + ": " +
                                         ec.message());
            std::cout << "paq-stream: connected to " << sock_tcp_.remote_endpoint() << "\n";
        } else {
            const tcp::endpoint ep(asio::ip::make_address(o_.host), static_cast<std::uint16_t>(o_.port));
            tcp::acceptor acceptor(ioc_, ep.protocol());
            acceptor.set_option(tcp::acceptor::reuse_address(true));
            boost::system::error_code ec;
            acceptor.bind(ep, ec);
            if (ec) throw std::runtime_error("cannot listen on " + o_.host + ":" + std::to_string(o_.port) + ": " + ec.message());
            acceptor.listen();
            std::cout << "paq-stream: waiting for a receiver on " << acceptor.local_endpoint() << std::endl;
            acceptor.accept(sock_tcp_);
            std::cout << "paq-stream: receiver connected from " << sock_tcp_.remote_endpoint() << "\n";
        }
        if (sock_tcp_.is_open()) sock_tcp_.set_option(tcp::no_delay(true));
    }

    /// Sends samples starting at stream position `position`, as unit number `index` (from 0).
    bool send(std::span<const paq::cf32> samples, std::uint64_t position, std::uint64_t index, totals& t)
    {
        const bool datagrams = sock_udp_.is_open() || zsock_ != nullptr;
        if (datagrams && o_.drop_every > 0 && (index + 1) % o_.drop_every == 0) {
            t.datagrams_dropped += o_.mode == "vita49" && o_.two_channels ? 2 : 1;  // both channels' packets
            t.samples_dropped += samples.size();
            return false;
        }
        std::size_t clipped = 0;
        if (o_.mode == "vita49" && o_.two_channels) {
            // Two channels: each its own stream id, a packet each with the same timestamp and
            // packet count (a radio's two RX channels), channel 1's first.
            const std::size_t n = samples.size() / 2;
            one_.resize(n);
            for (int ch = 0; ch < 2; ++ch) {
                for (std::size_t i = 0; i < n; ++i) one_[i] = samples[2 * i + static_cast<std::size_t>(ch)];
                encode_vita49(ch == 0 ? o_.stream_id : o_.second_stream_id.value_or(o_.stream_id + 1), one_, position, index, clipped);
                transmit(t);
            }
        } else if (o_.mode == "vita49") {
            encode_vita49(o_.stream_id, samples, position, index, clipped);
            transmit(t);
        } else {
            // GNU Radio's headers, little-endian: the UDP Sink's sequence number (from 1, u64;
            // seq-size adds the i16 payload size and pads to 16 bytes), or gr-zeromq's tag
            // header (u16 0x5FF0, u8 1, u64 item offset, u64 tag count 0).
            std::vector<std::byte> head;
            auto put_le = [&head](std::uint64_t v, int bytes) {
                for (int i = 0; i < bytes; ++i) head.push_back(static_cast<std::byte>(v >> (8 * i)));
            };
            const std::size_t body = samples.size() * paq::io::bytes_per_sample(format_);
            if (zsock_ && o_.gnuradio_tags) {
                put_le(0x5FF0, 2);
                put_le(1, 1);
                put_le(position, 8);
                put_le(0, 8);
            } else if (o_.mode == "udp" && o_.gnuradio_udp_header != "none") {
                put_le(index + 1, 8);
                if (o_.gnuradio_udp_header == "seq-size") {
                    put_le(16 + body, 2);
                    put_le(0, 6);
                }
            }
            buf_.resize(head.size() + body);
            std::copy(head.begin(), head.end(), buf_.begin());
            clipped = paq::io::encode(format_, samples.data(), samples.size(), buf_.data() + head.size(), scale_);
            transmit(t);
        }
        t.clipped += clipped;
        t.samples_sent += samples.size();
        return true;
    }

    /// buf_ onto the wire (a ZeroMQ message, a datagram or a TCP write), counted.
    void transmit(totals& t)
    {
        if (zsock_) {
            if (zmq_send(zsock_, buf_.data(), buf_.size(), 0) < 0)
                throw std::runtime_error(std::string("zmq send failed: ") + zmq_strerror(zmq_errno()));
        } else if (sock_udp_.is_open()) {
            sock_udp_.send_to(asio::buffer(buf_), dst_);
        } else {
            asio::write(sock_tcp_, asio::buffer(buf_));
        }
        t.bytes_sent += buf_.size();
        ++t.units_sent;
    }

    /// One VITA-49 IF Data packet of `samples` encoded into buf_: the stream id, the packet count of
    /// `index`, a free-running sample-count timestamp at `position` (unless --no-timestamps).
    void encode_vita49(std::uint32_t stream_id, std::span<const paq::cf32> samples, std::uint64_t position, std::uint64_t index,
                     std::size_t& clipped)
    {
        paq::io::vita49::packet_fields f;
        f.stream_id = stream_id;
        f.packet_count = static_cast<std::uint8_t>(index % 16);
        if (!o_.no_timestamps) {
            f.tsf = paq::io::vita49::tsf_type::sample_count;  // free-running: TSI none
            f.fractional_timestamp = position;
        }
        buf_.resize(paq::io::vita49::packet_bytes(f, samples.size()));
        std::size_t c = 0;
        (void)paq::io::vita49::encode_packet(f, samples, scale_, buf_, &c);
        clipped += c;
    }

    void close()
    {
        boost::system::error_code ec;
        if (sock_tcp_.is_open()) sock_tcp_.shutdown(tcp::socket::shutdown_send, ec);
        sock_tcp_.close(ec);
        sock_udp_.close(ec);
        if (zsock_) zmq_close(zsock_);  // lingers until what is queued is sent (ZMQ_LINGER)
        if (zctx_) zmq_ctx_term(zctx_);
        zsock_ = zctx_ = nullptr;
    }

private:
    const options& o_;
    paq::io::sample_format format_;
    float scale_;
    asio::io_context ioc_;
    udp::socket sock_udp_;
    tcp::socket sock_tcp_;
    udp::endpoint dst_;
    std::vector<std::byte> buf_;
    std::vector<paq::cf32> one_;  ///< vita49 with two channels: one channel's samples of a chunk
    void* zctx_ = nullptr;
    void* zsock_ = nullptr;
};

}  // namespace

int main(int argc, char** argv)
{
    using namespace paq;
    CLI::App app{"paq-stream: sends a recording as raw IQ over TCP/UDP or as VITA-49 over UDP, paced at its "
                 "sample rate"};
    cli::conventions(app, "paq-stream",
                     "0 recording sent; 1 runtime failure (recording unreadable, connection or send error); 2 usage error");
    options o;
    app.add_option("input", o.input, "Recording: SigMF (.sigmf-meta/.sigmf-data/base name, or a .sigmf archive) or raw file")->required();
    app.add_option("--mode", o.mode,
                   "tcp-connect, tcp-listen, udp (raw IQ datagrams), vita49, or zmq-pub / zmq-push (bind "
                   "tcp://HOST:PORT as GNU Radio's ZMQ PUB / PUSH Sinks do; zmq-pub waits for a subscriber)")
        ->required()
        ->check(CLI::IsMember({"tcp-connect", "tcp-listen", "udp", "vita49", "zmq-pub", "zmq-push"}));
    app.add_option("--host", o.host,
                   "Peer (tcp-connect, udp, vita49) or local address to bind (tcp-listen, zmq-pub, zmq-push)")
        ->capture_default_str();
    app.add_option("--port", o.port, "Port: 1..65535 (tcp-listen: 0 picks a free one and prints it)")->required();
    app.add_option("--datatype", o.raw_format, "Raw input only: sample type, cf32_le or ci16_le (SigMF gives its own)");
    app.add_option("--sample-rate", o.raw_rate_hz, "Raw input only: sample rate in Hz");
    app.add_option("--channel", o.channels,
                   "The channel sent of a recording that interleaves several (SigMF core:num_channels, or --channels of a "
                   "raw file): 1 .. its channels; required for such a recording. Given twice (tcp-*, udp): both channels, "
                   "interleaved a sample of each per sample time, for a receiver of two channels (paqd's "
                   "source.udp.channels / source.tcp.channels 2); --samples-per-packet then counts sample times")
        ->check(CLI::Range(1, io::max_channels))
        ->expected(1)
        ->take_all();
    app.add_option("--channels", o.raw_channels, "Raw input only: channels interleaved, a sample of each per sample time")
        ->check(CLI::Range(1, io::max_channels))
        ->capture_default_str();
    app.add_option("--raw-format", o.raw_format)->group("");  // the old names, kept hidden
    app.add_option("--raw-rate", o.raw_rate_hz)->group("");
    app.add_option("--rate-factor", o.rate_factor, "Send at this multiple of the recording's rate")
        ->capture_default_str();
    app.add_flag("--fast", o.fast, "Send as fast as possible (no pacing)");
    app.add_option("--samples-per-packet", o.samples_per_packet,
                   "Samples per datagram (udp, vita49) or per write (tcp); default: the most (a power of 2) "
                   "that keep a datagram within 8972 bytes, e.g. 2048 ci16")
        ->check(CLI::PositiveNumber);
    app.add_option("--format", o.format, "Wire format for raw IQ (tcp, udp, zmq-*): cf32 or ci16 (little-endian); default "
                                         "as paqd's source: ci16 for tcp and udp, cf32 for zmq-* (GNU Radio's gr_complex); "
                                         "vita49 always carries big-endian ci16")
        ->check(CLI::IsMember(paq::names_in(paq::io::sample_format_names)));
    app.add_option("--ci16-scale", o.ci16_scale,
                   "ci16 counts per unit amplitude (default: the recording's for ci16 recordings, else 8192)");
    app.add_option("--stream-id", o.stream_id, "VITA-49 stream id (with --channel twice: channel 1's)")->capture_default_str();
    app.add_option("--second-stream-id", o.second_stream_id,
                   "VITA-49 with --channel twice: channel 2's stream id (default: --stream-id + 1); paqd pairs them by "
                   "their timestamps (source.vita49.second_stream_id)");
    app.add_flag("--no-timestamps", o.no_timestamps, "VITA-49: omit the sample-count timestamp (packet count only)");
    app.add_option("--drop-every", o.drop_every,
                   "Fault: skip every Nth datagram (udp, vita49), still advancing packet count and timestamp; 0: off")
        ->capture_default_str();
    app.add_option("--stall-at", o.stall_at_s, "Fault: pause once at this stream time, in seconds of samples");
    app.add_option("--stall-for", o.stall_for_s, "Fault: length of the pause in seconds (with --stall-at)");
    app.add_flag("--gnuradio-tags", o.gnuradio_tags,
                 "zmq-*: put GNU Radio's tag header (Pass Tags on, no tags) before each message: the receiver "
                 "counts --drop-every losses exactly");
    app.add_option("--gnuradio-udp-header", o.gnuradio_udp_header,
                   "udp: GNU Radio UDP Sink's Header: none, seq (Sequence Number) or seq-size (Seq + Size)")
        ->check(CLI::IsMember({"none", "seq", "seq-size"}))
        ->capture_default_str();
    app.add_flag("--loop", o.loop, "Start again at the end of the recording (until interrupted)");
    if (const int rc = cli::parse(app, argc, argv); rc >= 0) return rc;

    // Argument checks that CLI11 cannot express: exit 2 with every problem listed.
    std::vector<std::string> bad;
    const bool datagrams = o.mode == "udp" || o.mode == "vita49" || o.mode == "zmq-pub" || o.mode == "zmq-push";
    if (o.gnuradio_tags && o.mode != "zmq-pub" && o.mode != "zmq-push")
        bad.emplace_back("--gnuradio-tags applies to --mode zmq-pub and zmq-push only");
    if (o.gnuradio_udp_header != "none" && o.mode != "udp")
        bad.emplace_back("--gnuradio-udp-header applies to --mode udp only");
    if (o.port < (o.mode == "tcp-listen" ? 0 : 1) || o.port > 65535)
        bad.push_back("--port " + std::to_string(o.port) + " is out of range (allowed: 1 .. 65535" +
                      (o.mode == "tcp-listen" ? ", or 0 for tcp-listen)" : ")"));
    if (!(o.rate_factor > 0.0) || o.rate_factor > 1e6)
        bad.push_back("--rate-factor " + std::to_string(o.rate_factor) + " is out of range (allowed: > 0)");
    if (o.drop_every == 1) bad.emplace_back("--drop-every 1 would drop every datagram (allowed: 0 = off, or >= 2)");
    if (o.drop_every > 0 && !datagrams) bad.emplace_back("--drop-every applies to --mode udp and vita49 only");
    if (o.stall_at_s.has_value() != (o.stall_for_s > 0.0))
        bad.emplace_back("--stall-at and --stall-for (> 0) go together");
    if (o.stall_at_s && !(*o.stall_at_s >= 0.0)) bad.emplace_back("--stall-at must be >= 0 seconds");
    if (o.stall_for_s < 0.0 || o.stall_for_s > 3600.0)
        bad.push_back("--stall-for " + std::to_string(o.stall_for_s) + " is out of range (allowed: 0 .. 3600 s)");
    if (o.ci16_scale && !(*o.ci16_scale > 0.0f)) bad.emplace_back("--ci16-scale must be positive");
    if (o.no_timestamps && o.mode != "vita49") bad.emplace_back("--no-timestamps applies to --mode vita49 only");
    const std::optional<int> channel = o.channels.empty() ? std::nullopt : std::optional<int>(o.channels[0]);
    const std::optional<int> second = o.channels.size() == 2 ? std::optional<int>(o.channels[1]) : std::nullopt;
    if (o.channels.size() > 2) bad.emplace_back("--channel given " + std::to_string(o.channels.size()) + " times (at most 2)");
    if (second && *second == *channel) bad.push_back("--channel " + std::to_string(*second) + " given twice (two different channels)");
    if (second && o.mode != "udp" && o.mode != "tcp-connect" && o.mode != "tcp-listen" && o.mode != "vita49")
        bad.emplace_back("two channels (--channel twice) go over --mode udp, tcp-connect and tcp-listen (raw IQ, interleaved) "
                         "and vita49 (a stream id each) only");
    if (second && o.mode == "vita49" && o.no_timestamps)
        bad.emplace_back("--no-timestamps with two channels: the receiver pairs the two streams by their timestamps");
    if (o.second_stream_id && !(second && o.mode == "vita49"))
        bad.emplace_back("--second-stream-id applies to --mode vita49 with --channel twice only");
    if (second && o.mode == "vita49" && o.second_stream_id.value_or(o.stream_id + 1) == o.stream_id)
        bad.emplace_back("--second-stream-id equals --stream-id: the two channels need two stream ids");
    o.two_channels = second.has_value();
    io::sample_format wire_format = io::sample_format::ci16_le;
    std::optional<io::sample_format> raw_format;
    try {
        const std::string fmt = !o.format.empty() ? o.format : o.mode.rfind("zmq", 0) == 0 ? "cf32" : "ci16";
        wire_format = io::parse_sample_format(fmt);
        if (o.raw_format) raw_format = io::parse_sample_format(*o.raw_format);
    } catch (const std::invalid_argument& e) {
        bad.emplace_back(e.what());
    }
    if (o.mode == "vita49") wire_format = io::sample_format::ci16_le;
    // A sample time's bytes on the wire (both channels' samples with two).
    const std::size_t bytes_per = o.mode == "vita49" ? io::vita49::bytes_per_sample : io::bytes_per_sample(wire_format) * (second ? 2 : 1);
    const std::size_t overhead = o.mode == "vita49" ? (o.no_timestamps ? 8 : vita49_prefix_bytes) : 0;
    if (o.samples_per_packet == 0) {
        o.samples_per_packet = datagrams ? fitting_power_of_two(bytes_per, overhead, default_max_datagram_bytes) : 8192;
    } else if (datagrams && o.samples_per_packet * bytes_per + overhead > max_udp_payload_bytes) {
        bad.push_back("--samples-per-packet " + std::to_string(o.samples_per_packet) + " makes " +
                      std::to_string(o.samples_per_packet * bytes_per + overhead) +
                      "-byte datagrams, more than UDP's 65507 (allowed: up to " +
                      std::to_string((max_udp_payload_bytes - overhead) / bytes_per) + ")");
    }
    if (!bad.empty()) {
        for (const auto& b : bad) std::cerr << "paq-stream: " << b << "\n";
        return 2;
    }
    if (datagrams && o.samples_per_packet * bytes_per + overhead > default_max_datagram_bytes)
        std::cerr << "paq-stream: warning: " << o.samples_per_packet * bytes_per + overhead
                  << "-byte datagrams exceed 8972 bytes and will be IP-fragmented on a 9000-byte MTU\n";

    totals t;
    const auto t0 = clock_type::now();
    double stalled_s = 0;
    try {
        auto reader = io::sample_file_reader::open(o.input, raw_format, o.raw_rate_hz,
                                                   o.ci16_scale.value_or(io::default_ci16_scale), channel, o.raw_channels);
        const auto& info = reader.info();
        // Forward a ci16 recording bit-exactly unless told otherwise: same scale as it was read with.
        const float scale = o.ci16_scale.value_or(info.format == io::sample_format::ci16_le ? info.meta.ci16_scale
                                                                                            : io::default_ci16_scale);
        const double send_rate_hz = info.sample_rate_hz * o.rate_factor;
        std::cout << "paq-stream: " << info.data_path.string() << ": " << info.num_samples << " samples at "
                  << info.sample_rate_hz << " Hz; " << o.samples_per_packet << " samples per "
                  << (datagrams ? "datagram" : "write") << ", ci16 scale " << scale << ", "
                  << (o.fast ? "unpaced" : "paced at ") << (o.fast ? "" : std::to_string(send_rate_hz / 1e6) + " MS/s")
                  << "\n";

        sender tx(o, wire_format, scale);
        tx.open();
        struct sigaction sa {};
        sa.sa_handler = on_signal;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGINT, &sa, nullptr);
        sigaction(SIGTERM, &sa, nullptr);

        // Two channels: read as pairs, sent interleaved (2 values a sample time).
        std::vector<cf32> chunk(o.samples_per_packet * (second ? 2 : 1));
        std::vector<cf32x2> pairs(second ? o.samples_per_packet : 0);
        auto read_chunk = [&]() -> std::size_t {
            if (!second) return reader.read(chunk);
            const std::size_t got = reader.read(std::span<cf32x2>(pairs), *second);
            interleave_channels(std::span<const cf32x2>(pairs.data(), got), chunk);
            return got;
        };
        const std::size_t values_per_time = second ? 2 : 1;
        const auto stall_position = o.stall_at_s ? std::optional<std::uint64_t>(static_cast<std::uint64_t>(
                                                       *o.stall_at_s * info.sample_rate_hz))
                                                 : std::nullopt;
        bool stall_done = false;
        auto start = clock_type::now();
        std::uint64_t position = 0;  // samples streamed, dropped ones included
        for (std::uint64_t index = 0; interrupted == 0; ++index) {
            std::size_t n = read_chunk();
            if (n == 0) {
                if (!o.loop) break;
                reader.rewind();
                ++t.loops;
                n = read_chunk();
                if (n == 0) break;
            }
            if (stall_position && !stall_done && position + n > *stall_position) {
                std::cout << "paq-stream: stalling for " << o.stall_for_s << " s at sample " << position << std::endl;
                std::this_thread::sleep_for(std::chrono::duration<double>(o.stall_for_s));
                start += std::chrono::duration_cast<clock_type::duration>(std::chrono::duration<double>(o.stall_for_s));
                stalled_s += o.stall_for_s;
                stall_done = true;
            }
            if (!o.fast) {
                const auto due = start + std::chrono::duration_cast<clock_type::duration>(
                                             std::chrono::duration<double>(static_cast<double>(position) / send_rate_hz));
                std::this_thread::sleep_until(due);
            }
            (void)tx.send(std::span<const cf32>(chunk.data(), n * values_per_time), position, index, t);
            position += n;
        }
        tx.close();
    } catch (const std::exception& e) {
        std::cerr << "paq-stream: error: " << e.what();
        if (t.samples_sent > 0) std::cerr << " (after sending " << t.samples_sent << " samples)";
        std::cerr << "\n";
        return 1;
    }
    const double elapsed_s = std::chrono::duration<double>(clock_type::now() - t0).count();
    // With two channels the totals count values; a sample time is two of them.
    const std::uint64_t per_time = second ? 2 : 1;
    std::cout << "paq-stream: " << (interrupted ? "interrupted; " : "") << "sent " << t.samples_sent / per_time
              << (second ? " sample times of 2 channels in " : " samples in ") << t.units_sent << (datagrams ? " datagrams" : " writes") << " (" << t.bytes_sent << " bytes) in "
              << elapsed_s << " s";
    if (t.loops > 0) std::cout << ", " << t.loops << " loops";
    if (datagrams) std::cout << "; dropped " << t.datagrams_dropped << " datagrams (" << t.samples_dropped / per_time << " samples)";
    if (stalled_s > 0) std::cout << "; stalled " << stalled_s << " s";
    std::cout << "\n";
    if (t.clipped > 0) std::cerr << "paq-stream: warning: " << t.clipped << " ci16 components clipped\n";
    return 0;
}
