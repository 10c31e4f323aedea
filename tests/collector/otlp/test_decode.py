"""Decoding OTLP requests into SpanRecord / LogRecordData."""

from __future__ import annotations

import json

import pytest
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, KeyValue, KeyValueList
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from toolscore.collector.otlp.decode import (
    TRUNCATED_ATTRIBUTE,
    DecodeError,
    DecodeLimits,
    decode_logs,
    decode_traces,
    parse_logs_json,
    parse_traces_json,
    parse_traces_protobuf,
)

TRACE = bytes.fromhex("5b8efff798038103d269b633813fc60c")
SPAN = bytes.fromhex("eee19b7ec3c1b174")


def _request(*spans: Span, resource: list[KeyValue] | None = None) -> ExportTraceServiceRequest:
    req = ExportTraceServiceRequest()
    rs = req.resource_spans.add()
    rs.resource.attributes.extend(resource or [])
    ss = rs.scope_spans.add()
    ss.scope.name = "agent"
    ss.scope.version = "1.2"
    ss.spans.extend(spans)
    return req


def _span(trace_id: bytes = TRACE, span_id: bytes = SPAN, **kw: object) -> Span:
    return Span(
        trace_id=trace_id,
        span_id=span_id,
        name="chat",
        start_time_unix_nano=1_700_000_000_123_456_789,
        end_time_unix_nano=1_700_000_001_000_000_000,
        **kw,  # type: ignore[arg-type]
    )


def test_every_anyvalue_type_is_preserved() -> None:
    attrs = [
        KeyValue(key="s", value=AnyValue(string_value="héllo")),
        KeyValue(key="b", value=AnyValue(bool_value=True)),
        KeyValue(key="i", value=AnyValue(int_value=-(2**63))),
        KeyValue(key="d", value=AnyValue(double_value=0.1)),
        KeyValue(key="raw", value=AnyValue(bytes_value=b"\x00\xff")),
        KeyValue(
            key="arr",
            value=AnyValue(
                array_value=ArrayValue(values=[AnyValue(int_value=1), AnyValue(string_value="x")])
            ),
        ),
        KeyValue(
            key="kv",
            value=AnyValue(
                kvlist_value=KeyValueList(
                    values=[KeyValue(key="inner", value=AnyValue(bool_value=False))]
                )
            ),
        ),
        KeyValue(key="empty", value=AnyValue()),
        # zero values are set values, distinct from an empty AnyValue
        KeyValue(key="s0", value=AnyValue(string_value="")),
        KeyValue(key="b0", value=AnyValue(bool_value=False)),
        KeyValue(key="i0", value=AnyValue(int_value=0)),
        KeyValue(key="d0", value=AnyValue(double_value=0.0)),
    ]
    out = decode_traces(_request(_span(attributes=attrs)))
    (span,) = out.spans
    assert span.attributes == {
        "s": "héllo",
        "b": True,
        "i": -(2**63),
        "d": 0.1,
        "raw": b"\x00\xff",
        "arr": [1, "x"],
        "kv": {"inner": False},
        "empty": None,
        "s0": "",
        "b0": False,
        "i0": 0,
        "d0": 0.0,
    }
    assert type(span.attributes["b"]) is bool
    assert [type(span.attributes[k]) for k in ("s0", "b0", "i0", "d0")] == [str, bool, int, float]
    assert span.trace_id == TRACE.hex() and span.span_id == SPAN.hex()
    assert span.start_ns == 1_700_000_000_123_456_789
    assert (span.scope_name, span.scope_version) == ("agent", "1.2")
    assert out.rejected == 0 and out.error_message == ""


@pytest.mark.parametrize(
    ("trace_id", "span_id", "reason"),
    [
        (b"\x01" * 8, SPAN, "trace_id must be 16 bytes, got 8"),
        (bytes(16), SPAN, "trace_id is all zeros"),
        (TRACE, b"\x01" * 4, "span_id must be 8 bytes, got 4"),
        (TRACE, bytes(8), "span_id is all zeros"),
        (b"", SPAN, "trace_id must be 16 bytes, got 0"),
    ],
)
def test_bad_ids_are_rejected_and_neighbours_kept(
    trace_id: bytes, span_id: bytes, reason: str
) -> None:
    good1 = _span(span_id=b"\x01" * 8)
    good2 = _span(span_id=b"\x02" * 8)
    out = decode_traces(_request(good1, _span(trace_id, span_id), good2))
    assert [s.span_id for s in out.spans] == ["01" * 8, "02" * 8]
    assert out.rejected == 1
    assert reason in out.error_message and "rejected 1 spans" in out.error_message


def test_error_message_stays_short_for_many_rejections() -> None:
    bad = [_span(trace_id=b"\x01" * n) for n in range(1, 15) for _ in range(1000)]
    out = decode_traces(_request(*bad))
    assert out.rejected == 14_000
    assert len(out.error_message) < 400
    assert "and 9 other reasons" in out.error_message


