"""worldgate's launcher for LingBot-World v2: the model's own ``generate.py`` with a context policy in its causal loop.

Run it with the model's Python, from the checkout (robbyant/lingbot-world-v2 at 2648877f763a06cc743bcd919936da4d25f12e7b),
exactly where ``python generate.py ARGS`` would run::

    python /abs/path/to/adapters/lingbot_v2_launcher.py ARGS \
        [--context-policy full_kv|sliding_window|fov] [--context-budget N] [--context-json FILE] \
        [--context-log FILE] [--worldgate-path DIR] [--checkout DIR]

``ARGS`` are generate.py's own (generate.py:62-187), parsed by its own parser. Without ``--context-policy`` the
launcher only calls generate.py's ``generate(args)`` (generate.py:233-307) — the same run as ``python generate.py
ARGS``. With a policy it runs that same function, unmodified, with one substitution that decides which earlier
chunks' keys/values each chunk's self-attention sees; everything else (text encoder, VAE, Plücker poses, noise,
4-step sampling, the t=0 cache-update pass, the writer) is the model's code.

What the model does (file:line at the commit above):

- The causal loop is ``WanI2VCausal._generate_causal_fast`` (wan/image2video.py:424-728): latents are cut into
  chunks of ``--chunk_size`` latent frames (:644-649), each chunk runs 4 denoising forwards and one t=0 forward that
  rewrites its keys/values into the cache (:673-709), all at ``current_start = chunk_id * chunk_size * frame_seqlen``
  (:665). The latent count is truncated down to a multiple of the chunk (:498-500), so every chunk has the same size.
- The self-attention cache is one ``{'k','v','global_end_index','local_end_index'}`` per layer
  (:616-630, :992-1005), ``kv_size = frame_seqlen * local_attn_size``, or the whole clip when ``--local_attn_size
  -1`` (:619-623). ``CausalWanSelfAttention.forward`` (wan/modules/model_fast.py:80-167) RoPEs keys at their
  absolute frame (:114-118), writes them at ``[current_start, current_end)`` (fast path, ``local_attn_size == -1``:
  :124-132), or rolls the cache keeping ``sink_size`` latent frames (:133-149), then attends to
  ``k_cache = kv_cache['k'][:, max(0, local_end - max_attention_size):local_end]`` with ``attention(roped_query,
  k_cache, v_cache)`` (:157-159). The multi-GPU (Ulysses) forward does the same after its all-to-all
  (wan/distributed/sequence_parallel.py:489-529): fast path :491-499, eviction :500-517, ``flash_attention(query,
  k_cache, v_cache)`` at :529.
- FullKV is ``--local_attn_size -1``; Sliding Windows is the model's own ``--local_attn_size L --sink_size S``
  (generate.py:163-172); a chunk-granular window of B chunks (sink = chunk 0 included) is ``--local_attn_size
  (B + 1) * chunk_size --sink_size chunk_size``. The README's ``--local_attn_size 18 --sink_size 6`` (README.md:108)
  is no chunk budget: its sink is chunk 0 plus half of chunk 1, then 2 recent chunks.

The substitution (the smallest piece): with a policy, the model must run with its global cache (``--local_attn_size
-1``, no ``--max_attention_size``), so at chunk k the attention receives the keys/values of chunks 0..k in order
(``k_cache`` = tokens ``[0, (k + 1) T)``, T = chunk_size * frame_seqlen tokens). The launcher wraps the two attention
callables of that path — ``wan.modules.model_fast.attention`` (called only at model_fast.py:159) and
``wan.distributed.sequence_parallel.flash_attention`` (called only at sequence_parallel.py:529) — so that, when the
policy holds a subset, they receive only the tokens of the held chunks and chunk k itself, in chunk order. The chunk
is read off the call (``len(k_cache) / len(query) - 1``), nothing else is touched, and the held set of each chunk is
the policy's ``select(history, upcoming)`` over ``chunk_infos`` of the commanded poses: it depends only on the poses,
so it is computed for every chunk before generation and checked against what the attention really received. Keys
keep their absolute RoPE, as in the model's own rolled cache. When the policy holds every earlier chunk the call is
passed through untouched, so ``full_kv`` and any unlimited budget are the model's FullKV run; ``sliding_window`` at
budget B is the model's own ``--local_attn_size (B + 1) * chunk_size --sink_size chunk_size`` trim, bit for bit
(tests/adapters/test_lingbot_v2_context.py). The cache stays the model's full-length one (the memory of FullKV); a policy
bounds what attention reads (its compute), not what is stored — a chunk dropped once can be retrieved again.

Chunks in video frames: chunk k holds latents ``[k c, (k + 1) c)`` (c = ``--chunk_size``); latent 0 is video frame 0
(the conditioning frame) and latent j >= 1 is frames ``4 j - 3 .. 4 j`` (the VAE's 4x time stride, wan/image2video.py:
498-500, 520-527), so chunk 0 is frames ``[0, 4 c - 3)`` and chunk k >= 1 is ``[4 k c - 3, 4 (k + 1) c - 3)`` (c = 4:
13 frames, then 16). Poses: ``poses.npy`` of ``--action_path`` cut as the model cuts it (:478-482); when the chunk
truncation shortens the clip the model spreads the poses over the kept latents (:563-571), and the chunk infos follow
that time map (video frame f takes pose ``round(f (n - 1) / (F - 1))``); with F = 16 m - 3 (worldgate's plans) it is
the identity.

Where ContextPolicy comes from: the launcher runs in the model's environment, where worldgate is usually not
installed. ``worldgate.adapters.context`` needs only numpy; the launcher finds worldgate from its own location (a
source tree or an installed package) or ``--worldgate-path DIR`` and imports it from there (:func:`import_context`).

``--context-json FILE`` holds the policy's fields as ``ContextPolicy.describe()`` writes them; ``--context-policy`` and
``--context-budget`` give name and budget (``none`` / absent: unlimited) and must agree with the JSON when both are
given. ``--context-log FILE`` (rank 0) gets one JSON line per generated chunk: ``{"chunk", "chunk_start",
"chunk_stop", "latents", "context", "history_tokens"}``, ``context`` the earlier chunk ids its attention held.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import types
from contextlib import contextmanager
from pathlib import Path

import numpy as np

POLICIES = ("full_kv", "sliding_window", "fov")
COMMIT = "2648877f763a06cc743bcd919936da4d25f12e7b"
TIME_STRIDE = 4  # vae_stride[0] (wan/configs/wan_i2v_A14B.py:16)
#: the policy's fields a --context-json may carry (ContextPolicy.describe(); "unit" must be "chunks")
POLICY_FIELDS = ("name", "budget", "sink", "recent", "fov_h", "fov_v", "points", "radius", "gate", "seed")


class LauncherError(RuntimeError):
    pass


# ------------------------------------------------------------------ the model's frame and chunk arithmetic


def latent_count(frame_num: int, n_poses: int, chunk_size: int) -> tuple[int, int]:
    """(frames the model reads of poses.npy, latent frames it generates) for ``--frame_num`` and ``n_poses`` poses:
    wan/image2video.py:479-482 (frame_num snapped to 4n+1, capped by the poses) and :498-500 (latents truncated down
    to a multiple of the chunk)."""
    if chunk_size < 1:
        raise LauncherError(f"--chunk_size must be >= 1, got {chunk_size}")
    len_c2ws = ((n_poses - 1) // 4) * 4 + 1
    frame_num = min(((frame_num - 1) // 4) * 4 + 1, len_c2ws)
    lat_f = (frame_num - 1) // TIME_STRIDE + 1
    lat_f = int(lat_f - (lat_f % chunk_size))
    if lat_f < chunk_size or frame_num < 1:
        raise LauncherError(f"{n_poses} poses / --frame_num give {lat_f} latent frames: less than one chunk of "
                            f"{chunk_size}")
    return frame_num, lat_f


def chunk_frames(n_latents: int, chunk_size: int) -> list[tuple[int, int, int, int]]:
    """``(latent_start, latent_stop, frame_start, frame_stop)`` of every chunk: latent 0 is video frame 0, latent
    j >= 1 is frames 4j-3..4j, so chunk 0 is frames [0, 4c-3) and chunk k >= 1 is [4kc-3, 4(k+1)c-3)."""
    if n_latents % chunk_size:
        raise LauncherError(f"{n_latents} latent frames are not whole chunks of {chunk_size}")

    def frame(j):  # first video frame of latent j
        return 0 if j == 0 else TIME_STRIDE * j - 3

    return [(a, a + chunk_size, frame(a), frame(a + chunk_size))
            for a in range(0, n_latents, chunk_size)]


def video_poses(c2ws: np.ndarray, frame_num: int, n_latents: int) -> np.ndarray:
    """The commanded pose of each output video frame: the model keeps ``c2ws[:frame_num]`` and spreads it over
    ``n_latents`` latents (wan/image2video.py:563-571), so output frame f of F = 4 (n_latents - 1) + 1 sits at input
    time f (frame_num - 1) / (F - 1) (nearest pose); the identity when F == frame_num."""
    F = TIME_STRIDE * (n_latents - 1) + 1
    src = np.asarray(c2ws)[:frame_num]
    if F == len(src):
        return src
    idx = np.rint(np.arange(F) * (len(src) - 1) / max(F - 1, 1)).astype(int)
    return src[idx]


def plan_chunks(c2ws: np.ndarray, frame_num: int, chunk_size: int):
    """``(ChunkInfo list, latent spans)`` of the chunks the model will generate from these poses."""
    from worldgate.adapters.context import ChunkInfo  # deferred: a script in the model's env; see import_context

    frame_num, lat_f = latent_count(frame_num, len(c2ws), chunk_size)
    poses = video_poses(c2ws, frame_num, lat_f)
    spans = chunk_frames(lat_f, chunk_size)
    infos = [ChunkInfo(k, f0, f1, np.asarray(poses[f0:f1], np.float64)) for k, (_, _, f0, f1) in enumerate(spans)]
    return infos, spans


def select_all(policy, infos) -> list[list[int]]:
    """The earlier chunks held while each chunk is generated (chunk 0: none)."""
    held = []
    for k, info in enumerate(infos):
        ids = sorted(int(i) for i in policy.select(infos[:k], info)) if k else []
        if any(i < 0 or i >= k for i in ids) or len(set(ids)) != len(ids):
            raise LauncherError(f"policy {policy.name} chose {ids} before chunk {k}: not distinct earlier chunks")
        held.append(ids)
    return held


# ------------------------------------------------------------------ the substitution


class HeldContext:
    """Before each chunk's self-attention, keep only the tokens of its held chunks and of itself.

    ``held[k]``: the earlier chunk ids chunk k may see. Installed over the model's attention callables, it reads the
    chunk off the call: the model's global cache gives ``k_cache`` = tokens [0, (k + 1) T) with T = len(query)."""

    def __init__(self, held: list[list[int]]):
        self.held = [list(h) for h in held]
        self.seen: dict[int, set] = {}  # chunk -> held tuples its attention calls received
        self.calls = 0
        self.tokens_per_chunk: int | None = None  # T = chunk_size * frame_seqlen, read off the first call
        self.rows: list[dict] = []

    def window(self, q_len: int, k_len: int) -> tuple[int, list[int]]:
        if q_len <= 0 or k_len % q_len:
            raise LauncherError(f"self-attention over {k_len} cached tokens for a {q_len}-token chunk: not whole "
                                "chunks (a policy needs --local_attn_size -1 and no --max_attention_size)")
        k = k_len // q_len - 1
        if k >= len(self.held):
            raise LauncherError(f"self-attention for chunk {k}, but only {len(self.held)} chunks were planned")
        return k, self.held[k]

    def wrap(self, fn):
        def attention_with_held_context(q, k, v, *args, **kwargs):
            chunk, held = self.window(q.shape[1], k.shape[1])
            if self.tokens_per_chunk is None:
                self.tokens_per_chunk = int(q.shape[1])
            elif self.tokens_per_chunk != q.shape[1]:
                raise LauncherError(f"a {q.shape[1]}-token chunk after {self.tokens_per_chunk}-token ones")
            self.calls += 1
            self.seen.setdefault(chunk, set()).add(tuple(held))
            if len(held) == chunk:  # every earlier chunk: the model's own call, untouched
                return fn(q, k, v, *args, **kwargs)
            import torch

            T = q.shape[1]
            spans = _spans(held + [chunk])
            k = torch.cat([k[:, a * T:b * T] for a, b in spans], dim=1)
            v = torch.cat([v[:, a * T:b * T] for a, b in spans], dim=1)
            return fn(q, k, v, *args, **kwargs)

        attention_with_held_context.__wrapped__ = fn
        return attention_with_held_context

    def check(self) -> None:
        """Every planned chunk was generated, and its attention received exactly the planned chunks."""
        for k, held in enumerate(self.held):
            got = self.seen.get(k)
            if not got:
                raise LauncherError(f"chunk {k} was planned but its self-attention never ran")
            if got != {tuple(held)}:
                raise LauncherError(f"chunk {k}: attention received {sorted(got)}, planned {held}")
        extra = sorted(set(self.seen) - set(range(len(self.held))))
        if extra:
            raise LauncherError(f"chunks {extra} ran but were not planned")


