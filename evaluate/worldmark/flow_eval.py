"""WorldMark's action scoring (``flow_eval.score``): direction, purity, latency and stability per segment.

Everything starts where WorldMark's perception stops (the flow signals Sx, Srad on its time base and the parallax
samples or amplitudes) and reproduces, value for value, the per-video JSON record its FLOW stage writes.

Reference: AlayaLab/WorldMark @ 26f33a81d3799373fd80ec391d74bb1ae2291e36, ``evaluation/worldmark/`` (MIT); file:line
citations below are as of that commit: fe = flow_eval.py, cv = consistency_v2.py, fm = final_master.py,
vg = vggt_omega_global_c3.py, qa = qalign_batch.py, fb = flow_batch_full.py, pr = protocol.py, wc = wm_config.py.
Defaults reproduce WorldMark exactly, quirks included; each deliberate deviation is a named option (docs/worldmark.md).
tests/evaluate/worldmark/test_worldmark_parity.py holds these functions to golden values printed by WorldMark's own code.
"""
from __future__ import annotations

import dataclasses

import numpy as np

WORLDMARK_COMMIT = "26f33a81d3799373fd80ec391d74bb1ae2291e36"

# ----------------------------------------------------------------------------------------------------------------
# protocol
# ----------------------------------------------------------------------------------------------------------------
#: action id -> key sequence (pr:13-17; = arena_inputs/action_protocol.txt)
ACTION_TABLE = {1: "W", 2: "S", 3: "A", 4: "D", 5: "R", 6: "WS", 7: "LR", 8: "AD", 9: "WR", 10: "SL",
                11: "WSW", 12: "LRL", 13: "WRW", 14: "ADA", 15: "WRS"}
#: key -> (flow channel, expected sign) (fe:21-22): W/S on the radial channel, A/D/L/R on mean horizontal flow
KEY_FLOW = {"W": ("rad", +1), "S": ("rad", -1), "A": ("hor", +1), "D": ("hor", -1), "L": ("hor", +1),
            "R": ("hor", -1)}
#: key -> family (fe:23; fm:6)
KEY_FAMILY = {"W": "fwd", "S": "fwd", "A": "lat", "D": "lat", "L": "yaw", "R": "yaw"}
#: expected sign per key used by consistency_v2 (cv:114); identical to KEY_FLOW's signs
FAM_SIGN = {"W": +1, "S": -1, "A": +1, "D": -1, "L": +1, "R": -1}

FLOW_FPS = 16.0          # fe:19 and cv:27 — hard-coded time base, whatever the video's real frame rate


def keys_of(action_id):
    """Key list of an action (pr:39-40)."""
    return list(ACTION_TABLE[int(action_id)])


def key_channel(Sx, Srad, key):
    """The signed channel a key is scored on (fe:83-85, cv:115-116)."""
    return Srad if KEY_FLOW[key][0] == "rad" else Sx


def _r(x, places, on=True):
    """Python's round() (banker's rounding of the binary value), as WorldMark uses everywhere."""
    return round(x, places) if on else x


