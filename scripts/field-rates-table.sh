#!/usr/bin/env bash
# The field-rates table: BER per path against the input rate and the transmitter's clock
# offset, each against the 2-samples-per-bit, 0 ppm run with the same seed, on AWGN 11 dB and
# edwards3 15 dB. Recordings from paq-sim (ci16), received by paqd replay.
#   scripts/field-rates-table.sh BIN_DIR BACKEND [SECONDS]     BIN_DIR holds paq-sim and paqd
set -euo pipefail
bin=$1 backend=$2 seconds=${3:-2}
work=$(mktemp -d "${TMPDIR:-/tmp}/paq-rates.XXXXXX")
trap 'rm -rf "$work"' EXIT
run() {  # preset ebn0 rate ppm [drift]
  local n="$work/r"
  "$bin/paq-sim" --preset "$1" --ebn0-db "$2" --cfo-hz 30000 --seconds "$seconds" --seed 211 --sample-rate "$3" \
    --clock-ppm "$4" --clock-drift-ppm-per-s "${5:-0}" --datatype ci16_le --output "$n" > /dev/null
  "$bin/paqd" replay "$n.sigmf-meta" --backend "$backend" --json-out "$n.json" > /dev/null 2>&1 || true
  python3 - "$n.json" "$1 $2 dB" "$3" "$4${5:+ +$5/s}" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
cells = " | ".join("%.2e (%d)" % (p["ber"], p["bit_errors"]) for p in j["paths"])
print(f"| {sys.argv[2]} | {float(sys.argv[3])/1e6:.6g} | {sys.argv[4]} | {j['mean_clock_ppm']:.1f} | {cells} |")
PY
}
echo "| channel | input MS/s | ppm | est. ppm | none | zf | mmse | cma | fde1 | fde2 |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for ch in "awgn 11" "edwards3 15"; do
  set -- $ch
  for r in 20.625e6 25e6 30.72e6 41.25e6 61.44e6; do run "$1" "$2" "$r" 0; done
  for p in 200 -200; do run "$1" "$2" 20.625e6 "$p"; done
  run "$1" "$2" 30.72e6 -150
  run "$1" "$2" 61.44e6 200
  run "$1" "$2" 20.625e6 0 50
done
