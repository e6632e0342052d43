#include "io/sample_file.hpp"

#include "dsp/batcher.hpp"
#include "io/utc_time.hpp"

#include "io/sigmf_archive.hpp"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <iomanip>
#include <sstream>
#include <stdexcept>
#include <string>
#include <system_error>
#include <tuple>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace paq::io {

namespace {

/// |x - y| > 1 us, in unsigned arithmetic: two times 580 years apart differ by more than an
/// int64 holds.
bool more_than_1us_apart(std::int64_t x, std::int64_t y)
{
  const std::uint64_t d = x >= y ? static_cast<std::uint64_t>(x) - static_cast<std::uint64_t>(y)
                                 : static_cast<std::uint64_t>(y) - static_cast<std::uint64_t>(x);
  return d > 1000;
}

/// The gaps paqd's recorder listed in global paq:gaps.
void recorded_gaps(const sigmf_meta& meta, std::vector<recording_mark>& out, std::vector<std::string>& warnings)
{
  if (!meta.extra_global.is_object()) return;
  const auto it = meta.extra_global.find("paq:gaps");
  if (it == meta.extra_global.end()) return;
  if (!it->is_array()) {
    warnings.push_back("paq:gaps is not an array: its gaps are not known");
    return;
  }
  for (std::size_t i = 0; i < it->size(); ++i) {
    const auto& g = (*it)[i];
    const auto count = [&](const char* key) -> std::optional<std::uint64_t> {
      if (!g.is_object()) return std::nullopt;
      const auto v = g.find(key);
      if (v == g.end() || !v->is_number_unsigned()) return std::nullopt;
      return v->get<std::uint64_t>();
    };
    const auto text = [&](const char* key) -> std::string {
      if (!g.is_object()) return {};
      const auto v = g.find(key);
      return v != g.end() && v->is_string() ? v->get<std::string>() : std::string();
    };
    const auto at = count("recording_sample");
    const auto lost = count("lost");
    if (!at || !lost) {
      warnings.push_back("paq:gaps[" + std::to_string(i) +
                         "] has no unsigned recording_sample and lost: that gap is not known");
      continue;
    }
    recording_mark m;
    m.sample = *at;
    m.what = recording_mark::kind::gap;
    m.lost_samples = *lost;
    std::string reason = text("reason");
    if (reason == "coalesced") {
      // A flood of gaps merged into one entry: one gap of unknown size where they began.
      reason = text("first_reason");
      m.lost_samples = 0;
    }
    if (const auto r = value_named(gap_reason_names, reason)) {
      m.reason = *r;
    } else {
      warnings.push_back("paq:gaps[" + std::to_string(i) + "] reason '" + reason +
                         "' is not a gap reason paqd knows: taken as a discontinuity");
    }
    out.push_back(m);
  }
}

}  // namespace

