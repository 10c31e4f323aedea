"""Score conversations: load their telemetry, reconstruct, match the expectation, write the history.

The scorer's input is built exactly as ``toolscore score`` builds it from a Ragas sample
(``parse_sample`` on the reconstructed message list plus the expectation's reference), so a
conversation scores the same online as its equivalent sample does offline.

Work is split in two so the write transaction stays short: ``_compute`` reads and scores (no
locks held), ``_write`` records a new revision for every conversation still owned by the caller.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from toolscore.collector.pipeline.carry import after_pruning
from toolscore.collector.pipeline.loading import load_within
from toolscore.collector.pipeline.matching import Found, Matcher, identity
from toolscore.collector.pipeline.not_evaluated import mark_not_evaluated, unrecorded
from toolscore.collector.reconstruction.control_calls import DEFAULT as DEFAULT_CONTROL
from toolscore.collector.reconstruction.control_calls import ControlCalls
from toolscore.collector.reconstruction.rebuild import ReconstructedCall, reconstruct
from toolscore.collector.reconstruction.replay import replays_unjoined
from toolscore.scorer import SampleError, ScoringConfig, parse_sample
from toolscore.storage.conversations.reading import ScoringHead
from toolscore.storage.conversations.tables import STATUS_ERROR, STATUS_SCORED, STATUS_UNMATCHED
from toolscore.storage.database import Connection, Engine
from toolscore.storage.expectations.templates import TemplateError, fill
from toolscore.storage.history.evaluations import PreparedRevision, write_revisions
from toolscore.storage.history.rows import CallRow, EvaluationRow, Revision
from toolscore.storage.plumbing.storable import TOO_DEEP, escaped_json, storable_json, storable_text
from toolscore.storage.records import LogRecordData, SpanRecord
from toolscore.storage.retention.spans import Carried


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
    unmatched_reason: str | None = None  # why no expectation was found (status unmatched)
    warning: str | None = None  # why the rebuilt calls may be wrong (every view shows it)


# The result of ``compute``, written by ``write`` (storage.history.evaluations).
_Computed = Revision


def _count_reference(reference: Sequence[Any] | None) -> int:
    if not reference:
        return 0
    return sum(len(item) if isinstance(item, tuple) else 1 for item in reference)


def _evaluate(
    config: ScoringConfig, names: Sequence[str] | None, user_input: Any, reference: Any
) -> tuple[tuple[EvaluationRow, ...], str | None]:
    """One evaluation row per metric instance; or a sample error."""
    try:
        sample = parse_sample({"user_input": user_input, "reference_tool_calls": reference})
    except SampleError as exc:
        return (), f"cannot build the scorer's sample: {exc}"
    predicted, expected = sample.predicted_tool_calls, sample.reference_tool_calls
    n_predicted, n_expected = len(predicted), _count_reference(expected)
    rows: list[EvaluationRow] = []
    for name in names if names is not None else list(config.instances):
        instance = config.instances.get(name)
        if instance is None:
            error = (
                f"the expectation names metric instance {name!r}, which the scoring config "
                f"does not define (defined: {', '.join(config.instances)})"
            )
            rows.append(
                EvaluationRow(name, "unknown", {}, None, error, {}, n_predicted, n_expected)
            )
            continue
        result = instance.score(predicted, expected)
        rows.append(
            EvaluationRow(
                metric=instance.name,
                metric_type=instance.type,
                metric_config=instance.options_dict(),
                score=result.value,
                error=result.error,
                details=dict(result.details),
                predicted_count=n_predicted,
                expected_count=n_expected,
            )
        )
    return tuple(rows), None


def _call_rows(calls: Sequence[ReconstructedCall], notes: list[str]) -> tuple[CallRow, ...]:
    """``tool_calls`` rows the database can hold (``toolscore.storage.plumbing.storable``); each
    value
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
            CallRow(
                position=c.position,
                name=name,
                arguments=arguments,
                arguments_raw=raw,
                arguments_ok=c.arguments_ok,
                call_id=call_id,
                trace_id=c.trace_id,
                span_id=c.span_id,
                convention=c.convention,
            )
        )
    return tuple(rows)


def _text_or_none(text: str | None) -> str | None:
    return None if text is None else storable_text(text)


def _with_details(rows: Sequence[EvaluationRow], **more: Any) -> tuple[EvaluationRow, ...]:
    return tuple(dataclasses.replace(r, details={**(r.details or {}), **more}) for r in rows)


