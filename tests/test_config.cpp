// Tests of the YAML binding of the receiver parameters (config/receiver_yaml.hpp).
#include "config/receiver_yaml.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

namespace {

using paq::config::config_error;
using paq::config::load_receiver_config;
using paq::config::parse_receiver_config;
using paq::config::to_yaml;
using paq::dsp::receiver_config;

bool contains(std::string_view haystack, std::string_view needle) {
    return haystack.find(needle) != std::string_view::npos;
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
    const std::string yaml =
        "daemon:\n"
        "  listen: 0.0.0.0:5000\n"
        "  receiver: not this one\n"
        "sources:\n"
        "  - name: antenna-a\n"
        "    cma_mu: 42\n";
    expect_same(parse_receiver_config(yaml), receiver_config{});
}

TEST(ReceiverYaml, EmptyReceiverSectionGivesDefaults) {
    expect_same(parse_receiver_config("receiver:\n"), receiver_config{});
    expect_same(parse_receiver_config("receiver: {}\n"), receiver_config{});
}

TEST(ReceiverYaml, OtherSectionsAreIgnored) {
    const std::string yaml =
        "daemon: {threads: [1, 2, 3], unknown_key: yes}\n"
        "receiver:\n"
        "  cma_iterations: 30\n"
        "sources: 17\n"
        "[1, 2]: complex key\n";
    const auto config = parse_receiver_config(yaml);
    EXPECT_EQ(config.cma_iterations, 30);
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
    ASSERT_TRUE(c.validate().empty());
    const std::string yaml = to_yaml(c);
    SCOPED_TRACE(yaml);
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
    EXPECT_TRUE(contains(parse_error("receiver:\n  cma_mu: .nan\n"), "receiver.cma_mu = nan"));
    EXPECT_TRUE(contains(parse_error("receiver:\n  pll_bn_t: .inf\n"), "receiver.pll_bn_t = inf"));
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
                                  "pll_bn_t, pll_acquisition_bn_t, pll_damping, cpu_threads)"))
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
        const std::string yaml = std::string("daemon: {}\nreceiver:\n  ") + c.line + "\n";
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
    const std::string indent = parse_error("daemon: {}\nreceiver:\n  cma_mu: 0.002\n   cma_iterations: 12\n");
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

}  // namespace
