"""Score conversations: load their telemetry, reconstruct, match the expectation, write the history.

The scorer's input is built exactly as ``toolscore score`` builds it from a Ragas sample
(``parse_sample`` on the reconstructed message list plus the expectation's reference), so a
conversation scores the same online as its equivalent sample does offline.

Work is split in two so the write transaction stays short: ``_compute`` reads and scores (no
locks held), ``_write`` records a new revision for every conversation still owned by the caller.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Boolean, Connection, Engine, bindparam, case, false, null, select, true

from toolscore.collector.control_calls import DEFAULT as DEFAULT_CONTROL
from toolscore.collector.control_calls import ControlCalls
from toolscore.collector.conversation_keys import normalize_user_input
from toolscore.collector.model import LogRecordData, SpanRecord
from toolscore.collector.reconstruct import ReconstructedCall, reconstruct
from toolscore.scorer import SampleError, ScoringConfig, parse_sample
from toolscore.storage.dialect import bulk_insert
from toolscore.storage.expectations import (
    ExpectationRow,
    find_by_conversation_id,
    find_by_id,
    find_by_user_input,
)
from toolscore.storage.pipeline import (
    STATUS_ERROR,
    STATUS_SCORED,
    STATUS_UNMATCHED,
    conversation_traces,
    conversations,
    evaluations,
    supports_skip_locked,
    tool_calls,
)
from toolscore.storage.storable import TOO_DEEP, escaped_json, storable_json, storable_text
from toolscore.storage.telemetry import load_logs, load_spans

_CHUNK = 500


@dataclass(frozen=True, slots=True)
class ScoreOutcome:
    """What one scoring of one conversation recorded."""

    conversation_id: str
    status: str  # scored | unmatched | error
    revision: int
    expectation_id: str | None = None
    expectation_version: int | None = None
    scores: Mapping[str, float | None] = field(default_factory=dict)  # metric instance -> score
    error: str | None = None


@dataclass(frozen=True, slots=True)
class _Computed:
    conversation_id: str
    status: str
    trace_id: str
    root_span_id: str | None
    first_user_message: str | None = None
    expectation_id: str | None = None
    expectation_version: int | None = None
    evaluations: tuple[dict[str, Any], ...] = ()
    calls: tuple[dict[str, Any], ...] = ()
    error: str | None = None


def _count_reference(reference: Sequence[Any] | None) -> int:
    if not reference:
        return 0
    return sum(len(item) if isinstance(item, tuple) else 1 for item in reference)


def _evaluate(
    config: ScoringConfig, names: Sequence[str] | None, user_input: Any, reference: Any
) -> tuple[tuple[dict[str, Any], ...], str | None]:
    """One evaluation row (without bookkeeping columns) per metric instance; or a sample error."""
    try:
        sample = parse_sample({"user_input": user_input, "reference_tool_calls": reference})
    except SampleError as exc:
        return (), f"cannot build the scorer's sample: {exc}"
    predicted, expected = sample.predicted_tool_calls, sample.reference_tool_calls
    counts = {"predicted_count": len(predicted), "expected_count": _count_reference(expected)}
    rows: list[dict[str, Any]] = []
    for name in names if names is not None else list(config.instances):
        instance = config.instances.get(name)
        if instance is None:
            rows.append(
                {
                    "metric": name,
                    "metric_type": "unknown",
                    "metric_config": {},
                    "score": None,
                    "error": f"the expectation names metric instance {name!r}, which the "
                    f"scoring config does not define (defined: {', '.join(config.instances)})",
                    "details": {},
                    **counts,
                }
            )
            continue
        result = instance.score(predicted, expected)
        rows.append(
            {
                "metric": instance.name,
                "metric_type": instance.type,
                "metric_config": instance.options_dict(),
                "score": result.value,
                "error": result.error,
                "details": dict(result.details),
                **counts,
            }
        )
    return tuple(rows), None


class _Matcher:
    """``storage.expectations.match_expectation``'s rules and order, with the lookups by id and
    by user input memoised for one round (many conversations share them)."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn
        self._by_id: dict[str, ExpectationRow | None] = {}
        self._by_text: dict[str, ExpectationRow | None] = {}

    def match(
        self, reference_id: str | None, conversation_id: str, first_user_message: str | None
    ) -> ExpectationRow | None:
        if reference_id:
            if reference_id not in self._by_id:
                self._by_id[reference_id] = find_by_id(self._conn, reference_id)
            if (found := self._by_id[reference_id]) is not None:
                return found
        if (found := find_by_conversation_id(self._conn, conversation_id)) is not None:
            return found
        # Made storable: a NUL in a query parameter fails the whole statement on PostgreSQL.
        norm = storable_text(normalize_user_input(first_user_message)) if first_user_message else ""
        if not norm:
            return None
        if norm not in self._by_text:
            self._by_text[norm] = find_by_user_input(self._conn, norm)
        return self._by_text[norm]


