// The YAML configuration: text through config::parse_receiver_config (byte 0 even) or
// config::parse_daemon_config (byte 0 odd), as the loaders parse a file's text.
//
// Checked, besides the sanitizers: the parsers throw nothing but config::config_error, each
// message non-empty; a configuration they accept is written by to_yaml into text that parses
// to the same configuration (to_yaml of both is equal).
#include "config/daemon_config.hpp"
#include "config/receiver_yaml.hpp"
#include "tests/fuzz/fuzz_support.hpp"

#include <string_view>

using namespace paq;

namespace {
void check_error(const config::config_error& e)
{
    PAQ_FUZZ_CHECK(!e.messages().empty(), "config_error without a message");
    for (const auto& m : e.messages()) PAQ_FUZZ_CHECK(!m.empty(), "config_error with an empty message");
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    if (size < 1) return 0;
    const bool daemon = (data[0] & 1) != 0;
    const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
    if (daemon) {
        config::daemon_config c;
        try {
            c = config::parse_daemon_config(text, "<fuzz>", "/nonexistent-fuzz-base");
        } catch (const config::config_error& e) {
            check_error(e);
            return 0;
        }
        const std::string yaml = config::to_yaml(c);
        try {
            const config::daemon_config again = config::parse_daemon_config(yaml, "<to_yaml>", "/nonexistent-fuzz-base");
            PAQ_FUZZ_CHECK(config::to_yaml(again) == yaml, "daemon config changed on the to_yaml round trip:\n" + yaml);
        } catch (const config::config_error& e) {
            PAQ_FUZZ_CHECK(false, std::string("to_yaml of an accepted daemon config is rejected: ") + e.what() + "\n" + yaml);
        }
    } else {
        dsp::receiver_config c;
        try {
            c = config::parse_receiver_config(text, "<fuzz>");
        } catch (const config::config_error& e) {
            check_error(e);
            return 0;
        }
        const std::string yaml = config::to_yaml(c);
        try {
            const dsp::receiver_config again = config::parse_receiver_config(yaml, "<to_yaml>");
            PAQ_FUZZ_CHECK(config::to_yaml(again) == yaml, "receiver config changed on the to_yaml round trip:\n" + yaml);
        } catch (const config::config_error& e) {
            PAQ_FUZZ_CHECK(false, std::string("to_yaml of an accepted receiver config is rejected: ") + e.what() + "\n" + yaml);
        }
    }
    return 0;
}
