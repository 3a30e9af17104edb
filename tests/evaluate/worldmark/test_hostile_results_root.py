"""A WorldMark results root taken as a typed, bounded schema (issue 29, item 3; evaluate/worldmark/results_schema.py):
wrong types, model names that are lists or numbers, integers of hundreds of digits, a negative error, NaN and 1e300,
a flow file that is not an object, a results folder that is a link: each refused with one line naming the file and
the field, never an internal error and never scored without a note; plus a property test over arbitrary JSON values
in every field the importer reads."""

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from worldgate.cli import main
from worldgate.evaluate.worldmark.imported import import_worldmark_results
from worldgate.evaluate.worldmark.master import MasterConfig, master_rows
from worldgate.evaluate.worldmark.results_schema import ResultsRootError, read_checked_tree
from worldgate.generate.interop import InteropError

SFX = "_real_first"
KEY = "ENGINE__000_001"


def _tree():
    """A small, valid results root's files: {relative path: JSON value}."""
    seg = {"seg": 0, "key": "W", "family": "fwd", "dir": 0.8, "dir_gated": 0.8, "purity": 0.9, "score": 0.7}
    return {
        f"results_flow{SFX}/{KEY}.json": {"model": "ENGINE", "stem": "000_001", "action": 1,
                                          "M1": [dict(seg)], "M2": [dict(seg)], "M3": [dict(seg, new="W")],
                                          "M4": [dict(seg)]},
        f"results_consistency{SFX}/c1c2_v2_c1new_shard0of1.json": {
            KEY: {"model": "ENGINE", "stem": "000_001", "C1": {"pmean_dists": [0.05, 0.2], "idx": [0, 8, 16],
                                                                "hard_cut": False, "cut_frames": []}}},
        f"results_consistency{SFX}/c1c2_v2_c2fix_shard0of1.json": {
            KEY: {"model": "ENGINE", "stem": "000_001", "action": 1, "C2": {"na_scope": True}}},
        f"results_c3_vggt{SFX}/omega_c3_1s_shard0of1.json": {KEY: {"model": "ENGINE", "global_median_e": 0.05}},
        f"results_quality{SFX}/qalign_shard0of1.json": {
            KEY: {"model": "ENGINE", "qalign_quality": 3.0, "qalign_aesthetic": 2.0}},
    }


def _write(root, files, raw=None):
    for rel, v in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text((raw or {}).get(rel) or json.dumps(v))
    (root / f"results_flow{SFX}" / "cache").mkdir(exist_ok=True)
    return root


FLOW, C1, C2, C3, QA = list(_tree())
# (file, path of the field, hostile value or raw JSON text, words the one line must hold)
HOSTILE = [
    (FLOW, ("model",), ["ENGINE"], '"model" is a JSON list, not a string'),
    (FLOW, ("model",), 7, '"model" is a JSON integer, not a string'),
    (FLOW, ("stem",), None, '"stem" is a JSON null, not a string'),
    (FLOW, ("action",), "1" + "0" * 300, '"action" is an integer of 301 digits'),  # a 301-digit integer (raw JSON)
    (FLOW, ("M1", 0, "dir"), "NaN", '"M1"[0]."dir" nan is not a finite number (got NaN)'),
    (FLOW, ("M2", 0, "purity"), 1.5, '"M2"[0]."purity" is 1.5, above its range\'s 1.0'),
    (FLOW, ("M1",), {"a": 1}, '"M1" is a JSON object, not a list'),
    (C1, (KEY, "C1", "pmean_dists", 1), "x", '"pmean_dists"[1] is a JSON string, not a number'),
    (C2, (KEY, "C2"), {"C2": -3}, '"C2"."C2" is -3, below its range\'s 0.0'),
    (C2, (KEY, "C2"), {"type": "x"}, "holds no C2 value"),
    (C3, (KEY, "global_median_e"), -0.5, '"global_median_e" is -0.5, below its range\'s 0.0'),
    (C3, (KEY, "global_median_e"), 1e300, '"global_median_e" is 1e+300, above its range\'s 1000000.0'),
    (C3, (KEY, "global_median_e"), "Infinity", '"global_median_e" inf is not a finite number (got Infinity)'),
    (QA, (KEY, "qalign_quality"), "12" * 200, '"qalign_quality" is an integer of 400 digits, out of range'),
    (QA, (KEY,), 5, f'"{KEY}" is a JSON integer, not an object'),
    (FLOW, (), [1, 2], "a JSON list, not an object (one video's flow record)"),
    (C3, (), "oops", "a JSON str, not an object of entries"),
]


def _put(value, path, v):
    for k in path[:-1]:
        value = value[k]
    value[path[-1]] = v


@pytest.mark.parametrize("rel,path,bad,words", HOSTILE, ids=[f"{p[-1] if p else 'file'}={str(b)[:12]}"
                                                               for _, p, b, _ in HOSTILE])
