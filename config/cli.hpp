// The command-line conventions every program of the project follows:
//   --version prints "<program> <version>" and exits 0;
//   --help ends with the program's exit codes and exits 0;
//   a usage error (unknown option, malformed or missing value, a value out of an option's
//   range) prints CLI11's message and exits 2, whatever CLI11's own code for it.
// Errors found after parsing (a setting the receiver cannot use, a file that cannot be read)
// keep each program's documented codes (docs/DAEMON.md, "Exit codes").
#pragma once

#include <CLI/CLI.hpp>

#include <cmath>
#include <string>

#ifndef PAQ_VERSION
#define PAQ_VERSION "unknown"
#endif

namespace paq::cli {

/// The project's version (CMake's project version).
inline constexpr const char* version = PAQ_VERSION;
/// Exit code of a usage error, in every program.
inline constexpr int usage_error = 2;

/// A number option's checks, with messages that say what is allowed: CLI11's own
/// PositiveNumber lets NaN through (NaN <= 0 is false) and its NonNegativeNumber prints the
/// largest double as the limit.
/// A finite number above zero (zero_allowed: at least zero).
inline CLI::Validator finite_number(bool zero_allowed)
{
    const std::string bound = zero_allowed ? ">= 0" : "> 0";
    return CLI::Validator(
        [zero_allowed, bound](std::string& s) -> std::string {
            double v = 0.0;
            const bool ok = CLI::detail::lexical_cast(s, v) && std::isfinite(v) && (zero_allowed ? v >= 0.0 : v > 0.0);
            return ok ? std::string() : "must be a finite number " + bound + ", got '" + s + "'";
        },
        "NUMBER " + bound);
}
inline CLI::Validator finite_positive() { return finite_number(false); }
inline CLI::Validator finite_non_negative() { return finite_number(true); }

/// --version and the exit codes in --help, as every program has them.
inline void conventions(CLI::App& app, const std::string& program, const std::string& exit_codes)
{
    app.set_version_flag("--version", program + " " + version);
    app.footer("Exit codes: " + exit_codes);
}

/// Parses the command line. Returns -1 to go on; otherwise the exit code: 0 after --help or
/// --version (printed), usage_error after a usage error (the message printed to stderr).
inline int parse(CLI::App& app, int argc, char** argv)
{
    try {
        app.parse(argc, argv);
        return -1;
    } catch (const CLI::Success& e) {  // --help, --help-all, --version
        return app.exit(e);
    } catch (const CLI::ParseError& e) {
        (void)app.exit(e);
        return usage_error;
    }
}

}  // namespace paq::cli
