// Small dense linear algebra in double precision for the CPU reference. Deliberately plain:
// these routines are the yardstick the GPU solvers are measured against.
#pragma once

#include "dsp/types.hpp"

#include <span>
#include <vector>

namespace paq::dsp {

/// Result of a Cholesky factorization attempt.
struct cholesky_status {
    bool ok = false;            ///< false: not positive definite (a pivot <= 0 or not finite)
    double min_pivot = 0.0;     ///< smallest diagonal of L squared
    double max_pivot = 0.0;     ///< largest diagonal of L squared
};

/// In-place Cholesky A = L L^H of a Hermitian n x n row-major matrix (lower triangle used).
/// band = number of sub-diagonals that may be non-zero (n - 1 for a dense matrix); the work
/// is O(n band^2).
cholesky_status cholesky_banded(std::span<cf64> a, std::size_t n, std::size_t band);

/// Solves L L^H x = b in place (b has n entries), L from cholesky_banded with the same band.
void cholesky_solve_banded(std::span<const cf64> l, std::size_t n, std::size_t band, std::span<cf64> b);

}  // namespace paq::dsp

namespace paq::dsp {

/// Eigen-decomposition of a real symmetric n x n row-major matrix by cyclic Jacobi rotations
/// (small matrices only). Eigenvalues in w, eigenvectors in the columns of v.
void symmetric_eigen(std::vector<double> a, std::size_t n, std::vector<double>& w, std::vector<double>& v);

/// Pseudo-inverse of a Hermitian positive semi-definite n x n matrix, keeping the
/// eigen-directions whose eigenvalue is at least rel_threshold times the largest.
/// Returns the number of complex directions kept.
std::size_t hermitian_pinv(std::span<const cf64> a, std::size_t n, double rel_threshold, std::vector<cf64>& out);

}  // namespace paq::dsp
