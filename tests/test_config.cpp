// Tests of the YAML binding of the receiver parameters (config/receiver_yaml.hpp).
#include "config/daemon_config.hpp"
#include "config/receiver_yaml.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

namespace {

using paq::config::config_error;
using paq::config::load_receiver_config;
using paq::config::parse_receiver_config;
using paq::config::to_yaml;
using paq::dsp::receiver_config;

bool contains(std::string_view haystack, std::string_view needle) {
    return haystack.find(needle) != std::string_view::npos;
}

/// A daemon configuration (as file t.yaml) refused with a message that contains `expected`.
void refused(const std::string& yaml, const std::string& expected) {
    try {
        (void)paq::config::parse_daemon_config(yaml, "t.yaml");
        ADD_FAILURE() << "accepted: " << yaml;
    } catch (const std::exception& e) {
        EXPECT_TRUE(contains(e.what(), expected)) << e.what();
    }
}

void expect_same(const receiver_config& a, const receiver_config& b) {
    EXPECT_EQ(a.batch_samples, b.batch_samples);
    EXPECT_EQ(a.detection_threshold, b.detection_threshold);
    EXPECT_EQ(a.fft_size, b.fft_size);
    EXPECT_EQ(a.cma_mu, b.cma_mu);
    EXPECT_EQ(a.cma_iterations, b.cma_iterations);
    EXPECT_EQ(a.pll_bn_t, b.pll_bn_t);
    EXPECT_EQ(a.pll_acquisition_bn_t, b.pll_acquisition_bn_t);
    EXPECT_EQ(a.pll_damping, b.pll_damping);
    EXPECT_EQ(a.cpu_threads, b.cpu_threads);
    EXPECT_EQ(a.bit_rate_hz, b.bit_rate_hz);
    EXPECT_EQ(a.clock_tracking, b.clock_tracking);
    EXPECT_EQ(a.clock_min_ppm, b.clock_min_ppm);
    EXPECT_EQ(a.front_end_correction, b.front_end_correction);
    EXPECT_EQ(a.phase_smoother, b.phase_smoother);
    EXPECT_EQ(a.detector, b.detector);
    EXPECT_EQ(a.fec, b.fec);
    EXPECT_EQ(a.fec_iterations, b.fec_iterations);
    EXPECT_EQ(a.channels, b.channels);
    EXPECT_EQ(a.combining, b.combining);
}

// The messages of the config_error that parsing `yaml` throws; fails the test if none.
std::vector<std::string> parse_errors(const std::string& yaml) {
    try {
        (void)parse_receiver_config(yaml, "test.yaml");
    } catch (const config_error& e) {
        EXPECT_FALSE(e.messages().empty());
        return e.messages();
    }
    ADD_FAILURE() << "no config_error for:\n" << yaml;
    return {};
}

// The single message of the config_error that parsing `yaml` throws.
std::string parse_error(const std::string& yaml) {
    const auto messages = parse_errors(yaml);
    EXPECT_EQ(messages.size(), 1u) << ::testing::PrintToString(messages);
    return messages.empty() ? std::string() : messages.front();
}

// A file in the temporary directory, removed at the end of the test.
class temp_file {
public:
    explicit temp_file(const std::string& contents) {
        std::random_device rd;
        path_ = std::filesystem::temp_directory_path() /
                ("paq_test_config_" + std::to_string(rd()) + "_" + std::to_string(rd()) + ".yaml");
        std::ofstream out(path_, std::ios::binary);
        out << contents;
        if (!out) {
            ADD_FAILURE() << "cannot write " << path_;
        }
    }
    temp_file(const temp_file&) = delete;
    temp_file& operator=(const temp_file&) = delete;
    ~temp_file() {
        std::error_code ec;
        std::filesystem::permissions(path_, std::filesystem::perms::owner_all, ec);
        std::filesystem::remove(path_, ec);
    }

