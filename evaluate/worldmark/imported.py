"""``worldgate import ROOT --out OUT [--videos VIDEO_ROOT]``: a WorldMark results root (what ``WORLDMARK_RESULTS``
points at) as worldgate runs, labelled as imported, beside worldgate's own runs in reports and leaderboards.

A results root holds, per split suffix ``_{domain}_{view}`` (WorldMark's ``EVAL_SUFFIX``), the files WorldMark's
``final_master.py`` reads (``master.read_results_tree``): ``results_flow{sfx}/{MODEL}__{stem}.json`` (``flow_eval.score``
per video), ``results_flow{sfx}/cache/{MODEL}__{stem}.npz`` (``flow_eval.save_cache``), ``results_consistency{sfx}/
c1c2_v2_c1new_shard*.json`` and ``c1c2_v2_c2fix_shard*.json``, ``results_c3_vggt{sfx}/omega_c3_1s_shard*.json``,
``results_quality{sfx}/qalign_shard*.json``. It is detected by its ``results_flow_*`` folders.

What is written, one run per MODEL (a root usually holds many models; a leaderboard row is a run):

- ``OUT/imported-{MODEL}/`` (the label is the run's name, so every table that shows run names shows it):
  ``results.json`` and ``samples.jsonl`` in ``evaluate``'s schema (``evaluate/runner.py``), so ``worldgate report``
  reads them unchanged: one sample per video with its own master row (its segments pooled as final_master pools a
  model's, fm:14-18) as the WorldMark metric ids, and the run's metrics = the model's row over every imported split
  (``per_record_mean`` beside it); ``results.json["worldmark"]["splits"]`` the model's row per split and
  ``["master"]`` the whole table of every split as final_master computes it (``master.master_rows`` with WorldMark's
  own ``MasterConfig``: its excluded models and display names), so the numbers equal WorldMark's ``final_master`` on
  that tree. The run and every sample carry ``"imported": {"from", "format": "worldmark-results",
  "worldmark_commit", ...}``; the run's backend is ``learned`` (WorldMark's perception is learned: SEA-RAFT, Depth
  Anything 3, DINOv2, TransNetV2, VGGT-Omega, Q-Align), so it sits beside runs evaluated with ``--backend learned``.
  A copy of results.json is kept as ``worldmark_import.json`` (``evaluate`` rewrites results.json when it re-scores
  the videos).
- ``OUT/worldmark_master.json`` and ``OUT/final_master{sfx}.csv``: every split's table (all models).
- With ``--videos``: a record per video (``generate.interop.import_video``, case id ``{MODEL}-{view}-{domain}-
  {image:03d}_{action:03d}``), found at ``VIDEO_ROOT/{domain}/{view}/{MODEL}/{stem}.mp4`` (the delivery layout) or,
  for a root with one split, WorldMark's ``VIDEO_ROOT/{MODEL}/{stem}.mp4``; its FLOW cache becomes the record's
  ``flow`` feature of backend ``learned`` (SEA-RAFT is WorldMark's flow) in the run's feature cache, under the key
  ``evaluate`` computes, so ``evaluate`` re-scores the video without recomputing flow: ``sx``/``srad`` = 2 x the
  cache's Sx/Srad (the cache holds SEA-RAFT's half-size values, worldgate's flow feature is in 640-wide pixels), the
  parallax fit's samples per segment j as ``px_iv_<j>`` (inverse depth, as cached) and ``px_uu_<j>`` (horizontal flow,
  2 x the cached uu, the same 640-wide pixels as ``sx``), ``px_segs``; ``sy``/``speed`` are NaN and ``grid`` is empty
  (WorldMark does not cache them).
"""

from __future__ import annotations

import json
import os
import re
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from worldgate.generate.interop import InteropError, check_model_folder, foreign_case_id, import_video
from worldgate.generate.records import git_hash, is_complete, record_dir
from worldgate.generate.video import probe_video

from .. import metrics as M
from ..features import FeatureCache, open_record
from ..results import clean, write_results
from ..runner import aggregate, versions
from .benchmark import COLUMN, FAMS, M_OF
from .flow_eval import KEY_FAMILY, WORLDMARK_COMMIT, load_flow_cache
from .master import COLS, MasterConfig, master_csv, master_rows, result_dirs
from .results_schema import read_checked_tree

