"""Context policies inside LingBot-World v2's own causal loop (adapters/lingbot_v2_launcher.py).

Ungated: the launcher's chunk arithmetic (which video frames each latent chunk holds), the policy's choices over
those chunks, the attention substitution on stand-in tensors, the context log, the arguments, and the script run
from a stand-in checkout.

Gated on ``LINGBOT_WORLD_V2_CHECKOUT`` (a checkout or ``git archive`` export of robbyant/lingbot-world-v2 at
2648877f763a06cc743bcd919936da4d25f12e7b; its requirements einops, easydict and ftfy importable, e.g. through
PYTHONPATH): the model's own ``WanModelFast`` and ``WanI2VCausal._generate_causal_fast`` at a tiny random
configuration on CPU. Stand-ins, all outside the causal loop: the T5 output is put in the pipeline's own prompt cache
(wan/image2video.py:537-549), the VAE is a fixed pooling / upsampling pair, and the two flash-attn kernels
(model_fast.py:159, :208) are PyTorch's SDPA on CPU; upstream and launcher runs use the same ones. Shown bit for bit:
``full_kv`` == upstream with ``--local_attn_size -1``; ``sliding_window`` at budget B == upstream's own
``--local_attn_size 4 (B + 1) --sink_size 4`` trim; every policy with an unlimited budget == FullKV; ``fov`` attends
to exactly the chunks the policy chose (every other chunk's cached keys/values poisoned with NaN leave the output
unchanged; one held chunk poisoned does not) on a trajectory that turns left and comes back; and the launcher's CLI
runs the checkout's own generate.py end to end.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest

from adapter_conformance import gated_checkout as _checkout
from worldgate.adapters import lingbot_v2_launcher as L
from worldgate.adapters.context import ContextPolicy, chunk_infos, make_policy
from testpaths import ROOT

pytestmark = pytest.mark.filterwarnings("ignore:CUDA is not available:UserWarning")  # autocast('cuda') on CPU

LAUNCHER = ROOT / "adapters" / "lingbot_v2_launcher.py"


def yaw_poses(yaw_deg) -> np.ndarray:
    """Camera-to-world poses (OpenCV) yawing by ``yaw_deg`` (negative: left), no translation."""
    from scipy.spatial.transform import Rotation

    out = np.repeat(np.eye(4)[None], len(yaw_deg), axis=0)
    out[:, :3, :3] = Rotation.from_euler("y", np.asarray(yaw_deg, float)[:, None], degrees=True).as_matrix()
    return out


def left_then_right(n: int = 157) -> np.ndarray:
    """Turn left 120 degrees, come back to the start view, hold: 10 chunks of 4 latents for n = 157."""
    return yaw_poses(np.interp(np.arange(n), [0, 77, 141, n - 1], [0, -120, 0, 0]))


def write_action(d: Path, poses: np.ndarray) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    np.save(d / "poses.npy", poses.astype(np.float32))
    np.save(d / "intrinsics.npy", np.tile(np.array([502.9, 503.1, 415.8, 239.8], np.float32), (len(poses), 1)))
    return d


# ------------------------------------------------------------------ chunk arithmetic (ungated)


def test_chunks_in_video_frames_for_chunk_size_4():
    spans = L.chunk_frames(84, 4)  # frame_num 333 = 16 * 21 - 3
    assert spans[0] == (0, 4, 0, 13) and spans[1] == (4, 8, 13, 29) and spans[-1] == (80, 84, 317, 333)
    assert all(a[3] == b[2] for a, b in zip(spans, spans[1:]))  # contiguous, every frame in one chunk
    # latent j >= 1 is frames 4j-3..4j: chunk 1 = latents 4..7 = frames 13..28
    assert [(f0, f1) for *_, f0, f1 in spans] == [(c.start, c.stop) for c in chunk_infos(np.zeros((333, 4, 4)), 16, 13)]
    from worldgate.adapters.lingbot_world_v2 import LingBotWorldV2

    assert (LingBotWorldV2.info.first_chunk_frames, LingBotWorldV2.info.chunk_frames) == (13, 16)


def test_chunks_for_other_chunk_sizes():
    assert L.chunk_frames(9, 3)[:2] == [(0, 3, 0, 9), (3, 6, 9, 21)]  # first chunk 4c-3 frames, then 4c
    assert L.chunk_frames(2, 1) == [(0, 1, 0, 1), (1, 2, 1, 5)]
    with pytest.raises(L.LauncherError, match="whole chunks"):
        L.chunk_frames(10, 4)


@pytest.mark.parametrize("frame_num,n_poses,expect", [
    (333, 333, (333, 84)),  # worldgate's 16m-3: nothing is cut
    (321, 321, (321, 80)),  # 81 latents cut to 80: 321 poses squeezed into 317 frames (image2video.py:563-571)
    (361, 961, (361, 88)),  # the README's 361 frames become 349 (docs/probes/lingbot-world-v2.md section 4)
    (400, 333, (333, 84)),  # capped by the poses (image2video.py:479-482)
    (335, 400, (333, 84)),  # snapped to 4n+1
])
def test_latent_count_is_the_models_truncation(frame_num, n_poses, expect):
    assert L.latent_count(frame_num, n_poses, 4) == expect


def test_latent_count_refuses_less_than_a_chunk():
    with pytest.raises(L.LauncherError, match="less than one chunk"):
        L.latent_count(9, 9, 4)


def test_video_poses_follow_the_models_time_map():
    P = left_then_right(333)
    assert np.array_equal(L.video_poses(P, 333, 84), P)
    Q = left_then_right(321)
    V = L.video_poses(Q, 321, 80)  # 317 frames spread over 321 poses
    assert len(V) == 317 and np.array_equal(V[0], Q[0]) and np.array_equal(V[-1], Q[-1])


# ------------------------------------------------------------------ the policy's choices (ungated)


def held_for(name, budget, poses=None, chunk=4):
    P = left_then_right() if poses is None else poses
    infos, spans = L.plan_chunks(P, len(P), chunk)
    return L.select_all(make_policy(name, budget), infos), infos, spans


def test_full_kv_and_unlimited_budgets_hold_every_earlier_chunk():
    for name, budget in (("full_kv", None), ("full_kv", 2), ("sliding_window", None), ("fov", None)):
        held, infos, _ = held_for(name, budget)
        assert len(infos) == 10 and held == [list(range(k)) for k in range(10)]


def test_sliding_window_is_the_sink_and_the_most_recent_chunks():
    held, _, _ = held_for("sliding_window", 3)
    assert held == [[], [0], [0, 1], [0, 1, 2]] + [[0, k - 2, k - 1] for k in range(4, 10)]


def test_fov_retrieves_the_chunks_that_saw_the_revisited_view():
    held, infos, _ = held_for("fov", 3)
    policy = make_policy("fov", 3)
    assert held == [sorted(policy.select(infos[:k], infos[k])) if k else [] for k in range(10)]
    assert all(len(h) <= 3 and (k == 0 or (0 in h and k - 1 in h)) for k, h in enumerate(held))
    # back at the start view the retrieved slot holds chunk 1 (frames 13-28, the departure), which a window drops
    assert held[9] == [0, 1, 8] and held[8] == [0, 1, 7]
    assert held[9] != held_for("sliding_window", 3)[0][9]


# ------------------------------------------------------------------ the substitution on stand-in tensors (ungated)


def _qkv(chunk, T=3, heads=2, d=4):
    import torch

    k = torch.arange((chunk + 1) * T, dtype=torch.float32)[None, :, None, None].expand(1, -1, heads, d).clone()
    return torch.zeros(1, T, heads, d), k, k + 1000


def test_the_wrapper_gives_attention_exactly_the_held_chunks():
    import torch

    got = []

    def fn(q, k, v, *a, **kw):
        got.append((k[0, :, 0, 0].tolist(), v[0, :, 0, 0].tolist(), a, kw))
        return q

    ctx = L.HeldContext([[], [0], [0], [0, 2], [1]])
    attn = ctx.wrap(fn)
    q, k, v = _qkv(3)
    attn(q, k, v, "x", dropout_p=0.0)  # chunk 3 holds 0 and 2: tokens 0-2, 6-8 and its own 9-11
    assert got[-1][0] == [0, 1, 2, 6, 7, 8, 9, 10, 11] and got[-1][1] == [1000 + t for t in got[-1][0]]
    assert got[-1][2:] == (("x",), {"dropout_p": 0.0})  # the model's other arguments pass through
    q, k, v = _qkv(4)
    attn(q, k, v)
    assert got[-1][0] == [3, 4, 5, 12, 13, 14]
    seen = {}

    def same(q, k2, v2):
        seen["k"] = k2
        return q

    q, k, v = _qkv(1)
    L.HeldContext([[], [0]]).wrap(same)(q, k, v)
    assert seen["k"] is k  # every earlier chunk held: the model's own tensors, untouched
    assert ctx.tokens_per_chunk == 3 and ctx.seen == {3: {(0, 2)}, 4: {(1,)}}
    assert torch.equal(k, _qkv(1)[1])


def test_the_wrapper_refuses_what_is_not_the_global_cache():
    ctx = L.HeldContext([[], [0]])
    attn = ctx.wrap(lambda q, k, v: q)
    q, k, v = _qkv(1)
    with pytest.raises(L.LauncherError, match="not whole chunks"):
        attn(q, k[:, :5], v[:, :5])  # a rolled cache (--local_attn_size) or --max_attention_size
    with pytest.raises(L.LauncherError, match="only 2 chunks were planned"):
        attn(*_qkv(2))
    attn(q, k, v)
    with pytest.raises(L.LauncherError, match="chunk 0 was planned but its self-attention never ran"):
        ctx.check()
    ctx2 = L.HeldContext([[], [0]])
    ctx2.seen = {0: {()}, 1: {(0,), ()}}
    with pytest.raises(L.LauncherError, match="chunk 1: attention received"):
        ctx2.check()


def _fake_attention_module(monkeypatch, name="worldgate_test_fake_attention"):
    mod = types.ModuleType(name)
    mod.calls = []

    def attention(q, k, v):
        mod.calls.append(k.shape[1])
        return q

    mod.attention = attention
    monkeypatch.setitem(sys.modules, name, mod)
    monkeypatch.setattr(L, "TARGETS", ((name, "attention", "stand-in"),))
    return mod


def test_policy_run_holds_checks_and_logs(tmp_path, monkeypatch):
    """A stand-in loop with the model's call pattern (5 attention calls per chunk over the global cache)."""
    import torch

    mod = _fake_attention_module(monkeypatch)
    original = mod.attention
    act = write_action(tmp_path / "action", left_then_right())
    log = tmp_path / "out" / "context.jsonl"
    T = 6
    with L.policy_run(make_policy("fov", 3), act, 157, 4, log_path=log) as ctx:
        assert mod.attention is not original
        cache = torch.randn(1, 10 * T, 2, 4)
        for k in range(10):
            for _ in range(5):
                mod.attention(torch.zeros(1, T, 2, 4), cache[:, :(k + 1) * T], cache[:, :(k + 1) * T])
    assert mod.attention is original  # restored
    rows = [json.loads(x) for x in log.read_text().splitlines()]
    expect, _, spans = held_for("fov", 3)
    assert [r["context"] for r in rows] == expect == [r["context"] for r in ctx.rows]
    assert [(r["chunk"], r["chunk_start"], r["chunk_stop"]) for r in rows][:2] == [(0, 0, 13), (1, 13, 29)]
    assert rows[-1]["latents"] == [36, 40] and rows[-1]["history_tokens"] == 3 * T
    assert mod.calls[-5:] == [4 * T] * 5  # chunk 9 read chunks 0, 1, 8 and itself


