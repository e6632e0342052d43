#include "runtime/receiver_run.hpp"

#include "dsp/input_stage.hpp"
#include "runtime/feed.hpp"

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

/// The run for samples of type T (cf32, or ci16 kept at its width up to the backend), on a
/// pool that may still be in the making: the stream engine over a reader_feed.
template <class T>
stream_stats run_receiver_t(const pool_future& pool_f, const dsp::receiver_config& cfg, dsp::pn_pattern pattern,
                                double sample_rate_hz, float ci16_scale, const std::function<std::size_t(std::span<T>)>& read,
                                const batch_fn& on_batch, std::span<const io::recording_mark> marks = {})
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
    reader_feed<T> source(read, marks, std::is_same_v<T, ci16> ? std::optional<float>(ci16_scale) : std::nullopt);
    if (source.channels() != cfg.channels) {
        try {
            if (worker_pool* p = pool_f.get()) p->close();
        } catch (...) {  // NOLINT(bugprone-empty-catch): the channel error is the one to report
        }
        throw std::invalid_argument("run_receiver: the samples have " + std::to_string(source.channels()) +
                                    " receive channel(s) but the receiver is set for " + std::to_string(cfg.channels));
    }
    stream_options opt;
    opt.receiver = cfg;
    opt.pattern = pattern;
    opt.sample_rate_hz = sample_rate_hz;
    std::vector<batch_sink> sinks;
    if (on_batch) sinks.push_back(on_batch);
    stream_engine engine(std::move(opt), source, pool_f, std::move(sinks));
    return engine.run();
}

}  // namespace

dsp::run_summary run_receiver(worker_pool& pool, const dsp::receiver_config& cfg, dsp::pn_pattern pattern,
                              double sample_rate_hz, const read_fn& read, const batch_fn& on_batch)
{
    return run_receiver_t<cf32>(ready_pool(pool), cfg, pattern, sample_rate_hz, 1.0f, read, on_batch).tally;
}

stream_stats run_receiver(const pool_future& pool, const dsp::receiver_config& cfg, dsp::pn_pattern pattern,
                              double sample_rate_hz, const read_fn& read, const batch_fn& on_batch,
                              std::span<const io::recording_mark> marks)
{
    return run_receiver_t<cf32>(pool, cfg, pattern, sample_rate_hz, 1.0f, read, on_batch, marks);
}

dsp::run_summary run_receiver_ci16(worker_pool& pool, const dsp::receiver_config& cfg, dsp::pn_pattern pattern,
                                   double sample_rate_hz, float ci16_scale, const read_ci16_fn& read, const batch_fn& on_batch)
{
    return run_receiver_t<ci16>(ready_pool(pool), cfg, pattern, sample_rate_hz, ci16_scale, read, on_batch).tally;
}

stream_stats run_receiver_ci16(const pool_future& pool, const dsp::receiver_config& cfg, dsp::pn_pattern pattern,
                                   double sample_rate_hz, float ci16_scale, const read_ci16_fn& read, const batch_fn& on_batch,
                                   std::span<const io::recording_mark> marks)
{
    return run_receiver_t<ci16>(pool, cfg, pattern, sample_rate_hz, ci16_scale, read, on_batch, marks);
}

stream_stats run_receiver_x2(const pool_future& pool, const dsp::receiver_config& cfg, dsp::pn_pattern pattern,
                             double sample_rate_hz, const read_x2_fn& read, const batch_fn& on_batch,
                             std::span<const io::recording_mark> marks)
{
    return run_receiver_t<cf32x2>(pool, cfg, pattern, sample_rate_hz, 1.0f, read, on_batch, marks);
}

dsp::run_summary run_receiver_x2(dsp::batch_processor& backend, const dsp::receiver_config& cfg, dsp::pn_pattern pattern,
                                 double sample_rate_hz, std::span<const cf32x2> samples, const batch_fn& on_batch)
{
    std::vector<std::unique_ptr<dsp::batch_processor>> one;
    one.push_back(std::make_unique<borrowed_backend>(backend));
    worker_pool pool(std::move(one), {}, 1);
    std::size_t pos = 0;
    const read_x2_fn read = [&](std::span<cf32x2> out) {
        const std::size_t n = std::min(out.size(), samples.size() - pos);
        std::copy_n(samples.begin() + static_cast<std::ptrdiff_t>(pos), n, out.begin());
        pos += n;
        return n;
    };
    return run_receiver_t<cf32x2>(ready_pool(pool), cfg, pattern, sample_rate_hz, 1.0f, read, on_batch).tally;
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
