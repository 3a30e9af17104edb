"""`worldgate list ...` fits 100 columns by default (issue 28: `worldgate list models | awk '{ print length }' | sort
-n | tail -1` <= 100), `--wide` is the full table, `--json` holds every registered entry."""

import json

import pytest

from worldgate.adapters import get_info, list_models
from worldgate.cli import main
from worldgate.evaluate.metrics import metric_info
from worldgate.listing import fit
from worldgate.trajectories.library import describe
from worldgate.trajectories.suites import SUITES

LISTS = ["models", "suites", "trajectories", "metrics"]


def _out(capsys, *argv) -> str:
    assert main(["list", *argv]) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("what", LISTS)
def test_every_list_fits_100_columns_and_its_json_holds_every_entry(what, capsys):
    text = _out(capsys, what)
    lines = text.splitlines()
    assert max(len(ln.encode()) for ln in lines) <= 100  # bytes, as awk's length counts them
    expected = {"models": list_models(), "suites": SUITES.names(), "trajectories": [n for n, _ in describe()],
                "metrics": list(metric_info())}[what]
    first = [ln.split("  ")[0].strip() for ln in lines[2:2 + len(expected)]]
    assert first == expected  # one row per registered entry, in the registry's order
    rows = json.loads(_out(capsys, what, "--json"))
    key = {"models": "name", "suites": "suite", "trajectories": "name", "metrics": "metric"}[what]
    assert [r[key] for r in rows] == expected


def test_models_default_columns_wide_and_json_fields(capsys):
    lines = _out(capsys, "models").splitlines()
    assert lines[0].split() == ["name", "size", "fps", "control", "level", "licence"]
    row = next(ln for ln in lines if ln.startswith("engine "))
    assert row.split()[:4] == ["engine", "256x256", "16", "poses"] and "engine" in row.split()[4:]
    wide = _out(capsys, "models", "--wide").splitlines()
    assert "K regime" in wide[0] and "hf ids" in wide[0] and max(map(len, wide)) > 100  # today's full table, uncut
    models = json.loads(_out(capsys, "models", "--json"))
    assert models[list_models().index("engine")] == json.loads(json.dumps(get_info("engine").to_dict()))


def test_fit_cuts_the_widest_columns_with_an_ellipsis():
    rows = [["a", "x" * 80, "y" * 40], ["bb", "short", "z"]]
    lines = fit(["id", "first", "second"], rows, width=60)
    assert max(map(len, lines)) == 60
    assert lines[2] == "a   " + "x" * 24 + "...  " + "y" * 24 + "..."  # 2 + 2 + 27 + 2 + 27
    assert lines[3].split() == ["bb", "short", "z"]
    assert fit(["id", "first"], [["a", "b"]], width=60) == ["id  first", "--  -----", "a   b"]
    with pytest.raises(SystemExit):
        main(["list", "models", "--wide", "--json"])  # one or the other
