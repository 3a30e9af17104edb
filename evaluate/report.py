"""``worldgate report RUN... --out DIR``: the leaderboard tables as the benchmarks print them, plots, and an HTML page
to watch every model's rollout of a case side by side.

Reads only what ``evaluate`` wrote (``results.json``, ``samples.jsonl``) and the records (videos, commanded poses,
phases). Writes into ``DIR``::

    {file}.md / {csv}.csv      each table a benchmark declares (``Benchmark.report``, report_tables.py): WorldMark's
                               columns, WorldMemBench's groups, MultiWorldBench's capabilities, tracks and overall;
                               best **bold**, second <u>underlined</u>, worst marked ▼
    profile.png                capability profile per model (the table declared as the profile, 0-100)
    distributions.png          per-metric distribution over cases, per model
    revisit_decay.png          revisit memory per round trip R1, R2, R3 (runs with multi-trip trajectories)
    context.png                memory vs wall time per context policy (runs written with a context policy)
    index.html + media/        case picker, synced playback, commanded path + phase timeline, per-case scores, and
                               under each rollout its flow signals Sx, Srad (from the cached flow feature) over the
                               commanded segments, WorldMark's stable zones and the switches, with a playback cursor

Runs scored with different backends are never put in one table. A CSV cell a spreadsheet would read as a formula
(starting with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return, and not a plain number) gets a leading ``'``.

Everything the page shows from the runs (run and case names, prompts, tags, phase and segment names, errors) reaches
the page as text: Python-side through ``esc`` (html.escape), the embedded JSON through ``script_json`` (``<``, ``>``
and ``&`` as ``\\u003c`` etc., so no string can close its ``<script>``), and in the browser through ``textContent`` /
``setAttribute`` only (the script never assigns ``innerHTML``). A Content-Security-Policy lets only the page's own
script run. Media are taken only from regular files inside their record folder: a record folder, video, trajectory or
pose file that is a symbolic link, or that resolves outside its run, is skipped with a warning naming it. A video is
copied into media/ (never hard-linked: editing the report never edits the run) and hashed as it is copied: one whose
sha256 is not the one its meta.json records (a file hard-linked into the record, a swapped video), or, where meta.json
records none, one with other hard links, is left out with a note saying why (copying and hashing run at several
hundred MB/s: a 500-video delivery adds seconds, not minutes).

Inputs are checked before anything is written, by the one reader of evaluate/results.py: results.json and
samples.jsonl must be regular files (a link, FIFO or device is refused unopened), UTF-8, JSON, in evaluate's schema;
anything else is a :class:`ReportError` naming the file (and line) and each field that is wrong, which the command
line prints as ``error:`` lines, exit status 2.
"""

from __future__ import annotations

import io
import logging
from pathlib import Path

from worldgate.generate.outputs import OutputFolder
from worldgate.generate.provenance import differences

from . import protocol as PR
from .metrics import metric_info
from .report_files import ReportError
from .report_html import write_html
from .report_plots import (context_points, plot_context, plot_context_points, plot_distributions, plot_profile,
                           plot_revisit_decay, revisit_decay)
from .report_tables import md_cell, rank_marks, table, write_tables
from .results import ResultsError
from .results import read_results as read_results_model
from .results import read_samples
from .uncertainty import per_case, rank_first

log = logging.getLogger("worldgate.report")
_rank_marks = rank_marks  # the name tests/evaluate/test_report.py imports


def read_results(run: Path) -> dict:
    """A run's results.json as evaluate wrote it, checked by evaluate/results.py: :class:`ReportError` naming the
    file and each field that is wrong (absent, a link or FIFO, not UTF-8, not JSON, not evaluate's schema)."""
    try:
        return read_results_model(Path(run)).to_dict()
    except ResultsError as e:
        raise ReportError(str(e)) from None


def load_run(run: Path) -> dict:
    """A scored run as the report reads it ({"run", "name", "results", "samples", "backend"}); every input is checked
    first, and anything malformed is a :class:`ReportError` naming the file (and line) and what is wrong."""
    run = Path(run)
    if not run.is_dir():
        raise ReportError(f"run folder {run} not found (or not a folder)")
    results = read_results(run)
    try:
        samples = [s.to_dict() for s in read_samples(run)]
    except ResultsError as e:
        raise ReportError(str(e)) from None
    backends = sorted({b["backend"] for b in results.get("backends", {}).values()})
    return {"run": run, "name": run.name, "results": results, "samples": samples, "backend": ",".join(backends)}


