// The service's plumbing: the sample ring, the daemon configuration, and the live pipeline
// (source -> ring -> batcher -> workers -> ordered publish) against the offline chain.
#include "chain_fixture.hpp"
#include "pinning_backend.hpp"
#include "config/daemon_config.hpp"
#include "config/receiver_yaml.hpp"
#include "daemon/live.hpp"
#include "daemon/llr_writer.hpp"
#include "runtime/counters.hpp"
#include "daemon/pipeline.hpp"
#include "daemon/recorder.hpp"
#include "daemon/replay.hpp"
#include "daemon/sources.hpp"
#include "io/file_source.hpp"
#include "io/net_source.hpp"
#include "io/zmq_source.hpp"
#include "io/ring_buffer.hpp"
#include "io/sample_file.hpp"
#include "io/utc_time.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <iterator>
#include <limits>
#include <map>
#include <sstream>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <set>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <thread>

using namespace paq;
using namespace std::chrono_literals;

namespace {

/// A cf32 SigMF recording <base>.sigmf-{meta,data} of `samples` at `rate_hz`; with `channels`
/// above 1 the samples are the channels' interleaved.
void write_recording(const std::filesystem::path& base, double rate_hz, std::span<const cf32> samples, int channels = 1)
{
    io::sigmf_meta meta;
    meta.sample_rate_hz = rate_hz;
    meta.num_channels = channels;
    auto w = io::sample_file_writer::create_sigmf(base, meta);
    w.write(samples);
    w.close();
}

std::vector<cf32> ramp(std::size_t n, float start = 0.0f)
{
    std::vector<cf32> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = cf32(start + static_cast<float>(i), -static_cast<float>(i));
    return v;
}

io::sample_ring make_ring(std::size_t cap, io::overflow_policy p)
{
    return io::sample_ring(cap, p, io::host_ring_allocator(false));
}

}  // namespace

// ------------------------------------------------------------------------------------- ring

