#include "dsp/cpu_backend.hpp"

#include "dsp/batcher.hpp"
#include "dsp/clock_recovery.hpp"
#include "dsp/decision_quality.hpp"
#include "dsp/detector.hpp"
#include "dsp/equalizers.hpp"
#include "dsp/estimators.hpp"
#include "dsp/fec.hpp"
#include "dsp/fft.hpp"
#include "dsp/input_stage.hpp"
#include "dsp/iq_correction.hpp"
#include "dsp/paths.hpp"
#include "dsp/preamble_detector.hpp"
#include "dsp/receiver_tables.hpp"
#include "dsp/soqpsk.hpp"
#include "dsp/trellis.hpp"

#include <omp.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <numbers>
#include <stdexcept>

namespace paq::dsp {

using namespace chain;

namespace {

/// Per-thread scratch: everything one packet needs, allocated once.
struct workspace {
    explicit workspace(std::size_t n) : seg(n), r_spec(n), h_spec(n), out(n), t1(n), t2(n), eq(n)
    {
        c_spec.reserve(paths);
        for (std::size_t p = 0; p < paths; ++p) c_spec.emplace_back(n);
        for (auto& x : v) x.resize(waveform::packet_bits);
    }
    static constexpr std::size_t paths = chain::num_paths;
    fft_buffer seg, r_spec, h_spec, out, t1, t2;
    std::vector<fft_buffer> c_spec;          ///< each path's equalizer spectrum (dsp/paths)
    std::array<std::vector<cf64>, paths> v;  ///< each path's decision samples
    smoother_scratch smooth;                 ///< detect_packet_smoothed's working memory
    std::array<sxs_trace, paths> trace;      ///< each path's detector phase and bits, for the trellis
    std::array<phase_gate::measure, paths> gate;  ///< each path's PLL measure, for phase_smoother auto
    trellis_scratch trellis;                 ///< detect_packet_trellis's working memory
    fft_buffer eq;                           ///< the equalized packet without the detection filter (trellis input)
    std::vector<cf64> solve_work;
    std::vector<cf32> clock_scratch;
    /// Each path's symbol-by-symbol decision statistics over the data (sxs_statistics): its
    /// BEP estimate's input, and with receiver.fec its LLRs'.
    std::array<std::vector<double>, paths> stat;
    /// receiver.fec: each path's symbol-by-symbol LLRs over the data and the decoder (absent
    /// without FEC).
    std::array<std::vector<float>, paths> sxs_llr;
    std::unique_ptr<stream_decoder> decoder;
};

/// Where a packet's decoded streams go (batch_output::packet_decoded and packet_codewords of
/// its stream 0: the streams follow each other).
struct fec_out {
    std::uint8_t* info = nullptr;
    codeword_result* codewords = nullptr;
};

}  // namespace

struct cpu_backend::impl {
    receiver_config cfg;
    const receiver_tables& t;
    fft_plan fwd, inv;
    fft_buffer hno_spec;
    std::vector<double> trellis_lp;  ///< trellis::lowpass_gain per FFT bin, over the FFT size (the inverse's 1/n)
    pll_gains pll_acq, pll_track;
    pll_gains pll_boot;  ///< the phase smoother's forward PLL over the data
    std::vector<std::unique_ptr<workspace>> ws;  ///< one per thread; process_packet uses ws[0]
    std::vector<double> metric;                   ///< preamble metric of the current batch
    sample_batch widened;                         ///< a ci16 batch as cf32 (process())
    int threads;
    bool soft_output = false;                     ///< keep the trellis's LLRs (set_soft_output)
    packet_view* view_out = nullptr;              ///< inspect(): the batch's first packet goes here
    input_geometry geom;                          ///< the input's rate against 2 samples per bit
    resampler_design clock_design;                ///< ratio-1 table for re-timing packets
    fec_framing framing;                          ///< receiver.fec's (when on)

