#!/usr/bin/env bash
# End-to-end tests on loopback, CPU backend:
#   paq-sim -> paq-stream (TCP / VITA-49 / ZMQ / UDP) -> paqd -> six UDP streams (twelve with
#   detector both) -> paq-bert, compared with the offline replay of the same recording.
#
#   tests/e2e/e2e.sh BUILD_DIR CASE
#     CASE: tcp | vita49-drops | zmq-drops | udp-gnuradio-drops | stall | sigterm | notify |
#           hostile | rates | both | detectors | coded   (the cases tests/CMakeLists.txt runs as e2e.CASE)
#
# Each case prints what it compares and exits non-zero on the first mismatch.
set -euo pipefail
build=$(cd "$1" && pwd)
case_name=$2
work=$(mktemp -d "${TMPDIR:-/tmp}/paq-e2e-$case_name.XXXXXX")
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  [[ -n "${PAQ_E2E_KEEP:-}" ]] && echo "kept $work" >&2 || rm -rf "$work"
}
trap cleanup EXIT

sim=$build/tools/paq-sim
stream=$build/tools/paq-stream
bert=$build/tools/paq-bert
paqd=$build/daemon/paqd

fail() { echo "FAIL ($case_name): $*" >&2; echo "--- paqd log:" >&2; tail -40 "$work/paqd.log" >&2 || true; exit 1; }

# Ports: distinct per case and per run (several ctest jobs may run at once): a run's 20
# ports apart from those of any other process id modulo 600, all below 32768, where Linux's
# ephemeral ports begin (ip_local_port_range 32768 .. 60999): a port up there can be taken by
# any socket of another test that connects or sends (seen: paq-bert's bind refused, "Address
# already in use").
base=$((20000 + ($$ % 600) * 20))
bert_port=$base          # .. base+5 (base+11 with twelve streams)
src_port=$((base + 12))

batch=1000000
# The recording most cases send (rec); rates, coded and coded-stream make their own, hostile
# sends none (a sanitized paq-sim takes seconds).
case $case_name in
rates | coded | coded-stream | hostile) ;;
*) "$sim" --preset edwards3 --ebn0-db 12 --cfo-hz 40000 --seconds 0.25 --seed 77 --output "$work/rec" > /dev/null ;;
esac

write_config() {  # $1: source section (YAML); DETECTOR: receiver.detector (sxs)
  cat > "$work/paqd.yaml" <<EOF
receiver:
  batch_samples: $batch
  detector: ${DETECTOR:-sxs}
  fec: ${FEC:-none}
source:
$1
pipeline:
  backend: cpu
publisher:
  destinations:
    none: "127.0.0.1:$bert_port"
    zf: "127.0.0.1:$((bert_port + 1))"
    mmse: "127.0.0.1:$((bert_port + 2))"
    cma: "127.0.0.1:$((bert_port + 3))"
    fde1: "127.0.0.1:$((bert_port + 4))"
    fde2: "127.0.0.1:$((bert_port + 5))"
$(if [[ ${DETECTOR:-sxs} == both ]]; then
    k=6
    for p in none zf mmse cma fde1 fde2; do echo "    ${p}_trellis: \"127.0.0.1:$((bert_port + k))\""; k=$((k + 1)); done
  fi)
$(if [[ -n ${FEC:-} ]]; then
    # Each stream's decoded information bits to its bitstream's port (the payload type tells them apart).
    echo "  decoded_destinations:"
    k=0
    for p in none zf mmse cma fde1 fde2; do echo "    $p: \"127.0.0.1:$((bert_port + k))\""; k=$((k + 1)); done
  fi)
$(if [[ -n ${BEST:-} ]]; then echo "  best_destination: \"127.0.0.1:$((bert_port + 13))\""; fi)
$(if [[ -n ${LLR_PORTS:-} ]]; then
    read -r mmse_port fde2_port <<< "$LLR_PORTS"
    echo "  llr_destinations:"
    echo "    mmse: \"127.0.0.1:$mmse_port\""
    echo "    fde2: \"127.0.0.1:$fde2_port\""
  fi)
metrics:
  port: 0
monitor:
  status_interval_s: 0.5
log:
  destination: console
EOF
}

start_bert() {  # BERT_STREAMS: ports paq-bert binds (6); BEST: also the best-path stream's
  # paq-bert ends when wait_bert sends it SIGTERM (after paqd has ended), or 20 s after the
  # last datagram (PAQ_E2E_BERT_IDLE_S: scripts/sanitize.sh gives it 60, where a batch takes
  # seconds).
  local best_port=()
  [[ -n ${BEST:-} ]] && best_port=(--best-port $((bert_port + 13)))
  "$bert" --base-port "$bert_port" --streams "${BERT_STREAMS:-6}" "${best_port[@]}" --idle-timeout "${PAQ_E2E_BERT_IDLE_S:-20}" --interval 0 \
    --json "$work/bert.json" > "$work/bert.log" 2>&1 &
  bert_pid=$!
  pids+=("$bert_pid")
  sleep 0.3
}

start_paqd() {
  "$paqd" --config "$work/paqd.yaml" --json-out "$work/live.json" > "$work/paqd.out" 2> "$work/paqd.log" &
  paqd_pid=$!
  pids+=("$paqd_pid")
  # Wait until its source socket is bound (TCP: listening; UDP: receiving).
  local ready="receiving on port"
  grep -q "type: tcp" "$work/paqd.yaml" && ready="listening on port"
  for _ in $(seq 1 100); do
    grep -q "$ready" "$work/paqd.log" 2>/dev/null && break
    kill -0 "$paqd_pid" 2>/dev/null || fail "paqd did not start"
    sleep 0.1
  done
  sleep 0.3
}

wait_paqd() {
  local rc=0
  wait "$paqd_pid" || rc=$?
  [[ $rc -eq 0 ]] || fail "paqd exited with $rc"
}

