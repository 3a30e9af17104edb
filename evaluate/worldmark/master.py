"""WorldMark's global memory (VGGT-Omega errors, ``vggt_omega_global_c3``), visual quality (Q-Align, ``qalign_batch``)
and the master table (``final_master``): per-split pooling, the thirteen columns, and the results tree it reads.

Reference: AlayaLab/WorldMark @ 26f33a81d3799373fd80ec391d74bb1ae2291e36, ``evaluation/worldmark/`` (MIT); file:line
citations below are as of that commit: fe = flow_eval.py, cv = consistency_v2.py, fm = final_master.py,
vg = vggt_omega_global_c3.py, qa = qalign_batch.py, fb = flow_batch_full.py, pr = protocol.py, wc = wm_config.py.
Defaults reproduce WorldMark exactly, quirks included; each deliberate deviation is a named option (docs/worldmark.md).
tests/evaluate/worldmark/test_worldmark_parity.py holds these functions to golden values printed by WorldMark's own code.
"""
from __future__ import annotations

import dataclasses
import glob
import json
import os
from collections import defaultdict

import numpy as np

from worldgate.generate.record_files import RecordError, read_record_json

from .consistency import REVISIT_TRANS, MemoryConfig, c1_entry, c2_entry, split_delta
from .flow_eval import KEY_FAMILY, flow_record

# ----------------------------------------------------------------------------------------------------------------
# World memory: global (VGGT-Omega, vg)
# ----------------------------------------------------------------------------------------------------------------
from ..features.models.vggt_c3 import (  # noqa: E402,F401 (API)
    C3_CONF_Q, C3_GRID_STEP, C3_MAX_FRAMES, C3_OCC_HI, C3_OCC_LO, C3_STRIDE_SEC, c3_errors, c3_record, c3_select_frames)


# ----------------------------------------------------------------------------------------------------------------
# Visual quality (qa)
# ----------------------------------------------------------------------------------------------------------------
def qa_frame_indices(n_frames, fps):
    """qa:25-28: frames 0, step, 2 step, ... with step = round(fps) (16 when the decoder reports 0)."""
    fps = fps or 16.0
    return list(range(0, n_frames, max(1, int(round(fps)))))


def qa_record(model, stem, quality, aesthetic, n_frames_sampled):
    """The qalign_shard{S}of{N}.json entry (qa:51)."""
    return {"model": model, "stem": stem, "qalign_quality": float(quality), "qalign_aesthetic": float(aesthetic),
            "n_frames": int(n_frames_sampled)}


# ----------------------------------------------------------------------------------------------------------------
# final_master
# ----------------------------------------------------------------------------------------------------------------
COLS = ["DA_t", "DA_r", "MP_t", "MP_r", "MS_t", "MS_r", "RL_t", "RL_r", "Local", "Global", "Rev", "QA_q", "QA_a"]
EXCLUDE = ("Open-Oasis", "Genie3")                                             # fm:5
NAME_MAP = {"ALAYAWORLD": "AlayaWorld", "DreamX-World-AR": "DreamX-World", "HY-GameCraft": "HY-GameCraft 1.0",
            "HY-World": "HY-World 1.5", "LingBotWorld-Fast": "LingBot-World", "Lyra-2": "Lyra 2.0",
            "MatrixGame2.0": "Matrix-Game 2.0", "MatrixGame3.0": "Matrix-Game 3.0",
            "SANA-WM-streaming": "SANA-WM", "Yume": "Yume 1.5"}                  # fm:72-75
SHORT = {"DA_t": "Dir-trans", "DA_r": "Dir-rot", "MP_t": "Purity-trans", "MP_r": "Purity-rot",
         "MS_t": "Stab-trans", "MS_r": "Stab-rot", "RL_t": "Lat-trans", "RL_r": "Lat-rot", "Local": "Local",
         "Global": "Global", "Rev": "Revisit", "QA_q": "Percept", "QA_a": "Aesth"}   # fm:100-101
TRANS_FAMS, ROT_FAMS = {"fwd", "lat"}, {"yaw"}                                 # fm:19


@dataclasses.dataclass(frozen=True)
class MasterConfig:
    exclude: tuple = EXCLUDE          # fm:5 models dropped from the table (they still count for split_delta)
    tau_g: float = 0.05               # fm:71
    cut_guard: int = 8                # fm:47 frames, |idx - cut| <= 8 on either end of a pair
    tau_mut: float = 0.10             # fm:46
    clip_after_pool: bool = True      # fm:78,85 direction clipped at 0 after pooling.  False: clip each segment
    global_tau_after_mean: bool = True  # fm:90 100/(1+mean(e)/tau).  False: mean of per-video 100/(1+e/tau)
    name_map: tuple = tuple(NAME_MAP.items())


