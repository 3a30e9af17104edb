"""ForgeWM: keyboard [W,S,A,D,0,0] and mouse [pitch, yaw] (+-0.10) per frame at 12 fps, F = 4L-3 with L % 3 == 0,
row j = the command of time j / fps."""

import py_compile
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from adapter_conformance import gated_checkout as _checkout
from adapter_conformance import REAL_K, REAL_SIZE, AdapterConformance, worldmark_case
from worldgate.adapters import AdapterError, get_adapter
from worldgate.adapters.forgewm import COMMIT, PATCH, ForgeWM
from worldgate.adapters.patching import PatchError
from worldgate.adapters.repo import command_argv
from worldgate.trajectories import library
from worldgate.trajectories.core import Trajectory
from worldgate.trajectories.suites import Case

V = float(np.float32(0.1))


class TestForgeWMConformance(AdapterConformance):
    adapter_name = "forgewm"


@pytest.fixture
def fw():
    return get_adapter("forgewm")


def case_of(text: str, cid="t", size=REAL_SIZE) -> Case:
    return Case(id=cid, suite="t", trajectory=Trajectory.parse(text), image="x.jpg", intrinsics=REAL_K,
                image_size=size)


def test_w_for_2s_golden(fw):
    p = fw.plan(case_of("W2"))
    kb, ms = p.arrays["keyboard_condition"], p.arrays["mouse_condition"]
    # 24 frames at 12 fps + the conditioning frame: L = 9 latents (a multiple of 3), F = 4*9-3 = 33
    assert p.extra["num_frames"] == 9 and p.n_frames == 33 and kb.shape == (33, 6) and ms.shape == (33, 2)
    assert p.segment_frames == [(1, 25)]
    np.testing.assert_array_equal(kb[:24], np.tile([1, 0, 0, 0, 0, 0], (24, 1)))  # rows 0..23: row j -> frame j+1
    assert not kb[24:].any() and not ms.any()
    assert any("8 trailing frames" in c for c in p.caveats)


def test_id1_and_id6(fw):
    p = fw.plan(worldmark_case(1))  # 240 frames: L = 63, F = 249
    assert p.extra["num_frames"] == 63 and p.n_frames == 249 and p.segment_frames == [(1, 241)]
    p = fw.plan(worldmark_case(6))  # W S
    kb = p.arrays["keyboard_condition"]
    assert p.segment_frames == [(1, 241), (241, 481)]
    assert kb[239].tolist() == [1, 0, 0, 0, 0, 0] and kb[240].tolist() == [0, 1, 0, 0, 0, 0]


def test_yaw_and_pitch_signs(fw):
    ms = fw.plan(worldmark_case(7)).arrays["mouse_condition"]  # L R
    assert ms[:240].tolist() == [[0.0, -V]] * 240 and ms[240:480].tolist() == [[0.0, V]] * 240
    c = Case(id="lrud", suite="t", trajectory=library.get("LRUD"), image="x.jpg", intrinsics=REAL_K,
             image_size=REAL_SIZE)
    p = fw.plan(c)
    ms = p.arrays["mouse_condition"]
    (_, _), _, _, (u0, u1), (d0, d1), _ = p.segment_frames
    assert np.all(ms[u0 - 1:u1 - 1, 0] == np.float32(0.1)) and np.all(ms[d0 - 1:d1 - 1, 0] == np.float32(-0.1))
    assert not ms[u0 - 1:d1 - 1, 1].any()


def test_combined_strafe_and_turn(fw):
    p = fw.plan(case_of("A+R1"))
    kb, ms = p.arrays["keyboard_condition"], p.arrays["mouse_condition"]
    assert kb[:12].tolist() == [[0, 0, 1, 0, 0, 0]] * 12 and ms[:12].tolist() == [[0.0, V]] * 12
    assert not kb[12:].any() and not ms[12:].any()


def test_command_line_ckpt_seed_and_stretch_caveat(fw, tmp_path):
    p = fw.plan(worldmark_case(1))
    assert p.files["command.txt"].split("  #")[0] == (
        "python inference.py --config_path configs/stage3_dmd.yaml --checkpoint_path CKPT/stage3/model.pt "
        "--image_path 000.jpg --num_frames 63 --height 352 --width 640 --seed SEED "
        "--output_path OUT/t-001.mp4 --actions actions.npz")
    assert p.extra["output_video"] == "t-001.mp4"  # relative to OUT: run_checkout takes exactly that file
    assert any("stretched to 640x352" in c for c in p.caveats)  # 1080x720 is 3:2
    p.write(tmp_path, seed=7)
    assert "--seed 7 " in (tmp_path / "command.txt").read_text()


