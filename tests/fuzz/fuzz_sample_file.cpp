// Sample files: raw bytes as a recording in each format, read back through
// io::sample_file_reader (raw and SigMF), and io::decode / io::encode on the same bytes.
//
// Input: byte 0 holds options (bit 0: ci16_le, else cf32_le; bit 1: SigMF, else raw; bits
// 2..3: the ci16 scale; bits 4..7: the read chunk size), the rest is the data file.
//
// Checked, besides the sanitizers: the reader finds every whole sample and the trailing
// bytes, delivers exactly what io::decode gives for the same bytes, whatever the chunk size
// (also read as a raw file of two interleaved channels, both at once);
// encoding the decoded samples gives back the bytes (ci16: -32768 saturates to -32767 and is
// counted as clipped; cf32: bit-exact).
#include "io/sample_file.hpp"
#include "io/sample_format.hpp"
#include "tests/fuzz/fuzz_support.hpp"

#include <cstring>
#include <optional>
#include <vector>

using namespace paq;

namespace {
paq::fuzz::scratch_dir& scratch()
{
    static paq::fuzz::scratch_dir dir;
    return dir;
}

constexpr float scales[] = {io::default_ci16_scale, 1.0f, 3.0f, 32767.0f};
constexpr std::size_t chunk_sizes[] = {1, 2, 3, 7, 64, 1000, 4096, 65536};
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    if (size < 1) return 0;
    const std::uint8_t options = data[0];
    const io::sample_format format = (options & 1) ? io::sample_format::ci16_le : io::sample_format::cf32_le;
    const bool sigmf = (options & 2) != 0;
    const float scale = scales[(options >> 2) & 3];
    const std::size_t chunk = chunk_sizes[(options >> 4) & 7];
    const std::span<const std::uint8_t> bytes(data + 1, size - 1);
    const std::size_t bps = io::bytes_per_sample(format);
    const std::size_t whole = bytes.size() / bps;

    // What the bytes decode to, straight from the codec.
    const std::vector<std::byte> exact = paq::fuzz::exact_copy(bytes);
    std::vector<cf32> expected(whole);
    io::decode(format, exact.data(), whole, expected.data(), scale);

    // Encoding gives the bytes back.
    std::vector<std::byte> encoded(whole * bps);
    const std::size_t clipped = io::encode(format, expected.data(), whole, encoded.data(), scale);
    if (format == io::sample_format::cf32_le) {
        PAQ_FUZZ_CHECK(clipped == 0, "cf32 encoding reported clipping");
        PAQ_FUZZ_CHECK(whole == 0 || std::memcmp(encoded.data(), exact.data(), encoded.size()) == 0, "cf32 round trip changed bytes");
    } else {
        std::size_t min_components = 0;
        for (std::size_t c = 0; c < 2 * whole; ++c) {
            const auto v = static_cast<std::int16_t>(std::to_integer<unsigned>(exact[2 * c]) | (std::to_integer<unsigned>(exact[2 * c + 1]) << 8));
            const auto w = static_cast<std::int16_t>(std::to_integer<unsigned>(encoded[2 * c]) | (std::to_integer<unsigned>(encoded[2 * c + 1]) << 8));
            if (v == -32768) {
                ++min_components;
                PAQ_FUZZ_CHECK(w == -32767, "ci16 -32768 did not saturate to -32767");
            } else {
                PAQ_FUZZ_CHECK(v == w, "ci16 round trip changed " + std::to_string(v) + " to " + std::to_string(w));
            }
        }
        PAQ_FUZZ_CHECK(clipped == min_components, "ci16 clipped count " + std::to_string(clipped) + ", expected " + std::to_string(min_components));
    }

