// service_notifier against a real AF_UNIX datagram socket standing in for systemd's
// notification socket, and the logger factory's target selection.
#include "daemon/logging.hpp"
#include "daemon/notify.hpp"

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/sinks/systemd_sink.h>
#include <spdlog/spdlog.h>

#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <sstream>
#include <string>

namespace {

using paq::daemon::service_notifier;
namespace fs = std::filesystem;

/// Sets or unsets an environment variable for the test's lifetime, restoring the old value.
class scoped_env {
public:
    scoped_env(const char* name, std::optional<std::string> value) : name_(name)
    {
        if (const char* old = std::getenv(name)) old_ = old;
        if (value) {
            ::setenv(name, value->c_str(), 1);
        } else {
            ::unsetenv(name);
        }
    }
    ~scoped_env()
    {
        if (old_) {
            ::setenv(name_, old_->c_str(), 1);
        } else {
            ::unsetenv(name_);
        }
    }
    scoped_env(const scoped_env&) = delete;
    scoped_env& operator=(const scoped_env&) = delete;

private:
    const char* name_;
    std::optional<std::string> old_;
};

/// A bound AF_UNIX datagram socket in a fresh temporary directory: what systemd listens on.
class notify_socket {
public:
    notify_socket()
    {
        char tmpl[] = "/tmp/paq_notify_XXXXXX";
        const char* dir = ::mkdtemp(tmpl);
        if (dir == nullptr) throw std::runtime_error(std::string("mkdtemp: ") + std::strerror(errno));
        dir_ = dir;
        path_ = dir_ / "notify";
        fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd_ < 0) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
        sockaddr_un addr{};
        addr.sun_family = AF_UNIX;
        std::strncpy(addr.sun_path, path_.c_str(), sizeof(addr.sun_path) - 1);
        if (::bind(fd_, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
            throw std::runtime_error("bind " + path_.string() + ": " + std::strerror(errno));
        }
    }
    ~notify_socket()
    {
        ::close(fd_);
        std::error_code ec;
        fs::remove_all(dir_, ec);
    }
    notify_socket(const notify_socket&) = delete;
    notify_socket& operator=(const notify_socket&) = delete;

    [[nodiscard]] std::string path() const { return path_.string(); }

