// Sends the output bitstreams as UDP datagrams (io/bitstream.hpp, docs/BITSTREAM.md): one
// datagram per packet per enabled stream, each stream to its own destination. The streams are
// the six paths, and with receiver.detector both the six paths decided by the trellis; the
// soft streams carry the trellis's LLRs of the paths listed in llr_destinations, the decoded
// streams a coded link's decoded information bits of the streams listed in decoded_destinations.
//
//   batch_output --publish()--> for each packet, for each enabled stream (none .. fde2_trellis):
//                                   encode (paq | dqe | dqe-raw) -> [pacing] -> send()
//                               then for each enabled soft stream (path none .. fde2):
//                                   encode_llr_datagram -> [pacing] -> send()
//                               then for each enabled decoded stream (none .. fde2_trellis):
//                                   encode_decoded_datagram -> [pacing] -> send()
//                               then the best-path stream: the bits of dsp::best_stream
//                                   encode (stream id 12, the chosen stream) -> [pacing] -> send()
//
// Lifecycle: construct (validate, resolve, open and connect the sockets: everything that can
// fail for setup reasons throws here) -> publish() per batch from one thread -> destroy.
// publish() never throws for network trouble: a refused, unreachable or full destination is
// counted per stream and logged at most once a second per stream, and the next packet goes
// out as usual. The sockets are connected so that the kernel reports ICMP errors (port
// unreachable -> ECONNREFUSED on a later send) instead of dropping them silently.
#pragma once

