"""Intervals and paired tests (evaluate/uncertainty.py), checked by simulation against known means."""

import numpy as np
import pytest

from worldgate.evaluate.uncertainty import cluster_interval, holm, interval, paired, rank_first, seeds_interval

DRAWS = 500


def test_record_interval_covers_the_mean_95_percent_of_the_time():
    rng = np.random.default_rng(11)
    hits = 0
    for _ in range(DRAWS):
        x = rng.normal(70.0, 12.0, size=40)
        ci = interval(x, resamples=999)
        hits += ci["low"] <= 70.0 <= ci["high"]
    assert 0.93 <= hits / DRAWS <= 0.97, hits / DRAWS


def test_cluster_interval_covers_the_pooled_mean_95_percent_of_the_time():
    """Segments of one video share that video's offset (as WorldMark's pooled columns do): resampling videos keeps
    them together, and the interval for the pooled ratio covers the true mean."""
    rng = np.random.default_rng(12)
    hits = 0
    for _ in range(DRAWS):
        counts = rng.integers(2, 7, size=30)
        offsets = rng.normal(0.0, 8.0, size=30)
        sums = np.array([np.sum(60.0 + o + rng.normal(0, 5.0, size=c)) for o, c in zip(offsets, counts)])
        ci = cluster_interval(sums, counts, resamples=999)
        hits += ci["low"] <= 60.0 <= ci["high"]
    assert 0.93 <= hits / DRAWS <= 0.97, hits / DRAWS


def test_two_stage_interval_counts_seed_spread():
    rng = np.random.default_rng(13)
    cases = {f"c{i}": list(50 + rng.normal(0, 5) + rng.normal(0, 3, size=3)) for i in range(20)}
    one_seed = interval([v[0] for v in cases.values()])
    both = seeds_interval(cases)
    assert both["seed_sd"] == pytest.approx(3.0, abs=0.8)
    assert both["low"] < np.mean([np.mean(v) for v in cases.values()]) < both["high"]
    assert one_seed["high"] - one_seed["low"] > 0


def test_paired_test_finds_a_real_difference_and_not_a_null_one():
    rng = np.random.default_rng(14)
    base = {f"c{i}": float(v) for i, v in enumerate(rng.normal(60, 10, size=30))}
    shifted = {k: v - 5 + rng.normal(0, 2) for k, v in base.items()}
    noise = {k: v + rng.normal(0, 2) for k, v in base.items()}
    r = paired(base, shifted)
    assert r["n"] == 30 and r["p"] < 0.001 and r["high"] < 0 and r["low"] < r["mean_diff"] < r["high"]
    assert paired(base, noise)["p"] > 0.05
    assert 0 < r["mde"] < 5
    same = paired(base, dict(base))
    assert same["p"] == 1.0 and same["mean_diff"] == 0.0 and not same["testable"]
    # only shared cases count, and fewer than 5 get an interval but no test
    few = paired(base, {"c0": 1.0, "c1": 2.0, "zz": 3.0})
    assert few["n"] == 2 and few["p"] is None and not few["testable"]


def test_holm_is_monotone_and_capped():
    adj = holm({"a": 0.01, "b": 0.04, "c": 0.03, "d": 0.5})
    assert adj == pytest.approx({"a": 0.04, "c": 0.09, "b": 0.09, "d": 0.5})
    assert holm({"a": 0.6, "b": 0.7}) == {"a": 1.0, "b": 1.0}


def test_rank_first_prefers_the_clearly_better_run():
    rng = np.random.default_rng(15)
    a = {f"c{i}": float(v) for i, v in enumerate(rng.normal(60, 5, size=25))}
    b = {k: v + 10 for k, v in a.items()}
    c = {k: v + 9.9 + rng.normal(0, 3) for k, v in a.items()}
    r = rank_first({"a": a, "b": b, "c": c})
    assert r["a"] == 0.0 and abs(sum(r.values()) - 1.0) < 1e-9 and r["b"] > 0.5 and 0.05 < r["c"] < 0.5
    assert rank_first({"a": a, "b": b}, higher=False)["a"] == 1.0


def test_degenerate_and_tiny_inputs():
    assert interval([5.0]) is None and interval([]) is None
    ci = interval([3.0, 3.0, 3.0])
    assert ci["low"] == ci["high"] == 3.0
    assert interval([1.0, None, 2.0, float("nan")])["unit_n"] == 2
    ci = interval([1.0, 2.0, 3.0, 4.0])
    assert ci == interval([1.0, 2.0, 3.0, 4.0])  # seeded: reruns agree
