// The batched solvers of the two-channel joint MMSE equations (gpu/combining.hpp).
#include "gpu/combining.hpp"

#include "gpu/complex64.cuh"
#include "gpu/cusolver_library.hpp"
#include "gpu/resources.cuh"

#include <cuComplex.h>

#include <algorithm>
#include <stdexcept>
#include <string>

namespace paq::gpu {

namespace {

constexpr int n_taps = dsp::chain::L_eq;  // 186 taps a channel
constexpr int n_ch = dsp::chain::L_ch;    // 38
constexpr int n1 = dsp::chain::N1;
constexpr int l1 = dsp::chain::L1;
constexpr int n_sys = 2 * n_taps;         // 372 unknowns
constexpr int lags = 2 * n_ch - 1;        // r_cd(k), k = -37 .. 37
constexpr int bw = 2 * (n_ch - 1) + 1;    // 75 sub-diagonals of the interleaved system
constexpr int win = bw + 1;               // a column's entries on and below the diagonal

/// A system's inputs in shared memory: both channels' taps, r_cd(k) at r[(2 c + d) * lags +
/// k + 37], the loads.
struct system_inputs {
    z64 h[2][n_ch];
    z64 r[4 * lags];
    double load[2];
};

/// Loads packet p's channels and loads and makes the correlations; every thread of the block
/// takes part, and all see the result (a barrier at the end).
__device__ void load_system(const cuFloatComplex* __restrict__ h_all, const double* __restrict__ loads, int p,
                            system_inputs& in)
{
    for (int i = static_cast<int>(threadIdx.x); i < 2 * n_ch; i += static_cast<int>(blockDim.x)) {
        const cuFloatComplex v = h_all[static_cast<std::size_t>(p) * 2 * n_ch + static_cast<std::size_t>(i)];
        in.h[i / n_ch][i % n_ch] = {v.x, v.y};
    }
    if (threadIdx.x < 2) in.load[threadIdx.x] = loads[2 * static_cast<std::size_t>(p) + threadIdx.x];
    __syncthreads();
    for (int e = static_cast<int>(threadIdx.x); e < 4 * lags; e += static_cast<int>(blockDim.x)) {
        const int cd = e / lags, k = e % lags - (n_ch - 1);
        const int c = cd / 2, d = cd % 2;
        z64 s{0.0, 0.0};
        const int m0 = k > 0 ? k : 0, m1 = k < 0 ? n_ch + k : n_ch;
        for (int m = m0; m < m1; ++m) s = s + in.h[d][m] * conj(in.h[c][m - k]);
        if (c == d && k == 0) s.im = 0.0;  // sum |h_c|^2, real
        in.r[e] = s;
    }
    __syncthreads();
}

/// r_cd(k) for |k| <= 37, zero beyond.
__device__ inline z64 corr(const system_inputs& in, int c, int d, int k)
{
    if (k < -(n_ch - 1) || k > n_ch - 1) return {0.0, 0.0};
    return in.r[(2 * c + d) * lags + k + (n_ch - 1)];
}

/// A[x][y] of the interleaved system, the load on the diagonal.
__device__ inline z64 entry(const system_inputs& in, int x, int y)
{
    z64 v = corr(in, x % 2, y % 2, x / 2 - y / 2);
    if (x == y) v.re += in.load[x % 2];
    return v;
}

/// Right side entry x: conj(h_c(-l)), tap a = x / 2 (l = a - L1), channel c = x % 2.
__device__ inline z64 rhs(const system_inputs& in, int x)
{
    const int m = -(x / 2 - l1);
    return (m >= -n1 && m < n_ch - n1) ? conj(in.h[x % 2][m + n1]) : z64{0.0, 0.0};
}

/// Unknown x of the solution into packet p's taps ([channel][tap], float).
__device__ inline void store_tap(cuFloatComplex* __restrict__ c_all, int p, int x, z64 v)
{
    c_all[static_cast<std::size_t>(p) * n_sys + static_cast<std::size_t>(x % 2) * n_taps + static_cast<std::size_t>(x / 2)] =
        make_cuFloatComplex(static_cast<float>(v.re), static_cast<float>(v.im));
}

// --- block Levinson ---------------------------------------------------------------------

/// A 2 x 2 complex matrix, m[row][col].
struct m22 {
    z64 m[2][2];
};
__device__ inline m22 operator*(const m22& a, const m22& b)
{
    m22 r;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
#pragma unroll
        for (int j = 0; j < 2; ++j) r.m[i][j] = a.m[i][0] * b.m[0][j] + a.m[i][1] * b.m[1][j];
    }
    return r;
}
__device__ inline m22 operator+(const m22& a, const m22& b)
{
    m22 r;
#pragma unroll
    for (int i = 0; i < 4; ++i) r.m[i / 2][i % 2] = a.m[i / 2][i % 2] + b.m[i / 2][i % 2];
    return r;
}
/// The block R(k) of the block-Toeplitz matrix: R(k)[c][d] = A[2a+c][2b+d], k = a - b.
__device__ inline m22 block(const system_inputs& in, int k)
{
    m22 r;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        r.m[i / 2][i % 2] = corr(in, i / 2, i % 2, k);
        if (k == 0 && i / 2 == i % 2) r.m[i / 2][i % 2].re += in.load[i / 2];
    }
    return r;
}
/// -E^{-1} for a Hermitian E (its Hermitian part used), false where E is not positive definite.
__device__ inline bool neg_inverse(const m22& e, m22& out)
{
    const double a = e.m[0][0].re, d = e.m[1][1].re;
    const z64 b{0.5 * (e.m[0][1].re + e.m[1][0].re), 0.5 * (e.m[0][1].im - e.m[1][0].im)};
    const double det = a * d - norm(b);
    if (!(a > 0.0) || !(det > 1e-300 * a * d) || !isfinite(det)) return false;
    const double s = -1.0 / det;
    out.m[0][0] = {s * d, 0.0};
    out.m[1][1] = {s * a, 0.0};
    out.m[0][1] = -1.0 * (s * b);
    out.m[1][0] = -1.0 * (s * conj(b));
    return true;
}

