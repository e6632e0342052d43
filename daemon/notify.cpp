#include "daemon/notify.hpp"

#include <spdlog/spdlog.h>
#include <systemd/sd-daemon.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <utility>

namespace paq::daemon {

service_notifier::service_notifier(std::shared_ptr<spdlog::logger> log) : log_(std::move(log)) {}

spdlog::logger& service_notifier::log() const
{
    return log_ ? *log_ : *spdlog::default_logger_raw();
}

bool service_notifier::enabled() const
{
    const char* socket = std::getenv("NOTIFY_SOCKET");
    return socket != nullptr && socket[0] != '\0';
}

bool service_notifier::send(const char* what, const std::string& message)
{
    if (!enabled()) {
        return false;
    }
    // unset_environment = 0: a later call (and the watchdog query) still needs NOTIFY_SOCKET.
    const int rc = sd_notify(0, message.c_str());
    if (rc > 0) {
        return true;
    }
    if (rc == 0) {
        return false;  // NOTIFY_SOCKET went away between enabled() and the call
    }
    log().warn("cannot notify the service manager ({}) through NOTIFY_SOCKET={}: {}", what,
               std::getenv("NOTIFY_SOCKET") ? std::getenv("NOTIFY_SOCKET") : "", std::strerror(-rc));
    return false;
}

bool service_notifier::ready()
{
    return send("READY=1", "READY=1");
}

bool service_notifier::status(std::string_view text)
{
    std::string message = "STATUS=";
    message += text;
    std::replace(message.begin(), message.end(), '\n', ' ');
    return send("STATUS", message);
}

bool service_notifier::watchdog()
{
    return send("WATCHDOG=1", "WATCHDOG=1");
}

bool service_notifier::stopping()
{
    return send("STOPPING=1", "STOPPING=1");
}

bool service_notifier::reloading()
{
    timespec now{};
    clock_gettime(CLOCK_MONOTONIC, &now);
    const auto usec = static_cast<long long>(now.tv_sec) * 1'000'000LL + now.tv_nsec / 1000;
    return send("RELOADING=1", "RELOADING=1\nMONOTONIC_USEC=" + std::to_string(usec));
}

std::optional<std::chrono::microseconds> service_notifier::watchdog_timeout() const
{
    std::uint64_t usec = 0;
    const int rc = sd_watchdog_enabled(0, &usec);
    if (rc > 0) {
        return std::chrono::microseconds(static_cast<std::chrono::microseconds::rep>(usec));
    }
    if (rc < 0) {
        const char* value = std::getenv("WATCHDOG_USEC");
        const char* pid = std::getenv("WATCHDOG_PID");
        log().warn("ignoring the watchdog settings WATCHDOG_USEC='{}' WATCHDOG_PID='{}': {}", value ? value : "",
                   pid ? pid : "", std::strerror(-rc));
    }
    return std::nullopt;
}

std::optional<std::chrono::microseconds> service_notifier::watchdog_ping_interval() const
{
    const auto timeout = watchdog_timeout();
    if (!timeout) {
        return std::nullopt;
    }
    return *timeout / 2;
}

}  // namespace paq::daemon
