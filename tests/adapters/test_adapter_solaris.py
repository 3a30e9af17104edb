"""Solaris MP / SP: per player 23 keys + mouse [yaw, pitch] deg/15 per frame at 20 fps, F = 4L + 1, two views."""

import json
import os
import py_compile
import shutil
import sys
import types
from pathlib import Path

import numpy as np
import pytest
from omegaconf import OmegaConf

from worldgate.adapters import AdapterError, MODELS, UnsupportedMotion, get_adapter
from worldgate.adapters.patching import PatchError
from worldgate.adapters.repo import command_argv
from worldgate.adapters.solaris import ACTION_KEYS, COMMIT, OUTPUT_VIDEO, SolarisMP, SolarisSP, split_views
from worldgate.adapters.solaris_patch import PATCH
from worldgate.trajectories.multiworldbench.world import PlayerSchedule, PlayerSeg, TwoPlayerCase
from worldgate.trajectories.suites import load_suite

from adapter_conformance import gated_checkout as _checkout
from adapter_conformance import worldmark_case

W, S, A, D = 11, 12, 13, 14  # forward, back, left, right in ACTION_KEYS
K = np.float32(25.0 / 20.0 / 15.0)  # 25 deg/s at 20 fps through compress_mouse_linear (/15)


def two_case(a, b, yaw_rate=25.0, cid="t-2p"):
    pa = PlayerSchedule((0.0, 0.0), 0.0, [PlayerSeg(**s) for s in a], yaw_rate=yaw_rate)
    pb = PlayerSchedule((3.0, 0.0), 0.0, [PlayerSeg(**s) for s in b], yaw_rate=yaw_rate)
    return TwoPlayerCase(id=cid, suite="t", trajectory=pa.trajectory(), players={"A": pa, "B": pb},
                         world={"crosses": [[0, 5]]}, task="t", visibility="none")


@pytest.fixture
def mp():
    return get_adapter("solaris-mp")


def test_action_layout_is_the_models():
    assert len(ACTION_KEYS) == 25 and ACTION_KEYS[W:D + 1] == ("forward", "back", "left", "right")
    assert ACTION_KEYS[19:21] == ("attack", "use") and ACTION_KEYS[23:] == ("cameraX", "cameraY")


def test_w_for_2s_and_yaw_left_golden(mp):
    p = mp.plan(two_case([{"move": "W", "seconds": 2.0}], [{"look": "L", "seconds": 2.0}]))
    kb, ms = p.arrays["keyboard"], p.arrays["mouse"]
    # 40 frames at 20 fps after the conditioning frame: L = 10 latents, F = 4*10 + 1 = 41
    assert p.n_frames == 41 and p.extra["latents"] == 10 and kb.shape == (2, 41, 23) and ms.shape == (2, 41, 2)
    assert p.fps == 20.0 and (p.width, p.height) == (640, 352)
    assert p.segment_frames == [(1, 41)]
    expect = np.zeros((41, 23), np.float32)
    expect[1:, W] = 1.0  # row 0 (the action before the conditioning frame) is idle
    np.testing.assert_array_equal(kb[0], expect)
    assert not ms[0].any() and not kb[1].any()
    np.testing.assert_array_equal(ms[1, 1:, 0], np.full(40, -K))  # yaw left: -cameraX
    assert ms[1, 0].tolist() == [0, 0] and not ms[1, :, 1].any()
    assert float(K) == pytest.approx(0.0833333, abs=1e-6)


def test_combined_move_and_look_and_pitch_signs(mp):
    p = mp.plan(two_case([{"move": "W", "look": "R", "seconds": 1.0}, {"move": "S", "look": "v", "seconds": 1.0}],
                         [{"move": "D", "look": "^", "seconds": 1.0}, {"move": "A", "seconds": 1.0}]))
    kb, ms = p.arrays["keyboard"], p.arrays["mouse"]
    assert p.n_frames == 41 and p.segment_frames == [(1, 21), (21, 41)]
    assert kb[0, 1:21].nonzero()[1].tolist() == [W] * 20 and kb[0, 21:41].nonzero()[1].tolist() == [S] * 20
    assert ms[0, 1:21].tolist() == [[K, 0.0]] * 20  # yaw right: +cameraX
    assert ms[0, 21:41].tolist() == [[0.0, K]] * 20  # pitch down: +cameraY (camera_utils.py:10)
    assert kb[1, 1:21].nonzero()[1].tolist() == [D] * 20 and kb[1, 21:41].nonzero()[1].tolist() == [A] * 20
    assert ms[1, 1:21].tolist() == [[0.0, -K]] * 20 and not ms[1, 21:].any()  # pitch up: -cameraY
    assert kb.sum() == 80  # every other key idle


