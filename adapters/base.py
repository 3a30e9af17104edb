"""The adapter contract: ``info``, a pure ``plan(case)``, ``load`` and ``rollout``.

``plan`` is the translation the user asked for: pure, CPU-only and byte-identical for the same case and adapter
version, so golden tests can pin it. ``rollout`` owns the runtime and yields chunks of frames; ``generate`` owns
the disk. Everything optional is a keyword with a default.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import re
import shlex
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from worldgate.trajectories.suites import SuiteError, check_intrinsics


class AdapterError(RuntimeError):
    """A model cannot run or cannot express a case; the message says what is missing and what to do."""


class UnsupportedMotion(AdapterError):
    """The case asks for a motion the model cannot express. Never substitute another motion silently."""


@dataclass(frozen=True)
class AdapterInfo:
    name: str
    version: str
    width: int  # native frame width (pixels)
    height: int
    fps: float
    fps_source: str  # which source governs the fps: "writer", "config", "engine", ...
    chunk_frames: int  # frames per later chunk
    first_chunk_frames: int  # frames of the first chunk
    duration_unit: str  # "frames", "latents (x4 frames)", "33-frame actions", "caption lines (~2 s)", ...
    control: str  # "poses", "keyboard+mouse", "text", "action-dsl", ...
    pose_convention: str  # e.g. "c2w OpenCV", "w2c RealEstate10K", "none"
    intrinsics_regime: int  # 1 none, 2 fixed/derived, 3 estimated at runtime, 4 required (transformed)
    aspect_policy: str  # "crop", "pad", "stretch", "render" (the Engine renders any aspect)
    context_policies: tuple[str, ...] = ()
    hf_ids: tuple[str, ...] = ()
    repository: str = ""
    licence: str = ""
    integration: str = ""  # "A" file/CLI, "B" patch adds an input path, "C" import the pipeline, "engine"
    image_conditioned: bool = True
    notes: str = ""
    players: int = 1  # views per rollout: 1, or 2 for two-player models (MultiWorldBench)
    #: why the model takes no seed ("" when ``rollout(seed=...)`` reaches it); meta.json then records ``seed: null``
    no_seed: str = ""

    def to_dict(self) -> dict:
        d = asdict(self)
        d["context_policies"] = list(self.context_policies)
        d["hf_ids"] = list(self.hf_ids)
        return d


@dataclass
class Chunk:
    """Frames produced by one rollout step for video frames [start, start+T): ``frames`` (T, H, W, 3) uint8, or for
    a multi-view model a dict ``{view: (T, H, W, 3)}`` (one frame per view per step). A runner that leaves its
    output as a file gives ``video`` (the path, read while the rollout's iterator is open) and ``frames=None``."""

    start: int
    frames: np.ndarray | dict[str, np.ndarray] | None
    context_ids: list[int] | None = None
    extra: dict = field(default_factory=dict)
    video: Path | None = None


#: the token a plan's ``command.txt`` holds where the rollout seed goes (replaced by :func:`with_seed`)
SEED = "SEED"
_SEED_TOKEN = re.compile(r"(?<=[\s=])SEED(?=\s|$)")


def image_arg(case) -> str:
    """The case image as one command-line token (quoted: a path with a space stays one argument), or ``IMAGE``."""
    return shlex.quote(case.image) if case.image else "IMAGE"


def with_seed(command: str, seed: int | None) -> str:
    """``command`` with every ``SEED`` token replaced by the rollout seed (unchanged when ``seed`` is None)."""
    return command if seed is None else _SEED_TOKEN.sub(str(int(seed)), command)


class IntrinsicsError(ValueError):
    """An intrinsics block that is not :class:`PlanIntrinsics`' shape; the message names the field."""


@dataclass(frozen=True)
class PlanIntrinsics:
    """The one shape of a plan's (and a record's meta.json) intrinsics block, every adapter's: ``regime`` (1 none,
    2 fixed/derived, 3 estimated at runtime, 4 required and transformed from the case's); ``native``, where the model
    has a camera, ``[fx, fy, cx, cy]`` in pixels of ``native_size`` ``[width, height]`` (the plan's size), which is
    then required; the model's own units beside it where they differ (``native_model`` with
    ``native_model_units``); everything else an adapter records (the case's K, the transform, fields of view) in
    ``extra``, as written."""

    regime: int | None
    native: tuple[float, float, float, float] | None = None
    native_size: tuple[int, int] | None = None
    native_model: Any = None
    native_model_units: str | None = None
    extra: dict = field(default_factory=dict)

    TYPED = ("regime", "native", "native_size", "native_model", "native_model_units")

    @classmethod
    def parse(cls, block, what: str = "intrinsics", size: tuple[int, int] | None = None) -> "PlanIntrinsics":
        """The typed block of the JSON-able dict ``block``; :class:`IntrinsicsError` naming ``what``.field for a
        missing or malformed field, and where ``size`` is given, for a ``native_size`` other than it."""
        if not isinstance(block, dict):
            raise IntrinsicsError(f"{what}: must be an object with regime, native and native_size, got "
                                  f"{type(block).__name__}")
        regime = block.get("regime")
        if regime is None and block.get("native") is None:  # an adapter that records no camera at all
            pass
        elif isinstance(regime, bool) or not isinstance(regime, int) or regime not in (1, 2, 3, 4):
            raise IntrinsicsError(f"{what}.regime: must be 1, 2, 3 or 4 (none, fixed, estimated, required), got "
                                  f"{regime!r}")
        native, nsize = block.get("native"), block.get("native_size")
        if native is not None:
            if nsize is None:
                raise IntrinsicsError(f"{what}.native_size: missing; intrinsics.native [fx, fy, cx, cy] must say the "
                                      "[width, height] in whose pixels it is given")
            if not isinstance(nsize, (list, tuple)) or len(nsize) != 2 or not all(
                    isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v > 0 for v in nsize):
                raise IntrinsicsError(f"{what}.native_size: must be [width, height], two positive integers, got "
                                      f"{nsize!r}")
            nsize = (int(nsize[0]), int(nsize[1]))
            if size is not None and nsize != tuple(size):
                raise IntrinsicsError(f"{what}.native_size: {nsize[0]}x{nsize[1]} is not the plan's size "
                                      f"{size[0]}x{size[1]}: native is given in pixels of the plan's frames")
            try:
                native = tuple(check_intrinsics(list(native) if isinstance(native, (tuple, np.ndarray)) else native,
                                                nsize, f"{what}.native"))
            except SuiteError as e:
                raise IntrinsicsError(str(e)) from None
        elif nsize is not None and (not isinstance(nsize, (list, tuple)) or len(nsize) != 2):
            raise IntrinsicsError(f"{what}.native_size: must be [width, height], got {nsize!r}")
        units = block.get("native_model_units")
        if block.get("native_model") is not None and not isinstance(units, str):
            raise IntrinsicsError(f"{what}.native_model_units: native_model needs its units said (a string)")
        return cls(regime, native, tuple(nsize) if nsize is not None else None, block.get("native_model"), units,
                   {k: v for k, v in block.items() if k not in cls.TYPED})


def check_plan_intrinsics(plan: "NativeInputs") -> PlanIntrinsics:
    """The plan's intrinsics block as :class:`PlanIntrinsics` (what the record's meta.json carries and evaluate
    reads): ``native``, when given, is ``[fx, fy, cx, cy]`` in pixels of ``native_size``, the plan's own size
    (``plan.width`` x ``plan.height``), whatever units the model itself takes (those go beside it, ``native_model``
    with ``native_model_units``). Raises AdapterError naming the adapter and the field: a plan that breaks this would
    write records evaluate refuses."""
    try:
        return PlanIntrinsics.parse(plan.intrinsics, f"{plan.adapter} plan of {plan.case_id}: intrinsics",
                                    (plan.width, plan.height))
    except IntrinsicsError as e:
        raise AdapterError(f"{e} (it must be [fx, fy, cx, cy] in pixels of the plan's {plan.width}x{plan.height}, "
                           "with native_size; the model's own units go in intrinsics.native_model): a defect of the "
                           "adapter") from None


def horizontal_fov_deg(fx: float, width: float) -> float:
    return math.degrees(2 * math.atan(width / (2 * fx)))


@dataclass
class NativeInputs:
    """The exact native inputs of one case for one model, plus what is needed to describe and write them."""

    adapter: str
    adapter_version: str
    case_id: str
    width: int
    height: int
    fps: float
    n_frames: int
    segment_frames: list[tuple[int, int]]
    arrays: dict[str, np.ndarray] = field(default_factory=dict)  # saved in plan.npz (and native files below)
    files: dict[str, Any] = field(default_factory=dict)  # exact files the model's entry point reads: name -> content
    intrinsics: dict = field(default_factory=dict)
    prompt: str = ""
    prompt_source: str | None = None
    caveats: list[str] = field(default_factory=list)
    extra: dict = field(default_factory=dict)

    def describe(self) -> dict:
        """JSON-able description (``plan.json``)."""
        return {
            "adapter": self.adapter,
            "adapter_version": self.adapter_version,
            "case_id": self.case_id,
            "width": self.width,
            "height": self.height,
            "fps": self.fps,
            "n_frames": self.n_frames,
            "segment_frames": [list(map(int, r)) for r in self.segment_frames],
            "arrays": {k: {"shape": list(v.shape), "dtype": str(v.dtype)} for k, v in self.arrays.items()},
            "files": sorted(self.files),
            "intrinsics": _jsonable(self.intrinsics),
            "prompt": self.prompt,
            "prompt_source": self.prompt_source,
            "caveats": list(self.caveats),
            "extra": _jsonable(self.extra),
        }

    def fingerprint(self) -> str:
        """sha256 over the description, arrays and files: equal fingerprints mean byte-identical plans."""
        h = hashlib.sha256(json.dumps(self.describe(), sort_keys=True).encode())
        for k in sorted(self.arrays):
            a = np.ascontiguousarray(self.arrays[k])
            h.update(k.encode() + str(a.dtype).encode() + str(a.shape).encode() + a.tobytes())
        for k in sorted(self.files):
            h.update(k.encode() + file_bytes(k, self.files[k]))
        return h.hexdigest()

    def write(self, folder: str | Path, seed: int | None = None) -> list[str]:
        """Write ``plan.json``, the native files, and ``plan.npz`` with all arrays. Returns the file names. With
        ``seed``, the ``SEED`` token of ``command.txt`` becomes that seed (the plan itself never depends on it)."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        written = []
        for name, content in sorted(self.files.items()):
            p = folder / name
            p.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, str) and (name == "command.txt" or name in self.extra.get("seed_files", ())):
                content = with_seed(content, seed)
            p.write_bytes(file_bytes(name, content))
            written.append(name)
        if self.arrays:
            np.savez(folder / "plan.npz", **self.arrays)
            written.append("plan.npz")
        desc = self.describe()
        desc["fingerprint"] = self.fingerprint()
        (folder / "plan.json").write_text(json.dumps(desc, indent=2, sort_keys=True))
        written.append("plan.json")
        return written


def file_bytes(name: str, content: Any) -> bytes:
    """The bytes a native file holds: bytes/str as they are, arrays as .npy, dicts of arrays as .npz, else JSON."""
    if isinstance(content, bytes):
        return content
    if isinstance(content, str):
        return content.encode()
    if isinstance(content, np.ndarray):
        buf = io.BytesIO()
        np.save(buf, content, allow_pickle=False)
        return buf.getvalue()
    if isinstance(content, dict) and name.endswith(".npz"):
        buf = io.BytesIO()
        np.savez(buf, **content)
        return buf.getvalue()
    return json.dumps(_jsonable(content), indent=2, sort_keys=True).encode()


def _jsonable(x):
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, np.ndarray):
        return _jsonable(x.tolist())
    if isinstance(x, (np.floating,)):
        return float(x)
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    return x


class Adapter:
    """Base class. Subclasses set ``info`` and implement ``plan``; runnable ones implement ``load`` and ``rollout``
    (models driven from their official repository subclass :class:`~worldgate.adapters.repo.RepoAdapter`)."""

    info: AdapterInfo

    def __init__(self, **model_args):
        self.model_args = dict(model_args)

    @property
    def name(self) -> str:
        return self.info.name

    def plan(self, case) -> NativeInputs:  # pragma: no cover - interface
        raise NotImplementedError

    def load(self, device: str = "cpu", dtype: str | None = None) -> None:
        raise AdapterError(f"{self.info.name} has no runtime in this build; use --dry-run to write its native inputs")

    def rollout(self, plan: NativeInputs, context=None, seed: int = 0) -> Iterator[Chunk]:
        raise AdapterError(f"{self.info.name} has no runtime in this build; use --dry-run to write its native inputs")

    def with_context(self, plan: NativeInputs, policy) -> NativeInputs:
        """The plan as it runs under the context ``policy`` (generate calls it before writing or rolling out): the
        same plan, unless the policy changes the model's native inputs (a repository model whose launcher takes it
        as flags and files, so ``--dry-run`` shows them)."""
        return plan

    def context_support(self, name: str) -> str | None:
        """None when a rollout can apply the context policy ``name``, else why not (generate refuses before running)."""
        if name in self.info.context_policies:
            return None
        return f"{self.info.name} cannot apply context policy {name!r} (it supports: " \
               f"{', '.join(self.info.context_policies) or 'none'})"

    def provenance(self) -> dict | None:
        """Where the model's code and weights came from (a repository model: its checkout's commit and patch), or
        None (the Engine; diffusers models record their id in ``info.hf_ids``)."""
        return None

    def resolved_config(self) -> dict:
        return {"adapter": self.info.name, "version": self.info.version, "model_args": _jsonable(self.model_args)}
