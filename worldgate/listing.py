"""``worldgate list models|suites|trajectories|metrics`` and ``worldgate fetch``.

A list fits :data:`WIDTH` columns by default: the columns a reader chooses by, each cell cut with an ellipsis where
the row would not fit; ``--wide`` prints every column uncut, ``--json`` every field of every registered entry.
"""

from __future__ import annotations

import argparse
import json
import textwrap

from worldgate.adapters import KNOWN_UNAVAILABLE, get_info, list_models
from worldgate.evaluate.metrics import metric_info
from worldgate.trajectories.segments import GRAMMAR
from worldgate.trajectories.library import describe
from worldgate.trajectories.suites import SUITE_HELP, SUITES

from . import data

WIDTH = 100  # columns of the default tables (and of the notes under them)
GAP = "  "
MIN_CELL = 6  # a cut column keeps at least this many characters (or its header's)
ELLIPSIS = "..."  # ASCII: `awk '{ print length }'` counts bytes


def fit(cols: list[str], rows: list[list], width: int | None = WIDTH) -> list[str]:
    """The lines of a table, columns padded; with ``width``, the widest columns are narrowed (one character at a
    time, the first column never) until a line fits, and cells longer than their column end in an ellipsis."""
    rows = [[str(v) for v in r] for r in rows]
    widths = [max([len(c), *(len(r[i]) for r in rows)]) for i, c in enumerate(cols)]
    if width is not None:
        floor = [len(c) if i == 0 else max(min(len(c), widths[i]), MIN_CELL) for i, c in enumerate(cols)]
        floor[0] = widths[0]
        while sum(widths) + len(GAP) * (len(cols) - 1) > width:
            i = max(range(len(cols)), key=lambda j: (widths[j] - floor[j] > 0, widths[j]))
            if widths[i] <= floor[i]:
                break  # nothing left to narrow (more columns than the width holds)
            widths[i] -= 1

    def cell(v: str, w: int) -> str:
        return (v if len(v) <= w else v[:w - len(ELLIPSIS)] + ELLIPSIS).ljust(w)

    lines = [GAP.join(cell(c, w) for c, w in zip(cols, widths)).rstrip(), GAP.join("-" * w for w in widths)]
    lines += [GAP.join(cell(v, w) for v, w in zip(r, widths)).rstrip() for r in rows]
    return lines


def note(text: str, wide: bool) -> str:
    return text if wide else textwrap.fill(text, WIDTH, break_on_hyphens=False)


def _fps(i) -> str:
    return f"{i.fps:g} ({i.fps_source.split(':')[0].split(' (')[0]})"


def models(wide: bool = False) -> tuple[list[str], list[list], str]:
    infos = [get_info(n) for n in list_models()]
    tail = "known, no adapter (not registered): " + "; ".join(KNOWN_UNAVAILABLE.values())
    if wide:
        cols = ["name", "version", "size", "fps (source)", "chunk first/later", "unit", "control", "poses",
                "K regime", "aspect", "context", "level", "hf ids", "licence"]
        rows = [[i.name, i.version, f"{i.width}x{i.height}", _fps(i), f"{i.first_chunk_frames}/{i.chunk_frames}",
                 i.duration_unit, i.control, i.pose_convention, str(i.intrinsics_regime), i.aspect_policy,
                 ",".join(i.context_policies) or "-", i.integration, ",".join(i.hf_ids) or "-", i.licence or "-"]
                for i in infos]
        return cols, rows, tail
    cols = ["name", "size", "fps", "control", "level", "licence"]
    rows = [[i.name, f"{i.width}x{i.height}", f"{i.fps:g}", i.control, i.integration or "-", i.licence or "-"]
            for i in infos]
    return cols, rows, tail + " (`--wide` for every column, `--json` for every field)"


def as_json(what: str) -> list[dict]:
    """Every registered entry of a list, every field."""
    if what == "models":
        return [get_info(n).to_dict() for n in list_models()]
    if what == "suites":
        return [{"suite": n, "what": SUITE_HELP.get(n, ""), "source": SUITES.entries.get(n, "")}
                for n in SUITES.names()]
    if what == "trajectories":
        return [{"name": n, "segments": text} for n, text in describe()]
    return [{"metric": k, **v} for k, v in metric_info().items()]


def cmd_list(a: argparse.Namespace) -> int:
    if a.json:
        print(json.dumps(as_json(a.what), indent=1, sort_keys=True, default=list))
        return 0
    tail = ""
    if a.what == "models":
        cols, rows, tail = models(a.wide)
    elif a.what == "suites":
        cols, rows = ["suite", "what"], [[n, SUITE_HELP.get(n, "")] for n in SUITES.names()]
    elif a.what == "trajectories":
        cols, rows, tail = ["name", "segments (text form)"], [list(r) for r in describe()], f"text grammar: {GRAMMAR}"
    else:
        cols = ["metric", "name", "benchmark", "range"]
        rows = [[k, v["name"], v["benchmark"], v["range"]] for k, v in metric_info().items()]
    print("\n".join(fit(cols, rows, None if a.wide else WIDTH)))
    if tail:
        print("\n" + note(tail, a.wide))
    return 0


def cmd_fetch(a: argparse.Namespace) -> int:
    d = data.dataset(a.what)
    have = None if a.force else data.cached(a.what)
    path = have or data.fetch(a.what, url=a.url, progress=not a.no_progress)
    how = "already in the cache" if have else "downloaded and verified"
    print(f"{d.name} {d.folder} ({d.repo} at {d.commit[:12]}, {d.licence} licence): {how} -> {path}")
    return 0


def add_parsers(sub) -> None:
    ls = sub.add_parser("list", help="list models, suites, trajectories or metrics (fits 100 columns; --wide, --json)")
    ls.add_argument("what", choices=["models", "suites", "trajectories", "metrics"])
    how = ls.add_mutually_exclusive_group()
    how.add_argument("--wide", action="store_true", help="every column, uncut (several hundred columns for models)")
    how.add_argument("--json", action="store_true", help="every field of every registered entry, as JSON")
    ls.set_defaults(fn=cmd_list)
    fe = sub.add_parser("fetch", help="download a benchmark's public data into the user cache (what --suite worldmark "
                                      "without --data does on first use)")
    fe.add_argument("what", choices=sorted(data.DATASETS))
    fe.add_argument("--url", help=f"another archive of the same commit (default: GitHub's, or ${data.URL_ENV}); "
                                  "checked against the same digest")
    fe.add_argument("--force", action="store_true", help="download again even if the cache holds it")
    fe.add_argument("--no-progress", action="store_true")
    fe.set_defaults(fn=cmd_fetch)