def _nanmean_list(v):
    return float(np.mean(v)) if v else np.nan


def _pool_m1(rs, fams, clip_each=False):
    """fm:15 — every non-na M1 segment of every video of the model; dir_gated (dir if absent)."""
    v = [s.get("dir_gated", s.get("dir")) for r in rs for s in r.get("M1", [])
         if not s.get("na") and KEY_FAMILY.get(s.get("key")) in fams and s.get("dir_gated", s.get("dir")) is not None]
    if clip_each:
        v = [max(0.0, x) for x in v]
    return _nanmean_list(v)


def _pool_m2(rs, fams):
    """fm:16 — purity, family read from the M2 entry."""
    v = [s["purity"] for r in rs for s in r.get("M2", []) if not s.get("na") and "purity" in s and s.get("family") in fams]
    return _nanmean_list(v)


def _pool_m4(rs, fams):
    """fm:17 — stability scores in [0,1] (the g<=1e-6 zeros included)."""
    v = [s["score"] for r in rs for s in r.get("M4", []) if not s.get("na") and "score" in s and KEY_FAMILY.get(s.get("key")) in fams]
    v = [x for x in v if 0 <= x <= 1]
    return _nanmean_list(v)


def _pool_m3(rs, fams):
    """fm:18 — latency scores pooled by the family of the *new* key (gated zeros included)."""
    v = [s["score"] for r in rs for s in r.get("M3", []) if not s.get("na") and "score" in s and KEY_FAMILY.get(s.get("new")) in fams]
    v = [x for x in v if 0 <= x <= 1]
    return _nanmean_list(v)


def _mean_nn(xs):
    """fm:45"""
    xs = [x for x in xs if x is not None]
    return float(np.mean(xs)) if xs else np.nan


def local_score(c1s, cfg=MasterConfig()):
    """fm:48-64: over non-frozen videos (c1 without 'na' and with pmean_dists): hard-cut share hc; per video the
    share of stored (4-dp rounded) distances > 0.10 after dropping pairs with an end within 8 frames of a cut;
    100 (1 - hc)(1 - mean of the per-video shares).  hard_cut None (TransNet error) counts as no cut."""
    ev = [c for c in c1s if not c.get("na") and c.get("pmean_dists") is not None]
    if not ev:
        return np.nan
    hc = _mean_nn([1 if c.get("hard_cut") else 0 for c in ev])
    muts = []
    for c in ev:
        d = np.array(c["pmean_dists"]); idx = c.get("idx", []); cuts = c.get("cut_frames") or []
        keep = np.ones(len(d), bool)
        if cuts and len(idx) == len(d) + 1:
            for k in range(len(d)):
                if any(abs(idx[k] - cf) <= cfg.cut_guard or abs(idx[k + 1] - cf) <= cfg.cut_guard for cf in cuts):
                    keep[k] = False
        d = d[keep]
        if len(d):
            muts.append(float(np.mean(d > cfg.tau_mut)))
    if not muts:
        return np.nan
    return 100 * (1 - (hc if not np.isnan(hc) else 0)) * (1 - float(np.mean(muts)))


