#include "gpu/cuda_backend.hpp"

#include "dsp/batch.hpp"
#include "dsp/detector.hpp"
#include "dsp/equalizers.hpp"
#include "dsp/fft.hpp"
#include "dsp/preamble_detector.hpp"
#include "dsp/receiver_tables.hpp"
#include "dsp/soqpsk.hpp"
#include "gpu/detector.hpp"
#include "gpu/front_end.hpp"
#include "gpu/resources.cuh"
#include "gpu/solver.hpp"

#include <cuComplex.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numbers>
#include <stdexcept>

namespace paq::gpu {

namespace {

using namespace dsp::chain;
constexpr int n_fft = static_cast<int>(front_end::segment_stride);
constexpr int pre = static_cast<int>(dsp::packet_margin);
constexpr int l_pkt = static_cast<int>(waveform::L_pkt);
constexpr int n_bits = static_cast<int>(waveform::packet_bits);

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

/// out = R x C x H_NO for one path, C from: a spectrum (time-domain equalizers), the single
/// path (none), or the FDE formula on H.
__global__ void combine_kernel(int path, const cuFloatComplex* __restrict__ r, const cuFloatComplex* __restrict__ cspec,
                               const cuFloatComplex* __restrict__ hspec, const cuFloatComplex* __restrict__ hno,
                               const float* __restrict__ psi, const double* __restrict__ sigma2,
                               const double* __restrict__ tau, const cuDoubleComplex* __restrict__ gain,
                               cuFloatComplex* __restrict__ out)
{
    const int p = blockIdx.y;
    const int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= n_fft) return;
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
    out[i] = cuCmulf(cuCmulf(r[i], c), hno[k]);
}

/// Decision samples of one path into the detector's bit-major input, scaled by 1/N.
__global__ void gather_decisions_kernel(const cuFloatComplex* __restrict__ y, int path, int delay, int np,
                                        cuFloatComplex* __restrict__ v)
{
    const int p = blockIdx.y;
    const int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= n_bits) return;
    const cuFloatComplex s = y[static_cast<std::size_t>(p) * n_fft + pre + 2 * k + delay];
    const float inv = 1.0f / n_fft;
    v[static_cast<std::size_t>(k) * (np * num_paths) + p * num_paths + path] = make_cuFloatComplex(s.x * inv, s.y * inv);
}

__global__ void mul_kernel(cuFloatComplex* __restrict__ a, const cuFloatComplex* __restrict__ b, bool conj_b, std::size_t n)
{
    const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
    if (i >= n) return;
    a[i] = cuCmulf(a[i], conj_b ? cuConjf(b[i]) : b[i]);
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

/// c(l) -= mu / (N L_pkt) b(l mod N), l = -L1 .. L2.
__global__ void cma_update_kernel(const cuFloatComplex* __restrict__ b, float scale, cuFloatComplex* __restrict__ c)
{
    const int p = blockIdx.x;
    for (int i = threadIdx.x; i < L_eq; i += blockDim.x) {
        const int l = i - L1;
        const cuFloatComplex g = b[static_cast<std::size_t>(p) * n_fft + (l + n_fft) % n_fft];
        cuFloatComplex& t = c[static_cast<std::size_t>(p) * L_eq + i];
        t = make_cuFloatComplex(t.x - scale * g.x, t.y - scale * g.y);
    }
}

}  // namespace

struct cuda_backend::impl {
    dsp::receiver_config cfg;
    const dsp::receiver_tables& t;
    int device;
    std::size_t max_window, max_packets;
    front_end fe;
    stream_detector det;
    cufft_plan plan;
    device_buffer<cuFloatComplex> work1, work2, hspec, hno, c_zf, c_mmse, c_cma;
    device_buffer<float> psi;
    device_buffer<double> zero_load, load, tau, cond;
    device_buffer<cuDoubleComplex> gain;
    device_buffer<std::uint8_t> ok_zf, ok_mmse;
    dsp::pll_gains acq, track;
    std::vector<float> metric_f;
    std::vector<double> metric_d;
    pinned_buffer<std::uint8_t> bits_host;
    pinned_buffer<dsp::path_stats> stats_host;
    pinned_buffer<cf32> h_host;
    pinned_buffer<double> cfo_host, sigma2_host, cond_host;
    pinned_buffer<unsigned> nonfinite_host;
    pinned_buffer<std::uint8_t> ok_zf_host, ok_mmse_host;
    event ev0, ev1;
    cuda_backend::timing last;

