"""The adapter conformance kit, public: the battery every built-in adapter passes, for a plugin's own tests.

As diffusers' ``PipelineTesterMixin`` gives each pipeline test the same battery, :class:`AdapterConformance` gives
an adapter's test class the checks worldgate runs on its own adapters (docs/plugins.md)::

    from worldgate.testing import AdapterConformance

    class TestMyModel(AdapterConformance):
        adapter_name = "my-model"          # a registered name (a built-in or an installed plugin's entry point)
        # adapter_class = MyModel          # or the class itself, before the package is installed
        # model_args = {"width": 64}       # keyword arguments for its constructor
        # rollout_seconds = 1.0            # also run load() + rollout() on a short case (a runtime on this machine)

:func:`check_adapter` runs the same checks without pytest and raises ``AssertionError`` naming the first that fails.

The battery: ``info`` is a well-formed :class:`~worldgate.adapters.base.AdapterInfo`; ``plan`` is deterministic
(equal fingerprints), gives every 20 s WorldMark key the same number of frames with contiguous cumulative boundaries,
keeps the intrinsics bookkeeping evaluate reads, and round-trips its native files through ``NativeInputs.write``;
optionally a rollout yields frames of the plan's size and count. Its cases are WorldMark cases built here (an image
path that need not exist: a plan is pure), or with ``engine_scene = True`` Engine cases (no image).
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest

from worldgate.adapters import MODELS, Adapter, AdapterInfo, get_adapter
from worldgate.adapters.base import check_plan_intrinsics
from worldgate.trajectories import library
from worldgate.trajectories.suites import Case

#: a real arena image size and its intrinsics (WorldMark arena_inputs first_view/real/000)
REAL_SIZE = (1080, 720)
REAL_K = [796.7481, 800.6274, 539.1234, 359.1133]
#: WorldMark action ids whose keys the timing check reads (forward, a turn, a mixed key)
TIMING_IDS = (1, 6, 11)


def worldmark_case(action_id: int, image_size=REAL_SIZE, k=REAL_K, view="first", scene: bool = False) -> Case:
    """A WorldMark case of ``action_id`` (1-15): an image case (the image path need not exist), or with ``scene`` an
    Engine case (no image; what Engine suites give)."""
    if scene:
        return Case(id=f"t-{action_id:03d}", suite="worldmark-engine", trajectory=library.worldmark(action_id),
                    prompt="First-person view. A test scene.", prompt_source="test", scene={"seed": action_id},
                    intrinsics=list(k), image_size=image_size, view=view, tags={"action_id": action_id})
    return Case(id=f"t-{action_id:03d}", suite="worldmark", trajectory=library.worldmark(action_id),
                prompt="First-person view. A test scene.", prompt_source="first_view/prompt_real.txt:1",
                image="000.jpg", intrinsics=list(k), image_size=image_size, view=view,
                tags={"action_id": action_id})


def make_adapter(name: str = "", cls: type | None = None, model_args: dict | None = None) -> Adapter:
    """An adapter from its class or its registered name (an unknown name gets the registry's did-you-mean)."""
    if cls is not None:
        return cls(**(model_args or {}))
    if not name:
        raise ValueError("set adapter_name (a registered model) or adapter_class on the conformance test class")
    return get_adapter(name, **(model_args or {}))


def check_info(adapter: Adapter, name: str = "") -> None:
    info = adapter.info
    assert isinstance(info, AdapterInfo), f"{type(adapter).__name__}.info is no AdapterInfo"
    if name:
        assert info.name == name, f"info.name {info.name!r} is not the registered name {name!r}"
    assert info.width > 0 and info.height > 0 and info.fps > 0, (info.width, info.height, info.fps)
    assert info.first_chunk_frames >= 0 and info.chunk_frames >= 0, (info.first_chunk_frames, info.chunk_frames)
    assert info.intrinsics_regime in (1, 2, 3, 4), f"intrinsics_regime {info.intrinsics_regime} is not 1-4"
    assert info.players in (1, 2), f"players {info.players} is not 1 or 2"
    assert info.version and info.fps_source, "info.version and info.fps_source must be set"


def check_deterministic(adapter: Adapter, again: Adapter, case: Case) -> None:
    a, b = adapter.plan(case), again.plan(case)
    assert a.fingerprint() == b.fingerprint(), "two plans of the same case differ (plan must be pure)"


def check_key_timing(plan, keys: int) -> None:
    segs = plan.segment_frames
    assert len(segs) == keys, f"{len(segs)} segment ranges for {keys} keys"
    lengths = {b - a for a, b in segs}
    assert len(lengths) == 1, f"keys got different lengths {segs}"
    assert all(b0 == a1 for (_, b0), (a1, _) in zip(segs[:-1], segs[1:])), f"not contiguous, cumulative: {segs}"
    assert segs[0][0] >= 0 and segs[-1][1] <= plan.n_frames, (segs, plan.n_frames)


def check_intrinsics(adapter: Adapter, plan) -> None:
    K = plan.intrinsics
    assert K["regime"] == adapter.info.intrinsics_regime, (K.get("regime"), adapter.info.intrinsics_regime)
    assert "case_hfov_deg" in K and "native_hfov_deg" in K, "intrinsics needs case_hfov_deg and native_hfov_deg"
    if K["regime"] == 4:
        assert K["native"] is not None and K["transform"], "regime 4 records native intrinsics and the transform"
    check_plan_intrinsics(plan)  # [fx, fy, cx, cy] in pixels of the plan's size: what evaluate reads


def check_round_trip(plan, folder: Path) -> None:
    plan.write(folder)
    desc = json.loads((folder / "plan.json").read_text())
    assert desc["fingerprint"] == plan.fingerprint()
    for name, content in plan.files.items():
        data = (folder / name).read_bytes()
        if isinstance(content, np.ndarray):
            np.testing.assert_array_equal(np.load(io.BytesIO(data), allow_pickle=False), content)
        elif isinstance(content, str):
            assert data.decode() == content, name
    if plan.arrays:
        with np.load(folder / "plan.npz", allow_pickle=False) as z:
            for k, v in plan.arrays.items():
                np.testing.assert_array_equal(z[k], v)


def check_rollout(adapter: Adapter, case: Case, seconds: float = 1.0, device: str = "cpu") -> int:
    """``load`` then ``rollout`` of ``case`` shortened to ``seconds`` per key: chunks of the plan's size, frame
    starts contiguous from 0, ``n_frames`` frames in all (a chunk may instead name a ``video`` file). Returns the
    frames counted."""
    case.trajectory = case.trajectory.with_seconds(seconds)
    plan = adapter.plan(case)
    adapter.load(device)
    seen = 0
    for ch in adapter.rollout(plan, None, 0):
        if ch.frames is None:
            assert ch.video is not None, "a chunk gives frames or a video file"
            return plan.n_frames
        views = ch.frames if isinstance(ch.frames, dict) else {"": ch.frames}
        lens = set()
        for v, f in views.items():
            f = np.asarray(f)
            assert f.dtype == np.uint8 and f.ndim == 4 and f.shape[1:] == (plan.height, plan.width, 3), (v, f.shape)
            lens.add(len(f))
        assert len(lens) == 1 and ch.start == seen, f"chunk starts at {ch.start}, expected {seen}"
        seen += lens.pop()
    assert seen == plan.n_frames, f"rollout gave {seen} frames, the plan asks {plan.n_frames}"
    return seen


def check_adapter(name: str = "", cls: type | None = None, model_args: dict | None = None, *,
                  folder: str | Path, scene: bool = False, rollout_seconds: float | None = None) -> list[str]:
    """The whole battery without pytest (``folder``: where the native files are written); returns the checks
    passed. ``scene``: Engine cases instead of image cases."""
    make = lambda: make_adapter(name, cls, model_args)  # noqa: E731
    adapter, done = make(), []
    check_info(adapter, name)
    done.append("info")
    check_deterministic(adapter, make(), worldmark_case(13, scene=scene))
    done.append("deterministic")
    for aid in TIMING_IDS:
        check_key_timing(adapter.plan(worldmark_case(aid, scene=scene)), len(library.WORLDMARK_PROTOCOL[aid]))
    done.append("key timing")
    check_intrinsics(adapter, adapter.plan(worldmark_case(1, scene=scene)))
    done.append("intrinsics")
    check_round_trip(adapter.plan(worldmark_case(7, scene=scene)), Path(folder))
    done.append("round trip")
    if rollout_seconds is not None:
        check_rollout(adapter, worldmark_case(1, scene=scene), rollout_seconds)
        done.append("rollout")
    return done


class AdapterConformance:
    """The battery as a pytest mixin: subclass it in a ``Test*`` class and set ``adapter_name`` (or
    ``adapter_class``)."""

    adapter_name: str = ""
    adapter_class: type | None = None
    model_args: dict = {}
    #: Engine cases (no image) instead of WorldMark image cases
    engine_scene: bool = False
    #: seconds per key of a real rollout (load + rollout on this machine); None: plan checks only
    rollout_seconds: float | None = None

    def make(self) -> Adapter:
        return make_adapter(self.adapter_name, self.adapter_class, self.model_args)

    def case(self, action_id: int) -> Case:
        return worldmark_case(action_id, scene=self.engine_scene)

    @pytest.fixture
    def adapter(self):
        return self.make()

    def test_info_is_declared(self, adapter):
        check_info(adapter, self.adapter_name if self.adapter_class is None else "")
        if self.adapter_name and self.adapter_class is None:
            assert self.adapter_name in MODELS

    def test_plan_is_deterministic(self, adapter):
        check_deterministic(adapter, self.make(), self.case(13))

    @pytest.mark.parametrize("aid", TIMING_IDS)
    def test_same_frames_for_every_20s_key(self, adapter, aid):
        check_key_timing(adapter.plan(self.case(aid)), len(library.WORLDMARK_PROTOCOL[aid]))

    def test_intrinsics_bookkeeping(self, adapter):
        check_intrinsics(adapter, adapter.plan(self.case(1)))

    def test_native_files_round_trip(self, adapter, tmp_path):
        check_round_trip(adapter.plan(self.case(7)), tmp_path)

    def test_rollout_matches_plan(self, adapter):
        if self.rollout_seconds is None:
            pytest.skip("rollout_seconds is None: plan checks only (set it where the model's runtime is here)")
        assert check_rollout(adapter, self.case(1), self.rollout_seconds) > 0


__all__ = ["AdapterConformance", "REAL_K", "REAL_SIZE", "TIMING_IDS", "check_adapter", "check_deterministic",
           "check_info", "check_intrinsics", "check_key_timing", "check_rollout", "check_round_trip", "make_adapter",
           "worldmark_case"]
