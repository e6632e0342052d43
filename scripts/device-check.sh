#!/usr/bin/env bash
# On the GPU machine (from scripts/device-bundle.sh's .device/): runs the GPU tests and the
# benchmarks, writes full logs to $OUT and prints a short table last.
#   bash scripts/device-check.sh [all|tests|solvers|ldpc|coded|coded-stream|bench|setup|rates|replay|channels|speed|stages|hostwait|soak|links|soft|levels|frontend|phasenoise|phasenoise-seeds|fieldtable|trellis|curves|live|flight|profile|multigpu] [paq-bench options, e.g. --gpus 2]
# (phasenoise-seeds takes PN_SEEDS, PN_CONDITIONS, PN_EBN0 and PN_ABOVE_HZ from the environment.)
set -uo pipefail
cd "$(dirname "$0")/.."
mode=${1:-all}
shift || true
bench_args=("$@")
out=${OUT:-/tmp/paq-device-out}
mkdir -p "$out"
[[ ! -f .device/bins.tar.xz ]] || tar -C .device -xJf .device/bins.tar.xz
[[ -d .device/lib || ! -f .device/lib.tar.gz ]] || tar -C .device -xzf .device/lib.tar.gz
cuda_lib=$(dirname "$(find / -name 'libcublas.so.13*' -not -path '*/proc/*' 2>/dev/null | head -1)")
export LD_LIBRARY_PATH=".device/lib:${cuda_lib}:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
# The CUDA backend's module, which the programs load at run time.
export PAQD_CUDA_MODULE="$PWD/.device/libpaqd-cuda.so"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/gpu.txt"
echo "commit $(cat .device/commit)" | tee -a "$out/gpu.txt"
status=0
rows=()
# The speed recording: 8 s of edwards3 at 12 dB, ci16, seed 41, at /tmp/paq-speed (made once a
# machine: a later mode, or a call that started paq-sim beside another mode, uses it as it is).
speed_recording() {
  [[ -f /tmp/paq-speed.sigmf-meta ]] || ./.device/paq-sim --preset edwards3 --ebn0-db 12 --cfo-hz 50000 --seconds 8 --seed 41 \
    --datatype ci16_le --output /tmp/paq-speed > /dev/null
}
if [[ $mode == all || $mode == tests ]]; then
  : > "$out/tests.log"
  for t in test_gpu_device test_gpu_estimators test_gpu_equalizers test_gpu_detector test_gpu_preamble_detector test_gpu_resampler test_gpu_ldpc test_gpu_combining test_gpu_backend; do
    echo "=== $t" >> "$out/tests.log"
    ./.device/$t > "$out/$t.tmp" 2>&1
    rc=$?
    cat "$out/$t.tmp" >> "$out/tests.log"
    [[ $rc -ne 0 ]] && status=1
    rows+=("$(printf '%-22s rc=%d  %s' "$t" "$rc" "$(grep -E '^\[  (PASSED|FAILED) ' "$out/$t.tmp" | tr '\n' ' ')")")
    rm -f "$out/$t.tmp"
  done
  echo
  grep -hE '^(metric|estimates|levinson|cusolver|detector|locate|backend|block-levinson|band-cholesky|conjugate-residual|[0-9]+ systems)' "$out/tests.log"
