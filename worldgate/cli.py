"""Command line: ``worldgate generate | evaluate | list``; ``generate`` and ``evaluate`` are also commands of their own."""

from __future__ import annotations

import argparse
import logging
import math
import os
import signal
import sys
import threading
import traceback
from pathlib import Path


def _interrupted_at_startup(*_):  # Ctrl-C while the modules below import: exit 130, no traceback (issue 29.5)
    print("interrupted", file=sys.stderr)
    os._exit(130)


# only for the imports below (restored right after them): a library user's own SIGINT handling is left alone
_SIGINT = None
if threading.current_thread() is threading.main_thread() and \
        signal.getsignal(signal.SIGINT) is signal.default_int_handler:
    _SIGINT = signal.signal(signal.SIGINT, _interrupted_at_startup)

from worldgate.adapters import AdapterError, UnknownNameError  # noqa: E402
from worldgate.build_suite.cli import add_parser as add_build_suite_parser
from worldgate.evaluate.report import read_results, write_report
from worldgate.evaluate.runner import precompute_shard, run_evaluate
from worldgate.evaluate.worldmark.imported import import_worldmark_results, is_results_root
from worldgate.evaluate.worldmark.results_tree import write_worldmark_results
from worldgate.experiments.compare import add_parser as add_compare_parser
from worldgate.experiments.context import compare_context
from worldgate.experiments.sweep import run_sweep
from worldgate.experiments.validate import markdown, run_validation
from worldgate.generate.interop import import_worldmark, load_arena_cases
from worldgate.generate.overrides import parse_model_args
from worldgate.generate.runner import check_out, run_generate
from worldgate.generate.worldmark_export import export_worldmark
from worldgate.trajectories.core import TrajectoryError
from worldgate.trajectories.suites import SuiteError

from . import cluster, dist, doctor, publish, setup as model_setup
from .listing import add_parsers as add_listing_parsers  # noqa: E402
from .scaffold import add_parser as add_new_adapter_parser  # noqa: E402

if _SIGINT is not None:
    signal.signal(signal.SIGINT, _SIGINT)


def _add_generate(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help="adapter name (see `worldgate list models`)")
    p.add_argument("--suite", required=True, help="suite name (see `worldgate list suites`) or a manifest .json/.jsonl")
    p.add_argument("--data", help="suite data folder (worldmark: the arena_inputs folder)")
    p.add_argument("--full", action="store_true", help="full-size Engine suites (default: a small subset)")
    p.add_argument("--limit", type=int, help="only the first K cases")
    p.add_argument("--seed", type=int, default=0, help="rollout seed (same seed, same frames)")
    p.add_argument("--seeds", help="several seeds, e.g. 0,1,2: one record per case and seed (<case>-seed<S>); "
                                   "evaluate reports the mean over seeds and intervals that count both")
    p.add_argument("--out", help="run folder (default runs/MODEL-SUITE)")
    p.add_argument("--dry-run", action="store_true", help="write each case's native inputs, render nothing")
    p.add_argument("--model-args", help="comma-separated key=value for the adapter, e.g. repo=PATH,width=128")
    p.add_argument("--device", default="cpu", help="device for real models (cpu, cuda, cuda:1)")
    p.add_argument("--context", choices=["full_kv", "sliding_window", "fov"],
                   help="context policy for chunked models (context.K=V sets fov_h, fov_v, points, radius, gate, "
                        "recent, sink, seed)")
    p.add_argument("--budget", type=int, help="chunks held in context (with --context; default unlimited)")
    p.add_argument("--no-progress", action="store_true")
    cluster.add_launcher_args(p)
    p.add_argument("overrides", nargs="*", metavar="key=value",
                   help="overrides, anywhere on the line: model.K=V (or bare K=V) for the adapter, suite.K=V, "
                        "trajectory.seconds=S (every moving segment lasts S seconds: quick runs), context.K=V; an "
                        "unknown key is an error with a did-you-mean")


