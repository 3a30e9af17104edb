#!/usr/bin/env bash
# The layer contract and the no-cycle contract of pyproject.toml ([tool.importlinter]), checked by import-linter.
# The five root folders are mapped into worldgate.* by pyproject.toml's package-dir (no links in the tree);
# import-linter walks one package folder, so the package is assembled as Python sees it in a temporary folder
# (copies of the .py files at their package paths) and checked there.
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
.venv/bin/python - "$tmp" <<'PY'
import shutil, sys, tomllib
from pathlib import Path
out = Path(sys.argv[1])
setup = tomllib.loads(Path("pyproject.toml").read_text())["tool"]["setuptools"]
for package, folder in setup["package-dir"].items():
    dest = out.joinpath(*package.split("."))
    dest.mkdir(parents=True, exist_ok=True)
    for f in Path(folder).glob("*.py"):
        shutil.copy2(f, dest / f.name)
PY
# from the assembled folder: import-linter puts the working folder first on sys.path
root=$PWD
(cd "$tmp" && PYTHONPATH="$tmp" "$root/.venv/bin/lint-imports" --config "$root/pyproject.toml")
