"""Matrix-Game 3.0: keyboard [W,S,A,D,0,0] + mouse [pitch, yaw] per frame at 17 fps; F = 57 + 40 (iterations - 1);
the pipeline integrates the actions into poses itself (15 deg per mouse unit, 12.35 units = 0.1235 m per W frame)."""

import math

import numpy as np
import pytest

from adapter_conformance import gated_checkout as _checkout
from adapter_conformance import REAL_K, REAL_SIZE, AdapterConformance, worldmark_case
from worldgate.adapters import UnsupportedMotion, get_adapter
from worldgate.trajectories import library
from worldgate.trajectories.core import Trajectory
from worldgate.trajectories.suites import Case

R_INIT = np.array([[0, 0, 1], [1, 0, 0], [0, -1, 0]], float)  # utils/cam_utils.py:583-587


class TestMatrixGame3Conformance(AdapterConformance):
    adapter_name = "matrix-game-3"


@pytest.fixture
def mg():
    return get_adapter("matrix-game-3")


def rel_forward(extr, i, j=0):
    """Camera j's view of camera i's forward axis (OpenCV: +x right, +y down, +z forward)."""
    return (extr[j, :3, :3].T @ extr[i, :3, :3])[:, 2]


def test_id1_forward_golden(mg):
    p = mg.plan(worldmark_case(1))
    kb, ms, ex = p.arrays["keyboard_cond"], p.arrays["mouse_cond"], p.arrays["extrinsics_all"]
    # 20 s x 17 fps = 340 action rows + the image frame = 341 <= 57 + 40*8 = 377 (9 iterations)
    assert p.n_frames == 377 and p.extra["num_iterations"] == 9 and p.fps == 17.0
    assert kb.shape == (377, 6) and ms.shape == (377, 2) and ex.shape == (377, 4, 4)
    assert p.segment_frames == [(0, 340)]
    np.testing.assert_array_equal(kb[:340], np.tile([1, 0, 0, 0, 0, 0], (340, 1)))  # W is column 0
    assert not kb[340:].any() and not ms.any()
    # W moves 12.35 units = 0.1235 m per frame along world +X (UE forward); the tail (no action) holds
    np.testing.assert_allclose(ex[:341, 0, 3], 0.1235 * np.arange(341), rtol=1e-5)
    assert not ex[:, 1:3, 3].any()
    np.testing.assert_array_equal(ex[376], ex[340])
    np.testing.assert_array_equal(ex[:, :3, :3], np.broadcast_to(R_INIT, (377, 3, 3)))
    assert np.all(np.diff(ex[:341, 0, 3]) > 0)  # forward axis monotone during W
    assert "--num_iterations 9" in p.files["command.txt"] and "--size 704*1280" in p.files["command.txt"]
    assert p.extra["new_frames_per_clip"] == [57] + [40] * 8 and p.extra["clip_windows"][1] == (41, 97)


def test_id6_and_id11_goldens(mg):
    p = mg.plan(worldmark_case(6))  # W S: 681 frames -> 57 + 40*16 = 697
    kb, ex = p.arrays["keyboard_cond"], p.arrays["extrinsics_all"]
    assert p.n_frames == 697 and p.segment_frames == [(0, 340), (340, 680)]
    assert kb[339].tolist() == [1, 0, 0, 0, 0, 0] and kb[340].tolist() == [0, 1, 0, 0, 0, 0]  # S is column 1
    assert ex[340, 0, 3] == pytest.approx(41.99, rel=1e-5) and abs(ex[680, 0, 3]) < 1e-3
    p = mg.plan(worldmark_case(11))  # W S W: 1021 frames -> 57 + 40*25 = 1057
    assert [b - a for a, b in p.segment_frames] == [340, 340, 340]
    assert p.n_frames == 1057 and p.extra["num_iterations"] == 26


