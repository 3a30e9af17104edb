"""Writing into an output folder, confined (issue 29, item 2): the one helper evaluate, report, leaderboards, export,
import and build-suite write their files through.

- Nothing is followed through a link below the output folder: every folder component is opened relative to the one
  above with ``O_NOFOLLOW`` (a folder that is a link, or not a folder, is an :class:`OutputError` naming it).
- Every file is written to a temporary name in its own folder and ``os.replace``-d into place, so a reader (or an
  interrupted run) sees the previous file or the new one, never half of one.
- A target that is a link is never written through: by default it is refused (:class:`OutputError` naming it and
  its target); ``replace_links=True`` replaces the link itself (its target untouched), as export does for a
  delivery it owns.
- :meth:`OutputFolder.finish` records what was written in ``.worldgate-outputs.json`` and removes the files a previous
  run of the same writer listed there and did not write again; nothing else in the folder is ever removed.

The output folder itself is taken as the user gave it (it may be a link they chose); only what is below it is guarded.
"""

from __future__ import annotations

import errno
import json
import os
import stat
import uuid
from pathlib import Path
from typing import Callable

#: the manifest of what a writer put in a folder (so a reused folder can be cleaned of its own old outputs only)
MANIFEST = ".worldgate-outputs.json"
MAX_MANIFEST_BYTES = 4 << 20
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | _CLOEXEC
_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | _CLOEXEC
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | _CLOEXEC


class OutputError(OSError):
    """A path below an output folder is a link or not what a writer may write (the message names it)."""

    def __str__(self) -> str:
        return self.strerror or super().__str__()


def _parts(rel) -> tuple[str, ...]:
    parts = tuple(str(rel).split("/")) if not isinstance(rel, Path) else rel.parts
    if not parts or any(p in ("", ".", "..", "/") or "/" in p or "\0" in p for p in parts):
        raise OutputError(errno.EINVAL, f"{rel!s} is not a file name inside the output folder")
    return parts


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device")):
        if test(mode):
            return name
    return "not a regular file"


def open_real_dir(parent_fd: int, name: str, create: bool = False) -> int:
    """A descriptor of the real folder ``name`` inside the folder ``parent_fd`` (made first where ``create``), never
    opened through a link: a link or a non-folder there raises :class:`OSError` with errno ELOOP or ENOTDIR."""
    if create:
        try:
            os.mkdir(name, 0o755, dir_fd=parent_fd)
        except FileExistsError:
            pass
    return os.open(name, _DIR, dir_fd=parent_fd)


