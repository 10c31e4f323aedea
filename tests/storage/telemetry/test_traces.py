"""A row per trace (storage/telemetry/traces.py): numbers given in arrival order and kept, resends
still
kept out, the trace's conversation on the same row, existing databases converted by migrations
0014 and 0015, and a number that ingest is storing spans under never deleted by history
retention."""

from __future__ import annotations

import dataclasses
import threading

from sqlalchemy import Engine, func, inspect, select

from tests.collector.upkeep.test_retention import (
    CUTOFF,
    NS,
    REFERENCE,
    T_NEW,
    T_OLD,
    conversation,
    expect,
    score_all,
    store,
)
from tests.collector.upkeep.test_retention import engine as engine
from tests.storage.old_schema import store_unnumbered
from toolscore.storage.migrate import upgrade
from toolscore.storage.plumbing.engine import create_engine
from toolscore.storage.retention.conversation_pruning import prune_history
from toolscore.storage.telemetry.spans import load_spans, spans_table, store_spans
from toolscore.storage.telemetry.traces import number_traces, traces_table


def _count(engine: Engine) -> int:
    with engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(spans_table)).scalar_one())


def _numbers(engine: Engine) -> dict[str, int]:
    with engine.connect() as conn:
        rows = conn.execute(select(traces_table.c.trace_id, traces_table.c.seq)).all()
    return {str(t).lstrip("0"): int(n) for t, n in rows}


def test_traces_are_numbered_in_arrival_order_and_keep_their_number(engine: Engine) -> None:
    first, _ = conversation("one", "b1")
    second, _ = conversation("two", "a1")
    with engine.begin() as conn:
        store_spans(conn, first[:3], 1)
    with engine.begin() as conn:
        store_spans(conn, second + first[3:], 2)  # the rest of b1 comes with a new trace
    numbers = _numbers(engine)
    assert numbers["b1"] < numbers["a1"], "numbered when first stored, not by trace id"
    with engine.connect() as conn:
        seqs = set(conn.execute(select(spans_table.c.trace_seq)).scalars())
    assert seqs == {numbers["b1"], numbers["a1"]}
    assert _count(engine) == len(first) + len(second)
    with engine.begin() as conn:
        store_spans(conn, first + second, 3)  # a resend of everything
    assert _count(engine) == len(first) + len(second), "a resent span is stored once"
    assert _numbers(engine) == numbers
    with engine.connect() as conn:
        loaded = load_spans(conn, [first[0].trace_id])
    assert sorted(s.span_id for s in loaded) == sorted(s.span_id for s in first)
    assert {s.trace_id for s in loaded} == {first[0].trace_id}


def test_a_transaction_reports_the_traces_it_numbered(engine: Engine) -> None:
    first, _ = conversation("one", "b1")
    second, _ = conversation("two", "a1")
    with engine.begin() as conn:
        assert store_spans(conn, first[:2], 1) == {first[0].trace_id}
    with engine.begin() as conn:
        new = store_spans(conn, first + second, 2)  # b1 is known: only a1 is new
    assert new == {second[0].trace_id}
    with engine.begin() as conn:
        assert store_spans(conn, first + second, 3) == frozenset(), "a resend numbers nothing"


def _conversations(engine: Engine) -> dict[str, str | None]:
    with engine.connect() as conn:
        rows = conn.execute(select(traces_table.c.trace_id, traces_table.c.conversation_id))
        return {str(t).lstrip("0"): c for t, c in rows}


def test_a_trace_s_conversation_is_stored_on_its_numbered_row(engine: Engine) -> None:
    spans, logs = conversation("conv", "a1")
    loner = dataclasses.replace(logs[0], trace_id="b2".zfill(32))
    store(engine, spans, [*logs, loner], 1)
    assert _conversations(engine) == {"a1": "conv", "b2": "b2".zfill(32)}, (
        "the spans' trace on the row store_telemetry numbered; a trace with log records only "
        "numbered by the hook, its own conversation"
    )
    numbers = _numbers(engine)
    store(engine, spans[:2], [], 2)  # a resend: same row, same conversation
    assert _numbers(engine) == numbers
    assert _conversations(engine)["a1"] == "conv"