constexpr int levinson_threads = 64;

/// One block per system. The system is block-Toeplitz, T[a][b] = R(a - b), R(-k) = R(k)^H,
/// zero for |a - b| > 37. Whittle's recursion over m = 0 .. 184: the forward predictor F_m
/// (T_m F_m = [E_f; 0 ..], F_m[0] = I), the backward G_m (T_m G_m = [.. 0; E_b], G_m[m] = I),
/// the solution x_m of the leading m + 1 blocks:
///   D_f = sum_i R(m + 1 - i) F_m[i],  D_b = sum_j R(-(j + 1)) G_m[j],  e = sum_i R(m + 1 - i) x_m[i]
///   K_f = -E_b^-1 D_f,  K_b = -E_f^-1 D_b
///   F_m+1 = [F_m; 0] + [0; G_m] K_f,  G_m+1 = [0; G_m] + [F_m; 0] K_b
///   E_f += D_b K_f,  E_b += D_f K_b
///   x_m+1 = [x_m; 0] + G_m+1 E_b^-1 (y_m+1 - e)
/// Each sum has at most 37 terms (the band). G_m is kept at g[185 - m + j], so that the
/// shifted [0; G_m] is where G_m+1 goes: each thread updates its own indices in place.
__global__ void __launch_bounds__(levinson_threads) block_levinson_kernel(const cuFloatComplex* __restrict__ h_all,
                                                                          const double* __restrict__ loads,
                                                                          cuFloatComplex* __restrict__ c_all,
                                                                          std::uint8_t* __restrict__ ok)
{
    constexpr int nb = n_taps;
    __shared__ system_inputs in;
    __shared__ m22 f[nb], g[nb];
    __shared__ z64 x[nb][2];
    __shared__ m22 ef, eb, kf, kb, df, db;
    __shared__ z64 err[2], v[2];
    __shared__ int good;
    const int p = static_cast<int>(blockIdx.x), t = static_cast<int>(threadIdx.x);
    load_system(h_all, loads, p, in);
    const m22 zero22{};
    for (int i = t; i < nb; i += levinson_threads) {
        f[i] = zero22;
        g[i] = zero22;
        x[i][0] = x[i][1] = {0.0, 0.0};
    }
    __syncthreads();  // g[185] is another thread's to clear
    if (t == 0) {
        const m22 r0 = block(in, 0);
        ef = eb = r0;
        m22 inv;
        good = neg_inverse(r0, inv) ? 1 : 0;
        f[0].m[0][0] = f[0].m[1][1] = {1.0, 0.0};
        g[nb - 1] = f[0];
        // x_0 = R(0)^-1 y_0 = -(-R(0)^-1) y_0.
        const z64 y0 = rhs(in, 0), y1 = rhs(in, 1);
        x[0][0] = -1.0 * (inv.m[0][0] * y0 + inv.m[0][1] * y1);
        x[0][1] = -1.0 * (inv.m[1][0] * y0 + inv.m[1][1] * y1);
    }
    __syncthreads();
    const int warp = t / 32, lane = t % 32;
    for (int m = 0; m + 1 < nb && good; ++m) {
        const int off = nb - 1 - m;  // G_m[j] at g[off + j]
        // The sums: warp 0 D_f and e (the last 37 blocks of F_m and x_m), warp 1 D_b (the
        // first 37 of G_m).
        if (warp == 0) {
            m22 s{};
            z64 e0{0.0, 0.0}, e1{0.0, 0.0};
            const int i0 = m + 1 - (n_ch - 1) > 0 ? m + 1 - (n_ch - 1) : 0;
            for (int i = i0 + lane; i <= m; i += 32) {
                const m22 r = block(in, m + 1 - i);
                s = s + r * f[i];
                e0 = e0 + r.m[0][0] * x[i][0] + r.m[0][1] * x[i][1];
                e1 = e1 + r.m[1][0] * x[i][0] + r.m[1][1] * x[i][1];
            }
#pragma unroll
            for (int k = 0; k < 4; ++k) s.m[k / 2][k % 2] = warp_sum(s.m[k / 2][k % 2]);
            e0 = warp_sum(e0);
            e1 = warp_sum(e1);
            if (lane == 0) {
                df = s;
                err[0] = e0;
                err[1] = e1;
            }
        } else if (warp == 1) {
            m22 s{};
            const int j1 = m < n_ch - 2 ? m : n_ch - 2;
            for (int j = lane; j <= j1; j += 32) s = s + block(in, -(j + 1)) * g[off + j];
#pragma unroll
            for (int k = 0; k < 4; ++k) s.m[k / 2][k % 2] = warp_sum(s.m[k / 2][k % 2]);
            if (lane == 0) db = s;
        }
        __syncthreads();
        if (t == 0) {
            m22 nib, nif;
            bool fine = neg_inverse(eb, nib) && neg_inverse(ef, nif);
            if (fine) {
                kf = nib * df;
                kb = nif * db;
                ef = ef + db * kf;
                eb = eb + df * kb;
                m22 nib2;
                fine = neg_inverse(eb, nib2);
                if (fine) {
                    // v = E_b^-1 (y_m+1 - e) = -(-E_b^-1) (y - e)
                    const z64 r0 = rhs(in, 2 * (m + 1)) - err[0], r1 = rhs(in, 2 * (m + 1) + 1) - err[1];
                    v[0] = -1.0 * (nib2.m[0][0] * r0 + nib2.m[0][1] * r1);
                    v[1] = -1.0 * (nib2.m[1][0] * r0 + nib2.m[1][1] * r1);
                }
            }
            good = fine ? 1 : 0;
        }
        __syncthreads();
        if (!good) break;
        // j = 0 .. m + 1: the old F_m[j] (zero at m + 1) and G_m[j - 1] (zero at j = 0, where
        // g was never written) give the new ones in place.
        for (int j = t; j <= m + 1; j += levinson_threads) {
            const m22 fo = f[j], go = g[off - 1 + j];
            const m22 gn = go + fo * kb;
            f[j] = fo + go * kf;
            g[off - 1 + j] = gn;
            x[j][0] = x[j][0] + gn.m[0][0] * v[0] + gn.m[0][1] * v[1];
            x[j][1] = x[j][1] + gn.m[1][0] * v[0] + gn.m[1][1] * v[1];
        }
        __syncthreads();
    }
    for (int i = t; i < n_sys; i += levinson_threads) store_tap(c_all, p, i, good ? x[i / 2][i % 2] : z64{0.0, 0.0});
    if (t == 0) ok[p] = good ? 1 : 0;
}