FORMAT = "worldmark-results"
_SPLIT = re.compile(r"^_(real|style)_(first|third)$")
_STEM = re.compile(r"^(\d{3})_(\d{3})$")
PERCEPTION = ("WorldMark's own perception (imported, not recomputed): SEA-RAFT flow, Depth Anything 3 parallax, "
              "DINOv2 + TransNetV2 memory, VGGT-Omega global memory, Q-Align quality")


class ResultsImportError(InteropError):
    pass


def is_results_root(path: str | Path) -> bool:
    """A WorldMark results root: a folder with at least one ``results_flow_*`` folder."""
    p = Path(path)
    return p.is_dir() and any(d.is_dir() for d in p.glob("results_flow_*"))


def results_suffixes(root: str | Path) -> list[str]:
    """The split suffixes (``EVAL_SUFFIX``) of a results root, e.g. ``["_real_first", "_style_third"]``."""
    return sorted(d.name[len("results_flow"):] for d in Path(root).glob("results_flow_*") if d.is_dir())


@dataclass
class ResultsImport:
    out: Path
    runs: dict[str, Path] = field(default_factory=dict)        # MODEL -> run folder
    samples: dict[str, int] = field(default_factory=dict)      # MODEL -> videos with imported values
    records: dict[str, int] = field(default_factory=dict)      # MODEL -> video records (--videos)
    flow_features: int = 0                                     # imported FLOW caches put as flow features
    missing_videos: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    tables: dict[str, dict] = field(default_factory=dict)      # split -> final_master rows


def _value(x):
    return None if x is None or not np.isfinite(float(x)) else float(x)


def _split_tags(sfx: str) -> dict:
    m = _SPLIT.match(sfx)
    return {"domain": m.group(1), "view": m.group(2)} if m else {}


def _regular_below(root: Path, parts: tuple) -> bool:
    """Whether ``root/parts...`` is a regular file reached through real folders only (nothing below ``root`` is a
    symbolic link: a video is never followed out of the video root; a FIFO or device is never opened)."""
    p = root
    for k, part in enumerate(parts):
        p = p / part
        try:
            st = os.lstat(p)
        except OSError:
            return False
        last = k == len(parts) - 1
        if not (stat.S_ISREG(st.st_mode) if last else stat.S_ISDIR(st.st_mode)):  # a link is neither
            return False
    return True


def _video_path(videos: Path, sfx: str, model: str, stem: str, n_splits: int) -> Path | None:
    t = _split_tags(sfx)
    cands = []
    if t:
        cands.append((t["domain"], t["view"], model, f"{stem}.mp4"))
    if n_splits == 1:  # WorldMark's own layout has no split level: only unambiguous for one split
        cands.append((model, f"{stem}.mp4"))
    for parts in cands:
        if _regular_below(videos, parts):
            return videos.joinpath(*parts)
    return None


def flow_feature(cache: dict) -> dict[str, np.ndarray]:
    """worldgate's ``flow`` feature (backend learned) from WorldMark's FLOW cache (``load_flow_cache``): see the module
    docstring for the arrays and their scale."""
    sx = np.asarray(cache["Sx"], np.float64) * 2.0
    out = {"sx": sx, "srad": np.asarray(cache["Srad"], np.float64) * 2.0,
           "sy": np.full(len(sx), np.nan), "speed": np.full(len(sx), np.nan),
           "grid": np.zeros((0, 8, 8, 2), np.float32), "gap": np.asarray(2),
           "px_segs": np.asarray(sorted(cache["px_raw"]), dtype=int),
           "source": np.asarray("WorldMark FLOW cache (SEA-RAFT), imported; sx/srad/px_uu = 2 x the cached values")}
    for j, (iv, uu) in cache["px_raw"].items():
        out[f"px_iv_{int(j)}"] = np.asarray(iv, np.float64)
        out[f"px_uu_{int(j)}"] = np.asarray(uu, np.float64) * 2.0
    return out


def _video_row(frec, c1e, c2e, c3e, qae) -> dict:
    """One video's master row: its segments pooled as final_master pools a model's (nothing excluded or renamed)."""
    key = f"{frec['model']}__{frec['stem']}"
    rows = master_rows([frec], {key: c1e} if c1e else {}, {key: c2e} if c2e else {}, {key: c3e} if c3e else {},
                       {key: qae} if qae else {}, MasterConfig(exclude=(), name_map=()))
    return next(iter(rows.values()))


