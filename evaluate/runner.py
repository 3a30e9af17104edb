"""``evaluate``: score saved rollouts from their records alone.

For every record: decode once, compute the missing features (cached on disk), then run the cheap metrics. A record
that cannot be scored (corrupted, truncated, empty or missing video, unreadable metadata) gets an error entry with
the reason and the rest are still scored; coverage is reported next to every aggregate. Writes ``results.json`` and
``samples.jsonl`` into each run folder, prints a table, and writes a leaderboard (CSV + Markdown) when several runs
are given. ``--rescore`` never computes a feature: it scores from the cache only.
"""

from __future__ import annotations

import functools
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np
from tqdm import tqdm

from worldgate.generate.outputs import OutputFolder
from worldgate.generate.provenance import environment, models_of, resolved_revision
from worldgate.generate.records import RecordError, candidate_records, git_hash, read_meta, read_record_json, record_views
from worldgate.trajectories.registry import did_you_mean

from . import metrics as M
from . import protocol as PR
from . import uncertainty as U
from .csv_cells import csv_text
from .features import FeatureCache, FeatureError, MissingFeature, compute_features, open_record, scoring_view
from .judges import open_judge
from .metrics import benchmarks, metric_info, score_record
from .results import ResultsError, read_results, read_samples, write_results

BACKENDS = ("classical", "learned")


def extractors_for(backend: str, check: bool = True) -> list:
    """The one-view benchmarks' extractors under ``backend`` (each feature once); ``check``: fail before the first
    record when a model they load is not on this machine."""
    return M.extractors(backend, views=1, check=check)


def n_views(folder: Path) -> int:
    meta = read_meta(folder)
    return len(record_views(meta)) if meta else 1


