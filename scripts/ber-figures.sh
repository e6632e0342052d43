#!/usr/bin/env bash
# Regenerates docs/figures/ber-*.{csv,json,png}: BER against Eb/N0 for the six paths on awgn,
# two-ray and edwards3 (CPU backend), with the OQPSK theory curve. About 1.5 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
tool=build/tools/paq-ber-curve
[[ -x $tool ]] || { echo "ber-figures: build first (scripts/build.sh)" >&2; exit 1; }
out=docs/figures
mkdir -p "$out"
$tool --preset awgn --ebn0-db 0,2,4,6,8,9,9.5,10,10.5,11,12 --packets 1000 --min-errors 20 --max-packets 3000 --seed 1 \
  --output $out/ber-awgn.csv --json $out/ber-awgn.json
$tool --preset two-ray --ebn0-db 6,9,12,15,18,21 --packets 300 --seed 1 \
  --output $out/ber-two-ray.csv --json $out/ber-two-ray.json
$tool --preset edwards3 --ebn0-db 6,9,12,15,18,21 --packets 300 --seed 1 \
  --output $out/ber-edwards3.csv --json $out/ber-edwards3.json
for p in awgn two-ray edwards3; do
  scripts/plot-ber.sh $out/ber-$p.csv $out/ber-$p.png "BER, $p (paqd CPU backend)"
done