    impl(const dsp::receiver_config& c, int dev)
        : cfg(c),
          t(dsp::get_receiver_tables(c.fft_size)),
          device(select_device(dev)),
          max_window(c.batch_samples + dsp::batch_guard_before + dsp::batch_guard_after),
          max_packets(max_window / waveform::L_pkt + 2),
          fe(dev, max_window, max_packets),
          det(dev, max_packets * num_paths),
          plan(n_fft, static_cast<int>(max_packets), fe.device().stream),
          work1(max_packets * n_fft),
          work2(max_packets * n_fft),
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
          acq(dsp::make_pll_gains(c.pll_acquisition_bn_t, c.pll_damping)),
          track(dsp::make_pll_gains(c.pll_bn_t, c.pll_damping)),
          bits_host(max_packets * num_paths * dsp::packed_data_bytes),
          stats_host(max_packets * num_paths),
          h_host(max_packets * L_ch),
          cfo_host(max_packets),
          sigma2_host(max_packets),
          cond_host(max_packets),
          nonfinite_host(max_packets),
          ok_zf_host(max_packets),
          ok_mmse_host(max_packets)
    {
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
        metric_f.resize(max_window);
        metric_d.resize(max_window);
    }

    /// Spectrum of per-packet taps (count, first index) into dst, all max_packets slots.
    void taps_spectrum(const cuFloatComplex* taps, int count, int first, int np, cuFloatComplex* dst, cudaStream_t s)
    {
        PAQ_CUDA_CHECK(cudaMemsetAsync(dst, 0, static_cast<std::size_t>(np) * n_fft * sizeof(cuFloatComplex), s));
        place_taps_kernel<<<np, 128, 0, s>>>(taps, count, first, dst);
        PAQ_CUDA_CHECK_LAUNCH();
        plan.forward(dst, dst);
    }
};

cuda_backend::cuda_backend(const dsp::receiver_config& cfg, int device_id)
{
    const auto errors = cfg.validate();
    if (!errors.empty()) {
        std::string msg = "invalid receiver configuration:";
        for (const auto& e : errors) msg += "\n  " + e;
        throw std::invalid_argument(msg);
    }
    if (cfg.fft_size != front_end::segment_stride) throw std::invalid_argument("cuda backend: fft_size must be 16384");
    impl_ = std::make_unique<impl>(cfg, device_id);
}

cuda_backend::~cuda_backend() = default;

cuda_backend::timing cuda_backend::last_timing() const noexcept { return impl_->last; }

