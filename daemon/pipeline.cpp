#include "daemon/pipeline.hpp"
#include "io/thread_name.hpp"

#include "dsp/batcher.hpp"
#include "dsp/input_stage.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <string>
#include <type_traits>

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
      pool_(std::move(workers), std::move(fallback), static_cast<std::size_t>(std::max(opt_.queue_depth, 1)),
            [this](dsp::sample_batch& b) {
                // Every window comes back here (never dropped: it may be page-locked; their
                // number is bounded by what is in flight).
                std::lock_guard sp(spare_mu_);
                if (b.samples.capacity() != 0) spare_windows_.push_back(std::move(b.samples));
                if (b.samples_ci16.capacity() != 0) spare_windows_ci16_.push_back(std::move(b.samples_ci16));
            }),
      publish_(std::move(publish)),
      geometry_(dsp::make_input_geometry(opt_.receiver)),
      tally_(opt_.pattern.value_or(dsp::pn_pattern::pn15), geometry_.chain_rate_hz(), geometry_.packet_spacing_samples(),
             opt_.receiver.streams())
{
    if (!(opt_.sample_rate_hz > 0.0)) throw std::invalid_argument("pipeline: the sample rate must be positive");
    // The ring's width is the source's (a source never switches: sample_source::ci16_scale()).
    const auto source_scale = source_.ci16_scale();
    if (ring_.is_ci16() && (!source_scale || *source_scale != *ring_.ci16_scale())) {
        throw std::invalid_argument("pipeline: the ring holds ci16 samples at scale " + std::to_string(*ring_.ci16_scale()) +
                                    " but the source delivers " +
                                    (source_scale ? "ci16 at scale " + std::to_string(*source_scale) : std::string("cf32")));
    }
    stats_.input_ci16 = ring_.is_ci16();
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
    threads_.emplace_back([this] {
        io::name_this_thread("paq-source");
        acquisition_loop();
    });
    threads_.emplace_back([this] {
        io::name_this_thread("paq-batcher");
        if (ring_.is_ci16()) {
            batcher_loop<ci16>();
        } else {
            batcher_loop<cf32>();
        }
    });
    threads_.emplace_back([this] {
        io::name_this_thread("paq-publisher");
        publisher_loop();
    });
}

void pipeline::request_stop() { source_.stop(); }

void pipeline::abort()
{
    aborted_ = true;
    source_.stop();
    ring_.abort();
    pool_.abort();
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

template <class T>
void pipeline::dispatch(dsp::sample_batch&& b, clock::time_point ready)
{
    // A window storage the backend has not seen yet is page-locked once (a few circulate).
    const std::size_t window_bytes =
        (opt_.receiver.batch_samples + geometry_.guard_before + geometry_.guard_after) * sizeof(T);
    const auto& window = dsp::window_of<T>(b);
    (void)pins_.lock_once(pool_, window.data(), window.capacity() * sizeof(T), window_bytes);
    {
        std::lock_guard s(s_mu_);
        stats_.windows = pins_.windows();
        stats_.windows_locked = pins_.locked();
    }
    // A full queue is back-pressure, not a hang: the heartbeat ticks while submit waits.
    // Aborting, the pool processes nothing new; the batch comes back lost and is counted.
    pool_.submit(std::move(b), ready, [this] { batcher_heartbeat_ns_ = now_ns(); });
}

template <class T>
void pipeline::batcher_loop()
{
    constexpr bool narrow = std::is_same_v<T, ci16>;
    // A ci16 ring fills ci16 windows (converted by the backend); its scale rides on them.
    dsp::basic_batcher<T> bt(opt_.receiver.batch_samples, geometry_.guard_before, geometry_.guard_after,
                             ring_.ci16_scale().value_or(1.0f));
    // The recorder's tap takes cf32: a ci16 chunk is converted for it here (only when tapped).
    std::vector<cf32> tap;
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
            for (auto& v : spare_windows<T>()) bt.recycle(std::move(v));
            spare_windows<T>().clear();
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
            // A time anchor among them: the windows cut from now on carry it.
            if (r.time) {
                bt.timestamp(r.time->utc_ns, opt_.sample_rate_hz, r.time->offset);
                if (opt_.on_time) opt_.on_time(r.time->utc_ns, r.time->offset);
            }
            // The recorder sees the samples before commit() may hand the window on.
            if (opt_.on_samples) {
                if constexpr (narrow) {
                    const float scale = *ring_.ci16_scale();
                    tap.resize(r.count);
                    for (std::size_t k = 0; k < r.count; ++k) tap[k] = to_cf32(chunk[k], scale);
                    opt_.on_samples(std::span<const cf32>(tap.data(), r.count));
                } else {
                    opt_.on_samples(std::span<const cf32>(chunk.data(), r.count));
                }
            }
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
        while (auto b = bt.pop()) dispatch<T>(std::move(*b), newest_written);
    }
    bt.finish();
    {
        std::lock_guard s(s_mu_);
        stats_.short_segments = bt.short_segments();
        stats_.samples_in_short_segments = bt.samples_in_short_segments();
    }
    while (auto b = bt.pop()) dispatch<T>(std::move(*b), newest_written);
    {
        // The batcher's storage outlives this loop: it may be page-locked (pins_).
        std::lock_guard sp(spare_mu_);
        for (auto& v : bt.release_storage()) spare_windows<T>().push_back(std::move(v));
    }
    batcher_done_ = true;
    pool_.close();
}

void pipeline::publisher_loop()
{
    while (auto res = pool_.next()) {
        if (!res->out) continue;  // lost: counted by the pool
        const auto& out = *res->out;
        try {
            if (publish_) publish_(out);
        } catch (const std::exception& e) {
            spdlog::error("batch {}: publishing failed: {}", out.batch_index, e.what());
        }
        const double latency = ms_since(res->ready);
        std::lock_guard s(s_mu_);
        tally_.add(out);
        ++stats_.batches_published;
        stats_.packets_last_batch = out.packets.size();
        if (stats_.first_packet_utc_ns == dsp::unknown_utc_ns) {
            for (const auto& rec : out.packets) {
                if (rec.utc_ns == dsp::unknown_utc_ns) continue;
                stats_.first_packet_utc_ns = rec.utc_ns;
                break;
            }
        }
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
        stats_.latency_sum_s = latency_sum_ms_ / 1e3;
        const double latency_s = latency / 1e3;
        for (std::size_t b = 0; b < latency_bucket_bounds_s.size(); ++b) {
            if (latency_s <= latency_bucket_bounds_s[b]) {
                ++stats_.latency_buckets[b];
                break;
            }
        }
        pool_.give_back(std::move(*res->out));
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
    const auto pc = pool_.stats();
    s.batches_dispatched = pc.batches_submitted;
    s.batches_lost = pc.batches_lost;
    s.samples_in_lost_batches = pc.samples_in_lost_batches;
    s.backend_errors = pc.backend_errors;
    s.batches_on_fallback = pc.batches_on_fallback;
    s.ring = ring_.counters();
    s.finished = finished();
    return s;
}

bool pipeline::healthy(std::chrono::seconds worker_limit) const
{
    const std::int64_t now = now_ns();
    if (finished()) return true;
    if (!batcher_done_ && now - batcher_heartbeat_ns_.load() > std::chrono::nanoseconds(std::chrono::seconds(10)).count()) return false;
    return pool_.healthy(worker_limit);
}

}  // namespace paq::daemon
