"""Matrix-Game 1.0: keyboard [forward, back, left, right, jump, attack] and mouse [pitch, yaw] (+-0.05) per frame at
16 fps, one clip of F = 4k + 1 frames; frames 0-4 are the conditioning still (--num_pre_frames 5), so rows 0-3 are idle
and row 4 + j = the command of time j / fps."""

import numpy as np
import pytest

from adapter_conformance import gated_checkout as _checkout
from adapter_conformance import REAL_K, REAL_SIZE, AdapterConformance, worldmark_case
from worldgate.adapters import AdapterError, UnsupportedMotion, get_adapter
from worldgate.trajectories import library
from worldgate.trajectories.core import Trajectory
from worldgate.trajectories.suites import Case


class TestMatrixGame1Conformance(AdapterConformance):
    adapter_name = "matrix-game-1"


@pytest.fixture
def mg():
    return get_adapter("matrix-game-1")


def case_of(text: str, cid="t") -> Case:
    return Case(id=cid, suite="t", trajectory=Trajectory.parse(text), image="x.jpg", intrinsics=REAL_K,
                image_size=REAL_SIZE)


def test_w_for_2s_golden(mg):
    c = case_of("W2")
    p = mg.plan(c)
    kb, ms = p.arrays["keyboard_condition"], p.arrays["mouse_condition"]
    # 32 commanded frames at 16 fps after 4 idle rows: F = 1 + 4 * ceil(36 / 4) = 37; rows 4..35 hold W (row j acts on
    # frame j + 1), rows 0-3 reach only the known latent 1 (frames 1-4 = the image, pipeline_matrixgame.py:491-503)
    assert p.n_frames == 37 and kb.shape == (37, 6) and ms.shape == (37, 2)
    assert p.segment_frames == [(5, 37)] and p.extra["pre_rows"] == 4
    assert not kb[:4].any() and not kb[36].any() and not ms.any()
    np.testing.assert_array_equal(kb[4:36], np.tile([1, 0, 0, 0, 0, 0], (32, 1)))
    assert p.extra["video_length"] == 37 and not any("one clip of" in c for c in p.caveats)
    assert not any("trailing frames" in c for c in p.caveats)
    assert any("frames 0-4 are the conditioning image" in c and "rows 0-3 are held idle" in c for c in p.caveats)


def test_commanded_poses_hold_through_the_known_frames(mg):
    """c2w: the start pose for frames 0-4, then the trajectory's pose of time k/16 at frame 4 + k."""
    c = case_of("W2")
    p = mg.plan(c)
    c2w = p.arrays["c2w"]
    assert c2w.shape == (37, 4, 4)
    np.testing.assert_array_equal(c2w[:5], np.broadcast_to(np.eye(4), (5, 4, 4)))
    np.testing.assert_allclose(c2w[4:], c.trajectory.poses(16.0, 33))
    np.testing.assert_allclose(c2w[5, :3, 3], [0, 0, 1.4 / 16])  # first move: 4 -> 5, one frame of walking
    np.testing.assert_allclose(c2w[36, :3, 3], [0, 0, 1.4 * 2])  # the end pose at frame 4 + 32
    assert np.all(np.diff(c2w[4:, 2, 3]) > 0) and not np.diff(c2w[:5, 2, 3]).any()


def test_id1_forward_and_id6_back(mg):
    p = mg.plan(worldmark_case(1))
    assert p.n_frames == 325 and p.segment_frames == [(5, 325)]
    kb = p.arrays["keyboard_condition"]
    assert kb[4:324, 0].all() and not kb[:4].any() and not kb[324].any()
    p = mg.plan(worldmark_case(6))  # W S
    kb = p.arrays["keyboard_condition"]
    assert p.n_frames == 645 and p.segment_frames == [(5, 325), (325, 645)]
    assert kb[323].tolist() == [1, 0, 0, 0, 0, 0] and kb[324].tolist() == [0, 1, 0, 0, 0, 0]
    assert kb[643].tolist() == [0, 1, 0, 0, 0, 0] and not kb[644].any()
    assert not kb[:, 4:].any()  # jump and attack idle
    assert any("one clip of 645 frames" in c for c in p.caveats)


