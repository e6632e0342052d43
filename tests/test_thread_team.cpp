// dsp::thread_team: the fork-join team whose threads sleep between jobs (the recording
// reader's large reads, the tally).
#include "dsp/thread_team.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <ctime>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

namespace {

using paq::dsp::thread_team;

double process_cpu_s()
{
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

TEST(thread_team, runs_every_piece_once_the_first_on_the_caller_and_keeps_its_threads)
{
    thread_team team;
    EXPECT_EQ(team.threads(), 0U);
    for (const int pieces : {1, 5, 3, 8, 2, 8}) {
        std::vector<std::atomic<int>> calls(static_cast<std::size_t>(pieces));
        std::vector<std::thread::id> on(static_cast<std::size_t>(pieces));
        std::mutex m;
        team.run(pieces, [&](int k) {
            calls[static_cast<std::size_t>(k)].fetch_add(1);
            const std::lock_guard lock(m);
            on[static_cast<std::size_t>(k)] = std::this_thread::get_id();
        });
        for (int k = 0; k < pieces; ++k) EXPECT_EQ(calls[static_cast<std::size_t>(k)].load(), 1) << pieces << " pieces, piece " << k;
        EXPECT_EQ(on[0], std::this_thread::get_id());
        const std::set<std::thread::id> distinct(on.begin(), on.end());
        EXPECT_EQ(distinct.size(), static_cast<std::size_t>(pieces)) << "each piece on a thread of its own";
    }
    // Made as the jobs needed them (5, then 8), never more: the largest job's less the caller.
    EXPECT_EQ(team.threads(), 7U);
}

TEST(thread_team, splits_a_range_as_a_static_schedule_does)
{
    thread_team team;
    for (const std::size_t items : {std::size_t{1}, std::size_t{7}, std::size_t{779}, std::size_t{157286400}}) {
        for (const int pieces : {1, 2, 4, 8}) {
            std::vector<std::pair<std::size_t, std::size_t>> got(static_cast<std::size_t>(pieces));
            team.run_ranges(items, pieces, [&](std::size_t b, std::size_t e, int k) { got[static_cast<std::size_t>(k)] = {b, e}; });
            std::size_t next = 0;
            for (int k = 0; k < pieces; ++k) {
                const auto [b, e] = got[static_cast<std::size_t>(k)];
                EXPECT_EQ(b, next) << items << " items, " << pieces << " pieces, piece " << k;
                EXPECT_EQ(b, items * static_cast<std::size_t>(k) / static_cast<std::size_t>(pieces));
                EXPECT_LE(b, e);
                next = e;
            }
            EXPECT_EQ(next, items);
        }
    }
}

TEST(thread_team, rethrows_the_first_error_once_every_piece_has_ended_and_stays_usable)
{
    thread_team team;
    std::atomic<int> ended{0};
    try {
        team.run(6, [&](int k) {
            if (k == 3) throw std::runtime_error("piece 3 failed");
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
            ended.fetch_add(1);
        });
        FAIL() << "the piece's error was not rethrown";
    } catch (const std::runtime_error& e) {
        EXPECT_STREQ(e.what(), "piece 3 failed");
    }
    EXPECT_EQ(ended.load(), 5) << "run() returned before the other pieces ended";
    // The caller's own error comes first.
    EXPECT_THROW(team.run(4, [](int k) { if (k == 0 || k == 2) throw std::logic_error(k == 0 ? "caller" : "team"); }), std::logic_error);
    try {
        team.run(4, [](int k) { if (k == 0 || k == 2) throw std::logic_error(k == 0 ? "caller" : "team"); });
    } catch (const std::logic_error& e) {
        EXPECT_STREQ(e.what(), "caller");
    }
    // A job after the errors runs whole, with no error left over from them.
    std::atomic<int> sum{0};
    EXPECT_NO_THROW(team.run(6, [&](int k) { sum.fetch_add(k + 1); }));
    EXPECT_EQ(sum.load(), 21);
}

TEST(thread_team, loses_no_job_among_many_of_changing_size)
{
    thread_team team;
    std::atomic<long long> sum{0};
    long long expected = 0;
    for (int j = 0; j < 20000; ++j) {
        const int pieces = 1 + j % 8;
        team.run(pieces, [&](int k) { sum.fetch_add(k + 1); });
        expected += static_cast<long long>(pieces) * (pieces + 1) / 2;
    }
    EXPECT_EQ(sum.load(), expected);
}

TEST(thread_team, its_threads_take_no_cpu_between_jobs)
{
    // The reason for the team: OpenMP's threads spin after a parallel region, taking cores
    // from the GPU backend's thread. Seven threads that spun for the 300 ms below would take
    // up to 2.1 s of CPU (on however many cores there are); sleeping ones take next to none.
    thread_team team;
    std::atomic<int> ran{0};
    team.run(8, [&](int) { ran.fetch_add(1); });
    ASSERT_EQ(ran.load(), 8);
    const double before = process_cpu_s();
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    const double used = process_cpu_s() - before;
    EXPECT_LT(used, 0.05) << "CPU seconds used by the idle team in 300 ms";
}

TEST(thread_team, pieces_for_keeps_within_the_items_the_most_and_at_least_one)
{
    EXPECT_EQ(thread_team::pieces_for(0, 8), 1);
    EXPECT_LE(thread_team::pieces_for(3, 8), 3);
    EXPECT_LE(thread_team::pieces_for(1000, 4), 4);
    EXPECT_GE(thread_team::pieces_for(1000, 4), 1);
    EXPECT_EQ(thread_team::pieces_for(1000, 0), 1);
}

}  // namespace
