#!/usr/bin/env bash
# Make .venv with the pinned torch + torchvision pair that lies on this machine's disk (runs on CPU), then worldgate
# with its test extras. Prints one line per step; pip's own output goes to .venv/setup.log (shown when a step fails).
# Idempotent: a second call only checks what is installed.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || { echo "[setup] creating .venv"; "$PY" -m venv .venv; }
LOG=.venv/setup.log
: > "$LOG"
step() {  # step "what" cmd...: run quietly, show the log's tail if it fails
  local what=$1; shift
  echo "[setup] $what"
  if ! "$@" >>"$LOG" 2>&1; then
    echo "[setup] failed: $what; the last lines of $LOG:" >&2
    tail -n 40 "$LOG" >&2
    exit 1
  fi
}
step "pip" .venv/bin/python -m pip install -q --upgrade pip
# pin first: a bare `torch` requirement would pull a fresh multi-GB CUDA build (see docs/architecture.md);
# this pair lies on disk and gives torchvision (RAFT) for the learned backend
step "torch 2.14.1 + torchvision 0.29.1 (pinned; ~80 s the first time)" \
  .venv/bin/python -m pip install -q "torch==2.14.1" "torchvision==0.29.1"
step "worldgate and its test extras (${WORLDGATE_EXTRAS:-test})" \
  .venv/bin/python -m pip install -q -e ".[${WORLDGATE_EXTRAS:-test}]"
echo "[setup] done (.venv; details in $LOG)"
