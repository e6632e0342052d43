// The GNU Radio UDP sequence check (io::check_udp_sequence, the udp_source's header option
// gnuradio-seq / gnuradio-seq-size): a pure function, fuzzed without a socket.
//
// Input: consecutive 8-byte little-endian sequence numbers, as the first 8 bytes of GNU Radio
// UDP Sink datagrams carry them (a trailing partial number is ignored).
//
// Checked, besides the sanitizers: the numbers accepted (in_order, lost) after a restart or
// a resync strictly increase; between the first accepted number of a run and the last, the
// accepted count plus the lost count is exactly last - first + 1 (no datagram counted twice,
// none missed); no single loss exceeds io::udp_max_seq_jump; a stale number (at most
// io::udp_reorder_window behind the last) never changes the tracked state, and a number
// further behind or further ahead is a resync, so no input locks the check out: every number
// outside the window behind the last is accepted.
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
            PAQ_FUZZ_CHECK(last && seq <= *last && *last - seq <= io::udp_reorder_window,
                           "stale number not within the reorder window behind the last");
            continue;
        case io::udp_seq_verdict::restart:
            PAQ_FUZZ_CHECK(seq == 1, "restart not at 1");
            run_first = seq, accepted = 0, lost = 0, overflowed = false;
            break;
        case io::udp_seq_verdict::resync:
            PAQ_FUZZ_CHECK(last && r.lost == 0 &&
                               ((seq < *last && *last - seq > io::udp_reorder_window) ||
                                (seq > *last && seq - *last - 1 > io::udp_max_seq_jump)),
                           "resync on a number within the window or the jump bound");
            run_first = seq, accepted = 0, lost = 0, overflowed = false;
            break;
        case io::udp_seq_verdict::lost:
            PAQ_FUZZ_CHECK(last && seq > *last + 1 && r.lost == seq - *last - 1, "lost count wrong");
            PAQ_FUZZ_CHECK(r.lost <= io::udp_max_seq_jump, "loss beyond the jump bound");
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
