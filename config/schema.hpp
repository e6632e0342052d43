// The configuration schema: one table of fields per section, which drives parsing, the range
// checks, to_yaml and the key tables of docs/DAEMON.md. Each field has its
// YAML key, how it reaches its member, its type, ONE allowed range (or set of values), its
// unit, its default (taken from the structs' own defaults) and a line of documentation.
//
// The public part (field_info, schema(), schema_markdown()) lets the tests walk every field
// and the doc tool print the tables; the builders in detail:: are for config/ only.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace paq::config {

/// The values a numeric field accepts: a closed or open interval (optionally restricted to
/// powers of two, optionally with one extra value outside it such as 0 for "unset"), or an
/// explicit set of values.
struct numeric_range {
    double lo = 0.0;
    double hi = 0.0;
    bool lo_open = false;  ///< lo < x instead of lo <= x
    bool hi_open = false;  ///< x < hi instead of x <= hi
    bool integer = false;  ///< the field is an integer: bounds are written with every digit
    bool power_of_two = false;
    std::optional<double> also;  ///< one more value, outside [lo, hi], e.g. 0 (unpaced)
    std::string also_label;      ///< what it means, e.g. "unpaced"
    /// Non-empty: exactly these values (lo, hi and the rest unused), with their labels
    /// (same length, an empty label for none).
    std::vector<double> values;
    std::vector<std::string> labels;

    [[nodiscard]] bool allows(double x) const noexcept;
    /// As the docs and the error messages write it: "-3 .. 71", "0 < x <= 0.1",
    /// "a power of two, 16384 .. 1048576", "0 (unpaced) or 1 .. 1e8", "0 (off) or 1 (on)".
    [[nodiscard]] std::string text() const;
};

/// One key of the configuration, as the schema describes it.
struct field_info {
    std::string section;  ///< "receiver", "source", "source.iio", ...
    std::string key;      ///< "gain_db"
    /// number, integer, boolean, string, path, choice, list, mapping, or section (a
    /// sub-section with a table of its own)
    std::string type;
    std::string allowed;  ///< the allowed values as docs and errors write them
    std::string unit;     ///< "dB", "Hz", "s", ... or empty
    std::string default_text;  ///< the code default as YAML would write it, or a description
    std::string doc;           ///< what it means
    std::optional<numeric_range> range;  ///< numbers
    std::vector<std::string> choices;    ///< choice: every accepted spelling
};

/// Every field of every section, sections in document order (receiver, source, source.file,
/// ..., log), each section's fields in the order to_yaml writes them.
[[nodiscard]] const std::vector<field_info>& schema();

/// The sections that have a key table, in document order ("receiver", "source",
/// "source.file", ...).
[[nodiscard]] std::vector<std::string> schema_sections();

/// The Markdown key table of one section (header, separator, one row per key). Throws
/// std::invalid_argument for an unknown section.
[[nodiscard]] std::string schema_markdown(std::string_view section);

/// paqd.yaml(5): the configuration file's man page (roff), every section and key of the
/// schema with its default, allowed values, unit and meaning; `version` in its header.
[[nodiscard]] std::string schema_man_page(std::string_view version);

/// `markdown` with the text between each "<!-- schema:begin SECTION -->" line and the next
/// "<!-- schema:end -->" line replaced by schema_markdown(SECTION). Throws
/// std::invalid_argument for an unknown section, a begin without an end, or a section of
/// the schema that has no such region.
[[nodiscard]] std::string update_schema_markdown(std::string_view markdown);

}  // namespace paq::config