def test_policy_run_fails_when_the_loop_skips_a_chunk(tmp_path, monkeypatch):
    import torch

    mod = _fake_attention_module(monkeypatch)
    act = write_action(tmp_path / "action", left_then_right())
    log = tmp_path / "context.jsonl"
    with pytest.raises(L.LauncherError, match="chunk 9 was planned"):
        with L.policy_run(make_policy("sliding_window", 3), act, 157, 4, log_path=log):
            cache = torch.randn(1, 10 * 2, 1, 2)
            for k in range(9):
                mod.attention(torch.zeros(1, 2, 1, 2), cache[:, :(k + 1) * 2], cache[:, :(k + 1) * 2])
    assert not log.exists()


def test_the_log_is_rank_0s(tmp_path, monkeypatch):
    monkeypatch.setenv("RANK", "3")
    L.write_log(tmp_path / "c.jsonl", [{"chunk": 0}])
    assert not (tmp_path / "c.jsonl").exists()


# ------------------------------------------------------------------ arguments (ungated)

PLAN_ARGS = ["--size", "480*832", "--ckpt_dir", "/w/ckpt", "--image", "/d/img 0.jpg", "--action_path", "/n/action",
             "--frame_num", "333", "--chunk_size", "4", "--base_seed", "7", "--save_dir", "/o", "--save_file",
             "/o/video.mp4", "--prompt", "A scene --context-policy fov."]


