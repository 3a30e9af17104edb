"""The import-linter contracts check the package as Python assembles it: their graph holds every listed package (so
the layers contract cannot pass on a graph that lacks a layer) and the imports between the mapped folders."""

import importlib.util
import tomllib

import pytest
from testpaths import ROOT

pytest.importorskip("importlinter")


def _lint_contracts():
    spec = importlib.util.spec_from_file_location("lint_contracts", ROOT / "scripts" / "lint_contracts.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_contracts_graph_is_the_assembled_package():
    graph = _lint_contracts().assembled_graph()
    setup = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    python = {p for p in setup["packages"] if p in setup["package-dir"] and (ROOT / setup["package-dir"][p] /
                                                                            "__init__.py").exists()}
    assert len(python) >= 10 and python <= graph.modules  # (prompt folders of text only are no modules)
    assert "worldgate.evaluate.metrics" in graph.modules and "worldgate.adapters.engine.render" in graph.modules
    # an import across mapped folders is an edge (evaluate reads records through generate)
    assert any(m.startswith("worldgate.generate") for m in graph.find_modules_directly_imported_by(
        "worldgate.evaluate.runner"))
