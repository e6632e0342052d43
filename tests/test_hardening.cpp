// Regression tests against hostile input for the daemon's outward-facing parts: the metrics endpoint
// (HEAD per RFC 9110, idle connections, the connection cap, EMFILE back-off) and the records
// writer on a full disk. Each test starts from the input that first showed the fault.
#include "daemon/metrics_http.hpp"
#include "daemon/records.hpp"

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace paq;
using namespace std::chrono_literals;

namespace {

struct temp_dir {
    std::filesystem::path path;
    temp_dir()
        : path(std::filesystem::temp_directory_path() /
               ("paq-hardening-" + std::to_string(::getpid()) + "-" + std::to_string(counter()++)))
    {
        std::filesystem::create_directories(path);
    }
    ~temp_dir() { std::filesystem::remove_all(path); }
    static std::atomic<int>& counter()
    {
        static std::atomic<int> c{0};
        return c;
    }
};

/// A connected TCP client socket to 127.0.0.1:port (-1 on failure).
int connect_to(std::uint16_t port)
{
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0) {
        ::close(fd);
        return -1;
    }
    return fd;
}

/// Everything the server sends until it closes, or what came within `limit`.
std::string read_all(int fd, std::chrono::milliseconds limit = 5000ms)
{
    std::string out;
    const auto deadline = std::chrono::steady_clock::now() + limit;
    char buf[4096];
    for (;;) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        if (left <= 0ms) break;
        pollfd p{fd, POLLIN, 0};
        if (::poll(&p, 1, static_cast<int>(left.count())) != 1) break;
        const ssize_t got = ::read(fd, buf, sizeof buf);
        if (got <= 0) break;
        out.append(buf, static_cast<std::size_t>(got));
    }
    return out;
}

/// Sends one request and returns the whole response (the server closes after it).
std::string request(std::uint16_t port, const std::string& method, const std::string& target)
{
    const int fd = connect_to(port);
    if (fd < 0) return "(connect failed)";
    const std::string rq = method + " " + target + " HTTP/1.1\r\nHost: localhost\r\n\r\n";
    if (::write(fd, rq.data(), rq.size()) != static_cast<ssize_t>(rq.size())) {
        ::close(fd);
        return "(write failed)";
    }
    std::string response = read_all(fd);
    ::close(fd);
    return response;
}

/// Splits a response into its head (through the blank line) and body.
std::pair<std::string, std::string> split_response(const std::string& r)
{
    const auto end = r.find("\r\n\r\n");
    if (end == std::string::npos) return {r, {}};
    return {r.substr(0, end + 4), r.substr(end + 4)};
}

std::size_t content_length(const std::string& head)
{
    const auto at = head.find("Content-Length: ");
    if (at == std::string::npos) return static_cast<std::size_t>(-1);
    return std::stoul(head.substr(at + 16));
}

daemon::metrics_config any_port()
{
    daemon::metrics_config cfg;
    cfg.port = 0;
    return cfg;
}

std::string some_metrics() { return "# TYPE paqd_up gauge\npaqd_up 1\n"; }

}  // namespace

// ---------------------------------------------------------------------------------------------
// Metrics endpoint

TEST(metrics_hardening, head_responses_have_no_body_for_any_status)
{
    // The reproducer: HEAD of an unknown path answered 404 with a body.
    daemon::metrics_server server(any_port(), some_metrics);
    for (const std::string target : {"/", "/unknown", "/metrics", "/metrics?x=1"}) {
        const auto [get_head, get_body] = split_response(request(server.port(), "GET", target));
        const auto [head_head, head_body] = split_response(request(server.port(), "HEAD", target));
        const std::string status = target.starts_with("/metrics") ? "HTTP/1.1 200 OK\r\n" : "HTTP/1.1 404 Not Found\r\n";
        EXPECT_TRUE(get_head.starts_with(status)) << get_head;
        EXPECT_TRUE(head_head.starts_with(status)) << head_head;
        EXPECT_FALSE(get_body.empty()) << target;
        EXPECT_EQ(head_body, "") << "HEAD " << target << " carried a body";
        // The same Content-Length the GET has (RFC 9110 §9.3.2), which is the GET's body size.
        EXPECT_EQ(content_length(head_head), get_body.size()) << head_head;
        EXPECT_EQ(content_length(get_head), get_body.size()) << get_head;
    }
    const auto [post_head, post_body] = split_response(request(server.port(), "POST", "/metrics"));
    EXPECT_TRUE(post_head.starts_with("HTTP/1.1 405 Method Not Allowed\r\n")) << post_head;
    EXPECT_NE(post_head.find("Allow: GET, HEAD\r\n"), std::string::npos);
    EXPECT_EQ(content_length(post_head), 0u);
    EXPECT_EQ(post_body, "");
}

