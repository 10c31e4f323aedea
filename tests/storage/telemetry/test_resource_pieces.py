"""A span's resource attributes stored once per day as a piece (storage/telemetry/row_encode.py,
``_resource_json``): the spans' column holds a reference, every read gets the attributes
received, a short resource stays plain JSON, and the piece goes with its day's last span."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

from sqlalchemy import Engine, func, select

from tests.collector.upkeep.test_retention import engine as engine
from toolscore.storage.history.outbox import evaluated_traces
from toolscore.storage.plumbing.dialect import json_text
from toolscore.storage.records import SpanRecord
from toolscore.storage.telemetry.content_store import SWEEP_MARGIN_DAYS, span_contents, sweep
from toolscore.storage.telemetry.contents import DAY_NS, RESOURCE_REF_AT
from toolscore.storage.telemetry.spans import load_spans, spans_table, store_spans

NOW = 1_765_000_000 * 1_000_000_000
TRACE = "e" * 32

RESOURCE: Mapping[str, Any] = {
    "service.name": "weather-agent",
    "telemetry.sdk.language": "python",
    "telemetry.sdk.name": "opentelemetry",
    "telemetry.sdk.version": "1.38.0",
    "process.pid": 4242,
    "host.cpu.ratio": float("nan"),
    "build.id": b"\x00\x01\xff",
    "odd": "with a NUL \x00 inside",
    "nested": {"list": [{"a": 1}, {"b": 2.5}], "flag": True},
}


def _spans(resource: Mapping[str, Any], start_ns: int, n: int = 5) -> list[SpanRecord]:
    return [
        SpanRecord(
            trace_id=TRACE,
            span_id=f"{i + 1:016x}",
            parent_span_id=None,
            name=f"step {i}",
            kind=1,
            start_ns=start_ns + i,
            end_ns=start_ns + i + 1,
            attributes={"gen_ai.conversation.id": "c1"},
            resource_attributes=resource,
        )
        for i in range(n)
    ]


def _stored_resources(engine: Engine) -> list[str]:
    with engine.connect() as conn:
        column = json_text(spans_table.c.resource_attributes)
        return list(conn.execute(select(column)).scalars())


def _pieces(engine: Engine) -> int:
    with engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(span_contents)).scalar_one())


def _same(read: list[SpanRecord], sent: list[SpanRecord]) -> None:
    # NaN is not equal to itself: compare the resources as JSON of their repr
    def key(s: SpanRecord) -> Any:
        return (dataclasses.replace(s, resource_attributes={}), repr(s.resource_attributes))

    assert [key(s) for s in read] == [key(s) for s in sent]


def test_a_shared_resource_is_one_piece_and_reads_back_exactly(engine: Engine) -> None:
    spans = _spans(RESOURCE, NOW)
    with engine.begin() as conn:
        store_spans(conn, spans, NOW)
    stored = _stored_resources(engine)
    assert len(set(stored)) == 1 and '"$zrefs"' in stored[0]
    assert len(stored[0]) < len(json.dumps(RESOURCE, default=str)) // 3
    assert _pieces(engine) == 1
    with engine.connect() as conn:
        _same(load_spans(conn, [TRACE]), spans)
        root = evaluated_traces(conn, [(TRACE, spans[0].span_id)])[TRACE][1]
    assert repr(root) == repr(RESOURCE)  # what the export's write-back reads


def test_a_short_resource_stays_plain_and_a_tag_lookalike_reads_back(engine: Engine) -> None:
    short = {"service.name": "a"}
    lookalike = {"$zrefs": "1:1:not a reference"}
    assert len(json.dumps(short)) < RESOURCE_REF_AT
    first = _spans(short, NOW, 2)
    second = [dataclasses.replace(s, span_id=f"{9 + i:016x}", resource_attributes=lookalike)
              for i, s in enumerate(first)]  # fmt: skip
    with engine.begin() as conn:
        store_spans(conn, first + second, NOW)
    stored = sorted(set(_stored_resources(engine)))
    assert json.loads(stored[1]) == short  # SQL on a short resource works as before
    assert "not a reference" not in stored[0]
    with engine.connect() as conn:
        read = sorted(load_spans(conn, [TRACE]), key=lambda s: s.span_id)
    assert read == first + second


def test_a_days_resource_piece_goes_with_its_last_span(engine: Engine) -> None:
    old = _spans(RESOURCE, NOW - (SWEEP_MARGIN_DAYS + 1) * DAY_NS)
    with engine.begin() as conn:
        store_spans(conn, old, NOW)
    assert _pieces(engine) == 1
    with engine.begin() as conn:
        conn.execute(spans_table.delete().where(spans_table.c.span_id != old[0].span_id))
    assert sweep(engine, NOW) == 0
    with engine.connect() as conn:
        _same(load_spans(conn, [TRACE]), old[:1])
    with engine.begin() as conn:
        conn.execute(spans_table.delete())
    assert sweep(engine, NOW) == 1 and _pieces(engine) == 0
