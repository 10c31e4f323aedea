"""Backpressure: acknowledgements are held while scoring is behind, and only then."""

from __future__ import annotations

import asyncio
import logging

import pytest
from prometheus_client import CollectorRegistry
from sqlalchemy import Engine

from tests.collector.pipeline.spans import span, tid
from tests.collector.pipeline.test_claim import T0, TIMING, ingest
from toolscore.collector.pipeline.claim import NS, Timing, claim_ready
from toolscore.collector.pipeline.pacing import ScoringLagGate
from toolscore.storage.conversations.leases import Claimed


def _gate(registry: CollectorRegistry | None = None, **kw: float) -> ScoringLagGate:
    kw.setdefault("behind_s", 0.5)
    kw.setdefault("max_hold_s", 2.0)
    return ScoringLagGate(registry or CollectorRegistry(), **kw)


def _metric(registry: CollectorRegistry, name: str) -> float:
    value = registry.get_sample_value(name)
    return 0.0 if value is None else value


def test_a_conversation_is_behind_by_the_time_it_waited_after_its_own_readiness() -> None:
    timing = Timing(settle_s=5.0, idle_s=1.0)
    settled = Claimed("a", T0, early=False)  # ready at T0 + 5 s
    idled = Claimed("b", T0, early=True)  # ready at T0 + 1 s
    assert timing.behind_s([settled], T0 + 6 * NS) == 1.0
    assert timing.behind_s([idled], T0 + 6 * NS) == 5.0
    assert timing.behind_s([settled, idled], T0 + 6 * NS) == 5.0, "the longest wait"
    assert timing.behind_s([settled], T0 + 5 * NS) == 0.0
    assert timing.behind_s([], T0) == 0.0


def test_a_claim_says_which_readiness_applied(engine: Engine) -> None:
    ingest(engine, [span("s1", "1")], T0)  # its only trace, root came: early
    ingest(engine, [span("m1", "1", attrs={"session.id": "chat"})], T0)  # keyed: settle
    with engine.begin() as conn:
        got = claim_ready(conn, worker_id="w", now_ns=T0 + 10 * NS, timing=TIMING, limit=10)
    assert {c.conversation_id: c.early for c in got} == {tid("s1"): True, "chat": False}


def test_nothing_is_held_while_scoring_keeps_up() -> None:
    async def run() -> float:
        gate = _gate()
        gate.report(claimed=200, behind_s=0.3)
        return await gate.hold()

    assert asyncio.run(run()) == 0.0


def test_a_hold_ends_when_a_round_finds_nothing_ready() -> None:
    registry = CollectorRegistry()

    async def run() -> float:
        gate = _gate(registry, max_hold_s=10.0)
        gate.report(claimed=200, behind_s=3.0)
        assert _metric(registry, "toolscore_scoring_behind_seconds") == 3.0
        loop = asyncio.get_running_loop()
        loop.call_later(0.2, gate.report, 200, 1.0)  # still behind
        loop.call_later(0.4, gate.report, 0, 0.0)  # caught up
        return await gate.hold()

    waited = asyncio.run(run())
    assert 0.35 <= waited < 2.0
    assert _metric(registry, "toolscore_receiver_held_requests_total") == 1
    assert _metric(registry, "toolscore_receiver_ack_hold_seconds_total") == pytest.approx(waited)
    assert _metric(registry, "toolscore_scoring_behind_seconds") == 0.0


def test_a_hold_is_bounded_by_max_hold() -> None:
    async def run() -> float:
        gate = _gate(max_hold_s=0.3)
        gate.report(claimed=200, behind_s=30.0)
        return await gate.hold()

    assert 0.25 <= asyncio.run(run()) < 1.0


def test_a_stale_report_holds_nothing() -> None:
    now = [100.0]

    async def run() -> float:
        gate = ScoringLagGate(
            CollectorRegistry(), behind_s=0.5, max_hold_s=5, stale_s=10, clock=lambda: now[0]
        )
        gate.report(claimed=200, behind_s=30.0)
        now[0] += 11  # no round reported since: the signal is gone, not "still behind"
        return await gate.hold()

    assert asyncio.run(run()) == 0.0