// --- band Cholesky ----------------------------------------------------------------------

constexpr int cholesky_threads = 256;
constexpr int update_pairs = bw * (bw + 1) / 2;  // (i, k), 1 <= k <= i <= 75

/// Dynamic shared memory of band_cholesky_kernel: the window, the right side, the pair table.
constexpr std::size_t cholesky_smem = sizeof(z64) * (win * win + n_sys) + sizeof(unsigned short) * update_pairs;

/// One block per system. Right-looking band Cholesky, A = L L^H, in a window of win columns
/// in shared memory: column j in slot j % win, its entries L[j + i][j] at i = 0 .. 75. Step j
/// finishes column j (L_jj = sqrt of what is left of A_jj, the column divided by it), takes
/// y_j of the forward substitution L y = b, updates the columns j + 1 .. j + 75 below their
/// diagonals, writes column j out (l_out: n_sys x win per system) and makes column j + 76 in
/// the slot it leaves (the columns after j + 75 have no entry in column j's rows). Then the
/// backward substitution L^H x = y by one warp, the next column read while the current one
/// is summed.
__global__ void __launch_bounds__(cholesky_threads) band_cholesky_kernel(const cuFloatComplex* __restrict__ h_all,
                                                                         const double* __restrict__ loads,
                                                                         z64* __restrict__ l_out,
                                                                         cuFloatComplex* __restrict__ c_all,
                                                                         std::uint8_t* __restrict__ ok)
{
    extern __shared__ unsigned char smem[];
    z64* w = reinterpret_cast<z64*>(smem);  // w[slot * win + i]
    z64* y = w + win * win;
    auto* pairs = reinterpret_cast<unsigned short*>(y + n_sys);
    __shared__ system_inputs in;
    __shared__ double inv_diag;
    __shared__ int good;
    const int p = static_cast<int>(blockIdx.x), t = static_cast<int>(threadIdx.x);
    z64* lp = l_out + static_cast<std::size_t>(p) * n_sys * win;
    load_system(h_all, loads, p, in);
    for (int e = t; e < update_pairs; e += cholesky_threads) {
        // e = i (i - 1) / 2 + (k - 1): row i's pairs one after another.
        int i = static_cast<int>((1.0 + sqrt(1.0 + 8.0 * e)) / 2.0);
        while (i * (i - 1) / 2 > e) --i;
        while ((i + 1) * i / 2 <= e) ++i;
        pairs[e] = static_cast<unsigned short>((i << 8) | (e - i * (i - 1) / 2 + 1));
    }
    auto make_column = [&](int q, int slot) {
        for (int i = t; i < win; i += cholesky_threads) w[slot * win + i] = q + i < n_sys ? entry(in, q + i, q) : z64{0.0, 0.0};
    };
    for (int q = 0; q < win; ++q) make_column(q, q);
    for (int x = t; x < n_sys; x += cholesky_threads) y[x] = rhs(in, x);
    if (t == 0) good = 1;
    __syncthreads();
    for (int j = 0; j < n_sys; ++j) {
        z64* col = w + (j % win) * win;
        if (t == 0) {
            const double d = col[0].re;
            if (d > 0.0 && isfinite(d)) {
                const double l = sqrt(d);
                col[0] = {l, 0.0};
                inv_diag = 1.0 / l;
                y[j] = inv_diag * y[j];
            } else {
                good = 0;
            }
        }
        __syncthreads();
        if (!good) break;
        for (int i = 1 + t; i < win; i += cholesky_threads) {
            if (j + i < n_sys) {
                col[i] = inv_diag * col[i];
                y[j + i] = y[j + i] - col[i] * y[j];
            }
        }
        __syncthreads();
        for (int e = t; e < update_pairs; e += cholesky_threads) {
            const int i = pairs[e] >> 8, k = pairs[e] & 0xff;
            if (j + i < n_sys) {
                z64& a = w[((j + k) % win) * win + (i - k)];
                a = a - col[i] * conj(col[k]);
            }
        }
        for (int i = t; i < win; i += cholesky_threads) lp[static_cast<std::size_t>(j) * win + i] = col[i];
        __syncthreads();
        if (j + win < n_sys) make_column(j + win, j % win);
        // The next step reads the new column only in its update, after two barriers.
    }
    __syncthreads();
    if (t < 32) {
        // x_j = (y_j - sum_i conj(L[j + i][j]) x_j+i) / L_jj, j = 371 .. 0, x over y. Lane l
        // holds entries i = l, l + 32, l + 64 of the column (i <= 75).
        constexpr int per_lane = (win + 31) / 32;
        const int lane = t;
        z64 cur[per_lane] = {}, nxt[per_lane] = {};
        auto read = [&](int j, z64* dst) {
#pragma unroll
            for (int c = 0; c < per_lane; ++c) {
                const int i = lane + 32 * c;
                dst[c] = i < win ? lp[static_cast<std::size_t>(j) * win + i] : z64{0.0, 0.0};
            }
        };
        if (good) read(n_sys - 1, cur);
        for (int j = n_sys - 1; j >= 0 && good; --j) {
            if (j > 0) read(j - 1, nxt);
            z64 s{0.0, 0.0};
#pragma unroll
            for (int c = 0; c < per_lane; ++c) {
                const int i = lane + 32 * c;
                if (i >= 1 && i < win && j + i < n_sys) s = s + conj(cur[c]) * y[j + i];
            }
            s = warp_sum(s);
            const double ljj = __shfl_sync(0xffffffffu, cur[0].re, 0);
            if (lane == 0) y[j] = (1.0 / ljj) * (y[j] - s);
            __syncwarp();
#pragma unroll
            for (int c = 0; c < per_lane; ++c) cur[c] = nxt[c];
        }
    }
    __syncthreads();
    for (int x = t; x < n_sys; x += cholesky_threads) store_tap(c_all, p, x, good ? y[x] : z64{0.0, 0.0});
    if (t == 0) ok[p] = good ? 1 : 0;
}

