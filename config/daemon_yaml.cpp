#include "config/daemon_config.hpp"

#include "config/receiver_yaml.hpp"
#include "config/yaml_support.hpp"

#include <cerrno>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>
#include <system_error>
#include <utility>

namespace paq::config {

using namespace detail;

std::string_view to_string(source_type t) noexcept
{
    switch (t) {
    case source_type::file: return "file";
    case source_type::tcp: return "tcp";
    case source_type::udp: return "udp";
    case source_type::vita49: return "vita49";
    case source_type::iio: return "iio";
    }
    return "?";
}

std::string_view to_string(ring_overflow o) noexcept
{
    switch (o) {
    case ring_overflow::automatic: return "auto";
    case ring_overflow::drop: return "drop";
    case ring_overflow::block: return "block";
    }
    return "?";
}

std::string_view to_string(backend_kind b) noexcept
{
    switch (b) {
    case backend_kind::automatic: return "auto";
    case backend_kind::cpu: return "cpu";
    case backend_kind::cuda: return "cuda";
    }
    return "?";
}

std::string_view to_string(log_destination d) noexcept
{
    switch (d) {
    case log_destination::automatic: return "auto";
    case log_destination::console: return "console";
    case log_destination::journal: return "journal";
    }
    return "?";
}

namespace {

template <typename T>
std::string number_text(T v)
{
    if constexpr (std::is_floating_point_v<T>) {
        return format_double(static_cast<double>(v));
    } else {
        return std::to_string(v);
    }
}

/// One mapping of the document: typed field readers that record which keys are known, so
/// that finish() can report every unknown or duplicated key with a suggestion.
class section {
public:
    section(const YAML::Node& node, std::string path, const YAML::Mark& mark, error_list& errors)
        : node_(node), path_(std::move(path)), mark_(mark), errors_(errors)
    {
        if (node_.IsDefined() && !node_.IsNull() && !node_.IsMap()) {
            errors_.add(node_.Mark().is_null() ? mark_ : node_.Mark(),
                        "'" + path_ + "' must be a mapping of field: value, got a " + node_kind(node_));
            bad_ = true;
        }
    }

    template <typename T>
    void number(std::string_view key, T& target, T lo, T hi)
    {
        YAML::Mark key_mark;
        const YAML::Node v = find(key, key_mark);
        if (!v.IsDefined()) return;
        const std::string field = path_ + "." + std::string(key);
        const YAML::Mark mark = v.IsNull() || v.Mark().is_null() ? key_mark : v.Mark();
        if (!v.IsScalar() || !numeric_tag<T>(v)) {
            errors_.add(mark, field + ": expected " + expected_type_name<T>() + ", got " + describe_value(v) +
                                  (v.IsScalar() && v.Tag() == "!" ? " (a quoted string; write the number without quotes)" : ""));
            return;
        }
        T parsed{};
        number_status st;
        if constexpr (std::is_floating_point_v<T>) {
            double d = 0;
            st = parse_double(v.Scalar(), d);
            parsed = static_cast<T>(d);
        } else {
            st = parse_integer(v.Scalar(), parsed);
        }
        if (st != number_status::ok) {
            errors_.add(mark, field + ": expected " + expected_type_name<T>() + ", got '" + v.Scalar() + "'");
            return;
        }
        if (!(parsed >= lo && parsed <= hi)) {
            errors_.add(mark, field + " = " + v.Scalar() + " is out of range (allowed: " + number_text(lo) + " .. " +
                                  number_text(hi) + ")");
            return;
        }
        target = parsed;
    }

    void boolean(std::string_view key, bool& target)
    {
        YAML::Mark key_mark;
        const YAML::Node v = find(key, key_mark);
        if (!v.IsDefined()) return;
        const std::string s = v.IsScalar() ? v.Scalar() : "";
        if (v.IsScalar() && v.Tag() != "!" && (s == "true" || s == "True" || s == "TRUE")) {
            target = true;
        } else if (v.IsScalar() && v.Tag() != "!" && (s == "false" || s == "False" || s == "FALSE")) {
            target = false;
        } else {
            errors_.add(v.Mark().is_null() ? key_mark : v.Mark(),
                        path_ + "." + std::string(key) + ": expected true or false, got " + describe_value(v));
        }
    }

