"""Optional calls and alternative argument values: a reference with several readings.

A reference call marked ``optional: true`` may be made or not; an argument value written
``{"any_of": [v1, v2, ...]}`` may be any of the values (each compared with the comparator the
scoring configuration sets for that argument). Such a reference has several *readings*: each
optional call present or absent, each ``any_of`` argument one of its values. A metric scores
the sample against every reading and keeps the best (the first best, in the order: optional
calls present before absent, alternatives in the written order). So an optional call skipped
costs nothing (the reading without it), made it is not an extra call (the reading with it),
and any metric and order mode keeps its meaning: a score in [0, 1] whose lost points (those
of the chosen reading) sum to 1 - score. A reference without either feature has one reading:
itself, scored exactly as before.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from toolscore.scorer.model import Reference, ReferenceItem, ToolCall

#: Readings scored at most per sample (optional calls and alternatives multiply).
MAX_READINGS = 1024
ANY_OF = "any_of"
COMPARE = "compare"  # {"compare": SPEC, "value": V}: V compared with that comparator


@dataclass(frozen=True, slots=True)
class OptionalCall(ToolCall):
    """A reference call that may be skipped (``optional: true``)."""


def is_any_of(value: Any) -> bool:
    return (
        type(value) is dict
        and len(value) == 1
        and type(value.get(ANY_OF)) is list
        and bool(value[ANY_OF])
    )


def is_compare(value: Any) -> bool:
    return type(value) is dict and len(value) == 2 and COMPARE in value and "value" in value


def has_inline_comparators(reference: Reference) -> bool:
    """Whether an argument of ``reference`` (or one of its alternatives) names a comparator."""
    for call in _flat(reference):
        for value in call.args.values():
            if is_compare(value) or (is_any_of(value) and any(map(is_compare, value[ANY_OF]))):
                return True
    return False


@dataclass(frozen=True, slots=True)
class ComparedCall(ToolCall):
    """A reference call whose arguments in ``comparators`` were written ``{"compare": SPEC,
    "value": V}``: ``args`` holds ``V`` (what pairing sorts and ToolCallF1 compares), and
    ToolCallAccuracy compares them with ``SPEC`` (scorer/arguments.py)."""

    comparators: Mapping[str, Any] = field(default_factory=dict, compare=False)


def plain_values(reference: Reference) -> Reference:
    """``reference`` with each ``{"compare": SPEC, "value": V}`` argument as ``V``, its call a
    :class:`ComparedCall` that keeps ``SPEC``."""

    def plain(c: ToolCall) -> ToolCall:
        specs = {k: v[COMPARE] for k, v in c.args.items() if is_compare(v)}
        if not specs:
            return c
        args = {k: v["value"] if k in specs else v for k, v in c.args.items()}
        return ComparedCall(c.name, args, specs)

    return tuple(
        plain(item) if isinstance(item, ToolCall) else tuple(plain(c) for c in item)
        for item in reference
    )


def has_alternatives(reference: Reference) -> bool:
    """Whether ``reference`` has an optional call or an ``any_of`` argument."""
    for item in reference:
        for call in (item,) if isinstance(item, ToolCall) else item:
            if isinstance(call, OptionalCall) or any(is_any_of(v) for v in call.args.values()):
                return True
    return False


@dataclass(frozen=True, slots=True)
class Reading:
    reference: Reference
    positions: tuple[int, ...]  # the written (flattened) position of each call of the reading
    skipped: tuple[int, ...]  # written positions of the optional calls left out
    chosen: Mapping[str, int]  # "position.argument" -> index of the alternative taken


def count_readings(reference: Reference) -> int:
    calls = _flat(reference)
    optional = sum(isinstance(c, OptionalCall) for c in calls)
    alternatives = [len(v[ANY_OF]) for c in calls for v in c.args.values() if is_any_of(v)]
    return int(2**optional * math.prod(alternatives))


def readings(reference: Reference) -> Iterator[Reading]:
    """Every reading of ``reference`` (at most :data:`MAX_READINGS`: checked by the caller)."""
    calls = _flat(reference)
    optional = [i for i, c in enumerate(calls) if isinstance(c, OptionalCall)]
    choices = [(i, k, len(v[ANY_OF])) for i, c in enumerate(calls) for k, v in c.args.items()
               if is_any_of(v)]  # fmt: skip
    for absent in itertools.product((False, True), repeat=len(optional)):
        skipped = {p for p, out in zip(optional, absent, strict=True) if out}
        for combo in itertools.product(*(range(n) for _, _, n in choices)):
            chosen = {(i, k): a for (i, k, _), a in zip(choices, combo, strict=True)}
            yield _reading(reference, skipped, chosen)


def _reading(
    reference: Reference, skipped: set[int], chosen: Mapping[tuple[int, str], int]
) -> Reading:
    items: list[ReferenceItem] = []
    positions: list[int] = []
    position = 0

    def call(c: ToolCall, at: int) -> ToolCall:
        args = {k: v[ANY_OF][chosen[at, k]] if (at, k) in chosen else v for k, v in c.args.items()}
        return ToolCall(c.name, args)

    for item in reference:
        group = (item,) if isinstance(item, ToolCall) else item
        kept: list[ToolCall] = []
        for c in group:
            if position not in skipped:
                kept.append(call(c, position))
                positions.append(position)
            position += 1
        if kept:
            items.append(kept[0] if isinstance(item, ToolCall) else tuple(kept))
    return Reading(
        tuple(items),
        tuple(positions),
        tuple(sorted(skipped)),
        {f"{i}.{k}": a for (i, k), a in chosen.items()},
    )


def _flat(reference: Reference) -> list[ToolCall]:
    return [c for item in reference for c in ((item,) if isinstance(item, ToolCall) else item)]


Evaluate = Callable[[Reference], tuple[float, dict[str, Any]]]


def best_reading(reference: Reference, evaluate: Evaluate) -> tuple[float, dict[str, Any]]:
    """The best score over the readings of ``reference``, with that reading's explanation
    (its reference positions given as written) and ``details.reading``."""
    best: tuple[float, dict[str, Any], Reading] | None = None
    for reading in readings(reference):
        value, details = evaluate(reading.reference)
        if best is None or value > best[0]:
            best = (value, details, reading)
    assert best is not None  # a reference has at least one reading
    value, details, reading = best
    return value, _as_written(details, reading)


def _as_written(details: dict[str, Any], reading: Reading) -> dict[str, Any]:
    at = reading.positions
    for pair in details.get("pairs", ()):
        pair["expected"] = at[pair["expected"]]
    if "unmatched_expected" in details:
        details["unmatched_expected"] = [at[r] for r in details["unmatched_expected"]]
    for loss in details.get("losses", ()):
        if isinstance(loss.get("expected"), int):
            loss["expected"] = at[loss["expected"]]
    details["reading"] = {"optional_skipped": list(reading.skipped), "any_of": dict(reading.chosen)}
    if reading.skipped:
        details.setdefault("reasons", []).append(
            f"optional call(s) at position {', '.join(map(str, reading.skipped))} not expected "
            "in the best reading"
        )
    return details