def test_yaw_signs(mg):
    ms = mg.plan(worldmark_case(5)).arrays["mouse_condition"]  # R
    assert np.all(ms[4:324, 1] == np.float32(0.05)) and not ms[:, 0].any() and not ms[:4].any() and not ms[324:].any()
    ms = mg.plan(worldmark_case(7)).arrays["mouse_condition"]  # L R
    assert np.all(ms[4:324, 1] == np.float32(-0.05)) and np.all(ms[324:644, 1] == np.float32(0.05))


def test_lrud_pitch_up_is_plus_column_0(mg):
    c = Case(id="lrud", suite="t", trajectory=library.get("LRUD"), image="x.jpg", intrinsics=REAL_K,
             image_size=REAL_SIZE)
    p = mg.plan(c)
    ms, kb = p.arrays["mouse_condition"], p.arrays["keyboard_condition"]
    (v0, _), (l0, l1), (r0, r1), (u0, u1), (d0, d1), _ = p.segment_frames
    assert v0 == 5  # the first segment (a hold) starts after the known frames
    # segment frames are rows + 1: rows [u0 - 1, u1 - 1) carry U
    assert np.all(ms[u0 - 1:u1 - 1, 0] == np.float32(0.05)) and np.all(ms[d0 - 1:d1 - 1, 0] == np.float32(-0.05))
    assert np.all(ms[l0 - 1:l1 - 1, 1] < 0) and np.all(ms[r0 - 1:r1 - 1, 1] > 0)
    assert not ms[l0 - 1:r1 - 1, 0].any() and not ms[u0 - 1:d1 - 1, 1].any() and not kb.any()


def test_combined_move_and_look(mg):
    p = mg.plan(case_of("D+L1"))
    kb, ms = p.arrays["keyboard_condition"], p.arrays["mouse_condition"]
    assert p.n_frames == 21 and not kb[:4].any() and not ms[:4].any()
    assert kb[4:20].tolist() == [[0, 0, 0, 1, 0, 0]] * 16 and ms[4:20].tolist() == [[0, float(np.float32(-0.05))]] * 16
    assert not kb[20].any() and not ms[20].any()


def test_command_line_ckpt_and_no_seed(mg):
    cmd = mg.plan(worldmark_case(1)).files["command.txt"]
    assert cmd.split("  #")[0] == (
        "python inference_bench.py --image_path IMAGE_DIR --output_path OUT --video_length 325 --fps 16 "
        "--resolution 1280 720 --num_pre_frames 5 --guidance_scale 6 --inference_steps 50 --shift 15 --num_steps 50 "
        "--rel_l1_thresh 0.075 --max_images 1 --dit_path CKPT/dit --textenc_path CKPT --vae_path CKPT/vae "
        "--mouse_icon_path CKPT/assets/mouse.png --mouse_scale 0.1 --mouse_rotation -20 --bfloat16 "
        "--actions actions.npz --no_overlay")
    assert "SEED" not in cmd and "manual_seed(42)" in mg.info.no_seed


def test_max_frames_refuses_long_cases():
    mg = get_adapter("matrix-game-1", max_frames=65)
    with pytest.raises(UnsupportedMotion, match="needs 325 frames"):
        mg.plan(worldmark_case(1))
    with pytest.raises(AdapterError, match="4k \\+ 1"):
        get_adapter("matrix-game-1", max_frames=64)


# ---------------------------------------------------------------------------------------------------- gpus / output
def test_gpus_one_is_the_default_and_more_are_refused():
    assert get_adapter("matrix-game-1").multi_gpu == ""
    one = get_adapter("matrix-game-1", gpus=1).plan(worldmark_case(1)).files["command.txt"]
    assert one.startswith("python inference_bench.py ") and "torch.distributed" not in one
    with pytest.raises(AdapterError, match="no multi-GPU inference"):
        get_adapter("matrix-game-1", gpus=2).plan(worldmark_case(1))


def test_output_video_is_named_after_image_and_actions_file(mg):
    """inference_bench.py:204-206: OUT/<image stem>_<action_name>.mp4; the patch names the condition after the file."""
    assert mg.plan(worldmark_case(1)).extra["output_video"] == "000_actions.mp4"


# ---------------------------------------------------------------------------------------------------- the patch
import py_compile
import shutil
import sys
from pathlib import Path

