"""Promote a conversation to a reference: what it actually called, as an expectation.

``promote`` rebuilds the conversation from its stored telemetry (as scoring does, with what
retention carried of pruned telemetry) and returns the expectation a reviewer would write for
it: its calls in order, its first user message, and a ``match`` by conversation id, by exact
first user message, or by a regex on that message. A conversation whose rebuild carries a
warning (a part that could not be read, arguments that could not be decoded, tool-like spans
without a call) is refused unless forced: the reference would encode a reconstruction problem.
``expectations_yaml`` writes expectations in the ``refs import`` YAML format.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import yaml

from toolscore.collector.pipeline.carry import after_pruning
from toolscore.collector.pipeline.loading import load_telemetry
from toolscore.collector.reconstruction.control_calls import DEFAULT as DEFAULT_CONTROL
from toolscore.collector.reconstruction.control_calls import ControlCalls
from toolscore.collector.reconstruction.rebuild import Reconstruction, reconstruct
from toolscore.storage.database import Connection, Engine
from toolscore.storage.expectations.repository import ExpectationData

MatchBy = Literal["conversation_id", "user_input", "regex"]
MATCH_BY: tuple[MatchBy, ...] = ("conversation_id", "user_input", "regex")


class PromoteError(ValueError):
    """The conversation cannot be promoted (``problems`` says why, one reason a line)."""

    def __init__(self, message: str, problems: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.problems = tuple(problems)


@dataclass(frozen=True, slots=True)
class Promotion:
    expectation: ExpectationData
    warnings: tuple[str, ...]  # what the rebuild warned of (non-empty only when forced)


def promote(
    conn: Connection,
    conversation_id: str,
    *,
    expectation_id: str | None = None,
    match_by: MatchBy = "conversation_id",
    force: bool = False,
    control_calls: ControlCalls = DEFAULT_CONTROL,
) -> Promotion:
    """The expectation ``conversation_id`` would be the reference for, or ``PromoteError``."""
    heads, spans, logs, pruned = load_telemetry(conn, [conversation_id])
    if not heads:
        raise PromoteError(f"no conversation {conversation_id!r}")
    rec = reconstruct(spans[conversation_id], logs[conversation_id], control_calls=control_calls)
    _, kept, rec = after_pruning(rec, pruned.get(conversation_id))
    calls = [{"name": c.name, "args": c.arguments or {}} for c in kept]
    calls += [{"name": c.name, "args": c.arguments or {}} for c in rec.tool_calls]
    warnings = _warnings(rec, bool(calls))
    if warnings and not force:
        raise PromoteError(
            f"conversation {conversation_id!r} was rebuilt with warnings (--force to promote "
            "it anyway)",
            warnings,
        )
    first = rec.first_user_message
    item = ExpectationData(
        id=expectation_id or f"promoted-{conversation_id}",
        reference_tool_calls=calls,
        user_input=first,
        match=_match(conversation_id, first, match_by),
    )
    return Promotion(item, warnings)


def promote_conversation(
    engine: Engine, conversation_id: str, *, match: str = "conversation_id", force: bool = False
) -> str:
    """The expectation of :func:`promote` as ``refs import`` YAML text (for a front end that
    shows it to review); ``PromoteError``'s message then lists the warnings too."""
    if match not in MATCH_BY:
        raise PromoteError(f"unknown match {match!r} (expected {', '.join(MATCH_BY)})")
    with engine.connect() as conn:
        try:
            found = promote(conn, conversation_id, match_by=match, force=force)
        except PromoteError as exc:
            raise PromoteError("; ".join([str(exc), *exc.problems]), exc.problems) from None
        finally:
            conn.rollback()
    return expectations_yaml([found.expectation])


def _warnings(rec: Reconstruction, has_calls: bool) -> tuple[str, ...]:
    found = [*rec.unread, *(w for w in rec.warnings if w not in rec.unread)]
    if rec.unrecognised and not has_calls:
        found.append(rec.unrecognised)
    found += [
        f"call #{c.position} {c.name}: arguments not recorded"
        + (f" ({c.capture_hint})" if c.capture_hint else "")
        for c in rec.tool_calls
        if not c.arguments_recorded
    ]
    return tuple(dict.fromkeys(found))


def _match(conversation_id: str, first: str | None, match_by: MatchBy) -> dict[str, Any]:
    if match_by == "conversation_id":
        return {"conversation_id": conversation_id}
    if not first or not first.strip():
        raise PromoteError(
            f"conversation {conversation_id!r} has no user message to match by {match_by}"
        )
    if match_by == "user_input":
        return {"user_input": first}
    return {"user_input": {"regex": whole_message_regex(first)}}


def whole_message_regex(text: str) -> str:
    """A regex matching ``text`` whole, any run of whitespace as any other: a start to edit
    (replace the parts that vary with named groups)."""
    words = text.split()
    return "^\\s*" + "\\s+".join(re.escape(w) for w in words) + "\\s*$"


def expectations_yaml(items: Sequence[ExpectationData]) -> str:
    """``items`` as a ``refs import`` YAML file (keys in the documented order)."""
    out = []
    for item in items:
        entry: dict[str, Any] = {"id": item.id}
        if item.match is not None:
            entry["match"] = dict(item.match)
        if item.user_input is not None:
            entry["user_input"] = item.user_input
        if item.metrics is not None:
            entry["metrics"] = list(item.metrics)
        entry["reference_tool_calls"] = item.reference_tool_calls
        out.append(entry)
    return yaml.safe_dump(
        {"expectations": out}, sort_keys=False, allow_unicode=True, default_flow_style=False
    )
