#include "gpu/cuda_backend.hpp"

#include "dsp/batch.hpp"
#include "dsp/batcher.hpp"
#include "dsp/detector.hpp"
#include "dsp/equalizers.hpp"
#include "dsp/fft.hpp"
#include "dsp/preamble_detector.hpp"
#include "dsp/receiver_tables.hpp"
#include "dsp/soqpsk.hpp"
#include "gpu/cma.hpp"
#include "gpu/detector.hpp"
#include "gpu/front_end.hpp"
#include "gpu/packet_locator.hpp"
#include "gpu/resources.cuh"
#include "gpu/solver.hpp"

#include <cuComplex.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <cmath>
#include <numbers>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace paq::gpu {

namespace {

using namespace dsp::chain;
constexpr int n_fft = static_cast<int>(front_end::segment_stride);
constexpr int pre = static_cast<int>(dsp::packet_margin);
constexpr int l_pkt = static_cast<int>(waveform::L_pkt);
constexpr int n_bits = static_cast<int>(waveform::packet_bits);
/// Events between the device stages: one before the first, one after each.
constexpr int stage_count_events = cuda_backend::stage_count;

__device__ inline double freq_of_bin(int k) { return (k < n_fft / 2 ? k : k - n_fft) / static_cast<double>(n_fft); }

/// out[p][(first + i) mod N] = taps[p][i]; out must be zero elsewhere.
__global__ void place_taps_kernel(const cuFloatComplex* __restrict__ taps, int count, int first, cuFloatComplex* __restrict__ out)
{
    const int p = blockIdx.x;
    for (int i = threadIdx.x; i < count; i += blockDim.x) {
        const int idx = ((first + i) % n_fft + n_fft) % n_fft;
        out[static_cast<std::size_t>(p) * n_fft + idx] = taps[static_cast<std::size_t>(p) * count + i];
    }
}

__global__ void mmse_load_kernel(const double* __restrict__ sigma2, double* __restrict__ load, int np)
{
    const int p = blockIdx.x * blockDim.x + threadIdx.x;
    if (p < np) load[p] = 2.0 * sigma2[p];
}

/// <sinc(. - tau), h> and <sinc(. - tau), sinc(. - tau)> over the channel's taps.
__device__ inline void sinc_projection(const cuDoubleComplex* h, double tau, double& dr, double& di, double& ss)
{
    dr = di = ss = 0.0;
    for (int m = -N1; m <= N2; ++m) {
        const double x = 3.14159265358979323846 * (m - tau);
        const double s = fabs(x) < 1e-12 ? 1.0 : sin(x) / x;
        dr += s * h[m + N1].x;
        di += s * h[m + N1].y;
        ss += s * s;
    }
}

/// dsp::fit_single_path: the band-limited single path closest to h, one block per packet.
__global__ void single_path_kernel(const cuFloatComplex* __restrict__ h_all, double* __restrict__ tau_out,
                                   cuDoubleComplex* __restrict__ gain_out)
{
    constexpr int steps = 16, n_cand = (N1 + N2) * steps + 1;
    const int p = blockIdx.x;
    __shared__ double best_score[256];
    __shared__ int best_i[256];
    __shared__ cuDoubleComplex h[L_ch];
    for (int m = threadIdx.x; m < L_ch; m += blockDim.x) {
        const cuFloatComplex v = h_all[static_cast<std::size_t>(p) * L_ch + m];
        h[m] = make_cuDoubleComplex(v.x, v.y);
    }
    __syncthreads();
    double bs = -1.0;
    int bi = 0;
    for (int c = threadIdx.x; c < n_cand; c += blockDim.x) {
        const double tau = static_cast<double>(c - N1 * steps) / steps;
        double dr, di, ss;
        sinc_projection(h, tau, dr, di, ss);
        const double score = (dr * dr + di * di) / ss;
        if (score > bs) {  // strictly greater: the first maximum wins, as on the CPU
            bs = score;
            bi = c;
        }
    }
    best_score[threadIdx.x] = bs;
    best_i[threadIdx.x] = bi;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) {
            const double o = best_score[threadIdx.x + s];
            const int oi = best_i[threadIdx.x + s];
            if (o > best_score[threadIdx.x] || (o == best_score[threadIdx.x] && oi < best_i[threadIdx.x])) {
                best_score[threadIdx.x] = o;
                best_i[threadIdx.x] = oi;
            }
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        const double tau = static_cast<double>(best_i[0] - N1 * steps) / steps;
        double dr, di, ss;
        sinc_projection(h, tau, dr, di, ss);
        tau_out[p] = tau;
        gain_out[p] = make_cuDoubleComplex(dr / ss, di / ss);
    }
}

/// max |H|^2 / min |H|^2 per packet (the ZF condition number).
__global__ void condition_kernel(const cuFloatComplex* __restrict__ hspec, double* __restrict__ cond)
{
    const int p = blockIdx.x;
    __shared__ float lo[256], hi[256];
    float l = INFINITY, h = 0.0f;
    for (int k = threadIdx.x; k < n_fft; k += blockDim.x) {
        const cuFloatComplex v = hspec[static_cast<std::size_t>(p) * n_fft + k];
        const float a = v.x * v.x + v.y * v.y;
        l = fminf(l, a);
        h = fmaxf(h, a);
    }
    lo[threadIdx.x] = l;
    hi[threadIdx.x] = h;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) {
            lo[threadIdx.x] = fminf(lo[threadIdx.x], lo[threadIdx.x + s]);
            hi[threadIdx.x] = fmaxf(hi[threadIdx.x], hi[threadIdx.x + s]);
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) cond[p] = lo[0] > 0.0f ? static_cast<double>(hi[0]) / lo[0] : INFINITY;
}

