#include "io/sigmf_archive.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <optional>
#include <system_error>
#include <unordered_set>

#include <unistd.h>

#include "io/sigmf.hpp"

namespace paq::io {
namespace {

namespace fs = std::filesystem;

constexpr std::size_t block_bytes = 512;
constexpr std::string_view meta_suffix = ".sigmf-meta";
constexpr std::string_view data_suffix = ".sigmf-data";
// Sizes and offsets stay below 2^63 so that every sum of two fits in 64 bits.
constexpr std::uint64_t max_size = std::uint64_t{1} << 62;

// The ustar header fields paqd reads (POSIX.1-2001, "pax" interchange format).
constexpr std::size_t name_at = 0, name_len = 100;
constexpr std::size_t size_at = 124, size_len = 12;
constexpr std::size_t chksum_at = 148, chksum_len = 8;
constexpr std::size_t type_at = 156;
constexpr std::size_t magic_at = 257;
constexpr std::size_t prefix_at = 345, prefix_len = 155;

using block = std::array<unsigned char, block_bytes>;

[[noreturn]] void fail(const fs::path& path, const std::string& what) {
  throw format_error(path.string() + ": " + what);
}

[[nodiscard]] std::string at_offset(std::uint64_t offset) {
  return "tar header at byte offset " + std::to_string(offset);
}

void read_at(int fd, const fs::path& path, unsigned char* dst, std::size_t n, std::uint64_t offset) {
  std::size_t done = 0;
  while (done < n) {
    const ssize_t got = ::pread(fd, dst + done, n - done, static_cast<off_t>(offset + done));
    if (got < 0) {
      if (errno == EINTR) continue;
      fail(path, "read error at byte offset " + std::to_string(offset + done) + ": " +
                     std::generic_category().message(errno));
    }
    if (got == 0) {
      fail(path, "unexpected end of file at byte offset " + std::to_string(offset + done) +
                     " (did the file shrink while being read?)");
    }
    done += static_cast<std::size_t>(got);
  }
}

// A NUL-terminated (or full-width) text field.
[[nodiscard]] std::string text_field(const block& b, std::size_t at, std::size_t len) {
  const auto* begin = reinterpret_cast<const char*>(b.data() + at);
  return std::string(begin, strnlen(begin, len));
}

// A numeric field: octal digits with optional leading spaces, ended by NUL or space; or GNU's
// base-256 form (first byte 0x80, the rest big-endian) used for sizes of 8 GiB and more.
[[nodiscard]] std::optional<std::uint64_t> numeric_field(const block& b, std::size_t at,
                                                         std::size_t len) {
  const unsigned char* f = b.data() + at;
  if (f[0] == 0x80) {
    std::uint64_t v = 0;
    for (std::size_t i = 1; i < len; ++i) {
      if (v > (max_size >> 8)) return std::nullopt;
      v = (v << 8) | f[i];
    }
    return v;
  }
  std::size_t i = 0;
  while (i < len && f[i] == ' ') ++i;
  std::uint64_t v = 0;
  std::size_t digits = 0;
  for (; i < len && f[i] >= '0' && f[i] <= '7'; ++i, ++digits) {
    if (v > (max_size >> 3)) return std::nullopt;
    v = (v << 3) | static_cast<std::uint64_t>(f[i] - '0');
  }
  if (digits == 0) return std::nullopt;
  for (; i < len; ++i) {
    if (f[i] != ' ' && f[i] != '\0') return std::nullopt;
  }
  return v;
}

[[nodiscard]] bool is_zero_block(const block& b) {
  return std::all_of(b.begin(), b.end(), [](unsigned char c) { return c == 0; });
}

// POSIX: the sum of the header's bytes as unsigned values, the checksum field counted as
// spaces. Some historic tars summed signed chars; either is accepted.
[[nodiscard]] bool checksum_ok(const block& b, std::uint64_t stored) {
  std::uint64_t unsigned_sum = 0;
  std::int64_t signed_sum = 0;
  for (std::size_t i = 0; i < block_bytes; ++i) {
    const bool in_field = i >= chksum_at && i < chksum_at + chksum_len;
    const unsigned char c = in_field ? static_cast<unsigned char>(' ') : b[i];
    unsigned_sum += c;
    signed_sum += static_cast<signed char>(c);
  }
  return stored == unsigned_sum || static_cast<std::int64_t>(stored) == signed_sum;
}

// Names the compression of a file that starts with a compressor's magic number, if any.
[[nodiscard]] std::string_view compression_of(const block& b) {
  if (b[0] == 0x1F && b[1] == 0x8B) return "gzip";
  if (b[0] == 'B' && b[1] == 'Z' && b[2] == 'h') return "bzip2";
  if (b[0] == 0xFD && b[1] == '7' && b[2] == 'z' && b[3] == 'X' && b[4] == 'Z' && b[5] == 0) {
    return "xz";
  }
  if (b[0] == 0x28 && b[1] == 0xB5 && b[2] == 0x2F && b[3] == 0xFD) return "zstd";
  return {};
}

// The records "<length> <key>=<value>\n" of a pax extended header; path and size are kept.
void parse_pax(const fs::path& path, std::uint64_t header_offset, std::string_view text,
               std::optional<std::string>& pax_path, std::optional<std::uint64_t>& pax_size) {
  const std::string where = at_offset(header_offset) + ": pax extended header: ";
  while (!text.empty()) {
    // A length of NUL padding ends it (some writers pad the last block with NULs).
    if (text.front() == '\0') break;
    std::size_t length = 0;
    std::size_t i = 0;
    for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) {
      if (length > tar_max_pax_header_bytes) fail(path, where + "record length too large");
      length = length * 10 + static_cast<std::size_t>(text[i] - '0');
    }
    if (i == 0 || i >= text.size() || text[i] != ' ' || length <= i + 1 || length > text.size() ||
        text[length - 1] != '\n') {
      fail(path, where + "malformed record (expected \"<length> <key>=<value>\\n\")");
    }
    const std::string_view record = text.substr(i + 1, length - i - 2);
    const auto eq = record.find('=');
    if (eq == std::string_view::npos || eq == 0) {
      fail(path, where + "malformed record (no key=value)");
    }
    const std::string_view key = record.substr(0, eq);
    const std::string_view value = record.substr(eq + 1);
    if (key == "path") {
      pax_path = std::string(value);
    } else if (key == "size") {
      std::uint64_t v = 0;
      if (value.empty() || value.size() > 19) fail(path, where + "malformed size '" + std::string(value) + "'");
      for (const char c : value) {
        if (c < '0' || c > '9') fail(path, where + "malformed size '" + std::string(value) + "'");
        v = v * 10 + static_cast<std::uint64_t>(c - '0');
      }
      if (v > max_size) fail(path, where + "size " + std::string(value) + " is too large");
      pax_size = v;
    }
    text.remove_prefix(length);
  }
}

[[nodiscard]] bool is_recording_member(std::string_view name) {
  return (name.size() > meta_suffix.size() && name.ends_with(meta_suffix)) ||
         (name.size() > data_suffix.size() && name.ends_with(data_suffix));
}

[[nodiscard]] std::string_view type_name(char type) {
  switch (type) {
    case '0':
    case '7':
      return "a regular file";
    case '1':
      return "a hard link";
    case '2':
      return "a symbolic link";
    case '3':
      return "a character device";
    case '4':
      return "a block device";
    case '5':
      return "a directory";
    case '6':
      return "a FIFO";
    case 'S':
      return "a GNU sparse file";
    default:
      return "an entry of an unknown type";
  }
}

}  // namespace