def _spans(ids: list[int]) -> list[tuple[int, int]]:
    """Sorted ids as [a, b) runs, so consecutive chunks are one slice."""
    out: list[list[int]] = []
    for i in sorted(ids):
        if out and out[-1][1] == i:
            out[-1][1] = i + 1
        else:
            out.append([i, i + 1])
    return [(a, b) for a, b in out]


#: the attention callables of the causal path: (module, global name, where it is called)
TARGETS = (("wan.modules.model_fast", "attention", "wan/modules/model_fast.py:159"),
           ("wan.distributed.sequence_parallel", "flash_attention", "wan/distributed/sequence_parallel.py:529"))


@contextmanager
def held_context(held: list[list[int]]):
    """Install :class:`HeldContext` over the model's self-attention callables (TARGETS) for the duration."""
    import importlib

    ctx = HeldContext(held)
    saved = []
    try:
        for mod_name, attr, _ in TARGETS:
            mod = importlib.import_module(mod_name)
            orig = getattr(mod, attr)
            saved.append((mod, attr, orig))
            setattr(mod, attr, ctx.wrap(orig))
        yield ctx
    finally:
        for mod, attr, orig in reversed(saved):
            setattr(mod, attr, orig)


def log_rows(held: list[list[int]], spans, tokens_per_chunk: int | None = None) -> list[dict]:
    """One row per chunk: its frames and latents, the earlier chunks held, and (when known) the history tokens its
    attention read."""
    rows = []
    for k, ((l0, l1, f0, f1), h) in enumerate(zip(spans, held)):
        row = {"chunk": k, "chunk_start": f0, "chunk_stop": f1, "latents": [l0, l1], "context": list(h)}
        if tokens_per_chunk is not None:
            row["history_tokens"] = len(h) * int(tokens_per_chunk)
        rows.append(row)
    return rows


