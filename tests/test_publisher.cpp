// Tests of io/udp_publisher and tools/paq-bert over loopback UDP (ephemeral ports): the
// publisher's datagrams arrive complete and in order, network errors are counted and not
// thrown, and paq-bert reports exactly the bit errors, losses and duplicates injected by a
// synthetic sender.
#include <gtest/gtest.h>

#include "bitstream_fixture.hpp"
#include "dsp/best_stream.hpp"
#include "io/bert_monitor.hpp"
#include "io/bitstream.hpp"
#include "io/udp_publisher.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/udp.hpp>
#include <nlohmann/json.hpp>

#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace {

using namespace paq;
using io::bitstream_format;
namespace asio = boost::asio;
using udp = asio::ip::udp;
namespace fs = std::filesystem;

constexpr std::uint64_t data_bits = waveform::data_bits;

/// A loopback UDP socket on an ephemeral port with a receive timeout.
class udp_receiver {
public:
    udp_receiver() : socket_(io_, udp::endpoint(asio::ip::make_address("127.0.0.1"), 0))
    {
        socket_.set_option(asio::socket_base::receive_buffer_size(4 << 20));
    }
    [[nodiscard]] std::uint16_t port() const { return socket_.local_endpoint().port(); }
    [[nodiscard]] std::string destination() const { return "127.0.0.1:" + std::to_string(port()); }

    /// The next datagram, or nothing after timeout_ms.
    std::optional<std::vector<std::uint8_t>> receive(int timeout_ms)
    {
        pollfd p{socket_.native_handle(), POLLIN, 0};
        if (::poll(&p, 1, timeout_ms) != 1) return std::nullopt;
        std::vector<std::uint8_t> buf(65536);
        const std::size_t n = socket_.receive(asio::buffer(buf));
        buf.resize(n);
        return buf;
    }

private:
    asio::io_context io_;
    udp::socket socket_;
};

/// A port that was free a moment ago and has nobody listening now.
std::uint16_t closed_port()
{
    udp_receiver r;
    return r.port();
}

// ---------------------------------------------------------------------------------------
// Config

TEST(udp_publisher_config, validate_names_field_value_and_range)
{
    io::udp_publisher_config c;
    auto e = c.validate();
    ASSERT_EQ(e.size(), 1u);
    EXPECT_NE(e[0].find("destinations: all are empty"), std::string::npos) << e[0];

    c.destinations[1] = "localhost";
    c.destinations[4] = "127.0.0.1:70000";
    c.send_buffer_bytes = 100;
    c.max_datagrams_per_second = 0.5;
    e = c.validate();
    ASSERT_EQ(e.size(), 4u);
    EXPECT_NE(e[0].find("destinations[1] (zf): destination 'localhost' has no ':port'"), std::string::npos) << e[0];
    EXPECT_NE(e[1].find("destinations[4] (fde1): destination '127.0.0.1:70000' has an invalid port"), std::string::npos)
        << e[1];
    EXPECT_NE(e[2].find("send_buffer_bytes = 100 is out of range (allowed: 4096 .. 1073741824)"), std::string::npos)
        << e[2];
    EXPECT_NE(e[3].find("max_datagrams_per_second = 0.5 is out of range"), std::string::npos) << e[3];

    c.destinations[1] = "localhost:5001";
    c.destinations[4] = "[::1]:5004";
    c.send_buffer_bytes = 1 << 20;
    c.max_datagrams_per_second = 0;
    EXPECT_TRUE(c.validate().empty());
    c.max_datagrams_per_second = -3;
    EXPECT_EQ(c.validate().size(), 1u);
}

TEST(udp_publisher_config, host_port_parsing)
{
    EXPECT_EQ(io::parse_host_port("127.0.0.1:5000").host, "127.0.0.1");
    EXPECT_EQ(io::parse_host_port("127.0.0.1:5000").port, 5000);
    EXPECT_EQ(io::parse_host_port("[::1]:6000").host, "::1");
    EXPECT_EQ(io::parse_host_port("gs-bss.local:65535").port, 65535);
    for (const char* bad : {"::1:5000", "[::1]5000", "[::1:5000", ":5000", "host:", "host:abc", "host:0", "host:5000x"}) {
        EXPECT_THROW((void)io::parse_host_port(bad), std::invalid_argument) << bad;
    }
}

TEST(udp_publisher, construction_throws_for_bad_config_and_unresolvable_host)
{
    io::udp_publisher_config c;
    EXPECT_THROW(io::udp_publisher{c}, std::invalid_argument);
    c.destinations[2] = "no-such-host.invalid:5000";
    try {
        io::udp_publisher p(c);
        FAIL() << "no exception";
    } catch (const std::runtime_error& e) {
        EXPECT_NE(std::string(e.what()).find("mmse: destination 'no-such-host.invalid:5000' does not resolve"),
                  std::string::npos)
            << e.what();
    }
}

// ---------------------------------------------------------------------------------------
// Publisher -> loopback

class publisher_loopback : public ::testing::TestWithParam<bitstream_format> {};

