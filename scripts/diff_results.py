"""Every difference between two scored runs' results.json and samples.jsonl, leaf by leaf (numbers compared exactly).

    python scripts/diff_results.py BASELINE_RUN NEW_RUN [BASELINE_RUN NEW_RUN ...]

Used to show a refactor changed no score: the new run is a copy of the baseline re-scored with
``worldgate evaluate COPY --rescore``. Left out of the comparison, and listed as such: what differs by design between
two evaluations of one run (``schema_version``, the wall times ``seconds``, the feature counts ``features``, which
count cached features under --rescore, ``config.rescore``, the run's path ``run``, ``git``, the machine's
``provenance`` and ``versions``). Samples are matched by case id. Exit status 1 when anything else differs.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

#: top-level results keys that differ between two evaluations of one run by design
IGNORED = {"schema_version": "the format's version (new)", "seconds": "wall time", "features": "computed/cached "
           "counts (--rescore computes none)", "run": "the run folder's path", "git": "the commit evaluated at",
           "provenance": "machine, packages, time", "versions": "package versions"}


def leaves(x, path=""):
    if isinstance(x, dict):
        for k in sorted(x):
            yield from leaves(x[k], f"{path}.{k}" if path else str(k))
    elif isinstance(x, list):
        for i, v in enumerate(x):
            yield from leaves(v, f"{path}[{i}]")
    else:
        yield path, x


def diff(a, b, where: str) -> tuple[int, list[str]]:
    la, lb = dict(leaves(a)), dict(leaves(b))
    out = [f"{where}: {k}: {la.get(k, '<absent>')!r} -> {lb.get(k, '<absent>')!r}"
           for k in sorted(la.keys() | lb.keys()) if la.get(k, KeyError) != lb.get(k, KeyError)]
    return len(la.keys() | lb.keys()), out


def compare(base: Path, new: Path) -> tuple[int, list[str]]:
    ra, rb = (json.loads((p / "results.json").read_text()) for p in (base, new))
    for r in (ra, rb):
        for k in IGNORED:
            r.pop(k, None)
        (r.get("config") or {}).pop("rescore", None)
    n, out = diff(ra, rb, f"{new.name}/results.json")
    sa, sb = ({s["case"]: s for s in map(json.loads, (p / "samples.jsonl").read_text().splitlines()) if s}
              for p in (base, new))
    if sa.keys() != sb.keys():
        out.append(f"{new.name}/samples.jsonl: cases differ: {sorted(sa.keys() ^ sb.keys())}")
    for case in sorted(sa.keys() & sb.keys()):
        m, o = diff(sa[case], sb[case], f"{new.name}/samples.jsonl[{case}]")
        n, out = n + m, out + o
    return n, out


def main(argv: list[str]) -> int:
    if len(argv) < 2 or len(argv) % 2:
        print(__doc__, file=sys.stderr)
        return 2
    total, diffs = 0, []
    for base, new in zip(argv[::2], argv[1::2]):
        n, d = compare(Path(base), Path(new))
        total, diffs = total + n, diffs + d
        print(f"{base} -> {new}: {n} values compared, {len(d)} differ")
    for line in diffs:
        print(line)
    print("left out by design: " + "; ".join(f"{k} ({v})" for k, v in IGNORED.items()) + "; config.rescore")
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
