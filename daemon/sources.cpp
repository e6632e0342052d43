#include "daemon/sources.hpp"

#include "io/file_source.hpp"
#include "io/iio_source.hpp"
#include "io/net_source.hpp"
#include "io/zmq_source.hpp"

#include <stdexcept>
#include <string>

namespace paq::daemon {

std::span<const runtime::source_kind_counters> kinds_with_counters()
{
    static const runtime::source_kind_counters kinds[] = {
        {"TCP source", io::tcp_source::counter_list()},
        {"raw UDP source", io::udp_source::counter_list()},
        {"ZeroMQ source", io::zmq_source::counter_list()},
        {"VITA-49 source", io::vita49_source::counter_list()},
    };
    return kinds;
}

std::unique_ptr<io::sample_source> make_source(const config::source_config& cfg)
{
    switch (cfg.type) {
    case config::source_type::file:
        return std::make_unique<io::file_source>(cfg.file);
    case config::source_type::tcp:
        return std::make_unique<io::tcp_source>(cfg.tcp);
    case config::source_type::udp:
        return std::make_unique<io::udp_source>(cfg.udp);
    case config::source_type::vita49:
        return std::make_unique<io::vita49_source>(cfg.vita49);
    case config::source_type::iio:
        return std::make_unique<io::iio_source>(cfg.iio);
    case config::source_type::zmq:
        return std::make_unique<io::zmq_source>(cfg.zmq);
    }
    throw std::runtime_error("source type '" + std::string(config::to_string(cfg.type)) +
                             "' is not available in this build");
}

io::overflow_policy overflow_for(const config::daemon_config& cfg)
{
    switch (cfg.ring.overflow) {
    case config::ring_overflow::drop: return io::overflow_policy::drop;
    case config::ring_overflow::block: return io::overflow_policy::block;
    case config::ring_overflow::automatic: break;
    }
    return cfg.source.type == config::source_type::file || cfg.source.type == config::source_type::tcp
               ? io::overflow_policy::block
               : io::overflow_policy::drop;
}

}  // namespace paq::daemon
