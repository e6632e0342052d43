// The CPU reference backend: the whole chain in double precision, packets in parallel on all
// cores (OpenMP). Simple and obviously right; the GPU backend is tested against it.
#pragma once

#include "dsp/backend.hpp"
#include "dsp/receiver_config.hpp"

#include <array>
#include <memory>
#include <vector>

namespace paq::dsp {

/// One packet as the chain decided it, for display (the live view). Each path's samples are
/// derotated by the phase its detector decided the bits with and scaled to unit amplitude
/// (the mean |statistic| over the 192 known bits).
struct packet_view {
    static constexpr std::size_t max_points = 512;
    packet_record record;  ///< its estimates (channel taps, Eb/N0, CFO, ...) and start
    /// Per path: (I, Q) of the data bits two by two, I from an even bit's decision sample and Q
    /// from the odd bit's after it (the offset QPSK constellation); at most max_points.
    std::array<std::vector<cf32>, chain::num_paths> constellation;
    /// Per path: the I rail at 2 samples per bit from the first data bit's decision on, so that
    /// every 4th sample is an I decision (an eye of two symbols: 9 samples from each of them);
    /// at most max_points + 1.
    std::array<std::vector<float>, chain::num_paths> eye_i;
};

class cpu_backend final : public batch_processor {
public:
    /// Throws std::invalid_argument if cfg does not validate.
    explicit cpu_backend(const receiver_config& cfg);
    ~cpu_backend() override;

    using batch_processor::process;
    void process(const sample_batch& batch, batch_output& out) override;
    [[nodiscard]] std::string name() const override { return "cpu"; }
    void set_soft_output(bool on) override;

    /// One packet whose start is at window index `start` (may be near the window's edges:
    /// samples outside are read as zero). bits_out: the packet's streams, receiver_config::streams()
    /// x 768 bytes. Used by process() and by the tests.
    void process_packet(const cf32* window, std::size_t window_len, long long start, packet_record& rec,
                        std::uint8_t* bits_out);

    /// The chain on `batch` as process() does, and its first packet into `view`. False (the
    /// view untouched) when no packet was found.
    bool inspect(const sample_batch& batch, batch_output& out, packet_view& view);

private:
    struct impl;
    std::unique_ptr<impl> impl_;
};

}  // namespace paq::dsp
