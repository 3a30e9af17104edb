"""Yume 1.5: one Yume-1.5 caption line per 29-frame chunk at 16 fps; line i drives chunk i+1 (line 0 also chunk 0)."""

import math

import numpy as np
import pytest

from adapter_conformance import (REAL_K, REAL_SIZE, AdapterConformance, gated_checkout, gated_plan, lift_functions,
                                 worldmark_case)
from worldgate.adapters import get_adapter
from worldgate.trajectories import library
from worldgate.trajectories.core import Trajectory
from worldgate.trajectories.suites import Case

# the exact lines, written out by hand from webapp_single_gpu.py:648-670 and caption_re.txt:1,7
SPEED_MOVE = " Actual distance moved:4 at 100 meters per second. Angular change rate (turn speed):0. View rotation speed:0."
SPEED_TURN = " Actual distance moved:0 at 100 meters per second. Angular change rate (turn speed):4. View rotation speed:4."
SPEED_NONE = " Actual distance moved:0 at 100 meters per second. Angular change rate (turn speed):0. View rotation speed:0."
STILL_ROT = " The rotation direction of the camera remains stationary (·)."
STILL_MOVE = " The camera's movement direction remains stationary (·)."
FWD = "First-person perspective. The camera pushes forward (W)." + STILL_ROT + SPEED_MOVE
BACK = "First-person perspective. The camera pulls back (S)." + STILL_ROT + SPEED_MOVE
LEFT = "First-person perspective." + STILL_MOVE + " The camera pans to the left (←)." + SPEED_TURN
RIGHT = "First-person perspective." + STILL_MOVE + " The camera pans to the right (→)." + SPEED_TURN
UP = "First-person perspective." + STILL_MOVE + " The camera tilts up (↑)." + SPEED_TURN
DOWN = "First-person perspective." + STILL_MOVE + " The camera tilts down (↓)." + SPEED_TURN
HOLD = "First-person perspective." + STILL_MOVE + STILL_ROT + SPEED_NONE


class TestYumeConformance(AdapterConformance):
    adapter_name = "yume"


@pytest.fixture
def yu():
    return get_adapter("yume")


def lines(plan):
    text = plan.files["caption.txt"]
    assert text.endswith("\n") and "\n\n" not in text
    return text[:-1].split("\n")


def chunk_captions(plan):
    """What sample_5b.py feeds each chunk: chunk 0 -> line 0, chunk j >= 1 -> line j-1 (S5:901-906, 1083-1094)."""
    ls = lines(plan)
    return [ls[0]] + ls[:len(ls) - 1]


def test_id1_forward_golden(yu):
    p = yu.plan(worldmark_case(1))
    # 20 s * 16 fps = 320 frames; 320 / 29 = 11.03 -> 11 lines of 29 frames = 319 frames
    assert lines(p) == [FWD] * 11
    assert p.n_frames == 319 and p.segment_frames == [(0, 319)] and (p.width, p.height, p.fps) == (1280, 704, 16.0)
    assert p.arrays["line_of_chunk"].tolist() == [0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9]
    assert "--caption_path caption.txt" in p.files["command.txt"] and p.files["prompt.txt"] == p.prompt


def test_id6_ws_golden(yu):
    p = yu.plan(worldmark_case(6))
    # chunks 0..10 W, 11..21 S; line i drives chunk i+1, so the file is W x10 then S x12 (the last is unused)
    assert lines(p) == [FWD] * 10 + [BACK] * 12
    assert chunk_captions(p) == [FWD] * 11 + [BACK] * 11
    assert p.segment_frames == [(0, 319), (319, 638)] and p.n_frames == 638


def test_id11_wsw_golden(yu):
    p = yu.plan(worldmark_case(11))
    assert lines(p) == [FWD] * 10 + [BACK] * 11 + [FWD] * 12
    assert chunk_captions(p) == [FWD] * 11 + [BACK] * 11 + [FWD] * 11
    assert p.segment_frames == [(0, 319), (319, 638), (638, 957)]
    assert p.arrays["chunks_per_segment"].tolist() == [11, 11, 11]


