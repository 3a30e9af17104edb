"""Matrix-Game 2.0: keyboard [W,S,A,D] and mouse [pitch, yaw] per frame at 12 fps, F = 4L-3 with L % 3 == 0."""

import numpy as np
import pytest

from adapter_conformance import gated_checkout as _checkout
from adapter_conformance import REAL_K, REAL_SIZE, AdapterConformance, worldmark_case
from worldgate.adapters import get_adapter
from worldgate.trajectories import library
from worldgate.trajectories.suites import Case


class TestMatrixGame2Conformance(AdapterConformance):
    adapter_name = "matrix-game-2"


@pytest.fixture
def mg():
    return get_adapter("matrix-game-2")


def test_id1_forward_golden(mg):
    p = mg.plan(worldmark_case(1))
    kb, ms = p.arrays["keyboard_cond"], p.arrays["mouse_cond"]
    # 240 frames at 12 fps + the conditioning frame -> L = 63 latents (a multiple of 3), F = 4*63-3 = 249
    assert p.extra["num_output_frames"] == 63 and kb.shape == (249, 4) and ms.shape == (249, 2)
    # row j = the command of time j/12 (frame j -> j+1): rows 0..239 drive frames 1..240 (action_module.py:225, 341)
    assert p.segment_frames == [(0, 240)] and p.extra["row_timing"] == "aligned"
    np.testing.assert_array_equal(kb[:240], np.tile([1, 0, 0, 0], (240, 1)))  # W is column 0 of [W,S,A,D]
    assert not kb[240:].any() and not ms.any()
    cmd = p.files["command.txt"]
    assert "--pretrained_model_path CKPT " in cmd and "--output_folder OUT " in cmd and "--num_output_frames 63 " in cmd


