#include "gpu/detector.hpp"

#include "dsp/waveform.hpp"
#include "gpu/resources.cuh"

#include <cuComplex.h>

#include <stdexcept>

namespace paq::gpu {

namespace {

constexpr int nk = static_cast<int>(waveform::known_bits);
constexpr int nbits = static_cast<int>(waveform::packet_bits);
constexpr int data_bytes = static_cast<int>(dsp::packed_data_bytes);

__constant__ unsigned char c_known[nk];
__constant__ double c_lambdas[dsp::smoother::num_lambdas];  ///< dsp::smoother::lambdas

/// The packet's statistics from the data decisions' |statistic| sums, as dsp/detector.cpp's
/// decision_stats: BEP = Q(mean / std).
__device__ inline dsp::path_stats decision_stats(double sum, double sum2, unsigned known_errors)
{
    const double n = static_cast<double>(waveform::data_bits);
    const double mean = sum / n;
    const double var = fmax(sum2 / n - mean * mean, 1e-300);
    dsp::path_stats st;
    st.known_bit_errors = static_cast<std::uint16_t>(known_errors);
    st.bep_estimate = static_cast<float>(0.5 * erfc(mean / sqrt(2.0 * var)));
    return st;
}

/// Mirrors dsp::detect_packet step for step (see dsp/detector.cpp for the why). The loop over
/// the bits is a chain (each step's rotation comes from the last), but its loads are not:
/// they are issued a chunk ahead into registers, so the chain does not wait on memory.
constexpr int prefetch = 16;
static_assert(nbits % prefetch == 0 && nk % prefetch == 0 && prefetch % 2 == 0);

__global__ void detect_kernel(const cuFloatComplex* __restrict__ v, int streams, dsp::pll_gains acq, dsp::pll_gains track,
                              unsigned char* __restrict__ bits, dsp::path_stats* __restrict__ stats, float* __restrict__ theta_out)
{
    const int s = blockIdx.x * blockDim.x + threadIdx.x;
    if (s >= streams) return;
    // The stream's samples are contiguous: a chunk of 16 is 128 bytes, loaded 16 bytes (two
    // samples) at a time.
    const float4* row = reinterpret_cast<const float4*>(v + static_cast<std::size_t>(s) * nbits);
    auto load_chunk = [&](int k0, cuFloatComplex (&dst)[prefetch]) {
#pragma unroll
        for (int j = 0; j < prefetch / 2; ++j) {
            const float4 q = row[k0 / 2 + j];
            dst[2 * j] = make_cuFloatComplex(q.x, q.y);
            dst[2 * j + 1] = make_cuFloatComplex(q.z, q.w);
        }
    };
    cuFloatComplex cur[prefetch], next[prefetch];
    double amp = 0.0;
    for (int k0 = 0; k0 < nk; k0 += prefetch) {
        load_chunk(k0, cur);
#pragma unroll
        for (int j = 0; j < prefetch; ++j) amp += cuCabs(make_cuDoubleComplex(cur[j].x, cur[j].y));
    }
    amp /= nk;
    const double e_scale = amp > 0.0 ? 1.0 / amp : 0.0;
    unsigned char* out = bits + static_cast<std::size_t>(s) * data_bytes;
    double theta = 0.0, nu = 0.0;
    cuDoubleComplex rot = make_cuDoubleComplex(1.0, 0.0), y_prev = make_cuDoubleComplex(0.0, 0.0);
    double a_prev = 0.0, sum = 0.0, sum2 = 0.0;
    unsigned known_errors = 0;
    unsigned char byte = 0;
    load_chunk(0, cur);
    for (int k0 = 0; k0 < nbits; k0 += prefetch) {
        if (k0 + prefetch < nbits) load_chunk(k0 + prefetch, next);
#pragma unroll
        for (int j = 0; j < prefetch; ++j) {
            const int k = k0 + j;
            const cuDoubleComplex y = cuCmul(make_cuDoubleComplex(cur[j].x, cur[j].y), rot);
            const bool even = (k % 2) == 0;
            // The phase both bits of the pair are derotated by (sxs_trace::theta), for the trellis.
            if (even && theta_out) theta_out[static_cast<std::size_t>(k / 2) * static_cast<std::size_t>(streams) + s] = static_cast<float>(theta);
            const double comp = even ? y.x : y.y;
            const double dec = comp >= 0.0 ? 1.0 : -1.0;
            double a;
            if (k < nk) {
                a = c_known[k] ? 1.0 : -1.0;
                if (dec != a) ++known_errors;
            } else {
                a = dec;
                const int i = k - nk;
                if (dec > 0) byte = static_cast<unsigned char>(byte | (0x80u >> (i % 8)));
                if (i % 8 == 7) {
                    out[i / 8] = byte;
                    byte = 0;
                }
                const double m = fabs(comp);
                sum += m;
                sum2 += m * m;
            }
            if (!even) {
                const dsp::pll_gains& g = k < nk ? acq : track;
                const double e = (a_prev * y_prev.y - a * y.x) * e_scale;
                nu += g.k2 * e;
                theta += g.k1 * e + nu;
                // std::remainder(theta, 2 pi) as on the CPU, without the library's general
                // division loop: the step is small, so theta is at most a few steps past
                // +-pi, where subtracting 2 pi is exact (Sterbenz) and rounds as remainder's
                // nearest multiple does (a tie at exactly +-pi stays).
                constexpr double two_pi = 2.0 * 3.14159265358979323846;
                while (theta > 0.5 * two_pi) theta -= two_pi;
                while (theta < -0.5 * two_pi) theta += two_pi;
                double sn, cs;
                sincos(-theta, &sn, &cs);
                rot = make_cuDoubleComplex(cs, sn);
            }
            y_prev = y;
            a_prev = a;
        }
#pragma unroll
        for (int j = 0; j < prefetch; ++j) cur[j] = next[j];
    }
    stats[s] = decision_stats(sum, sum2, known_errors);
}

/// The decision samples transposed, vt[k * streams + s] = v[s * 6336 + k]: the smoother reads
/// them many times, bit by bit, and the threads of a warp then read adjacent words. Tiles of
/// 32 x 32 through shared memory.
__global__ void transpose_kernel(const float2* __restrict__ v, int streams, float2* __restrict__ vt)
{
    __shared__ float2 tile[32][33];
    const int k0 = blockIdx.x * 32, s0 = blockIdx.y * 32;
    for (int r = threadIdx.y; r < 32; r += blockDim.y) {
        const int s = s0 + r, k = k0 + threadIdx.x;
        if (s < streams && k < nbits) tile[r][threadIdx.x] = v[static_cast<std::size_t>(s) * nbits + k];
    }
    __syncthreads();
    for (int r = threadIdx.y; r < 32; r += blockDim.y) {
        const int k = k0 + r, s = s0 + threadIdx.x;
        if (s < streams && k < nbits) vt[static_cast<std::size_t>(k) * streams + s] = tile[threadIdx.x][r];
    }
}

/// The smoother's per-stream arrays, element i of stream s at i * streams + s.
struct smoother_arrays {
    const float2* vt;
    float* theta;
    float* z;
    float* f;
    float* pf;
};

/// Pairs a smoother pass loads ahead (16 decision samples and 8 phases per thread), so that
/// its loads are in flight together rather than one after another.
constexpr int pair_chunk = 8;
static_assert((nbits / 2) % pair_chunk == 0 && nk % (2 * pair_chunk) == 0);

/// dsp::detect_packet_smoothed for every stream, step for step, one thread per stream (see
/// dsp/detector.hpp for the algorithm): the same double arithmetic in the same order, and the
/// same values rounded to float where the CPU keeps them as float. Each pass runs over the
/// pairs in chunks whose loads are issued first. Decisions are not stored: each pass that
/// needs them decides again at the same phase (the CPU's decisions, bit for bit). The
/// backward filter is not stored either: the phase of pair j needs the backward filter's
/// value at pair j + 2, so the backward step at pair j finishes pair j - 2.
__global__ void __launch_bounds__(64) detect_smoothed_kernel(smoother_arrays m, int streams, dsp::pll_gains acq, dsp::pll_gains boot,
                                                             unsigned char* __restrict__ bits, dsp::path_stats* __restrict__ stats)
{
    const int s = blockIdx.x * blockDim.x + threadIdx.x;
    if (s >= streams) return;
    const std::size_t S = static_cast<std::size_t>(streams);
    auto TH = [&](int j) -> float& { return m.theta[static_cast<std::size_t>(j) * S + s]; };
    auto Z = [&](int j) -> float& { return m.z[static_cast<std::size_t>(j) * S + s]; };
    auto F = [&](int j) -> float& { return m.f[static_cast<std::size_t>(j) * S + s]; };
    auto PF = [&](int j) -> float& { return m.pf[static_cast<std::size_t>(j) * S + s]; };
    // The chunk of pairs j0 .. j0 + 7: samples and phases loaded, the rotated samples out.
    float2 vv[2 * pair_chunk];
    float tt[pair_chunk];
    auto load = [&](int j0, bool phases) {
#pragma unroll
        for (int u = 0; u < 2 * pair_chunk; ++u) vv[u] = m.vt[static_cast<std::size_t>(2 * j0 + u) * S + s];
        if (phases) {
#pragma unroll
            for (int u = 0; u < pair_chunk; ++u) tt[u] = TH(j0 + u);
        }
    };
    auto rotate = [&](int u, double theta, cuDoubleComplex& y0, cuDoubleComplex& y1) {
        double sn, cs;
        sincos(-theta, &sn, &cs);
        const cuDoubleComplex rot = make_cuDoubleComplex(cs, sn);
        y0 = cuCmul(make_cuDoubleComplex(vv[2 * u].x, vv[2 * u].y), rot);
        y1 = cuCmul(make_cuDoubleComplex(vv[2 * u + 1].x, vv[2 * u + 1].y), rot);
    };
    constexpr int np2 = nbits / 2;

    // 1. The forward PLL, unwrapped.
    double amp = 0.0;
    for (int j0 = 0; j0 < nk / 2; j0 += pair_chunk) {
        load(j0, false);
#pragma unroll
        for (int u = 0; u < 2 * pair_chunk; ++u) amp += cuCabs(make_cuDoubleComplex(vv[u].x, vv[u].y));
    }
    amp /= nk;
    const double e_scale = amp > 0.0 ? 1.0 / amp : 0.0;
    unsigned known_errors = 0;
    {
        double theta = 0.0, nu = 0.0;
        for (int j0 = 0; j0 < np2; j0 += pair_chunk) {
            load(j0, false);
#pragma unroll
            for (int u = 0; u < pair_chunk; ++u) {
                const int j = j0 + u;
                TH(j) = static_cast<float>(theta);
                cuDoubleComplex y0, y1;
                rotate(u, theta, y0, y1);
                const double d0 = y0.x >= 0.0 ? 1.0 : -1.0, d1 = y1.y >= 0.0 ? 1.0 : -1.0;
                double a0 = d0, a1 = d1;
                if (2 * j + 1 < nk) {
                    a0 = c_known[2 * j] ? 1.0 : -1.0;
                    a1 = c_known[2 * j + 1] ? 1.0 : -1.0;
                    known_errors += (d0 != a0) + (d1 != a1);
                }
                const double e = (a0 * y0.y - a1 * y1.x) * e_scale;
                const dsp::pll_gains& g = 2 * j + 1 < nk ? acq : boot;
                nu += g.k2 * e;
                theta += g.k1 * e + nu;
            }
        }
    }

    for (int it = 0; it < dsp::smoother::iterations; ++it) {
        // a, b. Decisions and the signal model: bit k's terms once a_{k+1} is known.
        double own = 0.0, s11 = 0.0, s1y = 0.0;
        {
            cuDoubleComplex y_cur = make_cuDoubleComplex(0.0, 0.0);
            double a_prev = 0.0, a_cur = 0.0;
            for (int j0 = 0; j0 < np2; j0 += pair_chunk) {
                load(j0, true);
#pragma unroll
                for (int u = 0; u < pair_chunk; ++u) {
                    cuDoubleComplex y[2];
                    rotate(u, tt[u], y[0], y[1]);
#pragma unroll
                    for (int h = 0; h < 2; ++h) {
                        const int k = 2 * (j0 + u) + h;
                        const double a_next = k < nk ? (c_known[k] ? 1.0 : -1.0) : (((h == 0) ? y[h].x : y[h].y) >= 0.0 ? 1.0 : -1.0);
                        if (k >= 2) {
                            // Bit k - 1 (its own axis: real when k - 1 is even, i.e. h == 1).
                            const double m1 = a_prev + a_next;
                            own += ((h == 1) ? y_cur.x : y_cur.y) * a_cur;
                            s1y += ((h == 1) ? y_cur.y : y_cur.x) * m1;
                            s11 += m1 * m1;
                        }
                        a_prev = a_cur;
                        a_cur = a_next;
                        y_cur = y[h];
                    }
                }
            }
        }
        const double g0 = own / static_cast<double>(nbits - 2), c1 = s11 > 0.0 ? s1y / s11 : 0.0;
        // c. Observations; d. the line through them. The pair's bits and their neighbours'
        // decisions: a window of four, slid a pair at a time.
        double sj = 0.0, sz = 0.0, sjj = 0.0, sjz = 0.0;
        {
            double a_m1 = 0.0;  // a_{2j-1}
            for (int j0 = 0; j0 < np2; j0 += pair_chunk) {
                load(j0, true);
                // The first decision of the next chunk (a_{2 j0 + 16}), for the chunk's last pair.
                double a_after = 0.0;
                if (j0 + pair_chunk < np2) {
                    const int k = 2 * (j0 + pair_chunk);
                    if (k < nk) {
                        a_after = c_known[k] ? 1.0 : -1.0;
                    } else {
                        const float2 q = m.vt[static_cast<std::size_t>(k) * S + s];
                        double sn, cs;
                        sincos(-static_cast<double>(TH(j0 + pair_chunk)), &sn, &cs);
                        a_after = cuCmul(make_cuDoubleComplex(q.x, q.y), make_cuDoubleComplex(cs, sn)).x >= 0.0 ? 1.0 : -1.0;
                    }
                }
                cuDoubleComplex y[2 * pair_chunk];
                double a[2 * pair_chunk];
#pragma unroll
                for (int u = 0; u < pair_chunk; ++u) {
                    rotate(u, tt[u], y[2 * u], y[2 * u + 1]);
#pragma unroll
                    for (int h = 0; h < 2; ++h) {
                        const int k = 2 * (j0 + u) + h;
                        a[2 * u + h] = k < nk ? (c_known[k] ? 1.0 : -1.0) : (((h == 0) ? y[2 * u + h].x : y[2 * u + h].y) >= 0.0 ? 1.0 : -1.0);
                    }
                }
#pragma unroll
                for (int u = 0; u < pair_chunk; ++u) {
                    const int j = j0 + u;
                    double ar = 0.0, ai = 0.0;
#pragma unroll
                    for (int h = 0; h < 2; ++h) {
                        const int i = 2 * u + h;
                        const double left = i > 0 ? a[i - 1] : a_m1;
                        const double right = i + 1 < 2 * pair_chunk ? a[i + 1] : a_after;
                        const double m1 = left + right;
                        const double mr = (h == 0) ? g0 * a[i] : c1 * m1, mi = (h == 0) ? c1 * m1 : g0 * a[i];
                        // y conj(model)
                        ar += y[i].x * mr + y[i].y * mi;
                        ai += y[i].y * mr - y[i].x * mi;
                    }
                    const float zj = static_cast<float>(static_cast<double>(tt[u]) + atan2(ai, ar));
                    Z(j) = zj;
                    const double x = static_cast<double>(j), yz = zj;
                    sj += x;
                    sz += yz;
                    sjj += x * x;
                    sjz += x * yz;
                }
                a_m1 = a[2 * pair_chunk - 1];
            }
        }
        const double cnt = static_cast<double>(np2);
        const double slope = (cnt * sjz - sj * sz) / (cnt * sjj - sj * sj);
        const double icpt = (sz - slope * sj) / cnt;
        auto line = [&](int j) { return icpt + slope * static_cast<double>(j); };
        // e. lambda.
        constexpr int nl = dsp::smoother::num_lambdas;
        double gain[nl], xs[nl], pe[nl];
        const double z0 = static_cast<double>(Z(0)) - line(0);
#pragma unroll
        for (int l = 0; l < nl; ++l) {
            const double lam = c_lambdas[l];
            const double p = 0.5 * (lam + sqrt(lam * lam + 4.0 * lam));
            gain[l] = p / (p + 1.0);
            xs[l] = z0;
            pe[l] = 0.0;
        }
        for (int j0 = 0; j0 < np2; j0 += pair_chunk) {
            float zc[pair_chunk];
#pragma unroll
            for (int u = 0; u < pair_chunk; ++u) zc[u] = Z(j0 + u);
#pragma unroll
            for (int u = 0; u < pair_chunk; ++u) {
                if (j0 + u == 0) continue;
                const double y = static_cast<double>(zc[u]) - line(j0 + u);
#pragma unroll
                for (int l = 0; l < nl; ++l) {
                    const double inn = y - xs[l];
                    pe[l] += inn * inn;
                    xs[l] += gain[l] * inn;
                }
            }
        }
        int best = 0;
        double best_pe = pe[0];
#pragma unroll
        for (int l = 1; l < nl; ++l) {
            if (pe[l] < best_pe) {
                best_pe = pe[l];
                best = l;
            }
        }
        const double lam = c_lambdas[best];
        // f. Forward filter stored; backward filter finishing the pairs two behind it.
        {
            double xf = z0, p = 1.0;
            for (int j0 = 0; j0 < np2; j0 += pair_chunk) {
                float zc[pair_chunk];
#pragma unroll
                for (int u = 0; u < pair_chunk; ++u) zc[u] = Z(j0 + u);
#pragma unroll
                for (int u = 0; u < pair_chunk; ++u) {
                    const int j = j0 + u;
                    if (j > 0) {
                        const double pp = p + lam, k = pp / (pp + 1.0);
                        xf += k * ((static_cast<double>(zc[u]) - line(j)) - xf);
                        p = (1.0 - k) * pp;
                    }
                    F(j) = static_cast<float>(xf);
                    PF(j) = static_cast<float>(p);
                }
            }
        }
        constexpr int gap = dsp::smoother::exclusion + 1;
        static_assert(gap == 2, "the backward pass finishes the pair two before it");
        const double drift = gap * lam;
        auto finish = [&](int j, bool has_b, float bj, float pbj) {
            double num = 0.0, den = 0.0;
            if (j >= gap) {
                const double w = 1.0 / (static_cast<double>(PF(j - gap)) + drift);
                num += w * F(j - gap);
                den += w;
            }
            if (has_b) {
                const double w = 1.0 / (static_cast<double>(pbj) + drift);
                num += w * bj;
                den += w;
            }
            TH(j) = static_cast<float>(num / den + icpt + slope * static_cast<double>(j));  // the CPU's association
        };
        // Pairs np2 - 1 and np2 - 2 have no backward value from two pairs on.
        finish(np2 - 1, false, 0.0f, 0.0f);
        finish(np2 - 2, false, 0.0f, 0.0f);
        double xb = static_cast<double>(Z(np2 - 1)) - line(np2 - 1), p = 1.0;
        finish(np2 - 3, true, static_cast<float>(xb), 1.0f);
        for (int j1 = np2 - 1; j1 > 0; j1 -= pair_chunk) {
            // Pairs j1 - 1 down to j1 - 8 (the last chunk stops at pair 2).
            float zc[pair_chunk];
#pragma unroll
            for (int u = 0; u < pair_chunk; ++u) zc[u] = j1 - 1 - u >= 0 ? Z(j1 - 1 - u) : 0.0f;
#pragma unroll
            for (int u = 0; u < pair_chunk; ++u) {
                const int j = j1 - 1 - u;
                if (j < 2) break;
                const double pp = p + lam, k = pp / (pp + 1.0);
                xb += k * ((static_cast<double>(zc[u]) - line(j)) - xb);
                p = (1.0 - k) * pp;
                finish(j - 2, true, static_cast<float>(xb), static_cast<float>(p));
            }
        }
    }

    // 3. The data decisions.
    unsigned char* out = bits + static_cast<std::size_t>(s) * data_bytes;
    double sum = 0.0, sum2 = 0.0;
    for (int j0 = nk / 2; j0 < np2; j0 += pair_chunk) {
        load(j0, true);
        unsigned char byte[2] = {0, 0};
#pragma unroll
        for (int u = 0; u < pair_chunk; ++u) {
            cuDoubleComplex y0, y1;
            rotate(u, tt[u], y0, y1);
            const double c0 = y0.x, c1v = y1.y;
            const int i = 2 * u;  // bit within the chunk's 16 (the chunk starts on a byte)
            if (c0 >= 0.0) byte[i / 8] = static_cast<unsigned char>(byte[i / 8] | (0x80u >> (i % 8)));
            if (c1v >= 0.0) byte[i / 8] = static_cast<unsigned char>(byte[i / 8] | (0x80u >> ((i + 1) % 8)));
            sum += fabs(c0);
            sum2 += c0 * c0;
            sum += fabs(c1v);
            sum2 += c1v * c1v;
        }
        const int first_bit = 2 * j0 - nk;
        out[first_bit / 8] = byte[0];
        out[first_bit / 8 + 1] = byte[1];
    }
    stats[s] = decision_stats(sum, sum2, known_errors);
}

}  // namespace

struct stream_detector::impl {
    int device;
    std::size_t max_streams;
    stream st;
    device_buffer<cuFloatComplex> v;
    device_buffer<unsigned char> bits;
    device_buffer<dsp::path_stats> stats;
    bool smoother, keep_phase;
    // The smoother's per-stream arrays (empty without it): the transposed decision samples,
    // phase, observation, forward filter and its variance per pair. The phase is kept by the
    // PLL too when asked (keep_phase).
    device_buffer<float2> vt;
    device_buffer<float> theta, z, f, pf;

