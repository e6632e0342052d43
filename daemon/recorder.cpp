#include "daemon/recorder.hpp"
#include "io/thread_name.hpp"

#include "dsp/batcher.hpp"
#include "io/sample_file.hpp"
#include "io/utc_time.hpp"

#include <spdlog/spdlog.h>

#include <filesystem>
#include <stdexcept>
#include <system_error>

namespace paq::daemon {

recorder::recorder(const recording_config& cfg, double sample_rate_hz, double bit_rate_hz, nlohmann::json settings,
                   std::optional<double> center_frequency_hz)
    : max_queued_(cfg.queue_mib * (std::size_t{1} << 20) / sizeof(cf32)), sample_rate_hz_(sample_rate_hz)
{
    io::sigmf_meta meta;
    meta.format = cfg.format;
    meta.sample_rate_hz = sample_rate_hz;
    meta.description = "paqd recording while receiving";
    meta.recorder = "paqd 0.1.0";
    meta.extra_global = nlohmann::json::object();
    meta.extra_global["paq:receiver"] = std::move(settings);
    meta.extra_global["paq:bit_rate_hz"] = bit_rate_hz;
    // core:frequency: the configured one, else the source's (an iio radio's LO).
    if (cfg.center_frequency_hz) center_frequency_hz = cfg.center_frequency_hz;
    if (center_frequency_hz) meta.center_frequency_hz = *center_frequency_hz;
    if (cfg.base.has_parent_path()) {
        std::error_code ec;
        std::filesystem::create_directories(cfg.base.parent_path(), ec);
        if (ec) {
            throw std::runtime_error("recording.path: cannot create the directory " + cfg.base.parent_path().string() + ": " +
                                     ec.message());
        }
    }
    writer_ = std::make_unique<io::sample_file_writer>(io::sample_file_writer::create_sigmf(cfg.base, meta));
    thread_ = std::thread([this] {
        io::name_this_thread("paq-recorder");
        writer_loop();
    });
}

recorder::~recorder()
{
    try {
        close();
    } catch (const std::exception& e) {
        spdlog::error("recording: {}", e.what());
    }
}

std::filesystem::path recorder::meta_path() const { return writer_->meta_path(); }

namespace {

/// Adds `lost` to the last gap entry when it is at the same place for the same reason, or
/// when the list is full.
void add_gap(nlohmann::json& gaps, std::uint64_t at, std::uint64_t lost, std::string_view reason)
{
    if (!gaps.empty() && gaps.back()["recording_sample"].get<std::uint64_t>() == at &&
        gaps.back()["reason"].get<std::string>() == reason) {
        gaps.back()["lost"] = gaps.back()["lost"].get<std::uint64_t>() + lost;
        return;
    }
    if (gaps.size() >= recorder::max_gap_entries) {
        auto& last = gaps.back();
        if (last["reason"].get<std::string>() != "coalesced") {
            last["first_reason"] = last["reason"];
            last["reason"] = "coalesced";
            last["gaps"] = 1;
        }
        const std::uint64_t sum = last["lost"].get<std::uint64_t>();
        last["lost"] = saturating_add(sum, lost);
        last["gaps"] = last["gaps"].get<std::uint64_t>() + 1;
        last["until_recording_sample"] = at;
        return;
    }
    gaps.push_back({{"recording_sample", at}, {"lost", lost}, {"reason", reason}});
}

}  // namespace

nlohmann::json gap_annotations(const nlohmann::json& gaps)
{
    nlohmann::json annotations = nlohmann::json::array();
    for (const auto& g : gaps) {
        const auto at = g["recording_sample"].get<std::uint64_t>();
        const auto lost = g["lost"].get<std::uint64_t>();
        const auto reason = g["reason"].get<std::string>();
        const std::string lost_text = lost ? std::to_string(lost) + " samples" : "an unknown number of samples";
        nlohmann::json a = {{"core:sample_start", at}, {"core:sample_count", 0}};
        if (reason == "coalesced") {
            // A flood of gaps merged into one entry: it spans the recording from the first to
            // the last of them, and that span is what it annotates.
            const auto until = g["until_recording_sample"].get<std::uint64_t>();
            a["core:sample_count"] = until - at;
            a["core:label"] = "gaps (coalesced)";
            a["core:comment"] = std::to_string(g["gaps"].get<std::uint64_t>()) + " gaps from here to sample " +
                                std::to_string(until) + " (the first: " + g["first_reason"].get<std::string>() +
                                "), " + lost_text + " missing in all; merged beyond " +
                                std::to_string(recorder::max_gap_entries) + " entries";
        } else {
            a["core:label"] = "gap (" + reason + ")";
            a["core:comment"] = lost_text + " of the received stream missing before this sample (" + reason + ")";
        }
        a["core:generator"] = "paqd";
        a["paq:gap_reason"] = reason;
        a["paq:lost_samples"] = lost;
        annotations.push_back(std::move(a));
    }
    return annotations;
}

void recorder::write(std::span<const cf32> samples)
{
    std::lock_guard lk(mu_);
    if (closing_) return;
    if (failed_ || queued_ + samples.size() > max_queued_) {
        if (!failed_ && dropped_ == 0) {
            spdlog::warn("recording: the disk does not keep up; samples are dropped from the recording (counted, "
                         "marked in its metadata)");
        }
        add_gap(gaps_, accepted_, samples.size(), io::to_string(io::gap_reason::recording_dropped));
        new_capture();
        dropped_ += samples.size();
        return;
    }
    if (!queue_.empty() && queue_.back().size() + samples.size() <= chunk_samples) {
        queue_.back().insert(queue_.back().end(), samples.begin(), samples.end());
    } else {
        queue_.emplace_back(samples.begin(), samples.end());
    }
    queued_ += samples.size();
    accepted_ += samples.size();
    cv_.notify_one();
}

void recorder::timestamp(std::int64_t utc_ns, std::size_t offset)
{
    std::lock_guard lk(mu_);
    // The capture's first anchor times its first sample (no gap lies between them: a gap
    // starts a new capture).
    auto& c = captures_.back();
    if (c.utc_ns != dsp::unknown_utc_ns) return;
    c.utc_ns = dsp::utc_ns_at({accepted_ + offset, utc_ns, sample_rate_hz_}, c.sample_start);
}

void recorder::gap(std::uint64_t lost_samples, io::gap_reason reason)
{
    std::lock_guard lk(mu_);
    add_gap(gaps_, accepted_, lost_samples, io::to_string(reason));
    new_capture();
}

void recorder::new_capture()
{
    // Several gaps at one place start one capture; a flood beyond max_gap_entries starts none
    // (its gaps are coalesced in paq:gaps).
    if (captures_.back().sample_start == accepted_ || captures_.size() >= max_gap_entries) return;
    captures_.push_back({accepted_, dsp::unknown_utc_ns});
}

void recorder::writer_loop()
{
    for (;;) {
        std::vector<cf32> chunk;
        {
            std::unique_lock lk(mu_);
            cv_.wait(lk, [&] { return !queue_.empty() || closing_; });
            if (queue_.empty()) return;
            chunk = std::move(queue_.front());
            queue_.pop_front();
        }
        if (!failed_) {
            try {
                writer_->write(chunk);
                recorded_ += chunk.size();
            } catch (const std::exception& e) {
                spdlog::error("recording stopped: {}", e.what());
                std::lock_guard lk(mu_);
                error_ = e.what();
                failed_ = true;
            }
        }
        std::lock_guard lk(mu_);
        if (failed_) dropped_ += chunk.size();
        queued_ -= chunk.size();
    }
}

void recorder::close()
{
    if (closed_) return;
    closed_ = true;
    {
        std::lock_guard lk(mu_);
        closing_ = true;
        cv_.notify_all();
    }
    if (thread_.joinable()) thread_.join();
    if (failed_) throw std::runtime_error("recording incomplete (no metadata written): " + error_);
    auto& extra = writer_->pending_meta().extra_global;
    extra["paq:gaps"] = gaps_;
    extra["paq:recording_dropped_samples"] = dropped_.load();
    // The same gaps as SigMF annotations, for tools that know nothing of paq:gaps.
    writer_->pending_meta().annotations = gap_annotations(gaps_);
    // A capture per stretch between gaps, each with the UTC of its first sample (core:datetime)
    // when the source gave time in it.
    auto& captures = writer_->pending_meta().capture_times;
    captures.clear();
    for (std::size_t i = 0; i < captures_.size(); ++i) {
        const auto& c = captures_[i];
        captures.push_back({c.sample_start, c.utc_ns != dsp::unknown_utc_ns ? io::format_utc_ns(c.utc_ns) : std::string(), i});
    }
    writer_->close();
}

}  // namespace paq::daemon