# ----------------------------------------------------------------------------------------------------------------
# Action dynamics: flow_eval.score
# ----------------------------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class FlowConfig:
    """Constants of fe.metrics / parallax_score / motion_purity / score.  Defaults = WorldMark."""
    fps: float = FLOW_FPS             # fe:19 time base for every window length below (tm itself comes from the cache)
    trans_pre_s: float = 1.0          # fe:20 stable zone ends 1 s before the next switch (fe:91)
    trans_post_s: float = 3.0         # fe:20 stable zone starts 3 s after the previous switch (fe:90)
    min_samples: int = 3              # fe:115, fe:258 fewer stable samples -> {'na': True}
    stab_percentile: float = 70.0     # fe:120 baseline g = P70 of the (signed) stable-zone signal
    stab_g_floor: float = 1e-6        # fe:121 g <= this -> sustain 0, score 0 (still pooled by fm)
    stab_smooth_s: float = 0.3        # fe:123 zero-padded moving mean, int(0.3*16) = 4 samples, np.convolve 'same'
    stab_lo: float = 0.4              # fe:124 sustain threshold and hiccup entry (x < 0.4 g)
    stab_hi: float = 0.5              # fe:124 hiccup exit (x > 0.5 g)
    hiccup_min_s: float = 0.3         # fe:126 a dip counts if its run (exit sample included) >= int(0.3*16) = 4
    hiccup_tau: float = 0.5           # fe:140 exp(-hr/0.5)
    decay_window_s: float = 3.0       # fe:137 last/first int(3*16) = 48 smoothed samples
    decay_clip: float = 1.2           # fe:139
    decay_ref: float = 0.7            # fe:140 min(1, decay/0.7)
    stab_signed: bool = True          # fe:114 v = sign*channel (signed).  False: |channel| (worldgate 88c415a)
    vref_percentile: float = 75.0     # fe:145-146 v_ref = P75 |channel| + 1e-9
    latency_vref_scope: str = "video"  # fe:145-146 whole video.  "segment": P75 over the new segment's samples
    latency_gate: bool = True         # fe:155 steady-state median <= 0.1 v_ref -> score 0.  False: no gate
    latency_gate_frac: float = 0.1    # fe:155
    latency_thr_frac: float = 0.5     # fe:153 first smoothed v >= 0.5 v_ref
    latency_smooth_s: float = 0.5     # fe:159 int(0.5*16) = 8 samples, np.convolve 'same' over the whole video
    round_outputs: bool = True        # fe:118,141-142,157,166-167,219-221,268-269,287-288 WorldMark's rounding
    weights_from_rounded_p: bool = True  # fe:263,286 p_trans/p_yaw used as weights are the 3-dp rounded ones


def stable_window(j, n, dur, cfg=FlowConfig()):
    """Stable zone [a, b] of segment j of n on the flow timeline 0..dur (fe:88-92).

    Segment j spans [j*dur/n, (j+1)*dur/n] (fe:89) — an even split of the *flow* timeline (dur = tm[-1]), not
    20 s blocks; a switch trims 3 s after it (fe:90) and 1 s before it (fe:91)."""
    lo, hi = j * dur / n, (j + 1) * dur / n
    a = lo + (cfg.trans_post_s if j > 0 else 0.0)
    b = hi - (cfg.trans_pre_s if j < n - 1 else 0.0)
    return a, b


def _moving_mean_same(v, w):
    """np.convolve(v, ones(w)/w, 'same') (fe:123, fe:159): zero-padded; for w=4 output k averages v[k-2..k+1],
    for w=8 v[k-4..k+3]; if len(v) < w the output has length w (numpy swaps the operands)."""
    return np.convolve(v, np.ones(w) / w, mode="same")


def _stability(v, cfg):
    """Motion stability of one stable zone (fe:120-142).  Returns the M4 entry fields (without seg/key)."""
    fps = cfg.fps
    g = float(np.percentile(v, cfg.stab_percentile))
    if g <= cfg.stab_g_floor:
        return {"sustain": 0.0, "score": 0.0}
    w = max(1, int(cfg.stab_smooth_s * fps))
    vs = _moving_mean_same(v, w)
    thr_lo, thr_hi = cfg.stab_lo * g, cfg.stab_hi * g
    sustain = float(np.mean(vs >= thr_lo))
    minlen = max(1, int(cfg.hiccup_min_s * fps))
    events = 0; low = False; run = 0
    for x in vs:                      # hysteresis (fe:127-135)
        if low:
            run += 1                  # the exit sample is counted in the run
            if x > thr_hi:
                if run >= minlen:
                    events += 1
                low = False; run = 0
        elif x < thr_lo:
            low = True; run = 1
    if low and run >= minlen:         # a dip still open at the end counts (fe:135)
        events += 1
    hr = events / max(v.size / fps, 1e-6)
    h = max(1, int(cfg.decay_window_s * fps))
    first = float(np.mean(vs[:h])); last = float(np.mean(vs[-h:]))
    decay = min(max(last / (first + 1e-9), 0.0), cfg.decay_clip)
    score = sustain * np.exp(-hr / cfg.hiccup_tau) * min(1.0, decay / cfg.decay_ref)
    ro = cfg.round_outputs
    return {"sustain": _r(sustain, 3, ro), "hiccups": events, "decay": _r(decay, 3, ro),
            "score": _r(float(score), 3, ro)}


