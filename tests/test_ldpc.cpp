// The AR4JA LDPC codes of IRIG 106 chapter 2 Appendix 2-D / CCSDS 131.0-B (dsp/ldpc.hpp): each
// code's size and rate as the standard gives them, its parity-check matrix's structure, the
// permutations, and the encoder: every codeword satisfies H, the code is linear, and the
// codewords equal published ones.
//
// Reference codewords: IRIG 106-24 chapter 2 Appendix 2-D publishes one per code, whose text
// was not available here. The ones below are from the open-source labrador-ldpc encoder's
// test (github.com/adamgreig/labrador-ldpc, src/encoder.rs): information bytes 0, 1, 2, ...
// (byte i = i mod 256, each MSB first), and the transmitted parity bytes of each code (the
// whole parity for k = 1024, its first 8 bytes for k = 4096). An encoder made independently
// from the standard's tables gives the same codeword only if both built the same H (the
// parity of a systematic code is unique when H's parity part is invertible).
#include "dsp/ldpc.hpp"
#include "dsp/ldpc_decoder.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <set>
#include <string>
#include <vector>

using namespace paq::dsp;

namespace {

std::vector<std::uint8_t> bits_of_bytes(const std::vector<std::uint8_t>& bytes)
{
    std::vector<std::uint8_t> b;
    for (auto x : bytes) {
        for (int i = 7; i >= 0; --i) b.push_back(static_cast<std::uint8_t>((x >> i) & 1u));
    }
    return b;
}

std::string hex_of_bits(const std::uint8_t* bits, std::size_t n)
{
    std::string out;
    const char* digits = "0123456789ABCDEF";
    for (std::size_t i = 0; i + 8 <= n; i += 8) {
        unsigned v = 0;
        for (std::size_t j = 0; j < 8; ++j) v = (v << 1) | bits[i + j];
        out += digits[v >> 4];
        out += digits[v & 15];
    }
    return out;
}

std::vector<std::uint8_t> random_info(int k, std::uint32_t seed)
{
    std::mt19937 rng(seed);
    std::vector<std::uint8_t> u(static_cast<std::size_t>(k));
    for (auto& b : u) b = static_cast<std::uint8_t>(rng() & 1u);
    return u;
}

}  // namespace

TEST(ldpc, each_code_has_the_standards_sizes_and_rate)
{
    struct expect {
        ldpc::code c;
        int k, m, n;
    };
    // CCSDS 131.0-B tables of M and n.
    for (const auto& e : {expect{ldpc::code::k1024_r1_2, 1024, 512, 2048}, expect{ldpc::code::k1024_r2_3, 1024, 256, 1536},
                          expect{ldpc::code::k1024_r4_5, 1024, 128, 1280}, expect{ldpc::code::k4096_r1_2, 4096, 2048, 8192},
                          expect{ldpc::code::k4096_r2_3, 4096, 1024, 6144}, expect{ldpc::code::k4096_r4_5, 4096, 512, 5120}}) {
        const auto p = ldpc::params(e.c);
        EXPECT_EQ(p.k, e.k) << ldpc::to_string(e.c);
        EXPECT_EQ(p.m, e.m) << ldpc::to_string(e.c);
        EXPECT_EQ(p.n, e.n) << ldpc::to_string(e.c);
        EXPECT_EQ(p.k * p.rate_den, p.n * p.rate_num) << ldpc::to_string(e.c);  // k / n is the rate
        EXPECT_EQ(p.n_full, p.n + p.m);
        EXPECT_EQ(p.checks, 3 * p.m);
        EXPECT_EQ(paq::value_named(ldpc::code_names, ldpc::to_string(e.c)), e.c);
    }
    // The iNET data field (6144 bits) holds exactly one k = 4096 rate-2/3 codeword.
    EXPECT_EQ(ldpc::params(ldpc::code::k4096_r2_3).n, 6144);
}

