"""LingBot-World: exact native inputs (poses.npy + intrinsics.npy at 480x832 units, 4k+1 frames, 16 fps)."""

import math

import numpy as np
import pytest

from adapter_conformance import gated_checkout as _checkout
from adapter_conformance import REAL_K, REAL_SIZE, AdapterConformance, gated_plan, worldmark_case
from worldgate.adapters import get_adapter
from worldgate.trajectories import library
from worldgate.trajectories.suites import Case


class TestLingBotConformance(AdapterConformance):
    adapter_name = "lingbot-world"


@pytest.fixture
def lb():
    return get_adapter("lingbot-world")


def test_id1_forward_golden(lb):
    p = lb.plan(worldmark_case(1))
    P = p.files["action/poses.npy"]
    assert P.dtype == np.float32 and P.shape == (321, 4, 4)  # 20 s at 16 fps + the conditioning frame: 4*80+1
    np.testing.assert_array_equal(P[:, :3, :3], np.broadcast_to(np.eye(3, dtype=np.float32), (321, 3, 3)))
    np.testing.assert_allclose(P[:, 2, 3], np.arange(321) * 1.4 / 16, rtol=1e-6)  # +Z forward, monotone
    assert np.all(np.diff(P[:, 2, 3]) > 0) and not P[:, 0, 3].any() and not P[:, 1, 3].any()
    assert p.segment_frames == [(0, 320)] and p.extra["frame_num"] == 321


def test_id6_and_id11_goldens(lb):
    p = lb.plan(worldmark_case(6))  # W then S: out and back
    P = p.files["action/poses.npy"]
    assert P.shape == (641, 4, 4) and p.segment_frames == [(0, 320), (320, 640)]
    assert P[320, 2, 3] == pytest.approx(28.0) and P[640, 2, 3] == pytest.approx(0.0, abs=1e-5)
    p = lb.plan(worldmark_case(11))  # W S W
    P = p.files["action/poses.npy"]
    assert P.shape == (961, 4, 4) and (961 - 1) % 4 == 0
    assert P[960, 2, 3] == pytest.approx(28.0, rel=1e-6)


def test_yaw_is_exact_and_translation_exactly_zero(lb):
    P = lb.plan(worldmark_case(5)).files["action/poses.npy"]  # R
    assert not P[:, :3, 3].any()  # the model max-normalises translation: pure rotation must carry none at all
    yaw = np.unwrap(np.arctan2(P[:, 0, 2], P[:, 2, 2]).astype(float))
    assert np.all(np.diff(yaw) > 0)  # sign test: yaw-right turns the forward axis towards +X (R_y(+theta))
    np.testing.assert_allclose(np.degrees(yaw[16]), 25.0, atol=1e-4)


def test_lrud_pitch_only_during_u_and_d(lb):
    c = Case(id="lrud", suite="t", trajectory=library.get("LRUD"), image="x.jpg", intrinsics=REAL_K,
             image_size=REAL_SIZE)
    p = lb.plan(c)
    P = p.files["action/poses.npy"]
    segs = p.segment_frames  # V, L, R, U, D, H
    pitch = np.degrees(np.arcsin(-P[:, 1, 2].astype(float)))
    a, b = segs[3]
    assert np.all(np.diff(pitch[a:b + 1]) > 0)  # U: pitch up (forward towards -Y)
    assert np.allclose(pitch[: segs[3][0]], 0, atol=1e-4)  # no pitch during V, L, R
    assert pitch[segs[4][1]] == pytest.approx(0.0, abs=1e-4)  # back through pitch
    assert not P[:, :3, 3].any()


def test_intrinsics_are_scaled_to_480x832_units(lb):
    p = lb.plan(worldmark_case(1))
    K = p.files["action/intrinsics.npy"]
    assert K.shape == (321, 4) and K.dtype == np.float32
    fx, fy, cx, cy = REAL_K
    w0, h0 = REAL_SIZE
    np.testing.assert_allclose(K[0], [fx * 832 / w0, fy * 480 / h0, cx * 832 / w0, cy * 480 / h0], rtol=1e-6)
    # the field of view the model sees equals the case's (the stretch keeps it)
    assert p.intrinsics["native_hfov_deg"] == pytest.approx(p.intrinsics["case_hfov_deg"], abs=1e-4)
    assert p.intrinsics["case_hfov_deg"] == pytest.approx(math.degrees(2 * math.atan(w0 / (2 * fx))))