from worldgate.adapters.matrix_game_1 import COMMIT, PATCH, MatrixGame1
from worldgate.adapters.patching import PatchError
from worldgate.adapters.repo import command_argv

#: the lines of inference_bench.py the patch touches (its anchors), inside a little Python of our own
SYNTH_BENCH = '''import argparse

from tools.visualize import process_video


def Bench_actions_76():
    return [{"action_name": "forward", "keyboard_condition": [[1, 0, 0, 0, 0, 0]] * 5, "mouse_condition": [[0, 0]] * 5}]


class VideoGenerator:
    def __init__(self, args):
        self.args = args

    def _process_condition(self, condition, image_path):
        img_tensors = (condition["keyboard_condition"], condition["mouse_condition"])
        output_path = image_path + "_" + condition["action_name"] + ".mp4"
        process_video(
            img_tensors,
            output_path,
            fps=self.args.fps
        )

    def generate_videos(self):
        conditions = Bench_actions_76()
        for condition in conditions:
            self._process_condition(condition, "img")


def parse_args(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--video_length", type=int, default=65)
    parser.add_argument("--fps", type=int, default=16,
                        help="Frames per second for the output video.")
    parser.add_argument("--gpu_id", type=str, default="0",
                        help="Separated gpu ids (e.g. 0,1,2,3)")
    return parser.parse_args(argv)
'''
#: a stand-in for tools/visualize.py (worldgate's own test code): both writers record their call
SYNTH_VISUALIZE = '''CALLS = []


def process_video(video, path, *a, fps=16, **k):
    CALLS.append(("process_video", video, path, fps))


def save_video(video, path, fps=16):
    CALLS.append(("save_video", video, path, fps))
'''

#: top-level names of the modules a test imports from a checkout copy (or stubs in for it)
CHECKOUT_MODULES = ("worldgate_inputs", "tools", "matrixgame", "condtions", "teacache_forward", "mg1_synth_bench",
                    "mg1_inference_bench")


@pytest.fixture
def clean_modules():
    """Drop the modules a test imported from a checkout copy afterwards; third-party modules stay loaded."""
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


def test_patch_applies_to_the_anchored_lines(tmp_path, clean_modules, monkeypatch):
    (tmp_path / "inference_bench.py").write_text(SYNTH_BENCH)
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "visualize.py").write_text(SYNTH_VISUALIZE)
    assert PATCH.missing(tmp_path) == ["inference_bench.py", "worldgate_inputs.py"]
    assert PATCH.apply(tmp_path) == ["inference_bench.py", "worldgate_inputs.py"]
    assert PATCH.missing(tmp_path) == [] and MatrixGame1.repo_spec.patches == PATCH.markers()
    text = (tmp_path / "inference_bench.py").read_text()
    assert text.count(PATCH.marker) == 3 and '"--actions"' in text and '"--no_overlay"' in text
    for f in ("inference_bench.py", "worldgate_inputs.py"):
        py_compile.compile(str(tmp_path / f), doraise=True)
    snapshot = {f: (tmp_path / f).read_text() for f in PATCH.files()}
    assert PATCH.apply(tmp_path) == []  # idempotent
    assert {f: (tmp_path / f).read_text() for f in PATCH.files()} == snapshot
    plan = get_adapter("matrix-game-1").plan(case_of("W+R1 A1 ^1"))
    plan.write(tmp_path / "native")
    _drop_checkout_modules(monkeypatch)
    monkeypatch.syspath_prepend(str(tmp_path))
    mod = _import_file("mg1_synth_bench", tmp_path / "inference_bench.py")
    from tools import visualize

    npz = str(tmp_path / "native" / "actions.npz")
    mod.VideoGenerator(mod.parse_args(["--video_length", str(plan.n_frames), "--actions", npz,
                                       "--no_overlay"])).generate_videos()
    ((writer, (kb, ms), path, fps),) = visualize.CALLS
    assert writer == "save_video" and path == "img_actions.mp4" and fps == 16
    np.testing.assert_array_equal(np.asarray(kb, np.float32), plan.arrays["keyboard_condition"])
    np.testing.assert_array_equal(np.asarray(ms, np.float32), plan.arrays["mouse_condition"])
    assert ms[4] == [0.0, float(np.float32(0.05))] and kb[4] == [1, 0, 0, 0, 0, 0] and not any(kb[0])
    visualize.CALLS.clear()
    mod.VideoGenerator(mod.parse_args([])).generate_videos()  # without the flags: the script's own
    assert [c[0] for c in visualize.CALLS] == ["process_video"] and visualize.CALLS[0][2] == "img_forward.mp4"
    with pytest.raises(ValueError, match=r"keyboard_condition is \(53, 6\), this run needs \(65, 6\)"):
        mod.VideoGenerator(mod.parse_args(["--actions", npz])).generate_videos()


