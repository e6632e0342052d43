#include "config/receiver_yaml.hpp"

#include "config/schema.hpp"
#include "config/schema_support.hpp"
#include "config/yaml_support.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <system_error>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace paq::config {

namespace detail {

namespace {

/// A range as receiver_config::validate() checks it (dsp::receiver_ranges).
numeric_range range_of(const dsp::setting_range& s)
{
    numeric_range r = between(s.lo, s.hi);
    r.lo_open = s.lo_open;
    r.hi_open = s.hi_open;
    r.power_of_two = s.power_of_two;
    return r;
}

}  // namespace

// The receiver section's table. A new field of receiver_config needs one entry here (the
// round-trip test catches a forgotten one: it sets every field to a non-default value).
// Each range is the one receiver_config::validate() checks, from dsp::receiver_ranges.
const section<dsp::receiver_config>& receiver_schema()
{
    namespace rr = dsp::receiver_ranges;
    using C = dsp::receiver_config;
    static const section<C> table = [] {
        section<C> s;
        s.fields = {
            number<C>("batch_samples", at(&C::batch_samples), range_of(rr::batch_samples),
                      {"samples", "new samples per batch window (1.9065 s at 20.625 MS/s)"}),
            number<C>("detection_threshold", at(&C::detection_threshold), range_of(rr::detection_threshold),
                      {"", "normalized preamble metric above which a peak is a packet"}),
            number<C>("fft_size", at(&C::fft_size), range_of(rr::fft_size),
                      {"samples", "FFT length for per-packet filtering"}),
            number<C>("cma_mu", at(&C::cma_mu), range_of(rr::cma_mu),
                      {"", "CMA step size (the BER depends on `cma_mu` × `cma_iterations`: docs/SIGNAL-CHAIN.md)"}),
            number<C>("cma_iterations", at(&C::cma_iterations), range_of(rr::cma_iterations), {"", "CMA iterations from the MMSE start"}),
            number<C>("pll_bn_t", at(&C::pll_bn_t), range_of(rr::pll_bn_t), {"", "PLL noise bandwidth × update period"}),
            number<C>("pll_acquisition_bn_t", at(&C::pll_acquisition_bn_t), range_of(rr::pll_acquisition_bn_t),
                      {"", "PLL bandwidth over the 192 known bits"}),
            number<C>("pll_damping", at(&C::pll_damping), range_of(rr::pll_damping), {"", "PLL damping"}),
            number<C>("cpu_threads", at(&C::cpu_threads), range_of(rr::cpu_threads),
                      {"threads", "threads per CPU backend (0 = all cores)"}),
            number<C>("bit_rate_hz", at(&C::bit_rate_hz), range_of(rr::bit_rate_hz),
                      {"bit/s",
                       "the link's bit rate. The input's sample rate comes from the source (`sample_rate_hz` of a "
                       "network source; for VITA-49 checked against the sender's IF Context packets, or taken from "
                       "them with `sample_rate_hz: 0`; SigMF `core:sample_rate`, the iio device); any rate of 2 .. "
                       "6.4 samples per bit is resampled to 2 samples per bit (docs/SIGNAL-CHAIN.md, \"Resampling to "
                       "2 samples per bit\")"}),
            number<C>("channels", at(&C::channels), range_of(rr::channels),
                      {"", "receive channels of the link (two polarizations or antennas, one sample clock): 2 "
                           "combines both on every path (docs/SIGNAL-CHAIN.md, \"Two receive channels\"); the "
                           "source must deliver as many (`source.file.second_channel`, `channels: 2` of tcp, udp and iio, "
                           "`source.vita49.second_stream_id`); both backends (combining select: the CPU backend)"}),
            choice<C>("combining", at(&C::combining), choices(dsp::combining_names),
                      {"", "with `channels: 2`: `joint`, every path combines both channels (docs/SIGNAL-CHAIN.md, "
                           "\"Two receive channels\"); `select`, selection diversity: every path on the packet's "
                           "better channel alone (the smaller MMSE error: multipath and noise weighed), as one "
                           "channel would receive it (the records' `best_channel` names it). Ignored with one "
                           "channel"}),
            number<C>("clock_tracking", at(&C::clock_tracking), one_of({{0, "off"}, {1, "on"}}),
                      {"", "estimate the transmitter's bit clock against the sample clock from the packet starts "
                           "and re-time each packet (SIGNAL-CHAIN.md, \"Clock offset\")"}),
            number<C>("clock_min_ppm", at(&C::clock_min_ppm), range_of(rr::clock_min_ppm),
                      {"ppm", "packets whose estimated offset is below this are not re-timed"}),
            number<C>("front_end_correction", at(&C::front_end_correction),
                      one_of({{1, "on"}, {0, "off"}, {-1, "auto"}}),
                      {"", "remove each packet's DC offset and IQ imbalance, estimated from its own samples, where "
                           "they are above the gate that leaves clean packets as they are (SIGNAL-CHAIN.md, "
                           "\"Front-end correction\"); on for every source and for replay, so that a recording "
                           "replays as it was received; auto is the same as on. paqd logs the effective value at "
                           "start; `paqd replay --front-end-correction on|off` overrides it"}),
            number<C>("phase_smoother", at(&C::phase_smoother),
                      one_of({{-1, "auto"}, {0, "the PLL alone"}, {1, "the phase smoother on every packet"}}),
                      {"", "the carrier phase the bits are decided at (SIGNAL-CHAIN.md, \"Phase noise\"). The phase "
                           "smoother is a data-aided Kalman smoother over each packet that chooses its bandwidth from the "
                           "packet itself, for links with oscillator phase noise (AWGN 11 dB, over five 2 s recordings: "
                           "1 kHz Wiener 1.1-1.95x the clean BER instead of 190-240x with cycle slips, 300 Hz 0.90-1.24x; "
                           "about 10% fewer errors without phase noise). Where it decides a packet, the packet is "
                           "derotated before the equalizers by the phase of the unequalized path where that path decided "
                           "at least as well as MMSE (every equalized path is then made again; flag 128, "
                           "`packets_unequalized_phase`), else by the MMSE path's (ZF and FDE2 made again) "
                           "(SIGNAL-CHAIN.md, \"Derotating before the equalizers\"). "
                           "-1 (auto): the PLL decides every packet and measures how far its phase wanders; a packet "
                           "whose phase wanders more than thermal noise explains is decided again by the smoother and "
                           "flagged (flag 64; `packets_phase_smoothed`). 1: the smoother on every packet (`pll_bn_t` "
                           "is then not used), which costs the GPU backend about three times the time per batch of the "
                           "PLL alone (PERFORMANCE.md)"}),
            choice<C>("detector", at(&C::detector),
                      choices(dsp::detector_names),
                      {"", "how the bits are decided (SIGNAL-CHAIN.md, \"Trellis detection\"): `sxs`, the symbol-by-symbol "
                           "OQPSK detector; `trellis`, sequence detection (max-log BCJR over 16 states on a table of the "
                           "signal over five bits, fitted per packet, then again on its own first decisions), 2-2.5x fewer "
                           "errors on AWGN, 3-16x fewer over multipath. Both backends (the GPU's bits are the CPU's "
                           "but where two paths' metrics are within rounding); its carrier phase is the PLL's, or the phase "
                           "smoother's where it decided the packet; `both`, every path decided both ways: twelve "
                           "streams, `none` .. `fde2` symbol by symbol and `none_trellis` .. `fde2_trellis` (records, "
                           "summaries, metrics, bitstreams 6 .. 11), for comparing the detectors side by side. On "
                           "the GPU backend a default batch takes about twice as long with `trellis` or `both` as with "
                           "`sxs` (23.9 and 25.3 ms against 12.3-12.8 ms from ci16 samples on an H200, PERFORMANCE.md)"}),
            choice<C>("fec", at(&C::fec), choices(dsp::fec_names),
                      {"", "the LDPC code the link's data fields carry (BITSTREAM.md, \"Coded data fields\"): `none`, or "
                           "one of the six CCSDS AR4JA codes of IRIG 106 chapter 2: those whose codewords fit the "
                           "6144-bit data field whole (`ar4ja-1024-1/2`: 3 codewords, `ar4ja-1024-2/3`: 4, "
                           "`ar4ja-4096-2/3`: 1), and the other three sent as the continuous stream of sync-marked, "
                           "randomized codewords across the data fields. Every output stream's data field is then "
                           "decoded (layered normalized min-sum) from its soft decisions, and the decoded information "
                           "bits are counted against the PN pattern beside the channel bits (summaries, metrics "
                           "`fec_*`). Both backends decode every code, with the same layered schedule: the GPU every "
                           "codeword of a batch in one launch (publisher.decoded_destinations publishes the decoded bits)"}),
            number<C>("fec_iterations", at(&C::fec_iterations), range_of(rr::fec_iterations),
                      {"", "the LDPC decoder's most iterations per codeword (it stops as soon as every check holds)"}),
        };
        // Fields that failed to parse keep their (valid) defaults, so this reports only what
        // the schema cannot see on its own (today nothing: the ranges are validate()'s).
        s.check = [](const C& c, const std::string& path, const YAML::Mark& mark, parse_context& ctx) {
            ctx.report(path, c.validate(), mark);
        };
        return s;
    }();
    return table;
}

}  // namespace detail

