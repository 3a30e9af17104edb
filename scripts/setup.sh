#!/usr/bin/env bash
# Make .venv with the pinned torch + torchvision pair that lies on this machine's disk (runs on CPU), then worldgate
# with its test extras.
# Idempotent: a second call only checks what is installed.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
# pin first: a bare `torch` requirement would pull a fresh multi-GB CUDA build (see ../shared/BACKENDS.md);
# this pair lies on disk and gives torchvision (RAFT) for the learned backend
.venv/bin/python -m pip install -q "torch==2.14.1" "torchvision==0.29.1"
.venv/bin/python -m pip install -q -e ".[test]"
