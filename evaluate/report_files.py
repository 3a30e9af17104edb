"""The report's files: what it reads of a run's records (regular files inside the run only, never a link out of it)
and how it copies media, and how run text reaches HTML (:func:`esc`, :func:`script_json`). See report.py."""

from __future__ import annotations

import hashlib
import html
import json
import logging
import math
import os
import re
import stat
from pathlib import Path

import numpy as np

from worldgate.generate.outputs import OutputFolder
from worldgate.generate.records import read_meta_reason

log = logging.getLogger("worldgate.report")


class ReportError(ValueError):
    pass


def esc(s) -> str:
    """The one place Python-side text from the runs becomes HTML (and the markdown tables, which carry HTML)."""
    return html.escape(str(s), quote=True)


def _single_component(cid) -> bool:
    """A case id that names a folder directly inside the run (no separators, not ``.`` / ``..``)."""
    return isinstance(cid, str) and cid not in ("", ".", "..") and not any(c in cid for c in "/\\\0")


def inside(path: Path, root: Path) -> bool:
    try:
        path.resolve(strict=True).relative_to(root.resolve(strict=True))
    except (OSError, ValueError, RuntimeError):
        return False
    return True


def record_dir(run: Path, cid) -> Path | None:
    """``run/cid`` when it is a real folder inside the run; None (warned) when it is a link or points out of it."""
    if not _single_component(cid):
        log.warning("case id %r of %s is not a folder name; its record files are not read", cid, run)
        return None
    rec = run / cid
    if not os.path.lexists(rec):
        return None
    if rec.is_symlink() or not rec.is_dir() or not inside(rec, run):
        log.warning("skipped record folder %s: a symbolic link or not a folder inside the run "
                    "(the report never follows links out of a run)", rec)
        return None
    return rec


def record_file(run: Path, rec: Path | None, name: str, notes: list | None = None) -> Path | None:
    """``rec/name`` when it is a regular file inside the run; None when absent, and None with a warning naming the
    file (and a note for the page) when it is a symbolic link, not a regular file, or resolves outside the run."""
    if rec is None:
        return None
    p = rec / name
    if not os.path.lexists(p):
        return None
    if p.is_symlink() or not p.is_file() or not inside(p, rec) or not inside(p, run):
        log.warning("skipped %s: a symbolic link or not a regular file inside its run folder %s "
                    "(the report never follows links out of a run)", p, run)
        if notes is not None:
            notes.append(f"{name} skipped: a symbolic link or not a regular file inside the run")
        return None
    return p


def slug(s, limit: int = 80) -> str:
    """A file name for media/ that means the same in a URL and on every file system (no ``#``, ``?``, ``/``, ``%``);
    a name that had to change gets a short hash of the original so two names cannot collide."""
    s = str(s)
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", s)[:limit]
    if safe != s or safe.startswith("."):
        safe = safe.lstrip(".") + "-" + hashlib.sha1(s.encode("utf-8", "surrogatepass")).hexdigest()[:10]
    return safe


_OPEN = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)


class _NotPublished(Exception):
    """Raised inside a copy to abandon it (the confined writer then removes its temporary file)."""


def publish(src: Path, dst: Path, want: str | None = None, folder: OutputFolder | None = None) -> str | None:
    """Copy ``src`` to ``dst`` (never a hard link: the report's media are its own, so editing them never edits the
    run) through the report's confined writer ``folder`` (default: one at ``dst``'s folder): atomic, never through a
    link planted in the report folder (such a link is an :class:`OutputError` naming it); never follows a link at
    ``src``. The copy is hashed as it is made: with ``want`` (the sha256 the record's meta.json records) a file whose
    content differs is not published; without one, a file with other hard links is not either (it may be any file of
    the machine linked in). Returns None when published, else why not."""
    folder = folder if folder is not None else OutputFolder(dst.parent, tag="report")
    rel = Path(dst).relative_to(folder.root)
    try:
        fd = os.open(src, _OPEN)
    except OSError as e:
        return f"could not be opened as a regular file ({e.strerror or e})"
    h = hashlib.sha256()
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            return "not a regular file"
        if want is None and st.st_nlink > 1:
            return (f"it has {st.st_nlink} hard links and meta.json records no sha256 to check it against (it may be "
                    "any file linked into the record)")

        def fill(g):
            for b in iter(lambda: f.read(1 << 20), b""):
                h.update(b)
                g.write(b)
            got = h.hexdigest()
            if want is not None and got != want:
                raise _NotPublished(f"its content is not the record's video (sha256 {got[:12]}..., meta.json records "
                                    f"{want[:12]}...): restore the record's video or regenerate the record")

        try:
            folder.write(rel, fill)
        except _NotPublished as e:
            return str(e)
    return None


