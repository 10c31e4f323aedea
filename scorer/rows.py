"""One output row per input sample: the shape ``toolscore score`` writes (pure, no I/O).

``{"id": ..., "<instance>": <float|null>, ..., "details": {instance: {...}}}``, plus
``"errors": {instance: "why"}`` when a metric could not score, or ``"error"`` when the sample
itself is unusable (every metric is then ``null``).
"""

from __future__ import annotations

from typing import Any

from toolscore.scorer.config import ScoringConfig
from toolscore.scorer.model import SampleError
from toolscore.scorer.nesting import NestingError
from toolscore.scorer.parse import read_calls


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
        sample_id, predicted, reference = read_calls(obj)
    except SampleError as exc:
        sample_id = obj.get("id") if isinstance(obj, dict) else None
        return error_row(config, f"{where}: {exc}", sample_id), False
    row: dict[str, Any] = {"id": sample_id}
    explanations: dict[str, Any] = {}
    errors: dict[str, str] | None = None
    for name, instance in config.instances.items():
        if reference is None:
            row[name] = None
            explanations[name] = {}
            if errors is None:
                errors = {}
            errors[name] = instance.score(predicted, reference).error or "not scored"
        else:
            try:
                if details:
                    row[name], explanations[name] = instance.evaluate(predicted, reference)
                else:
                    row[name] = instance.metric_value(predicted, reference)
            except NestingError as exc:  # only hand-made or comparator-decoded values get here
                row[name] = None
                explanations[name] = {}
                errors = errors if errors is not None else {}
                errors[name] = str(exc)
    if details:
        row["details"] = explanations
    if errors is not None:
        row["errors"] = errors
        return row, False
    return row, True
