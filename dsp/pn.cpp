#include "dsp/pn.hpp"

#include <algorithm>
#include <bit>
#include <cctype>
#include <cstring>
#include <stdexcept>
#include <string>

namespace paq::dsp {

namespace {

struct pattern_info {
    std::string_view digits;  // what follows the prefix when parsing
    int degree;               // n of x^n + x^k + 1
    int tap;                  // k
    bool inverted;            // see the O.150 table in pn.hpp
};

// Indexed by pn_pattern.
constexpr std::array<pattern_info, 6> patterns{{
    {"9", 9, 5, false},
    {"11", 11, 9, false},
    {"15", 15, 14, true},
    {"20", 20, 3, false},
    {"23", 23, 18, true},
    {"31", 31, 28, true},
}};

constexpr const pattern_info& info(pn_pattern p) noexcept {
    return patterns[static_cast<std::size_t>(p)];
}

constexpr std::uint32_t register_mask(int degree) noexcept {
    return static_cast<std::uint32_t>((std::uint64_t{1} << degree) - 1);
}

// One clock of the Fibonacci register (bit 0 = stage 1): shift, feed stages k and n back.
constexpr std::uint32_t lfsr_step(std::uint32_t reg, int top_shift, int tap_shift,
                                  std::uint32_t mask) noexcept {
    const std::uint32_t feedback = ((reg >> tap_shift) ^ (reg >> top_shift)) & 1u;
    return ((reg << 1) | feedback) & mask;
}

// Carry-less product of two GF(2) polynomials of degree < 32 (fits: degree < 63).
constexpr std::uint64_t clmul(std::uint64_t a, std::uint64_t b) noexcept {
    std::uint64_t r = 0;
    while (b != 0) {
        if ((b & 1u) != 0) r ^= a;
        a <<= 1;
        b >>= 1;
    }
    return r;
}

// v mod c, where c has degree `degree`.
constexpr std::uint64_t poly_mod(std::uint64_t v, std::uint64_t c, int degree) noexcept {
    for (int i = 63; i >= degree; --i) {
        if (((v >> i) & 1u) != 0) v ^= c << (i - degree);
    }
    return v;
}

// x^e mod c by square-and-multiply.
constexpr std::uint64_t x_pow_mod(std::uint64_t e, std::uint64_t c, int degree) noexcept {
    std::uint64_t result = 1;
    std::uint64_t base = poly_mod(2, c, degree);  // x
    while (e != 0) {
        if ((e & 1u) != 0) result = poly_mod(clmul(result, base), c, degree);
        base = poly_mod(clmul(base, base), c, degree);
        e >>= 1;
    }
    return result;
}

// The register after n clocks. Every stage of the register carries a shifted copy of a
// sequence obeying f[t] = f[t-k] + f[t-n], so the state vectors S(t) obey it too:
// S(t+n) = S(t+n-k) + S(t), i.e. the transition T satisfies c(T) = 0 with
// c(x) = x^n + x^(n-k) + 1. Writing x^m mod c(x) = sum c_i x^i gives
// S(t+m) = sum c_i S(t+i): n cheap clocks plus O(n log m) polynomial work instead of m
// clocks, which matters for pn31 (period 2^31 - 1) and for skips of many packets.
std::uint32_t lfsr_jump(std::uint32_t reg, std::uint64_t n, int degree, int tap) noexcept {
    const std::uint32_t mask = register_mask(degree);
    const int top_shift = degree - 1;
    const int tap_shift = tap - 1;
    n %= (std::uint64_t{1} << degree) - 1;  // T^period = I on every non-zero state

    // Below this the direct clocks are cheaper than the polynomial arithmetic.
    constexpr std::uint64_t direct_limit = 4096;
    if (n < direct_limit) {
        for (std::uint64_t i = 0; i < n; ++i) reg = lfsr_step(reg, top_shift, tap_shift, mask);
        return reg;
    }

    const std::uint64_t c =
        (std::uint64_t{1} << degree) | (std::uint64_t{1} << (degree - tap)) | 1u;
    const std::uint64_t coeffs = x_pow_mod(n, c, degree);
    std::uint32_t acc = 0;
    for (int i = 0; i < degree; ++i) {
        if (((coeffs >> i) & 1u) != 0) acc ^= reg;
        reg = lfsr_step(reg, top_shift, tap_shift, mask);
    }
    return acc;
}

char lower_ascii(char ch) noexcept {
    return static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
}

bool starts_with_icase(std::string_view text, std::string_view prefix) noexcept {
    if (text.size() < prefix.size()) return false;
    for (std::size_t i = 0; i < prefix.size(); ++i) {
        if (lower_ascii(text[i]) != prefix[i]) return false;
    }
    return true;
}

}  // namespace

pn_pattern parse_pn_pattern(std::string_view text) {
    std::string_view rest;
    bool prefixed = true;
    if (starts_with_icase(text, "prbs")) {
        rest = text.substr(4);
    } else if (starts_with_icase(text, "pn")) {
        rest = text.substr(2);
    } else {
        prefixed = false;
    }
    if (prefixed && !rest.empty() && (rest.front() == '-' || rest.front() == '_')) {
        rest.remove_prefix(1);
    }
    if (prefixed) {
        for (std::size_t i = 0; i < patterns.size(); ++i) {
            if (rest == patterns[i].digits) return static_cast<pn_pattern>(i);
        }
    }

    throw std::invalid_argument("invalid PN pattern '" + std::string(text) + "': expected one of " +
                                names_text(pn_pattern_names) +
                                " (case-insensitive; 'prbs' instead of 'pn' and a '-' or '_' "
                                "before the degree are also accepted, e.g. PRBS-15)");
}

int pn_degree(pn_pattern p) noexcept { return info(p).degree; }

int pn_tap(pn_pattern p) noexcept { return info(p).tap; }

std::uint64_t pn_period(pn_pattern p) noexcept {
    return (std::uint64_t{1} << info(p).degree) - 1;
}

bool pn_inverted(pn_pattern p) noexcept { return info(p).inverted; }

// ---------------------------------------------------------------------------------------

pn_generator::pn_generator(pn_pattern pattern, std::uint32_t seed) noexcept
    : pattern_(pattern),
      mask_(register_mask(pn_degree(pattern))),
      top_shift_(pn_degree(pattern) - 1),
      tap_shift_(pn_tap(pattern) - 1),
      invert_(pn_inverted(pattern) ? 1u : 0u),
      reg_(seed & mask_) {
    if (reg_ == 0) reg_ = mask_;  // all-zero would emit zeros forever
}

void pn_generator::fill(std::span<std::uint8_t> out) noexcept {
    for (std::uint8_t& bit : out) bit = next();
}

void pn_generator::advance(std::uint64_t n) noexcept {
    reg_ = lfsr_jump(reg_, n, pn_degree(pattern_), pn_tap(pattern_));
}

// ---------------------------------------------------------------------------------------

pn_checker::pn_checker(pn_pattern pattern, std::uint32_t sync_bits) noexcept
    : pattern_(pattern),
      degree_(pn_degree(pattern)),
      mask_(register_mask(degree_)),
      top_shift_(degree_ - 1),
      tap_shift_(pn_tap(pattern) - 1),
      invert_(pn_inverted(pattern) ? 1u : 0u),
      sync_bits_(sync_bits != 0 ? sync_bits
                                : 2 * static_cast<std::uint32_t>(degree_) + default_sync_margin) {
    // The reference's output is linear (over GF(2)) in its register: the 64 bits that follow
    // each single-bit register, XORed together per byte value.
    // So is the register 64 steps on (jump64_), which keeps the register's update off the
    // output word's bit reversal.
    std::array<std::uint64_t, 32> basis{};
    std::array<std::uint32_t, 32> basis_reg{};
    for (int i = 0; i < degree_; ++i) {
        std::uint32_t reg = 1u << i;
        for (int j = 0; j < 64; ++j) {
            reg = lfsr_step(reg, top_shift_, tap_shift_, mask_);  // the new bit 0 is the output
            basis[static_cast<std::size_t>(i)] |= static_cast<std::uint64_t>(reg & 1u) << j;
        }
        basis_reg[static_cast<std::size_t>(i)] = reg;
    }
    for (std::size_t b = 0; b < next64_.size(); ++b) {
        for (std::uint32_t v = 0; v < 256; ++v) {
            std::uint64_t out = 0;
            std::uint32_t reg = 0;
            for (std::size_t i = 0; i < 8; ++i) {
                if (((v >> i) & 1u) != 0) {
                    out ^= basis[8 * b + i];
                    reg ^= basis_reg[8 * b + i];
                }
            }
            next64_[b][v] = out;
            jump64_[b][v] = reg;
        }
    }
}

void pn_checker::push(std::span<const std::uint8_t> bits) noexcept {
    // Each phase runs its own tight loop and hands over at the bit where the state flips.
    while (!bits.empty()) {
        const std::size_t used = locked_ ? check(bits) : acquire(bits);
        bits = bits.subspan(used);
    }
}

std::size_t pn_checker::acquire(std::span<const std::uint8_t> bits) noexcept {
    std::size_t used = 0;
    for (const std::uint8_t b : bits) {
        ++used;
        const std::uint32_t bit = (b != 0 ? 1u : 0u) ^ invert_;
        if (fill_ == degree_) {
            const std::uint32_t predicted = ((reg_ >> tap_shift_) ^ (reg_ >> top_shift_)) & 1u;
            run_ = predicted == bit ? run_ + 1 : 0;
        } else {
            ++fill_;
        }
        reg_ = ((reg_ << 1) | bit) & mask_;
        // The zero state predicts zeros forever: a dead line, not the pattern.
        if (reg_ == 0) run_ = 0;
        if (run_ >= sync_bits_) {
            // reg_ now holds the last n bits of the sequence, which is exactly the state
            // from which the free-running reference continues it.
            locked_ = true;
            break;
        }
    }
    bits_before_lock_ += used;
    return used;
}

bool pn_checker::check_bit(std::uint32_t received) noexcept {
    const std::uint32_t expected = ((reg_ >> tap_shift_) ^ (reg_ >> top_shift_)) & 1u;
    reg_ = ((reg_ << 1) | expected) & mask_;
    const std::uint32_t error = received ^ expected;
    ++bits_checked_;
    bit_errors_ += error;

    // Sliding window: replace the flag of the bit checked loss_window_bits ago.
    std::uint64_t& word = window_[window_pos_ >> 6];
    const std::uint32_t shift = window_pos_ & 63u;
    const auto old = static_cast<std::uint32_t>((word >> shift) & 1u);
    word ^= static_cast<std::uint64_t>(old ^ error) << shift;
    window_errors_ = window_errors_ + error - old;  // never below 0: old was counted
    window_pos_ = (window_pos_ + 1) & (loss_window_bits - 1);
    if (window_errors_ > loss_max_errors) {
        ++resyncs_;
        restart_acquisition();
        return true;
    }
    return false;
}

std::size_t pn_checker::check(std::span<const std::uint8_t> bits) noexcept {
    std::size_t used = 0;
    for (const std::uint8_t b : bits) {
        ++used;
        if (check_bit((b != 0 ? 1u : 0u) ^ invert_)) break;
    }
    return used;
}

namespace {

std::uint64_t reverse64(std::uint64_t v) noexcept {
    v = ((v >> 1) & 0x5555555555555555ULL) | ((v & 0x5555555555555555ULL) << 1);
    v = ((v >> 2) & 0x3333333333333333ULL) | ((v & 0x3333333333333333ULL) << 2);
    v = ((v >> 4) & 0x0F0F0F0F0F0F0F0FULL) | ((v & 0x0F0F0F0F0F0F0F0FULL) << 4);
    v = ((v >> 8) & 0x00FF00FF00FF00FFULL) | ((v & 0x00FF00FF00FF00FFULL) << 8);
    v = ((v >> 16) & 0x0000FFFF0000FFFFULL) | ((v & 0x0000FFFF0000FFFFULL) << 16);
    return (v >> 32) | (v << 32);
}

// Bits [first, first + 64) of an MSB-first packed buffer holding at least first + 64 bits
// (first + 72 where first is not a multiple of 8), as a word whose bit j is bit first + j.
std::uint64_t load64(const std::uint8_t* packed, std::size_t first) noexcept {
    const std::uint8_t* p = packed + first / 8;
    const unsigned shift = static_cast<unsigned>(first % 8);
    if (shift == 0 && std::endian::native == std::endian::little) {
        // The receiver's packets start on a byte: the bytes as they lie (p[k] in bits
        // 8k .. 8k + 7), each byte's bits reversed.
        std::uint64_t v = 0;
        std::memcpy(&v, p, sizeof v);
        v = ((v >> 1) & 0x5555555555555555ULL) | ((v & 0x5555555555555555ULL) << 1);
        v = ((v >> 2) & 0x3333333333333333ULL) | ((v & 0x3333333333333333ULL) << 2);
        return ((v >> 4) & 0x0F0F0F0F0F0F0F0FULL) | ((v & 0x0F0F0F0F0F0F0F0FULL) << 4);
    }
    std::uint64_t be = 0;  // bytes p[0..7] big-endian: stream bit first & ~7 at bit 63
    for (int i = 0; i < 8; ++i) be = (be << 8) | p[i];
    if (shift != 0) be = (be << shift) | (static_cast<std::uint64_t>(p[8]) >> (8 - shift));
    return reverse64(be);  // bit 63 - j was stream bit first + j
}

// The ones in a word, inline: a build for the x86-64 baseline has no popcnt instruction, and
// std::popcount there is a call into libgcc (a sixth of the tally's time).
std::uint32_t ones(std::uint64_t v) noexcept {
    v = v - ((v >> 1) & 0x5555555555555555ULL);
    v = (v & 0x3333333333333333ULL) + ((v >> 2) & 0x3333333333333333ULL);
    v = (v + (v >> 4)) & 0x0F0F0F0F0F0F0F0FULL;
    return static_cast<std::uint32_t>((v * 0x0101010101010101ULL) >> 56);
}

std::uint32_t packed_bit(const std::uint8_t* packed, std::size_t i) noexcept {
    return static_cast<std::uint32_t>((packed[i / 8] >> (7 - i % 8)) & 1u);
}

}  // namespace

std::size_t pn_checker::check_packed(const std::uint8_t* packed, std::size_t first, std::size_t n) noexcept {
    std::size_t used = 0;
    const std::uint64_t invert_word = invert_ != 0 ? ~std::uint64_t{0} : 0;
    const std::size_t end_bytes = (first + n + 7) / 8;
    while (used < n) {
        // Whole words from the piece's first bit to its last whole word, while none can drop
        // the lock; the state in locals meanwhile (stores to the loss window would otherwise
        // reload the counters every word).
        std::uint32_t reg = reg_, werr = window_errors_, wpos = window_pos_;
        std::uint64_t errs = 0;
        const std::size_t start = used;
        for (;;) {
            const std::size_t pos = first + used;
            // A word off a byte boundary reads one byte past its last bit: it must be in the buffer.
            const std::size_t load_end = (pos + 64) / 8 + (pos % 8 != 0 ? 1 : 0);
            if (n - used < 64 || load_end > end_bytes) break;
            const std::uint64_t expected = next64_[0][reg & 0xFFu] ^ next64_[1][(reg >> 8) & 0xFFu] ^
                                           next64_[2][(reg >> 16) & 0xFFu] ^ next64_[3][(reg >> 24) & 0xFFu];
            const std::uint64_t errors = load64(packed, pos) ^ invert_word ^ expected;
            const std::uint32_t e = ones(errors);
            if (werr + e > loss_max_errors) break;  // could drop the lock in this word
            reg = jump64_[0][reg & 0xFFu] ^ jump64_[1][(reg >> 8) & 0xFFu] ^ jump64_[2][(reg >> 16) & 0xFFu] ^
                  jump64_[3][(reg >> 24) & 0xFFu];
            // The loss window's flags of these 64 bits: window bits wpos .. wpos + 63, which
            // straddle two of its words unless wpos is a multiple of 64 (as check_bit keeps
            // them: position p is bit p % 64 of word p / 64).
            const std::uint32_t shift = wpos & 63u;
            std::uint64_t& lo = window_[wpos >> 6];
            if (shift == 0) {
                werr = werr + e - ones(lo);
                lo = errors;
            } else {
                std::uint64_t& hi = window_[((wpos >> 6) + 1) & (window_words_ - 1)];
                const std::uint64_t low_mask = (std::uint64_t{1} << shift) - 1;
                werr = werr + e - ones((lo >> shift) | (hi << (64 - shift)));
                lo = (lo & low_mask) | (errors << shift);
                hi = (hi & ~low_mask) | (errors >> (64 - shift));
            }
            wpos = (wpos + 64) & (loss_window_bits - 1);
            errs += e;
            used += 64;
        }
        reg_ = reg;
        window_errors_ = werr;
        window_pos_ = wpos;
        bits_checked_ += used - start;
        bit_errors_ += errs;
        // Then bit by bit: the tail short of a word, or the word that could drop the lock
        // (found where, if it does).
        const std::size_t pos = first + used;
        const std::size_t bits = std::min<std::size_t>(64, n - used);
        for (std::size_t j = 0; j < bits; ++j) {
            ++used;
            if (check_bit(packed_bit(packed, pos + j) ^ invert_)) return used;
        }
    }
    return used;
}

void pn_checker::push_packed(const std::uint8_t* packed, std::size_t nbits) noexcept {
    std::size_t done = 0;
    while (done < nbits) {
        if (locked_) {
            done += check_packed(packed, done, nbits - done);
            continue;
        }
        // Acquisition, bit-serial, in chunks of unpacked bits.
        std::array<std::uint8_t, 256> chunk{};
        const std::size_t n = std::min<std::size_t>(chunk.size(), nbits - done);
        for (std::size_t i = 0; i < n; ++i) chunk[i] = static_cast<std::uint8_t>(packed_bit(packed, done + i));
        done += acquire(std::span<const std::uint8_t>(chunk.data(), n));
    }
}

void pn_checker::restart_acquisition() noexcept {
    locked_ = false;
    reg_ = 0;
    fill_ = 0;
    run_ = 0;
    window_.fill(0);
    window_pos_ = 0;
    window_errors_ = 0;
}

void pn_checker::skip(std::uint64_t nbits) noexcept {
    if (nbits == 0) return;
    if (locked_) {
        reg_ = lfsr_jump(reg_, nbits, degree_, tap_shift_ + 1);
    } else {
        restart_acquisition();
    }
}

void pn_checker::reset() noexcept {
    restart_acquisition();
    bits_checked_ = 0;
    bit_errors_ = 0;
    bits_before_lock_ = 0;
    resyncs_ = 0;
}

pn_checker::counts pn_checker::get() const noexcept {
    return counts{bits_checked_, bit_errors_, bits_before_lock_, resyncs_, locked_};
}

}  // namespace paq::dsp