TEST_P(publisher_loopback, delivers_every_datagram_in_order_with_the_right_bits)
{
    const bitstream_format format = GetParam();
    udp_receiver rx;
    io::udp_publisher_config c;
    c.format = format;
    c.dqe_id.use_stream_id = true;
    c.send_buffer_bytes = 1 << 20;  // within the usual net.core.wmem_max: no warning
    for (auto& d : c.destinations) d = rx.destination();
    c.destinations[3].clear();  // cma disabled
    io::udp_publisher pub(c);
    EXPECT_FALSE(pub.enabled(3));
    EXPECT_TRUE(pub.enabled(0));

    const auto batches = test::make_pn_batches(2, 4);
    for (const auto& b : batches) pub.publish(b);
    EXPECT_EQ(pub.packets_published(), 8u);

    std::uint64_t packet_index = 0;
    for (const auto& b : batches) {
        for (std::size_t k = 0; k < b.packets.size(); ++k, ++packet_index) {
            for (int s : {0, 1, 2, 4, 5}) {
                SCOPED_TRACE("packet " + std::to_string(packet_index) + " stream " + std::to_string(s));
                const auto d = rx.receive(2000);
                ASSERT_TRUE(d.has_value());
                ASSERT_EQ(d->size(), io::datagram_bytes(format));
                const auto r = io::decode_datagram(*d);
                ASSERT_TRUE(r.ok()) << r.error;
                const auto& h = r.datagram.header;
                const auto& rec = b.packets[k];
                if (format != bitstream_format::dqe_raw) {
                    EXPECT_EQ(h.stream_id, s);
                    EXPECT_EQ(h.sequence, packet_index);
                    EXPECT_EQ(h.packet_index, packet_index);
                    EXPECT_EQ(h.batch_index, b.batch_index);
                    EXPECT_EQ(h.start_sample, rec.start_sample);
                    EXPECT_EQ(h.flags, rec.flags);
                    EXPECT_EQ(h.bep_estimate, rec.paths[static_cast<std::size_t>(s)].bep_estimate);
                    EXPECT_EQ(h.cfo_rad_per_sample, static_cast<float>(rec.cfo_rad_per_sample));
                    EXPECT_EQ(h.ebn0_db, static_cast<float>(rec.ebn0_db));
                }
                if (format != bitstream_format::paq) {
                    ASSERT_TRUE(r.datagram.dqe.has_value());
                    EXPECT_EQ(r.datagram.dqe->id, s);
                    EXPECT_EQ(r.datagram.dqe->dqm, io::dqm_from_bep(rec.paths[static_cast<std::size_t>(s)].bep_estimate));
                }
                EXPECT_TRUE(std::equal(r.datagram.bits.begin(), r.datagram.bits.end(), b.packet_bits(k, s)));
            }
        }
    }
    EXPECT_FALSE(rx.receive(50).has_value());
    for (int s : {0, 1, 2, 4, 5}) {
        const auto& cnt = pub.counters(s);
        EXPECT_EQ(cnt.packets_published.load(), 8u);
        EXPECT_EQ(cnt.datagrams_sent.load(), 8u);
        EXPECT_EQ(cnt.send_errors.load(), 0u);
        EXPECT_EQ(cnt.bytes_sent.load(), 8u * io::datagram_bytes(format));
    }
    EXPECT_EQ(pub.counters(3).packets_published.load(), 0u);
    EXPECT_GE(pub.send_buffer_granted(0), 1u << 20);
}

INSTANTIATE_TEST_SUITE_P(formats, publisher_loopback,
                         ::testing::Values(bitstream_format::paq, bitstream_format::dqe, bitstream_format::dqe_raw),
                         [](const auto& param_info) {
                             std::string s(io::to_string(param_info.param));
                             for (auto& ch : s) ch = ch == '-' ? '_' : ch;
                             return s;
                         });

TEST(udp_publisher, soft_streams_carry_the_trellis_llrs_of_each_listed_path)
{
    // publisher.llr_destinations: after each packet's bitstream datagrams, one LLR datagram
    // per listed path, its stream id the trellis's stream of the path (the path itself with
    // detector trellis, 6 + path with both), its sequence its own, its LLRs the batch's.
    for (const int streams : {dsp::chain::num_paths, dsp::chain::max_streams}) {
        SCOPED_TRACE(std::to_string(streams) + " streams");
        udp_receiver bits_rx, llr_rx;
        io::udp_publisher_config c;
        c.send_buffer_bytes = 1 << 20;
        c.destinations[0] = bits_rx.destination();
        c.llr_destinations[2] = llr_rx.destination();  // mmse
        c.llr_destinations[5] = llr_rx.destination();  // fde2
        io::udp_publisher pub(c);
        EXPECT_TRUE(pub.llr_enabled(2));
        EXPECT_TRUE(pub.llr_enabled(5));
        EXPECT_FALSE(pub.llr_enabled(0));
        EXPECT_TRUE(pub.any_llr_enabled());
        EXPECT_NE(pub.describe().find("LLRs of mmse=" + llr_rx.destination() + " fde2="), std::string::npos) << pub.describe();

        auto batches = test::make_pn_batches(2, 3);
        std::uint64_t k_all = 0;
        for (auto& b : batches) {
            b.streams = streams;
            b.bits.resize(b.packets.size() * b.packet_bytes(), 0x3C);
            b.llrs.resize(b.packets.size() * dsp::chain::num_paths * waveform::data_bits);
            for (std::size_t i = 0; i < b.llrs.size(); ++i) {
                b.llrs[i] = static_cast<std::int8_t>(static_cast<int>((i * 13 + k_all) % 255) - 127);
            }
            for (auto& rec : b.packets) {
                for (int st = 0; st < dsp::chain::max_streams; ++st) rec.paths[static_cast<std::size_t>(st)].bep_estimate = 1e-3f * static_cast<float>(st + 1);
            }
            k_all += b.packets.size();
        }
        // A batch without its LLRs (its backend was not asked for them: the caller's bug) has
        // its bitstreams sent, and each soft datagram it cannot make is a counted failed send
        // whose sequence number a receiver sees missing.
        auto bare = batches[0];
        bare.llrs.clear();
        EXPECT_NO_THROW(pub.publish(bare));
        EXPECT_EQ(pub.packets_published(), 3u);
        for (int k = 0; k < 3; ++k) {
            const auto bits = bits_rx.receive(2000);
            ASSERT_TRUE(bits.has_value());
            EXPECT_TRUE(io::decode_datagram(*bits).ok());
        }
        EXPECT_FALSE(llr_rx.receive(50).has_value());
        EXPECT_EQ(pub.llr_counters(2).send_errors.load(), 3u);
        EXPECT_EQ(pub.llr_counters(2).datagrams_sent.load(), 0u);

        for (const auto& b : batches) pub.publish(b);
        std::uint64_t packet_index = 3;
        for (const auto& b : batches) {
            for (std::size_t k = 0; k < b.packets.size(); ++k, ++packet_index) {
                for (const int p : {2, 5}) {
                    SCOPED_TRACE("packet " + std::to_string(packet_index) + " path " + std::to_string(p));
                    const auto d = llr_rx.receive(2000);
                    ASSERT_TRUE(d.has_value());
                    ASSERT_EQ(d->size(), io::llr_datagram_bytes);
                    const auto r = io::decode_llr_datagram(*d);
                    ASSERT_TRUE(r.ok()) << r.error;
                    const auto& h = r.datagram.header;
                    const int trellis_stream = streams == dsp::chain::max_streams ? dsp::chain::num_paths + p : p;
                    EXPECT_EQ(h.stream_id, trellis_stream);
                    EXPECT_EQ(h.sequence, packet_index);
                    EXPECT_EQ(h.packet_index, packet_index);
                    EXPECT_EQ(h.batch_index, b.batch_index);
                    EXPECT_EQ(h.start_sample, b.packets[k].start_sample);
                    EXPECT_EQ(h.bep_estimate, b.packets[k].paths[static_cast<std::size_t>(trellis_stream)].bep_estimate);
                    EXPECT_TRUE(std::equal(r.datagram.llrs.begin(), r.datagram.llrs.end(), b.packet_llrs(k, p)));
                }
                const auto bits = bits_rx.receive(2000);
                ASSERT_TRUE(bits.has_value());
                EXPECT_TRUE(io::decode_datagram(*bits).ok());
            }
        }
        EXPECT_FALSE(llr_rx.receive(50).has_value());
        for (const int p : {2, 5}) {
            const auto& cnt = pub.llr_counters(p);
            EXPECT_EQ(cnt.packets_published.load(), 9u);
            EXPECT_EQ(cnt.datagrams_sent.load(), 6u);
            EXPECT_EQ(cnt.send_errors.load(), 3u);
            EXPECT_EQ(cnt.bytes_sent.load(), 6u * io::llr_datagram_bytes);
        }
        EXPECT_EQ(pub.llr_counters(0).packets_published.load(), 0u);
        EXPECT_EQ(pub.counters(0).datagrams_sent.load(), 9u);
        EXPECT_THROW((void)pub.llr_counters(6), std::out_of_range);
    }
}

