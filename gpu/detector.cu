#include "gpu/detector.hpp"

#include "dsp/receiver_tables.hpp"
#include "dsp/waveform.hpp"
#include "gpu/resources.cuh"

#include <cuComplex.h>
#include <math_constants.h>

#include <stdexcept>
#include <string>

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

/// The loop state of detect_kernel: dsp::detect_packet's, variable for variable.
struct pll_state {
    double e_scale;
    double theta = 0.0, nu = 0.0;
    cuDoubleComplex rot = make_cuDoubleComplex(1.0, 0.0), y_prev = make_cuDoubleComplex(0.0, 0.0);
    double a_prev = 0.0, sum = 0.0, sum2 = 0.0;
    unsigned known_errors = 0;
    unsigned char byte = 0;
    dsp::phase_gate::wander_meter wander;
    double unwrapped = 0.0;  // theta + unwrapped: the loop's phase without its wraps
    dsp::phase_slope slope;  // the carrier offset from the decisions (detect_kernel's `slope`)
};

/// The constants of pll_rotation, where a double operand can be read straight from the constant
/// bank: written as literals, each costs two uniform-register moves every time it is used (a
/// quarter of the PLL's instructions were such moves with CUDA's sincos).
struct rotation_constants {
    double two_over_pi, shifter;  ///< 2/pi; 1.5 x 2^52, which rounds a sum to an integer
    double pio2_hi, pio2_lo;      ///< pi/2 as a 33-bit head (n x head is exact) and its tail
    double s1, s2, s3, s4, s5, s6;  ///< sin x = x + s1 x^3 + ... + s6 x^13 on |x| <= pi/4
    double c1, c2, c3, c4, c5, c6;  ///< cos x = 1 - x^2/2 + c1 x^4 + ... + c6 x^14 on |x| <= pi/4
};
// fdlibm's minimax coefficients (its k_sin.c and k_cos.c).
__constant__ rotation_constants c_rot = {
    0.63661977236758134308,    0x1.8p52,
    1.57079632673412561417e+00, 6.07710050650619224932e-11,
    -1.66666666666666324348e-01, 8.33333333332248946124e-03, -1.98412698298579493134e-04,
    2.75573137070700676789e-06, -2.50507602534068634195e-08, 1.58969099521155010221e-10,
    4.16666666666666019037e-02, -1.38888888888741095749e-03, 2.48015872894767294178e-05,
    -2.75573143513906633035e-07, 2.08757232129817482790e-09, -1.13596475577881948265e-11};

/// (cos theta, -sin theta), the CPU's std::polar(1.0, -theta), for the loop's phase (|theta|
/// within a step of pi; correct up to |theta| = 2^20, where n x head stops being exact),
/// within 2^-52 of it (the test the_pll_rotation_matches_the_cpu).
///
/// It sits in the PLL's loop: each pair's rotation waits for the last pair's phase, and the
/// next pair waits for it, so its length in dependent steps is the detector's time (a thread
/// per stream, about one warp a scheduler, nothing to hide a latency behind). CUDA's sincos
/// serves every argument (infinity and huge-argument checks, a three-part reduction, Horner
/// polynomials, its coefficients as literals; then a swap and sign flips by quadrant). Here,
/// ten dependent steps to the last value:
/// - the quadrant n = round(theta 2/pi) by the shifter (n in its low word), x = theta - n pi/2
///   in two fused steps (the head's product exact, the tail's sum rounded once);
/// - the polynomials in z = x^2 by Estrin's scheme (pairs, then z^2, then z^4);
/// - the quadrant's signs as factors of +-1 folded into the last fused step (exact), its swap
///   as a select.
__device__ __forceinline__ cuDoubleComplex pll_rotation(double theta)
{
    const rotation_constants& k = c_rot;
    const double t = fma(theta, k.two_over_pi, k.shifter);
    const int n = __double2loint(t);
    const double q = t - k.shifter;
    const double r = fma(-q, k.pio2_hi, theta);  // exact: n has two bits here, the head 33
    const double x = fma(-q, k.pio2_lo, r);
    // theta = x + n pi/2 with n mod 4 = 0, 1, 2, 3: (cos, -sin) theta = (c, -s), (-s, -c),
    // (-c, s), (s, c) (two's complement keeps n mod 4 in n's low bits for negative n too).
    // So the cosine carries sign_c = -1 for n mod 4 = 1, 2, the sine sign_s = -1 for 0, 1, and
    // odd n swaps them.
    const double sign_c = ((n + 1) & 2) ? -1.0 : 1.0;
    const double sign_s = (n & 2) ? 1.0 : -1.0;
    const double z = x * x;
    const double z2 = z * z;
    const double z4 = z2 * z2;
    // sin x = x + x z (s1 + z ps), ps = s2 + s3 z + ... + s6 z^4
    const double ps = fma(z4, k.s6, fma(z2, fma(z, k.s5, k.s4), fma(z, k.s3, k.s2)));
    // cos x = (1 - z/2) + z^2 pc, pc = c1 + c2 z + ... + c6 z^5; 1 - z/2 as a rounded head and
    // the exact rest of it (hz = z/2 is exact)
    const double pc = fma(z4, fma(z, k.c6, k.c5), fma(z2, fma(z, k.c4, k.c3), fma(z, k.c2, k.c1)));
    const double hz = 0.5 * z;
    const double head = 1.0 - hz;
    const double rest = (1.0 - head) - hz;
    const double v = sign_s * (z * x);
    const double s = fma(v, fma(z, ps, k.s1), sign_s * x);
    const double c = fma(sign_c, fma(z2, pc, rest), sign_c * head);
    const bool odd = (n & 1) != 0;
    return make_cuDoubleComplex(odd ? s : c, odd ? c : s);
}

__global__ void rotation_kernel(const double* __restrict__ theta, int n, cuDoubleComplex* __restrict__ out)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = pll_rotation(theta[i]);
}

