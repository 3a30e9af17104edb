"""Matrix-Game 3.5: camera.npz with metric OpenCV c2w + [fx, fy, cx, cy] at 1280x704, N = 1 + 84 K poses at 16 fps."""

import math

import numpy as np
import pytest

from adapter_conformance import (REAL_K, REAL_SIZE, AdapterConformance, gated_checkout, gated_plan, lift_functions,
                                 worldmark_case)
from worldgate.adapters import get_adapter
from worldgate.trajectories import library
from worldgate.trajectories.suites import Case


class TestMatrixGame35Conformance(AdapterConformance):
    adapter_name = "matrix-game-3.5"


@pytest.fixture
def mg():
    return get_adapter("matrix-game-3.5")


def test_id1_forward_golden(mg):
    p = mg.plan(worldmark_case(1))
    cam = p.files["camera.npz"]
    c2w, K = cam["extrinsics_c2w"], cam["intrinsics"]
    # 320 frames + anchor = 321 -> 1 + 84*4 = 337 poses, 4 blocks
    assert c2w.shape == (337, 4, 4) and c2w.dtype == np.float32 and K.shape == (337, 4)
    assert p.n_frames == 337 and p.extra["num_blocks"] == 4 and p.segment_frames == [(0, 320)]
    np.testing.assert_array_equal(c2w[0], np.eye(4, dtype=np.float32))
    np.testing.assert_allclose(c2w[:321, 2, 3], 1.4 / 16 * np.arange(321), rtol=1e-6)  # +Z forward, metres
    np.testing.assert_allclose(c2w[321:, 2, 3], 28.0, rtol=1e-6)  # the tail holds the final pose
    assert not c2w[:, :2, 3].any() and np.all(np.diff(c2w[:321, 2, 3]) > 0)
    np.testing.assert_array_equal(c2w[:, :3, :3], np.broadcast_to(np.eye(3, dtype=np.float32), (337, 3, 3)))
    assert p.files["distilled.yaml"] == "profile: standard\nnum_blocks: 4\nseed: SEED\n"  # the rollout seed goes in
    assert "--config distilled.yaml" in p.files["command.txt"] and "--camera camera.npz" in p.files["command.txt"]


def test_ids_6_and_11(mg):
    p = mg.plan(worldmark_case(6))  # 640 frames -> 8 blocks, 673 poses
    assert p.n_frames == 673 and p.extra["num_blocks"] == 8 and p.segment_frames == [(0, 320), (320, 640)]
    c2w = p.arrays["extrinsics_c2w"]
    assert c2w[320, 2, 3] == pytest.approx(28.0) and abs(c2w[640, 2, 3]) < 1e-5
    p = mg.plan(worldmark_case(11))  # 960 frames -> 12 blocks
    assert p.n_frames == 1009 and [b - a for a, b in p.segment_frames] == [320, 320, 320]


def test_yaw_right_sign(mg):
    c2w = mg.plan(worldmark_case(5)).arrays["extrinsics_c2w"]  # R at 25 deg/s
    assert c2w[16, 0, 2] == pytest.approx(math.sin(math.radians(25)), abs=1e-6)  # forward -> +x: a right turn
    assert not c2w[:, :3, 3].any()
    heading = np.unwrap(np.arctan2(c2w[:321, 0, 2], c2w[:321, 2, 2]))
    assert np.all(np.diff(heading) > 0)
    c2w = mg.plan(worldmark_case(7)).arrays["extrinsics_c2w"]  # L R
    assert c2w[16, 0, 2] < -0.4 and np.allclose(c2w[640], np.eye(4), atol=1e-5)


