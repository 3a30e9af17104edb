"""Deterministic synthetic inputs for the WorldMark scoring parity test (pure numpy, no WorldMark imports).

`build_fixtures()` returns every input the WorldMark scoring stages consume *after* perception, for a few
synthetic "videos" in two evaluation splits:

* flow cache (what flow_eval.save_cache stores, fe:235-241): tm, Sx, Srad, keys, action, px_raw {seg: (iv, uu)}
* DINOv2 patch tokens per frame (what consistency_v2.dino_feats_full sees before its normalisation, cv:88-97)
* TransNetV2 single-frame transition probabilities per frame (what c1_hardcut gets after its sigmoid, cv:175)
* an LPIPS stand-in per frame (`lpips_distance`)
* Q-Align raw quality / aesthetics scores (what model.score returns, qa:49-50)
* VGGT-Omega outputs per sampled frame via `c3_prediction` (extrinsics, intrinsics, depth, depth_conf, vg:52-56)

The video *frames* themselves are never needed: every stage only consumes model outputs.  Each video carries a
small integer `vid` so stand-in frames can identify themselves (see run_upstream.py).

Key sequences of the 15 action ids come from WorldMark's protocol.py:13-17 (identical to
arena_inputs/action_protocol.txt).  The flow time base is 16 fps (fe:19, fe:79) whatever the native fps.
"""
import math

import numpy as np


def _elementwise(fn, x):
    """Transcendentals through Python's math (libm) instead of numpy's SIMD kernels, whose last bit differs
    between numpy versions; keeps the fixtures bit-identical under numpy 1.26 and 2.x."""
    x = np.asarray(x, float)
    return np.array([fn(float(v)) for v in x.ravel()], float).reshape(x.shape)

ACTION_KEYS = {1: "W", 2: "S", 3: "A", 4: "D", 5: "R", 6: "WS", 7: "LR", 8: "AD", 9: "WR", 10: "SL",
               11: "WSW", 12: "LRL", 13: "WRW", 14: "ADA", 15: "WRS"}
# channel and expected sign per key (fe:21-22): W/S -> Srad, A/D/L/R -> Sx
KEY_CHAN = {"W": ("rad", +1), "S": ("rad", -1), "A": ("hor", +1), "D": ("hor", -1), "L": ("hor", +1), "R": ("hor", -1)}
FAMILY = {"W": "fwd", "S": "fwd", "A": "lat", "D": "lat", "L": "yaw", "R": "yaw"}
FLOW_FPS = 16.0          # fe:19 — cache tm = arange(N-step)/16 (fe:79)
FLOW_STEP = 2            # fe:70 — frame i vs i+2, so len(Sx) = NF - 2
N_PATCH, EMB_DIM = 4, 16
C3_H, C3_W = 96, 128

SPLITS = ("_real_first", "_style_third")


def _seg(t="good", amp=3.0, lag=0.25, leak=0.08, px=None, **kw):
    d = dict(type=t, amp=amp, lag=lag, leak=leak, px=px)
    d.update(kw)
    return d


