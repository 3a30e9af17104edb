"""Infinite-World: one {move, view} class pair per frame at 30 fps, 1 + 80 C frames, size by aspect bucket;
worldgate's patch (--cases, --num_chunks, --seed, --ckpt_dir, $WORLDGATE_OUT, a fresh video file) on synthetic files,
and gated on INFINITE_WORLD_CHECKOUT on the real scripts/infworld_inference.py."""

import importlib.util
import json
import os
import py_compile
import shutil
import stat
import sys
from pathlib import Path

import pytest

from adapter_conformance import REAL_K, REAL_SIZE, AdapterConformance, worldmark_case
from worldgate.adapters import AdapterError, get_adapter
from worldgate.adapters.infinite_world import COMMIT, ENTRY, PATCH, output_name, working_size
from worldgate.adapters.patching import PatchError
from worldgate.trajectories.core import Trajectory
from worldgate.trajectories.suites import Case


class TestInfiniteWorldConformance(AdapterConformance):
    adapter_name = "infinite-world"


@pytest.fixture
def iw():
    return get_adapter("infinite-world")


def case_of(text: str, size=REAL_SIZE) -> Case:
    return Case(id="t", suite="t", trajectory=Trajectory.parse(text), image="x.jpg", intrinsics=REAL_K,
                image_size=size, prompt="A street.")


def test_w_for_2s_golden(iw):
    p = iw.plan(case_of("W2"))
    rows = json.loads(p.files["actions.json"])
    # 60 frames at 30 fps: one chunk, 81 frames; rows 0..59 forward, 60..80 no-op
    assert p.n_frames == 81 and p.extra["num_chunks"] == 1 and len(rows) == 81
    assert rows[:60] == [{"move": "go forward", "view": "no-op"}] * 60
    assert rows[60:] == [{"move": "no-op", "view": "no-op"}] * 21
    assert p.segment_frames == [(0, 60)] and p.arrays["move"][:60].tolist() == [1] * 60


def test_looks_and_combined(iw):
    rows = json.loads(iw.plan(case_of("A+L1 D+R1 ^1 S+v1")).files["actions.json"])
    assert rows[0] == {"move": "go left", "view": "turn left"} and rows[29] == rows[0]
    assert rows[30] == {"move": "go right", "view": "turn right"}
    assert rows[60] == {"move": "no-op", "view": "turn up"}
    assert rows[90] == {"move": "go back", "view": "turn down"} and rows[119] == rows[90]
    assert rows[120] == {"move": "no-op", "view": "no-op"}


def test_worldmark_id6_and_chunks(iw):
    p = iw.plan(worldmark_case(6))  # W20 S20: 1200 frames -> 15 chunks, 1201 frames
    assert p.n_frames == 1201 and p.extra["num_chunks"] == 15 and p.segment_frames == [(0, 600), (600, 1200)]
    rows = json.loads(p.files["actions.json"])
    assert rows[599]["move"] == "go forward" and rows[600]["move"] == "go back" and rows[1200]["move"] == "no-op"


def test_working_size_follows_the_aspect(iw):
    assert working_size((1080, 720)) == (768, 512)  # 3:2 -> bucket 0.67
    assert working_size((1920, 1080)) == (896, 448)  # 16:9 -> bucket 0.50
    assert working_size((1024, 1024)) == (640, 640)
    assert working_size((1024, 768)) == (704, 576)  # 0.75 -> bucket 0.82
    p = iw.plan(case_of("W1", size=(1024, 1024)))
    assert (p.width, p.height) == (640, 640)


def test_command_line_and_cases_file(iw, tmp_path):
    p = iw.plan(worldmark_case(1))
    assert p.files["command.txt"].split("  #")[0] == (
        "python scripts/infworld_inference.py --cases cases.json --num_chunks 8 --seed SEED --ckpt_dir CKPT")
    assert p.files["cases.json"] == [{"prompt": "First-person view. A test scene.", "image": "000.jpg",
                                      "actions": "actions.json"}]
    p.write(tmp_path, seed=5)
    assert "--seed 5 " in (tmp_path / "command.txt").read_text()


# ------------------------------------------------------------------------------- worldgate's patch and the runner


