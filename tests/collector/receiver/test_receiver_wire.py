"""Protobuf bodies are split into chunk requests before they are parsed, each chunk's memory
estimated first (collector/receiver/wire.py)."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

from tests.collector.receiver.test_receiver_admission import _traces
from toolscore.collector.otlp.decode import DecodeError, DecodeLimits, decode_logs, decode_traces
from toolscore.collector.receiver.wire import chunk_cost, split

LIMIT = 1 << 40


def _decoded_spans(body: bytes, max_items: int, max_bytes: int) -> list[object]:
    parts = list(split(body, False, max_items, max_bytes, LIMIT))
    assert all(p.items <= max_items for p in parts)
    spans = []
    for part in parts:
        req = ExportTraceServiceRequest.FromString(part.data)
        assert sum(len(ss.spans) for rs in req.resource_spans for ss in rs.scope_spans) == (
            part.items
        )
        spans += list(decode_traces(req).spans)
    return spans


def test_chunks_decode_to_exactly_what_the_whole_request_decodes_to() -> None:
    req = _traces(resources=3, scopes=2, spans=7)
    req.resource_spans[1].schema_url = "https://example/schema"
    whole = decode_traces(req)
    body = req.SerializeToString()
    for max_items in (1, 5, 48, 10_000):
        assert _decoded_spans(body, max_items, 1 << 20) == list(whole.spans), max_items
    parts = list(split(body, False, 5, 1 << 20, LIMIT))
    assert [p.items for p in parts] == [5] * 9 + [3]  # 48 items (6 invalid ones kept)


def test_chunks_are_bounded_in_wire_bytes_and_a_big_item_is_alone() -> None:
    req = _traces(resources=1, scopes=1, spans=40, payload=1000)
    req.resource_spans[0].scope_spans[0].spans[3].attributes.append(
        KeyValue(key="big", value=AnyValue(string_value="z" * 20_000))
    )
    body = req.SerializeToString()
    parts = list(split(body, False, 10_000, 8_000, LIMIT))
    assert all(len(p.data) <= 8_000 + 200 or p.items == 1 for p in parts)
    assert [p.items for p in parts if len(p.data) > 8_200] == [1]
    assert _decoded_spans(body, 10_000, 8_000) == list(decode_traces(req).spans)


def test_log_requests_are_split_too() -> None:
    req = ExportLogsServiceRequest()
    scope = req.resource_logs.add().scope_logs.add()
    for i in range(25):
        scope.log_records.add().body.string_value = f"line {i}"
    parts = list(split(req.SerializeToString(), True, 10, 1 << 20, LIMIT))
    assert [p.items for p in parts] == [10, 10, 5]
    bodies = [
        r.body
        for p in parts
        for r in decode_logs(ExportLogsServiceRequest.FromString(p.data), DecodeLimits()).records
    ]
    assert bodies == [f"line {i}" for i in range(25)]


def _rss_mb(field: str = "VmRSS") -> float:
    match = re.search(rf"{field}:\s+(\d+)", Path("/proc/self/status").read_text())
    assert match is not None
    return int(match.group(1)) / 1024


def _peak_growth(parse: Callable[[], object]) -> float:
    """Bytes the process's peak RSS grew by while ``parse()`` ran (VmHWM reset first)."""
    Path("/proc/self/clear_refs").write_text("5")
    before = _rss_mb()
    parsed = parse()
    grown = (_rss_mb("VmHWM") - before) * 2**20
    del parsed
    return grown


def _len_field(number: int, payload: bytes) -> bytes:
    length, out = len(payload), bytearray([number << 3 | 2])
    while length >= 0x80:
        out.append(length & 0x7F | 0x80)
        length >>= 7
    return bytes(out + bytes([length]) + payload)


@pytest.mark.parametrize(
    "shape",
    ["empty spans", "empty attributes", "empty events", "array of empty values"],
)
def test_what_a_chunk_costs_to_parse_is_never_underestimated(shape: str) -> None:
    """Shapes whose parsed form is 19-89x their wire size: the estimate covers the parse."""
    n = 200_000
    span = {
        "empty spans": b"",
        "empty attributes": b"\x4a\x00" * n,
        "empty events": b"\x5a\x00" * n,
        "array of empty values": _len_field(
            9, b"\x0a\x01a" + _len_field(2, _len_field(5, b"\x0a\x00" * n))
        ),
    }[shape]
    spans = b"\x12\x00" * n if shape == "empty spans" else _len_field(2, span)
    body = _len_field(1, _len_field(2, spans))
    for part in split(body, False, 10_000, 1 << 20, LIMIT):
        data = part.data
        grown = _peak_growth(lambda d=data: ExportTraceServiceRequest.FromString(d))
        assert grown <= part.cost, (shape, grown, part.cost)
    assert chunk_cost(10_000, 1 << 20) < 64 * 2**20  # what any ordinary chunk may reserve


def test_a_big_items_nested_values_are_counted_and_counting_stops_over_the_limit() -> None:
    attrs = b"\x4a\x00" * 3_000_000  # 3,000,000 empty attributes in one 6 MB span
    body = _len_field(1, _len_field(2, _len_field(2, attrs)))
    (part,) = split(body, False, 10_000, 1 << 20, 100 * 2**20)
    assert part.items == 1 and part.cost > 100 * 2**20  # refused by the budget, not parsed


@pytest.mark.parametrize(
    "body",
    [b"\x0a\x05\x12\x03\x12", b"\x0a\xff", b"\x08\x01\x0b", b"\x0a\x02\x10\x01", b"\x0d\x00"],
)
def test_broken_framing_is_a_decode_error(body: bytes) -> None:
    with pytest.raises(DecodeError, match="not a valid ExportTraceServiceRequest"):
        list(split(body, False, 10, 1 << 20, LIMIT))


@pytest.mark.parametrize(
    "spans",
    [
        "{}",  # empty spans: 82x their text when parsed
        '{"traceId":"0102030405060708090a0b0c0d0e0f10","spanId":"0102030405060708","name":"t"}',
        '{"attributes":[{"key":"a","value":{"arrayValue":{"values":['
        + ",".join(["{}"] * 50)
        + "]}}}]}",
        '{"unknown":[' + ",".join(['"a"'] * 50) + "]}",  # strings kept by json.loads
    ],
)
def test_what_parsing_otlp_json_costs_is_never_underestimated(spans: str) -> None:
    """OTLP/JSON is parsed whole: its reservation (core._json_cost) covers the parse."""
    from toolscore.collector.otlp.decode import parse_traces_json
    from toolscore.collector.receiver.core import _json_cost

    n = 200_000 // max(1, spans.count(",") // 5)
    body = '{"resourceSpans":[{"scopeSpans":[{"spans":[' + ",".join([spans] * n) + "]}]}]}"
    data = body.encode()
    before = _rss_mb()
    parsed = parse_traces_json(data)
    grown = (_rss_mb() - before) * 2**20
    assert grown <= _json_cost(data), (grown, _json_cost(data))
    del parsed
