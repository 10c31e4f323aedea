"""Decode refuses, item by item, what the database cannot hold, and keeps the neighbours.

A span whose time is beyond int64, or whose conversation / reference id holds NUL or is longer
than an index entry allows, is rejected through partial success with a message naming the field;
values nested deeper than the depth limit are cut there and flagged. Malformed OTLP/JSON of the
kinds found by fuzzing (lone surrogates, deep nesting, Infinity in integer fields) is a
DecodeError whose status can be serialised, never another exception.
"""

from __future__ import annotations

import json

import pytest
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, KeyValue
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from toolscore.collector.errors import MAX_MESSAGE_CHARS, rpc_status_bytes, status_for
from toolscore.collector.otlp.decode import (
    TRUNCATED_ATTRIBUTE,
    DecodeError,
    DecodeLimits,
    decode_logs,
    decode_traces,
    parse_logs_json,
    parse_traces_json,
)
from toolscore.collector.otlp.sanitize import MAX_INT64

TRACE = bytes.fromhex("5b8efff798038103d269b633813fc60c")
CONV = "gen_ai.conversation.id"
REF = "toolscore.reference.id"


def _span(n: int, attrs: dict[str, str] | None = None, **kw: int) -> Span:
    span = Span(
        trace_id=TRACE,
        span_id=n.to_bytes(8, "big"),
        name=f"span {n}",
        start_time_unix_nano=kw.get("start", 1_700_000_000_000_000_000),
        end_time_unix_nano=kw.get("end", 1_700_000_001_000_000_000),
    )
    for key, value in (attrs or {}).items():
        span.attributes.append(KeyValue(key=key, value=AnyValue(string_value=value)))
    return span


def _request(*spans: Span, resource: dict[str, str] | None = None) -> ExportTraceServiceRequest:
    req = ExportTraceServiceRequest()
    rs = req.resource_spans.add()
    for key, value in (resource or {}).items():
        rs.resource.attributes.append(KeyValue(key=key, value=AnyValue(string_value=value)))
    rs.scope_spans.add().spans.extend(spans)
    return req


def _ninety_nine_and(poison: Span) -> ExportTraceServiceRequest:
    return _request(*(_span(n) for n in range(1, 50)), poison, *(_span(n) for n in range(51, 101)))


POISONS = {
    "start beyond int64": (_span(50, start=2**63), "start_time_unix_nano is beyond"),
    "end at 2^64-1": (_span(50, end=2**64 - 1), "end_time_unix_nano is beyond"),
    "NUL in conversation id": (_span(50, {CONV: "conv\x00"}), f"{CONV} contains a NUL"),
    "NUL in reference id": (_span(50, {REF: "\x00ref"}), f"{REF} contains a NUL"),
    "3,000-character conversation id": (_span(50, {CONV: "c" * 3000}), f"{CONV} is longer"),
    "2,000-character reference id": (_span(50, {REF: "r" * 2000}), f"{REF} is longer"),
}


@pytest.mark.parametrize("kind", POISONS)
def test_the_poison_span_is_rejected_and_its_99_neighbours_kept(kind: str) -> None:
    poison, reason = POISONS[kind]
    decoded = decode_traces(_ninety_nine_and(poison))
    assert decoded.rejected == 1
    assert reason in decoded.error_message
    assert decoded.error_message.startswith("rejected 1 spans: 1 × ")
    assert len(decoded.spans) == 99
    assert "0000000000000032" not in {s.span_id for s in decoded.spans}  # span 50


def test_the_largest_int64_time_is_kept() -> None:
    decoded = decode_traces(_request(_span(1, start=MAX_INT64, end=MAX_INT64)))
    assert decoded.rejected == 0
    assert decoded.spans[0].start_ns == decoded.spans[0].end_ns == MAX_INT64


