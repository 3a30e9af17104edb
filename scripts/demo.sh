#!/usr/bin/env bash
# Set up (if needed), roll out the embedded Engine suite (WorldMark's 15 action sequences on Engine scenes), then
# score it on the WorldMark metrics and camera following (classical backend: CPU, no weights).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
OUT=${OUT:-runs/engine-worldmark}
.venv/bin/worldgate generate --model engine --suite worldmark-engine --out "$OUT" "$@"
.venv/bin/worldgate evaluate "$OUT"
.venv/bin/worldgate report "$OUT" --out "$OUT-report"
echo "records in $OUT (video.mp4, poses.npy, trajectory.json, native/, meta.json); scores in $OUT/results.json;"
echo "tables, plots and the side-by-side viewer in $OUT-report/ (open index.html)"
