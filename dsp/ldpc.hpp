// The LDPC codes of IRIG 106 chapter 2 (Appendix 2-D), which are the CCSDS AR4JA codes of
// CCSDS 131.0-B ("TM Synchronization and Channel Coding", section 7.4): k = 1024 and 4096
// information bits at rates 1/2, 2/3 and 4/5. Each parity-check matrix is built from the
// standard's protograph: M x M blocks that are zero, the identity, or sums of the permutation
// matrices Pi_1 .. Pi_26 given by the standard's tables theta_k and phi_k(j, M):
//
//   pi_k(i) = (M/4) ((theta_k + floor(4i/M)) mod 4) + (phi_k(floor(4i/M), M) + i) mod (M/4)
//
// (Pi_k has its 1 of row i in column pi_k(i).) The rate-1/2 matrix is 3M x 5M; rate 2/3 adds
// two column blocks in front of it and rate 4/5 four more. A codeword is systematic: the k
// information bits first, then the 3M parity bits, of which the last M are not transmitted
// (punctured): n = k + 2M bits go on the link.
//
// The encoder solves H c = 0 for the parity given the information: H = [H_u | H_p] with H_p
// (the last 3M columns) invertible, so p = (H_p^-1 H_u) u, that matrix made once per code by
// Gauss-Jordan elimination over GF(2) (a second for k = 4096, rate 1/2) and kept.
#pragma once

#include "dsp/names.hpp"

#include <array>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace paq::dsp::ldpc {

enum class code : std::uint8_t { k1024_r1_2, k1024_r2_3, k1024_r4_5, k4096_r1_2, k4096_r2_3, k4096_r4_5 };
inline constexpr name_table<code, 6> code_names{{{"ar4ja-1024-1/2", code::k1024_r1_2},
                                                 {"ar4ja-1024-2/3", code::k1024_r2_3},
                                                 {"ar4ja-1024-4/5", code::k1024_r4_5},
                                                 {"ar4ja-4096-1/2", code::k4096_r1_2},
                                                 {"ar4ja-4096-2/3", code::k4096_r2_3},
                                                 {"ar4ja-4096-4/5", code::k4096_r4_5}}};
inline constexpr std::array<code, 6> all_codes{code::k1024_r1_2, code::k1024_r2_3, code::k1024_r4_5,
                                               code::k4096_r1_2, code::k4096_r2_3, code::k4096_r4_5};
[[nodiscard]] constexpr std::string_view to_string(code c) noexcept { return name_of(code_names, c); }

struct code_params {
    int k = 0;           ///< information bits
    int rate_num = 0;    ///< rate k / n = rate_num / rate_den
    int rate_den = 0;
    int m = 0;           ///< the protograph's block size M
    int n = 0;           ///< transmitted bits: k + 2M
    int n_full = 0;      ///< columns of H: k + 3M (the last M punctured)
    int checks = 0;      ///< rows of H: 3M
};

[[nodiscard]] code_params params(code c) noexcept;

/// Pi_k (k = 1 .. 26) for block size m: the column of row i's 1. std::invalid_argument for a k
/// or an m the standard's tables do not have.
[[nodiscard]] std::uint32_t permutation(int k, int m, std::uint32_t i);

/// A parity-check matrix as each row's columns (ascending; duplicates of a sum of permutations
/// cancel over GF(2) and are not kept).
struct parity_check {
    code_params p;
    std::vector<std::vector<std::uint32_t>> rows;
    /// Every check holds for `word` (n_full bits, one per byte, 0 or 1).
    [[nodiscard]] bool holds(std::span<const std::uint8_t> word) const;
    /// The checks that fail for `word`.
    [[nodiscard]] std::size_t failed_checks(std::span<const std::uint8_t> word) const;
    /// Split into groups of `group` consecutive checks (the last may be shorter): how many times
    /// a bit is in a check of its group after the first (0: no two checks of a group share a
    /// bit). std::invalid_argument for a group below 1.
    [[nodiscard]] std::size_t bits_shared_within(int group) const;
};

/// Built once per code (thread-safe), kept for the process's life.
[[nodiscard]] const parity_check& parity_check_matrix(code c);

/// The checks of a layer: a quarter of a block row, M / 4 consecutive rows of H, 12 layers in
/// all. No two checks of a layer share a bit (each block maps a quarter of its rows into one
/// quarter of its columns, and the two permutations of a summed block into different quarters;
/// the tests check every code with parity_check::bits_shared_within), so a layer's checks may update their bits' beliefs at once and
/// give exactly what updating them one after another gives: the GPU's decoder runs the CPU's
/// layered schedule a layer at a time. Half a block row or more shares bits on every code.
[[nodiscard]] constexpr int layer_checks(const code_params& p) noexcept { return p.m / 4; }

class encoder {
public:
    /// Made once per code (thread-safe): the elimination takes up to a second.
    [[nodiscard]] static const encoder& get(code c);

    [[nodiscard]] const code_params& params() const noexcept { return p_; }
    /// The whole codeword (n_full bits: the information, then every parity bit, punctured ones
    /// included) of `info` (k bits); one bit per byte, 0 or 1. std::invalid_argument for a size
    /// that is not k and n_full.
    void encode_full(std::span<const std::uint8_t> info, std::span<std::uint8_t> word) const;
    /// The transmitted codeword (n bits: the full one without its last M).
    void encode(std::span<const std::uint8_t> info, std::span<std::uint8_t> codeword) const;

private:
    explicit encoder(code c);
    code c_;
    code_params p_;
    std::size_t words_ = 0;                 ///< 64-bit words per row of gen_
    std::vector<std::uint64_t> gen_;        ///< checks x k bits: parity bit r = <row r, info>
};

}  // namespace paq::dsp::ldpc
