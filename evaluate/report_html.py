"""The report's HTML page: pick a case, every model's rollout side by side, synced playback, the commanded path and
phase timeline, and the per-case scores — with everything from the runs shown as text (see report.py).

Under each rollout, why its WorldMark action scores are what they are (``_signals``): the per-frame flow signals Sx and
Srad read from the record's cached flow feature (found through FeatureCache by the record's inputs digest; the report
never computes flow), on the scale WorldMark's scoring reads them (protocol.flow_cache: SEA-RAFT's half-size pixels
unless the run set ``wm_flow_full_scale``), over the commanded segments, with the switches, the channel each segment
is scored on (flow_eval.KEY_FLOW) and WorldMark's stable zones (flow_eval.stable_window on WorldMark's 16 fps time
base, mapped to flow samples as protocol.time_base does). Playback is on the video's real time (sample i at i / fps);
a cursor follows each video and a click seeks. A trace is at most MAX_TRACE_POINTS points (an envelope beyond).
"""

from __future__ import annotations

import base64
import hashlib
import html
import itertools
import json
import logging
import math
import os
import re
import stat
from pathlib import Path

import numpy as np

from worldgate.generate.records import read_meta_reason

from .features import FeatureCache, FeatureError, open_record
from .metrics import METRIC_INFO
from .worldmark.flow_eval import KEY_FLOW, stable_window
from .worldmark.protocol import flow_config, record_keys, time_base

log = logging.getLogger("worldgate.report")


class ReportError(ValueError):
    pass


def _esc(s) -> str:
    """The one place Python-side text from the runs becomes HTML (and the markdown tables, which carry HTML)."""
    return html.escape(str(s), quote=True)


def _single_component(cid) -> bool:
    """A case id that names a folder directly inside the run (no separators, not ``.`` / ``..``)."""
    return isinstance(cid, str) and cid not in ("", ".", "..") and not any(c in cid for c in "/\\\0")


def _inside(path: Path, root: Path) -> bool:
    try:
        path.resolve(strict=True).relative_to(root.resolve(strict=True))
    except (OSError, ValueError, RuntimeError):
        return False
    return True


def _record_dir(run: Path, cid) -> Path | None:
    """``run/cid`` when it is a real folder inside the run; None (warned) when it is a link or points out of it."""
    if not _single_component(cid):
        log.warning("case id %r of %s is not a folder name; its record files are not read", cid, run)
        return None
    rec = run / cid
    if not os.path.lexists(rec):
        return None
    if rec.is_symlink() or not rec.is_dir() or not _inside(rec, run):
        log.warning("skipped record folder %s: a symbolic link or not a folder inside the run "
                    "(the report never follows links out of a run)", rec)
        return None
    return rec


def _record_file(run: Path, rec: Path | None, name: str, notes: list | None = None) -> Path | None:
    """``rec/name`` when it is a regular file inside the run; None when absent, and None with a warning naming the
    file (and a note for the page) when it is a symbolic link, not a regular file, or resolves outside the run."""
    if rec is None:
        return None
    p = rec / name
    if not os.path.lexists(p):
        return None
    if p.is_symlink() or not p.is_file() or not _inside(p, rec) or not _inside(p, run):
        log.warning("skipped %s: a symbolic link or not a regular file inside its run folder %s "
                    "(the report never follows links out of a run)", p, run)
        if notes is not None:
            notes.append(f"{name} skipped: a symbolic link or not a regular file inside the run")
        return None
    return p


def _slug(s, limit: int = 80) -> str:
    """A file name for media/ that means the same in a URL and on every file system (no ``#``, ``?``, ``/``, ``%``);
    a name that had to change gets a short hash of the original so two names cannot collide."""
    s = str(s)
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", s)[:limit]
    if safe != s or safe.startswith("."):
        safe = safe.lstrip(".") + "-" + hashlib.sha1(s.encode("utf-8", "surrogatepass")).hexdigest()[:10]
    return safe


_OPEN = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)


