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

from orjson import dumps as _dumps

from toolscore.scorer.explain import (
    length_reason,
    names_differ_reason,
    not_called_reason,
    pair_reason,
    unexpected_reason,
    unmatched_reason,
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
                if kind == "ai":
                    raw = message.get("tool_calls")
            if kind == "ai":
                if raw:
                    if _calls(raw) is None:
                        return None
                    # the first message's list itself (the decoded sample is not shared)
                    predicted = predicted + raw if predicted else raw
                    previous = "ai+calls"
                elif raw is None or raw == []:
                    previous = "ai"
                else:
                    return None
            elif kind == "tool":
                if previous != "ai+calls":
                    return None
            elif kind == "human":
                previous = "human"
            else:
                return None
    except KeyError:
        return None
    return predicted


def _accuracy(pred: list[dict[str, Any]], ref: list[dict[str, Any]]) -> tuple[float, Row]:
    """``ToolCallAccuracy._evaluate_default`` in strict order, on dicts (both lists non-empty).

    Strict pairs are (i, i): the unmatched calls are the positions whose names differ and
    the longer list's tail, known without the general path's sets.
    """
    n_p, n_r = len(pred), len(ref)
    score = 0.0
    pairs: list[Row] = []
    reasons: list[str] = []
    differ: list[int] = []  # positions whose names differ
    i = -1
    for expected, got in zip(ref, pred, strict=False):
        i += 1
        name = expected["name"]
        if name != got["name"]:
            differ.append(i)
            continue
        g_args, e_args = got["args"], expected["args"]
        if g_args == e_args and _same_text(g_args, e_args):  # every argument matches
            pairs.append(
                {
                    "expected": i,
                    "predicted": i,
                    "name": name,
                    "score": 1.0,
                    "args": dict.fromkeys(e_args, 1.0),
                }
            )
            score += 1.0
            continue
        per_arg: dict[str, float] = {}
        if e_args:
            total = 0.0
            lost: list[str] = []
            for key, value in e_args.items():
                if key in g_args and str(g_args[key]) == str(value):
                    per_arg[key] = 1.0
                    total += 1.0
                else:
                    per_arg[key] = 0.0
                    lost.append(key)
            one = total / len(e_args)
            if lost:
                reasons.append(pair_reason(name, e_args, g_args, lost))
        else:  # not identical, so the prediction has arguments
            one = 0.0
            reasons.append(pair_reason(name, e_args, g_args, ()))
        score += one
        pairs.append({"expected": i, "predicted": i, "name": name, "score": one, "args": per_arg})
    if n_p == n_r and not differ:
        return min(1.0, max(0.0, score / n_r)), {
            "predicted_count": n_p,
            "expected_count": n_r,
            "aligned": True,
            "pairs": pairs,
            "unmatched_expected": [],
            "unmatched_predicted": [],
            "reasons": reasons,
        }
    return 0.0, _misaligned(pred, ref, pairs, reasons, differ, i + 1)


def _misaligned(
    pred: list[dict[str, Any]],
    ref: list[dict[str, Any]],
    pairs: list[Row],
    reasons: list[str],
    differ: list[int],
    compared: int,
) -> Row:
    """``_accuracy``'s explanation when the strict gate failed (score 0)."""
    n_p, n_r = len(pred), len(ref)
    # pairing.in_order's reason: a length mismatch, else the first differing name
    if n_p != n_r:
        reasons.insert(0, length_reason(n_p, n_r))
    else:
        ref_names = [c["name"] for c in ref]
        reasons.insert(0, names_differ_reason(differ[0], ref_names, [c["name"] for c in pred]))
    unmatched_expected = differ + list(range(compared, n_r))
    unmatched_predicted = differ + list(range(compared, n_p))
    for r in unmatched_expected:
        reasons.append(unmatched_reason(ref[r]["name"], ref[r]["args"]))
    for p in unmatched_predicted:
        reasons.append(unexpected_reason(pred[p]["name"], pred[p]["args"]))
    return {
        "predicted_count": n_p,
        "expected_count": n_r,
        "aligned": False,
        "pairs": pairs,
        "unmatched_expected": unmatched_expected,
        "unmatched_predicted": unmatched_predicted,
        "reasons": reasons,
    }


def _distinct(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The calls without repeats, first occurrences in order.

    Plain calls compare as Ragas's F1 keys do: ``(name, frozenset(args.items()))`` (or its
    ``_make_hashable`` form) are equal exactly when the names and the argument dicts are
    equal, for decoded JSON values (equal values hash equally; json's NaN is one object). A
    list scan in C is cheaper than building those keys for a handful of calls.
    """
    out: list[dict[str, Any]] = []
    for call in calls:
        if call not in out:
            out.append(call)
    return out


#: ``_ratios`` of the counts seen so far (a pure function of three small integers).
_RATIOS: dict[tuple[int, int, int], tuple[float, float, float]] = {}


def _ratios(tp: int, fp: int, fn: int) -> tuple[float, float, float]:
    """Precision, recall and the rounded F1 of ``ToolCallF1`` for these counts."""
    precision = tp / (tp + fp) if (tp + fp) > 0 else 0.0
    recall = tp / (tp + fn) if (tp + fn) > 0 else 0.0
    f1 = 2 * precision * recall / (precision + recall) if (precision + recall) > 0 else 0.0
    found = (precision, recall, round(f1, 4))
    if len(_RATIOS) < 4096:
        _RATIOS[(tp, fp, fn)] = found
    return found


def _f1(pred: list[dict[str, Any]], ref: list[dict[str, Any]]) -> tuple[float, Row]:
    """``ToolCallF1.evaluate`` on plain call dicts."""
    expected, actual = _distinct(ref), _distinct(pred)
    missing: list[dict[str, Any]] = []
    for call in expected:
        if call not in actual:
            missing.append(call)
    fn = len(missing)
    tp = len(expected) - fn
    fp = len(actual) - tp
    precision, recall, f1 = _RATIOS.get((tp, fp, fn)) or _ratios(tp, fp, fn)
    reasons: list[str] = []
    for call in missing:
        reasons.append(not_called_reason(call["name"], call["args"]))
    if fp:
        for call in actual:
            if call not in expected:
                reasons.append(unexpected_reason(call["name"], call["args"]))
    return f1, {
        "true_positives": tp,
        "false_positives": fp,
        "false_negatives": fn,
        "precision": precision,
        "recall": recall,
        "reasons": reasons,
    }


def _accuracy_value(pred: list[dict[str, Any]], ref: list[dict[str, Any]]) -> float:
    """``accuracy.ragas_accuracy`` in strict order, on dicts (both lists non-empty)."""
    if len(pred) != len(ref):
        return 0.0
    score = 0.0
    for expected, got in zip(ref, pred, strict=True):
        if expected["name"] != got["name"]:
            return 0.0
        g_args, e_args = got["args"], expected["args"]
        if e_args:
            total = 0.0
            for key, value in e_args.items():
                if key in g_args and str(g_args[key]) == str(value):
                    total += 1.0
            score += total / len(e_args)
        else:
            score += 0.0 if g_args else 1.0
    return score / len(ref)


def _f1_value(pred: list[dict[str, Any]], ref: list[dict[str, Any]]) -> float:
    """``ToolCallF1.value`` on plain call dicts."""
    expected, actual = _distinct(ref), _distinct(pred)
    tp = sum([c in actual for c in expected])
    fp, fn = len(actual) - tp, len(expected) - tp
    return (_RATIOS.get((tp, fp, fn)) or _ratios(tp, fp, fn))[2]


def _same_text(a: Any, b: Any) -> bool:
    """Whether equal values ``a`` and ``b`` are also alike value for value and type for type.

    ``==`` alone equates ``1``, ``1.0`` and ``true`` (and ``0.0``, ``-0.0``), whose ``str()``
    differ; equal orjson texts of equal values also mean equal types (and key order). Values
    that are equal and both written ``null`` (None, an infinity, one NaN object) print alike.
    """
    try:
        return _dumps(a) == _dumps(b)
    except TypeError:  # integers beyond 64 bits, lone surrogates: the long way
        return False


def _exact_accuracy(ref: list[dict[str, Any]]) -> Row:
    """``_accuracy``'s explanation when the predicted calls are identical to ``ref``."""
    n = len(ref)
    pairs = [
        {
            "expected": i,
            "predicted": i,
            "name": c["name"],
            "score": 1.0,
            "args": dict.fromkeys(c["args"], 1.0),
        }
        for i, c in enumerate(ref)
    ]
    return {
        "predicted_count": n,
        "expected_count": n,
        "aligned": True,
        "pairs": pairs,
        "unmatched_expected": [],
        "unmatched_predicted": [],
        "reasons": [],
    }


def _exact_f1(ref: list[dict[str, Any]]) -> Row:
    """``_f1``'s explanation when the predicted calls are identical to ``ref``."""
    return {
        "true_positives": len(_distinct(ref)),
        "false_positives": 0,
        "false_negatives": 0,
        "precision": 1.0,
        "recall": 1.0,
        "reasons": [],
    }


def fast_row(plan: Plan, obj: Any, details: bool = True) -> Row | None:
    """The successful row of ``obj`` under ``plan``, or ``None`` for the general path."""
    if type(obj) is not dict:
        return None
    pred = _predicted(obj.get("user_input"))
    if not pred:
        return None
    ref: Any = obj.get("reference_tool_calls")
    # Equal to the (checked) predicted calls, the reference is made of plain calls too.
    identical = pred == ref and _same_text(pred, ref)
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
        if not details:
            for name, _ in plan:
                row[name] = 1.0
            return row
        explanations: Row = {}
        for name, is_f1 in plan:
            row[name] = 1.0
            explanations[name] = _exact_f1(ref) if is_f1 else _exact_accuracy(ref)
        row["details"] = explanations
        return row
    if not details:
        for name, is_f1 in plan:
            row[name] = _f1_value(pred, ref) if is_f1 else _accuracy_value(pred, ref)
        return row
    explanations = {}
    for name, is_f1 in plan:
        if is_f1:
            row[name], explanations[name] = _f1(pred, ref)
        else:
            row[name], explanations[name] = _accuracy(pred, ref)
    row["details"] = explanations
    return row


__all__ = ["DEFAULT_PLAN", "bulk_plan", "fast_row"]
