"""import-linter contract types that check the package as Python assembles it, so that a bare ``lint-imports`` from the
checkout checks the real layers (pyproject.toml [tool.importlinter] names them; ``bash scripts/lint-imports.sh`` runs
the same).

The five root folders are mapped into ``worldgate.*`` by pyproject.toml's package-dir (no links in the tree).
import-linter puts the working folder first on sys.path, so from the checkout ``worldgate`` is the ./worldgate folder
alone, and grimp walks only that folder: the graph it hands a contract has no ``worldgate.evaluate``. These contracts
check the graph of the assembled package instead: copies of the .py files at their package paths in a temporary
folder (built once per run, shared by every contract), with the built-in contracts' own rules and reports.

Importable as ``scripts.lint_contracts`` from the checkout (``scripts`` is a folder without ``__init__.py``; it is
not part of the package).
"""

from __future__ import annotations

import importlib
import shutil
import sys
import tempfile
import tomllib
from pathlib import Path

import grimp
from importlinter.contracts.acyclic_siblings import AcyclicSiblingsContract
from importlinter.contracts.layers import LayersContract

ROOT = Path(__file__).resolve().parent.parent
_GRAPH: grimp.ImportGraph | None = None


def assemble(out: Path) -> None:
    """Copy every package's .py files to its package path under ``out`` (pyproject.toml's package-dir)."""
    setup = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    for package, folder in setup["package-dir"].items():
        dest = out.joinpath(*package.split("."))
        dest.mkdir(parents=True, exist_ok=True)
        for f in (ROOT / folder).glob("*.py"):
            shutil.copy2(f, dest / f.name)


def assembled_graph() -> grimp.ImportGraph:
    """The import graph of ``worldgate`` as assembled from package-dir (built once)."""
    global _GRAPH
    if _GRAPH is None:
        with tempfile.TemporaryDirectory() as tmp:
            assemble(Path(tmp))
            # find_spec answers from sys.modules first, then sys.path in order: the copy must be what it finds
            held = {k: sys.modules.pop(k) for k in list(sys.modules) if k == "worldgate" or k.startswith("worldgate.")}
            sys.path.insert(0, tmp)
            importlib.invalidate_caches()
            try:
                _GRAPH = grimp.build_graph("worldgate", cache_dir=None)
            finally:
                sys.path.remove(tmp)
                for k in [k for k in sys.modules if k == "worldgate" or k.startswith("worldgate.")]:
                    del sys.modules[k]
                sys.modules.update(held)
                importlib.invalidate_caches()
    return _GRAPH


class AssembledLayersContract(LayersContract):
    """``layers``, on the assembled package's graph."""

    def check(self, graph, verbose):
        return super().check(assembled_graph(), verbose)


class AssembledAcyclicSiblingsContract(AcyclicSiblingsContract):
    """``acyclic_siblings``, on the assembled package's graph."""

    def check(self, graph, verbose):
        return super().check(assembled_graph(), verbose)