wait_bert() {  # after wait_paqd: what paqd sent is in paq-bert's sockets, which SIGTERM drains
  local rc=0
  kill -TERM "$bert_pid" 2>/dev/null || true
  wait "$bert_pid" || rc=$?
  [[ $rc -eq 0 ]] || { cat "$work/bert.log" >&2; fail "paq-bert exited with $rc"; }
}

# The cases that compare with it receive over the network, where the front-end correction is
# on by default (receiver.front_end_correction auto): the replay does the same.
# offline [NAME [replay options...]]: NAME.json (offline.json), the options added. On the CPU
# backend, as the live runs it is compared with (the replay's own default is auto).
offline() {
  local name=${1:-offline}
  shift || true
  "$paqd" replay "$work/rec.sigmf-meta" --backend cpu --batch-samples "$batch" --front-end-correction on --json-out "$work/$name.json" "$@" \
    > "$work/$name.txt" 2>&1 || fail "offline replay ($name) failed: $(tail -5 "$work/$name.txt")"
}

# The whole recording over TCP to paqd (DETECTOR: receiver.detector; RATE: its sample rate,
# 20625000), its bitstreams to paq-bert (BERT_STREAMS ports), both run to their end.
tcp_live() {
  write_config "  type: tcp
  tcp: {mode: listen, host: 127.0.0.1, port: $src_port, format: cf32_le, sample_rate_hz: ${RATE:-20625000}, end_on_close: true}"
  start_bert
  start_paqd
  "$stream" "$work/rec.sigmf-meta" --mode tcp-connect --host 127.0.0.1 --port "$src_port" --format cf32 --fast \
    > "$work/stream.log" 2>&1 || fail "paq-stream failed: $(cat "$work/stream.log")"
  wait_paqd
  wait_bert
}

# Compares per-path bits and errors of paq-bert, paqd's own tally and the offline replay.
compare() {  # $1: "exact" or "subset"
  python3 - "$work" "$1" <<'EOF' || fail "comparison failed"
import json, sys
work, mode = sys.argv[1], sys.argv[2]
import os
live = json.load(open(f"{work}/live.json"))
bert = json.load(open(f"{work}/bert.json"))
off = json.load(open(f"{work}/offline.json")) if os.path.exists(f"{work}/offline.json") else live
ok = True
# The best-path stream (publisher.best_destination): every packet, nothing lost, and per
# packet the most reliable stream's bits: no more errors than the best single stream.
best = [s for s in bert["streams"] if s["path"] == "best"]
bert["streams"] = [s for s in bert["streams"] if s["path"] != "best"]
if best:
    b = best[0]
    least = min(live["paths"], key=lambda p: p["bit_errors"] / max(p["bits"], 1))
    print(f"  best  bert {b['bit_errors']:7}/{b['bits_checked']:9} in {b['datagrams']} datagrams; the best single stream "
          f"{least['path']} {least['bit_errors']}/{least['bits']}")
    if b["datagrams"] != live["packets_found"] or live["best_datagrams_sent"] != live["packets_found"] or live["best_send_errors"]:
        print(f"  MISMATCH best: {b['datagrams']} datagrams received, {live['best_datagrams_sent']} sent, "
              f"{live['best_send_errors']} send errors, {live['packets_found']} packets"); ok = False
    if b["lost"] or b["duplicated"] or b["reordered"] or b["malformed"]:
        print("  MISMATCH best: datagrams lost/duplicated/reordered/malformed"); ok = False
    if b["bit_errors"] / max(b["bits_checked"], 1) > least["bit_errors"] / max(least["bits"], 1):
        print("  MISMATCH best: more errors than the best single stream"); ok = False
print(f"packets: offline {off['packets_found']}, paqd {live['packets_found']}")
n_paths = (len(off["paths"]), len(live["paths"]), len(bert["streams"]))
if n_paths[0] == 0 or len(set(n_paths)) != 1:
    print(f"  MISMATCH: paths offline / paqd / paq-bert {n_paths}: not the same non-zero number"); sys.exit(1)
for p_off, p_live, s in zip(off["paths"], live["paths"], bert["streams"]):
    name = p_off["path"]
    print(f"  {name:5} offline {p_off['bit_errors']:7}/{p_off['bits']:9}  paqd {p_live['bit_errors']:7}/{p_live['bits']:9}"
          f"  bert {s['bit_errors']:7}/{s['bits_checked']:9}  lost {s['lost']} dup {s['duplicated']} reord {s['reordered']}")
    if (s["bits_checked"], s["bit_errors"]) != (p_live["bits"], p_live["bit_errors"]):
        print(f"  MISMATCH {name}: paq-bert differs from paqd's own tally"); ok = False
    if s["lost"] or s["duplicated"] or s["reordered"] or s["malformed"]:
        print(f"  MISMATCH {name}: datagrams lost/duplicated/reordered/malformed"); ok = False
    if mode == "exact" and (p_live["bits"], p_live["bit_errors"]) != (p_off["bits"], p_off["bit_errors"]):
        print(f"  MISMATCH {name}: live differs from the offline replay"); ok = False
if mode == "exact" and live["packets_found"] != off["packets_found"]:
    print("  MISMATCH: packet count"); ok = False
sys.exit(0 if ok else 1)
EOF
}

case $case_name in
tcp)
  # The whole recording over TCP: BER per path equal to the offline replay, nothing lost; the
  # best-path stream beside them.
  offline
  BEST=1 tcp_live
  compare exact
  python3 -c "
import json; j = json.load(open('$work/live.json'))
assert j['ring_samples_dropped'] == 0 and j['gaps'] == 0 and j['batches_lost'] == 0, j
print('ring drops 0, gaps 0, batches lost 0; latency mean %.0f ms, max %.0f ms' % (1e3 * j['batch_latency_mean_seconds'], 1e3 * j['batch_latency_max_seconds']))"
  ;;
