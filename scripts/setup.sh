#!/usr/bin/env bash
# Make .venv with the pinned CPU torch that lies on this machine's disk, then worldgate with its test extras.
# Idempotent: a second call only checks what is installed.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
# pin first: a bare `torch` requirement would pull a fresh multi-GB CUDA build (see ../shared/BACKENDS.md)
.venv/bin/python -m pip install -q "torch==2.13.0"
.venv/bin/python -m pip install -q -e ".[test]"
