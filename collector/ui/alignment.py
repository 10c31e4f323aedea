"""Predicted and reference calls side by side, aligned as a metric paired them (pure).

The metric's ``details`` say which predicted call it paired with which reference call
(``pairs``: positions in the predicted calls after ``duplicates: collapse`` and in the reference
read as one flat list), which calls found no partner, and where the lost points went
(``losses``). A row is a pair, a missing reference call or an extra predicted call, in the
order of the predicted calls with each missing call placed after its reference predecessor's
row.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Call:
    number: int  # 1-based, as the tool-call table numbers it
    name: str
    arguments: Any
    span: str | None = None  # trace/span the call was rebuilt from
    rule: str | None = None  # the convention that produced it


@dataclass(frozen=True, slots=True)
class Argument:
    name: str
    predicted: Any
    reference: Any
    in_predicted: bool
    in_reference: bool
    ok: bool
    lost: float  # points of the score this argument lost


@dataclass(frozen=True, slots=True)
class Row:
    kind: str  # "pair", "missing" or "extra"
    predicted: Call | None
    reference: Call | None
    score: float | None  # the pair's score (None: no pair)
    lost: float  # points of the score this row lost
    arguments: tuple[Argument, ...] = ()
    note: str | None = None  # a loss kind other than the row's own ("order", "group")


def flatten(reference: Any) -> list[Mapping[str, Any]]:
    """The reference calls as one list (groups, lists inside the list, flattened in order)."""
    if isinstance(reference, Mapping):
        return [reference]
    out: list[Mapping[str, Any]] = []
    for item in reference or ():
        out.extend(flatten(item))
    return out


def stored_position(position: int, collapsed: Sequence[int]) -> int:
    """The stored call a predicted position counted after ``duplicates: collapse`` stands for."""
    stored = position
    for index in sorted(collapsed):
        if index <= stored:
            stored += 1
    return stored


def _points(losses: Sequence[Mapping[str, Any]]) -> dict[tuple[str, int | None, int | None], float]:
    out: dict[tuple[str, int | None, int | None], float] = {}
    for label in losses:
        key = (str(label.get("kind")), label.get("expected"), label.get("predicted"))
        points = label.get("points")
        if isinstance(points, int | float):
            out[key] = out.get(key, 0.0) + float(points)
    return out


def _argument_losses(losses: Sequence[Mapping[str, Any]], r: int, p: int) -> dict[str, float]:
    out: dict[str, float] = {}
    for label in losses:
        where = (label.get("expected"), label.get("predicted"))
        if label.get("kind") != "wrong_argument" or where != (r, p):
            continue
        name, points = str(label.get("argument")), label.get("points")
        out[name] = out.get(name, 0.0) + (points if isinstance(points, int | float) else 0.0)
    return out


def _arguments(
    predicted: Any, reference: Any, scores: Mapping[str, Any], lost: Mapping[str, float]
) -> tuple[Argument, ...]:
    got = predicted if isinstance(predicted, Mapping) else {}
    want = reference if isinstance(reference, Mapping) else {}
    names = list(want) + [k for k in got if k not in want]
    return tuple(
        Argument(
            name,
            got.get(name),
            want.get(name),
            name in got,
            name in want,
            ok=float(scores.get(name, 1.0 if name not in want else 0.0)) >= 1.0,
            lost=lost.get(name, 0.0),
        )
        for name in names
    )


def align(
    predicted: Sequence[Call], reference: Sequence[Call], details: Mapping[str, Any]
) -> list[Row]:
    """The rows of one evaluation's ``details`` (empty when it recorded no pairing)."""
    pairs = details.get("pairs")
    if not isinstance(pairs, list):
        return []
    collapsed = [i for i in details.get("repeats_collapsed") or () if isinstance(i, int)]
    losses = [x for x in details.get("losses") or () if isinstance(x, Mapping)]
    points = _points(losses)
    by_p: dict[int, Row] = {}
    paired_r: set[int] = set()
    for pair in pairs:
        r, p = pair.get("expected"), pair.get("predicted")
        if not isinstance(r, int) or not isinstance(p, int):
            continue
        stored = stored_position(p, collapsed)
        if stored >= len(predicted) or r >= len(reference):
            continue
        paired_r.add(r)
        got, want = predicted[stored], reference[r]
        arg_lost = _argument_losses(losses, r, p)
        by_p[stored] = Row(
            "pair",
            got,
            want,
            float(pair["score"]) if isinstance(pair.get("score"), int | float) else None,
            sum(arg_lost.values()),
            _arguments(got.arguments, want.arguments, pair.get("args") or {}, arg_lost),
        )
    rows: list[Row] = []
    for i, call in enumerate(predicted):
        if i in by_p:
            rows.append(by_p[i])
            continue
        if i in collapsed:
            continue
        p = _collapsed_index(i, collapsed)
        lost, note = _unpaired_points(points, "extra", None, p)
        rows.append(Row("extra", call, None, None, lost, note=note))
    for r, want in enumerate(reference):
        if r in paired_r:
            continue
        lost, note = _unpaired_points(points, "missing", r, None)
        rows.insert(_missing_slot(rows, r), Row("missing", None, want, None, lost, note=note))
    return rows


def _collapsed_index(stored: int, collapsed: Sequence[int]) -> int:
    return stored - sum(1 for index in collapsed if index < stored)


def _unpaired_points(
    points: Mapping[tuple[str, int | None, int | None], float],
    kind: str,
    r: int | None,
    p: int | None,
) -> tuple[float, str | None]:
    for k in (kind, "order", "group"):
        if (k, r, p) in points:
            return points[(k, r, p)], None if k == kind else k
    return 0.0, None


def _missing_slot(rows: Sequence[Row], r: int) -> int:
    """After the last row whose reference call comes before ``r``."""
    slot = 0
    for i, row in enumerate(rows):
        if row.reference is not None and row.reference.number - 1 < r:
            slot = i + 1
    return slot
