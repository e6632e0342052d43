#include "runtime/receiver_run.hpp"

#include "dsp/batcher.hpp"
#include "dsp/input_stage.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <exception>
#include <future>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

namespace paq::runtime {

namespace {

using run_clock = std::chrono::steady_clock;

double seconds_since(run_clock::time_point t0) { return std::chrono::duration<double>(run_clock::now() - t0).count(); }

/// A backend the caller owns, lent to a pool.
class borrowed_backend final : public dsp::batch_processor {
public:
    explicit borrowed_backend(dsp::batch_processor& b) : b_(b) {}
    using dsp::batch_processor::process;
    void process(const dsp::sample_batch& batch, dsp::batch_output& out) override { b_.process(batch, out); }
    [[nodiscard]] std::string name() const override { return b_.name(); }
    void set_soft_output(bool on) override { b_.set_soft_output(on); }
    [[nodiscard]] std::shared_ptr<void> pin_host_memory(const void* data, std::size_t bytes) override
    {
        return b_.pin_host_memory(data, bytes);
    }

private:
    dsp::batch_processor& b_;
};

/// How many complete windows the reader keeps while the pool is still being made.
constexpr std::size_t pending_pool_read_ahead = 3;

/// The run for samples of type T (cf32, or ci16 kept at its width up to the backend), on a
/// pool that may still be in the making.
template <class T>
dsp::run_summary run_receiver_t(const pool_future& pool_f, const dsp::receiver_config& cfg, dsp::pn_pattern pattern,
                                double sample_rate_hz, float ci16_scale, const std::function<std::size_t(std::span<T>)>& read,
                                const batch_fn& on_batch, std::span<const dsp::stream_anchor> anchors = {})
{
    // The backends were made from cfg: the recording's rate must be the one they resample from.
    const dsp::input_geometry g = dsp::make_input_geometry(cfg);
    if (std::abs(sample_rate_hz - g.input_rate_hz) > 1e-6 * g.input_rate_hz) {
        try {
            if (worker_pool* p = pool_f.get()) p->close();
        } catch (...) {  // NOLINT(bugprone-empty-catch): the rate error is the one to report
        }
        throw std::invalid_argument("run_receiver: the samples are at " + std::to_string(sample_rate_hz) +
                                    " Hz but the receiver is configured for an input at " + std::to_string(g.input_rate_hz) +
                                    " Hz (set receiver_config::input_sample_rate_hz)");
    }
    const auto t_start = run_clock::now();
    dsp::run_tally tally(pattern, g.chain_rate_hz(), g.packet_spacing_samples(), cfg.streams());
    dsp::run_timing timing;
    using storage_t = typename dsp::basic_batcher<T>::storage;

    // The batcher fills its windows in place; a window whose result has been tallied goes back
    // to it, so a few windows circulate (filling, queued, in a backend, on the way back) and
    // each is page-locked once, the first time the reader hands it over. No window is freed
    // before every result is back: the pins are undone first (declared last), the windows
    // after.
    dsp::basic_batcher<T> bt(cfg.batch_samples, g.guard_before, g.guard_after, ci16_scale);
    std::mutex spares_m;
    std::vector<storage_t> spares;  // windows on their way back to the batcher
    std::atomic<bool> stop{false};
    std::exception_ptr reader_error;  // read after the reader is joined
    std::uint64_t samples_read = 0;
    std::size_t next_anchor = 0;  // the first of `anchors` not yet given to the batcher
    window_pins pins;

    std::thread reader([&] {
        worker_pool* pool = nullptr;
        // Complete windows read while the pool is still being made (its backends' setup).
        std::vector<dsp::sample_batch> waiting;
        const std::size_t window_bytes = bt.max_window_samples() * sizeof(T);
        auto submit = [&](dsp::sample_batch&& b) {
            const storage_t& storage = dsp::window_of<T>(b);
            timing.lock_s += pins.lock_once(*pool, storage.data(), storage.capacity() * sizeof(T), window_bytes);
            const auto t1 = run_clock::now();
            pool->submit(std::move(b));
            timing.submit_wait_s += seconds_since(t1);
        };
        // The pool, once made: windows go back to the batcher as soon as their backend is done
        // with them (not after the tally), so the reader rarely needs a new one; then the
        // windows read meanwhile go in.
        auto acquire = [&] {
            const auto t0 = run_clock::now();
            pool = pool_f.get();
            timing.pool_wait_s += seconds_since(t0);
            pool->set_recycle([&](dsp::sample_batch& b) {
                std::lock_guard lock(spares_m);
                spares.push_back(std::move(dsp::window_of<T>(b)));
            });
            for (auto& b : waiting) submit(std::move(b));
            waiting.clear();
        };
        try {
            auto hand_over = [&] {
                auto t_pop = run_clock::now();
                {
                    std::lock_guard lock(spares_m);
                    for (auto& v : spares) bt.recycle(std::move(v));
                    spares.clear();
                }
                for (;;) {
                    auto b = bt.pop();
                    timing.batch_s += seconds_since(t_pop);
                    if (!b) break;
                    if (pool == nullptr) {
                        if (waiting.size() < pending_pool_read_ahead &&
                            pool_f.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
                            waiting.push_back(std::move(*b));
                            t_pop = run_clock::now();
                            continue;
                        }
                        acquire();
                    }
                    submit(std::move(*b));
                    t_pop = run_clock::now();
                }
            };
            while (!stop) {
                // Read straight into the window being filled (no copy); a window is handed
                // over as soon as it is complete.
                const auto tw = run_clock::now();
                const auto space = bt.write_space();  // a fresh cf32 window's storage is zero-filled here
                timing.batch_s += seconds_since(tw);
                // A time anchor at the next sample: a discontinuity ends the segment first.
                while (next_anchor < anchors.size() && anchors[next_anchor].sample <= samples_read) {
                    const auto& a = anchors[next_anchor++];
                    if (a.sample < samples_read) continue;  // out of order: already past it
                    if (a.discontinuity && samples_read > 0) bt.gap(0);
                    bt.timestamp(a.utc_ns, sample_rate_hz);
                }
                // Reads stop at the next anchor, which then names the next read's first sample.
                std::size_t want = std::min<std::size_t>(space.size(), 1 << 22);
                if (next_anchor < anchors.size()) {
                    want = static_cast<std::size_t>(std::min<std::uint64_t>(want, anchors[next_anchor].sample - samples_read));
                }
                const auto t0 = run_clock::now();
                const std::size_t n = read(space.subspan(0, want));
                timing.read_s += seconds_since(t0);
                if (n == 0) break;
                samples_read += n;
                const auto t1 = run_clock::now();
                bt.commit(n);
                timing.batch_s += seconds_since(t1);
                hand_over();
            }
            if (!stop) {
                bt.finish();
                hand_over();
                if (pool == nullptr) acquire();
            }
        } catch (...) {
            reader_error = std::current_exception();
        }
        // The pool is closed by the reader in every case (made later or not at all: the
        // error comes out of the calling thread's get()).
        if (pool == nullptr) {
            try {
                pool = pool_f.get();
            } catch (...) {  // NOLINT(bugprone-empty-catch): rethrown by the calling thread
            }
        }
        if (pool != nullptr) pool->close();
    });

    worker_pool* pool = nullptr;
    std::exception_ptr first_error;
    try {
        pool = pool_f.get();
    } catch (...) {
        first_error = std::current_exception();
        stop = true;
    }
    while (pool != nullptr) {
        auto r = pool->next();
        if (!r) break;
        if (!first_error) {
            try {
                if (!r->out) {
                    if (r->error) std::rethrow_exception(r->error);
                    throw std::runtime_error("batch " + std::to_string(r->batch.index) + " was not processed");
                }
                const auto t0 = run_clock::now();
                tally.add(*r->out);
                if (on_batch) on_batch(*r->out);
                timing.tally_s += seconds_since(t0);
                pool->give_back(std::move(*r->out));
            } catch (...) {
                // End the run: the reader stops at its next read, the pool processes nothing
                // new, and what is under way is drained here.
                first_error = std::current_exception();
                stop = true;
                pool->abort();
            }
        }
    }
    reader.join();
    timing.windows = pins.windows();
    timing.windows_locked = pins.locked();
    pins.clear();
    if (reader_error && !first_error) first_error = reader_error;
    if (first_error) std::rethrow_exception(first_error);

    tally.add_samples(samples_read);
    dsp::run_summary s = tally.summary();
    timing.process_s = pool->stats().process_s;
    timing.elapsed_s = seconds_since(t_start);
    s.timing = timing;
    return s;
}

/// A pool already made, as a future.
pool_future ready(worker_pool& pool)
{
    std::promise<worker_pool*> p;
    p.set_value(&pool);
    return p.get_future().share();
}

}  // namespace

dsp::run_summary run_receiver(worker_pool& pool, const dsp::receiver_config& cfg, dsp::pn_pattern pattern,
                              double sample_rate_hz, const read_fn& read, const batch_fn& on_batch)
{
    return run_receiver_t<cf32>(ready(pool), cfg, pattern, sample_rate_hz, 1.0f, read, on_batch);
}

dsp::run_summary run_receiver(const pool_future& pool, const dsp::receiver_config& cfg, dsp::pn_pattern pattern,
                              double sample_rate_hz, const read_fn& read, const batch_fn& on_batch,
                              std::span<const dsp::stream_anchor> anchors)
{
    return run_receiver_t<cf32>(pool, cfg, pattern, sample_rate_hz, 1.0f, read, on_batch, anchors);
}

dsp::run_summary run_receiver_ci16(worker_pool& pool, const dsp::receiver_config& cfg, dsp::pn_pattern pattern,
                                   double sample_rate_hz, float ci16_scale, const read_ci16_fn& read, const batch_fn& on_batch)
{
    return run_receiver_t<ci16>(ready(pool), cfg, pattern, sample_rate_hz, ci16_scale, read, on_batch);
}

dsp::run_summary run_receiver_ci16(const pool_future& pool, const dsp::receiver_config& cfg, dsp::pn_pattern pattern,
                                   double sample_rate_hz, float ci16_scale, const read_ci16_fn& read, const batch_fn& on_batch,
                                   std::span<const dsp::stream_anchor> anchors)
{
    return run_receiver_t<ci16>(pool, cfg, pattern, sample_rate_hz, ci16_scale, read, on_batch, anchors);
}

dsp::run_summary run_receiver_ci16(dsp::batch_processor& backend, const dsp::receiver_config& cfg, dsp::pn_pattern pattern,
                                   double sample_rate_hz, float ci16_scale, const read_ci16_fn& read, const batch_fn& on_batch)
{
    std::vector<std::unique_ptr<dsp::batch_processor>> one;
    one.push_back(std::make_unique<borrowed_backend>(backend));
    worker_pool pool(std::move(one), {}, 1);
    return run_receiver_ci16(pool, cfg, pattern, sample_rate_hz, ci16_scale, read, on_batch);
}

dsp::run_summary run_receiver(dsp::batch_processor& backend, const dsp::receiver_config& cfg, dsp::pn_pattern pattern,
                              double sample_rate_hz, const read_fn& read, const batch_fn& on_batch)
{
    std::vector<std::unique_ptr<dsp::batch_processor>> one;
    one.push_back(std::make_unique<borrowed_backend>(backend));
    worker_pool pool(std::move(one), {}, 1);
    return run_receiver(pool, cfg, pattern, sample_rate_hz, read, on_batch);
}

dsp::run_summary run_receiver(dsp::batch_processor& backend, const dsp::receiver_config& cfg, dsp::pn_pattern pattern,
                              double sample_rate_hz, std::span<const cf32> samples, const batch_fn& on_batch)
{
    std::size_t pos = 0;
    return run_receiver(
        backend, cfg, pattern, sample_rate_hz,
        [&](std::span<cf32> out) {
            const std::size_t n = std::min(out.size(), samples.size() - pos);
            std::copy_n(samples.begin() + static_cast<std::ptrdiff_t>(pos), n, out.begin());
            pos += n;
            return n;
        },
        on_batch);
}

}  // namespace paq::runtime
