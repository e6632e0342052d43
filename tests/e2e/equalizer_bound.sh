#!/usr/bin/env bash
# paq-equalizer-bound: AWGN against itself costs 0 dB for every structure; over edwards3 and
# two-ray the linear equalizer pays more than 2 dB (the notch), more than with its output's
# interference taken out and more than decision feedback, each of which pays more than the
# matched-filter bound, which pays something; at two Eb/N0 and a seed of its own.
set -euo pipefail
bin=$1/bench/paq-equalizer-bound
fail() { echo "equalizer_bound: $*" >&2; exit 1; }
check() {  # preset, then the awk condition on the le, le+ic, dfe and mfb costs of each Eb/N0
  local out
  out=$("$bin" --preset "$1" --ebn0-db 2,6 --bits 30000 --span 8 --seed 1234) || fail "$1: exit status $?"
  echo "$out"
  echo "$out" | awk -v preset="$1" -v cond="$2" '
    $3 == "le" || $3 == "le+ic" || $3 == "dfe" || $3 == "mfb" { cost[$1, $3] = $6; e[$1] = 1; n++ }
    END {
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
echo "equalizer_bound: ordered"
