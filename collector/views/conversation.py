"""What ``toolscore conversations`` and ``toolscore show`` display, read from the database.

The use cases of the two commands (``collector/commands/conversations.py`` parses their flags and
formats the result): the recent conversations with their current score per metric instance,
and one conversation in full (a revision's calls and scores, the reference calls of the
expectation version they used, the messages rebuilt from the stored spans).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from toolscore.collector.reconstruction.control_calls import DEFAULT as DEFAULT_CONTROL
from toolscore.collector.reconstruction.control_calls import ControlCalls

if TYPE_CHECKING:
    from toolscore.storage.database import Connection

# conversation id -> metric instance -> (score, error)
Scores = dict[str, dict[str, tuple[float | None, str | None]]]


def iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def why_unmatched(row: Mapping[Any, Any]) -> str | None:
    """Why the last scoring found no expectation (shown while the status is unmatched)."""
    return row["unmatched_reason"] if row["status"] == "unmatched" else None


def recent_conversations(
    conn: Connection, limit: int, status: str | None
) -> tuple[list[Mapping[str, Any]], list[str], Scores]:
    """The ``limit`` most recent conversations (of ``status``), newest first, the metric
    instances of their current scores in the order they were written (the scoring
    configuration's order), and each conversation's current (score, error) per instance."""
    from toolscore.storage.conversations import reading as repo

    rows = repo.recent(conn, limit=limit, status=status)
    metrics: list[str] = []
    by_conversation: Scores = {}
    for found in repo.current_scores(conn, [r["id"] for r in rows]):
        if found.metric not in metrics:
            metrics.append(found.metric)
        by_conversation.setdefault(found.conversation_id, {})[found.metric] = (
            found.score,
            found.error,
        )
    return list(rows), metrics, by_conversation


def load_conversation(
    conn: Connection,
    conversation_id: str,
    *,
    revision: int | None,
    messages: bool,
    control_calls: ControlCalls = DEFAULT_CONTROL,
    spans: bool = False,
) -> dict[str, Any] | None:
    """What ``show`` prints: that revision's calls and scores (``revision`` None: the current
    ones), the reference calls of the expectation version they used and, with ``messages``,
    the messages rebuilt from the stored spans (with ``spans``, the spans each call came from:
    collector/views/spans.py); ``None`` when there is no such conversation."""
    from toolscore.storage.conversations import reading as repo
    from toolscore.storage.expectations.repository import get_version

    row = repo.conversation(conn, conversation_id)
    if row is None:
        return None
    calls = repo.revision_calls(conn, conversation_id, revision)
    evals = repo.revision_evaluations(conn, conversation_id, revision)
    # The expectation version the shown scores used (an earlier revision may have used another).
    expectation: tuple[Any, Any] = (row["expectation_id"], row["expectation_version"])
    if evals:
        expectation = (evals[0]["expectation_id"], evals[0]["expectation_version"])
    elif revision is not None and revision != row["revision"]:
        expectation = (None, None)
    reference = None
    if expectation[0] is not None and expectation[1] is not None:
        found = get_version(conn, expectation[0], expectation[1])
        if found is not None:
            reference = found.reference_tool_calls
    data: dict[str, Any] = {
        "conversation": {
            k: iso(v) if isinstance(v, datetime) else v
            for k, v in row.items()
            if k not in ("claimed_by", "claimed_until")
        },
        "tool_calls": [
            {
                k: c[k]
                for k in (
                    "revision",
                    "position",
                    "name",
                    "arguments",
                    "arguments_raw",
                    "arguments_ok",
                    "call_id",
                    "trace_id",
                    "span_id",
                    "convention",
                )
            }
            for c in calls
        ],
        "revision": revision,
        "expectation": {"id": expectation[0], "version": expectation[1]},
        "reference_tool_calls": reference,
        "evaluations": [
            {
                "metric": e["metric"],
                "metric_type": e["metric_type"],
                "score": e["score"],
                "error": e["error"],
                "details": e["details"],
                "revision": e["revision"],
                "expectation_id": e["expectation_id"],
                "expectation_version": e["expectation_version"],
                "created_at": iso(e["created_at"]),
            }
            for e in evals
        ],
    }
    if messages or spans:
        data.update(_rebuilt(conn, conversation_id, control_calls, messages, spans))
    return data


def _rebuilt(
    conn: Connection, conversation_id: str, control: ControlCalls, messages: bool, spans: bool
) -> dict[str, Any]:
    """``messages`` and/or ``spans`` (which span each call came from) of the stored spans."""
    from toolscore.collector.views.spans import call_rules, span_rows

    rebuilt = _rebuild(conn, conversation_id, control)
    out: dict[str, Any] = {}
    if messages:
        out["messages"] = None if rebuilt is None else [dict(m) for m in rebuilt[1].messages]
    if spans:
        out["spans"] = None if rebuilt is None else span_rows(*rebuilt)
        out["call_rules"] = None if rebuilt is None else call_rules(rebuilt[1])
    return out


def messages_of(
    conn: Connection, conversation_id: str, *, control_calls: ControlCalls = DEFAULT_CONTROL
) -> list[dict[str, Any]] | None:
    """The conversation's messages rebuilt from its stored spans (None when none are stored)."""
    rebuilt = _rebuild(conn, conversation_id, control_calls)
    return None if rebuilt is None else [dict(m) for m in rebuilt[1].messages]


def _rebuild(conn: Connection, conversation_id: str, control_calls: ControlCalls) -> Any:
    """(stored spans, their reconstruction), or None when no span is stored."""
    from toolscore.collector.reconstruction.rebuild import reconstruct
    from toolscore.storage.conversations.reading import trace_ids as traces_of
    from toolscore.storage.telemetry.spans import load_logs, load_spans

    trace_ids = traces_of(conn, conversation_id)
    spans = load_spans(conn, trace_ids) if trace_ids else []
    if not spans:
        return None
    return spans, reconstruct(spans, load_logs(conn, trace_ids), control_calls=control_calls)
