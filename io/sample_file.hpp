// Reading and writing IQ recordings: SigMF (.sigmf-meta + .sigmf-data) or raw sample files.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "dsp/batch.hpp"
#include "dsp/thread_team.hpp"
#include "dsp/types.hpp"
#include "io/sample_format.hpp"
#include "io/sample_source.hpp"
#include "io/sigmf.hpp"

namespace paq::io {

struct recording_info {
  std::filesystem::path data_path;  ///< the .sigmf-data or raw file, or the .sigmf archive
  /// Where the data starts in data_path: 0, or the data member's offset in a .sigmf archive.
  std::uint64_t data_offset_bytes = 0;
  std::string archive_member;  ///< the data member's name in a .sigmf archive; else empty
  sample_format format = sample_format::cf32_le;
  double sample_rate_hz = 0;
  std::uint64_t num_samples = 0;     ///< whole samples in the data (header bytes excluded)
  std::uint64_t trailing_bytes = 0;  ///< bytes after the last whole sample: a truncated file
  bool is_sigmf = false;
  /// Channels interleaved in the data (SigMF core:num_channels, or a raw file's as given) and
  /// the one read, 1 .. num_channels. A sample is one sample time: num_channels values.
  int num_channels = 1;
  int channel = 1;
  /// The SigMF metadata; for a raw file, format, sample_rate_hz and ci16_scale as given to
  /// open() and everything else defaulted.
  sigmf_meta meta;
};

/// Sequential reader of a recording, decoding to cf32. Move-only; not thread-safe.
class sample_file_reader {
 public:
  /// Opens a recording. A SigMF archive when path is an existing file ending in .sigmf (a tar
  /// of one recording, read in place: io/sigmf_archive.hpp); SigMF when path ends in
  /// .sigmf-meta, .sigmf-data or .sigmf, or when "<path>.sigmf-meta" exists; the metadata is
  /// then authoritative and the raw_* arguments are ignored. Otherwise path is a raw file of
  /// raw_format samples at raw_sample_rate_hz, and both must be given (ci16 components are
  /// divided by raw_ci16_scale). Captures with core:header_bytes are read as SigMF lays them
  /// out: that many bytes before the capture's first sample are skipped.
  /// Throws format_error (message starting with the path) for a missing or invalid meta file
  /// or archive (io/sigmf_archive.hpp), a capture whose header bytes run past the end of the
  /// data (naming the capture and the key),
  /// a raw file without format or rate, a missing or unreadable data file, or one with no
  /// whole sample; std::invalid_argument for a raw rate outside [min_sample_rate_hz,
  /// max_sample_rate_hz] (NaN included) or a non-positive raw scale. A data file
  /// whose size is not a multiple of the sample size is accepted: see
  /// recording_info::trailing_bytes.
  /// A recording of several channels (SigMF core:num_channels, or raw_channels for a raw
  /// file) is read one channel at a time: `channel`, 1 .. the channels. std::invalid_argument
  /// (the caller's choice, not the file, is wrong) for such a recording without a channel,
  /// naming its channels (paqd receives one), for a channel the recording does not have, and
  /// for raw_channels outside 1 .. max_channels.
  [[nodiscard]] static sample_file_reader open(const std::filesystem::path& path,
                                               std::optional<sample_format> raw_format = {},
                                               std::optional<double> raw_sample_rate_hz = {},
                                               float raw_ci16_scale = default_ci16_scale,
                                               std::optional<int> channel = {}, int raw_channels = 1);

  sample_file_reader(sample_file_reader&& other) noexcept;
  sample_file_reader& operator=(sample_file_reader&& other) noexcept;
  sample_file_reader(const sample_file_reader&) = delete;
  sample_file_reader& operator=(const sample_file_reader&) = delete;
  ~sample_file_reader();

  /// Reads up to out.size() samples into out and returns how many; 0 at the end. Never
  /// returns the trailing partial sample. Throws std::runtime_error naming the file and byte
  /// offset on an I/O error or when the file ends early (it shrank after open).
  [[nodiscard]] std::size_t read(std::span<cf32> out);
  /// The same for a ci16_le recording, its samples as stored (no conversion: each stands for
  /// to_cf32(s, info().meta.ci16_scale)), for a chain that takes ci16 at its own width.
  /// Throws std::logic_error for a recording that is not ci16_le.
  [[nodiscard]] std::size_t read(std::span<ci16> out);
  /// Two channels of a multi-channel recording per sample time, decoded to cf32: the channel
  /// open() chose (cf32x2::a) and `second` (cf32x2::b, 1 .. the channels, not the chosen
  /// one; std::invalid_argument otherwise). The same positions and end as read().
  [[nodiscard]] std::size_t read(std::span<cf32x2> out, int second);

