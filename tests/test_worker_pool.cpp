// runtime::worker_pool: the one pool under paqd (live and replay) and
// paq-bench --gpus. Results in submission order whatever order the workers finish in, the
// CPU fallback, nothing lost uncounted, a producer held back by a slow consumer, the
// watchdog's view of a stuck worker, and every window handed back.
#include "runtime/window_pool.hpp"
#include "runtime/worker_pool.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>

using namespace paq;
using namespace std::chrono_literals;

namespace {

/// Returns the batch index; sleeps longer for earlier batches (so later ones finish first),
/// throws for the indices in `fail`, blocks on `hold` while it is set.
class scripted final : public dsp::batch_processor {
public:
    explicit scripted(std::string name = "scripted", std::set<std::uint64_t> fail = {}) : name_(std::move(name)), fail_(std::move(fail)) {}
    std::atomic<int> calls{0};
    std::atomic<bool>* hold = nullptr;

    using dsp::batch_processor::process;
    void process(const dsp::sample_batch& b, dsp::batch_output& out) override
    {
        ++calls;
        while (hold && *hold) std::this_thread::sleep_for(1ms);
        if (fail_.count(b.index)) throw std::runtime_error(name_ + " failed on batch " + std::to_string(b.index));
        std::this_thread::sleep_for(std::chrono::milliseconds(b.index % 4 == 0 ? 6 : 1));
        out.reset(b.index, dsp::chain::num_paths);
        out.bits.assign(8, static_cast<std::uint8_t>(b.index));
    }
    std::string name() const override { return name_; }

private:
    std::string name_;
    std::set<std::uint64_t> fail_;
};

dsp::sample_batch make_batch(std::uint64_t index, std::size_t samples = 100)
{
    dsp::sample_batch b;
    b.index = index;
    b.samples.assign(samples, cf32(static_cast<float>(index), 0.0f));
    b.owned_begin = 10;
    b.owned_end = samples - 10;
    return b;
}

/// Submits batches 0 .. n - 1 of `samples` samples from a thread of its own (submit blocks
/// while the consumer has not taken enough), then closes the pool.
std::thread produce(runtime::worker_pool& pool, std::uint64_t n, std::size_t samples = 100)
{
    return std::thread([&pool, n, samples] {
        for (std::uint64_t i = 0; i < n; ++i) pool.submit(make_batch(i, samples));
        pool.close();
    });
}

std::vector<std::unique_ptr<dsp::batch_processor>> backends(int n, std::set<std::uint64_t> fail = {})
{
    std::vector<std::unique_ptr<dsp::batch_processor>> v;
    for (int i = 0; i < n; ++i) v.push_back(std::make_unique<scripted>("w" + std::to_string(i), fail));
    return v;
}

}  // namespace

TEST(worker_pool, results_come_out_in_submission_order_whatever_order_the_workers_finish_in)
{
    for (const int workers : {1, 3, 4}) {
        runtime::worker_pool pool(backends(workers), {}, 2);
        EXPECT_EQ(pool.workers(), static_cast<std::size_t>(workers));
        constexpr std::uint64_t n = 40;
        auto producer = produce(pool, n);
        std::uint64_t expect = 0;
        while (auto r = pool.next()) {
            ASSERT_TRUE(r->out);
            EXPECT_EQ(r->out->batch_index, expect);
            EXPECT_EQ(r->batch.index, expect);
            EXPECT_EQ(r->batch.samples.size(), 100u);  // no recycle function: the window comes back
            ++expect;
        }
        producer.join();
        EXPECT_EQ(expect, n);
        const auto c = pool.stats();
        EXPECT_EQ(c.batches_submitted, n);
        EXPECT_EQ(c.batches_done, n);
        EXPECT_EQ(c.batches_lost, 0u);
        EXPECT_GT(c.process_s, 0.0);
    }
}