    /// A string; `required_nonempty` rejects an empty value.
    bool text(std::string_view key, std::string& target, bool required_nonempty = false)
    {
        YAML::Mark key_mark;
        const YAML::Node v = find(key, key_mark);
        if (!v.IsDefined()) return false;
        if (!v.IsScalar() || (required_nonempty && v.Scalar().empty())) {
            errors_.add(v.Mark().is_null() ? key_mark : v.Mark(),
                        path_ + "." + std::string(key) + ": expected a " + (required_nonempty ? "non-empty " : "") +
                            "string, got " + describe_value(v));
            return false;
        }
        target = v.Scalar();
        return true;
    }

    template <typename E>
    void choice(std::string_view key, E& target, std::initializer_list<std::pair<std::string_view, E>> options)
    {
        YAML::Mark key_mark;
        const YAML::Node v = find(key, key_mark);
        if (!v.IsDefined()) return;
        std::string allowed;
        for (const auto& [name, value] : options) {
            if (v.IsScalar() && v.Scalar() == name) {
                target = value;
                return;
            }
            allowed += (allowed.empty() ? "" : ", ") + std::string(name);
        }
        errors_.add(v.Mark().is_null() ? key_mark : v.Mark(),
                    path_ + "." + std::string(key) + ": got " + describe_value(v) + " (allowed: " + allowed + ")");
    }

    void int_list(std::string_view key, std::vector<int>& target, int lo, int hi)
    {
        YAML::Mark key_mark;
        const YAML::Node v = find(key, key_mark);
        if (!v.IsDefined()) return;
        const std::string field = path_ + "." + std::string(key);
        if (!v.IsSequence()) {
            errors_.add(v.Mark().is_null() ? key_mark : v.Mark(),
                        field + ": expected a list of integers such as [0, 1], got " + describe_value(v));
            return;
        }
        std::vector<int> out;
        std::set<int> seen;
        for (const auto& item : v) {
            int x = 0;
            if (!item.IsScalar() || !numeric_tag<int>(item) || parse_integer(item.Scalar(), x) != number_status::ok) {
                errors_.add(item.Mark(), field + ": expected integers, got " + describe_value(item));
                return;
            }
            if (x < lo || x > hi) {
                errors_.add(item.Mark(), field + ": " + item.Scalar() + " is out of range (allowed: " +
                                             std::to_string(lo) + " .. " + std::to_string(hi) + ")");
                return;
            }
            if (!seen.insert(x).second) {
                errors_.add(item.Mark(), field + ": " + item.Scalar() + " is listed twice");
                return;
            }
            out.push_back(x);
        }
        target = std::move(out);
    }

    /// A list of sender addresses / CIDR prefixes (io::check_allow_list), each error at its
    /// own line. Absent: target unchanged (every sender). An empty list is an error: it would
    /// refuse every sender, which is never what a configuration means.
    void allow_list(std::string_view key, std::vector<std::string>& target)
    {
        YAML::Mark key_mark;
        const YAML::Node v = find(key, key_mark);
        if (!v.IsDefined()) return;
        const std::string field = path_ + "." + std::string(key);
        const YAML::Mark mark = v.Mark().is_null() ? key_mark : v.Mark();
        if (!v.IsSequence()) {
            errors_.add(mark, field + ": expected a list of addresses or CIDR prefixes such as "
                                      "[192.168.10.0/24, 10.0.0.5, \"::1/128\"], got " + describe_value(v));
            return;
        }
        if (v.size() == 0) {
            errors_.add(mark, field + ": an empty list would refuse every sender (leave the key out to accept any)");
            return;
        }
        std::vector<std::string> out;
        bool ok = true;
        for (std::size_t i = 0; i < v.size(); ++i) {
            const YAML::Node item = v[i];
            const std::string item_field = field + "[" + std::to_string(i) + "]";
            if (!item.IsScalar()) {
                errors_.add(item.Mark(), item_field + ": expected an address or CIDR prefix, got " + describe_value(item));
                ok = false;
                continue;
            }
            if (const std::string e = io::allow_entry_error(item.Scalar()); !e.empty()) {
                errors_.add(item.Mark(), item_field + " = " + e);
                ok = false;
            }
            out.push_back(item.Scalar());
        }
        if (ok) target = std::move(out);
    }

