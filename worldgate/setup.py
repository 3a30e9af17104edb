"""``worldgate setup MODEL --dir DIR``: a repository model's code, worldgate's patch, its environment and its weights.

Five steps, each idempotent (a second run does nothing and says so) and resumable (a run killed mid-way is finished
by running the same command again), each printing one line; a failure names its step and the command to do it by hand.

1. **checkout** — clone the model's official repository at the commit its adapter was read at (``RepoSpec.commit``)
   into ``DIR/src`` (through ``DIR/src.partial``, renamed when whole), or verify ``--checkout PATH`` is at that
   commit (``--any-commit`` accepts another and records that it was not verified).
2. **patch** — apply worldgate's own patch (``RepoSpec.patch``, adapters/patching.py): control gets in, nothing else
   changes. Models that read their controls from files need none.
3. **env** — a virtual environment per model, ``DIR/venv``, from the model folder's own requirement files
   (``RepoSpec.requirements``), built from ``--python`` (default: this Python); pip's output goes to
   ``DIR/setup.log``. ``--no-env`` skips it (the command then runs with ``--model-args python=...`` or this Python).
4. **weights** — ``huggingface_hub.snapshot_download`` of ``RepoSpec.hf_id`` at its pinned revision (else the
   default branch, resolved to its commit first and recorded), only the files the command reads
   (``weights_patterns``), into ``DIR/weights/<weights_dir>``. ``--no-weights`` skips it.
5. **record** — ``DIR/worldgate-model.json``: checkout path and commit, patch version, weights path and revision,
   python; ``generate --model MODEL --model-args setup=DIR`` then needs nothing else.

``worldgate doctor --model MODEL [--setup DIR]`` reports what is missing for that model: checkout, patch, weights and
GPU count.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from worldgate import __version__
from worldgate.adapters import MODELS
from worldgate.adapters.patching import PatchError
from worldgate.adapters.repo import SETUP_FILE, RepoAdapter, RepoSpec, parse_gpus, read_setup

STEPS = ("checkout", "patch", "env", "weights", "record")


class SetupError(RuntimeError):
    """A setup step failed: the message names the step, what went wrong and the command to do it by hand."""

    def __init__(self, step: str, message: str, manual: str = ""):
        self.step = step
        super().__init__(f"setup step {step!r}: {message}" + (f"; by hand: {manual}" if manual else ""))


def repo_class(name: str):
    cls = MODELS.get(name)  # unknown name: did-you-mean
    if not (isinstance(cls, type) and issubclass(cls, RepoAdapter)):
        hint = f" (`hf download {cls.info.hf_ids[0]}`)" if cls.info.hf_ids else ""
        raise SetupError("checkout", f"{name} does not run from a repository checkout (its runtime is "
                                     f"{cls.__module__.rsplit('.', 1)[-1]}): there is nothing to set up{hint}")
    return cls


def _git(*args, cwd=None, check=True) -> str:
    try:
        p = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=3600)
    except FileNotFoundError:
        raise SetupError("checkout", "git is not installed", "apt-get install git") from None
    if check and p.returncode != 0:
        raise subprocess.CalledProcessError(p.returncode, ["git", *args], p.stdout, p.stderr)
    return p.stdout.strip() if p.returncode == 0 else ""


def _head(folder: Path) -> str:
    return _git("rev-parse", "HEAD", cwd=folder, check=False)


def model_folder(spec: RepoSpec, root: Path) -> Path:
    """The folder holding the entry point: ``root/subdir``, or ``root`` itself when the model folder was given."""
    if spec.subdir and (root / spec.subdir / spec.entry).is_file():
        return root / spec.subdir
    return root


# ---------------------------------------------------------------------------------------------------------- steps
def step_checkout(name: str, spec: RepoSpec, d: Path, checkout: str | None, source: str | None,
                  any_commit: bool, echo) -> tuple[Path, str, bool]:
    """(model folder, commit, verified)."""
    pinned = spec.commit
    if checkout:
        root = Path(checkout).expanduser().resolve()
        if not root.is_dir():
            raise SetupError("checkout", f"--checkout {root} does not exist", f"git clone {spec.url} {root}")
        folder = model_folder(spec, root)
        if not (folder / spec.entry).is_file():
            raise SetupError("checkout", f"{root} has no {spec.entry}{f' (nor {spec.subdir}/{spec.entry})' if spec.subdir else ''}: "
                                         f"is it a checkout of {spec.clone}?")
        head = _head(folder)
        ok = bool(pinned) and head == pinned
        if not ok and not any_commit:
            why = "is not a git checkout" if not head else f"is at {head[:12]}"
            raise SetupError("checkout", f"{root} {why}, not at the commit the adapter was read at "
                                         f"({pinned or 'none pinned'}); pass --any-commit to use it unverified",
                             f"git -C {root} checkout {pinned}" if pinned and head else "")
        echo(f"[setup] checkout: {folder} at {head[:12] or '(not git)'}"
             f"{' (the pinned commit)' if ok else ' (NOT the pinned commit: unverified)'}")
        return folder, head, ok
    root = d / "src"
    url = source or spec.url
    if root.is_dir():
        head = _head(root)
        if pinned and head != pinned:
            raise SetupError("checkout", f"{root} is at {head[:12] or '(not git)'}, not the pinned {pinned[:12]}",
                             f"rm -rf {root} (then rerun), or git -C {root} checkout {pinned}")
        echo(f"[setup] checkout: {root} at {head[:12]} (already there)")
        return model_folder(spec, root), head, bool(pinned)
    partial = d / "src.partial"
    if partial.exists():  # a clone killed mid-way: start it again
        shutil.rmtree(partial)
    try:
        _git("clone", "--quiet", "--no-checkout", url, str(partial))
        target = pinned or _git("rev-parse", "HEAD", cwd=partial)
        _git("-c", "advice.detachedHead=false", "checkout", "--quiet", target, cwd=partial)
    except subprocess.CalledProcessError as e:
        msg = " ".join((e.stderr or "").split())[-400:]
        raise SetupError("checkout", f"git {' '.join(e.cmd[1:3])} failed ({msg or e.returncode})",
                         f"git clone {url} {root} && git -C {root} checkout {pinned or 'main'}") from None
    os.replace(partial, root)
    head = _head(root)
    echo(f"[setup] checkout: cloned {url} at {head[:12]} into {root}")
    return model_folder(spec, root), head, bool(pinned)


def step_patch(name: str, spec: RepoSpec, folder: Path, echo) -> dict | None:
    if spec.patch is None:
        echo(f"[setup] patch: none needed ({name} reads its controls from files)")
        return None

    try:
        changed = spec.patch.apply(folder)
    except (PatchError, OSError, UnicodeDecodeError) as e:
        raise SetupError("patch", str(e), f"apply the edits of {spec.patch_doc or 'the adapter'} to {folder} by hand")
    echo(f"[setup] patch: {spec.patch.marker} " + (f"applied to {', '.join(changed)}" if changed else
                                                   "already applied"))
    return {"version": spec.patch.version, "marker": spec.patch.marker, "files": spec.patch.files()}


def _requirement_files(spec: RepoSpec, folder: Path) -> list[Path]:
    return [folder / r for r in spec.requirements if (folder / r).is_file()]


def step_env(name: str, spec: RepoSpec, folder: Path, d: Path, python: str | None, echo) -> str:
    venv = d / "venv"
    py = venv / "bin" / "python"
    reqs = _requirement_files(spec, folder)
    digest = hashlib.sha256(b"".join(r.name.encode() + r.read_bytes() for r in reqs)).hexdigest()
    stamp = venv / ".worldgate-env.json"
    try:
        if json.loads(stamp.read_text()).get("requirements_sha256") == digest and py.exists():
            echo(f"[setup] env: {venv} (already built from {', '.join(r.name for r in reqs) or 'no requirements'})")
            return str(py)
    except (OSError, ValueError):
        pass
    log = d / "setup.log"
    base = python or sys.executable

    def run(cmd, what):
        with open(log, "a", encoding="utf-8") as fh:
            fh.write(f"$ {' '.join(map(str, cmd))}\n")
            fh.flush()
            p = subprocess.run([str(c) for c in cmd], stdout=fh, stderr=subprocess.STDOUT, cwd=folder)
        if p.returncode != 0:
            tail = log.read_text(errors="replace").splitlines()[-5:]
            raise SetupError("env", f"{what} failed (exit {p.returncode}); the end of {log}: {' | '.join(tail)}",
                             " ".join(map(str, cmd)))

    if not py.exists():
        run([base, "-m", "venv", venv], f"making the venv from {base}")
    for r in reqs:
        if r.suffix == ".txt":
            if any(ln.strip() and not ln.lstrip().startswith("#") for ln in r.read_text(errors="replace").splitlines()):
                run([py, "-m", "pip", "install", "-q", "-r", r], f"pip install -r {r.name}")
        elif r.name in ("pyproject.toml", "setup.py"):
            run([py, "-m", "pip", "install", "-q", "-e", folder], f"pip install -e {folder}")
        else:
            raise SetupError("env", f"{r.name} is not a pip requirement file", f"build the environment from {r} "
                             f"by hand and rerun with --no-env (then --model-args python=ENV/bin/python)")
    stamp.write_text(json.dumps({"requirements_sha256": digest, "files": [r.name for r in reqs], "base": base}))
    echo(f"[setup] env: built {venv} from {', '.join(r.name for r in reqs) or 'no requirements'} (log {log})")
    return str(py)


def download_weights(hf_id: str, revision: str | None, patterns: list[str] | None, dest: Path) -> str:
    """Download ``hf_id`` at ``revision`` (resolved to its commit first) into ``dest``; returns the commit."""
    from huggingface_hub import HfApi, snapshot_download

    sha = HfApi().model_info(hf_id, revision=revision or None).sha
    snapshot_download(hf_id, revision=sha, allow_patterns=patterns or None, local_dir=str(dest))
    return sha


def step_weights(name: str, spec: RepoSpec, d: Path, echo) -> dict:
    ckpt = d / "weights"
    dest = ckpt / spec.weights_dir if spec.weights_dir else ckpt
    stamp = ckpt / ".worldgate-weights.json"
    want = {"hf_id": spec.hf_id, "patterns": list(spec.weights_patterns), "pinned": spec.hf_revision or None}
    try:
        done = json.loads(stamp.read_text())
        if {k: done.get(k) for k in want} == want and dest.is_dir():
            echo(f"[setup] weights: {spec.hf_id} at {done['revision'][:12]} in {dest} (already there)")
            return dict(done, ckpt=str(ckpt), path=str(dest))
    except (OSError, ValueError, KeyError, TypeError):
        pass
    manual = (f"hf download {spec.hf_id}{f' --revision {spec.hf_revision}' if spec.hf_revision else ''} "
              f"--local-dir {dest}" + "".join(f" --include '{p}'" for p in spec.weights_patterns))
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes"):
        raise SetupError("weights", "HF_HUB_OFFLINE is set: nothing can be downloaded (or use --no-weights)", manual)
    dest.mkdir(parents=True, exist_ok=True)
    try:
        sha = download_weights(spec.hf_id, spec.hf_revision or None, list(spec.weights_patterns), dest)
    except Exception as e:  # noqa: BLE001 - network, auth, gated repository: all end the same way, named
        msg = " ".join(str(e).split())[:400]
        raise SetupError("weights", f"downloading {spec.hf_id} failed ({type(e).__name__}: {msg})", manual) from None
    done = dict(want, revision=sha, time=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    stamp.write_text(json.dumps(done, indent=2))
    echo(f"[setup] weights: {spec.hf_id} at {sha[:12]} into {dest}")
    return dict(done, ckpt=str(ckpt), path=str(dest))


def step_record(name: str, d: Path, record: dict, echo) -> Path:
    f = d / SETUP_FILE
    old = None
    try:
        old = {k: v for k, v in json.loads(f.read_text()).items() if k != "written"}
    except (OSError, ValueError, AttributeError):
        pass
    if old == record:
        echo(f"[setup] record: {f} (unchanged)")
        return f
    tmp = f.with_name(f".{f.name}.{os.getpid()}")
    tmp.write_text(json.dumps(dict(record, written=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())), indent=2,
                              sort_keys=True))
    os.replace(tmp, f)
    echo(f"[setup] record: {f}: generate --model {name} --model-args setup={d}")
    return f


def setup_model(name: str, folder, *, checkout: str | None = None, source: str | None = None,
                no_weights: bool = False, no_env: bool = False, python: str | None = None,
                any_commit: bool = False, echo=print) -> dict:
    """Run the five steps for ``name`` into ``folder``; returns what was recorded in worldgate-model.json."""
    cls = repo_class(name)
    spec = cls.repo_spec
    d = Path(folder).expanduser().resolve()
    d.mkdir(parents=True, exist_ok=True)
    mdir, commit, verified = step_checkout(name, spec, d, checkout, source, any_commit, echo)
    patch = step_patch(name, spec, mdir, echo)
    if no_env:
        py = python or sys.executable
        echo(f"[setup] env: skipped (--no-env): the command runs with {py}")
    else:
        py = step_env(name, spec, mdir, d, python, echo)
    if no_weights:
        weights = None
        echo(f"[setup] weights: skipped (--no-weights): `hf download {spec.hf_id}` later, or pass ckpt=")
    else:
        weights = step_weights(name, spec, d, echo)
    record = {"model": name, "adapter_version": cls.info.version, "model_dir": str(mdir), "repository": spec.url,
              "commit": commit, "pinned_commit": spec.commit, "commit_verified": verified, "patch": patch,
              "python": py, "weights": weights, "worldgate_version": __version__}
    step_record(name, d, record, echo)
    return record


# --------------------------------------------------------------------------------------------------------- doctor
def doctor_model(name: str, setup: str | None = None, gpus=None) -> list[dict]:
    """One row per requirement of ``name`` (checkout, patch, env, weights, GPUs): status and the fix."""
    cls = repo_class(name)
    spec = cls.repo_spec
    rows = []
    rec = read_setup(name, setup) if setup else None
    mdir = Path(rec["model_dir"]) if rec else None
    where = f"--dir {setup}" if setup else "--dir DIR"
    if mdir is None:
        rows.append(("checkout", "not set up", f"worldgate setup {name} {where} (clones {spec.url} at "
                                               f"{spec.commit[:12] or 'its default branch'})"))
    elif not (mdir / spec.entry).is_file():
        rows.append(("checkout", f"missing: {mdir / spec.entry}", f"worldgate setup {name} {where}"))
    else:
        head = _head(mdir)
        ok = bool(spec.commit) and head == spec.commit
        rows.append(("checkout", f"present at {head[:12] or '(not git)'}" + ("" if ok else
                     f" (pinned {spec.commit[:12] or 'none'}: unverified)"), "" if ok else f"git -C {mdir} checkout {spec.commit}"))
    if spec.patch is None:
        rows.append(("patch", "none needed", ""))
    elif mdir is None:
        rows.append(("patch", f"not applied ({spec.patch.marker})", f"worldgate setup {name} {where}"))
    else:
        miss = spec.patch.missing(mdir)
        rows.append(("patch", "applied" if not miss else f"missing in {', '.join(miss)}",
                     "" if not miss else f"worldgate setup {name} {where}"))
    py = (rec or {}).get("python")
    rows.append(("env", f"{py}" + ("" if py and Path(py).exists() else " (missing)") if py else "not set up",
                 "" if py and Path(py).exists() else f"worldgate setup {name} {where}"))
    w = (rec or {}).get("weights")
    if w and Path(w.get("path", "")).is_dir():
        rows.append(("weights", f"{w.get('hf_id')} at {str(w.get('revision'))[:12]} in {w['path']}", ""))
    else:
        rows.append(("weights", "missing", f"worldgate setup {name} {where} (or hf download {spec.hf_id})"))
    want = parse_gpus(name, gpus)
    have = gpu_count()
    need = "a CUDA GPU" if want == 1 else f"{want} CUDA GPUs"
    multi = "" if want == 1 or cls.multi_gpu else " (this model has no multi-GPU run: gpus=1)"
    rows.append(("gpus", f"{have} visible, {need} needed per case{multi}",
                 "" if have >= want and not multi else "run on a GPU machine (here: generate --dry-run)"))
    return [{"need": a, "status": b, "fix": c} for a, b, c in rows]


def gpu_count() -> int:
    try:
        import torch

        return int(torch.cuda.device_count()) if torch.cuda.is_available() else 0
    except Exception:  # noqa: BLE001 - no torch, or a broken CUDA install: none usable
        return 0


def missing(rows: list[dict]) -> list[dict]:
    return [r for r in rows if r["fix"]]


# ------------------------------------------------------------------------------------------------------------ CLI
def add_parser(sub) -> None:
    s = sub.add_parser("setup", help="a repository model's checkout at its pinned commit, worldgate's patch, its "
                                     "environment and weights (then --model-args setup=DIR)")
    s.add_argument("model")
    s.add_argument("--dir", required=True, help="the model's setup folder (src/, venv/, weights/, worldgate-model.json)")
    s.add_argument("--checkout", help="an existing checkout to verify and patch instead of cloning")
    s.add_argument("--source", help="clone from here instead of the official URL (a mirror or a local clone)")
    s.add_argument("--any-commit", action="store_true", help="accept a --checkout at another commit (recorded)")
    s.add_argument("--no-weights", action="store_true", help="skip the weights download")
    s.add_argument("--no-env", action="store_true", help="build no venv (run with --python or this Python)")
    s.add_argument("--python", help="the Python the venv is made from (with --no-env: the one the model runs with)")
    s.set_defaults(fn=cmd_setup)


def cmd_setup(a) -> int:
    setup_model(a.model, a.dir, checkout=a.checkout, source=a.source, no_weights=a.no_weights, no_env=a.no_env,
                python=a.python, any_commit=a.any_commit)
    return 0


__all__ = ["STEPS", "SetupError", "add_parser", "doctor_model", "setup_model"]