def evaluate_run(run: Path, metrics: set[str] | None = None, backend: str = "classical", rescore: bool = False,
                 params: dict | None = None, progress: bool = True, write: bool = True,
                 extractors: list | None = None, judge: str | None = None, judge_device: str | None = None) -> dict:
    run = Path(run)
    if not run.is_dir():
        raise FileNotFoundError(f"run folder {run} does not exist (write one with `worldgate generate ... --out {run}`)")
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}: choose one of {BACKENDS}")
    P = M.params(params)  # every benchmark's thresholds; an unknown name gets a did-you-mean error
    unknown = sorted(set(metrics or ()) - set(metric_info()))
    if unknown:
        raise did_you_mean("metric", unknown[0], metric_info())
    vlm, judges = _open_judge(run, judge, backend, judge_device, rescore)
    cache = FeatureCache(run / ".features")
    folders = candidate_records(run)
    if not folders:
        raise FileNotFoundError(f"{run} holds no rollout records (was it written with --dry-run?)")
    if all(f.is_symlink() for f in folders):  # e.g. `evaluate /`: /bin -> usr/bin is no run's record
        raise FileNotFoundError(f"{run} holds no rollout records, only links to folders ({folders[0].name}, ...), "
                                "which are never followed: give a run folder written by `worldgate generate`")
    # --rescore loads no model (everything comes from the cache), so the models' presence is not checked
    extractors = extractors if extractors is not None else extractors_for(backend, check=not rescore)
    if any(ex.backend != backend for ex in extractors):
        raise ValueError(f"extractors of other backends given for --backend {backend}: scores are never mixed")
    extractors = list(extractors) + judges
    samples, t_all = [], time.perf_counter()
    feat_stats = {"computed": 0, "cached": 0}
    collected: dict[str, list] = {b.name: [] for b in benchmarks() if b.collect is not None}
    items = tqdm(folders, desc=f"evaluate {run.name}", unit="record") if progress else folders
    for folder in items:
        views = n_views(folder)
        if views > 1:  # records with several views are scored by the benchmarks of such records, features and all
            samples.extend(_score_views(folder, views, cache, backend, metrics, P, rescore, feat_stats, vlm))
            continue
        row, rec = {"case": folder.name}, None
        try:
            rec = open_record(folder)
            row["tags"] = rec.meta.get("case", {}).get("tags", {})  # also on an error row: family coverage reads it
            feats, st = compute_features(rec, extractors, cache, rescore=rescore)
            if st.get("missing"):
                rec.caveats.append(f"--rescore: features not cached, the metrics that read them are unavailable: "
                                   f"{', '.join(st['missing'])} (evaluate without --rescore computes them)")
            feat_stats["computed"] += len(st["computed"])
            feat_stats["cached"] += len(st["cached"])
            rd = scoring_view(rec)
            scores = score_record(feats, rd, backend, metrics, P)
            for b in benchmarks():
                if b.name in collected:
                    collected[b.name].append(b.collect(feats, rd, backend, P))
            row.update({
                "video_sha256": rec.content_hash,
                "tags": rec.meta.get("case", {}).get("tags", {}),
                "adapter": rec.meta.get("adapter", {}).get("name"),
                "timing": rec.meta.get("timing"),
                "context": rec.meta.get("context"),
                "scores": {k: s.value for k, s in scores.items()},
                "unavailable": {k: s.reason for k, s in scores.items() if s.value is None},
                "detail": {k: s.detail for k, s in scores.items() if s.detail},
                "features": {ex.name: ex.key() for ex in extractors},
                **({"caveats": list(rec.caveats)} if rec.caveats else {}),
            })
        except FeatureError as e:
            row["error"] = str(e)
            why = cache.why_not_served(rec) if rescore and rec is not None and isinstance(e, MissingFeature) else []
            if why:  # --rescore on a cache that was there but could not be served: say which file and what to do
                row["error"] = (f"{folder.name}: --rescore scores from the cache only, and its " + "; ".join(why[:3])
                                + " was not served: run evaluate without --rescore to recompute it")
        except Exception as e:  # a bug in one record's scoring must not hide the others; it is reported in full
            row["error"] = f"{type(e).__name__}: {e}"
        samples.append(row)
    results = aggregate(samples, metrics)
    results.update({
        "run": str(run),
        "config": {"backend": backend, "metrics": sorted(metrics) if metrics else "all", "rescore": rescore,
                   "params": P, "run_config": _read_json(run / "run.json"), "judge": judge},
        "backends": {ex.name: {"backend": ex.backend, "key": ex.key(), **ex.config()} for ex in extractors},
        "versions": dict(versions()),
        "git": _git(),
        "records": len(folders),
        "protocol": PR.run_protocol(_read_json(run / "run.json"), samples, backend, P, M.params(None)),
        "provenance": {**environment(), "models": models_of({ex.name: ex.config() for ex in extractors}),
                       "judge": judge_provenance(vlm) if vlm else None},
        "errors": {s["case"]: s["error"] for s in samples if "error" in s},
        "caveats": {s["case"]: s["caveats"] for s in samples if s.get("caveats")} | (
            {"(feature cache)": [cache.summary()]} if cache.summary() else {}),  # one line per run, counting files
        "features": feat_stats,
        "seconds": time.perf_counter() - t_all,
    })
    for b in benchmarks():  # run-level results: WorldMark's pooled table, WorldMemBench's analyses, MultiWorldBench's
        if b.finish is not None:  # capabilities and tracks
            b.finish(results, samples, metrics, collected=collected.get(b.name), backend=backend, P=P)
    if write:  # the latest in results.json; every evaluation is also kept in results/
        write_results(run, results, samples, history=True)
    return results


def judge_provenance(judge) -> dict:
    """The judge's id, the revision its loader opens (or, for a server, its host and the model name it reports,
    never a key), and a digest of the prompts the benchmarks send it (the judged metrics' templates,
    prompts/worldmembench and prompts/multiworldbench). ``judge``: a spec or the run's ``CachedJudge``."""
    import hashlib
    from importlib import resources

    h, names = hashlib.sha256(), []
    for pkg in ("worldgate.prompts.worldmembench", "worldgate.prompts.multiworldbench"):
        for f in sorted(resources.files(pkg).iterdir(), key=lambda f: f.name):
            if f.name.endswith((".txt", ".yaml")) and f.is_file():
                h.update(f.name.encode() + b"\0" + f.read_bytes())
                names.append(f"{pkg.rsplit('.', 1)[-1]}/{f.name}")
    ident = judge.provenance() if hasattr(judge, "provenance") else {"id": judge, "revision": resolved_revision(judge)}
    return {**ident, "prompts_sha256": h.hexdigest(), "prompts": names}


