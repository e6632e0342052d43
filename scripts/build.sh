#!/usr/bin/env bash
# Configures and builds paqd in build/ (Release). Extra arguments go to cmake.
#
# Device code is compiled for the GPU this machine has (CMake's `native`), or, without one,
# for sm_90 (H100/H200, the deployment target) alone: a build to develop and test on needs
# no other. The package's build (README, "Debian package") keeps CMakeLists.txt's default of
# every supported architecture. PAQ_CUDA_ARCHITECTURES overrides the choice.
set -euo pipefail
cd "$(dirname "$0")/.."
args=()
if [[ -n ${PAQ_CUDA_ARCHITECTURES:-} ]]; then
  args+=(-DCMAKE_CUDA_ARCHITECTURES="$PAQ_CUDA_ARCHITECTURES")
elif command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
  args+=(-DCMAKE_CUDA_ARCHITECTURES=native)
else
  args+=(-DCMAKE_CUDA_ARCHITECTURES=90)
fi
# ccache (scripts/setup.sh installs it) serves a rebuild of unchanged sources from its cache.
if command -v ccache >/dev/null; then
  args+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "${args[@]}" "$@" > /dev/null
cmake --build build -j"$(nproc)"
