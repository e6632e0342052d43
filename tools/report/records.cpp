#include "tools/report/records.hpp"

#include <nlohmann/json.hpp>

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <system_error>
#include <unordered_map>
#include <utility>

namespace paq::report {
namespace {

namespace fs = std::filesystem;

constexpr std::size_t read_chunk = std::size_t{1} << 20;

/// Larger times are no run's clock; the bound keeps time bin indices well inside int64.
constexpr double max_abs_time_s = 1e12;

/// A field shown in an error message: quoted, shortened when long.
[[nodiscard]] std::string shown(std::string_view field)
{
    constexpr std::size_t max_shown = 40;
    if (field.size() > max_shown) return "'" + std::string(field.substr(0, max_shown)) + "...'";
    return "'" + std::string(field) + "'";
}

/// Header name -> column index, with a clear error for a missing or repeated name.
class header_index {
public:
    header_index(const csv_reader& csv, std::vector<std::string>& names)
        : csv_(csv)
    {
        names.clear();
        for (std::size_t i = 0; i < csv.fields().size(); ++i) {
            std::string name(csv.fields()[i]);
            // Tolerate spaces around names ("time_s, batch") which some tools write.
            while (!name.empty() && name.back() == ' ') name.pop_back();
            while (!name.empty() && name.front() == ' ') name.erase(0, 1);
            if (!index_.emplace(name, i).second) csv.fail(i, name, "column name repeated in the header");
            names.push_back(std::move(name));
        }
    }

    [[nodiscard]] std::size_t at(const std::string& name) const
    {
        const auto it = index_.find(name);
        if (it == index_.end()) csv_.fail("missing column '" + name + "' in the header");
        return it->second;
    }

