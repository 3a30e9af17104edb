"""Reading a record's files safely: a record folder comes from disk and may have been tampered with, so every file is
checked before it is opened (a symbolic link, FIFO, device or folder is refused without opening it), opened without
following links or blocking, bounded in size, and JSON must be a UTF-8 object. generate/records.py reads through
these; nothing else opens a record's files directly.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import stat
from pathlib import Path

import numpy as np

#: a record's file names, spelled once (every reader and writer names them through these)
META = "meta.json"
TRAJECTORY = "trajectory.json"
ACTIONS = "actions.json"
CONTEXT = "context.jsonl"
TARGETS = "targets.npz"
DYNAMIC = "dynamic.json"
NATIVE = "native"
VIDEO = "video.mp4"
POSES = "poses.npy"
#: the prefix of a record being written (renamed into place when whole)
TMP_PREFIX = ".tmp-"
#: the most bytes read of one of a record's JSON files (meta.json, trajectory.json, actions.json, dynamic.json)
MAX_JSON_BYTES = 16 << 20
#: the most bytes read of one of a record's arrays (poses.npy, targets.npz)
MAX_ARRAY_BYTES = 1 << 30


class RecordError(ValueError):
    """A record file that is refused: a link, not a regular file (a FIFO, a device), too large, or malformed."""


_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def file_kind(mode: int) -> str:
    return next((what for test, what in _KINDS if test(mode)), "not a regular file")


def link_target(path: Path) -> str:
    try:
        return os.readlink(path)
    except OSError:
        return "?"


def check_record_file(path: Path, required: bool = True) -> bool:
    """Whether ``path`` (a file of a record) is there: True for a regular file, False when it is absent and not
    ``required``; :class:`RecordError` naming the file for a symbolic link or anything not a regular file (a FIFO,
    a device, a folder), which is never opened; FileNotFoundError when a required file is absent. Nothing is
    followed or opened to find out."""
    path = Path(path)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        if required:
            raise FileNotFoundError(f"{path.name} is missing") from None
        return False
    if stat.S_ISLNK(st.st_mode):
        raise RecordError(f"{path.name} is a symbolic link (to {link_target(path)}): a record's files are read only "
                          "as regular files inside its folder (copy the file in instead)")
    if not stat.S_ISREG(st.st_mode):
        raise RecordError(f"{path.name} is {file_kind(st.st_mode)}, not a regular file: a record's files are regular "
                          "files (rewrite the record)")
    return True



_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)


def read_regular_text(path: Path, limit: int) -> str:
    """The UTF-8 text of the regular file ``path``, at most ``limit`` bytes, opened without following a link and
    without blocking on a FIFO (checked again on the open descriptor): FileNotFoundError when absent, else
    :class:`RecordError` whose text starts with the path and says what it is instead (a symbolic link, a FIFO, a
    device, a folder; too large; not UTF-8), for the caller to add what to do."""
    path = Path(path)
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        raise RecordError(f"{path} is a symbolic link (to {link_target(path)}), not a regular file")
    if not stat.S_ISREG(st.st_mode):
        raise RecordError(f"{path} is {file_kind(st.st_mode)}, not a regular file")
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except OSError as e:
        raise RecordError(f"{path} could not be opened as a regular file ({e.strerror or e})") from None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise RecordError(f"{path} is not a regular file")
        data = f.read(limit + 1)
    if len(data) > limit:
        raise RecordError(f"{path} is larger than {limit >> 20} MiB")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise RecordError(f"{path} is not UTF-8 text (byte {e.start})") from None


def _open_record_file(path: Path) -> int:
    """A descriptor of a record's regular file, opened without following a link and without blocking on a FIFO that
    replaced it after the check."""
    check_record_file(path)
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except OSError:
        if os.path.islink(path):
            raise RecordError(f"{Path(path).name} is a symbolic link: a record's files are read only as regular "
                              "files inside its folder") from None
        raise
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise RecordError(f"{Path(path).name} is {file_kind(st.st_mode)}, not a regular file")
    return fd


def read_record_bytes(path: Path, limit: int = MAX_JSON_BYTES) -> bytes:
    """The bytes of a record's regular file (see :func:`check_record_file`), at most ``limit`` of them:
    :class:`RecordError` for a larger file."""
    with os.fdopen(_open_record_file(path), "rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise RecordError(f"{Path(path).name} is larger than {limit >> 20} MiB: not a file worldgate wrote")
    return data


def read_record_json(path: Path, limit: int = MAX_JSON_BYTES):
    """A record's JSON file (UTF-8); :class:`RecordError` naming the file for anything else."""
    data = read_record_bytes(path, limit)
    name = Path(path).name
    try:
        return json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise RecordError(f"{name} is not UTF-8 text (byte {e.start}): rewrite the record") from None
    except json.JSONDecodeError as e:
        raise RecordError(f"{name} is not valid JSON ({e.msg} at line {e.lineno} column {e.colno})") from None
    except RecursionError:
        raise RecordError(f"{name} is nested too deeply to be a record's JSON") from None
    except ValueError as e:  # an integer past Python's int-string conversion limit (sys.get_int_max_str_digits)
        first = (str(e).splitlines() or [type(e).__name__])[0].split(";")[0]
        raise RecordError(f"{name} holds a number too long to be a record's value ({first}): rewrite the record") \
            from None


def read_record_array(path: Path, limit: int = MAX_ARRAY_BYTES):
    """A record's ``.npy``/``.npz`` file (never unpickled); :class:`RecordError` naming the file for anything else.
    An ``.npz`` comes back as a dict of arrays."""
    data = read_record_bytes(path, limit)
    try:
        z = np.load(io.BytesIO(data), allow_pickle=False)
        if isinstance(z, np.lib.npyio.NpzFile):
            with z:
                return {k: z[k] for k in z.files}
        return z
    except (OSError, ValueError, EOFError) as e:
        raise RecordError(f"{Path(path).name} is not a readable numpy file ({type(e).__name__}: {e})") from None


def sha256_record_file(path: Path) -> str:
    """The sha256 of a record's regular file (links and FIFOs are refused, never read)."""
    h = hashlib.sha256()
    with os.fdopen(_open_record_file(path), "rb") as f:
        while True:
            b = f.read(1 << 20)
            if not b:
                break
            h.update(b)
    return h.hexdigest()


def record_member(folder: Path, name) -> Path:
    """The path of a file a record's meta.json names (a view's video or poses): a plain file name in the folder (no
    separator, no ``..``), or :class:`RecordError`."""
    if not isinstance(name, str) or not name or name in (".", "..") or any(c in name for c in "/\\\x00"):
        raise RecordError(f"meta.json names the record file {name!r}, which is not a file inside the record")
    return Path(folder) / name


