"""Not evaluable is not zero: a metric that compares arguments gives no score, labelled
``not_evaluated`` with the reason, when arguments of the calls it would compare were not recorded
(content capture off: docs/conventions.md, pitfall 6). Scoring them as ``{}`` would report every
argument wrong. Metrics that ignore the arguments of those tools still score.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from toolscore.collector.reconstruction.conventions.capture import capture_hint
from toolscore.collector.reconstruction.rebuild import ReconstructedCall
from toolscore.scorer import MetricInstance
from toolscore.scorer.comparators import Ignore
from toolscore.storage.history.rows import CallRow, EvaluationRow

__all__ = [
    "LABEL_NOT_EVALUATED",
    "Unrecorded",
    "compares_arguments",
    "mark_not_evaluated",
    "not_evaluated",
    "unrecorded",
]

LABEL_NOT_EVALUATED = "not_evaluated"  # as collector/export/attributes.py names it
_SHOWN = 5


@dataclass(frozen=True, slots=True)
class Unrecorded:
    """A call whose arguments were not recorded, and how to record them."""

    position: int
    name: str
    hint: str | None


def unrecorded(
    calls: Sequence[ReconstructedCall], stored: Sequence[CallRow] = ()
) -> list[Unrecorded]:
    """The calls without recorded arguments: ``stored`` calls (carried over from pruned
    telemetry: no arguments and no raw text) then the rebuilt ``calls``."""
    out = [
        Unrecorded(r.position, r.name, capture_hint(r.convention or "", None))
        for r in stored
        if r.arguments is None and r.arguments_raw is None
    ]
    out += [
        Unrecorded(c.position, c.name, c.capture_hint) for c in calls if not c.arguments_recorded
    ]
    return out


def compares_arguments(instance: MetricInstance, tool: str) -> bool:
    """Whether ``instance``'s score depends on the arguments of calls of ``tool``."""
    policy = getattr(instance.metric, "arguments", None)
    if policy is None:  # ToolCallF1: sets of (name, arguments)
        return True
    tool_policy = policy.tools.get(tool)
    if tool_policy is None:
        comparators = [policy.default]
    else:
        fallback = tool_policy.default if tool_policy.default is not None else policy.default
        comparators = [*tool_policy.args.values(), fallback]
    return not all(isinstance(c, Ignore) for c in comparators)


def not_evaluated(details: object) -> bool:
    """Whether an evaluation's details say it was not evaluated."""
    return isinstance(details, Mapping) and details.get("label") == LABEL_NOT_EVALUATED


def mark_not_evaluated(
    rows: Sequence[EvaluationRow],
    instances: Mapping[str, MetricInstance],
    missing: Sequence[Unrecorded],
    total: int,
) -> tuple[EvaluationRow, ...]:
    """``rows`` (one per metric instance) with those that compare unrecorded arguments replaced
    by a ``not_evaluated`` row: no score, the label and the reason in ``details``. ``total``:
    how many calls the conversation has."""
    if not missing:
        return tuple(rows)
    out: list[EvaluationRow] = []
    for row in rows:
        instance = instances.get(row.metric)
        if row.error or instance is None:
            out.append(row)  # not scorable for another reason, which it already gives
            continue
        compared = [c for c in missing if compares_arguments(instance, c.name)]
        if not compared:
            out.append(row)
            continue
        out.append(
            dataclasses.replace(row, score=None, error=None, details=_details(compared, total))
        )
    return tuple(out)


def _details(missing: Sequence[Unrecorded], total: int) -> Any:
    shown = ", ".join(f"#{c.position} {c.name}" for c in missing[:_SHOWN])
    more = f" and {len(missing) - _SHOWN} more" if len(missing) > _SHOWN else ""
    hints = list(dict.fromkeys(c.hint for c in missing if c.hint))
    reason = (
        f"not evaluated: the arguments of {len(missing)} of {total} call(s) were not "
        f"recorded ({shown}{more}) and this metric compares arguments; to record them, "
        + "; ".join(hints or ["turn on the instrumentation's content capture"])
    )
    return {
        "label": LABEL_NOT_EVALUATED,
        "reason": reason,
        "arguments_not_recorded": [{"position": c.position, "name": c.name} for c in missing],
    }
