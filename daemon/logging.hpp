// Where paqd's log goes: the systemd journal when systemd runs it, stderr otherwise.
//
// Under systemd, stderr is already connected to the journal, but only as a byte stream: the
// native journal protocol (spdlog's systemd_sink, sd_journal_send) keeps each message's
// priority, so `journalctl -p warning -u paqd` works, and needs no timestamp of ours.
#pragma once

#include <spdlog/common.h>

#include <memory>
#include <string>
#include <string_view>

namespace spdlog {
class logger;
}

namespace paq::daemon {

/// Where make_logger() sends messages.
enum class log_target {
    automatic,  ///< journal when stderr_is_journal(), console otherwise
    journal,    ///< the systemd journal (native protocol), even when not started by systemd
    console,    ///< stderr, "paqd: <level>: <message>"
};

/// Accepts "auto", "journal", "stderr" (also "console"). Throws std::invalid_argument naming
/// the bad value and the accepted ones.
[[nodiscard]] log_target parse_log_target(std::string_view name);
[[nodiscard]] std::string_view to_string(log_target target) noexcept;

/// Accepts spdlog's names: "trace", "debug", "info", "warning" (or "warn"), "error" (or
/// "err"), "critical", "off". Throws std::invalid_argument naming the bad value and the
/// accepted ones (spdlog's own from_str() turns a typo into "off", silencing the log).
[[nodiscard]] spdlog::level::level_enum parse_log_level(std::string_view name);

/// True when systemd connected stderr to the journal: JOURNAL_STREAM ("<dev>:<inode>") names
/// the file that fd 2 is. Comparing the inode, not only testing that the variable is set,
/// matters when paqd runs from a shell inside a service (`systemd-run --pty`, a script with
/// `2>file`): the variable is inherited but stderr goes elsewhere.
[[nodiscard]] bool stderr_is_journal();

/// automatic -> journal or console (see stderr_is_journal()); the others unchanged.
[[nodiscard]] log_target resolve_log_target(log_target requested);

struct logger_options {
    /// Logger name; also the journal's SYSLOG_IDENTIFIER and the console prefix.
    std::string name = "paqd";
    log_target target = log_target::automatic;
    /// Messages below this level are dropped.
    spdlog::level::level_enum level = spdlog::level::info;
};

/// A new logger (not registered: pass it to spdlog::set_default_logger() to make it the
/// default). Console loggers flush on every warning and above.
[[nodiscard]] std::shared_ptr<spdlog::logger> make_logger(const logger_options& options);

}  // namespace paq::daemon