TEST(metrics_hardening, idle_connections_are_closed_after_the_timeout_and_the_endpoint_still_answers)
{
    // The reproducer: idle connections were never closed. 200 of them, 64 slots.
    daemon::metrics_limits limits;
    limits.request_timeout = 300ms;
    limits.max_connections = 64;
    daemon::metrics_server server(any_port(), some_metrics, limits);
    std::vector<int> idle;
    for (int k = 0; k < 200; ++k) {
        const int fd = connect_to(server.port());
        ASSERT_GE(fd, 0) << "connection " << k;
        idle.push_back(fd);
    }
    // While they are held, a scrape is answered at once: it evicts the oldest idle one.
    const auto t0 = std::chrono::steady_clock::now();
    const auto [head, body] = split_response(request(server.port(), "GET", "/metrics"));
    EXPECT_TRUE(head.starts_with("HTTP/1.1 200 OK\r\n")) << head;
    EXPECT_EQ(body, some_metrics());
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 250ms) << "the scrape waited for the idle connections";
    EXPECT_LE(server.open_connections(), limits.max_connections);

    // Every idle connection is closed by the server (EOF, nothing sent) within the timeout
    // after it was accepted; all 200 are accepted within a few timeouts.
    for (const int fd : idle) {
        EXPECT_EQ(read_all(fd, 3000ms), "");
        pollfd p{fd, POLLIN, 0};
        EXPECT_EQ(::poll(&p, 1, 0), 1) << "still open";
        ::close(fd);
    }
    EXPECT_EQ(server.timeouts() + server.connections_refused(), 200u)
        << "timeouts " << server.timeouts() << ", evicted " << server.connections_refused();
    EXPECT_GE(server.timeouts(), 1u);
    for (int k = 0; k < 50 && server.open_connections() != 0; ++k) std::this_thread::sleep_for(10ms);
    EXPECT_EQ(server.open_connections(), 0u);
    EXPECT_TRUE(request(server.port(), "GET", "/metrics").starts_with("HTTP/1.1 200 OK\r\n"));

    // A client that sends half a request and stalls is closed the same way.
    const int slow = connect_to(server.port());
    ASSERT_EQ(::write(slow, "GET /metr", 9), 9);
    EXPECT_EQ(read_all(slow, 3000ms), "");
    ::close(slow);
}

TEST(metrics_hardening, out_of_descriptors_the_accept_loop_backs_off_and_recovers)
{
    // The reproducer: at the descriptor limit accept() failed 23,404 times in 8 s. The server
    // runs in a child whose RLIMIT_NOFILE leaves room for 3 connections; the parent is the
    // client with 20 idle connections.
    int report[2], done[2];
    ASSERT_EQ(::pipe(report), 0);
    ASSERT_EQ(::pipe(done), 0);
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        ::close(report[0]);
        ::close(done[1]);
        std::ostringstream log;
        auto logger = std::make_shared<spdlog::logger>("t", std::make_shared<spdlog::sinks::ostream_sink_mt>(log));
        spdlog::set_default_logger(logger);
        daemon::metrics_limits limits;
        limits.request_timeout = 1000ms;
        limits.accept_backoff = 100ms;
        std::string result;
        {
            daemon::metrics_server server(any_port(), some_metrics, limits);
            int highest = 0;
            for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
                highest = std::max(highest, std::stoi(e.path().filename().string()));
            }
            const rlimit nofile{static_cast<rlim_t>(highest + 1 + 3), static_cast<rlim_t>(highest + 1 + 3)};
            // The limit caps descriptor numbers, not their count: fill the holes below the
            // highest open one, so that exactly 3 numbers are left for connections.
            for (int fd = ::dup(0); fd >= 0; fd = ::dup(0)) {
                if (fd > highest) {
                    ::close(fd);
                    break;
                }
            }
            ::setrlimit(RLIMIT_NOFILE, &nofile);
            const std::uint16_t port = server.port();
            (void)!::write(report[1], &port, sizeof port);
            char c = 0;
            (void)!::read(done[0], &c, 1);  // the parent has finished
            result = std::to_string(server.accept_failures()) + " " + std::to_string(server.requests());
        }
        // The server's thread has ended: the log is no longer written.
        std::size_t log_lines = 0;
        const std::string text = log.str();
        for (auto at = text.find("accept failed"); at != std::string::npos; at = text.find("accept failed", at + 1)) {
            ++log_lines;
        }
        result += " " + std::to_string(log_lines);
        (void)!::write(report[1], result.data(), result.size());
        ::_exit(0);
    }
    ::close(report[1]);
    ::close(done[0]);
    std::uint16_t port = 0;
    ASSERT_EQ(::read(report[0], &port, sizeof port), static_cast<ssize_t>(sizeof port));

    const auto t0 = std::chrono::steady_clock::now();
    std::vector<int> idle;
    for (int k = 0; k < 20; ++k) {
        const int fd = connect_to(port);  // completes in the kernel's backlog even when accept() cannot
        if (fd >= 0) idle.push_back(fd);
    }
    EXPECT_EQ(idle.size(), 20u);
    std::this_thread::sleep_for(1500ms);
    // Each failed accept() evicts the oldest idle connection and the next one from the
    // backlog takes its descriptor, one per back-off; a scrape is answered when its turn comes.
    const std::string answer = request(port, "GET", "/metrics");
    const double elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (const int fd : idle) ::close(fd);
    EXPECT_TRUE(answer.starts_with("HTTP/1.1 200 OK\r\n")) << answer.substr(0, 100);
    (void)!::write(done[1], "x", 1);
    const std::string result = read_all(report[0], 10000ms);
    int status = 0;
    ::waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
    std::istringstream in(result);
    std::uint64_t failures = 0, log_lines = 0, requests = 0;
    in >> failures >> requests >> log_lines;
    EXPECT_GE(failures, 1u) << "EMFILE was not provoked: " << result;
    // One failed accept per back-off while out of descriptors, not a spin.
    EXPECT_LE(static_cast<double>(failures), elapsed_s / 0.1 + 5) << "in " << elapsed_s << " s";
    EXPECT_EQ(log_lines, 1u) << "logged once per 10 s";
    EXPECT_EQ(requests, 1u);
}

