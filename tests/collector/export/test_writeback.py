"""Evaluations written back to a real OTLP sink: spans and gen_ai.evaluation.result records."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, select

from tests.collector.export.helpers import add_conversation, add_evaluation
from tests.collector.export.sink import GrpcSink, HttpSink, attrs
from toolscore.collector.configuration import ConfigError
from toolscore.collector.export import is_toolscore_evaluation
from toolscore.collector.export.otlp import EvaluationEmitter, create_exporters
from toolscore.collector.export.settings import (
    ExportSettings,
    resolve_export_settings,
)
from toolscore.collector.export.worker import export_pass
from toolscore.storage.history import outbox as exports
from toolscore.storage.plumbing.engine import create_engine
from toolscore.storage.records import SpanRecord

ROOT = "00f067aa0ba902b7"


@pytest.fixture
def engine(migrated_db_url: str) -> Iterator[Engine]:
    engine = create_engine(migrated_db_url)
    yield engine
    engine.dispose()


@pytest.fixture
def grpc_sink() -> Iterator[GrpcSink]:
    sink = GrpcSink().start()
    yield sink
    sink.stop()


def _settings(endpoint: str, **kw: object) -> ExportSettings:
    settings = resolve_export_settings(
        endpoint=endpoint,
        protocol=kw.pop("protocol", None),  # type: ignore[arg-type]
        headers=("authorization=Bearer%20s3cret",),
        compression=kw.pop("compression", None),  # type: ignore[arg-type]
        timeout_s=1.0,
        environ={},
        initial_backoff_s=30.0,
        max_backoff_s=60.0,
    )
    assert settings is not None
    return settings


def _emitter(settings: ExportSettings) -> EvaluationEmitter:
    spans, logs = create_exporters(settings)
    return EvaluationEmitter(spans, logs, version="test")


def _outbox(engine: Engine) -> list[dict[str, object]]:
    with engine.connect() as conn:
        rows = conn.execute(select(exports.evaluation_exports)).mappings().all()
    return [dict(r) for r in rows]


def test_each_evaluation_becomes_a_child_span_of_the_root_and_a_result_event(
    engine: Engine, grpc_sink: GrpcSink
) -> None:
    add_conversation(engine, "conv-1")
    good = add_evaluation(engine, "conv-1", "tool_call_accuracy", 1.0, root_span_id=ROOT)
    bad = add_evaluation(
        engine, "conv-1", "tool_call_f1", 0.5, expectation_version=3, expected_count=3
    )
    settings = _settings(grpc_sink.endpoint)
    emitter = _emitter(settings)
    try:
        result = export_pass(engine, emitter, settings)
    finally:
        emitter.shutdown()
    assert (result.enqueued, result.exported, result.failed) == (2, 2, 0)

    from tests.collector.export.helpers import trace_id_for

    spans = {
        attrs(s.attributes)["gen_ai.evaluation.name"]: (r, scope, s)
        for r, scope, s in grpc_sink.received.spans()
    }
    assert set(spans) == {"tool_call_accuracy", "tool_call_f1"}
    resource, scope, span = spans["tool_call_f1"]
    assert span.trace_id.hex() == trace_id_for("conv-1")
    assert span.parent_span_id.hex() == ROOT
    assert span.name == "evaluation tool_call_f1"
    assert resource["service.name"] == "toolscore" and scope == "toolscore"
    a = attrs(span.attributes)
    assert a["gen_ai.evaluation.score.value"] == 0.5
    assert a["gen_ai.evaluation.score.label"] == "fail"  # default threshold 1.0
    assert "2 predicted vs 3 expected" in a["gen_ai.evaluation.explanation"]
    assert a["toolscore.expectation.id"] == "weather"
    assert a["toolscore.expectation.version"] == 3
    assert a["toolscore.conversation.id"] == "conv-1"
    assert a["toolscore.evaluation.id"] == bad
    assert (
        a["toolscore.tool_calls.predicted_count"],
        a["toolscore.tool_calls.expected_count"],
    ) == (2, 3)
    assert (
        attrs(spans["tool_call_accuracy"][2].attributes)["gen_ai.evaluation.score.label"] == "pass"
    )
    assert attrs(spans["tool_call_accuracy"][2].attributes)["toolscore.evaluation.id"] == good

    records = grpc_sink.received.log_records()
    assert len(records) == 2
    for _res, _scope, rec in records:
        assert rec.event_name == "gen_ai.evaluation.result"
        assert rec.trace_id.hex() == trace_id_for("conv-1")
        assert rec.span_id.hex() == ROOT
        name = attrs(rec.attributes)["gen_ai.evaluation.name"]
        span_attrs = attrs(spans[name][2].attributes)
        # the span alone is marked for OpenInference readers (Phoenix's span kind)
        assert span_attrs.pop("openinference.span.kind") == "EVALUATOR"
        assert attrs(rec.attributes) == span_attrs
    # headers reach the sink (auth); every outbox row is marked exported
    assert all(m.get("authorization") == "Bearer s3cret" for m in grpc_sink.received.metadata)
    assert all(r["exported_at"] is not None for r in _outbox(engine))


def test_nothing_is_sent_twice_and_new_evaluations_are_picked_up(
    engine: Engine, grpc_sink: GrpcSink
) -> None:
    add_conversation(engine, "conv-1")
    add_evaluation(engine, "conv-1")
    settings = _settings(grpc_sink.endpoint)
    emitter = _emitter(settings)
    try:
        assert export_pass(engine, emitter, settings).exported == 1
        assert export_pass(engine, emitter, settings).exported == 0
        add_evaluation(engine, "conv-1", revision=2, score=0.0)
        assert export_pass(engine, emitter, settings).exported == 1
    finally:
        emitter.shutdown()
    assert len(grpc_sink.received.spans()) == 2
    assert len(grpc_sink.received.log_records()) == 2


def test_http_protobuf_with_gzip(engine: Engine) -> None:
    sink = HttpSink().start()
    try:
        add_conversation(engine, "conv-h")
        add_evaluation(engine, "conv-h", score=0.25)
        settings = _settings(sink.endpoint, protocol="http/protobuf", compression="gzip")
        emitter = _emitter(settings)
        try:
            assert export_pass(engine, emitter, settings).exported == 1
        finally:
            emitter.shutdown()
        assert sorted(sink.paths) == ["/v1/logs", "/v1/traces"]
        assert all(m.get("content-encoding") == "gzip" for m in sink.received.metadata)
        [(_r, _s, span)] = sink.received.spans()
        assert attrs(span.attributes)["gen_ai.evaluation.score.value"] == 0.25
        assert len(sink.received.log_records()) == 1
    finally:
        sink.stop()


def test_sink_outage_backs_off_then_delivers_everything_once(engine: Engine) -> None:
    sink = GrpcSink().start()
    port = sink.port
    sink.stop()  # the backend is down
    add_conversation(engine, "conv-o")
    ids = [add_evaluation(engine, "conv-o", m, 0.5) for m in ("a", "b", "c")]
    clock = [dt.datetime(2026, 11, 3, tzinfo=dt.UTC)]
    settings = _settings(f"http://127.0.0.1:{port}")
    emitter = _emitter(settings)
    try:
        failed = export_pass(engine, emitter, settings, now=lambda: clock[0])
        assert (failed.exported, failed.failed) == (0, 3)
        rows = _outbox(engine)
        assert all(r["attempts"] == 1 and r["exported_at"] is None for r in rows)
        assert all("span export failed" in str(r["last_error"]) for r in rows)

        sink.port = port
        sink.start()  # back up, same port
        # still inside the backoff window: nothing is attempted
        assert export_pass(engine, emitter, settings, now=lambda: clock[0]).exported == 0
        assert sink.received.spans() == []
        # after the backoff it is tried again; a gRPC channel that was refused may need one more
        # attempt to reconnect, which the outbox simply retries after the next backoff
        exported = 0
        for _ in range(5):
            clock[0] += dt.timedelta(seconds=80)  # past the longest backoff (60 s + 20 %)
            exported += export_pass(engine, emitter, settings, now=lambda: clock[0]).exported
            if exported == 3:
                break
        assert exported == 3
        assert export_pass(engine, emitter, settings, now=lambda: clock[0]).exported == 0
    finally:
        emitter.shutdown()
        sink.stop()
    got = sorted(
        attrs(s.attributes)["toolscore.evaluation.id"] for _r, _s, s in sink.received.spans()
    )
    assert got == ids
    assert len(sink.received.log_records()) == 3


def test_thresholds_in_the_database_decide_the_label(engine: Engine, grpc_sink: GrpcSink) -> None:
    with engine.begin() as conn:
        exports.save_thresholds(conn, {"tool_call_f1": 0.5})
    add_conversation(engine, "conv-t")
    add_evaluation(engine, "conv-t", "f1_loose", 0.5, metric_type="tool_call_f1")
    add_evaluation(engine, "conv-t", "tool_call_accuracy", 0.99)
    settings = _settings(grpc_sink.endpoint)
    emitter = _emitter(settings)
    try:
        export_pass(engine, emitter, settings)
    finally:
        emitter.shutdown()
    labels = {
        attrs(s.attributes)["gen_ai.evaluation.name"]: attrs(s.attributes)[
            "gen_ai.evaluation.score.label"
        ]
        for _r, _s, s in grpc_sink.received.spans()
    }
    assert labels == {"f1_loose": "pass", "tool_call_accuracy": "fail"}


def test_unscored_evaluation_is_labelled_error_without_a_value(
    engine: Engine, grpc_sink: GrpcSink
) -> None:
    add_conversation(engine, "conv-e")
    add_evaluation(engine, "conv-e", score=None, error="reference is empty", root_span_id=None)
    settings = _settings(grpc_sink.endpoint)
    emitter = _emitter(settings)
    try:
        export_pass(engine, emitter, settings)
    finally:
        emitter.shutdown()
    [(_r, _s, span)] = grpc_sink.received.spans()
    a = attrs(span.attributes)
    assert a["gen_ai.evaluation.score.label"] == "error"
    assert "gen_ai.evaluation.score.value" not in a
    assert a["gen_ai.evaluation.explanation"].startswith("not scored: reference is empty")
    assert span.parent_span_id == b""  # no root span known: a root in the conversation's trace
    [(_r, _s, rec)] = grpc_sink.received.log_records()
    assert rec.span_id == span.span_id


def test_looped_back_evaluation_spans_are_recognised(grpc_sink: GrpcSink, engine: Engine) -> None:
    add_conversation(engine, "conv-l")
    add_evaluation(engine, "conv-l")
    settings = _settings(grpc_sink.endpoint)
    emitter = _emitter(settings)
    try:
        export_pass(engine, emitter, settings)
    finally:
        emitter.shutdown()
    [(resource, scope, span)] = grpc_sink.received.spans()

    def record(a: dict[str, object], res: dict[str, object], scope_name: str) -> SpanRecord:
        return SpanRecord(
            trace_id=span.trace_id.hex(),
            span_id=span.span_id.hex(),
            parent_span_id=span.parent_span_id.hex(),
            name=span.name,
            kind=1,
            start_ns=1,
            end_ns=1,
            attributes=a,
            resource_attributes=res,
            scope_name=scope_name,
        )

    assert is_toolscore_evaluation(record(attrs(span.attributes), resource, scope))
    # a Collector that rewrote resource and scope still leaves the span attribute
    assert is_toolscore_evaluation(record(attrs(span.attributes), {}, ""))
    agent_span = record({"gen_ai.operation.name": "chat"}, {"service.name": "agent"}, "openai")
    assert not is_toolscore_evaluation(agent_span)


def test_resend_after_a_lost_acknowledgement_reuses_the_span_id(engine: Engine) -> None:
    add_conversation(engine, "conv-r")
    eid = add_evaluation(engine, "conv-r")
    with engine.begin() as conn:
        exports.enqueue_new(conn, dt.datetime.now(dt.UTC))
        [item] = exports.claim_batch(conn, dt.datetime.now(dt.UTC), 10, dt.timedelta(seconds=1))
    emitter = EvaluationEmitter(*create_exporters(_settings("http://127.0.0.1:9")))
    try:
        first = emitter.build_spans([item])[0]
        second = emitter.build_spans([item])[0]
    finally:
        emitter.shutdown()
    assert first.context is not None and second.context is not None
    assert first.context.span_id == second.context.span_id
    assert first.attributes is not None and first.attributes["toolscore.evaluation.id"] == eid


def test_settings_from_the_standard_environment_variables(tmp_path: Path) -> None:
    env = {
        "TOOLSCORE_EXPORT_ENDPOINT": "https://otel.example:4318",
        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
        "OTEL_EXPORTER_OTLP_HEADERS": "x-api-key=abc%3D,tenant=t1",
        "OTEL_EXPORTER_OTLP_COMPRESSION": "gzip",
        "OTEL_EXPORTER_OTLP_TIMEOUT": "2500",
    }
    s = resolve_export_settings(endpoint=None, protocol=None, environ=env)
    assert s is not None
    assert s.traces_endpoint == "https://otel.example:4318/v1/traces"
    assert s.logs_endpoint == "https://otel.example:4318/v1/logs"
    assert s.headers == (("x-api-key", "abc="), ("tenant", "t1"))
    assert (s.compression, s.timeout_s) == ("gzip", 2.5)
    # flags win over the environment
    s2 = resolve_export_settings(endpoint="http://h:4317", protocol="grpc", environ=env)
    assert s2 is not None and (s2.protocol, s2.traces_endpoint) == ("grpc", "http://h:4317")
    assert resolve_export_settings(endpoint=None, protocol=None, environ={}) is None


def test_the_agents_otel_endpoint_never_turns_the_write_back_on() -> None:
    # what the README tells users to set for their agents (toolscore's own address)
    for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        env = {name: "http://127.0.0.1:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}
        assert resolve_export_settings(endpoint=None, protocol=None, environ=env) is None
    on = resolve_export_settings(
        endpoint=None,
        protocol=None,
        environ={
            "TOOLSCORE_EXPORT_ENDPOINT": "http://sink:4318",
            "OTEL_EXPORTER_OTLP_ENDPOINT": "x",
        },
    )
    assert on is not None and on.traces_endpoint == "http://sink:4318"


@pytest.mark.parametrize(
    ("env", "message"),
    [
        (
            {"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"},
            "--export-protocol / OTEL_EXPORTER_OTLP_PROTOCOL: expected grpc or http/protobuf, "
            "got 'http/json'",
        ),
        (  # the item is not echoed: it may be a secret
            {"OTEL_EXPORTER_OTLP_HEADERS": "novalue"},
            r"invalid OTLP header \(OTEL_EXPORTER_OTLP_HEADERS, item 1\): expected key=value$",
        ),
        (
            {"OTEL_EXPORTER_OTLP_TIMEOUT": "soon"},
            "--export-timeout / OTEL_EXPORTER_OTLP_TIMEOUT: expected milliseconds, got 'soon'",
        ),
        (
            {"OTEL_EXPORTER_OTLP_COMPRESSION": "zstd"},
            "--export-compression / OTEL_EXPORTER_OTLP_COMPRESSION: expected gzip or none",
        ),
    ],
)
def test_bad_settings_are_rejected_with_the_culprit(env: dict[str, str], message: str) -> None:
    env = {"TOOLSCORE_EXPORT_ENDPOINT": "http://localhost:4317", **env}
    with pytest.raises(ConfigError, match=message):
        resolve_export_settings(endpoint=None, protocol=None, environ=env)
