#!/usr/bin/env bash
# The quick start's main job: set up, build, make the demo recording if absent (edwards3,
# 3 s, Eb/N0 12 dB), then run the receiver as a service would: paqd replays the recording at
# its real-time rate through the live pipeline and publishes the six bitstreams over UDP,
# paq-bert listens to all six and prints their BERs side by side. Last, paq-report turns
# the per-packet records into demo/edwards3-report.html.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
mkdir -p demo
if [[ ! -f demo/edwards3.sigmf-meta ]]; then
  build/tools/paq-sim --preset edwards3 --ebn0-db 12 --cfo-hz 50000 --timing-offset 0.3 \
    --seconds 3 --seed 2026 --output demo/edwards3
fi

base_port=${PAQ_DEMO_PORT:-50000}
cat > demo/paqd-demo.yaml <<EOF
# Written by scripts/demo.sh: the demo recording through the live pipeline.
source:
  type: file
  file: {path: edwards3.sigmf-meta, paced: true}
publisher:
  destinations:
    none: "127.0.0.1:$base_port"
    zf: "127.0.0.1:$((base_port + 1))"
    mmse: "127.0.0.1:$((base_port + 2))"
    cma: "127.0.0.1:$((base_port + 3))"
    fde1: "127.0.0.1:$((base_port + 4))"
    fde2: "127.0.0.1:$((base_port + 5))"
records: {path: edwards3}
metrics: {port: 0}
monitor: {status_interval_s: 2}
log: {destination: console}
EOF

build/tools/paq-bert --base-port "$base_port" --interval 0 --idle-timeout 600 --expect-streams 6 \
  --json demo/edwards3-bert.json &
bert=$!
trap 'kill $bert 2>/dev/null || true' EXIT
sleep 0.5
echo "demo: paqd replays demo/edwards3 at real time (3 s of signal; the CPU backend may take longer)"
build/daemon/paqd --config demo/paqd-demo.yaml --json-out demo/edwards3-live.json
# paqd has published everything: let paq-bert drain its sockets, then ask for its summary.
sleep 1
kill -TERM $bert
wait $bert || true
trap - EXIT
build/tools/paq-report demo/edwards3 --title "paqd demo: edwards3, 12 dB" -o demo/edwards3-report.html
echo "demo: paq-bert summary demo/edwards3-bert.json, paqd counters demo/edwards3-live.json,"
echo "      records demo/edwards3-packets.csv, report demo/edwards3-report.html"
