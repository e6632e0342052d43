#!/usr/bin/env bash
# Installs the Debian packages paqd needs to build and test. Idempotent; uses sudo when not
# root. CUDA is optional: with /usr/local/cuda present the CUDA backend is built too.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config
  ccache  # scripts/build.sh and the sanitized build compile through it
  libfftw3-dev libyaml-cpp-dev libspdlog-dev libfmt-dev libcli11-dev nlohmann-json3-dev
  libboost-dev libiio-dev libsystemd-dev
  libzmq3-dev  # the ZeroMQ source (source.type: zmq, GNU Radio's ZMQ sinks; libzmq's C API)
  systemd  # systemd.pc (the unit directory) and systemd-analyze (the unit verification test)
  libgtest-dev libgmock-dev
  gnuplot-nox
  help2man dpkg-dev  # the man pages from --help; dpkg-shlibdeps for the Debian package's Depends
  lintian  # the Debian packages' check (ctest package.deb)
  python3-jsonschema  # the SigMF schema check of every file paqd writes (ctest sigmf.schema)
  prometheus  # promtool: `promtool check metrics` on a live scrape (ctest metrics.promtool)
  chromium  # headless: the live view during a run and paq-report's page (ctest live_view.browser, report.screenshot)
  # The sanitized build (scripts/sanitize.sh, scripts/fuzz.sh): Clang with libFuzzer and the
  # sanitizer runtimes, the OpenMP runtime Clang links, llvm-symbolizer for stack traces, and
  # lld, which links the sanitized programs in a third of BFD ld's time.
  clang-14 libclang-rt-14-dev libomp-14-dev llvm-14 lld-14
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  sudo=""
  if [[ $(id -u) -ne 0 ]]; then
    command -v sudo >/dev/null || { echo "setup: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
    sudo="sudo"
  fi
  echo "setup: installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "setup: all packages present"
fi