/// R x C x H_NO at bin k for one path, C from: a spectrum (time-domain equalizers), the
/// single path (none), or the FDE formula on H.
__device__ inline cuFloatComplex combined_bin(int path, int p, int k, const cuFloatComplex* __restrict__ r,
                                              const cuFloatComplex* __restrict__ cspec, const cuFloatComplex* __restrict__ hspec,
                                              const cuFloatComplex* __restrict__ hno, const float* __restrict__ psi,
                                              const double* __restrict__ sigma2, const double* __restrict__ tau,
                                              const cuDoubleComplex* __restrict__ gain)
{
    const std::size_t i = static_cast<std::size_t>(p) * n_fft + k;
    cuFloatComplex c;
    if (path == 0) {  // none: exp(j 2 pi f tau) / g
        double s, co;
        sincos(2.0 * 3.14159265358979323846 * freq_of_bin(k) * tau[p], &s, &co);
        const cuDoubleComplex g = gain[p];
        const double gg = g.x * g.x + g.y * g.y;
        const cuDoubleComplex inv = gg > 0.0 ? make_cuDoubleComplex(g.x / gg, -g.y / gg) : make_cuDoubleComplex(0.0, 0.0);
        const cuDoubleComplex v = cuCmul(inv, make_cuDoubleComplex(co, s));
        c = make_cuFloatComplex(static_cast<float>(v.x), static_cast<float>(v.y));
    } else if (path == 4 || path == 5) {  // FDE1 / FDE2
        const cuFloatComplex hk = hspec[i];
        const float noise = static_cast<float>(2.0 * sigma2[p]);
        const float den = hk.x * hk.x + hk.y * hk.y + (path == 5 ? noise / psi[k] : noise);
        c = den > 0.0f ? make_cuFloatComplex(hk.x / den, -hk.y / den) : make_cuFloatComplex(0.0f, 0.0f);
    } else {
        c = cspec[i];
    }
    return cuCmulf(cuCmulf(r[i], c), hno[k]);
}

/// The detector needs y(n) only at n = 2m + parity (one sample per bit). With N = 16384,
/// y(2m + d) = (1/N) sum_{k < N/2} Y'(k) exp(+j 2 pi k m / (N/2)) where
/// Y'(k) = (Y(k) + (-1)^d Y(k + N/2)) exp(+j 2 pi k d / N): an N/2-point inverse FFT of the
/// folded spectrum gives every decision sample, at half the cost of the full one.
__device__ inline cuFloatComplex fold_bins(cuFloatComplex lo, cuFloatComplex hi, int k, int parity)
{
    if (parity == 0) return cuCaddf(lo, hi);
    float sn, cs;
    sincospif(2.0f * static_cast<float>(k) / static_cast<float>(n_fft), &sn, &cs);
    return cuCmulf(cuCsubf(lo, hi), make_cuFloatComplex(cs, sn));
}

/// Folded spectra of the six paths live side by side: packet p, path j at
/// p * folded_stride + j * N/2 (each N/2 long), so one kernel gathers all six afterwards.
constexpr std::size_t folded_stride = static_cast<std::size_t>(num_paths) * n_fft / 2;

/// out(k), k < N/2 = the folded R x C x H_NO (fold_bins) of one path; out is the path's slot
/// of the folded buffer (packets folded_stride apart).
__global__ void combine_fold_kernel(int path, int parity, const cuFloatComplex* __restrict__ r,
                                    const cuFloatComplex* __restrict__ cspec, const cuFloatComplex* __restrict__ hspec,
                                    const cuFloatComplex* __restrict__ hno, const float* __restrict__ psi,
                                    const double* __restrict__ sigma2, const double* __restrict__ tau,
                                    const cuDoubleComplex* __restrict__ gain, cuFloatComplex* __restrict__ out)
{
    const int p = blockIdx.y;
    const int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= n_fft / 2) return;
    const cuFloatComplex lo = combined_bin(path, p, k, r, cspec, hspec, hno, psi, sigma2, tau, gain);
    const cuFloatComplex hi = combined_bin(path, p, k + n_fft / 2, r, cspec, hspec, hno, psi, sigma2, tau, gain);
    out[static_cast<std::size_t>(p) * folded_stride + k] = fold_bins(lo, hi, k, parity);
}

/// All six paths at once: for k < N/2, reads R, H_NO (and H, the three tap spectra) at k and
/// k + N/2 once and writes each path's folded R x C x H_NO into its slot of the folded buffer.
__global__ void combine6_fold_kernel(int parity, const cuFloatComplex* __restrict__ r, const cuFloatComplex* __restrict__ spec_zf,
                                     const cuFloatComplex* __restrict__ spec_mmse, const cuFloatComplex* __restrict__ spec_cma,
                                     const cuFloatComplex* __restrict__ hspec, const cuFloatComplex* __restrict__ hno,
                                     const float* __restrict__ psi, const double* __restrict__ sigma2,
                                     const double* __restrict__ tau, const cuDoubleComplex* __restrict__ gain,
                                     cuFloatComplex* __restrict__ out)
{
    const int p = blockIdx.y;
    const int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= n_fft / 2) return;
    cuFloatComplex* o = out + static_cast<std::size_t>(p) * folded_stride + k;
    const cuFloatComplex* specs[num_paths] = {nullptr, spec_zf, spec_mmse, spec_cma, nullptr, nullptr};
#pragma unroll
    for (int path = 0; path < num_paths; ++path) {
        const cuFloatComplex lo = combined_bin(path, p, k, r, specs[path], hspec, hno, psi, sigma2, tau, gain);
        const cuFloatComplex hi = combined_bin(path, p, k + n_fft / 2, r, specs[path], hspec, hno, psi, sigma2, tau, gain);
        o[static_cast<std::size_t>(path) * (n_fft / 2)] = fold_bins(lo, hi, k, parity);
    }
}

/// out(k) = fold_bins(y(k), y(k + N/2)) for k < N/2 (after the fused spectrum; y packets N
/// apart, out packets folded_stride apart).
__global__ void fold_kernel(int parity, const cuFloatComplex* __restrict__ y, cuFloatComplex* __restrict__ out)
{
    const int p = blockIdx.y;
    const int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= n_fft / 2) return;
    const cuFloatComplex* row = y + static_cast<std::size_t>(p) * n_fft;
    out[static_cast<std::size_t>(p) * folded_stride + k] = fold_bins(row[k], row[k + n_fft / 2], k, parity);
}

/// With a float cuSOLVER solver: packets whose ZF system has a condition number above 1e6
/// (flagged ill-conditioned), or that the solver could not factor, take the double-precision
/// Levinson taps instead. One block per packet.
__global__ void zf_fallback_kernel(const double* __restrict__ cond, const cuFloatComplex* __restrict__ c_lev,
                                   const std::uint8_t* __restrict__ ok_lev, cuFloatComplex* __restrict__ c,
                                   std::uint8_t* __restrict__ ok)
{
    const int p = blockIdx.x;
    if (cond[p] <= 1e6 && ok[p]) return;
    for (int i = threadIdx.x; i < L_eq; i += blockDim.x) {
        c[static_cast<std::size_t>(p) * L_eq + i] = c_lev[static_cast<std::size_t>(p) * L_eq + i];
    }
    if (threadIdx.x == 0) ok[p] = ok_lev[p];
}