def test_yaw_right_is_plus_mouse_column_1(mg):
    p = mg.plan(worldmark_case(5))  # R: 500 deg over 340 rows -> 500 / 340 / 15 per row
    ms, ex = p.arrays["mouse_cond"], p.arrays["extrinsics_all"]
    np.testing.assert_array_equal(ms[:340, 1], np.float32(500 / 5100))
    assert not ms[:, 0].any() and not ms[340:].any()
    assert not ex[:, :3, 3].any()  # pure rotation: translation exactly zero
    f = rel_forward(ex, 17)  # 17 frames x 1.4706 deg = 25 deg
    np.testing.assert_allclose(f, [math.sin(math.radians(25)), 0, math.cos(math.radians(25))], atol=1e-6)
    assert f[0] > 0.4  # right turn: forward -> +x; a flipped sign gives -0.42
    heading = np.unwrap([math.atan2(*rel_forward(ex, i)[[0, 2]]) for i in range(341)])
    assert np.all(np.diff(heading) > 0)  # yaw monotone
    ms = mg.plan(worldmark_case(7)).arrays["mouse_cond"]  # L R
    assert np.all(ms[0:340, 1] < 0) and np.all(ms[340:680, 1] > 0)


def test_lrud_pitch_only_during_u_and_d_and_the_sign_trap(mg):
    c = Case(id="lrud", suite="t", trajectory=library.get("LRUD"), image="x.jpg", intrinsics=REAL_K,
             image_size=REAL_SIZE)
    p = mg.plan(c)
    ms, kb, ex = p.arrays["mouse_cond"], p.arrays["keyboard_cond"], p.arrays["extrinsics_all"]
    # boundaries 0, 2, 5.6, 9.2, 11, 12.8, 13.8 s at 17 fps, ceil: 0, 34, 96, 157, 187, 218, 235
    assert p.segment_frames == [(0, 34), (34, 96), (96, 157), (157, 187), (187, 218), (218, 235)]
    assert p.n_frames == 257  # 236 <= 57 + 40*5
    # per segment: commanded degrees / rows / 15
    np.testing.assert_array_equal(ms[34:96, 1], np.float32(-90 / (62 * 15)))
    np.testing.assert_array_equal(ms[96:157, 1], np.float32(90 / (61 * 15)))
    np.testing.assert_array_equal(ms[157:187, 0], np.float32(0.1))  # U = +pitch column 0, the labelled "up"
    np.testing.assert_array_equal(ms[187:218, 0], np.float32(-45 / (31 * 15)))
    assert not ms[:157, 0].any() and not ms[218:, 0].any() and not ms[157:218, 1].any() and not kb.any()
    assert not ex[:, :3, 3].any()
    np.testing.assert_allclose(rel_forward(ex, 157), [0, 0, 1], atol=1e-5)  # L then R returns
    # the trap, as the code integrates it: after U (+45 deg) the camera's forward points to +y = image-DOWN
    s = math.sqrt(0.5)
    np.testing.assert_allclose(rel_forward(ex, 187), [0, s, s], atol=1e-5)
    np.testing.assert_allclose(rel_forward(ex, 218), [0, 0, 1], atol=1e-5)
    assert sum("pitch sign open" in c and "cam_utils.py:576" in c and "GPU check" in c for c in p.caveats) == 1


def test_pitch_question_is_where_a_user_sees_it(mg):
    """The open pitch sign is in the info `list models` prints (pose_convention) and its notes, with the GPU check;
    a case that pitches carries it as a caveat, a case without pitch does not."""
    from worldgate.adapters import get_info

    info = get_info("matrix-game-3")
    assert "PITCH SIGN OPEN" in info.pose_convention and "cam_utils.py:576" in info.pose_convention
    assert "GPU check" in info.notes and "2 s U case" in info.notes
    up = Case(id="u2", suite="t", trajectory=library.resolve("^2"), image="x.jpg", intrinsics=REAL_K,
              image_size=REAL_SIZE)
    assert any("pitch sign open" in c and "vertical optical flow" in c for c in mg.plan(up).caveats)
    assert not any("pitch sign" in c for c in mg.plan(worldmark_case(5)).caveats)  # R: no pitch, no caveat


def test_mouse_below_dead_zone_is_refused(mg):
    slow = Case(id="slow", suite="t", trajectory=Trajectory.parse("R2", yaw_rate=3.0), image="x.jpg")
    with pytest.raises(UnsupportedMotion, match="dead zone"):
        mg.plan(slow)  # 3 deg/s at 17 fps = 0.0118 < 0.02 mouse units


