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

import copy
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
from .patching import Patch


@dataclass(frozen=True)
class RepoSpec:
    clone: str  # git URL (and sub-folder) of the official code
    entry: str  # the entry point, relative to the checkout
    hf_id: str  # weights on the Hugging Face hub
    #: file in the checkout -> marker string the worldgate patch adds (set from ``patch`` when it is given)
    patches: dict = field(default_factory=dict)
    patch_doc: str = ""  # where the patch is described
    needs_gpu: bool = True
    timeout_s: float = 6 * 3600
    #: the commit the adapter was read at (``worldgate setup`` checks it out; 40 hex digits)
    commit: str = ""
    #: the model's folder inside the repository ("" for its root; e.g. "Matrix-Game-2")
    subdir: str = ""
    #: worldgate's own patch (adapters/patching.py), applied by ``worldgate setup``
    patch: Patch | None = None
    #: the weight files the command reads (``huggingface_hub`` allow_patterns; empty: the whole repository)
    weights_patterns: tuple[str, ...] = ()
    #: the Hub revision of the weights ("" : the default branch, resolved at download and recorded)
    hf_revision: str = ""
    #: the environment's requirement files in the model's folder, installed in order by ``worldgate setup``
    requirements: tuple[str, ...] = ("requirements.txt",)
    #: an environment variable the model's launcher reads as its GPU index and then exports as CUDA_VISIBLE_DEVICES
    #: itself (Evoke's GPU_OFFSET): set to this case's first visible device, so it cannot land on another one's
    device_env: str = ""
    #: the folder under ``ckpt`` the command reads the ``hf_id`` download from ("" : ``ckpt`` itself), e.g.
    #: LingBot's ``--ckpt_dir CKPT/lingbot-world-base-cam``
    weights_dir: str = ""

    def __post_init__(self):
        if self.patch is not None:
            object.__setattr__(self, "patches", self.patch.markers())

    @property
    def url(self) -> str:
        """The git URL alone (``clone`` may say which folder of it holds the model)."""
        return self.clone.split(" ", 1)[0]


def _fetch_hint(spec: RepoSpec) -> str:
    return f"hf download {spec.hf_id} --local-dir WEIGHTS{'/' + spec.weights_dir if spec.weights_dir else ''}"


#: what ``worldgate setup MODEL --dir DIR`` writes into DIR and ``--model-args setup=DIR`` reads
SETUP_FILE = "worldgate-model.json"
MAX_SETUP_BYTES = 1 << 20


