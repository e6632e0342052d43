#include "io/sample_source.hpp"

namespace paq::io {

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
