"""One output row per input sample: the shape ``toolscore score`` writes (pure, no I/O).

``{"id": ..., "<instance>": <float|null>, ..., "details": {instance: {...}}}``, plus
``"errors": {instance: "why"}`` when a metric could not score, or ``"error"`` when the sample
itself is unusable (every metric is then ``null``).
"""

from __future__ import annotations

from typing import Any

from scorer.config import ScoringConfig
from scorer.model import SampleError
from scorer.parse import parse_sample


def error_row(config: ScoringConfig, message: str, sample_id: Any = None) -> dict[str, Any]:
    row: dict[str, Any] = {"id": sample_id}
    for name in config.instances:
        row[name] = None
    row["error"] = message
    return row


def score_row(
    config: ScoringConfig, obj: object, *, where: str, details: bool = True
) -> tuple[dict[str, Any], bool]:
    """The row for one decoded sample and whether it is a success (no ``error``/``errors``).

    ``where`` ("line 3", "item 2") prefixes error messages.
    """
    try:
        sample = parse_sample(obj)
    except SampleError as exc:
        sample_id = obj.get("id") if isinstance(obj, dict) else None
        return error_row(config, f"{where}: {exc}", sample_id), False
    row: dict[str, Any] = {"id": sample.id}
    predicted, reference = sample.predicted_tool_calls, sample.reference_tool_calls
    explanations: dict[str, Any] = {}
    errors: dict[str, str] | None = None
    for name, instance in config.instances.items():
        if details:
            result = instance.score(predicted, reference)
            row[name] = result.value
            explanations[name] = result.details
            if result.error is not None:
                if errors is None:
                    errors = {}
                errors[name] = result.error
        else:
            value = instance.value(predicted, reference)
            row[name] = value
            if value is None:
                if errors is None:
                    errors = {}
                errors[name] = instance.score(predicted, reference).error or "not scored"
    if details:
        row["details"] = explanations
    if errors is not None:
        row["errors"] = errors
        return row, False
    return row, True