def test_trailing_rows_idle_and_caveated(mp):
    p = mp.plan(two_case([{"move": "W", "seconds": 1.05}], [{"seconds": 1.05}]))
    # 21 frames -> L = 6, F = 25: rows 22..24 carry no command
    assert p.n_frames == 25 and p.segment_frames == [(1, 22)]
    assert p.arrays["keyboard"][0, :, W].tolist() == [0] + [1] * 21 + [0] * 3
    assert any("3 trailing frames" in c for c in p.caveats)


def test_interactions_are_use_and_attack_on_their_row(mp):
    p = mp.plan(two_case([{"seconds": 0.5}, {"act": "place", "material": "gold", "column": (0, 5), "seconds": 0.5}],
                         [{"seconds": 0.75}, {"act": "destroy", "column": (0, 5), "seconds": 0.25}]))
    kb = p.arrays["keyboard"]
    assert kb[0].nonzero() == (np.array([11]), np.array([20]))  # t = 0.5 s -> row 1 + 10, 'use'
    assert kb[1].nonzero() == (np.array([16]), np.array([19]))  # t = 0.75 s -> row 1 + 15, 'attack'
    native = p.files["actions.json"]["native_interactions"]
    assert [(r["player"], r["row"], r["key"]) for r in native] == [("A", 11, "use"), ("B", 16, "attack")]
    assert any("no material channel" in c for c in p.caveats)


def test_turn_rate_beyond_the_converter_clip_is_refused(mp):
    with pytest.raises(UnsupportedMotion, match="clips at 20 deg per frame"):
        mp.plan(two_case([{"look": "R", "seconds": 1.0}], [{"seconds": 1.0}], yaw_rate=500.0))
    # a fast move without a look is fine
    mp.plan(two_case([{"move": "W", "seconds": 1.0}], [{"seconds": 1.0}], yaw_rate=500.0))


def test_single_player_cases_are_refused(mp):
    with pytest.raises(AdapterError, match="two-player cases"):
        mp.plan(worldmark_case(1))


def test_command_line_weights_and_no_seed(mp):
    p = mp.plan(two_case([{"move": "W", "seconds": 2.0}], [{"seconds": 2.0}]))
    assert p.files["command.txt"].split("  #")[0] == (
        "python src/inference.py experiment_name=worldgate device=gpu model=solaris device.eval_num_samples=1 "
        "device.pretrained_model_dir=CKPT runner.params.model_weights_path=CKPT/solaris.pt runner.num_frames_eval=41 "
        "shuffle_bots=false 'device.output_dir=${oc.env:WORLDGATE_OUT}' +worldgate.actions=actions.npz "
        "+worldgate.first_frames=first_frames.npy")
    assert "SEED" not in p.files["command.txt"]
    assert "PRNGKey(0)" in mp.info.no_seed and mp.info.players == 2
    sp = get_adapter("solaris-sp").plan(two_case([{"move": "W", "seconds": 2.0}], [{"seconds": 2.0}]))
    cmd = sp.files["command.txt"]
    assert "model=single_player" in cmd and "CKPT/sp_bidirectional_pretrain_120000.pt" in cmd
    assert "+worldgate.independent=true" in cmd and sp.extra["independent"] is True
    np.testing.assert_array_equal(sp.arrays["keyboard"], p.arrays["keyboard"])  # the same native rows
    assert any("generated alone" in c for c in sp.caveats)


@pytest.mark.parametrize("name", ["solaris-mp", "solaris-sp"])
def test_plan_deterministic_and_round_trip(name, tmp_path):
    case = load_suite("multiworldbench-engine")[2]  # shared-state: a placement
    a, b = get_adapter(name).plan(case), get_adapter(name).plan(case)
    assert a.fingerprint() == b.fingerprint()
    a.write(tmp_path)
    with np.load(tmp_path / "actions.npz") as z:
        np.testing.assert_array_equal(z["keyboard"], a.arrays["keyboard"])
        np.testing.assert_array_equal(z["mouse"], a.arrays["mouse"])
    acts = json.loads((tmp_path / "actions.json").read_text())
    assert len(acts["steps"]) == a.n_frames and set(acts["steps"][0]) == {"A", "B"}
    assert a.arrays["c2w_a"].shape == (a.n_frames, 4, 4)


# ---------------------------------------------------------------------------------------------- fake checkout
FAKE = r'''
# @MARKER@
import json, os, sys
import numpy as np
import imageio.v2 as imageio
args = dict(a.split("=", 1) for a in sys.argv[1:] if "=" in a)
acts = np.load(args["+worldgate.actions"])
ff = np.load(args["+worldgate.first_frames"])
out = os.path.join(args["device.output_dir"].replace("${oc.env:WORLDGATE_OUT}", os.environ["WORLDGATE_OUT"]),
                   args["experiment_name"], "worldgate")
os.makedirs(out, exist_ok=True)
json.dump({"argv": sys.argv, "keyboard_shape": list(acts["keyboard"].shape), "first": list(ff.shape),
           "first_sum": [int(f.astype(np.int64).sum()) for f in ff]}, open(os.environ["FAKE_RECORD"], "w"))
gt = np.zeros_like(ff)
# (5 frames, not the F the real writer writes: the record is checked for its layout, not its length)
frames = [np.concatenate([np.concatenate([gt[p], ff[p]], axis=1) for p in (0, 1)], axis=0) for _ in range(5)]
imageio.mimwrite(os.path.join(out, "video_0_side_by_side.mp4"), frames, fps=20, macro_block_size=1)
'''