dsp::batch_output cuda_backend::process(const dsp::sample_batch& batch)
{
    auto& m = *impl_;
    dsp::batch_output out;
    out.batch_index = batch.index;
    const std::size_t len = batch.samples.size();
    if (len < dsp::detector_span) return out;
    if (len > m.max_window) throw std::invalid_argument("cuda backend: batch window larger than configured");
    PAQ_CUDA_CHECK(cudaSetDevice(m.device));

    using clock = std::chrono::steady_clock;
    const auto ms_since = [](clock::time_point t) { return std::chrono::duration<double, std::milli>(clock::now() - t).count(); };
    m.last = {};
    // Metric on the device; packet location on the host (known gap, see the header).
    auto t_phase = clock::now();
    const std::size_t n_metric = len - dsp::detector_span + 1;
    m.fe.preamble_metric(batch.samples, std::span<float>(m.metric_f.data(), n_metric));
    m.last.metric_ms = ms_since(t_phase);
    t_phase = clock::now();
    std::copy_n(m.metric_f.begin(), n_metric, m.metric_d.begin());
    const auto found = dsp::locate_packets(batch, std::span<const double>(m.metric_d.data(), n_metric), m.cfg.detection_threshold,
                                           m.t.template_offset);
    m.last.locate_ms = ms_since(t_phase);
    out.truncated_packets = found.truncated;
    const std::size_t np = found.starts.size();
    if (np == 0) return out;
    if (np > m.max_packets) throw std::runtime_error("cuda backend: more packets than buffers");
    const int P = static_cast<int>(np);

    const auto d = m.fe.device();
    const cudaStream_t s = d.stream;
    m.ev0.record(s);
    m.fe.estimate_device(found.starts);
    auto* seg = reinterpret_cast<cuFloatComplex*>(d.segments);
    auto* h = reinterpret_cast<cuFloatComplex*>(d.channels);

    // ZF and MMSE (Levinson, double), the unequalized path's single-path fit.
    mmse_load_kernel<<<(P + 127) / 128, 128, 0, s>>>(d.sigma2, m.load.data(), P);
    PAQ_CUDA_CHECK_LAUNCH();
    levinson_solver::solve_device(d.channels, m.zero_load.data(), reinterpret_cast<cf32*>(m.c_zf.data()), m.ok_zf.data(), np, s);
    levinson_solver::solve_device(d.channels, m.load.data(), reinterpret_cast<cf32*>(m.c_mmse.data()), m.ok_mmse.data(), np, s);
    single_path_kernel<<<P, 128, 0, s>>>(h, m.tau.data(), m.gain.data());
    PAQ_CUDA_CHECK_LAUNCH();

    // R = FFT of each segment (in place), H = FFT of each channel estimate.
    m.plan.forward(seg, seg);
    m.taps_spectrum(h, L_ch, -N1, P, m.hspec.data(), s);
    condition_kernel<<<P, 256, 0, s>>>(m.hspec.data(), m.cond.data());
    PAQ_CUDA_CHECK_LAUNCH();

    // CMA from MMSE.
    PAQ_CUDA_CHECK(cudaMemcpyAsync(m.c_cma.data(), m.c_mmse.data(), np * L_eq * sizeof(cuFloatComplex), cudaMemcpyDeviceToDevice, s));
    const std::size_t n_all = np * static_cast<std::size_t>(n_fft);
    const unsigned all_blocks = static_cast<unsigned>((n_all + 255) / 256);
    const dim3 per_bin((n_fft + 255) / 256, static_cast<unsigned>(P));
    const float cma_scale = static_cast<float>(m.cfg.cma_mu / (static_cast<double>(n_fft) * l_pkt));
    for (int it = 0; it < m.cfg.cma_iterations; ++it) {
        m.taps_spectrum(m.c_cma.data(), L_eq, -L1, P, m.work1.data(), s);
        mul_kernel<<<all_blocks, 256, 0, s>>>(m.work1.data(), seg, false, n_all);
        PAQ_CUDA_CHECK_LAUNCH();
        m.plan.inverse(m.work1.data(), m.work1.data());
        cma_z_kernel<<<per_bin, 256, 0, s>>>(m.work1.data(), m.work2.data());
        PAQ_CUDA_CHECK_LAUNCH();
        m.plan.forward(m.work2.data(), m.work2.data());
        mul_kernel<<<all_blocks, 256, 0, s>>>(m.work2.data(), seg, true, n_all);
        PAQ_CUDA_CHECK_LAUNCH();
        m.plan.inverse(m.work2.data(), m.work2.data());
        cma_update_kernel<<<P, 192, 0, s>>>(m.work2.data(), cma_scale, m.c_cma.data());
        PAQ_CUDA_CHECK_LAUNCH();
    }

    // Six paths: filter spectrum, x R x H_NO, IFFT, decision samples.
    auto* v = reinterpret_cast<cuFloatComplex*>(m.det.device_input());
    const dim3 per_bit((n_bits + 255) / 256, static_cast<unsigned>(P));
    for (int path = 0; path < num_paths; ++path) {
        const cuFloatComplex* taps = path == 1 ? m.c_zf.data() : path == 2 ? m.c_mmse.data() : path == 3 ? m.c_cma.data() : nullptr;
        if (taps) m.taps_spectrum(taps, L_eq, -L1, P, m.work2.data(), s);
        combine_kernel<<<per_bin, 256, 0, s>>>(path, seg, m.work2.data(), m.hspec.data(), m.hno.data(), m.psi.data(), d.sigma2,
                                                m.tau.data(), m.gain.data(), m.work1.data());
        PAQ_CUDA_CHECK_LAUNCH();
        m.plan.inverse(m.work1.data(), m.work1.data());
        gather_decisions_kernel<<<per_bit, 256, 0, s>>>(m.work1.data(), path, m.t.decision_delay, P, v);
        PAQ_CUDA_CHECK_LAUNCH();
    }
    m.det.detect_device(np * num_paths, m.acq, m.track, s);
    m.ev1.record(s);
    t_phase = clock::now();

    // Only bits and per-packet estimates come back.
    const std::size_t nbytes = np * num_paths * dsp::packed_data_bytes;
    PAQ_CUDA_CHECK(cudaMemcpyAsync(m.bits_host.data(), m.det.device_bits(), nbytes, cudaMemcpyDeviceToHost, s));
    PAQ_CUDA_CHECK(cudaMemcpyAsync(m.stats_host.data(), m.det.device_stats(), np * num_paths * sizeof(dsp::path_stats), cudaMemcpyDeviceToHost, s));
    PAQ_CUDA_CHECK(cudaMemcpyAsync(m.h_host.data(), d.channels, np * L_ch * sizeof(cf32), cudaMemcpyDeviceToHost, s));
    PAQ_CUDA_CHECK(cudaMemcpyAsync(m.cfo_host.data(), d.cfo, np * sizeof(double), cudaMemcpyDeviceToHost, s));
    PAQ_CUDA_CHECK(cudaMemcpyAsync(m.sigma2_host.data(), d.sigma2, np * sizeof(double), cudaMemcpyDeviceToHost, s));
    PAQ_CUDA_CHECK(cudaMemcpyAsync(m.cond_host.data(), m.cond.data(), np * sizeof(double), cudaMemcpyDeviceToHost, s));
    PAQ_CUDA_CHECK(cudaMemcpyAsync(m.nonfinite_host.data(), d.nonfinite, np * sizeof(unsigned), cudaMemcpyDeviceToHost, s));
    PAQ_CUDA_CHECK(cudaMemcpyAsync(m.ok_zf_host.data(), m.ok_zf.data(), np, cudaMemcpyDeviceToHost, s));
    PAQ_CUDA_CHECK(cudaMemcpyAsync(m.ok_mmse_host.data(), m.ok_mmse.data(), np, cudaMemcpyDeviceToHost, s));
    PAQ_CUDA_CHECK(cudaStreamSynchronize(s));

    out.packets.resize(np);
    out.bits.assign(m.bits_host.data(), m.bits_host.data() + nbytes);
    for (std::size_t p = 0; p < np; ++p) {
        auto& rec = out.packets[p];
        rec.start_sample = batch.first_sample + static_cast<std::uint64_t>(found.starts[p]);
        rec.metric = found.metrics[p];
        rec.cfo_rad_per_sample = m.cfo_host[p];
        rec.sigma2 = m.sigma2_host[p];
        rec.nonfinite_samples = m.nonfinite_host[p];
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
        out.nonfinite_samples += rec.nonfinite_samples;
    }
    m.last.device_ms = m.ev1.elapsed_ms_since(m.ev0);
    m.last.copy_back_ms = ms_since(t_phase);
    return out;
}

}  // namespace paq::gpu