fi
if [[ $mode == ldpc ]]; then
  # The LDPC decoders over BPSK/AWGN with ideal LLRs around FER 1e-3: the GPU's and the CPU's
  # layered min-sum (50 iterations) and sum-product (100, double).
  for spec in "ar4ja-4096-2/3 1.8,2.0,2.2,2.4" "ar4ja-1024-1/2 1.6,1.8,2.0,2.2"; do
    code=${spec% *}
    pts=${spec#* }
    tag=${code//\//}
    tag=${tag//ar4ja-/}
    ./.device/paq-ldpc-curve --code "$code" --ebn0-db "$pts" --backend cuda --min-frame-errors 50 \
      --max-frames 300000 --output "$out/ldpc-$tag-gpu-ms.csv" --json "$out/ldpc-$tag-gpu-ms.json" > "$out/ldpc-$tag-gpu-ms.log" 2>&1 || status=1
    ./.device/paq-ldpc-curve --code "$code" --ebn0-db "$pts" --min-frame-errors 50 --max-frames 40000 \
      --output "$out/ldpc-$tag-cpu-ms.csv" --json "$out/ldpc-$tag-cpu-ms.json" > "$out/ldpc-$tag-cpu-ms.log" 2>&1 || status=1
    ./.device/paq-ldpc-curve --code "$code" --ebn0-db "$pts" --decoder sum-product --iterations 100 --min-frame-errors 30 \
      --max-frames 16000 --output "$out/ldpc-$tag-cpu-sp.csv" --json "$out/ldpc-$tag-cpu-sp.json" > "$out/ldpc-$tag-cpu-sp.log" 2>&1 || status=1
    cat "$out/ldpc-$tag-gpu-ms.log" "$out/ldpc-$tag-cpu-ms.log" "$out/ldpc-$tag-cpu-sp.log"
  done
fi
if [[ $mode == coded || $mode == coded-stream ]]; then
  # Coded links (receiver.fec): each stream's decoded BER and FER against Eb/N0 per information
  # bit, both detectors, 3 s recordings (4882 packets, 20 M information bits a stream for
  # ar4ja-4096-2/3), decoded by the CUDA backend (docs/BER-RESULTS.md, "Coded links").
  # coded-stream: the two k = 4096 codes sent as the continuous stream.
  specs=("ar4ja-4096-2/3 awgn 2.5,3,3.5,4,4.5,5" "ar4ja-4096-2/3 edwards3 5,6,7,8,9" "ar4ja-1024-1/2 awgn 2.5,3,3.5,4,4.5")
  [[ $mode == coded ]] || specs=("ar4ja-4096-1/2 awgn 2,2.5,3,3.5,4" "ar4ja-4096-1/2 edwards3 4,5,6,7,8"
                                 "ar4ja-4096-4/5 awgn 3.5,4,4.5,5,5.5" "ar4ja-4096-4/5 edwards3 6,7,8,9,10")
  for spec in "${specs[@]}"; do
    read -r code preset pts <<< "$spec"
    tag=${code//\//}
    tag=${tag//ar4ja-/}-$preset
    python3 scripts/coded-curves.py --bin .device --code "$code" --preset "$preset" --info-ebn0-db "$pts" --backend cuda \
      --output "$out/coded-$tag.csv" > "$out/coded-$tag.log" 2>&1 || status=1
    cat "$out/coded-$tag.log"
  done
  # Six files in one: at most 8 files come back from $OUT.
  (cd "$out" && tar -czf coded.tar.gz coded-*.csv coded-*.log && rm -f coded-*.csv coded-*.log)
fi
if [[ $mode == solvers ]]; then
  # The one- and two-channel solvers alone: their GPU tests, then their table.
  for t in test_gpu_equalizers test_gpu_combining; do
    ./.device/$t > "$out/$t.log" 2>&1 || status=1
    rows+=("$(printf '%-22s %s' "$t" "$(grep -E '^\[  (PASSED|FAILED) ' "$out/$t.log" | tr '\n' ' ')")")
  done
  grep -hE '^(levinson|cusolver|block-levinson|band-cholesky|conjugate-residual|[0-9]+ systems)' "$out"/test_gpu_*.log
  ./.device/paq-bench-solvers --json "$out/bench-solvers.json" > "$out/bench-solvers.log" 2>&1 || status=1
  cat "$out/bench-solvers.log"
fi
if [[ $mode == all || $mode == bench ]]; then
  ./.device/paq-bench-solvers --json "$out/bench-solvers.json" > "$out/bench-solvers.log" 2>&1 || status=1
  ./.device/paq-bench --json "$out/bench.json" "${bench_args[@]}" > "$out/bench.log" 2>&1 || status=1
  echo
  cat "$out/bench-solvers.log"
  echo
  cat "$out/bench.log"
fi
if [[ $mode == all || $mode == rates ]]; then
  # Input rates and clocks: the chain at 2 samples per bit, with a clock offset, and resampled
  # from ~3 and ~6 samples per bit (the resample and clock stages' cost), then resampled and
  # clock-offset recordings replayed on both backends.
  k=0
  for r in "" "--clock-ppm 150" "--input-rate 30.9375e6" "--input-rate 30.9375e6 --clock-ppm 150" "--input-rate 61.44e6"; do
    echo
    echo "=== paq-bench $r"
    # shellcheck disable=SC2086
    ./.device/paq-bench $r --json "$out/bench-rates-$k.json" > "$out/bench-rates-$k.log" 2>&1 || status=1
    grep -E "input|rate|ppm|resample|clock|end to end|real time|median" "$out/bench-rates-$k.log" | head -20
    k=$((k + 1))
  done
  ./.device/paq-sim --preset edwards3 --ebn0-db 15 --cfo-hz 30000 --seconds 2 --seed 33 --sample-rate 25e6 \
    --clock-ppm 120 --datatype ci16_le --output /tmp/paq-rates > /dev/null
  for b in cpu cuda; do
    echo
    ./.device/paqd replay /tmp/paq-rates.sigmf-meta --backend "$b" --json-out "$out/replay-rates-$b.json" 2>&1 || status=1
  done
fi
if [[ $mode == speed ]]; then
  # What the user waits for. An 8 s ci16 edwards3 recording replayed by paqd with the
  # CUDA backend (read once first: the file in the page cache), default batch and 1/4 of it;
  # the JSON's elapsed_s, realtime_factor and per-stage busy times, and the tables equal.
  speed_recording
  cat /tmp/paq-speed.sigmf-data > /dev/null
  for batch in 39321600 9830400; do
    for k in 1 2; do
      echo
      echo "=== paqd replay --backend cuda --batch-samples $batch (run $k)"
      ./.device/paqd replay /tmp/paq-speed.sigmf-meta --backend cuda --batch-samples $batch \
        --json-out "$out/speed-$batch-$k.json" 2>&1 | tail -10 || status=1
    done
  done
  # 32 s: the recording four times over, as a headerless file (the setup's share shrinks; the
  # packets across the three joins are cut).
  for k in 1 2 3 4; do cat /tmp/paq-speed.sigmf-data; done > /tmp/paq-speed32.ci16
  echo
  echo "=== paqd replay --backend cuda, 32 s"
  ./.device/paqd replay /tmp/paq-speed32.ci16 --datatype ci16_le --sample-rate 20.625e6 --backend cuda \
    --json-out "$out/speed-32s.json" 2>&1 | tail -10 || status=1
  # 128 s (10.6 GB, in the page cache): a long recording, where the setup's share is small.
  for k in 1 2 3 4; do cat /tmp/paq-speed32.ci16; done > /tmp/paq-speed128.ci16
  cat /tmp/paq-speed128.ci16 > /dev/null
  echo
  echo "=== paqd replay --backend cuda, 128 s"
  ./.device/paqd replay /tmp/paq-speed128.ci16 --datatype ci16_le --sample-rate 20.625e6 --backend cuda \
    --json-out "$out/speed-128s.json" 2>&1 | tail -3 || status=1
  rm -f /tmp/paq-speed128.ci16
fi
if [[ $mode == multigpu ]]; then
  # Every GPU of the machine through the runtime's one pool, against one. paq-bench
  # --gpus N (runtime::worker_pool: throughput per batch, batch order kept); then paqd replay
  # --gpus 0 and --gpus 0,..,N-1 of the 8 s ci16 edwards3 recording four times over (32 s, in
  # the page cache), two runs each, alternated. The live service: `soak` with SOAK_GPUS.
  ngpu=$(nvidia-smi -L | wc -l)
  all=$(seq -s, 0 $((ngpu - 1)))
  echo "=== paq-bench --gpus $ngpu"
  ./.device/paq-bench --gpus "$ngpu" --json "$out/bench-gpus$ngpu.json" > "$out/bench-gpus$ngpu.log" 2>&1 || status=1
  grep -E "end to end, pinned|ci16 input|workers" "$out/bench-gpus$ngpu.log"
  ./.device/paq-sim --preset edwards3 --ebn0-db 12 --cfo-hz 50000 --seconds 8 --seed 41 --datatype ci16_le \
    --output /tmp/paq-mg > /dev/null
  for k in 1 2 3 4; do cat /tmp/paq-mg.sigmf-data; done > /tmp/paq-mg32.ci16
  cat /tmp/paq-mg32.ci16 > /dev/null
  for k in 1 2; do
    for g in 0 "$all"; do
      echo
      echo "=== paqd replay --backend cuda --gpus $g, 32 s (run $k)"
      ./.device/paqd replay /tmp/paq-mg32.ci16 --datatype ci16_le --sample-rate 20.625e6 --backend cuda --gpus "$g" \
        --json-out "$out/replay-gpus$(echo "$g" | tr -d ,)-$k.json" 2>&1 | grep -E "took|real time|^  (mmse|fde2) " || status=1
    done
  done
  rm -f /tmp/paq-mg32.ci16
fi
if [[ $mode == curves ]]; then
  # BER against Eb/N0 with both detectors (twelve streams), on the CUDA backend, the
  # points and seeds of scripts/ber-figures.sh; CSV and JSON to $OUT (docs/figures/ber-*-both.*
  # and BER-RESULTS.md from them: scripts/plot-ber.sh, scripts/ber-tables.py).
  ./.device/paq-ber-curve --backend cuda --detector both --preset awgn --ebn0-db 4,6,8,9,9.5,10,10.5,11,11.5,12 \
    --packets 1000 --min-errors 100 --max-packets 20000 --seed 1 \
    --output "$out/ber-awgn-both.csv" --json "$out/ber-awgn-both.json" 2>&1 | tee "$out/curves.log" || status=1
  for p in two-ray edwards3; do
    ./.device/paq-ber-curve --backend cuda --detector both --preset $p --ebn0-db 6,9,12,15,18,21 --packets 1000 --seed 1 \
      --output "$out/ber-$p-both.csv" --json "$out/ber-$p-both.json" 2>&1 | tee -a "$out/curves.log" || status=1
  done
fi
if [[ $mode == fieldtable ]]; then
  # The field-rates table (rate x ppm x path), received by the CUDA backend.
  scripts/field-rates-table.sh .device cuda 2 | tee "$out/field-rates-table.md"
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
if [[ $mode == channels ]]; then
  # Two receive channels (SIGNAL-CHAIN.md "Two receive channels"): the recordings of its table
  # replayed with both channels combined by each backend, tables side by side (the BER of
  # every path equal within the GPU's allowance), and the two-channel batch time against one
  # channel's (paq-bench --channels 2).
  sim=./.device/paq-sim
  $sim --seconds 2 --seed 9101 --cfo-hz 7000 --clock-ppm 12 --ebn0-db 8 -o /tmp/awgn2-8 \
    --channel preset=awgn --channel preset=awgn,phase-rad=0.7,delay-ns=30 > /dev/null
  $sim --seconds 2 --seed 9107 --cfo-hz -15000 -o /tmp/weak \
    --channel preset=awgn,ebn0-db=10 --channel preset=awgn,ebn0-db=-10,phase-rad=2 > /dev/null
  $sim --seconds 3 --seed 9109 --cfo-hz 11000 --clock-ppm -20 --ebn0-db 12 -o /tmp/shadow \
    --channel preset=edwards3,shadow-db=10,shadow-s=0.3,shadow-every-s=1 \
    --channel preset=two-ray,delay-ns=40,phase-rad=2,shadow-db=10,shadow-s=0.3,shadow-every-s=1 > /dev/null
  for rec in awgn2-8 weak shadow; do
    for b in cpu cuda; do
      echo
      echo "=== $rec, two channels, $b"
      ./.device/paqd replay "/tmp/$rec.sigmf-meta" --channel 1 --channel 2 --backend "$b" 2>&1 | grep -E "^  (none|zf|mmse|cma|fde1|fde2|path) |combined|took" || status=1
    done
  done
  # The live service on `shadow` (the file source of two channels, the GPU): its final
  # counts per path are the replay's.
  printf 'source:\n  type: file\n  file: {path: /tmp/shadow.sigmf-meta, channel: 1, second_channel: 2}\nreceiver:\n  channels: 2\npipeline:\n  backend: cuda\npublisher:\n  enabled: false\n' > /tmp/two.yaml
  echo
  echo "=== shadow, two channels, live service, cuda"
  ./.device/paqd -c /tmp/two.yaml 2>&1 | grep -E "info: path |packets_best_receive" || status=1
  echo
  ./.device/paq-bench --channels 2 --json "$out/bench-channels.json" "${bench_args[@]}" || status=1
fi
if [[ $mode == levels ]]; then
  # Input levels: the same edwards3 recording at the nominal level, -30 dB, +17 dB and with
  # a +20 dB AGC step, replayed by both backends (every path's BER must not move).
  for g in "" "--gain-db -30" "--gain-db 17" "--agc-step 0.5,20"; do
    # shellcheck disable=SC2086
    ./.device/paq-sim --preset edwards3 --ebn0-db 13 --cfo-hz 30000 --seconds 1 --seed 1207 $g --output /tmp/paq-level > /dev/null
    for b in cpu cuda; do
      echo
      echo "=== level ${g:-nominal}, $b"
      ./.device/paqd replay /tmp/paq-level.sigmf-meta --backend "$b" 2>&1 | grep -E "^  (none|zf|mmse|cma|fde1|fde2|path) " || status=1
    done
  done
fi
if [[ $mode == levels || $mode == frontend ]]; then
  # Front-end correction: IQ 2 dB / 10 deg with DC at -15 dBc on AWGN 11 dB and edwards3
  # 15 dB, the correction on (both backends) and off (CPU), and clean input with it on and off.
  for ch in "awgn 11" "edwards3 15"; do
    set -- $ch
    for imp in "" "--iq-imbalance 2,10 --dc-offset -15"; do
      # shellcheck disable=SC2086
      ./.device/paq-sim --preset "$1" --ebn0-db "$2" --cfo-hz 25000 --seconds 2 --seed 1261 $imp --output /tmp/paq-fe > /dev/null
      for run in "cpu on" "cuda on" "cpu off"; do
        set -- $run
        echo
        echo "=== $ch ${imp:-clean}, $1, correction $2"
        ./.device/paqd replay /tmp/paq-fe.sigmf-meta --backend "$1" --front-end-correction "$2" 2>&1 \
          | grep -E "^  (none|zf|mmse|cma|fde1|fde2|front) " || status=1
      done
      set -- $ch
    done
  done
fi
if [[ $mode == phasenoise ]]; then
  # Phase noise: AWGN 11 dB, 2 s, seed 301 (docs/SIGNAL-CHAIN.md's table) with no phase
  # noise, the IRIG 106 mask, Wiener 100 Hz, 300 Hz and 1 kHz; the default (receiver.
  # phase_smoother auto), the PLL alone (0) and the smoother on every packet (1), both
  # backends. Then the benchmark's default batch: auto without phase noise and with a 1 kHz
  # Wiener phase, against the PLL alone.
  printf 'receiver:\n  phase_smoother: 1\n' > /tmp/paq-smoother.yaml
  printf 'receiver:\n  phase_smoother: 0\n' > /tmp/paq-pll.yaml
  for pn in "" "--phase-noise irig106" "--phase-noise-linewidth 100" "--phase-noise-linewidth 300" "--phase-noise-linewidth 1000"; do
    # shellcheck disable=SC2086
    ./.device/paq-sim --preset awgn --ebn0-db 11 --cfo-hz 15000 --seconds 2 --seed 301 $pn --output /tmp/paq-pn > /dev/null
    for run in "cpu auto" "cuda auto" "cpu pll" "cuda pll" "cpu smoother" "cuda smoother"; do
      set -- $run
      cfg=()
      [[ $2 == smoother ]] && cfg=(--config /tmp/paq-smoother.yaml)
      [[ $2 == pll ]] && cfg=(--config /tmp/paq-pll.yaml)
      echo
      echo "=== ${pn:-no phase noise}, $1, $2"
      ./.device/paqd replay /tmp/paq-pn.sigmf-meta --backend "$1" "${cfg[@]}" 2>&1 | grep -E "^  (none|zf|mmse|cma|fde1|fde2|path) |phase noise:" || status=1
    done
  done
  for b in "" "--pll-only" "--phase-noise 1000"; do
    echo
    echo "=== paq-bench $b"
    k=$(echo "benchpn$b" | tr -d ' -')
    # shellcheck disable=SC2086
    ./.device/paq-bench $b --json "$out/$k.json" > /tmp/paq-$k.log 2>&1 || status=1
    grep -E "end to end|real time|stage (paths|detector)|\| input" /tmp/paq-$k.log | head -8
  done
fi
if [[ $mode == phasenoise-seeds ]]; then
  # Phase noise over more signal: the default receiver (receiver.phase_smoother auto) on
  # AWGN 11 dB, CFO 15 kHz, 2 s recordings with seeds 301 .. 305 (10 s, 100 M bits per path
  # and condition): no phase noise, the IRIG 106 mask, Wiener 300 Hz and 1 kHz, both backends.
  # Each run's errors none / zf / mmse / cma / fde1 / fde2; then, per backend, the sums over
  # the seeds and their ratios to the sums without phase noise (docs/SIGNAL-CHAIN.md, "Phase
  # noise"). Conditions (PN_CONDITIONS): clean, irig, irigabove (the mask beyond PN_ABOVE_HZ
  # only, which must be given with a PN_EBN0 other than 11: the crossing paq-sim prints),
  # w300, w1k. A run whose counts differ between the backends by more than float rounding
  # explains (below; stricter than TESTING.md's 3e-5 of the bits) is reported and fails the mode.
  read -r -a conditions <<< "${PN_CONDITIONS:-clean irig w300 w1k}"
  for pn in "${conditions[@]}"; do
    case $pn in clean | irig | irigabove | w300 | w1k) ;;
      *) echo "device-check.sh: unknown phase-noise condition '$pn' in PN_CONDITIONS (known: clean irig irigabove w300 w1k)" >&2; exit 2 ;;
    esac
  done
  if [[ " ${PN_CONDITIONS:-} " == *" irigabove "* && ${PN_EBN0:-11} != 11 && -z ${PN_ABOVE_HZ:-} ]]; then
    echo "device-check.sh: irigabove at PN_EBN0=$PN_EBN0 needs PN_ABOVE_HZ (the crossing paq-sim prints at that Eb/N0)" >&2
    exit 2
  fi
  : > "$out/phasenoise-seeds.txt"
  backends=(cpu cuda)
  ebn0=${PN_EBN0:-11}  # another Eb/N0 (dB)
  echo "Eb/N0 $ebn0 dB" | tee -a "$out/phasenoise-seeds.txt"
  # PN_SEEDS: a subset (one call runs out of time on all five; the sums are then the subset's).
  for seed in ${PN_SEEDS:-301 302 303 304 305}; do
    for pn in "${conditions[@]}"; do
      case $pn in
        clean) args=() ;;
        irig) args=(--phase-noise irig106) ;;
        w300) args=(--phase-noise-linewidth 300) ;;
        w1k) args=(--phase-noise-linewidth 1000) ;;
        # The mask beyond its crossing only (PN_ABOVE_HZ, default 25.6 kHz: 11 dB's; paq-sim prints it).
        irigabove) args=(--phase-noise irig106 --phase-noise-above "${PN_ABOVE_HZ:-25600}") ;;
      esac
      ./.device/paq-sim --preset awgn --ebn0-db "$ebn0" --cfo-hz 15000 --seconds 2 --seed $seed "${args[@]}" --output /tmp/paq-pns > /dev/null || status=1
      counts=()
      for be in "${backends[@]}"; do
        c=$(./.device/paqd replay /tmp/paq-pns.sigmf-meta --backend $be 2>&1 | awk '/^  (none|zf|mmse|cma|fde1|fde2) /{printf "%s ", $4}')
        [[ -n $c ]] || status=1
        counts+=("$c")
        echo "$seed $pn $be $c" >> "$out/phasenoise-seeds.txt"
      done
      # The backends may differ by a few decisions within float rounding of zero (TESTING.md;
      # measured: 1 error in 3319). A path more than 2 errors and 0.1% of its count apart fails
      # the mode.
      same=$(awk -v a="${counts[0]}" -v b="${counts[1]}" 'BEGIN {
               na = split(a, x, " "); nb = split(b, y, " "); d = 0; bad = 0;
               if (na != 6 || nb != 6) { print "DIFFER (a backend gave no table)"; exit }
               for (i = 1; i <= na; ++i) {
                 e = x[i] - y[i]; if (e < 0) e = -e; d += e
                 m = x[i] > y[i] ? x[i] : y[i]; if (e > 2 && e > 1e-3 * m) bad = 1 }
               if (bad) print "DIFFER (" d " errors apart)"; else if (d > 0) print "close (" d " errors apart)"; else print "same" }')
      [[ $same == DIFFER* ]] && status=1
      echo "seed $seed $pn: cpu ${counts[0]}| cuda ${counts[1]}| $same"
    done
  done
  echo
  echo "sums over the seeds, errors none / zf / mmse / cma / fde1 / fde2, and ratio to no phase noise"
  awk -v bel="${backends[*]}" -v pnl="${conditions[*]}" 'NF == 9 {k = $2 " " $3; for (i = 4; i <= 9; ++i) s[k, i] += $i}
       END {nb = split(bel, bes, " "); np = split(pnl, pns, " ");
            for (x = 1; x <= nb; ++x) for (y = 1; y <= np; ++y) {
              k = pns[y] " " bes[x]; c = "clean " bes[x]; line = sprintf("%-5s %-5s", bes[x], pns[y]);
              for (i = 4; i <= 9; ++i) line = line sprintf(" %6d", s[k, i]);
              line = line "   ratio";
              for (i = 4; i <= 9; ++i) line = line (s[c, i] > 0 ? sprintf(" %.2f", s[k, i] / s[c, i]) : " -");
              print line }}' "$out/phasenoise-seeds.txt"
