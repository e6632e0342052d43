// The metrics endpoint (daemon/metrics_http.*): each input is the bytes a client sends on one
// connection to an in-process daemon::metrics_server on 127.0.0.1 (there is no request
// parser to call without a socket). The client sends them, ends its side, and reads the
// answer until the server closes.
//
// Checked, besides the sanitizers: the server answers or closes within 5 s; a request whose
// header block ends (CRLF CRLF) within the first 16 KiB gets one well-formed HTTP/1.1
// response whose Content-Length matches its body, with no body for HEAD (RFC 9110 9.3.2),
// and for 200 the rendered metrics.
#include "daemon/metrics_http.hpp"
#include "tests/fuzz/fuzz_support.hpp"
#include "tests/fuzz/loopback.hpp"

#include <spdlog/spdlog.h>

#include <memory>
#include <string>
#include <string_view>

using namespace paq;
using paq::fuzz::socket_fd;

namespace {

const std::string metrics_text = "# HELP paqd_fuzz A metric.\n# TYPE paqd_fuzz gauge\npaqd_fuzz 1\n";

daemon::metrics_server& server()
{
    static const auto srv = [] {
        config::metrics_config cfg;
        cfg.bind = "127.0.0.1";
        cfg.port = 0;
        return std::make_unique<daemon::metrics_server>(cfg, [] { return metrics_text; });
    }();
    return *srv;
}

/// Sends everything (a server that closes early makes send fail: that is fine).
void send_all(int fd, std::string_view bytes)
{
    while (!bytes.empty()) {
        const ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
        if (n <= 0) return;
        bytes.remove_prefix(static_cast<std::size_t>(n));
    }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***)
{
    spdlog::set_level(spdlog::level::err);
    (void)server();
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    const std::string_view request(reinterpret_cast<const char*>(data), size);
    socket_fd client(SOCK_STREAM);
    client.connect_loopback(server().port());
    client.set_linger_reset();
    send_all(client.get(), request);
    ::shutdown(client.get(), SHUT_WR);

    std::string response;
    bool reset = false;
    char buf[4096];
    for (;;) {
        const ssize_t n = ::recv(client.get(), buf, sizeof buf, 0);
        if (n > 0) {
            response.append(buf, static_cast<std::size_t>(n));
            PAQ_FUZZ_CHECK(response.size() < (1u << 20), "response larger than 1 MiB");
            continue;
        }
        if (n == 0) break;
        PAQ_FUZZ_CHECK(errno != EAGAIN && errno != EWOULDBLOCK,
                       "no answer and no close within 5 s of the request's end (" + std::to_string(size) + " bytes)");
        reset = true;  // the server closed with unread request bytes: a reset may eat the answer
        break;
    }

    const std::size_t header_end = request.find("\r\n\r\n");
    const bool complete = header_end != std::string_view::npos && header_end + 4 <= 16384;
    if (response.empty()) {
        PAQ_FUZZ_CHECK(!complete || reset, "a complete request got no answer");
        return 0;
    }
    // One response: status line, headers, body.
    PAQ_FUZZ_CHECK(response.rfind("HTTP/1.1 ", 0) == 0, "response does not start with HTTP/1.1: " + response.substr(0, 64));
    const std::size_t head_end = response.find("\r\n\r\n");
    PAQ_FUZZ_CHECK(head_end != std::string::npos, "response without the end of its header block");
    const std::string head = response.substr(0, head_end + 2);
    const std::string body = response.substr(head_end + 4);
    const int status = std::atoi(response.c_str() + 9);
    PAQ_FUZZ_CHECK(status >= 100 && status <= 599, "status line: " + head.substr(0, head.find('\r')));
    std::size_t content_length = 0;
    const std::size_t cl = head.find("\r\nContent-Length: ");
    PAQ_FUZZ_CHECK(cl != std::string::npos, "response without Content-Length");
    content_length = std::stoul(head.substr(cl + 18));
    // "HEAD /x": a HEAD request. With whitespace before the method a server may take it for
    // HEAD or refuse the request line, so either answer is allowed then.
    const bool head_request = request.rfind("HEAD ", 0) == 0;
    const std::size_t method_begin = request.find_first_not_of(" \t\r\n\v\f");
    const bool maybe_head = method_begin != std::string_view::npos && request.substr(method_begin).rfind("HEAD", 0) == 0;
    if (head_request) {
        PAQ_FUZZ_CHECK(body.empty(), "HEAD answered " + std::to_string(status) + " with a body of " +
                                         std::to_string(body.size()) + " bytes (RFC 9110 9.3.2: none)");
    } else if (maybe_head && body.empty()) {
        // taken as HEAD
    } else {
        PAQ_FUZZ_CHECK(body.size() == content_length, "body of " + std::to_string(body.size()) +
                                                          " bytes, Content-Length " + std::to_string(content_length));
        if (status == 200) PAQ_FUZZ_CHECK(body == metrics_text, "200 without the rendered metrics");
    }
    return 0;
}
