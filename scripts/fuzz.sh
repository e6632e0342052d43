#!/usr/bin/env bash
# Fuzzing (docs/TESTING.md): builds the libFuzzer targets of tests/fuzz in the sanitized tree
# (scripts/sanitized-build.sh: Clang 14, ASan + UBSan, CUDA off; the tree scripts/sanitize.sh
# tests), runs every target over its seed corpus (tests/fuzz/corpus/<target>) and its saved
# reproducers (tests/fuzz/crashes/<target>) as a regression, then fuzzes each target for
# SECONDS (default 20; 0: the regression only), as many targets at once as there are cores.
# Fails on any crash, hang, out-of-memory, leak, sanitizer report or broken harness
# invariant; logs and what a campaign finds are left under <build>/findings/<target>/.
#
#   scripts/fuzz.sh [seconds-per-target]
#
# Environment: PAQ_FUZZ_TARGETS="fuzz_a fuzz_b" to run only those; PAQ_SANITIZE_BUILD_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-20}
[[ $seconds =~ ^[0-9]+$ ]] || { echo "usage: scripts/fuzz.sh [seconds-per-target]" >&2; exit 2; }
build=${PAQ_SANITIZE_BUILD_DIR:-build-asan}
scripts/sanitized-build.sh paq_fuzz

# Any report ends the process with an error; leaks are reported (libFuzzer checks per input).
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:symbolize=1:detect_stack_use_after_return=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
symbolizer=/usr/lib/llvm-14/bin/llvm-symbolizer
[[ -x $symbolizer ]] && export ASAN_SYMBOLIZER_PATH=$symbolizer

# Per target: the largest input a campaign tries (bytes). Large enough for several datagrams
# or a whole small file; small enough that an input cannot make a target spin (the VITA-49
# harness also keeps its batches small).
declare -A max_len=(
  [fuzz_vita49_batcher]=65536 [fuzz_sigmf_meta]=16384 [fuzz_sample_file]=16384 [fuzz_sigmf_archive]=16384 [fuzz_config_yaml]=8192
  [fuzz_metrics_http]=20480 [fuzz_bitstream]=16384 [fuzz_tcp_source]=16384 [fuzz_udp_source]=16384 [fuzz_udp_sequence]=4096 [fuzz_zmq_tag_header]=4096
  [fuzz_channel_pairing]=4096)
# Per input: 10 s, 2 GiB RSS, no single allocation over 512 MiB.
limits=(-timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=512)

# The lines of a libFuzzer log that say what went wrong, and where in paqd.
summary() {
  grep -E 'ERROR: |SUMMARY: |invariant broken|Test unit written|#[0-9]+ 0x[0-9a-f]+ in paq::' "$1" | head -12 | cut -c1-240 | sed 's/^/    /'
}

# One target: the regression, then the campaign. Writes what it finds to $out/report (shown
# when every target has ended) and one line per failure to $out/failed.
fuzz_one() {
  local t=$1 bin=$build/tests/fuzz/$1 out=$build/findings/$1
  rm -rf "$out"
  mkdir -p "$out"
  exec > "$out/report" 2>&1
  [[ -x $bin ]] || { echo "fuzz: no binary $bin"; echo "$t:no-binary" >> "$out/failed"; return; }
  # Regression: every committed input (seed corpus, saved reproducers), each in a process of
  # its own, so that one failing input does not hide the others.
  local start=$SECONDS inputs=0 bad=0 f
  for f in tests/fuzz/corpus/"$t"/* tests/fuzz/crashes/"$t"/*; do
    [[ -f $f ]] || continue
    inputs=$((inputs + 1))
    if ! "$bin" "${limits[@]}" -artifact_prefix="$out/" "$f" > "$out/regression.log" 2>&1; then
      bad=$((bad + 1))
      echo "fuzz: $t: FAILED on $f:"
      summary "$out/regression.log"
      cp "$out/regression.log" "$out/regression-$(basename "$f").log"
      echo "$t:$f" >> "$out/failed"
    fi
  done
  echo "fuzz: $t: regression: $inputs inputs, $bad failed ($((SECONDS - start)) s)"
  ((seconds > 0)) || return 0
  # Campaign: new inputs go to a scratch corpus, never into the committed one.
  mkdir -p "$out/corpus"
  start=$SECONDS
  if ! "$bin" "${limits[@]}" -max_len="${max_len[$t]:-16384}" -max_total_time="$seconds" -print_final_stats=1 \
      -artifact_prefix="$out/" "$out/corpus" tests/fuzz/corpus/"$t" > "$out/campaign.log" 2>&1; then
    echo "fuzz: $t: FAILED in the campaign; the input is under $out/:"
    summary "$out/campaign.log"
    echo "$t:campaign" >> "$out/failed"
    return 0
  fi
  echo "fuzz: $t: campaign: $(grep -Eo 'stat::number_of_executed_units: *[0-9]+' "$out/campaign.log" | grep -Eo '[0-9]+$') runs in $((SECONDS - start)) s, ok"
}

targets=(${PAQ_FUZZ_TARGETS:-$(cd tests/fuzz && ls fuzz_*.cpp | sed 's/\.cpp$//')})
jobs_max=$(nproc)
for t in "${targets[@]}"; do
  while (($(jobs -rp | wc -l) >= jobs_max)); do wait -n || true; done
  fuzz_one "$t" &
done
wait
failed=()
for t in "${targets[@]}"; do
  cat "$build/findings/$t/report"
  [[ -f $build/findings/$t/failed ]] && mapfile -t -O "${#failed[@]}" failed < "$build/findings/$t/failed"
done

if ((${#failed[@]})); then
  echo "fuzz: FAILED (${#failed[@]}): ${failed[*]}" >&2
  echo "fuzz: keep a new reproducer as tests/fuzz/crashes/<target>/<name> (docs/TESTING.md)" >&2
  exit 1
fi
echo "fuzz: all ${#targets[@]} targets passed"