std::vector<recording_mark> recording_marks(const sigmf_meta& meta, std::vector<std::string>& warnings)
{
  std::vector<recording_mark> gaps;
  recorded_gaps(meta, gaps, warnings);
  std::vector<sigmf_capture_time> captures = meta.capture_times;
  const bool any_capture_time =
      std::any_of(captures.begin(), captures.end(), [](const sigmf_capture_time& c) { return !c.datetime.empty(); });
  if (!any_capture_time && !meta.datetime_iso8601.empty()) {
    if (captures.empty()) captures.push_back({0, "", 0});
    captures.front().datetime = meta.datetime_iso8601;
  }
  // The samples paq:gaps explains (a flood lists up to 10,000, against as many captures).
  std::vector<std::uint64_t> listed;
  for (const auto& g : gaps) listed.push_back(g.sample);
  std::sort(listed.begin(), listed.end());
  std::vector<recording_mark> times;
  std::optional<recording_mark> last_time;  // the latest capture time, to extrapolate from
  for (std::size_t i = 0; i < captures.size(); ++i) {
    const auto& c = captures[i];
    std::optional<std::int64_t> utc;
    if (!c.datetime.empty()) {
      utc = parse_utc_ns(c.datetime);
      if (!utc) {
        warnings.push_back("captures[" + std::to_string(c.capture_index) + "] core:datetime '" + c.datetime +
                           "' is not a UTC time (YYYY-MM-DDTHH:MM:SS[.fffffffff]Z): no absolute time from it");
      }
    }
    // A boundary: a gap unless paq:gaps explains it, or the capture's time continues the
    // time before it.
    if (c.sample_start > 0) {
      const bool explained = std::binary_search(listed.begin(), listed.end(), c.sample_start);
      bool continues = false;
      if (utc && last_time) {
        const std::int64_t expected = dsp::utc_ns_at({last_time->sample, last_time->utc_ns, meta.sample_rate_hz}, c.sample_start);
        continues = expected != dsp::unknown_utc_ns && !more_than_1us_apart(*utc, expected);
      }
      if (!explained && !continues) {
        recording_mark g;
        g.sample = c.sample_start;
        g.what = recording_mark::kind::gap;
        gaps.push_back(g);
        listed.insert(std::upper_bound(listed.begin(), listed.end(), g.sample), g.sample);  // a second capture here
      }
    }
    if (utc) {
      recording_mark t;
      t.sample = c.sample_start;
      t.what = recording_mark::kind::time;
      t.utc_ns = *utc;
      times.push_back(t);
      last_time = t;
    }
  }
  std::vector<recording_mark> out;
  for (const auto& g : gaps) {
    if (g.sample > 0) out.push_back(g);
  }
  out.insert(out.end(), times.begin(), times.end());
  // In sample order; at one sample the gaps (in their listed order) before the time.
  std::stable_sort(out.begin(), out.end(), [](const recording_mark& a, const recording_mark& b) {
    if (a.sample != b.sample) return a.sample < b.sample;
    return a.what == recording_mark::kind::gap && b.what == recording_mark::kind::time;
  });
  return out;
}

const recording_mark* mark_cursor::next(std::uint64_t position)
{
  while (next_ < marks_.size() && marks_[next_].sample <= position) {
    const recording_mark& m = marks_[next_++];
    if (m.sample < position) continue;  // already past it
    if (m.what == recording_mark::kind::gap && position == 0) continue;  // nothing before it
    return &m;
  }
  return nullptr;
}

std::size_t mark_cursor::limit(std::uint64_t position, std::size_t want) const
{
  if (next_ < marks_.size() && marks_[next_].sample > position) {
    return static_cast<std::size_t>(std::min<std::uint64_t>(want, marks_[next_].sample - position));
  }
  return want;
}

namespace {

namespace fs = std::filesystem;

// Large enough that per-syscall overhead is negligible next to the copy, small enough to stay
// in L2. A multiple of every sample size, so blocks never split a sample.
constexpr std::size_t io_block_bytes = std::size_t{1} << 20;
static_assert(io_block_bytes % 8 == 0 && io_block_bytes % 4 == 0);

[[nodiscard]] std::string errno_text(int err) { return std::generic_category().message(err); }

// cf32_le on a little-endian host is the in-memory layout of cf32: move bytes straight between
// the file and the caller's span, skipping the staging buffer.
[[nodiscard]] bool is_native_layout(sample_format format) noexcept {
  return format == sample_format::cf32_le && std::endian::native == std::endian::little;
}

[[nodiscard]] bool is_positive_finite(double v) noexcept { return std::isfinite(v) && v > 0; }

[[nodiscard]] int open_for_writing(const fs::path& path) {
  int fd = -1;
  do {
    fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) throw std::runtime_error(path.string() + ": cannot create: " + errno_text(errno));
  return fd;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// sample_file_reader

sample_file_reader::sample_file_reader(recording_info info, int fd) noexcept
    : info_(std::move(info)), fd_(fd) {}

sample_file_reader::sample_file_reader(sample_file_reader&& other) noexcept
    : info_(std::move(other.info_)),
      segments_(std::move(other.segments_)),
      fd_(std::exchange(other.fd_, -1)),
      position_(std::exchange(other.position_, 0)),
      buffer_(std::move(other.buffer_)),
      decoded_(std::move(other.decoded_)),
      team_(std::move(other.team_)) {}

sample_file_reader& sample_file_reader::operator=(sample_file_reader&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);  // read-only: nothing to lose on a failed close
    info_ = std::move(other.info_);
    segments_ = std::move(other.segments_);
    fd_ = std::exchange(other.fd_, -1);
    position_ = std::exchange(other.position_, 0);
    buffer_ = std::move(other.buffer_);
    decoded_ = std::move(other.decoded_);
    team_ = std::move(other.team_);
  }
  return *this;
}