/// One chunk of `prefetch` bits from k0 on, all of them known bits (`known`) or all data bits
/// (the known bits fill whole chunks), so that after unrolling no step branches on where it is
/// nor on what the launch asked for (`keep_theta`, `gated`). The kernel's time is the pairs'
/// chain of dependent double operations (about twenty a pair: the samples' rotation, the
/// decision, the error, the loop filter, the phase, the next rotation) and the instructions
/// around it: a thread per stream, one warp a scheduler on 37 SMs (Nsight Compute: 85
/// instructions a pair, one every 4.2 cycles); nothing else runs beside the last part's.
template <bool known, bool keep_theta, bool gated, bool slope>
__device__ __forceinline__ void pll_chunk(pll_state& st, int k0, const cuFloatComplex (&cur)[prefetch], const dsp::pll_gains& g,
                                          unsigned char* __restrict__ out, float4* __restrict__ theta_row, float* __restrict__ soft_row)
{
    float tb[prefetch / 2];
    float sb[prefetch];  // the data bits' statistics, written four at a time after the chunk
#pragma unroll
    for (int j = 0; j < prefetch; ++j) {
        const int k = k0 + j;
        const cuDoubleComplex y = cuCmul(make_cuDoubleComplex(cur[j].x, cur[j].y), st.rot);
        const bool even = (j % 2) == 0;  // k0 is a multiple of prefetch: k's parity is j's
        // The phase both bits of the pair are derotated by (sxs_trace::theta), for the trellis.
        if (keep_theta && even) tb[j / 2] = static_cast<float>(st.theta);
        // The same phase, into the line whose slope is the carrier offset left (a chain of its
        // own beside the loop's).
        if (slope && even) st.slope.add(static_cast<float>(st.theta));
        // The data pairs (phase_gate::first_pair on); each block of 64 pairs is ended after
        // its last chunk (detect_kernel), not here.
        if (gated && !known && even) st.wander.add_to_block(st.theta + st.unwrapped);
        const double comp = even ? y.x : y.y;
        const double dec = comp >= 0.0 ? 1.0 : -1.0;
        double a;
        if constexpr (known) {
            a = c_known[k] ? 1.0 : -1.0;
            if (dec != a) ++st.known_errors;
        } else {
            a = dec;
            const int i = k - nk;  // i % 8 == j % 8
            if (dec > 0) st.byte = static_cast<unsigned char>(st.byte | (0x80u >> (j % 8)));
            if (j % 8 == 7) {
                out[i / 8] = st.byte;
                st.byte = 0;
            }
            const double m = fabs(comp);
            st.sum += m;
            st.sum2 += m * m;
            sb[j] = static_cast<float>(comp);
        }
        if (!even) {
            // a and a_prev are +-1: both products are exact, so the fused form rounds once,
            // as the CPU's difference does, and waits only on y.x and a.
            const double e = fma(-a, y.x, st.a_prev * st.y_prev.y) * st.e_scale;
            st.nu += g.k2 * e;
            st.theta += g.k1 * e + st.nu;
            // The rotation first, from the phase before its wrap (its quadrant reduction takes
            // the step past pi), so that it does not wait on the wrap's test. The wrap is
            // std::remainder(theta, 2 pi) as on the CPU: that leaves |theta| <= pi as it is (a
            // tie at exactly pi included), so it is called only past pi, which the small steps
            // make rare, and the rotation is then made again from the wrapped phase, as the
            // CPU's is (an infinite theta becomes NaN there as on the CPU).
            st.rot = pll_rotation(st.theta);
            constexpr double pi = 3.14159265358979323846;
            if (__builtin_expect(fabs(st.theta) > pi, 0)) {
                const double before_wrap = st.theta;
                st.theta = remainder(st.theta, 2.0 * pi);
                if (gated) st.unwrapped += before_wrap - st.theta;
                st.rot = pll_rotation(st.theta);
            }
        }
        st.y_prev = y;
        st.a_prev = a;
    }
    if constexpr (!known) {
        // A thread's row is its own stream's: 64 bytes at once, not 16 scattered stores.
        if (soft_row != nullptr) {
            float4* d = reinterpret_cast<float4*>(soft_row + (k0 - nk));
#pragma unroll
            for (int q = 0; q < prefetch / 4; ++q) d[q] = make_float4(sb[4 * q], sb[4 * q + 1], sb[4 * q + 2], sb[4 * q + 3]);
        }
    } else {
        (void)sb;
    }
    if constexpr (keep_theta) {
        static_assert(prefetch == 16, "a chunk's eight phases are two float4");
        theta_row[k0 / 8] = make_float4(tb[0], tb[1], tb[2], tb[3]);
        theta_row[k0 / 8 + 1] = make_float4(tb[4], tb[5], tb[6], tb[7]);
    }
}

/// Mirrors dsp::detect_packet step for step, a thread per stream (see pll_chunk).
/// theta_out (keep_theta): the phase of each bit pair, for the trellis. soft_out (or null): each
/// data bit's decision statistic (stream by stream, 6144 a stream). gate_out (gated
/// smoother only): per stream the phase's wander over the data and the decisions' rho
/// (dsp/phase_gate.hpp), as dsp::detect_packet leaves them in its phase_gate::measure.
/// dw_out (slope): per stream the carrier offset its phases followed, as
/// dsp::carrier_correction gives it from the trace's phases.
template <bool keep_theta, bool gated, bool slope = false>
__global__ void detect_kernel(const cuFloatComplex* __restrict__ v, int streams, dsp::pll_gains acq, dsp::pll_gains track,
                              unsigned char* __restrict__ bits, dsp::path_stats* __restrict__ stats, float* __restrict__ theta_out,
                              dsp::phase_gate::measure* __restrict__ gate_out, float* __restrict__ soft_out, double* __restrict__ dw_out = nullptr)
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
    pll_state st;
    st.e_scale = amp > 0.0 ? 1.0 / amp : 0.0;
    unsigned char* out = bits + static_cast<std::size_t>(s) * data_bytes;
    float4* theta_row = keep_theta ? reinterpret_cast<float4*>(theta_out + static_cast<std::size_t>(s) * (nbits / 2)) : nullptr;
    float* soft_row = soft_out != nullptr ? soft_out + static_cast<std::size_t>(s) * (nbits - nk) : nullptr;
    // The known bits (acquisition gains), then the data (tracking gains), whole chunks each,
    // two chunks a turn: the next chunk loads into the other array while this one is used
    // (the arrays trade roles, no copy between them).
    static_assert((nk / prefetch) % 2 == 0 && ((nbits - nk) / prefetch) % 2 == 0, "whole turns of two chunks");
    static_assert(dsp::phase_gate::first_pair * 2 == nk && (dsp::phase_gate::block_pairs * 2) % prefetch == 0,
                  "the wander's blocks start at the data and end at chunk ends");
    load_chunk(0, cur);
    for (int k0 = 0; k0 < nk; k0 += 2 * prefetch) {
        load_chunk(k0 + prefetch, next);
        pll_chunk<true, keep_theta, gated, slope>(st, k0, cur, acq, out, theta_row, nullptr);
        load_chunk(k0 + 2 * prefetch, cur);  // nk < nbits: the first data chunk at most
        pll_chunk<true, keep_theta, gated, slope>(st, k0 + prefetch, next, acq, out, theta_row, nullptr);
    }
    for (int k0 = nk; k0 < nbits; k0 += 2 * prefetch) {
        load_chunk(k0 + prefetch, next);
        pll_chunk<false, keep_theta, gated, slope>(st, k0, cur, track, out, theta_row, soft_row);
        if (gated) st.wander.end_block_if_full();
        if (k0 + 2 * prefetch < nbits) load_chunk(k0 + 2 * prefetch, cur);
        pll_chunk<false, keep_theta, gated, slope>(st, k0 + prefetch, next, track, out, theta_row, soft_row);
        if (gated) st.wander.end_block_if_full();
    }
    stats[s] = decision_stats(st.sum, st.sum2, st.known_errors);
    if (slope) dw_out[s] = dsp::carrier_correction_of(st.slope.offset());
    if (gated) gate_out[s] = {st.wander.value(), dsp::phase_gate::decision_rho(st.sum, st.sum2, static_cast<double>(waveform::data_bits))};
}