TEST(worker_pool, a_failing_backend_falls_back_and_without_a_fallback_its_batch_is_lost_and_counted)
{
    {
        std::atomic<int> fallbacks_made{0};
        runtime::worker_pool pool(backends(2, {3, 7}), [&] {
            ++fallbacks_made;
            return std::make_unique<scripted>("cpu");
        }, 2);
        auto producer = produce(pool, 10);
        std::uint64_t expect = 0;
        while (auto r = pool.next()) {
            ASSERT_TRUE(r->out) << expect;
            EXPECT_EQ(r->out->batch_index, expect);
            EXPECT_EQ(r->on_fallback, expect == 3 || expect == 7);
            EXPECT_FALSE(r->error);
            ++expect;
        }
        producer.join();
        EXPECT_EQ(expect, 10u);
        const auto c = pool.stats();
        EXPECT_EQ(c.backend_errors, 2u);
        EXPECT_EQ(c.batches_on_fallback, 2u);
        EXPECT_EQ(c.batches_lost, 0u);
        EXPECT_EQ(fallbacks_made, 1);  // made once, when first needed
    }
    {
        runtime::worker_pool pool(backends(2, {5}), {}, 2);
        auto producer = produce(pool, 8, 1000);
        std::uint64_t seen = 0;
        while (auto r = pool.next()) {
            if (r->batch.index == 5) {
                EXPECT_FALSE(r->out);
                ASSERT_TRUE(r->error);
                try {
                    std::rethrow_exception(r->error);
                } catch (const std::runtime_error& e) {
                    const std::string what = e.what();
                    EXPECT_TRUE(what == "w0 failed on batch 5" || what == "w1 failed on batch 5") << what;
                } catch (...) {
                    ADD_FAILURE() << "not the backend's exception";
                }
            } else {
                EXPECT_TRUE(r->out);
            }
            ++seen;
        }
        producer.join();
        EXPECT_EQ(seen, 8u);  // the lost batch comes out too, in its place
        const auto c = pool.stats();
        EXPECT_EQ(c.backend_errors, 1u);
        EXPECT_EQ(c.batches_lost, 1u);
        EXPECT_EQ(c.samples_in_lost_batches, 980u);  // its owned samples
    }
}

TEST(worker_pool, after_abort_nothing_new_is_processed_and_every_batch_is_still_accounted_for)
{
    std::atomic<bool> hold{true};
    std::vector<std::unique_ptr<dsp::batch_processor>> v;
    auto b = std::make_unique<scripted>();
    b->hold = &hold;
    auto* raw = b.get();
    v.push_back(std::move(b));
    runtime::worker_pool pool(std::move(v), {}, 1);
    pool.submit(make_batch(0));  // taken by the worker, held
    while (raw->calls == 0) std::this_thread::sleep_for(1ms);
    pool.submit(make_batch(1));  // queued
    std::thread producer([&] {
        pool.submit(make_batch(2));  // blocks: the queue is full
        pool.submit(make_batch(3));  // after abort: not even queued
        pool.close();
    });
    std::this_thread::sleep_for(50ms);
    pool.abort();
    hold = false;
    producer.join();
    std::vector<std::uint64_t> done, lost;
    while (auto r = pool.next()) (r->out ? done : lost).push_back(r->batch.index);
    EXPECT_EQ(done, (std::vector<std::uint64_t>{0, 1}));  // what was under way finishes
    EXPECT_EQ(lost, (std::vector<std::uint64_t>{2, 3}));
    const auto c = pool.stats();
    EXPECT_EQ(c.batches_submitted, 4u);
    EXPECT_EQ(c.batches_lost, 2u);
    EXPECT_EQ(c.samples_in_lost_batches, 160u);
    EXPECT_EQ(raw->calls, 2);
}

TEST(worker_pool, a_slow_consumer_holds_the_producer_back)
{
    // queue_depth 2 and 2 workers: at most 4 batches between submit() and next().
    runtime::worker_pool pool(backends(2), {}, 2);
    std::atomic<int> submitted{0};
    std::thread producer([&] {
        for (std::uint64_t i = 0; i < 12; ++i) {
            pool.submit(make_batch(i));
            ++submitted;
        }
        pool.close();
    });
    std::this_thread::sleep_for(200ms);
    EXPECT_EQ(submitted, 4);
    int taken = 0;
    while (auto r = pool.next()) {
        ++taken;
        EXPECT_LE(submitted - taken, 4);
    }
    producer.join();
    EXPECT_EQ(taken, 12);
}