def test_lrud_pitch_only_during_u_and_d(mg):
    c = Case(id="lrud", suite="t", trajectory=library.get("LRUD"), image="x.jpg", intrinsics=REAL_K,
             image_size=REAL_SIZE)
    p = mg.plan(c)
    c2w = p.arrays["extrinsics_c2w"]
    # boundaries 0, 2, 5.6, 9.2, 11, 12.8, 13.8 s at 16 fps: 0, 32, 90, 148, 176, 205, 221 -> 3 blocks
    assert p.segment_frames == [(0, 32), (32, 90), (90, 148), (148, 176), (176, 205), (205, 221)]
    assert p.n_frames == 253
    pitch = np.degrees(-np.arcsin(c2w[:, 1, 2]))  # OpenCV: looking up moves forward towards -y
    # pose i is at t = i / 16: frame 148 (9.25 s) is already 0.05 s into U, frame 205 (12.8125 s) is in H
    assert np.allclose(pitch[:148], 0, atol=1e-4) and np.allclose(pitch[205:], 0, atol=1e-4)
    assert pitch[148] == pytest.approx(1.25, abs=1e-4) and pitch[176] == pytest.approx(45.0, abs=1e-4)
    assert np.all(pitch[148:205] > 0)
    s = math.sqrt(0.5)
    np.testing.assert_allclose(c2w[176, :3, 2], [0, -s, s], atol=1e-6)  # U is up (-y), not down
    assert not c2w[:, :3, 3].any()


def test_intrinsics_follow_crop_and_stretch(mg):
    fx, fy, cx, cy = REAL_K
    p = mg.plan(worldmark_case(1))  # 1080x720: crop to 1080x704 (top 8), stretch x by 1280/1080
    K = p.intrinsics
    np.testing.assert_allclose(p.files["camera.npz"]["intrinsics"][0], [fx * 1280 / 1080, fy, 640, 352], rtol=1e-6)
    assert K["transform"]["crop"] == {"left": 0, "top": 8, "width": 1080, "height": 704}
    assert K["native_hfov_deg"] == pytest.approx(K["case_hfov_deg"], abs=1e-4)  # width kept, so hfov kept
    big = Case(id="big", suite="t", trajectory=library.worldmark(1), image="x.jpg",
               intrinsics=[1400.0, 1400.0, 960.0, 540.0], image_size=(1920, 1080))
    K = mg.plan(big).intrinsics  # pure centre crop to 1280x704, no resize
    assert K["native"] == [1400.0, 1400.0, 640.0, 352.0]
    assert K["transform"]["crop"] == {"left": 320, "top": 188, "width": 1280, "height": 704}
    assert K["native_hfov_deg"] == pytest.approx(math.degrees(2 * math.atan(640 / 1400)))


def test_base_variant_command():
    p = get_adapter("matrix-game-3.5", variant="base").plan(worldmark_case(1, view="third"))
    assert "distilled.yaml" not in p.files
    assert "python infer.py --person third" in p.files["command.txt"] and "--num-blocks 4" in p.files["command.txt"]


def test_camera_npz_round_trip(mg, tmp_path):
    p = mg.plan(worldmark_case(7))
    p.write(tmp_path)
    with np.load(tmp_path / "camera.npz", allow_pickle=False) as z:
        assert set(z.files) == {"extrinsics_c2w", "intrinsics"}
        np.testing.assert_array_equal(z["extrinsics_c2w"], p.arrays["extrinsics_c2w"])


def test_commands_use_the_checkpoint_and_write_into_out():
    """ckpt is honoured (README.md:74-100 layout under CKPT: the Hub downloads' own folders, which the README's
    symlinks point into, :76-82) and the video goes to the runner's OUT, never into the checkout (distilled --output
    is an .mp4 path, infer_distilled.py:43, 64-65; base --output is a folder, infer.py:406)."""
    cmd = get_adapter("matrix-game-3.5").plan(worldmark_case(1)).files["command.txt"]
    assert "--checkpoint CKPT/Matrix-Game-3.5-Distilled/first-person.safetensors " in cmd and "checkpoints/" not in cmd
    # the tokenizer under the same CKPT: its default lookup is the checkout's checkpoints/ (infer.py:55, 61-63)
    assert ("--wan-dir CKPT/Wan2.2-TI2V-5B --tokenizer-dir CKPT/Wan2.2-TI2V-5B/google/umt5-xxl "
            "--da3-dir CKPT/DA3NESTED-GIANT-LARGE-1.1 ") in cmd
    assert cmd.rstrip().endswith("--output OUT/result.mp4") and "--camera-convention c2w " in cmd
    cmd = get_adapter("matrix-game-3.5", variant="base").plan(worldmark_case(1, view="third")).files["command.txt"]
    assert ("--ckpt CKPT/Matrix-Game-3.5-Base/third-person.safetensors --wan-dir CKPT/Wan2.2-TI2V-5B "
            "--tokenizer-dir CKPT/Wan2.2-TI2V-5B/google/umt5-xxl ") in cmd
    assert "--output OUT --name " in cmd and "--seed SEED" in cmd