def cmd_generate(a: argparse.Namespace) -> int:
    if a.launcher:  # a job array (Slurm, or local processes): each task its share, into one run folder
        kwargs = dict(model=a.model, suite=a.suite, out=str(a.out or Path("runs") / f"{a.model}-{a.suite}"),
                      data=a.data, limit=a.limit, seed=a.seed, dry_run=a.dry_run, overrides=a.overrides,
                      model_args=parse_model_args(a.model_args), full=a.full, device=a.device, context=a.context,
                      budget=a.budget, seeds=a.seeds)
        run_generate(**kwargs, check_only=True)  # every argument checked here, before anything is submitted
        return cluster.launch_generate(kwargs, a.launcher, a.tasks, cluster.parse_slurm(a.slurm), wait=not a.no_wait)
    rank, world = dist.rank_world()  # under `accelerate launch`: this process's share of the cases
    res = run_generate(a.model, a.suite, a.out, data=a.data, limit=a.limit, seed=a.seed, dry_run=a.dry_run,
                       overrides=a.overrides, model_args=parse_model_args(a.model_args), full=a.full,
                       device=a.device, progress=not a.no_progress, context=a.context, budget=a.budget,
                       shard=(rank, world) if world > 1 else None, seeds=a.seeds)
    what = "planned" if a.dry_run else "generated"
    print(f"{what} {len(res.done)}, skipped {len(res.skipped)} complete, failed {len(res.failed)} -> {res.out}")
    if getattr(res, "claimed", None):
        print(f"  {len(res.claimed)} case(s) being written by another process, not here: rerun once it ends")
    for cid, err in res.failed.items():
        print(f"  FAILED {cid}: {err}", file=sys.stderr)
    if res.failed:
        print(f"  details in {res.out / 'jobs.jsonl'}", file=sys.stderr)
    return res.exit_code


def _add_evaluate(p: argparse.ArgumentParser) -> None:
    p.add_argument("runs", nargs="+", help="run folders written by `generate`")
    p.add_argument("--metrics", help="comma-separated metric ids (default: all)")
    p.add_argument("--backend", default="classical", choices=["classical", "learned"])
    p.add_argument("--rescore", action="store_true", help="score from cached features only; never compute features")
    p.add_argument("--out", help="where to write the leaderboard when several runs are given")
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--judge", metavar="HF_ID|openai:MODEL@URL",
                   help="VLM judge of every judged metric (WorldMemBench's dynamic memory, MultiWorldBench's judged "
                        "capabilities): a Hugging Face id or folder (transformers, from the local cache), or an "
                        "OpenAI-compatible server, e.g. openai:Qwen/Qwen2.5-VL-7B-Instruct@http://localhost:8000/v1 "
                        "(key from WORLDGATE_JUDGE_API_KEY or OPENAI_API_KEY; docs/judges.md); answers are cached "
                        "in the run. Without it the judged metrics are unavailable (WorldMemBench's measured probe, "
                        "a proxy, is reported)")
    p.add_argument("--judge-device", help="device for the judge (default: cuda when available, else cpu)")
    cluster.add_launcher_args(p, wait=False)
    p.add_argument("--allow-mixed", action="store_true", help="rank runs of different protocols or case sets in one "
                                                               "leaderboard (every such cell is marked)")
    p.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                   help="a threshold or option of a benchmark's PARAMS (worldgate.evaluate.metrics.params()), e.g. "
                        "WorldMark's deviations wm_time_base_real_fps=1 or wm_flow_full_scale=1 (repeatable; "
                        "recorded in results.json and shown beside the table)")
    publish.add_args(p)  # --push-to-hub REPO_ID, --with-videos, --log wandb|trackio (after a successful evaluate)


def _params(specs: list[str]) -> dict | None:
    """``--param NAME=VALUE`` pairs as numbers; an unknown name gets evaluate's did-you-mean error."""
    out = {}
    for spec in specs or ():
        name, sep, value = spec.partition("=")
        if not sep or not name.strip():
            raise ValueError(f"--param {spec!r}: expected NAME=VALUE (e.g. wm_time_base_real_fps=1)")
        try:
            v = float(value)
        except ValueError:
            raise ValueError(f"--param {spec!r}: the value must be a number") from None
        if not math.isfinite(v):
            raise ValueError(f"--param {spec!r}: the value must be a finite number")
        out[name.strip()] = int(v) if v.is_integer() and "." not in value and "e" not in value.lower() else v
    return out or None


