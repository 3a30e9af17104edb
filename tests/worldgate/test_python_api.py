"""The Python API (worldgate/api.py): every example of docs/python-api.md runs as written, in order, in an empty
folder (their asserts are the checks); ``import worldgate`` imports none of the API's modules; the subpackages
``worldgate.generate`` and ``worldgate.evaluate`` stay importable while being callable."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

import worldgate
from worldgate.api import as_overrides
from testpaths import ROOT

DOC = ROOT / "docs" / "python-api.md"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def test_examples_of_the_docs_run(tmp_path, monkeypatch, capsys):
    blocks = BLOCK.findall(DOC.read_text())
    assert len(blocks) == 6
    monkeypatch.chdir(tmp_path)
    ns: dict = {}
    for n, code in enumerate(blocks, 1):
        exec(compile(code, f"{DOC.name} block {n}", "exec"), ns)
    out = capsys.readouterr().out
    assert "['first-real-000_001'] {}" in out and "1 100.0 1" in out and "first-real-000_001 engine 100.0" in out
    assert isinstance(ns["results"], worldgate.api.Results) and (tmp_path / "runs" / "demo" / "results.json").is_file()


def test_import_worldgate_is_cheap_and_the_packages_still_import():
    code = ("import sys, worldgate; heavy = sorted(m for m in sys.modules if m.startswith('worldgate.') and m not in "
            "('worldgate.generate', 'worldgate.evaluate')); print(heavy); "
            "import worldgate.generate.runner as R, worldgate.evaluate.results; "
            "assert callable(worldgate.generate) and callable(worldgate.evaluate) and R.run_generate; "
            "assert worldgate.load_results.__module__ == 'worldgate.api'")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == "[]"


def test_overrides_take_a_mapping_or_a_list():
    assert as_overrides({"trajectory.seconds": 1, "suite.full": True}) == ["trajectory.seconds=1", "suite.full=true"]
    assert as_overrides(("model.width=64",)) == ["model.width=64"]
    with pytest.raises(TypeError, match="not the string"):
        as_overrides("model.width=64")
    with pytest.raises(ValueError, match="at most 256"):
        as_overrides([f"k{i}=1" for i in range(257)])
    assert "load_results" in dir(worldgate)
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        worldgate.nope  # noqa: B018
