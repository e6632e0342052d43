#include "gpu/multi_gpu.hpp"

#include "gpu/cuda_backend.hpp"

#include <condition_variable>
#include <deque>
#include <future>
#include <mutex>
#include <stdexcept>
#include <thread>

namespace paq::gpu {

namespace {

struct job {
    std::shared_ptr<const dsp::sample_batch> batch;
    std::promise<dsp::batch_output> result;
};

struct worker {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<job> queue;
    bool stop = false;
    std::thread thread;
};

}  // namespace

struct multi_gpu_runner::impl {
    std::size_t depth;
    std::vector<std::unique_ptr<worker>> workers;
    std::deque<std::future<dsp::batch_output>> pending;
    std::size_t next_worker = 0;

    static void run(worker& w, std::unique_ptr<cuda_backend> backend)
    {
        for (;;) {
            job j;
            {
                std::unique_lock lock(w.mu);
                w.cv.wait(lock, [&] { return w.stop || !w.queue.empty(); });
                if (w.queue.empty()) return;  // stop requested and nothing left
                j = std::move(w.queue.front());
                w.queue.pop_front();
            }
            w.cv.notify_all();  // room in the queue for submit()
            try {
                j.result.set_value(backend->process(*j.batch));
            } catch (...) {
                j.result.set_exception(std::current_exception());
            }
        }
    }
};

multi_gpu_runner::multi_gpu_runner(const dsp::receiver_config& cfg, const std::vector<int>& devices, std::size_t queue_depth)
    : impl_(std::make_unique<impl>())
{
    if (devices.empty()) throw std::invalid_argument("multi_gpu_runner: no devices");
    if (queue_depth == 0) throw std::invalid_argument("multi_gpu_runner: queue_depth must be >= 1");
    impl_->depth = queue_depth;
    // Backends are created here, on this thread, so that Create errors surface to the caller;
    // each then lives on its worker thread (cuda_backend selects its device in process()).
    for (int dev : devices) {
        auto backend = std::make_unique<cuda_backend>(cfg, dev);
        auto w = std::make_unique<worker>();
        w->thread = std::thread(&impl::run, std::ref(*w), std::move(backend));
        impl_->workers.push_back(std::move(w));
    }
}

multi_gpu_runner::~multi_gpu_runner()
{
    for (auto& w : impl_->workers) {
        {
            std::lock_guard lock(w->mu);
            w->stop = true;
        }
        w->cv.notify_all();
    }
    for (auto& w : impl_->workers) w->thread.join();
}

void multi_gpu_runner::submit(std::shared_ptr<const dsp::sample_batch> batch)
{
    auto& m = *impl_;
    worker& w = *m.workers[m.next_worker];
    m.next_worker = (m.next_worker + 1) % m.workers.size();
    job j{std::move(batch), {}};
    m.pending.push_back(j.result.get_future());
    {
        std::unique_lock lock(w.mu);
        w.cv.wait(lock, [&] { return w.queue.size() < m.depth; });
        w.queue.push_back(std::move(j));
    }
    w.cv.notify_all();
}

dsp::batch_output multi_gpu_runner::next()
{
    auto& m = *impl_;
    if (m.pending.empty()) throw std::logic_error("multi_gpu_runner: no batch pending");
    auto f = std::move(m.pending.front());
    m.pending.pop_front();
    return f.get();
}

std::size_t multi_gpu_runner::workers() const noexcept { return impl_->workers.size(); }

}  // namespace paq::gpu
