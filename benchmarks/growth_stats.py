"""Pooled request latencies of a grown database against a fresh one (``bench_growth.py``).

One run of 45 s at 2,000 spans/s is under 200 requests, so its p99 is one of its two slowest
requests and the ratio of two such p99s is mostly noise. Instead every request of every run on
a side is pooled; the sides' p99s (and medians) are compared, and a percentile bootstrap
(requests resampled with replacement within each side) gives an interval for the p99 ratio.
"""

from __future__ import annotations

import random
import statistics
from dataclasses import dataclass


def quantile(values: list[float], q: float) -> float:
    """The ``q`` quantile of ``values`` (nearest rank from below: ``sorted[int(n * q)]``)."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


@dataclass(frozen=True)
class Pooled:
    """Grown vs fresh request latencies, every request of every run on a side pooled."""

    grown_n: int
    fresh_n: int
    grown_p99: float
    fresh_p99: float
    grown_median: float
    fresh_median: float
    p99_low: float  # the bootstrap interval of grown_p99 / fresh_p99
    p99_high: float

    @property
    def p99_ratio(self) -> float:
        return self.grown_p99 / self.fresh_p99 if self.fresh_p99 else float("nan")

    @property
    def median_ratio(self) -> float:
        return self.grown_median / self.fresh_median if self.fresh_median else float("nan")


def pooled(
    grown: list[float],
    fresh: list[float],
    resamples: int = 2_000,
    level: float = 0.90,
    seed: int = 1,
) -> Pooled:
    """Pooled p99 and median of each side, and a ``level`` percentile-bootstrap interval of the
    p99 ratio: ``resamples`` times, each side is redrawn with replacement at its own size."""
    if not grown or not fresh:
        raise ValueError("both sides need requests")
    rng = random.Random(seed)
    ratios = []
    for _ in range(resamples):
        g = quantile(rng.choices(grown, k=len(grown)), 0.99)
        f = quantile(rng.choices(fresh, k=len(fresh)), 0.99)
        ratios.append(g / f if f else float("inf"))
    ratios.sort()
    tail = (1 - level) / 2
    return Pooled(
        grown_n=len(grown),
        fresh_n=len(fresh),
        grown_p99=quantile(grown, 0.99),
        fresh_p99=quantile(fresh, 0.99),
        grown_median=statistics.median(grown),
        fresh_median=statistics.median(fresh),
        p99_low=ratios[int(tail * (resamples - 1))],
        p99_high=ratios[round((1 - tail) * (resamples - 1))],
    )