def test_without_intrinsics_fails_loudly(lb):
    from worldgate.adapters import AdapterError

    c = Case(id="noK", suite="t", trajectory=library.worldmark(1), image="x.jpg")
    with pytest.raises(AdapterError, match="regime 4"):
        lb.plan(c)


@pytest.mark.parametrize("size,working", [((1536, 1024), (768, 512)), ((1920, 1080), (832, 464)),
                                          ((1024, 1024), (624, 624)), ((1024, 768), (720, 544))])
@pytest.mark.parametrize("name", ["lingbot-world", "lingbot-world-v2"])
def test_working_size_follows_the_image_aspect(name, size, working):
    """--size 480*832 is an area: wan/image2video.py:330-339 (v2 :488-497) picks the working size from the image's
    aspect ratio (3:2 -> 768x512, 16:9 -> 832x464, 1:1 -> 624x624, 4:3 -> 720x544)."""
    from worldgate.adapters.lingbot_world import working_size

    assert working_size(*size) == working
    w0, h0 = size
    fx = 0.8 * w0
    c = Case(id="ar", suite="t", trajectory=library.worldmark(1), image="x.jpg",
             intrinsics=[fx, fx, w0 / 2, h0 / 2], image_size=size)
    p = get_adapter(name).plan(c)
    assert (p.width, p.height) == working and p.extra["working_size"] == list(working)
    assert p.intrinsics["working_size"] == p.intrinsics["native_size"] == list(working)
    assert p.intrinsics["native"] == p.intrinsics["working"]  # pixels of the plan's size; intrinsics.npy's beside
    assert p.intrinsics["native_model_units"] == "pixels of 832x480 (what intrinsics.npy holds)"
    K = p.files["action/intrinsics.npy"][0]  # the file stays in 480x832 units (what the model reads)
    np.testing.assert_allclose(K, [fx * 832 / w0, fx * 480 / h0, 416, 240], rtol=1e-6)
    ww, wh = working
    np.testing.assert_allclose(p.intrinsics["working"], [fx * ww / w0, fx * wh / h0, ww / 2, wh / 2], rtol=1e-6)
    assert p.intrinsics["native_hfov_deg"] == pytest.approx(p.intrinsics["case_hfov_deg"], abs=1e-4)
    assert any(f"runs at {ww}x{wh}, not 832x480" in cv for cv in p.caveats)
    assert "--size 480*832" in p.files["command.txt"]


def test_working_size_at_the_extreme_aspects():
    """Cases allow sides of 16..16384 px: even 1024:1 keeps one 16-pixel latent row (no zero-size video)."""
    from worldgate.adapters.lingbot_world import working_size

    assert working_size(16384, 16) == (20208, 16) and working_size(16, 16384) == (16, 20208)


# ------------------------------------------------------------------------------------------- gpus=N, setup, output
ULYSSES = [1, 2, 4, 5, 8, 10, 20, 40]  # 40 heads (wan/configs/wan_i2v_A14B.py:23) split evenly (generate.py:292-293)


def test_dry_run_with_gpus_8_writes_the_readmes_8_gpu_launch(tmp_path):
    """The acceptance check: `generate --model lingbot-world --dry-run --model-args gpus=8` writes the README's own
    8-GPU command (README.md:128: torchrun --nproc_per_node=8 generate.py ... --dit_fsdp --t5_fsdp --ulysses_size 8),
    launched by the model environment's torch with a free port."""
    from worldgate.cli import main

    out = tmp_path / "run"
    assert main(["generate", "--model", "lingbot-world", "--suite", "worldmark-engine", "--limit", "1", "--dry-run",
                 "--model-args", "gpus=8", "--out", str(out)]) == 0
    (cmd,) = [p.read_text() for p in out.glob("*/native/command.txt")]
    assert cmd.startswith("python -m torch.distributed.run --standalone --nproc_per_node=8 generate.py --task i2v-A14B "
                          "--size 480*832 --ckpt_dir CKPT/lingbot-world-base-cam ")
    assert cmd.endswith(' --prompt "$(cat prompt.txt)" --dit_fsdp --t5_fsdp --ulysses_size 8\n')
    assert "--master_port" not in cmd and "torchrun" not in cmd