/// The gate (dsp::phase_gate::smoother_needed), a thread per packet: smoothed[p] = whether its
/// six streams go to the smoother, and if so they are appended to list (count: its length;
/// the order of the packets in it is whatever the threads' is, which changes no result: each
/// stream is smoothed on its own).
__global__ void gate_kernel(const dsp::phase_gate::measure* __restrict__ gate, int packets, unsigned char* __restrict__ smoothed, int* __restrict__ list,
                            int* __restrict__ count)
{
    const int p = blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= packets) return;
    constexpr int paths = dsp::chain::num_paths;
    dsp::phase_gate::measure path[paths];
#pragma unroll
    for (int i = 0; i < paths; ++i) path[i] = gate[p * paths + i];
    const bool on = dsp::phase_gate::smoother_needed(path, paths);
    smoothed[p] = on ? 1 : 0;
    if (!on) return;
    const int at = atomicAdd(count, paths);
#pragma unroll
    for (int i = 0; i < paths; ++i) list[at + i] = p * paths + i;
}

/// Per packet the smoother decided (smoothed null: every packet), the path whose phases
/// derotate its segment (dsp::smoother::pre_derotation_source_for, from the smoothed
/// statistics) into source[p], no_derotation elsewhere; and the streams made again
/// (dsp::smoother::pre_derotated) listed, for stream_detector::redecide_device.
__global__ void rederive_list_kernel(const unsigned char* __restrict__ smoothed, const dsp::path_stats* __restrict__ stats, int packets,
                                     unsigned char* __restrict__ source, int* __restrict__ list, int* __restrict__ count)
{
    const int p = blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= packets) return;
    if (smoothed != nullptr && smoothed[p] == 0) {
        source[p] = dsp::smoother::no_derotation;
        return;
    }
    const dsp::path_stats* st = stats + static_cast<std::size_t>(p) * dsp::chain::num_paths;
    const int src = dsp::smoother::pre_derotation_source_for(st[static_cast<int>(dsp::eq_path::none)].bep_estimate,
                                                             st[static_cast<int>(dsp::eq_path::mmse)].bep_estimate);
    source[p] = static_cast<unsigned char>(src);
    int at = atomicAdd(count, dsp::smoother::paths_made_again(src));
#pragma unroll
    for (int path = 0; path < dsp::chain::num_paths; ++path) {
        if (dsp::smoother::pre_derotated(path, src)) list[at++] = p * dsp::chain::num_paths + path;
    }
}

/// The listed streams' bit phases plus the derotation their samples were made with (the
/// trellis filters the segment as it was): block per listed stream.
__global__ void rederive_phase_kernel(float* __restrict__ theta_bit, const unsigned char* __restrict__ source, const int* __restrict__ list,
                                      const int* __restrict__ count)
{
    if (static_cast<int>(blockIdx.x) >= *count) return;
    const int s = list[blockIdx.x];
    const int p = s / dsp::chain::num_paths;
    const float* src = theta_bit + static_cast<std::size_t>(p * dsp::chain::num_paths + source[p]) * nbits;
    float* th = theta_bit + static_cast<std::size_t>(s) * nbits;
    for (int k = threadIdx.x; k < static_cast<int>(nbits); k += blockDim.x) {
        th[k] = static_cast<float>(static_cast<double>(th[k]) + dsp::smoother::pre_derotation(src, static_cast<int>(nbits), static_cast<double>(k)));
    }
}

/// The smoother's per-stream arrays, stream by stream: element i of stream s at
/// s * (its length) + i.
struct smoother_arrays {
    const float2* v;   ///< decision samples, streams x 6336
    float* theta;      ///< phase per pair, streams x 3168 (device_theta())
    float* z;          ///< observation per pair
    float* f;          ///< forward filter per pair
    float* b;          ///< backward filter per pair
    float* theta_bit;  ///< phase per bit, streams x 6336 (a pair's two as a float2)
    float* zr_bit;     ///< per bit (sample): its observation and that's variance in units of its pair's (0: none), streams x 6336 float2
    double2* line;     ///< per stream: the line through z (intercept, slope)
    unsigned* known;   ///< per stream: the forward PLL's errors on the known bits
    const double* gain_k;  ///< dsp::smoother::gains(l).k at l * 3168
    const float* gain_p;   ///< dsp::smoother::gains(l).p at l * 3168
    const int* list;       ///< gated: the streams to smooth (count of them); null: streams 0 .. streams - 1
    const int* count;

    /// The stream the i-th thread (warp, lane group) of a smoother kernel works on, -1 for none.
    __device__ int stream(int i, int streams) const
    {
        if (list == nullptr) return i < streams ? i : -1;
        return i < *count ? list[i] : -1;
    }
};

constexpr int np2 = nbits / 2;
constexpr int chunks = static_cast<int>(dsp::smoother::chunks);
constexpr int steps = np2 / chunks;  ///< pairs per chunk
static_assert(chunks == 32, "a lane per chunk");
static_assert(nk % (2 * chunks) == 0, "the known bits fill whole steps of a warp");

/// Pairs a thread-per-stream pass loads ahead (16 decision samples), so that its loads are in
/// flight together rather than one after another.
constexpr int pair_chunk = 8;
static_assert(np2 % pair_chunk == 0 && nk % (2 * pair_chunk) == 0);

/// The chunks' sums added as dsp/detector.cpp's fold_chunks does (lane i + lane i + 16, then
/// + 8, ...), the total given to every lane.
__device__ inline double fold_chunks(double x)
{
#pragma unroll
    for (int off = chunks / 2; off > 0; off /= 2) x += __shfl_down_sync(0xffffffffu, x, off);
    return __shfl_sync(0xffffffffu, x, 0);
}

/// y = v e^{-j theta} in double, as the CPU's v * std::polar(1.0, -theta).
__device__ inline void rotate_pair(float4 q, double theta, cuDoubleComplex& y0, cuDoubleComplex& y1)
{
    double sn, cs;
    sincos(-theta, &sn, &cs);
    const cuDoubleComplex rot = make_cuDoubleComplex(cs, sn);
    y0 = cuCmul(make_cuDoubleComplex(q.x, q.y), rot);
    y1 = cuCmul(make_cuDoubleComplex(q.z, q.w), rot);
}