    explicit impl(const receiver_config& c)
        : cfg(c),
          t(get_receiver_tables(c.fft_size)),
          fwd(c.fft_size, fft_plan::direction::forward),
          inv(c.fft_size, fft_plan::direction::inverse),
          hno_spec(c.fft_size),
          pll_acq(make_pll_gains(c.pll_acquisition_bn_t, c.pll_damping)),
          pll_track(make_pll_gains(c.pll_bn_t, c.pll_damping)),
          pll_boot(make_pll_gains(smoother::bootstrap_bn_t, c.pll_damping)),
          threads(c.cpu_threads > 0 ? c.cpu_threads : omp_get_max_threads()),
          geom(make_input_geometry(c)),
          clock_design(design_resampler(1.0))
    {
        taps_to_spectrum(t.h_no.data(), -hno_half, L_hno, fwd, hno_spec);
        if (c.trellis_on()) {
            const double n = static_cast<double>(c.fft_size);
            trellis_lp.resize(c.fft_size);
            for (std::size_t k = 0; k < c.fft_size; ++k) {
                const double kk = static_cast<double>(k);
                trellis_lp[k] = trellis::lowpass_gain((k < c.fft_size / 2 ? kk : kk - n) / n) / n;
            }
        }
        for (int i = 0; i < threads; ++i) ws.push_back(std::make_unique<workspace>(c.fft_size));
        for (auto& w : ws) {
            for (auto& st : w->stat) st.resize(waveform::data_bits);
        }
        if (const auto f = framing_for(c.fec)) {  // validate() refused the codes without one
            framing = *f;
            for (auto& w : ws) {
                for (auto& l : w->sxs_llr) l.resize(waveform::data_bits);
                w->decoder = std::make_unique<stream_decoder>(framing, c.fec_iterations);
            }
        }
    }

    /// Path p's symbol-by-symbol decision statistics (w.stat[p]) from its decision samples and
    /// the phases its detector decided them at (w.trace[p]): the statistic each data bit was
    /// decided on. Taken where the path's bits are decided for the last time.
    static void sxs_statistics(workspace& w, std::size_t p)
    {
        const auto& th = w.trace[p].theta;
        const auto& v = w.v[p];
        for (std::size_t i = 0; i < waveform::data_bits; ++i) {
            const std::size_t k = waveform::known_bits + i;
            const cf64 y = v[k] * std::polar(1.0, -th[k]);
            w.stat[p][i] = k % 2 == 0 ? y.real() : y.imag();
        }
    }

    /// Decodes stream `stream`'s LLRs into `fo`.
    void decode(workspace& w, std::span<const float> llr, int stream, const fec_out& fo) const
    {
        w.decoder->decode(llr, fo.info + static_cast<std::size_t>(stream) * static_cast<std::size_t>(framing.info_bytes()),
                          fo.codewords + static_cast<std::size_t>(stream) * static_cast<std::size_t>(framing.codewords));
    }

    /// The chain on a window at 2 samples per bit.
    void process_chain(const sample_batch& batch, batch_output& out);

    /// Each path's decisions and I rail as its detector saw them (packet_view), from the
    /// packet's segment spectrum (w.r_spec), its paths' equalizers (w.c_spec) and traces: the
    /// derotation is the one each path's bits were decided with (the phase smoother's total
    /// where it derotated the segment first).
    void capture_view(workspace& w, packet_view& view) const
    {
        const long long pre = static_cast<long long>(packet_margin);
        const double inv_n = 1.0 / static_cast<double>(cfg.fft_size);
        const long long dd = t.decision_delay;
        const std::size_t nb = waveform::packet_bits, nk = waveform::known_bits;
        for (std::size_t p = 0; p < workspace::paths; ++p) {
            filter_path(w.r_spec, w.c_spec[p], hno_spec, inv, w.out);
            const auto& th = w.trace[p].theta;
            // Output sample j (2 per bit, j = 0 at bit 0's decision) derotated by its bit's phase.
            auto at = [&](long long j) {
                const std::size_t k = std::min(static_cast<std::size_t>(std::max(j, 0LL) / 2), nb - 1);
                return w.out[static_cast<std::size_t>(pre + dd + j)] * inv_n * std::polar(1.0, -th[k]);
            };
            double amp = 0.0;
            for (std::size_t k = 0; k < nk; ++k) {
                const cf64 y = at(2 * static_cast<long long>(k));
                amp += std::abs(k % 2 == 0 ? y.real() : y.imag());
            }
            const double scale = amp > 0.0 ? static_cast<double>(nk) / amp : 0.0;
            auto& c = view.constellation[p];
            c.clear();
            for (std::size_t k = nk; k + 1 < nb && c.size() < packet_view::max_points; k += 2) {
                const cf64 i = at(2 * static_cast<long long>(k)), q = at(2 * static_cast<long long>(k + 1));
                c.emplace_back(static_cast<float>(i.real() * scale), static_cast<float>(q.imag() * scale));
            }
            auto& e = view.eye_i[p];
            e.clear();
            const long long first = 2 * static_cast<long long>(nk);
            const long long last = std::min(first + static_cast<long long>(packet_view::max_points),
                                            2 * static_cast<long long>(nb - 1));
            for (long long j = first; j <= last; ++j) e.push_back(static_cast<float>(at(j).real() * scale));
        }
    }