TEST(metrics_hardening, with_every_descriptor_taken_elsewhere_accept_is_retried_per_back_off_not_spun)
{
    // The reproducer's spin: out of descriptors with none of the endpoint's own to free,
    // accept() failed 23,404 times in 8 s. The child takes every descriptor it may have for
    // one second while the parent's scrape waits in the backlog, then gives them back.
    int report[2], go[2];
    ASSERT_EQ(::pipe(report), 0);
    ASSERT_EQ(::pipe(go), 0);
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        ::close(report[0]);
        ::close(go[1]);
        std::ostringstream log;
        spdlog::set_default_logger(
            std::make_shared<spdlog::logger>("t", std::make_shared<spdlog::sinks::ostream_sink_mt>(log)));
        std::string result;
        {
            daemon::metrics_server server(any_port(), some_metrics);  // the defaults: 100 ms back-off
            std::vector<int> taken;
            for (int fd = ::dup(0); fd >= 0; fd = ::dup(0)) taken.push_back(fd);
            const std::uint16_t port = server.port();
            (void)!::write(report[1], &port, sizeof port);
            char c = 0;
            (void)!::read(go[0], &c, 1);  // the parent's connection is in the backlog
            const auto failures_before = server.accept_failures();
            std::this_thread::sleep_for(1000ms);
            const auto failures = server.accept_failures() - failures_before;
            for (const int fd : taken) ::close(fd);
            for (int k = 0; k < 100 && server.requests() == 0; ++k) std::this_thread::sleep_for(20ms);
            result = std::to_string(failures) + " " + std::to_string(server.requests());
        }
        // The server's thread has ended: the log is no longer written.
        std::size_t log_lines = 0;
        const std::string text = log.str();
        for (auto at = text.find("accept failed"); at != std::string::npos; at = text.find("accept failed", at + 1)) {
            ++log_lines;
        }
        result += " " + std::to_string(log_lines);
        (void)!::write(report[1], result.data(), result.size());
        ::_exit(0);
    }
    ::close(report[1]);
    ::close(go[0]);
    std::uint16_t port = 0;
    ASSERT_EQ(::read(report[0], &port, sizeof port), static_cast<ssize_t>(sizeof port));
    const int fd = connect_to(port);
    ASSERT_GE(fd, 0);
    const std::string rq = "GET /metrics HTTP/1.1\r\n\r\n";
    ASSERT_EQ(::write(fd, rq.data(), rq.size()), static_cast<ssize_t>(rq.size()));
    (void)!::write(go[1], "x", 1);
    const std::string answer = read_all(fd, 5000ms);
    ::close(fd);
    EXPECT_TRUE(answer.starts_with("HTTP/1.1 200 OK\r\n")) << answer.substr(0, 100);
    const std::string result = read_all(report[0], 10000ms);
    int status = 0;
    ::waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
    std::istringstream in(result);
    std::uint64_t failures = 0, log_lines = 0, requests = 0;
    in >> failures >> requests >> log_lines;
    EXPECT_EQ(requests, 1u) << result;
    EXPECT_GE(failures, 5u) << result;
    EXPECT_LE(failures, 15u) << "about one failed accept() per 100 ms back-off over 1 s: " << result;
    EXPECT_EQ(log_lines, 1u) << "one log line per 10 s: " << result;
}

