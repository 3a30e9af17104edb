"""The package is assembled from pyproject.toml alone: every folder of the five root packages that holds Python is a
listed package mapped to its own folder (a subpackage left out of ``packages`` is missing from the wheel, though the
editable install still finds it), and no link stands in the tree (tools read the files Python runs)."""

import os
import tomllib
from pathlib import Path

from testpaths import ROOT

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def folder_of(package: str) -> Path:
    """The folder setuptools builds ``package`` from: the longest package-dir prefix, then the rest of the name."""
    mapping = PYPROJECT["package-dir"]
    parts = package.split(".")
    for i in range(len(parts), 0, -1):
        head = ".".join(parts[:i])
        if head in mapping:
            return ROOT / mapping[head] / Path(*parts[i:])
    raise AssertionError(f"{package}: no package-dir entry maps it")


def test_every_python_folder_is_a_listed_package():
    listed = set(PYPROJECT["packages"])
    folders = {folder_of(p).resolve(): p for p in listed}
    for p, folder in ((p, folder_of(p)) for p in listed):
        assert folder.is_dir(), f"{p} is listed in pyproject.toml but {folder} is not a folder"
    for top in ("worldgate", *{v.split("/")[0] for v in PYPROJECT["package-dir"].values()}):
        for dirpath, dirnames, filenames in os.walk(ROOT / top):
            dirnames[:] = [d for d in dirnames if d != "__pycache__"]
            if any(f.endswith(".py") for f in filenames):
                assert Path(dirpath).resolve() in folders, (
                    f"{Path(dirpath).relative_to(ROOT)} holds Python but no package in pyproject.toml's packages "
                    f"maps to it: add it (and its package-dir entry if it is not under a mapped parent)")


def test_no_links_in_the_package_tree():
    links = [str(p.relative_to(ROOT)) for top in ("worldgate", "adapters", "evaluate", "generate", "trajectories",
                                                  "prompts")
             for p in (ROOT / top).rglob("*") if p.is_symlink()]
    assert not links, f"links in the package tree: {links}"
