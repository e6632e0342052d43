// The pairing of two receive channels that arrive as separate streams (io::channel_pairer,
// used by the VITA-49 source with second_stream_id): blocks placed anywhere on the timeline,
// overlapping, going back, jumping ahead, of any size, from either channel, and resets.
//
// Input: byte 0 picks the lag bound (1 + byte0 x 16 samples), then operations of 6 bytes:
//   byte 0   bit 0: the channel; bit 1: reset instead of a block;
//   bytes 1..3: the block's start against the end of that channel's last block, a signed
//               24-bit big-endian number (negative: overlapping or going back);
//   bytes 4..5: the block's length, & 4095.
// Each sample marks its channel (imaginary part 1 or 2) and its timeline index (real part,
// mod 2^20).
//
// Checked, besides the sanitizers: every delivered sample time holds both channels' samples of
// one index; the indices run on by one, and by the gap's size across a gap; what a channel
// holds never exceeds the bound; and every sample pushed is delivered, counted unpaired, or
// still held.
#include "io/channel_pairing.hpp"
#include "tests/fuzz/fuzz_support.hpp"

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

using namespace paq;

namespace {

constexpr std::int64_t index_mod = std::int64_t{1} << 20;

float mark_index(std::int64_t i) { return static_cast<float>(((i % index_mod) + index_mod) % index_mod); }

struct checker final : io::paired_output {
    std::optional<std::int64_t> expect;  ///< the index the next pair must carry (mod 2^20)
    std::uint64_t delivered = 0;
    void pairs(std::span<const cf32x2> s) override
    {
        for (const auto& p : s) {
            PAQ_FUZZ_CHECK(p.a.imag() == 1.0f && p.b.imag() == 2.0f, "a sample time holds another channel's sample");
            PAQ_FUZZ_CHECK(p.a.real() == p.b.real(), "a sample time pairs index " + std::to_string(p.a.real()) + " with " +
                                                         std::to_string(p.b.real()));
            if (expect) {
                PAQ_FUZZ_CHECK(p.a.real() == mark_index(*expect),
                               "index " + std::to_string(p.a.real()) + " delivered, " + std::to_string(mark_index(*expect)) +
                                   " expected");
            }
            expect = static_cast<std::int64_t>(p.a.real()) + 1;
        }
        delivered += s.size();
    }
    void gap(std::uint64_t times, bool) override
    {
        PAQ_FUZZ_CHECK(times > 0, "a gap of no sample times");
        if (expect) expect = *expect + static_cast<std::int64_t>(times % static_cast<std::uint64_t>(index_mod));
    }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    if (size < 1) return 0;
    const std::uint64_t bound = 1 + std::uint64_t{data[0]} * 16;
    io::channel_pairer pairer(bound);
    checker out;
    std::array<std::int64_t, 2> end{0, 0};
    std::array<std::uint64_t, 2> pushed{0, 0};
    std::vector<cf32> block;
    for (std::size_t at = 1; at + 6 <= size; at += 6) {
        const std::uint8_t op = data[at];
        const int ch = op & 1;
        if (op & 2) {
            pairer.reset();
            out.expect.reset();
            continue;
        }
        std::int32_t delta = (data[at + 1] << 16) | (data[at + 2] << 8) | data[at + 3];
        if (delta & 0x800000) delta -= 0x1000000;
        const std::size_t n = static_cast<std::size_t>(((data[at + 4] << 8) | data[at + 5]) & 4095);
        const std::int64_t start = end[static_cast<std::size_t>(ch)] + delta;
        block.resize(n);
        for (std::size_t k = 0; k < n; ++k) block[k] = cf32(mark_index(start + static_cast<std::int64_t>(k)), static_cast<float>(ch + 1));
        pairer.push(ch, start, block, out);
        pushed[static_cast<std::size_t>(ch)] += n;
        if (n > 0) end[static_cast<std::size_t>(ch)] = std::max(end[static_cast<std::size_t>(ch)], start + static_cast<std::int64_t>(n));
        for (int c = 0; c < 2; ++c) {
            PAQ_FUZZ_CHECK(pairer.buffered(c) <= bound, "channel " + std::to_string(c + 1) + " holds " +
                                                            std::to_string(pairer.buffered(c)) + " samples, over the bound " +
                                                            std::to_string(bound));
            const auto cu = static_cast<std::size_t>(c);
            PAQ_FUZZ_CHECK(pushed[cu] == out.delivered + pairer.counts().unpaired_samples[cu] + pairer.buffered(c),
                           "channel " + std::to_string(c + 1) + ": " + std::to_string(pushed[cu]) + " pushed, " +
                               std::to_string(out.delivered) + " delivered, " +
                               std::to_string(pairer.counts().unpaired_samples[cu]) + " unpaired, " +
                               std::to_string(pairer.buffered(c)) + " held");
        }
    }
    return 0;
}
