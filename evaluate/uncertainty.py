"""How sure a number is: bootstrap intervals on every aggregate, paired comparisons of two runs, seeds.

- :func:`interval` — a 95 % interval for the mean over the unit a benchmark averages (records): the BCa
  bootstrap as ``scipy.stats.bootstrap`` defines it, vectorised (percentile where BCa is undefined), seeded so reruns
  agree.
- :func:`cluster_interval` — for a ratio pooled over segments (WorldMark's columns pool every segment of every video,
  final_master's fm:14-18), a cluster bootstrap over videos: videos are resampled with replacement and the pooled
  ratio recomputed, so segments of one video move together.
- :func:`seeds_interval` — with several seeds per case, the case is the unit: a case's value is its mean over seeds,
  so the interval counts the spread between cases and between seeds (a two-stage bootstrap, cases then seeds).
- :func:`paired` — two runs on their shared cases: the mean paired difference, its interval, a two-sided p-value by the
  paired bootstrap test (differences centred at 0 and resampled), and the smallest difference this case count detects (80 % power, 5 % two-sided, from the
  paired differences' spread); :func:`holm` corrects a family of p-values (Holm-Bonferroni).
- :func:`rank_first` — how often each run has the best mean over case resamples (shared cases).

Everything is a pure function of numbers; the method, level and resample count go into results.json beside each
interval.
"""

from __future__ import annotations

import math

import numpy as np

LEVEL = 0.95
RESAMPLES = 2000
SEED = 0
#: the fewest shared cases a paired test is run on (fewer: the interval only, p None)
MIN_TEST_CASES = 5
#: z for 80 % power and a two-sided 5 % test: the minimum detectable difference is (z_a + z_b) * sd / sqrt(n)
Z_ALPHA, Z_POWER = 1.959963984540054, 0.8416212335729143


def _finite(values) -> np.ndarray:
    a = np.asarray([v for v in values if v is not None], float)
    return a[np.isfinite(a)]


def _describe(low, high, method: str, n: int, resamples: int, level: float) -> dict:
    return {"low": float(low), "high": float(high), "level": level, "method": method, "unit_n": int(n),
            "resamples": int(resamples), "seed": SEED}


def interval(values, level: float = LEVEL, resamples: int = RESAMPLES, seed: int = SEED) -> dict | None:
    """A ``level`` interval for the mean of ``values`` (one per record); None for fewer than 2 values.

    The bias-corrected and accelerated (BCa) bootstrap, as ``scipy.stats.bootstrap(method="BCa")`` computes it (bias
    from the share of resamples below the estimate, acceleration from the jackknife), in one vectorised numpy pass:
    evaluate computes ~40 of these per run, and scipy's per-call overhead alone was a fifth of a rescore. Percentile
    where BCa is undefined (the acceleration's denominator vanishes)."""
    from scipy.special import ndtr, ndtri

    a = _finite(values)
    n = len(a)
    if n < 2:
        return None
    if np.all(a == a[0]):
        return _describe(a[0], a[0], "degenerate (all values equal)", n, 0, level)
    rng = np.random.default_rng(seed)
    boot = a[rng.integers(0, n, size=(resamples, n))].mean(axis=1)
    theta = a.mean()
    alpha = np.array([(1 - level) / 2, (1 + level) / 2])
    with np.errstate(all="ignore"):
        z0 = ndtri((np.sum(boot < theta) + 0.5 * np.sum(boot == theta)) / resamples)
        jack = (a.sum() - a) / (n - 1)
        d = jack.mean() - jack
        den = 6.0 * np.sum(d * d) ** 1.5
        acc = np.sum(d ** 3) / den if den > 0 else np.nan
        za = ndtri(alpha)
        q = ndtr(z0 + (z0 + za) / (1 - acc * (z0 + za)))
    method = "BCa"
    if not np.all(np.isfinite(q)):
        q, method = alpha, "percentile"
    lo, hi = np.quantile(boot, q)
    return _describe(lo, hi, f"bootstrap over records ({method})", n, resamples, level)


def cluster_interval(sums, counts, level: float = LEVEL, resamples: int = RESAMPLES, seed: int = SEED) -> dict | None:
    """A ``level`` interval for ``sum(sums) / sum(counts)`` (a value pooled over segments), resampling clusters
    (videos): ``sums[i]`` is video i's total over its segments, ``counts[i]`` its number of segments."""
    s, c = np.asarray(sums, float), np.asarray(counts, float)
    keep = np.isfinite(s) & np.isfinite(c) & (c > 0)
    s, c = s[keep], c[keep]
    if len(s) < 2:
        return None
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(s), size=(resamples, len(s)))
    stat = s[idx].sum(axis=1) / c[idx].sum(axis=1)
    lo, hi = np.quantile(stat, [(1 - level) / 2, (1 + level) / 2])
    return _describe(lo, hi, "cluster bootstrap over videos (percentile)", len(s), resamples, level)