def test_intrinsics_fixed_90_deg(mg):
    K = mg.plan(worldmark_case(1)).intrinsics
    assert K["regime"] == 2 and K["native"] == [640.0, 352.0, 640.0, 352.0] and K["native_hfov_deg"] == 90.0
    assert K["case_hfov_deg"] == pytest.approx(math.degrees(2 * math.atan(540 / 796.7481)))
    # 1080x720 is wider than 704/1280 in height: crop height int(1080 * 0.55) = 594, top round(126/2) = 63
    assert K["crop"] == {"top": 63, "left": 0, "height": 594, "width": 1080, "then": "bicubic resize to 704x1280"}


# ---------------------------------------------------------------------------------------------------- pitch_sign
def up_case(text="^2") -> Case:
    return Case(id="u2", suite="t", trajectory=library.resolve(text), image="x.jpg", intrinsics=REAL_K,
                image_size=REAL_SIZE)


@pytest.mark.parametrize("value,sign", [(None, 1), ("+1", 1), ("1", 1), (1, 1), ("-1", -1), (-1, -1)])
def test_pitch_sign_sets_the_mouse_column_of_u(value, sign):
    """U for 2 s: 50 deg over 34 rows at 15 deg per unit in mouse[0], + for pitch_sign=+1 (default), - for -1; the
    pipeline's own integration then tilts the camera down (+1) or up (-1), and the caveat names the sign."""
    args = {} if value is None else {"pitch_sign": value}
    p = get_adapter("matrix-game-3", **args).plan(up_case())
    ms, ex = p.arrays["mouse_cond"], p.arrays["extrinsics_all"]
    assert p.segment_frames == [(0, 34)] and p.extra["pitch_sign"] == sign
    np.testing.assert_array_equal(ms[:34, 0], np.float32(sign * 50 / (34 * 15)))
    assert not ms[34:].any() and not ms[:, 1].any()
    assert p.extra["segment_mouse_pitch_yaw"] == [[float(np.float32(sign * 50 / 510)), 0.0]]
    d = math.radians(50)
    np.testing.assert_allclose(rel_forward(ex, 34), [0, sign * math.sin(d), math.cos(d)], atol=1e-5)  # +y = down
    (cav,) = [c for c in p.caveats if "pitch sign open" in c]
    assert f"emits U as {'+' if sign > 0 else '-'}mouse[0] (pitch_sign={sign:+d}" in cav
    assert f"pitch_sign={-sign:+d} emits the other sign" in cav and "cam_utils.py:576" in cav and "GPU check" in cav


def test_pitch_sign_flips_d_too_and_leaves_yaw():
    c = Case(id="lrud", suite="t", trajectory=library.get("LRUD"), image="x.jpg", intrinsics=REAL_K,
             image_size=REAL_SIZE)
    plus = get_adapter("matrix-game-3").plan(c).arrays["mouse_cond"]
    minus = get_adapter("matrix-game-3", pitch_sign="-1").plan(c).arrays["mouse_cond"]
    np.testing.assert_array_equal(minus[:, 0], -plus[:, 0])
    np.testing.assert_array_equal(minus[:, 1], plus[:, 1])
    assert minus[157, 0] == np.float32(-0.1) and minus[187, 0] == np.float32(45 / (31 * 15))  # U down, D up


@pytest.mark.parametrize("bad", ["up", "2", "0", "+-1", "", True, 0.5])
def test_bad_pitch_sign_is_refused_with_the_allowed_values(bad):
    from worldgate.adapters import AdapterError

    with pytest.raises(AdapterError, match=r"pitch_sign must be \+1 .* or -1 .*got"):
        get_adapter("matrix-game-3", pitch_sign=bad).plan(up_case())


def test_yaw_only_case_is_the_same_for_both_signs():
    a = get_adapter("matrix-game-3").plan(worldmark_case(5))
    b = get_adapter("matrix-game-3", pitch_sign="-1").plan(worldmark_case(5))
    np.testing.assert_array_equal(a.arrays["mouse_cond"], b.arrays["mouse_cond"])
    assert not any("pitch sign" in c for c in b.caveats)


