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

spdlog::level::level_enum spdlog_level(config::log_level level) noexcept
{
    using spdlog::level::level_enum;
    switch (level) {
    case config::log_level::trace: return level_enum::trace;
    case config::log_level::debug: return level_enum::debug;
    case config::log_level::info: return level_enum::info;
    case config::log_level::warn: return level_enum::warn;
    case config::log_level::error: return level_enum::err;
    case config::log_level::critical: return level_enum::critical;
    case config::log_level::off: return level_enum::off;
    }
    return level_enum::info;
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

config::log_destination resolve_log_destination(config::log_destination requested)
{
    if (requested != config::log_destination::automatic) {
        return requested;
    }
    return stderr_is_journal() ? config::log_destination::journal : config::log_destination::console;
}

std::shared_ptr<spdlog::logger> make_logger(const logger_options& options)
{
    std::shared_ptr<spdlog::logger> logger;
    if (resolve_log_destination(options.destination) == config::log_destination::journal) {
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
    logger->set_level(spdlog_level(options.level));
    return logger;
}

}  // namespace paq::daemon