def test_lrud_golden(yu):
    c = Case(id="lrud", suite="t", trajectory=library.get("LRUD"), image="x.jpg", intrinsics=REAL_K,
             image_size=REAL_SIZE)
    p = yu.plan(c)
    # V 2 s -> 32/29 -> 1, raised to 2 (chunks 0 and 1 share line 0); L, R 3.6 s -> 57.6/29 = 1.99 -> 2;
    # U, D 1.8 s -> 28.8/29 -> 1; H 1 s -> 0.55 -> 1
    assert p.arrays["chunks_per_segment"].tolist() == [2, 2, 2, 1, 1, 1]
    assert p.segment_frames == [(0, 58), (58, 116), (116, 174), (174, 203), (203, 232), (232, 261)]
    assert chunk_captions(p) == [HOLD, HOLD, LEFT, LEFT, RIGHT, RIGHT, UP, DOWN, HOLD]
    assert lines(p) == [HOLD, LEFT, LEFT, RIGHT, RIGHT, UP, DOWN, HOLD, HOLD]
    assert any("first segment lasts 2 chunks" in c for c in p.caveats)


def test_properties_per_segment(yu):
    c = Case(id="lrud", suite="t", trajectory=library.get("LRUD"), image="x.jpg", intrinsics=REAL_K,
             image_size=REAL_SIZE)
    p = yu.plan(c)
    caps, seg = chunk_captions(p), p.arrays["segment_of_chunk"]
    for cap, s in zip(caps, seg):
        rot = "(↑)" in cap or "(↓)" in cap
        assert rot == (s in (3, 4))  # pitch only during U and D
        assert "distance moved:0 " in cap and "(W)" not in cap  # no translation anywhere in LRUD
    p = yu.plan(worldmark_case(13))  # W R W: forward only during W, never during R
    for cap, s in zip(chunk_captions(p), p.arrays["segment_of_chunk"]):
        assert ("pushes forward (W)" in cap) == (s != 1) and ("pans to the right" in cap) == (s == 1)


def test_yaw_right_is_right_arrow(yu):
    assert lines(yu.plan(worldmark_case(5))) == [RIGHT] * 11
    caps = chunk_captions(yu.plan(worldmark_case(7)))  # L R: a flipped sign would swap these
    assert caps[:11] == [LEFT] * 11 and caps[11:] == [RIGHT] * 11
    assert all("(←)" not in c for c in caps[11:])


def test_walk_while_turning_is_expressible(yu):
    c = Case(id="wr", suite="t", trajectory=Trajectory.parse("W+R5"), image="x.jpg", intrinsics=REAL_K,
             image_size=REAL_SIZE)
    p = yu.plan(c)  # 5 s * 16 / 29 = 2.76 -> 3 chunks
    assert lines(p) == ["First-person perspective. The camera pushes forward (W). The camera pans to the right (→). "
                        "Actual distance moved:4 at 100 meters per second. Angular change rate (turn speed):4. "
                        "View rotation speed:4."] * 3
    assert p.segment_frames == [(0, 87)]


def test_rounding_rule(yu):
    def per_seg(text):
        c = Case(id="r", suite="t", trajectory=Trajectory.parse(text), image="x.jpg")
        return yu.plan(c).arrays["chunks_per_segment"].tolist()
    # 2.7 s -> 43.2/29 = 1.49 -> 1; 2.75 s -> 44/29 = 1.517 -> 2; 0.3 s -> 0.17 -> at least 1
    assert per_seg("W5 R2.7 L2.75 S0.3") == [3, 1, 2, 1]
    assert per_seg("W0.5 R2") == [2, 1]  # the first segment gets at least 2 chunks


def test_intrinsics_regime_1_on_real_size(yu):
    p = yu.plan(worldmark_case(1))
    assert p.intrinsics["regime"] == 1 and p.intrinsics["native_hfov_deg"] is None
    assert math.isclose(p.intrinsics["case_hfov_deg"], math.degrees(2 * math.atan(1080 / (2 * 796.7481))), rel_tol=1e-12)
    assert np.isclose(p.intrinsics["case_hfov_deg"], 68.2, atol=0.1)


