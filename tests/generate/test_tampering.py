"""Hostile inputs and tampered records: the feature cache is keyed by every input an extractor reads, a record whose
files changed after writing (or whose pose count is not its frame count) is an error entry, and a meta.json or a
record file that is a JSON list, not UTF-8, a link to /dev/zero or a FIFO never aborts or hangs evaluate or resume.

Everything that could hang on a regression runs in a subprocess with a timeout."""

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from worldgate.evaluate.features import FeatureCache, inputs_digest, open_record
from worldgate.evaluate.runner import evaluate_run, extractors_for
from worldgate.generate.records import list_records
from worldgate.generate.runner import run_generate

SMALL = ["model.width=64", "model.height=64", "trajectory.seconds=6"]
TIMEOUT = 90  # a hang fails the test instead of stalling the suite

needs_fifo = pytest.mark.skipif(not hasattr(os, "mkfifo") or not os.path.exists("/dev/zero"),
                                reason="needs FIFOs and /dev/zero (POSIX)")


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """A real Engine run of two records (A, B): 64x64, 6 s, 96 frames each."""
    out = tmp_path_factory.mktemp("tamper") / "run"
    res = run_generate("engine", "worldmark-engine", out, limit=2, overrides=SMALL, progress=False)
    assert res.exit_code == 0 and not res.failed
    recs = list_records(out)
    assert len(recs) == 2
    return out, recs[0], recs[1]


def _run_with(tmp_path: Path, records: dict[str, Path]) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    for name, src in records.items():
        shutil.copytree(src, run / name)
    return run


def _rows(run: Path) -> dict[str, dict]:
    return {r["case"]: r for r in map(json.loads, (run / "samples.jsonl").read_text().splitlines())}