def test_split_args_keeps_the_models_arguments_as_given():
    ns, rest = L.split_args(["--context-policy", "fov", *PLAN_ARGS[:4], "--context-budget", "3", *PLAN_ARGS[4:],
                             "--context-log", "/o/context.jsonl"])
    assert rest == PLAN_ARGS
    assert (ns.context_policy, ns.context_budget, ns.context_log) == ("fov", "3", "/o/context.jsonl")
    ns, rest = L.split_args(PLAN_ARGS)
    assert rest == PLAN_ARGS and L.policy_spec(ns) is None


def _spec(argv):
    return L.policy_spec(L.split_args(argv)[0])


def test_policy_from_flags_and_from_describe_json(tmp_path):
    assert _spec(["--context-policy", "sliding_window", "--context-budget", "3"]) == \
        {"name": "sliding_window", "budget": 3}
    assert _spec(["--context-policy", "fov", "--context-budget", "none"]) == {"name": "fov", "budget": None}
    desc = ContextPolicy("fov", 4, recent=2, points=512, seed=3).describe()
    f = tmp_path / "context.json"
    f.write_text(json.dumps(desc))
    spec = _spec(["--context-json", str(f), "--context-policy", "fov", "--context-budget", "4"])
    assert ContextPolicy(**spec) == ContextPolicy("fov", 4, recent=2, points=512, seed=3)
    assert L.make_policy(spec).describe() == desc
    f.write_text(json.dumps(make_policy("full_kv").describe()))
    assert _spec(["--context-json", str(f)]) == {"name": "full_kv", "budget": None, "sink": True}


@pytest.mark.parametrize("argv,match", [
    (["--context-budget", "3"], "needs --context-policy"),
    (["--context-log", "x.jsonl"], "--context-log needs --context-policy"),
    (["--context-policy", "fov", "--context-budget", "0"], ">= 1 chunk"),
    (["--context-policy", "fov", "--context-budget", "three"], "whole number"),
])
def test_policy_arguments_refused(argv, match):
    with pytest.raises(L.LauncherError, match=match):
        _spec(argv)


@pytest.mark.parametrize("data,flags,match", [
    ({"name": "fov", "budget": 3, "unit": "chunks"}, ["--context-policy", "sliding_window"], "disagrees"),
    ({"name": "fov", "budget": 3}, ["--context-budget", "4"], "disagrees"),
    ({"name": "fov", "budget": 3, "unit": "latents"}, [], "this launcher counts chunks"),
    ({"name": "fov", "window": 3}, [], "unknown field"),
    ([1, 2], [], "not a ContextPolicy.describe"),
])
def test_context_json_refused(tmp_path, data, flags, match):
    f = tmp_path / "c.json"
    f.write_text(json.dumps(data))
    with pytest.raises(L.LauncherError, match=match):
        _spec(["--context-json", str(f), *flags])


