#include "config/receiver_yaml.hpp"

#include "config/yaml_support.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <system_error>
#include <type_traits>
#include <utility>
#include <variant>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace paq::config {

namespace {

using namespace detail;

// ---------------------------------------------------------------------------------------
// The field table. Parsing, the unknown-key message and to_yaml all walk it, so a new field
// of receiver_config needs exactly one line here (the round-trip test catches a forgotten
// one, because it sets every field to a non-default value).

using size_member = std::size_t dsp::receiver_config::*;
using int_member = int dsp::receiver_config::*;
using double_member = double dsp::receiver_config::*;

struct field_binding {
    std::string_view name;
    std::variant<size_member, int_member, double_member> member;
};

constexpr std::array<field_binding, 14> receiver_fields{{
    {"batch_samples", &dsp::receiver_config::batch_samples},
    {"detection_threshold", &dsp::receiver_config::detection_threshold},
    {"fft_size", &dsp::receiver_config::fft_size},
    {"cma_mu", &dsp::receiver_config::cma_mu},
    {"cma_iterations", &dsp::receiver_config::cma_iterations},
    {"pll_bn_t", &dsp::receiver_config::pll_bn_t},
    {"pll_acquisition_bn_t", &dsp::receiver_config::pll_acquisition_bn_t},
    {"pll_damping", &dsp::receiver_config::pll_damping},
    {"cpu_threads", &dsp::receiver_config::cpu_threads},
    {"bit_rate_hz", &dsp::receiver_config::bit_rate_hz},
    {"clock_tracking", &dsp::receiver_config::clock_tracking},
    {"clock_min_ppm", &dsp::receiver_config::clock_min_ppm},
    {"front_end_correction", &dsp::receiver_config::front_end_correction},
    {"phase_smoother", &dsp::receiver_config::phase_smoother},
}};

constexpr std::string_view receiver_section = "receiver";

const field_binding* find_field(std::string_view name) noexcept
{
    const auto it = std::find_if(receiver_fields.begin(), receiver_fields.end(),
                                 [name](const field_binding& f) { return f.name == name; });
    return it == receiver_fields.end() ? nullptr : &*it;
}

std::string known_field_list()
{
    std::string out;
    for (const auto& f : receiver_fields) {
        if (!out.empty()) {
            out += ", ";
        }
        out += f.name;
    }
    return out;
}

std::optional<std::string_view> closest_field(std::string_view key) noexcept
{
    // Two edits cover a typo or a transposition; beyond that a suggestion is a guess.
    constexpr std::size_t max_distance = 2;
    std::optional<std::string_view> best;
    std::size_t best_distance = max_distance + 1;
    for (const auto& f : receiver_fields) {
        const std::size_t d = edit_distance(key, f.name);
        if (d < best_distance) {
            best_distance = d;
            best = f.name;
        }
    }
    return best;
}

template <typename T>
void parse_field(const YAML::Node& value, const YAML::Mark& key_mark, std::string_view name, T& target,
                 error_list& errors)
{
    // yaml-cpp places an empty value at the token after it (the next line), and the key's
    // line is where the reader looks anyway.
    const YAML::Mark mark = value.IsNull() || value.Mark().is_null() ? key_mark : value.Mark();
    const std::string field = std::string(receiver_section) + "." + std::string(name);
    const std::string expected = expected_type_name<T>();
    if (!value.IsScalar() || !numeric_tag<T>(value)) {
        std::string text = field + ": expected " + expected + ", got " + describe_value(value);
        if (value.IsScalar() && value.Tag() == "!") {
            text += " (a quoted string; write the number without quotes)";
        } else if (value.IsScalar()) {
            text += " (tagged '" + value.Tag() + "')";
        }
        errors.add(mark, text);
        return;
    }
    const std::string& text = value.Scalar();
    T parsed{};
    number_status status = number_status::not_a_number;
    if constexpr (std::is_floating_point_v<T>) {
        status = parse_double(text, parsed);
    } else {
        status = parse_integer(text, parsed);
    }
    switch (status) {
    case number_status::ok:
        target = parsed;
        return;
    case number_status::not_a_number:
        errors.add(mark, field + ": expected " + expected + ", got '" + text + "'");
        return;
    case number_status::out_of_range:
        if constexpr (std::is_floating_point_v<T>) {
            errors.add(mark, field + " = " + text + " is out of range (not representable as a double)");
        } else {
            errors.add(mark, field + " = " + text + " is out of range (its type holds " +
                                 std::to_string(std::numeric_limits<T>::min()) + " .. " +
                                 std::to_string(std::numeric_limits<T>::max()) + ")");
        }
        return;
    }
}

// Position of the first key of each field that the document sets, to put a line number on
// validate()'s messages.
using field_marks = std::array<std::optional<YAML::Mark>, receiver_fields.size()>;

void parse_receiver_section(const YAML::Node& section, const YAML::Mark& section_mark,
                            dsp::receiver_config& config, field_marks& marks, error_list& errors)
{
    if (section.IsNull()) {
        return;  // "receiver:" with nothing under it: all defaults
    }
    if (!section.IsMap()) {
        errors.add(section.Mark().is_null() ? section_mark : section.Mark(),
                   "'receiver' must be a mapping of field: value, got a " + std::string(node_kind(section)));
        return;
    }
    for (const auto& entry : section) {
        const YAML::Node& key = entry.first;
        const YAML::Node& value = entry.second;
        if (!key.IsScalar()) {
            errors.add(key.Mark(), "keys in 'receiver' must be field names, got a " + std::string(node_kind(key)));
            continue;
        }
        const std::string& name = key.Scalar();
        const field_binding* field = find_field(name);
        if (field == nullptr) {
            std::string text = "unknown key '" + name + "' in 'receiver'";
            if (const auto suggestion = closest_field(name)) {
                text += ", did you mean '" + std::string(*suggestion) + "'?";
            }
            text += " (known: " + known_field_list() + ")";
            errors.add(key.Mark(), text);
            continue;
        }
        auto& first_mark = marks[static_cast<std::size_t>(field - receiver_fields.data())];
        if (first_mark) {
            // yaml-cpp keeps both entries of a duplicated key; which one would win is not
            // something a config file should depend on.
            errors.add(key.Mark(), "duplicate key '" + name + "' in 'receiver' (first set on line " +
                                       std::to_string(first_mark->line + 1) + ")");
            continue;
        }
        first_mark = key.Mark();
        std::visit([&](auto member) { parse_field(value, key.Mark(), field->name, config.*member, errors); },
                   field->member);
    }
}

}  // namespace

