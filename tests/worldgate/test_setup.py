"""``worldgate setup`` (worldgate/setup.py) and ``doctor --model``: clone at the pinned commit, patch, env, weights,
record; idempotent and resumable; ``--model-args setup=DIR`` then needs nothing else."""

import dataclasses
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from worldgate import setup as wsetup
from worldgate.adapters import MODELS, AdapterError, get_adapter
from worldgate.adapters.patching import Edit, Patch
from worldgate.adapters.repo import RepoAdapter
from worldgate.cli import main

ENTRY = "import argparse\np = argparse.ArgumentParser()\np.add_argument('--img_path')\nargs = p.parse_args()\n"
PATCH = Patch(model="matrix-game-2", version="9", edits=(
    Edit("inference.py", "p.add_argument('--img_path')\n", "p.add_argument('--actions')\n"),
    Edit("worldgate_inputs.py", None, "def load(path):\n    return path\n")))


def git(*args, cwd):
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                   env=dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t",
                            GIT_COMMITTER_EMAIL="t@t"))


@pytest.fixture
def upstream(tmp_path):
    """A local repository standing in for the model's official one (model folder ``Matrix-Game-2/``)."""
    root = tmp_path / "upstream"
    (root / "Matrix-Game-2").mkdir(parents=True)
    (root / "Matrix-Game-2" / "inference.py").write_text(ENTRY)
    (root / "Matrix-Game-2" / "requirements.txt").write_text("# nothing to install here\n")
    git("init", "-q", cwd=root)
    git("add", "-A", cwd=root)
    git("commit", "-qm", "v1", cwd=root)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True).stdout.strip()
    (root / "Matrix-Game-2" / "inference.py").write_text(ENTRY + "# a later commit\n")
    git("commit", "-qam", "v2", cwd=root)  # the pinned commit is not the newest one
    return root, head


@pytest.fixture
def spec(upstream, monkeypatch):
    root, head = upstream
    cls = MODELS.get("matrix-game-2")
    s = dataclasses.replace(cls.repo_spec, commit=head, subdir="Matrix-Game-2", patch=PATCH,
                            weights_dir="Matrix-Game-2.0", weights_patterns=("*.safetensors",), hf_revision="")
    monkeypatch.setattr(cls, "repo_spec", s)
    return s


@pytest.fixture
def weights(monkeypatch):
    """huggingface_hub stands in: records the calls, writes one file, resolves the revision to a fixed commit."""
    calls = []

    def fake(hf_id, revision, patterns, dest):
        calls.append((hf_id, revision, patterns, str(dest)))
        (dest / "model.safetensors").write_bytes(b"w")
        return "ab" * 20

    monkeypatch.setattr(wsetup, "download_weights", fake)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    return calls


def test_setup_from_a_clone_is_idempotent_and_generate_needs_nothing_else(upstream, spec, weights, tmp_path):
    root, head = upstream
    d = tmp_path / "mg2"
    lines = []
    rec = wsetup.setup_model("matrix-game-2", d, source=str(root), no_env=True, echo=lines.append)
    assert [ln.split(":")[0] for ln in lines] == ["[setup] checkout", "[setup] patch", "[setup] env",
                                                  "[setup] weights", "[setup] record"]
    mdir = d / "src" / "Matrix-Game-2"
    assert rec["model_dir"] == str(mdir) and rec["commit"] == head and rec["commit_verified"] is True
    assert "a later commit" not in (mdir / "inference.py").read_text()  # the pinned commit, not the newest
    assert "--actions" in (mdir / "inference.py").read_text() and (mdir / "worldgate_inputs.py").is_file()
    assert rec["patch"] == {"version": "9", "marker": "worldgate-patch matrix-game-2 v9",
                            "files": ["inference.py", "worldgate_inputs.py"]}
    assert weights == [("Skywork/Matrix-Game-2.0", None, ["*.safetensors"], str(d / "weights" / "Matrix-Game-2.0"))]
    assert rec["weights"]["revision"] == "ab" * 20 and rec["weights"]["ckpt"] == str(d / "weights")
    on_disk = json.loads((d / "worldgate-model.json").read_text())
    assert {k: v for k, v in on_disk.items() if k != "written"} == rec

    # a second run does nothing and says so, one line a step
    before = {p: p.stat().st_mtime_ns for p in d.rglob("*") if p.is_file()}
    lines.clear()
    wsetup.setup_model("matrix-game-2", d, source=str(root), no_env=True, echo=lines.append)
    assert len(lines) == 5 and all(("already" in ln or "unchanged" in ln or "skipped" in ln) for ln in lines), lines
    assert {p: p.stat().st_mtime_ns for p in d.rglob("*") if p.is_file()} == before
    assert len(weights) == 1

    # generate with setup=DIR finds checkout, patch and weights; only the GPU is missing here
    a = get_adapter("matrix-game-2", setup=str(d))
    with pytest.raises(AdapterError, match="needs a CUDA GPU"):
        a.load()


def test_setup_killed_midway_is_finished_by_rerunning(upstream, spec, weights, tmp_path, monkeypatch):
    root, head = upstream
    d = tmp_path / "mg2"
    d.mkdir()
    (d / "src.partial").mkdir()  # a clone killed mid-way
    (d / "src.partial" / "junk").write_text("x")
    real = wsetup.step_weights

    def killed(*a, **kw):
        raise KeyboardInterrupt

    monkeypatch.setattr(wsetup, "step_weights", killed)
    with pytest.raises(KeyboardInterrupt):
        wsetup.setup_model("matrix-game-2", d, source=str(root), no_env=True, echo=lambda s: None)
    assert (d / "src" / "Matrix-Game-2" / "worldgate_inputs.py").is_file() and not (d / "src.partial").exists()
    assert not (d / "worldgate-model.json").exists()
    monkeypatch.setattr(wsetup, "step_weights", real)
    lines = []
    rec = wsetup.setup_model("matrix-game-2", d, source=str(root), no_env=True, echo=lines.append)
    assert "already there" in lines[0] and "already applied" in lines[1] and rec["weights"]["revision"] == "ab" * 20