    impl(int dev, std::size_t ms, bool sm, bool kp)
        : device(select_device(dev)), max_streams(ms), v(ms * nbits), bits(ms * data_bytes), stats(ms), smoother(sm), keep_phase(kp),
          vt(sm ? ms * nbits : 0), theta(sm || kp ? ms * dsp::phase_pairs : 0), z(sm ? ms * dsp::phase_pairs : 0),
          f(sm ? ms * dsp::phase_pairs : 0), pf(sm ? ms * dsp::phase_pairs : 0)
    {
        const auto known = waveform::known_packet_bits();
        PAQ_CUDA_CHECK(cudaMemcpyToSymbol(c_known, known.data(), known.size()));
        PAQ_CUDA_CHECK(cudaMemcpyToSymbol(c_lambdas, dsp::smoother::lambdas, sizeof dsp::smoother::lambdas));
    }
};

stream_detector::stream_detector(int device_id, std::size_t max_streams, bool phase_smoother, bool keep_phase)
    : impl_(std::make_unique<impl>(device_id, max_streams, phase_smoother, keep_phase))
{
}

stream_detector::~stream_detector() = default;

cf32* stream_detector::device_input() noexcept { return reinterpret_cast<cf32*>(impl_->v.data()); }
std::uint8_t* stream_detector::device_bits() noexcept { return impl_->bits.data(); }
dsp::path_stats* stream_detector::device_stats() noexcept { return impl_->stats.data(); }
const float* stream_detector::device_theta() const noexcept { return impl_->theta.size() > 0 ? impl_->theta.data() : nullptr; }

void stream_detector::detect_device(std::size_t streams, const dsp::pll_gains& acq, const dsp::pll_gains& track,
                                    cuda_stream_t stream)
{
    auto& m = *impl_;
    if (streams > m.max_streams) throw std::invalid_argument("stream_detector: more streams than at Create");
    if (streams == 0) return;
    if (m.smoother) {
        const dim3 tgrid(static_cast<unsigned>((nbits + 31) / 32), static_cast<unsigned>((streams + 31) / 32));
        transpose_kernel<<<tgrid, dim3(32, 8), 0, stream>>>(reinterpret_cast<const float2*>(m.v.data()), static_cast<int>(streams),
                                                            m.vt.data());
        PAQ_CUDA_CHECK_LAUNCH();
        const smoother_arrays arr{m.vt.data(), m.theta.data(), m.z.data(), m.f.data(), m.pf.data()};
        detect_smoothed_kernel<<<static_cast<unsigned>((streams + 63) / 64), 64, 0, stream>>>(arr, static_cast<int>(streams), acq, track,
                                                                                             m.bits.data(), m.stats.data());
    } else {
        detect_kernel<<<static_cast<unsigned>((streams + 127) / 128), 128, 0, stream>>>(m.v.data(), static_cast<int>(streams), acq,
                                                                                       track, m.bits.data(), m.stats.data(),
                                                                                       m.keep_phase ? m.theta.data() : nullptr);
    }
    PAQ_CUDA_CHECK_LAUNCH();
}

void stream_detector::detect(std::span<const cf32> v, std::size_t streams, const dsp::pll_gains& acq,
                             const dsp::pll_gains& track, std::span<std::uint8_t> bits, std::span<dsp::path_stats> stats)
{
    auto& m = *impl_;
    if (streams > m.max_streams || v.size() != streams * nbits || bits.size() != streams * data_bytes || stats.size() != streams) {
        throw std::invalid_argument("stream_detector: sizes differ or exceed max_streams");
    }
    if (streams == 0) return;
    PAQ_CUDA_CHECK(cudaSetDevice(m.device));
    const auto s = m.st.get();
    PAQ_CUDA_CHECK(cudaMemcpyAsync(m.v.data(), v.data(), v.size() * sizeof(cf32), cudaMemcpyHostToDevice, s));
    detect_device(streams, acq, track, s);
    PAQ_CUDA_CHECK(cudaMemcpyAsync(bits.data(), m.bits.data(), bits.size(), cudaMemcpyDeviceToHost, s));
    PAQ_CUDA_CHECK(cudaMemcpyAsync(stats.data(), m.stats.data(), streams * sizeof(dsp::path_stats), cudaMemcpyDeviceToHost, s));
    m.st.synchronize();
}

}  // namespace paq::gpu
