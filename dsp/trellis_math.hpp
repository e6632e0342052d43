// The arithmetic the trellis detector's CPU reference (dsp/trellis.cpp) and its GPU stage
// (gpu/trellis.cu) share: the least-squares solve of the pulse fit. Host and device.
#pragma once

#include "dsp/iq_correction.hpp"  // PAQ_HOST_DEVICE

namespace paq::dsp::trellis_math {

/// Solves the symmetric positive definite system a x = b (n x n, row-major) in place by
/// Cholesky (a's lower triangle is overwritten, x replaces b); false when a is not positive
/// definite (too few distinct regressors).
PAQ_HOST_DEVICE inline bool solve_spd(double* a, double* b, int n) noexcept
{
    for (int j = 0; j < n; ++j) {
        double d = a[j * n + j];
        for (int k = 0; k < j; ++k) d -= a[j * n + k] * a[j * n + k];
        if (!(d > 0.0)) return false;
        d = sqrt(d);
        a[j * n + j] = d;
        for (int i = j + 1; i < n; ++i) {
            double s = a[i * n + j];
            for (int k = 0; k < j; ++k) s -= a[i * n + k] * a[j * n + k];
            a[i * n + j] = s / d;
        }
    }
    for (int i = 0; i < n; ++i) {
        double s = b[i];
        for (int k = 0; k < i; ++k) s -= a[i * n + k] * b[k];
        b[i] = s / a[i * n + i];
    }
    for (int i = n - 1; i >= 0; --i) {
        double s = b[i];
        for (int k = i + 1; k < n; ++k) s -= a[k * n + i] * b[k];
        b[i] = s / a[i * n + i];
    }
    return true;
}

}  // namespace paq::dsp::trellis_math
