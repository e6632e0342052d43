#include "runtime/counters.hpp"

#include "io/utc_time.hpp"

#include <cmath>
#include <cstdio>
#include <limits>
#include <stdexcept>

#ifndef PAQ_VERSION
#define PAQ_VERSION "unknown"
#endif
#ifndef PAQ_GIT_COMMIT
#define PAQ_GIT_COMMIT "unknown"
#endif
#ifndef PAQ_BUILT_WITH_CUDA
#define PAQ_BUILT_WITH_CUDA 0
#endif

namespace paq::runtime {

namespace {

using S = service_snapshot;
constexpr metric_type C = metric_type::counter;
constexpr metric_type G = metric_type::gauge;

double d(std::uint64_t v) { return static_cast<double>(v); }
bool with_publisher(const S& s) { return s.publisher.has_value(); }
bool with_soft_streams(const S& s) { return s.publisher.has_value() && s.publisher->soft; }
bool with_decoded_streams(const S& s) { return s.publisher.has_value() && s.publisher->decoded; }
bool with_best_stream(const S& s) { return s.publisher.has_value() && s.publisher->best; }
bool with_records(const S& s) { return s.records.has_value(); }
bool with_recording(const S& s) { return s.recording.has_value(); }
bool with_pattern(const S& s) { return s.have_pattern; }
bool with_fec(const S& s) { return s.engine.fec; }
bool with_ring(const S& s) { return s.ring.has_value(); }
bool with_source(const S& s) { return s.source.has_value(); }
bool with_two_channels(const S& s) { return s.engine.receive_channels == 2; }

std::uint64_t sum(const std::array<std::uint64_t, dsp::chain::max_streams>& a)
{
    std::uint64_t t = 0;
    for (const auto v : a) t += v;
    return t;
}

const std::vector<scalar_metric> scalars_before_source = {
    // intake and the ring
    {"samples_in", C, "Samples the batcher received (from the ring, or read from the recording).", [](const S& s) { return d(s.engine.samples_in); }, nullptr, true},
    {"ring_samples_dropped", C, "Samples dropped because the ring was full.", [](const S& s) { return d(s.ring->samples_dropped); }, with_ring, true},
    {"ring_samples_refused", C, "Samples the source delivered after the ring was closed or aborted (paqd was stopping): never processed.", [](const S& s) { return d(s.ring->samples_refused); }, with_ring, true},
    {"ring_overflows", C, "Ring overflow episodes.", [](const S& s) { return d(s.ring->overflows); }, with_ring, true},
    {"ring_producer_waits", C, "Times the source waited for room in the ring (block policy).", [](const S& s) { return d(s.ring->producer_waits); }, with_ring, true},
    {"ring_gaps_coalesced", C, "Gaps merged into others because too many were queued in the ring.", [](const S& s) { return d(s.ring->gaps_coalesced); }, with_ring, true},
    {"ring_anchors", C, "Time anchors (the source's sample timestamps) read from the ring with their samples.", [](const S& s) { return d(s.ring->anchors); }, with_ring, true},
    {"ring_anchors_superseded", C, "Time anchors not passed on because a later one fell in the same read (the latest is used).", [](const S& s) { return d(s.ring->anchors_superseded); }, with_ring, true},
    {"ring_anchors_dropped", C, "Time anchors dropped with their samples (ring overflow) or because too many were queued.", [](const S& s) { return d(s.ring->anchors_dropped); }, with_ring, true},
    {"ring_fill_samples", G, "Samples waiting in the ring.", [](const S& s) { return d(s.ring->fill); }, with_ring, true},
    {"ring_high_water_samples", G, "The most samples the ring has held.", [](const S& s) { return d(s.ring->high_water); }, with_ring, true},
    {"ring_capacity_samples", G, "Ring capacity.", [](const S& s) { return d(s.ring->capacity); }, with_ring, true},
    {"input_sample_bytes", G, "Bytes an input sample takes in the ring and the upload: 4 (ci16, converted on the backend), 8 (cf32) or 16 (two receive channels' cf32); input_width in the JSON says which.",
     [](const S& s) { return s.engine.receive_channels == 2 ? 16.0 : s.engine.input_ci16 ? 4.0 : 8.0; }, nullptr, true},
    // gaps and stalls
    {"gaps", C, "Gaps in the sample stream, any reason (gaps_by_reason has them by reason).", [](const S& s) { return d(s.engine.gaps); }, nullptr, true},
    {"samples_lost_in_gaps", C, "Samples the gaps said were lost before the ring: the sources' and a recording's (the ring's own overflows are counted in ring_samples_dropped, not here).", [](const S& s) { return d(s.engine.samples_lost_in_gaps); }, nullptr, true},
    {"short_segments", C, "Segments between gaps shorter than one packet.", [](const S& s) { return d(s.engine.short_segments); }, nullptr, true},
    {"samples_in_short_segments", C, "Samples in segments shorter than one packet (no packet fits).", [](const S& s) { return d(s.engine.samples_in_short_segments); }, nullptr, true},
    {"stalls", C, "Times the source gave no samples for longer than the stall timeout.", [](const S& s) { return d(s.engine.stalls); }, with_ring, true},
    {"source_stalled", G, "1 while the source is stalled.", [](const S& s) { return s.engine.stalled ? 1.0 : 0.0; }, with_ring, true},
    // the source
    {"source_samples", C, "Samples the source delivered.", [](const S& s) { return d(s.source->samples); }, with_source, true},
    {"source_packets", C, "Datagrams or blocks the source received.", [](const S& s) { return d(s.source->packets); }, with_source, true},
    {"source_packets_lost", C, "Datagrams the source found missing.", [](const S& s) { return d(s.source->packets_lost); }, with_source, true},
    {"source_samples_lost", C, "Samples in the datagrams the source found missing.", [](const S& s) { return d(s.source->samples_lost); }, with_source, true},
    {"source_malformed", C, "Malformed datagrams the source rejected.", [](const S& s) { return d(s.source->malformed); }, with_source, true},
    {"source_refused", C, "Datagrams and connections refused: the sender is not in the allow-list.", [](const S& s) { return d(s.source->refused); }, with_source, true},
    {"source_reconnects", C, "Source reconnections.", [](const S& s) { return d(s.source->reconnects); }, with_source, true},
    {"source_nonfinite", C, "NaN/Inf samples the source passed on (their packets are flagged).", [](const S& s) { return d(s.source->nonfinite); }, with_source, true},
};

// After the source's kind counters (the source's own list) come:
const std::vector<scalar_metric> scalars_after_source = {
    // batches and backends
    {"batches_dispatched", C, "Batches handed to the worker pool.", [](const S& s) { return d(s.engine.batches_dispatched); }, nullptr, true},
    {"windows", C, "Batch windows made (a few, constant once they circulate).", [](const S& s) { return d(s.engine.windows); }, nullptr, true},
    {"windows_locked", C, "Of them, windows page-locked for full-speed uploads (0 on the CPU backend).", [](const S& s) { return d(s.engine.windows_locked); }, nullptr, true},
    {"batches_published", C, "Batches processed and published.", [](const S& s) { return d(s.engine.batches_published); }, nullptr, true},
    {"batches_lost", C, "Batches lost: their backend and the fallback failed, or paqd was aborted.", [](const S& s) { return d(s.engine.batches_lost); }, nullptr, true},
    {"samples_in_lost_batches", C, "Samples of the lost batches.", [](const S& s) { return d(s.engine.samples_in_lost_batches); }, nullptr, true},
    {"backend_errors", C, "Backend (e.g. GPU) errors.", [](const S& s) { return d(s.engine.backend_errors); }, nullptr, true},
    {"batches_on_fallback", C, "Batches processed on the CPU fallback.", [](const S& s) { return d(s.engine.batches_on_fallback); }, nullptr, true},
    {"batch_latency_last_seconds", G, "The last batch: its last sample in to its last bit published.", [](const S& s) { return s.engine.latency_last_ms / 1e3; }, nullptr, false},
    {"batch_latency_mean_seconds", G, "Mean batch latency.", [](const S& s) { return s.engine.latency_mean_ms / 1e3; }, nullptr, false},
    {"batch_latency_max_seconds", G, "Largest batch latency.", [](const S& s) { return s.engine.latency_max_ms / 1e3; }, nullptr, false},
    // packets
    {"packets_found", C, "Packets found and decoded.", [](const S& s) { return d(s.engine.tally.packets_found); }, nullptr, true},
    {"packets_last_batch", G, "Packets in the last published batch.", [](const S& s) { return d(s.engine.packets_last_batch); }, nullptr, true},
    {"packets_truncated", C, "Packets cut by a gap or the end of the stream (not decoded).", [](const S& s) { return d(s.engine.tally.packets_truncated); }, nullptr, true},
    {"packets_flagged", C, "Packets with any flag set.", [](const S& s) { return d(s.engine.tally.packets_flagged); }, nullptr, true},
    {"packets_missed_in_sequence", C, "Packets missing from the sequence.", [](const S& s) { return d(s.engine.tally.packets_skipped); }, nullptr, true},
    {"packets_ill_conditioned", C, "Packets whose ZF condition number was above 1e6.", [](const S& s) { return d(s.engine.tally.packets_ill_conditioned); }, nullptr, true},
    {"packets_clock_corrected", C, "Packets re-timed for the transmitter's clock offset.", [](const S& s) { return d(s.engine.tally.packets_clock_corrected); }, nullptr, true},
    {"packets_phase_smoothed", C, "Packets whose PLL phase wandered (phase noise), detected again by the phase smoother (receiver.phase_smoother auto).", [](const S& s) { return d(s.engine.tally.packets_phase_smoothed); }, nullptr, true},
    {"packets_unequalized_phase", C, "Packets the phase smoother decided whose segment was derotated by the unequalized path's phase, every equalized path made again from it.", [](const S& s) { return d(s.engine.tally.packets_unequalized_phase); }, nullptr, true},
    {"packets_front_end_estimated", C, "Packets whose DC offset and IQ imbalance were estimated.", [](const S& s) { return d(s.engine.tally.packets_front_end_estimated); }, nullptr, true},
    {"packets_front_end_corrected", C, "Packets whose DC offset or IQ imbalance stood above the gate (-30 dB) and was removed.", [](const S& s) { return d(s.engine.tally.packets_front_end_corrected); }, nullptr, true},
    // estimates
    {"mean_cfo_hz", G, "Mean carrier frequency offset estimate.", [](const S& s) { return s.engine.tally.mean_cfo_hz; }, nullptr, false},
    {"cfo_sum_hz", G, "Sum of the packets' CFO estimates; signed, so a gauge: its change over a window divided by packets_found's is the window's mean CFO.", [](const S& s) { return s.engine.tally.cfo_hz_sum; }, nullptr, false},
    {"mean_ebn0_db", G, "Mean estimated Eb/N0.", [](const S& s) { return s.engine.tally.mean_ebn0_db; }, nullptr, false},
    {"ebn0_linear_sum", C, "Sum of the packets' Eb/N0 estimates as linear ratios: 10 log10 of its increase over packets_found's is the window's mean Eb/N0 in dB.", [](const S& s) { return s.engine.tally.ebn0_linear_sum; }, nullptr, false},
    {"packets_best_receive_channel1", C, "Packets on which the first channel received (source.file.channel) had the higher Eb/N0 (the per-packet best-channel choice), or with receiver.combining select the paths were received on.", [](const S& s) { return d(s.engine.tally.packets_best_channel[0]); }, with_two_channels, true},
    {"packets_best_receive_channel2", C, "Packets on which the second channel received (source.file.second_channel) had the higher Eb/N0.", [](const S& s) { return d(s.engine.tally.packets_best_channel[1]); }, with_two_channels, true},
    {"packets_receive_channel1_silent", C, "Packets on which the first channel received carried nothing (all zeros: a dead input or a disconnected antenna).", [](const S& s) { return d(s.engine.tally.packets_channel_silent[0]); }, with_two_channels, true},
    {"packets_receive_channel2_silent", C, "Packets on which the second channel received carried nothing.", [](const S& s) { return d(s.engine.tally.packets_channel_silent[1]); }, with_two_channels, true},
    {"receive_channel1_mean_ebn0_db", G, "The first channel's mean estimated Eb/N0 (mean_ebn0_db is the combined paths').", [](const S& s) { return s.engine.tally.channel_mean_ebn0_db[0]; }, with_two_channels, false},
    {"receive_channel2_mean_ebn0_db", G, "The second channel's mean estimated Eb/N0.", [](const S& s) { return s.engine.tally.channel_mean_ebn0_db[1]; }, with_two_channels, false},
    {"receive_channel1_mean_level_db", G, "The first channel's mean received level at the packets: signal and noise power per sample, dB re. 1 of the samples as taken (ci16: counts over ci16_scale; -300: only zeros).", [](const S& s) { return s.engine.tally.channel_mean_level_db[0]; }, with_two_channels, false},
    {"receive_channel2_mean_level_db", G, "The second channel's mean received level.", [](const S& s) { return s.engine.tally.channel_mean_level_db[1]; }, with_two_channels, false},
    {"mean_clock_ppm", G, "Mean transmitter clock offset against the sample clock.", [](const S& s) { return s.engine.tally.mean_clock_ppm; }, nullptr, false},
    {"clock_ppm_last_batch", G, "Mean transmitter clock offset over the last published batch's packets.", [](const S& s) { return s.engine.clock_ppm_last_batch; }, nullptr, false},
    {"iq_gain_db_last_batch", G, "IQ amplitude imbalance, mean over the last batch's corrected packets (NaN: none).", [](const S& s) { return s.engine.iq_gain_db_last_batch; }, nullptr, false},
    {"iq_phase_deg_last_batch", G, "IQ phase imbalance, mean over the last batch's corrected packets (NaN: none).", [](const S& s) { return s.engine.iq_phase_deg_last_batch; }, nullptr, false},
    {"dc_dbc_last_batch", G, "DC offset, mean over the last batch's corrected packets (NaN: none).", [](const S& s) { return s.engine.dc_dbc_last_batch; }, nullptr, false},
    // outputs
    {"packets_published", C, "Datagrams built for the testers (sent + send errors).", [](const S& s) { return d(s.publisher->packets_published); }, with_publisher, true},
    {"datagrams_sent", C, "UDP datagrams sent to the testers, all streams.", [](const S& s) { return d(sum(s.publisher->datagrams_sent)); }, with_publisher, true},
    {"send_errors", C, "UDP sends refused by the kernel, all streams (e.g. ECONNREFUSED after an ICMP port unreachable).", [](const S& s) { return d(sum(s.publisher->send_errors)); }, with_publisher, true},
    {"llr_datagrams_sent", C, "LLR datagrams sent on the soft streams (publisher.llr_destinations), all paths.", [](const S& s) { return d(s.publisher->llr_datagrams_sent); }, with_soft_streams, true},
    {"llr_send_errors", C, "LLR datagrams refused by the kernel, all soft streams.", [](const S& s) { return d(s.publisher->llr_send_errors); }, with_soft_streams, true},
    {"llr_bytes_sent", C, "UDP payload bytes of the LLR datagrams sent, all soft streams.", [](const S& s) { return d(s.publisher->llr_bytes_sent); }, with_soft_streams, true, "paqd_llr_sent_bytes_total"},
    {"decoded_datagrams_sent", C, "Datagrams sent on the decoded streams (publisher.decoded_destinations), all streams.", [](const S& s) { return d(s.publisher->decoded_datagrams_sent); }, with_decoded_streams, true},
    {"decoded_send_errors", C, "Decoded-stream datagrams refused by the kernel or not made (a batch not decoded), all decoded streams.", [](const S& s) { return d(s.publisher->decoded_send_errors); }, with_decoded_streams, true},
    {"decoded_bytes_sent", C, "UDP payload bytes of the decoded-stream datagrams sent, all decoded streams.", [](const S& s) { return d(s.publisher->decoded_bytes_sent); }, with_decoded_streams, true, "paqd_decoded_sent_bytes_total"},
    {"best_datagrams_sent", C, "Datagrams sent on the best-path stream (publisher.best_destination).", [](const S& s) { return d(s.publisher->best_datagrams_sent); }, with_best_stream, true},
    {"best_send_errors", C, "Best-path stream datagrams refused by the kernel.", [](const S& s) { return d(s.publisher->best_send_errors); }, with_best_stream, true},
    {"record_rows", C, "Per-packet record rows written.", [](const S& s) { return d(s.records->rows); }, with_records, true},
    {"record_rows_lost", C, "Per-packet record rows that could not be written (disk full).", [](const S& s) { return d(s.records->rows_lost); }, with_records, true},
    {"recorded_samples", C, "Samples written to the SigMF recording.", [](const S& s) { return d(s.recording->samples); }, with_recording, true},
    {"recording_dropped_samples", C, "Samples not recorded (disk too slow or failed).", [](const S& s) { return d(s.recording->dropped); }, with_recording, true},
    {"up", G, "1 while paqd runs.", [](const S& s) { return s.engine.finished ? 0.0 : 1.0; }, with_ring, true},
};

const dsp::path_summary& path(const S& s, int p) { return s.engine.tally.paths[static_cast<std::size_t>(p)]; }
/// The run's output streams (the tally's: 6, or 12 with receiver.detector both).
int streams(const S& s) { return static_cast<int>(s.engine.tally.paths.size()); }

const std::vector<path_metric> per_path = {
    {"packets", C, "Packets decoded per path.", [](const S& s, int p) { return d(path(s, p).packets); }, nullptr, true},
    {"mean_bep_estimate", G, "Mean estimated bit error probability per path.", [](const S& s, int p) { return path(s, p).mean_bep_estimate; }, nullptr, false},
    {"bep_estimate_sum", C, "Sum of the packets' BEP estimates per path: its increase over packets_found's is the window's mean BEP.", [](const S& s, int p) { return path(s, p).bep_estimate_sum; }, nullptr, false},
    // promtool reads "bits" in a name as a unit and wants bytes: the Prometheus names say bit.
    {"bits", C, "Data bits checked against the PN pattern per path (with receiver.fec, the decoded information bits).", [](const S& s, int p) { return d(path(s, p).bits_checked); }, with_pattern, true, "paqd_path_checked_bit_count_total"},
    {"bit_errors", C, "Bit errors against the PN pattern per path.", [](const S& s, int p) { return d(path(s, p).bit_errors); }, with_pattern, true},
    {"ber", G, "Bit error rate against the PN pattern per path (NaN, null in the JSON: no bit checked yet).",
     [](const S& s, int p) { return path(s, p).bits_checked > 0 ? path(s, p).ber : std::numeric_limits<double>::quiet_NaN(); }, with_pattern, false},
    {"bits_before_lock", C, "Bits before the PN checker locked, per path.", [](const S& s, int p) { return d(path(s, p).bits_before_lock); }, with_pattern, true, "paqd_path_bit_count_before_lock_total"},
    {"resyncs", C, "Times the PN checker lost lock and locked again, per path.", [](const S& s, int p) { return d(path(s, p).resyncs); }, with_pattern, true},
    {"locked", G, "1 when the path's PN checker is locked.", [](const S& s, int p) { return path(s, p).locked ? 1.0 : 0.0; }, with_pattern, true},
    // a coded link (receiver.fec): the PN counts above are then the decoded information bits'
    {"fec_codewords", C, "LDPC codewords decoded per path (receiver.fec).", [](const S& s, int p) { return d(path(s, p).fec.codewords); }, with_fec, true},
    {"fec_codewords_failed", C, "LDPC codewords per path whose decoding did not converge within receiver.fec_iterations.", [](const S& s, int p) { return d(path(s, p).fec.codewords_failed); }, with_fec, true},
    {"fec_fer", G, "LDPC frame (codeword) error rate per path: failed over decoded (NaN, null in the JSON: none decoded yet).",
     [](const S& s, int p) { return path(s, p).fec.codewords > 0 ? path(s, p).fec.fer() : std::numeric_limits<double>::quiet_NaN(); }, with_fec, false},
    {"fec_iterations", C, "LDPC decoder iterations per path, summed over the codewords.", [](const S& s, int p) { return d(path(s, p).fec.iterations); }, with_fec, true},
    {"fec_channel_bits", C, "Received bits of the converged codewords per path.", [](const S& s, int p) { return d(path(s, p).fec.channel_bits); }, with_fec, true, "paqd_path_fec_channel_bit_count_total"},
    {"fec_channel_bit_errors", C, "Received bits of the converged codewords decided otherwise than the decoded codeword, per path: the channel's errors before decoding.", [](const S& s, int p) { return d(path(s, p).fec.channel_bit_errors); }, with_fec, true},
    {"fec_channel_ber", G, "Channel bit error rate before decoding per path, over the converged codewords (NaN, null in the JSON: none yet).",
     [](const S& s, int p) { return path(s, p).fec.channel_bits > 0 ? path(s, p).fec.channel_ber() : std::numeric_limits<double>::quiet_NaN(); }, with_fec, false},
    {"datagrams_sent", C, "UDP datagrams sent per stream.", [](const S& s, int p) { return d(s.publisher->datagrams_sent[static_cast<std::size_t>(p)]); }, with_publisher, true},
    {"send_errors", C, "UDP sends refused per stream.", [](const S& s, int p) { return d(s.publisher->send_errors[static_cast<std::size_t>(p)]); }, with_publisher, true},
};

histogram_values latency_histogram(const S& s)
{
    histogram_values h;
    h.bounds.assign(latency_bucket_bounds_s.begin(), latency_bucket_bounds_s.end());
    std::uint64_t below = 0;
    for (const auto n : s.engine.latency_buckets) h.cumulative.push_back(below += n);
    h.count = s.engine.batches_published;
    h.sum = s.engine.latency_sum_s;
    return h;
}

const std::vector<histogram_metric> histograms = {
    {"batch_latency_seconds", "Batch latency: a batch's last sample in to its last bit published.", latency_histogram},
};

bool present(const S& s, bool (*p)(const S&)) { return p == nullptr || p(s); }

std::string number(double v, bool integral)
{
    char buf[64];
    if (std::isnan(v)) return "NaN";
    if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
    if (integral) std::snprintf(buf, sizeof buf, "%.0f", v);
    else std::snprintf(buf, sizeof buf, "%.17g", v);
    return buf;
}

nlohmann::json json_number(double v, bool integral)
{
    if (!std::isfinite(v)) return nullptr;  // JSON has no NaN
    if (integral) return static_cast<std::uint64_t>(v);
    return v;
}

std::string prom_name(const char* prefix, const char* name, metric_type t)
{
    std::string n = std::string("paqd_") + prefix + name;
    if (t == metric_type::counter) n += "_total";
    return n;
}

void header(std::string& out, const std::string& name, metric_type t, const char* help)
{
    out += "# HELP " + name + " " + help + "\n# TYPE " + name + (t == metric_type::counter ? " counter\n" : " gauge\n");
}

std::string si(double v)
{
    char buf[32];
    if (v >= 1e9) std::snprintf(buf, sizeof buf, "%.2fG", v / 1e9);
    else if (v >= 1e6) std::snprintf(buf, sizeof buf, "%.2fM", v / 1e6);
    else if (v >= 1e3) std::snprintf(buf, sizeof buf, "%.1fk", v / 1e3);
    else std::snprintf(buf, sizeof buf, "%.0f", v);
    return buf;
}

}  // namespace

const std::vector<scalar_metric>& scalar_metrics()
{
    static const std::vector<scalar_metric> all = [] {
        auto v = scalars_before_source;
        v.insert(v.end(), scalars_after_source.begin(), scalars_after_source.end());
        return v;
    }();
    return all;
}
const std::vector<path_metric>& path_metrics() { return per_path; }
const std::vector<histogram_metric>& histogram_metrics() { return histograms; }

std::string prometheus_name(const scalar_metric& m) { return m.prom ? m.prom : prom_name("", m.name, m.type); }
std::string prometheus_name(const path_metric& m) { return m.prom ? m.prom : prom_name("path_", m.name, m.type); }

build_info_values build_info() { return {PAQ_VERSION, PAQ_GIT_COMMIT, PAQ_BUILT_WITH_CUDA != 0}; }

namespace {

/// A label value in the text format: backslash, double quote and newline escaped.
std::string label_value(std::string_view v)
{
    std::string o;
    for (const char c : v) {
        if (c == '\\') o += "\\\\";
        else if (c == '"') o += "\\\"";
        else if (c == '\n') o += "\\n";
        else o += c;
    }
    return o;
}

std::string le_label(double bound)
{
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", bound);
    return buf;
}

}  // namespace

namespace {

/// One scalar as the outputs print it: a registry entry, or one of the source's kind counters.
struct scalar_row {
    const char* name;
    metric_type type;
    const char* help;
    double value;
    bool integral;
    const char* prom;  ///< its Prometheus name when not the derived one (scalar_metric::prom)
};

/// Every scalar present in s, in the outputs' order: the registry's before the source's kind
/// counters, those (as the source lists them), the registry's after them.
template <typename F>
void for_each_scalar(const S& s, F&& f)
{
    auto entries = [&](const std::vector<scalar_metric>& list) {
        for (const auto& m : list) {
            if (present(s, m.present)) f(scalar_row{m.name, m.type, m.help, m.value(s), m.integral, m.prom});
        }
    };
    entries(scalars_before_source);
    for (const auto& k : s.source_kind) {
        const auto type = k.counter->gauge ? metric_type::gauge : metric_type::counter;
        f(scalar_row{k.counter->name, type, k.counter->help, k.value, k.counter->integral, nullptr});
    }
    entries(scalars_after_source);
}

}  // namespace

double value_of(const service_snapshot& s, std::string_view name)
{
    for (const auto& m : scalar_metrics()) {
        if (name == m.name) {
            if (!present(s, m.present)) break;
            return m.value(s);
        }
    }
    for (const auto& k : s.source_kind) {
        if (name == k.counter->name) return k.value;
    }
    throw std::out_of_range("no counter '" + std::string(name) + "' in this snapshot");
}

double path_value_of(const service_snapshot& s, std::string_view name, int p)
{
    for (const auto& m : per_path) {
        if (name == m.name) {
            if (!present(s, m.present)) break;
            return m.value(s, p);
        }
    }
    throw std::out_of_range("no per-path counter '" + std::string(name) + "' in this snapshot");
}

std::string render_prometheus(const service_snapshot& s)
{
    std::string o;
    o.reserve(16384);
    {
        const auto b = build_info();
        o += "# HELP paqd_build_info paqd's version, commit and whether the CUDA backend is compiled in; always 1.\n"
             "# TYPE paqd_build_info gauge\n";
        o += "paqd_build_info{version=\"" + label_value(b.version) + "\",commit=\"" + label_value(b.commit) + "\",cuda=\"" +
             (b.cuda ? "yes" : "no") + "\"} 1\n";
    }
    for_each_scalar(s, [&](const scalar_row& r) {
        const std::string n = r.prom ? r.prom : prom_name("", r.name, r.type);
        header(o, n, r.type, r.help);
        o += n + " " + number(r.value, false) + "\n";
    });
    {
        const auto n = prom_name("", gaps_by_reason_name, metric_type::counter);
        header(o, n, metric_type::counter, "Gaps in the sample stream, by reason.");
        for (std::size_t r = 0; r < num_gap_reasons; ++r) {
            o += n + "{reason=\"" + std::string(io::to_string(static_cast<io::gap_reason>(r))) + "\"} " +
                 number(d(s.engine.gaps_by_reason[r]), true) + "\n";
        }
    }
    for (const auto& m : per_path) {
        if (!present(s, m.present)) continue;
        const auto n = prometheus_name(m);
        header(o, n, m.type, m.help);
        for (int p = 0; p < streams(s); ++p) {
            o += n + "{path=\"" + path(s, p).name + "\"} " + number(m.value(s, p), false) + "\n";
        }
    }
    for (const auto& m : histograms) {
        const auto n = std::string("paqd_") + m.name;
        const auto h = m.value(s);
        o += "# HELP " + n + " " + m.help + "\n# TYPE " + n + " histogram\n";
        for (std::size_t b = 0; b < h.bounds.size(); ++b) {
            o += n + "_bucket{le=\"" + le_label(h.bounds[b]) + "\"} " + number(d(h.cumulative[b]), true) + "\n";
        }
        o += n + "_bucket{le=\"+Inf\"} " + number(d(h.count), true) + "\n";
        o += n + "_sum " + number(h.sum, false) + "\n";
        o += n + "_count " + number(d(h.count), true) + "\n";
    }
    return o;
}

nlohmann::json to_json(const service_snapshot& s)
{
    nlohmann::json j = nlohmann::json::object();
    for_each_scalar(s, [&](const scalar_row& r) { j[r.name] = json_number(r.value, r.integral); });
    nlohmann::json gaps = nlohmann::json::object();
    for (std::size_t r = 0; r < num_gap_reasons; ++r) {
        gaps[std::string(io::to_string(static_cast<io::gap_reason>(r)))] = s.engine.gaps_by_reason[r];
    }
    j[gaps_by_reason_name] = gaps;
    nlohmann::json paths = nlohmann::json::array();
    for (int p = 0; p < streams(s); ++p) {
        nlohmann::json e = {{"path", path(s, p).name}};
        for (const auto& m : per_path) {
            if (present(s, m.present)) e[m.name] = json_number(m.value(s, p), m.integral);
        }
        paths.push_back(e);
    }
    j["paths"] = paths;
    for (const auto& m : histograms) {
        const auto h = m.value(s);
        j[m.name] = {{"le", h.bounds}, {"counts", h.cumulative}, {"count", h.count}, {"sum", json_number(h.sum, false)}};
    }
    const auto b = build_info();
    j[build_info_name] = {{"version", b.version}, {"commit", b.commit}, {"cuda", b.cuda}};
    if (s.source) j["source_description"] = s.source->description;
    // As paqd replay's summary says it: the width the samples travel at to the backend.
    j["input_width"] = s.engine.receive_channels == 2 ? "cf32 x 2" : s.engine.input_ci16 ? "ci16" : "cf32";
    // When the run's first packet was received (its first sample, UTC), where the source
    // gives time (docs/DAEMON.md, "Time"); null otherwise.
    j["first_packet_utc"] = s.engine.first_packet_utc_ns != dsp::unknown_utc_ns
                                ? nlohmann::json(io::format_utc_ns(s.engine.first_packet_utc_ns))
                                : nlohmann::json(nullptr);
    j["source_error"] = s.source_error ? nlohmann::json(*s.source_error) : nlohmann::json(nullptr);
    return j;
}

std::vector<std::string> final_log_lines(const service_snapshot& s)
{
    std::vector<std::string> lines;
    std::string line = "counters:";
    for_each_scalar(s, [&](const scalar_row& r) {
        const std::string item = std::string(" ") + r.name + "=" + number(r.value, r.integral);
        if (line.size() + item.size() > 200) {
            lines.push_back(line);
            line = "counters:";
        }
        line += item;
    });
    lines.push_back(line);
    line = std::string(gaps_by_reason_name) + ":";
    for (std::size_t r = 0; r < num_gap_reasons; ++r) {
        line += " " + std::string(io::to_string(static_cast<io::gap_reason>(r))) + "=" + std::to_string(s.engine.gaps_by_reason[r]);
    }
    lines.push_back(line);
    for (int p = 0; p < streams(s); ++p) {
        line = "path " + path(s, p).name + ":";
        for (const auto& m : per_path) {
            if (present(s, m.present)) line += std::string(" ") + m.name + "=" + number(m.value(s, p), m.integral);
        }
        lines.push_back(line);
    }
    for (const auto& m : histograms) {
        const auto h = m.value(s);
        line = std::string(m.name) + ": count=" + std::to_string(h.count) + " sum=" + number(h.sum, false);
        for (std::size_t k = 0; k < h.bounds.size(); ++k) line += " le" + le_label(h.bounds[k]) + "=" + std::to_string(h.cumulative[k]);
        lines.push_back(line);
    }
    const auto b = build_info();
    lines.push_back("build: version=" + b.version + " commit=" + b.commit + " cuda=" + (b.cuda ? "yes" : "no"));
    return lines;
}

std::string counters_markdown(std::span<const source_kind_counters> kinds)
{
    auto when = [](bool (*p)(const S&)) -> std::string {
        if (p == with_publisher) return " (publisher on)";
        if (p == with_soft_streams) return " (soft streams on)";
        if (p == with_decoded_streams) return " (decoded streams on)";
        if (p == with_best_stream) return " (best-path stream on)";
        if (p == with_records) return " (records on)";
        if (p == with_recording) return " (recording on)";
        if (p == with_pattern) return " (with a pattern)";
        if (p == with_fec) return " (receiver.fec on)";
        if (p == with_two_channels) return " (receiver.channels 2)";
        if (p == with_ring) return " (live)";
        if (p == with_source) return " (live)";
        return "";
    };
    std::string o = "| name (`--json-out`, final log) | Prometheus | type | meaning |\n|---|---|---|---|\n";
    auto row = [&](const char* name, const std::string& prom, metric_type type, const std::string& meaning) {
        o += std::string("| `") + name + "` | `" + prom + "` | " + (type == metric_type::counter ? "counter" : "gauge") + " | " +
             meaning + " |\n";
    };
    auto rows = [&](const std::vector<scalar_metric>& list) {
        for (const auto& m : list) row(m.name, prometheus_name(m), m.type, m.help + when(m.present));
    };
    rows(scalars_before_source);
    for (const auto& kind : kinds) {
        for (const auto& c : kind.counters) {
            const auto type = c.gauge ? metric_type::gauge : metric_type::counter;
            row(c.name, prom_name("", c.name, type), type, c.help + std::string(" (") + kind.kind + ")");
        }
    }
    rows(scalars_after_source);
    o += std::string("| `") + gaps_by_reason_name + "` {reason: n} | `" + prom_name("", gaps_by_reason_name, metric_type::counter) +
         "{reason}` | counter | Gaps by reason: overflow, lost-packets, stall, reconnect, source-error, discontinuity. |\n";
    for (const auto& m : per_path) {
        o += std::string("| `paths[].") + m.name + "` | `" + prometheus_name(m) + "{path}` | " +
             (m.type == metric_type::counter ? "counter" : "gauge") + " | " + m.help + when(m.present) + " |\n";
    }
    for (const auto& m : histograms) {
        o += std::string("| `") + m.name + "` {le, counts, count, sum} | `paqd_" + m.name + "_bucket{le}`, `_sum`, `_count` | histogram | " +
             m.help + " |\n";
    }
    o += std::string("| `") + build_info_name +
         "` {version, commit, cuda} | `paqd_build_info{version,commit,cuda}` | gauge | Always 1; the labels say what was built (cuda: yes or no). |\n";
    return o;
}

std::string status_line(const service_snapshot& s, const service_snapshot* prev, double interval_s)
{
    auto v = [&](const char* name) { return value_of(s, name); };
    auto n = [&](const char* name) { return number(v(name), true); };
    const double rate = prev && interval_s > 0 ? (v("samples_in") - value_of(*prev, "samples_in")) / interval_s : 0.0;
    std::string line = "in " + si(v("samples_in")) + " (" + si(rate) + "/s)";
    line += " drop " + n("ring_samples_dropped");
    line += " gaps " + n("gaps");
    if (v("source_stalled") != 0.0) line += " STALLED";
    line += " | batches " + n("batches_published");
    if (v("batches_lost") != 0.0) line += " (" + n("batches_lost") + " lost)";
    line += " pkts " + n("packets_last_batch") + "/batch " + n("packets_found");
    line += " |";
    for (int p = 0; p < streams(s); ++p) {
        char buf[48];
        const char* name = path(s, p).name.c_str();
        if (s.have_pattern) {
            if (path_value_of(s, "locked", p) != 0.0) std::snprintf(buf, sizeof buf, " %s %.1e", name, path_value_of(s, "ber", p));
            else std::snprintf(buf, sizeof buf, " %s nolock", name);
        } else {
            std::snprintf(buf, sizeof buf, " %s ~%.1e", name, path_value_of(s, "mean_bep_estimate", p));
        }
        line += buf;
    }
    char lat[64];
    std::snprintf(lat, sizeof lat, " | latency %.0f ms (max %.0f)", 1e3 * v("batch_latency_last_seconds"), 1e3 * v("batch_latency_max_seconds"));
    line += lat;
    return line;
}

}  // namespace paq::runtime