def judge_extractors(judge: str, backend: str, device: str | None = None, check: bool = True) -> list:
    """The extractors a VLM judge (``--judge HF_ID``) adds: each benchmark that takes a judge gives its own
    (``check``: each fails before the first record when its model is not on this machine)."""
    out = [ex for b in benchmarks() if getattr(b, "judge", None) is not None
           for ex in b.judge(judge, backend, device, check=check)]
    if not out:
        raise ValueError("--judge was given but no registered benchmark takes a judge")
    return out


def aggregate(samples: list[dict], metrics: set[str] | None = None) -> dict:
    ids = [m for m in metric_info() if not metrics or m in metrics]
    agg = {}
    n = len(samples)
    for m in ids:
        vals = [s["scores"][m] for s in samples if "scores" in s and s["scores"].get(m) is not None]
        reasons = {}
        for s in samples:
            if "error" in s:
                reasons["record error"] = reasons.get("record error", 0) + 1
            elif s.get("scores", {}).get(m) is None and m in s.get("unavailable", {}):
                r = s["unavailable"][m]
                reasons[r] = reasons.get(r, 0) + 1
        agg[m] = {
            "mean": float(np.mean(vals)) if vals else None,
            "std": float(np.std(vals)) if vals else None,
            "n": len(vals),
            "coverage": len(vals) / n if n else 0.0,
            "unavailable": reasons,
            "ci": U.interval(vals),
        }
        by_case = seeds_by_case(samples, m)
        if by_case is not None:  # several seeds per case: the case is the unit; the interval counts both spreads
            ci = U.seeds_interval(by_case)
            agg[m].update(mean=float(np.mean([np.mean(v) for v in by_case.values()])), ci=ci,
                          seeds={"cases": len(by_case), "seeds_per_case": max(len(v) for v in by_case.values()),
                                 "between_seed_sd": ci["seed_sd"] if ci else None})
    return {"metrics": agg}


def seeds_by_case(samples: list[dict], m: str) -> dict | None:
    """case -> its values of ``m`` over seeds, where some case was rolled out with more than one seed, else None."""
    out: dict[str, list] = {}
    for s in samples:
        v = (s.get("scores") or {}).get(m)
        if v is not None:
            out.setdefault(str((s.get("tags") or {}).get("seed_of") or s.get("case")), []).append(v)
    return out if out and max(len(v) for v in out.values()) > 1 else None