def _video_specs():
    """The catalogue.  Every action id 1..15 appears; responses: good, lagging, reversed, frozen, weak, leaky,
    hiccupping, decaying, cut-containing, mutating, gain-asymmetric, undershooting, partial-coverage, tiny."""
    G, B = "MatrixGame2.0", "ToyWM"          # G is renamed by fm NAME_MAP; B is not
    V = []

    def add(split, model, stem, segs, nf=None, fps=16.0, width=1280, mem=None, c3=None, qa=(3.6, 3.1)):
        action = int(stem.split("_")[1])
        keys = ACTION_KEYS[action]
        assert len(segs) == len(keys), stem
        nf = nf if nf is not None else 320 * len(keys) + 1
        V.append(dict(split=split, model=model, stem=stem, action=action, keys=keys, segs=segs, nf=int(nf),
                      native_fps=fps, width=width, mem=dict(mem or {}), c3=dict(c3 or {}), qa=qa))

    s = "_real_first"
    # ---- model G: mostly well behaved ----
    add(s, G, "000_001", [_seg()], qa=(3.9, 3.3))
    add(s, G, "001_003", [_seg(px="trans")], qa=(3.8, 3.4))
    add(s, G, "002_005", [_seg(amp=2.5, px="rot")], qa=(4.0, 3.2))
    add(s, G, "003_006", [_seg(), _seg(lag=0.6)], qa=(3.7, 3.0))
    add(s, G, "004_007", [_seg(px="rot"), _seg(px="rot", lag=0.8)], width=832)
    add(s, G, "005_008", [_seg(px="trans"), _seg("lag", px="trans", lag=2.5)])
    add(s, G, "006_011", [_seg(), _seg("hiccup", lag=0.5), _seg()], mem=dict(mut=[700]))
    add(s, G, "007_012", [_seg(px="rot"), _seg(px="rot"), _seg(px="rot", lag=0.7)], nf=3 * 480 + 1, fps=24.0,
        width=1280)                                    # native 24 fps: the 16 fps time base stretches it
    add(s, G, "008_013", [_seg(), _seg(px="rot"), _seg("decay", tau=5.0)], nf=3 * 400 + 1)
    add(s, G, "009_014", [_seg(px="trans"), _seg(px="trans"), _seg(px="trans")], mem=dict(cut=[500]))
    # ---- model B: misbehaving ----
    add(s, B, "010_002", [_seg("reversed")], qa=(2.1, 1.8))
    add(s, B, "011_004", [_seg("frozen", px="trans")], qa=(1.5, 1.4), c3=dict(na=True))
    add(s, B, "012_009", [_seg(), _seg("weak", px="trans")], qa=(2.6, 2.2))
    add(s, B, "013_010", [_seg(leak=0.9), _seg("lag", px="rot", lag=25.0)], qa=(2.4, 2.0))
    add(s, B, "014_015", [_seg("hiccup", period=2.0, dip=0.7), _seg("decay", px="trans", tau=3.0),
                          _seg("reversed")], mem=dict(mut=[150, 420, 700], drift=0.6), c3=dict(noise=0.15))
    add(s, B, "015_006", [_seg(), _seg(amp=0.9)], mem=dict(drift=0.8))                   # gain gate fails
    add(s, B, "016_008", [_seg(px="trans"), _seg("reversed", px="trans")])               # direction gate fails
    add(s, B, "017_007", [_seg(amp=0.3, px="rot"), _seg(amp=0.3, px="rot")], width=832,   # rotation undershoot
        mem=dict(transnet_error="CUDA error: fixture-injected TransNetV2 failure"))
    add(s, B, "018_011", [_seg(), _seg(), _seg()], nf=3 * 160 + 1, mem=dict(exact_jump=(250, 0.10003)))
    add(s, B, "019_012", [_seg(px="rot"), _seg(px="rot"), _seg(px="rot")], nf=40, fps=0.0)  # tiny clip
    add(s, B, "020_014", [_seg(px="trans", leak=4.0), _seg(px="trans"), _seg(px="trans")],
        mem=dict(end_positive=True, drift=0.4))        # partial coverage; TransNet positive run at the end
    # ---- excluded model (fm EXCLUDE) still counts for the split-wide C1 step (cv:303-316) ----
    add(s, "Open-Oasis", "021_001", [_seg(amp=9.0)])
    add(s, "Open-Oasis", "022_007", [_seg(amp=7.0, px="rot"), _seg(amp=7.0, px="rot")])

    s = "_style_third"
    add(s, G, "000_003", [_seg(px="rot")], qa=(3.5, 3.5))                   # translation rendered as yaw
    add(s, G, "001_007", [_seg(px="rot"), _seg(px="rot")], mem=dict(cut=[200, 401]), width=960)
    add(s, G, "002_014", [_seg(px="trans"), _seg("hiccup", px="trans", period=4.0), _seg(px="trans")],
        mem=dict(drift=0.2))
    add(s, G, "003_009", [_seg(), _seg(px="rot")])
    add(s, B, "004_001", [_seg("frozen")], c3=dict(na=True))
    add(s, B, "005_002", [_seg("frozen")], c3=dict(na=True))
    add(s, B, "006_006", [_seg("reversed"), _seg("reversed")], c3=dict(na=True))  # pooled dir < 0
    # ---- appended last so the earlier videos keep their seeds: a slow pan (sparse C1 samples) with a mutation
    # whose pair ends exactly 8 frames after a (false-positive) TransNet cut -> exercises CUT_GUARD = 8 (fm:60)
    add("_real_first", B, "023_003", [_seg(amp=1.2, px="trans")], mem=dict(mut=[MUT_023], cut_raw=[CUT_023]))
    return V


# chosen from the C1 sample indices of 023_003 (see test_parity.test_cut_guard_fixture): the mutation at frame
# MUT_023 falls in the pair (idx[k], idx[k+1]); TransNet fires on frame CUT_023 so the scene starts (cut frame)
# at CUT_023 + 1 = idx[k] - 8.
MUT_023, CUT_023 = 170, 151