/// y0 = v0 e^{-j theta0}, y1 = v1 e^{-j theta1}: a pair's two samples, each at its bit's phase
/// (the smoother's unwrapped phases: tens of radians at most, well inside pll_rotation's range;
/// the_pll_rotation_matches_the_cpu tests +-64 rad).
__device__ inline void rotate_bits(float4 q, float2 theta, cuDoubleComplex& y0, cuDoubleComplex& y1)
{
    y0 = cuCmul(make_cuDoubleComplex(q.x, q.y), pll_rotation(static_cast<double>(theta.x)));
    y1 = cuCmul(make_cuDoubleComplex(q.z, q.w), pll_rotation(static_cast<double>(theta.y)));
}

/// Step 1 of dsp::detect_packet_smoothed, one thread per stream: the forward PLL, its phase
/// per pair (unwrapped) to theta, its errors on the known bits to known.
__global__ void __launch_bounds__(128) smoother_pll_kernel(smoother_arrays m, int streams, dsp::pll_gains acq, dsp::pll_gains boot)
{
    const int s = m.stream(static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x), streams);
    if (s < 0) return;
    const float4* row = reinterpret_cast<const float4*>(m.v + static_cast<std::size_t>(s) * nbits);  // a pair each
    float4* th = reinterpret_cast<float4*>(m.theta + static_cast<std::size_t>(s) * np2);
    float4* thb = reinterpret_cast<float4*>(m.theta_bit + static_cast<std::size_t>(s) * nbits);  // two pairs each
    float4 cur[pair_chunk], next[pair_chunk];
    auto load = [&](int j0, float4 (&dst)[pair_chunk]) {
#pragma unroll
        for (int u = 0; u < pair_chunk; ++u) dst[u] = row[j0 + u];
    };
    double amp = 0.0;
    for (int j0 = 0; j0 < nk / 2; j0 += pair_chunk) {
        load(j0, cur);
#pragma unroll
        for (int u = 0; u < pair_chunk; ++u) {
            amp += cuCabs(make_cuDoubleComplex(cur[u].x, cur[u].y));
            amp += cuCabs(make_cuDoubleComplex(cur[u].z, cur[u].w));
        }
    }
    amp /= nk;
    const double e_scale = amp > 0.0 ? 1.0 / amp : 0.0;
    unsigned known_errors = 0;
    double theta = 0.0, nu = 0.0;
    load(0, cur);
    for (int j0 = 0; j0 < np2; j0 += pair_chunk) {
        if (j0 + pair_chunk < np2) load(j0 + pair_chunk, next);
        float tb[pair_chunk];
#pragma unroll
        for (int u = 0; u < pair_chunk; ++u) {
            const int j = j0 + u;
            tb[u] = static_cast<float>(theta);
            cuDoubleComplex y0, y1;
            rotate_pair(cur[u], theta, y0, y1);
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
        th[j0 / 4] = make_float4(tb[0], tb[1], tb[2], tb[3]);
        th[j0 / 4 + 1] = make_float4(tb[4], tb[5], tb[6], tb[7]);
#pragma unroll
        for (int u = 0; u < pair_chunk; u += 2) thb[(j0 + u) / 2] = make_float4(tb[u], tb[u], tb[u + 1], tb[u + 1]);
#pragma unroll
        for (int u = 0; u < pair_chunk; ++u) cur[u] = next[u];
    }
    m.known[s] = known_errors;
}

/// Steps 2a-d of dsp::detect_packet_smoothed, a warp per stream: lane c on chunk c, so that at
/// step t the warp works on the 32 adjacent pairs 32t .. 32t + 31 (lane c on pair 32t + c).
/// The decisions at theta (kept as bits in shared memory, where the neighbours' are read), the
/// signal model's sums (folded over the lanes as the CPU folds its chunks), an observation per
/// pair to z, and the line through them to line.
constexpr int observe_warps = 4;

__global__ void __launch_bounds__(32 * observe_warps) smoother_observe_kernel(smoother_arrays m, int streams)
{
    __shared__ unsigned dec[observe_warps][nbits / 32];  // bit k of the stream: word k / 32, bit k % 32; 1 = +1
    const int w = static_cast<int>(threadIdx.x) / 32, c = static_cast<int>(threadIdx.x) % 32;
    const int s = m.stream(static_cast<int>(blockIdx.x) * observe_warps + w, streams);
    if (s < 0) return;  // the whole warp
    const float4* v = reinterpret_cast<const float4*>(m.v + static_cast<std::size_t>(s) * nbits);  // a pair each
    const float* th = m.theta + static_cast<std::size_t>(s) * np2;
    const float2* thb = reinterpret_cast<const float2*>(m.theta_bit + static_cast<std::size_t>(s) * nbits);  // a pair each
    unsigned* const d = dec[w];
    for (int i = c; i < nbits / 32; i += 32) d[i] = 0u;
    __syncwarp();
    auto a_of = [&](int k) -> double {  // +-1; 0 outside the packet (the CPU's edge terms)
        if (k < 0 || k >= nbits) return 0.0;
        return (d[k / 32] >> (k % 32)) & 1u ? 1.0 : -1.0;
    };
    auto decision = [&](int k, const cuDoubleComplex& y) -> bool {
        if (k < nk) return c_known[k] != 0;
        return ((k % 2 == 0) ? y.x : y.y) >= 0.0;
    };
    // a, b: the decisions, and the model's sums over bits 1 .. n - 2. A pair's second bit needs
    // the next pair's first decision, which for lane 31 comes at the next step: every lane
    // adds its second bit a step late, which keeps each lane's order that of the CPU's chunk.
    double own = 0.0, s11 = 0.0, s1y = 0.0;
    {
        auto add = [&](int k, const cuDoubleComplex& y) {
            if (k < 1 || k > nbits - 2) return;
            const double m1 = a_of(k - 1) + a_of(k + 1);
            own += ((k % 2 == 0) ? y.x : y.y) * a_of(k);
            s1y += ((k % 2 == 0) ? y.y : y.x) * m1;
            s11 += m1 * m1;
        };
        cuDoubleComplex y_late = make_cuDoubleComplex(0.0, 0.0);
        for (int t = 0; t < steps; ++t) {
            const int j = chunks * t + c, k0 = 2 * j;
            cuDoubleComplex y0, y1;
            rotate_bits(v[j], thb[j], y0, y1);
            const unsigned mine = (decision(k0, y0) ? 1u : 0u) | (decision(k0 + 1, y1) ? 2u : 0u);
            atomicOr(&d[k0 / 32], mine << (k0 % 32));
            __syncwarp();
            if (t > 0) add(k0 - 2 * chunks + 1, y_late);
            add(k0, y0);
            y_late = y1;
        }
        add(2 * (chunks * (steps - 1) + c) + 1, y_late);
    }
    const double own_sum = fold_chunks(own), s11_sum = fold_chunks(s11), s1y_sum = fold_chunks(s1y);
    const double g0 = own_sum / static_cast<double>(nbits - 2), c1 = s11_sum > 0.0 ? s1y_sum / s11_sum : 0.0;
    // c, d: an observation per pair and one per sample, and the line's sums.
    float* z = m.z + static_cast<std::size_t>(s) * np2;
    float4* zr = reinterpret_cast<float4*>(m.zr_bit + static_cast<std::size_t>(s) * 2 * nbits);  // a pair each
    double sj = 0.0, sz = 0.0, sjj = 0.0, sjz = 0.0;
    for (int t = 0; t < steps; ++t) {
        const int j = chunks * t + c, k0 = 2 * j;
        const float tj = th[j];
        cuDoubleComplex y[2];
        rotate_pair(v[j], static_cast<double>(tj), y[0], y[1]);
        double pr[2], pi[2], en[2];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int k = k0 + h;
            const double m1 = a_of(k - 1) + a_of(k + 1);
            const double mr = (h == 0) ? g0 * a_of(k) : c1 * m1, mi = (h == 0) ? c1 * m1 : g0 * a_of(k);
            pr[h] = y[h].x * mr + y[h].y * mi;  // y conj(model)
            pi[h] = y[h].y * mr - y[h].x * mi;
            en[h] = mr * mr + mi * mi;
        }
        const float zj = static_cast<float>(static_cast<double>(tj) + atan2(pi[0] + pi[1], pr[0] + pr[1]));
        z[j] = zj;
        float zs[2], rs[2];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            zs[h] = static_cast<float>(static_cast<double>(tj) + atan2(pi[h], pr[h]));
            rs[h] = en[h] > 0.0 ? static_cast<float>((en[0] + en[1]) / en[h]) : 0.0f;
        }
        zr[j] = make_float4(zs[0], rs[0], zs[1], rs[1]);
        const double x = static_cast<double>(j), yz = zj;
        sj += x;
        sz += yz;
        sjj += x * x;
        sjz += x * yz;
    }
    sj = fold_chunks(sj);
    sz = fold_chunks(sz);
    sjj = fold_chunks(sjj);
    sjz = fold_chunks(sjz);
    if (c == 0) {
        const double cnt = static_cast<double>(np2);
        const double slope = (cnt * sjz - sj * sz) / (cnt * sjj - sj * sj);
        const double icpt = (sz - slope * sj) / cnt;
        m.line[s] = make_double2(icpt, slope);
    }
}

