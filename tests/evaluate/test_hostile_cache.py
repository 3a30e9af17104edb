"""The feature cache has integrity (issue 29, item 1): an edited, damaged, foreign or linked cache file is a miss that
is recomputed and said once, never a served value and never a permanent error; nothing under ``.features`` is followed
through a link, and every write is atomic."""

import json
import os
import shutil
from types import SimpleNamespace

import numpy as np
import pytest

from worldgate.evaluate.cache import DIGEST_KEY, FeatureCache, content_digest
from worldgate.evaluate.runner import evaluate_run
from worldgate.generate.runner import run_generate

QUICK = ["model.width=64", "model.height=64", "model.threads=1", "trajectory.seconds=1"]
DATA = {"sx": np.linspace(-1, 1, 9), "srad": np.arange(9, dtype=np.float32).reshape(3, 3), "gap": np.array(2)}


def _rec(tmp_path, digest="ab" * 32):
    return SimpleNamespace(input_digest=digest, dir=tmp_path / "rec", content_hash="cd" * 32)


EX = SimpleNamespace(key=lambda: "flow@4-classical")


def _same(a, b):
    return a is not None and sorted(a) == sorted(b) and all(np.array_equal(a[k], b[k]) for k in b)


@pytest.fixture
def cache(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    return FeatureCache(run / ".features")


def test_round_trip_carries_a_digest_and_leaves_no_temporary(cache, tmp_path):
    rec = _rec(tmp_path)
    cache.put(rec, EX, DATA)
    p = cache.path(rec, EX)
    assert _same(cache.get(rec, EX), DATA) and cache.misses == []
    with np.load(p) as z:
        assert str(z[DIGEST_KEY]) == content_digest(rec.input_digest, EX.key(), DATA)
    assert sorted(os.listdir(p.parent)) == ["flow@4-classical.npz", "record.json"]
    assert json.loads((p.parent / "record.json").read_text())["inputs_sha256"] == rec.input_digest


def test_an_edited_value_is_a_miss_said_once_then_recomputed(cache, tmp_path):
    rec = _rec(tmp_path)
    cache.put(rec, EX, DATA)
    p = cache.path(rec, EX)
    with np.load(p) as z:
        edited = {k: z[k] for k in z.files}
    edited["sx"] = edited["sx"].copy()
    edited["sx"][3] = 40.0  # one value, the digest kept: a valid .npz
    np.savez(p, **edited)
    assert cache.get(rec, EX) is None and cache.get(rec, EX) is None
    assert len(cache.misses) == 1 and str(p) in cache.misses[0] and "does not match its digest" in cache.misses[0]
    cache.put(rec, EX, DATA)  # what compute_features does on a miss
    assert _same(cache.get(rec, EX), DATA)


def test_a_file_without_digest_or_from_another_record_is_a_miss(cache, tmp_path):
    rec, other = _rec(tmp_path), _rec(tmp_path, "ef" * 32)
    p = cache.path(rec, EX)
    p.parent.mkdir(parents=True)
    np.savez(p, **DATA)  # by hand (or an older worldgate): no digest
    assert cache.get(rec, EX) is None and "no content digest" in cache.misses[-1]
    cache.put(other, EX, DATA)
    shutil.copy(cache.path(other, EX), p)  # another record's intact file, copied into this record's folder
    assert cache.get(rec, EX) is None and "does not match" in cache.misses[-1]
    assert _same(cache.get(other, EX), DATA)


@pytest.mark.parametrize("damage", ["truncate", "flip", "empty", "garbage"])
def test_a_damaged_file_is_a_miss_never_an_error(cache, tmp_path, damage):
    rec = _rec(tmp_path)
    cache.put(rec, EX, {"big": np.arange(4000.0)})
    p = cache.path(rec, EX)
    b = bytearray(p.read_bytes())
    if damage == "truncate":
        b = b[: len(b) // 2]  # BadZipFile: no central directory
    elif damage == "flip":
        b[len(b) // 2] ^= 0x10  # a bit in the array's bytes: np.load succeeds, the digest does not
    elif damage == "empty":
        b = b""
    else:
        b = b"PK\x03\x04" + b"\xff" * 100
    p.write_bytes(bytes(b))
    assert cache.get(rec, EX) is None and len(cache.misses) == 1
    cache.put(rec, EX, {"big": np.arange(4000.0)})
    assert _same(cache.get(rec, EX), {"big": np.arange(4000.0)})


def test_links_under_features_are_never_followed(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    rec, other = _rec(tmp_path), _rec(tmp_path, "ef" * 32)
    # a cache file linked to another record's (intact, digest-carrying) file is not followed
    good = FeatureCache(tmp_path / "elsewhere" / ".features")
    good.put(other, EX, DATA)
    c = FeatureCache(run / ".features")
    c.put(rec, EX, DATA)
    p = c.path(rec, EX)
    p.unlink()
    p.symlink_to(good.path(other, EX))
    assert c.get(rec, EX) is None and "link" in c.misses[-1]
    c.put(rec, EX, DATA)  # the link is replaced, its target untouched
    assert not p.is_symlink() and _same(c.get(rec, EX), DATA) and _same(good.get(other, EX), DATA)
    # a digest folder that is a link: read as a miss, replaced by a real folder on write, nothing written outside
    shutil.rmtree(p.parent)
    p.parent.symlink_to(outside, target_is_directory=True)
    assert c.get(rec, EX) is None
    c.put(rec, EX, DATA)
    assert not p.parent.is_symlink() and _same(c.get(rec, EX), DATA) and list(outside.iterdir()) == []
    # record.json that is a link is replaced, never written through
    secret = tmp_path / "secret.txt"
    secret.write_text("keep")
    (p.parent / "record.json").unlink()
    (p.parent / "record.json").symlink_to(secret)
    c.put(rec, EX, DATA)
    assert secret.read_text() == "keep" and not (p.parent / "record.json").is_symlink()
    # .features itself a link: nothing read through it, nothing written through it
    shutil.rmtree(run / ".features")
    (run / ".features").symlink_to(outside, target_is_directory=True)
    c2 = FeatureCache(run / ".features")
    c2.put(rec, EX, DATA)
    assert list(outside.iterdir()) == [] and c2.get(rec, EX) is None and len(c2.misses) == 1


def test_a_fifo_or_folder_in_place_of_a_cache_file_is_a_miss(cache, tmp_path):
    rec = _rec(tmp_path)
    cache.put(rec, EX, DATA)
    p = cache.path(rec, EX)
    p.unlink()
    os.mkfifo(p)  # opened non-blocking and refused: no hang
    assert cache.get(rec, EX) is None and "not a regular file" in cache.misses[-1]
    p.unlink()
    p.mkdir()
    assert cache.get(rec, EX) is None


def test_an_interrupted_write_keeps_the_previous_file(cache, tmp_path, monkeypatch):
    rec = _rec(tmp_path)
    cache.put(rec, EX, DATA)

    def full_disk(f, **arrays):
        f.write(b"PK\x03\x04 half")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(np, "savez", full_disk)
    with pytest.raises(OSError):
        cache.put(rec, EX, {"sx": np.zeros(3)})
    monkeypatch.undo()
    p = cache.path(rec, EX)
    assert _same(cache.get(rec, EX), DATA) and sorted(os.listdir(p.parent)) == ["flow@4-classical.npz", "record.json"]


@pytest.fixture(scope="module")
def scored(tmp_path_factory):
    run = tmp_path_factory.mktemp("hostile-cache") / "engine"
    assert run_generate("engine", "worldmark-engine", run, limit=1, overrides=QUICK, progress=False).exit_code == 0
    return run, evaluate_run(run, progress=False)


def _scores(res):
    means = {k: m.get("mean") for k, m in res["metrics"].items()}
    assert len([v for v in means.values() if v is not None]) >= 4
    return means


def test_edited_or_damaged_cache_files_never_change_a_score(scored, tmp_path, caplog):
    run0, res0 = scored
    run = tmp_path / "run"
    shutil.copytree(run0, run)
    files = sorted((run / ".features").glob("*/*.npz"))
    assert len(files) >= 6
    damaged = 0
    for i, p in enumerate(files):
        if i % 2:
            with np.load(p) as z:
                arrays = {k: z[k] for k in z.files}
            edited = {k: -v[::-1] + 1.0 for k, v in arrays.items()
                      if k != DIGEST_KEY and v.dtype.kind == "f" and v.size}
            np.savez(p, **{**arrays, **edited})  # a valid .npz with every float value edited, the digest kept
            damaged += bool(edited)
        else:
            p.write_bytes(p.read_bytes()[:100])  # truncated: BadZipFile
            damaged += 1
    assert damaged >= 5
    with caplog.at_level("WARNING", logger="worldgate.evaluate"):
        res = evaluate_run(run, progress=False)
    assert _scores(res) == _scores(res0)
    assert sum("feature cache miss" in r.getMessage() for r in caplog.records) == damaged
    # and they are good again: a --rescore serves them, computing nothing
    assert _scores(evaluate_run(run, rescore=True, progress=False)) == _scores(res0)
