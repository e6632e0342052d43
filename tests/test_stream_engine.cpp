// The one stream engine (runtime/stream_engine.hpp) and its two feeds: a recording read in
// order (replay) and a live source's ring (paqd). The same samples through either feed give
// the same bits; every sample and batch is accounted for; the error policies of replay (the
// first error ends the run) and live (counted, logged, the run goes on).
#include "dsp/cpu_backend.hpp"
#include "pinning_backend.hpp"
#include "sim/simulator.hpp"
#include "io/ring_buffer.hpp"
#include "runtime/feed.hpp"
#include "runtime/stream_engine.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

using namespace paq;
using namespace paq::runtime;
using kind = feed::result::kind;

namespace {

/// A multipath recording at an input rate other than two samples a bit, with a clock
/// offset, a level far from unity and IQ imbalance: the receiver resamples, re-times and
/// corrects, as it does for a field signal.
struct recording {
    sim::sim_config sc;
    std::vector<cf32> x;
};

recording make_recording(double seconds)
{
    recording r;
    r.sc.preset = "edwards3";
    r.sc.ebn0_db = 13.0;
    r.sc.cfo_hz = -23e3;
    r.sc.seed = 90'421;
    r.sc.sample_rate_hz = 25e6;
    r.sc.clock_ppm = 35.0;
    r.sc.gain_db = -27.0;
    r.sc.iq_gain_db = 2.0;
    r.sc.iq_phase_deg = 8.0;
    r.sc.dc_offset_dbc = -20.0;
    sim::simulator sim(r.sc);
    sim.generate(static_cast<std::size_t>(seconds * r.sc.sample_rate_hz), r.x);
    return r;
}

dsp::receiver_config receiver_for(const sim::sim_config& sc)
{
    dsp::receiver_config rc;
    rc.batch_samples = 700'000;
    rc.input_sample_rate_hz = sc.sample_rate_hz;
    rc.front_end_correction = 1;
    return rc;
}

std::unique_ptr<worker_pool> cpu_pool(const dsp::receiver_config& rc, std::size_t workers = 1)
{
    std::vector<std::unique_ptr<dsp::batch_processor>> backends;
    for (std::size_t w = 0; w < workers; ++w) backends.push_back(std::make_unique<dsp::cpu_backend>(rc));
    return std::make_unique<worker_pool>(std::move(backends), worker_pool::backend_factory{}, 2);
}

stream_options options_for(const dsp::receiver_config& rc, double rate)
{
    stream_options o;
    o.receiver = rc;
    o.sample_rate_hz = rate;
    return o;
}

/// Reads `x` in pieces of `step` samples.
reader_feed<cf32>::read_fn reader_of(const std::vector<cf32>& x, std::size_t step)
{
    auto pos = std::make_shared<std::size_t>(0);
    return [&x, pos, step](std::span<cf32> out) {
        const std::size_t n = std::min({out.size(), x.size() - *pos, step});
        std::copy_n(x.begin() + static_cast<std::ptrdiff_t>(*pos), n, out.begin());
        *pos += n;
        return n;
    };
}

void expect_same_bits(const dsp::run_summary& a, const dsp::run_summary& b)
{
    EXPECT_EQ(a.samples, b.samples);
    EXPECT_EQ(a.packets_found, b.packets_found);
    EXPECT_EQ(a.packets_truncated, b.packets_truncated);
    ASSERT_EQ(a.paths.size(), b.paths.size());
    for (std::size_t p = 0; p < a.paths.size(); ++p) {
        EXPECT_EQ(a.paths[p].bits_checked, b.paths[p].bits_checked) << a.paths[p].name;
        EXPECT_EQ(a.paths[p].bit_errors, b.paths[p].bit_errors) << a.paths[p].name;
        EXPECT_EQ(a.paths[p].packets, b.paths[p].packets) << a.paths[p].name;
    }
}

}  // namespace

