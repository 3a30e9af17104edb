"""Publishing scored runs: ``--push-to-hub REPO_ID`` (a Hugging Face dataset repository, through huggingface_hub)
and ``--log wandb|trackio`` (an experiment tracker, through its own client), on ``evaluate`` and on ``report``.

What goes up (:func:`collect`): each run's ``results.json`` and ``samples.jsonl`` under ``runs/<run>/``, the report
folder under ``report/`` (``report --push-to-hub``), and the rollout videos (``runs/<run>/<case>/video*.mp4``, and
the report's copies under ``report/media/``) only with ``--with-videos``. Links, FIFOs and anything that is not a
regular file are never uploaded.

Credentials are the tools' own: huggingface_hub's token store (``hf auth login``) or ``HF_TOKEN``; wandb's
``wandb login`` / ``WANDB_API_KEY``; trackio's own configuration. worldgate neither asks for nor stores a key.

Offline modes: with ``HF_HUB_OFFLINE=1`` the push uploads nothing and writes what it would upload into a staged folder
(``hub-staged/<owner>__<name>/``: the files under their repository paths and ``manifest.json`` with each path, size
and sha256); ``WANDB_MODE=offline`` makes wandb write its offline run folder (``wandb sync`` uploads it later);
trackio logs to its local database unless told of a Space.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path

from worldgate.evaluate.report import read_results

REPO_TYPE = "dataset"
STAGED = Path("hub-staged")  # where HF_HUB_OFFLINE=1 writes what it would upload (relative to the current folder)
MANIFEST = "manifest.json"
RESULT_FILES = ("results.json", "samples.jsonl")
VIDEO_GLOB = "video*.mp4"
VIDEO_SUFFIXES = (".mp4", ".webm", ".mkv", ".avi", ".mov", ".gif")  # the report's media/ copies too
MAX_FILES = 100_000  # files in one push
TRACKERS = ("wandb", "trackio")
INSTALL = "pip install 'worldgate[publish]'"


class PublishError(ValueError):
    """Nothing could be published; the message says why and what to do."""


@dataclass(frozen=True)
class Upload:
    path_in_repo: str
    local: Path
    size: int
    sha256: str


def _regular(p: Path) -> bool:
    try:
        return stat.S_ISREG(os.lstat(p).st_mode)
    except OSError:
        return False


def _upload(path_in_repo: str, local: Path) -> Upload:
    h = hashlib.sha256()
    with open(local, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return Upload(path_in_repo, local, local.stat().st_size, h.hexdigest())


def _tree(root: Path, prefix: str, skip: tuple[Path, ...] = (), videos: bool = False) -> list[Upload]:
    """Every regular file under ``root`` (links not followed), as ``prefix/relative/path``; videos (VIDEO_SUFFIXES)
    only with ``videos``."""
    out = []
    for top, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not (Path(top) / d).is_symlink() and Path(top) / d not in skip)
        for f in sorted(files):
            p = Path(top) / f
            if _regular(p) and (videos or p.suffix.lower() not in VIDEO_SUFFIXES):
                out.append(_upload(f"{prefix}/{p.relative_to(root).as_posix()}", p))
    return out


def collect(runs: list[str | Path], report: str | Path | None = None, with_videos: bool = False) -> list[Upload]:
    """What a push uploads, in repository paths (see the module docstring)."""
    uploads: list[Upload] = []
    names = [Path(r).resolve().name for r in runs]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise PublishError(f"runs {dup} share a folder name, and a run's name is its folder in the repository "
                           "(runs/<name>/): push them separately or rename one")
    for run, name in zip(map(Path, runs), names):
        for f in RESULT_FILES:
            if not _regular(run / f):
                raise PublishError(f"{run} has no {f} (a regular file) to push: score it first with "
                                   f"`worldgate evaluate {run}`")
            uploads.append(_upload(f"runs/{name}/{f}", run / f))
        if with_videos:
            for rec in sorted(p for p in run.iterdir() if p.is_dir() and not p.is_symlink()):
                uploads += [_upload(f"runs/{name}/{rec.name}/{v.name}", v) for v in sorted(rec.glob(VIDEO_GLOB))
                            if _regular(v)]
    if report is not None:
        uploads += _tree(Path(report), "report", skip=(Path(report) / STAGED,), videos=with_videos)
    if len(uploads) > MAX_FILES:
        raise PublishError(f"{len(uploads)} files is more than one push takes (MAX_FILES = {MAX_FILES})")
    return uploads


def hub_offline() -> bool:
    """huggingface_hub's own offline switch (``HF_HUB_OFFLINE``), read now rather than at its import."""
    from huggingface_hub import constants  # noqa: PLC0415 (an optional package: imported where it is needed)

    return bool(constants.HF_HUB_OFFLINE) or os.environ.get("HF_HUB_OFFLINE", "").strip().upper() in (
        "1", "ON", "YES", "TRUE")


