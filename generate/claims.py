"""Claims of a run's cases: two generators sharing one run folder never write the same case (:func:`claim_case`), and
temporary record folders and claims left by killed runs are cleaned (:func:`clean_stale_tmp`)."""

from __future__ import annotations

import errno
import json
import os
import shutil
import socket
import time
from pathlib import Path

try:  # claims need flock (POSIX); without it two generators on one folder are not kept apart
    import fcntl
except ImportError:  # pragma: no cover  (Windows)
    fcntl = None

from worldgate.trajectories.suites import check_case_id

from .record_files import TMP_PREFIX, RecordError


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def clean_stale_tmp(run_dir: Path) -> list[str]:
    """Remove temporary record folders left by killed runs (those whose process is gone) and claims no live process
    holds (:func:`claim_case`)."""
    removed = []
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        return removed
    for p in run_dir.iterdir():
        if p.name.startswith(CLAIM_PREFIX) and not p.is_symlink() and p.is_file():
            claim, _ = _take_claim(p)
            if claim is not None:
                claim.release()
                removed.append(p.name)
        elif p.is_dir() and p.name.startswith(TMP_PREFIX):
            try:
                pid = int(p.name.rsplit("-", 2)[-2])
            except (ValueError, IndexError):
                pid = -1
            if pid != os.getpid() and (pid < 0 or not _pid_alive(pid)):
                shutil.rmtree(p, ignore_errors=True)
                removed.append(p.name)
    return removed


CLAIM_PREFIX = ".claim-"


class CaseClaim:
    """This process's claim of one case of a run: the file ``run/.claim-<case>`` holding the owner's pid and host,
    locked with ``flock`` for as long as the case is being written. The lock is the claim: the kernel drops it when
    the process ends however it ends, so the claim of a dead process (kill -9, a crash) is stale and simply taken
    again; :meth:`release` (after the record is committed or aborted) unlinks the file, then unlocks it."""

    def __init__(self, path: Path, fd: int | None):
        self.path, self._fd = path, fd

    def release(self) -> None:
        if self._fd is None:
            return
        try:
            st = os.stat(self.path, follow_symlinks=False)
            if (st.st_dev, st.st_ino) == _ident(os.fstat(self._fd)):
                os.unlink(self.path)
        except OSError:
            pass
        finally:
            os.close(self._fd)
            self._fd = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()


def _ident(st) -> tuple[int, int]:
    return st.st_dev, st.st_ino


def _claim_owner(fd: int) -> str:
    try:
        who = json.loads(os.pread(fd, 4096, 0).decode("utf-8"))
        return f"process {int(who['pid'])} on {who['host']} (since {who['since']})"
    except (OSError, ValueError, KeyError, TypeError):
        return "another process"


def _take_claim(path: Path) -> tuple[CaseClaim | None, str | None]:
    """Lock the claim file ``path`` (created if missing): ``(claim, None)``, or ``(None, owner)`` while a live
    process holds it."""
    flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        try:
            fd = os.open(path, flags, 0o644)
        except OSError as e:
            if e.errno == errno.ELOOP:
                raise RecordError(f"the claim file {path} is a symbolic link: remove it and rerun") from None
            raise
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:  # a live process holds it
            owner = _claim_owner(fd)
            os.close(fd)
            return None, owner
        except OSError as e:
            os.close(fd)
            if e.errno in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS):  # no locks on this filesystem
                return CaseClaim(path, None), None
            raise
        try:  # a releasing owner unlinks before it unlocks: lock the file that is at ``path`` now, or try again
            same = _ident(os.stat(path, follow_symlinks=False)) == _ident(os.fstat(fd))
        except FileNotFoundError:
            same = False
        if same:
            return CaseClaim(path, fd), None
        os.close(fd)
    raise RecordError(f"could not take the claim {path}: it keeps being replaced")


def claim_case(run_dir: Path, case_id: str) -> tuple[CaseClaim | None, str | None]:
    """Claim ``case_id`` of the run for this process before writing its record, so that two generators on one run
    folder never write the same case: ``(claim, None)`` (release it after the record is committed or aborted), or
    ``(None, owner)`` where a live process (``owner`` says which) holds the case. A stale claim, whose process is
    gone, is taken over. Without ``flock`` (Windows) every claim succeeds."""
    check_case_id(case_id)
    path = Path(run_dir) / f"{CLAIM_PREFIX}{case_id}"
    if fcntl is None:  # pragma: no cover
        return CaseClaim(path, None), None
    claim, owner = _take_claim(path)
    if claim is not None and claim._fd is not None:
        who = json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "since": time.strftime("%Y-%m-%dT%H:%M:%S")})
        try:
            os.ftruncate(claim._fd, 0)
            os.pwrite(claim._fd, who.encode(), 0)
        except OSError:
            claim.release()
            raise
    return claim, owner