def _model_args(**kw):
    base = dict(infer_mode="causal_fast", local_attn_size=-1, sink_size=0, max_attention_size=None,
                action_path="/n/action")
    return argparse.Namespace(**{**base, **kw})


def test_model_arguments_a_policy_needs():
    L.check_model_args(_model_args())
    with pytest.raises(L.LauncherError, match="drop both"):
        L.check_model_args(_model_args(local_attn_size=18, sink_size=6))  # the README's window: two windows stacked
    with pytest.raises(L.LauncherError, match="drop both"):
        L.check_model_args(_model_args(sink_size=4))
    with pytest.raises(L.LauncherError, match="max_attention_size"):
        L.check_model_args(_model_args(max_attention_size=4096))
    with pytest.raises(L.LauncherError, match="causal_pretrain has its own loop"):
        L.check_model_args(_model_args(infer_mode="causal_pretrain"))
    with pytest.raises(L.LauncherError, match="--action_path"):
        L.check_model_args(_model_args(action_path=None))


def test_worldgate_is_found_from_the_launchers_location(tmp_path):
    assert L.find_worldgate() == ROOT
    assert L.find_worldgate(str(ROOT)) == ROOT
    with pytest.raises(L.LauncherError, match="neither a worldgate source tree"):
        L.find_worldgate(str(tmp_path))
    assert Path(L.import_context().__file__).resolve() == (ROOT / "adapters" / "context.py").resolve()


def test_the_launcher_mounts_the_source_tree_where_worldgate_is_not_installed():
    """The model's environment: no worldgate installed (``-S``: site-packages' .pth files, the editable install's
    finder among them, are not read; numpy still comes through PYTHONPATH). The launcher, run from the source tree,
    mounts worldgate.adapters / worldgate.trajectories over their root folders and imports context.py from there."""
    import numpy
    import subprocess

    code = ("import importlib.util, sys; "
            f"spec = importlib.util.spec_from_file_location('launcher', {str(ROOT / 'adapters' / L.__name__.split('.')[-1])!r} + '.py'); "
            "L = importlib.util.module_from_spec(spec); spec.loader.exec_module(L); "
            "c = L.import_context(); print(c.__file__); print(c.ContextPolicy(name='full_kv').describe()['name'])")
    site = str(Path(numpy.__file__).resolve().parents[1])
    r = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, timeout=60,
                       env={"PYTHONPATH": site, "PATH": os.environ.get("PATH", "")}, cwd="/")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.split()
    assert Path(lines[0]).resolve() == (ROOT / "adapters" / "context.py").resolve() and lines[1] == "full_kv"


FAKE_GENERATE = '''
import argparse, json, os, sys
import numpy
import wan.modules.model_fast as mf

def _parse_args():
    ap = argparse.ArgumentParser()
    for a in ("--size", "--ckpt_dir", "--image", "--action_path", "--save_dir", "--save_file", "--prompt",
              "--infer_mode"):
        ap.add_argument(a, default="causal_fast" if a == "--infer_mode" else None)
    for a, d in (("--frame_num", 81), ("--chunk_size", 4), ("--local_attn_size", -1), ("--sink_size", 0),
                 ("--base_seed", 42)):
        ap.add_argument(a, type=int, default=d)
    ap.add_argument("--max_attention_size", type=int, default=None)
    return ap.parse_args()

def generate(args):
    # the call pattern of wan/image2video.py:649-709 over a global cache: 5 calls per chunk
    # (torch only when a policy may gather: the launcher's wrapper concatenates torch tensors)
    xp = numpy if mf.attention.__name__ == "attention" else __import__("torch")
    T, n = 2, ((args.frame_num - 1) // 4 + 1) // args.chunk_size
    cache = xp.arange(n * T)[None, :, None, None] * 1.0
    seen = []
    for k in range(n):
        for _ in range(5):
            kk = cache[:, :(k + 1) * T]
            mf.attention(xp.zeros((1, T, 1, 1)), kk, kk)
        seen.append(mf.last)
    json.dump({"argv": sys.argv[1:], "args": vars(args), "seen": seen, "wrapped": mf.attention.__name__,
               "cwd": os.getcwd(), "worldgate": [m for m in sys.modules if m.startswith("worldgate")]},
              open(args.save_file, "w"))
'''

FAKE_MODEL_FAST = '''
last = None
def attention(q, k, v):
    global last
    last = k[0, :, 0, 0].tolist()
    return q
'''


@pytest.fixture
def fake_checkout(tmp_path):
    c = tmp_path / "lingbot-world-v2"
    (c / "wan" / "modules").mkdir(parents=True)
    (c / "wan" / "distributed").mkdir()
    (c / "generate.py").write_text(FAKE_GENERATE)
    for f in ("wan/__init__.py", "wan/modules/__init__.py", "wan/distributed/__init__.py"):
        (c / f).write_text("")
    (c / "wan" / "modules" / "model_fast.py").write_text(FAKE_MODEL_FAST)
    (c / "wan" / "distributed" / "sequence_parallel.py").write_text("def flash_attention(q, k, v):\n    return q\n")
    return c


def _run_script(checkout, argv, tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "RANK", "WORLD_SIZE")}
    return subprocess.run([sys.executable, str(LAUNCHER), *argv], cwd=checkout, env=env, capture_output=True,
                          text=True, timeout=60)


