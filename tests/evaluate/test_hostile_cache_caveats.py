"""Cache misses said where they matter (issue 29, item 1): files an older worldgate wrote (no content digest) give ONE
summary line, not a warning per file, and results.json carries one caveat line counting them; with ``--rescore`` a
record whose cache is legacy or damaged fails saying which file and why, and what to do (evaluate without
--rescore), not only "feature X is not cached"."""

import io
import logging

import numpy as np
import pytest

from worldgate.evaluate.cache import DIGEST_KEY
from worldgate.evaluate.runner import evaluate_run
from worldgate.generate.runner import run_generate

TINY = ["model.width=64", "model.height=64", "model.threads=1", "trajectory.seconds=1"]


@pytest.fixture(scope="module")
def scored(tmp_path_factory):
    d = tmp_path_factory.mktemp("cc") / "run"
    assert run_generate("engine", "worldmark-engine", d, limit=2, overrides=TINY, progress=False).exit_code == 0
    evaluate_run(d, progress=False)
    return d


def _cached(run):
    files = sorted((run / ".features").glob("*/*.npz"))
    assert len(files) >= 4, files  # two records, several features each
    return files


def _make_legacy(run):
    """Every cache file as the previous worldgate wrote it: the same arrays, no digest."""
    files = _cached(run)
    for p in files:
        with np.load(p, allow_pickle=False) as z:
            data = {k: z[k] for k in z.files if k != DIGEST_KEY}
        buf = io.BytesIO()
        np.savez(buf, **data)
        p.write_bytes(buf.getvalue())
    return files


def test_legacy_cache_files_are_one_summary_line_and_one_caveat(scored, caplog):
    files = _make_legacy(scored)
    with caplog.at_level(logging.WARNING, logger="worldgate"):
        res = evaluate_run(scored, progress=False)
    said = [r.getMessage() for r in caplog.records if "cache" in r.getMessage()]
    assert len(said) == 1 and "older worldgate" in said[0], said  # not one warning per file
    assert res["caveats"]["(feature cache)"] == [
        f"feature cache: {len(files)} cached file(s) not served ({len(files)} written by an older worldgate (no "
        "content digest)): recomputed, never served as computed"]
    assert res["features"]["computed"] == len(files) and not res["errors"]
    again = evaluate_run(scored, progress=False)  # rewritten with digests: served, no caveat
    assert "(feature cache)" not in again["caveats"] and again["features"]["cached"] == len(files)


def test_rescore_on_a_legacy_cache_says_which_file_and_what_to_do(scored):
    files = _make_legacy(scored)
    res = evaluate_run(scored, rescore=True, progress=False)
    assert len(res["errors"]) == 2
    for case, err in res["errors"].items():
        assert "legacy cache" in err and str(scored / ".features") in err and "no content digest" in err, err
        assert "run evaluate without --rescore to recompute it" in err
    assert res["caveats"]["(feature cache)"][0].startswith(f"feature cache: {len(files)} cached file(s) not served")


def test_rescore_on_a_damaged_cache_names_it_damaged(scored):
    evaluate_run(scored, progress=False)  # a cache with digests again
    for p in _cached(scored):
        p.write_bytes(p.read_bytes()[:40])  # truncated
    res = evaluate_run(scored, rescore=True, progress=False)
    assert len(res["errors"]) == 2
    for err in res["errors"].values():
        assert "damaged cache" in err and "BadZipFile" in err and "without --rescore" in err, err
    assert "damaged, edited, another record's or not regular files" in res["caveats"]["(feature cache)"][0]
