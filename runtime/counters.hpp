// The counters: one registry. Every counter and gauge paqd reports, live or replaying a
// recording, has one entry here, under one name, and the status line, the --json-out summary
// (the live service's and paqd replay's), the Prometheus endpoint and the final log all read
// them from here:
//
//   Prometheus   paqd_<name> (a counter: paqd_<name>_total); per path
//                paqd_path_<name>{path="mmse"}; by gap reason paqd_<name>_total{reason="stall"};
//                a histogram paqd_<name>_bucket{le="..."}, _sum, _count; paqd_build_info{...} 1.
//                An entry may name its Prometheus metric itself (`prom`) where the derived
//                name breaks Prometheus's naming rules (promtool check metrics).
//   --json-out   "<name>": value; per path in "paths": [{"path": "mmse", "<name>": value}];
//                by gap reason "<name>": {"stall": n, ...}; a histogram "<name>": {"le": [...],
//                "counts": [cumulative], "sum": s, "count": n}; "build_info": {...}
//   final log    "counters: <name>=<value> ..." (every counter present), per path one line,
//                a histogram and the build one line each
//   status line  a fixed selection, read by name (value_of)
//
// "Per path" is per output stream: the six paths, or twelve with receiver.detector both (the
// trellis's named `mmse_trellis` etc., dsp::stream_name), as many as the tally has.
//
// A counter that does not apply (the ring's and the source's in a replay, VITA-49 counters for
// another source, the publisher's when it is off, the PN counts without a pattern) is absent
// from all of them. Each owner hands over its own values: the engine (runtime::stream_stats),
// the ring (io::ring_counters), the source (its common counters and its kind's list), the
// publisher, the records and the recorder. The counters of one
// kind of source are the source's own (io::sample_source::kind_counters): the registry reports
// whatever the running source lists, in the same four places.
#pragma once

#include "io/ring_buffer.hpp"
#include "io/sample_source.hpp"
#include "runtime/stream_engine.hpp"