def _call_rows(calls: Sequence[ReconstructedCall], notes: list[str]) -> tuple[dict[str, Any], ...]:
    """``tool_calls`` rows the database can hold (``toolscore.storage.storable``); each value
    that had to change is named in ``notes``, and ``arguments_raw`` keeps the original
    arguments as ASCII-escaped JSON, so nothing is lost."""
    rows = []
    for c in calls:
        name, call_id = storable_text(c.name), _text_or_none(c.call_id)
        arguments, why = storable_json(c.arguments) if c.arguments is not None else (None, None)
        raw = _text_or_none(c.arguments_raw)
        changed = [
            what
            for what, new, old in (("name", name, c.name), ("call id", call_id, c.call_id))
            if new is not old
        ]
        if why is not None:
            changed.append(f"arguments {why}")
            if raw is None:
                raw = escaped_json(c.arguments) or f"<arguments {TOO_DEEP}: kept in the span only>"
        if raw is not c.arguments_raw and c.arguments_raw is not None:
            changed.append("raw arguments text replaced")
        if changed:
            notes.append(
                f"tool call #{c.position} {name!r}: {', '.join(changed)} (NUL and lone surrogates "
                "are stored as U+FFFD; arguments_raw keeps the original escaped)"
            )
        rows.append(
            {
                "position": c.position,
                "name": name,
                "arguments": arguments,
                "arguments_raw": raw,
                "arguments_ok": c.arguments_ok,
                "call_id": call_id,
                "trace_id": c.trace_id,
                "span_id": c.span_id,
                "convention": c.convention,
            }
        )
    return tuple(rows)


def _text_or_none(text: str | None) -> str | None:
    return None if text is None else storable_text(text)


def _storable_evaluations(
    rows: Sequence[dict[str, Any]], notes: list[str]
) -> tuple[dict[str, Any], ...]:
    """Evaluation rows the database can hold; ``notes`` (what had to change in this
    conversation's stored values) go into every row's details as ``storage_notes``."""
    fixed = []
    for row in rows:
        details, why = storable_json(row["details"])
        if why is not None:
            notes.append(f"{row['metric']} details: {why}")
        fixed.append((row, details if isinstance(details, dict) else {}))
    out = []
    for row, details in fixed:
        if notes:
            details = {**details, "storage_notes": list(notes)}
        out.append({**row, "details": details, "error": _text_or_none(row["error"])})
    return tuple(out)


def _unread_reason(unread: Sequence[str]) -> str:
    shown = "; ".join(unread[:3]) + (f"; and {len(unread) - 3} more" if len(unread) > 3 else "")
    return (
        f"not scored: {len(unread)} part(s) of the telemetry could not be read, so the rebuilt "
        f"conversation is incomplete ({shown})"
    )


