// The senders a network source accepts: addresses and CIDR prefixes, IPv4 and IPv6 (the
// `allow` key of the TCP, UDP and VITA-49 sources). Refusals are counted by each source.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace paq::io {

/// One allow-list entry: an address and the number of leading bits that must match, both
/// in IPv6 form. An IPv4 entry a.b.c.d/n is stored as ::ffff:a.b.c.d/(96 + n), so that it
/// matches an IPv4 sender whether the socket sees it as IPv4 or, on a dual-stack socket bound
/// to "::", as the IPv4-mapped IPv6 address ::ffff:a.b.c.d.
struct address_prefix {
    std::array<std::uint8_t, 16> address{};
    unsigned prefix_bits = 128;  ///< 0 .. 128
};

/// Parses "192.168.10.0/24", "10.0.0.5" (one host: /32), "fd00::/8", "::1" (/128). Returns ""
/// and sets `out`, or a message saying what is wrong with `text` and what is allowed. Bits
/// set after the prefix ("192.168.10.5/24") are an error: they usually mean a typo (/32?).
[[nodiscard]] std::string parse_address_prefix(std::string_view text, address_prefix& out);

/// "" for a good entry, else "'<text>' <what is wrong> (allowed: <the forms>)".
[[nodiscard]] std::string allow_entry_error(std::string_view text);

/// Messages, one per bad entry, "<field>[i] = " + allow_entry_error(entry).
[[nodiscard]] std::vector<std::string> check_allow_list(const std::vector<std::string>& entries,
                                                        std::string_view field = "allow");

/// Whether `text` is a numeric IPv4 or IPv6 address (what every bind address must be: a name
/// would be resolved at start, or fail there).
[[nodiscard]] bool is_numeric_address(const std::string& text) noexcept;

/// The senders a network source accepts: any address matching one of the prefixes. An empty
/// list accepts every sender.
class sender_allow_list {
public:
    sender_allow_list() = default;
    /// Throws std::invalid_argument listing check_allow_list's messages.
    explicit sender_allow_list(const std::vector<std::string>& entries, std::string_view field = "allow");

    [[nodiscard]] bool empty() const noexcept { return prefixes_.empty(); }
    /// `address`: the sender's 16-byte IPv6 address (an IPv4 sender as IPv4-mapped).
    [[nodiscard]] bool allows(const std::array<std::uint8_t, 16>& address) const noexcept;
    /// A numeric IPv4 or IPv6 address; false when it is not one (and the list is not empty).
    [[nodiscard]] bool allows(std::string_view numeric_address) const;

private:
    std::vector<address_prefix> prefixes_;
};

}  // namespace paq::io
