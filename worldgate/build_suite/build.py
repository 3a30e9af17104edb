"""Build a suite from the user's images: per image, the filter, then each step (given as a file or run by a model),
cached per image so a rerun resumes; then the benchmark's layout is (re)written from the cache, and a build log says
per image what was measured, kept, dropped or failed, and where every value came from."""

from __future__ import annotations

import hashlib
import io
import json
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from PIL import Image

from worldgate.generate.outputs import OutputFolder
from worldgate.generate.video import sha256_file
from worldgate.trajectories import library
from worldgate.trajectories.core import TrajectoryError

from . import filter as F
from . import given as G
from .memory import case_stems, checklist_prompt_sha, memory_steps, write_worldmembench
from .models import (
    DEFAULT_INTRINSICS,
    DEFAULT_VLM,
    ChatVLM,
    DA3Intrinsics,
    ImageEditor,
    StepError,
    caption,
    model_label,
    select_actions,
)
from .parse import AnswerError, format_action_ids
from .prompts import PROMPT_NAMES, load_prompt
from .targets import DETECT_THRESHOLD, TextTargets

BENCHMARKS = ("worldmark", "worldmembench")
DOMAINS = ("real", "style")
VIEWS = ("first", "third")
BUILD_VERSION = 1


class BuildError(ValueError):
    """The build cannot start (bad arguments, unreadable images, a given file that does not fit)."""


@dataclass
class BuildResult:
    out: Path
    benchmark: str
    kept: list[str] = field(default_factory=list)  # input images in output order
    dropped: dict[str, str] = field(default_factory=dict)  # input image -> why (filter, duplicate)
    failed: dict[str, str] = field(default_factory=dict)  # input image -> the step's error
    cases: int = 0
    log: Path | None = None
    reused: int = 0  # model-step results taken from the per-image cache (resume)

    @property
    def exit_code(self) -> int:
        return 1 if self.failed or not self.kept else 0


#: the most pixels one input image may have: its header is read (and this checked) before anything is decoded, so
#: a decompression bomb is one clear error, not PIL's exception or a machine out of memory (issue 29.5)
MAX_IMAGE_PIXELS = 100_000_000


def _writer(out: Path):
    """``write(path, data)`` for files below ``out``: through :class:`~worldgate.generate.outputs.OutputFolder` (no
    link followed at any component, a target that is a link refused, written atomically)."""
    folder = OutputFolder(out)

    def write(path: Path, data: bytes | str) -> None:
        rel = Path(path).relative_to(out)  # every path is made from out; anything else is a bug
        folder.write_bytes(rel, data.encode("utf-8") if isinstance(data, str) else data)

    return write


class _Cache:
    """Model-step results per image (keyed by the image's content hash) under ``OUT/build/<tag>/cache/<sha>/``: a step
    reruns only when its source (model id, prompt, seed) changed. File-given steps are read fresh every run."""

    def __init__(self, root: Path, write):
        self.root = root
        self.write = write
        self.reused = 0

    def get(self, sha: str, step: str, source: dict):
        f = self.root / sha[:24] / f"{step}.json"
        if f.is_file():
            d = json.loads(f.read_text())
            if d.get("source") == source:
                self.reused += 1
                return d
        return None

    def put(self, sha: str, step: str, source: dict, value: dict) -> dict:
        d = {"source": source, **value}
        self.write(self.root / sha[:24] / f"{step}.json", json.dumps(d, indent=1))
        return d

    def path(self, sha: str, name: str) -> Path:
        return self.root / sha[:24] / name


def _prompt_hash(name: str) -> str:
    return hashlib.sha256(load_prompt(name).encode()).hexdigest()[:16]


def _probe(path: Path) -> tuple[int, int]:
    """The image's (width, height) from its header alone (nothing decoded); BuildError naming it when it is not an
    image or holds more than :data:`MAX_IMAGE_PIXELS` pixels."""
    try:
        with warnings.catch_warnings():  # PIL's warning above its own limit: this function's check says it instead
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            with Image.open(path) as im:
                w, h = im.size
    except (OSError, ValueError, Image.DecompressionBombError) as e:
        raise BuildError(f"{path}: not a readable image ({e})") from None
    if w * h > MAX_IMAGE_PIXELS:
        raise BuildError(f"{path}: {w}x{h} = {w * h} pixels, over build-suite's {MAX_IMAGE_PIXELS} "
                         "(MAX_IMAGE_PIXELS; a decompression bomb?): downscale it and build again")
    return w, h