def _out(a: argparse.Namespace) -> None:
    """``--out`` checked before any work (generate's rule, ``check_out``): a file there, or above it, is an error."""
    if getattr(a, "out", None):
        check_out(Path(a.out))


def cmd_evaluate(a: argparse.Namespace) -> int:
    _out(a)
    publish.check_args(a)
    if a.launcher and not a.rescore:  # features and judge answers over a job array, then scored here from the cache
        params = _params(a.param)
        return publish.after(a, a.runs, cluster.launch_evaluate(
            a.runs, a.backend, a.launcher, a.tasks, cluster.parse_slurm(a.slurm),
            lambda: run_evaluate(a.runs, metrics=a.metrics, backend=a.backend, rescore=True, out=a.out,
                                 progress=not a.no_progress, judge=a.judge, judge_device=a.judge_device,
                                 params=params, allow_mixed=a.allow_mixed), judge=a.judge, judge_device=a.judge_device))
    rank, world = dist.rank_world()
    if world > 1:  # under `accelerate launch`: features in parallel shards, then rank 0 scores from the cache
        if not a.rescore:
            for run in a.runs:
                precompute_shard(Path(run), a.backend, rank, world, judge=a.judge, judge_device=a.judge_device)
        dist.barrier("evaluate-features", Path(a.runs[0]))
        if rank != 0:
            return 0
    params = _params(a.param)
    return publish.after(a, a.runs, run_evaluate(
        a.runs, metrics=a.metrics, backend=a.backend, rescore=a.rescore, out=a.out, progress=not a.no_progress,
        judge=a.judge, judge_device=a.judge_device, params=params, allow_mixed=a.allow_mixed))


def cmd_doctor(a: argparse.Namespace) -> int:
    if a.model:
        rows = model_setup.doctor_model(a.model, a.setup, a.gpus)
        _table(["need", "status", "fix"], [[r["need"], r["status"], r["fix"] or "-"] for r in rows])
        return 1 if model_setup.missing(rows) else 0
    table = doctor.rows(a.backend)
    _table(["model", "used by", "source", "id", "status", "licence", "fetch"],
           [[r["model"], r["used_by"], r["source"], r["id"], r["status"], r["licence"], r["fetch"]] for r in table])
    miss = doctor.missing(table)
    if miss:
        print(f"\n{len(miss)} model(s) --backend {a.backend} needs are missing: fetch them with the commands above "
              "(on a connected machine, into the same HF_HOME / TORCH_HOME)", file=sys.stderr)
        return 1
    return 0


def _table(cols, rows) -> None:
    widths = [max(len(str(c)), *(len(str(r[i])) for r in rows)) if rows else len(c) for i, c in enumerate(cols)]
    print("  ".join(str(c).ljust(w) for c, w in zip(cols, widths)))
    print("  ".join("-" * w for w in widths))
    for r in rows:
        print("  ".join(str(v).ljust(w) for v, w in zip(r, widths)))


def cmd_sweep(a: argparse.Namespace) -> int:
    rows = run_sweep(a.runs, a.param, backend=a.backend)
    names = [Path(r).name for r in a.runs]
    _table(["param", "value", *names, "spearman rho", "max rank shift"],
           [[r["param"], f"{r['value']:g}", *("n/a" if x is None else f"{x:.2f}" for x in r["scores"]),
             f"{r['spearman_rho']:.3f}", str(r["max_rank_shift"])] for r in rows])
    return 0


def cmd_validate(a: argparse.Namespace) -> int:
    res = run_validation(Path(a.out), seconds=a.seconds, size=a.size, backend=a.backend, progress=not a.no_progress,
                         multiworld=not a.no_multiworld, multiworld_limit=a.multiworld_limit,
                         worldmembench=not a.no_worldmembench)
    md = markdown(res)
    print(md)
    if a.docs:
        Path(a.docs).parent.mkdir(parents=True, exist_ok=True)
        Path(a.docs).write_text(md)
        print(f"wrote {a.docs}")
    return 0 if all(c["ok"] for c in res["checks"]) else 1


