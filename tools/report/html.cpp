#include "tools/report/html.hpp"

#include "io/utc_time.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <limits>
#include <optional>
#include <string_view>

namespace paq::report {
namespace {

constexpr double nan = std::numeric_limits<double>::quiet_NaN();

/// One colour and dash pattern per stream, in stream order: the Okabe-Ito palette (readable
/// with colour-blindness), `none` (no equalizer, the baseline) dashed grey; a path decided by
/// the trellis (receiver.detector both) in its path's colour, dotted.
constexpr std::array<std::string_view, max_streams> path_colors{"#777777", "#E69F00", "#56B4E9", "#009E73",
                                                                "#0072B2", "#D55E00", "#777777", "#E69F00",
                                                                "#56B4E9", "#009E73", "#0072B2", "#D55E00"};
constexpr std::array<std::string_view, max_streams> path_dashes{"6 3", "", "", "", "", "", "6 2 2 2", "2 2", "2 2", "2 2", "2 2", "2 2"};

constexpr double svg_width = 960;

// ---------------------------------------------------------------------------------------------
// formatting

[[nodiscard]] std::string printf_string(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

std::string printf_string(const char* fmt, ...)
{
    char buf[256];
    va_list args;
    va_start(args, fmt);
    const int n = std::vsnprintf(buf, sizeof buf, fmt, args);
    va_end(args);
    return n < 0 ? std::string() : std::string(buf, std::min<std::size_t>(static_cast<std::size_t>(n), sizeof buf - 1));
}

/// Appends a coordinate with one decimal (enough at 960 px, and it keeps the SVG small).
void coord(std::string& s, double v)
{
    char buf[32];
    const int n = std::snprintf(buf, sizeof buf, "%.1f", v);
    s.append(buf, static_cast<std::size_t>(n));
}

/// "1.23e-05" -> "1.23e-5"; the exponent without '+' and leading zeros.
[[nodiscard]] std::string tidy_exponent(std::string s)
{
    const auto e = s.find('e');
    if (e == std::string::npos) return s;
    std::string mant = s.substr(0, e);
    std::string exp = s.substr(e + 1);
    bool neg = false;
    if (!exp.empty() && (exp[0] == '+' || exp[0] == '-')) {
        neg = exp[0] == '-';
        exp.erase(0, 1);
    }
    while (exp.size() > 1 && exp[0] == '0') exp.erase(0, 1);
    return mant + "e" + (neg ? "-" : "") + exp;
}

/// A number with 3 significant digits, plain for 0.01 <= |x| < 1e5, else scientific.
[[nodiscard]] std::string format_sig(double x)
{
    if (std::isnan(x)) return "n/a";
    if (x == 0) return "0";
    const double a = std::abs(x);
    if (a >= 0.01 && a < 1e5) return printf_string("%.3g", x);
    return tidy_exponent(printf_string("%.2e", x));
}

[[nodiscard]] std::string format_share(double share)
{
    if (std::isnan(share)) return "n/a";
    const double p = share * 100;
    if (share == 0) return "0&#8239;%";
    if (share == 1) return "100&#8239;%";
    if (p < 0.1) return printf_string("%.2g&#8239;%%", p);
    if (p > 99.9) return printf_string("%.3f&#8239;%%", std::min(p, 99.999));
    return printf_string("%.1f&#8239;%%", p);
}

[[nodiscard]] std::string format_time(double t_s) { return printf_string("%.3f&#8239;s", t_s); }

[[nodiscard]] std::string format_duration(double s)
{
    if (s < 120) return printf_string("%.3f&#8239;s", s);
    const auto total = static_cast<long long>(std::llround(s));
    if (total < 3600) return printf_string("%lld&#8239;min %lld&#8239;s", total / 60, total % 60);
    return printf_string("%lld&#8239;h %lld&#8239;min %lld&#8239;s", total / 3600, total / 60 % 60, total % 60);
}

[[nodiscard]] std::string format_width(double s)
{
    if (s < 1) return printf_string("%.4g&#8239;ms", s * 1e3);
    return printf_string("%.4g&#8239;s", s);
}

[[nodiscard]] std::string format_bytes(std::uintmax_t b)
{
    const auto x = static_cast<double>(b);
    if (x >= 1e9) return printf_string("%.2f&#8239;GB", x / 1e9);
    if (x >= 1e6) return printf_string("%.1f&#8239;MB", x / 1e6);
    if (x >= 1e3) return printf_string("%.1f&#8239;kB", x / 1e3);
    return std::to_string(b) + "&#8239;B";
}

[[nodiscard]] std::string name_of(std::size_t p) { return std::string(path_names[p]); }

// ---------------------------------------------------------------------------------------------
// plotting: a panel maps data to SVG coordinates; axes, lines, bands and bars draw into it

struct tick {
    double value;
    std::string label;  ///< SVG markup (may hold a <tspan>)
};

/// A plot area. Log y axes may reserve a strip under the lowest decade where zeros are drawn
/// (a BER of 0 has no place on a log scale, but "no errors here" must stay visible).
struct panel {
    double left = 0, top = 0, width = 0, height = 0;
    double x_lo = 0, x_hi = 1;
    double y_lo = 0, y_hi = 1;
    bool y_log = false;
    bool zero_strip = false;
    static constexpr double strip_px = 16;

    [[nodiscard]] double bottom() const noexcept { return top + height; }
    [[nodiscard]] double right() const noexcept { return left + width; }
    [[nodiscard]] double data_bottom() const noexcept { return zero_strip ? bottom() - strip_px : bottom(); }

    [[nodiscard]] double px(double x) const noexcept
    {
        return left + (x - x_lo) / (x_hi - x_lo) * width;
    }
    [[nodiscard]] double py(double y) const noexcept
    {
        const double b = data_bottom();
        if (y_log) {
            if (y <= 0) return zero_strip ? bottom() - strip_px / 2 : b;
            const double f = (std::log10(y) - std::log10(y_lo)) / (std::log10(y_hi) - std::log10(y_lo));
            return b - std::clamp(f, 0.0, 1.0) * (b - top);
        }
        const double f = (y - y_lo) / (y_hi - y_lo);
        return b - std::clamp(f, -0.02, 1.02) * (b - top);
    }
};

/// 1-2-5 steps, about n ticks between lo and hi.
[[nodiscard]] std::vector<tick> linear_ticks(double lo, double hi, int n)
{
    std::vector<tick> out;
    const double raw = (hi - lo) / n;
    if (!(raw > 0) || !std::isfinite(raw)) return out;
    const double mag = std::pow(10.0, std::floor(std::log10(raw)));
    double step = mag;
    for (const double m : {1.0, 2.0, 5.0, 10.0}) {
        step = m * mag;
        if (step >= raw) break;
    }
    const int decimals = std::max(0, -static_cast<int>(std::floor(std::log10(step) + 1e-9)));
    for (double v = std::ceil(lo / step - 1e-9) * step; v <= hi + step * 1e-9; v += step) {
        const double shown = std::abs(v) < step * 1e-6 ? 0.0 : v;
        out.push_back({shown, printf_string("%.*f", decimals, shown)});
    }
    return out;
}

/// One tick per decade, labelled 10^k.
[[nodiscard]] std::vector<tick> log_ticks(double lo, double hi)
{
    std::vector<tick> out;
    const int k_lo = static_cast<int>(std::lround(std::log10(lo)));
    const int k_hi = static_cast<int>(std::lround(std::log10(hi)));
    // Thin out to at most ~8 labels on a long axis.
    const int every = std::max(1, (k_hi - k_lo + 7) / 8);
    for (int k = k_hi; k >= k_lo; k -= every) {
        std::string label = k == 0 ? "1" : "10<tspan dy=\"-5\" font-size=\"8\">" +
                                               std::string(k < 0 ? "&#8722;" : "") + std::to_string(std::abs(k)) +
                                               "</tspan>";
        out.push_back({std::pow(10.0, k), label});
    }
    return out;
}

/// Decades that hold every positive value: [10^floor(log10 min), 10^ceil(log10 max)], at most
/// up to 1 (rates), at least one decade; [1e-6, 1] when there is no positive value.
[[nodiscard]] std::pair<double, double> log_range(const std::vector<double>& values, double floor_lo = 1e-12)
{
    double lo = std::numeric_limits<double>::infinity(), hi = 0;
    for (const double v : values) {
        if (v > 0 && std::isfinite(v)) {
            lo = std::min(lo, v);
            hi = std::max(hi, v);
        }
    }
    if (hi == 0) return {1e-6, 1.0};
    double l = std::pow(10.0, std::floor(std::log10(lo) + 1e-9));
    double h = std::min(1.0, std::pow(10.0, std::ceil(std::log10(hi) - 1e-9)));
    l = std::max(l, floor_lo);
    if (h <= l) h = l * 10;
    return {l, h};
}

/// [lo, hi] of the finite values padded by 5 %, or around the single value.
[[nodiscard]] std::pair<double, double> linear_range(double lo, double hi)
{
    if (!std::isfinite(lo) || !std::isfinite(hi)) return {0.0, 1.0};
    if (hi - lo < 1e-12 * std::max(1.0, std::abs(hi))) {
        const double d = std::max(1.0, std::abs(hi) * 0.1);
        return {lo - d, hi + d};
    }
    const double pad = (hi - lo) * 0.05;
    return {lo - pad, hi + pad};
}

void open_svg(std::string& s, double height, std::string_view label)
{
    // Inline SVG in HTML needs no xmlns; leaving it out keeps the page free of any URL.
    s += "<svg viewBox=\"0 0 ";
    coord(s, svg_width);
    s += ' ';
    coord(s, height);
    s += "\" role=\"img\" aria-label=\"" + html_escape(label) + "\">\n";
}

void text(std::string& s, double x, double y, std::string_view anchor, std::string_view markup,
          std::string_view extra = {})
{
    s += "<text x=\"";
    coord(s, x);
    s += "\" y=\"";
    coord(s, y);
    s += "\" text-anchor=\"";
    s += anchor;
    s += '"';
    if (!extra.empty()) {
        s += ' ';
        s += extra;
    }
    s += '>';
    s += markup;
    s += "</text>\n";
}

void line(std::string& s, double x1, double y1, double x2, double y2, std::string_view attrs)
{
    s += "<line x1=\"";
    coord(s, x1);
    s += "\" y1=\"";
    coord(s, y1);
    s += "\" x2=\"";
    coord(s, x2);
    s += "\" y2=\"";
    coord(s, y2);
    s += "\" ";
    s += attrs;
    s += "/>\n";
}

void rect(std::string& s, double x, double y, double w, double h, std::string_view attrs)
{
    s += "<rect x=\"";
    coord(s, x);
    s += "\" y=\"";
    coord(s, y);
    s += "\" width=\"";
    coord(s, std::max(0.0, w));
    s += "\" height=\"";
    coord(s, std::max(0.0, h));
    s += "\" ";
    s += attrs;
    s += "/>\n";
}

/// Frame, grid, tick labels and axis titles of a panel.
void draw_axes(std::string& s, const panel& p, const std::vector<tick>& xt, const std::vector<tick>& yt,
               std::string_view x_title, std::string_view y_title)
{
    rect(s, p.left, p.top, p.width, p.height, "fill=\"#fff\" stroke=\"none\"");
    for (const auto& t : yt) {
        const double y = p.py(t.value);
        line(s, p.left, y, p.right(), y, "class=\"grid\"");
        text(s, p.left - 5, y + 3.5, "end", t.label);
    }
    if (p.zero_strip) {
        line(s, p.left, p.data_bottom(), p.right(), p.data_bottom(), "class=\"grid\" stroke-dasharray=\"3 3\"");
        text(s, p.left - 5, p.py(0) + 3.5, "end", "0");
    }
    for (const auto& t : xt) {
        const double x = p.px(t.value);
        if (x < p.left - 0.5 || x > p.right() + 0.5) continue;
        line(s, x, p.top, x, p.bottom(), "class=\"grid\"");
        if (!t.label.empty()) text(s, x, p.bottom() + 13, "middle", t.label);
    }
    rect(s, p.left, p.top, p.width, p.height, "fill=\"none\" stroke=\"#888\"");
    if (!x_title.empty()) text(s, p.left + p.width / 2, p.bottom() + 30, "middle", x_title);
    if (!y_title.empty()) {
        s += "<text transform=\"translate(";
        coord(s, p.left - 48);
        s += ' ';
        coord(s, p.top + p.height / 2);
        s += ") rotate(-90)\" text-anchor=\"middle\">";
        s += y_title;
        s += "</text>\n";
    }
}

/// A polyline through (x[i], y[i]); a NaN y breaks it. A lone point between breaks shows as
/// a dot (a round-capped stroke of almost no length).
void series(std::string& s, const panel& p, const std::vector<double>& x, const std::vector<double>& y,
            std::string_view color, std::string_view dash, double stroke_width = 1.4)
{
    std::string d;
    bool open = false;
    std::size_t run = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
        if (std::isnan(y[i])) {
            if (open && run == 1) d += "h0.1";
            open = false;
            continue;
        }
        d += open ? 'L' : 'M';
        coord(d, p.px(x[i]));
        d += ',';
        coord(d, p.py(y[i]));
        run = open ? run + 1 : 1;
        open = true;
    }
    if (open && run == 1) d += "h0.1";
    if (d.empty()) return;
    s += "<path d=\"" + d + "\" fill=\"none\" stroke=\"";
    s += color;
    s += "\" stroke-width=\"" + printf_string("%.1f", stroke_width) + "\" stroke-linejoin=\"round\" stroke-linecap=\"round\"";
    if (!dash.empty()) {
        s += " stroke-dasharray=\"";
        s += dash;
        s += '"';
    }
    s += "/>\n";
}

/// A filled band between lo[i] and hi[i]; NaN breaks it.
void band(std::string& s, const panel& p, const std::vector<double>& x, const std::vector<double>& lo,
          const std::vector<double>& hi, std::string_view color)
{
    std::string d;
    std::size_t i = 0;
    while (i < x.size()) {
        while (i < x.size() && std::isnan(lo[i])) ++i;
        const std::size_t first = i;
        while (i < x.size() && !std::isnan(lo[i])) ++i;
        if (i == first) break;
        for (std::size_t k = first; k < i; ++k) {
            d += k == first ? 'M' : 'L';
            coord(d, p.px(x[k]));
            d += ',';
            coord(d, p.py(hi[k]));
        }
        for (std::size_t k = i; k-- > first;) {
            d += 'L';
            coord(d, p.px(x[k]));
            d += ',';
            coord(d, p.py(lo[k]));
        }
        d += 'Z';
    }
    if (d.empty()) return;
    s += "<path d=\"" + d + "\" fill=\"";
    s += color;
    s += "\" fill-opacity=\"0.2\" stroke=\"none\"/>\n";
}

/// Legend entries in a row, from (x, y); ranks (1-based) are added to the names when given.
void legend(std::string& s, double x, double y, const std::vector<std::size_t>& order,
            const std::array<std::size_t, max_streams>* ranks)
{
    const double x0 = x;
    for (const auto p : order) {
        std::string attrs = "stroke=\"" + std::string(path_colors[p]) + "\" stroke-width=\"2.5\"";
        if (!path_dashes[p].empty()) attrs += " stroke-dasharray=\"" + std::string(path_dashes[p]) + "\"";
        line(s, x, y - 4, x + 22, y - 4, attrs);
        std::string label = name_of(p);
        if (ranks) label += " (#" + std::to_string((*ranks)[p]) + ")";
        // Twelve streams do not fit one row: wrap.
        if (x > x0 && x + 36 + 7.5 * static_cast<double>(label.size()) > svg_width - 10) {
            x = x0;
            y += 15;
        }
        text(s, x + 27, y, "start", label);
        x += 36 + 7.5 * static_cast<double>(label.size());
    }
}

/// The time axis: UTC when the rows carry absolute time (report_data::utc_origin_ns), else
/// seconds since the start of the run, or minutes for runs longer than 10 minutes.
struct time_axis {
    double scale = 1;  ///< divide seconds by this
    std::string title;
    std::optional<std::int64_t> utc_origin_ns;  ///< time_s = 0 in UTC

