"""Clients whose clocks are days off: a real server with scoring on receives conversations stamped
ten days in the future, ten days in the past and now. On PostgreSQL no partition is created for
the skewed days (they go to the DEFAULT partition); span retention goes by arrival, so a pass
with a 7-day cutoff deletes none of them (not pruned early), and a pass whose cutoff is after
their arrival deletes all of them, the future-stamped ones too (never kept for ever)."""

from __future__ import annotations

import time

import requests
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from sqlalchemy import func, select

from tests.integration.serve_harness import RunningServer, server_settings
from toolscore.collector.pipeline.extension import pipeline_extension
from toolscore.collector.pipeline.options import PipelineOptions
from toolscore.storage.conversations.tables import conversations
from toolscore.storage.plumbing.engine import create_engine
from toolscore.storage.retention.span_pruning import prune
from toolscore.storage.telemetry import partitions as parts
from toolscore.storage.telemetry.spans import spans_table

PB = {"Content-Type": "application/x-protobuf"}
DAY_NS = 86_400 * 10**9
SKEWS = {"future": 10 * DAY_NS, "past": -10 * DAY_NS, "now": 0}


def _turn(trace: int, start_ns: int) -> bytes:
    """A root span and two children, the way one agent turn arrives."""
    req = ExportTraceServiceRequest()
    spans = req.resource_spans.add().scope_spans.add().spans
    root = (1).to_bytes(8, "big")
    for i in range(3):
        spans.append(
            Span(
                trace_id=trace.to_bytes(16, "big"),
                span_id=(i + 1).to_bytes(8, "big"),
                parent_span_id=b"" if i == 0 else root,
                name="turn",
                start_time_unix_nano=start_ns + i * 1000,
                end_time_unix_nano=start_ns + 10_000,
            )
        )
    return bytes(req.SerializeToString())


def _state(db_url: str) -> tuple[int, dict[str, int], list[str]]:
    engine = create_engine(db_url)
    try:
        with engine.connect() as conn:
            spans = int(conn.execute(select(func.count()).select_from(spans_table)).scalar_one())
            statuses = dict(
                conn.execute(
                    select(conversations.c.status, func.count()).group_by(conversations.c.status)
                ).all()
            )
            names = (
                sorted(p.name for p in parts.partitions(conn, "spans"))
                if conn.dialect.name == "postgresql"
                else []
            )
            return spans, statuses, names
    finally:
        engine.dispose()


def test_spans_stamped_days_off_are_kept_and_pruned_by_arrival(migrated_db_url: str) -> None:
    db_url = migrated_db_url
    pipeline = pipeline_extension(PipelineOptions(settle_s=0.5, root_idle_s=0.3))
    with RunningServer(server_settings(db_url), [pipeline]) as srv:
        _, _, partitions_before = _state(db_url)
        now = time.time_ns()
        for trace, skew in enumerate(SKEWS.values(), 1):
            resp = requests.post(
                f"{srv.http_url}/v1/traces", data=_turn(trace, now + skew), headers=PB, timeout=30
            )
            assert resp.status_code == 200, resp.text
        deadline = time.monotonic() + 30
        while (state := _state(db_url))[1].get("open", 0) or sum(state[1].values()) < 3:
            assert time.monotonic() < deadline, f"not all scored: {state}"
            time.sleep(0.2)
    spans, statuses, partitions_after = state
    assert spans == 9 and "open" not in statuses and sum(statuses.values()) == 3, state
    assert partitions_after == partitions_before, "a partition was made for a skewed day"

    engine = create_engine(db_url)
    try:
        week_ago = time.time_ns() - 7 * DAY_NS
        assert prune(engine, week_ago).spans == 0
        assert _state(db_url)[0] == 9, "spans stamped in the past were pruned early"
        assert prune(engine, time.time_ns() + 1).spans == 9
        assert _state(db_url)[0] == 0, "spans stamped in the future outlived their retention"
    finally:
        engine.dispose()
