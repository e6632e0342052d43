// The GPU backend: the whole chain of dsp::cpu_backend on one CUDA device, behind the same
// dsp::batch_processor interface.
//
//   Create: tables to the device, every buffer for the largest window, cuFFT plans
//   process(batch): split into parts (dsp::split_batch), each part on its own stream:
//     window up (in chunks; asynchronous from pinned memory; the parts' uploads in turn) -> metric ->
//     packet location (gpu/preamble_detector: dsp::locate_packets' rule on the device) ->
//     estimates -> ZF/MMSE (Levinson) -> FFT of each segment -> CMA steps (on chip, gpu/cma)
//     -> tap spectra -> per packet on chip: for each path R x C x H_NO folded, N/2-point IFFT,
//     decision samples -> PLL/OQPSK detector for all (packet, path) streams -> bits,
//     estimates and packet starts back -> records
//
// An input not at 2 samples per bit is split into parts in the INPUT domain (the
// input geometry's guards); each part uploads its input samples and resamples them on the
// device (gpu/resampler) into its 2-samples-per-bit window before the metric. With clock
// tracking, every part first queues upload + metric + location + M around each peak and the
// starts back; then, part by part, the host refines the starts and estimates the clock over
// dsp::clock_recovery's scopes exactly as the CPU does (dsp::clock_steps), uploads the steps
// and queues the rest of the part's chain, whose gather re-times each packet.
//
// One host synchronization per part, when its records are filled (with clock tracking, one
// more when its packets are located): the packet count stays on
// the device, and every stage runs over all of a part's max_packets slots (slots past the
// count hold zeros; a full default batch in 4 parts has 775 or 776 packets in 778 slots
// each). process() allocates no device memory and creates no plan; its only host
// allocations are the returned batch_output and the list of parts.
//
// Single precision, except the Levinson solves and the PLL state (double).
#pragma once

#include "dsp/backend.hpp"
#include "dsp/receiver_config.hpp"

#include <array>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace paq::gpu {

class cuda_backend final : public dsp::batch_processor {
public:
    /// Throws std::invalid_argument if cfg does not validate or fft_size is not 16384, and
    /// std::runtime_error if the device lacks the shared memory the kernels need
    /// (gpu::backend_unsupported_reason).
    /// `solver` computes the ZF and MMSE taps: "levinson" (default: the project's, double
    /// precision), "cusolver-dn-chol" or "cusolver-sp-qr" (float; the thesis' baselines). With
    /// a float solver, packets whose ZF condition number exceeds 1e6 (flagged
    /// ill-conditioned) or that it cannot factor fall back to Levinson's ZF taps.
    /// Throws std::invalid_argument for another name.
    ///
    /// `parts`: each batch window is split into this many parts (dsp::split_batch), each with
    /// its own chain, buffers and stream. The parts run concurrently: the device works on the
    /// first while the later ones upload, and the host fills the records of one while the
    /// device works on the next. The packets and bits are those of the whole window (test
    /// batching.parts_give_what_the_whole_batch_gives; GPU test on whole batches). GPU memory
    /// is about the same for any count (each part's buffers are sized for its share). Throws
    /// std::invalid_argument outside 1 .. max_parts.
    cuda_backend(const dsp::receiver_config& cfg, int device_id, const std::string& solver = "levinson",
                 int parts = default_parts);
    static constexpr int default_parts = 4;
    static constexpr int max_parts = 16;
    ~cuda_backend() override;

    using dsp::batch_processor::process;
    void process(const dsp::sample_batch& batch, dsp::batch_output& out) override;
    [[nodiscard]] std::string name() const override { return "cuda"; }
    /// Soft output: with the trellis, each part keeps 6 x 6144 LLR bytes per packet slot on the
    /// device and page-locked on the host (about 115 MB each for a default batch) and copies
    /// them back with the bits.
    void set_soft_output(bool on) override;
    /// A host_pin of the range (page-locked for every device); nullptr when the system refuses
    /// (the memlock limit): uploads from the range then go through pageable copies.
    [[nodiscard]] std::shared_ptr<void> pin_host_memory(const void* data, std::size_t bytes) override;
    /// enable_stage_timing and last_timing behind the interface (paqd replay --stage-timing).
    void set_stage_timing(bool on) override { enable_stage_timing(on); }
    [[nodiscard]] bool last_stage_times(dsp::stage_times& out) const override;