def _open(path: Path) -> Image.Image:
    """The image decoded as RGB, its size checked first (:func:`_probe`)."""
    _probe(path)
    try:
        with Image.open(path) as im:
            im.load()
            return im.convert("RGB")
    except (OSError, ValueError, Image.DecompressionBombError) as e:
        raise BuildError(f"{path}: not a readable image ({e})") from None


def build_suite(images, out, benchmark: str = "worldmark", domain: str = "real", *, captions=None, actions=None,
                intrinsics=None, third_view=None, third_intrinsics=None, targets=None, checklists=None,
                target_queries=None, trajectories=("LRLR",), vlm=None, editor=None, intrinsics_model=None,
                depth_model=None, detector=None, segmenter=None, detect_threshold: float = DETECT_THRESHOLD,
                filter: bool = True, dedup: bool = True, params: dict | None = None, device: str = "cpu",
                seed: int = 0) -> BuildResult:
    """Build a ``benchmark`` suite from ``images`` into ``out``; see docs/build-suite.md.

    Each ``captions`` / ``actions`` / ``intrinsics`` / ``third_view`` / ``third_intrinsics`` / ``targets`` /
    ``checklists`` is a file (or folder) given for that step; a step with no file runs its model: ``vlm`` (an HF id
    or a ChatVLM-like object with ``ask``), ``editor`` (an id or an ImageEditor-like object with ``edit``; third
    views are built only when ``third_view`` or ``editor`` is given), ``intrinsics_model`` (an id or an object with
    ``estimate``), ``depth_model`` (an id or a callable image -> depth: the filter's depth term). WorldMemBench:
    ``target_queries`` (a JSON file of text queries per image) runs ``detector`` (GroundingDINO) + ``segmenter`` (SAM2)
    ids, or a TextTargets-like object given as ``detector`` (``masks(image, rows)``); checklists not given as
    ``checklists`` are generated by ``vlm`` for each image with an ``event`` target."""
    if benchmark not in BENCHMARKS:
        raise BuildError(f"--benchmark {benchmark!r}: one of {', '.join(BENCHMARKS)}")
    if domain not in DOMAINS:
        raise BuildError(f"--domain {domain!r}: one of {', '.join(DOMAINS)}")
    paths = [Path(p) for p in images]
    if not paths:
        raise BuildError("no images given")
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        raise BuildError(f"images not found: {', '.join(missing[:5])}")
    if len({p.resolve() for p in paths}) != len(paths):
        raise BuildError("an image is given twice")
    stems = None
    if benchmark == "worldmembench":
        if not trajectories:
            raise BuildError("--trajectories: give at least one trajectory name (e.g. LRLR)")
        dup = sorted({t for t in trajectories if list(trajectories).count(t) > 1})
        if dup:
            raise BuildError(f"--trajectories names {dup[0]!r} twice: each trajectory gives every image one case "
                             f"(id '{{stem}}-{dup[0]}'), so give each name once")
        for t in trajectories:
            try:
                library.resolve(t)
            except TrajectoryError as e:
                raise BuildError(f"--trajectories {t!r}: {e}") from None
        try:
            stems = case_stems(paths, list(trajectories))
        except G.GivenError as e:
            raise BuildError(str(e)) from None
    elif target_queries or targets or checklists:
        raise BuildError("--targets, --target-queries and --checklists are WorldMemBench steps: add --benchmark "
                         "worldmembench")
    P = {**F.PARAMS, **(params or {})}
    unknown = set(P) - set(F.PARAMS)
    if unknown:
        raise BuildError(f"unknown build parameters {sorted(unknown)}; known: {', '.join(F.PARAMS)}")
    out = Path(out)
    n = len(paths)
    # the file-given rows are read (and checked), and every other given file found, before any model loads
    cap_rows = G.read_rows(captions, n, "--captions") if captions else None
    act_rows = G.action_rows(actions, n) if actions and benchmark == "worldmark" else None
    _check_given(intrinsics=intrinsics, third_view=third_view, third_intrinsics=third_intrinsics, targets=targets,
                 checklists=checklists, target_queries=target_queries)
    tag = domain if benchmark == "worldmark" else "worldmembench"
    work = out / "build" / tag
    write = _writer(out)
    cache = _Cache(work / "cache", write)
    models = _Models(vlm, editor, intrinsics_model, depth_model, device, detector, segmenter, detect_threshold)

    # every header is checked before any image is decoded; images are then decoded one at a time, per pass, and
    # never all held (a thousand large photos would not fit)
    entries = []
    for i, p in enumerate(paths):
        e = {"index": i, "image": str(p), "sha256": sha256_file(p), "size": list(_probe(p)), "status": None,
             "steps": {}}
        if stems:
            e["case_stem"] = stems[i]
        entries.append((e, p))
    # 1. traversability, 2. near-duplicates (over the images that pass)
    embs = []
    for e, p in entries:
        img = _open(p)
        depth = None
        if filter and models.depth_model is not None:
            src = {"model": models.depth_id}
            got = cache.get(e["sha256"], "depth", src)
            f = cache.path(e["sha256"], "depth.npy")
            if got is None or not f.is_file():
                f.parent.mkdir(parents=True, exist_ok=True)
                np.save(f, np.asarray(models.depth(img), np.float32))
                cache.put(e["sha256"], "depth", src, {"file": f.name})
            depth = np.load(f)
        t = F.traversability(img, depth, P)
        e["traversability"] = t
        if filter and not t["passed"]:
            e["status"], e["reason"] = "dropped", t["reason"]
        embs.append(F.thumbnail_embedding(img) if e["status"] is None else None)
    if dedup:
        for (e, _), d in zip(entries, F.near_duplicates(embs, P["dedup.max_distance"])):
            near = d["nearest"]
            e["dedup"] = {"distance": d["distance"], "nearest": None if near is None else entries[near][0]["image"],
                          "max_distance": P["dedup.max_distance"]}
            if d["duplicate_of"] is not None:
                e["status"] = "dropped"
                e["reason"] = (f"near-duplicate of {entries[d['duplicate_of']][0]['image']}: embedding distance "
                               f"{d['distance']:.4f} <= dedup.max_distance {P['dedup.max_distance']}")
    # 3. the steps, per kept image
    for e, p in entries:
        if e["status"] is not None:
            continue
        img = _open(p)
        try:
            _steps(e, img, benchmark, models, cache, cap_rows, act_rows, captions, actions, intrinsics, third_view,
                   third_intrinsics, seed, n)
            if benchmark == "worldmembench":
                memory_steps(e, img, models, cache, targets, target_queries, checklists, seed, models.vlm_id)
            e["status"] = "kept"
        except (StepError, AnswerError, G.GivenError) as err:
            e["status"], e["error"] = "failed", str(err)
    kept = [(e, p) for e, p in entries if e["status"] == "kept"]  # (entry, image path)
    for k, (e, _) in enumerate(kept):
        e["out_index"] = k
    if benchmark == "worldmark":
        n_cases = _write_worldmark(out, domain, kept, write)
    else:
        n_cases = write_worldmembench(out, kept, trajectories, write)
    res = BuildResult(out=out, benchmark=benchmark, kept=[e["image"] for e, _ in kept],
                      dropped={e["image"]: e["reason"] for e, _ in entries if e["status"] == "dropped"},
                      failed={e["image"]: e["error"] for e, _ in entries if e["status"] == "failed"},
                      cases=n_cases, log=work / "build_log.jsonl", reused=cache.reused)
    write(res.log, "".join(json.dumps(e, default=str) + "\n" for e, _ in entries))
    write(work / "build.json", json.dumps({
        "version": BUILD_VERSION, "benchmark": benchmark, "domain": domain if benchmark == "worldmark" else None,
        "params": P, "filter": filter, "dedup": dedup, "images": n, "kept": len(res.kept), "dropped": len(res.dropped),
        "failed": len(res.failed), "cases": n_cases, "trajectories": list(trajectories) if benchmark != "worldmark"
        else None, "prompts": {**{k: _prompt_hash(k) for k in PROMPT_NAMES},
                               **({"generate_checklist": checklist_prompt_sha()} if benchmark != "worldmark" else {})},
        "given": {k: str(v) for k, v in {"captions": captions, "actions": actions, "intrinsics": intrinsics,
                                         "third_view": third_view, "third_intrinsics": third_intrinsics,
                                         "targets": targets, "checklists": checklists,
                                         "target_queries": target_queries}.items() if v},
        "models": models.ids()}, indent=1))
    return res


