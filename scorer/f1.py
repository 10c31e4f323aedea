"""ToolCallF1: Ragas 0.4.3's set-based F1 over (name, arguments), rounded to 4 decimals."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from toolscore.scorer.accuracy import flat_calls
from toolscore.scorer.explain import F1_BOTH_EMPTY, not_called_reason, unexpected_reason
from toolscore.scorer.losses import f1_losses
from toolscore.scorer.model import Reference, ToolCall
from toolscore.scorer.nesting import MAX_ARGUMENT_DEPTH, too_deep


def make_hashable(obj: Any, depth: int = 1) -> Any:
    """Ragas's ``_make_hashable``: dicts → frozensets of items, lists/tuples → tuples.

    Refuses values nested deeper than ``MAX_ARGUMENT_DEPTH`` (:class:`NestingError`), where
    Ragas's own recursion would end in a ``RecursionError``.
    """
    if isinstance(obj, dict | list | tuple | set) and depth > MAX_ARGUMENT_DEPTH:
        raise too_deep("tool call arguments")
    if isinstance(obj, dict):
        return frozenset((k, make_hashable(v, depth + 1)) for k, v in obj.items())
    if isinstance(obj, list | tuple):
        return tuple(make_hashable(item, depth + 1) for item in obj)
    if isinstance(obj, set):
        return frozenset(make_hashable(item, depth + 1) for item in obj)
    return obj


def _key(call: ToolCall) -> tuple[str, Any]:
    return (call.name, make_hashable(call.args))


def _keys(calls: Sequence[ToolCall]) -> list[tuple[str, Any]]:
    """Ragas's keys ``(name, _make_hashable(args))`` of ``calls``."""
    try:
        # Equal to make_hashable(args) whenever every value is already hashable (flat args).
        return [(c.name, frozenset(c.args.items())) for c in calls]
    except TypeError:
        return [_key(c) for c in calls]


#: :func:`_f1` of the counts seen so far (a pure function of three small integers).
_RATIOS: dict[tuple[int, int, int], tuple[float, float, float]] = {}


def _f1(tp: int, fp: int, fn: int) -> tuple[float, float, float]:
    """Precision, recall and the rounded F1 of these counts."""
    found = _RATIOS.get((tp, fp, fn))
    if found is not None:
        return found
    precision = tp / (tp + fp) if (tp + fp) > 0 else 0.0
    recall = tp / (tp + fn) if (tp + fn) > 0 else 0.0
    f1 = 2 * precision * recall / (precision + recall) if (precision + recall) > 0 else 0.0
    found = (precision, recall, round(f1, 4))
    if len(_RATIOS) < 4096:
        _RATIOS[(tp, fp, fn)] = found
    return found


@dataclass(frozen=True, slots=True)
class ToolCallF1:
    type: ClassVar[str] = "tool_call_f1"

    def value(self, predicted: Sequence[ToolCall], reference: Reference) -> float:
        if predicted is reference and predicted:  # the very calls expected (parse.read_calls)
            return 1.0
        expected = set(_keys(flat_calls(reference)))
        actual = set(_keys(predicted))
        tp = len(actual & expected)
        return _f1(tp, len(actual) - tp, len(expected) - tp)[2]

    def evaluate(
        self, predicted: Sequence[ToolCall], reference: Reference
    ) -> tuple[float, dict[str, Any]]:
        ref = flat_calls(reference)
        ref_keys = _keys(ref)
        expected = set(ref_keys)
        if predicted is ref:  # the very calls expected (see parse.read_calls)
            pred_keys, actual, tp = ref_keys, expected, len(expected)
        else:
            pred_keys = _keys(predicted)
            actual = set(pred_keys)
            tp = len(actual & expected)
        fp, fn = len(actual) - tp, len(expected) - tp
        precision, recall, f1 = _f1(tp, fp, fn)
        if not fp and not fn and tp:  # every distinct call expected was made, and no other
            return f1, {
                "true_positives": tp,
                "false_positives": 0,
                "false_negatives": 0,
                "precision": precision,
                "recall": recall,
                "reasons": [],
                "losses": [],
            }
        reasons = []
        missing = _distinct_outside(ref, ref_keys, actual) if fn else []
        reasons += [not_called_reason(c.name, c.args) for c in missing]
        extra = _distinct_outside(predicted, pred_keys, expected) if fp else []
        reasons += [unexpected_reason(c.name, c.args) for c in extra]
        if not expected and not actual:
            reasons.append(F1_BOTH_EMPTY)
        return f1, {
            "true_positives": tp,
            "false_positives": fp,
            "false_negatives": fn,
            "precision": precision,
            "recall": recall,
            "reasons": reasons,
            "losses": f1_losses([c.name for c in missing], [c.name for c in extra], f1),
        }

    def options(self) -> dict[str, Any]:
        return {}


def _distinct_outside(
    calls: Sequence[ToolCall], keys: Sequence[tuple[str, Any]], other: set[tuple[str, Any]]
) -> list[ToolCall]:
    """The calls whose keys are not in ``other``, each key once (first occurrence)."""
    seen: set[tuple[str, Any]] = set()
    out: list[ToolCall] = []
    for call, key in zip(calls, keys, strict=True):
        if key not in other and key not in seen:
            seen.add(key)
            out.append(call)
    return out
