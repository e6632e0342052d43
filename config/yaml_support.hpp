// Shared pieces of the YAML configuration parsers (config/ only): bounded loading, error
// collection with line numbers, YAML 1.2 core-schema number parsing, and value formatting.
#pragma once

#include "config/receiver_yaml.hpp"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace paq::config::detail {

inline std::string join_lines(const std::vector<std::string>& lines)
{
    std::string out;
    for (const auto& line : lines) {
        if (!out.empty()) {
            out += '\n';
        }
        out += line;
    }
    return out;
}

// Case-insensitive edit distance, for the "did you mean" hint on an unknown key.
inline std::size_t edit_distance(std::string_view a, std::string_view b)
{
    const auto lower = [](char c) {
        return static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    };
    std::vector<std::size_t> row(b.size() + 1);
    for (std::size_t j = 0; j <= b.size(); ++j) {
        row[j] = j;
    }
    for (std::size_t i = 1; i <= a.size(); ++i) {
        std::size_t diagonal = row[0];
        row[0] = i;
        for (std::size_t j = 1; j <= b.size(); ++j) {
            const std::size_t above = row[j];
            const std::size_t substitution = diagonal + (lower(a[i - 1]) == lower(b[j - 1]) ? 0 : 1);
            row[j] = std::min({above + 1, row[j - 1] + 1, substitution});
            diagonal = above;
        }
    }
    return row[b.size()];
}

// ---------------------------------------------------------------------------------------
// Error collection. Every problem in a file is reported at once, so that fixing a config
// is not a loop of one error per daemon start.

class error_list {
public:
    explicit error_list(std::string_view source) : source_(source) {}

    /// mark: where in the document; a null mark (or a line yaml-cpp does not know) gives
    /// "<source>: text".
    void add(const YAML::Mark& mark, const std::string& text)
    {
        const int line = mark.is_null() ? -1 : mark.line;
        std::string message(source_);
        if (line >= 0) {
            message += ':';
            message += std::to_string(line + 1);  // yaml-cpp counts from 0
        }
        message += ": ";
        message += text;
        entries_.push_back({line, std::move(message)});
    }

    /// Throws config_error with the messages in file order (parse errors are found before
    /// range errors, but the reader goes through the file top to bottom).
    void throw_if_any()
    {
        if (entries_.empty()) {
            return;
        }
        std::stable_sort(entries_.begin(), entries_.end(),
                         [](const entry& a, const entry& b) { return a.line < b.line; });
        std::vector<std::string> messages;
        messages.reserve(entries_.size());
        for (auto& e : entries_) {
            messages.push_back(std::move(e.message));
        }
        throw config_error(std::move(messages));
    }

private:
    struct entry {
        int line;  // 0-based, -1 when unknown
        std::string message;
    };
    std::string source_;
    std::vector<entry> entries_;
};

// ---------------------------------------------------------------------------------------
// Loading. yaml-cpp 0.7 (Debian 12) is not safe on arbitrary text:
//  - A ',' (or ']'-less flow punctuation) where a document's node should start is neither
//    consumed nor reported: SingleDocParser::HandleNode falls through to OnNull without
//    popping the token, so LoadAll's loop gets an endless stream of null documents, each
//    pushed onto its vector (yaml-cpp bug jbeder/yaml-cpp#1040, fixed upstream by PRs 1318/1319 in 0.8.x).
//    ",", "--- ,", "!!str ," and "&x ," all loop with growing memory.
//  - Nesting recurses once per level; yaml-cpp stops at depth 500 with the message "bad file"
//    and a wrong position.
//  - An alias may refer to the node that contains it ("&a [*a]"), a cyclic node graph.
// So every text first goes through a parser with a checking event handler, which throws at
// the first document that starts where the previous one did (no progress), at nesting deeper
// than max_yaml_depth, at more than max_yaml_aliases aliases or a cyclic one; only text that
// passes is handed to YAML::LoadAll, which then follows the same path and terminates.

/// A configuration file is a few KiB; 1 MiB leaves room for long comments and stops a
/// runaway (a device, a log file given by mistake) before it costs memory or time.
inline constexpr std::size_t max_config_bytes = std::size_t{1} << 20;
/// paqd's deepest key is 3 levels down (source.file.path); 64 allows any sane layout and
/// stays far below yaml-cpp's own recursion limit (500).
inline constexpr int max_yaml_depth = 64;
/// Anchors and aliases are legitimate for repeated settings; hundreds are not.
inline constexpr std::size_t max_yaml_aliases = 256;

class yaml_guard final : public YAML::EventHandler {
public:
    explicit yaml_guard(std::string_view text, std::string_view source) : text_(text), source_(source) {}

