// SigMF archives: the bytes of a .sigmf file through io::sample_file_reader, that is the tar
// parser of io/sigmf_archive, the metadata parser and the header-bytes layout.
//
// Checked, besides the sanitizers: opening throws nothing but io::format_error (what the
// callers catch); an archive that opens yields exactly num_samples samples, at any chunk size,
// without an error.
#include "io/sample_file.hpp"
#include "tests/fuzz/fuzz_support.hpp"

#include <optional>
#include <vector>

using namespace paq;

namespace {
paq::fuzz::scratch_dir& scratch()
{
    static paq::fuzz::scratch_dir dir;
    return dir;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    const auto path = scratch().write("input.sigmf", {data, size});
    std::optional<io::sample_file_reader> reader;
    try {
        reader.emplace(io::sample_file_reader::open(path));
    } catch (const io::format_error&) {
        return 0;  // refused with a message naming the archive: what the callers expect
    }
    const std::uint64_t expected = reader->info().num_samples;
    PAQ_FUZZ_CHECK(expected * io::bytes_per_sample(reader->info().format) <= size,
                   "more samples than the archive has bytes: " + std::to_string(expected));
    std::vector<cf32> buf(1 + size % 509);
    std::uint64_t total = 0;
    for (;;) {
        const std::size_t got = reader->read(buf);
        if (got == 0) break;
        total += got;
    }
    PAQ_FUZZ_CHECK(total == expected, "read " + std::to_string(total) + " samples, num_samples " + std::to_string(expected));
    return 0;
}
