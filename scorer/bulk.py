"""The bulk fast path of ``toolscore score``: Ragas-default instances straight from decoded JSON.

:func:`fast_row` builds exactly the row :func:`scorer.rows.score_row` builds (same keys, same
order, same floats, same reasons) for the common case, working on the decoded dicts without
building :class:`~scorer.model.ToolCall` objects or the parsing layer's intermediate tuples. It
answers ``None`` for anything outside that case (an invalid or unusual sample, reference groups,
an empty call list, a missing reference), and the caller then takes the general path, which also
owns every error message. ``tests/scorer/test_bulk.py`` checks the two paths agree byte for byte.

Covered instances: ``tool_call_accuracy`` with Ragas's defaults in ``strict`` order, and
``tool_call_f1``, under any names and in any order.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scorer.explain import MAX_VALUE, format_args, format_value

#: Per instance in output order: its name and whether it is F1 (else strict default accuracy).
Plan = tuple[tuple[str, bool], ...]
Row = dict[str, Any]
#: The plan of :func:`scorer.config.default_config` (checked by the tests).
DEFAULT_PLAN: Plan = (("tool_call_accuracy", False), ("tool_call_f1", True))


def bulk_plan(instances: Mapping[str, Any]) -> Plan | None:
    """The plan for a configuration's instances, or ``None`` if any is not covered."""
    from scorer.accuracy import ToolCallAccuracy
    from scorer.f1 import ToolCallF1

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
    """The calls of a ``tool_calls`` / ``reference_tool_calls`` array if all are plain calls."""
    if type(raw) is not list:
        return None
    for call in raw:
        if type(call) is not dict or type(call.get("name")) is not str:
            return None
        if type(call.get("args")) is not dict:
            return None
    return raw


def _predicted(messages: Any) -> list[dict[str, Any]] | None:
    """Every ai message's calls in order, if the messages are valid and ordinary (else None)."""
    if type(messages) is not list:
        return None
    predicted: list[dict[str, Any]] = []
    previous = ""  # Ragas's tool-message rules: see parse._read
    for message in messages:
        if type(message) is not dict or type(message.get("content")) is not str:
            return None
        metadata = message.get("metadata")
        if metadata is not None and type(metadata) is not dict:
            return None
        kind = message.get("type")
        if kind == "ai":
            raw = message.get("tool_calls")
            if raw:
                calls = _calls(raw)
                if calls is None:
                    return None
                predicted += calls
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
    return predicted


def _format_call(call: dict[str, Any], keys: list[str] | None = None) -> str:
    """``explain.format_call`` on a call dict."""
    if keys is not None:
        return f"{call['name']}({format_args(call['args'], keys)})"
    parts = []
    for key, value in call["args"].items():
        text = repr(value)
        if len(text) > MAX_VALUE:
            text = text[: MAX_VALUE - 3] + "..."
        parts.append(f"{key}={text}")
    return f"{call['name']}({', '.join(parts)})"


def _whole(call: dict[str, Any], memo: dict[int, str]) -> str:
    """``_format_call(call)``, once per call and row (accuracy and F1 both name missed calls)."""
    text = memo.get(id(call))
    if text is None:
        text = memo[id(call)] = _format_call(call)
    return text


def _names(calls: list[dict[str, Any]]) -> str:
    return "[" + ", ".join([c["name"] for c in calls]) + "]"


def _accuracy(
    pred: list[dict[str, Any]], ref: list[dict[str, Any]], memo: dict[int, str]
) -> tuple[float, Row]:
    """``ToolCallAccuracy._evaluate_default`` in strict order, on dicts (both lists non-empty)."""
    n_p, n_r = len(pred), len(ref)
    aligned = n_p == n_r
    score = 0.0
    pairs: list[Row] = []
    reasons: list[str] = []
    for i in range(min(n_p, n_r)):
        expected, got = ref[i], pred[i]
        name = expected["name"]
        if name != got["name"]:
            aligned = False
            continue
        g_args, e_args = got["args"], expected["args"]
        per_arg: dict[str, float] = {}
        if e_args:
            total = 0.0
            for key, value in e_args.items():
                if key in g_args and str(g_args[key]) == str(value):
                    per_arg[key] = 1.0
                    total += 1.0
                else:
                    per_arg[key] = 0.0
            one = total / len(e_args)
        else:
            one = 0.0 if g_args else 1.0
        score += one
        pairs.append({"expected": i, "predicted": i, "name": name, "score": one, "args": per_arg})
        if one < 1.0:
            if e_args:
                lost = [k for k, s in per_arg.items() if s < 1.0]
                reasons.append(
                    f"expected {_format_call(expected, lost)}, got {_format_call(got, lost)}"
                )
            else:
                reasons.append(f"expected {name}() without arguments, got {_format_call(got)}")
    if aligned:
        score /= n_r
    else:
        score = 0.0
        reasons.insert(0, _misaligned(pred, ref))
    unmatched_expected: list[int] = []
    unmatched_predicted: list[int] = []
    if len(pairs) != n_r or len(pairs) != n_p:
        matched = {d["expected"] for d in pairs}  # strict pairs are (i, i)
        unmatched_expected = [r for r in range(n_r) if r not in matched]
        unmatched_predicted = [p for p in range(n_p) if p not in matched]
        reasons += [
            f"expected {_whole(ref[r], memo)} was not matched by any call"
            for r in unmatched_expected
        ]
        reasons += [f"unexpected call {_whole(pred[p], memo)}" for p in unmatched_predicted]
    return min(1.0, max(0.0, score)), {
        "predicted_count": n_p,
        "expected_count": n_r,
        "aligned": aligned,
        "pairs": pairs,
        "unmatched_expected": unmatched_expected,
        "unmatched_predicted": unmatched_predicted,
        "reasons": reasons,
    }