    void OnDocumentStart(const YAML::Mark& mark) override
    {
        if (documents_ > 0 && mark.pos == last_document_pos_) {
            std::string what = "YAML syntax error: ";
            const auto at = static_cast<std::size_t>(mark.pos);
            if (at < text_.size()) {
                what += "unexpected '" + std::string(1, text_[at]) + "' where a value or a key was expected";
            } else {
                what += "the parser made no progress";
            }
            fail(mark, what);
        }
        ++documents_;
        last_document_pos_ = mark.pos;
    }
    void OnDocumentEnd() override {}
    void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
    void OnAlias(const YAML::Mark& mark, YAML::anchor_t anchor) override
    {
        if (++aliases_ > max_yaml_aliases) {
            fail(mark, "more than " + std::to_string(max_yaml_aliases) + " aliases (*name)");
        }
        if (std::find(open_anchors_.begin(), open_anchors_.end(), anchor) != open_anchors_.end()) {
            fail(mark, "an alias refers to a node that contains it (a cycle)");
        }
    }
    void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override {}
    void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                         YAML::EmitterStyle::value) override
    {
        open(mark, anchor);
    }
    void OnSequenceEnd() override { close(); }
    void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor, YAML::EmitterStyle::value) override
    {
        open(mark, anchor);
    }
    void OnMapEnd() override { close(); }

private:
    void open(const YAML::Mark& mark, YAML::anchor_t anchor)
    {
        if (++depth_ > max_yaml_depth) {
            fail(mark, "nesting deeper than the limit of " + std::to_string(max_yaml_depth) + " levels");
        }
        open_anchors_.push_back(anchor);
    }
    void close()
    {
        --depth_;
        open_anchors_.pop_back();
    }
    [[noreturn]] void fail(const YAML::Mark& mark, const std::string& what) const
    {
        std::string message(source_);
        if (!mark.is_null()) {
            message += ':' + std::to_string(mark.line + 1) + ':' + std::to_string(mark.column + 1);
        }
        throw config_error({message + ": " + what});
    }

    std::string_view text_;
    std::string_view source_;
    std::size_t documents_ = 0;
    int last_document_pos_ = -1;
    int depth_ = 0;
    std::size_t aliases_ = 0;
    std::vector<YAML::anchor_t> open_anchors_;  // 0 for nodes without an anchor
};

/// The documents of yaml_text, loaded only after the checks above. Throws config_error,
/// every message starting with source_name (and line:column where known), for text over
/// max_config_bytes, a YAML syntax error, or input that would loop or recurse deeply.
[[nodiscard]] inline std::vector<YAML::Node> load_yaml_documents(std::string_view yaml_text, std::string_view source_name)
{
    if (yaml_text.size() > max_config_bytes) {
        throw config_error({std::string(source_name) + ": configuration is " + std::to_string(yaml_text.size()) +
                            " bytes, more than the " + std::to_string(max_config_bytes) + "-byte limit"});
    }
    const std::string text(yaml_text);
    try {
        std::istringstream in(text);
        YAML::Parser parser(in);
        yaml_guard guard(text, source_name);
        while (parser.HandleNextDocument(guard)) {
        }
        return YAML::LoadAll(text);
    } catch (const YAML::Exception& e) {
        std::string message(source_name);
        if (!e.mark.is_null()) {
            message += ':' + std::to_string(e.mark.line + 1) + ':' + std::to_string(e.mark.column + 1);
        }
        message += ": YAML syntax error: " + e.msg;
        throw config_error({std::move(message)});
    }
}

// ---------------------------------------------------------------------------------------
// Scalars. yaml-cpp's own as<T>() goes through iostreams, which accept things a config file
// should not ("12abc" is no integer, "nan" is a string in YAML 1.2), so numbers are
// recognised here by the YAML 1.2 core schema rules and converted with from_chars.

enum class number_status { ok, not_a_number, out_of_range };

// YAML 1.2 core schema integers: [-+]?[0-9]+ | 0o[0-7]+ | 0x[0-9a-fA-F]+
template <typename T>
number_status parse_integer(std::string_view text, T& out) noexcept
{
    static_assert(std::is_integral_v<T>);
    bool negative = false;
    int base = 10;
    std::string_view digits = text;
    if (digits.starts_with("0x")) {
        base = 16;
        digits.remove_prefix(2);
    } else if (digits.starts_with("0o")) {
        base = 8;
        digits.remove_prefix(2);
    } else if (!digits.empty() && (digits.front() == '+' || digits.front() == '-')) {
        negative = digits.front() == '-';
        digits.remove_prefix(1);
    }
    // from_chars would accept a second sign; the grammar does not.
    if (digits.empty() || digits.front() == '+' || digits.front() == '-') {
        return number_status::not_a_number;
    }
    std::uint64_t magnitude = 0;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), magnitude, base);
    if (end != digits.data() + digits.size()) {
        return number_status::not_a_number;
    }
    if (ec == std::errc::result_out_of_range) {
        return number_status::out_of_range;
    }
    if (ec != std::errc{}) {
        return number_status::not_a_number;
    }
    using limits = std::numeric_limits<T>;
    if (negative) {
        if constexpr (std::is_unsigned_v<T>) {
            if (magnitude != 0) {
                return number_status::out_of_range;
            }
            out = 0;
        } else {
            // -(min+1) + 1 avoids overflowing on the most negative value.
            const auto max_magnitude = static_cast<std::uint64_t>(-(limits::min() + 1)) + 1;
            if (magnitude > max_magnitude) {
                return number_status::out_of_range;
            }
            out = magnitude == max_magnitude ? limits::min()
                                             : static_cast<T>(-static_cast<T>(magnitude));
        }
        return number_status::ok;
    }
    if (magnitude > static_cast<std::uint64_t>(limits::max())) {
        return number_status::out_of_range;
    }
    out = static_cast<T>(magnitude);
    return number_status::ok;
}