bool has_sigmf_archive_suffix(const std::filesystem::path& path) {
  const std::string name = path.filename().string();
  constexpr std::string_view suffix = ".sigmf";
  return name.size() > suffix.size() && std::string_view(name).ends_with(suffix);
}

std::vector<tar_member> list_sigmf_tar_members(int fd, std::uint64_t file_size,
                                               const std::filesystem::path& path) {
  std::vector<tar_member> members;
  if (file_size < block_bytes) {
    fail(path, "is " + std::to_string(file_size) +
                   " bytes, too short for a tar archive (a SigMF archive is a tar file)");
  }
  std::optional<std::string> next_name;  // from a pax 'x' or GNU 'L' header, for the next member
  std::optional<std::uint64_t> next_size;
  std::string pax_text;
  block b{};
  std::uint64_t offset = 0;
  while (offset < file_size) {
    if (file_size - offset < block_bytes) {
      fail(path, "truncated: " + at_offset(offset) + " is cut short (the file ends after " +
                     std::to_string(file_size - offset) + " of its 512 bytes)");
    }
    read_at(fd, path, b.data(), block_bytes, offset);
    if (is_zero_block(b)) break;  // the end-of-archive marker
    if (offset == 0) {
      if (const std::string_view z = compression_of(b); !z.empty()) {
        fail(path, "is " + std::string(z) +
                       "-compressed; a SigMF archive is an uncompressed tar file: decompress it "
                       "first");
      }
    }
    const bool gnu = std::memcmp(b.data() + magic_at, "ustar  \0", 8) == 0;
    const bool posix = std::memcmp(b.data() + magic_at, "ustar\0", 6) == 0;
    if (!gnu && !posix) {
      fail(path, at_offset(offset) + ": no ustar magic: " +
                     (offset == 0 ? "not a POSIX tar archive (a SigMF archive is one)"
                                  : "corrupt archive"));
    }
    const auto stored_sum = numeric_field(b, chksum_at, chksum_len);
    if (!stored_sum || !checksum_ok(b, *stored_sum)) {
      fail(path, at_offset(offset) + ": checksum mismatch: corrupt archive");
    }
    const auto header_size = numeric_field(b, size_at, size_len);
    if (!header_size) fail(path, at_offset(offset) + ": malformed size field");
    const char type = b[type_at] == '\0' ? '0' : static_cast<char>(b[type_at]);
    // pax and GNU headers that describe the next member, or the whole archive.
    const bool is_extension = type == 'x' || type == 'g' || type == 'L' || type == 'K';
    const std::uint64_t size = (!is_extension && next_size) ? *next_size : *header_size;
    const std::uint64_t data_offset = offset + block_bytes;
    if (size > file_size - data_offset) {
      fail(path, "truncated: the member at " + at_offset(offset) + " needs " +
                     std::to_string(size) + " bytes, " + std::to_string(file_size - data_offset) +
                     " are left in the file");
    }
    const std::uint64_t padded = (size + block_bytes - 1) / block_bytes * block_bytes;

    if (type == 'x' || type == 'L') {
      // Extended header for the next member: its name (pax path, GNU long name) and size.
      if (size > tar_max_pax_header_bytes) {
        fail(path, at_offset(offset) + ": extended header of " + std::to_string(size) +
                       " bytes (limit " + std::to_string(tar_max_pax_header_bytes) + ")");
      }
      pax_text.assign(static_cast<std::size_t>(size), '\0');
      read_at(fd, path, reinterpret_cast<unsigned char*>(pax_text.data()), pax_text.size(), data_offset);
      if (type == 'x') {
        parse_pax(path, offset, pax_text, next_name, next_size);
      } else {
        next_name = std::string(pax_text.c_str());  // NUL-terminated
      }
    } else if (!is_extension) {  // pax global headers and GNU long link names: nothing used
      tar_member m;
      if (next_name) {
        m.name = *next_name;
      } else {
        m.name = text_field(b, name_at, name_len);
        // ustar splits long names into prefix "/" name; GNU uses that area for other fields.
        if (const std::string prefix = text_field(b, prefix_at, prefix_len); posix && !prefix.empty()) {
          m.name = prefix + "/" + m.name;
        }
      }
      m.offset_bytes = data_offset;
      m.size_bytes = size;
      m.type = type == '7' ? '0' : type;
      // Hard links, symlinks, directories and devices have no bytes of their own in the
      // archive, whatever their size field says.
      if (m.type != '0' && m.type != 'S') m.size_bytes = 0;
      if (is_recording_member(m.name)) members.push_back(std::move(m));
      next_name.reset();
      next_size.reset();
    }
    const bool has_bytes = is_extension || type == '0' || type == '7' || type == 'S';
    offset = data_offset + (has_bytes ? padded : 0);
  }
  return members;
}

