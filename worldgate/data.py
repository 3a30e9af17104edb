"""Benchmark data fetched on first use: WorldMark's ``arena_inputs`` at a pinned commit, into the user's cache.

``--suite worldmark`` without ``--data`` (and ``worldgate fetch worldmark``) downloads the GitHub archive of
WorldMark at :data:`WORLDMARK_COMMIT` (the commit worldgate's WorldMark scoring reproduces), keeps only its
``arena_inputs/`` folder, checks it against a pinned digest and moves it into
``platformdirs.user_cache_dir("worldgate")/worldmark/<commit>/arena_inputs``. The archive is extracted into a
temporary folder beside its destination, verified, then renamed into place: a truncated or altered archive leaves
nothing behind.

The digest is :func:`tree_digest` of the extracted folder (sha256 over the sorted ``relative path NUL sha256(file)``
lines), not of the archive: GitHub builds the archive on the fly, and its bytes are not promised to stay the same;
the files are. It was computed from that commit's ``arena_inputs`` (210 files, 106,248,467 bytes).

This module is a leaf (it imports nothing of worldgate's), so the suite loaders in ``worldgate.trajectories`` call
it. Offline (``WORLDGATE_OFFLINE=1``, or ``HF_HUB_OFFLINE=1``, the switch the Hugging Face tools and this project's
tests set) nothing is downloaded and the error names the manual commands.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tarfile
import tempfile
import urllib.error
import urllib.request
import zlib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import platformdirs
from tqdm import tqdm

WORLDMARK_COMMIT = "26f33a81d3799373fd80ec391d74bb1ae2291e36"  # = worldgate.evaluate.worldmark.flow_eval's
URL_ENV = "WORLDGATE_WORLDMARK_URL"  # another archive of the same commit (a mirror, an internal copy, a test server)
OFFLINE_ENVS = ("WORLDGATE_OFFLINE", "HF_HUB_OFFLINE")
DIGEST_FILE = "DIGEST"  # beside the data folder: the tree digest it was verified against

# Bounds of what a download may be (the real archive is about 140 MB with 288 files; arena_inputs 106 MB, 210 files)
MAX_ARCHIVE_BYTES = 1 << 30
MAX_FILES = 5000
MAX_FILE_BYTES = 64 << 20
TIMEOUT_S = 60
CHUNK = 1 << 20


class DataError(ValueError):
    """Data could not be fetched or verified; the message says why and how to get it by hand."""


@dataclass(frozen=True)
class Dataset:
    name: str
    commit: str
    url: str  # the archive (a .tar.gz) of the commit; URL_ENV overrides it
    folder: str  # the folder of the archive that is kept
    digest: str  # tree_digest of that folder
    repo: str
    licence: str

    def manual(self) -> str:
        return (f"git clone https://github.com/{self.repo} && git -C {self.repo.split('/')[1]} checkout "
                f"{self.commit}, then pass --data {self.repo.split('/')[1]}/{self.folder}")


DATASETS = {
    "worldmark": Dataset(
        name="worldmark", commit=WORLDMARK_COMMIT,
        url=f"https://codeload.github.com/AlayaLab/WorldMark/tar.gz/{WORLDMARK_COMMIT}",
        folder="arena_inputs", digest="9870d8ed2f3dbd10c6573cc5cc4a7e1cec5a6ae97810b4687d1dcf2939492f87",
        repo="AlayaLab/WorldMark", licence="MIT"),
}


def dataset(name: str) -> Dataset:
    if name not in DATASETS:
        raise DataError(f"no data set {name!r} to fetch: known are {', '.join(sorted(DATASETS))}")
    return DATASETS[name]


def cache_root() -> Path:
    """The user's cache folder for worldgate (platformdirs: ``$XDG_CACHE_HOME/worldgate`` or ``~/.cache/worldgate``
    on Linux, ``~/Library/Caches/worldgate`` on macOS)."""
    return Path(platformdirs.user_cache_dir("worldgate"))


def data_dir(name: str) -> Path:
    """Where data set ``name`` lives once fetched (it may not be there yet)."""
    d = dataset(name)
    return cache_root() / d.name / d.commit / d.folder


def tree_digest(root: Path) -> str:
    """sha256 over the sorted lines ``relative/posix/path NUL sha256(file)`` of every file under ``root``."""
    h = hashlib.sha256()
    for rel, path in sorted((p.relative_to(root).as_posix(), p) for p in Path(root).rglob("*") if p.is_file()):
        fh = hashlib.sha256()
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(CHUNK), b""):
                fh.update(block)
        h.update(f"{rel}\0{fh.hexdigest()}\n".encode())
    return h.hexdigest()


def cached(name: str) -> Path | None:
    """The data folder if it was fetched and verified against the pinned digest, else None."""
    d, where = dataset(name), data_dir(name)
    mark = where.parent / DIGEST_FILE
    try:
        ok = where.is_dir() and mark.read_text(encoding="utf-8").strip() == d.digest
    except (OSError, UnicodeDecodeError):
        ok = False
    return where if ok else None


def offline() -> bool:
    return any(os.environ.get(v, "").strip().lower() in ("1", "true", "yes", "on") for v in OFFLINE_ENVS)


def ensure(name: str, progress: bool = True) -> Path:
    """The data folder of ``name``: from the cache, or fetched into it now (first use)."""
    return cached(name) or fetch(name, progress=progress)


def fetch(name: str, url: str | None = None, progress: bool = True) -> Path:
    """Download, verify and cache data set ``name`` (again, if it is there); returns its folder."""
    d = dataset(name)
    url = url or os.environ.get(URL_ENV) or d.url
    if offline():
        raise DataError(f"{d.name}'s {d.folder} are not in the cache ({data_dir(name)}) and downloads are off "
                        f"({' or '.join(OFFLINE_ENVS)} is set): on a connected machine run `worldgate fetch {d.name}` "
                        f"(same user cache), or {d.manual()}")
    dest = data_dir(name).parent  # .../<name>/<commit>
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".fetch-", dir=dest.parent))
    try:
        archive = tmp / "archive.tar.gz"
        _download(url, archive, d, progress)
        staged = tmp / d.commit
        n = _extract(archive, staged / d.folder, d.folder, url)
        got = tree_digest(staged / d.folder)
        if got != d.digest:
            raise DataError(f"{url}: its {d.folder} ({n} files) do not match WorldMark commit {d.commit} (tree digest "
                            f"{got[:16]}..., expected {d.digest[:16]}...): nothing was kept; fetch it again, or "
                            f"{d.manual()}")
        (staged / DIGEST_FILE).write_text(d.digest + "\n", encoding="utf-8")
        try:
            os.rename(staged, dest)
        except OSError:  # there already: another process's fetch (several ranks at once), or a copy that is stale
            if cached(name) is None:
                shutil.rmtree(dest, ignore_errors=True)
                os.rename(staged, dest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return dest / d.folder


def _download(url: str, to: Path, d: Dataset, progress: bool) -> None:
    how = f"check the connection (or {URL_ENV}), or {d.manual()}"
    try:
        resp = urllib.request.urlopen(url, timeout=TIMEOUT_S)  # noqa: S310 (an https URL, or the user's own)
    except (urllib.error.URLError, OSError, ValueError) as e:
        why = getattr(e, "reason", e)
        raise DataError(f"cannot download {d.name}'s {d.folder} from {url} ({why}): {how}") from None
    with resp, open(to, "wb") as f:
        total = resp.headers.get("Content-Length")
        total = int(total) if total and total.isdigit() else None
        if total and total > MAX_ARCHIVE_BYTES:
            raise DataError(f"{url}: {total} bytes is more than an archive of {d.name} can be (MAX_ARCHIVE_BYTES "
                            f"= {MAX_ARCHIVE_BYTES})")
        got = 0
        with tqdm(total=total, unit="B", unit_scale=True, desc=f"{d.name} {d.folder}", disable=not progress) as bar:
            while True:
                try:
                    block = resp.read(CHUNK)
                except (OSError, ValueError) as e:  # a dropped connection, http.client.IncompleteRead
                    raise DataError(f"{url}: the download broke off after {got} bytes ({e}): {how}") from None
                if not block:
                    break
                got += len(block)
                if got > MAX_ARCHIVE_BYTES:
                    raise DataError(f"{url}: more than MAX_ARCHIVE_BYTES = {MAX_ARCHIVE_BYTES} bytes; not an archive "
                                    f"of {d.name}")
                f.write(block)
                bar.update(len(block))
    if total is not None and got != total:
        raise DataError(f"{url}: the download is truncated ({got} of {total} bytes): {how}")


def _extract(archive: Path, out: Path, folder: str, url: str) -> int:
    """Extract the regular files under ``folder/`` (at the top of the archive or one folder down, as GitHub's
    ``REPO-COMMIT/`` prefix) into ``out``; returns their count. Links, devices and paths leaving ``out`` are refused."""
    n = 0
    try:
        with tarfile.open(archive, "r:*") as tar:
            for m in tar:
                parts = PurePosixPath(m.name).parts
                at = next((i for i in (0, 1) if len(parts) > i and parts[i] == folder), None)
                if at is None or len(parts) == at + 1:
                    continue
                rel = parts[at + 1:]
                if any(p in ("", ".", "..") for p in rel) or m.name.startswith("/"):
                    raise DataError(f"{url}: archive member {m.name!r} leaves its folder; refused")
                if m.isdir():
                    continue
                if not m.isfile():
                    raise DataError(f"{url}: archive member {m.name!r} is a link or a special file; refused")
                n += 1
                if n > MAX_FILES or m.size > MAX_FILE_BYTES:
                    raise DataError(f"{url}: more than MAX_FILES = {MAX_FILES} files or a file over MAX_FILE_BYTES = "
                                    f"{MAX_FILE_BYTES} bytes under {folder}/; not WorldMark's {folder}")
                target = out.joinpath(*rel)
                target.parent.mkdir(parents=True, exist_ok=True)
                src = tar.extractfile(m)
                with src, open(target, "wb") as f:
                    shutil.copyfileobj(src, f, CHUNK)
    except DataError:
        raise
    except (tarfile.TarError, EOFError, OSError, zlib.error) as e:
        raise DataError(f"{url}: the archive is truncated or not a .tar.gz ({type(e).__name__}: {e}); nothing was "
                        "kept: fetch it again") from None
    if n == 0:
        raise DataError(f"{url}: the archive holds no {folder}/ folder; not an archive of WorldMark")
    return n
