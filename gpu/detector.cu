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
                              unsigned char* __restrict__ bits, dsp::path_stats* __restrict__ stats)
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

/// dsp::detect_packet_smoothed for every stream, step for step (one thread per stream; the
/// forward phases as floats in `phase`, pair j of stream s at j * streams + s, so that the
/// threads of a warp touch adjacent words).
__device__ inline double wrap_2pi(double x)
{
    constexpr double two_pi = 2.0 * 3.14159265358979323846;
    while (x > 0.5 * two_pi) x -= two_pi;
    while (x < -0.5 * two_pi) x += two_pi;
    return x;
}

__global__ void detect_smoothed_kernel(const cuFloatComplex* __restrict__ v, int streams, dsp::pll_gains acq, dsp::pll_gains track,
                                       float* __restrict__ phase, unsigned char* __restrict__ bits,
                                       dsp::path_stats* __restrict__ stats)
{
    const int s = blockIdx.x * blockDim.x + threadIdx.x;
    if (s >= streams) return;
    const cuFloatComplex* row = v + static_cast<std::size_t>(s) * nbits;
    double amp = 0.0;
    for (int k = 0; k < nk; ++k) amp += cuCabs(make_cuDoubleComplex(row[k].x, row[k].y));
    amp /= nk;
    const double e_scale = amp > 0.0 ? 1.0 / amp : 0.0;
    auto pair_error = [&](int j, double theta, unsigned* known_errors) {
        double sn, cs;
        sincos(-theta, &sn, &cs);
        const cuDoubleComplex rot = make_cuDoubleComplex(cs, sn);
        const cuDoubleComplex y0 = cuCmul(make_cuDoubleComplex(row[2 * j].x, row[2 * j].y), rot);
        const cuDoubleComplex y1 = cuCmul(make_cuDoubleComplex(row[2 * j + 1].x, row[2 * j + 1].y), rot);
        const double d0 = y0.x >= 0.0 ? 1.0 : -1.0, d1 = y1.y >= 0.0 ? 1.0 : -1.0;
        double a0 = d0, a1 = d1;
        if (2 * j + 1 < nk) {
            a0 = c_known[2 * j] ? 1.0 : -1.0;
            a1 = c_known[2 * j + 1] ? 1.0 : -1.0;
            if (known_errors) *known_errors += (d0 != a0) + (d1 != a1);
        }
        return (a0 * y0.y - a1 * y1.x) * e_scale;
    };
    constexpr int np2 = nbits / 2;
    double theta = 0.0, nu = 0.0;
    unsigned known_errors = 0;
    for (int j = 0; j < np2; ++j) {
        phase[static_cast<std::size_t>(j) * streams + s] = static_cast<float>(theta);
        const double e = pair_error(j, theta, &known_errors);
        const dsp::pll_gains& g = 2 * j + 1 < nk ? acq : track;
        nu += g.k2 * e;
        theta += g.k1 * e + nu;
        theta = wrap_2pi(theta);
    }
    unsigned char* out = bits + static_cast<std::size_t>(s) * data_bytes;
    for (int i = 0; i < data_bytes; ++i) out[i] = 0;
    double tb = theta, nb = -nu, sum = 0.0, sum2 = 0.0;
    for (int j = np2 - 1; j >= 0; --j) {
        if (2 * j >= nk) {
            const double tf = phase[static_cast<std::size_t>(j) * streams + s];
            const double ts = tf + 0.5 * wrap_2pi(tb - tf);
            double sn, cs;
            sincos(-ts, &sn, &cs);
            const cuDoubleComplex rot = make_cuDoubleComplex(cs, sn);
            const double c0 = cuCmul(make_cuDoubleComplex(row[2 * j].x, row[2 * j].y), rot).x;
            const double c1 = cuCmul(make_cuDoubleComplex(row[2 * j + 1].x, row[2 * j + 1].y), rot).y;
            const int i = 2 * j - nk;
            unsigned char byte = out[i / 8];
            if (c0 >= 0.0) byte = static_cast<unsigned char>(byte | (0x80u >> (i % 8)));
            if (c1 >= 0.0) byte = static_cast<unsigned char>(byte | (0x80u >> ((i + 1) % 8)));
            out[i / 8] = byte;  // i is even: both bits in one byte
            sum += fabs(c0) + fabs(c1);
            sum2 += c0 * c0 + c1 * c1;
        }
        const double e = pair_error(j, tb, nullptr);
        const dsp::pll_gains& g = 2 * j + 1 < nk ? acq : track;
        nb += g.k2 * e;
        tb += g.k1 * e + nb;
        tb = wrap_2pi(tb);
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
    device_buffer<float> phase;  ///< the smoother's forward phases (empty without it)

    impl(int dev, std::size_t ms, bool smoother)
        : device(select_device(dev)), max_streams(ms), v(ms * nbits), bits(ms * data_bytes), stats(ms),
          phase(smoother ? ms * static_cast<std::size_t>(nbits / 2) : 0)
    {
        const auto known = waveform::known_packet_bits();
        PAQ_CUDA_CHECK(cudaMemcpyToSymbol(c_known, known.data(), known.size()));
    }
};

stream_detector::stream_detector(int device_id, std::size_t max_streams, bool phase_smoother)
    : impl_(std::make_unique<impl>(device_id, max_streams, phase_smoother))
{
}

stream_detector::~stream_detector() = default;

cf32* stream_detector::device_input() noexcept { return reinterpret_cast<cf32*>(impl_->v.data()); }
std::uint8_t* stream_detector::device_bits() noexcept { return impl_->bits.data(); }
dsp::path_stats* stream_detector::device_stats() noexcept { return impl_->stats.data(); }

void stream_detector::detect_device(std::size_t streams, const dsp::pll_gains& acq, const dsp::pll_gains& track,
                                    cuda_stream_t stream)
{
    auto& m = *impl_;
    if (streams > m.max_streams) throw std::invalid_argument("stream_detector: more streams than at Create");
    if (streams == 0) return;
    if (m.phase.size() != 0) {
        detect_smoothed_kernel<<<static_cast<unsigned>((streams + 127) / 128), 128, 0, stream>>>(
            m.v.data(), static_cast<int>(streams), acq, track, m.phase.data(), m.bits.data(), m.stats.data());
    } else {
        detect_kernel<<<static_cast<unsigned>((streams + 127) / 128), 128, 0, stream>>>(m.v.data(), static_cast<int>(streams), acq,
                                                                                       track, m.bits.data(), m.stats.data());
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
