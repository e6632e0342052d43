// The schema machinery of config/schema.hpp (config/ only): a section is a table of fields,
// each knowing how to read its YAML value into the configuration (with its one range check),
// how to write it back, and how to describe itself for the docs. The builders below make the
// fields; config/receiver_yaml.cpp and config/daemon_yaml.cpp hold the tables.
#pragma once

#include "dsp/names.hpp"
#include "config/daemon_config.hpp"
#include "config/schema.hpp"
#include "config/yaml_support.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <initializer_list>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace paq::config::detail {

inline std::string join_path(const std::string& section, std::string_view key)
{
    return section.empty() ? std::string(key) : section + "." + std::string(key);
}

/// Where an error about a value goes: the value's position, or its key's for an empty value
/// (yaml-cpp places an empty value at the token after it, the next line).
inline YAML::Mark value_mark(const YAML::Node& value, const YAML::Mark& key_mark)
{
    return value.IsNull() || value.Mark().is_null() ? key_mark : value.Mark();
}

/// What parsing a document carries along: the errors, the directory relative paths resolve
/// against, and where each key the document sets is ("source.iio.gain_db" -> its line).
struct parse_context {
    error_list& errors;
    std::filesystem::path base_dir;
    std::map<std::string, YAML::Mark> marks;

    [[nodiscard]] bool has(const std::string& path) const { return marks.count(path) > 0; }

    /// The messages of a validate() of `section` ("port = 0 is out of range ..."), each as
    /// "section.port = 0 ...", at the line of the key the message starts with when the
    /// document sets it, else at the section's key, else at `fallback`.
    void report(const std::string& section, const std::vector<std::string>& messages, const YAML::Mark& fallback)
    {
        for (const auto& m : messages) {
            YAML::Mark mark = fallback;
            if (const auto it = marks.find(join_path(section, m.substr(0, m.find_first_of(" [:=")))); it != marks.end()) {
                mark = it->second;
            } else if (const auto s = marks.find(section); s != marks.end()) {
                mark = s->second;
            }
            errors.add(mark, join_path(section, m));
        }
    }
};

template <typename S>
struct field {
    field_info info;
    /// A sub-section: parsed (its checks run) even when the document leaves it out.
    bool is_section = false;
    /// Reads `value` (the key at key_mark, `path` = "section.key") into `target`; on an error
    /// adds it to ctx.errors and leaves `target` as it was.
    std::function<void(const YAML::Node& value, const YAML::Mark& key_mark, const std::string& path, S& target,
                       parse_context& ctx)>
        parse;
    /// Appends "<indent>key: value\n" (a sub-section: its lines), or nothing for an unset value.
    std::function<void(const S& config, int indent, std::string& out)> emit;
    /// Appends the field's description (a sub-section: its fields), defaults from `defaults`.
    std::function<void(const S& defaults, const std::string& section, std::vector<field_info>& out)> describe;
};

template <typename S>
struct section {
    std::vector<field<S>> fields;
    /// Checks that involve several fields (or the document's keys), after the fields are read:
    /// (config, section path, the section key's position, context).
    std::function<void(const S&, const std::string&, const YAML::Mark&, parse_context&)> check;

