#include "runtime/stream_engine.hpp"

#include "dsp/batcher.hpp"
#include "io/thread_name.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>

namespace paq::runtime {

namespace {

using clock = std::chrono::steady_clock;

std::int64_t now_ns()
{
    return std::chrono::duration_cast<std::chrono::nanoseconds>(clock::now().time_since_epoch()).count();
}

double seconds_since(clock::time_point t0) { return std::chrono::duration<double>(clock::now() - t0).count(); }

/// How many complete windows the batcher keeps while the pool is still being made.
constexpr std::size_t pending_pool_read_ahead = 3;
/// How long one read waits for the feed (a live feed: the stall timer and the heartbeat
/// are looked at this often).
constexpr std::chrono::milliseconds read_timeout{100};

/// The tally's own thread (`paq-tally`): batch k is counted while the ordered path puts batch
/// k + 1 through the sinks, so that a batch's time on the ordered path is the sinks' or the
/// tally's, not both. It counts in the order it is given; an output it has counted comes back
/// to the caller (for the pool) with the next exchange, or from finish().
class tally_stage {
public:
    explicit tally_stage(std::function<void(const dsp::batch_output&)> count) : count_(std::move(count)), thread_([this] { loop(); }) {}
    ~tally_stage()
    {
        {
            std::lock_guard lk(mu_);
            quit_ = true;
        }
        cv_.notify_all();
        thread_.join();
    }
    tally_stage(const tally_stage&) = delete;
    tally_stage& operator=(const tally_stage&) = delete;

    /// Waits until the output handed over before is counted, hands `out` over, and returns the
    /// counted one (nullopt the first time).
    std::optional<dsp::batch_output> exchange(dsp::batch_output out)
    {
        std::unique_lock lk(mu_);
        cv_.wait(lk, [&] { return !busy_; });
        auto counted = std::exchange(counted_, std::nullopt);
        pending_ = std::move(out);
        busy_ = true;
        cv_.notify_all();
        return counted;
    }
    /// Waits until the last output handed over is counted and returns it.
    std::optional<dsp::batch_output> finish()
    {
        std::unique_lock lk(mu_);
        cv_.wait(lk, [&] { return !busy_; });
        return std::exchange(counted_, std::nullopt);
    }
    /// The first error the count threw, or null.
    std::exception_ptr error()
    {
        std::lock_guard lk(mu_);
        return error_;
    }

private:
    void loop()
    {
        io::name_this_thread("paq-tally");
        std::unique_lock lk(mu_);
        for (;;) {
            cv_.wait(lk, [&] { return quit_ || pending_.has_value(); });
            if (!pending_) return;  // quit, nothing left to count
            dsp::batch_output out = std::move(*pending_);
            pending_.reset();
            lk.unlock();
            std::exception_ptr e;
            try {
                count_(out);
            } catch (...) {
                e = std::current_exception();
            }
            lk.lock();
            if (e && !error_) error_ = e;
            counted_ = std::move(out);
            busy_ = false;
            cv_.notify_all();
        }
    }

