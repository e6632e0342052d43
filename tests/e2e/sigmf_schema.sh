#!/usr/bin/env bash
# Every kind of .sigmf-meta paqd and its tools write, checked against the official SigMF JSON
# schema (tests/data/sigmf, draft 2020-12) and the spec's other rules (tests/e2e/sigmf_check.py):
#   paq-sim, cf32, no impairments; paq-sim, ci16, every impairment; a recording the live daemon
#   writes (file source looped, so it holds gaps: paq:gaps and SigMF annotations; the source
#   has core:datetime and core:frequency, so the recording carries both).
# Then the paq-sim recording as a SigMF archive (.sigmf, made by tar) through paqd replay: the
# same packets and errors as the .sigmf-meta.
#
#   tests/e2e/sigmf_schema.sh BUILD_DIR
#
# Exits 77 (ctest: skipped) when no python3 with jsonschema >= 4 is installed (Debian:
# python3-jsonschema, which scripts/setup.sh installs).
set -euo pipefail
build=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
schema=$here/../data/sigmf/sigmf-schema.json
work=$(mktemp -d "${TMPDIR:-/tmp}/paq-sigmf.XXXXXX")
cleanup() { [[ -n "${PAQ_E2E_KEEP:-}" ]] && echo "kept $work" >&2 || rm -rf "$work"; }
trap cleanup EXIT
fail() { echo "FAIL (sigmf): $*" >&2; exit 1; }

# Debian's python3-jsonschema is for /usr/bin/python3; a python3 earlier on PATH (pyenv, a
# venv) may not see it. The first interpreter that has a draft 2020-12 validator is used.
python=""
for p in /usr/bin/python3 python3; do
  if command -v "$p" > /dev/null && "$p" -c 'from jsonschema import Draft202012Validator' 2> /dev/null; then
    python=$p
    break
  fi
done
if [[ -z $python ]]; then
  echo "SKIP: no python3 with the jsonschema package (draft 2020-12); install python3-jsonschema (scripts/setup.sh)"
  exit 77
fi

sim=$build/tools/paq-sim
paqd=$build/daemon/paqd

"$sim" --seconds 0.02 --seed 3 --output "$work/plain" > /dev/null || fail "paq-sim (plain)"
"$sim" --preset edwards3 --ebn0-db 12 --cfo-hz 50e3 --seconds 0.02 --seed 4 --datatype ci16_le \
  --sample-rate 25e6 --clock-ppm 100 --clock-drift-ppm-per-s 10 --gain-db -6 --agc-step 0.01,6 \
  --iq-imbalance 2,10 --dc-offset -15 --phase-noise irig106 --ray 0.5,1000,1.2 --pattern pn9 \
  --output "$work/impaired" > /dev/null || fail "paq-sim (impaired)"

# The live daemon's recorder: a 1 Mbit/s recording (2 MS/s) looped for a second and a half,
# paced, so each seam is a discontinuity gap in the recording it writes.
"$sim" --bit-rate 1e6 --seconds 0.1 --seed 5 --output "$work/slow" > /dev/null || fail "paq-sim (slow)"
# A capture time and an RF centre, as a radio's recording has them: the live recording gets
# core:datetime (the UTC of its first sample: the source's first) and core:frequency from them.
"$python" - "$work/slow.sigmf-meta" <<'PY' || fail "could not add core:datetime to the source"
import json, sys
doc = json.load(open(sys.argv[1]))
doc["captures"][0].update({"core:datetime": "2026-11-25T10:47:40.123456789Z", "core:frequency": 2.2505e9})
json.dump(doc, open(sys.argv[1], "w"), indent=2)
PY
printf '%s\n' "receiver: {bit_rate_hz: 1e6, batch_samples: 400000}" \
  "source: {type: file, file: {path: $work/slow.sigmf-meta, paced: true, loop: true}}" \
  "pipeline: {backend: cpu}" "publisher: {enabled: false}" "metrics: {port: 0}" \
  "log: {destination: console}" "recording: {path: $work/live}" > "$work/paqd.yaml"
"$paqd" --config "$work/paqd.yaml" --duration 1.5 > "$work/paqd.out" 2> "$work/paqd.log" \
  || { tail -20 "$work/paqd.log" >&2; fail "paqd with a recording exited with $?"; }
[[ -f $work/live.sigmf-meta ]] || fail "paqd wrote no recording metadata"

"$python" "$here/sigmf_check.py" "$schema" "$work/plain.sigmf-meta" "$work/impaired.sigmf-meta" \
  "$work/live.sigmf-meta" || fail "a file paqd wrote is not valid SigMF"

# What the check must have seen: the paq extension declared everywhere, gaps as annotations.
"$python" - "$work" <<'PY' || fail "extensions or gap annotations missing"
import json, sys
work = sys.argv[1]
for name in ("plain", "impaired", "live"):
    g = json.load(open(f"{work}/{name}.sigmf-meta"))["global"]
    assert {"name": "paq", "version": "1.0.0", "optional": True} in g["core:extensions"], name
live = json.load(open(f"{work}/live.sigmf-meta"))
gaps, notes = live["global"]["paq:gaps"], live["annotations"]
assert len(gaps) >= 2 and len(notes) == len(gaps), (len(gaps), len(notes))
for gap, note in zip(gaps, notes):
    assert note["core:sample_start"] == gap["recording_sample"] and note["paq:gap_reason"] == gap["reason"]
    assert note["core:label"] == f"gap ({gap['reason']})"
print(f"live recording: {len(gaps)} gaps, as many annotations ({notes[0]['core:label']} at {notes[0]['core:sample_start']})")
# Time and frequency: the live recording's from its source; paq-sim writes none.
capture = live["captures"][0]
assert capture.get("core:datetime") == "2026-11-25T10:47:40.123456789Z", capture
assert capture.get("core:frequency") == 2.2505e9, capture
for name in ("plain", "impaired"):
    c = json.load(open(f"{work}/{name}.sigmf-meta"))["captures"][0]
    assert "core:datetime" not in c and "core:frequency" not in c, (name, c)
print(f"live recording: core:datetime {capture['core:datetime']}, core:frequency {capture['core:frequency']:.6g} Hz")
PY

# A SigMF archive, as SigMF tools make them: a directory of the recording, tarred.
mkdir "$work/flight"
cp "$work/plain.sigmf-meta" "$work/flight/flight.sigmf-meta"
cp "$work/plain.sigmf-data" "$work/flight/flight.sigmf-data"
tar --format=pax -cf "$work/flight.sigmf" -C "$work" flight
"$paqd" replay "$work/plain.sigmf-meta" --json-out "$work/meta.json" > /dev/null 2>&1 || fail "replay of the meta file"
"$paqd" replay "$work/flight.sigmf" --json-out "$work/archive.json" > /dev/null 2>&1 || fail "replay of the archive"
"$python" - "$work" <<'PY' || fail "the archive does not replay as its recording does"
import json, sys
work = sys.argv[1]
a, m = json.load(open(f"{work}/archive.json")), json.load(open(f"{work}/meta.json"))
assert a["samples_in"] == m["samples_in"] > 0 and a["packets_found"] == m["packets_found"], (a["samples_in"], m["samples_in"])
assert [(p["bits"], p["bit_errors"]) for p in a["paths"]] == [(p["bits"], p["bit_errors"]) for p in m["paths"]]
print(f"archive replay: {a['samples_in']} samples, {a['packets_found']} packets, as the .sigmf-meta")
PY
echo "sigmf: all checks passed"