vita49-drops)
  # VITA-49 with every 50th datagram dropped by the sender: each loss is counted exactly
  # (timestamps), no packet spans a loss, and what is decoded is right (12 dB: the
  # equalized paths' BER stays close to the offline one).
  offline
  write_config "  type: vita49
  vita49: {bind: 127.0.0.1, port: $src_port, sample_rate_hz: 20625000}
  stall_timeout_s: 1.0"
  start_bert
  start_paqd
  "$stream" "$work/rec.sigmf-meta" --mode vita49 --host 127.0.0.1 --port "$src_port" --samples-per-packet 2048 \
    --rate-factor 0.5 --drop-every 50 > "$work/stream.log" 2>&1 || fail "paq-stream failed: $(cat "$work/stream.log")"
  sleep 1.5   # the stall timeout ends the last segment
  kill -TERM "$paqd_pid"
  wait_paqd
  wait_bert
  compare subset
  python3 - "$work" <<'EOF' || fail "loss accounting"
import json, sys, re
work = sys.argv[1]
live = json.load(open(f"{work}/live.json"))
total = 5156250  # 0.25 s at 20.625 MS/s
sent_log = open(f"{work}/stream.log").read()
m = re.search(r"dropped (\d+)", sent_log)
assert m, "paq-stream's log has no 'dropped N' count: " + sent_log[-500:]
dropped_dgrams = int(m.group(1))
lost = live["samples_lost_in_gaps"]
print(f"sender dropped {dropped_dgrams} datagrams; paqd: gaps {live['gaps']}, samples lost {lost}, samples in {live['samples_in']}")
assert live["gaps_by_reason"]["lost-packets"] >= 1, live
assert live["samples_in"] + lost == total, (live["samples_in"], lost, total)
assert dropped_dgrams > 0
assert lost == dropped_dgrams * 2048, (lost, dropped_dgrams)
off = json.load(open(f"{work}/offline.json"))
assert live["packets_found"] < off["packets_found"], "packets across the losses must be dropped, not decoded"
assert live["packets_truncated"] > 0
assert len(off["paths"]) == len(live["paths"]) > 0, (len(off["paths"]), len(live["paths"]))
checked = 0
for p_off, p_live in zip(off["paths"], live["paths"]):
    if p_off["path"] in ("mmse", "cma", "fde1"):
        assert p_live["path"] == p_off["path"], (p_off["path"], p_live["path"])
        assert p_live["ber"] < 2 * p_off["ber"] + 1e-3, (p_off, p_live)
        checked += 1
assert checked == 3, f"{checked} of mmse, cma, fde1 found"
EOF
  ;;
zmq-drops|udp-gnuradio-drops)
  # GNU Radio interop: the sender plays GNU Radio's ZMQ PUSH Sink with
  # Pass Tags on (the tag header's item offsets), or its UDP Sink with Header "Sequence
  # Number"; every 50th message is dropped, and paqd counts each loss exactly from the
  # header, as for VITA-49.
  offline
  if [[ $case_name == zmq-drops ]]; then
    write_config "  type: zmq
  zmq: {endpoint: 'tcp://127.0.0.1:$src_port', pattern: pull, format: cf32_le, sample_rate_hz: 20625000, tags: gnuradio}
  stall_timeout_s: 1.0"
    sender_args=(--mode zmq-push --format cf32 --gnuradio-tags)
  else
    write_config "  type: udp
  udp: {bind: 127.0.0.1, port: $src_port, format: ci16_le, sample_rate_hz: 20625000, header: gnuradio-seq}
  stall_timeout_s: 1.0"
    sender_args=(--mode udp --format ci16 --gnuradio-udp-header seq)
  fi
  start_bert
  start_paqd
  "$stream" "$work/rec.sigmf-meta" "${sender_args[@]}" --host 127.0.0.1 --port "$src_port" --samples-per-packet 2048 \
    --rate-factor 0.5 --drop-every 50 > "$work/stream.log" 2>&1 || fail "paq-stream failed: $(cat "$work/stream.log")"
  sleep 1.5   # the stall timeout ends the last segment
  kill -TERM "$paqd_pid"
  wait_paqd
  wait_bert
  compare subset
  python3 - "$work" <<'EOF' || fail "loss accounting"
import json, sys, re
work = sys.argv[1]
live = json.load(open(f"{work}/live.json"))
total = 5156250  # 0.25 s at 20.625 MS/s
m = re.search(r"dropped (\d+)", open(f"{work}/stream.log").read())
dropped = int(m.group(1))
lost = live["samples_lost_in_gaps"]
print(f"sender dropped {dropped} messages; paqd: gaps {live['gaps']}, samples lost {lost}, samples in {live['samples_in']}")
assert dropped > 0
assert live["gaps_by_reason"]["lost-packets"] == dropped, live["gaps_by_reason"]
assert live["samples_in"] + lost == total, (live["samples_in"], lost, total)
assert lost == dropped * 2048, (lost, dropped)
assert live["source_malformed"] == 0, live
off = json.load(open(f"{work}/offline.json"))
assert len(off["paths"]) == len(live["paths"]) > 0, (len(off["paths"]), len(live["paths"]))
checked = 0
for p_off, p_live in zip(off["paths"], live["paths"]):
    if p_off["path"] in ("mmse", "cma", "fde1"):
        assert p_live["path"] == p_off["path"], (p_off["path"], p_live["path"])
        assert p_live["ber"] < 2 * p_off["ber"] + 1e-3, (p_off, p_live)
        checked += 1
assert checked == 3, f"{checked} of mmse, cma, fde1 found"
EOF
  ;;
stall)
  # The sender pauses 2.5 s in the middle (stall timeout 1 s): the stall is counted, the
  # packets before it are published without waiting for more samples, and reception resumes.
  write_config "  type: tcp
  tcp: {mode: listen, host: 127.0.0.1, port: $src_port, format: ci16_le, sample_rate_hz: 20625000, end_on_close: true}
  stall_timeout_s: 1.0"
  start_bert
  start_paqd
  "$stream" "$work/rec.sigmf-meta" --mode tcp-connect --host 127.0.0.1 --port "$src_port" --format ci16 \
    --rate-factor 0.5 --stall-at 0.1 --stall-for 2.5 > "$work/stream.log" 2>&1 || fail "paq-stream failed"
  wait_paqd
  wait_bert
  compare subset
  grep -q "source stalled" "$work/paqd.log" || fail "no stall logged"
  grep -q "source resumed" "$work/paqd.log" || fail "no resume logged"
  python3 -c "
