"""Long span strings stored as pieces once per day (storage/telemetry/contents.py and
content_store.py): read back exactly, a repeated history stored once, a day's pieces deleted
with the day's last span and not before, and a database at 0020 upgraded with its spans and
scores reading the same."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Sequence
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import Engine, func, select, text

from tests.collector.upkeep.test_retention import REFERENCE, conversation, expect, score_all
from tests.collector.upkeep.test_retention import engine as engine
from toolscore.collector.pipeline.assign import AssignConfig, assign_spans
from toolscore.collector.pipeline.rescoring import rescore_one
from toolscore.storage.migrate import upgrade
from toolscore.storage.plumbing.dialect import json_text
from toolscore.storage.plumbing.engine import create_engine
from toolscore.storage.records import SpanEvent, SpanRecord
from toolscore.storage.telemetry.compressed import compresses_values
from toolscore.storage.telemetry.content_store import SWEEP_MARGIN_DAYS, span_contents, sweep
from toolscore.storage.telemetry.contents import (
    DAY_NS,
    PIECE_MIN,
    REF_AT,
    TRUST_DAYS,
    ContentBatch,
    KnownContents,
    pieces,
)
from toolscore.storage.telemetry.partitions import create_ahead, partition_name, partitions
from toolscore.storage.telemetry.row_encode import TelemetryBatch, log_row, span_values
from toolscore.storage.telemetry.spans import load_spans, spans_table, store_spans, store_telemetry

NOW = 1_765_000_000 * 1_000_000_000  # a day start is NOW - NOW % DAY_NS
TRACE = "c" * 32


def _history(turns: int, compact: bool) -> list[Any]:
    out: list[Any] = []
    for turn in range(turns):
        out.append({"role": "user", "parts": [{"type": "text", "content": f"question {turn}"}]})
        out.append(
            {
                "role": "assistant",
                "parts": [
                    {"type": "tool_call", "name": "get_weather", "arguments": {"city": "Paris"}},
                    {"type": "text", "content": f"answer {turn}: " + "sunny and warm " * 20},
                ],
            }
        )
    return out


def _dumps(value: Any, compact: bool) -> str:
    return json.dumps(value, separators=(",", ":")) if compact else json.dumps(value)


def _model_spans(turns: int, start_ns: int, compact: bool = True) -> list[SpanRecord]:
    """A conversation whose model span of each turn carries the whole history so far."""
    history = _history(turns, compact)
    return [
        SpanRecord(
            trace_id=TRACE,
            span_id=f"{turn + 1:016x}",
            parent_span_id=None,
            name="chat",
            kind=3,
            start_ns=start_ns + turn,
            end_ns=start_ns + turn + 1,
            attributes={
                "gen_ai.input.messages": _dumps(history[: 2 * turn + 1], compact),
                "gen_ai.system_instructions": "You are a weather assistant. " * 40,
                "gen_ai.conversation.id": "long",
            },
            events=(SpanEvent("gen_ai.choice", start_ns, {"all": [_dumps(history, compact)]}),),
        )
        for turn in range(turns)
    ]


def _piece_count(engine: Engine) -> int:
    with engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(span_contents)).scalar_one())


def _stored_bytes(engine: Engine) -> int:
    """The spans' JSON columns and every stored piece (compressed)."""
    s = spans_table.c
    with engine.connect() as conn:
        rows = conn.execute(select(json_text(s.attributes), json_text(s.events))).all()
        pieces_bytes = conn.execute(
            select(func.coalesce(func.sum(func.length(span_contents.c.data)), 0))
        ).scalar_one()
    return sum(len(a) + len(e) for a, e in rows) + int(pieces_bytes)


# --- cutting ---------------------------------------------------------------------------------


@given(st.text(alphabet='{}[], "ab\n', max_size=400))
def test_the_pieces_of_any_text_are_that_text(value: str) -> None:
    assert "".join(pieces(value)) == value


def _cut_at_every_brace(text: str) -> list[str]:
    """The cutting rule stepped through cut point by cut point (what ``pieces`` jumps over)."""
    out: list[str] = []
    start = last = 0
    for match in re.finditer(r"\}(?=\s*(?:,\s*\{|\]))", text):
        last = match.end()
        if last - start >= PIECE_MIN:
            out.append(text[start:last])
            start = last
    return out + [p for p in (text[start:last], text[max(start, last) :]) if p]


@given(st.text(alphabet='{}[], "ab\n', max_size=1500))
def test_pieces_are_cut_where_the_rule_says(value: str) -> None:
    assert pieces(value) == _cut_at_every_brace(value)


