"""Every registered model end to end: generate -> evaluate -> report -> export --format worldmark -> import.

Repository models run through a fake checkout whose entry point honours that model's own output contract: it writes
the video where and under the name the real script writes it (``plan.extra["output_video"]`` under OUT, else a new
.mp4 under OUT), at the plan's size, fps and frame count (``plan.width`` x ``plan.height``, ``plan.fps``,
``plan.n_frames``). The case is a WorldMark-tagged image case (a forward key and a yaw round trip), so every
WorldMark metric and camera following are declared for it. Then ``evaluate`` must score every record (none refused:
a record whose meta.json evaluate's own check rejects is the defect this test exists for), each declared metric is a
number or unavailable with a reason, and the run goes through report, export and import, the imported record scoring
as the original. Two-player models (solaris-mp/-sp, engine-2p*) run a MultiWorldBench case instead.
"""

from __future__ import annotations

import json
import math
import shutil

import numpy as np
import pytest

from test_conformance import ENGINE_SIZE, fake_checkout, extra_paths, kind_of
from worldgate.adapters import MODELS, get_adapter
from worldgate.evaluate.report import write_report
from worldgate.evaluate.runner import evaluate_run
from worldgate.generate.interop import import_worldmark
from worldgate.generate.runner import run_generate
from worldgate.generate.worldmark_export import export_worldmark
from worldgate.trajectories.suites import load_suite

IMAGE_SIZE = (1024, 768)  # a WorldMark real image's aspect (4:3)
K = [776.0, 776.0, 512.0, 384.0]
TAGS = {"view": "first", "domain": "real", "image": 0, "action_id": 7}


#: what a WorldMark case's record is scored on by the classical backend whatever the frames show (the action columns
#: depend on what the fake video's pan reads as: a number, or unavailable with WorldMark's reason)
WORLDMARK_SCORED = {"response_latency_rot", "global_memory", "imaging_quality", "visual_quality", "camera_rpe_rot"}


def manifest(folder, trajectory="W1 L1 R1", engine=False):
    """One WorldMark-tagged case: an image (repository models are image-to-video) or an Engine scene."""
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    row = {"id": "first-real-000_007", "trajectory": trajectory, "prompt": "A street. First-person view.",
           "intrinsics": K, "image_size": list(IMAGE_SIZE), "tags": TAGS}
    if engine:
        row["scene"] = {"seed": 1, "palette": "realistic"}
    else:
        img = folder / "000.jpg"
        rng = np.random.default_rng(0)
        Image.fromarray(rng.integers(0, 255, (IMAGE_SIZE[1], IMAGE_SIZE[0], 3), dtype=np.uint8)).save(img)
        row["image"] = str(img)
    m = folder / "cases.jsonl"
    m.write_text(json.dumps(row) + "\n")
    return m


