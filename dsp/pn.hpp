// ITU-T O.150 pseudo-random test patterns: a generator and a bit-error-rate checker.
//
// Bit-error-rate testers put one continuous O.150 sequence into the data fields of
// consecutive packets; the receiver checks the demodulated data bits against it. Whole
// packets may be lost (the receiver knows how many), so the checker can skip a known
// number of bits without losing synchronisation.
//
// Register convention (O.150 section 5, "Q_1 ... Q_n"): an n-stage Fibonacci shift
// register; each clock the modulo-two sum of stages k and n is shifted into stage 1 and
// the transmitted bit is stage n (negated for the inverted patterns). For the polynomial
// x^n + x^k + 1 the un-inverted output y therefore obeys y[t] = y[t-k] XOR y[t-n], which
// is what lets a receiver synchronise on the data alone.
//
// Inversion, per O.150 (the "max 0 sequence" / "inverted" column of its section 5 table):
//   pn9  (x^9  + x^5  + 1, 5.1)  not inverted   longest run of zeros  8
//   pn11 (x^11 + x^9  + 1, 5.2)  not inverted   longest run of zeros 10
//   pn15 (x^15 + x^14 + 1, 5.3)  INVERTED       longest run of zeros 15
//   pn20 (x^20 + x^3  + 1, 5.4)  not inverted   longest run of zeros 19
//   pn23 (x^23 + x^18 + 1, 5.6)  INVERTED       longest run of zeros 23
//   pn31 (x^31 + x^28 + 1, 5.8)  INVERTED       longest run of zeros 31
// Sources (the Recommendation text itself was not at hand; two independent
// implementations that transcribe its table agree): Xilinx PRBS_ANY (XAPP884,
// D. Riccardi / P. Novellini, 2010) table "for compliance to ITU-T Recommendation O.150
// Section 5", and the comnum-mapping crate's O150Sequence (O.150 05/96, Sec. 4, 5 and
// Table 1). The zero-suppressed 2^20-1 sequence of 5.5 (x^20 + x^17 + 1, "QRSS") is a
// different pattern and is not provided.
#pragma once

#include "dsp/names.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace paq::dsp {

enum class pn_pattern { pn9, pn11, pn15, pn20, pn23, pn31 };
/// The canonical names (lower case); parse_pn_pattern also takes other spellings.
inline constexpr name_table<pn_pattern, 6> pn_pattern_names{{{"pn9", pn_pattern::pn9},
                                                             {"pn11", pn_pattern::pn11},
                                                             {"pn15", pn_pattern::pn15},
                                                             {"pn20", pn_pattern::pn20},
                                                             {"pn23", pn_pattern::pn23},
                                                             {"pn31", pn_pattern::pn31}}};

/// Accepts "pn15", "PN15", "prbs15", "PRBS-15", "pn_23" ... (case-insensitive; prefix
/// "pn" or "prbs", an optional '-' or '_', then the degree).
/// Throws std::invalid_argument naming the bad value and listing the accepted ones.
[[nodiscard]] pn_pattern parse_pn_pattern(std::string_view text);

/// Canonical lower-case name ("pn15"); parse_pn_pattern accepts it.
[[nodiscard]] constexpr std::string_view to_string(pn_pattern p) noexcept { return name_of(pn_pattern_names, p); }

/// n of x^n + x^k + 1: the register length.
[[nodiscard]] int pn_degree(pn_pattern p) noexcept;

/// k of x^n + x^k + 1: the intermediate feedback stage.
[[nodiscard]] int pn_tap(pn_pattern p) noexcept;

/// 2^n - 1.
[[nodiscard]] std::uint64_t pn_period(pn_pattern p) noexcept;

/// Whether O.150 transmits the register output negated (see the table above).
[[nodiscard]] bool pn_inverted(pn_pattern p) noexcept;

