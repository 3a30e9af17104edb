"""The files of a WorldMark delivery, read and written safely: the delivery's names (the format, the sidecar folder,
MODEL tags), the bounds of what a record's files may hold, and the copies that read only regular files (never through
a link, never blocking on a FIFO) into real folders (a planted link is replaced, never written through). Shared by
export (:mod:`.worldmark_export`) and import (:mod:`.interop`).
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

from .record_files import MAX_ARRAY_BYTES, MAX_JSON_BYTES, file_kind, link_target

FORMATS = ("worldmark",)
SIDECAR = "worldgate"


class InteropError(ValueError):
    pass


class DeliveryError(InteropError):
    """The delivery folder itself cannot be written safely (a folder of it is a link or a file): the whole export stops."""


def check_format(fmt: str) -> None:
    if fmt not in FORMATS:
        raise InteropError(f"unknown delivery format {fmt!r}; known: {', '.join(FORMATS)}")


def model_tag(name: str) -> str:
    tag = re.sub(r"[^A-Z0-9]+", "_", name.upper()).strip("_")
    if not tag:
        raise InteropError(f"cannot make a WorldMark MODEL tag from {name!r}; pass --model-tag")
    return tag


#: bounds of what one record's sidecar (and one record's files at export) may hold: a file, all files, how many, how
#: deep; a manifest.jsonl's size
MAX_FILE_BYTES = MAX_ARRAY_BYTES
MAX_RECORD_BYTES = 4 << 30
MAX_RECORD_FILES = 10_000
MAX_RECORD_DEPTH = 8
MAX_MANIFEST_BYTES = 4 * MAX_JSON_BYTES
#: the largest video import copies (a 10-minute rollout at 1280x704 is well under 1 GiB)
MAX_VIDEO_BYTES = 16 << 30
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)


def not_regular(path: Path, shown, st) -> str | None:
    """Why ``path`` (lstat ``st``; ``shown`` names it in messages) is not a plain regular file, or None."""
    if stat.S_ISLNK(st.st_mode):
        return (f"{shown} is a symbolic link (to {link_target(path)}): deliveries and records are read only as "
                "regular files inside their folder, never through a link (copy the file in instead)")
    if not stat.S_ISREG(st.st_mode):
        return f"{shown} is {file_kind(st.st_mode)}, not a regular file: only regular files are read (remove it)"
    return None


def check_regular(path: Path, shown=None) -> os.stat_result:
    """The lstat of ``path`` when it is a regular file (never followed, never opened); :class:`InteropError` naming it
    (``shown``, default the path) for a symbolic link, a FIFO, a device, a socket or a folder."""
    shown = path if shown is None else shown
    st = os.lstat(path)
    why = not_regular(path, shown, st)
    if why:
        raise InteropError(why)
    return st


def copy_regular(src: Path, dst: Path, shown=None, limit: int = MAX_FILE_BYTES) -> int:
    """Copy the regular file ``src`` to the new file ``dst``: opened without following a link and without blocking on
    a FIFO (checked again on the open descriptor), at most ``limit`` bytes; returns the bytes copied. Never a hard
    link (the copy is the destination's own)."""
    shown = src if shown is None else shown
    check_regular(src, shown)
    try:
        fd = os.open(src, _OPEN_FLAGS)
    except OSError as e:
        raise InteropError(f"{shown} could not be opened as a regular file ({e.strerror or e})") from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise InteropError(f"{shown} is {file_kind(st.st_mode)}, not a regular file (it changed while being read)")
        if st.st_size > limit:
            raise InteropError(f"{shown} is {st.st_size} bytes, over the {limit >> 20} MiB a file may hold here")
        n = 0
        with open(dst, "xb") as g:
            while True:
                b = f.read(1 << 20)
                if not b:
                    break
                n += len(b)
                if n > limit:
                    raise InteropError(f"{shown} grew past {limit >> 20} MiB while being copied")
                g.write(b)
    return n


def scan_tree(src: Path, shown: str, prefix: tuple = (), seen: list | None = None) -> list[tuple]:
    """The relative paths (tuples of names) of every regular file below the real folder ``src``; anything else there
    (a symbolic link, a FIFO, a device, a socket) or too much (files, depth) is an :class:`InteropError` naming it."""
    seen = [] if seen is None else seen
    if not prefix:
        st = os.lstat(src)
        if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
            raise InteropError(f"{shown} is {'a symbolic link' if stat.S_ISLNK(st.st_mode) else file_kind(st.st_mode)}, "
                               "not a real folder: folders are read only as real folders, never through a link")
    if len(prefix) > MAX_RECORD_DEPTH:
        raise InteropError(f"{shown} is nested more than {MAX_RECORD_DEPTH} folders deep: not a worldgate record")
    with os.scandir(src.joinpath(*prefix)) as it:
        entries = sorted(it, key=lambda e: e.name)
    for e in entries:
        rel = (*prefix, e.name)
        st = e.stat(follow_symlinks=False)
        if stat.S_ISDIR(st.st_mode):
            scan_tree(src, shown, rel, seen)
            continue
        why = not_regular(Path(e.path), "/".join((shown, *rel)), st)
        if why:
            raise InteropError(why)
        seen.append(rel)
        if len(seen) > MAX_RECORD_FILES:
            raise InteropError(f"{shown} holds more than {MAX_RECORD_FILES} files: not a worldgate record")
    return seen


def copy_tree_regular(src: Path, dst: Path, shown: str, skip=()) -> list[tuple]:
    """Copy the real folder ``src`` into ``dst``: regular files only, nothing followed (a symbolic link, FIFO, device
    or socket anywhere below is refused, naming it, before anything is copied), sizes bounded (:data:`MAX_FILE_BYTES`
    a file, :data:`MAX_RECORD_BYTES` in all); ``skip``: top-level names left out. Returns the files copied."""
    files = [f for f in scan_tree(src, shown) if f[0] not in skip]
    total = 0
    for rel in files:
        d = dst.joinpath(*rel)
        d.parent.mkdir(parents=True, exist_ok=True)
        total += copy_regular(src.joinpath(*rel), d, "/".join((shown, *rel)))
        if total > MAX_RECORD_BYTES:
            raise InteropError(f"{shown} holds more than {MAX_RECORD_BYTES >> 30} GiB: not a worldgate record")
    return files


def real_dir(root: Path, rel: Path, create: bool = True) -> Path:
    """``root / rel`` as a real folder inside ``root``: every component below ``root`` is created where missing and
    must be a folder, not a symbolic link (:class:`InteropError` naming it: export never writes through a link)."""
    p = root
    for part in rel.parts:
        if part in ("", ".", "..") or "/" in part:
            raise InteropError(f"{rel} is not a folder name inside {root}")
        p = p / part
        try:
            st = os.lstat(p)
        except FileNotFoundError:
            if not create:
                return root.joinpath(*rel.parts)
            p.mkdir()
            continue
        if stat.S_ISLNK(st.st_mode):
            raise DeliveryError(f"{p} is a symbolic link (to {link_target(p)}): export writes only into real folders "
                                "inside the delivery; remove the link (or give another --out) and export again")
        if not stat.S_ISDIR(st.st_mode):
            raise DeliveryError(f"{p} is {file_kind(st.st_mode)}, not a folder: remove it or give another --out")
    return p


def replace_file(dst: Path, write) -> None:
    """Write a new file at ``dst`` through a temporary name and rename it into place: whatever ``dst`` was (a stale
    file, a planted link) is replaced, never written through."""
    tmp = dst.with_name(f".{dst.name}.{os.getpid()}.tmp")
    if os.path.lexists(tmp):
        tmp.unlink()
    try:
        write(tmp)
        os.replace(tmp, dst)
    except BaseException:
        if os.path.lexists(tmp):
            tmp.unlink()
        raise


def link_or_copy(src: Path, dst: Path) -> None:
    """Hard-link ``src`` (a record's checked regular file) at ``dst``, or copy it where links are not possible."""

    def put(tmp):
        try:
            os.link(src, tmp, follow_symlinks=False)
        except OSError:
            copy_regular(src, tmp)

    replace_file(dst, put)
