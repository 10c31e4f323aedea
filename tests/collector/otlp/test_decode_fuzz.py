"""Fuzzing both decoders (protobuf and OTLP/JSON, traces and logs), bounded.

Whatever the body, parsing + decoding gives either a decoded result or a DecodeError (answered
400) whose status can be serialised; never another exception. And what decodes is storable: no
time beyond int64, no id-naming attribute with NUL or over the id limit.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from tests.otlp_fuzz import json_bodies, protobuf_bodies
from toolscore.collector.errors import rpc_status_bytes, status_for
from toolscore.collector.otlp.decode import (
    DecodedLogs,
    DecodedTraces,
    DecodeError,
    DecodeLimits,
    decode_logs,
    decode_traces,
    parse_logs_json,
    parse_logs_protobuf,
    parse_traces_json,
    parse_traces_protobuf,
)
from toolscore.collector.otlp.sanitize import MAX_INT64

LIMITS = DecodeLimits()
FUZZ = settings(
    max_examples=200,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def _decode(parse: Callable[[bytes], Any], body: bytes) -> DecodedTraces | DecodedLogs | None:
    try:
        request = parse(body)
        if parse in (parse_traces_protobuf, parse_traces_json):
            return decode_traces(request, LIMITS)
        return decode_logs(request, LIMITS)
    except DecodeError as exc:
        status = status_for(exc)
        assert status.http_status == 400
        assert rpc_status_bytes(status)  # the error answer itself can be built
        return None


def _assert_storable(decoded: DecodedTraces | DecodedLogs | None) -> None:
    if isinstance(decoded, DecodedTraces):
        for span in decoded.spans:
            assert span.start_ns <= MAX_INT64 and span.end_ns <= MAX_INT64
            for attrs in (span.attributes, span.resource_attributes):
                for key in LIMITS.key_attributes:
                    value = attrs.get(key)
                    if isinstance(value, str):
                        assert "\x00" not in value
                        assert len(value.strip().encode()) <= LIMITS.max_key_bytes
    elif isinstance(decoded, DecodedLogs):
        for record in decoded.records:
            assert record.time_ns <= MAX_INT64 and record.observed_time_ns <= MAX_INT64


@FUZZ
@given(protobuf_bodies("traces"))
def test_protobuf_traces_decode_or_raise_decode_error(body: bytes) -> None:
    _assert_storable(_decode(parse_traces_protobuf, body))


@FUZZ
@given(protobuf_bodies("logs"))
def test_protobuf_logs_decode_or_raise_decode_error(body: bytes) -> None:
    _assert_storable(_decode(parse_logs_protobuf, body))


@pytest.mark.slow  # 4-11 s on this (shared) machine
@FUZZ
@given(json_bodies("traces"))
def test_json_traces_decode_or_raise_decode_error(body: bytes) -> None:
    _assert_storable(_decode(parse_traces_json, body))


@FUZZ
@given(json_bodies("logs"))
def test_json_logs_decode_or_raise_decode_error(body: bytes) -> None:
    _assert_storable(_decode(parse_logs_json, body))