TEST(udp_publisher, decoded_streams_carry_each_listed_streams_information_bits_and_codewords)
{
    // publisher.decoded_destinations with receiver.fec ar4ja-1024-1/2: one datagram per packet
    // per listed stream, its sequence its own, its bytes the batch's decoded information bits
    // and codeword results. mmse's decoded stream shares mmse's bitstream port (told apart by
    // payload type); fde1's has a port of its own. Unpaced (the streams on threads of their
    // own) and paced (one by one) send the same datagrams.
    const auto code = dsp::fec_code::k1024_r1_2;
    const dsp::fec_framing f = *dsp::framing_for(code);
    for (const double pacing : {0.0, 1e6}) {
        SCOPED_TRACE(pacing == 0.0 ? "unpaced" : "paced");
        udp_receiver mmse_rx, fde1_rx;
        io::udp_publisher_config c;
        c.send_buffer_bytes = 1 << 20;
        c.max_datagrams_per_second = pacing;
        c.destinations[2] = mmse_rx.destination();
        c.decoded_destinations[2] = mmse_rx.destination();
        c.decoded_destinations[4] = fde1_rx.destination();
        c.fec = code;
        io::udp_publisher pub(c);
        EXPECT_TRUE(pub.decoded_enabled(2));
        EXPECT_TRUE(pub.decoded_enabled(4));
        EXPECT_FALSE(pub.decoded_enabled(0));
        EXPECT_FALSE(pub.enabled(4));
        EXPECT_NE(pub.describe().find("decoded (ar4ja-1024-1/2) of mmse=" + mmse_rx.destination() + " fde1="), std::string::npos)
            << pub.describe();

        auto batches = test::make_pn_batches(2, 20);
        for (auto& b : batches) {
            b.size_fec(b.packets.size(), f);
            for (std::size_t i = 0; i < b.decoded.size(); ++i) b.decoded[i] = static_cast<std::uint8_t>(i * 7 + b.batch_index);
            for (std::size_t i = 0; i < b.codewords.size(); ++i) {
                b.codewords[i] = {static_cast<std::uint8_t>(1 + i % 50), static_cast<std::uint8_t>(i % 9 != 4),
                                  static_cast<std::uint16_t>(i % 300)};
            }
        }
        // A batch not decoded (a receiver without the code: the caller's bug) has its
        // bitstreams sent; each decoded datagram it cannot make is a counted failed send.
        auto plain = batches[0];
        plain.decoded.clear();
        plain.codewords.clear();
        plain.fec_codewords = plain.fec_info_bytes = 0;
        EXPECT_NO_THROW(pub.publish(plain));
        for (std::size_t k = 0; k < plain.packets.size(); ++k) {
            const auto d = mmse_rx.receive(2000);
            ASSERT_TRUE(d.has_value());
            EXPECT_FALSE(io::decode_datagram(*d).datagram.fec.has_value());
        }
        EXPECT_FALSE(fde1_rx.receive(50).has_value());
        EXPECT_EQ(pub.decoded_counters(4).send_errors.load(), 20u);

        for (const auto& b : batches) pub.publish(b);
        std::uint64_t index = 20;
        std::size_t bitstreams = 0;
        std::vector<std::vector<std::uint8_t>> mmse_decoded;
        while (const auto d = mmse_rx.receive(500)) {
            const auto r = io::decode_datagram(*d);
            ASSERT_TRUE(r.ok()) << r.error;
            if (r.datagram.fec) {
                mmse_decoded.push_back(*d);
            } else {
                ++bitstreams;
            }
        }
        EXPECT_EQ(bitstreams, 40u);
        for (const int s : {2, 4}) {
            SCOPED_TRACE("stream " + std::to_string(s));
            std::uint64_t k_all = index;
            for (const auto& b : batches) {
                for (std::size_t k = 0; k < b.packets.size(); ++k, ++k_all) {
                    std::vector<std::uint8_t> d;
                    if (s == 2) {
                        ASSERT_LT(k_all - index, mmse_decoded.size());
                        d = mmse_decoded[k_all - index];
                    } else {
                        auto got = fde1_rx.receive(2000);
                        ASSERT_TRUE(got.has_value());
                        d = *got;
                    }
                    ASSERT_EQ(d.size(), io::decoded_datagram_bytes(f));
                    const auto r = io::decode_datagram(d);
                    ASSERT_TRUE(r.ok()) << r.error;
                    const auto& h = r.datagram.header;
                    EXPECT_EQ(h.stream_id, s);
                    EXPECT_EQ(h.sequence, k_all);  // the 20 packets of the batch not decoded count in it
                    EXPECT_EQ(h.packet_index, k_all);
                    EXPECT_EQ(h.start_sample, b.packets[k].start_sample);
                    EXPECT_EQ(h.bep_estimate, b.packets[k].paths[static_cast<std::size_t>(s)].bep_estimate);
                    ASSERT_TRUE(r.datagram.fec.has_value());
                    EXPECT_EQ(r.datagram.fec->code, code);
                    EXPECT_TRUE(std::equal(r.datagram.bits.begin(), r.datagram.bits.end(), b.packet_decoded(k, s)));
                    ASSERT_EQ(r.datagram.fec->codewords, 3);
                    for (int cw = 0; cw < 3; ++cw) {
                        const auto& want = b.packet_codewords(k, s)[cw];
                        const auto& got = r.datagram.fec->results[static_cast<std::size_t>(cw)];
                        EXPECT_EQ(got.iterations, want.iterations);
                        EXPECT_EQ(got.converged, want.converged);
                        EXPECT_EQ(got.channel_errors, want.converged ? want.channel_errors : 0);
                    }
                }
            }
        }
        EXPECT_EQ(mmse_decoded.size(), 40u);
        for (const int s : {2, 4}) {
            const auto& cnt = pub.decoded_counters(s);
            EXPECT_EQ(cnt.packets_published.load(), 60u);
            EXPECT_EQ(cnt.datagrams_sent.load(), 40u);
            EXPECT_EQ(cnt.send_errors.load(), 20u);
            EXPECT_EQ(cnt.bytes_sent.load(), 40u * io::decoded_datagram_bytes(f));
        }
        EXPECT_EQ(pub.decoded_counters(0).packets_published.load(), 0u);
        EXPECT_THROW((void)pub.decoded_counters(12), std::out_of_range);
    }

    // Decoded streams without a code are refused at construction, naming the field.
    io::udp_publisher_config c;
    c.destinations[0] = "127.0.0.1:5000";
    c.decoded_destinations[1] = "127.0.0.1:5001";
    c.fec = dsp::fec_code::none;
    try {
        io::udp_publisher p(c);
        FAIL() << "no exception";
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("decoded_destinations: the decoded streams need a code, but fec is none"), std::string::npos)
            << e.what();
    }
    c.decoded_destinations[1] = "nowhere";
    const auto e = c.validate();
    ASSERT_EQ(e.size(), 1u);
    EXPECT_NE(e[0].find("decoded_destinations[1] (zf): destination 'nowhere' has no ':port'"), std::string::npos) << e[0];
}

