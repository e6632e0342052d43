#include "dsp/cpu_backend.hpp"

#include "dsp/batcher.hpp"
#include "dsp/clock_recovery.hpp"
#include "dsp/combining.hpp"
#include "dsp/decision_quality.hpp"
#include "dsp/detector.hpp"
#include "dsp/equalizers.hpp"
#include "dsp/estimators.hpp"
#include "dsp/fec.hpp"
#include "dsp/fec_stream.hpp"
#include "dsp/fft.hpp"
#include "dsp/input_stage.hpp"
#include "dsp/iq_correction.hpp"
#include "dsp/paths.hpp"
#include "dsp/preamble_detector.hpp"
#include "dsp/receiver_tables.hpp"
#include "dsp/soqpsk.hpp"
#include "dsp/sxs_soft.hpp"
#include "dsp/trellis.hpp"
#include "dsp/trellis_math.hpp"

#include <omp.h>

#include <algorithm>
#include <array>
#include <optional>
#include <cmath>
#include <numbers>
#include <stdexcept>

namespace paq::dsp {

using namespace chain;

namespace {

/// Per-thread scratch: everything one packet needs, allocated once.
struct workspace {
    workspace(std::size_t n, int channels)
        : seg(n), r_spec(n), h_spec(n), out(n), t1(n), t2(n), eq(n), seg2(channels > 1 ? n : 0), r_spec2(channels > 1 ? n : 0),
          h_spec2(channels > 1 ? n : 0), t3(channels > 1 ? n : 0), t4(channels > 1 ? n : 0)
    {
        c_spec.reserve(paths);
        for (std::size_t p = 0; p < paths; ++p) c_spec.emplace_back(n);
        for (auto& x : v) x.resize(waveform::packet_bits);
        if (channels > 1) {
            c_spec2.reserve(paths);
            for (std::size_t p = 0; p < paths; ++p) c_spec2.emplace_back(n);
        }
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
    std::vector<float> word_llr;  ///< the continuous stream: one codeword's LLRs
    /// The second receive channel's (receiver_config::channels 2; empty with one): its segment, its
    /// spectrum, its channel's spectrum, each path's equalizer on it, and two more buffers.
    fft_buffer seg2, r_spec2, h_spec2, t3, t4;
    std::vector<fft_buffer> c_spec2;
};

/// Where a packet's decoded streams go (batch_output::packet_decoded and packet_codewords of
/// its stream 0: the streams follow each other). With the continuous stream the packet's
/// streams' LLRs go to `llr` instead ([stream][6144]), decoded once the batch's frames are found.
struct fec_out {
    std::uint8_t* info = nullptr;
    codeword_result* codewords = nullptr;
    float* llr = nullptr;
    [[nodiscard]] bool on() const noexcept { return info != nullptr || llr != nullptr; }
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
    std::array<sample_batch, max_receive_channels> planar;  ///< a two-channel batch's channels (process())
    int threads;
    bool soft_output = false;                     ///< keep the trellis's LLRs (set_soft_output)
    packet_view* view_out = nullptr;              ///< inspect(): the batch's first packet goes here
    input_geometry geom;                          ///< the input's rate against 2 samples per bit
    resampler_design clock_design;                ///< ratio-1 table for re-timing packets
    fec_framing framing;                          ///< receiver.fec's (when on)
    std::optional<stream_deframer> deframer;      ///< receiver.fec sent as the continuous stream
    std::vector<float> stream_llr;                ///< its batch's LLRs [packet][stream][6144]

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
        for (int i = 0; i < threads; ++i) ws.push_back(std::make_unique<workspace>(c.fft_size, c.channels));
        for (auto& w : ws) {
            for (auto& st : w->stat) st.resize(waveform::data_bits);
        }
        if (const auto f = framing_for(c.fec)) {
            framing = *f;
            if (framing.continuous()) deframer.emplace(framing.code);
            for (auto& w : ws) {
                for (auto& l : w->sxs_llr) l.resize(waveform::data_bits);
                w->decoder = std::make_unique<stream_decoder>(framing, c.fec_iterations);
                if (framing.continuous()) w->word_llr.resize(static_cast<std::size_t>(framing.n));
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

    /// Decodes stream `stream`'s LLRs into `fo` (the continuous stream: keeps them there).
    void decode(workspace& w, std::span<const float> llr, int stream, const fec_out& fo) const
    {
        if (fo.llr) {
            std::copy(llr.begin(), llr.end(), fo.llr + static_cast<std::size_t>(stream) * waveform::data_bits);
            return;
        }
        w.decoder->decode(llr, fo.info + static_cast<std::size_t>(stream) * static_cast<std::size_t>(framing.info_bytes()),
                          fo.codewords + static_cast<std::size_t>(stream) * static_cast<std::size_t>(framing.codewords));
    }

    /// The continuous stream over the batch's packets (their start samples still in chain
    /// samples): the packets' places, the frames' offset from their markers, each frame whose
    /// last bit a packet holds into that packet's next slot (decoded on every stream, but the
    /// one begun before the batch: pending), and the edge packets' LLRs for the engine.
    void decode_stream(batch_output& out);

    /// The chain on a window at 2 samples per bit.
    /// channels: the receive channels' windows of the same samples (cfg.channels of them).
    void process_chain(std::span<const sample_batch* const> channels, batch_output& out);

    /// The packet's receive channels as the paths read them: each channel's segment spectrum
    /// (r) and each path's equalizer on that channel (c[p]); one or two of each.
    struct channel_spectra {
        std::array<const fft_buffer*, max_receive_channels> r{};
        std::array<std::array<const fft_buffer*, max_receive_channels>, num_paths> c{};
        std::size_t count = 1;
    };
    static channel_spectra spectra_of(const workspace& w, std::size_t channels, const fft_buffer& r0, const fft_buffer& r1)
    {
        channel_spectra s;
        s.count = channels;
        s.r = {&r0, &r1};
        for (std::size_t p = 0; p < num_paths; ++p) s.c[p] = {&w.c_spec[p], channels > 1 ? &w.c_spec2[p] : nullptr};
        return s;
    }
    /// Path p through `filter` into y: IFFT(sum over the channels of R x C_p x filter).
    template <class Filter>
    void filter_packet(const channel_spectra& s, std::size_t p, const Filter& filter, fft_buffer& y) const
    {
        filter_paths(std::span(s.r.data(), s.count), std::span(s.c[p].data(), s.count), filter, inv, y);
    }

    /// Two receive channels: each equalized path's equalizer on each channel (w.c_spec,
    /// w.c_spec2) from the joint taps (MMSE, CMA), the combined channel's ZF taps (zf[0]) and
    /// the channels' spectra (w.h_spec, w.h_spec2) (dsp/combining.hpp); the unequalized path's
    /// is combined_single_path_response's.
    void combined_responses(workspace& w, const std::array<channel_estimate, max_receive_channels>& ces,
                            const std::array<eq_taps, max_receive_channels>& zf, const std::array<eq_taps, max_receive_channels>& mmse,
                            const std::array<eq_taps, max_receive_channels>& cma) const
    {
        const std::array<double, max_receive_channels> sigma2{ces[0].sigma2, ces[1].sigma2};
        auto out = [&](eq_path p) {
            const auto i = static_cast<std::size_t>(p);
            return std::array<fft_buffer*, max_receive_channels>{&w.c_spec[i], &w.c_spec2[i]};
        };
        const std::array<const fft_buffer*, max_receive_channels> h{&w.h_spec, &w.h_spec2};
        // ZF: channel c's matched filter and weight, then the combined channel's ZF.
        const auto weights = combining_weights(sigma2);
        taps_to_spectrum(zf[0].data(), -L1, L_eq, fwd, w.t3);
        for (std::size_t ch = 0; ch < max_receive_channels; ++ch) {
            fft_buffer& c = *out(eq_path::zf)[ch];
            const fft_buffer& hc = *h[ch];
            for (std::size_t k = 0; k < c.size(); ++k) c[k] = weights[ch] * std::conj(hc[k]) * w.t3[k];
            taps_to_spectrum(mmse[ch].data(), -L1, L_eq, fwd, *out(eq_path::mmse)[ch]);
            taps_to_spectrum(cma[ch].data(), -L1, L_eq, fwd, *out(eq_path::cma)[ch]);
        }
        fde_combining_response(h, sigma2, nullptr, out(eq_path::fde1));
        fde_combining_response(h, sigma2, t.psi.data(), out(eq_path::fde2));
    }

    /// Two receive channels: the unequalized path's response on each channel (w.c_spec and
    /// w.c_spec2 of path none), each channel's single path combined by maximal-ratio combining
    /// (dsp::mrc_single_path_response); power: each channel estimate's received_power.
    void combined_single_path_response(workspace& w, const std::array<channel_estimate, max_receive_channels>& ces,
                                       const std::array<double, max_receive_channels>& power,
                                       const std::array<single_path, max_receive_channels>& sp) const
    {
        const std::array<double, max_receive_channels> sigma2{ces[0].sigma2, ces[1].sigma2};
        std::array<double, max_receive_channels> fraction{};
        for (std::size_t ch = 0; ch < max_receive_channels; ++ch) {
            const auto& support = t.supports[static_cast<std::size_t>(ces[ch].support)];
            fraction[ch] = signal_fraction(power[ch], ces[ch].sigma2, support.noise_gain);
        }
        const auto i = static_cast<std::size_t>(eq_path::none);
        mrc_single_path_response(sp, sigma2, fraction, std::array<fft_buffer*, max_receive_channels>{&w.c_spec[i], &w.c_spec2[i]});
    }

    /// Path p's decision samples from its filtered segment (w.out) into w.v[p]: bit k's at
    /// sample 2k + decision_delay of the packet.
    void decision_samples(workspace& w, std::size_t p) const
    {
        const long long pre = static_cast<long long>(packet_margin);
        const double inv_n = 1.0 / static_cast<double>(cfg.fft_size);
        auto& v = w.v[p];
        for (std::size_t k = 0; k < waveform::packet_bits; ++k) {
            v[k] = w.out[static_cast<std::size_t>(pre + 2 * static_cast<long long>(k) + t.decision_delay)] * inv_n;
        }
    }

    /// The carrier offset the estimate from the known bits left, measured over the whole
    /// packet (dsp::phase_slope, dsp::carrier_correction_of; docs/SIGNAL-CHAIN.md, "Carrier from the decisions"):
    /// the unequalized path (its response already in w.c_spec / w.c_spec2) made from the
    /// segments as they are, derotated by that estimate, decided by the PLL, and the slope of
    /// the PLL's phases. The path's samples, trace and `scratch_bits` (its bits) are
    /// overwritten; the paths are made afterwards.
    double decided_carrier_offset(workspace& w, std::size_t nch, std::uint8_t* scratch_bits) const
    {
        const auto none = static_cast<std::size_t>(eq_path::none);
        fwd.execute(w.seg.data(), w.r_spec.data());
        if (nch > 1) fwd.execute(w.seg2.data(), w.r_spec2.data());
        filter_packet(spectra_of(w, nch, w.r_spec, w.r_spec2), none, hno_spec, w.out);
        decision_samples(w, none);
        (void)detect_packet(w.v[none].data(), pll_acq, pll_track, scratch_bits, w.trace[none]);
        // Each pair's phase as the GPU's PLL keeps it (in float), straight into the line.
        phase_slope line;
        for (std::size_t j = 0; j < phase_pairs; ++j) line.add(static_cast<float>(w.trace[none].theta[2 * j]));
        return carrier_correction_of(line.offset());
    }

    /// Each path's decisions and I rail as its detector saw them (packet_view), from the
    /// packet's segment spectrum (w.r_spec), its paths' equalizers (w.c_spec) and traces: the
    /// derotation is the one each path's bits were decided with (the phase smoother's total
    /// where it derotated the segment first).
    void capture_view(workspace& w, const channel_spectra& spec, packet_view& view) const
    {
        const long long pre = static_cast<long long>(packet_margin);
        const double inv_n = 1.0 / static_cast<double>(cfg.fft_size);
        const long long dd = t.decision_delay;
        const std::size_t nb = waveform::packet_bits, nk = waveform::known_bits;
        for (std::size_t p = 0; p < workspace::paths; ++p) {
            filter_packet(spec, p, hno_spec, w.out);
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
    /// windows: the receive channels' windows of the same samples (cfg.channels of them).
    void packet(std::span<const cf32* const> windows, std::size_t len, long long start, packet_record& rec, std::uint8_t* bits_out,
                workspace& w, fixed_pos clock = fixed_pos{1} << fixed_frac_bits, bool start_realigned = false,
                std::int8_t* llr_out = nullptr, packet_view* view = nullptr, fec_out fo = {}) const
    {
        const bool fec = fo.on();
        const std::size_t n = cfg.fft_size;
        const long long pre = static_cast<long long>(packet_margin);
        const std::size_t nch = windows.size();
        const bool two = nch > 1;

        // Segment: the packet at [pre, pre + L_pkt), packet_margin samples each side, zeros
        // beyond. Only these samples are read, whatever window the packet arrived in.
        std::uint32_t nonfinite = 0;
        const long long seg_len = static_cast<long long>(waveform::L_pkt) + 2 * pre;
        const std::array<fft_buffer*, max_receive_channels> segs{&w.seg, &w.seg2};
        rec.front_end_estimated = rec.front_end_corrected = false;
        for (std::size_t ch = 0; ch < nch; ++ch) {
            const cf32* window = windows[ch];
            fft_buffer& seg = *segs[ch];
            if (clock != fixed_pos{1} << fixed_frac_bits) {
                // Re-timed for the transmitter's clock (anchored at the start: dsp/clock_recovery).
                nonfinite += clock_correct_packet(window, len, start, clock, packet_margin, static_cast<std::size_t>(seg_len),
                                                  seg.data(), n, clock_design, w.clock_scratch);
            } else {
                std::fill(seg.data(), seg.data() + n, cf64(0.0));
                for (long long i = 0; i < seg_len; ++i) {
                    const long long idx = start - pre + i;
                    if (idx < 0 || idx >= static_cast<long long>(len)) continue;
                    const cf32 x = window[idx];
                    if (!std::isfinite(x.real()) || !std::isfinite(x.imag())) {
                        ++nonfinite;
                        continue;
                    }
                    seg[static_cast<std::size_t>(i)] = cf64(x.real(), x.imag());
                }
            }
            if (cfg.front_end_correction_on()) {
                // DC and IQ imbalance of the receiver's mixer (each channel's own), from the
                // segment itself; the record keeps channel 1's.
                const auto fe = estimate_iq_dc(seg.data(), static_cast<std::size_t>(seg_len));
                correct_iq_dc(seg.data(), static_cast<std::size_t>(seg_len), fe);
                if (ch == 0) record_front_end(fe, rec);
            }
        }
        // r[c][0] = channel c's packet start
        const std::array<cf64*, max_receive_channels> r{w.seg.data() + pre, two ? w.seg2.data() + pre : nullptr};
        const std::span<const cf64* const> rs(r.data(), nch);

        rec.nonfinite_samples = nonfinite;
        rec.cfo_rad_per_sample = estimate_cfo(rs);
        // The offset that estimate is left with, measured over the channel estimator's window.
        rec.cfo_rad_per_sample += refine_cfo(rs, rec.cfo_rad_per_sample, t);
        for (std::size_t ch = 0; ch < nch; ++ch) {
            derotate(r[ch], static_cast<int>(-pre), static_cast<int>(seg_len - pre), rec.cfo_rad_per_sample);
        }

        std::array<channel_estimate, max_receive_channels> ces{};
        for (std::size_t ch = 0; ch < nch; ++ch) ces[ch] = estimate_channel(r[ch], t);
        // Eb/N0 = (2 samples x received power) / (2 sigma2), the simulator's definition; with
        // two channels the combined: the channels' signal to noise ratios summed.
        // A channel of two without signal or noise (all zeros: a dead input) counts as 0, not
        // as the one channel's 0 dB floor, so that it neither adds to the sum nor is chosen.
        // Each channel's received signal power (received_power of its estimate), once.
        std::array<double, max_receive_channels> power{}, snr{};
        rec.receive_channels = static_cast<std::uint8_t>(nch);
        rec.best_channel = 0;
        double snr_sum = 0.0;
        for (std::size_t ch = 0; ch < nch; ++ch) {
            const double p = power[ch] = received_power(ces[ch].h.data(), L_ch);
            const double s2 = ces[ch].sigma2;
            snr[ch] = two ? (p > 0.0 && s2 > 0.0 ? p / s2 : 0.0) : std::max(p, 1e-300) / std::max(s2, 1e-300);
            snr_sum += snr[ch];
            if (two) {
                rec.channel_ebn0_db[ch] = static_cast<float>(10.0 * std::log10(std::max(snr[ch], 1e-30)));
                rec.channel_level_db[ch] = static_cast<float>(10.0 * std::log10(std::max(p + 2.0 * s2, 1e-30)));
            }
            if (snr[ch] > snr[rec.best_channel]) rec.best_channel = static_cast<std::uint8_t>(ch);
        }
        if (two && cfg.combining == combining_kind::select) {
            // Selection diversity: the packet as the one-channel chain receives it on the
            // channel whose MMSE equalizer leaves the smaller error (multipath and noise both
            // weighed; its own carrier, channel and noise estimates then from that channel
            // alone); the record keeps both channels' Eb/N0 and names the channel chosen.
            std::array<double, max_receive_channels> error{};
            for (std::size_t ch = 0; ch < nch; ++ch) {
                eq_taps c{};
                (void)solve_equalizer(ces[ch].h, channel_autocorrelation(ces[ch].h), 2.0 * ces[ch].sigma2, c, w.solve_work);
                error[ch] = mmse_error(ces[ch].h, c);
            }
            const std::uint8_t best = error[1] < error[0] ? 1 : 0;
            const auto ebn0 = rec.channel_ebn0_db;
            const auto level = rec.channel_level_db;
            const std::array<const cf32*, 1> chosen{windows[best]};
            packet(chosen, len, start, rec, bits_out, w, clock, start_realigned, llr_out, view, fo);
            rec.receive_channels = 2;
            rec.best_channel = best;
            rec.channel_ebn0_db = ebn0;
            rec.channel_level_db = level;
            return;
        }

        // The unequalized path: no equalizer, only the timing, phase and gain of the best
        // single-path fit to the channel (what carrier and timing recovery would give it);
        // with two channels, each channel's so, combined by maximal-ratio combining. Its
        // response first: it also measures the carrier offset that is left, over the whole
        // packet's decisions, and the packet is derotated by that about the channel estimator's
        // window (dsp::carrier_centre), where the channel estimate keeps its phase.
        std::array<single_path, max_receive_channels> sp{};
        for (std::size_t ch = 0; ch < nch; ++ch) sp[ch] = fit_single_path(ces[ch].h);
        const auto none = static_cast<std::size_t>(eq_path::none);
        if (two) {
            combined_single_path_response(w, ces, power, sp);
        } else {
            single_path_response(sp[0], w.c_spec[none]);
        }
        if (const double dw = decided_carrier_offset(w, nch, bits_out); dw != 0.0) {
            rec.cfo_rad_per_sample += dw;
            for (std::size_t ch = 0; ch < nch; ++ch) {
                derotate_about(r[ch], static_cast<int>(-pre), static_cast<int>(seg_len - pre), dw, carrier_centre(t));
            }
        }

        const auto& ce = ces[rec.best_channel];
        rec.h = ce.h;
        rec.channel_support = ce.support;
        rec.channel_first_tap = t.supports[static_cast<std::size_t>(ce.support)].first_tap;
        rec.channel_last_tap = t.supports[static_cast<std::size_t>(ce.support)].last_tap;
        rec.sigma2 = ce.sigma2;
        rec.channel_energy = ce.energy;
        rec.ebn0_db = 10.0 * std::log10(two ? std::max(snr_sum, 1e-30) : snr_sum);

        fwd.execute(w.seg.data(), w.r_spec.data());
        if (two) fwd.execute(w.seg2.data(), w.r_spec2.data());

        // Equalizers.
        const std::array<fft_buffer*, max_receive_channels> h_specs{&w.h_spec, &w.h_spec2};
        for (std::size_t ch = 0; ch < nch; ++ch) taps_to_spectrum(ces[ch].h.data(), -N1, L_ch, fwd, *h_specs[ch]);
        const auto weights = two ? combining_weights(std::array{ces[0].sigma2, ces[1].sigma2}) : std::array{1.0, 0.0};
        double h_min = INFINITY, h_max = 0.0;
        for (std::size_t k = 0; k < n; ++k) {
            // One channel: |H|^2; two: the combined channel's sum_c w_c |H_c|^2.
            double g = std::norm(w.h_spec[k]);
            if (two) g = weights[0] * g + weights[1] * std::norm(w.h_spec2[k]);
            h_min = std::min(h_min, g);
            h_max = std::max(h_max, g);
        }
        rec.zf_condition = h_min > 0.0 ? h_max / h_min : INFINITY;
        std::array<eq_taps, max_receive_channels> c_zf{}, c_mmse{};
        solve_result zf, mm;
        if (!two) {
            const auto rh = channel_autocorrelation(ce.h);
            zf = solve_equalizer(ce.h, rh, 0.0, c_zf[0], w.solve_work);
            mm = solve_equalizer(ce.h, rh, 2.0 * ce.sigma2, c_mmse[0], w.solve_work);
        } else {
            const std::array<channel_taps, max_receive_channels> hs{ces[0].h, ces[1].h};
            const std::array<double, max_receive_channels> noise{2.0 * ces[0].sigma2, 2.0 * ces[1].sigma2};
            const std::array<double, max_receive_channels> sigma2{ces[0].sigma2, ces[1].sigma2};
            zf = solve_combined_zf(hs, sigma2, c_zf[0], w.solve_work);  // the combined channel's: one set of taps
            mm = solve_joint_equalizer(hs, noise, c_mmse, w.solve_work);
        }
        rec.flags = packet_flags(nonfinite, rec.cfo_rad_per_sample, rec.ebn0_db, rec.zf_condition, zf.regularized || mm.regularized,
                                 start_realigned);
        auto c_cma = c_mmse;
        if (!two) {
            cma_refine(c_cma[0], w.r_spec, static_cast<std::size_t>(pre), cfg.cma_mu, cfg.cma_iterations, fwd, inv, w.t1, w.t2);
        } else {
            const std::array<const fft_buffer*, max_receive_channels> rsp{&w.r_spec, &w.r_spec2};
            cma_refine(c_cma, rsp, static_cast<std::size_t>(pre), cfg.cma_mu, cfg.cma_iterations, fwd, inv, w.t1, w.t2, &w.t3);
        }

        // The six paths (dsp/paths): R x C x H_NO, then the decision samples, detected by the
        // PLL (or by the phase smoother alone with phase_smoother 1). Each path's equalizer
        // spectrum, samples and trace are kept for the steps after.
        const packet_equalizers eq{c_zf[0], c_mmse[0], c_cma[0], sp[0], w.h_spec, ce.sigma2, t.psi.data()};
        auto path_bits = [&](std::size_t stream) { return bits_out + stream * packed_data_bytes; };
        // Each path's trace (its phases and bits): for its statistics (the BEP estimate, the
        // LLRs), the trellis, a view, and the derotation's source (smoother::phase_source).
        // The unequalized path's response is already in w.c_spec (made for the carrier
        // correction, which does not change it); the equalized paths' responses now.
        if (two) {
            combined_responses(w, ces, c_zf, c_mmse, c_cma);
        } else {
            for (std::size_t p = 0; p < workspace::paths; ++p) {
                if (p != none) path_response(static_cast<eq_path>(p), eq, fwd, w.c_spec[p]);
            }
        }
        const auto spec = spectra_of(w, nch, w.r_spec, w.r_spec2);
        for (std::size_t p = 0; p < workspace::paths; ++p) {
            filter_packet(spec, p, hno_spec, w.out);
            decision_samples(w, p);
            auto& v = w.v[p];
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
            // Each channel's segment derotated: channel 1's spectrum into t2, channel 2's into t4.
            const std::array<const fft_buffer*, max_receive_channels> from{&w.seg, &w.seg2};
            const std::array<fft_buffer*, max_receive_channels> into{&w.t2, &w.t4};
            for (std::size_t ch = 0; ch < nch; ++ch) {
                std::fill(w.t1.data(), w.t1.data() + w.t1.size(), cf64(0.0));
                for (long long i = 0; i < seg_len; ++i) {
                    const double u = static_cast<double>(i - pre - t.decision_delay) / 2.0;
                    w.t1[static_cast<std::size_t>(i)] = (*from[ch])[static_cast<std::size_t>(i)] * std::polar(1.0, -smoother::pre_derotation(th, nb, u));
                }
                fwd.execute(w.t1.data(), into[ch]->data());
            }
            const auto derotated = spectra_of(w, nch, w.t2, w.t4);
            for (std::size_t p = 0; p < workspace::paths; ++p) {
                if (!smoother::pre_derotated(static_cast<int>(p), source)) continue;
                filter_packet(derotated, p, hno_spec, w.out);
                decision_samples(w, p);
                auto& v = w.v[p];
                sxs_trace& trace = w.trace[p];
                rec.paths[p] = detect_packet_smoothed(v.data(), pll_acq, pll_boot, path_bits(p), w.smooth, &trace);
                sxs_statistics(w, p);  // before its phases become the totals below
                for (int k = 0; k < nb; ++k) {
                    const double total = trace.theta[static_cast<std::size_t>(k)] + smoother::pre_derotation(th, nb, static_cast<double>(k));
                    trace.theta[static_cast<std::size_t>(k)] = static_cast<double>(static_cast<float>(total));
                }
            }
        }
        if (view) capture_view(w, spec, *view);
        // Each path's BEP estimate from the statistics its bits were finally decided on
        // (dsp/decision_quality.hpp; the detectors' own, Q(mean / std), chose the derotation's
        // source above; the unequalized path's with the soft decisions' model's,
        // sxs_soft::unequalized_bep), and with receiver.fec their LLRs (dsp/sxs_soft.hpp). With
        // the trellis alone its estimates and LLRs replace these.
        if (cfg.detector != detector_kind::trellis) {
            for (std::size_t p = 0; p < workspace::paths; ++p) {
                const auto f = decision_quality::fit_of(w.stat[p].data(), waveform::data_bits);
                double bep = f.bep();
                if (p == static_cast<std::size_t>(eq_path::none) && sxs_soft::needs_posterior(bep)) {
                    bep = sxs_soft::unequalized_bep(bep, sxs_posterior_bep(w.stat[p]));
                }
                rec.paths[p].bep_estimate = static_cast<float>(bep);
                if (fec) {
                    sxs_llrs(w.stat[p], w.sxs_llr[p]);
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
            filter_packet(spec, p, trellis_lp, w.eq);
            rec.paths[ts] = detect_packet_trellis(w.eq.data() + pre + t.decision_delay, w.trace[p], w.trace[p].known_errors,
                                                  trellis_math::llr_calibration(static_cast<int>(p)),
                                                  trellis_math::cancels_far_interference(static_cast<int>(p)), path_bits(ts), w.trellis);
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
    if (impl_->cfg.channels != 1) throw std::logic_error("process_packet: one receive channel only (this backend was made for two)");
    impl_->packet(std::span<const cf32* const>(&window, 1), window_len, start, rec, bits_out, *impl_->ws[0]);
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
    auto& m = *impl_;
    const int channels = m.cfg.channels;
    if (in.is_two_channel() != (channels == 2)) {
        throw std::invalid_argument(in.is_two_channel()
                                        ? "cpu backend: a two-channel window, but the backend was made for one receive channel"
                                        : "cpu backend: made for two receive channels, but the window holds one");
    }
    // A ci16 window is converted first (the same to_cf32 as every other conversion), a
    // two-channel window split into its channels, into storage kept across batches.
    std::array<const sample_batch*, max_receive_channels> batch{&in, nullptr};
    if (in.is_ci16()) {
        widen_batch(in, m.widened);
        batch[0] = &m.widened;
    } else if (in.is_two_channel()) {
        for (int c = 0; c < channels; ++c) {
            channel_batch(in, c, m.planar[static_cast<std::size_t>(c)]);
            batch[static_cast<std::size_t>(c)] = &m.planar[static_cast<std::size_t>(c)];
        }
    }
    const auto count = static_cast<std::size_t>(channels);
    if (!m.geom.resampling) {
        m.process_chain(std::span(batch.data(), count), out);
        return;
    }
    // The input stage: the window at 2 samples per bit, then its packets' starts as input
    // sample indices again.
    std::array<sample_batch, max_receive_channels> resampled;
    std::array<const sample_batch*, max_receive_channels> chain_batch{};
    for (std::size_t c = 0; c < count; ++c) {
        resampled[c] = resample_batch(*batch[c], m.geom);
        chain_batch[c] = &resampled[c];
    }
    m.process_chain(std::span(chain_batch.data(), count), out);
    for (auto& rec : out.packets) rec.start_sample = input_index(*batch[0], rec.start_sample, m.geom);
}

void cpu_backend::impl::process_chain(std::span<const sample_batch* const> channels, batch_output& out)
{
    const sample_batch& batch = *channels[0];
    out.reset(batch.index, cfg.streams());
    const std::size_t len = batch.samples.size();
    if (len < detector_span) return;
    std::array<std::span<const cf32>, max_receive_channels> windows{};
    std::array<const cf32*, max_receive_channels> data{};
    for (std::size_t c = 0; c < channels.size(); ++c) {
        windows[c] = channels[c]->samples;
        data[c] = channels[c]->samples.data();
    }
    const std::span<const std::span<const cf32>> all(windows.data(), channels.size());

    // Kept across batches: a full window's metric is ~300 MB, not to be allocated per batch.
    metric.resize(len - detector_span + 1);
    preamble_metric(all, metric, t.preamble_template);
    auto found = locate_packets(batch, metric, cfg.detection_threshold, t.template_offset);
    check_packet_starts(all, found, t);
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
    const bool stream = deframer.has_value();
    if (stream) stream_llr.assign(np * static_cast<std::size_t>(out.streams) * waveform::data_bits, 0.0f);
    const int nthreads = threads;
#pragma omp parallel for schedule(dynamic) num_threads(nthreads)
    for (std::size_t i = 0; i < np; ++i) {
        auto& w = *ws[static_cast<std::size_t>(omp_get_thread_num())];
        auto& rec = out.packets[i];
        packet(std::span<const cf32* const>(data.data(), channels.size()), len, starts[i], rec, out.bits.data() + i * out.packet_bytes(), w, steps[i],
               found.moved_periods[i] != 0, soft ? out.llrs.data() + i * num_paths * waveform::data_bits : nullptr,
               i == 0 ? view_out : nullptr,
               stream         ? fec_out{nullptr, nullptr, stream_llr.data() + i * static_cast<std::size_t>(out.streams) * waveform::data_bits}
               : cfg.fec_on() ? fec_out{out.packet_decoded(i, 0), out.packet_codewords(i, 0)}
                              : fec_out{});
        rec.start_sample = batch.first_sample + static_cast<std::uint64_t>(starts[i]);
        rec.metric = found.metrics[i];
        rec.clock_ppm = ppm[i];
        rec.clock_corrected = steps[i] != fixed_pos{1} << fixed_frac_bits;
    }
    for (const auto& rec : out.packets) out.nonfinite_samples += rec.nonfinite_samples;
    if (stream) decode_stream(out);
}

void cpu_backend::impl::decode_stream(batch_output& out)
{
    const std::size_t np = out.packets.size();
    const auto streams = static_cast<std::size_t>(out.streams);
    std::vector<std::uint64_t> starts(np);
    for (std::size_t i = 0; i < np; ++i) starts[i] = out.packets[i].start_sample;
    const auto places = data_field_places(starts, static_cast<double>(waveform::L_pkt));
    const stream_fields fields{places, stream_llr, out.streams};
    // The edges: the first two packets and the last two (all of them up to four).
    const std::size_t per_packet = streams * waveform::data_bits;
    for (const std::size_t i : stream_edge_packets(np)) {
        out.fec_edge_places.push_back(places[i]);
        out.fec_edge_llr.insert(out.fec_edge_llr.end(), stream_llr.begin() + static_cast<std::ptrdiff_t>(i * per_packet),
                                stream_llr.begin() + static_cast<std::ptrdiff_t>((i + 1) * per_packet));
    }
    const auto offset = deframer->find_offset(fields);
    if (!offset) return;
    const auto frames = deframer->frames(places, *offset);
    const auto jobs = deframer->assign(frames, *offset, framing.codewords, out);
    const auto k_bytes = static_cast<std::size_t>(framing.k / 8);
    const auto total = static_cast<std::ptrdiff_t>(jobs.size() * streams);
    const int nthreads = threads;
#pragma omp parallel for schedule(dynamic) num_threads(nthreads)
    for (std::ptrdiff_t ti = 0; ti < total; ++ti) {
        auto& w = *ws[static_cast<std::size_t>(omp_get_thread_num())];
        const auto& jb = jobs[static_cast<std::size_t>(ti) / streams];
        const int s = static_cast<int>(static_cast<std::size_t>(ti) % streams);
        deframer->codeword_llrs(fields, s, frames[jb.frame], w.word_llr);
        w.decoder->decode_one(w.word_llr, out.packet_decoded(jb.owner, s) + static_cast<std::size_t>(jb.slot) * k_bytes,
                              out.packet_codewords(jb.owner, s)[jb.slot]);
    }
}

}  // namespace paq::dsp