def test_command_writes_into_out_and_names_the_checkpoint_rule(yu):
    cmd = yu.plan(worldmark_case(1)).files["command.txt"]
    assert "--video_output_dir OUT " in cmd and "./outputs" not in cmd  # never a video picked out of the checkout
    assert "--num_euler_timesteps 4 " in cmd and "--caption_path caption.txt " in cmd


def test_load_refuses_a_ckpt_the_model_would_ignore(tmp_path):
    """sample_5b.py:1146 hard-codes ckpt_dir = ./Yume-5B-720P: any other ckpt would be silently unused."""
    from worldgate.adapters import AdapterError

    repo = tmp_path / "YUME"
    (repo / "fastvideo/sample").mkdir(parents=True)
    (repo / "fastvideo/sample/sample_5b.py").write_text("")
    elsewhere = tmp_path / "weights"
    elsewhere.mkdir()
    get_adapter("yume", repo=str(repo), ckpt=str(elsewhere), allow_cpu=True).load()  # none there: the model errors
    (repo / "Yume-5B-720P").mkdir()  # other weights in the checkout: the model would run those, silently
    with pytest.raises(AdapterError, match="hard-coded"):
        get_adapter("yume", repo=str(repo), ckpt=str(elsewhere), allow_cpu=True).load()
    (repo / "Yume-5B-720P").rmdir()
    (repo / "Yume-5B-720P").symlink_to(elsewhere)  # the fix the error names
    get_adapter("yume", repo=str(repo), ckpt=str(elsewhere), allow_cpu=True).load()
    (repo / "Yume-5B-720P").unlink()
    (repo / "Yume-5B-720P").mkdir()
    get_adapter("yume", repo=str(repo), ckpt=str(repo / "Yume-5B-720P"), allow_cpu=True).load()


def test_pan_sentence_caveat(yu):
    p = yu.plan(worldmark_case(5))  # R: a turn without a move
    assert any("caption_re.txt:7-11" in c and "pushes forward (W)" in c for c in p.caveats)
    assert not any("caption_re.txt:7-11" in c for c in yu.plan(worldmark_case(1)).caveats)


# ------------------------------------------------------------------------------------------- gpus, setup, output
def test_gpus_1_is_a_one_process_torchrun_with_no_fixed_port(yu):
    """sample_5b.py reads LOCAL_RANK/RANK/WORLD_SIZE and joins NCCL unconditionally (sample_5b.py:1124-1127), so it
    runs under the launcher even alone; --standalone picks a free port instead of sample_5b.sh's --master_port 29717,
    so two cases on one node do not collide."""
    cmd = yu.plan(worldmark_case(1)).files["command.txt"]
    assert cmd.startswith("python -m torch.distributed.run --standalone --nproc_per_node=1 "
                          "fastvideo/sample/sample_5b.py --gradient_checkpointing ")
    assert "--master_port" not in cmd and "29717" not in cmd and "--sp_size" not in cmd
    assert cmd == get_adapter("yume", gpus="1").plan(worldmark_case(1)).files["command.txt"]


@pytest.mark.parametrize("n", [2, 8])
def test_gpus_above_1_are_refused(n):
    """sample_5b.sh's 2 processes split the images of --jpg_dir between ranks (sample_5b.py:782-785): one case on N
    processes would be generated N times; the 5B model has no sequence parallelism (wan23/textimage2video.py:161)."""
    from worldgate.adapters import AdapterError
    from worldgate.adapters.yume import Yume

    assert Yume.multi_gpu == ""
    with pytest.raises(AdapterError, match=f"yume has no multi-GPU inference .* gpus={n} cannot be honoured"):
        get_adapter("yume", gpus=n).plan(worldmark_case(1))


