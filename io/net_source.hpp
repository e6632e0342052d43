// Network sample sources (Boost.Asio): raw IQ over TCP or UDP, and VITA-49 over UDP.
//
// Each source owns an io_context that run() drives on the calling (acquisition) thread, so
// the sink is only ever called from there; stop() posts to that io_context and is safe from
// any thread. Asio stays inside the sources' .cpp files (io/net_core.hpp holds what they
// share): these headers pull in no Boost.
//
//   tcp_source     connect: resolve -> connect --fail--> wait (backoff) -> resolve ...
//                                        \--ok--> read ... peer gone or idle --> wait (backoff) -> reconnect
//                           (the backoff grows while connections bring no data; data resets it)
//                  listen:  bind -> accept one client -> read ... client gone, idle or replaced --> next client
//   udp_source     bind -> one datagram = [GNU Radio sequence header] + whole raw samples
//                  (loss counted only with the header; see udp_header)
//   vita49_source  bind -> one datagram = one VITA-49 packet; sequence tracking finds losses
//
// A reconnect is reported as gap(0, gap_reason::reconnect) before the new connection's first
// samples; VITA-49 losses as gap(lost_samples, gap_reason::lost_packets). Raw IQ carries no
// sample rate: sample_rate_hz() is the configured one (VITA-49: or its context packets').
// Only VITA-49 carries time: its source gives time anchors (io/sample_source.hpp).
//
// Each source takes an optional allow-list of sender addresses (CIDR prefixes, IPv4 and
// IPv6): a datagram from any other address is dropped, a TCP client from any other address
// is closed at once; both are counted in source_counters::refused and logged (rate-limited,
// naming the sender).
//
// This header gathers the three (io/tcp_source.hpp, io/udp_source.hpp, io/vita49_source.hpp)
// and the allow-list (io/sender_allow_list.hpp).
#pragma once

#include "io/sender_allow_list.hpp"
#include "io/tcp_source.hpp"
#include "io/udp_source.hpp"
#include "io/vita49_source.hpp"
