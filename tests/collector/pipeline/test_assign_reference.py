"""Reference ids in the conversation bookkeeping: they move with their trace, reach the
conversation from any span of any of its traces, and the first one stored wins."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import pytest
from sqlalchemy import Engine, select

from tests.collector.pipeline.spans import span, tid
from toolscore.collector.pipeline.assign import AssignConfig, AssignResult, assign_spans
from toolscore.storage.conversations.tables import conversations
from toolscore.storage.plumbing.engine import create_engine
from toolscore.storage.records import SpanRecord
from toolscore.storage.schema import metadata
from toolscore.storage.telemetry.traces import number_traces, traces_table

CONFIG = AssignConfig(conversation_keys=("gen_ai.conversation.id",))
NAME = "gen_ai.conversation.id"
REF = "toolscore.reference.id"


def ingest(engine: Engine, spans: Sequence[SpanRecord]) -> AssignResult:
    with engine.begin() as conn:
        return assign_spans(conn, spans, received_at_ns=10**18, config=CONFIG)


def refs(engine: Engine) -> dict[str, str | None]:
    """conversation id -> its stored reference id"""
    with engine.connect() as conn:
        return dict(conn.execute(select(conversations.c.id, conversations.c.reference_id)).all())


def traces_of(engine: Engine) -> dict[str, str]:
    with engine.connect() as conn:
        t = traces_table.c
        rows = select(t.trace_id, t.conversation_id).where(t.conversation_id.is_not(None))
        return {str(trace): str(conv) for trace, conv in conn.execute(rows)}


def test_reference_id_on_unnamed_spans_moves_with_the_trace(engine: Engine) -> None:
    ingest(engine, [span("a", "2", "1", attrs={REF: "weather"})])
    assert refs(engine) == {tid("a"): "weather"}
    moved = ingest(engine, [span("a", "1", attrs={NAME: "chat"})])
    assert moved == AssignResult(conversations=1, new_traces=0, moved_traces=1)
    assert refs(engine) == {"chat": "weather"}
    assert traces_of(engine) == {tid("a"): "chat"}


def test_reference_id_on_a_resource_moves_too(engine: Engine) -> None:
    ingest(engine, [span("a", "2", "1", resource={REF: "weather"})])
    ingest(engine, [span("a", "1", attrs={NAME: "chat"})])
    assert refs(engine) == {"chat": "weather"}


def test_reference_id_arriving_after_the_move_reaches_the_named_conversation(
    engine: Engine,
) -> None:
    ingest(engine, [span("a", "1", attrs={NAME: "chat"})])
    ingest(engine, [span("a", "3", "1")])
    ingest(engine, [span("a", "2", "1", attrs={REF: "weather"})])  # no name on this span
    assert refs(engine) == {"chat": "weather"}


def test_reference_id_of_any_trace_reaches_the_conversation(engine: Engine) -> None:
    ingest(engine, [span("t1", "1", attrs={NAME: "chat"}, start=100)])  # turn 1: no reference
    ingest(engine, [span("t2", "2", "1", attrs={REF: "weather"}, start=210)])  # turn 2, unnamed
    ingest(engine, [span("t2", "1", attrs={NAME: "chat"}, start=200)])  # ...then named
    assert refs(engine) == {"chat": "weather"}
    assert traces_of(engine) == {tid("t1"): "chat", tid("t2"): "chat"}


def test_unnamed_traces_moving_in_any_order_keep_their_reference(engine: Engine) -> None:
    ingest(engine, [span("t1", "2", "1", start=110), span("t2", "2", "1", start=210)])
    ingest(engine, [span("t2", "3", "1", attrs={REF: "weather"}, start=220)])
    ingest(engine, [span("t2", "1", attrs={NAME: "chat"}, start=200)])
    ingest(engine, [span("t1", "1", attrs={NAME: "chat"}, start=100)])
    assert refs(engine) == {"chat": "weather"}


def test_trace_moving_in_one_batch_with_its_reference_and_name(engine: Engine) -> None:
    ingest(engine, [span("a", "3", "1")])
    ingest(engine, [span("a", "2", "1", attrs={REF: "weather"}), span("a", "1", attrs={NAME: "c"})])
    assert refs(engine) == {"c": "weather"}


class TestConflictingReferenceIds:
    """The first reference id stored for a conversation stays; later different ones are ignored,
    so a late span cannot change the expectation a conversation is scored against."""

    def test_a_later_trace_cannot_replace_it(self, engine: Engine) -> None:
        ingest(engine, [span("t1", "1", attrs={NAME: "chat", REF: "first"}, start=100)])
        ingest(engine, [span("t2", "1", attrs={NAME: "chat", REF: "second"}, start=200)])
        assert refs(engine) == {"chat": "first"}

    def test_a_later_span_of_the_same_trace_cannot_replace_it(self, engine: Engine) -> None:
        ingest(engine, [span("t1", "1", attrs={NAME: "chat", REF: "first"})])
        ingest(engine, [span("t1", "2", "1", attrs={REF: "second"})])
        assert refs(engine) == {"chat": "first"}

    def test_a_moving_trace_keeps_the_named_conversations_reference(self, engine: Engine) -> None:
        ingest(engine, [span("t1", "1", attrs={NAME: "chat", REF: "named"}, start=100)])
        ingest(engine, [span("t2", "2", "1", attrs={REF: "trace-keyed"}, start=200)])
        ingest(engine, [span("t2", "1", attrs={NAME: "chat"}, start=190)])
        assert refs(engine) == {"chat": "named"}

    def test_a_moving_trace_brings_its_stored_one_over_the_batchs(self, engine: Engine) -> None:
        ingest(engine, [span("t1", "2", "1", attrs={REF: "stored"})])
        ingest(engine, [span("t1", "1", attrs={NAME: "chat", REF: "in-batch"})])
        assert refs(engine) == {"chat": "stored"}

    def test_in_one_batch_the_earliest_trace_wins(self, engine: Engine) -> None:
        ingest(
            engine,
            [
                span("t2", "1", attrs={NAME: "chat", REF: "later"}, start=200),
                span("t1", "1", attrs={NAME: "chat", REF: "earlier"}, start=100),
            ],
        )
        assert refs(engine) == {"chat": "earlier"}

    def test_in_one_trace_the_earliest_span_wins(self, engine: Engine) -> None:
        ingest(
            engine,
            [
                span("t1", "2", "1", attrs={REF: "later"}, start=200),
                span("t1", "1", attrs={NAME: "chat", REF: "earlier"}, start=100),
            ],
        )
        assert refs(engine) == {"chat": "earlier"}


# -- two transactions on one PostgreSQL touching the same trace at once (several servers) --------


class _Background:
    """Run an ingest in its own connection and transaction on a thread."""

    def __init__(self, engine: Engine, spans: Sequence[SpanRecord]) -> None:
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(engine, spans), daemon=True)
        self._thread.start()

    def _run(self, engine: Engine, spans: Sequence[SpanRecord]) -> None:
        try:
            ingest(engine, spans)
        except BaseException as exc:  # reported by join()
            self.error = exc

    def running_after(self, seconds: float) -> bool:
        self._thread.join(seconds)
        return self._thread.is_alive()

    def join(self) -> None:
        self._thread.join(30)
        assert not self._thread.is_alive()
        if self.error is not None:
            raise self.error


@pytest.fixture
def pg_engine(postgres_url: str) -> Any:
    eng = create_engine(postgres_url)
    metadata.create_all(eng)
    yield eng
    eng.dispose()


UNNAMED_WITH_REF = [span("x", "2", "1", attrs={REF: "weather"})]
NAMING_ROOT = [span("x", "1", attrs={NAME: "chat"})]


@pytest.mark.parametrize(
    ("first", "second"),
    [(UNNAMED_WITH_REF, NAMING_ROOT), (NAMING_ROOT, UNNAMED_WITH_REF)],
    ids=["unnamed-first", "naming-first"],
)
@pytest.mark.parametrize("numbered", [False, True], ids=["new", "numbered-without-conversation"])
def test_concurrent_transactions_on_one_trace_lose_nothing(
    pg_engine: Engine, first: list[SpanRecord], second: list[SpanRecord], numbered: bool
) -> None:
    if numbered:  # its row stored without a conversation (history retention cleared it)
        with pg_engine.begin() as conn:
            number_traces(conn, [tid("x")])
    with pg_engine.begin() as conn:  # the first transaction holds the trace's row...
        assign_spans(conn, first, received_at_ns=10**18, config=CONFIG)
        other = _Background(pg_engine, second)
        assert other.running_after(0.5), "the second transaction waits on the trace's row lock"
    other.join()  # ...and the second one decides on what the first committed
    assert traces_of(pg_engine) == {tid("x"): "chat"}
    assert refs(pg_engine) == {"chat": "weather"}, "no trace-keyed conversation, no lost ref"


def test_concurrent_joins_of_a_known_trace_are_serialised(pg_engine: Engine) -> None:
    ingest(pg_engine, [span("x", "3", "1")])  # known, trace-keyed
    with pg_engine.begin() as conn:
        assign_spans(conn, UNNAMED_WITH_REF, received_at_ns=10**18, config=CONFIG)
        other = _Background(pg_engine, NAMING_ROOT)
        assert other.running_after(0.5), "the move waits for the join holding the trace's row"
    other.join()
    assert refs(pg_engine) == {"chat": "weather"}


def test_concurrent_moves_of_one_trace_keep_the_first_name_and_the_reference(
    pg_engine: Engine,
) -> None:
    ingest(pg_engine, [span("x", "2", "1", attrs={REF: "weather"})])  # known, trace-keyed
    with pg_engine.begin() as conn:
        assign_spans(conn, NAMING_ROOT, received_at_ns=10**18, config=CONFIG)  # moves to "chat"
        other = _Background(pg_engine, [span("x", "3", "1", attrs={NAME: "other"})])
        assert other.running_after(0.5), "the second move waits for the first"
    other.join()
    assert traces_of(pg_engine) == {tid("x"): "chat"}, "the first name wins"
    assert refs(pg_engine) == {"chat": "weather"}
