"""WorldMark's arena_inputs fetched on first use (worldgate/data.py), against a local HTTP server serving a fixture
archive laid out like GitHub's (WorldMark-<commit>/arena_inputs/...): verified, cached, refused when truncated or
altered, and offline the error names the manual command."""

import dataclasses
import hashlib
import http.server
import io
import tarfile
import threading

import numpy as np
import pytest
from PIL import Image

from worldgate import data
from worldgate.cli import main
from worldgate.evaluate.worldmark.flow_eval import WORLDMARK_COMMIT
from worldgate.trajectories.suites import load_suite
from testpaths import SHARED

SHARED_ARENA = SHARED / "worldmark" / "arena_inputs"


def _arena_files() -> dict[str, bytes]:
    """A two-image arena_inputs per view: {real,style}/NNN.jpg, intrinsics, action ids, prompts."""
    files = {"README.txt": b"fixture\n"}
    for view in ("first", "third"):
        for domain in ("real", "style"):
            for img in range(2):
                buf = io.BytesIO()
                Image.new("RGB", (32, 24), (40 * img, 90, 200)).save(buf, "JPEG")
                files[f"{view}_view/{domain}/{img:03d}.jpg"] = buf.getvalue()
                buf = io.BytesIO()
                np.save(buf, np.array([30.0, 30.0, 15.5, 11.5], dtype=np.float32))
                files[f"{view}_view/{domain}_intrinsics/{img:03d}_intrinsics.npy"] = buf.getvalue()
            files[f"{view}_view/{domain}_action.txt"] = b"1,7\n2,3\n"
            files[f"{view}_view/prompt_{domain}.txt"] = f"{view.title()}-person view. A street.\nA hall.\n".encode()
    return files


def _tar(files: dict[str, bytes], top: str = f"WorldMark-{WORLDMARK_COMMIT}") -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for rel, body in {"README.md": b"repo readme\n", **{f"arena_inputs/{k}": v for k, v in files.items()}}.items():
            info = tarfile.TarInfo(f"{top}/{rel}")
            info.size = len(body)
            tar.addfile(info, io.BytesIO(body))
    return buf.getvalue()


def _digest(files: dict[str, bytes]) -> str:
    h = hashlib.sha256()
    for rel in sorted(files):
        h.update(f"{rel}\0{hashlib.sha256(files[rel]).hexdigest()}\n".encode())
    return h.hexdigest()


@pytest.fixture()
def server():
    """A local HTTP server: ``serve[path] = bytes``; yields (serve, base URL)."""
    serve: dict[str, bytes] = {}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            body = serve.get(self.path)
            self.send_response(200 if body is not None else 404)
            self.send_header("Content-Length", str(len(body or b"")))
            self.end_headers()
            self.wfile.write(body or b"")

        def log_message(self, *a):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    yield serve, f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture()
def fixture_set(monkeypatch, tmp_path):
    """The fixture's files, their digest pinned in place of the real one, the cache in tmp_path, downloads on."""
    files = _arena_files()
    monkeypatch.setitem(data.DATASETS, "worldmark",
                        dataclasses.replace(data.DATASETS["worldmark"], digest=_digest(files)))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    for v in data.OFFLINE_ENVS:
        monkeypatch.delenv(v, raising=False)
    return files


def _cache_left(tmp_path) -> list[str]:
    root = tmp_path / "cache"
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")) if root.exists() else []