def read_setup(name: str, folder) -> dict:
    """DIR/worldgate-model.json of ``worldgate setup``, checked to be for ``name``; AdapterError says what to run."""
    d = Path(str(folder)).expanduser()
    f = d / SETUP_FILE
    if f.is_symlink() or not f.is_file():
        raise AdapterError(f"{name}: setup={d} has no {SETUP_FILE}: run `worldgate setup {name} --dir {d}` first")
    if f.stat().st_size > MAX_SETUP_BYTES:
        raise AdapterError(f"{name}: {f} is larger than {MAX_SETUP_BYTES} bytes: not a worldgate setup record")
    try:
        data = json.loads(f.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise AdapterError(f"{name}: {f} is unreadable ({type(e).__name__}: {e}); rerun `worldgate setup {name} "
                           f"--dir {d}`") from None
    if not isinstance(data, dict) or data.get("model") != name:
        other = data.get("model") if isinstance(data, dict) else None
        raise AdapterError(f"{name}: {f} is the setup of {other!r}, not {name!r}: give that model's setup folder")
    return data


def _from_setup(name: str, model_args: dict) -> dict:
    """``setup=DIR`` fills ``repo``, ``ckpt`` and ``python`` (arguments given beside it win)."""
    if not model_args.get("setup"):
        return model_args
    rec = read_setup(name, model_args["setup"])
    filled = dict(model_args)
    filled.setdefault("repo", rec.get("model_dir"))
    weights = rec.get("weights") or {}
    if weights.get("ckpt"):
        filled.setdefault("ckpt", weights["ckpt"])
    elif not filled.get("ckpt"):
        raise AdapterError(f"{name}: the setup in {model_args['setup']} has no weights (it ran with --no-weights): "
                           f"rerun `worldgate setup {name} --dir {model_args['setup']}` on a machine that reaches the "
                           f"Hub, or pass --model-args ckpt=WEIGHTS")
    if rec.get("python"):
        filled.setdefault("python", rec["python"])
    return filled


def check_checkout(name: str, spec: RepoSpec, model_args: dict) -> dict:
    """Validate ``repo``/``ckpt``/GPU for ``name``; return the resolved paths. Raises AdapterError with the fix."""
    model_args = _from_setup(name, model_args)
    repo = model_args.get("repo")
    if not repo:
        raise AdapterError(
            f"{name} runs from a checkout of its official code: `git clone {spec.clone}` and download the weights "
            f"(`{_fetch_hint(spec)}`), then pass --model-args repo=PATH,ckpt=WEIGHTS. "
            f"Without a GPU, `generate --dry-run` writes its native inputs.")
    repo = Path(str(repo)).expanduser().resolve()
    if not repo.is_dir():
        raise AdapterError(f"{name}: repo={repo} does not exist; `git clone {spec.clone}` there")
    if not (repo / spec.entry).is_file() and spec.subdir and (repo / spec.subdir / spec.entry).is_file():
        repo = repo / spec.subdir  # the repository's root was given: the model lives in its folder
    if not (repo / spec.entry).is_file():
        raise AdapterError(f"{name}: {repo} has no {spec.entry}; is it a checkout of {spec.clone}?")
    for rel, marker in sorted(spec.patches.items()):
        f = repo / rel
        if not f.is_file() or marker not in f.read_text(errors="replace"):
            raise AdapterError(
                f"{name}: the worldgate patch is not applied to {f} (marker {marker!r} missing). It only adds a "
                f"file input for the native controls: `worldgate setup {name} --checkout {repo} --dir DIR` applies it "
                f"(see {spec.patch_doc or 'docs/probes/'}), then rerun.")
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
        want, have = parse_gpus(name, model_args.get("gpus")), torch.cuda.device_count()
        if want > have:
            raise AdapterError(f"{name}: gpus={want} but {have} CUDA GPU(s) are visible: lower gpus= or run where "
                               f"{want} are")
    extra = {k: v for k, v in model_args.items() if k.endswith(("_path", "_dir"))}
    return {"repo": repo, "ckpt": Path(str(ckpt)).expanduser().resolve(),
            "python": str(model_args.get("python") or sys.executable), "extra": extra,
            "gpus": parse_gpus(name, model_args.get("gpus"))}


MAX_GPUS = 64  # gpus=N: GPUs for one case (a node has at most 8 today; 64 bounds a typo)
#: what a multi-process launcher (accelerate, torchrun, Slurm's srun) sets for *this* process: the model's own command
#: must not inherit it, or its torch.distributed would join worldgate's process group instead of starting its own
LAUNCHER_ENV = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE", "ROLE_RANK",
                "ROLE_WORLD_SIZE", "ROLE_NAME", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID",
                "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_USE_AGENT_STORE",
                "TORCHELASTIC_ERROR_FILE")
LAUNCHER_PREFIXES = ("ACCELERATE_", "TORCHELASTIC_")


def parse_gpus(name: str, value) -> int:
    """``gpus=N`` as a decimal integer in [1, MAX_GPUS]; the error names the value and the range."""
    if value is None or value == "":
        return 1
    if isinstance(value, bool) or not (isinstance(value, int) or (isinstance(value, str) and value.isdigit())):
        raise AdapterError(f"{name}: gpus={value!r} is not a whole number of GPUs (e.g. gpus=8)")
    n = int(str(value), 10)
    if not 1 <= n <= MAX_GPUS:
        raise AdapterError(f"{name}: gpus={n} is outside [1, {MAX_GPUS}]")
    return n