// YAML 1.2 core schema floats (integers included):
//   [-+]? ( \.[0-9]+ | [0-9]+ ( \.[0-9]* )? ) ( [eE] [-+]? [0-9]+ )?  |  [-+]? \.inf  |  \.nan
inline bool is_core_float_syntax(std::string_view s) noexcept
{
    const auto is_digit = [](char c) { return c >= '0' && c <= '9'; };
    std::size_t i = 0;
    const auto digit_run = [&] {
        const std::size_t start = i;
        while (i < s.size() && is_digit(s[i])) {
            ++i;
        }
        return i - start;
    };
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) {
        ++i;
    }
    const std::size_t int_digits = digit_run();
    std::size_t frac_digits = 0;
    if (i < s.size() && s[i] == '.') {
        ++i;
        frac_digits = digit_run();
    }
    if (int_digits == 0 && frac_digits == 0) {
        return false;
    }
    if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
        ++i;
        if (i < s.size() && (s[i] == '+' || s[i] == '-')) {
            ++i;
        }
        if (digit_run() == 0) {
            return false;
        }
    }
    return i == s.size();
}

inline number_status parse_double(std::string_view text, double& out) noexcept
{
    std::string_view body = text;
    bool negative = false;
    if (!body.empty() && (body.front() == '+' || body.front() == '-')) {
        negative = body.front() == '-';
        body.remove_prefix(1);
    }
    if (body == ".inf" || body == ".Inf" || body == ".INF") {
        out = negative ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
        return number_status::ok;
    }
    if (text == ".nan" || text == ".NaN" || text == ".NAN") {
        out = std::numeric_limits<double>::quiet_NaN();
        return number_status::ok;
    }
    if (!is_core_float_syntax(text)) {
        return number_status::not_a_number;
    }
    // body has no sign left (from_chars rejects '+', and the sign is applied below).
    double magnitude = 0.0;
    const auto [end, ec] =
        std::from_chars(body.data(), body.data() + body.size(), magnitude, std::chars_format::general);
    if (ec == std::errc::result_out_of_range) {
        return number_status::out_of_range;
    }
    if (ec != std::errc{} || end != body.data() + body.size()) {
        return number_status::not_a_number;
    }
    out = negative ? -magnitude : magnitude;
    return number_status::ok;
}

template <typename T>
constexpr const char* expected_type_name() noexcept
{
    if constexpr (std::is_floating_point_v<T>) {
        return "a number";
    } else if constexpr (std::is_unsigned_v<T>) {
        return "a non-negative integer";
    } else {
        return "an integer";
    }
}

inline std::string describe_value(const YAML::Node& node)
{
    switch (node.Type()) {
    case YAML::NodeType::Null:
        return "no value";
    case YAML::NodeType::Sequence:
        return "a sequence";
    case YAML::NodeType::Map:
        return "a mapping";
    case YAML::NodeType::Scalar:
        return "'" + node.Scalar() + "'";
    case YAML::NodeType::Undefined:
        break;
    }
    return "an undefined node";
}

// Whether the scalar's tag lets it be read as a T. yaml-cpp tags plain scalars "?" (type
// from the text) and quoted ones "!" (a string); explicit tags arrive expanded. An explicit
// !!int or !!float is accepted where the field takes that kind of number, !!str never.
template <typename T>
bool numeric_tag(const YAML::Node& node)
{
    const std::string& tag = node.Tag();
    if (tag == "?" || tag == "tag:yaml.org,2002:int") {
        return true;
    }
    return std::is_floating_point_v<T> && tag == "tag:yaml.org,2002:float";
}

inline const char* node_kind(const YAML::Node& node) noexcept
{
    switch (node.Type()) {
    case YAML::NodeType::Null:
        return "null";
    case YAML::NodeType::Scalar:
        return "scalar";
    case YAML::NodeType::Sequence:
        return "sequence";
    case YAML::NodeType::Map:
        return "mapping";
    case YAML::NodeType::Undefined:
        break;
    }
    return "undefined node";
}

inline std::string format_double(double value)
{
    // YAML spellings, which parse_double reads back (to_chars would write "inf", "nan").
    if (std::isnan(value)) {
        return ".nan";
    }
    if (std::isinf(value)) {
        return value > 0 ? ".inf" : "-.inf";
    }
    // Shortest representation that reads back to the same double: exact round trip
    // without the 17-digit noise of printf("%.17g").
    std::array<char, 64> buffer{};
    const auto [end, ec] = std::to_chars(buffer.data(), buffer.data() + buffer.size(), value);
    if (ec != std::errc{}) {
        // 64 characters hold any double; reaching this is a library bug, not bad input.
        throw std::logic_error("to_chars failed for a double");
    }
    return std::string(buffer.data(), end);
}


}  // namespace paq::config::detail