def contract_video(path, width: int, height: int, fps: float, frames: int) -> None:
    """What a model's writer leaves: ``frames`` frames of ``width`` x ``height`` at ``fps`` (a textured scene that
    pans, so the flow and pose features have something to measure)."""
    import imageio.v2 as imageio

    rng = np.random.default_rng(1)
    tex = rng.integers(0, 255, (height // 8 + 1, (width + frames * 2) // 8 + 1, 3), dtype=np.uint8)
    tex = np.kron(tex, np.ones((8, 8, 1), np.uint8))
    path.parent.mkdir(parents=True, exist_ok=True)
    imageio.mimwrite(path, [tex[:height, 2 * t: 2 * t + width] for t in range(frames)], fps=fps,
                     macro_block_size=1, ffmpeg_params=["-threads", "1"])


def run_repo_model(name: str, tmp_path, monkeypatch):
    m = manifest(tmp_path / "case")
    (case,) = load_suite(str(m))
    plan = get_adapter(name).plan(case)
    video = tmp_path / "contract.mp4"
    contract_video(video, plan.width, plan.height, plan.fps, plan.n_frames)
    args, _ = fake_checkout(name, tmp_path / "fake", monkeypatch, video)
    args.update(extra_paths(name, m, tmp_path / "fake"))
    declared = plan.extra.get("output_video")
    monkeypatch.setenv("FAKE_OUTPUT", declared or "fake.mp4")
    out = tmp_path / "run"
    res = run_generate(name, str(m), out, seed=3, model_args=args, progress=False)
    assert res.exit_code == 0, res.failed
    meta = json.loads((out / res.done[0] / "meta.json").read_text())
    a = meta["achieved"]
    assert (a["width"], a["height"], a["frames"]) == (plan.width, plan.height, plan.n_frames)
    assert a["fps"] == pytest.approx(plan.fps)
    # every phase sits where the model puts its segments (ABot-World's first block, Matrix-Game 1.0's still
    # latents, whole 33-frame actions), not where the trajectory's clock would put them
    traj = json.loads((out / res.done[0] / "trajectory.json").read_text())
    for ph in traj["phases"]:
        if ph["segments"]:
            segs = plan.segment_frames
            assert ph["frames"] == [segs[min(ph["segments"])][0], segs[max(ph["segments"])][1]], (ph, segs)
    return out


def run_engine_model(name: str, tmp_path):
    two = MODELS.get(name).info.players == 2
    out = tmp_path / "run"
    if two:
        res = run_generate(name, "multiworldbench-engine", out, limit=1, overrides=ENGINE_SIZE, progress=False)
    else:
        res = run_generate(name, str(manifest(tmp_path / "case", engine=True)), out, progress=False,
                           overrides=["model.width=64", "model.height=64"])
    assert res.exit_code == 0, res.failed
    return out


def check_scored(run, results: dict, expect: set[str]) -> dict:
    """No record refused; every metric a number or unavailable with a reason; the ``expect``ed ones numbers."""
    assert not results["errors"], f"records evaluate refused: {results['errors']}"
    samples = [json.loads(x) for x in (run / "samples.jsonl").read_text().splitlines()]
    assert len(samples) == 1 and not samples[0].get("error"), samples
    (s,) = samples
    for mid, v in s["scores"].items():
        assert (isinstance(v, (int, float)) and math.isfinite(v)) or s["unavailable"].get(mid), (mid, v)
    got = {m for m, v in s["scores"].items() if v is not None}
    assert expect <= got, f"not scored: {sorted(expect - got)} ({ {m: s['unavailable'].get(m) for m in expect - got} })"
    return s["scores"]


@pytest.mark.parametrize("name", [n for n in MODELS.names() if MODELS.origin(n) == "worldgate"])
def test_every_model_end_to_end(name, tmp_path, monkeypatch):
    kind = kind_of(name)
    if kind == "diffusers":
        pytest.skip("sana-wm runs a real tiny pipeline end to end in tests/adapters/test_adapter_sana_wm.py")
    if kind == "repo-2p":
        from test_adapter_solaris import check_two_player_repo

        out = check_two_player_repo(name, tmp_path, monkeypatch)
    elif kind == "repo":
        out = run_repo_model(name, tmp_path, monkeypatch)
    else:
        out = run_engine_model(name, tmp_path)
    two = MODELS.get(name).info.players == 2
    res = evaluate_run(out, progress=False)
    scores = check_scored(out, res, set() if two else WORLDMARK_SCORED)
    if kind == "engine" and name != "engine":
        return  # an Engine fault variant: its report, export and import are the Engine's own path, run for `engine`
    report = write_report([out], tmp_path / "report")
    assert (tmp_path / "report" / report["html"]).is_file() if "html" in report else report
    if two:
        return  # WorldMark deliveries are one-view
    ex = export_worldmark(out, tmp_path / "delivery")
    assert len(ex.exported) == 1 and not ex.skipped, ex.skipped
    im = import_worldmark(tmp_path / "delivery", tmp_path / "imported")
    assert len(im.imported) == 1 and not im.failed, im.failed
    # the original's feature cache, keyed by a digest of every input the extractors read: the imported record scores
    # from it only if it is the same video, poses, trajectory and intrinsics (any difference recomputes)
    shutil.copytree(out / ".features", tmp_path / "imported" / ".features")
    again = evaluate_run(tmp_path / "imported", progress=False)
    assert again["features"]["computed"] == 0, "the imported record's inputs differ from the original's"
    assert check_scored(tmp_path / "imported", again, WORLDMARK_SCORED) == pytest.approx(scores, nan_ok=True)