def parallax_fit(px_raw, keys, cfg=FlowConfig()):
    """Depth-parallax split per lateral/yaw segment (fe:207-223).

    Least squares u = a*(1/Z) + b on the cached samples (np.linalg.lstsq, rcond=None); translation amplitude
    |a|*(P95-P5 of 1/Z), rotation amplitude |b|; p_trans = trans/(trans+rot+1e-6); p_yaw = 1 - p_trans (computed
    from the unrounded p_trans, then rounded).  All fields rounded to 3 places (fe:219-221)."""
    ro = cfg.round_outputs
    out = {}
    for j, (iv, uu) in px_raw.items():
        A = np.vstack([iv, np.ones_like(iv)]).T
        a, b = np.linalg.lstsq(A, uu, rcond=None)[0]
        spread = float(np.percentile(iv, 95) - np.percentile(iv, 5))
        trans_amp = abs(float(a)) * spread
        rot_amp = abs(float(b))
        p_trans = trans_amp / (trans_amp + rot_amp + 1e-6)
        out[int(j)] = {"a": _r(float(a), 3, ro), "b_far": _r(float(b), 3, ro),
                       "trans_amp": _r(trans_amp, 3, ro), "rot_amp": _r(rot_amp, 3, ro),
                       "p_trans": _r(p_trans, 3, ro), "p_yaw": _r(1.0 - p_trans, 3, ro),
                       "family": KEY_FAMILY[keys[int(j)]]}
        if not cfg.weights_from_rounded_p:
            out[int(j)]["_p_trans_raw"] = p_trans
            out[int(j)]["_p_yaw_raw"] = 1.0 - p_trans
    return out


def parallax_from_amplitudes(amps, keys, cfg=FlowConfig()):
    """The parallax split from (translation, rotation) amplitudes measured without depth samples (worldgate's classical
    pose model splits the tracked flow into its rotation-induced and parallax parts): the same
    p_trans = trans/(trans+rot+1e-6) and rounding as the fit (fe:215-221). amps: {segment: (trans_amp, rot_amp)}."""
    ro = cfg.round_outputs
    out = {}
    for j, (tr, rot) in amps.items():
        p_trans = float(tr) / (float(tr) + float(rot) + 1e-6)
        out[int(j)] = {"trans_amp": _r(float(tr), 3, ro), "rot_amp": _r(float(rot), 3, ro),
                       "p_trans": _r(p_trans, 3, ro), "p_yaw": _r(1.0 - p_trans, 3, ro),
                       "family": KEY_FAMILY[keys[int(j)]], "source": "amplitudes"}
        if not cfg.weights_from_rounded_p:
            out[int(j)]["_p_trans_raw"] = p_trans
            out[int(j)]["_p_yaw_raw"] = 1.0 - p_trans
    return out


def _pw(px, name, cfg):
    return px["_" + name + "_raw"] if (not cfg.weights_from_rounded_p) else px[name]