def check_two_player_repo(name: str, tmp_path: Path, monkeypatch) -> Path:
    """A two-player repository model against a fake checkout: its native files and the first frames reach the
    entry point, the weights are CKPT, and the side-by-side video becomes a two-view record. Returns the run folder."""
    from test_conformance import check_complete_record, the_record

    from worldgate.generate.records import load_record
    from worldgate.generate.runner import run_generate
    from worldgate.generate.video import read_frames

    cls = MODELS.get(name)
    repo = tmp_path / "checkout"
    (repo / "src").mkdir(parents=True)
    (repo / cls.repo_spec.entry).write_text(FAKE.replace("@MARKER@", cls.repo_spec.patch.marker))
    for rel, marker in cls.repo_spec.patches.items():  # the other files the patch touches hold its marker
        if rel != cls.repo_spec.entry:
            (repo / rel).parent.mkdir(parents=True, exist_ok=True)
            (repo / rel).write_text(f"# {marker}\n")
    ckpt = tmp_path / "weights"
    ckpt.mkdir()
    record = tmp_path / "call.json"
    monkeypatch.setenv("FAKE_RECORD", str(record))
    res = run_generate(name, "multiworldbench-engine", tmp_path / "run", limit=1, seed=1234, progress=False,
                       model_args={"repo": str(repo), "ckpt": str(ckpt), "allow_cpu": True, "python": sys.executable})
    rec = the_record(tmp_path / "run", res)
    r = check_complete_record(rec, cls.info, None, 1234, frames_exact=False)
    assert r["meta"]["seed"] is None and "PRNGKey(0)" in r["meta"]["seed_note"]
    call = json.loads(record.read_text())
    argv = dict(a.split("=", 1) for a in call["argv"][1:] if "=" in a)
    assert argv["device.pretrained_model_dir"] == str(ckpt.resolve())
    assert argv["runner.params.model_weights_path"] == str(ckpt.resolve() / get_adapter(name).weights)
    assert Path(argv["+worldgate.actions"]).is_absolute() and Path(argv["+worldgate.first_frames"]).is_absolute()
    plan = json.loads((rec / "native" / "plan.json").read_text())
    assert call["keyboard_shape"] == [2, plan["n_frames"], 23] and call["first"] == [2, 352, 640, 3]
    # view A is the top-right tile (player 0's rollout), view B the bottom-right one
    fa = next(read_frames(rec / "video_a.mp4")).astype(np.int64)
    fb = next(read_frames(rec / "video_b.mp4")).astype(np.int64)
    assert fa.shape == (352, 640, 3) and fb.shape == (352, 640, 3)
    assert abs(fa.sum() - call["first_sum"][0]) / call["first_sum"][0] < 0.02
    assert abs(fb.sum() - call["first_sum"][1]) / call["first_sum"][1] < 0.02
    assert load_record(rec)["meta"]["achieved"]["A"]["frames"] == 5
    return tmp_path / "run"


@pytest.mark.parametrize("name", ["solaris-mp"])
def test_rollout_through_a_fake_checkout(name, tmp_path, monkeypatch):
    check_two_player_repo(name, tmp_path, monkeypatch)


def test_split_views(tmp_path):
    import imageio.v2 as imageio

    f = np.zeros((8, 12, 3), np.uint8)
    f[:4, 6:] = 200  # player 0's rollout
    f[4:, 6:] = 100  # player 1's rollout
    imageio.mimwrite(tmp_path / "v.mp4", [f] * 3, fps=20, macro_block_size=1)
    v = split_views(tmp_path / "v.mp4")
    assert v["A"].shape == (3, 4, 6, 3) and v["B"].shape == (3, 4, 6, 3)
    assert abs(int(v["A"].mean()) - 200) <= 3 and abs(int(v["B"].mean()) - 100) <= 3


# ---------------------------------------------------------------------------------------------------- gpus
@pytest.mark.parametrize("name", ["solaris-mp", "solaris-sp"])
def test_one_gpu_per_case(name):
    assert get_adapter(name).multi_gpu == ""
    case = two_case([{"move": "W", "seconds": 1.0}], [{"seconds": 1.0}])
    cmd = get_adapter(name, gpus=1).plan(case).files["command.txt"]
    assert cmd.startswith("python src/inference.py ") and "torch.distributed" not in cmd
    with pytest.raises(AdapterError, match="no multi-GPU inference"):
        get_adapter(name, gpus=2).plan(case)