sample_file_reader::~sample_file_reader() {
  if (fd_ >= 0) ::close(fd_);
}

namespace {

[[nodiscard]] int open_for_reading(const fs::path& path) {
  int fd = -1;
  do {
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) throw format_error(path.string() + ": cannot open: " + errno_text(errno));
  return fd;
}

// The size of the regular file open on fd; sizes of pipes and devices are meaningless, and
// num_samples must be known up front.
[[nodiscard]] std::uint64_t regular_file_size(int fd, const fs::path& path) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw format_error(path.string() + ": cannot stat: " + errno_text(errno));
  if (!S_ISREG(st.st_mode)) throw format_error(path.string() + ": is not a regular file");
  return static_cast<std::uint64_t>(st.st_size);
}

/// The channel a reader reads of a recording with `channels` interleaved (1: there is no
/// choice to make, and channel 1 is the only one accepted).
void choose_channel(recording_info& info, int channels, std::optional<int> channel, const fs::path& path) {
  const char* counted_by = info.is_sigmf ? "core:num_channels" : "--channels";
  info.num_channels = channels;
  if (channel && (*channel < 1 || *channel > channels)) {
    throw std::invalid_argument(path.string() + ": channel " + std::to_string(*channel) + " does not exist (it has " +
                                std::to_string(channels) + (channels == 1 ? " channel" : " channels, 1 .. " + std::to_string(channels)) + ")");
  }
  if (!channel && channels > 1) {
    throw std::invalid_argument(path.string() + ": " + std::to_string(channels) +
                       " channels interleaved (" + counted_by + "), and paqd receives one: choose it (--channel 1 .. " +
                       std::to_string(channels) + " of paqd replay and paq-stream; source.file.channel in paqd.yaml)");
  }
  info.channel = channel.value_or(1);
}

// The raw-file settings given for a SigMF recording (paqd replay's and paq-stream's --datatype,
// --sample-rate and --channels, the file source's raw_*): its metadata says the same, and one
// that contradicts it is named, never ignored in silence.
void check_raw_settings(const recording_info& ri, std::optional<sample_format> raw_format,
                        std::optional<double> raw_sample_rate_hz, int raw_channels, const fs::path& path) {
  std::vector<std::string> wrong;
  if (raw_format && *raw_format != ri.format) {
    wrong.push_back("the sample format " + std::string(to_sigmf_datatype(*raw_format)) + " given; its core:datatype is " +
                    std::string(to_sigmf_datatype(ri.format)));
  }
  if (raw_sample_rate_hz && *raw_sample_rate_hz != ri.sample_rate_hz) {
    std::ostringstream m;
    m << std::setprecision(10) << "the sample rate " << *raw_sample_rate_hz << " given; its core:sample_rate is " << ri.sample_rate_hz;
    wrong.push_back(m.str());
  }
  if (raw_channels != 1 && raw_channels != ri.meta.num_channels) {
    wrong.push_back(std::to_string(raw_channels) + " channels given; its core:num_channels is " + std::to_string(ri.meta.num_channels));
  }
  if (wrong.empty()) return;
  std::string msg = path.string() + " is a SigMF recording, read as its metadata says:";
  for (const auto& w : wrong) msg += " " + w + ";";
  msg += " the sample format, rate and channels are settings of raw files";
  throw std::invalid_argument(msg);
}

}  // namespace