def test_migration_0015_puts_each_conversation_on_its_trace_s_row(db_url: str) -> None:
    upgrade(db_url, "0014")
    engine = create_engine(db_url)
    with engine.begin() as conn:
        conn.exec_driver_sql("INSERT INTO traces (trace_id) VALUES ('a1'), ('b2')")
        conn.exec_driver_sql(
            "INSERT INTO conversation_traces VALUES ('a1', 'conv'), ('c3', 'logs-only')"
        )
    numbers = _numbers(engine)
    upgrade(db_url)
    assert _conversations(engine) == {"a1": "conv", "b2": None, "c3": "logs-only"}
    after = _numbers(engine)
    assert {t: after[t] for t in numbers} == numbers, "numbers kept"
    assert after["c3"] > max(numbers.values()), "a trace without a number gets the next one"
    with engine.connect() as conn:
        assert "conversation_traces" not in inspect(conn).get_table_names()
    engine.dispose()


def test_migration_0014_numbers_an_existing_database(db_url: str) -> None:
    upgrade(db_url, "0013")
    engine = create_engine(db_url)
    late, late_logs = conversation("late", "a1", start_shift_ns=60 * NS)
    early, _ = conversation("early", "b1")
    store_unnumbered(engine, late, late_logs, 1)
    store_unnumbered(engine, early, [], 1)
    upgrade(db_url)
    numbers = _numbers(engine)
    assert numbers["b1"] < numbers["a1"], "numbered in the order of their first span"
    with engine.connect() as conn:
        loaded = load_spans(conn, [early[0].trace_id, late[0].trace_id])
    assert sorted((s.trace_id, s.span_id) for s in loaded) == sorted(
        (s.trace_id, s.span_id) for s in early + late
    )
    with engine.begin() as conn:
        store_spans(conn, early + late, 2)  # resends after the conversion
        store_spans(conn, conversation("new", "c1")[0], 2)
    assert _count(engine) == 3 * len(early)
    assert max(_numbers(engine).values()) == _numbers(engine)["c1"], "new traces: next number"
    engine.dispose()


def test_history_retention_keeps_a_number_ingest_holds(postgres_url: str) -> None:
    """PostgreSQL: a conversation whose trace number an ingest transaction holds is left for
    the next pass; the spans stored under the number stay readable."""
    upgrade(postgres_url)
    engine = create_engine(postgres_url)
    expect(engine, REFERENCE, "conv")
    spans, logs = conversation("conv", "a1")
    store(engine, spans, logs, T_OLD)
    score_all(engine, T_OLD + 10 * NS)
    trace_id = spans[0].trace_id
    with engine.connect() as ingest:
        ingest.begin()
        held = number_traces(ingest, [trace_id])  # a late span of the trace being stored
        results: list[int] = []
        pruner = threading.Thread(
            target=lambda: results.append(prune_history(engine, CUTOFF).conversations)
        )
        pruner.start()
        pruner.join(timeout=30)
        waited = pruner.is_alive()
        store_spans(ingest, spans[:1], T_OLD + 60 * NS)
        ingest.commit()
    pruner.join()
    assert not waited, "history retention waited for ingest instead of skipping the trace"
    assert results == [0], "the conversation whose trace ingest held is not deleted"
    assert _numbers(engine) == {trace_id.lstrip("0"): held.numbers[trace_id]}
    with engine.connect() as conn:
        assert [s.span_id for s in load_spans(conn, [trace_id])] == [spans[0].span_id]
    engine.dispose()


def test_history_retention_deletes_the_numbers_of_what_it_deletes(engine: Engine) -> None:
    expect(engine, REFERENCE, "gone", "kept")
    store(engine, *conversation("gone", "a1"), T_OLD)
    store(engine, *conversation("kept", "b1"), T_NEW)
    score_all(engine, T_NEW + 10 * NS)
    assert prune_history(engine, CUTOFF).conversations == 1
    assert set(_numbers(engine)) == {"b1"}