def test_fetch_then_generate_needs_no_data(server, fixture_set, monkeypatch, tmp_path, capsys):
    serve, base = server
    serve["/wm.tar.gz"] = _tar(fixture_set)
    monkeypatch.setenv(data.URL_ENV, base + "/wm.tar.gz")
    assert main(["fetch", "worldmark", "--no-progress"]) == 0
    where = tmp_path / "cache" / "worldgate" / "worldmark" / WORLDMARK_COMMIT
    assert f"downloaded and verified -> {where / 'arena_inputs'}" in capsys.readouterr().out
    assert data.cached("worldmark") == where / "arena_inputs"
    # only arena_inputs is kept (not the repository's README.md), byte for byte, with the digest it matched
    got = {p.relative_to(where / "arena_inputs").as_posix(): p.read_bytes()
           for p in (where / "arena_inputs").rglob("*") if p.is_file()}
    assert got == fixture_set and sorted(x.name for x in where.iterdir()) == ["DIGEST", "arena_inputs"]
    assert not [p for p in where.parent.iterdir() if p.name.startswith(".fetch-")]
    assert main(["fetch", "worldmark"]) == 0 and "already in the cache" in capsys.readouterr().out
    assert main(["fetch", "worldmark", "--force", "--no-progress"]) == 0  # onto a verified copy: kept, no error
    assert "downloaded and verified" in capsys.readouterr().out and data.cached("worldmark")
    (where / "DIGEST").write_text("0" * 64)  # a stale entry (another digest): fetched again on use, replaced whole
    (where / "arena_inputs" / "stray.txt").write_text("x")
    assert data.ensure("worldmark", progress=False) == where / "arena_inputs"
    assert not (where / "arena_inputs" / "stray.txt").exists() and data.cached("worldmark")

    serve.clear()  # nothing to download from now on, and downloads off: the cache alone serves the suite
    monkeypatch.setenv("WORLDGATE_OFFLINE", "1")
    cases = load_suite("worldmark")
    assert len(cases) == 16 and cases[0].id == "first-real-000_001"
    assert cases[0].image == str(where / "arena_inputs" / "first_view" / "real" / "000.jpg")
    assert cases[0].intrinsics == [30.0, 30.0, 15.5, 11.5] and cases[0].image_size == (32, 24)
    out = tmp_path / "run"
    assert main(["generate", "--model", "yume", "--suite", "worldmark", "--limit", "1", "--dry-run",
                 "--out", str(out), "--no-progress"]) == 0
    assert "planned 1," in capsys.readouterr().out
    assert [p.name for p in out.iterdir() if p.is_dir()] == ["first-real-000_001"]


def test_truncated_archive_is_refused_and_leaves_nothing(server, fixture_set, monkeypatch, tmp_path):
    serve, base = server
    whole = _tar(fixture_set)
    serve["/cut.tar.gz"] = whole[: len(whole) // 2]
    with pytest.raises(data.DataError, match="truncated or not a .tar.gz"):
        data.fetch("worldmark", url=base + "/cut.tar.gz", progress=False)
    assert _cache_left(tmp_path) == ["worldgate", "worldgate/worldmark"]
    assert data.cached("worldmark") is None


def test_altered_archive_fails_the_digest(server, fixture_set, monkeypatch, tmp_path):
    serve, base = server
    serve["/alt.tar.gz"] = _tar({**fixture_set, "first_view/prompt_real.txt": b"another caption\n"})
    with pytest.raises(data.DataError, match="do not match WorldMark commit"):
        data.fetch("worldmark", url=base + "/alt.tar.gz", progress=False)
    assert _cache_left(tmp_path) == ["worldgate", "worldgate/worldmark"]


def test_member_leaving_its_folder_is_refused(server, fixture_set, tmp_path):
    serve, base = server
    serve["/evil.tar.gz"] = _tar({**fixture_set, "../../escape.txt": b"x"})
    with pytest.raises(data.DataError, match="leaves its folder"):
        data.fetch("worldmark", url=base + "/evil.tar.gz", progress=False)
    assert not list(tmp_path.rglob("escape.txt"))


def test_offline_and_unreachable_name_the_manual_command(server, fixture_set, monkeypatch, capsys):
    manual = f"git clone https://github.com/AlayaLab/WorldMark && git -C WorldMark checkout {WORLDMARK_COMMIT}"
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert main(["generate", "--model", "engine", "--suite", "worldmark", "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert "downloads are off" in err and "worldgate fetch worldmark" in err and manual in err
    monkeypatch.delenv("HF_HUB_OFFLINE")
    _, base = server  # the server knows no such path: a 404
    assert main(["fetch", "worldmark", "--url", base + "/missing.tar.gz"]) == 2
    err = capsys.readouterr().err
    assert "cannot download worldmark's arena_inputs" in err and "Not Found" in err and manual in err


def test_pinned_commit_and_digest():
    """The fetched commit is the one the WorldMark scoring reproduces; the pinned digest is that commit's
    arena_inputs (the project's shared copy of them, where present)."""
    d = data.DATASETS["worldmark"]
    assert d.commit == WORLDMARK_COMMIT and d.url.endswith(f"/AlayaLab/WorldMark/tar.gz/{WORLDMARK_COMMIT}")
    if not SHARED_ARENA.is_dir():
        pytest.skip("no shared copy of WorldMark's arena_inputs here")
    assert data.tree_digest(SHARED_ARENA) == d.digest
