"""Write-back headers: from a file (so secrets need not be on the command line), from the
standard OTLP variables (generic and per signal), from flags; and never shown in an error.

End to end: ``serve``'s own parser and ``settings_from`` build the settings, the real SDK
exporters send one evaluation to a real OTLP sink, and the sink sees the headers per signal.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine

from tests.collector.export.helpers import add_conversation, add_evaluation
from tests.collector.export.sink import GrpcSink, HttpSink
from toolscore.collector.cli import build_parser
from toolscore.collector.configuration import ConfigError
from toolscore.collector.export.headers import ENV_HEADERS_FILE, read_headers_file
from toolscore.collector.export.options import settings_from
from toolscore.collector.export.otlp import EvaluationEmitter, create_exporters
from toolscore.collector.export.settings import ExportSettings, resolve_export_settings
from toolscore.collector.export.worker import export_pass
from toolscore.storage.plumbing.engine import create_engine

SECRET = "tok-9f8e7d6c5b4a"


def serve_args(*argv: str) -> argparse.Namespace:
    return build_parser(only="toolscore.collector.commands.serve").parse_args(["serve", *argv])


def settings(argv: list[str], environ: dict[str, str]) -> ExportSettings:
    resolved, _ = settings_from(serve_args(*argv), environ)
    assert resolved is not None
    return resolved


@pytest.fixture
def headers_file(tmp_path: Path) -> Path:
    path = tmp_path / "export-headers"
    path.write_text(
        "# write-back credentials\n"
        "\n"
        f"Authorization = Bearer {SECRET}\n"  # literal: the space stays, no %20 needed
        "x-tenant=acme%20corp\n"  # literal: not URL-decoded
        "x-query=a=b\n"  # only the first '=' separates
    )
    return path


def test_a_headers_file_holds_key_value_lines_taken_literally(headers_file: Path) -> None:
    assert read_headers_file(headers_file) == (
        ("authorization", f"Bearer {SECRET}"),
        ("x-tenant", "acme%20corp"),
        ("x-query", "a=b"),
    )


def test_the_file_comes_from_the_flag_else_the_environment(
    headers_file: Path, tmp_path: Path
) -> None:
    endpoint = ["--export-endpoint", "http://127.0.0.1:4317"]
    by_env = settings(endpoint, {ENV_HEADERS_FILE: str(headers_file)})
    assert ("authorization", f"Bearer {SECRET}") in by_env.headers
    other = tmp_path / "other"
    other.write_text("authorization=from-flag-file\n")
    by_flag = settings(
        [*endpoint, "--export-headers-file", str(other)], {ENV_HEADERS_FILE: str(headers_file)}
    )
    assert by_flag.headers == (("authorization", "from-flag-file"),)


def test_flags_beat_the_file_which_beats_the_environment(headers_file: Path) -> None:
    environ = {
        "TOOLSCORE_EXPORT_ENDPOINT": "http://127.0.0.1:4317",
        "OTEL_EXPORTER_OTLP_HEADERS": "authorization=from-env,x-env=1,x-tenant=env",
    }
    s = settings(
        ["--export-headers-file", str(headers_file), "--export-header", "x-tenant=flag"], environ
    )
    assert dict(s.headers) == {
        "authorization": f"Bearer {SECRET}",  # file over environment
        "x-env": "1",  # environment only
        "x-tenant": "flag",  # flag over file over environment
        "x-query": "a=b",
    }
    assert s.logs_headers == s.headers


def test_per_signal_variables_replace_the_generic_list_for_their_signal() -> None:
    environ = {
        "TOOLSCORE_EXPORT_ENDPOINT": "http://127.0.0.1:4317",
        "OTEL_EXPORTER_OTLP_HEADERS": "x-generic=g",
        "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "x-signal=traces",
    }
    s = settings(["--export-header", "x-flag=f"], environ)
    assert dict(s.headers) == {"x-signal": "traces", "x-flag": "f"}
    assert dict(s.logs_headers) == {"x-generic": "g", "x-flag": "f"}
    s2 = settings([], {**environ, "OTEL_EXPORTER_OTLP_LOGS_HEADERS": "x-signal=logs"})
    assert dict(s2.logs_headers) == {"x-signal": "logs"}


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (f"Bearer {SECRET}\n", r"export-headers:1\): expected key=value$"),
        (f"# ok\nauth orization={SECRET}\n", r"export-headers:2\): the key must be a header name"),
        (f"authorization=Bearer\x01{SECRET}\n", "'authorization' .*control characters"),
    ],
    ids=["no-equals", "bad-key", "control-character"],
)
def test_a_bad_file_line_is_named_by_line_without_its_value(
    tmp_path: Path, content: str, message: str
) -> None:
    path = tmp_path / "export-headers"
    path.write_text(content)
    with pytest.raises(ConfigError, match=message) as caught:
        settings(["--export-endpoint", "http://h:4317", "--export-headers-file", str(path)], {})
    assert SECRET not in str(caught.value)


def test_a_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="missing: No such file or directory"):
        settings(
            [],
            {
                "TOOLSCORE_EXPORT_ENDPOINT": "http://h:4317",
                ENV_HEADERS_FILE: str(tmp_path / "missing"),
            },
        )


@pytest.mark.parametrize(
    "environ",
    [
        {"OTEL_EXPORTER_OTLP_HEADERS": f"Bearer%20{SECRET}"},
        {"OTEL_EXPORTER_OTLP_TRACES_HEADERS": f"authorization=Bearer%0A{SECRET}"},
    ],
)
def test_bad_environment_headers_are_rejected_without_their_value(
    environ: dict[str, str],
) -> None:
    with pytest.raises(ConfigError, match="invalid OTLP header") as caught:
        resolve_export_settings(endpoint="http://h:4317", protocol=None, environ=environ)
    assert SECRET not in str(caught.value)


def test_settings_repr_hides_header_values(headers_file: Path) -> None:
    s = settings(
        ["--export-endpoint", "http://h:4317", "--export-headers-file", str(headers_file)], {}
    )
    assert SECRET not in repr(s) and SECRET not in str(s)


def test_serve_reports_a_bad_headers_file_without_the_secret(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    from toolscore.collector.cli import main

    path = tmp_path / "export-headers"
    path.write_text(f"Bearer {SECRET}\n")
    argv = ["serve", "--db", f"sqlite:///{tmp_path / 'db.sqlite'}", "--grpc", "off"]
    argv += ["--http", "127.0.0.1:0", "--export-endpoint", "http://127.0.0.1:1"]
    status = main([*argv, "--export-headers-file", str(path)])
    out, err = capfd.readouterr()
    assert status != 0
    assert "export-headers:1" in err and SECRET not in out + err


# -- end to end: the real exporters send what the settings say, per signal ------------------------


@pytest.fixture
def engine(migrated_sqlite_url: str) -> Iterator[Engine]:
    eng = create_engine(migrated_sqlite_url)
    add_conversation(eng, "conv-1")
    add_evaluation(eng, "conv-1", "tool_call_accuracy", 1.0)
    yield eng
    eng.dispose()


def _export_once(engine: Engine, s: ExportSettings) -> None:
    spans, logs = create_exporters(s)
    emitter = EvaluationEmitter(spans, logs, version="test")
    try:
        assert export_pass(engine, emitter, s).exported == 1
    finally:
        emitter.shutdown()


ENV = {
    "OTEL_EXPORTER_OTLP_HEADERS": "x-generic=g",
    "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "x-signal=traces",
    "OTEL_EXPORTER_OTLP_LOGS_HEADERS": "x-signal=logs",
}


def test_http_exporters_send_each_signal_its_headers(engine: Engine, headers_file: Path) -> None:
    sink = HttpSink().start()
    try:
        s = settings(
            [
                *("--export-endpoint", sink.endpoint, "--export-protocol", "http/protobuf"),
                *("--export-headers-file", str(headers_file), "--export-timeout", "5"),
            ],
            ENV,
        )
        _export_once(engine, s)
    finally:
        sink.stop()
    by_path = dict(zip(sink.paths, sink.received.metadata, strict=True))
    assert set(by_path) == {"/v1/traces", "/v1/logs"}
    for path, signal in (("/v1/traces", "traces"), ("/v1/logs", "logs")):
        got = by_path[path]
        assert got["authorization"] == f"Bearer {SECRET}" and got["x-signal"] == signal
        assert "x-generic" not in got, "a per-signal variable replaces the generic list"


def test_grpc_exporters_send_each_signal_its_headers(engine: Engine, headers_file: Path) -> None:
    sink = GrpcSink().start()
    try:
        s = settings(
            [
                *("--export-endpoint", sink.endpoint, "--export-timeout", "5"),
                *("--export-headers-file", str(headers_file)),
            ],
            {k: v for k, v in ENV.items() if "LOGS" not in k},
        )
        _export_once(engine, s)
    finally:
        sink.stop()
    got = sink.received.metadata
    assert len(got) == 2 and all(m["authorization"] == f"Bearer {SECRET}" for m in got)
    # the trace request got the per-signal list, the log request the generic one
    assert sorted((m.get("x-signal", "-"), m.get("x-generic", "-")) for m in got) == [
        ("-", "g"),
        ("traces", "-"),
    ]
