// ci16 input at its own width in the LIVE service: a source that delivers
// ci16 writes it into a ci16 ring (4 bytes a sample), the batcher fills ci16 windows from it
// and the backend converts. Everything must come out as if the same samples had been
// delivered as cf32: the ring's events and counters, the windows, the packets, the bits and
// the pipeline's counters, at 2 samples per bit and resampled, across a gap and an overflow.
#include "chain_fixture.hpp"
#include "ci16_fixture.hpp"
#include "pinning_backend.hpp"

#include "runtime/counters.hpp"
#include "daemon/pipeline.hpp"
#include "dsp/batcher.hpp"
#include "dsp/cpu_backend.hpp"
#include "sim/simulator.hpp"
#include "io/file_source.hpp"
#include "io/ring_buffer.hpp"
#include "io/sample_file.hpp"
#include "io/sample_format.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include <unistd.h>

using namespace paq;
using namespace std::chrono_literals;

namespace {

using kind = io::sample_ring::read_result::kind;

std::vector<ci16> random_ci16(std::size_t n, std::uint32_t seed)
{
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int> v(-32768, 32767);
    std::vector<ci16> q(n);
    for (auto& s : q) s = ci16{static_cast<std::int16_t>(v(rng)), static_cast<std::int16_t>(v(rng))};
    return q;
}

bool same_bits(const cf32& a, const cf32& b) { return std::memcmp(&a, &b, sizeof a) == 0; }

// ------------------------------------------------------------------------------------ ring

/// One thing a consumer saw: samples (converted to cf32 for comparison), a gap, or the end.
struct ring_event {
    kind what = kind::timeout;
    std::vector<cf32> samples;
    std::uint64_t lost = 0;
    io::gap_reason reason = io::gap_reason::overflow;
    std::optional<std::pair<std::size_t, std::int64_t>> time;
};

/// The same script of writes, gaps, anchors and reads on a ring of either width: samples are
/// given as ci16 and written as they are (ci16 ring) or converted (cf32 ring). Single-threaded
/// and drop policy, so every overflow and coalescing happens at the same place both times.
struct ring_script {
    const std::vector<ci16>& q;
    float scale;

    std::vector<ring_event> run(io::sample_ring& ring, io::ring_counters& end_counters, std::size_t& accepted_total) const
    {
        std::vector<ring_event> events;
        std::size_t pos = 0;
        accepted_total = 0;
        auto write = [&](std::size_t n) {
            n = std::min(n, q.size() - pos);
            const std::span<const ci16> part(q.data() + pos, n);
            if (ring.is_ci16()) {
                accepted_total += ring.write(part);
            } else {
                std::vector<cf32> x(n);
                for (std::size_t k = 0; k < n; ++k) x[k] = to_cf32(part[k], scale);
                accepted_total += ring.write(std::span<const cf32>(x));
            }
            pos += n;
        };
        auto read = [&](std::size_t max, int times) {
            for (int t = 0; t < times; ++t) {
                ring_event e;
                if (ring.is_ci16()) {
                    std::vector<ci16> buf(max);
                    const auto r = ring.read(std::span<ci16>(buf), 1ms);
                    e.what = r.what;
                    for (std::size_t k = 0; k < r.count; ++k) e.samples.push_back(to_cf32(buf[k], scale));
                    e.lost = r.lost_samples;
                    e.reason = r.reason;
                    if (r.time) e.time = std::make_pair(r.time->offset, r.time->utc_ns);
                } else {
                    std::vector<cf32> buf(max);
                    const auto r = ring.read(std::span<cf32>(buf), 1ms);
                    e.what = r.what;
                    e.samples.assign(buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(r.count));
                    e.lost = r.lost_samples;
                    e.reason = r.reason;
                    if (r.time) e.time = std::make_pair(r.time->offset, r.time->utc_ns);
                }
                if (e.what == kind::timeout) break;
                const bool end = e.what == kind::end;
                events.push_back(std::move(e));
                if (end) break;
            }
        };
        // Anchors and a plain gap; reads across the wrap.
        ring.timestamp(1'700'000'000'000'000'000, 5);
        write(700);
        ring.gap(321, io::gap_reason::lost_packets);
        write(250);
        read(333, 4);
        ring.timestamp(1'700'000'000'100'000'000, 1000);  // a sample of a later write
        write(600);
        write(600);
        read(512, 3);
        // Overflow: the second write of 600 overfills the ring (450 dropped, with the pending
        // anchor of one of them); after a partial read, 1000 fit and 1234 are dropped (with
        // another anchor), and a write into the full ring drops all of it.
        read(4096, 10);
        ring.timestamp(1'700'000'000'200'000'000, 1500);
        write(2234);
        write(77);
        read(300, 2);
        ring.timestamp(1'700'000'000'300'000'000, 10);
        write(400);  // the overflow marker goes in before these
        read(4096, 10);
        // A gap flood beyond max_markers (8): merged, an unknown gap among them.
        for (int k = 0; k < 30; ++k) {
            ring.gap(k == 17 ? 0 : 11, io::gap_reason::lost_packets);
            write(3);
        }
        read(64, 6);  // drain the markers to half: the next write ends the merge
        write(500);
        ring.gap(0, io::gap_reason::reconnect);
        write(90);
        ring.close();
        read(4096, 200);
        end_counters = ring.counters();
        return events;
    }
};

}  // namespace