def test_the_script_runs_the_checkouts_generate_with_the_policy(fake_checkout, tmp_path):
    """As the plan runs it: the model's python, the launcher by absolute path, the checkout as working directory."""
    act = write_action(tmp_path / "native" / "action", left_then_right())
    out = tmp_path / "out"
    out.mkdir()
    argv = ["--action_path", str(act), "--frame_num", "157", "--chunk_size", "4", "--prompt", "a b",
            "--save_file", str(out / "run.json"), "--context-policy", "fov", "--context-budget", "3",
            "--context-log", str(out / "context.jsonl")]
    p = _run_script(fake_checkout, argv, tmp_path)
    assert p.returncode == 0, p.stderr[-2000:]
    run = json.loads((out / "run.json").read_text())
    assert run["wrapped"] == "attention_with_held_context" and run["cwd"] == str(fake_checkout)
    assert run["args"]["prompt"] == "a b" and "--context-policy" not in run["argv"]
    expect, _, _ = held_for("fov", 3)
    T = 2
    assert run["seen"] == [[float(t) for c in h + [k] for t in range(c * T, (c + 1) * T)] for k, h in enumerate(expect)]
    rows = [json.loads(x) for x in (out / "context.jsonl").read_text().splitlines()]
    assert [r["context"] for r in rows] == expect and rows[9]["history_tokens"] == 3 * T


def test_the_script_without_a_policy_is_the_checkouts_generate(fake_checkout, tmp_path):
    act = write_action(tmp_path / "action", left_then_right())
    argv = ["--action_path", str(act), "--frame_num", "157", "--local_attn_size", "16", "--sink_size", "4",
            "--save_file", str(tmp_path / "run.json")]
    p = _run_script(fake_checkout, argv, tmp_path)
    assert p.returncode == 0, p.stderr[-2000:]
    run = json.loads((tmp_path / "run.json").read_text())
    assert run["wrapped"] == "attention" and run["argv"] == argv and run["worldgate"] == []


def test_the_script_refuses_a_policy_over_the_models_own_window(fake_checkout, tmp_path):
    act = write_action(tmp_path / "action", left_then_right())
    p = _run_script(fake_checkout, ["--action_path", str(act), "--local_attn_size", "18", "--sink_size", "6",
                                    "--save_file", str(tmp_path / "r.json"), "--context-policy", "fov"], tmp_path)
    assert p.returncode == 2 and "drop both" in p.stderr and not (tmp_path / "r.json").exists()


def test_the_module_imports_no_model_code_at_top_level():
    """Importable as worldgate.adapters.lingbot_v2_launcher and runnable by the model's python: the standard
    library and numpy at top level; torch and the model's modules only inside the functions that run it."""
    import ast

    tree = ast.parse(LAUNCHER.read_text())
    top = [a.name for n in tree.body if isinstance(n, ast.Import) for a in n.names] + \
        [n.module for n in tree.body if isinstance(n, ast.ImportFrom)]
    assert {m.split(".")[0] for m in top} <= {"__future__", "argparse", "importlib", "json", "os", "sys", "types",
                                              "contextlib", "pathlib", "numpy"}, top


# ------------------------------------------------------------------ the model's own code (gated)


CHECKOUT = _checkout("LINGBOT_WORLD_V2_CHECKOUT", L.COMMIT)
gated = pytest.mark.skipif(CHECKOUT is None, reason="set LINGBOT_WORLD_V2_CHECKOUT to a checkout of "
                                                    f"robbyant/lingbot-world-v2 at {L.COMMIT}")
PROMPT = "A stone courtyard."
IMG = 64  # 64 x 64 image at max_area 64*64: 8 x 8 latents, 4 x 4 = 16 tokens per latent frame, 64 per chunk


def import_model(checkout: Path):
    """The checkout's ``wan`` package on CPU. t5.py:476 calls torch.cuda.current_device() at import; it is answered
    with 0 for the import only."""
    import torch

    try:
        import diffusers  # noqa: F401
        import easydict  # noqa: F401
        import einops  # noqa: F401
        import ftfy  # noqa: F401
        import scipy  # noqa: F401
    except ImportError as e:
        pytest.skip(f"the checkout's requirements are not importable here ({e}); put einops, easydict, ftfy on "
                    "PYTHONPATH")
    if str(checkout) not in sys.path:
        sys.path.insert(0, str(checkout))
    saved = torch.cuda.current_device
    torch.cuda.current_device = lambda: 0
    try:
        import wan.image2video as i2v
        import wan.modules.model_fast as mf
        from wan.configs import WAN_CONFIGS
        from wan.modules.model_fast import WanModelFast
        from wan.utils.fm_solvers_unipc import FlowUniPCMultistepScheduler
    finally:
        torch.cuda.current_device = saved
    assert Path(i2v.__file__).resolve().is_relative_to(checkout.resolve())
    return types.SimpleNamespace(i2v=i2v, mf=mf, WAN_CONFIGS=WAN_CONFIGS, WanModelFast=WanModelFast,
                                 Scheduler=FlowUniPCMultistepScheduler)


def cpu_attention(q, k, v, *args, **kwargs):
    """The flash-attn kernels' result on CPU: softmax(q k^T / sqrt(d)) v over [B, L, N, D], in q's dtype."""
    import torch

    out = torch.nn.functional.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))
    return out.transpose(1, 2).contiguous().type_as(q)