    [[nodiscard]] const std::filesystem::path& path() const noexcept { return path_; }

private:
    std::filesystem::path path_;
};

// ---------------------------------------------------------------------------------------
// Defaults

TEST(ReceiverYaml, EmptyDocumentGivesDefaults) {
    for (const char* text : {"", "\n", "# nothing configured yet\n", "---\n", "---\n...\n"}) {
        SCOPED_TRACE(text);
        expect_same(parse_receiver_config(text), receiver_config{});
    }
}

TEST(ReceiverYaml, MissingReceiverSectionGivesDefaults) {
    // The service's other sections, whatever they hold, are its parser's.
    const std::string yaml =
        "source:\n"
        "  type: udp\n"
        "  receiver: not this one\n"
        "publisher:\n"
        "  - name: antenna-a\n"
        "    cma_mu: 42\n";
    expect_same(parse_receiver_config(yaml), receiver_config{});
}

TEST(ReceiverYaml, EmptyReceiverSectionGivesDefaults) {
    expect_same(parse_receiver_config("receiver:\n"), receiver_config{});
    expect_same(parse_receiver_config("receiver: {}\n"), receiver_config{});
}

TEST(ReceiverYaml, TheServiceSectionsAreIgnored) {
    const std::string yaml =
        "ring: {threads: [1, 2, 3], unknown_key: yes}\n"
        "receiver:\n"
        "  cma_iterations: 30\n"
        "metrics: 17\n"
        "log: {}\n";
    const auto config = parse_receiver_config(yaml);
    EXPECT_EQ(config.cma_iterations, 30);
}

TEST(ReceiverYaml, AnUnknownSectionIsAnError) {
    // A misspelled 'receiver' would run with the defaults: it is named, with the sections
    // there are, and the near miss suggested.
    const auto typo = parse_error("recievr:\n  detector: trellis\n");
    EXPECT_NE(typo.find("test.yaml:1: unknown section 'recievr' at the top level"), std::string::npos) << typo;
    EXPECT_NE(typo.find("known: receiver, source, ring"), std::string::npos) << typo;
    EXPECT_NE(typo.find("did you mean 'receiver'?"), std::string::npos) << typo;
    const auto other = parse_error("receiver:\n  cma_iterations: 30\ndaemon: {threads: 2}\n");
    EXPECT_NE(other.find("test.yaml:3: unknown section 'daemon'"), std::string::npos) << other;
    EXPECT_EQ(other.find("did you mean"), std::string::npos) << other;
    const auto complex_key = parse_error("[1, 2]: complex key\n");
    EXPECT_NE(complex_key.find("keys at the top level must be section names"), std::string::npos) << complex_key;
}

// ---------------------------------------------------------------------------------------
// Each field

struct field_case {
    const char* yaml_line;  // under "receiver:"
    std::function<void(receiver_config&)> expected_change;
};

TEST(ReceiverYaml, EachFieldIsParsedAndOthersKeepDefaults) {
    const std::vector<field_case> cases = {
        {"batch_samples: 1000000", [](receiver_config& c) { c.batch_samples = 1'000'000; }},
        {"detection_threshold: 0.25", [](receiver_config& c) { c.detection_threshold = 0.25; }},
        {"fft_size: 65536", [](receiver_config& c) { c.fft_size = 65536; }},
        {"cma_mu: 0.004", [](receiver_config& c) { c.cma_mu = 0.004; }},
        {"cma_iterations: 40", [](receiver_config& c) { c.cma_iterations = 40; }},
        {"pll_bn_t: 0.02", [](receiver_config& c) { c.pll_bn_t = 0.02; }},
        {"pll_acquisition_bn_t: 0.05", [](receiver_config& c) { c.pll_acquisition_bn_t = 0.05; }},
        {"pll_damping: 1.0", [](receiver_config& c) { c.pll_damping = 1.0; }},
        {"cpu_threads: 8", [](receiver_config& c) { c.cpu_threads = 8; }},
        {"channels: 2", [](receiver_config& c) { c.channels = 2; }},
        {"combining: select", [](receiver_config& c) { c.combining = paq::dsp::combining_kind::select; }},
    };
    for (const auto& c : cases) {
        SCOPED_TRACE(c.yaml_line);
        receiver_config expected;
        c.expected_change(expected);
        expect_same(parse_receiver_config(std::string("receiver:\n  ") + c.yaml_line + "\n"), expected);
    }
}

TEST(ReceiverYaml, AllFieldsTogether) {
    const std::string yaml =
        "# receiver tuned for the lab link\n"
        "receiver:\n"
        "  batch_samples: 2000000\n"
        "  detection_threshold: 0.3\n"
        "  fft_size: 32768\n"
        "  cma_mu: 1e-3\n"
        "  cma_iterations: 0\n"
        "  pll_bn_t: .05\n"
        "  pll_acquisition_bn_t: 0.125\n"
        "  pll_damping: 2\n"
        "  cpu_threads: 4\n";
    const auto c = parse_receiver_config(yaml);
    EXPECT_EQ(c.batch_samples, 2'000'000u);
    EXPECT_EQ(c.detection_threshold, 0.3);
    EXPECT_EQ(c.fft_size, 32768u);
    EXPECT_EQ(c.cma_mu, 1e-3);
    EXPECT_EQ(c.cma_iterations, 0);
    EXPECT_EQ(c.pll_bn_t, 0.05);
    EXPECT_EQ(c.pll_acquisition_bn_t, 0.125);
    EXPECT_EQ(c.pll_damping, 2.0);
    EXPECT_EQ(c.cpu_threads, 4);
}

TEST(ReceiverYaml, FlowMappingAndNumberSpellings) {
    // YAML 1.2 core schema spellings: hex and octal integers, signs, exponents.
    const auto c = parse_receiver_config(
        "receiver: {fft_size: 0x10000, cma_iterations: 0o17, cpu_threads: +2, cma_mu: +2.5E-3, pll_bn_t: 5.e-2}\n");
    EXPECT_EQ(c.fft_size, 65536u);
    EXPECT_EQ(c.cma_iterations, 15);
    EXPECT_EQ(c.cpu_threads, 2);
    EXPECT_EQ(c.cma_mu, 2.5e-3);
    EXPECT_EQ(c.pll_bn_t, 0.05);
}

// ---------------------------------------------------------------------------------------
// to_yaml

TEST(ReceiverYaml, ToYamlListsEveryFieldUnderReceiver) {
    const std::string yaml = to_yaml(receiver_config{});
    EXPECT_TRUE(yaml.starts_with("receiver:\n")) << yaml;
    for (const char* field : {"batch_samples", "detection_threshold", "fft_size", "cma_mu", "cma_iterations",
                              "pll_bn_t", "pll_acquisition_bn_t", "pll_damping", "cpu_threads"}) {
        EXPECT_TRUE(contains(yaml, std::string("\n  ") + field + ": ")) << field << " missing in\n" << yaml;
    }
}

TEST(ReceiverYaml, RoundTripDefaults) {
    expect_same(parse_receiver_config(to_yaml(receiver_config{})), receiver_config{});
}

TEST(ReceiverYaml, RoundTripEveryFieldChanged) {
    // Every field differs from its default (so a field missing from to_yaml is caught), and
    // the doubles have no short decimal form (so lossy formatting is caught).
    receiver_config c;
    c.batch_samples = 123'457;
    c.detection_threshold = 1.0 / 3.0;
    c.fft_size = 1u << 18;
    c.cma_mu = 0.1 / 7.0;
    c.cma_iterations = 199;
    c.pll_bn_t = std::nextafter(0.01, 1.0);
    c.pll_acquisition_bn_t = 0.1 / 3.0;
    c.pll_damping = std::sqrt(0.5);
    c.cpu_threads = 1024;
    c.bit_rate_hz = 1e7 / 3.0;
    c.clock_tracking = 0;
    c.clock_min_ppm = 2.0 / 3.0;
    c.front_end_correction = 1;
    c.phase_smoother = 1;
    c.fec = paq::dsp::fec_code::k1024_r2_3;
    c.fec_iterations = 17;
    c.channels = 2;
    c.combining = paq::dsp::combining_kind::select;
    ASSERT_TRUE(c.validate().empty());
    const std::string yaml = to_yaml(c);
    SCOPED_TRACE(yaml);
    expect_same(parse_receiver_config(yaml), c);
}

TEST(ReceiverYaml, AContinuousStreamCodeIsTakenAndAnUnknownCodeRefusedByName) {
    EXPECT_EQ(parse_receiver_config("receiver:\n  fec: ar4ja-4096-4/5\n").fec, paq::dsp::fec_code::k4096_r4_5);
    const auto unknown = parse_errors("receiver:\n  fec: turbo\n");
    ASSERT_FALSE(unknown.empty());
    EXPECT_NE(unknown[0].find("ar4ja-1024-1/2"), std::string::npos) << unknown[0];
}

TEST(ReceiverYaml, TheTrellisDetectorRoundTrips) {
    paq::dsp::receiver_config c;
    c.detector = paq::dsp::detector_kind::trellis;
    ASSERT_TRUE(c.validate().empty());
    const std::string yaml = to_yaml(c);
    SCOPED_TRACE(yaml);
    EXPECT_NE(yaml.find("detector: trellis"), std::string::npos);
    expect_same(parse_receiver_config(yaml), c);
}

TEST(ReceiverYaml, ToYamlIsReadable) {
    // The daemon logs this text; short decimal values stay short.
    receiver_config c;
    c.cma_mu = 0.1;
    EXPECT_TRUE(contains(to_yaml(c), "  cma_mu: 0.1\n")) << to_yaml(c);
}

// ---------------------------------------------------------------------------------------
// Out-of-range values: validate()'s message, prefixed with file, line and "receiver."

struct range_case {
    const char* field;
    const char* value;
};

TEST(ReceiverYaml, OutOfRangeValuesNameFieldValueAndLine) {
    const std::vector<range_case> cases = {
        {"batch_samples", "0"},         {"batch_samples", "2000000000"},
        {"detection_threshold", "0"},   {"detection_threshold", "1.5"},
        {"detection_threshold", "-0.1"}, {"fft_size", "8192"},
        {"fft_size", "20000"},          {"fft_size", "2097152"},
        {"cma_mu", "0"},                {"cma_mu", "0.5"},
        {"cma_iterations", "-1"},       {"cma_iterations", "201"},
        {"pll_bn_t", "0"},              {"pll_bn_t", "0.2"},
        {"pll_acquisition_bn_t", "0"},  {"pll_acquisition_bn_t", "0.3"},
        {"pll_damping", "0.1"},         {"pll_damping", "2.5"},
        {"cpu_threads", "-1"},          {"cpu_threads", "2000"},
    };
    for (const auto& c : cases) {
        const std::string yaml = std::string("# comment\nreceiver:\n  ") + c.field + ": " + c.value + "\n";
        SCOPED_TRACE(yaml);
        const std::string message = parse_error(yaml);
        EXPECT_TRUE(message.starts_with("test.yaml:3: ")) << message;
        EXPECT_TRUE(contains(message, std::string("receiver.") + c.field + " = " + c.value)) << message;
        EXPECT_TRUE(contains(message, "out of range")) << message;
    }
}

TEST(ReceiverYaml, NanAndInfinityAreRejectedByRange) {
    EXPECT_TRUE(contains(parse_error("receiver:\n  cma_mu: .nan\n"), "receiver.cma_mu = .nan is out of range (allowed: 0 < x <= 0.1)"));
    EXPECT_TRUE(contains(parse_error("receiver:\n  pll_bn_t: .inf\n"), "receiver.pll_bn_t = .inf is out of range"));
}

TEST(ReceiverYaml, EveryProblemIsReportedAtOnce) {
    const auto messages = parse_errors(
        "receiver:\n"
        "  cma_mu: 0.5\n"
        "  cma_iterations: ten\n"
        "  cma_muu: 0.1\n"
        "  pll_damping: 9\n");
    // In file order, although range errors are only found after parsing.
    ASSERT_EQ(messages.size(), 4u) << ::testing::PrintToString(messages);
    EXPECT_TRUE(messages[0].starts_with("test.yaml:2: receiver.cma_mu = 0.5")) << messages[0];
    EXPECT_TRUE(messages[1].starts_with("test.yaml:3: receiver.cma_iterations")) << messages[1];
    EXPECT_TRUE(messages[2].starts_with("test.yaml:4: unknown key 'cma_muu'")) << messages[2];
    EXPECT_TRUE(messages[3].starts_with("test.yaml:5: receiver.pll_damping = 9")) << messages[3];
}

TEST(ReceiverYaml, WhatHoldsEveryMessage) {
    try {
        (void)parse_receiver_config("receiver:\n  cma_mu: 0.5\n  pll_bn_t: 0.5\n", "x.yaml");
        FAIL() << "no exception";
    } catch (const config_error& e) {
        const config_error copy = e;
        ASSERT_EQ(copy.messages().size(), 2u);
        EXPECT_EQ(std::string(copy.what()), copy.messages()[0] + "\n" + copy.messages()[1]);
    }
}

// ---------------------------------------------------------------------------------------
// Unknown keys, wrong types, malformed documents

TEST(ReceiverYaml, UnknownKeyIsAnError) {
    const std::string message = parse_error("receiver:\n  cma_mu: 0.002\n  cma_muu: 0.003\n");
    EXPECT_TRUE(message.starts_with("test.yaml:3: unknown key 'cma_muu' in 'receiver'")) << message;
    EXPECT_TRUE(contains(message, "did you mean 'cma_mu'?")) << message;
    EXPECT_TRUE(contains(message, "(known: batch_samples, detection_threshold, fft_size, cma_mu, cma_iterations, "
                                  "pll_bn_t, pll_acquisition_bn_t, pll_damping, cpu_threads, bit_rate_hz, channels, combining, clock_tracking, "
                                  "clock_min_ppm, front_end_correction, phase_smoother, detector, fec, fec_iterations)"))
        << message;
}

TEST(ReceiverYaml, UnknownKeyFarFromAnyFieldHasNoSuggestion) {
    const std::string message = parse_error("receiver:\n  sample_rate: 20e6\n");
    EXPECT_TRUE(contains(message, "unknown key 'sample_rate'")) << message;
    EXPECT_FALSE(contains(message, "did you mean")) << message;
}

struct type_case {
    const char* line;      // under "receiver:"
    const char* expected;  // substrings of the message
    const char* expected2;
};

TEST(ReceiverYaml, WrongTypesNameFieldValueTypeAndLine) {
    const std::vector<type_case> cases = {
        {"cma_iterations: ten", "receiver.cma_iterations: expected an integer, got 'ten'", ""},
        {"cma_iterations: 12.5", "receiver.cma_iterations: expected an integer, got '12.5'", ""},
        {"cma_iterations: 12abc", "expected an integer, got '12abc'", ""},
        {"cpu_threads: true", "receiver.cpu_threads: expected an integer, got 'true'", ""},
        {"batch_samples: 1e6", "receiver.batch_samples: expected a non-negative integer, got '1e6'", ""},
        {"fft_size: [16384]", "receiver.fft_size: expected a non-negative integer, got a sequence", ""},
        {"cma_mu: fast", "receiver.cma_mu: expected a number, got 'fast'", ""},
        {"cma_mu: nan", "receiver.cma_mu: expected a number, got 'nan'", ""},
        {"cma_mu: 0.002.1", "expected a number, got '0.002.1'", ""},
        {"cma_mu: {value: 1}", "receiver.cma_mu: expected a number, got a mapping", ""},
        {"cma_mu:", "receiver.cma_mu: expected a number, got no value", ""},
        {"cma_mu: ~", "receiver.cma_mu: expected a number, got no value", ""},
        {"cma_mu: \"0.002\"", "receiver.cma_mu: expected a number, got '0.002'", "quoted"},
        {"cma_mu: !!str 0.002", "receiver.cma_mu: expected a number, got '0.002'", "tag"},
        {"cma_iterations: !!float 12", "receiver.cma_iterations: expected an integer, got '12'", "tag"},
        // Integers that do not fit the field's type.
        {"batch_samples: -5", "receiver.batch_samples = -5 is out of range", ""},
        {"cpu_threads: 99999999999", "receiver.cpu_threads = 99999999999 is out of range", ""},
        {"fft_size: 99999999999999999999999", "receiver.fft_size = 99999999999999999999999 is out of range", ""},
        {"cma_mu: 1e999", "receiver.cma_mu = 1e999 is out of range", ""},
    };
    for (const auto& c : cases) {
        const std::string yaml = std::string("log: {}\nreceiver:\n  ") + c.line + "\n";
        SCOPED_TRACE(yaml);
        const std::string message = parse_error(yaml);
        EXPECT_TRUE(message.starts_with("test.yaml:3: ")) << message;
        EXPECT_TRUE(contains(message, c.expected)) << message;
        EXPECT_TRUE(contains(message, c.expected2)) << message;
    }
}

TEST(ReceiverYaml, ExplicitNumericTagsAreAccepted) {
    const auto c = parse_receiver_config("receiver:\n  cpu_threads: !!int 3\n  cma_mu: !!float 0.004\n");
    EXPECT_EQ(c.cpu_threads, 3);
    EXPECT_EQ(c.cma_mu, 0.004);
}

TEST(ReceiverYaml, ExtremeIntegersThatFitAreAccepted) {
    // The type limits themselves parse; validate() then judges them.
    EXPECT_TRUE(contains(parse_error("receiver:\n  cpu_threads: -2147483648\n"), "receiver.cpu_threads = -2147483648"));
    EXPECT_TRUE(contains(parse_error("receiver:\n  cpu_threads: 2147483647\n"), "receiver.cpu_threads = 2147483647"));
    EXPECT_TRUE(contains(parse_error("receiver:\n  batch_samples: 18446744073709551615\n"),
                         "receiver.batch_samples = 18446744073709551615 is out of range (allowed"));
}

TEST(ReceiverYaml, DuplicateKeyIsAnError) {
    const std::string message = parse_error("receiver:\n  cma_mu: 0.002\n  cma_mu: 0.003\n");
    EXPECT_TRUE(message.starts_with("test.yaml:3: duplicate key 'cma_mu'")) << message;
    EXPECT_TRUE(contains(message, "line 2")) << message;
}

TEST(ReceiverYaml, DuplicateReceiverSectionIsAnError) {
    const std::string message = parse_error("receiver:\n  cma_mu: 0.002\nreceiver:\n  cma_mu: 0.003\n");
    EXPECT_TRUE(message.starts_with("test.yaml:3: duplicate section 'receiver'")) << message;
}

TEST(ReceiverYaml, ReceiverMustBeAMapping) {
    EXPECT_TRUE(contains(parse_error("receiver: 5\n"), "'receiver' must be a mapping"));
    EXPECT_TRUE(contains(parse_error("receiver:\n  - cma_mu: 1\n"), "'receiver' must be a mapping"));
}

TEST(ReceiverYaml, TopLevelMustBeAMapping) {
    EXPECT_TRUE(contains(parse_error("- receiver\n- daemon\n"), "top level must be a mapping"));
    EXPECT_TRUE(contains(parse_error("just a string\n"), "top level must be a mapping"));
}

TEST(ReceiverYaml, SeveralDocumentsAreAnError) {
    const std::string message = parse_error("receiver:\n  cma_mu: 0.002\n---\nreceiver:\n  cma_mu: 0.003\n");
    EXPECT_TRUE(contains(message, "expected one YAML document, found 2")) << message;
}

TEST(ReceiverYaml, SyntaxErrorHasLineNumber) {
    // An unclosed flow sequence on line 3.
    const std::string unclosed = parse_error("receiver:\n  cma_mu: 0.002\n  cma_iterations: [1, 2\n  pll_bn_t: 0.01\n");
    // yaml-cpp notices the missing ']' only at the next line; any line is fine as long as
    // there is one: "test.yaml:<line>:<column>: YAML syntax error: ...".
    ASSERT_TRUE(unclosed.starts_with("test.yaml:")) << unclosed;
    const std::string position = unclosed.substr(std::string_view("test.yaml:").size());
    EXPECT_TRUE(!position.empty() && position.front() >= '1' && position.front() <= '9') << unclosed;
    EXPECT_TRUE(contains(unclosed, ": YAML syntax error: ")) << unclosed;

    // A key indented wrongly on line 4 (a mapping value where none may start).
    const std::string indent = parse_error("log: {}\nreceiver:\n  cma_mu: 0.002\n   cma_iterations: 12\n");
    EXPECT_TRUE(indent.starts_with("test.yaml:4:")) << indent;
    EXPECT_TRUE(contains(indent, "YAML syntax error")) << indent;

    // A tab used for indentation on line 2.
    const std::string tab = parse_error("receiver:\n\tcma_mu: 0.002\n");
    EXPECT_TRUE(tab.starts_with("test.yaml:2:")) << tab;
}

// ---------------------------------------------------------------------------------------
// Files

TEST(ReceiverYaml, LoadsFile) {
    const temp_file file("receiver:\n  cma_mu: 0.003\n  cpu_threads: 2\n");
    const auto c = load_receiver_config(file.path());
    EXPECT_EQ(c.cma_mu, 0.003);
    EXPECT_EQ(c.cpu_threads, 2);
    EXPECT_EQ(c.cma_iterations, receiver_config{}.cma_iterations);
}

TEST(ReceiverYaml, FileErrorsNameTheFileAndLine) {
    const temp_file file("receiver:\n  cma_mu: 0.003\n  cpu_threads: many\n");
    try {
        (void)load_receiver_config(file.path());
        FAIL() << "no exception";
    } catch (const config_error& e) {
        const std::string message = e.what();
        EXPECT_TRUE(message.starts_with(file.path().string() + ":3: receiver.cpu_threads")) << message;
    }
}

TEST(ReceiverYaml, MissingFile) {
    const std::filesystem::path missing =
        std::filesystem::temp_directory_path() / "paq_test_config_does_not_exist" / "receiver.yaml";
    try {
        (void)load_receiver_config(missing);
        FAIL() << "no exception";
    } catch (const config_error& e) {
        const std::string message = e.what();
        EXPECT_TRUE(message.starts_with(missing.string() + ": ")) << message;
        EXPECT_TRUE(contains(message, "No such file or directory")) << message;
    }
}

TEST(ReceiverYaml, DirectoryIsNotAConfigFile) {
    const std::filesystem::path dir = std::filesystem::temp_directory_path();
    try {
        (void)load_receiver_config(dir);
        FAIL() << "no exception";
    } catch (const config_error& e) {
        const std::string message = e.what();
        EXPECT_TRUE(contains(message, dir.string())) << message;
        EXPECT_TRUE(contains(message, "directory")) << message;
    }
}

TEST(ReceiverYaml, UnreadableFile) {
    const temp_file file("receiver: {}\n");
    std::filesystem::permissions(file.path(), std::filesystem::perms::none);
    if (std::ifstream(file.path())) {
        GTEST_SKIP() << "running with privileges that ignore file permissions (root?)";
    }
    try {
        (void)load_receiver_config(file.path());
        FAIL() << "no exception";
    } catch (const config_error& e) {
        const std::string message = e.what();
        EXPECT_TRUE(message.starts_with(file.path().string() + ": ")) << message;
        EXPECT_TRUE(contains(message, "Permission denied")) << message;
    }
}

TEST(ReceiverYaml, SyntaxErrorInFileNamesFileAndLine) {
    const temp_file file("receiver:\n  cma_mu: 0.003\n   cma_iterations: 12\n");
    try {
        (void)load_receiver_config(file.path());
        FAIL() << "no exception";
    } catch (const config_error& e) {
        const std::string message = e.what();
        EXPECT_TRUE(message.starts_with(file.path().string() + ":3:")) << message;
        EXPECT_TRUE(contains(message, "YAML syntax error")) << message;
    }
}

// ---------------------------------------------------------------------------------------
// Hostile configuration text and files are refused, never looped or recursed on

// Runs `load` in a child process with 512 MiB of address space and `seconds` to finish, and
// returns the config_error message it produced. A regression (yaml-cpp looping with growing
// memory) then fails this test instead of hanging the suite or exhausting the machine.
// Whether AddressSanitizer instruments this build: GCC says so by __SANITIZE_ADDRESS__, Clang
// 14 only through __has_feature.
#if defined(__SANITIZE_ADDRESS__)
#define PAQ_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PAQ_TEST_ASAN 1
#endif
#endif

std::string error_in_child(const std::function<void()>& load, int seconds = 20) {
    int fds[2];
    if (::pipe(fds) != 0) {
        ADD_FAILURE() << "pipe";
        return {};
    }
    const pid_t pid = ::fork();
    if (pid == 0) {
        ::close(fds[0]);
        // Under AddressSanitizer the shadow memory alone needs terabytes of address space:
        // there the timeout is the guard (a loop still fails the test instead of hanging it).
#if !defined(PAQ_TEST_ASAN)
        const rlimit as{512u << 20, 512u << 20};
        ::setrlimit(RLIMIT_AS, &as);
#endif
        std::string message = "(no config_error)";
        try {
            load();
        } catch (const config_error& e) {
            message = e.what();
        } catch (const std::exception& e) {
            message = std::string("(other exception) ") + e.what();
        }
        const ssize_t put = ::write(fds[1], message.data(), message.size());
        ::_exit(put == static_cast<ssize_t>(message.size()) ? 0 : 1);
    }
    ::close(fds[1]);
    std::string message;
    pollfd p{fds[0], POLLIN, 0};
    char buf[4096];
    bool ended = false;  // the child closed its end: it has finished
    while (!ended && ::poll(&p, 1, seconds * 1000) == 1) {
        const ssize_t got = ::read(fds[0], buf, sizeof buf);
        ended = got <= 0;
        if (got > 0) message.append(buf, static_cast<std::size_t>(got));
    }
    ::close(fds[0]);
    int status = 0;
    if (!ended) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, &status, 0);
        ADD_FAILURE() << "still running after " << seconds << " s (looping?)";
        return message;
    }
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child died, status " << status << ": " << message;
    return message;
}

