#include "daemon/pipeline.hpp"

#include "dsp/batcher.hpp"
#include "dsp/input_stage.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace paq::daemon {

namespace {

using clock = std::chrono::steady_clock;

std::int64_t now_ns()
{
    return std::chrono::duration_cast<std::chrono::nanoseconds>(clock::now().time_since_epoch()).count();
}

double ms_since(clock::time_point t)
{
    return std::chrono::duration<double, std::milli>(clock::now() - t).count();
}

}  // namespace

pipeline::pipeline(pipeline_options opt, io::sample_source& source, io::sample_ring& ring,
                   std::vector<std::unique_ptr<dsp::batch_processor>> workers, backend_factory fallback,
                   publish_fn publish)
    : opt_(std::move(opt)),
      source_(source),
      ring_(ring),
      workers_(std::move(workers)),
      fallback_factory_(std::move(fallback)),
      publish_(std::move(publish)),
      geometry_(dsp::make_input_geometry(opt_.receiver)),
      tally_(opt_.pattern.value_or(dsp::pn_pattern::pn15), geometry_.chain_rate_hz(), geometry_.packet_spacing_samples()),
      worker_busy_since_ns_(workers_.size())
{
    if (workers_.empty()) throw std::invalid_argument("pipeline: at least one worker backend is needed");
    if (!(opt_.sample_rate_hz > 0.0)) throw std::invalid_argument("pipeline: the sample rate must be positive");
}

pipeline::~pipeline()
{
    if (!threads_.empty()) {
        abort();
        join();
    }
}

void pipeline::start()
{
    batcher_heartbeat_ns_ = now_ns();
    workers_running_ = workers_.size();
    threads_.emplace_back([this] { acquisition_loop(); });
    threads_.emplace_back([this] { batcher_loop(); });
    for (std::size_t w = 0; w < workers_.size(); ++w) threads_.emplace_back([this, w] { worker_loop(w); });
    threads_.emplace_back([this] { publisher_loop(); });
}

void pipeline::request_stop() { source_.stop(); }

void pipeline::abort()
{
    aborted_ = true;
    source_.stop();
    ring_.abort();
    std::lock_guard lk(q_mu_);
    q_space_.notify_all();
}

void pipeline::acquisition_loop()
{
    io::ring_sink sink(ring_);
    try {
        source_.run(sink);
    } catch (const std::exception& e) {
        spdlog::error("source failed: {}", e.what());
        std::lock_guard lk(s_mu_);
        stats_.source_error = e.what();
    }
    ring_.close();
}

void pipeline::dispatch(dsp::sample_batch&& b, clock::time_point ready)
{
    std::unique_lock lk(q_mu_);
    // Wait for room, ticking the heartbeat: a full queue is back-pressure, not a hang.
    while (queue_.size() >= static_cast<std::size_t>(opt_.queue_depth) && !aborted_) {
        q_space_.wait_for(lk, std::chrono::milliseconds(200));
        batcher_heartbeat_ns_ = now_ns();
    }
    if (aborted_) {
        // Aborting: the batch is not processed; its samples are counted as lost.
        std::lock_guard s(s_mu_);
        ++stats_.batches_lost;
        stats_.samples_in_lost_batches += b.owned_end - b.owned_begin;
        std::lock_guard r(r_mu_);
        done_[b.index] = result{std::nullopt, ready, b.owned_end - b.owned_begin};
        r_cv_.notify_all();
        return;
    }
    queue_.push_back(job{std::move(b), ready});
    {
        std::lock_guard s(s_mu_);
        ++stats_.batches_dispatched;
    }
    q_cv_.notify_one();
}

