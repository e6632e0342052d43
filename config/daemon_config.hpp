// The daemon's whole configuration: plain structs with defaults, one per section of
// /etc/paqd/paqd.yaml. config/daemon_yaml.cpp binds them to YAML (strict: unknown keys,
// wrong types and out-of-range values are errors naming the field, the value and the range).
//
//   receiver:   the signal chain (dsp::receiver_config)
//   source:     where samples come from (type + one sub-section per source type)
//   ring:       the sample ring between acquisition and batching
//   pipeline:   backend and workers
//   publisher:  the six UDP bitstreams
//   monitor:    BER pattern and status line
//   records:    per-packet CSV records (docs/RECORDS.md)
//   recording:  SigMF recording of the received samples
//   metrics:    Prometheus endpoint
//   log:        level and destination
#pragma once

#include "config/log_config.hpp"
#include "dsp/names.hpp"
#include "dsp/pn.hpp"
#include "dsp/receiver_config.hpp"
#include "io/file_source.hpp"
#include "io/iio_source.hpp"
#include "io/net_source.hpp"
#include "io/zmq_source.hpp"
#include "io/udp_publisher.hpp"
#include "io/ring_buffer.hpp"


#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace paq::config {

enum class source_type : std::uint8_t { file, tcp, udp, vita49, iio, zmq };
inline constexpr name_table<source_type, 6> source_type_names{{{"file", source_type::file},
                                                               {"tcp", source_type::tcp},
                                                               {"udp", source_type::udp},
                                                               {"vita49", source_type::vita49},
                                                               {"iio", source_type::iio},
                                                               {"zmq", source_type::zmq}}};

struct source_config {
    source_type type = source_type::file;
    /// No samples for this long: the batcher ends the segment (packets in it are published,
    /// the stall is counted and logged). 0.05 <= x <= 3600.
    double stall_timeout_s = 2.0;
    io::file_source_config file;
    /// The network sources carry no rate: default to the iNET rate (20.625 MS/s).
    io::tcp_source_config tcp = with_rate(io::tcp_source_config{});
    io::udp_source_config udp = with_rate(io::udp_source_config{});
    io::vita49_source_config vita49 = with_rate(io::vita49_source_config{});
    io::iio_config iio;
    io::zmq_source_config zmq = with_rate(io::zmq_source_config{});

    template <typename C>
    [[nodiscard]] static C with_rate(C c)
    {
        c.sample_rate_hz = waveform::default_sample_rate_hz;
        return c;
    }
};

/// The UDP bitstreams. Default: every stream to 127.0.0.1, ports 50000 (none) .. 50005 (fde2)
/// and, when receiver.detector is both, 50006 (none_trellis) .. 50011 (fde2_trellis); paced at
/// 20000 datagrams/s in all: a batch's ~18600 datagrams leave over ~0.9 s (the batch period is
/// 1.9 s) instead of in one 15 MB burst that overruns a tester's socket buffer. A
/// `destinations:` mapping in the file enables exactly the streams it lists.
struct publisher_config {
    bool enabled = true;
    io::udp_publisher_config udp = default_udp();

    /// The publisher's config for a receiver making `streams` streams (6, or 12 with detector
    /// both) and decoding with `fec`: the destinations of the streams it does not make cleared.
    [[nodiscard]] io::udp_publisher_config for_streams(int streams, dsp::fec_code fec = dsp::fec_code::none) const
    {
        io::udp_publisher_config c = udp;
        for (std::size_t i = static_cast<std::size_t>(streams); i < c.destinations.size(); ++i) {
            c.destinations[i].clear();
            c.decoded_destinations[i].clear();
        }
        c.fec = fec;
        return c;
    }

    /// Whether any decoded stream (udp.decoded_destinations) is set.
    [[nodiscard]] bool any_decoded() const { return udp.any_decoded(); }

    /// Whether any soft stream (udp.llr_destinations) is set.
    [[nodiscard]] bool any_llr() const { return udp.any_llr(); }

    [[nodiscard]] static io::udp_publisher_config default_udp()
    {
        io::udp_publisher_config c;
        for (std::size_t i = 0; i < c.destinations.size(); ++i) c.destinations[i] = "127.0.0.1:" + std::to_string(50000 + i);
        c.max_datagrams_per_second = 20000.0;
        return c;
    }
};

enum class ring_overflow : std::uint8_t { automatic, drop, block };
inline constexpr name_table<ring_overflow, 3> ring_overflow_names{
    {{"auto", ring_overflow::automatic}, {"drop", ring_overflow::drop}, {"block", ring_overflow::block}}};

struct ring_config {
    /// Capacity in seconds of samples at the source's rate, 0.1 <= x <= 60.
    double capacity_s = 2.0;
    /// auto: block for file replay (nothing is lost, the file waits) and TCP (back-pressure
    /// reaches the sender), drop for UDP, VITA-49 and libiio (a live source cannot wait;
    /// dropped samples are counted and become a gap).
    ring_overflow overflow = ring_overflow::automatic;
    /// Pinned (page-locked) memory: cudaHostAlloc with the CUDA backend, mlock otherwise.
    bool lock_memory = true;
};

