"""Whether a run is the benchmark's protocol, and whether two runs can be ranked side by side.

A run is ``complete`` when it holds a scored record of every case of its suite as loaded (no ``--limit``, no case
whose generation or scoring failed) at the protocol's settings: segment durations as the suite gives them (no
``trajectory.seconds``), the model's own size and frame rate (no ``model.width/height/fps`` override), and every
benchmark option at its published value (no ``--param`` deviation). Otherwise it is ``partial`` and every difference
is named. Each benchmark's own protocol (its case set, durations, size and fps policy, options) is what its suite and
PARAMS fix; worldgate checks the run against them.

Two runs are comparable when their settings fingerprint (suite and its case-set digest, durations, size overrides,
options, backend) is equal; a ranking of runs whose fingerprints or case sets differ is refused unless the caller
allows mixing, which marks every such cell. Model comparisons use the cases both runs hold.
"""

from __future__ import annotations

import hashlib
import json

#: model args that change what a model is asked to render beyond the case (a protocol difference when given)
SIZE_ARGS = ("width", "height", "fps", "num_frames", "frames")


def _case_of(s: dict) -> str:
    tags = s.get("tags") or {}
    return str(tags.get("seed_of") or s.get("case"))


def run_protocol(run_config: dict | None, samples: list[dict], backend: str, P: dict, defaults: dict) -> dict:
    """``{"status", "differences", "settings", "fingerprint", "cases"}`` of one run."""
    rc = run_config if isinstance(run_config, dict) and "unreadable" not in run_config else {}
    diffs = []
    if not rc:
        diffs.append("run.json is missing or unreadable: the case set and settings cannot be checked")
    total = rc.get("suite_cases")
    limit = rc.get("limit")
    seconds = rc.get("trajectory_seconds")
    if limit is not None:
        diffs.append(f"--limit {limit}: the first {min(limit, total) if total else limit} of "
                     f"{total if total is not None else '?'} cases of {rc.get('suite')}")
    if seconds is not None:
        diffs.append(f"trajectory.seconds={seconds:g}: every moving segment lasts {seconds:g} s, not the protocol's "
                     "durations")
    margs = rc.get("model_args") or {}
    for k in SIZE_ARGS:
        if k in margs:
            diffs.append(f"model.{k}={margs[k]}: the model's own {k} overridden")
    for k, v in sorted((rc.get("suite_args") or {}).items()):
        if k not in ("full",):
            diffs.append(f"suite.{k}={v}: a different or smaller case set")
    if rc and total is None:
        diffs.append("run.json records no suite case count (written by an older worldgate): completeness unknown")
    seeds = rc.get("seeds") or [rc.get("seed", 0)]
    cases = sorted({_case_of(s) for s in samples if "error" not in s})
    expected = (min(limit, total) if limit is not None else total) if total is not None else None
    missing = (expected - len(cases)) if expected is not None else 0
    errors = sorted({_case_of(s) for s in samples if "error" in s})
    if missing > 0:
        diffs.append(f"{missing} of {expected} cases have no scored record"
                     + (f" ({len(errors)} failed evaluation: {', '.join(errors[:3])}{', ...' if len(errors) > 3 else ''})"
                        if errors else ""))
    options = {k: P[k] for k in sorted(P) if k in defaults and P[k] != defaults[k]}
    for k, v in options.items():
        diffs.append(f"--param {k}={v:g} (the protocol: {defaults[k]:g})")
    settings = {"suite": rc.get("suite"), "suite_digest": rc.get("suite_digest"), "suite_args": rc.get("suite_args"),
                "trajectory_seconds": seconds, "size": {k: margs[k] for k in SIZE_ARGS if k in margs},
                "options": options, "backend": backend}
    fp = hashlib.sha256(json.dumps(settings, sort_keys=True, default=str).encode()).hexdigest()[:16]
    return {"status": "partial" if diffs else "complete", "differences": diffs, "settings": settings,
            "fingerprint": fp, "cases": len(cases), "expected_cases": expected, "seeds": seeds,
            "case_set": hashlib.sha256("\n".join(cases).encode()).hexdigest()[:16]}


def header(protocol: dict | None) -> str:
    """One line for a table's header: ``protocol: complete`` or ``protocol: partial (reason; reason)``."""
    if not protocol:
        return "protocol: unknown (scored by an older worldgate)"
    if protocol["status"] == "complete":
        return f"protocol: complete ({protocol['cases']} cases)"
    return "protocol: partial (" + "; ".join(protocol["differences"]) + ")"


def mixed(results: list[dict]) -> list[str]:
    """Why ``results`` cannot be ranked side by side (empty when they can)."""
    prots = [r.get("protocol") for r in results]
    if not all(prots):
        return ["a run was scored by an older worldgate (no protocol recorded): evaluate it again"]
    out = []
    fps = {p["fingerprint"] for p in prots}
    if len(fps) > 1:
        keys = sorted({k for p in prots for k, v in p["settings"].items() if v != prots[0]["settings"].get(k)})
        out.append(f"the runs' protocol settings differ ({', '.join(keys)})")
    if len({p["case_set"] for p in prots}) > 1:
        out.append("the runs hold different case sets (" + ", ".join(f"{p['cases']}" for p in prots) + " cases)")
    partial = [p for p in prots if p["status"] != "complete"]
    if partial and len(partial) < len(prots):
        out.append("partial runs beside complete ones")
    return out


__all__ = ["header", "mixed", "run_protocol"]