def test_holding_is_logged_once_when_it_starts_and_once_when_scoring_caught_up(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def run() -> None:
        gate = _gate()
        for _ in range(5):
            gate.report(claimed=200, behind_s=2.0)
            gate.report(claimed=200, behind_s=0.1)  # hovering around the threshold
        gate.report(claimed=0, behind_s=0.0)

    with caplog.at_level(logging.INFO, logger="toolscore.collector.pipeline.pacing"):
        asyncio.run(run())
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2, lines
    assert lines[0].startswith("scoring is 2.0 s behind: acknowledgements are held")
    assert lines[1] == "scoring caught up: acknowledgements are no longer held"


# --- a real server ----------------------------------------------------------------------------


def _request(conversations: range, now_ns: int) -> bytes:
    """OTLP/protobuf: per conversation an agent root span and a tool span, keyed by id."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

    req = ExportTraceServiceRequest()
    scope = req.resource_spans.add().scope_spans.add()
    for n in conversations:
        trace_id = n.to_bytes(16, "big")
        for span_id, parent, name, extra in (
            (b"\x00" * 7 + b"\x01", b"", "invoke_agent", {}),
            (b"\x00" * 7 + b"\x02", b"\x00" * 7 + b"\x01", "execute_tool get_weather", {
                "gen_ai.tool.name": "get_weather",
                "gen_ai.tool.call.arguments": '{"city": "Paris"}',
            }),
        ):
            s = scope.spans.add(
                trace_id=trace_id,
                span_id=span_id,
                parent_span_id=parent,
                name=name,
                start_time_unix_nano=now_ns,
                end_time_unix_nano=now_ns + 1000,
            )
            attrs = {"gen_ai.conversation.id": f"conv-{n}", **extra}
            s.attributes.extend(
                KeyValue(key=k, value=AnyValue(string_value=v)) for k, v in attrs.items()
            )
    return bytes(req.SerializeToString())


def _post(url: str, body: bytes) -> float:
    import http.client
    import time
    import urllib.parse

    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    start = time.monotonic()
    try:
        conn.request("POST", "/v1/traces", body, {"Content-Type": "application/x-protobuf"})
        response = conn.getresponse()
        response.read()
        assert response.status == 200, response.status
    finally:
        conn.close()
    return time.monotonic() - start


def _scrape(url: str, name: str) -> float:
    import urllib.request

    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
    return 0.0


def test_a_server_whose_scoring_is_behind_holds_acknowledgements_until_it_caught_up(
    sqlite_url: str,
) -> None:
    """A backlog left by a stopped server is behind from the start: a new request is stored,
    then acknowledged only once scoring caught up (or after the longest hold); later ones
    are acknowledged at once."""
    import time

    from tests.collector.pipeline.e2e import pipeline_server

    # stored, never scored: the settle time outlasts this server
    with pipeline_server(sqlite_url, settle_s=60.0) as srv:
        for start in range(0, 3000, 300):
            _post(srv.http_url, _request(range(start, start + 300), time.time_ns()))
    time.sleep(1.5)  # every stored conversation has now been ready for over a second
    with pipeline_server(sqlite_url, settle_s=0.2, root_idle_s=0.1) as srv:
        deadline = time.monotonic() + 30
        while _scrape(srv.http_url, "toolscore_scoring_behind_seconds") <= 0.5:
            assert time.monotonic() < deadline, "no scoring round reported the backlog"
            time.sleep(0.01)
        held = _post(srv.http_url, _request(range(5000, 5001), time.time_ns()))
        assert _scrape(srv.http_url, "toolscore_receiver_held_requests_total") == 1
        assert 0.0 < _scrape(srv.http_url, "toolscore_receiver_ack_hold_seconds_total") <= held
        while _scrape(srv.http_url, "toolscore_scoring_behind_seconds") > 0.0:
            assert time.monotonic() < deadline, "scoring never caught up"
            time.sleep(0.05)
        _post(srv.http_url, _request(range(6000, 6001), time.time_ns()))
        assert _scrape(srv.http_url, "toolscore_receiver_held_requests_total") == 1, "held again"
