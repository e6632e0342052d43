#!/usr/bin/env bash
# The paq-report page of a real run (paq-sim -> paqd replay --records ->
# paq-report) rendered by headless Chromium into a PNG, which must be produced and be an image
# of the asked size. This proves that a browser lays the page out (inline CSS and SVG parse);
# the layout itself (no wrapped numbers, gap marks, labels apart, UTC axes) is checked
# structurally by test_report.
#
#   tests/e2e/report_screenshot.sh BUILD_DIR [PNG_OUT]
#
# Exits 77 (ctest: skipped) without chromium (Debian: chromium; scripts/setup.sh installs it).
# PNG_OUT keeps the screenshot.
set -euo pipefail
build=$(cd "$1" && pwd)
source "$(dirname "$0")/common.sh"
find_browser
work=$(mktemp -d "${TMPDIR:-/tmp}/paq-screenshot.XXXXXX")
cleanup() { [[ -n "${PAQ_E2E_KEEP:-}" ]] && echo "kept $work" >&2 || rm -rf "$work"; }
trap cleanup EXIT
fail() { echo "FAIL (screenshot): $*" >&2; exit 1; }

"$build/tools/paq-sim" --preset edwards3 --ebn0-db 10 --seconds 0.3 --seed 8 --output "$work/run" > /dev/null || fail "paq-sim"
"$build/daemon/paqd" replay "$work/run.sigmf-meta" --records "$work/run" > "$work/replay.log" 2>&1 || fail "paqd replay"
"$build/tools/paq-report" "$work/run" -o "$work/run-report.html" > /dev/null || fail "paq-report"

# --no-sandbox: root in a container has no user namespaces for Chromium's sandbox; the page
# is our own, with no script. A fresh profile directory keeps the run independent of $HOME.
timeout 120 "$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars --user-data-dir="$work/profile" \
  --window-size=1000,3600 --screenshot="$work/page.png" "file://$work/run-report.html" > "$work/chromium.log" 2>&1 \
  || { tail -5 "$work/chromium.log" >&2; fail "chromium exited with $?"; }
[[ -s $work/page.png ]] || fail "no screenshot"
python3 - "$work/page.png" <<'PY' || fail "not a 1000x3600 PNG"
import struct, sys
data = open(sys.argv[1], "rb").read()
assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
w, h = struct.unpack(">II", data[16:24])
assert (w, h) == (1000, 3600), (w, h)
assert len(data) > 20000, f"{len(data)} bytes: an empty page?"
print(f"screenshot: {w}x{h}, {len(data)} bytes")
PY
[[ -n "${2:-}" ]] && cp "$work/page.png" "$2"
exit 0