@functools.lru_cache(maxsize=1)
def versions() -> dict:
    import importlib.metadata as md

    out = {"python": platform.python_version()}
    for pkg in ("worldgate", "numpy", "scipy", "opencv-python-headless", "evo", "imageio-ffmpeg", "torch", "transformers"):
        try:
            out[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            pass
    return out


def _git() -> str:
    return git_hash()


def _read_json(p: Path):
    """A run's JSON side file (run.json): None where absent; where it is a link, a FIFO, a device, too large, not
    UTF-8 or not JSON, ``{"unreadable": why}`` (read without following or blocking: a FIFO run.json hung evaluate)."""
    try:
        return read_record_json(Path(p))
    except FileNotFoundError:
        return None
    except (RecordError, OSError) as e:
        return {"unreadable": f"{Path(p).name}: {e}"}


def _pm(a: dict, digits: int) -> str:
    ci = a.get("ci")
    if not ci or ci.get("low") is None:
        return ""
    half = max(ci["high"] - a["mean"], a["mean"] - ci["low"], 0.0)
    return f" ±{half:.{digits}f}"


def held(samples: list[dict]) -> set[str]:
    """The benchmarks whose cases ``samples`` hold (``Benchmark.owns``; one that does not say holds every case)."""
    return {b.name for b in benchmarks() if b.owns is None or any(b.owns(s) for s in samples)}


def format_table(results: list[dict], samples: list[list[dict]] | None = None) -> str:
    """One column per run (the run's folder name), one row per metric: value ± half its 95 % interval (records
    scored/records); each run's protocol status under the table. With ``samples`` (each run's sample lines), only
    the metrics of the benchmarks whose cases some run holds (a WorldMark run shows no WorldMemBench rows)."""
    names = [Path(r["run"]).name for r in results]
    ids = [m for m in metric_info() if any(m in r["metrics"] for r in results)]
    if samples is not None:
        keep = held([s for ss in samples for s in ss])
        mine = [m for m in ids if any(m in b.metrics for b in benchmarks() if b.name in keep)]
        ids = mine or ids
    w0 = max(len(metric_info()[m]["name"]) for m in ids) + 2
    lines = ["metric".ljust(w0) + "".join(n[:26].rjust(28) for n in names)]
    for m in ids:
        cells = []
        for r in results:
            a = r["metrics"].get(m)
            if not a or a["mean"] is None:
                cells.append("n/a".rjust(28))
            else:
                d = 1 if metric_info()[m]["range"] == "0-100" else 3
                cells.append(f"{a['mean']:.{d}f}{_pm(a, d)} ({a['n']}/{r['records']})".rjust(28))
        lines.append(metric_info()[m]["name"].ljust(w0) + "".join(cells))
    backs = sorted({b["backend"] for r in results for b in r["backends"].values()})
    lines.append(f"(value ±half its 95 % interval (records scored/records); backend: {', '.join(backs)})")
    lines += [f"{n}: {PR.header(r.get('protocol'))}" for n, r in zip(names, results) if not r.get("imported")]
    return "\n".join(lines)


def write_leaderboard(results: list[dict], out: Path, allow_mixed: bool = False) -> tuple[Path, Path]:
    # imported runs (a benchmark's own results, labelled imported) stand beside any backend's
    backs = {json.dumps(sorted({b["backend"] for b in r["backends"].values()})) for r in results
             if not r.get("imported")} or {json.dumps(["imported"])}
    if len(backs) > 1:
        raise ValueError("runs were scored with different backends; scores from different backends are never mixed "
                         "in one table: evaluate them all with the same --backend")
    scored = [r for r in results if not r.get("imported")]
    why = PR.mixed(scored) if len(scored) > 1 else []
    if why and not allow_mixed:
        raise ValueError("these runs cannot be ranked side by side: " + "; ".join(why) + ". Evaluate runs of one "
                         "protocol, or pass --allow-mixed (every such cell is marked); `worldgate compare A B` "
                         "compares two runs on the cases both hold")
    out = Path(out)
    folder = OutputFolder(out, tag="leaderboard")  # nothing written through a link planted in --out
    ids = [m for m in metric_info() if any(r["metrics"].get(m, {}).get("mean") is not None for r in results)]
    header = ["run", "records", "protocol"] + ids
    mark = " †" if why else ""
    rows = []
    for r in results:
        status = (r.get("protocol") or {}).get("status", "imported" if r.get("imported") else "unknown")
        rows.append([Path(r["run"]).name, str(r["records"]), status] + [
            "" if r["metrics"].get(m, {}).get("mean") is None else f"{r['metrics'][m]['mean']:.4g}{mark}" for m in ids])
    csv = folder.write_text("leaderboard.csv", csv_text([header] + rows))  # quoted, formula-looking names neutralised
    names = ["run", "records", "protocol"] + [metric_info()[m]["name"] for m in ids]
    md = folder.write_text("leaderboard.md", "| " + " | ".join(names) + " |\n|" + "---|" * len(names) + "\n" +
                  "".join("| " + " | ".join(r) + " |\n" for r in rows) +
                  f"\nbackend: {json.loads(backs.pop())}\n" +
                  (f"\n† mixed protocols (--allow-mixed): {'; '.join(why)}\n" if why else "") +
                  "".join(f"{Path(r['run']).name}: {PR.header(r.get('protocol'))}\n" for r in scored) +
                  "".join(f"{Path(r['run']).name}: imported ({r['imported'].get('format', '?')}), not re-scored\n"
                          for r in results if r.get("imported")))
    return csv, md


def _open_judge(run: Path, judge: str | None, backend: str, device: str | None, rescore: bool) -> tuple:
    """(the cached judge, the extractors it adds) for ``--judge`` (None, [] without one). The judge's model is
    checked first: a missing one fails in seconds, before any record; its answers are cached beside the features
    (a rescore asks nothing, and asks only the cache)."""
    if not judge:
        return None, []
    vlm = open_judge(judge, run / ".features" / "judge-answers", device, check=not rescore, offline=rescore)
    return vlm, judge_extractors(vlm, backend, device, check=False)


def _score_views(folder: Path, views: int, cache, backend: str, metrics, P: dict, rescore: bool, stats: dict,
                 vlm) -> list[dict]:
    """The rows of a record with several views: scored by the benchmarks of such records, features and all (they
    compute and cache their own), each given the judge when it takes one."""
    return [b.score_folder(folder, cache, backend, metrics, P, rescore, stats,
                           **({"judge": vlm} if vlm and getattr(b, "judge", None) else {}))
            for b in benchmarks() if b.views == views]


def precompute_shard(run: Path, backend: str, rank: int, world: int, progress: bool = False,
                     judge: str | None = None, judge_device: str | None = None) -> int:
    """Fill the feature cache for this process's share (``i % world == rank``) of a run's records: a one-view record's
    features, and a record of several views through its benchmark (which computes and caches its own features and
    casts; the row is dropped). ``judge``: the VLM judge is asked here too (its answers and the judged features land
    in the run's cache), so the scoring step, which reads the cache only, has them."""
    cache = FeatureCache(run / ".features")
    vlm, judges = _open_judge(run, judge, backend, judge_device, rescore=False)
    exs = list(extractors_for(backend)) + judges
    P, stats, n = M.params(None), {"computed": 0, "cached": 0}, 0
    for folder in candidate_records(run)[rank::world]:
        try:
            views = n_views(folder)
            if views == 1:
                compute_features(open_record(folder), exs, cache)
            else:
                _score_views(folder, views, cache, backend, None, P, False, stats, vlm)
            n += 1
        except Exception:  # scored (and reported) by rank 0
            pass
    return n


def _imported_only(run: Path) -> dict | None:
    """The results.json of a run ``worldgate import`` made from a benchmark's results without its videos (no
    record to score), or None."""
    if not run.is_dir() or candidate_records(run):
        return None
    try:
        res = read_results(run).to_dict()  # the one reader: a malformed results.json is no imported run
    except ResultsError:
        return None
    return res if res.get("imported") else None


def run_evaluate(runs: list[str], metrics: str | None = None, backend: str = "classical", rescore: bool = False,
                 out: str | None = None, progress: bool = True, judge: str | None = None,
                 judge_device: str | None = None, params: dict | None = None, allow_mixed: bool = False) -> int:
    """Score runs, print the table, write results and (several runs) a leaderboard. Under a launcher the CLI has
    filled the feature cache in shards first (worldgate/dist.py); this is rank 0's part. ``judge``: a VLM's Hugging
    Face id, the judge of the benchmarks that take one (WorldMemBench's dynamic memory), on ``judge_device`` (default
    cuda when available)."""
    wanted = {m.strip() for m in metrics.split(",") if m.strip()} if metrics is not None else None
    if wanted is not None and not wanted:
        raise ValueError(f"--metrics {metrics!r} names no metric: give ids separated by commas (worldgate list metrics)")
    results = []
    for run in runs:
        imported = _imported_only(Path(run))
        if imported is not None:  # a benchmark's own results without videos: shown as they were imported
            print(f"{Path(run).name}: imported from {imported['imported'].get('from', '?')} (no videos to re-score)")
            results.append(imported)
            continue
        results.append(evaluate_run(Path(run), wanted, backend, rescore, params=params, progress=progress,
                                    judge=judge, judge_device=judge_device))
    print(format_table(results, [[s.to_dict() for s in read_samples(Path(run))] for run in runs]))
    for r in results:
        for b in benchmarks():
            line = b.summary(r) if b.summary is not None else ""
            if line:
                print(f"{Path(r['run']).name}: {line}")
    for r in results:
        if r["errors"]:
            print(f"{Path(r['run']).name}: {len(r['errors'])} record(s) with errors (not scored, or scored 0 by a "
                  "zero rule where the entry says so):", file=sys.stderr)
            for case, err in r["errors"].items():
                print(f"  {case}: {err}", file=sys.stderr)
        print(f"wrote {Path(r['run']) / 'results.json'} and samples.jsonl "
              f"(features computed {r['features']['computed']}, cached {r['features']['cached']})")
    if len(results) > 1:
        dest = Path(out) if out else Path(runs[0]).resolve().parent
        csv, md = write_leaderboard(results, dest, allow_mixed=allow_mixed)
        print(f"leaderboard: {csv} and {md}")
    if any(r["records"] and len(r["errors"]) == r["records"] for r in results):  # nothing scored is a failure
        print("error: no record of " + ", ".join(Path(r["run"]).name for r in results
                                                if r["records"] and len(r["errors"]) == r["records"])
              + " could be scored (see the errors above)", file=sys.stderr)
        return 1
    return 0
