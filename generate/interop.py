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
the action protocol, with the manifest's segment frames when given, else keys split evenly over the measured frames.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from worldgate import __version__
from worldgate.trajectories import library
from worldgate.trajectories.suites import Case
from worldgate.trajectories.worldmark import WORLDMARK_DOMAINS, WORLDMARK_VIEWS, worldmark_suite

from .records import RecordWriter, is_complete, list_records, read_meta, record_dir, trajectory_json
from .video import probe_video, sha256_file

FORMATS = ("worldmark",)
SIDECAR = "worldgate"
_NAME = re.compile(r"^(\d{3})_(\d{3})\.mp4$")


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


def _delivery_videos(root: Path):
    """(domain, view, MODEL, image, action, path) for every canonical-layout mp4 under ``root``."""
    for p in sorted(root.glob("*/*/*/*.mp4")):
        m = _NAME.match(p.name)
        domain, view, mtag = p.parts[-4], p.parts[-3], p.parts[-2]
        if m and domain in ("real", "style") and view in ("first", "third"):
            yield domain, view, mtag, int(m.group(1)), int(m.group(2)), p


def import_worldmark(delivery: str | Path, out: str | Path, arena: str | Path | None = None,
                     fmt: str = "worldmark") -> ImportResult:
    """Turn a WorldMark delivery into records under ``out`` that ``evaluate`` scores."""
    _check_format(fmt)
    delivery, out = Path(delivery), Path(out)
    if not delivery.is_dir():
        raise FileNotFoundError(f"delivery folder {delivery} not found")
    manifest = {}
    if (delivery / "manifest.jsonl").is_file():
        for ln in (delivery / "manifest.jsonl").read_text().splitlines():
            if ln.strip():
                r = json.loads(ln)
                manifest[r.get("video")] = r
    videos = list(_delivery_videos(delivery))
    if not videos:
        raise InteropError(f"{delivery}: no videos in the WorldMark layout {{domain}}/{{view}}/{{MODEL}}/NNN_AAA.mp4")
    arena_cases = None
    res = ImportResult(out=out)
    out.mkdir(parents=True, exist_ok=True)
    for domain, view, mtag, img, aid, path in videos:
        rel = str(path.relative_to(delivery))
        row = manifest.get(rel, {})
        side = row.get("worldgate", {}).get("sidecar")
        case_id = (row.get("worldgate") or {}).get("case_id") or f"{view}-{domain}-{img:03d}_{aid:03d}"
        if is_complete(record_dir(out, case_id)):
            res.skipped.append(case_id)
            continue
        try:
            if side and (delivery / side / "meta.json").is_file():
                _import_sidecar(delivery / side, path, out, case_id)
            else:
                if arena_cases is None:
                    arena_cases = _arena_cases(arena)
                _import_foreign(path, row, mtag, arena_cases, (view, domain, img, aid), out, case_id)
            res.imported.append(case_id)
        except Exception as e:  # one bad video never stops the import
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


def _arena_cases(arena) -> dict:
    if arena is None:
        return {}
    return {c.id: c for c in worldmark_suite(data=arena)}


@dataclass
class _ImportedPlan:
    fps: float
    n_frames: int
    segment_frames: list


def _import_foreign(video: Path, row: dict, mtag: str, arena_cases: dict, key, out: Path, case_id: str) -> None:
    view, domain, img, aid = key
    if aid not in library.WORLDMARK_PROTOCOL:
        raise InteropError(f"{video.name}: action id {aid} is not in the WorldMark protocol (1..15)")
    case = arena_cases.get(case_id)
    caveats = []
    if case is None:
        case = Case(id=case_id, suite="worldmark", trajectory=library.worldmark(aid), view=view,
                    tags={"view": view, "domain": domain, "image": img, "action_id": aid})
        caveats.append("imported without --arena: no prompt or intrinsics for this case")
    ach = probe_video(video)
    if ach.frames <= 1 or not ach.fps:
        raise InteropError(f"{video}: {ach.frames} frames at {ach.fps} fps cannot be scored")
    nseg = len(case.trajectory.segments)
    segs = [tuple(s["frames"]) for s in row.get("segments", [])]
    if len(segs) != nseg or segs[0][0] < 0 or segs[-1][1] > ach.frames or any(b < a for a, b in segs):
        if row.get("segments"):
            caveats.append("manifest segments did not fit the measured video; keys split evenly instead")
        edges = np.round(np.linspace(0, ach.frames, nseg + 1)).astype(int)
        segs = [(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:])]
    plan = _ImportedPlan(fps=ach.fps, n_frames=ach.frames, segment_frames=segs)
    # commanded poses at the produced frames: each key's 20 s stretched over its measured frame range
    poses = np.zeros((ach.frames, 4, 4))
    bounds = case.trajectory.boundaries()
    for (a, b), t0, t1 in zip(segs, bounds[:-1], bounds[1:]):
        for i in range(a, b):
            poses[i] = case.trajectory.pose_at(t0 + (t1 - t0) * (i - a) / max(1, b - a))
    poses[segs[-1][1]:] = case.trajectory.pose_at(bounds[-1])
    rec = RecordWriter(out, case_id)
    try:
        shutil.copy2(video, rec.path("video.mp4"))
        np.save(rec.path("poses.npy"), poses, allow_pickle=False)
        tj = trajectory_json(case, plan)
        for ph in tj["phases"]:  # phases follow the measured key ranges, not nominal seconds
            if ph["segments"]:
                ph["frames"] = [int(segs[ph["segments"][0]][0]), int(segs[ph["segments"][-1]][1])]
        rec.write_json("trajectory.json", tj)
        caveats += list(row.get("caveats", []))
        meta = {
            "kind": "rollout", "case_id": case_id, "suite": case.suite, "case": case.to_dict(),
            "adapter": {"name": mtag.lower(), "version": "imported", "info": {}},
            "requested": {"width": ach.width, "height": ach.height, "fps": ach.fps, "frames": ach.frames},
            "achieved": ach.to_dict(), "seed": None, "prompt": case.prompt, "prompt_source": case.prompt_source,
            "intrinsics": {"regime": (row.get("intrinsics") or {}).get("regime"), "case": case.intrinsics,
                           "imported": row.get("intrinsics")},
            "caveats": caveats, "imported_from": str(video), "worldgate_version": __version__,
        }
        rec.commit(meta)
    except BaseException:
        rec.abort()
        raise