/// The sequence as transmitted (already inverted where O.150 says so).
class pn_generator {
public:
    /// seed: initial register; bit i is stage i+1 (bit n-1 is the next output). Only the
    /// low n bits are used; 0, or any seed whose low n bits are zero, means all ones,
    /// because the all-zero register is the one state that never leaves itself. From
    /// all ones the first n register outputs are ones, which is the starting phase O.150
    /// 5.1 prescribes for pn9 ("the first ONE of 9 consecutive ONEs"); an inverted
    /// pattern therefore starts with n zeros.
    explicit pn_generator(pn_pattern pattern, std::uint32_t seed = 0) noexcept;

    [[nodiscard]] std::uint8_t next() noexcept {
        const std::uint32_t out = (reg_ >> top_shift_) & 1u;
        const std::uint32_t feedback = ((reg_ >> tap_shift_) ^ out) & 1u;
        reg_ = ((reg_ << 1) | feedback) & mask_;
        return static_cast<std::uint8_t>(out ^ invert_);
    }

    void fill(std::span<std::uint8_t> out) noexcept;

    /// Same state as n calls to next(), in O(degree * log n) for large n: reduced modulo
    /// the period, then x^n mod the characteristic polynomial (see pn.cpp).
    void advance(std::uint64_t n) noexcept;

    [[nodiscard]] pn_pattern pattern() const noexcept { return pattern_; }
    /// Current register, same layout as the seed; never 0.
    [[nodiscard]] std::uint32_t state() const noexcept { return reg_; }

private:
    pn_pattern pattern_;
    std::uint32_t mask_;
    int top_shift_;  // n - 1
    int tap_shift_;  // k - 1
    std::uint32_t invert_;
    std::uint32_t reg_;
};

/// Synchronises on a received O.150 stream and counts bit errors.
///
/// Acquisition: the received bits (un-inverted for the inverted patterns, so the checker
/// syncs on the stream as sent) fill an n-bit history; from then on every bit is also
/// predicted from the history via y[t] = y[t-k] XOR y[t-n]. Lock is declared after
/// sync_bits consecutive correct predictions, i.e. after pn_degree + sync_bits bits on
/// an error-free stream. A history of all zeros (a dead line: constant zeros, or
/// constant ones for an inverted pattern) satisfies the recurrence trivially and never
/// counts toward lock.
///
/// Locked: the reference runs free from the history captured at lock and is compared
/// bit by bit. Received bits never feed back into it, so one channel error counts as one
/// error (a self-synchronising check would count each error three times, at t, t+k and
/// t+n).
///
/// Loss of lock: when more than loss_max_errors of the last loss_window_bits checked
/// bits are errors the lock is dropped, a resync is counted and acquisition restarts.
/// Errors counted before the drop stay counted, as on a hardware BERT.
class pn_checker {
public:
    /// A bit slip or a wrong lock makes the reference uncorrelated with the data: 50 %
    /// errors, so more than 204 in a window trips after about 410 bits. A real channel
    /// even at BER 1e-2 gives about 10 +/- 3 errors per window, far below.
    static constexpr std::uint32_t loss_window_bits = 1024;
    static constexpr std::uint32_t loss_threshold_percent = 20;
    static constexpr std::uint32_t loss_max_errors =
        loss_window_bits * loss_threshold_percent / 100;  // 204: the 205th error drops lock

    /// Default sync_bits = 2 * degree + default_sync_margin (50 for pn9, 62 for pn15, 94
    /// for pn31). Random data passes one prediction with probability 1/2, so a false lock
    /// needs a 2^-sync_bits event: about 1e-15 per bit for pn9, never in practice. The
    /// cost, a few dozen bits once per acquisition, is nothing against 6144-bit packets.
    static constexpr std::uint32_t default_sync_margin = 32;

    struct counts {
        std::uint64_t bits_checked;      ///< compared while locked
        std::uint64_t bit_errors;        ///< of bits_checked
        std::uint64_t bits_before_lock;  ///< consumed while acquiring (all acquisitions)
        std::uint64_t resyncs;           ///< times lock was lost
        bool locked;
    };

    /// sync_bits: consecutive correct predictions required for lock; 0 selects
    /// 2 * pn_degree(pattern) + default_sync_margin.
    explicit pn_checker(pn_pattern pattern, std::uint32_t sync_bits = 0) noexcept;

