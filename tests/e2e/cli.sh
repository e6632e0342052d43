#!/usr/bin/env bash
# The command-line conventions (config/cli.hpp), program by program:
#   --version prints "<program> <version>" and exits 0;
#   --help lists the exit codes and exits 0;
#   an unknown option, a malformed value and a value outside an option's check exit 2;
#   the old option names still work (hidden aliases).
#
#   tests/e2e/cli.sh BUILD_DIR
set -uo pipefail
build=$(cd "$1" && pwd)
version=$(sed -n 's/^project(paqd VERSION \([0-9.]*\).*/\1/p' "$(dirname "$0")/../../CMakeLists.txt")
work=$(mktemp -d "${TMPDIR:-/tmp}/paq-cli.XXXXXX")
trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
expect_rc() {  # expected rc, description, command...
  local want=$1 what=$2; shift 2
  "$@" > "$work/out" 2> "$work/err"
  local rc=$?
  [[ $rc -eq $want ]] || fail "$what: exit $rc, expected $want ($(head -c 300 "$work/err"))"
}

declare -A malformed=(
  [daemon/paqd]="replay x --batch-samples abc"
  [tools/paq-sim]="--seconds abc"
  [tools/paq-bert]="--seconds abc"
  [tools/paq-stream]="x --mode udp --port abc"
  [tools/paq-report]="x --sample-rate abc"
  [tools/paq-ber-curve]="--packets abc"
)
declare -A out_of_check=(
  [daemon/paqd]="replay x --bit-rate -1"
  [tools/paq-sim]="--seconds -1"
  [tools/paq-bert]="--port 70000"
  [tools/paq-stream]="x --mode udp --port 1 --rate-factor -2"
  [tools/paq-report]="x --sample-rate -5"
  [tools/paq-ber-curve]="--packets 0"
)
programs=(daemon/paqd tools/paq-sim tools/paq-bert tools/paq-stream tools/paq-report tools/paq-ber-curve)
# The benchmarks are not built in the sanitized tree, and the GPU ones exist in CUDA builds
# only; their argument checks run without a device.
malformed[bench/paq-equalizer-bound]="--span abc"
out_of_check[bench/paq-equalizer-bound]="--ebn0-db nan"
malformed[bench/paq-bench]="--gpus abc"
out_of_check[bench/paq-bench]="--gpus 65"
malformed[bench/paq-bench-solvers]="--json"
out_of_check[bench/paq-bench-solvers]="--json a b"
malformed[bench/paq-bench-setup]="--json"
out_of_check[bench/paq-bench-setup]="--json a b"
for b in bench/paq-equalizer-bound bench/paq-bench bench/paq-bench-solvers bench/paq-bench-setup; do [[ -x $build/$b ]] && programs+=("$b"); done
for prog in "${programs[@]}"; do
  bin=$build/$prog
  name=$(basename "$prog")
  expect_rc 0 "$name --version" "$bin" --version
  [[ "$(cat "$work/out")" == "$name $version" ]] || fail "$name --version printed '$(cat "$work/out")', expected '$name $version'"
  expect_rc 0 "$name --help" "$bin" --help
  grep -q "^Exit codes: 0 " "$work/out" || fail "$name --help does not list its exit codes"
  grep -q "2 usage" "$work/out" || fail "$name --help does not name exit code 2 as a usage error"
  expect_rc 2 "$name --no-such-option" "$bin" --no-such-option
  # shellcheck disable=SC2086
  expect_rc 2 "$name ${malformed[$prog]}" "$bin" ${malformed[$prog]}
  # shellcheck disable=SC2086
  expect_rc 2 "$name ${out_of_check[$prog]}" "$bin" ${out_of_check[$prog]}
done

# Old names, hidden from --help, still accepted.
"$build/tools/paq-sim" --seconds 0.01 --datatype ci16_le --format raw --output "$work/rec.raw" > /dev/null 2>&1 || fail "paq-sim raw recording"
expect_rc 0 "paqd replay --datatype" "$build/daemon/paqd" replay "$work/rec.raw" --datatype ci16_le --sample-rate 20.625e6
grep -v '^  took ' "$work/out" > "$work/new-name"  # the wall-clock line differs run to run
expect_rc 0 "paqd replay --format (old name)" "$build/daemon/paqd" replay "$work/rec.raw" --format ci16_le --sample-rate 20.625e6
grep -v '^  took ' "$work/out" | cmp -s - "$work/new-name" || fail "paqd replay: --format and --datatype give different tables"
"$build/daemon/paqd" replay --help | grep -q -- "--format" && fail "paqd replay --help shows the old name --format"
"$build/tools/paq-stream" --help | grep -q -- "--raw-format\|--raw-rate" && fail "paq-stream --help shows the old names"
"$build/tools/paq-stream" --help | grep -q -- "--datatype" || fail "paq-stream --help lacks --datatype"