def _publish(src: Path, dst: Path, want: str | None = None) -> str | None:
    """Copy ``src`` to ``dst`` (never a hard link: the report's media are its own, so editing them never edits the
    run), replacing whatever ``dst`` was (a stale video, a planted link); never follows a link at ``src``. The copy
    is hashed as it is made: with ``want`` (the sha256 the record's meta.json records) a file whose content differs is
    not published; without one, a file with other hard links is not either (it may be any file of the machine linked
    in). Returns None when published, else why not."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = dst.with_name(f".{dst.name}.{os.getpid()}.tmp")
    if os.path.lexists(tmp):
        tmp.unlink()
    try:
        fd = os.open(src, _OPEN)
    except OSError as e:
        return f"could not be opened as a regular file ({e.strerror or e})"
    h = hashlib.sha256()
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            return "not a regular file"
        if want is None and st.st_nlink > 1:
            return (f"it has {st.st_nlink} hard links and meta.json records no sha256 to check it against (it may be "
                    "any file linked into the record)")
        try:
            with open(tmp, "xb") as g:
                for b in iter(lambda: f.read(1 << 20), b""):
                    h.update(b)
                    g.write(b)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
    got = h.hexdigest()
    if want is not None and got != want:
        tmp.unlink()
        return (f"its content is not the record's video (sha256 {got[:12]}..., meta.json records {want[:12]}...): "
                "restore the record's video or regenerate the record")
    os.replace(tmp, dst)
    return None


def _recorded_sha(rec: Path, name: str) -> str | None:
    """The sha256 the record's meta.json records for its file ``name`` (read safely), or None."""
    meta, _ = read_meta_reason(rec)
    entry = ((meta or {}).get("files") or {}).get(name) if isinstance((meta or {}).get("files"), dict) else None
    sha = entry.get("sha256") if isinstance(entry, dict) else None
    return sha if isinstance(sha, str) and re.fullmatch(r"[0-9a-f]{64}", sha) else None


def _finite(x):
    """JSON the browser can parse: non-finite numbers become null (JSON has no NaN)."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {str(k): _finite(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_finite(v) for v in x]
    return x


def _script_json(data) -> str:
    """JSON to embed in a ``<script type="application/json">``: no string in it can end the script or open a comment
    (``<``, ``>``, ``&`` and the JS line separators as \\u escapes; JSON.parse reads them back unchanged)."""
    s = json.dumps(_finite(data), allow_nan=False)
    for c, e in (("&", "\\u0026"), ("<", "\\u003c"), (">", "\\u003e"), ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        s = s.replace(c, e)
    return s


def _trajectory(run: Path, rec: Path | None) -> dict | None:
    tjp, pp = _record_file(run, rec, "trajectory.json"), _record_file(run, rec, "poses.npy")
    if tjp is None or pp is None:
        return None
    try:
        tj = json.loads(tjp.read_text())
        poses = np.load(pp, allow_pickle=False).astype(float)
        return {
            "fps": float(tj["fps"]), "n_frames": int(tj["n_frames"]),
            "xz": np.round(poses[:, [0, 2], 3], 3).tolist(),
            "yaw": np.round(np.degrees(np.arctan2(poses[:, 0, 2], poses[:, 2, 2])), 2).tolist(),
            "segments": [{"label": _seg_label(x), "frames": [int(f) for f in x["frames"][:2]]} for x in tj["segments"]],
            "phases": [{"name": str(p["name"]), "frames": [int(f) for f in p["frames"][:2]]} for p in tj["phases"]],
        }
    except (OSError, ValueError, KeyError, TypeError, IndexError) as e:
        log.warning("skipped the commanded path of %s: %s", rec, e)
        return None


def _prompt(run: Path, rec: Path | None) -> str | None:
    mp = _record_file(run, rec, "meta.json")
    if mp is None:
        return None
    try:
        p = (json.loads(mp.read_text()).get("case") or {}).get("prompt")
    except (OSError, ValueError, AttributeError):
        return None
    return None if p is None else str(p)


def _link_video(run: Path, rec: Path | None, name: str, base: Path, out: Path, notes: list) -> str | None:
    """``rec/name`` copied as ``base.mp4`` under media/ (its path relative to ``out``), or None when the record has no
    such regular file inside the run or the file is not the record's own (:func:`_publish`; a note says why)."""
    src = _record_file(run, rec, name, notes)
    if src is None:
        return None
    dst = base.with_name(base.name + ".mp4")
    why = _publish(src, dst, _recorded_sha(rec, name))
    if why:
        log.warning("skipped %s: %s", src, why)
        notes.append(f"{name} skipped: {why}")
        return None
    return dst.relative_to(out).as_posix()


#: the most points one trace of a rollout's signal plot carries (a 10-minute video's 9,600 samples become an envelope)
MAX_TRACE_POINTS = 2000
#: the largest cached flow feature the report reads (a 10-minute 16 fps record's is ~5 MB, its 8x8 grid included)
MAX_FLOW_BYTES = 256 << 20
CHANNEL = {"rad": "srad", "hor": "sx"}