# ---------------------------------------------------------------------------------------------------- gpus / output
def test_gpus_reach_the_readme_launch(mg):
    """README.md:54 + test.sh:46-52: torchrun with N processes, --dit_fsdp --t5_fsdp --ulysses_size N; one GPU: the
    same launcher with one process and no parallel flags (generate.py:16-21 turns FSDP off at ulysses_size 1)."""
    one = mg.plan(worldmark_case(1)).files["command.txt"]
    assert one.startswith("python -m torch.distributed.run --standalone --nproc_per_node=1 generate.py --size 704*1280 "
                          "--ckpt_dir CKPT/Matrix-Game-3.0 ")
    assert "--ulysses_size" not in one and "fsdp" not in one and "--master_port" not in one
    assert get_adapter("matrix-game-3", gpus=1).plan(worldmark_case(1)).files["command.txt"] == one
    eight = get_adapter("matrix-game-3", gpus=8).plan(worldmark_case(1)).files["command.txt"]
    assert eight.startswith("python -m torch.distributed.run --standalone --nproc_per_node=8 generate.py --size "
                            "704*1280 --dit_fsdp --t5_fsdp --ulysses_size 8 --ckpt_dir CKPT/Matrix-Game-3.0 ")
    assert eight.replace(" --dit_fsdp --t5_fsdp --ulysses_size 8", "").replace("nproc_per_node=8", "nproc_per_node=1") == one
    assert "README.md:24, 54" in mg.multi_gpu and "test.sh" in mg.multi_gpu
    from worldgate.adapters import AdapterError

    with pytest.raises(AdapterError, match="gpus=0 is outside"):
        get_adapter("matrix-game-3", gpus=0).plan(worldmark_case(1))


def test_command_flags_and_output_video(mg):
    p = mg.plan(worldmark_case(1))
    cmd = p.files["command.txt"].split(" #")[0].strip()
    assert cmd.endswith("--save_name t-001 --output_dir OUT --actions actions.npz --no_overlay")
    assert p.extra["output_video"] == "t-001.mp4"  # pipeline/inference_pipeline.py:696: {output_dir}/{save_name}.mp4


# ---------------------------------------------------------------------------------------------------- the patch
import os
import py_compile
import runpy
import shutil
import sys
from pathlib import Path

from worldgate.adapters.matrix_game_3 import COMMIT, PATCH, MatrixGame3
from worldgate.adapters.patching import PatchError
from worldgate.adapters.repo import command_argv

#: the lines of Matrix-Game-3's generate.py, utils/utils.py and utils/visualize.py the patch touches (its anchors),
#: inside a little Python of our own
SYNTH = {
    "generate.py": '''import argparse

from utils.utils import get_data


def _parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument('--num_iterations', type=int, default=12)
    parser.add_argument("--use_base_model", action="store_true", help="Enable base model inference.")
    args = parser.parse_args()
    return args


def main():
    args = _parse_args()
    return args, get_data(57 + 40 * (args.num_iterations - 1))
''',
    "utils/utils.py": '''import torch


def Bench_actions_universal(num_frames):
    return {"keyboard_condition": torch.ones(num_frames, 6), "mouse_condition": torch.zeros(num_frames, 2)}


def get_data(num_frames):
    actions = Bench_actions_universal(num_frames)
    keyboard_condition_all = actions['keyboard_condition']
    mouse_condition_all = actions['mouse_condition']
    return keyboard_condition_all, mouse_condition_all
''',
    "utils/visualize.py": '''CALLS = []


def export_to_video(frames, path, fps):
    CALLS.append(("export", len(frames), path, fps))


def process_video(input_video, output_video, config, mouse_icon_path, mouse_scale=1.0, mouse_rotation=0, default_frame_res=(704, 1280)):
    CALLS.append(("overlay", len(input_video), output_video))
    export_to_video([f / 255 for f in input_video], output_video, fps=17)
''',
}
PATCHED = ["generate.py", "utils/utils.py", "utils/visualize.py", "worldgate_inputs.py"]
#: top-level names of the modules a test imports from a checkout copy (or stubs in for it)
CHECKOUT_MODULES = ("worldgate_inputs", "utils", "pipeline", "wan", "mg3_synth_generate")