# ------------------------------------------------------------------------------------------- gpus, setup, output
@pytest.mark.parametrize("variant", ["distilled", "base"])
def test_gpus_1_is_plain_and_above_1_refused(variant):
    """One GPU (README.md:36); both entry points run their worker with accelerate's 1-process config
    (configs/accelerate_inference_1gpu.yaml; infer.py:304-307)."""
    from worldgate.adapters import AdapterError

    a = get_adapter("matrix-game-3.5", variant=variant)
    cmd = a.plan(worldmark_case(1)).files["command.txt"]
    assert cmd == get_adapter("matrix-game-3.5", variant=variant, gpus=1).plan(worldmark_case(1)).files["command.txt"]
    assert cmd.startswith("python infer_distilled.py " if variant == "distilled" else "python infer.py ")
    with pytest.raises(AdapterError, match="matrix-game-3.5 has no multi-GPU inference .* gpus=2"):
        get_adapter("matrix-game-3.5", variant=variant, gpus=2).plan(worldmark_case(1))


def test_output_video_is_declared_for_both_variants():
    """distilled: --output OUT/result.mp4; base: OUT/<first|third>_person/<name>/result.mp4 beside
    memory_visualization.mp4 (infer.py:255-258, 361-380), so the newest .mp4 could be the wrong one."""
    assert get_adapter("matrix-game-3.5").plan(worldmark_case(1)).extra["output_video"] == "result.mp4"
    p = get_adapter("matrix-game-3.5", variant="base").plan(worldmark_case(1, view="third"))
    assert p.extra["output_video"] == "third_person/t-001/result.mp4" and "--name t-001" in p.files["command.txt"]


def test_repo_spec_pins_the_commit_and_the_weights_the_command_reads():
    import worldgate.adapters.matrix_game_3_5 as mod

    spec = mod.MatrixGame35.repo_spec
    assert spec.commit == "fa6d2b628ac9b0f1657dc24689536d74bfeb51da" and spec.commit in mod.__doc__
    assert spec.subdir == "" and spec.requirements == ("requirements.txt",)
    assert spec.weights_dir == "Matrix-Game-3.5-Distilled" and spec.weights_patterns == ("first-person.safetensors",)
    cmd = get_adapter("matrix-game-3.5").plan(worldmark_case(1)).files["command.txt"]
    assert f"--checkpoint CKPT/{spec.weights_dir}/{spec.weights_patterns[0]} " in cmd


# ------------------------------------------------------------------------------------------- context policies
@pytest.mark.parametrize("profile", ["standard", "sink-anchor-context"])
@pytest.mark.parametrize("budget", [None, 3])  # full_kv takes no budget: any is moot
def test_full_kv_sets_context_chunks_to_the_whole_clip(profile, budget):
    import yaml

    from worldgate.adapters.context import ContextPolicy

    mg = get_adapter("matrix-game-3.5", profile=profile)
    plan = mg.plan(worldmark_case(1))  # 4 blocks = 28 model chunks of 3 latents
    ctx = mg.with_context(plan, ContextPolicy("full_kv", budget))
    assert "context.json" not in plan.files and plan.files["distilled.yaml"] == \
        f"profile: {profile}\nnum_blocks: 4\nseed: SEED\n"  # with_context works on a copy
    assert ctx.files["distilled.yaml"] == (f"profile: {profile}\nnum_blocks: 4\nseed: SEED\ncontext_chunks: 28\n"
                                           "dynamic_context: false\n")
    assert yaml.safe_load(ctx.files["distilled.yaml"].replace("SEED", "0")) == {
        "profile": profile, "num_blocks": 4, "seed": 0, "context_chunks": 28, "dynamic_context": False}
    assert ctx.files["command.txt"] == plan.files["command.txt"]  # the same --config distilled.yaml
    cj = ctx.files["context.json"]
    assert cj["name"] == "full_kv" and cj["distilled_yaml"] == {"context_chunks": 28,
                                                                         "dynamic_context": False}
    assert any("context_chunks 28" in c and "never trims" in c for c in ctx.caveats)
    assert ctx.extra["seed_files"] == ["distilled.yaml"]  # the seed still goes in