def _envelope(v: np.ndarray, limit: int = MAX_TRACE_POINTS) -> dict:
    """A trace of at most ``limit`` points: every sample where there are few enough, else each of ``(limit - 2) // 2``
    even buckets' minimum and maximum, and the first and last sample, in time order (so no spike is lost). {"i":
    sample indices, "v": values (4 decimals; non-finite ones null)}."""
    v = np.asarray(v, float)
    if len(v) <= limit:
        idx = np.arange(len(v))
    else:
        edges = np.linspace(0, len(v), (limit - 2) // 2 + 1).astype(int)
        picks = {0, len(v) - 1}  # the trace spans the whole timeline
        for lo, hi in itertools.pairwise(edges):
            w = v[lo:hi]
            ok = np.isfinite(w)
            if not ok.any():
                picks.add(int(lo))
                continue
            ww = np.where(ok, w, np.nan)
            picks |= {int(lo) + int(np.nanargmin(ww)), int(lo) + int(np.nanargmax(ww))}
        idx = np.asarray(sorted(picks), int)
    return {"i": idx.tolist(), "v": [round(float(x), 4) if np.isfinite(x) else None for x in v[idx]]}


class _CachedFeature:
    """The cache key of a feature that ``evaluate`` recorded for a sample (``name@version-backend``)."""

    def __init__(self, key: str):
        self._key = key

    def key(self) -> str:
        return self._key


def _flow_key(sample: dict, results: dict) -> str | None:
    key = (sample.get("features") or {}).get("flow") if isinstance(sample.get("features"), dict) else None
    if key is None:
        key = ((results.get("backends") or {}).get("flow") or {}).get("key")
    if not isinstance(key, str) or not re.fullmatch(r"flow@[A-Za-z0-9_.-]+", key):
        return None
    return key


def _load_flow(run: Path, rec: Path, key: str):
    """(the record's cached flow arrays, its RecordView) or (None, why not): found through FeatureCache by the
    record's inputs digest (open_record checks the record against its meta.json first); the cache file must be a
    regular file inside the run."""
    try:
        view = open_record(rec)
    except FeatureError as e:
        return None, f"the record cannot be read ({e})"
    cache = FeatureCache(run / ".features")
    p = cache.path(view, _CachedFeature(key))
    try:
        st = os.lstat(p)
    except OSError:
        return None, f"no flow feature ({key}) is cached for this record: run `worldgate evaluate {run.name}`"
    if p.is_symlink() or not p.is_file() or not _inside(p, run) or any(q.is_symlink() for q in (p.parent, p.parent.parent)):
        log.warning("skipped %s: a symbolic link or not a regular file inside its run %s", p, run)
        return None, "the cached flow feature is a link or not a regular file inside the run: skipped"
    if st.st_size > MAX_FLOW_BYTES:
        return None, f"the cached flow feature is {st.st_size} bytes, over the report's {MAX_FLOW_BYTES}: skipped"
    F = cache.get(view, _CachedFeature(key))
    if F is None or "sx" not in F or "srad" not in F:
        return None, "the cached flow feature is unreadable (no sx/srad arrays)"
    sx, srad = np.asarray(F["sx"]), np.asarray(F["srad"])
    if sx.ndim != 1 or srad.shape != sx.shape or sx.dtype.kind not in "fi" or srad.dtype.kind not in "fi":
        return None, "the cached flow feature's sx/srad are not two 1-D numeric arrays of one length"
    return {"sx": sx.astype(float), "srad": srad.astype(float), "gap": int(np.asarray(F.get("gap", 2)))}, view


def _signals(run: Path, rec: Path | None, sample: dict, results: dict) -> tuple[dict | None, str]:
    """What the plot under a rollout shows, or (None, why not): the record's per-frame flow signals Sx and Srad (from
    its cached flow feature only, on the scale WorldMark's scoring reads them: protocol.flow_cache), its commanded
    segments and switches, and per segment the channel it is scored on (flow_eval.KEY_FLOW) and WorldMark's stable
    zone (flow_eval.stable_window on WorldMark's time base, mapped to samples as protocol.time_base does).

    Times: flow sample i (frame i vs i + gap) sits at the video's real time i / fps; a zone [a, b] in WorldMark's
    seconds covers samples a * time_base .. b * time_base (time_base 16 whatever the video's fps, unless the run set
    wm_time_base_real_fps)."""
    if rec is None:
        return None, "no record folder: no flow signals"
    key = _flow_key(sample, results)
    if key is None:
        return None, "evaluate recorded no flow feature for this record"
    F, view = _load_flow(run, rec, key)
    if F is None:
        return None, view
    P = ((results.get("config") or {}).get("params") or {})
    P = P if isinstance(P, dict) else {}
    full = bool(P.get("wm_flow_full_scale"))
    scale = 1.0 if full else 0.5
    fps = float(view.fps)
    r = {"fps": fps}
    tb = time_base(r, P)
    cfg = flow_config(P, r)
    n = len(F["sx"])
    segs = view.trajectory.get("segments") or []
    keys, why = record_keys(view.trajectory)
    if keys is not None and n < 8:
        keys, why = None, f"{n} flow samples: too short for WorldMark's segments"
    tm = np.arange(n) / tb  # protocol.flow_cache's timeline
    dur = float(tm[-1]) if n else 0.0
    out_segs = []
    for j, s in enumerate(segs):
        frames = [int(f) for f in s["frames"][:2]]
        e = {"label": _seg_label(s), "frames": frames, "key": None, "channel": None, "sign": None,
             "zone": None, "zone_s": None, "zone_n": 0, "span": None}
        if keys is not None:
            k = keys[j]
            a, b = stable_window(j, len(keys), dur, cfg)
            ch, sign = KEY_FLOW[k]
            e.update(key=k, channel=CHANNEL[ch], sign=sign, zone_s=[a, b], zone=[a * tb, b * tb],
                     zone_n=int(((tm >= a) & (tm <= b)).sum()),  # the samples flow_eval.score reads of it
                     span=[j * dur / len(keys) * tb, (j + 1) * dur / len(keys) * tb])
        out_segs.append(e)
    unit = ("px of a 640-wide frame" if full else
            "px, SEA-RAFT's half-size scale (flow of a 640-wide frame / 2), as WorldMark scores it")
    return {
        "fps": fps, "n": n, "gap": F["gap"], "scale": scale, "unit": unit, "time_base": tb,
        "sx": _envelope(F["sx"] * scale), "srad": _envelope(F["srad"] * scale),
        "segments": out_segs, "switches": [e["frames"][0] / fps for e in out_segs[1:]],
        "min_samples": cfg.min_samples,
        "why": "" if keys is not None else why, "feature": key,
    }, ""


def _signals_or_why(run: Path, rec: Path | None, sample: dict, results: dict) -> tuple[dict | None, str]:
    """_signals, with a malformed cache file or trajectory a note (naming what is wrong) instead of a failed report."""
    try:
        return _signals(run, rec, sample, results)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError, OverflowError) as e:
        log.warning("no flow signals for %s: %s: %s", rec, type(e).__name__, e)
        return None, f"no flow signals: {type(e).__name__}: {e}"


