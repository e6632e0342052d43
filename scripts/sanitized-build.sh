#!/usr/bin/env bash
# The sanitized build (docs/TESTING.md), one tree for scripts/sanitize.sh and scripts/fuzz.sh:
# Clang 14, CUDA off, every object with ASan + UBSan (-fno-sanitize-recover=all), the code the
# fuzz targets reach with libFuzzer's coverage; the tests (but the signal chain's own, label
# dsp), the tools and the fuzz targets. -O0 with line tables only (enough for symbolized
# reports; full debug info costs a third more compile time), the signal chain (paq_dsp,
# paq_sim) at -O2: at -O1 it makes the sanitized trellis end-to-end test three times slower;
# the rest compiles in half the time at -O0 (config/daemon_yaml.cpp: 42 s against 82 s at
# -O1, 123 s at -O2). It is also the build without CUDA (what users without a GPU toolchain
# get) whose tests CI runs. It links with lld (LLVM 14's, as the compiler) where Clang can use
# it, in a third of BFD ld's time (docs/TESTING.md, "Sanitizers").
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
linker=()
if echo 'int main() {}' | clang++-14 -fuse-ld=lld -x c++ - -o /dev/null 2>/dev/null; then
  linker=(-DCMAKE_EXE_LINKER_FLAGS=-fuse-ld=lld -DCMAKE_SHARED_LINKER_FLAGS=-fuse-ld=lld -DCMAKE_MODULE_LINKER_FLAGS=-fuse-ld=lld)
fi
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 \
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O0 -gline-tables-only -DNDEBUG" -DPAQ_DSP_OPTIMIZATION=-O2 \
  -DPAQ_TEST_OPTIMIZATION=-O0 -DPAQ_HEAVY_TEST_OPTIMIZATION=-O0 -DPAQ_SETUP_OPTIMIZATION=-O0 \
  -DPAQ_WITH_CUDA=OFF -DPAQ_SANITIZE=ON -DPAQ_BUILD_FUZZ=ON -DPAQ_BUILD_BENCH=OFF -DPAQ_DSP_TESTS=OFF "${launcher[@]}" "${linker[@]}" > /dev/null
if (($#)); then
  cmake --build "$build" -j"$(nproc)" --target "$@"
else
  cmake --build "$build" -j"$(nproc)" --target all paq_fuzz
fi
