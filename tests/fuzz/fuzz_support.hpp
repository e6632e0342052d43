// Helpers shared by the libFuzzer targets (tests/fuzz/README.md, docs/TESTING.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <unistd.h>
#include <vector>

namespace paq::fuzz {

/// A broken invariant is a finding like a sanitizer report: print what broke, then abort so
/// that libFuzzer saves the input as a crash.
[[noreturn]] inline void fail(const char* file, int line, const char* what, const std::string& detail)
{
    std::fprintf(stderr, "%s:%d: invariant broken: %s%s%s\n", file, line, what, detail.empty() ? "" : ": ", detail.c_str());
    std::fflush(stderr);
    std::abort();
}

}  // namespace paq::fuzz

#define PAQ_FUZZ_CHECK(cond, detail)                                    \
    do {                                                                \
        if (!(cond)) ::paq::fuzz::fail(__FILE__, __LINE__, #cond, (detail)); \
    } while (0)

namespace paq::fuzz {

/// Splits a fuzz input into records: each a 2-byte big-endian length and that many bytes (the
/// last one takes what is left when the length runs past the end). Gives libFuzzer a way to
/// express "several datagrams" that its mutators keep intact.
class record_reader {
public:
    explicit record_reader(std::span<const std::uint8_t> data) : data_(data) {}
    /// The next record, or false at the end of the input.
    [[nodiscard]] bool next(std::span<const std::uint8_t>& record)
    {
        if (pos_ + 2 > data_.size()) return false;
        const std::size_t len = (std::size_t{data_[pos_]} << 8) | data_[pos_ + 1];
        pos_ += 2;
        const std::size_t take = len < data_.size() - pos_ ? len : data_.size() - pos_;
        record = data_.subspan(pos_, take);
        pos_ += take;
        return true;
    }

private:
    std::span<const std::uint8_t> data_;
    std::size_t pos_ = 0;
};

/// A copy of `bytes` in a buffer of exactly that size: ASan then reports any read past the
/// end (libFuzzer's own input buffer is exact-size too, but records are slices of it).
[[nodiscard]] inline std::vector<std::byte> exact_copy(std::span<const std::uint8_t> bytes)
{
    std::vector<std::byte> out(bytes.size());
    for (std::size_t k = 0; k < bytes.size(); ++k) out[k] = static_cast<std::byte>(bytes[k]);
    return out;
}

/// A scratch directory of this process (one per fuzzing job), removed at exit.
class scratch_dir {
public:
    scratch_dir()
    {
        const char* tmp = std::getenv("TMPDIR");
        path_ = std::filesystem::path(tmp && *tmp ? tmp : "/tmp") / ("paq-fuzz-" + std::to_string(::getpid()));
        std::filesystem::create_directories(path_);
    }
    ~scratch_dir()
    {
        std::error_code ec;
        std::filesystem::remove_all(path_, ec);
    }
    scratch_dir(const scratch_dir&) = delete;
    scratch_dir& operator=(const scratch_dir&) = delete;

    /// Writes `bytes` to <dir>/<name> (replacing it) and returns the path.
    [[nodiscard]] std::filesystem::path write(const std::string& name, std::span<const std::uint8_t> bytes) const
    {
        const auto p = path_ / name;
        std::ofstream f(p, std::ios::binary | std::ios::trunc);
        f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
        f.close();
        PAQ_FUZZ_CHECK(f.good(), "cannot write the scratch file " + p.string());
        return p;
    }
    [[nodiscard]] const std::filesystem::path& path() const noexcept { return path_; }

private:
    std::filesystem::path path_;
};

}  // namespace paq::fuzz