TEST(udp_publisher, the_continuous_streams_decoded_datagrams_carry_the_frames_that_end_in_each_packet)
{
    // receiver.fec ar4ja-1024-4/5, the continuous stream: each packet's datagram holds the
    // frames whose last bit it holds (4, 5 or none here), numbered in the run; a frame begun
    // before the batch that the stream engine did not join (pending) is not sent. Unpaced and
    // paced send the same datagrams; a paq-bert monitor counts the frames' information bits
    // against the PN pattern, the frames lost between two packets skipped by their numbers.
    const auto code = dsp::fec_code::k1024_r4_5;
    const dsp::fec_framing f = *dsp::framing_for(code);
    const std::size_t k_bytes = static_cast<std::size_t>(f.k / 8);
    for (const double pacing : {0.0, 1e6}) {
        SCOPED_TRACE(pacing == 0.0 ? "unpaced" : "paced");
        udp_receiver rx, bits_rx;
        io::udp_publisher_config c;
        c.send_buffer_bytes = 1 << 20;
        c.max_datagrams_per_second = pacing;
        c.destinations[3] = bits_rx.destination();
        c.decoded_destinations[3] = rx.destination();
        c.fec = code;
        io::udp_publisher pub(c);
        auto batches = test::make_pn_batches(1, 12);
        auto& b = batches[0];
        b.size_fec(b.packets.size(), f);
        // Frames 0, 1, ...: packet i ends 4 or 5 of them (none for packet 7); packet 0 has one
        // pending (not decoded) first; frames 40 .. 44 are lost between packets 9 and 10.
        dsp::pn_generator pn(dsp::pn_pattern::pn15);
        std::int64_t next = 0;
        for (std::size_t i = 0; i < b.packets.size(); ++i) {
            auto& pf = b.frames[i];
            pf.count = static_cast<std::uint8_t>(i == 7 ? 0 : 4 + i % 2);
            pf.pending = i == 0 ? 1 : 0;
            if (i == 10) {
                for (int skip = 0; skip < 5 * f.k; ++skip) (void)pn.next();
                next += 5;
            }
            pf.first = next - pf.pending;
            next += pf.count - pf.pending;
            for (int st = 0; st < b.streams; ++st) {
                auto* info = b.packet_decoded(i, st);
                auto* cw = b.packet_codewords(i, st);
                for (int slot = pf.pending; slot < pf.count; ++slot) {
                    cw[slot] = {static_cast<std::uint8_t>(2 + slot), 1, static_cast<std::uint16_t>(10 + slot)};
                }
                if (st != 3) continue;
                for (std::size_t bit = static_cast<std::size_t>(pf.pending) * k_bytes * 8; bit < static_cast<std::size_t>(pf.count) * k_bytes * 8; ++bit) {
                    info[bit / 8] = static_cast<std::uint8_t>(info[bit / 8] | (pn.next() << (7 - bit % 8)));
                }
            }
        }
        pub.publish(b);
        io::bert_monitor_config mc;
        io::bert_monitor mon(mc);
        for (std::size_t i = 0; i < b.packets.size(); ++i) {
            const auto d = rx.receive(2000);
            ASSERT_TRUE(d.has_value()) << "packet " << i;
            const auto& pf = b.frames[i];
            const int frames = pf.count - pf.pending;
            ASSERT_EQ(d->size(), io::decoded_datagram_bytes(f, frames));
            const auto r = io::decode_datagram(*d);
            ASSERT_TRUE(r.ok()) << r.error;
            ASSERT_TRUE(r.datagram.fec.has_value());
            EXPECT_EQ(r.datagram.fec->codewords, frames);
            if (frames > 0) {
                EXPECT_EQ(r.datagram.fec->first_frame, pf.first + pf.pending);
            }
            EXPECT_TRUE(std::equal(r.datagram.bits.begin(), r.datagram.bits.end(), b.packet_decoded(i, 3) + pf.pending * k_bytes));
            for (int w = 0; w < frames; ++w) EXPECT_EQ(r.datagram.fec->results[static_cast<std::size_t>(w)].iterations, 2 + pf.pending + w);
            mon.ingest(*d, 3);
        }
        EXPECT_FALSE(rx.receive(50).has_value());
        const auto st = mon.stats(io::bert_monitor::decoded_id(3));
        EXPECT_EQ(st.pn.bit_errors, 0u);
        EXPECT_EQ(st.pn.bits_checked + st.pn.bits_before_lock, static_cast<std::uint64_t>(next - 5) * static_cast<std::uint64_t>(f.k));
        EXPECT_EQ(st.fec.codewords, static_cast<std::uint64_t>(next - 5));
        EXPECT_EQ(pub.decoded_counters(3).datagrams_sent.load(), b.packets.size());
    }
}

