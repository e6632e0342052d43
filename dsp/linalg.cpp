#include "dsp/linalg.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace paq::dsp {

cholesky_status cholesky_banded(std::span<cf64> a, std::size_t n, std::size_t band)
{
    cholesky_status st;
    st.min_pivot = std::numeric_limits<double>::infinity();
    st.max_pivot = 0.0;
    for (std::size_t j = 0; j < n; ++j) {
        const std::size_t k0 = j > band ? j - band : 0;
        double d = a[j * n + j].real();
        for (std::size_t k = k0; k < j; ++k) {
            d -= std::norm(a[j * n + k]);
        }
        if (!(d > 0.0) || !std::isfinite(d)) {
            st.ok = false;
            st.min_pivot = std::min(st.min_pivot, d);
            return st;
        }
        st.min_pivot = std::min(st.min_pivot, d);
        st.max_pivot = std::max(st.max_pivot, d);
        const double ljj = std::sqrt(d);
        a[j * n + j] = ljj;
        const std::size_t i_end = std::min(n, j + band + 1);
        for (std::size_t i = j + 1; i < i_end; ++i) {
            cf64 s = a[i * n + j];
            const std::size_t kk0 = i > band ? std::max(k0, i - band) : k0;
            for (std::size_t k = kk0; k < j; ++k) {
                s -= a[i * n + k] * std::conj(a[j * n + k]);
            }
            a[i * n + j] = s / ljj;
        }
    }
    st.ok = true;
    return st;
}

void cholesky_solve_banded(std::span<const cf64> l, std::size_t n, std::size_t band, std::span<cf64> b)
{
    // Forward: L y = b
    for (std::size_t i = 0; i < n; ++i) {
        cf64 s = b[i];
        const std::size_t k0 = i > band ? i - band : 0;
        for (std::size_t k = k0; k < i; ++k) {
            s -= l[i * n + k] * b[k];
        }
        b[i] = s / l[i * n + i].real();
    }
    // Backward: L^H x = y
    for (std::size_t ii = n; ii-- > 0;) {
        cf64 s = b[ii];
        const std::size_t k_end = std::min(n, ii + band + 1);
        for (std::size_t k = ii + 1; k < k_end; ++k) {
            s -= std::conj(l[k * n + ii]) * b[k];
        }
        b[ii] = s / l[ii * n + ii].real();
    }
}

}  // namespace paq::dsp

namespace paq::dsp {

void symmetric_eigen(std::vector<double> a, std::size_t n, std::vector<double>& w, std::vector<double>& v)
{
    v.assign(n * n, 0.0);
    for (std::size_t i = 0; i < n; ++i) v[i * n + i] = 1.0;
    for (int sweep = 0; sweep < 100; ++sweep) {
        double off = 0.0, diag = 0.0;
        for (std::size_t i = 0; i < n; ++i) {
            diag += a[i * n + i] * a[i * n + i];
            for (std::size_t j = i + 1; j < n; ++j) off += a[i * n + j] * a[i * n + j];
        }
        if (off <= 1e-30 * diag) break;
        for (std::size_t p = 0; p < n; ++p) {
            for (std::size_t q = p + 1; q < n; ++q) {
                const double apq = a[p * n + q];
                if (std::abs(apq) < 1e-300) continue;
                const double theta = (a[q * n + q] - a[p * n + p]) / (2.0 * apq);
                const double t = (theta >= 0 ? 1.0 : -1.0) / (std::abs(theta) + std::sqrt(theta * theta + 1.0));
                const double c = 1.0 / std::sqrt(t * t + 1.0), s = t * c;
                for (std::size_t k = 0; k < n; ++k) {  // columns p, q
                    const double akp = a[k * n + p], akq = a[k * n + q];
                    a[k * n + p] = c * akp - s * akq;
                    a[k * n + q] = s * akp + c * akq;
                }
                for (std::size_t k = 0; k < n; ++k) {  // rows p, q
                    const double apk = a[p * n + k], aqk = a[q * n + k];
                    a[p * n + k] = c * apk - s * aqk;
                    a[q * n + k] = s * apk + c * aqk;
                }
                for (std::size_t k = 0; k < n; ++k) {
                    const double vkp = v[k * n + p], vkq = v[k * n + q];
                    v[k * n + p] = c * vkp - s * vkq;
                    v[k * n + q] = s * vkp + c * vkq;
                }
            }
        }
    }
    w.resize(n);
    for (std::size_t i = 0; i < n; ++i) w[i] = a[i * n + i];
}

std::size_t hermitian_pinv(std::span<const cf64> a, std::size_t n, double rel_threshold, std::vector<cf64>& out)
{
    // Real embedding [[Re, -Im], [Im, Re]]: every eigenvalue of A appears twice.
    const std::size_t m = 2 * n;
    std::vector<double> e(m * m);
    for (std::size_t i = 0; i < n; ++i) {
        for (std::size_t j = 0; j < n; ++j) {
            const cf64 z = a[i * n + j];
            e[i * m + j] = z.real();
            e[i * m + n + j] = -z.imag();
            e[(n + i) * m + j] = z.imag();
            e[(n + i) * m + n + j] = z.real();
        }
    }
    std::vector<double> w, v;
    symmetric_eigen(std::move(e), m, w, v);
    const double wmax = *std::max_element(w.begin(), w.end());
    std::vector<double> pinv(m * m, 0.0);
    std::size_t kept = 0;
    for (std::size_t k = 0; k < m; ++k) {
        if (!(w[k] >= rel_threshold * wmax) || w[k] <= 0.0) continue;
        ++kept;
        const double inv = 1.0 / w[k];
        for (std::size_t i = 0; i < m; ++i) {
            const double vi = v[i * m + k] * inv;
            for (std::size_t j = 0; j < m; ++j) pinv[i * m + j] += vi * v[j * m + k];
        }
    }
    out.assign(n * n, 0.0);
    for (std::size_t i = 0; i < n; ++i) {
        for (std::size_t j = 0; j < n; ++j) out[i * n + j] = cf64(pinv[i * m + j], pinv[(n + i) * m + j]);
    }
    return kept / 2;
}

}  // namespace paq::dsp