def _storable_evaluations(
    rows: Sequence[EvaluationRow], notes: list[str]
) -> tuple[EvaluationRow, ...]:
    """Evaluation rows the database can hold; ``notes`` (what had to change in this
    conversation's stored values) go into every row's details as ``storage_notes``."""
    fixed = []
    for row in rows:
        details, why = storable_json(row.details)
        if why is not None:
            notes.append(f"{row.metric} details: {why}")
        fixed.append((row, details if isinstance(details, dict) else {}))
    out = []
    for row, details in fixed:
        if notes:
            details = {**details, "storage_notes": list(notes)}
        out.append(dataclasses.replace(row, details=details, error=_text_or_none(row.error)))
    return tuple(out)


WARNING_MAX_CHARS = 2000


def _bounded(text: str) -> str:
    return text if len(text) <= WARNING_MAX_CHARS else text[: WARNING_MAX_CHARS - 3] + "..."


def _unread_reason(unread: Sequence[str]) -> str:
    shown = "; ".join(unread[:3]) + (f"; and {len(unread) - 3} more" if len(unread) > 3 else "")
    return (
        f"not scored: {len(unread)} part(s) of the telemetry could not be read, so the rebuilt "
        f"conversation is incomplete ({shown})"
    )


def _compute_one(
    matcher: Matcher,
    row: ScoringHead,
    spans: Sequence[SpanRecord],
    logs: Sequence[LogRecordData],
    config: ScoringConfig,
    control_calls: ControlCalls = DEFAULT_CONTROL,
    carried: Carried | None = None,
) -> _Computed:
    service, agent = identity(spans)
    base: dict[str, Any] = {
        "conversation_id": row.id,
        "trace_id": row.last_trace_id,
        "root_span_id": row.root_span_id,
        "service_name": _text_or_none(service),
        "agent_name": _text_or_none(agent),
    }
    try:
        rec = reconstruct(spans, logs, control_calls=control_calls)
    except Exception as exc:  # a reconstruction bug must not stop the other conversations
        reason = storable_text(f"reconstruction failed: {exc!r}")
        return _Computed(status=STATUS_ERROR, error=reason, **base)
    messages, kept, rec = after_pruning(rec, carried)
    notes: list[str] = []
    calls = kept + _call_rows(rec.tool_calls, notes)
    first = _text_or_none(rec.first_user_message)
    if first is not rec.first_user_message:
        notes.append("first user message: NUL or lone surrogates stored as U+FFFD")
    facts = matcher.facts(spans, rec.first_user_message)
    found = matcher.match(row.reference_id, row.id, facts)
    # why the calls may be wrong: spans that look like tool runs when none was rebuilt, the
    # reconstruction's cautions (collector/reconstruction/cautions.py), the match's own
    unrecognised = rec.unrecognised if not calls else None
    midway = replays_unjoined(row.id, spans, rec.opens_with_history) if found else None
    warnings = [w for w in (unrecognised, *rec.cautions, found and found.warning, midway) if w]
    warning = _text_or_none(_bounded("; ".join(warnings))) if warnings else None
    common: dict[str, Any] = {
        "first_user_message": first,
        "calls": calls,
        "warning": warning,
        **base,
    }
    matched: dict[str, Any] = {}
    if found is not None:
        matched = {"expectation_id": found.row.id, "expectation_version": found.row.version}
    if rec.unread:  # scoring a conversation with a part missing would score the wrong thing
        reason = storable_text(_unread_reason(rec.unread))
        return _Computed(status=STATUS_ERROR, error=reason, **matched, **common)
    if found is None:
        why = matcher.why_not(row.reference_id, row.id, facts)
        return _Computed(status=STATUS_UNMATCHED, unmatched_reason=why, **common)
    reference, filled, error = _reference(found)
    if error is not None:
        return _Computed(status=STATUS_ERROR, error=storable_text(error), **matched, **common)
    expectation = found.row
    names = list(expectation.metrics) if expectation.metrics is not None else None
    rows, error = _evaluate(config, names, messages, reference)
    missing = unrecorded(rec.tool_calls, kept)  # not evaluable is not zero
    rows = mark_not_evaluated(rows, config.instances, missing, len(calls))
    if filled:  # what the templates took, so the history explains the reference it used
        rows = _with_details(rows, template_values=filled)
    if warning is not None:  # the score is given, marked: the views and the write-back say so
        rows = _with_details(rows, warning=warning)
    return _Computed(
        status=STATUS_ERROR if error else STATUS_SCORED,
        evaluations=_storable_evaluations(rows, notes),
        error=_text_or_none(error),
        **matched,
        **common,
    )


