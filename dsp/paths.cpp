#include "dsp/paths.hpp"

namespace paq::dsp {

using namespace chain;

void path_response(eq_path p, const packet_equalizers& eq, const fft_plan& fwd, fft_buffer& c_spec)
{
    switch (p) {
    case eq_path::none: single_path_response(eq.unequalized, c_spec); break;
    case eq_path::zf: taps_to_spectrum(eq.zf.data(), -L1, L_eq, fwd, c_spec); break;
    case eq_path::mmse: taps_to_spectrum(eq.mmse.data(), -L1, L_eq, fwd, c_spec); break;
    case eq_path::cma: taps_to_spectrum(eq.cma.data(), -L1, L_eq, fwd, c_spec); break;
    case eq_path::fde1: fde_response(eq.h_spec, eq.sigma2, nullptr, c_spec); break;
    case eq_path::fde2: fde_response(eq.h_spec, eq.sigma2, eq.psi, c_spec); break;
    }
}

namespace {

template <class Filter>
void filter_path_by(const fft_buffer& r_spec, const fft_buffer& c_spec, const Filter& filter, const fft_plan& inv, fft_buffer& y)
{
    for (std::size_t k = 0; k < y.size(); ++k) y[k] = r_spec[k] * c_spec[k] * filter[k];
    inv.execute(y.data(), y.data());
}

template <class Filter>
void filter_paths_by(std::span<const fft_buffer* const> r_spec, std::span<const fft_buffer* const> c_spec, const Filter& filter,
                     const fft_plan& inv, fft_buffer& y)
{
    if (r_spec.size() == 1) {
        filter_path_by(*r_spec[0], *c_spec[0], filter, inv, y);
        return;
    }
    for (std::size_t k = 0; k < y.size(); ++k) {
        cf64 sum = 0.0;
        for (std::size_t c = 0; c < r_spec.size(); ++c) sum += (*r_spec[c])[k] * (*c_spec[c])[k];
        y[k] = sum * filter[k];
    }
    inv.execute(y.data(), y.data());
}

}  // namespace

void filter_paths(std::span<const fft_buffer* const> r_spec, std::span<const fft_buffer* const> c_spec, const fft_buffer& filter,
                  const fft_plan& inv, fft_buffer& y)
{
    filter_paths_by(r_spec, c_spec, filter, inv, y);
}

void filter_paths(std::span<const fft_buffer* const> r_spec, std::span<const fft_buffer* const> c_spec,
                  const std::vector<double>& filter, const fft_plan& inv, fft_buffer& y)
{
    filter_paths_by(r_spec, c_spec, filter, inv, y);
}

void filter_path(const fft_buffer& r_spec, const fft_buffer& c_spec, const fft_buffer& filter, const fft_plan& inv, fft_buffer& y)
{
    filter_path_by(r_spec, c_spec, filter, inv, y);
}

void filter_path(const fft_buffer& r_spec, const fft_buffer& c_spec, const std::vector<double>& filter, const fft_plan& inv,
                 fft_buffer& y)
{
    filter_path_by(r_spec, c_spec, filter, inv, y);
}

}  // namespace paq::dsp