#include "dsp/batch.hpp"
#include "io/bitstream.hpp"

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace paq::io {

/// "host:port" split; IPv6 literals in brackets ("[::1]:5000").
struct host_port {
    std::string host;
    std::uint16_t port = 0;
};

/// Throws std::invalid_argument naming the text when it is not host:port with a port 1..65535.
[[nodiscard]] host_port parse_host_port(std::string_view text);

/// Whether any destination of a list is set.
template <std::size_t n>
[[nodiscard]] bool any_set(const std::array<std::string, n>& destinations) noexcept
{
    for (const auto& d : destinations) {
        if (!d.empty()) return true;
    }
    return false;
}

struct udp_publisher_config {
    /// Destination per stream, indexed by stream id (dsp::stream_name: none, zf, mmse, cma,
    /// fde1, fde2, then none_trellis .. fde2_trellis): "host:port" or "[ipv6]:port"; an empty
    /// string disables that stream. A batch's streams beyond batch_output::streams have
    /// nothing to send.
    std::array<std::string, dsp::chain::max_streams> destinations{};
    /// Soft streams: per path (0 none .. 5 fde2), where the trellis's LLRs of that path go,
    /// one datagram per packet (io::encode_llr_datagram, payload type 2; its stream id is the
    /// trellis's stream of the path: the path with detector trellis, 6 + path with both);
    /// empty: none. The batches must carry LLRs (dsp::batch_processor::set_soft_output) when any is set.
    std::array<std::string, dsp::chain::num_paths> llr_destinations{};
    /// Decoded streams: per stream id (as `destinations`), where that stream's decoded
    /// information bits go, one datagram per packet (io::encode_decoded_datagram, payload
    /// type 3, its own sequence numbers); empty: none. Needs `fec`, and the batches decoded
    /// with it (receiver.fec).
    std::array<std::string, dsp::chain::max_streams> decoded_destinations{};
    /// The best-path stream: where, per packet, the bits of the stream with the lowest BEP
    /// estimate go (dsp::best_stream: the highest DQM), stream id best_stream_id (12) with the
    /// chosen stream in the header; its own sequence numbers; empty: none.
    std::string best_destination;
    /// The link's code (receiver.fec): what the decoded streams carry. The constructor refuses
    /// a decoded stream without a framed code (validate() checks the fields on their own).
    dsp::fec_code fec = dsp::fec_code::none;
    bitstream_format format = bitstream_format::paq;
    dqe_id_config dqe_id{};                               ///< the DQE ID word (dqe, dqe-raw)
    std::size_t send_buffer_bytes = std::size_t{8} << 20;  ///< SO_SNDBUF per socket, 4096 .. 1 GiB
    /// Upper bound on datagrams per second over all streams, soft streams included; 0 =
    /// unpaced, else 1 .. 1e8.
    /// After an idle spell at most 1 ms worth of datagrams go out back to back.
    double max_datagrams_per_second = 0.0;

    /// Whether any soft stream (llr_destinations) or decoded stream (decoded_destinations) is set.
    [[nodiscard]] bool any_llr() const noexcept { return any_set(llr_destinations); }
    [[nodiscard]] bool any_decoded() const noexcept { return any_set(decoded_destinations); }
    [[nodiscard]] bool best() const noexcept { return !best_destination.empty(); }

    /// Empty when valid; otherwise one message per bad field, naming the field, the value and
    /// the allowed range. At least one destination must be set.
    [[nodiscard]] std::vector<std::string> validate() const;
};

/// Per-stream counters, updated by publish() and readable from any thread (relaxed atomics:
/// each is exact on its own; a reader may see one updated before another).
struct stream_send_counters {
    std::atomic<std::uint64_t> packets_published{0};  ///< datagrams built and handed to send()
    std::atomic<std::uint64_t> datagrams_sent{0};     ///< accepted by the kernel
    std::atomic<std::uint64_t> send_errors{0};        ///< refused (packets_published = sent + errors)
    std::atomic<std::uint64_t> bytes_sent{0};         ///< UDP payload bytes of datagrams_sent
};

class udp_publisher {
public:
    /// Validates the config (std::invalid_argument listing every problem), resolves each
    /// destination (std::runtime_error naming the stream and the destination when it does not
    /// resolve), opens and connects one socket per enabled stream and sets SO_SNDBUF, logging
    /// a warning when the kernel granted less than asked (raise net.core.wmem_max).
    explicit udp_publisher(const udp_publisher_config& config);
    ~udp_publisher();
    udp_publisher(const udp_publisher&) = delete;
    udp_publisher& operator=(const udp_publisher&) = delete;

    /// Sends every packet of the batch, in order, on every enabled stream of the batch's
    /// streams, then on every enabled soft stream (the datagrams of one packet go out
    /// together). Unpaced, without soft streams and with a destination for each stream (its
    /// decoded stream may share it), the streams are sent at once, one thread each (a stream's
    /// decoded stream on its thread), 64 datagrams per system call (sendmmsg); each stream's
    /// datagrams stay in packet order. Call from one thread. Network errors are counted, not thrown;
    /// std::invalid_argument only when batch.bits is smaller than the packets need. A batch
    /// without LLRs for its packets while a soft stream is enabled (its backend was not asked
    /// for them) has its bitstreams sent and each soft datagram counted as a failed send; so has
    /// a batch not decoded with `fec` while a decoded stream is enabled, each decoded datagram.
    void publish(const dsp::batch_output& batch);

    /// stream: 0 .. 11 (dsp::stream_name).
    [[nodiscard]] const stream_send_counters& counters(int stream) const;
    /// Packets published since construction: the next packet's packet_index.
    [[nodiscard]] std::uint64_t packets_published() const noexcept
    {
        return packets_published_.load(std::memory_order_relaxed);
    }
    [[nodiscard]] bool enabled(int stream) const noexcept;
    /// The decoded stream of stream 0 .. 11 (decoded_destinations).
    [[nodiscard]] const stream_send_counters& decoded_counters(int stream) const;
    [[nodiscard]] bool decoded_enabled(int stream) const noexcept;
    [[nodiscard]] bool any_decoded_enabled() const noexcept;
    /// The best-path stream (best_destination).
    [[nodiscard]] const stream_send_counters& best_counters() const noexcept { return best_counters_; }
    [[nodiscard]] bool best_enabled() const noexcept;
    /// The soft stream of path 0 .. 5 (llr_destinations).
    [[nodiscard]] const stream_send_counters& llr_counters(int path) const;
    [[nodiscard]] bool llr_enabled(int path) const noexcept;
    [[nodiscard]] bool any_llr_enabled() const noexcept;
    /// SO_SNDBUF the stream's socket got, in the request's terms (Linux doubles a request for
    /// its bookkeeping; Asio halves the reported value back); 0 for a disabled stream.
    [[nodiscard]] std::size_t send_buffer_granted(int stream) const noexcept;
    /// For logs: "paq to zf=127.0.0.1:5001 fde2=10.0.0.7:5005, SO_SNDBUF 8 MiB, unpaced".
    [[nodiscard]] std::string describe() const;

private:
    struct impl;
    std::unique_ptr<impl> impl_;
    std::array<stream_send_counters, dsp::chain::max_streams> counters_{};
    std::array<stream_send_counters, dsp::chain::num_paths> llr_counters_{};
    std::array<stream_send_counters, dsp::chain::max_streams> decoded_counters_{};
    stream_send_counters best_counters_{};
    std::atomic<std::uint64_t> packets_published_{0};
};

}  // namespace paq::io
