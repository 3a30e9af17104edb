"""``worldgate compare RUN_A RUN_B``: two scored runs, metric by metric, on the cases both hold.

Per metric: each run's mean over the shared cases (a case rolled out with several seeds counts once, as its mean over
seeds), the paired difference B - A with its 95 % interval (bootstrap over cases), a two-sided p-value (paired
bootstrap test), the p-value Holm-corrected across the metrics with any difference, and the smallest difference this case count
can detect (80 % power at 5 %). A run is a run folder (its latest results.json and samples.jsonl) or one of its
``results/results_<UTC>.json`` files (with the ``samples_<UTC>.jsonl`` beside it). The provenance lines that differ
(machine, GPU, CUDA, package versions, model revisions) and the protocol of each run are printed under the table.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from worldgate.evaluate import protocol as PR
from worldgate.evaluate import uncertainty as U
from worldgate.evaluate.metrics import metric_info
from worldgate.evaluate.report import ReportError, load_run
from worldgate.evaluate.results import read_results, read_samples
from worldgate.generate.provenance import differences
from worldgate.generate.runner import check_out

per_case = U.per_case


def load(path) -> dict:
    """A run folder, or a results_<UTC>.json of its history: {"name", "results", "samples"}."""
    p = Path(path)
    if p.is_file() and p.name.startswith("results_") and p.suffix == ".json":
        samples_file = p.with_name("samples_" + p.name[len("results_"):-len(".json")] + ".jsonl")
        if not samples_file.is_file():
            raise ReportError(f"{p}: no {samples_file.name} beside it (its per-record scores): compare needs both")
        results = read_results(p).to_dict()  # checked as evaluate's own: a malformed file names its field
        samples = [s.to_dict() for s in read_samples(samples_file)]
        return {"name": f"{p.parent.parent.name}@{p.stem[len('results_'):]}", "results": results, "samples": samples}
    r = load_run(p)
    return {"name": r["name"], "results": r["results"], "samples": r["samples"]}


def compare(a_path, b_path, metrics: list[str] | None = None, alpha: float = 0.05) -> dict:
    a, b = load(a_path), load(b_path)
    info = metric_info()
    ids = [m for m in info if (not metrics or m in metrics)]
    rows, pvals = [], {}
    for m in ids:
        va, vb = per_case(a["samples"], m), per_case(b["samples"], m)
        r = U.paired(va, vb)
        if r is None:
            continue
        shared = sorted(va.keys() & vb.keys())
        r.update(metric=m, name=info[m]["name"], a=float(np.mean([va[k] for k in shared])),
                 b=float(np.mean([vb[k] for k in shared])), higher_is_better=info[m]["higher_is_better"])
        rows.append(r)
        if r["testable"]:  # equal on every shared case: nothing to test, and no place in the family
            pvals[m] = r["p"]
    adj = U.holm(pvals)
    for r in rows:
        r["p_holm"] = adj.get(r["metric"], None if r["p"] is None else 1.0)
        r["different"] = r["p_holm"] is not None and r["p_holm"] < alpha
    prov = differences(a["results"].get("provenance"), b["results"].get("provenance"))
    return {"a": a["name"], "b": b["name"], "rows": rows, "alpha": alpha, "provenance_differences": prov,
            "protocols": {a["name"]: a["results"].get("protocol"), b["name"]: b["results"].get("protocol")},
            "mixed": PR.mixed([a["results"], b["results"]])}


def _p(p) -> str:
    return f"n/a (< {U.MIN_TEST_CASES} cases)" if p is None else f"{p:.4f}"


def markdown(c: dict) -> str:
    lines = [f"# {c['b']} vs {c['a']} (B - A on the cases both hold)", "",
             "| metric | A | B | B - A [95 % interval] | p | p (Holm) | detectable | cases |",
             "|---|---|---|---|---|---|---|---|"]
    for r in c["rows"]:
        star = " **\\***" if r["different"] else ""
        lines.append(f"| {r['name']} | {r['a']:.4g} | {r['b']:.4g} | {r['mean_diff']:+.4g} [{r['low']:+.4g}, "
                     f"{r['high']:+.4g}]{star} | {_p(r['p'])} | {_p(r['p_holm'])} | {r['mde']:.3g} | {r['n']} |")
    fam = sum(1 for r in c["rows"] if r["testable"])
    lines += ["", f"\\* different at {c['alpha']:g} after Holm's correction over the {fam} metrics that differ on any case; "
              "'detectable': the smallest difference these cases detect with 80 % power",
              f"A: {PR.header(c['protocols'][c['a']])}", f"B: {PR.header(c['protocols'][c['b']])}"]
    if c["mixed"]:
        lines.append("not comparable as full runs: " + "; ".join(c["mixed"]) + " (the table uses the shared cases)")
    if c["provenance_differences"]:
        lines += ["", "what differs between the runs:"] + [f"- {d}" for d in c["provenance_differences"]]
    return "\n".join(lines)


def add_parser(sub) -> None:
    cp = sub.add_parser("compare", help="two scored runs on their shared cases: paired differences with intervals, "
                                        "Holm-corrected p-values, detectable difference, what differs")
    cp.add_argument("a", help="run folder A (or one of its results/results_<UTC>.json)")
    cp.add_argument("b", help="run folder B (or one of its results/results_<UTC>.json)")
    cp.add_argument("--metrics", help="comma-separated metric ids (default: every metric both runs scored)")
    cp.add_argument("--alpha", type=float, default=0.05)
    cp.add_argument("--out", help="also write compare.md and compare.json here")
    cp.set_defaults(fn=cmd_compare)


def cmd_compare(a) -> int:
    c = compare(a.a, a.b, [m.strip() for m in a.metrics.split(",")] if a.metrics else None, alpha=a.alpha)
    print(markdown(c))
    if a.out:
        out = check_out(Path(a.out))
        out.mkdir(parents=True, exist_ok=True)
        (out / "compare.md").write_text(markdown(c) + "\n")
        (out / "compare.json").write_text(json.dumps(c, indent=2, sort_keys=True, default=str))
    return 0


__all__ = ["add_parser", "compare", "load", "markdown", "per_case"]