@pytest.fixture
def clean_modules(monkeypatch):
    """Drop the modules a test imported from a checkout copy afterwards (third-party modules stay loaded); the
    environment variable the patch sets is restored."""
    monkeypatch.setenv("WORLDGATE_NO_OVERLAY", "unset-by-test")
    before = set(sys.modules)
    yield
    for k in set(sys.modules) - before:
        if k.split(".")[0] in CHECKOUT_MODULES:
            del sys.modules[k]


def _import_file(name: str, path: Path):
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _drop_checkout_modules(monkeypatch):
    for name in [k for k in sys.modules if k.split(".")[0] in CHECKOUT_MODULES]:
        monkeypatch.delitem(sys.modules, name)


def _synth(root: Path) -> None:
    for f, text in SYNTH.items():
        (root / f).parent.mkdir(parents=True, exist_ok=True)
        (root / f).write_text(text)


def test_patch_applies_to_the_anchored_lines(tmp_path, clean_modules, monkeypatch):
    import torch

    _synth(tmp_path)
    assert PATCH.missing(tmp_path) == PATCHED and PATCH.apply(tmp_path) == PATCHED
    assert PATCH.missing(tmp_path) == [] and MatrixGame3.repo_spec.patches == PATCH.markers()
    assert (tmp_path / "generate.py").read_text().count(PATCH.marker) == 2
    for f in PATCHED:
        py_compile.compile(str(tmp_path / f), doraise=True)
    snapshot = {f: (tmp_path / f).read_text() for f in PATCH.files()}
    assert PATCH.apply(tmp_path) == []  # idempotent
    assert {f: (tmp_path / f).read_text() for f in PATCH.files()} == snapshot
    plan = get_adapter("matrix-game-3", pitch_sign="-1").plan(up_case("W+R1 ^1 A1"))
    plan.write(tmp_path / "native")
    _drop_checkout_modules(monkeypatch)
    monkeypatch.syspath_prepend(str(tmp_path))
    gen = _import_file("mg3_synth_generate", tmp_path / "generate.py")
    from utils import visualize

    npz = str(tmp_path / "native" / "actions.npz")
    monkeypatch.setattr(sys, "argv", ["generate.py", "--num_iterations", str(plan.extra["num_iterations"]),
                                      "--actions", npz, "--no_overlay"])
    args, (kb, ms) = gen.main()
    assert args.actions == npz and args.no_overlay and os.environ["WORLDGATE_NO_OVERLAY"] == "1"
    assert kb.dtype == torch.float32 and tuple(kb.shape) == (plan.n_frames, 6) and tuple(ms.shape) == (plan.n_frames, 2)
    np.testing.assert_array_equal(kb.numpy(), plan.arrays["keyboard_cond"])
    np.testing.assert_array_equal(ms.numpy(), plan.arrays["mouse_cond"])
    assert ms[17, 0] == np.float32(-25 / (17 * 15))  # ^1 with pitch_sign=-1
    frames = [np.full((4, 4, 3), 255, np.uint8)] * 3
    visualize.process_video(frames, "out.mp4", None, "icon.png")
    assert visualize.CALLS == [("export", 3, "out.mp4", 17)]  # no overlay: straight to the writer, fps 17
    visualize.CALLS.clear()
    monkeypatch.setattr(sys, "argv", ["generate.py", "--num_iterations", "2"])
    args, (kb, ms) = gen.main()  # without the flags: the script's own rows and overlay
    assert kb.eq(1).all() and not ms.any() and "WORLDGATE_NO_OVERLAY" not in os.environ
    visualize.process_video(frames, "out.mp4", None, "icon.png")
    assert visualize.CALLS[0] == ("overlay", 3, "out.mp4")
    monkeypatch.setattr(sys, "argv", ["generate.py", "--num_iterations", "2", "--actions", npz])
    with pytest.raises(ValueError, match=r"keyboard_cond is \(57, 6\), this run needs \(97, 6\)"):
        gen.main()


def test_patch_refuses_a_file_without_its_anchor(tmp_path):
    _synth(tmp_path)
    (tmp_path / "utils" / "utils.py").write_text(SYNTH["utils/utils.py"].replace("actions['mouse_condition']",
                                                                                 'actions["mouse_condition"]'))
    with pytest.raises(PatchError, match=r"utils/utils\.py: the patch's anchor .*occurs 0 times"):
        PATCH.apply(tmp_path)
    assert not (tmp_path / "worldgate_inputs.py").exists()
    assert {"utils/utils.py", "worldgate_inputs.py"} <= set(PATCH.missing(tmp_path))  # not reported as applied


