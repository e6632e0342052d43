#!/usr/bin/env bash
# On the GPU machine (from scripts/device-bundle.sh's .device/): runs the GPU tests, writes
# full logs to $OUT and prints a short table last.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/paq-device-out}
mkdir -p "$out"
cuda_lib=$(dirname "$(find / -name 'libcublas.so.13*' -not -path '*/proc/*' 2>/dev/null | head -1)")
export LD_LIBRARY_PATH=".device/lib:${cuda_lib}:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/gpu.txt"
echo "commit $(cat .device/commit)" | tee -a "$out/gpu.txt"
status=0
rows=()
for t in test_gpu_device test_gpu_front_end test_gpu_solver test_gpu_detector test_gpu_backend; do
  ./.device/$t > "$out/$t.log" 2>&1
  rc=$?
  [[ $rc -ne 0 ]] && status=1
  rows+=("$(printf '%-22s rc=%d  %s' "$t" "$rc" "$(grep -E '^\[  (PASSED|FAILED) ' "$out/$t.log" | tr '\n' ' ')")")
done
./.device/paq-bench-solvers --json "$out/bench-solvers.json" > "$out/bench-solvers.log" 2>&1 || status=1
echo
grep -hE '^(metric|estimates|levinson|cusolver|detector|backend)' "$out"/test_*.log
echo
cat "$out/bench-solvers.log"
echo
printf '%s\n' "${rows[@]}"
exit $status
