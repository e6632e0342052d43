// Where paqd's log goes: the systemd journal when systemd runs it, stderr otherwise.
//
// Under systemd, stderr is already connected to the journal, but only as a byte stream: the
// native journal protocol (spdlog's systemd_sink, sd_journal_send) keeps each message's
// priority, so `journalctl -p warning -u paqd` works, and needs no timestamp of ours.
#pragma once

#include "config/log_config.hpp"

#include <spdlog/common.h>

#include <memory>
#include <string>
#include <string_view>

namespace spdlog {
class logger;
}

namespace paq::daemon {

/// The spdlog level of a configured one (config::log_level, whose names the configuration
/// and --log-level take: spdlog's own from_str() would turn a typo into "off", silencing the
/// log).
[[nodiscard]] spdlog::level::level_enum spdlog_level(config::log_level level) noexcept;

/// True when systemd connected stderr to the journal: JOURNAL_STREAM ("<dev>:<inode>") names
/// the file that fd 2 is. Comparing the inode, not only testing that the variable is set,
/// matters when paqd runs from a shell inside a service (`systemd-run --pty`, a script with
/// `2>file`): the variable is inherited but stderr goes elsewhere.
[[nodiscard]] bool stderr_is_journal();

/// automatic -> journal or console (see stderr_is_journal()); the others unchanged.
[[nodiscard]] config::log_destination resolve_log_destination(config::log_destination requested);

struct logger_options {
    /// Logger name; also the journal's SYSLOG_IDENTIFIER and the console prefix.
    std::string name = "paqd";
    config::log_destination destination = config::log_destination::automatic;
    /// Messages below this level are dropped.
    config::log_level level = config::log_level::info;
};

/// A new logger (not registered: pass it to spdlog::set_default_logger() to make it the
/// default). Console loggers flush on every warning and above.
[[nodiscard]] std::shared_ptr<spdlog::logger> make_logger(const logger_options& options);

}  // namespace paq::daemon