def master_rows(flow_recs, c1_entries, c2_entries, c3_entries, qa_entries, cfg=MasterConfig()):
    """final_master's `rows` (fm:80-93) for one split.

    flow_recs: list of results_flow records (fm:8; order = glob order, only float summation order depends on it);
    c1_entries / c2_entries / c3_entries / qa_entries: the merged shard dicts key -> entry (fm:21-37).
    Returns {display name: {col: value or nan}} in the order models first appear in flow_recs."""
    name_map = dict(cfg.name_map)
    bym = defaultdict(list)
    for r in flow_recs:
        bym[r["model"]].append(r)
    qb = defaultdict(list)
    for r in qa_entries.values():
        qb[r["model"]].append((r["qalign_quality"], r["qalign_aesthetic"]))
    cb = defaultdict(list); cg = defaultdict(list)
    for r in c3_entries.values():
        if "global_median_e" in r:
            cb[r["model"]].append(r["global_median_e"])
            cg[r["model"]].append(1.0 / (1.0 + r["global_median_e"] / cfg.tau_g))
    c1b = defaultdict(list)
    for r in c1_entries.values():
        if "C1" in r:
            c1b[r["model"]].append(r["C1"])
    c2t = defaultdict(list); c2r = defaultdict(list)
    for r in c2_entries.values():
        c2 = r["C2"]
        if c2.get("na_scope") or c2.get("not_evaluable"):
            continue
        (c2t if r["action"] in REVISIT_TRANS else c2r)[r["model"]].append(c2["C2"])

    def s100(x):
        return 100.0 * x if x == x else np.nan

    def da100(x):
        return 100.0 * max(0.0, x) if x == x else np.nan

    def qa100(x):
        return 100.0 * (x - 1.0) / 4.0 if x == x else np.nan

    ce = not cfg.clip_after_pool
    dam = (lambda x: s100(x)) if ce else da100
    rows = {}
    for m in bym:
        if m in cfg.exclude:
            continue
        rs = bym[m]; rev = c2t.get(m, []) + c2r.get(m, [])
        if cfg.global_tau_after_mean:
            glob_ = s100(1.0 / (1.0 + _mean_nn(cb[m]) / cfg.tau_g)) if cb.get(m) else np.nan
        else:
            glob_ = s100(_mean_nn(cg[m])) if cg.get(m) else np.nan
        rows[name_map.get(m, m)] = {
            "DA_t": dam(_pool_m1(rs, TRANS_FAMS, ce)), "DA_r": dam(_pool_m1(rs, ROT_FAMS, ce)),
            "MP_t": s100(_pool_m2(rs, TRANS_FAMS)), "MP_r": s100(_pool_m2(rs, ROT_FAMS)),
            "MS_t": s100(_pool_m4(rs, TRANS_FAMS)), "MS_r": s100(_pool_m4(rs, ROT_FAMS)),
            "RL_t": s100(_pool_m3(rs, TRANS_FAMS)), "RL_r": s100(_pool_m3(rs, ROT_FAMS)),
            "Local": local_score(c1b.get(m, []), cfg),
            "Global": glob_,
            "Rev": _mean_nn(rev) if rev else np.nan,
            "QA_q": qa100(_mean_nn([x[0] for x in qb[m]])) if qb.get(m) else np.nan,
            "QA_a": qa100(_mean_nn([x[1] for x in qb[m]])) if qb.get(m) else np.nan}
    return rows


def master_csv(rows):
    """fm:113-115 final_master.csv text: header, rows sorted by display name, '%.4f', '' for NaN."""
    lines = ["model," + ",".join(COLS)]
    for m in sorted(rows):
        lines.append(m + "," + ",".join(f"{rows[m][c]:.4f}" if not np.isnan(rows[m][c]) else "" for c in COLS))
    return "\n".join(lines) + "\n"


def master_table(rows):
    """fm:94-112 printed table lines (without the trailing 'CSV -> ...' line): 2 decimals, '+' best, '-' worst
    (ties: first model in `rows` order), '—' for NaN."""
    best, worst = {}, {}
    for c in COLS:
        vv = {m: rows[m][c] for m in rows if not np.isnan(rows[m][c])}
        if not vv:
            continue
        best[c] = max(vv, key=vv.get); worst[c] = min(vv, key=vv.get)
    hdr = f"{'model':<18}" + "".join(f"{SHORT[c]:>10}" for c in COLS)
    out = [hdr, "-" * len(hdr)]
    for m in sorted(rows):
        line = f"{m:<18}"
        for c in COLS:
            v = rows[m][c]
            if np.isnan(v):
                line += f"{'—':>10}"; continue
            tag = "+" if best.get(c) == m else ("-" if worst.get(c) == m else " ")
            line += f"{('%.2f' % v):>9}{tag}"
        out.append(line)
    out.append("")
    out.append("All [0,100], higher is better (2 decimals); + best, - worst; trans=fwd+lat segments pooled, rot=yaw "
               "segments; Response Latency=100*(1-lat/L); Revisit=round-trip videos merged; QA=(x-1)/4*100; "
               "Global=100/(1+e/0.05)")
    return out


# ---- the results tree fm reads (wc:14-25, fm:8, 22, 26, 32, 37, 113) ----
def result_dirs(root, suffix=""):
    """Directories under WORLDMARK_RESULTS for one EVAL_SUFFIX (wc:21-25)."""
    return {"flow": f"{root}/results_flow{suffix}", "flow_cache": f"{root}/results_flow{suffix}/cache",
            "quality": f"{root}/results_quality{suffix}", "consistency": f"{root}/results_consistency{suffix}",
            "c3": f"{root}/results_c3_vggt{suffix}"}


#: the largest results-tree JSON read (a stage's shard over a whole split: WorldMark's are a few MB)
RESULTS_JSON_BYTES = 256 << 20


