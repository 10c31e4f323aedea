"""Order modes: which predicted call each reference call is compared with, and the gate.

Every function returns a :class:`Pairing` of ``(reference index, predicted index)`` pairs in the
order their scores are summed, and whether the *gate* passed (a failed gate scores 0).
``prefix`` means ``length_mismatch: prefix``: the gate only looks at the compared calls.
``score(r, p)`` is the argument score of reference ``r`` against predicted ``p`` (same name).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from toolscore.scorer.assignment import max_weight_assignment
from toolscore.scorer.explain import (
    group_reason,
    length_reason,
    names_differ_reason,
    names_text,
    never_made_reason,
    not_in_reference_reason,
    not_subsequence_reason,
    sorted_names_differ_reason,
)
from toolscore.scorer.model import ToolCall

PairScore = Callable[[int, int], float]


@dataclass(frozen=True, slots=True)
class Pairing:
    pairs: tuple[tuple[int, int], ...]
    aligned: bool
    reason: str | None = None


def sort_key(call: ToolCall) -> tuple[str, ...]:
    """Ragas's ``_sorted_key_for_tool_call``: name, then sorted ``(arg, str(value))`` pairs."""
    key = [call.name]
    args = call.args
    for name in sorted(args):
        key.append(name)
        key.append(str(args[name]))
    return tuple(key)


def in_order(pred: Sequence[ToolCall], ref: Sequence[ToolCall], prefix: bool) -> Pairing:
    """``strict``: the i-th reference call against the i-th predicted call."""
    pairs = tuple((i, i) for i in range(min(len(pred), len(ref))))
    reason = in_order_reason(pred, ref, prefix)
    return Pairing(pairs, reason is None, reason)


def in_order_reason(pred: Sequence[ToolCall], ref: Sequence[ToolCall], prefix: bool) -> str | None:
    """Why the ``strict`` gate fails, or None when it passes."""
    m = min(len(pred), len(ref))
    if not prefix and len(pred) != len(ref):
        return length_reason(len(pred), len(ref))
    for i in range(m):
        if pred[i].name != ref[i].name:
            return names_differ_reason(i, [c.name for c in ref[:m]], _names_of(pred[:m]))
    return None


def sorted_indices(calls: Sequence[ToolCall]) -> list[int]:
    # Python's sort is stable, so this is the permutation Ragas's sorted() applies.
    keys = [sort_key(c) for c in calls]
    return sorted(range(len(calls)), key=keys.__getitem__)


def sorted_pairs(pred: Sequence[ToolCall], ref: Sequence[ToolCall], prefix: bool) -> Pairing:
    """``flexible``: both lists sorted by :func:`sort_key`, then compared position by position."""
    p_order, r_order = sorted_indices(pred), sorted_indices(ref)
    m = min(len(pred), len(ref))
    pairs = tuple((r_order[i], p_order[i]) for i in range(m))
    if not prefix and len(pred) != len(ref):
        return Pairing(pairs, False, length_reason(len(pred), len(ref)))
    for r, p in pairs:
        if pred[p].name != ref[r].name:
            ref_sorted = sorted((ref[i] for i in r_order[:m]), key=sort_key)
            pred_sorted = sorted((pred[i] for i in p_order[:m]), key=sort_key)
            reason = sorted_names_differ_reason(_names_of(ref_sorted), _names_of(pred_sorted))
            return Pairing(pairs, False, reason)
    return Pairing(pairs, True)


def _assign(
    r_idx: Sequence[int],
    p_idx: Sequence[int],
    pred: Sequence[ToolCall],
    ref: Sequence[ToolCall],
    score: PairScore,
) -> list[tuple[int, int]]:
    """Optimal pairs between two index sets; pairs with different names are dropped."""
    if not r_idx or not p_idx:
        return []
    weights = [[score(r, p) if ref[r].name == pred[p].name else 0.0 for p in p_idx] for r in r_idx]
    return [
        (r_idx[i], p_idx[j])
        for i, j in max_weight_assignment(weights)
        if ref[r_idx[i]].name == pred[p_idx[j]].name
    ]


def optimal(
    pred: Sequence[ToolCall], ref: Sequence[ToolCall], prefix: bool, score: PairScore
) -> Pairing:
    """``unordered``: the pairing that maximises the total argument score; no name gate."""
    pairs = tuple(_assign(range(len(ref)), range(len(pred)), pred, ref, score))
    if not prefix and len(pred) != len(ref):
        return Pairing(pairs, False, length_reason(len(pred), len(ref)))
    return Pairing(pairs, True)


