"""Ragas 0.4.3 itself, as the oracle for parity tests (skipped with a reason if not installed).

Ragas is imported on first use, not at collection: the import costs about 4 s of CPU, which a
quick run (``-m "not slow"``, where tests using the oracle are slow) should not pay.
"""

from __future__ import annotations

import asyncio
import functools
import warnings
from importlib import metadata
from types import SimpleNamespace
from typing import Any

import pytest

try:
    RAGAS_VERSION: str | None = metadata.version("ragas")
except metadata.PackageNotFoundError:
    RAGAS_VERSION = None

requires_ragas = pytest.mark.skipif(
    RAGAS_VERSION != "0.4.3",
    reason=(
        "Ragas 0.4.3 is not installed here (install the test extra: ragas==0.4.3 and "
        f"langchain-community<0.4); found {RAGAS_VERSION!r}"
    ),
)


@functools.cache
def _ragas() -> SimpleNamespace:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from ragas.dataset_schema import MultiTurnSample
        from ragas.metrics import ToolCallAccuracy, ToolCallF1
        from ragas.metrics._string import DistanceMeasure, NonLLMStringSimilarity
    return SimpleNamespace(
        MultiTurnSample=MultiTurnSample,
        ToolCallAccuracy=ToolCallAccuracy,
        ToolCallF1=ToolCallF1,
        DistanceMeasure=DistanceMeasure,
        NonLLMStringSimilarity=NonLLMStringSimilarity,
    )


_loop: asyncio.AbstractEventLoop | None = None


def _run(coro: Any) -> Any:
    global _loop
    if _loop is None:
        _loop = asyncio.new_event_loop()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return _loop.run_until_complete(coro)


def build(sample: dict[str, Any]) -> Any:
    """Ragas's own sample; raises (pydantic ValidationError) where Ragas refuses it."""
    return _ragas().MultiTurnSample(**sample)


def accuracy(sample: dict[str, Any], *, strict: bool = True, measure: str | None = None) -> float:
    ragas = _ragas()
    metric = ragas.ToolCallAccuracy(strict_order=strict)
    if measure is not None:
        metric.arg_comparison_metric = ragas.NonLLMStringSimilarity(
            distance_measure=ragas.DistanceMeasure(measure)
        )
    return float(_run(metric._multi_turn_ascore(build(sample), None)))


def f1(sample: dict[str, Any]) -> float:
    return float(_run(_ragas().ToolCallF1()._multi_turn_ascore(build(sample), None)))