def cmd_compare_context(a: argparse.Namespace) -> int:
    pols = [p.strip() for p in a.policies.split(",") if p.strip()]
    r = compare_context(a.model, a.suite, pols, a.budget, a.out, data=a.data, limit=a.limit, overrides=a.overrides,
                        seed=a.seed, full=a.full, model_args=parse_model_args(a.model_args), backend=a.backend)
    print(r["markdown"])
    print(f"wrote {r['out'] / 'compare.md'}, compare.json and context.png")
    return 0


def cmd_report(a: argparse.Namespace) -> int:
    _out(a)
    publish.check_args(a)
    written = write_report(a.runs, a.out, allow_mixed=a.allow_mixed)
    for what, name in written.items():
        print(f"{what:>18}: {Path(a.out) / name}")
    return publish.after(a, a.runs, 0, report=a.out)  # the report, the runs' results (and videos)


def cmd_export(a: argparse.Namespace) -> int:
    _out(a)
    r = export_worldmark(a.run, a.out, tag=a.model_tag, fmt=a.format)
    print(f"exported {len(r.exported)} records to {r.out} ({len(r.skipped)} skipped)")
    for k, why in sorted(r.skipped.items()):
        print(f"  skipped {k}: {why}")
    if r.exported:  # WorldMark's results tree (what WORLDMARK_RESULTS points at) from the run's cached features
        scored = Path(a.run) / "results.json"
        if not os.path.lexists(scored):
            print(f"  no results/ tree: score the run first (`worldgate evaluate {a.run}`), then export again")
        else:
            backend = (read_results(Path(a.run)).get("config") or {}).get("backend", "classical")
            tag = a.model_tag or r.tag
            left_out: dict[str, str] = {}
            splits = write_worldmark_results(a.run, Path(a.out) / "results", model=tag, backend=backend,
                                             skipped=left_out)
            print(f"  WorldMark results tree ({backend} backend) for {', '.join(sorted(splits))} in "
                  f"{Path(a.out) / 'results'}: WORLDMARK_RESULTS=that EVAL_SUFFIX=<split> python final_master.py")
            for k, why in sorted(left_out.items()):
                print(f"  not in the results tree: {k}: {why}")
    return 0 if r.exported else 1


