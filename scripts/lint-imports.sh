#!/usr/bin/env bash
# The layer contract and the no-cycle contract of pyproject.toml ([tool.importlinter]), checked by import-linter on
# the package as Python assembles it from package-dir (scripts/lint_contracts.py); the same as a bare `lint-imports`
# run from the checkout.
set -euo pipefail
cd "$(dirname "$0")/.."
.venv/bin/lint-imports --no-logo
