#!/usr/bin/env bash
# Here (no GPU needed): builds the project with sm_90 code and packs what the GPU machine
# needs into .device/: the GPU test binaries and the non-CUDA shared libraries they link
# (the GPU machine has the CUDA toolkit but not Debian's FFTW, OpenMP runtime, ...).
# Then: device run with carry [".device"] and command "bash scripts/device-check.sh".
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh >/dev/null
rm -rf .device && mkdir -p .device/lib
bins=(build/tests/test_gpu_device build/tests/test_gpu_estimators build/tests/test_gpu_equalizers build/tests/test_gpu_detector build/tests/test_gpu_backend build/tests/test_gpu_preamble_detector build/tests/test_gpu_resampler build/tests/test_gpu_ldpc build/tests/test_gpu_combining build/bench/paq-bench-solvers build/bench/paq-ldpc-curve build/bench/paq-bench build/bench/paq-bench-setup build/daemon/paqd build/tools/paq-sim build/tools/paq-report build/tools/paq-bert build/tools/paq-stream build/tools/paq-ber-curve)
cp "${bins[@]}" .device/
# The CUDA backend's module (loaded at run time; device-check.sh points PAQD_CUDA_MODULE at it).
cp build/gpu/libpaqd-cuda.so .device/
# Symbols off the copies: the bundle travels under the device tool's 64 MiB limit.
strip --strip-unneeded .device/* 2>/dev/null || true
for b in "${bins[@]}" build/gpu/libpaqd-cuda.so; do
  ldd "$b" | awk '/=> \//{print $3}' | while read -r lib; do
    case "$lib" in
      */libcuda*|*/libcublas*|*/libcufft*|*/libcudart*|*/libcusolver*|*/libcusparse*|*/libnvJitLink*|*/libnvrtc*|*/libc.so*|*/libm.so*|*/libpthread*|*/libdl*|*/ld-linux*|*/librt*) ;;
      *) cp -n "$lib" .device/lib/ ;;
    esac
  done
done
# The libraries and the programs travel packed (libiio's libxml2 brings ICU's 31 MB data library;
# the programs are 86 MiB stripped, 14 MiB in xz); device-check.sh unpacks them.
tar -C .device -czf .device/lib.tar.gz lib
rm -rf .device/lib
names=("${bins[@]##*/}")
tar -C .device -cf .device/bins.tar "${names[@]}" libpaqd-cuda.so
xz -T0 -6 .device/bins.tar
(cd .device && rm -f "${names[@]}" libpaqd-cuda.so)
git rev-parse --short HEAD > .device/commit
du -sh .device