def test_full_kv_context_chunks_follow_num_blocks(mg):
    from worldgate.adapters.context import ContextPolicy

    p = mg.with_context(mg.plan(worldmark_case(6)), ContextPolicy("full_kv"))  # 8 blocks
    assert "context_chunks: 56\n" in p.files["distilled.yaml"]


def test_unexpressible_policies_are_refused_with_the_reason(mg):
    from worldgate.adapters.base import AdapterError
    from worldgate.adapters.context import ContextPolicy

    assert mg.info.context_policies == ("full_kv",)
    assert mg.context_support("full_kv") is None
    why = mg.context_support("sliding_window")
    assert "cannot apply context policy 'sliding_window' exactly" in why
    assert "causal_rollout.py:185-230" in why and "causal_config.py:124" in why and "advancing boundary anchor" in why
    why = mg.context_support("fov")
    assert "cannot apply context policy 'fov'" in why and "causal_memory.py:618-756" in why
    for name in ("sliding_window", "fov"):
        with pytest.raises(AdapterError, match=f"'{name}'"):
            mg.with_context(mg.plan(worldmark_case(1)), ContextPolicy(name, 3))
        with pytest.raises(AdapterError, match=f"'{name}'"):
            list(mg.rollout(mg.plan(worldmark_case(1)), context=ContextPolicy(name, 3)))


def test_base_variant_refuses_every_policy():
    base = get_adapter("matrix-game-3.5", variant="base")
    for name in ("full_kv", "sliding_window", "fov"):
        why = base.context_support(name)
        assert why and "variant=base" in why and "no causal KV cache" in why


def test_full_kv_rollout_runs_the_context_plan(mg, tmp_path, monkeypatch):
    import worldgate.adapters.repo as repo
    from worldgate.adapters.base import Chunk
    from worldgate.adapters.context import ContextPolicy

    seen = {}

    def fake_run(name, spec, paths, plan, seed=None):
        seen["yaml"] = plan.files["distilled.yaml"]
        yield Chunk(start=0, frames=None, video=tmp_path / "v.mp4", extra={})

    monkeypatch.setattr(repo, "run_checkout", fake_run)
    mg._paths = {"repo": tmp_path, "ckpt": tmp_path, "python": "python", "extra": {}}
    list(mg.rollout(mg.plan(worldmark_case(1)), context=ContextPolicy("full_kv"), seed=1))
    assert seen["yaml"].endswith("context_chunks: 28\ndynamic_context: false\n")


# --------------------------------------------------------------------------- the model's own entry point (gated)

COMMIT = "fa6d2b628ac9b0f1657dc24689536d74bfeb51da"
MG35 = gated_checkout("MATRIX_GAME_3_5_CHECKOUT", COMMIT)


def _dataset_readers(root):
    """The camera readers of the pipeline's own dataset (diffsynth/core/data/unified_dataset.py: _load_extrinsics,
    _load_intrinsics, _intrinsics_packed_to_matrix, normalize_and_scale_intrinsics), lifted from the file as written
    onto a bare class: the module itself imports the whole training stack (modelscope, torch, ...)."""
    names = ("_load_extrinsics", "_load_intrinsics", "_intrinsics_packed_to_matrix", "normalize_and_scale_intrinsics")
    return lift_functions(root / "diffsynth" / "core" / "data" / "unified_dataset.py", names, {"np": np},
                          as_class="Dataset")["Dataset"]


@pytest.mark.skipif(MG35 is None, reason="set MATRIX_GAME_3_5_CHECKOUT to a checkout of Riemann-Dynamics/"
                                         "Matrix-Game-3.5 at " + COMMIT)
