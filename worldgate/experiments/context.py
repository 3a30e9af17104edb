"""``worldgate compare-context``: one model, one suite, several context policies at one memory budget.

For each policy: ``generate --context POLICY --budget N`` into ``OUT/POLICY``, ``evaluate`` it, then one table with
every memory metric, revisit decay per round trip, rollout wall time, the KV bytes held (from the model's
``context.jsonl``) and the peak resident memory of the generation (sampled from /proc), plus a memory-vs-time plot.
"""

from __future__ import annotations

import json
import os
import resource
import threading
import time
from pathlib import Path

from worldgate.evaluate import uncertainty as U
from worldgate.evaluate.metrics import metric_info
from worldgate.evaluate.report import plot_context_points, revisit_decay
from worldgate.evaluate.runner import evaluate_run
from worldgate.generate.record_files import CONTEXT
from worldgate.generate.records import list_records, read_meta
from worldgate.experiments.compare import per_case
from worldgate.generate.runner import run_generate

MEMORY_METRICS = ("revisit_memory", "local_memory", "global_memory", "human_appearance", "object_appearance",
                  "object_geometry", "environment_visible")


class _PeakRSS:
    """Peak resident set size of this process while the block runs (sampled every 20 ms from /proc/self/statm)."""

    def __enter__(self):
        self.page = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
        self.base = self.peak = self._rss()
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()
        return self

    def _rss(self) -> int:
        try:
            return int(Path("/proc/self/statm").read_text().split()[1]) * self.page
        except (OSError, ValueError, IndexError):
            return 0

    def _run(self):
        while not self._stop.wait(0.02):
            self.peak = max(self.peak, self._rss())

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join()
        self.peak = max(self.peak, self._rss())


def compare_context(model: str, suite: str, policies: list[str], budget: int | None, out: str | Path, *,
                    data: str | None = None, limit: int | None = None, overrides: list[str] | None = None,
                    seed: int = 0, full: bool = False, progress: bool = False, model_args: dict | None = None,
                    backend: str = "classical") -> dict:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for pol in policies:
        d = out / pol
        t0 = time.perf_counter()
        with _PeakRSS() as mem:
            res = run_generate(model, suite, d, data=data, limit=limit, seed=seed, overrides=overrides, full=full,
                               progress=progress, context=pol, budget=budget, model_args=model_args)
        wall = time.perf_counter() - t0
        if res.failed:
            raise RuntimeError(f"{pol}: {len(res.failed)} case(s) failed, e.g. {next(iter(res.failed.items()))}")
        ev = evaluate_run(d, progress=progress, backend=backend)
        samples = [json.loads(x) for x in (d / "samples.jsonl").read_text().splitlines() if x.strip()]
        kv = []
        rollout_s = 0.0
        for rec in list_records(d):
            meta = read_meta(rec)
            rollout_s += float((meta.get("timing") or {}).get("rollout_s") or 0.0)
            if (rec / CONTEXT).is_file():
                kv += [json.loads(x).get("kv_bytes", 0) for x in (rec / CONTEXT).read_text().splitlines()]
        row = {"policy": pol, "budget": budget, "records": ev["records"], "errors": len(ev["errors"]),
               "rollout_s": rollout_s, "wall_s": wall, "peak_kv_mib": (max(kv) / 2**20) if kv else None,
               "peak_rss_mib": (mem.peak - mem.base) / 2**20,
               "peak_child_rss_mib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
               "s_per_video": rollout_s / max(1, ev["records"]),
               "decay": revisit_decay({"samples": samples})}
        for m in MEMORY_METRICS + wmb_metrics():
            row[m] = (ev["metrics"].get(m) or {}).get("mean")
        row["_samples"] = samples
        rows.append(row)
    ref = next((r for r in rows if r["policy"] == "full_kv"), None)
    for r in rows:
        r["time_vs_full_kv"] = (r["rollout_s"] / ref["rollout_s"]) if ref and ref["rollout_s"] else None
        r["vs_full_kv"] = {} if ref is None or r is ref else {
            m: U.paired(per_case(ref["_samples"], m), per_case(r["_samples"], m))
            for m in MEMORY_METRICS + wmb_metrics()}
    for r in rows:
        del r["_samples"]
    md = _table(model, suite, budget, rows) + _differences(rows)
    (out / "compare.md").write_text(md)
    (out / "compare.json").write_text(json.dumps({"model": model, "suite": suite, "budget": budget, "rows": rows},
                                                 indent=2))
    plot_context_points([{"policy": r["policy"], "budget": budget, "memory": r["revisit_memory"],
                          "seconds": r["rollout_s"]} for r in rows], out / "context.png")
    return {"rows": rows, "markdown": md, "out": out}


