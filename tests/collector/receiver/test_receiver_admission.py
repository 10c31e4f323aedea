"""The receiver's memory budget, chunked decoding and multi-member gzip, as units."""

from __future__ import annotations

import asyncio
import gzip
import threading
import zlib

import pytest
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

from toolscore.collector.errors import RequestTooLarge, UnsupportedEncoding, status_for
from toolscore.collector.ingest.metrics import Metrics
from toolscore.collector.otlp.decode import DecodeLimits, decode_logs, decode_traces
from toolscore.collector.receiver.budget import MemoryBudget, MemoryBusy
from toolscore.collector.receiver.inflate import inflater
from toolscore.collector.receiver.limits import TRIM_AFTER_BYTES
from toolscore.collector.receiver.splitting import chunks, item_count


def _traces(resources: int, scopes: int, spans: int, payload: int = 0) -> ExportTraceServiceRequest:
    req = ExportTraceServiceRequest()
    n = 0
    for r in range(resources):
        rs = req.resource_spans.add()
        rs.resource.attributes.append(
            KeyValue(key="service.name", value=AnyValue(string_value=f"s{r}"))
        )
        for s in range(scopes):
            ss = rs.scope_spans.add()
            ss.scope.name = f"scope{s}"
            for _ in range(spans):
                n += 1
                span = ss.spans.add()
                span.trace_id = n.to_bytes(16, "big")
                span.span_id = n.to_bytes(8, "big")
                span.name = "x"
                span.start_time_unix_nano, span.end_time_unix_nano = 1, 2
                if payload:
                    span.attributes.append(
                        KeyValue(key="p", value=AnyValue(string_value="y" * payload))
                    )
            bad = ss.spans.add()  # one invalid span per scope: rejected, its neighbours kept
            bad.trace_id = b"short"
    return req


def test_chunks_decode_to_exactly_what_the_whole_request_decodes_to() -> None:
    req = _traces(resources=3, scopes=2, spans=7)
    whole = decode_traces(req)
    parts = list(chunks(req, max_items=5, max_bytes=1 << 20))
    assert all(item_count(p) <= 5 for p in parts) and len(parts) == 10  # 48 items / 5
    decoded = [decode_traces(p) for p in parts]
    assert [s for d in decoded for s in d.spans] == list(whole.spans)  # same records, same order
    assert sum(d.rejected for d in decoded) == whole.rejected == 6


def test_chunks_are_bounded_in_wire_bytes_and_a_small_request_is_not_copied() -> None:
    req = _traces(resources=1, scopes=1, spans=40, payload=1000)
    parts = list(chunks(req, max_items=10_000, max_bytes=8_000))
    assert all(p.ByteSize() <= 8_000 + 200 for p in parts) and len(parts) >= 5
    assert sum(item_count(p) for p in parts) == 41
    small = _traces(1, 1, 3)
    assert next(iter(chunks(small, 10, 1 << 20))) is small


def test_log_requests_are_chunked_too() -> None:
    req = ExportLogsServiceRequest()
    scope = req.resource_logs.add().scope_logs.add()
    for i in range(25):
        scope.log_records.add().body.string_value = f"line {i}"
    parts = list(chunks(req, max_items=10, max_bytes=1 << 20))
    assert [item_count(p) for p in parts] == [10, 10, 5]
    bodies = [r.body for p in parts for r in decode_logs(p, DecodeLimits()).records]
    assert bodies == [f"line {i}" for i in range(25)]


def test_the_budget_refuses_what_does_not_fit_and_gets_everything_back() -> None:
    metrics = Metrics()
    budget = MemoryBudget(1000, metrics, retry_after_s=2.0)
    first = budget.reservation("http")
    first.grow(600)
    second = budget.reservation("grpc")
    second.grow(300)
    with pytest.raises(MemoryBusy) as busy:
        second.grow(200)  # 1100 > 1000 while the first holds 600
    assert status_for(busy.value).http_status == 503 and busy.value.retry_after_s == 2.0
    assert second.held == 0 and budget.used == 600  # a refused request gives back all it held
    with pytest.raises(RequestTooLarge):
        budget.reservation("http").grow(1001)  # could never fit: permanent, not retryable
    first.close()
    first.close()  # idempotent
    assert budget.used == 0
    assert metrics.registry.get_sample_value("toolscore_receiver_memory_reserved_bytes") == 0
    refused = metrics.registry.get_sample_value(
        "toolscore_receiver_memory_refused_requests_total", {"transport": "grpc"}
    )
    assert refused == 1


