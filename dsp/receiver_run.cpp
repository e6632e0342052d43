#include "dsp/receiver_run.hpp"

#include "dsp/batcher.hpp"
#include "dsp/input_stage.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>
#include <limits>
#include <numbers>
#include <stdexcept>
#include <string>

namespace paq::dsp {

run_tally::run_tally(pn_pattern pattern, double chain_rate_hz, double packet_spacing_samples) : sample_rate_hz_(chain_rate_hz)
{
    for (int p = 0; p < chain::num_paths; ++p) counters_.emplace_back(pattern, packet_spacing_samples);
}

void run_tally::add(const batch_output& out)
{
    ++s_.batches;
    s_.packets_truncated += out.truncated_packets;
    s_.nonfinite_samples += out.nonfinite_samples;
    for (std::size_t i = 0; i < out.packets.size(); ++i) {
        const auto& rec = out.packets[i];
        ++s_.packets_found;
        if (rec.flags) ++s_.packets_flagged;
        if (rec.flags & flag_ill_conditioned) ++s_.packets_ill_conditioned;
        cfo_sum_ += rec.cfo_rad_per_sample;
        clock_ppm_sum_ += rec.clock_ppm;
        if (rec.clock_corrected) ++s_.packets_clock_corrected;
        if (rec.front_end_corrected) ++s_.packets_front_end_corrected;
        front_end_.add(rec);
        ebn0_lin_sum_ += std::pow(10.0, rec.ebn0_db / 10.0);
        s_.max_zf_condition = std::max(s_.max_zf_condition, rec.zf_condition);
    }
    // The paths' PN counters are independent: one thread each, every packet in order.
#pragma omp parallel for schedule(static, 1) if (out.packets.size() >= 64)
    for (int p = 0; p < chain::num_paths; ++p) {
        auto& counter = counters_[static_cast<std::size_t>(p)];
        double bep = 0.0;
        for (std::size_t i = 0; i < out.packets.size(); ++i) {
            counter.add_packet(out.packets[i].start_sample, out.packet_bits(i, p));
            bep += out.packets[i].paths[static_cast<std::size_t>(p)].bep_estimate;
        }
        bep_sum_[static_cast<std::size_t>(p)] += bep;
    }
}

void front_end_means::add(const packet_record& rec) noexcept
{
    if (!rec.front_end_estimated) return;
    ++n_;
    gain_ += rec.iq_gain_db;
    phase_ += rec.iq_phase_deg;
    dc_lin_ += std::pow(10.0, rec.dc_dbc / 10.0);
}

double front_end_means::iq_gain_db() const noexcept
{
    return n_ ? gain_ / static_cast<double>(n_) : std::numeric_limits<double>::quiet_NaN();
}

double front_end_means::iq_phase_deg() const noexcept
{
    return n_ ? phase_ / static_cast<double>(n_) : std::numeric_limits<double>::quiet_NaN();
}

double front_end_means::dc_dbc() const noexcept
{
    if (!n_) return std::numeric_limits<double>::quiet_NaN();
    return dc_lin_ > 0.0 ? 10.0 * std::log10(dc_lin_ / static_cast<double>(n_)) : -300.0;
}

run_summary run_tally::summary() const
{
    run_summary s = s_;
    s.samples = samples_;
    if (s.packets_found) {
        const double np = static_cast<double>(s.packets_found);
        s.mean_cfo_rad_per_sample = cfo_sum_ / np;
        s.mean_clock_ppm = clock_ppm_sum_ / np;
        s.mean_cfo_hz = s.mean_cfo_rad_per_sample * sample_rate_hz_ / (2.0 * std::numbers::pi);
        s.mean_ebn0_db = 10.0 * std::log10(ebn0_lin_sum_ / np);
    }
    s.packets_front_end_estimated = front_end_.packets();
    if (front_end_.packets()) {
        s.mean_iq_gain_db = front_end_.iq_gain_db();
        s.mean_iq_phase_deg = front_end_.iq_phase_deg();
        s.mean_dc_dbc = front_end_.dc_dbc();
    }
    for (int p = 0; p < chain::num_paths; ++p) {
        const auto& c = counters_[static_cast<std::size_t>(p)];
        const auto k = c.counts();
        auto& ps = s.paths[static_cast<std::size_t>(p)];
        ps.name = path_name(p);
        ps.packets = c.packets();
        ps.bits_checked = k.bits_checked;
        ps.bit_errors = k.bit_errors;
        ps.bits_before_lock = k.bits_before_lock;
        ps.resyncs = k.resyncs;
        ps.locked = k.locked;
        ps.ber = c.ber();
        ps.mean_bep_estimate =
            s.packets_found ? bep_sum_[static_cast<std::size_t>(p)] / static_cast<double>(s.packets_found) : 0.0;
    }
    s.packets_skipped = counters_[0].packets_skipped();
    return s;
}

namespace {

using run_clock = std::chrono::steady_clock;

double seconds_since(run_clock::time_point t0) { return std::chrono::duration<double>(run_clock::now() - t0).count(); }

// A bounded hand-over between two stages of the run. close() ends it: pop() then drains what is
// queued and returns nullopt; push() after close() refuses the item and leaves it with the
// caller (the run is ending early; a window must not be freed while it is page-locked).
template <typename T>
class handover {
public:
    explicit handover(std::size_t capacity) : capacity_(capacity) {}
    [[nodiscard]] bool push(T& item)
    {
        std::unique_lock lock(m_);
        not_full_.wait(lock, [&] { return closed_ || q_.size() < capacity_; });
        if (closed_) return false;
        q_.push_back(std::move(item));
        not_empty_.notify_one();
        return true;
    }
    std::optional<T> pop()
    {
        std::unique_lock lock(m_);
        not_empty_.wait(lock, [&] { return closed_ || !q_.empty(); });
        if (q_.empty()) return std::nullopt;
        T item = std::move(q_.front());
        q_.pop_front();
        not_full_.notify_one();
        return item;
    }
    void close()
    {
        std::lock_guard lock(m_);
        closed_ = true;
        not_empty_.notify_all();
        not_full_.notify_all();
    }

private:
    std::mutex m_;
    std::condition_variable not_full_, not_empty_;
    std::deque<T> q_;
    std::size_t capacity_;
    bool closed_ = false;
};

}  // namespace

run_summary run_receiver(batch_processor& backend, const receiver_config& cfg, pn_pattern pattern,
                         double sample_rate_hz, const std::function<std::size_t(std::span<cf32>)>& read,
                         const std::function<void(const batch_output&)>& on_batch)
{
    // The backend was made from cfg: the recording's rate must be the one it resamples from.
    const input_geometry g = make_input_geometry(cfg);
    if (std::abs(sample_rate_hz - g.input_rate_hz) > 1e-6 * g.input_rate_hz) {
        throw std::invalid_argument("run_receiver: the samples are at " + std::to_string(sample_rate_hz) +
                                    " Hz but the receiver is configured for an input at " + std::to_string(g.input_rate_hz) +
                                    " Hz (set receiver_config::input_sample_rate_hz)");
    }
    const auto t_start = run_clock::now();
    run_tally tally(pattern, g.chain_rate_hz(), g.packet_spacing_samples());
    run_timing timing;

    // Three stages overlap, one thread each: reading and batching (`read` converts the file's
    // samples), the backend (the calling thread: a GPU backend stays on the thread that made
    // it), and the tally with `on_batch`. Batches go through in order. The batcher fills its
    // windows in place; a window the backend is done with goes back to the batcher, so a few
    // windows circulate (one filling, one waiting, one in the backend, one on its way back)
    // and the backend page-locks each once, the first time it sees it. No window is freed
    // before the run ends, and every lock is undone before the windows are freed: `pins` is
    // declared last, so it is destroyed first, also when an exception ends the run.
    batcher bt(cfg.batch_samples, g.guard_before, g.guard_after);
    handover<sample_batch> to_backend(1);
    handover<batch_output> to_tally(2);
    std::mutex spares_m;
    std::vector<std::vector<cf32>> spares;  // windows on their way back to the batcher
    auto give_back = [&](std::vector<cf32>&& v) {
        std::lock_guard lock(spares_m);
        spares.push_back(std::move(v));
    };
    std::exception_ptr reader_error, tally_error;  // each read after its thread is joined
    std::atomic<bool> tally_failed{false};
    std::uint64_t samples_read = 0;
    std::vector<std::pair<const void*, std::shared_ptr<void>>> pins;

    std::thread reader([&] {
        try {
            auto hand_over = [&] {
                {
                    std::lock_guard lock(spares_m);
                    for (auto& v : spares) bt.recycle(std::move(v));
                    spares.clear();
                }
                while (auto b = bt.pop()) {
                    if (!to_backend.push(*b)) give_back(std::move(b->samples));
                }
            };
            for (;;) {
                // Read straight into the window being filled (no copy); a window is handed
                // over as soon as it is complete.
                const auto space = bt.write_space();
                const auto t0 = run_clock::now();
                const std::size_t n = read(space.subspan(0, std::min<std::size_t>(space.size(), 1 << 22)));
                timing.read_s += seconds_since(t0);
                if (n == 0) break;
                samples_read += n;
                const auto t1 = run_clock::now();
                bt.commit(n);
                timing.batch_s += seconds_since(t1);
                hand_over();
            }
            bt.finish();
            hand_over();
        } catch (...) {
            reader_error = std::current_exception();
        }
        to_backend.close();
    });
    std::thread tallier([&] {
        try {
            while (auto out = to_tally.pop()) {
                const auto t0 = run_clock::now();
                tally.add(*out);
                if (on_batch) on_batch(*out);
                timing.tally_s += seconds_since(t0);
            }
        } catch (...) {
            tally_error = std::current_exception();
            tally_failed = true;
            to_tally.close();
            to_backend.close();  // the reader stops at its next hand-over
        }
    });

    std::exception_ptr backend_error;
    const std::size_t window_bytes = bt.max_window_samples() * sizeof(cf32);
    while (auto b = to_backend.pop()) {
        if (tally_failed) {
            give_back(std::move(b->samples));
            break;
        }
        try {
            // Page-locked once per window storage the batcher reserved (it never grows).
            const void* data = b->samples.data();
            if (b->samples.capacity() * sizeof(cf32) >= window_bytes &&
                std::none_of(pins.begin(), pins.end(), [&](const auto& p) { return p.first == data; })) {
                pins.emplace_back(data, backend.pin_host_memory(data, b->samples.capacity() * sizeof(cf32)));
                ++timing.windows;
                if (pins.back().second) ++timing.windows_locked;
            }
            const auto t0 = run_clock::now();
            auto out = backend.process(*b);
            timing.process_s += seconds_since(t0);
            give_back(std::move(b->samples));
            if (!to_tally.push(out)) break;
        } catch (...) {
            backend_error = std::current_exception();
            give_back(std::move(b->samples));
            to_backend.close();
            break;
        }
    }
    to_backend.close();
    to_tally.close();
    reader.join();
    tallier.join();
    if (backend_error) std::rethrow_exception(backend_error);
    if (reader_error) std::rethrow_exception(reader_error);
    if (tally_error) std::rethrow_exception(tally_error);

    tally.add_samples(samples_read);
    run_summary s = tally.summary();
    timing.elapsed_s = seconds_since(t_start);
    s.timing = timing;
    return s;
}

run_summary run_receiver(batch_processor& backend, const receiver_config& cfg, pn_pattern pattern,
                         double sample_rate_hz, std::span<const cf32> samples,
                         const std::function<void(const batch_output&)>& on_batch)
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

}  // namespace paq::dsp
