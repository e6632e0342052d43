// YAML binding of dsp::receiver_config.
//
// The configuration file is one YAML document whose top level is a mapping. The receiver
// parameters live under `receiver:`; every other top-level section (daemon:, sources:, ...)
// is skipped here so that those sections can be added without touching this parser.
//
//   receiver:
//     cma_mu: 0.012
//     cma_iterations: 2
//
// Keys missing from the file keep the defaults of dsp::receiver_config. The parser is
// strict, because a misspelt or mistyped key that is silently dropped leaves the receiver
// running on a default nobody asked for: unknown keys under `receiver`, values of the wrong
// type (including quoted numbers and empty values) and out-of-range values are all errors,
// reported together, each as "<file>:<line>: receiver.<field> ...".
#pragma once

#include "dsp/receiver_config.hpp"

#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace paq::config {

/// Everything that makes a configuration unusable: an unreadable file, a YAML syntax error,
/// an unknown key, a value of the wrong type, a value out of range. what() holds all
/// messages, one per line; messages() has them separately.
class config_error : public std::runtime_error {
public:
    explicit config_error(std::vector<std::string> messages);

    /// One entry per problem, each starting with "<source>:" (and the 1-based line where
    /// one is known).
    [[nodiscard]] const std::vector<std::string>& messages() const noexcept { return *messages_; }

private:
    // Shared so that copying the exception cannot throw (std::exception's contract).
    std::shared_ptr<const std::vector<std::string>> messages_;
};

/// The text of a configuration file. Throws config_error naming the file when it is missing,
/// unreadable, a directory, a device or a socket (a regular file or a pipe, such as a FIFO or
/// /dev/stdin fed by one, is accepted), or larger than 1 MiB (detail::max_config_bytes; at
/// most that plus one byte is read). Shared by the loaders.
[[nodiscard]] std::string read_config_file(const std::filesystem::path& file);

/// Reads and parses `file` (see parse_receiver_config). Throws config_error naming the file
/// when it is missing, not a regular file or unreadable, and for everything parse rejects.
[[nodiscard]] dsp::receiver_config load_receiver_config(const std::filesystem::path& file);

/// Parses a configuration document. An empty document, or one without a `receiver:`
/// section, gives the defaults. Text over 1 MiB, nested deeper than 64 levels, with more than
/// 256 aliases or a cyclic one, or that yaml-cpp 0.7 would loop on (a stray ',') is refused
/// with config_error before yaml-cpp builds anything (see config/yaml_support.hpp). `source_name` prefixes every error message (the file name
/// when called from load_receiver_config). The result has passed receiver_config::validate();
/// otherwise config_error is thrown with every problem found.
[[nodiscard]] dsp::receiver_config parse_receiver_config(std::string_view yaml_text,
                                                         std::string_view source_name = "<string>");

/// The effective configuration as a YAML document with every field under `receiver:`.
/// Numbers are written in their shortest exact form, so
/// parse_receiver_config(to_yaml(c)) == c for every valid c.
[[nodiscard]] std::string to_yaml(const dsp::receiver_config& config);

}  // namespace paq::config
