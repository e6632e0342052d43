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

}  // namespace

daemon_config parse_daemon_config(std::string_view yaml_text, std::string_view source_name,
                                  const std::filesystem::path& base_dir)
{
    daemon_config cfg;
    error_list errors(source_name);
    // The receiver section has its own parser (and its own tests).
    // Its errors (a YAML syntax error among them) are thrown from there, before the rest.
    cfg.receiver = parse_receiver_config(yaml_text, source_name);
    std::vector<YAML::Node> docs = YAML::LoadAll(std::string(yaml_text));  // parsed fine above
    if (docs.empty() || docs.front().IsNull()) return cfg;
    section root(docs.front(), "", YAML::Mark::null_mark(), errors);
    root.known("receiver");

    {
        auto src = root.sub("source");
        src.choice("type", cfg.source.type,
                   {{"file", source_type::file}, {"tcp", source_type::tcp}, {"udp", source_type::udp},
                    {"vita49", source_type::vita49}, {"iio", source_type::iio}});
        src.number("stall_timeout_s", cfg.source.stall_timeout_s, 0.05, 3600.0);
        auto f = src.sub("file");
        auto& fc = cfg.source.file;
        std::string path;
        if (f.text("path", path, true)) {
            std::filesystem::path p(path);
            fc.path = p.is_relative() && !base_dir.empty() ? base_dir / p : p;
        }
        std::string fmt;
        if (f.text("format", fmt, true)) {
            try {
                fc.raw_format = io::parse_sample_format(fmt);
            } catch (const std::invalid_argument& e) {
                errors.add(f.mark(), "source.file.format: " + std::string(e.what()));
            }
        }
        double rate = 0.0;
        f.number("sample_rate_hz", rate, 1.0, 1e10);
        if (rate > 0.0) fc.raw_sample_rate_hz = rate;
        f.number("ci16_scale", fc.raw_ci16_scale, 1e-6f, 1e9f);
        f.boolean("paced", fc.paced);
        f.number("rate_factor", fc.rate_factor, 1e-3, 1000.0);
        f.boolean("loop", fc.loop);
        f.number<std::size_t>("chunk_samples", fc.chunk_samples, 1, std::size_t{1} << 24);
        f.finish();
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
        p.number("cpu_workers", cfg.pipeline.cpu_workers, 1, 64);
        p.number("queue_depth", cfg.pipeline.queue_depth, 1, 16);
        p.boolean("cpu_fallback", cfg.pipeline.cpu_fallback);
        p.finish();
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
        std::string base;
        if (r.text("path", base, true)) {
            std::filesystem::path b(base);
            cfg.records.base = b.is_relative() && !base_dir.empty() ? base_dir / b : b;
        }
        r.number<std::uint32_t>("decimation", cfg.records.decimation, 1, 1'000'000);
        r.number<std::uint32_t>("channel_decimation", cfg.records.channel_decimation, 1, 1'000'000);
        r.finish();
    }
    {
        auto r = root.sub("recording");
        std::string base;
        if (r.text("path", base, true)) {
            std::filesystem::path b(base);
            cfg.recording.base = b.is_relative() && !base_dir.empty() ? base_dir / b : b;
        }
        std::string fmt;
        if (r.text("format", fmt, true)) {
            try {
                cfg.recording.format = io::parse_sample_format(fmt);
            } catch (const std::invalid_argument& e) {
                errors.add(r.mark(), "recording.format: " + std::string(e.what()));
            }
        }
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
                  {"warn", std::string("warn")}, {"error", std::string("error")}, {"critical", std::string("critical")},
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
    const std::string name = file.string();
    std::error_code ec;
    if (!std::filesystem::exists(file, ec)) throw config_error({name + ": cannot read configuration file: no such file"});
    if (std::filesystem::is_directory(file, ec)) throw config_error({name + ": cannot read configuration file: it is a directory"});
    errno = 0;
    std::ifstream in(file, std::ios::binary);
    if (!in) {
        throw config_error({name + ": cannot read configuration file: " +
                            (errno ? std::generic_category().message(errno) : std::string("open failed"))});
    }
    std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    return parse_daemon_config(text, name, file.parent_path());
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
    if (!f.path.empty()) os << "    path: \"" << f.path.string() << "\"\n";
    if (f.raw_format) os << "    format: " << io::to_sigmf_datatype(*f.raw_format) << "\n";
    if (f.raw_sample_rate_hz) os << "    sample_rate_hz: " << format_double(*f.raw_sample_rate_hz) << "\n";
    os << "    ci16_scale: " << format_double(f.raw_ci16_scale) << "\n"
       << "    paced: " << (f.paced ? "true" : "false") << "\n"
       << "    rate_factor: " << format_double(f.rate_factor) << "\n"
       << "    loop: " << (f.loop ? "true" : "false") << "\n"
       << "    chunk_samples: " << f.chunk_samples << "\n";
    os << "ring:\n"
       << "  capacity_s: " << format_double(c.ring.capacity_s) << "\n"
       << "  overflow: " << to_string(c.ring.overflow) << "\n"
       << "  lock_memory: " << (c.ring.lock_memory ? "true" : "false") << "\n";
    os << "pipeline:\n"
       << "  backend: " << to_string(c.pipeline.backend) << "\n"
       << "  gpus: [";
    for (std::size_t i = 0; i < c.pipeline.gpus.size(); ++i) os << (i ? ", " : "") << c.pipeline.gpus[i];
    os << "]\n"
       << "  cpu_workers: " << c.pipeline.cpu_workers << "\n"
       << "  queue_depth: " << c.pipeline.queue_depth << "\n"
       << "  cpu_fallback: " << (c.pipeline.cpu_fallback ? "true" : "false") << "\n";
    os << "monitor:\n"
       << "  pattern: " << (c.monitor.pattern ? std::string(dsp::to_string(*c.monitor.pattern)) : std::string("none")) << "\n"
       << "  status_interval_s: " << format_double(c.monitor.status_interval_s) << "\n";
    os << "records:\n";
    if (!c.records.base.empty()) os << "  path: \"" << c.records.base.string() << "\"\n";
    os << "  decimation: " << c.records.decimation << "\n"
       << "  channel_decimation: " << c.records.channel_decimation << "\n";
    os << "recording:\n";
    if (!c.recording.base.empty()) os << "  path: \"" << c.recording.base.string() << "\"\n";
    os << "  format: " << io::to_sigmf_datatype(c.recording.format) << "\n"
       << "  queue_mib: " << c.recording.queue_mib << "\n";
    os << "metrics:\n"
       << "  enabled: " << (c.metrics.enabled ? "true" : "false") << "\n"
       << "  bind: \"" << c.metrics.bind << "\"\n"
       << "  port: " << c.metrics.port << "\n";
    os << "log:\n"
       << "  level: " << c.log.level << "\n"
       << "  destination: " << to_string(c.log.destination) << "\n";
    return os.str();
}

}  // namespace paq::config
