// paq-ldpc-curve: frame and bit error rates of an AR4JA LDPC code (dsp/ldpc.hpp) against
// Eb/N0 per information bit, BPSK over AWGN with ideal LLRs (2y / sigma^2): the decoder judged
// apart from any detector, the reference curve the receiver's coded paths are measured
// against, and the min-sum decoder against sum-product. A measurement, not a receiver.
//
//   for each Eb/N0 point i: frames of random information bits (from the seed, the point and
//   the frame's index: the same frames whatever the threads) -> encode -> BPSK + noise ->
//   decode; blocks of frames until --min-frame-errors frame errors or --max-frames frames
//   (at least --frames)
//
// --backend cuda decodes on the GPU (gpu/ldpc_decoder.hpp: layered min-sum, the CPU's schedule), every block
// of frames in one launch; the frames are the CPU's.
//
// Output: a table on stdout, a CSV (one row per point) and optionally JSON.
#include "config/cli.hpp"
#include "dsp/ldpc.hpp"
#include "dsp/ldpc_decoder.hpp"
#ifdef PAQ_HAVE_CUDA
#include "gpu/ldpc_decoder.hpp"
#endif

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <omp.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace {

namespace ldpc = paq::dsp::ldpc;

struct point {
    double ebn0_db = 0.0;
    std::uint64_t frames = 0, frame_errors = 0, bit_errors = 0, undetected = 0, iterations = 0;
    double seconds = 0.0;
};

/// One frame's random generator, from the seed, the point and the frame alone.
std::mt19937_64 frame_rng(std::uint64_t seed, std::size_t point_index, std::uint64_t frame)
{
    std::seed_seq s{static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32), static_cast<std::uint32_t>(point_index),
                    static_cast<std::uint32_t>(frame), static_cast<std::uint32_t>(frame >> 32)};
    return std::mt19937_64(s);
}

}  // namespace