    [[nodiscard]] section sub(std::string_view key)
    {
        YAML::Mark key_mark = mark_;
        const YAML::Node v = find(key, key_mark);
        return section(v, path_.empty() ? std::string(key) : path_ + "." + std::string(key), key_mark, errors_);
    }

    /// Reports keys nobody asked for, and duplicated keys.
    void finish()
    {
        if (bad_ || !node_.IsMap()) return;
        std::set<std::string> seen;
        for (const auto& entry : node_) {
            if (!entry.first.IsScalar()) {
                errors_.add(entry.first.Mark(), "keys in '" + path_ + "' must be names, got a " + node_kind(entry.first));
                continue;
            }
            const std::string& k = entry.first.Scalar();
            if (!seen.insert(k).second) {
                errors_.add(entry.first.Mark(), "duplicate key '" + k + "' " + (path_.empty() ? std::string("at the top level") : "in '" + path_ + "'"));
                continue;
            }
            if (known_.count(k)) continue;
            std::string msg = "unknown key '" + k + "' " + (path_.empty() ? std::string("at the top level") : "in '" + path_ + "'");
            std::size_t best = 3;
            std::string suggestion;
            std::string list;
            for (const auto& name : known_) {
                const std::size_t d = edit_distance(k, name);
                if (d < best) {
                    best = d;
                    suggestion = name;
                }
                list += (list.empty() ? "" : ", ") + name;
            }
            if (!suggestion.empty()) msg += ", did you mean '" + suggestion + "'?";
            msg += " (known: " + list + ")";
            errors_.add(entry.first.Mark(), msg);
        }
    }

    [[nodiscard]] bool present() const { return node_.IsDefined() && !node_.IsNull(); }
    /// Whether the document sets `key` here (does not mark it known).
    [[nodiscard]] bool has(std::string_view key) const
    {
        if (bad_ || !node_.IsMap()) return false;
        for (const auto& entry : node_) {
            if (entry.first.IsScalar() && entry.first.Scalar() == key) return true;
        }
        return false;
    }
    [[nodiscard]] const std::string& path() const { return path_; }
    [[nodiscard]] YAML::Mark mark() const { return mark_; }
    /// Records a key as known without reading it (read by another parser).
    void known(std::string_view key) { known_.insert(std::string(key)); }

private:
    YAML::Node find(std::string_view key, YAML::Mark& key_mark)
    {
        known_.insert(std::string(key));
        if (bad_ || !node_.IsMap()) return YAML::Node(YAML::NodeType::Undefined);
        for (const auto& entry : node_) {
            if (entry.first.IsScalar() && entry.first.Scalar() == key) {
                key_mark = entry.first.Mark();
                return entry.second;
            }
        }
        return YAML::Node(YAML::NodeType::Undefined);
    }

    YAML::Node node_;
    std::string path_;
    YAML::Mark mark_;
    error_list& errors_;
    std::set<std::string> known_;
    bool bad_ = false;
};

/// A sample format by the project's own names (io::parse_sample_format); true when set.
bool sample_format_field(section& sec, std::string_view key, io::sample_format& target, error_list& errors)
{
    std::string text;
    if (!sec.text(key, text, true)) return false;
    try {
        target = io::parse_sample_format(text);
        return true;
    } catch (const std::invalid_argument& e) {
        errors.add(sec.mark(), sec.path() + "." + std::string(key) + ": " + e.what());
        return false;
    }
}

/// A YAML double-quoted scalar: backslash, the quote and control characters escaped, so
/// that to_yaml's output reads back as the same string whatever it holds (a fuzzed bind
/// address with a newline in it did not).
std::string yaml_quoted(std::string_view text)
{
    std::string out = "\"";
    for (const char ch : text) {
        const auto c = static_cast<unsigned char>(ch);
        switch (ch) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\t': out += "\\t"; break;
        case '\r': out += "\\r"; break;
        default:
            if (c < 0x20 || c == 0x7f) {
                char buf[8];
                std::snprintf(buf, sizeof buf, "\\x%02x", c);
                out += buf;
            } else {
                out += ch;
            }
        }
    }
    out += '"';
    return out;
}

/// "    allow: [\"a\", \"b\"]\n", or "" for an empty list (the key left out: any sender).
std::string allow_yaml(const std::vector<std::string>& allow)
{
    if (allow.empty()) return {};
    std::string out = "    allow: [";
    for (std::size_t i = 0; i < allow.size(); ++i) { out += i ? ", " : ""; out += yaml_quoted(allow[i]); }
    return out + "]\n";
}

/// A file path; relative ones resolve against the configuration file's directory.
void path_field(section& sec, std::string_view key, const std::filesystem::path& base_dir, std::filesystem::path& target)
{
    std::string text;
    if (!sec.text(key, text, true)) return;
    const std::filesystem::path p(text);
    target = p.is_relative() && !base_dir.empty() ? base_dir / p : p;
}

}  // namespace

