"""ABot-World-0: keys [W,A,S,D,I,J,K,L] per 12-frame block at 12 fps; block 0 (9 frames) held idle, the trajectory
from frame 8 (block 1's key drives the 8 -> 9 transition on); worldgate's patch (--image, --ckpt_dir,
$WORLDGATE_OUT) on synthetic files, and gated on ABOT_WORLD_CHECKOUT on the real scripts/inference.py."""

import hashlib
import importlib.util
import json
import os
import py_compile
import shutil
import stat
import sys
from pathlib import Path

import numpy as np
import pytest

from adapter_conformance import REAL_K, REAL_SIZE, AdapterConformance, worldmark_case
from worldgate.adapters import AdapterError, UnsupportedMotion, get_adapter
from worldgate.adapters.abot_world import COMMIT, PATCH
from worldgate.adapters.patching import PatchError
from worldgate.trajectories import library
from worldgate.trajectories.core import Trajectory
from worldgate.trajectories.suites import Case
from testpaths import ROOT


class TestABotWorldConformance(AdapterConformance):
    adapter_name = "abot-world"


@pytest.fixture
def ab():
    return get_adapter("abot-world")


def case_of(text: str, image="x.jpg", size=REAL_SIZE) -> Case:
    return Case(id="t", suite="t", trajectory=Trajectory.parse(text), image=image, intrinsics=REAL_K,
                image_size=size)


# ------------------------------------------------------------------------------------------------------- the plan
def test_w_for_2s_golden(ab):
    p = ab.plan(case_of("W2"))
    assert json.loads(p.files["action_list.json"]) == [[0] * 8, [1, 0, 0, 0, 0, 0, 0, 0], [1, 0, 0, 0, 0, 0, 0, 0]]
    # 9 + 24 frames; block 1's key drives 8 -> 9 (scripts/inference.py:259-274): the trajectory runs on frames 8..32
    assert p.n_frames == 9 + 24 and p.segment_frames == [(8, 32)] and p.extra["blocks"] == 3
    c2w = p.arrays["c2w"]
    assert c2w.shape == (33, 4, 4) and np.allclose(c2w[:9], np.eye(4))  # held through frame 8
    step = 1.4 / 12  # walking pace per frame at 12 fps
    assert c2w[9, 2, 3] == pytest.approx(step) and c2w[20, 2, 3] == pytest.approx(12 * step)  # moves from 8 -> 9
    assert c2w[32, 2, 3] == pytest.approx(2.8)  # the last frame is the end pose (2 s at 1.4 m/s)
    assert p.extra["first_commanded_frame"] == 8


def test_last_commanded_pose_is_reached_on_a_turn(ab):
    p = ab.plan(case_of("R3"))  # 3 blocks of L(yaw right) after block 0: frames 8..44 carry the turn
    assert p.n_frames == 45 and p.segment_frames == [(8, 44)]
    c2w = p.arrays["c2w"]
    yaw = np.degrees(np.arctan2(c2w[:, 0, 2], c2w[:, 2, 2]))
    assert np.allclose(yaw[:9], 0) and yaw[9] == pytest.approx(25 / 12)
    assert yaw[44] == pytest.approx(75.0) and yaw[43] == pytest.approx(75.0 - 25 / 12)  # the end pose is frame 44


def test_key_order_and_looks(ab):
    p = ab.plan(case_of("A+L1 D+R1 S+^1 v1"))
    assert json.loads(p.files["action_list.json"]) == [
        [0] * 8,
        [0, 1, 0, 0, 0, 1, 0, 0],  # A strafe-left + J yaw-left
        [0, 0, 0, 1, 0, 0, 0, 1],  # D strafe-right + L yaw-right
        [0, 0, 1, 0, 1, 0, 0, 0],  # S back + I pitch-up
        [0, 0, 0, 0, 0, 0, 1, 0],  # K pitch-down
    ]
    assert p.segment_frames == [(8, 20), (20, 32), (32, 44), (44, 56)]


def test_worldmark_keys_are_20_blocks_each(ab):
    p = ab.plan(worldmark_case(6))  # W S
    assert p.segment_frames == [(8, 248), (248, 488)] and p.extra["blocks"] == 41 and p.n_frames == 489
    rows = json.loads(p.files["action_list.json"])
    assert rows[1:21] == [[1, 0, 0, 0, 0, 0, 0, 0]] * 20 and rows[21:] == [[0, 0, 1, 0, 0, 0, 0, 0]] * 20