def write_log(path, rows) -> None:
    """JSON lines at ``path`` (rank 0 only; written whole, then renamed)."""
    if path is None or int(os.environ.get("RANK", "0")) != 0:
        return
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(p.name + ".tmp")
    tmp.write_text("".join(json.dumps(r) + "\n" for r in rows))
    tmp.replace(p)


@contextmanager
def policy_run(policy, action_path, frame_num: int, chunk_size: int, log_path=None):
    """Plan the held chunks of ``policy`` for this action folder, hold them in the model's attention while the body
    runs the model's own generation, then check what the attention received and write the log (``ctx.rows``)."""
    c2ws = np.load(os.path.join(str(action_path), "poses.npy"))
    infos, spans = plan_chunks(c2ws, int(frame_num), int(chunk_size))
    held = select_all(policy, infos)
    with held_context(held) as ctx:
        ctx.infos, ctx.spans = infos, spans
        yield ctx
    ctx.check()
    ctx.rows = log_rows(held, spans, ctx.tokens_per_chunk)
    write_log(log_path, ctx.rows)


def run_pipeline(pipe, policy, *, prompt, img, action_path, chunk_size, frame_num, log_path=None, **generate_kw):
    """``pipe.generate(...)`` (wan/image2video.py:386-422: the model's own loop) with ``policy`` holding the context;
    ``pipe`` is a ``WanI2VCausal`` built with ``local_attn_size=-1``. Returns (video, log rows)."""
    if getattr(pipe, "local_attn_size", -1) != -1:
        raise LauncherError(f"a context policy needs the model's global cache: the pipeline was built with "
                            f"local_attn_size={pipe.local_attn_size} (use -1)")
    if generate_kw.get("max_attention_size") is not None:
        raise LauncherError("a context policy decides the window: drop max_attention_size")
    with policy_run(policy, action_path, frame_num, chunk_size, log_path=log_path) as ctx:
        video = pipe.generate(prompt, img, action_path, chunk_size=chunk_size, frame_num=frame_num, **generate_kw)
    return video, ctx.rows