    /// Reads a mapping (undefined or null: nothing set). Unknown and duplicated keys are errors
    /// naming the section and listing the known keys.
    void parse(const YAML::Node& node, const YAML::Mark& key_mark, const std::string& path, S& target,
               parse_context& ctx) const
    {
        const std::string where = path.empty() ? std::string("at the top level") : "in '" + path + "'";
        std::vector<std::optional<std::pair<YAML::Node, YAML::Mark>>> found(fields.size());
        if (node.IsDefined() && !node.IsNull() && !node.IsMap()) {
            const YAML::Mark mark = node.Mark().is_null() ? key_mark : node.Mark();
            ctx.errors.add(mark, path.empty() ? "the top level must be a mapping of sections (such as 'receiver:'), got a " +
                                                    std::string(node_kind(node))
                                              : "'" + path + "' must be a mapping of field: value, got a " +
                                                    std::string(node_kind(node)));
            // That one message: the section's own checks on its defaults (a file source's
            // path for `source: vita49`) would only follow from it.
            return;
        } else if (node.IsMap()) {
            for (const auto& entry : node) {
                const YAML::Node& key = entry.first;
                if (!key.IsScalar()) {
                    ctx.errors.add(key.Mark(), "keys " + where + " must be field names, got a " + node_kind(key));
                    continue;
                }
                const std::string& name = key.Scalar();
                const auto it = std::find_if(fields.begin(), fields.end(), [&](const field<S>& f) { return f.info.key == name; });
                if (it == fields.end()) {
                    ctx.errors.add(key.Mark(), unknown_key(name, where));
                    continue;
                }
                auto& slot = found[static_cast<std::size_t>(it - fields.begin())];
                if (slot) {
                    // yaml-cpp keeps both entries of a duplicated key; which one would win is
                    // not something a config file should depend on.
                    ctx.errors.add(key.Mark(), "duplicate key '" + name + "' " + where + " (first set on line " +
                                                   std::to_string(slot->second.line + 1) + ")");
                    continue;
                }
                slot.emplace(entry.second, key.Mark());
            }
        }
        for (std::size_t i = 0; i < fields.size(); ++i) {
            const std::string field_path = join_path(path, fields[i].info.key);
            if (found[i]) {
                ctx.marks[field_path] = found[i]->second;
                fields[i].parse(found[i]->first, found[i]->second, field_path, target, ctx);
            } else if (fields[i].is_section) {
                fields[i].parse(YAML::Node(YAML::NodeType::Undefined), key_mark, field_path, target, ctx);
            }
        }
        if (check) check(target, path, key_mark, ctx);
    }

    void emit(const S& config, int indent, std::string& out) const
    {
        for (const auto& f : fields) f.emit(config, indent, out);
    }

    void describe(const S& defaults, const std::string& path, std::vector<field_info>& out) const
    {
        for (const auto& f : fields) f.describe(defaults, path, out);
    }

private:
    [[nodiscard]] std::string unknown_key(const std::string& name, const std::string& where) const
    {
        std::string text = "unknown key '" + name + "' " + where;
        // Two edits cover a typo or a transposition; beyond that a suggestion is a guess.
        std::size_t best = 3;
        std::string suggestion;
        std::string known;
        for (const auto& f : fields) {
            if (const std::size_t d = edit_distance(name, f.info.key); d < best) {
                best = d;
                suggestion = f.info.key;
            }
            known += (known.empty() ? "" : ", ") + f.info.key;
        }
        if (!suggestion.empty()) text += ", did you mean '" + suggestion + "'?";
        return text + " (known: " + known + ")";
    }
};

// ---------------------------------------------------------------------------------------
// Values

/// A YAML double-quoted scalar: backslash, the quote and control characters escaped, so
/// that to_yaml's output reads back as the same string whatever it holds (a fuzzed bind
/// address with a newline in it did not).
inline std::string yaml_quoted(std::string_view text)
{
    std::string out = "\"";
    for (const char ch : text) {
        const auto c = static_cast<unsigned char>(ch);
        switch (ch) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\t': out += "\\t"; break;
        case '\r': out += "\\r"; break;
        default:
            if (c < 0x20 || c == 0x7f) {
                char buf[8];
                std::snprintf(buf, sizeof buf, "\\x%02x", c);
                out += buf;
            } else {
                out += ch;
            }
        }
    }
    out += '"';
    return out;
}

template <typename T>
std::string number_text(T value)
{
    if constexpr (std::is_floating_point_v<T>) {
        return format_double(static_cast<double>(value));
    } else {
        return std::to_string(value);
    }
}