def test_output_video_is_named_by_the_plan(iw):
    p = iw.plan(case_of("W1"))
    assert p.extra["output_video"] == "0000_A_street..mp4"  # f"{task:04d}_{prompt[:30] with spaces as _}" + .mp4
    long = Case(id="t", suite="t", trajectory=Trajectory.parse("W1"), image="x.jpg", intrinsics=REAL_K,
                image_size=REAL_SIZE, prompt="First-person view. A long street at dusk, lamps on.")
    assert iw.plan(long).extra["output_video"] == "0000_First-person_view._A_long_stre.mp4" == output_name(long.prompt)


def test_gpus_are_refused_above_one():
    assert get_adapter("infinite-world").multi_gpu == ""
    p = get_adapter("infinite-world", gpus=1).plan(case_of("W1"))
    assert "torch.distributed.run" not in p.files["command.txt"] and "torchrun" not in p.files["command.txt"]
    with pytest.raises(AdapterError, match="no multi-GPU inference"):
        get_adapter("infinite-world", gpus=2).plan(case_of("W1"))


def test_repo_spec():
    spec = get_adapter("infinite-world").repo_spec
    assert spec.commit == COMMIT == "272478ea793171c50e80042dc113f0beadcd50a2" and spec.commit in (
        sys.modules["worldgate.adapters.infinite_world"].__doc__)
    assert spec.subdir == "" and spec.patch is PATCH and spec.requirements == ("requirements.txt",)
    assert spec.patches == {ENTRY: "worldgate-patch infinite-world v1", "worldgate_inputs.py":
                            "worldgate-patch infinite-world v1"}
    assert spec.weights_patterns == ()  # where the files sit in the Hub repository is not in the code


#: the lines each edit touches, inside a little Python of worldgate's own (not the model's code)
SYNTH = '''import os
from omegaconf import OmegaConf
from infworld.utils.dataset_utils import is_vid, is_img

GLOBAL_SEED = 42
NUM_CHUNKS = 13  # Number of video chunks to generate
OUTPUT_BASE = "outputs"


def main(save_silent_video, video_buffer, local_rank, quality, ckpt_step, NUM_SAMPLING_STEPS, TEXT_CFG_SCALE):
    config_path = "configs/infworld_config.yaml"
    args = OmegaConf.load(config_path)
    output_dir = os.path.join(OUTPUT_BASE, f"infworld-ckpt{ckpt_step}-step{NUM_SAMPLING_STEPS}-cfg{TEXT_CFG_SCALE}")
    prompts_path = "prompts/demo.yaml"
    target_prompts = OmegaConf.load(prompts_path).prompts
    for task_idx, (prompt, image_path, action_path) in enumerate(target_prompts):
        save_path = os.path.join(output_dir, "x")
        save_silent_video(video_buffer.to(local_rank), save_path, fps=30, quality=quality)
'''


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_patch_applies_compiles_and_is_idempotent(tmp_path):
    (tmp_path / "scripts").mkdir()
    (tmp_path / ENTRY).write_text(SYNTH)
    assert PATCH.missing(tmp_path) == [ENTRY, "worldgate_inputs.py"]
    assert PATCH.apply(tmp_path) == [ENTRY, "worldgate_inputs.py"] and PATCH.missing(tmp_path) == []
    before = {f: (tmp_path / f).read_bytes() for f in PATCH.files()}
    for f in PATCH.files():
        py_compile.compile(str(tmp_path / f), doraise=True)
    text = before[ENTRY].decode()
    assert text.count(PATCH.marker) == 7
    for line in ("GLOBAL_SEED = worldgate_inputs.seed(GLOBAL_SEED)",
                 "NUM_CHUNKS = worldgate_inputs.num_chunks(NUM_CHUNKS)",
                 "args = worldgate_inputs.rebase_checkpoints(args)",
                 "output_dir = worldgate_inputs.output_dir(output_dir)",
                 "target_prompts = worldgate_inputs.cases(target_prompts)"):
        assert line in text
    assert text.index('worldgate_inputs.fresh(save_path + ".mp4")') < text.index("save_silent_video(video_buffer")
    assert text.index("GLOBAL_SEED = worldgate_inputs.seed") > text.index("GLOBAL_SEED = 42")
    assert PATCH.apply(tmp_path) == [] and {f: (tmp_path / f).read_bytes() for f in PATCH.files()} == before


