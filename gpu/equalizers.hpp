// The equalizers on the GPU, the CUDA side of dsp/equalizers.hpp (the FDE responses are
// computed where they are applied, in gpu/paths.cu).
//
// ZF and MMSE solves for a batch of packets, three ways on the same inputs:
//
//   levinson          the project's solver: a Levinson recursion that uses what R is
//                     (Hermitian Toeplitz, positive definite), one warp per system, all
//                     vectors on chip, in double, float taps out (equalizers.cu)
//   cusolver-dn-chol  dense cusolverDnCpotrfBatched + potrsBatched, float (equalizers_cusolver.cu)
//   cusolver-sp-qr    the thesis' method, cusolverSpCcsrqrsvBatched on the banded CSR matrix
//                     (12,544 non-zeros), float; deprecated in CUDA 13, kept as the baseline
//
//   (R_p + load_p I) c_p = h_n0,p,   R_p[i][j] = r_h,p(i - j), 186 x 186, r_h from h_p
//
// CMA (equalizers_cma.cu) with each packet's iterations on chip: dsp::cma_refine for a batch
// of packets, one thread block per packet. The four 16384-point transforms of a step run in
// shared memory (in-place radix-2 stages, four at a time in registers: natural order to
// bit-reversed and back, so no reordering pass), the products with R and the CMA error are
// applied as the transforms store, and the taps stay in shared memory between steps. Global
// memory is read twice per step (R) instead of about fourteen passes over packets x 16384.
//
// Plain C++ header.
#pragma once

#include "dsp/receiver_tables.hpp"
#include "dsp/types.hpp"
#include "gpu/stream_ref.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

namespace paq::gpu {

using eq_taps32 = std::array<cf32, dsp::chain::L_eq>;
using channel32 = std::array<cf32, dsp::chain::L_ch>;

class batched_solver {
public:
    virtual ~batched_solver() = default;
    /// Solves one system per packet: h (38 taps), the diagonal load (0 for ZF, 2 sigma2 for
    /// MMSE). ok[p] = 0 when the solver found R not (numerically) positive definite: the
    /// caller flags the packet and falls back.
    virtual void solve(std::span<const channel32> h, std::span<const double> diag_load, std::span<eq_taps32> c,
                       std::span<std::uint8_t> ok) = 0;
    /// The same solve on device buffers (h: np x 38, load: np, c: np x 186, ok: np), queued on
    /// `stream` without a host synchronisation, np <= max_packets. Allocates nothing. What
    /// the CUDA backend calls (its solver is chosen by name, see make_batched_solver).
    virtual void solve_on_device(const cf32* h, const double* load, cf32* c, std::uint8_t* ok, std::size_t np,
                                 cuda_stream_t stream) = 0;
    /// Device time of the last solve() in milliseconds, from h on the device to c on the
    /// device (building R included, transfers excluded), by CUDA events.
    [[nodiscard]] virtual float last_kernel_ms() const noexcept = 0;
    [[nodiscard]] virtual const char* name() const noexcept = 0;
};

/// "levinson", "cusolver-dn-chol" or "cusolver-sp-qr"; throws std::invalid_argument naming
/// the allowed values.
[[nodiscard]] std::unique_ptr<batched_solver> make_batched_solver(std::string_view name, int device_id,
                                                                  std::size_t max_packets);

class levinson_solver final : public batched_solver {
public:
    levinson_solver(int device_id, std::size_t max_packets);
    ~levinson_solver() override;
    levinson_solver(const levinson_solver&) = delete;
    levinson_solver& operator=(const levinson_solver&) = delete;

    void solve(std::span<const channel32> h, std::span<const double> diag_load, std::span<eq_taps32> c,
               std::span<std::uint8_t> ok) override;
    void solve_on_device(const cf32* h, const double* load, cf32* c, std::uint8_t* ok, std::size_t np,
                         cuda_stream_t stream) override
    {
        solve_device(h, load, c, ok, np, stream);
    }
    [[nodiscard]] float last_kernel_ms() const noexcept override;
    [[nodiscard]] const char* name() const noexcept override { return "levinson"; }