daemon_config parse_daemon_config(std::string_view yaml_text, std::string_view source_name,
                                  const std::filesystem::path& base_dir)
{
    daemon_config cfg;
    error_list errors(source_name);
    // The receiver section has its own parser (and its own tests).
    // Its errors (a YAML syntax error among them) are thrown from there, before the rest.
    cfg.receiver = parse_receiver_config(yaml_text, source_name);
    const std::vector<YAML::Node> docs = load_yaml_documents(yaml_text, source_name);  // passed above
    // An empty document is all defaults, which still must pass the checks below (a file
    // source needs its path).
    const YAML::Node top = docs.empty() ? YAML::Node(YAML::NodeType::Null) : docs.front();
    section root(top, "", YAML::Mark::null_mark(), errors);
    root.known("receiver");

    {
        auto src = root.sub("source");
        src.choice("type", cfg.source.type,
                   {{"file", source_type::file}, {"tcp", source_type::tcp}, {"udp", source_type::udp},
                    {"vita49", source_type::vita49}, {"iio", source_type::iio}});
        src.number("stall_timeout_s", cfg.source.stall_timeout_s, 0.05, 3600.0);
        auto f = src.sub("file");
        auto& fc = cfg.source.file;
        path_field(f, "path", base_dir, fc.path);
        if (io::sample_format raw{}; sample_format_field(f, "format", raw, errors)) fc.raw_format = raw;
        double rate = 0.0;
        f.number("sample_rate_hz", rate, 1e3, 1e9);
        if (rate > 0.0) fc.raw_sample_rate_hz = rate;
        f.number("ci16_scale", fc.raw_ci16_scale, 1e-6f, 1e9f);
        f.boolean("paced", fc.paced);
        f.number("rate_factor", fc.rate_factor, 1e-3, 1000.0);
        f.boolean("loop", fc.loop);
        f.number<std::size_t>("chunk_samples", fc.chunk_samples, 1, std::size_t{1} << 24);
        f.finish();
        {
            auto t = src.sub("tcp");
            auto& tc = cfg.source.tcp;
            t.choice("mode", tc.mode, {{"connect", io::tcp_mode::connect}, {"listen", io::tcp_mode::listen}});
            t.text("host", tc.host, true);
            t.number("port", tc.port, 0, 65535);
            sample_format_field(t, "format", tc.format, errors);
            t.number("ci16_scale", tc.ci16_scale, 1e-6f, 1e9f);
            t.number("sample_rate_hz", tc.sample_rate_hz, 0.0, 1e9);
            t.number("rcvbuf_bytes", tc.rcvbuf_bytes, 0, 1 << 30);
            t.number("retry_initial_s", tc.retry_initial_s, 0.001, 60.0);
            t.number("retry_max_s", tc.retry_max_s, 0.001, 600.0);
            t.boolean("end_on_close", tc.end_on_close);
            t.allow_list("allow", tc.allow);
            t.finish();
            if (cfg.source.type == source_type::tcp) {
                for (const auto& m : tc.validate()) errors.add(src.mark(), "source.tcp." + m);
            }
        }
        {
            auto u = src.sub("udp");
            auto& uc = cfg.source.udp;
            u.text("bind", uc.bind_address, true);
            u.number("port", uc.port, 0, 65535);
            sample_format_field(u, "format", uc.format, errors);
            u.number("ci16_scale", uc.ci16_scale, 1e-6f, 1e9f);
            u.number("sample_rate_hz", uc.sample_rate_hz, 0.0, 1e9);
            u.number("rcvbuf_bytes", uc.rcvbuf_bytes, 0, 1 << 30);
            u.allow_list("allow", uc.allow);
            u.finish();
            if (cfg.source.type == source_type::udp) {
                for (const auto& m : uc.validate()) errors.add(src.mark(), "source.udp." + m);
            }
        }
        {
            auto v = src.sub("vita49");
            auto& vc = cfg.source.vita49;
            v.text("bind", vc.bind_address, true);
            v.number("port", vc.port, 0, 65535);
            if (v.has("stream_id")) {
                std::uint32_t sid = 0;
                v.number<std::uint32_t>("stream_id", sid, 0, 0xffffffffu);
                vc.stream_id = sid;
            } else {
                v.known("stream_id");
            }
            v.number("ci16_scale", vc.ci16_scale, 1e-6f, 1e9f);
            v.number("sample_rate_hz", vc.sample_rate_hz, 0.0, 1e9);
            v.number("context_timeout_s", vc.context_timeout_s, 0.1, 3600.0);
            v.number("rcvbuf_bytes", vc.rcvbuf_bytes, 0, 1 << 30);
            v.allow_list("allow", vc.allow);
            v.choice("stream_change", vc.stream_change,
                     {{"follow", io::stream_change_policy::follow}, {"stay", io::stream_change_policy::stay}});
            v.number("stream_timeout_ms", vc.stream_timeout_ms, 1, 3'600'000);
            if (v.has("stream_id") && v.has("stream_change") && vc.stream_change == io::stream_change_policy::follow) {
                errors.add(v.mark(), "source.vita49.stream_change: follow cannot be combined with stream_id (a "
                                     "configured stream id is the only one ever accepted; remove one of the two)");
            }
            v.finish();
            if (cfg.source.type == source_type::vita49) {
                for (const auto& m : vc.validate()) errors.add(src.mark(), "source.vita49." + m);
            }
        }
        {
            auto i = src.sub("iio");
            auto& ic = cfg.source.iio;
            i.text("uri", ic.uri, true);
            i.text("phy_device", ic.phy_device, true);
            i.text("rx_device", ic.rx_device, true);
            i.number("sample_rate_hz", ic.sample_rate_hz, 0.0, 1e9);
            i.number("lo_hz", ic.lo_hz, 0.0, 1e11);
            i.number("rf_bandwidth_hz", ic.rf_bandwidth_hz, 0.0, 1e10);
            i.choice("gain_mode", ic.gain_mode,
                     {{"manual", io::iio_gain_mode::manual}, {"slow_attack", io::iio_gain_mode::slow_attack},
                      {"fast_attack", io::iio_gain_mode::fast_attack}, {"hybrid", io::iio_gain_mode::hybrid}});
            i.number("gain_db", ic.gain_db, -100.0, 100.0);
            i.number<std::size_t>("buffer_samples", ic.buffer_samples, 1, std::size_t{1} << 30);
            i.number("reconnect_interval_s", ic.reconnect_interval_s, 0.0, 3600.0);
            i.number("reconnect_max_interval_s", ic.reconnect_max_interval_s, 0.0, 3600.0);
            i.number("timeout_ms", ic.timeout_ms, 0u, 3'600'000u);
            i.number("scale", ic.scale, 1e-6f, 1e9f);
            i.finish();
            if (cfg.source.type == source_type::iio) {
                for (const auto& m : ic.validate()) errors.add(src.mark(), "source.iio." + m);
            }
        }
        if (cfg.source.type == source_type::file && fc.path.empty()) {
            errors.add(src.mark(), "source.file.path: must be set when source.type is file");
        }
        src.finish();
    }
    {
        auto r = root.sub("ring");
        r.number("capacity_s", cfg.ring.capacity_s, 0.1, 60.0);
        r.choice("overflow", cfg.ring.overflow,
                 {{"auto", ring_overflow::automatic}, {"drop", ring_overflow::drop}, {"block", ring_overflow::block}});
        r.boolean("lock_memory", cfg.ring.lock_memory);
        r.finish();
    }
    {
        auto p = root.sub("pipeline");
        p.choice("backend", cfg.pipeline.backend,
                 {{"auto", backend_kind::automatic}, {"cpu", backend_kind::cpu}, {"cuda", backend_kind::cuda}});
        p.int_list("gpus", cfg.pipeline.gpus, 0, 63);
        p.choice("solver", cfg.pipeline.solver,
                 {{"levinson", std::string("levinson")}, {"cusolver-dn-chol", std::string("cusolver-dn-chol")},
                  {"cusolver-sp-qr", std::string("cusolver-sp-qr")}});
        p.number("cpu_workers", cfg.pipeline.cpu_workers, 1, 64);
        p.number("queue_depth", cfg.pipeline.queue_depth, 1, 16);
        p.boolean("cpu_fallback", cfg.pipeline.cpu_fallback);
        p.finish();
    }
    {
        auto p = root.sub("publisher");
        auto& pc = cfg.publisher;
        p.boolean("enabled", pc.enabled);
        p.choice("format", pc.udp.format,
                 {{"paq", io::bitstream_format::paq}, {"dqe", io::bitstream_format::dqe},
                  {"dqe-raw", io::bitstream_format::dqe_raw}});
        std::string dqe_id;
        if (p.has("dqe_id")) {
            std::uint16_t fixed = 0;
            if (p.text("dqe_id", dqe_id, true) && dqe_id == "stream") {
                pc.udp.dqe_id.use_stream_id = true;
            } else {
                p.number<std::uint16_t>("dqe_id", fixed, 0, 65535);
                pc.udp.dqe_id.use_stream_id = false;
                pc.udp.dqe_id.fixed_id = fixed;
            }
        }
        p.number<std::size_t>("send_buffer_bytes", pc.udp.send_buffer_bytes, 4096, std::size_t{1} << 30);
        p.number("max_datagrams_per_second", pc.udp.max_datagrams_per_second, 0.0, 1e8);
        if (p.has("destinations")) {
            auto d = p.sub("destinations");
            std::array<std::string, dsp::chain::num_paths> dest{};
            for (int i = 0; i < dsp::chain::num_paths; ++i) d.text(dsp::path_name(i), dest[static_cast<std::size_t>(i)], true);
            d.finish();
            pc.udp.destinations = dest;
        }
        p.finish();
        if (pc.enabled) {
            for (const auto& m : pc.udp.validate()) errors.add(p.mark(), "publisher." + m);
        }
    }
    {
        auto m = root.sub("monitor");
        std::string pattern;
        if (m.text("pattern", pattern, true)) {
            if (pattern == "none") {
                cfg.monitor.pattern.reset();
            } else {
                try {
                    cfg.monitor.pattern = dsp::parse_pn_pattern(pattern);
                } catch (const std::invalid_argument&) {
                    errors.add(m.mark(), "monitor.pattern: got '" + pattern + "' (allowed: none, pn9, pn11, pn15, pn20, pn23, pn31)");
                }
            }
        }
        m.number("status_interval_s", cfg.monitor.status_interval_s, 0.1, 3600.0);
        m.finish();
    }
    {
        auto r = root.sub("records");
        path_field(r, "path", base_dir, cfg.records.base);
        r.number<std::uint32_t>("decimation", cfg.records.decimation, 1, 1'000'000);
        r.number<std::uint32_t>("channel_decimation", cfg.records.channel_decimation, 1, 1'000'000);
        r.finish();
    }
    {
        auto r = root.sub("recording");
        path_field(r, "path", base_dir, cfg.recording.base);
        sample_format_field(r, "format", cfg.recording.format, errors);
        r.number<std::size_t>("queue_mib", cfg.recording.queue_mib, 16, 65536);
        r.finish();
    }
    {
        auto m = root.sub("metrics");
        m.boolean("enabled", cfg.metrics.enabled);
        m.text("bind", cfg.metrics.bind, true);
        m.number<std::uint16_t>("port", cfg.metrics.port, 0, 65535);
        m.finish();
    }
    {
        auto l = root.sub("log");
        l.choice("level", cfg.log.level,
                 {{"trace", std::string("trace")}, {"debug", std::string("debug")}, {"info", std::string("info")},
                  {"warn", std::string("warn")}, {"warning", std::string("warning")}, {"error", std::string("error")},
                  {"err", std::string("err")}, {"critical", std::string("critical")},
                  {"off", std::string("off")}});
        l.choice("destination", cfg.log.destination,
                 {{"auto", log_destination::automatic}, {"console", log_destination::console},
                  {"journal", log_destination::journal}});
        l.finish();
    }
    root.finish();
    errors.throw_if_any();
    return cfg;
}

