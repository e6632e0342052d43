#!/usr/bin/env bash
# Sanitizer run (docs/TESTING.md): builds the sanitized tree (scripts/sanitized-build.sh:
# Clang, ASan + UBSan, CUDA off) and runs the CPU tests there, the end-to-end tests included,
# but for the labels `slow` (the statistical tests, run optimized by scripts/test.sh) and
# `not_sanitized` (tests/CMakeLists.txt names why each cannot hold sanitized). Fails on any
# test failure and on any sanitizer report, also from a process whose exit status a test
# does not look at (a tool an e2e script starts and kills): every report is written to
# <build>/sanitizer-logs/ and any file there fails the run. Each test's time goes to
# <build>/test-results.xml.
#
#   scripts/sanitize.sh [extra ctest arguments, e.g. -R e2e]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${PAQ_SANITIZE_BUILD_DIR:-build-asan}
scripts/sanitized-build.sh

logs=$(cd "$build" && pwd)/sanitizer-logs
rm -rf "$logs"
mkdir -p "$logs"
# log_path: one file per reporting process (<prefix>.<pid>); halt/abort: a report ends the
# process with an error, which fails the test that ran it.
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:log_path=$logs/asan
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:log_path=$logs/ubsan
# print_suppressions=0: a run whose only leaks are suppressed writes no file (any file fails).
export LSAN_OPTIONS=log_path=$logs/lsan:suppressions=$(pwd)/scripts/lsan.supp:print_suppressions=0
symbolizer=/usr/lib/llvm-14/bin/llvm-symbolizer
[[ -x $symbolizer ]] && export ASAN_SYMBOLIZER_PATH=$symbolizer
# The end-to-end tests' paq-bert waits this long after the last datagram before it ends:
# sanitized, paqd's batches come seconds apart.
export PAQ_E2E_BERT_IDLE_S=60

status=0
ctest --test-dir "$build" -L cpu -LE '^(slow|not_sanitized|dsp)$' --output-on-failure -j"$(nproc)" --timeout 1800 \
  --output-junit test-results.xml "$@" || status=$?

reports=$(find "$logs" -type f | sort)
if [[ -n $reports ]]; then
  echo "sanitize: sanitizer reports:" >&2
  for f in $reports; do echo "=== $f" >&2; head -60 "$f" >&2; done
  exit 1
fi
if ((status != 0)); then
  echo "sanitize: tests failed (status $status)" >&2
  exit "$status"
fi
echo "sanitize: no sanitizer report; all CPU tests passed"