class StubVAE:
    """Encode: every 4th frame (the 4x time stride), 8x8 average pool, 16 channels; decode: 3 channels upsampled.
    ``last`` keeps the latents the pipeline decoded (what the tests compare)."""

    def encode(self, videos):
        import torch

        out = []
        for x in videos:
            x = torch.nn.functional.avg_pool3d(x[:, ::4][None], (1, 8, 8))[0]
            out.append(torch.cat([x * (i + 1) / 6 for i in range(6)])[:16])
        return out

    def decode(self, zs):
        import torch

        self.last = [z.clone() for z in zs]
        return [torch.tanh(z[:3]).repeat_interleave(8, 2).repeat_interleave(8, 3) for z in zs]


def tiny_pipeline(m, *, local_attn_size=-1, sink_size=0, state=None, layers=2, dim=64, heads=4, prompt=PROMPT,
                  seed=0):
    """A ``WanI2VCausal`` of the checkout around its own ``WanModelFast`` at a tiny random configuration.

    ``__init__`` is skipped (it loads T5/VAE checkpoints and puts everything on cuda:N, wan/image2video.py:93-169);
    the attributes it sets are set here, on CPU and in float32. ``local_attn_size``/``sink_size`` reach the model as
    generate.py's flags do (WanModelFast.from_pretrained(local_attn_size=, sink_size=), image2video.py:127-132) and
    the pipeline's kv_size (:619-623)."""
    import torch

    torch.manual_seed(seed)
    model = m.WanModelFast(model_type="i2v", in_dim=36, dim=dim, ffn_dim=2 * dim, freq_dim=32, text_dim=32,
                           out_dim=16, num_heads=heads, num_layers=layers, local_attn_size=local_attn_size,
                           sink_size=sink_size, text_len=512)
    torch.nn.init.normal_(model.head.head.weight, std=0.2)  # init_weights zeroes the head (model_fast.py:680)
    if state is not None:
        model.load_state_dict(state)
    model.eval().requires_grad_(False)
    cfg = m.WAN_CONFIGS["i2v-A14B"]
    p = object.__new__(m.i2v.WanI2VCausal)
    p.infer_mode, p.device, p.config, p.rank, p.t5_cpu, p.init_on_cpu = "causal_fast", torch.device("cpu"), cfg, 0, \
        False, True
    p.num_train_timesteps, p.boundary = cfg.num_train_timesteps, cfg.boundary
    p.param_dtype = p.pipe_dtype = torch.float32
    p.local_attn_size, p.sink_size = local_attn_size, sink_size
    p.vae_stride, p.patch_size = cfg.vae_stride, cfg.patch_size
    p.vae, p.model, p.text_encoder = StubVAE(), model, None
    p.scheduler = m.Scheduler(num_train_timesteps=cfg.num_train_timesteps, shift=1, use_dynamic_shifting=False)
    p.sp_size, p.sample_neg_prompt, p._cross_attn_initialized = 1, cfg.sample_neg_prompt, False
    g = torch.Generator().manual_seed(seed + 1)
    p._t5_cache = {hashlib.sha256(prompt.encode("utf-8")).hexdigest(): [torch.randn(7, 32, generator=g)]}
    return p


GEN = dict(max_area=IMG * IMG, shift=10.0, seed=3, offload_model=False)


@pytest.fixture(scope="module")
def model():
    import torch

    path = list(sys.path)
    m = import_model(CHECKOUT)
    saved = (m.mf.attention, m.mf.flash_attention, torch.get_num_threads())
    m.mf.attention = cpu_attention  # model_fast.py:159 (self-attention)
    m.mf.flash_attention = lambda q, k, v, k_lens=None, **kw: cpu_attention(q, k, v)  # :208 (cross-attention)
    torch.set_num_threads(1)  # tiny tensors: thread start-up costs more than it saves
    m.state = tiny_pipeline(m).model.state_dict()
    yield m
    m.mf.attention, m.mf.flash_attention = saved[:2]
    torch.set_num_threads(saved[2])
    sys.path[:] = path  # the checkout's top-level generate.py must not shadow anything after these tests


@pytest.fixture(scope="module")
def scene(tmp_path_factory):
    from PIL import Image

    d = tmp_path_factory.mktemp("lbw2")
    act = write_action(d / "action", left_then_right())
    img = Image.fromarray((np.random.default_rng(0).random((IMG, IMG, 3)) * 255).astype(np.uint8))
    img.save(d / "image.png")
    return types.SimpleNamespace(dir=d, action=act, img=img, frames=157)


def upstream(m, scene, **flags):
    """The model's own run: its pipeline and loop with generate.py's window flags; the latents it decoded."""
    p = tiny_pipeline(m, state=m.state, **flags)
    p.generate(PROMPT, scene.img, str(scene.action), chunk_size=4, frame_num=scene.frames, **GEN)
    return p.vae.last[0]


def launched(m, scene, name, budget, pipe=None, log=None):
    p = pipe or tiny_pipeline(m, state=m.state)
    _, rows = L.run_pipeline(p, make_policy(name, budget), prompt=PROMPT, img=scene.img, action_path=scene.action,
                             chunk_size=4, frame_num=scene.frames, log_path=log, **GEN)
    return p.vae.last[0], rows


