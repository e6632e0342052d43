#include "runtime/worker_pool.hpp"
#include "io/thread_name.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <stdexcept>

namespace paq::runtime {

namespace {

std::int64_t now_ns()
{
    return std::chrono::duration_cast<std::chrono::nanoseconds>(worker_pool::clock::now().time_since_epoch()).count();
}

std::uint64_t owned_samples(const dsp::sample_batch& b) { return b.owned_end - b.owned_begin; }

}  // namespace

worker_pool::worker_pool(std::vector<std::unique_ptr<dsp::batch_processor>> workers, backend_factory fallback, std::size_t queue_depth,
                         recycle_fn recycle)
    : workers_(std::move(workers)),
      fallback_factory_(std::move(fallback)),
      queue_depth_(queue_depth),
      recycle_(std::move(recycle)),
      busy_since_ns_(workers_.size()),
      timed_once_(workers_.size(), 0)
{
    if (workers_.empty()) throw std::invalid_argument("worker_pool: at least one worker backend is needed");
    if (queue_depth_ < 1) throw std::invalid_argument("worker_pool: the queue depth must be at least 1");
    for (const auto& w : workers_) {
        if (!w) throw std::invalid_argument("worker_pool: a worker backend is missing");
    }
    threads_.reserve(workers_.size());
    for (std::size_t w = 0; w < workers_.size(); ++w) threads_.emplace_back([this, w] {
        io::name_this_thread("paq-worker" + std::to_string(w));
        worker_loop(w);
    });
}

worker_pool::~worker_pool()
{
    abort();
    close();
    for (auto& t : threads_) {
        if (t.joinable()) t.join();
    }
}

void worker_pool::submit(dsp::sample_batch&& batch, clock::time_point ready, const std::function<void()>& waiting)
{
    std::unique_lock lk(q_mu_);
    if (closed_) throw std::logic_error("worker_pool: submit after close");
    const std::size_t max_in_flight = queue_depth_ + workers_.size();
    while ((queue_.size() >= queue_depth_ || next_seq_ - returned_ >= max_in_flight) && !aborted_) {
        q_space_.wait_for(lk, std::chrono::milliseconds(200));
        if (waiting) waiting();
    }
    const std::uint64_t seq = next_seq_++;
    {
        std::lock_guard r(r_mu_);
        submitted_ = next_seq_;
        ++counters_.batches_submitted;
    }
    if (aborted_) {
        lk.unlock();
        // Aborting: not processed; its samples are counted as lost.
        result r{std::nullopt, std::move(batch), ready, false, nullptr};
        if (recycle_) recycle_(r.batch, nullptr);
        finish(seq, std::move(r));
        return;
    }
    queue_.push_back(job{seq, std::move(batch), ready});
    q_cv_.notify_one();
}

void worker_pool::set_recycle(recycle_fn recycle)
{
    std::lock_guard lk(q_mu_);
    if (next_seq_ != 0) throw std::logic_error("worker_pool::set_recycle after the first submit");
    recycle_ = std::move(recycle);
}

void worker_pool::give_back(dsp::batch_output&& out)
{
    std::lock_guard lk(out_mu_);
    if (spare_outputs_.size() < queue_depth_ + workers_.size()) spare_outputs_.push_back(std::move(out));
}

void worker_pool::close()
{
    {
        std::lock_guard lk(q_mu_);
        closed_ = true;
        q_cv_.notify_all();
    }
    std::lock_guard r(r_mu_);
    closed_out_ = true;
    r_cv_.notify_all();
}

void worker_pool::abort()
{
    aborted_ = true;
    std::lock_guard lk(q_mu_);
    q_space_.notify_all();
}

void worker_pool::finish(std::uint64_t seq, result&& r)
{
    std::lock_guard lk(r_mu_);
    if (r.out) {
        ++counters_.batches_done;
    } else {
        ++counters_.batches_lost;
        counters_.samples_in_lost_batches += owned_samples(r.batch);
    }
    if (r.on_fallback) ++counters_.batches_on_fallback;
    done_.emplace(seq, std::move(r));
    r_cv_.notify_all();
}

void worker_pool::worker_loop(std::size_t w)
{
    auto& backend = *workers_[w];
    for (;;) {
        job j;
        {
            std::unique_lock lk(q_mu_);
            q_cv_.wait(lk, [&] { return !queue_.empty() || closed_; });
            if (queue_.empty()) return;
            j = std::move(queue_.front());
            queue_.pop_front();
            q_space_.notify_one();
        }
        result res{std::nullopt, std::move(j.batch), j.ready, false, nullptr};
        dsp::batch_output out;
        {
            std::lock_guard lk(out_mu_);
            if (!spare_outputs_.empty()) {
                out = std::move(spare_outputs_.back());
                spare_outputs_.pop_back();
            }
        }
        const std::int64_t t0 = now_ns();
        busy_since_ns_[w] = t0;
        dsp::stage_times stages;
        bool timed = false;
        try {
            try {
                backend.process(res.batch, out);
                timed = backend.last_stage_times(stages);
                res.out = std::move(out);
            } catch (const std::exception&) {
                throw;
            } catch (...) {
                throw std::runtime_error("an exception of an unknown type");
            }
        } catch (const std::exception& e) {
            res.error = std::current_exception();
            spdlog::error("batch {}: {} backend failed: {}", res.batch.index, backend.name(), e.what());
            {
                std::lock_guard r(r_mu_);
                ++counters_.backend_errors;
            }
            if (fallback_factory_) {
                try {
                    std::lock_guard f(fallback_mu_);
                    if (!fallback_) fallback_ = fallback_factory_();
                    fallback_->process(res.batch, out);
                    res.out = std::move(out);
                    res.on_fallback = true;
                    res.error = nullptr;
                    spdlog::warn("batch {}: processed on the {} fallback instead", res.batch.index, fallback_->name());
                } catch (const std::exception& e2) {
                    res.error = std::current_exception();
                    spdlog::error("batch {}: the fallback failed too: {}", res.batch.index, e2.what());
                } catch (...) {
                    res.error = std::current_exception();
                    spdlog::error("batch {}: the fallback failed too (an exception of an unknown type)", res.batch.index);
                }
            }
            if (!res.out) {
                spdlog::error("batch {} lost: {} samples not processed", res.batch.index, owned_samples(res.batch));
                give_back(std::move(out));
            }
        }
        busy_since_ns_[w] = 0;
        if (res.out) stamp_utc(res.batch, *res.out);
        {
            std::lock_guard r(r_mu_);
            counters_.process_s += static_cast<double>(now_ns() - t0) * 1e-9;
            if (timed) {
                (timed_once_[w] ? counters_.stages : counters_.stages_first).add(stages);
                timed_once_[w] = 1;
            }
        }
        if (recycle_) recycle_(res.batch, res.out ? &*res.out : nullptr);
        finish(j.seq, std::move(res));
    }
}

void stamp_utc(const dsp::sample_batch& batch, dsp::batch_output& out) noexcept
{
    for (auto& rec : out.packets) rec.utc_ns = batch.time ? dsp::utc_ns_at(*batch.time, rec.start_sample) : dsp::unknown_utc_ns;
}

std::optional<worker_pool::result> worker_pool::next()
{
    std::unique_lock lk(r_mu_);
    r_cv_.wait(lk, [&] { return done_.count(next_out_) > 0 || (closed_out_ && next_out_ >= submitted_); });
    auto it = done_.find(next_out_);
    if (it == done_.end()) return std::nullopt;
    result r = std::move(it->second);
    done_.erase(it);
    ++next_out_;
    lk.unlock();
    {
        std::lock_guard q(q_mu_);
        ++returned_;
        q_space_.notify_all();
    }
    return r;
}

worker_pool::counters worker_pool::stats() const
{
    std::lock_guard lk(r_mu_);
    return counters_;
}

std::shared_ptr<void> worker_pool::pin_host_memory(const void* data, std::size_t bytes)
{
    return workers_.front()->pin_host_memory(data, bytes);
}

std::vector<std::string> worker_pool::names() const
{
    std::vector<std::string> out;
    for (const auto& w : workers_) out.push_back(w->name());
    return out;
}

bool worker_pool::healthy(std::chrono::nanoseconds limit) const
{
    const std::int64_t now = now_ns();
    for (const auto& busy : busy_since_ns_) {
        const std::int64_t since = busy.load();
        if (since && now - since > limit.count()) return false;
    }
    return true;
}

}  // namespace paq::runtime