# ---------------------------------------------------------------------------------------------------- gpus
def test_gpus_one_is_the_default_and_more_are_refused():
    assert get_adapter("forgewm").multi_gpu == ""
    one = get_adapter("forgewm", gpus=1).plan(worldmark_case(1)).files["command.txt"]
    assert one.startswith("python inference.py ") and "torch.distributed" not in one
    with pytest.raises(AdapterError, match="no multi-GPU inference"):
        get_adapter("forgewm", gpus=2).plan(worldmark_case(1))


# ---------------------------------------------------------------------------------------------------- the patch
#: the lines of ForgeWM's inference.py the patch touches (its anchors), inside a little Python of our own
SYNTH_INFERENCE = '''import argparse
import torch


def make_action(n, mouse_dim=2, keyboard_dim=6):
    return torch.zeros(1, n, mouse_dim), torch.ones(1, n, keyboard_dim)


def build_conditional_dict(mouse_cond, keyboard_cond):
    return {"mouse_condition": mouse_cond, "keyboard_condition": keyboard_cond}


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--num_frames", type=int, default=21)
    parser.add_argument("--seed", type=int, default=0)
    args, _ = parser.parse_known_args(argv)
    num_raw_frames = (args.num_frames - 1) * 4 + 1
    mouse_cond, keyboard_cond = make_action(num_raw_frames)

    conditional_dict = build_conditional_dict(
        mouse_cond, keyboard_cond)
    return conditional_dict
'''


@pytest.fixture
def clean_modules():
    """Drop the modules a test imported from a checkout copy (worldgate_inputs) afterwards; stubs go through
    monkeypatch.setitem."""
    sys.modules.pop("worldgate_inputs", None)
    yield
    sys.modules.pop("worldgate_inputs", None)


def _import_file(name: str, path: Path):
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_patch_applies_to_the_anchored_lines(tmp_path, clean_modules, monkeypatch):
    (tmp_path / "inference.py").write_text(SYNTH_INFERENCE)
    assert PATCH.missing(tmp_path) == ["inference.py", "worldgate_inputs.py"]
    assert PATCH.apply(tmp_path) == ["inference.py", "worldgate_inputs.py"]
    assert PATCH.missing(tmp_path) == [] and ForgeWM.repo_spec.patches == PATCH.markers()
    text = (tmp_path / "inference.py").read_text()
    assert text.count(PATCH.marker) == 2 and '"--actions"' in text
    for f in ("inference.py", "worldgate_inputs.py"):
        py_compile.compile(str(tmp_path / f), doraise=True)
    snapshot = {f: (tmp_path / f).read_text() for f in PATCH.files()}
    assert PATCH.apply(tmp_path) == []  # idempotent
    assert {f: (tmp_path / f).read_text() for f in PATCH.files()} == snapshot
    # the patched script really takes worldgate's rows in place of make_action's
    plan = get_adapter("forgewm").plan(case_of("W+R1 A1 ^1 S+L1"))
    plan.write(tmp_path / "native")
    monkeypatch.syspath_prepend(str(tmp_path))
    mod = _import_file("forgewm_synth_inference", tmp_path / "inference.py")
    npz = str(tmp_path / "native" / "actions.npz")
    got = mod.main(["--num_frames", str(plan.extra["num_frames"]), "--actions", npz])
    assert got["keyboard_condition"].dtype == mod.torch.float32
    np.testing.assert_array_equal(got["keyboard_condition"][0].numpy(), plan.arrays["keyboard_condition"])
    np.testing.assert_array_equal(got["mouse_condition"][0].numpy(), plan.arrays["mouse_condition"])
    assert mod.main([])["keyboard_condition"].eq(1).all()  # without --actions the script's own action stays
    with pytest.raises(ValueError, match=r"keyboard_condition is \(249, 6\), this run needs \(81, 6\)"):
        np.savez(tmp_path / "long.npz", **get_adapter("forgewm").plan(worldmark_case(1)).files["actions.npz"])
        mod.main(["--actions", str(tmp_path / "long.npz")])


def test_patch_refuses_a_file_without_its_anchor(tmp_path):
    (tmp_path / "inference.py").write_text(SYNTH_INFERENCE.replace('"--seed", type=int, default=0', '"--seed"'))
    with pytest.raises(PatchError, match=r"inference\.py: the patch's anchor .*occurs 0 times"):
        PATCH.apply(tmp_path)
    assert not (tmp_path / "worldgate_inputs.py").exists()  # nothing half-applied
    assert (tmp_path / "inference.py").read_text().count(PATCH.marker) == 0


def test_repo_spec_pins_the_commit_and_weights():
    spec = ForgeWM.repo_spec
    assert spec.commit == COMMIT == "b0b06a6fd82099ffab318417c054788e1da01d2e" and spec.subdir == ""
    assert spec.weights_patterns == ("stage3/model.pt",) and spec.requirements == ("requirements.txt",)
    assert spec.patch is PATCH and PATCH.flags == ("--actions",)