/// Steps 2e-f of dsp::detect_packet_smoothed, sixteen lanes per stream (two streams a warp):
/// lane l runs candidate lambda l over the packet (lanes 14 and 15 repeat the last and are not
/// chosen), the least prediction error is found by shuffles (the lowest l on a tie, as the
/// CPU's scan); then lane 0 runs the forward filter and lane 1 the backward one on that
/// lambda's gains, and all sixteen combine them into the phase of every pair.
constexpr int filter_group = 16;

__global__ void __launch_bounds__(128) smoother_filter_kernel(smoother_arrays m, int streams)
{
    const int g = static_cast<int>(threadIdx.x) % filter_group;
    const int s = m.stream(static_cast<int>((blockIdx.x * blockDim.x + threadIdx.x) / filter_group), streams);
    if (s < 0) return;  // the whole half-warp
    const unsigned mask = 0xffffu << (threadIdx.x % 32 / filter_group * filter_group);
    const std::size_t row = static_cast<std::size_t>(s) * np2;
    const float* z = m.z + row;
    const float4* z4 = reinterpret_cast<const float4*>(z);
    const double2 ln = m.line[s];
    const double icpt = ln.x, slope = ln.y;
    auto line = [&](int j) { return icpt + slope * static_cast<double>(j); };
    // The recursions run over the pairs in chunks of eight, the next chunk's loads issued
    // before the current chunk's steps.
    constexpr int nq = np2 / pair_chunk;
    // e. lambda.
    constexpr int nl = dsp::smoother::num_lambdas;
    static_assert(nl <= filter_group);
    const int l = min(g, nl - 1);
    double pe = 0.0;
    {
        const double lam = c_lambdas[l];
        const double p = 0.5 * (lam + sqrt(lam * lam + 4.0 * lam));
        const double gain = p / (p + 1.0);
        double x = static_cast<double>(z[0]) - line(0);
        float4 c0 = z4[0], c1 = z4[1];
        for (int q = 0; q < nq; ++q) {
            float4 n0 = c0, n1 = c1;
            if (q + 1 < nq) {
                n0 = z4[2 * q + 2];
                n1 = z4[2 * q + 3];
            }
            const float zc[pair_chunk] = {c0.x, c0.y, c0.z, c0.w, c1.x, c1.y, c1.z, c1.w};
#pragma unroll
            for (int u = 0; u < pair_chunk; ++u) {
                const int j = pair_chunk * q + u;
                if (j == 0) continue;
                const double inn = (static_cast<double>(zc[u]) - line(j)) - x;
                pe += inn * inn;
                x += gain * inn;
            }
            c0 = n0;
            c1 = n1;
        }
    }
    double best_pe = g < nl ? pe : CUDART_INF;
    int best = l;
#pragma unroll
    for (int off = filter_group / 2; off > 0; off /= 2) {
        const double o_pe = __shfl_xor_sync(mask, best_pe, off, filter_group);
        const int o_l = __shfl_xor_sync(mask, best, off, filter_group);
        if (o_pe < best_pe || (o_pe == best_pe && o_l < best)) {
            best_pe = o_pe;
            best = o_l;
        }
    }
    const double lam = c_lambdas[best];
    const double* gk = m.gain_k + static_cast<std::size_t>(best) * np2;
    const float* gp = m.gain_p + static_cast<std::size_t>(best) * np2;
    // f. The forward filter (lane 0) and the backward filter (lane 1).
    float* f = m.f + row;
    float* b = m.b + row;
    if (g < 2) {
        // Step i of either filter is pair i (forward) or np2 - 1 - i (backward); the backward
        // lane holds its chunks reversed, so that both lanes run the same code on step i.
        const bool back = g == 1;
        float4* out = reinterpret_cast<float4*>(back ? b : f);
        const double2* gk2 = reinterpret_cast<const double2*>(gk);
        auto first = [&](int q) { return back ? np2 - pair_chunk * (q + 1) : pair_chunk * q; };  // the chunk's lowest pair
        auto load = [&](int q, float (&zz)[pair_chunk], double (&kk)[pair_chunk]) {
            const int j0 = first(q);
            const float4 a = z4[j0 / 4], e = z4[j0 / 4 + 1];
            const float fw[pair_chunk] = {a.x, a.y, a.z, a.w, e.x, e.y, e.z, e.w};
#pragma unroll
            for (int u = 0; u < pair_chunk; ++u) zz[u] = back ? fw[pair_chunk - 1 - u] : fw[u];
#pragma unroll
            for (int u = 0; u < pair_chunk / 2; ++u) {
                const double2 k2 = gk2[pair_chunk / 2 * q + u];
                kk[2 * u] = k2.x;
                kk[2 * u + 1] = k2.y;
            }
        };
        float zc[pair_chunk], zn[pair_chunk];
        double kc[pair_chunk], kn[pair_chunk];
        load(0, zc, kc);
        double x = static_cast<double>(zc[0]) - line(back ? np2 - 1 : 0);
        for (int q = 0; q < nq; ++q) {
            if (q + 1 < nq) load(q + 1, zn, kn);
            const int j0 = first(q);
            float o[pair_chunk];
#pragma unroll
            for (int u = 0; u < pair_chunk; ++u) {
                const int j = back ? j0 + pair_chunk - 1 - u : j0 + u;
                if (q > 0 || u > 0) x += kc[u] * ((static_cast<double>(zc[u]) - line(j)) - x);
                o[u] = static_cast<float>(x);
            }
            out[j0 / 4] = back ? make_float4(o[7], o[6], o[5], o[4]) : make_float4(o[0], o[1], o[2], o[3]);
            out[j0 / 4 + 1] = back ? make_float4(o[3], o[2], o[1], o[0]) : make_float4(o[4], o[5], o[6], o[7]);
#pragma unroll
            for (int u = 0; u < pair_chunk; ++u) {
                zc[u] = zn[u];
                kc[u] = kn[u];
            }
        }
    }
    __syncwarp(mask);
    // The phase of pair j: the two filters' predictions from pairs j - 2 and j + 2, weighted by
    // their variances, plus the line; and its bits' phases (step g, dsp::smoother::bit_phases).
    constexpr int gap = dsp::smoother::exclusion + 1;
    const double drift = gap * lam;
    float* th = m.theta + row;
    const float2* zr = reinterpret_cast<const float2*>(m.zr_bit + static_cast<std::size_t>(s) * 2 * nbits);
    float2* thb = reinterpret_cast<float2*>(m.theta_bit + static_cast<std::size_t>(s) * nbits);
    for (int j = g; j < np2; j += filter_group) {
        const bool fwd = j >= gap, bwd = j + gap < np2;
        const float2 zf = fwd ? zr[2 * j - 2] : make_float2(0.0f, 0.0f);  // the odd bit's forward sample
        const float2 zb = bwd ? zr[2 * j + 3] : make_float2(0.0f, 0.0f);  // the even bit's backward sample
        const dsp::smoother::bit_phase_side fs{fwd, fwd ? static_cast<double>(f[j - gap]) : 0.0,
                                               fwd ? static_cast<double>(gp[j - gap]) : 0.0, zf.x, zf.y};
        const dsp::smoother::bit_phase_side bs{bwd, bwd ? static_cast<double>(b[j + gap]) : 0.0,
                                               bwd ? static_cast<double>(gp[np2 - 1 - (j + gap)]) : 0.0, zb.x, zb.y};
        double num = 0.0, den = 0.0;
        if (fwd) {
            const double w = 1.0 / (fs.p + drift);
            num += w * fs.x;
            den += w;
        }
        if (bwd) {
            const double w = 1.0 / (bs.p + drift);
            num += w * bs.x;
            den += w;
        }
        th[j] = static_cast<float>(num / den + icpt + slope * static_cast<double>(j));  // the CPU's association
        const auto bp = dsp::smoother::bit_phases(j, fs, bs, lam, icpt, slope);
        thb[j] = make_float2(bp.even, bp.odd);
    }
}

