"""WorldMark's results tree from a scored worldgate run: what ``WORLDMARK_RESULTS`` points at, one ``EVAL_SUFFIX``
per split (``_{domain}_{view}``), holding exactly the files WorldMark's ``final_master.py`` reads (fm:8, 22, 26, 32,
37): ``results_flow{sfx}/{MODEL}__{stem}.json`` and ``cache/{MODEL}__{stem}.npz`` (``flow_eval.save_cache``'s format),
``results_consistency{sfx}/c1c2_v2_c1new_shard0of1.json`` and ``c1c2_v2_c2fix_shard0of1.json``,
``results_c3_vggt{sfx}/omega_c3_1s_shard0of1.json`` (only where the backend measured it), ``results_quality{sfx}/
qalign_shard0of1.json`` (the learned backend's Q-Align scores; empty where it did not run), plus worldgate's own row
for that split as ``results_quality{sfx}/worldgate_master.csv`` in ``final_master.csv``'s columns. Running WorldMark's
``final_master.py`` on the tree prints worldgate's numbers. Features come from the run's cache (``evaluate`` first).
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

from worldgate.generate.records import candidate_records, read_meta, record_views

from .. import metrics as M
from ..features import FeatureCache, FeatureError, MissingFeature, compute_features, open_record, scoring_view
from .benchmark import BENCHMARK, collect, qa_entries, split_entries, table_config
from .flow_eval import save_flow_cache
from .master import master_csv, master_rows, result_dirs, write_results_tree

log = logging.getLogger("worldgate.export")


class ResultsTreeError(ValueError):
    """The results tree cannot be written: the run's features are not cached, or the tree's folder holds a link."""


def check_tree_root(root: Path) -> None:
    """``root`` (where the tree goes) must be a real folder (or absent) holding only real folders and regular files:
    the tree is never written through a symbolic link (:class:`ResultsTreeError` naming it)."""
    root = Path(root)
    try:
        st = os.lstat(root)
    except FileNotFoundError:
        return
    paths = [root]
    if stat.S_ISDIR(st.st_mode):
        for d, dirs, files in os.walk(root):  # never follows a link (followlinks=False)
            paths += [Path(d, n) for n in dirs + files]
    for p in paths:
        m = os.lstat(p).st_mode
        if stat.S_ISLNK(m) or not (stat.S_ISDIR(m) or stat.S_ISREG(m)) or (p == root and not stat.S_ISDIR(m)):
            what = f"a symbolic link (to {os.readlink(p)})" if stat.S_ISLNK(m) else "not a folder or regular file"
            raise ResultsTreeError(f"{p} is {what}: the WorldMark results tree is written only into real folders; "
                                   f"remove it (or give another --out) and export again")


def write_worldmark_results(run: str | Path, root: str | Path, model: str, backend: str = "classical",
                            params: dict | None = None, skipped: dict | None = None) -> dict[str, str]:
    """Write the tree under ``root`` for every one-view record of ``run`` WorldMark scores; returns {suffix: dir}.
    Features come only from the run's cache: one that is not cached is a :class:`ResultsTreeError` saying to run
    ``evaluate`` first; a record that cannot be read is left out, its reason in ``skipped`` (and logged)."""
    run, root = Path(run), Path(root)
    check_tree_root(root)
    P = M.params(params)
    cache = FeatureCache(run / ".features")
    exs = M.extractors(backend)
    items = []
    for folder in candidate_records(run):
        meta = read_meta(folder)
        if not meta or len(record_views(meta)) != 1:
            continue
        try:
            rec = open_record(folder)
            feats, _ = compute_features(rec, exs, cache, rescore=True)
        except MissingFeature as e:
            flag = "" if backend == "classical" else f" --backend {backend}"
            raise ResultsTreeError(f"no WorldMark results tree: the run's cached features are missing ({e}); score "
                                   f"the run with `worldgate evaluate {run}{flag}`, then export again") from None
        except FeatureError as e:
            log.warning("results tree: skipped %s: %s", folder.name, e)
            if skipped is not None:
                skipped[folder.name] = str(e)
            continue
        it = collect(feats, scoring_view(rec), backend, P)
        if it and it.get("frec") is not None:
            it = dict(it, model=model)
            it["frec"] = dict(it["frec"], model=model)
            items.append(it)
    written = {}
    for sfx in sorted({it["split"] for it in items}):
        part = [it for it in items if it["split"] == sfx]
        flow, c1, c2, c3, _ = split_entries(part, backend, P)
        # both backends measure WorldMark's global quantity (co-visible distance over median depth, vg:33-94;
        # the classical one from two-view geometry), so omega_c3 holds it and final_master applies its own tau
        qa = qa_entries(part)
        d = write_results_tree(str(root), sfx, flow, c1, c2, c3, qa)
        os.makedirs(result_dirs(str(root), sfx)["flow_cache"], exist_ok=True)
        for it in part:
            c = dict(it["cache"], px_raw=it["cache"].get("px_raw", {}))
            save_flow_cache(c, f"{d['flow_cache']}/{model}__{it['stem']}.npz")
        rows = master_rows(flow, c1, c2, c3, qa, table_config(backend, P))
        Path(d["quality"], "worldgate_master.csv").write_text(master_csv(rows))
        written[sfx] = str(root)
    return written


__all__ = ["BENCHMARK", "ResultsTreeError", "check_tree_root", "write_worldmark_results"]
