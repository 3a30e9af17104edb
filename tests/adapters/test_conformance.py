"""Rollout conformance: every registered model runs one real rollout through ``generate`` and leaves a whole record.

The battery is parametrised over ``MODELS.names()`` itself, so a new model cannot skip it: each name is dispatched by
kind, and a name of no known kind fails until this module learns how to run it.

- **engine**: the Engine and its variants (``worldgate.adapters.engine.*``) render a real, tiny (64x64) rollout: one
  Engine case (two-player ones the first MultiWorldBench case), checked for a complete record, achieved frames / fps /
  size equal to the requested ones, one commanded pose per frame and view, the seed in meta.json, and byte-identical
  videos for the same seed.
- **repo**: adapters driven from their official checkout (:class:`~worldgate.adapters.repo.RepoAdapter`) run against
  a fake checkout whose entry point records the argument list, working folder and environment it was started with
  (and what the paths it was given held at that moment) and writes a small mp4. The recorded call must hold every
  native file of the plan as an absolute path (directly, through a folder, inline, or named by another native file
  it was given), the case image, the rollout seed (or meta.json says ``seed: null`` and why), and no placeholder.
- **diffusers**: sana-wm runs one short rollout on a tiny random pipeline (built as in ``test_adapter_sana_wm.py``),
  twice with the same seed: the same video bytes.

Around the repository runner, three contracts the battery's fake checkout can check cheaply: an image path with a
space stays one argument; an image-less (Engine) case never reaches an image-conditioned entry point with ``IMAGE``
in place of a path; and every context policy a model lists is one its rollout takes. Where a known defect breaks one,
the test is an expected failure that names the defect, and only while that defect's cause is present.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import stat
import sys
from pathlib import Path

import numpy as np
import pytest

from worldgate.adapters import AdapterError, MODELS, get_adapter
from worldgate.adapters.base import _SEED_TOKEN, file_bytes
from worldgate.adapters.context import POLICIES
from worldgate.adapters.repo import _PLACEHOLDER, RepoAdapter
from worldgate.generate.records import is_complete, load_record, views_of
from worldgate.generate.runner import run_generate
from worldgate.generate.video import probe_video, sha256_file

ENGINE_SIZE = ["model.width=64", "model.height=64"]
ENGINE_SECONDS = "trajectory.seconds=2"  # 32 frames at 16 fps: two 16-frame chunks
ENGINE_SEED = 7
REPO_SEED = 1234
#: worldgate's own models (a plugin installed beside is proven by its own tests, through worldgate.testing)
BUILTIN_MODELS = [n for n in MODELS.names() if MODELS.origin(n) == "worldgate"]


def kind_of(name: str) -> str:
    cls = MODELS.get(name)
    if cls.__module__.startswith("worldgate.adapters.engine."):
        return "engine"
    if issubclass(cls, RepoAdapter):
        return "repo-2p" if cls.info.players == 2 else "repo"
    if cls.__module__ == "worldgate.adapters.sana_wm":
        return "diffusers"
    return "unknown"


@pytest.mark.parametrize("name", BUILTIN_MODELS)
def test_rollout_conformance(name, tmp_path, monkeypatch, request):
    kind = kind_of(name)
    if kind == "engine":
        check_engine(name, tmp_path)
    elif kind == "repo":
        check_repo(name, tmp_path, monkeypatch, request.getfixturevalue("fake_video"))
    elif kind == "repo-2p":  # two-player repository models (solaris-mp/-sp) run a MultiWorldBench case
        from test_adapter_solaris import check_two_player_repo

        check_two_player_repo(name, tmp_path, monkeypatch)
    elif kind == "diffusers":
        check_sana_wm(name, tmp_path, request.getfixturevalue("tiny_sana_weights"))
    else:
        pytest.fail(f"{name} ({MODELS.get(name).__module__}) is of no rollout-conformance kind: teach "
                    f"tests/adapters/test_conformance.py how to run it (a real rollout, or a fake checkout)")


def test_every_kind_is_exercised():
    kinds = {kind_of(n) for n in BUILTIN_MODELS}
    assert {"engine", "repo", "diffusers"} <= kinds and "unknown" not in kinds
    assert any(MODELS.get(n).info.players == 2 for n in BUILTIN_MODELS if kind_of(n) == "engine")


# ----------------------------------------------------------------------------------------------------- records
def the_record(out: Path, res) -> Path:
    assert res.exit_code == 0, res.failed
    assert len(res.done) == 1, (res.done, res.skipped)
    rec = out / res.done[0]
    assert is_complete(rec, "rollout"), f"{rec} is not a complete rollout record"
    return rec


def check_complete_record(rec: Path, info, seed: int | None, run_seed: int, frames_exact: bool = True) -> dict:
    """A whole record: every view's video and poses, achieved vs requested, the seed; returns load_record's dict."""
    r = load_record(rec)
    meta = r["meta"]
    views = views_of(info.players)
    assert r["views"] == views and meta["views"] == views
    assert meta["kind"] == "rollout" and meta["complete"] is True
    assert meta["adapter"]["name"] == info.name and meta["adapter"]["version"] == info.version
    req = meta["requested"]
    per_view = {"": meta["achieved"]} if list(views) == [""] else meta["achieved"]
    assert set(per_view) == set(views)
    poses = {"": r["poses"]} if list(views) == [""] else r["poses"]
    for v, files in views.items():
        a = per_view[v]
        probed = probe_video(rec / files["video"])  # meta.json says what the file holds: measure it again
        assert (probed.width, probed.height, probed.frames) == (a["width"], a["height"], a["frames"])
        assert probed.fps == pytest.approx(a["fps"])
        if frames_exact:
            assert (a["width"], a["height"], a["frames"]) == (req["width"], req["height"], req["frames"]), v
            assert a["fps"] == pytest.approx(req["fps"]), v
        p = poses[v]
        assert p.shape == (a["frames"], 4, 4) and p.dtype == np.float64 and np.isfinite(p).all(), v
        np.testing.assert_allclose(p[:, 3], np.broadcast_to([0, 0, 0, 1], (len(p), 4)), atol=1e-9)
        assert (rec / files["video"]).stat().st_size == meta["files"][files["video"]]["bytes"]
    if frames_exact:
        assert not [c for c in meta["caveats"] if "achieved" in c], meta["caveats"]
    assert r["trajectory"]["n_frames"] == req["frames"]
    assert (rec / "native" / "plan.json").is_file()
    assert json.loads((rec / "native" / "plan.json").read_text())["fingerprint"] == meta["plan_fingerprint"]
    assert meta["seed"] == seed and meta["config"]["seed"] == run_seed
    return r


# ------------------------------------------------------------------------------------------------------ engine
def engine_run(name: str, out: Path):
    two = MODELS.get(name).info.players == 2
    # two-player schedules are timed to their interactions and cannot be rescaled (TwoPlayerEngine.plan)
    suite, ov = ("multiworldbench-engine", ENGINE_SIZE) if two else ("worldmark-engine", ENGINE_SIZE + [ENGINE_SECONDS])
    return run_generate(name, suite, out, limit=1, overrides=ov, seed=ENGINE_SEED, progress=False)


def check_engine(name: str, tmp_path: Path):
    info = MODELS.get(name).info
    rec = the_record(tmp_path / "a", engine_run(name, tmp_path / "a"))
    r = check_complete_record(rec, info, ENGINE_SEED, ENGINE_SEED)
    assert r["meta"]["requested"]["width"] == 64 and r["meta"]["requested"]["height"] == 64  # the overrides took
    if info.players == 2:
        assert set(r["actions"]) >= {"segment_frames", "interactions"}
    else:
        assert r["meta"]["requested"]["frames"] == 32  # trajectory.seconds=2 at 16 fps
    again = the_record(tmp_path / "b", engine_run(name, tmp_path / "b"))
    for v in r["views"].values():
        # digests, not bytes: a mismatch prints two lines, not the diff of two mp4 files
        assert sha256_file(rec / v["video"]) == sha256_file(again / v["video"]), f"{v['video']} differs"
        assert sha256_file(rec / v["poses"]) == sha256_file(again / v["poses"]), f"{v['poses']} differs"
    assert json.loads((again / "meta.json").read_text())["plan_fingerprint"] == r["meta"]["plan_fingerprint"]


# -------------------------------------------------------------------------------------------------------- repo
# The fake entry point. It records how it was started (argv, cwd, environment) and, for every absolute path it was
# given (and every absolute path named inside a text file it was given), what that path held at that moment: the
# work folder is gone once the rollout ends. Then it writes a small mp4 where the runner looks for it.
RECORDER = r'''
import hashlib, json, os, re, shutil, sys
# worldgate patch markers (the runner checks them in the checkout): @MARKERS@
PATHS = re.compile(r"/[^\s\"',\]\[]+")


def snap(p):
    if os.path.isdir(p):
        return {"dir": sorted(os.listdir(p))}
    data = open(p, "rb").read()
    row = {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    if len(data) < 1 << 20:
        try:
            row["text"] = data.decode()
        except UnicodeDecodeError:
            pass
    return row


def candidates(values):
    for v in values:
        for part in [v] + v.split("=", 1)[1:]:
            if os.path.isabs(part) and os.path.exists(part):
                yield part


argv = [os.environ.pop("FAKE_SCRIPT", sys.argv[0])] + sys.argv[1:]  # a checkout script that handed over: its name
base = json.load(open(os.environ["FAKE_BASE_ENV"]))
added = {k: v for k, v in os.environ.items() if base.get(k) != v}  # what the runner (or `env`) set for this run
seen = {}
todo = list(candidates(argv + list(added.values())))
while todo:
    p = todo.pop()
    if p in seen or len(seen) > 200:
        continue
    seen[p] = snap(p)
    inside = [os.path.join(p, q) for q in seen[p].get("dir", [])]  # a folder input (ACTION_DIR): its files
    todo += [q for q in PATHS.findall(seen[p].get("text", "")) + inside if os.path.exists(q) and q not in seen]
rec = {"argv": argv, "cwd": os.getcwd(), "env": added, "paths": seen}
with open(os.environ["FAKE_RECORD"], "a") as f:
    f.write(json.dumps(rec) + "\n")
dest = os.path.join(os.environ["WORLDGATE_OUT"], os.environ.get("FAKE_OUTPUT", "fake.mp4"))  # the model's file name
os.makedirs(os.path.dirname(dest), exist_ok=True)
shutil.copyfile(os.environ["FAKE_VIDEO"], dest)
'''

# A launcher on PATH (torchrun): drop the launcher's own options, run the script it was given with this Python.
LAUNCHER = r'''#!@PYTHON@
import os, sys
args = sys.argv[1:]
i = next(i for i, a in enumerate(args) if a.endswith(".py"))
os.environ["FAKE_LAUNCHER"] = " ".join([os.path.basename(sys.argv[0])] + args[:i])
os.execv(sys.executable, [sys.executable] + args[i:])
'''

IMAGE_SIZE = (160, 96)
IMAGE_K = [120.0, 120.0, 80.0, 48.0]  # principal point at the centre (Evoke refuses others, evoke.py:117-121)


@pytest.fixture(scope="module")
def fake_video(tmp_path_factory) -> Path:
    import imageio.v2 as imageio

    p = tmp_path_factory.mktemp("fake-video") / "template.mp4"
    frames = [np.full((64, 64, 3), 20 * i, np.uint8) for i in range(8)]
    imageio.mimwrite(p, frames, fps=16, macro_block_size=1)
    return p


def image_manifest(folder: Path, trajectory: str = "W1 R1") -> tuple[Path, Path]:
    """One image-conditioned case (the repository models are image-to-video): a jpg with its intrinsics."""
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    img = folder / "000.jpg"
    rng = np.random.default_rng(0)
    Image.fromarray(rng.integers(0, 255, (IMAGE_SIZE[1], IMAGE_SIZE[0], 3), dtype=np.uint8)).save(img)
    m = folder / "cases.jsonl"
    m.write_text(json.dumps({"id": "img-w-r", "trajectory": trajectory, "prompt": "A street. First-person view.",
                             "image": str(img), "intrinsics": IMAGE_K, "image_size": list(IMAGE_SIZE)}) + "\n")
    return m, img


def fake_checkout(name: str, root: Path, monkeypatch, fake_video: Path) -> tuple[dict, Path]:
    """A checkout of ``name`` whose entry point is the recorder; returns the model args and the record file."""
    cls = MODELS.get(name)
    spec = cls.repo_spec
    repo = root / "checkout"
    repo.mkdir(parents=True)
    markers = " ".join(sorted(set(spec.patches.values())))
    recorder = RECORDER.replace("@MARKERS@", markers)
    entry = repo / spec.entry
    entry.parent.mkdir(parents=True, exist_ok=True)
    if entry.suffix == ".py":
        entry.write_text(recorder)
    else:  # a launcher script of the checkout (Evoke's bash script): it hands its arguments to the recorder
        (root / "recorder.py").write_text(recorder)
        entry.write_text(f'#!/usr/bin/env bash\nFAKE_SCRIPT="$0" exec {shlex.quote(sys.executable)} '
                         f'{shlex.quote(str(root / "recorder.py"))} "$@"\n')
    for rel, marker in spec.patches.items():  # a patched file other than the entry point holds its marker
        f = repo / rel
        if not f.exists():
            f.parent.mkdir(parents=True, exist_ok=True)
            f.write_text(f"# {marker}\n")
    bin_dir = root / "bin"
    bin_dir.mkdir()
    for launcher in ("torchrun",):
        f = bin_dir / launcher
        f.write_text(LAUNCHER.replace("@PYTHON@", sys.executable))
        f.chmod(f.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    record = root / "calls.jsonl"
    monkeypatch.setenv("FAKE_RECORD", str(record))
    monkeypatch.setenv("FAKE_VIDEO", str(fake_video))
    monkeypatch.setenv("FAKE_BASE_ENV", str(root / "base_env.json"))
    (root / "base_env.json").write_text(json.dumps(dict(os.environ)))
    ckpt = root / "weights"
    ckpt.mkdir()
    args = {"repo": str(repo), "ckpt": str(ckpt), "allow_cpu": True}
    return args, record


def extra_paths(name: str, case_file: Path, root: Path) -> dict:
    """Every ``*_PATH``/``*_DIR`` placeholder of the command that comes from model args (hy-worldplay's
    MODEL_PATH ...): a fake folder each."""
    from worldgate.trajectories.suites import load_suite

    (case,) = load_suite(str(case_file))
    cmd = get_adapter(name).plan(case).files.get("command.txt", "")
    out = {}
    for tok in shlex.split(cmd.split(" #", 1)[0]):
        if _PLACEHOLDER.match(tok) and tok not in ("ACTION_DIR", "IMAGE_DIR"):
            d = root / "extra" / tok.lower()
            d.mkdir(parents=True)
            out[tok.lower()] = str(d)
    return out


def _given(call: dict) -> list[str]:
    """What the entry point was given: its arguments and the environment variables that the run added."""
    return list(call["argv"][1:]) + [f"{k}={v}" for k, v in call["env"].items()]


def repo_run(name: str, root: Path, monkeypatch, fake_video: Path, suite: str | None = None,
             case_dir: str = "case", **kw):
    """``generate`` one case of ``name`` against its fake checkout: (result, run folder, recorded calls, model args,
    case image). ``suite`` None: the image-conditioned manifest case."""
    manifest, img = image_manifest(root / case_dir)
    args, record = fake_checkout(name, root / "fake", monkeypatch, fake_video)
    args.update(extra_paths(name, manifest, root / "fake"))
    out = root / "run"
    res = run_generate(name, suite or str(manifest), out, limit=1, seed=REPO_SEED, model_args=args, progress=False,
                       **kw)
    calls = [json.loads(x) for x in record.read_text().splitlines()] if record.exists() else []
    return res, out, calls, args, (None if suite else img)


def leftover_placeholders(call: dict, native: Path) -> list[str]:
    """Placeholders that reached the entry point: in its arguments, the environment the run added, or the native
    files it was given."""
    texts = {p: row["text"] for p, row in call["paths"].items() if "text" in row}
    left = [g for g in _given(call) for v in [g.split("=", 1)[-1]]
            if v in ("SEED", "IMAGE", "IMAGE_DIR", "ACTION_DIR", "OUT", "python") or "CKPT" in v
            or _PLACEHOLDER.match(v) or v.startswith("$(")]
    left += [f"{p}: {m}" for p, t in texts.items() if p.startswith(str(native)) and not p.endswith("prompt.txt")
             for m in (["SEED"] if _SEED_TOKEN.search(t) else []) + re.findall(r'"(IMAGE|CKPT[^"]*)"', t)]
    return left


def check_repo(name: str, tmp_path: Path, monkeypatch, fake_video: Path, case_dir: str = "case"):
    cls = MODELS.get(name)
    info, spec = cls.info, cls.repo_spec
    res, out, calls, args, img = repo_run(name, tmp_path, monkeypatch, fake_video, case_dir=case_dir)
    rec = the_record(out, res)
    r = check_complete_record(rec, info, None if info.no_seed else REPO_SEED, REPO_SEED, frames_exact=False)
    meta = r["meta"]
    assert meta["achieved"]["frames"] == 8 and meta["achieved"]["width"] == 64  # the video the entry point wrote

    assert len(calls) == 1, f"the entry point ran {len(calls)} times for one case"
    (call,) = calls
    repo = Path(args["repo"]).resolve()
    assert Path(call["cwd"]).resolve() == repo, "the command runs in the checkout"
    # the program that ran is the checkout's entry point (python FILE, python -m MODULE, torchrun FILE, bash FILE)
    assert (repo / call["argv"][0]).resolve() == (repo / spec.entry).resolve(), call["argv"][0]

    given = _given(call)
    paths = call["paths"]
    native = Path(call["env"]["WORLDGATE_OUT"]).parent / "native"
    plan_json = json.loads((rec / "native" / "plan.json").read_text())
    command = (rec / "native" / "command.txt").read_text()

    # every native file reaches the entry point, as an absolute path that existed while it ran
    values = {v for g in given for v in (g, g.split("=", 1)[-1])}
    texts = {p: row["text"] for p, row in paths.items() if "text" in row}
    missing = []
    for f in plan_json["files"]:
        if f == "command.txt":
            continue
        p = str(native / f)
        inline = f"$(cat {f})" in command
        direct = p in values
        via_dir = str(Path(p).parent) in values and Path(p).name in paths.get(str(Path(p).parent), {}).get("dir", [])
        named = any(p in t for q, t in texts.items() if q != p)
        if inline:
            assert (rec / "native" / f).read_text() in call["argv"], f"{f} is not given inline"
            continue
        if not (direct or via_dir or named):
            missing.append(f)
            continue
        assert p in paths, f"{p} did not exist while the entry point ran"
        if not f.endswith((".json", ".jsonl")):  # (case rows are rewritten to absolute paths before the run)
            assert paths[p]["sha256"] == _sha(rec / "native" / f), f"{f}: the model read other bytes than the record"
    assert not missing, f"native files the entry point is never given: {missing} (argv {call['argv']})"

    # the case image, as an absolute path (or a folder holding only it)
    img = str(img.resolve())
    in_dir = [v for v in values if v in paths and paths[v].get("dir") == [Path(img).name]]
    assert img in values or in_dir or any(img in t for t in texts.values()), \
        f"the case image {img} is not given (argv {call['argv']})"

    left = leftover_placeholders(call, native)
    assert not left, f"placeholders reached the entry point: {left}"
    if "CKPT" in command:
        ckpt = str(Path(args["ckpt"]).resolve())
        assert any(v.startswith(ckpt) for v in values), "CKPT is not the weights folder"

    # the seed: given to the model (argument, environment or a seeded config it reads), or meta.json says why not
    if info.no_seed:
        assert meta["seed"] is None and info.no_seed in meta["seed_note"]
    else:
        seed = str(REPO_SEED)
        seed_files = [str(native / f) for f in plan_json["extra"].get("seed_files", [])]
        in_files = [p for p in seed_files if re.search(rf"\b{seed}\b", texts.get(p, ""))]
        assert seed in values or in_files, f"the seed {seed} does not reach the entry point ({call['argv']})"
        assert meta["seed"] == REPO_SEED


REPO_MODELS = [n for n in BUILTIN_MODELS if kind_of(n) == "repo"]


def xfail_when(cause: bool, reason: str, check, *args):
    """Run ``check``; a failure is an expected one only while its known ``cause`` is present (so a fix makes the
    test pass, and any other failure still fails)."""
    try:
        check(*args)
    except AssertionError:
        if cause:
            pytest.xfail(reason)
        raise


def _plan_of(name: str, suite_or_manifest: str):
    from worldgate.trajectories.suites import load_suite

    case = load_suite(suite_or_manifest)[0]
    return get_adapter(name).plan(case)


@pytest.mark.parametrize("name", REPO_MODELS)
def test_repo_image_path_with_a_space(name, tmp_path, monkeypatch, fake_video):
    """A case image in a folder whose name has a space still reaches the entry point as one argument."""
    manifest, img = image_manifest(tmp_path / "case dir")
    cmd = _plan_of(name, str(manifest)).files["command.txt"].split(" #", 1)[0]
    unquoted = str(img) in cmd and str(img) not in shlex.split(cmd)
    xfail_when(unquoted, f"{name}: command.txt embeds the case image path unquoted (f'... {{case.image}} ...'), so "
                         "command_argv's shlex.split cuts a path with a space into two arguments",
               check_repo, name, tmp_path, monkeypatch, fake_video, "case dir")


def _check_imageless(name, tmp_path, monkeypatch, fake_video):
    res, _, calls, _, _ = repo_run(name, tmp_path, monkeypatch, fake_video, suite="worldmark-engine")
    if res.failed:  # refused: then before the entry point runs, and saying the case has no image
        (msg,) = res.failed.values()
        assert not calls, "the entry point ran for a case that failed"
        assert re.search(r"(?i)no image|image-conditioned|without an image", msg), msg
    else:
        (call,) = calls
        left = leftover_placeholders(call, Path(call["env"]["WORLDGATE_OUT"]).parent / "native")
        assert not left, f"placeholders reached the entry point: {left}"


@pytest.mark.parametrize("name", REPO_MODELS)
def test_repo_imageless_engine_case(name, tmp_path, monkeypatch, fake_video):
    """An Engine case has no image: an image-conditioned repository model refuses it (like sana-wm: "is
    image-conditioned: case ... has no image"), and never starts its entry point with ``IMAGE`` for a path."""
    files = _plan_of(name, "worldmark-engine").files
    texts = [file_bytes(k, v).decode(errors="replace") for k, v in files.items() if not k.endswith((".npy", ".npz"))]
    placeholder = any(re.search(r"(?<![\w/])IMAGE(_DIR)?(?![\w/])", t) for t in texts)
    xfail_when(placeholder, f"{name}: the plan of an image-less case keeps the IMAGE/IMAGE_DIR placeholder and the "
                            "runner passes it on (a literal 'IMAGE' argument or JSON value, or for IMAGE_DIR an "
                            "error asking for --model-args image_dir=PATH) instead of refusing the case",
               _check_imageless, name, tmp_path, monkeypatch, fake_video)


def _known_policy(policy: str) -> None:
    assert policy in POLICIES


CONTEXT_CASES = [(n, p) for n in BUILTIN_MODELS if kind_of(n) in ("engine", "repo")
                 for p in MODELS.get(n).info.context_policies]


@pytest.mark.parametrize("name,policy", CONTEXT_CASES)
def test_listed_context_policies_run(name, policy, tmp_path, monkeypatch, request):
    """A policy an Engine model lists in ``info.context_policies`` passes generate's check and its rollout takes it; a
    repository model's list describes its own cache, and generate refuses --context for it before anything runs,
    unless worldgate's launcher puts the policy into the model's loop (LingBot-World v2) or the model's own settings
    express it exactly (DreamX-World, Matrix-Game 3.5: the dry run's native files show them).
    (sana-wm's policies need its stage-2 refiner: tests/adapters/test_adapter_sana_wm.py runs them.)"""
    xfail_when(policy not in POLICIES, f"{name} lists {policy!r} in info.context_policies, which is no context policy "
                                       f"(known: {', '.join(sorted(POLICIES))}): generate --context {policy} fails",
               _known_policy, policy)
    budget = None if policy == "full_kv" else 2
    if kind_of(name) == "engine":
        out = tmp_path / "run"
        res = run_generate(name, "worldmark-engine", out, limit=1, seed=ENGINE_SEED, progress=False, context=policy,
                           budget=budget, overrides=ENGINE_SIZE + ["trajectory.seconds=4"])
        rec = the_record(out, res)
        rows = [json.loads(x) for x in (rec / "context.jsonl").read_text().splitlines()]
        assert [r["chunk_start"] for r in rows] == [0, 16, 32, 48]
        for k, r in enumerate(rows):
            assert set(r["context"]) <= set(range(k)), r
            assert budget is None or len(r["context"]) <= budget, r
        assert json.loads((rec / "meta.json").read_text())["context"]["name"] == policy
        return
    if get_adapter(name).context_support(policy) is None:
        # a repository model whose launcher takes the policy (LingBot-World v2: adapters/lingbot_v2_launcher.py): the
        # dry run's native files name the policy and its budget, and the command runs the launcher with them (the
        # launcher itself is proven on the model's real code in tests/adapters/test_lingbot_v2_context.py)
        manifest, _ = image_manifest(tmp_path / "case")
        out = tmp_path / "dry"
        res = run_generate(name, str(manifest), out, dry_run=True, progress=False, context=policy, budget=budget)
        native = out / res.done[0] / "native"
        cmd = (native / "command.txt").read_text()
        ctx = json.loads((native / "context.json").read_text())
        assert ctx["name"] == policy and ctx["budget"] == budget, ctx
        if name == "dreamx-world":  # the model's own window, in a config derived from the checkout's at rollout time
            assert "--config_path dreamx_context.yaml" in cmd, cmd
            assert set(ctx["model_kwargs"]) == {"local_attn_size", "sink_size"}, ctx
            return
        if name == "matrix-game-3.5":  # the model's own context_chunks in the distilled.yaml it reads
            assert f"context_chunks: {ctx['model_chunks']}\n" in (native / "distilled.yaml").read_text()
            return
        assert f"--context-policy {policy} --context-budget {budget if budget else 'none'}" in cmd, cmd
        assert "_LAUNCHER_PATH" in cmd.split()[1]
        return
    # a repository model applies its own cache inside its official entry point: the policies it lists describe that
    # cache, and generate refuses to choose one from outside before anything runs
    with pytest.raises(AdapterError, match="no context policy can be chosen from outside"):
        repo_run(name, tmp_path, monkeypatch, request.getfixturevalue("fake_video"), context=policy, budget=budget)


def _sha(p: Path) -> str:
    import hashlib

    return hashlib.sha256(p.read_bytes()).hexdigest()


# --------------------------------------------------------------------------------------------------- diffusers
@pytest.fixture(scope="module")
def tiny_sana_weights(tmp_path_factory):
    from test_adapter_sana_wm import tiny_pipeline

    d = tmp_path_factory.mktemp("tiny-sana-wm")
    tiny_pipeline().save_pretrained(d)
    return d


def check_sana_wm(name: str, tmp_path: Path, weights: Path):
    from test_adapter_sana_wm import TINY

    info = MODELS.get(name).info
    # 8 frames after the conditioning frame at 16 fps (9 = 8 + 1): the shortest clip the pipeline makes
    manifest, _ = image_manifest(tmp_path / "case", trajectory="W0.25 R0.25")
    margs = dict(TINY, path=str(weights))
    runs = []
    for sub in ("a", "b"):
        res = run_generate(name, str(manifest), tmp_path / sub, seed=ENGINE_SEED, model_args=margs, progress=False)
        runs.append(the_record(tmp_path / sub, res))
    r = check_complete_record(runs[0], info, ENGINE_SEED, ENGINE_SEED)
    assert r["meta"]["requested"] == {"width": 64, "height": 64, "fps": 16.0, "frames": 9}
    assert sha256_file(runs[0] / "video.mp4") == sha256_file(runs[1] / "video.mp4")
