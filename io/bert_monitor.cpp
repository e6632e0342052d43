#include "io/bert_monitor.hpp"

#include "dsp/waveform.hpp"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <stdexcept>

namespace paq::io {

namespace {

constexpr std::uint64_t window = bert_monitor::sequence_window;

[[nodiscard]] std::size_t slot(std::uint64_t seq) noexcept { return static_cast<std::size_t>(seq % window); }

}  // namespace

bert_monitor::bert_monitor(const bert_monitor_config& config) : config_(config)
{
    streams_.reserve(static_cast<std::size_t>(tracked_streams));
    for (int s = 0; s < tracked_streams; ++s) streams_.emplace_back(config.pattern);
}

void bert_monitor::malformed(int port_stream, std::string error)
{
    ++malformed_total_;
    if (port_stream >= 0 && port_stream <= best_stream_id) {
        ++streams_[static_cast<std::size_t>(port_stream)].s.malformed;
    } else {
        ++malformed_unattributed_;
    }
    last_error_ = std::move(error);
}

void bert_monitor::ingest(std::span<const std::uint8_t> datagram, int port_stream)
{
    decode_result r = decode_datagram(datagram);
    if (!r.ok()) {
        malformed(port_stream, std::move(r.error));
        return;
    }
    const decoded_datagram& d = r.datagram;
    const bool bare = d.format == bitstream_format::dqe_raw;
    int stream = d.header.stream_id;
    if (bare) {
        if (port_stream >= 0) {
            stream = port_stream;
        } else if (d.dqe->id <= best_stream_id) {
            stream = d.dqe->id;
        } else {
            char buf[96];
            std::snprintf(buf, sizeof buf, "bare DQE frame with DQE ID 0x%04X on a shared port: no stream 0 .. 12 to count it in",
                          static_cast<unsigned>(d.dqe->id));
            malformed(-1, buf);
            return;
        }
    }
    if (config_.expected_format && d.format != *config_.expected_format) {
        malformed(stream, "format is " + std::string(to_string(d.format)) + ", expected " +
                              std::string(to_string(*config_.expected_format)));
        return;
    }

    ++datagrams_total_;
    if (d.fec) stream = decoded_id(stream);
    stream_state& st = streams_[static_cast<std::size_t>(stream)];
    if (d.fec && d.fec->code != st.s.code) {
        // A decoded stream's first datagram, or a sender now sending another code (a new run):
        // the checker takes the code's information bits per packet.
        if (st.started) start_new_run(st);
        st.s.code = d.fec->code;
        st.ber = checker_for(d.fec->code);
    }
    ++st.s.datagrams;
    st.s.bytes += datagram.size();
    if (d.dqe) st.s.last_dqm = d.dqe->dqm;
    if (bare) {
        // No sequence and no start sample: every frame is taken as the next packet.
        st.raw_start += waveform::L_pkt;
        st.ber.add_packet(st.raw_start, d.bits.data());
        ++st.s.packets_checked;
        return;
    }
    st.s.last_bep_estimate = d.header.bep_estimate;
    track_sequence(st, d);
}

bool bert_monitor::new_run(const stream_state& st, std::uint64_t seq, std::uint64_t start) noexcept
{
    // Within one run sequence and start sample rise together (packets go out in start order,
    // one datagram per packet per stream), so any of these is a datagram of another run.
    if (seq > st.highest_seq) return start <= st.highest_start;
    if (st.highest_seq - seq >= window) return true;
    const std::uint64_t known = st.slot_start[slot(seq)];
    if (known != unseen) return known != start;  // the number of another packet
    return start >= st.highest_start;
}

void bert_monitor::start_new_run(stream_state& st)
{
    ++st.s.sender_restarts;
    ++sender_restarts_total_;
    st.lost_before = st.s.lost;
    st.skipped_before += st.ber.packets_skipped();
    const auto c = st.ber.counts();
    st.pn_before.bits_checked += c.bits_checked;
    st.pn_before.bit_errors += c.bit_errors;
    st.pn_before.bits_before_lock += c.bits_before_lock;
    st.pn_before.resyncs += c.resyncs;
    // The new run's start samples count from its own start: the checker's packet spacing
    // (and its lock: bits between the runs are unknown) must start over.
    st.ber = checker_for(st.s.code);
    std::fill(st.slot_start.begin(), st.slot_start.end(), unseen);
    st.started = false;
}

void bert_monitor::track_sequence(stream_state& st, const decoded_datagram& d)
{
    const std::uint64_t seq = d.header.sequence;
    const std::uint64_t start = d.header.start_sample;
    if (st.started && new_run(st, seq, start)) start_new_run(st);
    bool advances = false;
    if (!st.started) {
        st.started = true;
        st.first_seq = st.highest_seq = seq;
        st.highest_start = start;
        st.unique = 1;
        st.slot_start[slot(seq)] = start;
        advances = true;
    } else if (seq > st.highest_seq) {
        if (seq - st.highest_seq >= window) {
            std::fill(st.slot_start.begin(), st.slot_start.end(), unseen);
        } else {
            for (std::uint64_t s = st.highest_seq + 1; s < seq; ++s) st.slot_start[slot(s)] = unseen;
        }
        st.slot_start[slot(seq)] = start;
        st.highest_seq = seq;
        st.highest_start = start;
        ++st.unique;
        advances = true;
    } else if (seq < st.first_seq) {
        // Earlier than the first one seen but within the window: its slot was never set.
        st.first_seq = seq;
        st.slot_start[slot(seq)] = start;
        ++st.unique;
        ++st.s.reordered;
    } else if (st.slot_start[slot(seq)] != unseen) {
        ++st.s.duplicated;  // new_run() checked that the start sample is the same
    } else {
        st.slot_start[slot(seq)] = start;
        ++st.unique;
        ++st.s.reordered;
    }
    st.s.lost = st.lost_before + (st.highest_seq - st.first_seq + 1) - st.unique;
    if (advances) {
        const auto framing = d.fec ? dsp::framing_for(d.fec->code) : std::nullopt;
        if (framing && framing->continuous()) {
            // The frames that end in the packet, numbered: a jump skips the lost frames' bits.
            st.ber.add_frames(start, d.fec->first_frame, d.fec->codewords, d.bits.data(), static_cast<std::size_t>(framing->k));
        } else {
            st.ber.add_packet(start, d.bits.data());
        }
        ++st.s.packets_checked;
        if (framing) st.s.fec.add(d.fec->results.data(), d.fec->codewords, framing->n);
    }
}

dsp::stream_ber_counter bert_monitor::checker_for(dsp::fec_code code) const
{
    const auto framing = dsp::framing_for(code);
    return dsp::stream_ber_counter(config_.pattern, 0.0,
                                   framing ? static_cast<std::size_t>(framing->info_bits()) : std::size_t{waveform::data_bits});
}

bert_stream_stats bert_monitor::stats(int id) const
{
    if (id < 0 || id >= tracked_streams) {
        throw std::out_of_range("bert_monitor::stats: id " + std::to_string(id) + " (allowed: 0 .. 24)");
    }
    const stream_state& st = streams_[static_cast<std::size_t>(id)];
    bert_stream_stats s = st.s;
    s.pn = st.ber.counts();
    s.pn.bits_checked += st.pn_before.bits_checked;
    s.pn.bit_errors += st.pn_before.bit_errors;
    s.pn.bits_before_lock += st.pn_before.bits_before_lock;
    s.pn.resyncs += st.pn_before.resyncs;
    s.packets_skipped = st.skipped_before + st.ber.packets_skipped();
    return s;
}

int bert_monitor::active_streams() const noexcept
{
    return static_cast<int>(std::count_if(streams_.begin(), streams_.end(),
                                          [](const stream_state& st) { return st.s.active(); }));
}

std::uint64_t bert_monitor::min_bits_checked() const noexcept
{
    std::uint64_t m = std::numeric_limits<std::uint64_t>::max();
    bool any = false;
    for (const stream_state& st : streams_) {
        if (!st.s.active()) continue;
        any = true;
        m = std::min(m, st.pn_before.bits_checked + st.ber.counts().bits_checked);
    }
    return any ? m : 0;
}

}  // namespace paq::io