def wmb_metrics() -> tuple[str, ...]:
    """WorldMemBench's metrics (the paper's capability table), in the registry's order."""
    return tuple(m for m, i in metric_info().items() if i["benchmark"] == "worldmembench" and m not in MEMORY_METRICS)


def _differences(rows) -> str:
    """Per metric, each policy minus FullKV on the shared cases, with its 95 % interval (and p, where tested)."""
    ms = [m for m in MEMORY_METRICS + wmb_metrics() if any((r.get("vs_full_kv") or {}).get(m) for r in rows)]
    others = [r for r in rows if r.get("vs_full_kv")]
    if not ms or not others:
        return ""
    info = metric_info()
    lines = ["#### difference to full_kv (policy - full_kv on the shared cases, 95 % bootstrap interval)", "",
             "| metric | " + " | ".join(r["policy"] for r in others) + " |", "|---|" + "---|" * len(others)]
    for m in ms:
        cells = []
        for r in others:
            d = r["vs_full_kv"].get(m)
            cells.append("n/a" if not d else f"{d['mean_diff']:+.3g} [{d['low']:+.3g}, {d['high']:+.3g}]"
                         + ("" if d["p"] is None else f" p={d['p']:.3f}"))
        lines.append(f"| {info[m]['name']} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _fmt(v, p=1):
    return "n/a" if v is None else f"{v:.{p}f}"


def _table(model, suite, budget, rows) -> str:
    info = metric_info()
    extra = [m for m in wmb_metrics() if any(r.get(m) is not None for r in rows)]
    cols = ["policy", "revisit memory", "local memory", "global memory", "human app.", "object app.", "object geom.",
            "env. visible", *(info[m]["name"] for m in extra), "revisit decay R1..Rk", "rollout s", "s / video",
            "x full_kv", "peak KV MiB", "peak RSS MiB", "peak model-process RSS MiB"]
    lines = [f"### context policies: {model} on {suite}, budget {budget if budget else 'unlimited'} chunks", "",
             "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        decay = " → ".join(_fmt(v) for v in r["decay"]) if r["decay"] else "n/a"
        lines.append("| " + " | ".join([r["policy"], _fmt(r["revisit_memory"]), _fmt(r["local_memory"]),
                                        _fmt(r["global_memory"]), _fmt(r["human_appearance"], 3),
                                        _fmt(r["object_appearance"], 3), _fmt(r["object_geometry"], 3),
                                        _fmt(r["environment_visible"], 3), *(_fmt(r[m], 3) for m in extra), decay,
                                        _fmt(r["rollout_s"]), _fmt(r["s_per_video"]), _fmt(r["time_vs_full_kv"], 2),
                                        _fmt(r["peak_kv_mib"]), _fmt(r["peak_rss_mib"]),
                                        _fmt(r["peak_child_rss_mib"])]) + " |")
    lines += ["", "WorldMark memory metrics 0-100, WorldMemBench static memory 0-1 (classical backend); decay = revisit "
                  "memory of the k-th round trip, mean over cases; rollout s = the model's generation time summed over "
                  "cases", ""]
    return "\n".join(lines)


__all__ = ["compare_context", "MEMORY_METRICS"]
