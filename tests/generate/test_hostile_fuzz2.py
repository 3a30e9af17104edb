"""Property tests (issue 29, item 6): the feature cache and the confined writer under 1,000 generated inputs each.
The cache never serves a value other than the one put (whatever bytes the file is changed to) and never raises; a
name given to the writer lands inside its folder or is refused."""

import os
import tempfile
from pathlib import Path
from types import SimpleNamespace

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from worldgate.evaluate.cache import FeatureCache
from worldgate.generate.outputs import OutputError, OutputFolder

FUZZ = settings(max_examples=1000, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow])
ROOT = Path(tempfile.mkdtemp(prefix="wg-fuzz2-"))
(ROOT / "run").mkdir()
CACHE = FeatureCache(ROOT / "run" / ".features")
REC = SimpleNamespace(input_digest="ab" * 32, dir=ROOT / "rec", content_hash="cd" * 32)
EX = SimpleNamespace(key=lambda: "fuzz@1-classical")

ARRAYS = st.dictionaries(
    st.text("abcxyz_", min_size=1, max_size=6),
    hnp.arrays(st.sampled_from([np.float32, np.float64, np.int64, np.uint8, np.bool_]),
               hnp.array_shapes(min_dims=0, max_dims=3, max_side=4)),
    min_size=1, max_size=3)


def _same(a, b):
    return sorted(a) == sorted(b) and all(
        a[k].dtype == b[k].dtype and a[k].shape == b[k].shape and np.array_equal(a[k], b[k], equal_nan=True) for k in b)


@FUZZ
@given(ARRAYS, st.integers(0, 1 << 30), st.integers(1, 255), st.sampled_from(["flip", "truncate", "append"]))
def test_the_cache_round_trips_and_a_changed_file_is_a_miss_or_the_same_value(data, where, xor, how):
    CACHE.put(REC, EX, data)
    got = CACHE.get(REC, EX)
    assert got is not None and _same(got, data)
    p = CACHE.path(REC, EX)
    b = bytearray(p.read_bytes())
    i = where % len(b)
    if how == "flip":
        b[i] ^= xor
    elif how == "truncate":
        b = b[:i]
    else:
        b += bytes([xor]) * (i % 64 + 1)
    p.write_bytes(bytes(b))
    got = CACHE.get(REC, EX)  # never raises
    assert got is None or _same(got, data)  # a flip in zip padding or a name's case may still read the same


@FUZZ
@given(st.binary(max_size=400))
def test_any_bytes_as_a_cache_file_are_a_miss(raw):
    p = CACHE.path(REC, EX)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(raw)
    assert CACHE.get(REC, EX) is None


OUT = OutputFolder(ROOT / "out")


@FUZZ
@given(st.lists(st.text(st.characters(codec="utf-8", exclude_characters="\0"), max_size=8) |
                st.sampled_from(["..", ".", "", "/", "a/..", "~"]), min_size=1, max_size=4))
def test_a_written_name_lands_inside_its_folder_or_is_refused(parts):
    rel = "/".join(parts)
    try:
        p = OUT.write_text(rel, "x")
    except OutputError:
        return
    except OSError as e:  # a name the file system itself refuses (too long, ...): never a write elsewhere
        assert e.errno in (36,), e
        return
    real = os.path.realpath(p)
    assert real.startswith(str(OUT.root.resolve()) + os.sep) and Path(real).read_text() == "x"