# NaN is no number of any range (CLI11's own checks let it through).
expect_rc 2 "paqd replay --bit-rate nan" "$build/daemon/paqd" replay "$work/rec.raw" --bit-rate nan
expect_rc 2 "paqd --duration nan" "$build/daemon/paqd" --config /nonexistent --duration nan
expect_rc 2 "paq-sim --seconds nan" "$build/tools/paq-sim" --seconds nan --output "$work/nan"
# Settings that are wrong are usage errors (2), in every program, whoever finds them.
expect_rc 2 "paq-sim --pattern pn16" "$build/tools/paq-sim" --seconds 0.01 --pattern pn16 --output "$work/p16"
expect_rc 2 "paq-sim --ebn0-db abc" "$build/tools/paq-sim" --seconds 0.01 --ebn0-db abc --output "$work/abc"
expect_rc 2 "paqd replay --pattern pn16" "$build/daemon/paqd" replay "$work/rec.raw" --datatype ci16_le --sample-rate 20.625e6 --pattern pn16
expect_rc 2 "paqd replay --datatype bogus" "$build/daemon/paqd" replay "$work/rec.raw" --datatype bogus --sample-rate 20.625e6
expect_rc 2 "paqd replay --bit-rate 50e6" "$build/daemon/paqd" replay "$work/rec.raw" --datatype ci16_le --sample-rate 20.625e6 --bit-rate 50e6
# A simulator setting out of range names the option typed, in paq-sim and paq-ber-curve alike,
# every bad one of them.
for prog in paq-sim paq-ber-curve; do
  expect_rc 2 "$prog bad phase-noise curve and IQ" "$build/tools/$prog" --ebn0-db 11 --phase-noise 1e3:-70,1e5:-20 --iq-imbalance 9,0 --output "$work/bad"
  grep -q -- "--phase-noise: phase_noise_curve\[1\] (100000:-20): the segment from the point before changes by 25 dB/decade" "$work/err" ||
    fail "$prog: the curve's rising segment is not named with --phase-noise ($(head -c 400 "$work/err"))"
  grep -q -- "--iq-imbalance (DB): iq_gain_db = 9" "$work/err" || fail "$prog: the second bad setting is not named ($(head -c 400 "$work/err"))"
  expect_rc 2 "$prog --phase-noise-above without phase noise" "$build/tools/$prog" --ebn0-db 11 --phase-noise-above 3e4 --output "$work/bad"
  grep -q -- "--phase-noise-above: phase_noise_above_hz = 30000 given without phase noise" "$work/err" ||
    fail "$prog: --phase-noise-above without phase noise is not named ($(head -c 400 "$work/err"))"
done
printf 'recievr:\n  detector: trellis\n' > "$work/typo.yaml"
expect_rc 2 "paqd replay --config with a misspelled section" "$build/daemon/paqd" replay "$work/rec.raw" --datatype ci16_le --sample-rate 20.625e6 --config "$work/typo.yaml"
grep -q "unknown section 'recievr'" "$work/err" || fail "paqd replay: a misspelled section is not named ($(head -c 300 "$work/err"))"
# The service's options before the word `replay` are refused, not silently ignored.
expect_rc 2 "paqd --json-out X replay" "$build/daemon/paqd" --json-out "$work/x.json" replay "$work/rec.raw" --datatype ci16_le --sample-rate 20.625e6
grep -q "before 'replay'" "$work/err" || fail "paqd --json-out X replay: the message does not say why ($(head -c 300 "$work/err"))"
[[ -e $work/x.json ]] && fail "paqd --json-out X replay wrote X"

# A raw file's options given for a SigMF recording: the same as its metadata, accepted; another
# value, refused naming both (never read as the metadata says while the option is ignored).
"$build/tools/paq-sim" --seconds 0.01 --output "$work/sig" > /dev/null 2>&1 || fail "paq-sim SigMF recording"
expect_rc 0 "paqd replay SigMF --datatype cf32 (as its metadata)" "$build/daemon/paqd" replay "$work/sig.sigmf-meta" --datatype cf32
expect_rc 2 "paqd replay SigMF --datatype ci16_le" "$build/daemon/paqd" replay "$work/sig.sigmf-data" --datatype ci16_le --sample-rate 20e6
grep -q "core:datatype is cf32_le" "$work/err" || fail "paqd replay: a --datatype against the SigMF metadata is not named ($(head -c 300 "$work/err"))"
grep -q "core:sample_rate is 20625000" "$work/err" || fail "paqd replay: a --sample-rate against the SigMF metadata is not named ($(head -c 300 "$work/err"))"

# The pattern: the recording's paq:pattern by default; another one locks nothing, which is
# said, and the JSON's BER is null (no bit was checked), not 0.
"$build/tools/paq-sim" --seconds 0.02 --pattern pn23 --ebn0-db 15 --output "$work/p23" > /dev/null 2>&1 || fail "paq-sim pn23 recording"
expect_rc 0 "paqd replay (pn23 recording)" "$build/daemon/paqd" replay "$work/p23.sigmf-meta" --json
python3 - "$work/out" <<'PY' || fail "paqd replay of a pn23 recording does not count pn23"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["pattern"] == "pn23" and j["pattern_from"] == "paq:pattern", (j["pattern"], j["pattern_from"])
assert all(p["locked"] and p["bits"] > 0 and p["ber"] is not None for p in j["paths"]), j["paths"]
PY
expect_rc 0 "paqd replay --pattern pn15 (pn23 recording)" "$build/daemon/paqd" replay "$work/p23.sigmf-meta" --pattern pn15 --json
python3 - "$work/out" <<'PY' || fail "paqd replay against the wrong pattern: BER not null or no warning"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["pattern"] == "pn15" and j["pattern_from"] == "--pattern"
assert all(not p["locked"] and p["bits"] == 0 and p["ber"] is None for p in j["paths"]), j["paths"]
assert any("no path locked to the pn15 pattern" in w for w in j["warnings"]), j["warnings"]
PY

if [[ $failures -eq 0 ]]; then echo "cli: every program follows the conventions"; else exit 1; fi
