"""Hypothesis strategies for OTLP request bodies: valid, nearly valid and hostile.

Structure-aware on purpose: random bytes rarely get past the first parser, so most examples are
real OTLP messages (protobuf and OTLP/JSON, traces and logs) whose values are drawn from the
edges (times beyond int64, NUL, lone surrogates, long ids, Infinity, deep nesting, wrong types),
then, sometimes, cut or corrupted.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, KeyValue, KeyValueList
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord
from opentelemetry.proto.trace.v1.trace_pb2 import Span

KEYS = ("gen_ai.conversation.id", "toolscore.reference.id", "session.id", "k", "")
UINT64 = st.one_of(st.sampled_from([0, 1, 2**63 - 1, 2**63, 2**64 - 1]), st.integers(0, 2**64 - 1))
# Text with lone surrogates (JSON escapes them; protobuf text cannot hold them) and NUL.
ANY_TEXT = st.one_of(
    st.text(max_size=40),
    st.lists(st.sampled_from(["a", "\ud800", "\udfff", "\x00", "é", "\U0001f600"]), max_size=8).map(
        "".join
    ),
    st.sampled_from(["x" * 3000, "€" * 400]),
)
PROTO_TEXT = st.one_of(
    st.text(max_size=40),
    st.sampled_from(["\x00", "a\x00b", "x" * 3000, " " * 2000, "€" * 400]),
)
ID_BYTES = st.one_of(st.binary(min_size=16, max_size=16), st.binary(max_size=20))


# --- protobuf -------------------------------------------------------------------------------


def _any_values(depth: int) -> st.SearchStrategy[AnyValue]:
    scalars = st.one_of(
        PROTO_TEXT.map(lambda s: AnyValue(string_value=s)),
        st.integers(-(2**63), 2**63 - 1).map(lambda i: AnyValue(int_value=i)),
        st.floats().map(lambda f: AnyValue(double_value=f)),
        st.booleans().map(lambda b: AnyValue(bool_value=b)),
        st.binary(max_size=8).map(lambda b: AnyValue(bytes_value=b)),
        st.just(AnyValue()),
    )
    if depth == 0:
        return scalars
    inner = _any_values(depth - 1)
    return st.one_of(
        scalars,
        st.lists(inner, max_size=3).map(lambda v: AnyValue(array_value=ArrayValue(values=v))),
        st.lists(st.tuples(st.sampled_from(KEYS), inner), max_size=3).map(
            lambda kvs: AnyValue(
                kvlist_value=KeyValueList(values=[KeyValue(key=k, value=v) for k, v in kvs])
            )
        ),
    )


ATTRIBUTES = st.lists(
    st.tuples(st.sampled_from(KEYS), _any_values(3)).map(
        lambda kv: KeyValue(key=kv[0], value=kv[1])
    ),
    max_size=4,
)


@st.composite
def trace_requests(draw: st.DrawFn) -> ExportTraceServiceRequest:
    req = ExportTraceServiceRequest()
    for _ in range(draw(st.integers(0, 2))):
        rs = req.resource_spans.add()
        rs.resource.attributes.extend(draw(ATTRIBUTES))
        scope = rs.scope_spans.add()
        scope.scope.name = draw(PROTO_TEXT)
        for _ in range(draw(st.integers(0, 3))):
            span = Span(
                trace_id=draw(ID_BYTES),
                span_id=draw(st.one_of(st.binary(min_size=8, max_size=8), st.binary(max_size=9))),
                parent_span_id=draw(st.binary(max_size=9)),
                name=draw(PROTO_TEXT),
                kind=draw(st.integers(0, 6)),
                start_time_unix_nano=draw(UINT64),
                end_time_unix_nano=draw(UINT64),
            )
            span.attributes.extend(draw(ATTRIBUTES))
            span.status.message = draw(PROTO_TEXT)
            event = span.events.add()
            event.time_unix_nano = draw(UINT64)
            event.attributes.extend(draw(ATTRIBUTES))
            scope.spans.append(span)
    return req


@st.composite
def log_requests(draw: st.DrawFn) -> ExportLogsServiceRequest:
    req = ExportLogsServiceRequest()
    rl = req.resource_logs.add()
    rl.resource.attributes.extend(draw(ATTRIBUTES))
    records = rl.scope_logs.add().log_records
    for _ in range(draw(st.integers(0, 3))):
        record = LogRecord(
            time_unix_nano=draw(UINT64),
            observed_time_unix_nano=draw(UINT64),
            trace_id=draw(ID_BYTES),
            span_id=draw(st.binary(max_size=9)),
            severity_text=draw(PROTO_TEXT),
            event_name=draw(PROTO_TEXT),
        )
        record.body.CopyFrom(draw(_any_values(3)))
        record.attributes.extend(draw(ATTRIBUTES))
        records.append(record)
    return req


@st.composite
def corrupted(draw: st.DrawFn, data: bytes) -> bytes:
    """``data`` cut, with bytes flipped, or spliced with random bytes (or left as is)."""
    how = draw(st.sampled_from(["as is", "cut", "flip", "splice"]))
    if not data or how == "as is":
        return data
    at = draw(st.integers(0, len(data) - 1))
    if how == "cut":
        return data[:at]
    if how == "flip":
        return data[:at] + bytes([data[at] ^ draw(st.integers(1, 255))]) + data[at + 1 :]
    return data[:at] + draw(st.binary(max_size=16)) + data[at:]


def protobuf_bodies(signal: str) -> st.SearchStrategy[bytes]:
    messages = trace_requests() if signal == "traces" else log_requests()
    valid = messages.map(lambda m: bytes(m.SerializeToString()))
    return st.one_of(valid.flatmap(corrupted), st.binary(max_size=200))


# --- OTLP/JSON ------------------------------------------------------------------------------

EDGE_NUMBERS = st.sampled_from(
    [2**63, 2**64 - 1, 2**64, -1, 10**30, float("inf"), float("-inf"), float("nan"), 1.5, 0]
)
JSON_SCALARS = st.one_of(
    ANY_TEXT, EDGE_NUMBERS, st.integers(), st.booleans(), st.none(), UINT64.map(str)
)


def _json_any_values(depth: int) -> st.SearchStrategy[Any]:
    scalars = st.one_of(
        st.fixed_dictionaries(
            {},
            optional={
                "stringValue": JSON_SCALARS,
                "intValue": JSON_SCALARS,
                "doubleValue": st.one_of(JSON_SCALARS, st.sampled_from(["Infinity", "NaN"])),
                "boolValue": JSON_SCALARS,
                "bytesValue": JSON_SCALARS,
            },
        ),
        JSON_SCALARS,
    )
    if depth == 0:
        return scalars
    inner = _json_any_values(depth - 1)
    return st.one_of(
        scalars,
        st.lists(inner, max_size=3).map(lambda v: {"arrayValue": {"values": v}}),
        st.lists(st.fixed_dictionaries({"key": ANY_TEXT, "value": inner}), max_size=3).map(
            lambda v: {"kvlistValue": {"values": v}}
        ),
    )


JSON_ATTRIBUTES = st.lists(
    st.fixed_dictionaries({"key": st.one_of(st.sampled_from(KEYS), ANY_TEXT)}).flatmap(
        lambda kv: _json_any_values(3).map(lambda v: {**kv, "value": v})
    ),
    max_size=4,
)
HEX_IDS = st.one_of(
    st.binary(min_size=16, max_size=16).map(bytes.hex),
    st.binary(min_size=8, max_size=8).map(bytes.hex),
    ANY_TEXT,
    JSON_SCALARS,
)
JSON_SPAN = st.fixed_dictionaries(
    {"traceId": HEX_IDS, "spanId": HEX_IDS},
    optional={
        "parentSpanId": HEX_IDS,
        "name": JSON_SCALARS,
        "kind": st.one_of(JSON_SCALARS, st.sampled_from(["SPAN_KIND_SERVER", "bogus"])),
        "startTimeUnixNano": JSON_SCALARS,
        "endTimeUnixNano": JSON_SCALARS,
        "attributes": JSON_ATTRIBUTES,
        "events": st.lists(
            st.fixed_dictionaries(
                {}, optional={"timeUnixNano": JSON_SCALARS, "attributes": JSON_ATTRIBUTES}
            ),
            max_size=2,
        ),
        "status": st.fixed_dictionaries({}, optional={"code": JSON_SCALARS}),
    },
)
JSON_LOG = st.fixed_dictionaries(
    {},
    optional={
        "timeUnixNano": JSON_SCALARS,
        "observedTimeUnixNano": JSON_SCALARS,
        "traceId": HEX_IDS,
        "spanId": HEX_IDS,
        "severityNumber": JSON_SCALARS,
        "body": _json_any_values(3),
        "attributes": JSON_ATTRIBUTES,
    },
)


def _wrap(signal: str, items: list[Any], resource: list[Any]) -> dict[str, Any]:
    if signal == "traces":
        scope = {"scopeSpans": [{"spans": items}]}
        return {"resourceSpans": [{"resource": {"attributes": resource}, **scope}]}
    scope = {"scopeLogs": [{"logRecords": items}]}
    return {"resourceLogs": [{"resource": {"attributes": resource}, **scope}]}


def _deeply_nested(depth: int) -> bytes:
    return b'{"a":' * depth + b"[" * depth + b"]" * depth + b"}" * depth


def json_bodies(signal: str) -> st.SearchStrategy[bytes]:
    item = JSON_SPAN if signal == "traces" else JSON_LOG
    documents = st.builds(_wrap, st.just(signal), st.lists(item, max_size=3), JSON_ATTRIBUTES)
    # allow_nan: bare NaN / Infinity, as Python senders write them; ensure_ascii: surrogates
    # travel as \ud800 escapes
    text = documents.map(lambda d: json.dumps(d, allow_nan=True).encode())
    return st.one_of(
        text,
        text.flatmap(corrupted),
        st.integers(900, 12_000).map(_deeply_nested),
        st.binary(max_size=100),
    )
