#include "daemon/llr_writer.hpp"

#include "dsp/receiver_tables.hpp"

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

namespace paq::daemon {

void llr_writer::file_closer::operator()(std::FILE* f) const noexcept
{
    if (f) std::fclose(f);
}

llr_writer::llr_writer(const std::filesystem::path& base, dsp::detector_kind detector) : record_(llr_record_bytes)
{
    if (detector == dsp::detector_kind::sxs) {
        throw std::invalid_argument(llr_needs_trellis);
    }
    const int first = detector == dsp::detector_kind::both ? dsp::chain::num_paths : 0;
    for (int p = 0; p < dsp::chain::num_paths; ++p) {
        auto path = base;
        path += std::string("-") + dsp::stream_name(first + p) + ".llr";
        std::FILE* f = std::fopen(path.c_str(), "wb");
        if (!f) throw std::runtime_error("cannot create " + path.string() + ": " + std::strerror(errno));
        files_.emplace_back(f);
        paths_.push_back(std::move(path));
    }
}

llr_writer::~llr_writer() = default;

void llr_writer::add(const dsp::batch_output& out)
{
    if (out.packets.empty()) return;
    if (out.llrs.size() != out.packets.size() * dsp::chain::num_paths * waveform::data_bits) {
        throw std::logic_error("llr_writer: a batch of " + std::to_string(out.packets.size()) + " packets without its LLRs");
    }
    for (std::size_t i = 0; i < out.packets.size(); ++i) {
        std::uint64_t start = out.packets[i].start_sample;
        for (int b = 0; b < 8; ++b) record_[static_cast<std::size_t>(b)] = static_cast<unsigned char>(start >> (8 * b));
        for (int p = 0; p < dsp::chain::num_paths; ++p) {
            std::memcpy(record_.data() + 8, out.packet_llrs(i, p), waveform::data_bits);
            auto& f = files_[static_cast<std::size_t>(p)];
            if (std::fwrite(record_.data(), 1, record_.size(), f.get()) != record_.size()) {
                throw std::runtime_error("cannot write " + paths_[static_cast<std::size_t>(p)].string() + ": " + std::strerror(errno));
            }
        }
        ++packets_;
    }
}

void llr_writer::close()
{
    for (std::size_t p = 0; p < files_.size(); ++p) {
        std::FILE* f = files_[p].release();
        if (f == nullptr) continue;
        const bool flushed = std::fflush(f) == 0;
        const int err = errno;
        if (std::fclose(f) != 0 || !flushed) {
            throw std::runtime_error("cannot write " + paths_[p].string() + ": " + std::strerror(flushed ? errno : err));
        }
    }
}

}  // namespace paq::daemon