def _latency(tm, Sx, Srad, keys, cfg):
    """Response latency at every switch j >= 1 (fe:143-168); none for the first segment."""
    n = len(keys); dur = tm[-1]; fps = cfg.fps; ro = cfg.round_outputs
    vref_x = float(np.percentile(np.abs(Sx), cfg.vref_percentile)) + 1e-9
    vref_rad = float(np.percentile(np.abs(Srad), cfg.vref_percentile)) + 1e-9
    out = []
    for j in range(1, n):
        k = keys[j]; t0 = j * dur / n
        kind, sgn = KEY_FLOW[k]
        v = sgn * key_channel(Sx, Srad, k)
        a, b = stable_window(j, n, dur, cfg)
        sm = (tm >= a) & (tm <= b)
        if cfg.latency_vref_scope == "video":
            vref = vref_rad if kind == "rad" else vref_x
        else:                                           # switch-off variant: the new segment's own P75
            seg = (tm >= j * dur / n) & (tm <= (j + 1) * dur / n)
            vref = float(np.percentile(np.abs(key_channel(Sx, Srad, k)[seg]), cfg.vref_percentile)) + 1e-9
        ss = float(np.median(v[sm])) if sm.sum() > 2 else 0.0      # fe:152
        L = dur / n; thr = cfg.latency_thr_frac * vref
        if cfg.latency_gate and ss <= cfg.latency_gate_frac * vref:   # fe:155-158
            note = "no_response" if ss <= 0 else "weak_response"
            out.append({"t0": _r(t0, 1, ro), "new": k, "latency": _r(L, 2, ro),
                        "ss_ratio": _r(ss / vref, 3, ro), "score": 0.0, "note": note})
            continue
        w = max(1, int(cfg.latency_smooth_s * fps))
        vs = _moving_mean_same(v, w)                    # smoothed across the boundary (whole-video signal)
        win = np.where((tm >= t0) & (tm <= t0 + L))[0]
        lat = L
        for i in win:
            if vs[i] >= thr:
                lat = max(0.0, tm[i] - t0)
                break
        note = "" if lat < L else "below_half_normal"
        e = {"t0": _r(t0, 1, ro), "new": k, "latency": _r(lat, 2, ro), "ss_ratio": _r(ss / vref, 3, ro),
             "score": _r(1 - min(lat, L) / L, 3, ro)}
        if note:
            e["note"] = note
        out.append(e)
    return out


