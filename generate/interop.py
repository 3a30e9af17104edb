"""WorldMark delivery interop: ``worldgate export RUN --format worldmark`` and ``worldgate import DIR --format worldmark``.

The official delivery (AlayaLab/WorldMark ``.claude/skills/world-model-adapter/references/output_spec.md`` §2-3) is one
mp4 per (image, action) in the canonical layout ``{domain}/{view}/{MODEL}/{image:03d}_{action:03d}.mp4`` (``view``
shortened to ``first``/``third``, ``MODEL`` an upper-case tag) plus a provenance ``manifest.jsonl`` with *measured*
achieved values and half-open per-key frame ranges into the produced video.

Nothing is read through a link or from outside the folder it belongs to, and nothing is written through one (the
record and delivery files are regular files, checked with lstat and opened with O_NOFOLLOW | O_NONBLOCK, so a FIFO
never hangs a command): export skips, with its reason, a record that is incomplete, whose meta.json or trajectory.json
is unreadable (a FIFO, a link, not JSON), or that holds a link, FIFO or device anywhere (a linked ``native/`` too), and
stops at a delivery folder that is a link (:class:`DeliveryError`); a planted link where a video or the manifest goes
is replaced, never written through. Import fails, naming it, a video (or domain / view / MODEL folder) that is a link,
a FIFO or a device, a sidecar path that is absolute or climbs out of the delivery with ``..``, and a sidecar holding
anything but real folders and regular files (sizes bounded: :data:`~.delivery_files.MAX_FILE_BYTES` a file,
:data:`~.delivery_files.MAX_RECORD_BYTES` a record); a manifest.jsonl that is not a regular UTF-8 file of JSON objects is an error naming it (and the line).
MODEL folders must be upper case, as WorldMark's spec says (output_spec.md §3: "``MODEL`` is the upper-case model tag
and must be stable across runs"); a lower-case one fails its videos saying to rename it (:func:`check_delivery_model`).

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

This module is the import side; export is :mod:`.worldmark_export`, and the names and safe file copies both use are
:mod:`.delivery_files`.
"""

from __future__ import annotations

import json
import os
import re
import stat
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path

import numpy as np

from worldgate import __version__
from worldgate.trajectories import library
from worldgate.trajectories.suites import CASE_ID, Case
from worldgate.trajectories.worldmark import WORLDMARK_DOMAINS, WORLDMARK_VIEWS, worldmark_suite

from .delivery_files import (MAX_MANIFEST_BYTES, MAX_VIDEO_BYTES, SIDECAR, InteropError, check_format,
                             check_regular, copy_regular, copy_tree_regular, not_regular)
from .record_files import RecordError, file_kind, link_target, read_record_json, read_regular_text
from .records import RecordWriter, is_complete, record_dir, trajectory_json
from .video import probe_video, sha256_file

_NAME = re.compile(r"^(\d{3})_(\d{3})\.mp4$")
#: the rules ``meta.json["key_boundaries"]`` names for a foreign video
MANIFEST_RULE, COMMANDED_RULE = "manifest", "commanded-duration-at-measured-fps"
#: how a foreign video's case id is formed (one run for every MODEL folder of a delivery)
CASE_ID_RULE = "{MODEL}-{view}-{domain}-{image:03d}_{action:03d}"


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


def check_delivery_model(mtag: str) -> str:
    """A delivery's MODEL folder: a usable tag (:func:`check_model_folder`) in upper case, as WorldMark's delivery spec
    asks (output_spec.md §3: "``MODEL`` is the upper-case model tag and must be stable across runs"). A lower-case
    folder is refused rather than guessed at: ``engine`` and ``ENGINE`` would be two models whose case ids differ only
    in case (one folder on a case-insensitive file system)."""
    check_model_folder(mtag)
    if mtag != mtag.upper():
        raise InteropError(f"MODEL folder {mtag!r} is not upper case: WorldMark's delivery spec makes MODEL the "
                           f"upper-case model tag ({{domain}}/{{view}}/{{MODEL}}/NNN_AAA.mp4); rename the folder to "
                           f"{mtag.upper()!r} and import again")
    return mtag


