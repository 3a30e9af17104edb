#!/usr/bin/env bash
# Set up (if needed) and run the whole test suite. pytest's "no tests collected" (exit 5) counts as a failure.
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh || exit 1
export HOME="${WORLDGATE_TEST_HOME:-$(mktemp -d)}"  # evo and friends write settings under HOME
export HF_HUB_OFFLINE=1  # tests never download: learned models are built from tiny configs
# one thread per worker for numba (the Engine), OpenMP (torch) and OpenBLAS: two workers already fill two cores, and
# their thread pools only wait for each other (the Engine-fault validation's rollouts: 18.2 -> 12.1 s of CPU each,
# and faster on the wall too); a caller's own values win
export NUMBA_NUM_THREADS="${NUMBA_NUM_THREADS:-1}" OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
export OPENBLAS_NUM_THREADS="${OPENBLAS_NUM_THREADS:-1}"
# both cores (pytest-xdist), whole files per worker (module fixtures built once), the longest files first in
# tests/conftest.py's order (--no-loadscope-reorder keeps it); WORLDGATE_TEST_WORKERS=0 runs in one process
.venv/bin/python -m pytest -q -n "${WORLDGATE_TEST_WORKERS:-2}" --dist loadfile --no-loadscope-reorder "$@"
rc=$?
if [ "$rc" -eq 5 ]; then echo "no tests were collected: failing" >&2; exit 1; fi
exit "$rc"
