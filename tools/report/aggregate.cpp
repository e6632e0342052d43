#include "tools/report/aggregate.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>
#include <utility>

namespace paq::report {
namespace {

constexpr double nan = std::numeric_limits<double>::quiet_NaN();
constexpr double inf = std::numeric_limits<double>::infinity();

/// NaN sorts after every number when smaller is better.
[[nodiscard]] double nan_high(double x) noexcept { return std::isnan(x) ? inf : x; }
/// NaN sorts before every number when larger is worse.
[[nodiscard]] double nan_low(double x) noexcept { return std::isnan(x) ? -inf : x; }

[[nodiscard]] double share(std::uint64_t part, std::uint64_t whole) noexcept
{
    return whole == 0 ? nan : static_cast<double>(part) / static_cast<double>(whole);
}

}  // namespace

std::size_t error_class(std::uint64_t errors) noexcept
{
    return std::min<std::size_t>(static_cast<std::size_t>(std::bit_width(errors)), n_error_classes - 1);
}

std::string error_class_label(std::size_t cls)
{
    if (cls == 0) return "0";
    if (cls == 1) return "1";
    const auto lo = std::uint64_t{1} << (cls - 1);
    if (cls + 1 >= n_error_classes) return "\u2265" + std::to_string(lo);
    return std::to_string(lo) + "\u2013" + std::to_string(2 * lo - 1);
}

// ---------------------------------------------------------------------------------------------
// sums

void path_sums::add(const path_record& r, std::uint64_t row_packets) noexcept
{
    packets += row_packets;
    if (r.bits > 0) checked_packets += row_packets;
    bits += r.bits;
    errors += r.errors;
    known_errors += r.known_errors;
    codewords_failed += r.codewords_failed;
    iterations += r.iterations;
    channel_errors += r.channel_errors;
    if (std::isfinite(r.bep)) {
        bep_sum += r.bep * static_cast<double>(row_packets);
        bep_packets += row_packets;
    }
}

void path_sums::merge(const path_sums& o) noexcept
{
    packets += o.packets;
    checked_packets += o.checked_packets;
    bits += o.bits;
    errors += o.errors;
    known_errors += o.known_errors;
    codewords_failed += o.codewords_failed;
    iterations += o.iterations;
    channel_errors += o.channel_errors;
    bep_sum += o.bep_sum;
    bep_packets += o.bep_packets;
}

double path_sums::ber() const noexcept { return share(errors, bits); }

double path_sums::mean_bep() const noexcept
{
    return bep_packets == 0 ? nan : bep_sum / static_cast<double>(bep_packets);
}

double path_sums::known_ber() const noexcept { return share(known_errors, known_bits_per_packet * packets); }

void estimate_stats::add(double x) noexcept
{
    if (!std::isfinite(x)) return;
    sum += x;
    min = std::min(min, x);
    max = std::max(max, x);
    ++n;
}

void estimate_stats::merge(const estimate_stats& o) noexcept
{
    sum += o.sum;
    min = std::min(min, o.min);
    max = std::max(max, o.max);
    n += o.n;
}

double estimate_stats::mean() const noexcept { return n == 0 ? nan : sum / static_cast<double>(n); }

void time_bin::add(const packet_record& r) noexcept
{
    ++rows;
    packets += r.packets;
    for (std::size_t p = 0; p < r.streams; ++p) paths[p].add(r.paths[p], r.packets);
    cfo_hz.add(r.cfo_hz);
    ebn0_db.add(r.ebn0_db);
    delay_spread_ns.add(r.delay_spread_ns);
}

void time_bin::merge(const time_bin& o) noexcept
{
    rows += o.rows;
    packets += o.packets;
    for (std::size_t p = 0; p < max_streams; ++p) paths[p].merge(o.paths[p]);
    cfo_hz.merge(o.cfo_hz);
    ebn0_db.merge(o.ebn0_db);
    delay_spread_ns.merge(o.delay_spread_ns);
}

// ---------------------------------------------------------------------------------------------
// time_binner

time_binner::time_binner(std::size_t max_bins)
    : max_bins_(max_bins)
{
    if (max_bins < 2) throw std::invalid_argument("time_binner: max_bins must be at least 2");
}

double time_binner::width_s() const noexcept { return std::ldexp(1.0, shift_ - 10); }

double time_binner::start_s() const noexcept { return static_cast<double>(first_key_) * width_s(); }

void time_binner::add(const packet_record& r)
{
    // |time_s| <= 1e12 (checked by the reader), so the fine key stays far inside int64.
    const auto fine_key = static_cast<std::int64_t>(std::floor(r.time_s / base_width_s));
    if (bins_.empty()) {
        first_key_ = fine_key >> shift_;
        bins_.resize(1);
    }
    // Widen first, so that a far-away row never makes a huge vector of fine bins.
    int shift = shift_;
    std::int64_t lo = std::min(first_key_, fine_key >> shift_);
    std::int64_t hi = std::max(first_key_ + static_cast<std::int64_t>(bins_.size()) - 1, fine_key >> shift_);
    while (static_cast<std::uint64_t>(hi - lo) + 1 > max_bins_) {
        ++shift;
        lo >>= 1;
        hi >>= 1;
    }
    if (shift != shift_) {
        const int d = shift - shift_;
        const auto new_first = first_key_ >> d;
        const auto new_last = (first_key_ + static_cast<std::int64_t>(bins_.size()) - 1) >> d;
        std::vector<time_bin> merged(static_cast<std::size_t>(new_last - new_first + 1));
        for (std::size_t i = 0; i < bins_.size(); ++i) {
            const auto key = (first_key_ + static_cast<std::int64_t>(i)) >> d;
            merged[static_cast<std::size_t>(key - new_first)].merge(bins_[i]);
        }
        bins_ = std::move(merged);
        first_key_ = new_first;
        shift_ = shift;
    }
    const auto key = fine_key >> shift_;
    if (key < first_key_) {
        bins_.insert(bins_.begin(), static_cast<std::size_t>(first_key_ - key), time_bin{});
        first_key_ = key;
    } else if (key >= first_key_ + static_cast<std::int64_t>(bins_.size())) {
        bins_.resize(static_cast<std::size_t>(key - first_key_ + 1));
    }
    bins_[static_cast<std::size_t>(key - first_key_)].add(r);
}

// ---------------------------------------------------------------------------------------------
// report_data / report_builder

double report_data::value(const path_sums& s) const noexcept { return ber_mode ? s.ber() : s.mean_bep(); }

std::uint64_t report_data::weight(const path_sums& s) const noexcept { return ber_mode ? s.bits : s.bep_packets; }

report_builder::report_builder(const report_options& options)
    : options_(options)
    , binner_(options.max_points >= 2 && options.max_points <= 100000 ? options.max_points : 2)
{
    if (options.max_points < 2 || options.max_points > 100000) {
        throw std::invalid_argument("max_points must be in 2..100000, got " + std::to_string(options.max_points));
    }
    // At least 1 ms: window indices of times up to 1e12 s then stay far inside int64.
    if (!(options.window_s >= 1e-3) || !std::isfinite(options.window_s)) {
        throw std::invalid_argument("window_s must be at least 0.001 s");
    }
    if (!(options.bad_threshold > 0 && options.bad_threshold < 1)) {
        throw std::invalid_argument("bad_threshold must be in (0, 1)");
    }
    data_.options = options;
    for (std::size_t p = 0; p < max_streams; ++p) data_.paths[p].index = p;
    last_window_ = windows_.end();
    if (options.packet_spacing_s != 0) {
        if (!(options.packet_spacing_s > 0.0) || !std::isfinite(options.packet_spacing_s)) {
            throw std::invalid_argument("packet_spacing_s must be positive, got " + std::to_string(options.packet_spacing_s));
        }
        spacing_s_ = options.packet_spacing_s;
        data_.packet_spacing_s = spacing_s_;
        data_.packet_spacing_known = true;
    }
}

void report_builder::add(const packet_record& r)
{
    auto& d = data_;
    if (d.rows == 0) {
        if (r.streams != n_paths && r.streams != max_streams) {
            throw std::invalid_argument("report_builder: a row with " + std::to_string(r.streams) + " streams (6 or 12)");
        }
        d.ber_mode = r.has_pattern;
        d.streams = r.streams;
        d.coded = r.coded;
        d.first_packet = r.packet;
        d.min_time_s = d.max_time_s = r.time_s;
    } else {
        if (r.has_pattern != d.ber_mode) {
            throw std::invalid_argument("report_builder: rows with and without a PN pattern mixed");
        }
        if (r.streams != d.streams) {
            throw std::invalid_argument("report_builder: rows with " + std::to_string(d.streams) + " and " +
                                        std::to_string(r.streams) + " streams mixed");
        }
        if (r.time_s < last_time_s_) ++d.out_of_order_rows;
        d.min_time_s = std::min(d.min_time_s, r.time_s);
        d.max_time_s = std::max(d.max_time_s, r.time_s);
    }
    if (d.rows > 0 && r.time_s >= last_time_s_) {
        const interval iv{last_time_s_, r.time_s, r.packets, r.packet > last_packet_ ? r.packet - last_packet_ : 0};
        if (spacing_s_ > 0) {
            classify(iv, spacing_s_, d);
        } else {
            pending_.push_back(iv);
            if (pending_.size() >= spacing_intervals) {
                spacing_s_ = median_spacing(pending_);
                if (spacing_s_ > 0) {
                    for (const auto& p : pending_) classify(p, spacing_s_, d);
                    d.packet_spacing_s = spacing_s_;
                }
                pending_.clear();  // no spacing in them (times all equal): try the next ones
            }
        }
    }
    if (!d.utc_origin_ns && r.time_utc_ns) {
        d.utc_origin_ns = *r.time_utc_ns - static_cast<std::int64_t>(std::llround(r.time_s * 1e9));
    }
    last_packet_ = r.packet;
    last_time_s_ = r.time_s;
    ++d.rows;
    d.packets += r.packets;
    d.max_row_packets = std::max(d.max_row_packets, r.packets);
    if (r.packets > 1) ++d.decimated_rows;
    d.last_packet = r.packet;
    for (std::size_t b = 0; b < d.flag_rows.size(); ++b) {
        if ((r.flags >> b) & 1U) ++d.flag_rows[b];
    }
    if (r.flags >> d.flag_rows.size()) ++d.other_flag_rows;

    for (std::size_t p = 0; p < d.streams; ++p) {
        const auto& pr = r.paths[p];
        auto& s = d.paths[p];
        s.sums.add(pr, r.packets);
        if (d.ber_mode) {
            if (pr.bits == 0) continue;  // PN checker not locked: nothing was measured
            if (pr.errors == 0) s.zero_packets += r.packets;
            if (static_cast<double>(pr.errors) / static_cast<double>(pr.bits) > options_.bad_threshold) {
                s.bad_packets += r.packets;
            }
            ++s.error_rows[error_class(pr.errors)];
        } else {
            if (pr.known_errors == 0) s.zero_packets += r.packets;
            if (std::isfinite(pr.bep) && pr.bep > options_.bad_threshold) s.bad_packets += r.packets;
            ++s.error_rows[error_class(pr.known_errors)];
        }
        ++s.classified_rows;
    }

    binner_.add(r);
    const auto wkey = static_cast<std::int64_t>(std::floor(r.time_s / options_.window_s));
    if (last_window_ == windows_.end() || wkey != last_window_key_) {
        last_window_ = windows_.try_emplace(wkey).first;
        last_window_key_ = wkey;
    }
    last_window_->second.add(r);
}

double report_builder::median_spacing(const std::vector<interval>& iv)
{
    std::vector<double> per_packet;
    for (const auto& i : iv) {
        // Only intervals whose packets all have rows, and that moved forward, say the spacing.
        if (i.t1 > i.t0 && i.index_jump == i.row_packets) {
            per_packet.push_back((i.t1 - i.t0) / static_cast<double>(i.row_packets));
        }
    }
    if (per_packet.empty()) return 0;
    const auto mid = per_packet.begin() + static_cast<std::ptrdiff_t>(per_packet.size() / 2);
    std::nth_element(per_packet.begin(), mid, per_packet.end());
    return *mid;
}

void report_builder::classify(const interval& iv, double spacing_s, report_data& d)
{
    time_mark m{iv.t0, iv.t1, 0, 0, false};
    if (iv.index_jump > iv.row_packets) m.unrecorded_packets = iv.index_jump - iv.row_packets;
    const auto slots = static_cast<std::uint64_t>(std::llround((iv.t1 - iv.t0) / spacing_s));
    // Packets without a row took their slots too: they were found, not missed.
    const std::uint64_t accounted = std::max(iv.row_packets, iv.index_jump);
    if (slots > accounted) m.missing_packets = slots - accounted;
    if (m.missing_packets == 0 && m.unrecorded_packets == 0) return;
    m.gap = m.missing_packets >= gap_min_missing;
    if (m.gap) ++d.gaps;
    d.missing_packets += m.missing_packets;
    d.unrecorded_packets += m.unrecorded_packets;
    if (d.marks.size() < max_marks) d.marks.push_back(m);
    else ++d.marks_dropped;
}

report_data report_builder::finish() const
{
    if (data_.rows == 0) throw std::invalid_argument("report_builder: no rows");
    report_data d = data_;
    if (spacing_s_ == 0) {  // a short run: the spacing from the intervals it has
        const double s = median_spacing(pending_);
        if (s > 0) {
            d.packet_spacing_s = s;
            for (const auto& p : pending_) classify(p, s, d);
        }
    }

    for (auto& s : d.paths) {
        const auto zero_whole = d.ber_mode ? s.sums.checked_packets : s.sums.packets;
        const auto bad_whole = d.ber_mode ? s.sums.checked_packets : s.sums.bep_packets;
        s.zero_share = share(s.zero_packets, zero_whole);
        s.bad_share = share(s.bad_packets, bad_whole);
    }

    d.bin_start_s = binner_.start_s();
    d.bin_width_s = binner_.width_s();
    d.bins = binner_.bins();

    d.windows.reserve(windows_.size());
    for (const auto& [key, bin] : windows_) {
        d.windows.push_back({static_cast<double>(key) * options_.window_s, bin});
    }

    // Which windows count, per path: at least half the median weight.
    for (std::size_t p = 0; p < d.streams; ++p) {
        std::vector<std::uint64_t> w;
        for (const auto& win : d.windows) {
            const auto x = d.weight(win.bin.paths[p]);
            if (x > 0) w.push_back(x);
        }
        if (w.empty()) {
            d.window_min_weight[p] = 1;
            continue;
        }
        const auto mid = w.begin() + static_cast<std::ptrdiff_t>(w.size() / 2);
        std::nth_element(w.begin(), mid, w.end());
        d.window_min_weight[p] = std::max<std::uint64_t>(1, (*mid + 1) / 2);
    }

    // Secondary key, used on ties of the value (many windows or paths with BER 0): the mean
    // BEP in BER mode, the known-bit BER in BEP mode.
    const auto secondary = [&](const path_sums& s) { return d.ber_mode ? s.mean_bep() : s.known_ber(); };
    const auto eligible = [&](std::size_t p, const window_stat& w) {
        return d.weight(w.bin.paths[p]) >= d.window_min_weight[p];
    };
    // Worst: largest (value, secondary); the earlier window on a full tie.
    const auto find_worst = [&](std::size_t p) {
        std::optional<std::size_t> worst;
        for (std::size_t i = 0; i < d.windows.size(); ++i) {
            if (!eligible(p, d.windows[i])) continue;
            const auto& s = d.windows[i].bin.paths[p];
            if (!worst) {
                worst = i;
                continue;
            }
            const auto& ws = d.windows[*worst].bin.paths[p];
            if (std::pair(nan_low(d.value(s)), nan_low(secondary(s))) >
                std::pair(nan_low(d.value(ws)), nan_low(secondary(ws)))) {
                worst = i;
            }
        }
        return worst;
    };
    const auto find_best = [&](std::size_t p) {
        std::optional<std::size_t> best;
        for (std::size_t i = 0; i < d.windows.size(); ++i) {
            if (!eligible(p, d.windows[i])) continue;
            const auto& s = d.windows[i].bin.paths[p];
            if (!best) {
                best = i;
                continue;
            }
            const auto& bs = d.windows[*best].bin.paths[p];
            if (std::pair(nan_high(d.value(s)), nan_high(secondary(s))) <
                std::pair(nan_high(d.value(bs)), nan_high(secondary(bs)))) {
                best = i;
            }
        }
        return best;
    };

    for (std::size_t p = 0; p < d.streams; ++p) {
        auto& s = d.paths[p];
        s.worst_window = find_worst(p);
        if (s.worst_window) s.worst_window_value = d.value(d.windows[*s.worst_window].bin.paths[p]);
    }

    d.ranking.resize(d.streams);
    std::iota(d.ranking.begin(), d.ranking.end(), std::size_t{0});
    std::stable_sort(d.ranking.begin(), d.ranking.end(), [&](std::size_t a, std::size_t b) {
        const auto& sa = d.paths[a].sums;
        const auto& sb = d.paths[b].sums;
        return std::pair(nan_high(d.value(sa)), nan_high(secondary(sa))) <
               std::pair(nan_high(d.value(sb)), nan_high(secondary(sb)));
    });
    for (std::size_t r = 0; r < d.streams; ++r) d.paths[d.ranking[r]].rank = r + 1;

    const auto best_path = d.ranking[0];
    d.best_window = find_best(best_path);
    d.worst_window = d.paths[best_path].worst_window;
    return d;
}

std::optional<report_data> read_packets_file_if_any(const std::filesystem::path& path, const report_options& options)
{
    packet_reader reader(path);
    report_builder builder(options);
    packet_record r;
    std::uint64_t rows = 0;
    for (; reader.next(r); ++rows) builder.add(r);
    if (rows == 0) return std::nullopt;
    return builder.finish();
}

report_data read_packets_file(const std::filesystem::path& path, const report_options& options)
{
    auto d = read_packets_file_if_any(path, options);
    if (!d) throw input_error(path.string() + ": no data rows after the header");
    return std::move(*d);
}

channel_snapshots read_channel_snapshots(const std::filesystem::path& path, std::span<const double> times_s)
{
    channel_reader reader(path);
    channel_snapshots out;
    out.taps = reader.taps();
    out.nearest.resize(times_s.size());
    channel_record r;
    while (reader.next(r)) {
        ++out.rows;
        for (std::size_t i = 0; i < times_s.size(); ++i) {
            auto& n = out.nearest[i];
            if (!n || std::abs(r.time_s - times_s[i]) < std::abs(n->time_s - times_s[i])) n = r;
        }
    }
    return out;
}

}  // namespace paq::report