    /// Device-level: the same solve on device buffers (h: np x 38, load: np, c: np x 186,
    /// ok: np), asynchronous on `stream`. Allocates nothing.
    static void solve_device(const cf32* h, const double* load, cf32* c, std::uint8_t* ok, std::size_t np,
                             cuda_stream_t stream);
    /// Two batches on the same channels in one launch (ZF and MMSE: the loads differ), so
    /// that the second fills the multiprocessors the first leaves idle in its last wave.
    static void solve_device_pair(const cf32* h, const double* load_a, cf32* c_a, std::uint8_t* ok_a, const double* load_b,
                                  cf32* c_b, std::uint8_t* ok_b, std::size_t np, cuda_stream_t stream);

private:
    struct impl;
    std::unique_ptr<impl> impl_;
};

// CMA.
/// Points of the transforms: the filter stage's FFT size.
inline constexpr std::size_t cma_fft_size = 16384;

/// Once per device (the current one), before cma_refine_device: lets the kernel have the
/// shared memory it needs (more than the default 48 KB).
void cma_setup_device();

/// Asynchronous on `stream`: for each of `packets` packets, `iterations` CMA steps of size mu
/// over the segment's mean power (dsp::segment_mean_power, level invariant) on taps (packets x 186, c(l) for l = -60 .. 125, in/out) from the segment spectra r_spec
/// (packets x 16384; the packet at [pre, pre + L_pkt) of its segment), as dsp::cma_refine.
/// Allocates nothing and configures nothing (cma_setup_device first). Throws
/// std::invalid_argument for iterations < 0. With `start_spectrum` (packets x 16384) and
/// iterations > 0, the spectrum of the taps it starts from (forward, unnormalized, as
/// gpu::taps_spectra_device makes it) is left there: its first step makes it anyway (the
/// CUDA backend's MMSE spectrum, the CMA's start).
void cma_refine_device(const cf32* r_spec, cf32* taps, std::size_t packets, std::size_t pre, double mu, int iterations,
                       cuda_stream_t stream, cf32* start_spectrum = nullptr);

/// Two receive channels: dsp::cma_refine over both (y = sum over the channels of c_c * r_c;
/// each channel's taps stepped by its own gradient, the step over the channels' summed mean
/// power; a step stands only if the next finds the cost no higher). Channel c's spectra at
/// r_spec[c] (packets x 16384), its taps at taps[c] (packets x 186, in/out); scratch: device,
/// packets x 16384 (the first channel's product and the error's spectrum between the
/// transforms). With start_spectrum[c] (packets x 16384 each, or null) and iterations > 0,
/// the spectrum of channel c's start taps is left there, as the one-channel form does.
/// Allocates nothing (cma_setup_device first); std::invalid_argument for iterations < 0.
void cma_refine_device(std::array<const cf32*, 2> r_spec, std::array<cf32*, 2> taps, cf32* scratch, std::size_t packets,
                       std::size_t pre, double mu, int iterations, cuda_stream_t stream,
                       std::array<cf32*, 2> start_spectrum = {nullptr, nullptr});

/// Host convenience for tests, two channels: r_spec[c] packets x 16384, taps[c] packets x
/// 186; returns the refined taps, channel 1's then channel 2's (2 x packets x 186).
[[nodiscard]] std::vector<cf32> cma_refine(std::array<std::span<const cf32>, 2> r_spec, std::array<std::span<const cf32>, 2> taps,
                                           std::size_t packets, std::size_t pre, double mu, int iterations, int device);

// Two-channel ZF.
/// dsp::solve_combined_zf for np packets on the device, asynchronous on `stream`: each
/// packet's channels combined by their matched filters and noise weights (dsp::combining_weights
/// of sigma2_1[p], sigma2_2[p]) into g(k) = sum_c w_c r_cc(k), |k| <= 37, then the 186-tap ZF of
/// g by the one-channel Levinson recursion in double (Toeplitz r_g(k), k = 0 .. 74; right side
/// g*(-l)). h1, h2: np x 38 each; c: np x 186; ok: np (0 where the recursion broke down: zero
/// taps, as levinson_solver). Allocates nothing.
void combined_zf_device(const cf32* h1, const cf32* h2, const double* sigma2_1, const double* sigma2_2, cf32* c, std::uint8_t* ok,
                        std::size_t np, cuda_stream_t stream);

/// Host convenience for tests: combined_zf_device on `device` for h1.size() packets (h2 and
/// the variances as many); ok receives the flags.
[[nodiscard]] std::vector<eq_taps32> combined_zf(std::span<const channel32> h1, std::span<const channel32> h2,
                                                 std::span<const double> sigma2_1, std::span<const double> sigma2_2,
                                                 std::span<std::uint8_t> ok, int device);

/// Host convenience for tests: copies up, runs cma_refine_device on `device`, copies back.
[[nodiscard]] std::vector<cf32> cma_refine(std::span<const cf32> r_spec, std::span<const cf32> taps, std::size_t packets,
                                           std::size_t pre, double mu, int iterations, int device);

}  // namespace paq::gpu