def cmd_import(a: argparse.Namespace) -> int:
    _out(a)
    if is_results_root(a.delivery):  # a WorldMark results root (what WORLDMARK_RESULTS points at)
        arena = load_arena_cases(a.arena) if a.arena else None
        r = import_worldmark_results(a.delivery, a.out, videos=a.videos, arena_cases=arena, commit=a.worldmark_commit)
        print(f"imported the WorldMark results root {a.delivery} ({', '.join(sorted(r.tables))}) into {r.out}: "
              f"one run per MODEL, labelled imported")
        for model, run in r.runs.items():
            vids = f", {r.records[model]} video records" if a.videos else ""
            print(f"  {run}: {r.samples[model]} videos{vids}")
        if a.videos:
            print(f"  {r.flow_features} imported FLOW caches are the records' learned flow features "
                  f"(`worldgate evaluate RUN --backend learned` re-scores without recomputing flow); "
                  f"{len(r.missing_videos)} videos not found under {a.videos}")
        print(f"  final_master's tables: {Path(a.out) / 'worldmark_master.json'} and final_master_<split>.csv")
        for k, why in sorted(r.failed.items()):
            print(f"  failed {k}: {why}", file=sys.stderr)
        return 1 if r.failed or not r.runs else 0
    if a.videos:
        raise ValueError(f"--videos is for a WorldMark results root (a folder with results_flow_* folders); "
                         f"{a.delivery} is read as a delivery ({{domain}}/{{view}}/{{MODEL}}/NNN_AAA.mp4)")
    r = import_worldmark(a.delivery, a.out, arena=a.arena, fmt=a.format)
    print(f"imported {len(r.imported)} records into {r.out} ({len(r.skipped)} already there, {len(r.failed)} failed) "
          f"from {len(r.models)} MODEL folder(s) ({', '.join(r.models)}): one run, case ids {r.case_id_rule} "
          "(a worldgate sidecar keeps its own)")
    for k, why in sorted(r.failed.items()):
        print(f"  failed {k}: {why}")
    return 1 if r.failed else 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="worldgate", description=__doc__)
    p.add_argument("-v", "--verbose", action="store_true")
    sub = p.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("generate", help="roll out a suite with a model (or --dry-run: write native inputs)")
    _add_generate(g)
    g.set_defaults(fn=cmd_generate)
    e = sub.add_parser("evaluate", help="score saved rollouts")
    _add_evaluate(e)
    e.set_defaults(fn=cmd_evaluate)
    sw = sub.add_parser("sweep", help="re-score runs from cached features under other thresholds; rank stability")
    sw.add_argument("runs", nargs="+")
    sw.add_argument("--param", action="append", required=True, metavar="NAME=v1,v2,...",
                    help="a threshold of a benchmark's PARAMS (worldgate.evaluate.metrics.params()) and the values to "
                         "try (repeatable)")
    sw.add_argument("--backend", default="classical", choices=["classical", "learned"])
    sw.set_defaults(fn=cmd_sweep)
    v = sub.add_parser("validate", help="prove the metrics on Engine faults (fault x metric table)")
    v.add_argument("--out", default="runs/validate")
    v.add_argument("--seconds", type=float, default=6.0, help="seconds per key of the validation protocol")
    v.add_argument("--size", type=int, default=256)
    v.add_argument("--backend", default="classical", choices=["classical", "learned"])
    v.add_argument("--docs", help="write the Markdown table here (e.g. docs/metric-validation.md)")
    v.add_argument("--no-multiworld", action="store_true", help="skip the two-player (MultiWorldBench) faults")
    v.add_argument("--no-worldmembench", action="store_true", help="skip the WorldMemBench memory faults")
    v.add_argument("--multiworld-limit", type=int, help="MultiWorldBench cases per two-player model (default: 20)")
    v.add_argument("--no-progress", action="store_true")
    v.set_defaults(fn=cmd_validate)
    cc = sub.add_parser("compare-context", help="one model and suite under several context policies at one budget")
    cc.add_argument("--model", default="engine-memory")
    cc.add_argument("--suite", default="worldmembench-engine")
    cc.add_argument("--data")
    cc.add_argument("--policies", default="full_kv,sliding_window,fov")
    cc.add_argument("--budget", type=int, help="chunks held in context (default unlimited)")
    cc.add_argument("--limit", type=int)
    cc.add_argument("--full", action="store_true")
    cc.add_argument("--seed", type=int, default=0)
    cc.add_argument("--model-args", help="comma-separated key=value for the adapter (a real model: setup=DIR,gpus=N)")
    cc.add_argument("--backend", default="classical", choices=["classical", "learned"])
    cc.add_argument("--out", default="runs/compare-context")
    cc.add_argument("overrides", nargs="*", metavar="key=value")
    cc.set_defaults(fn=cmd_compare_context)
    add_compare_parser(sub)
    rp = sub.add_parser("report", help="leaderboard tables, plots and an HTML viewer for scored runs")
    rp.add_argument("runs", nargs="+", help="run folders scored by `evaluate`")
    rp.add_argument("--out", required=True, help="report folder")
    rp.add_argument("--allow-mixed", action="store_true", help="report runs of different protocols or case sets "
                                                               "side by side (comparability.md says so)")
    publish.add_args(rp)
    rp.set_defaults(fn=cmd_report)
    ex = sub.add_parser("export", help="write a run as a benchmark delivery (WorldMark layout + manifest.jsonl)")
    ex.add_argument("run")
    ex.add_argument("--format", default="worldmark", choices=["worldmark"])
    ex.add_argument("--out", required=True, help="delivery folder")
    ex.add_argument("--model-tag", help="upper-case MODEL folder name (default: from the adapter name)")
    ex.set_defaults(fn=cmd_export)
    im = sub.add_parser("import", help="turn a benchmark delivery into records that `evaluate` scores, or a WorldMark "
                                       "results root into runs labelled imported")
    im.add_argument("delivery", help="a WorldMark delivery ({domain}/{view}/{MODEL}/NNN_AAA.mp4, MODEL in upper case "
                                     "as WorldMark's spec asks: every MODEL folder into one run, case ids "
                                     "{MODEL}-{view}-{domain}-NNN_AAA) or a results root "
                                     "(results_flow_<split>/ ...: one run OUT/imported-<MODEL> per MODEL)")
    im.add_argument("--format", default="worldmark", choices=["worldmark"])
    im.add_argument("--out", required=True, help="run folder to write records into (results root: the folder of "
                                                 "the imported runs)")
    im.add_argument("--arena", help="WorldMark arena_inputs (prompts, intrinsics) for deliveries made outside worldgate")
    im.add_argument("--videos", help="results root only: the videos behind it, VIDEO_ROOT/{domain}/{view}/{MODEL}/"
                                     "{stem}.mp4 (or VIDEO_ROOT/{MODEL}/{stem}.mp4 for one split): records, with the "
                                     "imported flow caches as their flow features")
    im.add_argument("--worldmark-commit", help="results root only: the WorldMark commit that wrote it (default: the "
                                               "commit worldgate's scoring reproduces)")
    im.set_defaults(fn=cmd_import)
    dr = sub.add_parser("doctor", help="the models the learned metrics need: source, present or missing, licence, "
                                       "fetch command (exit 1 when something is missing)")
    dr.add_argument("--backend", default="learned", choices=["classical", "learned"])
    dr.add_argument("--model", help="a repository model: what is missing to run it (checkout, patch, env, weights, "
                                    "GPUs) instead of the learned metrics' models")
    dr.add_argument("--setup", metavar="DIR", help="with --model: the folder `worldgate setup` wrote")
    dr.add_argument("--gpus", help="with --model: GPUs per case (the model's gpus=)")
    dr.set_defaults(fn=cmd_doctor)
    model_setup.add_parser(sub)
    add_build_suite_parser(sub)
    add_new_adapter_parser(sub)  # worldgate new-adapter NAME --out DIR (docs/plugins.md)
    add_listing_parsers(sub)  # list (fits 100 columns; --wide, --json) and fetch
    return p