def check_repo_id(repo_id: str) -> str:
    """``OWNER/NAME`` as the Hub takes it (huggingface_hub's own check); also a safe folder name for the stage."""
    try:
        from huggingface_hub.utils import HFValidationError, validate_repo_id  # noqa: PLC0415 (optional package)
    except ImportError:
        raise PublishError(f"--push-to-hub needs huggingface_hub: {INSTALL}") from None
    try:
        validate_repo_id(repo_id)
    except HFValidationError as e:
        raise PublishError(f"--push-to-hub {repo_id!r}: not a repository id ({e})") from None
    if repo_id.count("/") != 1:
        raise PublishError(f"--push-to-hub {repo_id!r}: give OWNER/NAME (a user or an organisation, then the name)")
    return repo_id


def tracker_client(tracker: str):
    """The tracker's own client module (wandb or trackio)."""
    if tracker not in TRACKERS:
        raise PublishError(f"--log {tracker!r}: known are {', '.join(TRACKERS)}")
    try:
        return importlib.import_module(tracker)
    except ImportError:
        raise PublishError(f"--log {tracker} needs the {tracker} package: {INSTALL}") from None


def push_to_hub(repo_id: str, uploads: list[Upload], private: bool = False, message: str | None = None) -> dict:
    """Upload ``uploads`` to the dataset repository ``repo_id`` in one commit (created if absent), or with
    HF_HUB_OFFLINE=1 stage them and write the manifest; returns ``{"staged": folder}`` or ``{"url": commit URL}``."""
    check_repo_id(repo_id)
    from huggingface_hub import CommitOperationAdd, HfApi  # noqa: PLC0415 (optional: the publish extra)

    message = message or f"worldgate: {len(uploads)} files"
    if hub_offline():
        return {"staged": stage(repo_id, uploads, message)}
    api = HfApi()  # the token from huggingface_hub's own store or HF_TOKEN
    api.create_repo(repo_id, repo_type=REPO_TYPE, private=private, exist_ok=True)
    info = api.create_commit(repo_id, [CommitOperationAdd(u.path_in_repo, str(u.local)) for u in uploads],
                             commit_message=message, repo_type=REPO_TYPE)
    return {"url": str(getattr(info, "commit_url", info))}