def _why(col: str, frec, c1e, c2e, c3e, qae) -> str:
    if col in COLUMN and col[:2] in M_OF:
        return f"no {'translation' if col[-1] == 't' else 'rotation'} segment in the imported flow record"
    if col == "Local":
        if not c1e:
            return "no c1c2_v2_c1new entry for this video in the imported results"
        return "frozen: fewer than 5 equal-motion samples (cv:51)" if (c1e.get("C1") or {}).get("na") else \
            "no local-memory value in the imported c1 entry"
    if col == "Rev":
        if not c2e:
            return "not a WorldMark round trip, or no c1c2_v2_c2fix entry in the imported results"
        return "trip skipped by WorldMark's gates (imported c2 entry: na_scope / not_evaluable)"
    if col == "Global":
        return "no omega_c3 entry for this video in the imported results" if not c3e else \
            f"imported omega_c3 entry has no error ({c3e.get('na', 'n/a')})"
    return "no qalign entry for this video in the imported results"


def _sample(sfx, frec, ent, label, case_id) -> dict:
    c1e, c2e, c3e, qae = ent
    row = _video_row(frec, c1e, c2e, c3e, qae)
    scores, unavailable, detail = {}, {}, {}
    for col, mid in COLUMN.items():
        v = _value(row.get(col))
        scores[mid] = v
        if v is None:
            unavailable[mid] = _why(col, frec, c1e, c2e, c3e, qae)
        elif col[:2] in M_OF and col in ("DA_t", "DA_r", "MP_t", "MP_r", "MS_t", "MS_r", "RL_t", "RL_r"):
            segs = [s for s in frec.get(M_OF[col[:2]], []) if not s.get("na") and
                    (s.get("family") or KEY_FAMILY.get(s.get("key")) or KEY_FAMILY.get(s.get("new"))) in FAMS[col[-1]]]
            detail[mid] = {"segments": segs}
        elif col == "Local":
            detail[mid] = {"C1": (c1e or {}).get("C1")}
        elif col == "Rev":
            detail[mid] = {"C2": (c2e or {}).get("C2")}
        elif col == "Global":
            detail[mid] = {"median_err": (c3e or {}).get("global_median_e")}
    scores["visual_quality"] = None
    unavailable["visual_quality"] = "worldgate's visual-quality proxy is not part of WorldMark's results"
    m = _STEM.match(str(frec["stem"]))
    tags = dict(_split_tags(sfx), model=frec["model"], split=sfx)
    if m:
        tags.update(image=int(m.group(1)), action_id=int(m.group(2)))
    return {"case": case_id, "tags": tags, "adapter": str(frec["model"]).lower(), "timing": None, "context": None,
            "scores": scores, "unavailable": unavailable, "detail": detail, "features": {},
            "imported": label, "worldmark": {"split": sfx, "row": {c: _value(row[c]) for c in COLS},
                                             "flow": frec, "c1": c1e, "c2": c2e, "c3": c3e, "qalign": qae}}


def _case_id(model: str, sfx: str, stem: str) -> str:
    t, m = _split_tags(sfx), _STEM.match(stem)
    if t and m:
        return foreign_case_id(model, t["view"], t["domain"], int(m.group(1)), int(m.group(2)))
    return f"{check_model_folder(model)}{sfx}-{stem}"


def _put_flow(run: Path, folder: Path, cache_npz: Path, frames: int, aid: int) -> str | None:
    """Put the video's imported FLOW cache as its learned flow feature; None, or why it was not put."""
    if not cache_npz.is_file() or cache_npz.is_symlink():
        return f"no FLOW cache {cache_npz.name} in the results root: flow is computed by evaluate"
    try:
        cache = load_flow_cache(str(cache_npz))
    except (OSError, ValueError, KeyError) as e:
        return f"FLOW cache {cache_npz.name} unreadable ({type(e).__name__}: {e}): flow is computed by evaluate"
    if len(cache["Sx"]) != frames - 2 or len(cache["Srad"]) != frames - 2:
        return (f"FLOW cache {cache_npz.name} holds {len(cache['Sx'])} flow samples but the video has {frames} frames "
                f"(pairs i, i+2 give {frames - 2}): not this video's flow; flow is computed by evaluate")
    if int(cache["action"]) not in (0, aid):
        return f"FLOW cache {cache_npz.name} is for action {cache['action']}, the video for {aid}: not used"
    ex = M.FEATURES["learned"].get("flow")()
    FeatureCache(run / ".features").put(open_record(folder), ex, flow_feature(cache))
    return None