/// Reads a number and checks it against its one range. A value that does not fit the
/// field's type is out of range like any other (the message gives the field's range).
template <typename T>
bool read_number(const YAML::Node& v, const YAML::Mark& key_mark, const std::string& path, const numeric_range& range,
                 T& out, error_list& errors)
{
    const YAML::Mark mark = value_mark(v, key_mark);
    const std::string expected = expected_type_name<T>();
    // The allowed values with the type: `phase_smoother: on` is told -1, 0 or 1.
    const std::string allowed_text = " (allowed: " + range.text() + ")";
    if (!v.IsScalar() || !numeric_tag<T>(v)) {
        std::string text = path + ": expected " + expected + ", got " + describe_value(v);
        if (v.IsScalar() && v.Tag() == "!") {
            text += " (a quoted string; write the number without quotes)";
        } else if (v.IsScalar()) {
            text += " (tagged '" + v.Tag() + "')";
        }
        errors.add(mark, text + allowed_text);
        return false;
    }
    const std::string& text = v.Scalar();
    T parsed{};
    double value = 0.0;
    number_status status = number_status::not_a_number;
    if constexpr (std::is_floating_point_v<T>) {
        status = parse_double(text, value);
        parsed = static_cast<T>(value);
    } else {
        status = parse_integer(text, parsed);
        value = static_cast<double>(parsed);
    }
    if (status == number_status::not_a_number) {
        errors.add(mark, path + ": expected " + expected + ", got '" + text + "'" + allowed_text);
        return false;
    }
    bool allowed = range.allows(value);
    if constexpr (std::is_same_v<T, float>) {
        // A bound the float cannot hold exactly (1e-6) is the float nearest it: what to_yaml
        // writes for a value read at the bound reads back.
        allowed = allowed || (!range.lo_open && parsed == static_cast<float>(range.lo)) ||
                  (!range.hi_open && parsed == static_cast<float>(range.hi));
    }
    if (status == number_status::out_of_range || !allowed) {
        errors.add(mark, path + " = " + text + " is out of range (allowed: " + range.text() + ")");
        return false;
    }
    out = parsed;
    return true;
}

/// A non-empty string (any scalar: YAML would read port-like or boolean-like text as a
/// string here anyway).
inline bool read_text(const YAML::Node& v, const YAML::Mark& key_mark, const std::string& path, std::string& out,
                      error_list& errors)
{
    if (!v.IsScalar() || v.Scalar().empty()) {
        errors.add(value_mark(v, key_mark), path + ": expected a non-empty string, got " + describe_value(v));
        return false;
    }
    out = v.Scalar();
    return true;
}

// ---------------------------------------------------------------------------------------
// Ranges

/// lo .. hi
inline numeric_range between(double lo, double hi)
{
    numeric_range r;
    r.lo = lo;
    r.hi = hi;
    return r;
}

/// lo < x <= hi
inline numeric_range above(double lo, double hi)
{
    numeric_range r = between(lo, hi);
    r.lo_open = true;
    return r;
}

/// lo < x < hi
inline numeric_range strictly_between(double lo, double hi)
{
    numeric_range r = above(lo, hi);
    r.hi_open = true;
    return r;
}

/// `value` (meaning `label`) or lo .. hi
inline numeric_range or_between(double value, std::string label, double lo, double hi)
{
    numeric_range r = between(lo, hi);
    r.also = value;
    r.also_label = std::move(label);
    return r;
}

/// Exactly these values, each with what it means.
inline numeric_range one_of(std::initializer_list<std::pair<double, std::string>> values)
{
    numeric_range r;
    for (const auto& [v, label] : values) {
        r.values.push_back(v);
        r.labels.push_back(label);
    }
    return r;
}

inline numeric_range power_of_two_between(double lo, double hi)
{
    numeric_range r = between(lo, hi);
    r.power_of_two = true;
    return r;
}

// ---------------------------------------------------------------------------------------
// Field builders. `get` reaches the member from the section's struct: at(&S::member) or a
// lambda `[](auto& s) -> auto& { return s.udp.format; }` (called with S& and const S&).

template <typename S, typename T>
auto at(T S::*member)
{
    return [member](auto& s) -> auto& { return s.*member; };
}

/// Documentation of a field: what the tables show besides key, allowed and default.
struct doc_text {
    std::string unit;
    std::string text;
    std::string default_text = {};  ///< Markdown, replaces the generated default
};