  [[nodiscard]] const recording_info& info() const noexcept { return info_; }
  /// Samples read so far (since open or the last rewind).
  [[nodiscard]] std::uint64_t position() const noexcept { return position_; }
  /// Goes back to the first sample.
  void rewind() noexcept { position_ = 0; }

 private:
  /// A run of samples that lie contiguously in the file: from sample_start up to the next
  /// segment's, the first at byte offset_bytes. One per capture with header bytes, after the
  /// first segment {0, data_offset_bytes}.
  struct segment {
    std::uint64_t sample_start = 0;
    std::uint64_t offset_bytes = 0;
  };

  sample_file_reader(recording_info info, int fd) noexcept;
  void read_exact(std::byte* dst, std::size_t num_bytes, std::uint64_t offset_bytes);
  /// read_exact, a large read split over several threads.
  void read_exact_parallel(std::byte* dst, std::size_t num_bytes, std::uint64_t offset_bytes);
  /// Lays out the segments from the header chunks and sets num_samples and trailing_bytes,
  /// given the bytes that hold the data (the file, or the archive member).
  void lay_out(std::uint64_t data_bytes);
  /// Reads up to count samples from position_ that lie in one segment, decoding into out.
  [[nodiscard]] std::size_t read_contiguous(cf32* out, std::size_t count);
  /// How many of count samples from position_ lie in one segment, and the byte offset of
  /// the first.
  [[nodiscard]] std::pair<std::size_t, std::uint64_t> contiguous_run(std::size_t count) const;
  /// Allocates buffer_ at the first read that needs it.
  void ensure_buffer();
  /// Bytes of one sample time: a sample of each channel.
  [[nodiscard]] std::size_t frame_bytes() const noexcept;
  /// Reads `count` sample times (from one segment, at offset) into buffer_, the chosen
  /// channel's samples packed at its start.
  void read_channel(std::size_t count, std::uint64_t offset);

  recording_info info_;
  std::vector<segment> segments_;  ///< never empty once open
  int fd_ = -1;
  std::uint64_t position_ = 0;
  std::vector<std::byte> buffer_;  ///< encoded bytes; allocated by the first read that needs it
  std::vector<cf32> decoded_;      ///< a two-channel read's block, every channel decoded
  std::unique_ptr<dsp::thread_team> team_;  ///< a large read's threads, made by the first such read
};

/// What lies between a recording's samples: a gap, or the time of the next sample.
struct recording_mark {
  enum class kind : std::uint8_t { gap, time };
  std::uint64_t sample = 0;  ///< the mark lies right before this sample
  kind what = kind::time;
  std::uint64_t lost_samples = 0;                 ///< a gap's samples known lost (0: unknown)
  gap_reason reason = gap_reason::discontinuity;  ///< a gap's
  std::int64_t utc_ns = 0;                        ///< a time's: the sample's UTC (ns since 1970)
  friend bool operator==(const recording_mark&, const recording_mark&) = default;
};

/// A recording's gaps and time (docs/DAEMON.md, "Time" and "Recording"), in sample order, the
/// gaps at a sample before its time; none for a raw file:
/// - gaps: each entry of paq:gaps (paqd's recorder lists there every gap it saw, with the
///   samples lost and the reason; a coalesced entry is one gap of unknown size at its first
///   sample), and every capture boundary no entry explains whose time does not continue the
///   capture before it within 1 us at the recording's rate (a discontinuity of unknown size:
///   a recorder that paused, or a capture without time). No gap lies before sample 0.
/// - time: each capture's core:datetime (a global core:datetime, which some writers use, when
///   no capture has one).
/// A core:datetime that is not "YYYY-MM-DDTHH:MM:SS[.f...]Z" gives no time, and a malformed
/// paq:gaps entry no gap; each a message in `warnings` naming it.
[[nodiscard]] std::vector<recording_mark> recording_marks(const sigmf_meta& meta, std::vector<std::string>& warnings);

/// Walks a recording's marks alongside its reads (the file source and replay's feed).
class mark_cursor {
 public:
  explicit mark_cursor(std::span<const recording_mark> marks) : marks_(marks) {}
  /// The next mark due before sample `position` (the samples read so far), or nullptr when
  /// the read may go on. A gap before sample 0 and marks already passed are skipped.
  [[nodiscard]] const recording_mark* next(std::uint64_t position);
  /// How many of `want` samples a read at `position` may take: up to the next mark.
  [[nodiscard]] std::size_t limit(std::uint64_t position, std::size_t want) const;
  /// Back to the first mark (a looped recording).
  void rewind() noexcept { next_ = 0; }