    /// Received data bits, in order; any non-zero byte is a one. Bit-serial: the reference
    /// the packed path is tested against.
    void push(std::span<const std::uint8_t> bits) noexcept;

    /// The same nbits received bits packed eight to a byte, most significant bit first
    /// (bit i is (packed[i / 8] >> (7 - i % 8)) & 1), as the receiver emits them. Counts
    /// exactly what push() counts on the unpacked bits (errors, bits, lock, resyncs, bits
    /// before lock, the loss window), but while locked compares 64 bits at a time: the
    /// reference's next 64 bits come from its register through four byte tables, errors are
    /// counted by popcount, and a word is walked bit by bit only when it could drop the lock.
    /// Acquisition stays bit-serial (a few dozen bits once per lock).
    void push_packed(const std::uint8_t* packed, std::size_t nbits) noexcept;

    /// nbits known to be lost (e.g. whole packets). Locked: the reference advances by
    /// nbits, so the next pushed bit is compared with the right one. Unlocked: nothing is
    /// counted, but a partly filled acquisition restarts, since the gap breaks the
    /// recurrence between the bits before and after it.
    void skip(std::uint64_t nbits) noexcept;

    /// Back to the freshly constructed state: unlocked, all counts zero.
    void reset() noexcept;

    [[nodiscard]] counts get() const noexcept;

    [[nodiscard]] pn_pattern pattern() const noexcept { return pattern_; }
    [[nodiscard]] std::uint32_t sync_bits() const noexcept { return sync_bits_; }

private:
    // Consume bits until lock is declared or the span ends; returns how many were used.
    [[nodiscard]] std::size_t acquire(std::span<const std::uint8_t> bits) noexcept;
    // Compare bits until lock is lost or the span ends; returns how many were used.
    [[nodiscard]] std::size_t check(std::span<const std::uint8_t> bits) noexcept;
    // check() on packed bits [first, first + n): whole words where the loss window cannot
    // trip, bit by bit otherwise (and the tail short of a word); returns how many were used.
    [[nodiscard]] std::size_t check_packed(const std::uint8_t* packed, std::size_t first, std::size_t n) noexcept;
    // Checks one bit (un-inverted received value); true when it drops the lock.
    [[nodiscard]] bool check_bit(std::uint32_t received) noexcept;
    void restart_acquisition() noexcept;

    static constexpr std::uint32_t window_words_ = loss_window_bits / 64;
    static_assert(loss_window_bits % 64 == 0 && (loss_window_bits & (loss_window_bits - 1)) == 0);

    pn_pattern pattern_;
    int degree_;
    std::uint32_t mask_;
    int top_shift_;  // n - 1
    int tap_shift_;  // k - 1
    std::uint32_t invert_;
    std::uint32_t sync_bits_;

    // Bit 0 is the newest bit y[t-1], bit i is y[t-1-i]. Unlocked: received history;
    // locked: the free-running reference (same shift-register transition either way).
    std::uint32_t reg_ = 0;
    int fill_ = 0;            // history bits held, up to degree_
    std::uint32_t run_ = 0;   // consecutive correct predictions
    bool locked_ = false;

    std::array<std::uint64_t, window_words_> window_{};  // error flag per checked bit
    std::uint32_t window_pos_ = 0;
    std::uint32_t window_errors_ = 0;

    // next64_[b][v]: the reference's next 64 bits (bit j = the j-th) from a register whose
    // byte b is v and other bytes zero; by linearity the XOR over the register's bytes.
    std::array<std::array<std::uint64_t, 256>, 4> next64_{};
    // jump64_[b][v]: the register 64 steps on, the same way (the register is linear in itself).
    std::array<std::array<std::uint32_t, 256>, 4> jump64_{};

    std::uint64_t bits_checked_ = 0;
    std::uint64_t bit_errors_ = 0;
    std::uint64_t bits_before_lock_ = 0;
    std::uint64_t resyncs_ = 0;
};

}  // namespace paq::dsp
