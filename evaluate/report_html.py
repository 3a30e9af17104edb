"""The report's HTML page: pick a case, every model's rollout side by side, synced playback, the commanded path and
phase timeline, the per-case scores and the tables the benchmarks declare — with everything from the runs shown as
text (see report.py; the page and its script are report_page.py).

Under each one-view rollout, what a benchmark plots of it (``Benchmark.signals``: WorldMark's flow signals Sx and
Srad over the commanded segments and its stable zones, worldmark/signals.py), read from cached features only; a
malformed cache file or trajectory is a note on the page, never a failed report.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import math
import os
import re
from pathlib import Path

from worldgate.generate.outputs import OutputFolder
from worldgate.generate.record import ONE_VIEW, TWO_VIEWS

from .metrics import benchmarks, metric_info
from .report_files import ReportError, esc, link_video, prompt, record_dir, script_json, slug, trajectory
from .report_page import HTML, JS
from .report_tables import page_tables

log = logging.getLogger("worldgate.report")


def signals_or_why(run: Path, rec: Path | None, sample: dict, results: dict) -> tuple[dict | None, str]:
    """What the first benchmark that plots this record (``Benchmark.signals``) gives, or (None, why not); a
    malformed cache file or trajectory is a note naming what is wrong instead of a failed report."""
    why = ""
    for b in benchmarks():
        if b.signals is None:
            continue
        try:
            sig, why = b.signals(run, rec, sample, results)
        except (KeyError, TypeError, ValueError, AttributeError, IndexError, OverflowError) as e:
            log.warning("no signals for %s: %s: %s", rec, type(e).__name__, e)
            sig, why = None, f"no flow signals: {type(e).__name__}: {e}"
        if sig is not None:
            return sig, ""
    return None, why


def _case_data(runs, media: Path, out: Path) -> dict:
    """Per case: every run's video (copied under media/), commanded path, prompt, phases and per-case scores."""
    cases: dict[str, dict] = {}
    for k, r in enumerate(runs):
        run = r["run"]
        rdir = media / f"{k:02d}-{slug(r['name'])}"
        for s in r["samples"]:
            cid = s.get("case")
            rec = record_dir(run, cid)
            cid = str(cid)
            tags = s.get("tags") if isinstance(s.get("tags"), dict) else {}
            entry = cases.setdefault(cid, {"id": cid, "runs": {}, "trajectory": None, "prompt": None, "tags": tags})
            notes: list[str] = []
            base = rdir / slug(cid)
            one, a, b = ONE_VIEW[""]["video"], TWO_VIEWS["A"]["video"], TWO_VIEWS["B"]["video"]
            vrel, vb = link_video(run, rec, one, base, out, notes), None
            if rec is not None and not os.path.lexists(rec / one) and os.path.lexists(rec / a):
                # a two-view record: player A and player B
                vrel = link_video(run, rec, a, base.with_name(base.name + "-A"), out, notes)
                vb = link_video(run, rec, b, base.with_name(base.name + "-B"), out, notes)
            scores = s.get("scores") if isinstance(s.get("scores"), dict) else {}
            if vb:
                sig, sig_note = None, "signals are plotted for one-view records"
            else:
                sig, sig_note = signals_or_why(run, rec, s, r["results"]) if vrel else (None, "")
            entry["runs"][r["name"]] = {
                "video": vrel, "video_b": vb, "notes": notes, "signals": sig, "signals_note": sig_note,
                "error": None if s.get("error") is None else str(s.get("error")),
                "scores": {str(m): float(v) for m, v in scores.items()
                           if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)}}
            if entry["trajectory"] is None:
                entry["trajectory"] = trajectory(run, rec)
            if entry["prompt"] is None:
                entry["prompt"] = prompt(run, rec)
    return dict(sorted(cases.items()))




def write_html(runs, out) -> Path:
    """index.html and media/ written through ``out``, the report's OutputFolder (or a folder to open one on)."""
    out = out if isinstance(out, OutputFolder) else OutputFolder(Path(out), tag="report")
    media = out.root / "media"
    data = {
        "runs": [r["name"] for r in runs],
        "metrics": {m: {"name": i["name"], "range": i["range"], "higher": i["higher_is_better"]}
                    for m, i in metric_info().items()},
        "cases": _case_data(runs, media, out),
        "backend": runs[0]["backend"],
        "tables": page_tables(runs),  # the tables the benchmarks declare, as in the Markdown
    }
    sha = base64.b64encode(hashlib.sha256(JS.encode()).digest()).decode()
    subs = {"TITLE": esc("worldgate report: " + ", ".join(r["name"] for r in runs)),
            "CSP": esc(f"script-src 'sha256-{sha}'; object-src 'none'; base-uri 'none'; form-action 'none'"),
            "DATA": script_json(data), "SCRIPT": JS}
    page = re.sub(r"__(TITLE|CSP|DATA|SCRIPT)__", lambda m: subs[m.group(1)], HTML)  # one pass: no rescan of data
    return out.write_text("index.html", page)


__all__ = ["ReportError", "signals_or_why", "write_html"]