def comparability(runs: list[dict], allow_mixed: bool) -> str:
    """comparability.md: each run's protocol, why the runs cannot be ranked side by side (refused unless
    ``allow_mixed``), what differs in their provenance, and how often each run ranks first per metric over
    resamples of the cases they share."""
    scored = [r for r in runs if not r["results"].get("imported")]
    why = PR.mixed([r["results"] for r in scored]) if len(scored) > 1 else []
    if why and not allow_mixed:
        raise ReportError("these runs cannot be ranked side by side: " + "; ".join(why) + ". Report runs of one "
                          "protocol, or pass --allow-mixed (the report then says so on every table)")
    lines = ["# Comparability", ""] + [f"- {md_cell(r['name'])}: {md_cell(PR.header(r['results'].get('protocol')))}"
                                      for r in scored]
    if why:
        lines += ["", "**Mixed protocols (--allow-mixed)**: " + md_cell("; ".join(why))]
    ref = scored[0] if scored else None
    for r in scored[1:]:
        diffs = differences((ref["results"].get("provenance") or {}), (r["results"].get("provenance") or {}))
        if diffs:
            lines += ["", f"What differs, {md_cell(ref['name'])} -> {md_cell(r['name'])}:"] + \
                     [f"- {md_cell(d)}" for d in diffs[:40]]
    if len(scored) > 1:
        info = metric_info()
        lines += ["", "How often each run ranks first (bootstrap over the shared cases):", "",
                  "| metric | " + " | ".join(md_cell(r["name"]) for r in scored) + " |",
                  "|---|" + "---|" * len(scored)]
        for m in info:
            share = rank_first({r["name"]: per_case(r["samples"], m) for r in scored},
                               higher=info[m]["higher_is_better"])
            if share:
                lines.append(f"| {md_cell(info[m]['name'])} | " + " | ".join(f"{share[r['name']]:.0%}"
                                                                           for r in scored) + " |")
    return "\n".join(lines) + "\n"


def write_report(run_dirs: list[str | Path], out: str | Path, allow_mixed: bool = False) -> dict:
    runs = [load_run(Path(r)) for r in run_dirs]
    if not runs:
        raise ReportError("give at least one run folder")
    # runs imported from a benchmark's own results (WorldMark's perception, labelled imported) stand beside any
    # backend: they are the benchmark's numbers, which is what worldgate's are compared with
    backs = {r["backend"] for r in runs if not r["results"].get("imported")}
    if len(backs) > 1:
        raise ReportError(f"runs were scored with different backends ({sorted(backs)}); scores from different "
                          f"backends are never mixed: evaluate them all with the same --backend")
    names = [r["name"] for r in runs]
    if len(set(names)) != len(names):
        raise ReportError(f"two runs share a folder name ({names}); rename one so the tables can tell them apart")
    comp = comparability(runs, allow_mixed)  # refused before anything is written
    # every file through one confined writer: nothing is written through a link planted in the folder (a link where
    # a file goes is replaced, its target untouched; a folder that is a link is refused), and at the end what an
    # earlier report put here and this one did not write again (the pages and videos of runs no longer in it) is
    # removed, by the folder's manifest: nothing else in the folder is touched
    folder = OutputFolder(Path(out), tag="report", replace_links=True)
    written = {}
    folder.write_text("comparability.md", comp)
    written["comparability"] = "comparability.md"
    written.update(write_tables(runs, folder))  # every table the benchmarks declare
    for name, fn in (("profile.png", plot_profile), ("distributions.png", plot_distributions),
                     ("revisit_decay.png", plot_revisit_decay), ("context.png", plot_context)):
        png = io.BytesIO()
        if fn(runs, png):
            folder.write_bytes(name, png.getvalue())
            written[name] = name
    written["html"] = write_html(runs, folder).name
    removed = folder.finish()
    if removed:
        log.info("removed %d file(s) an earlier report wrote in %s and this one did not: %s", len(removed),
                 folder.root, ", ".join(removed[:5]) + (", ..." if len(removed) > 5 else ""))
    return written


__all__ = ["ReportError", "read_results", "load_run", "comparability", "write_report", "table", "revisit_decay",
           "context_points", "plot_context_points"]