TEST(worker_pool, the_watchdog_sees_a_stuck_worker_and_every_window_is_handed_back)
{
    std::atomic<bool> hold{true};
    std::vector<std::unique_ptr<dsp::batch_processor>> v;
    auto b = std::make_unique<scripted>();
    b->hold = &hold;
    v.push_back(std::move(b));
    std::mutex m;
    std::set<float> windows;
    std::atomic<int> with_output{0};
    runtime::worker_pool pool(std::move(v), {}, 2, [&](dsp::sample_batch& done, const dsp::batch_output* out) {
        const std::vector<cf32> w = std::move(done.samples);
        if (out && out->batch_index == done.index) ++with_output;  // processed: its output beside it
        std::lock_guard lk(m);
        windows.insert(w.front().real());
    });
    EXPECT_TRUE(pool.healthy(20ms));
    pool.submit(make_batch(0));
    std::this_thread::sleep_for(60ms);
    EXPECT_FALSE(pool.healthy(20ms));
    EXPECT_TRUE(pool.healthy(10s));
    hold = false;
    std::thread producer([&] {
        for (std::uint64_t i = 1; i < 5; ++i) pool.submit(make_batch(i));
        pool.close();
    });
    int n = 0;
    while (auto r = pool.next()) {
        EXPECT_TRUE(r->batch.samples.empty());  // the recycle function has it
        ++n;
    }
    producer.join();
    EXPECT_EQ(n, 5);
    EXPECT_TRUE(pool.healthy(20ms));
    EXPECT_EQ(windows, (std::set<float>{0.0f, 1.0f, 2.0f, 3.0f, 4.0f}));
    EXPECT_EQ(with_output.load(), 5);
}

TEST(worker_pool, refuses_no_workers_and_a_zero_queue)
{
    EXPECT_THROW(runtime::worker_pool(backends(0), {}, 2), std::invalid_argument);
    EXPECT_THROW(runtime::worker_pool(backends(1), {}, 0), std::invalid_argument);
    runtime::worker_pool pool(backends(1), {}, 1);
    pool.close();
    EXPECT_FALSE(pool.next());
    EXPECT_THROW(pool.submit(make_batch(0)), std::logic_error);
}

TEST(worker_pool, an_output_given_back_is_written_again)
{
    // paqd hands each result's output back after publishing it: the next batch is written
    // into the same vectors, so no batch allocates its output afresh.
    runtime::worker_pool pool(backends(1), {}, 1);
    pool.submit(make_batch(0));
    auto first = pool.next();
    ASSERT_TRUE(first && first->out);
    const auto* storage = first->out->bits.data();
    pool.give_back(std::move(*first->out));
    pool.submit(make_batch(1));
    auto second = pool.next();
    ASSERT_TRUE(second && second->out);
    EXPECT_EQ(second->out->bits.data(), storage);
    EXPECT_EQ(second->out->batch_index, 1u);
    EXPECT_EQ(second->out->bits, std::vector<std::uint8_t>(8, 1));
    pool.close();
    EXPECT_FALSE(pool.next());
}

namespace {

/// Reports stage times for each batch it processes with timing on: stage "a" index + 1 ms,
/// stage "b" 2 ms, a span of 10 + index ms; none for batch 2 (as a backend whose call was not timed).
class timed final : public dsp::batch_processor {
public:
    using dsp::batch_processor::process;
    void process(const dsp::sample_batch& b, dsp::batch_output& out) override
    {
        out.reset(b.index, dsp::chain::num_paths);
        last_ = {};
        if (!on_ || b.index == 2) return;
        last_.batches = 1;
        last_.stage_ms = {{"a", static_cast<double>(b.index) + 1.0}, {"b", 2.0}};
        last_.device_span_ms = 10.0 + static_cast<double>(b.index);
        last_.host_total_ms = 11.0;
    }
    std::string name() const override { return "timed"; }
    void set_stage_timing(bool on) override { on_ = on; }
    bool last_stage_times(dsp::stage_times& out) const override
    {
        if (last_.batches == 0) return false;
        out = last_;
        return true;
    }

private:
    bool on_ = false;
    dsp::stage_times last_;
};

}  // namespace

