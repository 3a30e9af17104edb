"""The report's tables, built from what each benchmark declares (``Benchmark.report``: :class:`~.score.Table`, as
lm-eval's group YAML is rendered by its generic ``make_table``): no benchmark is named here.

A table lists the runs (one row each) and the declared metrics that some run has, then the declared extra columns
(a track's or the overall mean). In Markdown the best value of a column is **bold**, the second <u>underlined</u>, the
worst marked ▼ (by the displayed rounding, in the metric's direction); the CSV holds the full values. The same rows go
into the HTML page (:func:`page_tables`)."""

from __future__ import annotations

from pathlib import Path

from worldgate.generate.outputs import OutputFolder

from .csv_cells import csv_text
from .metrics import benchmarks, metric_info
from .report_files import esc
from .score import Table


def md_cell(s) -> str:
    return esc(s).replace("|", "\\|")


def mean(r: dict, m: str):
    """Run ``r``'s (a loaded run: name, results, samples) mean of metric ``m``, or None."""
    a = (r["results"].get("metrics") or {}).get(m)
    return None if not a else a.get("mean")


def rank_marks(values: list, higher: bool, key=None) -> list[str]:
    """'best', 'second', 'worst' or '' for each value (None never ranks). Ties (equal after ``key``, the displayed
    rounding) share a mark; when every value ties nothing is marked."""
    key = key or (lambda v: v)
    shown = [None if v is None else key(v) for v in values]
    distinct = sorted({v for v in shown if v is not None}, reverse=higher)
    marks = [""] * len(values)
    if len(distinct) < 2:
        return marks
    for i, v in enumerate(shown):
        if v is None:
            continue
        if v == distinct[0]:
            marks[i] = "best"
        elif v == distinct[-1]:
            marks[i] = "worst"
        elif len(distinct) >= 3 and v == distinct[1]:
            marks[i] = "second"
    return marks


def fmt(m: str, v) -> str:
    if v is None:
        return "n/a"
    return f"{v:.1f}" if metric_info().get(m, {}).get("range") == "0-100" else f"{v:.3f}"


def declared() -> list[Table]:
    """Every registered benchmark's tables, in registry order."""
    return [t for b in benchmarks() for t in (b.report or ())]


def cells(runs: list[dict], t: Table) -> dict:
    """The table ``t`` of ``runs``: the metric ids some run has, the column labels, per run its values and marks."""
    info = metric_info()
    ids = [m for m in t.metrics if any(mean(r, m) is not None for r in runs)]
    vals = {m: [mean(r, m) for r in runs] for m in ids}
    marks = {m: rank_marks(vals[m], info.get(m, {}).get("higher_is_better", True),
                           key=lambda v, m=m: float(fmt(m, v))) for m in ids}
    extra = {label: [f(r["results"]) for r in runs] for label, f in t.columns.items()}
    return {"ids": ids, "labels": [info.get(m, {}).get("name", m) for m in ids] + list(extra), "values": vals,
            "marks": marks, "extra": extra}


def table(runs: list[dict], t: Table) -> tuple[str, list[list[str]]]:
    """Markdown (best bold, second underlined, worst ▼) and CSV rows of the declared table ``t`` for ``runs``."""
    c = cells(runs, t)
    ids, extra = c["ids"], c["extra"]
    cols = ["model", "records"] + c["labels"]
    md = [f"### {t.title}", "", "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    rows = [["model", "records"] + ids + list(extra)]
    for i, r in enumerate(runs):
        shown = []
        for m in ids:
            s, mk = fmt(m, c["values"][m][i]), c["marks"][m][i]
            shown.append(f"**{s}**" if mk == "best" else f"<u>{s}</u>" if mk == "second" else
                         f"{s} ▼" if mk == "worst" else s)
        ex = [fmt("", v[i]) for v in extra.values()]
        md.append("| " + " | ".join([md_cell(r["name"]), md_cell(r["results"].get("records", ""))] + shown + ex)
                  + " |")
        rows.append([r["name"], str(r["results"].get("records", ""))] +
                    ["" if c["values"][m][i] is None else f"{c['values'][m][i]:.6g}" for m in ids] +
                    ["" if v[i] is None else f"{v[i]:.6g}" for v in extra.values()])
    backend = runs[0]["backend"] if runs else ""
    md += ["", (f"backend: {md_cell(backend)}; best **bold**, second <u>underlined</u>, worst ▼ "
                "(each column in its metric's direction: lower is better where the metric says so); "
                "n/a = unavailable for every case of the run"), ""]
    if not ids:
        md = [f"### {t.title}", "", "no run has any of these metrics", ""]
    if t.notes is not None:  # under the table, per run: e.g. which version of the benchmark, every deviation
        notes = [(r["name"], t.notes(r["results"])) for r in runs]
        notes = [(n, "\n".join(x) if isinstance(x, (list, tuple)) else str(x or "")) for n, x in notes]
        if any(x for _, x in notes):
            md[-1:] = ["", *(f"- {md_cell(name)}: " + "; ".join(md_cell(x.strip()) for x in n.splitlines())
                             for name, n in notes if n), ""]
    return "\n".join(md), rows


def write_tables(runs: list[dict], out) -> dict:
    """Each declared table into ``{file}.md`` (the tables of one file one after another) and ``{csv}.csv``, written
    through ``out`` (the report's :class:`OutputFolder`, or a folder to open one on); returns {file: "file.md"}."""
    folder = out if isinstance(out, OutputFolder) else OutputFolder(Path(out), tag="report")
    files: dict[str, list[str]] = {}
    for t in declared():
        md, rows = table(runs, t)
        files.setdefault(t.file, []).append(md)
        folder.write_text(f"{t.csv or t.file}.csv", csv_text(rows))
    for f, parts in files.items():
        folder.write_text(f"{f}.md", "\n".join(parts))
    return {f: f"{f}.md" for f in files}


def page_tables(runs: list[dict]) -> list[dict]:
    """The declared tables as the HTML page shows them: title, column labels, per run its shown cells and marks."""
    out = []
    for t in declared():
        c = cells(runs, t)
        if not c["ids"]:
            continue
        rows = []
        for i, r in enumerate(runs):
            rows.append({"run": r["name"], "records": r["results"].get("records"),
                         "cells": [fmt(m, c["values"][m][i]) for m in c["ids"]] +
                                  [fmt("", v[i]) for v in c["extra"].values()],
                         "marks": [c["marks"][m][i] for m in c["ids"]] + [""] * len(c["extra"])})
        out.append({"title": t.title, "columns": ["model", "records"] + c["labels"], "rows": rows})
    return out


__all__ = ["md_cell", "mean", "rank_marks", "fmt", "declared", "cells", "table", "write_tables", "page_tables"]
