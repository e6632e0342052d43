#!/usr/bin/env bash
# A real scrape of a running paqd passes `promtool check metrics` (the
# Prometheus project's lint of the text format: types, HELP, names, units, histograms).
# paqd runs on a looped, paced paq-sim recording with the publisher (to a port nobody
# listens on: send errors too), records and the CPU backend, so every family it can export
# on a non-VITA-49 source is in the scrape; then the scrape is checked, and a second one
# taken a second later.
#
#   tests/e2e/promtool.sh BUILD_DIR
#
# Exits 77 (ctest: skipped) when promtool is not installed (Debian: prometheus, which
# scripts/setup.sh installs).
set -euo pipefail
build=$(cd "$1" && pwd)
source "$(dirname "$0")/common.sh"
command -v promtool > /dev/null || { echo "SKIP: no promtool (Debian package prometheus; scripts/setup.sh)"; exit 77; }
work=$(mktemp -d "${TMPDIR:-/tmp}/paq-promtool.XXXXXX")
paqd_pid=""
cleanup() {
  [[ -n $paqd_pid ]] && kill "$paqd_pid" 2> /dev/null && wait "$paqd_pid" 2> /dev/null
  [[ -n "${PAQ_E2E_KEEP:-}" ]] && echo "kept $work" >&2 || rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL (promtool): $*" >&2; exit 1; }

"$build/tools/paq-sim" --bit-rate 1e6 --seconds 0.1 --seed 7 --output "$work/rec" > /dev/null || fail "paq-sim"
# A UDP port with nobody behind it: the publisher's sends are refused (ICMP), counted per stream.
dead=$(python3 -c 'import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
printf '%s\n' "receiver: {bit_rate_hz: 1e6, batch_samples: 400000}" \
  "source: {type: file, file: {path: $work/rec.sigmf-meta, paced: true, loop: true}}" \
  "pipeline: {backend: cpu}" \
  "publisher: {destinations: {none: \"127.0.0.1:$dead\", zf: \"127.0.0.1:$dead\", mmse: \"127.0.0.1:$dead\", cma: \"127.0.0.1:$dead\", fde1: \"127.0.0.1:$dead\", fde2: \"127.0.0.1:$dead\"}}" \
  "records: {path: $work/records}" "metrics: {port: 0}" "log: {destination: console}" > "$work/paqd.yaml"
"$build/daemon/paqd" --config "$work/paqd.yaml" > "$work/paqd.out" 2> "$work/paqd.log" &
paqd_pid=$!

port=$(logged_port "$work/paqd.log" metrics "$paqd_pid")
[[ -n $port ]] || { tail -20 "$work/paqd.log" >&2; fail "no metrics endpoint in the log"; }

scrape() {
  python3 -c '
import sys, urllib.request
with urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/metrics", timeout=5) as r:
    sys.stdout.write(r.read().decode())' "$port" > "$1" || fail "scrape"
}
sleep 1.5
scrape "$work/scrape1.txt"
# The second scrape once a batch has gone through (the latency histogram counts it).
for _ in $(seq 60); do
  sleep 1
  scrape "$work/scrape2.txt"
  count=$(grep '^paqd_batch_latency_seconds_count ' "$work/scrape2.txt" | cut -d' ' -f2)
  [[ ${count:-0} -gt 0 ]] && break
done
for s in scrape1 scrape2; do
  if ! promtool check metrics < "$work/$s.txt" > "$work/$s.promtool" 2>&1; then
    cat "$work/$s.promtool" >&2
    fail "promtool check metrics found problems in $s"
  fi
done
# What must be in it (a histogram, build info, the per-stream send errors, a window sum).
for want in 'paqd_batch_latency_seconds_bucket{le="+Inf"} ' 'paqd_batch_latency_seconds_count ' 'paqd_build_info{' \
  'paqd_path_send_errors_total{path="fde2"} ' 'paqd_ebn0_linear_sum_total ' 'paqd_path_checked_bit_count_total{path="mmse"} '; do
  grep -qF "$want" "$work/scrape2.txt" || fail "no '$want' in the scrape"
done
count=$(grep '^paqd_batch_latency_seconds_count ' "$work/scrape2.txt" | cut -d' ' -f2)
[[ $count -gt 0 ]] || fail "no batch in the latency histogram after 60 s"
echo "promtool check metrics: clean ($(grep -vc '^#' "$work/scrape2.txt") series, $count batches in the latency histogram)"
kill -TERM "$paqd_pid"
wait "$paqd_pid" || fail "paqd exited with $? after SIGTERM"
paqd_pid=""