std::string receiver_error_in_child(const std::string& yaml) {
    return error_in_child([&] { (void)parse_receiver_config(yaml, "test.yaml"); });
}

TEST(ConfigHardening, AStrayCommaIsASyntaxErrorNotAnEndlessLoop) {
    // The reproducer: a config file holding only ','. yaml-cpp 0.7's LoadAll returned an
    // endless stream of null documents for it (memory growing until the OOM killer).
    for (const std::string yaml : {",", ", ", ",\n", ",a", " ,", "\n\n,"}) {
        const std::string message = receiver_error_in_child(yaml);
        EXPECT_TRUE(message.starts_with("test.yaml:")) << message;
        EXPECT_TRUE(contains(message, ": YAML syntax error: unexpected ','")) << message;
    }
    EXPECT_TRUE(receiver_error_in_child("\n\n,").starts_with("test.yaml:3:1: ")) << receiver_error_in_child("\n\n,");
    // The same hole after a document marker, a tag or an anchor.
    for (const std::string yaml : {"--- ,", "!!str ,", "&x ,", "receiver: {}\n--- ,\n"}) {
        const std::string message = receiver_error_in_child(yaml);
        EXPECT_TRUE(contains(message, "YAML syntax error: unexpected ','")) << yaml << " -> " << message;
    }
    // Through the daemon's loader and a file, as `paqd --config x --check-config` reads it.
    const temp_file file(",");
    const std::string message = error_in_child([&] { (void)paq::config::load_daemon_config(file.path()); });
    EXPECT_TRUE(message.starts_with(file.path().string() + ":1:1: YAML syntax error: unexpected ','")) << message;
    // Commas where YAML allows them still parse.
    EXPECT_EQ(parse_receiver_config("receiver: {cma_mu: 0.003, cpu_threads: 2}\nlog: [1, 2,]\n").cpu_threads, 2);
}

