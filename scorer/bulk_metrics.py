"""The metrics of the bulk fast path (``scorer.bulk``) on decoded call dicts.

Each function gives exactly what the general path gives for a Ragas-default instance (strict
``ToolCallAccuracy``, ``ToolCallF1``): the same floats, and the same reasons and loss labels,
worded by :mod:`~toolscore.scorer.explain` and counted by :mod:`~toolscore.scorer.losses`.
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
from toolscore.scorer.losses import f1_losses, gate_kind, pair_losses, unpaired_losses

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (start-up time)
if TYPE_CHECKING:
    from typing import Any

    Row = dict[str, Any]


def accuracy(pred: list[dict[str, Any]], ref: list[dict[str, Any]]) -> tuple[float, Row]:
    """``ToolCallAccuracy._evaluate_default`` in strict order, on dicts (both lists non-empty).

    Strict pairs are (i, i): the unmatched calls are the positions whose names differ and
    the longer list's tail, known without the general path's sets.
    """
    n_p, n_r = len(pred), len(ref)
    score = 0.0
    share = 1.0 / n_r
    pairs: list[Row] = []
    reasons: list[str] = []
    losses: list[Row] = []
    differ: list[int] = []  # positions whose names differ
    i = -1
    for expected, got in zip(ref, pred, strict=False):
        i += 1
        name = expected["name"]
        if name != got["name"]:
            differ.append(i)
            continue
        g_args, e_args = got["args"], expected["args"]
        if g_args == e_args and same_text(g_args, e_args):  # every argument matches
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
                pair_losses(losses, i, i, name, per_arg, g_args, share)
        else:  # not identical, so the prediction has arguments
            one = 0.0
            reasons.append(pair_reason(name, e_args, g_args, ()))
            pair_losses(losses, i, i, name, per_arg, g_args, share)
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
            "losses": losses,
        }
    return 0.0, _misaligned(pred, ref, pairs, reasons, losses, differ, i + 1)


def _misaligned(
    pred: list[dict[str, Any]],
    ref: list[dict[str, Any]],
    pairs: list[Row],
    reasons: list[str],
    losses: list[Row],
    differ: list[int],
    compared: int,
) -> Row:
    """``accuracy``'s explanation when the strict gate failed (score 0)."""
    n_p, n_r = len(pred), len(ref)
    # pairing.in_order's reason: a length mismatch, else the first differing name
    gate = None
    if n_p != n_r:
        reasons.insert(0, length_reason(n_p, n_r))
    else:
        ref_names = [c["name"] for c in ref]
        pred_names = [c["name"] for c in pred]
        reasons.insert(0, names_differ_reason(differ[0], ref_names, pred_names))
        gate = gate_kind("strict", False, ref_names, pred_names)
    unmatched_expected = differ + list(range(compared, n_r))
    unmatched_predicted = differ + list(range(compared, n_p))
    for r in unmatched_expected:
        reasons.append(unmatched_reason(ref[r]["name"], ref[r]["args"]))
    for p in unmatched_predicted:
        reasons.append(unexpected_reason(pred[p]["name"], pred[p]["args"]))
    unpaired_losses(
        losses,
        0.0,
        [(r, ref[r]["name"]) for r in unmatched_expected],
        [(p, pred[p]["name"]) for p in unmatched_predicted],
        gate=gate,
    )
    return {
        "predicted_count": n_p,
        "expected_count": n_r,
        "aligned": False,
        "pairs": pairs,
        "unmatched_expected": unmatched_expected,
        "unmatched_predicted": unmatched_predicted,
        "reasons": reasons,
        "losses": losses,
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


def f1(pred: list[dict[str, Any]], ref: list[dict[str, Any]]) -> tuple[float, Row]:
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
    extra: list[dict[str, Any]] = []
    if fp:
        for call in actual:
            if call not in expected:
                extra.append(call)
                reasons.append(unexpected_reason(call["name"], call["args"]))
    losses = (
        f1_losses([c["name"] for c in missing], [c["name"] for c in extra], f1) if fn or fp else []
    )
    return f1, {
        "true_positives": tp,
        "false_positives": fp,
        "false_negatives": fn,
        "precision": precision,
        "recall": recall,
        "reasons": reasons,
        "losses": losses,
    }


def accuracy_value(pred: list[dict[str, Any]], ref: list[dict[str, Any]]) -> float:
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


def f1_value(pred: list[dict[str, Any]], ref: list[dict[str, Any]]) -> float:
    """``ToolCallF1.value`` on plain call dicts."""
    expected, actual = _distinct(ref), _distinct(pred)
    tp = sum([c in actual for c in expected])
    fp, fn = len(actual) - tp, len(expected) - tp
    return (_RATIOS.get((tp, fp, fn)) or _ratios(tp, fp, fn))[2]


def same_text(a: Any, b: Any) -> bool:
    """Whether equal values ``a`` and ``b`` are also alike value for value and type for type.

    ``==`` alone equates ``1``, ``1.0`` and ``true`` (and ``0.0``, ``-0.0``), whose ``str()``
    differ; equal orjson texts of equal values also mean equal types (and key order). Values
    that are equal and both written ``null`` (None, an infinity, one NaN object) print alike.
    """
    try:
        return _dumps(a) == _dumps(b)
    except TypeError:  # integers beyond 64 bits, lone surrogates: the long way
        return False


def exact_accuracy(ref: list[dict[str, Any]]) -> Row:
    """``accuracy``'s explanation when the predicted calls are identical to ``ref``."""
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
        "losses": [],
    }


def exact_f1(ref: list[dict[str, Any]]) -> Row:
    """``f1``'s explanation when the predicted calls are identical to ``ref``."""
    return {
        "true_positives": len(_distinct(ref)),
        "false_positives": 0,
        "false_negatives": 0,
        "precision": 1.0,
        "recall": 1.0,
        "reasons": [],
        "losses": [],
    }
