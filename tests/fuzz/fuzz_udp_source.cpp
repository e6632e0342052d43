// The bytes of the raw-IQ UDP source (io::udp_source): no function of it turns a datagram
// into samples without a socket, so an in-process udp_source on 127.0.0.1 is sent each
// record (fuzz_support.hpp) as one datagram, the harness waiting until the source has
// received it before sending the next.
//
// Input: byte 0 bit 0 picks the source (ci16_le, else cf32_le), bit 1 one of two receive
// channels interleaved (a sample time of each channel, delivered as cf32x2), then the datagrams.
//
// Checked, besides the sanitizers: the source receives each datagram within 5 s; a datagram
// of whole samples (sample times) is delivered as io::decode decodes it, any other is counted as malformed
// and reported as one gap(0, source_error) in its place.
#include "io/net_source.hpp"
#include "io/sample_format.hpp"
#include "tests/fuzz/fuzz_support.hpp"
#include "tests/fuzz/loopback.hpp"
#include "tests/fuzz/net_sink.hpp"

#include <spdlog/spdlog.h>

#include <cstring>
#include <memory>
#include <thread>

using namespace paq;
using paq::fuzz::recording_sink;
using paq::fuzz::socket_fd;

namespace {

struct running_source {
    running_source(io::sample_format format, int channels)
    {
        io::udp_source_config cfg;
        cfg.bind_address = "127.0.0.1";
        cfg.port = 0;
        cfg.format = format;
        cfg.channels = channels;
        cfg.sample_rate_hz = 6.6e6;
        cfg.rcvbuf_bytes = 0;
        source = std::make_unique<io::udp_source>(cfg);
        thread = std::thread([this] { source->run(sink); });
        PAQ_FUZZ_CHECK(paq::fuzz::wait_for([this] { return source->local_port() != 0; }), "udp source did not bind");
        client.connect_loopback(source->local_port());
    }
    ~running_source()
    {
        source->stop();
        thread.join();
    }
    std::unique_ptr<io::udp_source> source;
    recording_sink sink;
    std::thread thread;
    socket_fd client{SOCK_DGRAM};
};

running_source& source_for(io::sample_format format, int channels)
{
    static running_source ci16(io::sample_format::ci16_le, 1);
    static running_source cf32(io::sample_format::cf32_le, 1);
    static running_source ci16x2(io::sample_format::ci16_le, 2);
    static running_source cf32x2(io::sample_format::cf32_le, 2);
    if (channels == 2) return format == io::sample_format::ci16_le ? ci16x2 : cf32x2;
    return format == io::sample_format::ci16_le ? ci16 : cf32;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***)
{
    spdlog::set_level(spdlog::level::err);
    for (const int channels : {1, 2}) {
        (void)source_for(io::sample_format::ci16_le, channels);
        (void)source_for(io::sample_format::cf32_le, channels);
    }
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    if (size < 1) return 0;
    const io::sample_format format = (data[0] & 1) ? io::sample_format::ci16_le : io::sample_format::cf32_le;
    const int channels = (data[0] & 2) ? 2 : 1;
    running_source& rs = source_for(format, channels);
    const io::source_counters& counters = rs.source->counters();
    // A sample time's bytes (a sample of each channel); expected holds the channels' values
    // interleaved, as the sink keeps them.
    const std::size_t bps = io::bytes_per_sample(format) * static_cast<std::size_t>(channels);

    std::vector<cf32> expected;
    std::vector<std::size_t> malformed_at;  // samples delivered before each malformed datagram
    const std::uint64_t packets_before = counters.packets.load();
    const std::uint64_t malformed_before = counters.malformed.load();
    std::uint64_t sent = 0;
    paq::fuzz::record_reader records({data + 1, size - 1});
    std::span<const std::uint8_t> record;
    while (records.next(record)) {
        const ssize_t n = ::send(rs.client.get(), record.data(), record.size(), 0);
        PAQ_FUZZ_CHECK(n == static_cast<ssize_t>(record.size()), std::string("send: ") + std::strerror(errno));
        ++sent;
        PAQ_FUZZ_CHECK(paq::fuzz::wait_for([&] { return counters.packets.load() >= packets_before + sent; }),
                       "udp source did not receive datagram " + std::to_string(sent) + " within 5 s");
        if (record.size() % bps != 0) {
            malformed_at.push_back(expected.size());
            continue;
        }
        const std::size_t whole = record.size() / bps * static_cast<std::size_t>(channels);
        const std::vector<std::byte> exact = paq::fuzz::exact_copy(record);
        const std::size_t at = expected.size();
        expected.resize(at + whole);
        io::decode(format, exact.data(), whole, expected.data() + at, io::default_ci16_scale);
    }
    // The source counts a datagram before it decodes it: wait for what the last one gives.
    PAQ_FUZZ_CHECK(paq::fuzz::wait_for([&] { return rs.sink.has(expected.size(), malformed_at.size()); }),
                   "udp source did not deliver the datagrams' samples and gaps within 5 s");
    PAQ_FUZZ_CHECK(counters.packets.load() == packets_before + sent, "udp source counted datagrams it was not sent");
    PAQ_FUZZ_CHECK(counters.malformed.load() - malformed_before == malformed_at.size(), "malformed count wrong");

    std::vector<cf32> got;
    std::vector<recording_sink::gap_event> gaps;
    rs.sink.take(got, gaps);
    PAQ_FUZZ_CHECK(got.size() == expected.size(), "delivered " + std::to_string(got.size()) + " samples of " + std::to_string(expected.size()));
    PAQ_FUZZ_CHECK(got.empty() || std::memcmp(got.data(), expected.data(), got.size() * sizeof(cf32)) == 0,
                   "delivered samples differ from io::decode of the datagrams");
    PAQ_FUZZ_CHECK(gaps.size() == malformed_at.size(), std::to_string(gaps.size()) + " gaps for " +
                                                           std::to_string(malformed_at.size()) + " malformed datagrams");
    for (std::size_t k = 0; k < gaps.size(); ++k) {
        PAQ_FUZZ_CHECK(gaps[k].lost == 0 && gaps[k].reason == io::gap_reason::source_error && gaps[k].at_sample == malformed_at[k],
                       "gap " + std::to_string(k) + " is not gap(0, source_error) in the malformed datagram's place");
    }
    return 0;
}