TEST(ldpc, every_permutation_is_a_bijection_of_its_block)
{
    for (int m : {128, 256, 512, 1024, 2048}) {
        for (int k = 1; k <= 26; ++k) {
            std::vector<bool> seen(static_cast<std::size_t>(m), false);
            for (std::uint32_t i = 0; i < static_cast<std::uint32_t>(m); ++i) {
                const auto c = ldpc::permutation(k, m, i);
                ASSERT_LT(c, static_cast<std::uint32_t>(m));
                EXPECT_FALSE(seen[c]) << "Pi_" << k << " M " << m << " column " << c << " twice";
                seen[c] = true;
            }
        }
    }
    // Row i's quarter j goes to quarter (theta_k + j) mod 4, shifted by phi_k(j, M): Pi_1 at
    // M = 128 (theta 3, phi(0) = 1) sends row 0 to column 3 x 32 + 1.
    EXPECT_EQ(ldpc::permutation(1, 128, 0), 97u);
    EXPECT_THROW((void)ldpc::permutation(27, 128, 0), std::invalid_argument);
    EXPECT_THROW((void)ldpc::permutation(1, 100, 0), std::invalid_argument);
}

TEST(ldpc, the_parity_check_matrices_have_the_protographs_row_and_column_weights)
{
    for (auto c : ldpc::all_codes) {
        const auto& h = ldpc::parity_check_matrix(c);
        const auto& p = h.p;
        ASSERT_EQ(h.rows.size(), static_cast<std::size_t>(p.checks));
        // Block row 0 has weight 3; block rows 1 and 2 have 6 (rate 1/2), 10 (2/3), 18 (4/5):
        // no two permutations of a sum meet.
        const std::size_t heavy = p.rate_num == 1 ? 6 : p.rate_num == 2 ? 10 : 18;
        std::vector<int> col_weight(static_cast<std::size_t>(p.n_full), 0);
        for (std::size_t r = 0; r < h.rows.size(); ++r) {
            EXPECT_EQ(h.rows[r].size(), r < static_cast<std::size_t>(p.m) ? 3u : heavy) << ldpc::to_string(c) << " row " << r;
            for (auto col : h.rows[r]) {
                ASSERT_LT(col, static_cast<std::uint32_t>(p.n_full));
                ++col_weight[col];
            }
        }
        // Each column block's degree is its protograph column's: rate 1/2's five blocks
        // {0,I,I} 2, {0,I,Pi5+Pi6} 3, {I,0,0} 1, {0,I,Pi7+Pi8} 3, {I+Pi1,Pi2+Pi3+Pi4,I} 6 (the
        // punctured one), and 4 for each block rates 2/3 and 4/5 put in front.
        std::vector<int> degrees(static_cast<std::size_t>(p.n_full / p.m - 5), 4);
        for (int d : {2, 3, 1, 3, 6}) degrees.push_back(d);
        for (int col = 0; col < p.n_full; ++col) {
            ASSERT_EQ(col_weight[static_cast<std::size_t>(col)], degrees[static_cast<std::size_t>(col / p.m)])
                << ldpc::to_string(c) << " column " << col;
        }
    }
}

TEST(ldpc, no_two_checks_of_a_layer_share_a_bit)
{
    // The premise of the GPU's layered decoder (dsp/ldpc.hpp, layer_checks): within a quarter
    // of a block row every bit is in at most one check; half a block row already shares bits.
    for (const auto c : ldpc::all_codes) {
        const auto& h = ldpc::parity_check_matrix(c);
        const int layer = ldpc::layer_checks(h.p);
        ASSERT_EQ(h.p.checks % layer, 0) << ldpc::to_string(c);
        EXPECT_EQ(h.p.checks / layer, 12) << ldpc::to_string(c);
        EXPECT_EQ(h.bits_shared_within(layer), 0u) << ldpc::to_string(c);
        EXPECT_GT(h.bits_shared_within(2 * layer), 0u) << ldpc::to_string(c);
    }
}

