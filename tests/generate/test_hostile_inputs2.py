"""Hostile inputs, round two (issue 29, items 3 and 5): import verifies a sidecar and never re-signs it, export swaps a
sidecar in atomically, repository adapters check their model-arg keys and survive any character in a path, overrides
are decimal, and Ctrl-C during start-up exits 130 without a traceback."""

import json
import os
import shlex
import signal
import subprocess
import sys

import numpy as np
import pytest

import worldgate.generate.delivery_files as delivery_files
from worldgate.adapters.repo import command_argv, command_words
from worldgate.evaluate.runner import evaluate_run
from worldgate.generate.interop import import_worldmark
from worldgate.generate.overrides import parse_overrides, split_overrides
from worldgate.generate.worldmark_export import export_worldmark
from worldgate.trajectories.registry import UnknownNameError

QUICK = ["model.width=64", "model.height=64", "model.threads=1", "trajectory.seconds=1"]


@pytest.fixture(scope="module")
def delivery(tmp_path_factory):
    """(run, delivery, case id): one scored Engine case exported as a WorldMark delivery."""
    from worldgate.generate.runner import run_generate

    root = tmp_path_factory.mktemp("hostile-inputs2")
    run = root / "engine"
    assert run_generate("engine", "worldmark-engine", run, limit=1, overrides=QUICK, progress=False).exit_code == 0
    evaluate_run(run, progress=False)
    dl = root / "dl"
    export_worldmark(run, dl)
    (case,) = [p.name for p in (dl / "worldgate").iterdir()]
    return run, dl, case


def _copy_dl(dl, tmp_path):
    import shutil

    dst = tmp_path / "dl"
    shutil.copytree(dl, dst)
    return dst


def test_an_intact_sidecar_is_kept_byte_for_byte(delivery, tmp_path):
    run, dl, case = delivery
    r = import_worldmark(dl, tmp_path / "back")
    assert r.imported == [case] and not r.failed
    for name in ("trajectory.json", "poses.npy"):
        assert (tmp_path / "back" / case / name).read_bytes() == (run / case / name).read_bytes()
    a = json.loads((run / case / "meta.json").read_text())["files"]
    b = json.loads((tmp_path / "back" / case / "meta.json").read_text())["files"]
    assert {k: v["sha256"] for k, v in a.items()} == {k: v["sha256"] for k, v in b.items()}


@pytest.mark.parametrize("edit", ["trajectory.json", "poses.npy", "added", "removed", "no-hashes"])
def test_an_edited_sidecar_is_refused_naming_the_file(delivery, tmp_path, edit):
    _, dl0, case = delivery
    dl = _copy_dl(dl0, tmp_path)
    side = dl / "worldgate" / case
    if edit == "trajectory.json":
        t = json.loads((side / edit).read_text())
        t["segments"][0]["seconds"] = 0.25  # a shorter first key: the re-signed record would score other keys
        (side / edit).write_text(json.dumps(t))
        want = "trajectory.json differs from the exported record"
    elif edit == "poses.npy":
        p = np.load(side / edit)
        p[:, 0, 3] += 1.0
        np.save(side / edit, p)
        want = "poses.npy differs from the exported record"
    elif edit == "added":
        (side / "targets.npz").write_bytes(b"planted")
        want = "holds targets.npz, which its meta.json does not record"
    elif edit == "removed":
        (side / "poses.npy").unlink()
        want = "lacks poses.npy"
    else:
        m = json.loads((side / "meta.json").read_text())
        del m["files"]
        (side / "meta.json").write_text(json.dumps(m))
        want = "records no file hashes"
    r = import_worldmark(dl, tmp_path / "back")
    assert not r.imported and want in r.failed[case], r.failed
    assert not (tmp_path / "back" / case).exists()


def test_an_interrupted_re_export_keeps_the_previous_sidecar(delivery, tmp_path, monkeypatch):
    run, dl0, case = delivery
    dl = _copy_dl(dl0, tmp_path)
    before = sorted(p.relative_to(dl).as_posix() for p in (dl / "worldgate").rglob("*"))
    real = delivery_files.copy_regular
    calls = []

    def dies(src, dst, *a, **k):
        calls.append(dst)
        if len(calls) == 2:
            raise KeyboardInterrupt  # Ctrl-C half-way through the sidecar's files
        return real(src, dst, *a, **k)

    monkeypatch.setattr(delivery_files, "copy_regular", dies)
    with pytest.raises(KeyboardInterrupt):
        export_worldmark(run, dl)
    monkeypatch.undo()
    assert sorted(p.relative_to(dl).as_posix() for p in (dl / "worldgate").rglob("*")) == before
    assert import_worldmark(dl, tmp_path / "back").imported == [case]


def test_overrides_are_decimal():
    assert parse_overrides(["model.width=0100", "a=08", "b=-007"]) == {"model": {"width": 100}, "a": 8, "b": -7}
    for v in ("0x10", "1:30", "1_000", "0b11"):
        with pytest.raises(ValueError, match="is not a decimal number"):
            parse_overrides([f"model.width={v}"])
    assert parse_overrides(["a='0x10'"]) == {"a": "0x10"}