def _reference(found: Found) -> tuple[Any, dict[str, Any], str | None]:
    """The expectation's reference with its templates filled, what they took, or an error."""
    reference = found.row.reference_tool_calls
    if not found.values:
        return reference, {}, None  # no named groups: nothing to fill
    try:
        filled, used = fill(reference, found.values)
    except TemplateError as exc:
        return None, {}, f"expectation {found.row.id!r}: {exc}"
    return (filled, used, None) if used else (reference, {}, None)


def compute(
    conn: Connection,
    ids: Sequence[str],
    config: ScoringConfig,
    *,
    control_calls: ControlCalls = DEFAULT_CONTROL,
    refuse: Mapping[str, str] | None = None,
    short_reads: bool = False,
    batch_rows: int | None = None,
) -> list[_Computed]:
    """Reconstruct, match and score conversations ``ids`` (reads only); ``control_calls`` says
    which framework control calls count
    (:func:`toolscore.collector.reconstruction.rebuild.reconstruct`).
    Conversations in ``refuse`` (id -> reason) are not loaded: they get status ``error`` with
    that reason. ``short_reads`` (``conn`` is the caller's own, in no transaction of theirs):
    the read transaction ends once the telemetry is loaded and after each conversation's
    lookups, so reconstruction (minutes for a huge conversation) never runs inside one, where
    PostgreSQL's idle-in-transaction timeout would end it. ``batch_rows``: spans are streamed
    that many rows at a time (storage.telemetry.spans.load_spans)."""
    computed, _ = compute_within(
        conn,
        ids,
        config,
        control_calls=control_calls,
        refuse=refuse,
        short_reads=short_reads,
        batch_rows=batch_rows,
    )
    return computed


def compute_within(
    conn: Connection,
    ids: Sequence[str],
    config: ScoringConfig,
    *,
    control_calls: ControlCalls = DEFAULT_CONTROL,
    refuse: Mapping[str, str] | None = None,
    short_reads: bool = False,
    batch_rows: int | None = None,
    budget_chars: int | None = None,
    counts: Mapping[str, int] | None = None,
) -> tuple[list[_Computed], tuple[str, ...]]:
    """As :func:`compute`, loading conversations only until their text reaches
    ``budget_chars`` (``collector.pipeline.loading.load_within``); also returns the ids left
    unloaded (not computed)."""
    refuse = refuse or {}
    t = load_within(
        conn, ids, refuse, batch_rows=batch_rows, budget_chars=budget_chars, counts=counts
    )
    spans, logs = t.spans, t.logs
    matcher = Matcher(conn, short_reads)
    if short_reads:
        conn.rollback()
    out: list[_Computed] = []
    for r in t.heads:
        if r.id in refuse:
            out.append(_refused(r, refuse[r.id]))
            continue
        span_list, log_list = spans.pop(r.id, []), logs.pop(r.id, [])
        out.append(
            _compute_one(matcher, r, span_list, log_list, config, control_calls, t.pruned.get(r.id))
        )
    return out, t.left


def _refused(row: ScoringHead, reason: str) -> _Computed:
    return _Computed(
        conversation_id=row.id,
        status=STATUS_ERROR,
        trace_id=row.last_trace_id,
        root_span_id=row.root_span_id,
        error=storable_text(reason),
    )


def write(
    conn: Connection,
    computed: Sequence[_Computed],
    *,
    now: dt.datetime,
    claimed_by: str | None = None,
    seen_ns: Mapping[str, int] | None = None,
    rows: Sequence[PreparedRevision] | None = None,
) -> list[ScoreOutcome]:
    """Record a new revision for each computed conversation, in the caller's transaction: see
    ``storage.history.evaluations.write_revisions`` (``claimed_by``, ``seen_ns``, ``rows``)."""
    written = write_revisions(
        conn, computed, now=now, claimed_by=claimed_by, seen_ns=seen_ns, rows=rows
    )
    return [
        ScoreOutcome(
            conversation_id=x.conversation_id,
            status=x.status,
            revision=written[x.conversation_id],
            expectation_id=x.expectation_id,
            expectation_version=x.expectation_version,
            scores={e.metric: e.score for e in x.evaluations},
            error=x.error,
            unmatched_reason=x.unmatched_reason,
            warning=x.warning,
        )
        for x in computed
        if x.conversation_id in written
    ]


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