/// A field read by `parse` and written by `value` (std::nullopt: the key is left out).
template <typename S>
field<S> leaf(field_info info,
              std::function<void(const YAML::Node&, const YAML::Mark&, const std::string&, S&, parse_context&)> parse,
              std::function<std::optional<std::string>(const S&)> value)
{
    field<S> f;
    f.info = std::move(info);
    f.parse = std::move(parse);
    f.emit = [key = f.info.key, value](const S& c, int indent, std::string& out) {
        if (const auto v = value(c)) {
            out.append(static_cast<std::size_t>(indent), ' ');
            out += key + ": " + *v + "\n";
        }
    };
    f.describe = [info = f.info, value](const S& defaults, const std::string& section, std::vector<field_info>& out) {
        field_info i = info;
        i.section = section;
        if (i.default_text.empty()) {
            const auto v = value(defaults);
            i.default_text = v ? "`" + *v + "`" : "unset";
        }
        out.push_back(std::move(i));
    };
    return f;
}

inline field_info make_info(std::string key, std::string type, std::string allowed, doc_text doc)
{
    field_info i;
    i.key = std::move(key);
    i.type = std::move(type);
    i.allowed = std::move(allowed);
    i.unit = std::move(doc.unit);
    i.doc = std::move(doc.text);
    i.default_text = std::move(doc.default_text);
    return i;
}

template <typename S, typename Get>
field<S> number(std::string key, Get get, numeric_range range, doc_text doc)
{
    using T = std::remove_cvref_t<decltype(get(std::declval<S&>()))>;
    range.integer = std::is_integral_v<T>;
    field_info info = make_info(std::move(key), range.integer ? "integer" : "number", range.text(), std::move(doc));
    info.range = range;
    return leaf<S>(
        std::move(info),
        [get, range](const YAML::Node& v, const YAML::Mark& km, const std::string& path, S& s, parse_context& ctx) {
            T x{};
            if (read_number(v, km, path, range, x, ctx.errors)) get(s) = x;
        },
        [get](const S& s) -> std::optional<std::string> { return number_text(get(s)); });
}

/// A number that may be unset (std::optional): left out of to_yaml when unset.
template <typename S, typename Get>
field<S> optional_number(std::string key, Get get, numeric_range range, doc_text doc)
{
    using T = typename std::remove_cvref_t<decltype(get(std::declval<S&>()))>::value_type;
    range.integer = std::is_integral_v<T>;
    field_info info = make_info(std::move(key), range.integer ? "integer" : "number", range.text(), std::move(doc));
    info.range = range;
    return leaf<S>(
        std::move(info),
        [get, range](const YAML::Node& v, const YAML::Mark& km, const std::string& path, S& s, parse_context& ctx) {
            T x{};
            if (read_number(v, km, path, range, x, ctx.errors)) get(s) = x;
        },
        [get](const S& s) -> std::optional<std::string> {
            const auto& v = get(s);
            return v ? std::optional(number_text(*v)) : std::nullopt;
        });
}

template <typename S, typename Get>
field<S> boolean(std::string key, Get get, doc_text doc)
{
    return leaf<S>(
        make_info(std::move(key), "boolean", "true, false", std::move(doc)),
        [get](const YAML::Node& v, const YAML::Mark& km, const std::string& path, S& s, parse_context& ctx) {
            const std::string text = v.IsScalar() ? v.Scalar() : "";
            const bool plain = v.IsScalar() && v.Tag() != "!";
            if (plain && (text == "true" || text == "True" || text == "TRUE")) {
                get(s) = true;
            } else if (plain && (text == "false" || text == "False" || text == "FALSE")) {
                get(s) = false;
            } else {
                ctx.errors.add(value_mark(v, km), path + ": expected true or false, got " + describe_value(v));
            }
        },
        [get](const S& s) -> std::optional<std::string> { return get(s) ? "true" : "false"; });
}