def test_each_hostile_value_is_one_line_naming_file_and_field(tmp_path, capsys, rel, path, bad, words):
    files = _tree()
    raw = None
    marker = "__HOSTILE__"
    if path:
        _put(files[rel], path, marker)
        raw = {rel: json.dumps(files[rel]).replace(json.dumps(marker), bad if isinstance(bad, str) and (
            bad in ("NaN", "Infinity") or bad.isdigit()) else json.dumps(bad))}
    else:
        files[rel] = bad
    root = _write(tmp_path / "results", files, raw)
    with pytest.raises(ResultsRootError) as e:
        import_worldmark_results(root, tmp_path / "out")
    line = next(ln for ln in str(e.value).splitlines() if words in ln)
    assert line.startswith(str(root / rel) + ":") or line.startswith(f"results root file {root / rel}"), line
    assert not (tmp_path / "out").exists()  # refused before anything is written
    assert main(["import", str(root), "--out", str(tmp_path / "out2")]) == 2
    err = capsys.readouterr().err
    assert words in err and "internal error" not in err and "Traceback" not in err


def test_a_valid_root_imports_its_values(tmp_path):
    root = _write(tmp_path / "results", _tree())
    res = import_worldmark_results(root, tmp_path / "out")
    got = json.loads((res.runs["ENGINE"] / "results.json").read_text())
    row = got["worldmark"]["splits"][SFX]
    assert row["Global"] == pytest.approx(100 / (1 + 0.05 / MasterConfig().tau_g))
    assert row["QA_q"] == pytest.approx(50.0) and row["QA_a"] == pytest.approx(25.0) and row["Rev"] is None
    assert row["MP_t"] == pytest.approx(90.0)


@pytest.mark.parametrize("folder", [f"results_consistency{SFX}", f"results_flow{SFX}/cache", f"results_quality{SFX}",
                                    f"results_flow{SFX}"])
def test_a_results_folder_that_is_a_link_is_refused(tmp_path, folder):
    root = _write(tmp_path / "results", _tree())
    outside = tmp_path / "elsewhere"
    (root / folder).rename(outside)
    (root / folder).symlink_to(outside, target_is_directory=True)
    with pytest.raises(ResultsRootError, match=r"is a symbolic link .*never followed out of the root"):
        import_worldmark_results(root, tmp_path / "out")


# ------------------------------------------------------------------------------------------------- properties
JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
                    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=4), c, max_size=3),
                    max_leaves=8)
FIELDS = [(FLOW, ("model",)), (FLOW, ("stem",)), (FLOW, ("action",)), (FLOW, ("M1",)), (FLOW, ("M1", 0)),
          (FLOW, ("M1", 0, "dir")), (FLOW, ("M2", 0, "purity")), (FLOW, ("M2", 0, "family")),
          (FLOW, ("M3", 0, "score")), (FLOW, ("M4", 0, "key")), (C1, (KEY,)), (C1, (KEY, "C1")),
          (C1, (KEY, "C1", "pmean_dists")), (C1, (KEY, "C1", "idx")), (C1, (KEY, "C1", "cut_frames")),
          (C1, (KEY, "C1", "hard_cut")), (C2, (KEY, "action")), (C2, (KEY, "C2")), (C2, (KEY, "C2", "na_scope")),
          (C3, (KEY, "global_median_e")), (C3, (KEY, "model")), (QA, (KEY, "qalign_quality")),
          (QA, (KEY, "qalign_aesthetic")), (QA, (KEY, "model")), (FLOW, ()), (C2, ())]


@pytest.fixture(scope="module")
def fuzz_root(tmp_path_factory):
    return _write(tmp_path_factory.mktemp("fuzz") / "results", _tree())


@settings(max_examples=1000, derandomize=True, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(range(len(FIELDS))), JSON), min_size=1, max_size=3))
def test_any_json_in_any_field_is_checked_or_refused_never_an_internal_error(fuzz_root, edits):
    files, valid = _tree(), _tree()
    for i, v in edits:
        rel, path = FIELDS[i]
        try:
            if path:
                _put(files[rel], path, v)
            else:
                files[rel] = v
        except (KeyError, IndexError, TypeError):  # an earlier edit replaced the field's parent
            pass
    changed = {rel: v for rel, v in files.items() if v != valid[rel] or json.dumps(v) != json.dumps(valid[rel])}
    root = _write(fuzz_root, changed)  # only the edited files (the folder holds the valid tree)
    try:
        flow, c1, c2, c3, qa = read_checked_tree(root, SFX)
        master_rows(flow, c1, c2, c3, qa)  # what was accepted is what final_master can compute on
    except ResultsRootError as e:
        assert all(ln.startswith((str(root), "results root file", "... and", "(the results root"))
                   for ln in str(e).splitlines()), str(e)
    except InteropError:
        pass
    finally:
        _write(fuzz_root, {rel: valid[rel] for rel in changed})