config_error::config_error(std::vector<std::string> messages)
    : std::runtime_error(join_lines(messages)),
      messages_(std::make_shared<const std::vector<std::string>>(std::move(messages)))
{
}

dsp::receiver_config parse_receiver_config(std::string_view yaml_text, std::string_view source_name)
{
    error_list errors(source_name);
    const std::vector<YAML::Node> documents = load_yaml_documents(yaml_text, source_name);

    dsp::receiver_config config;
    if (documents.size() > 1) {
        errors.add(documents[1].Mark(), "expected one YAML document, found " + std::to_string(documents.size()) +
                                            " (remove the extra '---')");
        errors.throw_if_any();
    }
    if (documents.empty() || documents.front().IsNull()) {
        return config;  // empty file or only comments: defaults
    }
    const YAML::Node& root = documents.front();
    if (!root.IsMap()) {
        errors.add(root.Mark(), "the top level must be a mapping of sections (such as 'receiver:'), got a " +
                                    std::string(node_kind(root)));
        errors.throw_if_any();
    }

    field_marks marks;
    std::optional<YAML::Mark> receiver_mark;
    for (const auto& entry : root) {
        // Other sections, and keys that are no plain string, belong to other parsers.
        if (!entry.first.IsScalar() || entry.first.Scalar() != receiver_section) {
            continue;
        }
        if (receiver_mark) {
            errors.add(entry.first.Mark(), "duplicate section 'receiver' (first on line " +
                                               std::to_string(receiver_mark->line + 1) + ")");
            continue;
        }
        receiver_mark = entry.first.Mark();
        parse_receiver_section(entry.second, entry.first.Mark(), config, marks, errors);
    }

    // Fields that failed to parse still hold their (valid) defaults, so validate() only
    // reports fields the file really set out of range; report both kinds together.
    for (const std::string& problem : config.validate()) {
        // validate() starts each message with the field name; attach the line that set it.
        YAML::Mark mark = YAML::Mark::null_mark();
        for (std::size_t i = 0; i < receiver_fields.size(); ++i) {
            const std::string_view name = receiver_fields[i].name;
            if (marks[i] && problem.size() > name.size() && problem.starts_with(name) &&
                problem[name.size()] == ' ') {
                mark = *marks[i];
                break;
            }
        }
        errors.add(mark, std::string(receiver_section) + "." + problem);
    }
    errors.throw_if_any();
    return config;
}