# ------------------------------------------------------------------ arguments


def _budget(text):
    if text is None:
        return None
    if isinstance(text, str) and text.strip().lower() in ("none", "unlimited", "inf", ""):
        return None
    try:
        n = int(text)
    except (TypeError, ValueError):
        raise LauncherError(f"--context-budget must be a whole number of chunks or 'none', got {text!r}") from None
    if n < 1:
        raise LauncherError(f"--context-budget must be >= 1 chunk, got {n}")
    return n


def launcher_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="lingbot_v2_launcher.py", allow_abbrev=False, add_help=False,
        description="LingBot-World v2's generate.py with a worldgate context policy; other arguments go to "
                    "generate.py")
    ap.add_argument("--context-policy", choices=POLICIES, default=None)
    ap.add_argument("--context-budget", default=None, help="chunks held (the sink included); none: unlimited")
    ap.add_argument("--context-json", default=None, help="the policy's fields (ContextPolicy.describe())")
    ap.add_argument("--context-log", default=None, help="JSON lines, one per chunk: the chunks its attention held")
    ap.add_argument("--worldgate-path", default=None, help="the folder holding the worldgate package")
    ap.add_argument("--checkout", default=None, help="the model's checkout (default: the working directory)")
    ap.add_argument("--launcher-help", action="store_true")
    return ap


