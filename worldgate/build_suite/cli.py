"""``worldgate build-suite IMAGES... --out DIR [--benchmark worldmark|worldmembench]`` (wired in worldgate/cli.py)."""

from __future__ import annotations

import argparse
import sys

from .build import BENCHMARKS, DOMAINS, build_suite
from .filter import PARAMS
from .models import DEFAULT_INTRINSICS, DEFAULT_VLM


def add_parser(sub) -> argparse.ArgumentParser:
    b = sub.add_parser("build-suite", help="a WorldMark arena_inputs folder or a WorldMemBench cases.jsonl from your "
                                           "own images (captions, actions, third views, intrinsics: models or files)")
    b.add_argument("images", nargs="+", help="the reference (first-person) images, in order")
    b.add_argument("--out", required=True, help="suite folder (read back by --suite worldmark --data OUT, or "
                                                "--suite OUT/cases.jsonl)")
    b.add_argument("--benchmark", default="worldmark", choices=BENCHMARKS)
    b.add_argument("--domain", default="real", choices=DOMAINS, help="WorldMark domain the images belong to")
    g = b.add_argument_group("steps given as files (each replaces its model step)")
    g.add_argument("--captions", help="one caption row per image (WorldMark's prompt_{domain}.txt; a 'First-person "
                                      "view.' prefix is kept or added)")
    g.add_argument("--actions", help="one row of five action ids per image (WorldMark's {domain}_action.txt)")
    g.add_argument("--intrinsics", help="a folder of NNN_intrinsics.npy (WorldMark's {domain}_intrinsics/), an (N,4) "
                                        ".npy, or a text file of 'fx fy cx cy' rows")
    g.add_argument("--third-view", help="a folder of third-person counterparts named like the images (or NNN.*)")
    g.add_argument("--third-intrinsics", help="intrinsics of the third-view images (default: the first view's, "
                                              "scaled to the composite's size; estimated when those are estimated)")
    g.add_argument("--targets", help="WorldMemBench: JSON {image: [{name, kind, mask}]}, masks relative to it")
    g.add_argument("--checklists", help="WorldMemBench: JSON {image: {target, gate, questions x 8}}")
    g.add_argument("--trajectories", default="LRLR", help="WorldMemBench: comma-separated trajectory names per image")
    m = b.add_argument_group("model steps (loaded by Hugging Face id from the local cache)")
    m.add_argument("--vlm", default=None, help=f"chat VLM for captions and action selection (default {DEFAULT_VLM})")
    m.add_argument("--editor", help="diffusers image-editing pipeline for third-person composites (e.g. "
                                    "Qwen/Qwen-Image-Edit); third views are built only with --editor or --third-view")
    m.add_argument("--intrinsics-model", help=f"Depth Anything 3 id for per-image intrinsics (default "
                                              f"{DEFAULT_INTRINSICS})")
    m.add_argument("--depth-model", help="transformers depth model id: adds the filter's depth-extent term")
    m.add_argument("--device", default="cpu")
    m.add_argument("--seed", type=int, default=0)
    f = b.add_argument_group("filter")
    f.add_argument("--no-filter", action="store_true", help="keep every image (the scores are still logged)")
    f.add_argument("--no-dedup", action="store_true", help="keep near-duplicates (distances are still logged)")
    f.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                   help=f"a filter threshold: {', '.join(f'{k} (default {v})' for k, v in PARAMS.items())}")
    b.set_defaults(fn=cmd_build_suite)
    return b


def _params(items) -> dict:
    out = {}
    for it in items:
        k, sep, v = it.partition("=")
        if not sep:
            raise ValueError(f"--param {it!r}: expected NAME=VALUE")
        try:
            out[k.strip()] = float(v)
        except ValueError:
            raise ValueError(f"--param {it!r}: {v!r} is not a number") from None
    return out


def cmd_build_suite(a: argparse.Namespace) -> int:
    res = build_suite(
        a.images, a.out, a.benchmark, a.domain, captions=a.captions, actions=a.actions, intrinsics=a.intrinsics,
        third_view=a.third_view, third_intrinsics=a.third_intrinsics, targets=a.targets, checklists=a.checklists,
        trajectories=tuple(t.strip() for t in a.trajectories.split(",") if t.strip()), vlm=a.vlm, editor=a.editor,
        intrinsics_model=a.intrinsics_model, depth_model=a.depth_model, filter=not a.no_filter,
        dedup=not a.no_dedup, params=_params(a.param), device=a.device, seed=a.seed)
    read = f"--suite worldmark --data {res.out}" if res.benchmark == "worldmark" else f"--suite {res.out}/cases.jsonl"
    print(f"built {res.cases} cases from {len(res.kept)} images ({len(res.dropped)} dropped, {len(res.failed)} failed, "
          f"{res.reused} model steps resumed) -> {res.out}: read with `{read}`; log {res.log}")
    for img, why in res.dropped.items():
        print(f"  dropped {img}: {why}")
    for img, why in res.failed.items():
        print(f"  FAILED {img}: {why}", file=sys.stderr)
    return res.exit_code