def test_repo_spec_pins_the_commit_the_setup_and_the_weights():
    import worldgate.adapters.yume as mod

    spec = mod.Yume.repo_spec
    assert spec.commit == "111c3fab7fb020d1e261a68be6ec78a3fecc8d5b" and spec.commit in mod.__doc__
    # README.md:36-39: env_setup.sh (torch, flash-attn, `pip install -e .`) then requirements.txt: the pip steps
    assert spec.subdir == "" and spec.requirements == ("pyproject.toml", "requirements.txt")
    assert spec.weights_patterns == ("models_t5_umt5-xxl-enc-bf16.pth", "google/umt5-xxl/*", "Wan2.2_VAE.pth",
                                     "config.json", "diffusion_pytorch_model.safetensors")
    assert "/mnt/petrelfs" in mod.__doc__  # the hard-coded InternVL path (sample_5b.py:1288) is recorded


# --------------------------------------------------------------------------- the model's own vocabulary (gated)

COMMIT = "111c3fab7fb020d1e261a68be6ec78a3fecc8d5b"
YUME = gated_checkout("YUME_CHECKOUT", COMMIT)


@pytest.mark.skipif(YUME is None, reason="set YUME_CHECKOUT to a checkout of stdstu12/YUME at " + COMMIT)
def test_every_caption_line_is_built_from_the_checkouts_own_vocabulary_and_layout(tmp_path):
    """Each line of the plan's caption.txt is "First-person perspective. " + a translation phrase + " " + a rotation
    phrase + " " + the speed sentence, the phrases taken verbatim from the webapp's own vocab1 / vocab2 (WA:648-670,
    lifted from webapp_single_gpu.py: the module imports flask and the model) for the commanded keys, and the speed
    sentence as the shipped caption_re.txt writes it for a move (its line 1) or a pan (its line 7). Read as
    sample_5b.py reads the file (S5:812-820: one chunk per line), the count is the plan's chunks."""
    import re

    vocab = lift_functions(YUME / "webapp_single_gpu.py", ("vocab1", "vocab2"), {})
    shipped = (YUME / "caption_re.txt").read_text(encoding="utf-8").splitlines()
    speed = re.compile(r"Actual distance moved:\d+ at 100 meters per second\. Angular change rate \(turn speed\):\d+\. "
                       r"View rotation speed:\d+\.")
    move_speed, pan_speed = (speed.search(shipped[i]).group(0) for i in (0, 6))
    assert move_speed.startswith("Actual distance moved:4") and pan_speed.startswith("Actual distance moved:0")

    img = tmp_path / "img 000.jpg"  # IMAGE_DIR: the runner copies the case image into a folder of its own
    img.write_bytes(b"jpeg")
    walk = "W2 R2 A+L2 S+^2 v2 D2 L2"
    plan, native, argv = gated_plan("yume", walk, tmp_path, image=str(img))
    with open(argv[argv.index("--caption_path") + 1], encoding="utf-8") as file:  # S5:812-816
        lines = [line.rstrip("\n") for line in file]
    move = {"W": "W", "S": "S", "A": "A", "D": "D", None: "None"}
    look = {"R": "→", "L": "←", "^": "↑", "v": "↓", None: "·"}
    wanted = []
    for seg in Trajectory.parse(walk).segments:
        text = seg.to_text()
        m = next((k for k in "WSAD" if k in text), None)
        r = next((k for k in "RL^v" if k in text), None)
        tail = move_speed if m and not r else pan_speed if r and not m else None
        phrase = f"First-person perspective. {vocab['vocab1'][move[m]]} {vocab['vocab2'][look[r]]} "
        wanted.append((phrase, tail))
    used = set()
    for line in lines:
        phrase, _, rest = line.partition("Actual distance moved:")
        match = [w for w in wanted if w[0] == phrase]
        assert match, line  # every phrase is the webapp's own, in caption_re.txt's layout
        used.add(phrase)
        if match[0][1] is not None:
            assert "Actual distance moved:" + rest == match[0][1], line  # caption_re.txt's own numbers
    assert used == {w[0] for w in wanted}
    assert len(lines) == plan.extra["lines"] and plan.n_frames == 29 * len(lines)  # 29 frames a chunk (S5:1052)