int main(int argc, char** argv)
{
    CLI::App app{"paq-ldpc-curve: frame and bit error rates of an AR4JA LDPC code, BPSK over AWGN with ideal LLRs"};
    paq::cli::conventions(app, "paq-ldpc-curve", "0 curve written; 1 output not writable or a decoder failed (no GPU); 2 usage error");
    app.option_defaults()->always_capture_default();
    std::string code_name = "ar4ja-4096-2/3", decoder_name = "min-sum", format_name = "binary16", backend = "cpu", output, json;
    std::vector<double> ebn0;
    int iterations = 50, threads = 0;
    float normalization = 0.7f;
    std::uint64_t frames = 200, min_frame_errors = 50, max_frames = 100000, seed = 1;
    app.add_option("--code", code_name, "The code")->check(CLI::IsMember(paq::names_in(ldpc::code_names)));
    app.add_option("--ebn0-db", ebn0, "Eb/N0 per information bit, dB, comma-separated")->required()->delimiter(',');
    app.add_option("--decoder", decoder_name, "min-sum (layered, normalized) or sum-product (flooding, double)")
        ->check(CLI::IsMember({"min-sum", "sum-product"}));
    app.add_option("--format", format_name, "min-sum: binary16 (the receivers' arithmetic, both backends) or binary64 (CPU only)")
        ->check(CLI::IsMember(paq::names_in(ldpc::number_format_names)));
    app.add_option("--iterations", iterations, "Most iterations per frame")->check(CLI::Range(1, 1000));
    app.add_option("--normalization", normalization, "min-sum: the check messages' scale")->check(CLI::Range(0.01f, 1.0f));
    app.add_option("--frames", frames, "Frames per point at least")->check(CLI::Range(std::uint64_t{1}, std::uint64_t{100000000}));
    app.add_option("--min-frame-errors", min_frame_errors, "Frames per point until this many frame errors ...");
    app.add_option("--max-frames", max_frames, "... or this many frames");
    app.add_option("--seed", seed, "Seed of the information bits and the noise");
    app.add_option("--threads", threads, "Threads (0: all cores)")->check(CLI::Range(0, 1024));
    app.add_option("--backend", backend, "cpu, or cuda (GPU 0: layered min-sum; a build with CUDA)")->check(CLI::IsMember({"cpu", "cuda"}));
    app.add_option("--output", output, "CSV output file")->required();
    app.add_option("--json", json, "Optional JSON output file");
    if (const int rc = paq::cli::parse(app, argc, argv); rc >= 0) return rc;
    if (max_frames < frames) max_frames = frames;

    const ldpc::code c = *paq::value_named(ldpc::code_names, code_name);
#ifndef PAQ_HAVE_CUDA
    if (backend == "cuda") {
        std::cerr << "paq-ldpc-curve: --backend cuda: this build has no CUDA\n";
        return 2;
    }
#endif
    const ldpc::decoder_config cfg{decoder_name == "min-sum" ? ldpc::decoder_kind::min_sum : ldpc::decoder_kind::sum_product,
                                   iterations, normalization,
                                   *paq::value_named(ldpc::number_format_names, format_name)};
    if (backend == "cuda" && (cfg.kind != ldpc::decoder_kind::min_sum || cfg.format != ldpc::number_format::binary16)) {
        std::cerr << "paq-ldpc-curve: --backend cuda decodes with min-sum in binary16 only\n";
        return 2;
    }
    const auto& enc = ldpc::encoder::get(c);
    const auto p = enc.params();
    const double rate = static_cast<double>(p.rate_num) / p.rate_den;
    const int nthreads = threads > 0 ? threads : omp_get_max_threads();
    std::ofstream csv(output);
    if (!csv) {
        std::cerr << "paq-ldpc-curve: cannot write " << output << "\n";
        return 1;
    }
    std::printf("# %s (n %d, k %d), %s on the %s, at most %d iterations%s, %d threads, seed %llu\n", code_name.c_str(), p.n, p.k,
                decoder_name.c_str(), backend == "cuda" ? "GPU" : "CPU", iterations,
                cfg.kind == ldpc::decoder_kind::min_sum ? (", normalization " + std::to_string(normalization) + ", " + format_name).c_str() : "",
                nthreads,
                static_cast<unsigned long long>(seed));
    std::printf("%8s %9s %9s %10s %10s %8s %6s %8s\n", "ebn0_dB", "frames", "f_errors", "FER", "BER", "mean_it", "undet", "sec");
    std::vector<point> points;
    try {
    for (std::size_t pi = 0; pi < ebn0.size(); ++pi) {
        point pt;
        pt.ebn0_db = ebn0[pi];
        const double sigma2 = 1.0 / (2.0 * rate * std::pow(10.0, ebn0[pi] / 10.0));
        const auto t0 = std::chrono::steady_clock::now();
        std::vector<std::unique_ptr<ldpc::decoder>> decs(static_cast<std::size_t>(nthreads));
        if (backend == "cpu") {
            for (auto& d : decs) d = std::make_unique<ldpc::decoder>(c, cfg);
        }
#ifdef PAQ_HAVE_CUDA
        std::unique_ptr<paq::gpu::ldpc_decoder> gdec;
        if (backend == "cuda") gdec = std::make_unique<paq::gpu::ldpc_decoder>(c, cfg);
#endif
        const std::uint64_t block = backend == "cuda" ? 4096 : 16 * static_cast<std::uint64_t>(nthreads);
        const std::size_t n = static_cast<std::size_t>(p.n), k = static_cast<std::size_t>(p.k);
        std::vector<std::uint8_t> info(block * k), out(block * k);
        std::vector<float> llr(block * n);
        std::vector<ldpc::decode_result> res(block);
        while (pt.frames < frames || (pt.frame_errors < min_frame_errors && pt.frames < max_frames)) {
            const std::uint64_t first = pt.frames, count = std::min(block, max_frames - pt.frames);
            if (count == 0) break;
            // The frames: information, codeword, BPSK and noise, each from its own generator.
#pragma omp parallel for num_threads(nthreads) schedule(dynamic)
            for (std::uint64_t f = 0; f < count; ++f) {
                auto rng = frame_rng(seed, pi, first + f);
                std::span<std::uint8_t> u(info.data() + f * k, k);
                std::vector<std::uint8_t> tx(n);
                for (auto& b : u) b = static_cast<std::uint8_t>(rng() & 1u);
                enc.encode(u, tx);
                std::normal_distribution<double> noise(0.0, std::sqrt(sigma2));
                for (std::size_t i = 0; i < n; ++i) llr[f * n + i] = static_cast<float>(-2.0 * ((tx[i] ? -1.0 : 1.0) + noise(rng)) / sigma2);
                if (backend == "cpu") {
                    res[f] = decs[static_cast<std::size_t>(omp_get_thread_num())]->decode(std::span<const float>(llr.data() + f * n, n),
                                                                                         std::span<std::uint8_t>(out.data() + f * k, k));
                }
            }
#ifdef PAQ_HAVE_CUDA
            if (gdec) {
                gdec->decode(std::span<const float>(llr.data(), count * n), count, std::span<std::uint8_t>(out.data(), count * k),
                             std::span<ldpc::decode_result>(res.data(), count));
            }
#endif
            for (std::uint64_t f = 0; f < count; ++f) {
                std::uint64_t wrong = 0;
                for (std::size_t i = 0; i < k; ++i) wrong += info[f * k + i] != out[f * k + i];
                pt.frame_errors += wrong ? 1 : 0;
                pt.bit_errors += wrong;
                pt.undetected += (wrong && res[f].converged) ? 1 : 0;
                pt.iterations += static_cast<std::uint64_t>(res[f].iterations);
            }
            pt.frames += count;
        }
        pt.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        const double fer = static_cast<double>(pt.frame_errors) / static_cast<double>(pt.frames);
        const double ber = static_cast<double>(pt.bit_errors) / (static_cast<double>(pt.frames) * p.k);
        std::printf("%8.2f %9llu %9llu %10.3e %10.3e %8.2f %6llu %8.1f\n", pt.ebn0_db, static_cast<unsigned long long>(pt.frames),
                    static_cast<unsigned long long>(pt.frame_errors), fer, ber,
                    static_cast<double>(pt.iterations) / static_cast<double>(pt.frames), static_cast<unsigned long long>(pt.undetected),
                    pt.seconds);
        std::fflush(stdout);
        points.push_back(pt);
    }
    } catch (const std::exception& e) {
        std::cerr << "paq-ldpc-curve: " << e.what() << "\n";
        return 1;
    }
    csv << "code,decoder,backend,max_iterations,normalization,ebn0_db,frames,frame_errors,fer,bit_errors,ber,mean_iterations,undetected,seed\n";
    for (const auto& pt : points) {
        csv << code_name << ',' << decoder_name << ',' << backend << ',' << iterations << ',' << (cfg.kind == ldpc::decoder_kind::min_sum ? normalization : 1.0f)
            << ',' << pt.ebn0_db << ',' << pt.frames << ',' << pt.frame_errors << ','
            << static_cast<double>(pt.frame_errors) / static_cast<double>(pt.frames) << ',' << pt.bit_errors << ','
            << static_cast<double>(pt.bit_errors) / (static_cast<double>(pt.frames) * p.k) << ','
            << static_cast<double>(pt.iterations) / static_cast<double>(pt.frames) << ',' << pt.undetected << ',' << seed << '\n';
    }
    if (!csv) {
        std::cerr << "paq-ldpc-curve: error writing " << output << "\n";
        return 1;
    }
    if (!json.empty()) {
        nlohmann::json j;
        j["tool"] = "paq-ldpc-curve";
        j["settings"] = {{"code", code_name}, {"n", p.n}, {"k", p.k}, {"decoder", decoder_name}, {"max_iterations", iterations},
                         {"normalization", normalization}, {"format", format_name}, {"backend", backend}, {"seed", seed}, {"channel", "BPSK over AWGN, LLR 2y/sigma^2"}};
        auto pts = nlohmann::json::array();
        for (const auto& pt : points) {
            pts.push_back({{"ebn0_db", pt.ebn0_db}, {"frames", pt.frames}, {"frame_errors", pt.frame_errors},
                           {"fer", static_cast<double>(pt.frame_errors) / static_cast<double>(pt.frames)}, {"bit_errors", pt.bit_errors},
                           {"ber", static_cast<double>(pt.bit_errors) / (static_cast<double>(pt.frames) * p.k)},
                           {"mean_iterations", static_cast<double>(pt.iterations) / static_cast<double>(pt.frames)},
                           {"undetected", pt.undetected}, {"seconds", pt.seconds}});
        }
        j["points"] = pts;
        std::ofstream jf(json);
        jf << j.dump(2) << '\n';
        if (!jf) {
            std::cerr << "paq-ldpc-curve: cannot write " << json << "\n";
            return 1;
        }
    }
    return 0;
}