/// A non-empty string; `allowed` says what the source's own checks accept beyond that.
/// `empty_is_unset`: an empty value (the default) is left out of to_yaml.
template <typename S, typename Get>
field<S> text(std::string key, Get get, std::string allowed, doc_text doc, bool empty_is_unset = false)
{
    return leaf<S>(
        make_info(std::move(key), "string", std::move(allowed), std::move(doc)),
        [get](const YAML::Node& v, const YAML::Mark& km, const std::string& path, S& s, parse_context& ctx) {
            std::string x;
            if (read_text(v, km, path, x, ctx.errors)) get(s) = std::move(x);
        },
        [get, empty_is_unset](const S& s) -> std::optional<std::string> {
            if (empty_is_unset && get(s).empty()) return std::nullopt;
            return yaml_quoted(get(s));
        });
}

/// A non-empty string, or nothing: empty (the default) is unset and left out of to_yaml.
template <typename S, typename Get>
field<S> optional_text(std::string key, Get get, std::string allowed, doc_text doc)
{
    return text<S>(std::move(key), std::move(get), std::move(allowed), std::move(doc), true);
}

/// A file path: relative ones resolve against the configuration file's directory. Empty
/// (the default): unset, left out of to_yaml.
template <typename S, typename Get>
field<S> path(std::string key, Get get, doc_text doc)
{
    return leaf<S>(
        make_info(std::move(key), "path", "non-empty string", std::move(doc)),
        [get](const YAML::Node& v, const YAML::Mark& km, const std::string& p, S& s, parse_context& ctx) {
            std::string x;
            if (!read_text(v, km, p, x, ctx.errors)) return;
            const std::filesystem::path file(x);
            get(s) = file.is_relative() && !ctx.base_dir.empty() ? ctx.base_dir / file : file;
        },
        [get](const S& s) -> std::optional<std::string> {
            const std::filesystem::path& p = get(s);
            return p.empty() ? std::nullopt : std::optional(yaml_quoted(p.string()));
        });
}

template <typename E>
using choice_list = std::vector<std::pair<std::string, E>>;

/// The choices of an enumeration: its name table (dsp/names.hpp), aliases included.
template <typename E, std::size_t N>
choice_list<E> choices(const name_table<E, N>& table)
{
    choice_list<E> out;
    for (const auto& n : table) out.emplace_back(std::string(n.name), n.value);
    return out;
}

/// The same for a setting kept as its name (a std::string field).
template <typename E, std::size_t N>
choice_list<std::string> name_choices(const name_table<E, N>& table)
{
    choice_list<std::string> out;
    for (const auto& n : table) out.emplace_back(std::string(n.name), std::string(n.name));
    return out;
}

template <typename E>
std::string choice_names(const choice_list<E>& options)
{
    std::string out;
    for (const auto& [name, value] : options) out += (out.empty() ? "" : ", ") + name;
    return out;
}

/// One of a list of names. The value written back is the first name of the current value.
template <typename S, typename Get, typename E>
field<S> choice(std::string key, Get get, choice_list<E> options, doc_text doc)
{
    field_info info = make_info(std::move(key), "choice", choice_names(options), std::move(doc));
    for (const auto& o : options) info.choices.push_back(o.first);
    return leaf<S>(
        std::move(info),
        [get, options](const YAML::Node& v, const YAML::Mark& km, const std::string& path, S& s, parse_context& ctx) {
            for (const auto& [name, value] : options) {
                if (v.IsScalar() && v.Scalar() == name) {
                    get(s) = value;
                    return;
                }
            }
            ctx.errors.add(value_mark(v, km),
                           path + ": got " + describe_value(v) + " (allowed: " + choice_names(options) + ")");
        },
        [get, options](const S& s) -> std::optional<std::string> {
            for (const auto& [name, value] : options) {
                if (get(s) == value) return name;
            }
            return "?";
        });
}