def _delivery_videos(root: Path):
    """``(domain, view, MODEL, image, action, path, why)`` for every canonical-layout mp4 under ``root``, found without
    following a link: ``why`` is None for a regular file, else what is wrong (a video, or a domain / view / MODEL folder,
    that is a symbolic link, FIFO, device, ...: never followed or opened)."""

    def entries(d: Path):
        with os.scandir(d) as it:
            return sorted(it, key=lambda e: e.name)

    def bad_dir(p: Path, st) -> str | None:
        if stat.S_ISLNK(st.st_mode):
            return (f"{p.relative_to(root)} is a symbolic link (to {link_target(p)}): a delivery's folders are read "
                    "only as real folders inside it, never through a link (copy the folder in instead)")
        return None

    def folder(p: Path):
        """True for a real folder, False where absent or not a folder, else why it is refused (a link)."""
        try:
            st = os.lstat(p)
        except FileNotFoundError:
            return False
        return bad_dir(p, st) or stat.S_ISDIR(st.st_mode)

    for domain in WORLDMARK_DOMAINS:
        dd = folder(root / domain)
        if isinstance(dd, str):
            yield domain, "", "", 0, 0, root / domain, dd
        if dd is not True:
            continue
        for view in WORLDMARK_VIEWS:
            vdir = root / domain / view
            vd = folder(vdir)
            if isinstance(vd, str):
                yield domain, view, "", 0, 0, vdir, vd
            if vd is not True:
                continue
            for m in entries(vdir):
                mp = Path(m.path)
                why = bad_dir(mp, m.stat(follow_symlinks=False))
                if why:
                    yield domain, view, m.name, 0, 0, mp, why
                    continue
                if not m.is_dir(follow_symlinks=False):
                    continue
                for v in entries(mp):
                    match = _NAME.match(v.name)
                    if not match:
                        continue
                    vp = Path(v.path)
                    why = not_regular(vp, vp.relative_to(root), v.stat(follow_symlinks=False))
                    yield domain, view, m.name, int(match.group(1)), int(match.group(2)), vp, why


def _read_manifest(path: Path) -> dict:
    """``{video path: row}`` of a delivery's manifest.jsonl (a regular file, UTF-8, one JSON object a line, at most
    :data:`MAX_MANIFEST_BYTES`); {} where there is none; :class:`InteropError` naming the file (and line) otherwise."""
    if not os.path.lexists(path):
        return {}
    try:
        text = read_regular_text(path, MAX_MANIFEST_BYTES)
    except RecordError as e:
        raise InteropError(f"{e}: fix the manifest or remove it") from None
    out = {}
    for n, ln in enumerate(text.splitlines(), 1):
        if not ln.strip():
            continue
        try:
            r = json.loads(ln)
        except RecursionError:
            raise InteropError(f"{path} line {n} is nested too deeply to be a manifest row") from None
        except ValueError as e:
            raise InteropError(f"{path} line {n} is not valid JSON ({getattr(e, 'msg', e)}): fix or remove that line") \
                from None
        if not isinstance(r, dict) or not isinstance(r.get("video"), str):
            what = f"a JSON {type(r).__name__}" if not isinstance(r, dict) else "an object without a \"video\" path"
            raise InteropError(f"{path} line {n} holds {what}, not a manifest row (an object naming its \"video\"): "
                               "fix or remove that line")
        out[r["video"]] = r
    return out


