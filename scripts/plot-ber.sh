#!/usr/bin/env bash
# plot-ber.sh CSV OUT.png [TITLE]
#
# Plots a paq-ber-curve CSV (preset,ebn0_db,path,bits,errors,ber,theory_ber,...) as BER
# against Eb/N0 on a log scale: one line with points per equalizer path, plus the OQPSK
# theory Q(sqrt(2 Eb/N0)) = 0.5 erfc(sqrt(Eb/N0)). Points with zero errors (BER 0, which a
# log axis cannot show) are left out of their path's line.
set -euo pipefail

usage() { echo "usage: $0 CSV OUT.png [TITLE]" >&2; exit 2; }
[[ $# -ge 2 && $# -le 3 ]] || usage
csv=$1
out=$2
title=${3:-}

if ! command -v gnuplot >/dev/null 2>&1; then
  echo "$0: gnuplot not found on PATH (Debian: apt-get install gnuplot-nox)" >&2
  exit 1
fi
[[ -r $csv ]] || { echo "$0: cannot read $csv" >&2; exit 1; }

header=$(head -n 1 "$csv")
if [[ $header != preset,ebn0_db,path,bits,errors,ber,theory_ber* ]]; then
  echo "$0: $csv does not look like paq-ber-curve output (header: $header)" >&2
  exit 1
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# One gnuplot data block per path (in first-appearance order), separated by two blank
# lines so that `index i` selects a path; rows with zero errors are dropped.
awk -F, -v dat="$tmp/ber.dat" -v names="$tmp/paths" -v presets="$tmp/preset" '
  NR == 1 { next }
  NF < 7 { next }
  {
    if (!($3 in seen)) { seen[$3] = ++n; order[n] = $3 }
    if (!($1 in pseen)) { pseen[$1] = 1; plist = plist (plist == "" ? "" : " ") $1 }
    if ($5 + 0 > 0 && $6 + 0 > 0) {
      rows[$3] = rows[$3] $2 " " $6 "\n"
      if (ymin == "" || $6 + 0 < ymin) ymin = $6 + 0
    }
    if (xmin == "" || $2 + 0 < xmin) xmin = $2 + 0
    if (xmax == "" || $2 + 0 > xmax) xmax = $2 + 0
  }
  END {
    for (i = 1; i <= n; i++) {
      p = order[i]
      printf "# %s\n", p > dat
      # An empty block still needs one row for `index` to count it; NaN is not drawn.
      if (rows[p] == "") printf "NaN NaN\n" > dat; else printf "%s", rows[p] > dat
      printf "\n\n" > dat
      printf "%s\n", p > names
    }
    printf "%s\n", plist > presets
    # y axis down to 1e-6, or to the decade below the smallest measured BER if lower.
    ylo = 1e-6
    if (ymin != "" && ymin < ylo) ylo = 10 ^ int(log(ymin) / log(10) - 1)
    printf "%g %g %g\n", xmin, xmax, ylo > (dat ".range")
  }' "$csv"

[[ -s $tmp/paths ]] || { echo "$0: no data rows in $csv" >&2; exit 1; }
paths=$(tr '\n' ' ' < "$tmp/paths")
npaths=$(wc -l < "$tmp/paths")
read -r xmin xmax ylo < "$tmp/ber.dat.range"
if [[ -z $title ]]; then
  title="BER vs Eb/N0, preset $(cat "$tmp/preset")"
fi

if gnuplot -e 'set terminal' 2>&1 | grep -qw pngcairo; then
  term='set terminal pngcairo size 900,650 enhanced font "DejaVu Sans,11"'
else
  term='set terminal png size 900,650'
fi

# Escape double quotes for the gnuplot string literal.
gtitle=${title//\"/\\\"}

gnuplot <<GP
$term
set output "$out"
set title "$gtitle"
set xlabel "E_b/N_0 (dB)"
set ylabel "bit error rate"
set logscale y
set format y "10^{%L}"
set yrange [$ylo:1]
set xrange [$xmin-0.5:$xmax+0.5]
set grid xtics ytics mytics
set mytics 10
set key outside right top box
set samples 400
theory(x) = 0.5*erfc(sqrt(10**(x/10.0)))
paths = "$paths"
colors = "#7b2cbf #1b9e77 #1f78b4 #e66101 #d7191c #555555 #b8860b #ff69b4"
# Twelve streams (paq-ber-curve --detector both): a _trellis stream in its path's colour, dashed.
n6 = ($npaths == 12) ? 6 : 8
color(i) = word(colors, (i-1) % n6 + 1)
dash(i) = ($npaths == 12 && i > 6) ? 3 : 1
set label 1 "points with 0 errors\nare not drawn" at graph 1.03, graph 0.55 font ",9"
plot for [i=1:$npaths] "$tmp/ber.dat" index (i-1) using 1:2 with linespoints lw 2 dt dash(i) lc rgb color(i) \
       pt (i+3) ps 1.3 title word(paths, i) noenhanced, \
     theory(x) with lines lw 2 dt 2 lc rgb "black" title "OQPSK theory"
GP
echo "wrote $out"
