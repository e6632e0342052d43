// Blocking loopback client sockets for the targets that drive a server or a source in-process
// (fuzz_metrics_http, fuzz_tcp_source, fuzz_udp_source): no public function of theirs turns
// bytes into a result without a socket, so the harness talks to them over 127.0.0.1.
#pragma once

#include "tests/fuzz/fuzz_support.hpp"

#include <arpa/inet.h>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>

namespace paq::fuzz {

/// How long a harness waits for the code under test before calling it hung.
inline constexpr std::chrono::seconds loopback_timeout{5};

/// Polls `done` until it holds or loopback_timeout passes; false on timeout.
template <class Pred>
[[nodiscard]] bool wait_for(Pred done)
{
    const auto deadline = std::chrono::steady_clock::now() + loopback_timeout;
    while (!done()) {
        if (std::chrono::steady_clock::now() > deadline) return false;
        std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
    return true;
}

class socket_fd {
public:
    explicit socket_fd(int type)
        : fd_(::socket(AF_INET, type, 0))
    {
        PAQ_FUZZ_CHECK(fd_ >= 0, std::string("socket: ") + std::strerror(errno));
        const timeval tv{static_cast<time_t>(loopback_timeout.count()), 0};
        ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    }
    ~socket_fd()
    {
        if (fd_ >= 0) ::close(fd_);
    }
    socket_fd(const socket_fd&) = delete;
    socket_fd& operator=(const socket_fd&) = delete;
    [[nodiscard]] int get() const noexcept { return fd_; }

    /// Connects (TCP) or sets the default destination (UDP) to 127.0.0.1:port.
    void connect_loopback(std::uint16_t port)
    {
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(port);
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        int rc = ::connect(fd_, reinterpret_cast<const sockaddr*>(&a), sizeof a);
        if (rc != 0 && errno == EINTR) {
            // Interrupted (libFuzzer's timers): the connection goes on; wait for it and take
            // its result instead of failing the input (a campaign hit this).
            pollfd p{fd_, POLLOUT, 0};
            while (::poll(&p, 1, 5000) < 0 && errno == EINTR) {
            }
            int err = 0;
            socklen_t len = sizeof err;
            ::getsockopt(fd_, SOL_SOCKET, SO_ERROR, &err, &len);
            rc = err == 0 ? 0 : -1;
            errno = err;
        }
        PAQ_FUZZ_CHECK(rc == 0, "connect to 127.0.0.1:" + std::to_string(port) + ": " + std::strerror(errno));
    }

    /// Closes with a reset instead of a FIN: no TIME_WAIT entry per input, which would run the
    /// ephemeral ports out in a long campaign.
    void set_linger_reset()
    {
        const linger l{1, 0};
        ::setsockopt(fd_, SOL_SOCKET, SO_LINGER, &l, sizeof l);
    }

private:
    int fd_;
};

}  // namespace paq::fuzz