enum class backend_kind : std::uint8_t { automatic, cpu, cuda };
inline constexpr name_table<backend_kind, 3> backend_names{
    {{"auto", backend_kind::automatic}, {"cpu", backend_kind::cpu}, {"cuda", backend_kind::cuda}}};

/// The ZF/MMSE solver of the CUDA backend (gpu::cuda_backend): Levinson in double (default),
/// or cuSOLVER's dense Cholesky / sparse QR in float (baselines; ill-conditioned ZF packets
/// fall back to Levinson). The CPU backend always solves in double and ignores it.
enum class solver_kind : std::uint8_t { levinson, cusolver_dn_chol, cusolver_sp_qr };
inline constexpr name_table<solver_kind, 3> solver_names{{{"levinson", solver_kind::levinson},
                                                          {"cusolver-dn-chol", solver_kind::cusolver_dn_chol},
                                                          {"cusolver-sp-qr", solver_kind::cusolver_sp_qr}}};

struct pipeline_config {
    /// auto: cuda when built with CUDA and a device is present, else cpu.
    backend_kind backend = backend_kind::automatic;
    /// CUDA devices, one worker each (cuda backend). Empty: device 0.
    std::vector<int> gpus;
    /// ZF/MMSE solver of the CUDA backend, a name of solver_names.
    std::string solver = std::string(name_of(solver_names, solver_kind::levinson));
    /// CPU backend workers (each uses receiver.cpu_threads threads), 1 <= x <= 64.
    int cpu_workers = 1;
    /// Batches queued for the workers beyond the ones being processed, 1 <= x <= 16.
    int queue_depth = 2;
    /// On a backend error (e.g. a GPU fault) retry the batch on a CPU backend instead of
    /// losing it (it is slower than real time, so the ring absorbs the difference).
    bool cpu_fallback = true;
};

struct monitor_config {
    /// Known data pattern for the live BER in the status line; nullopt ("none"): no BER,
    /// only the estimated bit error probability.
    std::optional<dsp::pn_pattern> pattern = dsp::pn_pattern::pn15;
    /// Status line period, 0.1 <= x <= 3600 s.
    double status_interval_s = 1.0;
};

struct records_config {
    /// Files <base>-packets.csv and <base>-channel.csv; empty: no records.
    std::filesystem::path base;
    /// One row per this many packets (errors and bits summed over them), 1 <= x <= 1e6.
    std::uint32_t decimation = 1;
    /// The channel estimate of every this-many-th packet, 1 <= x <= 1e6.
    std::uint32_t channel_decimation = 100;
};

struct recording_config {
    std::filesystem::path base;  ///< <base>.sigmf-data / .sigmf-meta; empty: no recording
    io::sample_format format = io::sample_format::ci16_le;
    std::size_t queue_mib = 256;  ///< samples waiting for the disk, at most, 16 <= x <= 65536
    /// The recording's core:frequency, Hz (0 < f <= 1e12); unset: the source's (an iio radio's
    /// LO, a SigMF file's core:frequency), else none is written.
    std::optional<double> center_frequency_hz;
};

struct metrics_config {
    bool enabled = true;
    std::string bind = "127.0.0.1";  ///< address to listen on ("0.0.0.0": every interface)
    std::uint16_t port = 9469;       ///< 0: any free port (see metrics_server::port())
    bool live_view = true;           ///< the live view's page and data beside /metrics (daemon/live_view.hpp)
};

struct daemon_config {
    dsp::receiver_config receiver;
    source_config source;
    ring_config ring;
    pipeline_config pipeline;
    publisher_config publisher;
    monitor_config monitor;
    records_config records;
    recording_config recording;
    metrics_config metrics;
    log_config log;
};

[[nodiscard]] constexpr std::string_view to_string(source_type t) noexcept { return name_of(source_type_names, t); }
[[nodiscard]] constexpr std::string_view to_string(ring_overflow o) noexcept { return name_of(ring_overflow_names, o); }
[[nodiscard]] constexpr std::string_view to_string(backend_kind b) noexcept { return name_of(backend_names, b); }
[[nodiscard]] constexpr std::string_view to_string(solver_kind s) noexcept { return name_of(solver_names, s); }

/// Parses a whole configuration document (all sections; a missing section keeps its
/// defaults). Throws config_error (config/receiver_yaml.hpp) listing every problem, each as
/// "<source>:<line>: <section>.<field> ...". Relative file paths are resolved against
/// `base_dir` (the config file's directory).
[[nodiscard]] daemon_config parse_daemon_config(std::string_view yaml_text, std::string_view source_name = "<string>",
                                                const std::filesystem::path& base_dir = {});
/// Reads and parses a file (errors name the file).
[[nodiscard]] daemon_config load_daemon_config(const std::filesystem::path& file);
/// The effective configuration, every field, as YAML that parse_daemon_config reads back.
[[nodiscard]] std::string to_yaml(const daemon_config& config);

}  // namespace paq::config
