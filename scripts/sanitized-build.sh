#!/usr/bin/env bash
# The sanitized build (docs/TESTING.md), one tree for scripts/sanitize.sh and scripts/fuzz.sh:
# Clang 14, CUDA off, every object with ASan + UBSan (-fno-sanitize-recover=all), the
# libraries with libFuzzer's coverage instrumentation; the tests, the tools and the fuzz
# targets. -O1 with line tables only (enough for symbolized reports; full debug info costs a
# third more compile time), the signal chain (paq_dsp) at -O2: at -O1 throughout the
# sanitized trellis end-to-end test runs three times slower, at -O2 throughout the tree takes
# longer to compile (config/daemon_yaml.cpp: 123 s against 82 s at -O1). It is also the build
# without CUDA (what users without a GPU toolchain get) whose tests CI runs.
#
#   scripts/sanitized-build.sh [targets...]     # default: everything
#
# Environment: PAQ_SANITIZE_BUILD_DIR (default build-asan).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${PAQ_SANITIZE_BUILD_DIR:-build-asan}
command -v clang++-14 >/dev/null || { echo "sanitized build: clang++-14 not found (scripts/setup.sh installs clang-14 and libclang-rt-14-dev)" >&2; exit 1; }
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 \
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -gline-tables-only -DNDEBUG" -DPAQ_DSP_OPTIMIZATION=-O2 \
  -DPAQ_WITH_CUDA=OFF -DPAQ_SANITIZE=ON -DPAQ_BUILD_FUZZ=ON -DPAQ_BUILD_BENCH=OFF "${launcher[@]}" > /dev/null
if (($#)); then
  cmake --build "$build" -j"$(nproc)" --target "$@"
else
  cmake --build "$build" -j"$(nproc)" --target all paq_fuzz
fi