import json; j = json.load(open('$work/live.json'))
assert j['stalls'] == 1, j['stalls']
assert j['samples_in'] == 5156250, j['samples_in']
assert j['packets_found'] > 300, j['packets_found']
print('stalls', j['stalls'], 'samples in', j['samples_in'], 'packets', j['packets_found'], 'truncated', j['packets_truncated'])"
  ;;
sigterm)
  # SIGTERM mid-run: paqd finishes and publishes what it received, logs its counters and
  # exits 0; paq-bert saw exactly what paqd published.
  write_config "  type: tcp
  tcp: {mode: listen, host: 127.0.0.1, port: $src_port, format: ci16_le, sample_rate_hz: 20625000}"
  start_bert
  start_paqd
  "$stream" "$work/rec.sigmf-meta" --mode tcp-connect --host 127.0.0.1 --port "$src_port" --format ci16 \
    --rate-factor 0.2 --loop > "$work/stream.log" 2>&1 &
  pids+=($!)
  # Scrape the metrics endpoint twice while it runs: it answers and its counters move.
  sleep 1
  port=$(grep -o 'metrics: http://127.0.0.1:[0-9]*' "$work/paqd.log" | grep -o '[0-9]*$')
  [[ -n $port ]] || fail "no metrics endpoint in the log"
  python3 - "$port" <<'EOF2' || fail "metrics scrape"
import sys, time, urllib.request
port = sys.argv[1]
def scrape():
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        assert r.status == 200 and r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = r.read().decode()
    return {l.split(" ")[0]: float(l.split(" ")[1]) for l in text.splitlines() if l and not l.startswith("#")}
a = scrape(); time.sleep(1.5); b = scrape()
print("metrics: samples_in %d -> %d, paqd_up %d" % (a["paqd_samples_in_total"], b["paqd_samples_in_total"], b["paqd_up"]))
assert b["paqd_samples_in_total"] > a["paqd_samples_in_total"] > 0
assert b["paqd_up"] == 1
EOF2
  kill -TERM "$paqd_pid"
  wait_paqd
  wait_bert
  compare subset
  grep -q "SIGTERM: stopping" "$work/paqd.log" || fail "no stop message"
  grep -Eq "counters:.* datagrams_sent=[1-9]" "$work/paqd.log" || fail "no publisher counters"
  grep -Eq "counters:.* send_errors=0( |$)" "$work/paqd.log" || fail "send errors in the final counters"
  python3 -c "
import json; j = json.load(open('$work/live.json'))
assert j['batches_published'] == j['batches_dispatched'] and j['batches_lost'] == 0, j
assert j['packets_found'] > 0
print('after SIGTERM: batches', j['batches_published'], 'packets', j['packets_found'], 'samples in', j['samples_in'])"
  ;;
notify)
  # paqd under a (simulated) service manager: NOTIFY_SOCKET and WATCHDOG_USEC set; READY=1,
  # STATUS= lines, WATCHDOG=1 pings and STOPPING=1 arrive on the socket.
  write_config "  type: tcp
  tcp: {mode: listen, host: 127.0.0.1, port: $src_port, format: ci16_le, sample_rate_hz: 20625000, end_on_close: true}"
  python3 - "$work/notify.sock" "$work/notify.txt" <<'EOF2' &
import socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
s.settimeout(1.0)
end = time.time() + 60
stopping = None
with open(sys.argv[2], "w") as out:
    while time.time() < end:
        # Keep listening a little after STOPPING=1: paqd still reports while it drains.
        if stopping is not None and time.time() - stopping > 3:
            break
        try:
            msg = s.recv(4096).decode()
        except socket.timeout:
            continue
        out.write(msg.replace("\n", " | ") + "\n")
        out.flush()
        if "STOPPING=1" in msg and stopping is None:
            stopping = time.time()
EOF2
  listener=$!
  pids+=("$listener")
  for _ in $(seq 1 50); do [[ -S $work/notify.sock ]] && break; sleep 0.1; done
  start_bert
  NOTIFY_SOCKET=$work/notify.sock WATCHDOG_USEC=2000000 \
    "$paqd" --config "$work/paqd.yaml" --json-out "$work/live.json" > "$work/paqd.out" 2> "$work/paqd.log" &
  paqd_pid=$!
  pids+=("$paqd_pid")
  for _ in $(seq 1 100); do grep -q "listening on port" "$work/paqd.log" 2>/dev/null && break; sleep 0.1; done
  sleep 0.3
  "$stream" "$work/rec.sigmf-meta" --mode tcp-connect --host 127.0.0.1 --port "$src_port" --format ci16 \
    --rate-factor 0.1 > "$work/stream.log" 2>&1 || fail "paq-stream failed"
  sleep 1
  kill -TERM "$paqd_pid" 2>/dev/null || true
  wait_paqd
  wait_bert
  wait "$listener" || true
  cat "$work/notify.txt"
  grep -q "READY=1" "$work/notify.txt" || fail "no READY=1"
  grep -q "STATUS=in " "$work/notify.txt" || fail "no status line"
  grep -q "WATCHDOG=1" "$work/notify.txt" || fail "no watchdog ping"
  grep -q "STOPPING=1" "$work/notify.txt" || fail "no STOPPING=1"
  grep -q "systemd watchdog: pinging every 1.0 s" "$work/paqd.log" || fail "watchdog interval not logged"
  ;;
hostile)
  # Hostile VITA-49 input at a running paqd (on loopback): two datagrams with
  # sample-count timestamps 0 and 2^64 - 1,000,000 (crashed it); a jump to 2^64 - 5000 and
  # 180 packets after it (their samples were never processed and the loss counter read
  # ~2^64); a flood of one-sample datagrams whose packet count skips by 2 (one batch per
  # datagram, unbounded memory, a 73 s SIGTERM); malformed datagrams. paqd must keep
  # running, count all of it with sane numbers, and stop on SIGTERM within the unit's 30 s.
  write_config "  type: vita49
  vita49: {bind: 127.0.0.1, port: $src_port, sample_rate_hz: 20625000, rcvbuf_bytes: 8388608}
  stall_timeout_s: 1.0
