#include "dsp/estimators.hpp"

#include "dsp/waveform.hpp"

#include <cmath>

namespace paq::dsp {

double estimate_cfo(const cf64* r) noexcept
{
    constexpr int lq = static_cast<int>(waveform::L_q);
    cf64 acc = 0.0;
    // The first two periods carry channel and pulse memory of the data before the packet.
    for (int n = 2 * lq; n <= 7 * lq - 1; ++n) acc += r[n] * std::conj(r[n - lq]);
    return std::arg(acc) / lq;
}

void derotate(cf64* r, int first, int last, double w0) noexcept
{
    for (int n = first; n < last; ++n) r[n] *= std::polar(1.0, -w0 * n);
}

channel_estimate estimate_channel(const cf64* r, const receiver_tables& t) noexcept
{
    channel_estimate ce;
    const std::size_t M = t.M;
    const cf64* obs = r + t.obs_first;
    for (int a = 0; a < chain::L_ch; ++a) {
        cf64 s = 0.0;
        const cf64* row = t.X_lpi.data() + static_cast<std::size_t>(a) * M;
        for (std::size_t i = 0; i < M; ++i) s += row[i] * obs[i];
        ce.h[static_cast<std::size_t>(a)] = s;
        ce.energy += std::norm(s);
    }
    double res = 0.0;
    for (std::size_t i = 0; i < M; ++i) {
        cf64 s = 0.0;
        const cf64* row = t.X.data() + i * chain::L_ch;
        for (int a = 0; a < chain::L_ch; ++a) s += row[a] * ce.h[static_cast<std::size_t>(a)];
        res += std::norm(obs[i] - s);
    }
    ce.sigma2 = res / (2.0 * t.rho);
    return ce;
}

}  // namespace paq::dsp
