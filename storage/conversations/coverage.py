"""Coverage: how much of the traffic found an expectation, per service and agent name, and the
most frequent unmatched first messages and tool sequences (candidates for new expectations).

The outcome of a conversation is ``matched`` (it has an expectation), ``unmatched``, ``open``
(not scored yet) or ``error`` (scoring failed before a match); the ``expectation_coverage``
view (migration 0018) counts the same.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, case, func, select

from toolscore.storage.conversations.tables import STATUS_UNMATCHED, conversations, tool_calls
from toolscore.storage.conversations.user_input import normalize_user_input
from toolscore.storage.plumbing.chunks import chunks

UNKNOWN = "(unknown)"
OUTCOMES = ("matched", "unmatched", "open", "error")


@dataclass(frozen=True, slots=True)
class CoverageLine:
    """One service and agent: conversations by outcome, and why the unmatched ones were."""

    service: str
    agent: str
    outcomes: dict[str, int]
    reasons: tuple[tuple[str, int], ...] = field(default=())  # most frequent first

    @property
    def seen(self) -> int:
        return sum(self.outcomes.values())

    @property
    def matched(self) -> int:
        return self.outcomes.get("matched", 0)

    @property
    def unmatched(self) -> int:
        return self.outcomes.get("unmatched", 0)


def _outcome() -> Any:
    c = conversations.c
    return case(
        (c.expectation_id.is_not(None), "matched"),
        (c.status == "unmatched", "unmatched"),
        (c.status == "open", "open"),
        else_="error",
    )


def coverage(
    conn: Connection,
    *,
    since: dt.datetime | None = None,
    until: dt.datetime | None = None,
    reasons: int = 3,
) -> list[CoverageLine]:
    """Conversations active in ``since``..``until`` (last span time; all when None) by service
    and agent, most seen first, each with its ``reasons`` most frequent unmatched reasons."""
    c = conversations.c
    service = func.coalesce(c.service_name, UNKNOWN)
    agent = func.coalesce(c.agent_name, UNKNOWN)
    outcome = _outcome()
    stmt = select(service, agent, outcome, c.unmatched_reason, func.count()).group_by(
        service, agent, outcome, c.unmatched_reason
    )
    if since is not None:
        stmt = stmt.where(c.last_span_at >= since)
    if until is not None:
        stmt = stmt.where(c.last_span_at < until)
    outcomes: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    why: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    for s, a, o, reason, n in conn.execute(stmt):
        outcomes[s, a][o] += int(n)
        if o == "unmatched":
            why[s, a][reason or "unknown"] += int(n)
    lines = [
        CoverageLine(s, a, dict(counts), tuple(why[s, a].most_common(reasons)))
        for (s, a), counts in outcomes.items()
    ]
    return sorted(lines, key=lambda line: (-line.seen, line.service, line.agent))


def coverage_counts(conn: Connection) -> list[tuple[str, str, str, int]]:
    """``(service, agent, outcome, conversations)`` over every conversation (``/metrics``)."""
    c = conversations.c
    service = func.coalesce(c.service_name, UNKNOWN)
    agent = func.coalesce(c.agent_name, UNKNOWN)
    outcome = _outcome()
    stmt = select(service, agent, outcome, func.count()).group_by(service, agent, outcome)
    return [(str(s), str(a), str(o), int(n)) for s, a, o, n in conn.execute(stmt)]


@dataclass(frozen=True, slots=True)
class Candidate:
    """A frequent unmatched first message (normalised) or tool sequence."""

    text: str
    conversations: int
    example: str  # one conversation id


def unmatched_messages(conn: Connection, *, limit: int, scan: int) -> list[Candidate]:
    """The most frequent first user messages (as matching folds them) of the ``scan`` unmatched
    conversations active most recently."""
    c = conversations.c
    rows = conn.execute(
        select(c.id, c.first_user_message)
        .where(c.status == STATUS_UNMATCHED, c.first_user_message.is_not(None))
        .order_by(c.last_span_at.desc())
        .limit(scan)
    )
    return _top(((cid, normalize_user_input(text)) for cid, text in rows), limit)


def unmatched_tool_sequences(conn: Connection, *, limit: int, scan: int) -> list[Candidate]:
    """The most frequent sequences of tool names (current revision) of the ``scan`` unmatched
    conversations active most recently."""
    c = conversations.c
    heads = conn.execute(
        select(c.id, c.revision)
        .where(c.status == STATUS_UNMATCHED)
        .order_by(c.last_span_at.desc())
        .limit(scan)
    ).all()
    revision = {cid: rev for cid, rev in heads}
    names: dict[str, list[str]] = defaultdict(list)
    t = tool_calls.c
    for chunk in chunks([cid for cid, _ in heads]):
        rows = conn.execute(
            select(t.conversation_id, t.revision, t.name)
            .where(t.conversation_id.in_(chunk))
            .order_by(t.conversation_id, t.position)
        )
        for cid, rev, name in rows:
            if revision.get(cid) == rev:
                names[cid].append(name)
    sequences = ((cid, " -> ".join(names[cid]) or "(no tool call)") for cid, _ in heads)
    return _top(sequences, limit)


def _top(items: Any, limit: int) -> list[Candidate]:
    counts: Counter[str] = Counter()
    example: dict[str, str] = {}
    for cid, text in items:
        if text:
            counts[text] += 1
            example.setdefault(text, cid)
    return [Candidate(text, n, example[text]) for text, n in counts.most_common(limit)]


def top_labels(values: Sequence[tuple[str, int]], keep: int) -> set[str]:
    """The ``keep`` values with the most conversations (ties by name): bounded labels."""
    total: Counter[str] = Counter()
    for value, n in values:
        total[value] += n
    ranked = sorted(total.items(), key=lambda item: (-item[1], item[0]))
    return {value for value, _ in ranked[:keep]}