def recorded_sha(rec: Path, name: str) -> str | None:
    """The sha256 the record's meta.json records for its file ``name`` (read safely), or None."""
    meta, _ = read_meta_reason(rec)
    entry = ((meta or {}).get("files") or {}).get(name) if isinstance((meta or {}).get("files"), dict) else None
    sha = entry.get("sha256") if isinstance(entry, dict) else None
    return sha if isinstance(sha, str) and re.fullmatch(r"[0-9a-f]{64}", sha) else None


def finite_json(x):
    """JSON the browser can parse: non-finite numbers become null (JSON has no NaN)."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {str(k): finite_json(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [finite_json(v) for v in x]
    return x


def script_json(data) -> str:
    """JSON to embed in a ``<script type="application/json">``: no string in it can end the script or open a comment
    (``<``, ``>``, ``&`` and the JS line separators as \\u escapes; JSON.parse reads them back unchanged)."""
    s = json.dumps(finite_json(data), allow_nan=False)
    for c, e in (("&", "\\u0026"), ("<", "\\u003c"), (">", "\\u003e"), ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        s = s.replace(c, e)
    return s


def trajectory(run: Path, rec: Path | None) -> dict | None:
    tjp, pp = record_file(run, rec, "trajectory.json"), record_file(run, rec, "poses.npy")
    if tjp is None or pp is None:
        return None
    try:
        tj = json.loads(tjp.read_text())
        poses = np.load(pp, allow_pickle=False).astype(float)
        return {
            "fps": float(tj["fps"]), "n_frames": int(tj["n_frames"]),
            "xz": np.round(poses[:, [0, 2], 3], 3).tolist(),
            "yaw": np.round(np.degrees(np.arctan2(poses[:, 0, 2], poses[:, 2, 2])), 2).tolist(),
            "segments": [{"label": seg_label(x), "frames": [int(f) for f in x["frames"][:2]]} for x in tj["segments"]],
            "phases": [{"name": str(p["name"]), "frames": [int(f) for f in p["frames"][:2]]} for p in tj["phases"]],
        }
    except (OSError, ValueError, KeyError, TypeError, IndexError) as e:
        log.warning("skipped the commanded path of %s: %s", rec, e)
        return None


def prompt(run: Path, rec: Path | None) -> str | None:
    mp = record_file(run, rec, "meta.json")
    if mp is None:
        return None
    try:
        p = (json.loads(mp.read_text()).get("case") or {}).get("prompt")
    except (OSError, ValueError, AttributeError):
        return None
    return None if p is None else str(p)


def link_video(run: Path, rec: Path | None, name: str, base: Path, out, notes: list) -> str | None:
    """``rec/name`` copied as ``base.mp4`` under media/ (its path relative to ``out``, the report folder or its
    :class:`OutputFolder`), or None when the record has no such regular file inside the run or the file is not the
    record's own (:func:`publish`; a note says why)."""
    src = record_file(run, rec, name, notes)
    if src is None:
        return None
    folder = out if isinstance(out, OutputFolder) else OutputFolder(out, tag="report")
    dst = base.with_name(base.name + ".mp4")
    why = publish(src, dst, recorded_sha(rec, name), folder)
    if why:
        log.warning("skipped %s: %s", src, why)
        notes.append(f"{name} skipped: {why}")
        return None
    return dst.relative_to(folder.root).as_posix()


def seg_label(seg) -> str:
    parts = [str(v) for v in (seg["move"], seg["look"]) if v != "idle"]
    return "+".join(parts) or "hold"


__all__ = ["ReportError", "esc", "inside", "record_dir", "record_file", "slug", "publish", "recorded_sha",
           "finite_json", "script_json", "trajectory", "prompt", "link_video", "seg_label"]
