// Runs the whole chain over a finite sample stream and keeps the per-path tallies: the stream
// engine (runtime/stream_engine.hpp) over a recording (a reader_feed), behind `paqd replay`,
// the BER-curve tool and the tests.
//
//   read samples -> batcher -> worker_pool (one or more backends) -> in order: on_batch, the
//   PN counters and estimates
#pragma once

#include "dsp/backend.hpp"
#include "dsp/receiver_config.hpp"
#include "dsp/run_tally.hpp"
#include "runtime/stream_engine.hpp"
#include "runtime/worker_pool.hpp"

#include <cstddef>
#include <functional>
#include <span>

namespace paq::runtime {

using read_fn = std::function<std::size_t(std::span<cf32>)>;
using read_ci16_fn = std::function<std::size_t(std::span<ci16>)>;
using read_x2_fn = std::function<std::size_t(std::span<cf32x2>)>;
using batch_fn = std::function<void(const dsp::batch_output&)>;

/// Pulls samples with `read` (returns the count written, 0 at the end) and runs the chain on
/// `pool`'s workers. `on_batch` (optional) sees every batch output in batch order. Reading and
/// batching run on a thread of their own, the backends on the pool's, on_batch on the calling
/// thread and the tally on a thread of its own; `read` and `on_batch` are each called from one
/// thread only. The
/// first error (from `read`, a backend, the tally or on_batch) ends the run and is rethrown
/// here; a backend error the pool's fallback recovered from is not one. The run closes the
/// pool: one run per pool.
dsp::run_summary run_receiver(worker_pool& pool, const dsp::receiver_config& cfg, dsp::pn_pattern pattern,
                              double sample_rate_hz, const read_fn& read, const batch_fn& on_batch = {});

/// The same for a ci16 input kept at its width up to the backend: the
/// windows carry the samples as read (4 bytes each, sample_batch::samples_ci16) and each
/// backend converts them, to_cf32(s, ci16_scale): the CPU before its chain, the GPU on the
/// device after the upload. Bits equal those of run_receiver over the converted samples.
dsp::run_summary run_receiver_ci16(worker_pool& pool, const dsp::receiver_config& cfg, dsp::pn_pattern pattern,
                                   double sample_rate_hz, float ci16_scale, const read_ci16_fn& read,
                                   const batch_fn& on_batch = {});
dsp::run_summary run_receiver_ci16(dsp::batch_processor& backend, const dsp::receiver_config& cfg, dsp::pn_pattern pattern,
                                   double sample_rate_hz, float ci16_scale, const read_ci16_fn& read,
                                   const batch_fn& on_batch = {});

/// The same on a pool still being made: reading and batching start at once and up to three
/// complete windows wait for the pool (reading overlaps the backends' setup). The pool must
/// outlive the run; an error making it ends the run and is rethrown here. `marks`
/// (io::recording_marks: in sample order; optional) are the recording's gaps, each ending a
/// segment where it lies, and its time: each packet gets its UTC from the latest time
/// (packet_record::utc_ns).
/// Returns the engine's whole result (its tally: the run_summary the others return), which
/// the counter registry reports (runtime/counters.hpp).
stream_stats run_receiver(const pool_future& pool, const dsp::receiver_config& cfg, dsp::pn_pattern pattern,
                              double sample_rate_hz, const read_fn& read, const batch_fn& on_batch = {},
                              std::span<const io::recording_mark> marks = {});
stream_stats run_receiver_ci16(const pool_future& pool, const dsp::receiver_config& cfg, dsp::pn_pattern pattern,
                                   double sample_rate_hz, float ci16_scale, const read_ci16_fn& read,
                                   const batch_fn& on_batch = {}, std::span<const io::recording_mark> marks = {});

/// The same for two receive channels (receiver_config::channels 2): `read` gives both channels'
/// samples of each sample time (cf32x2), the windows carry both (sample_batch::samples_x2).
stream_stats run_receiver_x2(const pool_future& pool, const dsp::receiver_config& cfg, dsp::pn_pattern pattern,
                             double sample_rate_hz, const read_x2_fn& read, const batch_fn& on_batch = {},
                             std::span<const io::recording_mark> marks = {});
/// Two receive channels on one backend the caller owns, over samples already in memory.
dsp::run_summary run_receiver_x2(dsp::batch_processor& backend, const dsp::receiver_config& cfg, dsp::pn_pattern pattern,
                                 double sample_rate_hz, std::span<const cf32x2> samples, const batch_fn& on_batch = {});

/// The same on one backend the caller owns (a pool of one worker, no fallback).
dsp::run_summary run_receiver(dsp::batch_processor& backend, const dsp::receiver_config& cfg, dsp::pn_pattern pattern,
                              double sample_rate_hz, const read_fn& read, const batch_fn& on_batch = {});

/// The same over samples already in memory (simulations, tests).
dsp::run_summary run_receiver(dsp::batch_processor& backend, const dsp::receiver_config& cfg, dsp::pn_pattern pattern,
                              double sample_rate_hz, std::span<const cf32> samples, const batch_fn& on_batch = {});

}  // namespace paq::runtime
