"""Solaris MP / SP: per player 23 keys + mouse [yaw, pitch] deg/15 per frame at 20 fps, F = 4L + 1, two views."""

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from worldgate.adapters import AdapterError, MODELS, UnsupportedMotion, get_adapter
from worldgate.adapters.solaris import ACTION_KEYS, split_views
from worldgate.trajectories.multiworldbench.world import PlayerSchedule, PlayerSeg, TwoPlayerCase
from worldgate.trajectories.suites import load_suite

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
# worldgate.actions (patch marker)
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
frames = [np.concatenate([np.concatenate([gt[p], ff[p]], axis=1) for p in (0, 1)], axis=0) for _ in range(5)]
imageio.mimwrite(os.path.join(out, "video_0_side_by_side.mp4"), frames, fps=20, macro_block_size=1)
'''


def check_two_player_repo(name: str, tmp_path: Path, monkeypatch) -> None:
    """A two-player repository model against a fake checkout: its native files and the first frames reach the
    entry point, the weights are CKPT, and the side-by-side video becomes a two-view record."""
    from test_conformance import check_complete_record, the_record

    from worldgate.generate.records import load_record
    from worldgate.generate.runner import run_generate
    from worldgate.generate.video import read_frames

    cls = MODELS.get(name)
    repo = tmp_path / "checkout"
    (repo / "src").mkdir(parents=True)
    (repo / cls.repo_spec.entry).write_text(FAKE)
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
