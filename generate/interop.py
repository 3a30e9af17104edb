"""WorldMark delivery interop: ``worldgate export RUN --format worldmark`` and ``worldgate import DIR --format worldmark``.

The official delivery (AlayaLab/WorldMark ``.claude/skills/world-model-adapter/references/output_spec.md`` §2-3) is one
mp4 per (image, action) in the canonical layout ``{domain}/{view}/{MODEL}/{image:03d}_{action:03d}.mp4`` (``view``
shortened to ``first``/``third``, ``MODEL`` an upper-case tag) plus a provenance ``manifest.jsonl`` with *measured*
achieved values and half-open per-key frame ranges into the produced video.

Export writes that layout (hard links where the file system allows, copies otherwise) and, so that a worldgate run
survives the round trip exactly, a sidecar ``worldgate/{case_id}/`` holding the record's ``meta.json``,
``trajectory.json``, ``poses.npy`` and ``native/`` (``check_delivery.py`` is pointed at ``{domain}/{view}/{MODEL}``, so
the sidecar never interferes). Import turns a delivery back into records: sidecar present -> the identical record;
a foreign delivery (no sidecar) -> a record built from the arena inputs (``--arena``: prompt, intrinsics, image) and
the action protocol.

Several MODEL folders: every video of every model is imported into the one run, and a foreign video's case id carries
its model, ``{MODEL}-{view}-{domain}-{image:03d}_{action:03d}`` (e.g. ``ENGINE-first-real-000_001``; the record's
adapter name is the MODEL tag in lower case); a sidecar record keeps its worldgate case id. Two videos that would
become one case id are an error for the second (never a silent skip); a record already complete from an earlier
import of the same delivery is skipped (resume).

Key boundaries of a foreign video (``meta.json["key_boundaries"]`` names the rule used): ``"manifest"`` when the
manifest gives the key's frame ranges and they fit the measured video (each key's commanded time stretched over its
range); else ``"commanded-duration-at-measured-fps"``: key k covers the frames i with t_k <= i / fps < t_{k+1}, t_k
the commanded key boundaries (20 s per key in WorldMark's protocol) and fps the video's measured rate, clipped to the
frames the video has (commanded poses at i / fps). A video shorter or longer than its command (commanded duration x
measured fps frames) gets a caveat saying by how much, which keys it never reaches or cuts short, or which frames
come after the last key (they hold the final commanded pose). WorldMark-protocol scoring keeps its own even split of
the flow timeline (docs/worldmark.md); these boundaries serve every other metric and the report.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path

import numpy as np

from worldgate import __version__
from worldgate.trajectories import library
from worldgate.trajectories.suites import CASE_ID, Case
from worldgate.trajectories.worldmark import WORLDMARK_DOMAINS, WORLDMARK_VIEWS, worldmark_suite

from .records import RecordWriter, is_complete, list_records, read_meta, record_dir, trajectory_json
from .video import probe_video, sha256_file

FORMATS = ("worldmark",)
SIDECAR = "worldgate"
_NAME = re.compile(r"^(\d{3})_(\d{3})\.mp4$")
#: the rules ``meta.json["key_boundaries"]`` names for a foreign video
MANIFEST_RULE, COMMANDED_RULE = "manifest", "commanded-duration-at-measured-fps"
#: how a foreign video's case id is formed (one run for every MODEL folder of a delivery)
CASE_ID_RULE = "{MODEL}-{view}-{domain}-{image:03d}_{action:03d}"


class InteropError(ValueError):
    pass


def _check_format(fmt: str) -> None:
    if fmt not in FORMATS:
        raise InteropError(f"unknown delivery format {fmt!r}; known: {', '.join(FORMATS)}")


def model_tag(name: str) -> str:
    tag = re.sub(r"[^A-Z0-9]+", "_", name.upper()).strip("_")
    if not tag:
        raise InteropError(f"cannot make a WorldMark MODEL tag from {name!r}; pass --model-tag")
    return tag


def _link_or_copy(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    if dst.exists():
        dst.unlink()
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


@dataclass
class ExportResult:
    out: Path
    exported: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    tag: str | None = None  # the MODEL folder name the records went to


def export_worldmark(run: str | Path, out: str | Path, tag: str | None = None, fmt: str = "worldmark") -> ExportResult:
    """Write the WorldMark delivery layout of every complete rollout record of ``run`` under ``out``."""
    _check_format(fmt)
    run, out = Path(run), Path(out)
    if not run.is_dir():
        raise FileNotFoundError(f"run folder {run} not found")
    res = ExportResult(out=out)
    rows = []
    for rec in list_records(run, "rollout"):
        meta = read_meta(rec)
        tags = (meta.get("case") or {}).get("tags") or {}
        missing = [k for k in ("view", "domain", "image", "action_id") if k not in tags]
        if missing:
            res.skipped[rec.name] = f"not a WorldMark case (tags lack {missing})"
            continue
        mtag = model_tag(tag or meta["adapter"]["name"])
        view, domain = tags["view"], tags["domain"]
        if view not in WORLDMARK_VIEWS or domain not in WORLDMARK_DOMAINS:  # tags become folder names: only these
            res.skipped[rec.name] = (f"tags view={view!r}, domain={domain!r} are not WorldMark's "
                                     f"({'/'.join(WORLDMARK_VIEWS)}, {'/'.join(WORLDMARK_DOMAINS)})")
            continue
        try:
            img, aid = int(tags["image"]), int(tags["action_id"])
        except (TypeError, ValueError):
            res.skipped[rec.name] = f"tags image={tags['image']!r}, action_id={tags['action_id']!r} are not integers"
            continue
        if not (0 <= img <= 999 and 1 <= aid <= 15):
            res.skipped[rec.name] = f"image {img} / action id {aid} outside WorldMark's 000-999 / 1-15"
            continue
        rel = Path(domain) / view / mtag / f"{img:03d}_{aid:03d}.mp4"
        res.tag = mtag
        _link_or_copy(rec / "video.mp4", out / rel)
        side = out / SIDECAR / rec.name
        if side.exists():
            shutil.rmtree(side)
        side.mkdir(parents=True)
        for item in rec.iterdir():  # everything but the video (which is the delivery itself)
            if item.name == "video.mp4":
                continue
            if item.is_dir():
                shutil.copytree(item, side / item.name)
            else:
                shutil.copy2(item, side / item.name)
        traj = json.loads((rec / "trajectory.json").read_text())
        ach = meta.get("achieved") or {}
        info = (meta.get("adapter") or {}).get("info") or {}
        intr = meta.get("intrinsics") or {}
        regime = intr.get("regime")
        rows.append({
            "model": mtag, "view": view, "domain": domain, "image": f"{img:03d}", "action_id": aid,
            "keys": "".join(_key(s) for s in traj["segments"]),
            "video": str(rel),
            "native": {"format": info.get("control"), "files": sorted((meta.get("files") or {}).keys() - {"video.mp4"})},
            "requested": {"segments": len(traj["segments"]), "target_sec": sum(s["seconds"] for s in traj["segments"])},
            "achieved": {"width": ach.get("width"), "height": ach.get("height"), "fps": ach.get("fps"),
                         "fps_source": info.get("fps_source"), "frames": ach.get("frames"),
                         "sec": ach.get("seconds", (ach.get("frames") or 0) / (ach.get("fps") or 1)), "measured": True},
            "segments": [{"keys": _key(s), "frames": s["frames"]} for s in traj["segments"]],
            "intrinsics": {"supplied": regime == 4, "regime": regime, "transform": intr.get("transform", "n/a"),
                           "src_fov_deg": intr.get("case_hfov_deg"), "model_fov_deg": intr.get("native_hfov_deg")},
            "prompt": {"source": meta.get("prompt_source")},
            "caveats": meta.get("caveats", []),
            "worldgate": {"case_id": rec.name, "sidecar": f"{SIDECAR}/{rec.name}"},
        })
        res.exported.append(rec.name)
    out.mkdir(parents=True, exist_ok=True)
    (out / "manifest.jsonl").write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))
    return res


def _key(seg: dict) -> str:
    """The protocol letter of a segment (``W``, ``L``...); combined or held segments join their channels."""
    parts = [v for v in (seg["move"], seg["look"]) if v != "idle"]
    return "+".join(parts) or "_"


@dataclass
class ImportResult:
    out: Path
    imported: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    models: list[str] = field(default_factory=list)  # the MODEL folders found, in order
    case_id_rule: str = CASE_ID_RULE


def foreign_case_id(mtag: str, view: str, domain: str, img: int, aid: int) -> str:
    """The case id of a video imported without a worldgate sidecar: it carries the model (:data:`CASE_ID_RULE`)."""
    check_model_folder(mtag)
    return f"{mtag}-{view}-{domain}-{int(img):03d}_{int(aid):03d}"


def check_model_folder(mtag: str) -> str:
    """A MODEL folder name becomes part of case ids and folder names: only [A-Za-z0-9_.-], no '..'."""
    if not CASE_ID.fullmatch(mtag) or ".." in mtag or len(mtag) > 100:
        raise InteropError(f"MODEL folder {mtag!r} is not a usable model tag: use 1-100 characters from "
                           "[A-Za-z0-9_.-], starting with a letter or digit, without '..'")
    return mtag


def _delivery_videos(root: Path):
    """(domain, view, MODEL, image, action, path) for every canonical-layout mp4 under ``root``."""
    for p in sorted(root.glob("*/*/*/*.mp4")):
        m = _NAME.match(p.name)
        domain, view, mtag = p.parts[-4], p.parts[-3], p.parts[-2]
        if m and domain in ("real", "style") and view in ("first", "third"):
            yield domain, view, mtag, int(m.group(1)), int(m.group(2)), p


def import_worldmark(delivery: str | Path, out: str | Path, arena: str | Path | None = None,
                     fmt: str = "worldmark") -> ImportResult:
    """Turn a WorldMark delivery into records under ``out`` that ``evaluate`` scores: every video of every MODEL
    folder, foreign case ids ``{MODEL}-{view}-{domain}-{image:03d}_{action:03d}`` (see the module docstring)."""
    _check_format(fmt)
    delivery, out = Path(delivery), Path(out)
    if not delivery.is_dir():
        raise FileNotFoundError(f"delivery folder {delivery} not found")
    manifest = {}
    if (delivery / "manifest.jsonl").is_file():
        for ln in (delivery / "manifest.jsonl").read_text().splitlines():
            if ln.strip():
                r = json.loads(ln)
                if isinstance(r, dict):
                    manifest[r.get("video")] = r
    videos = list(_delivery_videos(delivery))
    if not videos:
        raise InteropError(f"{delivery}: no videos in the WorldMark layout {{domain}}/{{view}}/{{MODEL}}/NNN_AAA.mp4")
    arena_cases = None
    res = ImportResult(out=out)
    out.mkdir(parents=True, exist_ok=True)
    taken: dict[str, str] = {}  # case id -> the video it came from in this import
    for domain, view, mtag, img, aid, path in videos:
        rel = str(path.relative_to(delivery))
        if mtag not in res.models:
            res.models.append(mtag)
        row = manifest.get(rel, {})
        wg = row.get("worldgate") if isinstance(row.get("worldgate"), dict) else {}
        side = wg.get("sidecar")
        try:
            case_id = wg.get("case_id") or foreign_case_id(mtag, view, domain, img, aid)
            record_dir(out, case_id)  # a safe folder name inside out, or an error naming it
        except (InteropError, ValueError) as e:
            res.failed[rel] = f"{type(e).__name__}: {e}"
            continue
        if case_id in taken:
            res.failed[rel] = (f"InteropError: case id {case_id!r} is already taken by {taken[case_id]} in this "
                               "delivery (two videos for one case): not imported")
            continue
        taken[case_id] = rel
        if is_complete(record_dir(out, case_id)):
            res.skipped.append(case_id)
            continue
        try:
            if side and (delivery / side / "meta.json").is_file():
                _import_sidecar(delivery / side, path, out, case_id)
            else:
                if arena_cases is None:
                    arena_cases = _arena_cases(arena)
                import_video(path, out, case_id, mtag, (view, domain, img, aid), row, arena_cases)
            res.imported.append(case_id)
        except Exception as e:  # noqa: BLE001  one bad video never stops the import
            res.failed[case_id] = f"{type(e).__name__}: {e}"
    return res


def _import_sidecar(side: Path, video: Path, out: Path, case_id: str) -> None:
    meta = json.loads((side / "meta.json").read_text())
    want = (meta.get("files") or {}).get("video.mp4", {}).get("sha256")
    if want and sha256_file(video) != want:
        raise InteropError(f"{video}: content differs from the exported record (sha256 mismatch)")
    rec = RecordWriter(out, case_id)
    try:
        shutil.copy2(video, rec.path("video.mp4"))
        for item in side.iterdir():
            if item.name == "meta.json":
                continue
            if item.is_dir():
                shutil.copytree(item, rec.path(item.name))
            else:
                shutil.copy2(item, rec.path(item.name))
        for k in ("files", "complete", "record_format"):
            meta.pop(k, None)
        rec.commit(meta)
    except BaseException:
        rec.abort()
        raise


def load_arena_cases(arena) -> dict:
    """The WorldMark arena's cases by their ids (``{view}-{domain}-{image:03d}_{action:03d}``); {} without one."""
    if arena is None:
        return {}
    return {c.id: c for c in worldmark_suite(data=arena)}


