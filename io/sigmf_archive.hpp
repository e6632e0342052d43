// SigMF archives (.sigmf): a POSIX tar file holding a recording's .sigmf-meta and .sigmf-data.
// An uncompressed tar stores each member's bytes contiguously after its header, so the data is
// read in place, at an offset into the archive, without extracting anything.
//
//   offset 0     512          512+round512(meta)          ...            end
//   | header | meta bytes ... | header | data bytes ...... | ... | zero block(s) |
//
// The parser is small and strict: every header's checksum is verified, every size and offset
// is checked against the file's size before use, and anything it does not understand where it
// matters (a compressed file, a corrupt or truncated header, a link where the recording
// should be) is refused with a message naming the archive, the byte offset and what is wrong.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace paq::io {

/// A file member of a tar archive: where its bytes lie in the archive.
struct tar_member {
  std::string name;                ///< the member's path in the archive (pax/GNU long names too)
  std::uint64_t offset_bytes = 0;  ///< its first byte in the archive file
  std::uint64_t size_bytes = 0;
  char type = '0';                 ///< tar typeflag: '0' regular file, '2' symlink, ...
};

/// The one recording of a SigMF archive.
struct sigmf_archive_recording {
  tar_member meta;  ///< "<base>.sigmf-meta"
  tar_member data;  ///< "<base>.sigmf-data"
};

/// A pax extended header larger than this is refused: real ones are a few hundred bytes.
inline constexpr std::size_t tar_max_pax_header_bytes = std::size_t{1} << 20;

/// True when the file name ends in ".sigmf" (a SigMF archive's extension).
[[nodiscard]] bool has_sigmf_archive_suffix(const std::filesystem::path& path);

/// Walks the tar headers of the archive open on fd (a regular file of file_size bytes) and
/// returns its members whose names end in ".sigmf-meta" or ".sigmf-data", of any type, in
/// archive order. Understands ustar and GNU headers, pax extended headers (path, size) and GNU
/// long names; stops at the first all-zero block or at the end of the file. Throws
/// format_error, message starting with path, for a compressed file, a header that is cut
/// short, has a wrong checksum or is not ustar, a malformed size or pax record, or a member
/// that runs past the end of the file.
[[nodiscard]] std::vector<tar_member> list_sigmf_tar_members(int fd, std::uint64_t file_size,
                                                             const std::filesystem::path& path);

/// The recording in the archive: exactly one "<base>.sigmf-meta" with its "<base>.sigmf-data",
/// both regular files, each present once. Throws format_error naming what is missing, doubled
/// or not a regular file, and listing the recordings when there are several.
[[nodiscard]] sigmf_archive_recording find_sigmf_archive_recording(int fd, std::uint64_t file_size,
                                                                   const std::filesystem::path& path);

}  // namespace paq::io
