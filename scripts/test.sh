#!/usr/bin/env bash
# Sets up, builds and runs every test (GPU tests skip without a device). Each test's time
# goes to build/test-results.xml (JUnit), from which scripts/test-costs.py writes the cost
# table of docs/TESTING.md. Extra arguments go to ctest (e.g. -LE slow, -R e2e).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
ctest --test-dir build --output-on-failure -j"$(nproc)" --timeout 1800 --output-junit test-results.xml "$@"
