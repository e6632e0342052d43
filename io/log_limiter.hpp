// Rate-limited logging for the receive path, where one bad or hostile sender could otherwise
// flood the journal: at most one message per interval, and the next one let through says how
// many were suppressed. Use one limiter per kind of message, so that a flood of one kind
// hides none of the others. Not thread-safe: each belongs to the thread that receives.
// spdlog is a private dependency of paq_io: include this from io/*.cpp only.
#pragma once

#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdint>
#include <utility>

namespace paq::io {

class log_limiter {
public:
    explicit log_limiter(std::chrono::steady_clock::duration interval = std::chrono::seconds(1)) noexcept
        : interval_(interval) {}

    template <class... Args>
    void info(spdlog::format_string_t<Args...> fmt, Args&&... args)
    {
        log(spdlog::level::info, fmt, std::forward<Args>(args)...);
    }
    template <class... Args>
    void warn(spdlog::format_string_t<Args...> fmt, Args&&... args)
    {
        log(spdlog::level::warn, fmt, std::forward<Args>(args)...);
    }
    template <class... Args>
    void error(spdlog::format_string_t<Args...> fmt, Args&&... args)
    {
        log(spdlog::level::err, fmt, std::forward<Args>(args)...);
    }
    template <class... Args>
    void log(spdlog::level::level_enum level, spdlog::format_string_t<Args...> fmt, Args&&... args)
    {
        const auto now = std::chrono::steady_clock::now();
        if (logged_ && now - last_ < interval_) {
            ++suppressed_;
            return;
        }
        logged_ = true;
        last_ = now;
        spdlog::log(level, fmt, std::forward<Args>(args)...);
        if (suppressed_ > 0) spdlog::log(level, "  ({} similar messages suppressed in the last interval)", suppressed_);
        suppressed_ = 0;
    }

private:
    std::chrono::steady_clock::duration interval_;
    std::chrono::steady_clock::time_point last_{};
    bool logged_ = false;
    std::uint64_t suppressed_ = 0;
};

}  // namespace paq::io
