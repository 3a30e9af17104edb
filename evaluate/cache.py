"""The run's feature cache: ``<run>/.features/<inputs digest[:20]>/<name>@<version>-<backend>.npz``.

Every cached feature carries a digest of its content (sha256 over the record's full inputs digest, the extractor's key
and every array's name, dtype, shape and bytes), stored in the ``.npz`` with it and checked on every read. A file
whose digest differs (an edited value, a copy from another record, a file of an older worldgate without one), a
damaged file (truncated, bit-flipped, not a zip), or anything that is not a regular file inside its real digest
folder is a **cache miss**: the feature is recomputed and the miss said once (a warning naming the file), never
served and never a permanent error.

``.features`` and everything under it are opened one component at a time relative to the folder above, never
following a link (``O_NOFOLLOW`` with directory descriptors), so a planted link can neither feed the cache another
file nor make ``evaluate`` write outside the run. Writes go to a temporary file in the digest folder, then
``os.replace`` it into place: a reader sees the old file or the new one, never half of one.
"""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import stat
import uuid
from pathlib import Path
from typing import Callable

import numpy as np

from worldgate.generate.outputs import open_real_dir

log = logging.getLogger("worldgate.evaluate")

#: the array inside each cached .npz that holds the digest of the others
DIGEST_KEY = "__worldgate_sha256__"
#: a cached feature larger than this (on disk, or unpacked) is not read: a miss
MAX_CACHE_BYTES = 4 << 30
_DIGEST_SALT = b"worldgate-feature-cache/1\0"
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
_WRITE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


class CacheRefused(OSError):
    """A component of the cache's path is a link or not what it should be."""


def content_digest(inputs: str, key: str, arrays: dict) -> str:
    """sha256 of a cached feature: the record's inputs digest, the extractor key and every array (name, dtype, shape,
    bytes in C order), names sorted, so the same content always has the same digest wherever it was written."""
    h = hashlib.sha256(_DIGEST_SALT)
    h.update(f"{inputs}\0{key}\0".encode())
    for name in sorted(arrays):
        a = np.ascontiguousarray(np.asarray(arrays[name]))
        h.update(f"{name}\0{a.dtype.str}\0{a.shape}\0".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def open_dir(parent_fd: int, name: str, create: bool = False) -> int:
    """A descriptor of the real folder ``name`` inside ``parent_fd`` (created where asked); a link, or anything not a
    folder, is :class:`CacheRefused`."""
    try:
        return open_real_dir(parent_fd, name, create)
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.ENOTDIR):
            raise CacheRefused(e.errno, f"{name} is a symbolic link or not a folder") from None
        raise


def write_file_at(dir_fd: int, name: str, write: Callable) -> None:
    """Write ``name`` inside the folder ``dir_fd`` atomically: ``write(binary file)`` fills a temporary file created
    there (exclusively, never through a link), which then replaces ``name`` (a link planted at ``name`` is replaced
    itself, its target untouched)."""
    tmp = f".{name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp"
    fd = os.open(tmp, _WRITE_FLAGS, 0o644, dir_fd=dir_fd)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:  # a full disk or Ctrl-C must leave neither a torn temporary nor a torn cache file
        try:
            os.unlink(tmp, dir_fd=dir_fd)
        except OSError:
            pass
        raise


