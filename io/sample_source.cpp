#include "io/sample_source.hpp"

#include <cmath>
#include <ctime>
#include <stdexcept>

namespace paq::io {

std::vector<source_counter_value> counter_values(std::span<const source_counter> list, std::initializer_list<double> values)
{
    if (values.size() != list.size()) {
        throw std::logic_error("counter_values: " + std::to_string(values.size()) + " values for " + std::to_string(list.size()) +
                               " counters");
    }
    std::vector<source_counter_value> out;
    out.reserve(list.size());
    auto v = values.begin();
    for (const auto& c : list) out.push_back({&c, *v++});
    return out;
}

std::int64_t host_utc_ns() noexcept
{
    timespec ts{};
    ::clock_gettime(CLOCK_REALTIME, &ts);
    return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

time_anchor host_clock_anchor(std::uint64_t first_sample_index, std::size_t n, double sample_rate_hz) noexcept
{
    const double duration_ns = sample_rate_hz > 0.0 ? static_cast<double>(n) * 1e9 / sample_rate_hz : 0.0;
    return {first_sample_index, host_utc_ns() - static_cast<std::int64_t>(std::llround(duration_ns))};
}

}  // namespace paq::io