    /// llr_out: null, or the packet's six trellis LLR blocks (6 x 6144, batch_output::llrs).
    void packet(const cf32* window, std::size_t len, long long start, packet_record& rec, std::uint8_t* bits_out,
                workspace& w, fixed_pos clock = fixed_pos{1} << fixed_frac_bits, bool start_realigned = false,
                std::int8_t* llr_out = nullptr, packet_view* view = nullptr, fec_out fo = {}) const
    {
        const bool fec = fo.info != nullptr;
        const std::size_t n = cfg.fft_size;
        const long long pre = static_cast<long long>(packet_margin);
        const double inv_n = 1.0 / static_cast<double>(n);

        // Segment: the packet at [pre, pre + L_pkt), packet_margin samples each side, zeros
        // beyond. Only these samples are read, whatever window the packet arrived in.
        std::uint32_t nonfinite = 0;
        const long long seg_len = static_cast<long long>(waveform::L_pkt) + 2 * pre;
        if (clock != fixed_pos{1} << fixed_frac_bits) {
            // Re-timed for the transmitter's clock (anchored at the start: dsp/clock_recovery).
            nonfinite = clock_correct_packet(window, len, start, clock, packet_margin, static_cast<std::size_t>(seg_len),
                                             w.seg.data(), n, clock_design, w.clock_scratch);
        } else {
            std::fill(w.seg.data(), w.seg.data() + n, cf64(0.0));
            for (long long i = 0; i < seg_len; ++i) {
                const long long idx = start - pre + i;
                if (idx < 0 || idx >= static_cast<long long>(len)) continue;
                const cf32 s = window[idx];
                if (!std::isfinite(s.real()) || !std::isfinite(s.imag())) {
                    ++nonfinite;
                    continue;
                }
                w.seg[static_cast<std::size_t>(i)] = cf64(s.real(), s.imag());
            }
        }
        rec.front_end_estimated = rec.front_end_corrected = false;
        if (cfg.front_end_correction_on()) {
            // DC and IQ imbalance of the receiver's mixer, from the segment itself.
            const auto fe = estimate_iq_dc(w.seg.data(), static_cast<std::size_t>(seg_len));
            correct_iq_dc(w.seg.data(), static_cast<std::size_t>(seg_len), fe);
            record_front_end(fe, rec);
        }
        cf64* r = w.seg.data() + pre;  // r[0] = packet start

        rec.nonfinite_samples = nonfinite;
        rec.cfo_rad_per_sample = estimate_cfo(r);
        // The offset that estimate is left with, measured over the channel estimator's window.
        rec.cfo_rad_per_sample += refine_cfo(r, rec.cfo_rad_per_sample, t);
        derotate(r, static_cast<int>(-pre), static_cast<int>(seg_len - pre), rec.cfo_rad_per_sample);

        const auto ce = estimate_channel(r, t);
        rec.h = ce.h;
        rec.channel_support = ce.support;
        rec.channel_first_tap = t.supports[static_cast<std::size_t>(ce.support)].first_tap;
        rec.channel_last_tap = t.supports[static_cast<std::size_t>(ce.support)].last_tap;
        rec.sigma2 = ce.sigma2;
        rec.channel_energy = ce.energy;
        // Eb/N0 = (2 samples x received power) / (2 sigma2), the simulator's definition.
        rec.ebn0_db = 10.0 * std::log10(std::max(received_power(ce.h.data(), L_ch), 1e-300) / std::max(ce.sigma2, 1e-300));

        fwd.execute(w.seg.data(), w.r_spec.data());

        // Equalizers.
        taps_to_spectrum(ce.h.data(), -N1, L_ch, fwd, w.h_spec);
        double h_min = INFINITY, h_max = 0.0;
        for (std::size_t k = 0; k < n; ++k) {
            h_min = std::min(h_min, std::norm(w.h_spec[k]));
            h_max = std::max(h_max, std::norm(w.h_spec[k]));
        }
        rec.zf_condition = h_min > 0.0 ? h_max / h_min : INFINITY;
        eq_taps c_zf{}, c_mmse{};
        const auto rh = channel_autocorrelation(ce.h);
        const auto zf = solve_equalizer(ce.h, rh, 0.0, c_zf, w.solve_work);
        const auto mm = solve_equalizer(ce.h, rh, 2.0 * ce.sigma2, c_mmse, w.solve_work);
        rec.flags = packet_flags(nonfinite, rec.cfo_rad_per_sample, rec.ebn0_db, rec.zf_condition, zf.regularized || mm.regularized,
                                 start_realigned);
        eq_taps c_cma = c_mmse;
        cma_refine(c_cma, w.r_spec, static_cast<std::size_t>(pre), cfg.cma_mu, cfg.cma_iterations, fwd, inv, w.t1, w.t2);

        // The unequalized path: no equalizer, only the timing, phase and gain of the best
        // single-path fit to the channel (what carrier and timing recovery would give it).
        const auto sp = fit_single_path(ce.h);


        // The six paths (dsp/paths): R x C x H_NO, then the decision samples, detected by the
        // PLL (or by the phase smoother alone with phase_smoother 1). Each path's equalizer
        // spectrum, samples and trace are kept for the steps after.
        const packet_equalizers eq{c_zf, c_mmse, c_cma, sp, w.h_spec, ce.sigma2, t.psi.data()};
        auto path_bits = [&](std::size_t stream) { return bits_out + stream * packed_data_bytes; };
        // A path's decision samples from its filtered segment (w.out): bit k's at 2k + decision_delay.
        auto decision_samples = [&](std::vector<cf64>& v) {
            for (std::size_t k = 0; k < waveform::packet_bits; ++k) {
                v[k] = w.out[static_cast<std::size_t>(pre + 2 * static_cast<long long>(k) + t.decision_delay)] * inv_n;
            }
        };
        // Each path's trace (its phases and bits): for its statistics (the BEP estimate, the
        // LLRs), the trellis, a view, and the derotation's source (smoother::phase_source).
        for (std::size_t p = 0; p < workspace::paths; ++p) {
            path_response(static_cast<eq_path>(p), eq, fwd, w.c_spec[p]);
            filter_path(w.r_spec, w.c_spec[p], hno_spec, inv, w.out);
            auto& v = w.v[p];
            decision_samples(v);
            sxs_trace& trace = w.trace[p];
            if (cfg.phase_smoother_always()) {
                rec.paths[p] = detect_packet_smoothed(v.data(), pll_acq, pll_boot, path_bits(p), w.smooth, &trace);
            } else if (cfg.phase_smoother_auto()) {
                rec.paths[p] = detect_packet(v.data(), pll_acq, pll_track, path_bits(p), &trace, w.gate[p]);
            } else {
                rec.paths[p] = detect_packet(v.data(), pll_acq, pll_track, path_bits(p), trace);
            }
            sxs_statistics(w, p);
        }
        // phase_smoother auto: where the PLL's phase wandered (dsp/phase_gate.hpp), every path
        // again by the phase smoother, the packet flagged.
        if (cfg.phase_smoother_auto() && phase_gate::smoother_needed(w.gate.data(), static_cast<int>(workspace::paths))) {
            rec.flags |= flag_phase_smoothed;
            for (std::size_t p = 0; p < workspace::paths; ++p) {
                rec.paths[p] = detect_packet_smoothed(w.v[p].data(), pll_acq, pll_boot, path_bits(p), w.smooth, &w.trace[p]);
                sxs_statistics(w, p);
            }
        }
        // Where the smoother decided: the segment derotated by the phases of the unequalized or
        // the MMSE path (dsp/detector.hpp, smoother::pre_derotation_source_for, whichever
        // decided better), and the paths smoother::pre_derotated names for that source made
        // from it again and decided by the smoother again. For the trellis, which filters the
        // segment as it was, their phases plus the derotation.
        if (cfg.phase_smoother_always() || (rec.flags & flag_phase_smoothed) != 0) {
            const int source = smoother::pre_derotation_source_for(rec.paths[static_cast<std::size_t>(eq_path::none)].bep_estimate,
                                                                   rec.paths[static_cast<std::size_t>(eq_path::mmse)].bep_estimate);
            if (source == static_cast<int>(eq_path::none)) rec.flags |= flag_unequalized_phase;
            const double* th = w.trace[static_cast<std::size_t>(source)].theta.data();
            const int nb = static_cast<int>(waveform::packet_bits);
            std::fill(w.t1.data(), w.t1.data() + w.t1.size(), cf64(0.0));
            for (long long i = 0; i < seg_len; ++i) {
                const double u = static_cast<double>(i - pre - t.decision_delay) / 2.0;
                w.t1[static_cast<std::size_t>(i)] = w.seg[static_cast<std::size_t>(i)] * std::polar(1.0, -smoother::pre_derotation(th, nb, u));
            }
            fwd.execute(w.t1.data(), w.t2.data());
            for (std::size_t p = 0; p < workspace::paths; ++p) {
                if (!smoother::pre_derotated(static_cast<int>(p), source)) continue;
                filter_path(w.t2, w.c_spec[p], hno_spec, inv, w.out);
                auto& v = w.v[p];
                decision_samples(v);
                sxs_trace& trace = w.trace[p];
                rec.paths[p] = detect_packet_smoothed(v.data(), pll_acq, pll_boot, path_bits(p), w.smooth, &trace);
                sxs_statistics(w, p);  // before its phases become the totals below
                for (int k = 0; k < nb; ++k) {
                    const double total = trace.theta[static_cast<std::size_t>(k)] + smoother::pre_derotation(th, nb, static_cast<double>(k));
                    trace.theta[static_cast<std::size_t>(k)] = static_cast<double>(static_cast<float>(total));
                }
            }
        }
        if (view) capture_view(w, *view);
        // Each path's BEP estimate from the statistics its bits were finally decided on
        // (dsp/decision_quality.hpp; the detectors' own, Q(mean / std), chose the derotation's
        // source above), and with receiver.fec their LLRs from the same moments. With the trellis
        // alone its estimates and LLRs replace these.
        if (cfg.detector != detector_kind::trellis) {
            for (std::size_t p = 0; p < workspace::paths; ++p) {
                const auto m = decision_quality::moments_of(w.stat[p].data(), waveform::data_bits);
                rec.paths[p].bep_estimate = static_cast<float>(decision_quality::bep(m));
                if (fec) {
                    sxs_llrs(w.stat[p], m, w.sxs_llr[p]);
                    decode(w, w.sxs_llr[p], static_cast<int>(p), fo);
                }
            }
        }
        if (!cfg.trellis_on()) return;
        // The trellis takes its carrier phase (and the bits its table is fitted from) from the
        // symbol-by-symbol detector that decided the path: the PLL, or the phase smoother. With
        // `both` the symbol-by-symbol bits are stream p and the trellis's stream p + 6; with
        // `trellis` the trellis's replace them.
        const bool both = cfg.detector == detector_kind::both;
        for (std::size_t p = 0; p < workspace::paths; ++p) {
            const std::size_t ts = both ? p + workspace::paths : p;
            filter_path(w.r_spec, w.c_spec[p], trellis_lp, inv, w.eq);
            rec.paths[ts] = detect_packet_trellis(w.eq.data() + pre + t.decision_delay, w.trace[p], w.trace[p].known_errors,
                                                  path_bits(ts), w.trellis);
            if (llr_out) {
                std::int8_t* q = llr_out + p * waveform::data_bits;
                for (std::size_t i = 0; i < waveform::data_bits; ++i) q[i] = quantize_llr(w.trellis.llr[waveform::known_bits + i]);
            }
            if (fec) decode(w, std::span(w.trellis.llr).subspan(waveform::known_bits, waveform::data_bits), static_cast<int>(ts), fo);
        }
    }
};

cpu_backend::cpu_backend(const receiver_config& cfg)
{
    const auto errors = cfg.validate();
    if (!errors.empty()) {
        std::string msg = "invalid receiver configuration:";
        for (const auto& e : errors) msg += "\n  " + e;
        throw std::invalid_argument(msg);
    }
    impl_ = std::make_unique<impl>(cfg);
}

cpu_backend::~cpu_backend() = default;

void cpu_backend::set_soft_output(bool on) { impl_->soft_output = on; }

void cpu_backend::process_packet(const cf32* window, std::size_t window_len, long long start, packet_record& rec,
                                 std::uint8_t* bits_out)
{
    impl_->packet(window, window_len, start, rec, bits_out, *impl_->ws[0]);
}

bool cpu_backend::inspect(const sample_batch& batch, batch_output& out, packet_view& view)
{
    impl_->view_out = &view;
    try {
        process(batch, out);
    } catch (...) {
        impl_->view_out = nullptr;
        throw;
    }
    impl_->view_out = nullptr;
    if (out.packets.empty()) return false;
    view.record = out.packets.front();
    return true;
}

void cpu_backend::process(const sample_batch& in, batch_output& out)
{
    // A ci16 window is converted first (the same to_cf32 as every other conversion), into
    // storage kept across batches.
    if (in.is_ci16()) widen_batch(in, impl_->widened);
    const sample_batch& batch = in.is_ci16() ? impl_->widened : in;
    if (!impl_->geom.resampling) {
        impl_->process_chain(batch, out);
        return;
    }
    // The input stage: the window at 2 samples per bit, then its packets' starts as input
    // sample indices again.
    const sample_batch chain_batch = resample_batch(batch, impl_->geom);
    impl_->process_chain(chain_batch, out);
    for (auto& rec : out.packets) rec.start_sample = input_index(batch, rec.start_sample, impl_->geom);
}

void cpu_backend::impl::process_chain(const sample_batch& batch, batch_output& out)
{
    out.reset(batch.index, cfg.streams());
    const std::size_t len = batch.samples.size();
    if (len < detector_span) return;

    // Kept across batches: a full window's metric is ~300 MB, not to be allocated per batch.
    metric.resize(len - detector_span + 1);
    preamble_metric(batch.samples, metric, t.preamble_template);
    auto found = locate_packets(batch, metric, cfg.detection_threshold, t.template_offset);
    check_packet_starts(batch.samples, found, t);
    out.truncated_packets = found.truncated;
    const auto& starts = found.starts;
    const std::size_t np = starts.size();
    std::vector<double> ppm;
    const auto steps = clock_steps(batch, metric, found, t.template_offset, cfg, ppm);
    out.packets.resize(np);
    out.bits.assign(np * out.packet_bytes(), 0);
    const bool soft = soft_output && cfg.trellis_on();
    if (soft) out.llrs.assign(np * num_paths * waveform::data_bits, 0);
    if (cfg.fec_on()) out.size_fec(np, framing);
    const int nthreads = threads;
#pragma omp parallel for schedule(dynamic) num_threads(nthreads)
    for (std::size_t i = 0; i < np; ++i) {
        auto& w = *ws[static_cast<std::size_t>(omp_get_thread_num())];
        auto& rec = out.packets[i];
        packet(batch.samples.data(), len, starts[i], rec, out.bits.data() + i * out.packet_bytes(), w, steps[i],
               found.moved_periods[i] != 0, soft ? out.llrs.data() + i * num_paths * waveform::data_bits : nullptr,
               i == 0 ? view_out : nullptr,
               cfg.fec_on() ? fec_out{out.packet_decoded(i, 0), out.packet_codewords(i, 0)} : fec_out{});
        rec.start_sample = batch.first_sample + static_cast<std::uint64_t>(starts[i]);
        rec.metric = found.metrics[i];
        rec.clock_ppm = ppm[i];
        rec.clock_corrected = steps[i] != fixed_pos{1} << fixed_frac_bits;
    }
    for (const auto& rec : out.packets) out.nonfinite_samples += rec.nonfinite_samples;
}

}  // namespace paq::dsp