def torchrun(gpus: int, script: str) -> str:
    """``script`` (a path and its arguments) under torch's own launcher with ``gpus`` processes, run by the chosen
    Python (``python -m torch.distributed.run``, so the model's environment's torch launches it, not whatever
    ``torchrun`` is first on PATH). ``--standalone`` lets the launcher pick a free port: two cases on one node (two
    accelerate processes, two Slurm tasks) never fight over a fixed master port."""
    return f"python -m torch.distributed.run --standalone --nproc_per_node={int(gpus)} {script}"


def visible_devices(gpus: int, environ=None) -> str | None:
    """The devices this process's case may use: under a multi-process launcher (``WORLD_SIZE`` > 1) process
    ``LOCAL_RANK`` takes its own ``gpus`` of the node's visible devices (``CUDA_VISIBLE_DEVICES``, else 0, 1, ...),
    never another process's; None when nothing needs restricting (one process: the model sees what the user gave)."""
    env = os.environ if environ is None else environ
    try:
        world = int(env.get("WORLD_SIZE", "1"))
        local = int(env.get("LOCAL_RANK", "0"))
    except ValueError:
        return None
    if world <= 1:
        return None
    given = [d for d in env.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip() != ""]
    lo, hi = local * gpus, (local + 1) * gpus
    if given:
        if hi > len(given):
            raise AdapterError(f"process {local} needs GPUs {lo}..{hi - 1} of CUDA_VISIBLE_DEVICES={','.join(given)} "
                               f"({gpus} per case): start fewer processes per node (--num_processes "
                               f"{max(1, len(given) // gpus)}) or lower gpus=")
        return ",".join(given[lo:hi])
    return ",".join(str(i) for i in range(lo, hi))


def child_env(gpus: int, out: Path, environ=None) -> dict:
    """The environment of the model's own command: this process's, less the launcher's variables, with this case's
    devices (:func:`visible_devices`) and ``WORLDGATE_OUT``."""
    env = dict(os.environ if environ is None else environ)
    devices = visible_devices(gpus, env)
    for k in list(env):
        if k in LAUNCHER_ENV or k.startswith(LAUNCHER_PREFIXES):
            del env[k]
    if devices is not None:
        env["CUDA_VISIBLE_DEVICES"] = devices
    env["WORLDGATE_OUT"] = str(out)
    return env


_PLACEHOLDER = re.compile(r"^[A-Z][A-Z0-9_]*_(PATH|DIR)$")


def command_words(command: str) -> list[str]:
    """The words of a ``command.txt`` line (shell quoting), its trailing ``# comment`` dropped: a ``#`` starts a
    comment only where the shell's would, at the start of a word outside quotes, so a quoted path holding `` #``
    (an image named ``room #2.png``) stays whole."""
    cut, quote, escaped = len(command), None, False
    for i, c in enumerate(command):
        if escaped:
            escaped = False
        elif c == "\\" and quote != "'":
            escaped = True
        elif quote:
            quote = None if c == quote else quote
        elif c in "'\"":
            quote = c
        elif c == "#" and (i == 0 or command[i - 1].isspace()):
            cut = i
            break
    return shlex.split(command[:cut])