def sidecar_dir(delivery: Path, side) -> Path:
    """The folder ``side`` (a manifest row's ``worldgate.sidecar``) names, confined to the delivery: a relative path
    without ``..`` whose every existing component is a real folder inside ``delivery``; :class:`InteropError` naming
    it otherwise. It may be missing (then the video is imported as a foreign one)."""
    if not isinstance(side, str) or not side.strip() or "\0" in side or "\\" in side:
        raise InteropError(f"manifest.jsonl names the sidecar {side!r}, which is not a folder path: a sidecar is "
                           f"{SIDECAR}/<case id> inside the delivery")
    rel = Path(side)
    if rel.is_absolute() or ".." in rel.parts:
        raise InteropError(f"manifest.jsonl names the sidecar {side!r}, which is outside the delivery (an absolute or "
                           f"'..' path): refused; a sidecar is {SIDECAR}/<case id> inside the delivery")
    d = delivery
    for part in rel.parts:
        d = d / part
        try:
            st = os.lstat(d)
        except FileNotFoundError:
            return delivery.joinpath(*rel.parts)
        if stat.S_ISLNK(st.st_mode):
            raise InteropError(f"the sidecar {side!r}: {d.relative_to(delivery)} is a symbolic link (to "
                               f"{link_target(d)}): a sidecar is read only as a real folder inside the delivery")
        if not stat.S_ISDIR(st.st_mode):
            raise InteropError(f"the sidecar {side!r}: {d.relative_to(delivery)} is {file_kind(st.st_mode)}, not a folder")
    return d


def import_worldmark(delivery: str | Path, out: str | Path, arena: str | Path | None = None,
                     fmt: str = "worldmark") -> ImportResult:
    """Turn a WorldMark delivery into records under ``out`` that ``evaluate`` scores: every video of every MODEL
    folder, foreign case ids ``{MODEL}-{view}-{domain}-{image:03d}_{action:03d}`` (see the module docstring). Nothing
    is read through a link or from outside the delivery: a video (or folder) that is a link, a FIFO or a device, and a
    sidecar path out of the delivery, fail their video with the reason."""
    check_format(fmt)
    delivery, out = Path(delivery), Path(out)
    if not delivery.is_dir():
        raise FileNotFoundError(f"delivery folder {delivery} not found")
    manifest = _read_manifest(delivery / "manifest.jsonl")
    videos = list(_delivery_videos(delivery))
    if not videos:
        raise InteropError(f"{delivery}: no videos in the WorldMark layout {{domain}}/{{view}}/{{MODEL}}/NNN_AAA.mp4")
    arena_cases = None
    res = ImportResult(out=out)
    out.mkdir(parents=True, exist_ok=True)
    taken: dict[str, str] = {}  # case id -> the video it came from in this import
    for domain, view, mtag, img, aid, path, why in videos:
        rel = path.relative_to(delivery).as_posix()
        if why:
            res.failed[rel] = f"InteropError: {why}"
            continue
        if mtag not in res.models:
            res.models.append(mtag)
        row = manifest.get(rel, {})
        wg = row.get("worldgate") if isinstance(row.get("worldgate"), dict) else {}
        side = wg.get("sidecar")
        try:
            check_delivery_model(mtag)
            case_id = wg.get("case_id") or foreign_case_id(mtag, view, domain, img, aid)
            if not isinstance(case_id, str):
                raise InteropError(f"manifest.jsonl names the case id {case_id!r} for {rel}, which is not a string")
            record_dir(out, case_id)  # a safe folder name inside out, or an error naming it
            side_dir = sidecar_dir(delivery, side) if side else None
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
            if side_dir is not None and os.path.lexists(side_dir / "meta.json"):
                _import_sidecar(side_dir, side, path, rel, out, case_id)
            else:
                if arena_cases is None:
                    arena_cases = _arena_cases(arena)
                import_video(path, out, case_id, mtag, (view, domain, img, aid), row, arena_cases)
            res.imported.append(case_id)
        except Exception as e:  # noqa: BLE001  one bad video never stops the import
            res.failed[case_id] = f"{type(e).__name__}: {e}"
    return res