// --- conjugate residual -----------------------------------------------------------------

constexpr int cr_threads = 384;  // a thread per unknown (372), whole warps
constexpr int cr_warps = cr_threads / 32;
constexpr int cr_max_steps = 2 * n_sys;
constexpr double cr_tolerance = 1e-9;  // ||r|| / ||b||

/// The sums of a block: every thread's (a, b) added over the block, every thread gets them.
/// `scratch` holds 2 x cr_warps values; the two calls of a step use alternate halves, so one
/// barrier a call suffices.
__device__ inline double2 block_sum2(double a, double b, double* scratch)
{
    for (int o = 16; o > 0; o >>= 1) {
        a += __shfl_xor_sync(0xffffffffu, a, o);
        b += __shfl_xor_sync(0xffffffffu, b, o);
    }
    const int warp = static_cast<int>(threadIdx.x) / 32;
    if (threadIdx.x % 32 == 0) {
        scratch[warp] = a;
        scratch[cr_warps + warp] = b;
    }
    __syncthreads();
    double2 s{0.0, 0.0};
#pragma unroll
    for (int k = 0; k < cr_warps; ++k) {
        s.x += scratch[k];
        s.y += scratch[cr_warps + k];
    }
    return s;
}

/// One block per system, thread x owns unknown x (x < 372). The conjugate residual method
/// (A Hermitian): x = 0, r = p = b, Ap = Ar; each step alpha = <r, Ar> / <Ap, Ap>, x +=
/// alpha p, r -= alpha Ap, then Ar anew (from r in shared memory: row x's 150 entries made
/// from the correlations), beta = <r, Ar>_new / <r, Ar>_old, p = r + beta p, Ap = Ar + beta Ap.
/// Stops when ||r|| <= 1e-9 ||b|| (ok 1) or after 744 steps (ok 0, the last iterate kept).
__global__ void __launch_bounds__(cr_threads) conjugate_residual_kernel(const cuFloatComplex* __restrict__ h_all,
                                                                        const double* __restrict__ loads,
                                                                        cuFloatComplex* __restrict__ c_all,
                                                                        std::uint8_t* __restrict__ ok,
                                                                        int* __restrict__ steps_out)
{
    __shared__ system_inputs in;
    __shared__ z64 rv[n_sys];
    __shared__ double scratch[2][2 * cr_warps];
    const int p = static_cast<int>(blockIdx.x), t = static_cast<int>(threadIdx.x);
    load_system(h_all, loads, p, in);
    const bool mine = t < n_sys;
    auto a_times_r = [&]() {
        z64 s{0.0, 0.0};
        if (!mine) return s;
        const int a = t / 2;
        const int b0 = a - (n_ch - 1) > 0 ? a - (n_ch - 1) : 0, b1 = a + (n_ch - 1) < n_taps - 1 ? a + (n_ch - 1) : n_taps - 1;
        for (int yy = 2 * b0; yy <= 2 * b1 + 1; ++yy) s = s + entry(in, t, yy) * rv[yy];
        return s;
    };
    z64 r = mine ? rhs(in, t) : z64{0.0, 0.0};
    z64 xx{0.0, 0.0};
    if (mine) rv[t] = r;
    __syncthreads();
    z64 ar = a_times_r();
    double2 s = block_sum2(norm(r), r.re * ar.re + r.im * ar.im, scratch[0]);
    const double bb = s.x;
    double rho = s.y;
    z64 pp = r, ap = ar;
    double apap = block_sum2(norm(ap), 0.0, scratch[1]).x;
    int step = 0;
    bool done = bb == 0.0;
    while (!done && step < cr_max_steps) {
        const double alpha = rho / apap;
        if (!isfinite(alpha)) break;
        xx = xx + alpha * pp;
        r = r - alpha * ap;
        ++step;
        __syncthreads();  // every thread has read rv in the last product
        if (mine) rv[t] = r;
        __syncthreads();
        ar = a_times_r();
        s = block_sum2(norm(r), r.re * ar.re + r.im * ar.im, scratch[step % 2]);
        if (s.x <= cr_tolerance * cr_tolerance * bb) {
            done = true;
            break;
        }
        const double beta = s.y / rho;
        rho = s.y;
        pp = r + beta * pp;
        ap = ar + beta * ap;
        apap = block_sum2(norm(ap), 0.0, scratch[(step + 1) % 2]).x;
    }
    if (mine) store_tap(c_all, p, t, xx);
    if (t == 0) {
        ok[p] = done ? 1 : 0;
        steps_out[p] = step;
    }
}

