// One table of names per enumeration, beside the enumeration: printing (to_string), parsing
// (the configuration, the command lines), the configuration schema's choices and the docs
// generated from it all read that table, so that each name is written once. The first name
// of a value is its own; later ones are aliases a parser also accepts ("cf32" for cf32_le).
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace paq {

template <class E>
struct named {
    std::string_view name;
    E value;
};

template <class E, std::size_t N>
using name_table = std::array<named<E>, N>;

/// The name of `value` (its first in the table); "?" for a value the table lacks.
template <class E, std::size_t N>
[[nodiscard]] constexpr std::string_view name_of(const name_table<E, N>& table, E value) noexcept
{
    for (const auto& n : table) {
        if (n.value == value) return n.name;
    }
    return "?";
}

/// The value `name` stands for (exact match, aliases included); nullopt for any other text.
template <class E, std::size_t N>
[[nodiscard]] constexpr std::optional<E> value_named(const name_table<E, N>& table, std::string_view name) noexcept
{
    for (const auto& n : table) {
        if (n.name == name) return n.value;
    }
    return std::nullopt;
}

/// Every name, aliases included, in table order: for a command line's check
/// (CLI::IsMember) or a schema's choices.
template <class E, std::size_t N>
[[nodiscard]] std::vector<std::string> names_in(const name_table<E, N>& table)
{
    std::vector<std::string> out;
    for (const auto& n : table) out.emplace_back(n.name);
    return out;
}

/// "a, b, c": every name, for messages.
template <class E, std::size_t N>
[[nodiscard]] std::string names_text(const name_table<E, N>& table)
{
    std::string out;
    for (const auto& n : table) out += (out.empty() ? "" : ", ") + std::string(n.name);
    return out;
}

/// The value named `name`, or std::invalid_argument "unknown <what> '<name>' (allowed: ...)".
template <class E, std::size_t N>
[[nodiscard]] E parse_named(const name_table<E, N>& table, std::string_view name, std::string_view what)
{
    if (const auto v = value_named(table, name)) return *v;
    throw std::invalid_argument("unknown " + std::string(what) + " '" + std::string(name) + "' (allowed: " +
                                names_text(table) + ")");
}

}  // namespace paq
