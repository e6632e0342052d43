#!/usr/bin/env bash
# The bounds' measurements (tests/CMakeLists.txt). paq-equalizer-bound: on AWGN every
# structure's SNR lies within 1 dB below 2 Eb/N0 (what BPSK would have; SOQPSK-TG's partial
# response costs it a little), and AWGN against itself costs nothing; over edwards3 and two-ray
# the linear equalizer pays more than 2 dB (the notch), more than with its output's
# interference taken out and more than decision feedback, each of which pays more than the
# matched-filter bound, which pays something; at two Eb/N0 and a seed of its own. Every
# figure must be a number (a NaN must not pass as one).
set -euo pipefail
bin=$1/bench/paq-equalizer-bound
fail() { echo "equalizer_bound: $*" >&2; exit 1; }
check() {  # preset, then the awk condition on the le, le+ic, dfe and mfb costs of each Eb/N0
  local out
  out=$("$bin" --preset "$1" --ebn0-db 2,6 --bits 30000 --span 8 --seed 1234) || fail "$1: exit status $?"
  echo "$out"
  echo "$out" | awk -v preset="$1" -v cond="$2" '
    function number(v) { return v ~ /^-?[0-9]+(\.[0-9]+)?$/ }
    $3 == "le" || $3 == "le+ic" || $3 == "dfe" || $3 == "mfb" {
      if (!number($1) || !number($4) || !number($5) || !number($6)) { print "not a number in: " $0; bad = 1 }
      bpsk = 3.0103 + $1
      if (!($4 < bpsk && $4 > bpsk - 1)) { print "AWGN SNR " $4 " dB not within 1 dB below " bpsk " dB: " $0; bad = 1 }
      cost[$1, $3] = $6; e[$1] = 1; n++ }
    END {
      if (bad) exit 1
      if (n != 8) { print "expected 8 rows, got " n; exit 1 }
      for (x in e) {
        le = cost[x, "le"]; ic = cost[x, "le+ic"]; dfe = cost[x, "dfe"]; mfb = cost[x, "mfb"]
        ok = cond == "zero" ? (le == 0 && ic == 0 && dfe == 0 && mfb == 0) \
                            : (le > 2 && le > ic + 0.5 && le > dfe + 0.5 && ic > mfb + 0.5 && dfe > mfb + 0.5 && mfb > 0)
        if (!ok) { print preset " at " x " dB: le " le ", le+ic " ic ", dfe " dfe ", mfb " mfb " (" cond ")"; exit 1 }
      }
    }' || fail "$1: costs out of order"
}
check awgn zero
check edwards3 ordered
check two-ray ordered
echo "equalizer_bound: costs ordered"

# The coded link (--code): every codeword decoded at 3 dB over AWGN and 6.5 dB over edwards3
# on the first iteration; at 3 dB over edwards3 every codeword fails, and says so (an
# information-bit error rate of several percent), on every iteration.
out=$("$bin" --preset edwards3 --code ar4ja-4096-2/3 --info-ebn0-db 3,6.5 --codewords 3 --iterations 2 --bits 20000 --span 8 --seed 1234) ||
  fail "--code: exit status $?"
echo "$out"
echo "$out" | awk '
  $1 == "awgn" || $1 == "edwards3" { rows++
    failed = $5; frames = $7; ber = $9
    if (frames != 3) { print "frames " frames " in: " $0; bad = 1 }
    if (($1 == "awgn" || $2 == "6.50") && (failed != 0 || ber != 0)) { print "not decoded: " $0; bad = 1 }
    if ($1 == "edwards3" && $2 == "3.00" && (failed != 3 || ber < 0.05)) { print "not failed as it should: " $0; bad = 1 } }
  END { if (rows != 8) { print "expected 8 rows, got " rows; bad = 1 } exit bad }' || fail "--code: unexpected counts"
# Iterations help: over edwards3 at 4.75 dB, after four iterations no more codewords fail than
# after the first (the linear equalizer alone), and the information bits err less.
out=$("$bin" --preset edwards3 --code ar4ja-4096-2/3 --info-ebn0-db 4.75 --codewords 12 --iterations 4 --bits 20000 --span 8 --seed 1234) ||
  fail "--code --iterations 4: exit status $?"
echo "$out"
echo "$out" | awk '$1 == "edwards3" && $4 == 1 { f1 = $5; b1 = $9 } $1 == "edwards3" && $4 == 4 { f4 = $5; b4 = $9 }
  END { if (!(f1 != "" && f4 != "" && f4 <= f1 && b4 + 0 < b1 + 0 && b1 + 0 > 0)) { print "iteration 1: " f1 " failed, BER " b1 "; iteration 4: " f4 ", " b4; exit 1 } }' ||
  fail "--code: iterating did not help"
# Sequence detection over edwards3 (paq-trellis-bound --preset): a table over 9 bits holds the
# echoes with the modulation (below -55 dB), one over 5 bits does not (above -30 dB).
trellis=$1/bench/paq-trellis-bound
out=$("$trellis" --bits 20000 --window 5,9 --lowpass 0 --preset edwards3 --seed 5) || fail "paq-trellis-bound --preset: exit status $?"
echo "$out"
echo "$out" | awk '/table over 5 bits/ { w5 = $(NF - 1) } /table over 9 bits/ { w9 = $(NF - 1) }
  END { if (!(w5 > -30 && w9 < -55)) { print "model errors: 5 bits " w5 " dB, 9 bits " w9 " dB"; exit 1 } }' ||
  fail "paq-trellis-bound --preset edwards3: the tables' model errors"
echo "equalizer_bound: coded and sequence detection as expected"