std::string read_config_file(const std::filesystem::path& file)
{
    const std::string name = file.string();
    const auto fail = [&name](const std::string& reason) {
        throw config_error({name + ": cannot read configuration file: " + reason});
    };

    int fd = -1;
    do {
        fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
    } while (fd < 0 && errno == EINTR);
    if (fd < 0) {
        fail(std::generic_category().message(errno));
    }
    struct fd_closer {
        int fd;
        ~fd_closer() { ::close(fd); }  // read-only: nothing to lose on a failed close
    } const closer{fd};
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
        fail(std::generic_category().message(errno));
    }
    // A file or a pipe (a FIFO, process substitution, /dev/stdin fed by a pipe). A device
    // is no configuration: /dev/zero would be read forever, a tty waits for typing.
    if (S_ISDIR(st.st_mode)) {
        fail("it is a directory");
    }
    if (!S_ISREG(st.st_mode) && !S_ISFIFO(st.st_mode)) {
        const char* kind = S_ISCHR(st.st_mode)    ? "character device"
                           : S_ISBLK(st.st_mode)  ? "block device"
                           : S_ISSOCK(st.st_mode) ? "socket"
                                                  : "special file";
        fail(std::string("it is a ") + kind + ", not a file or a pipe");
    }
    const auto too_large = [&](const std::string& size) {
        fail("it " + size + ", more than the " + std::to_string(detail::max_config_bytes) + "-byte limit");
    };
    if (S_ISREG(st.st_mode) && static_cast<std::uint64_t>(st.st_size) > detail::max_config_bytes) {
        too_large("is " + std::to_string(st.st_size) + " bytes");
    }
    // At most limit + 1 bytes are read, whatever the file does meanwhile (grows, is a pipe
    // that never ends): one byte over is enough to know the text is too large.
    std::string text(detail::max_config_bytes + 1, '\0');
    std::size_t done = 0;
    while (done < text.size()) {
        const ssize_t got = ::read(fd, text.data() + done, text.size() - done);
        if (got < 0) {
            if (errno == EINTR) {
                continue;
            }
            fail("read error: " + std::generic_category().message(errno));
        }
        if (got == 0) {
            break;
        }
        done += static_cast<std::size_t>(got);
    }
    if (done > detail::max_config_bytes) {
        too_large("has more bytes");  // a pipe, or a file that grew while being read
    }
    text.resize(done);
    return text;
}

dsp::receiver_config load_receiver_config(const std::filesystem::path& file)
{
    return parse_receiver_config(read_config_file(file), file.string());
}

std::string to_yaml(const dsp::receiver_config& config)
{
    std::string out(receiver_section);
    out += ":\n";
    for (const auto& field : receiver_fields) {
        out += "  ";
        out += field.name;
        out += ": ";
        std::visit(
            [&](auto member) {
                const auto& value = config.*member;
                if constexpr (std::is_floating_point_v<std::remove_cvref_t<decltype(value)>>) {
                    out += format_double(value);
                } else {
                    out += std::to_string(value);
                }
            },
            field.member);
        out += '\n';
    }
    return out;
}

}  // namespace paq::config
