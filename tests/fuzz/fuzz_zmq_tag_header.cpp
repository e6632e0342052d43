// GNU Radio's ZeroMQ tag header parser (io::parse_gnuradio_tag_header, the zmq source's
// tags: gnuradio): a pure function, fuzzed without a socket.
//
// Input: one message.
//
// Checked, besides the sanitizers: a header is found exactly when the message has at least
// 19 bytes and starts f0 5f 01; its offset and tag count are the little-endian u64s at
// bytes 3 and 11.
#include "io/zmq_source.hpp"
#include "tests/fuzz/fuzz_support.hpp"

#include <cstdint>
#include <span>

using namespace paq;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    const auto msg = std::span(reinterpret_cast<const std::byte*>(data), size);
    const auto h = io::parse_gnuradio_tag_header(msg);
    const bool expect = size >= io::gnuradio_tag_header_bytes && data[0] == 0xf0 && data[1] == 0x5f && data[2] == 0x01;
    PAQ_FUZZ_CHECK(h.has_value() == expect, "header found where it is not, or missed");
    if (h) {
        std::uint64_t offset = 0, ntags = 0;
        for (int i = 7; i >= 0; --i) {
            offset = (offset << 8) | data[3 + i];
            ntags = (ntags << 8) | data[11 + i];
        }
        PAQ_FUZZ_CHECK(h->offset == offset && h->ntags == ntags, "offset or tag count misread");
    }
    return 0;
}