#: Error policy of every command (``_run``):
#: - input errors, the user's to fix, are one line ``error: ...`` on stderr and exit status 2: a bad name
#:   (UnknownNameError), suite, trajectory, adapter or value (SuiteError, TrajectoryError, AdapterError, ValueError,
#:   which covers JSON and Unicode decoding errors), input nested too deeply (RecursionError), and a path that is
#:   missing, a file where a folder belongs (or the reverse), or not permitted (OSError: FileNotFoundError,
#:   FileExistsError, NotADirectoryError, IsADirectoryError, PermissionError, ...);
#: - anything else is a bug in worldgate: one line ``error: internal error ...`` and exit status 70 (EX_SOFTWARE),
#:   or with -v the full traceback (-v also prints the traceback of an input error, above its line);
#: - Ctrl-C exits 130 with ``interrupted``. argparse's own usage errors exit 2 as usual;
#: - a reader that goes away (``worldgate export ... | head -1``) ends the command quietly, exit status 141 (128 +
#:   SIGPIPE, what a shell reports for a command killed by a broken pipe, so ``set -o pipefail`` still sees the output
#:   was cut short rather than a success); nothing is printed, as the reader is gone (see _broken_pipe).
INPUT_ERRORS = (UnknownNameError, SuiteError, TrajectoryError, AdapterError, ValueError, RecursionError, OSError,
                model_setup.SetupError)
EXIT_INPUT, EXIT_BUG, EXIT_INTERRUPTED, EXIT_BROKEN_PIPE = 2, 70, 130, 141