def test_pieces_are_cut_where_the_rule_says_around_the_least_piece() -> None:
    for pad in range(PIECE_MIN):  # a cut point at every offset around PIECE_MIN
        sizes = [pad, 3, 40, 7, PIECE_MIN - 6, 1, 60, pad // 2, 200]
        value = json.dumps([{"x": "a" * n} for n in sizes])
        assert pieces(value) == _cut_at_every_brace(value)


def test_a_longer_history_shares_all_but_its_last_pieces_with_the_shorter() -> None:
    for compact in (True, False):  # JSON.stringify / orjson, and Python's json.dumps
        history = _history(30, compact)
        shorter, longer = (set(pieces(_dumps(history[:n], compact))) for n in (40, 41))
        assert len(longer - shorter) <= 3
        assert len(shorter) > 10


# --- storing and reading ---------------------------------------------------------------------


def test_a_long_conversation_is_stored_once_and_read_back_exactly(engine: Engine) -> None:
    spans = _model_spans(40, NOW)
    with engine.begin() as conn:
        store_spans(conn, spans, NOW)
    with engine.connect() as conn:
        assert load_spans(conn, [TRACE]) == spans
    distinct = sum(len(json.dumps(m)) for m in _history(40, True)) + len(
        spans[0].attributes["gen_ai.system_instructions"]
    )
    repeated = sum(len(v) for s in spans for v in s.attributes.values() if isinstance(v, str))
    assert repeated > 15 * distinct  # what storing each span's strings whole would cost
    assert _stored_bytes(engine) <= 3 * distinct


def test_a_schema_every_span_repeats_is_one_piece_and_short_values_stay_plain(
    engine: Engine,
) -> None:
    schema = json.dumps({"type": "object", "properties": {"city": {"type": "string"}}} | {
        "required": ["city"], "additionalProperties": False, "title": "get_weather"})  # fmt: skip
    assert REF_AT <= len(schema) < 256
    attributes = {"tool.schema": schema, "short": "x" * (REF_AT - 1)}
    spans = [dataclasses.replace(s, attributes=attributes, events=()) for s in _model_spans(5, NOW)]
    with engine.begin() as conn:
        store_spans(conn, spans, NOW)
        stored = conn.execute(select(json_text(spans_table.c.attributes))).scalars().all()
    assert _piece_count(engine) == 1
    assert all('"$zrefs"' in t and "x" * (REF_AT - 1) in t for t in stored)
    with engine.connect() as conn:
        assert load_spans(conn, [TRACE]) == spans


def test_a_resend_and_another_batch_store_no_piece_twice(engine: Engine) -> None:
    spans = _model_spans(10, NOW)
    with engine.begin() as conn:
        store_spans(conn, spans[:5], NOW)
    stored = _piece_count(engine)
    with engine.begin() as conn:
        store_spans(conn, spans[:5], NOW)  # a resend
    assert _piece_count(engine) == stored
    with engine.begin() as conn:
        store_spans(conn, spans, NOW)
    with engine.connect() as conn:
        assert load_spans(conn, [TRACE]) == spans


def test_a_conversation_crossing_midnight_stores_its_pieces_once_per_day(engine: Engine) -> None:
    midnight = NOW - NOW % DAY_NS + DAY_NS
    before = _model_spans(4, midnight - 10)
    after = [dataclasses.replace(s, span_id=f"{20 + i:016x}", start_ns=midnight + i) for i, s in
             enumerate(before)]  # fmt: skip
    with engine.begin() as conn:
        store_spans(conn, before, NOW)
    one_day = _piece_count(engine)
    with engine.begin() as conn:
        store_spans(conn, after, NOW)
    assert _piece_count(engine) == 2 * one_day
    with engine.connect() as conn:
        days = set(conn.execute(select(span_contents.c.day_ns)).scalars())
        assert sorted(load_spans(conn, [TRACE]), key=lambda s: s.span_id) == before + after
    assert days == {midnight - DAY_NS, midnight}


def test_a_writer_trusts_its_memory_of_recent_days_only() -> None:
    known = KnownContents()
    old_day, today = NOW - NOW % DAY_NS - (TRUST_DAYS + 1) * DAY_NS, NOW - NOW % DAY_NS
    first = ContentBatch(NOW, known)
    first.ref("x" * 600, today), first.ref("y" * 600, old_day)
    known.remember(first.keys())
    again = ContentBatch(NOW, known)
    again.ref("x" * 600, today), again.ref("y" * 600, old_day)
    assert [day for day, _, _ in again.rows()] == [old_day]  # the old day may have been swept


# --- retention -------------------------------------------------------------------------------


def _delete_spans(engine: Engine, span_ids: Sequence[str]) -> None:
    with engine.begin() as conn:
        conn.execute(spans_table.delete().where(spans_table.c.span_id.in_(list(span_ids))))


def test_a_days_pieces_go_with_its_last_span_and_not_before(engine: Engine) -> None:
    old = _model_spans(3, NOW - (SWEEP_MARGIN_DAYS + 2) * DAY_NS)
    recent = [dataclasses.replace(s, trace_id="d" * 32, start_ns=NOW - (SWEEP_MARGIN_DAYS - 1)
              * DAY_NS) for s in old]  # fmt: skip
    with engine.begin() as conn:
        store_spans(conn, old + recent, NOW)
    both = _piece_count(engine)
    _delete_spans(engine, [s.span_id for s in old[1:]])
    assert sweep(engine, NOW) == 0, "a span of the day is left"
    with engine.connect() as conn:
        assert load_spans(conn, [TRACE]) == old[:1]
    _delete_spans(engine, [s.span_id for s in old])  # the recent ones go too: same span ids
    assert sweep(engine, NOW) == both // 2  # the old day's; the recent day is kept (margin)
    assert _piece_count(engine) == both // 2
    assert sweep(engine, NOW + 2 * DAY_NS) == both // 2


# --- upgrading -------------------------------------------------------------------------------


def _store_as_0020(url: str, spans: Sequence[SpanRecord], logs: Any, at_ns: int) -> None:
    """Spans stored as versions before 0021 stored them (long strings whole; packed on SQLite)."""
    eng = create_engine(url)
    try:
        with eng.begin() as conn:
            compress = compresses_values(conn.dialect)
            rows = tuple(span_values(s, at_ns, {}, compress) for s in spans)
            logs_rows = tuple(log_row(r, at_ns, compress) for r in logs)
            store_telemetry(conn, TelemetryBatch(rows, logs_rows))
            trace_ids = [r.trace_id for r in logs if r.trace_id]
            assign_spans(
                conn, spans, received_at_ns=at_ns, config=AssignConfig(), log_trace_ids=trace_ids
            )
    finally:
        eng.dispose()


def _scores(eng: Engine) -> list[Any]:
    with eng.connect() as conn:
        rows = conn.execute(
            text("SELECT conversation_id, metric, revision, score FROM current_scores")
        ).all()
    return sorted(tuple(r) for r in rows)


def test_a_database_at_0020_upgrades_and_reads_the_same(db_url: str) -> None:
    upgrade(db_url, "0020")
    spans, logs = conversation("upgraded", "e1")
    long = {"gen_ai.system_instructions": "Answer briefly. " * 60}
    spans = [dataclasses.replace(s, attributes={**s.attributes, **long}) for s in spans]
    eng = create_engine(db_url)
    try:
        expect(eng, REFERENCE, "upgraded")
        _store_as_0020(db_url, spans, logs, 1_700_000_000 * 10**9)
        score_all(eng, 1_700_000_100 * 10**9)
        with eng.connect() as conn:
            before = load_spans(conn, [spans[0].trace_id])
        scores = _scores(eng)
        assert scores and before == sorted(before, key=lambda s: (s.start_ns, s.span_id))
        upgrade(db_url)
        with eng.connect() as conn:
            assert load_spans(conn, [spans[0].trace_id]) == before
        assert _scores(eng) == scores
        assert rescore_one(eng, "upgraded", None).startswith("re-scored: nothing changed")
        later = dataclasses.replace(spans[-1], span_id="f" * 16, start_ns=spans[-1].end_ns)
        with eng.begin() as conn:  # a new span beside the old rows: stored as pieces
            store_spans(conn, [later], 1_700_000_200 * 10**9)
            stored = conn.execute(
                select(json_text(spans_table.c.attributes)).where(spans_table.c.span_id == "f" * 16)
            ).scalar_one()
            assert '"$zrefs"' in stored
            assert sorted(load_spans(conn, [spans[0].trace_id]), key=lambda s: s.span_id) == sorted(
                [*before, later], key=lambda s: s.span_id
            )
    finally:
        eng.dispose()


def test_postgres_drops_a_swept_days_partition_of_pieces(migrated_postgres_url: str) -> None:
    eng = create_engine(migrated_postgres_url)
    day = NOW - NOW % DAY_NS - (SWEEP_MARGIN_DAYS + 2) * DAY_NS
    try:
        with eng.begin() as conn:
            assert "span_contents_p" in " ".join(create_ahead(conn, day, days=0))
        spans = _model_spans(3, day + 5)
        with eng.begin() as conn:
            store_spans(conn, spans, NOW)
        stored = _piece_count(eng)
        assert sweep(eng, NOW) == 0, "the day's spans are still there"
        _delete_spans(eng, [s.span_id for s in spans])
        assert sweep(eng, NOW) == stored
        with eng.connect() as conn:
            names = {p.name for p in partitions(conn, "span_contents")}
        assert partition_name("span_contents", day) not in names
        assert _piece_count(eng) == 0
    finally:
        eng.dispose()
