#!/usr/bin/env bash
# paq-equalizer-bound: AWGN against itself costs 0 dB for every structure; over edwards3 and
# two-ray the costs are ordered linear > decision feedback > matched filter > 0, and the linear
# equalizer's is the largest by far (the notch), at two Eb/N0 and a seed of its own.
set -euo pipefail
bin=$1/bench/paq-equalizer-bound
fail() { echo "equalizer_bound: $*" >&2; exit 1; }
check() {  # preset, then the awk condition on the le, dfe and mfb costs of each Eb/N0
  local out
  out=$("$bin" --preset "$1" --ebn0-db 2,6 --bits 30000 --span 8 --seed 1234) || fail "$1: exit status $?"
  echo "$out"
  echo "$out" | awk -v preset="$1" -v cond="$2" '
    $3 == "le" || $3 == "dfe" || $3 == "mfb" { cost[$1, $3] = $6; e[$1] = 1; n++ }
    END {
      if (n != 6) { print "expected 6 rows, got " n; exit 1 }
      for (x in e) {
        le = cost[x, "le"]; dfe = cost[x, "dfe"]; mfb = cost[x, "mfb"]
        ok = cond == "zero" ? (le == 0 && dfe == 0 && mfb == 0) : (le > dfe + 0.5 && dfe > mfb + 0.5 && mfb > 0 && le > 2)
        if (!ok) { print preset " at " x " dB: le " le ", dfe " dfe ", mfb " mfb " (" cond ")"; exit 1 }
      }
    }' || fail "$1: costs out of order"
}
check awgn zero
check edwards3 ordered
check two-ray ordered
echo "equalizer_bound: ordered"
