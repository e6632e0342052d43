// SigMF (v1.x) metadata: the .sigmf-meta JSON that describes a .sigmf-data recording.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/sample_format.hpp"

namespace paq::io {

/// A recording or its metadata is unusable. The message starts with the offending file's path,
/// so that it can be shown to the user as is.
class format_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// paqd's own SigMF namespace: every key paqd adds ("paq:gaps", "paq:ci16_scale", ...) is in it,
/// and every file paqd writes with such a key declares it in global core:extensions as
/// {"name": "paq", "version": paq_extension_version, "optional": true}: a reader that does not
/// know it loses nothing it needs to read the samples. docs/DAEMON.md lists the keys.
inline constexpr std::string_view paq_extension_name = "paq";
inline constexpr std::string_view paq_extension_version = "1.0.0";

/// One entry of global core:extensions (SigMF: name, version, optional; nothing else).
struct sigmf_extension {
  std::string name;
  std::string version;
  bool optional = true;
  bool operator==(const sigmf_extension&) const = default;
};

/// A capture whose core:header_bytes is not 0: that many bytes that are not samples lie in the
/// data file right before the capture's first sample (a SigMF Non-Conforming Dataset).
struct sigmf_header_chunk {
  std::uint64_t sample_start = 0;  ///< the capture's core:sample_start
  std::uint64_t header_bytes = 0;  ///< > 0
  std::size_t capture_index = 0;   ///< its index in "captures", for messages
  bool operator==(const sigmf_header_chunk&) const = default;
};

/// A capture: where it starts and its core:datetime as text ("" when it has none).
struct sigmf_capture_time {
  std::uint64_t sample_start = 0;  ///< the capture's core:sample_start
  std::string datetime;            ///< its core:datetime text ("" when none)
  std::size_t capture_index = 0;   ///< its index in "captures", for messages
  bool operator==(const sigmf_capture_time&) const = default;
};

/// The part of a SigMF description that paqd uses. Fields map to SigMF keys as follows:
/// format -> global core:datatype, sample_rate_hz -> global core:sample_rate,
/// description -> global core:description, recorder -> global core:recorder,
/// ci16_scale -> global paq:ci16_scale (ci16 only), center_frequency_hz -> first capture's
/// core:frequency, datetime_iso8601 -> first capture's core:datetime (SigMF defines datetime
/// per capture, not globally), extensions -> global core:extensions (besides paq),
/// annotations -> "annotations", header_chunks -> captures' core:header_bytes (read only).
struct sigmf_meta {
  sample_format format = sample_format::cf32_le;
  double sample_rate_hz = 0;
  std::string description;
  std::string recorder;
  float ci16_scale = default_ci16_scale;
  double center_frequency_hz = 0;  ///< 0: unknown, core:frequency is not written
  std::string datetime_iso8601;    ///< empty: not written
  /// global core:num_channels, 1 .. max_channels: the channels' samples interleaved, one of
  /// each channel per sample time (written when above 1).
  int num_channels = 1;
  /// Extra namespaced keys of the "global" object, e.g. {"paq:preset": "...", "paq:seed": 7}.
  /// Must be null or an object whose keys have a non-core namespace ("ns:name"). On read it
  /// receives every global key outside the core namespace, except paq:ci16_scale.
  nlohmann::json extra_global;
  /// Extensions other than paq to declare in core:extensions (the writer declares paq itself
  /// when a paq: key is written). On write, every namespace used by a key of extra_global or
  /// of an annotation must be paq or listed here. On read: the file's entries other than paq.
  std::vector<sigmf_extension> extensions;
  /// The "annotations" array: null (none) or annotation objects, each with an unsigned integer
  /// core:sample_start, in non-decreasing order of it, keys namespaced as in extra_global.
  /// On read: the file's array as it is (an empty array when absent).
  nlohmann::json annotations;
  /// On read: the captures with header bytes, by sample_start; the reader skips those bytes.
  /// Must be empty on write: paqd writes conforming datasets, samples only.
  std::vector<sigmf_header_chunk> header_chunks;
  /// On read: every capture, in capture order, with its core:datetime where it has one (the
  /// first one is also in datetime_iso8601). On write: empty gives one capture at sample 0
  /// timed by datetime_iso8601; else these captures (in sample order, as read accepts them;
  /// the first timed by datetime_iso8601 when its own datetime is empty), each with
  /// core:frequency when center_frequency_hz is set.
  std::vector<sigmf_capture_time> capture_times;
};

/// Limits on a .sigmf-meta file read from outside (read_sigmf_meta). paqd's own metadata is a
/// few KiB with nesting depth 4 (global -> paq:gaps -> gap object); the limits are far above
/// any honest file and far below what would exhaust memory or the stack: the JSON DOM takes
/// about 10x the text (16 MiB -> ~160 MiB at worst), and nlohmann::json copies and prints
/// recursively, one stack frame per level.
inline constexpr std::size_t sigmf_max_meta_bytes = std::size_t{16} << 20;
inline constexpr int sigmf_max_json_depth = 64;

/// Sample rates paqd accepts from a recording (metadata or raw-file rate), checked before any
/// conversion to a sample count. The receiver runs at 2 samples per bit and bit rates of 1 to
/// 30 Mbit/s; 1 kHz .. 1 GHz leaves room for test files and resampled captures while keeping
/// every "seconds x rate" product in the daemon (ring capacity, timeouts) far inside 64 bits.
inline constexpr double min_sample_rate_hz = 1e3;
inline constexpr double max_sample_rate_hz = 1e9;

/// True when rate_hz is a number in [min_sample_rate_hz, max_sample_rate_hz] (NaN is not).
[[nodiscard]] bool is_supported_sample_rate(double rate_hz) noexcept;

/// The deepest nesting of JSON arrays and objects in text, counting brackets outside string
/// literals, without building anything (so it cannot overflow the stack on any input). Used
/// to refuse deep documents before the parser sees them; malformed text gets a number too.
[[nodiscard]] std::size_t json_nesting_depth(std::string_view text) noexcept;

struct sigmf_file_paths {
  std::filesystem::path meta;  ///< <base>.sigmf-meta
  std::filesystem::path data;  ///< <base>.sigmf-data
};

/// True when the file name ends in ".sigmf-meta", ".sigmf-data" or ".sigmf" (an archive, or
/// a spelling of the base name when no such file exists: see sample_file_reader::open).
[[nodiscard]] bool has_sigmf_suffix(const std::filesystem::path& path);

/// The meta and data paths of a recording named by its base name or by any of
/// "<base>.sigmf-meta", "<base>.sigmf-data", "<base>.sigmf" (the known suffix is stripped).
/// ".sigmf" is taken as a spelling of the base name here; a SigMF archive of that name is
/// read by sample_file_reader::open (io/sigmf_archive.hpp), not through these paths.
[[nodiscard]] sigmf_file_paths sigmf_paths(const std::filesystem::path& path);

/// The SigMF JSON text for meta. Throws std::invalid_argument if meta cannot be described
/// (non-positive or non-finite sample rate or ci16 scale, malformed extra_global, extensions or
/// annotations, a namespace that is used but not declared, header_chunks not empty, captures
/// out of order).
[[nodiscard]] std::string to_sigmf_json(const sigmf_meta& meta);

/// Writes to_sigmf_json(meta) to meta_path. The text goes to "<meta_path>.tmp" first and is
/// renamed into place, so a crash never leaves a half-written meta file. Throws
/// std::invalid_argument as to_sigmf_json does and std::runtime_error (path and strerror) on
/// I/O failure.
void write_sigmf_meta(const std::filesystem::path& meta_path, const sigmf_meta& meta);

/// Reads and validates a .sigmf-meta file. Throws format_error, message starting with the
/// path, when the file is missing, unreadable or not a regular file (a FIFO or device could
/// block or never end), larger than sigmf_max_meta_bytes; or as parse_sigmf_meta does.
[[nodiscard]] sigmf_meta read_sigmf_meta(const std::filesystem::path& meta_path);

/// Parses and validates SigMF metadata text; `name` starts every message (the file's path, or
/// "<archive> member <name>"). Throws format_error when the text is nested deeper than
/// sigmf_max_json_depth, is not JSON, has no "global" object, has a core:datatype other than
/// cf32_le / ci16_le, or a core:sample_rate that is missing, not a number or outside
/// [min_sample_rate_hz, max_sample_rate_hz], a malformed core:extensions or one that declares
/// an extension other than paq with optional: false (SigMF: the reader must then support it);
/// also for layouts paqd would misread (core:num_channels outside 1 .. max_channels, nonzero core:trailing_bytes,
/// captures out of order or with a malformed core:sample_start or core:header_bytes).
[[nodiscard]] sigmf_meta parse_sigmf_meta(std::string_view text, const std::string& name);

}  // namespace paq::io
