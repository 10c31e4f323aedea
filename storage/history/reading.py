"""Read-only questions about the score history: conversations with their current evaluations."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from sqlalchemy import Connection, select

from toolscore.storage.conversations.tables import conversations, evaluations
from toolscore.storage.history.rows import EvaluationRow, evaluation_from_row


@dataclass(frozen=True, slots=True)
class ConversationOutcome:
    id: str
    status: str
    expectation_id: str | None
    expectation_version: int | None
    error: str | None
    evaluations: tuple[EvaluationRow, ...]  # the current revision's, in the order written


def outcomes(conn: Connection, chunk: int = 500) -> Iterator[ConversationOutcome]:
    """Every conversation, by id, with its current evaluations (in chunks of ``chunk``)."""
    c, e = conversations.c, evaluations.c
    after = ""
    while True:
        rows = conn.execute(
            select(c.id, c.status, c.expectation_id, c.expectation_version, c.error)
            .where(c.id > after)
            .order_by(c.id)
            .limit(chunk)
        ).all()
        if not rows:
            return
        ids = [r.id for r in rows]
        found: dict[str, list[EvaluationRow]] = {i: [] for i in ids}
        query = (
            select(evaluations)
            .where(e.conversation_id.in_(ids), e.is_current.is_(True))
            .order_by(e.conversation_id, e.id)
        )
        for evaluation in conn.execute(query).mappings():
            found[evaluation["conversation_id"]].append(evaluation_from_row(evaluation))
        for r in rows:
            yield ConversationOutcome(
                r.id,
                r.status,
                r.expectation_id,
                r.expectation_version,
                r.error,
                tuple(found[r.id]),
            )
        after = ids[-1]
