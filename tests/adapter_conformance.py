"""A conformance battery every adapter gets for free (diffusers-style tester mixin): subclass it in a test module,
set ``adapter_name``, and the adapter's plan is checked for determinism, segment timing, intrinsics bookkeeping and
a write/read round trip of its native files."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest

from worldgate.adapters import get_adapter
from worldgate.adapters.base import check_plan_intrinsics
from worldgate.trajectories import library
from worldgate.trajectories.suites import Case

ARENA = Path(__file__).resolve().parents[1] / ".." / "shared" / "worldmark" / "arena_inputs"
#: a real arena image size and its intrinsics (first_view/real/000), used when the arena is not present
REAL_SIZE = (1080, 720)
REAL_K = [796.7481, 800.6274, 539.1234, 359.1133]


def worldmark_case(action_id: int, image_size=REAL_SIZE, k=REAL_K, view="first") -> Case:
    return Case(id=f"t-{action_id:03d}", suite="worldmark", trajectory=library.worldmark(action_id),
                prompt="First-person view. A test scene.", prompt_source="first_view/prompt_real.txt:1",
                image="000.jpg", intrinsics=list(k), image_size=image_size, view=view,
                tags={"action_id": action_id})


class AdapterConformance:
    adapter_name: str = ""

    @pytest.fixture
    def adapter(self):
        return get_adapter(self.adapter_name)

    def test_plan_is_deterministic(self, adapter):
        a = adapter.plan(worldmark_case(13))
        b = get_adapter(self.adapter_name).plan(worldmark_case(13))
        assert a.fingerprint() == b.fingerprint()

    @pytest.mark.parametrize("aid", [1, 6, 11])
    def test_same_frames_for_every_20s_key(self, adapter, aid):
        plan = adapter.plan(worldmark_case(aid))
        segs = plan.segment_frames
        assert len(segs) == len(library.WORLDMARK_PROTOCOL[aid])
        lengths = {b - a for a, b in segs}
        assert len(lengths) == 1, f"keys got different lengths {segs}"
        assert all(b0 == a1 for (_, b0), (a1, _) in zip(segs[:-1], segs[1:]))  # contiguous, cumulative
        assert segs[0][0] >= 0 and segs[-1][1] <= plan.n_frames

    def test_intrinsics_bookkeeping(self, adapter):
        plan = adapter.plan(worldmark_case(1))
        K = plan.intrinsics
        assert K["regime"] == adapter.info.intrinsics_regime
        assert "case_hfov_deg" in K and "native_hfov_deg" in K
        if K["regime"] == 4:
            assert K["native"] is not None and K["transform"]
        check_plan_intrinsics(plan)  # [fx, fy, cx, cy] in pixels of the plan's size: what evaluate reads

    def test_native_files_round_trip(self, adapter, tmp_path):
        plan = adapter.plan(worldmark_case(7))
        plan.write(tmp_path)
        desc = json.loads((tmp_path / "plan.json").read_text())
        assert desc["fingerprint"] == plan.fingerprint()
        for name, content in plan.files.items():
            data = (tmp_path / name).read_bytes()
            if isinstance(content, np.ndarray):
                np.testing.assert_array_equal(np.load(io.BytesIO(data), allow_pickle=False), content)
            elif isinstance(content, str):
                assert data.decode() == content
        with np.load(tmp_path / "plan.npz", allow_pickle=False) as z:
            for k, v in plan.arrays.items():
                np.testing.assert_array_equal(z[k], v)


def gated_checkout(var: str, commit: str):
    """The folder named by ``$var`` (a gated test's ``<MODEL>_CHECKOUT``) if it is a checkout at ``commit`` (a folder
    that is no git work tree is taken as an export of it); None otherwise, so the test skips."""
    import os
    import subprocess

    p = os.environ.get(var)
    if not p or not Path(p).is_dir():
        return None
    try:
        head = subprocess.run(["git", "-C", p, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return Path(p)
    if head.returncode == 0 and head.stdout.strip() != commit:
        return None
    return Path(p)
