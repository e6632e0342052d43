#include "dsp/ldpc.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>

namespace paq::dsp::ldpc {

namespace {

// CCSDS 131.0-B, the AR4JA permutations: theta_k (k = 1 .. 26) and phi_k(j, M) (j = 0 .. 3)
// for the block sizes of the six codes.
constexpr std::array<int, 26> theta = {3, 0, 1, 2, 2, 3, 0, 1, 0, 1, 2, 0, 2, 3, 0, 1, 2, 0, 1, 2, 0, 1, 2, 1, 2, 3};
constexpr std::array<int, 5> table_m = {128, 256, 512, 1024, 2048};
constexpr std::array<std::array<std::array<int, 4>, 26>, 5> phi = {{
    // M = 128
    {{
      {1, 0, 0, 0}, {22, 27, 12, 13}, {0, 30, 30, 19}, {26, 28, 18, 14}, {0, 7, 10, 15}, {10, 1, 16, 20},
      {5, 8, 13, 17}, {18, 20, 9, 4}, {3, 26, 7, 4}, {22, 24, 15, 11}, {3, 4, 16, 17}, {8, 12, 18, 20},
      {25, 23, 4, 8}, {25, 15, 23, 22}, {2, 15, 5, 19}, {27, 22, 3, 15}, {7, 31, 29, 5}, {7, 3, 11, 21},
      {15, 29, 4, 17}, {10, 21, 8, 9}, {4, 2, 2, 20}, {19, 5, 11, 18}, {7, 11, 11, 31}, {9, 26, 3, 13},
      {26, 9, 15, 2}, {17, 17, 13, 18}}},
    // M = 256
    {{
      {59, 0, 0, 0}, {18, 32, 46, 44}, {52, 21, 45, 51}, {23, 36, 27, 12}, {11, 30, 48, 15}, {7, 29, 37, 12},
      {22, 44, 41, 4}, {25, 29, 13, 7}, {27, 39, 9, 2}, {30, 14, 49, 30}, {43, 22, 36, 53}, {14, 15, 10, 23},
      {46, 48, 11, 29}, {62, 55, 18, 37}, {44, 39, 54, 42}, {12, 11, 40, 48}, {38, 1, 27, 4}, {47, 50, 35, 10},
      {1, 40, 25, 18}, {52, 62, 46, 56}, {61, 27, 24, 9}, {10, 38, 33, 11}, {55, 40, 18, 23}, {7, 15, 37, 8},
      {12, 11, 35, 7}, {2, 18, 21, 24}}},
    // M = 512
    {{
      {16, 0, 0, 0}, {103, 53, 8, 35}, {105, 74, 119, 97}, {0, 45, 89, 112}, {50, 47, 31, 64}, {29, 0, 122, 93},
      {115, 59, 1, 99}, {30, 102, 69, 94}, {92, 25, 92, 103}, {78, 3, 47, 91}, {70, 88, 11, 3}, {66, 65, 31, 6},
      {39, 62, 19, 39}, {84, 68, 66, 113}, {79, 91, 49, 92}, {70, 70, 81, 119}, {29, 115, 96, 74}, {32, 31, 38, 73},
      {45, 121, 83, 116}, {113, 45, 42, 31}, {86, 56, 58, 127}, {1, 54, 24, 98}, {42, 108, 25, 23}, {118, 14, 92, 38},
      {33, 30, 38, 18}, {126, 116, 120, 62}}},
    // M = 1024
    {{
      {160, 0, 0, 0}, {241, 182, 35, 162}, {185, 249, 167, 7}, {251, 65, 214, 31}, {209, 70, 84, 164}, {103, 141, 206, 11},
      {90, 237, 122, 237}, {184, 77, 67, 125}, {248, 55, 147, 133}, {12, 12, 54, 99}, {111, 227, 23, 105}, {66, 42, 93, 17},
      {173, 52, 20, 97}, {42, 243, 197, 91}, {157, 179, 46, 211}, {174, 250, 162, 128}, {104, 247, 101, 82}, {144, 164, 76, 115},
      {43, 17, 78, 248}, {181, 31, 253, 62}, {250, 149, 124, 26}, {202, 105, 143, 140}, {68, 183, 63, 121}, {177, 153, 41, 12},
      {170, 177, 214, 41}, {89, 19, 70, 249}}},
    // M = 2048
    {{
      {108, 0, 0, 0}, {126, 375, 219, 312}, {238, 436, 16, 503}, {481, 350, 263, 388}, {96, 260, 415, 48}, {28, 84, 403, 7},
      {59, 318, 184, 185}, {225, 382, 279, 328}, {323, 169, 198, 254}, {28, 213, 307, 202}, {386, 67, 432, 285}, {305, 313, 240, 11},
      {34, 242, 454, 168}, {510, 188, 294, 127}, {147, 1, 479, 8}, {199, 306, 289, 437}, {347, 397, 373, 475}, {391, 80, 104, 85},
      {165, 33, 141, 419}, {414, 7, 270, 459}, {97, 447, 439, 468}, {158, 336, 333, 209}, {86, 424, 399, 311}, {168, 134, 14, 211},
      {506, 152, 277, 510}, {489, 492, 412, 320}}}}};

/// A protograph block: zero, the identity, or the sum of the permutations listed.
struct block {
    bool identity = false;
    std::vector<int> perms;
};

/// The rate-1/2 protograph (3 x 5 blocks), then the column blocks rates 2/3 and 4/5 put in
/// front of it, each as its three rows.
using column_block = std::array<block, 3>;

std::vector<column_block> protograph(int rate_num, int rate_den)
{
    const block z{}, i{true, {}};
    auto sum = [](std::initializer_list<int> k) { return block{false, std::vector<int>(k)}; };
    auto isum = [](std::initializer_list<int> k) { return block{true, std::vector<int>(k)}; };
    // H_1/2:  [ 0   0         I   0         I + Pi1       ]
    //         [ I   I         0   I         Pi2+Pi3+Pi4   ]
    //         [ I   Pi5+Pi6   0   Pi7+Pi8   I             ]
    const std::vector<column_block> half = {{z, i, i}, {z, i, sum({5, 6})}, {i, z, z}, {z, i, sum({7, 8})},
                                            {isum({1}), sum({2, 3, 4}), i}};
    // Rate 2/3: [ 0; Pi9+Pi10+Pi11; I ] and [ 0; I; Pi12+Pi13+Pi14 ] in front.
    const std::vector<column_block> two_thirds = {{z, sum({9, 10, 11}), i}, {z, i, sum({12, 13, 14})}};
    // Rate 4/5: four more in front: [0; Pi21+Pi22+Pi23; I], [0; I; Pi24+Pi25+Pi26],
    // [0; Pi15+Pi16+Pi17; I], [0; I; Pi18+Pi19+Pi20].
    const std::vector<column_block> four_fifths = {{z, sum({21, 22, 23}), i}, {z, i, sum({24, 25, 26})},
                                                   {z, sum({15, 16, 17}), i}, {z, i, sum({18, 19, 20})}};
    std::vector<column_block> out;
    if (rate_num == 4 && rate_den == 5) out.insert(out.end(), four_fifths.begin(), four_fifths.end());
    if ((rate_num == 4 && rate_den == 5) || (rate_num == 2 && rate_den == 3)) out.insert(out.end(), two_thirds.begin(), two_thirds.end());
    out.insert(out.end(), half.begin(), half.end());
    return out;
}

parity_check build(code c)
{
    parity_check h;
    h.p = params(c);
    const auto m = static_cast<std::uint32_t>(h.p.m);
    const auto blocks = protograph(h.p.rate_num, h.p.rate_den);
    if (static_cast<int>(blocks.size() * m) != h.p.n_full) throw std::logic_error("ldpc: protograph and parameters disagree");
    h.rows.assign(static_cast<std::size_t>(h.p.checks), {});
    for (std::size_t col = 0; col < blocks.size(); ++col) {
        for (std::uint32_t row_block = 0; row_block < 3; ++row_block) {
            const block& b = blocks[col][row_block];
            for (std::uint32_t i = 0; i < m; ++i) {
                auto& row = h.rows[row_block * m + i];
                const auto base = static_cast<std::uint32_t>(col) * m;
                if (b.identity) row.push_back(base + i);
                for (int k : b.perms) row.push_back(base + permutation(k, static_cast<int>(m), i));
            }
        }
    }
    // A column repeated in one row (two permutations that agree there) cancels over GF(2).
    for (auto& row : h.rows) {
        std::sort(row.begin(), row.end());
        std::vector<std::uint32_t> kept;
        for (std::size_t j = 0; j < row.size();) {
            std::size_t e = j;
            while (e < row.size() && row[e] == row[j]) ++e;
            if ((e - j) % 2 == 1) kept.push_back(row[j]);
            j = e;
        }
        row = std::move(kept);
    }
    return h;
}

std::size_t index_of(code c) { return static_cast<std::size_t>(c); }

}  // namespace

code_params params(code c) noexcept
{
    code_params p;
    switch (c) {
    case code::k1024_r1_2: p = {1024, 1, 2, 512, 0, 0, 0}; break;
    case code::k1024_r2_3: p = {1024, 2, 3, 256, 0, 0, 0}; break;
    case code::k1024_r4_5: p = {1024, 4, 5, 128, 0, 0, 0}; break;
    case code::k4096_r1_2: p = {4096, 1, 2, 2048, 0, 0, 0}; break;
    case code::k4096_r2_3: p = {4096, 2, 3, 1024, 0, 0, 0}; break;
    case code::k4096_r4_5: p = {4096, 4, 5, 512, 0, 0, 0}; break;
    }
    p.n = p.k + 2 * p.m;
    p.n_full = p.k + 3 * p.m;
    p.checks = 3 * p.m;
    return p;
}

std::uint32_t permutation(int k, int m, std::uint32_t i)
{
    if (k < 1 || k > 26) throw std::invalid_argument("ldpc: permutation " + std::to_string(k) + " (the standard's are 1 .. 26)");
    const auto t = std::find(table_m.begin(), table_m.end(), m);
    if (t == table_m.end()) throw std::invalid_argument("ldpc: no permutation table for M = " + std::to_string(m));
    const auto mi = static_cast<std::size_t>(t - table_m.begin());
    const auto um = static_cast<std::uint32_t>(m);
    if (i >= um) throw std::invalid_argument("ldpc: row " + std::to_string(i) + " outside M = " + std::to_string(m));
    const std::uint32_t j = 4 * i / um;  // floor(4i / M)
    const auto th = static_cast<std::uint32_t>(theta[static_cast<std::size_t>(k - 1)]);
    const auto ph = static_cast<std::uint32_t>(phi[mi][static_cast<std::size_t>(k - 1)][j]);
    return um / 4 * ((th + j) % 4) + (ph + i) % (um / 4);
}

bool parity_check::holds(std::span<const std::uint8_t> word) const { return failed_checks(word) == 0; }

std::size_t parity_check::bits_shared_within(int group) const
{
    if (group < 1) throw std::invalid_argument("ldpc: groups of " + std::to_string(group) + " checks");
    std::size_t shared = 0;
    std::vector<std::uint32_t> last_group(static_cast<std::size_t>(p.n_full), 0);  // group index + 1 of a bit's last check
    for (std::size_t r = 0; r < rows.size(); ++r) {
        const auto g = static_cast<std::uint32_t>(r / static_cast<std::size_t>(group)) + 1;
        for (const auto v : rows[r]) {
            shared += last_group[v] == g ? 1u : 0u;
            last_group[v] = g;
        }
    }
    return shared;
}

std::size_t parity_check::failed_checks(std::span<const std::uint8_t> word) const
{
    if (word.size() != static_cast<std::size_t>(p.n_full)) {
        throw std::invalid_argument("ldpc: a word of " + std::to_string(word.size()) + " bits against " + std::to_string(p.n_full) +
                                    " columns");
    }
    std::size_t failed = 0;
    for (const auto& row : rows) {
        unsigned s = 0;
        for (auto col : row) s ^= word[col] & 1u;
        failed += s;
    }
    return failed;
}

const parity_check& parity_check_matrix(code c)
{
    static std::array<std::once_flag, 6> once;
    static std::array<std::unique_ptr<parity_check>, 6> made;
    const std::size_t i = index_of(c);
    std::call_once(once[i], [&] { made[i] = std::make_unique<parity_check>(build(c)); });
    return *made[i];
}

const encoder& encoder::get(code c)
{
    static std::array<std::once_flag, 6> once;
    static std::array<std::unique_ptr<encoder>, 6> made;
    const std::size_t i = index_of(c);
    std::call_once(once[i], [&] { made[i].reset(new encoder(c)); });
    return *made[i];
}

encoder::encoder(code c) : c_(c), p_(ldpc::params(c))
{
    // [H_p | H_u] as dense rows over GF(2), then Gauss-Jordan on H_p's columns: H_p becomes
    // the identity and H_u becomes H_p^-1 H_u, the parity's generator.
    const parity_check& h = parity_check_matrix(c);
    const std::size_t r = static_cast<std::size_t>(p_.checks), k = static_cast<std::size_t>(p_.k);
    const std::size_t cols = r + k, words = (cols + 63) / 64;
    std::vector<std::uint64_t> a(r * words, 0);
    auto set = [&](std::size_t row, std::size_t col) { a[row * words + col / 64] ^= std::uint64_t{1} << (col % 64); };
    for (std::size_t row = 0; row < r; ++row) {
        for (auto col : h.rows[row]) set(row, col >= k ? col - k : r + col);  // parity columns first
    }
    auto bit = [&](std::size_t row, std::size_t col) { return (a[row * words + col / 64] >> (col % 64)) & 1u; };
    for (std::size_t c0 = 0; c0 < r; ++c0) {
        std::size_t piv = c0;
        while (piv < r && !bit(piv, c0)) ++piv;
        if (piv == r) throw std::logic_error("ldpc: " + std::string(to_string(c)) + ": the parity part of H is singular");
        if (piv != c0) std::swap_ranges(a.begin() + static_cast<std::ptrdiff_t>(piv * words), a.begin() + static_cast<std::ptrdiff_t>((piv + 1) * words),
                                        a.begin() + static_cast<std::ptrdiff_t>(c0 * words));
        const std::uint64_t* prow = a.data() + c0 * words;
        const std::size_t w0 = c0 / 64;  // the pivot row is zero before its pivot's word
        for (std::size_t row = 0; row < r; ++row) {
            if (row == c0 || !bit(row, c0)) continue;
            std::uint64_t* d = a.data() + row * words;
            for (std::size_t w = w0; w < words; ++w) d[w] ^= prow[w];
        }
    }
    // The generator: the right part, re-packed from bit r on.
    words_ = (k + 63) / 64;
    gen_.assign(r * words_, 0);
    for (std::size_t row = 0; row < r; ++row) {
        for (std::size_t col = 0; col < k; ++col) {
            if (bit(row, r + col)) gen_[row * words_ + col / 64] |= std::uint64_t{1} << (col % 64);
        }
    }
}

void encoder::encode_full(std::span<const std::uint8_t> info, std::span<std::uint8_t> word) const
{
    const std::size_t k = static_cast<std::size_t>(p_.k), r = static_cast<std::size_t>(p_.checks);
    if (info.size() != k || word.size() != k + r) {
        throw std::invalid_argument("ldpc " + std::string(to_string(c_)) + " encode: " +
                                    std::to_string(info.size()) + " information and " + std::to_string(word.size()) +
                                    " codeword bits, expected " + std::to_string(k) + " and " + std::to_string(k + r));
    }
    std::vector<std::uint64_t> u(words_, 0);
    for (std::size_t i = 0; i < k; ++i) {
        if (info[i] & 1u) u[i / 64] |= std::uint64_t{1} << (i % 64);
        word[i] = info[i] & 1u;
    }
    for (std::size_t row = 0; row < r; ++row) {
        const std::uint64_t* g = gen_.data() + row * words_;
        unsigned s = 0;
        for (std::size_t w = 0; w < words_; ++w) s += static_cast<unsigned>(std::popcount(g[w] & u[w]));
        word[k + row] = static_cast<std::uint8_t>(s & 1u);
    }
}

void encoder::encode(std::span<const std::uint8_t> info, std::span<std::uint8_t> codeword) const
{
    if (codeword.size() != static_cast<std::size_t>(p_.n)) {
        throw std::invalid_argument("ldpc " + std::string(to_string(c_)) + " encode: " + std::to_string(codeword.size()) + " codeword bits, expected " +
                                    std::to_string(p_.n));
    }
    std::vector<std::uint8_t> full(static_cast<std::size_t>(p_.n_full));
    encode_full(info, full);
    std::copy_n(full.begin(), p_.n, codeword.begin());
}

}  // namespace paq::dsp::ldpc