def test_repo_spec_pins_the_commit_and_weights():
    spec = MatrixGame3.repo_spec
    assert spec.commit == COMMIT == "71c3cd7f741311f8100f6cf9cde942b6c1378d11" and spec.subdir == "Matrix-Game-3"
    assert spec.weights_patterns == ("Matrix-Game-3.0/base_distilled_model/*",
                                     "Matrix-Game-3.0/models_t5_umt5-xxl-enc-bf16.pth",
                                     "Matrix-Game-3.0/google/umt5-xxl/*", "Matrix-Game-3.0/MG-LightVAE_v2.pth",
                                     "Matrix-Game-3.0/Wan2.2_VAE.pth")
    assert spec.requirements == ("requirements.txt",) and spec.entry == "generate.py"
    assert spec.patch is PATCH and PATCH.flags == ("--actions", "--no_overlay")
    cmd = get_adapter("matrix-game-3").plan(worldmark_case(1)).files["command.txt"]
    assert all(f in cmd.split(" #")[0].split() for f in PATCH.flags)  # the command passes exactly the patch's flags


# ------------------------------------------------------------------------------------- the real checkout (gated)


MG3 = _checkout("MATRIX_GAME_3_CHECKOUT", COMMIT)


@pytest.mark.skipif(MG3 is None, reason="set MATRIX_GAME_3_CHECKOUT to Matrix-Game-3/ of SkyworkAI/Matrix-Game at "
                                        + COMMIT)
