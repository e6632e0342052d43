// The live view: a page served by paqd's HTTP server beside /metrics (GET /view), and the
// data it draws (GET /view/data.json), updated once a second:
//
//   per path    BER and DQM of each second over the last minutes (from the run's counters),
//               a recent packet's constellation and eye, PN lock
//   the link    the input spectrum and level around that packet, its channel estimate,
//               Eb/N0, CFO, and every counter of the registry (runtime/counters.hpp)
//
// Nothing on the data path waits for it: the engine's on_processed hook copies one packet's
// samples out of a processed window when the view asks for one (at most once a second; a
// try-lock, or nothing), and the view's own thread runs that packet through the CPU reference
// chain (dsp::cpu_backend::inspect) to see each path's decisions. The page is self-contained
// (no outside assets) and only reads.
#pragma once

#include "dsp/batch.hpp"
#include "dsp/cpu_backend.hpp"
#include "dsp/fft.hpp"
#include "dsp/input_stage.hpp"
#include "dsp/receiver_config.hpp"
#include "runtime/counters.hpp"

#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace paq::daemon {

struct live_view_options {
    dsp::receiver_config receiver;  ///< the service's (the view's chain runs it on one thread)
    double sample_rate_hz = 0.0;    ///< the input's
    std::size_t history_points = 600;  ///< seconds of BER / DQM history kept (10 minutes)
    std::chrono::milliseconds period{1000};  ///< one history point and one packet per period
    std::size_t spectrum_bins = 512;         ///< the input spectrum's FFT size (Welch, Hann, 50% overlap)
};

class live_view {
public:
    using snapshot_fn = std::function<runtime::service_snapshot()>;

    /// snapshot: every counter now (the service's registry snapshot); called from the view's
    /// thread once started. std::invalid_argument for a receiver that does not validate.
    live_view(live_view_options opt, snapshot_fn snapshot);
    ~live_view();
    live_view(const live_view&) = delete;
    live_view& operator=(const live_view&) = delete;

    /// The engine's hook (runtime::stream_options::on_processed), from any worker thread: when
    /// the view wants a packet, copies the samples of the first one in `batch` whose segment
    /// lies inside the window. Returns at once otherwise.
    void on_processed(const dsp::sample_batch& batch, const dsp::batch_output& out);

    /// Starts the thread that calls tick() once a period; stopped by the destructor.
    void start();
    /// One update: a history point from the counters, the packet taken since the last one
    /// decided again for display, and a new packet asked for. From one thread at a time (the
    /// view's own once started; tests call it directly).
    void tick();

    /// The data the page draws, as JSON (format in docs/DAEMON.md, "Live view").
    [[nodiscard]] std::string data_json() const;
    /// The page: HTML with its script and style inline.
    [[nodiscard]] static std::string_view page();

    /// Packets shown so far (taken from the stream and decided again).
    [[nodiscard]] std::uint64_t packets_viewed() const noexcept { return packets_viewed_.load(); }

private:
    struct history_point {
        double t_s = 0.0;                 ///< seconds since the view started
        std::uint64_t packets = 0;        ///< packets found in this second
        std::vector<double> ber;          ///< per stream; NaN without bits checked (or no pattern)
        std::vector<double> dqm;          ///< per stream, from the mean estimated BEP; NaN without packets
        /// Per stream, a coded link's (receiver.fec) codewords decoded in this second, and the failed ones.
        std::vector<std::uint64_t> codewords, codewords_failed;
    };
    struct packet_display {
        dsp::packet_view view;
        std::vector<float> spectrum_db;   ///< Welch estimate, dB, centred (bin 0 = -fs/2)
        double level_db = 0.0;            ///< the excerpt's mean power, dB re. 1 (full scale of a ci16 input at scale 1/32768)
        /// Two receive channels: each channel's excerpt's mean power (level_db is channel 1's).
        std::vector<double> channel_level_db;
        double age_origin_s = 0.0;        ///< when it was shown (seconds since the view started)
    };

    void loop();
    [[nodiscard]] double now_s() const;
    void update_history(const runtime::service_snapshot& s);
    void show_packet(dsp::sample_batch&& excerpt);

    live_view_options opt_;
    snapshot_fn snapshot_;
    dsp::cpu_backend inspector_;
    dsp::input_geometry geometry_;
    dsp::fft_plan spectrum_plan_;  ///< made once: planning takes FFTW's lock
    dsp::batch_output inspect_out_;
    std::chrono::steady_clock::time_point t0_ = std::chrono::steady_clock::now();

    // The hook's side: a request flag and the excerpt it fills.
    std::atomic<bool> want_{true};
    std::mutex take_mu_;
    std::optional<dsp::sample_batch> taken_;

    // The view's state, read by data_json() from the HTTP thread.
    mutable std::mutex mu_;
    std::deque<history_point> history_;
    std::optional<runtime::service_snapshot> prev_;
    std::optional<packet_display> shown_;
    nlohmann::json counters_;
    std::vector<std::string> stream_names_;
    std::vector<bool> locked_;
    std::atomic<std::uint64_t> packets_viewed_{0};

    std::mutex run_mu_;
    std::condition_variable run_cv_;
    bool stopping_ = false;
    std::thread thread_;
};

}  // namespace paq::daemon
