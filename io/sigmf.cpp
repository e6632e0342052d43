#include "io/sigmf.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <memory>
#include <string_view>
#include <system_error>
#include <utility>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace paq::io {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using nlohmann::ordered_json;

constexpr std::string_view meta_suffix = ".sigmf-meta";
constexpr std::string_view data_suffix = ".sigmf-data";
constexpr std::string_view archive_suffix = ".sigmf";
constexpr std::string_view sigmf_version = "1.2.0";
constexpr const char* ci16_scale_key = "paq:ci16_scale";

[[nodiscard]] std::string errno_text(int err) { return std::generic_category().message(err); }

[[noreturn]] void fail(const std::string& name, const std::string& what) {
  throw format_error(name + ": " + what);
}
[[noreturn]] void fail(const fs::path& path, const std::string& what) { fail(path.string(), what); }

struct file_closer {
  void operator()(std::FILE* f) const noexcept { std::fclose(f); }
};
using unique_file = std::unique_ptr<std::FILE, file_closer>;

// Reads a whole metadata file, refusing anything that could block or never end (a FIFO, a
// device such as /dev/zero) and anything over max_bytes. At most max_bytes + 1 bytes are read
// even if the file grows while being read, so the memory taken is bounded on every input.
[[nodiscard]] std::string read_text_file(const fs::path& path, std::size_t max_bytes) {
  int fd = -1;
  do {
    // O_NONBLOCK: opening a FIFO without a writer would otherwise wait here for one.
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) fail(path, "cannot open: " + errno_text(errno));
  struct fd_closer {
    int fd;
    ~fd_closer() { ::close(fd); }  // read-only: nothing to lose on a failed close
  } const closer{fd};

  struct stat st {};
  if (::fstat(fd, &st) != 0) fail(path, "cannot stat: " + errno_text(errno));
  if (!S_ISREG(st.st_mode)) fail(path, "is not a regular file (metadata must be a file)");
  const auto too_large = [&](const std::string& size) {
    fail(path, "is " + size + " bytes, more than the " + std::to_string(max_bytes) +
                   "-byte limit for SigMF metadata");
  };
  if (static_cast<std::uint64_t>(st.st_size) > max_bytes) too_large(std::to_string(st.st_size));

  std::string text(static_cast<std::size_t>(st.st_size) + 1, '\0');
  std::size_t done = 0;
  for (;;) {
    if (done == text.size()) {
      if (text.size() > max_bytes) too_large("over " + std::to_string(max_bytes));
      text.resize(std::min(text.size() * 2, max_bytes + 1));  // the file grew after fstat
    }
    const ssize_t got = ::read(fd, text.data() + done, text.size() - done);
    if (got < 0) {
      if (errno == EINTR) continue;
      fail(path, "read error: " + errno_text(errno));
    }
    if (got == 0) break;
    done += static_cast<std::size_t>(got);
  }
  text.resize(done);
  return text;
}

// Writes to "<path>.tmp", syncs, renames: readers see either no file or the whole file.
void write_text_file_atomically(const fs::path& path, const std::string& text) {
  fs::path tmp_path = path;
  tmp_path += ".tmp";
  const auto give_up = [&](const fs::path& culprit, std::string_view what, int err) {
    std::error_code ignored;
    fs::remove(tmp_path, ignored);
    throw std::runtime_error(culprit.string() + ": " + std::string(what) + ": " + errno_text(err));
  };

  errno = 0;
  std::FILE* raw = std::fopen(tmp_path.c_str(), "wb");
  if (raw == nullptr) give_up(tmp_path, "cannot create", errno);
  unique_file file(raw);
  if (std::fwrite(text.data(), 1, text.size(), file.get()) != text.size()) {
    give_up(tmp_path, "cannot write", errno);
  }
  if (std::fflush(file.get()) != 0) give_up(tmp_path, "cannot write", errno);
  // EINVAL: the file system does not support syncing; there is nothing more we can do.
  if (::fsync(::fileno(file.get())) != 0 && errno != EINVAL) give_up(tmp_path, "cannot sync", errno);
  if (std::fclose(file.release()) != 0) give_up(tmp_path, "cannot close", errno);

  std::error_code ec;
  fs::rename(tmp_path, path, ec);
  if (ec) give_up(path, "cannot rename " + tmp_path.string() + " into place", ec.value());
}

[[nodiscard]] bool is_positive_finite(double v) noexcept { return std::isfinite(v) && v > 0; }