ring:
  capacity_s: 0.5"
  start_paqd
  python3 - "$src_port" <<'EOF2' || fail "sender"
import os, socket, struct, sys, time
port = int(sys.argv[1])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
def pkt(count, n, ts=None, sid=1):
    words = 2 + (2 if ts is not None else 0) + n
    hdr = (1 << 28) | ((1 if ts is not None else 0) << 20) | ((count & 15) << 16) | words
    b = struct.pack(">II", hdr, sid)
    if ts is not None:
        b += struct.pack(">Q", ts)
    return b + struct.pack(">hh", 1000, -1000) * n
def send(b):
    s.sendto(b, ("127.0.0.1", port))
# 1. The two datagrams that crashed the service.
send(pkt(0, 1000, 0)); send(pkt(1, 1000, 2**64 - 1000000))
time.sleep(0.2)
# 2. A jump to 2^64 - 5000 and 180 packets after it (positions pass 2^64).
for k in range(181):
    send(pkt(2 + k, 1000, (2**64 - 5000 + 1000 * k) % 2**64))
    if k % 20 == 0: time.sleep(0.01)
time.sleep(0.2)
# 3. A flood of one-sample datagrams whose packet count skips by 2, on another stream
# id's timeless packets (no timestamps: the count is all the tracker has).
sent = 0
t0 = time.time()
for k in range(150000):
    send(pkt(2 * k, 1, None, sid=1))
    sent += 1
# 4. Malformed datagrams.
for k in range(2000):
    send(os.urandom(1 + k % 300))
print(f"flood: {sent} datagrams in {time.time() - t0:.1f} s")
EOF2
  sleep 1
  kill -0 "$paqd_pid" 2>/dev/null || fail "paqd died under hostile datagrams"
  rss_kb=$(awk '/VmHWM/ {print $2}' /proc/$paqd_pid/status)
  t0=$(date +%s.%N)
  kill -TERM "$paqd_pid"
  wait_paqd
  t1=$(date +%s.%N)
  python3 - "$work" "$t0" "$t1" "$rss_kb" <<'EOF2' || fail "hostile accounting"
import json, sys
work, t0, t1, rss_kb = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
j = json.load(open(f"{work}/live.json"))
v = {k[len("vita49_"):]: x for k, x in j.items() if k.startswith("vita49_")}
print(f"stopped in {t1 - t0:.1f} s; peak RSS {rss_kb // 1024} MiB; samples in {j['samples_in']}, "
      f"lost in gaps {j['samples_lost_in_gaps']}, short segments {j['short_segments']} "
      f"({j['samples_in_short_segments']} samples), ring dropped {j['ring_samples_dropped']}, "
      f"gaps {j['gaps']}, coalesced {j['ring_gaps_coalesced']}, batches {j['batches_published']}; vita49 {v}")
assert t1 - t0 < 25, "SIGTERM must finish well within the unit's 30 s"
assert j["samples_lost_in_gaps"] < 2**40, "no loss near 2^64"
assert j["samples_in"] >= 181000, "the packets after the jump are processed"
assert v.get("resyncs", 0) >= 2, v
assert j["batches_lost"] == 0
assert j["batches_published"] < 1000, "a flood of gaps makes no flood of batches"
assert rss_kb < 1_500_000, "memory stays bounded"
EOF2
  grep -q "malformed" "$work/paqd.log" || fail "malformed datagrams not reported"
  ;;
rates)
  # Input rate and clock through the live service: a 30.72 MS/s recording whose transmitter clock
  # is 80 ppm slow, read by the file source (unpaced) and resampled to 2 samples per bit: the same
  # packets, clock and errors per path as paqd replay of the same file, nothing missed.
  "$sim" --preset edwards3 --ebn0-db 14 --seconds 0.15 --seed 79 --sample-rate 30.72e6 --clock-ppm -80 \
    --output "$work/rec30" > /dev/null
  "$paqd" replay "$work/rec30.sigmf-meta" --backend cpu --batch-samples 2000000 --json-out "$work/offline.json" > /dev/null 2>&1 \
    || fail "offline replay failed"
  printf '%s\n' "receiver: {batch_samples: 2000000}" \
    "source: {type: file, file: {path: $work/rec30.sigmf-meta, paced: false}}" \
    "pipeline: {backend: cpu}" "publisher: {enabled: false}" "metrics: {port: 0}" "log: {destination: console}" \
    > "$work/paqd.yaml"
  "$paqd" --config "$work/paqd.yaml" --json-out "$work/live.json" > "$work/paqd.out" 2> "$work/paqd.log" \
    || fail "paqd exited with $?"
  grep -q "rates: input 30.72 MS/s, bit rate 10.3125 Mbit/s: 2.979 samples per bit, resampled to 2" "$work/paqd.log" \
    || fail "the effective rates are not logged"
  python3 - "$work" <<'EOF2' || fail "live against offline at 30.72 MS/s"
import json, sys
work = sys.argv[1]
live, off = json.load(open(f"{work}/live.json")), json.load(open(f"{work}/offline.json"))
print(f"packets live {live['packets_found']} offline {off['packets_found']}; clock {live['mean_clock_ppm']:.1f} ppm; "
      f"missed {live['packets_missed_in_sequence']}")
assert live["packets_found"] == off["packets_found"] > 225
assert live["packets_missed_in_sequence"] == 0 == off["packets_missed_in_sequence"]
assert abs(live["mean_clock_ppm"] + 80) < 1 and off["resampled"] and off["samples_per_bit"] > 2.97
assert len(live["paths"]) == len(off["paths"]) > 0, (len(live["paths"]), len(off["paths"]))
for a, b in zip(live["paths"], off["paths"]):
    assert (a["path"], a["bits"], a["bit_errors"], a["locked"]) == (b["path"], b["bits"], b["bit_errors"], b["locked"]), (a, b)
    print(f"  {a['path']:5} {a['bit_errors']:7}/{a['bits']}")