TEST(ring, block_policy_delivers_everything_in_order_across_the_wrap)
{
    auto ring = make_ring(1000, io::overflow_policy::block);
    const auto in = ramp(100'000);
    std::thread producer([&] {
        // Uneven chunks, so that writes straddle the wrap point.
        for (std::size_t pos = 0, k = 0; pos < in.size(); ++k) {
            const std::size_t n = std::min<std::size_t>(1 + (k * 37) % 700, in.size() - pos);
            ASSERT_EQ(ring.write(std::span<const cf32>(in.data() + pos, n)), n);
            pos += n;
        }
        ring.close();
    });
    std::vector<cf32> out;
    std::vector<cf32> buf(333);
    for (;;) {
        const auto r = ring.read(buf, 1000ms);
        if (r.what == io::sample_ring::read_result::kind::end) break;
        ASSERT_EQ(r.what, io::sample_ring::read_result::kind::samples);
        out.insert(out.end(), buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(r.count));
    }
    producer.join();
    EXPECT_EQ(out, in);
    const auto c = ring.counters();
    EXPECT_EQ(c.samples_dropped, 0u);
    EXPECT_GT(c.producer_waits, 0u);
    EXPECT_LE(c.high_water, 1000u);
}

// The zero-copy write (reserve, fill, commit) mixed with write(): the same stream, in order
// across the wrap, the time anchors on their samples, waiting for room under block.
TEST(ring, in_place_writes_and_copies_give_one_stream_with_its_anchors)
{
    auto ring = make_ring(1000, io::overflow_policy::block);
    const auto in = ramp(60'000);
    std::thread producer([&] {
        io::ring_sink sink(ring);
        std::vector<cf32> scratch(700);
        for (std::size_t pos = 0, k = 0; pos < in.size(); ++k) {
            const std::size_t n = std::min<std::size_t>(1 + (k * 37) % 700, in.size() - pos);
            if (k % 5 == 0) sink.timestamp({pos + k % 3, static_cast<std::int64_t>(pos + k % 3)});  // utc = the sample's index
            if (k % 2 == 0) {
                sink.write(std::span<const cf32>(in.data() + pos, n));
                pos += n;
                continue;
            }
            // The ring may give less room than asked (its end, or not yet read): the fill
            // takes what it is given, the source's next chunk the rest.
            const std::size_t got = sink.write_from(std::span<cf32>(scratch).first(n), [&](std::span<cf32> room) {
                std::copy_n(in.begin() + static_cast<std::ptrdiff_t>(pos), room.size(), room.begin());
                return room.size();
            });
            ASSERT_GT(got, 0u);
            ASSERT_LE(got, n);
            pos += got;
        }
        ring.close();
    });
    std::vector<cf32> out;
    std::vector<cf32> buf(333);
    std::size_t anchors = 0;
    for (;;) {
        const auto r = ring.read(buf, 1000ms);
        if (r.what == io::sample_ring::read_result::kind::end) break;
        ASSERT_EQ(r.what, io::sample_ring::read_result::kind::samples);
        if (r.time) {
            EXPECT_EQ(r.time->utc_ns, static_cast<std::int64_t>(out.size() + r.time->offset));
            ++anchors;
        }
        out.insert(out.end(), buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(r.count));
    }
    producer.join();
    EXPECT_EQ(out, in);
    const auto c = ring.counters();
    EXPECT_EQ(c.samples_dropped, 0u);
    EXPECT_EQ(c.samples_written, in.size());
    EXPECT_GT(c.producer_waits, 0u);
    EXPECT_GT(anchors, 10u);
    EXPECT_EQ(c.anchors, anchors);
}

// Two anchors among the samples of one read: the read returns the latest, and the counter
// counts the anchors the reads returned, not those they passed over.
TEST(ring, a_read_over_two_anchors_returns_the_latest_and_counts_the_other_superseded)
{
    auto ring = make_ring(1000, io::overflow_policy::block);
    const auto in = ramp(30);
    ring.timestamp(1002, 2);
    ring.write(std::span<const cf32>(in.data(), 10));
    ring.timestamp(1015, 5);
    ring.write(std::span<const cf32>(in.data() + 10, 20));
    std::vector<cf32> buf(100);
    const auto r = ring.read(buf, 1000ms);
    ASSERT_EQ(r.what, io::sample_ring::read_result::kind::samples);
    ASSERT_EQ(r.count, 30u);
    ASSERT_TRUE(r.time.has_value());
    EXPECT_EQ(r.time->offset, 15u);
    EXPECT_EQ(r.time->utc_ns, 1015);
    const auto c = ring.counters();
    EXPECT_EQ(c.anchors, 1u);
    EXPECT_EQ(c.anchors_superseded, 1u);
    EXPECT_EQ(c.anchors_dropped, 0u);
}

// Under drop a full ring gives no room: the sink reads into its scratch and write() drops and
// counts the samples, so a file source read in place loses nothing silently either.
TEST(ring, a_full_drop_ring_gives_no_room_and_the_fill_goes_through_write)
{
    auto ring = make_ring(100, io::overflow_policy::drop);
    io::ring_sink sink(ring);
    std::vector<cf32> scratch(80);
    const auto a = ramp(80);
    auto fill_from = [](const std::vector<cf32>& src) {
        return [&src](std::span<cf32> room) {
            const std::size_t n = std::min(room.size(), src.size());
            std::copy_n(src.begin(), n, room.begin());
            return n;
        };
    };
    EXPECT_EQ(sink.write_from(scratch, fill_from(a)), 80u);  // in place
    const auto b = ramp(50, 1000.0f);
    EXPECT_EQ(sink.write_from(std::span<cf32>(scratch).first(50), fill_from(b)), 20u);  // the room left: 20
    const auto c = ramp(30, 2000.0f);
    EXPECT_EQ(sink.write_from(std::span<cf32>(scratch).first(30), fill_from(c)), 30u);  // full: read, then dropped
    auto cnt = ring.counters();
    EXPECT_EQ(cnt.samples_written, 100u);
    EXPECT_EQ(cnt.samples_dropped, 30u);
    std::vector<cf32> buf(200);
    auto r = ring.read(buf, 10ms);
    ASSERT_EQ(r.count, 100u);
    EXPECT_EQ(buf[79], a[79]);
    EXPECT_EQ(buf[80], b[0]);
    EXPECT_EQ(buf[99], b[19]);
    EXPECT_EQ(sink.write_from(std::span<cf32>(scratch).first(5), fill_from(a)), 5u);
    r = ring.read(buf, 10ms);
    ASSERT_EQ(r.what, io::sample_ring::read_result::kind::gap);
    EXPECT_EQ(r.lost_samples, 30u);
    // A commit beyond the room, and a reserve at the other width, are the producer's bugs.
    const auto room = ring.reserve<cf32>(10);
    EXPECT_EQ(room.size(), 10u);
    EXPECT_THROW(ring.commit(11), std::logic_error);
    EXPECT_THROW((void)ring.reserve<ci16>(10), std::logic_error);
    ring.close();
    EXPECT_TRUE(ring.reserve<cf32>(10).empty());
}

TEST(ring, drop_policy_counts_every_dropped_sample_and_marks_the_gap_where_it_happened)
{
    auto ring = make_ring(100, io::overflow_policy::drop);
    const auto a = ramp(80, 0.0f);
    const auto b = ramp(50, 1000.0f);  // 20 fit, 30 dropped
    const auto c = ramp(10, 2000.0f);  // ring full: all 10 dropped
    EXPECT_EQ(ring.write(a), 80u);
    EXPECT_EQ(ring.write(b), 20u);
    EXPECT_EQ(ring.write(c), 0u);
    std::vector<cf32> buf(1000);
    auto r = ring.read(buf, 10ms);
    ASSERT_EQ(r.what, io::sample_ring::read_result::kind::samples);
    ASSERT_EQ(r.count, 100u);
    EXPECT_EQ(buf[99], b[19]);
    const auto d = ramp(5, 3000.0f);
    EXPECT_EQ(ring.write(d), 5u);
    // The 40 dropped samples come back as one gap, before d.
    r = ring.read(buf, 10ms);
    ASSERT_EQ(r.what, io::sample_ring::read_result::kind::gap);
    EXPECT_EQ(r.lost_samples, 40u);
    EXPECT_EQ(r.reason, io::gap_reason::overflow);
    EXPECT_TRUE(r.dropped_by_ring) << "counted by the ring, so not again by the engine";
    r = ring.read(buf, 10ms);
    ASSERT_EQ(r.what, io::sample_ring::read_result::kind::samples);
    ASSERT_EQ(r.count, 5u);
    EXPECT_EQ(buf[0], d[0]);
    const auto cnt = ring.counters();
    EXPECT_EQ(cnt.samples_dropped, 40u);
    EXPECT_EQ(cnt.overflows, 1u);
    EXPECT_EQ(cnt.samples_written + cnt.samples_dropped, 80u + 50u + 10u + 5u);
}

TEST(ring, gaps_arrive_between_the_same_samples_and_the_end_after_everything)
{
    auto ring = make_ring(64, io::overflow_policy::block);
    ring.write(ramp(10));
    ring.gap(123, io::gap_reason::lost_packets);
    ring.gap(0, io::gap_reason::reconnect);
    ring.write(ramp(3, 50.0f));
    ring.close();
    EXPECT_EQ(ring.write(ramp(3)), 0u) << "a closed ring accepts nothing";
    EXPECT_EQ(ring.counters().samples_refused, 3u) << "but counts what it refused";
    std::vector<cf32> buf(64);
    using kind = io::sample_ring::read_result::kind;
    auto r = ring.read(buf, 10ms);
    EXPECT_EQ(r.what, kind::samples);
    EXPECT_EQ(r.count, 10u);
    r = ring.read(buf, 10ms);
    EXPECT_EQ(r.what, kind::gap);
    EXPECT_EQ(r.lost_samples, 123u);
    EXPECT_EQ(r.reason, io::gap_reason::lost_packets);
    EXPECT_FALSE(r.dropped_by_ring);
    r = ring.read(buf, 10ms);
    EXPECT_EQ(r.what, kind::gap);
    EXPECT_EQ(r.reason, io::gap_reason::reconnect);
    r = ring.read(buf, 10ms);
    EXPECT_EQ(r.what, kind::samples);
    EXPECT_EQ(r.count, 3u);
    EXPECT_EQ(buf[0], cf32(50.0f, 0.0f));
    EXPECT_EQ(ring.read(buf, 10ms).what, kind::end);
}

// A flood of one-sample VITA-49 datagrams whose packet count skips made one gap
// marker per datagram, without bound. With drop, markers stay bounded and the flood is
// merged into counted gaps; every lost and dropped sample is still accounted for.
TEST(ring, a_gap_flood_is_coalesced_and_the_markers_stay_bounded)
{
    io::sample_ring ring(1000, io::overflow_policy::drop, io::host_ring_allocator(false), 64);
    const auto one = ramp(1);
    std::uint64_t written = 0;
    for (int k = 0; k < 10'000; ++k) {
        ring.gap(7, io::gap_reason::lost_packets);
        written += ring.write(one);
    }
    ring.gap(0, io::gap_reason::source_error);
    ring.close();
    const auto c = ring.counters();
    EXPECT_GT(c.gaps_coalesced, 9000u);
    EXPECT_EQ(c.samples_written, written);
    EXPECT_EQ(c.samples_written + c.samples_dropped, 10'000u);
    // The consumer sees at most max_markers + a few markers and the exact totals.
    std::vector<cf32> buf(64);
    using kind = io::sample_ring::read_result::kind;
    std::uint64_t gaps = 0, lost_packets = 0, overflow = 0, samples = 0, source_error_gaps = 0;
    for (;;) {
        const auto r = ring.read(buf, 10ms);
        if (r.what == kind::end) break;
        ASSERT_NE(r.what, kind::timeout);
        if (r.what == kind::samples) samples += r.count;
        if (r.what != kind::gap) continue;
        ++gaps;
        if (r.reason == io::gap_reason::lost_packets) lost_packets += r.lost_samples;
        if (r.reason == io::gap_reason::overflow) overflow += r.lost_samples;
        if (r.reason == io::gap_reason::source_error) ++source_error_gaps;
    }
    EXPECT_LE(gaps, 64u + 3u);
    EXPECT_EQ(lost_packets, 7u * 10'000u);  // the sources' counts are kept exact
    EXPECT_EQ(overflow, c.samples_dropped);
    EXPECT_EQ(samples, written);
    EXPECT_EQ(source_error_gaps, 1u);
}

TEST(ring, one_sample_writes_keep_the_arrival_list_bounded_and_the_latency_true)
{
    // A source writing one sample at a time into a ring nobody reads: the arrival times of
    // the samples (for the batch latency) must not take 16 bytes per write. 1,000,000
    // one-sample writes fill the ring; the list holds one entry per millisecond at most.
    const auto start = std::chrono::steady_clock::now();
    auto ring = make_ring(1'000'000, io::overflow_policy::drop);
    const std::vector<cf32> one(1, cf32(1.0f, 0.0f));
    for (int i = 0; i < 1'000'000; ++i) ASSERT_EQ(ring.write(one), 1u);
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
    EXPECT_LE(ring.arrival_entries(), static_cast<std::size_t>(ms) + 2) << ms << " ms of writes";
    EXPECT_LE(ring.arrival_entries(), io::sample_ring::max_arrival_entries);
    // Each read still says when its last sample arrived: not later than now, not before the
    // first write, and later for later samples.
    std::vector<cf32> out(250'000);
    auto previous = start;
    for (int k = 0; k < 4; ++k) {
        const auto r = ring.read(out, std::chrono::milliseconds(100));
        ASSERT_EQ(r.count, out.size());
        EXPECT_GE(r.written, previous);
        EXPECT_LE(r.written, std::chrono::steady_clock::now());
        previous = r.written;
    }
    EXPECT_EQ(ring.arrival_entries(), 0u) << "read to the end, nothing left";
}

TEST(ring, a_gap_flood_with_block_waits_for_the_consumer_and_loses_nothing)
{
    io::sample_ring ring(1000, io::overflow_policy::block, io::host_ring_allocator(false), 16);
    std::thread producer([&] {
        const auto one = ramp(1);
        for (int k = 0; k < 2000; ++k) {
            ring.gap(3, io::gap_reason::discontinuity);
            ring.write(one);
        }
        ring.close();
    });
    std::vector<cf32> buf(64);
    using kind = io::sample_ring::read_result::kind;
    std::uint64_t gaps = 0, lost = 0, samples = 0;
    for (;;) {
        const auto r = ring.read(buf, 1000ms);
        if (r.what == kind::end) break;
        ASSERT_NE(r.what, kind::timeout);
        if (r.what == kind::gap) ++gaps, lost += r.lost_samples;
        if (r.what == kind::samples) samples += r.count;
    }
    producer.join();
    EXPECT_EQ(gaps, 2000u);
    EXPECT_EQ(lost, 6000u);
    EXPECT_EQ(samples, 2000u);
    EXPECT_EQ(ring.counters().samples_dropped, 0u);
}

TEST(ring, read_times_out_when_empty_and_abort_releases_a_blocked_producer)
{
    auto ring = make_ring(16, io::overflow_policy::block);
    std::vector<cf32> buf(16);
    EXPECT_EQ(ring.read(buf, 20ms).what, io::sample_ring::read_result::kind::timeout);
    std::size_t accepted = 0;
    std::thread producer([&] { accepted = ring.write(ramp(40)); });  // blocks after 16
    std::this_thread::sleep_for(50ms);
    ring.abort();
    producer.join();
    EXPECT_EQ(accepted, 16u);
    // What the source still offers (or had read into the ring's room) is refused and counted:
    // every sample it delivered is accepted, dropped or refused.
    EXPECT_EQ(ring.write(ramp(5)), 0u);
    EXPECT_TRUE(ring.reserve<cf32>(8).empty());
    const auto c = ring.counters();
    EXPECT_EQ(c.samples_written, 16u);
    EXPECT_EQ(c.samples_refused, 40u - 16u + 5u);
    // A file source reads into the ring's room, then commits: aborted meanwhile, refused.
    auto in_place = make_ring(16, io::overflow_policy::block);
    const auto room = in_place.reserve<cf32>(8);
    ASSERT_EQ(room.size(), 8u);
    in_place.abort();
    in_place.commit(room.size());
    EXPECT_EQ(in_place.counters().samples_written, 0u);
    EXPECT_EQ(in_place.counters().samples_refused, 8u);
}

// An overflow that happened before the ring (a recording's, passed on by the live file
// source) is the source's loss: not the ring's, so not in its samples_dropped, and the gap
// says so, for the engine to count it.
TEST(ring, an_overflow_reported_by_the_source_is_not_the_rings)
{
    auto ring = make_ring(64, io::overflow_policy::drop);
    ring.write(ramp(10));
    ring.gap(777, io::gap_reason::overflow);
    ring.write(ramp(60, 100.0f));  // 54 fit: 6 dropped by the ring
    std::vector<cf32> buf(64);
    using kind = io::sample_ring::read_result::kind;
    auto r = ring.read(buf, 10ms);
    ASSERT_EQ(r.what, kind::samples);
    r = ring.read(buf, 10ms);
    ASSERT_EQ(r.what, kind::gap);
    EXPECT_EQ(r.lost_samples, 777u);
    EXPECT_EQ(r.reason, io::gap_reason::overflow);
    EXPECT_FALSE(r.dropped_by_ring);
    r = ring.read(buf, 10ms);
    ASSERT_EQ(r.what, kind::samples);
    EXPECT_EQ(r.count, 54u);
    ring.write(ramp(1));
    r = ring.read(buf, 10ms);
    ASSERT_EQ(r.what, kind::gap);
    EXPECT_EQ(r.lost_samples, 6u);
    EXPECT_TRUE(r.dropped_by_ring);
    EXPECT_EQ(ring.counters().samples_dropped, 6u);
}

TEST(ring, reads_carry_the_time_their_last_sample_was_written)
{
    auto ring = make_ring(1000, io::overflow_policy::block);
    ring.write(ramp(100));
    const auto t_first = std::chrono::steady_clock::now();
    std::this_thread::sleep_for(60ms);
    ring.write(ramp(100, 500.0f));
    const auto t_second = std::chrono::steady_clock::now();
    std::vector<cf32> buf(50);
    // Samples of the first write: its time, not the time of the read.
    auto r = ring.read(buf, 10ms);
    ASSERT_EQ(r.what, io::sample_ring::read_result::kind::samples);
    EXPECT_LE(r.written, t_first);
    r = ring.read(buf, 10ms);  // the rest of the first write
    EXPECT_LE(r.written, t_first);
    buf.resize(100);
    r = ring.read(buf, 10ms);  // the second write
    EXPECT_GT(r.written, t_first + 50ms);
    EXPECT_LE(r.written, t_second);
}

// Two receive channels in the tally: each packet's better channel counted, each channel's
// Eb/N0 averaged as linear ratios, a channel of zeros (-300 dB) counted as silent.
TEST(tally, two_channels_count_the_better_channel_and_a_silent_one)
{
    dsp::run_tally tally(dsp::pn_pattern::pn15, 20.625e6, static_cast<double>(waveform::L_pkt), dsp::chain::num_paths);
    dsp::batch_output out;
    out.reset(0, dsp::chain::num_paths);
    out.packets.resize(3);
    out.bits.assign(3 * out.packet_bytes(), 0);
    const std::array<std::array<float, 2>, 3> ebn0{{{12.0f, 2.0f}, {9.0f, -300.0f}, {3.0f, 13.0f}}};
    for (std::size_t i = 0; i < 3; ++i) {
        auto& rec = out.packets[i];
        rec.start_sample = 1000 + i * waveform::L_pkt;
        rec.receive_channels = 2;
        rec.channel_ebn0_db = ebn0[i];
        rec.channel_level_db = {-20.0f, ebn0[i][1] <= -299.0f ? -300.0f : -30.0f};
        rec.best_channel = ebn0[i][1] > ebn0[i][0] ? 1 : 0;
    }
    tally.add(out);
    const auto s = tally.summary();
    EXPECT_EQ(s.packets_two_channel, 3u);
    EXPECT_EQ(s.packets_best_channel, (std::array<std::uint64_t, 2>{2, 1}));
    EXPECT_EQ(s.packets_channel_silent, (std::array<std::uint64_t, 2>{0, 1}));
    const double mean1 = (std::pow(10.0, 1.2) + std::pow(10.0, 0.9) + std::pow(10.0, 0.3)) / 3.0;
    EXPECT_NEAR(s.channel_mean_ebn0_db[0], 10.0 * std::log10(mean1), 1e-4);
    // Levels averaged as powers: channel 2's zeros pull its mean to 10 log10(2/3 x 0.001).
    EXPECT_NEAR(s.channel_mean_level_db[0], -20.0, 1e-4);
    EXPECT_NEAR(s.channel_mean_level_db[1], 10.0 * std::log10(2.0 / 3.0 * 1e-3), 1e-4);
}

// A ring of two receive channels: cf32x2 sample times in and out, overflow counted in sample
// times (a pair is never split), the other widths refused.
TEST(ring, two_channels_travel_as_pairs_and_overflow_drops_whole_sample_times)
{
    io::sample_ring ring(1000, io::overflow_policy::drop, io::host_ring_allocator(false), io::sample_ring::default_max_markers,
                         std::nullopt, 2);
    EXPECT_EQ(ring.channels(), 2);
    EXPECT_EQ(ring.sample_bytes(), 16u);
    std::vector<cf32x2> in(1500);
    for (std::size_t i = 0; i < in.size(); ++i) in[i] = {cf32(static_cast<float>(i), 0.0f), cf32(0.0f, -static_cast<float>(i))};
    EXPECT_EQ(ring.write(std::span<const cf32x2>(in)), 1000u);
    EXPECT_EQ(ring.counters().samples_dropped, 500u);
    std::vector<cf32x2> out(2000);
    const auto r = ring.read(std::span<cf32x2>(out), std::chrono::milliseconds(10));
    ASSERT_EQ(r.what, io::sample_ring::read_result::kind::samples);
    ASSERT_EQ(r.count, 1000u);
    for (std::size_t i = 0; i < r.count; ++i) {
        EXPECT_EQ(out[i].a, in[i].a);
        EXPECT_EQ(out[i].b, in[i].b);
    }
    ring.write(std::span<const cf32x2>(in).first(10));
    const auto g = ring.read(std::span<cf32x2>(out), std::chrono::milliseconds(10));
    EXPECT_EQ(g.what, io::sample_ring::read_result::kind::gap);
    EXPECT_EQ(g.lost_samples, 500u);
    std::vector<cf32> one(4);
    EXPECT_THROW(ring.write(std::span<const cf32>(one)), std::logic_error);
    EXPECT_THROW((void)ring.read(std::span<cf32>(one), std::chrono::milliseconds(1)), std::logic_error);
    EXPECT_THROW(io::sample_ring(10, io::overflow_policy::drop, io::host_ring_allocator(false), 16, 512.0f, 2), std::invalid_argument);
    EXPECT_THROW(io::sample_ring(10, io::overflow_policy::drop, io::host_ring_allocator(false), 16, std::nullopt, 3),
                 std::invalid_argument);
}

TEST(ring, policy_names)
{
    EXPECT_EQ(io::parse_overflow_policy("drop"), io::overflow_policy::drop);
    EXPECT_EQ(io::parse_overflow_policy("block"), io::overflow_policy::block);
    try {
        (void)io::parse_overflow_policy("dorp");
        FAIL();
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("'dorp'"), std::string::npos);
        EXPECT_NE(std::string(e.what()).find("drop, block"), std::string::npos);
    }
}

// ----------------------------------------------------------------------------------- config

namespace {

std::string config_errors(const std::string& yaml)
{
    try {
        (void)config::parse_daemon_config(yaml, "t.yaml");
    } catch (const config::config_error& e) {
        return e.what();
    }
    return {};
}

}  // namespace

TEST(daemon_config, defaults_and_a_full_document)
{
    const auto d = config::parse_daemon_config("source:\n  file:\n    path: x.sigmf-meta\n", "t.yaml", "/etc/paqd");
    EXPECT_EQ(d.source.type, config::source_type::file);
    EXPECT_EQ(d.source.file.path, std::filesystem::path("/etc/paqd/x.sigmf-meta")) << "relative to the config file";
    EXPECT_EQ(d.ring.overflow, config::ring_overflow::automatic);
    EXPECT_EQ(d.pipeline.backend, config::backend_kind::automatic);
    ASSERT_TRUE(d.monitor.pattern);
    EXPECT_EQ(*d.monitor.pattern, dsp::pn_pattern::pn15);

    const auto c = config::parse_daemon_config(R"(
receiver:
  batch_samples: 1000000
source:
  type: file
  stall_timeout_s: 0.5
  file: {path: /data/a.cf32, format: cf32, sample_rate_hz: 20625000, paced: false, loop: true, rate_factor: 2}
ring: {capacity_s: 3, overflow: drop, lock_memory: false}
pipeline: {backend: cpu, gpus: [0, 1], cpu_workers: 2, queue_depth: 3, cpu_fallback: false}
monitor: {pattern: none, status_interval_s: 5}
log: {level: debug, destination: console}
)",
                                               "t.yaml");
    EXPECT_EQ(c.receiver.batch_samples, 1000000u);
    EXPECT_DOUBLE_EQ(c.source.stall_timeout_s, 0.5);
    EXPECT_EQ(c.source.file.raw_format, io::sample_format::cf32_le);
    EXPECT_FALSE(c.source.file.paced);
    EXPECT_TRUE(c.source.file.loop);
    EXPECT_EQ(c.ring.overflow, config::ring_overflow::drop);
    EXPECT_EQ(c.pipeline.gpus, (std::vector<int>{0, 1}));
    EXPECT_FALSE(c.monitor.pattern);
    EXPECT_EQ(c.log.level, config::log_level::debug);
    // The effective configuration reads back to the same.
    const auto again = config::parse_daemon_config(config::to_yaml(c), "again.yaml");
    EXPECT_EQ(config::to_yaml(again), config::to_yaml(c));
}

TEST(daemon_config, errors_name_the_field_the_value_and_the_allowed_range)
{
    const std::string base = "source:\n  file: {path: a}\n";
    auto e = config_errors(base + "ring:\n  capacity_s: 100\n");
    EXPECT_NE(e.find("t.yaml:4: ring.capacity_s = 100 is out of range (allowed: 0.1 .. 60)"), std::string::npos) << e;
    e = config_errors(base + "ring:\n  overflow: sometimes\n");
    EXPECT_NE(e.find("ring.overflow: got 'sometimes' (allowed: auto, drop, block)"), std::string::npos) << e;
    e = config_errors(base + "ring:\n  capacty_s: 1\n");
    EXPECT_NE(e.find("unknown key 'capacty_s' in 'ring', did you mean 'capacity_s'?"), std::string::npos) << e;
    e = config_errors(base + "pipelin:\n  backend: cpu\n");
    EXPECT_NE(e.find("unknown key 'pipelin'"), std::string::npos) << e;
    e = config_errors(base + "pipeline:\n  gpus: [0, 0]\n");
    EXPECT_NE(e.find("pipeline.gpus: 0 is listed twice"), std::string::npos) << e;
    e = config_errors(base + "source:\n  type: file\n");
    EXPECT_NE(e.find("duplicate key 'source'"), std::string::npos) << e;
    e = config_errors("source:\n  type: file\n");
    EXPECT_NE(e.find("source.file.path: must be set"), std::string::npos) << e;
    e = config_errors(base + "monitor:\n  pattern: pn16\n");
    EXPECT_NE(e.find("monitor.pattern: got 'pn16'"), std::string::npos) << e;
    e = config_errors(base + "source:\n  stall_timeout_s: '2'\n");
    EXPECT_FALSE(e.empty());
    e = config_errors(base + "ring:\n  lock_memory: yes\n");
    EXPECT_NE(e.find("ring.lock_memory: expected true or false, got 'yes'"), std::string::npos) << e;
    // What would fail every start is found by --check-config: a source rate the receiver
    // cannot take at its bit rate, a metrics address that is a name.
    e = config_errors("source:\n  type: udp\n  udp:\n    port: 5000\n    sample_rate_hz: 15e6\n");
    EXPECT_NE(e.find("t.yaml:5: source.udp.sample_rate_hz: input sample rate 15 MS/s at bit rate 10.3125 Mbit/s is 1.45455 "
                     "samples per bit"),
              std::string::npos)
        << e;
    e = config_errors("source:\n  type: iio\n  iio:\n    sample_rate_hz: 41.25e6\nreceiver:\n  bit_rate_hz: 5e6\n");
    EXPECT_NE(e.find("source.iio.sample_rate_hz: input sample rate 41.25 MS/s at bit rate 5 Mbit/s is 8.25 samples per bit"),
              std::string::npos)
        << e;
    EXPECT_TRUE(config_errors("source:\n  type: udp\n  udp:\n    port: 5000\n    sample_rate_hz: 25e6\n").empty());
    e = config_errors(base + "metrics:\n  bind: not-an-ip\n");
    EXPECT_NE(e.find("metrics.bind: 'not-an-ip' is not a numeric IPv4/IPv6 address"), std::string::npos) << e;
    EXPECT_TRUE(config_errors(base + "metrics:\n  bind: '::1'\n").empty());
    EXPECT_TRUE(config_errors(base + "metrics:\n  enabled: false\n  bind: not-an-ip\n").empty());
    // Two receive channels: a source of two, selection on the cpu backend only, no recorder;
    // and no second channel without them.
    const std::string two = "source:\n  file: {path: a, channel: 1, second_channel: 2}\nreceiver:\n  channels: 2\n";
    EXPECT_TRUE(config_errors(two).empty()) << config_errors(two);
    e = config_errors(base + "receiver:\n  channels: 2\n");
    EXPECT_NE(e.find("receiver.channels: 2, but the source delivers one channel"), std::string::npos) << e;
    EXPECT_TRUE(config_errors(two + "pipeline:\n  backend: cuda\n").empty()) << config_errors(two + "pipeline:\n  backend: cuda\n");
    e = config_errors("source:\n  file: {path: a, channel: 1, second_channel: 2}\nreceiver:\n  channels: 2\n  combining: select\n"
                      "pipeline:\n  backend: cuda\n");
    EXPECT_NE(e.find("receiver.combining: select (each packet on one channel) runs on the cpu backend only"), std::string::npos) << e;
    e = config_errors(two + "pipeline:\n  backend: cuda\n  solver: cusolver-dn-chol\n");
    EXPECT_NE(e.find("pipeline.solver: cusolver-dn-chol solves one channel"), std::string::npos) << e;
    EXPECT_TRUE(config_errors(two + "pipeline:\n  backend: cpu\n  solver: cusolver-dn-chol\n").empty());
    e = config_errors(two + "recording:\n  path: r\n");
    EXPECT_NE(e.find("recording.path: the recorder writes one channel"), std::string::npos) << e;
    e = config_errors("source:\n  file: {path: a, channel: 1, second_channel: 2}\n");
    EXPECT_NE(e.find("source.file.second_channel: a second channel, but receiver.channels is 1"), std::string::npos) << e;
    e = config_errors("source:\n  file: {path: a, channel: 1, second_channel: 1}\nreceiver:\n  channels: 2\n");
    EXPECT_NE(e.find("must differ from source.file.channel"), std::string::npos) << e;
    EXPECT_TRUE(config_errors("source:\n  type: udp\n  udp: {port: 5000, sample_rate_hz: 25e6, channels: 2}\n"
                              "receiver:\n  channels: 2\n")
                    .empty());
    EXPECT_TRUE(config_errors("source:\n  type: iio\n  iio: {channels: 2}\nreceiver:\n  channels: 2\n").empty());
    e = config_errors("source:\n  type: tcp\n  tcp: {port: 5000, sample_rate_hz: 25e6, channels: 2}\n");
    EXPECT_NE(e.find("source.tcp.channels: 2, but receiver.channels is 1"), std::string::npos) << e;
    // Two VITA-49 streams: both ids named, different, and two receive channels.
    const std::string vita = "source:\n  type: vita49\n  vita49: {port: 4991, sample_rate_hz: 25e6, stream_id: 7, second_stream_id: 8}\n";
    EXPECT_TRUE(config_errors(vita + "receiver:\n  channels: 2\n").empty()) << config_errors(vita + "receiver:\n  channels: 2\n");
    e = config_errors(vita);
    EXPECT_NE(e.find("source.vita49.second_stream_id: a second channel, but receiver.channels is 1"), std::string::npos) << e;
    e = config_errors("source:\n  type: vita49\n  vita49: {port: 4991, sample_rate_hz: 25e6, second_stream_id: 8}\n"
                      "receiver:\n  channels: 2\n");
    EXPECT_NE(e.find("second_stream_id needs stream_id"), std::string::npos) << e;
    e = config_errors("source:\n  type: vita49\n  vita49: {port: 4991, sample_rate_hz: 25e6, stream_id: 8, second_stream_id: 8}\n"
                      "receiver:\n  channels: 2\n");
    EXPECT_NE(e.find("second_stream_id 8 is stream_id"), std::string::npos) << e;
    e = config_errors(base + "receiver:\n  channels: 3\n");
    EXPECT_NE(e.find("receiver.channels = 3 is out of range"), std::string::npos) << e;
    // A section that is no mapping is one message, not that plus its defaults' checks.
    e = config_errors("source: vita49\n");
    EXPECT_NE(e.find("'source' must be a mapping of field: value, got a scalar"), std::string::npos) << e;
    EXPECT_EQ(e.find("source.file.path"), std::string::npos) << e;
    // Several problems are reported together.
    e = config_errors(base + "ring:\n  capacity_s: 0\n  overflow: x\n");
    EXPECT_NE(e.find("capacity_s"), std::string::npos);
    EXPECT_NE(e.find("overflow"), std::string::npos);
}

TEST(daemon_config, auto_overflow_blocks_for_files_and_drops_for_live_sources)
{
    config::daemon_config c;
    c.source.type = config::source_type::file;
    EXPECT_EQ(daemon::overflow_for(c), io::overflow_policy::block);
    c.source.type = config::source_type::vita49;
    EXPECT_EQ(daemon::overflow_for(c), io::overflow_policy::drop);
    c.ring.overflow = config::ring_overflow::block;
    EXPECT_EQ(daemon::overflow_for(c), io::overflow_policy::block);
}

// --------------------------------------------------------------------------------- pipeline

namespace {

/// A scripted source: samples in chunks, gaps and pauses at given positions.
class scripted_source final : public io::sample_source {
public:
    struct step {
        std::size_t from = 0, to = 0;         ///< samples [from, to) of `data`
        std::uint64_t gap_before = 0;         ///< report a gap of this many samples first
        bool gap = false;
        std::chrono::milliseconds pause{0};   ///< wait before the step
    };
    scripted_source(std::vector<cf32> data, std::vector<step> steps) : data_(std::move(data)), steps_(std::move(steps)) {}
    std::string describe() const override { return "scripted"; }
    double sample_rate_hz() const override { return 20.625e6; }
    void run(io::sample_sink& sink) override
    {
        for (const auto& s : steps_) {
            if (s.pause.count()) {
                const auto until = std::chrono::steady_clock::now() + s.pause;
                while (!stop_ && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(5ms);
            }
            if (stop_) return;
            if (s.gap) sink.gap(s.gap_before, io::gap_reason::lost_packets);
            for (std::size_t p = s.from; p < s.to && !stop_; p += 50'000) {
                const std::size_t n = std::min<std::size_t>(50'000, s.to - p);
                sink.write(std::span<const cf32>(data_.data() + p, n));
                counters_.samples += n;
                if (slow_) std::this_thread::sleep_for(slow_per_chunk_);
            }
        }
    }
    void stop() override { stop_ = true; }
    void slow(std::chrono::milliseconds per_chunk)
    {
        slow_ = true;
        slow_per_chunk_ = per_chunk;
    }

private:
    std::vector<cf32> data_;
    std::vector<step> steps_;
    std::atomic<bool> stop_{false};
    bool slow_ = false;
    std::chrono::milliseconds slow_per_chunk_{0};
};

/// A backend that fails on chosen batches (a GPU fault, say), and the CPU chain otherwise.
class failing_backend final : public dsp::batch_processor {
public:
    failing_backend(const dsp::receiver_config& rc, std::set<std::uint64_t> fail) : cpu_(rc), fail_(std::move(fail)) {}
    using dsp::batch_processor::process;
    void process(const dsp::sample_batch& b, dsp::batch_output& out) override
    {
        if (fail_.count(b.index)) throw std::runtime_error("injected device fault");
        cpu_.process(b, out);
    }
    std::string name() const override { return "failing"; }

private:
    dsp::cpu_backend cpu_;
    std::set<std::uint64_t> fail_;
};

struct live_result {
    daemon::pipeline_stats stats;
    std::vector<dsp::batch_output> published;
};

live_result run_pipeline(io::sample_source& src, const dsp::receiver_config& rc,
                         std::vector<std::unique_ptr<dsp::batch_processor>> workers,
                         daemon::pipeline::backend_factory fallback = {}, std::chrono::milliseconds stall = 2000ms,
                         std::function<void(daemon::pipeline&)> during = {})
{
    io::sample_ring ring(1'000'000, io::overflow_policy::block, io::host_ring_allocator(false));
    daemon::pipeline_options po;
    po.receiver = rc;
    po.sample_rate_hz = 20.625e6;
    po.stall_timeout = stall;
    live_result res;
    daemon::pipeline p(po, src, ring, std::move(workers), std::move(fallback),
                       [&](const dsp::batch_output& out) { res.published.push_back(out); });
    p.start();
    if (during) during(p);
    p.join();
    res.stats = p.stats();
    return res;
}

std::vector<std::unique_ptr<dsp::batch_processor>> cpu_workers(const dsp::receiver_config& rc, int n)
{
    std::vector<std::unique_ptr<dsp::batch_processor>> w;
    for (int i = 0; i < n; ++i) w.push_back(std::make_unique<dsp::cpu_backend>(rc));
    return w;
}

}  // namespace

TEST(pipeline, equals_the_offline_chain_with_several_workers_and_publishes_in_order)
{
    sim::sim_config sc;
    sc.preset = "edwards3";
    sc.ebn0_db = 12.0;
    sc.cfo_hz = 30e3;
    sc.seed = 4101;
    const auto sim = test::simulate(sc, 60);
    auto rc = test::small_batches();
    rc.cpu_threads = 1;
    const auto offline = test::run_chain(sim.samples, rc);

    scripted_source src(sim.samples, {{0, sim.samples.size()}});
    const auto live = run_pipeline(src, rc, cpu_workers(rc, 3));
    ASSERT_GT(live.published.size(), 3u);
    for (std::size_t i = 0; i < live.published.size(); ++i) EXPECT_EQ(live.published[i].batch_index, i);
    const auto& t = live.stats.tally;
    EXPECT_EQ(live.stats.samples_in, sim.samples.size());
    EXPECT_EQ(t.packets_found, offline.packets_found);
    for (int p = 0; p < dsp::chain::num_paths; ++p) {
        EXPECT_EQ(t.paths[p].bit_errors, offline.paths[p].bit_errors) << dsp::path_name(p);
        EXPECT_EQ(t.paths[p].bits_checked, offline.paths[p].bits_checked) << dsp::path_name(p);
    }
    EXPECT_EQ(live.stats.batches_published, live.stats.batches_dispatched);
    EXPECT_EQ(live.stats.batches_lost, 0u);
    EXPECT_GT(live.stats.latency_max_ms, 0.0);
}

TEST(pipeline, a_gap_and_a_stall_end_the_segment_and_are_counted)
{
    sim::sim_config sc;
    sc.ebn0_db = 15.0;
    sc.seed = 4102;
    sc.start_offset_samples = 0;
    const auto sim = test::simulate(sc, 30);
    auto rc = test::small_batches();
    rc.cpu_threads = 1;
    const std::size_t a = 10 * waveform::L_pkt + 4000, b = 20 * waveform::L_pkt + 7000;
    // Samples [0, a), a gap of 5000 lost samples (the source says so), [a + 5000, b), then
    // 600 ms without samples (stall timeout 200 ms), then the rest.
    scripted_source src(sim.samples, {{0, a},
                                      {a + 5000, b, 5000, true},
                                      {b, sim.samples.size(), 0, false, 600ms}});
    const auto live = run_pipeline(src, rc, cpu_workers(rc, 1), {}, 200ms);
    const auto& s = live.stats;
    EXPECT_EQ(s.gaps, 2u) << "the source's gap and the stall";
    EXPECT_EQ(s.gaps_by_reason[static_cast<std::size_t>(io::gap_reason::lost_packets)], 1u);
    EXPECT_EQ(s.gaps_by_reason[static_cast<std::size_t>(io::gap_reason::stall)], 1u);
    EXPECT_EQ(s.samples_lost_in_gaps, 5000u);
    EXPECT_EQ(s.stalls, 1u);
    EXPECT_EQ(s.samples_in, sim.samples.size() - 5000);
    // The packets cut by the gap (one at a, one at a + 5000 at most) and by the stall's
    // segment end (one) are truncated, never decoded across the cut.
    std::size_t expect_found = 0;
    for (auto st : sim.truth.packet_starts) {
        const bool whole_before_a = st + waveform::L_pkt <= a;
        const bool whole_in_second = st >= a + 5000 + 258 && st + waveform::L_pkt <= b;
        const bool whole_after_b = st >= b + 258 && st + waveform::L_pkt <= sim.samples.size();
        if ((st >= 258 && whole_before_a) || whole_in_second || whole_after_b) ++expect_found;
    }
    EXPECT_NEAR(static_cast<double>(s.tally.packets_found), static_cast<double>(expect_found), 1.0);
    EXPECT_GE(s.tally.packets_truncated, 2u);
    // No packet spans a cut: every data bit decoded is right (noise is low, 15 dB AWGN).
    EXPECT_EQ(s.tally.paths[2].bit_errors, 0u);
}

/// A source that keeps delivering after it is told to stop (a driver handing over the blocks
/// it had buffered, say): `chunks` writes of 50,000 samples whatever stop() says.
class stubborn_source final : public io::sample_source {
public:
    stubborn_source(std::vector<cf32> data, int chunks) : data_(std::move(data)), chunks_(chunks) {}
    std::string describe() const override { return "stubborn"; }
    double sample_rate_hz() const override { return 20.625e6; }
    void run(io::sample_sink& sink) override
    {
        std::size_t at = 0;
        for (int c = 0; c < chunks_; ++c) {
            const std::size_t n = 50'000;
            if (at + n > data_.size()) at = 0;
            sink.write(std::span<const cf32>(data_.data() + at, n));
            at += n;
            counters_.samples += n;
        }
    }
    void stop() override {}

private:
    std::vector<cf32> data_;
    int chunks_;
};

// An abort (a second signal) while the source still delivers: what it delivers after that is
// refused by the ring and counted, so every sample the source delivered is in the batcher's
// count, the ring's drops or refusals, or still in the ring.
TEST(pipeline, an_abort_counts_the_samples_the_source_delivers_after_it)
{
    sim::sim_config sc;
    sc.ebn0_db = 15.0;
    sc.seed = 4141;
    const auto sim = test::simulate(sc, 30);
    auto rc = test::small_batches();
    rc.cpu_threads = 1;
    stubborn_source src(sim.samples, 120);  // 6 M samples: more than the 1 M ring and a few batches hold
    const auto live = run_pipeline(src, rc, cpu_workers(rc, 1), {}, 2000ms, [&](daemon::pipeline& p) {
        while (src.counters().samples.load() < 500'000) std::this_thread::sleep_for(1ms);  // within the ring
        p.abort();
    });
    const auto& s = live.stats;
    EXPECT_EQ(src.counters().samples.load(), 120u * 50'000u);
    EXPECT_GT(s.ring.samples_refused, 0u);
    EXPECT_EQ(s.ring.samples_dropped, 0u) << "block policy";
    EXPECT_EQ(src.counters().samples.load(), s.samples_in + s.ring.samples_dropped + s.ring.samples_refused + s.ring.fill);
}

TEST(pipeline, a_failing_backend_falls_back_to_the_cpu_and_without_fallback_the_loss_is_counted)
{
    sim::sim_config sc;
    sc.ebn0_db = 15.0;
    sc.seed = 4103;
    const auto sim = test::simulate(sc, 30);
    auto rc = test::small_batches();
    rc.cpu_threads = 1;
    {
        std::vector<std::unique_ptr<dsp::batch_processor>> w;
        w.push_back(std::make_unique<failing_backend>(rc, std::set<std::uint64_t>{1}));
        scripted_source src(sim.samples, {{0, sim.samples.size()}});
        const auto live = run_pipeline(src, rc, std::move(w), [rc] { return std::make_unique<dsp::cpu_backend>(rc); });
        EXPECT_EQ(live.stats.backend_errors, 1u);
        EXPECT_EQ(live.stats.batches_on_fallback, 1u);
        EXPECT_EQ(live.stats.batches_lost, 0u);
        EXPECT_EQ(live.stats.tally.packets_found, test::run_chain(sim.samples, rc).packets_found);
    }
    {
        std::vector<std::unique_ptr<dsp::batch_processor>> w;
        w.push_back(std::make_unique<failing_backend>(rc, std::set<std::uint64_t>{0, 1}));
        scripted_source src(sim.samples, {{0, sim.samples.size()}});
        const auto live = run_pipeline(src, rc, std::move(w));
        EXPECT_EQ(live.stats.backend_errors, 2u);
        EXPECT_EQ(live.stats.batches_lost, 2u);
        EXPECT_EQ(live.stats.samples_in_lost_batches, 2 * rc.batch_samples);
        // The batches after the lost ones are still published, in order.
        EXPECT_EQ(live.stats.batches_published + 2, live.stats.batches_dispatched);
        for (std::size_t i = 1; i < live.published.size(); ++i) {
            EXPECT_GT(live.published[i].batch_index, live.published[i - 1].batch_index);
        }
    }
}

TEST(pipeline, stop_mid_run_publishes_what_was_received)
{
    sim::sim_config sc;
    sc.ebn0_db = 15.0;
    sc.seed = 4104;
    const auto sim = test::simulate(sc, 60);
    auto rc = test::small_batches();
    rc.cpu_threads = 1;
    scripted_source src(sim.samples, {{0, sim.samples.size()}});
    src.slow(20ms);  // 50k samples per 20 ms: the stop lands mid-stream
    const auto live = run_pipeline(src, rc, cpu_workers(rc, 1), {}, 2000ms, [](daemon::pipeline& p) {
        std::this_thread::sleep_for(150ms);
        p.request_stop();
    });
    const auto& s = live.stats;
    EXPECT_GT(s.samples_in, 0u);
    EXPECT_LT(s.samples_in, sim.samples.size());
    // Everything that came in was batched and published; nothing was lost.
    EXPECT_EQ(s.batches_published, s.batches_dispatched);
    EXPECT_EQ(s.batches_lost, 0u);
    EXPECT_GT(s.tally.packets_found, 0u);
    EXPECT_TRUE(s.finished);
}

TEST(pipeline, file_source_paced_keeps_to_the_recorded_rate)
{
    sim::sim_config sc;
    sc.ebn0_db = 15.0;
    sc.seed = 4105;
    const auto sim = test::simulate(sc, 40);  // ~0.025 s at 20.6 MS/s
    const auto dir = std::filesystem::temp_directory_path() / ("paq-daemon-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    write_recording(dir / "rec", 20.625e6, sim.samples);
    io::file_source_config fc;
    fc.path = dir / "rec.sigmf-meta";
    fc.rate_factor = 0.1;  // 10x slower than real time: ~0.25 s
    fc.chunk_samples = 8192;
    io::file_source src(fc);
    auto rc = test::small_batches();
    rc.cpu_threads = 1;
    const auto t0 = std::chrono::steady_clock::now();
    const auto live = run_pipeline(src, rc, cpu_workers(rc, 1));
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double expected = static_cast<double>(sim.samples.size()) / (20.625e6 * 0.1);
    EXPECT_GE(elapsed, expected * 0.95);
    EXPECT_EQ(live.stats.samples_in, sim.samples.size());
    EXPECT_EQ(src.counters().samples.load(), sim.samples.size());
    EXPECT_EQ(live.stats.tally.packets_found, test::run_chain(sim.samples, rc).packets_found);
    std::filesystem::remove_all(dir);
}

TEST(pipeline, a_missing_file_is_a_clear_error_before_anything_starts)
{
    config::source_config sc;
    sc.file.path = "/nonexistent/rec.sigmf-meta";
    try {
        (void)daemon::make_source(sc);
        FAIL();
    } catch (const std::exception& e) {
        EXPECT_NE(std::string(e.what()).find("/nonexistent/rec.sigmf-meta"), std::string::npos) << e.what();
    }
}

TEST(counters, the_status_line_shows_counters_ber_and_latency)
{
    runtime::service_snapshot snap;
    snap.ring.emplace();
    snap.ring->samples_dropped = 7;
    auto& s = snap.engine;
    s.samples_in = 41'250'000;
    s.gaps = 2;
    s.batches_published = 3;
    s.packets_last_batch = 3104;
    s.tally.packets_found = 9312;
    s.latency_last_ms = 512;
    s.latency_max_ms = 700;
    for (int p = 0; p < dsp::chain::num_paths; ++p) {
        s.tally.paths[p].name = dsp::path_name(p);
        s.tally.paths[p].locked = p != 0;
        s.tally.paths[p].bits_checked = 1'000'000;
        s.tally.paths[p].ber = 1e-3 * (p + 1);
    }
    const auto line = runtime::status_line(snap, nullptr, 1.0);
    EXPECT_NE(line.find("drop 7"), std::string::npos) << line;
    EXPECT_NE(line.find("gaps 2"), std::string::npos) << line;
    EXPECT_NE(line.find("pkts 3104/batch"), std::string::npos) << line;
    EXPECT_NE(line.find("none nolock"), std::string::npos) << line;
    EXPECT_NE(line.find("mmse 3.0e-03"), std::string::npos) << line;
    EXPECT_NE(line.find("latency 512 ms (max 700)"), std::string::npos) << line;
}

TEST(counters, every_counter_has_one_name_in_the_metrics_the_json_and_the_final_log)
{
    // Every output is made from the registry: each counter present in one is present in all,
    // under the same name, with the same value; names are unique.
    runtime::service_snapshot snap;
    snap.ring.emplace();  // a live service's: its ring and its source
    snap.source = runtime::service_snapshot::source_values{};
    snap.engine.samples_in = 123;
    snap.engine.samples_in_lost_batches = 4567;  // once missing from the metrics
    snap.engine.tally.packets_skipped = 9;       // once three names
    snap.source->refused = 3;
    // Every kind's own counters, as the sources list them (a running service has one kind's).
    for (const auto& kind : daemon::kinds_with_counters()) {
        for (const auto& c : kind.counters) snap.source_kind.push_back({&c, 0.0});
    }
    auto kind_value = [&](std::string_view name, double v) {
        for (auto& k : snap.source_kind) {
            if (name == k.counter->name) return void(k.value = v);
        }
        ADD_FAILURE() << "no kind counter " << name;
    };
    kind_value("vita49_count_mismatches", 2);
    kind_value("tcp_idle_timeouts", 5);
    kind_value("tcp_busy_refused", 6);
    kind_value("tcp_takeovers", 7);
    kind_value("udp_resyncs", 2);
    kind_value("zmq_resyncs", 3);
    snap.publisher = runtime::service_snapshot::publisher_values{};
    snap.publisher->send_errors[2] = 5;
    snap.publisher->send_errors[4] = 6;
    snap.publisher->soft = true;  // soft streams (publisher.llr_destinations)
    snap.publisher->llr_datagrams_sent = 7;
    snap.publisher->llr_send_errors = 2;
    snap.publisher->decoded = true;  // decoded streams (publisher.decoded_destinations)
    snap.publisher->decoded_datagrams_sent = 9;
    snap.publisher->best = true;  // the best-path stream (publisher.best_destination)
    snap.publisher->best_datagrams_sent = 11;
    snap.records = runtime::service_snapshot::records_values{10, 1};
    snap.recording = runtime::service_snapshot::recording_values{1000, 0};
    for (int p = 0; p < dsp::chain::num_paths; ++p) snap.engine.tally.paths[p].bit_errors = 100u + static_cast<unsigned>(p);
    snap.engine.fec = true;  // a coded link: the per-path fec_ counters
    snap.engine.tally.paths[2].fec = {30, 1, 150, 29 * 2048, 700};
    snap.engine.receive_channels = 2;  // two receive channels: the per-channel counters
    snap.engine.tally.packets_best_channel = {40, 2};

    const auto prom = runtime::render_prometheus(snap);
    const auto j = runtime::to_json(snap);
    std::string log;
    for (const auto& l : runtime::final_log_lines(snap)) log += l + "\n";
    std::set<std::string> names;
    for (const auto& m : runtime::scalar_metrics()) {
        EXPECT_TRUE(names.insert(m.name).second) << "two counters named " << m.name;
        const std::string prom_name = runtime::prometheus_name(m);
        EXPECT_NE(prom.find("\n" + prom_name + " "), std::string::npos) << prom_name;
        ASSERT_TRUE(j.contains(m.name)) << m.name;
        EXPECT_NE(log.find(std::string(" ") + m.name + "="), std::string::npos) << m.name;
    }
    for (const auto& k : snap.source_kind) {
        const std::string name = k.counter->name;
        EXPECT_TRUE(names.insert(name).second) << "two counters named " << name;
        const std::string prom_name = "paqd_" + name + (k.counter->gauge ? "" : "_total");
        EXPECT_NE(prom.find("\n" + prom_name + " "), std::string::npos) << prom_name;
        ASSERT_TRUE(j.contains(name)) << name;
        EXPECT_NE(log.find(" " + name + "="), std::string::npos) << name;
        EXPECT_NE(runtime::counters_markdown(daemon::kinds_with_counters()).find("| `" + name + "` | `" + prom_name + "` |"), std::string::npos) << name;
    }
    for (const auto& m : runtime::path_metrics()) {
        const std::string prom_name = runtime::prometheus_name(m);
        EXPECT_NE(prom.find(prom_name + "{path=\"mmse\"} "), std::string::npos) << prom_name;
        EXPECT_TRUE(j["paths"][2].contains(m.name)) << m.name;
    }
    EXPECT_EQ(j["samples_in_lost_batches"], 4567);
    EXPECT_NE(prom.find("paqd_samples_in_lost_batches_total 4567\n"), std::string::npos);
    EXPECT_NE(log.find(" samples_in_lost_batches=4567"), std::string::npos);
    EXPECT_EQ(j["packets_missed_in_sequence"], 9);
    EXPECT_NE(prom.find("paqd_packets_missed_in_sequence_total 9\n"), std::string::npos);
    EXPECT_EQ(j["send_errors"], 11);
    EXPECT_EQ(j["paths"][4]["send_errors"], 6);
    EXPECT_NE(prom.find("paqd_path_send_errors_total{path=\"fde1\"} 6\n"), std::string::npos);
    EXPECT_EQ(j["paths"][5]["bit_errors"], 105);
    EXPECT_EQ(j["vita49_count_mismatches"], 2);
    EXPECT_EQ(j["udp_resyncs"], 2);
    EXPECT_EQ(j["tcp_idle_timeouts"], 5);
    EXPECT_EQ(j["tcp_busy_refused"], 6);
    EXPECT_EQ(j["tcp_takeovers"], 7);
    EXPECT_NE(prom.find("paqd_tcp_idle_timeouts_total 5\n"), std::string::npos);
    EXPECT_EQ(j["zmq_resyncs"], 3);
    EXPECT_NE(prom.find("paqd_udp_resyncs_total 2\n"), std::string::npos);
    EXPECT_EQ(j["gaps_by_reason"]["stall"], 0);
    EXPECT_NE(prom.find("paqd_gaps_by_reason_total{reason=\"stall\"} 0\n"), std::string::npos);
    EXPECT_DOUBLE_EQ(runtime::value_of(snap, "record_rows_lost"), 1.0);
    // A counter that does not apply is absent everywhere: no VITA-49 source, no publisher,
    // no pattern (then no PN counts).
    std::erase_if(snap.source_kind, [](const io::source_counter_value& k) { return std::string_view(k.counter->name).starts_with("vita49_"); });
    snap.publisher.reset();
    snap.have_pattern = false;
    const auto prom2 = runtime::render_prometheus(snap);
    const auto j2 = runtime::to_json(snap);
    EXPECT_EQ(prom2.find("vita49"), std::string::npos);
    EXPECT_EQ(prom2.find("send_errors"), std::string::npos);
    EXPECT_EQ(prom2.find("paqd_path_bit_errors_total"), std::string::npos);
    EXPECT_EQ(prom2.find("paqd_path_checked_bit_count_total"), std::string::npos);
    EXPECT_FALSE(j2.contains("vita49_count_mismatches"));
    EXPECT_FALSE(j2["paths"][0].contains("bit_errors"));
    EXPECT_TRUE(j2["paths"][0].contains("mean_bep_estimate"));
    EXPECT_THROW((void)runtime::value_of(snap, "send_errors"), std::out_of_range);
    EXPECT_THROW((void)runtime::value_of(snap, "no_such_counter"), std::out_of_range);
}

TEST(counters, the_exposition_has_a_cumulative_latency_histogram_build_info_and_window_sums)
{
    // The text a scrape gets, parsed line by line: every family declared once (HELP, TYPE),
    // the latency histogram's buckets cumulative and monotone up to +Inf, _count equal to the
    // +Inf bucket, paqd_build_info present, and the sums a windowed mean is taken from.
    runtime::service_snapshot snap;
    snap.engine.batches_published = 10;
    // 2 batches <= 5 ms, 3 <= 0.25 s, 4 <= 1 s, 1 above the last bound (only in +Inf)
    snap.engine.latency_buckets[2] = 2;
    snap.engine.latency_buckets[7] = 3;
    snap.engine.latency_buckets[9] = 4;
    snap.engine.latency_sum_s = 17.5;
    snap.engine.tally.packets_found = 4;
    snap.engine.tally.ebn0_linear_sum = 40.0;
    snap.engine.tally.cfo_hz_sum = -2000.0;
    snap.engine.tally.paths[2].bep_estimate_sum = 0.004;
    snap.publisher = runtime::service_snapshot::publisher_values{};
    snap.publisher->send_errors[4] = 3;
    const auto prom = runtime::render_prometheus(snap);

    std::map<std::string, std::string> types;
    std::vector<std::pair<double, double>> buckets;  // le, count
    double count = -1, sum = -1;
    std::istringstream in(prom);
    std::string line;
    while (std::getline(in, line)) {
        ASSERT_FALSE(line.empty());
        if (line.starts_with("# TYPE ")) {
            std::istringstream t(line.substr(7));
            std::string name, type;
            t >> name >> type;
            EXPECT_TRUE(types.emplace(name, type).second) << "declared twice: " << name;
            continue;
        }
        if (line.starts_with("#")) continue;
        const auto sp = line.rfind(' ');
        const std::string series = line.substr(0, sp);
        const double v = std::stod(line.substr(sp + 1));
        const std::string family = series.substr(0, series.find('{'));
        if (family == "paqd_batch_latency_seconds_bucket") {
            const auto le = series.substr(series.find("le=\"") + 4, series.find("\"}") - series.find("le=\"") - 4);
            buckets.emplace_back(le == "+Inf" ? std::numeric_limits<double>::infinity() : std::stod(le), v);
        } else if (family == "paqd_batch_latency_seconds_count") {
            count = v;
        } else if (family == "paqd_batch_latency_seconds_sum") {
            sum = v;
        } else {
            EXPECT_TRUE(types.contains(family)) << "no TYPE before " << family;
        }
    }
    EXPECT_EQ(types["paqd_batch_latency_seconds"], "histogram");
    ASSERT_EQ(buckets.size(), daemon::latency_bucket_bounds_s.size() + 1);
    // The CPU backend's default batch (25-72 s of latency measured) lands in a finite bucket.
    EXPECT_GE(daemon::latency_bucket_bounds_s.back(), 72.0);
    for (std::size_t k = 1; k < buckets.size(); ++k) {
        EXPECT_GT(buckets[k].first, buckets[k - 1].first) << "le not increasing at " << k;
        EXPECT_GE(buckets[k].second, buckets[k - 1].second) << "not cumulative at le=" << buckets[k].first;
    }
    EXPECT_TRUE(std::isinf(buckets.back().first));
    EXPECT_DOUBLE_EQ(buckets.back().second, count);
    EXPECT_DOUBLE_EQ(count, 10.0);
    EXPECT_DOUBLE_EQ(sum, 17.5);
    EXPECT_DOUBLE_EQ(buckets[1].second, 0.0);  // le=0.0025
    EXPECT_DOUBLE_EQ(buckets[2].second, 2.0);  // le=0.005
    EXPECT_DOUBLE_EQ(buckets[7].second, 5.0);  // le=0.25
    EXPECT_DOUBLE_EQ(buckets[12].second, 9.0); // le=10
    EXPECT_NE(prom.find("paqd_batch_latency_seconds_bucket{le=\"0.001\"} 0\n"), std::string::npos);

    EXPECT_EQ(types["paqd_build_info"], "gauge");
    const auto b = runtime::build_info();
    EXPECT_FALSE(b.version.empty());
    EXPECT_FALSE(b.commit.empty());
    EXPECT_NE(prom.find("paqd_build_info{version=\"" + b.version + "\",commit=\"" + b.commit + "\",cuda=\"" +
                        (b.cuda ? "yes" : "no") + "\"} 1\n"),
              std::string::npos)
        << prom;

    EXPECT_EQ(types["paqd_ebn0_linear_sum_total"], "counter");
    EXPECT_NE(prom.find("paqd_ebn0_linear_sum_total 40\n"), std::string::npos);
    EXPECT_EQ(types["paqd_cfo_sum_hz"], "gauge");  // signed: may go down
    EXPECT_NE(prom.find("paqd_cfo_sum_hz -2000\n"), std::string::npos);
    EXPECT_NE(prom.find("paqd_path_bep_estimate_sum_total{path=\"mmse\"} 0.004"), std::string::npos);
    EXPECT_NE(prom.find("paqd_path_send_errors_total{path=\"fde1\"} 3\n"), std::string::npos) << "per-stream send errors";

    // The JSON and the final log carry the same histogram and build.
    const auto j = runtime::to_json(snap);
    EXPECT_EQ(j["batch_latency_seconds"]["count"], 10);
    EXPECT_EQ(j["batch_latency_seconds"]["counts"][7], 5);
    EXPECT_EQ(j["build_info"]["version"], b.version);
    std::string log;
    for (const auto& l : runtime::final_log_lines(snap)) log += l + "\n";
    EXPECT_NE(log.find("batch_latency_seconds: count=10 sum=17.5 le0.001=0"), std::string::npos) << log;
    EXPECT_NE(log.find("build: version=" + b.version), std::string::npos) << log;
}

TEST(counters, daemon_md_lists_the_registry)
{
    // docs/DAEMON.md's counter table is the registry's (daemon::counters_markdown), between
    // its markers; regenerate it from the printed text when a counter changes.
    std::ifstream f(std::string(PAQ_TEST_DATA_DIR) + "/../../docs/DAEMON.md");
    ASSERT_TRUE(f) << "docs/DAEMON.md not found";
    const std::string doc((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    const std::string begin = "<!-- counters:begin (generated: runtime::counters_markdown) -->\n", end = "<!-- counters:end -->";
    const auto b = doc.find(begin), e = doc.find(end);
    ASSERT_NE(b, std::string::npos);
    ASSERT_NE(e, std::string::npos);
    const std::string table = runtime::counters_markdown(daemon::kinds_with_counters());
    EXPECT_EQ(doc.substr(b + begin.size(), e - b - begin.size()), table) << "the table should read:\n" << table;
}

// The live pipeline's windows (the engine's window pool) are page-locked once each, before any
// batch in them reaches a backend (the uploads then run at full speed), and unlocked only once
// the pipeline is gone; a few windows circulate. Counted in windows / windows_locked.
TEST(pipeline, locks_each_window_once_and_unlocks_at_the_end)
{
    sim::sim_config sc;
    sc.preset = "awgn";
    sc.ebn0_db = 10.0;
    sc.seed = 4107;
    const auto sim = test::simulate(sc, 140);
    auto rc = test::small_batches();
    rc.cpu_threads = 1;
    std::vector<std::unique_ptr<dsp::batch_processor>> w;
    auto backend = std::make_unique<test::pinning_backend>(rc);
    auto* be = backend.get();
    w.push_back(std::move(backend));
    std::vector<std::weak_ptr<void>> pins;
    std::size_t unpinned = 0, batches = 0;
    {
        scripted_source src(sim.samples, {{0, sim.samples.size()}});
        io::sample_ring ring(1'000'000, io::overflow_policy::block, io::host_ring_allocator(false));
        daemon::pipeline_options po;
        po.receiver = rc;
        po.sample_rate_hz = 20.625e6;
        daemon::pipeline p(po, src, ring, std::move(w), {}, [](const dsp::batch_output&) {});
        p.start();
        p.join();
        const auto st = p.stats();
        {
            std::lock_guard lk(be->mu);
            pins = be->handles();
            unpinned = be->unpinned;
            batches = be->batches;
            for (const auto& pin : be->pins) EXPECT_GE(pin.bytes, 1u);
        }
        EXPECT_GT(batches, 8u);
        EXPECT_EQ(unpinned, 0u);
        EXPECT_GE(pins.size(), 2u);
        EXPECT_LE(pins.size(), 8u);
        EXPECT_EQ(st.windows, pins.size());
        EXPECT_EQ(st.windows_locked, pins.size());
        for (const auto& h : pins) EXPECT_FALSE(h.expired()) << "a window was unlocked while the pipeline lives";
    }
    for (const auto& h : pins) EXPECT_TRUE(h.expired());
}

// ------------------------------------------------------------------------------------- time
// Absolute time from the source's anchors, through the ring and the batcher
// into the windows, onto each packet (docs/DAEMON.md, "Time").

TEST(time, anchors_travel_through_the_ring_with_their_sample)
{
    auto ring = make_ring(1000, io::overflow_policy::drop);
    io::ring_sink sink(ring);
    // An anchor for the next write's first sample, one for sample 30 of a later write.
    sink.timestamp({0, 1'000'000'000});
    sink.write(ramp(100));
    sink.timestamp({130, 2'000'000'000});
    sink.write(ramp(100, 100.0f));
    std::vector<cf32> buf(60);
    auto r = ring.read(buf, 10ms);
    ASSERT_EQ(r.what, io::sample_ring::read_result::kind::samples);
    ASSERT_TRUE(r.time);
    EXPECT_EQ(r.time->offset, 0u);
    EXPECT_EQ(r.time->utc_ns, 1'000'000'000);
    r = ring.read(buf, 10ms);  // samples 60 .. 119: no anchor among them
    EXPECT_FALSE(r.time);
    buf.resize(200);
    r = ring.read(buf, 10ms);  // 120 .. 199: the anchor of sample 130
    ASSERT_EQ(r.count, 80u);
    ASSERT_TRUE(r.time);
    EXPECT_EQ(r.time->offset, 10u);
    EXPECT_EQ(r.time->utc_ns, 2'000'000'000);
    // Overflow: an anchor whose sample is dropped goes with it (counted); the gap before the
    // next samples has an exact count, so time carries on from the anchors the reader has.
    auto small = make_ring(50, io::overflow_policy::drop);
    io::ring_sink s2(small);
    s2.write(ramp(50));
    s2.timestamp({50, 7});
    s2.write(ramp(10));  // dropped, and its anchor
    buf.resize(100);
    r = small.read(buf, 10ms);
    EXPECT_EQ(r.count, 50u);
    EXPECT_FALSE(r.time);
    s2.timestamp({60, 8});
    s2.write(ramp(5));
    r = small.read(buf, 10ms);
    ASSERT_EQ(r.what, io::sample_ring::read_result::kind::gap);
    EXPECT_EQ(r.lost_samples, 10u);
    r = small.read(buf, 10ms);
    ASSERT_TRUE(r.time);
    EXPECT_EQ(r.time->utc_ns, 8);
    EXPECT_EQ(small.counters().anchors_dropped, 1u);
    EXPECT_EQ(small.counters().anchors, 1u);
}

// A gap flood merged by the ring (drop policy, markers full) that holds a gap of unknown size
// among gaps of known size: the merged count is no exact count, so the consumer must not carry
// time across it. The ring places the known sum, then a gap of 0 (unknown) of that reason; the
// batcher, fed as the pipeline feeds it, cuts the windows after the flood without time.
TEST(time, a_merged_gap_flood_with_an_unknown_gap_does_not_carry_time)
{
    io::sample_ring ring(100'000, io::overflow_policy::drop, io::host_ring_allocator(false), 8);
    const auto x = ramp(30'000);
    ring.timestamp(1'000'000'000, 0);
    ring.write(x);
    for (int k = 0; k < 20; ++k) {
        ring.gap(k == 10 ? 0 : 7, io::gap_reason::lost_packets);  // the 11th: count unknown
        ring.write(ramp(1));
    }
    std::vector<cf32> buf(100'000);
    dsp::batcher bt(10'000);
    using kind = io::sample_ring::read_result::kind;
    std::vector<std::pair<std::uint64_t, std::string>> gaps;  // (lost, reason) in order
    bool drained = false;
    for (;;) {
        const auto r = ring.read(buf, 10ms);
        if (r.what == kind::end) break;
        if (r.what == kind::timeout) {
            ASSERT_FALSE(drained) << "the ring never ended";
            // The consumer has drained the flood's markers: samples after it end the merge,
            // then the end of the stream.
            ring.write(std::span<const cf32>(x).first(25'000));
            ring.close();
            drained = true;
            continue;
        }
        if (r.what == kind::gap) {
            gaps.emplace_back(r.lost_samples, std::string(io::to_string(r.reason)));
            bt.gap(r.lost_samples);
            continue;
        }
        if (r.time) bt.timestamp(r.time->utc_ns, 25e6, r.time->offset);
        bt.push(std::span<const cf32>(buf.data(), r.count));
    }
    bt.finish();
    // Some gaps went in as markers, the rest merged: the merged lost-packets marker (a sum of
    // sevens) is followed at once by a lost-packets gap of 0.
    ASSERT_GE(gaps.size(), 2u);
    bool unknown_after_sum = false;
    for (std::size_t i = 0; i + 1 < gaps.size(); ++i) {
        if (gaps[i].second == "lost-packets" && gaps[i].first > 7 && gaps[i + 1] == std::pair<std::uint64_t, std::string>{0, "lost-packets"}) {
            unknown_after_sum = true;
        }
    }
    EXPECT_TRUE(unknown_after_sum) << "no gap of 0 after the merged sum";
    std::uint64_t lost_packets = 0;
    for (const auto& [lost, reason] : gaps) lost_packets += reason == "lost-packets" ? lost : 0;
    EXPECT_EQ(lost_packets, 7u * 19u);  // the known counts kept exact
    std::size_t timed = 0, untimed_after = 0;
    while (auto b = bt.pop()) {
        if (b->first_sample < 30'000) {
            ASSERT_TRUE(b->time);
            EXPECT_EQ(dsp::utc_ns_at(*b->time, b->first_sample), 1'000'000'000 + static_cast<std::int64_t>(b->first_sample) * 40);
            ++timed;
        } else {
            EXPECT_FALSE(b->time) << "window at " << b->first_sample << " after an uncountable gap has a time";
            ++untimed_after;
        }
    }
    EXPECT_GE(timed, 1u);
    EXPECT_GE(untimed_after, 1u);
}

TEST(time, utc_text_round_trips_and_impossible_dates_are_refused)
{
    EXPECT_EQ(io::parse_utc_ns("1970-01-01T00:00:00Z"), 0);
    EXPECT_EQ(io::parse_utc_ns("2026-11-25T10:47:40.123456789Z"), 1'795'603'660'123'456'789);
    EXPECT_EQ(io::format_utc_ns(1'795'603'660'123'456'789), "2026-11-25T10:47:40.123456789Z");
    EXPECT_EQ(io::parse_utc_ns("2024-02-29T00:00:00Z"), 1'709'164'800'000'000'000);  // a leap day
    EXPECT_EQ(io::parse_utc_ns("2000-02-29T00:00:00Z"), 951'782'400'000'000'000);    // 400-year leap
    // Days the month does not have are refused, not carried into the next month.
    for (const char* bad : {"2026-02-29T00:00:00Z", "2100-02-29T00:00:00Z", "2026-02-31T00:00:00Z",
                            "2026-04-31T00:00:00Z", "2026-11-31T12:00:00Z", "2026-13-01T00:00:00Z",
                            "2026-11-25T24:00:00Z", "2026-11-25T10:47:40+01:00", "2026-11-25T10:47:40.1234567891Z"}) {
        EXPECT_FALSE(io::parse_utc_ns(bad).has_value()) << bad;
    }
}

TEST(time, utc_at_a_sample_is_exact_for_integer_rates_and_any_offset)
{
    const dsp::sample_time t{1'000'000, 1'795'603'660'123'456'789, 25e6};  // 40 ns a sample
    EXPECT_EQ(dsp::utc_ns_at(t, 1'000'000), t.utc_ns);
    EXPECT_EQ(dsp::utc_ns_at(t, 1'000'001), t.utc_ns + 40);
    EXPECT_EQ(dsp::utc_ns_at(t, 999'999), t.utc_ns - 40);
    EXPECT_EQ(dsp::utc_ns_at(t, 1'000'000 + 25'000'000ull * 3600), t.utc_ns + 3600'000'000'000LL);
    // 20.625 MS/s: 48.48... ns a sample; 33 samples = 1600 ns exactly; 1 sample rounds to 48.
    const dsp::sample_time u{0, 0, 20.625e6};
    EXPECT_EQ(dsp::utc_ns_at(u, 33), 1600);
    EXPECT_EQ(dsp::utc_ns_at(u, 1), 48);
    EXPECT_EQ(dsp::utc_ns_at(u, 20'625'000ull * 86400 * 365), 86400LL * 365 * 1'000'000'000);
    // A huge offset (2^62 samples) at 1 MS/s leaves int64: unknown, never a wrapped time.
    EXPECT_EQ(dsp::utc_ns_at({0, 0, 1e6}, std::uint64_t{1} << 62), dsp::unknown_utc_ns);
    EXPECT_EQ(dsp::utc_ns_at({0, 0, 0.0}, 5), dsp::unknown_utc_ns);
    // A rate that is not an integer: long double, rounded to the ns.
    EXPECT_EQ(dsp::utc_ns_at({0, 100, 2.5e6 + 0.5}, 2'500'000), 100 + 999'999'800);
}

TEST(time, windows_carry_the_segment_time_across_known_gaps_not_unknown_ones)
{
    const double rate = 25e6;
    const std::int64_t t0 = 1'795'603'660'000'000'000;
    dsp::batcher bt(40'000);
    const auto x = ramp(200'000);
    bt.timestamp(t0, rate);
    bt.push(std::span<const cf32>(x).first(100'000));
    bt.gap(1'000);  // known: the index counts them, the time carries on
    bt.push(std::span<const cf32>(x).subspan(100'000, 50'000));
    bt.gap(0);      // unknown: no time until the next anchor
    bt.push(std::span<const cf32>(x).subspan(150'000, 20'000));
    bt.gap(0);
    bt.timestamp(t0 + 5'000'000'000, rate, 7);  // sample 7 of the next push
    bt.push(std::span<const cf32>(x).subspan(170'000, 30'000));
    bt.finish();
    std::vector<dsp::sample_batch> windows;
    while (auto b = bt.pop()) windows.push_back(std::move(*b));
    ASSERT_GE(windows.size(), 5u);
    for (const auto& w : windows) {
        const std::uint64_t first = w.first_sample;
        if (first < 151'000) {  // the first two segments: one time, across the known gap
            ASSERT_TRUE(w.time) << first;
            EXPECT_EQ(dsp::utc_ns_at(*w.time, first), t0 + static_cast<std::int64_t>(first) * 40) << first;
        } else if (first < 171'000) {
            EXPECT_FALSE(w.time) << "after a gap of unknown size, before an anchor: " << first;
        } else {
            ASSERT_TRUE(w.time) << first;
            EXPECT_EQ(w.time->sample, 171'007u);
            EXPECT_EQ(dsp::utc_ns_at(*w.time, first), t0 + 5'000'000'000 - static_cast<std::int64_t>(171'007 - first) * 40);
        }
    }
    EXPECT_THROW(bt.timestamp(0, 0.0), std::invalid_argument);
}

namespace {

/// A VITA-49-like source at 25 MS/s: samples in chunks, each segment's chunks anchored (or
/// not) on the sender's clock, gaps of known and unknown size between segments.
class timed_source final : public io::sample_source {
public:
    struct segment {
        std::size_t from = 0, to = 0;   ///< samples [from, to) of `data`
        std::uint64_t gap_before = 0;   ///< lost samples before it (0 with `gap`: unknown count)
        bool gap = false;
        std::optional<std::int64_t> t_first;  ///< the sender's time of sample `from` (none: no anchors)
    };
    timed_source(std::vector<cf32> data, std::vector<segment> segs, double rate)
        : data_(std::move(data)), segs_(std::move(segs)), rate_(rate)
    {
    }
    std::string describe() const override { return "timed"; }
    double sample_rate_hz() const override { return rate_; }
    void run(io::sample_sink& sink) override
    {
        std::uint64_t delivered = 0;
        for (const auto& s : segs_) {
            if (s.gap) sink.gap(s.gap_before, io::gap_reason::lost_packets);
            for (std::size_t p = s.from; p < s.to; p += 4'096) {
                const std::size_t n = std::min<std::size_t>(4'096, s.to - p);
                if (s.t_first) {
                    // 40 ns a sample at 25 MS/s: every anchor exact.
                    sink.timestamp({delivered, *s.t_first + static_cast<std::int64_t>(p - s.from) * 40});
                }
                sink.write(std::span<const cf32>(data_.data() + p, n));
                delivered += n;
                counters_.samples += n;
            }
        }
    }
    void stop() override {}

private:
    std::vector<cf32> data_;
    std::vector<segment> segs_;
    double rate_;
};

live_result run_timed_pipeline(io::sample_source& src, const dsp::receiver_config& rc)
{
    io::sample_ring ring(4'000'000, io::overflow_policy::block, io::host_ring_allocator(false));
    daemon::pipeline_options po;
    po.receiver = rc;
    po.sample_rate_hz = src.sample_rate_hz();
    live_result res;
    daemon::pipeline p(po, src, ring, cpu_workers(rc, 2), {}, [&](const dsp::batch_output& out) { res.published.push_back(out); });
    p.start();
    p.join();
    res.stats = p.stats();
    return res;
}

}  // namespace

// Per-packet time from a VITA-49-like stream at 25 MS/s (resampled to 20.625 MS/s): exact to
// the ns on the sender's clock, across a gap of known size (no anchor after it) and a gap of
// unknown size (unknown until the next anchor, then from it).
TEST(time, packets_get_the_utc_of_their_first_sample_across_gaps_at_25_msps)
{
    sim::sim_config sc;
    sc.ebn0_db = 15.0;
    sc.seed = 4131;
    sc.sample_rate_hz = 25e6;
    const auto sim = test::simulate(sc, 56);  // 722k samples, ~46 packets
    const std::size_t n = sim.samples.size();
    auto rc = test::small_batches();
    rc.cpu_threads = 1;
    rc.input_sample_rate_hz = 25e6;
    const std::int64_t t0 = 1'795'603'660'000'000'000;  // 2026-11-25T10:47:40Z
    const std::int64_t t1 = 1'795'603'700'250'000'000;
    const std::uint64_t known = 40'000;
    const std::size_t a = n / 4, b = n / 2, c = 3 * n / 4;
    // seg 1 anchored at t0; seg 2 after a known gap, not anchored: continues from seg 1; seg 3
    // after an unknown gap, not anchored: unknown; seg 4 after an unknown gap, anchored at t1.
    timed_source src(sim.samples,
                     {{0, a, 0, false, t0}, {a, b, known, true, std::nullopt}, {b, c, 0, true, std::nullopt}, {c, n, 0, true, t1}},
                     25e6);
    const auto live = run_timed_pipeline(src, rc);
    std::size_t seen[4] = {};
    for (const auto& out : live.published) {
        for (const auto& rec : out.packets) {
            const std::uint64_t s = rec.start_sample;  // absolute: the known gap's samples counted
            if (s < b + known) {
                // Segments 1 and 2: sample s was taken at t0 + 40 s ns (the lost ones took their time).
                EXPECT_EQ(rec.utc_ns, t0 + static_cast<std::int64_t>(s) * 40) << s;
                ++seen[s < a ? 0 : 1];
            } else if (s < c + known) {
                EXPECT_EQ(rec.utc_ns, dsp::unknown_utc_ns) << s;
                ++seen[2];
            } else {
                EXPECT_EQ(rec.utc_ns, t1 + static_cast<std::int64_t>(s - (c + known)) * 40) << s;
                ++seen[3];
            }
        }
    }
    for (int k = 0; k < 4; ++k) EXPECT_GE(seen[k], 5u) << "segment " << k + 1 << " must hold packets";
    EXPECT_EQ(live.stats.first_packet_utc_ns, live.published.front().packets.front().utc_ns);
    EXPECT_NE(live.stats.first_packet_utc_ns, dsp::unknown_utc_ns);
}

// paqd replay --channel: each channel of a two-channel recording (paq-sim's model: one
// transmission, a channel's own preset, delay, level and noise) received on its own, channel 1
// exactly as the single-channel recording of the same settings; without a choice, refused.
TEST(replay, each_channel_of_a_two_channel_recording_is_received_on_its_own)
{
    sim::sim_config one;
    one.preset = "edwards3";
    one.ebn0_db = 13.0;
    one.cfo_hz = -15e3;
    one.seed = 6613;
    one.sample_rate_hz = 24e6;
    sim::sim_config two = one;
    two.channel = 1;
    two.preset = "two-ray";
    two.delay_ns = 40.0;
    two.phase_rad = 2.0;
    two.ebn0_db = 7.0;
    const auto a = test::simulate(one, 24), b = test::simulate(two, 24);
    ASSERT_EQ(a.samples.size(), b.samples.size());
    const auto dir = std::filesystem::temp_directory_path() / ("paq-two-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    write_recording(dir / "single", one.sample_rate_hz, a.samples);
    std::vector<cf32> both;
    for (std::size_t i = 0; i < a.samples.size(); ++i) {
        both.push_back(a.samples[i]);
        both.push_back(b.samples[i]);
    }
    write_recording(dir / "two", one.sample_rate_hz, both, 2);
    daemon::replay_options ro;
    ro.receiver = test::small_batches();
    ro.receiver.cpu_threads = 1;
    ro.backend = config::backend_kind::cpu;
    ro.file = dir / "two";
    try {
        (void)daemon::run_replay(ro);
        ADD_FAILURE() << "a two-channel recording replayed without a channel";
    } catch (const config::config_error& e) {  // a usage error: paqd replay exits 2
        EXPECT_NE(std::string(e.what()).find("2 channels interleaved"), std::string::npos) << e.what();
    }
    ro.channel = 1;
    const auto r1 = daemon::run_replay(ro);
    ro.channel = 2;
    const auto r2 = daemon::run_replay(ro);
    ro.channel.reset();
    ro.file = dir / "single";
    const auto r0 = daemon::run_replay(ro);
    ASSERT_GE(r0.engine.tally.packets_found, 20u);
    // The time since the process started holds the replay's own (the start time in /proc is
    // whole clock ticks, rounded down: never later than the true start).
    EXPECT_GT(r0.elapsed_s, 0.0);
    EXPECT_GE(r0.program_s, r0.elapsed_s);
    EXPECT_DOUBLE_EQ(daemon::to_json(r0)["timing"]["program_s"].get<double>(), r0.program_s);
    EXPECT_EQ(r1.engine.tally.packets_found, r0.engine.tally.packets_found);
    for (int p = 0; p < dsp::chain::num_paths; ++p) {
        const auto& x = r1.engine.tally.paths[static_cast<std::size_t>(p)];
        const auto& y = r0.engine.tally.paths[static_cast<std::size_t>(p)];
        EXPECT_EQ(x.bits_checked, y.bits_checked) << p;
        EXPECT_EQ(x.bit_errors, y.bit_errors) << p;
    }
    EXPECT_EQ(r2.engine.tally.packets_found, r0.engine.tally.packets_found);
    // Channel 2 is 6 dB down: so is its estimate; its MMSE path decides more bits wrong.
    EXPECT_NEAR(r1.engine.tally.mean_ebn0_db - r2.engine.tally.mean_ebn0_db, 6.0, 1.5);
    EXPECT_GT(r2.engine.tally.paths[2].bit_errors, r1.engine.tally.paths[2].bit_errors);
    const auto j = daemon::to_json(r2);
    EXPECT_EQ(j["channel"], 2);
    EXPECT_EQ(j["channels"], 2);
    std::ostringstream table;
    daemon::print_table(r2, table);
    EXPECT_NE(table.str().find("channel 2 of 2"), std::string::npos) << table.str();

    // Both channels combined (--channel 1 --channel 2: receiver_config::channels 2): every path at least
    // as good as channel 1 alone, the records name each packet's better channel.
    ro.file = dir / "two";
    ro.channel = 1;
    ro.second_channel = 2;
    ro.records.base = dir / "both";
    const auto r12 = daemon::run_replay(ro);
    EXPECT_EQ(r12.engine.tally.packets_found, r0.engine.tally.packets_found);
    for (int p = 1; p < dsp::chain::num_paths; ++p) {
        EXPECT_LE(r12.engine.tally.paths[static_cast<std::size_t>(p)].bit_errors, r1.engine.tally.paths[static_cast<std::size_t>(p)].bit_errors)
            << dsp::path_name(p);
    }
    EXPECT_EQ(daemon::to_json(r12)["combined_channel"], 2);
    std::ostringstream combined;
    daemon::print_table(r12, combined);
    EXPECT_NE(combined.str().find("channels 1 and 2 of 2 combined"), std::string::npos) << combined.str();
    {
        std::ifstream csv(dir / "both-packets.csv");
        std::string header, row;
        std::getline(csv, header);
        EXPECT_NE(header.find(",best_channel,ebn0_ch1_db,ebn0_ch2_db,level_ch1_db,level_ch2_db,"), std::string::npos) << header;
        std::size_t rows = 0;
        while (std::getline(csv, row)) ++rows;
        EXPECT_EQ(rows, r12.engine.tally.packets_found);
    }
    ro.records.base.clear();
    // Live: the file source delivering both channels (source.file.second_channel) through a
    // ring of two channels into the service's pipeline (receiver.channels 2): the replay's
    // counts, path by path.
    {
        io::file_source_config fc;
        fc.path = dir / "two.sigmf-meta";
        fc.channel = 1;
        fc.second_channel = 2;
        fc.paced = false;
        fc.chunk_samples = 30'000;
        io::file_source src(fc);
        EXPECT_EQ(src.channels(), 2);
        EXPECT_FALSE(src.ci16_scale().has_value());
        EXPECT_NE(src.describe().find("channels 1 and 2 of 2"), std::string::npos) << src.describe();
        auto rc = ro.receiver;
        rc.channels = 2;
        rc.input_sample_rate_hz = one.sample_rate_hz;
        io::sample_ring ring(4'000'000, io::overflow_policy::block, io::host_ring_allocator(false),
                             io::sample_ring::default_max_markers, std::nullopt, 2);
        daemon::pipeline_options po;
        po.receiver = rc;
        po.sample_rate_hz = src.sample_rate_hz();
        daemon::pipeline live(po, src, ring, cpu_workers(rc, 2), {}, [](const dsp::batch_output&) {});
        live.start();
        live.join();
        const auto st = live.stats();
        EXPECT_EQ(st.samples_in, a.samples.size());
        EXPECT_EQ(st.tally.packets_found, r12.engine.tally.packets_found);
        for (int p = 0; p < dsp::chain::num_paths; ++p) {
            EXPECT_EQ(st.tally.paths[static_cast<std::size_t>(p)].bits_checked, r12.engine.tally.paths[static_cast<std::size_t>(p)].bits_checked) << p;
            EXPECT_EQ(st.tally.paths[static_cast<std::size_t>(p)].bit_errors, r12.engine.tally.paths[static_cast<std::size_t>(p)].bit_errors) << p;
        }
        // The per-channel counts: channel 1 (13 dB) the better on every packet, 6 dB above
        // channel 2; the same in replay.
        EXPECT_EQ(st.receive_channels, 2);
        EXPECT_EQ(st.tally.packets_two_channel, st.tally.packets_found);
        EXPECT_EQ(st.tally.packets_best_channel[0], st.tally.packets_found);
        EXPECT_EQ(st.tally.packets_best_channel, r12.engine.tally.packets_best_channel);
        EXPECT_NEAR(st.tally.channel_mean_ebn0_db[0] - st.tally.channel_mean_ebn0_db[1], 6.0, 1.5);
        EXPECT_EQ(daemon::to_json(r12)["packets_best_receive_channel1"], st.tally.packets_found);
        // A source of two channels into a ring of one, and a second channel the recording lacks.
        io::sample_ring narrow(1'000'000, io::overflow_policy::block, io::host_ring_allocator(false));
        io::ring_sink sink(narrow);
        const std::array<cf32x2, 1> pair{};
        EXPECT_THROW(sink.write_x2(pair), std::logic_error);
        fc.second_channel = 3;
        EXPECT_THROW(io::file_source{fc}, std::invalid_argument);
    }
    // --each-channel: each channel alone beside the combined paths, the same counts as their
    // own replays.
    ro.each_channel = true;
    ro.records.base = dir / "side";  // each channel's records alone beside the combined: side-chN
    const auto side = daemon::run_replay(ro);
    ro.records.base.clear();
    ASSERT_EQ(side.each_channel.size(), 2u);
    for (const auto& [name, rows_expected] : {std::pair{"side-packets.csv", side.engine.tally.packets_found},
                                               std::pair{"side-ch1-packets.csv", r1.engine.tally.packets_found},
                                               std::pair{"side-ch2-packets.csv", r2.engine.tally.packets_found}}) {
        std::ifstream csv(dir / name);
        ASSERT_TRUE(csv.good()) << name;
        std::string row;
        std::size_t rows = 0;
        while (std::getline(csv, row)) ++rows;
        EXPECT_EQ(rows, rows_expected + 1) << name;  // the header, a row a packet
    }
    EXPECT_EQ(side.each_channel[0].channel, 1);
    EXPECT_EQ(side.each_channel[1].channel, 2);
    EXPECT_EQ(side.each_channel[0].tally.paths[2].bit_errors, r1.engine.tally.paths[2].bit_errors);
    EXPECT_EQ(side.each_channel[1].tally.paths[2].bit_errors, r2.engine.tally.paths[2].bit_errors);
    EXPECT_EQ(daemon::to_json(side)["each_channel"][1]["paths"][2]["errors"], r2.engine.tally.paths[2].bit_errors);
    std::ostringstream side_table;
    daemon::print_table(side, side_table);
    EXPECT_NE(side_table.str().find("each channel alone"), std::string::npos) << side_table.str();
    ro.each_channel = false;
    // receiver.combining select: every packet on its better channel, here channel 1 (13 dB
    // edwards3 against channel 2's two-ray at 7 dB) on every packet: channel 1's replay, path
    // by path, but for the packet starts, which both channels' preambles place (a sample's
    // difference moves a few errors).
    ro.receiver.combining = dsp::combining_kind::select;
    const auto sel = daemon::run_replay(ro);
    ro.receiver.combining = dsp::combining_kind::joint;
    EXPECT_EQ(sel.engine.tally.packets_found, r1.engine.tally.packets_found);
    for (int p = 0; p < dsp::chain::num_paths; ++p) {
        const auto e1 = static_cast<double>(r1.engine.tally.paths[static_cast<std::size_t>(p)].bit_errors);
        EXPECT_NEAR(static_cast<double>(sel.engine.tally.paths[static_cast<std::size_t>(p)].bit_errors), e1, 0.03 * e1 + 3.0) << p;
    }
    EXPECT_EQ(sel.engine.tally.packets_best_channel[0], sel.engine.tally.packets_found);
    EXPECT_EQ(daemon::to_json(sel)["combining"], "select");
    std::ostringstream sel_table;
    daemon::print_table(sel, sel_table);
    EXPECT_NE(sel_table.str().find("channels 1 and 2 of 2, the better per packet (select)"), std::string::npos) << sel_table.str();
    // A second channel the recording lacks, or the same one twice, selection on the cuda
    // backend, and receiver_config::channels 2 without two channels named: usage errors.
    for (const int bad : {3, 1}) {
        ro.second_channel = bad;
        EXPECT_THROW((void)daemon::run_replay(ro), config::config_error) << bad;
    }
    ro.second_channel = 2;
    ro.backend = config::backend_kind::cuda;
    const auto combining = ro.receiver.combining;
    ro.receiver.combining = dsp::combining_kind::select;
    EXPECT_THROW((void)daemon::run_replay(ro), config::config_error);
    ro.receiver.combining = combining;
    ro.backend = config::backend_kind::cpu;
    ro.second_channel.reset();
    ro.each_channel = true;  // without two channels
    EXPECT_THROW((void)daemon::run_replay(ro), config::config_error);
    ro.each_channel = false;
    ro.receiver.channels = 2;
    EXPECT_THROW((void)daemon::run_replay(ro), config::config_error);
    std::filesystem::remove_all(dir);
}

// paqd replay --llr-out: a file per trellis stream, one record per packet (its
// start sample, 8 bytes little-endian, then 6144 signed LLR bytes), the starts those of the
// packet records; refused without the trellis.
// --stage-timing's table lines and JSON: the batches after the first as means, the first
// apart (the backend's one-time costs land there), as the worker pool summed them.
TEST(replay, stage_timing_gives_the_first_batch_apart_from_the_means_of_the_rest)
{
    daemon::replay_result r;
    r.backend = "cuda";
    dsp::stage_times rest, first;
    rest.batches = 4;
    rest.stage_ms = {{"upload_metric", 8.0}, {"detector", 20.0}, {"trellis", 0.0}};
    rest.device_span_ms = 60.0;
    rest.host_total_ms = 64.0;
    rest.host_queued_ms = 20.0;
    rest.host_last_collect_ms = 4.0;
    rest.device_span_max_ms = 16.5;
    rest.host_total_max_ms = 17.0;
    first.batches = 1;
    first.stage_ms = {{"upload_metric", 3.0}, {"detector", 40.0}};
    first.device_span_ms = 90.0;
    first.host_total_ms = 100.0;
    r.stages = rest;
    r.stages_first = first;
    std::ostringstream os;
    daemon::print_table(r, os);
    const std::string t = os.str();
    EXPECT_NE(t.find("stages (cuda backend, mean of the 4 batches after the first, ms): device span 15.000; process() 16.000, of it "
                     "queueing 5.000 and the last part's collection 1.000; the longest: device span 16.500, process() 17.000"),
              std::string::npos)
        << t;
    EXPECT_NE(t.find(" upload_metric 2.000 detector 5.000\n"), std::string::npos) << "stages without time are left out: " << t;
    EXPECT_NE(t.find("the first batch, ms: device span 90.000; process() 100.000"), std::string::npos) << t;
    EXPECT_NE(t.find(" upload_metric 3.000 detector 40.000\n"), std::string::npos) << t;
    const auto j = daemon::to_json(r);
    EXPECT_EQ(j["stages"]["batches"], 4u);
    EXPECT_DOUBLE_EQ(j["stages"]["device_span_ms"].get<double>(), 15.0);
    EXPECT_DOUBLE_EQ(j["stages"]["stage_ms"]["detector"].get<double>(), 5.0);
    EXPECT_DOUBLE_EQ(j["stages"]["device_span_max_ms"].get<double>(), 16.5);
    EXPECT_EQ(j["stages"]["first"]["batches"], 1u);
    EXPECT_DOUBLE_EQ(j["stages"]["first"]["host_process_ms"].get<double>(), 100.0);
    EXPECT_DOUBLE_EQ(j["stages"]["first"]["stage_ms"]["detector"].get<double>(), 40.0);
    // Without --stage-timing: no line, no key.
    daemon::replay_result plain;
    std::ostringstream po;
    daemon::print_table(plain, po);
    EXPECT_EQ(po.str().find("stages ("), std::string::npos);
    EXPECT_FALSE(daemon::to_json(plain).contains("stages"));
}

TEST(replay, llr_out_writes_a_record_per_packet_to_a_file_per_path)
{
    sim::sim_config sc;
    sc.preset = "two-ray";
    sc.ebn0_db = 11.0;
    sc.seed = 6607;
    sc.sample_rate_hz = 24e6;
    const auto sim = test::simulate(sc, 30);
    const auto dir = std::filesystem::temp_directory_path() / ("paq-llr-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    write_recording(dir / "rec", sc.sample_rate_hz, sim.samples);
    daemon::replay_options ro;
    ro.file = dir / "rec.sigmf-meta";
    ro.receiver = test::small_batches();
    ro.receiver.cpu_threads = 1;
    ro.receiver.detector = dsp::detector_kind::trellis;
    ro.backend = config::backend_kind::cpu;
    ro.records.base = dir / "rec";
    ro.llr_base = dir / "soft";
    const auto rr = daemon::run_replay(ro);
    ASSERT_GT(rr.engine.tally.packets_found, 20u);
    EXPECT_EQ(rr.llr_packets, rr.engine.tally.packets_found);
    ASSERT_EQ(rr.llr_files.size(), 6u);
    EXPECT_EQ(std::filesystem::path(rr.llr_files[0]).filename(), "soft-none.llr");
    EXPECT_EQ(std::filesystem::path(rr.llr_files[5]).filename(), "soft-fde2.llr");
    EXPECT_EQ(daemon::to_json(rr)["llr_packets"], rr.llr_packets);
    // The packet records' starts, in order.
    std::vector<std::uint64_t> starts;
    {
        std::ifstream csv(dir / "rec-packets.csv");
        std::string row;
        std::getline(csv, row);
        while (std::getline(csv, row)) {
            std::vector<std::string> f;
            std::stringstream ss(row);
            for (std::string v; std::getline(ss, v, ',');) f.push_back(v);
            starts.push_back(std::stoull(f.at(4)));  // start_sample
        }
    }
    ASSERT_EQ(starts.size(), rr.llr_packets);
    for (const auto& name : rr.llr_files) {
        EXPECT_EQ(std::filesystem::file_size(name), rr.llr_packets * daemon::llr_record_bytes) << name;
        std::ifstream f(name, std::ios::binary);
        std::vector<unsigned char> rec(daemon::llr_record_bytes);
        std::size_t nonzero = 0;
        for (std::size_t i = 0; i < starts.size(); ++i) {
            ASSERT_TRUE(f.read(reinterpret_cast<char*>(rec.data()), static_cast<std::streamsize>(rec.size()))) << name;
            std::uint64_t start = 0;
            for (int b = 0; b < 8; ++b) start |= static_cast<std::uint64_t>(rec[static_cast<std::size_t>(b)]) << (8 * b);
            EXPECT_EQ(start, starts[i]) << name << " packet " << i;
            for (std::size_t k = 8; k < rec.size(); ++k) nonzero += rec[k] != 0;
        }
        // A quantized LLR is 0 only for a bit the trellis all but cannot tell (ZF's on this
        // channel: 1.0 % of them, its calibration the lowest there).
        EXPECT_GT(nonzero, starts.size() * waveform::data_bits * 97 / 100) << name;
    }
    // Without the trellis there are no LLRs to write: refused before anything runs.
    ro.receiver.detector = dsp::detector_kind::sxs;
    ro.llr_base = dir / "none";
    EXPECT_THROW((void)daemon::run_replay(ro), std::invalid_argument);
    EXPECT_FALSE(std::filesystem::exists(dir / "none-none.llr"));
    std::filesystem::remove_all(dir);
}

// A SigMF recording with two captures, each with its own core:datetime (the second a jump: the
// recording paused), through the live file source and through paqd replay: each packet's time
// from its own capture; a raw file of the same samples has none.
TEST(time, sigmf_captures_time_the_packets_live_and_in_replay_and_raw_files_have_none)
{
    sim::sim_config sc;
    sc.ebn0_db = 15.0;
    sc.seed = 4133;
    sc.sample_rate_hz = 25e6;
    const auto sim = test::simulate(sc, 40);
    const std::size_t n = sim.samples.size();
    const std::uint64_t second = n / 2;
    const auto dir = std::filesystem::temp_directory_path() / ("paq-time-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    io::sigmf_meta meta;
    meta.sample_rate_hz = 25e6;
    {
        auto w = io::sample_file_writer::create_sigmf(dir / "rec", meta);
        w.write(sim.samples);
        w.close();
    }
    {
        // Two captures, as another SigMF writer would make them.
        auto j = nlohmann::json::parse(std::ifstream(dir / "rec.sigmf-meta"));
        j["captures"] = nlohmann::json::array(
            {{{"core:sample_start", 0}, {"core:datetime", "2026-11-25T10:47:40.123456789Z"}},
             {{"core:sample_start", second}, {"core:datetime", "2026-11-25T10:48:00Z"}}});
        std::ofstream(dir / "rec.sigmf-meta") << j.dump(2);
    }
    const std::int64_t t0 = *io::parse_utc_ns("2026-11-25T10:47:40.123456789Z");
    const std::int64_t t1 = *io::parse_utc_ns("2026-11-25T10:48:00Z");
    auto expected = [&](std::uint64_t s) {
        return s < second ? t0 + static_cast<std::int64_t>(s) * 40 : t1 + static_cast<std::int64_t>(s - second) * 40;
    };
    std::vector<std::string> warnings;
    const auto marks = io::recording_marks(io::read_sigmf_meta(dir / "rec.sigmf-meta"), warnings);
    ASSERT_EQ(marks.size(), 3u);
    EXPECT_TRUE(warnings.empty());
    // 20 s later than the samples say: a gap of unknown size, then the time.
    EXPECT_EQ(marks[1], (io::recording_mark{second, io::recording_mark::kind::gap, 0, io::gap_reason::discontinuity, 0}));
    EXPECT_EQ(marks[2], (io::recording_mark{second, io::recording_mark::kind::time, 0, io::gap_reason::discontinuity, t1}));
    auto rc = test::small_batches();
    rc.cpu_threads = 1;
    rc.input_sample_rate_hz = 25e6;

    io::file_source_config fc;
    fc.path = dir / "rec.sigmf-meta";
    fc.paced = false;
    fc.chunk_samples = 30'000;
    io::file_source src(fc);
    const auto live = run_timed_pipeline(src, rc);
    std::size_t checked = 0;
    for (const auto& out : live.published) {
        for (const auto& rec : out.packets) {
            EXPECT_EQ(rec.utc_ns, expected(rec.start_sample)) << rec.start_sample;
            ++checked;
        }
    }
    EXPECT_GE(checked, 20u);
    EXPECT_EQ(src.latest_time_anchor()->utc_ns, t1);

    daemon::replay_options ro;
    ro.file = dir / "rec.sigmf-meta";
    ro.receiver = rc;
    ro.receiver.bit_rate_hz = 10.3125e6;
    ro.backend = config::backend_kind::cpu;
    ro.records.base = dir / "rec";
    const auto rr = daemon::run_replay(ro);
    EXPECT_EQ(rr.first_packet_utc_ns, expected(live.published.front().packets.front().start_sample));
    EXPECT_EQ(daemon::to_json(rr)["first_packet_utc"], io::format_utc_ns(rr.first_packet_utc_ns));
    // The records' time_utc column: what paq-report reads back.
    std::ifstream csv(dir / "rec-packets.csv");
    std::string header, row;
    std::getline(csv, header);
    ASSERT_TRUE(header.ends_with(",time_utc")) << header;
    std::size_t rows = 0;
    while (std::getline(csv, row)) {
        std::vector<std::string> f;
        std::stringstream ss(row);
        for (std::string x; std::getline(ss, x, ',');) f.push_back(x);
        const std::uint64_t start = std::stoull(f.at(4));  // start_sample
        const std::string utc = row.substr(row.rfind(',') + 1);
        EXPECT_EQ(io::parse_utc_ns(utc), expected(start)) << row;
        EXPECT_EQ(utc, io::format_utc_ns(expected(start)));
        ++rows;
    }
    EXPECT_EQ(rows, rr.engine.tally.packets_found);

    // The same samples as a raw file: no time anywhere, the column empty.
    {
        auto w = io::sample_file_writer::create_raw(dir / "rec.raw", io::sample_format::cf32_le);
        w.write(sim.samples);
        w.close();
    }
    ro.file = dir / "rec.raw";
    ro.raw_format = io::sample_format::cf32_le;
    ro.raw_sample_rate_hz = 25e6;
    ro.records.base = dir / "raw";
    const auto raw = daemon::run_replay(ro);
    EXPECT_GT(raw.engine.tally.packets_found, 20u);
    EXPECT_EQ(raw.first_packet_utc_ns, dsp::unknown_utc_ns);
    EXPECT_TRUE(daemon::to_json(raw)["first_packet_utc"].is_null());
    std::ifstream raw_csv(dir / "raw-packets.csv");
    std::getline(raw_csv, header);
    while (std::getline(raw_csv, row)) EXPECT_TRUE(row.ends_with(",")) << "time_utc must be empty: " << row;
    std::filesystem::remove_all(dir);
}

// A recording's overflow (the ring of the paqd that recorded it was full) lost samples before
// this run: the live file source passes its gap through its own ring, and those samples are
// counted in samples_lost_in_gaps as the replay counts them, not as the ring's own drops.
TEST(pipeline, a_recorded_overflow_played_by_the_file_source_is_counted_as_the_replay_counts_it)
{
    sim::sim_config sc;
    sc.ebn0_db = 15.0;
    sc.seed = 4139;
    const auto sim = test::simulate(sc, 40);
    const std::uint64_t a = sim.samples.size() / 3, b = 2 * sim.samples.size() / 3;
    const auto dir = std::filesystem::temp_directory_path() / ("paq-recorded-overflow-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    write_recording(dir / "rec", 20.625e6, sim.samples);
    {
        auto j = nlohmann::json::parse(std::ifstream(dir / "rec.sigmf-meta"));
        j["global"]["paq:gaps"] = nlohmann::json::array({{{"recording_sample", a}, {"lost", 12'345}, {"reason", "overflow"}},
                                                         {{"recording_sample", b}, {"lost", 777}, {"reason", "lost-packets"}}});
        std::ofstream(dir / "rec.sigmf-meta") << j.dump(2);
    }
    auto rc = test::small_batches();
    rc.cpu_threads = 1;
    io::file_source_config fc;
    fc.path = dir / "rec.sigmf-meta";
    fc.paced = false;
    fc.chunk_samples = 30'000;
    io::file_source src(fc);
    const auto live = run_timed_pipeline(src, rc);
    const auto overflow = static_cast<std::size_t>(io::gap_reason::overflow);
    const auto lost_packets = static_cast<std::size_t>(io::gap_reason::lost_packets);
    EXPECT_EQ(live.stats.samples_lost_in_gaps, 12'345u + 777u);
    EXPECT_EQ(live.stats.gaps_by_reason[overflow], 1u);
    EXPECT_EQ(live.stats.gaps_by_reason[lost_packets], 1u);
    EXPECT_EQ(live.stats.ring.samples_dropped, 0u) << "the ring itself dropped nothing";
    EXPECT_EQ(live.stats.samples_in, sim.samples.size());

    daemon::replay_options ro;
    ro.file = dir / "rec.sigmf-meta";
    ro.receiver = rc;
    ro.backend = config::backend_kind::cpu;
    const auto rr = daemon::run_replay(ro);
    EXPECT_EQ(rr.engine.samples_lost_in_gaps, live.stats.samples_lost_in_gaps);
    EXPECT_EQ(rr.engine.gaps_by_reason, live.stats.gaps_by_reason);
    EXPECT_EQ(rr.engine.tally.packets_found, live.stats.tally.packets_found);
    EXPECT_GT(rr.engine.tally.packets_found, 20u);
    std::filesystem::remove_all(dir);
}

TEST(time, host_clock_anchors_are_now_less_the_block_duration)
{
    const std::int64_t before = io::host_utc_ns();
    const auto a = io::host_clock_anchor(1234, 25'000, 25e6);  // a 1 ms block
    const std::int64_t after = io::host_utc_ns();
    EXPECT_EQ(a.sample_index, 1234u);
    EXPECT_GE(a.utc_ns, before - 1'000'000);
    EXPECT_LE(a.utc_ns, after - 1'000'000);
    // Roughly now (the host's clock is UTC, within the test's own run).
    const auto wall = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
    EXPECT_LT(std::llabs(wall - a.utc_ns), 5'000'000'000LL);
}

// The live daemon's recorder (run_live, as `paqd --config`): a SigMF source
// with core:datetime and core:frequency gives a recording whose core:datetime is the UTC of
// its first sample, exact to the ns as written, and whose core:frequency is the configured
// one, else the source's; a raw source (no time, no frequency) gives neither key.
// A lossy live run recorded while receiving replays as it was received: the recorder starts a
// capture at each gap (its lost samples and reason in paq:gaps, each capture's first sample
// timed where the source gave time), and paqd replay ends a segment at each, so every path's
// counts, every packet's start sample and UTC, and the gaps by reason are the live run's.
TEST(time, a_lossy_live_run_recorded_replays_with_the_live_counts_and_times)
{
    sim::sim_config sc;
    sc.preset = "edwards3";
    sc.ebn0_db = 13.0;
    sc.seed = 4177;
    sc.sample_rate_hz = 25e6;
    sc.clock_ppm = 12.0;
    const auto sim = test::simulate(sc, 64);
    const std::size_t n = sim.samples.size();
    auto rc = test::small_batches();
    rc.cpu_threads = 1;
    rc.input_sample_rate_hz = 25e6;
    rc.bit_rate_hz = 10.3125e6;
    const std::int64_t t0 = 1'795'603'660'000'000'000;
    const std::int64_t t1 = 1'795'603'701'000'000'000;
    const std::size_t a = n / 5, b = 2 * n / 5, c = 3 * n / 5, d = 4 * n / 5;
    // Anchored; a known loss (time carries on); an unknown one (no time); an unknown one then
    // anchored again; a known loss mid-packet-stream, anchored.
    timed_source src(sim.samples,
                     {{0, a, 0, false, t0},
                      {a, b, 33'333, true, std::nullopt},
                      {b, c, 0, true, std::nullopt},
                      {c, d, 0, true, t1},
                      {d, n, 7'777, true, t1 + static_cast<std::int64_t>(d - c + 7'777) * 40}},
                     25e6);
    const auto dir = std::filesystem::temp_directory_path() / ("paq-lossy-rec-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    config::recording_config cfg;
    cfg.base = dir / "lossy";
    cfg.format = io::sample_format::cf32_le;  // the received samples exactly (ci16 would round them)
    live_result live;
    {
        daemon::recorder rec(cfg, 25e6, rc.bit_rate_hz, nlohmann::json::object());
        io::sample_ring ring(4'000'000, io::overflow_policy::block, io::host_ring_allocator(false));
        daemon::pipeline_options po;
        po.receiver = rc;
        po.sample_rate_hz = 25e6;
        po.on_samples = [&](std::span<const cf32> x) { rec.write(x); };
        po.on_gap = [&](std::uint64_t lost, io::gap_reason why) { rec.gap(lost, why); };
        po.on_time = [&](std::int64_t utc_ns, std::size_t offset) { rec.timestamp(utc_ns, offset); };
        daemon::pipeline p(po, src, ring, cpu_workers(rc, 2), {}, [&](const dsp::batch_output& out) { live.published.push_back(out); });
        p.start();
        p.join();
        live.stats = p.stats();
        rec.close();
    }
    // The recording: a capture per stretch between gaps, timed where the source gave time.
    const auto j = nlohmann::json::parse(std::ifstream(dir / "lossy.sigmf-meta"));
    const auto& caps = j["captures"];
    ASSERT_EQ(caps.size(), 5u) << caps.dump();
    EXPECT_EQ(caps[1]["core:sample_start"], a);
    EXPECT_EQ(caps[4]["core:sample_start"], d);
    EXPECT_EQ(io::parse_utc_ns(caps[0]["core:datetime"].get<std::string>()), t0);
    EXPECT_FALSE(caps[1].contains("core:datetime")) << "no anchor in it: the known loss carries the time on";
    EXPECT_FALSE(caps[2].contains("core:datetime"));
    EXPECT_EQ(io::parse_utc_ns(caps[3]["core:datetime"].get<std::string>()), t1);
    EXPECT_EQ(io::parse_utc_ns(caps[4]["core:datetime"].get<std::string>()), t1 + static_cast<std::int64_t>(d - c + 7'777) * 40);
    EXPECT_EQ(j["global"]["paq:gaps"].size(), 4u);

    daemon::replay_options ro;
    ro.file = dir / "lossy.sigmf-meta";
    ro.receiver = rc;
    ro.backend = config::backend_kind::cpu;
    ro.records.base = dir / "replayed";
    const auto rr = daemon::run_replay(ro);
    const auto& lt = live.stats.tally;
    EXPECT_GT(lt.packets_found, 30u);
    EXPECT_EQ(rr.engine.tally.packets_found, lt.packets_found);
    ASSERT_EQ(rr.engine.tally.paths.size(), lt.paths.size());
    for (std::size_t k = 0; k < lt.paths.size(); ++k) {
        EXPECT_EQ(rr.engine.tally.paths[k].packets, lt.paths[k].packets) << lt.paths[k].name;
        EXPECT_EQ(rr.engine.tally.paths[k].bits_checked, lt.paths[k].bits_checked) << lt.paths[k].name;
        EXPECT_EQ(rr.engine.tally.paths[k].bit_errors, lt.paths[k].bit_errors) << lt.paths[k].name;
    }
    EXPECT_EQ(rr.engine.gaps, live.stats.gaps);
    EXPECT_EQ(rr.engine.gaps_by_reason, live.stats.gaps_by_reason);
    EXPECT_EQ(rr.engine.samples_lost_in_gaps, live.stats.samples_lost_in_gaps);
    EXPECT_EQ(rr.first_packet_utc_ns, live.stats.first_packet_utc_ns);
    // The counters beside the records (what paq-report reads): the replay's JSON, with the
    // packets' spacing at the chain's rate.
    const auto counters = nlohmann::json::parse(std::ifstream(dir / "replayed-counters.json"));
    EXPECT_EQ(counters["gaps"], rr.engine.gaps);
    EXPECT_EQ(counters["gaps_by_reason"]["lost-packets"], 4u);
    EXPECT_EQ(counters["samples_lost_in_gaps"], 33'333u + 7'777u);
    EXPECT_EQ(counters["packets_missed_in_sequence"], rr.engine.tally.packets_skipped);
    EXPECT_DOUBLE_EQ(counters["records"]["packet_spacing_s"].get<double>(), 12672.0 / (2.0 * rc.bit_rate_hz));
    // Every packet where live had it, with live's time.
    std::map<std::uint64_t, std::int64_t> live_times;
    for (const auto& out : live.published) {
        for (const auto& p : out.packets) live_times[p.start_sample] = p.utc_ns;
    }
    std::ifstream csv(dir / "replayed-packets.csv");
    std::string header, row;
    std::getline(csv, header);
    std::size_t rows = 0, timed = 0;
    while (std::getline(csv, row)) {
        std::vector<std::string> f;
        std::stringstream ss(row);
        for (std::string x; std::getline(ss, x, ',');) f.push_back(x);
        const std::uint64_t start = std::stoull(f.at(4));
        const std::string utc = row.substr(row.rfind(',') + 1);
        const auto it = live_times.find(start);
        ASSERT_NE(it, live_times.end()) << "replay found a packet live did not: " << row;
        if (it->second == dsp::unknown_utc_ns) {
            EXPECT_TRUE(utc.empty()) << row;
        } else {
            EXPECT_EQ(io::parse_utc_ns(utc), it->second) << row;
            ++timed;
        }
        ++rows;
    }
    EXPECT_EQ(rows, live_times.size());
    EXPECT_GT(timed, rows / 2);
    EXPECT_LT(timed, rows) << "the stretch after the unknown gap has no time, live or replayed";

    // The same samples joined across the gaps (the metadata's gaps and captures removed, as
    // recordings were made before): not what was received.
    auto joined = j;
    joined["global"].erase("paq:gaps");
    joined["captures"] = nlohmann::json::array({caps[0]});
    joined["annotations"] = nlohmann::json::array();
    std::ofstream(dir / "lossy.sigmf-meta") << joined.dump(2);
    ro.records.base.clear();
    const auto rj = daemon::run_replay(ro);
    EXPECT_EQ(rj.engine.gaps, 0u);
    bool differs = rj.engine.tally.packets_found != lt.packets_found;
    for (std::size_t k = 0; k < lt.paths.size(); ++k) differs |= rj.engine.tally.paths[k].bit_errors != lt.paths[k].bit_errors;
    EXPECT_TRUE(differs) << "joined across its gaps, the recording must not give the live counts";
    std::filesystem::remove_all(dir);
}

TEST(time, a_live_recording_gets_core_datetime_and_core_frequency_from_its_source_or_the_config)
{
    sim::sim_config sc;
    sc.ebn0_db = 15.0;
    sc.seed = 4135;
    const auto sim = test::simulate(sc, 12);
    const auto dir = std::filesystem::temp_directory_path() / ("paq-time-rec-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    const std::string datetime = "2026-11-25T10:47:40.123456789Z";
    {
        io::sigmf_meta meta;
        meta.sample_rate_hz = sc.sample_rate_hz;
        meta.center_frequency_hz = 2.2505e9;
        meta.datetime_iso8601 = datetime;
        auto w = io::sample_file_writer::create_sigmf(dir / "src", meta);
        w.write(sim.samples);
        w.close();
        auto raw = io::sample_file_writer::create_raw(dir / "src.raw", io::sample_format::cf32_le);
        raw.write(sim.samples);
        raw.close();
    }
    const auto run = [&](const std::string& source, const std::string& recording) {
        const std::string yaml = "source: {type: file, file: " + source + "}\n" +
                                 "ring: {capacity_s: 0.5, lock_memory: false}\n"
                                 "pipeline: {backend: cpu, cpu_workers: 1}\n"
                                 "publisher: {enabled: false}\n"
                                 "metrics: {enabled: false}\n"
                                 "log: {destination: console, level: warn}\n"
                                 "recording: " + recording + "\n";
        daemon::live_options lo;
        lo.config = config::parse_daemon_config(yaml);
        EXPECT_EQ(daemon::run_live(lo), 0) << yaml;
    };
    const auto capture = [&](const std::string& base) {
        std::ifstream f(dir / (base + ".sigmf-meta"));
        const auto j = nlohmann::json::parse(f);
        EXPECT_EQ(j["captures"].size(), 1u);
        return j["captures"][0];
    };
    const std::string sigmf = "{path: " + (dir / "src.sigmf-meta").string() + ", paced: false}";
    run(sigmf, "{path: " + (dir / "from_source").string() + "}");
    auto c = capture("from_source");
    EXPECT_EQ(c.value("core:datetime", ""), datetime) << c.dump();
    EXPECT_EQ(c.value("core:frequency", 0.0), 2.2505e9) << c.dump();
    // Every sample recorded: the recording's first sample is the source's first.
    EXPECT_EQ(io::sample_file_reader::open(dir / "from_source.sigmf-meta").info().num_samples, sim.samples.size());

    run(sigmf, "{path: " + (dir / "configured").string() + ", center_frequency_hz: 1.4855e9}");
    c = capture("configured");
    EXPECT_EQ(c.value("core:datetime", ""), datetime) << c.dump();
    EXPECT_EQ(c.value("core:frequency", 0.0), 1.4855e9) << c.dump();

    run("{path: " + (dir / "src.raw").string() + ", format: cf32_le, sample_rate_hz: 20.625e6, paced: false}",
        "{path: " + (dir / "untimed").string() + "}");
    c = capture("untimed");
    EXPECT_FALSE(c.contains("core:datetime")) << c.dump();
    EXPECT_FALSE(c.contains("core:frequency")) << c.dump();
    EXPECT_EQ(io::sample_file_reader::open(dir / "untimed.sigmf-meta").info().num_samples, sim.samples.size());
    std::filesystem::remove_all(dir);
}

// Raw network IQ (no time of its own): a real UDP source on loopback, through
// the ring, the batcher and the worker pool, stamps each packet with the host's clock: close
// to CLOCK_REALTIME at the test, and never earlier than the packet before. The sender is paced
// well below the nominal rate (1024 samples, 50 us of signal, every >= 1 ms), so each
// datagram's host-clock anchor is later than the previous one extrapolated: a later window's
// time can only move forward.
TEST(time, a_udp_source_stamps_packets_with_the_host_clock_close_to_now_and_monotonic)
{
    const auto wall_ns = [] {
        return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
    };
    sim::sim_config sc;
    sc.ebn0_db = 15.0;
    sc.seed = 4137;
    const auto sim = test::simulate(sc, 24);
    const std::size_t n = sim.samples.size();
    io::udp_source_config uc;
    uc.bind_address = "127.0.0.1";
    uc.port = 0;
    uc.format = io::sample_format::cf32_le;
    uc.sample_rate_hz = sc.sample_rate_hz;
    io::udp_source src(uc);
    auto rc = test::small_batches();
    rc.batch_samples = 50'000;
    rc.cpu_threads = 1;
    const std::int64_t before = wall_ns();
    std::thread tx([&] {
        // The source binds when the pipeline starts it: under a sanitizer on a loaded machine
        // that took more than a second (CI), so wait up to 60 s, and send nothing if it never binds.
        for (int k = 0; k < 30'000 && src.local_port() == 0; ++k) std::this_thread::sleep_for(2ms);
        if (src.local_port() == 0) {
            src.stop();
            return;
        }
        const int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
        sockaddr_in to{};
        to.sin_family = AF_INET;
        to.sin_port = htons(src.local_port());
        to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        constexpr std::size_t per = 1024;
        for (std::size_t p = 0; p < n; p += per) {
            const std::size_t m = std::min(per, n - p);
            (void)::sendto(fd, sim.samples.data() + p, m * sizeof(cf32), 0, reinterpret_cast<const sockaddr*>(&to), sizeof to);
            std::this_thread::sleep_for(1ms);
        }
        ::close(fd);
        // Every sample in (loopback does not lose them at this pace), or give up after 5 s.
        for (int k = 0; k < 2500 && src.counters().samples.load() < n; ++k) std::this_thread::sleep_for(2ms);
        src.stop();
    });
    const auto live = run_timed_pipeline(src, rc);
    tx.join();
    const std::int64_t after = wall_ns();
    EXPECT_EQ(src.counters().samples.load(), n);
    std::size_t checked = 0;
    std::int64_t previous = std::numeric_limits<std::int64_t>::min();
    std::uint64_t previous_start = 0;
    for (const auto& out : live.published) {
        for (const auto& rec : out.packets) {
            ASSERT_NE(rec.utc_ns, dsp::unknown_utc_ns) << rec.start_sample;
            // The host's clock while the test ran (2 s of slack either side).
            EXPECT_GT(rec.utc_ns, before - 2'000'000'000) << rec.start_sample;
            EXPECT_LT(rec.utc_ns, after + 2'000'000'000) << rec.start_sample;
            EXPECT_GE(rec.start_sample, previous_start);
            EXPECT_GE(rec.utc_ns, previous) << "packet at " << rec.start_sample << " is earlier than the one before";
            previous = rec.utc_ns;
            previous_start = rec.start_sample;
            ++checked;
        }
    }
    EXPECT_GE(checked, 18u);
    ASSERT_GE(live.published.size(), 4u) << "several windows, each timed by its own latest anchor";
    ASSERT_FALSE(live.published.front().packets.empty());
    EXPECT_EQ(live.stats.first_packet_utc_ns, live.published.front().packets.front().utc_ns);
    const auto latest = src.latest_time_anchor();
    ASSERT_TRUE(latest);
    EXPECT_GE(latest->utc_ns, before - 2'000'000'000);
    EXPECT_LE(latest->utc_ns, after);
    EXPECT_GE(latest->utc_ns, previous - 2'000'000'000);
}
