// ZF and MMSE equalizer solves for a batch of packets on the GPU (issue 3), three ways on the
// same inputs:
//
//   levinson          the project's solver: a Levinson recursion that uses what R is
//                     (Hermitian Toeplitz, positive definite), one warp per system, all
//                     vectors on chip, in double, float taps out (solver.cu)
//   cusolver-dn-chol  dense cusolverDnCpotrfBatched + potrsBatched, float (solver_cusolver.cu)
//   cusolver-sp-qr    the thesis' method, cusolverSpCcsrqrsvBatched on the banded CSR matrix
//                     (12,544 non-zeros), float; deprecated in CUDA 13, kept as the baseline
//
//   (R_p + load_p I) c_p = h_n0,p,   R_p[i][j] = r_h,p(i - j), 186 x 186, r_h from h_p
//
// Plain C++ header.
#pragma once

#include "dsp/receiver_tables.hpp"
#include "dsp/types.hpp"
#include "gpu/stream_ref.hpp"

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

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

}  // namespace paq::gpu
