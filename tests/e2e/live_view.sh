#!/usr/bin/env bash
# The live view in a browser during a run: paqd receives a looped, paced paq-sim recording
# (two-ray multipath, 25 MS/s for a 10 Mbit/s link: resampled, with a CFO and IQ imbalance)
# on the CPU backend; headless Chromium opens http://127.0.0.1:PORT/view, runs its script for
# a few seconds and gives its DOM, which must show every panel drawn from paqd's data: the
# path table filled, the BER and DQM history drawn, each path's constellation and eye, the
# spectrum and the channel. The data endpoint's content is checked in test_live_view.
#
#   tests/e2e/live_view.sh BUILD_DIR [PNG_OUT]
#
# Exits 77 (ctest: skipped) without chromium (Debian: chromium; scripts/setup.sh installs it).
# PNG_OUT keeps a screenshot of the page.
set -euo pipefail
build=$(cd "$1" && pwd)
source "$(dirname "$0")/common.sh"
find_browser
work=$(mktemp -d "${TMPDIR:-/tmp}/paq-live-view.XXXXXX")
paqd_pid=""
cleanup() {
  [[ -n $paqd_pid ]] && kill "$paqd_pid" 2> /dev/null && wait "$paqd_pid" 2> /dev/null
  [[ -n "${PAQ_E2E_KEEP:-}" ]] && echo "kept $work" >&2 || rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL (live view): $*" >&2; exit 1; }

"$build/tools/paq-sim" --preset two-ray --ebn0-db 14 --seconds 0.2 --sample-rate 25e6 --cfo-hz -42000 \
  --iq-imbalance 1,4 --seed 1207 --output "$work/rec" > /dev/null || fail "paq-sim"
printf '%s\n' "receiver: {batch_samples: 1000000}" \
  "source: {type: file, file: {path: $work/rec.sigmf-meta, paced: true, rate_factor: 0.25, loop: true}}" \
  "pipeline: {backend: cpu}" "publisher: {enabled: false}" \
  "metrics: {port: 0}" "log: {destination: console}" > "$work/paqd.yaml"
"$build/daemon/paqd" --config "$work/paqd.yaml" > "$work/paqd.out" 2> "$work/paqd.log" &
paqd_pid=$!

port=$(logged_port "$work/paqd.log" "live view" "$paqd_pid")
[[ -n $port ]] || { tail -20 "$work/paqd.log" >&2; fail "no live view in the log"; }
python3 - "$port" <<'PY' || fail "the data endpoint never showed a packet"
import json, sys, time, urllib.request
port = sys.argv[1]
for _ in range(1200):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/view/data.json", timeout=5) as r:
        assert r.headers["Content-Type"] == "application/json"
        d = json.load(r)
    if d["packet"] and len(d["history"]["t_s"]) >= 2 and any(v is not None for v in d["history"]["ber"][2]):
        print(f"data: {len(d['history']['t_s'])} s of history, a packet {d['packet']['age_s']} s old")
        sys.exit(0)
    time.sleep(0.1)
sys.exit(1)
PY

# The page's script polls every second; 6 s of virtual time lets it draw several times.
# --no-sandbox: root in a container has no user namespaces for Chromium's sandbox.
timeout 120 "$browser" --headless --no-sandbox --disable-gpu --user-data-dir="$work/profile" --virtual-time-budget=6000 \
  --dump-dom "http://127.0.0.1:$port/view" > "$work/dom.html" 2> "$work/chromium.log" \
  || { tail -5 "$work/chromium.log" >&2; fail "chromium exited with $?"; }
python3 - "$work/dom.html" <<'PY' || fail "the page did not draw paqd's data"
import re, sys
dom = open(sys.argv[1]).read()
def attr(id_, name):
    m = re.search(r'<[^>]*\bid="%s"[^>]*>' % re.escape(id_), dom)
    assert m, f"no element {id_}"
    a = re.search(r'\b%s="([^"]*)"' % name, m.group(0))
    assert a, f"{id_} has no {name}"
    return a.group(1)
def text(id_):
    m = re.search(r'\bid="%s"[^>]*>([^<]*)<' % re.escape(id_), dom)
    assert m, f"no element {id_}"
    return m.group(1)
updates = int(re.search(r'<body[^>]*data-updates="(\d+)"', dom).group(1))
assert updates >= 2, f"{updates} updates"
for p in range(6):
    assert int(attr(f"const-{p}", "data-points")) >= 256, f"constellation {p}: {attr(f'const-{p}', 'data-points')} points"
    assert int(attr(f"eye-{p}", "data-points")) >= 64, f"eye {p}: {attr(f'eye-{p}', 'data-points')} traces"
    assert text(f"lock-{p}") in ("yes", "no"), text(f"lock-{p}")
    assert re.fullmatch(r"0|\d\.\d\de[-+]\d+", text(f"ber-{p}")), f"ber {p}: {text(f'ber-{p}')}"
    assert text(f"dqm-{p}").isdigit(), f"dqm {p}: {text(f'dqm-{p}')}"
assert text("lock-2") == "yes", "mmse not locked to the PN pattern"
assert int(attr("ber-chart", "data-points")) > 0 and int(attr("dqm-chart", "data-points")) > 0
assert int(attr("spectrum", "data-points")) == 512
assert int(attr("channel", "data-points")) == 38
assert text("ebn0").endswith(" dB") and text("cfo").endswith(" kHz"), (text("ebn0"), text("cfo"))
assert '"samples_in"' in dom, "no counters"
print(f"page: {updates} updates, every panel drawn; Eb/N0 {text('ebn0')}, CFO {text('cfo')}, mmse BER {text('ber-2')} DQM {text('dqm-2')}")
PY
if [[ -n "${2:-}" ]]; then
  timeout 120 "$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars --user-data-dir="$work/profile" \
    --virtual-time-budget=3000 --window-size=1400,1500 --screenshot="$2" "http://127.0.0.1:$port/view" > /dev/null 2>&1 \
    || fail "screenshot"
fi
exit 0