# ---------------------------------------------------------------------------------------------------- the patch
#: the lines of Solaris's files the patch touches (its anchors), inside a little Python of our own
SYNTH = {
    "src/inference.py": '''def resolve_device_paths(cfg):
    cfg["resolved"] = True


def instantiate_from_config(cfg):
    return cfg["runner"]


def main(cfg):
    # a comment
    resolve_device_paths(cfg)

    inference = instantiate_from_config(cfg)
    inference.run()
''',
    "src/runners/base_mp_runner.py": '''class BaseMPRunner:
    def __init__(self, network_config):
        self.network_config = network_config
        self.multiplayer_method = self.network_config.params.multiplayer_method
''',
    "src/runners/inference.py": '''class Inference:
    def __init__(self, model_weights_path, network_config, pretrained_checkpointer):
        self.network_config = network_config
        self.pretrained_checkpointer = pretrained_checkpointer
        model_state = {"w": 0}
        self.model_state = self.pretrained_checkpointer.restore(
            model_weights_path, model_state
        )
        self.multiplayer_method = self.network_config.params.multiplayer_method
''',
    # a Batch of our own with the interface of src/data/batch.py (obs, act, real_lengths, to_dict)
    "src/data/batch.py": '''from dataclasses import dataclass

import numpy as np


@dataclass
class Batch:
    obs: np.ndarray
    act: np.ndarray
    real_lengths: np.ndarray

    def to_dict(self):
        return {"obs": self.obs, "act": self.act, "real_lengths": self.real_lengths}
''',
}


def write_synth(root: Path) -> None:
    for rel, text in SYNTH.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


@pytest.fixture
def clean_modules(monkeypatch):
    """A test that imports from a checkout copy (src.*, stubs) leaves nothing behind in sys.modules."""
    def ours(k):  # the checkout's package (pure Python); stubs go through monkeypatch.setitem
        return k == "src" or k.startswith("src.")

    for k in [k for k in sys.modules if ours(k)]:
        monkeypatch.delitem(sys.modules, k)
    yield
    for k in [k for k in sys.modules if ours(k)]:
        del sys.modules[k]


def test_patch_applies_to_the_anchored_lines(tmp_path):
    write_synth(tmp_path)
    files = ["src/inference.py", "src/runners/base_mp_runner.py", "src/runners/inference.py", "src/worldgate_inputs.py"]
    assert PATCH.files() == files and PATCH.missing(tmp_path) == files
    assert PATCH.apply(tmp_path) == files
    assert PATCH.missing(tmp_path) == []
    assert SolarisMP.repo_spec.patches == SolarisSP.repo_spec.patches == PATCH.markers()
    assert (tmp_path / "src/inference.py").read_text().count(PATCH.marker) == 2
    for f in files:
        py_compile.compile(str(tmp_path / f), doraise=True)
        assert PATCH.marker in (tmp_path / f).read_text()
    for f in files[1:3]:  # the stock attribute read is gone: a config without the key gives None
        text = (tmp_path / f).read_text()
        assert "params.multiplayer_method\n" not in text and 'params.get("multiplayer_method")' in text
    snapshot = {f: (tmp_path / f).read_text() for f in files}
    assert PATCH.apply(tmp_path) == []  # idempotent
    assert {f: (tmp_path / f).read_text() for f in files} == snapshot


def test_patch_refuses_a_file_without_its_anchor(tmp_path):
    write_synth(tmp_path)
    f = tmp_path / "src/runners/base_mp_runner.py"
    f.write_text(SYNTH["src/runners/base_mp_runner.py"].replace("params.multiplayer_method", "params.method"))
    with pytest.raises(PatchError, match=r"src/runners/base_mp_runner\.py: the patch's anchor .*occurs 0 times"):
        PATCH.apply(tmp_path)
    assert PATCH.marker not in f.read_text()


def test_patched_entry_runs_the_case_through_the_runner(tmp_path, monkeypatch, clean_modules):
    """The synthetic entry point, patched: worldgate's module turns the plan's files into the one eval batch and the
    runner's own run() gets it; without +worldgate keys the stock path runs."""
    import importlib.util

    write_synth(tmp_path)
    PATCH.apply(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "-")  # recorded, so teardown restores the caller's value
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    spec = importlib.util.spec_from_file_location("solaris_synth_entry", tmp_path / "src/inference.py")
    entry = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(entry)
    plan, native, frames = planned(tmp_path)

    class Runner:
        def run(self):
            self.ran = True

    runner = Runner()
    cfg = composed_cfg(plan, native)
    monkeypatch.setattr(entry, "instantiate_from_config", lambda c: runner)
    monkeypatch.setattr(entry, "resolve_device_paths", lambda c: None)
    entry.main(cfg)
    assert runner.ran and list(runner.eval_dataloaders) == ["worldgate"] and len(cfg.eval_datasets) == 0
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "0"  # a case is one sample: one device
    batch, = runner.eval_dataloaders["worldgate"]["dataloader"]
    check_mp_batch(batch, plan, frames)
    stock = Runner()
    monkeypatch.setattr(entry, "instantiate_from_config", lambda c: stock)
    entry.main(OmegaConf.create({"model": {}}))  # no worldgate key: the runner's own run, no eval batch of ours
    assert stock.ran and not hasattr(stock, "eval_dataloaders")