void pipeline::batcher_loop()
{
    dsp::batcher bt(opt_.receiver.batch_samples, geometry_.guard_before, geometry_.guard_after);
    auto last_data = clock::now();
    bool stalled = false;
    bool any_data = false;  // before the first sample there is nothing to stall
    // When the newest sample read so far entered the ring: a batch popped after a read is
    // complete with that sample (latency counts from there, time in the ring included).
    auto newest_written = clock::now();
    auto last_gap_log = clock::now() - std::chrono::seconds(2);
    std::uint64_t gaps_unlogged = 0, lost_unlogged = 0;
    std::uint64_t short_segments_seen = 0;
    for (;;) {
        batcher_heartbeat_ns_ = now_ns();
        {
            // Windows the workers are done with: the batcher fills them again (no fresh
            // ~315 MB allocation, and its page faults, per batch).
            std::lock_guard sp(spare_mu_);
            for (auto& v : spare_windows_) bt.recycle(std::move(v));
            spare_windows_.clear();
        }
        // Straight from the ring into the window being filled (one copy, not two).
        const auto space = bt.write_space();
        const auto chunk = space.subspan(0, std::min<std::size_t>(space.size(), std::size_t{1} << 18));
        const auto r = ring_.read(chunk, std::chrono::milliseconds(100));
        using kind = io::sample_ring::read_result::kind;
        if (r.what == kind::end) break;
        if (r.what == kind::samples) {
            if (stalled && any_data) {
                spdlog::info("source resumed after {:.1f} s without samples", ms_since(last_data) / 1000.0);
            }
            if (stalled) {
                stalled = false;
                std::lock_guard s(s_mu_);
                stats_.stalled = false;
            }
            last_data = clock::now();
            newest_written = r.written;
            any_data = true;
            // The recorder sees the samples before commit() may hand the window on.
            if (opt_.on_samples) opt_.on_samples(std::span<const cf32>(chunk.data(), r.count));
            bt.commit(r.count);
            std::lock_guard s(s_mu_);
            stats_.samples_in += r.count;
            tally_.add_samples(r.count);
        } else if (r.what == kind::gap) {
            bt.gap(r.lost_samples);
            if (opt_.on_gap) opt_.on_gap(r.lost_samples, r.reason);
            {
                std::lock_guard s(s_mu_);
                ++stats_.gaps;
                ++stats_.gaps_by_reason[static_cast<std::size_t>(r.reason)];
                // Ring overflows are counted by the ring (ring.samples_dropped); this counts
                // what the sources reported lost before the ring.
                if (r.reason != io::gap_reason::overflow) stats_.samples_lost_in_gaps += r.lost_samples;
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
        } else if (!any_data && !stalled && clock::now() - last_data > opt_.stall_timeout) {
            stalled = true;  // logged once; not a gap (no segment is open)
            spdlog::info("waiting for the first samples from the source");
        } else if (any_data && !stalled && clock::now() - last_data > opt_.stall_timeout) {
            // No samples: end the segment so that the packets received so far go out now.
            stalled = true;
            bt.gap(0);
            if (opt_.on_gap) opt_.on_gap(0, io::gap_reason::stall);
            spdlog::warn("source stalled: no samples for {:.1f} s; segment ended, packets so far published",
                         ms_since(last_data) / 1000.0);
            std::lock_guard s(s_mu_);
            ++stats_.stalls;
            ++stats_.gaps;
            ++stats_.gaps_by_reason[static_cast<std::size_t>(io::gap_reason::stall)];
            stats_.stalled = true;
        }
        if (bt.short_segments() != short_segments_seen) {
            short_segments_seen = bt.short_segments();
            std::lock_guard s(s_mu_);
            stats_.short_segments = bt.short_segments();
            stats_.samples_in_short_segments = bt.samples_in_short_segments();
        }
        while (auto b = bt.pop()) dispatch(std::move(*b), newest_written);
    }
    bt.finish();
    {
        std::lock_guard s(s_mu_);
        stats_.short_segments = bt.short_segments();
        stats_.samples_in_short_segments = bt.samples_in_short_segments();
    }
    while (auto b = bt.pop()) dispatch(std::move(*b), newest_written);
    batcher_done_ = true;
    std::lock_guard lk(q_mu_);
    queue_closed_ = true;
    q_cv_.notify_all();
}

void pipeline::worker_loop(std::size_t w)
{
    auto& backend = *workers_[w];
    for (;;) {
        job j;
        {
            std::unique_lock lk(q_mu_);
            q_cv_.wait(lk, [&] { return !queue_.empty() || queue_closed_; });
            if (queue_.empty()) break;
            j = std::move(queue_.front());
            queue_.pop_front();
            q_space_.notify_one();
        }
        const std::uint64_t owned = j.batch.owned_end - j.batch.owned_begin;
        result res{std::nullopt, j.ready, owned};
        worker_busy_since_ns_[w] = now_ns();
        try {
            res.out = backend.process(j.batch);
        } catch (const std::exception& e) {
            spdlog::error("batch {}: {} backend failed: {}", j.batch.index, backend.name(), e.what());
            {
                std::lock_guard s(s_mu_);
                ++stats_.backend_errors;
            }
            if (fallback_factory_) {
                try {
                    std::lock_guard f(fallback_mu_);
                    if (!fallback_) fallback_ = fallback_factory_();
                    res.out = fallback_->process(j.batch);
                    spdlog::warn("batch {}: processed on the CPU fallback instead", j.batch.index);
                    std::lock_guard s(s_mu_);
                    ++stats_.batches_on_fallback;
                } catch (const std::exception& e2) {
                    spdlog::error("batch {}: the CPU fallback failed too: {}", j.batch.index, e2.what());
                }
            }
            if (!res.out) {
                spdlog::error("batch {} lost: {} samples ({:.3f} s) not processed", j.batch.index, owned,
                              static_cast<double>(owned) / opt_.sample_rate_hz);
                std::lock_guard s(s_mu_);
                ++stats_.batches_lost;
                stats_.samples_in_lost_batches += owned;
            }
        }
        worker_busy_since_ns_[w] = 0;
        {
            std::lock_guard sp(spare_mu_);
            if (spare_windows_.size() < dsp::batcher::max_spares) spare_windows_.push_back(std::move(j.batch.samples));
        }
        std::lock_guard lk(r_mu_);
        done_[j.batch.index] = std::move(res);
        r_cv_.notify_all();
    }
    std::lock_guard lk(r_mu_);
    --workers_running_;
    r_cv_.notify_all();
}

void pipeline::publisher_loop()
{
    std::uint64_t next = 0;
    for (;;) {
        result res;
        {
            std::unique_lock lk(r_mu_);
            r_cv_.wait(lk, [&] {
                return done_.count(next) || (workers_running_ == 0 && done_.empty());
            });
            if (!done_.count(next)) {
                // Workers are gone and nothing is pending. Batches lost at abort may have left
                // a hole only if the map is not empty, which the predicate excludes.
                break;
            }
            res = std::move(done_[next]);
            done_.erase(next);
        }
        ++next;
        if (!res.out) continue;  // lost: counted where it failed
        const auto& out = *res.out;
        try {
            if (publish_) publish_(out);
        } catch (const std::exception& e) {
            spdlog::error("batch {}: publishing failed: {}", out.batch_index, e.what());
        }
        const double latency = ms_since(res.ready);
        std::lock_guard s(s_mu_);
        tally_.add(out);
        ++stats_.batches_published;
        stats_.packets_last_batch = out.packets.size();
        if (!out.packets.empty()) {
            double sum = 0.0;
            for (const auto& rec : out.packets) sum += rec.clock_ppm;
            stats_.clock_ppm_last_batch = sum / static_cast<double>(out.packets.size());
            dsp::front_end_means fe;
            for (const auto& rec : out.packets) fe.add(rec);
            stats_.iq_gain_db_last_batch = fe.iq_gain_db();
            stats_.iq_phase_deg_last_batch = fe.iq_phase_deg();
            stats_.dc_dbc_last_batch = fe.dc_dbc();
        }
        stats_.latency_last_ms = latency;
        stats_.latency_max_ms = std::max(stats_.latency_max_ms, latency);
        latency_sum_ms_ += latency;
        stats_.latency_mean_ms = latency_sum_ms_ / static_cast<double>(stats_.batches_published);
    }
    // The batcher may still be closing (it ends before the workers); join order is not
    // needed here: finished_ is set only when every other thread has returned (join()).
    std::lock_guard lk(end_mu_);
    finished_ = true;
    end_cv_.notify_all();
}

bool pipeline::finished() const
{
    std::lock_guard lk(end_mu_);
    return finished_;
}

bool pipeline::wait_for(std::chrono::milliseconds timeout)
{
    std::unique_lock lk(end_mu_);
    return end_cv_.wait_for(lk, timeout, [&] { return finished_; });
}

void pipeline::join()
{
    for (auto& t : threads_) {
        if (t.joinable()) t.join();
    }
    threads_.clear();
}

pipeline_stats pipeline::stats() const
{
    pipeline_stats s;
    {
        std::lock_guard lk(s_mu_);
        s = stats_;
        s.tally = tally_.summary();
    }
    s.ring = ring_.counters();
    s.finished = finished();
    return s;
}

bool pipeline::healthy(std::chrono::seconds worker_limit) const
{
    const std::int64_t now = now_ns();
    if (finished()) return true;
    if (!batcher_done_ && now - batcher_heartbeat_ns_.load() > std::chrono::nanoseconds(std::chrono::seconds(10)).count()) return false;
    for (const auto& busy : worker_busy_since_ns_) {
        const std::int64_t since = busy.load();
        if (since && now - since > std::chrono::nanoseconds(worker_limit).count()) return false;
    }
    return true;
}

}  // namespace paq::daemon
