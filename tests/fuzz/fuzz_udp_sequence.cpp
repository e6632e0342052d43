// The GNU Radio UDP sequence check (io::check_udp_sequence, the udp_source's header option
// gnuradio-seq / gnuradio-seq-size): a pure function, fuzzed without a socket.
//
// Input: consecutive 8-byte little-endian sequence numbers, as the first 8 bytes of GNU Radio
// UDP Sink datagrams carry them (a trailing partial number is ignored).
//
// Checked, besides the sanitizers: the numbers accepted (in_order, lost, restart) after a
// restart strictly increase; between the first accepted number of a run and the last, the
// accepted count plus the lost count is exactly last - first + 1 (no datagram counted twice,
// none missed); a stale number never changes the tracked state.
#include "io/net_source.hpp"
#include "tests/fuzz/fuzz_support.hpp"

#include <cstdint>
#include <optional>

using namespace paq;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    std::optional<std::uint64_t> last;
    std::uint64_t run_first = 0, accepted = 0, lost = 0;
    bool overflowed = false;  // a lost count beyond 2^64 cannot be summed: skip the identity
    for (std::size_t i = 0; i + 8 <= size; i += 8) {
        std::uint64_t seq = 0;
        for (int b = 7; b >= 0; --b) seq = (seq << 8) | data[i + static_cast<std::size_t>(b)];
        const auto r = io::check_udp_sequence(last, seq);
        switch (r.verdict) {
        case io::udp_seq_verdict::stale:
            PAQ_FUZZ_CHECK(last && seq <= *last, "stale number after a larger one");
            continue;
        case io::udp_seq_verdict::restart:
            PAQ_FUZZ_CHECK(seq == 1, "restart not at 1");
            run_first = seq, accepted = 0, lost = 0, overflowed = false;
            break;
        case io::udp_seq_verdict::lost:
            PAQ_FUZZ_CHECK(last && seq > *last + 1 && r.lost == seq - *last - 1, "lost count wrong");
            if (lost + r.lost < lost) overflowed = true;
            lost += r.lost;
            break;
        case io::udp_seq_verdict::in_order:
            PAQ_FUZZ_CHECK(!last || seq == *last + 1, "in order but not the next number");
            if (!last) run_first = seq;
            break;
        }
        ++accepted;
        last = seq;
        if (!overflowed && seq - run_first != UINT64_MAX)
            PAQ_FUZZ_CHECK(accepted + lost == seq - run_first + 1, "accepted + lost != span of the run");
    }
    return 0;
}
