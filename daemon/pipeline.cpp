#include "daemon/pipeline.hpp"
#include "io/thread_name.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <string>

namespace paq::daemon {

namespace {

runtime::stream_options engine_options(const pipeline_options& opt)
{
    runtime::stream_options o;
    o.receiver = opt.receiver;
    o.pattern = opt.pattern;
    o.sample_rate_hz = opt.sample_rate_hz;
    o.stall_timeout = opt.stall_timeout;
    o.end_on_error = false;  // a live receiver counts a lost batch and goes on
    o.on_samples = opt.on_samples;
    o.on_gap = opt.on_gap;
    o.on_time = opt.on_time;
    o.on_processed = opt.on_processed;
    return o;
}

std::vector<runtime::batch_sink> publish_sinks(pipeline::publish_fn publish)
{
    std::vector<runtime::batch_sink> sinks;
    if (publish) sinks.push_back(std::move(publish));
    return sinks;
}

}  // namespace

pipeline::pipeline(pipeline_options opt, io::sample_source& source, io::sample_ring& ring,
                   std::vector<std::unique_ptr<dsp::batch_processor>> workers, backend_factory fallback,
                   publish_fn publish)
    : opt_(std::move(opt)),
      source_(source),
      ring_(ring),
      pool_(std::move(workers), std::move(fallback), static_cast<std::size_t>(std::max(opt_.queue_depth, 1))),
      feed_(ring_),
      engine_(engine_options(opt_), feed_, runtime::ready_pool(pool_), publish_sinks(std::move(publish)))
{
    // The ring's width is the source's (a source never switches: sample_source::ci16_scale()).
    const auto source_scale = source_.ci16_scale();
    if (ring_.is_ci16() && (!source_scale || *source_scale != *ring_.ci16_scale())) {
        throw std::invalid_argument("pipeline: the ring holds ci16 samples at scale " + std::to_string(*ring_.ci16_scale()) +
                                    " but the source delivers " +
                                    (source_scale ? "ci16 at scale " + std::to_string(*source_scale) : std::string("cf32")));
    }
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
    threads_.emplace_back([this] {
        io::name_this_thread("paq-source");
        acquisition_loop();
    });
    threads_.emplace_back([this] {
        io::name_this_thread("paq-publisher");
        try {
            (void)engine_.run();
        } catch (const std::exception& e) {
            // Not a source's or a backend's error (those are counted): the receiver's own.
            spdlog::error("receiver failed: {}", e.what());
            source_.stop();
            ring_.abort();
            std::lock_guard lk(s_mu_);
            if (!source_error_) source_error_ = std::string("receiver: ") + e.what();
        }
        std::lock_guard lk(end_mu_);
        finished_ = true;
        end_cv_.notify_all();
    });
}

void pipeline::request_stop() { source_.stop(); }

void pipeline::abort()
{
    source_.stop();
    ring_.abort();
    engine_.abort();
}

void pipeline::acquisition_loop()
{
    io::ring_sink sink(ring_);
    try {
        source_.run(sink);
    } catch (const std::exception& e) {
        spdlog::error("source failed: {}", e.what());
        std::lock_guard lk(s_mu_);
        source_error_ = e.what();
    }
    ring_.close();
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
    static_cast<runtime::stream_stats&>(s) = engine_.stats();
    s.ring = ring_.counters();
    {
        std::lock_guard lk(s_mu_);
        s.source_error = source_error_;
    }
    s.finished = finished();
    return s;
}

bool pipeline::healthy(std::chrono::seconds worker_limit) const
{
    if (finished()) return true;
    return engine_.healthy(worker_limit);
}

}  // namespace paq::daemon
