// The PLL and OQPSK detector of dsp/detector.hpp for every (packet, path) stream of a batch
// at once on the GPU: one thread per stream, loop state in double as on the CPU.
// The phase smoother in four kernels: its PLL a thread per stream, its passes over
// the pairs a warp per stream, its filters sixteen lanes per stream; the same arithmetic as
// dsp::detect_packet_smoothed, in the same order. Gated (receiver.phase_smoother auto), the
// PLL measures its phase's wander per stream, a kernel a thread per packet picks the packets
// (dsp::phase_gate) and lists their streams, and the smoother's kernels run on that list.
//
// Decision samples are laid out stream by stream, v[s * 6336 + k] (bit k of stream s): the
// stage before writes each (packet, path) stream contiguously, and each thread reads its
// stream 128 bytes at a time (16 bits ahead of the PLL, so the chain never waits on memory).
#pragma once

#include "dsp/batch.hpp"
#include "dsp/detector.hpp"
#include "dsp/types.hpp"
#include "gpu/stream_ref.hpp"

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace paq::gpu {

/// Where the phase smoother decides (receiver_config::phase_smoother): never (the PLL,
/// dsp::detect_packet), always (dsp::detect_packet_smoothed), or gated: the PLL on every
/// stream, then the smoother on every stream of the packets whose PLL phase wandered
/// (dsp/phase_gate.hpp; streams come six to a packet, p * 6 + path).
enum class smoother_use { never, always, gated };

class stream_detector {
public:
    /// With the smoother (always, gated) per stream 101 KB of device memory more. keep_phase:
    /// the PLL keeps its phase per bit pair too (the smoother always does): device_theta().
    /// keep_soft: every data bit's decision statistic is kept (device_soft()).
    stream_detector(int device_id, std::size_t max_streams, smoother_use smoother = smoother_use::never, bool keep_phase = false,
                    bool keep_soft = false);
    ~stream_detector();
    stream_detector(const stream_detector&) = delete;
    stream_detector& operator=(const stream_detector&) = delete;

    /// v: streams x 6336 decision samples (stream by stream). bits: streams x 768 bytes (MSB first).
    /// acq: the loop over the known bits; track: the PLL's over the data; boot: the smoother's
    /// forward PLL over the data (dsp::smoother::bootstrap_bn_t).
    void detect(std::span<const cf32> v, std::size_t streams, const dsp::pll_gains& acq, const dsp::pll_gains& track,
                const dsp::pll_gains& boot, std::span<std::uint8_t> bits, std::span<dsp::path_stats> stats);

    // --- device-level API: a stage before writes the decision samples straight into
    // device_input() (streams x 6336, stream by stream); detect_device() runs asynchronously on
    // `stream` and leaves bits (streams x 768) and stats in device_bits()/device_stats().
    [[nodiscard]] cf32* device_input() noexcept;
    [[nodiscard]] std::uint8_t* device_bits() noexcept;
    [[nodiscard]] dsp::path_stats* device_stats() noexcept;
    /// keep_soft: the statistic each data bit was decided on (its rail after the carrier phase
    /// it was decided at: the PLL's, or the smoother's where it decided the stream, the one
    /// dsp::cpu_backend hands dsp::sxs_llrs), stream s's bit i at [s * 6144 + i], for the
    /// streams of the last detect_device() or redecide_device(); nullptr without keep_soft.
    [[nodiscard]] const float* device_soft() const noexcept;
    /// The phase each bit pair was derotated by (dsp::sxs_trace::theta, in float): pair j of
    /// stream s at [s * 3168 + j] for the streams of the last detect_device(); nullptr
    /// without the smoother or keep_phase.
    [[nodiscard]] const float* device_theta() const noexcept;
    /// The phase each bit was derotated by where the smoother decided it (step g of
    /// dsp::detect_packet_smoothed, each bit its own): bit k of stream s at [s * 6336 + k], for
    /// every stream (smoother always) or the smoothed packets' (gated: device_smoothed());
    /// nullptr without the smoother.
    [[nodiscard]] const float* device_theta_bit() const noexcept;
    /// Gated: per packet (streams / 6 of them), 1 where the smoother decided it; else nullptr.
    [[nodiscard]] const std::uint8_t* device_smoothed() const noexcept;
    void detect_device(std::size_t streams, const dsp::pll_gains& acq, const dsp::pll_gains& track, const dsp::pll_gains& boot,
                       cuda_stream_t stream);
    /// The receiver's carrier estimate from the decisions (dsp::carrier_correction): the PLL
    /// (acq over the known bits, track over the data) on the first `streams` streams of
    /// device_input(), and each stream's correction to dw (streams doubles, on the device).
    /// Its bits and statistics are scratch: the next detect_device() replaces them.
    void carrier_offsets_device(std::size_t streams, const dsp::pll_gains& acq, const dsp::pll_gains& track, double* dw,
                                cuda_stream_t stream);
    /// Gated: the number of streams the smoother decided in the last detect_device() (six per
    /// packet), on the device; else nullptr.
    [[nodiscard]] const int* device_smoothed_streams() const noexcept;
    /// After detect_device(), before the segments are derotated: per packet the smoother
    /// decided, the path whose phases derotate it (dsp::smoother::pre_derotation_source_for,
    /// from its smoothed statistics), and the list of the streams made again
    /// (dsp::smoother::pre_derotated). Needs the smoother (always or gated).
    void plan_rederivation_device(std::size_t streams, cuda_stream_t stream);
    /// Per packet (streams / 6), the derotation's source path from plan_rederivation_device, or
    /// dsp::smoother::no_derotation; nullptr without the smoother.
    [[nodiscard]] const std::uint8_t* device_derotation() const noexcept;
    /// After plan_rederivation_device() and the stage before having written the derotated
    /// segments' decision samples into device_input() (dsp::smoother::pre_derotation): the
    /// smoother again on the listed streams, their bit phases then plus the derotation (what
    /// dsp::cpu_backend does). Needs the smoother (always or gated).
    void redecide_device(std::size_t streams, const dsp::pll_gains& acq, const dsp::pll_gains& boot, cuda_stream_t stream);

private:
    /// dsp::detect_packet_smoothed on the listed streams (list null: streams 0 .. streams - 1).
    void smooth_device(std::size_t streams, const dsp::pll_gains& acq, const dsp::pll_gains& boot, const int* list, const int* count,
                       cuda_stream_t stream);
    struct impl;
    std::unique_ptr<impl> impl_;
};

/// The PLL's rotation (cos theta, -sin theta) for each theta, computed on the device by the
/// function the detector's loop uses: for the test that holds it to the CPU's
/// std::polar(1.0, -theta) on |theta| <= pi.
[[nodiscard]] std::vector<cf64> pll_rotations(int device_id, std::span<const double> theta);

}  // namespace paq::gpu
