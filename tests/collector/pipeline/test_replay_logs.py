"""The replay rule reads model calls whose messages travel only in log records.

Semantic Kernel's native diagnostics (recording semantic-kernel-agent-keyless: the app wraps no
span around its turns, so each turn is a trace with no key) put a model call's messages only in
log records of its span. The two turns make one conversation whether the log records are stored
with, before or after their spans, in requests of their own; a turn stored alone, whose first
model call replays the turn before it, is scored with a warning that says so until the turn
before it arrives and takes it in.
"""

from __future__ import annotations

import datetime as dt
import random
from collections import defaultdict
from collections.abc import Sequence
from typing import TypeVar

import pytest
from sqlalchemy import Engine, select

from tests.collector.otlp_requests import load_requests, records
from toolscore.collector.pipeline.assign import AssignConfig, assign_spans
from toolscore.collector.pipeline.score import ScoreOutcome, score_conversation
from toolscore.scorer import default_config
from toolscore.storage.conversations.tables import conversations
from toolscore.storage.expectations.repository import ExpectationData, import_expectations
from toolscore.storage.records import LogRecordData, SpanRecord
from toolscore.storage.telemetry.row_encode import prepare_telemetry
from toolscore.storage.telemetry.spans import store_telemetry

NAME = "semantic-kernel-agent-keyless"
NOW = dt.datetime(2026, 12, 7, 6, 0, tzinfo=dt.UTC)
S = 10**9
Batch = tuple[list[SpanRecord], list[LogRecordData]]
T = TypeVar("T")


def _turns() -> list[Batch]:
    """Each turn's spans and log records, in the order the app made them."""
    spans, logs = records(load_requests(NAME).requests)
    by_trace: dict[str, Batch] = defaultdict(lambda: ([], []))
    for span in spans:
        by_trace[span.trace_id][0].append(span)
    for log in logs:
        by_trace[log.trace_id or ""][1].append(log)
    turns = sorted(by_trace.values(), key=lambda t: min(s.start_ns for s in t[0]))
    assert len(turns) == 2 and all(spans and logs for spans, logs in turns)
    return turns


def _ingest(
    engine: Engine, batches: Sequence[Batch], window_s: float = 3600, first_at_s: int = 1
) -> None:
    for i, (spans, logs) in enumerate(batches):
        at = (first_at_s + i) * S
        with engine.begin() as conn:
            numbered = store_telemetry(conn, prepare_telemetry(spans, logs, at))
            config = AssignConfig(replay_window_s=window_s)
            assign_spans(
                conn, spans, received_at_ns=at, config=config, numbered=numbered, logs=logs
            )


def _conversations(engine: Engine) -> list[str]:
    with engine.connect() as conn:
        return list(conn.execute(select(conversations.c.id).order_by(conversations.c.id)).scalars())


def _split(items: Sequence[T], rnd: random.Random) -> list[list[T]]:
    """``items`` in their order, cut into requests of one to four."""
    out: list[list[T]] = []
    i = 0
    while i < len(items):
        n = rnd.randint(1, 4)
        out.append(list(items[i : i + n]))
        i += n
    return out


def _arrivals(order: str, seed: int) -> list[Batch]:
    """The turns' spans and log records as an app's two batch exporters send them: each signal
    in the order it was made, cut into small requests, the log records' requests before the
    spans', after them, or among them."""
    rnd = random.Random(seed)
    turns = _turns()
    spans = _split([s for t in turns for s in t[0]], rnd)
    logs = _split([g for t in turns for g in t[1]], rnd)
    span_batches: list[Batch] = [(b, []) for b in spans]
    log_batches: list[Batch] = [([], b) for b in logs]
    if order == "logs-first":
        return log_batches + span_batches
    if order == "spans-first":
        return span_batches + log_batches
    merged: list[Batch] = []
    while span_batches or log_batches:
        logs_now = log_batches and (not span_batches or rnd.random() < 0.5)
        merged.append((log_batches if logs_now else span_batches).pop(0))
    return merged


@pytest.mark.parametrize("order", ["logs-first", "spans-first", "interleaved"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_turns_whose_history_is_only_in_log_records_make_one_conversation(
    engine: Engine, order: str, seed: int
) -> None:
    _ingest(engine, _arrivals(order, seed))
    first = _turns()[0][0][0].trace_id
    assert _conversations(engine) == [first]
    outcome = _score(engine, first)
    assert outcome.status == "scored" and outcome.warning is None
    assert dict(outcome.scores) == {"tool_call_accuracy": 1.0, "tool_call_f1": 1.0}


def test_each_turn_in_one_request_of_spans_and_log_records(engine: Engine) -> None:
    _ingest(engine, _turns())
    assert _conversations(engine) == [_turns()[0][0][0].trace_id]


def test_log_records_do_not_join_with_the_rule_off(engine: Engine) -> None:
    _ingest(engine, _turns(), window_s=0)
    assert len(_conversations(engine)) == 2


def _score(engine: Engine, conversation_id: str) -> ScoreOutcome:
    recording = load_requests(NAME)
    with engine.begin() as conn:
        expectation = ExpectationData(
            id="by-user-input",
            reference_tool_calls=recording.expected,
            match={"user_input": recording.user_input},
        )
        import_expectations(conn, [expectation], now=NOW)
    outcome = score_conversation(engine, conversation_id, default_config(), now=NOW)
    assert outcome is not None
    return outcome


WARNED = "the first model call replays earlier turns"


def _late(order: str) -> list[Batch]:
    (first_spans, first_logs), second = _turns()
    if order == "the later turn first":
        return [second, (first_spans, first_logs)]
    # the first turn's spans, the second turn whole, then the first turn's log records
    return [(first_spans, []), second, ([], first_logs)]


@pytest.mark.parametrize("order", ["the later turn first", "the first turn's records last"])
def test_a_turn_stored_before_the_one_it_continues_waits_for_it(engine: Engine, order: str) -> None:
    """The second turn arrives before the state of the first (another server, a late export):
    until then it is its own conversation, scored with a warning that says what it lacks; when
    the first turn's state arrives the first turn takes it in, and the one conversation scores
    exactly with no warning."""
    batches = _late(order)
    _ingest(engine, batches[:-1])
    second = batches[-2][0][0].trace_id
    alone = _score(engine, second)
    assert alone.status == "scored" and alone.warning is not None and WARNED in alone.warning
    _ingest(engine, batches[-1:], first_at_s=len(batches))
    first = _turns()[0][0][0].trace_id
    assert _conversations(engine) == [first]
    outcome = _score(engine, first)
    assert outcome.status == "scored" and outcome.warning is None
    assert dict(outcome.scores) == {"tool_call_accuracy": 1.0, "tool_call_f1": 1.0}


def test_with_the_rule_off_a_later_turn_alone_is_scored_with_a_warning(engine: Engine) -> None:
    """With no join the second turn's conversation says it may be only the end of one; the
    first turn's starts at its beginning (what that one lacks: docs/receiver.md)."""
    first, second = _turns()
    _ingest(engine, [second, first], window_s=0)
    assert len(_conversations(engine)) == 2
    alone = _score(engine, second[0][0].trace_id)
    assert alone.status == "scored" and alone.warning is not None and WARNED in alone.warning
    assert _score(engine, first[0][0].trace_id).warning is None


def test_a_conversation_that_starts_at_its_beginning_has_no_such_warning(engine: Engine) -> None:
    _ingest(engine, _turns())
    outcome = _score(engine, _turns()[0][0][0].trace_id)
    assert outcome.warning is None