def test_long_values_are_truncated_and_recorded() -> None:
    big = "é" * 100  # 200 UTF-8 bytes
    attrs = [
        KeyValue(key="prompt", value=AnyValue(string_value=big)),
        KeyValue(key="blob", value=AnyValue(bytes_value=b"x" * 100)),
        KeyValue(key="short", value=AnyValue(string_value="ok")),
    ]
    out = decode_traces(_request(_span(attributes=attrs)), DecodeLimits(max_attribute_bytes=51))
    (span,) = out.spans
    assert span.attributes["prompt"] == "é" * 25  # cut on a character boundary
    assert span.attributes["blob"] == b"x" * 51
    assert span.attributes["short"] == "ok"
    assert span.attributes[TRUNCATED_ATTRIBUTE] == ["prompt", "blob"]
    assert out.truncated_values == 2


def test_corrupt_protobuf_is_a_decode_error() -> None:
    with pytest.raises(DecodeError, match="not a valid ExportTraceServiceRequest"):
        parse_traces_protobuf(b"\xff\xff\xff\xff\x0f garbage")


def test_empty_request_and_envelopes_decode_to_nothing() -> None:
    assert decode_traces(parse_traces_protobuf(b"")).spans == ()
    req = ExportTraceServiceRequest()
    req.resource_spans.add().scope_spans.add()
    assert decode_traces(req).spans == ()


OTLP_JSON = {
    "resourceSpans": [
        {
            "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "a"}}]},
            "scope_spans": [  # snake_case key
                {
                    "scope": {"name": "s"},
                    "spans": [
                        {
                            "traceId": "5B8EFFF798038103D269B633813FC60C",  # upper-case hex
                            "span_id": "eee19b7ec3c1b174",
                            "parentSpanId": "",
                            "name": "tool",
                            "kind": "SPAN_KIND_CLIENT",  # enum by name
                            "startTimeUnixNano": "1700000000123456789",  # int64 as string
                            "endTimeUnixNano": 1700000001000000000,  # int64 as number
                            "attributes": [
                                {"key": "n", "value": {"intValue": "42"}},
                                {"key": "raw", "value": {"bytesValue": "AP8="}},
                            ],
                            "status": {"code": 2, "message": "boom"},
                            "links": [
                                {
                                    "traceId": "5b8efff798038103d269b633813fc60c",
                                    "spanId": "0102030405060708",
                                }
                            ],
                            "somethingNew": {"x": 1},  # unknown field
                        },
                        {"traceId": "zz", "spanId": "eee19b7ec3c1b175", "name": "bad id"},
                    ],
                }
            ],
        }
    ]
}


def test_otlp_json_quirks() -> None:
    out = decode_traces(parse_traces_json(json.dumps(OTLP_JSON).encode()))
    (span,) = out.spans
    # regression: json_format alone reads the hex as base64 and yields a 24-byte id
    assert span.trace_id == "5b8efff798038103d269b633813fc60c"
    assert span.span_id == "eee19b7ec3c1b174"
    assert span.parent_span_id is None
    assert span.kind == 3
    assert (span.start_ns, span.end_ns) == (1700000000123456789, 1700000001000000000)
    assert span.attributes == {"n": 42, "raw": b"\x00\xff"}
    assert span.resource_attributes == {"service.name": "a"}
    assert (span.status_code, span.status_message) == (2, "boom")
    assert span.links[0].span_id == "0102030405060708"
    assert out.rejected == 1 and "trace_id" in out.error_message


@pytest.mark.parametrize("body", [b"{", b"[]", b'{"resourceSpans": 3}', b"\xff\xfe"])
def test_bad_json_is_a_decode_error(body: bytes) -> None:
    with pytest.raises(DecodeError):
        parse_traces_json(body)


def test_logs_keep_trace_context_and_event_name() -> None:
    req = ExportLogsServiceRequest()
    sl = req.resource_logs.add().scope_logs.add()
    sl.scope.name = "genai"
    sl.log_records.extend(
        [
            LogRecord(
                time_unix_nano=5,
                trace_id=TRACE,
                span_id=SPAN,
                body=AnyValue(
                    kvlist_value=KeyValueList(
                        values=[KeyValue(key="content", value=AnyValue(string_value="hi"))]
                    )
                ),
                attributes=[
                    KeyValue(key="event.name", value=AnyValue(string_value="gen_ai.user.message"))
                ],
            ),
            LogRecord(time_unix_nano=6, event_name="direct"),  # no trace context
            LogRecord(time_unix_nano=7, trace_id=b"\x01\x02"),  # bad id: rejected
        ]
    )
    out = decode_logs(req)
    assert out.rejected == 1 and "trace_id" in out.error_message
    first, second = out.records
    assert (first.trace_id, first.span_id) == (TRACE.hex(), SPAN.hex())
    assert first.event_name == "gen_ai.user.message"
    assert first.body == {"content": "hi"}
    assert (second.trace_id, second.event_name, second.body) == (None, "direct", None)


def test_logs_json_ids_are_hex() -> None:
    body = {
        "resourceLogs": [
            {
                "scopeLogs": [
                    {
                        "logRecords": [
                            {
                                "traceId": TRACE.hex(),
                                "spanId": SPAN.hex(),
                                "body": {"stringValue": "x"},
                                "severityNumber": "SEVERITY_NUMBER_INFO",
                            }
                        ]
                    }
                ]
            }
        ]
    }
    (rec,) = decode_logs(parse_logs_json(json.dumps(body).encode())).records
    assert (rec.trace_id, rec.span_id, rec.body, rec.severity_number) == (
        TRACE.hex(),
        SPAN.hex(),
        "x",
        9,
    )