class OutputFolder:
    """An output folder written through descriptors: ``write_bytes``/``write_text``/``copy`` a path relative to it,
    ``finish`` to record the outputs and drop the previous run's left-overs. ``tag`` names the writer in the
    manifest (a report, an export, ...): only files a writer of the same tag listed are ever removed."""

    def __init__(self, root, tag: str = "outputs", replace_links: bool = False, create: bool = True):
        self.root = Path(root)
        self.tag = tag
        self.replace_links = replace_links
        if create:
            self.root.mkdir(parents=True, exist_ok=True)
        if not self.root.is_dir():
            raise OutputError(errno.ENOTDIR, f"{self.root} is not a folder: give a folder to --out")
        self.written: list[str] = []

    # -- folders -------------------------------------------------------------------------------------------------
    def _open_dir(self, parts: tuple[str, ...], create: bool = True) -> int:
        fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | _CLOEXEC)
        try:
            for i, name in enumerate(parts):
                try:
                    nfd = open_real_dir(fd, name, create)
                except OSError as e:
                    if e.errno not in (errno.ELOOP, errno.ENOTDIR):
                        raise
                    shown = self.root.joinpath(*parts[: i + 1])
                    st = os.stat(name, dir_fd=fd, follow_symlinks=False)
                    to = f" (to {os.readlink(name, dir_fd=fd)})" if stat.S_ISLNK(st.st_mode) else ""
                    raise OutputError(e.errno, f"{shown} is {_kind(st.st_mode)}{to}, not a real folder: nothing is written through it; remove it or give another "
                                      "--out") from None
                os.close(fd)
                fd = nfd
            return fd
        except BaseException:
            os.close(fd)
            raise

    def folder(self, rel) -> Path:
        """Make the real folder ``rel`` (every component checked) and return its path."""
        os.close(self._open_dir(_parts(rel)))
        return self.root.joinpath(*_parts(rel))

    # -- files ---------------------------------------------------------------------------------------------------
    def _check_target(self, dfd: int, name: str, shown: Path) -> None:
        try:
            st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
        except FileNotFoundError:
            return
        if stat.S_ISLNK(st.st_mode):
            if self.replace_links:
                return
            raise OutputError(errno.ELOOP, f"{shown} is a symbolic link (to {os.readlink(name, dir_fd=dfd)}): nothing "
                                           "is written through a link; remove it or give another --out")
        if not stat.S_ISREG(st.st_mode):
            raise OutputError(errno.EEXIST, f"{shown} is {_kind(st.st_mode)}, not a regular file: remove it or give "
                                            "another --out")

    def write(self, rel, fill: Callable) -> Path:
        """Write ``rel`` atomically: ``fill(binary file)`` writes a temporary file in its folder (created exclusively,
        never through a link), which then replaces ``rel``."""
        parts = _parts(rel)
        shown = self.root.joinpath(*parts)
        dfd = self._open_dir(parts[:-1])
        try:
            self._check_target(dfd, parts[-1], shown)
            tmp = f".{parts[-1][:100]}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp"
            fd = os.open(tmp, _NEW, 0o644, dir_fd=dfd)
            try:
                with os.fdopen(fd, "wb") as f:
                    fill(f)
                os.replace(tmp, parts[-1], src_dir_fd=dfd, dst_dir_fd=dfd)
            except BaseException:  # a full disk or Ctrl-C leaves the previous file, never a torn one or a temporary
                try:
                    os.unlink(tmp, dir_fd=dfd)
                except OSError:
                    pass
                raise
        finally:
            os.close(dfd)
        self.written.append("/".join(parts))
        return shown

    def write_bytes(self, rel, data: bytes) -> Path:
        return self.write(rel, lambda f: f.write(data))

    def write_text(self, rel, text: str) -> Path:
        return self.write_bytes(rel, text.encode("utf-8"))

    def copy(self, src, rel, limit: int = 16 << 30) -> Path:
        """Copy the regular file ``src`` (opened without following a link or blocking on a FIFO, at most ``limit``
        bytes) to ``rel``."""
        try:
            fd = os.open(src, _READ)
        except OSError as e:
            raise OutputError(e.errno, f"{src} could not be opened as a regular file ({e.strerror or e}): it is "
                                       "not copied through a link") from None
        with os.fdopen(fd, "rb") as s:
            st = os.fstat(s.fileno())
            if not stat.S_ISREG(st.st_mode):
                raise OutputError(errno.EINVAL, f"{src} is {_kind(st.st_mode)}, not a regular file: not copied")
            if st.st_size > limit:
                raise OutputError(errno.EFBIG, f"{src} is {st.st_size} bytes, over the {limit} a file may hold here")

            def fill(f):
                n = 0
                while b := s.read(1 << 20):
                    n += len(b)
                    if n > limit:
                        raise OutputError(errno.EFBIG, f"{src} grew past {limit} bytes while being copied")
                    f.write(b)

            return self.write(rel, fill)

    # -- the folder's own outputs --------------------------------------------------------------------------------
    def previous(self) -> list[str]:
        """The files a previous writer of this tag listed in the folder's manifest (a damaged manifest: none)."""
        try:
            fd = os.open(self.root / MANIFEST, _READ)
        except OSError:
            return []
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                return []
            raw = f.read(MAX_MANIFEST_BYTES + 1)
        try:
            got = json.loads(raw.decode("utf-8")) if len(raw) <= MAX_MANIFEST_BYTES else {}
        except (UnicodeDecodeError, ValueError, RecursionError):
            return []
        files = got.get(self.tag) if isinstance(got, dict) else None
        return [f for f in files if isinstance(f, str)] if isinstance(files, list) else []

    def finish(self) -> list[str]:
        """Record this run's outputs in the manifest and remove what a previous run of this writer listed and did
        not write again (regular files or links, never followed, only inside the folder); returns those removed."""
        keep = set(self.written)
        removed = []
        for rel in self.previous():
            if rel in keep or rel == MANIFEST:
                continue
            try:
                parts = _parts(rel)
                dfd = self._open_dir(parts[:-1], create=False)
            except OSError:
                continue
            try:
                st = os.stat(parts[-1], dir_fd=dfd, follow_symlinks=False)
                if stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode):
                    os.unlink(parts[-1], dir_fd=dfd)
                    removed.append(rel)
            except OSError:
                pass
            finally:
                os.close(dfd)
        try:
            fd = os.open(self.root / MANIFEST, _READ)
            with os.fdopen(fd, "rb") as f:
                old = json.loads(f.read(MAX_MANIFEST_BYTES).decode("utf-8"))
        except (OSError, UnicodeDecodeError, ValueError, RecursionError):
            old = {}
        manifest = old if isinstance(old, dict) else {}
        manifest[self.tag] = sorted(keep)
        saved, self.replace_links = self.replace_links, True  # worldgate's own manifest: a planted link is replaced
        try:
            self.write_text(MANIFEST, json.dumps(manifest, indent=1, sort_keys=True) + "\n")
        finally:
            self.replace_links = saved
            self.written = sorted(keep)
        return removed


def write_text(root, rel, text: str, replace_links: bool = False) -> Path:
    """One file into an output folder, confined and atomic (see :class:`OutputFolder`)."""
    return OutputFolder(root, replace_links=replace_links).write_text(rel, text)


def write_bytes(root, rel, data: bytes, replace_links: bool = False) -> Path:
    return OutputFolder(root, replace_links=replace_links).write_bytes(rel, data)