// The best-path stream: per packet the bits and BEP of the stream with the lowest BEP estimate
// (a NaN counts as 0.5, a tie goes to the lower stream id: dsp::best_stream), stream id 12 with
// the chosen stream in byte 10 and its own sequence numbers; sent alike by the unpaced streams
// at once and by the paced publisher, in every format.
TEST(udp_publisher, the_best_path_stream_carries_each_packets_most_reliable_stream)
{
    for (const double rate : {0.0, 100000.0}) {
        for (const auto format : {bitstream_format::paq, bitstream_format::dqe}) {
            SCOPED_TRACE(std::string(io::to_string(format)) + (rate > 0.0 ? " paced" : " unpaced"));
            udp_receiver rx, best_rx;
            io::udp_publisher_config c;
            c.format = format;
            c.dqe_id.use_stream_id = true;
            c.send_buffer_bytes = 1 << 20;
            c.max_datagrams_per_second = rate;
            c.destinations[1] = rx.destination();
            c.best_destination = best_rx.destination();
            io::udp_publisher pub(c);
            EXPECT_TRUE(pub.best_enabled());
            EXPECT_NE(pub.describe().find("best path to " + best_rx.destination()), std::string::npos) << pub.describe();
            auto batches = test::make_pn_batches(2, 5);
            std::vector<int> want;
            int i = 0;
            for (auto& b : batches) {
                for (std::size_t k = 0; k < b.packets.size(); ++k, ++i) {
                    auto& paths = b.packets[k].paths;
                    for (int st = 0; st < dsp::chain::num_paths; ++st) {
                        paths[static_cast<std::size_t>(st)].bep_estimate = 1e-2f;
                        test::flip_bit(b, k, st, static_cast<std::size_t>(st));  // each stream's bits its own
                    }
                    int pick = (i * 5 + 1) % dsp::chain::num_paths;
                    paths[static_cast<std::size_t>(pick)].bep_estimate = 1e-4f;
                    if (i == 2) paths[0].bep_estimate = std::numeric_limits<float>::quiet_NaN();  // never chosen
                    if (i == 3) {  // a tie: the lower id
                        paths[4].bep_estimate = 1e-5f;
                        paths[2].bep_estimate = 1e-5f;
                        pick = 2;
                    }
                    want.push_back(pick);
                }
            }
            for (const auto& b : batches) pub.publish(b);
            std::size_t idx = 0;
            for (const auto& b : batches) {
                for (std::size_t k = 0; k < b.packets.size(); ++k, ++idx) {
                    SCOPED_TRACE("packet " + std::to_string(idx));
                    const auto d = best_rx.receive(2000);
                    ASSERT_TRUE(d.has_value());
                    const auto r = io::decode_datagram(*d);
                    ASSERT_TRUE(r.ok()) << r.error;
                    const auto& h = r.datagram.header;
                    const int chosen = want[idx];
                    EXPECT_EQ(h.stream_id, io::best_stream_id);
                    EXPECT_EQ(h.chosen_stream, chosen);
                    EXPECT_EQ(h.sequence, idx);
                    EXPECT_EQ(h.packet_index, idx);
                    EXPECT_EQ(h.start_sample, b.packets[k].start_sample);
                    EXPECT_EQ(h.bep_estimate, b.packets[k].paths[static_cast<std::size_t>(chosen)].bep_estimate);
                    EXPECT_TRUE(std::equal(r.datagram.bits.begin(), r.datagram.bits.end(), b.packet_bits(k, chosen)));
                    if (format == bitstream_format::dqe) {
                        ASSERT_TRUE(r.datagram.dqe.has_value());
                        EXPECT_EQ(r.datagram.dqe->id, io::best_stream_id);
                        EXPECT_EQ(r.datagram.dqe->dqm, io::dqm_from_bep(h.bep_estimate));
                    }
                    EXPECT_EQ(dsp::best_stream(b.packets[k], b.streams), chosen);
                }
            }
            EXPECT_FALSE(best_rx.receive(50).has_value());
            EXPECT_EQ(pub.best_counters().datagrams_sent.load(), 10u);
            EXPECT_EQ(pub.best_counters().send_errors.load(), 0u);
            EXPECT_EQ(pub.counters(1).datagrams_sent.load(), 10u);
        }
    }
    io::udp_publisher_config bad;
    bad.destinations[0] = "127.0.0.1:5000";
    bad.best_destination = "127.0.0.1";
    const auto e = bad.validate();
    ASSERT_EQ(e.size(), 1u);
    EXPECT_NE(e[0].find("best_destination: destination '127.0.0.1' has no ':port'"), std::string::npos) << e[0];
}