def split_args(argv: list[str]):
    """(the launcher's options, generate.py's arguments)."""
    ns, rest = launcher_parser().parse_known_args(argv)
    return ns, rest


def policy_spec(ns) -> dict | None:
    """The policy's fields from --context-json and/or --context-policy/--context-budget (None: no policy)."""
    spec = None
    if ns.context_json:
        try:
            data = json.loads(Path(ns.context_json).read_text())
        except (OSError, ValueError) as e:
            raise LauncherError(f"--context-json {ns.context_json}: {e}") from None
        if not isinstance(data, dict) or "name" not in data:
            raise LauncherError(f"--context-json {ns.context_json}: not a ContextPolicy.describe() object")
        if data.get("unit", "chunks") != "chunks":
            raise LauncherError(f"--context-json: budget unit {data['unit']!r}; this launcher counts chunks")
        unknown = sorted(set(data) - set(POLICY_FIELDS) - {"unit"})
        if unknown:
            raise LauncherError(f"--context-json: unknown field(s) {unknown}; known: {', '.join(POLICY_FIELDS)}")
        spec = {k: data[k] for k in POLICY_FIELDS if k in data}
        spec["budget"] = _budget(spec.get("budget"))
    if ns.context_policy is not None:
        if spec is not None and spec["name"] != ns.context_policy:
            raise LauncherError(f"--context-policy {ns.context_policy} disagrees with --context-json "
                                f"({spec['name']})")
        spec = spec or {"name": ns.context_policy}
    if ns.context_budget is not None:
        if spec is None:
            raise LauncherError("--context-budget needs --context-policy (or --context-json)")
        b = _budget(ns.context_budget)
        if ns.context_json and spec.get("budget") != b:
            raise LauncherError(f"--context-budget {b} disagrees with --context-json ({spec.get('budget')})")
        spec["budget"] = b
    if spec is None and ns.context_log:
        raise LauncherError("--context-log needs --context-policy: without one the model's own cache runs")
    if spec is not None and spec["name"] not in POLICIES:
        raise LauncherError(f"unknown context policy {spec['name']!r}; known: {', '.join(POLICIES)}")
    return spec


def check_model_args(args) -> None:
    """What a policy needs of generate.py's parsed arguments (``args`` from its own parser)."""
    if getattr(args, "infer_mode", "causal_fast") != "causal_fast":
        raise LauncherError(f"--infer_mode {args.infer_mode}: the policy acts on the causal-fast loop "
                            "(wan/image2video.py:424-728); causal_pretrain has its own loop")
    if int(args.local_attn_size) != -1 or int(args.sink_size) != 0:
        raise LauncherError(f"--local_attn_size {args.local_attn_size} --sink_size {args.sink_size}: with a context "
                            "policy the model keeps its global cache and the policy chooses the window; drop both "
                            "(or pass -1 / 0)")
    if args.max_attention_size is not None:
        raise LauncherError("--max_attention_size trims the window too: drop it when a context policy is given")
    if not args.action_path:
        raise LauncherError("--action_path is required (poses.npy decides the chunks' views)")