TEST(ring_ci16, gaps_overflow_anchors_and_counters_are_those_of_the_cf32_ring)
{
    const float scale = 1234.5f;
    const auto q = random_ci16(20'000, 1521);
    const ring_script script{q, scale};
    io::sample_ring r32(1000, io::overflow_policy::drop, io::host_ring_allocator(false), 8);
    io::sample_ring r16(1000, io::overflow_policy::drop, io::host_ring_allocator(false), 8, scale);
    EXPECT_FALSE(r32.is_ci16());
    EXPECT_EQ(r32.sample_bytes(), 8u);
    ASSERT_TRUE(r16.is_ci16());
    EXPECT_EQ(*r16.ci16_scale(), scale);
    EXPECT_EQ(r16.sample_bytes(), 4u);
    io::ring_counters c32, c16;
    std::size_t acc32 = 0, acc16 = 0;
    const auto e32 = script.run(r32, c32, acc32);
    const auto e16 = script.run(r16, c16, acc16);
    ASSERT_EQ(e16.size(), e32.size());
    std::size_t gaps = 0, anchors = 0, samples = 0;
    for (std::size_t i = 0; i < e16.size(); ++i) {
        SCOPED_TRACE("event " + std::to_string(i));
        ASSERT_EQ(e16[i].what, e32[i].what);
        EXPECT_EQ(e16[i].lost, e32[i].lost);
        EXPECT_EQ(e16[i].reason, e32[i].reason);
        EXPECT_EQ(e16[i].time, e32[i].time);
        ASSERT_EQ(e16[i].samples.size(), e32[i].samples.size());
        for (std::size_t k = 0; k < e16[i].samples.size(); ++k) ASSERT_TRUE(same_bits(e16[i].samples[k], e32[i].samples[k]));
        gaps += e16[i].what == kind::gap;
        anchors += e16[i].time.has_value();
        samples += e16[i].samples.size();
    }
    EXPECT_EQ(e16.back().what, kind::end);
    // The script's events happened: the overflow, the merge and its unknown gap, anchors.
    EXPECT_EQ(acc16, acc32);
    EXPECT_EQ(samples, acc16);
    EXPECT_EQ(c16.samples_written, acc16);
    EXPECT_GE(c16.samples_dropped, 450u + 1234u + 77u);
    EXPECT_EQ(c16.samples_written + c16.samples_dropped, 700u + 250 + 1200 + 2234 + 77 + 400 + 30 * 3 + 500 + 90);
    EXPECT_GE(c16.overflows, 2u);
    EXPECT_GT(c16.gaps_coalesced, 0u);
    EXPECT_EQ(c16.anchors_dropped, 2u);  // the two whose samples overflowed
    EXPECT_EQ(c16.anchors, anchors);
    EXPECT_EQ(c16.gaps, gaps);
    // The exact overflow counts reach the reader as gaps; the merged flood as a sum of known
    // gaps followed by a gap of 0 (one of them was of unknown size).
    std::uint64_t overflow_lost = 0;
    bool sum_then_unknown = false;
    for (std::size_t i = 0; i < e16.size(); ++i) {
        if (e16[i].what == kind::gap && e16[i].reason == io::gap_reason::overflow) overflow_lost += e16[i].lost;
        if (i + 1 < e16.size() && e16[i].what == kind::gap && e16[i].reason == io::gap_reason::lost_packets && e16[i].lost > 11 &&
            e16[i + 1].what == kind::gap && e16[i + 1].reason == io::gap_reason::lost_packets && e16[i + 1].lost == 0) {
            sum_then_unknown = true;
        }
    }
    EXPECT_EQ(overflow_lost, c16.samples_dropped);
    EXPECT_TRUE(sum_then_unknown);
    // Field by field, the counters are the cf32 ring's.
    EXPECT_EQ(c16.samples_written, c32.samples_written);
    EXPECT_EQ(c16.samples_read, c32.samples_read);
    EXPECT_EQ(c16.samples_dropped, c32.samples_dropped);
    EXPECT_EQ(c16.overflows, c32.overflows);
    EXPECT_EQ(c16.gaps, c32.gaps);
    EXPECT_EQ(c16.producer_waits, c32.producer_waits);
    EXPECT_EQ(c16.gaps_coalesced, c32.gaps_coalesced);
    EXPECT_EQ(c16.anchors, c32.anchors);
    EXPECT_EQ(c16.anchors_dropped, c32.anchors_dropped);
    EXPECT_EQ(c16.fill, c32.fill);
    EXPECT_EQ(c16.high_water, c32.high_water);
    EXPECT_EQ(c16.capacity, c32.capacity);
}

TEST(ring_ci16, block_policy_delivers_everything_in_order_across_the_wrap)
{
    io::sample_ring ring(1000, io::overflow_policy::block, io::host_ring_allocator(false), io::sample_ring::default_max_markers,
                         3.0f);
    const auto in = random_ci16(150'001, 1522);
    std::thread producer([&] {
        for (std::size_t pos = 0, k = 0; pos < in.size(); ++k) {
            const std::size_t n = std::min<std::size_t>(1 + (k * 37) % 700, in.size() - pos);
            ASSERT_EQ(ring.write(std::span<const ci16>(in.data() + pos, n)), n);
            pos += n;
            if (k % 50 == 0) ring.gap(k, io::gap_reason::lost_packets);
        }
        ring.close();
    });
    std::vector<ci16> out;
    std::vector<ci16> buf(333);
    std::uint64_t lost = 0, gaps = 0;
    for (;;) {
        const auto r = ring.read(std::span<ci16>(buf), 1000ms);
        if (r.what == kind::end) break;
        ASSERT_NE(r.what, kind::timeout);
        if (r.what == kind::gap) {
            ++gaps;
            lost += r.lost_samples;
            continue;
        }
        out.insert(out.end(), buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(r.count));
    }
    producer.join();
    ASSERT_EQ(out.size(), in.size());
    EXPECT_EQ(std::memcmp(out.data(), in.data(), in.size() * sizeof(ci16)), 0);
    const auto c = ring.counters();
    EXPECT_EQ(c.samples_dropped, 0u);
    EXPECT_EQ(c.samples_read, in.size());
    EXPECT_GT(c.producer_waits, 0u);
    EXPECT_LE(c.high_water, 1000u);
    EXPECT_EQ(c.gaps, gaps);
    EXPECT_GT(gaps, 5u);
    std::uint64_t expect_lost = 0;
    for (std::size_t pos = 0, k = 0; pos < in.size(); ++k) {
        pos += std::min<std::size_t>(1 + (k * 37) % 700, in.size() - pos);
        if (k % 50 == 0) expect_lost += k;
    }
    EXPECT_EQ(lost, expect_lost);
}

TEST(ring_ci16, one_width_per_ring_and_the_sink_keeps_the_sources_word)
{
    EXPECT_THROW(io::sample_ring(10, io::overflow_policy::drop, io::host_ring_allocator(false), 8, 0.0f), std::invalid_argument);
    EXPECT_THROW(io::sample_ring(10, io::overflow_policy::drop, io::host_ring_allocator(false), 8, -2.0f), std::invalid_argument);
    EXPECT_THROW(io::sample_ring(10, io::overflow_policy::drop, io::host_ring_allocator(false), 8, std::nanf("")),
                 std::invalid_argument);
    io::sample_ring r16(100, io::overflow_policy::drop, io::host_ring_allocator(false), 8, 100.0f);
    io::sample_ring r32(100, io::overflow_policy::drop, io::host_ring_allocator(false));
    const std::vector<ci16> q = {{100, -200}, {32767, -32768}, {1, 0}};
    const std::vector<cf32> x = {{1.0f, 2.0f}};
    std::vector<ci16> b16(10);
    std::vector<cf32> b32(10);
    // The other width is refused, and nothing is taken.
    EXPECT_THROW((void)r16.write(std::span<const cf32>(x)), std::logic_error);
    EXPECT_THROW((void)r32.write(std::span<const ci16>(q)), std::logic_error);
    EXPECT_THROW((void)r16.read(std::span<cf32>(b32), 1ms), std::logic_error);
    EXPECT_THROW((void)r32.read(std::span<ci16>(b16), 1ms), std::logic_error);
    EXPECT_EQ(r16.counters().samples_written, 0u);
    // The sink: ci16 at the ring's scale goes in as it is; another scale, or cf32 into a ci16
    // ring, is a source breaking its word (ci16_scale()) and throws.
    io::ring_sink s16(r16);
    s16.write_ci16(q, 100.0f);
    EXPECT_THROW(s16.write_ci16(q, 200.0f), std::logic_error);
    EXPECT_THROW(s16.write(x), std::logic_error);
    auto r = r16.read(std::span<ci16>(b16), 1ms);
    ASSERT_EQ(r.count, 3u);
    EXPECT_EQ(std::memcmp(b16.data(), q.data(), 3 * sizeof(ci16)), 0);
    // ci16 into a cf32 ring: converted by the sink (to_cf32), exactly.
    io::ring_sink s32(r32);
    s32.write_ci16(q, 100.0f);
    s32.write(x);
    r = r32.read(std::span<cf32>(b32), 1ms);
    ASSERT_EQ(r.count, 4u);
    for (std::size_t k = 0; k < 3; ++k) EXPECT_TRUE(same_bits(b32[k], to_cf32(q[k], 100.0f))) << k;
    EXPECT_EQ(b32[3], x[0]);
    // The default sink converts too (sources feeding a cf32-only consumer).
    struct collect final : io::sample_sink {
        std::vector<cf32> got;
        void write(std::span<const cf32> s) override { got.insert(got.end(), s.begin(), s.end()); }
        void gap(std::uint64_t, io::gap_reason) override {}
    } c;
    const auto many = random_ci16(10'000, 1523);
    c.write_ci16(many, 7.0f);
    ASSERT_EQ(c.got.size(), many.size());
    for (std::size_t k = 0; k < many.size(); ++k) ASSERT_TRUE(same_bits(c.got[k], to_cf32(many[k], 7.0f))) << k;
}

// -------------------------------------------------------------------------------- pipeline

namespace {

/// Where the stream holds still for an overflow: the recorder tap (on the batcher thread)
/// stops when it has seen `at` samples, until the source has overfilled the ring.
struct hold_point {
    std::size_t at = 0;
    std::mutex m;
    std::condition_variable cv;
    bool holding = false, released = false;
    std::size_t seen = 0;

    void tap(std::size_t n)
    {
        std::unique_lock lk(m);
        seen += n;
        if (seen != at) return;
        holding = true;
        cv.notify_all();
        cv.wait(lk, [&] { return released; });
    }
    void wait_holding()
    {
        std::unique_lock lk(m);
        cv.wait(lk, [&] { return holding; });
    }
    void release()
    {
        std::lock_guard lk(m);
        released = true;
        cv.notify_all();
    }
};

/// A live source that delivers the same samples as ci16 (write_ci16) or cf32 (the ci16
/// converted): a time anchor at the start, a gap of `gap_lost` known samples at `gap_at`, and
/// an overflow at `hold.at` (the ring must be `ring_capacity` samples, drop policy): with the
/// batcher held there, one write of capacity + `overflow` samples, of which exactly
/// `overflow` are dropped. Elsewhere it writes only what fits (no other drop).
class twin_source final : public io::sample_source {
public:
    twin_source(const std::vector<ci16>& q, float scale, bool as_ci16, double rate_hz, const io::sample_ring& ring,
                hold_point& hold, std::size_t gap_at, std::uint64_t gap_lost, std::size_t overflow)
        : q_(q), scale_(scale), as_ci16_(as_ci16), rate_hz_(rate_hz), ring_(ring), hold_(hold), gap_at_(gap_at),
          gap_lost_(gap_lost), overflow_(overflow)
    {
    }
    std::string describe() const override { return as_ci16_ ? "twin (ci16)" : "twin (cf32)"; }
    double sample_rate_hz() const override { return rate_hz_; }
    std::optional<float> ci16_scale() const override { return as_ci16_ ? std::optional<float>(scale_) : std::nullopt; }
    void stop() override { stop_ = true; }
    void run(io::sample_sink& sink) override
    {
        const std::size_t cap = ring_.counters().capacity;
        sink.timestamp({0, 1'750'000'000'123'456'789});
        std::size_t pos = 0, piece = 0;
        while (pos < q_.size() && !stop_) {
            if (pos == gap_at_) sink.gap(gap_lost_, io::gap_reason::lost_packets);
            if (pos == hold_.at) {
                hold_.wait_holding();  // everything before is read; the batcher reads no more
                const std::size_t n = std::min(q_.size() - pos, cap + overflow_);
                deliver(sink, pos, n);
                pos += n;
                hold_.release();
                continue;
            }
            std::size_t n = std::min<std::size_t>(9'000 + 7'777 * (piece++ % 5), q_.size() - pos);
            if (pos < gap_at_) n = std::min(n, gap_at_ - pos);
            if (pos < hold_.at) n = std::min(n, hold_.at - pos);
            // Only what fits: the consumer only ever empties the ring, so nothing is dropped.
            while (!stop_ && ring_.counters().fill + n > cap) std::this_thread::sleep_for(1ms);
            deliver(sink, pos, n);
            pos += n;
        }
    }

private:
    void deliver(io::sample_sink& sink, std::size_t pos, std::size_t n)
    {
        const std::span<const ci16> part(q_.data() + pos, n);
        if (as_ci16_) {
            sink.write_ci16(part, scale_);
        } else {
            std::vector<cf32> x(n);
            io::decode(io::sample_format::ci16_le, reinterpret_cast<const std::byte*>(part.data()), n, x.data(), scale_);
            sink.write(x);
        }
        counters_.samples += n;
    }

    const std::vector<ci16>& q_;
    float scale_;
    bool as_ci16_;
    double rate_hz_;
    const io::sample_ring& ring_;
    hold_point& hold_;
    std::size_t gap_at_;
    std::uint64_t gap_lost_;
    std::size_t overflow_;
    std::atomic<bool> stop_{false};
};

struct live_run {
    daemon::pipeline_stats stats;
    std::vector<dsp::batch_output> published;
    std::vector<cf32> tapped;  ///< what the recorder tap saw
};

live_run run_twin(const std::vector<ci16>& q, float scale, bool as_ci16, double rate_hz, const dsp::receiver_config& rc,
                  std::size_t ring_capacity, std::size_t gap_at, std::uint64_t gap_lost, std::size_t hold_at,
                  std::size_t overflow)
{
    io::sample_ring ring(ring_capacity, io::overflow_policy::drop, io::host_ring_allocator(false),
                         io::sample_ring::default_max_markers, as_ci16 ? std::optional<float>(scale) : std::nullopt);
    hold_point hold;
    hold.at = hold_at;
    twin_source src(q, scale, as_ci16, rate_hz, ring, hold, gap_at, gap_lost, overflow);
    daemon::pipeline_options po;
    po.receiver = rc;
    po.sample_rate_hz = rate_hz;
    po.stall_timeout = 60s;  // no stall: the source is never idle that long
    live_run res;
    po.on_samples = [&](std::span<const cf32> x) {
        res.tapped.insert(res.tapped.end(), x.begin(), x.end());
        hold.tap(x.size());
    };
    std::vector<std::unique_ptr<dsp::batch_processor>> workers;
    for (int i = 0; i < 2; ++i) workers.push_back(std::make_unique<dsp::cpu_backend>(rc));
    daemon::pipeline p(po, src, ring, std::move(workers), {}, [&](const dsp::batch_output& out) { res.published.push_back(out); });
    p.start();
    p.join();
    res.stats = p.stats();
    return res;
}

void expect_same_live(const live_run& a, const live_run& b)
{
    const auto &s = a.stats, &t = b.stats;
    EXPECT_EQ(s.samples_in, t.samples_in);
    EXPECT_EQ(s.gaps, t.gaps);
    EXPECT_EQ(s.gaps_by_reason, t.gaps_by_reason);
    EXPECT_EQ(s.samples_lost_in_gaps, t.samples_lost_in_gaps);
    EXPECT_EQ(s.samples_in_short_segments, t.samples_in_short_segments);
    EXPECT_EQ(s.short_segments, t.short_segments);
    EXPECT_EQ(s.stalls, t.stalls);
    EXPECT_EQ(s.ring.samples_written, t.ring.samples_written);
    EXPECT_EQ(s.ring.samples_read, t.ring.samples_read);
    EXPECT_EQ(s.ring.samples_dropped, t.ring.samples_dropped);
    EXPECT_EQ(s.ring.overflows, t.ring.overflows);
    EXPECT_EQ(s.ring.gaps, t.ring.gaps);
    EXPECT_EQ(s.ring.anchors, t.ring.anchors);
    EXPECT_EQ(s.ring.anchors_dropped, t.ring.anchors_dropped);
    EXPECT_EQ(s.batches_dispatched, t.batches_dispatched);
    EXPECT_EQ(s.batches_published, t.batches_published);
    EXPECT_EQ(s.batches_lost, t.batches_lost);
    EXPECT_EQ(s.first_packet_utc_ns, t.first_packet_utc_ns);
    EXPECT_EQ(s.clock_ppm_last_batch, t.clock_ppm_last_batch);
    const auto &x = s.tally, &y = t.tally;
    EXPECT_EQ(x.samples, y.samples);
    EXPECT_EQ(x.batches, y.batches);
    EXPECT_EQ(x.packets_found, y.packets_found);
    EXPECT_EQ(x.packets_truncated, y.packets_truncated);
    EXPECT_EQ(x.packets_skipped, y.packets_skipped);
    EXPECT_EQ(x.mean_ebn0_db, y.mean_ebn0_db);
    for (int p = 0; p < dsp::chain::num_paths; ++p) {
        const auto &u = x.paths[static_cast<std::size_t>(p)], &v = y.paths[static_cast<std::size_t>(p)];
        EXPECT_EQ(u.bits_checked, v.bits_checked) << u.name;
        EXPECT_EQ(u.bit_errors, v.bit_errors) << u.name;
        EXPECT_EQ(u.resyncs, v.resyncs) << u.name;
        EXPECT_EQ(u.locked, v.locked) << u.name;
    }
    ASSERT_EQ(a.published.size(), b.published.size());
    for (std::size_t i = 0; i < a.published.size(); ++i) {
        const auto &o = a.published[i], &r = b.published[i];
        EXPECT_EQ(o.batch_index, r.batch_index);
        EXPECT_EQ(o.truncated_packets, r.truncated_packets);
        ASSERT_EQ(o.packets.size(), r.packets.size()) << "batch " << i;
        for (std::size_t k = 0; k < o.packets.size(); ++k) {
            const auto &m = o.packets[k], &n = r.packets[k];
            EXPECT_EQ(m.start_sample, n.start_sample);
            EXPECT_EQ(m.utc_ns, n.utc_ns);
            EXPECT_EQ(m.metric, n.metric);
            EXPECT_EQ(m.cfo_rad_per_sample, n.cfo_rad_per_sample);
            EXPECT_EQ(m.sigma2, n.sigma2);
            EXPECT_EQ(m.ebn0_db, n.ebn0_db);
            EXPECT_EQ(m.zf_condition, n.zf_condition);
            EXPECT_EQ(m.flags, n.flags);
            EXPECT_EQ(m.h, n.h);
            EXPECT_EQ(m.clock_ppm, n.clock_ppm);
            for (int p = 0; p < dsp::chain::num_paths; ++p) {
                EXPECT_EQ(m.paths[static_cast<std::size_t>(p)].known_bit_errors, n.paths[static_cast<std::size_t>(p)].known_bit_errors);
                EXPECT_EQ(m.paths[static_cast<std::size_t>(p)].bep_estimate, n.paths[static_cast<std::size_t>(p)].bep_estimate);
            }
        }
        EXPECT_TRUE(o.bits == r.bits) << "batch " << i << ": the bits differ";
    }
    ASSERT_EQ(a.tapped.size(), b.tapped.size());
    if (!a.tapped.empty()) {  // (memcmp of an empty vector's null data is undefined: UBSan)
        EXPECT_EQ(std::memcmp(a.tapped.data(), b.tapped.data(), a.tapped.size() * sizeof(cf32)), 0) << "the recorder saw other samples";
    }
}

}  // namespace

// The live pipeline fed ci16 (a ci16 ring, ci16 windows, converted by the CPU backend) gives
// the bits, records and counters of the same samples fed as cf32: at 2 samples per bit and
// resampled from 25 MS/s with a clock offset, low and high levels, across a source's gap of
// known size and a ring overflow of exact size, with time anchors.
TEST(live_ci16, pipeline_gives_the_bits_records_and_counters_of_the_cf32_stream)
{
    struct run_case {
        double rate_hz;
        double clock_ppm;
        float scale;
        std::uint32_t seed;
    };
    for (const run_case c : {run_case{20.625e6, 0.0, 600.0f, 1531}, run_case{25e6, -60.0, 9000.0f, 1532}}) {
        SCOPED_TRACE("rate " + std::to_string(c.rate_hz) + " scale " + std::to_string(c.scale));
        sim::sim_config sc;
        sc.preset = "two-ray";
        sc.ebn0_db = 13.0;
        sc.cfo_hz = -38'000.0;
        sc.sample_rate_hz = c.rate_hz;
        sc.clock_ppm = c.clock_ppm;
        sc.seed = c.seed;
        sim::simulator sim(sc);
        std::vector<cf32> x;
        sim.generate(static_cast<std::size_t>(0.045 * c.rate_hz), x);
        const auto q = test::quantize(x, c.scale);
        dsp::receiver_config rc = test::small_batches();
        rc.cpu_threads = 1;
        rc.input_sample_rate_hz = c.rate_hz;
        const std::size_t n = q.size();
        const std::size_t gap_at = n / 4 + 1'111, hold_at = n / 2 + 3'333, capacity = 200'000, overflow = 54'321;
        const std::uint64_t gap_lost = 4'567;
        const auto a = run_twin(q, c.scale, true, c.rate_hz, rc, capacity, gap_at, gap_lost, hold_at, overflow);
        const auto b = run_twin(q, c.scale, false, c.rate_hz, rc, capacity, gap_at, gap_lost, hold_at, overflow);
        EXPECT_TRUE(a.stats.input_ci16);
        EXPECT_FALSE(b.stats.input_ci16);
        // The script happened as planned, exactly: one gap, one overflow of `overflow`.
        EXPECT_EQ(a.stats.ring.samples_dropped, overflow);
        EXPECT_EQ(a.stats.ring.overflows, 1u);
        EXPECT_EQ(a.stats.gaps_by_reason[static_cast<std::size_t>(io::gap_reason::lost_packets)], 1u);
        EXPECT_EQ(a.stats.gaps_by_reason[static_cast<std::size_t>(io::gap_reason::overflow)], 1u);
        EXPECT_EQ(a.stats.samples_lost_in_gaps, gap_lost);
        EXPECT_EQ(a.stats.samples_in, n - overflow);
        EXPECT_EQ(a.tapped.size(), n - overflow);
        EXPECT_EQ(a.stats.ring.anchors, 1u);
        EXPECT_EQ(a.stats.batches_lost, 0u);
        EXPECT_GE(a.stats.tally.packets_found, 40u);
        EXPECT_GE(a.stats.tally.packets_truncated, 1u);
        EXPECT_NE(a.stats.first_packet_utc_ns, dsp::unknown_utc_ns);
        expect_same_live(a, b);
        // The recorder's tap saw the ci16 samples converted, exactly as the cf32 source gave them.
        const auto xq = test::decoded(q, c.scale);
        for (std::size_t k : {std::size_t{0}, gap_at - 1, hold_at - 1}) EXPECT_TRUE(same_bits(a.tapped[k], xq[k])) << k;
    }
}

// The registry says the width: input_sample_bytes (metrics, JSON, final log) and input_width
// in the JSON, as paqd replay's summary does.
TEST(live_ci16, counters_say_the_input_width)
{
    runtime::service_snapshot s;
    s.engine.input_ci16 = true;
    EXPECT_EQ(runtime::value_of(s, "input_sample_bytes"), 4.0);
    auto j = runtime::to_json(s);
    EXPECT_EQ(j["input_width"], "ci16");
    EXPECT_EQ(j["input_sample_bytes"], 4);
    EXPECT_NE(runtime::render_prometheus(s).find("paqd_input_sample_bytes 4\n"), std::string::npos);
    bool logged = false;
    for (const auto& line : runtime::final_log_lines(s)) logged = logged || line.find(" input_sample_bytes=4") != std::string::npos;
    EXPECT_TRUE(logged);
    s.engine.input_ci16 = false;
    EXPECT_EQ(runtime::value_of(s, "input_sample_bytes"), 8.0);
    j = runtime::to_json(s);
    EXPECT_EQ(j["input_width"], "cf32");
}

// The real source: a ci16 SigMF recording played by the file source goes into a ci16 ring
// (no conversion on the source thread) and gives what its cf32 twin gives; a pipeline given a
// ring of the wrong width for its source refuses to start.
TEST(live_ci16, file_source_delivers_a_ci16_recording_at_its_width)
{
    const auto dir = std::filesystem::temp_directory_path() / ("paq_live_ci16_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    sim::sim_config sc;
    sc.preset = "edwards3";
    sc.ebn0_db = 12.0;
    sc.sample_rate_hz = 23e6;
    sc.seed = 1533;
    sim::simulator sim(sc);
    std::vector<cf32> x;
    sim.generate(static_cast<std::size_t>(0.02 * sc.sample_rate_hz), x);
    const float scale = 3000.0f;
    const auto xq = test::decoded(test::quantize(x, scale), scale);
    dsp::receiver_config rc = test::small_batches();
    rc.cpu_threads = 1;
    rc.input_sample_rate_hz = sc.sample_rate_hz;
    live_run res[2];
    for (int k = 0; k < 2; ++k) {
        io::sigmf_meta meta;
        meta.format = k == 0 ? io::sample_format::ci16_le : io::sample_format::cf32_le;
        meta.sample_rate_hz = sc.sample_rate_hz;
        meta.ci16_scale = scale;
        const auto base = dir / (k == 0 ? "ci16" : "cf32");
        {
            auto w = io::sample_file_writer::create_sigmf(base, meta);
            w.write(k == 0 ? x : xq);
            w.close();
        }
        io::file_source_config fc;
        fc.path = base.string() + ".sigmf-meta";
        fc.paced = false;
        fc.chunk_samples = 30'000;
        io::file_source src(fc);
        ASSERT_EQ(src.ci16_scale().has_value(), k == 0);
        if (k == 0) {
            EXPECT_EQ(*src.ci16_scale(), scale);
            // A cf32 ring would take the ci16 source (converted by the sink); a ci16 ring at
            // another scale, or a ci16 ring for a cf32 source, is refused before anything starts.
            io::sample_ring wrong(1000, io::overflow_policy::block, io::host_ring_allocator(false), 8, scale * 2.0f);
            daemon::pipeline_options po;
            po.receiver = rc;
            po.sample_rate_hz = sc.sample_rate_hz;
            std::vector<std::unique_ptr<dsp::batch_processor>> w;
            w.push_back(std::make_unique<dsp::cpu_backend>(rc));
            EXPECT_THROW(daemon::pipeline(po, src, wrong, std::move(w), {}, {}), std::invalid_argument);
        }
        io::sample_ring ring(400'000, io::overflow_policy::block, io::host_ring_allocator(false),
                             io::sample_ring::default_max_markers, src.ci16_scale());
        daemon::pipeline_options po;
        po.receiver = rc;
        po.sample_rate_hz = sc.sample_rate_hz;
        std::vector<std::unique_ptr<dsp::batch_processor>> w;
        w.push_back(std::make_unique<dsp::cpu_backend>(rc));
        daemon::pipeline p(po, src, ring, std::move(w), {}, [&](const dsp::batch_output& out) { res[k].published.push_back(out); });
        p.start();
        p.join();
        res[k].stats = p.stats();
        EXPECT_EQ(src.counters().samples.load(), x.size());
        EXPECT_EQ(src.counters().bytes.load(), x.size() * (k == 0 ? 4u : 8u));
        EXPECT_EQ(src.counters().nonfinite.load(), 0u);
    }
    EXPECT_TRUE(res[0].stats.input_ci16);
    EXPECT_FALSE(res[1].stats.input_ci16);
    EXPECT_FALSE(res[1].stats.source_error.has_value());
    EXPECT_FALSE(res[0].stats.source_error.has_value());
    EXPECT_EQ(res[0].stats.samples_in, x.size());
    EXPECT_GE(res[0].stats.tally.packets_found, 20u);
    expect_same_live(res[0], res[1]);
    {
        // cf32 source into a ci16 ring: refused.
        io::file_source_config fc;
        fc.path = (dir / "cf32").string() + ".sigmf-meta";
        io::file_source src(fc);
        io::sample_ring ring16(1000, io::overflow_policy::block, io::host_ring_allocator(false), 8, scale);
        daemon::pipeline_options po;
        po.receiver = rc;
        po.sample_rate_hz = sc.sample_rate_hz;
        std::vector<std::unique_ptr<dsp::batch_processor>> w;
        w.push_back(std::make_unique<dsp::cpu_backend>(rc));
        EXPECT_THROW(daemon::pipeline(po, src, ring16, std::move(w), {}, {}), std::invalid_argument);
    }
    std::filesystem::remove_all(dir);
}

namespace {

/// A ci16 source that writes its samples in uneven chunks (block policy: nothing dropped).
class ci16_chunks_source final : public io::sample_source {
public:
    ci16_chunks_source(std::vector<ci16> q, float scale) : q_(std::move(q)), scale_(scale) {}
    std::string describe() const override { return "ci16 chunks"; }
    double sample_rate_hz() const override { return 20.625e6; }
    std::optional<float> ci16_scale() const override { return scale_; }
    void stop() override { stop_ = true; }
    void run(io::sample_sink& sink) override
    {
        for (std::size_t pos = 0, k = 0; pos < q_.size() && !stop_; ++k) {
            const std::size_t n = std::min<std::size_t>(20'000 + 3'001 * (k % 9), q_.size() - pos);
            sink.write_ci16(std::span<const ci16>(q_.data() + pos, n), scale_);
            counters_.samples += n;
            pos += n;
        }
    }

private:
    std::vector<ci16> q_;
    float scale_;
    std::atomic<bool> stop_{false};
};

}  // namespace

// The windows of a ci16 ring are ci16 (4 bytes a sample), page-locked once each at that size,
// recycled, and unlocked only once the pipeline is gone.
TEST(live_ci16, windows_are_ci16_locked_once_at_4_bytes_a_sample_and_recycled)
{
    sim::sim_config sc;
    sc.preset = "awgn";
    sc.ebn0_db = 11.0;
    sc.seed = 1534;
    const auto sim = test::simulate(sc, 110);
    const float scale = 5000.0f;
    auto rc = test::small_batches();
    rc.cpu_threads = 1;
    std::vector<std::unique_ptr<dsp::batch_processor>> w;
    auto backend = std::make_unique<test::pinning_backend>(rc);
    auto* be = backend.get();
    w.push_back(std::move(backend));
    std::vector<std::weak_ptr<void>> pins;
    {
        ci16_chunks_source src(test::quantize(sim.samples, scale), scale);
        io::sample_ring ring(300'000, io::overflow_policy::block, io::host_ring_allocator(false),
                             io::sample_ring::default_max_markers, scale);
        daemon::pipeline_options po;
        po.receiver = rc;
        po.sample_rate_hz = 20.625e6;
        daemon::pipeline p(po, src, ring, std::move(w), {}, [](const dsp::batch_output&) {});
        p.start();
        p.join();
        const auto st = p.stats();
        const std::size_t window = rc.batch_samples + dsp::batch_guard_before + dsp::batch_guard_after;
        std::lock_guard lk(be->mu);
        pins = be->handles();
        EXPECT_TRUE(st.input_ci16);
        EXPECT_EQ(st.samples_in, sim.samples.size());
        EXPECT_EQ(st.ring.samples_dropped, 0u);
        EXPECT_GT(st.ring.producer_waits, 0u);  // the ring (300k) is smaller than the stream
        EXPECT_GT(be->batches, 8u);
        EXPECT_EQ(be->not_ci16, 0u);
        EXPECT_EQ(be->unpinned, 0u);
        EXPECT_GE(pins.size(), 2u);
        EXPECT_LE(pins.size(), 8u);  // a few circulate
        EXPECT_EQ(st.windows, pins.size());
        EXPECT_EQ(st.windows_locked, pins.size());
        for (const auto& pin : be->pins) EXPECT_EQ(pin.bytes, window * sizeof(ci16));
        EXPECT_GT(st.tally.packets_found, 90u);
        for (const auto& h : pins) EXPECT_FALSE(h.expired()) << "a window was unlocked while the pipeline lives";
    }
    for (const auto& h : pins) EXPECT_TRUE(h.expired());
}