/// Step 3 of dsp::detect_packet_smoothed, a warp per stream, lane c on chunk c as in the
/// observation kernel: the data decisions at theta (gathered as bits in shared memory, then
/// written out a word a lane), their statistics folded as the CPU folds its chunks.
constexpr int decide_warps = 4;

__global__ void __launch_bounds__(32 * decide_warps) smoother_decide_kernel(smoother_arrays m, int streams,
                                                                          unsigned char* __restrict__ bits,
                                                                          dsp::path_stats* __restrict__ stats,
                                                                          float* __restrict__ soft)
{
    __shared__ unsigned out_words[decide_warps][data_bytes / 4];
    const int w = static_cast<int>(threadIdx.x) / 32, c = static_cast<int>(threadIdx.x) % 32;
    const int s = m.stream(static_cast<int>(blockIdx.x) * decide_warps + w, streams);
    if (s < 0) return;  // the whole warp
    for (int i = c; i < data_bytes / 4; i += 32) out_words[w][i] = 0u;
    __syncwarp();
    const float4* v = reinterpret_cast<const float4*>(m.v + static_cast<std::size_t>(s) * nbits);
    const float2* thb = reinterpret_cast<const float2*>(m.theta_bit + static_cast<std::size_t>(s) * nbits);
    double sum = 0.0, sum2 = 0.0;
    for (int t = nk / (2 * chunks); t < steps; ++t) {
        const int j = chunks * t + c, k0 = 2 * j;
        cuDoubleComplex y0, y1;
        rotate_bits(v[j], thb[j], y0, y1);
        auto bit = [&](int i, double cv) {  // data bit i: byte i / 8, bit 7 - i % 8; the byte is
            if (cv >= 0.0) {                 // byte i / 8 % 4 of its little-endian word
                atomicOr(&out_words[w][i / 32], (0x80u >> (i % 8)) << (8 * ((i / 8) % 4)));
            }
            sum += fabs(cv);
            sum2 += cv * cv;
            if (soft != nullptr) soft[static_cast<std::size_t>(s) * (nbits - nk) + i] = static_cast<float>(cv);
        };
        bit(k0 - nk, y0.x);
        bit(k0 + 1 - nk, y1.y);
    }
    sum = fold_chunks(sum);
    sum2 = fold_chunks(sum2);
    __syncwarp();
    unsigned* out = reinterpret_cast<unsigned*>(bits + static_cast<std::size_t>(s) * data_bytes);
    for (int i = c; i < data_bytes / 4; i += 32) out[i] = out_words[w][i];
    if (c == 0) stats[s] = decision_stats(sum, sum2, m.known[s]);
}

}  // namespace

struct stream_detector::impl {
    int device;
    std::size_t max_streams;
    stream st;
    device_buffer<cuFloatComplex> v;
    device_buffer<unsigned char> bits;
    device_buffer<dsp::path_stats> stats;
    smoother_use use;
    bool keep_phase;
    bool keep_soft;
    device_buffer<float> soft;  ///< keep_soft: each data bit's decision statistic, streams x 6144
    // The smoother's per-stream arrays (empty without it): phase, observation, forward and
    // backward filter per pair, the line and the known-bit errors per stream; and the filters'
    // gains (dsp::smoother::gains). The phase is kept by the PLL too when asked (keep_phase).
    device_buffer<float> theta, z, f, b;
    device_buffer<float> theta_bit, zr_bit;  // per bit (zr_bit two floats a bit)
    device_buffer<double2> line;
    device_buffer<unsigned> known;
    device_buffer<double> gain_k;
    device_buffer<float> gain_p;
    // Gated: the PLL's wander and rho per stream, the gate's decision per packet, the list of
    // streams to smooth and its length.
    device_buffer<dsp::phase_gate::measure> gate;
    device_buffer<unsigned char> smoothed;
    device_buffer<int> list, count;
    // The derotation's source per packet (plan_rederivation_device), the streams decided again
    // after it (redecide_device) and their number.
    device_buffer<unsigned char> source;
    device_buffer<int> list2, count2;