def flow_score(cache, cfg=None, fps=None):
    """fe.score(cache) (fe:273-291): M1 direction, M2 purity, M3 latency, M4 stability, parallax.

    NB WorldMark's numbering: M1 = direction, M2 = purity, M3 = *latency*, M4 = *stability* (fe:169).
    `cache` holds tm, Sx, Srad (float arrays, len NF-2), keys, action and px_raw {seg: (iv, uu)} (fe:231-232,
    fe:244-248).  Segment keys come from the action id (fe:109), parallax families from cache['keys'] (fe:281)."""
    cfg = cfg or FlowConfig()
    if fps is not None:
        cfg = dataclasses.replace(cfg, fps=float(fps))
    ro = cfg.round_outputs
    tm, Sx, Srad = cache["tm"], cache["Sx"], cache["Srad"]
    aid = int(cache["action"]); keys = keys_of(aid) if aid else list(cache["keys"]); n = len(keys); dur = tm[-1]
    m1, m4 = [], []
    for j, k in enumerate(keys):                                        # fe:112-142
        a, b = stable_window(j, n, dur, cfg)
        m = (tm >= a) & (tm <= b)
        sig = key_channel(Sx, Srad, k); sgn = KEY_FLOW[k][1]
        v = sgn * sig[m]
        if v.size < cfg.min_samples:
            m1.append({"seg": j, "key": k, "na": True}); m4.append({"seg": j, "key": k, "na": True})
            continue
        dirc = float(np.mean(v) / (np.mean(np.abs(sig[m])) + 1e-9))    # fe:117
        m1.append({"seg": j, "key": k, "family": KEY_FAMILY[k], "dir": _r(dirc, 3, ro)})
        vst = v if cfg.stab_signed else np.abs(sig[m])
        m4.append({"seg": j, "key": k, **_stability(vst, cfg)})
    m3 = _latency(tm, Sx, Srad, keys, cfg)
    # the fit on depth samples (WorldMark), or the same two amplitudes measured otherwise (worldgate's classical poses)
    PX = cache["px"] if "px" in cache else parallax_fit(cache["px_raw"], list(cache["keys"]), cfg)
    for s in m1:                                                        # fe:282-288
        if s.get("na"):
            continue
        fam = KEY_FAMILY.get(s["key"]); px = PX.get(s["seg"])
        if fam == "lat" and px:
            w = _pw(px, "p_trans", cfg)
        elif fam == "yaw" and px:
            w = _pw(px, "p_yaw", cfg)
        else:
            w = 1.0
        s["type_w"] = _r(w, 3, ro)
        s["dir_gated"] = _r(s["dir"] * w, 3, ro)                        # dir already rounded: double rounding
    m2 = []
    for j, k in enumerate(keys):                                        # fe:251-270
        a, b = stable_window(j, n, dur, cfg)
        m = (tm >= a) & (tm <= b)
        if m.sum() < cfg.min_samples:
            m2.append({"seg": j, "key": k, "na": True}); continue
        sx = float(np.mean(np.abs(Sx[m]))); sr = float(np.mean(np.abs(Srad[m])))
        fam = KEY_FAMILY[k]; px = PX.get(j)
        if fam in ("lat", "yaw") and px:
            lateral = _pw(px, "p_trans", cfg) * sx; yaw = _pw(px, "p_yaw", cfg) * sx
        else:
            lateral = yaw = 0.5 * sx                                    # W/S: |Sx| all off-axis, split evenly
        fwd = sr; tot = lateral + yaw + fwd + 1e-9
        on = {"lat": lateral, "yaw": yaw, "fwd": fwd}[fam]
        m2.append({"seg": j, "key": k, "family": fam, "purity": _r(on / tot, 3, ro),
                   "lat": _r(lateral, 2, ro), "fwd": _r(fwd, 2, ro), "yaw": _r(yaw, 2, ro)})
    for d in PX.values():
        d.pop("_p_trans_raw", None); d.pop("_p_yaw_raw", None)
    return {"action_id": aid, "keys": keys, "M1": m1, "M3": m3, "M4": m4, "M2": m2,
            "parallax": {str(j): d for j, d in PX.items()}}


def flow_record(model, stem, action, cache, cfg=None):
    """The per-video JSON `results_flow{suffix}/{model}__{stem}.json` (fb:28, fb:35-36)."""
    return {"model": model, "stem": stem, "action": int(action), **flow_score(cache, cfg)}


def save_flow_cache(cache, path):
    """Write the FLOW cache npz exactly as fe.save_cache (fe:235-241): tm, Sx, Srad, keys (unicode array),
    action (0-d int), px_segs (sorted int array) and iv_{j}, uu_{j} per parallax segment."""
    flat = {"tm": cache["tm"], "Sx": cache["Sx"], "Srad": cache["Srad"], "keys": np.array(cache["keys"]),
            "action": cache["action"], "px_segs": np.array(sorted(cache["px_raw"].keys()), dtype=int)}
    for j, (iv, uu) in cache["px_raw"].items():
        flat[f"iv_{j}"] = iv; flat[f"uu_{j}"] = uu
    np.savez_compressed(path, **flat)


def load_flow_cache(path):
    """fe.load_cache (fe:244-248)."""
    z = np.load(path, allow_pickle=False)  # keys are a unicode array: no pickles (fe:244 allows them)
    raw = {int(j): (z[f"iv_{j}"], z[f"uu_{j}"]) for j in z["px_segs"]}
    return {"tm": z["tm"], "Sx": z["Sx"], "Srad": z["Srad"], "keys": [str(k) for k in z["keys"]],
            "action": int(z["action"]), "px_raw": raw}

