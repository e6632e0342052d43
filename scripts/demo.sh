#!/usr/bin/env bash
# The quick start's main job: set up, build, make the demo recording if absent (edwards3,
# 3 s, Eb/N0 12 dB) and replay it with the side-by-side table of the six paths.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
mkdir -p demo
if [[ ! -f demo/edwards3.sigmf-meta ]]; then
  build/tools/paq-sim --preset edwards3 --ebn0-db 12 --cfo-hz 50000 --timing-offset 0.3 \
    --seconds 3 --seed 2026 --output demo/edwards3
fi
build/daemon/paqd replay demo/edwards3.sigmf-meta --json-out demo/edwards3-replay.json
