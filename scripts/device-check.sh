#!/usr/bin/env bash
# On the GPU machine (from scripts/device-bundle.sh's .device/): runs the GPU tests and the
# benchmarks, writes full logs to $OUT and prints a short table last.
#   bash scripts/device-check.sh [all|tests|bench|replay] [paq-bench options, e.g. --gpus 2]
set -uo pipefail
cd "$(dirname "$0")/.."
mode=${1:-all}
shift || true
bench_args=("$@")
out=${OUT:-/tmp/paq-device-out}
mkdir -p "$out"
cuda_lib=$(dirname "$(find / -name 'libcublas.so.13*' -not -path '*/proc/*' 2>/dev/null | head -1)")
export LD_LIBRARY_PATH=".device/lib:${cuda_lib}:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/gpu.txt"
echo "commit $(cat .device/commit)" | tee -a "$out/gpu.txt"
status=0
rows=()
if [[ $mode == all || $mode == tests ]]; then
  : > "$out/tests.log"
  for t in test_gpu_device test_gpu_front_end test_gpu_solver test_gpu_detector test_gpu_locate test_gpu_backend; do
    echo "=== $t" >> "$out/tests.log"
    ./.device/$t > "$out/$t.tmp" 2>&1
    rc=$?
    cat "$out/$t.tmp" >> "$out/tests.log"
    [[ $rc -ne 0 ]] && status=1
    rows+=("$(printf '%-22s rc=%d  %s' "$t" "$rc" "$(grep -E '^\[  (PASSED|FAILED) ' "$out/$t.tmp" | tr '\n' ' ')")")
    rm -f "$out/$t.tmp"
  done
  echo
  grep -hE '^(metric|estimates|levinson|cusolver|detector|locate|backend)' "$out/tests.log"
fi
if [[ $mode == all || $mode == bench ]]; then
  ./.device/paq-bench-solvers --json "$out/bench-solvers.json" > "$out/bench-solvers.log" 2>&1 || status=1
  ./.device/paq-bench --json "$out/bench.json" "${bench_args[@]}" > "$out/bench.log" 2>&1 || status=1
  echo
  cat "$out/bench-solvers.log"
  echo
  cat "$out/bench.log"
fi
if [[ $mode == all || $mode == replay ]]; then
  # The user's path: a recording replayed by paqd with each backend, tables side by side.
  ./.device/paq-sim --preset edwards3 --ebn0-db 12 --cfo-hz 50000 --seconds 2 --seed 31 --output /tmp/paq-replay > /dev/null
  for b in cpu cuda; do
    echo
    # Tables to the output only: at most 8 files come back from $OUT.
    ./.device/paqd replay /tmp/paq-replay.sigmf-meta --backend "$b" --json-out "$out/replay-$b.json" 2>&1 || status=1
  done
fi
echo
printf '%s\n' "${rows[@]}"
exit $status
