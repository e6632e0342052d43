// What a run of the chain adds up to: the per-path PN counters and the estimates' averages
// over a stream of batch outputs (run_tally, run_summary), and where the run's time went
// (run_timing). The stream engine (runtime/stream_engine.hpp) keeps one for every run, live
// or replayed.
#pragma once

#include "dsp/backend.hpp"
#include "dsp/ber.hpp"
#include "dsp/receiver_config.hpp"
#include "dsp/thread_team.hpp"

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace paq::dsp {

/// A coded link's decoding on one stream (receiver.fec): its codewords, and the channel bits of
/// the converged ones against the decoded codeword.
struct fec_summary {
    std::uint64_t codewords = 0;
    std::uint64_t codewords_failed = 0;   ///< not converged within receiver.fec_iterations
    std::uint64_t iterations = 0;         ///< summed over the codewords
    std::uint64_t channel_bits = 0;       ///< received bits of converged codewords
    std::uint64_t channel_bit_errors = 0; ///< of them, decided otherwise than the decoded codeword
    [[nodiscard]] double fer() const noexcept { return codewords ? static_cast<double>(codewords_failed) / static_cast<double>(codewords) : 0.0; }
    [[nodiscard]] double channel_ber() const noexcept
    {
        return channel_bits ? static_cast<double>(channel_bit_errors) / static_cast<double>(channel_bits) : 0.0;
    }
    [[nodiscard]] double mean_iterations() const noexcept
    {
        return codewords ? static_cast<double>(iterations) / static_cast<double>(codewords) : 0.0;
    }
    /// Adds `count` codewords of n bits each (one packet's stream: batch_output::packet_codewords).
    void add(const codeword_result* cw, int count, int n) noexcept
    {
        for (int c = 0; c < count; ++c) {
            ++codewords;
            iterations += cw[c].iterations;
            if (!cw[c].converged) {
                ++codewords_failed;
                continue;
            }
            channel_bits += static_cast<std::uint64_t>(n);
            channel_bit_errors += cw[c].channel_errors;
        }
    }
};

struct path_summary {
    std::string name;
    std::uint64_t packets = 0;
    std::uint64_t bits_checked = 0;
    std::uint64_t bit_errors = 0;
    std::uint64_t bits_before_lock = 0;
    std::uint64_t resyncs = 0;
    bool locked = false;
    double ber = 0.0;
    double mean_bep_estimate = 0.0;
    /// Sum over the run's packets of this path's BEP estimate (a running sum: with
    /// run_summary::packets_found it gives the mean over any window, e.g. a Prometheus rate).
    double bep_estimate_sum = 0.0;
    /// With receiver.fec: the decoding; the PN counts above (bits_checked .. ber) are then the
    /// decoded information bits'.
    fec_summary fec;
};

/// Where a run's time went (run_receiver). The stages overlap, so their busy times may sum to
/// more than elapsed_s; the largest of them bounds how fast the run can go.
struct run_timing {
    double elapsed_s = 0.0;  ///< wall clock, first read to last tally
    double read_s = 0.0;     ///< in `read` (file reading and sample conversion)
    double batch_s = 0.0;    ///< cutting batch windows: committing samples, taking complete windows, recycling
    double process_s = 0.0;  ///< in the backend's process()
    double tally_s = 0.0;    ///< PN counting, estimate sums and `on_batch` (records)
    double lock_s = 0.0;     ///< page-locking windows (pin_host_memory), on the reader's thread
    double submit_wait_s = 0.0;  ///< the reader waiting for room in the worker pool (back-pressure)
    double pool_wait_s = 0.0;    ///< the reader waiting for the pool to be made (its windows read meanwhile)
    std::uint64_t windows = 0;         ///< distinct window storages the backend was given
    std::uint64_t windows_locked = 0;  ///< of them, page-locked by the backend (pin_host_memory)
};

/// `streams` empty path summaries named by dsp::stream_name (none .. fde2[_trellis]).
[[nodiscard]] std::vector<path_summary> stream_summaries(int streams);

/// A receive channel's Eb/N0 at or below this is a channel that carried nothing (the chain
/// records a channel of zeros as -300 dB).
inline constexpr float silent_channel_ebn0_db = -299.0f;

struct run_summary {
    std::uint64_t samples = 0;
    std::uint64_t batches = 0;
    std::uint64_t packets_found = 0;
    std::uint64_t packets_truncated = 0;  ///< cut by a gap or the end of the recording
    std::uint64_t packets_flagged = 0;    ///< any flag set
    std::uint64_t nonfinite_samples = 0;
    std::uint64_t packets_skipped = 0;    ///< gaps in the packet sequence (missed packets)
    double mean_cfo_rad_per_sample = 0.0;
    double mean_cfo_hz = 0.0;
    double mean_ebn0_db = 0.0;            ///< 10 log10 of the mean linear estimate
    /// Running sums over the packets found (means over a window: their increase divided by
    /// packets_found's). The CFO sum is signed, so it may go down; the Eb/N0 sum (linear) never does.
    double cfo_hz_sum = 0.0;
    double ebn0_linear_sum = 0.0;
    /// Two receive channels (packet_record::receive_channels 2), per channel received (0: the
    /// first, 1: the second): the packets it was the better one on (packet_record::
    /// best_channel, the per-packet selection), its Eb/N0 estimates summed as linear ratios,
    /// and their mean in dB. All zero with one channel.
    std::array<std::uint64_t, chain::max_receive_channels> packets_best_channel{};
    std::array<double, chain::max_receive_channels> channel_ebn0_linear_sum{};
    std::array<double, chain::max_receive_channels> channel_mean_ebn0_db{};
    /// Each channel's received level (packet_record::channel_level_db): the sum of the packets'
    /// as linear powers, and their mean in dB (-300: only zeros).
    std::array<double, chain::max_receive_channels> channel_level_linear_sum{};
    std::array<double, chain::max_receive_channels> channel_mean_level_db{};
    std::uint64_t packets_two_channel = 0;  ///< packets received on two channels
    /// Of them, packets on which the channel carried nothing (all zeros: a dead input or a
    /// disconnected antenna; its Eb/N0 reads -300 dB).
    std::array<std::uint64_t, chain::max_receive_channels> packets_channel_silent{};
    double max_zf_condition = 0.0;        ///< largest ZF condition number seen
    std::uint64_t packets_ill_conditioned = 0;  ///< ZF condition above 1e6
    double mean_clock_ppm = 0.0;          ///< transmitter clock against the sample clock, mean over packets
    std::uint64_t packets_clock_corrected = 0;  ///< packets re-timed for the clock offset
    /// Packets whose PLL phase wandered, detected by the phase smoother (flag_phase_smoothed:
    /// receiver.phase_smoother auto).
    std::uint64_t packets_phase_smoothed = 0;
    /// Packets the smoother decided whose segment was derotated by the unequalized path's
    /// phases, every equalized path made again from it (flag_unequalized_phase).
    std::uint64_t packets_unequalized_phase = 0;
    /// Front-end correction (receiver_config::front_end_correction): packets estimated, those
    /// corrected (above the gate), and the means of the estimates (IQ amplitude dB, phase deg;
    /// DC dBc as 10 log10 of the mean power ratio).
    std::uint64_t packets_front_end_estimated = 0;
    std::uint64_t packets_front_end_corrected = 0;
    double mean_iq_gain_db = 0.0;
    double mean_iq_phase_deg = 0.0;
    double mean_dc_dbc = -300.0;
    /// One per output stream (run_tally's streams: the six paths, or twelve with detector both),
    /// named by dsp::stream_name.
    std::vector<path_summary> paths = stream_summaries(chain::num_paths);
    run_timing timing;  ///< filled by run_receiver
};

/// The means of the front-end estimates (dsp/iq_correction) over the packets that carry one
/// (front_end_estimated): IQ amplitude and phase as arithmetic means, the DC as 10 log10 of the
/// mean power ratio. NaN while no packet was added. The run's summary and the daemon's
/// last-batch gauges both use it.
class front_end_means {
public:
    void add(const packet_record& rec) noexcept;
    [[nodiscard]] std::uint64_t packets() const noexcept { return n_; }
    [[nodiscard]] double iq_gain_db() const noexcept;
    [[nodiscard]] double iq_phase_deg() const noexcept;
    [[nodiscard]] double dc_dbc() const noexcept;  ///< -300 when every DC estimate was zero

private:
    std::uint64_t n_ = 0;
    double gain_ = 0.0, phase_ = 0.0, dc_lin_ = 0.0;
};

/// The per-path PN counters and the estimate averages over a stream of batch outputs: what
/// run_receiver() returns, kept up to date batch by batch (the daemon's status line and its
/// final summary use the same). Not thread-safe.
class run_tally {
public:
    /// \param chain_rate_hz the chain's sample rate, 2 x the bit rate (CFOs in rad/sample refer
    /// to it, whatever the input's rate)
    /// \param packet_spacing_samples input samples between packet starts (input_geometry)
    /// \param streams output streams per packet (receiver_config::streams(): 6, or 12)
    /// \param fec the coded link's framing (receiver.fec), or none: then each stream's PN
    /// counter takes its decoded information bits, and its codewords are counted
    run_tally(pn_pattern pattern, double chain_rate_hz, double packet_spacing_samples, int streams,
              std::optional<fec_framing> fec = std::nullopt);
    /// One batch output, in batch order, with the tally's number of streams
    /// (std::invalid_argument otherwise).
    void add(const batch_output& out);
    /// Samples that went into the receiver (for the summary's sample count).
    void add_samples(std::uint64_t n) noexcept { samples_ += n; }
    [[nodiscard]] run_summary summary() const;

private:
    double sample_rate_hz_;
    run_summary s_;
    std::uint64_t samples_ = 0;
    std::vector<stream_ber_counter> counters_;
    std::vector<double> bep_sum_;
    std::optional<fec_framing> fec_;
    std::vector<fec_summary> fec_sums_;
    double cfo_sum_ = 0.0;
    double clock_ppm_sum_ = 0.0;
    double ebn0_lin_sum_ = 0.0;
    front_end_means front_end_;
    std::unique_ptr<thread_team> team_;  ///< the streams' threads (made by the first batch of two pieces or more)
};

}  // namespace paq::dsp
