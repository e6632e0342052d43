// The log section of the configuration (log.level, log.destination): its values and their
// names, for the configuration and for the logger that daemon/logging.hpp makes from them.
#pragma once

#include "dsp/names.hpp"

#include <cstdint>
#include <string_view>

namespace paq::config {

enum class log_destination : std::uint8_t { automatic, console, journal };
inline constexpr name_table<log_destination, 3> log_destination_names{
    {{"auto", log_destination::automatic}, {"console", log_destination::console}, {"journal", log_destination::journal}}};

/// The log's levels, spdlog's (daemon/logging.hpp maps them); "warning" and "err" are aliases.
enum class log_level : std::uint8_t { trace, debug, info, warn, error, critical, off };
inline constexpr name_table<log_level, 9> log_level_names{{{"trace", log_level::trace},
                                                           {"debug", log_level::debug},
                                                           {"info", log_level::info},
                                                           {"warn", log_level::warn},
                                                           {"warning", log_level::warn},
                                                           {"error", log_level::error},
                                                           {"err", log_level::error},
                                                           {"critical", log_level::critical},
                                                           {"off", log_level::off}}};

struct log_config {
    log_level level = log_level::info;
    /// auto: the journal when started by systemd (JOURNAL_STREAM set), stderr otherwise.
    log_destination destination = log_destination::automatic;
};

[[nodiscard]] constexpr std::string_view to_string(log_destination d) noexcept { return name_of(log_destination_names, d); }
[[nodiscard]] constexpr std::string_view to_string(log_level l) noexcept { return name_of(log_level_names, l); }

}  // namespace paq::config