_arena_cases = load_arena_cases


@dataclass
class _ImportedPlan:
    fps: float
    n_frames: int
    segment_frames: list


def key_boundaries(trajectory, frames: int, fps: float, manifest_segments=None) -> tuple[list, str, list[str]]:
    """(per-key half-open frame ranges, the rule used, caveats) for a video of ``frames`` frames at its measured
    ``fps`` commanded ``trajectory`` (see the module docstring): the manifest's ranges when they fit, else each key's
    commanded duration at the measured fps, clipped to the video; a video shorter or longer than its command is
    reported in the caveats."""
    n = len(trajectory.segments)
    caveats = []
    segs = None
    if manifest_segments:
        try:
            segs = [(int(s["frames"][0]), int(s["frames"][1])) for s in manifest_segments]
        except (KeyError, IndexError, TypeError, ValueError):
            segs = None
        if segs is not None and (len(segs) != n or segs[0][0] < 0 or segs[-1][1] > frames
                                 or any(b < a for a, b in segs) or any(b0 > a1 for (_, b0), (a1, _) in pairwise(segs))):
            segs = None
        if segs is None:
            caveats.append(f"manifest segments did not fit the measured video ({frames} frames, {n} keys): key "
                           f"boundaries from each key's commanded duration at the measured fps instead")
    rule = MANIFEST_RULE if segs is not None else COMMANDED_RULE
    if segs is None:
        segs = [tuple(x) for x in trajectory.segment_frames(fps, frames)]
    commanded = trajectory.n_frames(fps)
    label = [f"{k} ({s.token})" for k, s in enumerate(trajectory.segments)]
    if frames != commanded:
        side = "shorter" if frames < commanded else "longer"
        msg = (f"video {side} than its command: {frames} frames = {frames / fps:.2f} s at the measured {fps:g} fps, "
               f"commanded {trajectory.duration:g} s = {commanded} frames")
        if rule == MANIFEST_RULE:
            msg += "; key boundaries from the manifest"
        elif frames < commanded:
            full = trajectory.segment_frames(fps, commanded)
            never = [label[k] for k, (a, b) in enumerate(segs) if b <= a]
            cut = [f"{label[k]}: {b - a} of {full[k][1] - full[k][0]} frames" for k, (a, b) in enumerate(segs)
                   if a < b < full[k][1]]
            if cut:
                msg += "; key cut short: " + ", ".join(cut)
            if never:
                msg += "; keys the video never reaches (no frames): " + ", ".join(never)
        else:
            msg += (f"; frames {commanded}-{frames - 1} ({(frames - commanded) / fps:.2f} s) come after the last "
                    "key and hold its final commanded pose")
        caveats.append(msg)
    return [(int(a), int(b)) for a, b in segs], rule, caveats