def planned(tmp_path: Path, name="solaris-mp"):
    """A two-player plan with moves, looks and an interaction, its native files (with first frames) and the frames."""
    case = two_case([{"move": "W", "look": "R", "seconds": 0.5}, {"move": "A", "look": "v", "seconds": 0.4},
                     {"act": "place", "material": "gold", "column": (0, 5), "seconds": 0.3}],
                    [{"look": "L", "seconds": 0.6}, {"move": "S", "look": "^", "seconds": 0.6}])
    plan = get_adapter(name).plan(case)
    frames = np.random.default_rng(3).integers(0, 256, (2, 352, 640, 3), dtype=np.uint8)
    import dataclasses

    run = dataclasses.replace(plan, files=dict(plan.files, **{"first_frames.npy": frames}))
    native = tmp_path / "native"
    run.write(native)
    return run, native, frames


def composed_cfg(plan, native, independent=False):
    """What Hydra composes for the plan's command (only the keys the worldgate module reads), in struct mode."""
    target = ("src.models.singleplayer.world_model.SolarisSPModel" if independent
              else "src.models.multiplayer.world_model.SolarisMPModel")
    cfg = OmegaConf.create({
        "worldgate": {"actions": str(native / "actions.npz"), "first_frames": str(native / "first_frames.npy"),
                      **({"independent": True} if independent else {})},
        "model": {"network_config": {"target": target, "params": {"action_config": {
            "keyboard_dim_in": 23, "mouse_dim_in": 2, "left_action_padding": 11}}}},
        "runner": {"num_frames_eval": plan.n_frames}, "device": {"name": "gpu"},
        "eval_datasets": {"eval_structure": {"name": "eval_structure"}}})
    OmegaConf.set_struct(cfg, True)
    return cfg


def check_mp_batch(batch, plan, frames):
    """The batch as the eval loader yields it, and the runner's own split of it (base_mp_runner.py:151-158, in
    numpy): the plan's rows exactly, players A, B in order."""
    F = plan.n_frames
    d = batch.to_dict()
    assert d["obs"].shape == (1, F, 2, 352, 640, 3) and d["obs"].dtype == np.uint8
    assert d["act"].shape == (1, F, 2, 25) and d["act"].dtype == np.float32 and d["real_lengths"].tolist() == [F]
    video = d["obs"].transpose(0, 2, 1, 3, 4, 5)  # "b f p h w c -> b p f h w c"
    act = d["act"].transpose(0, 2, 1, 3)  # "b f p d -> b p f d"
    np.testing.assert_array_equal(act[..., -2:][0], plan.arrays["mouse"])
    np.testing.assert_array_equal(act[..., :-2][0], plan.arrays["keyboard"])
    np.testing.assert_array_equal(video[0, :, 0], frames)
    np.testing.assert_array_equal(video[0, :, -1], frames)


