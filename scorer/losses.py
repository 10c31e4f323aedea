"""Loss labels: where a score's lost points went, per call and argument (``details.losses``).

Every order mode builds its labels with these functions. A label is a dict::

    {"kind": "wrong_argument", "tool": "search", "argument": "limit",
     "expected": 0, "predicted": 0, "points": 0.1667}

``kind`` is ``wrong_argument`` (a paired call's argument scored below 1), ``missing`` (a
reference call without a partner), ``extra`` (a predicted call without a partner), ``order``
(a call left without a partner because the calls came in the wrong order: the gate of
``strict``/``subsequence`` failed while every expected tool was called) or ``group`` (the
``grouped`` gate failed). ``expected``/``predicted`` are the call's positions (in the reference
read as one list, and in the predicted calls after ``duplicates: collapse``). ``points`` are
fractions of the score (which runs from 0 to 1), and the labels' points add up to ``1 - score``
(up to float rounding): a label with 0 points is a call the order mode allows (an extra call
under ``superset``), or one whose loss its partner on the other side already carries.

Accuracy: each of the ``D`` counted calls (``D`` = R, or P for ``subset``; times the coverage
under ``length_mismatch: prefix``) is worth ``share = 1 / D``; an argument of a paired call
with ``k`` reference arguments that scored ``c`` loses ``share * (1 - c) / k``; whatever else
was lost (calls without a partner, a failed gate) is shared equally by the calls without a
partner that the order mode does not allow. F1: each missing or extra distinct call loses
``(1 - F1) / (false negatives + false positives)``, since F1 = 2tp / (2tp + fp + fn).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeAlias

Label: TypeAlias = dict[str, Any]

KINDS = ("missing", "extra", "wrong_argument", "order", "group")


def pair_losses(
    losses: list[Label],
    r: int,
    p: int,
    name: str,
    per_arg: Mapping[str, float],
    got_args: Iterable[str],
    share: float,
) -> None:
    """Append the labels of a paired call that scored below 1.

    ``per_arg`` holds the reference arguments' scores; when the reference call has none (and
    the predicted call has some, ``got_args``), each given argument shares the call's loss.
    """
    if per_arg:
        k = len(per_arg)
        for argument, score in per_arg.items():
            if score < 1.0:
                points = share * (1.0 - score) / k
                losses.append(_argument(name, argument, r, p, points))
    else:
        given = list(got_args)
        for argument in given:
            losses.append(_argument(name, argument, r, p, share / len(given)))


def _argument(name: str, argument: str, r: int, p: int, points: float) -> Label:
    return {
        "kind": "wrong_argument",
        "tool": name,
        "argument": argument,
        "expected": r,
        "predicted": p,
        "points": points,
    }


def unpaired_losses(
    losses: list[Label],
    score: float,
    missing: Sequence[tuple[int, str]],
    extra: Sequence[tuple[int, str]],
    *,
    gate: str | None = None,
    free_missing: bool = False,
    free_extra: bool = False,
) -> None:
    """Append one label per call without a partner (``(position, tool)`` on each side).

    The points not yet labelled (``1 - score`` less the labels so far) are shared by the calls
    the mode does not allow; ``gate`` (``order``/``group``) names the kind of those labels when
    a failed gate is what cost the points, else they are ``missing``/``extra``.
    """
    rest = 1.0 - score
    for label in losses:
        rest -= label["points"]
    charged = (0 if free_missing else len(missing)) + (0 if free_extra else len(extra))
    each = max(0.0, rest) / charged if charged else 0.0
    for r, name in missing:
        points = 0.0 if free_missing else each
        kind = "missing" if gate is None or free_missing else gate
        losses.append({"kind": kind, "tool": name, "expected": r, "points": points})
    for p, name in extra:
        points = 0.0 if free_extra else each
        kind = "extra" if gate is None or free_extra else gate
        losses.append({"kind": kind, "tool": name, "predicted": p, "points": points})
    if not charged and rest > 1e-9:  # nothing to charge: the gate's loss stands on its own
        losses.append({"kind": gate or "order", "tool": None, "points": rest})


def gate_kind(
    order: str, length_failed: bool, ref_names: Sequence[str], pred_names: Sequence[str]
) -> str | None:
    """The label kind of a failed gate: ``group`` (a group's names differ), ``order`` (every
    expected tool was called, in the wrong order), else ``None`` (calls missing or extra)."""
    if length_failed:
        return None
    if order == "grouped":
        return "group"
    if order in ("strict", "subsequence"):
        counts: dict[str, int] = {}
        for name in pred_names:
            counts[name] = counts.get(name, 0) + 1
        for name in ref_names:
            left = counts.get(name, 0)
            if not left:
                return None
            counts[name] = left - 1
        return "order"
    return None


def f1_losses(missing: Iterable[str], extra: Iterable[str], f1: float) -> list[Label]:
    """The labels of ToolCallF1: the tools of the distinct missing and extra calls."""
    labels: list[Label] = [{"kind": "missing", "tool": name} for name in missing]
    labels += [{"kind": "extra", "tool": name} for name in extra]
    if labels:
        each = (1.0 - f1) / len(labels)
        for label in labels:
            label["points"] = each
    return labels
