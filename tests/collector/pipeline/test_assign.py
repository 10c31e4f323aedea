"""Conversation bookkeeping in the ingest transaction: which conversation each trace belongs to."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Engine, event, select

from tests.collector.pipeline.spans import sid, span, tid
from toolscore.collector.pipeline.assign import AssignConfig, AssignResult, assign_spans
from toolscore.storage.conversations.tables import conversations, evaluations
from toolscore.storage.records import SpanRecord
from toolscore.storage.telemetry.spans import store_spans
from toolscore.storage.telemetry.traces import traces_table

CONFIG = AssignConfig(conversation_keys=("gen_ai.conversation.id", "session.id"))


def ingest(engine: Engine, spans: Sequence[SpanRecord], at_ns: int = 10**18) -> AssignResult:
    with engine.begin() as conn:
        return assign_spans(conn, spans, received_at_ns=at_ns, config=CONFIG)


def conv(engine: Engine, conv_id: str) -> dict[str, Any] | None:
    with engine.connect() as conn:
        row = conn.execute(select(conversations).where(conversations.c.id == conv_id)).mappings()
        found = row.first()
        return dict(found) if found else None


def traces_of(engine: Engine) -> dict[str, str]:
    with engine.connect() as conn:
        t = traces_table.c
        rows = select(t.trace_id, t.conversation_id).where(t.conversation_id.is_not(None))
        return {str(trace): str(conv) for trace, conv in conn.execute(rows)}


def test_a_trace_without_conversation_key_is_its_own_conversation(engine: Engine) -> None:
    ingest(engine, [span("a1", "2", "1"), span("a1", "1")], at_ns=2 * 10**18)
    row = conv(engine, tid("a1"))
    assert row is not None
    assert row["status"] == "open" and row["needs_scoring"] is True
    assert row["last_trace_id"] == tid("a1") and row["root_span_id"] == sid("1")
    assert row["last_span_received_ns"] == 2 * 10**18
    assert row["last_span_at"] == dt.datetime.fromtimestamp(2e9, tz=dt.UTC)
    assert traces_of(engine) == {tid("a1"): tid("a1")}


def test_traces_naming_one_conversation_join_it_and_the_newest_is_last(engine: Engine) -> None:
    turn = {"gen_ai.conversation.id": "chat-1"}
    ingest(engine, [span("t1", "1", attrs=turn, start=100)])
    ingest(engine, [span("t2", "2", "1", attrs=turn, start=200)])
    row = conv(engine, "chat-1")
    assert row is not None and row["last_trace_id"] == tid("t2")
    assert row["root_span_id"] is None  # the root of turn 2 has not arrived yet
    ingest(engine, [span("t2", "1", start=190)])  # ...now it has, without the attribute
    row = conv(engine, "chat-1")
    assert row is not None and row["root_span_id"] == sid("1")
    assert traces_of(engine) == {tid("t1"): "chat-1", tid("t2"): "chat-1"}


def test_empty_conversation_id_is_no_name(engine: Engine) -> None:
    ingest(engine, [span("e1", "1", attrs={"gen_ai.conversation.id": ""})])
    assert traces_of(engine) == {tid("e1"): tid("e1")}


def test_trace_moves_when_a_later_span_names_the_conversation(engine: Engine) -> None:
    # Framework child spans arrive first without a session; the app's root names it later.
    first = ingest(engine, [span("m1", "2", "1"), span("m1", "3", "1")])
    assert first == AssignResult(conversations=1, new_traces=1, moved_traces=0)
    assert conv(engine, tid("m1")) is not None
    moved = ingest(engine, [span("m1", "1", attrs={"session.id": "s-9"})])
    assert moved == AssignResult(conversations=1, new_traces=0, moved_traces=1)
    assert conv(engine, tid("m1")) is None, "the trace-keyed conversation is gone"
    row = conv(engine, "s-9")
    assert row is not None and row["root_span_id"] == sid("1")
    assert row["last_trace_id"] == tid("m1")
    assert traces_of(engine) == {tid("m1"): "s-9"}


def test_moving_a_scored_trace_supersedes_its_scores(engine: Engine) -> None:
    ingest(engine, [span("m2", "1")])
    with engine.begin() as conn:
        conn.execute(
            evaluations.insert(),
            [
                {
                    "conversation_id": tid("m2"),
                    "revision": 1,
                    "is_current": True,
                    "trace_id": tid("m2"),
                    "expectation_id": "e",
                    "expectation_version": 1,
                    "metric": "tool_call_accuracy",
                    "metric_type": "tool_call_accuracy",
                    "metric_config": {},
                    "score": 1.0,
                    "details": {},
                    "predicted_count": 0,
                    "expected_count": 0,
                    "created_at": dt.datetime.now(dt.UTC),
                }
            ],
        )
    ingest(engine, [span("m2", "2", "1", attrs={"session.id": "s-late"})])
    with engine.connect() as conn:
        current = conn.execute(select(evaluations.c.is_current)).scalars().all()
    assert current == [False], "history kept, no longer current"
    assert traces_of(engine) == {tid("m2"): "s-late"}


def test_first_named_conversation_wins(engine: Engine) -> None:
    ingest(engine, [span("f1", "2", "1", attrs={"session.id": "first"})])
    ingest(engine, [span("f1", "1", attrs={"session.id": "second"})])
    assert traces_of(engine) == {tid("f1"): "first"}
    assert conv(engine, "second") is None


def test_mixed_keys_in_one_trace_pick_the_first_configured_key(engine: Engine) -> None:
    ingest(
        engine,
        [
            span("k1", "2", "1", attrs={"session.id": "by-session"}),
            span("k1", "3", "1", attrs={"gen_ai.conversation.id": "by-genai"}),
        ],
    )
    assert traces_of(engine) == {tid("k1"): "by-genai"}


def test_resend_is_idempotent_and_new_spans_reopen_a_scored_conversation(engine: Engine) -> None:
    batch = [span("r1", "1"), span("r1", "2", "1")]
    ingest(engine, batch, at_ns=10)
    ingest(engine, batch, at_ns=10)
    with engine.begin() as conn:
        conn.execute(
            conversations.update().values(status="scored", revision=1, needs_scoring=False)
        )
    ingest(engine, [span("r1", "3", "1")], at_ns=20)
    row = conv(engine, tid("r1"))
    assert row is not None
    assert (row["status"], row["revision"], row["needs_scoring"]) == ("scored", 1, True)
    assert row["last_span_received_ns"] == 20 and row["root_span_id"] == sid("1")
    assert traces_of(engine) == {tid("r1"): tid("r1")}


def test_reference_id_from_span_or_resource_is_kept(engine: Engine) -> None:
    ingest(engine, [span("x1", "2", "1", resource={"toolscore.reference.id": "weather"})])
    ingest(engine, [span("x1", "1")])  # a later batch without it does not erase it
    row = conv(engine, tid("x1"))
    assert row is not None and row["reference_id"] == "weather"


def test_log_records_keep_their_trace_active(engine: Engine) -> None:
    ingest(engine, [span("l1", "1")], at_ns=10)
    with engine.begin() as conn:
        assign_spans(conn, [], received_at_ns=30, config=CONFIG, log_trace_ids=[tid("l1")])
    row = conv(engine, tid("l1"))
    assert row is not None and row["last_span_received_ns"] == 30
    assert row["root_span_id"] == sid("1")


def test_a_large_batch_costs_a_few_statements(engine: Engine) -> None:
    statements: list[str] = []

    def count(*args: Any) -> None:
        statements.append(args[2])

    spans = [
        span(f"b{t}", f"{s + 1}", None if s == 0 else "1", attrs={"session.id": f"c{t % 50}"})
        for t in range(300)
        for s in range(7)
    ]
    event.listen(engine, "before_cursor_execute", count)
    try:
        result = ingest(engine, spans)
    finally:
        event.remove(engine, "before_cursor_execute", count)
    assert result == AssignResult(conversations=50, new_traces=300, moved_traces=0)
    assert len(traces_of(engine)) == 300
    # one SELECT of known traces, one upsert of trace assignments, one of conversations
    # (SQLAlchemy may split a many-row INSERT into a few "insertmanyvalues" batches)
    assert len(statements) <= 6, statements


def stored(engine: Engine, spans: Sequence[SpanRecord], reads: list[str]) -> AssignResult:
    """Store ``spans`` and assign them as the ingest hook does; the hook's SELECTs (statement
    and parameters) go to ``reads``."""

    def record(*args: Any) -> None:
        if args[2].lstrip().upper().startswith("SELECT"):
            reads.append(f"{args[2]} {args[3]}")

    with engine.begin() as conn:
        numbered = store_spans(conn, spans, 10**18)
        event.listen(conn, "before_cursor_execute", record)
        return assign_spans(conn, spans, received_at_ns=10**18, config=CONFIG, numbered=numbered)


def test_traces_the_batch_numbered_are_assigned_without_looking_them_up(engine: Engine) -> None:
    reads: list[str] = []
    result = stored(
        engine, [span(f"n{t}", "1", attrs={"session.id": "s"}) for t in range(5)], reads
    )
    assert result == AssignResult(conversations=1, new_traces=5, moved_traces=0)
    assert traces_of(engine) == {tid(f"n{t}"): "s" for t in range(5)}
    assert reads == [], "a trace this transaction numbered has no conversation to read"


def test_known_and_new_traces_in_one_batch_are_both_assigned(engine: Engine) -> None:
    stored(engine, [span("k1", "2", "1")], [])  # first seen unnamed: its own conversation
    reads: list[str] = []
    named = {"session.id": "s"}
    result = stored(engine, [span("k1", "1", attrs=named), span("k2", "1", attrs=named)], reads)
    assert result == AssignResult(conversations=1, new_traces=1, moved_traces=1)
    assert traces_of(engine) == {tid("k1"): "s", tid("k2"): "s"}
    assert conv(engine, tid("k1")) is None, "the trace-keyed conversation was dropped"
    assert reads and tid("k1") in reads[0], "the trace stored before is looked up"
    assert not any(tid("k2") in r for r in reads), "the one this batch numbered is not"