/// Decision samples of all six paths into the detector's bit-major input v[bit][packet][path],
/// scaled by 1/N, from the inverse-transformed folded buffer (decision sample n = pre + 2k +
/// delay = 2m + parity is sample m of the path's half transform). A block moves a tile of
/// 32 bits x 8 packets x 6 paths through shared memory, so that both the reads (along the
/// bits) and the writes (along packets and paths) are contiguous.
constexpr int gather_bits = 32, gather_packets = 8;
__global__ void __launch_bounds__(256) gather_decisions_kernel(const cuFloatComplex* __restrict__ y, int delay, int np,
                                                               cuFloatComplex* __restrict__ v)
{
    __shared__ cuFloatComplex tile[gather_bits][gather_packets * num_paths + 1];
    const int k0 = blockIdx.x * gather_bits, p0 = blockIdx.y * gather_packets;
    const float inv = 1.0f / n_fft;
    for (int i = threadIdx.x; i < gather_bits * gather_packets * num_paths; i += blockDim.x) {
        const int kk = i % gather_bits, col = i / gather_bits;  // col = packet * 6 + path
        const int k = k0 + kk, p = p0 + col / num_paths, path = col % num_paths;
        if (k < n_bits && p < np) {
            const cuFloatComplex s = y[static_cast<std::size_t>(p) * folded_stride + static_cast<std::size_t>(path) * (n_fft / 2) +
                                       (pre + 2 * k + delay) / 2];
            tile[kk][col] = make_cuFloatComplex(s.x * inv, s.y * inv);
        }
    }
    __syncthreads();
    const int cols = num_paths * min(gather_packets, np - p0);
    for (int i = threadIdx.x; i < gather_bits * gather_packets * num_paths; i += blockDim.x) {
        const int col = i % (gather_packets * num_paths), kk = i / (gather_packets * num_paths);
        const int k = k0 + kk;
        if (k < n_bits && col < cols) v[static_cast<std::size_t>(k) * (np * num_paths) + static_cast<std::size_t>(p0) * num_paths + col] = tile[kk][col];
    }
}

/// CMA: z(n) = 2 (|y|^2 - 1) y on the packet, 0 elsewhere (y = IFFT output / N).
__global__ void cma_z_kernel(const cuFloatComplex* __restrict__ y, cuFloatComplex* __restrict__ z)
{
    const int p = blockIdx.y;
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n_fft) return;
    const std::size_t idx = static_cast<std::size_t>(p) * n_fft + i;
    if (i < pre || i >= pre + l_pkt) {
        z[idx] = make_cuFloatComplex(0.0f, 0.0f);
        return;
    }
    const float inv = 1.0f / n_fft;
    const cuFloatComplex v = make_cuFloatComplex(y[idx].x * inv, y[idx].y * inv);
    const float g = 2.0f * (v.x * v.x + v.y * v.y - 1.0f);
    z[idx] = make_cuFloatComplex(g * v.x, g * v.y);
}

// --- Pruned transforms of short tap vectors (equalizer: 186 taps, channel: 38) on the
// 16384-point grid, fused with what consumes or produces them. With n = 16 n1 + n2 (taps, at
// most 256) and k = 1024 q + kk (bins), W = exp(-j 2 pi / N):
//   C(k) = sum_i c_i W^{k (first + i)}
//        = sum_{n2} w16^{q (n2 + first)} W^{kk (n2 + first)} sum_{n1} c_{16 n1 + n2} w1024^{kk n1}
// so a bin costs 32 complex multiply-adds instead of a zero-padded 16384-point FFT, a memset
// and a product pass over the 3106 x 16384 buffers. Twiddles come from sincospi on exactly
// reduced integer phases (accurate to ~1 ulp), not from recurrences.
constexpr int pr_taps = 256;            ///< 16 x 16 tap positions
constexpr int pr_kk = 1024;             ///< inner bins
constexpr int pr_chunk = 64;            ///< kk per block of the forward kernel
constexpr int grad_smem_bytes = 16 * pr_kk * static_cast<int>(sizeof(cuFloatComplex));
static_assert(n_fft == 16 * pr_kk && L_eq <= pr_taps);

/// exp(sign j 2 pi m / period) for an integer phase m (reduced exactly first).
__device__ inline cuFloatComplex unit(int m, int period, float sign)
{
    m %= period;
    if (m < 0) m += period;
    float sn, cs;
    sincospif(2.0f * static_cast<float>(m) / static_cast<float>(period), &sn, &cs);
    return make_cuFloatComplex(cs, sign * sn);
}

enum class spectrum_mode { taps_only, times_r, times_r_hno };

/// out[p][k] = C_p(k) [x R_p(k) [x H_NO(k)]], C_p the spectrum of `count` taps placed at
/// `first` .. first + count - 1 (mod N). Grid (16384 / (16 * pr_chunk) = 16, packets), 1024 threads.
template <spectrum_mode mode>
__global__ void __launch_bounds__(1024) tap_spectrum_kernel(const cuFloatComplex* __restrict__ taps, int count, int first,
                                                            const cuFloatComplex* __restrict__ r,
                                                            const cuFloatComplex* __restrict__ hno,
                                                            cuFloatComplex* __restrict__ out)
{
    __shared__ cuFloatComplex c[pr_taps];
    __shared__ cuFloatComplex w1024[pr_kk];
    __shared__ cuFloatComplex b[16][pr_chunk];
    const int p = blockIdx.y;
    const int kk0 = blockIdx.x * pr_chunk;
    const int t = threadIdx.x;
    if (t < pr_taps) c[t] = t < count ? taps[static_cast<std::size_t>(p) * count + t] : make_cuFloatComplex(0.0f, 0.0f);
    w1024[t] = unit(t, pr_kk, -1.0f);
    __syncthreads();
    {   // b(n2, kk) = W^{kk (n2 + first)} sum_{n1} c_{16 n1 + n2} w1024^{kk n1}
        const int n2 = t / pr_chunk, kl = t % pr_chunk, kk = kk0 + kl;
        float ar = 0.0f, ai = 0.0f;
#pragma unroll
        for (int n1 = 0; n1 < 16; ++n1) {
            const cuFloatComplex x = c[16 * n1 + n2], w = w1024[(kk * n1) % pr_kk];
            ar += x.x * w.x - x.y * w.y;
            ai += x.x * w.y + x.y * w.x;
        }
        const cuFloatComplex tw = unit(kk * (n2 + first), n_fft, -1.0f);
        b[n2][kl] = make_cuFloatComplex(ar * tw.x - ai * tw.y, ar * tw.y + ai * tw.x);
    }
    __syncthreads();
    // C(1024 q + kk) = sum_{n2} w16^{q (n2 + first)} b(n2, kk); w16 from the 1024 table.
    const int q = t / pr_chunk, kl = t % pr_chunk;
    float cr = 0.0f, ci = 0.0f;
#pragma unroll
    for (int n2 = 0; n2 < 16; ++n2) {
        const int m = ((q * (n2 + first)) % 16 + 16) % 16;
        const cuFloatComplex w = w1024[64 * m], x = b[n2][kl];
        cr += x.x * w.x - x.y * w.y;
        ci += x.x * w.y + x.y * w.x;
    }
    const int k = q * pr_kk + kk0 + kl;
    const std::size_t i = static_cast<std::size_t>(p) * n_fft + k;
    cuFloatComplex v = make_cuFloatComplex(cr, ci);
    if constexpr (mode != spectrum_mode::taps_only) v = cuCmulf(r[i], v);
    if constexpr (mode == spectrum_mode::times_r_hno) v = cuCmulf(v, hno[k]);
    out[i] = v;
}

