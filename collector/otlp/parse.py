"""OTLP request bodies (protobuf or OTLP/JSON) -> OTLP request messages.

A body that is not a valid request raises :class:`DecodeError` (nothing of it is kept). OTLP/JSON
carries ids in hex (protobuf's JSON mapping expects base64): they are converted before the
message is built, and an id that is not hex becomes one byte that validation then rejects.
Pure functions, no I/O; what the messages decode to is collector/otlp/decode.py.
"""

from __future__ import annotations

import base64
import json
from typing import Any, TypeVar

from google.protobuf import json_format
from google.protobuf.message import DecodeError as ProtobufDecodeError
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest


class DecodeError(ValueError):
    """The request body is not a valid OTLP message; nothing of it can be kept."""


def parse_traces_protobuf(data: bytes) -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    try:
        request.ParseFromString(data)
    except (ProtobufDecodeError, ValueError) as exc:
        raise DecodeError(f"body is not a valid ExportTraceServiceRequest: {exc}") from exc
    return request


def parse_logs_protobuf(data: bytes) -> ExportLogsServiceRequest:
    request = ExportLogsServiceRequest()
    try:
        request.ParseFromString(data)
    except (ProtobufDecodeError, ValueError) as exc:
        raise DecodeError(f"body is not a valid ExportLogsServiceRequest: {exc}") from exc
    return request


def parse_traces_json(data: bytes | bytearray) -> ExportTraceServiceRequest:
    """OTLP/JSON: hex ids (not base64), camelCase or snake_case keys, unknown fields ignored."""
    obj = _load_json(data)
    for rs in _items(obj, "resourceSpans", "resource_spans"):
        for ss in _items(rs, "scopeSpans", "scope_spans"):
            for span in _items(ss, "spans"):
                _hex_ids_to_base64(span, ("traceId", "trace_id"), ("spanId", "span_id"))
                _hex_ids_to_base64(span, ("parentSpanId", "parent_span_id"))
                for link in _items(span, "links"):
                    _hex_ids_to_base64(link, ("traceId", "trace_id"), ("spanId", "span_id"))
    return _parse_dict(obj, ExportTraceServiceRequest())


def parse_logs_json(data: bytes | bytearray) -> ExportLogsServiceRequest:
    obj = _load_json(data)
    for rl in _items(obj, "resourceLogs", "resource_logs"):
        for sl in _items(rl, "scopeLogs", "scope_logs"):
            for record in _items(sl, "logRecords", "log_records"):
                _hex_ids_to_base64(record, ("traceId", "trace_id"), ("spanId", "span_id"))
    return _parse_dict(obj, ExportLogsServiceRequest())


def _load_json(data: bytes | bytearray) -> dict[str, Any]:
    try:
        obj = json.loads(data)
    except RecursionError as exc:
        raise DecodeError("body is not usable JSON: nested too deeply") from exc
    except (UnicodeDecodeError, ValueError) as exc:
        raise DecodeError(f"body is not valid JSON: {exc}") from exc
    if not isinstance(obj, dict):
        raise DecodeError("body is not a JSON object")
    return obj


_M = TypeVar("_M", ExportTraceServiceRequest, ExportLogsServiceRequest)


def _parse_dict(obj: dict[str, Any], message: _M) -> _M:
    name = message.DESCRIPTOR.name
    try:
        json_format.ParseDict(obj, message, ignore_unknown_fields=True)
    except RecursionError as exc:
        raise DecodeError(f"body is not a usable OTLP/JSON {name}: nested too deeply") from exc
    except (json_format.ParseError, ValueError, TypeError, ArithmeticError) as exc:
        # ArithmeticError: Infinity (accepted by json.loads) in an integer or enum field
        raise DecodeError(f"body is not a valid OTLP/JSON {name}: {exc}") from exc
    except SystemError as exc:
        # upb's field lookup raises this for a key with a lone surrogate (its UnicodeEncodeError
        # escapes as "returned a result with an exception set")
        raise DecodeError(
            f"body is not a valid OTLP/JSON {name}: a key is not valid UTF-8"
        ) from exc
    return message


def _items(obj: Any, *keys: str) -> list[Any]:
    if not isinstance(obj, dict):
        return []
    for key in keys:
        value = obj.get(key)
        if isinstance(value, list):
            return value
    return []


# An id that is not hex becomes this one byte, which validation then rejects (bad length).
_INVALID_ID_B64 = base64.b64encode(b"\xff").decode("ascii")


def _hex_ids_to_base64(obj: Any, *aliases: tuple[str, ...]) -> None:
    # json_format would read the hex digits as base64 and yield garbage ids of the wrong length.
    if not isinstance(obj, dict):
        return
    for names in aliases:
        for key in names:
            value = obj.get(key)
            if isinstance(value, str):
                try:
                    raw = bytes.fromhex(value)
                except ValueError:
                    obj[key] = _INVALID_ID_B64
                else:
                    obj[key] = base64.b64encode(raw).decode("ascii")