def _import_sidecar(side: Path, shown: str, video: Path, rel: str, out: Path, case_id: str) -> None:
    """The record exported with ``video``, from its sidecar folder ``side`` (regular files only, nothing followed,
    sizes bounded): the video must be the one the record's meta.json recorded (sha256)."""
    try:
        meta = read_record_json(side / "meta.json")
    except RecordError as e:
        raise InteropError(f"the sidecar {shown}: {e}") from None
    if not isinstance(meta, dict):
        raise InteropError(f"the sidecar {shown}: meta.json holds a JSON {type(meta).__name__}, not an object")
    want = ((meta.get("files") or {}).get("video.mp4") or {}).get("sha256")
    if os.path.lexists(side / "video.mp4"):
        raise InteropError(f"the sidecar {shown} holds a video.mp4: the record's video is the delivery's {rel}; "
                           "remove it from the sidecar")
    rec = RecordWriter(out, case_id)
    try:
        copy_regular(video, rec.path("video.mp4"), rel, MAX_VIDEO_BYTES)
        if want and sha256_file(rec.path("video.mp4")) != want:  # this process's own copy
            raise InteropError(f"{video}: content differs from the exported record (sha256 mismatch)")
        copied = copy_tree_regular(side, rec.tmp, shown, skip={"meta.json"})
        _verify_sidecar(meta, copied, rec.tmp, shown)
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


def _verify_sidecar(meta: dict, copied: list[tuple], tmp: Path, shown: str) -> None:
    """The sidecar's files (``copied`` into ``tmp``) are exactly those its meta.json recorded, each with its recorded
    sha256: import keeps what export wrote and never re-signs a file it did not check (an edited trajectory.json or
    poses.npy, a file added or removed after export, is an :class:`InteropError` naming it)."""
    files = meta.get("files")
    if not isinstance(files, dict) or not files:
        raise InteropError(f"the sidecar {shown}: meta.json records no file hashes, so its files cannot be verified: "
                           "re-export the record with worldgate, or import the video alone (without the sidecar)")
    got = {"/".join(rel) for rel in copied}
    for name in sorted(got):
        want = files.get(name).get("sha256") if isinstance(files.get(name), dict) else None
        if not isinstance(want, str):
            raise InteropError(f"the sidecar {shown} holds {name}, which its meta.json does not record: it was added "
                               "after export (remove it, or re-export the record)")
        if sha256_file(tmp / name) != want:
            raise InteropError(f"the sidecar's {shown}/{name} differs from the exported record (sha256 mismatch): it "
                               "was changed after export; re-export the record")
    lacking = sorted(set(files) - got - {"video.mp4"})
    if lacking:
        raise InteropError(f"the sidecar {shown} lacks {', '.join(lacking[:5])}, which its meta.json records: "
                           "re-export the record")


def import_video(video: Path, out: Path, case_id: str, mtag: str, key, row: dict | None = None,
                 arena_cases: dict | None = None, extra_caveats=(), extra_meta: dict | None = None,
                 info=None) -> Path:
    """One foreign video as a record ``out/case_id`` (the trajectory from its WorldMark action id, the arena case
    where given, key boundaries by :func:`key_boundaries`); ``extra_meta`` is merged into its meta.json; ``info``: the
    video's :func:`probe_video` result where the caller has it (else it is measured here)."""
    row = row or {}
    check_regular(video)  # never probed or copied through a link, from a FIFO or a device
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
    if ach.display:  # the decoded frames are as displayed; the size recorded is theirs, the coded one may differ
        caveats.append(f"the video's display matrix {ach.display}: its frames are scored as displayed "
                       f"({ach.width}x{ach.height}), transformed from the coded stream")
    if ach.resampled and abs(ach.stream_fps - ach.fps) <= 0.01 * ach.fps:  # a few frames off the grid: as evaluate,
        caveats.append(f"the video has a {ach.resampled}; these are the frames scored")  # within 1% it is taken
    elif ach.resampled:  # variable frame rate: evaluate refuses such a stream (its average fps is not the rate its
        # frames decode at, by over 1%), so import refuses it too, saying how to make it constant
        raise InteropError(f"{video}: {ach.resampled}; a variable-frame-rate video is not imported (evaluate would "
                           f"refuse it): re-encode it at a constant rate, e.g. ffmpeg -i IN -fps_mode cfr -r "
                           f"{ach.fps:g} OUT.mp4")
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
        copy_regular(video, rec.path("video.mp4"), video, MAX_VIDEO_BYTES)
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