/// CMA step from Z = FFT(z): grad(l) = sum_k Z(k) R*(k) exp(+j 2 pi k l / N) at the 186
/// lags l = -L1 .. L2 only (the inverse of the pruned transform above), then
/// c(l) -= scale grad(l). One block per packet; each thread takes the bins kk and kk + 512
/// (two per thread keeps the 16 x 16 DFT in registers without spilling).
constexpr int grad_threads = 512;
__global__ void __launch_bounds__(grad_threads) cma_grad_update_kernel(const cuFloatComplex* __restrict__ zspec,
                                                                        const cuFloatComplex* __restrict__ r, float scale,
                                                                        cuFloatComplex* __restrict__ taps)
{
    extern __shared__ cuFloatComplex e_sh[];       // [16][1024]: E'(n2, kk)
    __shared__ cuFloatComplex w1024[pr_kk];         // exp(+j 2 pi m / 1024)
    constexpr int first = -L1;
    const int p = blockIdx.x;
    for (int m = threadIdx.x; m < pr_kk; m += grad_threads) w1024[m] = unit(m, pr_kk, 1.0f);
    __syncthreads();
    for (int kk = threadIdx.x; kk < pr_kk; kk += grad_threads) {
        cuFloatComplex g[16];
#pragma unroll
        for (int q = 0; q < 16; ++q) {
            const std::size_t i = static_cast<std::size_t>(p) * n_fft + q * pr_kk + kk;
            const cuFloatComplex z = zspec[i], x = r[i];
            g[q] = make_cuFloatComplex(z.x * x.x + z.y * x.y, z.y * x.x - z.x * x.y);  // Z conj(R)
        }
#pragma unroll 1
        for (int n2 = 0; n2 < 16; ++n2) {
            float er = 0.0f, ei = 0.0f;
#pragma unroll
            for (int q = 0; q < 16; ++q) {  // g[] indexed by compile-time q: stays in registers
                const int m = ((q * (n2 + first)) % 16 + 16) % 16;
                const cuFloatComplex w = w1024[64 * m];
                er += g[q].x * w.x - g[q].y * w.y;
                ei += g[q].x * w.y + g[q].y * w.x;
            }
            const cuFloatComplex tw = unit(kk * (n2 + first), n_fft, 1.0f);
            e_sh[n2 * pr_kk + kk] = make_cuFloatComplex(er * tw.x - ei * tw.y, er * tw.y + ei * tw.x);
        }
    }
    __syncthreads();
    // grad(first + 16 n1 + n2) = sum_kk w1024^{kk n1} E'(n2, kk): one warp per output, lanes
    // over kk, a fixed-order reduction (the same bits every run).
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    for (int n = warp; n < L_eq; n += grad_threads / 32) {
        const int n1 = n / 16, n2 = n % 16;
        float sr = 0.0f, si = 0.0f;
        for (int j = lane; j < pr_kk; j += 32) {
            const cuFloatComplex w = w1024[(j * n1) % pr_kk], x = e_sh[n2 * pr_kk + j];
            sr += x.x * w.x - x.y * w.y;
            si += x.x * w.y + x.y * w.x;
        }
        for (int o = 16; o > 0; o >>= 1) {
            sr += __shfl_xor_sync(0xffffffffu, sr, o);
            si += __shfl_xor_sync(0xffffffffu, si, o);
        }
        if (lane == 0) {
            cuFloatComplex& c = taps[static_cast<std::size_t>(p) * L_eq + n];
            c = make_cuFloatComplex(c.x - scale * sr, c.y - scale * si);
        }
    }
}

}  // namespace

/// The whole chain for one part of a batch window (dsp::split_batch), on a stream of its own:
/// every buffer, plan and pinned host buffer it needs, sized for the largest part. The
/// backend holds one per part, so the parts of a batch run concurrently.
struct chain_part {
    const dsp::receiver_config& cfg;
    const dsp::receiver_tables& t;
    int device;
    std::size_t max_window, max_packets;
    front_end fe;
    packet_locator loc;
    stream_detector det;
    cufft_plan plan;
    cufft_plan plan_half;  ///< N/2 points, all packets x paths: decision samples from folded spectra
    device_buffer<cuFloatComplex> work1, work2, spec_mmse, folded, pad_channel, pad_taps, hspec, hno, c_zf, c_mmse, c_cma;
    device_buffer<float> psi;
    device_buffer<double> zero_load, load, tau, cond;
    device_buffer<cuDoubleComplex> gain;
    device_buffer<std::uint8_t> ok_zf, ok_mmse;
    /// A cuSOLVER solver chosen by name (null: Levinson, called directly), and the Levinson
    /// ZF taps it falls back to for ill-conditioned packets.
    std::unique_ptr<batched_solver> solver;
    device_buffer<cuFloatComplex> c_zf_lev;
    device_buffer<std::uint8_t> ok_zf_lev;
    dsp::pll_gains acq, track;
    pinned_buffer<std::uint8_t> bits_host;
    pinned_buffer<dsp::path_stats> stats_host;
    pinned_buffer<cf32> h_host;
    pinned_buffer<double> cfo_host, sigma2_host, cond_host;
    pinned_buffer<unsigned> nonfinite_host;
    pinned_buffer<int> support_host;
    pinned_buffer<std::uint8_t> ok_zf_host, ok_mmse_host;
    pinned_buffer<long long> starts_host;
    pinned_buffer<float> metrics_host;
    pinned_buffer<int> count_host;
    pinned_buffer<unsigned long long> truncated_host;
    std::array<event, stage_count_events> ev;
    int events_recorded = 0;  ///< by the last enqueue() (0: timing was off)
    bool fused;