sample_file_reader sample_file_reader::open(const std::filesystem::path& path,
                                            std::optional<sample_format> raw_format,
                                            std::optional<double> raw_sample_rate_hz,
                                            float raw_ci16_scale, std::optional<int> channel,
                                            int raw_channels) {
  recording_info info;
  const sigmf_file_paths paths = sigmf_paths(path);
  std::error_code ec;
  // "rec.sigmf" names an archive when such a file exists, else (as before archives were
  // read) the recording rec.sigmf-meta + rec.sigmf-data.
  if (has_sigmf_archive_suffix(path) && fs::exists(path, ec)) {
    info.is_sigmf = true;
    info.data_path = path;
    sample_file_reader reader(std::move(info), open_for_reading(path));
    recording_info& ri = reader.info_;
    const std::uint64_t archive_bytes = regular_file_size(reader.fd_, path);
    const sigmf_archive_recording rec = find_sigmf_archive_recording(reader.fd_, archive_bytes, path);
    if (rec.meta.size_bytes > sigmf_max_meta_bytes) {
      throw format_error(path.string() + ": member " + rec.meta.name + " is " +
                         std::to_string(rec.meta.size_bytes) + " bytes, more than the " +
                         std::to_string(sigmf_max_meta_bytes) + "-byte limit for SigMF metadata");
    }
    std::string text(static_cast<std::size_t>(rec.meta.size_bytes), '\0');
    reader.read_exact(reinterpret_cast<std::byte*>(text.data()), text.size(), rec.meta.offset_bytes);
    ri.meta = parse_sigmf_meta(text, path.string() + ": member " + rec.meta.name);
    ri.format = ri.meta.format;
    ri.sample_rate_hz = ri.meta.sample_rate_hz;
    ri.data_offset_bytes = rec.data.offset_bytes;
    ri.archive_member = rec.data.name;
    check_raw_settings(ri, raw_format, raw_sample_rate_hz, raw_channels, path);
    choose_channel(ri, ri.meta.num_channels, channel, path);
    reader.lay_out(rec.data.size_bytes);
    return reader;
  }
  info.is_sigmf = has_sigmf_suffix(path) || fs::exists(paths.meta, ec);
  if (info.is_sigmf) {
    info.meta = read_sigmf_meta(paths.meta);
    info.data_path = paths.data;
  } else {
    if (!raw_format || !raw_sample_rate_hz) {
      const std::string missing = !raw_format && !raw_sample_rate_hz ? "its sample format and sample rate are"
                                  : !raw_format                      ? "its sample format is"
                                                                     : "its sample rate is";
      throw format_error(path.string() + ": a raw file (no " + paths.meta.string() + " found): " + missing +
                         " not given (paqd replay: --datatype cf32_le|ci16_le, --sample-rate HZ)");
    }
    // The same range as a SigMF core:sample_rate (read_sigmf_meta), for the same reason:
    // callers multiply the rate by seconds and convert the product to a sample count.
    if (!is_supported_sample_rate(*raw_sample_rate_hz)) {
      char text[96];
      std::snprintf(text, sizeof text, "sample rate %g Hz is out of range (%g .. %g Hz)",
                    *raw_sample_rate_hz, min_sample_rate_hz, max_sample_rate_hz);
      throw std::invalid_argument(path.string() + ": " + text);
    }
    if (*raw_format == sample_format::ci16_le && !is_positive_finite(raw_ci16_scale)) {
      throw std::invalid_argument(path.string() + ": ci16 scale must be positive and finite, got " +
                                  std::to_string(raw_ci16_scale));
    }
    if (raw_channels < 1 || raw_channels > max_channels) {
      throw std::invalid_argument(path.string() + ": " + std::to_string(raw_channels) +
                                  " channels is out of range (1 .. " + std::to_string(max_channels) + ")");
    }
    info.meta.num_channels = raw_channels;
    info.meta.format = *raw_format;
    info.meta.sample_rate_hz = *raw_sample_rate_hz;
    info.meta.ci16_scale = raw_ci16_scale;
    info.data_path = path;
  }
  info.format = info.meta.format;
  info.sample_rate_hz = info.meta.sample_rate_hz;
  if (info.is_sigmf) check_raw_settings(info, raw_format, raw_sample_rate_hz, raw_channels, path);

  choose_channel(info, info.meta.num_channels, channel, path);
  const fs::path data_path = info.data_path;
  // From here on the reader object owns fd and closes it if a check below throws.
  sample_file_reader reader(std::move(info), open_for_reading(data_path));
  reader.lay_out(regular_file_size(reader.fd_, data_path));
  return reader;
}