namespace {
constexpr std::string_view receiver_section = "receiver";
}  // namespace

config_error::config_error(std::vector<std::string> messages)
    : std::runtime_error(detail::join_lines(messages)),
      messages_(std::make_shared<const std::vector<std::string>>(std::move(messages)))
{
}

dsp::receiver_config parse_receiver_config(std::string_view yaml_text, std::string_view source_name)
{
    using namespace detail;
    const YAML::Node root = load_document(yaml_text, source_name);
    dsp::receiver_config config;
    if (root.IsNull()) {
        return config;  // empty file or only comments: defaults
    }
    error_list errors(source_name);
    if (!root.IsMap()) {
        errors.add(root.Mark(), "the top level must be a mapping of sections (such as 'receiver:'), got a " +
                                    std::string(node_kind(root)));
        errors.throw_if_any();
    }
    parse_context ctx{errors, {}, {}};
    const std::string section(receiver_section);
    // The service's sections are read by its parser (the service file works here as is); a
    // name that is none of them is a mistake, never silently skipped: a misspelled
    // 'receiver' would otherwise run with the defaults.
    std::vector<std::string> top;
    for (const auto& s : schema_sections()) {
        if (s.find('.') == std::string::npos) top.push_back(s);
    }
    for (const auto& entry : root) {
        if (!entry.first.IsScalar()) {
            errors.add(entry.first.Mark(), std::string("keys at the top level must be section names, got a ") + node_kind(entry.first));
            continue;
        }
        const std::string& name = entry.first.Scalar();
        if (name != receiver_section) {
            if (std::find(top.begin(), top.end(), name) == top.end()) {
                std::string known, hint;
                for (const auto& t : top) known += (known.empty() ? "" : ", ") + t;
                if (edit_distance(name, receiver_section) <= 3) hint = "; did you mean 'receiver'?";
                errors.add(entry.first.Mark(), "unknown section '" + name + "' at the top level (known: " + known +
                                                   "; only 'receiver' is read here)" + hint);
            }
            continue;
        }
        if (ctx.has(section)) {
            errors.add(entry.first.Mark(), "duplicate section 'receiver' (first on line " +
                                               std::to_string(ctx.marks[section].line + 1) + ")");
            continue;
        }
        ctx.marks[section] = entry.first.Mark();
        receiver_schema().parse(entry.second, entry.first.Mark(), section, config, ctx);
    }
    errors.throw_if_any();
    return config;
}