def command_argv(command: str, files: dict, native: Path, paths: dict, image: str | None,
                 seed: int | None = None) -> list[str]:
    """The plan's command line with its native files, image and weights made absolute and the rollout seed in."""
    argv = command_words(with_seed(command, seed))
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
        elif "=" in tok and tok.split("=", 1)[1] == "OUT":  # the output folder through the environment (OUT_ROOT=)
            tok = f"{tok.split('=', 1)[0]}={native.parent / 'out'}"
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
        env = child_env(int(paths.get("gpus", 1)), work / "out")
        if paths["python"] != sys.executable:  # the model's environment first on PATH: its launcher scripts' own
            env["PATH"] = os.pathsep.join([str(Path(paths["python"]).parent), env.get("PATH", "")])  # python, torchrun
        if spec.device_env and env.get("CUDA_VISIBLE_DEVICES", "").strip():
            env[spec.device_env] = env["CUDA_VISIBLE_DEVICES"].split(",")[0].strip()
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
    #: how the model's own code runs one case on several GPUs (its README or scripts, cited file:line), or "" when it
    #: has no multi-GPU inference: then ``gpus>1`` is refused
    multi_gpu: str = ""
    #: the --model-args keys every repository adapter reads (check_checkout, gpus, provenance; ``*_path``/``*_dir``:
    #: a path the command line names); a subclass that reads more adds them (``RepoAdapter.MODEL_ARGS + (...)``).
    #: Any other key is an error with a did-you-mean (generate.overrides.accepted_model_args), never silently ignored
    MODEL_ARGS = ("setup", "repo", "ckpt", "allow_cpu", "gpus", "python", "*_path", "*_dir")

    def __init__(self, **model_args):
        super().__init__(**model_args)
        self._paths = None

    def gpus(self) -> int:
        """``gpus=N`` of the model args (default 1), refused above 1 for a model whose code has no multi-GPU run."""
        n = parse_gpus(self.info.name, self.model_args.get("gpus"))
        if n > 1 and not self.multi_gpu:
            raise AdapterError(f"{self.info.name} has no multi-GPU inference in its official code (one process per "
                               f"case): gpus={n} cannot be honoured; drop gpus= (one GPU per case) and spread cases "
                               "over GPUs with accelerate launch or --launcher slurm instead")
        return n

    def load(self, device: str = "cpu", dtype: str | None = None) -> None:
        self._paths = check_checkout(self.info.name, self.repo_spec, self.model_args)

    def provenance(self) -> dict | None:
        """The checkout that ran (path, commit, whether it is the pinned one, the patch version) and the weights
        (path; the Hub revision when ``worldgate setup`` downloaded them)."""
        if self._paths is None:
            return None
        spec, repo = self.repo_spec, self._paths["repo"]
        try:
            head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True,
                                  timeout=10).stdout.strip() or None
        except (OSError, subprocess.SubprocessError):
            head = None
        weights_rev = None
        if self.model_args.get("setup"):
            weights_rev = ((read_setup(self.info.name, self.model_args["setup"]).get("weights") or {})
                           .get("revision"))
        return {"repository": spec.url, "checkout": str(repo), "commit": head, "pinned_commit": spec.commit or None,
                "at_pinned_commit": bool(head and head == spec.commit),
                "patch": spec.patch.version if spec.patch else None, "weights": str(self._paths["ckpt"]),
                "weights_revision": weights_rev, "hf_id": spec.hf_id, "gpus": self._paths.get("gpus", 1)}

    #: why the model's own flags cannot choose a context policy (cited file:line), appended to the refusal
    context_note: str = ""

    def context_support(self, name: str) -> str | None:
        return (f"{self.info.name} runs its official entry point, which applies its own cache "
                f"({', '.join(self.info.context_policies) or 'none listed'}); no context policy can be chosen from "
                "outside (drop --context)" + (f": {self.context_note}" if self.context_note else ""))

    def context_copy(self, plan: NativeInputs, policy) -> NativeInputs:
        """A copy of ``plan`` for :meth:`with_context` to change under ``policy``; a policy the model cannot run is
        refused here, with :meth:`context_support`'s reason."""
        why = self.context_support(policy.name)
        if why:
            raise AdapterError(why)
        return copy.deepcopy(plan)

    def planned_for(self, plan: NativeInputs, context) -> NativeInputs:
        """``plan`` as it runs under ``context``: generate applies the policy before it writes the plan; a plan handed
        to ``rollout`` directly gets it here."""
        return plan if "context.json" in plan.files else self.with_context(plan, context)

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