@pytest.mark.parametrize("n", ULYSSES[1:])
def test_gpus_n_is_torchrun_with_fsdp_and_ulysses_n(n):
    cmd = get_adapter("lingbot-world", gpus=str(n)).plan(worldmark_case(1)).files["command.txt"]
    assert cmd == (f"python -m torch.distributed.run --standalone --nproc_per_node={n} generate.py --task i2v-A14B "
                   "--size 480*832 --ckpt_dir CKPT/lingbot-world-base-cam --image 000.jpg --action_path ACTION_DIR "
                   "--frame_num 321 --base_seed SEED --save_file OUT/video.mp4 --prompt \"$(cat prompt.txt)\" "
                   f"--dit_fsdp --t5_fsdp --ulysses_size {n}\n")


def test_gpus_1_is_the_plain_single_process_command():
    """One process: generate.py refuses FSDP and Ulysses outside a process group (generate.py:279-285)."""
    for lb in (get_adapter("lingbot-world"), get_adapter("lingbot-world", gpus=1)):
        cmd = lb.plan(worldmark_case(1)).files["command.txt"]
        assert cmd == ("python generate.py --task i2v-A14B --size 480*832 --ckpt_dir CKPT/lingbot-world-base-cam "
                       "--image 000.jpg --action_path ACTION_DIR --frame_num 321 --base_seed SEED "
                       "--save_file OUT/video.mp4 --prompt \"$(cat prompt.txt)\"\n")


@pytest.mark.parametrize("name", ["lingbot-world", "lingbot-world-v2"])
@pytest.mark.parametrize("n", [3, 6, 7, 16, 64])
def test_gpus_the_heads_cannot_split_are_refused(name, n):
    from worldgate.adapters import AdapterError

    with pytest.raises(AdapterError, match=r"gpus=%d cannot run: --ulysses_size .* 40 attention heads .* "
                                           r"1, 2, 4, 5, 8, 10, 20, 40" % n):
        get_adapter(name, gpus=n).plan(worldmark_case(1))


def test_the_video_is_written_into_out_under_the_declared_name(tmp_path):
    """--save_file OUT/video.mp4: the default is a prompt-and-time name in the checkout (generate.py:350-356), where
    two cases running at once could not tell their videos apart."""
    from worldgate.adapters.repo import command_argv

    p = get_adapter("lingbot-world", gpus=2).plan(worldmark_case(1))
    assert p.extra["output_video"] == "video.mp4"
    p.write(tmp_path / "native")
    argv = command_argv(p.files["command.txt"], p.files, tmp_path / "native",
                        {"python": "py", "ckpt": tmp_path / "w"}, "/data/000.jpg", 7)
    assert argv[:4] == ["py", "-m", "torch.distributed.run", "--standalone"]
    assert argv[argv.index("--save_file") + 1] == str(tmp_path / "out" / "video.mp4")
    assert argv[argv.index("--ckpt_dir") + 1] == str(tmp_path / "w" / "lingbot-world-base-cam")
    assert argv[argv.index("--base_seed") + 1] == "7" and argv[-2:] == ["--ulysses_size", "2"]


def test_repo_spec_pins_the_commit_and_the_weights_the_command_reads():
    from worldgate.adapters.lingbot_world import LingBotWorld

    spec = LingBotWorld.repo_spec
    assert spec.commit == "a43bec7f8091c83e9b30b16b912f6fc906236fa6" and spec.commit in LingBotWorld.__module__ + (
        __import__(LingBotWorld.__module__, fromlist=["x"]).__doc__)
    assert spec.subdir == "" and spec.requirements == ("requirements.txt",)
    assert spec.weights_dir == "lingbot-world-base-cam" and "cam" in spec.weights_dir  # picks the control type
    assert spec.weights_patterns == ("models_t5_umt5-xxl-enc-bf16.pth", "google/umt5-xxl/*", "Wan2.1_VAE.pth",
                                     "high_noise_model/*", "low_noise_model/*")
    assert "--ulysses_size N" in LingBotWorld.multi_gpu and "README.md:128" in LingBotWorld.multi_gpu


# --------------------------------------------------------------------------- the model's own CLI (gated, no weights)