TEST(ldpc, every_codeword_satisfies_h_and_the_code_is_linear)
{
    for (auto c : ldpc::all_codes) {
        const auto& enc = ldpc::encoder::get(c);
        const auto& h = ldpc::parity_check_matrix(c);
        const auto p = enc.params();
        std::vector<std::uint8_t> a(static_cast<std::size_t>(p.n_full)), b(a.size()), s(a.size());
        const auto ua = random_info(p.k, 11), ub = random_info(p.k, 12);
        enc.encode_full(ua, a);
        enc.encode_full(ub, b);
        EXPECT_TRUE(h.holds(a)) << ldpc::to_string(c);
        EXPECT_TRUE(h.holds(b)) << ldpc::to_string(c);
        EXPECT_TRUE(std::equal(ua.begin(), ua.end(), a.begin())) << "not systematic";
        std::vector<std::uint8_t> us(ua.size());
        for (std::size_t i = 0; i < us.size(); ++i) us[i] = ua[i] ^ ub[i];
        enc.encode_full(us, s);
        for (std::size_t i = 0; i < s.size(); ++i) ASSERT_EQ(s[i], a[i] ^ b[i]) << ldpc::to_string(c) << " bit " << i;
        // One flipped bit anywhere breaks at least one check; the transmitted word is the
        // full one's first n bits.
        a[static_cast<std::size_t>(p.k + 5)] ^= 1u;
        EXPECT_GT(h.failed_checks(a), 0u);
        std::vector<std::uint8_t> tx(static_cast<std::size_t>(p.n));
        enc.encode(ub, tx);
        EXPECT_TRUE(std::equal(tx.begin(), tx.end(), b.begin()));
        // The all-zero word is a codeword; sizes are checked.
        std::vector<std::uint8_t> zero(static_cast<std::size_t>(p.n_full), 0);
        EXPECT_TRUE(h.holds(zero));
        std::vector<std::uint8_t> short_info(static_cast<std::size_t>(p.k - 1));
        EXPECT_THROW(enc.encode(short_info, tx), std::invalid_argument);
    }
}