def test_patch_refuses_a_file_without_its_anchor(tmp_path):
    (tmp_path / "inference_bench.py").write_text(SYNTH_BENCH.replace("conditions = Bench_actions_76()",
                                                                     "conditions = list(Bench_actions_76())"))
    with pytest.raises(PatchError, match=r"inference_bench\.py: the patch's anchor .*occurs 0 times"):
        PATCH.apply(tmp_path)
    assert not (tmp_path / "worldgate_inputs.py").exists()  # nothing half-applied
    assert (tmp_path / "inference_bench.py").read_text().count(PATCH.marker) == 0


def test_repo_spec_pins_the_commit():
    spec = MatrixGame1.repo_spec
    assert spec.commit == COMMIT == "f1bf6e6b26e7db9db86865478e325080ce0fc8ce" and spec.subdir == ""
    assert spec.weights_patterns == () and spec.requirements == ("requirements.txt",)
    assert spec.patch is PATCH and PATCH.flags == ("--actions", "--no_overlay")
    cmd = get_adapter("matrix-game-1").plan(worldmark_case(1)).files["command.txt"]
    assert all(f in cmd.split(" #")[0].split() for f in PATCH.flags)  # the command passes exactly the patch's flags


# ------------------------------------------------------------------------------------- the real checkout (gated)


MG1 = _checkout("MATRIX_GAME_1_CHECKOUT", COMMIT)


