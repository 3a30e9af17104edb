"""The repository runner: a user-supplied checkout is validated once (entry point, patch marker, weights, GPU) with
errors that say how to fix each, and every case runs the official command line on the plan's native files."""

import json
import textwrap

import numpy as np
import pytest

from worldgate.adapters import MODELS, AdapterError, get_adapter
from worldgate.adapters.repo import RepoAdapter
from worldgate.generate.records import list_records, load_record
from worldgate.generate.runner import run_generate
from worldgate.generate.video import read_frames

# A stand-in for Matrix-Game-2/inference.py after the worldgate patch: it reads --actions like the patched script and
# writes one frame per keyboard row, brightness = 40 + 200 * W-key, so the test sees the native file was consumed.
FAKE_INFERENCE = textwrap.dedent('''
    import argparse, os
    import numpy as np, imageio.v2 as imageio
    p = argparse.ArgumentParser()
    p.add_argument("--config_path"); p.add_argument("--checkpoint_path"); p.add_argument("--img_path")
    p.add_argument("--num_output_frames", type=int)
    p.add_argument("--seed", type=int, required=True)  # inference.py:27 (default 0)
    p.add_argument("--actions")  # added by the worldgate patch
    p.add_argument("--pretrained_model_path"); p.add_argument("--output_folder")
    a = p.parse_args()
    open(os.path.join(os.environ["WORLDGATE_OUT"], "seed.txt"), "w").write(str(a.seed))
    assert os.path.isfile(a.img_path), a.img_path
    assert os.path.isfile(a.checkpoint_path), a.checkpoint_path
    z = np.load(a.actions)
    kb = z["keyboard_cond"]
    assert len(kb) == 4 * a.num_output_frames - 3
    frames = [np.full((64, 64, 3), 40 + 200 * int(row[0]), np.uint8) for row in kb]
    imageio.mimwrite(os.path.join(os.environ["WORLDGATE_OUT"], "out.mp4"), frames, fps=12, macro_block_size=1)
''')


@pytest.fixture
def checkout(tmp_path):
    repo = tmp_path / "Matrix-Game-2"
    repo.mkdir()
    (repo / "inference.py").write_text(FAKE_INFERENCE)
    for rel, marker in MODELS.get("matrix-game-2").repo_spec.patches.items():  # as the shipped patch leaves them
        f = repo / rel
        f.write_text((f.read_text() if f.exists() else "") + f"# {marker}\n")
    ckpt = tmp_path / "weights"
    (ckpt / "base_distilled_model").mkdir(parents=True)
    (ckpt / "base_distilled_model" / "base_distill.safetensors").write_bytes(b"x")
    img = tmp_path / "000.jpg"
    import imageio.v2 as imageio

    imageio.imwrite(img, np.zeros((32, 32, 3), np.uint8))
    return repo, ckpt, img


def test_missing_pieces_name_the_fix(checkout, tmp_path):
    repo, ckpt, _ = checkout
    with pytest.raises(AdapterError, match=r"git clone https://github.com/SkyworkAI/Matrix-Game.*hf "
                                           r"download Skywork/Matrix-Game-2.0"):
        get_adapter("matrix-game-2").load()
    with pytest.raises(AdapterError, match="does not exist"):
        get_adapter("matrix-game-2", repo=str(tmp_path / "nope"), ckpt=str(ckpt)).load()
    with pytest.raises(AdapterError, match="weights not found.*hf download Skywork/Matrix-Game-2.0"):
        get_adapter("matrix-game-2", repo=str(repo), ckpt=str(tmp_path / "none")).load()
    (repo / "inference.py").write_text("print('unpatched')\n")
    with pytest.raises(AdapterError, match="patch is not applied"):
        get_adapter("matrix-game-2", repo=str(repo), ckpt=str(ckpt)).load()


def test_needs_a_gpu_unless_allowed(checkout):
    import torch

    repo, ckpt, _ = checkout
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    with pytest.raises(AdapterError, match="needs a CUDA GPU"):
        get_adapter("matrix-game-2", repo=str(repo), ckpt=str(ckpt)).load()


def test_generate_runs_the_checkout_per_case(checkout, tmp_path):
    repo, ckpt, img = checkout
    m = tmp_path / "cases.jsonl"
    m.write_text('{"id": "ws", "trajectory": "W1 S1", "image": "%s", "prompt": "p"}\n'
                 '{"id": "w", "trajectory": "W2", "image": "%s", "prompt": "p"}\n' % (img, img))
    out = tmp_path / "run"
    res = run_generate("matrix-game-2", str(m), out, progress=False, seed=1234,
                       model_args={"repo": str(repo), "ckpt": str(ckpt), "allow_cpu": True})
    assert res.exit_code == 0, res.failed
    recs = {p.name: p for p in list_records(out)}
    assert set(recs) == {"ws", "w"}
    r = load_record(recs["ws"])
    ach = r["meta"]["achieved"]
    # 24 commanded frames at 12 fps + the image frame -> L = 9 latents, F = 33 frames
    assert ach["frames"] == 33 and ach["fps"] == 12
    # the run's seed reached the model's own command line, and meta.json records the same one
    assert r["meta"]["seed"] == 1234 and "--seed 1234" in (recs["ws"] / "native" / "command.txt").read_text()
    lum = np.array([f.mean() for f in read_frames(recs["ws"] / "video.mp4")])
    assert np.all(lum[:12] > 200) and np.all(lum[12:] < 80)  # row j = the command at j/12: W rows 0..11, then S


@pytest.mark.parametrize("name", [n for n in MODELS if issubclass(MODELS.get(n), RepoAdapter)])
def test_dry_run_carries_the_seed_or_says_why_not(name, tmp_path):
    """The seed a user asks for reaches the model's own command (or config), or meta.json says seed null and why."""
    out = tmp_path / name
    suite = "multiworldbench-engine" if MODELS.get(name).info.players == 2 else "worldmark-engine"
    res = run_generate(name, suite, out, limit=1, seed=1234, dry_run=True, progress=False)
    assert res.exit_code == 0, res.failed
    (rec,) = [p for p in out.iterdir() if p.is_dir() and not p.name.startswith(".")]
    meta = json.loads((rec / "meta.json").read_text())
    native = rec / "native"
    info = MODELS.get(name).info
    if info.no_seed:
        assert meta["seed"] is None and info.no_seed in meta["seed_note"]
        assert "SEED" not in (native / "command.txt").read_text()
    else:
        assert meta["seed"] == 1234
        seeded = [f.name for f in native.iterdir() if f.suffix in (".txt", ".yaml") and "1234" in f.read_text()]
        assert seeded, f"{name}: no native file carries the seed 1234"
        assert not any("SEED" in f.read_text().replace("SEED=", "") for f in native.iterdir()
                       if f.suffix in (".txt", ".yaml")), "a SEED placeholder was left in a native file"


def test_output_file_tokens_land_in_the_runs_output_folder(tmp_path):
    """`OUT/name.mp4` (Matrix-Game 3.5 distilled's --output) is a file in the case's output folder, never a path that
    climbs out of it."""
    from worldgate.adapters.repo import command_argv
    native = tmp_path / "native"
    argv = command_argv("python run.py --output OUT/result.mp4 --other OUT/../x.mp4", {}, native,
                        {"python": "py", "ckpt": "/w"}, None)
    assert argv[3] == str(tmp_path / "out" / "result.mp4") and argv[5] == "OUT/../x.mp4"
