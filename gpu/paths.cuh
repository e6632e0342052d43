// The six filter paths of the CUDA backend, a stage of its own (timed and profiled apart): the GPU
// side of the CPU backend's per-path filter (dsp/cpu_backend.cpp). For each packet and path,
// R x C x H_NO (R: the packet's spectrum; C: the path's equalizer: ZF, MMSE and CMA taps'
// spectra, the single path's inverse for none, the FDE formulas on H for FDE1 and FDE2;
// H_NO: the detection filter), folded so that one N/2-point inverse transform in shared
// memory gives the decision samples, written to the detector's input, stream p * 6 + path.
// CUDA code only (.cu).
#pragma once

#include <cuComplex.h>
#include <cuda_runtime_api.h>
#include <cstdint>

namespace paq::gpu {

/// Once per backend, on its device: the kernels' shared-memory opt-in.
void paths_setup_device();

/// One set of per-packet taps whose spectra are wanted: packet p's taps are
/// taps[p * taps_per_packet + i], tap i at time first + i (circularly on the N-point grid;
/// every time within 256 of 0, -256 <= first and first + taps_per_packet <= 256);
/// its spectrum (forward, unnormalized, as cuFFT's) goes to spectrum[p * N ..]; with
/// `condition`, max |S|^2 / min |S|^2 of the spectrum S to condition[p] (infinite where the
/// minimum is 0: the ZF condition number of a channel estimate's spectrum).
struct taps_spectrum_job {
    const cuFloatComplex* taps;
    int taps_per_packet;
    int first;
    cuFloatComplex* spectrum;
    double* condition;
};
struct taps_spectrum_jobs {
    static constexpr int max_jobs = 3;
    taps_spectrum_job job[max_jobs];
    int count;
};

/// The spectra of up to three tap sets of `packets` packets in one launch on stream `s`
/// (the channel estimates' H; the ZF, MMSE and CMA taps' spectra of the paths).
void taps_spectra_device(const taps_spectrum_jobs& jobs, int packets, cudaStream_t s);

/// A second receive channel (receiver_config::channels 2) for the paths: every path an
/// equalizer per channel whose outputs add (dsp/combining.hpp). With it, the one-channel
/// arguments are channel 1's (r, spec_mmse, spec_cma, hspec, tau), spec_zf is the combined
/// channel's ZF taps' spectrum (dsp::solve_combined_zf; channel c's ZF is w_c H_c* times it),
/// and sigma2 and gain are not read.
struct second_channel {
    const cuFloatComplex* r;          ///< its segments' spectra (N per packet)
    const cuFloatComplex* spec_mmse;  ///< its joint MMSE taps' spectra
    const cuFloatComplex* spec_cma;   ///< its CMA taps' spectra
    const cuFloatComplex* hspec;      ///< its channel estimates' spectra
    const double* weight;             ///< per packet, w_1 and w_2 (dsp::combining_weights)
    const double* noise;              ///< per packet, 2 sigma2 of the quieter channel (the FDE combiners')
    const double* tau;                ///< per packet, its single path's delay
    const cuDoubleComplex* mrc;       ///< per packet, each channel's maximal-ratio coefficient (dsp::mrc_single_path_response)
};

/// The paths of `packets` packets on stream `s`. r: the packets' spectra (N per packet);
/// hno: H_NO (N); spec_*: the taps' spectra (N per packet); hspec: the channel estimates'
/// spectra; psi: the FDE2 weights (N); sigma2, tau, gain: per packet (noise, and the single
/// path's delay and gain); bit k of a packet is decided at sample 2 (m0 + k) + parity of the
/// segment; v: the detector's input, packets x 6 x 6336 samples. With `derotation` (per
/// packet, gpu::stream_detector::device_derotation): only the streams
/// dsp::smoother::pre_derotated gives for each packet's source, none of the packets marked
/// dsp::smoother::no_derotation; the others' samples left as they are.
void paths_device(const cuFloatComplex* r, const float2* hno, const cuFloatComplex* spec_zf, const cuFloatComplex* spec_mmse,
                  const cuFloatComplex* spec_cma, const cuFloatComplex* hspec, const float* psi, const double* sigma2, const double* tau,
                  const cuDoubleComplex* gain, int parity, int m0, float2* v, int packets, cudaStream_t s,
                  const std::uint8_t* derotation = nullptr, const second_channel* second = nullptr);

/// The unequalized path alone (paths_device's path none, the same samples): packet p's
/// decision samples to stream p of v (packets x 6336), for the carrier estimate from the
/// decisions (gpu::stream_detector::carrier_offsets_device).
void unequalized_path_device(const cuFloatComplex* r, const float2* hno, const double* sigma2, const double* tau, const cuDoubleComplex* gain,
                             int parity, int m0, float2* v, int packets, cudaStream_t s, const second_channel* second = nullptr);

/// dsp::smoother::pre_derotation on the packets' time-domain segments (seg, segment_stride
/// apart, sample i in [0, seg_len)): each packet whose `derotation` (per packet,
/// gpu::stream_detector::device_derotation) names a source path turned by minus the
/// derotation of that stream's bit phases (theta_bit: stream i's bit k at [i * 6336 + k]),
/// bit k's decision sample being 2k + decision_delay after the packet start (segment sample
/// pre); those marked dsp::smoother::no_derotation left as they are.
void pre_derotate_device(cuFloatComplex* seg, const std::uint8_t* derotation, const float* theta_bit, int pre, int decision_delay,
                         int packets, cudaStream_t s);

/// The trellis detector's input for the same packets (receiver.detector trellis): R x C x LP
/// (lp: dsp::trellis::lowpass_gain on the FFT grid, N) at each bit's instant, sample k of a
/// stream being the segment's sample 2 (m0 + k) + parity, derotated by the symbol-by-symbol
/// detector's phase as dsp::trellis derotates its input (dsp::sxs_trace::theta): the PLL's
/// per bit pair, theta (stream i's pair j at [i * 3168 + j], stream_detector::device_theta;
/// bits 2j and 2j + 1 by pair j's), or where the smoother decided, each bit's own, theta_bit
/// (stream i's bit k at [i * 6336 + k], stream_detector::device_theta_bit; null without the
/// smoother); smoothed: per packet, 1 where the smoother decided (gated), null where it decided
/// every packet (or there is none). x: packets x 6 x 6336 samples (the trellis's input, stream
/// by stream).
void paths_trellis_device(const cuFloatComplex* r, const float2* lp, const cuFloatComplex* spec_zf, const cuFloatComplex* spec_mmse,
                          const cuFloatComplex* spec_cma, const cuFloatComplex* hspec, const float* psi, const double* sigma2,
                          const double* tau, const cuDoubleComplex* gain, int parity, int m0, const float* theta,
                          const float* theta_bit, const std::uint8_t* smoothed, float2* x, int packets, cudaStream_t s,
                          const second_channel* second = nullptr);

}  // namespace paq::gpu