TEST(worker_pool, sums_the_stage_times_of_the_batches_its_backends_timed_the_first_apart)
{
    std::vector<std::unique_ptr<dsp::batch_processor>> v;
    v.push_back(std::make_unique<timed>());
    v.front()->set_stage_timing(true);
    runtime::worker_pool pool(std::move(v), {}, 1);
    auto producer = produce(pool, 5);
    while (pool.next()) {
    }
    producer.join();
    // The worker's first timed batch (0) apart; the rest summed (batch 2 was not timed).
    const auto first = pool.stats().stages_first;
    EXPECT_EQ(first.batches, 1u);
    ASSERT_EQ(first.stage_ms.size(), 2u);
    EXPECT_DOUBLE_EQ(first.stage_ms[0].second, 1.0);
    EXPECT_DOUBLE_EQ(first.device_span_ms, 10.0);
    const auto st = pool.stats().stages;
    EXPECT_EQ(st.batches, 3u);  // 1, 3 and 4
    ASSERT_EQ(st.stage_ms.size(), 2u);
    EXPECT_EQ(st.stage_ms[0].first, "a");
    EXPECT_DOUBLE_EQ(st.stage_ms[0].second, 2.0 + 4.0 + 5.0);
    EXPECT_DOUBLE_EQ(st.stage_ms[1].second, 6.0);
    EXPECT_DOUBLE_EQ(st.device_span_ms, 30.0 + 1.0 + 3.0 + 4.0);
    EXPECT_DOUBLE_EQ(st.host_total_ms, 33.0);
    EXPECT_DOUBLE_EQ(st.device_span_max_ms, 14.0);  // batch 4's
    EXPECT_DOUBLE_EQ(st.host_total_max_ms, 11.0);

    // A backend without stage timing says so when asked for it, and reports none.
    auto plain = std::make_unique<scripted>("plain");
    EXPECT_NO_THROW(plain->set_stage_timing(false));
    try {
        plain->set_stage_timing(true);
        ADD_FAILURE() << "stage timing accepted by a backend without it";
    } catch (const std::runtime_error& e) {
        EXPECT_NE(std::string(e.what()).find("plain backend: no stage timing"), std::string::npos) << e.what();
    }
    dsp::stage_times none;
    EXPECT_FALSE(plain->last_stage_times(none));
}

// ------------------------------------------------------------------------------ window pool
// runtime::window_pool: the stream engine's batch windows, made at a full window's capacity,
// lent and given back, and page-locked by the pool's lock function (runtime/window_pool.hpp).

namespace {

/// A lock function that records each range it locked; a handle's end is an unlock.
struct lock_log {
    std::mutex mu;
    std::vector<std::pair<const void*, std::size_t>> locked;
    std::vector<std::weak_ptr<void>> handles;
    runtime::window_pool<ci16>::lock_fn fn()
    {
        return [this](const void* data, std::size_t bytes) {
            std::lock_guard lk(mu);
            locked.emplace_back(data, bytes);
            auto h = std::make_shared<int>(0);
            handles.push_back(h);
            return std::shared_ptr<void>(h);
        };
    }
};

}  // namespace

TEST(window_pool, lends_full_windows_and_takes_back_only_its_own)
{
    runtime::window_pool<ci16> pool(5000);
    auto a = pool.acquire();
    auto b = pool.acquire();
    EXPECT_GE(a.capacity(), 5000u);
    EXPECT_GE(b.capacity(), 5000u);
    EXPECT_NE(a.data(), b.data());
    EXPECT_EQ(pool.windows(), 2u);
    EXPECT_EQ(pool.locked(), 0u);
    const ci16* pa = a.data();
    a.resize(1234);  // a batch's window is shorter than the storage; the address stays
    pool.release(std::move(a));
    auto c = pool.acquire();
    EXPECT_EQ(c.data(), pa) << "a window given back is lent again";
    EXPECT_EQ(pool.windows(), 2u);

    dsp::window_vector<ci16> foreign;
    foreign.reserve(5000);
    pool.release(std::move(foreign));  // not made here: freed, never lent
    auto d = pool.acquire();
    EXPECT_EQ(pool.windows(), 3u) << "the foreign storage was not kept";
    EXPECT_THROW(runtime::window_pool<cf32>(0), std::invalid_argument);
}

