"""The bulk fast path of ``toolscore score``: Ragas-default instances straight from decoded JSON.

:func:`fast_row` builds exactly the row :func:`~toolscore.scorer.rows.score_row` builds (same
keys, same order, same floats, same reasons) for the common case, working on the decoded dicts
without building :class:`~toolscore.scorer.model.ToolCall`
objects or the parsing layer's intermediate tuples. It
answers ``None`` for anything outside that case (an invalid or unusual sample, reference groups,
an empty call list, a missing reference), and the caller then takes the general path, which also
owns every error message. ``tests/scorer/test_bulk.py`` checks the two paths agree byte for byte.

Covered instances: ``tool_call_accuracy`` with Ragas's defaults in ``strict`` order, and
``tool_call_f1``, under any names and in any order.
"""

from __future__ import annotations

from toolscore.scorer.bulk_metrics import (
    accuracy,
    accuracy_value,
    exact_accuracy,
    exact_f1,
    f1,
    f1_value,
    same_text,
)
from toolscore.scorer.nesting import depth_exceeds

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (start-up time)
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    #: Per instance in output order: its name and whether it is F1 (else strict default accuracy).
    Plan = tuple[tuple[str, bool], ...]
    Row = dict[str, Any]

#: The plan of :func:`toolscore.scorer.config.default_config` (checked by the tests).
DEFAULT_PLAN: Plan = (("tool_call_accuracy", False), ("tool_call_f1", True))


def bulk_plan(instances: Mapping[str, Any]) -> Plan | None:
    """The plan for a configuration's instances, or ``None`` if any is not covered."""
    from toolscore.scorer.accuracy import ToolCallAccuracy
    from toolscore.scorer.f1 import ToolCallF1

    plan: list[tuple[str, bool]] = []
    for name, instance in instances.items():
        metric = instance.metric
        if isinstance(metric, ToolCallF1):
            plan.append((name, True))
        elif (
            isinstance(metric, ToolCallAccuracy)
            and metric.is_ragas_default
            and metric.order == "strict"
        ):
            plan.append((name, False))
        else:
            return None
    return tuple(plan)


def _calls(raw: Any) -> list[dict[str, Any]] | None:
    """The calls of a ``tool_calls`` / ``reference_tool_calls`` array if all are plain calls.

    A plain call has exactly the keys ``name`` (a string) and ``args`` (an object), so that
    comparing two call dicts compares (name, arguments), as Ragas's F1 does.
    """
    if type(raw) is not list:
        return None
    try:  # subscripts, not .get(): this runs for every call (a missing key ends here)
        for call in raw:
            if (
                type(call) is not dict
                or len(call) != 2
                or type(call["name"]) is not str
                or type(call["args"]) is not dict
            ):
                return None
            for value in call["args"].values():  # nested arguments: the general path's bound
                if type(value) is dict or type(value) is list:
                    if depth_exceeds(call["args"]):
                        return None
                    break
    except KeyError:
        return None
    return raw


def _predicted(messages: Any) -> list[dict[str, Any]] | None:
    """Every ai message's calls in order, if the messages are valid and ordinary (else None)."""
    if type(messages) is not list:
        return None
    predicted: list[dict[str, Any]] = []
    previous = ""  # Ragas's tool-message rules: see parse._read
    try:  # subscripts, not .get(): this runs for every message (a missing key ends here)
        for message in messages:
            if type(message) is not dict or type(message["content"]) is not str:
                return None
            kind = message["type"]
            raw = None
            if len(message) > 2:  # more than type and content
                metadata = message.get("metadata")
                if metadata is not None and type(metadata) is not dict:
                    return None
                raw = message.get("tool_calls")  # read on ai messages only (below)
            if kind == "ai":
                # None or [] are no calls; anything else must be a list of plain calls
                if raw is not None and _calls(raw) is None:
                    return None
                if raw:
                    # the first message's list itself (the decoded sample is not shared)
                    predicted = predicted + raw if predicted else raw
                    previous = "ai+calls"
                else:
                    previous = "ai"
            elif kind == "human":
                previous = "human"
            elif kind != "tool" or previous != "ai+calls":  # a tool message answers calls
                return None
    except KeyError:
        return None
    return predicted


def fast_row(plan: Plan, obj: Any, details: bool = True) -> Row | None:
    """The successful row of ``obj`` under ``plan``, or ``None`` for the general path."""
    if type(obj) is not dict:
        return None
    pred = _predicted(obj.get("user_input"))
    if not pred:
        return None
    ref: Any = obj.get("reference_tool_calls")
    # Equal to the (checked) predicted calls, the reference is made of plain calls too.
    identical = pred == ref and same_text(pred, ref)
    if not identical and (not ref or _calls(ref) is None):
        return None
    # The other MultiTurnSample fields: anything but absent/null goes the general way.
    if (len(obj) > 3 or (len(obj) == 3 and "id" not in obj)) and (
        obj.get("reference") is not None
        or obj.get("rubrics") is not None
        or obj.get("reference_topics") is not None
    ):
        return None
    row: Row = {"id": obj.get("id")}
    if identical:  # the common case of a perfect prediction: every score is 1.0
        return _perfect_row(plan, ref, row, details)
    if not details:
        for name, is_f1 in plan:
            row[name] = f1_value(pred, ref) if is_f1 else accuracy_value(pred, ref)
        return row
    explanations = {}
    for name, is_f1 in plan:
        if is_f1:
            row[name], explanations[name] = f1(pred, ref)
        else:
            row[name], explanations[name] = accuracy(pred, ref)
    row["details"] = explanations
    return row


def _perfect_row(plan: Plan, ref: list[dict[str, Any]], row: Row, details: bool) -> Row:
    """``row`` completed for predicted calls identical to the reference ``ref``."""
    if not details:
        for name, _ in plan:
            row[name] = 1.0
        return row
    explanations: Row = {}
    for name, is_f1 in plan:
        row[name] = 1.0
        explanations[name] = exact_f1(ref) if is_f1 else exact_accuracy(ref)
    row["details"] = explanations
    return row


__all__ = ["DEFAULT_PLAN", "bulk_plan", "fast_row"]