def test_a_checkout_at_another_commit_is_refused_and_no_weights_names_them(upstream, spec, tmp_path, capsys):
    root, head = upstream
    other = tmp_path / "other"
    shutil.copytree(root, other)  # at v2, not the pinned v1
    rc = main(["setup", "matrix-game-2", "--checkout", str(other), "--dir", str(tmp_path / "d"), "--no-weights",
               "--no-env"])
    err = capsys.readouterr().err
    assert rc == 2 and "setup step 'checkout'" in err and f"git -C {other} checkout {head}" in err
    git("checkout", "-q", head, cwd=other)
    assert main(["setup", "matrix-game-2", "--checkout", str(other / "Matrix-Game-2"), "--dir",
                 str(tmp_path / "d"), "--no-weights", "--no-env"]) == 0
    assert PATCH.missing(other / "Matrix-Game-2") == []
    with pytest.raises(AdapterError, match="has no weights.*--no-weights"):
        get_adapter("matrix-game-2", setup=str(tmp_path / "d")).load()
    # doctor says what is missing: weights and the GPU, not the checkout or patch
    rc = main(["doctor", "--model", "matrix-game-2", "--setup", str(tmp_path / "d")])
    out = capsys.readouterr().out
    assert rc == 1
    rows = {ln.split()[0]: ln for ln in out.splitlines()[2:]}
    assert "at the pinned" not in rows["checkout"] and rows["checkout"].rstrip().endswith("-")
    assert "applied" in rows["patch"] and "missing" in rows["weights"] and "0 visible" in rows["gpus"]


def test_env_step_builds_a_venv_from_the_models_requirements(upstream, spec, tmp_path):
    root, head = upstream
    d = tmp_path / "mg2"
    lines = []
    wsetup.setup_model("matrix-game-2", d, source=str(root), no_weights=True, echo=lines.append)
    assert (d / "venv" / "bin" / "python").exists() and "built" in lines[2]
    rec = json.loads((d / "worldgate-model.json").read_text())
    assert rec["python"] == str(d / "venv" / "bin" / "python") and rec["weights"] is None
    lines.clear()
    wsetup.setup_model("matrix-game-2", d, source=str(root), no_weights=True, echo=lines.append)
    assert "already built" in lines[2]


def test_offline_weights_name_the_manual_command(upstream, spec, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    root, _ = upstream
    with pytest.raises(wsetup.SetupError, match=r"setup step 'weights'.*hf download Skywork/Matrix-Game-2.0 "
                                                r"--local-dir .*Matrix-Game-2.0 --include '\*.safetensors'"):
        wsetup.setup_model("matrix-game-2", tmp_path / "d", source=str(root), no_env=True, echo=lambda s: None)


def test_setup_refuses_models_that_need_none():
    with pytest.raises(wsetup.SetupError, match="sana-wm does not run from a repository checkout"):
        wsetup.setup_model("sana-wm", "/tmp/never-made", echo=lambda s: None)


PATCHED = [n for n in MODELS.names() if issubclass(MODELS.get(n), RepoAdapter) and MODELS.get(n).repo_spec.patch]


def test_every_model_that_needs_a_patch_ships_one():
    """The seven models whose scripts take control only through worldgate's patch ship it (no marker-only specs)."""
    assert set(PATCHED) >= {"matrix-game-1", "matrix-game-2", "matrix-game-3", "solaris-mp", "solaris-sp", "forgewm",
                            "abot-world", "infinite-world"}
    for n in MODELS.names():
        cls = MODELS.get(n)
        if issubclass(cls, RepoAdapter):
            assert not cls.repo_spec.patches or cls.repo_spec.patch is not None, f"{n}: a marker without a patch"
            assert len(cls.repo_spec.commit) == 40, f"{n}: no pinned commit"


@pytest.mark.parametrize("name", PATCHED)
def test_setup_applies_each_shipped_patch_to_its_anchors(name, tmp_path, capsys):
    """Every shipped patch applies through ``setup --checkout`` to a checkout holding its anchors (a synthetic copy of
    the lines it touches; the gated ``<MODEL>_CHECKOUT`` tests apply it to the real code), and the adapter then finds
    its checkout patched: ``generate --model-args setup=DIR`` fails only on the weights."""
    spec = MODELS.get(name).repo_spec
    ck = tmp_path / "checkout"
    for f in spec.patch.files():
        anchors = [e.anchor for e in spec.patch.edits if e.file == f and e.anchor is not None]
        if anchors:
            (ck / f).parent.mkdir(parents=True, exist_ok=True)
            (ck / f).write_text("\n".join(anchors) + "\n")
    if not (ck / spec.entry).exists():
        (ck / spec.entry).parent.mkdir(parents=True, exist_ok=True)
        (ck / spec.entry).write_text("# entry point\n")
    d = tmp_path / "setup"
    assert main(["setup", name, "--checkout", str(ck), "--dir", str(d), "--any-commit", "--no-weights",
                 "--no-env"]) == 0, capsys.readouterr().err
    assert spec.patch.missing(ck) == []
    with pytest.raises(AdapterError, match="has no weights"):
        get_adapter(name, setup=str(d)).load()
