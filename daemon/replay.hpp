// `paqd replay FILE`: the chain over a recording, with the side-by-side table per path.
#pragma once

#include "dsp/pn.hpp"
#include "dsp/receiver_config.hpp"
#include "dsp/receiver_run.hpp"
#include "io/sample_format.hpp"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace paq::daemon {

struct replay_options {
    std::filesystem::path file;
    std::optional<io::sample_format> raw_format;   ///< raw files only
    std::optional<double> raw_sample_rate_hz;      ///< raw files only
    dsp::pn_pattern pattern = dsp::pn_pattern::pn15;
    dsp::receiver_config receiver;
};

struct replay_result {
    dsp::run_summary summary;
    double sample_rate_hz = 0.0;
    std::uint64_t trailing_bytes = 0;   ///< truncated file: bytes after the last whole sample
    std::string file;
    std::vector<std::string> warnings;  ///< also in the JSON
};

/// Throws on unreadable input (the message names the file and what is wrong).
[[nodiscard]] replay_result run_replay(const replay_options& opt);

void print_table(const replay_result& r, std::ostream& os);
[[nodiscard]] nlohmann::json to_json(const replay_result& r);

}  // namespace paq::daemon