class _Models:
    """Model steps, loaded on first use (once per build): an id is loaded from the HF cache, an object is used as is."""

    def __init__(self, vlm, editor, intrinsics_model, depth_model, device, detector=None, segmenter=None,
                 detect_threshold=DETECT_THRESHOLD):
        self._vlm, self._editor, self._k, self.depth_model, self.device = vlm, editor, intrinsics_model, depth_model, device
        self.depth_id = depth_model if isinstance(depth_model, str) else getattr(depth_model, "model_id", "custom")
        self._depth_model = None
        self._targets = detector if detector is not None and not isinstance(detector, str) else None
        self._target_ids = (detector, segmenter, float(detect_threshold))

    @staticmethod
    def _id(x, default=None):
        return x if isinstance(x, str) else model_label(x) if x is not None else default

    def ids(self) -> dict:
        out = {"vlm": self._id(self._vlm), "editor": self._id(self._editor),
               "intrinsics": self._id(self._k), "depth": self._id(self.depth_model)}
        if self._targets is not None:
            out.update(detector=self._targets.detector_id, segmenter=self._targets.segmenter_id)
        return out

    @property
    def targets(self) -> TextTargets:
        """GroundingDINO + SAM2 (``--target-queries``); the models themselves load on the first query."""
        if self._targets is None:
            det, seg, thr = self._target_ids
            self._targets = TextTargets(det, seg, device=self.device, threshold=thr)
        return self._targets

    @property
    def vlm(self):
        if self._vlm is None or isinstance(self._vlm, str):
            self._vlm = ChatVLM(self._vlm or DEFAULT_VLM, device=self.device)
        return self._vlm

    @property
    def vlm_id(self) -> str:
        return self._id(self._vlm, DEFAULT_VLM)

    @property
    def editor(self):
        if isinstance(self._editor, str):
            self._editor = ImageEditor(self._editor, device=self.device)
        return self._editor

    @property
    def intrinsics(self):
        if self._k is None or isinstance(self._k, str):
            self._k = DA3Intrinsics(device=self.device, **({"model_id": self._k} if self._k else {}))
        return self._k

    def depth(self, img):
        if callable(self.depth_model):
            return self.depth_model(img)
        return F.relative_depth(img, self.depth_model, self.device)


