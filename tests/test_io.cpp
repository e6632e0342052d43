// Tests of io/: sample formats, SigMF metadata, and the recording reader and writer.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <sys/stat.h>
#include <unistd.h>

#include "dsp/types.hpp"
#include "io/bulk_copy.hpp"
#include "io/sample_file.hpp"
#include "io/sample_format.hpp"
#include "io/sigmf.hpp"
#include "io/utc_time.hpp"
#include "io/sigmf_archive.hpp"

namespace {

namespace fs = std::filesystem;
using paq::cf32;
using namespace paq::io;

// Every test gets its own directory: ctest runs tests as parallel processes of one binary, so
// the name carries the pid as well as the test name.
class io_test : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / ("paq_test_io_" + std::string(info->name()) + "_" +
                                        std::to_string(::getpid()));
    fs::remove_all(dir_);
    ASSERT_TRUE(fs::create_directories(dir_));
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  [[nodiscard]] fs::path path(const std::string& name) const { return dir_ / name; }

  fs::path dir_;
};

[[nodiscard]] std::vector<cf32> random_samples(std::size_t n, std::uint64_t seed,
                                               float max_abs = 3.9f) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(-max_abs, max_abs);
  std::vector<cf32> v(n);
  for (auto& s : v) {
    const float re = dist(rng);
    const float im = dist(rng);
    s = cf32(re, im);
  }
  return v;
}

[[nodiscard]] std::vector<cf32> read_all(sample_file_reader& reader, std::size_t chunk) {
  std::vector<cf32> all;
  std::vector<cf32> buf(chunk);
  for (;;) {
    const std::size_t got = reader.read(buf);
    if (got == 0) break;
    all.insert(all.end(), buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(got));
  }
  return all;
}

// Bitwise comparison, reported as a count plus the first index, so that a failure on a
// 300k-sample vector prints one line instead of the whole vector.
[[nodiscard]] ::testing::AssertionResult bit_identical(const std::vector<cf32>& a,
                                                       const std::vector<cf32>& b) {
  if (a.size() != b.size()) {
    return ::testing::AssertionFailure() << "sizes differ: " << a.size() << " vs " << b.size();
  }
  for (std::size_t k = 0; k < a.size(); ++k) {
    if (std::memcmp(&a[k], &b[k], sizeof(cf32)) != 0) {
      return ::testing::AssertionFailure()
             << "first difference at " << k << ": " << a[k] << " vs " << b[k];
    }
  }
  return ::testing::AssertionSuccess();
}

[[nodiscard]] ::testing::AssertionResult within(const std::vector<cf32>& expected,
                                                const std::vector<cf32>& actual, float tol) {
  if (expected.size() != actual.size()) {
    return ::testing::AssertionFailure()
           << "sizes differ: " << expected.size() << " vs " << actual.size();
  }
  for (std::size_t k = 0; k < expected.size(); ++k) {
    if (std::abs(expected[k].real() - actual[k].real()) > tol ||
        std::abs(expected[k].imag() - actual[k].imag()) > tol) {
      return ::testing::AssertionFailure() << "sample " << k << ": " << actual[k]
                                           << " is not within " << tol << " of " << expected[k];
    }
  }
  return ::testing::AssertionSuccess();
}

// Quantisation error is at most half a count; the float product value * scale adds up to
// 32767 * 2^-24 counts (about 0.002) of rounding before that, hence the small extra slack.
[[nodiscard]] float ci16_tolerance(float scale) { return 0.5f / scale + 1e-6f; }

void write_text(const fs::path& p, const std::string& text) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f << text;
  ASSERT_TRUE(f.good()) << p;
}

void append_bytes(const fs::path& p, std::size_t n) {
  std::ofstream f(p, std::ios::binary | std::ios::app);
  for (std::size_t k = 0; k < n; ++k) f.put(static_cast<char>(0x5A));
  ASSERT_TRUE(f.good()) << p;
}

[[nodiscard]] nlohmann::json read_json(const fs::path& p) {
  std::ifstream f(p);
  return nlohmann::json::parse(f);
}

// Runs fn, expecting an exception of type E whose message contains every one of parts.
template <typename E>
void expect_error(const std::function<void()>& fn, const std::vector<std::string>& parts) {
  try {
    fn();
    ADD_FAILURE() << "no exception thrown";
  } catch (const E& e) {
    const std::string what = e.what();
    for (const auto& part : parts) {
      EXPECT_NE(what.find(part), std::string::npos) << "'" << part << "' not in: " << what;
    }
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong exception type: " << e.what();
  }
}

[[nodiscard]] sigmf_meta basic_meta(sample_format format) {
  sigmf_meta meta;
  meta.format = format;
  meta.sample_rate_hz = 20.625e6;
  return meta;
}

// A meta file with the given global object and an empty capture list.
void write_meta_with_global(const fs::path& meta_path, const nlohmann::json& global) {
  nlohmann::json doc = {{"global", global},
                        {"captures", nlohmann::json::array({{{"core:sample_start", 0}}})},
                        {"annotations", nlohmann::json::array()}};
  write_text(meta_path, doc.dump());
}

// ---------------------------------------------------------------------------------------------
// sample_format

// The ring's copy into the windows: memcpy's result for every size around the streaming
// threshold and every alignment of either end, the bytes beside the destination untouched.
TEST(bulk_copy, equals_memcpy_at_every_alignment_and_size)
{
    constexpr std::size_t big = paq::io::bulk_copy_streaming_bytes;
    std::vector<unsigned char> src(big + 4096), dst(big + 4096), want(big + 4096);
    std::mt19937 rng(2718);
    for (auto& b : src) b = static_cast<unsigned char>(rng());
    for (const std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{63}, std::size_t{4096}, big - 1, big, big + 1, big + 63, big + 1000}) {
        for (std::size_t so = 0; so < 16; so += 5) {
            for (std::size_t d_off = 0; d_off < 16; d_off += 3) {
                std::fill(dst.begin(), dst.end(), 0xa5);
                want = dst;
                std::memcpy(want.data() + d_off, src.data() + so, n);
                paq::io::bulk_copy(dst.data() + d_off, src.data() + so, n);
                ASSERT_EQ(dst, want) << "bytes " << n << ", offsets " << so << "/" << d_off;
            }
        }
    }
}

TEST(sample_format, parse_accepts_long_and_short_names) {
  EXPECT_EQ(parse_sample_format("cf32_le"), sample_format::cf32_le);
  EXPECT_EQ(parse_sample_format("cf32"), sample_format::cf32_le);
  EXPECT_EQ(parse_sample_format("ci16_le"), sample_format::ci16_le);
  EXPECT_EQ(parse_sample_format("ci16"), sample_format::ci16_le);
}

TEST(sample_format, parse_rejects_unknown_with_accepted_list) {
  for (const char* bad : {"cf64", "CF32", "", "ci16_be", "cu8"}) {
    expect_error<std::invalid_argument>([&] { (void)parse_sample_format(bad); },
                                        {"'" + std::string(bad) + "'", "cf32_le", "ci16_le",
                                         "cf32,", "ci16"});
  }
}

TEST(sample_format, names_and_sizes) {
  EXPECT_EQ(to_sigmf_datatype(sample_format::cf32_le), "cf32_le");
  EXPECT_EQ(to_sigmf_datatype(sample_format::ci16_le), "ci16_le");
  EXPECT_EQ(bytes_per_sample(sample_format::cf32_le), 8u);
  EXPECT_EQ(bytes_per_sample(sample_format::ci16_le), 4u);
}

TEST(sample_format, byte_layout_is_little_endian_i_then_q) {
  const cf32 s(1.0f, -2.0f);
  std::byte f32[8];
  EXPECT_EQ(encode(sample_format::cf32_le, &s, 1, f32, default_ci16_scale), 0u);
  const unsigned char f32_expected[8] = {0x00, 0x00, 0x80, 0x3F, 0x00, 0x00, 0x00, 0xC0};
  EXPECT_EQ(std::memcmp(f32, f32_expected, 8), 0);

  const cf32 q(1.0f / 8192.0f, -1.0f / 8192.0f);
  std::byte i16[4];
  EXPECT_EQ(encode(sample_format::ci16_le, &q, 1, i16, 8192.0f), 0u);
  const unsigned char i16_expected[4] = {0x01, 0x00, 0xFF, 0xFF};
  EXPECT_EQ(std::memcmp(i16, i16_expected, 4), 0);

  cf32 back;
  decode(sample_format::ci16_le, i16, 1, &back, 8192.0f);
  EXPECT_EQ(back, q);
  decode(sample_format::cf32_le, f32, 1, &back, 8192.0f);
  EXPECT_EQ(back, s);
}

TEST(sample_format, ci16_rounds_to_nearest_and_saturates) {
  constexpr float scale = 100.0f;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<cf32> in = {
      {0.014f, -0.016f},        // 1.4 -> 1, -1.6 -> -2
      {327.674f, -327.674f},    // 32767.4 rounds into range: not clipped
      {327.676f, -327.676f},    // 32767.6 rounds out of range: both clipped
      {1e6f, nan},              // saturate; NaN -> 0
      {-inf, 0.0f},             // saturate
  };
  std::vector<std::byte> bytes(in.size() * 4);
  const std::size_t clipped = encode(sample_format::ci16_le, in.data(), in.size(), bytes.data(), scale);
  EXPECT_EQ(clipped, 5u);
  std::vector<cf32> out(in.size());
  decode(sample_format::ci16_le, bytes.data(), in.size(), out.data(), 1.0f);  // raw counts
  EXPECT_EQ(out[0], cf32(1, -2));
  EXPECT_EQ(out[1], cf32(32767, -32767));
  EXPECT_EQ(out[2], cf32(32767, -32767));
  EXPECT_EQ(out[3], cf32(32767, 0));
  EXPECT_EQ(out[4], cf32(-32767, 0));
}

TEST(sample_format, ci16_decodes_most_negative_value) {
  const unsigned char raw[4] = {0x00, 0x80, 0xFF, 0x7F};  // -32768, 32767
  cf32 out;
  decode(sample_format::ci16_le, reinterpret_cast<const std::byte*>(raw), 1, &out, 8192.0f);
  EXPECT_EQ(out, cf32(-4.0f, 32767.0f / 8192.0f));
}

// ---------------------------------------------------------------------------------------------
// SigMF paths and metadata

