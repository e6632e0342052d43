// ZF and MMSE equalizer solves for a batch of packets on the GPU (issue 3): the project's
// solver, a Levinson recursion that uses what R is (Hermitian Toeplitz, positive definite),
// one warp per system, all vectors on chip, computed in double and returned as float taps.
//
//   (R_p + load_p I) c_p = h_n0,p,   R_p[i][j] = r_h,p(i - j), 186 x 186, r_h from h_p
//
// Plain C++ header; the kernels are in solver.cu.
#pragma once

#include "dsp/receiver_tables.hpp"
#include "dsp/types.hpp"

#include <array>
#include <cstdint>
#include <memory>
#include <span>

namespace paq::gpu {

using eq_taps32 = std::array<cf32, dsp::chain::L_eq>;
using channel32 = std::array<cf32, dsp::chain::L_ch>;

class levinson_solver {
public:
    levinson_solver(int device_id, std::size_t max_packets);
    ~levinson_solver();
    levinson_solver(const levinson_solver&) = delete;
    levinson_solver& operator=(const levinson_solver&) = delete;

    /// Solves one system per packet: h (38 taps), the diagonal load (0 for ZF, 2 sigma2 for
    /// MMSE). ok[p] = 0 when the recursion met a non-positive prediction error (R not
    /// numerically positive definite): the caller flags the packet and falls back.
    void solve(std::span<const channel32> h, std::span<const double> diag_load, std::span<eq_taps32> c,
               std::span<std::uint8_t> ok);

    /// Device time of the last solve() in milliseconds (CUDA events around the kernel).
    [[nodiscard]] float last_kernel_ms() const noexcept;

private:
    struct impl;
    std::unique_ptr<impl> impl_;
};

}  // namespace paq::gpu