class FeatureCache:
    """Digest-checked, link-free, atomically written feature store under ``root`` (a run's ``.features``).

    ``digest(rec)``: the record's inputs digest where ``rec.input_digest`` is not already set.
    ``misses``: one line per cache file that was present but not served (and why), each said once."""

    def __init__(self, root: Path, digest: Callable | None = None):
        self.root = Path(root)
        self.digest = digest
        self.misses: list[str] = []
        self.missed: dict[str, tuple[str, str]] = {}  # file -> ("legacy" | "damaged", why)
        self._said: set = set()

    def _inputs(self, rec) -> str:
        if not rec.input_digest:
            if self.digest is None:
                raise ValueError("the record has no inputs digest and this cache was given no way to compute one")
            rec.input_digest = self.digest(rec)
        return rec.input_digest

    def path(self, rec, ex) -> Path:
        """``<root>/<inputs digest[:20]>/<name>@<version>-<backend>.npz``: a record's every input and the extractor."""
        return self.root / self._inputs(rec)[:20] / f"{ex.key()}.npz"

    def _say(self, p: Path, why: str, legacy: bool = False) -> None:
        """Record a miss. A file an older worldgate wrote (no digest) is counted and said in ONE line per cache (a
        whole run of them is expected once after an upgrade); any other miss is a warning naming the file."""
        if (str(p), why) not in self._said:
            self._said.add((str(p), why))
            line = f"{p}: {why}; not served (evaluate recomputes it)"
            self.misses.append(line)
            self.missed[str(p)] = ("legacy" if legacy else "damaged", why)
            if not legacy:
                log.warning("feature cache miss: %s", line)
            elif sum(k == "legacy" for k, _ in self.missed.values()) == 1:
                log.warning("feature cache: files written by an older worldgate carry no content digest and are "
                            "recomputed (first: %s); the run's results count them", p)

    def summary(self) -> str | None:
        """One line for the run's results: how many cache files were not served and why, or None."""
        if not self.missed:
            return None
        legacy = sum(k == "legacy" for k, _ in self.missed.values())
        parts = ([f"{legacy} written by an older worldgate (no content digest)"] if legacy else []) + (
            [f"{len(self.missed) - legacy} damaged, edited, another record's or not regular files"]
            if len(self.missed) > legacy else [])
        return (f"feature cache: {len(self.missed)} cached file(s) not served ({'; '.join(parts)}): recomputed, "
                "never served as computed")

    def why_not_served(self, rec) -> list[str]:
        """Each cache file of ``rec`` that was present but not served, as 'legacy cache FILE' / 'damaged cache
        FILE (why)' (for --rescore's error)."""
        folder = str(self.path_folder(rec))
        return [f"{'legacy' if kind == 'legacy' else 'damaged'} cache {p} ({why})"
                for p, (kind, why) in self.missed.items() if p.startswith(folder + os.sep)]

    def path_folder(self, rec) -> Path:
        return self.root / self._inputs(rec)[:20]

    def _open_root(self, create: bool) -> int:
        """A descriptor of the real ``root`` folder (its parent is the run, opened as given)."""
        if create:
            self.root.parent.mkdir(parents=True, exist_ok=True)
        parent = os.open(self.root.parent, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
        try:
            return open_dir(parent, self.root.name, create=create)
        finally:
            os.close(parent)

    def get(self, rec, ex) -> dict[str, np.ndarray] | None:
        """The cached arrays, or None (a miss): absent, or present but not provably this record's, this extractor's
        and intact (said once)."""
        p = self.path(rec, ex)
        try:
            root = self._open_root(create=False)
        except FileNotFoundError:
            return None
        except CacheRefused as e:
            self._say(self.root, f"{e.strerror}: features are neither read nor cached there (remove it to cache them)")
            return None
        fds = [root]
        try:
            fds.append(open_dir(root, p.parent.name))
            fd = os.open(p.name, _READ_FLAGS, dir_fd=fds[-1])
        except FileNotFoundError:
            return None
        except OSError as e:
            if len(fds) == 1:
                self._say(p.parent, f"not read ({e.strerror or e}): the digest folder is a link or not a folder")
            else:
                self._say(p, f"not read ({e.strerror or e}): a link or not a regular file inside its digest folder")
            return None
        finally:
            for d in fds:
                os.close(d)
        try:
            return self._load(fd, p, self._inputs(rec), ex.key())
        finally:
            os.close(fd)

    def _load(self, fd: int, p: Path, inputs: str, key: str) -> dict | None:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            self._say(p, "not a regular file")
            return None
        if st.st_size > MAX_CACHE_BYTES:
            self._say(p, f"{st.st_size} bytes, over the cache's {MAX_CACHE_BYTES}")
            return None
        try:
            with os.fdopen(os.dup(fd), "rb") as f, np.load(f, allow_pickle=False) as z:
                if sum(i.file_size for i in z.zip.infolist()) > MAX_CACHE_BYTES:
                    self._say(p, f"unpacks to over {MAX_CACHE_BYTES} bytes")
                    return None
                data = {k: z[k] for k in z.files}
        # any failure to parse (BadZipFile, a truncated member, a bad .npy header, zlib, pickled objects, ...) is a
        # miss that is recomputed: a cache file is never a permanent error
        except Exception as e:  # noqa: BLE001
            self._say(p, f"damaged ({type(e).__name__}: {(str(e).splitlines() or [''])[0][:200]})")
            return None
        stored = data.pop(DIGEST_KEY, None)
        if stored is None or stored.shape != () or stored.dtype.kind != "U":
            self._say(p, "carries no content digest (written by an older worldgate, or by hand)", legacy=True)
            return None
        if str(stored) != content_digest(inputs, key, data):
            self._say(p, "its content does not match its digest (edited, damaged, or another record's)")
            return None
        return data

    def put(self, rec, ex, data: dict[str, np.ndarray]) -> None:
        """Store ``data`` with its digest, atomically; a ``.features`` that is a link is not written through (said
        once, nothing cached); a digest folder that is a link is replaced by a real folder (the link's target is
        never touched)."""
        p = self.path(rec, ex)
        inputs = self._inputs(rec)
        arrays = {k: np.asarray(v) for k, v in data.items()}
        if DIGEST_KEY in arrays:
            raise ValueError(f"feature {ex.key()}: {DIGEST_KEY!r} is reserved for the cache")
        arrays[DIGEST_KEY] = np.array(content_digest(inputs, ex.key(), arrays))
        try:
            root = self._open_root(create=True)
        except CacheRefused as e:
            self._say(self.root, f"{e.strerror}: features are neither read nor cached there (remove it to cache them)")
            return
        try:
            try:
                d = open_dir(root, p.parent.name, create=True)
            except CacheRefused:
                os.unlink(p.parent.name, dir_fd=root)  # a planted link in worldgate's own folder: only the link goes
                d = open_dir(root, p.parent.name, create=True)
        finally:
            os.close(root)
        try:
            write_file_at(d, p.name, lambda f: np.savez(f, **arrays))
            try:
                st = os.stat("record.json", dir_fd=d, follow_symlinks=False)
                ok = stat.S_ISREG(st.st_mode)
            except FileNotFoundError:
                ok = False
            if not ok:
                info = json.dumps({"record": str(rec.dir), "video_sha256": rec.content_hash, "inputs_sha256": inputs})
                write_file_at(d, "record.json", lambda f: f.write(info.encode()))
        finally:
            os.close(d)