def _check_given(**files) -> None:
    """Every file given for a step is there (and a JSON file parses) before any model loads: a typo costs nothing."""
    for key, path in files.items():
        if not path:
            continue
        flag, p = "--" + key.replace("_", "-"), Path(path)
        if key == "third_view":
            if not p.is_dir():
                raise G.GivenError(f"{flag} {p} is not a folder of images named like the first-view images")
        elif not p.exists():
            raise G.GivenError(f"{flag} {p} not found")
        elif key in ("targets", "checklists", "target_queries"):
            G.load_json(p, flag)


def _steps(e, img, benchmark, M: _Models, cache: _Cache, cap_rows, act_rows, captions, actions, intrinsics,
           third_view, third_intrinsics, seed, n) -> None:
    i, sha, p = e["index"], e["sha256"], Path(e["image"])
    steps = e["steps"]
    # caption (scene)
    if cap_rows is not None:
        e["caption"] = G.scene_caption(cap_rows[i])
        steps["caption"] = {"source": f"file:{captions}:{i + 1}"}
    else:
        src = {"model": M.vlm_id, "prompt": "caption_scene", "prompt_sha": _prompt_hash("caption_scene"), "seed": seed}
        got = cache.get(sha, "caption", src) or cache.put(sha, "caption", src, caption(M.vlm, img, seed=seed))
        e["caption"] = G.scene_caption(got["value"])
        steps["caption"] = {"source": f"model:{M.vlm_id}", "prompt": "worldmark/build/caption_scene.txt",
                            "raw": got["raw"]}
    # action selection (WorldMark only; from the first-person image, as the prompt says)
    if benchmark == "worldmark":
        if act_rows is not None:
            e["actions"] = act_rows[i]
            steps["actions"] = {"source": f"file:{actions}:{i + 1}"}
        else:
            src = {"model": M.vlm_id, "prompt": "select_actions", "prompt_sha": _prompt_hash("select_actions"),
                   "seed": seed}
            got = cache.get(sha, "actions", src) or cache.put(sha, "actions", src, select_actions(M.vlm, img, seed))
            e["actions"] = got["value"]
            steps["actions"] = {"source": f"model:{M.vlm_id}", "prompt": "worldmark/build/select_actions.txt",
                                "raw": got["raw"], "retried": got["retried"]}
    # intrinsics
    size = tuple(e["size"])
    e["intrinsics"], steps["intrinsics"] = _intrinsics(img, sha, i, p, size, intrinsics, M, cache, "intrinsics", n)
    # third view (WorldMark, when asked for)
    if benchmark == "worldmark" and (third_view or M._editor is not None):
        if third_view:
            tp = G.third_view_for(third_view, p, i)
            timg = _open(tp)
            e["third"] = {"image": str(tp), "copy": True}
            steps["third_view"] = {"source": f"file:{tp}"}
        else:
            src = {"model": M._id(M._editor), "prompt": "third_person_edit",
                   "prompt_sha": _prompt_hash("third_person_edit"), "seed": seed}
            got = cache.get(sha, "third_view", src)
            tp = cache.path(sha, "third.png")
            if got is None or not tp.is_file():
                r = M.editor.edit(img, seed=seed)
                if r["image"].size != img.size:
                    raise StepError(f"the editor returned {r['image'].size}, not the input's {img.size}")
                tp.parent.mkdir(parents=True, exist_ok=True)
                r["image"].save(tp)
                got = cache.put(sha, "third_view", src, {"produced": r["produced"], "resized": r["resized"]})
            timg = _open(tp)
            e["third"] = {"image": str(tp), "copy": True}
            steps["third_view"] = {"source": f"model:{src['model']}", "prompt": "worldmark/build/third_person_edit.txt",
                                   "produced": got["produced"], "resized_to_input": got["resized"]}
        tsize = timg.size
        e["third"]["size"] = list(tsize)
        if cap_rows is None:  # the main character of the composite, with WorldMark's second caption prompt: logged
            tsha = sha256_file(Path(e["third"]["image"]))  # (the official third-view rows carry the scene caption only)
            src = {"model": M.vlm_id, "prompt": "caption_character", "prompt_sha": _prompt_hash("caption_character"),
                   "seed": seed}
            got = cache.get(tsha, "character", src) or cache.put(
                tsha, "character", src, caption(M.vlm, timg, "caption_character", seed=seed))
            e["third"]["character_caption"] = got["value"]
            steps["character_caption"] = {"source": f"model:{M.vlm_id}",
                                          "prompt": "worldmark/build/caption_character.txt", "raw": got["raw"]}
        if third_intrinsics:
            k, s = _intrinsics(timg, sha256_file(Path(e["third"]["image"])), i, Path(e["third"]["image"]), tsize,
                               third_intrinsics, M, cache, "third_intrinsics", n)
        elif intrinsics is None:  # estimated: estimate the composite too
            k, s = _intrinsics(timg, sha256_file(Path(e["third"]["image"])), i, Path(e["third"]["image"]), tsize, None, M,
                               cache, "intrinsics", None)
        else:  # the same camera (WorldMark: the composite is the same frame), scaled to the composite's size
            sx, sy = tsize[0] / size[0], tsize[1] / size[1]
            fx, fy, cx, cy = e["intrinsics"]
            k = [fx * sx, fy * sy, (cx + 0.5) * sx - 0.5, (cy + 0.5) * sy - 0.5]
            s = {"source": "first-view intrinsics" + ("" if (sx, sy) == (1, 1) else f" scaled by ({sx:.4f}, {sy:.4f})")}
        e["third"]["intrinsics"], steps["third_intrinsics"] = k, s