def test_worldgate_inputs_refuse_what_does_not_fit(tmp_path, monkeypatch, clean_modules):
    write_synth(tmp_path)
    PATCH.apply(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    from src.worldgate_inputs import WorldgateInputs

    plan, native, _ = planned(tmp_path)
    assert WorldgateInputs.from_cfg(OmegaConf.create({"model": {}})) is None  # no worldgate key: stock behaviour
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")
    wg = WorldgateInputs.from_cfg(composed_cfg(plan, native))
    assert wg.n_frames == plan.n_frames and not wg.independent and os.environ["CUDA_VISIBLE_DEVICES"] == "3"
    bad = composed_cfg(plan, native)
    bad.runner.num_frames_eval = 33
    with pytest.raises(ValueError, match=r"num_frames_eval=33 but .*actions\.npz holds 25 frames"):
        WorldgateInputs.from_cfg(bad)
    sp = composed_cfg(plan, native)
    OmegaConf.set_struct(sp, False)
    sp.worldgate.independent = True
    with pytest.raises(ValueError, match="independent=True does not fit model .*SolarisMPModel"):
        WorldgateInputs.from_cfg(sp)
    sp.model.network_config.target = "src.models.singleplayer.world_model.SolarisSPModel"
    assert WorldgateInputs.from_cfg(sp).independent
    sp.worldgate.extra = 1
    with pytest.raises(ValueError, match=r"unknown worldgate keys \['extra'\]"):
        WorldgateInputs.from_cfg(sp)
    np.save(native / "first_frames.npy", np.zeros((2, 8, 8, 3), np.float32))
    with pytest.raises(ValueError, match=r"expected \(2, H, W, 3\) uint8"):
        WorldgateInputs.from_cfg(composed_cfg(plan, native))
    # one player's single-player batch: obs (1, F, H, W, 3), act (1, F, 25) (trainer_sp.py:67-78)
    plan, native, frames = planned(tmp_path)
    wg = WorldgateInputs.from_cfg(composed_cfg(plan, native))
    for p in (0, 1):
        d = wg.batch(p).to_dict()
        assert d["obs"].shape == (1, plan.n_frames, 352, 640, 3) and d["real_lengths"].tolist() == [plan.n_frames]
        np.testing.assert_array_equal(d["act"][0, :, :-2], plan.arrays["keyboard"][p])
        np.testing.assert_array_equal(d["act"][0, :, -2:], plan.arrays["mouse"][p])
        np.testing.assert_array_equal(d["obs"][0, -1], frames[p])


def test_restore_model_state_drops_the_single_player_placeholder(tmp_path, monkeypatch, clean_modules):
    """A stage-1 checkpoint holds a player_embed the single-player state lacks (trainer_sp.py:23-63): it is restored
    beside that state and dropped; a checkpoint that matches is restored as the stock line does."""
    write_synth(tmp_path)
    PATCH.apply(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))

    class Meta:
        shape = (2, 1536)

    class Checkpointer:
        def __init__(self, keys):
            self.keys, self.calls = keys, []

        def metadata(self, path):
            return {k: {"embedding": {"value": Meta()}} for k in self.keys}

        def restore(self, path, target):
            self.calls.append((path, sorted(target)))
            assert sorted(target) == sorted(self.keys)  # orbax refuses a tree that differs from the saved one
            return {k: f"restored {k}" for k in target}

    made = {}
    nnx = types.SimpleNamespace(
        Embed=lambda num_embeddings, features, rngs: made.update(shape=(num_embeddings, features)) or "embed",
        Rngs=lambda params: params, split=lambda m: ("graph", {"embedding": m}))
    monkeypatch.setitem(sys.modules, "flax", types.SimpleNamespace(nnx=nnx))
    monkeypatch.setitem(sys.modules, "jax", types.SimpleNamespace(random=types.SimpleNamespace(PRNGKey=lambda s: s)))
    from src.worldgate_inputs import restore_model_state

    mp = Checkpointer(["blocks", "player_embed"])
    assert restore_model_state(mp, "solaris.pt", {"blocks": 0, "player_embed": 0}) == {
        "blocks": "restored blocks", "player_embed": "restored player_embed"}
    assert mp.calls == [("solaris.pt", ["blocks", "player_embed"])] and not made
    sp = Checkpointer(["blocks", "player_embed"])
    state = {"blocks": 0}
    assert restore_model_state(sp, "sp.pt", state) == {"blocks": "restored blocks"} and state == {"blocks": 0}
    assert sp.calls == [("sp.pt", ["blocks", "player_embed"])] and made["shape"] == (2, 1536)
    with pytest.raises(ValueError, match=r"holds \['other'\] beyond the model's state"):
        restore_model_state(Checkpointer(["blocks", "other"]), "x.pt", {"blocks": 0})


def test_repo_spec_pins_the_commit_weights_and_output():
    for cls, ckpt in ((SolarisMP, "solaris.pt"), (SolarisSP, "sp_bidirectional_pretrain_120000.pt")):
        spec = cls.repo_spec
        assert spec.commit == COMMIT == "0be45a858b540b4a15576368e97c52bf8e2aa4b8" and spec.subdir == ""
        assert spec.patch is PATCH and spec.requirements == ("requirements_gpu.txt",)
        assert spec.weights_patterns == (ckpt, f"{ckpt}/*", "clip.pt", "clip.pt/*", "vae.pt", "vae.pt/*")
        plan = get_adapter(cls.info.name).plan(two_case([{"move": "W", "seconds": 1.0}], [{"seconds": 1.0}]))
        assert plan.extra["output_video"] == OUTPUT_VIDEO == "worldgate/worldgate/video_0_side_by_side.mp4"
        assert "experiment_name=worldgate " in plan.files["command.txt"]
    assert PATCH.flags == ("+worldgate.actions", "+worldgate.first_frames", "+worldgate.independent")


# ------------------------------------------------------------------------------------- the real checkout (gated)


SOLARIS = _checkout("SOLARIS_CHECKOUT", COMMIT)


