#include "dsp/pn.hpp"

#include <cctype>
#include <stdexcept>
#include <string>

namespace paq::dsp {

namespace {

struct pattern_info {
    std::string_view name;    // canonical, lower case
    std::string_view digits;  // what follows the prefix when parsing
    int degree;               // n of x^n + x^k + 1
    int tap;                  // k
    bool inverted;            // see the O.150 table in pn.hpp
};

// Indexed by pn_pattern.
constexpr std::array<pattern_info, 6> patterns{{
    {"pn9", "9", 9, 5, false},
    {"pn11", "11", 11, 9, false},
    {"pn15", "15", 15, 14, true},
    {"pn20", "20", 20, 3, false},
    {"pn23", "23", 23, 18, true},
    {"pn31", "31", 31, 28, true},
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

    std::string accepted;
    for (const pattern_info& p : patterns) {
        if (!accepted.empty()) accepted += ", ";
        accepted += p.name;
    }
    throw std::invalid_argument("invalid PN pattern '" + std::string(text) + "': expected one of " +
                                accepted +
                                " (case-insensitive; 'prbs' instead of 'pn' and a '-' or '_' "
                                "before the degree are also accepted, e.g. PRBS-15)");
}

std::string_view to_string(pn_pattern p) noexcept { return info(p).name; }

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
                                : 2 * static_cast<std::uint32_t>(degree_) + default_sync_margin) {}

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

std::size_t pn_checker::check(std::span<const std::uint8_t> bits) noexcept {
    std::size_t used = 0;
    std::uint64_t errors = 0;
    bool lost = false;
    for (const std::uint8_t b : bits) {
        ++used;
        const std::uint32_t expected = ((reg_ >> tap_shift_) ^ (reg_ >> top_shift_)) & 1u;
        reg_ = ((reg_ << 1) | expected) & mask_;
        const std::uint32_t error = (b != 0 ? 1u : 0u) ^ invert_ ^ expected;
        errors += error;

        // Sliding window: replace the flag of the bit checked loss_window_bits ago.
        std::uint64_t& word = window_[window_pos_ >> 6];
        const std::uint32_t shift = window_pos_ & 63u;
        const auto old = static_cast<std::uint32_t>((word >> shift) & 1u);
        word ^= static_cast<std::uint64_t>(old ^ error) << shift;
        window_errors_ = window_errors_ + error - old;  // never below 0: old was counted
        window_pos_ = (window_pos_ + 1) & (loss_window_bits - 1);
        if (window_errors_ > loss_max_errors) {
            lost = true;
            break;
        }
    }
    bits_checked_ += used;
    bit_errors_ += errors;
    if (lost) {
        ++resyncs_;
        restart_acquisition();
    }
    return used;
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