def import_worldmark_results(root: str | Path, out: str | Path, videos: str | Path | None = None,
                             arena_cases: dict | None = None, commit: str | None = None) -> ResultsImport:
    """Import the results root ``root`` into ``out`` (see the module docstring)."""
    t0 = time.perf_counter()
    root, out = Path(root), Path(out)
    if not is_results_root(root):
        raise FileNotFoundError(f"{root} is not a WorldMark results root (no results_flow_* folder)")
    if videos is not None and not Path(videos).is_dir():
        raise FileNotFoundError(f"video root {videos} not found")
    sfxs = results_suffixes(root)
    res = ResultsImport(out=out)
    commit = commit or WORLDMARK_COMMIT
    per_model: dict[str, list] = {}   # MODEL -> [(sfx, frec, (c1, c2, c3, qa))]
    tables = {}
    for sfx in sfxs:
        # typed and bounded (results_schema.py): a violation is one line naming the file and field, the import refused
        flow, c1, c2, c3, qa = read_checked_tree(root, sfx)
        flow.sort(key=lambda r: (str(r["model"]), str(r["stem"])))
        rows = master_rows(flow, c1, c2, c3, qa)  # final_master's own config: its exclusions and display names
        tables[sfx] = rows
        for r in flow:
            key = f"{r['model']}__{r['stem']}"
            per_model.setdefault(str(r["model"]), []).append(
                (sfx, r, (c1.get(key), c2.get(key), c3.get(key), qa.get(key))))
    if not per_model:
        raise ResultsImportError(f"{root}: no per-video results_flow{{sfx}}/MODEL__STEM.json in {', '.join(sfxs)}")
    res.tables = tables
    out.mkdir(parents=True, exist_ok=True)
    cfg = MasterConfig()
    (out / "worldmark_master.json").write_text(json.dumps(clean({
        "from": str(root), "worldmark_commit": commit, "columns": COLS,
        "splits": {s: {m: {c: _value(v) for c, v in row.items()} for m, row in t.items()} for s, t in tables.items()},
        "excluded_by_final_master": list(cfg.exclude)}), indent=2, sort_keys=True))
    for sfx, rows in tables.items():
        (out / f"final_master{sfx}.csv").write_text(master_csv(rows))
    for model, items in per_model.items():
        try:
            check_model_folder(model)
        except InteropError as e:
            res.failed[model] = str(e)
            continue
        run = out / f"imported-{model}"
        run.mkdir(exist_ok=True)
        label = {"from": str(root.resolve()), "format": FORMAT, "worldmark_commit": commit, "model": model,
                 "display_name": dict(cfg.name_map).get(model, model), "splits": sorted({s for s, _, _ in items}),
                 "videos": str(Path(videos).resolve()) if videos is not None else None}
        samples = []
        n_rec = 0
        for sfx, frec, ent in items:
            stem = str(frec["stem"])
            try:
                cid = _case_id(model, sfx, stem)
                record_dir(run, cid)
            except (InteropError, ValueError) as e:
                res.failed[f"{model}{sfx}/{stem}"] = str(e)
                continue
            s = _sample(sfx, frec, ent, label, cid)
            if videos is not None:
                n_rec += _with_video(run, Path(videos), root, sfx, model, stem, cid, s, label, len(sfxs),
                                     arena_cases, res)
            samples.append(s)
        results = _results(run, samples, items, label, tables, t0)
        # evaluate's one writer; worldmark_import.json keeps the import's results should the run be re-scored
        write_results(run, results, samples, history=False, also=("worldmark_import.json",))
        (run / "run.json").write_text(json.dumps({"imported": label}, indent=2, sort_keys=True))
        res.runs[model], res.samples[model], res.records[model] = run, len(samples), n_rec
    return res


