// Telling systemd how paqd is doing: the sd_notify(3) protocol behind a small class.
//
//   start ... sources open, chain ready  --ready()-->     "active (running)"
//   every watchdog_ping_interval()       --watchdog()-->  WatchdogSec= is not hit
//   once a second                        --status(line)-> `systemctl status paqd` shows it
//   SIGTERM                              --stopping()-->  "deactivating"
//
// Every call is a no-op when paqd was not started by a service manager (NOTIFY_SOCKET
// unset), so the daemon calls them unconditionally. A message the manager does not get is
// logged as a warning, never thrown: losing a status line must not stop the receiver (a
// lost watchdog ping shows up as a watchdog restart, which is the manager's call to make).
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace spdlog {
class logger;
}

namespace paq::daemon {

class service_notifier {
public:
    /// `log` receives the warnings about failed notifications; nullptr: spdlog's default
    /// logger at the time of the call.
    explicit service_notifier(std::shared_ptr<spdlog::logger> log = nullptr);

    /// True when NOTIFY_SOCKET is set (read at each call, not cached, so tests and a
    /// re-exec see the current environment).
    [[nodiscard]] bool enabled() const;

    /// READY=1: start-up is complete (Type=notify leaves "activating" only on this).
    /// Each function returns true when the manager got the message; false when disabled or
    /// on failure (then a warning is logged). Callers may ignore the result.
    bool ready();
    /// STATUS=<text>: the one-line status shown by `systemctl status`. Newlines (which
    /// would start a new protocol field) are replaced by spaces.
    bool status(std::string_view text);
    /// WATCHDOG=1: keep-alive; send every watchdog_ping_interval() while healthy.
    bool watchdog();
    /// STOPPING=1: shutdown has begun.
    bool stopping();
    /// RELOADING=1 (with MONOTONIC_USEC, as systemd >= 253 wants for Type=notify-reload):
    /// the configuration is being reloaded; call ready() when done.
    bool reloading();

    /// The manager's watchdog timeout (WatchdogSec=) when WATCHDOG_USEC is set and
    /// WATCHDOG_PID is unset or this process; std::nullopt otherwise. An unparsable value
    /// is logged and treated as "no watchdog".
    [[nodiscard]] std::optional<std::chrono::microseconds> watchdog_timeout() const;
    /// Half the watchdog timeout (what sd_watchdog_enabled(3) recommends), so one late
    /// ping does not get paqd killed; std::nullopt when there is no watchdog.
    [[nodiscard]] std::optional<std::chrono::microseconds> watchdog_ping_interval() const;

private:
    bool send(const char* what, const std::string& message);
    [[nodiscard]] spdlog::logger& log() const;

    std::shared_ptr<spdlog::logger> log_;
};

}  // namespace paq::daemon