@pytest.fixture(scope="module")
def full(model, scene):
    return upstream(model, scene)  # --local_attn_size -1


@gated
def test_full_kv_is_upstream_with_its_global_cache(model, scene, full):
    import torch

    z, rows = launched(model, scene, "full_kv", None)
    assert z.shape == (16, 40, 8, 8) and torch.isfinite(z).all()
    assert torch.equal(z, full)
    assert [r["context"] for r in rows] == [list(range(k)) for k in range(10)]
    assert rows[-1]["history_tokens"] == 9 * 64


@gated
@pytest.mark.parametrize("name", ["sliding_window", "fov"])
def test_every_policy_with_an_unlimited_budget_is_full_kv(model, scene, full, name):
    import torch

    z, rows = launched(model, scene, name, None)
    assert torch.equal(z, full) and rows[-1]["context"] == list(range(9))


@gated
@pytest.mark.parametrize("budget", [2, 3])
def test_sliding_window_is_upstreams_own_trim(model, scene, full, budget):
    """Budget B chunks (sink included) == ``--local_attn_size 4 (B + 1) --sink_size 4``: the sink is chunk 0, the
    rolled window the B - 1 most recent chunks and the chunk itself (model_fast.py:133-149)."""
    import torch

    theirs = upstream(model, scene, local_attn_size=4 * (budget + 1), sink_size=4)
    ours, rows = launched(model, scene, "sliding_window", budget)
    assert torch.equal(ours, theirs)
    assert not torch.equal(theirs, full)  # the trim changes the rollout: the equality is not vacuous
    assert rows[-1]["context"] == [0, *range(10 - budget, 9)]


@gated
def test_fov_attends_to_exactly_the_chunks_it_chose(model, scene, full, tmp_path):
    """Run FoV at budget 3 three times: as is; with every cached chunk it did NOT choose poisoned (NaN in every
    layer's keys and values) for each forward and restored after; with one chosen chunk poisoned. Only the last
    changes the output, so the attention saw the chosen chunks and nothing else."""
    import torch

    policy = make_policy("fov", 3)
    infos = chunk_infos(np.load(scene.action / "poses.npy").astype(np.float64), 16, 13)  # worldgate's own chunks
    chosen = [sorted(policy.select(infos[:k], infos[k])) if k else [] for k in range(10)]
    assert chosen[9] == [0, 1, 8]  # back at the start view: the departure chunk, not chunk 7 (a window's)

    z, rows = launched(model, scene, "fov", 3, log=tmp_path / "context.jsonl")
    assert [r["context"] for r in rows] == chosen
    assert [json.loads(x) for x in (tmp_path / "context.jsonl").read_text().splitlines()] == rows
    assert torch.isfinite(z).all() and not torch.equal(z, full)
    assert not torch.equal(z, launched(model, scene, "sliding_window", 3)[0])

    def poisoned(which):
        p = tiny_pipeline(model, state=model.state)
        saved = []

        def pre(mod, args, kwargs):
            T = 4 * kwargs["frame_seqlen"]
            k = kwargs["current_start"] // T
            for layer in kwargs["kv_cache"]:
                for j in which(k):
                    for key in ("k", "v"):
                        sl = layer[key][:, j * T:(j + 1) * T]
                        saved.append((sl, sl.clone()))
                        sl.fill_(float("nan"))

        def post(mod, args, kwargs, out):
            while saved:
                sl, keep = saved.pop()
                sl.copy_(keep)

        h1 = p.model.register_forward_pre_hook(pre, with_kwargs=True)
        h2 = p.model.register_forward_hook(post, with_kwargs=True)
        try:
            return launched(model, scene, "fov", 3, pipe=p)[0]
        finally:
            h1.remove()
            h2.remove()

    not_chosen = poisoned(lambda k: [j for j in range(k) if j not in chosen[k]])
    assert torch.equal(not_chosen, z)  # bit for bit: the unchosen chunks' keys/values never reached the attention
    one = poisoned(lambda k: [1] if k == 9 else [])
    assert torch.equal(one[:, :36], z[:, :36]) and not torch.isfinite(one[:, 36:]).all()


def _launcher_cli(model, scene, monkeypatch, tmp_path, argv):
    """The launcher's main() over the checkout's real generate.py (argparse, validation, run_causal, the writer),
    with only the pipeline's construction answered by the tiny one and the 480*832 area by the tiny image's."""
    import torch

    made = []
    real_load = L.load_generate

    def load(checkout):
        up = real_load(checkout)

        def factory(**kw):
            assert kw["infer_mode"] == "causal_fast" and kw["checkpoint_dir"] == "/ckpt"
            made.append(tiny_pipeline(model, state=model.state, local_attn_size=kw["local_attn_size"],
                                      sink_size=kw["sink_size"]))
            return made[-1]

        up.wan = types.SimpleNamespace(WanI2VCausal=factory)
        up.MAX_AREA_CONFIGS = {**up.MAX_AREA_CONFIGS, "480*832": IMG * IMG}
        return up

    monkeypatch.setattr(L, "load_generate", load)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: None)  # generate.py:302, no GPU here
    monkeypatch.setattr(sys, "argv", ["lingbot_v2_launcher.py"])
    out = tmp_path / "out"
    base = ["--size", "480*832", "--ckpt_dir", "/ckpt", "--image", str(scene.dir / "image.png"), "--action_path",
            str(scene.action), "--frame_num", str(scene.frames), "--chunk_size", "4", "--base_seed", "3",
            "--offload_model", "False", "--sample_shift", "10", "--save_dir", str(out), "--save_file",
            str(out / "video.mp4"), "--prompt", PROMPT]
    monkeypatch.chdir(CHECKOUT)
    assert L.main(base + argv) == 0
    assert len(made) == 1
    return made[0].vae.last[0], out


