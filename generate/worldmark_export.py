"""``worldgate export RUN --format worldmark``: a run's records as a WorldMark delivery (the layout and manifest
:mod:`.interop` describes) plus the ``worldgate/{case_id}/`` sidecar that lets import rebuild each record exactly.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from worldgate.trajectories.worldmark import WORLDMARK_DOMAINS, WORLDMARK_VIEWS

from .delivery_files import (SIDECAR, DeliveryError, InteropError, check_format, copy_tree_regular, link_or_copy,
                             model_tag, real_dir, replace_file, scan_tree)
from .record_files import RecordError, read_record_json
from .records import candidate_records, check_record_file, is_complete, read_meta_reason


@dataclass
class ExportResult:
    out: Path
    exported: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    tag: str | None = None  # the MODEL folder name the records went to


def export_worldmark(run: str | Path, out: str | Path, tag: str | None = None, fmt: str = "worldmark") -> ExportResult:
    """Write the WorldMark delivery layout of every complete rollout record of ``run`` under ``out``. A record that
    cannot be exported (incomplete, its meta.json or trajectory.json unreadable, a link, FIFO or device among its
    files, not a WorldMark case) is skipped with its reason; nothing is followed out of the run, and nothing is
    written through a link inside the delivery (a folder of it that is a link is an error)."""
    check_format(fmt)
    run, out = Path(run), Path(out)
    if not run.is_dir():
        raise FileNotFoundError(f"run folder {run} not found")
    res = ExportResult(out=out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for rec in candidate_records(run):
        meta, why = read_meta_reason(rec)
        if meta is None:
            res.skipped[rec.name] = why
            continue
        if not is_complete(rec):
            res.skipped[rec.name] = ("incomplete record (meta.json not marked complete, or its video is missing, not "
                                     "a regular file or not of the recorded size): regenerate it")
            continue
        try:
            row = _export_record(rec, meta, out, tag, res)
        except DeliveryError:
            raise
        except (InteropError, RecordError) as e:
            res.skipped[rec.name] = str(e)
            continue
        except (OSError, KeyError, TypeError, ValueError, AttributeError) as e:  # a malformed record, never the export
            res.skipped[rec.name] = f"malformed record ({type(e).__name__}: {e}): regenerate it"
            continue
        if row is not None:
            rows.append(row)
            res.exported.append(rec.name)
    manifest = "".join(json.dumps(r, sort_keys=True) + "\n" for r in rows)
    replace_file(out / "manifest.jsonl", lambda tmp: tmp.write_text(manifest))
    return res


def _export_record(rec: Path, meta: dict, out: Path, tag: str | None, res: ExportResult) -> dict | None:
    """One record into the delivery: its manifest row, or None (skipped, the reason in ``res.skipped``)."""
    tags = (meta.get("case") or {}).get("tags") or {}
    if not isinstance(tags, dict):
        tags = {}
    missing = [k for k in ("view", "domain", "image", "action_id") if k not in tags]
    if missing:
        res.skipped[rec.name] = f"not a WorldMark case (tags lack {missing})"
        return None
    mtag = model_tag(tag or (meta.get("adapter") or {}).get("name") or "")
    view, domain = tags["view"], tags["domain"]
    if view not in WORLDMARK_VIEWS or domain not in WORLDMARK_DOMAINS:  # tags become folder names: only these
        res.skipped[rec.name] = (f"tags view={view!r}, domain={domain!r} are not WorldMark's "
                                 f"({'/'.join(WORLDMARK_VIEWS)}, {'/'.join(WORLDMARK_DOMAINS)})")
        return None
    try:
        img, aid = int(tags["image"]), int(tags["action_id"])
    except (TypeError, ValueError):
        res.skipped[rec.name] = f"tags image={tags['image']!r}, action_id={tags['action_id']!r} are not integers"
        return None
    if not (0 <= img <= 999 and 1 <= aid <= 15):
        res.skipped[rec.name] = f"image {img} / action id {aid} outside WorldMark's 000-999 / 1-15"
        return None
    # everything the record holds is checked before anything is written: regular files only, nothing followed
    check_record_file(rec / "video.mp4")
    traj = read_record_json(rec / "trajectory.json")
    if not isinstance(traj, dict) or not isinstance(traj.get("segments"), list):
        raise InteropError("trajectory.json is not a worldgate trajectory (no segment list)")
    scan_tree(rec, rec.name)
    rel = Path(domain) / view / mtag / f"{img:03d}_{aid:03d}.mp4"
    res.tag = mtag
    vdir = real_dir(out, rel.parent)
    side = real_dir(out, Path(SIDECAR) / rec.name, create=False)  # an existing sidecar must be a real folder
    link_or_copy(rec / "video.mp4", vdir / rel.name)
    real_dir(out, Path(SIDECAR))
    _replace_sidecar(rec, side)  # everything but the video (the delivery itself)
    ach = meta.get("achieved") or {}
    info = (meta.get("adapter") or {}).get("info") or {}
    intr = meta.get("intrinsics") or {}
    regime = intr.get("regime")
    return {
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
    }


def _replace_sidecar(rec: Path, side: Path) -> None:
    """Copy the record (but its video) into a new folder beside ``side``, then rename it into place: an interrupted
    re-export keeps the previous sidecar whole (the old one is removed only once the new one is in place)."""
    new = side.with_name(f".{side.name}.{os.getpid()}.new")
    old = side.with_name(f".{side.name}.{os.getpid()}.old")
    for p in (new, old):
        if os.path.islink(p) or (os.path.lexists(p) and not os.path.isdir(p)):
            os.unlink(p)
        elif os.path.lexists(p):
            shutil.rmtree(p)
    new.mkdir()
    try:
        copy_tree_regular(rec, new, rec.name, skip={"video.mp4"})
    except BaseException:
        shutil.rmtree(new, ignore_errors=True)
        raise
    if os.path.lexists(side):
        os.rename(side, old)
    os.rename(new, side)
    shutil.rmtree(old, ignore_errors=True)


def _key(seg: dict) -> str:
    """The protocol letter of a segment (``W``, ``L``...); combined or held segments join their channels."""
    parts = [v for v in (seg["move"], seg["look"]) if v != "idle"]
    return "+".join(parts) or "_"
