#include "io/sender_allow_list.hpp"

#include "io/net_core.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>

namespace paq::io {

using namespace detail;

// ---- sender allow-lists --------------------------------------------------------------------

namespace {

constexpr const char* allowed_prefix_forms =
    "an IPv4 or IPv6 address such as 10.0.0.5 or ::1, or a CIDR prefix such as 192.168.10.0/24 "
    "(/0 .. /32) or fd00::/8 (/0 .. /128)";

[[nodiscard]] bool prefix_matches(const address_prefix& p, const std::array<std::uint8_t, 16>& a) noexcept
{
    const unsigned whole = p.prefix_bits / 8;
    const unsigned rest = p.prefix_bits % 8;
    if (std::memcmp(p.address.data(), a.data(), whole) != 0) return false;
    if (rest == 0) return true;
    const auto mask = static_cast<std::uint8_t>(0xffu << (8 - rest));
    return (p.address[whole] & mask) == (a[whole] & mask);
}

}  // namespace

std::string parse_address_prefix(std::string_view text, address_prefix& out)
{
    const std::size_t slash = text.find('/');
    const std::string addr_text(text.substr(0, slash));
    if (addr_text.find('%') != std::string::npos) return "has a zone index (%...), which an allow-list cannot use";
    error_code ec;
    const asio::ip::address addr = asio::ip::make_address(addr_text, ec);
    if (ec || addr_text.empty()) return "is not an IPv4 or IPv6 address or CIDR prefix";
    const unsigned max_bits = addr.is_v4() ? 32u : 128u;
    unsigned bits = max_bits;
    if (slash != std::string_view::npos) {
        const std::string_view len = text.substr(slash + 1);
        if (len.empty() || len.size() > 3 || !std::all_of(len.begin(), len.end(), [](char c) { return c >= '0' && c <= '9'; }))
            return "has no prefix length after '/' (a number, /0 .. /" + std::to_string(max_bits) + ")";
        bits = 0;
        for (const char c : len) bits = bits * 10 + static_cast<unsigned>(c - '0');
        if (bits > max_bits)
            return "has prefix length /" + std::to_string(bits) + ", more than an " + (addr.is_v4() ? "IPv4" : "IPv6") +
                   " address has (/0 .. /" + std::to_string(max_bits) + ")";
    }
    address_prefix p;
    p.address = v6_bytes(addr);
    p.prefix_bits = bits + (addr.is_v4() ? 96u : 0u);
    // Bits after the prefix: "192.168.10.5/24" is most likely a typo for /32 or .0/24.
    address_prefix host = p;
    host.prefix_bits = 128;
    address_prefix net = p;
    for (unsigned b = p.prefix_bits; b < 128; ++b) net.address[b / 8] &= static_cast<std::uint8_t>(~(0x80u >> (b % 8)));
    if (!prefix_matches(host, net.address)) {
        const auto v6 = asio::ip::make_address_v6(net.address);
        const std::string network = addr.is_v4() ? asio::ip::make_address_v4(asio::ip::v4_mapped, v6).to_string() : v6.to_string();
        return "has bits set after the /" + std::to_string(bits) + " prefix (the network is " + network + "/" +
               std::to_string(bits) + "; one host is " + addr_text + "/" + std::to_string(max_bits) + ")";
    }
    out = p;
    return {};
}

bool is_numeric_address(const std::string& text) noexcept
{
    error_code ec;
    (void)asio::ip::make_address(text, ec);
    return !ec;
}

std::string allow_entry_error(std::string_view text)
{
    address_prefix p;
    const std::string why = parse_address_prefix(text, p);
    if (why.empty()) return {};
    return "'" + std::string(text) + "' " + why + " (allowed: " + allowed_prefix_forms + ")";
}

std::vector<std::string> check_allow_list(const std::vector<std::string>& entries, std::string_view field)
{
    std::vector<std::string> errors;
    for (std::size_t i = 0; i < entries.size(); ++i) {
        if (auto e = allow_entry_error(entries[i]); !e.empty())
            errors.push_back(std::string(field) + "[" + std::to_string(i) + "] = " + e);
    }
    return errors;
}

sender_allow_list::sender_allow_list(const std::vector<std::string>& entries, std::string_view field)
{
    const auto errors = check_allow_list(entries, field);
    if (!errors.empty()) throw std::invalid_argument(invalid_config_message(std::string(field), errors));
    prefixes_.resize(entries.size());
    for (std::size_t i = 0; i < entries.size(); ++i) (void)parse_address_prefix(entries[i], prefixes_[i]);
}

bool sender_allow_list::allows(const std::array<std::uint8_t, 16>& address) const noexcept
{
    if (prefixes_.empty()) return true;
    return std::any_of(prefixes_.begin(), prefixes_.end(),
                       [&](const address_prefix& p) { return prefix_matches(p, address); });
}

bool sender_allow_list::allows(std::string_view numeric_address) const
{
    if (prefixes_.empty()) return true;
    error_code ec;
    const auto a = asio::ip::make_address(std::string(numeric_address), ec);
    return !ec && allows(v6_bytes(a));
}

}  // namespace paq::io