@pytest.mark.parametrize("sign", ["+1", "-1"])
def test_patched_generate_builds_the_plans_actions(tmp_path, monkeypatch, clean_modules, sign):
    """The real generate.py, patched, run as __main__ on the plan's command line: the real get_data returns exactly
    the plan's rows (bf16 [1, F, dim]) and integrates them into the poses the plan re-computes (extrinsics_all); the
    real process_video writes raw frames at 17 fps with --no_overlay (the DiT/VAE/T5 pipeline and wan configs
    stubbed; the pipeline stub calls get_data as pipeline/inference_pipeline.py:381-394 does)."""
    import types

    import torch
    from PIL import Image

    repo = tmp_path / "Matrix-Game-3"
    shutil.copytree(MG3, repo, ignore=shutil.ignore_patterns(".git", "Matrix-Game-3.0", "assets", "demo_images",
                                                             "*.gif", "*.mp4", "*.pdf"))
    assert PATCH.apply(repo) == PATCHED
    img = tmp_path / "frame.png"
    Image.fromarray(np.full((720, 1080, 3), 90, np.uint8)).save(img)
    case = Case(id="gated", suite="t", trajectory=Trajectory.parse("W+R2 ^1 A+L1 v1 D1 S+R1"), image=str(img),
                intrinsics=REAL_K, image_size=REAL_SIZE, prompt="A street.")
    plan = get_adapter("matrix-game-3", pitch_sign=sign).plan(case)
    native = tmp_path / "work" / "native"
    plan.write(native, seed=5)
    ckpt = tmp_path / "weights"
    ckpt.mkdir()
    argv = command_argv(plan.files["command.txt"], plan.files, native, {"python": sys.executable, "ckpt": ckpt},
                        plan.extra["image"], 5)
    i = argv.index("generate.py")
    assert argv[1:i] == ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node=1"]
    seen = {}

    class Pipeline:
        def __init__(self, **kw):
            seen["init"] = kw

        def generate(self, text, pil_image, max_area, shift, num_inference_steps, guide_scale, seed, use_base_model,
                     args):
            from utils.utils import get_data

            seen.update(text=text, max_area=max_area, steps=num_inference_steps, seed=seed, args=args)
            height, width = int(args.size.split("*")[0]), int(args.size.split("*")[1])  # inference_pipeline.py:381-382
            num_frames = 57 + (args.num_iterations - 1) * 40  # :385-392
            seen["data"] = get_data(num_frames, height, width, pil_image, device="cpu", dtype=torch.bfloat16)  # :394

    def export_to_video(frames, path, fps):
        seen["export"] = (np.asarray(frames), path, fps)

    cfg = types.SimpleNamespace(sample_shift=5.0, sample_guide_scale=5.0, num_heads=40)
    stubs = {"wan": {}, "wan.configs": {"MAX_AREA_CONFIGS": {"704*1280": 704 * 1280}, "WAN_CONFIGS": {"matrix_game3": cfg}},
             "wan.distributed": {}, "wan.distributed.util": {"init_distributed_group": lambda: None},
             "pipeline": {}, "pipeline.inference_interactive_pipeline": {"MatrixGame3Pipeline": Pipeline},
             "pipeline.inference_pipeline": {"MatrixGame3Pipeline": Pipeline},
             "einops": {"rearrange": None}, "trimesh": {},
             "diffusers": {}, "diffusers.utils": {"export_to_video": export_to_video}}
    _drop_checkout_modules(monkeypatch)
    for name in [k for k in sys.modules if k.split(".")[0] in ("diffusers", "einops", "trimesh")]:
        monkeypatch.delitem(sys.modules, name)
    for name, attrs in stubs.items():
        m = types.ModuleType(name)
        for k, v in attrs.items():
            setattr(m, k, v)
        monkeypatch.setitem(sys.modules, name, m)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)  # generate.py:183
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.chdir(repo)
    monkeypatch.syspath_prepend(str(repo))
    monkeypatch.setattr(sys, "argv", argv[i:])
    runpy.run_path(str(repo / "generate.py"), run_name="__main__")
    args = seen["args"]
    assert args.actions == str(native / "actions.npz") and args.no_overlay and args.ulysses_size == 1
    assert seen["text"] == "A street." and seen["steps"] == 3 and seen["seed"] == 5 and seen["max_area"] == 704 * 1280
    assert seen["init"]["use_sp"] is False and not seen["init"]["dit_fsdp"]
    image, extrinsics, kb, ms = seen["data"]
    F = plan.n_frames
    assert tuple(image.shape[-2:]) == (704, 1280)
    assert kb.dtype == torch.bfloat16 and tuple(kb.shape) == (1, F, 6) and tuple(ms.shape) == (1, F, 2)
    assert torch.equal(kb, torch.from_numpy(plan.arrays["keyboard_cond"]).unsqueeze(0).bfloat16())
    assert torch.equal(ms, torch.from_numpy(plan.arrays["mouse_cond"]).unsqueeze(0).bfloat16())
    # the real integration from the real rows: the poses the plan re-computes (get_extrinsics, utils/cam_utils.py)
    ex = np.asarray(extrinsics, np.float64)
    assert ex.shape == (F, 4, 4)
    np.testing.assert_allclose(ex, plan.arrays["extrinsics_all"], atol=2e-5)
    s = 1 if sign == "+1" else -1
    a, b = plan.segment_frames[1]  # ^1: the real code tilts the camera's forward to +y (image-down) for +mouse[0]
    f = (ex[a, :3, :3].T @ ex[b, :3, :3])[:, 2]
    np.testing.assert_allclose(f, [0, s * math.sin(math.radians(25)), math.cos(math.radians(25))], atol=1e-5)
    assert os.environ["WORLDGATE_NO_OVERLAY"] == "1"
    from utils.visualize import process_video  # the real (patched) writer

    frames = np.random.default_rng(0).integers(0, 255, (3, 704, 1280, 3), dtype=np.uint8)
    process_video(frames.copy(), "OUT/gated.mp4", (np.ones((3, 6)), np.zeros((3, 2))), "assets/images/mouse.png")
    got, path, fps = seen["export"]
    assert path == "OUT/gated.mp4" and fps == 17
    np.testing.assert_array_equal(got, frames / 255)  # nothing drawn


def test_context_policies_are_refused_with_the_reason_cited():
    """No KV cache and a hard-coded 5-latent FoV memory: no flag chooses a policy, and the refusal says where."""
    why = get_adapter("matrix-game-3").context_support("sliding_window")
    assert "no context policy can be chosen from outside" in why and "max_mem_f = 5" in why