    // The same bytes as a recording.
    std::filesystem::path open_path;
    if (sigmf) {
        io::sigmf_meta meta;
        meta.format = format;
        meta.sample_rate_hz = 6.6e6;
        meta.ci16_scale = scale;
        (void)scratch().write("rec.sigmf-data", bytes);
        io::write_sigmf_meta(scratch().path() / "rec.sigmf-meta", meta);
        open_path = scratch().path() / "rec.sigmf-meta";
    } else {
        std::error_code ec;
        std::filesystem::remove(scratch().path() / "raw.bin.sigmf-meta", ec);
        open_path = scratch().write("raw.bin", bytes);
    }
    std::optional<io::sample_file_reader> reader;
    try {
        reader.emplace(io::sample_file_reader::open(open_path, format, 6.6e6, scale));
    } catch (const io::format_error& e) {
        // Only a file without one whole sample may be refused.
        PAQ_FUZZ_CHECK(whole == 0, std::string("a file of ") + std::to_string(whole) + " whole samples was refused: " + e.what());
        return 0;
    }
    PAQ_FUZZ_CHECK(whole > 0, "a file without a whole sample was accepted");
    const io::recording_info& info = reader->info();
    PAQ_FUZZ_CHECK(info.num_samples == whole, "num_samples " + std::to_string(info.num_samples) + ", expected " + std::to_string(whole));
    PAQ_FUZZ_CHECK(info.trailing_bytes == bytes.size() - whole * bps, "trailing_bytes wrong");
    PAQ_FUZZ_CHECK(info.format == format, "format changed");
    std::vector<cf32> got;
    std::vector<cf32> buf(chunk);
    for (;;) {
        const std::size_t n = reader->read(buf);
        PAQ_FUZZ_CHECK(n <= chunk, "read returned more than asked");
        if (n == 0) break;
        got.insert(got.end(), buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(n));
        PAQ_FUZZ_CHECK(got.size() <= whole, "read past the last whole sample");
    }
    PAQ_FUZZ_CHECK(got.size() == whole, "read " + std::to_string(got.size()) + " of " + std::to_string(whole) + " samples");
    PAQ_FUZZ_CHECK(std::memcmp(got.data(), expected.data(), whole * sizeof(cf32)) == 0, "reader and io::decode disagree");
    PAQ_FUZZ_CHECK(reader->position() == whole, "position after the end wrong");

    // The same bytes as two interleaved channels, both read at once (paqd replay --channel 2
    // --channel 1): every whole sample time, channel 2 then channel 1 of it, what io::decode
    // gives; a file without a whole sample time is refused.
    const std::size_t times = whole / 2;
    std::optional<io::sample_file_reader> two;
    try {
        two.emplace(io::sample_file_reader::open(open_path, format, 6.6e6, scale, 2, 2));
    } catch (const io::format_error& e) {
        PAQ_FUZZ_CHECK(sigmf || times == 0, std::string("two channels of ") + std::to_string(times) + " sample times refused: " + e.what());
        return 0;
    } catch (const std::invalid_argument&) {
        PAQ_FUZZ_CHECK(sigmf, "a raw file of two channels refused its channel");  // SigMF metadata says one channel
        return 0;
    }
    PAQ_FUZZ_CHECK(!sigmf && times > 0, "a recording of one channel was opened as two, or one without a sample time");
    PAQ_FUZZ_CHECK(two->info().num_samples == times, "two channels: num_samples wrong");
    std::vector<cf32x2> pairs(chunk);
    std::size_t at = 0;
    for (;;) {
        const std::size_t n = two->read(std::span<cf32x2>(pairs), 1);
        PAQ_FUZZ_CHECK(n <= chunk, "two channels: read returned more than asked");
        if (n == 0) break;
        for (std::size_t i = 0; i < n; ++i, ++at) {
            PAQ_FUZZ_CHECK(at < times, "two channels: read past the last sample time");
            PAQ_FUZZ_CHECK(std::memcmp(&pairs[i].a, &expected[2 * at + 1], sizeof(cf32)) == 0 &&
                               std::memcmp(&pairs[i].b, &expected[2 * at], sizeof(cf32)) == 0,
                           "two channels: reader and io::decode disagree");
        }
    }
    PAQ_FUZZ_CHECK(at == times, "two channels: read " + std::to_string(at) + " of " + std::to_string(times) + " sample times");
    return 0;
}
