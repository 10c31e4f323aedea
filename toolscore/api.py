"""The Python API: score a Ragas sample, or a list of calls, from a notebook or a test suite.

The metric instances are the CLI's: :func:`load_metrics` reads the same YAML/JSON file as
``toolscore score --config`` and ``serve --config``, and without a file gives the defaults
(``tool_call_accuracy`` and ``tool_call_f1``, numerically identical to Ragas 0.4.3).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from toolscore.scorer.config import MetricInstance, ScoringConfig, default_config, load_config
from toolscore.scorer.model import Reference, SampleError, ToolCall
from toolscore.scorer.parse import parse_reference, parse_tool_call, read_calls

#: A call as the API takes it: a :class:`ToolCall` or a ``{"name": ..., "args": {...}}`` dict.
CallLike = ToolCall | Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Result:
    """One metric instance's verdict on one sample.

    ``score`` is in [0, 1], or ``None`` when the sample could not be scored (``error`` says
    why). ``details`` is the explanation ``toolscore score`` writes (pairs, argument scores);
    ``reasons`` its sentences on every lost point.
    """

    metric: str
    type: str
    score: float | None
    details: Mapping[str, Any]
    error: str | None

    @property
    def reasons(self) -> tuple[str, ...]:
        return tuple(self.details.get("reasons", ()))

    def explain(self) -> str:
        """A one-paragraph explanation, for an assertion message or a notebook cell."""
        if self.score is None:
            return f"{self.metric}: not scored: {self.error}"
        why = "; ".join(self.reasons) or "every call as expected"
        return f"{self.metric} = {self.score:g}: {why}"


def load_metrics(path: str | Path | None = None) -> ScoringConfig:
    """The metric instances of a configuration file, or the Ragas defaults without one."""
    return default_config() if path is None else load_config(path)


def score_sample(
    sample: Mapping[str, Any] | Any,
    config: ScoringConfig | None = None,
    *,
    metrics: Iterable[str] | None = None,
) -> dict[str, Result]:
    """Score one Ragas ``MultiTurnSample`` (a dict as in a JSONL file, or a Ragas object).

    Raises :class:`toolscore.scorer.SampleError` when the sample is malformed (what Ragas
    would refuse), with the offending path in the message.
    """
    _, predicted, reference = read_calls(_sample_dict(sample))
    return _score(predicted, reference, config, metrics)


def score_calls(
    predicted: Sequence[CallLike],
    reference: Sequence[CallLike | Sequence[CallLike]],
    config: ScoringConfig | None = None,
    *,
    metrics: Iterable[str] | None = None,
) -> dict[str, Result]:
    """Score the calls an agent made against the reference calls (groups as lists, for
    ``order: grouped``)."""
    calls = tuple(_call(c, f"predicted[{i}]") for i, c in enumerate(predicted))
    return _score(calls, _reference(reference), config, metrics)


def assert_tool_calls(
    predicted: Sequence[CallLike] | Mapping[str, Any] | Any,
    reference: Sequence[CallLike | Sequence[CallLike]] | None = None,
    *,
    metric: str = "tool_call_accuracy",
    threshold: float = 1.0,
    config: ScoringConfig | None = None,
) -> Result:
    """Fail (``AssertionError`` with the explanation) unless ``metric`` scores at least
    ``threshold``. ``predicted`` is a list of calls with ``reference``, or a whole Ragas
    sample without it. Returns the result when it passes."""
    if reference is None:
        results = score_sample(predicted, config, metrics=(metric,))
    else:
        results = score_calls(
            cast(Sequence[CallLike], predicted), reference, config, metrics=(metric,)
        )
    result = results[metric]
    if result.score is None or result.score < threshold:
        raise AssertionError(f"{result.explain()} (needed >= {threshold:g})")
    return result


def _score(
    predicted: Sequence[ToolCall],
    reference: Reference | None,
    config: ScoringConfig | None,
    metrics: Iterable[str] | None,
) -> dict[str, Result]:
    return {i.name: _result(i, predicted, reference) for i in _instances(config, metrics)}


def _result(
    instance: MetricInstance, predicted: Sequence[ToolCall], reference: Reference | None
) -> Result:
    score = instance.score(predicted, reference)
    return Result(instance.name, instance.type, score.value, score.details, score.error)


def _instances(config: ScoringConfig | None, names: Iterable[str] | None) -> list[MetricInstance]:
    instances = (config or default_config()).instances
    if names is None:
        return list(instances.values())
    chosen = list(names)
    unknown = [n for n in chosen if n not in instances]
    if unknown:
        raise KeyError(f"no metric instance named {unknown[0]!r}; known: {', '.join(instances)}")
    return [instances[n] for n in chosen]


def _sample_dict(sample: Mapping[str, Any] | Any) -> Any:
    """A Ragas object (pydantic) as the dict its ``to_jsonl`` would write; dicts as they are."""
    dump = getattr(sample, "model_dump", None)
    return dump(exclude_none=True) if callable(dump) else sample


def _call(call: CallLike, path: str) -> ToolCall:
    return call if isinstance(call, ToolCall) else parse_tool_call(call, path)


def _reference(items: Sequence[CallLike | Sequence[CallLike]]) -> Reference:
    if all(isinstance(i, ToolCall) for i in items):
        return tuple(items)  # type: ignore[arg-type]
    plain = [
        [_as_dict(c) for c in i] if isinstance(i, list | tuple) else _as_dict(i) for i in items
    ]
    return parse_reference(plain)


def _as_dict(call: Any) -> Any:
    return {"name": call.name, "args": dict(call.args)} if isinstance(call, ToolCall) else call


__all__ = [
    "Result",
    "SampleError",
    "ToolCall",
    "assert_tool_calls",
    "load_metrics",
    "score_calls",
    "score_sample",
]