    std::function<void(const dsp::batch_output&)> count_;
    std::mutex mu_;
    std::condition_variable cv_;
    std::optional<dsp::batch_output> pending_;  ///< handed over, not yet taken by the thread
    std::optional<dsp::batch_output> counted_;  ///< counted, not yet returned
    bool busy_ = false;                         ///< an output handed over is not counted yet
    bool quit_ = false;
    std::exception_ptr error_;
    std::thread thread_;  ///< last: starts once the members above exist
};

}  // namespace

namespace {

/// A batch window's samples: the batch and both guards (dsp::basic_batcher::max_window_samples).
std::size_t window_samples(const dsp::receiver_config& rc, const dsp::input_geometry& g)
{
    return rc.batch_samples + g.guard_before + g.guard_after;
}

}  // namespace

pool_future ready_pool(worker_pool& pool)
{
    std::promise<worker_pool*> p;
    p.set_value(&pool);
    return p.get_future().share();
}

stream_engine::stream_engine(stream_options opt, feed& source, pool_future pool, std::vector<batch_sink> sinks)
    : opt_(std::move(opt)),
      feed_(source),
      pool_future_(std::move(pool)),
      sinks_(std::move(sinks)),
      geometry_(dsp::make_input_geometry(opt_.receiver)),
      windows_(window_samples(opt_.receiver, geometry_)),
      windows_ci16_(window_samples(opt_.receiver, geometry_)),
      windows_x2_(window_samples(opt_.receiver, geometry_)),
      tally_(opt_.pattern.value_or(dsp::pn_pattern::pn15), geometry_.chain_rate_hz(), geometry_.packet_spacing_samples(),
             opt_.receiver.streams(), dsp::framing_for(opt_.receiver.fec))
{
    if (!(opt_.sample_rate_hz > 0.0)) throw std::invalid_argument("stream engine: the sample rate must be positive");
    if (feed_.channels() != opt_.receiver.channels) {
        throw std::invalid_argument("stream engine: the source gives " + std::to_string(feed_.channels()) +
                                    " receive channel(s) but the receiver is set for " + std::to_string(opt_.receiver.channels));
    }
    stats_.input_ci16 = feed_.ci16_scale().has_value();
    if (const auto f = dsp::framing_for(opt_.receiver.fec); f && f->continuous()) {
        stitcher_.emplace(*f, opt_.receiver.fec_iterations, geometry_.packet_spacing_samples());
    }
    stats_.fec = opt_.receiver.fec_on();
    stats_.receive_channels = opt_.receiver.channels;
}

stream_engine::~stream_engine() = default;

worker_pool* stream_engine::acquire_pool()
{
    if (worker_pool* p = pool_.load()) return p;
    const auto t0 = clock::now();
    worker_pool* p = pool_future_.get();  // throws the error that made it fail
    {
        std::lock_guard s(s_mu_);
        timing_.pool_wait_s += seconds_since(t0);
    }
    // Windows go back to the window pool as soon as their backend is done with them (not
    // after the sinks), so the batcher rarely needs a new one.
    p->set_recycle([this](dsp::sample_batch& b, const dsp::batch_output* out) {
        if (out && opt_.on_processed) opt_.on_processed(b, *out);
        if (b.samples.capacity() != 0) windows_.release(std::move(b.samples));
        if (b.samples_ci16.capacity() != 0) windows_ci16_.release(std::move(b.samples_ci16));
        if (b.samples_x2.capacity() != 0) windows_x2_.release(std::move(b.samples_x2));
    });
    pool_.store(p);
    if (aborted_) p->abort();
    return p;
}

template <class T>
void stream_engine::batcher_loop()
{
    constexpr bool narrow = std::is_same_v<T, ci16>;
    auto& windows = [this]() -> window_pool<T>& {
        if constexpr (narrow) {
            return windows_ci16_;
        } else if constexpr (std::is_same_v<T, cf32x2>) {
            return windows_x2_;
        } else {
            return windows_;
        }
    }();
    // A ci16 feed fills ci16 windows (converted by the backend); its scale rides on them.
    dsp::basic_batcher<T> bt(opt_.receiver.batch_samples, geometry_.guard_before, geometry_.guard_after,
                             feed_.ci16_scale().value_or(1.0f), &windows);
    auto count_windows = [&] {
        std::lock_guard s(s_mu_);
        stats_.windows = windows.windows();
        stats_.windows_locked = windows.locked();
    };
    std::vector<cf32> tap;  // a ci16 chunk converted for on_samples (only when tapped)
    std::vector<dsp::sample_batch> waiting;  // complete windows read while the pool is being made
    dsp::run_timing t;  // this thread's share of the timing, added under s_mu_ as it goes
    worker_pool* pool = nullptr;
    auto last_data = clock::now();
    bool stalled = false;
    bool any_data = false;  // before the first sample there is nothing to stall
    // When the newest sample read so far entered the feed: a batch popped after a read is
    // complete with that sample (latency counts from there, time in the ring included).
    auto newest_written = clock::now();
    auto last_gap_log = clock::now() - std::chrono::seconds(2);
    std::uint64_t gaps_unlogged = 0, lost_unlogged = 0;
    std::uint64_t short_segments_seen = 0;

    auto flush_timing = [&] {
        std::lock_guard s(s_mu_);
        timing_.read_s += t.read_s;
        timing_.batch_s += t.batch_s;
        timing_.lock_s += t.lock_s;
        timing_.submit_wait_s += t.submit_wait_s;
        t = {};
    };
    auto submit = [&](dsp::sample_batch&& b) {
        count_windows();
        // A full queue is back-pressure, not a hang: the heartbeat ticks while submit waits.
        // After abort() the pool processes nothing new: the batch comes back lost, counted.
        const auto t1 = clock::now();
        pool->submit(std::move(b), newest_written, [this] { batcher_heartbeat_ns_ = now_ns(); });
        t.submit_wait_s += seconds_since(t1);
    };
    auto acquire = [&] {
        pool = acquire_pool();
        // The windows read while the backends were being made are all locked before the first
        // batch is handed on, later ones as they are made. A lock (CUDA's registration) holds up
        // the backend's own calls to the driver: handed a batch while the next window is locked,
        // the backend waits for that lock anyway.
        windows.lock_with([pool](const void* data, std::size_t bytes) { return pool->pin_host_memory(data, bytes); });
        t.lock_s += windows.lock_rest();
        for (auto& b : waiting) submit(std::move(b));
        waiting.clear();
    };
    auto hand_over = [&] {
        auto t_pop = clock::now();
        for (;;) {
            auto b = bt.pop();
            t.batch_s += seconds_since(t_pop);
            if (!b) break;
            if (pool == nullptr) {
                if (waiting.size() < pending_pool_read_ahead &&
                    pool_future_.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
                    waiting.push_back(std::move(*b));
                    t_pop = clock::now();
                    continue;
                }
                acquire();
            }
            submit(std::move(*b));
            t_pop = clock::now();
        }
    };

    // Whatever ends the loop, the window being filled goes back to the window pool.
    std::exception_ptr error;
    try {
        while (!stop_) {
            batcher_heartbeat_ns_ = now_ns();
            const auto tw = clock::now();
            // Straight from the feed into the window being filled (no copy on the way).
            const auto space = bt.write_space();  // a fresh cf32 window's storage is zero-filled here
            t.batch_s += seconds_since(tw);
            const auto t0 = clock::now();
            const auto r = feed_.read(space, read_timeout);
            t.read_s += seconds_since(t0);
            using kind = feed::result::kind;
            if (r.what == kind::end) break;
            if (r.what == kind::samples) {
                if (stalled && any_data) {
                    spdlog::info("source resumed after {:.1f} s without samples", seconds_since(last_data));
                }
                if (stalled) {
                    stalled = false;
                    std::lock_guard s(s_mu_);
                    stats_.stalled = false;
                }
                last_data = clock::now();
                newest_written = r.written;
                any_data = true;
                // A time anchor among them: the windows cut from now on carry it.
                if (r.time) {
                    bt.timestamp(r.time->utc_ns, opt_.sample_rate_hz, r.time->offset);
                    if (opt_.on_time) opt_.on_time(r.time->utc_ns, r.time->offset);
                }
                // The taps see the samples before commit() may hand the window on.
                if (opt_.on_samples) {
                    if constexpr (narrow) {
                        const float scale = *feed_.ci16_scale();
                        tap.resize(r.count);
                        for (std::size_t k = 0; k < r.count; ++k) tap[k] = to_cf32(space[k], scale);
                        opt_.on_samples(std::span<const cf32>(tap.data(), r.count));
                    } else if constexpr (std::is_same_v<T, cf32x2>) {
                        // Channel 1 (the spectrum of the live view, a recording's samples).
                        tap.resize(r.count);
                        for (std::size_t k = 0; k < r.count; ++k) tap[k] = space[k].a;
                        opt_.on_samples(std::span<const cf32>(tap.data(), r.count));
                    } else {
                        opt_.on_samples(std::span<const cf32>(space.data(), r.count));
                    }
                }
                const auto t1 = clock::now();
                bt.commit(r.count);
                t.batch_s += seconds_since(t1);
                std::lock_guard s(s_mu_);
                stats_.samples_in += r.count;
            } else if (r.what == kind::gap) {
                bt.gap(r.lost_samples);
                if (opt_.on_gap) opt_.on_gap(r.lost_samples, r.reason);
                {
                    std::lock_guard s(s_mu_);
                    ++stats_.gaps;
                    ++stats_.gaps_by_reason[static_cast<std::size_t>(r.reason)];
                    // A ring's own overflows are counted by the ring (samples_dropped); this
                    // counts what was lost before it: the sources' gaps, a recording's overflows
                    // (read from the file, or passed through a live file source's ring).
                    if (!r.dropped_by_ring) stats_.samples_lost_in_gaps += r.lost_samples;
                }
                // At most one line a second on a lossy link; the counters keep every gap.
                ++gaps_unlogged;
                lost_unlogged += r.lost_samples;
                if (clock::now() - last_gap_log >= std::chrono::seconds(1)) {
                    spdlog::warn("gap in the sample stream ({}): {} samples lost{}", io::to_string(r.reason),
                                 r.lost_samples ? std::to_string(r.lost_samples) : std::string("an unknown number of"),
                                 gaps_unlogged > 1 ? fmt::format(" ({} gaps, {} samples known lost since the last message)",
                                                                 gaps_unlogged, lost_unlogged)
                                                   : std::string());
                    last_gap_log = clock::now();
                    gaps_unlogged = 0;
                    lost_unlogged = 0;
                }
            } else if (opt_.stall_timeout && !stalled && clock::now() - last_data > *opt_.stall_timeout) {
                stalled = true;
                if (!any_data) {
                    spdlog::info("waiting for the first samples from the source");  // not a gap: no segment is open
                } else {
                    // No samples: end the segment so that the packets received so far go out now.
                    bt.gap(0);
                    if (opt_.on_gap) opt_.on_gap(0, io::gap_reason::stall);
                    spdlog::warn("source stalled: no samples for {:.1f} s; segment ended, packets so far published",
                                 seconds_since(last_data));
                    std::lock_guard s(s_mu_);
                    ++stats_.stalls;
                    ++stats_.gaps;
                    ++stats_.gaps_by_reason[static_cast<std::size_t>(io::gap_reason::stall)];
                    stats_.stalled = true;
                }
            }
            if (bt.short_segments() != short_segments_seen) {
                short_segments_seen = bt.short_segments();
                std::lock_guard s(s_mu_);
                stats_.short_segments = bt.short_segments();
                stats_.samples_in_short_segments = bt.samples_in_short_segments();
            }
            hand_over();
            flush_timing();
        }
        if (!stop_) {
            bt.finish();
            {
                std::lock_guard s(s_mu_);
                stats_.short_segments = bt.short_segments();
                stats_.samples_in_short_segments = bt.samples_in_short_segments();
            }
            hand_over();
            if (pool == nullptr) acquire();
        }
    } catch (...) {
        error = std::current_exception();
    }
    flush_timing();
    bt.release_storage();
    count_windows();
    if (error) std::rethrow_exception(error);
}

void stream_engine::consume()
{
    worker_pool* pool = nullptr;
    try {
        pool = pool_future_.get();
    } catch (...) {
        first_error_ = std::current_exception();
        stop_ = true;
        return;
    }
    // The first error ends the run: the batcher stops at its next read, the pool processes
    // nothing new, and what is under way is drained here.
    auto end_run = [&] {
        stop_ = true;
        pool->abort();
    };
    // The tally under a lock of its own: the batcher, which takes s_mu_ after every read,
    // never waits for it.
    tally_stage tally([this](const dsp::batch_output& out) {
        const auto t0 = clock::now();
        {
            std::lock_guard lk(tally_mu_);
            tally_.add(out);
        }
        std::lock_guard s(s_mu_);
        timing_.tally_s += seconds_since(t0);
    });
    while (auto res = pool->next()) {
        if (first_error_) continue;  // ending: drain what is under way
        if (!res->out) {
            // Lost: counted by the pool.
            if (!opt_.end_on_error) continue;
            try {
                if (res->error) std::rethrow_exception(res->error);
                throw std::runtime_error("batch " + std::to_string(res->batch.index) + " was not processed");
            } catch (...) {
                first_error_ = std::current_exception();
            }
            end_run();
            continue;
        }
        if (stitcher_) {
            try {
                stitcher_->join(*res->out);
            } catch (...) {
                first_error_ = std::current_exception();
                end_run();
                continue;
            }
        }
        const auto& out = *res->out;
        const auto t0 = clock::now();
        for (const auto& sink : sinks_) {
            try {
                sink(out);
            } catch (const std::exception& e) {
                if (opt_.end_on_error) {
                    first_error_ = std::current_exception();
                    break;
                }
                spdlog::error("batch {}: publishing failed: {}", out.batch_index, e.what());
            }
        }
        if (first_error_) {
            end_run();
            continue;
        }
        const double latency = std::chrono::duration<double, std::milli>(clock::now() - res->ready).count();
        {
            std::lock_guard s(s_mu_);
            timing_.tally_s += seconds_since(t0);  // the sinks' time (the tally's is added on its thread)
            stats_.count_published(out);
            stats_.latency_last_ms = latency;
            stats_.latency_max_ms = std::max(stats_.latency_max_ms, latency);
            latency_sum_ms_ += latency;
            stats_.latency_mean_ms = latency_sum_ms_ / static_cast<double>(stats_.batches_published);
            stats_.latency_sum_s = latency_sum_ms_ / 1e3;
            const double latency_s = latency / 1e3;
            for (std::size_t b = 0; b < latency_bucket_bounds_s.size(); ++b) {
                if (latency_s <= latency_bucket_bounds_s[b]) {
                    ++stats_.latency_buckets[b];
                    break;
                }
            }
        }
        // Counted on the tally's thread while the next batch goes through the sinks; the
        // output counted before goes back to the pool.
        if (auto counted = tally.exchange(std::move(*res->out))) pool->give_back(std::move(*counted));
        if (auto e = tally.error(); e && !first_error_) {
            first_error_ = e;
            end_run();
        }
    }
    if (auto counted = tally.finish()) pool->give_back(std::move(*counted));
    if (auto e = tally.error(); e && !first_error_) first_error_ = e;
}

stream_stats stream_engine::run()
{
    if (ran_) throw std::logic_error("stream engine: run() once per engine");
    ran_ = true;
    const auto t_start = clock::now();
    batcher_heartbeat_ns_ = now_ns();
    std::thread batcher([this] {
        io::name_this_thread("paq-batcher");
        try {
            if (feed_.channels() == 2) {
                batcher_loop<cf32x2>();
            } else if (feed_.ci16_scale()) {
                batcher_loop<ci16>();
            } else {
                batcher_loop<cf32>();
            }
        } catch (...) {
            batcher_error_ = std::current_exception();
        }
        batcher_done_ = true;
        // The pool is closed by the batcher in every case (made later or not at all: the
        // error comes out of the calling thread's get()).
        worker_pool* pool = pool_.load();
        if (pool == nullptr) {
            try {
                pool = pool_future_.get();
            } catch (...) {  // NOLINT(bugprone-empty-catch): rethrown by the calling thread
            }
        }
        if (pool != nullptr) pool->close();
    });
    consume();
    if (first_error_) stop_ = true;
    batcher.join();
    // Every window is back (the pool has returned every result). They stay page-locked until
    // the engine goes.
    stream_stats s;
    {
        std::lock_guard lk(s_mu_);
        timing_.windows = stats_.windows;
        timing_.windows_locked = stats_.windows_locked;
        if (worker_pool* p = pool_.load()) timing_.process_s = p->stats().process_s;
        timing_.elapsed_s = seconds_since(t_start);
        stats_.finished = true;
    }
    s = stats();
    if (batcher_error_ && !first_error_) first_error_ = batcher_error_;
    if (first_error_) std::rethrow_exception(first_error_);
    return s;
}

void stream_stats::count_published(const dsp::batch_output& out) noexcept
{
    ++batches_published;
    packets_last_batch = out.packets.size();
    if (first_packet_utc_ns == dsp::unknown_utc_ns) {
        for (const auto& rec : out.packets) {
            if (rec.utc_ns == dsp::unknown_utc_ns) continue;
            first_packet_utc_ns = rec.utc_ns;
            break;
        }
    }
    if (out.packets.empty()) return;
    double sum = 0.0;
    for (const auto& rec : out.packets) sum += rec.clock_ppm;
    clock_ppm_last_batch = sum / static_cast<double>(out.packets.size());
    dsp::front_end_means fe;
    for (const auto& rec : out.packets) fe.add(rec);
    iq_gain_db_last_batch = fe.iq_gain_db();
    iq_phase_deg_last_batch = fe.iq_phase_deg();
    dc_dbc_last_batch = fe.dc_dbc();
}

void stream_engine::abort()
{
    // The batcher reads on to the feed's end (its owner ends it): what it still cuts goes to
    // the aborted pool and comes out lost, counted, never dropped unseen.
    aborted_ = true;
    if (worker_pool* p = pool_.load()) p->abort();
}

stream_stats stream_engine::stats() const
{
    stream_stats s;
    dsp::run_timing timing;
    {
        std::lock_guard lk(s_mu_);
        s = stats_;
        timing = timing_;
    }
    {
        std::lock_guard lk(tally_mu_);
        s.tally = tally_.summary();
    }
    s.tally.timing = timing;
    s.tally.samples = s.samples_in;
    if (const worker_pool* p = pool_.load()) {
        const auto pc = p->stats();
        s.batches_dispatched = pc.batches_submitted;
        s.batches_lost = pc.batches_lost;
        s.samples_in_lost_batches = pc.samples_in_lost_batches;
        s.backend_errors = pc.backend_errors;
        s.batches_on_fallback = pc.batches_on_fallback;
    }
    return s;
}

bool stream_engine::healthy(std::chrono::nanoseconds worker_limit) const
{
    if (!batcher_done_ && now_ns() - batcher_heartbeat_ns_.load() > std::chrono::nanoseconds(std::chrono::seconds(10)).count())
        return false;
    const worker_pool* p = pool_.load();
    return p == nullptr || p->healthy(worker_limit);
}

}  // namespace paq::runtime