    chain_part(const dsp::receiver_config& c, int dev, std::size_t window, bool fused_chain, const std::string& solver_name)
        : cfg(c),
          t(dsp::get_receiver_tables(c.fft_size)),
          device(select_device(dev)),
          max_window(window),
          max_packets(max_window / waveform::L_pkt + 2),
          fe(dev, max_window, max_packets),
          loc(dev, max_window, max_packets),
          det(dev, max_packets * num_paths),
          plan(n_fft, static_cast<int>(max_packets), fe.device().stream),
          plan_half(n_fft / 2, static_cast<int>(max_packets) * num_paths, fe.device().stream),
          work1(max_packets * n_fft),
          work2(max_packets * n_fft),
          spec_mmse(max_packets * n_fft),
          folded(max_packets * folded_stride),
          pad_channel(max_packets * n_fft),
          pad_taps(max_packets * n_fft),
          hspec(max_packets * n_fft),
          hno(n_fft),
          c_zf(max_packets * L_eq),
          c_mmse(max_packets * L_eq),
          c_cma(max_packets * L_eq),
          psi(n_fft),
          zero_load(max_packets),
          load(max_packets),
          tau(max_packets),
          cond(max_packets),
          gain(max_packets),
          ok_zf(max_packets),
          ok_mmse(max_packets),
          solver(solver_name == "levinson" ? nullptr : make_batched_solver(solver_name, dev, max_packets)),
          c_zf_lev(solver ? max_packets * L_eq : 0),
          ok_zf_lev(solver ? max_packets : 0),
          acq(dsp::make_pll_gains(c.pll_acquisition_bn_t, c.pll_damping)),
          track(dsp::make_pll_gains(c.pll_bn_t, c.pll_damping)),
          bits_host(max_packets * num_paths * dsp::packed_data_bytes),
          stats_host(max_packets * num_paths),
          h_host(max_packets * L_ch),
          cfo_host(max_packets),
          sigma2_host(max_packets),
          cond_host(max_packets),
          nonfinite_host(max_packets),
          support_host(max_packets),
          ok_zf_host(max_packets),
          ok_mmse_host(max_packets),
          starts_host(max_packets),
          metrics_host(max_packets),
          count_host(1),
          truncated_host(1),
          fused(fused_chain)
    {
        PAQ_CUDA_CHECK(cudaFuncSetAttribute(cma_grad_update_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, grad_smem_bytes));
        // H_NO on the FFT grid (computed in double on the host, once) and Psi.
        dsp::fft_plan fwd(n_fft, dsp::fft_plan::direction::forward);
        dsp::fft_buffer hno_d(n_fft);
        dsp::taps_to_spectrum(t.h_no.data(), -hno_half, L_hno, fwd, hno_d);
        std::vector<cuFloatComplex> hno_f(n_fft);
        std::vector<float> psi_f(n_fft);
        for (int k = 0; k < n_fft; ++k) {
            hno_f[static_cast<std::size_t>(k)] = make_cuFloatComplex(static_cast<float>(hno_d[static_cast<std::size_t>(k)].real()),
                                                                     static_cast<float>(hno_d[static_cast<std::size_t>(k)].imag()));
            psi_f[static_cast<std::size_t>(k)] = static_cast<float>(t.psi[static_cast<std::size_t>(k)]);
        }
        PAQ_CUDA_CHECK(cudaMemcpy(hno.data(), hno_f.data(), n_fft * sizeof(cuFloatComplex), cudaMemcpyHostToDevice));
        PAQ_CUDA_CHECK(cudaMemcpy(psi.data(), psi_f.data(), n_fft * sizeof(float), cudaMemcpyHostToDevice));
        PAQ_CUDA_CHECK(cudaMemset(zero_load.data(), 0, max_packets * sizeof(double)));
        // Unused batch slots of the FFT buffers stay finite.
        PAQ_CUDA_CHECK(cudaMemset(work1.data(), 0, work1.size() * sizeof(cuFloatComplex)));
        PAQ_CUDA_CHECK(cudaMemset(work2.data(), 0, work2.size() * sizeof(cuFloatComplex)));
        PAQ_CUDA_CHECK(cudaMemset(hspec.data(), 0, hspec.size() * sizeof(cuFloatComplex)));
        PAQ_CUDA_CHECK(cudaMemset(pad_channel.data(), 0, pad_channel.size() * sizeof(cuFloatComplex)));
        PAQ_CUDA_CHECK(cudaMemset(pad_taps.data(), 0, pad_taps.size() * sizeof(cuFloatComplex)));
    }

    /// Spectrum of per-packet taps (count, first index) into dst, all max_packets slots.
    void taps_spectrum(const cuFloatComplex* taps, int count, int first, int np, cuFloatComplex* dst, cudaStream_t s)
    {
        // The taps go into a zero-padded buffer of their own (zeroed once at Create, always
        // written at the same positions), transformed out of place: no memset of np x N.
        cuFloatComplex* pad = count == L_ch && first == -N1 ? pad_channel.data() : count == L_eq && first == -L1 ? pad_taps.data() : nullptr;
        if (!pad) throw std::logic_error("cuda backend: no padded buffer for these taps");
        place_taps_kernel<<<np, 128, 0, s>>>(taps, count, first, pad);
        PAQ_CUDA_CHECK_LAUNCH();
        plan.forward(pad, dst);
    }

    /// Queues the whole chain for one part's window on this part's stream (no host wait).
    /// The upload starts once `upload_after` (if any) has completed. With `timed`, records
    /// the stage events.
    void enqueue(std::span<const cf32> window, const locate_params& params, cudaEvent_t upload_after, bool timed);
    /// Waits for this part's stream and writes its packets, records and bits into `out` from
    /// packet `filled` on (out is already large enough), advancing `filled`; packet starts
    /// made absolute with `first_sample`, the part window's first sample. Returns the host
    /// time spent filling, in ms.
    double collect(std::uint64_t first_sample, dsp::batch_output& out, std::size_t& filled);
    [[nodiscard]] cudaEvent_t upload_done() const noexcept { return fe.upload_done(); }
};

struct cuda_backend::impl {
    dsp::receiver_config cfg;
    const dsp::receiver_tables& t;
    int device;
    std::size_t max_window;
    std::size_t n_parts;
    std::vector<std::unique_ptr<chain_part>> parts;
    bool timing_on = false;
    cuda_backend::timing last;