def _signals(spec, rng):
    nf = spec["nf"]; n = nf - FLOW_STEP; keys = spec["keys"]; nk = len(keys)
    tm = np.arange(n) / FLOW_FPS
    dur = tm[-1]
    seg_of = np.minimum((tm / (dur / nk)).astype(int), nk - 1) if n > 1 else np.zeros(n, int)
    ch = {"hor": np.zeros(n), "rad": np.zeros(n)}
    prev_end = {"hor": 0.0, "rad": 0.0}
    for j, k in enumerate(keys):
        sg = spec["segs"][j]; idx = np.where(seg_of == j)[0]
        if len(idx) == 0:
            continue
        tt = (idx - idx[0]) / FLOW_FPS
        kind, sgn = KEY_CHAN[k]; other = "rad" if kind == "hor" else "hor"
        A = sg["amp"]; typ = sg["type"]
        tgt = np.full(len(idx), sgn * A)
        if typ == "reversed":
            tgt = -tgt
        elif typ == "weak":
            tgt = tgt * 0.05
        elif typ == "frozen":
            tgt = tgt * 0.0
        elif typ == "decay":
            tgt = tgt * _elementwise(math.exp, -tt / sg.get("tau", 5.0))
        elif typ == "hiccup":
            per = sg.get("period", 3.0); dip = sg.get("dip", 0.6)
            ph = np.mod(tt, per)
            tgt = np.where((ph > per - dip) & (tt > 1.0), tgt * 0.03, tgt)
        off_tgt = np.full(len(idx), (0.0 if typ == "frozen" else sg["leak"] * A))
        for c, t_ in ((kind, tgt), (other, off_tgt)):
            lag = max(sg["lag"], 1e-6)
            r = np.clip(tt / lag, 0.0, 1.0)
            ch[c][idx] = prev_end[c] * (1 - r) + t_ * r
            prev_end[c] = float(ch[c][idx][-1])
        noise = 1e-3 if typ == "frozen" else 0.06 * A
        ch["hor"][idx] += rng.normal(0, noise, len(idx))
        ch["rad"][idx] += rng.normal(0, noise, len(idx))
    Sx, Srad = ch["hor"], ch["rad"]
    # parallax raw points (what fe._parallax_raw would cache, fe:175-204), only for lat/yaw segments (fe:184)
    px_raw = {}
    for j, k in enumerate(keys):
        if FAMILY[k] not in ("lat", "yaw"):
            continue
        sg = spec["segs"][j]; m = seg_of == j
        mean_u = float(np.mean(Sx[m])) if m.any() else 0.0
        A = max(abs(mean_u), 1e-3); sgn = 1.0 if mean_u >= 0 else -1.0
        kind = sg["px"] or ("trans" if FAMILY[k] == "lat" else "rot")
        iv = rng.uniform(0.05, 0.8, 500)
        if kind == "trans":
            a, b = sgn * A * 2.2, sgn * 0.12 * A
        else:
            a, b = sgn * 0.12 * A, sgn * A
        uu = a * iv + b + rng.normal(0, 0.3 * A, iv.size)
        px_raw[j] = (iv, uu)
    return tm, Sx, Srad, px_raw


def _memory(spec, Sx, Srad, rng):
    """DINOv2 patch tokens [NF, P, D], TransNetV2 probabilities [NF], LPIPS stand-in scalar [NF]."""
    nf = spec["nf"]; mem = spec["mem"]; n = len(Sx)
    cx = np.concatenate([[0.0], np.cumsum(Sx)]); cr = np.concatenate([[0.0], np.cumsum(Srad)])
    f = np.minimum(np.arange(nf), n)           # frame f ~ cumulative motion before flow sample f
    P = np.stack([cx[f], cr[f]], 1)           # [NF, 2] pseudo camera position in flow px
    L = 6
    kv = rng.normal(0, 1, (L, 2)); kv *= (0.004 / np.linalg.norm(kv, axis=1, keepdims=True)) * \
        rng.uniform(0.5, 1.5, (L, 1))
    ph = rng.uniform(0, 2 * np.pi, L)
    arg = P @ kv.T + ph
    phi = np.concatenate([_elementwise(math.cos, arg), _elementwise(math.sin, arg)], 1)          # [NF, 2L]
    M = rng.normal(0, 0.35, (N_PATCH, EMB_DIM, 2 * L))
    mu = rng.normal(0, 1.0, (N_PATCH, EMB_DIM))
    tok = np.einsum("pdl,fl->fpd", M, phi) + mu[None]
    drift = float(mem.get("drift", 0.05))
    walk = np.cumsum(rng.normal(0, 1, (nf, EMB_DIM)), 0) / np.sqrt(320.0)
    tok = tok + drift * walk[:, None, :] * 1.2
    tok = tok + rng.normal(0, 0.02, tok.shape)
    jumps = sorted(list(mem.get("mut", [])) + [c + 1 for c in mem.get("cut", [])])
    for fr in jumps:
        tok[fr:] += rng.normal(0, 1.1, (N_PATCH, EMB_DIM))[None]
    if "exact_jump" in mem:                    # constant embedding with one jump of exactly chosen 1-cos
        fr, dist = mem["exact_jump"]
        th = math.acos(1.0 - dist)
        e0 = np.zeros(EMB_DIM); e0[0] = 1.0
        e1 = np.zeros(EMB_DIM); e1[0] = math.cos(th); e1[1] = math.sin(th)
        tok = np.repeat(e0[None, None], nf, 0).repeat(N_PATCH, 1)
        tok[fr:] = e1[None, None]
    p = 0.002 + 0.01 * rng.random(nf)
    for c in list(mem.get("cut", [])) + list(mem.get("cut_raw", [])):
        p[c] = 0.97
    if mem.get("end_positive"):
        p[-2:] = 0.9
    g = np.cumsum(rng.normal(0, 0.004, nf)) + 0.12
    for fr in jumps:
        g[fr:] += 0.25
    return tok, p, g


