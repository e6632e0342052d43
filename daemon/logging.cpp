#include "daemon/logging.hpp"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/sinks/systemd_sink.h>
#include <spdlog/spdlog.h>

#include <sys/stat.h>
#include <unistd.h>

#include <charconv>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace paq::daemon {

log_target parse_log_target(std::string_view name)
{
    if (name == "auto") return log_target::automatic;
    if (name == "journal") return log_target::journal;
    if (name == "stderr" || name == "console") return log_target::console;
    throw std::invalid_argument("unknown log target '" + std::string(name) +
                                "' (accepted: auto, journal, stderr)");
}

std::string_view to_string(log_target target) noexcept
{
    switch (target) {
    case log_target::automatic: return "auto";
    case log_target::journal: return "journal";
    case log_target::console: return "stderr";
    }
    return "unknown";
}

spdlog::level::level_enum parse_log_level(std::string_view name)
{
    using spdlog::level::level_enum;
    if (name == "trace") return level_enum::trace;
    if (name == "debug") return level_enum::debug;
    if (name == "info") return level_enum::info;
    if (name == "warning" || name == "warn") return level_enum::warn;
    if (name == "error" || name == "err") return level_enum::err;
    if (name == "critical") return level_enum::critical;
    if (name == "off") return level_enum::off;
    throw std::invalid_argument("unknown log level '" + std::string(name) +
                                "' (accepted: trace, debug, info, warning, error, critical, off)");
}

bool stderr_is_journal()
{
    const char* value = std::getenv("JOURNAL_STREAM");
    if (value == nullptr) {
        return false;
    }
    const std::string_view text(value);
    const auto colon = text.find(':');
    if (colon == std::string_view::npos) {
        return false;
    }
    unsigned long long dev = 0;
    unsigned long long ino = 0;
    const auto dev_end = text.data() + colon;
    const auto ino_end = text.data() + text.size();
    if (std::from_chars(text.data(), dev_end, dev).ptr != dev_end ||
        std::from_chars(dev_end + 1, ino_end, ino).ptr != ino_end) {
        return false;
    }
    struct stat st {};
    if (fstat(STDERR_FILENO, &st) != 0) {
        return false;
    }
    return static_cast<unsigned long long>(st.st_dev) == dev && static_cast<unsigned long long>(st.st_ino) == ino;
}

log_target resolve_log_target(log_target requested)
{
    if (requested != log_target::automatic) {
        return requested;
    }
    return stderr_is_journal() ? log_target::journal : log_target::console;
}

std::shared_ptr<spdlog::logger> make_logger(const logger_options& options)
{
    std::shared_ptr<spdlog::logger> logger;
    if (resolve_log_target(options.target) == log_target::journal) {
        // enable_formatting = false: the journal stores priority, time and identifier as
        // fields; the message is the payload alone.
        auto sink = std::make_shared<spdlog::sinks::systemd_sink_mt>(options.name, false);
        logger = std::make_shared<spdlog::logger>(options.name, std::move(sink));
    } else {
        auto sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
        logger = std::make_shared<spdlog::logger>(options.name, std::move(sink));
        logger->set_pattern("%n: %l: %v");
        logger->flush_on(spdlog::level::warn);
    }
    logger->set_level(options.level);
    return logger;
}

}  // namespace paq::daemon
