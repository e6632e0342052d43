// Absolute time as text: ISO 8601 UTC with nanoseconds, the one form paqd writes (records'
// `time_utc`, SigMF core:datetime, JSON summaries) and reads (SigMF core:datetime, paq-report).
// Header-only so that tools without the io library (paq-report) share the same code.
//
//   2026-11-25T10:47:40.123456789Z   <->   1'795'603'660'123'456'789 ns since 1970-01-01T00:00:00Z
//
// POSIX time: leap seconds are not counted (a :60 second reads as the next minute's :00).
#pragma once

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>

namespace paq::io {

/// A UTC time not known (sentinel in int64 fields: records, datagram headers).
inline constexpr std::int64_t unknown_utc_ns = INT64_MIN;

/// Parses "YYYY-MM-DDTHH:MM:SS[.f...]Z" (0 to 9 fraction digits, 'T' or 't', the 'Z' required:
/// no other offset). Returns ns since the Unix epoch, or nullopt when the text is not such a
/// time (or lies outside 1678 .. 2261, where int64 ns end).
[[nodiscard]] inline std::optional<std::int64_t> parse_utc_ns(std::string_view t)
{
    // YYYY-MM-DDTHH:MM:SS = 19 characters, then an optional fraction, then Z.
    if (t.size() < 20 || t.back() != 'Z') return std::nullopt;
    const auto digits = [&](std::size_t at, std::size_t n, int& out) {
        out = 0;
        for (std::size_t i = at; i < at + n; ++i) {
            if (t[i] < '0' || t[i] > '9') return false;
            out = out * 10 + (t[i] - '0');
        }
        return true;
    };
    int y = 0, mo = 0, d = 0, h = 0, mi = 0, s = 0;
    if (!digits(0, 4, y) || t[4] != '-' || !digits(5, 2, mo) || t[7] != '-' || !digits(8, 2, d) ||
        (t[10] != 'T' && t[10] != 't') || !digits(11, 2, h) || t[13] != ':' || !digits(14, 2, mi) || t[16] != ':' ||
        !digits(17, 2, s)) {
        return std::nullopt;
    }
    if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || s > 60) return std::nullopt;
    if (y < 1678 || y > 2261) return std::nullopt;  // int64 ns since 1970 reach 1677-09 .. 2262-04
    {
        // The month's own length: 2026-02-31 is not a date (it is not read as 3 March).
        const bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
        constexpr int month_days[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
        if (d > month_days[mo - 1] + (mo == 2 && leap ? 1 : 0)) return std::nullopt;
    }
    std::int64_t frac_ns = 0;
    std::size_t i = 19;
    if (t[i] == '.') {
        ++i;
        std::int64_t scale = 100000000;
        const std::size_t first = i;
        while (i < t.size() - 1) {
            if (t[i] < '0' || t[i] > '9' || i - first >= 9) return std::nullopt;
            frac_ns += (t[i] - '0') * scale;
            scale /= 10;
            ++i;
        }
        if (i == first) return std::nullopt;
    }
    if (i != t.size() - 1) return std::nullopt;
    // Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's days_from_civil).
    const int yy = mo <= 2 ? y - 1 : y;
    const int era = (yy >= 0 ? yy : yy - 399) / 400;
    const int yoe = yy - era * 400;
    const int doy = (153 * (mo + (mo > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    const int doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    const std::int64_t days = static_cast<std::int64_t>(era) * 146097 + doe - 719468;
    return ((days * 24 + h) * 60 + mi) * 60 * 1'000'000'000LL + s * 1'000'000'000LL + frac_ns;
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (H. Hinnant's civil_from_days).
struct civil_date {
    std::int64_t year, month, day;
};
[[nodiscard]] inline civil_date civil_from_days(std::int64_t days) noexcept
{
    const std::int64_t z = days + 719468;
    const std::int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    const std::int64_t doe = z - era * 146097;
    const std::int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    const std::int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    const std::int64_t mp = (5 * doy + 2) / 153;
    const std::int64_t d = doy - (153 * mp + 2) / 5 + 1;
    const std::int64_t m = mp < 10 ? mp + 3 : mp - 9;
    return {yoe + era * 400 + (m <= 2 ? 1 : 0), m, d};
}

/// "YYYY-MM-DDTHH:MM:SS.fffffffffZ" (always 9 fraction digits) for ns since the Unix epoch;
/// empty for unknown_utc_ns.
[[nodiscard]] inline std::string format_utc_ns(std::int64_t utc_ns)
{
    if (utc_ns == unknown_utc_ns) return {};
    // Floor division: times before 1970 have a negative count but a positive fraction.
    std::int64_t secs = utc_ns / 1'000'000'000;
    std::int64_t frac = utc_ns % 1'000'000'000;
    if (frac < 0) {
        frac += 1'000'000'000;
        --secs;
    }
    std::int64_t days = secs / 86400;
    std::int64_t rem = secs % 86400;
    if (rem < 0) {
        rem += 86400;
        --days;
    }
    const auto [y, m, d] = civil_from_days(days);
    char buf[40];
    std::snprintf(buf, sizeof buf, "%04lld-%02lld-%02lldT%02lld:%02lld:%02lld.%09lldZ", static_cast<long long>(y),
                  static_cast<long long>(m), static_cast<long long>(d), static_cast<long long>(rem / 3600),
                  static_cast<long long>(rem / 60 % 60), static_cast<long long>(rem % 60), static_cast<long long>(frac));
    return buf;
}

}  // namespace paq::io