EOF2
  ;;
both)
  # receiver.detector both: twelve streams, the six paths decided symbol by symbol
  # and again by the trellis, over TCP to paq-bert on twelve ports. Each stream's bits and
  # errors equal the offline replay's with --detector both (e2e.detectors: those equal a plain
  # sxs replay's and a trellis replay's); the records have the twelve columns, the report
  # ranks them.
  offline offline --detector both --records "$work/both" --llr-out "$work/llr"
  grep -q "mmse_trellis" "$work/offline.txt" || fail "the replay's table has no mmse_trellis row: $(cat "$work/offline.txt")"
  # Soft streams (publisher.llr_destinations) of mmse and fde2: a receiver on two ephemeral
  # ports keeps each datagram as the replay's LLR files hold a packet (start sample, LLRs).
  python3 - "$work" <<'EOF2' &
import json, os, select, socket, struct, sys, time
work = sys.argv[1]
socks = []
for name in ("mmse", "fde2"):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    s.bind(("127.0.0.1", 0))
    socks.append((name, s, open(f"{work}/live-{name}.llr", "wb"), {"datagrams": 0, "stream_ids": set(), "sequence_gaps": 0, "bad": 0}))
with open(f"{work}/llr-ports.tmp", "w") as f:
    f.write(" ".join(str(s.getsockname()[1]) for _, s, _, _ in socks))
os.rename(f"{work}/llr-ports.tmp", f"{work}/llr-ports")
# Until told to stop (llr-stop, once paqd has ended) and the sockets are drained, or 540 s
# (under the test's TIMEOUT). No idle timeout: under the sanitizers batches come further apart
# than a fixed gap would allow.
start = time.time()
while time.time() - start < 540:
    stop = os.path.exists(f"{work}/llr-stop")
    ready, _, _ = select.select([s for _, s, _, _ in socks], [], [], 0.2)
    if stop and not ready:
        break
    for name, s, out, st in socks:
        if s not in ready:
            continue
        d = s.recv(65536)
        magic, version, ptype, hlen, sid = struct.unpack(">IBBHB", d[:9])
        seq, = struct.unpack(">Q", d[16:24])
        start_sample, = struct.unpack(">Q", d[40:48])
        if (magic, version, ptype, hlen, len(d)) != (0x50415142, 2, 2, 72, 6216):
            st["bad"] += 1
            continue
        st["sequence_gaps"] += seq != st["datagrams"]
        st["datagrams"] += 1
        st["stream_ids"].add(sid)
        out.write(struct.pack("<Q", start_sample) + d[72:])
summary = {}
for name, s, out, st in socks:
    out.close()
    summary[name] = dict(st, stream_ids=sorted(st["stream_ids"]))
json.dump(summary, open(f"{work}/llr-live.json", "w"))
EOF2
  llr_pid=$!
  pids+=("$llr_pid")
  for _ in $(seq 1 50); do [[ -f "$work/llr-ports" ]] && break; sleep 0.1; done
  [[ -f "$work/llr-ports" ]] || fail "the LLR receiver did not start"
  LLR_PORTS=$(cat "$work/llr-ports") DETECTOR=both BERT_STREAMS=12 tcp_live
  compare exact
  touch "$work/llr-stop"
  wait "$llr_pid" || fail "the LLR receiver failed"
  python3 - "$work" <<'EOF2' || fail "the soft streams against the replay's LLR files"
import json, sys
work = sys.argv[1]
got, live = json.load(open(f"{work}/llr-live.json")), json.load(open(f"{work}/live.json"))
for name, sid in (("mmse", 8), ("fde2", 11)):
    g = got[name]
    assert g["bad"] == 0 and g["sequence_gaps"] == 0 and g["stream_ids"] == [sid], (name, g)
    a, b = open(f"{work}/live-{name}.llr", "rb").read(), open(f"{work}/llr-{name}_trellis.llr", "rb").read()
    assert len(a) == len(b) == live["packets_found"] * 6152, (name, len(a), len(b), live["packets_found"])
    assert a == b, f"{name}: the live LLRs differ from the replay's"
    print(f"soft stream {name}: {g['datagrams']} datagrams (stream id {sid}), byte for byte the replay's --llr-out file")
assert live["llr_datagrams_sent"] == 2 * live["packets_found"] and live["llr_send_errors"] == 0, live
EOF2
  python3 - "$work" <<'EOF2' || fail "twelve streams"
import csv, json, sys
work = sys.argv[1]
both, live, bert = json.load(open(f"{work}/offline.json")), json.load(open(f"{work}/live.json")), json.load(open(f"{work}/bert.json"))
names = [p["path"] for p in both["paths"]]
assert names == ["none", "zf", "mmse", "cma", "fde1", "fde2"] + [n + "_trellis" for n in ["none", "zf", "mmse", "cma", "fde1", "fde2"]], names
assert [p["path"] for p in live["paths"]] == names and [s["path"] for s in bert["streams"]] == names
assert both["detector"] == "both"
header = next(csv.reader(open(f"{work}/both-packets.csv")))
for n in names:
    assert n + "_errors" in header and n + "_bep" in header, n
det = {d["path"]: d for d in bert["detectors"]}
assert sorted(det) == sorted(names[:6]), det
for k, n in enumerate(names[:6]):
    s, t = bert["streams"][k], bert["streams"][k + 6]
    assert abs(det[n]["ber_sxs"] - s["ber"]) < 1e-15 and abs(det[n]["ber_trellis"] - t["ber"]) < 1e-15, (det[n], s, t)