# ------------------------------------------------------------------------------------- the real checkout (gated)


FORGEWM = _checkout("FORGEWM_CHECKOUT", COMMIT)


@pytest.mark.skipif(FORGEWM is None, reason="set FORGEWM_CHECKOUT to a checkout of asdfo123/ForgeWM at " + COMMIT)
def test_patched_inference_builds_the_plans_actions(tmp_path, monkeypatch, clean_modules):
    """The real inference.py, patched, parses the plan's command line and hands build_conditional_dict exactly the
    plan's rows (the model, VAE and scheduler stubbed)."""
    import types

    import torch
    from PIL import Image

    repo = tmp_path / "ForgeWM"
    shutil.copytree(FORGEWM, repo, ignore=shutil.ignore_patterns(".git", "ckpts", "assets", "*.gif", "*.mp4"))
    assert PATCH.apply(repo) == ["inference.py", "worldgate_inputs.py"]
    img = tmp_path / "frame.png"
    Image.fromarray(np.full((720, 1080, 3), 90, np.uint8)).save(img)
    case = Case(id="gated", suite="t", trajectory=Trajectory.parse("W+R1 A1 ^1 S+L1 v0.5 D2"), image=str(img),
                intrinsics=REAL_K, image_size=REAL_SIZE)
    plan = get_adapter("forgewm").plan(case)
    native = tmp_path / "native"
    plan.write(native, seed=5)
    ckpt = tmp_path / "weights"
    (ckpt / "stage3").mkdir(parents=True)
    torch.save({"generator": {}}, ckpt / "stage3" / "model.pt")
    argv = command_argv(plan.files["command.txt"], plan.files, native, {"python": sys.executable, "ckpt": ckpt},
                        plan.extra["image"], 5)
    assert argv[1] == "inference.py" and argv[argv.index("--actions") + 1] == str(native / "actions.npz")

    class Stub:
        def __init__(self, *a, **k):
            self.generator = self.vae = self

        def load_state_dict(self, *a, **k):
            return [], []

        def to(self, *a, **k):
            return self

    stubs = {"pipeline": ("CausalInferencePipeline", "CausalDiffusionInferencePipeline"),
             "utils": (), "utils.wan_wrapper": ("WanDiffusionWrapper", "WanVAEWrapper"),
             "wan": (), "wan.utils": (), "wan.utils.fm_solvers_unipc": ("FlowUniPCMultistepScheduler",)}
    for name, attrs in stubs.items():
        m = types.ModuleType(name)
        for a in attrs:
            setattr(m, a, type(a, (Stub,), {}))
        monkeypatch.setitem(sys.modules, name, m)
    monkeypatch.chdir(repo)
    monkeypatch.syspath_prepend(str(repo))
    monkeypatch.setattr(sys, "argv", argv[1:])
    inference = _import_file("forgewm_inference", repo / "inference.py")
    seen = {}

    class Reached(Exception):
        pass

    def fake_load_reference_frame(image_path, device, dtype, height=352, width=640):
        seen["image"] = (image_path, height, width)
        return torch.zeros(1, 1, 3, height, width)

    def fake_build_conditional_dict(pipeline, pixel, num_frames, mouse_cond, keyboard_cond, dtype, device, vae_tcr=4):
        seen.update(num_frames=num_frames, mouse=mouse_cond, keyboard=keyboard_cond, vae_tcr=vae_tcr)
        raise Reached

    monkeypatch.setattr(inference, "load_reference_frame", fake_load_reference_frame)
    monkeypatch.setattr(inference, "build_conditional_dict", fake_build_conditional_dict)
    grad = torch.is_grad_enabled()
    try:
        with pytest.raises(Reached):
            inference.main()
    finally:
        torch.set_grad_enabled(grad)
    F, L = plan.n_frames, plan.extra["num_frames"]
    assert seen["image"] == (str(img.resolve()), 352, 640) and seen["num_frames"] == L and seen["vae_tcr"] == 4
    assert tuple(seen["keyboard"].shape) == (1, F, 6) and tuple(seen["mouse"].shape) == (1, F, 2)
    assert seen["keyboard"].dtype == torch.float32 and seen["mouse"].dtype == torch.float32
    np.testing.assert_array_equal(seen["keyboard"][0].numpy(), plan.arrays["keyboard_condition"])
    np.testing.assert_array_equal(seen["mouse"][0].numpy(), plan.arrays["mouse_condition"])
    assert seen["mouse"][0, :12].tolist() == [[0.0, V]] * 12 and seen["keyboard"][0, 12:24, 2].eq(1).all()