    impl(const dsp::receiver_config& c, int dev, bool fused_chain, const std::string& solver_name, int np)
        : cfg(c),
          t(dsp::get_receiver_tables(c.fft_size)),
          device(select_device(dev)),
          max_window(c.batch_samples + dsp::batch_guard_before + dsp::batch_guard_after),
          n_parts(static_cast<std::size_t>(np))
    {
        const std::size_t part_window = n_parts == 1 ? max_window : dsp::max_part_window(c.batch_samples, n_parts);
        for (std::size_t k = 0; k < n_parts; ++k) parts.push_back(std::make_unique<chain_part>(cfg, dev, part_window, fused_chain, solver_name));
    }
};

cuda_backend::cuda_backend(const dsp::receiver_config& cfg, int device_id, chain_variant variant, const std::string& solver, int parts)
{
    if (parts < 1 || parts > max_parts) {
        throw std::invalid_argument("cuda backend: parts must be 1 .. " + std::to_string(max_parts) + ", not " + std::to_string(parts));
    }
    if (solver != "levinson" && solver != "cusolver-dn-chol" && solver != "cusolver-sp-qr") {
        throw std::invalid_argument("unknown solver '" + solver + "' (allowed: levinson, cusolver-dn-chol, cusolver-sp-qr)");
    }
    const auto errors = cfg.validate();
    if (!errors.empty()) {
        std::string msg = "invalid receiver configuration:";
        for (const auto& e : errors) msg += "\n  " + e;
        throw std::invalid_argument(msg);
    }
    if (cfg.fft_size != front_end::segment_stride) throw std::invalid_argument("cuda backend: fft_size must be 16384");
    impl_ = std::make_unique<impl>(cfg, device_id, variant == chain_variant::fused, solver, parts);
}

cuda_backend::~cuda_backend() = default;

cuda_backend::timing cuda_backend::last_timing() const noexcept { return impl_->last; }

void cuda_backend::enable_stage_timing(bool on) noexcept { impl_->timing_on = on; }

const char* cuda_backend::stage_name(stage st) noexcept
{
    switch (st) {
    case stage::upload_metric: return "upload_metric";
    case stage::locate: return "locate";
    case stage::estimates: return "estimates";
    case stage::solvers: return "solvers";
    case stage::spectra: return "spectra";
    case stage::cma: return "cma";
    case stage::paths: return "paths";
    case stage::detector: return "detector";
    case stage::copy_back: return "copy_back";
    case stage::records: return "records";
    case stage::count: break;
    }
    return "?";
}

host_pin::host_pin(const void* data, std::size_t bytes)
{
    PAQ_CUDA_CHECK(cudaHostRegister(const_cast<void*>(data), bytes, cudaHostRegisterPortable));
    p_ = const_cast<void*>(data);
}

host_pin::~host_pin()
{
    if (p_) PAQ_CUDA_CHECK_NOTHROW(cudaHostUnregister(p_));
}

dsp::batch_output cuda_backend::process(const dsp::sample_batch& batch)
{
    auto& m = *impl_;
    dsp::batch_output out;
    out.batch_index = batch.index;
    const std::size_t len = batch.samples.size();
    if (len < dsp::detector_span) return out;
    if (len > m.max_window) throw std::invalid_argument("cuda backend: batch window larger than configured");
    PAQ_CUDA_CHECK(cudaSetDevice(m.device));
    const bool timed = m.timing_on;
    m.last = {};
    if (timed) {
        cudaPointerAttributes attr{};
        PAQ_CUDA_CHECK(cudaPointerGetAttributes(&attr, batch.samples.data()));
        m.last.pinned_input = attr.type == cudaMemoryTypeHost;
    }

    // One part: the whole window. Several: each part's chain is queued on its own stream,
    // its upload after the previous part's (the link in turn, the first part's packets start
    // early), then the parts are collected in order: the host fills one part's records while
    // the device still works on the later ones.
    std::vector<dsp::batch_part> split;
    if (m.n_parts == 1) {
        split.push_back({0, len, batch.owned_begin, batch.owned_end, batch.segment_start, batch.segment_end});
    } else {
        split = dsp::split_batch(batch, m.n_parts);
    }
    std::size_t capacity = 0;
    for (std::size_t k = 0; k < split.size(); ++k) capacity += m.parts[k]->max_packets;
    const std::span<const cf32> all(batch.samples);
    for (std::size_t k = 0; k < split.size(); ++k) {
        const auto& part = split[k];
        const locate_params params{static_cast<long long>(part.length), static_cast<long long>(part.owned_begin),
                                   static_cast<long long>(part.owned_end), part.segment_start, part.segment_end,
                                   m.cfg.detection_threshold, m.t.template_offset};
        m.parts[k]->enqueue(all.subspan(part.offset, part.length), params, k > 0 ? m.parts[k - 1]->upload_done() : nullptr, timed);
    }
    // While the device works on the first part: the output at its largest size, so that its
    // pages are touched now and not while the last part's records are filled (a full batch
    // is about 17 MB of fresh memory; faulting it in took 3 ms at the end before).
    out.packets.resize(capacity);
    out.bits.resize(capacity * num_paths * dsp::packed_data_bytes);
    double records_ms = 0.0;
    std::size_t filled = 0;
    for (std::size_t k = 0; k < split.size(); ++k) records_ms += m.parts[k]->collect(batch.first_sample + split[k].offset, out, filled);
    out.packets.resize(filled);
    out.bits.resize(filled * num_paths * dsp::packed_data_bytes);

    if (timed && !split.empty()) {
        m.last.parts = static_cast<int>(split.size());
        for (std::size_t k = 0; k < split.size(); ++k) {
            const auto& ev = m.parts[k]->ev;
            for (int i = 0; i + 1 < m.parts[k]->events_recorded; ++i) {
                m.last.ms[static_cast<std::size_t>(i)] += ev[static_cast<std::size_t>(i + 1)].elapsed_ms_since(ev[static_cast<std::size_t>(i)]);
            }
        }
        const auto& last_part = *m.parts[split.size() - 1];
        m.last.device_ms = last_part.ev[static_cast<std::size_t>(last_part.events_recorded - 1)].elapsed_ms_since(m.parts[0]->ev[0]);
        m.last.ms[static_cast<std::size_t>(stage::records)] = records_ms;
        m.last.valid = true;
    }
    return out;
}