TEST(ldpc, the_encoder_gives_the_published_codewords)
{
    struct vec {
        ldpc::code c;
        std::string parity;  // transmitted parity bytes, hex (a prefix for k = 4096)
    };
    const std::vector<vec> vectors = {
        {ldpc::code::k1024_r4_5, "F168E07945E308AEEFD16856600A90FAF655A2016077F7E0FAB54906DD6DCD7D"},
        {ldpc::code::k1024_r2_3, "994D02175387C8DD422E4629066A026DE1ABB9A2AAE0F2E9F6AAE6F0421E52445F62D1A88FB20178B1D62D0BD6B14A6C9326"
                                 "69AAE0551AD99B9435273F309183"},
        {ldpc::code::k1024_r1_2,
         "EEA9AAAF98D916CE6C2B282D1A5B944CA4F1B3D31AEC585AB3E6A4C40DFB4F4DD807A1AD0AE962C4D40BADA106E56EC8A6686AD5E6AC09BE3FF1F3"
         "4C7F359027F26469038337429121B7BAD050E49142E40D64197084A5B7866F067B12E6C7D5AB10DB034FF68AFE17AC67BFF34A364204AE85B3B647CE"
         "C40FA58EB8BD4CC5CF"},
        {ldpc::code::k4096_r4_5, "4AA9B68947B9AA41"},
        {ldpc::code::k4096_r2_3, "A742B86D957B9C90"},
        {ldpc::code::k4096_r1_2, "F60056CD23631AED"},
    };
    for (const auto& v : vectors) {
        const auto& enc = ldpc::encoder::get(v.c);
        const auto p = enc.params();
        std::vector<std::uint8_t> bytes(static_cast<std::size_t>(p.k / 8));
        for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<std::uint8_t>(i % 256);
        const auto info = bits_of_bytes(bytes);
        std::vector<std::uint8_t> cw(static_cast<std::size_t>(p.n));
        enc.encode(info, cw);
        const auto parity = hex_of_bits(cw.data() + p.k, static_cast<std::size_t>(p.n - p.k));
        EXPECT_EQ(parity.substr(0, v.parity.size()), v.parity) << ldpc::to_string(v.c);
        if (p.k == 1024) {
            EXPECT_EQ(parity.size(), v.parity.size()) << "the whole parity";
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The decoders

namespace {

/// BPSK over AWGN at `ebn0_db` per information bit: the detectors' LLRs, log P(1) / P(0),
/// of a codeword's transmitted bits.
std::vector<float> bpsk_llrs(const std::vector<std::uint8_t>& tx, double rate, double ebn0_db, std::mt19937& rng)
{
    const double sigma2 = 1.0 / (2.0 * rate * std::pow(10.0, ebn0_db / 10.0));
    std::normal_distribution<double> noise(0.0, std::sqrt(sigma2));
    std::vector<float> l(tx.size());
    for (std::size_t i = 0; i < tx.size(); ++i) {
        const double y = (tx[i] ? -1.0 : 1.0) + noise(rng);
        l[i] = static_cast<float>(-2.0 * y / sigma2);
    }
    return l;
}

struct frame_count {
    int frames = 0, errors = 0, converged_wrong = 0, iterations = 0;
};

frame_count run_frames(ldpc::code c, const ldpc::decoder_config& cfg, double ebn0_db, int frames, std::uint32_t seed)
{
    const auto& enc = ldpc::encoder::get(c);
    const auto p = enc.params();
    ldpc::decoder dec(c, cfg);
    std::mt19937 rng(seed);
    frame_count fc;
    std::vector<std::uint8_t> tx(static_cast<std::size_t>(p.n)), out(static_cast<std::size_t>(p.k));
    for (int f = 0; f < frames; ++f) {
        const auto u = random_info(p.k, seed * 1000u + static_cast<std::uint32_t>(f));
        enc.encode(u, tx);
        const auto l = bpsk_llrs(tx, static_cast<double>(p.rate_num) / p.rate_den, ebn0_db, rng);
        const auto r = dec.decode(l, out);
        const bool right = out == u;
        ++fc.frames;
        fc.errors += right ? 0 : 1;
        fc.converged_wrong += r.converged && !right ? 1 : 0;
        fc.iterations += r.iterations;
        EXPECT_EQ(r.converged, r.failed_checks == 0);
    }
    return fc;
}

}  // namespace

TEST(ldpc_decoder, a_clean_codeword_decodes_at_once_on_every_code)
{
    for (auto c : ldpc::all_codes) {
        const auto& enc = ldpc::encoder::get(c);
        const auto p = enc.params();
        const auto u = random_info(p.k, 77);
        std::vector<std::uint8_t> tx(static_cast<std::size_t>(p.n)), out(static_cast<std::size_t>(p.k)),
            word(static_cast<std::size_t>(p.n_full)), full(static_cast<std::size_t>(p.n_full));
        enc.encode(u, tx);
        enc.encode_full(u, full);
        std::vector<float> l(tx.size());
        for (std::size_t i = 0; i < tx.size(); ++i) l[i] = tx[i] ? 8.0f : -8.0f;
        for (auto kind : {ldpc::decoder_kind::min_sum, ldpc::decoder_kind::sum_product}) {
            ldpc::decoder dec(c, {kind, 50, 0.7f});
            const auto r = dec.decode(l, out, word);
            EXPECT_TRUE(r.converged) << ldpc::to_string(c);
            EXPECT_LE(r.iterations, 2) << ldpc::to_string(c);  // the punctured bits take one round
            EXPECT_EQ(out, u) << ldpc::to_string(c);
            EXPECT_EQ(word, full) << ldpc::to_string(c) << ": the punctured bits are found too";
        }
    }
}

TEST(ldpc_decoder, decodes_bpsk_over_awgn_and_says_when_it_did_not)
{
    // (2048, 1024) rate 1/2 at 2.5 dB: AR4JA's frame error rate is near 1e-4 there; at 0 dB
    // almost every frame fails, and a failure is reported as such, never as a codeword.
    ldpc::decoder_config ms{ldpc::decoder_kind::min_sum, 50, 0.7f};
    const auto good = run_frames(ldpc::code::k1024_r1_2, ms, 2.5, 40, 5);
    EXPECT_EQ(good.errors, 0);
    EXPECT_LT(good.iterations / good.frames, 15) << "early termination";
    const auto bad = run_frames(ldpc::code::k1024_r1_2, ms, 0.0, 20, 6);
    EXPECT_GE(bad.errors, 15);
    EXPECT_EQ(bad.converged_wrong, 0);
    // Rate 4/5 (1280, 1024) at 4.5 dB, and the k = 4096 rate-2/3 code the iNET data field holds
    // at 2.5 dB.
    EXPECT_EQ(run_frames(ldpc::code::k1024_r4_5, ms, 4.5, 20, 7).errors, 0);
    EXPECT_EQ(run_frames(ldpc::code::k4096_r2_3, ms, 2.5, 8, 8).errors, 0);
}

TEST(ldpc_decoder, erased_bits_are_recovered)
{
    // A tenth of the bits erased (LLR 0, as a lost packet's bits are) at 3 dB.
    const auto c = ldpc::code::k1024_r1_2;
    const auto& enc = ldpc::encoder::get(c);
    const auto p = enc.params();
    std::mt19937 rng(31);
    ldpc::decoder dec(c);
    std::vector<std::uint8_t> tx(static_cast<std::size_t>(p.n)), out(static_cast<std::size_t>(p.k));
    int right = 0;
    for (int f = 0; f < 10; ++f) {
        const auto u = random_info(p.k, 900u + static_cast<std::uint32_t>(f));
        enc.encode(u, tx);
        auto l = bpsk_llrs(tx, 0.5, 3.0, rng);
        for (std::size_t i = static_cast<std::size_t>(f) * 100; i < static_cast<std::size_t>(f) * 100 + 205; ++i) l[i] = 0.0f;
        l[3] = std::nanf("");  // a NaN is an erasure too
        const auto r = dec.decode(l, out);
        right += r.converged && out == u ? 1 : 0;
    }
    EXPECT_EQ(right, 10);
}

TEST(ldpc_decoder, the_posterior_agrees_with_the_decisions_and_outweighs_the_channel)
{
    // k = 4096 rate 2/3 over BPSK at 2.6 dB, both decoders: each transmitted bit's posterior
    // has the sign of its decision and is far surer than the channel's LLR; the extrinsic LLR
    // is the posterior less the input as the decoder took it (a few inputs beyond its +-30
    // limit); a word of erasures decoded after it leaves both at 0 (not the last word's).
    const auto c = ldpc::code::k4096_r2_3;
    const auto& enc = ldpc::encoder::get(c);
    const auto p = enc.params();
    const auto n = static_cast<std::size_t>(p.n);
    std::mt19937 rng(4711);
    const auto u = random_info(p.k, 4712u);
    std::vector<std::uint8_t> tx(n), info(static_cast<std::size_t>(p.k)), word(static_cast<std::size_t>(p.n_full));
    enc.encode(u, tx);
    auto l = bpsk_llrs(tx, 2.0 / 3.0, 2.6, rng);
    for (std::size_t i = 0; i < 8; ++i) l[i] = tx[i] ? 60.0f : -60.0f;  // beyond the decoder's limit
    double channel = 0.0;
    for (const float v : l) channel += std::abs(v);
    for (const auto kind : {ldpc::decoder_kind::min_sum, ldpc::decoder_kind::sum_product}) {
        ldpc::decoder dec(c, {kind, 50, 0.7f});
        const auto r = dec.decode(l, info, word);
        ASSERT_TRUE(r.converged);
        ASSERT_EQ(info, u);
        std::vector<float> post(n);
        dec.posterior(post);
        double sure = 0.0;
        std::size_t disagree = 0;
        for (std::size_t i = 0; i < n; ++i) {
            disagree += (post[i] > 0.0f) != (word[i] == 1) ? 1 : 0;
            sure += std::abs(post[i]);
        }
        EXPECT_EQ(disagree, 0u);
        EXPECT_GT(sure, 3.0 * channel) << "mean |posterior| " << sure / static_cast<double>(n) << " against the channel's " << channel / static_cast<double>(n);
        std::vector<float> ext(n);
        dec.extrinsic(ext);
        const bool half = kind == ldpc::decoder_kind::min_sum;  // binary16 by default
        for (std::size_t i = 0; i < n; ++i) {
            const float limited = std::clamp(l[i], -30.0f, 30.0f);
            const float seen = half ? ldpc::round_to_binary16(limited) : limited;
            ASSERT_NEAR(post[i] - ext[i], seen, 1e-4f * (1.0f + std::abs(post[i]))) << "bit " << i;
        }
        const std::vector<float> erased(n, 0.0f);
        (void)dec.decode(erased, info);
        dec.posterior(post);
        dec.extrinsic(ext);
        EXPECT_TRUE(std::all_of(post.begin(), post.end(), [](float v) { return v == 0.0f; }));
        EXPECT_TRUE(std::all_of(ext.begin(), ext.end(), [](float v) { return v == 0.0f; }));
        std::vector<float> wrong(n + 1);
        EXPECT_THROW(dec.posterior(wrong), std::invalid_argument);
        EXPECT_THROW(dec.extrinsic(wrong), std::invalid_argument);
    }
}

TEST(ldpc_decoder, erasures_it_cannot_resolve_never_make_a_codeword)
{
    // A word of erasures only (a stream with no soft values, a frame no packet held) satisfies
    // every check with its beliefs at 0 and would read as the all-zero codeword: it fails every
    // check, after 0 iterations, on both decoders. So does a word whose erasures are too many to
    // resolve, even where the rest is clean and the truth is the all-zero word its undecided bits
    // would read as.
    for (auto c : {ldpc::code::k1024_r1_2, ldpc::code::k4096_r2_3}) {
        const auto p = ldpc::params(c);
        std::vector<std::uint8_t> out(static_cast<std::size_t>(p.k), 1), word(static_cast<std::size_t>(p.n_full), 1);
        for (auto kind : {ldpc::decoder_kind::min_sum, ldpc::decoder_kind::sum_product}) {
            ldpc::decoder dec(c, {kind, 20, 0.7f});
            for (float erasure : {0.0f, std::nanf("")}) {
                const std::vector<float> none(static_cast<std::size_t>(p.n), erasure);
                const auto r = dec.decode(none, out, word);
                EXPECT_FALSE(r.converged) << ldpc::to_string(c);
                EXPECT_EQ(r.iterations, 0) << ldpc::to_string(c);
                EXPECT_EQ(r.failed_checks, static_cast<std::size_t>(p.checks)) << ldpc::to_string(c);
                EXPECT_TRUE(std::all_of(out.begin(), out.end(), [](std::uint8_t b) { return b == 0; }));
                EXPECT_TRUE(std::all_of(word.begin(), word.end(), [](std::uint8_t b) { return b == 0; }));
            }
            // The all-zero codeword, its last 70 % erased: beyond what any rate-1/2 or 2/3 code
            // can resolve.
            std::vector<float> l(static_cast<std::size_t>(p.n), -8.0f);
            std::fill(l.begin() + p.n * 3 / 10, l.end(), 0.0f);
            const auto r = dec.decode(l, out);
            EXPECT_FALSE(r.converged) << ldpc::to_string(c);
            EXPECT_GT(r.failed_checks, 0u) << ldpc::to_string(c);
            EXPECT_EQ(r.iterations, 20) << ldpc::to_string(c);
        }
    }
}

TEST(ldpc_decoder, min_sum_loses_little_against_sum_product)
{
    // At 1.5 dB (rate 1/2, k = 1024) both fail on some frames: the layered min-sum decoder
    // (50 iterations) no more than twice as often as flooding sum-product with 100.
    const auto ms = run_frames(ldpc::code::k1024_r1_2, {ldpc::decoder_kind::min_sum, 50, 0.7f}, 1.5, 60, 41);
    const auto sp = run_frames(ldpc::code::k1024_r1_2, {ldpc::decoder_kind::sum_product, 100, 1.0f}, 1.5, 60, 41);
    std::printf("1.5 dB, 60 frames: min-sum %d frame errors (%.1f iterations), sum-product %d (%.1f)\n", ms.errors,
                static_cast<double>(ms.iterations) / ms.frames, sp.errors, static_cast<double>(sp.iterations) / sp.frames);
    EXPECT_GT(ms.errors, 0) << "the point is too easy to compare";
    EXPECT_LE(ms.errors, 2 * sp.errors + 2);
    EXPECT_EQ(ms.converged_wrong + sp.converged_wrong, 0);
}

TEST(ldpc_decoder, refuses_wrong_sizes_and_settings)
{
    EXPECT_THROW(ldpc::decoder(ldpc::code::k1024_r1_2, {ldpc::decoder_kind::min_sum, 0, 0.75f}), std::invalid_argument);
    EXPECT_THROW(ldpc::decoder(ldpc::code::k1024_r1_2, {ldpc::decoder_kind::min_sum, 50, 1.5f}), std::invalid_argument);
    ldpc::decoder dec(ldpc::code::k1024_r1_2);
    std::vector<float> l(100);
    std::vector<std::uint8_t> out(1024);
    EXPECT_THROW((void)dec.decode(l, out), std::invalid_argument);
}

TEST(ldpc_decoder, binary16_rounding_is_ieee_round_to_nearest_even)
{
#ifdef __FLT16_MAX__
    // Against the compiler's binary16 conversion: every binary16 value and the midpoints between
    // neighbours (the ties), each with the floats just around it, then random floats of every
    // magnitude the decoder holds.
    const auto ieee = [](float x) { return static_cast<float>(static_cast<_Float16>(x)); };
    int checked = 0;
    for (std::uint32_t bits = 0; bits < 0x7bffu; ++bits) {
        const auto h = std::bit_cast<_Float16>(static_cast<std::uint16_t>(bits));
        const auto next = std::bit_cast<_Float16>(static_cast<std::uint16_t>(bits + 1));
        const float a = static_cast<float>(h), mid = (a + static_cast<float>(next)) / 2.0f;
        for (float x : {a, mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e9f)}) {
            for (float s : {x, -x}) {
                ASSERT_EQ(std::bit_cast<std::uint32_t>(ldpc::round_to_binary16(s)), std::bit_cast<std::uint32_t>(ieee(s))) << s;
                ++checked;
            }
        }
    }
    std::mt19937 rng(2029);
    std::uniform_real_distribution<float> exponent(-30.0f, 15.9f), sign(-1.0f, 1.0f);
    for (int i = 0; i < 1000000; ++i) {
        const float x = std::copysign(std::exp2(exponent(rng)), sign(rng));
        ASSERT_EQ(std::bit_cast<std::uint32_t>(ldpc::round_to_binary16(x)), std::bit_cast<std::uint32_t>(ieee(x))) << x;
        ++checked;
    }
    EXPECT_GT(checked, 1000000);
#else
    GTEST_SKIP() << "the compiler has no _Float16 to compare with";
#endif
}

TEST(ldpc_decoder, binary16_decodes_as_binary64_does)
{
    // The receivers' min-sum in binary16 against the same in binary64 on the same frames, where
    // a few frames fail: the same codeword wherever both converge, about as many failures and
    // iterations (the difference a rounding makes now and then in a frame's course).
    struct point {
        ldpc::code c;
        double ebn0_db;
        int frames;
    };
    for (const point& pt : {point{ldpc::code::k1024_r1_2, 1.6, 120}, point{ldpc::code::k4096_r2_3, 1.8, 60}}) {
        const auto& enc = ldpc::encoder::get(pt.c);
        const auto p = enc.params();
        ldpc::decoder half(pt.c, {ldpc::decoder_kind::min_sum, 50, 0.7f, ldpc::number_format::binary16});
        ldpc::decoder full(pt.c, {ldpc::decoder_kind::min_sum, 50, 0.7f, ldpc::number_format::binary64});
        std::mt19937 rng(4242);
        std::vector<std::uint8_t> tx(static_cast<std::size_t>(p.n)), a(static_cast<std::size_t>(p.k)), b(a.size());
        int failed16 = 0, failed64 = 0, both = 0, differing_bits = 0;
        long iterations16 = 0, iterations64 = 0;
        for (int f = 0; f < pt.frames; ++f) {
            const auto u = random_info(p.k, 5000u + static_cast<std::uint32_t>(f));
            enc.encode(u, tx);
            const auto l = bpsk_llrs(tx, static_cast<double>(p.rate_num) / p.rate_den, pt.ebn0_db, rng);
            const auto r16 = half.decode(l, a);
            const auto r64 = full.decode(l, b);
            failed16 += r16.converged ? 0 : 1;
            failed64 += r64.converged ? 0 : 1;
            iterations16 += r16.iterations;
            iterations64 += r64.iterations;
            if (r16.converged && r64.converged) {
                ++both;
                for (std::size_t i = 0; i < a.size(); ++i) differing_bits += a[i] != b[i] ? 1 : 0;
            }
        }
        const auto name = ldpc::to_string(pt.c);
        EXPECT_GT(failed64, 0) << name << ": the point is meant to fail some frames";
        EXPECT_LE(std::abs(failed16 - failed64), std::max(2, failed64 / 3)) << name << ": " << failed16 << " against " << failed64;
        EXPECT_NEAR(static_cast<double>(iterations16), static_cast<double>(iterations64), 0.05 * static_cast<double>(iterations64)) << name;
        EXPECT_GT(both, pt.frames / 2) << name;
        EXPECT_EQ(differing_bits, 0) << name;
    }
}