def _stdout_gone() -> bool:
    """Whether stdout is a pipe whose reader has gone (poll reports an error on it): a BrokenPipeError from another
    pipe is not the quiet case."""
    try:
        import select

        p = select.poll()
        p.register(sys.stdout.fileno(), select.POLLOUT)
        return any(ev & (select.POLLERR | select.POLLHUP) for _, ev in p.poll(0))
    except (OSError, ValueError, AttributeError, ImportError):  # no poll (Windows) or no descriptor: assume it is
        return True


def _broken_pipe() -> int:
    """The standard recipe (Python's signal docs, "Note on SIGPIPE"): point stdout at /dev/null so the interpreter's
    final flush of what is still buffered cannot fail again ("Exception ignored ... BrokenPipeError")."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # stdout is not a file descriptor (an embedding, a test capture)
        pass
    return EXIT_BROKEN_PIPE


def _message(e: BaseException) -> str:
    if isinstance(e, RecursionError):
        return "input nested too deeply (maximum recursion depth exceeded)"
    text = str(e).strip() or type(e).__name__
    lines = text.splitlines()
    # a multi-line message (a model's stderr tail) stays readable: its first line, then the rest indented
    return lines[0] if len(lines) == 1 else lines[0] + "".join(f"\n  {ln}" for ln in lines[1:])


def _run(args: argparse.Namespace) -> int:
    verbose = bool(getattr(args, "verbose", False))
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    try:
        rc = int(args.fn(args) or 0)
        sys.stdout.flush()  # a reader gone away shows here, inside the try, not at interpreter exit
        return rc
    except BrokenPipeError as e:  # before INPUT_ERRORS: an OSError, but the reader of stdout leaving is no error
        if _stdout_gone():
            return _broken_pipe()
        if verbose:  # a pipe of something else (a model's subprocess): an input error like any OSError
            traceback.print_exc()
        print(f"error: {_message(e)}", file=sys.stderr)
        return EXIT_INPUT
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except INPUT_ERRORS as e:
        if verbose:
            traceback.print_exc()
        print(f"error: {_message(e)}", file=sys.stderr)
        return EXIT_INPUT
    except Exception as e:  # a bug: see the policy above
        if verbose:
            raise
        print(f"error: internal error ({type(e).__name__}: {(str(e).splitlines() or [''])[0][:300]}); this is a bug "
              "in worldgate: rerun with -v for the traceback and report it", file=sys.stderr)
        return EXIT_BUG


def _parse(parser: argparse.ArgumentParser, argv) -> argparse.Namespace:
    """Parse ``argv``; ``key=value`` overrides may go anywhere on the line (before, between or after options) for
    the commands that take them. argparse only collects a positional list where it first meets one, so the rest
    come back as unknown arguments: the ``key=value`` ones (anything not starting with ``-``) join the overrides in
    command-line order; an unknown option is still a usage error."""
    args, extra = parser.parse_known_args(argv)
    if extra:
        if not hasattr(args, "overrides") or any(x.startswith("-") for x in extra):
            subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
            target = subs[0].choices.get(getattr(args, "cmd", None), parser) if subs else parser
            target.error(f"unrecognized arguments: {' '.join(extra)}")  # the command's own usage line
        args.overrides = list(args.overrides or []) + extra
    return args


def main(argv=None) -> int:
    try:
        args = _parse(build_parser(), argv)
    except KeyboardInterrupt:  # while the command line is read (before _run's own handling)
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    return _run(args)


def _one_command(argv, prog: str, description: str, add, fn) -> int:  # the generate / evaluate console scripts
    p = argparse.ArgumentParser(prog=prog, description=description)
    p.add_argument("-v", "--verbose", action="store_true")
    add(p)
    p.set_defaults(fn=fn)
    return _run(_parse(p, argv))


def generate_main(argv=None) -> int:
    return _one_command(argv, "generate", "roll out a suite with a model", _add_generate, cmd_generate)


def evaluate_main(argv=None) -> int:
    return _one_command(argv, "evaluate", "score saved rollouts", _add_evaluate, cmd_evaluate)


if __name__ == "__main__":
    sys.exit(main())
