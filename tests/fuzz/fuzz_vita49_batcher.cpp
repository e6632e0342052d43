// VITA-49 datagrams -> vita49::parse_packet -> sequence_tracker -> dsp::batcher, wired as
// vita49_source::impl::on_datagram (io/net_source.cpp) and pipeline::batcher_loop
// (daemon/pipeline.cpp) wire them: a loss becomes gap(samples_lost) before the packet's
// samples, a resync and an unexplained malformed datagram gap(0). Keep this in step with
// on_datagram when that changes.
//
// Input: byte 0 holds options (bit 0: the tracker knows the sample rate, as with an integer
// sample_rate_hz; bits 1..2: the batch size), then the datagrams as records
// (fuzz_support.hpp: 2-byte big-endian length, bytes).
//
// Batch sizes: 4096 and 64 emit many windows from a small input; 1,000,000 (the size at which a
// gap of ~2^64 samples made the batcher copy out of bounds) and the daemon's default only emit at
// gaps and at the end, since an input of at most -max_len bytes never fills them. The batcher
// copies no more than was pushed into a window, so a large batch size costs no memory unless the
// batcher goes wrong.
//
// Checked, besides the sanitizers: every batch lies inside one segment of pushed samples and
// holds exactly those samples; owned ranges tile each segment in order, each sample owned
// once; the flags and gap sizes the batcher reports match what was pushed; no gap wraps the
// absolute sample index.
#include "dsp/batcher.hpp"
#include "io/vita49.hpp"
#include "tests/fuzz/fuzz_support.hpp"

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

using namespace paq;
using paq::fuzz::record_reader;

namespace {

/// What was pushed: contiguous runs of samples at absolute indices, separated by gaps.
struct segment {
    std::uint64_t start = 0;
    std::vector<cf32> samples;
    std::uint64_t lost_before = 0;  ///< samples lost between the previous segment and this one
    std::uint64_t owned_next = 0;   ///< first absolute sample not yet owned by a batch
    [[nodiscard]] std::uint64_t end() const noexcept { return start + samples.size(); }
    /// Owned entirely, or shorter than a packet: such a segment makes no batch (its samples
    /// are counted as samples_in_short_segments, checked in check_all_owned).
    [[nodiscard]] bool done() const noexcept
    {
        return owned_next == end() || (owned_next == start && samples.size() < waveform::L_pkt);
    }
};

class model {
public:
    model() { segs_.push_back(segment{}); }

    void push(const cf32* s, std::size_t n) { segs_.back().samples.insert(segs_.back().samples.end(), s, s + n); }

    [[nodiscard]] bool gap_wraps(std::uint64_t lost) const noexcept { return lost > UINT64_MAX - segs_.back().end(); }

    void gap(std::uint64_t lost)
    {
        const segment& last = segs_.back();
        PAQ_FUZZ_CHECK(!gap_wraps(lost), "gap of " + std::to_string(lost) + " samples after sample " +
                                             std::to_string(last.end()) + " wraps the absolute sample index");
        // The batcher advances absolute indices by at most max_index_advance per gap and never
        // past max_absolute_index (dsp/batcher.hpp); the loss itself is counted whole.
        std::uint64_t advance = std::min(lost, dsp::batcher::max_index_advance);
        advance = last.end() >= dsp::batcher::max_absolute_index ? 0 : std::min(advance, dsp::batcher::max_absolute_index - last.end());
        if (last.samples.empty()) {
            // Back-to-back gaps (or a gap before the first sample): one segment boundary, the
            // losses add up.
            segs_.back().start += advance;
            segs_.back().lost_before += lost;
            segs_.back().owned_next = segs_.back().start;
            return;
        }
        segment next;
        next.start = last.end() + advance;
        next.lost_before = lost;
        next.owned_next = next.start;
        segs_.push_back(std::move(next));
    }