void chain_part::enqueue(std::span<const cf32> window, const locate_params& params, cudaEvent_t upload_after, bool timed)
{
    auto& m = *this;
    const auto d = m.fe.device();
    const cudaStream_t s = d.stream;
    int next_ev = 0;
    const auto mark = [&] {
        if (timed) m.ev[static_cast<std::size_t>(next_ev++)].record(s);
    };
    mark();

    // Window up and metric, then packet location, all on the device.
    m.fe.upload_and_metric_device(window, upload_after);
    mark();
    const std::size_t n_metric = window.size() - dsp::detector_span + 1;
    m.loc.locate_device(m.fe.device_metric(), n_metric, params, s);
    const auto found = m.loc.device();
    mark();

    // Every stage over all slots; slots past the count carry zeros.
    const std::size_t np = m.max_packets;
    const int P = static_cast<int>(np);
    m.fe.estimate_device(found.starts, found.count, np);
    mark();
    auto* seg = reinterpret_cast<cuFloatComplex*>(d.segments);
    auto* h = reinterpret_cast<cuFloatComplex*>(d.channels);

    // ZF and MMSE (Levinson, double), the unequalized path's single-path fit.
    mmse_load_kernel<<<(P + 127) / 128, 128, 0, s>>>(d.sigma2, m.load.data(), P);
    PAQ_CUDA_CHECK_LAUNCH();
    if (m.solver) {
        m.solver->solve_on_device(d.channels, m.zero_load.data(), reinterpret_cast<cf32*>(m.c_zf.data()), m.ok_zf.data(), np, s);
        m.solver->solve_on_device(d.channels, m.load.data(), reinterpret_cast<cf32*>(m.c_mmse.data()), m.ok_mmse.data(), np, s);
        levinson_solver::solve_device(d.channels, m.zero_load.data(), reinterpret_cast<cf32*>(m.c_zf_lev.data()),
                                      m.ok_zf_lev.data(), np, s);
    } else {
        levinson_solver::solve_device_pair(d.channels, m.zero_load.data(), reinterpret_cast<cf32*>(m.c_zf.data()), m.ok_zf.data(),
                                           m.load.data(), reinterpret_cast<cf32*>(m.c_mmse.data()), m.ok_mmse.data(), np, s);
    }
    single_path_kernel<<<P, 128, 0, s>>>(h, m.tau.data(), m.gain.data());
    PAQ_CUDA_CHECK_LAUNCH();
    mark();

    // R = FFT of each segment (in place), H = FFT of each channel estimate.
    m.plan.forward(seg, seg);
    if (m.fused) {
        tap_spectrum_kernel<spectrum_mode::taps_only><<<dim3(n_fft / (16 * pr_chunk), P), 1024, 0, s>>>(h, L_ch, -N1, nullptr, nullptr,
                                                                                                       m.hspec.data());
        PAQ_CUDA_CHECK_LAUNCH();
    } else {
        m.taps_spectrum(h, L_ch, -N1, P, m.hspec.data(), s);
    }
    condition_kernel<<<P, 256, 0, s>>>(m.hspec.data(), m.cond.data());
    if (m.solver) {
        zf_fallback_kernel<<<P, 64, 0, s>>>(m.cond.data(), m.c_zf_lev.data(), m.ok_zf_lev.data(), m.c_zf.data(), m.ok_zf.data());
    }
    PAQ_CUDA_CHECK_LAUNCH();
    mark();

    // CMA from MMSE.
    PAQ_CUDA_CHECK(cudaMemcpyAsync(m.c_cma.data(), m.c_mmse.data(), np * L_eq * sizeof(cuFloatComplex), cudaMemcpyDeviceToDevice, s));
    const dim3 per_bin((n_fft + 255) / 256, static_cast<unsigned>(P));
    const float cma_scale = static_cast<float>(m.cfg.cma_mu / (static_cast<double>(n_fft) * l_pkt));
    const dim3 spectrum_grid(n_fft / (16 * pr_chunk), static_cast<unsigned>(P));
    for (int it = 0; m.fused && it < m.cfg.cma_iterations; ++it) {
        // dsp::cma_refine's steps: C x R (pruned transform), IFFT, z, FFT, gradient at 186 lags.
        tap_spectrum_kernel<spectrum_mode::times_r><<<spectrum_grid, 1024, 0, s>>>(m.c_cma.data(), L_eq, -L1, seg, nullptr, m.work1.data());
        PAQ_CUDA_CHECK_LAUNCH();
        m.plan.inverse(m.work1.data(), m.work1.data());
        cma_z_kernel<<<per_bin, 256, 0, s>>>(m.work1.data(), m.work2.data());
        PAQ_CUDA_CHECK_LAUNCH();
        m.plan.forward(m.work2.data(), m.work2.data());
        cma_grad_update_kernel<<<P, grad_threads, grad_smem_bytes, s>>>(m.work2.data(), seg, cma_scale, m.c_cma.data());
        PAQ_CUDA_CHECK_LAUNCH();
    }
    // The reference chain: each packet's CMA steps on chip (gpu/cma: the transforms in shared
    // memory), from the MMSE taps.
    if (!m.fused) cma_refine_device(d.segments, reinterpret_cast<cf32*>(m.c_cma.data()), np, pre, m.cfg.cma_mu, m.cfg.cma_iterations, s);
    mark();

    // Six paths: filter spectrum, x R x H_NO, IFFT, decision samples.
    auto* v = reinterpret_cast<cuFloatComplex*>(m.det.device_input());
    const dim3 per_half_bin((n_fft / 2 + 255) / 256, static_cast<unsigned>(P));
    const int parity = (pre + m.t.decision_delay) & 1;
    if (m.fused) {
        for (int path = 0; path < num_paths; ++path) {
            cuFloatComplex* slot = m.folded.data() + static_cast<std::size_t>(path) * (n_fft / 2);
            const cuFloatComplex* taps = path == 1 ? m.c_zf.data() : path == 2 ? m.c_mmse.data() : path == 3 ? m.c_cma.data() : nullptr;
            if (taps) {
                tap_spectrum_kernel<spectrum_mode::times_r_hno><<<spectrum_grid, 1024, 0, s>>>(taps, L_eq, -L1, seg, m.hno.data(),
                                                                                               m.work1.data());
                PAQ_CUDA_CHECK_LAUNCH();
                fold_kernel<<<per_half_bin, 256, 0, s>>>(parity, m.work1.data(), slot);
            } else {
                combine_fold_kernel<<<per_half_bin, 256, 0, s>>>(path, parity, seg, nullptr, m.hspec.data(), m.hno.data(),
                                                                  m.psi.data(), d.sigma2, m.tau.data(), m.gain.data(), slot);
            }
            PAQ_CUDA_CHECK_LAUNCH();
        }
    } else {
        m.taps_spectrum(m.c_zf.data(), L_eq, -L1, P, m.work1.data(), s);
        m.taps_spectrum(m.c_mmse.data(), L_eq, -L1, P, m.spec_mmse.data(), s);
        m.taps_spectrum(m.c_cma.data(), L_eq, -L1, P, m.work2.data(), s);
        combine6_fold_kernel<<<per_half_bin, 256, 0, s>>>(parity, seg, m.work1.data(), m.spec_mmse.data(), m.work2.data(),
                                                           m.hspec.data(), m.hno.data(), m.psi.data(), d.sigma2, m.tau.data(),
                                                           m.gain.data(), m.folded.data());
        PAQ_CUDA_CHECK_LAUNCH();
    }
    // One batch of N/2-point inverse transforms over all packets and paths (slots N/2 apart).
    m.plan_half.inverse(m.folded.data(), m.folded.data());
    const dim3 gather_grid((n_bits + gather_bits - 1) / gather_bits, static_cast<unsigned>((P + gather_packets - 1) / gather_packets));
    gather_decisions_kernel<<<gather_grid, 256, 0, s>>>(m.folded.data(), m.t.decision_delay, P, v);
    PAQ_CUDA_CHECK_LAUNCH();
    mark();
    m.det.detect_device(np * num_paths, m.acq, m.track, s);
    mark();

    // Only bits, per-packet estimates and the packet starts come back (pinned, asynchronous).
    const auto back = [&](void* dst, const void* src, std::size_t bytes) {
        PAQ_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, s));
    };
    back(m.count_host.data(), found.count, sizeof(int));
    back(m.truncated_host.data(), found.truncated, sizeof(unsigned long long));
    back(m.starts_host.data(), found.starts, np * sizeof(long long));
    back(m.metrics_host.data(), found.metrics, np * sizeof(float));
    back(m.bits_host.data(), m.det.device_bits(), np * num_paths * dsp::packed_data_bytes);
    back(m.stats_host.data(), m.det.device_stats(), np * num_paths * sizeof(dsp::path_stats));
    back(m.h_host.data(), d.channels, np * L_ch * sizeof(cf32));
    back(m.cfo_host.data(), d.cfo, np * sizeof(double));
    back(m.sigma2_host.data(), d.sigma2, np * sizeof(double));
    back(m.cond_host.data(), m.cond.data(), np * sizeof(double));
    back(m.nonfinite_host.data(), d.nonfinite, np * sizeof(unsigned));
    back(m.support_host.data(), d.support, np * sizeof(int));
    back(m.ok_zf_host.data(), m.ok_zf.data(), np);
    back(m.ok_mmse_host.data(), m.ok_mmse.data(), np);
    mark();
    m.events_recorded = next_ev;
}

