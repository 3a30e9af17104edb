#!/usr/bin/env bash
# Set up (if needed), then roll out the embedded Engine suite (WorldMark's 15 action sequences on Engine scenes).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
OUT=${OUT:-runs/engine-worldmark}
.venv/bin/worldgate generate --model engine --suite worldmark-engine --out "$OUT" "$@"
echo "records in $OUT (one folder per case: video.mp4, poses.npy, trajectory.json, native/, meta.json)"