def _case_data(runs, media: Path, out: Path) -> dict:
    """Per case: every run's video (copied under media/), commanded path, prompt, phases and per-case scores."""
    cases: dict[str, dict] = {}
    for k, r in enumerate(runs):
        run = r["run"]
        rdir = media / f"{k:02d}-{_slug(r['name'])}"
        for s in r["samples"]:
            cid = s.get("case")
            rec = _record_dir(run, cid)
            cid = str(cid)
            tags = s.get("tags") if isinstance(s.get("tags"), dict) else {}
            entry = cases.setdefault(cid, {"id": cid, "runs": {}, "trajectory": None, "prompt": None, "tags": tags})
            notes: list[str] = []
            base = rdir / _slug(cid)
            vrel, vb = _link_video(run, rec, "video.mp4", base, out, notes), None
            if rec is not None and not os.path.lexists(rec / "video.mp4") and os.path.lexists(rec / "video_a.mp4"):
                # a two-view record: player A and player B
                vrel = _link_video(run, rec, "video_a.mp4", base.with_name(base.name + "-A"), out, notes)
                vb = _link_video(run, rec, "video_b.mp4", base.with_name(base.name + "-B"), out, notes)
            scores = s.get("scores") if isinstance(s.get("scores"), dict) else {}
            if vb:
                sig, sig_note = None, "flow signals are plotted for one-view records"
            else:
                sig, sig_note = _signals_or_why(run, rec, s, r["results"]) if vrel else (None, "")
            entry["runs"][r["name"]] = {
                "video": vrel, "video_b": vb, "notes": notes, "signals": sig, "signals_note": sig_note,
                "error": None if s.get("error") is None else str(s.get("error")),
                "scores": {str(m): float(v) for m, v in scores.items()
                           if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)}}
            if entry["trajectory"] is None:
                entry["trajectory"] = _trajectory(run, rec)
            if entry["prompt"] is None:
                entry["prompt"] = _prompt(run, rec)
    return dict(sorted(cases.items()))


def _seg_label(seg) -> str:
    parts = [str(v) for v in (seg["move"], seg["look"]) if v != "idle"]
    return "+".join(parts) or "hold"


def write_html(runs, out: Path) -> Path:
    media = out / "media"
    data = {
        "runs": [r["name"] for r in runs],
        "metrics": {m: {"name": i["name"], "range": i["range"], "higher": i["higher_is_better"]}
                    for m, i in METRIC_INFO.items()},
        "cases": _case_data(runs, media, out),
        "backend": runs[0]["backend"],
    }
    sha = base64.b64encode(hashlib.sha256(JS.encode()).digest()).decode()
    subs = {"TITLE": _esc("worldgate report: " + ", ".join(r["name"] for r in runs)),
            "CSP": _esc(f"script-src 'sha256-{sha}'; object-src 'none'; base-uri 'none'; form-action 'none'"),
            "DATA": _script_json(data), "SCRIPT": JS}
    page = re.sub(r"__(TITLE|CSP|DATA|SCRIPT)__", lambda m: subs[m.group(1)], HTML)  # one pass: no rescan of data
    p = out / "index.html"
    p.write_text(page)
    return p