double chain_part::collect(std::uint64_t first_sample, dsp::batch_output& out, std::size_t& filled)
{
    auto& m = *this;
    PAQ_CUDA_CHECK(cudaStreamSynchronize(m.fe.device().stream));
    using clock = std::chrono::steady_clock;
    const auto t_records = clock::now();
    const int count = m.count_host[0];
    if (count < 0 || static_cast<std::size_t>(count) > m.max_packets) throw std::runtime_error("cuda backend: more packets than buffers");
    const std::size_t found_np = static_cast<std::size_t>(count);
    out.truncated_packets += m.truncated_host[0];
    const std::size_t first_packet = filled;
    if (first_packet + found_np > out.packets.size()) throw std::logic_error("cuda backend: output smaller than the parts' packets");
    filled += found_np;
    constexpr std::size_t packet_bytes = num_paths * dsp::packed_data_bytes;
    std::uint64_t nonfinite_total = 0;
    // Packets in parallel: the records (received power of each channel estimate) and the
    // copy of the bits out of the pinned buffer were 7 ms on one core for a full batch.
#pragma omp parallel for schedule(static) reduction(+ : nonfinite_total)
    for (std::ptrdiff_t pi = 0; pi < static_cast<std::ptrdiff_t>(found_np); ++pi) {
        const auto p = static_cast<std::size_t>(pi);
        std::memcpy(out.bits.data() + (first_packet + p) * packet_bytes, m.bits_host.data() + p * packet_bytes, packet_bytes);
        auto& rec = out.packets[first_packet + p];
        rec.start_sample = first_sample + static_cast<std::uint64_t>(m.starts_host[p]);
        rec.metric = m.metrics_host[p];
        rec.cfo_rad_per_sample = m.cfo_host[p];
        rec.sigma2 = m.sigma2_host[p];
        rec.nonfinite_samples = m.nonfinite_host[p];
        rec.channel_support = m.support_host[p];
        const auto& support = m.t.supports.at(static_cast<std::size_t>(rec.channel_support));
        rec.channel_first_tap = support.first_tap;
        rec.channel_last_tap = support.last_tap;
        rec.zf_condition = m.cond_host[p];
        double energy = 0.0;
        for (int a = 0; a < L_ch; ++a) {
            const cf32 v32 = m.h_host[p * L_ch + static_cast<std::size_t>(a)];
            rec.h[static_cast<std::size_t>(a)] = cf64(v32.real(), v32.imag());
            energy += std::norm(rec.h[static_cast<std::size_t>(a)]);
        }
        rec.channel_energy = energy;
        rec.ebn0_db = 10.0 * std::log10(std::max(dsp::received_power(rec.h.data(), L_ch), 1e-300) / std::max(rec.sigma2, 1e-300));
        rec.flags = rec.nonfinite_samples ? dsp::flag_nonfinite_input : 0u;
        if (std::abs(rec.cfo_rad_per_sample) > 0.9 * std::numbers::pi / 32.0) rec.flags |= dsp::flag_cfo_near_limit;
        if (rec.ebn0_db < 3.0) rec.flags |= dsp::flag_low_snr;
        if (!(rec.zf_condition <= 1e6)) rec.flags |= dsp::flag_ill_conditioned;
        if (!m.ok_zf_host[p] || !m.ok_mmse_host[p]) rec.flags |= dsp::flag_zf_regularized;
        for (int path = 0; path < num_paths; ++path) rec.paths[static_cast<std::size_t>(path)] = m.stats_host[p * num_paths + static_cast<std::size_t>(path)];
        nonfinite_total += rec.nonfinite_samples;
    }
    out.nonfinite_samples += nonfinite_total;
    return std::chrono::duration<double, std::milli>(clock::now() - t_records).count();
}

}  // namespace paq::gpu