def _with_video(run, videos, root, sfx, model, stem, cid, sample, label, n_splits, arena_cases, res) -> int:
    """The record of one video (and its imported flow feature); 1 when the record is there afterwards."""
    path = _video_path(videos, sfx, model, stem, n_splits)
    t, m = _split_tags(sfx), _STEM.match(stem)
    if path is None or not (t and m):
        res.missing_videos.append(f"{model}{sfx}/{stem}")
        sample["unavailable_video"] = ("no video " + (f"{t['domain']}/{t['view']}/{model}/{stem}.mp4" if t else
                                                      f"for split {sfx} (not _{{domain}}_{{view}})")
                                       + f" under {videos}")
        return 0
    folder = record_dir(run, cid)
    try:
        info = probe_video(path)
        caveats = [f"imported from a WorldMark results root ({root}): its per-video values are in samples.jsonl"]
        if not is_complete(folder):
            import_video(path, run, cid, model, (t["view"], t["domain"], int(m.group(1)), int(m.group(2))),
                         None, arena_cases, extra_caveats=caveats, extra_meta={"imported": label}, info=info)
        why = _put_flow(run, folder, Path(result_dirs(str(root), sfx)["flow_cache"]) / f"{model}__{stem}.npz",
                        info.frames, int(m.group(2)))
    except Exception as e:  # noqa: BLE001  one bad video never stops the import
        res.failed[f"{model}{sfx}/{stem}"] = f"{type(e).__name__}: {e}"
        return int(is_complete(folder))
    rec = open_record(folder)
    sample["video_sha256"] = rec.content_hash
    if why is None:
        res.flow_features += 1
        sample["features"] = {"flow": M.FEATURES["learned"].get("flow")().key()}
    else:
        sample["flow_feature"] = why
    return 1


def _results(run: Path, samples: list, items: list, label: dict, tables: dict, t0: float) -> dict:
    """results.json in evaluate's schema (evaluate/runner.py evaluate_run)."""
    results = aggregate(samples)
    flow, c1, c2, c3, qa = [], {}, {}, {}, {}
    by_split: dict[str, tuple] = {}
    for sfx, frec, (c1e, c2e, c3e, qae) in items:
        key = f"{sfx}/{frec['model']}__{frec['stem']}"  # splits may share stems: keep every entry
        flow.append(frec)
        sp = by_split.setdefault(sfx, ([], {}, {}, {}, {}))
        sp[0].append(frec)
        for d, dd, e in ((c1, sp[1], c1e), (c2, sp[2], c2e), (c3, sp[3], c3e), (qa, sp[4], qae)):
            if e:
                d[key] = e
                dd[key] = e
    nocfg = MasterConfig(exclude=(), name_map=())  # the run's own row: never excluded, never renamed
    run_row = next(iter(master_rows(flow, c1, c2, c3, qa, nocfg).values()))
    splits = {s: {c: _value(v) for c, v in next(iter(master_rows(*v, nocfg).values())).items()} | {"delta": None}
              for s, v in by_split.items()}
    for col, mid in COLUMN.items():
        m = results["metrics"].get(mid)
        if m is None:
            continue
        m.update(per_record_mean=m.get("mean"), mean=_value(run_row.get(col)),
                 aggregation="WorldMark final_master over the imported entries: every segment of every video of "
                             "every imported split pooled (fm:14-18)")
    results.update({
        "run": str(run),
        "config": {"backend": "learned", "metrics": "all", "rescore": False, "params": {},
                   "run_config": {"imported": label}, "imported": True},
        "backends": {"imported": {"backend": "learned", "key": f"{FORMAT}@{label['worldmark_commit'][:7]}",
                                  "source": PERCEPTION}},
        "versions": dict(versions()), "git": git_hash(), "records": len(samples), "errors": {},
        "features": {"computed": 0, "cached": 0}, "seconds": time.perf_counter() - t0,
        "worldmark": {"commit": WORLDMARK_COMMIT, "columns": COLS, "splits": splits,
                      "run": {c: _value(v) for c, v in run_row.items()} | {"delta": None},
                      "master": {s: {n: {c: _value(v) for c, v in row.items()} for n, row in t.items()}
                                 for s, t in tables.items() if s in by_split},
                      "options": {}, "backend_deviations": [PERCEPTION],
                      "model_in_master": {s: label["display_name"] in tables[s] for s in by_split}},
        "imported": label,
    })
    return results


__all__ = ["FORMAT", "ResultsImport", "flow_feature", "import_worldmark_results", "is_results_root",
           "results_suffixes"]