def test_patch_refuses_a_file_without_its_anchor(tmp_path):
    (tmp_path / "scripts").mkdir()
    (tmp_path / ENTRY).write_text(SYNTH.replace("NUM_CHUNKS = 13  # Number of video chunks to generate",
                                                "NUM_CHUNKS = 8"))
    with pytest.raises(PatchError, match=r"scripts/infworld_inference\.py: the patch's anchor 'NUM_CHUNKS = 13"):
        PATCH.apply(tmp_path)
    assert not (tmp_path / "worldgate_inputs.py").exists()
    (tmp_path / ENTRY).unlink()
    with pytest.raises(PatchError, match=r"scripts/infworld_inference\.py is missing from the checkout"):
        PATCH.apply(tmp_path)


def test_worldgate_inputs_module(tmp_path, monkeypatch):
    """worldgate's own code that the patch adds: flags, cases file, checkpoint prefix, output folder, stale file."""
    from omegaconf import OmegaConf

    (tmp_path / "scripts").mkdir()
    (tmp_path / ENTRY).write_text(SYNTH)
    PATCH.apply(tmp_path)
    ckpt = tmp_path / "weights"
    ckpt.mkdir()
    native = tmp_path / "native"
    native.mkdir()
    (native / "img.png").write_bytes(b"x")
    (native / "actions.json").write_text("[]")
    (native / "cases.json").write_text(json.dumps([{"prompt": "p", "image": "img.png", "actions": "actions.json"}]))
    monkeypatch.setattr(sys, "argv", ["infworld_inference.py", "--cases", str(native / "cases.json"), "--num_chunks",
                                      "3", "--seed", "7", "--ckpt_dir", str(ckpt) + "/"])
    monkeypatch.delenv("WORLDGATE_OUT", raising=False)
    wi = _load(tmp_path / "worldgate_inputs.py", "wg_iw_inputs")
    assert (wi.seed(42), wi.num_chunks(13)) == (7, 3)
    assert wi.cases([["demo", "a.jpg", "a.json"]]) == [["p", str(native / "img.png"), str(native / "actions.json")]]
    cfg = OmegaConf.create({"checkpoint_path": "checkpoints/infinite_world_model.ckpt",
                            "text_encoder_cfg": {"tokenizer_path": "checkpoints/models/google/umt5-xxl",
                                                 "model_max_length": 512},
                            "vae_cfg": {"vae_pth": "checkpoints/models/Wan2.1_VAE.pth"}, "other": "checkpointsX/a"})
    assert OmegaConf.to_container(wi.rebase_checkpoints(cfg)) == {
        "checkpoint_path": f"{ckpt}/infinite_world_model.ckpt",
        "text_encoder_cfg": {"tokenizer_path": f"{ckpt}/models/google/umt5-xxl", "model_max_length": 512},
        "vae_cfg": {"vae_pth": f"{ckpt}/models/Wan2.1_VAE.pth"}, "other": "checkpointsX/a"}
    assert wi.output_dir("outputs/x") == "outputs/x"
    monkeypatch.setenv("WORLDGATE_OUT", str(tmp_path / "out"))
    assert wi.output_dir("outputs/x") == str(tmp_path / "out")
    stale = tmp_path / "out" / "0000_p.mp4"
    stale.parent.mkdir()
    stale.write_bytes(b"old frames")
    wi.fresh(str(stale))
    assert not stale.exists()
    wi.fresh(str(stale))  # nothing to remove: no error
    (native / "actions.json").unlink()
    with pytest.raises(SystemExit, match="no such file"):
        wi.cases([])
    wi2 = _load(tmp_path / "worldgate_inputs.py", "wg_iw_inputs2")
    monkeypatch.setattr(sys, "argv", ["infworld_inference.py", "--num_chunks", "0"])
    with pytest.raises(SystemExit):
        wi2.args()
    wi3 = _load(tmp_path / "worldgate_inputs.py", "wg_iw_inputs3")
    monkeypatch.setattr(sys, "argv", ["infworld_inference.py"])
    monkeypatch.delenv("WORLDGATE_OUT")
    assert (wi3.seed(42), wi3.num_chunks(13), wi3.cases("demo"), wi3.active()) == (42, 13, "demo", False)
    keep = tmp_path / "keep.mp4"
    keep.write_bytes(b"x")
    wi3.fresh(str(keep))  # a stock run (no worldgate input) keeps the script's own append behaviour
    assert keep.exists()