    /// Whether the smoother's arrays are needed.
    static bool sm(smoother_use u) noexcept { return u != smoother_use::never; }

    impl(int dev, std::size_t ms, smoother_use u, bool kp, bool ks)
        : device(select_device(dev)), max_streams(ms), v(ms * nbits), bits(ms * data_bytes), stats(ms), use(u), keep_phase(kp),
          keep_soft(ks), soft(ks ? ms * (nbits - nk) : 0),
          theta(sm(u) || kp ? ms * dsp::phase_pairs : 0), z(sm(u) ? ms * dsp::phase_pairs : 0),
          f(sm(u) ? ms * dsp::phase_pairs : 0), b(sm(u) ? ms * dsp::phase_pairs : 0), theta_bit(sm(u) ? ms * nbits : 0),
          zr_bit(sm(u) ? 2 * ms * nbits : 0), line(sm(u) ? ms : 0), known(sm(u) ? ms : 0),
          gain_k(sm(u) ? dsp::smoother::num_lambdas * dsp::phase_pairs : 0), gain_p(sm(u) ? dsp::smoother::num_lambdas * dsp::phase_pairs : 0),
          gate(u == smoother_use::gated ? ms : 0), smoothed(u == smoother_use::gated ? ms / dsp::chain::num_paths + 1 : 0),
          list(u == smoother_use::gated ? ms : 0), count(u == smoother_use::gated ? 1 : 0),
          source(sm(u) ? ms / dsp::chain::num_paths + 1 : 0), list2(sm(u) ? ms : 0), count2(sm(u) ? 1 : 0)
    {
        const auto known_bits = waveform::known_packet_bits();
        PAQ_CUDA_CHECK(cudaMemcpyToSymbol(c_known, known_bits.data(), known_bits.size()));
        PAQ_CUDA_CHECK(cudaMemcpyToSymbol(c_lambdas, dsp::smoother::lambdas, sizeof dsp::smoother::lambdas));
        if (sm(u)) {
            for (int l = 0; l < dsp::smoother::num_lambdas; ++l) {
                const auto& g = dsp::smoother::gains(l);
                const std::size_t at = static_cast<std::size_t>(l) * dsp::phase_pairs;
                PAQ_CUDA_CHECK(cudaMemcpy(gain_k.data() + at, g.k, sizeof g.k, cudaMemcpyHostToDevice));
                PAQ_CUDA_CHECK(cudaMemcpy(gain_p.data() + at, g.p, sizeof g.p, cudaMemcpyHostToDevice));
            }
        }
    }
};

stream_detector::stream_detector(int device_id, std::size_t max_streams, smoother_use smoother, bool keep_phase, bool keep_soft)
    : impl_(std::make_unique<impl>(device_id, max_streams, smoother, keep_phase, keep_soft))
{
}

stream_detector::~stream_detector() = default;

cf32* stream_detector::device_input() noexcept { return reinterpret_cast<cf32*>(impl_->v.data()); }
std::uint8_t* stream_detector::device_bits() noexcept { return impl_->bits.data(); }
const float* stream_detector::device_soft() const noexcept { return impl_->keep_soft ? impl_->soft.data() : nullptr; }
dsp::path_stats* stream_detector::device_stats() noexcept { return impl_->stats.data(); }
const float* stream_detector::device_theta() const noexcept { return impl_->theta.size() > 0 ? impl_->theta.data() : nullptr; }
const float* stream_detector::device_theta_bit() const noexcept
{
    return impl_->theta_bit.size() > 0 ? impl_->theta_bit.data() : nullptr;
}
const std::uint8_t* stream_detector::device_smoothed() const noexcept
{
    return impl_->smoothed.size() > 0 ? impl_->smoothed.data() : nullptr;
}
const int* stream_detector::device_smoothed_streams() const noexcept
{
    return impl_->count.size() > 0 ? impl_->count.data() : nullptr;
}

void stream_detector::detect_device(std::size_t streams, const dsp::pll_gains& acq, const dsp::pll_gains& track,
                                    const dsp::pll_gains& boot, cuda_stream_t stream)
{
    auto& m = *impl_;
    if (streams > m.max_streams) throw std::invalid_argument("stream_detector: more streams than at Create");
    if (streams == 0) return;
    const bool gated = m.use == smoother_use::gated;
    if (gated && streams % dsp::chain::num_paths != 0) {
        throw std::invalid_argument("stream_detector: gated smoothing needs whole packets (" + std::to_string(dsp::chain::num_paths) +
                                    " streams each), got " + std::to_string(streams) + " streams");
    }
    const auto per_thread = [&](std::size_t n, unsigned block) { return static_cast<unsigned>((n + block - 1) / block); };
    if (m.use != smoother_use::always) {
        // One launch shape for every variant (the flags are compile-time in the kernel).
        auto launch = [&](auto kernel) {
            kernel<<<per_thread(streams, 128), 128, 0, stream>>>(m.v.data(), static_cast<int>(streams), acq, track, m.bits.data(),
                                                                 m.stats.data(), m.keep_phase ? m.theta.data() : nullptr,
                                                                 gated ? m.gate.data() : nullptr, m.keep_soft ? m.soft.data() : nullptr,
                                                                 nullptr);
        };
        if (m.keep_phase) {
            gated ? launch(detect_kernel<true, true>) : launch(detect_kernel<true, false>);
        } else {
            gated ? launch(detect_kernel<false, true>) : launch(detect_kernel<false, false>);
        }
        PAQ_CUDA_CHECK_LAUNCH();
        if (!gated) return;
        const std::size_t packets = streams / dsp::chain::num_paths;
        PAQ_CUDA_CHECK(cudaMemsetAsync(m.count.data(), 0, sizeof(int), stream));
        gate_kernel<<<per_thread(packets, 128), 128, 0, stream>>>(m.gate.data(), static_cast<int>(packets), m.smoothed.data(),
                                                                  m.list.data(), m.count.data());
        PAQ_CUDA_CHECK_LAUNCH();
    }
    // dsp::detect_packet_smoothed in four kernels: the PLL a thread per stream, the passes over
    // the pairs a warp per stream, the filters sixteen lanes per stream. Gated, on the listed
    // streams (the grids sized for all of them; the threads past the list's length return at
    // once), overwriting the PLL's bits, statistics and phase there.
    smooth_device(streams, acq, boot, gated ? m.list.data() : nullptr, gated ? m.count.data() : nullptr, stream);
}