@gated
def test_the_cli_runs_the_checkouts_generate_py(model, scene, full, monkeypatch, tmp_path):
    import torch

    z, out = _launcher_cli(model, scene, monkeypatch, tmp_path / "a", [])  # no policy: generate.py as is
    assert torch.equal(z, full) and (out / "video.mp4").is_file()
    native, _ = _launcher_cli(model, scene, monkeypatch, tmp_path / "b", ["--local_attn_size", "16", "--sink_size",
                                                                           "4"])
    sw, out = _launcher_cli(model, scene, monkeypatch, tmp_path / "c",
                            ["--context-policy", "sliding_window", "--context-budget", "3", "--context-log",
                             str(tmp_path / "c" / "out" / "context.jsonl")])
    assert torch.equal(sw, native) and not torch.equal(sw, full)
    rows = [json.loads(x) for x in (out / "context.jsonl").read_text().splitlines()]
    assert [r["context"] for r in rows] == held_for("sliding_window", 3)[0]
    fov, _ = _launcher_cli(model, scene, monkeypatch, tmp_path / "d", ["--context-policy", "fov",
                                                                        "--context-budget", "3"])
    assert torch.equal(fov, launched(model, scene, "fov", 3)[0])
    with pytest.raises(L.LauncherError, match="drop both"):
        _launcher_cli(model, scene, monkeypatch, tmp_path / "e", ["--local_attn_size", "18", "--sink_size", "6",
                                                                   "--context-policy", "fov"])


@gated
def test_the_checkouts_parser_takes_the_adapters_arguments(model, monkeypatch):
    """generate.py's own parser reads what worldgate's plan passes; the README window (18 / 6) is refused with a
    policy and is no chunk budget (its sink is 1.5 chunks)."""
    monkeypatch.chdir(CHECKOUT)
    up = L.load_generate(CHECKOUT.resolve())
    args = L.parse_model_args(up, PLAN_ARGS + ["--local_attn_size", "18", "--sink_size", "6"], CHECKOUT)
    assert (args.frame_num, args.chunk_size, args.local_attn_size, args.sink_size) == (333, 4, 18, 6)
    assert args.prompt == "A scene --context-policy fov." and args.max_attention_size is None
    with pytest.raises(L.LauncherError, match="drop both"):
        L.check_model_args(args)
    args = L.parse_model_args(up, PLAN_ARGS, CHECKOUT)
    L.check_model_args(args)
    assert up.MAX_AREA_CONFIGS[args.size] == 480 * 832


@gated
def test_the_sequence_parallel_path_is_held_too(model, scene, full, tmp_path):
    """``--ulysses_size N`` swaps in sp_attn_forward_causal / sp_dit_forward_causal (image2video.py:344-348), whose
    attention is sequence_parallel.py:529's ``flash_attention``: the launcher's second target. Run under a
    one-process gloo group with the model's own ``_configure_model(use_sp=True)``: the same equalities hold there, and
    only that target is called."""
    import torch
    import torch.distributed as dist

    import wan.distributed.sequence_parallel as sp

    calls = {"sp": 0, "mf": 0}

    def counted(key, fn):
        def f(*a, **kw):
            calls[key] += 1
            return fn(*a, **kw)
        return f

    saved = (sp.flash_attention, model.mf.attention)
    sp.flash_attention = counted("sp", cpu_attention)
    model.mf.attention = counted("mf", cpu_attention)
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'pg'}", rank=0, world_size=1)
    try:
        def sp_pipe(**flags):
            p = tiny_pipeline(model, state=model.state, **flags)
            p.model = p._configure_model(p.model, use_sp=True, dit_fsdp=False, shard_fn=None,
                                         convert_model_dtype=False)
            return p

        def sp_upstream(**flags):
            p = sp_pipe(**flags)
            p.generate(PROMPT, scene.img, str(scene.action), chunk_size=4, frame_num=scene.frames, **GEN)
            return p.vae.last[0]

        sp_full = sp_upstream()
        assert torch.equal(launched(model, scene, "full_kv", None, pipe=sp_pipe())[0], sp_full)
        ours, rows = launched(model, scene, "sliding_window", 3, pipe=sp_pipe())
        assert torch.equal(ours, sp_upstream(local_attn_size=16, sink_size=4)) and not torch.equal(ours, sp_full)
        fov, rows = launched(model, scene, "fov", 3, pipe=sp_pipe())
        assert rows[9]["context"] == [0, 1, 8] and torch.isfinite(fov).all()
        assert calls["sp"] == 5 * 5 * 10 * 2 and calls["mf"] == 0  # 5 runs x 10 chunks x 5 forwards x 2 layers
    finally:
        dist.destroy_process_group()
        sp.flash_attention, model.mf.attention = saved
    # one process: the Ulysses forward is the plain one, bit for bit, with or without a policy
    assert torch.equal(sp_full, full)
    assert torch.equal(fov, launched(model, scene, "fov", 3)[0])
