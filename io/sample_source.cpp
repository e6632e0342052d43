#include "io/sample_source.hpp"

#include <cmath>
#include <ctime>

namespace paq::io {

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

std::string_view to_string(gap_reason r) noexcept
{
    switch (r) {
    case gap_reason::overflow: return "overflow";
    case gap_reason::lost_packets: return "lost-packets";
    case gap_reason::stall: return "stall";
    case gap_reason::reconnect: return "reconnect";
    case gap_reason::source_error: return "source-error";
    case gap_reason::discontinuity: return "discontinuity";
    }
    return "unknown";
}

}  // namespace paq::io
