"""Where a number came from: the date, the machine, the software, and the exact revision of every model behind it.

:func:`environment` is written into every record's meta.json and every results.json: UTC date, host CPU, GPU model
and count, CUDA / driver / cuDNN versions, the versions of torch, diffusers, transformers, accelerate and worldgate's
other dependencies, and worldgate's version, git hash and whether its tree was dirty. :func:`resolved_revision` says
which revision of a learned model or judge a loader opened: the Hub snapshot's commit hash (a Hugging Face cache
``models--ORG--NAME/snapshots/<hash>``, read from its ``refs/<revision>``), or a checkout's commit. Nothing here opens
the network; every probe that fails leaves its field None.
"""

from __future__ import annotations

import functools
import os
import platform
import re
import subprocess
import time
from pathlib import Path

PACKAGES = ("worldgate", "numpy", "scipy", "opencv-python-headless", "evo", "imageio-ffmpeg", "torch", "torchvision",
            "diffusers", "transformers", "accelerate", "huggingface-hub", "safetensors")
_HASH = re.compile(r"^[0-9a-f]{40}$")


def _run(cmd, cwd=None) -> str | None:
    try:
        p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return p.stdout.strip() if p.returncode == 0 else None


@functools.lru_cache(maxsize=1)
def _cpu() -> str:
    try:
        for ln in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            if ln.lower().startswith("model name"):
                return ln.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


@functools.lru_cache(maxsize=1)
def _gpus() -> dict:
    out = {"gpu": None, "gpu_count": 0, "cuda": None, "cudnn": None, "driver": None}
    try:
        import torch

        out["cuda"] = torch.version.cuda
        if torch.cuda.is_available():
            out["gpu_count"] = torch.cuda.device_count()
            out["gpu"] = torch.cuda.get_device_name(0)
            out["cudnn"] = torch.backends.cudnn.version()
    except Exception:  # noqa: BLE001 - no torch, or a broken CUDA install: the fields stay empty
        pass
    drv = _run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"])
    out["driver"] = drv.splitlines()[0].strip() if drv else None
    return out


@functools.lru_cache(maxsize=1)
def _versions() -> dict:
    import importlib.metadata as md

    out = {"python": platform.python_version()}
    for pkg in PACKAGES:
        try:
            out[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            pass
    return out


@functools.lru_cache(maxsize=1)
def _worldgate_git() -> dict:
    root = Path(__file__).resolve().parents[1]
    head = _run(["git", "rev-parse", "HEAD"], cwd=root)
    dirty = _run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root)
    return {"git": head, "dirty": bool(dirty) if dirty is not None and head else None}


def environment() -> dict:
    """The machine and software of this process (cached per process, but for the date)."""
    return {"date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "host_cpu": _cpu(),
            "cpu_count": os.cpu_count(), "platform": platform.platform(), **_gpus(), "versions": _versions(),
            "worldgate": {"version": _versions().get("worldgate"), **_worldgate_git()}}


def hub_cache() -> Path:
    env = os.environ
    if env.get("HF_HUB_CACHE"):
        return Path(env["HF_HUB_CACHE"])
    if env.get("HF_HOME"):
        return Path(env["HF_HOME"]) / "hub"
    return Path(env.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "huggingface" / "hub"


def resolved_revision(model: str | None, revision: str = "main", cache_dir: str | Path | None = None) -> dict | None:
    """``{"id", "revision", "source"}`` of the snapshot a loader opens for ``model`` (a Hub id or a local folder), or
    None when nothing identifies it. A folder inside a Hub cache's ``snapshots/<hash>`` is that hash; a git checkout
    is its HEAD; a Hub id is the commit its cache's ``refs/<revision>`` names (what ``from_pretrained(...,
    local_files_only=True)`` opens)."""
    if not model or not isinstance(model, str):
        return None
    p = Path(model).expanduser()
    if p.exists():
        parts = p.resolve().parts
        if "snapshots" in parts[:-1]:
            h = parts[parts.index("snapshots") + 1]
            if _HASH.match(h):
                return {"id": model, "revision": h, "source": "hub cache snapshot"}
        head = _run(["git", "rev-parse", "HEAD"], cwd=p if p.is_dir() else p.parent)
        return {"id": model, "revision": head, "source": "git checkout" if head else "local folder (no revision)"}
    if not re.fullmatch(r"[\w.\-]+/[\w.\-]+", model):
        return None
    base = Path(cache_dir) if cache_dir else hub_cache()
    ref = base / f"models--{model.replace('/', '--')}" / "refs" / revision
    try:
        h = ref.read_text().strip()
    except OSError:
        return {"id": model, "revision": None, "source": "not in the local Hub cache"}
    return {"id": model, "revision": h if _HASH.match(h) else None, "source": f"hub cache refs/{revision}"}


def models_of(backends: dict) -> dict:
    """Every model id an extractor's config names (``model``, ``processor``, ``segmentation``, ``judge``, ...) with
    the revision the loader opened."""
    out = {}
    for name, cfg in (backends or {}).items():
        for key in ("model", "processor", "segmentation", "detector", "judge", "face", "checkpoint"):
            v = (cfg or {}).get(key)
            if isinstance(v, str) and v and v not in out:
                out[v] = resolved_revision(v)
    return out


def differences(a: dict | None, b: dict | None, prefix: str = "") -> list[str]:
    """What differs between two provenance blocks, one ``key: a -> b`` line each (the date aside)."""
    a, b, out = a or {}, b or {}, []
    for k in sorted(set(a) | set(b)):
        if k == "date_utc":
            continue
        va, vb = a.get(k), b.get(k)
        if isinstance(va, dict) or isinstance(vb, dict):
            out += differences(va if isinstance(va, dict) else {}, vb if isinstance(vb, dict) else {}, f"{prefix}{k}.")
        elif va != vb:
            out.append(f"{prefix}{k}: {va} -> {vb}")
    return out


__all__ = ["differences", "environment", "models_of", "resolved_revision"]
