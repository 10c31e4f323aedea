"""A row of ``benchmarks/bench_growth.py``'s table: each figure grown / fresh with its ratio,
except where the fresh side is too near zero for a ratio to mean anything (disk reads)."""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1]


@pytest.fixture
def bench_growth(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(BENCHMARKS))  # the benchmarks import their siblings bare
    return importlib.import_module("bench_growth")


def _figures(bench: ModuleType, disk_kb: float) -> dict[str, float]:
    figures = {key: 2.0 for key, _, _ in bench.METRICS}
    return {**figures, "disk_kb_per_request": disk_kb, "scored": 1.0}


def _row(bench: ModuleType, grown_disk: float, fresh_disk: float) -> list[str]:
    stats = importlib.import_module("growth_stats")
    pooled = stats.pooled([0.02, 0.03], [0.02, 0.02], resamples=10)
    g, f = _figures(bench, grown_disk), _figures(bench, fresh_disk)
    ratios = {key: g[key] / f[key] if f[key] else float("nan") for key in g}
    return str(bench._row(5_000_000, g, f, ratios, pooled)).split(" | ")


def test_a_fresh_side_reading_nothing_from_disk_gets_no_ratio(bench_growth: ModuleType) -> None:
    cells = _row(bench_growth, grown_disk=182.0, fresh_disk=0.2)
    assert cells[-1] == "182 / 0 (no ratio)"
    assert cells[-2] == "2 / 2 (1.00x)"  # the other figures keep theirs


def test_disk_reads_on_both_sides_get_their_ratio(bench_growth: ModuleType) -> None:
    assert _row(bench_growth, grown_disk=180.0, fresh_disk=90.0)[-1] == "180 / 90 (2.00x)"