    /// Stages of process(), in order. Device stages are timed with CUDA events recorded on
    /// the backend's stream between them; `records` is the host filling the output.
    enum class stage : int {
        upload_metric,  ///< window to the device and M(u) (overlapped, in chunks; with resampling the input goes up and is resampled chunk by chunk too)
        resample,       ///< the resample kernels' own device time (inside upload_metric, overlapping the upload); 0 at 2 samples per bit
        locate,         ///< peak search and packet rule on the device
        clock,          ///< clock tracking: M around the peaks, starts back, the host's estimate, the steps up (device timeline: located -> steps on the device); 0 with tracking off
        estimates,      ///< segments, CFO, de-rotation, channel, noise
        solvers,        ///< ZF and MMSE Levinson solves, single-path fit
        spectra,        ///< FFT of the segments and of the channels, condition numbers
        cma,            ///< CMA iterations
        paths,          ///< six filter paths: tap spectra, then per packet on chip the folded products, inverse transforms, decision samples
        detector,       ///< PLL / OQPSK detector
        trellis,        ///< receiver.detector trellis: its low-passed, derotated input at 2 samples per bit (gpu/paths.cuh), then the trellis detector (gpu/trellis.cuh); 0 with sxs
        fec,            ///< receiver.fec: each stream's LLRs made, every codeword decoded (gpu/ldpc_decoder.hpp); 0 without FEC
        copy_back,      ///< bits, estimates and starts to pinned host memory
        records,        ///< host: batch_output filled (host clock)
        count
    };
    static constexpr int stage_count = static_cast<int>(stage::count);
    [[nodiscard]] static const char* stage_name(stage s) noexcept;

    /// Per-stage timing of each process() (off by default: when off, process() records no
    /// events and reads no clocks for it).
    void enable_stage_timing(bool on) noexcept;
    /// With several parts, a stage's time is the sum over the parts, which overlap one
    /// another (and a part's upload includes waiting for the earlier parts' uploads): the
    /// stages then add up to more than the end to end. Time a one-part backend to see where
    /// the time of the chain goes.
    struct timing {
        bool valid = false;                   ///< stage timing was on for the last process()
        bool pinned_input = false;            ///< the window came from page-locked memory
        int parts = 0;                        ///< parts the window was split into
        std::array<double, stage_count> ms{}; ///< per stage, milliseconds, summed over the parts
        double device_ms = 0.0;               ///< first event of the first part to the last of the last
        /// When each part's stages ended, from the first part's start (CUDA events): where a
        /// batch's parts overlap and what the last one leaves at the end.
        struct stage_end {
            int part = 0;
            stage st = stage::count;
            double ms = 0.0;
        };
        std::vector<stage_end> timeline;
        /// The host's side of the same process(), host clock: from its start until every part
        /// was queued; the last part's collection (waiting for its stream, then its records
        /// and bits), and of that the records and bits alone; the whole call.
        double host_queued_ms = 0.0, host_last_collect_ms = 0.0, host_last_records_ms = 0.0, host_total_ms = 0.0;
        /// The first part's clock on the host (with clock tracking): the whole of it, of that
        /// the wait for the part's location, then the queueing of the rest of its chain.
        double host_first_clock_ms = 0.0, host_first_locate_wait_ms = 0.0, host_first_queue_back_ms = 0.0;
        /// receiver.fec sent as the continuous stream: after every part, its frames found,
        /// gathered, decoded and back, and of that the finding (the first packets' LLRs back,
        /// the markers' search, the frames laid out); host clock, 0 otherwise.
        double host_stream_fec_ms = 0.0, host_stream_find_ms = 0.0;
    };
    [[nodiscard]] timing last_timing() const noexcept;

private:
    struct impl;
    std::unique_ptr<impl> impl_;
};

/// Page-locks an existing host range for the life of the object (cudaHostRegister), so that
/// windows taken from it upload asynchronously at full bandwidth. For buffers that live
/// long (a source's ring buffer): registering costs milliseconds per 100 MB. Portable: pinned
/// for every device (one range serves several GPUs).
class host_pin {
public:
    /// `device` >= 0 is made current on the calling thread before the registration and again
    /// before it is undone: a thread's first CUDA call otherwise makes device 0's context,
    /// and the threads that lock and unlock windows (the reader's, the engine's) make no
    /// other. -1: the calling thread's current device.
    host_pin(const void* data, std::size_t bytes, int device = -1);
    ~host_pin();
    host_pin(const host_pin&) = delete;
    host_pin& operator=(const host_pin&) = delete;

private:
    void* p_ = nullptr;
    int device_ = -1;
};

}  // namespace paq::gpu