def test_repository_adapters_check_their_model_arg_keys():
    margs = split_overrides("matrix-game-3", "worldmark-engine", ["model.pitch_sign=-1", "model_path=/m"],
                            {"repo": "/r", "gpus": 1})[0]
    assert margs == {"repo": "/r", "gpus": 1, "model_path": "/m", "pitch_sign": -1}
    with pytest.raises(UnknownNameError, match="'rpo'. Did you mean 'repo'"):
        split_overrides("matrix-game-3", "worldmark-engine", [], {"rpo": "/r"})
    with pytest.raises(UnknownNameError, match="Did you mean 'model.ckpt'"):
        split_overrides("yume", "worldmark-engine", ["model.ckt=/w"])
    with pytest.raises(UnknownNameError, match="'pitch_sign'"):  # another adapter's key
        split_overrides("matrix-game-2", "worldmark-engine", [], {"pitch_sign": 1})


def test_a_path_with_any_character_stays_one_argument(tmp_path):
    image = tmp_path / "room #2 'a' \"b\" $(x).png"
    image.write_bytes(b"png")
    cmd = f"python run.py --image {shlex.quote(str(image))} --seed SEED  # the README's line"
    assert command_words(cmd) == ["python", "run.py", "--image", str(image), "--seed", "SEED"]
    argv = command_argv(cmd, {}, tmp_path / "native", {"python": sys.executable}, str(image), seed=7)
    assert argv == [sys.executable, "run.py", "--image", str(image.resolve()), "--seed", "7"]
    assert command_words("a b#c 'd # e' # gone") == ["a", "b#c", "d # e"]


def test_ctrl_c_during_start_up_exits_130_without_a_traceback():
    """SIGINT arrives while worldgate.cli imports its modules (an import hook sends it)."""
    code = (
        "import importlib.abc, os, signal, sys\n"
        "class Hook(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path, target=None):\n"
        "        if name == 'worldgate.evaluate.runner':\n"
        "            os.kill(os.getpid(), signal.SIGINT)\n"
        "        return None\n"
        "sys.meta_path.insert(0, Hook())\n"
        "from worldgate.cli import main\n"
        "sys.exit(main(['list', 'models']))\n")
    # the child starts as a terminal's command does, SIGINT at its default: a suite started in the background (`&` in a
    # script) runs with SIGINT ignored, children inherit that, and Python then never installs its handler
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert p.returncode == 130 and "Traceback" not in p.stderr and p.stderr.strip() == "interrupted", p.stderr[-800:]


# ------------------------------------------------------------------------------------------------ build-suite
def _png_header(path, w, h):
    """A PNG that declares w x h pixels and holds none: what a decompression bomb's header looks like."""
    import struct
    import zlib

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
                     + chunk(b"IDAT", zlib.compress(b"\0" * 64)) + chunk(b"IEND", b""))


def _images(tmp_path, n):
    from PIL import Image

    rng = np.random.default_rng(0)
    paths = []
    for i in range(n):
        paths.append(tmp_path / f"{i:03d}.png")
        Image.fromarray(rng.integers(0, 255, (48, 64, 3), dtype=np.uint8)).save(paths[-1])
    (tmp_path / "caps.txt").write_text("".join(f"scene {i}\n" for i in range(n)))
    (tmp_path / "act.txt").write_text("1, 2, 3, 4, 5\n" * n)
    (tmp_path / "K.txt").write_text("50 50 31.5 23.5\n" * n)
    return paths, dict(captions=tmp_path / "caps.txt", actions=tmp_path / "act.txt", intrinsics=tmp_path / "K.txt",
                       filter=False, dedup=False)


@pytest.mark.parametrize("side", [12_000, 20_000])  # over build-suite's limit; over PIL's own bomb limit
def test_build_suite_refuses_a_decompression_bomb_from_its_header(tmp_path, side):
    from worldgate.build_suite import BuildError, build_suite

    paths, given = _images(tmp_path, 2)
    _png_header(paths[1], side, side)
    with pytest.raises(BuildError, match=rf"{paths[1].name}: .*(over build-suite's|exceeds limit)"):
        build_suite(paths, tmp_path / "S", **given)
    assert not (tmp_path / "S" / "first_view").exists()  # refused before anything was decoded or written


def test_build_suite_holds_one_decoded_image_at_a_time(tmp_path, monkeypatch):
    import gc
    import weakref

    import worldgate.build_suite.build as B

    paths, given = _images(tmp_path, 5)
    alive, peak, real = set(), [0], B._open

    def tracked(p):
        gc.collect()
        img = real(p)
        alive.add(id(img))
        weakref.finalize(img, alive.discard, id(img))
        peak[0] = max(peak[0], len(alive))
        return img

    monkeypatch.setattr(B, "_open", tracked)
    res = B.build_suite(paths, tmp_path / "S", **given)
    assert res.exit_code == 0 and len(res.kept) == 5 and 1 <= peak[0] <= 2, peak