fi
if [[ $mode == trellis ]]; then
  # The trellis detector on the GPU. The benchmark's default batch with symbol-by-
  # symbol and trellis detection (and the trellis on the phase smoother's phase); then BER on
  # AWGN (docs/SIGNAL-CHAIN.md's table: CFO 12 kHz, seed 5101, 1 s) with both detectors on the
  # GPU, 10 dB on the CPU too; then the phase-noise recordings with the trellis on the
  # smoother's phase on the GPU. Files: the four benches' JSON and trellis.log (the device tool
  # brings back at most eight).
  : > "$out/trellis.log"
  for b in "" "--trellis" "--phase-smoother" "--trellis --phase-smoother"; do
    echo
    echo "=== paq-bench $b"
    k=$(echo "bench$b" | tr -d ' -')
    # shellcheck disable=SC2086
    ./.device/paq-bench $b --json "$out/$k.json" > /tmp/paq-$k.log 2>&1 || status=1
    cat /tmp/paq-$k.log >> "$out/trellis.log"
    grep -E "end to end|real time|stage (paths|detector|trellis)" /tmp/paq-$k.log | head -8
  done
  printf 'receiver:\n  detector: trellis\n' > /tmp/paq-trellis.yaml
  printf 'receiver:\n  detector: trellis\n  phase_smoother: 1\n' > /tmp/paq-trellis-smoother.yaml
  for snr in 8 9 10 11; do
    ./.device/paq-sim --preset awgn --ebn0-db $snr --cfo-hz 12000 --seconds 1 --seed 5101 --output /tmp/paq-awgn > /dev/null
    runs=("cuda sxs" "cuda trellis" "cuda trellis-smoother")
    [[ $snr == 10 ]] && runs+=("cpu trellis")
    for run in "${runs[@]}"; do
      set -- $run
      cfg=(--detector "$2")
      [[ $2 == trellis-smoother ]] && cfg=(--config /tmp/paq-trellis-smoother.yaml)
      echo
      echo "=== AWGN $snr dB, $1, $2"
      ./.device/paqd replay /tmp/paq-awgn.sigmf-meta --backend "$1" "${cfg[@]}" 2>&1 | tee -a "$out/trellis.log" \
        | grep -E "^  (none|zf|mmse|cma|fde1|fde2|path) |^  took " || status=1
    done
  done
  ./.device/paq-sim --preset edwards3 --ebn0-db 13 --cfo-hz 12000 --seconds 1 --seed 3319 --output /tmp/paq-e3 > /dev/null
  for d in sxs trellis; do
    echo
    echo "=== edwards3 13 dB, cuda, $d"
    ./.device/paqd replay /tmp/paq-e3.sigmf-meta --backend cuda --detector "$d" 2>&1 | grep -E "^  (none|zf|mmse|cma|fde1|fde2|path) " || status=1
  done
  for pn in "" "--phase-noise irig106" "--phase-noise-linewidth 300" "--phase-noise-linewidth 1000"; do
    # shellcheck disable=SC2086
    ./.device/paq-sim --preset awgn --ebn0-db 11 --cfo-hz 15000 --seconds 2 --seed 301 $pn --output /tmp/paq-pn > /dev/null
    echo
    echo "=== ${pn:-no phase noise}, cuda, trellis on the smoother's phase"
    ./.device/paqd replay /tmp/paq-pn.sigmf-meta --backend cuda --config /tmp/paq-trellis-smoother.yaml 2>&1 \
      | grep -E "^  (none|zf|mmse|cma|fde1|fde2|path) " || status=1
  done
