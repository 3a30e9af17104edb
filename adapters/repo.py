"""Running a repository-driven model from a user-supplied checkout of its official code.

``--model-args repo=PATH,ckpt=WEIGHTS[,python=PYTHON,gpus=N]``. ``load`` checks, once, before any case runs: the
checkout and its entry point exist, every worldgate patch the adapter needs is applied (a marker string the patch adds,
never assumed), the weights are where ``ckpt`` says, and a CUDA GPU is present. Each failure names what is missing and
the command that fetches it. ``rollout`` writes the plan's native files into a fresh work folder, runs the model's
own command line (``command.txt`` of the plan) with those files' absolute paths, in the checkout, as a separate
process — so no state (KV caches, RNG, CUDA graphs) survives from one case to the next — and returns the video the
entry point wrote. Patches only add an input path (AlayaLab/WorldMark output_spec §6, "Patch discipline").
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from .base import Adapter, AdapterError, Chunk, NativeInputs, with_seed


@dataclass(frozen=True)
class RepoSpec:
    clone: str  # git URL (and sub-folder) of the official code
    entry: str  # the entry point, relative to the checkout
    hf_id: str  # weights on the Hugging Face hub
    patches: dict = field(default_factory=dict)  # file in the checkout -> marker string the worldgate patch adds
    patch_doc: str = ""  # where the patch is described
    needs_gpu: bool = True
    timeout_s: float = 6 * 3600


def _fetch_hint(spec: RepoSpec) -> str:
    return f"hf download {spec.hf_id} --local-dir WEIGHTS"


def check_checkout(name: str, spec: RepoSpec, model_args: dict) -> dict:
    """Validate ``repo``/``ckpt``/GPU for ``name``; return the resolved paths. Raises AdapterError with the fix."""
    repo = model_args.get("repo")
    if not repo:
        raise AdapterError(
            f"{name} runs from a checkout of its official code: `git clone {spec.clone}` and download the weights "
            f"(`{_fetch_hint(spec)}`), then pass --model-args repo=PATH,ckpt=WEIGHTS. "
            f"Without a GPU, `generate --dry-run` writes its native inputs.")
    repo = Path(str(repo)).expanduser().resolve()
    if not repo.is_dir():
        raise AdapterError(f"{name}: repo={repo} does not exist; `git clone {spec.clone}` there")
    if not (repo / spec.entry).is_file():
        raise AdapterError(f"{name}: {repo} has no {spec.entry}; is it a checkout of {spec.clone}?")
    for rel, marker in sorted(spec.patches.items()):
        f = repo / rel
        if not f.is_file() or marker not in f.read_text(errors="replace"):
            raise AdapterError(
                f"{name}: the worldgate patch is not applied to {f} (marker {marker!r} missing). It only adds a "
                f"file input for the native controls; see {spec.patch_doc or 'docs/probes/'}, apply it, then rerun.")
    ckpt = model_args.get("ckpt")
    if not ckpt or not Path(str(ckpt)).expanduser().exists():
        raise AdapterError(f"{name}: weights not found at ckpt={ckpt!r}; fetch them with `{_fetch_hint(spec)}` "
                           f"and pass --model-args ckpt=WEIGHTS")
    if spec.needs_gpu and not model_args.get("allow_cpu"):
        try:
            import torch

            has_gpu = torch.cuda.is_available()
        except ImportError:
            has_gpu = False
        if not has_gpu:
            raise AdapterError(f"{name} needs a CUDA GPU (none visible here); on this machine use "
                               f"`generate --dry-run` to write its native inputs")
    extra = {k: v for k, v in model_args.items() if k.endswith(("_path", "_dir"))}
    return {"repo": repo, "ckpt": Path(str(ckpt)).expanduser().resolve(),
            "python": str(model_args.get("python") or sys.executable), "extra": extra}


_PLACEHOLDER = re.compile(r"^[A-Z][A-Z0-9_]*_(PATH|DIR)$")


def command_argv(command: str, files: dict, native: Path, paths: dict, image: str | None,
                 seed: int | None = None) -> list[str]:
    """The plan's command line with its native files, image and weights made absolute and the rollout seed in."""
    command = with_seed(command.split(" #", 1)[0].strip(), seed)
    argv = shlex.split(command)
    out = []
    for tok in argv:
        if tok == "python":
            tok = paths["python"]
        elif tok in files:
            tok = str(native / tok)
        elif tok == "ACTION_DIR":  # a folder input (LingBot's --action_path): the files under action/
            tok = str(native / "action")
        elif tok.startswith("$(cat ") and tok.endswith(")") and tok[6:-1] in files:  # text given inline (a prompt)
            tok = (native / tok[6:-1]).read_text()
        elif image and tok in ("IMAGE", image):
            tok = str(Path(image).resolve())
        elif tok == "IMAGE_DIR" and image:  # a folder that must hold only the case image (Yume --jpg_dir)
            d = native.parent / "image_dir"
            d.mkdir(exist_ok=True)
            shutil.copy2(image, d / Path(image).name)
            tok = str(d)
        elif "=" in tok and tok.split("=", 1)[1] in files:  # a file passed through the environment (Evoke JSONL=)
            k, v = tok.split("=", 1)
            tok = f"{k}={native / v}"
        elif tok == "OUT":  # the entry point's output folder
            tok = str(native.parent / "out")
        elif tok.startswith("OUT/") and ".." not in Path(tok).parts:  # a file in it (MG-3.5 distilled --output)
            tok = str(native.parent / "out" / tok[4:])
        elif "CKPT" in tok:
            tok = tok.replace("CKPT", str(paths["ckpt"]))
        elif _PLACEHOLDER.match(tok):  # another path the user must supply, e.g. MODEL_PATH -> model_path=...
            key = tok.lower()
            if key not in paths.get("extra", {}):
                raise AdapterError(f"the command needs {tok}: pass --model-args {key}=PATH")
            tok = str(paths["extra"][key])
        out.append(tok)
    return out