def test_build_suite_never_writes_or_deletes_through_a_planted_link(tmp_path):
    from worldgate.build_suite import build_suite
    from worldgate.generate.outputs import OutputError

    paths, given = _images(tmp_path, 2)
    out = tmp_path / "S"
    assert build_suite(paths, out, **given).exit_code == 0
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "000.jpg").write_text("keep")
    import shutil

    shutil.rmtree(out / "first_view" / "real")
    (out / "first_view" / "real").symlink_to(outside, target_is_directory=True)
    with pytest.raises(OutputError, match="real is a symbolic link"):
        build_suite(paths, out, **given)
    assert sorted(os.listdir(outside)) == ["000.jpg"] and (outside / "000.jpg").read_text() == "keep"


@pytest.mark.parametrize("field,value", [("width", -64), ("height", -1), ("frames", -5), ("fps", 0)])
def test_meta_json_with_a_negative_requested_size_is_refused(delivery, tmp_path, field, value):
    import shutil

    from worldgate.evaluate.features import FeatureError, open_record

    run, _, case = delivery
    rec = tmp_path / case
    shutil.copytree(run / case, rec)
    open_record(rec)  # as written: readable
    m = json.loads((rec / "meta.json").read_text())
    m["requested"][field] = value
    (rec / "meta.json").write_text(json.dumps(m))
    with pytest.raises(FeatureError, match="requested values are invalid"):
        open_record(rec)


# ------------------------------------------------------------------------------------------------ videos
def test_a_display_rotation_is_measured_as_decoded_and_named_at_import(tmp_path):
    import imageio_ffmpeg

    from worldgate.generate.video import probe_video, read_frames

    ff = imageio_ffmpeg.get_ffmpeg_exe()
    up = tmp_path / "up.mp4"
    subprocess.run([ff, "-v", "error", "-f", "lavfi", "-i", "testsrc=size=64x48:rate=10", "-t", "3", "-pix_fmt",
                    "yuv420p", "-c:v", "libx264", str(up)], check=True)
    dl = tmp_path / "dl" / "real" / "first" / "ROT"
    dl.mkdir(parents=True)
    rot = dl / "000_001.mp4"
    r = subprocess.run([ff, "-v", "error", "-display_rotation", "90", "-i", str(up), "-c", "copy", str(rot)])
    if r.returncode:
        pytest.skip("this ffmpeg cannot write a display matrix")
    info = probe_video(rot)
    frames = list(read_frames(rot))
    assert (info.width, info.height, info.rotation) == (48, 64, 90.0)
    assert frames[0].shape == (info.height, info.width, 3) and len(frames) == info.frames == 30
    assert probe_video(up).rotation == 0.0
    res = import_worldmark(tmp_path / "dl", tmp_path / "back")
    assert res.imported, res.failed
    meta = json.loads((tmp_path / "back" / res.imported[0] / "meta.json").read_text())
    assert (meta["achieved"]["width"], meta["achieved"]["height"]) == (48, 64)
    assert any("rotates it by 90 degrees" in c for c in meta["caveats"]), meta["caveats"]


@pytest.mark.parametrize("flags, turn, mirrored, said", [
    (["-display_hflip"], 0, True, "mirrors it left to right"),
    (["-display_vflip"], 180, True, "mirrors it top to bottom"),
    (["-display_rotation", "90", "-display_vflip"], 270, True, "rotates it by 270 degrees and mirrors it"),
    (["-display_rotation", "180"], 180, False, "rotates it by 180 degrees"),
])
def test_a_display_flip_is_measured_from_the_decoded_frames_and_named(tmp_path, flags, turn, mirrored, said):
    """ffmpeg applies a display matrix's flips while decoding but prints only an angle (a left-right mirror reads
    "rotation of -180 degrees"): the transform is measured from the first frame, coded against displayed."""
    import imageio_ffmpeg

    from worldgate.generate.video import probe_video, read_frames

    ff = imageio_ffmpeg.get_ffmpeg_exe()
    up = tmp_path / "up.mp4"
    subprocess.run([ff, "-v", "error", "-f", "lavfi", "-i", "testsrc=size=64x48:rate=10", "-t", "1", "-pix_fmt",
                    "yuv420p", "-c:v", "libx264", str(up)], check=True)
    dl = tmp_path / "dl" / "real" / "first" / "FLIP"
    dl.mkdir(parents=True)
    out = dl / "000_001.mp4"
    if subprocess.run([ff, "-v", "error", *flags, "-i", str(up), "-c", "copy", str(out)]).returncode:
        pytest.skip("this ffmpeg cannot write a display matrix")
    info = probe_video(out)
    assert (info.rotation, info.mirrored, info.display) == (turn, mirrored, said)
    coded, shown = next(read_frames(up)).astype(int), next(read_frames(out)).astype(int)
    expect = np.rot90(coded, turn // 90)
    expect = expect[:, ::-1] if mirrored else expect
    assert shown.shape == expect.shape and np.abs(shown - expect).mean() < 2  # the frames scored are as displayed
    res = import_worldmark(tmp_path / "dl", tmp_path / "back")
    assert res.imported, res.failed
    meta = json.loads((tmp_path / "back" / res.imported[0] / "meta.json").read_text())
    assert any(said in c for c in meta["caveats"]), meta["caveats"]
