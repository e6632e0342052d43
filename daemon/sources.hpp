// The source named by the configuration, and the ring's overflow policy for it.
#pragma once

#include "config/daemon_config.hpp"
#include "io/ring_buffer.hpp"
#include "io/sample_source.hpp"
#include "runtime/counters.hpp"

#include <memory>
#include <span>

namespace paq::daemon {

/// Builds (and, for files, opens) the configured source. Throws naming the source and the
/// problem (missing file, bad address ...).
[[nodiscard]] std::unique_ptr<io::sample_source> make_source(const config::source_config& cfg);

/// Every kind of source that keeps counters of its own, with their list, in the order the
/// docs list them (runtime::counters_markdown).
[[nodiscard]] std::span<const runtime::source_kind_counters> kinds_with_counters();

/// ring.overflow, with "auto" resolved: block for file replay (nothing is lost; the file
/// waits) and TCP (back-pressure reaches the sender), drop for UDP, VITA-49 and libiio
/// (a live source cannot wait; dropped samples are counted and become a gap).
[[nodiscard]] io::overflow_policy overflow_for(const config::daemon_config& cfg);

}  // namespace paq::daemon