@pytest.mark.skipif(MG1 is None, reason="set MATRIX_GAME_1_CHECKOUT to a checkout of SkyworkAI/Matrix-Game at " + COMMIT)
def test_patched_bench_builds_the_plans_conditions(tmp_path, monkeypatch, clean_modules):
    """The real inference_bench.py, patched, parses the plan's command line, finds the case image in IMAGE_DIR and
    hands the pipeline exactly the plan's rows as bf16 [1, F, dim] tensors; --no_overlay writes through the real
    save_video at 16 fps (the 17B pipeline, VAE, text encoder and export_to_video stubbed)."""
    import types

    import torch
    from PIL import Image

    repo = tmp_path / "Matrix-Game"
    shutil.copytree(MG1, repo, ignore=shutil.ignore_patterns(".git", "GameWorldScore", "assets", "*.gif", "*.mp4"))
    assert PATCH.apply(repo) == ["inference_bench.py", "worldgate_inputs.py"]
    img = tmp_path / "000.png"
    Image.fromarray(np.full((720, 1080, 3), 90, np.uint8)).save(img)
    case = Case(id="gated", suite="t", trajectory=Trajectory.parse("W+R1 A1 ^1 S+L1 v0.5 D1"), image=str(img),
                intrinsics=REAL_K, image_size=REAL_SIZE)
    plan = get_adapter("matrix-game-1").plan(case)
    native = tmp_path / "work" / "native"
    plan.write(native)
    ckpt = tmp_path / "weights"
    ckpt.mkdir()
    argv = command_argv(plan.files["command.txt"], plan.files, native, {"python": sys.executable, "ckpt": ckpt},
                        plan.extra["image"])
    assert argv[1] == "inference_bench.py" and argv[argv.index("--actions") + 1] == str(native / "actions.npz")

    seen = {}

    class Stub:
        def __init__(self, *a, **k):
            pass

    class Pipeline(Stub):
        def __call__(self, **kw):
            seen.update(kw)
            return types.SimpleNamespace(videos=[torch.zeros(3, kw["video_length"], 4, 4)])

    class VideoProcessor(Stub):
        def preprocess(self, image, height, width):
            seen["preprocess"] = (image.size, height, width)
            return torch.zeros(1, 3, 8, 8)

    def export_to_video(frames, path, fps):
        seen["export"] = (len(frames), path, fps)

    stubs = {"diffusers": {}, "diffusers.utils": {"load_image": Stub, "export_to_video": export_to_video},
             "diffusers.video_processor": {"VideoProcessor": VideoProcessor}, "diffusers.models": {},
             "diffusers.models.modeling_outputs": {"Transformer2DModelOutput": Stub},
             "einops": {"rearrange": lambda x, pattern: x.permute(0, 2, 3, 1)},
             "peft": {"LoraConfig": Stub, "get_peft_model_state_dict": Stub, "set_peft_model_state_dict": Stub},
             "matrixgame": {}, "matrixgame.sample": {},
             "matrixgame.sample.pipeline_matrixgame": {"MatrixGameVideoPipeline": Pipeline},
             "matrixgame.model_variants": {"get_dit": Stub}, "matrixgame.vae_variants": {"get_vae": Stub},
             "matrixgame.encoder_variants": {"get_text_enc": Stub},
             "matrixgame.model_variants.matrixgame_dit_src": {"MGVideoDiffusionTransformerI2V": Stub},
             "matrixgame.sample.flow_matching_scheduler_matrixgame": {"FlowMatchDiscreteScheduler": Stub},
             "teacache_forward": {"teacache_forward": Stub}}
    _drop_checkout_modules(monkeypatch)
    for name in [k for k in sys.modules if k.split(".")[0] in ("diffusers", "einops", "peft")]:
        monkeypatch.delitem(sys.modules, name)
    for name, attrs in stubs.items():
        m = types.ModuleType(name)
        for k, v in attrs.items():
            setattr(m, k, v)
        monkeypatch.setitem(sys.modules, name, m)
    real_generator = torch.Generator
    monkeypatch.setattr(torch, "Generator", lambda device=None: real_generator("cpu"))  # :189 pins "cuda"
    monkeypatch.chdir(repo)
    monkeypatch.syspath_prepend(str(repo))
    monkeypatch.setattr(sys, "argv", argv[1:])
    bench = _import_file("mg1_inference_bench", repo / "inference_bench.py")
    args = bench.parse_args()
    assert args.actions == str(native / "actions.npz") and args.no_overlay and args.video_length == plan.n_frames
    assert args.num_pre_frames == 5 and args.fps == 16 and args.resolution == [1280, 720] and args.bfloat16
    gen = bench.VideoGenerator.__new__(bench.VideoGenerator)  # the model loading (_init_models) is skipped
    gen.args, gen.device = args, torch.device("cpu")
    gen.video_length, gen.guidance_scale = args.video_length, args.guidance_scale
    gen.vae = types.SimpleNamespace(config=types.SimpleNamespace(block_out_channels=[128, 256, 512, 512]))
    gen.pipeline = Pipeline()
    gen.generate_videos()
    F = plan.n_frames
    kb, ms = seen["keyboard_condition"], seen["mouse_condition"]
    assert seen["video_length"] == F and (seen["height"], seen["width"]) == (720, 1280)
    assert tuple(seen["initial_image"].shape[:1]) == (6,)  # the image + 5 copies (inference_bench.py:170-172)
    assert seen["preprocess"] == ((1080, 608), 720, 1280)  # centre crop to 16:9, float box (inference_bench.py:99-125)
    assert kb.dtype == torch.bfloat16 and tuple(kb.shape) == (1, F, 6) and tuple(ms.shape) == (1, F, 2)
    assert torch.equal(kb, torch.from_numpy(plan.arrays["keyboard_condition"]).unsqueeze(0).bfloat16())
    assert torch.equal(ms, torch.from_numpy(plan.arrays["mouse_condition"]).unsqueeze(0).bfloat16())
    assert not kb[0, :4].any() and not ms[0, :4].any() and kb[0, 4].tolist() == [1, 0, 0, 0, 0, 0]  # rows 0-3 idle
    assert ms[0, 4, 1] == torch.tensor(0.05).bfloat16()
    assert seen["export"] == (F, str(tmp_path / "work" / "out" / plan.extra["output_video"]), 16)