// --- cuSOLVER baseline ------------------------------------------------------------------

/// Packet p's dense column-major 372 x 372 matrix (float) and right side, a block per packet.
__global__ void dense_system_kernel(const cuFloatComplex* __restrict__ h_all, const double* __restrict__ loads,
                                    cuFloatComplex* __restrict__ a_all, cuFloatComplex* __restrict__ b_all)
{
    __shared__ system_inputs in;
    const int p = static_cast<int>(blockIdx.x);
    load_system(h_all, loads, p, in);
    cuFloatComplex* a = a_all + static_cast<std::size_t>(p) * n_sys * n_sys;
    for (int e = static_cast<int>(threadIdx.x); e < n_sys * n_sys; e += static_cast<int>(blockDim.x)) {
        const int row = e % n_sys, col = e / n_sys;
        const z64 v = entry(in, row, col);
        a[e] = make_cuFloatComplex(static_cast<float>(v.re), static_cast<float>(v.im));
    }
    for (int x = static_cast<int>(threadIdx.x); x < n_sys; x += static_cast<int>(blockDim.x)) {
        const z64 v = rhs(in, x);
        b_all[static_cast<std::size_t>(p) * n_sys + x] = make_cuFloatComplex(static_cast<float>(v.re), static_cast<float>(v.im));
    }
}