def own_generate(root, argv, monkeypatch):
    """The checkout's generate.py module and its own ``_parse_args()`` of ``argv`` (validation included). Only what
    its argument parser needs is imported: ``wan`` is a bare package so wan/__init__ (the pipelines) never runs;
    wan.configs, wan.distributed.util and wan.utils.utils are the checkout's own files (torch, torchvision, imageio
    are real; ``easydict`` is a dict with attribute access when it is not installed)."""
    import importlib.util
    import sys
    import types

    def load(name, path, package=False):
        spec = importlib.util.spec_from_file_location(
            name, path, submodule_search_locations=[str(path.parent)] if package else None)
        mod = importlib.util.module_from_spec(spec)
        monkeypatch.setitem(sys.modules, name, mod)
        spec.loader.exec_module(mod)
        return mod

    try:
        import easydict  # noqa: F401
    except ImportError:
        class EasyDict(dict):
            def __getattr__(self, k):
                try:
                    return self[k]
                except KeyError:
                    raise AttributeError(k) from None

            def __setattr__(self, k, v):
                self[k] = v

        monkeypatch.setitem(sys.modules, "easydict", types.SimpleNamespace(EasyDict=EasyDict))
    before = set(sys.modules)
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    try:
        for pkg in ("wan", "wan.distributed", "wan.utils"):
            m = types.ModuleType(pkg)
            m.__path__ = [str(root / pkg.replace(".", "/"))]
            monkeypatch.setitem(sys.modules, pkg, m)
        load("wan.configs", root / "wan" / "configs" / "__init__.py", package=True)
        load("wan.distributed.util", root / "wan" / "distributed" / "util.py")
        load("wan.utils.utils", root / "wan" / "utils" / "utils.py")
        gen = load("lingbot_generate_under_test", root / "generate.py")
        monkeypatch.setattr(sys, "argv", list(argv))
        return gen, gen._parse_args()
    finally:  # the checkout's submodules (wan.configs.*) must not serve the next checkout's imports
        for name in set(sys.modules) - before:
            if name == "wan" or name.startswith("wan."):
                sys.modules.pop(name, None)


def plan_argv(name, n, tmp_path):
    """The plan's command for gpus=n with its paths made absolute, and the plan: (launcher argv, script argv, plan,
    native)."""
    plan, native, argv = gated_plan(name, library.worldmark(11), tmp_path, gpus=n)
    launcher = argv.index("generate.py")
    return argv[:launcher], argv[launcher:], plan, native


LINGBOT = _checkout("LINGBOT_WORLD_CHECKOUT", "a43bec7f8091c83e9b30b16b912f6fc906236fa6")


@pytest.mark.skipif(LINGBOT is None, reason="set LINGBOT_WORLD_CHECKOUT to a checkout of robbyant/lingbot-world at "
                                            "a43bec7f8091c83e9b30b16b912f6fc906236fa6")
@pytest.mark.parametrize("n", [1, 8])
def test_the_checkouts_own_parser_takes_the_gpus_n_command(n, tmp_path, monkeypatch):
    """generate.py's own argparse and validation read the plan's gpus=N command as the README's run: Ulysses over N
    (== the launcher's process count), FSDP for DiT and T5, the plan's action folder, frames, seed, prompt and output
    file; and its own config's head count splits over N, as generate() asserts (generate.py:287-293)."""
    launcher, argv, plan, native = plan_argv("lingbot-world", n, tmp_path)
    gen, args = own_generate(LINGBOT, argv, monkeypatch)
    assert launcher == (["py"] if n == 1 else ["py", "-m", "torch.distributed.run", "--standalone",
                                               f"--nproc_per_node={n}"])
    assert (args.ulysses_size, args.dit_fsdp, args.t5_fsdp) == ((1, False, False) if n == 1 else (n, True, True))
    assert gen.WAN_CONFIGS[args.task].num_heads == 40 and 40 % args.ulysses_size == 0
    assert args.task == "i2v-A14B" and args.size == "480*832" and gen.MAX_AREA_CONFIGS[args.size] == 480 * 832
    assert args.action_path == str(native / "action") and args.frame_num == plan.n_frames == 961
    assert args.ckpt_dir == str(tmp_path / "w" / "lingbot-world-base-cam") and args.base_seed == 11
    assert args.save_file == str(tmp_path / "out" / "video.mp4") and args.prompt == "A test scene."
    assert args.image == "/data/img 000.jpg" and not args.allow_act2cam and args.action_string is None