HTML = r"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="__CSP__">
<title>__TITLE__</title>
<style>
body{font:14px system-ui,sans-serif;margin:16px;background:#fafafa;color:#222}
#bar{display:flex;gap:12px;align-items:center;flex-wrap:wrap;margin-bottom:10px}
#caseinfo{margin-bottom:10px;font-size:13px;color:#444}
#grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(300px,1fr));gap:10px}
.cell{background:#fff;border:1px solid #ddd;border-radius:6px;padding:6px}
.cell h3{margin:2px 0 6px;font-size:13px}
video{width:100%;background:#000;display:block}
.err{color:#b00;font-size:12px}
#below{display:flex;gap:16px;margin-top:12px;flex-wrap:wrap}
#timeline{flex:1;min-width:420px}
table{border-collapse:collapse;margin-top:12px;font-size:12px}
td,th{border:1px solid #ddd;padding:3px 6px;text-align:right}
th:first-child,td:first-child{text-align:left}
.best{font-weight:bold}
.note{color:#666;font-size:12px;margin-top:4px}
svg.signals{width:100%;height:auto;display:block;margin-top:4px;background:#fff;cursor:crosshair}
.sigcap{color:#555;font-size:11px;margin-top:2px}
</style></head><body>
<h2>__TITLE__</h2>
<div id="bar">
  <label>case <select id="case"></select></label>
  <button id="play">play</button>
  <input id="scrub" type="range" min="0" max="1000" value="0" style="width:260px">
  <span id="time">0.00 s</span>
  <span id="backend"></span>
</div>
<div id="caseinfo"><div id="prompt"></div><div id="tags"></div></div>
<div id="grid"></div>
<div id="below">
  <svg id="path" width="260" height="260" viewBox="0 0 260 260" style="background:#fff;border:1px solid #ddd"></svg>
  <div id="timeline"><svg id="phases" width="100%" height="64"></svg><div id="seginfo"></div></div>
</div>
<table id="scores"></table>
<script id="data" type="application/json">__DATA__</script>
<script>__SCRIPT__</script></body></html>
"""

# The page's script. Text from the runs only ever reaches the page through textContent and setAttribute (el below);
# nothing assigns innerHTML. Its sha256 is the page's Content-Security-Policy: no other script can run.
JS = r"""
"use strict";
const D = JSON.parse(document.getElementById("data").textContent);
const SVG = "http://www.w3.org/2000/svg";
const sel = document.getElementById("case"), grid = document.getElementById("grid");
const playBtn = document.getElementById("play"), scrub = document.getElementById("scrub");
const COLORS = {V:"#9bd", H:"#ccc"};
let videos = [], cur = null, plots = [], raf = 0;
// the one way this page makes elements: attributes via setAttribute, text via textContent
function el(tag, attrs, text, ns){
  const e = ns ? document.createElementNS(ns, tag) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
  if (text !== undefined && text !== null) e.textContent = String(text);
  return e;
}
document.getElementById("backend").textContent = "backend: " + D.backend;
for (const id of Object.keys(D.cases)) { const o = el("option", {}, id); o.value = id; sel.appendChild(o); }
function master(){ return videos.find(v => v.readyState >= 1) || videos[0]; }
function fmt(m, v){ const r = D.metrics[m] ? D.metrics[m].range : ""; return r === "0-100" ? v.toFixed(1) : v.toFixed(3); }
function show(id){
  cur = D.cases[id]; grid.replaceChildren(); videos = []; plots = [];
  document.getElementById("prompt").textContent = cur.prompt ? "prompt: " + cur.prompt : "";
  const tags = Object.entries(cur.tags || {}).map(([k, v]) => k + "=" + (typeof v === "object" ? JSON.stringify(v) : v));
  document.getElementById("tags").textContent = tags.length ? "tags: " + tags.join(", ") : "";
  for (const run of D.runs) {
    const c = el("div", {class: "cell"}); c.appendChild(el("h3", {}, run));
    const e = Object.prototype.hasOwnProperty.call(cur.runs, run) ? cur.runs[run] : null;
    for (const src of e ? [e.video, e.video_b] : []) {
      if (!src) continue;
      const v = el("video"); v.src = src; v.muted = true; v.preload = "auto";
      v.playsInline = true; v.dataset.run = run; c.appendChild(v); videos.push(v);
      if (e.video_b) { v.style.width = "49%"; v.style.display = "inline-block"; v.title = src === e.video ? "player A" : "player B"; }
      v.addEventListener("timeupdate", tick);
      v.addEventListener("play", () => { if (!raf) raf = requestAnimationFrame(loop); });
      v.addEventListener("ended", () => { if (videos.every(x => x.ended || x.paused)) playBtn.textContent = "play"; });
    }
    const own = videos.filter(v => v.dataset.run === run);
    if (e && e.signals && own.length === 1) drawSignals(c, e.signals, own[0]);
    else if (e && e.signals_note) c.appendChild(el("div", {class: "note"}, e.signals_note));
    if (!e) c.appendChild(el("div", {class: "err"}, "no rollout for this case"));
    else {
      if (e.error) c.appendChild(el("div", {class: "err"}, e.error));
      for (const n of e.notes || []) c.appendChild(el("div", {class: "err"}, n));
    }
    grid.appendChild(c);
  }
  drawPath(); drawPhases(); drawScores(); playBtn.textContent = "play"; tick();
}
function tick(){
  const m = master(); if (!m) return;
  for (const v of videos) if (v !== m && v.readyState >= 1 && Math.abs(v.currentTime - m.currentTime) > 0.15) v.currentTime = m.currentTime;
  document.getElementById("time").textContent = m.currentTime.toFixed(2) + " s";
  if (m.duration) scrub.value = Math.round(1000 * m.currentTime / m.duration);
  drawMarker(m.currentTime);
  for (const p of plots) p.cursor(p.video.currentTime);
}
// while anything plays, the cursors follow every animation frame (timeupdate alone fires ~4 times a second)
function loop(){ tick(); raf = videos.some(v => !v.paused && !v.ended) ? requestAnimationFrame(loop) : 0; }
playBtn.onclick = () => {
  const m = master(); if (!m) return;
  if (m.paused) { for (const v of videos) { v.currentTime = m.currentTime; v.play().catch(()=>{}); } playBtn.textContent = "pause"; }
  else { for (const v of videos) v.pause(); playBtn.textContent = "play"; }
};
scrub.oninput = () => { const m = master(); if (!m || !m.duration) return; const t = m.duration * scrub.value / 1000; for (const v of videos) v.currentTime = t; tick(); };
sel.onchange = () => show(sel.value);
// the rollout's flow signals Sx and Srad (S: see report_html._signals) over the commanded segments, with WorldMark's
// stable zones, the switches and a cursor at the video's time; a click seeks every video there
function drawSignals(cell, S, video){
  const VW = 420, VH = 180, L = 34, R = 6, T = 18, B = 30, PW = VW - L - R, PH = VH - T - B;
  const svg = el("svg", {class: "signals", viewBox: `0 0 ${VW} ${VH}`, width: "100%"}, null, SVG);
  const fps = S.fps > 0 ? S.fps : 16, segEnd = Math.max(0, ...S.segments.map(g => g.frames[1]));
  const tmax = Math.max(1 / fps, (S.n + S.gap) / fps, segEnd / fps);
  const X = t => L + PW * Math.max(0, Math.min(1, t / tmax));
  const vals = S.sx.v.concat(S.srad.v).filter(v => v !== null && isFinite(v));
  const ymax = Math.max(1e-6, ...vals.map(Math.abs));
  const Y = v => T + PH / 2 * (1 - v / ymax);
  const COL = {sx: "#1f6fd0", srad: "#e07b00"}, NAME = {sx: "Sx", srad: "Srad"};
  S.segments.forEach((g, j) => {
    const x0 = X(g.frames[0] / fps), x1 = X(g.frames[1] / fps);
    svg.appendChild(el("rect", {class: "seg", x: x0, y: T, width: Math.max(1, x1 - x0), height: PH, fill: j % 2 ? "#f2f2f8" : "#e8eaf4"}, null, SVG));
    const lab = g.key ? `${g.key}: ${NAME[g.channel]}${g.sign > 0 ? "+" : "\u2212"}${g.zone_n < S.min_samples ? " (n/a)" : ""}` : g.label;
    svg.appendChild(el("text", {class: "seglabel", x: x0 + 3, y: T - 6, "font-size": 11}, lab, SVG));
    if (g.zone && g.zone_n > 0) {
      const z0 = X(g.zone[0] / fps), z1 = X(g.zone[1] / fps);
      svg.appendChild(el("rect", {class: "zone", x: z0, y: T, width: Math.max(1, z1 - z0), height: PH, fill: "#3a3", "fill-opacity": 0.16}, null, SVG));
      svg.appendChild(el("rect", {x: z0, y: T + PH - 4, width: Math.max(1, z1 - z0), height: 4, fill: "#3a3"}, null, SVG));
    }
  });
  svg.appendChild(el("line", {x1: L, x2: L + PW, y1: Y(0), y2: Y(0), stroke: "#999", "stroke-width": 0.8}, null, SVG));
  const line = (tr, keep, attrs) => {  // one polyline per run of finite points that keep() accepts
    let pts = [];
    const flush = () => { if (pts.length > 1) svg.appendChild(el("polyline", Object.assign({points: pts.join(" "), fill: "none"}, attrs), null, SVG)); pts = []; };
    tr.i.forEach((i, k) => { const v = tr.v[k]; if (v === null || !keep(i)) flush(); else pts.push(X(i / fps).toFixed(1) + "," + Y(v).toFixed(1)); });
    flush();
  };
  for (const c of ["sx", "srad"]) line(S[c], () => true, {class: "trace-" + c, stroke: COL[c], "stroke-width": 1, "stroke-opacity": 0.75});
  for (const g of S.segments) if (g.channel && g.zone && g.zone_n > 0)  // the samples and channel the segment is scored on
    line(S[g.channel], i => i >= g.zone[0] - 1e-9 && i <= g.zone[1] + 1e-9, {class: "scored", stroke: COL[g.channel], "stroke-width": 3});
  for (const t of S.switches) svg.appendChild(el("line", {class: "switch", x1: X(t), x2: X(t), y1: T - 2, y2: T + PH, stroke: "#222", "stroke-width": 1.2, "stroke-dasharray": "4 2"}, null, SVG));
  const fmtY = v => (Math.abs(v) >= 10 ? v.toFixed(0) : v.toPrecision(2));
  svg.appendChild(el("text", {x: L - 3, y: T + 8, "font-size": 10, "text-anchor": "end"}, "+" + fmtY(ymax), SVG));
  svg.appendChild(el("text", {x: L - 3, y: Y(0) + 3, "font-size": 10, "text-anchor": "end"}, "0", SVG));
  svg.appendChild(el("text", {x: L - 3, y: T + PH, "font-size": 10, "text-anchor": "end"}, "\u2212" + fmtY(ymax), SVG));
  svg.appendChild(el("text", {x: L, y: VH - 16, "font-size": 10}, "0 s", SVG));
  svg.appendChild(el("text", {x: L + PW, y: VH - 16, "font-size": 10, "text-anchor": "end"}, tmax.toFixed(2) + " s", SVG));
  svg.appendChild(el("text", {x: L + PW / 2, y: VH - 16, "font-size": 10, "text-anchor": "middle"}, "video time (pair i, i+" + S.gap + " at i / " + fps + " fps)", SVG));
  svg.appendChild(el("text", {x: L, y: VH - 3, "font-size": 10, fill: COL.sx}, "\u2014 Sx (horizontal)", SVG));
  svg.appendChild(el("text", {x: L + 110, y: VH - 3, "font-size": 10, fill: COL.srad}, "\u2014 Srad (radial)", SVG));
  svg.appendChild(el("text", {x: L + 210, y: VH - 3, "font-size": 10, fill: "#3a3"}, "\u25a0 stable zone", SVG));
  const cur = el("line", {class: "cursor", x1: L, x2: L, y1: T - 2, y2: T + PH, stroke: "#d33", "stroke-width": 2}, null, SVG);
  svg.appendChild(cur);
  svg.addEventListener("click", ev => {
    const r = svg.getBoundingClientRect(); if (!r.width) return;
    const t = Math.max(0, Math.min(tmax, ((ev.clientX - r.left) * VW / r.width - L) / PW * tmax));
    for (const v of videos) v.currentTime = Math.min(t, v.duration || t);
    tick();
  });
  cell.appendChild(svg);
  const cap = `Sx, Srad in ${S.unit}, from the cached feature ${S.feature}; shaded: commanded segments (key: the channel it is scored on, expected sign), dashed: switches, green: WorldMark's stable zones (3 s after / 1 s before a switch on its ${S.time_base} fps time base: sample = t \u00b7 ${S.time_base}), thick: the samples each segment is scored on. Click to seek.`;
  const det = el("details", {class: "sigcap"}); det.appendChild(el("summary", {}, "flow signals: how to read" + (S.why ? " (no stable zones)" : "")));
  det.appendChild(el("div", {}, cap + (S.why ? " No stable zones: " + S.why : ""))); cell.appendChild(det);
  plots.push({video, cursor: t => { const x = X(t); cur.setAttribute("x1", x); cur.setAttribute("x2", x); }});
}
function drawPath(){
  const svg = document.getElementById("path"); svg.replaceChildren();
  const T = cur.trajectory; if (!T || !T.xz.length) return;
  const xs = T.xz.map(p => p[0]), zs = T.xz.map(p => p[1]);
  const span = Math.max(1e-3, Math.max(...xs) - Math.min(...xs), Math.max(...zs) - Math.min(...zs));
  const cx = (Math.max(...xs) + Math.min(...xs)) / 2, cz = (Math.max(...zs) + Math.min(...zs)) / 2;
  const s = 220 / span;
  svg._map = p => [130 + (p[0] - cx) * s, 130 - (p[1] - cz) * s];
  const pts = T.xz.map(p => svg._map(p).join(",")).join(" ");
  svg.appendChild(el("polyline", {points: pts, fill: "none", stroke: "#36c", "stroke-width": 2}, null, SVG));
  svg.appendChild(el("text", {x: 6, y: 14, "font-size": 11}, "commanded path (top view, +z up)", SVG));
  const cam = el("g", {id: "cam"}, null, SVG);
  cam.appendChild(el("circle", {r: 5, fill: "#d33"}, null, SVG));
  cam.appendChild(el("line", {x1: 0, y1: 0, x2: 0, y2: -14, stroke: "#d33", "stroke-width": 2}, null, SVG));
  svg.appendChild(cam);
}
function drawPhases(){
  const svg = document.getElementById("phases"); svg.replaceChildren();
  const T = cur.trajectory; if (!T) return;
  const W = svg.clientWidth || 600, n = T.n_frames || 1;
  for (const p of T.phases) {
    const x0 = W * p.frames[0] / n, x1 = W * p.frames[1] / n, name = String(p.name);
    const col = COLORS[name[0]] || (name[0] === "D" ? "#fc8" : "#8d8");
    svg.appendChild(el("rect", {x: x0, y: 0, width: Math.max(1, x1 - x0), height: 24, fill: col, stroke: "#fff"}, null, SVG));
    svg.appendChild(el("text", {x: x0 + 3, y: 16, "font-size": 11}, name, SVG));
  }
  for (const sg of T.segments) {
    const x0 = W * sg.frames[0] / n, x1 = W * sg.frames[1] / n;
    svg.appendChild(el("rect", {x: x0, y: 28, width: Math.max(1, x1 - x0), height: 22, fill: "#eef", stroke: "#99a"}, null, SVG));
    svg.appendChild(el("text", {x: x0 + 3, y: 43, "font-size": 11}, sg.label, SVG));
  }
  svg.appendChild(el("line", {id: "playhead", x1: 0, y1: 0, x2: 0, y2: 52, stroke: "#d33", "stroke-width": 2}, null, SVG));
  document.getElementById("seginfo").textContent = `${T.n_frames} frames at ${T.fps} fps; phases (top) and commanded segments (bottom)`;
}
function drawMarker(t){
  const T = cur && cur.trajectory; if (!T || !T.xz.length) return;
  const i = Math.max(0, Math.min(T.n_frames - 1, Math.floor(t * T.fps)));
  const svg = document.getElementById("path"), cam = document.getElementById("cam");
  if (cam && svg._map) { const [x, y] = svg._map(T.xz[Math.min(i, T.xz.length - 1)]); cam.setAttribute("transform", `translate(${x},${y}) rotate(${T.yaw[Math.min(i, T.yaw.length - 1)]})`); }
  const ph = document.getElementById("playhead"), W = document.getElementById("phases").clientWidth || 600;
  if (ph) { const x = W * i / (T.n_frames || 1); ph.setAttribute("x1", x); ph.setAttribute("x2", x); }
}
function drawScores(){
  const t = document.getElementById("scores"); t.replaceChildren();
  const has = r => Object.prototype.hasOwnProperty.call(cur.runs, r);
  const ms = Object.keys(D.metrics).filter(m => D.runs.some(r => has(r) && m in cur.runs[r].scores));
  const head = el("tr"); head.appendChild(el("th", {}, "metric"));
  for (const r of D.runs) head.appendChild(el("th", {}, r));
  t.appendChild(head);
  for (const m of ms) {
    const vals = D.runs.map(r => has(r) ? cur.runs[r].scores[m] : undefined);
    const ok = vals.filter(v => v !== undefined).map(v => parseFloat(fmt(m, v)));  // rank what is shown
    const best = new Set(ok).size > 1 ? (D.metrics[m].higher ? Math.max(...ok) : Math.min(...ok)) : null;
    const tr = el("tr"); tr.appendChild(el("td", {}, D.metrics[m].name));
    for (const v of vals) tr.appendChild(v === undefined ? el("td", {}, "n/a")
      : el("td", {class: parseFloat(fmt(m, v)) === best ? "best" : ""}, fmt(m, v)));
    t.appendChild(tr);
  }
}
if (sel.options.length) show(sel.options[0].value);
"""
