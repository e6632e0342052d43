// The ZeroMQ source's message handling (io::zmq_source: GNU Radio's tag header, item offsets,
// whole samples): no function of it turns a message into samples without a socket, so an
// in-process zmq_source (PULL) connects to a PUSH socket of the harness on 127.0.0.1, which
// sends each record (fuzz_support.hpp) as one message, waiting until the source has received
// it before sending the next.
//
// Input: byte 0 bit 0 picks ci16_le (else cf32_le), bit 1 `tags: gnuradio` (else none); then
// the messages.
//
// Checked, besides the sanitizers: the source receives each message within 5 s; the samples
// delivered are exactly io::decode of the accepted messages' bodies (after the 19-byte header
// with tags: gnuradio; a message is accepted when it has the header, no tags in it, and whole
// samples after it); every other message is counted as malformed and reported as one
// gap(0, source_error) in its place; an offset jump is a lost_packets or discontinuity gap,
// never a source_error one.
#include "io/sample_format.hpp"
#include "io/zmq_source.hpp"
#include "tests/fuzz/fuzz_support.hpp"
#include "tests/fuzz/loopback.hpp"
#include "tests/fuzz/net_sink.hpp"

#include <spdlog/spdlog.h>
#include <zmq.h>

#include <cstring>
#include <memory>
#include <string>
#include <thread>

using namespace paq;
using paq::fuzz::recording_sink;

namespace {

struct running_source {
    running_source(io::sample_format format, io::zmq_tags tags)
    {
        ctx = zmq_ctx_new();
        push = zmq_socket(ctx, ZMQ_PUSH);
        const int linger = 0;
        zmq_setsockopt(push, ZMQ_LINGER, &linger, sizeof linger);
        PAQ_FUZZ_CHECK(zmq_bind(push, "tcp://127.0.0.1:*") == 0, std::string("bind: ") + zmq_strerror(zmq_errno()));
        char endpoint[256];
        std::size_t len = sizeof endpoint;
        zmq_getsockopt(push, ZMQ_LAST_ENDPOINT, endpoint, &len);
        io::zmq_source_config cfg;
        cfg.endpoint = endpoint;
        cfg.pattern = io::zmq_pattern::pull;
        cfg.format = format;
        cfg.tags = tags;
        cfg.sample_rate_hz = 6.6e6;
        source = std::make_unique<io::zmq_source>(cfg);
        thread = std::thread([this] { source->run(sink); });
    }
    ~running_source()
    {
        source->stop();
        thread.join();
        zmq_close(push);
        zmq_ctx_term(ctx);
    }
    void* ctx = nullptr;
    void* push = nullptr;
    std::unique_ptr<io::zmq_source> source;
    recording_sink sink;
    std::thread thread;
};

running_source& source_for(io::sample_format format, io::zmq_tags tags)
{
    static running_source sources[4] = {{io::sample_format::cf32_le, io::zmq_tags::none},
                                        {io::sample_format::ci16_le, io::zmq_tags::none},
                                        {io::sample_format::cf32_le, io::zmq_tags::gnuradio},
                                        {io::sample_format::ci16_le, io::zmq_tags::gnuradio}};
    return sources[(format == io::sample_format::ci16_le ? 1 : 0) + (tags == io::zmq_tags::gnuradio ? 2 : 0)];
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***)
{
    spdlog::set_level(spdlog::level::err);
    (void)source_for(io::sample_format::cf32_le, io::zmq_tags::none);
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    if (size < 1) return 0;
    const io::sample_format format = (data[0] & 1) ? io::sample_format::ci16_le : io::sample_format::cf32_le;
    const io::zmq_tags tags = (data[0] & 2) ? io::zmq_tags::gnuradio : io::zmq_tags::none;
    running_source& rs = source_for(format, tags);
    const io::source_counters& counters = rs.source->counters();
    const std::size_t bps = io::bytes_per_sample(format);

    std::vector<cf32> expected;
    std::vector<std::size_t> malformed_at;  // samples delivered before each malformed message
    const std::uint64_t packets_before = counters.packets.load();
    const std::uint64_t malformed_before = counters.malformed.load();
    std::uint64_t sent = 0;
    paq::fuzz::record_reader records({data + 1, size - 1});
    std::span<const std::uint8_t> record;
    while (records.next(record)) {
        PAQ_FUZZ_CHECK(zmq_send(rs.push, record.data(), record.size(), 0) == static_cast<int>(record.size()),
                       std::string("send: ") + zmq_strerror(zmq_errno()));
        ++sent;
        PAQ_FUZZ_CHECK(paq::fuzz::wait_for([&] { return counters.packets.load() >= packets_before + sent; }),
                       "zmq source did not receive message " + std::to_string(sent) + " within 5 s");
        const std::vector<std::byte> exact = paq::fuzz::exact_copy(record);
        std::span<const std::byte> body(exact);
        if (tags == io::zmq_tags::gnuradio) {
            const auto h = io::parse_gnuradio_tag_header(body);
            if (!h || h->ntags != 0) {
                malformed_at.push_back(expected.size());
                continue;
            }
            body = body.subspan(io::gnuradio_tag_header_bytes);
        }
        if (body.size() % bps != 0) {
            malformed_at.push_back(expected.size());
            continue;
        }
        const std::size_t whole = body.size() / bps;
        const std::size_t at = expected.size();
        expected.resize(at + whole);
        io::decode(format, body.data(), whole, expected.data() + at, io::default_ci16_scale);
    }
    std::vector<cf32> got;
    std::vector<recording_sink::gap_event> gaps;
    // The source counts a message before it decodes it: wait for what the last one gives.
    PAQ_FUZZ_CHECK(paq::fuzz::wait_for([&] {
                       if (!rs.sink.has(expected.size(), 0)) return false;
                       std::size_t errors = 0;
                       rs.sink.peek_gaps([&](const recording_sink::gap_event& g) { errors += g.reason == io::gap_reason::source_error; });
                       return errors >= malformed_at.size();
                   }),
                   "zmq source did not deliver the messages' samples and gaps within 5 s");
    PAQ_FUZZ_CHECK(counters.packets.load() == packets_before + sent, "zmq source counted messages it was not sent");
    PAQ_FUZZ_CHECK(counters.malformed.load() - malformed_before == malformed_at.size(), "malformed count wrong");
    rs.sink.take(got, gaps);
    PAQ_FUZZ_CHECK(got.size() == expected.size(), "delivered " + std::to_string(got.size()) + " samples of " + std::to_string(expected.size()));
    PAQ_FUZZ_CHECK(got.empty() || std::memcmp(got.data(), expected.data(), got.size() * sizeof(cf32)) == 0,
                   "delivered samples differ from io::decode of the messages' bodies");
    std::size_t k = 0;
    for (const auto& g : gaps) {
        if (g.reason != io::gap_reason::source_error) {
            PAQ_FUZZ_CHECK(tags == io::zmq_tags::gnuradio &&
                               (g.reason == io::gap_reason::lost_packets || g.reason == io::gap_reason::discontinuity),
                           "a gap that is neither a malformed message's nor an offset jump's");
            continue;
        }
        PAQ_FUZZ_CHECK(k < malformed_at.size() && g.lost == 0 && g.at_sample == malformed_at[k],
                       "gap " + std::to_string(k) + " is not gap(0, source_error) in the malformed message's place");
        ++k;
    }
    PAQ_FUZZ_CHECK(k == malformed_at.size(), std::to_string(k) + " source_error gaps for " + std::to_string(malformed_at.size()) +
                                                 " malformed messages");
    return 0;
}