    void check(const dsp::sample_batch& b)
    {
        PAQ_FUZZ_CHECK(b.index == next_index_, "batch index " + std::to_string(b.index) + ", expected " + std::to_string(next_index_));
        ++next_index_;
        const std::size_t len = b.samples.size();
        PAQ_FUZZ_CHECK(len > 0, "empty batch window");
        PAQ_FUZZ_CHECK(b.owned_begin <= b.owned_end && b.owned_end <= len,
                       "owned [" + std::to_string(b.owned_begin) + ", " + std::to_string(b.owned_end) +
                           ") outside the window of " + std::to_string(len));
        // The segment holding the window: batches come in stream order, so it is the current
        // one or a later one.
        while (seg_ < segs_.size() && !(b.first_sample >= segs_[seg_].start && b.first_sample < segs_[seg_].end())) {
            PAQ_FUZZ_CHECK(segs_[seg_].done(),
                           "segment at " + std::to_string(segs_[seg_].start) + " left with samples from " +
                               std::to_string(segs_[seg_].owned_next) + " to " + std::to_string(segs_[seg_].end()) +
                               " owned by no batch");
            ++seg_;
        }
        PAQ_FUZZ_CHECK(seg_ < segs_.size(), "window at sample " + std::to_string(b.first_sample) + " (" + std::to_string(len) +
                                                " samples) starts outside every pushed segment (or out of order)");
        segment& s = segs_[seg_];
        const std::uint64_t offset = b.first_sample - s.start;
        PAQ_FUZZ_CHECK(len <= s.samples.size() - offset,
                       "window [" + std::to_string(b.first_sample) + ", +" + std::to_string(len) +
                           ") runs past its segment, which ends at " + std::to_string(s.end()));
        PAQ_FUZZ_CHECK(std::memcmp(b.samples.data(), s.samples.data() + offset, len * sizeof(cf32)) == 0,
                       "window samples differ from the pushed ones at " + std::to_string(b.first_sample));
        const std::uint64_t owned_begin = b.first_sample + b.owned_begin;
        PAQ_FUZZ_CHECK(owned_begin == s.owned_next, "owned range starts at " + std::to_string(owned_begin) +
                                                        ", expected " + std::to_string(s.owned_next) +
                                                        " (overlap or hole between batches)");
        s.owned_next = b.first_sample + b.owned_end;
        PAQ_FUZZ_CHECK(b.segment_start == (b.first_sample == s.start), "segment_start flag wrong at " + std::to_string(b.first_sample));
        if (b.segment_end) PAQ_FUZZ_CHECK(b.first_sample + len == s.end(), "segment_end set on a window not at its segment end");
        const std::uint64_t expect_lost = owned_begin == s.start ? s.lost_before : 0;
        PAQ_FUZZ_CHECK(b.lost_samples_before == expect_lost, "lost_samples_before " + std::to_string(b.lost_samples_before) +
                                                                 ", expected " + std::to_string(expect_lost));
    }

    /// After finish(): every pushed sample was owned by exactly one batch.
    void check_all_owned(const dsp::batcher& bt) const
    {
        std::uint64_t short_samples = 0;
        for (const auto& sg : segs_) {
            if (!sg.samples.empty() && sg.samples.size() < waveform::L_pkt) short_samples += sg.samples.size();
        }
        PAQ_FUZZ_CHECK(bt.samples_in_short_segments() == short_samples,
                       "samples_in_short_segments " + std::to_string(bt.samples_in_short_segments()) + ", expected " +
                           std::to_string(short_samples));
        for (std::size_t k = seg_; k < segs_.size(); ++k) {
            PAQ_FUZZ_CHECK(segs_[k].done(),
                           "after finish, samples " + std::to_string(segs_[k].owned_next) + " .. " +
                               std::to_string(segs_[k].end()) + " owned by no batch");
        }
    }

private:
    std::vector<segment> segs_;
    std::size_t seg_ = 0;
    std::uint64_t next_index_ = 0;
};

void drain(dsp::batcher& bt, model& m)
{
    while (auto b = bt.pop()) m.check(*b);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    if (size < 1) return 0;
    const std::uint8_t options = data[0];
    io::vita49::sequence_tracker tracker((options & 1) ? 6'600'000u : 0u);
    constexpr std::size_t batch_sizes[] = {4096, 64, 1'000'000, waveform::default_batch_samples};
    dsp::batcher bt(batch_sizes[(options >> 1) & 3]);
    model m;

    io::vita49::packet pkt;
    std::optional<std::uint32_t> locked_stream;
    bool pending_malformed = false;
    std::vector<cf32> samples;

    record_reader records({data + 1, size - 1});
    std::span<const std::uint8_t> record;
    while (records.next(record)) {
        const std::vector<std::byte> datagram = paq::fuzz::exact_copy(record);
        const std::string error = io::vita49::parse_packet(datagram, pkt);
        if (!error.empty()) {
            pending_malformed = true;
            continue;
        }
        if (pkt.is_context()) continue;
        PAQ_FUZZ_CHECK(pkt.payload.data() >= datagram.data() &&
                           pkt.payload.data() + pkt.payload.size() <= datagram.data() + datagram.size(),
                       "payload outside the datagram");
        if (!locked_stream) locked_stream = pkt.fields.stream_id;
        if (pkt.fields.stream_id != *locked_stream) continue;
        const std::size_t n = pkt.num_samples();
        const io::vita49::sequence_result r = tracker.update(pkt.fields, n);
        if (!r.accept()) continue;
        std::optional<std::uint64_t> lost;
        if (r.resync)
            lost = 0;
        else if (r.packets_lost > 0 || r.samples_lost > 0)
            lost = r.samples_lost;
        else if (pending_malformed && !r.samples_exact && !r.first)
            lost = 0;
        pending_malformed = false;
        // The batcher first, the model after: a batcher that mishandles the gap then fails
        // under the sanitizers where it goes wrong, before the model's own checks.
        if (lost) {
            bt.gap(*lost);
            drain(bt, m);  // the previous segment's last batch
        }
        samples.resize(n);
        io::vita49::decode_payload(pkt, samples.data());
        bt.push(samples);
        if (lost) m.gap(*lost);
        m.push(samples.data(), n);
        drain(bt, m);
    }
    bt.finish();
    drain(bt, m);
    m.check_all_owned(bt);
    return 0;
}