TEST(ConfigHardening, DeepNestingIsRefusedWithTheLimit) {
    // The reproducer: a 100,000-deep flow sequence (yaml-cpp recurses once per level).
    const std::string deep(100'000, '[');
    std::string message = receiver_error_in_child(deep);
    EXPECT_TRUE(message.starts_with("test.yaml:1:")) << message;
    EXPECT_TRUE(contains(message, "nesting deeper than the limit of 64 levels")) << message;
    message = receiver_error_in_child("a: " + std::string(100'000, '{'));
    EXPECT_TRUE(contains(message, "nesting deeper than the limit of 64 levels")) << message;

    // The top-level mapping is level 1: 63 sequences under it reach exactly 64.
    EXPECT_NO_THROW((void)parse_receiver_config("metrics: " + std::string(63, '[') + std::string(63, ']')));
    message = parse_error("metrics: " + std::string(64, '[') + std::string(64, ']'));
    EXPECT_TRUE(message.starts_with("test.yaml:1:73: nesting deeper than the limit of 64")) << message;
    // Block nesting counts the same way.
    std::string block = "a:\n";
    for (int level = 1; level < 70; ++level) block += std::string(static_cast<std::size_t>(2 * level), ' ') + "- \n";
    EXPECT_TRUE(contains(parse_error(block), "nesting deeper than the limit of 64")) << parse_error(block);
}

TEST(ConfigHardening, AliasesAreBoundedAndMayNotFormACycle) {
    std::string message = parse_error("metrics: &a [*a]\n");
    EXPECT_TRUE(message.starts_with("test.yaml:1:14: an alias refers to a node that contains it")) << message;
    message = parse_error("receiver: &r {x: *r}\n");
    EXPECT_TRUE(contains(message, "(a cycle)")) << message;

    std::string many = "log: &b {cma_mu: 0.003}\nrecords: [";
    for (int k = 0; k < 256; ++k) many += "*b, ";
    EXPECT_NO_THROW((void)parse_receiver_config(many + "]\n"));
    message = parse_error(many + "*b]\n");
    EXPECT_TRUE(message.starts_with("test.yaml:2:")) << message;
    EXPECT_TRUE(contains(message, "more than 256 aliases")) << message;
    // An alias of a finished node is fine (a repeated setting).
    EXPECT_EQ(parse_receiver_config("log: &t 3\nreceiver: {cpu_threads: *t}\n").cpu_threads, 3);
}

TEST(ConfigHardening, TextOverOneMebibyteIsRefused) {
    const std::size_t limit = std::size_t{1} << 20;
    const std::string head = "receiver: {cpu_threads: 2}\n#";
    std::string text = head + std::string(limit - head.size() - 1, 'x') + "\n";
    ASSERT_EQ(text.size(), limit);
    EXPECT_EQ(parse_receiver_config(text).cpu_threads, 2);
    text += "\n";
    EXPECT_EQ(parse_error(text), "test.yaml: configuration is 1048577 bytes, more than the 1048576-byte limit");

    const temp_file file(text);
    try {
        (void)paq::config::load_daemon_config(file.path());
        FAIL() << "no exception";
    } catch (const config_error& e) {
        EXPECT_EQ(std::string(e.what()), file.path().string() +
                                             ": cannot read configuration file: it is 1048577 bytes, "
                                             "more than the 1048576-byte limit");
    }
}

TEST(ConfigHardening, DevicesAreRefusedAndPipesAreReadAtMostToTheLimit) {
    // The reproducer: `paqd --config /dev/zero --check-config` read forever (+50 MB/s).
    std::string message = error_in_child([] { (void)paq::config::load_daemon_config("/dev/zero"); });
    EXPECT_EQ(message, "/dev/zero: cannot read configuration file: it is a character device, not a file or a pipe");

    // A pipe is a legitimate source (process substitution, /dev/stdin), but one that never
    // ends is cut at the limit: the writer below would write forever.
    const std::filesystem::path fifo = temp_file("").path().string() + ".fifo";
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    const auto feed = [&](bool endless) {
        const pid_t writer = ::fork();
        if (writer == 0) {
            const int fd = ::open(fifo.c_str(), O_WRONLY);
            const std::string chunk = endless ? std::string(4096, '#') : "receiver: {cpu_threads: 3}\n";
            do {
                if (::write(fd, chunk.data(), chunk.size()) < 0) ::_exit(0);  // reader closed
            } while (endless);
            ::_exit(0);
        }
        return writer;
    };
    pid_t writer = feed(true);
    message = error_in_child([&] { (void)load_receiver_config(fifo); });
    EXPECT_EQ(message, fifo.string() + ": cannot read configuration file: it has more bytes, more than the "
                                       "1048576-byte limit");
    ::kill(writer, SIGKILL);
    ::waitpid(writer, nullptr, 0);

    writer = feed(false);
    EXPECT_EQ(load_receiver_config(fifo).cpu_threads, 3);
    ::waitpid(writer, nullptr, 0);
    std::filesystem::remove(fifo);
}

}  // namespace

// ---- daemon configuration: sender allow-lists, the VITA-49 stream-change policy -------------
// (the include is here, with the tests that need it, so that these tests append cleanly)
#include "config/daemon_config.hpp"

namespace {

// The config_error messages of parse_daemon_config(yaml); fails the test if it parsed.
std::vector<std::string> daemon_errors(const std::string& yaml) {
    try {
        (void)paq::config::parse_daemon_config(yaml, "paqd.yaml");
        ADD_FAILURE() << "no exception for:\n" << yaml;
    } catch (const config_error& e) {
        return e.messages();
    }
    return {};
}

TEST(DaemonYaml, AllowListsOfEveryNetworkSourceParseAndRoundTrip) {
    const std::string yaml =
        "source:\n"
        "  type: vita49\n"
        "  vita49:\n"
        "    allow: [192.168.10.0/24, 10.0.0.5, \"::1/128\"]\n"
        "  udp:\n"
        "    allow:\n"
        "      - 172.16.0.0/12\n"
        "      - \"fd00::/8\"\n"
        "  tcp:\n"
        "    mode: listen\n"
        "    host: \"0.0.0.0\"\n"
        "    allow: [127.0.0.1]\n";
    const auto cfg = paq::config::parse_daemon_config(yaml);
    EXPECT_EQ(cfg.source.vita49.allow, (std::vector<std::string>{"192.168.10.0/24", "10.0.0.5", "::1/128"}));
    EXPECT_EQ(cfg.source.udp.allow, (std::vector<std::string>{"172.16.0.0/12", "fd00::/8"}));
    EXPECT_EQ(cfg.source.tcp.allow, (std::vector<std::string>{"127.0.0.1"}));
    const auto again = paq::config::parse_daemon_config(paq::config::to_yaml(cfg));
    EXPECT_EQ(again.source.vita49.allow, cfg.source.vita49.allow);
    EXPECT_EQ(again.source.udp.allow, cfg.source.udp.allow);
    EXPECT_EQ(again.source.tcp.allow, cfg.source.tcp.allow);

    // Without the key: every sender (the default); the effective config leaves it out.
    const auto plain = paq::config::parse_daemon_config("source:\n  type: vita49\n");
    EXPECT_TRUE(plain.source.vita49.allow.empty());
    EXPECT_FALSE(contains(paq::config::to_yaml(plain), "allow:"));
}

TEST(DaemonYaml, BadAllowEntriesNameTheKeyTheValueAndWhatIsAllowed) {
    const auto errors = daemon_errors(
        "source:\n"
        "  type: vita49\n"
        "  vita49:\n"
        "    allow:\n"
        "      - 192.168.10.0/24\n"
        "      - 10.0.0.300\n"
        "      - 192.168.10.5/24\n"
        "  udp:\n"                     // checked even when not the configured source
        "    allow: 10.0.0.5\n");
    ASSERT_EQ(errors.size(), 3u);
    EXPECT_TRUE(errors[0].starts_with("paqd.yaml:6: source.vita49.allow[1] = '10.0.0.300' is not an IPv4 or IPv6 "
                                      "address or CIDR prefix (allowed: an IPv4 or IPv6 address such as 10.0.0.5 or "
                                      "::1, or a CIDR prefix such as 192.168.10.0/24 (/0 .. /32) or fd00::/8 "
                                      "(/0 .. /128))"))
        << errors[0];
    EXPECT_TRUE(errors[1].starts_with("paqd.yaml:7: source.vita49.allow[2] = '192.168.10.5/24' has bits set after the "
                                      "/24 prefix (the network is 192.168.10.0/24; one host is 192.168.10.5/32)"))
        << errors[1];
    EXPECT_TRUE(errors[2].starts_with("paqd.yaml:9: source.udp.allow: expected a list of addresses or CIDR prefixes"))
        << errors[2];

    const auto empty = daemon_errors("source:\n  type: udp\n  udp:\n    allow: []\n");
    ASSERT_EQ(empty.size(), 1u);
    EXPECT_TRUE(contains(empty[0], "source.udp.allow: an empty list would refuse every sender")) << empty[0];

    const auto connect = daemon_errors("source:\n  type: tcp\n  tcp:\n    allow: [10.0.0.5]\n");
    ASSERT_EQ(connect.size(), 1u);
    EXPECT_TRUE(contains(connect[0], "source.tcp.allow applies to listen mode only")) << connect[0];
}

TEST(DaemonYaml, Vita49StreamChangePolicy) {
    const auto defaults = paq::config::parse_daemon_config("source:\n  type: vita49\n");
    EXPECT_EQ(defaults.source.vita49.stream_change, paq::io::stream_change_policy::follow);
    EXPECT_EQ(defaults.source.vita49.stream_timeout_ms, 1000);
    EXPECT_TRUE(contains(paq::config::to_yaml(defaults), "    stream_change: follow\n    stream_timeout_ms: 1000\n"));

    const auto stay = paq::config::parse_daemon_config(
        "source:\n  type: vita49\n  vita49:\n    stream_change: stay\n    stream_timeout_ms: 250\n");
    EXPECT_EQ(stay.source.vita49.stream_change, paq::io::stream_change_policy::stay);
    EXPECT_EQ(stay.source.vita49.stream_timeout_ms, 250);
    const auto again = paq::config::parse_daemon_config(paq::config::to_yaml(stay));
    EXPECT_EQ(again.source.vita49.stream_change, paq::io::stream_change_policy::stay);
    EXPECT_EQ(again.source.vita49.stream_timeout_ms, 250);

    // A configured stream id is the only one ever accepted: alone it is fine (follow is only
    // the default), with an explicit follow it is a contradiction.
    const auto fixed = paq::config::parse_daemon_config("source:\n  vita49:\n    stream_id: 7\n  type: vita49\n");
    EXPECT_EQ(fixed.source.vita49.stream_id, 7u);
    EXPECT_EQ(paq::config::parse_daemon_config(paq::config::to_yaml(fixed)).source.vita49.stream_id, 7u);
    const auto both = daemon_errors("source:\n  type: vita49\n  vita49:\n    stream_id: 7\n    stream_change: follow\n");
    ASSERT_EQ(both.size(), 1u);
    EXPECT_TRUE(contains(both[0], "source.vita49.stream_change: follow cannot be combined with stream_id")) << both[0];

    const auto bad = daemon_errors(
        "source:\n  type: vita49\n  vita49:\n    stream_change: flip\n    stream_timeout_ms: 0\n");
    ASSERT_EQ(bad.size(), 2u);
    EXPECT_TRUE(contains(bad[0], "source.vita49.stream_change: got 'flip' (allowed: follow, stay)")) << bad[0];
    EXPECT_TRUE(contains(bad[1], "source.vita49.stream_timeout_ms = 0 is out of range (allowed: 1 .. 3600000)")) << bad[1];
}

TEST(DaemonYaml, UdpGnuRadioHeader) {
    // GNU Radio's UDP Sink header is named, never guessed silently.
    const auto defaults = paq::config::parse_daemon_config("source:\n  type: udp\n");
    EXPECT_EQ(defaults.source.udp.header, paq::io::udp_header::none);
    for (const auto h : {paq::io::udp_header::gnuradio_seq, paq::io::udp_header::gnuradio_seq_size}) {
        const auto cfg = paq::config::parse_daemon_config("source:\n  type: udp\n  udp:\n    header: " +
                                                          std::string(paq::io::to_string(h)) + "\n");
        EXPECT_EQ(cfg.source.udp.header, h);
        EXPECT_EQ(paq::config::parse_daemon_config(paq::config::to_yaml(cfg)).source.udp.header, h);
    }
    const auto bad = daemon_errors("source:\n  type: udp\n  udp:\n    header: seqnum\n");
    ASSERT_EQ(bad.size(), 1u);
    EXPECT_TRUE(contains(bad[0], "source.udp.header: got 'seqnum' (allowed: none, gnuradio-seq, gnuradio-seq-size)")) << bad[0];
}

TEST(DaemonYaml, ZmqSource) {
    // source.zmq binds through the schema; bad values name the key.
    const auto cfg = paq::config::parse_daemon_config(
        "source:\n  type: zmq\n  zmq:\n    endpoint: tcp://10.0.0.5:5555\n    pattern: pull\n    tags: gnuradio\n");
    EXPECT_EQ(cfg.source.type, paq::config::source_type::zmq);
    EXPECT_EQ(cfg.source.zmq.endpoint, "tcp://10.0.0.5:5555");
    EXPECT_EQ(cfg.source.zmq.pattern, paq::io::zmq_pattern::pull);
    EXPECT_EQ(cfg.source.zmq.tags, paq::io::zmq_tags::gnuradio);
    EXPECT_EQ(cfg.source.zmq.format, paq::io::sample_format::cf32_le);
    const auto bad = daemon_errors("source:\n  type: zmq\n  zmq:\n    endpoint: tcp://host\n    pattern: pub\n");
    ASSERT_EQ(bad.size(), 2u);
    // Sorted by line: the endpoint (line 4) first, the pattern (line 5) next.
    EXPECT_TRUE(contains(bad[0], "source.zmq.endpoint = 'tcp://host' is not an endpoint paqd can connect to")) << bad[0];
    EXPECT_TRUE(contains(bad[1], "source.zmq.pattern: got 'pub' (allowed: sub, pull)")) << bad[1];
}

TEST(DaemonYaml, CheckConfigRefusesWhatTheServiceWouldRefuse) {
    // --check-config and the service's start run the same checks: a configured rate the
    // receiver cannot take (below 1 kHz, or outside 2 .. 6.4 samples per bit) is refused at
    // the key for every source that carries one, and the service's own check
    // (receiver_config::validate with the rate set, as daemon/live.cpp runs it) agrees.
    for (const std::string type : {"tcp", "udp", "zmq"}) {
        const std::string endpoint = type == "zmq" ? "endpoint: tcp://127.0.0.1:5555, " : "";
        for (const double rate : {999.0, 0.5, 1e-3, 1e6, 20.625e6, 66e6}) {
            std::ostringstream yaml;
            yaml << "source:\n  type: " << type << "\n  " << type << ": {" << endpoint << "sample_rate_hz: " << rate << "}\n";
            std::vector<std::string> errors;
            try {
                (void)paq::config::parse_daemon_config(yaml.str(), "paqd.yaml");
            } catch (const config_error& e) {
                errors = e.messages();
            }
            paq::dsp::receiver_config rc;
            rc.input_sample_rate_hz = rate;
            const bool service_refuses = !rc.validate().empty();
            EXPECT_EQ(!errors.empty(), service_refuses) << type << " at " << rate << " Hz";
            if (service_refuses) {
                ASSERT_FALSE(errors.empty());
                EXPECT_TRUE(contains(errors[0], "source." + type + ".sample_rate_hz")) << errors[0];
            }
        }
    }
    // A wildcard host only binds; paqd connects, and libzmq would refuse it at every start.
    const auto wildcard = daemon_errors("source:\n  type: zmq\n  zmq: {endpoint: \"tcp://*:5555\", sample_rate_hz: 20.625e6}\n");
    ASSERT_EQ(wildcard.size(), 1u);
    EXPECT_TRUE(contains(wildcard[0], "source.zmq.endpoint = 'tcp://*:5555' is not an endpoint paqd can connect to")) << wildcard[0];
}

TEST(DaemonYaml, Vita49SampleRateFromTheSendersContext) {
    // sample_rate_hz 0 takes the rate from the sender's IF Context packets, waiting
    // context_timeout_s at start; both round-trip, and a bad timeout names its range.
    const auto ctx = paq::config::parse_daemon_config(
        "source:\n  type: vita49\n  vita49:\n    sample_rate_hz: 0\n    context_timeout_s: 2.5\n    stream_id: 7\n"
        "    allow: [192.0.2.10]\n");
    EXPECT_EQ(ctx.source.vita49.sample_rate_hz, 0.0);
    EXPECT_EQ(ctx.source.vita49.context_timeout_s, 2.5);
    const auto again = paq::config::parse_daemon_config(paq::config::to_yaml(ctx));
    EXPECT_EQ(again.source.vita49.sample_rate_hz, 0.0);
    EXPECT_EQ(again.source.vita49.context_timeout_s, 2.5);
    const auto bad = daemon_errors("source:\n  type: vita49\n  vita49:\n    context_timeout_s: 0\n");
    ASSERT_EQ(bad.size(), 1u);
    EXPECT_TRUE(contains(bad[0], "source.vita49.context_timeout_s = 0 is out of range (allowed: 0.1 .. 3600)")) << bad[0];
    // The rate from a context packet only from a named sender and stream.
    for (const std::string extra : {"", "    stream_id: 7\n", "    allow: [192.0.2.10]\n"}) {
        const auto open = daemon_errors("source:\n  type: vita49\n  vita49:\n    sample_rate_hz: 0\n" + extra);
        ASSERT_EQ(open.size(), 1u) << extra;
        EXPECT_TRUE(contains(open[0], "needs both the sender (allow) and the stream (stream_id) named")) << open[0];
    }
}

TEST(DaemonYaml, TheShippedConfigurationParses) {
    // config/paqd.yaml, as installed to /etc/paqd: its commented examples stay in sync with
    // the keys only by hand, so at least what is active must parse.
    const auto file = (std::filesystem::path(PAQ_TEST_DATA_DIR) / ".." / ".." / "config" / "paqd.yaml").lexically_normal();
    const auto cfg = paq::config::load_daemon_config(file);
    EXPECT_EQ(cfg.source.type, paq::config::source_type::vita49);
    EXPECT_EQ(cfg.source.vita49.bind_address, "0.0.0.0");
    EXPECT_EQ(cfg.source.vita49.port, 4991);
    EXPECT_EQ(cfg.source.vita49.stream_timeout_ms, 1000);
    EXPECT_TRUE(cfg.source.vita49.allow.empty());
}

}  // namespace

// ---- One schema per section drives parsing, the range checks, to_yaml and the key tables
// of docs/DAEMON.md -----------------------------------------------------------------------
#include "config/schema.hpp"

#include <algorithm>
#include <iomanip>
#include <set>
#include <sstream>

namespace {

using paq::config::daemon_config;
using paq::config::parse_daemon_config;

// Every member of the daemon configuration, independently of the schema (so that a field the
// schema forgets to read or to write shows up in the round trips below).
void expect_same(const daemon_config& a, const daemon_config& b) {
    expect_same(a.receiver, b.receiver);
    const auto& sa = a.source;
    const auto& sb = b.source;
    EXPECT_EQ(sa.type, sb.type);
    EXPECT_EQ(sa.stall_timeout_s, sb.stall_timeout_s);
    EXPECT_EQ(sa.file.path, sb.file.path);
    EXPECT_EQ(sa.file.raw_format, sb.file.raw_format);
    EXPECT_EQ(sa.file.raw_sample_rate_hz, sb.file.raw_sample_rate_hz);
    EXPECT_EQ(sa.file.raw_ci16_scale, sb.file.raw_ci16_scale);
    EXPECT_EQ(sa.file.channel, sb.file.channel);
    EXPECT_EQ(sa.file.raw_channels, sb.file.raw_channels);
    EXPECT_EQ(sa.file.paced, sb.file.paced);
    EXPECT_EQ(sa.file.rate_factor, sb.file.rate_factor);
    EXPECT_EQ(sa.file.loop, sb.file.loop);
    EXPECT_EQ(sa.file.chunk_samples, sb.file.chunk_samples);
    EXPECT_EQ(sa.tcp.mode, sb.tcp.mode);
    EXPECT_EQ(sa.tcp.host, sb.tcp.host);
    EXPECT_EQ(sa.tcp.port, sb.tcp.port);
    EXPECT_EQ(sa.tcp.format, sb.tcp.format);
    EXPECT_EQ(sa.tcp.ci16_scale, sb.tcp.ci16_scale);
    EXPECT_EQ(sa.tcp.sample_rate_hz, sb.tcp.sample_rate_hz);
    EXPECT_EQ(sa.tcp.rcvbuf_bytes, sb.tcp.rcvbuf_bytes);
    EXPECT_EQ(sa.tcp.retry_initial_s, sb.tcp.retry_initial_s);
    EXPECT_EQ(sa.tcp.retry_max_s, sb.tcp.retry_max_s);
    EXPECT_EQ(sa.tcp.end_on_close, sb.tcp.end_on_close);
    EXPECT_EQ(sa.tcp.read_bytes, sb.tcp.read_bytes);  // not a key: stays the default
    EXPECT_EQ(sa.tcp.allow, sb.tcp.allow);
    EXPECT_EQ(sa.udp.bind_address, sb.udp.bind_address);
    EXPECT_EQ(sa.udp.port, sb.udp.port);
    EXPECT_EQ(sa.udp.format, sb.udp.format);
    EXPECT_EQ(sa.udp.ci16_scale, sb.udp.ci16_scale);
    EXPECT_EQ(sa.udp.sample_rate_hz, sb.udp.sample_rate_hz);
    EXPECT_EQ(sa.udp.rcvbuf_bytes, sb.udp.rcvbuf_bytes);
    EXPECT_EQ(sa.udp.allow, sb.udp.allow);
    EXPECT_EQ(sa.udp.header, sb.udp.header);
    EXPECT_EQ(sa.zmq.endpoint, sb.zmq.endpoint);
    EXPECT_EQ(sa.zmq.pattern, sb.zmq.pattern);
    EXPECT_EQ(sa.zmq.format, sb.zmq.format);
    EXPECT_EQ(sa.zmq.ci16_scale, sb.zmq.ci16_scale);
    EXPECT_EQ(sa.zmq.sample_rate_hz, sb.zmq.sample_rate_hz);
    EXPECT_EQ(sa.zmq.high_water_mark, sb.zmq.high_water_mark);
    EXPECT_EQ(sa.zmq.max_message_bytes, sb.zmq.max_message_bytes);
    EXPECT_EQ(sa.zmq.tags, sb.zmq.tags);
    EXPECT_EQ(sa.vita49.bind_address, sb.vita49.bind_address);
    EXPECT_EQ(sa.vita49.port, sb.vita49.port);
    EXPECT_EQ(sa.vita49.stream_id, sb.vita49.stream_id);
    EXPECT_EQ(sa.vita49.second_stream_id, sb.vita49.second_stream_id);
    EXPECT_EQ(sa.vita49.stream_change, sb.vita49.stream_change);
    EXPECT_EQ(sa.vita49.stream_timeout_ms, sb.vita49.stream_timeout_ms);
    EXPECT_EQ(sa.vita49.ci16_scale, sb.vita49.ci16_scale);
    EXPECT_EQ(sa.vita49.sample_rate_hz, sb.vita49.sample_rate_hz);
    EXPECT_EQ(sa.vita49.context_timeout_s, sb.vita49.context_timeout_s);
    EXPECT_EQ(sa.vita49.rcvbuf_bytes, sb.vita49.rcvbuf_bytes);
    EXPECT_EQ(sa.vita49.allow, sb.vita49.allow);
    EXPECT_EQ(sa.iio.uri, sb.iio.uri);
    EXPECT_EQ(sa.iio.phy_device, sb.iio.phy_device);
    EXPECT_EQ(sa.iio.rx_device, sb.iio.rx_device);
    EXPECT_EQ(sa.iio.sample_rate_hz, sb.iio.sample_rate_hz);
    EXPECT_EQ(sa.iio.lo_hz, sb.iio.lo_hz);
    EXPECT_EQ(sa.iio.rf_bandwidth_hz, sb.iio.rf_bandwidth_hz);
    EXPECT_EQ(sa.iio.gain_mode, sb.iio.gain_mode);
    EXPECT_EQ(sa.iio.gain_db, sb.iio.gain_db);
    EXPECT_EQ(sa.iio.buffer_samples, sb.iio.buffer_samples);
    EXPECT_EQ(sa.iio.reconnect_interval_s, sb.iio.reconnect_interval_s);
    EXPECT_EQ(sa.iio.reconnect_max_interval_s, sb.iio.reconnect_max_interval_s);
    EXPECT_EQ(sa.iio.timeout_ms, sb.iio.timeout_ms);
    EXPECT_EQ(sa.iio.scale, sb.iio.scale);
    EXPECT_EQ(a.ring.capacity_s, b.ring.capacity_s);
    EXPECT_EQ(a.ring.overflow, b.ring.overflow);
    EXPECT_EQ(a.ring.lock_memory, b.ring.lock_memory);
    EXPECT_EQ(a.pipeline.backend, b.pipeline.backend);
    EXPECT_EQ(a.pipeline.gpus, b.pipeline.gpus);
    EXPECT_EQ(a.pipeline.solver, b.pipeline.solver);
    EXPECT_EQ(a.pipeline.cpu_workers, b.pipeline.cpu_workers);
    EXPECT_EQ(a.pipeline.queue_depth, b.pipeline.queue_depth);
    EXPECT_EQ(a.pipeline.cpu_fallback, b.pipeline.cpu_fallback);
    EXPECT_EQ(a.publisher.enabled, b.publisher.enabled);
    // The destinations in effect (to_yaml writes only the streams the receiver makes).
    EXPECT_EQ(a.publisher.for_streams(a.receiver.streams()).destinations, b.publisher.for_streams(b.receiver.streams()).destinations);
    EXPECT_EQ(a.publisher.udp.format, b.publisher.udp.format);
    EXPECT_EQ(a.publisher.udp.dqe_id.use_stream_id, b.publisher.udp.dqe_id.use_stream_id);
    EXPECT_EQ(a.publisher.udp.dqe_id.fixed_id, b.publisher.udp.dqe_id.fixed_id);
    EXPECT_EQ(a.publisher.udp.send_buffer_bytes, b.publisher.udp.send_buffer_bytes);
    EXPECT_EQ(a.publisher.udp.max_datagrams_per_second, b.publisher.udp.max_datagrams_per_second);
    EXPECT_EQ(a.monitor.pattern, b.monitor.pattern);
    EXPECT_EQ(a.monitor.status_interval_s, b.monitor.status_interval_s);
    EXPECT_EQ(a.records.base, b.records.base);
    EXPECT_EQ(a.records.decimation, b.records.decimation);
    EXPECT_EQ(a.records.channel_decimation, b.records.channel_decimation);
    EXPECT_EQ(a.recording.base, b.recording.base);
    EXPECT_EQ(a.recording.format, b.recording.format);
    EXPECT_EQ(a.recording.queue_mib, b.recording.queue_mib);
    EXPECT_EQ(a.metrics.enabled, b.metrics.enabled);
    EXPECT_EQ(a.metrics.bind, b.metrics.bind);
    EXPECT_EQ(a.metrics.port, b.metrics.port);
    EXPECT_EQ(a.log.level, b.log.level);
    EXPECT_EQ(a.log.destination, b.log.destination);
}

daemon_config round_trip(const daemon_config& c) {
    const std::string yaml = paq::config::to_yaml(c);
    SCOPED_TRACE(yaml);
    try {
        return parse_daemon_config(yaml, "to_yaml");
    } catch (const config_error& e) {
        ADD_FAILURE() << e.what() << "\n" << yaml;
    }
    return {};
}

TEST(ConfigSchema, RoundTripDefaults) {
    // The code defaults, with the one key a file source cannot do without.
    daemon_config c;
    c.source.file.path = "/data/flight.sigmf-meta";
    expect_same(round_trip(c), c);
    // The shipped configuration (a VITA-49 source) too.
    const auto shipped = paq::config::load_daemon_config(
        (std::filesystem::path(PAQ_TEST_DATA_DIR) / ".." / ".." / "config" / "paqd.yaml").lexically_normal());
    expect_same(round_trip(shipped), shipped);
}

// Every field different from its default, valid together, doubles without a short form.
daemon_config every_field_changed() {
    daemon_config c;
    auto& r = c.receiver;
    r.batch_samples = 123'457;
    r.detection_threshold = 1.0 / 3.0;
    r.fft_size = 1u << 18;
    r.cma_mu = 0.1 / 7.0;
    r.cma_iterations = 199;
    r.pll_bn_t = std::nextafter(0.01, 1.0);
    r.pll_acquisition_bn_t = 0.1 / 3.0;
    r.pll_damping = std::sqrt(0.5);
    r.cpu_threads = 1024;
    r.bit_rate_hz = 1e7 / 3.0;
    r.clock_tracking = 0;
    r.clock_min_ppm = 2.0 / 3.0;
    r.front_end_correction = 1;
    r.phase_smoother = 1;
    auto& s = c.source;
    s.type = paq::config::source_type::tcp;
    s.stall_timeout_s = 0.7;
    s.file.path = "/data/a b/\"quoted\".cf32";
    s.file.raw_format = paq::io::sample_format::cf32_le;
    s.file.raw_sample_rate_hz = 25e6 / 3.0;
    s.file.raw_ci16_scale = 1000.5f;
    s.file.channel = 2;
    s.file.raw_channels = 3;
    s.file.paced = false;
    s.file.rate_factor = 2.5;
    s.file.loop = true;
    s.file.chunk_samples = 4097;
    s.tcp.mode = paq::io::tcp_mode::listen;
    s.tcp.host = "::1";
    s.tcp.port = 0;
    s.tcp.format = paq::io::sample_format::cf32_le;
    s.tcp.ci16_scale = 100.25f;
    s.tcp.sample_rate_hz = 20e6 / 3.0;
    s.tcp.rcvbuf_bytes = 1 << 20;
    s.tcp.retry_initial_s = 0.25;
    s.tcp.retry_max_s = 9.5;
    s.tcp.end_on_close = true;
    s.tcp.allow = {"10.0.0.0/8", "::1"};
    s.udp.bind_address = "127.0.0.1";
    s.udp.port = 6000;
    s.udp.format = paq::io::sample_format::cf32_le;
    s.udp.ci16_scale = 2.0f;
    s.udp.sample_rate_hz = 1e3;
    s.udp.rcvbuf_bytes = 0;
    s.udp.allow = {"192.168.1.0/24"};
    s.udp.header = paq::io::udp_header::gnuradio_seq_size;
    s.zmq.endpoint = "ipc:///run/gr.sock";
    s.zmq.pattern = paq::io::zmq_pattern::pull;
    s.zmq.format = paq::io::sample_format::ci16_le;
    s.zmq.ci16_scale = 3.0f;
    s.zmq.sample_rate_hz = 2e6;
    s.zmq.high_water_mark = 50;
    s.zmq.max_message_bytes = 4096;
    s.zmq.tags = paq::io::zmq_tags::gnuradio;
    s.vita49.bind_address = "::";
    s.vita49.port = 4992;
    s.vita49.stream_change = paq::io::stream_change_policy::stay;
    s.vita49.stream_timeout_ms = 3'600'000;
    s.vita49.ci16_scale = 1e9f;
    s.vita49.sample_rate_hz = 1e7 / 3.0;
    s.vita49.context_timeout_s = 0.1;
    s.vita49.rcvbuf_bytes = 1 << 30;
    s.vita49.allow = {"fd00::/8"};
    s.iio.uri = "usb:1.2.5";
    s.iio.phy_device = "ad9364-phy";
    s.iio.rx_device = "cf-ad9364-lpc";
    s.iio.sample_rate_hz = 30.72e6;
    s.iio.lo_hz = 1.4e9 + 1.0 / 3.0;
    s.iio.rf_bandwidth_hz = 18e6;
    s.iio.gain_mode = paq::io::iio_gain_mode::manual;
    s.iio.gain_db = 71;
    s.iio.buffer_samples = 1 << 20;
    s.iio.reconnect_interval_s = 0.5;
    s.iio.reconnect_max_interval_s = 600;
    s.iio.timeout_ms = 60'000;
    s.iio.scale = 2048.0f;
    c.ring.capacity_s = 60;
    c.ring.overflow = paq::config::ring_overflow::block;
    c.ring.lock_memory = false;
    c.pipeline.backend = paq::config::backend_kind::cuda;
    c.pipeline.gpus = {3, 0, 63};
    c.pipeline.solver = "cusolver-sp-qr";
    c.pipeline.cpu_workers = 64;
    c.pipeline.queue_depth = 16;
    c.pipeline.cpu_fallback = false;
    c.publisher.enabled = false;
    c.publisher.udp.destinations = {"", "[::1]:7001", "", "host.example:7003", "", ""};
    c.publisher.udp.format = paq::io::bitstream_format::dqe_raw;
    c.publisher.udp.dqe_id.fixed_id = 65535;
    c.publisher.udp.send_buffer_bytes = 4096;
    c.publisher.udp.max_datagrams_per_second = 0;
    c.monitor.pattern = paq::dsp::pn_pattern::pn31;
    c.monitor.status_interval_s = 3600;
    c.records.base = "/var/lib/paqd/records/flight 7";
    c.records.decimation = 1'000'000;
    c.records.channel_decimation = 1;
    c.recording.base = "/var/lib/paqd/recordings/flight";
    c.recording.format = paq::io::sample_format::cf32_le;
    c.recording.queue_mib = 65536;
    c.metrics.enabled = false;
    c.metrics.bind = "0.0.0.0";
    c.metrics.port = 0;
    c.log.level = paq::config::log_level::debug;
    c.log.destination = paq::config::log_destination::journal;
    return c;
}

TEST(ConfigSchema, RoundTripEveryFieldChanged) {
    const daemon_config c = every_field_changed();
    // Each key of every section differs from its default (a field to_yaml leaves out, or one
    // the parser does not read, would come back as the default).
    const daemon_config defaults;
    EXPECT_NE(paq::config::to_yaml(c), paq::config::to_yaml(defaults));
    expect_same(round_trip(c), c);

    // The two settings that cannot both differ in one document: with a stream id the policy
    // is not written (an explicit follow beside it is an error), and the publisher's stream id
    // in the DQE word instead of a fixed one.
    daemon_config d = c;
    d.source.vita49.stream_id = 0xfffffffeu;
    d.source.vita49.stream_change = paq::io::stream_change_policy::follow;
    d.source.vita49.sample_rate_hz = 0;  // from the named sender's and stream's context packets
    d.publisher.udp.dqe_id.use_stream_id = true;
    d.publisher.udp.dqe_id.fixed_id = 0;
    d.monitor.pattern.reset();
    expect_same(round_trip(d), d);
}

// A document that sets `key` of `section` ("source.iio") to `value` (YAML text), with a
// VITA-49 source (or `type`) so that the document is otherwise valid, plus `extra` lines at
// the same level as key.
std::string document_with(const std::string& section, const std::string& key, const std::string& value,
                          const std::string& type = "vita49", const std::vector<std::string>& extra = {}) {
    std::vector<std::string> parts;
    std::stringstream path(section);
    for (std::string p; std::getline(path, p, '.');) parts.push_back(p);
    std::string out;
    std::string indent;
    for (const auto& p : parts) {
        out += indent + p + ":\n";
        indent += "  ";
        if (p == "source" && indent == "  " && !(section == "source" && key == "type")) {
            out += "  type: " + type + "\n";
            if (type == "file" && section != "source.file") out += "  file: {path: rec.sigmf-meta}\n";
        }
    }
    out += indent + key + ": " + value + "\n";
    for (const auto& line : extra) out += indent + line + "\n";
    if (parts.front() != "source") out += "source:\n  type: " + type + "\n";
    if (parts.front() != "source" && type == "file") out += "  file: {path: rec.sigmf-meta}\n";
    return out;
}

std::string number_yaml(double v, bool integer) {
    if (integer) return std::to_string(static_cast<long long>(v));
    std::ostringstream os;
    os << std::setprecision(17) << v;
    return os.str();
}

// Values just outside a range, and values at (or, for an open bound, just inside) its ends.
std::vector<double> outside(const paq::config::numeric_range& r) {
    if (!r.values.empty()) {
        return {*std::min_element(r.values.begin(), r.values.end()) - 1,
                *std::max_element(r.values.begin(), r.values.end()) + 1};
    }
    const double step_lo = r.integer ? 1.0 : std::max(std::fabs(r.lo) * 1e-3, 1e-9);
    const double step_hi = r.integer ? 1.0 : std::max(std::fabs(r.hi) * 1e-3, 1e-9);
    std::vector<double> out{r.lo_open ? r.lo : r.lo - step_lo, r.hi_open ? r.hi : r.hi + step_hi};
    if (r.power_of_two) out.push_back(r.lo + 1);
    return out;
}

std::vector<double> inside(const paq::config::numeric_range& r) {
    if (!r.values.empty()) return r.values;
    const double span = (r.hi - r.lo) * 1e-3;
    std::vector<double> out{r.lo_open ? r.lo + span : r.lo, r.hi_open ? r.hi - span : r.hi};
    if (r.also) out.push_back(*r.also);
    return out;
}

// The source type whose sub-section holds the field ("source.tcp" -> tcp), so that its own
// checks run too; other sections: a VITA-49 source.
std::string type_for(const std::string& section) {
    return section.starts_with("source.") ? section.substr(7) : "vita49";
}

// Settings a value at the end of a range needs beside it to pass the source's checks that
// involve two keys (a bound of one is not a contradiction of the other's default).
std::vector<std::string> companions(const std::string& section, const std::string& key) {
    if (section == "source.file" && key == "second_channel") return {"path: rec.sigmf-meta", "channel: 3"};
    if (section == "source.file") return {"path: rec.sigmf-meta"};
    if (section == "source.tcp" && key == "port") return {"mode: listen"};
    if (section == "source.tcp" && key == "retry_max_s") return {"retry_initial_s: 0.001"};
    if (section == "source.tcp" && key == "retry_initial_s") return {"retry_max_s: 600"};
    if (section == "source.iio" && key == "reconnect_max_interval_s") return {"reconnect_interval_s: 0.1"};
    if (section == "source.iio" && key == "reconnect_interval_s") return {"reconnect_max_interval_s: 600"};
    if (section == "source.vita49" && key == "sample_rate_hz") return {"allow: [192.0.2.7]", "stream_id: 7"};
    if (section == "source.vita49" && key == "second_stream_id") return {"stream_id: 7"};
    return {};
}

TEST(ConfigSchema, EveryRangeRefusesAValueJustOutsideWithOneMessageNamingKeyValueAndRange) {
    std::size_t checked = 0;
    for (const auto& f : paq::config::schema()) {
        const std::string path = f.section + "." + f.key;
        SCOPED_TRACE(path);
        if (f.range) {
            EXPECT_TRUE(contains(f.allowed, f.range->text())) << f.allowed;
            for (const double v : outside(*f.range)) {
                const std::string value = number_yaml(v, f.range->integer);
                const bool list = f.type == "list";
                const std::string yaml = document_with(f.section, f.key, list ? "[" + value + "]" : value);
                SCOPED_TRACE(yaml);
                const auto errors = daemon_errors(yaml);
                ASSERT_EQ(errors.size(), 1u) << ::testing::PrintToString(errors);
                const std::string expected = (list ? path + ": " + value : path + " = " + value) +
                                             " is out of range (allowed: " + f.range->text() + ")";
                EXPECT_TRUE(contains(errors[0], expected)) << errors[0] << "\nexpected: " << expected;
                ++checked;
            }
            // The ends are accepted, also by the selected source's own checks (one range: no
            // second check with a narrower one behind the schema's).
            for (const double v : inside(*f.range)) {
                const std::string value = number_yaml(v, f.range->integer);
                std::string yaml = document_with(f.section, f.key, f.type == "list" ? "[" + value + "]" : value,
                                                 type_for(f.section), companions(f.section, f.key));
                // Two receive channels go with a source of two, and a source of two with them.
                if (path == "receiver.channels" && v == 2.0) {
                    yaml = "receiver:\n  channels: 2\nsource:\n  type: file\n  file: {path: rec.sigmf-meta, channel: 1, "
                           "second_channel: 2}\n";
                }
                const bool two_channel_source = path == "source.file.second_channel" || path == "source.vita49.second_stream_id" ||
                                                (f.section != "source.file" && f.section.starts_with("source.") &&
                                                 f.key == "channels" && v == 2.0);
                if (two_channel_source) yaml += "receiver:\n  channels: 2\n";
                SCOPED_TRACE(yaml);
                try {
                    (void)parse_daemon_config(yaml, "paqd.yaml");
                } catch (const config_error& e) {
                    // A source's rate at an end of its range can be one the receiver cannot take
                    // at its bit rate: that is the check across sections, not a narrower range.
                    const bool rate_check = (f.key == "sample_rate_hz" || f.key == "bit_rate_hz") &&
                                            std::all_of(e.messages().begin(), e.messages().end(), [](const std::string& m) {
                                                return contains(m, "samples per bit: allowed 2 .. 6.4");
                                            });
                    if (!rate_check) ADD_FAILURE() << e.what();
                }
            }
        } else if (f.type == "choice") {
            ASSERT_FALSE(f.choices.empty());
            for (const auto& name : f.choices) {
                const std::string yaml = document_with(f.section, f.key, name, f.key == "type" ? name : "vita49",
                                                       f.key == "type" ? std::vector<std::string>{"file: {path: r}"}
                                                                       : std::vector<std::string>{});
                SCOPED_TRACE(yaml);
                try {
                    (void)parse_daemon_config(yaml, "paqd.yaml");
                } catch (const config_error& e) {
                    // The other sources' own checks want what the default sub-sections lack.
                    if (!(f.section == "source" && name != "vita49" && name != "file")) ADD_FAILURE() << e.what();
                }
            }
            const auto errors = daemon_errors(document_with(f.section, f.key, "no-such-value", "vita49",
                                                            f.key == "type" ? std::vector<std::string>{"file: {path: r}"}
                                                                            : std::vector<std::string>{}));
            ASSERT_EQ(errors.size(), 1u) << ::testing::PrintToString(errors);
            EXPECT_TRUE(contains(errors[0], path + ": got 'no-such-value' (allowed: " + f.allowed + ")")) << errors[0];
            ++checked;
        } else if (f.type == "boolean") {
            const auto errors = daemon_errors(document_with(f.section, f.key, "yes"));
            ASSERT_EQ(errors.size(), 1u) << ::testing::PrintToString(errors);
            EXPECT_TRUE(contains(errors[0], path + ": expected true or false, got 'yes'")) << errors[0];
            ++checked;
        }
    }
    EXPECT_GT(checked, 100u);
}

TEST(ConfigSchema, EveryFieldIsDocumented) {
    std::set<std::string> keys;
    for (const auto& f : paq::config::schema()) {
        SCOPED_TRACE(f.section + "." + f.key);
        EXPECT_FALSE(f.doc.empty());
        EXPECT_FALSE(f.allowed.empty());
        EXPECT_FALSE(f.default_text.empty());
        EXPECT_TRUE(keys.insert(f.section + "." + f.key).second) << "listed twice";
    }
    EXPECT_EQ(paq::config::schema_sections(),
              (std::vector<std::string>{"receiver", "source", "source.file", "source.tcp", "source.udp",
                                        "source.vita49", "source.iio", "source.zmq", "ring", "pipeline", "publisher", "monitor",
                                        "records", "recording", "metrics", "log"}));
}

TEST(ConfigSchema, IioGainHasOneRangeWhateverTheValueAndTheSource) {
    // 80 used to be refused by the radio's check ("-3 .. 71 dB") and 150 by the parser
    // ("-100 .. 100"). Now both by the one range, with the same message, selected or not.
    for (const std::string type : {"iio", "vita49"}) {
        SCOPED_TRACE(type);
        for (const std::string value : {"80", "150", "-4", "-100.5"}) {
            const auto errors =
                daemon_errors("source:\n  type: " + type + "\n  iio:\n    gain_mode: manual\n    gain_db: " + value + "\n");
            ASSERT_EQ(errors.size(), 1u) << ::testing::PrintToString(errors);
            EXPECT_EQ(errors[0], "paqd.yaml:5: source.iio.gain_db = " + value + " is out of range (allowed: -3 .. 71)");
        }
        EXPECT_EQ(parse_daemon_config("source:\n  type: " + type + "\n  iio:\n    gain_db: 71\n").source.iio.gain_db, 71.0);
        EXPECT_EQ(parse_daemon_config("source:\n  type: " + type + "\n  iio:\n    gain_db: -3\n").source.iio.gain_db, -3.0);
    }
    // The radio's own check (iio_config::validate, run when the source starts) agrees.
    paq::io::iio_config c;
    c.gain_db = 71;
    EXPECT_TRUE(c.validate().empty());
    c.gain_db = 71.5;
    EXPECT_FALSE(c.validate().empty());
}

TEST(ConfigSchema, UnknownKeysNameTheSectionAndListTheKnownOnes) {
    auto errors = daemon_errors("source:\n  type: iio\n  iio:\n    gain: 30\n");
    ASSERT_EQ(errors.size(), 1u);
    EXPECT_EQ(errors[0], "paqd.yaml:4: unknown key 'gain' in 'source.iio' (known: uri, phy_device, rx_device, "
                         "sample_rate_hz, lo_hz, rf_bandwidth_hz, gain_mode, gain_db, buffer_samples, "
                         "reconnect_interval_s, reconnect_max_interval_s, timeout_ms, scale, channels)");
    errors = daemon_errors("source:\n  type: vita49\nreceiver:\n  cma_muu: 0.01\n");
    ASSERT_EQ(errors.size(), 1u);
    EXPECT_TRUE(errors[0].starts_with("paqd.yaml:4: unknown key 'cma_muu' in 'receiver', did you mean 'cma_mu'?"))
        << errors[0];
    errors = daemon_errors("source:\n  type: vita49\nrecever: {}\n");
    ASSERT_EQ(errors.size(), 1u);
    EXPECT_EQ(errors[0], "paqd.yaml:3: unknown key 'recever' at the top level, did you mean 'receiver'? (known: "
                         "receiver, source, ring, pipeline, publisher, monitor, records, recording, metrics, log)");
}

TEST(ConfigSchema, MarkdownRegionsAreReplacedAndChecked) {
    std::string doc = "# title\n";
    for (const auto& s : paq::config::schema_sections()) doc += "<!-- schema:begin " + s + " -->\nOLD TABLE\n<!-- schema:end -->\n";
    const std::string updated = paq::config::update_schema_markdown(doc);
    EXPECT_FALSE(contains(updated, "OLD TABLE"));
    EXPECT_TRUE(contains(updated, "| `gain_db` | `30` | -3 .. 71 | dB | manual gain;")) << updated;
    EXPECT_EQ(paq::config::update_schema_markdown(updated), updated);
    EXPECT_THROW((void)paq::config::update_schema_markdown("<!-- schema:begin ring -->\n"), std::invalid_argument);
    EXPECT_THROW((void)paq::config::update_schema_markdown("<!-- schema:begin rings -->\n<!-- schema:end -->\n"),
                 std::invalid_argument);
    EXPECT_THROW((void)paq::config::update_schema_markdown("# no regions\n"), std::invalid_argument);
}

}  // namespace

// receiver.detector both: twelve streams. The trellis streams' destinations default to ports
// 50006 .. 50011 and are written only when the receiver makes them; a file that lists one
// with another detector is refused at its line.
TEST(daemon_config, detector_both_and_the_trellis_streams_destinations)
{
    const auto both = paq::config::parse_daemon_config("source:\n  type: vita49\nreceiver:\n  detector: both\n");
    EXPECT_EQ(both.receiver.streams(), 12);
    const auto effective = both.publisher.for_streams(both.receiver.streams());
    EXPECT_EQ(effective.destinations[0], "127.0.0.1:50000");
    EXPECT_EQ(effective.destinations[6], "127.0.0.1:50006");
    EXPECT_EQ(effective.destinations[11], "127.0.0.1:50011");
    const auto text = paq::config::to_yaml(both);
    EXPECT_TRUE(contains(text, "    mmse_trellis: \"127.0.0.1:50008\"\n")) << text;
    EXPECT_EQ(paq::config::to_yaml(paq::config::parse_daemon_config(text)), text);

    const auto sxs = paq::config::parse_daemon_config("source:\n  type: vita49\n");
    EXPECT_EQ(sxs.receiver.streams(), 6);
    EXPECT_TRUE(sxs.publisher.for_streams(6).destinations[6].empty());
    EXPECT_FALSE(contains(paq::config::to_yaml(sxs), "_trellis")) << paq::config::to_yaml(sxs);

    // Only the listed streams, trellis ones included, with detector both.
    const auto listed = paq::config::parse_daemon_config(
        "source:\n  type: vita49\nreceiver:\n  detector: both\npublisher:\n  destinations:\n    mmse: 10.0.0.1:6002\n"
        "    mmse_trellis: 10.0.0.1:6008\n");
    const auto l = listed.publisher.for_streams(12);
    for (std::size_t i = 0; i < l.destinations.size(); ++i) {
        EXPECT_EQ(l.destinations[i].empty(), i != 2 && i != 8) << i;
    }
    EXPECT_EQ(l.destinations[8], "10.0.0.1:6008");
    try {
        (void)paq::config::parse_daemon_config(
            "source:\n  type: vita49\nreceiver:\n  detector: trellis\npublisher:\n  destinations:\n    mmse: 10.0.0.1:6002\n"
            "    fde2_trellis: 10.0.0.1:6011\n",
            "t.yaml");
        ADD_FAILURE() << "a trellis stream's destination was accepted with detector trellis";
    } catch (const std::exception& e) {
        const std::string what = e.what();
        EXPECT_TRUE(contains(what, "t.yaml:8: publisher.destinations.fde2_trellis: a trellis stream, but receiver.detector is trellis"))
            << what;
    }
}

// publisher.llr_destinations: the soft streams, per path; off by default and not written
// then; written back and read again when set; refused at their line without the trellis, and
// a bad host:port named.
TEST(daemon_config, soft_stream_destinations)
{
    const auto plain = paq::config::parse_daemon_config("source:\n  type: vita49\nreceiver:\n  detector: trellis\n");
    EXPECT_FALSE(plain.publisher.any_llr());
    EXPECT_FALSE(contains(paq::config::to_yaml(plain), "llr_destinations")) << paq::config::to_yaml(plain);

    const auto soft = paq::config::parse_daemon_config(
        "source:\n  type: vita49\nreceiver:\n  detector: trellis\npublisher:\n  llr_destinations:\n    mmse: 127.0.0.1:50102\n"
        "    fde2: \"[::1]:50105\"\n");
    EXPECT_TRUE(soft.publisher.any_llr());
    EXPECT_EQ(soft.publisher.udp.llr_destinations[2], "127.0.0.1:50102");
    EXPECT_EQ(soft.publisher.udp.llr_destinations[5], "[::1]:50105");
    EXPECT_TRUE(soft.publisher.udp.llr_destinations[0].empty());
    const auto text = paq::config::to_yaml(soft);
    EXPECT_TRUE(contains(text, "  llr_destinations:\n    mmse: \"127.0.0.1:50102\"\n    fde2: \"[::1]:50105\"\n")) << text;
    EXPECT_EQ(paq::config::to_yaml(paq::config::parse_daemon_config(text)), text);
    // With detector both as well (the LLRs are those of the `_trellis` streams).
    EXPECT_NO_THROW((void)paq::config::parse_daemon_config(
        "source:\n  type: vita49\nreceiver:\n  detector: both\npublisher:\n  llr_destinations:\n    none: 127.0.0.1:50100\n"));

    // Made in code with the symbol-by-symbol detector: not written (it would not read back).
    auto sxs = soft;
    sxs.receiver.detector = paq::dsp::detector_kind::sxs;
    EXPECT_FALSE(contains(paq::config::to_yaml(sxs), "llr_destinations")) << paq::config::to_yaml(sxs);

    refused("source:\n  type: vita49\npublisher:\n  llr_destinations:\n    mmse: 127.0.0.1:50102\n",
            "t.yaml:5: publisher.llr_destinations.mmse: the LLRs are the trellis's, but receiver.detector is sxs");
    refused("source:\n  type: vita49\nreceiver:\n  detector: trellis\npublisher:\n  llr_destinations:\n    cma: 127.0.0.1\n",
            "llr_destinations[3] (cma): destination '127.0.0.1' has no ':port'");
    refused("source:\n  type: vita49\nreceiver:\n  detector: trellis\npublisher:\n  llr_destinations:\n    mmse_trellis: 127.0.0.1:1\n",
            "mmse_trellis");
}

// publisher.decoded_destinations: the decoded streams, per stream; off by default and not
// written then; written back and read again when set; refused at their line without a code or
// (the `_trellis` ones) without detector both, and a bad host:port named.
TEST(daemon_config, decoded_stream_destinations)
{
    const auto plain = paq::config::parse_daemon_config("source:\n  type: vita49\nreceiver:\n  fec: ar4ja-4096-2/3\n");
    EXPECT_FALSE(plain.publisher.any_decoded());
    EXPECT_FALSE(contains(paq::config::to_yaml(plain), "decoded_destinations")) << paq::config::to_yaml(plain);

    const auto coded = paq::config::parse_daemon_config(
        "source:\n  type: vita49\nreceiver:\n  fec: ar4ja-4096-2/3\n  detector: both\npublisher:\n  decoded_destinations:\n"
        "    mmse: 127.0.0.1:50202\n    fde2_trellis: \"[::1]:50211\"\n");
    EXPECT_TRUE(coded.publisher.any_decoded());
    EXPECT_EQ(coded.publisher.udp.decoded_destinations[2], "127.0.0.1:50202");
    EXPECT_EQ(coded.publisher.udp.decoded_destinations[11], "[::1]:50211");
    const auto effective = coded.publisher.for_streams(coded.receiver.streams(), coded.receiver.fec);
    EXPECT_EQ(effective.fec, paq::dsp::fec_code::k4096_r2_3);
    EXPECT_EQ(effective.decoded_destinations[11], "[::1]:50211");
    EXPECT_TRUE(coded.publisher.for_streams(6, coded.receiver.fec).decoded_destinations[11].empty());
    const auto text = paq::config::to_yaml(coded);
    EXPECT_TRUE(contains(text, "  decoded_destinations:\n    mmse: \"127.0.0.1:50202\"\n    fde2_trellis: \"[::1]:50211\"\n")) << text;
    EXPECT_EQ(paq::config::to_yaml(paq::config::parse_daemon_config(text)), text);

    refused("source:\n  type: vita49\npublisher:\n  decoded_destinations:\n    mmse: 127.0.0.1:50202\n",
            "t.yaml:5: publisher.decoded_destinations.mmse: a decoded stream, but receiver.fec is none");
    refused("source:\n  type: vita49\nreceiver:\n  fec: ar4ja-1024-1/2\npublisher:\n  decoded_destinations:\n    zf_trellis: 127.0.0.1:1\n",
            "t.yaml:7: publisher.decoded_destinations.zf_trellis: a trellis stream, but receiver.detector is sxs");
    refused("source:\n  type: vita49\nreceiver:\n  fec: ar4ja-1024-1/2\npublisher:\n  decoded_destinations:\n    cma: 127.0.0.1\n",
            "decoded_destinations[3] (cma): destination '127.0.0.1' has no ':port'");
    refused("source:\n  type: vita49\nreceiver:\n  fec: ar4ja-1024-1/2\npublisher:\n  decoded_destinations:\n    mmse_soft: 127.0.0.1:1\n",
            "mmse_soft");
    // The continuous stream: decoded on either backend, its decoded frames published.
    EXPECT_NO_THROW((void)paq::config::parse_daemon_config(
        "source:\n  type: vita49\nreceiver:\n  fec: ar4ja-4096-1/2\npublisher:\n  decoded_destinations:\n    mmse: 127.0.0.1:50202\n"));
    EXPECT_NO_THROW((void)paq::config::parse_daemon_config(
        "source:\n  type: vita49\nreceiver:\n  fec: ar4ja-1024-4/5\npipeline:\n  backend: cuda\npublisher:\n  enabled: false\n"));
    EXPECT_NO_THROW((void)paq::config::parse_daemon_config("source:\n  type: vita49\nreceiver:\n  fec: ar4ja-4096-4/5\n"));
}

// paqd.yaml(5) from the schema: every section a .SH and every key a .B line, in order, with
// no line that roff would read as a request by accident.
TEST(ConfigSchema, TheManPageListsEverySectionAndKey) {
  const std::string man = paq::config::schema_man_page("9.9.9");
  EXPECT_EQ(man.rfind(".TH PAQD.YAML 5 \"\" \"paqd 9.9.9\"", 0), 0u) << man.substr(0, 80);
  std::size_t at = 0;
  for (const auto& f : paq::config::schema()) {
    std::string key;
    for (const char c : f.key) key += c == '-' ? std::string("\\-") : std::string(1, c);
    const auto k = man.find("\n.B " + key + "\n", at);
    ASSERT_NE(k, std::string::npos) << f.section << "." << f.key;
    at = k;
  }
  for (const auto& s : paq::config::schema_sections()) EXPECT_NE(man.find("\n.SH " + s + "\n"), std::string::npos) << s;
  std::istringstream in(man);
  std::string line;
  const std::vector<std::string> requests = {".TH", ".SH", ".SS", ".TP", ".B", ".br", ".PP"};
  while (std::getline(in, line)) {
    if (line.empty() || line[0] != '.') continue;
    const std::string req = line.substr(0, line.find(' '));
    EXPECT_NE(std::find(requests.begin(), requests.end(), req), requests.end()) << "stray request: " << line;
  }
}