# ------------------------------------------------ gated: the real scripts/infworld_inference.py at the pinned commit
CHECKOUT = os.environ.get("INFINITE_WORLD_CHECKOUT", "")

#: runs the patched entry point with the heavy modules (DiT, Wan VAE, T5, scheduler) stubbed, decord/moviepy/einops
#: (imported but unused on this path) stubbed, CUDA calls made no-ops and the device set to the CPU; the script's own
#: argument handling, action loading and slicing, image bucketing, chunk loop and save_silent_video run as written
DRIVER = r'''
import importlib.util, json, os, sys, types
import torch
import torchvision.io

LOG = {"chunks": [], "prompts": [], "z_size": [], "paths": {}, "state_dict_keys": None}
torch.cuda.set_device = lambda *a, **k: None
torch.cuda.empty_cache = lambda: None
torch.cuda.ipc_collect = lambda: None
if not hasattr(torchvision.io, "write_video"):
    torchvision.io.write_video = lambda *a, **k: None  # imported by infworld.utils, unused here


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


class VAE(Obj):
    out_channels = 16

    def __init__(self, vae_pth, **kw):
        LOG["paths"]["vae_pth"] = vae_pth

    def encode(self, x):
        B, C, T, H, W = x.shape
        return torch.zeros(B, 16, 1 + (T - 1) // 4, H // 8, W // 8)

    def decode(self, z):
        B, C, T, h, w = z.shape
        k = len(LOG["chunks"])
        return torch.full((B, 3, 1, 8 * h, 8 * w), -1.0 + 0.1 * k).expand(B, 3, 4 * (T - 1) + 1, 8 * h, 8 * w)


class T5(Obj):
    output_dim = 4096
    model_max_length = 512

    def __init__(self, device=None, checkpoint_path=None, tokenizer_path=None, model_max_length=512):
        LOG["paths"]["t5"] = checkpoint_path
        LOG["paths"]["tokenizer"] = tokenizer_path
        self.t5 = Obj(model=Obj())


class Scheduler(Obj):
    def __init__(self, **cfg):
        pass

    def sample(self, model, text_encoder, null_embedder, z_size, prompts, guidance_scale, negative_prompts, device,
               additional_args):
        LOG["chunks"].append({"move": additional_args["move"][0].tolist(), "view": additional_args["view"][0].tolist()})
        LOG["prompts"].append(list(prompts))
        LOG["z_size"].append(list(z_size))
        return torch.zeros(z_size)


class DiT(Obj):
    y_embedder = None

    def __init__(self, **kw):
        pass

    def eval(self):
        return self

    def load_state_dict(self, sd, strict=True):
        LOG["state_dict_keys"] = sorted(sd)
        return [], []


module("decord", VideoReader=None)
module("moviepy")
module("moviepy.editor", AudioFileClip=None, VideoClip=None)
module("einops", rearrange=None, repeat=None)
module("infworld.vae", WanVAEModelWrapper=VAE)
module("infworld.models.umt5", T5EncoderModel=T5)
module("infworld.models.scheduler", RFlowScheduler=Scheduler)
module("infworld.models.dit_model", WanModel=DiT)

script = os.path.abspath(sys.argv[1])
sys.argv = sys.argv[1:]
sys.path.insert(0, os.path.dirname(script))  # as `python script.py` does
spec = importlib.util.spec_from_file_location("infworld_entry", script)
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
LOG["GLOBAL_SEED"], LOG["NUM_CHUNKS"], LOG["initial_seed"] = mod.GLOBAL_SEED, mod.NUM_CHUNKS, torch.initial_seed()
mod.local_rank = "cpu"
stale = os.environ.get("WG_STALE")
if stale:  # a video left by an earlier run of the same case in this folder, written by the model's own writer
    path = os.path.join(os.environ["WORLDGATE_OUT"], stale)[:-len(".mp4")]
    mod.save_silent_video(torch.zeros(1, 3, 3, 512, 768), path, fps=30)
    import imageio
    with imageio.get_reader(path + ".mp4") as r:
        LOG["stale_frames"] = sum(1 for _ in r)
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


@pytest.mark.skipif(not (CHECKOUT and os.path.isfile(os.path.join(CHECKOUT, ENTRY))),
                    reason="set INFINITE_WORLD_CHECKOUT to a MeiGen-AI/Infinite-World checkout at " + COMMIT)
def test_patched_entry_point_builds_the_plans_controls(tmp_path, monkeypatch):
    import torch
    from PIL import Image

    from worldgate.adapters.repo import run_checkout
    from worldgate.generate.video import probe_video

    co = tmp_path / "infw"
    shutil.copytree(CHECKOUT, co, ignore=shutil.ignore_patterns(".git", "checkpoints", "assets", "outputs", "*.mp4",
                                                                "__pycache__"))
    assert PATCH.apply(co) == [ENTRY, "worldgate_inputs.py"]
    ckpt = tmp_path / "weights"
    (ckpt / "models").mkdir(parents=True)
    torch.save({"state_dict": {"blocks.0.weight": torch.zeros(1)}}, ckpt / "infinite_world_model.ckpt")
    img = tmp_path / "case.png"
    Image.new("RGB", (1080, 720), (90, 120, 150)).save(img)  # 3:2 -> bucket 0.67 -> 768x512
    ad = get_adapter("infinite-world")
    case = Case(id="t", suite="t", trajectory=Trajectory.parse("A+L0.5 W1 ^0.5 S+v0.5 D+R0.6"), image=str(img),
                intrinsics=REAL_K, image_size=(1080, 720), prompt="A street at dusk.")
    plan = ad.plan(case)  # 3.1 s = 93 frames -> 2 chunks, 161 frames
    assert plan.extra["num_chunks"] == 2 and plan.n_frames == 161
    probe = tmp_path / "probe.json"
    monkeypatch.setenv("WG_PROBE", str(probe))
    monkeypatch.setenv("WG_STALE", plan.extra["output_video"])
    paths = {"repo": co, "ckpt": ckpt, "python": str(_python_wrapper(tmp_path, DRIVER)), "extra": {}, "gpus": 1}
    for chunk in run_checkout("infinite-world", ad.repo_spec, paths, plan, seed=1234):
        video = chunk.video
        assert video.relative_to(video.parents[1]) == Path("out") / plan.extra["output_video"]  # exactly that file
        info = probe_video(video)
        assert (info.width, info.height, info.fps, info.frames) == (plan.width, plan.height, 30.0, plan.n_frames)
    log = json.loads(probe.read_text())
    move, view = plan.arrays["move"].tolist(), plan.arrays["view"].tolist()
    assert len(log["chunks"]) == plan.extra["num_chunks"] == log["NUM_CHUNKS"]
    for k, ch in enumerate(log["chunks"]):  # chunk k reads rows [80k, 80k + 81): exactly the plan's classes
        assert ch["move"] == move[80 * k: 80 * k + 81] and ch["view"] == view[80 * k: 80 * k + 81]
    assert log["z_size"] == [[1, 16, 21, 64, 96]] * 2 and log["prompts"] == [["A street at dusk."]] * 2
    assert log["GLOBAL_SEED"] == 1234 and log["initial_seed"] == 1234  # --seed before setup_seed
    c = str(ckpt.resolve())
    assert log["paths"] == {"vae_pth": c + "/models/Wan2.1_VAE.pth",
                            "t5": c + "/models/models_t5_umt5-xxl-enc-bf16.pth",
                            "tokenizer": c + "/models/google/umt5-xxl"}
    assert log["state_dict_keys"] == ["blocks.0.weight"]  # the DiT weights came from --ckpt_dir
    assert not (co / "outputs").exists()  # nothing written into the checkout
    # a stale video of the same name (a case re-run into the same folder) was removed, not appended to (which
    # save_silent_video does, infworld/utils/data_utils.py:637-655: it would hold 3 + 161 frames)
    assert log["stale_frames"] == 3