#: the folders of a worldgate source tree the launcher imports from, as pyproject.toml's package-dir maps them
SOURCE_PACKAGES = {"worldgate": "worldgate", "worldgate.adapters": "adapters", "worldgate.trajectories": "trajectories"}


def context_file(root: Path) -> Path | None:
    """``adapters/context.py`` of the worldgate source tree or installed package at ``root``, or None."""
    for f, beside in ((root / "adapters" / "context.py", root / "worldgate" / "__init__.py"),
                      (root / "worldgate" / "adapters" / "context.py", root)):
        if f.is_file() and beside.exists():
            return f
    return None


def find_worldgate(explicit: str | None = None) -> Path:
    """``explicit``, else the nearest parent of this file that is a worldgate source tree or holds the package."""
    found = [Path(explicit).expanduser().resolve()] if explicit else Path(__file__).resolve().parents
    for p in found:
        if context_file(p) is not None:
            return p
    raise LauncherError(f"--worldgate-path {found[0]}: neither a worldgate source tree (adapters/context.py beside "
                        "worldgate/__init__.py) nor a folder holding the installed package" if explicit else
                        f"cannot find the worldgate package above {Path(__file__).resolve()}: pass --worldgate-path DIR")


def import_context(worldgate_path: str | None = None):
    """``worldgate.adapters.context`` of this launcher's worldgate (or ``--worldgate-path``'s) and no other: a package's
    folder appended to sys.path (after the model's), a source tree mounted as package-dir maps it (no __init__ runs)."""
    root = find_worldgate(worldgate_path)
    want = context_file(root).resolve()
    if want.parents[1] == root / "worldgate":
        if str(root) not in sys.path:
            sys.path.append(str(root))
    else:
        for name, folder in SOURCE_PACKAGES.items():
            if name not in sys.modules:
                sys.modules[name] = types.ModuleType(name)
                sys.modules[name].__path__ = [str(root / folder)]
    from worldgate.adapters import context  # deferred: importable only once root is on sys.path (lines above)

    if Path(context.__file__).resolve() != want:
        raise LauncherError(f"worldgate.adapters.context resolves to {context.__file__}, not {want} (another "
                            "worldgate is installed in this environment): pass --worldgate-path to the one you mean "
                            "or uninstall the other")
    return context


def make_policy(spec: dict, worldgate_path: str | None = None):
    return import_context(worldgate_path).ContextPolicy(**spec)


def load_generate(checkout: Path):
    """The checkout's generate.py as a module (its ``__main__`` block does not run)."""
    path = checkout / "generate.py"
    if not path.is_file():
        raise LauncherError(f"{checkout} has no generate.py: run from a checkout of robbyant/lingbot-world-v2 "
                            f"({COMMIT}) or pass --checkout")
    if str(checkout) not in sys.path:
        sys.path.insert(0, str(checkout))
    spec = importlib.util.spec_from_file_location("lingbot_world_v2_generate", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def parse_model_args(up, argv: list[str], checkout: Path):
    """generate.py's own ``_parse_args`` (generate.py:62-187) over ``argv``."""
    saved = sys.argv
    sys.argv = [str(checkout / "generate.py"), *argv]
    try:
        return up._parse_args()
    finally:
        sys.argv = saved


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ns, rest = split_args(argv)
    if ns.launcher_help:
        launcher_parser().print_help()
        return 0
    spec = policy_spec(ns)
    policy = make_policy(spec, ns.worldgate_path) if spec is not None else None
    checkout = Path(ns.checkout or os.getcwd()).resolve()
    up = load_generate(checkout)
    args = parse_model_args(up, rest, checkout)
    if policy is not None:
        check_model_args(args)
    saved, sys.argv = sys.argv, [str(checkout / "generate.py"), *rest]  # what `python generate.py ARGS` would see
    try:
        if policy is None:
            up.generate(args)  # exactly `python generate.py ARGS`
        else:
            with policy_run(policy, args.action_path, args.frame_num, args.chunk_size, log_path=ns.context_log):
                up.generate(args)
    finally:
        sys.argv = saved
    return 0


if __name__ == "__main__":
    if sys.path and Path(sys.path[0] or ".").resolve() == Path(__file__).resolve().parent:
        del sys.path[0]  # worldgate's adapters folder: its module names must not shadow the model's imports
    try:
        raise SystemExit(main())
    except LauncherError as e:
        print(f"lingbot_v2_launcher: {e}", file=sys.stderr)
        raise SystemExit(2)