print("paq-bert: the two detectors side by side, " + ", ".join(f"{n} {det[n]['ratio']:.2f}x" for n in names[:6]))
print("records: twelve column groups")
EOF2
  "$build/tools/paq-report" "$work/both" -o "$work/both.html" > "$work/report.log" 2>&1 || fail "paq-report: $(cat "$work/report.log")"
  grep -q "The two detectors side by side" "$work/both.html" || fail "the report has no detectors table"
  grep -q ">mmse_trellis" "$work/both.html" || fail "the report does not name mmse_trellis"
  echo "paq-report: twelve streams ranked, the detectors side by side"
  "$build/tools/paq-ber-curve" --preset two-ray --ebn0-db 12 --packets 10 --seed 31 --sample-rate 25e6 --detector both \
    --output "$work/curve.csv" > /dev/null 2>&1 || fail "paq-ber-curve --detector both"
  python3 - "$work" <<'EOF2' || fail "paq-ber-curve --detector both"
import csv, sys
rows = list(csv.DictReader(open(f"{sys.argv[1]}/curve.csv")))
names = ["none", "zf", "mmse", "cma", "fde1", "fde2"]
assert [r["path"] for r in rows] == names + [n + "_trellis" for n in names], [r["path"] for r in rows]
assert all(int(r["bits"]) > 0 for r in rows), rows
print("paq-ber-curve --detector both: twelve streams")
EOF2
  ;;
detectors)
  # receiver.detector both gives what the two detectors give alone: the replay's streams 0 .. 5
  # equal a plain sxs replay's, 6 .. 11 a trellis replay's; paq-ber-curve --detector both
  # likewise. (Label slow: three trellis runs, the detector's property rather than input
  # handling; the live service's twelve streams are e2e.both's.)
  offline offline --detector both
  offline offline-sxs --detector sxs
  offline offline-trellis --detector trellis
  python3 - "$work" <<'EOF2' || fail "twelve streams against the single-detector replays"
import json, sys
work = sys.argv[1]
both = json.load(open(f"{work}/offline.json"))
sxs, tre = json.load(open(f"{work}/offline-sxs.json")), json.load(open(f"{work}/offline-trellis.json"))
assert both["detector"] == "both" and len(both["paths"]) == 12 and len(sxs["paths"]) == 6 == len(tre["paths"])
for i, p in enumerate(both["paths"]):
    ref = (sxs if i < 6 else tre)["paths"][i % 6]
    assert (p["bits"], p["bit_errors"], p["resyncs"]) == (ref["bits"], ref["bit_errors"], ref["resyncs"]), (p, ref)
    print(f"  {p['path']:12} {p['bit_errors']:7}/{p['bits']}")
print("replay --detector both: streams 0-5 = the sxs replay, 6-11 = the trellis replay")
EOF2
  # paq-ber-curve --detector both: twelve rows per point, the first six those of --detector sxs
  # and the last six those of --detector trellis (same seeds, two points, two-ray, 25 MS/s).
  for d in sxs trellis both; do
    "$build/tools/paq-ber-curve" --preset two-ray --ebn0-db 9,12 --packets 40 --seed 31 --sample-rate 25e6 --detector "$d" \
      --output "$work/curve-$d.csv" > /dev/null 2>&1 || fail "paq-ber-curve --detector $d"
  done
  python3 - "$work" <<'EOF2' || fail "paq-ber-curve --detector both against sxs and trellis"
import csv, sys
work = sys.argv[1]
rows = {d: list(csv.DictReader(open(f"{work}/curve-{d}.csv"))) for d in ("sxs", "trellis", "both")}
assert len(rows["both"]) == 24 and len(rows["sxs"]) == 12 == len(rows["trellis"]), {d: len(r) for d, r in rows.items()}
for pt in range(2):
    b = rows["both"][12 * pt:12 * pt + 12]
    for k in range(6):
        s, t = rows["sxs"][6 * pt + k], rows["trellis"][6 * pt + k]
        assert (b[k]["path"], b[k]["bits"], b[k]["errors"]) == (s["path"], s["bits"], s["errors"]), (b[k], s)
        assert (b[k + 6]["path"], b[k + 6]["bits"], b[k + 6]["errors"]) == (t["path"] + "_trellis", t["bits"], t["errors"]), (b[k + 6], t)
print("paq-ber-curve --detector both: twelve streams per point, equal to the sxs and trellis curves")
EOF2
  ;;
coded)
  # receiver.fec: a coded link (ar4ja-1024-1/2, 3 codewords per packet; edwards3 at 9 dB, 25 MS/s,
  # +30 ppm) over TCP. Every stream's decoded information bits go to paq-bert on its bitstream's
  # port: paq-bert's decoded streams count the bits, errors and codewords paqd counted, which
  # equal the offline replay's (the code read from the recording's paq:fec); the records carry
  # the codewords and paq-report sets decoded and channel bits side by side.
  "$sim" --preset edwards3 --ebn0-db 9 --cfo-hz -25000 --seconds 0.25 --seed 5077 --sample-rate 25e6 --clock-ppm 30 \
    --ldpc ar4ja-1024-1/2 --output "$work/rec" > /dev/null
  offline offline --records "$work/coded"
  grep -q "fec ar4ja-1024-1/2 (from paq:fec)" "$work/offline.txt" || fail "the replay did not take the recording's code: $(head -5 "$work/offline.txt")"
  FEC=ar4ja-1024-1/2 RATE=25000000 tcp_live
  python3 - "$work" <<'EOF2' || fail "decoded streams against paqd's tally and the replay"