// Says in words what a SigMF datatype describes, for the "not supported" message; the user
// then knows whether to convert endianness, sample type or both.
[[nodiscard]] std::string describe_datatype(std::string_view dt) {
  if (dt.size() < 3 || (dt[0] != 'r' && dt[0] != 'c')) return "not a SigMF datatype";
  const bool is_complex = dt[0] == 'c';
  std::string_view body = dt.substr(1);
  std::string endian;
  if (body.ends_with("_le")) {
    endian = "little-endian ";
    body.remove_suffix(3);
  } else if (body.ends_with("_be")) {
    endian = "big-endian ";
    body.remove_suffix(3);
  }
  std::string kind;
  if (body == "f32" || body == "f64") {
    kind = std::string(body.substr(1)) + "-bit float";
  } else if (body == "i8" || body == "i16" || body == "i32") {
    kind = "signed " + std::string(body.substr(1)) + "-bit integer";
  } else if (body == "u8" || body == "u16" || body == "u32") {
    kind = "unsigned " + std::string(body.substr(1)) + "-bit integer";
  } else {
    return "not a SigMF datatype";
  }
  return std::string(is_complex ? "complex " : "real-valued ") + endian + kind + " samples";
}

[[nodiscard]] sample_format parse_sigmf_datatype(const std::string& path, const json& global) {
  const auto it = global.find("core:datatype");
  if (it == global.end()) fail(path, "global core:datatype is missing");
  if (!it->is_string()) fail(path, "global core:datatype must be a string, got " + it->dump());
  const auto& dt = it->get_ref<const std::string&>();
  // Only the exact SigMF spellings: a bare "cf32" is not a SigMF datatype (no endianness).
  if (dt == "cf32_le") return sample_format::cf32_le;
  if (dt == "ci16_le") return sample_format::ci16_le;
  fail(path, "core:datatype '" + dt + "' is not supported (supported: cf32_le, ci16_le): " +
                 describe_datatype(dt));
}

[[nodiscard]] std::uint64_t get_count(const std::string& path, const json& obj, const char* key,
                                      std::string_view where) {
  const auto it = obj.find(key);
  if (it == obj.end()) return 0;
  if (it->is_number_unsigned()) return it->get<std::uint64_t>();
  if (it->is_number_integer() && it->get<std::int64_t>() >= 0) {
    return static_cast<std::uint64_t>(it->get<std::int64_t>());
  }
  fail(path, std::string(where) + " " + key + " must be a non-negative integer, got " +
                 it->dump());
}

[[nodiscard]] std::string get_string(const std::string& path, const json& obj, const char* key,
                                     std::string_view where) {
  const auto it = obj.find(key);
  if (it == obj.end()) return {};
  if (!it->is_string()) {
    fail(path, std::string(where) + " " + key + " must be a string, got " + it->dump());
  }
  return it->get<std::string>();
}

// The namespace of a key "ns:name"; empty when the key is not namespaced that way.
[[nodiscard]] std::string_view key_namespace(std::string_view key) noexcept {
  const auto colon = key.find(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == key.size()) return {};
  return key.substr(0, colon);
}

// Checks the keys of one object written into the metadata (extra_global, an annotation): each
// namespaced, none reserved; collects their namespaces.
void check_written_keys(const json& obj, std::string_view where, bool core_allowed,
                        std::vector<std::string>& namespaces) {
  for (const auto& [key, value] : obj.items()) {
    const std::string_view ns = key_namespace(key);
    if (ns.empty()) {
      throw std::invalid_argument(std::string(where) + " key '" + key +
                                  "' must be namespaced as 'namespace:name'");
    }
    // In global, core keys and paq:ci16_scale are written from the typed fields; a second
    // source would silently overwrite one of them.
    if ((ns == "core" && !core_allowed) || (!core_allowed && key == ci16_scale_key)) {
      throw std::invalid_argument(std::string(where) + " key '" + key +
                                  "' is reserved; set the sigmf_meta field instead");
    }
    if (ns != "core" && std::find(namespaces.begin(), namespaces.end(), ns) == namespaces.end()) {
      namespaces.emplace_back(ns);
    }
  }
}

// A JSON integer >= 0 (nlohmann keeps literals such as 5 signed, parsed ones unsigned).
[[nodiscard]] bool is_count(const json& v) noexcept {
  return v.is_number_unsigned() || (v.is_number_integer() && v.get<std::int64_t>() >= 0);
}