fi
if [[ $mode == live ]]; then
  # The live pipeline with the CUDA backend, one worker per GPU: paqd reads a recording at
  # its real-time rate (file source, paced), publishes six UDP streams, paq-bert checks them;
  # the same recording replayed offline must give the same BER per path.
  ./.device/paq-sim --preset edwards3 --ebn0-db 12 --cfo-hz 50000 --seconds 8 --seed 41 --datatype ci16_le \
    --output /tmp/paq-live > /dev/null
  ngpu=$(nvidia-smi -L | wc -l)
  {
    echo "source: {type: file, file: {path: /tmp/paq-live.sigmf-meta, paced: true}}"
    echo "pipeline: {backend: cuda, gpus: [$(seq -s, 0 $((ngpu - 1)))]}"
    echo "metrics: {port: 0}"
    echo "monitor: {status_interval_s: 2}"
    echo "log: {destination: console}"
  } > /tmp/paq-live.yaml
  ./.device/paq-bert --base-port 50000 --interval 0 --idle-timeout 600 --json "$out/live-bert.json" \
    > "$out/live-bert.log" 2>&1 &
  bert=$!
  sleep 0.5
  ./.device/paqd --config /tmp/paq-live.yaml --json-out "$out/live-paqd.json" 2>&1 | grep -v "info:    " | tail -22
  sleep 1
  kill -TERM $bert
  wait $bert
  tail -9 "$out/live-bert.log"
  ./.device/paqd replay /tmp/paq-live.sigmf-meta --backend cuda --json-out "$out/live-replay.json" 2>&1 | tail -9