TEST(udp_publisher_config, a_bad_soft_stream_destination_is_named)
{
    io::udp_publisher_config c;
    c.destinations[0] = "127.0.0.1:5000";
    c.llr_destinations[4] = "localhost";
    const auto e = c.validate();
    ASSERT_EQ(e.size(), 1u);
    EXPECT_NE(e[0].find("llr_destinations[4] (fde1): destination 'localhost' has no ':port'"), std::string::npos) << e[0];
}

TEST(udp_publisher, a_closed_port_is_counted_not_thrown)
{
    udp_receiver rx;
    io::udp_publisher_config c;
    c.destinations[1] = "127.0.0.1:" + std::to_string(closed_port());
    c.destinations[2] = rx.destination();
    io::udp_publisher pub(c);
    const auto batches = test::make_pn_batches(1, 5);
    // The ICMP port-unreachable of one send fails a later one (ECONNREFUSED); on loopback
    // that is the next send, but allow the kernel a few batches.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
    int published = 0;
    while (pub.counters(1).send_errors.load() == 0 && std::chrono::steady_clock::now() < deadline) {
        ASSERT_NO_THROW(pub.publish(batches[0]));
        ++published;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    const auto& bad = pub.counters(1);
    EXPECT_GT(bad.send_errors.load(), 0u);
    EXPECT_EQ(bad.datagrams_sent.load() + bad.send_errors.load(), bad.packets_published.load());
    EXPECT_EQ(bad.packets_published.load(), 5u * static_cast<unsigned>(published));
    // The good stream is not disturbed.
    EXPECT_EQ(pub.counters(2).datagrams_sent.load(), 5u * static_cast<unsigned>(published));
    EXPECT_EQ(pub.counters(2).send_errors.load(), 0u);
}

TEST(udp_publisher, pacing_bounds_the_datagram_rate)
{
    udp_receiver rx;
    io::udp_publisher_config c;
    c.destinations[0] = rx.destination();
    c.max_datagrams_per_second = 2000;
    io::udp_publisher pub(c);
    const auto batches = test::make_pn_batches(1, 30);
    const auto t0 = std::chrono::steady_clock::now();
    pub.publish(batches[0]);
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    // 30 datagrams at 2000/s: 29 intervals of 0.5 ms, less the 1 ms burst allowance.
    EXPECT_GE(elapsed, (29 - 2) * 0.5e-3);
    EXPECT_EQ(pub.counters(0).datagrams_sent.load(), 30u);
}

// ---------------------------------------------------------------------------------------
// paq-bert, run as a process

class paq_bert_process {
public:
    explicit paq_bert_process(std::vector<std::string> args)
    {
        int fds[2];
        if (::pipe(fds) != 0) throw std::runtime_error("pipe failed");
        posix_spawn_file_actions_t actions;
        posix_spawn_file_actions_init(&actions);
        posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
        posix_spawn_file_actions_addclose(&actions, fds[0]);
        args.insert(args.begin(), PAQ_BINARY_DIR "/tools/paq-bert");
        std::vector<char*> argv;
        for (auto& a : args) argv.push_back(a.data());
        argv.push_back(nullptr);
        const int rc = posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), environ);
        posix_spawn_file_actions_destroy(&actions);
        ::close(fds[1]);
        if (rc != 0) throw std::runtime_error("cannot start " + args[0]);
        fd_ = fds[0];
    }
    ~paq_bert_process()
    {
        if (pid_ > 0) {
            ::kill(pid_, SIGKILL);
            ::waitpid(pid_, nullptr, 0);
        }
        if (fd_ >= 0) ::close(fd_);
    }

    /// Reads stdout up to the "listening on" lines; returns their ports in order.
    std::vector<std::uint16_t> ports(int count)
    {
        std::vector<std::uint16_t> p;
        std::size_t pos = 0;
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (static_cast<int>(p.size()) < count && std::chrono::steady_clock::now() < deadline) {
            const auto eol = output_.find('\n', pos);
            if (eol == std::string::npos) {
                if (!read_some(20)) break;
                continue;
            }
            const std::string line = output_.substr(pos, eol - pos);
            pos = eol + 1;
            const auto at = line.find("listening on ");
            if (at == std::string::npos) continue;
            const auto colon = line.find(':', at + 13);
            if (colon != std::string::npos) p.push_back(static_cast<std::uint16_t>(std::atoi(line.c_str() + colon + 1)));
        }
        return p;
    }

    void signal(int sig) const { ::kill(pid_, sig); }

    /// Reads stdout until `text` appears (true) or timeout_s passes (false).
    bool wait_for_output(const std::string& text, double timeout_s)
    {
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
        while (output_.find(text) == std::string::npos) {
            if (std::chrono::steady_clock::now() > deadline || !read_some(20)) return false;
        }
        return true;
    }

    /// Reads the rest of stdout and waits for the exit (killing it after timeout_s).
    int wait(double timeout_s)
    {
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
        int status = 0;
        while (::waitpid(pid_, &status, WNOHANG) == 0) {
            (void)read_some(20);
            if (std::chrono::steady_clock::now() > deadline) {
                ::kill(pid_, SIGKILL);
                ::waitpid(pid_, &status, 0);
                pid_ = -1;
                return -1;
            }
        }
        pid_ = -1;
        while (read_some(1000)) {
        }
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    }

    [[nodiscard]] const std::string& output() const { return output_; }