TEST(reader_feed, marks_time_the_reads_and_each_gap_comes_where_it_lies)
{
    using mark = io::recording_mark;
    std::vector<cf32> x(1000, cf32(1.0f, 0.0f));
    const std::vector<mark> marks = {
        {0, mark::kind::gap, 0, io::gap_reason::discontinuity, 0},  // before the first sample: none
        {0, mark::kind::time, 0, {}, 5'000},
        {300, mark::kind::time, 0, {}, 9'000},
        {700, mark::kind::gap, 0, io::gap_reason::discontinuity, 0},
        {700, mark::kind::gap, 4321, io::gap_reason::lost_packets, 0},
        {700, mark::kind::time, 0, {}, 20'000},
    };
    reader_feed<cf32> f(reader_of(x, 1000), marks, std::nullopt);
    EXPECT_FALSE(f.ci16_scale());
    std::vector<cf32> buf(5000);
    auto r = f.read(buf, std::chrono::milliseconds(0));
    ASSERT_EQ(r.what, kind::samples);
    EXPECT_EQ(r.count, 300u) << "a read stops at the next anchor";
    ASSERT_TRUE(r.time);
    EXPECT_EQ(r.time->offset, 0u);
    EXPECT_EQ(r.time->utc_ns, 5'000);
    r = f.read(buf, std::chrono::milliseconds(0));
    ASSERT_EQ(r.what, kind::samples);
    EXPECT_EQ(r.count, 400u);
    ASSERT_TRUE(r.time);
    EXPECT_EQ(r.time->utc_ns, 9'000);
    r = f.read(buf, std::chrono::milliseconds(0));
    ASSERT_EQ(r.what, kind::gap);
    EXPECT_EQ(r.reason, io::gap_reason::discontinuity);
    EXPECT_EQ(r.lost_samples, 0u) << "a discontinuity's size is unknown";
    r = f.read(buf, std::chrono::milliseconds(0));
    ASSERT_EQ(r.what, kind::gap) << "two gaps at one sample: both, in order";
    EXPECT_EQ(r.reason, io::gap_reason::lost_packets);
    EXPECT_EQ(r.lost_samples, 4321u);
    r = f.read(buf, std::chrono::milliseconds(0));
    ASSERT_EQ(r.what, kind::samples);
    EXPECT_EQ(r.count, 300u);
    ASSERT_TRUE(r.time);
    EXPECT_EQ(r.time->utc_ns, 20'000);
    r = f.read(buf, std::chrono::milliseconds(0));
    EXPECT_EQ(r.what, kind::end);
    EXPECT_EQ(f.read(buf, std::chrono::milliseconds(0)).what, kind::end) << "the end stays the end";
    EXPECT_EQ(f.samples_read(), 1000u);
    std::vector<ci16> narrow(10);
    EXPECT_THROW((void)f.read(narrow, std::chrono::milliseconds(0)), std::logic_error);
}

TEST(stream_engine, the_ring_feed_and_the_reader_feed_give_the_same_bits)
{
    const auto rec = make_recording(0.12);
    const auto rc = receiver_for(rec.sc);

    // Replay: the recording read in uneven pieces.
    auto replay_pool = cpu_pool(rc);
    reader_feed<cf32> reader(reader_of(rec.x, 123'457), {}, std::nullopt);
    std::uint64_t replay_batches = 0;
    stream_engine replay(options_for(rc, rec.sc.sample_rate_hz), reader, ready_pool(*replay_pool),
                         {[&](const dsp::batch_output&) { ++replay_batches; }});
    const stream_stats a = replay.run();

    // Live: a source thread writing the same samples into a small ring that blocks when full,
    // two workers, the engine's live policy.
    io::sample_ring ring(300'000, io::overflow_policy::block, io::host_ring_allocator(false));
    auto live_pool = cpu_pool(rc, 2);
    ring_feed live_feed(ring);
    auto o = options_for(rc, rec.sc.sample_rate_hz);
    o.stall_timeout = std::chrono::milliseconds(5000);
    o.end_on_error = false;
    std::uint64_t live_batches = 0;
    stream_engine live(o, live_feed, ready_pool(*live_pool), {[&](const dsp::batch_output&) { ++live_batches; }});
    std::thread producer([&] {
        for (std::size_t k = 0; k < rec.x.size(); k += 77'777) {
            const std::size_t n = std::min<std::size_t>(77'777, rec.x.size() - k);
            (void)ring.write(std::span<const cf32>(rec.x.data() + k, n));
        }
        ring.close();
    });
    const stream_stats b = live.run();
    producer.join();

    ASSERT_GT(a.tally.packets_found, 150u);
    expect_same_bits(a.tally, b.tally);
    EXPECT_EQ(a.samples_in, rec.x.size());
    EXPECT_EQ(b.samples_in, rec.x.size());
    EXPECT_EQ(a.batches_published, replay_batches);
    EXPECT_EQ(b.batches_published, live_batches);
    EXPECT_EQ(a.batches_published, b.batches_published);
    EXPECT_EQ(a.batches_dispatched, a.batches_published);
    EXPECT_EQ(a.batches_lost + b.batches_lost, 0u);
    EXPECT_EQ(a.gaps + b.gaps, 0u);
    EXPECT_TRUE(a.finished);
    EXPECT_TRUE(b.finished);
    EXPECT_GT(a.tally.packets_front_end_corrected, 0u) << "the front end was corrected on both";
    EXPECT_EQ(a.tally.packets_front_end_corrected, b.tally.packets_front_end_corrected);
    EXPECT_GE(a.windows, 1u);
    EXPECT_LE(a.windows, 8u) << "the windows circulate";
}

TEST(stream_engine, replay_ends_at_the_first_sink_error_and_live_counts_and_goes_on)
{
    const auto rec = make_recording(0.1);
    auto rc = receiver_for(rec.sc);
    rc.batch_samples = 400'000;
    for (const bool end_on_error : {true, false}) {
        SCOPED_TRACE(end_on_error ? "replay" : "live");
        auto pool = cpu_pool(rc);
        reader_feed<cf32> reader(reader_of(rec.x, 1 << 20), {}, std::nullopt);
        auto o = options_for(rc, rec.sc.sample_rate_hz);
        o.end_on_error = end_on_error;
        std::uint64_t seen = 0, after = 0;
        stream_engine engine(o, reader, ready_pool(*pool),
                             {[&](const dsp::batch_output& out) {
                                  ++seen;
                                  if (out.batch_index == 1) throw std::runtime_error("the sink's disk is full");
                              },
                              [&](const dsp::batch_output&) { ++after; }});
        if (end_on_error) {
            try {
                (void)engine.run();
                ADD_FAILURE() << "no error";
            } catch (const std::runtime_error& e) {
                EXPECT_STREQ(e.what(), "the sink's disk is full");
            }
            EXPECT_EQ(seen, 2u) << "nothing goes through the sinks after the error";
            EXPECT_EQ(after, 1u) << "the sinks after the failing one do not see its batch";
            const auto s = engine.stats();
            EXPECT_TRUE(s.finished);
            EXPECT_EQ(s.batches_published, 1u);
        } else {
            const auto s = engine.run();
            EXPECT_GE(seen, 4u);
            EXPECT_EQ(after, seen) << "the other sinks see every batch";
            EXPECT_EQ(s.batches_published, seen);
            EXPECT_EQ(s.batches_lost, 0u);
        }
    }
}

// Windows read while the backends are being made: all are locked before the first batch goes
// on (a lock holds up the backend's own calls to the driver, so the locks are done
// before the device has work); no batch reaches a backend in a window that is not locked.
TEST(stream_engine, windows_read_during_setup_are_all_locked_before_the_first_batch)
{
    const auto rec = make_recording(0.2);
    const auto rc = receiver_for(rec.sc);
    std::vector<std::unique_ptr<dsp::batch_processor>> backends;
    // A lock takes 100 ms, as long as a large window's registration can on a loaded machine.
    backends.push_back(std::make_unique<test::pinning_backend>(rc, std::chrono::milliseconds(100)));
    auto* be = static_cast<test::pinning_backend*>(backends.front().get());
    auto pool = std::make_unique<worker_pool>(std::move(backends), worker_pool::backend_factory{}, 2);
    // The pool is "made" only once the reader has read three windows' worth.
    auto read = std::make_shared<std::atomic<std::size_t>>(0);
    auto reader_fn = [&x = rec.x, read](std::span<cf32> out) {
        const std::size_t at = read->load();
        const std::size_t n = std::min({out.size(), x.size() - at, std::size_t{100'000}});
        std::copy_n(x.begin() + static_cast<std::ptrdiff_t>(at), n, out.begin());
        read->store(at + n);
        return n;
    };
    std::promise<worker_pool*> made;
    std::thread maker([&] {
        while (read->load() < 3 * rc.batch_samples + 200'000 && read->load() < rec.x.size()) {
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        made.set_value(pool.get());
    });
    reader_feed<cf32> reader(reader_fn, {}, std::nullopt);
    stream_engine engine(options_for(rc, rec.sc.sample_rate_hz), reader, made.get_future().share(), {});
    const stream_stats st = engine.run();
    maker.join();
    std::lock_guard lk(be->mu);
    ASSERT_GE(be->batches, 5u);
    EXPECT_EQ(be->unpinned, 0u);
    ASSERT_GE(be->pins.size(), 3u);
    std::set<const void*> locked_before_any_batch;
    for (const auto& p : be->pins) {
        if (p.batches_begun == 0) locked_before_any_batch.insert(p.data);
    }
    for (std::uint64_t b = 0; b < 3; ++b) {
        EXPECT_EQ(locked_before_any_batch.count(be->window_of(b)), 1u) << "batch " << b << "'s window, read during the setup, was locked before the first batch";
    }
    EXPECT_EQ(st.windows, be->pins.size()) << "every window once";
    EXPECT_EQ(st.windows_locked, st.windows);
    EXPECT_GE(st.windows, 3u) << "three windows were read before the pool existed";
    EXPECT_EQ(st.batches_lost, 0u);
}

TEST(stream_engine, a_pool_that_cannot_be_made_is_the_runs_error)
{
    const auto rec = make_recording(0.02);
    const auto rc = receiver_for(rec.sc);
    std::promise<worker_pool*> made;
    made.set_exception(std::make_exception_ptr(std::runtime_error("no CUDA device")));
    reader_feed<cf32> reader(reader_of(rec.x, 1 << 20), {}, std::nullopt);
    stream_engine engine(options_for(rc, rec.sc.sample_rate_hz), reader, made.get_future().share(), {});
    try {
        (void)engine.run();
        ADD_FAILURE() << "no error";
    } catch (const std::runtime_error& e) {
        EXPECT_STREQ(e.what(), "no CUDA device");
    }
}

TEST(stream_engine, an_abort_counts_what_it_cuts_short_as_lost)
{
    // Live: the source writes the whole recording, the engine is aborted after the first
    // published batch; the batches cut after it come out lost, with their samples counted.
    const auto rec = make_recording(0.15);
    auto rc = receiver_for(rec.sc);
    rc.batch_samples = 300'000;
    io::sample_ring ring(rec.x.size() + 1, io::overflow_policy::block, io::host_ring_allocator(false));
    (void)ring.write(std::span<const cf32>(rec.x));
    ring.close();
    auto pool = cpu_pool(rc);
    ring_feed f(ring);
    auto o = options_for(rc, rec.sc.sample_rate_hz);
    o.end_on_error = false;
    o.stall_timeout = std::chrono::milliseconds(2000);
    stream_engine* self = nullptr;
    stream_engine engine(o, f, ready_pool(*pool), {[&](const dsp::batch_output&) { self->abort(); }});
    self = &engine;
    const auto s = engine.run();
    EXPECT_GE(s.batches_published, 1u);
    EXPECT_GT(s.batches_lost, 0u);
    EXPECT_EQ(s.batches_published + s.batches_lost, s.batches_dispatched);
    EXPECT_EQ(s.samples_in, rec.x.size()) << "the ring was read to its end";
    EXPECT_GT(s.samples_in_lost_batches, 0u);
}
