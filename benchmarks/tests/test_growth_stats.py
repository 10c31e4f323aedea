"""The pooled request-latency comparison of ``benchmarks/bench_growth.py``: p99 and median of
each side, and the bootstrap interval of the p99 ratio."""

from __future__ import annotations

import random

import pytest

from benchmarks.growth_stats import pooled, quantile


def test_quantile_nearest_rank_from_below() -> None:
    values = [float(v) for v in range(1, 201)]  # 1..200, shuffled
    random.Random(3).shuffle(values)
    assert quantile(values, 0.99) == 199.0  # sorted[int(200 * 0.99)] = sorted[198]
    assert quantile(values, 0.5) == 101.0
    assert quantile([7.0], 0.99) == 7.0


def test_same_distribution_interval_covers_one() -> None:
    rng = random.Random(11)
    grown = [rng.lognormvariate(-3, 0.5) for _ in range(600)]
    fresh = [rng.lognormvariate(-3, 0.5) for _ in range(600)]
    p = pooled(grown, fresh)
    assert (p.grown_n, p.fresh_n) == (600, 600)
    assert p.p99_low < 1 < p.p99_high
    assert p.p99_low <= p.p99_ratio <= p.p99_high
    assert p.p99_high - p.p99_low < 1  # 600 requests a side narrow it well below 2x
    assert pooled(grown, fresh) == p  # seeded: the same interval every time


def test_slower_tail_is_outside_the_interval() -> None:
    rng = random.Random(12)
    fresh = [rng.uniform(0.02, 0.06) for _ in range(500)]
    grown = [v * 1.5 for v in fresh]  # every request 1.5x slower
    p = pooled(grown, fresh)
    assert p.p99_ratio == pytest.approx(1.5)
    assert p.median_ratio == pytest.approx(1.5)
    assert p.p99_low > 1.1  # "within 10 %" is excluded
    assert p.grown_p99 == quantile(grown, 0.99)


def test_empty_side_refused() -> None:
    with pytest.raises(ValueError):
        pooled([], [0.1])