void sample_file_reader::lay_out(std::uint64_t data_bytes) {
  recording_info& ri = info_;
  const std::string data_name =
      ri.data_path.string() + (ri.archive_member.empty() ? "" : ": member " + ri.archive_member);
  // A sample time is a sample of each channel: the layout counts whole sample times.
  const std::size_t sample_bytes = frame_bytes();
  segments_.assign(1, segment{0, ri.data_offset_bytes});

  // SigMF Non-Conforming Datasets: a capture's header_bytes lie right before its first sample,
  // so sample n is at n * sample_bytes plus the headers of every capture starting at or
  // before n. A header that would run past the end of the data is an error: its capture's
  // samples cannot be where the metadata says. A capture starting beyond the data refers to
  // samples that do not exist and is ignored (as SigMF says readers should).
  std::uint64_t headers = 0;
  for (const sigmf_header_chunk& chunk : ri.meta.header_chunks) {
    if (chunk.sample_start > (data_bytes - headers) / sample_bytes) break;
    const std::uint64_t at = chunk.sample_start * sample_bytes + headers;  // <= data_bytes
    if (chunk.header_bytes > data_bytes - at) {
      throw format_error(data_name + ": captures[" + std::to_string(chunk.capture_index) +
                         "] core:header_bytes " + std::to_string(chunk.header_bytes) +
                         " at byte offset " + std::to_string(at) + " (before sample " +
                         std::to_string(chunk.sample_start) + ") run past the end of the data (" +
                         std::to_string(data_bytes) + " bytes)");
    }
    headers += chunk.header_bytes;
    segments_.push_back(segment{chunk.sample_start, ri.data_offset_bytes + at + chunk.header_bytes});
  }
  const std::uint64_t sample_data_bytes = data_bytes - headers;
  ri.num_samples = sample_data_bytes / sample_bytes;
  ri.trailing_bytes = sample_data_bytes % sample_bytes;
  if (ri.num_samples == 0) {
    throw format_error(data_name + ": contains no samples (" + std::to_string(data_bytes) +
                       " bytes" + (headers ? ", " + std::to_string(headers) + " of them headers" : "") +
                       "; one " + std::string(to_sigmf_datatype(ri.format)) + " sample" +
                       (ri.num_channels > 1 ? " of each of " + std::to_string(ri.num_channels) + " channels" : "") + " is " +
                       std::to_string(sample_bytes) + " bytes)");
  }
  // Advisory only: a failure costs read-ahead, not correctness, so the result is not checked.
  (void)::posix_fadvise(fd_, 0, 0, POSIX_FADV_SEQUENTIAL);
}

void sample_file_reader::read_exact(std::byte* dst, std::size_t num_bytes,
                                    std::uint64_t offset_bytes) {
  // pread with an explicit offset: the file position is derived from position_ alone, so an
  // exception mid-read cannot desynchronise the two, and rewind() needs no syscall.
  std::size_t done = 0;
  while (done < num_bytes) {
    const std::uint64_t at = offset_bytes + done;
    const ssize_t got = ::pread(fd_, dst + done, num_bytes - done, static_cast<off_t>(at));
    if (got < 0) {
      if (errno == EINTR) continue;
      throw std::runtime_error(info_.data_path.string() + ": read error at byte offset " +
                               std::to_string(at) + ": " + errno_text(errno));
    }
    if (got == 0) {
      throw std::runtime_error(info_.data_path.string() + ": unexpected end of file at byte offset " +
                               std::to_string(at) + " (expected " +
                               std::to_string(info_.num_samples * frame_bytes()) +
                               " bytes; did the file shrink while being read?)");
    }
    done += static_cast<std::size_t>(got);
  }
}

void sample_file_reader::read_exact_parallel(std::byte* dst, std::size_t num_bytes, std::uint64_t offset_bytes) {
  // A large read from the page cache is a memory copy that one core does at a fraction of
  // what the memory can (and the first touch of fresh window pages faults in the reading
  // thread): pieces of at least 2 MiB are read by several threads, each pread at its own
  // offset. The threads sleep between reads (dsp::thread_team: a team that spun after each
  // read took cores from the GPU backend's thread). The first error is rethrown; the bytes
  // are the same either way.
  constexpr std::size_t piece_min = std::size_t{2} << 20;
  const int pieces = static_cast<int>(std::min<std::size_t>(8, num_bytes / piece_min));
  if (pieces < 2) {
    read_exact(dst, num_bytes, offset_bytes);
    return;
  }
  if (!team_) team_ = std::make_unique<dsp::thread_team>();
  team_->run_ranges(num_bytes, pieces, [&](std::size_t b, std::size_t e, int) { read_exact(dst + b, e - b, offset_bytes + b); });
}