def _misaligned(pred: list[dict[str, Any]], ref: list[dict[str, Any]]) -> str:
    """``pairing.in_order``'s reason (length mismatch, else the first differing name)."""
    if len(pred) != len(ref):
        return f"expected {len(ref)} calls, got {len(pred)} (length_mismatch: zero scores 0)"
    for i in range(len(ref)):
        if pred[i]["name"] != ref[i]["name"]:
            return f"tool names differ at position {i}: expected {_names(ref)}, got {_names(pred)}"
    return "not aligned"  # pragma: no cover (a misaligned strict pairing has a differing name)


def _hashable(obj: Any) -> Any:
    if isinstance(obj, dict):
        return frozenset((k, _hashable(v)) for k, v in obj.items())
    if isinstance(obj, list | tuple):
        return tuple(_hashable(item) for item in obj)
    return obj


def _keys(calls: list[dict[str, Any]]) -> list[tuple[str, Any]]:
    try:
        return [(c["name"], frozenset(c["args"].items())) for c in calls]
    except TypeError:  # a list or object value: Ragas's _make_hashable
        return [(c["name"], _hashable(c["args"])) for c in calls]


def _f1(
    pred: list[dict[str, Any]], ref: list[dict[str, Any]], memo: dict[int, str]
) -> tuple[float, Row]:
    """``ToolCallF1.evaluate`` on dicts."""
    ref_keys, pred_keys = _keys(ref), _keys(pred)
    expected, actual = set(ref_keys), set(pred_keys)
    tp = len(actual & expected)
    fp, fn = len(actual) - tp, len(expected) - tp
    precision = tp / (tp + fp) if (tp + fp) > 0 else 0.0
    recall = tp / (tp + fn) if (tp + fn) > 0 else 0.0
    f1 = 2 * precision * recall / (precision + recall) if (precision + recall) > 0 else 0.0
    reasons: list[str] = []
    if fn:
        reasons += [f"expected {c} was not called" for c in _outside(ref, ref_keys, actual, memo)]
    if fp:
        reasons += [f"unexpected call {c}" for c in _outside(pred, pred_keys, expected, memo)]
    value = round(f1, 4)
    return value, {
        "true_positives": tp,
        "false_positives": fp,
        "false_negatives": fn,
        "precision": precision,
        "recall": recall,
        "reasons": reasons,
    }


def _outside(
    calls: list[dict[str, Any]],
    keys: list[tuple[str, Any]],
    other: set[tuple[str, Any]],
    memo: dict[int, str],
) -> list[str]:
    seen: set[tuple[str, Any]] = set()
    out: list[str] = []
    for call, key in zip(calls, keys, strict=True):
        if key not in other and key not in seen:
            seen.add(key)
            out.append(_whole(call, memo))
    return out


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
    """``ToolCallF1.value`` on dicts."""
    expected, actual = set(_keys(ref)), set(_keys(pred))
    tp = len(actual & expected)
    fp, fn = len(actual) - tp, len(expected) - tp
    precision = tp / (tp + fp) if (tp + fp) > 0 else 0.0
    recall = tp / (tp + fn) if (tp + fn) > 0 else 0.0
    f1 = 2 * precision * recall / (precision + recall) if (precision + recall) > 0 else 0.0
    return round(f1, 4)


def fast_row(plan: Plan, obj: Any, details: bool = True) -> Row | None:
    """The successful row of ``obj`` under ``plan``, or ``None`` for the general path."""
    if type(obj) is not dict:
        return None
    pred = _predicted(obj.get("user_input"))
    if not pred:
        return None
    ref = obj.get("reference_tool_calls")
    if not ref or _calls(ref) is None:
        return None
    # The other MultiTurnSample fields: anything but absent/null goes the general way.
    if (
        obj.get("reference") is not None
        or obj.get("rubrics") is not None
        or obj.get("reference_topics") is not None
    ):
        return None
    row: Row = {"id": obj.get("id")}
    if not details:
        for name, is_f1 in plan:
            row[name] = _f1_value(pred, ref) if is_f1 else _accuracy_value(pred, ref)
        return row
    explanations: Row = {}
    memo: dict[int, str] = {}
    for name, is_f1 in plan:
        if is_f1:
            row[name], explanations[name] = _f1(pred, ref, memo)
        else:
            row[name], explanations[name] = _accuracy(pred, ref, memo)
    row["details"] = explanations
    return row


__all__ = ["DEFAULT_PLAN", "Plan", "bulk_plan", "fast_row", "format_value"]