private:
    /// Appends what stdout has within timeout_ms; false at end of file.
    bool read_some(int timeout_ms)
    {
        pollfd p{fd_, POLLIN, 0};
        if (::poll(&p, 1, timeout_ms) != 1) return true;
        char buf[4096];
        const auto n = ::read(fd_, buf, sizeof buf);
        if (n <= 0) return false;
        output_.append(buf, static_cast<std::size_t>(n));
        return true;
    }

    pid_t pid_ = -1;
    int fd_ = -1;
    std::string output_;
};

class paq_bert : public ::testing::Test {
protected:
    void SetUp() override
    {
        const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
        json_ = fs::temp_directory_path() / ("paq_test_bert_" + std::string(info->name()) + "_" +
                                             std::to_string(::getpid()) + ".json");
        fs::remove(json_);
    }
    void TearDown() override
    {
        std::error_code ec;
        fs::remove(json_, ec);
    }
    [[nodiscard]] nlohmann::json summary() const
    {
        std::ifstream f(json_);
        return nlohmann::json::parse(f);
    }
    [[nodiscard]] static const nlohmann::json& stream(const nlohmann::json& j, int id)
    {
        for (const auto& s : j.at("streams")) {
            if (s.at("stream") == id) return s;
        }
        throw std::runtime_error("stream " + std::to_string(id) + " not in the summary");
    }

    fs::path json_;
};

TEST_F(paq_bert, reports_exactly_the_injected_errors_losses_and_duplicates)
{
    paq_bert_process bert({"--port", "0", "--idle-timeout", "0.5", "--interval", "0", "--expect-streams", "2",
                           "--json", json_.string()});
    const auto ports = bert.ports(1);
    ASSERT_EQ(ports.size(), 1u) << bert.output();

    constexpr int packets = 40;
    auto batches = test::make_pn_batches(2, packets / 2);
    // Errors: zf 2 bits in packet 4 and 1 in packet 30 (batch 1, index 10); fde1 5 bits in packet 15.
    test::flip_bit(batches[0], 4, 1, 10);
    test::flip_bit(batches[0], 4, 1, 11);
    test::flip_bit(batches[1], 10, 1, 6000);
    for (std::size_t bit : {1u, 2u, 3u, 500u, 6143u}) test::flip_bit(batches[0], 15, 4, bit);

    asio::io_context io;
    udp::socket tx(io, udp::v4());
    const udp::endpoint to(asio::ip::make_address("127.0.0.1"), ports[0]);
    // zf (stream 1): packets 8, 9, 10 dropped, 20 sent twice; fde1 (stream 4): 33 dropped,
    // 2 and 3 sent three times each; one malformed datagram.
    std::uint64_t k = 0;
    for (const auto& b : batches) {
        for (std::size_t i = 0; i < b.packets.size(); ++i, ++k) {
            if (k != 8 && k != 9 && k != 10) {
                const int copies = k == 20 ? 2 : 1;
                for (int c = 0; c < copies; ++c) tx.send_to(asio::buffer(test::encode_packet(bitstream_format::paq, b, i, 1, k, k)), to);
            }
            if (k != 33) {
                const int copies = k == 2 || k == 3 ? 3 : 1;
                for (int c = 0; c < copies; ++c) tx.send_to(asio::buffer(test::encode_packet(bitstream_format::dqe, b, i, 4, k, k)), to);
            }
        }
    }
    tx.send_to(asio::buffer(std::vector<std::uint8_t>(20, 0xEE)), to);

    ASSERT_EQ(bert.wait(20), 0) << bert.output();
    const auto j = summary();
    EXPECT_EQ(j.at("end_reason"), "idle-timeout");
    EXPECT_EQ(j.at("exit_code"), 0);
    EXPECT_EQ(j.at("active_streams"), 2);
    EXPECT_EQ(j.at("malformed"), 1);
    EXPECT_EQ(j.at("malformed_unattributed"), 1);

    const auto& zf = stream(j, 1);
    EXPECT_EQ(zf.at("path"), "zf");
    EXPECT_EQ(zf.at("datagrams"), packets - 3 + 1);
    EXPECT_EQ(zf.at("lost"), 3);
    EXPECT_EQ(zf.at("duplicated"), 1);
    EXPECT_EQ(zf.at("reordered"), 0);
    EXPECT_EQ(zf.at("bit_errors"), 3);
    EXPECT_EQ(zf.at("packets_skipped"), 3);
    EXPECT_EQ(zf.at("bits_checked").get<std::uint64_t>() + zf.at("bits_before_lock").get<std::uint64_t>(),
              (packets - 3) * data_bits);
    EXPECT_EQ(zf.at("locked"), true);
    EXPECT_EQ(zf.at("resyncs"), 0);
    EXPECT_TRUE(zf.at("last_dqm").is_null());

    const auto& fde1 = stream(j, 4);
    EXPECT_EQ(fde1.at("datagrams"), packets - 1 + 4);
    EXPECT_EQ(fde1.at("lost"), 1);
    EXPECT_EQ(fde1.at("duplicated"), 4);
    EXPECT_EQ(fde1.at("bit_errors"), 5);
    EXPECT_EQ(fde1.at("bits_checked").get<std::uint64_t>() + fde1.at("bits_before_lock").get<std::uint64_t>(),
              (packets - 1) * data_bits);
    EXPECT_EQ(fde1.at("last_dqm"), io::dqm_from_bep(batches[1].packets.back().paths[4].bep_estimate));

    EXPECT_NE(bert.output().find("zf"), std::string::npos);
    EXPECT_NE(bert.output().find("ended by idle-timeout, exit code 0"), std::string::npos) << bert.output();
}