def test_id6_and_id11_goldens(mg):
    p = mg.plan(worldmark_case(6))  # W S
    kb = p.arrays["keyboard_cond"]
    assert p.segment_frames == [(0, 240), (240, 480)]
    assert kb[239].tolist() == [1, 0, 0, 0] and kb[240].tolist() == [0, 1, 0, 0]  # S is column 1, from t = 20 s
    p = mg.plan(worldmark_case(11))  # W S W: same 240 frames for every key
    assert [b - a for a, b in p.segment_frames] == [240, 240, 240]
    assert (p.n_frames + 3) % 4 == 0 and ((p.n_frames + 3) // 4) % 3 == 0


def test_yaw_right_is_plus_mouse_column_1(mg):
    ms = mg.plan(worldmark_case(5)).arrays["mouse_cond"]  # R
    assert np.all(ms[0:240, 1] == np.float32(0.1)) and not ms[240:].any() and not ms[:, 0].any()
    ms = mg.plan(worldmark_case(7)).arrays["mouse_cond"]  # L R
    assert np.all(ms[0:240, 1] < 0) and np.all(ms[240:480, 1] > 0)  # a flipped sign would fail here


def test_lrud_pitch_only_during_u_and_d(mg):
    c = Case(id="lrud", suite="t", trajectory=library.get("LRUD"), image="x.jpg", intrinsics=REAL_K,
             image_size=REAL_SIZE)
    p = mg.plan(c)
    ms, kb = p.arrays["mouse_cond"], p.arrays["keyboard_cond"]
    (_, _), (l0, l1), (r0, r1), (u0, u1), (d0, d1), _ = p.segment_frames
    assert np.all(ms[u0:u1, 0] > 0) and np.all(ms[d0:d1, 0] < 0)  # U up, D down (pitch column 0)
    assert not ms[l0:r1, 0].any() and not ms[u0:d1, 1].any() and not kb.any()
    assert any("turn rate is not matched" in c for c in p.caveats)


def test_row_timing_lagged_reproduces_v0_1(mg):
    """``row_timing=lagged``: row j = the command of time (j-1)/12, row 0 copied from row 1 (the v0.1 plan)."""
    lag = get_adapter("matrix-game-2", row_timing="lagged").plan(worldmark_case(6))  # W S
    kb = lag.arrays["keyboard_cond"]
    assert lag.segment_frames == [(1, 241), (241, 481)] and lag.extra["row_timing"] == "lagged"
    assert kb[0].tolist() == kb[1].tolist() == [1, 0, 0, 0] and kb[240].tolist() == [1, 0, 0, 0]
    assert kb[241].tolist() == [0, 1, 0, 0] and not kb[481:].any()
    aligned = mg.plan(worldmark_case(6)).arrays["keyboard_cond"]
    np.testing.assert_array_equal(aligned[:480], kb[1:481])  # the same commands, one row earlier
    assert any("one frame late" in c for c in lag.caveats)
    assert any("decided by the action module's window" in c for c in mg.plan(worldmark_case(6)).caveats)


def test_unknown_row_timing_is_refused():
    from worldgate.adapters import AdapterError

    with pytest.raises(AdapterError, match="row_timing"):
        get_adapter("matrix-game-2", row_timing="late").plan(worldmark_case(1))


# ---------------------------------------------------------------------------------------------------- gpus / output
def test_gpus_one_is_the_default_and_more_are_refused():
    from worldgate.adapters import AdapterError

    assert get_adapter("matrix-game-2").multi_gpu == ""
    one = get_adapter("matrix-game-2", gpus=1).plan(worldmark_case(1)).files["command.txt"]
    assert one.startswith("python inference.py ") and "torch.distributed" not in one
    with pytest.raises(AdapterError, match="no multi-GPU inference"):
        get_adapter("matrix-game-2", gpus=2).plan(worldmark_case(1))


def test_output_video_is_the_overlay_free_demo_mp4(mg):
    """inference.py:156 writes OUT/demo.mp4 raw and :157 OUT/demo_icon.mp4 with the overlay, later (the newest)."""
    assert mg.plan(worldmark_case(1)).extra["output_video"] == "demo.mp4"


# ---------------------------------------------------------------------------------------------------- the patch
import py_compile
import shutil
import sys
from pathlib import Path

from worldgate.adapters.matrix_game_2 import COMMIT, PATCH, MatrixGame2
from worldgate.adapters.patching import PatchError
from worldgate.adapters.repo import command_argv
from worldgate.trajectories.core import Trajectory

#: the lines of Matrix-Game-2/inference.py the patch touches (its anchors), inside a little Python of our own
SYNTH_INFERENCE = '''import argparse
import torch


def parse_args(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--num_output_frames", type=int, default=150,
                        help="Number of output latent frames")
    parser.add_argument("--pretrained_model_path", type=str, default="Matrix-Game-2.0", help="Path to the VAE model folder")
    return parser.parse_args(argv)


class Game:
    def __init__(self, args):
        self.args = args
        self.device = torch.device("cpu")
        self.weight_dtype = torch.bfloat16

    def generate_videos(self, mode="universal"):
        num_frames = (self.args.num_output_frames - 1) * 4 + 1
        conditional_dict = {}
        mouse_condition = torch.zeros(1, num_frames, 2).to(dtype=self.weight_dtype)
        conditional_dict['mouse_cond'] = mouse_condition
        keyboard_condition = torch.ones(1, num_frames, 4).to(dtype=self.weight_dtype)
        conditional_dict['keyboard_cond'] = keyboard_condition
        return conditional_dict, keyboard_condition, mouse_condition
'''


#: top-level names of the modules a test imports from a checkout copy (or stubs in for it)
CHECKOUT_MODULES = ("worldgate_inputs", "utils", "pipeline", "wan", "demo_utils", "mg2_synth_inference", "mg2_inference")


@pytest.fixture
def clean_modules():
    """Drop the modules a test imported from a checkout copy (worldgate_inputs, inference, its packages) afterwards;
    third-party modules (torch, ...) stay loaded."""
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


def short_case(image="x.jpg") -> Case:
    return Case(id="short", suite="t", trajectory=Trajectory.parse("W+R1 A1 ^1 S+L1 v0.5 D1"), image=image,
                intrinsics=REAL_K, image_size=REAL_SIZE)


def test_patch_applies_to_the_anchored_lines(tmp_path, clean_modules, monkeypatch):
    import torch

    (tmp_path / "inference.py").write_text(SYNTH_INFERENCE)
    assert PATCH.missing(tmp_path) == ["inference.py", "worldgate_inputs.py"]
    assert PATCH.apply(tmp_path) == ["inference.py", "worldgate_inputs.py"]
    assert PATCH.missing(tmp_path) == [] and MatrixGame2.repo_spec.patches == PATCH.markers()
    text = (tmp_path / "inference.py").read_text()
    assert text.count(PATCH.marker) == 2 and '"--actions"' in text
    for f in ("inference.py", "worldgate_inputs.py"):
        py_compile.compile(str(tmp_path / f), doraise=True)
    snapshot = {f: (tmp_path / f).read_text() for f in PATCH.files()}
    assert PATCH.apply(tmp_path) == []  # idempotent
    assert {f: (tmp_path / f).read_text() for f in PATCH.files()} == snapshot
    # the patched lines really put worldgate's rows into conditional_dict, typed like the script's own
    plan = get_adapter("matrix-game-2").plan(short_case())
    plan.write(tmp_path / "native")
    monkeypatch.syspath_prepend(str(tmp_path))
    mod = _import_file("mg2_synth_inference", tmp_path / "inference.py")
    L = plan.extra["num_output_frames"]
    args = mod.parse_args(["--num_output_frames", str(L), "--actions", str(tmp_path / "native" / "actions.npz")])
    cond, kb, ms = mod.Game(args).generate_videos()
    assert cond["keyboard_cond"] is kb and cond["mouse_cond"] is ms  # the overlay's config gets the same rows
    assert kb.dtype == torch.bfloat16 and tuple(kb.shape) == (1, plan.n_frames, 4) and tuple(ms.shape) == (1, plan.n_frames, 2)
    assert torch.equal(kb, torch.from_numpy(plan.arrays["keyboard_cond"]).unsqueeze(0).to(torch.bfloat16))
    assert torch.equal(ms, torch.from_numpy(plan.arrays["mouse_cond"]).unsqueeze(0).to(torch.bfloat16))
    assert ms[0, 0].tolist() == [0.0, 0.10009765625]  # W+R: +yaw at bf16(0.1)
    own, _, _ = mod.Game(mod.parse_args(["--num_output_frames", "3"])).generate_videos()
    assert own["keyboard_cond"].eq(1).all() and not own["mouse_cond"].any()  # without --actions: the script's own
    with pytest.raises(ValueError, match=r"keyboard_cond is \(249, 4\), this run needs \(9, 4\)"):
        np.savez(tmp_path / "long.npz", **get_adapter("matrix-game-2").plan(worldmark_case(1)).files["actions.npz"])
        mod.Game(mod.parse_args(["--num_output_frames", "3", "--actions", str(tmp_path / "long.npz")])).generate_videos()
    with pytest.raises(ValueError, match="mode is 'templerun'"):
        mod.Game(args).generate_videos(mode="templerun")


def test_patch_refuses_a_file_without_its_anchor(tmp_path):
    (tmp_path / "inference.py").write_text(SYNTH_INFERENCE.replace("conditional_dict['keyboard_cond'] = keyboard_condition",
                                                                   "conditional_dict['keyboard'] = keyboard_condition"))
    with pytest.raises(PatchError, match=r"inference\.py: the patch's anchor .*occurs 0 times"):
        PATCH.apply(tmp_path)
    assert not (tmp_path / "worldgate_inputs.py").exists()  # nothing half-applied
    assert (tmp_path / "inference.py").read_text().count(PATCH.marker) == 0
    with pytest.raises(PatchError, match=r"inference\.py is missing"):
        PATCH.apply(tmp_path / "empty")


def test_repo_spec_pins_the_commit_and_weights():
    spec = MatrixGame2.repo_spec
    assert spec.commit == COMMIT == "3ceb3114b65ff2c70ce9c3d6cab207b340ebe650" and spec.subdir == "Matrix-Game-2"
    assert spec.weights_patterns == ("base_distilled_model/base_distill.safetensors", "Wan2.1_VAE.pth",
                                     "models_clip_open-clip-xlm-roberta-large-vit-huge-14.pth", "xlm-roberta-large/*")
    assert spec.requirements == ("requirements.txt",) and spec.entry == "inference.py"
    assert spec.patch is PATCH and PATCH.flags == ("--actions",)
    cmd = get_adapter("matrix-game-2").plan(worldmark_case(1)).files["command.txt"]
    assert all(f in cmd.split(" #")[0].split() for f in PATCH.flags)  # the command passes exactly the patch's flags


# ------------------------------------------------------------------------------------- the real checkout (gated)


MG2 = _checkout("MATRIX_GAME_2_CHECKOUT", COMMIT)


@pytest.mark.skipif(MG2 is None, reason="set MATRIX_GAME_2_CHECKOUT to Matrix-Game-2/ of SkyworkAI/Matrix-Game at "
                                        + COMMIT)
def test_patched_inference_builds_the_plans_actions(tmp_path, monkeypatch, clean_modules):
    """The real inference.py, patched, parses the plan's command line and runs generate_videos up to the pipeline:
    conditional_dict holds exactly the plan's rows as bf16 [1, F, dim] (models, VAE, CLIP and the writer stubbed; the
    script's config, conditions and tensor code are its own)."""
    import types

    import torch
    from PIL import Image

    repo = tmp_path / "Matrix-Game-2"
    shutil.copytree(MG2, repo, ignore=shutil.ignore_patterns(".git", "Matrix-Game-2.0", "assets", "demo_images",
                                                             "*.gif", "*.mp4", "*.pdf"))
    assert PATCH.apply(repo) == ["inference.py", "worldgate_inputs.py"]
    img = tmp_path / "frame.png"
    Image.fromarray(np.full((720, 1080, 3), 90, np.uint8)).save(img)
    plan = get_adapter("matrix-game-2").plan(short_case(str(img)))
    native = tmp_path / "native"
    plan.write(native, seed=5)
    ckpt = tmp_path / "weights"
    ckpt.mkdir()
    argv = command_argv(plan.files["command.txt"], plan.files, native, {"python": sys.executable, "ckpt": ckpt},
                        plan.extra["image"], 5)
    assert argv[1] == "inference.py" and argv[argv.index("--actions") + 1] == str(native / "actions.npz")

    seen = {}

    class Stub:
        def __init__(self, *a, **k):
            pass

    class Pipeline(Stub):
        def inference(self, noise, conditional_dict, **kw):
            seen["noise"], seen["cond"], seen["mode"] = noise, conditional_dict, kw.get("mode")
            L = noise.shape[2]
            return [torch.zeros(1, 4 * L - 3, 3, 4, 4)]

    class Vae(Stub):
        clip = types.SimpleNamespace(encode_video=lambda image: torch.zeros(1, 257, 1280))

        def encode(self, x, device=None, **kw):
            return torch.zeros(1, 16, (x.shape[2] - 1) // 4 + 1, 44, 80)

    def process_video(video, path, config, icon, mouse_scale=1.0, process_icon=True, mode="universal"):
        seen.setdefault("written", []).append((path, process_icon, len(video), config))

    stubs = {"pipeline": {"CausalInferencePipeline": Pipeline}, "wan": {}, "wan.vae": {},
             "wan.vae.wanx_vae": {"get_wanx_vae_wrapper": Vae}, "demo_utils": {},
             "demo_utils.vae_block3": {"VAEDecoderWrapper": Stub}, "utils.visualize": {"process_video": process_video},
             "utils.wan_wrapper": {"WanDiffusionWrapper": Stub}, "diffusers": {},
             "diffusers.utils": {"load_image": lambda p: Image.open(p).convert("RGB")},
             "einops": {"rearrange": lambda x, pattern: x.permute(0, 1, 3, 4, 2)}}
    for name in [k for k in sys.modules if k.split(".")[0] in ("utils", "pipeline", "wan", "demo_utils", "worldgate_inputs")]:
        monkeypatch.delitem(sys.modules, name)
    for name, attrs in stubs.items():
        m = types.ModuleType(name)
        for k, v in attrs.items():
            setattr(m, k, v)
        monkeypatch.setitem(sys.modules, name, m)
    monkeypatch.chdir(repo)
    monkeypatch.syspath_prepend(str(repo))
    monkeypatch.setattr(sys, "argv", argv[1:])
    inference = _import_file("mg2_inference", repo / "inference.py")
    args = inference.parse_args()
    assert args.actions == str(native / "actions.npz") and args.num_output_frames == plan.extra["num_output_frames"]
    assert args.output_folder == str(tmp_path / "out") and args.seed == 5 and args.img_path == str(img.resolve())

    def fake_init_models(self):
        self.pipeline, self.vae = Pipeline(), Vae()

    monkeypatch.setattr(inference.InteractiveGameInference, "_init_models", fake_init_models)
    game = inference.InteractiveGameInference(args)  # the script's own config load and frame transform
    game.device = torch.device("cpu")  # the script pins "cuda" (inference.py:35)
    game.generate_videos()
    F, L = plan.n_frames, plan.extra["num_output_frames"]
    cond = seen["cond"]
    assert seen["mode"] == "universal" and tuple(seen["noise"].shape) == (1, 16, L, 44, 80)
    assert tuple(cond["keyboard_cond"].shape) == (1, F, 4) and tuple(cond["mouse_cond"].shape) == (1, F, 2)
    assert cond["keyboard_cond"].dtype == torch.bfloat16 and cond["mouse_cond"].dtype == torch.bfloat16
    assert torch.equal(cond["keyboard_cond"], torch.from_numpy(plan.arrays["keyboard_cond"]).unsqueeze(0).bfloat16())
    assert torch.equal(cond["mouse_cond"], torch.from_numpy(plan.arrays["mouse_cond"]).unsqueeze(0).bfloat16())
    assert cond["keyboard_cond"][0, :12].float().tolist() == [[1, 0, 0, 0]] * 12  # W+R1: W for 12 rows ...
    assert cond["mouse_cond"][0, :12, 1].eq(torch.tensor(0.1).bfloat16()).all()  # ... with +yaw
    # the writer: OUT/demo.mp4 first, raw (the plan's output_video), then demo_icon.mp4 with the commanded overlay
    (raw, icon) = seen["written"]
    assert raw[:3] == (args.output_folder + "/" + plan.extra["output_video"], False, F)
    assert icon[:3] == (args.output_folder + "/demo_icon.mp4", True, F)
    np.testing.assert_array_equal(icon[3][0], plan.arrays["keyboard_cond"])