import json, sys
work = sys.argv[1]
live, off, bert = (json.load(open(f"{work}/{n}.json")) for n in ("live", "offline", "bert"))
assert off["fec"] == "ar4ja-1024-1/2" and off["fec_from"] == "paq:fec", (off["fec"], off["fec_from"])
assert live["packets_found"] == off["packets_found"] > 300, (live["packets_found"], off["packets_found"])
dec = bert["decoded_streams"]
assert [d["path"] for d in dec] == ["none", "zf", "mmse", "cma", "fde1", "fde2"], [d["path"] for d in dec]
assert len(live["paths"]) == len(off["paths"]) == 6
failed = 0
for d, p, o in zip(dec, live["paths"], off["paths"]):
    assert d["code"] == "ar4ja-1024-1/2" and d["lost"] == 0 and d["duplicated"] == 0 and d["reordered"] == 0, d
    mine = (d["bits_checked"], d["bit_errors"], d["codewords"], d["codewords_failed"], d["iterations"], d["channel_bit_errors"])
    theirs = (p["bits"], p["bit_errors"], p["fec_codewords"], p["fec_codewords_failed"], p["fec_iterations"], p["fec_channel_bit_errors"])
    replay = (o["bits"], o["bit_errors"], o["fec_codewords"], o["fec_codewords_failed"], o["fec_iterations"], o["fec_channel_bit_errors"])
    print(f"  {p['path']:5} decoded {d['bit_errors']:6}/{d['bits_checked']:8}  codewords {d['codewords']} failed {d['codewords_failed']}"
          f"  iterations {d['mean_iterations']:.2f}  channel BER {d['channel_ber']:.2e}")
    assert mine == theirs, (p["path"], "paq-bert", mine, "paqd", theirs)
    assert theirs == replay, (p["path"], "live", theirs, "replay", replay)
    assert p["fec_codewords"] == 3 * live["packets_found"], (p["fec_codewords"], live["packets_found"])
    failed += d["codewords_failed"]
assert dec[2]["codewords_failed"] == 0 and dec[2]["bit_errors"] == 0, dec[2]
assert 0 < failed, "every codeword of every path decoded: the test would not see a failure counted"
assert live["decoded_datagrams_sent"] == 6 * live["packets_found"] and live["decoded_send_errors"] == 0, live
assert [s["datagrams"] for s in bert["streams"]] == [live["packets_found"]] * 6, [s["datagrams"] for s in bert["streams"]]
print(f"paq-bert: six decoded streams beside six bitstreams on six ports, equal to paqd's counts and the replay's ({failed} failed codewords)")
EOF2
  "$build/tools/paq-report" "$work/coded" -o "$work/coded.html" > "$work/report.log" 2>&1 || fail "paq-report: $(cat "$work/report.log")"
  grep -q "Decoded and channel bits side by side" "$work/coded.html" || fail "the report has no table of decoded and channel bits"
  grep -q "<code>ar4ja-1024-1/2</code> (3 codewords of 2048 bits per packet)" "$work/coded.html" || fail "the report does not name the code"
  echo "paq-report: decoded and channel bits side by side"
  ;;
coded-stream)
  # receiver.fec sent as the continuous stream (ar4ja-4096-1/2: sync-marked, randomized frames
  # of 8448 bits across the data fields; edwards3 at 9 dB, 25 MS/s, +30 ppm) over TCP. Every
  # stream's decoded datagrams (the frames that end in each packet, numbered) go to paq-bert:
  # its counts of decoded bits, errors and frames equal paqd's, which equal the offline
  # replay's; the records and paq-report name the stream.
  "$sim" --preset edwards3 --ebn0-db 9 --cfo-hz -25000 --seconds 0.25 --seed 5079 --sample-rate 25e6 --clock-ppm 30 \
    --ldpc ar4ja-4096-1/2 --output "$work/rec" > /dev/null
  offline offline --records "$work/coded"
  grep -q "fec ar4ja-4096-1/2 (from paq:fec): the continuous stream" "$work/offline.txt" \
    || fail "the replay did not take the recording's code: $(head -5 "$work/offline.txt")"
  FEC=ar4ja-4096-1/2 RATE=25000000 tcp_live
  python3 - "$work" <<'EOF2' || fail "the continuous stream's decoded datagrams against paqd's tally and the replay"
import json, sys
work = sys.argv[1]
live, off, bert = (json.load(open(f"{work}/{n}.json")) for n in ("live", "offline", "bert"))
assert off["fec"] == "ar4ja-4096-1/2" and off["fec_from"] == "paq:fec", (off["fec"], off["fec_from"])
assert live["packets_found"] == off["packets_found"] > 300, (live["packets_found"], off["packets_found"])
dec = bert["decoded_streams"]
assert [d["path"] for d in dec] == ["none", "zf", "mmse", "cma", "fde1", "fde2"], [d["path"] for d in dec]
for d, p, o in zip(dec, live["paths"], off["paths"]):
    assert d["code"] == "ar4ja-4096-1/2" and d["lost"] == 0 and d["duplicated"] == 0 and d["reordered"] == 0, d
    mine = (d["bits_checked"], d["bit_errors"], d["codewords"], d["codewords_failed"], d["iterations"])
    theirs = (p["bits"], p["bit_errors"], p["fec_codewords"], p["fec_codewords_failed"], p["fec_iterations"])
    replay = (o["bits"], o["bit_errors"], o["fec_codewords"], o["fec_codewords_failed"], o["fec_iterations"])
    print(f"  {p['path']:5} decoded {d['bit_errors']:6}/{d['bits_checked']:8}  frames {d['codewords']} failed {d['codewords_failed']}")
    assert mine == theirs, (p["path"], "paq-bert", mine, "paqd", theirs)
    assert theirs == replay, (p["path"], "live", theirs, "replay", replay)
    # 6144 / 8448 frames a data field, less the one begun before the run.
    assert abs(p["fec_codewords"] - live["packets_found"] * 6144 / 8448) <= 2, (p["fec_codewords"], live["packets_found"])
assert dec[2]["codewords_failed"] == 0 and dec[2]["bit_errors"] == 0 and dec[2]["bits_checked"] > 0, dec[2]
assert live["decoded_datagrams_sent"] == 6 * live["packets_found"] and live["decoded_send_errors"] == 0, live
print("paq-bert: the continuous stream's six decoded streams, equal to paqd's counts and the replay's")
EOF2
  "$build/tools/paq-report" "$work/coded" -o "$work/coded.html" > "$work/report.log" 2>&1 || fail "paq-report: $(cat "$work/report.log")"
  grep -q "<code>ar4ja-4096-1/2</code> as the continuous stream" "$work/coded.html" || fail "the report does not name the continuous stream"
  echo "paq-report: the continuous stream named"
  ;;
*)
  echo "unknown case $case_name" >&2
  exit 2
  ;;
esac
echo "PASS ($case_name)"
