#include "config/schema.hpp"

#include "config/schema_support.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <sstream>
#include <stdexcept>

namespace paq::config {

namespace {

/// A bound as a person writes it: integers with every digit; other numbers in their
/// shortest form, round thousands and millions as 200e3, 30e6, 1e9, small ones as 1e-6.
std::string bound_text(double v, bool integer)
{
    if (integer || (v == std::floor(v) && std::fabs(v) < 1e18)) {
        const auto n = static_cast<long long>(v);
        if (!integer && n != 0) {
            int zeros = 0;
            for (long long m = n; m % 10 == 0; m /= 10) ++zeros;
            // The largest power of 1000 that leaves a mantissa of at most three digits (1e8
            // rather than 100e6).
            for (int e = zeros - zeros % 3; e >= 3; e -= 3) {
                const long long m = n / static_cast<long long>(std::pow(10.0, e));
                if (std::llabs(m) == 10 || std::llabs(m) == 100) return (m < 0 ? "-1e" : "1e") + std::to_string(zeros);
                if (std::llabs(m) < 1000) return std::to_string(m) + "e" + std::to_string(e);
            }
        }
        return std::to_string(n);
    }
    std::string s = detail::format_double(v);  // "1e-06"
    if (const auto e = s.find('e'); e != std::string::npos) {
        std::string exponent = s.substr(e + 1);
        const bool negative = exponent.front() == '-';
        exponent.erase(0, exponent.find_first_not_of("+-0"));
        s = s.substr(0, e + 1) + (negative ? "-" : "") + exponent;
    }
    return s;
}

bool is_power_of_two(double x)
{
    if (!(x >= 1.0) || x != std::floor(x) || x > 9.0e15) return false;
    const auto n = static_cast<std::uint64_t>(x);
    return (n & (n - 1)) == 0;
}

std::string labelled(double v, bool integer, const std::string& label)
{
    return bound_text(v, integer) + (label.empty() ? "" : " (" + label + ")");
}

std::string cell(std::string text)
{
    std::string out;
    for (const char c : text) {
        if (c == '|') out += '\\';
        out += c;
    }
    return out;
}

}  // namespace

bool numeric_range::allows(double x) const noexcept
{
    if (!values.empty()) return std::find(values.begin(), values.end(), x) != values.end();
    if (also && x == *also) return true;
    const bool in = (lo_open ? x > lo : x >= lo) && (hi_open ? x < hi : x <= hi);  // false for NaN
    return in && (!power_of_two || is_power_of_two(x));
}

std::string numeric_range::text() const
{
    if (!values.empty()) {
        std::string out;
        for (std::size_t i = 0; i < values.size(); ++i) {
            if (i > 0) out += i + 1 == values.size() ? " or " : ", ";
            out += labelled(values[i], true, i < labels.size() ? labels[i] : std::string());
        }
        return out;
    }
    std::string out;
    if (also) out += labelled(*also, integer, also_label) + " or ";
    if (power_of_two) out += "a power of two, ";
    const std::string l = bound_text(lo, integer);
    const std::string h = bound_text(hi, integer);
    if (!lo_open && !hi_open) return out + l + " .. " + h;
    return out + l + (lo_open ? " < x " : " <= x ") + (hi_open ? "< " : "<= ") + h;
}

const std::vector<field_info>& schema()
{
    static const std::vector<field_info> fields = [] {
        std::vector<field_info> out;
        // A named, heap-held default (not a temporary): GCC 12 at -O3 warns maybe-uninitialized
        // on the temporary's inlined string members, a false positive.
        const auto defaults = std::make_unique<const daemon_config>();
        detail::daemon_schema().describe(*defaults, "", out);
        return out;
    }();
    return fields;
}

std::vector<std::string> schema_sections()
{
    std::vector<std::string> out;
    for (const auto& f : schema()) {
        if (out.empty() || out.back() != f.section) out.push_back(f.section);
    }
    return out;
}

std::string schema_markdown(std::string_view section)
{
    std::string out = "| key | default | allowed | unit | meaning |\n|---|---|---|---|---|\n";
    bool any = false;
    for (const auto& f : schema()) {
        if (f.section != section) continue;
        any = true;
        out += "| `" + f.key + "` | " + cell(f.default_text) + " | " + cell(f.allowed) + " | " + cell(f.unit) + " | " +
               cell(f.doc) + " |\n";
    }
    if (!any) throw std::invalid_argument("no configuration section '" + std::string(section) + "'");
    return out;
}

std::string update_schema_markdown(std::string_view markdown)
{
    constexpr std::string_view begin = "<!-- schema:begin ";
    constexpr std::string_view end = "<!-- schema:end -->";
    std::vector<std::string> seen;
    std::string out;
    std::istringstream in{std::string(markdown)};
    std::string line;
    int line_number = 0;
    while (std::getline(in, line)) {
        ++line_number;
        out += line + "\n";
        if (!line.starts_with(begin) || !line.ends_with(" -->")) continue;
        const std::string section = line.substr(begin.size(), line.size() - begin.size() - 4);
        const int begin_line = line_number;
        out += schema_markdown(section);
        seen.push_back(section);
        bool closed = false;
        while (std::getline(in, line)) {
            ++line_number;
            if (line == end) {
                out += line + "\n";
                closed = true;
                break;
            }
        }
        if (!closed) {
            throw std::invalid_argument("line " + std::to_string(begin_line) + ": '<!-- schema:begin " + section +
                                        " -->' has no '" + std::string(end) + "' after it");
        }
    }
    if (!markdown.empty() && markdown.back() != '\n') out.pop_back();
    for (const auto& s : schema_sections()) {
        if (std::find(seen.begin(), seen.end(), s) == seen.end()) {
            throw std::invalid_argument("no '<!-- schema:begin " + s + " -->' region for section " + s);
        }
    }
    return out;
}

namespace {

/// Text for a roff line: backslashes escaped, '-' as \-, Markdown's backticks dropped, and a
/// leading '.' or '\'' kept from being read as a request.
std::string roff(std::string_view text)
{
    std::string out;
    for (const char c : text) {
        if (c == '\\') {
            out += "\\e";
        } else if (c == '-') {
            out += "\\-";
        } else if (c != '`') {
            out += c;
        }
    }
    if (!out.empty() && (out.front() == '.' || out.front() == '\'')) out.insert(0, "\\&");
    return out;
}

}  // namespace

std::string schema_man_page(std::string_view version)
{
    std::string m;
    m += ".TH PAQD.YAML 5 \"\" \"paqd " + roff(version) + "\" \"File Formats\"\n";
    m += ".SH NAME\npaqd.yaml \\- configuration of the paqd telemetry receiver\n";
    m += ".SH SYNOPSIS\n/etc/paqd/paqd.yaml\n";
    m += ".SH DESCRIPTION\n"
         "The configuration of \\fBpaqd\\fR(8): a YAML mapping of the sections below. Every key is "
         "optional and takes the default shown; an unknown key, a value of the wrong type or one outside "
         "its range stops paqd with a message naming the file, the line, the key and what is allowed "
         "(exit status 2). \\fBpaqd \\-\\-config FILE \\-\\-check\\-config\\fR validates a file and prints "
         "the effective configuration. Relative paths are taken from the file's directory.\n";
    m += ".PP\nThis page is generated from the schema paqd checks the file against; "
         "/usr/share/doc/paqd/DAEMON.md explains each section at length.\n";
    std::string section;
    for (const auto& f : schema()) {
        if (f.section != section) {
            section = f.section;
            m += ".SH " + roff(section) + "\n";
        }
        m += ".TP\n.B " + roff(f.key) + "\n";
        std::string line = f.type;
        if (!f.default_text.empty()) line += "; default " + f.default_text;
        if (!f.allowed.empty()) line += "; " + f.allowed;
        if (!f.unit.empty()) line += "; unit " + f.unit;
        m += roff(line) + "\n";
        if (!f.doc.empty()) m += ".br\n" + roff(f.doc) + "\n";
    }
    m += ".SH FILES\n.TP\n/etc/paqd/paqd.yaml\nthe service's configuration (a conffile: an upgrade keeps your edits)\n";
    m += ".SH SEE ALSO\n\\fBpaqd\\fR(8), /usr/share/doc/paqd/DAEMON.md\n";
    return m;
}

}  // namespace paq::config