def _compute_one(
    matcher: _Matcher,
    row: Mapping[str, Any],
    spans: Sequence[SpanRecord],
    logs: Sequence[LogRecordData],
    config: ScoringConfig,
    control_calls: ControlCalls = DEFAULT_CONTROL,
) -> _Computed:
    base = {
        "conversation_id": row["id"],
        "trace_id": row["last_trace_id"],
        "root_span_id": row["root_span_id"],
    }
    try:
        rec = reconstruct(spans, logs, control_calls=control_calls)
    except Exception as exc:  # a reconstruction bug must not stop the other conversations
        reason = storable_text(f"reconstruction failed: {exc!r}")
        return _Computed(status=STATUS_ERROR, error=reason, **base)
    notes: list[str] = []
    calls = _call_rows(rec.tool_calls, notes)
    first = _text_or_none(rec.first_user_message)
    if first is not rec.first_user_message:
        notes.append("first user message: NUL or lone surrogates stored as U+FFFD")
    expectation = matcher.match(row["reference_id"], row["id"], rec.first_user_message)
    common: dict[str, Any] = {"first_user_message": first, "calls": calls, **base}
    matched: dict[str, Any] = {}
    if expectation is not None:
        matched = {"expectation_id": expectation.id, "expectation_version": expectation.version}
    if rec.unread:  # scoring a conversation with a part missing would score the wrong thing
        reason = storable_text(_unread_reason(rec.unread))
        return _Computed(status=STATUS_ERROR, error=reason, **matched, **common)
    if expectation is None:
        return _Computed(status=STATUS_UNMATCHED, **common)
    names = list(expectation.metrics) if expectation.metrics is not None else None
    rows, error = _evaluate(config, names, list(rec.messages), expectation.reference_tool_calls)
    return _Computed(
        status=STATUS_ERROR if error else STATUS_SCORED,
        evaluations=_storable_evaluations(rows, notes),
        error=_text_or_none(error),
        **matched,
        **common,
    )


def compute(
    conn: Connection,
    ids: Sequence[str],
    config: ScoringConfig,
    *,
    control_calls: ControlCalls = DEFAULT_CONTROL,
    refuse: Mapping[str, str] | None = None,
) -> list[_Computed]:
    """Reconstruct, match and score conversations ``ids`` (reads only); ``control_calls`` says
    which framework control calls count (:func:`toolscore.collector.reconstruct.reconstruct`).
    Conversations in ``refuse`` (id -> reason) are not loaded: they get status ``error`` with
    that reason."""
    c, ct = conversations.c, conversation_traces.c
    refuse = refuse or {}
    rows: list[Mapping[str, Any]] = []
    trace_conv: dict[str, str] = {}
    for i in range(0, len(ids), _CHUNK):
        chunk = ids[i : i + _CHUNK]
        rows.extend(
            dict(m)
            for m in conn.execute(
                select(c.id, c.last_trace_id, c.root_span_id, c.reference_id).where(c.id.in_(chunk))
            ).mappings()
        )
        loaded = [conv_id for conv_id in chunk if conv_id not in refuse]
        for trace_id, conv_id in conn.execute(
            select(ct.trace_id, ct.conversation_id).where(ct.conversation_id.in_(loaded))
        ):
            trace_conv[trace_id] = conv_id
    spans: dict[str, list[SpanRecord]] = defaultdict(list)
    logs: dict[str, list[LogRecordData]] = defaultdict(list)
    trace_ids = sorted(trace_conv)
    for span in load_spans(conn, trace_ids):
        spans[trace_conv[span.trace_id]].append(span)
    for log in load_logs(conn, trace_ids):
        if log.trace_id in trace_conv:
            logs[trace_conv[log.trace_id]].append(log)
    matcher = _Matcher(conn)
    return [
        _refused(r, refuse[r["id"]])
        if r["id"] in refuse
        else _compute_one(matcher, r, spans[r["id"]], logs[r["id"]], config, control_calls)
        for r in rows
    ]


def _refused(row: Mapping[str, Any], reason: str) -> _Computed:
    return _Computed(
        conversation_id=row["id"],
        status=STATUS_ERROR,
        trace_id=row["last_trace_id"],
        root_span_id=row["root_span_id"],
        error=storable_text(reason),
    )


def _lock_owned(conn: Connection, ids: Sequence[str], claimed_by: str | None) -> dict[str, int]:
    """Lock the conversations about to get a revision (those still claimed by ``claimed_by``)
    and read their current revisions."""
    c = conversations.c
    owner = c.claimed_by == claimed_by if claimed_by is not None else true()
    if supports_skip_locked(conn):
        # PostgreSQL: a row lock that writes no new row version (with autovacuum slow or off,
        # every extra version of a hot row slows the claim queries down).
        pick = select(c.id, c.revision).where(c.id.in_(ids), owner).with_for_update()
        return {i: r for i, r in conn.execute(pick)}
    # SQLite: the first statement is a write, so the transaction takes the write lock before
    # anything is read (a read first could be upgraded too late and fail with SQLITE_BUSY).
    lock = conversations.update().where(c.id.in_(ids), owner).values(revision=c.revision)
    return {i: r for i, r in conn.execute(lock.returning(c.id, c.revision))}