def test_the_checkouts_own_entry_point_builds_the_plans_scene(tmp_path, monkeypatch, capsys):
    """The distilled plan's command through infer_distilled.py's own main() (--dry-run: everything up to the
    accelerate launch): its parser and checks take every argument, every weight path resolves under ckpt (the
    tokenizer's too: its default is the checkout's checkpoints/), distilled.yaml loads with the plan's blocks,
    profile and seed, and infer.build_input_workspace writes the scene the pipeline reads; the dataset's own readers
    then give the w2c of the plan's c2w, and K in 1280x704 pixels as the plan wrote it (normalisation leaves it
    unchanged: fx/cx, fy/cy kept, principal point at the centre). Only the DA3 index build (a subprocess importing the
    training stack) is stood in."""
    import json
    import shutil
    import sys

    from PIL import Image

    co = tmp_path / "mg35"  # it writes its workspace under its own .cache/
    shutil.copytree(MG35, co, ignore=shutil.ignore_patterns(".git", "samples", "assets", "checkpoints", "*.mp4"))
    img = tmp_path / "case image.png"
    Image.new("RGB", REAL_SIZE, (90, 120, 150)).save(img)
    ckpt = tmp_path / "weights"  # the Hub downloads' folders, away from the checkout
    for d in ("Matrix-Game-3.5-Distilled", "Wan2.2-TI2V-5B/google/umt5-xxl", "DA3NESTED-GIANT-LARGE-1.1"):
        (ckpt / d).mkdir(parents=True)
    (ckpt / "Matrix-Game-3.5-Distilled" / "first-person.safetensors").write_bytes(b"weights")
    plan, native, argv = gated_plan("matrix-game-3.5", "A+L1 W2 S+^1 v1 D+R1", tmp_path, image=str(img), ckpt=ckpt)
    assert argv[:2] == ["py", "infer_distilled.py"]

    monkeypatch.syspath_prepend(str(co))
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    for name in ("infer", "infer_distilled", "distilled_config"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    import infer as base_infer
    import infer_distilled

    try:
        index = []
        monkeypatch.setattr(base_infer, "build_index", lambda ws, py, env: index.append((ws, env)) or f"{ws}/idx")
        assert infer_distilled.main(argv[2:] + ["--dry-run", "--keep-workspace"]) == 0
        config = infer_distilled.load_inference_config(native / "distilled.yaml")
    finally:  # generic module names of the checkout must not serve another test
        for name in ("infer", "infer_distilled", "distilled_config"):
            sys.modules.pop(name, None)
    launch = next(ln for ln in capsys.readouterr().out.splitlines() if "accelerate.commands.launch" in ln).split()
    arg = {launch[i]: launch[i + 1] for i in range(len(launch) - 1) if launch[i].startswith("--")}
    assert arg["--checkpoint"] == str(ckpt / "Matrix-Game-3.5-Distilled" / "first-person.safetensors")
    assert arg["--wan-dir"] == str(ckpt / "Wan2.2-TI2V-5B")
    assert arg["--tokenizer-dir"] == str(ckpt / "Wan2.2-TI2V-5B" / "google" / "umt5-xxl")
    assert index[0][1]["DA3_MODEL_PATH"] == str(ckpt / "DA3NESTED-GIANT-LARGE-1.1")
    assert arg["--output"] == str(tmp_path / "out" / "result.mp4") and arg["--config"] == str(native / "distilled.yaml")
    assert (config.num_blocks, config.profile, config.seed) == (plan.extra["num_blocks"], "standard", 11)
    assert plan.n_frames == 1 + 84 * config.num_blocks

    scene = next((co / ".cache" / "infer_runs").iterdir()) / "workspace" / "scenes" / "case"
    assert str(scene.parents[1]) == arg["--workspace"] == index[0][0]
    D = _dataset_readers(co)
    ds = D()
    ds.height, ds.width, ds.mosaic_intrinsics_mode = 704, 1280, "per_frame"
    c2w = plan.arrays["extrinsics_c2w"]
    w2c = ds._load_extrinsics(scene / "pose" / "video.npz")
    assert w2c.shape == (len(c2w), 4, 4) == (plan.n_frames, 4, 4)
    np.testing.assert_allclose(w2c, np.linalg.inv(c2w.astype(np.float32).astype(np.float64)), rtol=0, atol=1e-5)
    K = ds.normalize_and_scale_intrinsics(ds._load_intrinsics(scene / "intrinsics" / "video.npz", len(w2c)),
                                          H_img=704, W_img=1280, temporal_mean=False)
    fx, fy, cx, cy = plan.intrinsics["native"]
    assert (cx, cy) == (640.0, 352.0)
    np.testing.assert_allclose(K, np.broadcast_to([[fx, 0, cx], [0, fy, cy], [0, 0, 1]], K.shape), rtol=1e-6)
    caption = json.loads((scene.parents[1] / "caption" / "case" / "video.json").read_text())
    assert caption == {"detailed": {"0": {"start": "", "dynamic": "A test scene."}}}