def _intrinsics(img, sha, i, p, size, given, M: _Models, cache: _Cache, step: str, n):
    if given:
        k, where = G.intrinsics_for(given, p, i, n, size)
        return k, {"source": where}
    src = {"model": M._id(M._k, DEFAULT_INTRINSICS), "estimator": "DA3 camera head"}
    got = cache.get(sha, step, src)
    if got is None:
        got = cache.put(sha, step, src, {"value": [float(v) for v in M.intrinsics.estimate(img)]})
    return got["value"], {"source": f"model:{src['model']}", "estimator": "DA3 camera head"}


# ------------------------------------------------------------------------------------------------------- writers
def _clear(folder: Path, pattern: str) -> None:
    if folder.is_dir() and not folder.is_symlink():  # a planted link: nothing deleted through it (the write refuses it)
        for f in folder.glob(pattern):
            if f.is_file():
                f.unlink()


def _write_worldmark(out: Path, domain: str, kept, write) -> int:
    """WorldMark's arena_inputs layout for one domain: ``{view}_view/{domain}/NNN.jpg`` (the input's bytes, never
    re-encoded: the official set also holds PNG data under .jpg names), ``prompt_{domain}.txt``,
    ``{domain}_action.txt`` (rows "a, b, c, d, e", identical in both views) and ``{domain}_intrinsics/``. The other
    domain's files, when absent, are written empty so ``--suite worldmark --data OUT`` reads the folder. A view this
    build does not write (no ``--third-view`` / ``--editor``) is emptied for this domain: no stale images are read."""
    views = ["first"] + (["third"] if kept and all("third" in e for e, _ in kept) else [])
    for view in VIEWS:  # this domain's files of every view are the build's: a view it does not build is emptied
        vdir = out / f"{view}_view"  # (a rebuild without --third-view leaves no stale third view to be read)
        _clear(vdir / domain, "[0-9][0-9][0-9].jpg")
        _clear(vdir / f"{domain}_intrinsics", "[0-9][0-9][0-9]_intrinsics.npy")
        if view not in views:
            for name in (f"prompt_{domain}.txt", f"{domain}_action.txt"):
                if (vdir / name).exists():
                    write(vdir / name, "")
            continue
        (vdir / domain).mkdir(parents=True, exist_ok=True)
        (vdir / f"{domain}_intrinsics").mkdir(parents=True, exist_ok=True)
        rows, acts = [], []
        for k, (e, _) in enumerate(kept):
            src = Path(e["image"] if view == "first" else e["third"]["image"])
            write(vdir / domain / f"{k:03d}.jpg", src.read_bytes())
            kk = e["intrinsics"] if view == "first" else e["third"]["intrinsics"]
            buf = io.BytesIO()
            np.save(buf, np.asarray(kk, np.float32))
            write(vdir / f"{domain}_intrinsics" / f"{k:03d}_intrinsics.npy", buf.getvalue())
            rows.append(G.view_caption(e["caption"], view))
            acts.append(format_action_ids(e["actions"]))
        write(vdir / f"prompt_{domain}.txt", "\n".join(rows))
        write(vdir / f"{domain}_action.txt", "\n".join(acts))
    for view in VIEWS:
        for d in DOMAINS:
            for name in (f"prompt_{d}.txt", f"{d}_action.txt"):
                f = out / f"{view}_view" / name
                if not f.exists():
                    write(f, "")
    return sum(len(e["actions"]) for e, _ in kept) * len(views)