// A restarted publisher end to end: paqd publishes, restarts (a new publisher: sequence
// numbers from 0 again, start samples of the new run), publishes again. paq-bert used to take
// the second run for duplicates and check none of it.
TEST_F(paq_bert, a_restarted_publisher_is_recognised_and_its_new_run_checked)
{
    paq_bert_process bert({"--port", "0", "--idle-timeout", "0.5", "--interval", "0", "--json", json_.string()});
    const auto ports = bert.ports(1);
    ASSERT_EQ(ports.size(), 1u) << bert.output();
    constexpr int per_run = 15;
    auto batches = test::make_pn_batches(2, per_run);  // one PN sequence: the transmitter runs on
    for (std::size_t k = 0; k < batches[1].packets.size(); ++k) batches[1].packets[k].start_sample = 300 + k * waveform::L_pkt;
    test::flip_bit(batches[1], 9, 2, 77);
    io::udp_publisher_config c;
    c.destinations[2] = "127.0.0.1:" + std::to_string(ports[0]);
    {
        io::udp_publisher first_run(c);
        first_run.publish(batches[0]);
    }
    io::udp_publisher second_run(c);  // paqd restarted
    second_run.publish(batches[1]);

    ASSERT_EQ(bert.wait(20), 0) << bert.output();
    const auto j = summary();
    const auto& mmse = stream(j, 2);
    EXPECT_EQ(mmse.at("sender_restarts"), 1);
    EXPECT_EQ(mmse.at("datagrams"), 2 * per_run);
    EXPECT_EQ(mmse.at("duplicated"), 0);
    EXPECT_EQ(mmse.at("lost"), 0);
    EXPECT_EQ(mmse.at("packets_checked"), 2 * per_run);
    EXPECT_EQ(mmse.at("bits_checked").get<std::uint64_t>() + mmse.at("bits_before_lock").get<std::uint64_t>(),
              2 * per_run * data_bits);
    EXPECT_EQ(mmse.at("bit_errors"), 1);
    EXPECT_EQ(mmse.at("locked"), true);
    EXPECT_NE(bert.output().find("a sender restarted"), std::string::npos) << bert.output();
}

TEST_F(paq_bert, stops_when_every_stream_has_checked_the_bits_from_the_publisher)
{
    paq_bert_process bert6({"--ports", "0,0,0,0,0,0", "--bits", std::to_string(50 * data_bits), "--expect-streams", "6",
                            "--idle-timeout", "5", "--interval", "0", "--json", json_.string()});
    const auto ports = bert6.ports(6);
    ASSERT_EQ(ports.size(), 6u) << bert6.output();
    io::udp_publisher_config c;
    c.format = bitstream_format::dqe_raw;  // bare DQE: the port names the stream
    for (int s = 0; s < 6; ++s) c.destinations[static_cast<std::size_t>(s)] = "127.0.0.1:" + std::to_string(ports[static_cast<std::size_t>(s)]);
    io::udp_publisher pub(c);
    const auto batches = test::make_pn_batches(3, 20);
    for (const auto& b : batches) pub.publish(b);

    ASSERT_EQ(bert6.wait(20), 0) << bert6.output();
    const auto j = summary();
    EXPECT_EQ(j.at("end_reason"), "bits");
    EXPECT_EQ(j.at("active_streams"), 6);
    for (int s = 0; s < 6; ++s) {
        const auto& st = stream(j, s);
        EXPECT_GE(st.at("bits_checked").get<std::uint64_t>(), 50 * data_bits);
        EXPECT_EQ(st.at("bit_errors"), 0);
        EXPECT_EQ(st.at("malformed"), 0);
    }
}

TEST_F(paq_bert, sigterm_ends_it_with_the_summary_and_exit_codes_tell_what_went_wrong)
{
    {
        paq_bert_process bert({"--port", "0", "--idle-timeout", "0", "--expect-streams", "2", "--interval", "0.1",
                               "--json", json_.string()});
        const auto ports = bert.ports(1);
        ASSERT_EQ(ports.size(), 1u);
        io::udp_publisher_config c;
        c.destinations[5] = "127.0.0.1:" + std::to_string(ports[0]);
        io::udp_publisher pub(c);
        pub.publish(test::make_pn_batches(1, 3)[0]);
        // End it once its periodic table shows all three.
        ASSERT_TRUE(bert.wait_for_output(", 3 datagrams,", 10)) << bert.output();
        bert.signal(SIGTERM);
        EXPECT_EQ(bert.wait(10), 4) << bert.output();  // one stream of the two expected
        const auto j = summary();
        EXPECT_EQ(j.at("end_reason"), "sigterm");
        EXPECT_EQ(stream(j, 5).at("datagrams"), 3);
    }
    {
        paq_bert_process bert({"--port", "0", "--seconds", "0.3"});
        EXPECT_EQ(bert.wait(10), 3) << bert.output();  // nothing arrived
    }
    for (const std::vector<std::string>& bad : {std::vector<std::string>{"--port", "0", "--pattern", "pn16"},
                                                std::vector<std::string>{"--base-port", "0"},
                                                std::vector<std::string>{"--port", "0", "--bind", "localhost"},
                                                std::vector<std::string>{"--port", "0", "--format", "irig"}}) {
        paq_bert_process bert(bad);
        EXPECT_EQ(bert.wait(10), 2) << bert.output();  // configuration error
    }
    {
        paq_bert_process bert({"--port", "0", "--bits", "1000000", "--seconds", "0.5", "--idle-timeout", "0"});
        const auto ports = bert.ports(1);
        ASSERT_EQ(ports.size(), 1u);
        io::udp_publisher_config c;
        c.destinations[0] = "127.0.0.1:" + std::to_string(ports[0]);
        io::udp_publisher pub(c);
        pub.publish(test::make_pn_batches(1, 2)[0]);
        EXPECT_EQ(bert.wait(10), 5) << bert.output();  // --bits not reached
    }
}

}  // namespace
