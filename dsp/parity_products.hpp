// Sums of decision products over a range of one parity, from the decisions' autocorrelations:
// the normal equations of the symbol-by-symbol soft decisions (dsp/sxs_soft.hpp) and of the
// trellis's far interference (dsp/trellis_math.hpp) are both made this way, on both backends.
#pragma once

#include "dsp/iq_correction.hpp"  // PAQ_HOST_DEVICE

namespace paq::dsp {

/// The sum of d_m d_(m+lag) over the m of parity p in lo .. hi - 1 with 0 <= m and m + lag < n,
/// d the n +-1 decisions: autocorrelation[p * stride + lag] (that sum over every m of parity p
/// with m + lag < n) less the products of the m below lo and from hi on. Exact integers, whatever
/// type T the autocorrelations are summed in.
template <class T>
PAQ_HOST_DEVICE T parity_products_within(int p, int lag, int lo, int hi, const signed char* d, int n, const T* autocorrelation,
                                         int stride) noexcept
{
    T v = autocorrelation[p * stride + lag];
    for (int m = p; m < lo && m + lag < n; m += 2) v -= d[m] * d[m + lag];
    int m = hi > 0 ? hi : 0;
    if ((m & 1) != p) ++m;
    for (; m + lag < n; m += 2) v -= d[m] * d[m + lag];
    return v;
}

}  // namespace paq::dsp