def test_rounding_is_caveated_and_short_segments_refused(ab):
    c = Case(id="lrud", suite="t", trajectory=library.get("LRUD"), image="x.jpg", intrinsics=REAL_K,
             image_size=REAL_SIZE)
    p = ab.plan(c)
    durations = [s.seconds for s in c.trajectory.segments]
    want = [int(np.floor(d + 0.5)) for d in durations]
    assert [(b - a) // 12 for a, b in p.segment_frames] == want
    assert any("rounded" in x for x in p.caveats) == any(abs(w - d) > 1e-9 for w, d in zip(want, durations))
    with pytest.raises(UnsupportedMotion, match="at least 0.5 s"):
        ab.plan(case_of("W2 L0.25"))


def test_command_line(ab):
    p = ab.plan(worldmark_case(1))
    cmd = p.files["command.txt"]
    assert cmd.split("  #")[0] == (
        "python scripts/inference.py --phase both --fps-blocks 21 --action-mode fixed --quant-type fp8-per-token "
        "--vae_type taew2_2 --action-list \"$(cat action_list.json)\" --image 000.jpg --ckpt_dir CKPT")
    assert "SEED" not in cmd and "set_seed(42)" in ab.info.no_seed and "torch.randn" in ab.info.no_seed
    assert p.extra["output_video"] == "fp8-per-token/fp8-per-token.mp4"


def test_gpus_are_refused_above_one():
    assert get_adapter("abot-world").multi_gpu == ""
    p = get_adapter("abot-world", gpus=1).plan(case_of("W1"))
    assert "torch.distributed.run" not in p.files["command.txt"]
    with pytest.raises(AdapterError, match="no multi-GPU inference"):
        get_adapter("abot-world", gpus=2).plan(case_of("W1"))


def test_repo_spec():
    spec = get_adapter("abot-world").repo_spec
    assert spec.commit == COMMIT == "e260168d3faa9407d741fa37c11f3eb335a4228f" and spec.commit in (
        sys.modules["worldgate.adapters.abot_world"].__doc__)
    assert spec.subdir == "" and spec.patch is PATCH and spec.requirements == ("requirements.txt",)
    assert spec.patches == {f: "worldgate-patch abot-world v1" for f in
                            ("scripts/inference.py", "web_client/pipeline_loader.py", "worldgate_inputs.py")}
    assert set(spec.weights_patterns) == {"config.json", "diffusion_pytorch_model.safetensors", "taew2_2.pth",
                                          "Wan2.2_VAE.pth", "models_t5_umt5-xxl-enc-bf16.pth", "google/umt5-xxl/*"}


# ------------------------------------------------------------------------------- the patch, on synthetic files
#: the lines each edit touches, inside a little Python of worldgate's own (not the model's code)
SYNTH = {
    "scripts/inference.py": '''import argparse
from datetime import datetime
from pathlib import Path

_ROOT = ROOT
from web_client.pipeline_loader import _init_lock, _get_pipeline_cached, decode_block_to_frames, get_pipeline
BENCH_REF_IMAGE = "ref.png"
BENCH_REF_IMAGE_CACHE_DIR = "cache"
OUTPUT_DIR = Path("outputs")


def _run_single_quant(args, quant_type, quant_dir):
    _ref_image_path = BENCH_REF_IMAGE
    _ref_cache_dir = BENCH_REF_IMAGE_CACHE_DIR
    return _ref_image_path, _ref_cache_dir


def main():
    ap = argparse.ArgumentParser()
    args = ap.parse_args()
    run_dir = OUTPUT_DIR / "profile_bench" / datetime.now().strftime("%Y%m%d_%H%M%S")
    return args, run_dir
''',
    "web_client/pipeline_loader.py": '''from omegaconf import OmegaConf


def _get_pipeline_cached(yaml_path):
    config = OmegaConf.load(yaml_path)
    default_config = OmegaConf.load("configs/default_config.yaml")
    config = OmegaConf.merge(default_config, config)
    return config
''',
}


def _synthetic(root: Path, files=SYNTH) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_patch_applies_compiles_and_is_idempotent(tmp_path):
    root = _synthetic(tmp_path)
    assert PATCH.missing(root) == sorted(["scripts/inference.py", "web_client/pipeline_loader.py",
                                          "worldgate_inputs.py"])
    assert PATCH.apply(root) == ["scripts/inference.py", "web_client/pipeline_loader.py", "worldgate_inputs.py"]
    assert PATCH.missing(root) == []
    before = {f: (root / f).read_bytes() for f in PATCH.files()}
    for f in PATCH.files():
        py_compile.compile(str(root / f), doraise=True)
        assert PATCH.marker in before[f].decode()
    inf = before["scripts/inference.py"].decode()
    assert inf.count(PATCH.marker) == 4 and inf.count("args = ap.parse_args()") == 1
    assert inf.index("add_arguments(ap)") < inf.index("args = ap.parse_args()") < inf.index("configure(args)")
    assert "worldgate_inputs.reference(args, _ref_image_path, _ref_cache_dir, _ROOT)" in inf
    assert "run_dir = worldgate_inputs.run_dir(run_dir)" in inf
    assert "worldgate_inputs.rebase_checkpoints(config)" in before["web_client/pipeline_loader.py"].decode()
    assert PATCH.apply(root) == []  # applying again changes nothing
    assert {f: (root / f).read_bytes() for f in PATCH.files()} == before


def test_patch_refuses_a_file_without_its_anchor(tmp_path):
    files = dict(SYNTH)
    files["scripts/inference.py"] = files["scripts/inference.py"].replace("    args = ap.parse_args()\n",
                                                                          "    args = ap.parse_known_args()[0]\n")
    root = _synthetic(tmp_path, files)
    with pytest.raises(PatchError, match=r"scripts/inference\.py: the patch's anchor 'args = ap.parse_args\(\)' "
                                         "occurs 0 times"):
        PATCH.apply(root)
    assert not (root / "worldgate_inputs.py").exists()
    (root / "web_client/pipeline_loader.py").unlink()
    with pytest.raises(PatchError, match=r"pipeline_loader\.py is missing from the checkout"):
        PATCH.apply_text("web_client/pipeline_loader.py", None)


def test_worldgate_inputs_module(tmp_path, monkeypatch):
    """worldgate's own code that the patch adds: --image keys the reference cache by the image's bytes, --ckpt_dir
    moves exactly the checkpoints/ABot-World-0-5B-LF paths, $WORLDGATE_OUT is the run folder."""
    import argparse

    from omegaconf import OmegaConf

    root = _synthetic(tmp_path / "co")
    PATCH.apply(root)
    wi = _load(root / "worldgate_inputs.py", "wg_abot_inputs")
    ap = argparse.ArgumentParser()
    wi.add_arguments(ap)
    img = tmp_path / "case.png"
    img.write_bytes(b"not really a png, but bytes to hash")
    ckpt = tmp_path / "weights"
    ckpt.mkdir()
    args = ap.parse_args(["--image", str(img), "--ckpt_dir", str(ckpt) + "/"])
    wi.configure(args)
    digest = hashlib.md5(img.read_bytes()).hexdigest()[:16]
    assert wi.reference(args, "web_client/datasets/images/example.png", "old", root) == (
        str(img), str(root / "outputs" / "ref_image_cache" / digest))
    none = ap.parse_args([])
    assert wi.reference(none, "ref.png", "cache", root) == ("ref.png", "cache")  # without --image: the script's
    cfg = OmegaConf.create({"taew2_2_checkpoint": "checkpoints/ABot-World-0-5B-LF/taew2_2.pth",
                            "model_kwargs": {"model_name": "checkpoints/ABot-World-0-5B-LF", "local_attn_size": 21},
                            "text_encoder_kwargs": {
                                "tokenizer_path": "checkpoints/ABot-World-0-5B-LF/google/umt5-xxl/"},
                            "other": ["checkpoints/ABot-World-0-5B-LFX/a", "checkpoints/other/b"], "n": 3})
    out = wi.rebase_checkpoints(cfg)
    assert out is cfg and OmegaConf.to_container(cfg) == {
        "taew2_2_checkpoint": f"{ckpt}/taew2_2.pth", "model_kwargs": {"model_name": str(ckpt), "local_attn_size": 21},
        "text_encoder_kwargs": {"tokenizer_path": f"{ckpt}/google/umt5-xxl/"},
        "other": ["checkpoints/ABot-World-0-5B-LFX/a", "checkpoints/other/b"], "n": 3}
    monkeypatch.delenv("WORLDGATE_OUT", raising=False)
    assert wi.run_dir(Path("outputs/profile_bench/x")) == Path("outputs/profile_bench/x")
    monkeypatch.setenv("WORLDGATE_OUT", str(tmp_path / "out"))
    assert wi.run_dir(Path("outputs/profile_bench/x")) == tmp_path / "out"
    with pytest.raises(SystemExit, match="no such file"):
        wi.configure(ap.parse_args(["--image", str(tmp_path / "missing.png")]))
    with pytest.raises(SystemExit, match="no such folder"):
        wi.configure(ap.parse_args(["--ckpt_dir", str(tmp_path / "missing")]))


# -------------------------------------------------------- gated: the real scripts/inference.py at the pinned commit
CHECKOUT = os.environ.get("ABOT_WORLD_CHECKOUT", "")

#: runs the patched entry point with the heavy modules (DiT, VAEs, T5, quantiser, kernels) stubbed and CUDA calls
#: made no-ops; everything the script itself does with its arguments, actions and paths runs as written
DRIVER = r'''
import importlib.util, json, os, sys, types
import numpy as np
import torch

LOG = {"set_act": [], "first_frame": [], "ref_dir": [], "prompts": [], "seed": [], "quant": [], "config": None}
torch.cuda.is_available = lambda: True
torch.cuda.memory_allocated = lambda *a, **k: 0
torch.cuda.memory_reserved = lambda *a, **k: 0
torch.cuda.empty_cache = lambda: None
torch.cuda.ipc_collect = lambda: None
_randn = torch.randn
torch.randn = lambda *a, device=None, **k: _randn(*a, **k)  # the block noise on the CPU


def module(name, **attrs):
    m = types.ModuleType(name)
    m.__path__ = []
    m.__dict__.update(attrs)
    sys.modules[name] = m
    return m


class Obj:
    def __init__(self, **kw):
        self.__dict__.update(kw)

    def to(self, *a, **k):
        return self


class FakePipeline(Obj):
    def __init__(self, config, device=None, vae=None):
        c = config
        LOG["config"] = {"model_name": c.model_kwargs.model_name, "tokenizer": c.text_encoder_kwargs.tokenizer_path,
                         "t5": c.text_encoder_kwargs.encoder_pth_path, "vae": c.vae_kwargs.pretrained_path,
                         "taew2_2": c.taew2_2_checkpoint, "lightvae": c.lightvae_encoder_checkpoint,
                         "vae_type": c.vae_type}
        super().__init__(generator=Obj(model=Obj()), text_encoder=Obj(), vae=Obj(model=Obj(clear_cache=lambda: None)),
                         encoder=Obj(z_dim=48, upsampling_factor=16), num_frame_per_block=int(c.num_frame_per_block))
        self.blocks = 0

    def set_prompts(self, prompts, device=None):
        LOG["prompts"].append(list(prompts))

    def set_ref_latent_mask_from_exists_paths(self, ref_dir, device=None):
        LOG["ref_dir"].append(str(ref_dir))

    def reset_stream(self, *a, **k):
        self.blocks = 0

    def set_first_frame_latent(self, path, height, width, device=None):
        LOG["first_frame"].append([str(path), height, width, self.blocks])

    def set_act(self, keys, height, width, num_frames, device=None):
        LOG["set_act"].append({"keys": [int(bool(keys[k])) for k in "WASDIJKL"], "hw": [height, width],
                               "num_frames": num_frames, "block": self.blocks})

    def generate_next_block(self, noise):
        self.blocks += 1
        return noise

    def decode_block_and_write(self, lat, writer):  # block 0 decodes to 9 frames, later blocks to 12
        for _ in range(9 if self.blocks == 1 else 12):
            writer.append_data(np.full((704, 1280, 3), 8 * self.blocks % 256, np.uint8))


def set_seed(seed, deterministic=False):
    LOG["seed"].append(seed)
    torch.manual_seed(seed)


module("pipeline", CausalInferencePipeline=FakePipeline)
module("quantizer", apply_fp8_quantization=lambda model, quant_type: LOG["quant"].append(quant_type))
module("utils")
module("utils.misc", set_seed=set_seed)
module("utils.wan_wrapper", create_vae_from_config=lambda config: Obj())
module("utils.memory", gpu="cpu", get_cuda_free_memory_gb=lambda g: 80.0, DynamicSwapInstaller=Obj())
module("wan")
module("wan.modules")
module("wan.modules.helios_kernels", replace_all_norms_with_flash_norms=lambda m: None,
       replace_rope_with_flash_rope=lambda: None)

script = os.path.abspath(sys.argv[1])
sys.argv = sys.argv[1:]
sys.path.insert(0, os.path.dirname(script))  # as `python script.py` does
spec = importlib.util.spec_from_file_location("abot_entry", script)
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
mod.main()
with open(os.environ["WG_PROBE"], "w") as fh:
    json.dump(LOG, fh)
'''


def _python_wrapper(tmp_path: Path, driver: str) -> Path:
    """An executable that runs the driver with the venv's Python (the runner replaces `python` by it)."""
    (tmp_path / "driver.py").write_text(driver)
    w = tmp_path / "python-driver"
    w.write_text(f"#!/bin/sh\nexec {sys.executable} {tmp_path / 'driver.py'} \"$@\"\n")
    w.chmod(w.stat().st_mode | stat.S_IXUSR)
    return w


@pytest.mark.skipif(not (CHECKOUT and os.path.isfile(os.path.join(CHECKOUT, "scripts", "inference.py"))),
                    reason="set ABOT_WORLD_CHECKOUT to an amap-cvlab/ABot-World checkout at " + COMMIT)
def test_patched_entry_point_builds_the_plans_controls(tmp_path, monkeypatch):
    from PIL import Image

    from worldgate.adapters.repo import run_checkout
    from worldgate.generate.video import probe_video

    co = tmp_path / "abot"
    shutil.copytree(CHECKOUT, co, ignore=shutil.ignore_patterns(".git", "checkpoints", "assets", "profile_bench",
                                                                "*.mp4", "__pycache__"))
    assert PATCH.apply(co) == ["scripts/inference.py", "web_client/pipeline_loader.py", "worldgate_inputs.py"]
    ckpt = tmp_path / "weights"
    ckpt.mkdir()
    img = tmp_path / "case image.png"
    Image.new("RGB", REAL_SIZE, (90, 120, 150)).save(img)
    ad = get_adapter("abot-world")
    plan = ad.plan(case_of("A+L1 W2 S+^1 v1 D+R1", image=str(img)))
    probe = tmp_path / "probe.json"
    monkeypatch.setenv("WG_PROBE", str(probe))
    paths = {"repo": co, "ckpt": ckpt, "python": str(_python_wrapper(tmp_path, DRIVER)), "extra": {}, "gpus": 1}
    for chunk in run_checkout("abot-world", ad.repo_spec, paths, plan, seed=None):
        video = chunk.video
        # exactly the file the plan names, in $WORLDGATE_OUT (the runner's work/out)
        assert video.relative_to(video.parents[2]) == Path("out") / plan.extra["output_video"]
        info = probe_video(video)
        assert (info.width, info.height, info.fps, info.frames) == (1280, 704, 12.0, plan.n_frames)
        assert chunk.extra["argv"][chunk.extra["argv"].index("--image") + 1] == str(img.resolve())
    log = json.loads(probe.read_text())
    keys = plan.arrays["block_keys"].tolist()
    assert [a["keys"] for a in log["set_act"]] == keys  # the per-block key states the script built
    assert [a["block"] for a in log["set_act"]] == list(range(len(keys)))  # block b's key set before block b
    assert all(a["hw"] == [704, 1280] and a["num_frames"] == 3 for a in log["set_act"])
    assert log["first_frame"] == [[str(img.resolve()), 704, 1280, 0]]  # --image, not BENCH_REF_IMAGE
    digest = hashlib.md5(img.read_bytes()).hexdigest()[:16]
    assert log["ref_dir"] == [str(co / "outputs" / "ref_image_cache" / digest)]
    assert log["prompts"] == [["| unknown |"]] and log["seed"] == [42] and log["quant"] == ["fp8-per-token"]
    c = str(ckpt.resolve())
    assert log["config"] == {"model_name": c, "tokenizer": c + "/google/umt5-xxl/",
                             "t5": c + "/models_t5_umt5-xxl-enc-bf16.pth", "vae": c + "/Wan2.2_VAE.pth",
                             "taew2_2": c + "/taew2_2.pth", "lightvae": c + "/Wan2.2_VAE.pth", "vae_type": "taew2_2"}
    assert not (co / "outputs" / "profile_bench").exists()  # nothing written into the checkout
