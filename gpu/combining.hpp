// The two-channel MMSE equalizer's joint normal equations (dsp/combining.hpp) solved for a
// batch of packets on the GPU, four ways on the same inputs:
//
//   block-levinson      the block-Toeplitz structure used whole: Whittle's multichannel
//                       Levinson recursion over 2 x 2 blocks (forward and backward matrix
//                       predictors, 185 steps of O(step) 2 x 2 products), all of a system
//                       in one block's shared memory, in double
//   band-cholesky       Cholesky of the band (75 sub-diagonals once the channels' taps are
//                       interleaved) held in shared memory: a window of 76 columns slides
//                       down the matrix, each new column made on chip from the channels'
//                       correlations (the matrix is never stored), the forward substitution
//                       done as the columns complete, the factor's columns written out for
//                       the backward one; double
//   conjugate-residual  the conjugate residual method, every step of it fused in one kernel
//                       (a block per system, a thread per unknown), the matrix-vector
//                       product made from the correlations (block-Toeplitz structure, no
//                       matrix stored); double, until the residual is 1e-9 of the right side
//                       or 2 x 372 steps
//   cusolver-dn-chol    the baseline: the dense 372 x 372 matrices built on the device and
//                       cusolverDnCpotrfBatched + potrsBatched, float
//
// The system of packet p (unknowns interleaved, x = 2 a + c for tap a of channel c):
//   A[2a+c][2b+d] = r_cd(a - b) + [a = b, c = d] load_c,  r_cd(k) = sum_n h_d(n) h_c*(n - k)
//   right side: conj(h_c(-l)) at 2 (l + L1) + c,  l = -L1 .. L2
// the same equations as dsp::solve_joint_equalizer, which is the reference (double, band
// Cholesky on the CPU). The two-channel ZF is a one-channel system of the combined channel
// (dsp::solve_combined_zf), not one of these.
//
// Plain C++ header.
#pragma once

#include "gpu/equalizers.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

namespace paq::gpu {

/// The two channels' estimates of one packet, [channel][tap] (38 taps each).
using channel_pair32 = std::array<channel32, 2>;
/// The two channels' equalizer taps of one packet, [channel][tap] (186 taps each).
using taps_pair32 = std::array<eq_taps32, 2>;
/// Each channel's diagonal load (2 sigma2_c for the MMSE equalizer).
using load_pair = std::array<double, 2>;

class joint_solver {
public:
    virtual ~joint_solver() = default;
    /// One system per packet. ok[p] = 1 when solved, 0 when the solver found the system not
    /// (numerically) positive definite, or (conjugate-residual) did not reach its tolerance:
    /// the taps are then zero, or the last iterate, and the caller falls back.
    virtual void solve(std::span<const channel_pair32> h, std::span<const load_pair> loads, std::span<taps_pair32> c,
                       std::span<std::uint8_t> ok) = 0;
    /// The same on device buffers (h: np x 2 x 38, loads: np x 2, c: np x 2 x 186, ok: np),
    /// queued on `stream` without a host synchronisation, np <= max_packets. Allocates nothing.
    virtual void solve_on_device(const cf32* h, const double* loads, cf32* c, std::uint8_t* ok, std::size_t np,
                                 cuda_stream_t stream) = 0;
    /// Device time of the last solve() in milliseconds, from h on the device to c on the
    /// device (the correlations included, transfers excluded), by CUDA events.
    [[nodiscard]] virtual float last_kernel_ms() const noexcept = 0;
    /// The steps each system of the last solve() took (iterative solvers); empty for the
    /// direct ones.
    [[nodiscard]] virtual std::vector<int> last_iterations() const { return {}; }
    [[nodiscard]] virtual const char* name() const noexcept = 0;
};

/// The names make_joint_solver takes, in the order of the table above.
inline constexpr std::array<std::string_view, 4> joint_solver_names{"block-levinson", "band-cholesky",
                                                                   "conjugate-residual", "cusolver-dn-chol"};

/// One of joint_solver_names for up to max_packets systems a call; throws
/// std::invalid_argument naming the allowed values.
[[nodiscard]] std::unique_ptr<joint_solver> make_joint_solver(std::string_view name, int device_id, std::size_t max_packets);

}  // namespace paq::gpu
