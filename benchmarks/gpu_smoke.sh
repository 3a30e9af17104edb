#!/usr/bin/env bash
# A prepared GPU check (<= 8 minutes on one H200): SANA-WM's real pipeline at native size (704x1280) with random
# weights, and the learned WorldMark set with full-size random-weight models, each printing seconds per 20 s video
# and peak GPU memory. Nothing is downloaded (random weights from the published configs). Run from the repository
# root on a machine with a CUDA GPU, after `bash scripts/setup.sh`:
#     bash benchmarks/gpu_smoke.sh [OUT_DIR]
# Each part has its own time limit so one slow part cannot take the other's; results go to OUT_DIR (default
# runs/gpu-smoke) as JSON lines, and to stdout.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
OUT=${1:-runs/gpu-smoke}
mkdir -p "$OUT"
export HF_HUB_OFFLINE=1
"$PY" -c "import torch, sys; ok = torch.cuda.is_available(); print('[gpu-smoke]', torch.cuda.get_device_name(0) if ok else 'no CUDA GPU', 'torch', torch.__version__, 'cuda', torch.version.cuda); sys.exit(0 if ok else 1)" || exit 1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | sed 's/^/[gpu-smoke] /'
rc=0
echo "[gpu-smoke] 1/2 SANA-WM pipeline, 704x1280, 5 s planned (81 frames), 4 steps, bf16 (limit 200 s)"
timeout 200 "$PY" benchmarks/sana_wm_full.py --device cuda --seconds 5 --steps 4 --dtype bf16 \
  2> >(grep -v "should be kept in float32" >&2) | tee "$OUT/sana_wm.jsonl" || { echo "[gpu-smoke] SANA-WM part failed or ran out of time"; rc=1; }
echo "[gpu-smoke] 2/2 learned WorldMark set, full-size random-weight models, 480x832 and 704x1280 (limit 260 s)"
timeout 260 "$PY" benchmarks/learned_speed.py --full --device cuda --sizes 480x832,704x1280 \
  | tee "$OUT/learned_speed.txt" || { echo "[gpu-smoke] learned part failed or ran out of time"; rc=1; }
echo "[gpu-smoke] done (rc=$rc): $OUT"
exit $rc