def read_results_tree(root, suffix=""):
    """Load what fm loads: every *.json directly in results_flow{sfx} (fm:8), qalign_shard*.json (fm:22),
    omega_c3_1s_shard*.json (fm:26), c1c2_v2_c1new_shard*.json (fm:32), c1c2_v2_c2fix_shard*.json (fm:37);
    shard dicts merged with dict.update in glob order."""
    d = result_dirs(root, suffix)

    def load(f, kind=None):  # a regular file only, bounded (a FIFO or a /dev/zero link in a results root hung import)
        try:
            v = read_record_json(f, RESULTS_JSON_BYTES)
        except (RecordError, OSError) as e:
            raise RecordError(f"results root file {f}: {e}") from None
        if kind is not None and not isinstance(v, kind):
            raise RecordError(f"results root file {f}: a JSON {type(v).__name__}, not an object as WorldMark writes")
        return v

    def merged(pat):
        out = {}
        for f in glob.glob(pat):
            out.update(load(f, dict))
        return out
    flow = []
    for f in glob.glob(f"{d['flow']}/*.json"):
        flow.append(load(f))
    return (flow, merged(f"{d['consistency']}/c1c2_v2_c1new_shard*.json"),
            merged(f"{d['consistency']}/c1c2_v2_c2fix_shard*.json"),
            merged(f"{d['c3']}/omega_c3_1s_shard*.json"), merged(f"{d['quality']}/qalign_shard*.json"))


def write_results_tree(root, suffix, flow_recs, c1_entries, c2_entries, c3_entries, qa_entries, shard="0of1"):
    """Write a tree final_master.py can read (file names as the stages write them: fb:28, cv:320, vg:110, qa:41)."""
    d = result_dirs(root, suffix)
    for k in ("flow", "quality", "consistency", "c3"):
        os.makedirs(d[k], exist_ok=True)
    for r in flow_recs:
        with open(f"{d['flow']}/{r['model']}__{r['stem']}.json", "w") as fh:
            json.dump(r, fh, default=float)
    for name, dd, obj in (("c1c2_v2_c1new", "consistency", c1_entries), ("c1c2_v2_c2fix", "consistency", c2_entries),
                          ("omega_c3_1s", "c3", c3_entries), ("qalign", "quality", qa_entries)):
        with open(f"{d[dd]}/{name}_shard{shard}.json", "w") as fh:
            json.dump(obj, fh, default=float)
    return d


# ----------------------------------------------------------------------------------------------------------------
# One split end to end
# ----------------------------------------------------------------------------------------------------------------
def score_split(videos, flow_cfg=None, mem_cfg=MemoryConfig(), master_cfg=MasterConfig(), delta_scope="split"):
    """Score one split from per-video inputs.  Each video: dict(model, stem, cache, nf, native_fps, width,
    patch_mean [NF,D], transnet_p [NF] or cut_frames, lpips_fn (optional), c3_errs (list, or c3 = (extr, intr,
    depth, conf)), qalign_quality, qalign_aesthetic).  delta_scope="split" (WorldMark, cv:315) or "video".
    Returns dict(delta, flow, c1, c2, c2_archive, c3, qa, rows)."""
    delta = split_delta([v["cache"] for v in videos], mem_cfg)
    flow, c1, c2, arch, c3, qa = [], {}, {}, {}, {}, {}
    for v in videos:
        key = f"{v['model']}__{v['stem']}"; cache = v["cache"]
        flow.append(flow_record(v["model"], v["stem"], int(v["stem"].split("_")[1]), cache, flow_cfg))
        dl = delta if delta_scope == "split" else split_delta([cache], mem_cfg)
        c1[key] = c1_entry(v["model"], v["stem"], cache, dl, v["nf"], v["patch_mean"], v.get("lpips_fn"),
                           v.get("transnet_p"), v.get("cut_frames"), v.get("transnet_error"), mem_cfg)
        e, a = c2_entry(v["model"], v["stem"], cache, v["nf"], v["width"], v["patch_mean"], mem_cfg)
        if e is not None:
            c2[key] = e; arch[key] = a
        if "c3_errs" in v:
            errs, cov, tot = v["c3_errs"]
        else:
            errs, cov, tot = c3_errors(*v["c3"])
        c3[key] = c3_record(v["model"], v["stem"], errs, cov, tot)
        if v.get("qalign_quality") is not None:
            qa[key] = qa_record(v["model"], v["stem"], v["qalign_quality"], v["qalign_aesthetic"],
                                len(qa_frame_indices(v["nf"], v.get("native_fps"))))
    rows = master_rows(flow, c1, c2, c3, qa, master_cfg)
    return dict(delta=delta, flow=flow, c1=c1, c2=c2, c2_archive=arch, c3=c3, qa=qa, rows=rows)