/// The interleaved solutions into [channel][tap] taps, and ok from potrf's info.
__global__ void dense_solution_kernel(const cuFloatComplex* __restrict__ b_all, const int* __restrict__ info,
                                      cuFloatComplex* __restrict__ c_all, std::uint8_t* __restrict__ ok)
{
    const int p = static_cast<int>(blockIdx.x);
    for (int x = static_cast<int>(threadIdx.x); x < n_sys; x += static_cast<int>(blockDim.x)) {
        const cuFloatComplex v = b_all[static_cast<std::size_t>(p) * n_sys + x];
        store_tap(c_all, p, x, z64{v.x, v.y});
    }
    if (threadIdx.x == 0) ok[p] = info[p] == 0 ? 1 : 0;
}

// --- the solvers ------------------------------------------------------------------------

/// What every solver holds: the device's inputs and outputs for max_packets systems, a
/// stream and the timing events.
class solver_base : public joint_solver {
public:
    solver_base(int dev, std::size_t mp)
        : device_(select_device(dev)), max_packets_(mp), h_(mp * 2 * n_ch), loads_(mp * 2), c_(mp * n_sys), ok_(mp)
    {
    }

    void solve(std::span<const channel_pair32> h, std::span<const load_pair> loads, std::span<taps_pair32> c,
               std::span<std::uint8_t> ok) override
    {
        const std::size_t np = h.size();
        if (np > max_packets_ || loads.size() != np || c.size() != np || ok.size() != np) {
            throw std::invalid_argument(std::string(name()) + ": sizes differ or exceed the systems it was made for");
        }
        if (np == 0) return;
        PAQ_CUDA_CHECK(cudaSetDevice(device_));
        const auto s = st_.get();
        PAQ_CUDA_CHECK(cudaMemcpyAsync(h_.data(), h.data(), np * sizeof(channel_pair32), cudaMemcpyHostToDevice, s));
        PAQ_CUDA_CHECK(cudaMemcpyAsync(loads_.data(), loads.data(), np * sizeof(load_pair), cudaMemcpyHostToDevice, s));
        t0_.record(s);
        enqueue(reinterpret_cast<const cuFloatComplex*>(h_.data()), loads_.data(), c_.data(), ok_.data(), np, s);
        t1_.record(s);
        PAQ_CUDA_CHECK(cudaMemcpyAsync(c.data(), c_.data(), np * sizeof(taps_pair32), cudaMemcpyDeviceToHost, s));
        PAQ_CUDA_CHECK(cudaMemcpyAsync(ok.data(), ok_.data(), np, cudaMemcpyDeviceToHost, s));
        after_solve(np, s);
        st_.synchronize();
        last_ms_ = t1_.elapsed_ms_since(t0_);
    }
    void solve_on_device(const cf32* h, const double* loads, cf32* c, std::uint8_t* ok, std::size_t np,
                         cuda_stream_t stream) override
    {
        if (np > max_packets_) throw std::invalid_argument(std::string(name()) + ": more systems than it was made for");
        if (np == 0) return;
        enqueue(reinterpret_cast<const cuFloatComplex*>(h), loads, reinterpret_cast<cuFloatComplex*>(c), ok, np, stream);
    }
    [[nodiscard]] float last_kernel_ms() const noexcept override { return last_ms_; }

protected:
    virtual void enqueue(const cuFloatComplex* h, const double* loads, cuFloatComplex* c, std::uint8_t* ok, std::size_t np,
                         cudaStream_t s) = 0;
    /// Queued after the outputs' copies in solve(): what else comes back.
    virtual void after_solve(std::size_t /*np*/, cudaStream_t /*s*/) {}

private:
    int device_;
    std::size_t max_packets_;
    stream st_;
    event t0_, t1_;
    device_buffer<cf32> h_;
    device_buffer<double> loads_;
    device_buffer<cuFloatComplex> c_;
    device_buffer<std::uint8_t> ok_;
    float last_ms_ = 0.0f;
};