#include <nlohmann/json.hpp>

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace paq::runtime {

/// Everything the registry reads, gathered at one moment.
struct service_snapshot {
    stream_stats engine;  ///< the stream engine's (live and replay)
    std::optional<io::ring_counters> ring;  ///< a live source's ring (absent in a replay)
    /// The error that ended the run: the source's, or (prefixed "receiver: ") the engine's own.
    std::optional<std::string> source_error;
    bool have_pattern = true;
    struct source_values {
        std::string description;
        std::uint64_t samples = 0, packets = 0, packets_lost = 0, samples_lost = 0, malformed = 0, refused = 0,
                      reconnects = 0, nonfinite = 0;
    };
    std::optional<source_values> source;  ///< a live source (absent in a replay)
    /// The counters of the source's kind (VITA-49's, TCP's ...), as the source lists them
    /// (io::sample_source::kind_counters); reported after the source's common ones.
    std::vector<io::source_counter_value> source_kind;
    struct publisher_values {
        std::array<std::uint64_t, dsp::chain::max_streams> datagrams_sent{}, send_errors{};  ///< per stream
        std::uint64_t packets_published = 0;
        bool soft = false;  ///< any soft stream (publisher.llr_destinations)
        std::uint64_t llr_datagrams_sent = 0, llr_send_errors = 0;  ///< the soft streams'
        std::uint64_t llr_bytes_sent = 0;
        bool decoded = false;  ///< any decoded stream (publisher.decoded_destinations)
        std::uint64_t decoded_datagrams_sent = 0, decoded_send_errors = 0;  ///< the decoded streams'
        std::uint64_t decoded_bytes_sent = 0;
        bool best = false;  ///< the best-path stream (publisher.best_destination)
        std::uint64_t best_datagrams_sent = 0, best_send_errors = 0;
    };
    std::optional<publisher_values> publisher;  ///< publisher enabled
    struct records_values {
        std::uint64_t rows = 0, rows_lost = 0;
    };
    std::optional<records_values> records;  ///< per-packet records on
    struct recording_values {
        std::uint64_t samples = 0, dropped = 0;
    };
    std::optional<recording_values> recording;  ///< SigMF recording on
};

enum class metric_type : std::uint8_t { counter, gauge };

/// One number.
struct scalar_metric {
    const char* name;
    metric_type type;
    const char* help;
    double (*value)(const service_snapshot&);
    bool (*present)(const service_snapshot&);  ///< nullptr: always
    bool integral;                              ///< an integer count (JSON and log print it so)
    const char* prom = nullptr;                 ///< the Prometheus name, when not the derived one
};

/// One number per path (none, zf, mmse, cma, fde1, fde2).
struct path_metric {
    const char* name;
    metric_type type;
    const char* help;
    double (*value)(const service_snapshot&, int path);
    bool (*present)(const service_snapshot&);
    bool integral;
    const char* prom = nullptr;  ///< the Prometheus name (with {path}), when not the derived one
};

/// A histogram's state at one moment: counts per bucket, cumulative (counts[i]: observations
/// <= bounds[i]), then the total count (the +Inf bucket) and the sum of the observations.
struct histogram_values {
    std::vector<double> bounds;
    std::vector<std::uint64_t> cumulative;
    std::uint64_t count = 0;
    double sum = 0.0;
};

/// A distribution (Prometheus histogram): paqd_<name>_bucket{le}, _sum, _count.
struct histogram_metric {
    const char* name;  ///< with its unit, e.g. batch_latency_seconds
    const char* help;
    histogram_values (*value)(const service_snapshot&);
};

/// The scalars, the source's kind counters not included (they are the source's).
[[nodiscard]] const std::vector<scalar_metric>& scalar_metrics();
[[nodiscard]] const std::vector<path_metric>& path_metrics();
[[nodiscard]] const std::vector<histogram_metric>& histogram_metrics();
/// The Prometheus name of an entry: its `prom`, or paqd_[path_]<name>[_total].
[[nodiscard]] std::string prometheus_name(const scalar_metric& m);
[[nodiscard]] std::string prometheus_name(const path_metric& m);

/// What was built: paqd_build_info{version,commit,cuda} 1 (a gauge, the Prometheus idiom for
/// labels that describe the process), "build_info": {...} in the JSON, "build: ..." in the log.
struct build_info_values {
    std::string version;  ///< the project version (--version)
    std::string commit;   ///< `git describe --always --dirty` when CMake configured the build; "unknown" outside git
    bool cuda = false;    ///< the CUDA backend is compiled in
};
[[nodiscard]] build_info_values build_info();
inline constexpr const char* build_info_name = "build_info";
/// The by-reason family: gaps_by_reason (reasons: io::to_string(io::gap_reason)).
inline constexpr const char* gaps_by_reason_name = "gaps_by_reason";

/// A scalar's value by name; throws std::out_of_range for a name not in the registry or not
/// present in this snapshot.
[[nodiscard]] double value_of(const service_snapshot& s, std::string_view name);
/// A per-path value by name.
[[nodiscard]] double path_value_of(const service_snapshot& s, std::string_view name, int path);

[[nodiscard]] std::string render_prometheus(const service_snapshot& s);
[[nodiscard]] nlohmann::json to_json(const service_snapshot& s);
/// The final log's counter lines (without the "final: <status line>" before them).
[[nodiscard]] std::vector<std::string> final_log_lines(const service_snapshot& s);
/// A kind of source that keeps counters of its own (io::sample_source::kind_counters), and
/// their list: for the registry's docs table (counters_markdown).
struct source_kind_counters {
    const char* kind;  ///< "VITA-49 source"
    std::span<const io::source_counter> counters;
};
/// The registry as the markdown table in docs/DAEMON.md (a test keeps the two equal), the
/// counters of each kind of source (the source factory's list) in their place.
[[nodiscard]] std::string counters_markdown(std::span<const source_kind_counters> kinds);
/// The status line (also sent to systemd as STATUS=): the intake rate over the last
/// `interval_s` when `previous` is given.
[[nodiscard]] std::string status_line(const service_snapshot& s, const service_snapshot* previous, double interval_s);

}  // namespace paq::runtime