    /// The next datagram, or nullopt when none arrives within timeout_ms.
    [[nodiscard]] std::optional<std::string> receive(int timeout_ms = 1000) const
    {
        pollfd p{fd_, POLLIN, 0};
        if (::poll(&p, 1, timeout_ms) != 1) return std::nullopt;
        char buf[4096];
        const auto n = ::recv(fd_, buf, sizeof(buf), 0);
        if (n < 0) return std::nullopt;
        return std::string(buf, static_cast<std::size_t>(n));
    }

private:
    fs::path dir_;
    fs::path path_;
    int fd_ = -1;
};

/// A logger that writes into a string, to check what the notifier warns about.
struct captured_log {
    std::ostringstream text;
    std::shared_ptr<spdlog::logger> logger =
        std::make_shared<spdlog::logger>("test", std::make_shared<spdlog::sinks::ostream_sink_st>(text));
};

TEST(notify, sends_each_message_to_notify_socket)
{
    notify_socket sock;
    scoped_env env("NOTIFY_SOCKET", sock.path());
    captured_log log;
    service_notifier n(log.logger);
    ASSERT_TRUE(n.enabled());

    EXPECT_TRUE(n.ready());
    EXPECT_EQ(sock.receive(), "READY=1");
    EXPECT_TRUE(n.status("receiving: 20.6 MS/s, 3 packets/s"));
    EXPECT_EQ(sock.receive(), "STATUS=receiving: 20.6 MS/s, 3 packets/s");
    EXPECT_TRUE(n.watchdog());
    EXPECT_EQ(sock.receive(), "WATCHDOG=1");
    EXPECT_TRUE(n.stopping());
    EXPECT_EQ(sock.receive(), "STOPPING=1");
    EXPECT_EQ(log.text.str(), "");
}

TEST(notify, status_newlines_cannot_inject_fields)
{
    notify_socket sock;
    scoped_env env("NOTIFY_SOCKET", sock.path());
    service_notifier n;
    EXPECT_TRUE(n.status("line one\nREADY=1"));
    EXPECT_EQ(sock.receive(), "STATUS=line one READY=1");
}

TEST(notify, reloading_carries_monotonic_timestamp)
{
    notify_socket sock;
    scoped_env env("NOTIFY_SOCKET", sock.path());
    service_notifier n;
    EXPECT_TRUE(n.reloading());
    const auto msg = sock.receive();
    ASSERT_TRUE(msg);
    const std::string prefix = "RELOADING=1\nMONOTONIC_USEC=";
    ASSERT_EQ(msg->substr(0, prefix.size()), prefix);
    const std::string usec = msg->substr(prefix.size());
    ASSERT_FALSE(usec.empty());
    EXPECT_EQ(usec.find_first_not_of("0123456789"), std::string::npos) << usec;
    timespec now{};
    clock_gettime(CLOCK_MONOTONIC, &now);
    EXPECT_LE(std::stoll(usec), static_cast<long long>(now.tv_sec) * 1'000'000LL + now.tv_nsec / 1000);
    EXPECT_GT(std::stoll(usec), 0);
}

TEST(notify, unset_socket_is_a_silent_no_op)
{
    scoped_env env("NOTIFY_SOCKET", std::nullopt);
    captured_log log;
    service_notifier n(log.logger);
    EXPECT_FALSE(n.enabled());
    EXPECT_FALSE(n.ready());
    EXPECT_FALSE(n.status("x"));
    EXPECT_FALSE(n.watchdog());
    EXPECT_FALSE(n.stopping());
    EXPECT_FALSE(n.reloading());
    EXPECT_EQ(log.text.str(), "");
}

TEST(notify, unreachable_socket_is_logged_not_thrown)
{
    scoped_env env("NOTIFY_SOCKET", "/nonexistent-paq-dir/notify");
    captured_log log;
    service_notifier n(log.logger);
    EXPECT_TRUE(n.enabled());
    bool sent = true;
    EXPECT_NO_THROW(sent = n.ready());
    EXPECT_FALSE(sent);
    const std::string text = log.text.str();
    EXPECT_NE(text.find("READY=1"), std::string::npos) << text;
    EXPECT_NE(text.find("/nonexistent-paq-dir/notify"), std::string::npos) << text;
    EXPECT_NE(text.find("No such file or directory"), std::string::npos) << text;
}

TEST(notify, watchdog_interval_is_half_of_watchdog_usec)
{
    scoped_env usec("WATCHDOG_USEC", "10000000");
    scoped_env pid("WATCHDOG_PID", std::to_string(::getpid()));
    service_notifier n;
    ASSERT_TRUE(n.watchdog_timeout());
    EXPECT_EQ(*n.watchdog_timeout(), std::chrono::seconds(10));
    ASSERT_TRUE(n.watchdog_ping_interval());
    EXPECT_EQ(*n.watchdog_ping_interval(), std::chrono::seconds(5));
}

TEST(notify, watchdog_without_pid_applies_to_this_process)
{
    scoped_env usec("WATCHDOG_USEC", "3000000");
    scoped_env pid("WATCHDOG_PID", std::nullopt);
    service_notifier n;
    ASSERT_TRUE(n.watchdog_ping_interval());
    EXPECT_EQ(*n.watchdog_ping_interval(), std::chrono::milliseconds(1500));
}

TEST(notify, watchdog_for_another_pid_is_not_ours)
{
    scoped_env usec("WATCHDOG_USEC", "10000000");
    scoped_env pid("WATCHDOG_PID", std::to_string(::getpid() + 1));
    service_notifier n;
    EXPECT_FALSE(n.watchdog_timeout());
    EXPECT_FALSE(n.watchdog_ping_interval());
}

TEST(notify, no_watchdog_usec_means_no_watchdog)
{
    scoped_env usec("WATCHDOG_USEC", std::nullopt);
    scoped_env pid("WATCHDOG_PID", std::nullopt);
    captured_log log;
    service_notifier n(log.logger);
    EXPECT_FALSE(n.watchdog_timeout());
    EXPECT_EQ(log.text.str(), "");
}

TEST(notify, bad_watchdog_usec_is_logged_and_ignored)
{
    scoped_env usec("WATCHDOG_USEC", "ten seconds");
    scoped_env pid("WATCHDOG_PID", std::nullopt);
    captured_log log;
    service_notifier n(log.logger);
    EXPECT_FALSE(n.watchdog_ping_interval());
    EXPECT_NE(log.text.str().find("WATCHDOG_USEC='ten seconds'"), std::string::npos) << log.text.str();
}

// --- logger factory ---

TEST(logging, the_configured_names_and_their_spdlog_levels)
{
    using paq::config::log_level;
    using paq::config::log_level_names;
    EXPECT_EQ(paq::value_named(log_level_names, "debug"), log_level::debug);
    EXPECT_EQ(paq::value_named(log_level_names, "warning"), log_level::warn);
    EXPECT_EQ(paq::value_named(log_level_names, "warn"), log_level::warn);
    EXPECT_EQ(paq::value_named(log_level_names, "err"), log_level::error);
    EXPECT_EQ(paq::config::to_string(log_level::error), "error");
    EXPECT_EQ(paq::daemon::spdlog_level(log_level::trace), spdlog::level::trace);
    EXPECT_EQ(paq::daemon::spdlog_level(log_level::debug), spdlog::level::debug);
    EXPECT_EQ(paq::daemon::spdlog_level(log_level::info), spdlog::level::info);
    EXPECT_EQ(paq::daemon::spdlog_level(log_level::warn), spdlog::level::warn);
    EXPECT_EQ(paq::daemon::spdlog_level(log_level::error), spdlog::level::err);
    EXPECT_EQ(paq::daemon::spdlog_level(log_level::critical), spdlog::level::critical);
    EXPECT_EQ(paq::daemon::spdlog_level(log_level::off), spdlog::level::off);
    using paq::config::log_destination;
    EXPECT_EQ(paq::value_named(paq::config::log_destination_names, "console"), log_destination::console);
    EXPECT_EQ(paq::config::to_string(log_destination::automatic), "auto");
}

TEST(logging, bad_names_are_rejected_with_the_accepted_list)
{
    try {
        (void)paq::parse_named(paq::config::log_level_names, "verbose", "log level");
        FAIL() << "no exception";
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("'verbose'"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("trace, debug, info"), std::string::npos) << e.what();
    }
}

std::string stderr_dev_ino()
{
    struct stat st {};
    if (::fstat(STDERR_FILENO, &st) != 0) return "";
    return std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino);
}