std::size_t sample_file_reader::read(std::span<cf32> out) {
  if (fd_ < 0) throw std::logic_error("sample_file_reader::read on a moved-from reader");
  const std::uint64_t remaining = info_.num_samples - position_;
  const auto count = static_cast<std::size_t>(std::min<std::uint64_t>(out.size(), remaining));
  std::size_t done = 0;
  while (done < count) done += read_contiguous(out.data() + done, count - done);
  return count;
}

std::pair<std::size_t, std::uint64_t> sample_file_reader::contiguous_run(std::size_t count) const {
  // The segment holding position_: the last one starting at or before it (one for a
  // conforming file, so this is a single comparison on the common path).
  auto next = std::upper_bound(segments_.begin(), segments_.end(), position_,
                               [](std::uint64_t pos, const segment& s) { return pos < s.sample_start; });
  const segment& seg = *std::prev(next);
  if (next != segments_.end()) {
    count = static_cast<std::size_t>(std::min<std::uint64_t>(count, next->sample_start - position_));
  }
  return {count, seg.offset_bytes + (position_ - seg.sample_start) * frame_bytes()};
}

void sample_file_reader::ensure_buffer() {
  if (!buffer_.empty()) return;
  // Small files get a buffer of their own size, not a whole block (a whole sample time at least).
  const std::uint64_t file_bytes = info_.num_samples * frame_bytes();
  buffer_.resize(static_cast<std::size_t>(std::max<std::uint64_t>(frame_bytes(), std::min<std::uint64_t>(io_block_bytes, file_bytes))));
}

std::size_t sample_file_reader::frame_bytes() const noexcept {
  return bytes_per_sample(info_.format) * static_cast<std::size_t>(info_.num_channels);
}

void sample_file_reader::read_channel(std::size_t count, std::uint64_t offset) {
  const std::size_t sample_bytes = bytes_per_sample(info_.format), frame = frame_bytes();
  read_exact(buffer_.data(), count * frame, offset);
  if (info_.num_channels == 1) return;
  // Sample i of the channel moves from i * frame + (channel - 1) * sample_bytes to
  // i * sample_bytes: never past a byte still to be moved.
  const std::size_t at = static_cast<std::size_t>(info_.channel - 1) * sample_bytes;
  for (std::size_t i = 0; i < count; ++i) std::memmove(buffer_.data() + i * sample_bytes, buffer_.data() + i * frame + at, sample_bytes);
}

std::size_t sample_file_reader::read(std::span<ci16> out) {
  if (fd_ < 0) throw std::logic_error("sample_file_reader::read on a moved-from reader");
  if (info_.format != sample_format::ci16_le) {
    throw std::logic_error("sample_file_reader: " + info_.data_path.string() + " is not ci16_le; read it as cf32");
  }
  static_assert(std::endian::native == std::endian::little, "ci16 samples are read as stored: a little-endian host");
  const std::uint64_t remaining = info_.num_samples - position_;
  const auto count = static_cast<std::size_t>(std::min<std::uint64_t>(out.size(), remaining));
  std::size_t done = 0;
  while (done < count) {
    auto [n, offset] = contiguous_run(count - done);
    if (info_.num_channels > 1) {
      ensure_buffer();
      n = std::min(n, buffer_.size() / frame_bytes());
      read_channel(n, offset);
      std::memcpy(out.data() + done, buffer_.data(), n * sizeof(ci16));
    } else {
      read_exact_parallel(reinterpret_cast<std::byte*>(out.data() + done), n * sizeof(ci16), offset);
    }
    position_ += n;
    done += n;
  }
  return count;
}

