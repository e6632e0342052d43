// The bytes of the raw-IQ TCP source (io::tcp_source): no function of it turns bytes into
// samples without a socket, so an in-process tcp_source in listen mode on 127.0.0.1 is fed by
// a client per input: one connection, each record (fuzz_support.hpp) one send() that the
// harness lets the source read before sending the next (so that samples split across reads
// are exercised where the input puts the splits), then the client closes.
//
// Input: byte 0 bit 0 picks the source (ci16_le, else cf32_le), bit 1 one of two receive
// channels interleaved (a sample time of each channel, delivered as cf32x2), then the records.
//
// Checked, besides the sanitizers: the source reads every byte; it delivers exactly the
// whole samples of the connection's bytes, decoded as io::decode decodes them (a partial
// sample at the close is dropped); every connection after the first starts with
// gap(0, reconnect) and there is no other gap; it serves the next client within 5 s.
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
        io::tcp_source_config cfg;
        cfg.mode = io::tcp_mode::listen;
        cfg.host = "127.0.0.1";
        cfg.port = 0;
        cfg.format = format;
        cfg.channels = channels;
        cfg.sample_rate_hz = 6.6e6;
        cfg.read_bytes = 64 * 1024;
        // One long-lived source for every input: no idle timeout (libFuzzer may pause between
        // inputs), and short accept throttling (an input with no records is a client that
        // brings no data, after which the next accept waits; the harness waits 5 s at most).
        cfg.idle_timeout_s = 0.0;
        cfg.retry_initial_s = 0.001;
        cfg.retry_max_s = 0.01;
        source = std::make_unique<io::tcp_source>(cfg);
        thread = std::thread([this] { source->run(sink); });
        PAQ_FUZZ_CHECK(paq::fuzz::wait_for([this] { return source->local_port() != 0; }), "tcp source did not listen");
    }
    ~running_source()
    {
        source->stop();
        thread.join();
    }
    std::unique_ptr<io::tcp_source> source;
    recording_sink sink;
    std::thread thread;
    std::uint64_t connections = 0;
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
    const std::uint64_t bytes_before = counters.bytes.load();

    std::vector<std::uint8_t> sent;
    {
        socket_fd client(SOCK_STREAM);
        client.connect_loopback(rs.source->local_port());
        PAQ_FUZZ_CHECK(paq::fuzz::wait_for([&] { return rs.source->connected(); }), "tcp source did not accept the client within 5 s");
        paq::fuzz::record_reader records({data + 1, size - 1});
        std::span<const std::uint8_t> record;
        while (records.next(record)) {
            std::size_t off = 0;
            while (off < record.size()) {
                const ssize_t n = ::send(client.get(), record.data() + off, record.size() - off, MSG_NOSIGNAL);
                PAQ_FUZZ_CHECK(n > 0, std::string("send: ") + std::strerror(errno));
                off += static_cast<std::size_t>(n);
            }
            sent.insert(sent.end(), record.begin(), record.end());
            const std::uint64_t want = bytes_before + sent.size();
            PAQ_FUZZ_CHECK(paq::fuzz::wait_for([&] { return counters.bytes.load() >= want; }),
                           "tcp source read " + std::to_string(counters.bytes.load() - bytes_before) + " of " +
                               std::to_string(sent.size()) + " bytes within 5 s");
        }
    }  // close
    PAQ_FUZZ_CHECK(paq::fuzz::wait_for([&] { return !rs.source->connected(); }), "tcp source did not see the close within 5 s");
    ++rs.connections;
    PAQ_FUZZ_CHECK(counters.bytes.load() == bytes_before + sent.size(), "tcp source counted bytes it was not sent");

    std::vector<cf32> got;
    std::vector<recording_sink::gap_event> gaps;
    rs.sink.take(got, gaps);
    // Whole sample times (a sample of each channel), their values interleaved as the sink keeps them.
    const std::size_t bps = io::bytes_per_sample(format) * static_cast<std::size_t>(channels);
    const std::size_t whole = sent.size() / bps * static_cast<std::size_t>(channels);
    std::vector<cf32> expected(whole);
    const std::vector<std::byte> exact = paq::fuzz::exact_copy(sent);
    io::decode(format, exact.data(), whole, expected.data(), io::default_ci16_scale);
    PAQ_FUZZ_CHECK(got.size() == whole, "delivered " + std::to_string(got.size()) + " samples of " + std::to_string(whole));
    PAQ_FUZZ_CHECK(whole == 0 || std::memcmp(got.data(), expected.data(), whole * sizeof(cf32)) == 0,
                   "delivered samples differ from io::decode of the bytes sent");
    if (rs.connections > 1) {
        PAQ_FUZZ_CHECK(gaps.size() == 1 && gaps[0].reason == io::gap_reason::reconnect && gaps[0].lost == 0 && gaps[0].at_sample == 0,
                       "expected one gap(0, reconnect) before the connection's samples, got " + std::to_string(gaps.size()) + " gaps");
    } else {
        PAQ_FUZZ_CHECK(gaps.empty(), "a gap in the first connection");
    }
    return 0;
}
