"""Ragas 0.4.3 itself, as the oracle for parity tests (skipped with a reason if not importable)."""

from __future__ import annotations

import asyncio
import warnings
from typing import Any

import pytest

try:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import ragas
        from ragas.dataset_schema import MultiTurnSample
        from ragas.metrics import ToolCallAccuracy, ToolCallF1
        from ragas.metrics._string import DistanceMeasure, NonLLMStringSimilarity
    RAGAS_VERSION: str | None = ragas.__version__
    IMPORT_ERROR = ""
except Exception as exc:  # any import failure means: no oracle here
    RAGAS_VERSION = None
    IMPORT_ERROR = f"{type(exc).__name__}: {exc}"

requires_ragas = pytest.mark.skipif(
    RAGAS_VERSION != "0.4.3",
    reason=(
        "Ragas 0.4.3 is not importable here (install the test extra: ragas==0.4.3 and "
        f"langchain-community<0.4); found {RAGAS_VERSION!r} {IMPORT_ERROR}"
    ),
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
    return MultiTurnSample(**sample)


def accuracy(sample: dict[str, Any], *, strict: bool = True, measure: str | None = None) -> float:
    metric = ToolCallAccuracy(strict_order=strict)
    if measure is not None:
        metric.arg_comparison_metric = NonLLMStringSimilarity(
            distance_measure=DistanceMeasure(measure)
        )
    return float(_run(metric._multi_turn_ascore(build(sample), None)))


def f1(sample: dict[str, Any]) -> float:
    return float(_run(ToolCallF1()._multi_turn_ascore(build(sample), None)))