TEST(sigmf, paths_accept_every_spelling) {
  const fs::path dir = "some/dir";
  for (const char* name : {"rec", "rec.sigmf-meta", "rec.sigmf-data", "rec.sigmf"}) {
    const sigmf_file_paths p = sigmf_paths(dir / name);
    EXPECT_EQ(p.meta, dir / "rec.sigmf-meta") << name;
    EXPECT_EQ(p.data, dir / "rec.sigmf-data") << name;
  }
  // Other dots are part of the base name; only the known suffix is stripped, once.
  EXPECT_EQ(sigmf_paths("a.b.cf32").meta, fs::path("a.b.cf32.sigmf-meta"));
  EXPECT_EQ(sigmf_paths("x.sigmf-data.sigmf-meta").data, fs::path("x.sigmf-data.sigmf-data"));

  EXPECT_TRUE(has_sigmf_suffix("a/rec.sigmf-meta"));
  EXPECT_TRUE(has_sigmf_suffix("rec.sigmf-data"));
  EXPECT_TRUE(has_sigmf_suffix("rec.sigmf"));
  EXPECT_FALSE(has_sigmf_suffix("rec"));
  EXPECT_FALSE(has_sigmf_suffix("rec.cf32"));
  EXPECT_FALSE(has_sigmf_suffix("rec.sigmf-metadata"));
}

TEST_F(io_test, meta_fields_and_extra_keys_round_trip) {
  sigmf_meta meta = basic_meta(sample_format::ci16_le);
  meta.sample_rate_hz = 20.625e6 / 3.0;  // not a short decimal: checks full precision
  meta.description = "demo \"recording\"\nwith escapes";
  meta.recorder = "paq-gen 0.1.0";
  meta.ci16_scale = 1234.5f;
  meta.center_frequency_hz = 2.2555e9;
  meta.datetime_iso8601 = "2024-05-01T12:34:56.789Z";
  meta.extra_global = {{"paq:preset", "ebn0-sweep"},
                       {"paq:ebn0_db", 4.25},
                       {"paq:seed", std::uint64_t{0xFEDCBA9876543210ull}},
                       {"other:nested", {{"a", 1}, {"b", {1, 2, 3}}}}};
  meta.extensions = {{"other", "0.3.0", true}};
  const fs::path meta_path = path("m.sigmf-meta");
  write_sigmf_meta(meta_path, meta);
  EXPECT_FALSE(fs::exists(path("m.sigmf-meta.tmp")));

  const sigmf_meta back = read_sigmf_meta(meta_path);
  EXPECT_EQ(back.format, meta.format);
  EXPECT_EQ(back.sample_rate_hz, meta.sample_rate_hz);
  EXPECT_EQ(back.description, meta.description);
  EXPECT_EQ(back.recorder, meta.recorder);
  EXPECT_EQ(back.ci16_scale, meta.ci16_scale);
  EXPECT_EQ(back.center_frequency_hz, meta.center_frequency_hz);
  EXPECT_EQ(back.datetime_iso8601, meta.datetime_iso8601);
  EXPECT_EQ(back.extra_global, meta.extra_global);
  EXPECT_EQ(back.extra_global["paq:seed"].get<std::uint64_t>(), 0xFEDCBA9876543210ull);
  EXPECT_EQ(back.extensions, meta.extensions);  // paq is the writer's own, not listed back

  // The SigMF structure itself, as other tools will see it.
  const nlohmann::json doc = read_json(meta_path);
  const auto& global = doc.at("global");
  EXPECT_EQ(global.at("core:datatype"), "ci16_le");
  EXPECT_EQ(global.at("core:version"), "1.2.0");
  EXPECT_EQ(global.at("core:sample_rate").get<double>(), meta.sample_rate_hz);
  EXPECT_EQ(global.at("paq:ci16_scale").get<double>(), 1234.5);
  EXPECT_EQ(global.at("paq:preset"), "ebn0-sweep");
  EXPECT_EQ(global.at("core:extensions"),
            nlohmann::json::parse(R"([{"name": "paq", "version": "1.0.0", "optional": true},
                                      {"name": "other", "version": "0.3.0", "optional": true}])"));
  EXPECT_FALSE(global.contains("core:datetime"));  // a capture field in SigMF
  ASSERT_EQ(doc.at("captures").size(), 1u);
  const auto& capture = doc.at("captures")[0];
  EXPECT_EQ(capture.at("core:sample_start"), 0);
  EXPECT_EQ(capture.at("core:frequency").get<double>(), 2.2555e9);
  EXPECT_EQ(capture.at("core:datetime"), meta.datetime_iso8601);
  EXPECT_TRUE(doc.at("annotations").is_array());
  EXPECT_TRUE(doc.at("annotations").empty());
}

TEST_F(io_test, minimal_cf32_meta_omits_optional_fields) {
  const fs::path meta_path = path("m.sigmf-meta");
  write_sigmf_meta(meta_path, basic_meta(sample_format::cf32_le));
  const nlohmann::json doc = read_json(meta_path);
  EXPECT_FALSE(doc.at("global").contains("paq:ci16_scale"));
  EXPECT_FALSE(doc.at("global").contains("core:description"));
  EXPECT_FALSE(doc.at("global").contains("core:extensions")) << "no paq: key, nothing to declare";
  EXPECT_FALSE(doc.at("captures")[0].contains("core:frequency"));
  EXPECT_FALSE(doc.at("captures")[0].contains("core:datetime"));

  const sigmf_meta back = read_sigmf_meta(meta_path);
  EXPECT_EQ(back.format, sample_format::cf32_le);
  EXPECT_EQ(back.center_frequency_hz, 0.0);
  EXPECT_TRUE(back.datetime_iso8601.empty());
  EXPECT_TRUE(back.extra_global.is_object());
  EXPECT_TRUE(back.extra_global.empty());
}

TEST_F(io_test, foreign_ci16_without_scale_uses_default) {
  const fs::path meta_path = path("m.sigmf-meta");
  write_meta_with_global(meta_path, {{"core:datatype", "ci16_le"}, {"core:sample_rate", 1e6},
                                     {"core:version", "1.0.0"}, {"vendor:gain_db", 30}});
  const sigmf_meta back = read_sigmf_meta(meta_path);
  EXPECT_EQ(back.ci16_scale, default_ci16_scale);
  EXPECT_EQ(back.extra_global, nlohmann::json({{"vendor:gain_db", 30}}));
}

TEST_F(io_test, ci16_scale_out_of_range_is_refused_where_it_is_read) {
  // 1e-300 became 0.0f and 1e-40 a denormal: every count then converted to an infinity
  // that no NaN scan of ci16 input looks for. The range is the config key's.
  const fs::path meta_path = path("m.sigmf-meta");
  for (const double scale : {1e-300, 1e-40, 1e-7, 0.0, -1.0, 2e9, 1e300}) {
    SCOPED_TRACE(scale);
    write_meta_with_global(meta_path, {{"core:datatype", "ci16_le"}, {"core:sample_rate", 1e6}, {"paq:ci16_scale", scale}});
    expect_error<format_error>([&] { (void)read_sigmf_meta(meta_path); }, {"paq:ci16_scale must be a number in 1e-6 .. 1e9"});
  }
  for (const double scale : {min_ci16_scale, 1.0, 8192.0, max_ci16_scale}) {
    write_meta_with_global(meta_path, {{"core:datatype", "ci16_le"}, {"core:sample_rate", 1e6}, {"paq:ci16_scale", scale}});
    EXPECT_EQ(read_sigmf_meta(meta_path).ci16_scale, static_cast<float>(scale));
  }
}

TEST_F(io_test, capture_times_centuries_apart_are_a_discontinuity) {
  // The earliest and latest times parse_utc_ns takes differ by more than an int64 holds
  // (the difference was signed overflow).
  const fs::path meta_path = path("m.sigmf-meta");
  const nlohmann::json doc = {{"global", {{"core:datatype", "cf32_le"}, {"core:sample_rate", 1e6}, {"core:version", "1.0.0"}}},
                              {"captures", {{{"core:sample_start", 0}, {"core:datetime", "1678-01-01T00:00:00Z"}},
                                            {{"core:sample_start", 0}, {"core:datetime", "2261-12-31T23:59:59Z"}}}},
                              {"annotations", nlohmann::json::array()}};
  write_text(meta_path, doc.dump());
  std::vector<std::string> warnings;
  const auto marks = recording_marks(read_sigmf_meta(meta_path), warnings);
  // Both captures start at sample 0: nothing lies before sample 0, so no gap; two times.
  ASSERT_EQ(marks.size(), 2u) << ::testing::PrintToString(warnings);
  EXPECT_EQ(marks[0].what, recording_mark::kind::time);
  EXPECT_EQ(marks[1].what, recording_mark::kind::time);
  mark_cursor c(marks);
  const auto* m = c.next(0);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->utc_ns, *parse_utc_ns("1678-01-01T00:00:00Z"));
  m = c.next(0);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->utc_ns, *parse_utc_ns("2261-12-31T23:59:59Z"));
  EXPECT_EQ(c.next(0), nullptr);

  // The same at sample 100: a time centuries off is a jump, so the boundary is a gap.
  nlohmann::json later = doc;
  later["captures"][1]["core:sample_start"] = 100;
  write_text(meta_path, later.dump());
  const auto jumped = recording_marks(read_sigmf_meta(meta_path), warnings);
  ASSERT_EQ(jumped.size(), 3u);
  EXPECT_EQ(jumped[1], (recording_mark{100, recording_mark::kind::gap, 0, gap_reason::discontinuity, 0}));
  EXPECT_EQ(jumped[2].what, recording_mark::kind::time);
}