def covering(
    pred: Sequence[ToolCall], ref: Sequence[ToolCall], score: PairScore, *, of: str
) -> Pairing:
    """``superset`` (``of="reference"``: every reference call has a same-name predicted partner,
    extras allowed) and ``subset`` (``of="predicted"``: every predicted call has a same-name
    reference partner, missing calls allowed), in any order.

    The pairing maximises first the number of same-name pairs, then their total argument score
    (a same-name pair weighs more than any sum of argument scores, at most one per pair).
    """
    bonus = float(min(len(pred), len(ref)) + 1)
    weights = [
        [bonus + score(r, p) if ref[r].name == pred[p].name else 0.0 for p in range(len(pred))]
        for r in range(len(ref))
    ]
    pairs = tuple(
        (r, p)
        for r, p in (max_weight_assignment(weights) if ref and pred else [])
        if ref[r].name == pred[p].name
    )
    if of == "reference":
        found = {r for r, _ in pairs}
        missing = [ref[r] for r in range(len(ref)) if r not in found]
        if missing:
            return Pairing(pairs, False, never_made_reason(_names_of(missing)))
    else:
        found = {p for _, p in pairs}
        unexpected = [pred[p] for p in range(len(pred)) if p not in found]
        if unexpected:
            return Pairing(pairs, False, not_in_reference_reason(_names_of(unexpected)))
    return Pairing(pairs, True)


def subsequence(
    pred: Sequence[ToolCall], ref: Sequence[ToolCall], prefix: bool, score: PairScore
) -> Pairing:
    """``subsequence``: reference calls in order inside the predicted calls (extras allowed).

    Dynamic programming over an order-preserving matching of equal names that maximises first
    the number of reference calls found, then their total argument score.
    """
    n_r, n_p = len(ref), len(pred)
    # best[i][j]: (count, total) for ref[i:], pred[j:]
    # choice[i][j]: 0 skip the predicted call, 1 skip the reference call, 2 pair them
    best: list[list[tuple[int, float]]] = [[(0, 0.0)] * (n_p + 1) for _ in range(n_r + 1)]
    choice: list[list[int]] = [[0] * (n_p + 1) for _ in range(n_r + 1)]
    for i in range(n_r - 1, -1, -1):
        for j in range(n_p - 1, -1, -1):
            options: list[tuple[tuple[int, float], int]] = [
                (best[i][j + 1], 0),
                (best[i + 1][j], 1),
            ]
            if ref[i].name == pred[j].name:
                count, total = best[i + 1][j + 1]
                options.append(((count + 1, total + score(i, j)), 2))
            best[i][j], choice[i][j] = max(options, key=lambda o: o[0])
    pairs: list[tuple[int, int]] = []
    i = j = 0
    while i < n_r and j < n_p:
        step = choice[i][j]
        if step == 2:
            pairs.append((i, j))
            i, j = i + 1, j + 1
        elif step == 1:
            i += 1
        else:
            j += 1
    if not prefix and len(pairs) < n_r:
        found = {r for r, _ in pairs}
        missing = [ref[r].name for r in range(n_r) if r not in found]
        return Pairing(tuple(pairs), False, not_subsequence_reason(missing))
    return Pairing(tuple(pairs), True)


def grouped(
    pred: Sequence[ToolCall],
    groups: Sequence[Sequence[int]],
    ref: Sequence[ToolCall],
    prefix: bool,
    score: PairScore,
) -> Pairing:
    """``grouped``: consecutive predicted calls fill each group, in any order inside a group.

    ``groups`` lists the (flattened) reference indices of each group, groups in order.
    """
    n_ref = len(ref)
    pairs: list[tuple[int, int]] = []
    reason: str | None = None
    start = 0
    for g, members in enumerate(groups):
        segment = list(range(start, min(start + len(members), len(pred))))
        start += len(members)
        if not segment:
            break
        expected_names: Counter[str] = Counter(ref[r].name for r in members)
        got_names: Counter[str] = Counter(pred[p].name for p in segment)
        complete = len(segment) == len(members)
        names_ok = got_names == expected_names if complete else not (got_names - expected_names)
        if not names_ok and reason is None:
            reason = group_reason(g, _names(expected_names), _names(got_names))
        pairs.extend(_assign(members, segment, pred, ref, score))
    if not prefix and len(pred) != n_ref:
        return Pairing(tuple(pairs), False, length_reason(len(pred), n_ref))
    return Pairing(tuple(pairs), reason is None, reason)


def _names(counter: Counter[Any]) -> str:
    return names_text(sorted(counter.elements()))


def _names_of(calls: Sequence[ToolCall]) -> list[str]:
    return [c.name for c in calls]