    [[nodiscard]] std::optional<std::size_t> find(const std::string& name) const
    {
        const auto it = index_.find(name);
        if (it == index_.end()) return std::nullopt;
        return it->second;
    }

private:
    const csv_reader& csv_;
    std::unordered_map<std::string, std::size_t> index_;
};

/// Reads the header line of csv; an empty file is an error.
void read_header(csv_reader& csv)
{
    if (!csv.next()) throw input_error(csv.path().string() + ":1: empty file, expected a header row");
}

void check_field_count(const csv_reader& csv, std::size_t n_columns)
{
    const auto n = csv.fields().size();
    if (n != n_columns) {
        csv.fail("row has " + std::to_string(n) + " fields, the header has " + std::to_string(n_columns));
    }
}

[[nodiscard]] std::uint64_t parse_uint(const csv_reader& csv, std::size_t col, const std::vector<std::string>& names)
{
    const auto f = csv.fields()[col];
    std::uint64_t v = 0;
    const auto [end, ec] = std::from_chars(f.data(), f.data() + f.size(), v);
    if (f.empty() || ec != std::errc{} || end != f.data() + f.size()) {
        csv.fail(col, names[col],
                 ec == std::errc::result_out_of_range ? shown(f) + " is out of range"
                                                      : shown(f) + " is not a non-negative integer");
    }
    return v;
}

[[nodiscard]] std::int64_t parse_int(const csv_reader& csv, std::size_t col, const std::vector<std::string>& names)
{
    const auto f = csv.fields()[col];
    std::int64_t v = 0;
    const auto [end, ec] = std::from_chars(f.data(), f.data() + f.size(), v);
    if (f.empty() || ec != std::errc{} || end != f.data() + f.size()) {
        csv.fail(col, names[col], shown(f) + " is not an integer");
    }
    return v;
}

/// A decimal number; "nan", "inf" and "-inf" (any case) are accepted as paqd may write them.
[[nodiscard]] double parse_double(const csv_reader& csv, std::size_t col, const std::vector<std::string>& names)
{
    auto f = csv.fields()[col];
    // from_chars does not accept a leading '+'; a writer might.
    if (f.size() > 1 && f.front() == '+') f.remove_prefix(1);
    double v = 0;
    const auto [end, ec] = std::from_chars(f.data(), f.data() + f.size(), v);
    if (f.empty() || end != f.data() + f.size()) csv.fail(col, names[col], shown(csv.fields()[col]) + " is not a number");
    if (ec == std::errc::result_out_of_range) {
        // from_chars leaves v alone here; strtod tells underflow (harmless: a tiny BEP, kept as
        // 0 or a subnormal) from overflow (not a plausible value of any column).
        const std::string text(f);
        v = std::strtod(text.c_str(), nullptr);
        if (std::abs(v) > 1.0) csv.fail(col, names[col], shown(f) + " is out of range");
    } else if (ec != std::errc{}) {
        csv.fail(col, names[col], shown(f) + " is not a number");
    }
    return v;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// csv_reader

csv_reader::csv_reader(fs::path path)
    : path_(std::move(path))
{
    errno = 0;
    file_.reset(std::fopen(path_.c_str(), "rb"));
    if (!file_) {
        throw input_error(path_.string() + ": cannot open: " + std::generic_category().message(errno));
    }
    buffer_.reserve(2 * read_chunk);
}

bool csv_reader::fill()
{
    if (eof_) return false;
    if (begin_ > 0) {
        buffer_.erase(0, begin_);
        begin_ = 0;
    }
    const auto old = buffer_.size();
    buffer_.resize(old + read_chunk);
    const auto n = std::fread(buffer_.data() + old, 1, read_chunk, file_.get());
    buffer_.resize(old + n);
    if (n < read_chunk) {
        if (std::ferror(file_.get())) {
            throw input_error(path_.string() + ":" + std::to_string(line_ + 1) + ": read error");
        }
        eof_ = true;
    }
    return n > 0;
}

bool csv_reader::next()
{
    for (;;) {
        std::size_t nl = buffer_.find('\n', begin_);
        while (nl == std::string::npos) {
            const auto searched = buffer_.size() - begin_;
            if (!fill()) break;
            nl = buffer_.find('\n', begin_ + searched);
        }
        if (nl == std::string::npos && begin_ >= buffer_.size()) return false;
        const auto end = nl == std::string::npos ? buffer_.size() : nl;
        std::string_view text(buffer_.data() + begin_, end - begin_);
        begin_ = nl == std::string::npos ? buffer_.size() : nl + 1;
        ++line_;
        if (!text.empty() && text.back() == '\r') text.remove_suffix(1);
        // A spreadsheet that saves "CSV UTF-8" puts a byte-order mark before the header.
        if (line_ == 1 && text.starts_with("\xEF\xBB\xBF")) text.remove_prefix(3);
        if (text.empty()) continue;
        split(text);
        return true;
    }
}

void csv_reader::split(std::string_view text)
{
    fields_.clear();
    if (text.find('"') == std::string_view::npos) {
        // Fast path (every file paqd writes): no quoting.
        std::size_t start = 0;
        for (;;) {
            const auto comma = text.find(',', start);
            if (comma == std::string_view::npos) {
                fields_.push_back(text.substr(start));
                return;
            }
            fields_.push_back(text.substr(start, comma - start));
            start = comma + 1;
        }
    }
    // Quoted fields are unescaped into unquoted_; reserve so that the views stay valid.
    unquoted_.clear();
    unquoted_.reserve(text.size());
    std::size_t i = 0;
    for (;;) {
        const auto field_start = unquoted_.size();
        if (i < text.size() && text[i] == '"') {
            ++i;
            for (;;) {
                if (i >= text.size()) fail(fields_.size(), "", "unterminated quoted field (fields cannot span lines)");
                if (text[i] == '"') {
                    if (i + 1 < text.size() && text[i + 1] == '"') {
                        unquoted_.push_back('"');
                        i += 2;
                        continue;
                    }
                    ++i;
                    break;
                }
                unquoted_.push_back(text[i++]);
            }
            if (i < text.size() && text[i] != ',') fail(fields_.size(), "", "text after the closing quote");
        } else {
            while (i < text.size() && text[i] != ',') unquoted_.push_back(text[i++]);
        }
        fields_.emplace_back(unquoted_.data() + field_start, unquoted_.size() - field_start);
        if (i >= text.size()) return;
        ++i;  // the comma
    }
}

void csv_reader::fail(const std::string& what) const
{
    throw input_error(path_.string() + ":" + std::to_string(line_) + ": " + what);
}

void csv_reader::fail(std::size_t column, std::string_view name, const std::string& what) const
{
    std::string msg = path_.string() + ":" + std::to_string(line_) + ":" + std::to_string(column + 1) + ": ";
    if (!name.empty()) msg += "column '" + std::string(name) + "': ";
    throw input_error(msg + what);
}

// ---------------------------------------------------------------------------------------------
// packet_reader

packet_reader::packet_reader(fs::path path)
    : csv_(std::move(path))
{
    read_header(csv_);
    const header_index h(csv_, names_);
    n_columns_ = names_.size();
    packet_ = h.at("packet");
    packets_ = h.at("packets");
    time_ = h.at("time_s");
    batch_ = h.at("batch");
    start_ = h.at("start_sample");
    metric_ = h.at("metric");
    cfo_ = h.at("cfo_hz");
    sigma2_ = h.at("sigma2");
    ebn0_ = h.at("ebn0_db");
    energy_ = h.at("channel_energy");
    spread_ = h.at("delay_spread_ns");
    zf_cond_ = h.at("zf_condition");
    flags_ = h.at("flags");
    time_utc_ = h.find("time_utc");
    streams_ = h.find("none_trellis_bits") ? max_streams : n_paths;
    for (std::size_t p = 0; p < streams_; ++p) {
        const std::string n(path_names[p]);
        path_cols_[p] = {h.at(n + "_bits"), h.at(n + "_errors"), h.at(n + "_bep"), h.at(n + "_known_errors")};
    }
    coded_ = h.find("none_codewords_failed").has_value();
    for (std::size_t p = 0; coded_ && p < streams_; ++p) {
        const std::string n(path_names[p]);
        fec_cols_[p] = {h.at(n + "_codewords_failed"), h.at(n + "_iterations"), h.at(n + "_channel_errors")};
    }
}

bool packet_reader::next(packet_record& r)
{
    if (!csv_.next()) return false;
    check_field_count(csv_, n_columns_);
    const auto& f = csv_.fields();

    r.packet = parse_uint(csv_, packet_, names_);
    r.packets = parse_uint(csv_, packets_, names_);
    if (r.packets == 0) csv_.fail(packets_, names_[packets_], "must be at least 1");
    r.time_s = parse_double(csv_, time_, names_);
    if (!(std::abs(r.time_s) <= max_abs_time_s)) {
        csv_.fail(time_, names_[time_], shown(f[time_]) + " is not a time (finite, |t| <= 1e12 s)");
    }
    r.time_utc_ns.reset();
    if (time_utc_ && !f[*time_utc_].empty()) {
        r.time_utc_ns = parse_utc_ns(f[*time_utc_]);
        if (!r.time_utc_ns) {
            csv_.fail(*time_utc_, names_[*time_utc_],
                      shown(f[*time_utc_]) + " is not a UTC time (YYYY-MM-DDTHH:MM:SS[.fffffffff]Z)");
        }
    }
    r.batch = parse_uint(csv_, batch_, names_);
    r.start_sample = parse_uint(csv_, start_, names_);
    r.metric = parse_double(csv_, metric_, names_);
    r.cfo_hz = parse_double(csv_, cfo_, names_);
    r.sigma2 = parse_double(csv_, sigma2_, names_);
    r.ebn0_db = parse_double(csv_, ebn0_, names_);
    r.channel_energy = parse_double(csv_, energy_, names_);
    r.delay_spread_ns = parse_double(csv_, spread_, names_);
    r.zf_condition = parse_double(csv_, zf_cond_, names_);
    r.flags = parse_uint(csv_, flags_, names_);

    // Whether this file has a pattern is decided by the first row's none_errors field; every
    // other _bits / _errors field must agree, or the row would be counted inconsistently.
    if (pattern_state_ < 0) pattern_state_ = f[path_cols_[0][1]].empty() ? 0 : 1;
    r.has_pattern = pattern_state_ == 1;
    r.streams = streams_;
    for (std::size_t p = 0; p < streams_; ++p) {
        auto& pr = r.paths[p];
        const auto [bits_col, errors_col, bep_col, known_col] = path_cols_[p];
        for (const auto col : {bits_col, errors_col}) {
            if (f[col].empty() == r.has_pattern) {
                csv_.fail(col, names_[col],
                          r.has_pattern ? "empty, but the first row has a PN pattern (its none_errors is filled)"
                                        : "filled, but the first row has no PN pattern (its none_errors is empty)");
            }
        }
        if (r.has_pattern) {
            pr.bits = parse_uint(csv_, bits_col, names_);
            pr.errors = parse_uint(csv_, errors_col, names_);
            if (pr.errors > pr.bits) {
                csv_.fail(errors_col, names_[errors_col],
                          std::to_string(pr.errors) + " errors among " + std::to_string(pr.bits) + " bits");
            }
        } else {
            pr.bits = 0;
            pr.errors = 0;
        }
        pr.bep = parse_double(csv_, bep_col, names_);
        pr.known_errors = parse_uint(csv_, known_col, names_);
        if (pr.known_errors > known_bits_per_packet * r.packets) {
            csv_.fail(known_col, names_[known_col],
                      std::to_string(pr.known_errors) + " errors among " +
                          std::to_string(known_bits_per_packet * r.packets) + " known bits");
        }
        if (coded_) {
            const auto [failed_col, iterations_col, channel_col] = fec_cols_[p];
            pr.codewords_failed = parse_uint(csv_, failed_col, names_);
            pr.iterations = parse_uint(csv_, iterations_col, names_);
            pr.channel_errors = parse_uint(csv_, channel_col, names_);
        }
    }
    r.coded = coded_;
    return true;
}

// ---------------------------------------------------------------------------------------------
// channel_reader

channel_reader::channel_reader(fs::path path)
    : csv_(std::move(path))
{
    read_header(csv_);
    const header_index h(csv_, names_);
    n_columns_ = names_.size();
    packet_ = h.at("packet");
    time_ = h.at("time_s");
    tap_offset_ = h.at("tap_offset");
    for (std::size_t k = 0;; ++k) {
        const auto re = h.find("h" + std::to_string(k) + "_re");
        const auto im = h.find("h" + std::to_string(k) + "_im");
        if (!re && !im) break;
        if (!re || !im) {
            csv_.fail("column 'h" + std::to_string(k) + (re ? "_im" : "_re") + "' missing in the header");
        }
        tap_cols_.push_back({*re, *im});
    }
    if (tap_cols_.empty()) csv_.fail("missing column 'h0_re' in the header (no channel taps)");
}

bool channel_reader::next(channel_record& r)
{
    if (!csv_.next()) return false;
    check_field_count(csv_, n_columns_);
    r.packet = parse_uint(csv_, packet_, names_);
    r.time_s = parse_double(csv_, time_, names_);
    if (!(std::abs(r.time_s) <= max_abs_time_s)) {
        csv_.fail(time_, names_[time_], shown(csv_.fields()[time_]) + " is not a time (finite, |t| <= 1e12 s)");
    }
    r.tap_offset = parse_int(csv_, tap_offset_, names_);
    r.taps.resize(tap_cols_.size());
    for (std::size_t k = 0; k < tap_cols_.size(); ++k) {
        r.taps[k] = {parse_double(csv_, tap_cols_[k][0], names_), parse_double(csv_, tap_cols_[k][1], names_)};
    }
    return true;
}

run_counters read_run_counters(const std::filesystem::path& path)
{
    std::error_code ec;
    const auto size = std::filesystem::file_size(path, ec);
    if (ec) throw input_error(path.string() + ": cannot read: " + ec.message());
    if (size > max_counters_bytes) {
        throw input_error(path.string() + ": " + std::to_string(size) + " bytes, more than a counters file holds (" +
                          std::to_string(max_counters_bytes) + ")");
    }
    std::FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) throw input_error(path.string() + ": cannot open: " + std::generic_category().message(errno));
    std::string text(static_cast<std::size_t>(size), '\0');
    const std::size_t got = std::fread(text.data(), 1, text.size(), f);
    std::fclose(f);
    text.resize(got);
    const auto j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object()) throw input_error(path.string() + ": not a JSON object (paqd's counters)");
    const auto count = [&](const char* key) -> std::optional<std::uint64_t> {
        const auto it = j.find(key);
        if (it == j.end()) return std::nullopt;
        if (!it->is_number_unsigned()) throw input_error(path.string() + ": " + key + " is not a non-negative integer");
        return it->get<std::uint64_t>();
    };
    const auto required = [&](const char* key) {
        const auto v = count(key);
        if (!v) throw input_error(path.string() + ": no " + key + " (not paqd's counters?)");
        return *v;
    };
    run_counters c;
    c.path = path;
    c.packets_found = required("packets_found");
    c.gaps = required("gaps");
    c.samples_lost_in_gaps = required("samples_lost_in_gaps");
    c.packets_missed_in_sequence = required("packets_missed_in_sequence");
    c.batches_lost = count("batches_lost").value_or(0);
    c.samples_in_lost_batches = count("samples_in_lost_batches").value_or(0);
    c.samples_in_short_segments = count("samples_in_short_segments").value_or(0);
    c.samples_dropped = count("samples_dropped");
    c.source_packets_lost = count("source_packets_lost");
    c.source_samples_lost = count("source_samples_lost");
    if (const auto g = j.find("gaps_by_reason"); g != j.end() && g->is_object()) {
        for (const auto& [reason, n] : g->items()) {
            if (!n.is_number_unsigned()) throw input_error(path.string() + ": gaps_by_reason." + reason + " is not a count");
            c.gaps_by_reason.emplace_back(reason, n.get<std::uint64_t>());
        }
    }
    if (const auto r = j.find("records"); r != j.end() && r->is_object()) {
        if (const auto s = r->find("packet_spacing_s"); s != r->end() && s->is_number()) {
            const double v = s->get<double>();
            if (!(v > 0.0) || !std::isfinite(v)) throw input_error(path.string() + ": records.packet_spacing_s is not positive");
            c.packet_spacing_s = v;
        }
        if (const auto fec = r->find("fec"); fec != r->end()) {
            const auto field = [&](const char* key) {
                const auto it = fec->find(key);
                if (it == fec->end() || !it->is_number_unsigned() || it->get<std::uint64_t>() == 0 ||
                    it->get<std::uint64_t>() > 65536) {
                    throw input_error(path.string() + ": records.fec." + key + " is not a codeword size or count (1 .. 65536)");
                }
                return it->get<std::uint64_t>();
            };
            if (!fec->is_object() || !fec->contains("code") || !(*fec)["code"].is_string()) {
                throw input_error(path.string() + ": records.fec is not an object with the code's name");
            }
            c.fec = coded_link{(*fec)["code"].get<std::string>(), field("n"), field("k"), field("codewords_per_packet")};
            if (const auto it = fec->find("continuous"); it != fec->end()) {
                if (!it->is_boolean()) throw input_error(path.string() + ": records.fec.continuous is not true or false");
                c.fec->continuous = it->get<bool>();
            }
        }
    }
    return c;
}

}  // namespace paq::report