std::string read_config_file(const std::filesystem::path& file)
{
    const std::string name = file.string();
    const auto fail = [&name](const std::string& reason) {
        throw config_error({name + ": cannot read configuration file: " + reason});
    };

    int fd = -1;
    do {
        fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
    } while (fd < 0 && errno == EINTR);
    if (fd < 0) {
        fail(std::generic_category().message(errno));
    }
    struct fd_closer {
        int fd;
        ~fd_closer() { ::close(fd); }  // read-only: nothing to lose on a failed close
    } const closer{fd};
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
        fail(std::generic_category().message(errno));
    }
    // A file or a pipe (a FIFO, process substitution, /dev/stdin fed by a pipe). A device
    // is no configuration: /dev/zero would be read forever, a tty waits for typing.
    if (S_ISDIR(st.st_mode)) {
        fail("it is a directory");
    }
    if (!S_ISREG(st.st_mode) && !S_ISFIFO(st.st_mode)) {
        const char* kind = S_ISCHR(st.st_mode)    ? "character device"
                           : S_ISBLK(st.st_mode)  ? "block device"
                           : S_ISSOCK(st.st_mode) ? "socket"
                                                  : "special file";
        fail(std::string("it is a ") + kind + ", not a file or a pipe");
    }
    const auto too_large = [&](const std::string& size) {
        fail("it " + size + ", more than the " + std::to_string(detail::max_config_bytes) + "-byte limit");
    };
    if (S_ISREG(st.st_mode) && static_cast<std::uint64_t>(st.st_size) > detail::max_config_bytes) {
        too_large("is " + std::to_string(st.st_size) + " bytes");
    }
    // At most limit + 1 bytes are read, whatever the file does meanwhile (grows, is a pipe
    // that never ends): one byte over is enough to know the text is too large.
    std::string text(detail::max_config_bytes + 1, '\0');
    std::size_t done = 0;
    while (done < text.size()) {
        const ssize_t got = ::read(fd, text.data() + done, text.size() - done);
        if (got < 0) {
            if (errno == EINTR) {
                continue;
            }
            fail("read error: " + std::generic_category().message(errno));
        }
        if (got == 0) {
            break;
        }
        done += static_cast<std::size_t>(got);
    }
    if (done > detail::max_config_bytes) {
        too_large("has more bytes");  // a pipe, or a file that grew while being read
    }
    text.resize(done);
    return text;
}

dsp::receiver_config load_receiver_config(const std::filesystem::path& file)
{
    return parse_receiver_config(read_config_file(file), file.string());
}

std::string to_yaml(const dsp::receiver_config& config)
{
    std::string out(receiver_section);
    out += ":\n";
    detail::receiver_schema().emit(config, 2, out);
    return out;
}

}  // namespace paq::config