class block_levinson_solver final : public solver_base {
public:
    using solver_base::solver_base;
    [[nodiscard]] const char* name() const noexcept override { return "block-levinson"; }

private:
    void enqueue(const cuFloatComplex* h, const double* loads, cuFloatComplex* c, std::uint8_t* ok, std::size_t np,
                 cudaStream_t s) override
    {
        block_levinson_kernel<<<static_cast<unsigned>(np), levinson_threads, 0, s>>>(h, loads, c, ok);
        PAQ_CUDA_CHECK_LAUNCH();
    }
};

class band_cholesky_solver final : public solver_base {
public:
    band_cholesky_solver(int dev, std::size_t mp) : solver_base(dev, mp), l_(mp * n_sys * win)
    {
        PAQ_CUDA_CHECK(cudaFuncSetAttribute(band_cholesky_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            static_cast<int>(cholesky_smem)));
    }
    [[nodiscard]] const char* name() const noexcept override { return "band-cholesky"; }

private:
    void enqueue(const cuFloatComplex* h, const double* loads, cuFloatComplex* c, std::uint8_t* ok, std::size_t np,
                 cudaStream_t s) override
    {
        band_cholesky_kernel<<<static_cast<unsigned>(np), cholesky_threads, cholesky_smem, s>>>(h, loads, l_.data(), c, ok);
        PAQ_CUDA_CHECK_LAUNCH();
    }
    device_buffer<z64> l_;
};