def stage(repo_id: str, uploads: list[Upload], message: str) -> Path:
    """What a push would upload: ``STAGED/<owner>__<name>/`` holding the files under their repository paths and
    ``manifest.json`` (repository, type, commit message, each file's path, size and sha256); replaced whole."""
    root = STAGED / repo_id.replace("/", "__")
    if root.exists():
        shutil.rmtree(root)
    for u in uploads:
        dest = root / "files" / u.path_in_repo
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(u.local, dest)
    manifest = {"repo_id": repo_id, "repo_type": REPO_TYPE, "commit_message": message, "uploaded": False,
                "why": "HF_HUB_OFFLINE is set: nothing was uploaded; unset it and run the command again to push",
                "files": [{"path": u.path_in_repo, "size": u.size, "sha256": u.sha256} for u in uploads],
                "bytes": sum(u.size for u in uploads)}
    (root / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    return root


def summary(results: dict) -> dict[str, float]:
    """A run's numbers for a tracker: ``<metric>`` (the mean) and ``<metric>/coverage`` of every available metric,
    and ``records``."""
    out: dict[str, float] = {"records": float(results.get("records") or 0)}
    for mid, m in sorted((results.get("metrics") or {}).items()):
        if m and m.get("mean") is not None:
            out[mid] = float(m["mean"])
            out[f"{mid}/coverage"] = float(m.get("coverage") or 0.0)
    return out


def log_runs(tracker: str, runs: list[str | Path], project: str = "worldgate") -> list[str]:
    """Log each scored run to ``tracker`` (wandb or trackio) as one tracker run named after the run folder: its
    config and the numbers of :func:`summary`; returns what was logged, one line a run."""
    client = tracker_client(tracker)
    lines = []
    for run in map(Path, runs):
        res = read_results(run)
        numbers, config = summary(res), dict(res.get("config") or {}, run=str(run), git=res.get("git"))
        if tracker == "wandb":
            r = client.init(project=project, name=run.name, config=config, job_type="evaluate")
            r.log(numbers)
            r.summary.update(numbers)
            where = getattr(r, "dir", "")
            r.finish()
        else:
            client.init(project=project, name=run.name, config=config)
            client.log(numbers)
            client.finish()
            where = "trackio's local store"
        lines.append(f"{tracker}: {run.name}: {len(numbers)} numbers -> {where}")
    return lines


def add_args(p) -> None:
    """The publishing options of ``evaluate`` and ``report``."""
    p.add_argument("--push-to-hub", metavar="REPO_ID", help="upload results.json, samples.jsonl (and with `report` "
                   "the report) to this Hugging Face dataset repository, with huggingface_hub's own token; "
                   "HF_HUB_OFFLINE=1 writes hub-staged/ (files + manifest.json) instead")
    p.add_argument("--with-videos", action="store_true", help="with --push-to-hub: the rollout videos too")
    p.add_argument("--private", action="store_true", help="with --push-to-hub: create the repository private")
    p.add_argument("--log", choices=TRACKERS, help="log each run's config and scores to wandb or trackio (their own "
                                                   "login; WANDB_MODE=offline writes wandb's offline run folder)")
    p.add_argument("--log-project", default="worldgate", help="the tracker's project (default: worldgate)")


def check_args(a) -> None:
    """The publishing options checked before any work: a repository id, the clients they need."""
    if getattr(a, "with_videos", False) and not getattr(a, "push_to_hub", None):
        raise PublishError("--with-videos goes with --push-to-hub REPO_ID")
    if getattr(a, "push_to_hub", None):
        check_repo_id(a.push_to_hub)
    if getattr(a, "log", None):
        tracker_client(a.log)


def publish(a, runs: list[str | Path], report: str | Path | None = None) -> None:
    """After ``evaluate`` or ``report``: the push and the tracker runs the options ask for, each reported in a line."""
    check_args(a)
    if getattr(a, "push_to_hub", None):
        uploads = collect(runs, report=report, with_videos=a.with_videos)
        r = push_to_hub(a.push_to_hub, uploads, private=a.private)
        size = sum(u.size for u in uploads)
        if "staged" in r:
            print(f"HF_HUB_OFFLINE: {len(uploads)} files ({size} bytes) not uploaded to {a.push_to_hub}; staged in "
                  f"{r['staged']} with {MANIFEST}")
        else:
            print(f"pushed {len(uploads)} files ({size} bytes) to {a.push_to_hub}: {r['url']}")
    if getattr(a, "log", None):
        for line in log_runs(a.log, runs, project=a.log_project):
            print(line)


def after(a, runs: list[str | Path], rc: int, report: str | Path | None = None) -> int:
    """:func:`publish` once a command succeeded (``rc`` 0); returns ``rc``."""
    if rc == 0:
        publish(a, runs, report=report)
    return rc