def test_an_id_at_the_limit_is_kept_one_byte_over_is_rejected() -> None:
    limits = DecodeLimits(max_key_bytes=1024)
    at_limit = "€" * 341 + "a"  # 3 bytes each: 1024 bytes in UTF-8, 342 characters
    over = "€" * 342  # 1026 bytes
    padded = "  " + "x" * 1024 + "  "  # compared stripped, as the conversation hook reads it
    decoded = decode_traces(
        _request(_span(1, {CONV: at_limit}), _span(2, {CONV: over}), _span(3, {CONV: padded})),
        limits,
    )
    assert [s.attributes[CONV] for s in decoded.spans] == [at_limit, padded]
    assert decoded.rejected == 1


def test_nul_elsewhere_is_stored_not_rejected() -> None:
    # Only ids are refused: other text with NUL is stored safely (storage tags it).
    decoded = decode_traces(_request(_span(1, {"gen_ai.input.messages": "a\x00b"})))
    assert decoded.rejected == 0
    assert decoded.spans[0].attributes["gen_ai.input.messages"] == "a\x00b"


def test_a_resource_naming_a_bad_id_rejects_its_spans_only() -> None:
    req = _request(_span(1), _span(2), resource={"session.id": "s\x00"})
    good = req.resource_spans.add()
    good.scope_spans.add().spans.append(_span(3))
    decoded = decode_traces(req)
    assert [s.span_id for s in decoded.spans] == [(3).to_bytes(8, "big").hex()]
    assert decoded.rejected == 2
    assert "2 × resource attribute session.id contains a NUL" in decoded.error_message


def test_configured_key_attributes_are_the_ones_checked() -> None:
    limits = DecodeLimits(key_attributes=("app.session",), max_key_bytes=16)
    decoded = decode_traces(
        _request(_span(1, {"app.session": "x" * 17}), _span(2, {CONV: "y" * 100})), limits
    )
    assert decoded.rejected == 1
    assert "attribute app.session is longer than the 16-byte limit" in decoded.error_message
    assert [s.attributes[CONV] for s in decoded.spans] == ["y" * 100]


def test_an_id_the_attribute_limit_would_shorten_is_rejected_not_changed() -> None:
    limits = DecodeLimits(max_attribute_bytes=100, max_key_bytes=1024)
    decoded = decode_traces(_request(_span(1, {CONV: "c" * 200}), _span(2, {"other": "o" * 200})))
    assert decoded.rejected == 0  # default limits: 200 bytes is fine
    decoded = decode_traces(
        _request(_span(1, {CONV: "c" * 200}), _span(2, {"o": "o" * 200})), limits
    )
    assert decoded.rejected == 1
    assert f"{CONV} is longer than the attribute size limit" in decoded.error_message
    assert decoded.spans[0].attributes[TRUNCATED_ATTRIBUTE] == ["o"]


def _nested(depth: int) -> AnyValue:
    value = AnyValue(string_value="leaf")
    for _ in range(depth):
        value = AnyValue(array_value=ArrayValue(values=[value]))
    return value


def _depth(value: object) -> int:
    levels = 0
    while isinstance(value, list):
        levels += 1
        value = value[0] if value else None
    return levels


def test_values_nested_deeper_than_the_limit_are_cut_and_flagged() -> None:
    # protobuf's parser stops near 47 levels on the wire (see the JSON cases below); the cut
    # is the guard behind it, shown with a small limit
    span = _span(1)
    span.attributes.append(KeyValue(key="ok", value=_nested(3)))
    span.attributes.append(KeyValue(key="deep", value=_nested(10)))
    decoded = decode_traces(_request(span), DecodeLimits(max_value_depth=3))
    attrs = decoded.spans[0].attributes
    assert attrs["ok"] == [[["leaf"]]]  # the limit itself is kept whole
    assert attrs["deep"] == [[[None]]]  # below it: null
    assert attrs[TRUNCATED_ATTRIBUTE] == ["deep"]
    assert decoded.truncated_values == 1 and decoded.rejected == 0


def test_the_default_depth_limit_is_above_what_protobuf_parses() -> None:
    decoded = decode_traces(_request(_nested_span(40)))
    assert _depth(decoded.spans[0].attributes["deep"]) == 40
    assert decoded.truncated_values == 0


def _nested_span(depth: int) -> Span:
    span = _span(1)
    span.attributes.append(KeyValue(key="deep", value=_nested(depth)))
    return span


