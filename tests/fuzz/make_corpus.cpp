// Writes the seed corpora of the fuzz targets: paq-fuzz-corpus DIR writes DIR/<target>/<seed>
// (DIR is tests/fuzz/corpus in the tree). Deterministic: the project's own encoders and a
// fixed-seed std::mt19937_64 (whose output the standard fixes), so running it again gives the
// same files. Besides typical inputs it writes the hostile inputs that once broke a parser or
// the batcher, by name (hostile-*).
// The input layouts are described at the top of each fuzz_<target>.cpp.
#include "config/daemon_config.hpp"
#include "config/receiver_yaml.hpp"
#include "io/bitstream.hpp"
#include "io/sample_format.hpp"
#include "io/sigmf.hpp"
#include "io/vita49.hpp"

#include <array>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <initializer_list>
#include <utility>
#include <fstream>
#include <random>
#include <string>
#include <vector>

using namespace paq;
namespace fs = std::filesystem;
using bytes = std::vector<std::uint8_t>;

namespace {

fs::path root;
std::mt19937_64 rng(20240917);

void put(const std::string& target, const std::string& name, const bytes& b)
{
    const fs::path dir = root / target;
    fs::create_directories(dir);
    std::ofstream f(dir / name, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
    if (!f) {
        std::fprintf(stderr, "paq-fuzz-corpus: cannot write %s\n", (dir / name).c_str());
        std::exit(1);
    }
}

bytes text(const std::string& s) { return bytes(s.begin(), s.end()); }

bytes with_option(std::uint8_t option, const bytes& rest)
{
    bytes b{option};
    b.insert(b.end(), rest.begin(), rest.end());
    return b;
}

/// Appends a record: 2-byte big-endian length, then the bytes (fuzz_support.hpp).
template <class Byte>
void add_record(bytes& out, const std::vector<Byte>& r)
{
    out.push_back(static_cast<std::uint8_t>(r.size() >> 8));
    out.push_back(static_cast<std::uint8_t>(r.size() & 0xFF));
    for (const Byte b : r) out.push_back(static_cast<std::uint8_t>(b));
}

/// Uniform in [-1, 1) from the engine's bits (std distributions differ between libraries).
float unit() { return static_cast<float>(static_cast<double>(rng() >> 11) * 0x1p-52 - 1.0); }

std::vector<cf32> samples(std::size_t n)
{
    std::vector<cf32> s(n);
    for (auto& x : s) x = cf32(unit(), unit());
    return s;
}

bytes random_bytes(std::size_t n)
{
    bytes b(n);
    for (auto& x : b) x = static_cast<std::uint8_t>(rng() >> 56);
    return b;
}

// ---- VITA-49 -----------------------------------------------------------------------------

struct vita_packet {
    std::uint64_t timestamp = 0;  ///< sample count (TSF = sample_count) when with_tsf
    std::uint8_t count = 0;
    std::size_t num_samples = 100;
    bool with_tsf = true;
    bool with_tsi = false;
    std::uint32_t second = 0;
    std::uint32_t stream_id = 1;
    bool class_id_and_trailer = false;
};

std::vector<std::byte> vita(const vita_packet& p)
{
    io::vita49::packet_fields f;
    f.stream_id = p.stream_id;
    f.packet_count = static_cast<std::uint8_t>(p.count & 15);
    if (p.with_tsf) {
        f.tsf = io::vita49::tsf_type::sample_count;
        f.fractional_timestamp = p.timestamp;
    }
    if (p.with_tsi) {
        f.tsi = io::vita49::tsi_type::utc;
        f.integer_timestamp = p.second;
    }
    if (p.class_id_and_trailer) {
        f.class_id_field = io::vita49::class_id{0x123456, 1, 2};
        f.trailer = 0x40000000u;
    }
    return io::vita49::encode_packet(f, samples(p.num_samples));
}

/// A stream of n packets of `len` samples from timestamp t0, packet count from c0.
void add_stream(bytes& out, std::size_t n, std::size_t len, std::uint64_t t0 = 0, std::uint8_t c0 = 0, bool tsf = true)
{
    for (std::size_t k = 0; k < n; ++k) {
        vita_packet p;
        p.timestamp = t0 + k * len;
        p.count = static_cast<std::uint8_t>(c0 + k);
        p.num_samples = len;
        p.with_tsf = tsf;
        add_record(out, vita(p));
    }
}

void vita49_corpus()
{
    const std::string t = "fuzz_vita49_batcher";
    for (const int opt : {0, 2, 4}) {
        bytes b{static_cast<std::uint8_t>(opt)};
        add_stream(b, 12, 500);
        put(t, "stream-sample-count-opt" + std::to_string(opt), b);
    }
    {  // no timestamps: losses from the packet count only
        bytes b{2};
        add_stream(b, 5, 300, 0, 0, false);
        add_stream(b, 5, 300, 0, 8, false);
        put(t, "stream-packet-count-loss", b);
    }
    {  // TSI seconds + sample count within the second, across a second boundary
        bytes b{1};
        for (std::uint32_t k = 0; k < 6; ++k) {
            vita_packet p;
            p.with_tsi = true;
            p.second = 100 + (k >= 3 ? 1 : 0);
            p.timestamp = k >= 3 ? (k - 3) * 400 : 6'600'000 - (3 - k) * 400;
            p.count = static_cast<std::uint8_t>(k);
            p.num_samples = 400;
            add_record(b, vita(p));
        }
        put(t, "stream-tsi-second-boundary", b);
    }
    {  // class id, trailer, a context packet, another stream, a malformed datagram, a duplicate,
       // a late packet and a restart of the sender's clock
        bytes b{2};
        vita_packet p;
        p.class_id_and_trailer = true;
        for (std::uint8_t k = 0; k < 3; ++k) {
            p.count = k;
            p.timestamp = k * 100u;
            add_record(b, vita(p));
        }
        const std::vector<std::uint8_t> context = {0x40, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x01};
        add_record(b, context);
        vita_packet other = p;
        other.stream_id = 7;
        add_record(b, vita(other));
        add_record(b, random_bytes(37));
        p.count = 3;
        p.timestamp = 300;
        add_record(b, vita(p));
        add_record(b, vita(p));  // duplicate
        p.count = 5;
        p.timestamp = 500;
        add_record(b, vita(p));
        p.count = 4;
        p.timestamp = 400;
        add_record(b, vita(p));  // late
        p.count = 6;
        p.timestamp = 10;
        add_record(b, vita(p));  // far backwards: resync
        put(t, "stream-mixed-events", b);
    }
    // Hostile: two packets with sample-count timestamps 0 and 2^64 - 1,000,000 (a gap of
    // ~2^64 samples: the batcher copied out of bounds); with a batch of 1,000,000, where that
    // showed, and with the harness's small batches.
    for (const int opt : {4, 0}) {
        bytes b{static_cast<std::uint8_t>(opt)};
        vita_packet p;
        p.num_samples = 1000;
        add_record(b, vita(p));
        p.count = 1;
        p.timestamp = UINT64_MAX - 1'000'000 + 1;
        add_record(b, vita(p));
        put(t, "hostile-timestamps-0-and-2e64-minus-1e6-opt" + std::to_string(opt), b);
    }
    {  // Hostile: a flood of one-sample datagrams whose packet count skips by 2
        bytes b{0};
        for (std::size_t k = 0; k < 3000; ++k) {
            vita_packet p;
            p.with_tsf = false;
            p.num_samples = 1;
            p.count = static_cast<std::uint8_t>(2 * k);
            add_record(b, vita(p));
        }
        put(t, "hostile-one-sample-flood-count-skips-2", b);
    }
    {  // Hostile: a timestamp jump to 2^64 - 5000, then the stream goes on (and wraps)
        bytes b{0};
        add_stream(b, 3, 1000);
        add_stream(b, 20, 1000, UINT64_MAX - 5000 + 1, 3);
        put(t, "hostile-timestamp-jump-to-2e64-minus-5000", b);
    }
}

// ---- SigMF -------------------------------------------------------------------------------

void sigmf_corpus()
{
    const std::string t = "fuzz_sigmf_meta";
    io::sigmf_meta m;
    m.sample_rate_hz = 20.625e6;
    put(t, "minimal-cf32", text(io::to_sigmf_json(m)));
    m.format = io::sample_format::ci16_le;
    m.ci16_scale = 4096.0f;
    m.description = "edwards3, Eb/N0 12 dB";
    m.recorder = "paq-sim";
    m.center_frequency_hz = 2.25e9;
    m.datetime_iso8601 = "2024-09-17T12:00:00Z";
    m.extra_global = {{"paq:preset", "edwards3"}, {"paq:seed", 7}, {"paq:gaps", {{{"sample", 1000}, {"lost", 20}}}}};
    put(t, "full-ci16", text(io::to_sigmf_json(m)));
    put(t, "not-an-object", text("[1, 2, 3]"));
    put(t, "rate-1e300", text(R"({"global": {"core:datatype": "cf32_le", "core:sample_rate": 1e300, "core:version": "1.0.0"}, "captures": [], "annotations": []})"));
    put(t, "two-channels", text(R"({"global": {"core:datatype": "ci16_le", "core:sample_rate": 1e6, "core:num_channels": 2}, "captures": [{"core:sample_start": 0, "core:header_bytes": 16}]})"));
    // Hostile: an 80,000-deep JSON array (the parser's recursion overflowed the stack).
    put(t, "hostile-json-array-80000-deep", text(std::string(80000, '[') + std::string(80000, ']')));
    put(t, "hostile-json-array-80000-deep-in-global",
        text(R"({"global": {"core:datatype": "cf32_le", "core:sample_rate": 1e6, "paq:deep": )" + std::string(80000, '[') +
             std::string(80000, ']') + "}}"));
}

// ---- sample files ------------------------------------------------------------------------

void sample_file_corpus()
{
    const std::string t = "fuzz_sample_file";
    for (const int opt : {0x00, 0x01, 0x02, 0x03, 0x17, 0x26, 0x35, 0x7c}) {
        std::vector<cf32> s = samples(300);
        const auto format = (opt & 1) ? io::sample_format::ci16_le : io::sample_format::cf32_le;
        std::vector<std::byte> enc(s.size() * io::bytes_per_sample(format));
        (void)io::encode(format, s.data(), s.size(), enc.data(), io::default_ci16_scale);
        bytes b{static_cast<std::uint8_t>(opt)};
        for (const auto x : enc) b.push_back(static_cast<std::uint8_t>(x));
        b.push_back(0xAB);  // a trailing partial sample
        char name[32];
        std::snprintf(name, sizeof name, "recording-opt%02x", opt);
        put(t, name, b);
    }
    // Extremes: ci16 -32768 and 32767; cf32 NaN, infinity, denormal, -0.
    put(t, "ci16-extremes", {0x01, 0x00, 0x80, 0xff, 0x7f, 0x00, 0x00, 0x01, 0x00});
    put(t, "cf32-nonfinite", {0x00, 0x00, 0x00, 0xc0, 0x7f, 0x00, 0x00, 0x80, 0x7f, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x80});
    put(t, "empty-file", {0x02});
}

// ---- SigMF archives ----------------------------------------------------------------------

// A ustar member: header (checksum filled in), the bytes, padding to 512.
void tar_member(bytes& tar, const std::string& name, const std::string& content, char type = '0')
{
    std::string h(512, '\0');
    h.replace(0, std::min<std::size_t>(name.size(), 100), name.substr(0, 100));
    char field[16];
    std::snprintf(field, sizeof field, "%011llo", static_cast<unsigned long long>(content.size()));
    h.replace(124, 11, field);
    h.replace(100, 7, "0000644");
    h[156] = type;
    h.replace(257, 8, std::string("ustar\0" "00", 8));
    h.replace(148, 8, "        ");
    unsigned sum = 0;
    for (const char c : h) sum += static_cast<unsigned char>(c);
    std::snprintf(field, sizeof field, "%06o", sum);
    h.replace(148, 7, std::string(field, 7));
    tar.insert(tar.end(), h.begin(), h.end());
    tar.insert(tar.end(), content.begin(), content.end());
    tar.resize(tar.size() + (512 - content.size() % 512) % 512, 0);
}

void archive_corpus()
{
    const std::string t = "fuzz_sigmf_archive";
    io::sigmf_meta m;
    m.format = io::sample_format::ci16_le;
    m.sample_rate_hz = 1e6;
    m.extra_global = {{"paq:seed", 1}};
    const std::vector<cf32> s = samples(40);
    std::string data(s.size() * 4, '\0');
    (void)io::encode(m.format, s.data(), s.size(), reinterpret_cast<std::byte*>(data.data()), io::default_ci16_scale);

    bytes plain;
    tar_member(plain, "rec/", "", '5');
    tar_member(plain, "rec/rec.sigmf-meta", io::to_sigmf_json(m));
    tar_member(plain, "rec/rec.sigmf-data", data);
    plain.resize(plain.size() + 1024, 0);
    put(t, "one-recording", plain);

    // pax names, and a second capture with header bytes (read in place, skipped).
    const std::string long_dir(110, 'd');
    const auto pax = [](const std::string& value) {
        const std::string body = " path=" + value + "\n";
        std::size_t n = body.size() + 1;
        while (std::to_string(n).size() + body.size() != n) ++n;
        return std::to_string(n) + body;
    };
    auto doc = nlohmann::json::parse(io::to_sigmf_json(m));
    doc["captures"] = nlohmann::json::parse(R"([{"core:sample_start": 0, "core:header_bytes": 4},
                                                {"core:sample_start": 20, "core:header_bytes": 7}])");
    const std::string meta_text = doc.dump(2);
    bytes headers;
    tar_member(headers, "PaxHeader", pax(long_dir + "/r.sigmf-meta"), 'x');
    tar_member(headers, "m", meta_text);
    tar_member(headers, "PaxHeader", pax(long_dir + "/r.sigmf-data"), 'x');
    tar_member(headers, "d", "HDR!" + data.substr(0, 80) + "HEADER!" + data.substr(80));
    headers.resize(headers.size() + 1024, 0);
    put(t, "pax-names-and-header-bytes", headers);

    bytes truncated(plain.begin(), plain.begin() + 1024 + 100);
    put(t, "truncated-member", truncated);
}

// ---- YAML configuration ------------------------------------------------------------------

void config_corpus(const fs::path& source_dir)
{
    const std::string t = "fuzz_config_yaml";
    put(t, "receiver-defaults", with_option(0, text(config::to_yaml(dsp::receiver_config{}))));
    put(t, "daemon-defaults", with_option(1, text(config::to_yaml(config::daemon_config{}))));
    std::ifstream f(source_dir / "config" / "paqd.yaml", std::ios::binary);
    const std::string shipped((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    if (shipped.empty()) {
        std::fprintf(stderr, "paq-fuzz-corpus: cannot read %s\n", (source_dir / "config" / "paqd.yaml").c_str());
        std::exit(1);
    }
    put(t, "daemon-shipped-paqd-yaml", with_option(1, text(shipped)));
    put(t, "receiver-section", with_option(0, text("receiver:\n  cma_mu: 0.012\n  cma_iterations: 2\n  batch_samples: 4096\n")));
    put(t, "daemon-udp-rate-1e300", with_option(1, text("source:\n  type: udp\n  udp:\n    sample_rate_hz: 1e300\n")));
    put(t, "daemon-anchors-flow", with_option(1, text("source: &s {type: tcp, tcp: {mode: listen, host: \"::\", port: 0}}\nring: {capacity_s: 0.5}\nx: *s\n")));
    // Hostile: a file holding only "," (the loader looped with growing memory).
    put(t, "hostile-yaml-only-comma-receiver", with_option(0, text(",")));
    put(t, "hostile-yaml-only-comma-daemon", with_option(1, text(",")));
}

// ---- metrics HTTP ------------------------------------------------------------------------

void metrics_corpus()
{
    const std::string t = "fuzz_metrics_http";
    put(t, "get-metrics", text("GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:9469\r\nUser-Agent: Prometheus/2.45\r\nAccept: text/plain\r\n\r\n"));
    put(t, "get-metrics-query", text("GET /metrics?name[]=paqd_packets_total HTTP/1.1\r\nHost: x\r\n\r\n"));
    put(t, "head-metrics", text("HEAD /metrics HTTP/1.1\r\nHost: x\r\n\r\n"));
    // Hostile: HEAD of an unknown path answered 404 with a body.
    put(t, "hostile-head-unknown-path", text("HEAD /nothing HTTP/1.1\r\nHost: x\r\n\r\n"));
    put(t, "get-root", text("GET / HTTP/1.0\r\n\r\n"));
    put(t, "post", text("POST /metrics HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc"));
    put(t, "incomplete", text("GET /metrics HTTP/1.1\r\nHost: x\r\n"));
    put(t, "pipelined", text("GET /metrics HTTP/1.1\r\n\r\nGET /metrics HTTP/1.1\r\n\r\n"));
    put(t, "long-header", text("GET /metrics HTTP/1.1\r\nX: " + std::string(20000, 'a') + "\r\n\r\n"));
}

// ---- bitstream ---------------------------------------------------------------------------

std::vector<std::uint8_t> datagram(io::bitstream_format format, const io::datagram_header& h, std::uint16_t dqe_id = 0)
{
    std::vector<std::uint8_t> bits(io::bitstream_payload_bytes);
    for (auto& x : bits) x = static_cast<std::uint8_t>(rng() >> 56);
    std::vector<std::uint8_t> out(io::bitstream_max_datagram_bytes);
    out.resize(io::encode_datagram(format, h, dqe_id, bits, out));
    return out;
}

void bitstream_corpus()
{
    const std::string t = "fuzz_bitstream";
    const io::bitstream_format formats[] = {io::bitstream_format::paq, io::bitstream_format::dqe, io::bitstream_format::dqe_raw};
    for (int f = 0; f < 3; ++f) {
        bytes b{static_cast<std::uint8_t>(6 | ((f + 1) << 3))};
        for (std::uint64_t k = 0; k < 4; ++k) {
            for (std::uint8_t s = 0; s < 6; ++s) {
                io::datagram_header h;
                h.stream_id = s;
                h.sequence = k;
                h.packet_index = k;
                h.start_sample = 1000 + k * 12672;
                h.bep_estimate = 1e-4f * static_cast<float>(s + 1);
                add_record(b, datagram(formats[f], h, s));
            }
        }
        put(t, "six-streams-" + std::string(io::to_string(formats[f])), b);
    }
    {  // losses, a duplicate, a late datagram, a restarted sender (sequence back to 0), junk
        bytes b{2};
        io::datagram_header h;
        h.stream_id = 2;
        for (const std::uint64_t seq : {0, 1, 3, 3, 2, 7, 0, 1}) {
            h.sequence = seq;
            h.start_sample = 5000 + seq * 12672;
            add_record(b, datagram(io::bitstream_format::paq, h));
        }
        add_record(b, random_bytes(832));
        h.sequence = UINT64_MAX;
        add_record(b, datagram(io::bitstream_format::paq, h));
        put(t, "sequence-events", b);
    }
    {  // header versions: 2 with a time and with "unknown", 1 (64 bytes, no time), 1 with a longer header
        bytes b{1 << 3};
        io::datagram_header h;
        h.stream_id = 1;
        h.start_sample = 7000;
        h.utc_ns = 1'795'603'660'123'456'789;
        add_record(b, datagram(io::bitstream_format::paq, h));
        h.sequence = 1;
        h.start_sample += 12672;
        h.utc_ns = io::bitstream_unknown_utc_ns;
        add_record(b, datagram(io::bitstream_format::paq, h));
        for (const std::size_t header : {io::bitstream_header_bytes_v1, io::bitstream_header_bytes_v1 + 4}) {
            h.sequence += 1;
            h.start_sample += 12672;
            auto d = datagram(io::bitstream_format::paq, h);
            // Version 1: the same fields without the time, the payload right after `header` bytes.
            std::vector<std::uint8_t> v1(d.begin(), d.begin() + io::bitstream_header_bytes_v1);
            v1.resize(header, 0);
            v1.insert(v1.end(), d.begin() + io::bitstream_header_bytes, d.end());
            v1[4] = 1;
            v1[6] = static_cast<std::uint8_t>(header >> 8);
            v1[7] = static_cast<std::uint8_t>(header);
            add_record(b, v1);
        }
        put(t, "header-versions", b);
    }
    {  // soft streams: LLR datagrams (payload type 2) of mmse and fde2_trellis beside a bitstream datagram
        bytes b{0};
        io::datagram_header h;
        std::vector<std::int8_t> llrs(io::llr_payload_bytes);
        for (std::size_t i = 0; i < llrs.size(); ++i) llrs[i] = static_cast<std::int8_t>(static_cast<int>(i % 255) - 127);
        for (const int s : {2, 11}) {
            h.stream_id = static_cast<std::uint8_t>(s);
            h.start_sample = 9000;
            std::vector<std::uint8_t> d(io::llr_datagram_bytes);
            io::encode_llr_datagram(h, llrs, d);
            add_record(b, d);
        }
        h.stream_id = 2;
        add_record(b, datagram(io::bitstream_format::paq, h));
        put(t, "soft-streams", b);
    }
    {  // decoded streams: a coded link's datagrams (payload type 3) of mmse (ar4ja-1024-1/2, one
       // failed codeword) and mmse_trellis (ar4ja-4096-2/3) beside mmse's bitstream
        bytes b{12};
        io::datagram_header h;
        h.stream_id = 2;
        std::vector<std::uint8_t> info(384);
        for (std::size_t i = 0; i < info.size(); ++i) info[i] = static_cast<std::uint8_t>(i * 7);
        for (int k = 0; k < 3; ++k) {
            h.sequence = static_cast<std::uint64_t>(k);
            h.start_sample = 9000 + 12672 * static_cast<std::uint64_t>(k);
            const std::vector<dsp::codeword_result> cw{{3, 1, 11}, {static_cast<std::uint8_t>(k == 2 ? 50 : 4), static_cast<std::uint8_t>(k != 2), 0}, {5, 1, 40}};
            std::vector<std::uint8_t> d(io::decoded_max_datagram_bytes);
            d.resize(io::encode_decoded_datagram(h, dsp::fec_code::k1024_r1_2, info, cw, d));
            add_record(b, d);
        }
        h.stream_id = 8;
        h.sequence = 0;
        const std::vector<std::uint8_t> info2(512, 0x5A);
        const std::vector<dsp::codeword_result> one{{4, 1, 17}};
        std::vector<std::uint8_t> d(io::decoded_max_datagram_bytes);
        d.resize(io::encode_decoded_datagram(h, dsp::fec_code::k4096_r2_3, info2, one, d));
        add_record(b, d);
        h.stream_id = 2;
        add_record(b, datagram(io::bitstream_format::paq, h));
        // The continuous stream (ar4ja-1024-4/5): packets ending 4, 5 and no frames, numbered on.
        h.stream_id = 3;
        std::int64_t frame = 7;
        for (int k = 0; k < 3; ++k) {
            const int frames = k == 2 ? 0 : 4 + k;
            h.sequence = static_cast<std::uint64_t>(k);
            h.start_sample = 9000 + 12672 * static_cast<std::uint64_t>(k);
            const std::vector<std::uint8_t> info3(static_cast<std::size_t>(frames) * 128, static_cast<std::uint8_t>(0x3C + k));
            const std::vector<dsp::codeword_result> cw(static_cast<std::size_t>(frames), dsp::codeword_result{6, 1, 9});
            std::vector<std::uint8_t> d3(io::decoded_max_datagram_bytes);
            d3.resize(io::encode_stream_decoded_datagram(h, dsp::fec_code::k1024_r4_5, frame, info3, cw, d3));
            add_record(b, d3);
            frame += frames;
        }
        put(t, "decoded-streams", b);
    }
}

// ---- TCP and UDP sources -----------------------------------------------------------------

void net_corpus()
{
    for (const int opt : {0, 1}) {
        const auto format = opt ? io::sample_format::ci16_le : io::sample_format::cf32_le;
        const std::vector<cf32> s = samples(500);
        std::vector<std::byte> enc(s.size() * io::bytes_per_sample(format));
        (void)io::encode(format, s.data(), s.size(), enc.data(), io::default_ci16_scale);
        const std::string suffix = opt ? "ci16" : "cf32";
        // TCP: the byte stream in reads that split samples at odd places, and a partial
        // sample at the close.
        bytes tcp{static_cast<std::uint8_t>(opt)};
        std::size_t off = 0;
        for (const std::size_t len : {1, 3, 5, 1000, 7, 2, 900}) {
            add_record(tcp, std::vector<std::byte>(enc.begin() + static_cast<std::ptrdiff_t>(off),
                                                   enc.begin() + static_cast<std::ptrdiff_t>(off + len)));
            off += len;
        }
        put("fuzz_tcp_source", "split-reads-" + suffix, tcp);
        // UDP: datagrams of whole samples, an empty one, and one with a partial sample.
        bytes udp{static_cast<std::uint8_t>(opt)};
        add_record(udp, std::vector<std::byte>(enc.begin(), enc.begin() + 400));
        add_record(udp, std::vector<std::byte>{});
        add_record(udp, std::vector<std::byte>(enc.begin() + 400, enc.begin() + 403));
        add_record(udp, std::vector<std::byte>(enc.begin() + 400, enc.begin() + 1600));
        put("fuzz_udp_source", "datagrams-" + suffix, udp);
    }
    // GNU Radio UDP Sink sequence numbers (u64 little-endian): in order from 1, two lost, a
    // duplicate, a reordered one, a restart at 1, and a jump to the top of the range.
    auto seqs = [](std::initializer_list<std::uint64_t> list) {
        bytes b;
        for (const std::uint64_t v : list)
            for (int i = 0; i < 8; ++i) b.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
        return b;
    };
    put("fuzz_udp_sequence", "in-order", seqs({1, 2, 3, 4, 5}));
    put("fuzz_udp_sequence", "lost-dup-reorder", seqs({1, 2, 5, 5, 4, 6, 9}));
    put("fuzz_udp_sequence", "restart", seqs({1, 2, 3, 1, 2, 1, 1}));
    put("fuzz_udp_sequence", "extremes", seqs({0, UINT64_MAX, 1, UINT64_MAX - 1, UINT64_MAX}));
    // One far-ahead number, then the real ones again; a restart whose 1 and 2 were lost.
    put("fuzz_udp_sequence", "far-ahead-then-back", seqs({1, 2, 3, UINT64_MAX - 1, 4, 5, 6, 3, 4}));
    // Two channels' blocks for the pairer: in step; channel 2 late and losing one; an
    // overlap and a step back; a long silence of channel 2 beyond the bound; a reset.
    auto pair_ops = [](std::uint8_t bound, std::initializer_list<std::array<int, 3>> list) {
        bytes b{bound};
        for (const auto& [op, delta, n] : list) {
            const auto d = static_cast<std::uint32_t>(delta) & 0xffffffu;
            b.insert(b.end(), {static_cast<std::uint8_t>(op), static_cast<std::uint8_t>(d >> 16), static_cast<std::uint8_t>(d >> 8),
                               static_cast<std::uint8_t>(d), static_cast<std::uint8_t>(n >> 8), static_cast<std::uint8_t>(n)});
        }
        return b;
    };
    put("fuzz_channel_pairing", "in-step", pair_ops(64, {{0, 0, 100}, {1, 0, 100}, {0, 0, 100}, {1, 0, 100}, {1, 0, 70}, {0, 0, 30}}));
    put("fuzz_channel_pairing", "late-and-lossy",
        pair_ops(64, {{0, 0, 100}, {0, 0, 100}, {1, 200, 100}, {0, 0, 100}, {1, 100, 100}, {0, 0, 100}, {0, 0, 100}}));
    put("fuzz_channel_pairing", "overlap-and-back", pair_ops(8, {{0, 0, 100}, {1, 0, 100}, {0, -50, 100}, {1, -300, 400}, {0, 5, 10}}));
    put("fuzz_channel_pairing", "silent-then-back",
        pair_ops(2, {{0, 0, 20}, {1, 0, 20}, {0, 0, 40}, {0, 0, 40}, {0, 0, 40}, {1, 0, 200}, {0, 0, 40}, {2, 0, 0}, {1, 0, 10}, {0, -10, 10}}));
    // GNU Radio ZeroMQ tag headers (magic f0 5f, version 1, offset u64, ntags u64).
    auto tag_header = [](std::uint64_t offset, std::uint64_t ntags) {
        bytes b{0xf0, 0x5f, 0x01};
        for (const std::uint64_t v : {offset, ntags})
            for (int i = 0; i < 8; ++i) b.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
        return b;
    };
    bytes no_tags = tag_header(1000, 0);
    no_tags.resize(no_tags.size() + 800);
    put("fuzz_zmq_tag_header", "no-tags-100-samples", no_tags);
    bytes two_tags = tag_header(0, 2);
    two_tags.resize(two_tags.size() + 42 + 80);
    put("fuzz_zmq_tag_header", "two-tags", two_tags);
    bytes short_header = tag_header(5, 0);
    short_header.resize(18);
    put("fuzz_zmq_tag_header", "short", short_header);
    bytes swapped = tag_header(1, 0);
    std::swap(swapped[0], swapped[1]);
    put("fuzz_zmq_tag_header", "big-endian-magic", swapped);
    // The ZeroMQ source, byte 0: bit 0 ci16 (else cf32), bit 1 tags: gnuradio. Tagged
    // messages in order, one skipping 50 items, one going back, one with tags in it, one
    // without the header, one not whole samples; untagged: whole and partial messages.
    for (const int opt : {0, 1}) {
        const auto format = opt ? io::sample_format::ci16_le : io::sample_format::cf32_le;
        const std::size_t bps = io::bytes_per_sample(format);
        const std::vector<cf32> s = samples(300);
        std::vector<std::byte> enc(s.size() * bps);
        (void)io::encode(format, s.data(), s.size(), enc.data(), io::default_ci16_scale);
        auto body = [&](std::size_t from, std::size_t n) {
            return std::vector<std::byte>(enc.begin() + static_cast<std::ptrdiff_t>(from * bps),
                                          enc.begin() + static_cast<std::ptrdiff_t>((from + n) * bps));
        };
        auto tagged = [&](std::uint64_t offset, std::uint64_t ntags, std::size_t from, std::size_t n) {
            bytes h = tag_header(offset, ntags);
            std::vector<std::byte> m(h.size());
            std::memcpy(m.data(), h.data(), h.size());
            const auto b = body(from, n);
            m.insert(m.end(), b.begin(), b.end());
            return m;
        };
        const std::string suffix = opt ? "ci16" : "cf32";
        bytes with_tags{static_cast<std::uint8_t>(opt | 2)};
        add_record(with_tags, tagged(0, 0, 0, 100));
        add_record(with_tags, tagged(150, 0, 100, 50));  // 50 items lost before it
        add_record(with_tags, tagged(10, 0, 150, 50));   // back: a discontinuity
        add_record(with_tags, tagged(60, 1, 200, 10));   // tags in it: dropped
        add_record(with_tags, body(200, 20));            // no header: dropped
        auto partial = tagged(60, 0, 220, 10);
        partial.pop_back();
        add_record(with_tags, partial);                  // not whole samples: dropped
        add_record(with_tags, tagged(60, 0, 230, 70));
        put("fuzz_zmq_source", "tagged-" + suffix, with_tags);
        bytes plain{static_cast<std::uint8_t>(opt)};
        add_record(plain, body(0, 120));
        add_record(plain, std::vector<std::byte>{});
        auto odd = body(120, 3);
        odd.pop_back();
        add_record(plain, odd);
        add_record(plain, body(123, 177));
        put("fuzz_zmq_source", "plain-" + suffix, plain);
    }
}

}  // namespace

int main(int argc, char** argv)
{
    if (argc != 2) {
        std::fprintf(stderr, "usage: paq-fuzz-corpus DIR   (writes DIR/<target>/<seed>; DIR: tests/fuzz/corpus)\n");
        return 2;
    }
    root = argv[1];
    const fs::path source_dir = fs::path(PAQ_SOURCE_DIR);
    vita49_corpus();
    sigmf_corpus();
    sample_file_corpus();
    archive_corpus();
    config_corpus(source_dir);
    metrics_corpus();
    bitstream_corpus();
    net_corpus();
    return 0;
}