// Validates meta for writing and returns the extensions to declare: paq first when a paq: key
// is written, then meta.extensions.
std::vector<sigmf_extension> validate_for_writing(const sigmf_meta& meta) {
  if (!is_positive_finite(meta.sample_rate_hz)) {
    throw std::invalid_argument("SigMF sample rate must be positive and finite, got " +
                                std::to_string(meta.sample_rate_hz));
  }
  if (meta.format == sample_format::ci16_le && !is_positive_finite(meta.ci16_scale)) {
    throw std::invalid_argument("ci16 scale must be positive and finite, got " +
                                std::to_string(meta.ci16_scale));
  }
  if (!std::isfinite(meta.center_frequency_hz)) {
    throw std::invalid_argument("center frequency must be finite");
  }
  if (meta.num_channels < 1 || meta.num_channels > max_channels) {
    throw std::invalid_argument("SigMF num_channels " + std::to_string(meta.num_channels) + " is out of range (1 .. " +
                                std::to_string(max_channels) + ")");
  }

  if (!meta.header_chunks.empty()) {
    throw std::invalid_argument("SigMF header_chunks must be empty: paqd writes samples only");
  }
  std::vector<std::string> used;  // namespaces of the keys written, core excluded
  if (meta.format == sample_format::ci16_le) used.emplace_back(paq_extension_name);
  if (!meta.extra_global.is_null()) {
    if (!meta.extra_global.is_object()) {
      throw std::invalid_argument("extra SigMF global keys must be a JSON object, got " +
                                  meta.extra_global.dump());
    }
    check_written_keys(meta.extra_global, "extra SigMF global", false, used);
  }
  if (!meta.annotations.is_null()) {
    if (!meta.annotations.is_array()) {
      throw std::invalid_argument("SigMF annotations must be a JSON array, got " +
                                  meta.annotations.dump());
    }
    std::uint64_t previous_start = 0;
    for (std::size_t i = 0; i < meta.annotations.size(); ++i) {
      const json& a = meta.annotations[i];
      const std::string where = "SigMF annotations[" + std::to_string(i) + "]";
      if (!a.is_object()) throw std::invalid_argument(where + " must be a JSON object");
      const auto start_it = a.find("core:sample_start");
      if (start_it == a.end() || !is_count(*start_it)) {
        throw std::invalid_argument(where + " needs an unsigned integer core:sample_start");
      }
      const auto start = start_it->get<std::uint64_t>();
      // SigMF: annotations are sorted by core:sample_start.
      if (start < previous_start) {
        throw std::invalid_argument(where + " core:sample_start " + std::to_string(start) +
                                    " is before the previous annotation's " +
                                    std::to_string(previous_start));
      }
      previous_start = start;
      if (const auto count_it = a.find("core:sample_count");
          count_it != a.end() && !is_count(*count_it)) {
        throw std::invalid_argument(where + " core:sample_count must be an unsigned integer");
      }
      check_written_keys(a, where, true, used);
    }
  }

  std::vector<sigmf_extension> declared;
  if (std::find(used.begin(), used.end(), paq_extension_name) != used.end()) {
    declared.push_back({std::string(paq_extension_name), std::string(paq_extension_version), true});
  }
  for (const sigmf_extension& ext : meta.extensions) {
    if (ext.name.empty() || ext.version.empty()) {
      throw std::invalid_argument("SigMF extension entries need a name and a version");
    }
    if (ext.name == "core" || ext.name == paq_extension_name) {
      throw std::invalid_argument("SigMF extension '" + ext.name +
                                  "' is declared by the writer itself; do not list it");
    }
    for (const sigmf_extension& other : declared) {
      if (other.name == ext.name) {
        throw std::invalid_argument("SigMF extension '" + ext.name + "' is listed twice");
      }
    }
    declared.push_back(ext);
  }
  // SigMF: a namespace other than core must be declared in core:extensions.
  for (const std::string& ns : used) {
    const bool is_declared = std::any_of(declared.begin(), declared.end(),
                                         [&](const sigmf_extension& e) { return e.name == ns; });
    if (!is_declared) {
      throw std::invalid_argument("SigMF namespace '" + ns +
                                  "' is used but not declared (add it to sigmf_meta::extensions)");
    }
  }
  return declared;
}

// Formats a double for a message: %g, so 1e300 reads as 1e+300, not 300 digits.
[[nodiscard]] std::string number_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

}  // namespace