def _py(code: str, *args: str, timeout: int = TIMEOUT) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter (sys.argv[1:] = args); a hang is a test failure, not a stalled suite."""
    try:
        return subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], capture_output=True, text=True,
                              timeout=timeout, env=dict(os.environ, PYTHONUNBUFFERED="1"))
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"hung for {timeout} s: {e.stdout!r} {e.stderr!r}")


# ------------------------------------------------------------------------------- 1. the cache covers every input
def test_a_copy_with_other_intrinsics_is_not_served_the_originals_features(base, tmp_path):
    _, a, _ = base
    run = _run_with(tmp_path, {"orig": a})
    n_ex = len(extractors_for("classical"))
    first = evaluate_run(run, progress=False)
    assert first["features"] == {"computed": n_ex, "cached": 0} and not first["errors"]
    alone = _rows(run)["orig"]["scores"]

    shutil.copytree(a, run / "wide")  # the same video, poses and trajectory; three times the focal length
    meta = json.loads((run / "wide" / "meta.json").read_text())
    meta["intrinsics"]["native"][0] *= 3
    (run / "wide" / "meta.json").write_text(json.dumps(meta))

    second = evaluate_run(run, progress=False)
    assert not second["errors"]
    assert second["features"] == {"computed": n_ex, "cached": n_ex}  # the copy's recomputed, the original's cached
    rows = _rows(run)
    assert rows["orig"]["video_sha256"] == rows["wide"]["video_sha256"]
    # the copy is measured with its own focal length: its pose feature differs (it was served the original's)
    po, pw = (np.load(sorted((run / ".features").glob("*/poses@*.npz"))[k]) for k in (0, 1))
    assert not np.allclose(po["t"], pw["t"]) or not np.allclose(po["R"], pw["R"])
    assert rows["orig"]["scores"] == alone  # the original scores as it did alone
    keys = {p.parent.name for p in (run / ".features").glob("*/*.npz")}
    assert len(keys) == 2
    for d in (run / ".features").iterdir():
        info = json.loads((d / "record.json").read_text())
        assert info["inputs_sha256"].startswith(d.name) and info["video_sha256"] == rows["orig"]["video_sha256"]

    # --rescore reads the same keys: served whole from the cache, identical scores
    before = (run / "samples.jsonl").read_text()
    again = evaluate_run(run, progress=False, rescore=True)
    assert again["features"] == {"computed": 0, "cached": 2 * n_ex} and not again["errors"]
    assert (run / "samples.jsonl").read_text() == before


def test_the_digest_changes_with_each_input(base, tmp_path):
    _, a, _ = base
    rec = open_record(a)
    d0 = rec.input_digest
    assert d0 and d0 == inputs_digest(open_record(a))  # deterministic
    assert FeatureCache(tmp_path).path(rec, extractors_for("classical")[0]).parent.name == d0[:20]
    changes = [
        lambda r: r.poses.__setitem__((1, 0, 3), r.poses[1, 0, 3] + 1e-3),
        lambda r: r.trajectory["segments"][0].__setitem__("seconds", 99),
        lambda r: r.meta["intrinsics"]["native"].__setitem__(1, 1.0),
        lambda r: r.meta["requested"].__setitem__("width", 128),
        lambda r: setattr(r, "fps", 8.0),
        lambda r: setattr(r, "content_hash", "0" * 64),
    ]
    for change in changes:
        r = open_record(a)
        change(r)
        r.input_digest = ""
        assert inputs_digest(r) != d0
    copy = tmp_path / "rec"
    shutil.copytree(a, copy)
    (copy / "targets.npz").write_bytes(b"")  # a targets file the extractors would read, not recorded: refused
    with pytest.raises(Exception, match="targets.npz is not one of the files meta.json records"):
        open_record(copy)


# --------------------------------------------------------------------- 2. checked against meta.json, never silent
def test_swapped_video_and_short_or_edited_poses_are_error_entries(base, tmp_path):
    _, a, b = base
    run = _run_with(tmp_path, {"good": a, "swapped": a, "short": a, "edited": a, "edited-traj": a})
    shutil.copyfile(b / "video.mp4", run / "swapped" / "video.mp4")  # same size, fps and frames: another rollout
    P = np.load(a / "poses.npy")
    np.save(run / "short" / "poses.npy", P[:5])
    P2 = P.copy()
    P2[10:, 0, 3] += 0.05
    np.save(run / "edited" / "poses.npy", P2)
    tj = json.loads((a / "trajectory.json").read_text())
    tj["segments"][0]["move"] = "S"
    (run / "edited-traj" / "trajectory.json").write_text(json.dumps(tj))

    r = evaluate_run(run, progress=False)
    err = r["errors"]
    assert set(err) == {"swapped", "short", "edited", "edited-traj"}, err
    assert "video.mp4 changed after the record was written" in err["swapped"] and "regenerate" in err["swapped"]
    assert "poses.npy holds 5 commanded poses" in err["short"] and f"{len(P)} achieved frames" in err["short"]
    assert "poses.npy changed after the record was written" in err["edited"]
    assert "trajectory.json changed after the record was written" in err["edited-traj"]
    rows = _rows(run)
    assert rows["good"]["scores"]["direction_accuracy_trans"] is not None and "error" not in rows["good"]
    for case, msg in err.items():
        assert rows[case]["error"] == msg and "scores" not in rows[case]
    saved = json.loads((run / "results.json").read_text())
    assert saved["errors"] == err and saved["records"] == 5
    assert saved["metrics"]["direction_accuracy_trans"]["unavailable"] == {"record error": 4}
    # a rescore checks them as well (before any cache look-up)
    assert evaluate_run(run, progress=False, rescore=True)["errors"] == err


# ------------------------------------------------------------------- 3. hostile files never abort or hang a run
def _hostile_run(tmp_path: Path, a: Path) -> Path:
    names = ["good", "meta-list", "meta-latin1", "meta-zero", "meta-fifo", "meta-huge", "video-fifo", "video-zero",
             "poses-link", "traj-fifo", "dyn-fifo"]
    run = _run_with(tmp_path, {n: a for n in names})
    meta = json.loads((a / "meta.json").read_text())
    (run / "meta-list" / "meta.json").write_text(json.dumps([meta]))
    with open(run / "meta-huge" / "meta.json", "w") as f:  # valid JSON, beyond the 16 MiB any meta.json needs
        f.write(" " * (17 << 20) + json.dumps(meta))
    (run / "meta-latin1" / "meta.json").write_bytes(json.dumps(dict(meta, prompt="caf\u00e9 cr\u00e8me"),
                                                               ensure_ascii=False).encode("latin-1"))
    for case, name in (("meta-zero", "meta.json"), ("video-zero", "video.mp4")):
        (run / case / name).unlink()
        os.symlink("/dev/zero", run / case / name)
    for case, name in (("meta-fifo", "meta.json"), ("video-fifo", "video.mp4"), ("traj-fifo", "trajectory.json"),
                       ("dyn-fifo", "dynamic.json")):
        (run / case / name).unlink(missing_ok=True)
        os.mkfifo(run / case / name)
    (run / "poses-link" / "poses.npy").unlink()
    os.symlink(run / "good" / "poses.npy", run / "poses-link" / "poses.npy")  # a link even to a good file is refused
    os.symlink(run / "good", run / "folder-link")  # a record folder that is a link is never read through
    return run


@needs_fifo
def test_hostile_record_files_get_error_entries_and_never_hang(base, tmp_path):
    _, a, _ = base
    run = _hostile_run(tmp_path, a)
    p = _py("""
        import json, sys
        from pathlib import Path
        from worldgate.evaluate.runner import evaluate_run
        from worldgate.generate.records import candidate_records, is_complete, list_records, read_meta
        run = Path(sys.argv[1])
        r = evaluate_run(run, progress=False)
        print(json.dumps({"errors": r["errors"], "list": [p.name for p in list_records(run)],
                          "candidates": [p.name for p in candidate_records(run)],
                          "complete": {p.name: is_complete(p) for p in run.iterdir() if not p.name.startswith(".")
                                       and p.is_dir()},
                          "meta": {p.name: read_meta(p) is not None for p in run.iterdir() if p.is_dir()}}))
        """, str(run))
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout.strip().splitlines()[-1])
    err = out["errors"]
    bad = {"meta-list", "meta-latin1", "meta-zero", "meta-fifo", "meta-huge", "video-fifo", "video-zero", "poses-link",
           "traj-fifo", "dyn-fifo", "folder-link"}
    assert set(err) == bad, err
    assert "JSON list" in err["meta-list"]
    assert "not UTF-8" in err["meta-latin1"]
    assert "meta.json is a symbolic link" in err["meta-zero"]
    assert "meta.json is a FIFO" in err["meta-fifo"]
    assert "meta.json is larger than 16 MiB" in err["meta-huge"]
    assert "video.mp4 is a FIFO" in err["video-fifo"]
    assert "video.mp4 is a symbolic link" in err["video-zero"]
    assert "poses.npy is a symbolic link" in err["poses-link"]
    assert "trajectory.json is a FIFO" in err["traj-fifo"]
    assert "dynamic.json is a FIFO" in err["dyn-fifo"]
    assert "record folder is a symbolic link" in err["folder-link"]
    for case, msg in err.items():
        assert msg.startswith(f"{case}: ")
    rows = _rows(run)
    assert rows["good"]["scores"]["direction_accuracy_trans"] is not None
    assert set(rows) == bad | {"good"}
    assert json.loads((run / "results.json").read_text())["errors"] == err
    # the readers of the record format: nothing followed through a link, no FIFO or device opened
    assert "folder-link" not in out["list"] and not out["complete"]["folder-link"] and not out["meta"]["folder-link"]
    assert {"meta-list", "meta-latin1", "meta-zero", "meta-fifo", "meta-huge", "video-fifo",
            "video-zero"}.isdisjoint(out["list"])
    assert "good" in out["list"] and set(out["candidates"]) == bad | {"good"}


@needs_fifo
def test_resume_over_hostile_meta_json_rewrites_those_records(base, tmp_path):
    out, a, b = base
    run = tmp_path / "run"
    shutil.copytree(out, run, ignore=shutil.ignore_patterns(".features", "results.json", "samples.jsonl"))
    (run / a.name / "meta.json").unlink()
    os.mkfifo(run / a.name / "meta.json")
    (run / b.name / "meta.json").unlink()
    os.symlink("/dev/zero", run / b.name / "meta.json")
    p = _py("""
        import json, sys
        from worldgate.generate.runner import run_generate
        r = run_generate("engine", "worldmark-engine", sys.argv[1], limit=2, overrides=sys.argv[2:], progress=False)
        print(json.dumps({"code": r.exit_code, "done": sorted(r.done), "skipped": r.skipped, "failed": r.failed}))
        """, str(run), *SMALL)
    assert p.returncode == 0, p.stderr
    res = json.loads(p.stdout.strip().splitlines()[-1])
    assert res["code"] == 0 and res["done"] == sorted([a.name, b.name]) and not res["failed"], res
    assert sorted(x.name for x in list_records(run)) == sorted([a.name, b.name])
    for name in (a.name, b.name):
        m = run / name / "meta.json"
        assert m.is_file() and not m.is_symlink() and json.loads(m.read_text())["complete"]


# --- run-level files, tampered meta values, unsigned records, the cache key's case tags -----------------------------

@needs_fifo
def test_run_json_fifo_or_dev_zero_never_hangs_evaluate(base, tmp_path):
    """run.json beside the records: a FIFO or a link to /dev/zero hung evaluate (read without end); it is recorded
    as unreadable, and the records are scored."""
    _, a, _ = base
    runs = []
    for kind in ("fifo", "zero", "bytes"):
        (tmp_path / kind).mkdir()
        run = _run_with(tmp_path / kind, {"A": a})
        if kind == "fifo":
            os.mkfifo(run / "run.json")
        elif kind == "zero":
            os.symlink("/dev/zero", run / "run.json")
        else:
            (run / "run.json").write_bytes(b"\xff\xfe{")
        runs.append(str(run))
    r = _py("""
        import json, sys
        from worldgate.evaluate.runner import evaluate_run
        for run in sys.argv[1:]:  # one interpreter for the three: a hang on any of them is a timeout
            res = evaluate_run(run, metrics={"direction_accuracy_trans"}, progress=False)
            print(json.dumps(res["config"]["run_config"]))
    """, *runs)
    assert r.returncode == 0, r.stderr
    cfgs = [json.loads(x) for x in r.stdout.strip().splitlines()[-3:]]
    assert len(cfgs) == 3 and all("run.json" in c["unreadable"] for c in cfgs), cfgs


def test_tampered_meta_values_are_one_line_errors(base, tmp_path):
    """case / case.tags / adapter of the wrong JSON type, and native intrinsics that are zero, NaN or absurd, are
    error entries naming the field (they raised AttributeError / LinAlgError, or were scored silently)."""
    _, a, _ = base
    edits = {
        "tags-list": lambda m: m["case"].__setitem__("tags", [1]),
        "case-str": lambda m: m.__setitem__("case", "x"),
        "adapter-list": lambda m: m.__setitem__("adapter", [1]),
        "k-zero": lambda m: m["intrinsics"].__setitem__("native", [0, 0, 0, 0]),
        "k-huge": lambda m: m["intrinsics"].__setitem__("native", [-1e308, 1e308, 5, 5]),
    }
    run = _run_with(tmp_path, {name: a for name in edits})
    for name, edit in edits.items():
        meta = json.loads((run / name / "meta.json").read_text())
        edit(meta)
        (run / name / "meta.json").write_text(json.dumps(meta))
    evaluate_run(run, metrics={"direction_accuracy_trans"}, progress=False)
    rows = _rows(run)
    want = {"tags-list": "case.tags is a JSON list", "case-str": "'case' is a JSON str",
            "adapter-list": "'adapter' is a JSON list", "k-zero": "focal lengths", "k-huge": "focal lengths"}
    for name, text in want.items():
        assert text in rows[name].get("error", ""), (name, rows[name])
        assert "Error:" not in rows[name]["error"].split(":", 1)[1][:40]  # not a bare exception type


def test_a_record_without_file_hashes_is_scored_with_a_caveat(base, tmp_path):
    _, a, _ = base
    run = _run_with(tmp_path, {"A": a})
    meta = json.loads((run / "A" / "meta.json").read_text())
    del meta["files"]
    (run / "A" / "meta.json").write_text(json.dumps(meta))
    res = evaluate_run(run, metrics={"direction_accuracy_trans"}, progress=False)
    assert "no file hashes" in _rows(run)["A"]["caveats"][0]
    assert "no file hashes" in res["caveats"]["A"][0]


def test_cache_key_covers_the_case_tags(base):
    """The WorldMemBench family decides whether camera poses run (AdjacentPoseExtractor, DA3CameraPoses): a record
    whose tags changed was served the other family's cached poses."""
    _, a, _ = base
    rec = open_record(a)
    d0 = inputs_digest(rec)
    rec.meta["case"]["tags"] = dict(rec.meta["case"].get("tags") or {}, family="environment")
    assert inputs_digest(rec) != d0


def test_evaluate_of_a_folder_of_links_writes_nothing(tmp_path):
    """`evaluate /` wrote /results.json: /bin -> usr/bin counted as a (refused) record."""
    d = tmp_path / "d"
    d.mkdir()
    os.symlink("/usr", d / "x")
    with pytest.raises(FileNotFoundError, match="only links to folders"):
        evaluate_run(d, progress=False)
    assert not (d / "results.json").exists() and not (d / "samples.jsonl").exists()
