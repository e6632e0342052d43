#include "config/daemon_config.hpp"

#include "config/receiver_yaml.hpp"
#include "config/schema_support.hpp"
#include "io/sample_format.hpp"

#include <algorithm>
#include <array>
#include <stdexcept>
#include <string>
#include <utility>

namespace paq::config {

using namespace detail;

namespace {

const choice_list<io::sample_format> sample_formats = choices(io::sample_format_names);

/// A port number; a TCP source in connect mode needs 1 .. 65535 (its own check).
const numeric_range port_range = between(0, 65535);
const numeric_range rcvbuf_range = between(0, 1 << 30);
const numeric_range ci16_scale_range = between(io::min_ci16_scale, io::max_ci16_scale);

/// A list of sender addresses / CIDR prefixes (io::check_allow_list), each error at its own
/// line. Absent: every sender. An empty list is an error: it would refuse every sender,
/// which is never what a configuration means. Left out of to_yaml when empty.
template <typename S, typename Get>
field<S> allow_list(Get get, std::string allowed, std::string doc)
{
    return leaf<S>(
        make_info("allow", "list", std::move(allowed), {"", std::move(doc), "unset (any sender)"}),
        [get](const YAML::Node& v, const YAML::Mark& km, const std::string& path, S& s, parse_context& ctx) {
            const YAML::Mark mark = v.Mark().is_null() ? km : v.Mark();
            if (!v.IsSequence()) {
                ctx.errors.add(mark, path + ": expected a list of addresses or CIDR prefixes such as "
                                            "[192.168.10.0/24, 10.0.0.5, \"::1/128\"], got " + describe_value(v));
                return;
            }
            if (v.size() == 0) {
                ctx.errors.add(mark, path + ": an empty list would refuse every sender (leave the key out to accept any)");
                return;
            }
            std::vector<std::string> out;
            bool ok = true;
            for (std::size_t i = 0; i < v.size(); ++i) {
                const YAML::Node item = v[i];
                const std::string item_path = path + "[" + std::to_string(i) + "]";
                if (!item.IsScalar()) {
                    ctx.errors.add(item.Mark(), item_path + ": expected an address or CIDR prefix, got " + describe_value(item));
                    ok = false;
                    continue;
                }
                if (const std::string e = io::allow_entry_error(item.Scalar()); !e.empty()) {
                    ctx.errors.add(item.Mark(), item_path + " = " + e);
                    ok = false;
                }
                out.push_back(item.Scalar());
            }
            if (ok) get(s) = std::move(out);
        },
        [get](const S& s) -> std::optional<std::string> {
            const auto& allow = get(s);
            if (allow.empty()) return std::nullopt;
            std::string out = "[";
            for (std::size_t i = 0; i < allow.size(); ++i) out += (i ? ", " : "") + yaml_quoted(allow[i]);
            return out + "]";
        });
}

const section<io::file_source_config>& file_schema()
{
    using C = io::file_source_config;
    static const section<C> table = [] {
        section<C> s;
        s.fields = {
            path<C>("path", at(&C::path),
                    {"", "SigMF (`.sigmf-meta`, `.sigmf-data`, base name, or a `.sigmf` archive) or raw file. For SigMF "
                         "the metadata is authoritative and `format`/`sample_rate_hz`/`ci16_scale` are ignored. The "
                         "`.sigmf-meta` must be a regular file of at most 16 MiB with JSON nesting at most 64 deep, "
                         "and its `core:sample_rate` (like a raw file's rate) within 1 kHz .. 1 GHz; otherwise paqd "
                         "does not start",
                     "unset; required when `type: file`"}),
            optional_choice<C>("format", at(&C::raw_format), sample_formats, {"", "raw files only (required for raw)"}),
            optional_number<C>("sample_rate_hz", at(&C::raw_sample_rate_hz), between(1e3, 1e9),
                               {"Hz", "raw files only (required for raw)"}),
            number<C>("ci16_scale", at(&C::raw_ci16_scale), ci16_scale_range, {"", "raw ci16 counts per unit amplitude"}),
            optional_number<C>("channel", at(&C::channel), between(1, io::max_channels),
                               {"", "the channel received of a recording that interleaves several (SigMF `core:num_channels`, "
                                    "or `channels` of a raw file); required for such a recording",
                                "unset"}),
            optional_number<C>("second_channel", at(&C::second_channel), between(1, io::max_channels),
                               {"", "with `receiver.channels: 2`: the other channel received, beside `channel` (both "
                                    "delivered together, decoded to cf32)",
                                "unset"}),
            number<C>("channels", at(&C::raw_channels), between(1, io::max_channels),
                      {"", "raw files only: channels interleaved, a sample of each per sample time"}),
            boolean<C>("paced", at(&C::paced),
                       {"", "true: deliver at the recorded rate × `rate_factor`; false: as fast as the ring takes samples"}),
            number<C>("rate_factor", at(&C::rate_factor), between(1e-3, 1000), {"", "pacing multiplier"}),
            boolean<C>("loop", at(&C::loop), {"", "start again at the end; each seam is a `discontinuity` gap"}),
            number<C>("chunk_samples", at(&C::chunk_samples), between(1, 1 << 24), {"samples", "samples per delivery (paced; unpaced, up to 4194304 or this, whichever is larger)"}),
        };
        return s;
    }();
    return table;
}

const section<io::tcp_source_config>& tcp_schema()
{
    using C = io::tcp_source_config;
    static const section<C> table = [] {
        section<C> s;
        s.fields = {
            choice<C>("mode", at(&C::mode), choices(io::tcp_mode_names),
                      {"", "dial out to the sender, or wait for it"}),
            text<C>("host", at(&C::host), "non-empty; listen: a numeric address",
                    {"", "connect: peer name or address; listen: local address to bind"}),
            number<C>("port", at(&C::port), port_range,
                      {"", "connect: 1 .. 65535; listen: 0 is an ephemeral port, logged"}),
            choice<C>("format", at(&C::format), sample_formats, {"", "wire format"}),
            number<C>("ci16_scale", at(&C::ci16_scale), ci16_scale_range, {"", "ci16 counts per unit amplitude"}),
            number<C>("sample_rate_hz", at(&C::sample_rate_hz), above(0, 1e9), {"Hz", "the sender's rate (TCP carries none)"}),
            number<C>("channels", at(&C::channels), between(1, 2),
                      {"", "receive channels interleaved in the stream, a sample of each per sample time; 2 with "
                           "`receiver.channels: 2`"}),
            number<C>("rcvbuf_bytes", at(&C::rcvbuf_bytes), rcvbuf_range,
                      {"bytes", "SO_RCVBUF; 0 keeps the kernel default and autotuning"}),
            number<C>("retry_initial_s", at(&C::retry_initial_s), between(0.001, 60),
                      {"s", "connect: first wait before dialling again after a connection that brought no data; "
                            "doubles with each such connection or failed attempt; a connection that delivers data "
                            "resets it. Listen mode accepts the next client at once"}),
            number<C>("retry_max_s", at(&C::retry_max_s), between(0.001, 600),
                      {"s", "longest such wait; at least `retry_initial_s`"}),
            number<C>("idle_timeout_s", at(&C::idle_timeout_s), or_between(0, "off", 0.01, 3600),
                      {"s", "a connection that delivers nothing for this long is dropped and counted "
                            "(`tcp_idle_timeouts`): connect dials again, listen serves the next client (§3, \"TCP\")"}),
            boolean<C>("end_on_close", at(&C::end_on_close),
                       {"", "end the run (exit 0) at the first disconnect instead of reconnecting"}),
            allow_list<C>(at(&C::allow), "listen mode only: a non-empty list of addresses / CIDR prefixes",
                          "clients from other addresses are reset at once and counted (§3, \"Restricting senders\")"),
        };
        return s;
    }();
    return table;
}

const section<io::udp_source_config>& udp_schema()
{
    using C = io::udp_source_config;
    static const section<C> table = [] {
        section<C> s;
        s.fields = {
            text<C>("bind", at(&C::bind_address), "a numeric IPv4/IPv6 address", {"", "local address (errors call it `bind_address`)"}),
            number<C>("port", at(&C::port), port_range, {"", "0: an ephemeral port, logged"}),
            choice<C>("format", at(&C::format), sample_formats, {"", "wire format"}),
            number<C>("ci16_scale", at(&C::ci16_scale), ci16_scale_range, {"", "ci16 counts per unit amplitude"}),
            number<C>("sample_rate_hz", at(&C::sample_rate_hz), above(0, 1e9), {"Hz", "the sender's rate (raw UDP carries none)"}),
            number<C>("channels", at(&C::channels), between(1, 2),
                      {"", "receive channels interleaved in each datagram (whole sample times), a sample of each per "
                           "sample time; 2 with `receiver.channels: 2`"}),
            number<C>("rcvbuf_bytes", at(&C::rcvbuf_bytes), rcvbuf_range,
                      {"bytes", "SO_RCVBUF, capped by `net.core.rmem_max` (§7)"}),
            allow_list<C>(at(&C::allow), "a non-empty list of addresses / CIDR prefixes",
                          "datagrams from other senders are dropped and counted (§3, \"Restricting senders\")"),
            choice<C>("header", at(&C::header),
                      choices(io::udp_header_names),
                      {"", "what precedes the samples: GNU Radio UDP Sink's Header \"None\", \"Sequence Number\" "
                           "(8 bytes) or \"Seq + Size\" (16 bytes); with a header lost datagrams are counted "
                           "(§3, \"GNU Radio\")"}),
        };
        return s;
    }();
    return table;
}

const section<io::vita49_source_config>& vita49_schema()
{
    using C = io::vita49_source_config;
    static const section<C> table = [] {
        section<C> s;
        auto stream_change =
            choice<C>("stream_change", at(&C::stream_change),
                      choices(io::stream_change_policy_names),
                      {"", "without `stream_id`: take a new stream id once the current one is silent (follow), or "
                           "keep the first (stay). `follow` beside `stream_id` is an error (§3)"});
        // With a stream id the policy does not apply (and an explicit follow beside it is an error).
        stream_change.emit = [inner = stream_change.emit](const C& c, int indent, std::string& out) {
            if (!c.stream_id) inner(c, indent, out);
        };
        s.fields = {
            text<C>("bind", at(&C::bind_address), "a numeric IPv4/IPv6 address", {"", "local address (errors call it `bind_address`)"}),
            number<C>("port", at(&C::port), port_range, {"", "0: an ephemeral port, logged"}),
            optional_number<C>("stream_id", at(&C::stream_id), between(0, 4294967295.0),
                               {"", "accept only this stream id, always; unset: lock onto the first IF Data stream id seen"}),
            optional_number<C>("second_stream_id", at(&C::second_stream_id), between(0, 4294967295.0),
                               {"", "with `receiver.channels: 2`: the radio's second channel, beside `stream_id` (both "
                                    "set, different). The two streams' packets are paired by their timestamps (TSF "
                                    "sample count, or TSI with picoseconds) into sample times of both; a channel's "
                                    "lost packets drop the other's samples at those times (a lost-packets gap), a "
                                    "channel more than 100 ms behind the other or silent is logged by name and "
                                    "counted (`vita49_channel1_lag_events`, ...; the other's samples given up as a "
                                    "stall gap), packets without such a timestamp are dropped and counted "
                                    "(`vita49_untimed_packets`)"}),
            std::move(stream_change),
            number<C>("stream_timeout_ms", at(&C::stream_timeout_ms), between(1, 3'600'000),
                      {"ms", "follow: how long the current stream must be silent before another id is taken"}),
            number<C>("ci16_scale", at(&C::ci16_scale), ci16_scale_range, {"", "ci16 counts per unit amplitude"}),
            number<C>("sample_rate_hz", at(&C::sample_rate_hz), or_between(0, "from the sender", 1e3, 1e9),
                      {"Hz",
                       "the sender's rate; also used to make sample-count timestamps exact across integer seconds "
                       "and to turn picosecond timestamps into samples (§3). **0: from the sender's IF Context "
                       "packets**: at start paqd binds the port and waits up to `context_timeout_s` for the first IF "
                       "Context packet (of `stream_id`, when set; allow-list applied) whose CIF0 carries the sample "
                       "rate, logs `sample rate 30.72 MS/s from stream id 0x... IF Context packet`, and counts the IF "
                       "Data packets that came before it (`packets_before_rate`, `samples_before_rate`: not "
                       "delivered, their rate was not known); none within the timeout stops paqd with an error "
                       "naming the setting (exit 1, so systemd retries). With a rate set, an IF Context packet of "
                       "the received stream whose CIF0 carries a sample rate (bit 21) is checked against it: a rate "
                       "that differs by more than 1e-6 is logged as an error naming both rates (at most every 10 s) "
                       "and counted (`paqd_vita49_context_rate_mismatches_total`, `context_rate_mismatches` in the "
                       "JSON, with the last rate a context carried as `context_sample_rate_hz`); the receiver keeps "
                       "the configured rate (it cannot change the chain's rate while running)"}),
            number<C>("context_timeout_s", at(&C::context_timeout_s), between(0.1, 3600),
                      {"s", "with `sample_rate_hz: 0`: how long paqd waits at start for the sender's sample rate"}),
            number<C>("rcvbuf_bytes", at(&C::rcvbuf_bytes), rcvbuf_range, {"bytes", "as for udp"}),
            allow_list<C>(at(&C::allow), "a non-empty list of addresses / CIDR prefixes", "as for udp"),
        };
        s.check = [](const C& c, const std::string& path, const YAML::Mark& mark, parse_context& ctx) {
            if (ctx.has(path + ".stream_id") && ctx.has(path + ".stream_change") &&
                c.stream_change == io::stream_change_policy::follow) {
                ctx.errors.add(mark, path + ".stream_change: follow cannot be combined with stream_id (a configured "
                                            "stream id is the only one ever accepted; remove one of the two)");
            }
        };
        return s;
    }();
    return table;
}

const section<io::iio_config>& iio_schema()
{
    using C = io::iio_config;
    static const section<C> table = [] {
        section<C> s;
        s.fields = {
            text<C>("uri", at(&C::uri), "`ip:HOST[:PORT]`, `usb:[BUS.DEV.INTF]`, `local:`, `serial:PORT,BAUD`",
                    {"", "libiio context (default: a Pluto on its USB-Ethernet link)"}),
            text<C>("phy_device", at(&C::phy_device), "non-empty", {"", "control device"}),
            text<C>("rx_device", at(&C::rx_device), "non-empty", {"", "capture device (voltage0/voltage1 = RX1 I/Q)"}),
            number<C>("sample_rate_hz", at(&C::sample_rate_hz), between(2'083'333, 61'440'000),
                      {"Hz", "baseband rate; lower rates need the AD9361 FIR decimation, which paqd does not load"}),
            number<C>("lo_hz", at(&C::lo_hz), between(70e6, 6e9),
                      {"Hz", "RX LO (an AD9363 accepts only 325 MHz .. 3.8 GHz and refuses the rest when written)"}),
            number<C>("rf_bandwidth_hz", at(&C::rf_bandwidth_hz), between(200e3, 56e6), {"Hz", "RX analog filter bandwidth"}),
            choice<C>("gain_mode", at(&C::gain_mode),
                      choices(io::iio_gain_mode_names),
                      {"", "AGC mode"}),
            // The AD9361's manual gain range at the default LO (its gain table for 1.3 .. 4 GHz);
            // the phy narrows it further with the LO (up to 62 dB above 4 GHz) and refuses a
            // value outside when it is written, naming gain_db.
            number<C>("gain_db", at(&C::gain_db), between(-3, 71),
                      {"dB", "manual gain; written only when `gain_mode: manual` (the phy narrows it with the LO)"}),
            number<C>("buffer_samples", at(&C::buffer_samples), between(4096, 1 << 24),
                      {"samples", "samples per libiio refill (12.7 ms at 20.625 MS/s)"}),
            number<C>("reconnect_interval_s", at(&C::reconnect_interval_s), between(0.1, 60),
                      {"s", "first wait before reconnecting a lost radio; doubles per failure"}),
            number<C>("reconnect_max_interval_s", at(&C::reconnect_max_interval_s), between(0.1, 600),
                      {"s", "longest wait; at least `reconnect_interval_s`"}),
            number<C>("timeout_ms", at(&C::timeout_ms), between(100, 60'000),
                      {"ms", "libiio I/O timeout; longer than `buffer_samples / sample_rate_hz`"}),
            number<C>("scale", at(&C::scale), between(1e-6, 1e9),
                      {"", "samples are (I + jQ) / scale after sign extension from the device's bits"}),
            number<C>("channels", at(&C::channels), between(1, 2),
                      {"", "RX channels captured: 1 (RX1), or 2 (RX1 and RX2 of a 2R2T card, combined with "
                           "`receiver.channels: 2`; both channels' gain control set alike)"}),
        };
        return s;
    }();
    return table;
}

const section<io::zmq_source_config>& zmq_schema()
{
    using C = io::zmq_source_config;
    static const section<C> table = [] {
        section<C> s;
        s.fields = {
            text<C>("endpoint", at(&C::endpoint), "tcp://HOST:PORT, ipc://PATH or inproc://NAME",
                    {"", "where the sender's ZMQ sink is bound; paqd connects"}),
            choice<C>("pattern", at(&C::pattern),
                      choices(io::zmq_pattern_names),
                      {"", "sub for GNU Radio's ZMQ PUB Sink, pull for its ZMQ PUSH Sink"}),
            choice<C>("format", at(&C::format), sample_formats, {"", "wire format (GNU Radio's complex: cf32_le)"}),
            number<C>("ci16_scale", at(&C::ci16_scale), ci16_scale_range, {"", "ci16 counts per unit amplitude"}),
            number<C>("sample_rate_hz", at(&C::sample_rate_hz), above(0, 1e9), {"Hz", "the sender's rate (ZeroMQ carries none)"}),
            number<C>("high_water_mark", at(&C::high_water_mark), between(1, 1'000'000),
                      {"messages", "ZMQ_RCVHWM: SUB drops beyond it, silently without tags (§3, \"ZeroMQ\")"}),
            number<C>("max_message_bytes", at(&C::max_message_bytes), between(1024, 268'435'456),
                      {"bytes", "ZMQ_MAXMSGSIZE: a larger message drops the connection (paqd connects again)"}),
            number<C>("max_queue_mib", at(&C::max_queue_mib), between(1, 16384),
                      {"MiB", "the receive queue's bound: the high-water mark applied is at most this over "
                              "`max_message_bytes` messages (at least 1)"}),
            choice<C>("tags", at(&C::tags),
                      choices(io::zmq_tags_names),
                      {"", "the sink's Pass Tags: gnuradio reads its tag header and counts lost samples exactly"}),
            optional_text<C>("key", at(&C::key), "at most 255 bytes; unset: any",
                    {"", "the sink's Key: only messages with this key are taken (a SUB socket subscribes to it); "
                         "unset takes every message, keyed or not (§3, \"ZeroMQ\")"}),
        };
        return s;
    }();
    return table;
}

const section<source_config>& source_schema()
{
    using C = source_config;
    static const section<C> table = [] {
        section<C> s;
        s.fields = {
            choice<C>("type", at(&C::type),
                      choices(source_type_names),
                      {"", "which sub-section is used", "`file` (paqd.yaml: `vita49`)"}),
            number<C>("stall_timeout_s", at(&C::stall_timeout_s), between(0.05, 3600),
                      {"s", "no samples for this long: the segment is ended and a stall counted (§5)"}),
            subsection<C>("file", file_schema(), at(&C::file)),
            subsection<C>("tcp", tcp_schema(), at(&C::tcp)),
            subsection<C>("udp", udp_schema(), at(&C::udp)),
            subsection<C>("vita49", vita49_schema(), at(&C::vita49)),
            subsection<C>("iio", iio_schema(), at(&C::iio)),
            subsection<C>("zmq", zmq_schema(), at(&C::zmq)),
        };
        // The selected source's own checks: those that involve several keys (a TCP port 0 in
        // connect mode, retry_max_s below retry_initial_s, a buffer longer than the timeout,
        // an allow-list in connect mode) or the form of an address.
        s.check = [](const C& c, const std::string& path, const YAML::Mark& mark, parse_context& ctx) {
            const std::string sub = path + "." + std::string(to_string(c.type));
            switch (c.type) {
            case source_type::file:
                if (c.file.path.empty()) ctx.errors.add(mark, sub + ".path: must be set when source.type is file");
                if (c.file.second_channel && !c.file.channel) {
                    ctx.errors.add(mark, sub + ".second_channel: needs " + sub + ".channel, the first of the two channels received");
                } else if (c.file.second_channel && *c.file.second_channel == *c.file.channel) {
                    ctx.errors.add(mark, sub + ".second_channel = " + std::to_string(*c.file.second_channel) + ": must differ from " +
                                             sub + ".channel (two different channels are combined)");
                }
                break;
            case source_type::tcp: ctx.report(sub, c.tcp.validate(), mark); break;
            case source_type::udp: ctx.report(sub, c.udp.validate(), mark); break;
            case source_type::vita49: ctx.report(sub, c.vita49.validate(), mark); break;
            case source_type::iio: ctx.report(sub, c.iio.validate(), mark); break;
            case source_type::zmq: ctx.report(sub, c.zmq.validate(), mark); break;
            }
        };
        return s;
    }();
    return table;
}

const section<ring_config>& ring_schema()
{
    using C = ring_config;
    static const section<C> table = [] {
        section<C> s;
        s.fields = {
            number<C>("capacity_s", at(&C::capacity_s), between(0.1, 60),
                      {"s", "capacity in seconds at the source's rate (2 s at 20.625 MS/s = 41.25 M samples = 314 MiB of cf32, 157 MiB of ci16: the ring holds the source's width)"}),
            choice<C>("overflow", at(&C::overflow),
                      choices(ring_overflow_names),
                      {"", "what a full ring does (§5). auto: `block` for file and tcp, `drop` for udp, vita49, iio and zmq"}),
            boolean<C>("lock_memory", at(&C::lock_memory),
                       {"", "pinned memory: `cudaHostAlloc` with the cuda backend (failure is fatal), else `mlock` "
                            "(failure falls back to pageable memory, said in the `ring:` log line)"}),
        };
        return s;
    }();
    return table;
}

const section<pipeline_config>& pipeline_schema()
{
    using C = pipeline_config;
    static const section<C> table = [] {
        section<C> s;
        s.fields = {
            choice<C>("backend", at(&C::backend),
                      choices(backend_names),
                      {"", "auto: cuda when the CUDA backend's module loads (package paqd-cuda and the CUDA libraries "
                           "it names) and a listed device has the 138 KiB of shared memory per block the backend needs "
                           "(H100, H200, A100), else cpu (the reason logged); cuda without the module, or on such a "
                           "device, fails at start naming what is missing"}),
            int_list<C>("gpus", at(&C::gpus), between(0, 63), {"", "cuda: one worker per listed device; empty means [0]"}),
            choice<C>("solver", at(&C::solver),
                      name_choices(solver_names),
                      {"", "cuda: the ZF/MMSE solver. levinson is the project's (double precision, and the fastest by "
                           "far); the two cuSOLVER ones (float) are the thesis' baselines, kept for comparison; "
                           "with them, ZF packets above condition number 1e6 (flagged ill-conditioned) or not "
                           "factorable fall back to Levinson. The CPU backend always solves in double and ignores this"}),
            number<C>("cpu_workers", at(&C::cpu_workers), between(1, 64),
                      {"", "cpu backend: number of workers (each uses `receiver.cpu_threads`)"}),
            number<C>("queue_depth", at(&C::queue_depth), between(1, 16),
                      {"batches", "batches queued for the workers beyond those being processed"}),
            boolean<C>("cpu_fallback", at(&C::cpu_fallback),
                       {"", "cuda backend only: a batch whose GPU processing throws is redone on a CPU backend"}),
        };
        return s;
    }();
    return table;
}

/// A mapping of stream names to host:port, streams 0 .. n - 1 (dsp::stream_name): the
/// bitstreams' destinations (twelve) and the soft streams' (the six paths).
template <std::size_t n>
const section<std::array<std::string, n>>& destinations_schema()
{
    using list = std::array<std::string, n>;
    static const section<list> table = [] {
        section<list> s;
        for (std::size_t k = 0; k < n; ++k) {
            s.fields.push_back(leaf<list>(
                make_info(dsp::stream_name(static_cast<int>(k)), "string", "host:port", {}),
                [k](const YAML::Node& v, const YAML::Mark& km, const std::string& path, list& d, parse_context& ctx) {
                    (void)read_text(v, km, path, d[k], ctx.errors);
                },
                [k](const list& d) -> std::optional<std::string> {
                    return d[k].empty() ? std::nullopt : std::optional(yaml_quoted(d[k]));
                }));
        }
        return s;
    }();
    return table;
}

/// A publisher mapping field of n destinations (publisher.destinations, .llr_destinations):
/// parsed into, and written from, `member` of its udp config; not written at all when
/// `omit_empty` and every destination is empty.
template <std::size_t n>
field<publisher_config> destinations_field(field_info info, std::array<std::string, n> io::udp_publisher_config::*member,
                                           bool omit_empty)
{
    using C = publisher_config;
    field<C> f;
    f.info = std::move(info);
    f.parse = [member](const YAML::Node& v, const YAML::Mark& km, const std::string& path, C& c, parse_context& ctx) {
        std::array<std::string, n> d{};
        destinations_schema<n>().parse(v, km, path, d, ctx);
        c.udp.*member = d;
    };
    f.emit = [member, omit_empty, name = f.info.key](const C& c, int indent, std::string& out) {
        const auto& d = c.udp.*member;
        if (omit_empty && std::all_of(d.begin(), d.end(), [](const std::string& x) { return x.empty(); })) return;
        out.append(static_cast<std::size_t>(indent), ' ');
        out += name + ":\n";
        destinations_schema<n>().emit(d, indent + 2, out);
    };
    f.describe = [info = f.info](const C&, const std::string& section, std::vector<field_info>& out) {
        field_info i = info;
        i.section = section;
        out.push_back(std::move(i));
    };
    return f;
}

const section<publisher_config>& publisher_schema()
{
    using C = publisher_config;
    static const section<C> table = [] {
        section<C> s;
        const numeric_range dqe_range = [] {
            numeric_range r = between(0, 65535);
            r.integer = true;
            return r;
        }();
        field_info dqe = make_info("dqe_id", "integer", "`stream` or " + dqe_range.text(),
                                   {"", "DQE ID word (dqe, dqe-raw); `stream` puts the stream id there, 0..11 or 12 for "
                                        "the best-path stream (not IRIG-conformant)"});
        dqe.range = dqe_range;
        field<C> destinations = destinations_field<dsp::chain::max_streams>(
            make_info("destinations", "mapping",
                      "mapping of `none`, `zf`, `mmse`, `cma`, `fde1`, `fde2`, `none_trellis` .. `fde2_trellis` to "
                      "`host:port` or `[ipv6]:port` (port 1 .. 65535)",
                      {"", "if present, exactly the listed streams are enabled (at least one). The `_trellis` streams exist "
                           "with `receiver.detector: both`; listing one with another detector is an error. Host names are "
                           "resolved once, at start",
                       "every stream the receiver makes, `127.0.0.1:50000` (none) .. `:50005` (fde2), with `detector: both` "
                       "also `:50006` (none_trellis) .. `:50011` (fde2_trellis)"}),
            &io::udp_publisher_config::destinations, false);
        field<C> llr_destinations = destinations_field<dsp::chain::num_paths>(
            make_info("llr_destinations", "mapping",
                      "mapping of `none`, `zf`, `mmse`, `cma`, `fde1`, `fde2` to `host:port` or `[ipv6]:port` (port 1 .. 65535)",
                      {"", "soft streams: where the trellis's LLRs of each listed path go, one 6216-byte datagram per packet "
                           "(BITSTREAM.md, \"Soft streams\"; above a 1500-byte MTU: fragmented off the host). Needs "
                           "`receiver.detector: trellis` or `both`. Each datagram counts against `max_datagrams_per_second`",
                       "none"}),
            &io::udp_publisher_config::llr_destinations, true);
        field<C> decoded_destinations = destinations_field<dsp::chain::max_streams>(
            make_info("decoded_destinations", "mapping",
                      "mapping of `none`, `zf`, `mmse`, `cma`, `fde1`, `fde2`, `none_trellis` .. `fde2_trellis` to "
                      "`host:port` or `[ipv6]:port` (port 1 .. 65535)",
                      {"", "decoded streams: where each listed stream's decoded information bits go, one datagram per "
                           "packet with its codewords' results (the continuous stream: the frames that end in the packet; "
                           "BITSTREAM.md, \"Decoded streams\"; at most 1112 bytes). "
                           "Needs `receiver.fec`. May share a port with anything else paqd sends (the payload type tells "
                           "them apart). Each datagram counts against `max_datagrams_per_second`",
                       "none"}),
            &io::udp_publisher_config::decoded_destinations, true);
        s.fields = {
            boolean<C>("enabled", at(&C::enabled),
                       {"", "false: no bitstreams (a warning says so); the destinations are then not checked beyond "
                            "their YAML types"}),
            choice<C>("format", [](auto& c) -> auto& { return c.udp.format; },
                      choices(io::bitstream_format_names),
                      {"", "datagram format"}),
            leaf<C>(
                std::move(dqe),
                [dqe_range](const YAML::Node& v, const YAML::Mark& km, const std::string& path, C& c, parse_context& ctx) {
                    if (v.IsScalar() && v.Scalar() == "stream") {
                        c.udp.dqe_id.use_stream_id = true;
                        return;
                    }
                    std::uint16_t fixed = 0;
                    if (read_number(v, km, path, dqe_range, fixed, ctx.errors)) {
                        c.udp.dqe_id.use_stream_id = false;
                        c.udp.dqe_id.fixed_id = fixed;
                    }
                },
                [](const C& c) -> std::optional<std::string> {
                    return c.udp.dqe_id.use_stream_id ? std::string("stream") : std::to_string(c.udp.dqe_id.fixed_id);
                }),
            number<C>("send_buffer_bytes", [](auto& c) -> auto& { return c.udp.send_buffer_bytes; }, between(4096, 1 << 30),
                      {"bytes", "SO_SNDBUF per socket, capped by `net.core.wmem_max` (§7)"}),
            number<C>("max_datagrams_per_second", [](auto& c) -> auto& { return c.udp.max_datagrams_per_second; },
                      or_between(0, "unpaced", 1, 1e8),
                      {"1/s", "pacing over all streams, soft streams included: a full batch (~18600 datagrams, twice that "
                              "with six soft streams) leaves over ~0.9 s instead of in one burst that overruns a tester's "
                              "socket buffer; paqd warns at start when its streams need more at the nominal packet rate"}),
            std::move(destinations),
            std::move(llr_destinations),
            std::move(decoded_destinations),
            optional_text<C>("best_destination", [](auto& c) -> auto& { return c.udp.best_destination; },
                             "`host:port` or `[ipv6]:port` (port 1 .. 65535)",
                             {"", "the best-path stream: per packet the bits of the stream with the lowest estimated BEP "
                                  "(the highest DQM, SIGNAL-CHAIN.md \"Decision quality\"), stream id 12, the chosen stream in "
                                  "its header (BITSTREAM.md, \"Best-path stream\"). Each datagram counts against "
                                  "`max_datagrams_per_second`",
                              "none"}),
        };
        s.check = [](const C& c, const std::string& path, const YAML::Mark& mark, parse_context& ctx) {
            if (c.enabled) ctx.report(path, c.udp.validate(), mark);
        };
        return s;
    }();
    return table;
}

const choice_list<dsp::pn_pattern> pn_patterns = choices(dsp::pn_pattern_names);

const section<monitor_config>& monitor_schema()
{
    using C = monitor_config;
    static const section<C> table = [] {
        section<C> s;
        field_info pattern = make_info("pattern", "choice", "none, " + choice_names(pn_patterns),
                                       {"", "known data pattern for the live BER; `none`: estimated BEP only"});
        pattern.choices.push_back("none");
        for (const auto& p : pn_patterns) pattern.choices.push_back(p.first);
        s.fields = {
            // Any spelling dsp::parse_pn_pattern reads (PN15, prbs-15, ...), written back as pn15.
            leaf<C>(
                std::move(pattern),
                [](const YAML::Node& v, const YAML::Mark& km, const std::string& path, C& c, parse_context& ctx) {
                    std::string text;
                    if (!read_text(v, km, path, text, ctx.errors)) return;
                    if (text == "none") {
                        c.pattern.reset();
                        return;
                    }
                    try {
                        c.pattern = dsp::parse_pn_pattern(text);
                    } catch (const std::invalid_argument&) {
                        ctx.errors.add(value_mark(v, km), path + ": got '" + text + "' (allowed: none, " +
                                                              choice_names(pn_patterns) + ")");
                    }
                },
                [](const C& c) -> std::optional<std::string> {
                    return c.pattern ? std::string(dsp::to_string(*c.pattern)) : std::string("none");
                }),
            number<C>("status_interval_s", at(&C::status_interval_s), between(0.1, 3600),
                      {"s", "status line period (also the systemd STATUS= period)"}),
        };
        return s;
    }();
    return table;
}

const section<records_config>& records_schema()
{
    using C = records_config;
    static const section<C> table = [] {
        section<C> s;
        s.fields = {
            path<C>("path", at(&C::base),
                    {"", "base name: writes `<base>-packets.csv` and `<base>-channel.csv` (created, or truncated, at "
                         "start; parent directories are created)",
                     "unset (no records)"}),
            number<C>("decimation", at(&C::decimation), between(1, 1'000'000),
                      {"packets", "one row per this many packets (counts summed exactly)"}),
            number<C>("channel_decimation", at(&C::channel_decimation), between(1, 1'000'000),
                      {"packets", "channel estimate of every this-many-th packet"}),
        };
        return s;
    }();
    return table;
}

const section<recording_config>& recording_schema()
{
    using C = recording_config;
    static const section<C> table = [] {
        section<C> s;
        s.fields = {
            path<C>("path", at(&C::base),
                    {"", "base name: `<base>.sigmf-data` and `<base>.sigmf-meta` (parent directories are created)",
                     "unset (no recording)"}),
            choice<C>("format", at(&C::format), sample_formats,
                      {"", "sample type on disk (ci16: 82.5 MB/s at 20.625 MS/s; cf32: 165 MB/s)"}),
            number<C>("queue_mib", at(&C::queue_mib), between(16, 65536),
                      {"MiB", "most samples waiting for the disk (256 MiB ≈ 1.6 s at 20.625 MS/s)"}),
            optional_number<C>("center_frequency_hz", at(&C::center_frequency_hz), between(1, 1e12),
                               {"Hz", "the recording's `core:frequency` (the RF centre the samples were taken at)",
                                "unset: the source's (`iio`: `lo_hz`; `file`: the recording's own), else none"}),
        };
        return s;
    }();
    return table;
}

const section<metrics_config>& metrics_schema()
{
    using C = metrics_config;
    static const section<C> table = [] {
        section<C> s;
        s.fields = {
            boolean<C>("enabled", at(&C::enabled), {"", "false: no metrics endpoint"}),
            text<C>("bind", at(&C::bind), "a numeric IPv4/IPv6 address",
                    {"", "`0.0.0.0`: every interface (there is no authentication)"}),
            number<C>("port", at(&C::port), port_range, {"", "0: any free port, shown in the `metrics:` log line"}),
            boolean<C>("live_view", at(&C::live_view),
                       {"", "the live view on the same server: a page at `/view` (and `/`) with each path's BER and DQM "
                            "over the last 10 minutes, a recent packet's constellation and eye, the input spectrum, "
                            "the channel estimate, level, lock and the counters, updated every second; its data at "
                            "`/view/data.json`. It decides one packet a second again on the CPU (a few ms on one "
                            "core). false: `/metrics` only"}),
        };
        // The address's form here, not at start: a name would make every start fail.
        s.check = [](const C& c, const std::string& path, const YAML::Mark& mark, parse_context& ctx) {
            if (!c.enabled) return;
            if (!io::is_numeric_address(c.bind)) {
                const auto it = ctx.marks.find(path + ".bind");
                ctx.errors.add(it != ctx.marks.end() ? it->second : mark,
                               path + ".bind: '" + c.bind + "' is not a numeric IPv4/IPv6 address (e.g. 127.0.0.1, 0.0.0.0, ::1)");
            }
        };
        return s;
    }();
    return table;
}

const section<log_config>& log_schema()
{
    using C = log_config;
    static const section<C> table = [] {
        section<C> s;
        s.fields = {
            choice<C>("level", at(&C::level), choices(config::log_level_names),
                      {"", "messages below this level are not logged; `--log-level` overrides it"}),
            choice<C>("destination", at(&C::destination),
                      choices(log_destination_names),
                      {"", "auto: the journal when systemd connected stderr to it (JOURNAL_STREAM names fd 2), "
                           "stderr otherwise. console: `paqd: <level>: <message>` on stderr"}),
        };
        return s;
    }();
    return table;
}

}  // namespace

namespace detail {

const section<daemon_config>& daemon_schema()
{
    using C = daemon_config;
    static const section<C> table = [] {
        section<C> s;
        s.fields = {
            subsection<C>("receiver", receiver_schema(), at(&C::receiver)),
            subsection<C>("source", source_schema(), at(&C::source)),
            subsection<C>("ring", ring_schema(), at(&C::ring)),
            subsection<C>("pipeline", pipeline_schema(), at(&C::pipeline)),
            subsection<C>("publisher", publisher_schema(), at(&C::publisher)),
            subsection<C>("monitor", monitor_schema(), at(&C::monitor)),
            subsection<C>("records", records_schema(), at(&C::records)),
            subsection<C>("recording", recording_schema(), at(&C::recording)),
            subsection<C>("metrics", metrics_schema(), at(&C::metrics)),
            subsection<C>("log", log_schema(), at(&C::log)),
        };
        // Across sections: the source's configured sample rate must be one the receiver can
        // take at its bit rate (else the service would fail at every start, and systemd would
        // restart it forever); a trellis stream's destination needs the detector that makes it.
        s.check = [](const C& c, const std::string&, const YAML::Mark& top_mark, parse_context& ctx) {
            double rate = 0.0;  // 0: known only at start (a file's metadata, a VITA-49 sender's context)
            switch (c.source.type) {
            case source_type::file: break;
            case source_type::tcp: rate = c.source.tcp.sample_rate_hz; break;
            case source_type::udp: rate = c.source.udp.sample_rate_hz; break;
            case source_type::vita49: rate = c.source.vita49.sample_rate_hz; break;
            case source_type::iio: rate = c.source.iio.sample_rate_hz; break;
            case source_type::zmq: rate = c.source.zmq.sample_rate_hz; break;
            }
            dsp::receiver_config rc = c.receiver;
            rc.input_sample_rate_hz = rate;
            if (const std::string e = rc.input_rate_error(); !e.empty()) {
                const std::string key = "source." + std::string(to_string(c.source.type)) + ".sample_rate_hz";
                // At the rate's line, else the bit rate's (the other half of the mismatch).
                auto it = ctx.marks.find(key);
                if (it == ctx.marks.end()) it = ctx.marks.find("receiver.bit_rate_hz");
                ctx.errors.add(it != ctx.marks.end() ? it->second : top_mark, key + ": " + e);
            }
            // Two receive channels: a source that delivers two, the CPU backend, no recorder.
            auto at_key = [&](const std::string& key, const std::string& fallback = "receiver.channels") {
                auto it = ctx.marks.find(key);
                if (it == ctx.marks.end()) it = ctx.marks.find(fallback);
                return it != ctx.marks.end() ? it->second : top_mark;
            };
            const bool second = c.source.type == source_type::file && c.source.file.second_channel.has_value();
            int source_channels = second ? 2 : 1;
            if (c.source.type == source_type::udp) source_channels = c.source.udp.channels;
            if (c.source.type == source_type::tcp) source_channels = c.source.tcp.channels;
            if (c.source.type == source_type::iio) source_channels = c.source.iio.channels;
            if (c.source.type == source_type::vita49 && c.source.vita49.second_stream_id) source_channels = 2;
            if (c.receiver.channels == 2) {
                if (source_channels != 2) {
                    ctx.errors.add(at_key("receiver.channels"),
                                   "receiver.channels: 2, but the source delivers one channel (two channels come from a "
                                   "multi-channel recording, source.file.channel and source.file.second_channel, or "
                                   "interleaved over the network, source.udp.channels or source.tcp.channels 2, two VITA-49 "
                                   "streams, source.vita49.second_stream_id, or a radio's two RX channels, "
                                   "source.iio.channels 2)");
                }
                if (c.pipeline.backend != backend_kind::cpu && c.pipeline.solver != name_of(solver_names, solver_kind::levinson)) {
                    ctx.errors.add(at_key("pipeline.solver"), "pipeline.solver: " + c.pipeline.solver +
                                                                  " solves one channel; receiver.channels 2 is solved by levinson "
                                                                  "(block Levinson for the joint systems)");
                }
                if (c.pipeline.backend == backend_kind::cuda && c.receiver.selects_channel()) {
                    ctx.errors.add(at_key("receiver.combining"),
                                   "receiver.combining: select (each packet on one channel) runs on the cpu backend only; with "
                                   "pipeline.backend cuda use `combining: joint`, or `backend: cpu` or `auto`");
                }
                if (!c.recording.base.empty()) {
                    ctx.errors.add(at_key("recording.path"),
                                   "recording.path: the recorder writes one channel; it cannot record receiver.channels 2 "
                                   "(record with one channel, or replay the multi-channel recording itself)");
                }
            } else if (second) {
                ctx.errors.add(at_key("source.file.second_channel"),
                               "source.file.second_channel: a second channel, but receiver.channels is 1 (set "
                               "`receiver.channels: 2` to combine them, or drop second_channel)");
            } else if (source_channels == 2) {
                const bool vita = c.source.type == source_type::vita49;
                const std::string key = "source." + std::string(to_string(c.source.type)) + (vita ? ".second_stream_id" : ".channels");
                ctx.errors.add(at_key(key), key + (vita ? ": a second channel" : ": 2") +
                                                ", but receiver.channels is 1 (set `receiver.channels: 2` to "
                                                  "combine them)");
            }
            if (!c.publisher.enabled) return;
            // The soft streams are the trellis's LLRs.
            if (!c.receiver.trellis_on()) {
                for (int p = 0; p < dsp::chain::num_paths; ++p) {
                    const std::string key = std::string("publisher.llr_destinations.") + dsp::stream_name(p);
                    if (const auto it = ctx.marks.find(key); it != ctx.marks.end()) {
                        ctx.errors.add(it->second, key + ": the LLRs are the trellis's, but receiver.detector is " +
                                                       std::string(dsp::to_string(c.receiver.detector)) +
                                                       " (use `detector: trellis` or `both`)");
                    }
                }
            }
            // The decoded streams carry the code's information bits: none without a code.
            if (c.receiver.fec == dsp::fec_code::none) {
                const std::string why = ": a decoded stream, but receiver.fec is none (name the link's code)";
                for (int st = 0; st < dsp::chain::max_streams; ++st) {
                    const std::string key = std::string("publisher.decoded_destinations.") + dsp::stream_name(st);
                    if (const auto it = ctx.marks.find(key); it != ctx.marks.end()) ctx.errors.add(it->second, key + why);
                }
            }
            if (c.receiver.detector == dsp::detector_kind::both) return;
            for (const char* list : {"destinations", "decoded_destinations"}) {
                for (int st = dsp::chain::num_paths; st < dsp::chain::max_streams; ++st) {
                    const std::string key = std::string("publisher.") + list + "." + dsp::stream_name(st);
                    if (const auto it = ctx.marks.find(key); it != ctx.marks.end()) {
                        ctx.errors.add(it->second, key + ": a trellis stream, but receiver.detector is " +
                                                       std::string(dsp::to_string(c.receiver.detector)) +
                                                       " (the `_trellis` streams exist with `detector: both`)");
                    }
                }
            }
        };
        return s;
    }();
    return table;
}

}  // namespace detail

daemon_config parse_daemon_config(std::string_view yaml_text, std::string_view source_name,
                                  const std::filesystem::path& base_dir)
{
    const YAML::Node root = load_document(yaml_text, source_name);
    error_list errors(source_name);
    parse_context ctx{errors, base_dir, {}};
    daemon_config cfg;
    // An empty document is all defaults, which still must pass the checks (a file source
    // needs its path).
    daemon_schema().parse(root, YAML::Mark::null_mark(), "", cfg, ctx);
    errors.throw_if_any();
    return cfg;
}

daemon_config load_daemon_config(const std::filesystem::path& file)
{
    return parse_daemon_config(read_config_file(file), file.string(), file.parent_path());
}

std::string to_yaml(const daemon_config& c)
{
    // The destinations in effect: a stream the receiver does not make (a `_trellis` one
    // without detector both) is not written, so the document reads back to the same streams.
    daemon_config effective = c;
    effective.publisher.udp = c.publisher.for_streams(c.receiver.streams());
    if (!c.receiver.trellis_on()) effective.publisher.udp.llr_destinations = {};  // no soft streams without the trellis
    if (c.receiver.fec == dsp::fec_code::none) effective.publisher.udp.decoded_destinations = {};  // nor decoded ones without a code
    std::string out;
    daemon_schema().emit(effective, 0, out);
    return out;
}

}  // namespace paq::config