def test_log_records_with_times_beyond_int64_are_rejected() -> None:
    req = ExportLogsServiceRequest()
    records = req.resource_logs.add().scope_logs.add().log_records
    records.append(LogRecord(time_unix_nano=1, observed_time_unix_nano=2))
    records.append(LogRecord(time_unix_nano=2**63))
    records.append(LogRecord(time_unix_nano=1, observed_time_unix_nano=2**64 - 1))
    decoded = decode_logs(req)
    assert [r.time_ns for r in decoded.records] == [1]
    assert decoded.rejected == 2
    assert "1 × time_unix_nano is beyond" in decoded.error_message
    assert "1 × observed_time_unix_nano is beyond" in decoded.error_message


# --- OTLP/JSON bodies found by fuzzing ------------------------------------------------------


def _json_span(**fields: object) -> dict[str, object]:
    span: dict[str, object] = {"traceId": TRACE.hex(), "spanId": "00000000000000aa", "name": "x"}
    span.update(fields)
    return {"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}


def _attribute_body(value_json: bytes) -> bytes:
    template = json.dumps(_json_span(attributes=[{"key": "k", "value": "@"}])).encode()
    return template.replace(b'"@"', value_json)


BAD_JSON = {
    "lone surrogate in a name": json.dumps(_json_span(name="\ud800")).encode(),
    "lone surrogate quoted by the error": json.dumps(
        _json_span(startTimeUnixNano="\udc00 1")
    ).encode(),
    # found by tests/collector/otlp/test_decode_fuzz.py: upb's field lookup raised SystemError
    "lone surrogate in a key": json.dumps({"resourceSpans": [{"\ud800": 1}]}).encode(),
    "lone surrogate in a logs key": json.dumps({"resourceLogs": [{"\udfff": 1}]}).encode(),
    "10,000-deep arrays": b"[" * 10_000 + b"]" * 10_000,
    "10,000-deep objects": b'{"a":' * 10_000 + b"1" + b"}" * 10_000,
    "100-deep attribute value": _attribute_body(
        b'{"arrayValue":{"values":[' * 100 + b'{"intValue":1}' + b"]}}" * 100
    ),
    "2,000-deep attribute value": _attribute_body(
        b'{"arrayValue":{"values":[' * 2000 + b'{"intValue":1}' + b"]}}" * 2000
    ),
    "Infinity in an enum field": json.dumps(_json_span(kind=float("inf"))).encode(),
    "Infinity in an integer field": json.dumps(_json_span(startTimeUnixNano=float("inf"))).encode(),
    "-Infinity in an integer field": json.dumps(_json_span(endTimeUnixNano=float("-inf"))).encode(),
    "a huge value quoted by the error": json.dumps(
        _json_span(startTimeUnixNano="9 " * 50_000)
    ).encode(),
}


@pytest.mark.parametrize("kind", BAD_JSON)
def test_malformed_json_is_a_decode_error_with_a_serialisable_status(kind: str) -> None:
    body = BAD_JSON[kind]
    # each body is bad for its own signal; the other one ignores unknown fields (or fails too)
    own = parse_logs_json if b"resourceLogs" in body else parse_traces_json
    for parse in (parse_traces_json, parse_logs_json):
        try:
            parse(body)
        except DecodeError as exc:
            status = status_for(exc)
            assert status.http_status == 400
            assert len(status.message) <= MAX_MESSAGE_CHARS
            assert rpc_status_bytes(status)  # serialisable: the surrogate no longer crashes it
        else:
            assert parse is not own, f"{kind}: accepted by {parse.__name__}"


def test_infinity_in_a_double_value_is_kept_when_quoted_as_protobuf_json_says() -> None:
    decoded = decode_traces(parse_traces_json(_attribute_body(b'{"doubleValue": "Infinity"}')))
    assert decoded.spans[0].attributes["k"] == float("inf")
    with pytest.raises(DecodeError, match="quoted"):
        parse_traces_json(_attribute_body(b'{"doubleValue": Infinity}'))
