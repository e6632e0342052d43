#include "gpu/equalizers.hpp"

#include "gpu/channel_terms.cuh"
#include "gpu/complex64.cuh"
#include "gpu/resources.cuh"

#include <cuComplex.h>

#include <stdexcept>
#include <string>

namespace paq::gpu {

namespace {

constexpr int n_eq = dsp::chain::L_eq;   // 186
constexpr int n_ch = dsp::chain::L_ch;   // 38
constexpr int n1 = dsp::chain::N1;
constexpr int l1 = dsp::chain::L1;
constexpr int warps_per_block = 4;

/// t(k) = sum_n h(n) h*(n - k), k = 0 .. taps - 1, of the warp's `taps` values h (t(0) =
/// sum |h(n)|^2 exactly real), by the warp's lanes; the warp synchronized after.
template <int taps>
__device__ __forceinline__ void autocorrelation(const z64* h, z64* t, int lane)
{
    for (int k = lane; k < taps; k += 32) {
        z64 s{0.0, 0.0};
        for (int n = k; n < taps; ++n) s = s + h[n] * conj(h[n - k]);
        if (k == 0) s.im = 0.0;
        t[k] = s;
    }
    __syncwarp();
}

/// One batch of systems for levinson_kernel: the loads, the taps out, the success flags.
struct levinson_job {
    const double* load;
    cuFloatComplex* c;
    unsigned char* ok;
};
struct levinson_jobs {
    levinson_job job[2];  ///< blockIdx.y picks one (ZF and MMSE share a launch)
};

/// The Levinson recursion of one warp's system, in double: T c = y, T[i][j] = t(i - j) the
/// Hermitian Toeplitz matrix of order 186 of t(k), k = 0 .. taps - 1 (zero beyond; t(-k) =
/// conj(t(k)), t(0) real), y(l) = conj(h(-l)), l = -L1 .. L2, for a channel h of `taps` taps
/// h(first) .. h(first + taps - 1) at h[0 .. taps - 1]. t and h are the warp's, read only;
/// f and x (186 entries each) its working vectors. Stores the taps (zero where the recursion
/// breaks down) at c_out[0 .. 185] and the success flag at *ok_out.
///
/// Forward f (T_n f = e_1) and solution x (T_n x = y_0..n-1). T_n being Hermitian Toeplitz,
/// the backward vector (T_n b = e_n) is f reversed and conjugated, b(i) = conj(f(n - 1 - i)),
/// so it is not kept: its error is conj(ef), the denominator 1 - |ef|^2 is real, and a step
/// updates one vector, not two (the kernel before kept b and took 318 us a part of 779
/// packets on the H100, limited by its FP64 work and warp shuffles).
template <int taps, int first>
__device__ __forceinline__ void levinson_recursion(const z64* t, const z64* h, z64* f, z64* x, int lane,
                                                   cuFloatComplex* __restrict__ c_out, unsigned char* __restrict__ ok_out)
{
    static_assert(taps >= 1 && taps <= n_eq, "the channel must be shorter than the equalizer");
    auto tk = [&](int k) -> z64 {  // t(k), k = 1 .. n_eq - 1
        return k < taps ? t[k] : z64{0.0, 0.0};
    };
    auto y = [&](int i) -> z64 {  // y(l) = conj(h(-l)), l = i - L1
        const int m = -(i - l1);
        return (m >= first && m < first + taps) ? conj(h[m - first]) : z64{0.0, 0.0};
    };
    bool good = t[0].re > 0.0;
    if (lane == 0) {
        const double inv0 = 1.0 / t[0].re;
        f[0] = {inv0, 0.0};
        const z64 y0 = y(0);
        x[0] = {y0.re * inv0, y0.im * inv0};
    }
    __syncwarp();
    constexpr int per_lane = (n_eq + 31) / 32;  // the indices each lane owns in a vector update
    for (int n = 1; n < n_eq && good; ++n) {
        // Errors of the extended vectors: the new last row against [f; 0] and against [x; 0].
        // Only |n - i| < taps contribute.
        z64 ef{0.0, 0.0}, ex{0.0, 0.0};
        const int i0 = n - taps + 1 > 0 ? n - taps + 1 : 0;
        for (int i = i0 + lane; i < n; i += 32) {
            const z64 ti = tk(n - i);
            ef = ef + ti * f[i];
            ex = ex + ti * x[i];
        }
        ef = warp_sum(ef);
        ex = warp_sum(ex);
        const double den = 1.0 - (ef.re * ef.re + ef.im * ef.im);
        good = isfinite(den) && den * den > 1e-300;
        if (!good) break;
        // f' = ([f;0] - ef [0;b]) / den, [0;b](i) = conj(f(n - i)); lanes own indices, the
        // old values read before any lane writes (one sync between).
        z64 nf[per_lane];
        const double inv_den = 1.0 / den;
#pragma unroll
        for (int c = 0; c < per_lane; ++c) {
            const int i = lane + 32 * c;
            if (i > n) continue;
            const z64 fi = i < n ? f[i] : z64{0.0, 0.0};
            const z64 bi = i > 0 ? conj(f[n - i]) : z64{0.0, 0.0};
            const z64 d = fi - ef * bi;
            nf[c] = {d.re * inv_den, d.im * inv_den};
        }
        __syncwarp();
#pragma unroll
        for (int c = 0; c < per_lane; ++c) {
            const int i = lane + 32 * c;
            if (i <= n) f[i] = nf[c];
        }
        __syncwarp();
        // x' = [x;0] + g b', b'(i) = conj(f'(n - i)).
        const z64 g = y(n) - ex;
        for (int i = lane; i <= n; i += 32) x[i] = (i < n ? x[i] : z64{0.0, 0.0}) + g * conj(f[n - i]);
        __syncwarp();
    }
    for (int i = lane; i < n_eq; i += 32) {
        const z64 v = good ? x[i] : z64{0.0, 0.0};
        c_out[i] = make_cuFloatComplex(static_cast<float>(v.re), static_cast<float>(v.im));
    }
    if (lane == 0) *ok_out = good ? 1 : 0;
}

/// One warp per system: t(k) = r_h(k) (+ load at k = 0), k = 0 .. 37, and the right side
/// conj(h(-l)) of the channel h(-N1) .. h(N2), solved by levinson_recursion.
__global__ void __launch_bounds__(32 * warps_per_block)
    levinson_kernel(const cuFloatComplex* __restrict__ h_all, levinson_jobs jobs, int packets)
{
    const double* __restrict__ load = jobs.job[blockIdx.y].load;
    cuFloatComplex* __restrict__ c_out = jobs.job[blockIdx.y].c;
    unsigned char* __restrict__ ok_out = jobs.job[blockIdx.y].ok;
    __shared__ z64 sh_f[warps_per_block][n_eq], sh_x[warps_per_block][n_eq];
    __shared__ z64 sh_t[warps_per_block][n_ch], sh_h[warps_per_block][n_ch];
    const int w = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int p = blockIdx.x * warps_per_block + w;
    if (p >= packets) return;  // whole warps exit together
    z64* t = sh_t[w];
    z64* h = sh_h[w];
    for (int i = lane; i < n_ch; i += 32) {
        const cuFloatComplex v = h_all[static_cast<std::size_t>(p) * n_ch + i];
        h[i] = {v.x, v.y};
    }
    __syncwarp();
    autocorrelation<n_ch>(h, t, lane);
    if (lane == 0) t[0].re += load[p];
    __syncwarp();
    levinson_recursion<n_ch, -n1>(t, h, sh_f[w], sh_x[w], lane, c_out + static_cast<std::size_t>(p) * n_eq, ok_out + p);
}

/// The combined channel of two receive channels: g(k), k = -37 .. 37, 75 taps; its
/// autocorrelation r_g(k), k = 0 .. 74, makes the Toeplitz matrix.
constexpr int g_half = n_ch - 1;
constexpr int n_g = 2 * g_half + 1;
constexpr int combined_warps_per_block = 4;
static_assert(combined_warps_per_block * (2 * n_eq + 2 * n_g) * sizeof(z64) <= 48 * 1024,
              "combined_zf_kernel's shared memory must fit the default static limit");

/// One warp per packet, dsp::solve_combined_zf: the two channels' 38 taps (staged in the
/// warp's f and x, free until the recursion starts), g(k) = w_1 r_11(k) + w_2 r_22(k) for
/// k = 0 .. 37 and g(-k) = conj(g(k)), t(k) = r_g(k) = sum_n g(n) g*(n - k) for k = 0 .. 74,
/// then levinson_recursion with the right side conj(g(-l)).
__global__ void __launch_bounds__(32 * combined_warps_per_block)
    combined_zf_kernel(const cuFloatComplex* __restrict__ h1_all, const cuFloatComplex* __restrict__ h2_all,
                       const double* __restrict__ sigma2_1, const double* __restrict__ sigma2_2,
                       cuFloatComplex* __restrict__ c_out, unsigned char* __restrict__ ok_out, int packets)
{
    __shared__ z64 sh_f[combined_warps_per_block][n_eq], sh_x[combined_warps_per_block][n_eq];
    __shared__ z64 sh_t[combined_warps_per_block][n_g], sh_g[combined_warps_per_block][n_g];
    const int w = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int p = blockIdx.x * combined_warps_per_block + w;
    if (p >= packets) return;  // whole warps exit together
    z64* f = sh_f[w];
    z64* x = sh_x[w];
    z64* t = sh_t[w];
    z64* g = sh_g[w];
    z64* h1 = f;
    z64* h2 = x;
    for (int i = lane; i < n_ch; i += 32) {
        const cuFloatComplex a = h1_all[static_cast<std::size_t>(p) * n_ch + i];
        const cuFloatComplex b = h2_all[static_cast<std::size_t>(p) * n_ch + i];
        h1[i] = {a.x, a.y};
        h2[i] = {b.x, b.y};
    }
    double w1 = 0.0, w2 = 0.0;
    (void)combining_weights(sigma2_1[p], sigma2_2[p], w1, w2);
    __syncwarp();
    // g(k) at g[g_half + k]; g(0) = sum_c w_c sum |h_c(n)|^2 exactly real.
    for (int k = lane; k <= g_half; k += 32) {
        z64 r1{0.0, 0.0}, r2{0.0, 0.0};
        for (int n = k; n < n_ch; ++n) {
            r1 = r1 + h1[n] * conj(h1[n - k]);
            r2 = r2 + h2[n] * conj(h2[n - k]);
        }
        z64 s = w1 * r1 + w2 * r2;
        if (k == 0) s.im = 0.0;
        g[g_half + k] = s;
        if (k > 0) g[g_half - k] = conj(s);
    }
    __syncwarp();
    autocorrelation<n_g>(g, t, lane);
    levinson_recursion<n_g, -g_half>(t, g, f, x, lane, c_out + static_cast<std::size_t>(p) * n_eq, ok_out + p);
}

/// levinson_kernel over np systems for each of the jobs' first `n_jobs` entries (1 or 2).
void launch_levinson(const cf32* h, const levinson_jobs& jobs, unsigned n_jobs, std::size_t np, cudaStream_t stream)
{
    if (np == 0) return;
    const unsigned blocks = static_cast<unsigned>((np + warps_per_block - 1) / warps_per_block);
    levinson_kernel<<<dim3(blocks, n_jobs), 32 * warps_per_block, 0, stream>>>(reinterpret_cast<const cuFloatComplex*>(h), jobs,
                                                                                static_cast<int>(np));
    PAQ_CUDA_CHECK_LAUNCH();
}

}  // namespace

struct levinson_solver::impl {
    int device;
    std::size_t max_packets;
    stream st;
    event t0, t1;
    device_buffer<cuFloatComplex> h, c;
    device_buffer<double> load;
    device_buffer<unsigned char> ok;
    float last_ms = 0.0f;
};

levinson_solver::levinson_solver(int device_id, std::size_t max_packets)
{
    impl_ = std::make_unique<impl>(impl{select_device(device_id), max_packets, stream{}, event{}, event{},
                                        device_buffer<cuFloatComplex>(max_packets * n_ch),
                                        device_buffer<cuFloatComplex>(max_packets * n_eq),
                                        device_buffer<double>(max_packets), device_buffer<unsigned char>(max_packets), 0.0f});
}

levinson_solver::~levinson_solver() = default;

void levinson_solver::solve_device(const cf32* h, const double* load, cf32* c, std::uint8_t* ok, std::size_t np,
                                   cuda_stream_t stream)
{
    levinson_jobs jobs{};
    jobs.job[0] = {load, reinterpret_cast<cuFloatComplex*>(c), ok};
    launch_levinson(h, jobs, 1, np, stream);
}

void levinson_solver::solve_device_pair(const cf32* h, const double* load_a, cf32* c_a, std::uint8_t* ok_a,
                                        const double* load_b, cf32* c_b, std::uint8_t* ok_b, std::size_t np,
                                        cuda_stream_t stream)
{
    levinson_jobs jobs{};
    jobs.job[0] = {load_a, reinterpret_cast<cuFloatComplex*>(c_a), ok_a};
    jobs.job[1] = {load_b, reinterpret_cast<cuFloatComplex*>(c_b), ok_b};
    launch_levinson(h, jobs, 2, np, stream);
}

float levinson_solver::last_kernel_ms() const noexcept { return impl_->last_ms; }

void levinson_solver::solve(std::span<const channel32> h, std::span<const double> diag_load, std::span<eq_taps32> c,
                            std::span<std::uint8_t> ok)
{
    auto& m = *impl_;
    const std::size_t np = h.size();
    if (np > m.max_packets || diag_load.size() != np || c.size() != np || ok.size() != np) {
        throw std::invalid_argument("levinson_solver: sizes differ or exceed max_packets");
    }
    if (np == 0) return;
    PAQ_CUDA_CHECK(cudaSetDevice(m.device));
    const auto s = m.st.get();
    PAQ_CUDA_CHECK(cudaMemcpyAsync(m.h.data(), h.data(), np * sizeof(channel32), cudaMemcpyHostToDevice, s));
    PAQ_CUDA_CHECK(cudaMemcpyAsync(m.load.data(), diag_load.data(), np * sizeof(double), cudaMemcpyHostToDevice, s));
    m.t0.record(s);
    solve_device(reinterpret_cast<const cf32*>(m.h.data()), m.load.data(), reinterpret_cast<cf32*>(m.c.data()), m.ok.data(), np, s);
    m.t1.record(s);
    PAQ_CUDA_CHECK(cudaMemcpyAsync(c.data(), m.c.data(), np * sizeof(eq_taps32), cudaMemcpyDeviceToHost, s));
    PAQ_CUDA_CHECK(cudaMemcpyAsync(ok.data(), m.ok.data(), np, cudaMemcpyDeviceToHost, s));
    m.st.synchronize();
    m.last_ms = m.t1.elapsed_ms_since(m.t0);
}

void combined_zf_device(const cf32* h1, const cf32* h2, const double* sigma2_1, const double* sigma2_2, cf32* c, std::uint8_t* ok,
                        std::size_t np, cuda_stream_t stream)
{
    if (np == 0) return;
    const unsigned blocks = static_cast<unsigned>((np + combined_warps_per_block - 1) / combined_warps_per_block);
    combined_zf_kernel<<<blocks, 32 * combined_warps_per_block, 0, stream>>>(
        reinterpret_cast<const cuFloatComplex*>(h1), reinterpret_cast<const cuFloatComplex*>(h2), sigma2_1, sigma2_2,
        reinterpret_cast<cuFloatComplex*>(c), ok, static_cast<int>(np));
    PAQ_CUDA_CHECK_LAUNCH();
}

std::vector<eq_taps32> combined_zf(std::span<const channel32> h1, std::span<const channel32> h2, std::span<const double> sigma2_1,
                                   std::span<const double> sigma2_2, std::span<std::uint8_t> ok, int device)
{
    const std::size_t np = h1.size();
    auto check = [np](const char* what, std::size_t n) {
        if (n != np) {
            throw std::invalid_argument(std::string("gpu combined_zf: ") + what + " holds " + std::to_string(n) +
                                        " entries, h1 " + std::to_string(np) + " packets");
        }
    };
    check("h2", h2.size());
    check("sigma2_1", sigma2_1.size());
    check("sigma2_2", sigma2_2.size());
    check("ok", ok.size());
    std::vector<eq_taps32> c(np);
    if (np == 0) return c;
    select_device(device);
    device_buffer<cf32> d_h1(np * n_ch), d_h2(np * n_ch), d_c(np * n_eq);
    device_buffer<double> d_s1(np), d_s2(np);
    device_buffer<std::uint8_t> d_ok(np);
    stream st;
    const auto s = st.get();
    PAQ_CUDA_CHECK(cudaMemcpyAsync(d_h1.data(), h1.data(), h1.size_bytes(), cudaMemcpyHostToDevice, s));
    PAQ_CUDA_CHECK(cudaMemcpyAsync(d_h2.data(), h2.data(), h2.size_bytes(), cudaMemcpyHostToDevice, s));
    PAQ_CUDA_CHECK(cudaMemcpyAsync(d_s1.data(), sigma2_1.data(), sigma2_1.size_bytes(), cudaMemcpyHostToDevice, s));
    PAQ_CUDA_CHECK(cudaMemcpyAsync(d_s2.data(), sigma2_2.data(), sigma2_2.size_bytes(), cudaMemcpyHostToDevice, s));
    combined_zf_device(d_h1.data(), d_h2.data(), d_s1.data(), d_s2.data(), d_c.data(), d_ok.data(), np, s);
    PAQ_CUDA_CHECK(cudaMemcpyAsync(c.data(), d_c.data(), np * sizeof(eq_taps32), cudaMemcpyDeviceToHost, s));
    PAQ_CUDA_CHECK(cudaMemcpyAsync(ok.data(), d_ok.data(), np, cudaMemcpyDeviceToHost, s));
    st.synchronize();
    return c;
}

}  // namespace paq::gpu