// A recording's gaps (io::recording_marks): paq:gaps entries as the recorder wrote them (samples
// lost, reason, a coalesced flood as one gap of unknown size), capture boundaries no entry
// explains unless their time continues the capture before, each at its sample.
TEST_F(io_test, recording_marks_give_each_gap_and_time_where_it_lies) {
  const fs::path meta_path = path("g.sigmf-meta");
  const nlohmann::json doc = {
      {"global",
       {{"core:datatype", "cf32_le"},
        {"core:sample_rate", 1e6},
        {"core:version", "1.0.0"},
        {"core:extensions", {{{"name", "paq"}, {"version", "1.0.0"}, {"optional", true}}}},
        {"paq:gaps",
         {{{"recording_sample", 1000}, {"lost", 250}, {"reason", "lost-packets"}},
          {{"recording_sample", 1000}, {"lost", 7}, {"reason", "overflow"}},
          {{"recording_sample", 3000}, {"lost", 0}, {"reason", "stall"}},
          {{"recording_sample", 5000}, {"lost", 99}, {"reason", "coalesced"}, {"first_reason", "reconnect"}, {"gaps", 4}},
          {{"recording_sample", 6000}, {"lost", 5}, {"reason", "no-such-reason"}},
          {{"recording_sample", "7000"}, {"lost", 5}, {"reason", "stall"}}}}}},
      {"captures",
       {{{"core:sample_start", 0}, {"core:datetime", "2026-12-02T10:00:00Z"}},
        {{"core:sample_start", 1000}, {"core:datetime", "2026-12-02T10:00:00.001257Z"}},  // after 250 + 7 lost
        {{"core:sample_start", 2000}, {"core:datetime", "2026-12-02T10:00:00.002257Z"}},  // continues: no gap
        {{"core:sample_start", 2500}},                                                    // no time, no entry: a gap
        {{"core:sample_start", 3000}}}},
      {"annotations", nlohmann::json::array()}};
  write_text(meta_path, doc.dump());
  std::vector<std::string> warnings;
  const auto marks = recording_marks(read_sigmf_meta(meta_path), warnings);
  using k = recording_mark::kind;
  const std::int64_t t0 = *parse_utc_ns("2026-12-02T10:00:00Z");
  const std::vector<recording_mark> expected = {
      {0, k::time, 0, gap_reason::discontinuity, t0},
      {1000, k::gap, 250, gap_reason::lost_packets, 0},
      {1000, k::gap, 7, gap_reason::overflow, 0},
      {1000, k::time, 0, gap_reason::discontinuity, t0 + 1'257'000},
      {2000, k::time, 0, gap_reason::discontinuity, t0 + 2'257'000},
      {2500, k::gap, 0, gap_reason::discontinuity, 0},
      {3000, k::gap, 0, gap_reason::stall, 0},
      {5000, k::gap, 0, gap_reason::reconnect, 0},
      {6000, k::gap, 5, gap_reason::discontinuity, 0},
  };
  ASSERT_EQ(marks.size(), expected.size()) << doc.dump();
  for (std::size_t i = 0; i < marks.size(); ++i) {
    EXPECT_EQ(marks[i], expected[i]) << i << ": " << marks[i].sample << " " << static_cast<int>(marks[i].what) << " "
                                     << marks[i].lost_samples << " " << to_string(marks[i].reason) << " " << marks[i].utc_ns;
  }
  ASSERT_EQ(warnings.size(), 2u) << ::testing::PrintToString(warnings);
  EXPECT_NE(warnings[0].find("no-such-reason"), std::string::npos);
  EXPECT_NE(warnings[1].find("paq:gaps[5]"), std::string::npos);

  mark_cursor c(marks);
  EXPECT_EQ(c.next(0)->what, k::time);
  EXPECT_EQ(c.next(0), nullptr);
  EXPECT_EQ(c.limit(0, 1'000'000), 1000u) << "a read stops at the next mark";
  EXPECT_EQ(c.next(1000)->lost_samples, 250u);
  EXPECT_EQ(c.next(1000)->lost_samples, 7u);
  EXPECT_EQ(c.next(1000)->utc_ns, t0 + 1'257'000);
  EXPECT_EQ(c.next(1000), nullptr);
  EXPECT_EQ(c.limit(1000, 300), 300u);
  const auto* later = c.next(5000);  // the marks at 2000 .. 3000 already passed are skipped
  ASSERT_NE(later, nullptr);
  EXPECT_EQ(later->reason, gap_reason::reconnect);
  c.rewind();
  EXPECT_EQ(c.next(0)->utc_ns, t0);
}

TEST_F(io_test, write_rejects_undescribable_meta) {
  const fs::path meta_path = path("m.sigmf-meta");
  sigmf_meta meta = basic_meta(sample_format::cf32_le);

  meta.extra_global = {{"no_namespace", 1}};
  expect_error<std::invalid_argument>([&] { write_sigmf_meta(meta_path, meta); }, {"no_namespace"});
  meta.extra_global = {{"core:sample_rate", 1}};
  expect_error<std::invalid_argument>([&] { write_sigmf_meta(meta_path, meta); },
                                      {"core:sample_rate", "reserved"});
  meta.extra_global = {{"paq:ci16_scale", 1}};
  expect_error<std::invalid_argument>([&] { write_sigmf_meta(meta_path, meta); }, {"reserved"});
  meta.extra_global = nlohmann::json::array({1, 2});
  expect_error<std::invalid_argument>([&] { write_sigmf_meta(meta_path, meta); }, {"object"});

  meta.extra_global = nullptr;
  meta.sample_rate_hz = -1;
  expect_error<std::invalid_argument>([&] { write_sigmf_meta(meta_path, meta); }, {"sample rate"});
  meta.sample_rate_hz = std::numeric_limits<double>::quiet_NaN();
  expect_error<std::invalid_argument>([&] { write_sigmf_meta(meta_path, meta); }, {"sample rate"});

  meta = basic_meta(sample_format::ci16_le);
  meta.ci16_scale = 0;
  expect_error<std::invalid_argument>([&] { write_sigmf_meta(meta_path, meta); }, {"ci16 scale"});
  EXPECT_FALSE(fs::exists(meta_path));

  // And the writer refuses before creating the data file.
  expect_error<std::invalid_argument>(
      [&] { (void)sample_file_writer::create_sigmf(path("w"), meta); }, {"ci16 scale"});
  EXPECT_FALSE(fs::exists(path("w.sigmf-data")));
}

// ---------------------------------------------------------------------------------------------
// Round trips through the writer and reader