TEST(logging, journal_stream_must_name_stderr)
{
    const std::string mine = stderr_dev_ino();
    ASSERT_FALSE(mine.empty());
    {
        scoped_env env("JOURNAL_STREAM", mine);
        EXPECT_TRUE(paq::daemon::stderr_is_journal());
        EXPECT_EQ(paq::daemon::resolve_log_destination(paq::config::log_destination::automatic),
                  paq::config::log_destination::journal);
        // An explicit choice wins over the environment.
        EXPECT_EQ(paq::daemon::resolve_log_destination(paq::config::log_destination::console),
                  paq::config::log_destination::console);
    }
    {
        // Inherited from a service, but stderr was redirected since: not the journal.
        scoped_env env("JOURNAL_STREAM", mine + "1");
        EXPECT_FALSE(paq::daemon::stderr_is_journal());
    }
    {
        scoped_env env("JOURNAL_STREAM", "garbage");
        EXPECT_FALSE(paq::daemon::stderr_is_journal());
    }
    {
        scoped_env env("JOURNAL_STREAM", std::nullopt);
        EXPECT_FALSE(paq::daemon::stderr_is_journal());
        EXPECT_EQ(paq::daemon::resolve_log_destination(paq::config::log_destination::automatic),
                  paq::config::log_destination::console);
        EXPECT_EQ(paq::daemon::resolve_log_destination(paq::config::log_destination::journal),
                  paq::config::log_destination::journal);
    }
}

TEST(logging, factory_picks_sink_and_level)
{
    paq::daemon::logger_options opt;
    opt.name = "paqd-test";
    opt.level = paq::config::log_level::debug;
    {
        opt.destination = paq::config::log_destination::journal;
        const auto logger = paq::daemon::make_logger(opt);
        ASSERT_EQ(logger->sinks().size(), 1u);
        EXPECT_NE(dynamic_cast<spdlog::sinks::systemd_sink_mt*>(logger->sinks()[0].get()), nullptr);
        EXPECT_EQ(logger->level(), spdlog::level::debug);
        EXPECT_EQ(logger->name(), "paqd-test");
    }
    {
        scoped_env env("JOURNAL_STREAM", std::nullopt);
        opt.destination = paq::config::log_destination::automatic;
        opt.level = paq::config::log_level::warn;
        const auto logger = paq::daemon::make_logger(opt);
        ASSERT_EQ(logger->sinks().size(), 1u);
        EXPECT_NE(dynamic_cast<spdlog::sinks::stderr_sink_mt*>(logger->sinks()[0].get()), nullptr);
        EXPECT_EQ(logger->level(), spdlog::level::warn);
        EXPECT_FALSE(logger->should_log(spdlog::level::info));
    }
}

}  // namespace
