#!/usr/bin/env bash
# The layer contract and the no-cycle contract of pyproject.toml ([tool.importlinter]), checked by import-linter.
# The five root folders are mapped into worldgate.* (package-dir); worldgate/ carries a link to each of them, so
# import-linter (which walks the package's folder) sees the whole package from the editable install.
set -euo pipefail
cd "$(dirname "$0")/.."
.venv/bin/lint-imports
