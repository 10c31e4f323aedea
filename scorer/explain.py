"""The one source of explanation sentences: every scoring path words its reasons here.

The functions take a call as its name and argument mapping, so that explanations of calls that
were never parsed into :class:`~toolscore.scorer.model.ToolCall` objects read the same.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from toolscore.scorer.model import ToolCall

MAX_VALUE = 80


def format_value(value: Any) -> str:
    text = repr(value)
    if len(text) > MAX_VALUE:
        return text[: MAX_VALUE - 3] + "..."
    return text


def format_args(args: Mapping[str, Any], keys: Iterable[str] | None = None) -> str:
    if keys is None:
        return ", ".join([f"{k}={format_value(v)}" for k, v in args.items()])
    parts = [f"{k}={format_value(args[k])}" if k in args else f"{k} missing" for k in keys]
    return ", ".join(parts)


def call_text(name: str, args: Mapping[str, Any], keys: Iterable[str] | None = None) -> str:
    """``get_time(timezone='Asia/Tokyo')``; with ``keys``, only those arguments."""
    return f"{name}({format_args(args, keys)})"


def format_call(call: ToolCall, keys: Iterable[str] | None = None) -> str:
    return call_text(call.name, call.args, keys)


def names_text(names: Iterable[str]) -> str:
    return "[" + ", ".join(names) + "]"


def format_names(calls: Iterable[ToolCall]) -> str:
    return names_text([c.name for c in calls])


def identical_explanation(calls: Sequence[ToolCall], order: Sequence[int]) -> dict[str, Any]:
    """ToolCallAccuracy's explanation (exact comparator) of ``calls`` against themselves, paired
    in ``order``: every argument matches."""
    n = len(calls)
    pairs = []
    for i in order:
        call = calls[i]
        pairs.append(
            {
                "expected": i,
                "predicted": i,
                "name": call.name,
                "score": 1.0,
                "args": dict.fromkeys(call.args, 1.0),
            }
        )
    return {
        "predicted_count": n,
        "expected_count": n,
        "aligned": True,
        "pairs": pairs,
        "unmatched_expected": [],
        "unmatched_predicted": [],
        "reasons": [],
        "losses": [],
    }


# -- ToolCallAccuracy: one paired call ----------------------------------------------------------


def pair_reason(
    name: str, expected: Mapping[str, Any], got: Mapping[str, Any], lost: Sequence[str]
) -> str:
    """A paired call that lost points: ``lost`` names the reference arguments that scored < 1."""
    if not expected:
        return f"expected {name}() without arguments, got {call_text(name, got)}"
    return f"expected {call_text(name, expected, lost)}, got {call_text(name, got, lost)}"


# -- ToolCallAccuracy: calls without a partner -------------------------------------------------


def unmatched_reason(name: str, args: Mapping[str, Any], allowed: str = "") -> str:
    """A reference call no predicted call was paired with; ``allowed`` names the order that
    allows it (``subset``)."""
    tail = f" (allowed by {allowed})" if allowed else ""
    return f"expected {call_text(name, args)} was not matched by any call{tail}"


def unexpected_reason(name: str, args: Mapping[str, Any], allowed: str = "") -> str:
    tail = f" (allowed by {allowed})" if allowed else ""
    return f"unexpected call {call_text(name, args)}{tail}"


# -- ToolCallAccuracy: the gate and the whole-list cases ---------------------------------------


def length_reason(n_pred: int, n_ref: int) -> str:
    return f"expected {n_ref} calls, got {n_pred} (length_mismatch: zero scores 0)"


def names_differ_reason(position: int, ref_names: Iterable[str], pred_names: Iterable[str]) -> str:
    return (
        f"tool names differ at position {position}: expected {names_text(ref_names)}, "
        f"got {names_text(pred_names)}"
    )


def sorted_names_differ_reason(ref_names: Iterable[str], pred_names: Iterable[str]) -> str:
    return (
        f"tool names differ (any order): expected {names_text(ref_names)}, "
        f"got {names_text(pred_names)}"
    )


def never_made_reason(names: Iterable[str]) -> str:
    return f"expected calls never made: {names_text(names)}"


def not_in_reference_reason(names: Iterable[str]) -> str:
    return f"calls the reference does not have: {names_text(names)}"


def not_subsequence_reason(names: Iterable[str]) -> str:
    return (
        "the reference calls are not a subsequence of the predicted calls "
        f"(not found in order: {', '.join(names)})"
    )


def group_reason(group: int, expected: str, got: str) -> str:
    return f"group {group}: expected {expected} in any order, got {got}"


def empty_reason(n_pred: int, n_ref: int, order: str, allowed: bool) -> str:
    """One side has no calls (the other has some)."""
    if not n_pred:
        if allowed:
            return f"no tool calls were made ({n_ref} allowed by {order})"
        return f"no tool calls were made; {n_ref} expected"
    if allowed:
        return f"{n_pred} extra calls (allowed by {order})"
    return f"the reference expects no tool calls, but {n_pred} were made"


def groups_flattened_reason(order: str) -> str:
    return f"reference groups read as one ordered list (order: {order})"


def coverage_reason(compared: int, n_ref: int) -> str:
    return f"only {compared} of {n_ref} expected calls could be compared"


NOT_ALIGNED = "the call sequences are not aligned"


# -- ToolCallF1 ------------------------------------------------------------------------------


def not_called_reason(name: str, args: Mapping[str, Any]) -> str:
    return f"expected {call_text(name, args)} was not called"


F1_BOTH_EMPTY = "no calls expected and none made: F1 is 0 by definition"