 private:
  std::span<const recording_mark> marks_;
  std::size_t next_ = 0;
};

/// Writer of a recording, encoding from cf32. Move-only; not thread-safe.
class sample_file_writer {
 public:
  /// Creates "<base>.sigmf-data" (truncating) given the base name or any SigMF file name (see
  /// sigmf_paths). An existing "<base>.sigmf-meta" is deleted now and the new one is written
  /// by close(), after the data is synced: a recording that never closed has no meta file.
  /// Throws std::invalid_argument if meta cannot be described (see to_sigmf_json), before
  /// touching any file; std::runtime_error (path and strerror) if a file cannot be created.
  [[nodiscard]] static sample_file_writer create_sigmf(const std::filesystem::path& base_or_meta_path,
                                                       const sigmf_meta& meta);
  /// Creates (truncating) a raw sample file. Throws std::invalid_argument for a non-positive
  /// ci16_scale, std::runtime_error if the file cannot be created.
  [[nodiscard]] static sample_file_writer create_raw(const std::filesystem::path& path,
                                                     sample_format format,
                                                     float ci16_scale = default_ci16_scale);

  sample_file_writer(sample_file_writer&& other) noexcept;
  /// Closes the current file first, swallowing errors as the destructor does.
  sample_file_writer& operator=(sample_file_writer&& other) noexcept;
  sample_file_writer(const sample_file_writer&) = delete;
  sample_file_writer& operator=(const sample_file_writer&) = delete;
  /// Closes without throwing; call close() to see errors.
  ~sample_file_writer();

  /// Appends samples. Throws std::runtime_error naming the file, byte offset and strerror on a
  /// write error (e.g. disk full); the writer is then failed: further writes throw
  /// std::logic_error and close() writes no meta file for the incomplete recording.
  /// std::logic_error after close(). A recording of several channels (meta.num_channels) takes
  /// them interleaved, a sample of each channel per sample time; close() refuses a last
  /// sample time left incomplete.
  void write(std::span<const cf32> samples);

  /// Syncs and closes the data file, then (SigMF, not failed) writes the meta file. Throws
  /// std::runtime_error on any failure. Idempotent: later calls do nothing.
  void close();

  [[nodiscard]] std::uint64_t samples_written() const noexcept { return samples_written_; }
  /// I or Q components saturated (or NaN) by ci16 encoding so far; always 0 for cf32.
  [[nodiscard]] std::uint64_t clipped_components() const noexcept { return clipped_components_; }
  [[nodiscard]] const std::filesystem::path& data_path() const noexcept { return data_path_; }
  /// Empty for a raw file.
  [[nodiscard]] const std::filesystem::path& meta_path() const noexcept { return meta_path_; }
  /// The metadata close() will write (SigMF): a recorder adds what it learns while
  /// recording (e.g. gaps) to extra_global before closing. Format and rate must not change.
  [[nodiscard]] sigmf_meta& pending_meta() noexcept { return meta_; }

 private:
  sample_file_writer(std::filesystem::path data_path, std::filesystem::path meta_path,
                     sigmf_meta meta, int fd) noexcept;
  void write_all(const std::byte* src, std::size_t num_bytes);
  void close_quietly() noexcept;

  std::filesystem::path data_path_;
  std::filesystem::path meta_path_;  ///< empty: raw file
  sigmf_meta meta_;                  ///< format and ci16_scale are used for raw files too
  int fd_ = -1;
  bool failed_ = false;
  std::uint64_t samples_written_ = 0;
  std::uint64_t clipped_components_ = 0;
  std::vector<std::byte> buffer_;  ///< encoded bytes; allocated by the first write that needs it
};

}  // namespace paq::io