def write(
    conn: Connection,
    computed: Sequence[_Computed],
    *,
    now: dt.datetime,
    claimed_by: str | None = None,
    seen_ns: Mapping[str, int] | None = None,
) -> list[ScoreOutcome]:
    """Record a new revision for each computed conversation, in the caller's transaction.

    With ``claimed_by``, only conversations still claimed by that worker are written (a claim
    whose lease expired was taken over: the other worker's result wins) and the claim is
    released; ``needs_scoring`` stays true when a span arrived after ``seen_ns`` was read.
    """
    if not computed:
        return []
    c = conversations.c
    ids = [x.conversation_id for x in computed]
    owned = _lock_owned(conn, ids, claimed_by)
    todo = [x for x in computed if x.conversation_id in owned]
    if not todo:
        return []
    todo_ids = [x.conversation_id for x in todo]
    conn.execute(
        evaluations.update()
        .where(evaluations.c.conversation_id.in_(todo_ids), evaluations.c.is_current == true())
        .values(is_current=false())
    )
    eval_rows, call_rows, conv_rows = [], [], []
    outcomes = []
    for x in todo:
        rev = owned[x.conversation_id] + 1
        for e in x.evaluations:
            eval_rows.append(
                {
                    **e,
                    "conversation_id": x.conversation_id,
                    "revision": rev,
                    "is_current": True,
                    "trace_id": x.trace_id,
                    "root_span_id": x.root_span_id,
                    "expectation_id": x.expectation_id,
                    "expectation_version": x.expectation_version,
                    "created_at": now,
                }
            )
        call_rows += [{**k, "conversation_id": x.conversation_id, "revision": rev} for k in x.calls]
        seen = (seen_ns or {}).get(x.conversation_id)
        conv_rows.append(
            {
                "b_id": x.conversation_id,
                "b_status": x.status,
                "b_revision": rev,
                "b_scored_at": now,
                "b_expectation_id": x.expectation_id,
                "b_expectation_version": x.expectation_version,
                "b_first_user_message": x.first_user_message,
                "b_error": x.error,
                "b_seen": seen if seen is not None else -1,
                "b_release": seen is not None,
            }
        )
        outcomes.append(
            ScoreOutcome(
                conversation_id=x.conversation_id,
                status=x.status,
                revision=rev,
                expectation_id=x.expectation_id,
                expectation_version=x.expectation_version,
                scores={e["metric"]: e["score"] for e in x.evaluations},
                error=x.error,
            )
        )
    bulk_insert(conn, evaluations, eval_rows)
    bulk_insert(conn, tool_calls, call_rows)
    release = bindparam("b_release", type_=Boolean())
    conn.execute(
        conversations.update()
        .where(c.id == bindparam("b_id"))
        .values(
            status=bindparam("b_status"),
            revision=bindparam("b_revision"),
            scored_at=bindparam("b_scored_at"),
            expectation_id=bindparam("b_expectation_id"),
            expectation_version=bindparam("b_expectation_version"),
            first_user_message=bindparam("b_first_user_message"),
            error=bindparam("b_error"),
            claimed_by=case((release, null()), else_=c.claimed_by),
            claimed_until=case((release, null()), else_=c.claimed_until),
            # A span that arrived while we scored keeps the conversation pending.
            needs_scoring=case(
                (release, c.last_span_received_ns != bindparam("b_seen")),
                else_=c.needs_scoring,
            ),
        ),
        conv_rows,
    )
    return outcomes


def score_conversation(
    engine_or_conn: Engine | Connection,
    conversation_id: str,
    config: ScoringConfig,
    *,
    now: dt.datetime,
) -> ScoreOutcome | None:
    """Score one conversation now, as a new revision (``None`` if it does not exist).

    Does not look at claims and leaves ``needs_scoring`` as it is: for re-scoring on demand.
    Given a connection, works in the caller's transaction; given an engine, commits its own.
    """
    if isinstance(engine_or_conn, Engine):
        with engine_or_conn.connect() as read:
            computed = compute(read, [conversation_id], config)
            read.rollback()
        with engine_or_conn.begin() as conn:
            outcomes = write(conn, computed, now=now)
    else:
        computed = compute(engine_or_conn, [conversation_id], config)
        outcomes = write(engine_or_conn, computed, now=now)
    return outcomes[0] if outcomes else None