/// A choice that may be unset (std::optional): left out of to_yaml when unset.
template <typename S, typename Get, typename E>
field<S> optional_choice(std::string key, Get get, choice_list<E> options, doc_text doc)
{
    field_info info = make_info(std::move(key), "choice", choice_names(options), std::move(doc));
    for (const auto& o : options) info.choices.push_back(o.first);
    return leaf<S>(
        std::move(info),
        [get, options](const YAML::Node& v, const YAML::Mark& km, const std::string& path, S& s, parse_context& ctx) {
            for (const auto& [name, value] : options) {
                if (v.IsScalar() && v.Scalar() == name) {
                    get(s) = value;
                    return;
                }
            }
            ctx.errors.add(value_mark(v, km),
                           path + ": got " + describe_value(v) + " (allowed: " + choice_names(options) + ")");
        },
        [get, options](const S& s) -> std::optional<std::string> {
            if (!get(s)) return std::nullopt;
            for (const auto& [name, value] : options) {
                if (*get(s) == value) return name;
            }
            return "?";
        });
}

/// A list of distinct integers in `range`, written "[0, 1]" (also when empty).
template <typename S, typename Get>
field<S> int_list(std::string key, Get get, numeric_range range, doc_text doc)
{
    range.integer = true;
    field_info info = make_info(std::move(key), "list", "a list of distinct integers " + range.text(), std::move(doc));
    info.range = range;
    return leaf<S>(
        std::move(info),
        [get, range](const YAML::Node& v, const YAML::Mark& km, const std::string& path, S& s, parse_context& ctx) {
            if (!v.IsSequence()) {
                ctx.errors.add(value_mark(v, km), path + ": expected a list of integers such as [0, 1], got " + describe_value(v));
                return;
            }
            std::vector<int> out;
            std::set<int> seen;
            for (const auto& item : v) {
                int x = 0;
                if (!item.IsScalar() || !numeric_tag<int>(item) || parse_integer(item.Scalar(), x) != number_status::ok) {
                    ctx.errors.add(item.Mark(), path + ": expected integers, got " + describe_value(item));
                    return;
                }
                if (!range.allows(x)) {
                    ctx.errors.add(item.Mark(), path + ": " + item.Scalar() + " is out of range (allowed: " + range.text() + ")");
                    return;
                }
                if (!seen.insert(x).second) {
                    ctx.errors.add(item.Mark(), path + ": " + item.Scalar() + " is listed twice");
                    return;
                }
                out.push_back(x);
            }
            get(s) = std::move(out);
        },
        [get](const S& s) -> std::optional<std::string> {
            std::string out = "[";
            for (std::size_t i = 0; i < get(s).size(); ++i) out += (i ? ", " : "") + std::to_string(get(s)[i]);
            return out + "]";
        });
}

/// A sub-section with a table of its own, reached through `get`.
template <typename S, typename C, typename Get>
field<S> subsection(std::string key, const section<C>& child, Get get)
{
    field<S> f;
    f.info.key = std::move(key);
    f.info.type = "section";
    f.is_section = true;
    f.parse = [&child, get](const YAML::Node& v, const YAML::Mark& km, const std::string& path, S& s, parse_context& ctx) {
        child.parse(v, km, path, get(s), ctx);
    };
    f.emit = [&child, get, key = f.info.key](const S& s, int indent, std::string& out) {
        out.append(static_cast<std::size_t>(indent), ' ');
        out += key + ":\n";
        child.emit(get(s), indent + 2, out);
    };
    f.describe = [&child, get, key = f.info.key](const S& defaults, const std::string& section, std::vector<field_info>& out) {
        child.describe(get(defaults), join_path(section, key), out);
    };
    return f;
}

/// The tables (config/receiver_yaml.cpp, config/daemon_yaml.cpp).
[[nodiscard]] const section<dsp::receiver_config>& receiver_schema();
[[nodiscard]] const section<daemon_config>& daemon_schema();

/// The one document of a configuration text (a null node when empty). Throws config_error
/// for what load_yaml_documents refuses and for a second document.
inline YAML::Node load_document(std::string_view yaml_text, std::string_view source_name)
{
    const std::vector<YAML::Node> documents = load_yaml_documents(yaml_text, source_name);
    if (documents.size() > 1) {
        error_list errors(source_name);
        errors.add(documents[1].Mark(), "expected one YAML document, found " + std::to_string(documents.size()) +
                                            " (remove the extra '---')");
        errors.throw_if_any();
    }
    return documents.empty() ? YAML::Node(YAML::NodeType::Null) : documents.front();
}

}  // namespace paq::config::detail