daemon_config load_daemon_config(const std::filesystem::path& file)
{
    return parse_daemon_config(read_config_file(file), file.string(), file.parent_path());
}

std::string to_yaml(const daemon_config& c)
{
    std::ostringstream os;
    os << to_yaml(c.receiver);
    const auto& f = c.source.file;
    os << "source:\n"
       << "  type: " << to_string(c.source.type) << "\n"
       << "  stall_timeout_s: " << format_double(c.source.stall_timeout_s) << "\n"
       << "  file:\n";
    if (!f.path.empty()) os << "    path: " << yaml_quoted(f.path.string()) << "\n";
    if (f.raw_format) os << "    format: " << io::to_sigmf_datatype(*f.raw_format) << "\n";
    if (f.raw_sample_rate_hz) os << "    sample_rate_hz: " << format_double(*f.raw_sample_rate_hz) << "\n";
    os << "    ci16_scale: " << format_double(f.raw_ci16_scale) << "\n"
       << "    paced: " << (f.paced ? "true" : "false") << "\n"
       << "    rate_factor: " << format_double(f.rate_factor) << "\n"
       << "    loop: " << (f.loop ? "true" : "false") << "\n"
       << "    chunk_samples: " << f.chunk_samples << "\n";
    const auto fmt = [](io::sample_format sf) { return std::string(io::to_sigmf_datatype(sf)); };
    const auto& t = c.source.tcp;
    os << "  tcp:\n"
       << "    mode: " << (t.mode == io::tcp_mode::connect ? "connect" : "listen") << "\n"
       << "    host: " << yaml_quoted(t.host) << "\n"
       << "    port: " << t.port << "\n"
       << "    format: " << fmt(t.format) << "\n"
       << "    ci16_scale: " << format_double(t.ci16_scale) << "\n"
       << "    sample_rate_hz: " << format_double(t.sample_rate_hz) << "\n"
       << "    rcvbuf_bytes: " << t.rcvbuf_bytes << "\n"
       << "    retry_initial_s: " << format_double(t.retry_initial_s) << "\n"
       << "    retry_max_s: " << format_double(t.retry_max_s) << "\n"
       << "    end_on_close: " << (t.end_on_close ? "true" : "false") << "\n";
    os << allow_yaml(t.allow);
    const auto& u = c.source.udp;
    os << "  udp:\n"
       << "    bind: " << yaml_quoted(u.bind_address) << "\n"
       << "    port: " << u.port << "\n"
       << "    format: " << fmt(u.format) << "\n"
       << "    ci16_scale: " << format_double(u.ci16_scale) << "\n"
       << "    sample_rate_hz: " << format_double(u.sample_rate_hz) << "\n"
       << "    rcvbuf_bytes: " << u.rcvbuf_bytes << "\n";
    os << allow_yaml(u.allow);
    const auto& v = c.source.vita49;
    os << "  vita49:\n"
       << "    bind: " << yaml_quoted(v.bind_address) << "\n"
       << "    port: " << v.port << "\n";
    if (v.stream_id) os << "    stream_id: " << *v.stream_id << "\n";
    // With a stream id the policy does not apply (and an explicit follow beside it is an error).
    if (!v.stream_id) os << "    stream_change: " << io::to_string(v.stream_change) << "\n";
    os << "    stream_timeout_ms: " << v.stream_timeout_ms << "\n"
       << "    ci16_scale: " << format_double(v.ci16_scale) << "\n"
       << "    sample_rate_hz: " << format_double(v.sample_rate_hz) << "\n"
       << "    context_timeout_s: " << format_double(v.context_timeout_s) << "\n"
       << "    rcvbuf_bytes: " << v.rcvbuf_bytes << "\n";
    os << allow_yaml(v.allow);
    const auto& i = c.source.iio;
    os << "  iio:\n"
       << "    uri: " << yaml_quoted(i.uri) << "\n"
       << "    phy_device: " << yaml_quoted(i.phy_device) << "\n"
       << "    rx_device: " << yaml_quoted(i.rx_device) << "\n"
       << "    sample_rate_hz: " << format_double(i.sample_rate_hz) << "\n"
       << "    lo_hz: " << format_double(i.lo_hz) << "\n"
       << "    rf_bandwidth_hz: " << format_double(i.rf_bandwidth_hz) << "\n"
       << "    gain_mode: " << io::to_string(i.gain_mode) << "\n"
       << "    gain_db: " << format_double(i.gain_db) << "\n"
       << "    buffer_samples: " << i.buffer_samples << "\n"
       << "    reconnect_interval_s: " << format_double(i.reconnect_interval_s) << "\n"
       << "    reconnect_max_interval_s: " << format_double(i.reconnect_max_interval_s) << "\n"
       << "    timeout_ms: " << i.timeout_ms << "\n"
       << "    scale: " << format_double(i.scale) << "\n";
    const auto& pb = c.publisher;
    os << "publisher:\n"
       << "  enabled: " << (pb.enabled ? "true" : "false") << "\n"
       << "  format: " << io::to_string(pb.udp.format) << "\n"
       << "  dqe_id: " << (pb.udp.dqe_id.use_stream_id ? std::string("stream") : std::to_string(pb.udp.dqe_id.fixed_id)) << "\n"
       << "  send_buffer_bytes: " << pb.udp.send_buffer_bytes << "\n"
       << "  max_datagrams_per_second: " << format_double(pb.udp.max_datagrams_per_second) << "\n"
       << "  destinations:\n";
    for (std::size_t k = 0; k < pb.udp.destinations.size(); ++k) {
        if (!pb.udp.destinations[k].empty()) {
            os << "    " << dsp::path_name(static_cast<int>(k)) << ": " << yaml_quoted(pb.udp.destinations[k]) << "\n";
        }
    }
    os << "ring:\n"
       << "  capacity_s: " << format_double(c.ring.capacity_s) << "\n"
       << "  overflow: " << to_string(c.ring.overflow) << "\n"
       << "  lock_memory: " << (c.ring.lock_memory ? "true" : "false") << "\n";
    os << "pipeline:\n"
       << "  backend: " << to_string(c.pipeline.backend) << "\n"
       << "  gpus: [";
    for (std::size_t g = 0; g < c.pipeline.gpus.size(); ++g) os << (g ? ", " : "") << c.pipeline.gpus[g];
    os << "]\n"
       << "  solver: " << c.pipeline.solver << "\n"
       << "  cpu_workers: " << c.pipeline.cpu_workers << "\n"
       << "  queue_depth: " << c.pipeline.queue_depth << "\n"
       << "  cpu_fallback: " << (c.pipeline.cpu_fallback ? "true" : "false") << "\n";
    os << "monitor:\n"
       << "  pattern: " << (c.monitor.pattern ? std::string(dsp::to_string(*c.monitor.pattern)) : std::string("none")) << "\n"
       << "  status_interval_s: " << format_double(c.monitor.status_interval_s) << "\n";
    os << "records:\n";
    if (!c.records.base.empty()) os << "  path: " << yaml_quoted(c.records.base.string()) << "\n";
    os << "  decimation: " << c.records.decimation << "\n"
       << "  channel_decimation: " << c.records.channel_decimation << "\n";
    os << "recording:\n";
    if (!c.recording.base.empty()) os << "  path: " << yaml_quoted(c.recording.base.string()) << "\n";
    os << "  format: " << io::to_sigmf_datatype(c.recording.format) << "\n"
       << "  queue_mib: " << c.recording.queue_mib << "\n";
    os << "metrics:\n"
       << "  enabled: " << (c.metrics.enabled ? "true" : "false") << "\n"
       << "  bind: " << yaml_quoted(c.metrics.bind) << "\n"
       << "  port: " << c.metrics.port << "\n";
    os << "log:\n"
       << "  level: " << c.log.level << "\n"
       << "  destination: " << to_string(c.log.destination) << "\n";
    return os.str();
}

}  // namespace paq::config