std::size_t sample_file_reader::read(std::span<cf32x2> out, int second) {
  if (fd_ < 0) throw std::logic_error("sample_file_reader::read on a moved-from reader");
  if (second < 1 || second > info_.num_channels || second == info_.channel) {
    throw std::invalid_argument(info_.data_path.string() + ": channel " + std::to_string(second) +
                                " cannot be the second channel read (the recording has " +
                                std::to_string(info_.num_channels) + ", channel " + std::to_string(info_.channel) +
                                " is the first)");
  }
  const std::size_t frame = frame_bytes(), channels = static_cast<std::size_t>(info_.num_channels);
  const auto a = static_cast<std::size_t>(info_.channel - 1), b = static_cast<std::size_t>(second - 1);
  const std::uint64_t remaining = info_.num_samples - position_;
  const auto count = static_cast<std::size_t>(std::min<std::uint64_t>(out.size(), remaining));
  std::size_t done = 0;
  while (done < count) {
    auto [n, offset] = contiguous_run(count - done);
    ensure_buffer();
    n = std::min(n, buffer_.size() / frame);
    read_exact(buffer_.data(), n * frame, offset);
    // Every channel's samples decoded at once, then the two picked out.
    decoded_.resize(n * channels);
    decode(info_.format, buffer_.data(), n * channels, decoded_.data(), info_.meta.ci16_scale);
    for (std::size_t i = 0; i < n; ++i) out[done + i] = {decoded_[i * channels + a], decoded_[i * channels + b]};
    position_ += n;
    done += n;
  }
  return count;
}

std::size_t sample_file_reader::read_contiguous(cf32* out, std::size_t count) {
  const std::size_t sample_bytes = bytes_per_sample(info_.format);
  std::uint64_t offset = 0;
  std::tie(count, offset) = contiguous_run(count);

  if (is_native_layout(info_.format) && info_.num_channels == 1) {
    read_exact_parallel(reinterpret_cast<std::byte*>(out), count * sample_bytes, offset);
    position_ += count;
    return count;
  }

  ensure_buffer();
  const std::size_t chunk = std::min(buffer_.size() / frame_bytes(), count);
  read_channel(chunk, offset);
  decode(info_.format, buffer_.data(), chunk, out, info_.meta.ci16_scale);
  position_ += chunk;
  return chunk;
}

// ---------------------------------------------------------------------------------------------
// sample_file_writer

sample_file_writer::sample_file_writer(std::filesystem::path data_path,
                                       std::filesystem::path meta_path, sigmf_meta meta,
                                       int fd) noexcept
    : data_path_(std::move(data_path)),
      meta_path_(std::move(meta_path)),
      meta_(std::move(meta)),
      fd_(fd) {}

sample_file_writer::sample_file_writer(sample_file_writer&& other) noexcept
    : data_path_(std::move(other.data_path_)),
      meta_path_(std::move(other.meta_path_)),
      meta_(std::move(other.meta_)),
      fd_(std::exchange(other.fd_, -1)),
      failed_(std::exchange(other.failed_, false)),
      samples_written_(std::exchange(other.samples_written_, 0)),
      clipped_components_(std::exchange(other.clipped_components_, 0)),
      buffer_(std::move(other.buffer_)) {}

sample_file_writer& sample_file_writer::operator=(sample_file_writer&& other) noexcept {
  if (this != &other) {
    close_quietly();
    data_path_ = std::move(other.data_path_);
    meta_path_ = std::move(other.meta_path_);
    meta_ = std::move(other.meta_);
    fd_ = std::exchange(other.fd_, -1);
    failed_ = std::exchange(other.failed_, false);
    samples_written_ = std::exchange(other.samples_written_, 0);
    clipped_components_ = std::exchange(other.clipped_components_, 0);
    buffer_ = std::move(other.buffer_);
  }
  return *this;
}

sample_file_writer::~sample_file_writer() { close_quietly(); }

void sample_file_writer::close_quietly() noexcept {
  try {
    close();
  } catch (...) {  // NOLINT(bugprone-empty-catch): destructors must not throw; close() reports
  }
}