def import_video(video: Path, out: Path, case_id: str, mtag: str, key, row: dict | None = None,
                 arena_cases: dict | None = None, extra_caveats=(), extra_meta: dict | None = None,
                 info=None) -> Path:
    """One foreign video as a record ``out/case_id`` (the trajectory from its WorldMark action id, the arena case
    where given, key boundaries by :func:`key_boundaries`); ``extra_meta`` is merged into its meta.json; ``info``: the
    video's :func:`probe_video` result where the caller has it (else it is measured here)."""
    row = row or {}
    view, domain, img, aid = key
    if aid not in library.WORLDMARK_PROTOCOL:
        raise InteropError(f"{video.name}: action id {aid} is not in the WorldMark protocol (1..15)")
    arena_case_id = f"{view}-{domain}-{img:03d}_{aid:03d}"  # the arena's own ids carry no model
    case = (arena_cases or {}).get(case_id) or (arena_cases or {}).get(arena_case_id)
    caveats = []
    if case is None:
        case = Case(id=case_id, suite="worldmark", trajectory=library.worldmark(aid), view=view,
                    tags={"view": view, "domain": domain, "image": img, "action_id": aid})
        caveats.append("imported without --arena: no prompt or intrinsics for this case")
    tags = dict(case.tags or {}, model=mtag)
    ach = info if info is not None else probe_video(video)
    if ach.frames <= 1 or not ach.fps:
        raise InteropError(f"{video}: {ach.frames} frames at {ach.fps} fps cannot be scored")
    traj = case.trajectory
    segs, rule, notes = key_boundaries(traj, ach.frames, ach.fps, row.get("segments"))
    caveats += notes
    plan = _ImportedPlan(fps=ach.fps, n_frames=ach.frames, segment_frames=segs)
    if rule == MANIFEST_RULE:  # each key's commanded time stretched over its measured frame range
        poses = np.zeros((ach.frames, 4, 4))
        bounds = traj.boundaries()
        for (a, b), t0, t1 in zip(segs, bounds[:-1], bounds[1:]):
            for i in range(a, b):
                poses[i] = traj.pose_at(t0 + (t1 - t0) * (i - a) / max(1, b - a))
        poses[segs[-1][1]:] = traj.pose_at(bounds[-1])
        poses[:segs[0][0]] = traj.pose_at(0.0)
    else:  # commanded poses at the measured frame times i / fps (past the end: the final pose)
        poses = traj.poses(ach.fps, ach.frames)
    rec = RecordWriter(out, case_id)
    try:
        shutil.copy2(video, rec.path("video.mp4"))
        np.save(rec.path("poses.npy"), poses, allow_pickle=False)
        tj = trajectory_json(case, plan)
        for ph in tj["phases"]:  # phases follow the key ranges, not nominal seconds
            if ph["segments"]:
                ph["frames"] = [int(segs[ph["segments"][0]][0]), int(segs[ph["segments"][-1]][1])]
        rec.write_json("trajectory.json", tj)
        caveats += [str(c) for c in row.get("caveats", []) or []] + [str(c) for c in extra_caveats]
        case_d = dict(case.to_dict(), id=case_id, tags=tags)
        meta = {
            "kind": "rollout", "case_id": case_id, "suite": case.suite, "case": case_d,
            "adapter": {"name": mtag.lower(), "version": "imported", "info": {}},
            "requested": {"width": ach.width, "height": ach.height, "fps": ach.fps, "frames": ach.frames},
            "achieved": ach.to_dict(), "seed": None, "prompt": case.prompt, "prompt_source": case.prompt_source,
            "intrinsics": {"regime": (row.get("intrinsics") or {}).get("regime"), "case": case.intrinsics,
                           "imported": row.get("intrinsics")},
            "key_boundaries": rule,
            "commanded": {"seconds": float(traj.duration), "frames": int(traj.n_frames(ach.fps))},
            "caveats": caveats, "imported_from": str(video), "worldgate_version": __version__,
        }
        meta.update(extra_meta or {})
        rec.commit(meta)
    except BaseException:
        rec.abort()
        raise
    return record_dir(out, case_id)