sigmf_archive_recording find_sigmf_archive_recording(int fd, std::uint64_t file_size,
                                                     const std::filesystem::path& path) {
  const std::vector<tar_member> members = list_sigmf_tar_members(fd, file_size, path);
  const auto find_once = [&](const std::string& name) -> const tar_member* {
    const tar_member* found = nullptr;
    for (const tar_member& m : members) {
      if (m.name != name) continue;
      if (found != nullptr) fail(path, "member " + name + " appears twice in the archive");
      found = &m;
    }
    return found;
  };

  // Distinct metadata members in archive order (a set: an archive of millions of members is
  // refused in linear time).
  std::vector<std::string> metas;
  std::unordered_set<std::string> seen;
  for (const tar_member& m : members) {
    if (m.name.ends_with(meta_suffix) && seen.insert(m.name).second) metas.push_back(m.name);
  }
  if (metas.empty()) fail(path, "the archive holds no .sigmf-meta member (no SigMF recording)");
  if (metas.size() > 1) {
    std::string list;
    for (std::size_t i = 0; i < metas.size() && i < 5; ++i) list += (i ? ", " : "") + metas[i];
    if (metas.size() > 5) list += ", ...";
    fail(path, "the archive holds " + std::to_string(metas.size()) + " recordings (" + list +
                   "); paqd reads an archive of one recording: extract it (tar -xf) and name "
                   "the .sigmf-meta of the one to read");
  }
  const std::string& meta_name = metas.front();
  const std::string data_name =
      meta_name.substr(0, meta_name.size() - meta_suffix.size()) + std::string(data_suffix);
  const tar_member* meta = find_once(meta_name);
  const tar_member* data = find_once(data_name);
  if (data == nullptr) fail(path, "the archive has no member " + data_name + " for " + meta_name);
  for (const tar_member* m : {meta, data}) {
    if (m->type != '0') {
      fail(path, "member " + m->name + " is " + std::string(type_name(m->type)) +
                     ", not a regular file");
    }
  }
  return {*meta, *data};
}

}  // namespace paq::io