fi
if [[ $mode == soak ]]; then
  # The live service as fast as it goes. The 8 s ci16 recording looped, unpaced; the
  # CUDA backend; the six streams unpaced to paq-bert on this machine; the monitor on. Run for
  # SOAK_S seconds (default 300); paqd's RSS every 10 s; its --json-out has the counters.
  # SOAK_PUBLISHER=off: no bitstreams (to see what the publisher costs); SOAK_CHUNK: the file
  # source's chunk_samples (65536); SOAK_DETECTOR: receiver.detector (sxs); SOAK_LLR=on: the six
  # soft streams (publisher.llr_destinations, needs the trellis) to ports 50100 .. 50105, where
  # a receiver counts their datagrams (soak-llr.json). SOAK_GPUS: pipeline.gpus (0; e.g. 0,1).
  soak_s=${SOAK_S:-300}
  ./.device/paq-sim --preset edwards3 --ebn0-db 12 --cfo-hz 50000 --seconds 8 --seed 41 --datatype ci16_le \
    --output /tmp/paq-soak > /dev/null
  {
    echo "source: {type: file, file: {path: /tmp/paq-soak.sigmf-meta, paced: false, loop: true, chunk_samples: ${SOAK_CHUNK:-65536}}}"
    echo "pipeline: {backend: cuda, gpus: [${SOAK_GPUS:-0}]}"
    soak_detector=${SOAK_DETECTOR:-sxs}
    [[ ${SOAK_LLR:-off} == on && -z ${SOAK_DETECTOR:-} ]] && soak_detector=trellis  # the soft streams need it
    echo "receiver: {detector: $soak_detector}"
    if [[ ${SOAK_PUBLISHER:-on} == on && ${SOAK_LLR:-off} == on ]]; then
      echo "publisher: {max_datagrams_per_second: 0, llr_destinations: {none: 127.0.0.1:50100, zf: 127.0.0.1:50101, mmse: 127.0.0.1:50102, cma: 127.0.0.1:50103, fde1: 127.0.0.1:50104, fde2: 127.0.0.1:50105}}"
    elif [[ ${SOAK_PUBLISHER:-on} == on ]]; then
      echo "publisher: {max_datagrams_per_second: 0}"
    else
      echo "publisher: {enabled: false}"
    fi
    echo "metrics: {port: 0}"
    echo "monitor: {status_interval_s: 10}"
    echo "log: {destination: console}"
  } > /tmp/paq-soak.yaml
  ./.device/paq-bert --base-port 50000 --interval 0 --idle-timeout 600 --json "$out/soak-bert.json" \
    > "$out/soak-bert.log" 2>&1 &
  bert=$!
  llr_rx=
  if [[ ${SOAK_LLR:-off} == on ]]; then
    python3 - "$out/soak-llr.json" <<'EOF' &
import json, selectors, signal, socket, sys
sel, counts = selectors.DefaultSelector(), {}
for port in range(50100, 50106):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 32 << 20)
    s.bind(("127.0.0.1", port))
    sel.register(s, selectors.EVENT_READ, port)
    counts[port] = {"datagrams": 0, "bytes": 0, "bad": 0}