sample_file_writer sample_file_writer::create_sigmf(const std::filesystem::path& base_or_meta_path,
                                                    const sigmf_meta& meta) {
  // Validate now rather than in close(), hours of recording later.
  (void)to_sigmf_json(meta);
  const sigmf_file_paths paths = sigmf_paths(base_or_meta_path);
  // A meta file left from an earlier recording would describe the new data if we crashed.
  std::error_code ec;
  fs::remove(paths.meta, ec);
  if (ec) {
    throw std::runtime_error(paths.meta.string() + ": cannot remove the previous meta file: " +
                             ec.message());
  }
  const int fd = open_for_writing(paths.data);
  return sample_file_writer(paths.data, paths.meta, meta, fd);
}

sample_file_writer sample_file_writer::create_raw(const std::filesystem::path& path,
                                                  sample_format format, float ci16_scale) {
  if (format == sample_format::ci16_le && !is_positive_finite(ci16_scale)) {
    throw std::invalid_argument(path.string() + ": ci16 scale must be positive and finite, got " +
                                std::to_string(ci16_scale));
  }
  sigmf_meta meta;
  meta.format = format;
  meta.ci16_scale = ci16_scale;
  const int fd = open_for_writing(path);
  return sample_file_writer(path, {}, std::move(meta), fd);
}

void sample_file_writer::write_all(const std::byte* src, std::size_t num_bytes) {
  const std::uint64_t start = samples_written_ * bytes_per_sample(meta_.format);
  std::size_t done = 0;
  while (done < num_bytes) {
    const ssize_t put = ::write(fd_, src + done, num_bytes - done);
    if (put < 0 && errno == EINTR) continue;
    if (put <= 0) {
      // write() returning 0 for a non-empty request is not supposed to happen on a regular
      // file; report it rather than spin.
      const int err = put < 0 ? errno : EIO;
      failed_ = true;
      throw std::runtime_error(data_path_.string() + ": write failed at byte offset " +
                               std::to_string(start + done) + ": " + errno_text(err));
    }
    done += static_cast<std::size_t>(put);
  }
}

void sample_file_writer::write(std::span<const cf32> samples) {
  if (fd_ < 0) throw std::logic_error(data_path_.string() + ": write after close");
  if (failed_) throw std::logic_error(data_path_.string() + ": write after a failed write");
  if (samples.empty()) return;
  const std::size_t sample_bytes = bytes_per_sample(meta_.format);

  if (is_native_layout(meta_.format)) {
    write_all(reinterpret_cast<const std::byte*>(samples.data()), samples.size() * sample_bytes);
    samples_written_ += samples.size();
    return;
  }

  if (buffer_.empty()) buffer_.resize(io_block_bytes);
  const std::size_t block_samples = buffer_.size() / sample_bytes;
  std::size_t done = 0;
  while (done < samples.size()) {
    const std::size_t chunk = std::min(block_samples, samples.size() - done);
    clipped_components_ +=
        encode(meta_.format, samples.data() + done, chunk, buffer_.data(), meta_.ci16_scale);
    write_all(buffer_.data(), chunk * sample_bytes);
    samples_written_ += chunk;
    done += chunk;
  }
}

void sample_file_writer::close() {
  if (fd_ < 0) return;
  const int fd = std::exchange(fd_, -1);
  if (!failed_) {
    // Sync before the meta file exists, so that a meta file always describes data that is on
    // disk. EINVAL: the target (a pipe, /dev/null) cannot be synced, which is fine.
    if (::fsync(fd) != 0 && errno != EINVAL) {
      const int err = errno;
      ::close(fd);
      failed_ = true;
      throw std::runtime_error(data_path_.string() + ": cannot sync: " + errno_text(err));
    }
  }
  // Linux releases the descriptor even when close() fails, so it is never retried. EINTR
  // leaves the outcome unknown but the data was already synced above.
  if (::close(fd) != 0 && errno != EINTR) {
    const int err = errno;
    failed_ = true;
    throw std::runtime_error(data_path_.string() + ": cannot close: " + errno_text(err));
  }
  if (failed_ || meta_path_.empty()) return;
  if (const auto channels = static_cast<std::uint64_t>(meta_.num_channels); samples_written_ % channels != 0) {
    throw std::runtime_error(data_path_.string() + ": " + std::to_string(samples_written_) + " samples are not whole sample times of " +
                             std::to_string(channels) + " channels: no meta file written");
  }
  write_sigmf_meta(meta_path_, meta_);
}

}  // namespace paq::io
