"""The evaluations repository: writing a conversation's new revision of its score history.

A revision is written in one short transaction: lock the conversations the caller still owns,
mark their previous evaluations not current (only conversations written before have any),
insert the new ``evaluations`` and ``tool_calls`` rows (one ``COPY`` each on PostgreSQL:
``storage.plumbing.row_lists.insert_bound``) and update each conversation's status, revision,
expectation and claim (one statement on PostgreSQL, an ``executemany`` on SQLite:
``storage.plumbing.row_lists.update_each``). The rows are made and their values bound before
the transaction opens (:func:`prepare_revisions`), so that it holds its locks (on SQLite, the
one write lock) for the statements only.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    Connection,
    Integer,
    Text,
    and_,
    bindparam,
    case,
    false,
    func,
    null,
    select,
    true,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.sql.elements import ColumnElement
from sqlalchemy.types import TypeEngine

from toolscore.storage.base import UtcDateTime
from toolscore.storage.conversations.tables import conversations, evaluations, tool_calls
from toolscore.storage.history.rows import CallRow, EvaluationRow, Revision
from toolscore.storage.plumbing.dialect import in_ids, lock_statement
from toolscore.storage.plumbing.row_lists import insert_bound, row_binder, update_each


def _lock_owned(conn: Connection, ids: Sequence[str], claimed_by: str | None) -> dict[str, int]:
    """Lock the conversations about to get a revision (those still claimed by ``claimed_by``)
    and read their current revisions."""
    stmt = _lock(conn.dialect, claimed_by is not None)
    return {i: r for i, r in conn.execute(stmt, {"ids": list(ids), "owner": claimed_by})}


@cache
def _lock(dialect: Dialect, owned: bool) -> Any:
    c = conversations.c
    owner = c.claimed_by == bindparam("owner") if owned else true()
    ids = in_ids(dialect, c.id)
    return lock_statement(dialect, conversations, [c.id, c.revision], and_(ids, owner), c.revision)


@dataclass(frozen=True, slots=True)
class PreparedRevision:
    """One conversation's revision as rows bound for the database (:func:`prepare_revisions`),
    made before the write transaction opens: the transaction only sets the revision number."""

    conversation_id: str
    evaluations: list[list[Any]]  # rows of EVALUATION_COLUMNS
    calls: list[list[Any]]  # rows of CALL_COLUMNS
    conversation: dict[str, Any]  # the conversation's update (_update_conversation)


EVALUATION_COLUMNS = (
    "metric", "metric_type", "metric_config", "score", "error", "details", "predicted_count",
    "expected_count", "conversation_id", "revision", "is_current", "trace_id", "root_span_id",
    "expectation_id", "expectation_version", "created_at",
)  # fmt: skip
CALL_COLUMNS = (
    "position", "name", "arguments", "arguments_raw", "arguments_ok", "call_id", "trace_id",
    "span_id", "convention", "conversation_id", "revision",
)  # fmt: skip


def write_revisions(
    conn: Connection,
    revisions: Sequence[Revision],
    *,
    now: dt.datetime,
    claimed_by: str | None = None,
    seen_ns: Mapping[str, int] | None = None,
    rows: Sequence[PreparedRevision] | None = None,
) -> dict[str, int]:
    """Record a new revision for each conversation, in the caller's transaction; returns the
    revision number written for each conversation written, in the order of ``revisions``.

    With ``claimed_by``, only conversations still claimed by that worker are written (a claim
    whose lease expired was taken over: the other worker's result wins) and the claim is
    released; ``needs_scoring`` stays true when a span arrived after ``seen_ns`` was read.
    ``rows``: ``revisions`` already made into rows (:func:`prepare_revisions` with ``now`` and
    ``seen_ns``, before the caller opened its transaction); else they are made here.
    """
    if rows is None:
        rows = prepare_revisions(conn.dialect, revisions, now=now, seen_ns=seen_ns)
    return write_prepared(conn, rows, claimed_by=claimed_by)


def prepare_revisions(
    dialect: Dialect,
    revisions: Sequence[Revision],
    *,
    now: dt.datetime,
    seen_ns: Mapping[str, int] | None = None,
) -> list[PreparedRevision]:
    """``revisions`` as bound rows (values bound by the columns' own types), for
    :func:`write_prepared`; no database access, so a caller makes them before it opens the
    write transaction (on SQLite, the one write lock is then held for the statements only)."""
    bind_evaluation = row_binder(dialect, evaluations, EVALUATION_COLUMNS)
    bind_call = row_binder(dialect, tool_calls, CALL_COLUMNS)
    out = []
    for x in revisions:
        seen = (seen_ns or {}).get(x.conversation_id)
        keys = (
            x.conversation_id, 0, True, x.trace_id, x.root_span_id, x.expectation_id,
            x.expectation_version, now,
        )  # fmt: skip
        out.append(
            PreparedRevision(
                x.conversation_id,
                [bind_evaluation((*_evaluation_values(e), *keys)) for e in x.evaluations],
                [bind_call((*_call_values(c), x.conversation_id, 0)) for c in x.calls],
                _conversation_row(x, 0, now, seen),
            )
        )
    return out


_EVALUATION_REVISION = EVALUATION_COLUMNS.index("revision")
_CALL_REVISION = CALL_COLUMNS.index("revision")


def write_prepared(
    conn: Connection, prepared: Sequence[PreparedRevision], *, claimed_by: str | None = None
) -> dict[str, int]:
    """:func:`write_revisions` of revisions made by :func:`prepare_revisions` (with the same
    dialect), in the caller's transaction."""
    if not prepared:
        return {}
    owned = _lock_owned(conn, [x.conversation_id for x in prepared], claimed_by)
    todo = [x for x in prepared if x.conversation_id in owned]
    if not todo:
        return {}
    # Revision 0: never written, so no evaluation of it is current (most rounds: none to look for)
    if rescored := [x.conversation_id for x in todo if owned[x.conversation_id] > 0]:
        conn.execute(_supersede(conn.dialect), {"ids": rescored})
    written: dict[str, int] = {}
    for x in todo:  # an Integer column binds a number as it is (no bind processor)
        rev = written[x.conversation_id] = owned[x.conversation_id] + 1
        for row in x.evaluations:
            row[_EVALUATION_REVISION] = rev
        for row in x.calls:
            row[_CALL_REVISION] = rev
        x.conversation["b_revision"] = rev
    eval_rows = [row for x in todo for row in x.evaluations]
    insert_bound(conn, evaluations, EVALUATION_COLUMNS, eval_rows)
    insert_bound(conn, tool_calls, CALL_COLUMNS, [row for x in todo for row in x.calls])
    conv_rows = [x.conversation for x in todo]
    update_each(conn, "evaluations.conversation", _update_conversation, _ROW_TYPES, conv_rows)
    return written


def _evaluation_values(e: EvaluationRow) -> tuple[Any, ...]:
    return (
        e.metric, e.metric_type, e.metric_config, e.score, e.error, e.details,
        e.predicted_count, e.expected_count,
    )  # fmt: skip


def _call_values(c: CallRow) -> tuple[Any, ...]:
    return (
        c.position, c.name, c.arguments, c.arguments_raw, c.arguments_ok, c.call_id, c.trace_id,
        c.span_id, c.convention,
    )  # fmt: skip


def _conversation_row(x: Revision, rev: int, now: dt.datetime, seen: int | None) -> dict[str, Any]:
    return {
        "b_id": x.conversation_id,
        "b_status": x.status,
        "b_revision": rev,
        "b_scored_at": now,
        "b_expectation_id": x.expectation_id,
        "b_expectation_version": x.expectation_version,
        "b_first_user_message": x.first_user_message,
        "b_error": x.error,
        "b_unmatched_reason": x.unmatched_reason,
        "b_warning": x.warning,
        "b_service_name": x.service_name,
        "b_agent_name": x.agent_name,
        "b_seen": seen if seen is not None else -1,
        "b_release": seen is not None,
    }


def _update_conversation(row: Callable[[str], ColumnElement[Any]]) -> Any:
    """The update of a written conversation, its values taken from ``row`` (see
    ``storage.plumbing.dialect.update_each``)."""
    c = conversations.c
    release = row("b_release")
    return (
        conversations.update()
        .where(c.id == row("b_id"))
        .values(
            status=row("b_status"),
            revision=row("b_revision"),
            scored_at=row("b_scored_at"),
            expectation_id=row("b_expectation_id"),
            expectation_version=row("b_expectation_version"),
            first_user_message=row("b_first_user_message"),
            error=row("b_error"),
            unmatched_reason=row("b_unmatched_reason"),
            warning=row("b_warning"),
            # kept when a revision sees neither (its older spans pruned, say)
            service_name=func.coalesce(row("b_service_name"), c.service_name),
            agent_name=func.coalesce(row("b_agent_name"), c.agent_name),
            claimed_by=case((release, null()), else_=c.claimed_by),
            claimed_until=case((release, null()), else_=c.claimed_until),
            # A span that arrived while we scored keeps the conversation pending.
            needs_scoring=case(
                (release, c.last_span_received_ns != row("b_seen")),
                else_=c.needs_scoring,
            ),
        )
    )


_ROW_TYPES: dict[str, TypeEngine[Any]] = {
    "b_id": Text(),
    "b_status": Text(),
    "b_revision": Integer(),
    "b_scored_at": UtcDateTime(),
    "b_expectation_id": Text(),
    "b_expectation_version": Integer(),
    "b_first_user_message": Text(),
    "b_error": Text(),
    "b_unmatched_reason": Text(),
    "b_warning": Text(),
    "b_service_name": Text(),
    "b_agent_name": Text(),
    "b_seen": BigInteger(),
    "b_release": Boolean(),
}


# Built once (building costs more than running it): the previous revision is no longer current.
@cache
def _supersede(dialect: Dialect) -> Any:
    e = evaluations.c
    where = and_(in_ids(dialect, e.conversation_id), e.is_current == true())
    return evaluations.update().where(where).values(is_current=false())


def history(
    conn: Connection,
    *,
    since: dt.datetime | None = None,
    expectation_id: str | None = None,
    current_only: bool = False,
) -> Iterator[dict[str, Any]]:
    """Evaluation rows (every column) in id order, streamed in batches of 1,000."""
    e = evaluations.c
    query = select(evaluations).order_by(e.id)
    if since is not None:
        query = query.where(e.created_at >= since)
    if expectation_id:
        query = query.where(e.expectation_id == expectation_id)
    if current_only:
        query = query.where(e.is_current.is_(True))
    for row in conn.execution_options(yield_per=1000).execute(query).mappings():
        yield dict(row)