def test_only_a_big_request_done_trims_the_heap_not_an_unread_allowance_given_back() -> None:
    """A gRPC read reserves room for a message of the size limit, then gives back what the
    message did not need (shrink): nothing was allocated, so no malloc_trim (trimming after
    every ordinary request cost ~13% of ingest's CPU: freed heap faulted back in)."""
    trims: list[int] = []
    budget = MemoryBudget(8 * TRIM_AFTER_BYTES, Metrics(), retry_after_s=1.0)
    budget._trim._fn = lambda pad: trims.append(pad) or 1
    request = budget.reservation("grpc")
    request.grow(2 * TRIM_AFTER_BYTES)
    request.shrink(2 * TRIM_AFTER_BYTES - 1000)  # the message was small
    _join_trims()
    assert trims == [] and budget.used == 1000
    request.grow(TRIM_AFTER_BYTES)  # a big request, decoded, then done
    request.close()
    _join_trims()
    assert trims == [0] and budget.used == 0


def _join_trims() -> None:
    for thread in threading.enumerate():
        if thread.name == "toolscore-malloc-trim":
            thread.join(10)


def test_a_wait_for_room_ends_when_enough_is_given_back() -> None:
    """gRPC reads wait for room for a whole message before reading it (grpc_server.py)."""

    async def scenario() -> list[str]:
        budget = MemoryBudget(1000, Metrics(), retry_after_s=1.0)
        held = budget.reservation("http")
        held.grow(800)
        events: list[str] = []

        async def reader(n: int, name: str) -> None:
            await budget.room(n)
            budget.reservation("grpc").grow(n)  # nothing awaited between: it fits
            events.append(name)

        small = asyncio.create_task(reader(150, "small"))
        big = asyncio.create_task(reader(5000, "capped at the limit"))
        await asyncio.sleep(0.01)
        assert events == ["small"]  # 150 fitted at once, the capped one waits for all 1000
        held.shrink(300)  # 650 used: still no room for 1000
        await asyncio.sleep(0.01)
        assert not big.done()
        held.close()
        await asyncio.sleep(0.01)
        assert not big.done()  # the small one still holds its 150
        big.cancel()
        await asyncio.gather(small, big, return_exceptions=True)
        assert budget._waiters == []  # a cancelled wait leaves nothing behind
        return events

    assert asyncio.run(scenario()) == ["small"]


def _inflate(body: bytes, encoding: str = "gzip", limit: int = 1 << 20, step: int = 7) -> bytes:
    dec = inflater(encoding, limit)
    out = b""
    for i in range(0, len(body), step):  # in small pieces, as a network delivers it
        out += dec.feed(body[i : i + step], len(out))
    return out + dec.finish(len(out))


def test_every_gzip_member_is_read() -> None:
    body = gzip.compress(b"first member|") + gzip.compress(b"second|") + gzip.compress(b"third")
    assert _inflate(body) == b"first member|second|third"
    assert _inflate(body, step=len(body)) == b"first member|second|third"


def test_a_body_is_read_whole_or_refused_never_half() -> None:
    two = gzip.compress(b"a" * 100) + gzip.compress(b"b" * 100)
    with pytest.raises(UnsupportedEncoding, match="truncated"):
        _inflate(two[:-3])  # the second member cut short
    with pytest.raises(UnsupportedEncoding, match="member 2"):
        _inflate(gzip.compress(b"a") + b"trailing garbage")
    with pytest.raises(RequestTooLarge):
        _inflate(gzip.compress(b"a" * 600) + gzip.compress(b"b" * 600), limit=1000)
    with pytest.raises(RequestTooLarge):  # a bomb in the second member is not inflated
        _inflate(gzip.compress(b"a") + gzip.compress(b"\0" * 50_000_000), limit=1000, step=4096)
    assert _inflate(zlib.compress(b"plain deflate"), "deflate") == b"plain deflate"
    with pytest.raises(UnsupportedEncoding):
        inflater("br", 10)