// ---------------------------------------------------------------------------------------------
// Records on a full disk

namespace {

dsp::batch_output batch_of(std::uint64_t index, std::size_t packets, std::uint64_t first_sample)
{
    dsp::batch_output out;
    out.batch_index = index;
    out.packets.resize(packets);
    for (std::size_t i = 0; i < packets; ++i) {
        out.packets[i].start_sample = first_sample + i * 13'000;
        out.packets[i].h[12] = 1.0;
    }
    return out;
}

std::size_t lines_in(const std::filesystem::path& p)
{
    std::ifstream f(p);
    std::size_t n = 0;
    for (std::string line; std::getline(f, line);) ++n;
    return n;
}

}  // namespace

TEST(records_hardening, rows_on_a_full_disk_are_counted_as_lost_not_written)
{
    // The reproducer: on a full disk the writer reported 158 rows written while its CSVs
    // were 0 bytes. /dev/full fails every write with ENOSPC.
    temp_dir dir;
    daemon::records_config cfg;
    cfg.base = dir.path / "full";
    cfg.decimation = 1;
    cfg.channel_decimation = 1;
    std::filesystem::create_symlink("/dev/full", dir.path / "full-packets.csv");
    std::filesystem::create_symlink("/dev/full", dir.path / "full-channel.csv");
    daemon::records_writer w(cfg, std::nullopt, 20.625e6);
    for (std::uint64_t b = 0; b < 3; ++b) w.add(batch_of(b, 53, b * 1'000'000));
    EXPECT_EQ(w.packets(), 159u);
    EXPECT_EQ(w.rows(), 0u);
    EXPECT_EQ(w.rows_lost(), 159u);
    EXPECT_EQ(w.channel_rows(), 0u);
    EXPECT_EQ(w.channel_rows_lost(), 159u);
    try {
        w.close();
        FAIL() << "close() reported no loss";
    } catch (const std::runtime_error& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find((dir.path / "full-packets.csv").string() + ": 159 of 159 rows lost (No space left on device)"),
                  std::string::npos)
            << what;
        EXPECT_NE(what.find("full-channel.csv: 159 of 159 rows lost"), std::string::npos) << what;
    }
}

TEST(records_hardening, counted_rows_are_in_the_file_after_every_batch)
{
    temp_dir dir;
    daemon::records_config cfg;
    cfg.base = dir.path / "ok";
    cfg.decimation = 2;
    cfg.channel_decimation = 5;
    // Packets to a full disk, channel estimates to a good one: each file counts for itself.
    std::filesystem::create_symlink("/dev/full", dir.path / "ok-packets.csv");
    {
        daemon::records_writer w(cfg, std::nullopt, 20.625e6);
        w.add(batch_of(0, 10, 0));
        EXPECT_EQ(w.rows(), 0u);
        EXPECT_EQ(w.rows_lost(), 5u);
        EXPECT_EQ(w.channel_rows(), 2u);
        EXPECT_EQ(lines_in(dir.path / "ok-channel.csv"), 1 + w.channel_rows());  // header + rows, not buffered
        EXPECT_THROW(w.close(), std::runtime_error);
    }
    std::filesystem::remove(dir.path / "ok-packets.csv");
    daemon::records_writer w(cfg, std::nullopt, 20.625e6);
    std::uint64_t expected_rows = 0;
    for (std::uint64_t b = 0; b < 4; ++b) {
        w.add(batch_of(b, 7, b * 100'000));
        expected_rows += (b % 2 == 0) ? 3 : 4;  // 7 packets, 2 per row, the odd one carried over
        EXPECT_EQ(w.rows(), expected_rows);
        EXPECT_EQ(lines_in(w.packets_path()), 1 + w.rows()) << "batch " << b;
    }
    EXPECT_EQ(w.rows_lost(), 0u);
    w.close();
    EXPECT_EQ(w.rows(), 14u);
    EXPECT_EQ(lines_in(w.packets_path()), 15u);
    EXPECT_EQ(lines_in(w.channel_path()), 1u + 6u);  // packets 0, 5, ..., 25
}