void stream_detector::carrier_offsets_device(std::size_t streams, const dsp::pll_gains& acq, const dsp::pll_gains& track, double* dw,
                                             cuda_stream_t stream)
{
    auto& m = *impl_;
    if (streams > m.max_streams) throw std::invalid_argument("stream_detector: more streams than at Create");
    if (streams == 0) return;
    // The slope is summed as the loop goes: no phases written, no second pass over them.
    const auto blocks = static_cast<unsigned>((streams + 127) / 128);
    detect_kernel<false, false, true><<<blocks, 128, 0, stream>>>(m.v.data(), static_cast<int>(streams), acq, track, m.bits.data(),
                                                                  m.stats.data(), nullptr, nullptr, nullptr, dw);
    PAQ_CUDA_CHECK_LAUNCH();
}

void stream_detector::smooth_device(std::size_t streams, const dsp::pll_gains& acq, const dsp::pll_gains& boot, const int* list,
                                    const int* count, cuda_stream_t stream)
{
    auto& m = *impl_;
    const smoother_arrays arr{reinterpret_cast<const float2*>(m.v.data()),
                              m.theta.data(),
                              m.z.data(),
                              m.f.data(),
                              m.b.data(),
                              m.theta_bit.data(),
                              m.zr_bit.data(),
                              m.line.data(),
                              m.known.data(),
                              m.gain_k.data(),
                              m.gain_p.data(),
                              list,
                              count};
    const int n = static_cast<int>(streams);
    const auto per_thread = [&](std::size_t k, unsigned block) { return static_cast<unsigned>((k + block - 1) / block); };
    const auto per_warp = [&](unsigned warps) { return static_cast<unsigned>((streams + warps - 1) / warps); };
    smoother_pll_kernel<<<per_thread(streams, 128), 128, 0, stream>>>(arr, n, acq, boot);
    PAQ_CUDA_CHECK_LAUNCH();
    for (int it = 0; it < dsp::smoother::iterations; ++it) {
        smoother_observe_kernel<<<per_warp(observe_warps), 32 * observe_warps, 0, stream>>>(arr, n);
        PAQ_CUDA_CHECK_LAUNCH();
        smoother_filter_kernel<<<per_thread(streams, 128 / filter_group), 128, 0, stream>>>(arr, n);
        PAQ_CUDA_CHECK_LAUNCH();
    }
    smoother_decide_kernel<<<per_warp(decide_warps), 32 * decide_warps, 0, stream>>>(arr, n, m.bits.data(), m.stats.data(),
                                                                                      m.keep_soft ? m.soft.data() : nullptr);
    PAQ_CUDA_CHECK_LAUNCH();
}

namespace {

/// The packets of a second pass's `streams` (plan_rederivation_device, redecide_device): they
/// need the smoother and whole packets within max_streams.
std::size_t rederived_packets(const char* what, smoother_use use, std::size_t max_streams, std::size_t streams)
{
    if (use == smoother_use::never) throw std::logic_error(std::string("stream_detector: ") + what + " without the smoother");
    if (streams > max_streams || streams % dsp::chain::num_paths != 0) {
        throw std::invalid_argument(std::string("stream_detector: ") + what + " needs whole packets within max_streams");
    }
    return streams / dsp::chain::num_paths;
}

}  // namespace

void stream_detector::plan_rederivation_device(std::size_t streams, cuda_stream_t stream)
{
    auto& m = *impl_;
    const std::size_t packets = rederived_packets("plan_rederivation_device", m.use, m.max_streams, streams);
    if (packets == 0) return;
    PAQ_CUDA_CHECK(cudaMemsetAsync(m.count2.data(), 0, sizeof(int), stream));
    rederive_list_kernel<<<static_cast<unsigned>((packets + 127) / 128), 128, 0, stream>>>(
        m.use == smoother_use::gated ? m.smoothed.data() : nullptr, m.stats.data(), static_cast<int>(packets), m.source.data(),
        m.list2.data(), m.count2.data());
    PAQ_CUDA_CHECK_LAUNCH();
}

const std::uint8_t* stream_detector::device_derotation() const noexcept
{
    return impl_->source.size() > 0 ? impl_->source.data() : nullptr;
}

void stream_detector::redecide_device(std::size_t streams, const dsp::pll_gains& acq, const dsp::pll_gains& boot, cuda_stream_t stream)
{
    auto& m = *impl_;
    const std::size_t packets = rederived_packets("redecide_device", m.use, m.max_streams, streams);
    if (packets == 0) return;
    smooth_device(streams, acq, boot, m.list2.data(), m.count2.data(), stream);
    rederive_phase_kernel<<<static_cast<unsigned>(packets * dsp::smoother::pre_derotation_paths_max), 256, 0, stream>>>(
        m.theta_bit.data(), m.source.data(), m.list2.data(), m.count2.data());
    PAQ_CUDA_CHECK_LAUNCH();
}

void stream_detector::detect(std::span<const cf32> v, std::size_t streams, const dsp::pll_gains& acq,
                             const dsp::pll_gains& track, const dsp::pll_gains& boot, std::span<std::uint8_t> bits,
                             std::span<dsp::path_stats> stats)
{
    auto& m = *impl_;
    if (streams > m.max_streams || v.size() != streams * nbits || bits.size() != streams * data_bytes || stats.size() != streams) {
        throw std::invalid_argument("stream_detector: sizes differ or exceed max_streams");
    }
    if (streams == 0) return;
    PAQ_CUDA_CHECK(cudaSetDevice(m.device));
    const auto s = m.st.get();
    PAQ_CUDA_CHECK(cudaMemcpyAsync(m.v.data(), v.data(), v.size() * sizeof(cf32), cudaMemcpyHostToDevice, s));
    detect_device(streams, acq, track, boot, s);
    PAQ_CUDA_CHECK(cudaMemcpyAsync(bits.data(), m.bits.data(), bits.size(), cudaMemcpyDeviceToHost, s));
    PAQ_CUDA_CHECK(cudaMemcpyAsync(stats.data(), m.stats.data(), streams * sizeof(dsp::path_stats), cudaMemcpyDeviceToHost, s));
    m.st.synchronize();
}

std::vector<cf64> pll_rotations(int device_id, std::span<const double> theta)
{
    select_device(device_id);
    const int n = static_cast<int>(theta.size());
    std::vector<cf64> out(theta.size());
    if (n == 0) return out;
    device_buffer<double> d_theta(theta.size());
    device_buffer<cuDoubleComplex> d_out(theta.size());
    PAQ_CUDA_CHECK(cudaMemcpy(d_theta.data(), theta.data(), theta.size_bytes(), cudaMemcpyHostToDevice));
    rotation_kernel<<<static_cast<unsigned>((n + 255) / 256), 256>>>(d_theta.data(), n, d_out.data());
    PAQ_CUDA_CHECK_LAUNCH();
    static_assert(sizeof(cf64) == sizeof(cuDoubleComplex));
    PAQ_CUDA_CHECK(cudaMemcpy(out.data(), d_out.data(), theta.size() * sizeof(cf64), cudaMemcpyDeviceToHost));
    return out;
}

}  // namespace paq::gpu
