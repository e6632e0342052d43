// `paqd replay FILE`: the chain over a recording, with the side-by-side table per path.
#pragma once

#include "daemon/records.hpp"
#include "config/daemon_config.hpp"
#include "dsp/backend.hpp"
#include "runtime/backend_factory.hpp"
#include "runtime/stream_engine.hpp"
#include "dsp/pn.hpp"
#include "dsp/receiver_config.hpp"
#include "dsp/run_tally.hpp"
#include "io/sample_format.hpp"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace paq::daemon {

struct replay_options {
    std::filesystem::path file;
    std::optional<io::sample_format> raw_format;   ///< raw files only
    std::optional<double> raw_sample_rate_hz;      ///< raw files only
    /// --channel: the channel received of a recording that interleaves several (1 .. its
    /// channels; such a recording needs it); --channels: a raw file's channels.
    std::optional<int> channel;
    /// A second --channel: combined with the first on every path (receiver_config::channels 2).
    std::optional<int> second_channel;
    /// --each-channel (with two channels): each channel also received alone, its paths beside
    /// the combined ones in the table and the JSON.
    bool each_channel = false;
    int raw_channels = 1;
    /// --pattern: the data's PN pattern. Unset: the recording's paq:pattern (paq-sim writes
    /// it), else pn15.
    std::optional<dsp::pn_pattern> pattern;
    dsp::receiver_config receiver;
    config::backend_kind backend = config::backend_kind::automatic;  ///< automatic: cuda when a GPU can run it, else cpu
    /// CUDA devices, one worker each (cuda backend); empty: device 0. Batches go to them in
    /// turn and are tallied in order. Given with `automatic`, the backend is cuda.
    std::vector<int> gpus;
    runtime::solver_kind solver = runtime::solver_kind::levinson;  ///< ZF/MMSE solver of the cuda backend
    records_config records;       ///< per-packet CSV records (base empty: none)
    /// --llr-out: the trellis's LLRs to BASE-<stream>.llr (daemon/llr_writer.hpp; empty: none).
    std::filesystem::path llr_base;
    /// --bit-rate: the link's bit rate. Unset: the recording's paq:bit_rate_hz (paq-sim and
    /// paqd recordings carry it), else receiver.bit_rate_hz.
    std::optional<double> bit_rate_hz;
    /// --fec: the LDPC code of the data fields. Unset: the recording's paq:fec (paq-sim --ldpc
    /// writes it), else receiver.fec.
    std::optional<dsp::fec_code> fec;
    /// --stage-timing: the backend times its stages on every batch (CUDA events; the cuda
    /// backend only), reported as means per batch (replay_result::stages).
    bool stage_timing = false;
};

/// One channel of a combined replay received alone (replay_options::each_channel).
struct channel_alone {
    int channel = 1;           ///< the recording's channel number
    dsp::run_summary tally;    ///< its counts per path
};

struct replay_result {
    /// The stream engine's result, which the JSON reports through the counter registry
    /// (runtime/counters.hpp) under the live service's names.
    runtime::stream_stats engine;
    double sample_rate_hz = 0.0;        ///< the recording's (input) sample rate
    int channel = 1, channels = 1;      ///< the channel received, of the recording's channels
    int second_channel = 0;             ///< the channel combined with it (receiver_config::channels 2), 0: none
    std::string combining = "joint";    ///< with second_channel: receiver.combining, "joint" or "select"
    std::vector<channel_alone> each_channel;  ///< --each-channel: the two channels alone, in --channel order
    double bit_rate_hz = 0.0;           ///< the bit rate the chain ran at
    std::string bit_rate_from;          ///< "--bit-rate", "paq:bit_rate_hz" or "receiver.bit_rate_hz"
    std::string pattern;                ///< the PN pattern the bits were counted against ("pn15")
    std::string pattern_from;           ///< "--pattern", "paq:pattern" or "default"
    bool resampled = false;             ///< the input was resampled to 2 samples per bit
    std::uint64_t trailing_bytes = 0;   ///< truncated file: bytes after the last whole sample
    std::string file;
    std::string backend;
    std::size_t workers = 1;            ///< backends the batches went to (one per GPU)
    std::string input_width;            ///< "ci16" (kept up to the backend) or "cf32"
    std::string detector = "sxs";       ///< receiver.detector: "sxs" or "trellis"
    dsp::fec_code fec = dsp::fec_code::none;  ///< the code decoded (none: no decoding)
    std::string fec_from;               ///< "--fec", "paq:fec" or "receiver.fec"
    std::vector<std::string> warnings;  ///< also in the JSON
    /// UTC of the run's first packet's first sample (ns since 1970), from the recording's
    /// core:datetime; unknown_utc_ns when it has none (raw files) or no packet was found.
    std::int64_t first_packet_utc_ns = dsp::unknown_utc_ns;
    bool has_time = false;  ///< the recording carries absolute time (a core:datetime)
    bool records_on = false;            ///< --records given
    std::uint64_t record_rows = 0;      ///< rows written to the records (0: none)
    std::uint64_t record_rows_lost = 0; ///< rows that could not be written (disk full)
    std::vector<std::string> llr_files; ///< --llr-out's files (empty: none)
    std::uint64_t llr_packets = 0;      ///< packets written to each of them
    /// Wall clock of the whole replay, opening the file and making the backend included; not
    /// the CUDA module's load before it (program_s has that).
    double elapsed_s = 0.0;
    /// Seconds since the paqd process started, when elapsed_s was taken: elapsed_s plus the
    /// program's start, the options' parsing and the CUDA module's load. 0 where the process's
    /// start time cannot be read (/proc).
    double program_s = 0.0;
    /// Seconds of recording per second of wall clock (recording duration / elapsed_s).
    double realtime_factor = 0.0;
    /// From the start until the backend was made (opening the file and making the backend;
    /// the run reads its first windows meanwhile: timing.pool_wait_s is what it waited).
    double setup_s = 0.0;
    double backend_s = 0.0;             ///< of setup_s, making the backend (CUDA: context, plans, buffers)
    /// --stage-timing: the backend's stage times summed over the batches after each worker's
    /// first (batches: how many), and over those first batches apart (they pay what a backend
    /// does once); both set, or neither.
    std::optional<dsp::stage_times> stages, stages_first;
};

[[nodiscard]] replay_result run_replay(const replay_options& opt);

void print_table(const replay_result& r, std::ostream& os);
[[nodiscard]] nlohmann::json to_json(const replay_result& r);

}  // namespace paq::daemon
