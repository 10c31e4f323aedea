"""The OTLP write-back's signals and ids: --export-signals, per-signal endpoints, a target that
does not implement logs (Phoenix), span ids unique across databases, spans inside the trace."""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, select

from tests.collector.export.helpers import add_conversation, add_evaluation, migrated_engine
from tests.collector.export.sink import GrpcSink, HttpSink, attrs
from toolscore.collector.configuration import ConfigError
from toolscore.collector.export.otlp import EvaluationEmitter, create_exporters
from toolscore.collector.export.probe import SignalSupport
from toolscore.collector.export.settings import ExportSettings, resolve_export_settings
from toolscore.collector.export.worker import export_pass
from toolscore.storage.history import outbox as exports
from toolscore.storage.history.instance import instance_id
from toolscore.storage.records import SpanRecord
from toolscore.storage.telemetry.spans import store_spans

ROOT = "00f067aa0ba902b7"


@pytest.fixture
def engine(db_url: str) -> Iterator[Engine]:
    engine = migrated_engine(db_url)
    yield engine
    engine.dispose()


def _settings(endpoint: str, **kw: object) -> ExportSettings:
    kw.setdefault("protocol", None)
    settings = resolve_export_settings(
        endpoint=endpoint,
        timeout_s=2.0,
        environ={},
        initial_backoff_s=30.0,
        **kw,  # type: ignore[arg-type]
    )
    assert settings is not None
    return settings


def _run(engine: Engine, settings: ExportSettings, support: SignalSupport | None = None):  # type: ignore[no-untyped-def]
    emitter = EvaluationEmitter(*create_exporters(settings), version="test")
    try:
        return export_pass(engine, emitter, settings, support=support)
    finally:
        emitter.shutdown()


def _outbox(engine: Engine) -> list[dict[str, object]]:
    with engine.connect() as conn:
        return [dict(r) for r in conn.execute(select(exports.evaluation_exports)).mappings()]


# --- settings ------------------------------------------------------------------------------


def test_per_signal_endpoints_are_used_as_is_and_win_over_the_base() -> None:
    env = {
        "TOOLSCORE_EXPORT_ENDPOINT": "http://base:4318",
        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://phoenix:6006/v1/traces",
        "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT": "http://loki:3100/otlp/v1/logs",
    }
    s = resolve_export_settings(endpoint=None, protocol=None, environ=env)
    assert s is not None
    assert (s.traces_endpoint, s.logs_endpoint) == (
        "http://phoenix:6006/v1/traces",  # no /v1/traces appended again
        "http://loki:3100/otlp/v1/logs",
    )
    only_traces = {k: v for k, v in env.items() if k != "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT"}
    s = resolve_export_settings(endpoint=None, protocol=None, environ=only_traces)
    assert s is not None and s.logs_endpoint == "http://base:4318/v1/logs"


def test_per_signal_variables_alone_never_turn_the_write_back_on_but_toolscore_s_do() -> None:
    agent_env = {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}
    assert resolve_export_settings(endpoint=None, protocol=None, environ=agent_env) is None
    own = {"TOOLSCORE_EXPORT_TRACES_ENDPOINT": "http://phoenix:4317"}
    s = resolve_export_settings(endpoint=None, protocol=None, environ=own)
    assert s is not None
    # no logs endpoint anywhere: only spans are sent
    assert (s.signals, s.traces_endpoint) == (("traces",), "http://phoenix:4317")