def seeds_interval(per_case: dict, level: float = LEVEL, resamples: int = RESAMPLES, seed: int = SEED) -> dict | None:
    """``per_case``: case -> its values over seeds. The mean over cases of each case's seed mean, with a two-stage
    bootstrap (cases with replacement, then each drawn case's seeds with replacement): both sources of spread."""
    cases = [np.asarray(_finite(v)) for v in per_case.values()]
    cases = [v for v in cases if len(v)]
    if len(cases) < 2:
        return None
    rng = np.random.default_rng(seed)
    lens = np.array([len(v) for v in cases])
    pad = np.full((len(cases), lens.max()), np.nan)
    for i, v in enumerate(cases):
        pad[i, : len(v)] = v
    ci = rng.integers(0, len(cases), size=(resamples, len(cases)))
    si = (rng.random((resamples, len(cases), lens.max())) * lens[ci][..., None]).astype(int)
    draws = pad[ci[..., None], si]  # (B, cases, seeds): each drawn case's seeds, resampled
    mask = np.arange(lens.max())[None, None, :] < lens[ci][..., None]
    case_means = np.where(mask, draws, 0).sum(-1) / lens[ci]
    stat = case_means.mean(axis=1)
    lo, hi = np.quantile(stat, [(1 - level) / 2, (1 + level) / 2])
    out = _describe(lo, hi, "two-stage bootstrap (cases, then seeds; percentile)", len(cases), resamples, level)
    within = [np.std(v, ddof=1) for v in cases if len(v) > 1]
    out["seed_sd"] = float(np.mean(within)) if within else None  # the mean between-seed spread of a case
    return out


def paired(a: dict, b: dict, level: float = LEVEL, resamples: int = RESAMPLES, seed: int = SEED) -> dict | None:
    """``a``, ``b``: case -> value for two runs. On the shared cases: mean of b - a, its interval (bootstrap over
    cases, percentile), a two-sided p-value by sign flips, and the minimum detectable difference."""
    shared = sorted(k for k in a.keys() & b.keys() if a[k] is not None and b[k] is not None
                    and math.isfinite(a[k]) and math.isfinite(b[k]))
    if len(shared) < 2:
        return None
    d = np.array([b[k] - a[k] for k in shared], float)
    rng = np.random.default_rng(seed)
    mean = float(d.mean())
    idx = rng.integers(0, len(d), size=(resamples, len(d)))
    boot = d[idx].mean(axis=1)
    lo, hi = np.quantile(boot, [(1 - level) / 2, (1 + level) / 2])
    if len(d) < MIN_TEST_CASES:  # a resampling test of 2-4 cases has too few distinct resamples to mean anything
        p = None
    elif np.all(d == d[0]):  # no spread: identical runs (p = 1), or a constant shift no resample can doubt
        p = 1.0 if d[0] == 0 else 1.0 / (resamples + 1)
    else:  # the null: the differences shifted to mean 0, resampled (Efron & Tibshirani's paired bootstrap test)
        null = np.abs((d - mean)[idx].mean(axis=1))
        p = float((1 + np.sum(null >= abs(mean) - 1e-12)) / (resamples + 1))
    sd = float(d.std(ddof=1)) if len(d) > 1 else 0.0
    return {"n": len(d), "mean_diff": mean, "low": float(lo), "high": float(hi), "level": level, "p": p,
            "test": "paired bootstrap (null: differences centred at 0; two-sided)", "resamples": resamples,
            "seed": seed, "testable": p is not None and not np.all(d == 0),
            "mde": float((Z_ALPHA + Z_POWER) * sd / math.sqrt(len(d))), "sd_diff": sd}


def holm(pvalues: dict) -> dict:
    """Holm-Bonferroni adjusted p-values (monotone, capped at 1) for a family ``name -> p``."""
    items = sorted(((p, k) for k, p in pvalues.items() if p is not None), key=lambda t: t[0])
    m, out, running = len(items), {}, 0.0
    for i, (p, k) in enumerate(items):
        running = max(running, min(1.0, (m - i) * p))
        out[k] = running
    return out


def per_case(samples: list[dict], m: str) -> dict:
    """case -> the value of metric ``m`` in a run's sample rows (the mean over seeds where a case has several)."""
    out: dict[str, list] = {}
    for s in samples:
        v = (s.get("scores") or {}).get(m)
        if v is not None and not s.get("error"):
            out.setdefault(str((s.get("tags") or {}).get("seed_of") or s.get("case")), []).append(float(v))
    return {k: float(np.mean(v)) for k, v in out.items()}


def rank_first(per_run: dict, higher: bool = True, resamples: int = RESAMPLES, seed: int = SEED) -> dict | None:
    """``per_run``: run -> {case: value}. Over resamples of the shared cases, the share of resamples in which each
    run has the best mean (ties split)."""
    shared = sorted(set.intersection(*[set(k for k, v in d.items() if v is not None) for d in per_run.values()]))
    if len(per_run) < 2 or len(shared) < 2:
        return None
    names = list(per_run)
    m = np.array([[per_run[n][c] for c in shared] for n in names], float)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(shared), size=(resamples, len(shared)))
    means = m[:, idx].mean(axis=2)  # (runs, B)
    best = means.max(axis=0) if higher else means.min(axis=0)
    wins = (means == best).astype(float)
    wins /= wins.sum(axis=0, keepdims=True)
    return {n: float(w) for n, w in zip(names, wins.mean(axis=1))}


__all__ = ["LEVEL", "RESAMPLES", "cluster_interval", "holm", "interval", "paired", "per_case", "rank_first",
           "seeds_interval"]