    /// Ticks over [lo, hi] (in seconds / scale), about n of them.
    [[nodiscard]] std::vector<tick> ticks(double lo, double hi, int n) const
    {
        if (!utc_origin_ns) return linear_ticks(lo, hi, n);
        // Steps a clock reads well: 1-2-5 below a second, then 1, 2, 5, 10, 15, 30 s, 1, 2,
        // 5, 10, 15, 30 min, 1, 2, 3, 6, 12 h; ticks on whole multiples of the step in UTC.
        static constexpr std::array<double, 23> steps{0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2,
                                                      0.5,   1,     2,     5,    10,   15,   30,  60,
                                                      120,   300,   600,   900,  1800, 3600, 21600};
        const double raw = (hi - lo) / n;
        double step = steps.back();
        for (const double s : steps) {
            if (s >= raw) {
                step = s;
                break;
            }
        }
        const int decimals = step < 1 ? static_cast<int>(std::lround(-std::log10(step) + 0.49)) : 0;
        const auto step_ns = static_cast<std::int64_t>(std::llround(step * 1e9));
        const std::int64_t origin = *utc_origin_ns;
        const auto lo_ns = origin + static_cast<std::int64_t>(std::floor(lo * 1e9));
        const auto hi_ns = origin + static_cast<std::int64_t>(std::ceil(hi * 1e9));
        std::int64_t k = lo_ns / step_ns;
        if (k * step_ns < lo_ns) ++k;
        std::vector<tick> out;
        for (std::int64_t t = k * step_ns; t <= hi_ns && out.size() < 100; t += step_ns) {
            out.push_back({static_cast<double>(t - origin) / 1e9, format_utc_time(t, decimals)});
        }
        return out;
    }
    /// A moment (seconds since the start) as the page names it: UTC time or "12.3 s".
    [[nodiscard]] std::string moment(double t_s) const
    {
        if (utc_origin_ns) return format_utc_time(*utc_origin_ns + static_cast<std::int64_t>(std::llround(t_s * 1e9)));
        return printf_string("%.0f&#8239;s", t_s);
    }
};

[[nodiscard]] time_axis choose_time_axis(double span_s, const report_data& d)
{
    if (d.utc_origin_ns) {
        return {1, "UTC (the run started " + format_utc_datetime(*d.utc_origin_ns + static_cast<std::int64_t>(std::llround(d.min_time_s * 1e9))) + ")",
                d.utc_origin_ns};
    }
    if (span_s > 600) return {60, "time since the start of the run (min)", std::nullopt};
    return {1, "time since the start of the run (s)", std::nullopt};
}

/// Gaps (bands) and lost packets (ticks at the bottom) behind a time panel's lines, from
/// report_data::marks. Marks closer than a pixel merge, so the SVG stays small however many
/// the run has. Each carries data-t0 / data-t1 (seconds since the start) for tests and tools.
void draw_marks(std::string& s, const panel& p, const report_data& d, const time_axis& ta)
{
    double last_gap_x1 = -1e9, last_tick_x = -1e9;
    for (const auto& m : d.marks) {
        const double x0 = std::clamp(p.px(m.start_s / ta.scale), p.left, p.right());
        const double x1 = std::clamp(p.px(m.end_s / ta.scale), p.left, p.right());
        const std::string data = "data-t0=\"" + printf_string("%.6f", m.start_s) + "\" data-t1=\"" +
                                 printf_string("%.6f", m.end_s) + "\" data-missing=\"" + std::to_string(m.missing_packets) +
                                 "\" data-unrecorded=\"" + std::to_string(m.unrecorded_packets) + "\"";
        if (m.gap) {
            if (x1 <= last_gap_x1 + 1) continue;
            // At least 2 px wide, so that a gap shorter than a pixel is still seen.
            const double w = std::max(2.0, x1 - x0);
            const double xc = (x0 + x1) / 2;
            rect(s, xc - w / 2, p.top, w, p.height, "class=\"gap\" fill=\"#888\" fill-opacity=\"0.3\" stroke=\"none\" " + data);
            last_gap_x1 = xc + w / 2;
        } else {
            const double x = (x0 + x1) / 2;
            if (x < last_tick_x + 1) continue;
            line(s, x, p.bottom() - 7, x, p.bottom(), "class=\"lost\" stroke=\"#c00\" stroke-width=\"1.5\" " + data);
            last_tick_x = x;
        }
    }
}

/// The legend of draw_marks, right-aligned at (x_right, y); nothing when the run has no mark.
void marks_legend(std::string& s, double x_right, double y, const report_data& d)
{
    if (d.marks.empty()) return;
    std::string g = "gap (no packet in " + std::to_string(gap_min_missing) + "+ slots)";
    const std::string l = "packets lost";
    const double wl = 6.2 * static_cast<double>(l.size()), wg = 6.2 * static_cast<double>(g.size());
    double x = x_right - wl;
    text(s, x, y, "start", l, "class=\"legend-lost\"");
    line(s, x - 6, y - 9, x - 6, y + 1, "stroke=\"#c00\" stroke-width=\"1.5\"");
    x -= 20 + wg;
    text(s, x, y, "start", g, "class=\"legend-gap\"");
    rect(s, x - 14, y - 9, 10, 10, "fill=\"#888\" fill-opacity=\"0.3\" stroke=\"none\"");
}

// ---------------------------------------------------------------------------------------------
// page parts

const char* const css = R"(body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif;
color:#222;max-width:1000px;margin:0 auto;padding:16px 20px 40px;line-height:1.45}
h1{font-size:1.6em;margin:.3em 0 .2em}h2{font-size:1.25em;margin:1.6em 0 .4em;border-bottom:1px solid #ccc;padding-bottom:.15em}
table{border-collapse:collapse;font-size:.9em;margin:.5em 0}
th,td{border:1px solid #ccc;padding:3px 7px;text-align:right;vertical-align:top}
td{white-space:nowrap;font-variant-numeric:tabular-nums}.scroll{overflow-x:auto}
td .note{white-space:normal}
th{background:#f2f2f2}td.l,th.l{text-align:left}
table.facts td,table.facts th{text-align:left;border:none;padding:1px 10px 1px 0;white-space:normal}table.facts th{background:none;font-weight:600}
tr.best td{background:#eef7ee;font-weight:600}
.swatch{display:inline-block;width:22px;height:0;border-top:3px solid;vertical-align:middle;margin-right:5px}
.note{font-size:.88em;color:#555}.warn{background:#fff4e0;border-left:4px solid #e69f00;padding:4px 10px}
.read{background:#f6f8fb;border-left:4px solid #0072b2;padding:6px 12px;font-size:.92em}
figure{margin:.6em 0}svg{width:100%;height:auto;font-size:11px;font-family:inherit}
svg text{fill:#333}svg .grid{stroke:#e3e3e3;stroke-width:1}
.verdict{font-size:1.05em}
@media print{body{max-width:none}h2{break-after:avoid}figure{break-inside:avoid}}
)";

[[nodiscard]] std::string swatch(std::size_t p)
{
    std::string style = "border-color:" + std::string(path_colors[p]);
    if (!path_dashes[p].empty()) style += ";border-top-style:dashed";
    return "<span class=\"swatch\" style=\"" + style + "\"></span>";
}

/// The name of what is measured, for headings and labels.
[[nodiscard]] std::string rate_name(const report_data& d) { return d.ber_mode ? "BER" : "estimated BEP"; }

void header(std::string& h, const report_data& d, const page_inputs& in)
{
    const std::string title = in.title.empty() ? "Equalizer comparison" : in.title;
    h += "<h1>" + html_escape(title) + "</h1>\n";
    h += "<p class=\"note\">paq-report: side-by-side comparison of the six equalizer paths of one paqd run";
    if (!in.generated.empty()) h += ", generated " + html_escape(in.generated);
    h += ".</p>\n<table class=\"facts\">\n";
    const auto fact = [&](std::string_view k, const std::string& v) {
        h += "<tr><th>";
        h += k;
        h += "</th><td>" + v + "</td></tr>\n";
    };
    fact("Packets file", "<code>" + html_escape(in.packets_path.string()) + "</code> (" + format_bytes(in.packets_bytes) +
                             ", " + format_count(d.rows) + " rows)");
    if (in.channel) {
        fact("Channel file", "<code>" + html_escape(in.channel->path.string()) + "</code> (" +
                                 format_bytes(in.channel->bytes) + ", " + format_count(in.channel->rows) + " rows, " +
                                 std::to_string(in.channel->taps) + " taps)");
    } else {
        fact("Channel file", "none: " + html_escape(in.no_channel_reason));
    }
    if (!in.each_channel.empty()) {
        std::string files;
        for (const auto& c : in.each_channel) {
            files += (files.empty() ? "" : ", ") + ("channel " + std::to_string(c.channel) + ": <code>" +
                                                   html_escape(c.path.string()) + "</code> (" +
                                                   (c.data ? format_count(c.data->packets) + " packets"
                                                           : std::string("no packet found alone")) +
                                                   ")");
        }
        fact("Each channel alone", files);
    }
    std::string pk = format_count(d.packets) + " (packet index " + format_count(d.first_packet) + " to " +
                     format_count(d.last_packet) + ")";
    if (d.decimated_rows > 0) {
        pk += "; decimated: " + format_count(d.decimated_rows) + " rows stand for several packets (up to " +
              format_count(d.max_row_packets) + " each)";
    }
    fact("Packets", pk);
    std::string span = format_time(d.min_time_s) + " to " + format_time(d.max_time_s) + " (" +
                       format_duration(d.max_time_s - d.min_time_s) + ")";
    if (d.utc_origin_ns) {
        const auto at = [&](double t) { return *d.utc_origin_ns + static_cast<std::int64_t>(std::llround(t * 1e9)); };
        // "2026-11-25 10:47:40.123 to 10:47:42.122 UTC": the zone once, after both times.
        std::string from = format_utc_datetime(at(d.min_time_s));
        from.resize(from.size() - std::string_view(" UTC").size());
        span += "; " + from + " to " + format_utc_time(at(d.max_time_s), 3) + " UTC";
    } else {
        span += "; the records carry no absolute time (no <code>time_utc</code>), so the axes count from the start";
    }
    fact("Time span", span);
    if (in.counters) {
        // The losses as paqd counted them: every gap by its reason, what was lost before the
        // receiver, and the packets the sequence says are missing.
        const auto& c = *in.counters;
        std::string l = format_count(c.gaps) + (c.gaps == 1 ? " gap" : " gaps");
        std::string reasons;
        for (const auto& [reason, n] : c.gaps_by_reason) {
            if (n == 0) continue;
            reasons += (reasons.empty() ? "" : ", ") + html_escape(reason) + " " + format_count(n);
        }
        if (!reasons.empty()) l += " (" + reasons + ")";
        if (c.source_packets_lost) l += "; " + format_count(*c.source_packets_lost) + " datagrams lost";
        if (c.source_samples_lost) l += ", " + format_count(*c.source_samples_lost) + " samples in them";
        l += "; " + format_count(c.samples_lost_in_gaps) + " samples lost before the receiver";
        if (c.samples_dropped) l += ", " + format_count(*c.samples_dropped) + " dropped by its ring buffer";
        l += "; " + format_count(c.packets_missed_in_sequence) + " packets missing from the sequence";
        if (c.batches_lost > 0) {
            l += "; " + format_count(c.batches_lost) + " batches lost on the backend (" + format_count(c.samples_in_lost_batches) +
                 " samples)";
        }
        fact("Losses (paqd's counters)", l + " &mdash; from " + html_escape(c.path.string()));
    } else {
        fact("Losses (paqd's counters)", "not read: " + html_escape(in.no_counters_reason) +
                                             "; the gaps below are estimated from the records alone");
    }
    if (!d.marks.empty()) {
        std::string g = format_count(d.gaps) + (d.gaps == 1 ? " gap, " : " gaps, ") + format_count(d.missing_packets) +
                        " packets missing (packet spacing " + format_width(d.packet_spacing_s) +
                        (d.packet_spacing_known ? ", one packet at the link's rate" : ", estimated from the rows") + ")";
        if (d.unrecorded_packets > 0) g += ", " + format_count(d.unrecorded_packets) + " packets without a row (rows lost)";
        fact("Gaps in the records", g + "; marked on the time axes of figures 1 and 3");
    }
    fact("Measure", d.ber_mode ? "bit error rate (BER) against the PN pattern: errors / bits, summed exactly over the rows"
                               : "<b>estimated BEP</b>: no PN pattern was configured (the <code>_bits</code> and "
                                 "<code>_errors</code> columns are empty), so paths are compared by their estimated "
                                 "bit error probability, Q(mean/std) of the decision statistics, not by counted errors");
    fact("Plot bins", format_width(d.bin_width_s) + " (" + std::to_string(d.bins.size()) +
                          " bins; every point is the exact sum over its bin)");
    static constexpr std::array<std::string_view, 5> flag_names{
        "non-finite input", "ZF regularized", "ill-conditioned", "CFO near limit", "Eb/N0 below 3 dB"};
    std::string flags;
    for (std::size_t b = 0; b < flag_names.size(); ++b) {
        if (!flags.empty()) flags += ", ";
        flags += std::string(flag_names[b]) + " " + format_count(d.flag_rows[b]);
    }
    if (d.other_flag_rows > 0) flags += ", unknown flags " + format_count(d.other_flag_rows);
    fact("Rows with flags", flags);
    for (const auto& [k, v] : in.meta) fact(html_escape(k), html_escape(v));
    h += "</table>\n";
    if (d.out_of_order_rows > 0) {
        h += "<p class=\"warn\">" + format_count(d.out_of_order_rows) +
             " rows have a time earlier than the row before them (the file is not in time order); they are "
             "binned by their own time.</p>\n";
    }
}

/// With receiver.detector both: each path's two detectors side by side, and their ratio.
void detectors_table(std::string& h, const report_data& d)
{
    const bool ber = d.ber_mode;
    h += "<h3>The two detectors side by side</h3>\n<div class=\"scroll\"><table class=\"summary\">\n<tr><th class=\"l\">path</th>";
    h += "<th>" + rate_name(d) + ", symbol by symbol</th><th>" + rate_name(d) + ", trellis</th><th>trellis / symbol by symbol</th>";
    if (ber) h += "<th>errors, symbol by symbol</th><th>errors, trellis</th>";
    h += "</tr>\n";
    for (std::size_t p = 0; p < n_paths; ++p) {
        const auto& a = d.paths[p].sums;
        const auto& b = d.paths[p + n_paths].sums;
        const double va = d.value(a), vb = d.value(b);
        h += "<tr><td class=\"l\">" + name_of(p) + "</td><td>" + swatch(p) + format_rate(va) + "</td><td>" + swatch(p + n_paths) +
             format_rate(vb) + "</td><td>";
        h += va > 0 && std::isfinite(va) && std::isfinite(vb) ? printf_string("%.3g", vb / va) : std::string("n/a");
        h += "</td>";
        if (ber) h += "<td>" + format_count(a.errors) + "</td><td>" + format_count(b.errors) + "</td>";
        h += "</tr>\n";
    }
    h += "</table></div>\n<p class=\"read\"><b>How to read this.</b> paqd decided every path twice "
         "(<code>receiver.detector: both</code>): symbol by symbol, and by sequence (trellis) detection on the same "
         "equalized samples. A ratio below 1 is what the trellis gains on that path; the streams " +
         std::string(ber ? "are counted on the same packets against the same PN data" : "are estimated on the same packets") +
         ", so the ratio compares the detectors and nothing else.</p>\n";
}

/// A coded link (paqd's receiver.fec): each stream's decoded information bits beside what its
/// detector gave the decoder.
void coded_table(std::string& h, const report_data& d)
{
    const auto& fec = d.options.fec;
    const bool ber = d.ber_mode;
    h += "<h3>Decoded and channel bits side by side</h3>\n<div class=\"scroll\"><table class=\"summary\">\n<tr><th class=\"l\">path</th>";
    if (ber) h += "<th>BER after decoding</th><th>errors after decoding</th>";
    h += "<th>codewords</th><th>failed</th><th>FER</th><th>mean iterations</th><th>channel BER before decoding<sup>a</sup></th>"
         "<th>channel errors<sup>a</sup></th></tr>\n";
    for (std::size_t p = 0; p < d.streams; ++p) {
        const auto& s = d.paths[p].sums;
        h += "<tr><td class=\"l\">" + swatch(p) + name_of(p) + "</td>";
        if (ber) h += "<td>" + format_rate(s.ber()) + "</td><td>" + format_count(s.errors) + "</td>";
        if (fec && fec->continuous) {
            // The rows count the failed codewords, not the decoded ones: paqd's summary has those.
            h += "<td>n/a</td><td>" + format_count(s.codewords_failed) + "</td><td>n/a</td><td>n/a</td><td>n/a</td>";
        } else if (fec) {
            const std::uint64_t codewords = s.packets * fec->codewords_per_packet;
            const std::uint64_t converged = codewords > s.codewords_failed ? codewords - s.codewords_failed : 0;
            h += "<td>" + format_count(codewords) + "</td><td>" + format_count(s.codewords_failed) + "</td><td>" +
                 format_rate(codewords ? static_cast<double>(s.codewords_failed) / static_cast<double>(codewords)
                                       : std::numeric_limits<double>::quiet_NaN()) +
                 "</td><td>" +
                 (codewords ? printf_string("%.2f", static_cast<double>(s.iterations) / static_cast<double>(codewords))
                            : std::string("n/a")) +
                 "</td><td>" +
                 format_rate(converged ? static_cast<double>(s.channel_errors) / static_cast<double>(converged * fec->n)
                                       : std::numeric_limits<double>::quiet_NaN()) +
                 "</td>";
        } else {
            h += "<td>n/a</td><td>" + format_count(s.codewords_failed) + "</td><td>n/a</td><td>n/a</td><td>n/a</td>";
        }
        h += "<td>" + format_count(s.channel_errors) + "</td></tr>\n";
    }
    h += "</table></div>\n<p class=\"read\"><b>How to read this.</b> The link carries " +
         (fec && fec->continuous
              ? "the LDPC code <code>" + html_escape(fec->code) + "</code> as the continuous stream (codewords of " +
                    std::to_string(fec->n) + " bits across the packets; how many each packet ended is in paqd's JSON summary, "
                    "paths[].fec_codewords, not in the records, so the codeword rates here are n/a)"
          : fec ? "the LDPC code <code>" + html_escape(fec->code) + "</code> (" + std::to_string(fec->codewords_per_packet) +
                    " codewords of " + std::to_string(fec->n) + " bits per packet)"
              : std::string("an LDPC code (paqd's counters were not read, so its size is unknown and the rates are n/a)")) +
         ", and paqd decoded every stream's data fields: " +
         std::string(ber ? "the BER above and in the summary counts the decoded information bits against the PN data. " : "") +
         "A failed codeword is one whose decisions still broke a parity check after the last iteration. "
         "<sup>a</sup> The channel's errors are the received bits of the converged codewords that the decoder "
         "corrected: what the detector gave the decoder, counted where the decoded codeword is known; failed "
         "codewords are left out, so on a link near the code's limit this understates the channel's BER.</p>\n";
}

/// Two receive channels: the combined paths beside each channel received alone (the same
/// recording replayed on each channel), and the better channel's over the combined.
void each_channel_table(std::string& h, const report_data& d, const page_inputs& in)
{
    if (in.each_channel.empty()) return;
    const bool ber = d.ber_mode;
    h += "<h3>Combined and each channel alone</h3>\n<div class=\"scroll\"><table class=\"summary\">\n<tr><th class=\"l\">path</th>";
    h += "<th>" + rate_name(d) + ", combined</th>";
    for (const auto& c : in.each_channel) h += "<th>channel " + std::to_string(c.channel) + " alone</th>";
    h += "<th>better channel / combined</th>";
    if (ber) h += "<th>errors, combined</th>";
    h += "</tr>\n";
    for (std::size_t p = 0; p < d.streams; ++p) {
        const double vc = d.value(d.paths[p].sums);
        double better = nan;
        h += "<tr><td class=\"l\">" + name_of(p) + "</td><td>" + swatch(p) + format_rate(vc) + "</td>";
        for (const auto& c : in.each_channel) {
            const double v = c.data && p < c.data->streams ? c.data->value(c.data->paths[p].sums) : nan;
            if (std::isfinite(v) && !(better <= v)) better = v;
            h += "<td>" + format_rate(v) + "</td>";
        }
        h += "<td>";
        h += vc > 0 && std::isfinite(vc) && std::isfinite(better) ? printf_string("%.3g", better / vc) : std::string("n/a");
        h += "</td>";
        if (ber) h += "<td>" + format_count(d.paths[p].sums.errors) + "</td>";
        h += "</tr>\n";
    }
    std::string files;
    for (const auto& c : in.each_channel) files += (files.empty() ? "" : ", ") + ("<code>" + html_escape(c.path.string()) + "</code>");
    h += "</table></div>\n<p class=\"read\"><b>How to read this.</b> The run combined two receive channels; the same "
         "recording was also received on each channel alone (" + files + ", <code>paqd replay --each-channel</code>). "
         "The ratio of the better channel alone to the combined is what combining gains on each path: above 1, the "
         "combined "
         "path " + std::string(ber ? "made fewer errors" : "estimates fewer errors") + ".</p>\n";
}

void summary(std::string& h, const report_data& d)
{
    const bool ber = d.ber_mode;
    const std::string w = format_width(d.options.window_s);
    const std::string bad = format_sig(d.options.bad_threshold);
    h += "<h2>Summary: which path to trust</h2>\n";

    // One sentence a reader can quote.
    const auto& best = d.paths[d.ranking[0]];
    const auto& second = d.paths[d.ranking[1]];
    const double vb = d.value(best.sums), v2 = d.value(second.sums);
    if (std::isnan(vb)) {
        h += "<p class=\"warn\">No path can be ranked: ";
        h += ber ? "no path's PN checker was ever locked (every <code>_bits</code> field is 0), so no bit was checked."
                 : "no row has a finite estimated BEP.";
        h += "</p>\n";
    }
    h += "<p class=\"verdict\">" + swatch(best.index) + "<b>" + name_of(best.index) + "</b> ranks first: " + rate_name(d) +
         " " + format_rate(vb);
    if (ber) h += " (" + format_count(best.sums.errors) + " errors in " + format_count(best.sums.bits) + " bits)";
    h += ". Next: " + name_of(second.index) + " at " + format_rate(v2);
    if (vb > 0 && v2 > 0 && std::isfinite(v2)) h += printf_string(" (%.3g&#215; higher)", v2 / vb);
    h += ".";
    if (ber && best.sums.bits > 0 && best.sums.errors < 10) {
        h += " <span class=\"note\">With fewer than 10 errors the best path's BER is uncertain by a factor of two or "
             "more; a longer run decides between close paths.</span>";
    }
    h += "</p>\n<div class=\"scroll\"><table class=\"summary\">\n<tr><th>rank</th><th class=\"l\">path</th><th>packets</th>";
    if (ber) h += "<th>PN locked<sup>a</sup></th><th>bits</th><th>errors</th><th>BER<sup>b</sup></th>";
    h += "<th>mean est. BEP</th>";
    h += ber ? "<th>packets with 0 errors<sup>c</sup></th>" : "<th>packets with 0 known-bit errors<sup>c</sup></th>";
    h += "<th>packets with " + std::string(ber ? "BER" : "BEP") + " &gt; " + bad + "<sup>c</sup></th>";
    h += "<th>worst " + w + " window<sup>d</sup></th><th>known-bit BER<sup>e</sup></th></tr>\n";
    for (const auto p : d.ranking) {
        const auto& s = d.paths[p];
        h += s.rank == 1 ? "<tr class=\"best\">" : "<tr>";
        h += "<td>" + std::to_string(s.rank) + "</td><td class=\"l\">" + swatch(p) + name_of(p) + "</td>";
        h += "<td>" + format_count(s.sums.packets) + "</td>";
        if (ber) {
            h += "<td>" + format_share(static_cast<double>(s.sums.checked_packets) / static_cast<double>(s.sums.packets)) +
                 "</td>";
            h += "<td>" + format_count(s.sums.bits) + "</td><td>" + format_count(s.sums.errors) + "</td>";
            h += "<td>" + format_rate(s.sums.ber());
            if (s.sums.bits > 0 && s.sums.errors == 0) {
                h += "<span class=\"note\"> (&lt;" + format_rate(3.0 / static_cast<double>(s.sums.bits)) + ")</span>";
            }
            h += "</td>";
        }
        h += "<td>" + format_rate(s.sums.mean_bep()) + "</td>";
        h += "<td>" + format_share(s.zero_share) + "</td><td>" + format_share(s.bad_share) + "</td>";
        h += "<td>";
        if (s.worst_window) {
            h += format_rate(s.worst_window_value) + "<span class=\"note\"> at&nbsp;" +
                 choose_time_axis(0, d).moment(d.windows[*s.worst_window].start_s) + "</span>";
        } else {
            h += "n/a";
        }
        h += "</td><td>" + format_rate(s.sums.known_ber()) + "</td></tr>\n";
    }
    h += "</table></div>\n<p class=\"note\">";
    if (ber) {
        h += "<sup>a</sup> Share of packets whose PN checker was locked (bits &gt; 0); only these are counted in bits, "
             "errors and BER. "
             "<sup>b</sup> Errors / bits over the whole run; for 0 errors the 95&#8239;% upper bound 3 / bits is in "
             "brackets. ";
        h += "<sup>c</sup> Out of the packets with the PN checker locked. ";
    } else {
        h += "<sup>c</sup> \"0 known-bit errors\": none of the 192 preamble + ASM bits of the packet was wrong. The BEP "
             "share is out of the packets with a finite BEP. ";
    }
    if (d.decimated_rows > 0) {
        h += "Some rows stand for several packets; such a row counts as error-free only when all its packets are, and "
             "its BER is the mean over its packets, so these two shares are approximate (bits and errors are exact). ";
    }
    h += "<sup>d</sup> The " + w + " window (aligned to whole multiples of " + w + ") with the highest " + rate_name(d) +
         ", among windows holding at least half the path's median " + (ber ? "bits" : "packets") +
         " per window; its start time. "
         "<sup>e</sup> Errors among the 192 known preamble + ASM bits of every packet, measured with or without a "
         "PN pattern.</p>\n";
    h += "<p class=\"read\"><b>How to read this.</b> The table is sorted from the most to the least trustworthy path ";
    if (ber) {
        h += "by measured BER, the errors counted against the known PN data over all packets. Check the <i>PN locked</i> "
             "column first: a path that was locked for fewer packets has been measured on fewer bits, and its BER may "
             "leave out the hardest moments. ";
    } else {
        h += "by the mean estimated BEP, which the receiver derives from how far its decisions sit from the decision "
             "threshold; it is an estimate, not a count, and it is optimistic when the equalizer is confidently wrong. "
             "The known-bit BER (counted errors on the preamble and ASM) is a cross-check. ";
    }
    h += "The shares tell whether errors are spread thinly (many packets with a few errors) or concentrated in bad "
         "packets; the worst window tells how bad the hardest second was. Prefer a path that is best overall and "
         "also has a low worst window.</p>\n";
    if (d.streams == max_streams) detectors_table(h, d);
    if (d.coded) coded_table(h, d);
}

/// The sentence under a time figure that explains its gap bands and loss ticks.
[[nodiscard]] std::string marks_caption(const report_data& d)
{
    std::string c = " Grey bands mark gaps: stretches where " + std::to_string(gap_min_missing) +
                    " or more packets in a row were due (one every " + format_width(d.packet_spacing_s) +
                    ", the run's packet spacing) and none was found: samples lost before the receiver, or the "
                    "signal gone. Red ticks at the bottom mark packets lost singly or in pairs";
    if (d.unrecorded_packets > 0) c += ", and packets found whose rows were not written";
    c += ". In all, " + format_count(d.gaps) + (d.gaps == 1 ? " gap and " : " gaps and ") + format_count(d.missing_packets) +
         " packets missing";
    if (d.unrecorded_packets > 0) c += ", " + format_count(d.unrecorded_packets) + " without a row";
    c += ".";
    if (d.marks_dropped > 0) c += " Only the first " + format_count(max_marks) + " are drawn.";
    return c;
}

void ber_figure(std::string& h, const report_data& d)
{
    const bool ber = d.ber_mode;
    h += "<h2>Figure 1: " + rate_name(d) + " per path over time</h2>\n<figure>\n";
    const double height = 400;
    std::string s;
    open_svg(s, height, rate_name(d) + " per path over time");

    const auto n = d.bins.size();
    const double span = static_cast<double>(n) * d.bin_width_s;
    const auto ta = choose_time_axis(span, d);
    std::vector<double> x(n);
    for (std::size_t i = 0; i < n; ++i) {
        x[i] = (d.bin_start_s + (static_cast<double>(i) + 0.5) * d.bin_width_s) / ta.scale;
    }
    std::array<std::vector<double>, max_streams> y;
    std::vector<double> all;
    for (std::size_t p = 0; p < d.streams; ++p) {
        y[p].resize(n);
        for (std::size_t i = 0; i < n; ++i) {
            const auto& ps = d.bins[i].paths[p];
            y[p][i] = d.weight(ps) > 0 ? d.value(ps) : nan;
            all.push_back(y[p][i]);
        }
    }
    const auto [lo, hi] = log_range(all);
    panel p;
    p.left = 70;
    p.top = 40;
    p.width = svg_width - p.left - 20;
    p.height = height - p.top - 45;
    p.x_lo = d.bin_start_s / ta.scale;
    p.x_hi = (d.bin_start_s + span) / ta.scale;
    p.y_log = true;
    p.zero_strip = true;
    p.y_lo = lo;
    p.y_hi = hi;
    draw_axes(s, p, ta.ticks(p.x_lo, p.x_hi, 10), log_ticks(lo, hi), ta.title,
              ber ? "BER (errors / bits per bin)" : "estimated BEP (mean per bin)");
    draw_marks(s, p, d, ta);
    marks_legend(s, p.right(), p.bottom() + 30, d);

    // The best and worst windows of the best path, as shaded columns behind the lines. A run
    // shorter than the window has one window, wider than the plot: the column is clipped to
    // the plot, and when best and worst are the same window it is drawn once, labelled so.
    // Labels that would overlap (windows a few pixels apart) are set side by side.
    struct column {
        double x0, x1, xc;
    };
    const auto place = [&](std::size_t w) {
        double x0 = std::clamp(p.px(d.windows[w].start_s / ta.scale), p.left, p.right());
        double x1 = std::clamp(p.px((d.windows[w].start_s + d.options.window_s) / ta.scale), p.left, p.right());
        if (x1 - x0 < 3) {
            const double c = std::clamp((x0 + x1) / 2, p.left + 1.5, p.right() - 1.5);
            x0 = c - 1.5;
            x1 = c + 1.5;
        }
        return column{x0, x1, (x0 + x1) / 2};
    };
    const auto shade = [&](const column& c, std::string_view color) {
        rect(s, c.x0, p.top, c.x1 - c.x0, p.height, "fill=\"" + std::string(color) + "\" fill-opacity=\"0.25\" stroke=\"none\"");
    };
    const auto label = [&](double at_x, std::string_view anchor, std::string_view which, std::string_view text_) {
        text(s, at_x, p.top - 4, anchor, text_,
             "font-weight=\"600\" class=\"window-label\" data-window=\"" + std::string(which) + "\"");
    };
    constexpr double char_px = 6.6;  // an 11 px bold label's width per character, generously
    if (d.best_window && d.worst_window && *d.best_window == *d.worst_window) {
        const auto c = place(*d.best_window);
        shade(c, "#999999");
        const std::string t = "best = worst (one window)";
        const double half = char_px * static_cast<double>(t.size()) / 2;
        label(std::clamp(c.xc, p.left + half, p.right() - half), "middle", "both", t);
    } else {
        std::optional<column> b, w;
        if (d.best_window) shade(*(b = place(*d.best_window)), "#009E73");
        if (d.worst_window) shade(*(w = place(*d.worst_window)), "#D55E00");
        const double wb = char_px * 4, ww = char_px * 5;  // "best", "worst"
        if (b && w && std::abs(b->xc - w->xc) < (wb + ww) / 2 + 6) {
            // Side by side around their middle, the left window's label on the left.
            const double mid = std::clamp((b->xc + w->xc) / 2, p.left + wb + 3, p.right() - ww - 3);
            const bool best_left = b->xc <= w->xc;
            label(mid - 3, "end", best_left ? "best" : "worst", best_left ? "best" : "worst");
            label(mid + 3, "start", best_left ? "worst" : "best", best_left ? "worst" : "best");
        } else {
            if (b) label(std::clamp(b->xc, p.left + wb / 2, p.right() - wb / 2), "middle", "best", "best");
            if (w) label(std::clamp(w->xc, p.left + ww / 2, p.right() - ww / 2), "middle", "worst", "worst");
        }
    }

    // Worst-ranked first, so that the best path is drawn on top.
    for (std::size_t r = d.streams; r-- > 0;) {
        const auto q = d.ranking[r];
        series(s, p, x, y[q], path_colors[q], path_dashes[q], r == 0 ? 2.0 : 1.3);
    }
    std::array<std::size_t, max_streams> ranks{};
    for (std::size_t q = 0; q < d.streams; ++q) ranks[q] = d.paths[q].rank;
    legend(s, p.left, 16, std::vector<std::size_t>(d.ranking.begin(), d.ranking.end()), &ranks);
    s += "</svg>\n";
    h += s;
    h += "<figcaption class=\"read\"><b>How to read this.</b> One line per path (legend: rank in brackets, the best "
         "path drawn thickest). Each point covers " +
         format_width(d.bin_width_s) + " of the run and is ";
    h += ber ? "the errors divided by the bits of that stretch, so short bursts of errors show as spikes. "
             : "the mean estimated BEP of the packets in that stretch. ";
    h += "Lower is better; the scale is logarithmic, one grid line per factor of ten. Points on the dashed "
         "<i>0</i> strip at the bottom had no ";
    h += ber ? "errors at all; gaps mean that no bits were checked there (the path's PN checker was not locked, "
               "or there were no packets). "
             : "estimated BEP above 0 (the estimate underflowed); gaps mean there were no packets. ";
    h += "Lines that run together mean the equalizers behave alike; where one lifts away from the others, that path "
         "struggles with the channel at that moment. The shaded columns mark the best and worst " +
         format_width(d.options.window_s) + " windows of the best path, whose channels are shown in figure 4.";
    if (!d.marks.empty()) h += marks_caption(d);
    h += "</figcaption>\n";
    h += "</figure>\n";
}

void errors_figure(std::string& h, const report_data& d)
{
    const bool ber = d.ber_mode;
    const bool per_row = d.decimated_rows > 0;
    const std::string unit = per_row ? "row" : "packet";
    h += "<h2>Figure 2: distribution of " + std::string(ber ? "bit errors" : "known-bit errors") + " per " + unit +
         "</h2>\n<figure>\n";
    const double height = 360;
    std::string s;
    open_svg(s, height, "distribution of errors per " + unit);

    std::size_t last = 1;
    std::vector<double> shares;
    for (std::size_t q = 0; q < d.streams; ++q) {
        const auto& ps = d.paths[q];
        for (std::size_t c = 0; c < n_error_classes; ++c) {
            if (ps.error_rows[c] > 0) last = std::max(last, c);
            if (ps.classified_rows > 0) {
                shares.push_back(static_cast<double>(ps.error_rows[c]) / static_cast<double>(ps.classified_rows));
            }
        }
    }
    const std::size_t n_cls = last + 1;
    const auto [lo, hi] = log_range(shares);
    panel p;
    p.left = 70;
    p.top = 40;
    p.width = svg_width - p.left - 20;
    p.height = height - p.top - 45;
    p.x_lo = 0;
    p.x_hi = static_cast<double>(n_cls);
    p.y_log = true;
    p.y_lo = lo;
    p.y_hi = std::max(hi, lo * 10);
    std::vector<tick> xt;
    for (std::size_t c = 0; c < n_cls; ++c) xt.push_back({static_cast<double>(c) + 0.5, error_class_label(c)});
    // Category borders as unlabelled grid lines, class labels in the middle of each group.
    std::vector<tick> borders;
    for (std::size_t c = 1; c < n_cls; ++c) borders.push_back({static_cast<double>(c), ""});
    draw_axes(s, p, borders, log_ticks(p.y_lo, p.y_hi),
              std::string(ber ? "bit errors" : "known-bit errors (of 192 per packet)") + " per " + unit,
              "share of " + unit + "s");
    for (const auto& t : xt) text(s, p.px(t.value), p.bottom() + 13, "middle", t.label);

    const double group = p.width / static_cast<double>(n_cls);
    const double bar = group * 0.8 / static_cast<double>(d.streams);
    for (std::size_t c = 0; c < n_cls; ++c) {
        for (std::size_t r = 0; r < d.streams; ++r) {
            const auto q = d.ranking[r];
            const auto& ps = d.paths[q];
            if (ps.classified_rows == 0 || ps.error_rows[c] == 0) continue;
            const double v = static_cast<double>(ps.error_rows[c]) / static_cast<double>(ps.classified_rows);
            const double x0 = p.left + group * (static_cast<double>(c) + 0.1) + bar * static_cast<double>(r);
            const double y0 = p.py(v);
            std::string attrs = "fill=\"" + std::string(path_colors[q]) + "\"";
            if (q == 0) attrs += " fill-opacity=\"0.6\"";
            rect(s, x0, y0, bar * 0.92, p.bottom() - y0, attrs);
        }
    }
    std::array<std::size_t, max_streams> ranks{};
    for (std::size_t q = 0; q < d.streams; ++q) ranks[q] = d.paths[q].rank;
    legend(s, p.left, 16, std::vector<std::size_t>(d.ranking.begin(), d.ranking.end()), &ranks);
    s += "</svg>\n";
    h += s;
    h += "<figcaption class=\"read\"><b>How to read this.</b> For each path (bars in ranking order, left to right "
         "within each group), the share of " +
         unit + "s that had 0 errors, 1 error, 2 to 3, 4 to 7, and so on (the classes double). The scale is "
         "logarithmic. A good path has a tall bar at 0 and bars that fall off quickly to the right; a path whose bars "
         "reach far to the right loses whole packets at times, even if its overall BER looks fine. ";
    if (ber) {
        h += "Only " + unit + "s with the PN checker locked are counted. ";
    } else {
        h += "Without a PN pattern, the errors are those among the 192 known preamble and ASM bits of every packet. ";
    }
    if (per_row) {
        h += "The file is decimated: a row stands for up to " + format_count(d.max_row_packets) +
             " packets and its errors are their sum, so this is the distribution per row, not per packet. ";
    }
    h += "</figcaption>\n</figure>\n";
}

void estimates_figure(std::string& h, const report_data& d)
{
    h += "<h2>Figure 3: CFO, estimated Eb/N0 and delay spread over time</h2>\n<figure>\n";
    const double panel_h = 150, gap = 28, top0 = 14;
    const double height = top0 + 3 * panel_h + 2 * gap + 45;
    std::string s;
    open_svg(s, height, "CFO, estimated Eb/N0 and delay spread over time");

    const auto n = d.bins.size();
    const double span = static_cast<double>(n) * d.bin_width_s;
    const auto ta = choose_time_axis(span, d);
    std::vector<double> x(n);
    for (std::size_t i = 0; i < n; ++i) {
        x[i] = (d.bin_start_s + (static_cast<double>(i) + 0.5) * d.bin_width_s) / ta.scale;
    }
    struct row {
        const estimate_stats time_bin::*field;
        std::string title;
        std::string color;
    };
    double cfo_max = 0;
    for (const auto& b : d.bins) {
        if (b.cfo_hz.n > 0) cfo_max = std::max({cfo_max, std::abs(b.cfo_hz.min), std::abs(b.cfo_hz.max)});
    }
    const bool khz = cfo_max >= 1000;
    const std::array<row, 3> rows{{{&time_bin::cfo_hz, khz ? "CFO (kHz)" : "CFO (Hz)", "#0072B2"},
                                   {&time_bin::ebn0_db, "Eb/N0 (dB)", "#009E73"},
                                   {&time_bin::delay_spread_ns, "delay spread (ns)", "#CC79A7"}}};
    for (std::size_t k = 0; k < rows.size(); ++k) {
        const double scale = k == 0 && khz ? 1e-3 : 1.0;
        std::vector<double> mean(n), lo(n), hi(n);
        double vmin = std::numeric_limits<double>::infinity(), vmax = -vmin;
        for (std::size_t i = 0; i < n; ++i) {
            const auto& e = d.bins[i].*(rows[k].field);
            if (e.n == 0) {
                mean[i] = lo[i] = hi[i] = nan;
                continue;
            }
            mean[i] = e.mean() * scale;
            lo[i] = e.min * scale;
            hi[i] = e.max * scale;
            vmin = std::min(vmin, lo[i]);
            vmax = std::max(vmax, hi[i]);
        }
        const auto [ylo, yhi] = linear_range(vmin, vmax);
        panel p;
        p.left = 70;
        p.top = top0 + static_cast<double>(k) * (panel_h + gap);
        p.width = svg_width - p.left - 20;
        p.height = panel_h;
        p.x_lo = d.bin_start_s / ta.scale;
        p.x_hi = (d.bin_start_s + span) / ta.scale;
        p.y_lo = ylo;
        p.y_hi = yhi;
        auto xt = ta.ticks(p.x_lo, p.x_hi, 10);
        if (k + 1 < rows.size()) {
            for (auto& t : xt) t.label.clear();  // one set of time labels, under the last panel
        }
        draw_axes(s, p, xt, linear_ticks(ylo, yhi, 4), k + 1 == rows.size() ? ta.title : "", rows[k].title);
        draw_marks(s, p, d, ta);
        if (k + 1 == rows.size()) marks_legend(s, p.right(), p.bottom() + 30, d);
        band(s, p, x, lo, hi, rows[k].color);
        series(s, p, x, mean, rows[k].color, "", 1.4);
    }
    s += "</svg>\n";
    h += s;
    h += "<figcaption class=\"read\"><b>How to read this.</b> The receiver's own estimates, the same for all paths. "
         "The line is the mean over the packets of each " +
         format_width(d.bin_width_s) +
         " bin, the shaded band their minimum to maximum. <i>CFO</i> is the carrier frequency offset (Doppler and "
         "oscillator drift); fast swings or a band that widens suddenly point to dynamics the loops must follow. "
         "<i>Eb/N0</i> is the estimated signal-to-noise ratio per bit; BER rises steeply as it falls, so compare dips "
         "here with spikes in figure 1: a BER spike without an Eb/N0 dip is the channel's shape (multipath), not "
         "its strength. <i>Delay spread</i> is the RMS spread of the channel impulse response: the larger it is, the "
         "more the equalizers have to undo, and the more their results differ.";
    if (d.decimated_rows > 0) h += " With decimation, the estimates are those of one packet per row.";
    if (!d.marks.empty()) h += marks_caption(d);
    h += "</figcaption>\n</figure>\n";
}

void cir_panel(std::string& s, const panel& p, const channel_record& r, double tap_ns)
{
    const double x0 = static_cast<double>(r.tap_offset) * tap_ns;
    for (std::size_t k = 0; k < r.taps.size(); ++k) {
        const double delay = x0 + static_cast<double>(k) * tap_ns;
        const double mag = std::abs(r.taps[k]);
        const bool main_tap = static_cast<std::int64_t>(k) + r.tap_offset == 0;
        const std::string color = main_tap ? "#D55E00" : "#0072B2";
        const double px = p.px(delay);
        line(s, px, p.py(0), px, p.py(mag), "stroke=\"" + color + "\" stroke-width=\"2\"");
        s += "<circle cx=\"";
        coord(s, px);
        s += "\" cy=\"";
        coord(s, p.py(mag));
        s += "\" r=\"2.5\" fill=\"" + color + "\"/>\n";
    }
}

void cir_figure(std::string& h, const report_data& d, const page_inputs& in)
{
    h += "<h2>Figure 4: channel impulse response at the best and worst moments</h2>\n";
    const auto best_path = d.ranking[0];
    const std::string w = format_width(d.options.window_s);
    if (!in.channel) {
        h += "<p class=\"warn\">No channel file: " + html_escape(in.no_channel_reason) +
             ". Enable the channel records in paqd (<code>records:</code> section) to see the channel impulse "
             "response at the best and worst moments.</p>\n";
        return;
    }
    const auto& ch = *in.channel;
    if (!d.best_window || !d.worst_window) {
        h += "<p class=\"warn\">The best path (" + name_of(best_path) + ") has no " + w +
             " window with enough measured data to pick a best and a worst moment.</p>\n";
        return;
    }
    if (!ch.best || !ch.worst) {
        h += "<p class=\"warn\">The channel file <code>" + html_escape(ch.path.string()) + "</code> has no rows.</p>\n";
        return;
    }
    const double tap_ns = 1e9 / in.sample_rate_hz;
    h += "<figure>\n";
    const double height = 330;
    std::string s;
    open_svg(s, height, "channel impulse response at the best and worst moments");
    double hmax = 0, xlo = 0, xhi = 0;
    bool first = true;
    for (const auto* r : {&*ch.best, &*ch.worst}) {
        for (const auto& t : r->taps) hmax = std::max(hmax, std::abs(t));
        const double a = static_cast<double>(r->tap_offset) * tap_ns;
        const double b = a + static_cast<double>(r->taps.size() - 1) * tap_ns;
        xlo = first ? a : std::min(xlo, a);
        xhi = first ? b : std::max(xhi, b);
        first = false;
    }
    if (!(hmax > 0)) hmax = 1;
    const std::array<std::pair<const char*, std::size_t>, 2> which{{{"best", *d.best_window}, {"worst", *d.worst_window}}};
    const std::array<const channel_record*, 2> recs{&*ch.best, &*ch.worst};
    const double pw = (svg_width - 70 - 20 - 50) / 2;
    for (std::size_t k = 0; k < 2; ++k) {
        panel p;
        p.left = 70 + static_cast<double>(k) * (pw + 50);
        p.top = 52;
        p.width = pw;
        p.height = height - p.top - 45;
        p.x_lo = xlo - tap_ns;
        p.x_hi = xhi + tap_ns;
        p.y_lo = 0;
        p.y_hi = hmax * 1.08;
        const auto& win = d.windows[which[k].second];
        const auto& ps = win.bin.paths[best_path];
        draw_axes(s, p, linear_ticks(p.x_lo, p.x_hi, 6), linear_ticks(0, p.y_hi, 4), "delay relative to the main path (ns)",
                  k == 0 ? "|h|" : "");
        text(s, p.left, 14, "start",
             std::string("<tspan font-weight=\"600\">") + (k == 0 ? "Best" : "Worst") + " moment</tspan>: " +
                 printf_string("%.3f", win.start_s) + " to " + printf_string("%.3f", win.start_s + d.options.window_s) +
                 " s, " + name_of(best_path) + " " + (d.ber_mode ? "BER " : "BEP ") + format_rate(d.value(ps)));
        text(s, p.left, 29, "start",
             "channel row at " + printf_string("%.3f", recs[k]->time_s) + " s (packet " +
                 std::to_string(recs[k]->packet) + "), mean Eb/N0 " + format_sig(win.bin.ebn0_db.mean()) + " dB");
        text(s, p.left, 44, "start",
             "delay spread " + format_sig(win.bin.delay_spread_ns.mean()) + " ns (window mean)");
        cir_panel(s, p, *recs[k], tap_ns);
    }
    s += "</svg>\n";
    h += s;
    std::string far;
    for (std::size_t k = 0; k < 2; ++k) {
        const auto& win = d.windows[which[k].second];
        const double centre = win.start_s + d.options.window_s / 2;
        const double dist = std::abs(recs[k]->time_s - centre);
        if (dist > d.options.window_s) {
            far += std::string(" The channel row for the ") + which[k].first + " moment is " + format_sig(dist) +
                   " s away from it (the channel file is sparse there).";
        }
    }
    if (!far.empty()) h += "<p class=\"warn\">" + far + "</p>\n";
    h += "<figcaption class=\"read\"><b>How to read this.</b> The magnitude of each channel tap, one tap every " +
         format_sig(tap_ns) +
         " ns, from the channel estimate nearest in time to the " + w + " windows where the best path (" +
         name_of(best_path) + ") did best and worst. The orange stem is the main path; blue stems before and after it are "
         "echoes (multipath, e.g. ground reflections). A clean channel is one tall stem; strong echoes far from the main "
         "path, or a main path no taller than its echoes, are what makes equalization hard, and are the usual reason a "
         "worst moment is worst. If both moments look alike, the bad moment was caused by something else, such as "
         "low Eb/N0 (figure 3).</figcaption>\n</figure>\n";
}

}  // namespace

std::string format_count(std::uint64_t n)
{
    std::string digits = std::to_string(n);
    std::string out;
    const std::size_t lead = digits.size() % 3 == 0 ? 3 : digits.size() % 3;
    out += digits.substr(0, lead);
    for (std::size_t i = lead; i < digits.size(); i += 3) out += "&#8239;" + digits.substr(i, 3);
    return out;
}

std::string format_utc_time(std::int64_t ns, int decimals)
{
    constexpr std::int64_t ns_per_s = 1'000'000'000;
    std::int64_t s = ns / ns_per_s, frac = ns % ns_per_s;
    if (frac < 0) {
        frac += ns_per_s;
        --s;
    }
    std::int64_t day_s = s % 86400;
    if (day_s < 0) day_s += 86400;
    std::string out = printf_string("%02lld:%02lld:%02lld", static_cast<long long>(day_s / 3600),
                                    static_cast<long long>(day_s / 60 % 60), static_cast<long long>(day_s % 60));
    if (decimals > 0) {
        const int d = std::min(decimals, 9);
        std::int64_t div = 1;
        for (int i = d; i < 9; ++i) div *= 10;
        out += printf_string(".%0*lld", d, static_cast<long long>(frac / div));
    }
    return out;
}

std::string format_utc_datetime(std::int64_t ns)
{
    constexpr std::int64_t ns_per_day = 86400LL * 1'000'000'000;
    std::int64_t days = ns / ns_per_day;
    if (ns % ns_per_day < 0) --days;
    const auto [y, m, d] = io::civil_from_days(days);
    return printf_string("%04lld-%02lld-%02lld ", static_cast<long long>(y), static_cast<long long>(m),
                         static_cast<long long>(d)) +
           format_utc_time(ns, 3) + " UTC";
}

std::string format_rate(double x)
{
    if (std::isnan(x)) return "n/a";
    if (x == 0) return "0";
    if (x >= 0.01) return printf_string("%.3g", x);
    return tidy_exponent(printf_string("%.2e", x));
}

std::string html_escape(std::string_view text)
{
    std::string out;
    out.reserve(text.size());
    for (const char c : text) {
        switch (c) {
        case '&': out += "&amp;"; break;
        case '<': out += "&lt;"; break;
        case '>': out += "&gt;"; break;
        case '"': out += "&quot;"; break;
        case '\'': out += "&#39;"; break;
        default: out += c;
        }
    }
    return out;
}

std::vector<double> snapshot_times(const report_data& d)
{
    std::vector<double> t;
    for (const auto& w : {d.best_window, d.worst_window}) {
        if (w) t.push_back(d.windows[*w].start_s + d.options.window_s / 2);
    }
    return t;
}

std::string render_html(const report_data& d, const page_inputs& in)
{
    std::string h;
    h.reserve(1 << 18);
    const std::string title = in.title.empty() ? "Equalizer comparison" : in.title;
    h += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
    h += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
    h += "<title>" + html_escape(title) + " - paq-report</title>\n<style>\n";
    h += css;
    h += "</style>\n</head>\n<body>\n";
    header(h, d, in);
    summary(h, d);
    each_channel_table(h, d, in);
    ber_figure(h, d);
    errors_figure(h, d);
    estimates_figure(h, d);
    cir_figure(h, d, in);
    h += "</body>\n</html>\n";
    return h;
}

}  // namespace paq::report