class conjugate_residual_solver final : public solver_base {
public:
    conjugate_residual_solver(int dev, std::size_t mp) : solver_base(dev, mp), steps_(mp), host_steps_(mp) {}
    [[nodiscard]] const char* name() const noexcept override { return "conjugate-residual"; }
    [[nodiscard]] std::vector<int> last_iterations() const override
    {
        return {host_steps_.begin(), host_steps_.begin() + static_cast<std::ptrdiff_t>(last_np_)};
    }

private:
    void enqueue(const cuFloatComplex* h, const double* loads, cuFloatComplex* c, std::uint8_t* ok, std::size_t np,
                 cudaStream_t s) override
    {
        conjugate_residual_kernel<<<static_cast<unsigned>(np), cr_threads, 0, s>>>(h, loads, c, ok, steps_.data());
        PAQ_CUDA_CHECK_LAUNCH();
    }
    void after_solve(std::size_t np, cudaStream_t s) override
    {
        PAQ_CUDA_CHECK(cudaMemcpyAsync(host_steps_.data(), steps_.data(), np * sizeof(int), cudaMemcpyDeviceToHost, s));
        last_np_ = np;
    }
    device_buffer<int> steps_;
    std::vector<int> host_steps_;
    std::size_t last_np_ = 0;
};

class dense_cholesky_solver final : public solver_base {
public:
    dense_cholesky_solver(int dev, std::size_t mp)
        : solver_base(dev, mp), a_(mp * n_sys * n_sys), b_(mp * n_sys), info_(mp), potrs_info_(1), a_ptrs_(mp), b_ptrs_(mp)
    {
        PAQ_CUSOLVER_CHECK(cusolver().cusolverDnCreate(&handle_));
        std::vector<cuFloatComplex*> pa(mp), pb(mp);
        for (std::size_t p = 0; p < mp; ++p) {
            pa[p] = a_.data() + p * n_sys * n_sys;
            pb[p] = b_.data() + p * n_sys;
        }
        PAQ_CUDA_CHECK(cudaMemcpy(a_ptrs_.data(), pa.data(), mp * sizeof(void*), cudaMemcpyHostToDevice));
        PAQ_CUDA_CHECK(cudaMemcpy(b_ptrs_.data(), pb.data(), mp * sizeof(void*), cudaMemcpyHostToDevice));
    }
    ~dense_cholesky_solver() override
    {
        if (handle_) static_cast<void>(cusolver().cusolverDnDestroy(handle_));
    }
    [[nodiscard]] const char* name() const noexcept override { return "cusolver-dn-chol"; }

private:
    void enqueue(const cuFloatComplex* h, const double* loads, cuFloatComplex* c, std::uint8_t* ok, std::size_t np,
                 cudaStream_t s) override
    {
        const int n = static_cast<int>(np);
        PAQ_CUSOLVER_CHECK(cusolver().cusolverDnSetStream(handle_, s));
        dense_system_kernel<<<n, 256, 0, s>>>(h, loads, a_.data(), b_.data());
        PAQ_CUDA_CHECK_LAUNCH();
        PAQ_CUSOLVER_CHECK(cusolver().cusolverDnCpotrfBatched(handle_, CUBLAS_FILL_MODE_LOWER, n_sys, a_ptrs_.data(), n_sys, info_.data(), n));
        // potrsBatched reports one status for the call (its own int: potrf's of packet 0 kept).
        PAQ_CUSOLVER_CHECK(cusolver().cusolverDnCpotrsBatched(handle_, CUBLAS_FILL_MODE_LOWER, n_sys, 1, a_ptrs_.data(), n_sys,
                                                   b_ptrs_.data(), n_sys, potrs_info_.data(), n));
        dense_solution_kernel<<<n, 128, 0, s>>>(b_.data(), info_.data(), c, ok);
        PAQ_CUDA_CHECK_LAUNCH();
    }
    device_buffer<cuFloatComplex> a_, b_;
    device_buffer<int> info_, potrs_info_;
    device_buffer<cuFloatComplex*> a_ptrs_, b_ptrs_;
    cusolverDnHandle_t handle_ = nullptr;
};

}  // namespace

std::unique_ptr<joint_solver> make_joint_solver(std::string_view name, int device_id, std::size_t max_packets)
{
    if (name == joint_solver_names[0]) return std::make_unique<block_levinson_solver>(device_id, max_packets);
    if (name == joint_solver_names[1]) return std::make_unique<band_cholesky_solver>(device_id, max_packets);
    if (name == joint_solver_names[2]) return std::make_unique<conjugate_residual_solver>(device_id, max_packets);
    if (name == joint_solver_names[3]) return std::make_unique<dense_cholesky_solver>(device_id, max_packets);
    std::string allowed;
    for (const auto n : joint_solver_names) allowed += (allowed.empty() ? "" : ", ") + std::string(n);
    throw std::invalid_argument("unknown two-channel solver '" + std::string(name) + "' (allowed: " + allowed + ")");
}

}  // namespace paq::gpu