TEST_F(io_test, sigmf_cf32_round_trip_is_exact) {
  constexpr std::uint64_t seed = 0x5EED0001;
  const std::vector<cf32> samples = random_samples(100'003, seed);
  sigmf_meta meta = basic_meta(sample_format::cf32_le);
  meta.description = "cf32 round trip";
  {
    auto writer = sample_file_writer::create_sigmf(path("rec"), meta);
    // Uneven pieces: the writer must not care how the caller slices the stream.
    const std::span<const cf32> all(samples);
    writer.write(all.subspan(0, 1));
    writer.write(all.subspan(1, 50'000));
    writer.write(all.subspan(50'001));
    EXPECT_EQ(writer.samples_written(), samples.size());
    EXPECT_EQ(writer.clipped_components(), 0u);
    writer.close();
  }
  EXPECT_EQ(fs::file_size(path("rec.sigmf-data")), samples.size() * 8);

  for (const char* name : {"rec", "rec.sigmf-meta", "rec.sigmf-data", "rec.sigmf"}) {
    auto reader = sample_file_reader::open(path(name));
    const recording_info& info = reader.info();
    EXPECT_TRUE(info.is_sigmf);
    EXPECT_EQ(info.format, sample_format::cf32_le);
    EXPECT_EQ(info.sample_rate_hz, 20.625e6);
    EXPECT_EQ(info.num_samples, samples.size());
    EXPECT_EQ(info.trailing_bytes, 0u);
    EXPECT_EQ(info.data_path, path("rec.sigmf-data"));
    EXPECT_EQ(info.meta.description, "cf32 round trip");
    EXPECT_TRUE(bit_identical(read_all(reader, samples.size() + 10), samples)) << name;
    EXPECT_EQ(reader.position(), samples.size());
  }
}

TEST_F(io_test, sigmf_ci16_round_trip_within_half_count) {
  // 300'001 samples: more than one 1 MiB I/O block of ci16 (262'144 samples).
  constexpr std::uint64_t seed = 0x5EED0002;
  const std::vector<cf32> samples = random_samples(300'001, seed);
  sigmf_meta meta = basic_meta(sample_format::ci16_le);
  {
    auto writer = sample_file_writer::create_sigmf(path("rec.sigmf-meta"), meta);
    writer.write(samples);
    EXPECT_EQ(writer.clipped_components(), 0u);
    writer.close();
  }
  EXPECT_EQ(fs::file_size(path("rec.sigmf-data")), samples.size() * 4);

  auto reader = sample_file_reader::open(path("rec.sigmf-data"));
  EXPECT_EQ(reader.info().format, sample_format::ci16_le);
  EXPECT_EQ(reader.info().meta.ci16_scale, default_ci16_scale);
  EXPECT_EQ(reader.info().num_samples, samples.size());
  EXPECT_TRUE(within(samples, read_all(reader, samples.size()), ci16_tolerance(default_ci16_scale)));
}

TEST_F(io_test, raw_round_trips) {
  constexpr std::uint64_t seed = 0x5EED0003;
  const std::vector<cf32> samples = random_samples(70'001, seed);
  constexpr float scale = 1000.5f;  // not a power of two; |samples| < 3.9 -> < 3902 counts

  {
    auto writer = sample_file_writer::create_raw(path("x.cf32"), sample_format::cf32_le);
    writer.write(samples);
    writer.close();
    EXPECT_TRUE(writer.meta_path().empty());
  }
  {
    auto writer = sample_file_writer::create_raw(path("x.ci16"), sample_format::ci16_le, scale);
    writer.write(samples);
    writer.close();
  }
  EXPECT_EQ(fs::file_size(path("x.cf32")), samples.size() * 8);
  EXPECT_EQ(fs::file_size(path("x.ci16")), samples.size() * 4);
  EXPECT_FALSE(fs::exists(path("x.cf32.sigmf-meta")));

  auto r32 = sample_file_reader::open(path("x.cf32"), sample_format::cf32_le, 1e6);
  EXPECT_FALSE(r32.info().is_sigmf);
  EXPECT_EQ(r32.info().sample_rate_hz, 1e6);
  EXPECT_EQ(r32.info().meta.sample_rate_hz, 1e6);
  EXPECT_EQ(r32.info().data_path, path("x.cf32"));
  EXPECT_TRUE(bit_identical(read_all(r32, 4096), samples));

  auto r16 = sample_file_reader::open(path("x.ci16"), sample_format::ci16_le, 1e6, scale);
  EXPECT_EQ(r16.info().num_samples, samples.size());
  EXPECT_TRUE(within(samples, read_all(r16, 4096), ci16_tolerance(scale)));
}

// Two channels interleaved, a sample of each per sample time (SigMF core:num_channels): each is
// read on its own, from SigMF (cf32 and ci16, decoded and at its width) and from a raw file.
TEST_F(io_test, each_channel_of_an_interleaved_recording_is_read_on_its_own) {
  const std::vector<cf32> one = random_samples(70'001, 0x5EED0C01), two = random_samples(70'001, 0x5EED0C02);
  std::vector<cf32> both;
  for (std::size_t i = 0; i < one.size(); ++i) {
    both.push_back(one[i]);
    both.push_back(two[i]);
  }
  for (const auto format : {sample_format::cf32_le, sample_format::ci16_le}) {
    sigmf_meta meta = basic_meta(format);
    meta.num_channels = 2;
    {
      auto writer = sample_file_writer::create_sigmf(path("two"), meta);
      writer.write(both);
      writer.close();
    }
    EXPECT_EQ(fs::file_size(path("two.sigmf-data")), both.size() * bytes_per_sample(format));
    EXPECT_EQ(read_sigmf_meta(path("two.sigmf-meta")).num_channels, 2);
    // paqd receives one channel: a recording of two without a choice is refused, naming them.
    expect_error<std::invalid_argument>([&] { (void)sample_file_reader::open(path("two")); },
                               {path("two").string(), "2 channels interleaved", "--channel 1 .. 2", "source.file.channel"});
    expect_error<std::invalid_argument>([&] { (void)sample_file_reader::open(path("two"), {}, {}, default_ci16_scale, 3); },
                                        {"channel 3 does not exist", "2 channels"});
    expect_error<std::invalid_argument>([&] { (void)sample_file_reader::open(path("two"), {}, {}, default_ci16_scale, 0); },
                                        {"channel 0 does not exist"});
    for (const int channel : {1, 2}) {
      const auto& expected = channel == 1 ? one : two;
      auto reader = sample_file_reader::open(path("two"), {}, {}, default_ci16_scale, channel);
      EXPECT_EQ(reader.info().num_channels, 2);
      EXPECT_EQ(reader.info().channel, channel);
      EXPECT_EQ(reader.info().num_samples, one.size());
      // Reads of odd sizes, larger than the reader's block, cross its buffer's ends.
      const auto got = read_all(reader, 300'007);
      if (format == sample_format::cf32_le) {
        EXPECT_TRUE(bit_identical(got, expected)) << channel;
      } else {
        EXPECT_TRUE(within(expected, got, ci16_tolerance(default_ci16_scale))) << channel;
        reader.rewind();
        std::vector<paq::ci16> raw(one.size() + 5);
        ASSERT_EQ(reader.read(std::span<paq::ci16>(raw)), one.size());
        // At its width: the very samples the decoded read gave.
        for (std::size_t i = 0; i < one.size(); ++i) ASSERT_EQ(paq::to_cf32(raw[i], default_ci16_scale), got[i]) << i;
      }
    }
    // Both channels at once (paqd replay --channel 2 --channel 1): each sample time's pair, in
    // reads that cross the reader's block, the same values as the reads of one channel.
    auto reader = sample_file_reader::open(path("two"), {}, {}, default_ci16_scale, 2);
    std::vector<paq::cf32x2> pairs;
    std::vector<paq::cf32x2> block(300'007);
    while (const std::size_t n = reader.read(std::span<paq::cf32x2>(block), 1)) pairs.insert(pairs.end(), block.begin(), block.begin() + static_cast<std::ptrdiff_t>(n));
    ASSERT_EQ(pairs.size(), one.size());
    auto first = sample_file_reader::open(path("two"), {}, {}, default_ci16_scale, 2);
    auto second = sample_file_reader::open(path("two"), {}, {}, default_ci16_scale, 1);
    const auto a = read_all(first, 4096), b = read_all(second, 4096);
    for (std::size_t i = 0; i < pairs.size(); ++i) {
      ASSERT_EQ(pairs[i].a, a[i]) << i;
      ASSERT_EQ(pairs[i].b, b[i]) << i;
    }
    // The second channel must be another one the recording has.
    reader.rewind();
    for (const int bad : {2, 3, 0}) {
      expect_error<std::invalid_argument>([&] { (void)reader.read(std::span<paq::cf32x2>(block), bad); }, {"cannot be the second channel"});
    }
  }
  // A raw file says nothing of its channels: given, they are read alike; a bad count is refused.
  {
    auto writer = sample_file_writer::create_raw(path("two.cf32"), sample_format::cf32_le);
    writer.write(both);
    writer.close();
  }
  auto raw = sample_file_reader::open(path("two.cf32"), sample_format::cf32_le, 1e6, default_ci16_scale, 2, 2);
  EXPECT_EQ(raw.info().num_samples, one.size());
  EXPECT_TRUE(bit_identical(read_all(raw, 4096), two));
  EXPECT_EQ(sample_file_reader::open(path("two.cf32"), sample_format::cf32_le, 1e6).info().num_samples, both.size());
  expect_error<std::invalid_argument>(
      [&] { (void)sample_file_reader::open(path("two.cf32"), sample_format::cf32_le, 1e6, default_ci16_scale, 1, max_channels + 1); },
      {"channels is out of range"});
  // A writer of two channels refuses to describe half a sample time.
  sigmf_meta meta = basic_meta(sample_format::cf32_le);
  meta.num_channels = 2;
  auto writer = sample_file_writer::create_sigmf(path("half"), meta);
  writer.write(std::span<const cf32>(both).subspan(0, 3));
  expect_error<std::runtime_error>([&] { writer.close(); }, {"not whole sample times of 2 channels"});
  EXPECT_FALSE(fs::exists(path("half.sigmf-meta")));
}

TEST_F(io_test, clipping_is_counted_and_saturated) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<cf32> samples = {{5.0f, 0.0f}, {nan, -5.0f}, {0.25f, -0.25f}, {4.5f, 4.5f}};
  {
    auto writer = sample_file_writer::create_sigmf(path("clip"), basic_meta(sample_format::ci16_le));
    writer.write(samples);
    EXPECT_EQ(writer.clipped_components(), 5u);
    writer.write(samples);
    EXPECT_EQ(writer.clipped_components(), 10u);  // accumulates across writes
    writer.close();
  }
  auto reader = sample_file_reader::open(path("clip"));
  const std::vector<cf32> back = read_all(reader, 100);
  ASSERT_EQ(back.size(), 8u);
  const float full = 32767.0f / default_ci16_scale;
  EXPECT_EQ(back[0], cf32(full, 0.0f));
  EXPECT_EQ(back[1], cf32(0.0f, -full));
  EXPECT_EQ(back[2], cf32(0.25f, -0.25f));
  EXPECT_EQ(back[3], cf32(full, full));
}

TEST_F(io_test, odd_chunk_sizes_match_one_big_read_and_rewind_restarts) {
  constexpr std::uint64_t seed = 0x5EED0004;
  const std::vector<cf32> samples = random_samples(300'007, seed);
  for (const sample_format format : {sample_format::cf32_le, sample_format::ci16_le}) {
    const fs::path base = path(format == sample_format::cf32_le ? "c32" : "c16");
    {
      auto writer = sample_file_writer::create_sigmf(base, basic_meta(format));
      writer.write(samples);
      writer.close();
    }
    auto reader = sample_file_reader::open(base);
    const std::vector<cf32> whole = read_all(reader, samples.size());
    ASSERT_EQ(whole.size(), samples.size());
    for (const std::size_t chunk : {std::size_t{1}, std::size_t{7}, std::size_t{4099},
                                    std::size_t{262'145}}) {
      reader.rewind();
      EXPECT_EQ(reader.position(), 0u);
      // One-sample reads over 300k samples would be slow; read a prefix that way, then go on
      // with the chunked loop, so every chunk size still crosses a 1 MiB block boundary.
      std::vector<cf32> pieces;
      std::vector<cf32> buf(chunk);
      while (pieces.size() < samples.size()) {
        const std::size_t got = reader.read(buf);
        ASSERT_GT(got, 0u);
        ASSERT_LE(got, buf.size());
        pieces.insert(pieces.end(), buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(got));
        EXPECT_EQ(reader.position(), pieces.size());
        if (chunk == 1 && pieces.size() == 1000) {
          // Switch to a big chunk after a 1000-sample prefix of single-sample reads.
          buf.resize(131'071);
        }
      }
      EXPECT_EQ(reader.read(buf), 0u);
      EXPECT_TRUE(bit_identical(pieces, whole)) << "chunk " << chunk;
    }

    // Rewind mid-stream.
    reader.rewind();
    std::vector<cf32> head(12'345);
    ASSERT_EQ(reader.read(head), head.size());
    reader.rewind();
    EXPECT_EQ(reader.position(), 0u);
    std::vector<cf32> again(12'345);
    ASSERT_EQ(reader.read(again), again.size());
    EXPECT_TRUE(bit_identical(head, again));
    EXPECT_TRUE(bit_identical(
        head, std::vector<cf32>(whole.begin(), whole.begin() + static_cast<std::ptrdiff_t>(head.size()))));
  }
}

TEST_F(io_test, truncated_file_reports_trailing_bytes_and_reads_whole_samples) {
  constexpr std::uint64_t seed = 0x5EED0005;
  const std::vector<cf32> samples = random_samples(1000, seed);
  {
    auto writer = sample_file_writer::create_sigmf(path("t"), basic_meta(sample_format::cf32_le));
    writer.write(samples);
    writer.close();
  }
  append_bytes(path("t.sigmf-data"), 3);
  auto reader = sample_file_reader::open(path("t"));
  EXPECT_EQ(reader.info().num_samples, 1000u);
  EXPECT_EQ(reader.info().trailing_bytes, 3u);
  std::vector<cf32> buf(2000);
  EXPECT_EQ(reader.read(buf), 1000u);
  EXPECT_EQ(reader.read(buf), 0u);
  buf.resize(1000);
  EXPECT_TRUE(bit_identical(buf, samples));

  // Raw ci16 with a partial sample.
  {
    auto writer = sample_file_writer::create_raw(path("t.ci16"), sample_format::ci16_le);
    writer.write(samples);
    writer.close();
  }
  append_bytes(path("t.ci16"), 3);
  auto raw = sample_file_reader::open(path("t.ci16"), sample_format::ci16_le, 1e6);
  EXPECT_EQ(raw.info().num_samples, 1000u);
  EXPECT_EQ(raw.info().trailing_bytes, 3u);
  EXPECT_EQ(read_all(raw, 333).size(), 1000u);
}

TEST_F(io_test, reader_is_movable) {
  const std::vector<cf32> samples = random_samples(10, 0x5EED0006);
  {
    auto writer = sample_file_writer::create_raw(path("m.cf32"), sample_format::cf32_le);
    writer.write(samples);
    sample_file_writer moved = std::move(writer);
    moved.close();
    EXPECT_EQ(moved.samples_written(), 10u);
  }
  auto a = sample_file_reader::open(path("m.cf32"), sample_format::cf32_le, 1e6);
  std::vector<cf32> head(4);
  ASSERT_EQ(a.read(head), 4u);
  sample_file_reader b = std::move(a);
  EXPECT_EQ(b.position(), 4u);
  std::vector<cf32> rest(10);
  EXPECT_EQ(b.read(rest), 6u);
  EXPECT_THROW((void)a.read(rest), std::logic_error);  // NOLINT(bugprone-use-after-move)
}

// ---------------------------------------------------------------------------------------------
// Writer lifecycle

TEST_F(io_test, meta_is_written_last) {
  const fs::path meta_path = path("rec.sigmf-meta");
  write_text(meta_path, "stale meta from an earlier recording");
  auto writer = sample_file_writer::create_sigmf(path("rec"), basic_meta(sample_format::cf32_le));
  EXPECT_FALSE(fs::exists(meta_path)) << "a stale meta file would describe the new data";
  writer.write(random_samples(100, 0x5EED0007));
  EXPECT_FALSE(fs::exists(meta_path));
  writer.close();
  EXPECT_TRUE(fs::exists(meta_path));
  writer.close();  // idempotent
  EXPECT_THROW(writer.write(random_samples(1, 1)), std::logic_error);
}

TEST_F(io_test, destructor_closes_and_writes_meta) {
  {
    auto writer = sample_file_writer::create_sigmf(path("d"), basic_meta(sample_format::ci16_le));
    writer.write(random_samples(100, 0x5EED0008));
  }
  auto reader = sample_file_reader::open(path("d"));
  EXPECT_EQ(reader.info().num_samples, 100u);
}

TEST_F(io_test, write_error_names_file_and_reason) {
  // /dev/full accepts open() and fails every write with ENOSPC: a disk-full stand-in.
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  auto writer = sample_file_writer::create_raw("/dev/full", sample_format::ci16_le);
  expect_error<std::runtime_error>([&] { writer.write(random_samples(1000, 0x5EED0009)); },
                                   {"/dev/full", "byte offset 0", "No space left on device"});
  EXPECT_THROW(writer.write(random_samples(1, 1)), std::logic_error);
  EXPECT_NO_THROW(writer.close());
}

// ---------------------------------------------------------------------------------------------
// Errors on read

TEST_F(io_test, missing_meta_file) {
  const std::string meta = path("nothing.sigmf-meta").string();
  expect_error<format_error>([&] { (void)sample_file_reader::open(path("nothing.sigmf-meta")); },
                             {meta + ": ", "No such file"});
  expect_error<format_error>([&] { (void)read_sigmf_meta(meta); }, {meta, "cannot open"});
}

TEST_F(io_test, invalid_json) {
  const fs::path meta = path("bad.sigmf-meta");
  write_text(meta, R"({"global": {"core:datatype": "cf32_le",)");
  expect_error<format_error>([&] { (void)sample_file_reader::open(path("bad")); },
                             {meta.string() + ": invalid JSON", "parse error"});
}

TEST_F(io_test, missing_global) {
  const fs::path meta = path("g.sigmf-meta");
  write_text(meta, R"({"captures": [], "annotations": []})");
  expect_error<format_error>([&] { (void)read_sigmf_meta(meta); }, {meta.string() + ": ", "global"});
  write_text(meta, "[1, 2]");
  expect_error<format_error>([&] { (void)read_sigmf_meta(meta); }, {meta.string() + ": ", "object"});
}

TEST_F(io_test, unsupported_datatypes_are_named) {
  const fs::path meta = path("dt.sigmf-meta");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"ri8", "real-valued"},       {"cf32_be", "big-endian"}, {"cu8", "unsigned 8-bit"},
      {"ri16_le", "real-valued"},   {"ci16_be", "big-endian"}, {"cf64_le", "64-bit float"},
      {"cf32", "complex 32-bit float"},    {"banana", "not a SigMF datatype"}};
  for (const auto& [datatype, hint] : cases) {
    write_meta_with_global(meta, {{"core:datatype", datatype}, {"core:sample_rate", 1e6}});
    expect_error<format_error>(
        [&] { (void)read_sigmf_meta(meta); },
        {meta.string() + ": core:datatype '" + datatype + "' is not supported",
         "(supported: cf32_le, ci16_le)", hint});
  }
  write_meta_with_global(meta, {{"core:sample_rate", 1e6}});
  expect_error<format_error>([&] { (void)read_sigmf_meta(meta); }, {"core:datatype is missing"});
  write_meta_with_global(meta, {{"core:datatype", 7}, {"core:sample_rate", 1e6}});
  expect_error<format_error>([&] { (void)read_sigmf_meta(meta); }, {"core:datatype must be a string"});
}

TEST_F(io_test, bad_sample_rates) {
  const fs::path meta = path("sr.sigmf-meta");
  write_meta_with_global(meta, {{"core:datatype", "cf32_le"}});
  expect_error<format_error>([&] { (void)read_sigmf_meta(meta); },
                             {meta.string() + ": ", "core:sample_rate is missing"});
  for (const nlohmann::json& rate : {nlohmann::json("1e6"), nlohmann::json(nullptr)}) {
    write_meta_with_global(meta, {{"core:datatype", "cf32_le"}, {"core:sample_rate", rate}});
    expect_error<format_error>([&] { (void)read_sigmf_meta(meta); },
                               {meta.string() + ": ", "core:sample_rate must be a number", rate.dump()});
  }
  // 1e300 passed as "positive finite" and reached a float-to-integer conversion
  // (undefined behaviour) in the ring sizing; a rate is now range-checked where it is read.
  for (const nlohmann::json& rate : {nlohmann::json(-1e6), nlohmann::json(0), nlohmann::json(1e300),
                                     nlohmann::json(1e-300), nlohmann::json(999.0),
                                     nlohmann::json(1.000001e9)}) {
    write_meta_with_global(meta, {{"core:datatype", "cf32_le"}, {"core:sample_rate", rate}});
    expect_error<format_error>([&] { (void)read_sigmf_meta(meta); },
                               {meta.string() + ": ", "core:sample_rate " + rate.dump() + " is out of range",
                                "1000 .. 1e+09 Hz"});
  }
  for (const double rate : {1e3, 1e9}) {
    write_meta_with_global(meta, {{"core:datatype", "cf32_le"}, {"core:sample_rate", rate}});
    EXPECT_EQ(read_sigmf_meta(meta).sample_rate_hz, rate);
  }
  // 1e999 overflows a double: the parser refuses it, reported as invalid JSON.
  write_text(meta, R"({"global": {"core:datatype": "cf32_le", "core:sample_rate": 1e999}})");
  expect_error<format_error>([&] { (void)read_sigmf_meta(meta); },
                             {meta.string() + ": invalid JSON", "1e999"});
}

TEST_F(io_test, layouts_that_would_be_misread_are_refused) {
  const fs::path meta = path("l.sigmf-meta");
  const nlohmann::json ok = {{"core:datatype", "cf32_le"}, {"core:sample_rate", 1e6}};
  nlohmann::json global = ok;
  for (const int channels : {0, max_channels + 1}) {
    global["core:num_channels"] = channels;
    write_meta_with_global(meta, global);
    expect_error<format_error>([&] { (void)read_sigmf_meta(meta); }, {"core:num_channels " + std::to_string(channels), "out of range"});
  }
  global["core:num_channels"] = -2;
  write_meta_with_global(meta, global);
  expect_error<format_error>([&] { (void)read_sigmf_meta(meta); }, {"core:num_channels must be a non-negative integer"});

  for (const int channels : {1, 2, max_channels}) {
    global["core:num_channels"] = channels;
    write_meta_with_global(meta, global);
    EXPECT_EQ(read_sigmf_meta(meta).num_channels, channels);
  }

  global = ok;
  global["core:trailing_bytes"] = 16;
  write_meta_with_global(meta, global);
  expect_error<format_error>([&] { (void)read_sigmf_meta(meta); }, {"core:trailing_bytes"});

  // Header bytes are a layout paqd reads (header_bytes_are_skipped_in_every_capture).
  nlohmann::json doc = {{"global", ok},
                        {"captures", {{{"core:sample_start", 0}, {"core:header_bytes", 64}}}}};
  write_text(meta, doc.dump());
  EXPECT_EQ(read_sigmf_meta(meta).header_chunks, (std::vector<sigmf_header_chunk>{{0, 64, 0}}));

  // A later capture starting elsewhere is fine: only the first one is used.
  doc = {{"global", ok},
         {"captures", {{{"core:sample_start", 0}, {"core:frequency", 1e9}},
                       {{"core:sample_start", 500}, {"core:frequency", 2e9}}}}};
  write_text(meta, doc.dump());
  EXPECT_EQ(read_sigmf_meta(meta).center_frequency_hz, 1e9);
}

TEST_F(io_test, raw_file_needs_format_and_rate) {
  write_text(path("plain.bin"), std::string(64, '\0'));
  const std::string name = path("plain.bin").string();
  expect_error<format_error>([&] { (void)sample_file_reader::open(path("plain.bin")); },
                             {name + ": ", "its sample format and sample rate are not given"});
  // Each message names what is missing.
  expect_error<format_error>(
      [&] { (void)sample_file_reader::open(path("plain.bin"), sample_format::cf32_le); },
      {"its sample rate is not given", "--sample-rate"});
  expect_error<format_error>(
      [&] { (void)sample_file_reader::open(path("plain.bin"), std::nullopt, 1e6); },
      {"its sample format is not given", "--datatype"});
  expect_error<std::invalid_argument>(
      [&] { (void)sample_file_reader::open(path("plain.bin"), sample_format::cf32_le, -5.0); },
      {name, "sample rate"});
  EXPECT_EQ(sample_file_reader::open(path("plain.bin"), sample_format::cf32_le, 1e6).info().num_samples,
            8u);
}

TEST_F(io_test, empty_data_file) {
  write_sigmf_meta(path("e.sigmf-meta"), basic_meta(sample_format::cf32_le));
  write_text(path("e.sigmf-data"), "");
  const std::string data = path("e.sigmf-data").string();
  expect_error<format_error>([&] { (void)sample_file_reader::open(path("e")); },
                             {data + ": contains no samples"});
  // Less than one whole sample is no better.
  write_text(path("e.sigmf-data"), "abc");
  expect_error<format_error>([&] { (void)sample_file_reader::open(path("e")); },
                             {data + ": contains no samples", "3 bytes"});
  write_text(path("e.raw"), "");
  expect_error<format_error>(
      [&] { (void)sample_file_reader::open(path("e.raw"), sample_format::ci16_le, 1e6); },
      {"contains no samples"});
}

TEST_F(io_test, missing_data_file) {
  write_sigmf_meta(path("nd.sigmf-meta"), basic_meta(sample_format::cf32_le));
  const std::string data = path("nd.sigmf-data").string();
  expect_error<format_error>([&] { (void)sample_file_reader::open(path("nd.sigmf-meta")); },
                             {data + ": cannot open", "No such file"});
  expect_error<format_error>(
      [&] { (void)sample_file_reader::open(path("absent.cf32"), sample_format::cf32_le, 1e6); },
      {path("absent.cf32").string(), "No such file"});
  fs::create_directory(path("adir"));
  expect_error<format_error>(
      [&] { (void)sample_file_reader::open(path("adir"), sample_format::cf32_le, 1e6); },
      {"not a regular file"});
}

TEST_F(io_test, file_that_shrinks_while_reading_is_an_error_with_offset) {
  {
    auto writer = sample_file_writer::create_raw(path("s.ci16"), sample_format::ci16_le);
    writer.write(random_samples(1000, 0x5EED000A));
    writer.close();
  }
  auto reader = sample_file_reader::open(path("s.ci16"), sample_format::ci16_le, 1e6);
  std::vector<cf32> buf(100);
  ASSERT_EQ(reader.read(buf), 100u);
  fs::resize_file(path("s.ci16"), 1000);  // 250 samples left
  buf.resize(1000);
  expect_error<std::runtime_error>([&] { (void)reader.read(buf); },
                                   {path("s.ci16").string(), "unexpected end of file",
                                    "byte offset 1000"});
}

// A read of several MiB is split over a team of threads (pieces of at least 2 MiB, each
// pread at its own offset): the same samples as small reads give, a moved reader reads on with
// its team, and a piece that meets the end of a shrunk file is the read's error.
TEST_F(io_test, large_reads_split_over_threads_read_the_same_samples_and_report_a_shrunk_file) {
  const std::vector<cf32> samples = random_samples(3'000'001, 0x5EED000B);  // 12 MB of ci16: 5 pieces
  {
    auto writer = sample_file_writer::create_raw(path("big.ci16"), sample_format::ci16_le);
    writer.write(samples);
    writer.close();
  }
  std::vector<paq::ci16> small(samples.size());
  {
    auto reader = sample_file_reader::open(path("big.ci16"), sample_format::ci16_le, 1e6);
    for (std::size_t done = 0; done < small.size();) {  // 1000 at a time: one thread
      done += reader.read(std::span<paq::ci16>(small).subspan(done, std::min<std::size_t>(1000, small.size() - done)));
    }
  }
  auto reader = sample_file_reader::open(path("big.ci16"), sample_format::ci16_le, 1e6);
  std::vector<paq::ci16> large(samples.size());
  const std::size_t half = samples.size() / 2;
  ASSERT_EQ(reader.read(std::span<paq::ci16>(large).first(half)), half);
  auto moved = std::move(reader);
  ASSERT_EQ(moved.read(std::span<paq::ci16>(large).subspan(half)), samples.size() - half);
  EXPECT_TRUE(std::equal(large.begin(), large.end(), small.begin(), [](paq::ci16 a, paq::ci16 b) { return a.re == b.re && a.im == b.im; }));

  auto shrinking = sample_file_reader::open(path("big.ci16"), sample_format::ci16_le, 1e6);
  fs::resize_file(path("big.ci16"), 5'000'000);  // within the third of five pieces
  expect_error<std::runtime_error>([&] { (void)shrinking.read(std::span<paq::ci16>(large)); },
                                   {path("big.ci16").string(), "unexpected end of file", "byte offset"});
}

// ---------------------------------------------------------------------------------------------
// Metadata from outside is bounded before it is parsed

[[nodiscard]] std::string meta_with_extra(const std::string& extra_value) {
  return R"({"global": {"core:datatype": "cf32_le", "core:sample_rate": 1e6, "x:deep": )" +
         extra_value + "}}";
}

TEST_F(io_test, deep_json_is_refused_before_parsing) {
  // The reproducer: an 80,000-deep array in a .sigmf-meta overflowed the stack (under ASan;
  // nlohmann::json copies and prints recursively).
  const fs::path meta = path("deep.sigmf-meta");
  const std::size_t n = 80'000;
  write_text(meta, meta_with_extra(std::string(n, '[') + std::string(n, ']')));
  expect_error<format_error>([&] { (void)read_sigmf_meta(meta); },
                             {meta.string() + ": ", "JSON nesting depth 80002", "limit of 64"});
  // Unclosed brackets count too (the parser never gets to say the text is malformed).
  write_text(meta, std::string(n, '{'));
  expect_error<format_error>([&] { (void)read_sigmf_meta(meta); },
                             {"JSON nesting depth 80000", "limit of 64"});

  // Exactly at the limit is fine: 2 levels of document + 62 of the value.
  write_text(meta, meta_with_extra(std::string(62, '[') + std::string(62, ']')));
  EXPECT_EQ(read_sigmf_meta(meta).extra_global.at("x:deep").size(), 1u);
  write_text(meta, meta_with_extra(std::string(63, '[') + std::string(63, ']')));
  expect_error<format_error>([&] { (void)read_sigmf_meta(meta); }, {"JSON nesting depth 65"});

  // Brackets inside strings (escaped quotes included) are text, not nesting.
  const std::string brackets = R"("[[[[{{{{ \" [[[[ \\")";
  EXPECT_EQ(json_nesting_depth(brackets), 0u);
  write_text(meta, meta_with_extra(R"(")" + std::string(1000, '[') + R"(\"")"));
  EXPECT_EQ(read_sigmf_meta(meta).extra_global.at("x:deep").get<std::string>().size(), 1001u);
  EXPECT_EQ(json_nesting_depth(R"({"a": [1, {"b": "]]]"}], "c": {}})"), 3u);
}

TEST_F(io_test, oversized_and_non_regular_metadata_is_refused) {
  const fs::path meta = path("big.sigmf-meta");
  // Valid JSON one byte over the limit: refused by size, whatever it holds.
  const std::string prefix = R"({"global": {"core:datatype": "cf32_le", "core:sample_rate": 1e6, "x:pad": ")";
  const std::string suffix = "\"}}";
  std::string text = prefix + std::string(sigmf_max_meta_bytes - prefix.size() - suffix.size(), 'x') + suffix;
  ASSERT_EQ(text.size(), sigmf_max_meta_bytes);
  write_text(meta, text);
  EXPECT_EQ(read_sigmf_meta(meta).sample_rate_hz, 1e6);
  text.insert(prefix.size(), "x");
  write_text(meta, text);
  expect_error<format_error>([&] { (void)read_sigmf_meta(meta); },
                             {meta.string() + ": ", "is 16777217 bytes", "16777216-byte limit"});

  // The reproducer of the endless read: a device as the metadata file. /dev/zero never ends;
  // a FIFO with no writer would block in open().
  expect_error<format_error>([&] { (void)read_sigmf_meta("/dev/zero"); },
                             {"/dev/zero: ", "is not a regular file"});
  const fs::path fifo = path("pipe.sigmf-meta");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  expect_error<format_error>([&] { (void)read_sigmf_meta(fifo); },
                             {fifo.string() + ": ", "is not a regular file"});
  // A symlink to a device is followed and refused the same way.
  const fs::path link = path("zero.sigmf-meta");
  fs::create_symlink("/dev/zero", link);
  expect_error<format_error>([&] { (void)sample_file_reader::open(link); },
                             {link.string() + ": ", "is not a regular file"});
}

TEST_F(io_test, raw_sample_rate_is_range_checked_before_use) {
  write_text(path("r.cf32"), std::string(64, '\0'));
  for (const double rate : {1e300, -1.0, 0.0, 999.0, 2e9, std::numeric_limits<double>::quiet_NaN(),
                            std::numeric_limits<double>::infinity()}) {
    expect_error<std::invalid_argument>(
        [&] { (void)sample_file_reader::open(path("r.cf32"), sample_format::cf32_le, rate); },
        {path("r.cf32").string() + ": sample rate ", "is out of range (1000 .. 1e+09 Hz)"});
  }
  EXPECT_EQ(sample_file_reader::open(path("r.cf32"), sample_format::cf32_le, 1e3).info().sample_rate_hz, 1e3);
}

TEST_F(io_test, integer_layout_fields_name_the_value_and_the_allowed_one) {
  const fs::path meta = path("hb.sigmf-meta");
  const nlohmann::json global = {{"core:datatype", "cf32_le"}, {"core:sample_rate", 1e6}};
  for (const nlohmann::json& header : {nlohmann::json(1e300), nlohmann::json(-1), nlohmann::json(1.5),
                                       nlohmann::json("64")}) {
    write_text(meta, nlohmann::json({{"global", global}, {"captures", {{{"core:header_bytes", header}}}}}).dump());
    expect_error<format_error>([&] { (void)read_sigmf_meta(meta); },
                               {"captures[0] core:header_bytes must be a non-negative integer, got " +
                                header.dump()});
  }
  // The largest header a file can state: read, then refused where it meets the data file.
  write_text(meta, nlohmann::json({{"global", global},
                                   {"captures", {{{"core:header_bytes", 18446744073709551615ull}}}}})
                       .dump());
  EXPECT_EQ(read_sigmf_meta(meta).header_chunks.at(0).header_bytes, 18446744073709551615ull);
  write_text(path("hb.sigmf-data"), std::string(64, '\0'));
  expect_error<format_error>([&] { (void)sample_file_reader::open(meta); },
                             {path("hb.sigmf-data").string() + ": captures[0] core:header_bytes "
                              "18446744073709551615 at byte offset 0", "run past the end of the data (64 bytes)"});
  nlohmann::json g = global;
  g["core:trailing_bytes"] = 3;
  write_meta_with_global(meta, g);
  expect_error<format_error>([&] { (void)read_sigmf_meta(meta); },
                             {"core:trailing_bytes 3 are not supported (allowed: 0)"});
}

// ---------------------------------------------------------------------------------------------
// SigMF conformance (extensions, annotations, header bytes, archives)

TEST_F(io_test, every_namespace_written_is_declared_in_core_extensions) {
  const fs::path meta_path = path("x.sigmf-meta");
  sigmf_meta meta = basic_meta(sample_format::cf32_le);
  meta.extra_global = {{"paq:seed", 7}};
  write_sigmf_meta(meta_path, meta);
  EXPECT_EQ(read_json(meta_path).at("global").at("core:extensions"),
            nlohmann::json::parse(R"([{"name": "paq", "version": "1.0.0", "optional": true}])"));

  // A namespace nobody declared: the file would not be SigMF, so it is not written.
  meta.extra_global = {{"paq:seed", 7}, {"vendor:gain_db", 30}};
  expect_error<std::invalid_argument>([&] { write_sigmf_meta(meta_path, meta); },
                                      {"namespace 'vendor'", "not declared"});
  meta.annotations = nlohmann::json::array({{{"core:sample_start", 1}, {"acme:x", 1}}});
  meta.extensions = {{"vendor", "2.0.0", false}};
  expect_error<std::invalid_argument>([&] { write_sigmf_meta(meta_path, meta); }, {"namespace 'acme'"});
  meta.annotations = nullptr;
  write_sigmf_meta(meta_path, meta);
  EXPECT_EQ(read_json(meta_path).at("global").at("core:extensions").at(1),
            nlohmann::json::parse(R"({"name": "vendor", "version": "2.0.0", "optional": false})"));
  // ... but paqd itself refuses to read it: it does not support the required extension.
  expect_error<format_error>([&] { (void)read_sigmf_meta(meta_path); },
                             {meta_path.string() + ": ", "requires the SigMF extension 'vendor' version 2.0.0",
                              "optional: false", "(supported: paq)"});

  // paq is the writer's own to declare; a second entry or an empty one is a mistake.
  for (const sigmf_extension& bad : {sigmf_extension{"paq", "9.9.9", true}, sigmf_extension{"core", "1", true},
                                     sigmf_extension{"", "1", true}, sigmf_extension{"v", "", true}}) {
    meta.extensions = {bad};
    meta.extra_global = {{"paq:seed", 7}};
    EXPECT_THROW(write_sigmf_meta(meta_path, meta), std::invalid_argument) << bad.name;
  }
  meta.extensions = {{"vendor", "1", true}, {"vendor", "2", true}};
  expect_error<std::invalid_argument>([&] { write_sigmf_meta(meta_path, meta); }, {"listed twice"});
}

TEST_F(io_test, malformed_or_required_extensions_are_refused_on_read) {
  const fs::path meta = path("e.sigmf-meta");
  const nlohmann::json ok = {{"core:datatype", "cf32_le"}, {"core:sample_rate", 1e6}};
  const std::vector<std::pair<nlohmann::json, std::string>> bad = {
      {nlohmann::json("paq"), "core:extensions must be a JSON array"},
      {nlohmann::json::array({7}), "core:extensions[0] must be a JSON object"},
      {nlohmann::json::parse(R"([{"name": "a", "version": "1"}])"), "a boolean optional"},
      {nlohmann::json::parse(R"([{"name": 1, "version": "1", "optional": true}])"), "a string name"},
      {nlohmann::json::parse(R"([{"name": "a", "version": "1", "optional": true},
                                 {"name": "b", "version": "3", "optional": false}])"),
       "requires the SigMF extension 'b' version 3 (global core:extensions[1]"},
  };
  for (const auto& [extensions, message] : bad) {
    nlohmann::json g = ok;
    g["core:extensions"] = extensions;
    write_meta_with_global(meta, g);
    expect_error<format_error>([&] { (void)read_sigmf_meta(meta); }, {meta.string() + ": ", message});
  }
  // Ours, required or not, and foreign optional ones are fine.
  nlohmann::json g = ok;
  g["core:extensions"] = nlohmann::json::parse(R"([{"name": "paq", "version": "1.0.0", "optional": false},
                                                   {"name": "antenna", "version": "1.0.0", "optional": true}])");
  write_meta_with_global(meta, g);
  EXPECT_EQ(read_sigmf_meta(meta).extensions, (std::vector<sigmf_extension>{{"antenna", "1.0.0", true}}));
}

TEST_F(io_test, annotations_are_written_in_order_and_read_back) {
  const fs::path meta_path = path("a.sigmf-meta");
  sigmf_meta meta = basic_meta(sample_format::ci16_le);
  meta.annotations = nlohmann::json::array(
      {{{"core:sample_start", 10}, {"core:sample_count", 0}, {"core:label", "gap (stall)"}, {"paq:lost_samples", 0}},
       {{"core:sample_start", 10}, {"core:comment", "second at the same place"}},
       {{"core:sample_start", 900}, {"core:sample_count", 5}, {"core:label", "x"}}});
  write_sigmf_meta(meta_path, meta);
  const nlohmann::json doc = read_json(meta_path);
  EXPECT_EQ(doc.at("annotations"), meta.annotations);
  EXPECT_EQ(read_sigmf_meta(meta_path).annotations, meta.annotations);
  // core:sample_start first in each, as other tools print them.
  EXPECT_LT(to_sigmf_json(meta).find("\"core:sample_start\": 900"), to_sigmf_json(meta).find("\"core:label\": \"x\""));

  const std::vector<std::pair<nlohmann::json, std::string>> bad = {
      {nlohmann::json::object(), "must be a JSON array"},
      {nlohmann::json::array({1}), "annotations[0] must be a JSON object"},
      {nlohmann::json::array({{{"core:label", "no start"}}}), "annotations[0] needs an unsigned integer core:sample_start"},
      {nlohmann::json::array({{{"core:sample_start", -1}}}), "unsigned integer core:sample_start"},
      {nlohmann::json::array({{{"core:sample_start", 5}}, {{"core:sample_start", 4}}}),
       "annotations[1] core:sample_start 4 is before the previous annotation's 5"},
      {nlohmann::json::array({{{"core:sample_start", 5}, {"core:sample_count", 1.5}}}), "core:sample_count"},
      {nlohmann::json::array({{{"core:sample_start", 5}, {"label", "x"}}}), "'label' must be namespaced"},
  };
  for (const auto& [annotations, message] : bad) {
    meta.annotations = annotations;
    expect_error<std::invalid_argument>([&] { write_sigmf_meta(meta_path, meta); }, {message});
  }

  // Read: absent means none; anything but an array is refused.
  write_meta_with_global(meta_path, {{"core:datatype", "cf32_le"}, {"core:sample_rate", 1e6}});
  EXPECT_EQ(read_sigmf_meta(meta_path).annotations, nlohmann::json::array());
  write_text(meta_path, R"({"global": {"core:datatype": "cf32_le", "core:sample_rate": 1e6}, "annotations": {}})");
  expect_error<format_error>([&] { (void)read_sigmf_meta(meta_path); }, {"\"annotations\" must be a JSON array"});
}

// The layout SigMF gives Non-Conforming Datasets: a capture's header bytes lie right before
// its first sample. A reader that ignored them read the 73 bytes of a later capture's header as
// samples (NaNs, and every later sample shifted).
void write_with_headers(const fs::path& data, sample_format format, const std::vector<cf32>& samples,
                        const std::vector<std::pair<std::size_t, std::size_t>>& headers /* sample, bytes */) {
  const std::size_t sb = bytes_per_sample(format);
  std::vector<std::byte> encoded(samples.size() * sb);
  (void)encode(format, samples.data(), samples.size(), encoded.data(), default_ci16_scale);
  std::ofstream f(data, std::ios::binary | std::ios::trunc);
  std::size_t next = 0;
  for (std::size_t k = 0; k <= samples.size(); ++k) {
    for (; next < headers.size() && headers[next].first == k; ++next) {
      // 0xFF bytes: NaNs as cf32, -1 as ci16: loud if read as samples.
      f << std::string(headers[next].second, static_cast<char>(0xFF));
    }
    if (k < samples.size()) f.write(reinterpret_cast<const char*>(encoded.data() + k * sb), static_cast<std::streamsize>(sb));
  }
  ASSERT_TRUE(f.good());
}

TEST_F(io_test, header_bytes_are_skipped_in_every_capture) {
  for (const sample_format format : {sample_format::cf32_le, sample_format::ci16_le}) {
    const auto samples = random_samples(1000, 0x5EED0013);
    const std::vector<std::pair<std::size_t, std::size_t>> headers = {{0, 16}, {500, 73}, {501, 4}, {640, 3}};
    write_with_headers(path("h.sigmf-data"), format, samples, headers);
    nlohmann::json captures = nlohmann::json::array();
    for (const auto& [start, bytes] : headers) {
      captures.push_back({{"core:sample_start", start}, {"core:header_bytes", bytes}});
    }
    captures.insert(captures.begin() + 2, nlohmann::json::object({{"core:sample_start", 500}}));  // no header
    write_text(path("h.sigmf-meta"),
               nlohmann::json({{"global", {{"core:datatype", std::string(to_sigmf_datatype(format))},
                                           {"core:sample_rate", 1e6}, {"core:version", "1.2.0"}}},
                               {"captures", captures},
                               {"annotations", nlohmann::json::array()}})
                   .dump());
    auto reader = sample_file_reader::open(path("h"));
    EXPECT_EQ(reader.info().num_samples, 1000u);
    EXPECT_EQ(reader.info().trailing_bytes, 0u);
    // Odd chunk sizes, so that reads start and end inside segments and across their bounds.
    for (const std::size_t chunk : {std::size_t{1}, std::size_t{7}, std::size_t{499}, std::size_t{4096}}) {
      reader.rewind();
      const auto back = read_all(reader, chunk);
      if (format == sample_format::cf32_le) {
        EXPECT_TRUE(bit_identical(samples, back)) << "chunk " << chunk;
      } else {
        EXPECT_TRUE(within(samples, back, ci16_tolerance(default_ci16_scale))) << "chunk " << chunk;
      }
    }
  }

  // Two channels: a capture's sample_start counts sample times, and its header lies before the
  // sample of each channel at that time.
  const auto one = random_samples(1000, 0x5EED0015), two = random_samples(1000, 0x5EED0016);
  std::vector<cf32> both;
  for (std::size_t i = 0; i < one.size(); ++i) {
    both.push_back(one[i]);
    both.push_back(two[i]);
  }
  write_with_headers(path("h2.sigmf-data"), sample_format::cf32_le, both, {{0, 16}, {1000, 73}, {1280, 3}});
  write_text(path("h2.sigmf-meta"),
             nlohmann::json({{"global", {{"core:datatype", "cf32_le"}, {"core:sample_rate", 1e6}, {"core:num_channels", 2}}},
                             {"captures",
                              {{{"core:sample_start", 0}, {"core:header_bytes", 16}},
                               {{"core:sample_start", 500}, {"core:header_bytes", 73}},
                               {{"core:sample_start", 640}, {"core:header_bytes", 3}}}}})
                 .dump());
  for (const int channel : {1, 2}) {
    auto reader = sample_file_reader::open(path("h2"), {}, {}, default_ci16_scale, channel);
    EXPECT_EQ(reader.info().num_samples, 1000u);
    EXPECT_TRUE(bit_identical(channel == 1 ? one : two, read_all(reader, 333))) << channel;
  }
}

TEST_F(io_test, header_bytes_past_the_data_or_captures_out_of_order_are_refused) {
  const auto samples = random_samples(100, 0x5EED0014);
  write_with_headers(path("p.sigmf-data"), sample_format::cf32_le, samples, {{50, 8}});
  const auto write_meta = [&](const nlohmann::json& captures) {
    write_text(path("p.sigmf-meta"),
               nlohmann::json({{"global", {{"core:datatype", "cf32_le"}, {"core:sample_rate", 1e6}}},
                               {"captures", captures}})
                   .dump());
  };
  // The header says 1000 bytes where 408 are left: the capture cannot be where it says.
  write_meta({{{"core:sample_start", 0}}, {{"core:sample_start", 50}, {"core:header_bytes", 1000}}});
  expect_error<format_error>([&] { (void)sample_file_reader::open(path("p")); },
                             {path("p.sigmf-data").string() + ": captures[1] core:header_bytes 1000 at byte offset 400",
                              "(before sample 50) run past the end of the data (808 bytes)"});
  // A capture beyond the data refers to samples that do not exist: ignored (SigMF).
  write_meta({{{"core:sample_start", 0}}, {{"core:sample_start", 50}, {"core:header_bytes", 8}},
              {{"core:sample_start", 5000}, {"core:header_bytes", 1u << 30}}});
  auto reader = sample_file_reader::open(path("p"));
  EXPECT_EQ(reader.info().num_samples, 100u);
  EXPECT_TRUE(bit_identical(samples, read_all(reader, 33)));
  // SigMF captures are in sample order.
  write_meta({{{"core:sample_start", 50}}, {{"core:sample_start", 10}, {"core:header_bytes", 8}}});
  expect_error<format_error>([&] { (void)sample_file_reader::open(path("p")); },
                             {"captures[1] core:sample_start 10 is before the previous capture's 50"});
  // Headers that leave less than one sample.
  write_text(path("p.sigmf-data"), std::string(12, '\0'));
  write_meta({{{"core:sample_start", 0}, {"core:header_bytes", 8}}});
  expect_error<format_error>([&] { (void)sample_file_reader::open(path("p")); },
                             {"contains no samples (12 bytes, 8 of them headers"});
}

// A tar member for the hand-made archives below: POSIX ustar header, checksum filled in.
struct tar_entry {
  tar_entry(std::string n, std::string b, char t = '0', std::string sf = {})
      : name(std::move(n)), bytes(std::move(b)), type(t), size_field(std::move(sf)) {}
  std::string name;
  std::string bytes;
  char type;
  std::string size_field;  // empty: the octal size of bytes
};

[[nodiscard]] std::string tar_header(const tar_entry& e) {
  std::string h(512, '\0');
  std::memcpy(h.data(), e.name.data(), std::min<std::size_t>(e.name.size(), 100));
  std::memcpy(h.data() + 100, "0000644", 7);
  std::memcpy(h.data() + 108, "0000000", 7);
  std::memcpy(h.data() + 116, "0000000", 7);
  char size[16];
  std::snprintf(size, sizeof size, "%011llo", static_cast<unsigned long long>(e.bytes.size()));
  const std::string size_text = e.size_field.empty() ? std::string(size) : e.size_field;
  std::memcpy(h.data() + 124, size_text.data(), std::min<std::size_t>(size_text.size(), 12));
  std::memcpy(h.data() + 136, "00000000000", 11);
  h[156] = e.type;
  std::memcpy(h.data() + 257, "ustar\0" "00", 8);
  std::memset(h.data() + 148, ' ', 8);
  unsigned sum = 0;
  for (const char c : h) sum += static_cast<unsigned char>(c);
  std::snprintf(h.data() + 148, 8, "%06o", sum);
  return h;
}

[[nodiscard]] std::string tar_of(const std::vector<tar_entry>& entries, bool end_blocks = true) {
  std::string tar;
  for (const auto& e : entries) {
    tar += tar_header(e) + e.bytes;
    tar.append((512 - e.bytes.size() % 512) % 512, '\0');
  }
  if (end_blocks) tar.append(1024, '\0');
  return tar;
}

// One pax record, "<length> <key>=<value>\n", its length counting its own digits.
[[nodiscard]] std::string pax_record(const std::string& key, const std::string& value) {
  const std::string body = " " + key + "=" + value + "\n";
  std::size_t n = body.size() + 1;
  while (std::to_string(n).size() + body.size() != n) ++n;
  return std::to_string(n) + body;
}

[[nodiscard]] std::string file_text(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

TEST_F(io_test, archives_are_read_in_place) {
  const auto samples = random_samples(3000, 0x5EED0015);
  {
    sigmf_meta meta = basic_meta(sample_format::ci16_le);
    meta.extra_global = {{"paq:seed", 9}};
    auto writer = sample_file_writer::create_sigmf(path("rec"), meta);
    writer.write(samples);
    writer.close();
  }
  const std::string meta_text = file_text(path("rec.sigmf-meta"));
  const std::string data = file_text(path("rec.sigmf-data"));
  // A directory entry first, as SigMF tools make them; any member order works.
  write_text(path("a.sigmf"), tar_of({{"rec/", "", '5'}, {"rec/rec.sigmf-data", data}, {"rec/rec.sigmf-meta", meta_text}}));
  auto reader = sample_file_reader::open(path("a.sigmf"));
  EXPECT_TRUE(reader.info().is_sigmf);
  EXPECT_EQ(reader.info().data_path, path("a.sigmf"));
  EXPECT_EQ(reader.info().archive_member, "rec/rec.sigmf-data");
  EXPECT_EQ(reader.info().data_offset_bytes, 1024u);
  EXPECT_EQ(reader.info().meta.extra_global.at("paq:seed"), 9);
  EXPECT_TRUE(within(samples, read_all(reader, 1000), ci16_tolerance(default_ci16_scale)));

  // A pax extended header naming the members (what Python's tarfile writes by default), an
  // unrelated member, and a trailing-bytes data member.
  const std::string long_dir(120, 'd');
  write_text(path("pax.sigmf"),
             tar_of({{"README", "not sigmf"}, {"PaxHeader", pax_record("path", long_dir + "/r.sigmf-meta"), 'x'},
                     {"ignored-name", meta_text}, {long_dir.substr(0, 99), "", '5'},
                     {"PaxHeader", pax_record("path", long_dir + "/r.sigmf-data"), 'x'}, {"x", data + "ab"}}));
  auto pax_reader = sample_file_reader::open(path("pax.sigmf"));
  EXPECT_EQ(pax_reader.info().trailing_bytes, 2u);
  EXPECT_EQ(pax_reader.info().archive_member, std::string(120, 'd') + "/r.sigmf-data");
  EXPECT_TRUE(within(samples, read_all(pax_reader, 777), ci16_tolerance(default_ci16_scale)));

  // No archive of that name: ".sigmf" still spells the base name of a recording.
  EXPECT_EQ(sample_file_reader::open(path("rec.sigmf")).info().num_samples, 3000u);
}

TEST_F(io_test, archives_made_by_tar_are_read) {
  if (std::system("tar --version > /dev/null 2>&1") != 0) GTEST_SKIP() << "no tar program";
  const auto samples = random_samples(2000, 0x5EED0016);
  fs::create_directories(path("t/flight-7"));
  {
    auto writer = sample_file_writer::create_sigmf(path("t/flight-7/flight-7"), basic_meta(sample_format::cf32_le));
    writer.write(samples);
    writer.close();
  }
  for (const char* format : {"ustar", "pax", "gnu"}) {
    const fs::path archive = path(std::string("flight-") + format + ".sigmf");
    const std::string cmd = "tar --format=" + std::string(format) + " -cf '" + archive.string() + "' -C '" +
                            path("t").string() + "' flight-7";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    auto reader = sample_file_reader::open(archive);
    EXPECT_EQ(reader.info().archive_member, "flight-7/flight-7.sigmf-data") << format;
    EXPECT_TRUE(bit_identical(samples, read_all(reader, 4096))) << format;
  }
  // Compressed archives are named as such.
  const std::string cmd = "tar -czf '" + path("c.sigmf").string() + "' -C '" + path("t").string() + "' flight-7";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  expect_error<format_error>([&] { (void)sample_file_reader::open(path("c.sigmf")); },
                             {path("c.sigmf").string() + ": is gzip-compressed", "decompress it first"});
}

TEST_F(io_test, hostile_or_broken_archives_are_refused_with_the_reason) {
  sigmf_meta m = basic_meta(sample_format::cf32_le);
  const std::string meta_text = to_sigmf_json(m);
  const std::string data(800, '\0');
  const tar_entry meta{"r.sigmf-meta", meta_text};
  const tar_entry good_data{"r.sigmf-data", data};
  const std::string good = tar_of({meta, good_data});
  const fs::path a = path("h.sigmf");
  const std::string name = a.string() + ": ";

  const auto refused = [&](const std::string& bytes, const std::vector<std::string>& parts) {
    write_text(a, bytes);
    std::vector<std::string> all = {name};
    all.insert(all.end(), parts.begin(), parts.end());
    expect_error<format_error>([&] { (void)sample_file_reader::open(a); }, all);
  };
  write_text(a, good);
  ASSERT_NO_THROW((void)sample_file_reader::open(a));

  refused("", {"is 0 bytes, too short for a tar archive"});
  refused(std::string(4096, 'x'), {"tar header at byte offset 0: no ustar magic: not a POSIX tar archive"});
  std::string bad_sum = good;
  bad_sum[10] ^= 1;  // a bit of the first member's name
  refused(bad_sum, {"tar header at byte offset 0: checksum mismatch"});
  std::string bad_second = good;
  bad_second[512 + 512 * ((meta_text.size() + 511) / 512) + 130] ^= 1;  // the data header's size
  refused(bad_second, {"tar header at byte offset " + std::to_string(512 + 512 * ((meta_text.size() + 511) / 512))});
  refused(good.substr(0, good.size() - 1024 - 512 + 100), {"truncated: the member at tar header at byte offset",
                                                          "needs 800 bytes"});
  refused(good.substr(0, 512 + 100), {"truncated", "needs " + std::to_string(meta_text.size()) + " bytes"});
  // Cut inside the metadata, zeros after it: an end marker where the data member should be.
  refused(good.substr(0, 700) + std::string(1024, '\0'), {"no member r.sigmf-data"});
  refused(good.substr(0, 512 * ((meta_text.size() + 511) / 512 + 1) + 200), {"is cut short"});
  refused(tar_of({meta, {"r.sigmf-data", data, '0', "9999999999999"}}), {"malformed size field"});
  refused(tar_of({meta, {"r.sigmf-data", data, '0', "77777777777"}}), {"truncated", "needs 8589934591 bytes"});
  refused(tar_of({meta}), {"no member r.sigmf-data for r.sigmf-meta"});
  refused(tar_of({good_data}), {"holds no .sigmf-meta member"});
  refused(tar_of({meta, good_data, {"s.sigmf-meta", meta_text}, {"s.sigmf-data", data}}),
          {"holds 2 recordings (r.sigmf-meta, s.sigmf-meta)", "extract it"});
  refused(tar_of({meta, good_data, good_data}), {"member r.sigmf-data appears twice"});
  refused(tar_of({meta, {"r.sigmf-data", "", '2'}}), {"member r.sigmf-data is a symbolic link, not a regular file"});
  refused(tar_of({{"PaxHeader", "5 pa\n", 'x'}, meta, good_data}), {"pax extended header: malformed record"});
  refused(tar_of({{"PaxHeader", "99 path=x\n", 'x'}, meta, good_data}), {"pax extended header: malformed record"});
  refused(tar_of({{"PaxHeader", pax_record("size", "1234567"), 'x'}, meta, good_data}), {"truncated", "needs 1234567 bytes"});
  refused(tar_of({{"PaxHeader", "14 size=12a45\n", 'x'}, meta, good_data}), {"malformed size '12a45'"});
  refused(tar_of({{"PaxHeader", std::string(2u << 20, 'x'), 'x'}, meta, good_data}), {"extended header of 2097152 bytes"});
  // The metadata inside is checked as a .sigmf-meta file is, and named by its member.
  refused(tar_of({{"r.sigmf-meta", "{"}, good_data}), {"member r.sigmf-meta: invalid JSON"});
  // A header in a capture that runs past the data member (not into the rest of the archive).
  nlohmann::json doc = nlohmann::json::parse(meta_text);
  doc["captures"][0]["core:header_bytes"] = 801;
  refused(tar_of({{"r.sigmf-meta", doc.dump()}, good_data, {"pad.bin", std::string(4096, 'p')}}),
          {"member r.sigmf-data: captures[0] core:header_bytes 801", "run past the end of the data (800 bytes)"});

  // Headers inside an archive are skipped as in a plain data file.
  doc["captures"][0]["core:header_bytes"] = 8;
  write_text(a, tar_of({{"r.sigmf-meta", doc.dump()}, good_data}));
  EXPECT_EQ(sample_file_reader::open(a).info().num_samples, 99u);
}

}  // namespace