bool is_supported_sample_rate(double rate_hz) noexcept {
  return rate_hz >= min_sample_rate_hz && rate_hz <= max_sample_rate_hz;  // false for NaN
}

std::size_t json_nesting_depth(std::string_view text) noexcept {
  std::size_t depth = 0;
  std::size_t deepest = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;  // the escaped character cannot end the string
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

bool has_sigmf_suffix(const std::filesystem::path& path) {
  const std::string name = path.filename().string();
  for (const std::string_view suffix : {meta_suffix, data_suffix, archive_suffix}) {
    if (name.size() > suffix.size() && std::string_view(name).ends_with(suffix)) return true;
  }
  return false;
}

sigmf_file_paths sigmf_paths(const std::filesystem::path& path) {
  fs::path base = path;
  const std::string name = path.filename().string();
  for (const std::string_view suffix : {meta_suffix, data_suffix, archive_suffix}) {
    // name.size() > suffix.size(): a file called just ".sigmf-meta" has no base to strip to.
    if (name.size() > suffix.size() && std::string_view(name).ends_with(suffix)) {
      base.replace_filename(name.substr(0, name.size() - suffix.size()));
      break;
    }
  }
  sigmf_file_paths paths{base, base};
  paths.meta += meta_suffix;
  paths.data += data_suffix;
  return paths;
}

std::string to_sigmf_json(const sigmf_meta& meta) {
  const std::vector<sigmf_extension> extensions = validate_for_writing(meta);

  // ordered_json: core keys first, in the order the SigMF spec lists them, for human readers.
  ordered_json global = ordered_json::object();
  global["core:datatype"] = to_sigmf_datatype(meta.format);
  global["core:sample_rate"] = meta.sample_rate_hz;
  global["core:version"] = sigmf_version;
  if (meta.num_channels > 1) global["core:num_channels"] = meta.num_channels;
  if (!meta.description.empty()) global["core:description"] = meta.description;
  if (!meta.recorder.empty()) global["core:recorder"] = meta.recorder;
  if (!extensions.empty()) {
    ordered_json list = ordered_json::array();
    for (const sigmf_extension& ext : extensions) {
      ordered_json entry = ordered_json::object();
      entry["name"] = ext.name;
      entry["version"] = ext.version;
      entry["optional"] = ext.optional;
      list.push_back(std::move(entry));
    }
    global["core:extensions"] = std::move(list);
  }
  if (meta.format == sample_format::ci16_le) {
    global[ci16_scale_key] = static_cast<double>(meta.ci16_scale);
  }
  if (meta.extra_global.is_object()) {
    for (const auto& [key, value] : meta.extra_global.items()) global[key] = ordered_json(value);
  }

  std::vector<sigmf_capture_time> starts = meta.capture_times;
  if (starts.empty()) starts.push_back({0, "", 0});
  if (starts.front().datetime.empty()) starts.front().datetime = meta.datetime_iso8601;
  ordered_json captures = ordered_json::array();
  for (std::size_t i = 0; i < starts.size(); ++i) {
    if (i > 0 && starts[i].sample_start < starts[i - 1].sample_start) {
      throw std::invalid_argument("SigMF: capture " + std::to_string(i) + " starts at sample " +
                                  std::to_string(starts[i].sample_start) + ", before the capture before it");
    }
    ordered_json capture = ordered_json::object();
    capture["core:sample_start"] = starts[i].sample_start;
    if (meta.center_frequency_hz != 0) capture["core:frequency"] = meta.center_frequency_hz;
    if (!starts[i].datetime.empty()) capture["core:datetime"] = starts[i].datetime;
    captures.push_back(std::move(capture));
  }

  ordered_json annotations = ordered_json::array();
  if (meta.annotations.is_array()) {
    for (const json& a : meta.annotations) {
      // core:sample_start and core:sample_count first, as in the spec's examples.
      ordered_json entry = ordered_json::object();
      entry["core:sample_start"] = a.at("core:sample_start");
      if (a.contains("core:sample_count")) entry["core:sample_count"] = a.at("core:sample_count");
      for (const auto& [key, value] : a.items()) {
        if (key != "core:sample_start" && key != "core:sample_count") entry[key] = ordered_json(value);
      }
      annotations.push_back(std::move(entry));
    }
  }

  ordered_json doc = ordered_json::object();
  doc["global"] = std::move(global);
  doc["captures"] = std::move(captures);
  doc["annotations"] = std::move(annotations);
  return doc.dump(2) + "\n";
}

void write_sigmf_meta(const std::filesystem::path& meta_path, const sigmf_meta& meta) {
  write_text_file_atomically(meta_path, to_sigmf_json(meta));
}

sigmf_meta read_sigmf_meta(const std::filesystem::path& meta_path) {
  return parse_sigmf_meta(read_text_file(meta_path, sigmf_max_meta_bytes), meta_path.string());
}

namespace {

// core:extensions: well formed (SigMF: objects of exactly name, version, optional), and no
// extension paqd would have to understand to read the samples (optional: false, not paq).
[[nodiscard]] std::vector<sigmf_extension> parse_extensions(const std::string& name,
                                                            const json& global) {
  std::vector<sigmf_extension> extensions;
  const auto it = global.find("core:extensions");
  if (it == global.end()) return extensions;
  if (!it->is_array()) fail(name, "global core:extensions must be a JSON array, got " + it->dump());
  for (std::size_t i = 0; i < it->size(); ++i) {
    const json& e = (*it)[i];
    const std::string where = "global core:extensions[" + std::to_string(i) + "]";
    if (!e.is_object()) fail(name, where + " must be a JSON object, got " + e.dump());
    const auto name_it = e.find("name");
    const auto version_it = e.find("version");
    const auto optional_it = e.find("optional");
    if (name_it == e.end() || !name_it->is_string() || version_it == e.end() ||
        !version_it->is_string() || optional_it == e.end() || !optional_it->is_boolean()) {
      fail(name, where + " must have a string name, a string version and a boolean optional, got " +
                     e.dump());
    }
    sigmf_extension ext{name_it->get<std::string>(), version_it->get<std::string>(),
                        optional_it->get<bool>()};
    if (ext.name == paq_extension_name) continue;  // ours: understood, declared again on write
    if (!ext.optional) {
      fail(name, "the recording requires the SigMF extension '" + ext.name + "' version " +
                     ext.version + " (" + where +
                     " has optional: false), which paqd does not support (supported: paq)");
    }
    extensions.push_back(std::move(ext));
  }
  return extensions;
}

// Every capture's core:sample_start (in order, as SigMF requires), core:header_bytes and
// core:datetime; the first capture's core:frequency and core:datetime go into meta too.
void parse_captures(const std::string& name, const json& captures, sigmf_meta& meta) {
  if (!captures.is_array()) fail(name, "\"captures\" must be a JSON array");
  std::uint64_t previous_start = 0;
  for (std::size_t i = 0; i < captures.size(); ++i) {
    const json& capture = captures[i];
    const std::string where = "captures[" + std::to_string(i) + "]";
    if (!capture.is_object()) fail(name, where + " must be a JSON object");
    const std::uint64_t start = get_count(name, capture, "core:sample_start", where);
    if (start < previous_start) {
      fail(name, where + " core:sample_start " + std::to_string(start) +
                     " is before the previous capture's " + std::to_string(previous_start) +
                     " (SigMF captures are in sample order)");
    }
    previous_start = start;
    if (const std::uint64_t header = get_count(name, capture, "core:header_bytes", where);
        header != 0) {
      meta.header_chunks.push_back({start, header, i});
    }
    meta.capture_times.push_back({start, get_string(name, capture, "core:datetime", where), i});
    if (i != 0) continue;
    // Frequency of the first capture only: paqd receives one link; a later capture's boundary
    // is a gap in the stream (io::recording_marks), its time in capture_times.
    const auto freq_it = capture.find("core:frequency");
    if (freq_it != capture.end()) {
      if (!freq_it->is_number() || !std::isfinite(freq_it->get<double>())) {
        fail(name, where + " core:frequency must be a finite number, got " + freq_it->dump());
      }
      meta.center_frequency_hz = freq_it->get<double>();
    }
    const std::string datetime = get_string(name, capture, "core:datetime", where);
    if (!datetime.empty()) meta.datetime_iso8601 = datetime;
  }
}

}  // namespace

sigmf_meta parse_sigmf_meta(std::string_view text, const std::string& name) {
  // nlohmann::json parses iteratively but copies, compares and prints recursively: a deep
  // document would overflow the stack later, far from here. Refuse it before building it.
  if (const std::size_t depth = json_nesting_depth(text);
      depth > static_cast<std::size_t>(sigmf_max_json_depth)) {
    fail(name, "JSON nesting depth " + std::to_string(depth) + " exceeds the limit of " +
                   std::to_string(sigmf_max_json_depth));
  }
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::exception& e) {
    // parse_error for syntax, out_of_range for numbers such as 1e999 that overflow a double.
    fail(name, std::string("invalid JSON: ") + e.what());
  }
  if (!doc.is_object()) fail(name, "top level must be a JSON object");
  const auto global_it = doc.find("global");
  if (global_it == doc.end()) fail(name, "\"global\" object is missing");
  if (!global_it->is_object()) fail(name, "\"global\" must be a JSON object");
  const json& global = *global_it;

  sigmf_meta meta;
  meta.format = parse_sigmf_datatype(name, global);

  const auto rate_it = global.find("core:sample_rate");
  if (rate_it == global.end()) fail(name, "global core:sample_rate is missing");
  if (!rate_it->is_number()) {
    fail(name, "global core:sample_rate must be a number, got " + rate_it->dump());
  }
  // The range is checked here, before anything multiplies the rate by seconds and converts
  // the product to a sample count: 1e300 would make that conversion undefined behaviour.
  // (The parser already rejects 1e999 and NaN; the range test also refuses infinity should a
  // future parser map overflow to it.)
  const double rate_hz = rate_it->get<double>();
  if (!is_supported_sample_rate(rate_hz)) {
    fail(name, "global core:sample_rate " + rate_it->dump() + " is out of range (" +
                   number_text(min_sample_rate_hz) + " .. " + number_text(max_sample_rate_hz) +
                   " Hz)");
  }
  meta.sample_rate_hz = rate_hz;

  (void)get_string(name, global, "core:version", "global");  // type check only
  meta.description = get_string(name, global, "core:description", "global");
  meta.recorder = get_string(name, global, "core:recorder", "global");
  meta.extensions = parse_extensions(name, global);

  // Layouts that would make us decode the wrong bytes: refuse rather than produce noise.
  if (global.contains("core:num_channels")) {
    const std::uint64_t channels = get_count(name, global, "core:num_channels", "global");
    if (channels < 1 || channels > static_cast<std::uint64_t>(max_channels)) {
      fail(name, "global core:num_channels " + std::to_string(channels) + " is out of range (1 .. " +
                     std::to_string(max_channels) + ")");
    }
    meta.num_channels = static_cast<int>(channels);
  }
  if (const std::uint64_t trailing = get_count(name, global, "core:trailing_bytes", "global");
      trailing != 0) {
    fail(name, "data files with core:trailing_bytes " + std::to_string(trailing) +
                   " are not supported (allowed: 0)");
  }
  const auto metadata_only_it = global.find("core:metadata_only");
  if (metadata_only_it != global.end() && metadata_only_it->is_boolean() &&
      metadata_only_it->get<bool>()) {
    fail(name, "recording is core:metadata_only and has no samples");
  }

  if (meta.format == sample_format::ci16_le) {
    const auto scale_it = global.find(ci16_scale_key);
    if (scale_it != global.end()) {
      const double scale = scale_it->is_number() ? scale_it->get<double>() : 0.0;
      if (!scale_it->is_number() || !(scale >= min_ci16_scale && scale <= max_ci16_scale)) {
        fail(name, std::string("global ") + ci16_scale_key +
                       " must be a number in 1e-6 .. 1e9 (counts per unit amplitude), got " + scale_it->dump());
      }
      meta.ci16_scale = static_cast<float>(scale);
    }
    // Absent (a foreign ci16 recording): keep default_ci16_scale, paqd's own convention.
  }

  meta.extra_global = json::object();
  for (const auto& [key, value] : global.items()) {
    if (key.starts_with("core:") || key == ci16_scale_key) continue;
    meta.extra_global[key] = value;
  }

  // Some writers put core:datetime in global; take it as a fallback for the capture's.
  meta.datetime_iso8601 = get_string(name, global, "core:datetime", "global");

  if (const auto captures_it = doc.find("captures"); captures_it != doc.end()) {
    parse_captures(name, *captures_it, meta);
  }
  meta.annotations = json::array();
  if (const auto annotations_it = doc.find("annotations"); annotations_it != doc.end()) {
    if (!annotations_it->is_array()) fail(name, "\"annotations\" must be a JSON array");
    meta.annotations = std::move(*annotations_it);
  }
  return meta;
}

}  // namespace paq::io
