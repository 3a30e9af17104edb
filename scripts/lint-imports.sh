#!/usr/bin/env bash
# The layer contract and the no-cycle contract of pyproject.toml ([tool.importlinter]), checked by import-linter.
# The five root folders are mapped into worldgate.* (package-dir), which import-linter cannot follow through an
# editable install, so it reads a plain (non-editable) build of the package in a temporary folder.
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
.venv/bin/python -m pip install -q --no-deps --no-build-isolation --target "$tmp/site" . >"$tmp/pip.log" 2>&1 \
  || { cat "$tmp/pip.log" >&2; exit 1; }
cp pyproject.toml "$tmp/"
cd "$tmp" && PYTHONPATH="$tmp/site" "$OLDPWD/.venv/bin/lint-imports" pyproject.toml