@pytest.mark.skipif(SOLARIS is None, reason="set SOLARIS_CHECKOUT to a checkout of solaris-wm/solaris at " + COMMIT)
@pytest.mark.parametrize("name", ["solaris-mp", "solaris-sp"])
def test_patched_entry_point_builds_the_plans_controls(name, tmp_path, monkeypatch, clean_modules):
    """The real src/inference.py, patched, under the real Hydra: the plan's command line composes with the
    checkout's own config, the eval datasets are dropped, and the runner receives exactly the plan's rows (solaris-mp:
    the eval batch its own run() reads; solaris-sp: each player's rows at the single-player rollout). JAX, flax, the
    runner class and the rollout are stubbed; the config, the action keys and the mouse converter are the checkout's."""
    import contextlib
    import importlib.util

    import torch

    pytest.importorskip("hydra")
    from hydra.core.global_hydra import GlobalHydra

    repo = tmp_path / "solaris"
    shutil.copytree(SOLARIS, repo, ignore=shutil.ignore_patterns(".git", "assets", "vlm_eval", "*.pickle", "*.mp4"))
    assert PATCH.apply(repo) == PATCH.files()
    plan, native, frames = planned(tmp_path, name)
    ckpt, out = tmp_path / "pretrained", tmp_path / "out"
    ckpt.mkdir()
    out.mkdir()
    argv = command_argv(plan.files["command.txt"], plan.files, native, {"python": sys.executable, "ckpt": ckpt},
                        None, None)
    assert argv[1] == "src/inference.py" and f"+worldgate.actions={native / 'actions.npz'}" in argv
    argv += [f"hydra.run.dir={tmp_path / 'hydra'}", "hydra/job_logging=disabled", "hydra/hydra_logging=disabled"]
    seen = {}

    class FakeInference:  # src.runners.inference.Inference: what BaseRunner/Inference keep of their parameters
        def __init__(self, model_weights_path, **kw):
            seen["init"] = dict(kw, model_weights_path=model_weights_path)
            nc = kw["network_config"]
            self.eval_save_dir, self.network_config = kw["eval_save_dir"], nc
            self.left_action_padding = nc.params.action_config.left_action_padding  # base_runner.py:142-144
            self.multiplayer_method = nc.params.get("multiplayer_method")  # the patched base_mp_runner.py:144
            self.eval_dataloaders = {"stock": "would read datasets"} if kw["eval_datasets"] else {}
            self.mesh = contextlib.nullcontext()
            self.model_graph = self.model_state = self.vae_model = self.clip_model = "state"

        def run(self):  # Inference.run -> run_evals -> run_eval -> _get_curr_batch (base_mp_runner.py:146-169)
            for eval_name, info in self.eval_dataloaders.items():
                d = next(iter(info["dataloader"])).to_dict()
                act = d["act"].astype(np.float32).transpose(0, 2, 1, 3)  # "b f p d -> b p f d"
                seen["mp"] = {"name": eval_name, "batch": d, "mouse": act[..., -2:], "keyboard": act[..., :-2]}

    def fake_sp_batch(self, loader_iter):  # trainer_sp.py:67-89, in numpy
        d = next(loader_iter).to_dict()
        act, video = d["act"], d["obs"].astype(np.float32)
        return video, video, act[:, :, -2:], act[:, :, :-2], d["real_lengths"]

    def fake_rollout(g, s, vg, vs, cg, cs, first, mouse, keyboard, frames_to_decode, mesh, left_action_padding,
                     num_denoising_steps=None):
        seen.setdefault("sp", []).append({"first": first, "mouse": mouse, "keyboard": keyboard, "F": frames_to_decode,
                                          "pad": left_action_padding, "steps": num_denoising_steps})
        return np.full((1, frames_to_decode, 352, 640, 3), 100 * len(seen["sp"]), np.uint8)

    def write_video(path, video, fps):
        seen["written"] = (path, tuple(video.shape), fps, video)

    def module(name, **attrs):
        m = types.ModuleType(name)
        m.__dict__.update(attrs)
        monkeypatch.setitem(sys.modules, name, m)
        return m

    module("wandb")
    module("absl", logging=module("absl.logging", ERROR=40, set_verbosity=lambda v: None, info=lambda *a: None))
    module("decord", VideoReader=object, cpu=lambda *a: None)
    module("jax", process_index=lambda: 0, devices=lambda: ["gpu:0"], tree=types.SimpleNamespace(map=None),
           numpy=types.SimpleNamespace(bfloat16=np.float32, uint8=np.uint8))
    module("flax", nnx=types.SimpleNamespace(merge=lambda g, s: types.SimpleNamespace(eval=lambda: None),
                                             split=lambda m: ("graph", "state")))
    module("src.runners.inference", Inference=FakeInference)
    module("src.runners.trainer_sp", Trainer=type("Trainer", (), {"_get_curr_batch": fake_sp_batch}))
    module("src.models.utils", jax_to_torch=lambda x: torch.from_numpy(np.asarray(x)))
    module("src.utils.sharding", get_local_slice_from_fsarray=np.asarray)
    module("src.utils.preprocessing_sp", wan_image_condition_preprocess=lambda v, h, w: v / 127.5 - 1.0)
    module("src.utils.rollout", perform_bidirectional_rollout=fake_rollout,
           change_tensor_range=lambda x, a, b, dtype: np.clip((x + 1.0) * 127.5, 0, 255).astype(np.uint8))
    import torchvision.io

    monkeypatch.setattr(torchvision.io, "write_video", write_video, raising=False)
    monkeypatch.syspath_prepend(str(repo))
    monkeypatch.chdir(repo)
    monkeypatch.setenv("WORLDGATE_OUT", str(out))
    monkeypatch.setenv("HYDRA_FULL_ERROR", "1")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    monkeypatch.setattr(sys, "argv", [str(repo / "src/inference.py")] + argv[2:])
    # run as the script itself (``__main__``: Hydra then finds ../config beside the file, src/inference.py:11-13)
    spec = importlib.util.spec_from_file_location("__main__", repo / "src/inference.py")
    GlobalHydra.instance().clear()
    try:
        spec.loader.exec_module(importlib.util.module_from_spec(spec))
    finally:
        GlobalHydra.instance().clear()

    F, P = plan.n_frames, 2
    init = seen["init"]
    assert init["model_weights_path"] == str(ckpt / get_adapter(name).weights)
    assert init["clip_checkpoint_path"] == str(ckpt / "clip.pt") and init["vae_checkpoint_path"] == str(ckpt / "vae.pt")
    assert init["eval_save_dir"] == str(out / "worldgate") and len(init["eval_datasets"]) == 0  # no dataset is read
    assert list(init["converters"]) == ["CameraLinearConverterMatrixGame2"] and init["eval_num_samples"] == 1
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "2"  # one case, one sample: one device
    params = init["network_config"].params
    assert params.action_config.keyboard_dim_in == 23 and params.action_config.mouse_dim_in == 2
    # the checkout's own action layout and mouse converter give the plan's rows (+-25 deg/s at 20 fps = 1.25 deg)
    from src.data.dataset import input_converters
    from src.data.minecraft import ACTION_KEYS as MODEL_KEYS

    assert tuple(MODEL_KEYS) == ACTION_KEYS
    for p in range(P):
        raw = np.zeros((F, 25), np.float64)
        raw[:, 23:] = np.sign(plan.arrays["mouse"][p]) * 1.25
        conv = input_converters["CameraLinearConverterMatrixGame2"].convert(raw)
        np.testing.assert_array_equal(conv[:, 23:].astype(np.float32), plan.arrays["mouse"][p])
    assert np.abs(plan.arrays["mouse"]).max() > 0 and plan.arrays["keyboard"].sum() > 0
    if name == "solaris-mp":
        assert init["network_config"].target.endswith("SolarisMPModel")
        assert params.multiplayer_method == "multiplayer_attn"
        mp = seen["mp"]
        assert mp["name"] == "worldgate" and mp["batch"]["obs"].shape == (1, F, P, 352, 640, 3)
        np.testing.assert_array_equal(mp["mouse"][0], plan.arrays["mouse"])
        np.testing.assert_array_equal(mp["keyboard"][0], plan.arrays["keyboard"])
        np.testing.assert_array_equal(mp["batch"]["obs"][0, :, 0], np.repeat(frames[:1], F, 0))  # the frame, F times
        np.testing.assert_array_equal(mp["batch"]["obs"][0, -1], frames)
        assert "sp" not in seen and "written" not in seen  # the runner's own evaluate_mp writes the video
    else:
        assert init["network_config"].target.endswith("SolarisSPModel")
        assert params.get("multiplayer_method") is None
        with pytest.raises(Exception, match="multiplayer_method"):
            _ = params.multiplayer_method  # the stock read (base_mp_runner.py:144) fails for this config
        assert "mp" not in seen and len(seen["sp"]) == P
        for p, call in enumerate(seen["sp"]):
            assert call["F"] == F and call["pad"] == 11 and call["steps"] is None
            np.testing.assert_array_equal(call["mouse"][0], plan.arrays["mouse"][p])
            np.testing.assert_array_equal(call["keyboard"][0], plan.arrays["keyboard"][p])
            np.testing.assert_array_equal(np.rint((call["first"][0] + 1.0) * 127.5).astype(np.uint8), frames[p])
        path, shape, fps, video = seen["written"]
        assert path == str(out / OUTPUT_VIDEO) and shape == (F, 2 * 352, 2 * 640, 3) and fps == 20
        assert int(video[0, 10, 700, 0]) == 100 and int(video[0, 400, 700, 0]) == 200  # player 0 above player 1
        gt = video[0, 352:, :640].numpy().astype(int)  # ground truth | rollout (change_tensor_range truncates)
        assert np.abs(gt - frames[1]).max() <= 1