def build_fixtures():
    """Return {"flow_fps", "splits": {suffix: [video, ...]}}; each video a dict of numpy inputs (see module doc)."""
    specs = _video_specs()
    out = {"flow_fps": FLOW_FPS, "splits": {s: [] for s in SPLITS}}
    for vid, spec in enumerate(specs, start=1):
        rng = np.random.default_rng(1000 + vid)
        tm, Sx, Srad, px_raw = _signals(spec, rng)
        tok, p, g = _memory(spec, Sx, Srad, rng)
        v = dict(spec)
        v.update(vid=vid, key=f"{spec['model']}__{spec['stem']}",
                 cache={"tm": tm, "Sx": Sx, "Srad": Srad, "keys": list(spec["keys"]), "action": spec["action"],
                        "px_raw": px_raw},
                 dino_tokens=tok, transnet_p=p, lpips_g=g,
                 qalign_quality=float(spec["qa"][0]), qalign_aesthetic=float(spec["qa"][1]))
        out["splits"][spec["split"]].append(v)
    return out


def lpips_distance(video, i, j):
    """Deterministic stand-in for consistency_v2.lpips_dist between frames i and j of `video` (cv:72-75)."""
    g = video["lpips_g"]
    return float(abs(g[i] - g[j]) + 0.05)


def c3_prediction(video, frames):
    """Stand-in VGGT-Omega output for the given frame indices: (extr [K,3,4] w2c, intr [K,3,3], depth [K,H,W],
    conf [K,H,W]), all float32 like the model's `.float()` outputs (vg:53-56).  Deterministic per (vid, frame)."""
    cache = video["cache"]; Sx, Srad = cache["Sx"], cache["Srad"]
    cx = np.concatenate([[0.0], np.cumsum(Sx)]); cr = np.concatenate([[0.0], np.cumsum(Srad)])
    n = len(Sx); H, W = C3_H, C3_W
    noise = float(video["c3"].get("noise", 0.02)); na = bool(video["c3"].get("na", False))
    fx = fy = 100.0; ccx, ccy = W / 2.0, H / 2.0
    yy, xx = np.mgrid[0:H, 0:W]
    E, K, D, C = [], [], [], []
    for f in frames:
        rng = np.random.default_rng(7_000_000 + 10_000 * video["vid"] + int(f))
        q = min(int(f), n)
        Cw = np.array([0.002 * cx[q], 0.0, 0.002 * cr[q]])
        yaw = 0.0005 * cx[q]
        cy_, sy_ = math.cos(float(yaw)), math.sin(float(yaw))
        R = np.array([[cy_, 0, -sy_], [0, 1, 0], [sy_, 0, cy_]])
        t = -R @ Cw
        dc = np.stack([(xx - ccx) / fx, (yy - ccy) / fy, np.ones_like(xx, float)], -1)
        dw = dc @ R                                   # R^T d_c for each pixel
        s = (6.0 + 0.3 * Cw[0] - Cw[2]) / (dw[..., 2] - 0.3 * dw[..., 0])
        depth = s * (1.0 + noise * rng.normal()) * (1.0 + 0.3 * noise * rng.normal(0, 1, (H, W)))
        if na:
            depth = depth * 1.6 ** (f / 16.0)
        Rn = R + noise * 0.05 * rng.normal(0, 1, (3, 3)); tn = t + noise * 0.05 * rng.normal(0, 1, 3)
        E.append(np.concatenate([Rn, tn[:, None]], 1)); K.append(np.array([[fx, 0, ccx], [0, fy, ccy], [0, 0, 1]]))
        D.append(depth); C.append(rng.uniform(0.5, 5.0, (H, W)))
    f32 = lambda a: np.asarray(a, np.float32)
    return f32(E), f32(K), f32(D), f32(C)