running = [True]
signal.signal(signal.SIGTERM, lambda *a: running.__setitem__(0, False))
while running[0]:
    for key, _ in sel.select(0.5):
        d = key.fileobj.recv(65536)
        c = counts[key.data]
        c["datagrams"] += 1
        c["bytes"] += len(d)
        c["bad"] += len(d) != 6216 or d[5] != 2
json.dump(counts, open(sys.argv[1], "w"))
EOF
    llr_rx=$!
  fi
  sleep 0.5
  ./.device/paqd --config /tmp/paq-soak.yaml --duration "$soak_s" --json-out "$out/soak-paqd.json" > "$out/soak-paqd.log" 2>&1 &
  paqd=$!
  : > "$out/soak-rss.txt"
  # CPU seconds per thread (the threads are named: paq-source, paq-batcher, paq-worker0,
  # paq-publisher, ...), the last snapshot before paqd ends: which thread bounds the rate.
  thread_cpu() {
    local tck
    tck=$(getconf CLK_TCK)
    for t in /proc/"$1"/task/*; do
      [[ -r $t/stat ]] || continue
      awk -v tck="$tck" -v name="$(cat "$t/comm" 2> /dev/null)" '{sub(/^.*\) /, ""); printf "%-16s %8.1f s\n", name, ($12 + $13) / tck}' "$t/stat" 2> /dev/null
    done | sort -k2 -n -r | head -12
  }
  while kill -0 $paqd 2> /dev/null; do
    echo "$(date +%s) $(awk '/VmRSS/{print $2}' /proc/$paqd/status 2> /dev/null)" >> "$out/soak-rss.txt"
    snap=$(thread_cpu $paqd)
    [[ -n $snap ]] && echo "$snap" > "$out/soak-threads.txt"
    bert_cpu=$(awk -v tck="$(getconf CLK_TCK)" '{sub(/^.*\) /, ""); printf "%.1f", ($12 + $13) / tck}' /proc/$bert/stat 2> /dev/null)
    sleep 10
  done
  wait $paqd || status=1
  sleep 1
  kill -TERM $bert
  wait $bert
  if [[ -n $llr_rx ]]; then
    kill -TERM "$llr_rx"
    wait "$llr_rx"
    echo "soft streams received (port: datagrams, bytes, bad): $(cat "$out/soak-llr.json" 2> /dev/null)"
  fi
  grep -v "info:    " "$out/soak-paqd.log" | tail -25
  tail -9 "$out/soak-bert.log"
  echo "CPU seconds per thread of paqd (10 s before its end); paq-bert: ${bert_cpu:-?} s"
  cat "$out/soak-threads.txt" 2> /dev/null
  echo "RSS (kB) every 10 s:"
  awk '{printf "%s ", $2} END {print ""}' "$out/soak-rss.txt"
fi
if [[ $mode == links ]]; then
  # Many links on one GPU, one paqd process each: LINKS (64) file sources, each the 8 s ci16
  # recording looped and paced at real time, with a ring that drops what it cannot hold (as
  # from a radio), batches of LINKS_BATCH samples (4950000: 0.24 s), the CUDA backend, no
  # publisher; LINKS_S seconds (60). LINKS_MPS=on runs them under the CUDA MPS control
  # daemon (started and stopped here). Each writes links-<k>.json; the summary gives the
  # slowest link's rate, drops, lost batches, the batch latency's mean, max and 99th
  # percentile (upper bound: the histogram bucket it falls in) and the GPU memory used.
  # LINKS_OMP=unit (the default) gives each process the OpenMP settings of the template unit's
  # drop-in (systemd/paqd@-host-threads.conf), as paqd@NAME runs; LINKS_OMP=default leaves
  # OpenMP's own (a team per core, spinning when idle).
  links=${LINKS:-64}
  links_omp=${LINKS_OMP:-unit}
  if [[ $links_omp == unit ]]; then
    # shellcheck disable=SC2046
    export $(sed -n 's/^Environment=//p' systemd/paqd@-host-threads.conf)
  fi
  links_s=${LINKS_S:-60}
  ./.device/paq-sim --preset edwards3 --ebn0-db 12 --cfo-hz 50000 --seconds 8 --seed 41 --datatype ci16_le \
    --output /tmp/paq-links > /dev/null
  cat > /tmp/paq-link.yaml <<EOF
source: {type: file, file: {path: /tmp/paq-links.sigmf-meta, paced: true, loop: true}}
ring: {overflow: drop}
receiver: {batch_samples: ${LINKS_BATCH:-4950000}}
pipeline: {backend: cuda}
publisher: {enabled: false}
metrics: {enabled: false}
monitor: {status_interval_s: 10}
log: {destination: console}
EOF
  mps=
  if [[ ${LINKS_MPS:-off} == on ]]; then
    export CUDA_MPS_PIPE_DIRECTORY=/tmp/paq-mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/paq-mps-log
    mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
    nvidia-cuda-mps-control -d && mps=1 || echo "links: the MPS control daemon did not start; running without it"
  fi
  rm -f "$out"/links-*.json
  pids=()
  for ((k = 0; k < links; k++)); do
    ./.device/paqd --config /tmp/paq-link.yaml --duration "$links_s" --json-out "$out/links-$k.json" \
      > "$out/links-$k.log" 2>&1 &
    pids+=($!)
  done
  gpu_peak=0
  while kill -0 "${pids[@]}" 2> /dev/null; do
    used=$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | head -1)
    ((used > gpu_peak)) && gpu_peak=$used
    sleep 5
  done
  for p in "${pids[@]}"; do wait "$p" || status=1; done
  [[ -n $mps ]] && echo quit | nvidia-cuda-mps-control
  python3 - "$out" "$links" "$links_s" "$gpu_peak" "${LINKS_MPS:-off}" "$links_omp" <<'PY' | tee "$out/links-summary.txt"
import glob, json, sys
out, n, dur, gpu_mib, mps, omp = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6]
rows = [json.load(open(f)) for f in sorted(glob.glob(f"{out}/links-*.json"))]
if not rows:
    sys.exit("links: no JSON written")
bounds = rows[0]["batch_latency_seconds"]["le"]
def p99(counts, count):
    return next((b for b, c in zip(bounds, counts) if c >= 0.99 * count), float("inf"))
total, count = [0] * len(bounds), 0
for j in rows:
    h = j["batch_latency_seconds"]
    total = [a + b for a, b in zip(total, h["counts"])]
    count += h["count"]
rate = [j["samples_in"] / dur / 20.625e6 for j in rows]
mean = sum(j["batch_latency_mean_seconds"] * j["batches_published"] for j in rows) / max(count, 1)
worst = max(p99(j["batch_latency_seconds"]["counts"], j["batch_latency_seconds"]["count"]) for j in rows)
print(f"links: {len(rows)} of {n} wrote their JSON (MPS {mps}, OpenMP {omp}), {dur:.0f} s, GPU memory used at most {gpu_mib} MiB")
print(f"  real time per link: min {min(rate):.4f}x, mean {sum(rate) / len(rate):.4f}x")
print(f"  ring samples dropped {sum(j['ring_samples_dropped'] for j in rows)}, batches lost {sum(j['batches_lost'] for j in rows)}, "
      f"source errors {sum(1 for j in rows if j['source_error'])}")
print(f"  batches {count}; latency mean {mean:.3f} s, max {max(j['batch_latency_max_seconds'] for j in rows):.3f} s, "
      f"99th percentile <= {p99(total, count)} s (the worst link's <= {worst} s)")
# Each link's slowest batch bounds its 99th percentile more tightly than the buckets do.
slow = sorted(j["batch_latency_max_seconds"] for j in rows)
print(f"  each link's slowest batch: median {slow[len(slow) // 2]:.3f} s, largest {slow[-1]:.3f} s; "
      f"links with a batch of 1 s or more: {sum(1 for v in slow if v >= 1.0)}")
PY
fi
if [[ $mode == soft ]]; then
  # The live service's soft streams on the CUDA backend against `paqd replay --backend
  # cuda --llr-out` of the same recording (edwards3 12 dB, 25 MS/s, +60 ppm, 4 s): a receiver
  # keeps the mmse and fde2 LLR datagrams as the replay's file records (start sample, LLRs),
  # and every record must be equal. Paced to 5000 datagrams/s for the receiver's sake.
  w=/tmp/paq-soft
  rm -rf "$w" && mkdir -p "$w"
  ./.device/paq-sim --preset edwards3 --ebn0-db 12 --cfo-hz 30000 --seconds 4 --seed 93 --sample-rate 25e6 --clock-ppm 60 \
    --datatype ci16_le --output "$w/rec" > /dev/null
  python3 - "$w" <<'EOF' &
import select, socket, sys, time
w = sys.argv[1]
socks = []
for port, name in ((50102, "mmse"), (50105, "fde2")):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 << 20)
    s.bind(("127.0.0.1", port))
    socks.append((s, open(f"{w}/live-{name}.llr", "wb")))
open(f"{w}/ready", "w").close()
last = time.time()
while time.time() - last < 5:
    ready, _, _ = select.select([s for s, _ in socks], [], [], 0.2)
    for s, f in socks:
        if s in ready:
            d = s.recv(65536)
            last = time.time()
            f.write(d[40:48][::-1] + d[72:])  # the header's start sample (big-endian) as the file's (little-endian)
for _, f in socks:
    f.close()
EOF
  rx=$!
  for _ in $(seq 1 100); do [[ -f $w/ready ]] && break; sleep 0.1; done
  {
    echo "source: {type: file, file: {path: $w/rec.sigmf-meta, paced: false}}"
    echo "pipeline: {backend: cuda, gpus: [0]}"
    echo "receiver: {detector: trellis}"
    echo "publisher: {max_datagrams_per_second: 5000, destinations: {mmse: \"127.0.0.1:50002\"}, llr_destinations: {mmse: \"127.0.0.1:50102\", fde2: \"127.0.0.1:50105\"}}"
    echo "log: {destination: console}"
  } > "$w/live.yaml"
  ./.device/paqd --config "$w/live.yaml" --json-out "$out/soft-live.json" > "$out/soft-live.log" 2>&1 || status=1
  wait $rx
  ./.device/paqd replay "$w/rec.sigmf-meta" --backend cuda --detector trellis --llr-out "$w/llr" \
    --json-out "$out/soft-replay.json" > "$out/soft-replay.log" 2>&1 || status=1
  python3 - "$w" "$out" <<'EOF' || status=1
import json, sys
w, out = sys.argv[1], sys.argv[2]
live, rep = json.load(open(f"{out}/soft-live.json")), json.load(open(f"{out}/soft-replay.json"))
print("packets: live", live["packets_found"], "replay", rep["packets_found"], "; LLR datagrams sent", live["llr_datagrams_sent"],
      "send errors", live["llr_send_errors"])
ok = True
for n in ("mmse", "fde2"):
    a, b = open(f"{w}/live-{n}.llr", "rb").read(), open(f"{w}/llr-{n}.llr", "rb").read()
    ra = {a[i:i + 8]: a[i + 8:i + 6152] for i in range(0, len(a), 6152)}
    rb = {b[i:i + 8]: b[i + 8:i + 6152] for i in range(0, len(b), 6152)}
    common = set(ra) & set(rb)
    diff = sum(ra[k] != rb[k] for k in common)
    print(f"{n}: live {len(ra)} records, replay {len(rb)}, in both {len(common)}, differing {diff}, files equal: {a == b}")
    ok = ok and a == b
sys.exit(0 if ok else 1)
EOF
fi
if [[ $mode == setup ]]; then
  # The fixed cost of a fresh process (CUDA context, the backend, a pinned window),
  # which bounds the replay of a short recording; three fresh processes.
  for k in 1 2 3; do
    echo "=== paq-bench-setup, process $k"
    ./.device/paq-bench-setup --json "$out/setup-$k.json" || status=1
  done
fi
if [[ $mode == stages ]]; then
  # Where a replay's batch time goes (paqd replay --stage-timing), beside paq-bench's timeline
  # of its one batch: the speed mode's 32 s recording (the 8 s one four times over: its joins
  # make packets that the phase smoother decides) and a 32 s recording made in one piece.
  speed_recording
  for k in 1 2 3 4; do cat /tmp/paq-speed.sigmf-data; done > /tmp/paq-joined32.ci16
  [[ -f /tmp/paq-piece32.sigmf-meta ]] || ./.device/paq-sim --preset edwards3 --ebn0-db 12 --cfo-hz 50000 --seconds 32 --seed 41 \
    --datatype ci16_le --output /tmp/paq-piece32 > /dev/null
  cat /tmp/paq-joined32.ci16 /tmp/paq-piece32.sigmf-data > /dev/null
  ./.device/paq-bench --json "$out/stages-bench.json" > "$out/stages-bench.log" 2>&1 || status=1
  grep -E 'ci16 input \(converted|timeline, ci16|^\| host:' "$out/stages-bench.log" | cut -c1-300
  for rec in joined32 piece32; do
    args=(/tmp/paq-joined32.ci16 --datatype ci16_le --sample-rate 20.625e6)
    [[ $rec == piece32 ]] && args=(/tmp/paq-piece32.sigmf-meta)
    echo
    echo "=== paqd replay --stage-timing, $rec"
    ./.device/paqd replay "${args[@]}" --backend cuda --stage-timing \
      --json-out "$out/stages-$rec.json" > "$out/stages-$rec.log" 2>&1 || status=1
    grep -E 'packets found|phase noise|took|stages \(|the first batch' -A1 "$out/stages-$rec.log" | cut -c1-400
  done
  rm -f /tmp/paq-joined32.ci16 /tmp/paq-piece32.sigmf-*
fi
if [[ $mode == hostwait ]]; then
  # What a replay's first batch and the host's turnaround between parts cost: the 8 s and 128 s
  # recordings replayed with stage timing as they are, with every kernel loaded when the CUDA
  # context is made (CUDA_MODULE_LOADING=EAGER; lazily at the first launch otherwise), and with
  # the OpenMP teams of the reader, the tally and the host loops sleeping as soon as a parallel
  # region ends (OMP_WAIT_POLICY=passive; they spin a while otherwise); alternated, two rounds.
  # The 128 s runs' JSON come back (six files); the 8 s runs' tables only.
  speed_recording
  for k in $(seq 16); do cat /tmp/paq-speed.sigmf-data; done > /tmp/paq-speed128.ci16
  cat /tmp/paq-speed128.ci16 > /dev/null
  for k in 1 2; do
    for variant in as-is eager passive; do
      envs=(X=1)
      [[ $variant == eager ]] && envs=(CUDA_MODULE_LOADING=EAGER)
      [[ $variant == passive ]] && envs=(OMP_WAIT_POLICY=passive)
      for rec in 8 128; do
        args=(/tmp/paq-speed.sigmf-meta)
        [[ $rec == 128 ]] && args=(/tmp/paq-speed128.ci16 --datatype ci16_le --sample-rate 20.625e6)
        echo "=== paqd replay --stage-timing, $rec s, $variant, round $k"
        env "${envs[@]}" ./.device/paqd replay "${args[@]}" --backend cuda --stage-timing \
          --json-out "$([[ $rec == 128 ]] && echo "$out" || echo /tmp)/hostwait-$rec-$variant-$k.json" 2>&1 | grep -E 'took|stages \(|the first batch' -A1 | cut -c1-400 || status=1
      done
    done
  done
  rm -f /tmp/paq-speed128.ci16
fi
if [[ $mode == profile ]]; then
  # Nsight Compute on paq-bench's kernels (its first batches: warm-up and the one-part and
  # four-part runs): a few counters of every launch (profile-kernels.csv, summed per kernel in
  # profile-summary.txt), then the full sections of the kernels named in PROFILE_KERNELS
  # (a regex; profile-full.txt). Clocks are left alone (--clock-control none).
  ncu_bin=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2> /dev/null | head -1)
  [[ -n $ncu_bin ]] || { echo "profile: no ncu on this machine"; exit 1; }
  "$ncu_bin" --clock-control none --csv --page raw -c "${PROFILE_LAUNCHES:-300}" \
    --metrics gpu__time_duration.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,dram__throughput.avg.pct_of_peak_sustained_elapsed,l1tex__throughput.avg.pct_of_peak_sustained_active,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,launch__grid_size,launch__block_size,launch__occupancy_limit_shared_mem,launch__occupancy_limit_registers \
    ./.device/paq-bench "${bench_args[@]}" > "$out/profile-kernels.csv" 2> "$out/profile-kernels.err" || status=1
  python3 - "$out/profile-kernels.csv" > "$out/profile-summary.txt" << 'PY'
import csv, sys, collections
def ns(r):  # ncu writes 33,152 for 33152 ns; the units row and failed launches have no number
    try:
        return float(r.get("gpu__time_duration.sum", "").replace(",", ""))
    except ValueError:
        return None
rows = [r for r in csv.DictReader(l for l in open(sys.argv[1]) if l.startswith('"')) if ns(r) is not None]
by = collections.defaultdict(list)
for r in rows:
    by[(r["Kernel Name"][:60], r["launch__grid_size"])].append(r)
print(f"{'kernel':60} {'grid':>7} {'n':>4} {'med us':>9} {'sm%':>6} {'dram%':>6} {'l1%':>6} {'warps%':>7} {'regs':>5}")
for (k, g), rs in sorted(by.items(), key=lambda kv: -sum(ns(r) for r in kv[1])):
    t = sorted(ns(r) for r in rs)
    m = t[len(t) // 2] / 1000.0
    f = lambda key: rs[0].get(key, "")
    print(f"{k:60} {g:>7} {len(rs):>4} {m:9.1f} {f('sm__throughput.avg.pct_of_peak_sustained_elapsed'):>6.6} {f('dram__throughput.avg.pct_of_peak_sustained_elapsed'):>6.6} {f('l1tex__throughput.avg.pct_of_peak_sustained_active'):>6.6} {f('sm__warps_active.avg.pct_of_peak_sustained_active'):>7.7} {f('launch__registers_per_thread'):>5}")
PY
  cat "$out/profile-summary.txt"
  if [[ -n ${PROFILE_KERNELS:-} ]]; then
    "$ncu_bin" --clock-control none --set full -k "regex:${PROFILE_KERNELS}" -c "${PROFILE_FULL_LAUNCHES:-4}" \
      ./.device/paq-bench "${bench_args[@]}" > "$out/profile-full.txt" 2>&1 || status=1
    grep -E '^\s+[a-z_]+.*\(|Duration|Throughput|Achieved Occupancy|Registers Per|Warp Cycles Per Issued|Stall|Bank|Issue Slot|Executed Ipc|Theoretical Occ|Block Limit' "$out/profile-full.txt" | head -150
  fi
fi
if [[ $mode == flight ]]; then
  # A three-minute flight replayed with the CUDA backend, with per-packet records and the
  # comparison page. Twelve 15 s pieces are simulated in parallel (flight clock
  # 0..180 s, one seed each) and joined: the seams are discontinuities (a packet cut at each,
  # the PN checkers resync), like a real recording with dropouts.
  d=/tmp/paq-flight && rm -rf $d && mkdir -p $d
  for k in $(seq 0 11); do
    ./.device/paq-sim --preset flight --ebn0-db 14 --cfo-hz 60000 --seconds 15 --flight-start $((k * 15)) \
      --seed $((900 + k)) --datatype ci16_le --output $d/part$k > /dev/null &
  done
  wait
  cat $(for k in $(seq 0 11); do echo $d/part$k.sigmf-data; done) > $d/flight.sigmf-data
  cp $d/part0.sigmf-meta $d/flight.sigmf-meta
  rm -f $d/part*.sigmf-data
  ./.device/paqd replay $d/flight.sigmf-meta --backend cuda --records $d/flight --records-decimation 10 \
    --channel-decimation 500 --json-out "$out/flight-replay.json" 2>&1 | tail -14 || status=1
  ./.device/paq-report $d/flight --title "Flight preset, 3 min, 14 dB (paq-sim, 12 x 15 s)" \
    --meta "backend=cuda" --meta "records=every 10th packet" -o "$out/flight-report.html" || status=1
  gzip -c $d/flight-packets.csv > "$out/flight-packets.csv.gz"
  cp $d/flight-channel.csv "$out/"
fi
echo
printf '%s\n' "${rows[@]}"
exit $status