def _absolute_paths_in_jsonl(native: Path, files: dict, image: str | None) -> None:
    """Case rows (``.jsonl``) name native files and the image relative to the plan: make them absolute, since the
    entry point resolves them from the checkout."""
    def fix(row):
        if isinstance(row, dict):
            for k, v in row.items():
                if isinstance(v, str) and v in files:
                    row[k] = str(native / v)
                elif isinstance(v, str) and image and v in ("IMAGE", image):
                    row[k] = str(Path(image).resolve())
        return row

    for name in files:
        p = native / name
        if name.endswith(".jsonl"):
            rows = [json.dumps(fix(json.loads(ln))) for ln in p.read_text().splitlines() if ln.strip()]
            p.write_text("\n".join(rows) + "\n")
        elif name.endswith(".json") and name != "plan.json":
            data = json.loads(p.read_text())
            if isinstance(data, list) and all(isinstance(r, dict) for r in data) and any(
                    isinstance(v, str) and (v in files or v in ("IMAGE", image)) for r in data for v in r.values()):
                p.write_text(json.dumps([fix(r) for r in data], indent=2))


def run_checkout(name: str, spec: RepoSpec, paths: dict, plan, seed: int | None = None) -> Iterator[Chunk]:
    """Run the entry point for one plan in the checkout; yield the video it wrote as one chunk (``Chunk.video``:
    ``generate`` reads it while this iterator is open, then the work folder goes)."""
    with tempfile.TemporaryDirectory(prefix=f"worldgate-{name}-") as work:
        work = Path(work)
        native = work / "native"
        plan.write(native, seed=seed)
        _absolute_paths_in_jsonl(native, plan.files, plan.extra.get("image"))
        argv = command_argv(plan.files.get("command.txt", ""), plan.files, native, paths, plan.extra.get("image"),
                            seed)
        if not argv:
            raise AdapterError(f"{name}: the plan has no command.txt to run")
        t0 = time.time()
        env = dict(os.environ, WORLDGATE_OUT=str(work / "out"))
        (work / "out").mkdir()
        proc = subprocess.run(argv, cwd=paths["repo"], env=env, capture_output=True, text=True,
                              timeout=spec.timeout_s)
        if proc.returncode != 0:
            tail = (proc.stderr or proc.stdout or "")[-2000:]
            raise AdapterError(f"{name}: `{' '.join(argv)}` exited {proc.returncode}:\n{tail}")
        declared = plan.extra.get("output_video")  # the file the command names (relative to OUT), if it does
        if declared and (work / "out" / declared).is_file():
            video = work / "out" / declared
        else:
            # what it wrote in the output folder it was given; only a model that cannot be told one writes into the
            # checkout, where the newest new .mp4 is taken
            new = [[p for p in root.rglob("*.mp4") if p.stat().st_mtime >= t0 - 1] for root in (work / "out",
                                                                                               paths["repo"])]
            videos = new[0] or new[1]
            if not videos:
                raise AdapterError(f"{name}: the entry point finished but wrote no new .mp4 (looked in the checkout "
                                   f"and $WORLDGATE_OUT)")
            video = max(videos, key=lambda p: p.stat().st_mtime)
        yield Chunk(start=0, frames=None, video=video, extra={"source_video": str(video), "argv": argv})


class RepoAdapter(Adapter):
    """An adapter whose runtime is the model's official repository: ``load`` checks the checkout once, ``rollout``
    runs the plan's ``command.txt`` there with the rollout seed in place of its ``SEED`` token."""

    repo_spec: RepoSpec

    def __init__(self, **model_args):
        super().__init__(**model_args)
        self._paths = None

    def load(self, device: str = "cpu", dtype: str | None = None) -> None:
        self._paths = check_checkout(self.info.name, self.repo_spec, self.model_args)

    def context_support(self, name: str) -> str | None:
        return (f"{self.info.name} runs its official entry point, which applies its own cache "
                f"({', '.join(self.info.context_policies) or 'none listed'}); no context policy can be chosen from "
                "outside (drop --context)")

    def rollout(self, plan: NativeInputs, context=None, seed: int = 0) -> Iterator[Chunk]:
        if context is not None:
            raise AdapterError(self.context_support(getattr(context, "name", str(context))))
        if self.info.image_conditioned and not plan.extra.get("image"):
            raise AdapterError(f"{self.info.name} is image-conditioned and case {plan.case_id} has no image "
                               "(Engine suites have none): give cases with an image (e.g. --suite worldmark --data "
                               "PATH); --dry-run still writes its native inputs")
        if self._paths is None:
            self.load()
        yield from run_checkout(self.info.name, self.repo_spec, self._paths, plan,
                                None if self.info.no_seed else seed)