TEST(window_pool, locks_the_windows_made_before_all_at_once_and_later_ones_when_made)
{
    lock_log log;
    std::vector<std::weak_ptr<void>> handles;
    const void* out_at_the_end = nullptr;
    dsp::window_vector<ci16> still_out;
    {
        runtime::window_pool<ci16> pool(4096);
        auto a = pool.acquire();
        auto b = pool.acquire();
        auto f = pool.acquire();
        const void* free_one = b.data();
        pool.release(std::move(b));  // two lent, one free, before there is anything to lock with
        EXPECT_EQ(pool.locked(), 0u);
        EXPECT_THROW((void)pool.lock_rest(), std::logic_error) << "nothing to lock with yet";
        EXPECT_THROW(pool.lock_with(nullptr), std::invalid_argument);
        pool.lock_with(log.fn());
        EXPECT_EQ(log.locked.size(), 0u) << "the windows made before wait for lock_rest()";
        // The lent ones and the free one, each once.
        EXPECT_GE(pool.lock_rest(), 0.0);
        ASSERT_EQ(log.locked.size(), 3u);
        EXPECT_EQ(pool.locked(), 3u);
        std::set<const void*> locked_at;
        for (const auto& [data, bytes] : log.locked) {
            EXPECT_EQ(bytes, 4096u * sizeof(ci16));
            locked_at.insert(data);
        }
        EXPECT_EQ(locked_at, (std::set<const void*>{a.data(), f.data(), free_one}));
        (void)pool.lock_rest();  // nothing left
        EXPECT_EQ(log.locked.size(), 3u);
        auto c = pool.acquire();  // the free one: nothing new to lock
        EXPECT_EQ(c.data(), free_one);
        EXPECT_EQ(log.locked.size(), 3u);
        auto e = pool.acquire();  // a new one: locked as it is made
        ASSERT_EQ(log.locked.size(), 4u);
        EXPECT_EQ(log.locked[3].first, e.data());
        EXPECT_EQ(pool.windows(), 4u);
        EXPECT_EQ(pool.locked(), 4u);
        EXPECT_THROW(pool.lock_with(log.fn()), std::logic_error);
        pool.release(std::move(a));
        pool.release(std::move(c));
        pool.release(std::move(f));
        out_at_the_end = e.data();
        still_out = std::move(e);
        handles = log.handles;
        for (const auto& h : handles) EXPECT_FALSE(h.expired()) << "unlocked while the pool lives";
    }
    // The pool is gone: every lock undone, the window still out among them; its storage is
    // its holder's and still valid.
    for (const auto& h : handles) EXPECT_TRUE(h.expired());
    EXPECT_EQ(still_out.data(), out_at_the_end);
    still_out[0] = ci16{1, 2};
}

TEST(window_pool, asks_once_per_window_where_the_lock_function_declines)
{
    // The CPU backend locks nothing, and a failed registration leaves a window pageable: the
    // lock function returns null, and no window is asked for twice.
    runtime::window_pool<cf32> pool(2048);
    auto a = pool.acquire();
    auto b = pool.acquire();
    int calls = 0;
    pool.lock_with([&calls](const void*, std::size_t) {
        ++calls;
        return std::shared_ptr<void>{};
    });
    (void)pool.lock_rest();
    (void)pool.lock_rest();
    EXPECT_EQ(calls, 2);
    auto c = pool.acquire();
    EXPECT_EQ(calls, 3);
    EXPECT_EQ(pool.locked(), 0u);
    EXPECT_EQ(pool.windows(), 3u);
    pool.release(std::move(a));
    pool.release(std::move(b));
    pool.release(std::move(c));
}

TEST(window_pool, a_batcher_takes_its_windows_from_the_pool_and_gives_them_back)
{
    runtime::window_pool<cf32> pool(1000 + 10 + 20);
    dsp::batcher bt(1000, 10, 20, 1.0f, &pool);
    std::vector<cf32> x(5500, cf32{1.0f, 0.0f});
    bt.push(x);
    bt.finish();
    std::set<const cf32*> seen;
    std::uint64_t batches = 0;
    while (auto b = bt.pop()) {
        seen.insert(b->samples.data());
        ++batches;
        bt.recycle(std::move(b->samples));
    }
    bt.release_storage();
    EXPECT_GE(batches, 5u);
    EXPECT_EQ(pool.windows(), seen.size() + 1) << "every window the batches had, and the one being filled, from the pool";
    for (std::uint64_t k = 0; k < pool.windows(); ++k) (void)pool.acquire();
    EXPECT_EQ(pool.windows(), seen.size() + 1) << "all of them back in the pool";
}