def test_through_serve_s_options_too_only_toolscore_s_own_variables_turn_it_on() -> None:
    from toolscore.collector.cli import build_parser
    from toolscore.collector.serve_config import load_serve_config

    args = build_parser().parse_args(["serve"])
    agent_env = {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4317"}
    assert load_serve_config(args, agent_env).export is None
    env = {**agent_env, "TOOLSCORE_EXPORT_LOGS_ENDPOINT": "http://loki:4317"}
    export = load_serve_config(args, env).export
    assert export is not None
    assert (export.traces_endpoint, export.logs_endpoint) == (
        "http://127.0.0.1:4317",
        "http://loki:4317",
    )


def test_export_signals_and_per_signal_protocols() -> None:
    env = {
        "TOOLSCORE_EXPORT_ENDPOINT": "http://sink:4317",
        "TOOLSCORE_EXPORT_SIGNALS": "traces",
        "OTEL_EXPORTER_OTLP_LOGS_PROTOCOL": "http/protobuf",
    }
    s = resolve_export_settings(endpoint=None, protocol=None, environ=env)
    assert s is not None and s.signals == ("traces",)
    assert (s.protocol_of("traces"), s.protocol_of("logs")) == ("grpc", "http/protobuf")
    assert s.logs_endpoint == "http://sink:4317/v1/logs"
    # the flag beats every variable, for both signals
    s = resolve_export_settings(endpoint=None, protocol="grpc", signals=("logs",), environ=env)
    assert s is not None and s.signals == ("logs",) and s.protocol_of("logs") == "grpc"
    with pytest.raises(ConfigError, match="--export-signals / TOOLSCORE_EXPORT_SIGNALS: expected"):
        resolve_export_settings(
            endpoint=None, protocol=None, environ={**env, "TOOLSCORE_EXPORT_SIGNALS": "metrics"}
        )
    with pytest.raises(ConfigError, match="OTEL_EXPORTER_OTLP_LOGS_PROTOCOL: expected grpc"):
        resolve_export_settings(
            endpoint=None,
            protocol=None,
            environ={**env, "OTEL_EXPORTER_OTLP_LOGS_PROTOCOL": "http/json"},
        )


# --- a target without logs -----------------------------------------------------------------


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_a_target_without_logs_is_reported_once_and_its_logs_skipped(
    engine: Engine, protocol: str, caplog: pytest.LogCaptureFixture
) -> None:
    if protocol == "grpc":
        sink: GrpcSink | HttpSink = GrpcSink(logs=False).start()
    else:
        sink = HttpSink(status={"/v1/logs": 405}).start()
    try:
        add_conversation(engine, "conv-p")
        for metric in ("a", "b"):
            add_evaluation(engine, "conv-p", metric)
        settings = _settings(sink.endpoint, protocol=protocol)
        support = SignalSupport(settings)
        with caplog.at_level(logging.WARNING, logger="toolscore.collector.export.probe"):
            first = _run(engine, settings, support)
            add_evaluation(engine, "conv-p", "c")
            second = _run(engine, settings, support)
        assert (first.exported, first.failed, dict(first.skipped)) == (2, 0, {"logs": 2})
        assert (second.exported, second.failed, dict(second.skipped)) == (1, 0, {"logs": 1})
        warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert len(warnings) == 1, warnings
        assert "does not implement OTLP logs" in warnings[0]
        rows = _outbox(engine)
        assert all(r["exported_at"] is not None and r["skipped_signals"] == "logs" for r in rows)
        assert all(r["spans_exported_at"] is not None and r["attempts"] == 0 for r in rows)
        assert len(sink.received.spans()) == 3 and sink.received.log_records() == []
    finally:
        sink.stop()


def test_a_wrong_url_is_retried_not_skipped(
    engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    sink = HttpSink(status={"/v1/logs": 404, "/v1/traces": 404}).start()
    try:
        add_conversation(engine, "conv-w")
        add_evaluation(engine, "conv-w")
        settings = _settings(sink.endpoint, protocol="http/protobuf")
        with caplog.at_level(logging.WARNING, logger="toolscore.collector.export.probe"):
            result = _run(engine, settings)
        assert (result.exported, result.failed, dict(result.skipped)) == (0, 1, {})
        [row] = _outbox(engine)
        assert row["exported_at"] is None and row["skipped_signals"] is None
        assert any("check the endpoint" in r.getMessage() for r in caplog.records)
    finally:
        sink.stop()


def test_traces_only_sends_no_log_records(engine: Engine) -> None:
    sink = GrpcSink().start()
    try:
        add_conversation(engine, "conv-t")
        add_evaluation(engine, "conv-t")
        result = _run(engine, _settings(sink.endpoint, signals=("traces",)))
        assert result.exported == 1
        assert len(sink.received.spans()) == 1 and sink.received.log_records() == []
        [row] = _outbox(engine)
        assert row["exported_at"] is not None and row["logs_exported_at"] is None
    finally:
        sink.stop()


# --- ids and placement -------------------------------------------------------------------


def test_span_ids_differ_between_databases_and_repeat_on_resend(tmp_path: Path) -> None:
    sink = GrpcSink().start()
    engines = [migrated_engine(f"sqlite:///{tmp_path / f'db{n}.sqlite'}") for n in (1, 2)]
    try:
        for engine in engines:
            add_conversation(engine, "conv-same")
            assert add_evaluation(engine, "conv-same") == 1  # the same row id in both
            _run(engine, _settings(sink.endpoint))
        with engines[0].begin() as conn:  # a lost acknowledgement: send the first one again
            conn.execute(
                exports.evaluation_exports.update().values(
                    exported_at=None,
                    spans_exported_at=None,
                    next_attempt_at=dt.datetime(2000, 1, 1, tzinfo=dt.UTC),
                )
            )
        _run(engines[0], _settings(sink.endpoint))
        ids = [span.span_id.hex() for _r, _s, span in sink.received.spans()]
        assert len(ids) == 3 and ids[0] == ids[2] and ids[0] != ids[1]
        instances = set()
        for engine in engines:
            with engine.connect() as conn:
                instances.add(instance_id(conn))
        assert len(instances) == 2 and all(len(i) == 32 for i in instances)
    finally:
        sink.stop()
        for engine in engines:
            engine.dispose()


def _span(
    span_id: str, parent: str | None, start: int, end: int, resource: dict[str, object]
) -> SpanRecord:
    return SpanRecord(
        trace_id="ab" * 16,
        span_id=span_id,
        parent_span_id=parent,
        name="agent" if parent is None else "tool",
        kind=1,
        start_ns=start,
        end_ns=end,
        attributes={},
        resource_attributes=resource,
        scope_name="agent",
    )


def test_the_evaluation_span_stays_inside_the_root_and_in_the_trace_s_project(
    engine: Engine,
) -> None:
    t0 = 1_800_000_000_000_000_000
    resource = {"service.name": "weather-agent", "openinference.project.name": "weather"}
    with engine.begin() as conn:
        store_spans(
            conn,
            [
                _span(ROOT, None, t0, t0 + 7_000_000, resource),
                _span("1" * 16, ROOT, t0 + 1, t0 + 2, resource),
            ],
            t0,
        )
    add_conversation(engine, "conv-b", trace_id="ab" * 16)
    add_evaluation(engine, "conv-b", trace_id="ab" * 16, created_at=dt.datetime.now(dt.UTC))
    sink = GrpcSink().start()
    try:
        _run(engine, _settings(sink.endpoint))
        [(res, _scope, span)] = sink.received.spans()
    finally:
        sink.stop()
    assert span.parent_span_id.hex() == ROOT
    assert t0 <= span.start_time_unix_nano <= span.end_time_unix_nano <= t0 + 7_000_000
    assert res["openinference.project.name"] == "weather"
    assert res["service.name"] == "toolscore"
    assert attrs(span.attributes)["openinference.span.kind"] == "EVALUATOR"
